#!/bin/sh
# exec.sh - `mpplan exec` end to end under mpirun: every parallel form of issue 6 on
# tiny-gpt (examples/models/tiny-gpt.yaml) with --check, which compares each step's loss
# and global gradient norm with the same model run on one rank (1e-5 relative); the MLP
# architecture (mlp-1024) likewise; the loss going down over 50 steps (on the much smaller
# tests/data/model-exec.yaml, where 50 steps take a second); measured.json and the trace;
# bad input exiting 2 once on every rank; a rank failing mid-run ending the job.
# Plans are written by `mpplan plan --fix` on fixed 1-, 2- and 4-core host clusters.
# CI has 2 cores and runs this under ASan too, so the checks run one step with no warm-up
# on the smallest global batch the plan kind allows (2 or 4 sequences).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/mpi-env.sh"

# plan NAME RANKS PINS: writes $tmp/NAME.yaml, the best plan for $model with global batch
# $batch honouring PINS.
model=$top_srcdir/examples/models/tiny-gpt.yaml
batch=2
plan () {
  "$MPPLAN" plan -q -m "$model" -b "$batch" -c "$data/cluster-host$2.yaml" --fix "$3" \
    -o "$tmp/$1.yaml" >/dev/null
}
# check NAME RANKS PINS [SED]: plans (the plan file edited by SED, for choices the search
# does not make) and runs it with --check; passes on "check: ok".
check () {
  plan "$1" "$2" "$3" || { echo "# no plan for $3"; return 1; }
  if [ -n "$4" ]; then
    sed -e "$4" "$tmp/$1.yaml" >"$tmp/$1.e.yaml" && mv "$tmp/$1.e.yaml" "$tmp/$1.yaml" || return 1
  fi
  run_check "$1" "$2"
}

one=dp=1,tp=1,pp=1
ok "one rank, no mpirun" sh -c "'$MPPLAN' plan -q -m '$data/model-exec.yaml' -c '$data/cluster-host1.yaml' -o '$tmp/one.yaml' >/dev/null && '$MPPLAN' exec -p '$tmp/one.yaml' --steps 2 --check >/dev/null"
ok "dp2" check dp2 2 dp=2,tp=1,pp=1,zero=0,recompute=none
ok "tp2" check tp2 2 dp=1,tp=2,pp=1,sequence_parallel=false,recompute=none
ok "tp2 with sequence parallel" check tp2sp 2 dp=1,tp=2,pp=1,sequence_parallel=true
# ... keeping its rows of the norms' outputs only (backward gathers them again), as the
# cost model counts
ok "tp2 with sequence parallel: measured activations within 10% of the prediction" \
  mem_within "$tmp/tp2sp.m.json" "tp2 sp" "$tmp/tp2sp.act" activations
ok "pp2 1f1b" check pp2 2 dp=1,tp=1,pp=2,schedule=1f1b,num_micro_batches=2
ok "pp2 gpipe" check pp2g 2 dp=1,tp=1,pp=2,schedule=gpipe,num_micro_batches=2
ok "pp2 layer placement" check pp2n 2 dp=1,tp=1,pp=2,schedule=none,num_micro_batches=1
ok "dp2 x tp2" check dp2tp2 4 dp=2,tp=2,pp=1,zero=0
ok "tp2 x pp2" check tp2pp2 4 dp=1,tp=2,pp=2,num_micro_batches=2
ok "zero 1, dp2" check z1 2 dp=2,tp=1,pp=1,zero=1
ok "zero 2, dp2" check z2 2 dp=2,tp=1,pp=1,zero=2
ok "recompute full" check rf 2 dp=1,tp=2,pp=1,recompute=full
# The search makes selective recompute a choice only without fused attention (it saves
# nothing with it), so these two plans are edited: probabilities kept, then recomputed.
noflash='s/flash_attention: true/flash_attention: false/'
ok "attention probabilities kept" check pk 2 dp=1,tp=2,pp=1,recompute=none "$noflash"
ok "recompute selective" check rs 2 dp=1,tp=1,pp=2,recompute=none,num_micro_batches=2 \
  "$noflash;s/recompute: none/recompute: selective/"
