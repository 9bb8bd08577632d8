#!/bin/sh
# exec-attn.sh - `mpplan exec --check` under mpirun on the attention and block variants of
# the model zoo (issue 17): each plan's loss and gradient norm of every step against one
# rank running the same micro-batches (1e-5 relative). tiny-gemma (sliding-window and full
# blocks, qk-norm, scores and logits soft-capped, post-norms, scaled embeddings, geglu,
# head_dim != hidden / heads) and tiny-gpt-oss (attention sinks, biased attention beside
# a bias-free MLP, windows) at tp2 with sequence parallelism, pp2, dp2 and cp2 (ring
# attention with the window mask), tp2 x pp2 and full recompute; multi-head latent
# attention (tiny-mla, tiny-mla-lite without the q latent) at tp2 with and without
# sequence parallelism, dp2 and cp2. One step, no warm-up, as exec.sh (CI runs this under
# ASan on 2 cores).
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/mpi-env.sh"

models=$top_srcdir/examples/models
# check MODEL NAME RANKS PINS: the best plan for MODEL honouring PINS, run with --check.
check () {
  "$MPPLAN" plan -q -m "$models/$1.yaml" -b 2 -c "$data/cluster-host$3.yaml" --fix "$4" \
    -o "$tmp/$2.yaml" >/dev/null || { echo "# no plan for $4"; return 1; }
  run_check "$2" "$3"
}

for m in tiny-gemma tiny-gpt-oss; do
  ok "$m: tp2 with sequence parallel" check $m $m-tp2 2 dp=1,tp=2,pp=1,sequence_parallel=true
  ok "$m: pp2" check $m $m-pp2 2 dp=1,tp=1,pp=2
  ok "$m: dp2" check $m $m-dp2 2 dp=2,tp=1,pp=1,zero=0
  ok "$m: cp2 (ring attention, window mask)" check $m $m-cp2 2 dp=1,tp=1,pp=1,cp=2
done
ok "tiny-gemma: tp2 x pp2 on four ranks" check tiny-gemma gemma-tp2pp2 4 dp=1,tp=2,pp=2
ok "tiny-gemma: full recompute, tp2" check tiny-gemma gemma-rc 2 dp=1,tp=2,pp=1,recompute=full

# MLA (exec/model-mla.c): the replicated down projections' gradients summed over tp with
# and without sequence parallelism, the shared rotary key, K and V of different widths
# around the cp ring; tiny-mla-lite's q straight from the gathered hidden state.
ok "tiny-mla: tp2 with sequence parallel" check tiny-mla mla-tp2sp 2 dp=1,tp=2,pp=1,sequence_parallel=true
ok "tiny-mla: tp2" check tiny-mla mla-tp2 2 dp=1,tp=2,pp=1,sequence_parallel=false
ok "tiny-mla: dp2" check tiny-mla mla-dp2 2 dp=2,tp=1,pp=1,zero=0
ok "tiny-mla: cp2 (ring with K and V of different widths)" check tiny-mla mla-cp2 2 dp=1,tp=1,pp=1,cp=2
ok "tiny-mla-lite (no q latent): tp2 with sequence parallel" check tiny-mla-lite mla-lite-tp2 2 dp=1,tp=2,pp=1,sequence_parallel=true
tap_done
