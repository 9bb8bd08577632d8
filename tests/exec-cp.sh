#!/bin/sh
# exec-cp.sh - context-parallel plans under `mpplan exec --check` (each step's loss and
# gradient norm against one rank, 1e-5 relative): cp2 and cp2 x tp2 on tiny-gpt (learned
# positions), cp2 with dp2 and ZeRO-1/2 (gradients reduced over dp * cp), cp2 x pp2, and on
# a rotary, grouped-query model cp2, cp4 and cp2 x tp2 with sequence parallelism and full
# recompute (the ring runs again in the backward), and K/V all-gathered instead of the ring
# (cp_comm_type allgather). The plans are `mpplan plan --fix`'s.
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/mpi-env.sh"

# check NAME RANKS PINS: plans $model for $batch sequences on RANKS host cores honouring
# PINS and runs it with --check; passes on "check: ok".
check () {
  "$MPPLAN" plan -q -m "$model" -b "$batch" -c "$data/cluster-host$2.yaml" --fix "$3" \
    -o "$tmp/$1.yaml" >/dev/null || { echo "# no plan for $3"; return 1; }
  grep -q '^  cp: [2-9]' "$tmp/$1.yaml" || { echo "# the plan is not context parallel"; return 1; }
  run_check "$1" "$2"
}

model=$top_srcdir/examples/models/tiny-gpt.yaml
batch=2
ok "cp2" check cp2 2 dp=1,tp=1,pp=1,cp=2
ok "cp2: cp_comm is a phase of its own in report and its HTML page" phase_reported cp2 cp_comm
batch=4
ok "cp2 x tp2" check cp2tp2 4 dp=1,tp=2,pp=1,cp=2,sequence_parallel=false
# The rest on the much smaller model-exec (learned positions too), to stay well under a
# minute on two cores.
model=$data/model-exec.yaml
ok "cp2 x dp2, zero 1" check cp2dp2 4 dp=2,tp=1,pp=1,cp=2,zero=1
ok "cp2 x dp2, zero 2" check cp2dp2z2 4 dp=2,tp=1,pp=1,cp=2,zero=2,num_micro_batches=2
ok "cp2 x pp2 (interleaved, uneven chunks)" check cp2pp2 4 dp=1,tp=1,pp=2,cp=2,num_micro_batches=2

model=$data/model-exec-llama.yaml
ok "rotary, grouped-query: cp2" check lcp2 2 dp=1,tp=1,pp=1,cp=2,recompute=none
ok "rotary, grouped-query: cp4" check lcp4 4 dp=1,tp=1,pp=1,cp=4,recompute=none
ok "rotary, grouped-query: cp2 x tp2, sequence parallel, full recompute" check lcp2tp2 4 \
  dp=1,tp=2,pp=1,cp=2,sequence_parallel=true,recompute=full
# cp_comm_type allgather (Transformer Engine's all-gather CP): K/V gathered over the cp
# group, dK/dV reduce-scattered back; the same numbers as one rank.
ok "rotary, grouped-query: cp4, K/V all-gathered" check lcp4ag 4 \
  dp=1,tp=1,pp=1,cp=4,recompute=none,cp_comm_type=allgather
ok "... its plan file says so" grep -q '^  cp_comm_type: allgather$' "$tmp/lcp4ag.yaml"
ok "rotary, grouped-query: cp2 x dp2, K/V all-gathered, full recompute" check lcp2dp2ag 4 \
  dp=2,tp=1,pp=1,cp=2,recompute=full,cp_comm_type=allgather

# A sequence that 2 cp chunks do not divide is refused, named, exit 2 (seq_len 32: cp 32).
odd () {
  "$MPPLAN" plan -q -m "$model" -b 4 -c "$data/cluster-host2.yaml" --fix dp=1,tp=1,pp=1,cp=2 \
    -o "$tmp/odd.yaml" >/dev/null || return 1
  sed 's/^seq_len: 32/seq_len: 30/' "$model" >"$tmp/odd-model.yaml"
  sed "s|^model: .*|model: $tmp/odd-model.yaml|" "$tmp/odd.yaml" >"$tmp/odd2.yaml"
  timeout 60 "$MPIRUN" -np 2 --oversubscribe "$MPPLAN" exec -p "$tmp/odd2.yaml" --steps 1 \
    >"$tmp/odd.out" 2>"$tmp/odd.err"
  st=$?
  sed 's/^/# /' "$tmp/odd.err" | head -2
  [ $st -eq 2 ] && grep -q 'context parallelism splits each sequence' "$tmp/odd.err"
}
ok "a sequence 2 cp does not divide: refused by name, exit 2" odd
tap_done
