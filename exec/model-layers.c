/* model-layers.c - forward and backward of one model layer for one micro-batch on one rank:
 * the embedding (vocab-parallel), a transformer block (Megatron's column-parallel qkv and
 * fc1, row-parallel attn_out and fc2, with all-reduce, or all-gather / reduce-scatter
 * under sequence parallelism), and the head (final norm, vocab-parallel output GEMM and
 * cross-entropy). The tensor-parallel collectives are inside, timed into ex->tp_s.
 *
 * Shapes: N = micro_batch_size * seq_len rows per micro-batch; the residual stream of a
 * rank is (Ns, C): all N rows, or under sequence parallelism its N / tp contiguous rows.
 * Activations for backward live in the layer's acts[mb] from forward to backward; full
 * recompute keeps none (backward re-runs the forward first), selective keeps no attention
 * probabilities (the attention backward recomputes them from q, k and the row lse). */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec-private.h"
#include "common/error.h"

#include <math.h>
#include <string.h>

#define NORM_EPS 1e-5f
#define ROPE_THETA 10000.0f
enum { /* block */
  A_LN1, A_M1, A_R1, A_H1, A_QKV, A_ATT, A_LSE, A_PROBS, A_X2, A_LN2, A_M2, A_R2, A_H2,
  A_FC1, A_ACT,
  /* the attention variants' (model-attn.c), after an MoE block's slots (model-moe.c):
   * qk-norm's raw heads and rstd; each post-norm's input, mean and rstd */
  A_QKRAW = 24, A_QKR, A_PA, A_PAM, A_PAR, A_PM, A_PMM, A_PMR,
};
enum { /* head */
  H_LN, H_M, H_R, H_H, H_LOGITS, H_LSE,
};

/* Transient buffers of one call, released together (model-shared.c). */
typedef MpExecTmp Tmp;

static float *
tmp_floats (Tmp *t, gsize n, GError **error)
{
  return mp_exec_tmp_floats (t, n, error);
}

static void
tmp_release (Tmp *t)
{
  mp_exec_tmp_release (t);
}

/* The transformer's residual stream is C wide. */
static float *
tp_reduce_rows (MpExec *ex, float *full, float *out, GError **error)
{
  return mp_exec_tp_reduce_width (ex, full, out, ex->C, error);
}

static float *
tp_gather_rows (MpExec *ex, const float *shard, float *full, GError **error)
{
  return mp_exec_tp_gather_width (ex, shard, full, ex->C, error);
}

/* ---- helpers ----------------------------------------------------------------------- */

static float *
P (const ExLayer *L, guint i)
{
  return ((ExTensor *) g_ptr_array_index (L->uses, i))->param;
}

static float *
G (const ExLayer *L, guint i)
{
  return ((ExTensor *) g_ptr_array_index (L->uses, i))->grad;
}

/* Adds BIAS (C) to each of ROWS rows of X. */
static void
add_rows (MpExec *ex, float *x, const float *bias, int rows, int C)
{
  if (bias == NULL)
    return;
  for (int r = 0; r < rows; r++)
    ex->k->add (ex->be, x + (gsize) r * C, bias, (gsize) C);
}

static void
norm_forward (MpExec *ex, float *out, float *mean, float *rstd, const float *inp,
              const float *w, const float *b, int rows)
{
  if (ex->model->norm == MP_NORM_LAYERNORM)
    ex->k->layernorm_forward (ex->be, out, mean, rstd, inp, w, b, rows, ex->C, NORM_EPS);
  else
    ex->k->rmsnorm_forward (ex->be, out, rstd, inp, w, rows, ex->C, NORM_EPS);
}

/* Norm backward on this rank's rows; under sequence parallelism the weight gradients
 * are partial sums over tp, summed once per step (tp_partial, mp_exec_optimizer). */
static void
norm_backward (MpExec *ex, float *dinp, float *dw, float *db, const float *dout,
               const float *inp, const float *w, const float *mean, const float *rstd)
{
  if (ex->model->norm == MP_NORM_LAYERNORM)
    ex->k->layernorm_backward (ex->be, dinp, dw, db, dout, inp, w, mean, rstd, ex->Ns, ex->C);
  else
    ex->k->rmsnorm_backward (ex->be, dinp, dw, dout, inp, w, rstd, ex->Ns, ex->C);
}

/* The micro-batch's tokens (N + 1 per sequence: inputs and next-token targets) of data
 * rank data_rank in this step: sequence g of the global batch has x0 drawn from the seeded
 * generator, then x(t+1) = (5 x(t) + 1 + (g mod 3)) mod V, a deterministic pattern a
 * model can learn (the loss goes down), identical whatever the plan; under context
 * parallelism the rank's positions of each sequence. */
static void
make_tokens (const MpExec *ex, guint mb, int *inputs, int *targets)
{
  guint64 first = (guint64) ex->step * ex->global_batch
                  + ((guint64) ex->data_rank * ex->M + mb) * ex->mbs;
  g_autofree int *seq = g_new (int, ex->T + 1);
  for (int b = 0; b < ex->mbs; b++)
    {
      guint64 g = first + (guint64) b;
      guint64 x = mpk_rng_u64 (ex->seed, UINT64_C (0xda7a), g) % (guint64) ex->V;
      for (int t = 0; t <= ex->T; t++, x = (5 * x + 1 + g % 3) % (guint64) ex->V)
        seq[t] = (int) x;
      /* the positions this rank holds (all of them without context parallelism) */
      for (int t = 0; t < ex->Tl; t++)
        {
          int p = mp_exec_position (ex, t);
          if (inputs)
            inputs[b * ex->Tl + t] = seq[p];
          if (targets)
            targets[b * ex->Tl + t] = seq[p + 1];
        }
    }
}

