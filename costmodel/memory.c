/* memory.c - what one rank of one pipeline stage holds at its peak, broken down.
 *
 * Weights, gradients and optimizer state by precision and ZeRO stage (sharded over the
 * dp * cp replicas; experts over dp * cp / ep); the embedding on the first stage, the head
 * on the last, and with tied embeddings a second copy of the word embeddings on the last
 * stage when pp > 1. Activations per layer by the model IR's Korthikanti et al. (2022)
 * accounting under tensor/sequence parallelism and recomputation, times the micro-batches
 * the schedule keeps in flight on the stage. Transient buffers: the loss's logits, what a
 * backward pass allocates (recomputed activations, gradient buffers), ZeRO-3 gathers,
 * pipeline buffers; then the runtime's reserve (the CUDA context, NCCL's buffers, the GEMM
 * library's workspace, allocator fragmentation; or the cluster's device_overhead). Units:
 * bytes. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/costmodel-private.h"

#include <math.h>
#include <string.h>

static double
sp_div (const MpParallelConfig *cfg)
{
  return cfg->sequence_parallel && cfg->tp > 1 ? cfg->tp : 1;
}

/* Bytes per token layers [FIRST, FIRST + N) keep when they keep every activation; the
 * attention scores only without flash attention and without SCORES_DROPPED. */
static double
kept_all (const MpCostContext *ctx, const MpParallelConfig *cfg, guint first, guint n,
          gboolean scores_dropped)
{
  double t = cfg->tp, sd = sp_div (cfg);
  double kept = cm_sum (ctx, CM_SUM_ACT, first, n) / t + cm_sum (ctx, CM_SUM_ACT_REP, first, n) / sd;
  double ea = cm_sum (ctx, CM_SUM_EXPERT_ACT, first, n);
  double er = cm_sum (ctx, CM_SUM_EXPERT_REP, first, n);
  if (ea > 0 || er > 0)
    {
      /* MoE (moe14): a rank keeps the token copies its experts computed, tokens * k *
       * etp / tp at the busiest rank's load (the dispatched, etp-gathered fc1 input is
       * what the grouped GEMM saves, whether or not the dense part is sequence-split),
       * and their split activations at that load. */
      double load = cm_expert_load (ctx->model), etp = mp_parallel_config_etp (cfg);
      kept = (cm_sum (ctx, CM_SUM_ACT, first, n) - ea + ea * load) / t
             + (cm_sum (ctx, CM_SUM_ACT_REP, first, n) - er) / sd + er * load * etp / t;
      /* Gates weighted inside the experts: the combine is a plain sum, keeping nothing. */
      if (mp_stack_gates_in_experts (cfg->stack))
        kept -= cm_sum (ctx, CM_SUM_COMBINE_ROWS, first, n) / sd;
    }
  if (!scores_dropped && !cfg->flash_attention)
    kept += cm_sum (ctx, CM_SUM_ACT_SCORE, first, n) / t;
  return kept;
}

/* ... when full recompute rebuilds their blocks: a recomputed layer keeps its input
 * (split by sequence with SP), INPUTS of them (the uniform method keeps one per group);
 * the embedding and the head keep what they always keep. */
static double
kept_full (const MpCostContext *ctx, const MpParallelConfig *cfg, guint first, guint n,
           double inputs)
{
  double t = cfg->tp, sd = sp_div (cfg);
  double kept = inputs * cm_sum (ctx, CM_SUM_FULL_INPUT, first, n) / sd;
  kept += cm_sum (ctx, CM_SUM_NR_ACT, first, n) / t
          + cm_sum (ctx, CM_SUM_NR_ACT_REP, first, n) / sd;
  if (!cfg->flash_attention)
    kept += cm_sum (ctx, CM_SUM_NR_ACT_SCORE, first, n) / t;
  return kept;
}

/* Bytes per token LAYER does not keep under CFG's selective recompute (the modules'
 * activations that its backward rebuilds). */
static double
dropped_per_token (const MpCostContext *ctx, const MpParallelConfig *cfg, guint layer)
{
  const MpLayer *l = &ctx->model->layers[layer];
  double t = cfg->tp, sd = sp_div (cfg), dropped = 0;
  if (mp_recompute_modules_of (cfg) == MP_RECOMPUTE_OP)
    {
      if (l->kind != MP_LAYER_BLOCK)
        return 0;
      double all = l->act_bytes / t + l->act_rep_bytes / sd
                   + (cfg->flash_attention ? 0 : l->act_score_bytes / t);
      return all - cm_op_policy_kept (l, cfg);
    }
  for (guint i = 0; i < l->n_ops; i++)
    {
      double split, rep, score;
      cm_op_dropped (l, i, cfg, &split, &rep, &score);
      dropped += split / t + rep / sd + (cfg->flash_attention ? 0 : score / t);
    }
  return dropped;
}

/* Bytes per token that layers [FIRST, FIRST + N) keep less when their FP8 GEMMs' inputs
 * are kept as the FP8 tensors (mp_stack_fp8_saves_fp8): 1 byte of each element's ELT.
 * The experts' grouped GEMMs too where the stack's do (mp_stack_fp8_saves_experts), at
 * the busiest rank's load as kept_all keeps them; there the attention output
 * projection's input stays at 16 bits, being the attention core's own saved output. */
static double
fp8_saved_less (const MpCostContext *ctx, const MpParallelConfig *cfg, guint first, guint n)
{
  double t = cfg->tp, sd = sp_div (cfg), less = 0;
  gboolean experts = mp_stack_fp8_saves_experts (cfg->stack);
  double load = cm_expert_load (ctx->model), etp = mp_parallel_config_etp (cfg);
  for (guint li = first; li < first + n; li++)
    {
      const MpLayer *l = &ctx->model->layers[li];
      for (guint i = 0; i < l->n_ops; i++)
        {
          const MpOp *op = &l->ops[i];
          if (!cm_fp8_op (l, op))
            continue;
          if (op->split != MP_SPLIT_EXPERT)
            {
              if (!(experts && i > 0 && l->ops[i - 1].kind == MP_OP_ATTENTION))
                less += op->act_bytes / t + op->act_rep_bytes / sd;
            }
          else if (experts)
            less += op->act_bytes * load / t + op->act_rep_bytes * load * etp / t;
        }
    }
  return less * (1 - 1 / ctx->elt);
}

/* Activation bytes per token that the layers of one model chunk, [FIRST, FIRST + N),
 * keep under CFG (one micro-batch's worth once multiplied by the tokens). */
static double
kept_per_token (const MpCostContext *ctx, const MpParallelConfig *cfg, guint first, guint n)
{
  if (cfg->recompute == MP_RECOMPUTE_FULL)
    {
      guint limit = cm_recompute_blocks (cfg), blocks = (guint) cm_sum (ctx,
                                                                       CM_SUM_RECOMPUTABLE,
                                                                       first, n);
      if (limit == G_MAXUINT)
        {
          /* Uniform in groups of N: the first block of each group keeps its input. */
          guint group = cfg->recompute_num_layers;
          double inputs = group > 1 && blocks > 0
                          ? (double) ((blocks + group - 1) / group) / blocks : 1;
          return kept_full (ctx, cfg, first, n, inputs);
        }
      /* Block method: the first LIMIT blocks are rebuilt, the rest keep everything. */
      guint end = first, seen = 0;
      while (end < first + n && seen < limit)
        seen += cm_recomputable (&ctx->model->layers[end++]);
      return kept_full (ctx, cfg, first, end - first, 1)
             + kept_all (ctx, cfg, end, first + n - end, FALSE);
    }
  if (cfg->recompute == MP_RECOMPUTE_NONE)
    return kept_all (ctx, cfg, first, n, FALSE);
  double kept = kept_all (ctx, cfg, first, n, TRUE);
  for (guint li = first; li < first + n; li++)
    {
      double score = cfg->flash_attention ? 0 : ctx->model->layers[li].act_score_bytes / cfg->tp;
      kept += score - dropped_per_token (ctx, cfg, li);
    }
  return kept;
}

