#!/bin/sh
# layering.sh - the module rooms of ARCHITECTURE.md hold: only exec/ and kernels/ include
# MPI, CUDA or NCCL headers, and arrows go down the table (model/ and topology/ know no
# cost model, the cost model knows no planner, exec/ no report/, nothing below cli/
# includes cli/).
. "$top_srcdir/tests/tap.sh"
cd "$top_srcdir" || exit 1

# includes_none DIRS PATTERN: no .c/.h file under DIRS has an #include matching PATTERN.
includes_none () {
  dirs=$1 pat=$2
  hits=$(grep -lE "^#include [<\"]($pat)" $(find $dirs -name '*.[ch]' 2>/dev/null) 2>/dev/null)
  [ -z "$hits" ] || { echo "# $hits" >&2; return 1; }
}

ok "MPI, CUDA and NCCL headers only in exec/ and kernels/" \
  includes_none "common model topology costmodel planner report cli" "mpi\.h|cuda|nccl|cublas"
ok "common/ includes no module above it" \
  includes_none "common" "model/|topology/|costmodel/|planner/|exec/|kernels/|report/|cli/"
ok "model/ and topology/ know no cost model, planner, executor or CLI" \
  includes_none "model topology" "costmodel/|planner/|exec/|report/|cli/"
ok "costmodel/ knows no planner, executor or CLI" \
  includes_none "costmodel" "planner/|exec/|cli/"
ok "kernels/ know no plans or GLib-level modules" \
  includes_none "kernels" "model/|topology/|costmodel/|planner/|exec/|cli/"
ok "exec/ knows no report (it returns data; cli/ prints it, report/ draws the trace)" \
  includes_none "exec" "report/"
ok "nothing but cli/ includes cli/" \
  includes_none "common model topology costmodel planner exec kernels report" "cli/"
tap_done
