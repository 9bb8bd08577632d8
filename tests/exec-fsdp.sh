#!/bin/sh
# exec-fsdp.sh - FSDP as real stacks run it under `mpplan exec --check` (each step's loss
# and gradient norm against one rank, 1e-5 relative), two steps so that the replicas'
# updates must agree: HSDP (zero_shard, issue 17) over 2 x 2 replicas with ZeRO-1, 2 and 3,
# ZeRO-3 with reshard_after_forward false alone and with HSDP, with pp2 and with tp2, HSDP
# over dp x cp, ZeRO-3 under torchtitan (its root unit); the measured gradient memory of the HSDP plans within 10% of the
# prediction and above plain ZeRO's (a shard of half the replicas); bad fields exit 2.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/mpi-env.sh"

# check NAME PINS [SED]: plans $model for $batch sequences on 4 host cores honouring PINS
# (the plan file edited by SED) and runs it with --check for two steps.
check () {
  "$MPPLAN" plan -q -m "$model" -b "$batch" -c "$data/cluster-host4.yaml" --fix "$2" \
    -o "$tmp/$1.yaml" >/dev/null || { echo "# no plan for $2"; return 1; }
  if [ -n "$3" ]; then
    sed -e "$3" "$tmp/$1.yaml" >"$tmp/$1.e.yaml" && mv "$tmp/$1.e.yaml" "$tmp/$1.yaml" || return 1
  fi
  sed -n '/^parallel:/,/^layers_per_chunk/p' "$tmp/$1.yaml" | tr -s ' \n' ' ' | sed 's/^/# /'; echo
  run_np 4 "$MPPLAN" exec -p "$tmp/$1.yaml" --steps 2 --warmup 0 --check -o "$tmp/$1.json" \
    >"$tmp/$1.out" 2>"$tmp/$1.err"
  st=$?
  sed 's/^/# /' "$tmp/$1.out"
  [ $st -eq 0 ] && grep -q '^check: ok' "$tmp/$1.out" || { sed 's/^/# /' "$tmp/$1.err"; return 1; }
}

model=$data/model-exec.yaml
batch=8
ok "hsdp 2x2, zero 1" check h1 dp=4,tp=1,pp=1,zero=1,zero_shard=2
ok "hsdp 2x2 over dp2 x cp2, zero 2" check h2cp dp=2,tp=1,pp=1,cp=2,zero=2,zero_shard=2,num_micro_batches=2
ok "zero 3, reshard_after_forward false, dp2 x pp2" check k3pp dp=2,tp=1,pp=2,zero=3,reshard_after_forward=false,num_micro_batches=2
ok "zero 3, reshard_after_forward false, dp2 x tp2" check k3tp dp=2,tp=2,pp=1,zero=3,reshard_after_forward=false,num_micro_batches=2
# torchtitan's root FSDP unit (fsdp20): the embedding and head gathered once a micro-batch
# and held from forward to backward, with and without a pipeline.
ok "zero 3 under torchtitan (root unit), dp4" check t3 dp=4,tp=1,pp=1,zero=3,reshard_after_forward=true,num_micro_batches=2,stack=torchtitan
ok "zero 3 under torchtitan (root unit), dp2 x pp2" check t3pp dp=2,tp=1,pp=2,zero=3,reshard_after_forward=true,num_micro_batches=2,stack=torchtitan

# Gradient memory on tiny-gpt (13 MB of gradients) with 2 MiB buckets, as tests/exec.sh
# does for ZeRO 0-3: the shard over 2 of the 4 replicas (plus the buckets in flight).
model=$top_srcdir/examples/models/tiny-gpt.yaml
batch=4
bucket='s/^\(  zero: .*\)$/\1\n  bucket_bytes: 2 MiB/'
hsdp_mem () {
  check "$1" "dp=4,tp=1,pp=1,zero=$2,zero_shard=2,num_micro_batches=1$3" "$bucket" &&
  grads_within "$tmp/$1.json" "$1" "$tmp/$1.measured"
}
ok "hsdp 2x2, zero 2: gradient memory within 10% of the prediction" hsdp_mem hm2 2
ok "hsdp 2x2, zero 3, reshard_after_forward false: gradient memory within 10%" hsdp_mem hm3 3 \
  ,reshard_after_forward=false
plain_mem () {
  check hp2 dp=4,tp=1,pp=1,zero=2,num_micro_batches=1 "$bucket" &&
  grads_within "$tmp/hp2.json" "plain zero 2" "$tmp/hp2.measured" &&
  [ "$(cat "$tmp/hm2.measured")" -gt "$(cat "$tmp/hp2.measured")" ]
}
ok "hsdp holds more gradient memory than plain zero 2" plain_mem

# Bad fields: a clear message naming the field, exit 2.
bad () {
  sed -e "$2" "$tmp/hm2.yaml" >"$tmp/bad$1.yaml" &&
  { "$MPPLAN" exec -p "$tmp/bad$1.yaml" --steps 1 2>"$tmp/bad$1.err"; [ $? -eq 2 ]; } &&
  sed 's/^/# /' "$tmp/bad$1.err" && grep -q "$3" "$tmp/bad$1.err"
}
ok "zero_shard not dividing dp * cp exits 2" bad 1 's/zero_shard: 2/zero_shard: 3/' 'zero_shard = 3'
ok "reshard_after_forward false without ZeRO-3 exits 2" bad 2 \
  's/^\(  zero: .*\)$/\1\n  reshard_after_forward: false/' 'reshard_after_forward'
ok "zero_shard: 0 exits 2" bad 3 's/zero_shard: 2/zero_shard: 0/' 'zero_shard'
tap_done
