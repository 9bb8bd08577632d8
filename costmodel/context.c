/* context.c - the cost model's context: what depends only on (model, cluster), computed
 * once; which ranks form a plan's groups; one rank's accounting for the programs.
 *
 * Precomputed here: one MpCostDevice per node group (curve, anchor, dtype, profile), each
 * op's tensor-parallel role (CmOp: Megatron's f/g regions found by walking the ops),
 * prefix sums of parameters and activations over layers, and classes of identical layers
 * so that a 96-block model is costed as three distinct layers. Units as in costmodel.h. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/costmodel-private.h"
#include "common/error.h"

#include <string.h>

/* ---- the parallel config's derived sizes ------------------------------------------ */

double
cm_tokens (const MpCostContext *ctx, const MpParallelConfig *cfg)
{
  double s = ctx->model->seq_len > 0 ? (double) ctx->model->seq_len : 1.0;
  return cfg->micro_batch_size * s / MAX (cfg->cp, 1u);
}

double
cm_bucket_bytes (const MpParallelConfig *cfg)
{
  /* PyTorch DDP's default bucket_cap_mb = 25 (torch.nn.parallel.DistributedDataParallel). */
  return cfg->bucket_bytes > 0 ? cfg->bucket_bytes : 25.0 * 1024 * 1024;
}

double
cm_grad_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg)
{
  double g;
  mp_model_state_bytes_per_param (ctx->model, NULL, &g, NULL);
  return cfg->fp32_grads ? 4.0 : g;
}

double
cm_reduce_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg)
{
  return mp_stack_fp32_reduce (cfg->stack) ? 4.0 : cm_grad_bytes (ctx, cfg);
}

/* Spreads N items over C slots, the remainder going first to the middle slots, then the
 * last, then the first (which hold the embedding and the head already). */
static void
spread (guint n, guint c, guint *counts)
{
  for (guint i = 0; i < c; i++)
    counts[i] = n / c;
  guint r = n % c;
  for (guint i = 1; i + 1 < c && r > 0; i++, r--)
    counts[i]++;
  if (r > 0 && c > 1)
    counts[c - 1]++, r--;
  if (r > 0)
    counts[0]++;
}

static void
chunk_layers_of (const MpModel *m, const MpParallelConfig *cfg, guint *first, guint *counts)
{
  guint chunks = mp_parallel_config_chunks (cfg);
  if (cfg->chunk_layers)
    memcpy (counts, cfg->chunk_layers, chunks * sizeof *counts);
  else if (m->arch == MP_ARCH_TRANSFORMER)
    {
      spread ((guint) m->n_blocks, chunks, counts);
      counts[0] += 1;                       /* embedding */
      counts[chunks - 1] += 1;              /* head */
    }
  else
    spread (m->n_layers, chunks, counts);
  guint at = 0;
  for (guint c = 0; c < chunks; c++)
    {
      first[c] = at;
      at += counts[c];
    }
}

void
cm_chunk_layers (const MpCostContext *ctx, const MpParallelConfig *cfg, guint *first,
                 guint *counts)
{
  chunk_layers_of (ctx->model, cfg, first, counts);
}

guint
cm_recompute_blocks (const MpParallelConfig *cfg)
{
  if (cfg->recompute != MP_RECOMPUTE_FULL || cfg->recompute_num_layers == 0
      || cfg->recompute_method == MP_RECOMPUTE_METHOD_UNIFORM)
    return G_MAXUINT;
  return cfg->recompute_num_layers;
}

gboolean
mp_recompute_full_layer (const MpParallelConfig *cfg, const MpModel *model, guint layer)
{
  g_return_val_if_fail (cfg != NULL && model != NULL && layer < model->n_layers, FALSE);
  if (cfg->recompute != MP_RECOMPUTE_FULL || !cm_recomputable (&model->layers[layer]))
    return FALSE;
  guint limit = cm_recompute_blocks (cfg);
  if (limit == G_MAXUINT)
    return TRUE;
  /* Megatron's block method: the first N transformer layers of each model chunk. */
  guint chunks = mp_parallel_config_chunks (cfg), first[chunks], counts[chunks], c = 0;
  chunk_layers_of (model, cfg, first, counts);
  while (c + 1 < chunks && first[c + 1] <= layer)
    c++;
  guint before = 0;
  for (guint l = first[c]; l < layer; l++)
    before += cm_recomputable (&model->layers[l]);
  return before < limit;
}

/* ---- tensor-parallel roles ---------------------------------------------------------- */

/* Walks every op in order with the state "inside a region" and records each op's role.
 * Regions may span layers (the mlp architecture alternates column and row layers). */
