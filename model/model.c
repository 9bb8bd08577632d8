/* model.c - the model IR: hyper-parameters -> layers of ops, each with its parameters,
 * FLOPs, memory traffic and saved activations; totals; loading by name or path.
 *
 * Conventions (so the planner's sums agree with the papers it is checked against):
 *  - FLOPs are "model FLOPs": matrix products only (GEMMs, the attention core, the router
 *    and output GEMMs), 2 FLOP per multiply-add, attention scores without causal halving
 *    (Korthikanti et al. 2022, eq. 7), over min(seq_len, window) keys in a windowed
 *    block; train_flops_per_token_causal is the causal count (model.h). Norms,
 *    activations, residuals, embeddings and the loss are memory-bound: their cost is
 *    fwd_bytes, their fwd_flops are 0.
 *  - Backward is 2x forward for every matrix product (input gradient + weight gradient).
 *  - Activation bytes follow Korthikanti et al. 2022 (sec. 4.1): 16-bit tensors (here the
 *    activation dtype, 4 bytes in fp32 training), 1-byte dropout masks. For a GPT block
 *    (gelu, MHA, ffn = 4h) the per-token sums are 10h replicated, 24h split and 5as score
 *    bytes, i.e. s b h (34 + 5 a s / h) per layer.
 *  - fwd_bytes counts the activation traffic per token (inputs read, outputs written);
 *    weights are read once per micro-batch, not per token, so they are not in it.
 * Units: counts, FLOP and bytes per token. */
#define G_LOG_DOMAIN "mpplan-model"
#include "config.h"
#include "model/model-private.h"
#include "common/error.h"
#include "common/yamldoc.h"
#include "common/zoo.h"

#include <string.h>

/* ---- building ops ------------------------------------------------------------------ */

/* Appends an op with no cost yet; the pointer is valid until the next append. */
static MpOp *
add_op (GArray *ops, const char *name, MpOpKind kind, MpSplit split)
{
  MpOp op = { 0 };
  op.name = g_strdup (name);
  op.kind = kind;
  op.split = split;
  op.count = 1;
  g_array_append_val (ops, op);
  return &g_array_index (ops, MpOp, ops->len - 1);
}

/* A linear layer y = x W (+ b) with W (k x n), applied COUNT times per token, of which
 * COPIES are stored (MoE experts: COPIES = experts, COUNT = top-k; dense: 1 and 1). */
static MpOp *
add_linear (GArray *ops, const char *name, MpSplit split, double n, double k, double count,
            double copies, gboolean bias, double e)
{
  MpOp *op = add_op (ops, name, MP_OP_GEMM, split);
  double w = n * k + (bias ? n : 0);
  op->gemm_n = n;
  op->gemm_k = k;
  op->count = count;
  op->params = copies * w;
  op->active_params = count * w;
  op->fwd_flops = 2 * n * k * count;
  op->bwd_flops = 2 * op->fwd_flops;
  op->fwd_bytes = e * (k + n) * count;
  return op;
}

/* A layernorm (gain + bias: 2 w) or rmsnorm (gain: w) over WIDTH features (the hidden
 * size, or an MLA latent). Keeps its input for backward, which is replicated under tensor
 * parallelism (Korthikanti: 2sbh per layernorm). */
static MpOp *
add_norm_width (GArray *ops, const char *name, const MpModel *m, double width, double e)
{
  MpOp *op = add_op (ops, name, MP_OP_NORM, MP_SPLIT_NONE);
  op->params = op->active_params = (m->norm == MP_NORM_LAYERNORM ? 2 : 1) * width;
  op->fwd_bytes = 2 * e * width;
  op->act_rep_bytes = e * width;
  return op;
}

static MpOp *
add_norm (GArray *ops, const char *name, const MpModel *m, double e)
{
  return add_norm_width (ops, name, m, (double) m->hidden, e);
}

/* Dropout + residual add: reads two h-wide tensors, writes one and a 1-byte mask; the mask
 * is all it keeps (Korthikanti: sbh per dropout, replicated). Without dropout there is no
 * mask: PyTorch's dropout at p = 0 returns its input (ATen's _dropout_impl), and the models
 * so marked have no dropout module on the residual at all. */
static MpOp *
add_residual (GArray *ops, const char *name, const MpModel *m, double e)
{
  double h = (double) m->hidden, mask = m->no_dropout ? 0 : h;
  MpOp *op = add_op (ops, name, MP_OP_ELEMENTWISE, MP_SPLIT_NONE);
  op->fwd_bytes = 3 * e * h + mask;
  op->act_rep_bytes = mask;
  return op;
}