static float **
slot (MpExec *ex, float **table, guint layer, guint mb)
{
  return &table[layer * ex->M + mb];
}

/* The layer's output buffer (Ns, C): the next layer's input. */
static float *
new_output (MpExec *ex, guint layer, guint mb, GError **error)
{
  float **out = slot (ex, ex->input, layer + 1, mb);
  g_assert (*out == NULL);
  *out = ex->be->ops->alloc (ex->be, (gsize) ex->Ns * ex->C * sizeof (float),
                             MP_MEM_ACTIVATIONS, error);
  return *out;
}

/* The gradient of the layer's input (Ns, C), zeroed, for backward to accumulate into. */
static float *
new_dinput (MpExec *ex, guint layer, guint mb, GError **error)
{
  float **d = slot (ex, ex->dinput, layer, mb);
  g_assert (*d == NULL);
  *d = ex->be->ops->alloc (ex->be, (gsize) ex->Ns * ex->C * sizeof (float),
                           MP_MEM_ACTIVATIONS, error);
  return *d;
}

static void
drop (MpExec *ex, float **p)
{
  ex->be->ops->release (ex->be, *p);
  *p = NULL;
}

/* ---- embedding --------------------------------------------------------------------- */

static gboolean
embedding_forward (MpExec *ex, guint l, guint mb, GError **error)
{
  const ExLayer *L = &ex->layers[l];
  Tmp t = { ex };
  g_autofree int *tokens = g_new (int, ex->N);
  make_tokens (ex, mb, tokens, NULL);
  float *out = new_output (ex, l, mb, error);
  float *full = out ? tmp_floats (&t, (gsize) ex->N * ex->C, error) : NULL;
  if (full == NULL)
    goto fail;
  /* (N, C): this rank's vocabulary rows, zeros for the others' tokens; summed over tp. */
  ex->k->embedding_forward (ex->be, full, tokens, P (L, 0), NULL, ex->N, ex->Tl, ex->C, ex->v0,
                            ex->Vl);
  float *rows = tp_reduce_rows (ex, full, out, error);
  if (rows == NULL)
    goto fail;
  if (rows != out)
    ex->be->ops->copy (ex->be, out, rows, (gsize) ex->Ns * ex->C * sizeof (float));
  if (ex->model->embed_scale)      /* Gemma: the token embedding times sqrt (hidden) */
    ex->k->attn->scale (ex->be, out, (gsize) ex->Ns * ex->C, sqrtf ((float) ex->C));
  if (L->uses->len > 1)            /* learned positions, replicated: row r at its position */
    {
      int row0 = ex->sp ? (int) ex->tp_rank * ex->Ns : 0;
      for (int r = 0; r < ex->Ns; r++)
        ex->k->add (ex->be, out + (gsize) r * ex->C,
                    P (L, 1) + (gsize) mp_exec_position (ex, row0 + r) * ex->C, (gsize) ex->C);
    }
  tmp_release (&t);
  return TRUE;
fail:
  tmp_release (&t);
  return FALSE;
}

static gboolean
embedding_backward (MpExec *ex, guint l, guint mb, GError **error)
{
  const ExLayer *L = &ex->layers[l];
  Tmp t = { ex };
  g_autofree int *tokens = g_new (int, ex->N);
  make_tokens (ex, mb, tokens, NULL);
  float **dy = slot (ex, ex->dinput, l + 1, mb);
  float *full = ex->sp ? tmp_floats (&t, (gsize) ex->N * ex->C, error) : NULL;
  if (ex->sp && full == NULL)
    goto fail;
  const float *d = tp_gather_rows (ex, *dy, full, error);
  if (d == NULL)
    goto fail;
  float *scaled = ex->model->embed_scale ? tmp_floats (&t, (gsize) ex->N * ex->C, error) : NULL;
  if (ex->model->embed_scale)
    {
      if (scaled == NULL)
        goto fail;
      ex->be->ops->copy (ex->be, scaled, d, (gsize) ex->N * ex->C * sizeof (float));
      ex->k->attn->scale (ex->be, scaled, (gsize) ex->N * ex->C, sqrtf ((float) ex->C));
    }
  float *dtok = scaled != NULL ? scaled : (float *) d;
  ex->k->embedding_backward (ex->be, G (L, 0), NULL, dtok, tokens, ex->N, ex->Tl, ex->C,
                             ex->v0, ex->Vl);
  if (L->uses->len > 1)            /* from all N rows, so identical on every tp rank */
    for (int r = 0; r < ex->N; r++)
      ex->k->add (ex->be, G (L, 1) + (gsize) mp_exec_position (ex, r) * ex->C,
                  d + (gsize) r * ex->C, (gsize) ex->C);
  drop (ex, dy);
  tmp_release (&t);
  return TRUE;
fail:
  tmp_release (&t);
  return FALSE;
}

/* ---- transformer block ------------------------------------------------------------- */

/* Indexes into a block's `uses`, which depend on whether norms and linears have biases. */
typedef struct {
  int ln1w, ln1b, wqkv, bqkv, wo, bo, qn, kn, sink, pn1w, pn1b, pn2w, pn2b, ln2w, ln2b, w1, b1,
    w2, b2;
} BlockIdx;