static void
assign_roles (MpCostContext *ctx)
{
  const MpModel *m = ctx->model;
  gboolean in_region = FALSE;
  double h = (double) m->hidden;
  /* attention (ir14): the widths replicated GEMMs produced since the last region entry
   * (MLA's latents, which every rank computes for all heads). The column GEMMs that read
   * them gather them under SP and all-reduce their gradient: they open an entry. */
  double replicated = 0;
  for (guint li = 0; li < m->n_layers; li++)
    {
      const MpLayer *layer = &m->layers[li];
      CmLayer *cl = &ctx->layers[li];
      cl->ops = g_new0 (CmOp, MAX (layer->n_ops, 1u));
      gboolean first_expert = TRUE;
      for (guint oi = 0; oi < layer->n_ops; oi++)
        {
          const MpOp *op = &layer->ops[oi];
          CmOp *r = &cl->ops[oi];
          gboolean gemm = op->kind == MP_OP_GEMM || op->kind == MP_OP_ROUTER;
          switch (op->split)
            {
            case MP_SPLIT_COLUMN:
            case MP_SPLIT_HEADS:
              r->split = TRUE;
              r->gemm = gemm ? CM_GEMM_SPLIT_N : CM_GEMM_FULL;
              if (gemm && replicated > 0)
                r->entry_width = replicated;
              else if (!in_region && gemm)
                r->entry_width = op->gemm_k;
              if (gemm)
                replicated = 0;
              in_region = TRUE;
              break;
            case MP_SPLIT_ROW:
              r->split = TRUE;
              r->gemm = gemm ? CM_GEMM_SPLIT_K : CM_GEMM_FULL;
              if (in_region)
                r->exit_width = gemm ? op->gemm_n : h;
              in_region = FALSE;
              break;
            case MP_SPLIT_VOCAB:
              if (op->kind == MP_OP_EMBEDDING)
                {
                  /* Each rank looks up its vocabulary shard (zeros elsewhere) and writes a
                   * full-width output; an all-reduce (or reduce-scatter) sums them. */
                  r->exit_width = h;
                  break;
                }
              r->split = TRUE;
              r->gemm = gemm ? CM_GEMM_SPLIT_N : CM_GEMM_FULL;
              if (!in_region && gemm)
                r->entry_width = op->gemm_k;
              /* Megatron's vocab-parallel cross-entropy all-reduces the logit max, the
               * sum of exponentials and the target logit: three fp32 per token. */
              if (op->kind == MP_OP_LOSS)
                r->loss_reductions = 3;
              in_region = TRUE;
              break;
            case MP_SPLIT_EXPERT:
              r->split = r->expert = TRUE;
              if (gemm && first_expert)
                r->a2a_width = op->gemm_k * op->count;
              first_expert = first_expert && !gemm;
              if (gemm && op->gemm_n < op->gemm_k)
                {
                  /* The down projection: row-parallel over its ffn input. */
                  r->gemm = CM_GEMM_SPLIT_K;
                  if (in_region)
                    r->exit_width = op->gemm_n;
                  in_region = FALSE;
                }
              else if (gemm)
                {
                  r->gemm = CM_GEMM_SPLIT_N;
                  if (!in_region)
                    r->entry_width = op->gemm_k;
                  in_region = TRUE;
                }
              break;
            case MP_SPLIT_NONE:
            default:
              /* Inside a region an op works on the split tensors, unless it is a
               * replicated GEMM or follows one (MLA's latents and their norms). */
              r->split = in_region && !gemm && replicated == 0;
              r->gemm = CM_GEMM_FULL;
              if (gemm && op->kind == MP_OP_GEMM)
                replicated += op->gemm_n;
              if (op->kind == MP_OP_NORM || op->kind == MP_OP_GEMM)
                *(r->split ? &cl->params_heads_partial : &cl->params_rows_partial)
                    += op->params;
              break;
            }
          if (gemm)
            r->out_width = op->gemm_n * MAX (op->count, 1.0);
          else if (op->kind == MP_OP_ATTENTION)
            r->out_width = op->heads * (op->v_head_dim > 0 ? op->v_head_dim : op->head_dim);
          double *slot = r->split ? &cl->max_out_split : &cl->max_out_width;
          *slot = MAX (*slot, r->out_width);
          /* Parameters by how tensor parallelism divides them. */
          gboolean fp8 = cm_fp8_op (layer, op);
          if (op->split == MP_SPLIT_EXPERT)
            {
              cl->params_expert += op->params;
              cl->fp8_expert += fp8 ? op->params : 0;
            }
          else if (op->split == MP_SPLIT_NONE)
            {
              cl->params_rep += op->params;
              cl->fp8_rep += fp8 ? op->params : 0;
            }
          else
            {
              cl->params_split += op->params;
              cl->fp8_split += fp8 ? op->params : 0;
            }
        }
      /* A block or an embedding hands a replicated (or SP-split) hidden state on. */
      if (in_region && (layer->kind == MP_LAYER_BLOCK || layer->kind == MP_LAYER_EMBEDDING)
          && layer->n_ops > 0)
        {
          cl->ops[layer->n_ops - 1].exit_width = h;
          in_region = FALSE;
        }
      switch (layer->kind)
        {
        case MP_LAYER_EMBEDDING:
          cl->input_width = 0;
          cl->output_width = h;
          break;
        case MP_LAYER_BLOCK:
          cl->input_width = cl->output_width = h;
          break;
        case MP_LAYER_HEAD:
          cl->input_width = h;
          cl->output_width = 0;
          break;
        case MP_LAYER_DENSE:
        default:
          cl->input_width = layer->n_ops > 0 ? layer->ops[0].gemm_k : 0;
          cl->output_width = layer->n_ops > 0 ? layer->ops[0].gemm_n : 0;
          cl->output_split = in_region;
          break;
        }
    }
}

/* ---- identical layers ----------------------------------------------------------------- */

typedef struct {
  const MpCostContext *ctx;
  guint layer;
  guint hash;
} LayerKey;

static gboolean
same_op (const MpOp *a, const MpOp *b, const CmOp *ra, const CmOp *rb)
{
  return a->kind == b->kind && a->split == b->split && a->gemm_n == b->gemm_n
         && a->gemm_k == b->gemm_k && a->count == b->count && a->heads == b->heads
         && a->kv_heads == b->kv_heads && a->head_dim == b->head_dim
         && a->v_head_dim == b->v_head_dim && a->window == b->window
         && a->params == b->params && a->fwd_flops == b->fwd_flops
         && a->bwd_flops == b->bwd_flops && a->fwd_bytes == b->fwd_bytes
         && a->act_bytes == b->act_bytes && a->act_rep_bytes == b->act_rep_bytes
         && a->act_score_bytes == b->act_score_bytes && ra->split == rb->split
         && ra->expert == rb->expert && ra->gemm == rb->gemm
         && ra->entry_width == rb->entry_width && ra->exit_width == rb->exit_width
         && ra->loss_reductions == rb->loss_reductions && ra->a2a_width == rb->a2a_width;
}