/* Width of the first MLP GEMM: swiglu computes gate and up projections in one GEMM. */
static double
fc1_width (const MpModel *m, double ffn)
{
  return mp_activation_gated (m->activation) ? 2 * ffn : ffn;
}

gboolean
mp_activation_gated (MpActivation act)
{
  return act == MP_ACT_SWIGLU || act == MP_ACT_GEGLU;
}

/* The activation between fc1 and fc2. It keeps its input (gelu/relu: ffn wide; swiglu:
 * gate and up, 2 ffn) and writes ffn; COUNT tokens' worth per token for MoE top-k. */
static MpOp *
add_activation (GArray *ops, const char *name, MpSplit split, const MpModel *m, double ffn,
                double count, double e)
{
  double in = fc1_width (m, ffn);
  MpOp *op = add_op (ops, name, MP_OP_ELEMENTWISE, split);
  op->count = count;
  op->fwd_bytes = e * (in + ffn) * count;
  op->act_bytes = e * in * count;
  return op;
}

/* ---- attention (ir14) ------------------------------------------------------------- */

static gboolean
qkv_bias (const MpModel *m)
{
  return m->attn_bias == MP_ATTN_BIAS_AS_MODEL ? m->bias : m->attn_bias >= MP_ATTN_BIAS_QKV;
}

static gboolean
out_bias (const MpModel *m)
{
  return m->attn_bias == MP_ATTN_BIAS_AS_MODEL ? m->bias : m->attn_bias == MP_ATTN_BIAS_ALL;
}

guint64
mp_model_block_window (const MpModel *m, guint64 block)
{
  g_return_val_if_fail (m != NULL, 0);
  if (m->window == 0 || m->n_window_pattern == 0)
    return m->window;
  return m->window_pattern[block % m->n_window_pattern] ? m->window : 0;
}

/* Keys one query is scored against in the full-square count: the sequence, or the
 * window when it is shorter. */
static double
attended_keys (const MpModel *m, guint64 window)
{
  return window > 0 && window < m->seq_len ? (double) window : (double) m->seq_len;
}

/* The (query, key) pairs a causal mask keeps in one sequence: query i sees keys
 * max(0, i - W + 1) .. i. */
static double
causal_pairs (const MpModel *m, guint64 window)
{
  double s = (double) m->seq_len, w = attended_keys (m, window);
  return w * (w + 1) / 2 + (s - w) * w;
}

/* The attention core over A query heads of width D (queries and keys) and KV_H kv heads,
 * values and outputs DV wide. Per query head: Q K^T and P V, 2 keys (d + dv) FLOP (keys:
 * min(s, window), the full-square count, see model.h). A fused kernel reads Q, K, V and
 * writes O. Saved for backward: Q, K, V, and per query head the softmax output (e s),
 * its dropout mask (s) and dropout output (e s) - over the whole sequence even in a
 * windowed block, since an unfused kernel scores the full square and masks it. Sinks
 * (GPT-OSS) add one learned logit per head to the softmax denominator: parameters, no
 * matrix FLOPs. */
static void
add_core (GArray *ops, const MpModel *m, double a, double kv_h, double d, double dv,
          guint64 window, double e)
{
  double s = (double) m->seq_len;
  MpOp *op = add_op (ops, "attn_core", MP_OP_ATTENTION, MP_SPLIT_HEADS);
  op->heads = a;
  op->kv_heads = kv_h;
  op->head_dim = d;
  op->v_head_dim = dv;
  op->window = window > 0 && window < m->seq_len ? (double) window : 0;
  op->fwd_flops = 2 * attended_keys (m, window) * a * (d + dv);
  op->bwd_flops = 2 * op->fwd_flops;
  op->fwd_bytes = e * (a * d + kv_h * d + kv_h * dv + a * dv);
  op->act_bytes = e * (a * d + kv_h * d + kv_h * dv);
  op->act_score_bytes = a * s * (2 * e + 1);
  if (m->attn_sinks)
    op->params = op->active_params = a;
}

/* Rotary positions on N_Q query and N_K key features; linear, so backward needs only the
 * cos/sin tables. */