# Megatron's --recompute-method block --recompute-num-layers 1: the first block of each
# stage rebuilt, the other kept; selective recompute pinned with flash attention.
ok "recompute full, first block per stage" check rf1 2 \
  dp=1,tp=1,pp=2,recompute=full,recompute_num_layers=1,num_micro_batches=2
ok "recompute selective with flash attention" check rsf 2 dp=1,tp=2,pp=1,recompute=selective
# Megatron's --recompute-method uniform: blocks in groups of N, one input kept per group,
# the group rebuilt at its last block's backward (groups of 2, and 3 + 1 over 4 blocks).
ok "recompute uniform, groups of 2" check ru2 2 \
  dp=1,tp=2,pp=1,recompute=full,recompute_method=uniform,recompute_num_layers=2
ok "recompute uniform, groups of 3 (the last of 1)" check ru3 2 \
  dp=1,tp=2,pp=1,recompute=full,recompute_method=uniform,recompute_num_layers=3
ok "recompute uniform, pp2: groups within each stage" check ru2pp 2 \
  dp=1,tp=1,pp=2,recompute=full,recompute_method=uniform,recompute_num_layers=2,num_micro_batches=2
# Megatron's --recompute-modules layernorm / mlp: the norms' outputs and fc1 and the
# activation let go after the forward, rebuilt before the backward (with sp: re-gathered).
ok "recompute selective, modules mlp" check rsmlp 2 \
  dp=1,tp=2,pp=1,recompute=selective,recompute_modules=mlp,sequence_parallel=false
ok "recompute selective, modules layernorm+mlp, sequence parallel" check rsln 2 \
  dp=1,tp=2,pp=1,recompute=selective,recompute_modules=layernorm+mlp,sequence_parallel=true
# ... and they hold less: the executor's activation peak (measured.json) under
# recompute_modules=layernorm+mlp below that of no recompute, on one rank.
selective_saves () {
  act_peak none recompute=none && act_peak sel recompute=selective,recompute_modules=layernorm+mlp &&
  echo "# activation peak: no recompute $(cat "$tmp/apnone.v") B, layernorm+mlp $(cat "$tmp/apsel.v") B" &&
  [ "$(cat "$tmp/apsel.v")" -lt "$(cat "$tmp/apnone.v")" ]
}
ok "selective recompute of layernorm+mlp holds fewer activation bytes" selective_saves
ok "selective modules it does not run are refused by name" sh -c "
  '$MPPLAN' plan -q -m '$model' -b 2 -c '$data/cluster-host1.yaml' -o '$tmp/rsm.yaml' \
    --fix recompute=selective,recompute_modules=op >/dev/null &&
  { '$MPPLAN' exec -p '$tmp/rsm.yaml' --steps 1 2>'$tmp/rsm.err'; [ \$? -eq 2 ]; } &&
  grep -q 'recompute_modules' '$tmp/rsm.err'"
ok "... MLA's up-projection recompute (mla_up_proj) among them" sh -c "
  '$MPPLAN' plan -q -m tiny-mla -b 4 -c '$data/cluster-host1.yaml' -o '$tmp/rmla.yaml' \
    --fix recompute=selective,recompute_modules=mla_up_proj >/dev/null &&
  { '$MPPLAN' exec -p '$tmp/rmla.yaml' --dry-run 2>'$tmp/rmla.err'; [ \$? -eq 2 ]; } &&
  grep -q 'mla_up_proj' '$tmp/rmla.err'"
# Four micro-batches for interleaving (two chunks per stage), two per data rank below.
batch=4
# The balanced interleaved split ([2, 1, 1, 2]: one block a chunk) runs in the plans above
# and below; this one is uneven in blocks (2, 1, 1, 0: the embedding and two blocks, then
# the last chunk the head alone), as Megatron-Core's --pipeline-model-parallel-layout.
ok "pp2 interleaved, uneven split (blocks 2, 1, 1, 0)" check pp2i 2 \
  dp=1,tp=1,pp=2,vpp=2,schedule=interleaved-1f1b,num_micro_batches=4,layers_per_chunk=3:1:1:1