static BlockIdx
block_idx (const MpExec *ex)
{
  const MpModel *m = ex->model;
  gboolean nb = m->norm == MP_NORM_LAYERNORM, lb = m->bias, pn = m->post_norms;
  BlockIdx i;
  int k = 0;
  i.ln1w = k++;
  i.ln1b = nb ? k++ : -1;
  i.wqkv = k;                      /* MLA: its projections and latent norms from here */
  k += m->kv_lora_rank > 0 ? mp_exec_mla_n_tensors (m) : 1;
  i.bqkv = mp_model_qkv_bias (m) ? k++ : -1;
  i.wo = k++;
  i.bo = mp_model_out_bias (m) ? k++ : -1;
  /* the variants' (mp_exec_attn_setup's order) */
  i.qn = m->qk_norm ? k++ : -1;
  i.kn = m->qk_norm ? k++ : -1;
  i.sink = m->attn_sinks ? k++ : -1;
  i.pn1w = pn ? k++ : -1;
  i.pn1b = pn && nb ? k++ : -1;
  i.pn2w = pn ? k++ : -1;
  i.pn2b = pn && nb ? k++ : -1;
  i.ln2w = k++;
  i.ln2b = nb ? k++ : -1;
  i.w1 = k++;
  i.b1 = lb ? k++ : -1;
  i.w2 = k++;
  i.b2 = lb ? k++ : -1;
  return i;
}

static float *
Pi (const ExLayer *L, int i)
{
  return i < 0 ? NULL : P (L, (guint) i);
}

static float *
Gi (const ExLayer *L, int i)
{
  return i < 0 ? NULL : G (L, (guint) i);
}

/* Block L's attention: its window (0: full) and the model's score cap. */
static MpkAttnShape
attn_shape (const MpExec *ex, const ExLayer *L)
{
  int qkv = (ex->NHl + ex->NKVl) * ex->HD + ex->NKVl * ex->DV;
  return (MpkAttnShape) { ex->mbs, ex->Tl, ex->NHl, ex->NKVl, ex->HD, qkv, qkv,
                          ex->NHl * ex->DV, (int) L->ir->window,
                          (float) ex->model->attn_softcap, ex->DV, 0 };
}

/* The modules selective recompute re-runs (none without it). */
static guint
selective_modules (const MpExec *ex)
{
  return ex->cfg.recompute == MP_RECOMPUTE_SELECTIVE ? mp_recompute_modules_of (&ex->cfg) : 0;
}

/* The variants' slots: qk-norm's raw q and k heads with their rstd, the post-norms'
 * inputs and statistics. */
static gboolean
variant_acts (MpExec *ex, Acts *a, GError **error)
{
  gsize N = ex->N, Ns = ex->Ns, C = ex->C, heads = (gsize) ex->NHl + ex->NKVl;
  if (ex->model->qk_norm
      && !(mp_exec_act_alloc (ex, a, A_QKRAW, N * heads * ex->HD, error)
           && mp_exec_act_alloc (ex, a, A_QKR, N * heads, error)))
    return FALSE;
  for (int i = A_PA; i <= A_PMR && ex->model->post_norms; i++)
    if (!mp_exec_act_alloc (ex, a, i, i == A_PA || i == A_PM ? Ns * C : Ns, error))
      return FALSE;
  return TRUE;
}

/* Does the block gather its first norm's output under sequence parallelism? Not for MLA
 * with a q latent: its replicated down projections run on the rank's rows (model-mla.c). */
static gboolean
gathers_h1 (const MpExec *ex)
{
  return ex->model->kv_lora_rank == 0 || mp_exec_mla_reads_hidden (ex->model);
}

/* Allocates the block's activation slots (an MoE block's MLP allocates its own). */
static gboolean
block_acts (MpExec *ex, const ExLayer *L, Acts *a, GError **error)
{
  gboolean dense = !L->ir->moe;
  gsize N = ex->N, Ns = ex->Ns, C = ex->C, f1 = ex->swiglu ? 2 * ex->Fl : ex->Fl;
  MpkAttnShape s = attn_shape (ex, L);
  /* probabilities are kept by unfused attention unless the block or its attention core is
   * recomputed; the ring (cp > 1) never keeps them: each block's are recomputed */
  gboolean probs = ex->cfg.recompute != MP_RECOMPUTE_FULL && !ex->cfg.flash_attention
                   && !(selective_modules (ex) & MP_RECOMPUTE_CORE_ATTN) && ex->cp == 1;
  return mp_exec_act_alloc (ex, a, A_LN1, Ns * C, error) && mp_exec_act_alloc (ex, a, A_M1, Ns, error)
         && mp_exec_act_alloc (ex, a, A_R1, Ns, error)
         && (!ex->sp || !gathers_h1 (ex) || mp_exec_act_alloc (ex, a, A_H1, N * C, error))
         && mp_exec_act_alloc (ex, a, A_QKV, N * s.ldq, error)
         && mp_exec_act_alloc (ex, a, A_ATT, N * s.ldo, error)
         && mp_exec_act_alloc (ex, a, A_LSE, (gsize) ex->mbs * ex->NHl * ex->Tl, error)
         && (!probs || mp_exec_act_alloc (ex, a, A_PROBS, (gsize) ex->mbs * ex->NHl * ex->T * ex->T,
                                  error))
         && mp_exec_act_alloc (ex, a, A_X2, Ns * C, error) && mp_exec_act_alloc (ex, a, A_LN2, Ns * C, error)
         && mp_exec_act_alloc (ex, a, A_M2, Ns, error) && mp_exec_act_alloc (ex, a, A_R2, Ns, error)
         && (!ex->sp || mp_exec_act_alloc (ex, a, A_H2, N * C, error))
         && (!dense || mp_exec_act_alloc (ex, a, A_FC1, N * f1, error))
         && (!dense || mp_exec_act_alloc (ex, a, A_ACT, N * (gsize) ex->Fl, error))
         && variant_acts (ex, a, error)
         && (ex->model->kv_lora_rank == 0 || mp_exec_mla_acts (ex, a, error));
}

/* Norm WHICH (1: before attention, 2: before the MLP) on X into A's slots, then under
 * sequence parallelism its gather; returns the GEMM input (N, C), NULL on failure. */