double
mp_cost_layer_activation_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg,
                                guint layer)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL && cm_config_sane (cfg), 0);
  g_return_val_if_fail (layer < ctx->model->n_layers, 0);
  if (cfg->recompute == MP_RECOMPUTE_FULL && cm_recompute_blocks (cfg) != G_MAXUINT)
    {
      /* The block method: it depends on the layer's place in its chunk. */
      double tokens = cm_tokens (ctx, cfg);
      return tokens * (mp_recompute_full_layer (cfg, ctx->model, layer)
                         ? kept_full (ctx, cfg, layer, 1, 1)
                         : kept_all (ctx, cfg, layer, 1, FALSE));
    }
  return cm_tokens (ctx, cfg) * kept_per_token (ctx, cfg, layer, 1);
}

/* Micro-batches of each of the stage's VPP chunks in flight at the stage's peak, into
 * COUNTS[vpp]. 1F1B (Megatron's PipeDream-flush): stage i runs p - i - 1 warm-up forwards
 * and one more before its first backward. Interleaved (Megatron's
 * forward_backward_pipelining_with_interleaving): 2 (p - i - 1) + (v - 1) p warm-up
 * forwards plus one, of m v in all, taking chunks in groups of p micro-batches. */
static void
chunk_in_flight (const MpParallelConfig *cfg, guint stage, guint vpp, double *counts)
{
  double p = cfg->pp, m = cfg->num_micro_batches, i = stage;
  switch (cfg->schedule)
    {
    case MP_SCHEDULE_GPIPE:
      for (guint c = 0; c < vpp; c++)
        counts[c] = m;
      return;
    case MP_SCHEDULE_NONE:
      for (guint c = 0; c < vpp; c++)
        counts[c] = 1;
      return;
    case MP_SCHEDULE_INTERLEAVED:
    case MP_SCHEDULE_1F1B:
    default:
      {
        double v = vpp;
        double forwards = MIN (m * v, 2 * (p - i - 1) + (v - 1) * p + 1);
        if (vpp == 1)
          forwards = MIN (m, p - i);
        double group = p * v, full = floor (forwards / group);
        double rest = forwards - full * group;
        for (guint c = 0; c < vpp; c++)
          counts[c] = full * p + CLAMP (rest - c * p, 0, p);
        return;
      }
    }
}

double
mp_cost_in_flight (const MpParallelConfig *cfg, guint stage)
{
  g_return_val_if_fail (cfg != NULL && cm_config_sane (cfg) && stage < cfg->pp, 0);
  guint vpp = mp_parallel_config_vpp (cfg);
  double counts[vpp];
  chunk_in_flight (cfg, stage, vpp, counts);
  double sum = 0;
  for (guint c = 0; c < vpp; c++)
    sum += counts[c];
  return sum / vpp;
}

/* ---- gradient buckets ---------------------------------------------------------------- */

guint
mp_cost_grad_buckets (const double *params, guint first, guint count, double cap_params,
                      MpGradBucket *out)
{
  g_return_val_if_fail (params != NULL && (out != NULL || count == 0), 0);
  guint end = first + count, bottom = first, n = 0, hi = 0;
  while (bottom < end && !(params[bottom] > 0))
    bottom++;
  MpGradBucket cur = { 0, 0, 0 };
  for (guint l = end; l-- > bottom;)
    {
      if (!(params[l] > 0))
        continue;
      if (cur.params == 0)
        hi = l;
      cur.params += params[l];
      cur.lo = l;
      cur.n = hi - l + 1;
      if (cur.params >= cap_params || l == bottom)
        {
          out[n++] = cur;
          cur = (MpGradBucket) { 0, 0, 0 };
        }
    }
  return n;
}

/* A bucket memo key: what cm_stage_buckets reads of the config (the sizes that divide
 * the parameters, the stage's chunks and their layer counts), the stage, the kind and
 * the cap by its bits; KEY has room for 8 + CHUNKS words. Returns the words used. */
static guint
buckets_key (const MpParallelConfig *cfg, guint stage, gboolean expert, double cap_params,
             const guint *count, guint chunks, guint64 *key)
{
  guint64 cap_bits;
  memcpy (&cap_bits, &cap_params, sizeof cap_bits);
  guint n = 0;
  key[n++] = cfg->tp;
  key[n++] = mp_parallel_config_etp (cfg);
  key[n++] = cfg->ep;
  key[n++] = cfg->pp;
  key[n++] = chunks;
  key[n++] = stage;
  key[n++] = expert;
  key[n++] = cap_bits;
  for (guint c = 0; c < chunks; c++)
    key[n++] = count[c];
  return n;
}

/* The buckets as cm_stage_buckets makes them, kept for the next call with the same key
 * (the ZeRO stages, the shard groups and the rank orders of one split ask in a row):
 * one slot per stage, kind and cap or none, compared whole, so that no hash is taken. */
struct CmBucketSlot {
  guint n_words, n;
  guint64 *key;
  MpGradBucket *b;
  double top[2];       /* the largest bucket's parameters and the second's */
};

static MpGradBucket *stage_buckets (const MpCostContext *ctx, const MpParallelConfig *cfg,
                                    guint stage, gboolean expert, double cap_params,
                                    const guint *first, const guint *count, guint *n);

void
cm_bucket_slots_free (CmBucketSlot *slots)
{
  for (guint i = 0; slots != NULL && i < CM_BUCKET_SLOTS; i++)
    {
      g_free (slots[i].key);
      g_free (slots[i].b);
    }
  g_free (slots);
}

/* STAGE's buckets of the kind in its slot, made when the slot holds another key. */
static const CmBucketSlot *
bucket_slot (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage,
             gboolean expert, double cap_params)
{
  guint chunks = cfg->pp * mp_parallel_config_vpp (cfg), first[chunks], count[chunks];
  cm_chunk_layers (ctx, cfg, first, count);
  MpCostContext *memo = (MpCostContext *) ctx;          /* the memo only: see its field */
  guint64 key[8 + chunks];
  guint words = buckets_key (cfg, stage, expert, cap_params, count, chunks, key);
  if (memo->bucket_slots == NULL)
    memo->bucket_slots = g_new0 (CmBucketSlot, CM_BUCKET_SLOTS);
  /* ZeRO-3 asks for the per-layer lists (cap 0) between its buckets: a slot each */
  guint at = 4 * stage + 2 * (cap_params == 0) + !!expert;
  CmBucketSlot *slot = &memo->bucket_slots[at % CM_BUCKET_SLOTS];
  if (slot->n_words == words && memcmp (slot->key, key, words * sizeof *key) == 0)
    return slot;
  g_free (slot->key);
  g_free (slot->b);
  slot->n_words = words;
  slot->key = g_memdup2 (key, words * sizeof *key);
  slot->b = stage_buckets (ctx, cfg, stage, expert, cap_params, first, count, &slot->n);
  slot->top[0] = slot->top[1] = 0;
  for (guint i = 0; i < slot->n; i++)
    {
      double p = slot->b[i].params;
      slot->top[1] = MAX (slot->top[1], MIN (slot->top[0], p));
      slot->top[0] = MAX (slot->top[0], p);
    }
  return slot;
}

MpGradBucket *
cm_stage_buckets (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage,
                  gboolean expert, double cap_params, guint *n)
{
  const CmBucketSlot *slot = bucket_slot (ctx, cfg, stage, expert, cap_params);
  *n = slot->n;
  return g_memdup2 (slot->b, MAX (slot->n, 1u) * sizeof *slot->b);
}

