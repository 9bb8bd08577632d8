/* recompute.c - which ops selective recompute re-runs and which activations it drops.
 *
 * Megatron-Core's --recompute-modules (transformer_config.py, recompute_modules): the
 * submodules core_attn, mlp, moe and shared_experts are checkpointed (their input is
 * kept, what they keep inside is not, and their forward runs again before their
 * backward); layernorm and moe_act discard their output (the next op's saved input) and
 * rebuild it. An op belongs to a module by its kind and place in a block of the model IR
 * (model/model.c builds them): the attention core, the block's norms, the dense MLP's
 * fc1 / activation / fc2, the router and the expert ops of an MoE MLP, and ops named
 * "shared_..." for shared experts, and MLA's up projections: Megatron-Core's mla_up_proj
 * (multi_latent_attention.py, qkv_up_proj_and_rope_apply under CheckpointWithoutOutput)
 * re-runs the latents' norms (fused into linear_q_up_proj / linear_kv_up_proj), the up
 * projections and rotary, keeping the latents, and discards its outputs once the core
 * has read them. And torchtitan's op-level policy, below. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/costmodel-private.h"

#include <string.h>

/* Is op I of LAYER in MLA's up-projection (model.c add_mla): the latents' norms and up
 * projections, and the rotary of a layer that has them? */
static gboolean
mla_up_op (const MpLayer *layer, guint i)
{
  const char *name = layer->ops[i].name;
  static const char *const up[] = { "q_norm", "kv_norm", "q_up", "kv_up" };
  for (guint k = 0; k < G_N_ELEMENTS (up); k++)
    if (strcmp (name, up[k]) == 0)
      return TRUE;
  if (strcmp (name, "rotary") != 0)
    return FALSE;
  for (guint k = 0; k < layer->n_ops; k++)
    if (strcmp (layer->ops[k].name, "kv_up") == 0)
      return TRUE;
  return FALSE;
}

/* The module op OP of LAYER is part of (0: none), and whether it is the module's entry
 * (the op whose saved input is the checkpoint's input, kept). */
static guint
op_module (const MpLayer *layer, guint i, gboolean *entry)
{
  const MpOp *op = &layer->ops[i];
  *entry = FALSE;
  if (layer->kind != MP_LAYER_BLOCK)
    return 0;
  if (mla_up_op (layer, i))
    {
      *entry = op->kind == MP_OP_NORM;          /* the latents: the checkpoint's inputs */
      return MP_RECOMPUTE_MLA_UP_PROJ;
    }
  if (g_str_has_prefix (op->name, "shared_"))
    {
      *entry = i == 0 || !g_str_has_prefix (layer->ops[i - 1].name, "shared_");
      return MP_RECOMPUTE_SHARED_EXPERTS;
    }
  switch (op->kind)
    {
    case MP_OP_ATTENTION:
      return MP_RECOMPUTE_CORE_ATTN;
    case MP_OP_NORM:
      return MP_RECOMPUTE_LAYERNORM;
    case MP_OP_ROUTER:
      *entry = TRUE;
      return MP_RECOMPUTE_MOE;
    case MP_OP_GEMM:
    case MP_OP_ELEMENTWISE:
      if (op->split == MP_SPLIT_EXPERT)
        return MP_RECOMPUTE_MOE;
      if (strcmp (op->name, "fc1") == 0)
        {
          *entry = TRUE;
          return MP_RECOMPUTE_MLP;
        }
      /* fc2, and the activation between (the only column-split element-wise op; in an
       * MoE block, the shared experts' between shared_fc1 and shared_fc2). */
      if (layer->moe && op->kind == MP_OP_ELEMENTWISE && op->split == MP_SPLIT_COLUMN)
        return MP_RECOMPUTE_SHARED_EXPERTS;
      if (strcmp (op->name, "fc2") == 0
          || (op->kind == MP_OP_ELEMENTWISE && op->split == MP_SPLIT_COLUMN))
        return MP_RECOMPUTE_MLP;
      return 0;
    case MP_OP_EMBEDDING:
    case MP_OP_LOSS:
    default:
      return 0;
    }
}

/* Is op I the MoE experts' activation function (what moe_act re-runs)? */
static gboolean
expert_activation (const MpLayer *layer, guint i)
{
  const MpOp *op = &layer->ops[i];
  return op->kind == MP_OP_ELEMENTWISE && op->split == MP_SPLIT_EXPERT;
}

/* ---- torchtitan's op-level policy ------------------------------------------------------
 * torchtitan (torchtitan/distributed/activation_checkpoint.py, SelectiveAC) checkpoints
 * each block and saves the outputs of attention, of collectives and of its linears but
 * every second one (counted in forward order per block), re-running the rest. Its
 * models run q, k, v and the gated MLP's w1, w3 as separate linears, where the IR fuses
 * them (qkv; fc1 of a swiglu MLP is 2 ffn wide): the order is q, k, v, o, w1, w3, w2
 * (gelu: q, k, v, o, fc1, fc2). The router's gate is always re-run (its default
 * force_recompute_mm_shapes_by_fqns), and so are the experts' grouped GEMMs, which are
 * not in its save list; their dispatched tokens come from an all-to-all, kept. */

/* Is op I a linear the policy counts (a dense GEMM of a block)? */
static gboolean
counted_linear (const MpLayer *layer, guint i)
{
  const MpOp *op = &layer->ops[i];
  return layer->kind == MP_LAYER_BLOCK && op->kind == MP_OP_GEMM && op->split != MP_SPLIT_EXPERT;
}

