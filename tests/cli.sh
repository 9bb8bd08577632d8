#!/bin/sh
# cli.sh - the `mpplan` command as a user meets it: dispatch, help, version, exit codes,
# describe of zoo models and clusters (text and JSON), validate of every zoo file.
. "$top_srcdir/tests/tap.sh"
MPPLAN=${MPPLAN:-./mpplan}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

status_is () { want=$1; shift; "$@" >"$tmp/out" 2>"$tmp/err"; [ $? -eq "$want" ]; }
# prints_line PATTERN COMMAND...: COMMAND exits 0 and stdout has a line matching PATTERN.
prints () { pat=$1; shift; "$@" >"$tmp/out" 2>"$tmp/err" && grep -Eq -- "$pat" "$tmp/out"; }
json_ok () { "$@" >"$tmp/j.json" 2>"$tmp/err" && json-glib-validate "$tmp/j.json" >/dev/null; }
json_has () { key=$1; shift; json_ok "$@" && grep -q "\"$key\"" "$tmp/j.json"; }

ok "--version prints the version" prints '^mpplan [0-9]+\.[0-9]+\.[0-9]+$' "$MPPLAN" --version
ok "no command is a usage error (2)" status_is 2 "$MPPLAN"
ok "an unknown command is a usage error (2)" status_is 2 "$MPPLAN" frobnicate
ok "an unknown option is a usage error (2)" status_is 2 "$MPPLAN" describe --frob gpt3-175b
ok "help lists the commands" prints '^  describe ' "$MPPLAN" help
ok "help documents the exit codes" prints '2 bad usage or bad input' "$MPPLAN" help
ok "help COMMAND shows that command's options" prints '--json' "$MPPLAN" help describe
ok "COMMAND --help equals help COMMAND" sh -c "\"$MPPLAN\" describe --help > \"$tmp/a\" && \"$MPPLAN\" help describe > \"$tmp/b\" && cmp -s \"$tmp/a\" \"$tmp/b\""
ok "describe without an argument is a usage error" status_is 2 "$MPPLAN" describe
ok "describe of an unknown name is bad input (2)" status_is 2 "$MPPLAN" describe no-such-model
ok "describe gpt3-175b prints 174.6B parameters" prints '174\.6B' "$MPPLAN" describe gpt3-175b

for m in mlp-1024 gpt3-125m gpt3-1.3b gpt3-13b gpt3-175b llama2-7b llama2-70b llama3-8b \
         llama3-70b llama3-405b mixtral-8x7b bert-large tiny-gpt gpt2-124m; do
  ok "zoo model $m is listed" prints "^  $m\$" "$MPPLAN" describe --list
  ok "describe $m --json has parameters.total" json_has total "$MPPLAN" describe "$m" --json
done
for c in dgx-a100-40g dgx-a100-80g dgx-h100 hgx-h200 dgx-b200 h200 workstation-pcie4 gb200-nvl72 \
         mixed-a100-h100 host; do
  ok "zoo cluster $c is listed" prints "^  $c\$" "$MPPLAN" describe --list
  ok "describe $c --json has world_size" json_has world_size "$MPPLAN" describe "$c" --json
done
ok "a cluster size suffix sets the node count" \
  sh -c "\"$MPPLAN\" describe dgx-a100-80g:16 --json | grep -Eq '\"world_size\" : 128'"