static const float *
block_norm (MpExec *ex, const ExLayer *L, int which, const float *x, Acts *a, GError **error)
{
  BlockIdx I = block_idx (ex);
  gboolean one = which == 1;
  int ln = one ? A_LN1 : A_LN2, h = one ? A_H1 : A_H2;
  norm_forward (ex, a->buf[ln], a->buf[one ? A_M1 : A_M2], a->buf[one ? A_R1 : A_R2], x,
                Pi (L, one ? I.ln1w : I.ln2w), Pi (L, one ? I.ln1b : I.ln2b), ex->Ns);
  if (one && !gathers_h1 (ex))
    return a->buf[ln];
  return tp_gather_rows (ex, a->buf[ln], a->buf[h], error);
}

/* Post-norm (Gemma 2/3) WHICH (1: attention's, 2: the MLP's) of the branch output X
 * (Ns, C), in place, its input kept in A; nothing without post-norms. */
static void
post_norm (MpExec *ex, const ExLayer *L, int which, float *x, Acts *a)
{
  if (!ex->model->post_norms)
    return;
  BlockIdx I = block_idx (ex);
  int in = which == 1 ? A_PA : A_PM;
  ex->be->ops->copy (ex->be, a->buf[in], x, (gsize) ex->Ns * ex->C * sizeof (float));
  norm_forward (ex, x, a->buf[in + 1], a->buf[in + 2], a->buf[in],
                Pi (L, which == 1 ? I.pn1w : I.pn2w), Pi (L, which == 1 ? I.pn1b : I.pn2b),
                ex->Ns);
}

/* The gradient at post-norm WHICH's input from DY at its output (Ns, C), in T; DY itself
 * without post-norms. NULL on failure. */
static const float *
post_norm_backward (MpExec *ex, const ExLayer *L, int which, const float *dy, Acts *a,
                    Tmp *t, GError **error)
{
  if (!ex->model->post_norms)
    return dy;
  BlockIdx I = block_idx (ex);
  int in = which == 1 ? A_PA : A_PM;
  float *d = tmp_floats (t, (gsize) ex->Ns * ex->C, error);
  gboolean one = which == 1;
  if (d == NULL)
    return NULL;
  norm_backward (ex, d, Gi (L, one ? I.pn1w : I.pn2w), Gi (L, one ? I.pn1b : I.pn2b), dy,
                 a->buf[in], Pi (L, one ? I.pn1w : I.pn2w), a->buf[in + 1], a->buf[in + 2]);
  return d;
}

/* fc1 and the activation on H2 (N, C) into A's FC1 and ACT. */
static void
block_fc1 (MpExec *ex, const ExLayer *L, const float *h2, Acts *a)
{
  const MpKernelOps *k = ex->k;
  BlockIdx I = block_idx (ex);
  int N = ex->N, f1 = ex->swiglu ? 2 * ex->Fl : ex->Fl;
  k->matmul_forward (ex->be, a->buf[A_FC1], h2, Pi (L, I.w1), Pi (L, I.b1), N, ex->C, f1);
  mp_exec_act_forward (ex, a->buf[A_ACT], a->buf[A_FC1], N, ex->Fl);
}

/* Runs the block on X (Ns, C) into Y (Ns, C), filling A. */
static gboolean
block_run (MpExec *ex, const ExLayer *L, const float *x, float *y, Acts *a, GError **error)
{
  const MpKernelOps *k = ex->k;
  BlockIdx I = block_idx (ex);
  MpkAttnShape s = attn_shape (ex, L);
  int N = ex->N, Ns = ex->Ns, C = ex->C;
  Tmp t = { ex };
  float *proj = tmp_floats (&t, (gsize) N * C, error);
  if (proj == NULL)
    goto fail;
  /* attention: norm1, (gather), qkv, rotary, core, out-projection, reduce, residual */
  const float *h1 = block_norm (ex, L, 1, x, a, error);
  if (h1 == NULL)
    goto fail;
  if (ex->model->kv_lora_rank > 0)
    {
      if (!mp_exec_mla_forward (ex, L, (guint) I.wqkv, a, a->buf[A_LN1], h1, a->buf[A_QKV],
                                s.ldq, error))
        goto fail;
    }
  else
    {
      k->matmul_forward (ex->be, a->buf[A_QKV], h1, Pi (L, I.wqkv), Pi (L, I.bqkv), N, C,
                         s.ldq);
      if (ex->model->qk_norm)          /* before rotary, as Qwen3 and Gemma 3 */
        mp_exec_qknorm_forward (ex, a->buf[A_QKV], s.ldq, Pi (L, I.qn), Pi (L, I.kn),
                                a->buf[A_QKRAW], a->buf[A_QKR], NORM_EPS);
      if (ex->model->position == MP_POS_ROTARY)
        mp_exec_rotary (ex, a->buf[A_QKV], s.ldq, FALSE, ROPE_THETA);
    }
  float *q = a->buf[A_QKV], *kk = q + ex->NHl * ex->HD, *v = kk + ex->NKVl * ex->HD;
  if (!mp_exec_attention_forward (ex, a->buf[A_ATT], a->buf[A_LSE], a->buf[A_PROBS], q, kk, v,
                                  s, error))
    goto fail;
  if (ex->model->attn_sinks)
    k->attn->sinks_forward (ex->be, a->buf[A_ATT], a->buf[A_LSE], a->buf[A_PROBS],
                            Pi (L, I.sink), s);
  k->matmul_forward (ex->be, proj, a->buf[A_ATT], Pi (L, I.wo), NULL, N, s.ldo, C);
  float *pr = tp_reduce_rows (ex, proj, y, error);   /* y is free until the end */
  if (pr == NULL)
    goto fail;
  add_rows (ex, pr, Pi (L, I.bo), Ns, C);
  post_norm (ex, L, 1, pr, a);
  k->residual_forward (ex->be, a->buf[A_X2], x, pr, (gsize) Ns * C);
  /* MLP: norm2, (gather), fc1, activation, fc2, reduce, residual */
  const float *h2 = block_norm (ex, L, 2, a->buf[A_X2], a, error);
  if (h2 == NULL)
    goto fail;
  if (L->ir->moe)
    {
      if (!mp_exec_moe_forward (ex, L, (guint) I.w1, a, h2, proj, error))
        goto fail;
    }
  else
    {
      block_fc1 (ex, L, h2, a);
      k->matmul_forward (ex->be, proj, a->buf[A_ACT], Pi (L, I.w2), NULL, N, ex->Fl, C);
    }
  float *mr = tp_reduce_rows (ex, proj, y, error);
  if (mr == NULL)
    goto fail;
  add_rows (ex, mr, L->ir->moe ? NULL : Pi (L, I.b2), Ns, C);   /* MoE: its own biases */
  post_norm (ex, L, 2, mr, a);
  k->residual_forward (ex->be, y, a->buf[A_X2], mr, (gsize) Ns * C);
  tmp_release (&t);
  return TRUE;
fail:
  tmp_release (&t);
  return FALSE;
}

