# deps.sh - installs the Debian packages mpplan needs that are missing (sourced by
# quickstart.sh and test.sh). Runs apt-get only when something is missing; needs root.
MPPLAN_DEBS="build-essential autoconf automake pkg-config libglib2.0-dev libjson-glib-dev
json-glib-tools libyaml-dev libcmocka-dev libopenmpi-dev openmpi-bin libopenblas-dev python3"

mpplan_install_deps () {
  missing=
  for p in $MPPLAN_DEBS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  echo "== installing:$missing"
  if [ "$(id -u)" -ne 0 ]; then
    echo "mpplan: run as root (or install these yourself):$missing" >&2
    return 1
  fi
  apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
}