static void
add_rotary (GArray *ops, double a, double kv_h, double d, double n_q, double n_k, double e)
{
  MpOp *op = add_op (ops, "rotary", MP_OP_ELEMENTWISE, MP_SPLIT_HEADS);
  op->heads = a;
  op->kv_heads = kv_h;
  op->head_dim = d;
  op->fwd_bytes = 2 * e * (n_q + n_k);
}

/* Multi-/grouped-query attention: norm1, qkv, [qk-norm], [rotary], core, out-projection,
 * [post-norm], residual. With q = heads * head_dim and kv = kv_heads * head_dim (GQA:
 * kv < q), the saved activations generalise Korthikanti's 11h + 5as: qkv input e*h
 * (replicated), Q, K and V for the core e*(q + 2 kv), the core output as out-proj input
 * e*q, and the score terms. */
static void
add_attention (GArray *ops, const MpModel *m, guint64 window, double e)
{
  double h = (double) m->hidden, d = (double) m->head_dim;
  double a = (double) m->heads, kv_h = (double) m->kv_heads;
  double q = a * d, kv = kv_h * d;
  MpOp *op;

  add_norm (ops, "norm1", m, e);
  op = add_linear (ops, "qkv", MP_SPLIT_COLUMN, q + 2 * kv, h, 1, 1, qkv_bias (m), e);
  op->act_rep_bytes = e * h;
  if (m->qk_norm)
    {
      /* One gain of head_dim for q and one for k, shared by the heads (Qwen3): on this
       * rank's heads, keeping the q and k it normalises. */
      op = add_op (ops, "qk_norm", MP_OP_NORM, MP_SPLIT_NONE);
      op->params = op->active_params = 2 * d;
      op->fwd_bytes = 2 * e * (q + kv);
      op->act_bytes = e * (q + kv);
    }
  if (m->position == MP_POS_ROTARY)
    add_rotary (ops, a, kv_h, d, q, kv, e);
  add_core (ops, m, a, kv_h, d, d, window, e);
  op = add_linear (ops, "attn_out", MP_SPLIT_ROW, h, q, 1, 1, out_bias (m), e);
  op->act_bytes = e * q;
  if (m->post_norms)
    add_norm (ops, "post_attn_norm", m, e);
  add_residual (ops, "attn_residual", m, e);
}

/* Multi-head latent attention (DeepSeek-V2 sec. 2.1; Megatron-Core's MLASelfAttention).
 * Every tensor-parallel rank computes the down projections to the latents for all heads
 * (replicated: q_down h -> q_lora_rank, kv_down h -> kv_lora_rank + the rotary key shared
 * by the heads) and normalises them; the up projections to the heads are column-split
 * (q_up: q_lora_rank -> heads (nope + rope); kv_up: kv_lora_rank -> heads (nope + v));
 * the core scores nope + rope wide queries and keys and averages v wide values; the
 * output projection is row-split. Without q_lora_rank (V2-Lite) q is projected directly.
 * Training materialises K and V from the latent (no weight absorption, an inference
 * trick); what an inference cache keeps is the latent and the rotary key
 * (kv_cache_bytes_per_token). */
static void
add_mla (GArray *ops, const MpModel *m, guint64 window, double e)
{
  double h = (double) m->hidden, a = (double) m->heads;
  double nope = (double) m->qk_nope_head_dim, rope = (double) m->qk_rope_head_dim;
  double dv = (double) m->v_head_dim, d = nope + rope;
  double qr = (double) m->q_lora_rank, kvr = (double) m->kv_lora_rank;
  gboolean bias = qkv_bias (m);
  MpOp *op;

  add_norm (ops, "norm1", m, e);
  if (qr > 0)
    {
      op = add_linear (ops, "q_down", MP_SPLIT_NONE, qr, h, 1, 1, bias, e);
      op->act_rep_bytes = e * h;
    }
  else
    {
      op = add_linear (ops, "q_proj", MP_SPLIT_COLUMN, a * d, h, 1, 1, bias, e);
      op->act_rep_bytes = e * h;
    }
  add_linear (ops, "kv_down", MP_SPLIT_NONE, kvr + rope, h, 1, 1, bias, e);
  if (qr > 0)
    add_norm_width (ops, "q_norm", m, qr, e);
  add_norm_width (ops, "kv_norm", m, kvr, e);
  if (qr > 0)
    {
      op = add_linear (ops, "q_up", MP_SPLIT_COLUMN, a * d, qr, 1, 1, bias, e);
      op->act_rep_bytes = e * qr;
    }
  op = add_linear (ops, "kv_up", MP_SPLIT_COLUMN, a * (nope + dv), kvr, 1, 1, bias, e);
  op->act_rep_bytes = e * kvr;
  add_rotary (ops, a, a, rope, a * rope, rope, e);
  add_core (ops, m, a, a, d, dv, window, e);
  op = add_linear (ops, "attn_out", MP_SPLIT_ROW, h, a * dv, 1, 1, out_bias (m), e);
  op->act_bytes = e * a * dv;
  if (m->post_norms)
    add_norm (ops, "post_attn_norm", m, e);
  add_residual (ops, "attn_residual", m, e);
}