ok "host is marked uncalibrated" prints 'uncalibrated' "$MPPLAN" describe host
ok "describe of a model file by path" prints 'parameters' "$MPPLAN" describe "$top_srcdir/examples/models/tiny-gpt.yaml"
ok "validate accepts every zoo file" status_is 0 "$MPPLAN" validate "$top_srcdir"/examples/models/*.yaml "$top_srcdir"/examples/clusters/*.yaml
ok "validate reports each file" sh -c "\"$MPPLAN\" validate \"$top_srcdir\"/examples/models/*.yaml | grep -c ': ok: model' | grep -qx \"$(ls "$top_srcdir"/examples/models/*.yaml | wc -l)\""
ok "validate reports every bad file, not only the first" \
  sh -c "\"$MPPLAN\" validate \"$top_srcdir/tests/bad/duplicate-key.yaml\" \"$top_srcdir/tests/bad/two-documents.yaml\" 2>&1 >/dev/null | grep -c ':[0-9]*:[0-9]*: ' | grep -qx 2"
plan_small="$top_srcdir/tests/data/plan-small.yaml"
ok "program prints rank 0's program" prints '^Program of rank 0: tp 0, cp 0, dp 0, pp 0 ' "$MPPLAN" program -p "$plan_small"
ok "program --rank shows that rank" prints '^Program of rank 3: tp 1, cp 0, dp 1, pp 0 ' "$MPPLAN" program -p "$plan_small" --rank 3
ok "program ends with the optimizer" sh -c "\"$MPPLAN\" program -p \"$plan_small\" | tail -1 | grep -q ' optimizer\$'"
ok "program --json is one JSON object" json_has instructions "$MPPLAN" program -p "$plan_small" --json
ok "program --rank beyond the plan is bad usage (2)" status_is 2 "$MPPLAN" program -p "$plan_small" --rank 4
ok "... and says so" sh -c "\"$MPPLAN\" program -p \"$plan_small\" --rank 4 2>&1 | grep -q 'out of range'"
ok "program without -p is bad usage (2)" status_is 2 "$MPPLAN" program
ok "program of a missing plan file is bad input (2)" status_is 2 "$MPPLAN" program -p "$tmp/none.yaml"
ok "program of a bad plan file is bad input (2)" status_is 2 "$MPPLAN" program -p "$top_srcdir/tests/data/model-small.yaml"
ok "... with located messages" grep -q 'model-small.yaml:[0-9]*:[0-9]*: ' "$tmp/err"
# The docs keep up with the command table: every command `mpplan help` lists is in the
# man page and the README.
documented () {
  for c in $("$MPPLAN" help | awk '/^Commands:/ {on=1; next} on && !NF {exit} on {print $1}'); do
    [ "$c" = help ] || [ "$c" = version ] && continue
    # A command's entry opens with `.B "NAME ...` or `.BI "NAME ...` (exec: `... mpplan exec`).
    grep -Eq "^\\.BI? (\"$c |\"$c\\\\|.*mpplan $c\")" "$top_srcdir/docs/mpplan.1" ||
      { echo "# $c not in mpplan.1" >&2; return 1; }
    grep -q "mpplan $c\\|mpirun -np N mpplan $c" "$top_srcdir/README.md" || { echo "# $c not in README" >&2; return 1; }
  done
}
ok "every command is documented in the man page and the README" documented
for c in plan simulate compare exec program report verify calibrate; do
  ok "$c refuses an argument it does not take (2)" status_is 2 "$MPPLAN" $c stray-argument
done
# The CUDA libraries load only with a cuda backend (exec/backend.c opens mpplan-cuda.so):
# in a CUDA build, --version maps none of them, and a missing module is exit 2.
bdir=$(dirname "$MPPLAN")
if grep -q '^#define HAVE_CUDA 1' "$bdir/config.h" 2>/dev/null; then
  cudalibs='libcudart|libcublas|libnccl'
  ok "a CUDA build has the module mpplan-cuda.so beside mpplan" test -f "$bdir/mpplan-cuda.so"
  ok "mpplan --version loads no CUDA library (LD_DEBUG=libs)" \
    sh -c "LD_DEBUG=libs \"$MPPLAN\" --version 2>&1 >/dev/null | grep -Eq 'find library=' &&
           ! LD_DEBUG=libs \"$MPPLAN\" --version 2>&1 >/dev/null | grep -Eq '$cudalibs'"
  ok "calibrate --backend cuda without its module: exit 2, \"CUDA backend not available\"" \
    sh -c "MPPLAN_CUDA_MODULE=\"$tmp/none.so\" \"$MPPLAN\" calibrate --backend cuda --quick \
             -o \"$tmp/c.yaml\" 2>\"$tmp/err\"; [ \$? -eq 2 ] &&
           grep -q '^CUDA backend not available: .*none.so' \"$tmp/err\" && [ ! -e \"$tmp/c.yaml\" ]"
  # Without a GPU (where calibrate stops at "no CUDA device"), the module's libraries did load.
  if ! nvidia-smi -L >/dev/null 2>&1; then
    ok "calibrate --backend cuda loads the module and libcudart, then finds no device" \
      sh -c "LD_DEBUG=libs \"$MPPLAN\" calibrate --backend cuda --quick -o \"$tmp/c.yaml\" \
               >/dev/null 2>\"$tmp/ld\"; [ \$? -eq 1 ] && grep -q 'mpplan-cuda.so' \"$tmp/ld\" &&
             grep -q libcudart \"$tmp/ld\" && grep -q '^no CUDA device' \"$tmp/ld\""
  fi
fi
tap_done