static MpGradBucket *
stage_buckets (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage,
               gboolean expert, double cap_params, const guint *first, const guint *count,
               guint *n)
{
  guint pp = cfg->pp, vpp = mp_parallel_config_vpp (cfg);
  guint nl = ctx->model->n_layers, room = 0;
  g_autofree double *params = g_new0 (double, nl);
  for (guint v = 0; v < vpp; v++)
    {
      guint c = stage + v * pp;
      room += count[c];
      for (guint l = first[c]; l < first[c] + count[c]; l++)
        {
          double d, e;
          mp_cost_layer_params (ctx, cfg, l, &d, &e);
          params[l] = expert ? e : d;
        }
    }
  /* The last stage keeps a copy of the tied word embeddings for its head (program.c). */
  if (!expert && stage == pp - 1)
    params[nl - 1] += mp_cost_tied_params (ctx, cfg);
  MpGradBucket *out = g_new (MpGradBucket, MAX (room, 1u));
  *n = 0;
  for (guint v = vpp; v-- > 0;)
    {
      guint c = stage + v * pp;
      *n += mp_cost_grad_buckets (params, first[c], count[c], cap_params, out + *n);
    }
  return out;
}

/* ZeRO-2/3 gradient bytes in flight on STAGE besides the accumulated shard (DeepSpeed
 * stage 2's IPG buckets with overlap_comm, FSDP's reduce-scatter): one bucket's full
 * gradients being filled by backward while the one before is reduced into a result
 * shard of 1/replicas of it; the executor waits for that reduction before it starts the
 * next (runner.c), so these are the two largest buckets at most. Experts reduce over
 * their own group in buckets of their own (Megatron-Core's expert grad buffer), which
 * fill beside the dense ones: their largest adds, and either list's second may be the one
 * reducing. */
static double
buckets_in_flight (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage,
                   double g)
{
  double cap = cm_bucket_bytes (cfg) / g, filling = 0, reducing = 0, shard = 0;
  for (int e = 0; e < 2; e++)
    {
      double reps = e ? mp_parallel_config_edp (cfg) : mp_parallel_config_zero_shard (cfg);
      if (!(reps > 1) || (e && ctx->model->experts == 0))
        continue;                       /* a dense model's expert buckets are empty */
      /* the two largest in parameters, then in bytes: x -> x g keeps their order */
      const CmBucketSlot *slot = bucket_slot (ctx, cfg, stage, e, cap);
      double top[2] = { slot->top[0] * g, slot->top[1] * g };
      filling += top[0];
      reducing = MAX (reducing, top[1]);
      shard = MAX (shard, top[0] / reps);
    }
  return filling + reducing + shard;
}

/* ---- the runtime's reserve ------------------------------------------------------------ */

/* The CUDA context of a training process: 287 MB for one small kernel with lazy module
 * loading and 667 MB with eager loading (pytorch/pytorch#86509, cudaMemGetInfo), "around
 * 400 MB" with CUDA >= 11.7's lazy loading (pytorch/pytorch#109888); a trainer loads more
 * kernels (cuBLAS, NCCL, its own) than those probes, hence the upper half. */
#define CUDA_CONTEXT_BYTES (512.0 * 1024 * 1024)
/* NCCL's connection buffers: NCCL_BUFFSIZE, default 4 MiB (NCCL's environment-variable
 * documentation), for the Simple protocol per channel and per connected peer, a ring
 * connecting each rank to two; 16 channels (NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS leave
 * it to NCCL's topology search, which opens 16-32 on NVSwitch systems and fewer over
 * PCIe). LL and LL128 buffers come on top and are left out. */
#define NCCL_BUFFSIZE (4.0 * 1024 * 1024)
#define NCCL_CHANNELS 16
/* Allocator fragmentation, as a share of the tensors the caching allocator holds: GMLake
 * (Guo et al., ASPLOS 2024) measured 15% on average (33% at most) for the PyTorch caching
 * allocator on eight LLMs on A100-80GB under recomputation, ZeRO and offloading; PyTorch's
 * expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, the CUDA
 * semantics notes), which Megatron-LM's and torchtitan's recipes set, map segments so
 * that most of it goes. 5% is our reading for such a setup; --memory-headroom adds more.
 * It is a share of what is allocated as the step runs (activations, transient buffers):
 * the training state is allocated up front in whole buffers the allocator never splits
 * (Megatron-Core's ParamAndGradBuffer, one per dtype and bucket group, and its
 * distributed optimizer's shards; FSDP2's sharded parameters). */
#define FRAGMENTATION_SHARE 0.05

const char *
mp_reserve_kind_name (MpReserveKind kind)
{
  static const char *const names[MP_RESERVE_N] = {
    "cuda_context", "nccl_buffers", "gemm_workspace", "fragmentation", "device_overhead",
  };
  g_return_val_if_fail ((guint) kind < MP_RESERVE_N, "?");
  return names[kind];
}

void
mp_cost_context_set_memory_headroom (MpCostContext *ctx, double fraction, double bytes)
{
  g_return_if_fail (ctx != NULL && fraction >= 0 && fraction < 1 && bytes >= 0);
  ctx->headroom_fraction = fraction;
  ctx->headroom_bytes = bytes;
}

/* NCCL communicators of one rank with more than one member: tensor, context, data (with
 * context, Megatron's), pipeline, expert, expert-data parallel, and the tied embedding's
 * pair of end stages. */
static guint
communicators (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage)
{
  guint n = (cfg->tp > 1) + (cfg->cp > 1) + ((guint) cfg->dp * cfg->cp > 1) + (cfg->pp > 1);
  if (cfg->ep > 1)
    n += 1 + (mp_parallel_config_edp (cfg) > 1);
  if (mp_parallel_config_zero_replicas (cfg) > 1)
    n += 2;                             /* HSDP: the shard and the replicate groups */
  if (ctx->tied_params > 0 && cfg->pp > 1 && (stage == 0 || stage == cfg->pp - 1))
    n++;
  return n;
}

/* OUT's reserve, from its tensors (weights .. transient, filled): the cluster's
 * device_overhead where the file gives one, else each part modelled; the workspace always. */
static void
runtime_reserve (const MpCostContext *ctx, const MpParallelConfig *cfg,
                 const MpCostDevice *dev, MpStageMemory *out)
{
  double *r = out->reserve;
  memset (r, 0, sizeof out->reserve);
  r[MP_RESERVE_WORKSPACE] = dev->curve->workspace_bytes;
  if (ctx->cluster->device_overhead_given)
    r[MP_RESERVE_DEVICE_OVERHEAD] = ctx->cluster->device_overhead_bytes;
  else
    {
      double dynamic = out->activations_bytes + out->transient_bytes;
      r[MP_RESERVE_CONTEXT] = CUDA_CONTEXT_BYTES;
      r[MP_RESERVE_NCCL] = communicators (ctx, cfg, out->stage) * NCCL_CHANNELS * 2
                           * NCCL_BUFFSIZE;
      r[MP_RESERVE_FRAGMENTATION] = FRAGMENTATION_SHARE * dynamic;
    }
  out->overhead_bytes = 0;
  for (int k = 0; k < MP_RESERVE_N; k++)
    out->overhead_bytes += r[k];
}

/* ---- training state ------------------------------------------------------------------- */

/* Resident bytes per parameter (weights, gradients besides the buckets in flight,
 * optimizer) of a tensor whose ZeRO shard spans REPS replicas. */
typedef struct {
  double weights, grads, optimizer;
} StateBytes;