static gboolean
layer_key_equal (gconstpointer pa, gconstpointer pb)
{
  const LayerKey *ka = pa, *kb = pb;
  const MpLayer *a = &ka->ctx->model->layers[ka->layer];
  const MpLayer *b = &kb->ctx->model->layers[kb->layer];
  const CmLayer *ca = &ka->ctx->layers[ka->layer], *cb = &kb->ctx->layers[kb->layer];
  if (ka->hash != kb->hash || a->kind != b->kind || a->n_ops != b->n_ops
      || ca->output_split != cb->output_split || ca->input_width != cb->input_width
      || ca->output_width != cb->output_width)
    return FALSE;
  for (guint i = 0; i < a->n_ops; i++)
    if (!same_op (&a->ops[i], &b->ops[i], &ca->ops[i], &cb->ops[i]))
      return FALSE;
  return TRUE;
}

static guint
layer_key_hash (gconstpointer p)
{
  return ((const LayerKey *) p)->hash;
}

/* A hash of the fields same_op compares that most often differ. */
static guint
hash_layer (const MpLayer *l)
{
  guint h = (guint) l->kind * 31u + l->n_ops;
  for (guint i = 0; i < l->n_ops; i++)
    {
      const MpOp *op = &l->ops[i];
      h = h * 1000003u ^ (guint) op->kind ^ ((guint) op->split << 4);
      h = h * 1000003u ^ g_double_hash (&op->gemm_n) ^ g_double_hash (&op->gemm_k);
      h = h * 1000003u ^ g_double_hash (&op->fwd_bytes);
    }
  return h;
}

static void
find_classes (MpCostContext *ctx)
{
  guint n = ctx->model->n_layers;
  LayerKey *keys = g_new (LayerKey, MAX (n, 1u));
  GHashTable *seen = g_hash_table_new (layer_key_hash, layer_key_equal);
  for (guint i = 0; i < n; i++)
    {
      keys[i] = (LayerKey) { ctx, i, hash_layer (&ctx->model->layers[i]) };
      LayerKey *first = g_hash_table_lookup (seen, &keys[i]);
      if (first)
        {
          ctx->layers[i].klass = first->layer;
          ctx->layers[i].class_id = ctx->layers[first->layer].class_id;
        }
      else
        {
          ctx->layers[i].klass = i;
          ctx->layers[i].class_id = ctx->n_classes++;
          g_hash_table_add (seen, &keys[i]);
        }
    }
  g_hash_table_destroy (seen);
  g_free (keys);
  ctx->class_first = g_new (guint, MAX (ctx->n_classes, 1u));
  for (guint i = 0; i < n; i++)
    if (ctx->layers[i].klass == i)
      ctx->class_first[ctx->layers[i].class_id] = i;
  for (guint i = 0; i < n; i++)
    {
      CmLayer *cl = &ctx->layers[i];
      cl->no_experts = TRUE;
      for (guint k = 0; k < ctx->model->layers[i].n_ops; k++)
        cl->no_experts &= !cl->ops[k].expert && !(cl->ops[k].a2a_width > 0);
    }
}

/* ---- prefix sums -------------------------------------------------------------------- */

/* Full recomputation applies to transformer blocks and mlp layers (Megatron checkpoints
 * transformer layers; the embedding and the head keep their activations). */
gboolean
cm_recomputable (const MpLayer *l)
{
  return l->kind == MP_LAYER_BLOCK || l->kind == MP_LAYER_DENSE;
}

/* The bytes per token of expert rows that op I of LAYER, the combine after the experts'
 * last op, keeps: its saved input less the k fp32 gates (model.c add_moe_mlp), which a
 * stack weighting inside the experts keeps there instead. */
static double
combine_rows (const MpLayer *l, guint i)
{
  const MpOp *op = &l->ops[i], *prev = i > 0 ? &l->ops[i - 1] : NULL;
  if (prev == NULL || prev->split != MP_SPLIT_EXPERT || op->split == MP_SPLIT_EXPERT)
    return 0;
  return MAX (op->act_rep_bytes - 4 * prev->count, 0);
}

static void
build_sums (MpCostContext *ctx)
{
  guint n = ctx->model->n_layers;
  for (int s = 0; s < CM_SUM_N; s++)
    ctx->sums[s] = g_new0 (double, n + 1);
  for (guint i = 0; i < n; i++)
    {
      const MpLayer *l = &ctx->model->layers[i];
      const CmLayer *cl = &ctx->layers[i];
      double v[CM_SUM_N] = { 0 };
      v[CM_SUM_PARAMS_SPLIT] = cl->params_split;
      v[CM_SUM_PARAMS_REP] = cl->params_rep;
      v[CM_SUM_PARAMS_EXPERT] = cl->params_expert;
      v[CM_SUM_FP8_SPLIT] = cl->fp8_split;
      v[CM_SUM_FP8_REP] = cl->fp8_rep;
      v[CM_SUM_FP8_EXPERT] = cl->fp8_expert;
      v[CM_SUM_PARTIAL_ROWS] = cl->params_rows_partial;
      v[CM_SUM_PARTIAL_HEADS] = cl->params_heads_partial;
      v[CM_SUM_ACT] = l->act_bytes;
      v[CM_SUM_ACT_REP] = l->act_rep_bytes;
      v[CM_SUM_ACT_SCORE] = l->act_score_bytes;
      gboolean rc = cm_recomputable (l);
      v[CM_SUM_FULL_INPUT] = rc ? cl->input_width * ctx->elt : 0;
      v[CM_SUM_RECOMPUTABLE] = rc ? 1 : 0;
      v[CM_SUM_NR_ACT] = rc ? 0 : l->act_bytes;
      v[CM_SUM_NR_ACT_REP] = rc ? 0 : l->act_rep_bytes;
      v[CM_SUM_NR_ACT_SCORE] = rc ? 0 : l->act_score_bytes;
      for (guint o = 0; o < l->n_ops; o++)
        if (l->ops[o].split == MP_SPLIT_EXPERT)
          {
            v[CM_SUM_EXPERT_ACT] += l->ops[o].act_bytes;
            v[CM_SUM_EXPERT_REP] += l->ops[o].act_rep_bytes;
          }
        else
          v[CM_SUM_COMBINE_ROWS] += combine_rows (l, o);
      for (int s = 0; s < CM_SUM_N; s++)
        ctx->sums[s][i + 1] = ctx->sums[s][i] + v[s];
      if (rc)
        ctx->recomputable_fwd_flops += l->fwd_flops;
      for (guint o = 0; o < l->n_ops; o++)
        if (l->ops[o].kind == MP_OP_ATTENTION)
          ctx->attn_fwd_flops += l->ops[o].fwd_flops;
    }
}