/* Bytes a block adds to an inference KV cache per token (see model.h). */
static double
kv_cache_bytes (const MpModel *m, double e)
{
  if (m->kv_lora_rank > 0)
    return e * (double) (m->kv_lora_rank + m->qk_rope_head_dim);
  return 2 * e * (double) m->kv_heads * (double) m->head_dim;
}

/* Training FLOPs per token of LAYER's attention core under the causal convention, minus
 * those under the full-square one (model.h). */
static double
causal_correction (const MpModel *m, const MpLayer *layer)
{
  double delta = 0;
  for (guint i = 0; i < layer->n_ops; i++)
    {
      const MpOp *op = &layer->ops[i];
      if (op->kind != MP_OP_ATTENTION)
        continue;
      double per_key = (op->fwd_flops + op->bwd_flops) / attended_keys (m, layer->window);
      delta += per_key * (causal_pairs (m, layer->window) / (double) m->seq_len
                          - attended_keys (m, layer->window));
    }
  return delta;
}

const char *
mp_model_attention_extras (const MpModel *m)
{
  g_return_val_if_fail (m != NULL, NULL);
  if (m->kv_lora_rank == 0)
    return NULL;
  /* exec/model-mla.c runs DeepSeek's MLA: RMSNorm latents, no biases, no qk-norm */
  if (qkv_bias (m) || out_bias (m))
    return "multi-head latent attention with attention biases";
  if (m->qk_norm)
    return "multi-head latent attention with qk-norm";
  if (m->norm == MP_NORM_LAYERNORM)
    return "multi-head latent attention with layernorm";
  return NULL;
}

gboolean
mp_model_qkv_bias (const MpModel *m)
{
  return qkv_bias (m);
}

gboolean
mp_model_out_bias (const MpModel *m)
{
  return out_bias (m);
}

/* A tensor-parallel MLP of width FFN named FC1, the activation's function, FC2: fc1 (its
 * input e*h replicated), activation, fc2 (its input e*ffn split). Korthikanti's 19h for
 * gelu and ffn = 4h: 2h + 8h + 8h + the residual's mask h. */
static void
add_tp_mlp (GArray *ops, const MpModel *m, const char *fc1, const char *fc2, double ffn,
            double e)
{
  double h = (double) m->hidden;
  MpOp *op = add_linear (ops, fc1, MP_SPLIT_COLUMN, fc1_width (m, ffn), h, 1, 1, m->bias, e);
  op->act_rep_bytes = e * h;
  add_activation (ops, mp_activation_name (m->activation), MP_SPLIT_COLUMN, m, ffn, 1, e);
  op = add_linear (ops, fc2, MP_SPLIT_ROW, h, ffn, 1, 1, m->bias, e);
  op->act_bytes = e * ffn;
}

/* MoE MLP (moe14): the shared experts first (Megatron's SharedExpertMLP: one
 * tensor-parallel MLP of shared_experts x shared_expert_ffn every token goes through),
 * then a router GEMM (h -> experts) that picks top-k experts per token, each a dense MLP
 * of width moe_ffn_hidden. Per token the expert ops run k times, so their saved
 * activations are k copies of the dense ones (the dispatched token copies are the fc1
 * inputs). The permutation to the experts and the weighted combine back are memory-bound
 * streams of their own (Megatron-Core's moe_permute / moe_unpermute; exec/model-moe.c's
 * gather_rows and scatter_add_rows). Qwen2-MoE's shared-expert gate (h -> 1) is small
 * next to these and is left out. */
