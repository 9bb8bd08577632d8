/* recompute.c - which ops selective recompute re-runs and which activations it drops.
 *
 * Megatron-Core's --recompute-modules (transformer_config.py, recompute_modules): the
 * submodules core_attn, mlp, moe and shared_experts are checkpointed (their input is
 * kept, what they keep inside is not, and their forward runs again before their
 * backward); layernorm and moe_act discard their output (the next op's saved input) and
 * rebuild it. An op belongs to a module by its kind and place in a block of the model IR
 * (model/model.c builds them): the attention core, the block's norms, the dense MLP's
 * fc1 / activation / fc2, the router and the expert ops of an MoE MLP, and ops named
 * "shared_..." for shared experts. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/costmodel-private.h"

#include <string.h>

/* The module op OP of LAYER is part of (0: none), and whether it is the module's entry
 * (the op whose saved input is the checkpoint's input, kept). */
static guint
op_module (const MpLayer *layer, guint i, gboolean *entry)
{
  const MpOp *op = &layer->ops[i];
  *entry = FALSE;
  if (layer->kind != MP_LAYER_BLOCK)
    return 0;
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
      /* fc2, and the activation between (the only column-split element-wise op). */
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

gboolean
cm_op_recomputed (const MpLayer *layer, guint op, const MpParallelConfig *cfg)
{
  if (cfg->recompute != MP_RECOMPUTE_SELECTIVE)
    return FALSE;
  guint set = mp_recompute_modules_of (cfg);
  gboolean entry;
  guint module = op_module (layer, op, &entry);
  if (module & set)
    return TRUE;
  return (set & MP_RECOMPUTE_MOE_ACT) && expert_activation (layer, op);
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
  /* Output-discarding: the op after a norm no longer keeps the norm's output (its
   * input), the op after the experts' activation no longer keeps that one's. */
  if (i > 0 && (set & MP_RECOMPUTE_LAYERNORM) && layer->ops[i - 1].kind == MP_OP_NORM)
    *rep = MIN (op->act_rep_bytes, layer->ops[i - 1].act_rep_bytes);
  if (i > 0 && (set & MP_RECOMPUTE_MOE_ACT) && expert_activation (layer, i - 1))
    *split = op->act_bytes;
}
