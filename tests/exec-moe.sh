#!/bin/sh
# exec-moe.sh - `mpplan exec` on mixture-of-experts plans under mpirun, each with --check
# (loss and gradient norm of every step against one rank running the same micro-batches,
# 1e-5 relative): tiny-moe (examples/models/tiny-moe.yaml: a dense first block, 8 experts
# top-2, a shared expert) at ep=1 (one rank, tp2), and with expert parallelism over data
# ranks (ep2), with tensor parallelism (ep2 x tp2, experts split over etp = tp), folded
# over tensor ranks (etp = 1, ep2 over tp2, also inside a sequence; etp2 inside tp4) and
# with data parallelism beside it (dp4, ep2: two expert-data-parallel replicas); with
# context parallelism (cp2); selective recompute of mlp, moe_act and shared_experts;
# biases; dropped tokens counted under a capacity factor; the all-gather dispatcher. One step, no warm-up, the smallest batch
# each plan allows, as in exec.sh (CI runs this under ASan on 2 cores).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/mpi-env.sh"

model=$top_srcdir/examples/models/tiny-moe.yaml
# check NAME RANKS BATCH PINS [SED]: the best plan honouring PINS (edited by SED), run
# with --check; passes on "check: ok" (the plan's parallel block and the check table go
# to the log).
check () {
  "$MPPLAN" plan -q -m "$model" -b "$3" -c "$data/cluster-host$2.yaml" --fix "$4" \
    -o "$tmp/$1.yaml" >/dev/null || { echo "# no plan for $4"; return 1; }
  if [ -n "$5" ]; then
    sed -e "$5" "$tmp/$1.yaml" >"$tmp/$1.e.yaml" && mv "$tmp/$1.e.yaml" "$tmp/$1.yaml" || return 1
  fi
  run_check "$1" "$2"
}

ok "one rank, no mpirun" check one 1 2 dp=1,tp=1,pp=1
ok "tp2 with sequence parallel, ep1" check tp2 2 2 dp=1,tp=2,pp=1,ep=1,sequence_parallel=true
ok "ep2 over data ranks" check ep2 2 2 dp=2,tp=1,pp=1,ep=2,zero=0
ok "ep2: ep_comm is a phase of its own in report and its HTML page" phase_reported ep2 ep_comm
ok "ep2 x tp2, experts split over etp = tp" check ep2tp2 4 2 dp=2,tp=2,pp=1,ep=2,zero=0
ok "ep2 folded over tp2 (etp = 1)" check etp1 2 2 dp=1,tp=2,pp=1,ep=2,etp=1
ok "ep2 with dp4 (two expert-data-parallel replicas), ZeRO-1" \
  check ep2dp4 4 4 dp=4,tp=1,pp=1,ep=2,zero=1
# Selective recompute of the mlp, moe_act and shared_experts modules (Megatron-Core's):
# the dense first block rebuilds fc1 and its activation before its backward, the MoE
# blocks their experts' activations and their shared expert's fc1 and activation.
ok "selective recompute, modules mlp+moe_act+shared_experts, ep2" \
  check rsmlp 2 2 dp=2,tp=1,pp=1,ep=2,recompute=selective,recompute_modules=mlp+moe_act+shared_experts
# ... and they hold less: the executor's activation peak (measured.json) on one rank with
# moe_act and shared_experts below that with mlp alone.
moe_saves () {
  act_peak mlp recompute=selective,recompute_modules=mlp &&
  act_peak moe recompute=selective,recompute_modules=mlp+moe_act+shared_experts &&
  echo "# activation peak: mlp $(cat "$tmp/apmlp.v") B, mlp+moe_act+shared_experts $(cat "$tmp/apmoe.v") B" &&
  [ "$(cat "$tmp/apmoe.v")" -lt "$(cat "$tmp/apmlp.v")" ]
}
ok "selective recompute of moe_act and shared_experts holds fewer activation bytes" moe_saves
# A capacity factor of 1 drops tokens; ep over data ranks routes the same micro-batches as
# one rank, so the check still holds, and the drops are counted.
capacity () {
  sed 's/^experts: 8/experts: 8\ncapacity_factor: 1.0/' "$top_srcdir/examples/models/tiny-moe.yaml" \
    >"$tmp/cap.model.yaml" || return 1
  model=$tmp/cap.model.yaml check cap 2 2 dp=2,tp=1,pp=1,ep=2 &&
    grep -E '^MoE: [1-9][0-9]* of [0-9]+ .*dropped' "$tmp/cap.out"
}
ok "capacity factor 1: tokens dropped, counted, same as one rank" capacity
# Biases (bias: true): the router's, the shared and routed experts' fc1 and fc2 (fc2's
# added once: by tp rank 0 to the partial sums under etp = tp).
biases () {
  sed 's/^bias: false/bias: true/' "$top_srcdir/examples/models/tiny-moe.yaml" \
    >"$tmp/bias.model.yaml" || return 1
  model=$tmp/bias.model.yaml check "$@"
}
ok "expert biases, ep2 x tp2 (etp = tp)" biases bias 4 2 dp=2,tp=2,pp=1,ep=2,zero=0
# Experts folded over tp2 with one sequence per micro-batch: each tp rank routes half a
# sequence, the load-balancing loss's counts are all-reduced over the two (with biases).
ok "expert biases, ep2 folded over tp2 inside a sequence (micro-batch 1)" \
  biases biasf 2 1 dp=1,tp=2,pp=1,ep=2,etp=1,sequence_parallel=true,micro_batch_size=1