static StateBytes
state_per_param (const MpCostContext *ctx, const MpParallelConfig *cfg, double reps)
{
  double w, o, g = cm_grad_bytes (ctx, cfg), compute_w;
  mp_model_state_bytes_per_param (ctx->model, &w, NULL, &o);
  compute_w = w;
  MpStateLayout layout = mp_stack_state_layout (cfg->stack);
  if (ctx->model->precision != MP_DTYPE_FP32 && layout != MP_STATE_MASTER)
    {
      /* No master copy: the moments alone, o - 4 bytes at fp32 (mp_stack_state_layout). */
      double moments = o - 4;
      if (layout == MP_STATE_FP32)
        w = g = 4, o = moments;
      else
        g = w, o = moments * w / 4;
    }
  double shard = 1.0 / reps;
  /* ZeRO-1 (Megatron's distributed optimizer, DeepSpeed stage 1): the full gradients,
   * reduce-scattered once after the last micro-batch into this rank's shard, which the
   * optimizer reads (DeepSpeed's fp32 partition; the executor's too). ZeRO-2/3 (DeepSpeed
   * stage 2, FSDP): each micro-batch's gradients reduce-scattered bucket by bucket into an
   * accumulated shard (buckets_in_flight). Under ZeRO-1 a stack reducing in place
   * (mp_stack_zero1_in_place: Megatron) keeps the shard inside the full gradients, as the
   * executor then does. Parameters no other replica holds (an expert
   * with ep = dp * cp) have nothing to reduce: their full gradients are all they keep (the
   * executor runs them as ZeRO-0, model-exec.c). */
  gboolean grouped = cfg->zero >= 1 && reps > 1;
  gboolean own_shard = grouped && !(cfg->zero == 1 && mp_stack_zero1_in_place (cfg->stack));
  StateBytes s = {
    .weights = w * (cfg->zero >= 3 ? shard : 1),
    .grads = g * ((grouped && cfg->zero >= 2 ? 0 : 1) + (own_shard ? shard : 0)),
    .optimizer = o * (cfg->zero >= 1 ? shard : 1),
  };
  /* FSDP's ZeRO-2 (SHARD_GRAD_OP) shards the fp32 parameter too and keeps its gathered
   * 16-bit copy from forward through backward. */
  if (grouped && cfg->zero == 2 && w != compute_w)
    s.weights = w * shard + compute_w;
  return s;
}

/* What the attention of LAYER holds beside its backward under an all-gathering context
 * parallelism (mp_parallel_config_cp_allgather), TOKENS its rank's: every rank's K, V
 * gathered (cp blocks, at the repeated head count where the stack repeats them) and
 *  - torch's: the fp32 dQ, dK, dV it accumulates over the steps and the fp32 dK, dV block
 *    on its way round the ring (torch/distributed/tensor/experimental/_attention.py,
 *    _templated_ring_attention_backward: zeros_like(..., dtype=float32) under
 *    convert_to_f32, kv_rotater, dkv_rotater);
 *  - Transformer Engine's: dK, dV for the whole gathered K, V at the model's width before
 *    they are reduce-scattered (AttnFuncWithCPAndKVAllGather.backward: torch.zeros of
 *    k.shape[0] * cp_size). */
static double
cp_gather_buffers (const MpParallelConfig *cfg, const MpLayer *l, double tokens, double e)
{
  if (!mp_parallel_config_cp_allgather (cfg))
    return 0;
  gboolean torch = mp_stack_cp_allgather (cfg->stack);
  double most = 0;
  for (guint i = 0; i < l->n_ops; i++)
    {
      const MpOp *op = &l->ops[i];
      if (op->kind != MP_OP_ATTENTION || op->window > 0)
        continue;
      double kv = op->kv_heads > 0 && !mp_stack_repeats_kv (cfg->stack) ? op->kv_heads
                                                                       : op->heads;
      double width = op->v_head_dim > 0 ? op->head_dim + op->v_head_dim : 2 * op->head_dim;
      double block = tokens * MAX (kv / cfg->tp, 1.0) * width;      /* K, V elements */
      double q = tokens * MAX (op->heads / cfg->tp, 1.0) * op->head_dim;
      most = MAX (most, torch ? cfg->cp * block * e + 4 * (q + block) + 4 * block
                              : 2 * cfg->cp * block * e);
    }
  return most;
}

/* Bytes a stack pipelining with torch.distributed.pipelining (mp_stack_torch_pipelining)
 * holds on a stage beyond what a Megatron-style schedule does, for a stage of PARAMS
 * parameters on this rank (before ZeRO), the last stage's head logits LOGITS elements
 * per micro-batch, HEAD_FLIGHT micro-batches in flight on the head's chunk:
 *  - FSDP (ZeRO-2/3 over more than one replica) with more than one micro-batch: every
 *    backward but the last leaves the unsharded gradients (set_requires_gradient_sync
 *    (False) in PipelineStage's backward), which FSDP2 casts to its reduce dtype
 *    (FSDPParam.to_accumulated_grad_if_needed: unsharded_grad.to(reduce_dtype)) and
 *    accumulates until the last backward reduce-scatters them: the whole stage's
 *    gradients at cm_reduce_bytes, torchtitan's fp32. Into *GRADS.
 *  - the last stage keeps each micro-batch's output in output_chunks until the step's
 *    merge (forward_one_chunk: if self.is_last, output_chunks.append(output)):
 *    torchtitan's Transformer.forward returns self.output(h).float(), 4 bytes a logit;
 *    those of the micro-batches in flight count among the activations already. Into
 *    *KEPT. */
static void
torch_pipelining_extra (const MpCostContext *ctx, const MpParallelConfig *cfg, double params,
                        double logits, double head_flight, double *grads, double *kept)
{
  *grads = *kept = 0;
  if (cfg->pp < 2 || !mp_stack_torch_pipelining (cfg->stack))
    return;
  guint nmb = MAX (cfg->num_micro_batches, 1u);
  if (cfg->zero >= 2 && mp_parallel_config_zero_shard (cfg) > 1 && nmb > 1)
    *grads = params * cm_reduce_bytes (ctx, cfg);
  *kept = MAX (nmb - head_flight, 0.0) * logits * 4;
}

/* What one layer asks of the transient budget (per micro-batch, one rank). */
typedef struct {
  double params;        /* this rank's parameters of the layer (before ZeRO) */
  double full_act;      /* its activations without recomputation (full-recompute buffer) */
  double dropped;       /* what selective recompute rebuilds before its backward */
  double grad_buffers;  /* backward's gradient buffers around its largest op */
} LayerNeeds;

static void
layer_needs (const MpCostContext *ctx, const MpParallelConfig *cfg, guint li, LayerNeeds *n)
{
  const MpLayer *l = &ctx->model->layers[li];
  const CmLayer *cl = &ctx->layers[li];
  double t = cfg->tp, tokens = cm_tokens (ctx, cfg), e = ctx->elt, sd = sp_div (cfg);
  n->params = cl->params_split / t + cl->params_rep + cl->params_expert / cm_expert_shards (cfg);
  n->full_act = tokens * (l->act_bytes / t + l->act_rep_bytes / sd
                          + (cfg->flash_attention ? 0 : l->act_score_bytes / t));
  n->dropped = cfg->recompute == MP_RECOMPUTE_SELECTIVE
               ? tokens * dropped_per_token (ctx, cfg, li) : 0;
  /* The gradient of the largest output and of its input live together; SP also
   * gathers the full-sequence input of a GEMM; unfused attention materialises the
   * score gradient (e bytes per score, twice: dP and dS). */
  double widest = MAX (cl->max_out_width, cl->max_out_split / t);
  n->grad_buffers = 2 * tokens * widest * e;
  if (sd > 1)
    n->grad_buffers += tokens * (double) ctx->model->hidden * e;
  if (!cfg->flash_attention)
    n->grad_buffers += 2 * l->act_score_bytes / (2 * e + 1) * e * tokens / t;
  n->grad_buffers += cp_gather_buffers (cfg, l, tokens, e);
}