/* ---- devices -------------------------------------------------------------------------- */

/* The dtype GEMMs run in: the model's precision where the device has a rate for it, else
 * fp32 (a CPU core computes 16-bit formats in fp32). */
static MpDtype
compute_dtype (const MpModel *m, const MpDevice *d)
{
  MpDtype want = m->precision;
  return d->peak_flops[want] > 0 ? want : MP_DTYPE_FP32;
}

static gboolean
profile_applies (const MpCostProfile *p, const MpDevice *d)
{
  const char *name = p ? mp_cost_profile_device (p) : NULL;
  return p != NULL && (name == NULL || *name == '\0' || g_strcmp0 (name, d->name) == 0);
}

/* Is CLUSTER's link of TIER NVLink, and through NVLink switches? (FALSE without one.) */
static void
link_kind (const MpCluster *c, MpTier tier, gboolean *nvlink, gboolean *nvswitch)
{
  static const char *const nvlink_names[] = { "nvlink", "nvl", NULL };
  static const char *const nvswitch_names[] = { "nvswitch", "nvl72", "nvl36", NULL };
  *nvlink = *nvswitch = FALSE;
  if (!c->has_link[tier])
    return;
  g_autofree char *name = g_ascii_strdown (c->links[tier].name ? c->links[tier].name : "", -1);
  for (int i = 0; nvlink_names[i]; i++)
    *nvlink |= strstr (name, nvlink_names[i]) != NULL;
  for (int i = 0; nvswitch_names[i]; i++)
    *nvswitch |= strstr (name, nvswitch_names[i]) != NULL;
}

static void
init_device (MpCostContext *ctx, MpCostDevice *dev, const MpDevice *d)
{
  dev->device = d;
  dev->curve = mp_device_curve (mp_device_class_of (d));
  dev->dtype = compute_dtype (ctx->model, d);
  dev->profile = profile_applies (ctx->profile, d) ? ctx->profile : NULL;
  /* Anchor the shape model: at the measured shape it must give the measured efficiency,
   * so the shape factors only say how other shapes differ from it. */
  const double *a = dev->curve->gemm_anchor;
  double shape = mp_cost_gemm_shape_efficiency (dev->curve, a[0], a[1], a[2], 1);
  dev->gemm_scale = dev->curve->gemm_anchor_eff / shape;
  dev->power_rate = dev->profile ? 1.0 : mp_cost_power_rate (dev->curve, d->power_limit_w);
  dev->mem_eff = dev->curve->mem_eff;
  double measured = dev->profile ? mp_cost_profile_mem_bw (dev->profile) : 0;
  if (measured > 0 && d->mem_bw_Bps > 0)
    dev->mem_eff = MIN (1.0, measured / d->mem_bw_Bps);
  for (int t = 0; t < MP_TIER_N; t++)
    dev->link_eff[t] = cm_tier_efficiency (ctx->cluster, dev, (MpTier) t);
  /* NCCL's latencies differ for NVLink and PCI; NVLink SHARP needs NVSwitches (a DGX/HGX
   * board or an NVL72 rack). Known from the node and domain links' names. */
  link_kind (ctx->cluster, MP_TIER_NODE, &dev->nvlink, &dev->nvswitch);
  link_kind (ctx->cluster, MP_TIER_DOMAIN, &dev->domain_nvlink, &dev->domain_nvswitch);
}

MpCostContext *
mp_cost_context_new (const MpModel *model, const MpCluster *cluster,
                     const MpCostProfile *profile)
{
  g_return_val_if_fail (model != NULL && cluster != NULL && cluster->n_groups > 0, NULL);
  MpCostContext *ctx = g_new0 (MpCostContext, 1);
  ctx->model = model;
  ctx->cluster = cluster;
  ctx->profile = profile;
  ctx->elt = model->precision == MP_DTYPE_FP32 ? 4.0 : 2.0;
  ctx->dtype = model->precision;
  ctx->causal = model->arch == MP_ARCH_TRANSFORMER;
  ctx->n_devices = cluster->n_groups;
  ctx->devices = g_new0 (MpCostDevice, ctx->n_devices);
  for (guint g = 0; g < cluster->n_groups; g++)
    init_device (ctx, &ctx->devices[g], &cluster->groups[g].device);
  /* What mp_cluster_span says of any group's tiers; exact for every group of a
   * homogeneous cluster (one node group). */
  mp_cluster_span (cluster, NULL, NULL, 0, &ctx->any_span);
  ctx->layers = g_new0 (CmLayer, MAX (model->n_layers, 1u));
  assign_roles (ctx);
  find_classes (ctx);
  build_sums (ctx);
  if (model->tied_embeddings && model->arch == MP_ARCH_TRANSFORMER)
    ctx->tied_params = (double) model->vocab * (double) model->hidden;
  return ctx;
}