static void
add_moe_mlp (GArray *ops, const MpModel *m, double e)
{
  double h = (double) m->hidden, ffn = (double) m->moe_ffn_hidden;
  double n_exp = (double) m->experts, k = (double) m->experts_per_token;
  if (m->shared_experts > 0)
    add_tp_mlp (ops, m, "shared_fc1", "shared_fc2",
                (double) m->shared_experts * (double) m->shared_expert_ffn, e);
  MpOp *op = add_op (ops, "router", MP_OP_ROUTER, MP_SPLIT_NONE);
  op->gemm_n = n_exp;
  op->gemm_k = h;
  op->params = op->active_params = n_exp * h + (m->bias ? n_exp : 0);
  op->fwd_flops = 2 * n_exp * h;
  op->bwd_flops = 2 * op->fwd_flops;
  op->fwd_bytes = e * (h + n_exp);
  op->act_rep_bytes = e * h;
  /* Softmax (or sigmoid) and top-k over fp32 logits, then the aux loss reading the
   * probabilities again (Megatron's router.py): 3 fp32 passes over the experts, the k
   * weights and indices (4 + 8 bytes) written; the probabilities kept for backward. */
  op = add_op (ops, "router_topk", MP_OP_ELEMENTWISE, MP_SPLIT_NONE);
  op->fwd_bytes = 3 * 4 * n_exp + 12 * k;
  op->act_rep_bytes = 4 * n_exp;
  /* The permutation: each token's row copied to its k experts (read and written k times)
   * by its k indices (4 bytes each); backward adds the k row gradients back. */
  op = add_op (ops, "expert_permute", MP_OP_ELEMENTWISE, MP_SPLIT_NONE);
  op->fwd_bytes = 2 * e * h * k + 4 * k;
  op = add_linear (ops, "expert_fc1", MP_SPLIT_EXPERT, fc1_width (m, ffn), h, k, n_exp,
                   m->bias, e);
  op->act_rep_bytes = e * h * k;
  add_activation (ops, "expert_act", MP_SPLIT_EXPERT, m, ffn, k, e);
  op = add_linear (ops, "expert_fc2", MP_SPLIT_EXPERT, h, ffn, k, n_exp, m->bias, e);
  op->act_bytes = e * ffn * k;
  /* The weighted combine: the k expert rows and their gates read, added into the token's
   * row (read and written). Backward needs the expert rows again (a gate's gradient is
   * the output gradient's dot with its row) and keeps them with the gates. */
  op = add_op (ops, "expert_combine", MP_OP_ELEMENTWISE, MP_SPLIT_NONE);
  op->fwd_bytes = e * h * (k + 2) + 4 * k;
  op->act_rep_bytes = e * h * k + 4 * k;
}

/* Sums the ops of LAYER into its totals. */
static void
layer_sum (MpLayer *layer)
{
  layer->params = layer->active_params = layer->fwd_flops = layer->bwd_flops = 0;
  layer->fwd_bytes = layer->act_bytes = layer->act_rep_bytes = layer->act_score_bytes = 0;
  for (guint i = 0; i < layer->n_ops; i++)
    {
      const MpOp *op = &layer->ops[i];
      layer->params += op->params;
      layer->active_params += op->active_params;
      layer->fwd_flops += op->fwd_flops;
      layer->bwd_flops += op->bwd_flops;
      layer->fwd_bytes += op->fwd_bytes;
      layer->act_bytes += op->act_bytes;
      layer->act_rep_bytes += op->act_rep_bytes;
      layer->act_score_bytes += op->act_score_bytes;
    }
}

/* Moves the ops collected in OPS into LAYER and sums them. */
static void
layer_finish (MpLayer *layer, const char *name, MpLayerKind kind, GArray *ops)
{
  layer->name = g_strdup (name);
  layer->kind = kind;
  layer->n_ops = ops->len;
  layer->ops = (MpOp *) g_array_free (ops, FALSE);
  layer_sum (layer);
}

static GArray *
ops_new (void)
{
  return g_array_new (FALSE, TRUE, sizeof (MpOp));
}

/* Token embedding (vocab-split), learned positions (replicated), embedding dropout. */
static void
build_embedding (const MpModel *m, MpLayer *layer, double e)
{
  double h = (double) m->hidden, v = (double) m->vocab;
  GArray *ops = ops_new ();
  MpOp *op = add_op (ops, "tok_embed", MP_OP_EMBEDDING, MP_SPLIT_VOCAB);
  op->params = op->active_params = v * h;
  op->fwd_bytes = 2 * e * h;                    /* read a row, write it */
  if (m->position == MP_POS_LEARNED)
    {
      op = add_op (ops, "pos_embed", MP_OP_EMBEDDING, MP_SPLIT_NONE);
      op->params = op->active_params = (double) m->seq_len * h;
      op->fwd_bytes = 3 * e * h;                  /* read a row and the token row, write */
    }
  if (m->embed_scale)
    {
      op = add_op (ops, "embed_scale", MP_OP_ELEMENTWISE, MP_SPLIT_NONE);
      op->fwd_bytes = 2 * e * h;                  /* x sqrt(h): read, write */
    }
  if (!m->no_dropout)
    {
      op = add_op (ops, "embed_dropout", MP_OP_ELEMENTWISE, MP_SPLIT_NONE);
      op->fwd_bytes = 2 * e * h + h;
      op->act_rep_bytes = h;                    /* the 1-byte mask */
    }
  layer_finish (layer, "embedding", MP_LAYER_EMBEDDING, ops);
}