void
mp_cost_stage_memory (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage,
                      MpStageMemory *out)
{
  g_return_if_fail (ctx != NULL && cfg != NULL && out != NULL && cm_config_sane (cfg));
  g_return_if_fail (stage < cfg->pp);
  const MpModel *m = ctx->model;
  guint pp = cfg->pp, vpp = mp_parallel_config_vpp (cfg), chunks = pp * vpp;
  guint first[chunks], count[chunks];
  double in_flight[vpp];
  cm_chunk_layers (ctx, cfg, first, count);
  chunk_in_flight (cfg, stage, vpp, in_flight);
  const MpCostDevice *dev = cm_stage_device (ctx, cfg, stage);
  double t = cfg->tp, tokens = cm_tokens (ctx, cfg), e = ctx->elt;
  /* FP8 GEMM inputs kept at 1 byte: where every block keeps them (no recompute, or only
   * the attention core's). */
  gboolean fp8_saved = cm_fp8_on (cfg, dev) && mp_stack_fp8_saves_fp8 (cfg->stack)
                       && (cfg->recompute == MP_RECOMPUTE_NONE
                           || (cfg->recompute == MP_RECOMPUTE_SELECTIVE
                               && mp_recompute_modules_of (cfg) == MP_RECOMPUTE_CORE_ATTN));

  memset (out, 0, sizeof *out);
  out->stage = stage;
  double dense = 0, expert = 0, act = 0, flight = 0;
  guint first_layer = G_MAXUINT, last_layer = 0;
  gboolean has_embedding = FALSE, has_head = FALSE;
  LayerNeeds worst = { 0 };
  /* ZeRO-3: the root FSDP unit's layers (held through the step) and the largest other */
  double root_params = 0, unit_params = 0;
  guint nc = MAX (ctx->n_classes, 1u);
  LayerNeeds needs[nc];
  gboolean have[nc];
  memset (have, 0, sizeof have);
  for (guint v = 0; v < vpp; v++)
    {
      guint c = stage + v * pp;
      dense += cm_sum (ctx, CM_SUM_PARAMS_SPLIT, first[c], count[c]) / t
               + cm_sum (ctx, CM_SUM_PARAMS_REP, first[c], count[c]);
      expert += cm_sum (ctx, CM_SUM_PARAMS_EXPERT, first[c], count[c]) / cm_expert_shards (cfg);
      act += in_flight[v] * tokens * kept_per_token (ctx, cfg, first[c], count[c]);
      if (fp8_saved)
        act -= in_flight[v] * tokens * fp8_saved_less (ctx, cfg, first[c], count[c]);
      flight += in_flight[v];
      first_layer = MIN (first_layer, first[c]);
      last_layer = first[c] + count[c] - 1;
      for (guint li = first[c]; li < first[c] + count[c]; li++)
        {
          /* Equal layers (one class) need the same: each class is worked out once. */
          guint id = ctx->layers[li].class_id;
          if (!have[id])
            {
              layer_needs (ctx, cfg, li, &needs[id]);
              have[id] = TRUE;
            }
          const LayerNeeds n = needs[id];
          worst.params = MAX (worst.params, n.params);
          if (mp_parallel_config_fsdp_root (cfg, &m->layers[li]))
            root_params += n.params;
          else
            unit_params = MAX (unit_params, n.params);
          if (cm_recomputable (&m->layers[li]))
            worst.full_act = MAX (worst.full_act, n.full_act);
          worst.dropped = MAX (worst.dropped, n.dropped);
          worst.grad_buffers = MAX (worst.grad_buffers, n.grad_buffers);
          has_embedding |= m->layers[li].kind == MP_LAYER_EMBEDDING;
          has_head |= m->layers[li].kind == MP_LAYER_HEAD;
        }
    }
  /* Tied embeddings: the head multiplies by the word embeddings, so a last stage without
   * the embedding layer keeps a copy (Megatron all-reduces its gradient with stage 0). */
  if (ctx->tied_params > 0 && has_head && !has_embedding)
    dense += ctx->tied_params / t;
  /* A fused loss (mp_stack_fused_loss) keeps the 16-bit logits where the IR's loss keeps
   * an fp32 softmax (4 bytes per logit), for each micro-batch in flight on the head's
   * chunk, the last of the last stage. */
  double head_flight = has_head ? in_flight[vpp - 1] : 0, logit_grad = 4 + e;
  if (mp_stack_fused_loss (cfg->stack))
    {
      logit_grad = e;
      act -= head_flight * tokens * (double) m->vocab / t * (4 - e);
    }
  double deferred_grads, kept_outputs;
  torch_pipelining_extra (ctx, cfg, dense + expert,
                          has_head ? tokens * (double) m->vocab / t : 0, head_flight,
                          &deferred_grads, &kept_outputs);
  act += kept_outputs;
  out->params = dense + expert;
  out->in_flight = flight / vpp;
  out->activations_bytes = act;

  /* Training state, ZeRO-sharded over the replicas that hold the same parameters (HSDP,
   * fsdp17: dense state over the shard group, dp * cp without it). */
  double w, g = cm_grad_bytes (ctx, cfg);
  mp_model_state_bytes_per_param (m, &w, NULL, NULL);
  double reps = mp_parallel_config_zero_shard (cfg), ereps = mp_parallel_config_edp (cfg);
  double shard_d = 1.0 / reps, shard_e = 1.0 / ereps;
  StateBytes sd = state_per_param (ctx, cfg, reps), se = state_per_param (ctx, cfg, ereps);
  out->weights_bytes = dense * sd.weights + expert * se.weights;
  out->grads_bytes = dense * sd.grads + expert * se.grads
                     + (cfg->zero >= 2 ? buckets_in_flight (ctx, cfg, stage, g) : 0)
                     + deferred_grads;
  out->optimizer_bytes = dense * sd.optimizer + expert * se.optimizer;
  /* FP8 (compute.c): Transformer Engine keeps an FP8 copy of every FP8 GEMM's weight (and
   * its transpose where the device needs one) beside the bf16 weight and the fp32 master,
   * sharded under ZeRO-3 like the weights. */
  if (cm_fp8_on (cfg, dev))
    {
      double fd = 0, fe = 0;
      for (guint v = 0; v < vpp; v++)
        {
          double d1, e1;
          guint c = stage + v * pp;
          cm_fp8_params (ctx, cfg, first[c], count[c], &d1, &e1);
          fd += d1;
          fe += e1;
        }
      out->weights_bytes += (fd * (cfg->zero >= 3 ? shard_d : 1)
                             + fe * (cfg->zero >= 3 ? shard_e : 1)) * cm_fp8_copy_bytes (dev);
    }

  /* Transient: what backward allocates on top of the kept activations, or the loss's
   * logits on the head's stage (bf16 logits then their fp32 gradient, on top of the fp32
   * softmax the IR keeps; a fused loss: the 16-bit gradient), whichever is larger; plus communication buffers and the GEMM
   * workspace, which are always there. */
  double backward = worst.grad_buffers;
  if (cfg->recompute == MP_RECOMPUTE_FULL)
    {
      /* The uniform method rebuilds a group of N blocks at once. */
      guint group = cm_recompute_blocks (cfg) == G_MAXUINT ? cfg->recompute_num_layers : 1;
      backward += MAX (group, 1u) * worst.full_act;
    }
  else if (cfg->recompute == MP_RECOMPUTE_SELECTIVE)
    backward += worst.dropped;
  double logits = has_head ? tokens * (double) m->vocab / t * logit_grad : 0;
  double comm = 0;
  if (cfg->zero >= 3 && cfg->no_reshard)
    /* reshard_after_forward = False: every layer's gathered weights held from its forward
     * to its backward, so the whole stage's at the end of forward */
    comm += (dense + expert) * w;
  else if (cfg->zero >= 3)
    /* a layer gathered, the next prefetched; beside them the root FSDP unit, gathered
     * before the first layer and held to its backward (mp_parallel_config_fsdp_root) */
    comm += (root_params + unit_params * 2) * w;
  if (pp > 1)       /* the activation being sent on and the next one received */
    comm += 2 * cm_boundary_bytes (ctx, cfg, last_layer, first_layer);
  out->transient_bytes = MAX (backward, logits) + comm;
  runtime_reserve (ctx, cfg, dev, out);
  out->total_bytes = out->weights_bytes + out->grads_bytes + out->optimizer_bytes
                     + out->activations_bytes + out->transient_bytes + out->overhead_bytes;
  out->capacity_bytes = dev->device->memory_bytes;
  out->headroom_bytes = ctx->headroom_fraction * out->capacity_bytes + ctx->headroom_bytes;
}

