#!/bin/sh
# update.sh - regenerates the planner's golden outputs in tests/golden/: for each case
# below, `mpplan plan -m MODEL -c CLUSTER --top 5` as text (NAME.txt) and with --json
# (NAME.json). tests/planner.sh runs the same commands and compares byte for byte.
#
# The goldens are the cost model's numbers at the time they were made, so they are
# updated deliberately, never by hand: after a change that is meant to move predictions
# (costmodel/, planner/, the zoo), build, then from the source tree
#
#     tests/golden/update.sh BUILD/mpplan      # the built program (default ./mpplan)
#     git diff tests/golden                    # review: is every change intended?
#
# and commit the new files with the change that made them. Parts that differ between two
# identical runs are left out: the "Searched ... in X s." line of the text and the search
# "seconds" key of the JSON. Zoo files come from this tree's examples/ (MPPLAN_DATADIR);
# clusters are fixed-size (no `devices_per_node: auto`), so the outputs do not depend on
# the machine. Sourced by tests/planner.sh, this file only defines golden_cases and
# golden_run.

# golden_cases: one "NAME MODEL CLUSTER" line per case (paths relative to the source
# tree).
golden_cases () {
  cat <<'EOF'
gpt3-1.3b-dgx-a100-80g-2 gpt3-1.3b dgx-a100-80g:2
llama3-8b-dgx-h100-1 llama3-8b dgx-h100:1
mixtral-8x7b-dgx-h100-4 mixtral-8x7b dgx-h100:4
mlp-1024-workstation-pcie4 mlp-1024 workstation-pcie4
tiny-gpt-host4 tiny-gpt tests/data/cluster-host4.yaml
EOF
}

# golden_run MPPLAN SRCDIR KIND MODEL CLUSTER: prints the filtered output of one case
# (KIND txt or json), run from SRCDIR with its zoo; fails if mpplan does.
golden_run () {
  (
    cd "$2" || exit 1
    MPPLAN_DATADIR=$2/examples
    export MPPLAN_DATADIR
    case $3 in
      txt) out=$("$1" plan -q -m "$4" -c "$5" --top 5) || exit 1
           printf '%s\n' "$out" | sed '/^Searched .* in .* s\.$/d' ;;
      json) out=$("$1" plan -q -m "$4" -c "$5" --top 5 --json) || exit 1
            printf '%s\n' "$out" | sed '/^ *"seconds" : /d' ;;
      *) exit 1 ;;
    esac
  )
}

if [ "${0##*/}" = update.sh ]; then
  set -eu
  srcdir=$(cd "$(dirname "$0")/../.." && pwd)
  mpplan=${1:-./mpplan}
  case $mpplan in /*) ;; *) mpplan=$(pwd)/$mpplan ;; esac
  [ -x "$mpplan" ] || { echo "usage: $0 PATH/TO/mpplan" >&2; exit 2; }
  golden_cases | while read -r name model cluster; do
    for kind in txt json; do
      new=$srcdir/tests/golden/$name.$kind.new
      golden_run "$mpplan" "$srcdir" $kind "$model" "$cluster" >"$new" ||
        { rm -f "$new"; echo "$0: mpplan failed on $name ($kind)" >&2; exit 1; }
      mv "$srcdir/tests/golden/$name.$kind.new" "$srcdir/tests/golden/$name.$kind"
      echo "wrote tests/golden/$name.$kind"
    done
  done
fi