void
mp_cost_context_free (MpCostContext *ctx)
{
  if (ctx == NULL)
    return;
  for (guint i = 0; i < ctx->model->n_layers; i++)
    g_free (ctx->layers[i].ops);
  g_free (ctx->layers);
  g_free (ctx->class_first);
  for (int s = 0; s < CM_SUM_N; s++)
    g_free (ctx->sums[s]);
  g_free (ctx->devices);
  cm_memo_free (ctx->layer_memo);
  cm_memo_free (ctx->span_memo);
  cm_memo_free (ctx->gemm_memo);
  cm_memo_free (ctx->coll_memo);
  cm_memo_free (ctx->op_memo);
  cm_bucket_slots_free (ctx->bucket_slots);
  cm_floor_slot_free (ctx->floor_slot);
  g_free (ctx);
}

const MpModel *
mp_cost_context_model (const MpCostContext *ctx)
{
  return ctx->model;
}

guint
mp_cost_layer_class_first (const MpCostContext *ctx, guint layer)
{
  g_return_val_if_fail (ctx != NULL && layer < ctx->model->n_layers, layer);
  return ctx->class_first[ctx->layers[layer].class_id];
}

const MpCluster *
mp_cost_context_cluster (const MpCostContext *ctx)
{
  return ctx->cluster;
}

const MpCostProfile *
mp_cost_context_profile (const MpCostContext *ctx)
{
  g_return_val_if_fail (ctx != NULL, NULL);
  return ctx->profile;
}

const MpCostDevice *
mp_cost_device (const MpCostContext *ctx, guint group)
{
  g_return_val_if_fail (ctx != NULL && group < ctx->n_devices, NULL);
  return &ctx->devices[group];
}

/* ---- rank groups ---------------------------------------------------------------------- */

static guint
device_of_rank (const MpParallelConfig *cfg, guint rank)
{
  return cfg->placement ? cfg->placement[rank] : rank;
}

/* The rate a device group's GEMMs run at: its dense peak at its compute dtype. */
static double
group_peak (const MpCostContext *ctx, guint group)
{
  const MpCostDevice *d = &ctx->devices[group];
  return d->device->peak_flops[d->dtype];
}

guint
mp_cost_stage_group (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL && cm_config_sane (cfg), 0);
  if (ctx->n_devices == 1)
    return 0;
  /* A stage whose ranks sit on more than one kind of device waits on the slowest: every
   * rank of a stage runs the same layers in lockstep (its TP, CP and DP collectives). */
  guint stride[MP_DIM_N];
  mp_parallel_config_strides (cfg, stride);
  guint64 world = (guint64) cfg->dp * cfg->tp * cfg->pp * cfg->cp;
  guint best = G_MAXUINT;
  for (guint64 r = 0; r < world; r++)
    {
      guint device = device_of_rank (cfg, (guint) r);
      if (r / stride[MP_DIM_PP] % cfg->pp != stage || device >= ctx->cluster->world_size)
        continue;
      guint g = (guint) (mp_cluster_group_of (ctx->cluster, device) - ctx->cluster->groups);
      if (best == G_MAXUINT || group_peak (ctx, g) < group_peak (ctx, best))
        best = g;
    }
  return best == G_MAXUINT ? 0 : best;
}

const MpCostDevice *
cm_stage_device (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage)
{
  return &ctx->devices[mp_cost_stage_group (ctx, cfg, stage)];
}

gboolean
cm_spans_equal (const MpCostContext *ctx, const MpParallelConfig *cfg, guint a, guint b)
{
  if (a == b)
    return TRUE;
  const MpCluster *c = ctx->cluster;
  /* The last stage pairs with the previous one (pp_next), the others with the next. */
  if (c->n_groups != 1 || cfg->placement != NULL || a == cfg->pp - 1 || b == cfg->pp - 1)
    return FALSE;
  /* In a homogeneous cluster with ranks on devices in order, a stage's groups look the
   * same as another's when their first ranks sit at the same place in a domain (a node,
   * without domains) and neither stage's groups reach into a short last domain. */
  guint stride[MP_DIM_N];
  mp_parallel_config_strides (cfg, stride);
  guint64 dpd = (guint64) c->groups[0].devices_per_node * c->nodes_per_domain;
  if (c->nodes_per_domain > 1 && c->nodes % c->nodes_per_domain != 0)
    return FALSE;
  return ((guint64) a * stride[MP_DIM_PP]) % dpd == ((guint64) b * stride[MP_DIM_PP]) % dpd;
}

/* The first rank of RANK's tensor-parallel group, or of its expert-parallel group (EP):
 * the ranks with its tp and pp coordinates whose dp * cp index (cp fastest) falls in the
 * same run of ep, as mp_cost_stage_spans builds them. */
static guint
group_leader (const MpParallelConfig *cfg, const guint stride[MP_DIM_N], guint rank,
              gboolean ep)
{
  guint t = rank / stride[MP_DIM_TP] % cfg->tp;
  if (!ep)
    return rank - t * stride[MP_DIM_TP];
  guint c = rank / stride[MP_DIM_CP] % cfg->cp, d = rank / stride[MP_DIM_DP] % cfg->dp;
  guint j = c + cfg->cp * d, j0 = j - j % MAX (cfg->ep, 1u);
  return rank - c * stride[MP_DIM_CP] - d * stride[MP_DIM_DP] + (j0 % cfg->cp) * stride[MP_DIM_CP]
         + (j0 / cfg->cp) * stride[MP_DIM_DP];
}

/* Where DEVICE sits for a grouping rule: its NVLink domain, or (KIND) the first node
 * group with the same device, so that groups of one device spread over several node
 * groups count as one kind. */
static guint
place_of (const MpCluster *c, guint device, gboolean kind)
{
  if (!kind)
    return mp_cluster_domain_of (c, device);
  const MpNodeGroup *g = mp_cluster_group_of (c, device);
  for (guint i = 0; i < c->n_groups; i++)
    if (g_strcmp0 (c->groups[i].device.name, g->device.name) == 0)
      return i;
  return (guint) (g - c->groups);
}

/* Does every TP group (with TP) and EP group (with EP) under CFG lie in one place
 * (place_of)? */
