#!/bin/sh
# layering.sh - the module rooms of ARCHITECTURE.md hold: arrows go down the table
# (common < model, topology < program < costmodel < planner < exec, report < cli), no
# module reaches into another's private header, and only the backends know MPI, CUDA or
# NCCL exist.
. "$top_srcdir/tests/tap.sh"
cd "$top_srcdir" || exit 1

PRODUCT="common model topology program costmodel planner exec kernels report cli"

# includes_none DIRS PATTERN: no .c/.h file under DIRS has an #include matching PATTERN.
includes_none () {
  dirs=$1 pat=$2
  hits=$(grep -lE "^#include [<\"]($pat)" $(find $dirs -name '*.[ch]' 2>/dev/null) 2>/dev/null)
  [ -z "$hits" ] || { echo "# $hits" >&2; return 1; }
}

# includes_only PATTERN ALLOWED...: every product source (.c, .h, .cu, .cuh) with an
# #include matching PATTERN is one of ALLOWED (a file, or a folder ending in /).
includes_only () {
  pat=$1; shift
  bad=
  for f in $(grep -lE "^#include [<\"]($pat)" $(find $PRODUCT \( -name '*.[ch]' -o -name '*.cu' \
             -o -name '*.cuh' \) 2>/dev/null) 2>/dev/null); do
    allowed=no
    for a in "$@"; do
      case $a in
        */) case $f in "$a"*) allowed=yes ;; esac ;;
        *) [ "$f" = "$a" ] && allowed=yes ;;
      esac
    done
    [ $allowed = yes ] || bad="$bad $f"
  done
  [ -z "$bad" ] || { echo "# not allowed:$bad" >&2; return 1; }
}

# private_stays_home: a folder's *-private.h (and exec/runner.h, exec/measure.h, which
# say so) is included only by files of that folder.
private_stays_home () {
  bad=
  for h in $(find $PRODUCT -name '*-private.h') exec/runner.h exec/measure.h; do
    dir=${h%/*}
    for f in $(grep -lF "#include \"$h\"" $(find $PRODUCT -name '*.[ch]') 2>/dev/null); do
      [ "${f%/*}" = "$dir" ] || bad="$bad $f->$h"
    done
  done
  [ -z "$bad" ] || { echo "# $bad" >&2; return 1; }
}

# MPI: the host and CUDA backends, and the world (joining MPI under mpirun, gathering at
# rank 0) that the executor and the CLI's sharded search run on.
todo "exec/calibrate.c still calls MPI itself (issue 13 point 3)" \
  "mpi.h only in exec/world.c, exec/backend-host.c, exec/backend-cuda.c" \
  includes_only "mpi\.h" exec/world.c exec/backend-host.c exec/backend-cuda.c
ok "CUDA, cuBLAS and NCCL headers only in exec/backend-cuda.c and kernels/cuda/" \
  includes_only "cuda|cublas|nccl" exec/backend-cuda.c kernels/cuda/
ok "common/ includes no module above it" \
  includes_none "common" "model/|topology/|program/|costmodel/|planner/|exec/|kernels/|report/|cli/"
ok "model/ and topology/ know no plans, cost model, planner, executor or CLI" \
  includes_none "model topology" "program/|costmodel/|planner/|exec/|report/|cli/"
ok "program/ sits below the cost model (model/, topology/ and common/ only)" \
  includes_none "program" "costmodel/|planner/|exec/|kernels/|report/|cli/"
ok "costmodel/ knows no planner, executor, report or CLI" \
  includes_none "costmodel" "planner/|exec/|report/|cli/"
ok "planner/ knows no executor, report or CLI" \
  includes_none "planner" "exec/|report/|cli/"
todo "exec/measure.c still builds report/'s trace (issue 13 point 3)" \
  "exec/ knows no report or CLI" \
  includes_none "exec" "report/|cli/"
ok "report/ knows no planner internals, executor or CLI" \
  includes_none "report" "planner/planner-private\.h|exec/|cli/"
ok "kernels/ know no plans or GLib-level modules" \
  includes_none "kernels" "model/|topology/|program/|costmodel/|planner/|exec/|report/|cli/"
ok "nothing but cli/ includes cli/" \
  includes_none "common model topology program costmodel planner exec kernels report" "cli/"
ok "private headers are included only inside their own folder" private_stays_home
tap_done