# 1 < etp < tp: tp4 in two expert tensor-parallel groups of 2 ranks (kv_heads 4 so that
# attention splits over tp4), each group routing its two shards' rows, ep2 over the groups;
# with biases (fc2's replicated over etp, counted once in the gradient norm).
etp2 () {
  sed 's/^kv_heads: 2/kv_heads: 4/;s/^bias: false/bias: true/' \
    "$top_srcdir/examples/models/tiny-moe.yaml" >"$tmp/etp2.model.yaml" || return 1
  model=$tmp/etp2.model.yaml check etp2 4 2 dp=1,tp=4,pp=1,ep=2,etp=2
}
ok "etp2 inside tp4, ep2 (1 < etp < tp), biases" etp2
# Context parallelism: the experts take each cp rank's chunks of the sequences, ep2 folded
# over cp2 (the expert grid numbers cp after tp), the aux loss's counts over cp.
ok "cp2 with ep2 folded over it" check cp2 2 2 dp=1,tp=1,pp=1,cp=2,ep=2
# The all-gather dispatcher: every ep rank gathers the group's tokens, outputs are
# reduce-scattered back (the plans edited: the search picks all-to-all here).
agcheck () {
  check "$@" 's/dispatcher: alltoall/dispatcher: allgather/' &&
    grep -q 'dispatcher: allgather' "$tmp/$1.yaml"
}
ok "all-gather dispatcher, ep2" agcheck ag 2 2 dp=2,tp=1,pp=1,ep=2
ok "all-gather dispatcher, ep2 folded over tp2" agcheck agetp1 2 2 dp=1,tp=2,pp=1,ep=2,etp=1
# Out of memory in an MoE block (ep2's devices cut to 36 MiB: the weights, gradients and
# Adam state fit, the first MoE block's buffers do not): the rank, the instruction, the
# size asked and the ledger named, exit 1.
moe_oom () {
  sed -e 's/memory: 2 GiB/memory: 36 MiB/' -e 's/device_overhead: .*/device_overhead: 0 B/' \
    "$data/cluster-host2.yaml" >"$tmp/small.yaml" &&
  sed "s|^cluster: .*|cluster: $tmp/small.yaml:1|" "$tmp/ep2.yaml" >"$tmp/oom.yaml" || return 1
  run_np 2 "$MPPLAN" exec -p "$tmp/oom.yaml" --steps 1 --warmup 0 >"$tmp/oom.out" 2>"$tmp/oom.err"
  st=$?
  grep -m1 'out of memory' "$tmp/oom.err" | sed 's/^/# /'
  [ $st -eq 1 ] && grep -q 'rank [01], instruction [0-9]* (forward of layer [2-4], .*out of memory on rank [01]: asked .* bytes.*(ledger: weights .*, other .*)' "$tmp/oom.err"
}
ok "out of memory in an MoE block: rank, instruction, size and ledger named, exit 1" moe_oom

# Gradient memory (the executor's ledger peak against the plan's), 2 MiB buckets as in
# exec.sh: experts no other rank holds (ep = dp) keep their full gradients and no shard
# under ZeRO-1; under HSDP the experts' buckets fill beside the dense ones.
bucket='s/^\(  zero: .*\)$/\1\n  bucket_bytes: 2 MiB/'
moe_grads () { check "$1" "$2" 4 "$3" "$bucket" && grads_within "$tmp/$1.m.json" "$1" "$tmp/$1.g"; }
ok "ep2 over dp2, ZeRO-1: gradient memory within 10% of the prediction" \
  moe_grads gz1 2 dp=2,tp=1,pp=1,ep=2,zero=1,num_micro_batches=2
ok "hsdp 2x2, ZeRO-2, expert buckets of their own: gradient memory within 10%" \
  moe_grads gh2 4 dp=4,tp=1,pp=1,ep=1,zero=2,zero_shard=2,num_micro_batches=1

tap_done