/* Under sequence parallelism a block keeps its norms' outputs on its rows only: the
 * gathers for the column GEMMs go after the forward and backward gathers again
 * (mp_exec_tp_regather_width), as Megatron-Core does and the cost model counts. */
static void
release_gathers (MpExec *ex, Acts *a)
{
  if (!ex->sp)
    return;
  drop (ex, &a->buf[A_H1]);
  drop (ex, &a->buf[A_H2]);
  if (ex->model->kv_lora_rank > 0)
    mp_exec_mla_release_gathers (ex, a);
}

/* Selective recompute (recompute_modules) beyond the attention core, as Megatron's
 * --recompute-modules: layernorm lets go of the norms' outputs (and their gathers under
 * sequence parallelism), mlp of fc1's output and the activation; both are rebuilt from
 * what the block keeps just before its backward. mlp is the dense MLP's only; in an MoE
 * block moe_act and shared_experts let go of the experts' activations and the shared
 * experts' fc1 and activation (model-moe.c), and the whole MoE layer (moe) is not
 * recomputed (exec/limits.c). */
static void
selective_drop (MpExec *ex, const ExLayer *L, Acts *a)
{
  static const int norms[] = { A_LN1, A_H1, A_LN2, A_H2 }, mlp[] = { A_FC1, A_ACT };
  guint m = selective_modules (ex);
  for (guint i = 0; i < G_N_ELEMENTS (norms) && (m & MP_RECOMPUTE_LAYERNORM); i++)
    drop (ex, &a->buf[norms[i]]);
  for (guint i = 0; i < G_N_ELEMENTS (mlp) && (m & MP_RECOMPUTE_MLP); i++)
    drop (ex, &a->buf[mlp[i]]);
  if (L->ir->moe)
    mp_exec_moe_selective_drop (ex, a, m);
}

static gboolean
selective_restore (MpExec *ex, const ExLayer *L, const float *x, Acts *a, GError **error)
{
  gsize N = ex->N, Ns = ex->Ns, C = ex->C, f1 = ex->swiglu ? 2 * ex->Fl : ex->Fl;
  guint m = selective_modules (ex);
  if ((m & MP_RECOMPUTE_LAYERNORM) && a->buf[A_LN1] == NULL)
    {
      if (!mp_exec_act_alloc (ex, a, A_LN1, Ns * C, error)
          || !mp_exec_act_alloc (ex, a, A_LN2, Ns * C, error)
          || (ex->sp && ((gathers_h1 (ex) && !mp_exec_act_alloc (ex, a, A_H1, N * C, error))
                         || !mp_exec_act_alloc (ex, a, A_H2, N * C, error)))
          || block_norm (ex, L, 1, x, a, error) == NULL
          || block_norm (ex, L, 2, a->buf[A_X2], a, error) == NULL)
        return FALSE;
    }
  if ((m & MP_RECOMPUTE_MLP) && !L->ir->moe && a->buf[A_FC1] == NULL)
    {
      if (!mp_exec_act_alloc (ex, a, A_FC1, N * f1, error)
          || !mp_exec_act_alloc (ex, a, A_ACT, N * (gsize) ex->Fl, error))
        return FALSE;
      block_fc1 (ex, L, ex->sp ? a->buf[A_H2] : a->buf[A_LN2], a);
    }
  return TRUE;
}

static gboolean
block_forward (MpExec *ex, guint l, guint mb, GError **error)
{
  const ExLayer *L = &ex->layers[l];
  float *y = new_output (ex, l, mb, error);
  Acts *a = g_new0 (Acts, 1);
  if (y == NULL || !block_acts (ex, L, a, error) || !block_run (ex, L, ex->input[l * ex->M + mb],
                                                            y, a, error))
    {
      mp_exec_acts_free (ex, a);
      return FALSE;
    }
  if (mp_recompute_full_layer (&ex->cfg, ex->model, l))
    {
      mp_exec_acts_free (ex, a);           /* only the input (ex->input) is kept, */
      if (ex->group_start && ex->group_start[l] != l)
        drop (ex, slot (ex, ex->input, l, mb));  /* and of a uniform group, its first's */
    }
  else
    {
      release_gathers (ex, a);
      selective_drop (ex, L, a);
      ex->layers[l].acts[mb] = a;
    }
  return TRUE;
}

/* Rebuilds the block's activations from its kept input (full recompute): the forward
 * again, collectives included, its output thrown away. */