static void
build_block (const MpModel *m, MpLayer *layer, guint index, double e)
{
  GArray *ops = ops_new ();
  guint64 window = mp_model_block_window (m, index);
  if (m->kv_lora_rank > 0)
    add_mla (ops, m, window, e);
  else
    add_attention (ops, m, window, e);
  add_norm (ops, "norm2", m, e);
  /* MoE (moe14): the first first_k_dense blocks keep a dense MLP. */
  gboolean moe = m->experts > 0 && index >= m->first_k_dense;
  if (moe)
    add_moe_mlp (ops, m, e);
  else
    add_tp_mlp (ops, m, "fc1", "fc2", (double) m->ffn_hidden, e);
  if (m->post_norms)
    add_norm (ops, "post_mlp_norm", m, e);
  add_residual (ops, "mlp_residual", m, e);
  g_autofree char *name = g_strdup_printf ("block.%u", index);
  layer_finish (layer, name, MP_LAYER_BLOCK, ops);
  layer->moe = moe;
  layer->window = window > 0 && window < m->seq_len ? window : 0;
}

/* Final norm, output projection (vocab-split; no bias, as in GPT-2 and Llama) and loss.
 * With tied embeddings the output GEMM owns no parameters: its weight is the token
 * embedding's. The loss keeps the logits in fp32 (Korthikanti: 4 s b V bytes). */
static void
build_head (const MpModel *m, MpLayer *layer, double e)
{
  double h = (double) m->hidden, v = (double) m->vocab;
  GArray *ops = ops_new ();
  add_norm (ops, "final_norm", m, e);
  MpOp *op = add_linear (ops, "output", MP_SPLIT_VOCAB, v, h, 1, 1, FALSE, e);
  op->act_rep_bytes = e * h;
  if (m->tied_embeddings)
    op->params = op->active_params = 0;
  if (m->logit_softcap > 0)
    {
      /* Gemma 2: logits = cap tanh (logits / cap); backward needs the tanh output. */
      op = add_op (ops, "logit_softcap", MP_OP_ELEMENTWISE, MP_SPLIT_VOCAB);
      op->fwd_bytes = 2 * e * v;
      op->act_bytes = e * v;
    }
  op = add_op (ops, "loss", MP_OP_LOSS, MP_SPLIT_VOCAB);
  op->fwd_bytes = e * v + 4 * v;                /* read logits, write fp32 softmax */
  op->act_bytes = 4 * v;
  layer_finish (layer, "head", MP_LAYER_HEAD, ops);
}

static void
build_transformer (MpModel *m, double e)
{
  m->n_layers = (guint) m->n_blocks + 2;
  m->layers = g_new0 (MpLayer, m->n_layers);
  build_embedding (m, &m->layers[0], e);
  for (guint i = 0; i < m->n_blocks; i++)
    build_block (m, &m->layers[i + 1], i, e);
  build_head (m, &m->layers[m->n_layers - 1], e);
}

/* Plain MLP: Megatron-style alternation of column- and row-split layers, so that a pair
 * needs one all-reduce. A GEMM's input is replicated before a column split and split
 * before a row split; the activation after it follows its output. Biases always. */