/* The share of GEMM I's output (its columns) that the policy keeps. */
static double
saved_share (const MpLayer *layer, guint target)
{
  double q = 0, kv = 0, fc2_k = 0;
  for (guint i = 0; i < layer->n_ops; i++)
    {
      const MpOp *op = &layer->ops[i];
      if (op->kind == MP_OP_ATTENTION)
        q = op->heads * op->head_dim, kv = op->kv_heads * op->head_dim;
      if (op->kind == MP_OP_GEMM && strcmp (op->name, "fc2") == 0)
        fc2_k = op->gemm_k;
    }
  guint count = 0;
  for (guint i = 0; i < layer->n_ops; i++)
    {
      if (!counted_linear (layer, i))
        continue;
      const MpOp *op = &layer->ops[i];
      /* Its pieces as torchtitan's linears, widths in columns. */
      double piece[3] = { op->gemm_n, 0, 0 };
      guint n = 1;
      if (strcmp (op->name, "qkv") == 0 && q > 0)
        piece[0] = q, piece[1] = kv, piece[2] = kv, n = 3;
      else if (strcmp (op->name, "fc1") == 0 && fc2_k > 0 && op->gemm_n == 2 * fc2_k)
        piece[0] = piece[1] = fc2_k, n = 2;
      double saved = 0;
      for (guint k = 0; k < n; k++)
        if (++count % 2 == 1)
          saved += piece[k];
      if (i == target)
        return op->gemm_n > 0 ? saved / op->gemm_n : 0;
    }
  return 0;
}

double
cm_op_policy_kept (const MpLayer *layer, const MpParallelConfig *cfg)
{
  double t = cfg->tp, sd = cfg->sequence_parallel && cfg->tp > 1 ? cfg->tp : 1;
  if (layer->kind != MP_LAYER_BLOCK || layer->n_ops == 0)
    return 0;
  double kept = layer->ops[0].act_rep_bytes / sd;          /* the block's input */
  for (guint i = 0; i < layer->n_ops; i++)
    {
      const MpOp *op = &layer->ops[i];
      /* The element size from the op's own traffic: e (k + n) per token per count. */
      if (counted_linear (layer, i) && op->gemm_k + op->gemm_n > 0)
        {
          double e = op->fwd_bytes / ((op->gemm_k + op->gemm_n) * op->count);
          double out = e * op->gemm_n * op->count;
          kept += saved_share (layer, i) * out / (op->split == MP_SPLIT_COLUMN ? t : sd);
        }
      if (op->kind == MP_OP_ATTENTION && i + 1 < layer->n_ops)
        kept += layer->ops[i + 1].act_bytes / t;           /* its output, O */
      if (op->kind == MP_OP_GEMM && op->split == MP_SPLIT_EXPERT && i > 0
          && layer->ops[i - 1].kind == MP_OP_ROUTER)
        kept += op->act_rep_bytes / sd;                    /* the dispatched tokens */
    }
  return kept;
}

double
cm_op_recompute_share (const MpLayer *layer, guint op, const MpParallelConfig *cfg)
{
  if (cfg->recompute != MP_RECOMPUTE_SELECTIVE)
    return 0;
  guint set = mp_recompute_modules_of (cfg);
  if (set == MP_RECOMPUTE_OP)
    {
      if (layer->kind != MP_LAYER_BLOCK || layer->ops[op].kind == MP_OP_ATTENTION)
        return 0;
      return counted_linear (layer, op) ? 1 - saved_share (layer, op) : 1;
    }
  gboolean entry;
  guint module = op_module (layer, op, &entry);
  if (module & set)
    return 1;
  return (set & MP_RECOMPUTE_MOE_ACT) && expert_activation (layer, op) ? 1 : 0;
}

void
cm_op_dropped (const MpLayer *layer, guint i, const MpParallelConfig *cfg, double *split,
               double *rep, double *score)
{
  const MpOp *op = &layer->ops[i];
  *split = *rep = *score = 0;
  if (cfg->recompute != MP_RECOMPUTE_SELECTIVE || layer->kind != MP_LAYER_BLOCK)
    return;
  guint set = mp_recompute_modules_of (cfg);
  g_return_if_fail (set != MP_RECOMPUTE_OP);            /* cm_op_policy_kept says that */
  gboolean entry;
  guint module = op_module (layer, i, &entry);
  if ((module & set & ~(guint) (MP_RECOMPUTE_LAYERNORM | MP_RECOMPUTE_CORE_ATTN)) && !entry)
    {
      /* Inside a checkpointed submodule: nothing kept but the entry's input. */
      *split = op->act_bytes;
      *rep = op->act_rep_bytes;
      *score = op->act_score_bytes;
      return;
    }
  /* The attention core's checkpoint keeps Q, K and V (its input) and drops the score
   * terms; with flash attention there are none to drop (its row statistics are all). */
  if (module == MP_RECOMPUTE_CORE_ATTN && (set & MP_RECOMPUTE_CORE_ATTN))
    *score = op->act_score_bytes;
  /* mla_up_proj discards the Q, K and V the core keeps, rebuilding them for its backward. */
  if (op->kind == MP_OP_ATTENTION && (set & MP_RECOMPUTE_MLA_UP_PROJ) && i > 0
      && mla_up_op (layer, i - 1))
    *split = op->act_bytes;
  /* Output-discarding: the op after a norm no longer keeps the norm's output (its
   * input), the op after the experts' activation no longer keeps that one's. */
  if (i > 0 && (set & MP_RECOMPUTE_LAYERNORM) && layer->ops[i - 1].kind == MP_OP_NORM)
    *rep = MIN (op->act_rep_bytes, layer->ops[i - 1].act_rep_bytes);
  if (i > 0 && (set & MP_RECOMPUTE_MOE_ACT) && expert_activation (layer, i - 1))
    *split = op->act_bytes;
}