ok "pp2 interleaved, first block of each chunk recomputed" check pp2ir 2 \
  dp=1,tp=1,pp=2,vpp=2,num_micro_batches=4,recompute=full,recompute_num_layers=1
ok "pp2 interleaved, embedding and loss counted in the split (uneven chunks)" check pp2ia 2 \
  dp=1,tp=1,pp=2,vpp=3,num_micro_batches=4,account_for_embedding=true,account_for_loss=true
ok "dp2 x pp2" check dp2pp2 4 dp=2,tp=1,pp=2,num_micro_batches=2,zero=0
ok "zero 3, dp2" check z3 2 dp=2,tp=1,pp=1,zero=3,reshard_after_forward=true,num_micro_batches=2
# Gradient memory, ZeRO 0-3: the peak of the executor's gradient ledger (measured.json's
# memory_peak_bytes) within 10% of the plan's memory_bytes.gradients. Buckets of 2 MiB, so
# that ZeRO-2/3 hold their shard of tiny-gpt's 13 MB of gradients plus the two buckets in
# flight, under DeepSpeed's ZeRO-1 (the full gradients and a shard of their own), while
# Megatron's ZeRO-1 reduce-scatters in place and holds what ZeRO-0 does; two
# micro-batches, so that each reduces twice into the shard.
grad_mem () {
  plan gm$1$2 2 dp=2,tp=1,pp=1,zero=$1,reshard_after_forward=true,recompute=none,num_micro_batches=2${2:+,stack=$2} || return 1
  sed 's/^\(  zero: .*\)$/\1\n  bucket_bytes: 2 MiB/' "$tmp/gm$1$2.yaml" >"$tmp/gm$1$2.b.yaml" || return 1
  run_np 2 "$MPPLAN" exec -p "$tmp/gm$1$2.b.yaml" --steps 1 --warmup 0 --check -o "$tmp/gm$1$2.json" \
    >"$tmp/gm$1$2.out" 2>&1 || { sed 's/^/# /' "$tmp/gm$1$2.out"; return 1; }
  grads_within "$tmp/gm$1$2.json" "zero $1${2:+ ($2)}" "$tmp/gm$1$2.measured"
}
for z in 0 1 2 3; do
  ok "zero $z: measured gradient memory within 10% of the prediction" grad_mem $z
done
ok "zero 1 under deepspeed (a shard of its own): measured gradient memory within 10%" \
  grad_mem 1 deepspeed
ok "zero 1 under megatron reduces in place: no more gradient memory than zero 0" \
  sh -c "[ \$(cat '$tmp/gm1.measured') -le \$(cat '$tmp/gm0.measured') ]"
ok "zero 2 holds less gradient memory than deepspeed's zero 1" \
  sh -c "[ \$(cat '$tmp/gm2.measured') -lt \$(cat '$tmp/gm1deepspeed.measured') ]"

# The MLP architecture: alternating column- and row-parallel dense layers.
model=$top_srcdir/examples/models/mlp-1024.yaml
batch=16
ok "mlp dp2" check mdp2 2 dp=2,tp=1,pp=1,zero=0
ok "mlp tp2" check mtp2 2 dp=1,tp=2,pp=1,sequence_parallel=false
ok "mlp pp2" check mpp2 2 dp=1,tp=1,pp=2,schedule=1f1b,num_micro_batches=4
ok "mlp zero 3, dp2" check mz3 2 dp=2,tp=1,pp=1,zero=3,reshard_after_forward=true
# The search does not pick sequence parallelism for an MLP; the executor runs it (rows).
ok "mlp tp2 with sequence parallel" check mtp2sp 2 dp=1,tp=2,pp=1,sequence_parallel=false \
  's/sequence_parallel: false/sequence_parallel: true/'