static Acts *
block_recompute (MpExec *ex, guint l, guint mb, GError **error)
{
  Tmp t = { ex };
  Acts *a = g_new0 (Acts, 1);
  float *y = tmp_floats (&t, (gsize) ex->Ns * ex->C, error);
  ex->recomputing = TRUE;
  gboolean ok = y && block_acts (ex, &ex->layers[l], a, error)
                && block_run (ex, &ex->layers[l], ex->input[l * ex->M + mb], y, a, error);
  ex->recomputing = FALSE;
  tmp_release (&t);
  if (!ok)
    {
      mp_exec_acts_free (ex, a);
      return NULL;
    }
  return a;
}

/* recompute_method=uniform: the backward of LAYER, the last of its group still to come,
 * rebuilds the group from its first block's input: the blocks before LAYER keep their
 * activations and outputs (the next one's input) for their backward; LAYER's own come
 * from block_recompute. */
static gboolean
group_recompute (MpExec *ex, guint layer, guint mb, GError **error)
{
  for (guint j = ex->group_start ? ex->group_start[layer] : layer; j < layer; j++)
    {
      float *y = new_output (ex, j, mb, error);
      Acts *a = g_new0 (Acts, 1);
      ex->recomputing = TRUE;           /* MoE: losses and drops were counted */
      gboolean ok = y != NULL && block_acts (ex, &ex->layers[j], a, error)
                    && block_run (ex, &ex->layers[j], ex->input[j * ex->M + mb], y, a, error);
      ex->recomputing = FALSE;
      if (!ok)
        {
          mp_exec_acts_free (ex, a);
          return FALSE;
        }
      ex->layers[j].acts[mb] = a;
    }
  return TRUE;
}

static gboolean
block_backward_mlp (MpExec *ex, const ExLayer *L, Acts *a, const float *dy, float *dx2,
                    Tmp *t, GError **error)
{
  const MpKernelOps *k = ex->k;
  BlockIdx I = block_idx (ex);
  int N = ex->N, C = ex->C, Fl = ex->Fl, f1 = ex->swiglu ? 2 * Fl : Fl;
  float *full = ex->sp ? tmp_floats (t, (gsize) N * C, error) : NULL;
  gsize rows = L->ir->moe ? 1 : (gsize) N;         /* an MoE MLP keeps its own scratch */
  float *dact = tmp_floats (t, rows * Fl, error);
  float *dfc1 = tmp_floats (t, rows * f1, error);
  float *dh2 = tmp_floats (t, (gsize) N * C, error);
  float *dh2s = tmp_floats (t, (gsize) ex->Ns * C, error);
  if ((ex->sp && full == NULL) || !dact || !dfc1 || !dh2 || !dh2s)
    return FALSE;
  const float *dyb = post_norm_backward (ex, L, 2, dy, a, t, error);
  const float *d = dyb ? tp_gather_rows (ex, dyb, full, error) : NULL;
  if (d == NULL)
    return FALSE;
  const float *h2 = mp_exec_tp_regather_width (ex, t, a->buf[A_H2], a->buf[A_LN2], C, error);
  if (h2 == NULL)
    return FALSE;
  if (L->ir->moe)
    {
      if (!mp_exec_moe_backward (ex, L, (guint) I.w1, a, d, h2, dh2, error))
        return FALSE;
    }
  else
    {
      k->matmul_backward (ex->be, dact, Gi (L, I.w2), Gi (L, I.b2), d, a->buf[A_ACT],
                          Pi (L, I.w2), N, Fl, C);
      mp_exec_act_backward (ex, dfc1, a->buf[A_FC1], dact, N, Fl);
      k->matmul_backward (ex->be, dh2, Gi (L, I.w1), Gi (L, I.b1), dfc1, h2, Pi (L, I.w1), N, C,
                          f1);
    }
  float *dn = tp_reduce_rows (ex, dh2, dh2s, error);
  if (dn == NULL)
    return FALSE;
  norm_backward (ex, dx2, Gi (L, I.ln2w), Gi (L, I.ln2b), dn, a->buf[A_X2], Pi (L, I.ln2w),
                 a->buf[A_M2], a->buf[A_R2]);
  return TRUE;
}

/* The qkv projection's backward from DQKV (rotary and qk-norm undone in place) into the
 * gradient at the first norm's output, summed over tp (DH1 or DH1S); NULL on failure. */
static float *
attn_qkv_backward (MpExec *ex, const ExLayer *L, Acts *a, float *dqkv, const float *h1,
                   float *dh1, float *dh1s, GError **error)
{
  BlockIdx I = block_idx (ex);
  MpkAttnShape s = attn_shape (ex, L);
  if (ex->model->position == MP_POS_ROTARY)
    mp_exec_rotary (ex, dqkv, s.ldq, TRUE, ROPE_THETA);
  if (ex->model->qk_norm)
    mp_exec_qknorm_backward (ex, dqkv, s.ldq, Gi (L, I.qn), Gi (L, I.kn), a->buf[A_QKRAW],
                             a->buf[A_QKR], Pi (L, I.qn), Pi (L, I.kn));
  ex->k->matmul_backward (ex->be, dh1, Gi (L, I.wqkv), Gi (L, I.bqkv), dqkv, h1, Pi (L, I.wqkv),
                          ex->N, ex->C, s.ldq);
  return tp_reduce_rows (ex, dh1, dh1s, error);
}

