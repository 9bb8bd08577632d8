#!/bin/sh
# gpu-check.sh OUTDIR [--build DIR] [--bundle DIR] [--cluster NAME] [--jobs N]
#                     [--budget S] [--no-perf]
# What runs first on a machine with an NVIDIA GPU (nothing CUDA had run on one before),
# in one go of under 10 minutes on one H200 (--budget, default 540 s: every step's time
# limit is cut to what is left, and the timing steps are skipped when too little is):
#   1. mpplan with CUDA (mpplan-cuda.so beside it): the build in DIR (--build: a build folder, or what --pack
#      made of one; libraries still not found are looked for under /usr/local, /opt
#      and /usr/lib, which finds CUDA's and Python's nvidia packages' NCCL and cuBLAS),
#      else built into OUTDIR/build for this GPU's architecture only;
#   2. every kernel check (tests/test-kernels-cuda: each kernels/cuda launcher against
#      kernels/cpu: MoE permutation, router, grouped GEMM, FP8, ring attention); a build
#      that finds no device there fails, as nvidia-smi found one;
#   3. `exec --check` on one GPU, cuda-fp32 and cuda (bf16), of tiny-gpt, tiny-moe and
#      the attention variants (tiny-gemma, tiny-gpt-oss, tiny-mla), and tiny-gpt as an fp8
#      plan on cuda (FP8 GEMMs): each step's loss and gradient norm against the host
#      backend's one rank;
#   4. with two GPUs or more, under mpirun: cp2 (ring attention over NCCL) on tiny-gpt
#      and ep2 on tiny-moe, cuda-fp32 --check;
#   5. unless --no-perf: calibrate --backend cuda --quick (the profile named for the
#      cluster's device), plan gpt2-124m on one GPU of --cluster (h200) with it, exec the
#      plan for 10 steps, report predicted against measured.
# The last thing printed is a summary table (also OUTDIR/summary.txt; every log is in
# OUTDIR and OUTDIR/gpu-check.tgz). Exit status 1 when anything failed (a kernel
# mismatch, a --check over its tolerance, a crash, a time limit), 2 for bad arguments.
# --bundle DIR: libraries made on a Debian machine by scripts/gpu-bundle.sh DIR, for a
# bare GPU image without GLib, libyaml, json-glib, cmocka, OpenMPI or OpenBLAS.
# gpu-check.sh --pack DIR [BUILD]: run where BUILD (default build) was made: copies its
# mpplan, mpplan-cuda.so (the cuda backend, which mpplan loads from beside itself) and
# tests/test-kernels-cuda into DIR, and into DIR/lib the libraries they load
# but for the C library's and CUDA's driver, cuBLAS and NCCL (the CUDA runtime it was built
# against is packed; about 55 MB: OpenBLAS is most of it), so that
# `gpu-check.sh OUT --build DIR` runs them on a bare GPU image of the same or a newer
# glibc (on one GPU no MPI runs; mpirun for several GPUs needs --bundle).
# On the device tool: pack into an ignored folder of the tree (.gpu, say: echo /.gpu/ >>
# .git/info/exclude), carry it, run `scripts/gpu-check.sh /tmp/gc --build .gpu` and
# copy /tmp/gc/summary.txt and /tmp/gc/gpu-check.tgz to $OUT (at most 8 files return).
set -u
usage () {
  echo "usage: $0 OUTDIR [--build DIR] [--bundle DIR] [--cluster NAME] [--jobs N] [--budget S] [--no-perf]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
# --pack DIR [BUILD]: the binaries and their libraries, for a machine without them
if [ "$1" = --pack ]; then
  if [ $# -lt 2 ] || [ $# -gt 3 ]; then usage; fi
  b=${3:-build}
  for f in mpplan mpplan-cuda.so tests/test-kernels-cuda; do
    [ -x "$b/$f" ] || { echo "$0: $b/$f missing (a CUDA build: configure found nvcc?)" >&2; exit 2; }
  done
  mkdir -p "$2/lib" "$2/tests" || exit 1
  cp "$b/mpplan" "$b/mpplan-cuda.so" "$2/" && cp "$b/tests/test-kernels-cuda" "$2/tests/" ||
    exit 1
  ldd "$b/mpplan" "$b/mpplan-cuda.so" "$b/tests/test-kernels-cuda" | awk '/=> \// { print $1, $3 }' | sort -u |
    while read -r name path; do
      case "$name" in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
        libcuda.so*|libcublas*|libnccl*|libnvidia*) ;;   # the GPU image's own (cudart is packed: it must match the build)
        *) cp -L "$path" "$2/lib/$name" || exit 1;;
      esac
    done || exit 1
  echo "gpu-check: packed $b into $2 ($(du -sh "$2" | cut -f1))"
  exit 0
