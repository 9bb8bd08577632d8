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
# ranks with --check, one step and no warm-up; passes on "check: ok" (its output goes to
# the log, and on failure its errors).
run_check () {
  sed -n '/^parallel:/,/^layers_per_chunk/p' "$tmp/$1.yaml" | tr -s ' \n' ' ' | sed 's/^/# /'; echo
  run_np "$2" "$MPPLAN" exec -p "$tmp/$1.yaml" --steps 1 --warmup 0 --check \
    >"$tmp/$1.out" 2>"$tmp/$1.err"
  st=$?
  sed 's/^/# /' "$tmp/$1.out"
  [ $st -eq 0 ] && grep -q '^check: ok' "$tmp/$1.out" || { sed 's/^/# /' "$tmp/$1.err"; return 1; }
}
