# tap.sh - a few lines of TAP for the shell tests (sourced). Each check prints one
# "ok N - name" or "not ok N - name" line; tap_done prints the plan and sets the status.
tap_n=0
tap_failed=0

# ok NAME COMMAND...: runs COMMAND; passes when it exits 0.
ok () {
  local name=$1; shift
  tap_n=$((tap_n + 1))
  if "$@"; then
    echo "ok $tap_n - $name"
  else
    echo "not ok $tap_n - $name"
    tap_failed=$((tap_failed + 1))
  fi
}

# todo REASON NAME COMMAND...: a check of how things must be that does not hold yet, for
# REASON: its failure is reported (TAP "# TODO", an expected failure), and once it holds
# it reports an unexpected pass, which fails the suite until the marker is removed.
todo () {
  local reason=$1 name=$2; shift 2
  tap_n=$((tap_n + 1))
  if "$@"; then
    echo "ok $tap_n - $name # TODO $reason"
  else
    echo "not ok $tap_n - $name # TODO $reason"
  fi
}

tap_done () {
  echo "1..$tap_n"
  [ "$tap_failed" -eq 0 ]
}
