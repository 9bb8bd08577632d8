#!/bin/sh
# simulate.sh - `mpplan simulate` and `mpplan plan --refine` as a user meets them: a plan
# written by `plan -o` simulated as text, JSON and a Chrome trace; exit codes for a missing
# or bad plan file; the simulated step in the planner's JSON.
. "$top_srcdir/tests/tap.sh"
MPPLAN=${MPPLAN:-./mpplan}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

status_is () { want=$1; shift; "$@" >"$tmp/out" 2>"$tmp/err"; [ $? -eq "$want" ]; }
prints () { pat=$1; shift; "$@" >"$tmp/out" 2>"$tmp/err" && grep -Eq -- "$pat" "$tmp/out"; }
json_ok () { "$@" >"$tmp/j.json" 2>"$tmp/err" && json-glib-validate "$tmp/j.json" >/dev/null; }
json_has () { key=$1; shift; json_ok "$@" && grep -q "\"$key\"" "$tmp/j.json"; }
json_lacks () { key=$1; shift; json_ok "$@" && ! grep -q "\"$key\"" "$tmp/j.json"; }

plan=$tmp/plan.yaml
"$MPPLAN" plan -q -m gpt3-1.3b -c dgx-a100-80g:2 --fix pp=2 -o "$plan" >/dev/null 2>&1

ok "help lists simulate" prints '^  simulate ' "$MPPLAN" help
ok "simulate without a plan is a usage error (2)" status_is 2 "$MPPLAN" simulate
ok "simulate of a missing file is bad input (2)" status_is 2 "$MPPLAN" simulate -p "$tmp/none.yaml"
bad=$top_srcdir/tests/bad/plan-batch.yaml
ok "simulate of a bad plan is bad input (2)" status_is 2 "$MPPLAN" simulate -p "$bad"
ok "simulate of a bad plan says where" \
  sh -c "\"$MPPLAN\" simulate -p \"$bad\" 2>&1 >/dev/null | grep -q 'plan-batch.yaml:[0-9]*:[0-9]*: '"
ok "simulate prints the step beside the closed form" prints '^  step +[0-9.]+ [mu]?s +[0-9.]+ [mu]?s +[-+][0-9.]+%$' "$MPPLAN" simulate -p "$plan"
ok "simulate prints every part of the step" prints '^  optimizer ' "$MPPLAN" simulate -p "$plan"
ok "simulate --json has step_s" json_has step_s "$MPPLAN" simulate -p "$plan" --json
ok "simulate --json has the planner's time_s keys" json_has bubble "$MPPLAN" simulate -p "$plan" --json
ok "simulate --json has closed_form_step_s" json_has closed_form_step_s "$MPPLAN" simulate -p "$plan" --json
ok "simulate --trace writes a Chrome trace" \
  sh -c "\"$MPPLAN\" simulate -p \"$plan\" --trace \"$tmp/t.json\" >/dev/null && json-glib-validate \"$tmp/t.json\" >/dev/null && grep -q '\"traceEvents\"' \"$tmp/t.json\" && grep -q '\"displayTimeUnit\" : \"ms\"' \"$tmp/t.json\""
ok "the trace names the predicted ranks" grep -q '"predicted rank [0-9]* (pp1,tp0,dp0)"' "$tmp/t.json"
ok "the trace has pipeline bubbles and flow arrows" \
  sh -c "grep -q '\"cat\" : \"bubble\"' \"$tmp/t.json\" && grep -q '\"ph\" : \"s\"' \"$tmp/t.json\" && grep -q '\"ph\" : \"f\"' \"$tmp/t.json\""
ok "a trace that cannot be written is an error, nothing left behind" \
  sh -c "! \"$MPPLAN\" simulate -p \"$plan\" --trace \"$tmp/no/such/dir/t.json\" >/dev/null 2>&1 && [ ! -e \"$tmp/no\" ]"
ok "plan --json carries simulated_step_s (refined by default)" \
  json_has simulated_step_s "$MPPLAN" plan -q -m gpt3-1.3b -c dgx-a100-80g:2 --json
ok "plan --refine 0 leaves the closed form alone" \
  json_lacks simulated_step_s "$MPPLAN" plan -q -m gpt3-1.3b -c dgx-a100-80g:2 --refine 0 --json
ok "plan --refine -1 is a usage error (2)" status_is 2 "$MPPLAN" plan -q -m gpt3-1.3b -c dgx-a100-80g:2 --refine -1
ok "plan --refine 3 keeps --top plans" \
  sh -c "\"$MPPLAN\" plan -q -m gpt3-1.3b -c dgx-a100-80g:2 --refine 3 --top 7 --json | grep -c '\"simulated_step_s\"' | grep -qx 3"
tap_done