guint
mp_cost_memory (const MpCostContext *ctx, const MpParallelConfig *cfg, MpStageMemory *out)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL && cm_config_sane (cfg), 0);
  guint worst = 0;
  double worst_excess = -G_MAXDOUBLE;
  for (guint s = 0; s < cfg->pp; s++)
    {
      MpStageMemory mem;
      mp_cost_stage_memory (ctx, cfg, s, &mem);
      if (out)
        out[s] = mem;
      double excess = mem.total_bytes + mem.headroom_bytes - mem.capacity_bytes;
      if (excess > worst_excess)
        {
          worst_excess = excess;
          worst = s;
        }
    }
  return worst;
}

/* ---- a floor for the search ------------------------------------------------------------ */

/* Activation bytes per token that layers [FIRST, FIRST + N) keep at the least under CFG's
 * recompute, whatever chunks they fall in: the uniform method keeps at least one input
 * per group of blocks; the block method's share depends on the chunks, so it counts as
 * nothing. */
static double
kept_floor (const MpCostContext *ctx, const MpParallelConfig *cfg, guint first, guint n)
{
  if (cfg->recompute != MP_RECOMPUTE_FULL)
    return kept_per_token (ctx, cfg, first, n);
  if (cm_recompute_blocks (cfg) != G_MAXUINT)
    return 0;
  guint group = cfg->recompute_num_layers;
  return kept_full (ctx, cfg, first, n, group > 1 ? 1.0 / group : 1);
}

/* memory_floor's terms that its config's ZeRO stage, shard group, schedule, vpp and
 * rank order do not change, kept for the next call with the same key (the search asks
 * for those of one layer-cost choice in a row): the layers' kept activations and
 * buffers, and the schedule's in-flight counts (scheduled_tensors). The activations'
 * part does not read ep, dp, pp nor the micro-batches (they enter only the head's
 * negative part, multiplied in on return), so the expert grids of one micro-batch size
 * share it and only the parameters' part is made again (issue 15: deepseek-v3 asked
 * 943k floors, 250k of them new, of ~35k instructions each, on 1024 H100s). */
struct CmFloorSlot {
  gboolean valid, act_valid, flight_valid;
  guint key[15];               /* what the runs read of the config: ep, then act_key
                                * (floor_runs) */
  guint act_key[14];           /* what their activations' part reads */
  double act_pos, least_buffers, tokens;
  double *layer_kept;          /* each layer's kept bytes per token (n_layers) */
  double *neg_kept;            /* the negative ones, in layer order (n_neg) */
  guint n_neg, head;           /* the last head layer (n_layers: none) */
  double block_dense, block_expert;  /* the least block's parameters (block_terms) */
  /* the layers as runs of equal ones (tied_tensors): parameters (dense, expert), kept
   * activations of one micro-batch, count, and whether the head is among them */
  guint n_runs;
  double *run_dense, *run_expert, *run_act;
  guint *run_count;
  gboolean *run_head;
  guint flight_key[4];         /* schedule, pp, vpp, micro-batches */
  double kmin, kmax, inv;
  double *stage_kmin, *stage_kmax;   /* each stage's fewest and most in flight of a chunk */
  guint n_stages;              /* room in stage_kmin, stage_kmax */
};

static CmFloorSlot *
floor_slot (const MpCostContext *ctx)
{
  MpCostContext *memo = (MpCostContext *) ctx;          /* the memo only: see its field */
  if (memo->floor_slot == NULL)
    memo->floor_slot = g_new0 (CmFloorSlot, 1);
  return memo->floor_slot;
}

void
cm_floor_slot_free (CmFloorSlot *slot)
{
  if (slot == NULL)
    return;
  g_free (slot->run_dense);
  g_free (slot->run_expert);
  g_free (slot->run_act);
  g_free (slot->run_count);
  g_free (slot->run_head);
  g_free (slot->layer_kept);
  g_free (slot->neg_kept);
  g_free (slot->stage_kmin);
  g_free (slot->stage_kmax);
  g_free (slot);
}

/* Appends layer L's figures to SLOT's runs, into the last run when they are the same. */
static void
add_run (CmFloorSlot *slot, guint n_layers, double dense, double expert, double act,
         gboolean head)
{
  guint r = slot->n_runs;
  if (r > 0 && !head && !slot->run_head[r - 1] && slot->run_dense[r - 1] == dense
      && slot->run_expert[r - 1] == expert && slot->run_act[r - 1] == act)
    {
      slot->run_count[r - 1]++;
      return;
    }
  if (slot->run_dense == NULL)
    {
      /* room for every layer, once: a context's model keeps its layers */
      slot->run_dense = g_new (double, n_layers);
      slot->run_expert = g_new (double, n_layers);
      slot->run_act = g_new (double, n_layers);
      slot->run_count = g_new (guint, n_layers);
      slot->run_head = g_new (gboolean, n_layers);
    }
  slot->run_dense[r] = dense;
  slot->run_expert[r] = expert;
  slot->run_act[r] = act;
  slot->run_count[r] = 1;
  slot->run_head[r] = head;
  slot->n_runs++;
}

/* floor_layer_terms' activations' part into SLOT: each layer's kept bytes per token of
 * one micro-batch, their non-negative sum, and the least layer's gradient buffers. The
 * head's part may be negative with a fused loss (its fp32 softmax not kept): those are
 * kept apart, to be taken at the m micro-batches it may hold. */
static void
floor_act_terms (const MpCostContext *ctx, const MpParallelConfig *cfg, gboolean fp8_saved,
                 CmFloorSlot *slot)
{
  const MpModel *m = ctx->model;
  guint nl = m->n_layers;
  double t = cfg->tp, e = ctx->elt;
  guint head = nl;
  for (guint l = 0; l < nl; l++)
    if (m->layers[l].kind == MP_LAYER_HEAD)
      head = l;
  if (slot->layer_kept == NULL)
    {
      slot->layer_kept = g_new (double, MAX (nl, 1u));
      slot->neg_kept = g_new (double, MAX (nl, 1u));
    }
  double pos = 0;
  slot->n_neg = 0;
  for (guint l = 0; l < nl; l++)
    {
      double k = kept_floor (ctx, cfg, l, 1)
                 - (fp8_saved ? fp8_saved_less (ctx, cfg, l, 1) : 0);
      if (l == head && mp_stack_fused_loss (cfg->stack))
        k -= (double) m->vocab / t * (4 - e);
      if (k >= 0)
        pos += k;
      else
        slot->neg_kept[slot->n_neg++] = k;
      slot->layer_kept[l] = k;
    }
  slot->head = head;
  /* Every stage's backward allocates at least its largest op's gradient buffers
   * (mp_cost_stage_memory's transient), so at least the least layer's. */
  guint nc = MAX (ctx->n_classes, 1u);
  gboolean have[nc];
  memset (have, 0, sizeof have);
  double least = G_MAXDOUBLE;
  for (guint l = 0; l < nl; l++)
    if (!have[ctx->layers[l].class_id])
      {
        LayerNeeds n;
        layer_needs (ctx, cfg, l, &n);
        have[ctx->layers[l].class_id] = TRUE;
        least = MIN (least, n.grad_buffers);
      }
  slot->tokens = cm_tokens (ctx, cfg);
  slot->act_pos = pos * slot->tokens;
  slot->least_buffers = least;
}

/* The layers' part of memory_floor: kept activations per token of one micro-batch in
 * flight, *ACT_POS (the head's negative part of a fused loss aside, into *ACT_NEG at the
 * m micro-batches it may hold; both times the tokens), and the least layer's gradient
 * buffers. */
