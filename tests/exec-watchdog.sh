#!/bin/sh
# exec-watchdog.sh - faults that must end an `mpplan exec` job rather than hang it: a rank
# that stalls (the driver's test hook MPPLAN_EXEC_STALL=R:K stops rank R for good before
# instruction K; or the rank stopped with SIGSTOP from here) trips the watchdog
# (--timeout), which names the instruction each live rank was waiting in and ends the job
# with exit 1; a rank killed with SIGKILL ends the job in seconds with the reason.
# Each job is two ranks of tiny-gpt data-parallel, a few seconds long.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/mpi-env.sh"

"$MPPLAN" plan -q -m "$top_srcdir/examples/models/tiny-gpt.yaml" -b 2 \
  -c "$data/cluster-host2.yaml" --fix dp=2,tp=1,pp=1,zero=0,recompute=none \
  -o "$tmp/dp2.yaml" >/dev/null || exit 1

# The hook: rank 1 stops before instruction 5 (the head's forward) of step 0; rank 0 goes
# on to the gradient all-reduce and waits there. Both watchdogs speak, then exit 1.
stall_hook () {
  start=$(date +%s)
  MPPLAN_EXEC_STALL=1:5 timeout 60 "$MPIRUN" -np 2 --oversubscribe "$MPPLAN" exec \
    -p "$tmp/dp2.yaml" --steps 2 --warmup 0 --timeout 5 >"$tmp/sh.out" 2>"$tmp/sh.err"
  st=$?
  took=$(( $(date +%s) - start ))
  grep 'watchdog' "$tmp/sh.err" | sed 's/^/# /'
  echo "# exit $st after $took s"
  [ $st -eq 1 ] && [ $took -lt 40 ] &&
    grep -q 'rank 1: watchdog: no progress for .* in instruction 5 (forward of layer 5' "$tmp/sh.err" &&
    grep -q 'rank 0: watchdog: no progress for .* in instruction [0-9]* (' "$tmp/sh.err"
}
ok "a stalled rank (test hook): every rank names its instruction, exit 1" stall_hook

# The world rank $2 of the job under PID $1 (timeout, then mpirun, then the ranks), by
# Open MPI's rank variable.
rank_pid () {
  for p in $(pgrep -P "$1" | xargs -r -n1 pgrep -P); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# A long run (many steps); once rank 1 is under way, SIG is sent to it from here.
signal_rank () {
  sig=$1 tag=$2
  start=$(date +%s)
  timeout 90 "$MPIRUN" -np 2 --oversubscribe "$MPPLAN" exec -p "$tmp/dp2.yaml" \
    --steps 100000 --warmup 0 --timeout 5 >"$tmp/$tag.out" 2>"$tmp/$tag.err" &
  mp=$!
  pid=
  for i in $(seq 1 100); do
    pid=$(rank_pid "$mp" 1) && [ -n "$pid" ] && break
    sleep 0.1
  done
  sleep 3
  if [ -n "$pid" ]; then kill "-$sig" "$pid"; else kill "$mp"; fi
  wait "$mp"
  st=$?
  took=$(( $(date +%s) - start ))
  grep -v '^ *$' "$tmp/$tag.err" | head -4 | sed 's/^/# /'
  echo "# exit $st after $took s (rank 1 was pid ${pid:-not found})"
  [ -n "$pid" ] && [ $st -ne 0 ] && [ $st -ne 124 ]
}
sigstop () {
  signal_rank STOP stop && [ $st -eq 1 ] &&
    grep -q 'rank 0: watchdog: no progress for .* in ' "$tmp/stop.err"
}
ok "a rank stopped with SIGSTOP: the watchdog of rank 0 names its wait, exit 1" sigstop
sigkill () {
  signal_rank KILL kill && [ $took -lt 30 ] && grep -q 'signal 9' "$tmp/kill.err"
}
ok "a rank killed with SIGKILL ends the job in seconds, the signal named" sigkill

ok "--timeout is in --help" sh -c "'$MPPLAN' exec --help | grep -q -- '--timeout'"
bad_timeout () {
  "$MPPLAN" exec -p "$tmp/dp2.yaml" --timeout -3 2>"$tmp/bt.err"
  [ $? -eq 2 ] && grep -q -- '--timeout must be' "$tmp/bt.err"
}
ok "a negative --timeout is bad usage (exit 2)" bad_timeout
tap_done