batch=64
mlp_learn () {
  plan mlearn 2 dp=2,tp=1,pp=1,zero=0 || return 1
  run_np 2 "$MPPLAN" exec -p "$tmp/mlearn.yaml" --steps 49 --warmup 1 >"$tmp/mlearn.out" 2>&1 \
    || return 1
  sed 's/^/# /' "$tmp/mlearn.out"
  awk '/^loss:/ { exit !($5 < 0.9 * $3) }' "$tmp/mlearn.out"
}
ok "mlp: the regression loss goes down over 50 steps" mlp_learn

# The learnable task: the loss of the last of 50 steps well under the first.
model=$data/model-exec.yaml
batch=8
learn () {
  plan learn 2 dp=2,tp=1,pp=1,zero=0 || return 1
  run_np 2 "$MPPLAN" exec -p "$tmp/learn.yaml" --steps 49 --warmup 1 -o "$tmp/m.json" \
    --trace "$tmp/t.json" >"$tmp/learn.out" 2>&1 || return 1
  sed 's/^/# /' "$tmp/learn.out"
  awk '/^loss:/ { exit !($5 < 0.7 * $3) }' "$tmp/learn.out"
}
ok "loss goes down over 50 steps" learn
ok "measured.json has the planner's keys" sh -c "grep -q '\"step_s\"' '$tmp/m.json' && grep -q '\"bubble\"' '$tmp/m.json' && grep -q '\"activations\"' '$tmp/m.json' && grep -q '\"step_s_max\"' '$tmp/m.json'"
ok "trace has both ranks' processes" sh -c "grep -q '\"measured rank 1' '$tmp/t.json' && grep -q '\"traceEvents\"' '$tmp/t.json'"

# Bad input: every rank exits 2, the message printed once.
wrong_size () {
  run_np 4 "$MPPLAN" exec -p "$tmp/dp2.yaml" >"$tmp/ws.out" 2>"$tmp/ws.err"
  [ $? -eq 2 ] && [ "$(grep -c 'runs on 2 ranks' "$tmp/ws.err")" -eq 1 ]
}
ok "world size not the plan's: exit 2, one message" wrong_size
missing () {
  run_np 2 "$MPPLAN" exec -p "$tmp/nope.yaml" >"$tmp/mi.out" 2>"$tmp/mi.err"
  [ $? -eq 2 ] && [ "$(grep -c 'nope.yaml' "$tmp/mi.err")" -eq 1 ]
}
ok "missing plan file: exit 2, one message" missing