static void
floor_layer_terms (const MpCostContext *ctx, const MpParallelConfig *cfg, gboolean fp8_saved,
                   double *act_pos, double *act_neg, double *least_buffers)
{
  CmFloorSlot *slot = floor_slot (ctx);
  guint act_key[] = { cfg->tp, cfg->cp, mp_parallel_config_etp (cfg), cfg->sequence_parallel,
                      cfg->recompute, cfg->recompute_method, cfg->recompute_num_layers,
                      cfg->recompute_modules, cfg->micro_batch_size, cfg->flash_attention,
                      cfg->fp8,
                      cfg->stack + MP_STACK_N * mp_parallel_config_cp_allgather (cfg),
                      fp8_saved, 0 };
  G_STATIC_ASSERT (sizeof act_key == sizeof slot->act_key);
  if (!slot->act_valid || memcmp (slot->act_key, act_key, sizeof act_key) != 0)
    {
      floor_act_terms (ctx, cfg, fp8_saved, slot);
      memcpy (slot->act_key, act_key, sizeof act_key);
      slot->act_valid = TRUE;
    }
  /* the head's negative part at the m micro-batches it may hold */
  double neg = 0;
  for (guint i = 0; i < slot->n_neg; i++)
    neg += slot->neg_kept[i] * cfg->num_micro_batches;
  *act_pos = slot->act_pos;
  *act_neg = neg * slot->tokens;
  *least_buffers = slot->least_buffers;
}

/* The layers as runs with their parameters on this rank (mp_cost_layer_params), and the
 * least block's, for tied_tensors and block_terms: made when the scheduled floor asks
 * (most floors the search asks are not), after floor_layer_terms for the same CFG. */
static void
floor_runs (const MpCostContext *ctx, const MpParallelConfig *cfg)
{
  CmFloorSlot *slot = floor_slot (ctx);
  guint key[G_N_ELEMENTS (slot->key)] = { cfg->ep };
  memcpy (key + 1, slot->act_key, sizeof slot->act_key);
  if (slot->valid && memcmp (slot->key, key, sizeof key) == 0)
    return;
  const MpModel *m = ctx->model;
  guint nl = m->n_layers;
  double t = cfg->tp, shards = cm_expert_shards (cfg);
  double grid = (double) mp_parallel_config_etp (cfg) * cfg->ep;
  slot->n_runs = 0;
  slot->block_dense = slot->block_expert = G_MAXDOUBLE;
  for (guint l = 0; l < nl; l++)
    {
      const CmLayer *cl = &ctx->layers[l];
      double d = cl->params_split / t + cl->params_rep, x = cl->params_expert / shards;
      add_run (slot, nl, d, x, slot->layer_kept[l] * slot->tokens, l == slot->head);
      /* the least block's parameters, dense and expert, on this rank */
      if (m->layers[l].kind == MP_LAYER_BLOCK)
        {
          slot->block_dense = MIN (slot->block_dense, d);
          slot->block_expert = MIN (slot->block_expert, cl->params_expert / grid);
        }
    }
  if (slot->block_dense == G_MAXDOUBLE)
    slot->block_dense = slot->block_expert = 0;
  memcpy (slot->key, key, sizeof key);
  slot->valid = TRUE;
}

/* The least of mp_cost_stage_memory's tensors over CFG's stages under its own schedule
 * and vpp, whatever the split, for STATE and ACT_POS (the summed stages' states and kept
 * activations per micro-batch in flight, act_neg's fused head kept aside) and ACT_NEG
 * (the head's negative part, at the m micro-batches it may hold). Stage i holds at least
 * k_i = the fewest micro-batches in flight of its chunks (chunk_in_flight) of its kept
 * activations, and the largest stage at least any weighted mean of the stages (weights
 * l_i summing to 1): min l * STATE + min (l k) * ACT_POS + max l * ACT_NEG. Two weights:
 * even (the unscheduled floor's mean, with the fewest k) and l_i ~ 1 / k_i, which counts
 * a 1F1B or interleaved pipeline's activations at 1 / sum (1 / k_i) instead of 1 / p
 * (issue 15: the search then drops the plans that cannot fit before their memory). */
static double
scheduled_tensors (const MpCostContext *ctx, const MpParallelConfig *cfg, double state,
                   double act_pos, double act_neg)
{
  CmFloorSlot *slot = floor_slot (ctx);
  guint pp = cfg->pp, vpp = mp_parallel_config_vpp (cfg);
  guint key[4] = { cfg->schedule, pp, vpp, cfg->num_micro_batches };
  if (!slot->flight_valid || memcmp (slot->flight_key, key, sizeof key) != 0)
    {
      /* the in-flight counts depend on the schedule alone: its ZeRO stages and shard
       * groups ask in a row */
      double counts[vpp], kmin = G_MAXDOUBLE, kmax = 0, inv = 0;
      if (slot->n_stages < pp)
        {
          slot->stage_kmin = g_renew (double, slot->stage_kmin, pp);
          slot->stage_kmax = g_renew (double, slot->stage_kmax, pp);
          slot->n_stages = pp;
        }
      for (guint i = 0; i < pp; i++)
        {
          chunk_in_flight (cfg, i, vpp, counts);
          double k = counts[0], most = counts[0];
          for (guint c = 1; c < vpp; c++)
            {
              k = MIN (k, counts[c]);
              most = MAX (most, counts[c]);
            }
          slot->stage_kmin[i] = k;
          slot->stage_kmax[i] = most;
          kmin = MIN (kmin, k);
          kmax = MAX (kmax, k);
          inv += k > 0 ? 1 / k : 0;
        }
      memcpy (slot->flight_key, key, sizeof key);
      slot->kmin = kmin;
      slot->kmax = kmax;
      slot->inv = inv;
      slot->flight_valid = TRUE;
    }
  double kmin = slot->kmin, kmax = slot->kmax, inv = slot->inv;
  double even = (state + kmin * act_pos + act_neg) / pp;
  if (!(kmin > 0))
    return even;
  return MAX (even, state / (kmax * inv) + act_pos / inv + act_neg / (kmin * inv));
}

/* A floor like scheduled_tensors' that keeps each layer's state and activations together:
 * a stage holds its layers' state (FD, FE bytes per dense and expert parameter; the tied
 * embedding copy, TIED bytes, where the head is when pp > 1) and their kept activations
 * at its chunks' micro-batches in flight, between the stage's fewest and most. So for
 * weights l_i >= 0 summing to 1 the largest stage holds at least sum_i l_i X_i >=
 * sum over layers of min_i l_i (s + k_i a), k_i the fewest in flight of stage i where the
 * layer keeps a >= 0, the most where a < 0 (a fused loss's head). Weights l_i ~ 1 /
 * (s + k_i a) at the layers' mean s and a even each stage's share out: where activations
 * dominate, 1 / sum (1 / k_i) of them; where state does, 1 / p of it, both at once. Call
 * after scheduled_tensors for the same config (its in-flight counts). */
static double
tied_tensors (const MpCostContext *ctx, const MpParallelConfig *cfg, double fd, double fe,
              double tied)
{
  const CmFloorSlot *slot = floor_slot (ctx);
  guint pp = cfg->pp, n = 0;
  double s_sum = 0, a_sum = 0;
  for (guint r = 0; r < slot->n_runs; r++)
    {
      s_sum += slot->run_count[r] * (slot->run_dense[r] * fd + slot->run_expert[r] * fe);
      a_sum += slot->run_count[r] * MAX (slot->run_act[r], 0);
      n += slot->run_count[r];
    }
  double s_mean = s_sum / MAX (n, 1u), a_mean = a_sum / MAX (n, 1u), norm = 0;
  double l[pp];
  for (guint i = 0; i < pp; i++)
    {
      double x = s_mean + slot->stage_kmin[i] * a_mean;
      l[i] = x > 0 ? 1 / x : 1;
      norm += l[i];
    }
  double bound = 0;
  for (guint r = 0; r < slot->n_runs; r++)
    {
      double s = slot->run_dense[r] * fd + slot->run_expert[r] * fe
                 + (slot->run_head[r] && pp > 1 ? tied : 0);
      double a = slot->run_act[r], least = G_MAXDOUBLE;
      for (guint i = 0; i < pp; i++)
        least = MIN (least, l[i] * (s + (a >= 0 ? slot->stage_kmin[i] : slot->stage_kmax[i]) * a));
      bound += slot->run_count[r] * least;
    }
  return bound / norm;
}

