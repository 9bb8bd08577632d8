#!/bin/sh
# calibrate.sh - `mpplan calibrate --quick` under mpirun on 2 ranks: the nccl-tests tables
# with every result right, a profile that validates, a plan that uses it, and calibrated
# verifies of tiny-gpt and tiny-moe whose errors are bounded. A few minutes on 2 cores.
# Skipped (TAP "# SKIP") without mpirun.
. "$top_srcdir/tests/tap.sh"
MPPLAN=${MPPLAN:-./mpplan}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Containers run as root; Open MPI refuses that unless told. Open MPI's own allocations
# are never freed, so leak detection (ASan builds) would fail every run.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM ASAN_OPTIONS
# No cached host profile may change the uncalibrated baseline.
MPPLAN_PROFILE=
export MPPLAN_PROFILE

if ! command -v mpirun >/dev/null 2>&1; then
  echo "ok 1 # SKIP mpirun not found"; echo "1..1"; exit 0
fi

out=$tmp/calibrate.out
ok "mpirun -np 2 mpplan calibrate --quick succeeds" \
  sh -c "mpirun -np 2 --oversubscribe \"$MPPLAN\" calibrate --backend host --quick -o \"$tmp/p.yaml\" >\"$out\" 2>\"$tmp/err\" || { cat \"$tmp/err\" >&2; false; }"
header='#       size         count      type   redop    root     time   algbw   busbw  #wrong'
units='#        (B)    (elements)                               (us)  (GB/s)  (GB/s)'
ok "six nccl-tests headers" sh -c "[ \$(grep -cxF -- '$header' \"$out\") -eq 6 ]"
ok "six unit lines" sh -c "[ \$(grep -cxF -- '$units' \"$out\") -eq 6 ]"
ok "six bus bandwidth footers" sh -c "[ \$(grep -c '^# Avg bus bandwidth : [0-9.e+-]*\$' \"$out\") -eq 6 ]"
# Data rows: 9 columns, #wrong last; every one 0 (and there are some).
rows () { grep -E '^ +[0-9]+ +[0-9]+ +float ' "$out"; }
ok "rows from 8 B to 4 MiB" sh -c "grep -Eq '^ +8 +2 +float ' \"$out\" && grep -Eq '^ +4194304 ' \"$out\""
ok "#wrong is 0 on every row" sh -c "[ -n \"\$(grep -E '^ +[0-9]+ +[0-9]+ +float ' \"$out\")\" ] && grep -E '^ +[0-9]+ +[0-9]+ +float ' \"$out\" | awk '\$9 != 0 { bad = 1 } END { exit bad }'"
ok "out of bounds values 0 OK" sh -c "[ \$(grep -c '^# Out of bounds values : 0 OK\$' \"$out\") -eq 6 ]"
ok "the profile validates" sh -c "\"$MPPLAN\" validate \"$tmp/p.yaml\" | grep -q ': ok: profile for cpu-core'"
ok "the profile has every collective" sh -c "[ \$(grep -c '^  - kind: ' \"$tmp/p.yaml\") -eq 6 ]"
ok "the profile has attention and element-wise rates" sh -c "grep -q '^  bwd_flops_per_s: ' \"$tmp/p.yaml\" && for c in norm activation loss gated_activation; do grep -q \"^  \$c:\\\$\" \"$tmp/p.yaml\" || exit 1; done"
ok "attention is measured at tiny-gpt's and gpt2-124m's sequence lengths" grep -q '^  seq: \[128, 1024\]$' "$tmp/p.yaml"
ok "the profile records each kind's spread over 3 quick passes (5 triad repeats)" \
  sh -c "grep -q '^  gemm: {repeats: 3, rel_iqr: ' \"$tmp/p.yaml\" && grep -q '^  kernels: {repeats: 3, rel_iqr: ' \"$tmp/p.yaml\" && grep -q '^  memory: {repeats: 5, rel_iqr: ' \"$tmp/p.yaml\" && grep -q '^# spread of the GEMM grid: ' \"$out\""
