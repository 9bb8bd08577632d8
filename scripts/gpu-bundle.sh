#!/bin/sh
# gpu-bundle.sh DIR - collect, from this Debian machine, the libraries mpplan builds against
# (GLib with GModule, json-glib, libyaml, cmocka, OpenMPI, OpenBLAS: headers, .so files,
# pkg-config files and their runtime dependencies) into DIR, plus DIR/env.sh, so that scripts/gpu-check.sh
# runs on a bare GPU image that has only a compiler, make, autotools and CUDA:
#     scripts/gpu-bundle.sh /tmp/bundle && tar czf bundle.tgz -C /tmp bundle
#     (on the GPU machine)  scripts/gpu-check.sh OUT --bundle /path/to/bundle
# Files keep their paths under DIR/root (dpkg -L of each package); env.sh sets
# PKG_CONFIG_SYSROOT_DIR / PKG_CONFIG_PATH (so -I and -L point into the bundle),
# LD_LIBRARY_PATH, PATH and OPAL_PREFIX (Open MPI relocated).
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
command -v dpkg >/dev/null || { echo "$0: needs dpkg (a Debian or Ubuntu machine)" >&2; exit 1; }
dir=$1
mkdir -p "$dir/root"
dir=$(cd "$dir" && pwd)
pkgs="libglib2.0-dev libglib2.0-0t64 libglib2.0-0 libglib2.0-dev-bin libjson-glib-dev
  libjson-glib-1.0-0 libyaml-dev libyaml-0-2 libcmocka-dev libcmocka0 libopenmpi-dev
  libopenmpi3t64 libopenmpi3 openmpi-bin openmpi-common libopenblas-dev libopenblas0
  libopenblas0-pthread libopenblas-pthread-dev libpcre2-dev libffi-dev libmount-dev
  libblkid-dev libselinux1-dev libsepol-dev zlib1g-dev"
n=0
for p in $pkgs; do
  dpkg -s "$p" >/dev/null 2>&1 || continue
  dpkg -L "$p" | while read -r f; do
    [ -f "$f" ] || [ -L "$f" ] || continue
    case "$f" in /usr/share/doc/*|/usr/share/man/*|/usr/share/locale/*) continue;; esac
    mkdir -p "$dir/root$(dirname "$f")"
    cp -a "$f" "$dir/root$f"
  done
  n=$((n + 1))
done
# Runtime dependencies of what was collected, outside the C library itself.
find "$dir/root" -name '*.so*' -type f | while read -r so; do
  ldd "$so" 2>/dev/null | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) continue;; esac
  [ -e "$dir/root$lib" ] && continue
  mkdir -p "$dir/root$(dirname "$lib")"
  cp -aL "$lib" "$dir/root$lib"
done
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
cat > "$dir/env.sh" <<ENV
# Source me: . $dir/env.sh   (written by scripts/gpu-bundle.sh on $(hostname) $(date -u +%F))
b=\$(cd "\$(dirname "\${BUNDLE_ENV:-$dir/env.sh}")" && pwd)/root
export PKG_CONFIG_SYSROOT_DIR=\$b
export PKG_CONFIG_PATH=\$b/usr/lib/$arch/pkgconfig:\$b/usr/share/pkgconfig:\$b/usr/lib/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}
export LD_LIBRARY_PATH=\$b/usr/lib/$arch:\$b/usr/lib/$arch/openblas-pthread:\$b/lib/$arch\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export LIBRARY_PATH=\$LD_LIBRARY_PATH
export PATH=\$b/usr/bin:\$PATH
export OPAL_PREFIX=\$b/usr
ENV
echo "gpu-bundle: $n packages into $dir ($(du -sh "$dir" | cut -f1)); on the GPU machine: scripts/gpu-check.sh OUT --bundle $dir"