/* What every stage holds besides its share of the state and activations, once it holds a
 * block (every split the search makes: each chunk a block or more): ZeRO-3's gathered
 * layer and the next one prefetched, at least the least block's weights twice; ZeRO-2/3's
 * gradient buckets in flight, the largest at least the least block's gradients (a bucket
 * holds whole layers), with its result shard. W, G: bytes per weight and gradient. */
static double
block_terms (const MpCostContext *ctx, const MpParallelConfig *cfg, double w, double g)
{
  const CmFloorSlot *slot = floor_slot (ctx);
  double d = slot->block_dense, x = slot->block_expert, terms = 0;
  if (cfg->zero >= 3 && !cfg->no_reshard)
    terms += (d + x) * 2 * w;
  if (cfg->zero >= 2)
    {
      double reps = mp_parallel_config_zero_shard (cfg), ereps = mp_parallel_config_edp (cfg);
      gboolean dense = reps > 1, expert = ereps > 1 && ctx->model->experts > 0;
      terms += ((dense ? d : 0) + (expert ? x : 0)) * g
               + MAX (dense ? d * g / reps : 0, expert ? x * g / ereps : 0);
    }
  return terms;
}

/* Does every stage of CFG's split hold a block? TRUE without a split (those the search
 * makes give each chunk a block or more). */
static gboolean
stages_hold_blocks (const MpCostContext *ctx, const MpParallelConfig *cfg)
{
  if (cfg->chunk_layers == NULL)
    return TRUE;
  guint pp = cfg->pp, chunks = pp * mp_parallel_config_vpp (cfg), first[chunks], count[chunks];
  gboolean held[pp];
  memset (held, 0, sizeof held);
  cm_chunk_layers (ctx, cfg, first, count);
  for (guint c = 0; c < chunks; c++)
    for (guint l = first[c]; l < first[c] + count[c]; l++)
      held[c % pp] |= ctx->model->layers[l].kind == MP_LAYER_BLOCK;
  for (guint i = 0; i < pp; i++)
    if (!held[i])
      return FALSE;
  return TRUE;
}

/* mp_cost_memory_floor, and with SCHEDULED its floor for CFG's schedule and vpp. */
static double
memory_floor (const MpCostContext *ctx, const MpParallelConfig *cfg, gboolean scheduled,
              double *peak)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL && cm_config_sane (cfg), 0);
  /* mp_cost_stage_memory's terms are linear in each stage's parameters and kept
   * activations with non-negative weights, so the largest stage holds at least their
   * mean over the pp stages: the model's parameters (the tied copy on the last stage when
   * pp > 1) and one micro-batch in flight of every chunk (every schedule keeps >= 1 and
   * <= m). The transient buffers and the FP8 weight copies count as nothing. */
  const MpModel *m = ctx->model;
  guint nl = m->n_layers;
  double t = cfg->tp, pp = cfg->pp;
  double dense = cm_sum (ctx, CM_SUM_PARAMS_SPLIT, 0, nl) / t
                 + cm_sum (ctx, CM_SUM_PARAMS_REP, 0, nl)
                 + (cfg->pp > 1 ? ctx->tied_params / t : 0);
  double expert = cm_sum (ctx, CM_SUM_PARAMS_EXPERT, 0, nl) / cm_expert_shards (cfg);
  double w;
  mp_model_state_bytes_per_param (m, &w, NULL, NULL);
  /* the state as mp_cost_stage_memory holds it, dense over the ZeRO shard group */
  StateBytes sd = state_per_param (ctx, cfg, mp_parallel_config_zero_shard (cfg));
  StateBytes se = state_per_param (ctx, cfg, mp_parallel_config_edp (cfg));
  double state = dense * (sd.weights + sd.grads + sd.optimizer)
                 + expert * (se.weights + se.grads + se.optimizer);
  /* ZeRO-3 without resharding (reshard_after_forward = False) holds every layer's
   * gathered weights from its forward to its backward: the stage's, transient */
  if (cfg->zero >= 3 && cfg->no_reshard)
    state += (dense + expert) * w;
  /* the same per dense and expert parameter (tied_tensors) */
  double kept_w = cfg->zero >= 3 && cfg->no_reshard ? w : 0;
  double fd = sd.weights + sd.grads + sd.optimizer + kept_w;
  double fe = se.weights + se.grads + se.optimizer + kept_w;

  gboolean fp8_saved = FALSE, fp8 = FALSE;
  double workspace = G_MAXDOUBLE, spare_lo = G_MAXDOUBLE, spare_hi = -G_MAXDOUBLE;
  for (guint gi = 0; gi < ctx->cluster->n_groups; gi++)
    {
      const MpCostDevice *dev = mp_cost_device (ctx, gi);
      fp8 |= cm_fp8_on (cfg, dev);
      workspace = MIN (workspace, dev->curve->workspace_bytes);
      double cap = dev->device->memory_bytes;
      double spare = cap - ctx->headroom_fraction * cap - ctx->headroom_bytes;
      spare_lo = MIN (spare_lo, spare);
      spare_hi = MAX (spare_hi, spare);
    }
  fp8_saved = fp8 && mp_stack_fp8_saves_fp8 (cfg->stack)
              && (cfg->recompute == MP_RECOMPUTE_NONE
                  || (cfg->recompute == MP_RECOMPUTE_SELECTIVE
                      && mp_recompute_modules_of (cfg) == MP_RECOMPUTE_CORE_ATTN));
  double act_pos, act_neg, least_buffers;
  floor_layer_terms (ctx, cfg, fp8_saved, &act_pos, &act_neg, &least_buffers);
  double act = act_pos + act_neg;

  /* With each the fragmentation of what it allocates as it runs (runtime_reserve): the
   * mean stage's activations and buffers, and at least the least buffers anywhere. */
  gboolean modelled = !ctx->cluster->device_overhead_given;
  double frag = modelled ? FRAGMENTATION_SHARE : 0;
  double tensors = (state + act) / pp + least_buffers + frag * (act / pp + least_buffers);
  if (scheduled)
    {
      floor_runs (ctx, cfg);
      double least = (1 + frag) * least_buffers;
      tensors = MAX (tensors, scheduled_tensors (ctx, cfg, state, act_pos, act_neg) + least);
      tensors = MAX (tensors, tied_tensors (ctx, cfg, fd, fe, ctx->tied_params / t * fd)
                              + least
                              + (stages_hold_blocks (ctx, cfg) ? block_terms (ctx, cfg, w,
                                                                            cm_grad_bytes (ctx, cfg))
                                                               : 0));
    }
  double reserve = workspace;
  if (ctx->cluster->device_overhead_given)
    reserve += ctx->cluster->device_overhead_bytes;
  else
    {
      /* communicators () without the tied embedding's pair, which only end stages join */
      guint comms = (cfg->tp > 1) + (cfg->cp > 1) + ((guint) cfg->dp * cfg->cp > 1)
                    + (cfg->pp > 1) + (cfg->ep > 1 ? 1 + (mp_parallel_config_edp (cfg) > 1)
                                                   : 0);
      reserve += CUDA_CONTEXT_BYTES + comms * NCCL_CHANNELS * 2 * NCCL_BUFFSIZE;
    }
  /* less a relative 1e-9 for the rounding of sums taken in another order */
  double total = (tensors + reserve) * (1 - 1e-9);
  /* The stages' excess (total + headroom - capacity) is at least their mean's, with the
   * most spare room anywhere; the binding stage (mp_cost_memory's, the largest excess)
   * totals its excess plus its spare room, at least the least. */
  if (peak != NULL)
    *peak = total - spare_hi + spare_lo;
  return total - spare_hi;
}

double
mp_cost_memory_floor (const MpCostContext *ctx, const MpParallelConfig *cfg, double *peak)
{
  return memory_floor (ctx, cfg, FALSE, peak);
}

double
mp_cost_memory_floor_scheduled (const MpCostContext *ctx, const MpParallelConfig *cfg,
                                double *peak)
{
  return memory_floor (ctx, cfg, TRUE, peak);
}