static void
build_mlp (MpModel *m, double e)
{
  m->n_layers = m->n_mlp_layers;
  m->layers = g_new0 (MpLayer, m->n_layers);
  double in = (double) m->input;
  for (guint i = 0; i < m->n_mlp_layers; i++)
    {
      const MpMlpLayerSpec *spec = &m->mlp_layers[i];
      double out = (double) spec->out;
      gboolean column = i % 2 == 0;
      GArray *ops = ops_new ();
      MpOp *op = add_linear (ops, "fc", column ? MP_SPLIT_COLUMN : MP_SPLIT_ROW, out, in, 1, 1,
                             m->bias, e);
      if (column)
        op->act_rep_bytes = e * in;
      else
        op->act_bytes = e * in;
      if (spec->activation != MP_ACT_NONE)
        {
          op = add_op (ops, mp_activation_name (spec->activation), MP_OP_ELEMENTWISE,
                       column ? MP_SPLIT_COLUMN : MP_SPLIT_NONE);
          op->fwd_bytes = 2 * e * out;
          if (column)
            op->act_bytes = e * out;
          else
            op->act_rep_bytes = e * out;
        }
      g_autofree char *name = g_strdup_printf ("dense.%u", i);
      layer_finish (&m->layers[i], name, MP_LAYER_DENSE, ops);
      in = out;
    }
}

double
mp_model_act_elt_bytes (const MpModel *m)
{
  return m->precision == MP_DTYPE_FP32 ? 4 : 2;
}

void
mp_model_build_ir (MpModel *m)
{
  double e = mp_model_act_elt_bytes (m);
  /* MoE (moe14): widths left 0 default to the dense one. */
  if (m->moe_ffn_hidden == 0)
    m->moe_ffn_hidden = m->ffn_hidden;
  if (m->shared_expert_ffn == 0)
    m->shared_expert_ffn = m->moe_ffn_hidden;
  if (!(m->load_imbalance >= 1))
    m->load_imbalance = 1;
  if (m->arch == MP_ARCH_TRANSFORMER)
    build_transformer (m, e);
  else
    build_mlp (m, e);

  m->params_total = m->params_embedding = m->params_active = 0;
  m->fwd_flops_per_token = m->train_flops_per_token = 0;
  m->train_flops_per_token_causal = m->kv_cache_bytes_per_token = 0;
  for (guint i = 0; i < m->n_layers; i++)
    {
      const MpLayer *l = &m->layers[i];
      m->params_total += l->params;
      m->params_active += l->active_params;
      m->fwd_flops_per_token += l->fwd_flops;
      m->train_flops_per_token += l->fwd_flops + l->bwd_flops;
      m->train_flops_per_token_causal += l->fwd_flops + l->bwd_flops;
      if (l->kind == MP_LAYER_EMBEDDING)
        m->params_embedding += l->params;
      if (l->kind == MP_LAYER_BLOCK)
        {
          m->train_flops_per_token_causal += causal_correction (m, l);
          m->kv_cache_bytes_per_token += kv_cache_bytes (m, e);
        }
    }
}

/* ---- lifetime, lookup -------------------------------------------------------------- */

static void
free_layers (MpModel *model)
{
  for (guint i = 0; i < model->n_layers; i++)
    {
      MpLayer *l = &model->layers[i];
      for (guint j = 0; j < l->n_ops; j++)
        g_free (l->ops[j].name);
      g_free (l->ops);
      g_free (l->name);
    }
  g_free (model->layers);
  model->layers = NULL;
  model->n_layers = 0;
}

gboolean
mp_model_set_seq_len (MpModel *model, guint64 seq_len, GError **error)
{
  g_return_val_if_fail (model != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);
  if (model->arch != MP_ARCH_TRANSFORMER)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s: seq_len applies to transformers only "
                   "(an MLP has no sequence)", model->name);
      return FALSE;
    }
  if (seq_len < 1 || seq_len > MP_MODEL_MAX_DIM)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s: seq_len %" G_GUINT64_FORMAT
                   " is outside 1..%u", model->name, seq_len, MP_MODEL_MAX_DIM);
      return FALSE;
    }
  if (model->window > seq_len)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s: seq_len %" G_GUINT64_FORMAT
                   " is shorter than the sliding window %" G_GUINT64_FORMAT " (the model "
                   "file checks window <= seq_len)", model->name, seq_len, model->window);
      return FALSE;
    }
  free_layers (model);
  model->seq_len = seq_len;
  mp_model_build_ir (model);
  return TRUE;
}

void
mp_model_free (MpModel *model)
{
  if (model == NULL)
    return;
  free_layers (model);
  g_free (model->mlp_layers);
  g_free (model->window_pattern);
  g_free (model->name);
  g_free (model->source);
  g_free (model);
}

/* Is NAME meant as a path rather than a zoo name? */
static gboolean
looks_like_path (const char *name)
{
  return g_file_test (name, G_FILE_TEST_IS_REGULAR) || strchr (name, '/') != NULL
         || g_str_has_suffix (name, ".yaml") || g_str_has_suffix (name, ".yml")
         || g_str_has_suffix (name, ".json");
}