static gboolean
groups_in_one_place (const MpCostContext *ctx, const MpParallelConfig *cfg, gboolean tp,
                     gboolean ep, gboolean kind)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL && cm_config_sane (cfg), FALSE);
  const MpCluster *c = ctx->cluster;
  guint stride[MP_DIM_N];
  mp_parallel_config_strides (cfg, stride);
  guint64 world = (guint64) cfg->dp * cfg->tp * cfg->pp * cfg->cp;
  g_return_val_if_fail (world <= c->world_size, FALSE);
  ep = ep && cfg->ep > 1;
  tp = tp && cfg->tp > 1;
  for (guint r = 0; (tp || ep) && r < world; r++)
    {
      guint here = place_of (c, device_of_rank (cfg, r), kind);
      if (tp && place_of (c, device_of_rank (cfg, group_leader (cfg, stride, r, FALSE)),
                          kind) != here)
        return FALSE;
      if (ep && place_of (c, device_of_rank (cfg, group_leader (cfg, stride, r, TRUE)),
                          kind) != here)
        return FALSE;
    }
  return TRUE;
}

gboolean
mp_cost_groups_in_domains (const MpCostContext *ctx, const MpParallelConfig *cfg,
                           gboolean tp, gboolean ep)
{
  return groups_in_one_place (ctx, cfg, tp, ep, FALSE);
}

gboolean
mp_cost_groups_one_device (const MpCostContext *ctx, const MpParallelConfig *cfg,
                           gboolean tp, gboolean ep)
{
  return groups_in_one_place (ctx, cfg, tp, ep, TRUE);
}

/* Fills SPAN for RANKS[N] under CFG's placement: mp_cluster_span, except in the common
 * case it sorts nothing for - a homogeneous cluster, ranks on devices in order, RANKS
 * increasing - where the nodes are counted in one pass and the per-tier bandwidths and
 * latencies, the same for every group there, come from the context. Searches cost
 * spans of thousands of ranks millions of times. */
static void
group_span (const MpCostContext *ctx, const MpParallelConfig *cfg, const guint *ranks, guint n,
            MpGroupSpan *span)
{
  const MpCluster *c = ctx->cluster;
  gboolean fast = c->n_groups == 1 && cfg->placement == NULL && n > 0;
  for (guint i = 1; fast && i < n; i++)
    fast = ranks[i] > ranks[i - 1];
  if (!fast || ranks[n - 1] >= c->world_size)
    {
      mp_cluster_span (c, cfg->placement, ranks, n, span);
      return;
    }
  *span = ctx->any_span;
  span->n_ranks = n;
  guint dpn = c->groups[0].devices_per_node;
  guint64 dpd = (guint64) dpn * c->nodes_per_domain;
  guint run = 0, domain_run = 0, domain_nodes = 0;
  for (guint i = 0; i < n; i++)
    {
      gboolean same = i > 0 && ranks[i] / dpn == ranks[i - 1] / dpn;
      gboolean same_domain = i > 0 && ranks[i] / dpd == ranks[i - 1] / dpd;
      run = same ? run + 1 : 1;
      span->n_nodes += same ? 0 : 1;
      span->ranks_per_node = MAX (span->ranks_per_node, run);
      domain_run = same_domain ? domain_run + 1 : 1;
      span->n_domains += same_domain ? 0 : 1;
      span->ranks_per_domain = MAX (span->ranks_per_domain, domain_run);
      domain_nodes = same_domain ? domain_nodes + !same : 1;
      span->nodes_per_domain = MAX (span->nodes_per_domain, domain_nodes);
    }
  span->widest = mp_span_widest (span);
}

/* Fills SPAN for the ranks BASE + i * S1 + j * S2, i < N1, j < N2. */
static void
span_of (const MpCostContext *ctx, const MpParallelConfig *cfg, guint *buf, guint base,
         guint s1, guint n1, guint s2, guint n2, MpGroupSpan *span)
{
  guint n = 0;
  for (guint j = 0; j < n2; j++)
    for (guint i = 0; i < n1; i++)
      buf[n++] = base + i * s1 + j * s2;
  group_span (ctx, cfg, buf, n, span);
}

/* MoE (moe14): the rank of the I-th of a stage's tp * cp * dp ranks (tp-fastest, then cp,
 * then dp) whose first is BASE. */
static guint
expert_grid_rank (const MpParallelConfig *cfg, const guint *stride, guint base, guint i)
{
  return base + (i % cfg->tp) * stride[MP_DIM_TP] + (i / cfg->tp % cfg->cp) * stride[MP_DIM_CP]
         + (i / (cfg->tp * cfg->cp)) * stride[MP_DIM_DP];
}

/* HSDP (fsdp17): the I-th rank of the gradient group (cp fastest, then dp) whose first is
 * BASE, and from it the shard group (the first zero_shard of them) and the replicate
 * group (every zero_shard-th). Without HSDP, dp and a group of one. */
static guint
dp_group_rank (const MpParallelConfig *cfg, const guint *stride, guint base, guint i)
{
  return base + (i % cfg->cp) * stride[MP_DIM_CP] + (i / cfg->cp) * stride[MP_DIM_DP];
}

static void
hsdp_spans (const MpCostContext *ctx, const MpParallelConfig *cfg, const guint *stride,
            guint base, guint *buf, MpStageSpans *out)
{
  guint shard = mp_parallel_config_zero_shard (cfg), reps = mp_parallel_config_zero_replicas (cfg);
  if (reps == 1)
    {
      out->dp_shard = out->dp;
      buf[0] = base;
      group_span (ctx, cfg, buf, 1, &out->dp_rep);
      return;
    }
  for (guint j = 0; j < shard; j++)
    buf[j] = dp_group_rank (cfg, stride, base, j);
  group_span (ctx, cfg, buf, shard, &out->dp_shard);
  for (guint j = 0; j < reps; j++)
    buf[j] = dp_group_rank (cfg, stride, base, j * shard);
  group_span (ctx, cfg, buf, reps, &out->dp_rep);
}