static gboolean
block_backward_attn (MpExec *ex, const ExLayer *L, Acts *a, const float *x, const float *dx2,
                     float *dx, Tmp *t, GError **error)
{
  const MpKernelOps *k = ex->k;
  BlockIdx I = block_idx (ex);
  MpkAttnShape s = attn_shape (ex, L);
  int N = ex->N, C = ex->C;
  float *full = ex->sp ? tmp_floats (t, (gsize) N * C, error) : NULL;
  float *datt = tmp_floats (t, (gsize) N * s.ldo, error);
  float *dqkv = tmp_floats (t, (gsize) N * s.ldq, error);
  float *dh1 = tmp_floats (t, (gsize) N * C, error);
  float *dh1s = tmp_floats (t, (gsize) ex->Ns * C, error);
  if ((ex->sp && full == NULL) || !datt || !dqkv || !dh1 || !dh1s)
    return FALSE;
  const float *dxb = post_norm_backward (ex, L, 1, dx2, a, t, error);
  const float *d = dxb ? tp_gather_rows (ex, dxb, full, error) : NULL;
  if (d == NULL)
    return FALSE;
  k->matmul_backward (ex->be, datt, Gi (L, I.wo), Gi (L, I.bo), d, a->buf[A_ATT], Pi (L, I.wo), N,
                      s.ldo, C);
  if (ex->model->attn_sinks)
    k->attn->sinks_backward (ex->be, Gi (L, I.sink), datt, a->buf[A_ATT], a->buf[A_LSE],
                             Pi (L, I.sink), s);
  float *q = a->buf[A_QKV], *kk = q + ex->NHl * ex->HD, *v = kk + ex->NKVl * ex->HD;
  float *dq = dqkv, *dk = dq + ex->NHl * ex->HD, *dv = dk + ex->NKVl * ex->HD;
  if (!mp_exec_attention_backward (ex, dq, dk, dv, datt, a->buf[A_ATT], a->buf[A_LSE],
                                   a->buf[A_PROBS], q, kk, v, s, error))
    return FALSE;
  const float *h1 = gathers_h1 (ex) ? mp_exec_tp_regather_width (ex, t, a->buf[A_H1],
                                                                a->buf[A_LN1], C, error)
                                    : a->buf[A_LN1];
  if (h1 == NULL)
    return FALSE;
  float *dn;
  if (ex->model->kv_lora_rank > 0)
    dn = mp_exec_mla_backward (ex, L, (guint) I.wqkv, a, dqkv, s.ldq, a->buf[A_LN1], h1, dh1,
                               dh1s, error);
  else
    dn = attn_qkv_backward (ex, L, a, dqkv, h1, dh1, dh1s, error);
  if (dn == NULL)
    return FALSE;
  norm_backward (ex, dx, Gi (L, I.ln1w), Gi (L, I.ln1b), dn, x, Pi (L, I.ln1w), a->buf[A_M1],
                 a->buf[A_R1]);
  k->add (ex->be, dx, dx2, (gsize) ex->Ns * C);     /* the residual path */
  return TRUE;
}

static gboolean
block_backward (MpExec *ex, guint l, guint mb, GError **error)
{
  const ExLayer *L = &ex->layers[l];
  Acts *a = L->acts[mb];
  if (a == NULL && (!group_recompute (ex, l, mb, error)
                    || (a = block_recompute (ex, l, mb, error)) == NULL))
    return FALSE;
  ex->layers[l].acts[mb] = a;
  if (!selective_restore (ex, L, ex->input[l * ex->M + mb], a, error))
    return FALSE;
  float **dy = slot (ex, ex->dinput, l + 1, mb);
  float *dx = new_dinput (ex, l, mb, error);
  Tmp keep = { ex }, t = { ex };
  /* dx2: gradient at the residual stream between attention and MLP (Ns, C) */
  float *dx2 = dx ? tmp_floats (&keep, (gsize) ex->Ns * ex->C, error) : NULL;
  gboolean ok = dx2 != NULL;
  if (ok)
    {
      ex->be->ops->copy (ex->be, dx2, *dy, (gsize) ex->Ns * ex->C * sizeof (float));
      ok = block_backward_mlp (ex, L, a, *dy, dx2, &t, error);
    }
  tmp_release (&t);
  ok = ok && block_backward_attn (ex, L, a, ex->input[l * ex->M + mb], dx2, dx, &t, error);
  tmp_release (&t);
  tmp_release (&keep);
  if (!ok)
    return FALSE;
  drop (ex, dy);
  mp_exec_release_acts (ex, l, mb);
  return TRUE;
}

/* ---- head -------------------------------------------------------------------------- */

/* Final norm, (gather), logits (N, Vl) against this rank's vocabulary shard, and the
 * vocab-parallel cross-entropy (max and sums all-reduced over tp). Adds the micro-batch's
 * summed token losses to ex->loss_sum on tp rank 0. */