fi
case "$1" in -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0;; -*) usage;; esac
out=$1; shift
bundle='' cluster=h200 jobs=$(nproc 2>/dev/null || echo 4) prebuilt='' budget=540 perf=yes
while [ $# -gt 0 ]; do
  case "$1" in
    --build) [ $# -ge 2 ] || usage; prebuilt=$2; shift 2;;
    --bundle) [ $# -ge 2 ] || usage; bundle=$2; shift 2;;
    --cluster) [ $# -ge 2 ] || usage; cluster=$2; shift 2;;
    --jobs) [ $# -ge 2 ] || usage; jobs=$2; shift 2;;
    --budget) [ $# -ge 2 ] || usage; budget=$2; shift 2;;
    --no-perf) perf=no; shift;;
    *) echo "$0: unknown argument '$1'" >&2; usage;;
  esac
done
case "$budget" in ''|*[!0-9]*) echo "$0: --budget takes whole seconds" >&2; usage;; esac
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
if [ -n "$bundle" ]; then
  [ -f "$bundle/env.sh" ] || { echo "$0: $bundle/env.sh missing (make it with scripts/gpu-bundle.sh $bundle)" >&2; exit 2; }
  BUNDLE_ENV=$(cd "$bundle" && pwd)/env.sh; export BUNDLE_ENV
  # shellcheck disable=SC1090
  . "$BUNDLE_ENV"
fi
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
# the zoo (gpt2-124m, h200) from this tree, wherever the binaries were built
MPPLAN_DATADIR=${MPPLAN_DATADIR:-$src/examples}; export MPPLAN_DATADIR
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no CUDA device (nvidia-smi finds no GPU); nothing to run" >&2
  exit 1
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
ngpu=$(nvidia-smi -L | grep -c '^GPU')
t0=$(date +%s)
step () { echo "== $1 ($(($(date +%s) - t0)) s)"; }
# tmo MAX: a time limit of MAX seconds, or what is left of the budget (at least 5 s)
tmo () {
  l=$((budget - ($(date +%s) - t0)))
  [ "$l" -lt "$1" ] && { [ "$l" -gt 5 ] && echo "$l" || echo 5; } || echo "$1"
}
left () { echo $((budget - ($(date +%s) - t0))); }
failed=0
rows=
# row NAME RESULT: one line of the summary; a RESULT other than ok or skipped fails the run
row () {
  rows="$rows$(printf '%-44s %s' "$1" "$2")
"
  case "$2" in ok*|skipped*) ;; *) failed=1;; esac
}
# info NAME TEXT: a line of figures, failing nothing
info () {
  rows="$rows$(printf '%-44s %s' "$1" "$2")
"
}
finish () {
  {
    echo
    echo "gpu-check on $gpu x $ngpu ($(($(date +%s) - t0)) s of a $budget s budget; logs in $out)"
    printf '%s' "$rows"
    [ $failed -eq 0 ] && echo "gpu-check: all passed" || echo "gpu-check: FAILED (see the rows above and their logs)"
  } | tee "$out/summary.txt"
  (cd "$out" && tar -czf gpu-check.tgz --exclude=build --exclude=gpu-check.tgz . 2>/dev/null)
  exit $failed
}