/* The spans of STAGE under CFG, computed (mp_cost_stage_spans memoizes them). */
static void
stage_spans (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage,
             MpStageSpans *out)
{
  guint stride[MP_DIM_N];
  mp_parallel_config_strides (cfg, stride);
  guint base = stage * stride[MP_DIM_PP];
  guint dpcp = cfg->dp * cfg->cp, ep = MAX (cfg->ep, 1u);
  guint *buf = g_new (guint, MAX (dpcp * cfg->tp, 2u));
  memset (out, 0, sizeof *out);
  out->stage = stage;
  out->device = cm_stage_device (ctx, cfg, stage);
  span_of (ctx, cfg, buf, base, stride[MP_DIM_TP], cfg->tp, 0, 1, &out->tp);
  span_of (ctx, cfg, buf, base, stride[MP_DIM_CP], cfg->cp, 0, 1, &out->cp);
  /* Dense gradients are replicated over dp * cp (Megatron's data-parallel group with
   * context parallelism). */
  span_of (ctx, cfg, buf, base, stride[MP_DIM_CP], cfg->cp, stride[MP_DIM_DP], cfg->dp,
           &out->dp);
  hsdp_spans (ctx, cfg, stride, base, buf, out);
  /* MoE (moe14): Megatron-Core's expert grid numbers the stage's tp * cp * dp ranks
   * tp-fastest, then cp, then dp, and takes them etp-fastest, then ep, then edp: an
   * expert-parallel group is every etp-th of ep * etp consecutive ones; its experts'
   * gradient group every (etp * ep)-th (without expert parallelism and etp = tp: the
   * dense gradient group). */
  guint etp = mp_parallel_config_etp (cfg), edp = mp_parallel_config_edp (cfg), n = 0;
  for (guint j = 0; j < etp; j++)
    buf[n++] = expert_grid_rank (cfg, stride, base, j);
  group_span (ctx, cfg, buf, n, &out->etp);
  n = 0;
  for (guint j = 0; j < ep; j++)
    buf[n++] = expert_grid_rank (cfg, stride, base, j * etp);
  group_span (ctx, cfg, buf, n, &out->ep);
  n = 0;
  for (guint j = 0; j < etp * ep; j++)
    buf[n++] = expert_grid_rank (cfg, stride, base, j);
  group_span (ctx, cfg, buf, n, &out->etp_ep);
  if (ep == 1 && etp == cfg->tp)
    out->edp = out->dp;
  else
    {
      n = 0;
      for (guint j = 0; j < edp; j++)
        buf[n++] = expert_grid_rank (cfg, stride, base, j * etp * ep);
      group_span (ctx, cfg, buf, n, &out->edp);
    }
  /* Pipeline neighbours: the next stage, or for the last one the previous. */
  n = 0;
  if (cfg->pp > 1 && stage + 1 == cfg->pp)
    buf[n++] = base - stride[MP_DIM_PP];
  buf[n++] = base;
  if (cfg->pp > 1 && stage + 1 < cfg->pp)
    buf[n++] = base + stride[MP_DIM_PP];
  group_span (ctx, cfg, buf, n, &out->pp_next);
  n = 0;
  buf[n++] = 0;
  if (cfg->pp > 1)
    buf[n++] = (cfg->pp - 1) * stride[MP_DIM_PP];
  group_span (ctx, cfg, buf, n, &out->pp_ends);
  g_free (buf);
}

/* A spans memo key: what stage_spans reads of the config (the sizes and the rank order;
 * configs with a placement are not memoized), and the stage. */
#define SPAN_WORDS (8 + MP_DIM_N)

void
mp_cost_stage_spans (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage,
                     MpStageSpans *out)
{
  g_return_if_fail (ctx != NULL && cfg != NULL && out != NULL && cm_config_sane (cfg));
  g_return_if_fail (stage < cfg->pp);
  if (cfg->placement != NULL)
    {
      stage_spans (ctx, cfg, stage, out);
      return;
    }
  MpCostContext *memo = (MpCostContext *) ctx;          /* the memo only: see its field */
  guint64 key[SPAN_WORDS] = { cfg->tp, cfg->cp, cfg->dp, cfg->pp, MAX (cfg->ep, 1u),
                              mp_parallel_config_etp (cfg), stage,
                              mp_parallel_config_zero_shard (cfg) };
  for (guint d = 0; d < MP_DIM_N; d++)
    key[8 + d] = cfg->order[d];
  const MpStageSpans *hit = cm_memo_get (memo->span_memo, key, SPAN_WORDS);
  if (hit != NULL)
    {
      *out = *hit;
      return;
    }
  stage_spans (ctx, cfg, stage, out);
  cm_memo_put (&memo->span_memo, key, SPAN_WORDS, out, sizeof *out);
}

/* ---- the memos ------------------------------------------------------------------------ */

/* A GHashTable of entries, each one block holding its key's words then its value. An entry
 * keeps its key's full hash, which the table's hash function only reads: a layer's key is
 * about a hundred words, and hashing it once per lookup, not per probe or resize, is what
 * makes the memo pay. A lookup probes with a MemoKey on the stack, pointing at the caller's
 * words. Every key of a memo has N_WORDS. */
typedef struct {
  guint64 hash;
  guint n_words;
  const guint64 *words;
} MemoKey;

typedef struct {
  MemoKey key;                    /* key.words: data */
  gsize bytes;                    /* the entry's size */
  guint64 data[];                 /* the key's words, then the value */
} MemoEntry;

struct CmMemo {
  GHashTable *entries;            /* a set of MemoEntry, by their keys */
  guint n_words;
  gsize bytes;                    /* of the entries */
};