# A rank failing mid-run (the driver's test hook fails rank 1 at its second step, rank 0
# waiting for it in a collective): the job ends within the timeout, non-zero, rank named.
fail_rank () {
  MPPLAN_EXEC_FAIL_RANK=1 run_np 2 "$MPPLAN" exec -p "$tmp/dp2.yaml" --steps 3 --warmup 0 \
    >"$tmp/fr.out" 2>"$tmp/fr.err"
  st=$?
  sed 's/^/# /' "$tmp/fr.err" | head -3
  [ $st -ne 0 ] && [ $st -ne 124 ] && grep -q 'rank 1 failed: failure injected' "$tmp/fr.err"
}
ok "a rank failing mid-run ends the job, rank named" fail_rank
# Out of memory: the plan's cluster swapped for one whose devices hold 6 MiB.
oom () {
  sed -e 's/memory: 2 GiB/memory: 6 MiB/' -e 's/device_overhead: .*/device_overhead: 0 B/' \
    "$data/cluster-host2.yaml" >"$tmp/tiny.yaml" || return 1
  sed "s|^cluster: .*|cluster: $tmp/tiny.yaml:1|" "$tmp/mdp2.yaml" >"$tmp/oom.yaml" || return 1
  run_np 2 "$MPPLAN" exec -p "$tmp/oom.yaml" --steps 1 --warmup 0 >"$tmp/oom.out" 2>"$tmp/oom.err"
  st=$?
  sed 's/^/# /' "$tmp/oom.err" | head -2
  [ $st -ne 0 ] && [ $st -ne 124 ] && grep -q 'out of memory on rank .*: asked .* bytes' "$tmp/oom.err"
}
ok "out of memory: named, with the size asked" oom
# What the planner costs but the kernels do not run is refused by name (exit 2), never run
# as something else: multi-head latent attention with attention biases (DeepSeek's MLA and
# the other attention variants run: exec-attn.sh).
refuses () {
  { cat "$data/model-exec.yaml"; printf '%s\n' "$2"; } >"$tmp/$1.model.yaml" || return 1
  "$MPPLAN" plan -q -m "$tmp/$1.model.yaml" -c "$data/cluster-host1.yaml" \
    -o "$tmp/$1.yaml" >/dev/null || return 1
  "$MPPLAN" exec -p "$tmp/$1.yaml" --steps 1 >"$tmp/$1.out" 2>"$tmp/$1.err"
  st=$?
  sed 's/^/# /' "$tmp/$1.err" | head -2
  [ $st -eq 2 ] && grep -q "does not run $3" "$tmp/$1.err" &&
    "$MPPLAN" exec --help | grep -q "refused by name.*$3"
}
ok "MLA with attention biases is refused by name" refuses mla \
  'attention: {mla: {kv_lora_rank: 8, qk_nope_head_dim: 4, qk_rope_head_dim: 4, v_head_dim: 8}}' \
  'multi-head latent attention with attention biases'
# --dry-run: a plan of any size checked as the ranks check it, with no MPI: a 256-rank
# plan's mpirun line; the refusals above, exit 2, the same message.
dry_run () {
  "$MPPLAN" plan -q -m gpt3-125m -c dgx-h100 -o "$tmp/big.yaml" >/dev/null &&
  "$MPPLAN" exec -p "$tmp/big.yaml" --dry-run >"$tmp/dry.out" 2>&1 &&
  sed 's/^/# /' "$tmp/dry.out" && grep -q 'on 256 ranks: mpirun -np 256 mpplan exec' "$tmp/dry.out" &&
  { "$MPPLAN" exec -p "$tmp/mla.yaml" --dry-run 2>"$tmp/dry.err"; [ $? -eq 2 ]; } &&
  cmp -s "$tmp/dry.err" "$tmp/mla.err"
}
ok "--dry-run checks a 256-rank plan without MPI, refuses as exec does" dry_run
# Every refusal in --help's words (exec/limits.c is the one list): uniform groups under
# ZeRO-3 and on an mlp model, checked by --dry-run (no MPI).
refused_dry () {
  "$MPPLAN" plan -q -m "$2" -b 4 -c "$data/cluster-host2.yaml" --fix "$3" -o "$tmp/$1.yaml" \
    >/dev/null || return 1
  "$MPPLAN" exec -p "$tmp/$1.yaml" --dry-run 2>"$tmp/$1.err"
  st=$?
  sed 's/^/# /' "$tmp/$1.err"
  [ $st -eq 2 ] && grep -qF "does not run $4" "$tmp/$1.err" &&
    "$MPPLAN" exec --help | grep -qF "$4"
}
ok "uniform recompute under ZeRO-3 is refused by name, as --help lists it" refused_dry uz3 \
  "$top_srcdir/examples/models/tiny-gpt.yaml" \
  dp=2,tp=1,pp=1,zero=3,recompute=full,recompute_method=uniform,recompute_num_layers=2 \
  'uniform recompute (recompute_method=uniform) under ZeRO-3'
ok "uniform recompute of an mlp is refused by name, as --help lists it" refused_dry umlp \
  "$top_srcdir/examples/models/mlp-1024.yaml" \
  dp=2,tp=1,pp=1,recompute=full,recompute_method=uniform,recompute_num_layers=2 \
  "uniform recompute in groups of an mlp model's dense layers"
tap_done