# ---- 1. the build --------------------------------------------------------------------
# missing BIN...: the libraries ldd cannot find for BIN...
missing () { ldd "$@" 2>/dev/null | awk '/not found/ { print $1 }' | sort -u | tr '\n' ' '; }
# resolve_libs BIN...: LD_LIBRARY_PATH gains the folders of those, where this image keeps
# them (run in this shell, not in $(...), so that the setting stays)
resolve_libs () {
  for lib in $(missing "$@"); do
    d=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
    [ -n "$d" ] && LD_LIBRARY_PATH=$(dirname "$d")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  done
  export LD_LIBRARY_PATH
}
if [ -n "$prebuilt" ]; then
  step "the build in $prebuilt"
  bdir=$(cd "$prebuilt" 2>/dev/null && pwd) || bdir=
  if [ -z "$bdir" ] || [ ! -x "$bdir/mpplan" ] || [ ! -f "$bdir/mpplan-cuda.so" ] ||
     [ ! -x "$bdir/tests/test-kernels-cuda" ]; then
    echo "gpu-check: $prebuilt has no mpplan, mpplan-cuda.so and tests/test-kernels-cuda (a CUDA build: configure found nvcc?)" >&2
    row "build" "FAIL: $prebuilt lacks mpplan, mpplan-cuda.so or tests/test-kernels-cuda"; finish
  fi
  [ -d "$bdir/lib" ] && LD_LIBRARY_PATH=$bdir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}   # --pack's
  resolve_libs "$bdir/mpplan" "$bdir/mpplan-cuda.so" "$bdir/tests/test-kernels-cuda"
  still=$(missing "$bdir/mpplan" "$bdir/mpplan-cuda.so" "$bdir/tests/test-kernels-cuda")
  if [ -n "$still" ]; then
    row "build" "FAIL: libraries not found: $still(--pack or --bundle?)"; finish
  fi
  row "build" "ok (carried: $bdir)"
else
  step "build in $out/build"
  # for this GPU only: compute capability 9.0 -> sm_90
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  gencode=${cc:+-gencode arch=compute_$cc,code=sm_$cc}
  mkdir -p "$out/build"
  if ( cd "$src" && { [ -x configure ] || autoreconf -fi; } ) >"$out/build.log" 2>&1 &&
     ( cd "$out/build" && "$src/configure" --with-cuda &&
       timeout "$(tmo 300)" make -j"$jobs" ${gencode:+NVCC_GENCODE="$gencode"} \
         mpplan mpplan-cuda.so tests/test-kernels-cuda ) >>"$out/build.log" 2>&1; then
    bdir=$out/build
    row "build" "ok (sm_${cc:-?}, $(($(date +%s) - t0)) s)"
  else
    tail -20 "$out/build.log" >&2
    row "build" "FAIL: see build.log"; finish
  fi
fi
mp=$bdir/mpplan

# ---- 2. kernel checks ----------------------------------------------------------------
step "kernel checks"
CMOCKA_MESSAGE_OUTPUT=TAP timeout "$(tmo 120)" "$bdir/tests/test-kernels-cuda" >"$out/kernels.tap" 2>&1
krc=$?
kpass=$(grep -c '^ok ' "$out/kernels.tap"); kfail=$(grep -c '^not ok' "$out/kernels.tap")
if grep -q '^1\.\.0' "$out/kernels.tap"; then
  row "kernel checks (test-kernels-cuda)" "FAIL: the test found no CUDA device, nvidia-smi did"
elif [ $krc -ne 0 ] || [ "$kfail" -ne 0 ] || [ "$kpass" -eq 0 ]; then
  bad=$(sed -n 's/^not ok [0-9]* - //p' "$out/kernels.tap" | tr '\n' ' ')
  row "kernel checks (test-kernels-cuda)" "FAIL: $kpass passed, $kfail failed ${bad:+($bad)}(exit $krc)"
  grep -i 'differ\|NOT OK\|error' "$out/kernels.tap" | head -10 >&2
else
  row "kernel checks (test-kernels-cuda)" "ok ($kpass of $kpass)"
