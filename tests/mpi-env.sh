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