static gboolean
head_forward (MpExec *ex, guint l, guint mb, GError **error)
{
  const ExLayer *L = &ex->layers[l];
  gboolean ln = ex->model->norm == MP_NORM_LAYERNORM;
  float *W = P (L, ln ? 2 : 1);
  int N = ex->N;
  Tmp t = { ex };
  Acts *a = g_new0 (Acts, 1);
  g_autofree int *targets = g_new (int, N);
  make_tokens (ex, mb, NULL, targets);
  float *st = tmp_floats (&t, 6 * (gsize) N, error);  /* lmax, lsum, tlogit, gmax, losses */
  gboolean ok = st && mp_exec_act_alloc (ex, a, H_LN, (gsize) ex->Ns * ex->C, error)
                && mp_exec_act_alloc (ex, a, H_M, ex->Ns, error) && mp_exec_act_alloc (ex, a, H_R, ex->Ns, error)
                && (!ex->sp || mp_exec_act_alloc (ex, a, H_H, (gsize) N * ex->C, error))
                && mp_exec_act_alloc (ex, a, H_LOGITS, (gsize) N * ex->Vl, error)
                && mp_exec_act_alloc (ex, a, H_LSE, N, error);
  if (!ok)
    goto fail;
  norm_forward (ex, a->buf[H_LN], a->buf[H_M], a->buf[H_R], ex->input[l * ex->M + mb],
                P (L, 0), ln ? P (L, 1) : NULL, ex->Ns);
  const float *h = tp_gather_rows (ex, a->buf[H_LN], a->buf[H_H], error);
  if (h == NULL)
    goto fail;
  mp_exec_matmul_hp_forward (ex, a->buf[H_LOGITS], h, W, NULL, N, ex->C, ex->Vl);
  if (ex->model->logit_softcap > 0)   /* Gemma 2: cap tanh (logit / cap) */
    ex->k->attn->softcap_forward (ex->be, a->buf[H_LOGITS], (gsize) N * ex->Vl,
                                  (float) ex->model->logit_softcap);
  float *lmax = st, *lsum = st + N, *tlogit = st + 2 * N, *gmax = st + 3 * N;
  float *losses = st + 4 * N;
  ex->k->crossentropy_shard_stats (ex->be, lmax, lsum, tlogit, a->buf[H_LOGITS], targets, N, ex->Vl,
                                   ex->v0);
  ex->be->ops->copy (ex->be, gmax, lmax, (gsize) N * sizeof (float));
  if (!mp_exec_tp_all_reduce (ex, gmax, N, MP_REDUCE_MAX, error))
    goto fail;
  ex->k->crossentropy_shard_rescale (ex->be, lsum, lmax, gmax, N);
  if (!mp_exec_tp_all_reduce (ex, lsum, 2 * (gsize) N, MP_REDUCE_SUM, error))  /* lsum, tlogit */
    goto fail;
  ex->k->crossentropy_shard_finish (ex->be, losses, a->buf[H_LSE], gmax, lsum, tlogit, N);
  if (ex->tp_rank == 0)
    {
      g_autofree float *host = g_new (float, N);
      ex->be->ops->download (ex->be, host, losses, (gsize) N * sizeof (float));
      for (int i = 0; i < N; i++)
        ex->loss_sum += host[i];
    }
  ex->layers[l].acts[mb] = a;
  tmp_release (&t);
  return TRUE;
fail:
  mp_exec_acts_free (ex, a);
  tmp_release (&t);
  return FALSE;
}

static gboolean
head_backward (MpExec *ex, guint l, guint mb, GError **error)
{
  const ExLayer *L = &ex->layers[l];
  Acts *a = L->acts[mb];
  gboolean ln = ex->model->norm == MP_NORM_LAYERNORM;
  int N = ex->N, C = ex->C;
  Tmp t = { ex };
  g_autofree int *targets = g_new (int, N);
  make_tokens (ex, mb, NULL, targets);
  float *dx = new_dinput (ex, l, mb, error);
  float *dlogits = dx ? tmp_floats (&t, (gsize) N * ex->Vl, error) : NULL;
  float *dh = dlogits ? tmp_floats (&t, (gsize) N * C, error) : NULL;
  float *dhs = dh ? tmp_floats (&t, (gsize) ex->Ns * C, error) : NULL;
  if (dhs == NULL)
    goto fail;
  /* the loss is the mean over every token of the global batch */
  float scale = 1.0f / (float) ((double) ex->global_batch * ex->T);
  ex->k->crossentropy_shard_backward (ex->be, dlogits, a->buf[H_LOGITS], a->buf[H_LSE], targets,
                                      scale, N, ex->Vl, ex->v0);
  if (ex->model->logit_softcap > 0)
    ex->k->attn->softcap_backward (ex->be, dlogits, a->buf[H_LOGITS], (gsize) N * ex->Vl,
                                   (float) ex->model->logit_softcap);
  const float *h = ex->sp ? a->buf[H_H] : a->buf[H_LN];
  guint wi = ln ? 2 : 1;
  mp_exec_matmul_hp_backward (ex, dh, G (L, wi), NULL, dlogits, h, P (L, wi), N, C, ex->Vl);
  float *dn = tp_reduce_rows (ex, dh, dhs, error);
  if (dn == NULL)
    goto fail;
  norm_backward (ex, dx, G (L, 0), ln ? G (L, 1) : NULL, dn, ex->input[l * ex->M + mb],
                 P (L, 0), a->buf[H_M], a->buf[H_R]);
  mp_exec_release_acts (ex, l, mb);
  tmp_release (&t);
  return TRUE;
fail:
  tmp_release (&t);
  return FALSE;
}

/* ---- dispatch ---------------------------------------------------------------------- */

gboolean
mp_exec_forward (MpExec *ex, guint layer, guint mb, GError **error)
{
  g_return_val_if_fail (layer < ex->n_layers && mb < ex->M && ex->layers[layer].here, FALSE);
  switch (ex->layers[layer].ir->kind)
    {
    case MP_LAYER_EMBEDDING:
      return embedding_forward (ex, layer, mb, error);
    case MP_LAYER_HEAD:
      return head_forward (ex, layer, mb, error);
    case MP_LAYER_DENSE:
      return mp_exec_dense_forward (ex, layer, mb, error);
    default:
      return block_forward (ex, layer, mb, error);
    }
}

gboolean
mp_exec_backward (MpExec *ex, guint layer, guint mb, GError **error)
{
  g_return_val_if_fail (layer < ex->n_layers && mb < ex->M && ex->layers[layer].here, FALSE);
  gboolean ok;
  switch (ex->layers[layer].ir->kind)
    {
    case MP_LAYER_EMBEDDING:
      ok = embedding_backward (ex, layer, mb, error);
      break;
    case MP_LAYER_HEAD:
      ok = head_backward (ex, layer, mb, error);
      break;
    case MP_LAYER_DENSE:
      ok = mp_exec_dense_backward (ex, layer, mb, error);
      break;
    default:
      ok = block_backward (ex, layer, mb, error);
      break;
    }
  if (ok && layer > 0)             /* the layer's input is no longer needed */
    drop (ex, slot (ex, ex->input, layer, mb));
  return ok;
}
