#!/bin/sh
# gpu-check.sh OUTDIR [--bundle DIR] [--cluster NAME] [--jobs N]
# On a machine with one NVIDIA GPU, in under 8 minutes: build mpplan with CUDA, run every
# kernel check (tests/test-kernels-cuda), calibrate (--backend cuda --quick, the profile
# named for the cluster's device), plan gpt2-124m for that one GPU with that fresh profile
# (cluster h200 unless --cluster), execute it with --backend cuda, a
# --check of cuda-fp32 against the host backend on the tiny test model, then the report;
# the last thing printed is a short table. Logs and JSON files go to OUTDIR.
# --bundle DIR: libraries prepared on a Debian machine by scripts/gpu-bundle.sh DIR, for a
# bare GPU image without GLib, libyaml, json-glib, cmocka, OpenMPI or OpenBLAS.
set -u
usage () { echo "usage: $0 OUTDIR [--bundle DIR] [--cluster NAME] [--jobs N]" >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -*) usage;; esac
out=$1; shift
bundle= cluster=h200 jobs=$(nproc 2>/dev/null || echo 4)
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) [ $# -ge 2 ] || usage; bundle=$2; shift 2;;
    --cluster) [ $# -ge 2 ] || usage; cluster=$2; shift 2;;
    --jobs) [ $# -ge 2 ] || usage; jobs=$2; shift 2;;
    *) echo "$0: unknown argument '$1'" >&2; usage;;
  esac
done
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
if [ -n "$bundle" ]; then
  [ -f "$bundle/env.sh" ] || { echo "$0: $bundle/env.sh missing (make it with scripts/gpu-bundle.sh $bundle)" >&2; exit 2; }
  BUNDLE_ENV=$(cd "$bundle" && pwd)/env.sh; export BUNDLE_ENV
  . "$BUNDLE_ENV"
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no CUDA device (nvidia-smi finds no GPU); nothing to run" >&2
  exit 1
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
t0=$(date +%s)
step () { echo "== $1 ($(($(date +%s) - t0)) s)"; }

step "build in $out/build"
mkdir -p "$out/build"
( cd "$src" && { [ -x configure ] || autoreconf -fi; } ) >"$out/build.log" 2>&1 &&
( cd "$out/build" && "$src/configure" --with-cuda && make -j"$jobs" &&
  make -j"$jobs" tests/test-kernels-cuda ) >>"$out/build.log" 2>&1 ||
  { echo "gpu-check: build failed, see $out/build.log" >&2; tail -20 "$out/build.log" >&2; exit 1; }
mp=$out/build/mpplan

step "kernel checks"
CMOCKA_MESSAGE_OUTPUT=TAP timeout 120 "$out/build/tests/test-kernels-cuda" >"$out/kernels.tap" 2>&1
kpass=$(grep -c '^ok ' "$out/kernels.tap"); kfail=$(grep -c '^not ok' "$out/kernels.tap")

step "calibrate --backend cuda --quick"
# The profile must carry the cluster file's device name (the GPU's own name, e.g. "NVIDIA
# H200", is the default and would match no cluster device), so plan applies it.
dev=$("$mp" describe "$cluster" 2>/dev/null | sed -n 's/^  device  *//p' | head -1)
prof=
if timeout 150 "$mp" calibrate --backend cuda --quick ${dev:+--device "$dev"} \
     -o "$out/profile.yaml" >"$out/calibrate.log" 2>&1; then
  prof="--profile $out/profile.yaml"; calib="fresh (device ${dev:-the GPU's name})"
else
  calib="failed (built-in curves): $(tail -1 "$out/calibrate.log")"
fi

step "plan gpt2-124m on $cluster (1 GPU)"
# shellcheck disable=SC2086
timeout 60 "$mp" plan -q -m gpt2-124m -c "$cluster:1" $prof -o "$out/plan.yaml" >"$out/plan.txt" 2>&1 ||
  timeout 60 "$mp" plan -q -m gpt2-124m -c "$cluster" $prof -o "$out/plan.yaml" >"$out/plan.txt" 2>&1 ||
  { echo "gpu-check: plan failed, see $out/plan.txt" >&2; cat "$out/plan.txt" >&2; exit 1; }
# For the record only: simulate takes no --profile, so its times are the built-in curves'.
timeout 60 "$mp" simulate -p "$out/plan.yaml" --json >"$out/simulated.json" 2>"$out/simulate.err" || true
# plan warns "not used" when the profile names a device the cluster lacks.
if [ -n "$prof" ] && grep -q 'not used' "$out/plan.txt"; then
  calib="$calib, but not used by plan: $(grep 'not used' "$out/plan.txt" | head -1)"
fi

step "check: cuda-fp32 and cuda (bf16) against the host backend, tiny model"
"$mp" plan -q -m "$src/tests/data/model-exec.yaml" -c "$src/tests/data/cluster-host1.yaml" -o "$out/tiny.yaml" >/dev/null 2>&1
c32=FAIL; c16=FAIL
timeout 90 "$mp" exec -p "$out/tiny.yaml" --backend cuda-fp32 --steps 3 --check >"$out/check-fp32.log" 2>&1 && c32=ok
timeout 90 "$mp" exec -p "$out/tiny.yaml" --backend cuda --steps 3 --check >"$out/check-bf16.log" 2>&1 && c16=ok

step "exec gpt2-124m --backend cuda"
timeout 200 "$mp" exec -p "$out/plan.yaml" --backend cuda --steps 10 --warmup 2 \
  -o "$out/measured.json" --trace "$out/trace.json" >"$out/exec.log" 2>&1
erc=$?

step "report"
if "$mp" report --help >/dev/null 2>&1; then
  "$mp" report -p "$out/plan.yaml" -m "$out/measured.json" >"$out/report.txt" 2>&1 || true
fi
# Predicted vs measured from the JSON files themselves (no report command needed).
num () { sed -n "s/.*\"$2\"[^0-9.eE+-]*\([0-9.eE+-]*\).*/\1/p" "$1" 2>/dev/null | head -1; }
# The prediction is the plan's: made with the fresh profile (when calibration worked).
pred=$(num "$out/plan.yaml" step_s); [ -n "$pred" ] || pred=$(num "$out/simulated.json" step_s)
meas=$(num "$out/measured.json" step_s)
mfu=$(num "$out/measured.json" mfu)
err=$(awk -v p="${pred:-0}" -v m="${meas:-0}" 'BEGIN { if (m > 0 && p > 0) printf "%+.1f%%", 100 * (p - m) / m; else print "n/a" }')
echo
echo "gpu-check on $gpu ($(($(date +%s) - t0)) s; logs in $out)"
printf '%-34s %s\n' "kernel checks passed" "$kpass of $((kpass + kfail))"
printf '%-34s %s\n' "--check cuda-fp32 / cuda (bf16)" "$c32 / $c16"
printf '%-34s %s\n' "calibration" "$calib"
printf '%-34s %s\n' "exec gpt2-124m (exit status)" "$erc"
printf '%-34s %s\n' "MFU" "${mfu:-n/a}"
printf '%-34s %s s\n' "predicted step" "${pred:-n/a}"
printf '%-34s %s s\n' "measured step" "${meas:-n/a}"
printf '%-34s %s\n' "error (predicted vs measured)" "$err"
[ "$kfail" -eq 0 ] && [ "$erc" -eq 0 ]