MpModel *
mp_model_load (const char *name_or_path, GError **error)
{
  g_return_val_if_fail (name_or_path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (looks_like_path (name_or_path) && mp_model_file_is_hf (name_or_path))
    {
      g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
      MpModel *m = mp_model_load_hf (name_or_path, notes, error);
      for (guint i = 0; i < notes->len; i++)
        g_message ("%s", (const char *) g_ptr_array_index (notes, i));
      return m;
    }
  if (looks_like_path (name_or_path))
    return mp_model_load_file (name_or_path, error);

  g_autofree char *path = mp_zoo_find ("models", name_or_path);
  if (path == NULL)
    {
      g_auto(GStrv) names = mp_model_zoo_list ();
      g_autofree char *list = g_strjoinv (", ", names);
      const char *hint = mp_yaml_suggest (name_or_path, (const char *const *) names);
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                   "unknown model '%s': no such file and not in the zoo%s%s%s (zoo: %s)",
                   name_or_path, hint ? " (did you mean '" : "", hint ? hint : "",
                   hint ? "'?)" : "", *list ? list : "empty; set MPPLAN_DATADIR");
      return NULL;
    }
  MpModel *m = mp_model_load_file (path, error);
  if (m != NULL)
    {
      g_free (m->source);
      m->source = g_strconcat ("zoo:", name_or_path, NULL);
    }
  return m;
}

char **
mp_model_zoo_list (void)
{
  return mp_zoo_list ("models");
}

void
mp_model_state_bytes_per_param (const MpModel *model, double *weights, double *grads,
                                double *optimizer)
{
  g_return_if_fail (model != NULL);
  gboolean mixed = model->precision != MP_DTYPE_FP32;
  double w = mixed ? 2 : 4, g = mixed ? 2 : 4;
  /* Adam keeps m and v in fp32; SGD (with momentum) one fp32 buffer; mixed precision adds
   * the fp32 master copy of the weights. */
  double o = (model->optimizer == MP_OPTIM_ADAM ? 8 : 4) + (mixed ? 4 : 0);
  if (weights)
    *weights = w;
  if (grads)
    *grads = g;
  if (optimizer)
    *optimizer = o;
}

/* ---- names ------------------------------------------------------------------------- */

const char *
mp_op_kind_name (MpOpKind kind)
{
  static const char *const names[] = { "embedding", "norm", "gemm", "attention",
                                       "elementwise", "router", "loss" };
  return (guint) kind < G_N_ELEMENTS (names) ? names[kind] : "?";
}

const char *
mp_split_name (MpSplit split)
{
  static const char *const names[] = { "none", "column", "row", "heads", "vocab", "expert" };
  return (guint) split < G_N_ELEMENTS (names) ? names[split] : "?";
}

const char *
mp_activation_name (MpActivation act)
{
  static const char *const names[] = { "gelu", "swiglu", "relu", "geglu", "none" };
  return (guint) act < G_N_ELEMENTS (names) ? names[act] : "?";
}

static const char *const routing_names[] = { "spread", "blocked" };  /* MpRouting */

const char *
mp_routing_name (MpRouting routing)
{
  return (guint) routing < G_N_ELEMENTS (routing_names) ? routing_names[routing] : "?";
}

gboolean
mp_routing_from_name (const char *name, MpRouting *out)
{
  for (guint i = 0; name != NULL && i < G_N_ELEMENTS (routing_names); i++)
    if (strcmp (name, routing_names[i]) == 0)
      {
        *out = (MpRouting) i;
        return TRUE;
      }
  return FALSE;
}

const char *
mp_model_arch_name (MpArch arch)
{
  return arch == MP_ARCH_MLP ? "mlp" : "transformer";
}

const char *
mp_model_norm_name (MpNorm norm)
{
  return norm == MP_NORM_RMSNORM ? "rmsnorm" : "layernorm";
}

const char *
mp_model_position_name (MpPosition pos)
{
  return pos == MP_POS_ROTARY ? "rotary" : "learned";
}

const char *
mp_model_optimizer_name (MpOptimizer opt)
{
  return opt == MP_OPTIM_SGD ? "sgd" : "adam";
}

const char *
mp_layer_kind_name (MpLayerKind kind)
{
  static const char *const names[] = { "embedding", "block", "dense", "head" };
  return (guint) kind < G_N_ELEMENTS (names) ? names[kind] : "?";
}
