# mpi-env.sh - what every test of mpplan under mpirun starts with (sourced, after tap.sh):
# the program, the data folder, a temporary folder removed at exit, and the environment
# Open MPI needs here. Open MPI refuses to start as root (containers, CI) without the two
# OMPI_ALLOW variables; more ranks than cores need --oversubscribe; under ASan Open MPI's
# own leaks are not ours.
MPPLAN=${MPPLAN:-./mpplan}
data=$top_srcdir/tests/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
MPIRUN=${MPIRUN:-mpirun}
export MPIRUN
run_np () { np=$1; shift; timeout 120 "$MPIRUN" -np "$np" --oversubscribe "$@"; }
# run_check NAME RANKS: prints $tmp/NAME.yaml's parallel block and runs the plan on RANKS
# ranks with --check, one step and no warm-up, the measured figures in $tmp/NAME.m.json;
# passes on "check: ok" (its output goes to the log, and on failure its errors).
run_check () {
  sed -n '/^parallel:/,/^layers_per_chunk/p' "$tmp/$1.yaml" | tr -s ' \n' ' ' | sed 's/^/# /'; echo
  run_np "$2" "$MPPLAN" exec -p "$tmp/$1.yaml" --steps 1 --warmup 0 --check \
    -o "$tmp/$1.m.json" >"$tmp/$1.out" 2>"$tmp/$1.err"
  st=$?
  sed 's/^/# /' "$tmp/$1.out"
  [ $st -eq 0 ] && grep -q '^check: ok' "$tmp/$1.out" || { sed 's/^/# /' "$tmp/$1.err"; return 1; }
}
# mem_within JSON LABEL OUT KIND: the peak of the executor's KIND ledger (gradients,
# activations) in measured JSON (memory_peak_bytes) within 10% of the plan's
# memory_bytes.KIND; prints both after LABEL and writes the measured bytes to OUT.
mem_within () {
  awk -v z="$2" -v out="$3" -v k="$4" '
    /^  "memory_peak_bytes"/ { in_m = 1 } /^    "memory_bytes"/ { in_p = 1 }
    $1 == "\"" k "\"" { if (in_m && m == "") m = $3 + 0; if (in_p && p == "") p = $3 + 0 }
    END { printf "# %s: %s measured %d B, predicted %d B\n", z, k, m, p
          print m > out
          exit !(p > 0 && m > 0.9 * p && m < 1.1 * p) }' "$1"
}
grads_within () {
  mem_within "$1" "$2" "$3" gradients
}
# phase_reported NAME PHASE: after run_check NAME, `mpplan report` of its simulated
# prediction against its measurement shows PHASE on a line of its own with a measured time
# above 0, and the HTML page names it.
phase_reported () {
  "$MPPLAN" simulate -p "$tmp/$1.yaml" --json >"$tmp/$1.p.json" &&
  "$MPPLAN" report -p "$tmp/$1.p.json" -m "$tmp/$1.m.json" --html "$tmp/$1.html" \
    >"$tmp/$1.r.txt" || return 1
  grep "^  $2 " "$tmp/$1.r.txt" | sed 's/^/# /'
  grep "^  $2 " "$tmp/$1.r.txt" | awk '{ exit !($4 + 0 > 0) }' && grep -q "$2" "$tmp/$1.html"
}
# act_peak NAME PINS: the peak of the executor's activation ledger (measured.json) of the
# best plan for $model, 2 sequences on one host core, honouring PINS, into $tmp/apNAME.v.
act_peak () {
  "$MPPLAN" plan -q -m "$model" -b 2 -c "$data/cluster-host1.yaml" -o "$tmp/ap$1.yaml" \
    --fix "$2" >/dev/null &&
  "$MPPLAN" exec -p "$tmp/ap$1.yaml" --steps 1 --warmup 0 -o "$tmp/ap$1.json" >/dev/null &&
  awk '/^  "memory_peak_bytes"/ { m = 1 } m && /"activations"/ { print $3 + 0; exit }' \
    "$tmp/ap$1.json" >"$tmp/ap$1.v"
}