fi

# ---- 3. one GPU: exec --check against the host backend -------------------------------
# check NAME RANKS BACKEND PLAN: exec --check of PLAN on RANKS ranks, 2 steps
check () {
  if [ "$(left)" -lt 15 ]; then row "$1" "FAIL: out of time (budget)"; return; fi
  log=$out/$(echo "$1" | tr -c 'A-Za-z0-9._\n-' '-').log   # names the device tool returns
  if [ "$2" -eq 1 ]; then
    timeout "$(tmo 60)" "$mp" exec -p "$4" --backend "$3" --steps 2 --warmup 0 --check \
      >"$log" 2>&1
  else
    timeout "$(tmo 90)" mpirun -np "$2" "$mp" exec -p "$4" --backend "$3" --steps 2 \
      --warmup 0 --check >"$log" 2>&1
  fi
  rc=$?
  worst=$(awk 'BEGIN { w = -1 }
               $1 ~ /^[0-9]+$/ && NF >= 7 { for (i = 4; i <= NF; i += 3) if ($i + 0 > w) w = $i + 0 }
               END { if (w >= 0) printf "worst rel %.2g", w }' "$log")
  if [ $rc -eq 0 ] && grep -q '^check: ok' "$log"; then
    row "$1" "ok (${worst:-no table})"
  elif [ $rc -eq 124 ]; then
    row "$1" "FAIL: time limit"
  else
    row "$1" "FAIL (exit $rc${worst:+, $worst}): $(grep -v '^ *[0-9]' "$log" | tail -1 | cut -c1-80)"
  fi
}
# plan NAME MODEL BATCH CLUSTER [PINS]: a plan into $out/NAME.yaml, or a failed row
plan () {
  "$mp" plan -q -m "$src/examples/models/$2.yaml" -b "$3" -c "$src/tests/data/$4.yaml" \
    ${5:+--fix "$5"} -o "$out/$1.yaml" >"$out/plan-$1.txt" 2>&1 && return 0
  row "plan $1" "FAIL: see plan-$1.txt"
  return 1
}
step "exec --check on one GPU: tiny-gpt, tiny-moe, tiny-gemma, tiny-gpt-oss, tiny-mla"
# the attention variants' kernels (windows, caps, sinks, qk-norm, geglu; MLA's value widths)
for m in tiny-gpt:4 tiny-moe:16 tiny-gemma:2 tiny-gpt-oss:2 tiny-mla:2; do
  name=${m%:*}
  plan "$name" "$name" "${m#*:}" cluster-host1 || continue
  for b in cuda-fp32 cuda; do
    check "check $name $b" 1 "$b" "$out/$name.yaml"
  done
done
# an fp8 plan: the blocks' GEMMs in FP8 through cublasLt (sm_89 or newer; refused with
# exit 2 below), --check to CHECK_RTOL_FP8; planned for one GPU of --cluster (FP8 rates)
if "$mp" plan -q -m "$src/examples/models/tiny-gpt.yaml" -b 4 -c "$cluster:1" --fix fp8=true \
     -o "$out/tiny-gpt-fp8.yaml" >"$out/plan-tiny-gpt-fp8.txt" 2>&1; then
  check "check tiny-gpt fp8 cuda" 1 cuda "$out/tiny-gpt-fp8.yaml"
else
  row "plan tiny-gpt-fp8" "FAIL: see plan-tiny-gpt-fp8.txt"
fi

# ---- 4. several GPUs: the ring and the all-to-all over NCCL --------------------------
if [ "$ngpu" -ge 2 ] && command -v mpirun >/dev/null 2>&1; then
  step "exec --check on 2 GPUs: cp2, ep2"
  plan cp2 tiny-gpt 2 cluster-host2 dp=1,tp=1,pp=1,cp=2 &&
    check "check tiny-gpt cp2 cuda-fp32 (2 GPUs)" 2 cuda-fp32 "$out/cp2.yaml"
  plan ep2 tiny-moe 2 cluster-host2 dp=2,tp=1,pp=1,ep=2,zero=0 &&
    check "check tiny-moe ep2 cuda-fp32 (2 GPUs)" 2 cuda-fp32 "$out/ep2.yaml"
else
  row "cp2, ep2 under mpirun" "skipped ($ngpu GPU: NCCL needs one GPU per rank)"
fi

# ---- 5. timing: calibrate, plan, exec, report ----------------------------------------
if [ "$perf" = no ]; then
  row "calibrate, exec gpt2-124m" "skipped (--no-perf)"; finish
fi
if [ "$(left)" -lt 150 ]; then
  row "calibrate, exec gpt2-124m" "skipped ($(left) s of the budget left)"; finish
fi
step "calibrate --backend cuda --quick"
# The profile must carry the cluster file's device name (the GPU's own name, e.g. "NVIDIA
# H200", is the default and would match no cluster device), so plan applies it.
dev=$("$mp" describe "$cluster" 2>/dev/null | sed -n 's/^  device  *//p' | head -1)
prof=
if timeout "$(tmo 120)" "$mp" calibrate --backend cuda --quick ${dev:+--device "$dev"} \
     -o "$out/profile.yaml" >"$out/calibrate.log" 2>&1; then
  prof="--profile $out/profile.yaml"
  row "calibrate --backend cuda --quick" "ok (device ${dev:-named as the GPU})"
else
  row "calibrate --backend cuda --quick" "FAIL: $(tail -1 "$out/calibrate.log" | cut -c1-80)"
fi

step "plan gpt2-124m on $cluster (1 GPU)"
# shellcheck disable=SC2086
timeout 30 "$mp" plan -q -m gpt2-124m -c "$cluster:1" $prof -o "$out/plan.yaml" >"$out/plan.txt" 2>&1 ||
  timeout 30 "$mp" plan -q -m gpt2-124m -c "$cluster" $prof -o "$out/plan.yaml" >"$out/plan.txt" 2>&1 ||
  { row "plan gpt2-124m" "FAIL: see plan.txt"; finish; }
# plan warns "not used" when the profile names a device the cluster lacks.
if [ -n "$prof" ] && grep -q 'not used' "$out/plan.txt"; then
  row "profile used by plan" "FAIL: $(grep 'not used' "$out/plan.txt" | head -1 | cut -c1-80)"
fi

step "exec gpt2-124m --backend cuda"
timeout "$(tmo 150)" "$mp" exec -p "$out/plan.yaml" --backend cuda --steps 10 --warmup 2 \
  -o "$out/measured.json" --trace "$out/trace.json" >"$out/exec.log" 2>&1
erc=$?
if [ $erc -eq 0 ]; then
  row "exec gpt2-124m --backend cuda" "ok"
else
  row "exec gpt2-124m --backend cuda" "FAIL (exit $erc): $(tail -1 "$out/exec.log" | cut -c1-80)"
fi
"$mp" report -p "$out/plan.yaml" -m "$out/measured.json" >"$out/report.txt" 2>&1 || true
# Predicted vs measured from the files themselves (the prediction is the plan's, made
# with the fresh profile when calibration worked).
# num FILE KEY: the first number written as KEY: (YAML) or "KEY": (JSON) in FILE
num () {
  grep -o "\(^\|[^a-z_]\)\"\{0,1\}$2\"\{0,1\}[: ]\{1,\}[0-9][0-9.eE+-]*" "$1" 2>/dev/null |
    head -1 | sed 's/.*[": ]//'
}
pred=$(num "$out/plan.yaml" step_s)
meas=$(num "$out/measured.json" step_s)
mfu=$(num "$out/measured.json" mfu)
err=$(awk -v p="${pred:-0}" -v m="${meas:-0}" 'BEGIN { if (m > 0 && p > 0) printf "%+.1f%%", 100 * (p - m) / m; else print "n/a" }')
info "gpt2-124m step predicted / measured" "${pred:-?} s / ${meas:-?} s ($err), MFU ${mfu:-?}"
finish