ok "the profile has Adam and SGD optimizer rates" sh -c "grep -q '^  adam_params_per_s: ' \"$tmp/p.yaml\" && grep -q '^  sgd_params_per_s: ' \"$tmp/p.yaml\""
ok "plan with --profile works" sh -c "\"$MPPLAN\" plan -m tiny-gpt -c host -q --profile \"$tmp/p.yaml\" >\"$tmp/cal.txt\""
ok "plan without it works" sh -c "\"$MPPLAN\" plan -m tiny-gpt -c host -q >\"$tmp/plain.txt\""
ok "the calibrated prediction differs" sh -c "! cmp -s \"$tmp/cal.txt\" \"$tmp/plain.txt\""
ok "simulate with --profile uses it" sh -c "\"$MPPLAN\" plan -m tiny-gpt -c host -q -o \"$tmp/plan.yaml\" >/dev/null && \"$MPPLAN\" simulate -p \"$tmp/plan.yaml\" --json >\"$tmp/s0.json\" && \"$MPPLAN\" simulate -p \"$tmp/plan.yaml\" --json --profile \"$tmp/p.yaml\" >\"$tmp/s1.json\" && ! cmp -s \"$tmp/s0.json\" \"$tmp/s1.json\""
ok "a host profile for this machine makes host calibrated" \
  sh -c "cp \"$tmp/p.yaml\" \"$tmp/host.yaml\" && MPPLAN_PROFILE=\"$tmp/host.yaml\" \"$MPPLAN\" describe host | grep -q 'calibrated: see profile'"
ok "describe --profile costs the layers with it" \
  sh -c "\"$MPPLAN\" describe tiny-gpt -c host --profile \"$tmp/p.yaml\" | head -1 | grep -q 'calibrated)' && ! \"$MPPLAN\" describe tiny-gpt -c host | head -1 | grep -q 'calibrated)'"
ok "describe --profile of a missing file is bad input (2)" \
  sh -c "\"$MPPLAN\" describe host --profile \"$tmp/none.yaml\" >/dev/null 2>&1; [ \$? -eq 2 ]"
ok "one process measures GEMMs and memory, skips collectives" \
  sh -c "\"$MPPLAN\" calibrate --quick -o \"$tmp/one.yaml\" | grep -q 'collectives skipped' && ! grep -q 'collectives:' \"$tmp/one.yaml\""
ok "an unknown backend is a usage error" sh -c "\"$MPPLAN\" calibrate --backend tpu >/dev/null 2>&1; [ \$? -eq 2 ]"
# The loop closed with the fresh profile: tiny-gpt's plans on 2 ranks, predicted and run.
# Alone on a quiet machine the median error is 2-3%. Inside `make -j2 check` the quick
# calibration itself runs beside other tests on 2 cores and measured 6.7% to 68% here, so
# CI can only bound it as loosely as report.sh bounds the uncalibrated one (the predicted
# step under twice the measured); the note of issue 7 gives the figures of quiet runs.
# verify_bounded MODEL ROUNDS BOUND: the calibrated verify of MODEL on 2 ranks, its
# median absolute error printed and bounded.
verify_bounded () {
  timeout 600 "$MPPLAN" verify -m "$1" -c host --profile "$tmp/p.yaml" --top 1 --steps 2 \
    --rounds "$2" --json >"$tmp/$1.v.json" 2>"$tmp/$1.v.err"
  vst=$?
  verr=$(sed -n 's/^  "median_abs_error" : \([0-9.e+-]*\),*$/\1/p' "$tmp/$1.v.json")
  echo "# calibrated verify, $1 on 2 ranks: median absolute error $verr"
  ok "calibrated verify of $1: median error <= $3" \
    awk -v s="$vst" -v m="$verr" -v b="$3" 'BEGIN { exit !(s == 0 && m != "" && m + 0 <= b + 0) }'
}
verify_bounded tiny-gpt 3 "${CALIBRATED_VERIFY_BOUND:-0.995}"
# The same loop on tiny-moe (router, experts, the all-to-all dispatch: ep_comm), as
# loosely bounded for the same reason; one round: its six plans at load 20 on 2 cores ran
# past the 600 s limit in two; the note of issue 17 gives the quiet figures.
verify_bounded tiny-moe 1 "${MOE_VERIFY_BOUND:-0.995}"
# --backend cuda: without a GPU, or in a build without CUDA, exit 1 saying "no CUDA device"
# and write nothing; where it succeeds (a GPU and a CUDA build) its profile must validate.
"$MPPLAN" calibrate --backend cuda --quick -o "$tmp/cuda.yaml" >"$tmp/cuda.out" 2>"$tmp/cuda.err"
crc=$?
if [ $crc -eq 0 ]; then
  ok "calibrate --backend cuda on this GPU: the profile validates" \
    sh -c "\"$MPPLAN\" validate \"$tmp/cuda.yaml\" | grep -q ': ok: profile for '"
else
  ok "calibrate --backend cuda without a GPU: status 1, \"no CUDA device\", no profile" \
    sh -c "[ $crc -eq 1 ] && grep -q '^no CUDA device' \"$tmp/cuda.err\" && [ ! -e \"$tmp/cuda.yaml\" ]"
fi
tap_done