static guint64
memo_hash (const guint64 *w, guint n)
{
  /* FNV-1a's step (the 64-bit variant's offset basis and prime) on four interleaved lanes,
   * so that a long key is not one chain of dependent multiplies; then murmur3's 64-bit
   * finaliser, so that every bit of every word reaches the low bits GLib indexes by. */
  const guint64 prime = 1099511628211ull;
  guint64 a = 1469598103934665603ull, b = a ^ 1, c = a ^ 2, d = a ^ 3;
  guint i = 0;
  for (; i + 4 <= n; i += 4)
    {
      a = (a ^ w[i]) * prime;
      b = (b ^ w[i + 1]) * prime;
      c = (c ^ w[i + 2]) * prime;
      d = (d ^ w[i + 3]) * prime;
    }
  for (; i < n; i++)
    a = (a ^ w[i]) * prime;
  guint64 x = a ^ (b * 3) ^ (c * 5) ^ (d * 7) ^ n;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static guint
memo_key_hash (gconstpointer key)
{
  return (guint) ((const MemoKey *) key)->hash;
}

static gboolean
memo_key_equal (gconstpointer a, gconstpointer b)
{
  const MemoKey *x = a, *y = b;
  return x->hash == y->hash && x->n_words == y->n_words
    && memcmp (x->words, y->words, x->n_words * sizeof *x->words) == 0;
}

static CmMemo *
memo_new (guint n_words)
{
  CmMemo *memo = g_new0 (CmMemo, 1);
  memo->n_words = n_words;
  memo->entries = g_hash_table_new_full (memo_key_hash, memo_key_equal, g_free, NULL);
  return memo;
}

void
cm_memo_free (CmMemo *memo)
{
  if (memo == NULL)
    return;
  g_hash_table_destroy (memo->entries);
  g_free (memo);
}

guint
cm_memo_size (const CmMemo *memo)
{
  return memo != NULL ? g_hash_table_size (memo->entries) : 0;
}

void *
cm_memo_get (const CmMemo *memo, const guint64 *key, guint n_words)
{
  if (memo == NULL)
    return NULL;
  g_assert (n_words == memo->n_words);
  MemoKey probe = { memo_hash (key, n_words), n_words, key };
  MemoEntry *entry = g_hash_table_lookup (memo->entries, &probe);
  return entry != NULL ? entry->data + n_words : NULL;
}

void *
cm_memo_put (CmMemo **memo, const guint64 *key, guint n_words, const void *value,
             gsize size)
{
  gsize bytes = sizeof (MemoEntry) + n_words * sizeof *key + size;
  if (*memo == NULL || g_hash_table_size ((*memo)->entries) >= CM_MEMO_MAX
      || (*memo)->bytes + bytes > CM_MEMO_MAX_BYTES)
    {
      cm_memo_free (*memo);
      *memo = memo_new (n_words);
    }
  CmMemo *m = *memo;
  g_assert (n_words == m->n_words);
  MemoKey probe = { memo_hash (key, n_words), n_words, key };
  MemoEntry *old = g_hash_table_lookup (m->entries, &probe);
  if (old != NULL)
    {
      m->bytes -= old->bytes;
      g_hash_table_remove (m->entries, &probe);       /* frees OLD */
    }
  MemoEntry *entry = g_malloc (bytes);
  memcpy (entry->data, key, n_words * sizeof *key);
  entry->key = (MemoKey) { probe.hash, n_words, entry->data };
  entry->bytes = bytes;
  if (value != NULL)
    memcpy (entry->data + n_words, value, size);
  else
    memset (entry->data + n_words, 0, size);
  g_hash_table_add (m->entries, entry);
  m->bytes += bytes;
  return entry->data + n_words;
}

/* ---- one rank's accounting, for programs ------------------------------------------- */

void
mp_cost_layer_params (const MpCostContext *ctx, const MpParallelConfig *cfg, guint layer,
                      double *dense, double *expert)
{
  g_return_if_fail (ctx != NULL && cfg != NULL && cm_config_sane (cfg));
  g_return_if_fail (layer < ctx->model->n_layers && dense != NULL && expert != NULL);
  const CmLayer *cl = &ctx->layers[layer];
  /* As mp_cost_stage_times and mp_cost_stage_memory sum them over a chunk. */
  *dense = cl->params_split / cfg->tp + cl->params_rep;
  *expert = cl->params_expert / ((double) mp_parallel_config_etp (cfg) * cfg->ep);
}

double
mp_cost_tied_params (const MpCostContext *ctx, const MpParallelConfig *cfg)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL && cm_config_sane (cfg), 0);
  return ctx->tied_params > 0 && cfg->pp > 1 ? ctx->tied_params / cfg->tp : 0;
}

double
mp_cost_grad_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL, 0);
  return cm_reduce_bytes (ctx, cfg);
}

double
mp_cost_bucket_bytes (const MpParallelConfig *cfg)
{
  g_return_val_if_fail (cfg != NULL, 0);
  return cm_bucket_bytes (cfg);
}

double
mp_cost_boundary_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg, guint layer)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL && cm_config_sane (cfg), 0);
  g_return_val_if_fail (layer < ctx->model->n_layers, 0);
  /* The head sends nothing on; cm_boundary_bytes then takes the gradient of the next
   * layer's input, which a head never has, so any next index will do. */
  return cm_boundary_bytes (ctx, cfg, layer, MIN (layer + 1, ctx->model->n_layers - 1));
}

gboolean
mp_cost_layer_recomputes (const MpCostContext *ctx, const MpParallelConfig *cfg, guint layer)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL && layer < ctx->model->n_layers, FALSE);
  const MpLayer *l = &ctx->model->layers[layer];
  if (cfg->recompute == MP_RECOMPUTE_FULL)
    return mp_recompute_full_layer (cfg, ctx->model, layer);
  if (cfg->recompute != MP_RECOMPUTE_SELECTIVE)
    return FALSE;
  for (guint i = 0; i < l->n_ops; i++)
    if (cm_op_recompute_share (l, i, cfg) > 0)
      return TRUE;
  return FALSE;
}
