/* program.c - a plan as one program per rank: the pipeline schedules (GPipe, 1F1B,
 * interleaved 1F1B, layer placement), pipeline sends and receives, data-parallel gradient
 * buckets, ZeRO gathers and the optimizer step, written once for the simulator and the
 * executor (planner.h says what a program holds).
 *
 * Not here: timing (costmodel/sim.c), running (exec/), printing (program-print.c). Sizes
 * and FLOPs come from the cost model (mp_cost_layer, mp_cost_boundary_bytes, ...), so a
 * program counts what the closed form counts. Units: bytes, FLOP. */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "planner/planner-private.h"

#include <string.h>

/* ---- ranks ------------------------------------------------------------------------- */

void
mp_plan_rank_coords (const MpParallelConfig *cfg, guint rank, guint *tp, guint *cp,
                     guint *dp, guint *pp)
{
  g_return_if_fail (cfg != NULL);
  guint stride[MP_DIM_N];
  const guint size[MP_DIM_N] = { cfg->tp, cfg->cp, cfg->dp, cfg->pp };
  mp_parallel_config_strides (cfg, stride);
  guint *out[MP_DIM_N] = { tp, cp, dp, pp };
  for (int d = 0; d < MP_DIM_N; d++)
    if (out[d])
      *out[d] = rank / stride[d] % MAX (size[d], 1u);
}

guint
mp_plan_rank_of (const MpParallelConfig *cfg, guint tp, guint cp, guint dp, guint pp)
{
  g_return_val_if_fail (cfg != NULL, 0);
  guint stride[MP_DIM_N];
  mp_parallel_config_strides (cfg, stride);
  return tp * stride[MP_DIM_TP] + cp * stride[MP_DIM_CP] + dp * stride[MP_DIM_DP]
         + pp * stride[MP_DIM_PP];
}

/* ---- the schedule: what a stage computes, in order ---------------------------------- */

typedef PlStep Step;     /* planner-private.h */

/* The K-th forward or backward of a stage in Megatron's order: micro-batches in groups of
 * p, each group through every chunk (forwards chunk 0 first, backwards the last first).
 * With one chunk this is simply micro-batch K. */
static Step
step_of (guint k, gboolean backward, guint p, guint v)
{
  guint in_group = k % (p * v), chunk = in_group / p;
  return (Step) { backward, backward ? v - 1 - chunk : chunk, k / (p * v) * p + in_group % p };
}

void
pl_schedule_of (const MpParallelConfig *cfg, guint stage, PlSchedule *out)
{
  guint p = cfg->pp, m = cfg->num_micro_batches;
  guint v = cfg->schedule == MP_SCHEDULE_INTERLEAVED ? MAX (cfg->vpp, 1u) : 1;
  /* WARMUP forwards, then forward and backward in turn, then the backwards left: GPipe
   * (every forward first, one micro-batch a group), layer placement (none first), 1F1B
   * and interleaved 1F1B (interleaving with one chunk is 1F1B, as the cost model's
   * in-flight counts take it). */
  *out = (PlSchedule) { .total = m * v, .p = p, .v = v };
  if (cfg->schedule == MP_SCHEDULE_GPIPE)
    out->warmup = m, out->p = 1;
  else if (cfg->schedule != MP_SCHEDULE_NONE)
    out->warmup = v > 1 ? MIN (2 * (p - stage - 1) + (v - 1) * p, m * v)
                        : MIN (p - stage - 1, m);
  out->n_steps = 2 * out->total;
}

PlStep
pl_schedule_kth (const PlSchedule *sc, guint k, gboolean backward)
{
  return step_of (k, backward, sc->p, sc->v);
}

GArray *
pl_schedule_steps (const MpParallelConfig *cfg, guint stage)
{
  PlSchedule sc;
  pl_schedule_of (cfg, stage, &sc);
  GArray *out = g_array_sized_new (FALSE, FALSE, sizeof (Step), sc.n_steps);
  for (guint i = 0; i < sc.n_steps; i++)
    {
      guint k;
      gboolean backward = pl_schedule_nth (&sc, i, &k);
      Step s = pl_schedule_kth (&sc, k, backward);
      g_array_append_val (out, s);
    }
  return out;
}

/* ---- the builder -------------------------------------------------------------------- */

/* A gradient bucket: layers [lo, lo + n) of one chunk, reduced over GROUP. */
typedef struct {
  MpCommGroup group;
  guint lo, n;
  double params;          /* this rank's parameters in it */
  guint id;               /* issue number; G_MAXUINT until first issued */
} Bucket;

typedef struct {
  const MpCostContext *ctx;
  const MpParallelConfig *cfg;
  guint rank, stage, p, v, chunks;
  guint coord[MP_DIM_N];
  guint *first, *count;   /* per model chunk: first layer, layers */
  guint *peer;            /* per model chunk: the rank holding it (this rank's tp, cp, dp) */
  double *boundary;       /* per model chunk: bytes it hands to the next chunk */
  MpPhaseCost *fwd, *bwd; /* per model layer (this stage's only) */
  double *dense, *expert; /* per model layer: this rank's parameters (+ the tied copy) */
  double grad_bytes, weight_bytes;
  gboolean reduce_dense;  /* the gradient groups have more than one rank */
  gboolean reduce_expert;
  GArray *buckets;        /* Bucket */
  gint *closes[2];        /* per model layer: the dense / expert bucket it completes, -1 */
  guint *last_mb;         /* per chunk of the stage: micro-batch of its last backward */
  GArray *issued;         /* bucket indexes in order of first issue */
  GArray *insns;          /* MpInsn */
} Builder;

static MpInsn *
emit (Builder *b, MpInsnKind kind, MpStream stream)
{
  MpInsn insn = { .kind = kind, .stream = stream, .peer = -1, .group = MP_GROUP_NONE };
  g_array_append_val (b->insns, insn);
  return &g_array_index (b->insns, MpInsn, b->insns->len - 1);
}

/* A send or receive across the boundary between chunks LOWER and LOWER + 1 for MB; this
 * rank holds MINE (one of the two). Nothing when both chunks are on this rank (pp = 1). */
static void
emit_p2p (Builder *b, MpInsnKind kind, guint lower, guint mine, guint mb, gboolean backward)
{
  guint peer = b->peer[mine == lower ? lower + 1 : lower];
  if (peer == b->rank)
    return;
  MpInsn *i = emit (b, kind, MP_STREAM_PP);
  i->chunk = mine;
  i->layer = b->first[lower] + b->count[lower] - 1;
  i->micro_batch = mb;
  i->peer = (gint) peer;
  i->tag = (mb * b->v + lower / b->p) * 2 + (backward ? 1 : 0);
  i->coll = MP_COLL_SEND_RECV;
  i->bytes = b->boundary[lower];
}

static void
emit_compute (Builder *b, MpInsnKind kind, guint chunk, guint layer, guint mb)
{
  gboolean backward = kind == MP_INSN_BACKWARD;
  const MpPhaseCost *cost = backward ? &b->bwd[layer] : &b->fwd[layer];
  MpInsn *i = emit (b, kind, MP_STREAM_COMPUTE);
  i->chunk = chunk;
  i->layer = layer;
  i->n_layers = 1;
  i->micro_batch = mb;
  i->recompute = backward && mp_cost_layer_recomputes (b->ctx, b->cfg, layer);
  i->bytes = cost->bytes;
  i->flops = cost->flops;
  /* A block the block method leaves alone: its backward without the forward again. */
  if (backward && !i->recompute && b->cfg->recompute == MP_RECOMPUTE_FULL
      && cost->recompute_s > 0)
    i->flops -= b->fwd[layer].flops;
}

static void
emit_gather (Builder *b, MpCommGroup group, guint lo, guint n, double params)
{
  MpInsn *i = emit (b, MP_INSN_GATHER_PARAMS, MP_STREAM_DP);
  i->layer = lo;
  i->n_layers = n;
  i->coll = MP_COLL_ALL_GATHER;
  i->group = group;
  i->bytes = params * b->weight_bytes;
}

/* ZeRO-3: all-gathers LAYER's parameters (dense and expert apart) before a use. */
static void
gather_layer (Builder *b, guint layer)
{
  if (b->cfg->zero < 3)
    return;
  if (b->reduce_dense && b->dense[layer] > 0)
    emit_gather (b, MP_GROUP_DP, layer, 1, b->dense[layer]);
  if (b->reduce_expert && b->expert[layer] > 0)
    emit_gather (b, MP_GROUP_EDP, layer, 1, b->expert[layer]);
}

static void
emit_reduce (Builder *b, guint index)
{
  Bucket *k = &g_array_index (b->buckets, Bucket, index);
  if (k->id == G_MAXUINT)
    {
      k->id = b->issued->len;
      g_array_append_val (b->issued, index);
    }
  MpInsn *i = emit (b, MP_INSN_REDUCE_GRADS, MP_STREAM_DP);
  i->layer = k->lo;
  i->n_layers = k->n;
  i->bucket = k->id;
  /* ZeRO >= 1 keeps only its shard of the gradients (Megatron's distributed optimizer,
   * and the cost model's stage_sync). */
  i->coll = b->cfg->zero >= 1 ? MP_COLL_REDUCE_SCATTER : MP_COLL_ALL_REDUCE;
  i->group = k->group;
  i->bytes = k->params * b->grad_bytes;
}

/* HSDP (fsdp17): bucket INDEX's accumulated dense shard all-reduced over the replicate
 * group, once, after the last micro-batch's reduce-scatter of it. */
static void
emit_replicate (Builder *b, guint index)
{
  guint reps = mp_parallel_config_zero_replicas (b->cfg);
  Bucket *k = &g_array_index (b->buckets, Bucket, index);
  if (reps == 1 || k->group != MP_GROUP_DP)
    return;
  MpInsn *i = emit (b, MP_INSN_REDUCE_GRADS, MP_STREAM_DP);
  i->layer = k->lo;
  i->n_layers = k->n;
  i->bucket = k->id;
  i->coll = MP_COLL_ALL_REDUCE;
  i->group = MP_GROUP_DP_REP;
  i->bytes = k->params * b->grad_bytes / mp_parallel_config_zero_shard (b->cfg);
}

/* Is LAYER in the root FSDP unit (mp_parallel_config_fsdp_root)? */
static gboolean
in_root (const Builder *b, guint layer)
{
  return mp_parallel_config_fsdp_root (b->cfg, &mp_cost_context_model (b->ctx)->layers[layer]);
}

/* The chunk's first gather: the root unit's layers, then the first layer's own (last, so
 * that the first layer waits for the whole root group, one all-gather in FSDP2). */
static void
gather_chunk_start (Builder *b, guint lo, guint end)
{
  for (guint l = end; l-- > lo + 1;)
    if (in_root (b, l))
      gather_layer (b, l);
  gather_layer (b, lo);
}

static void
emit_forward (Builder *b, const Step *s)
{
  guint c = b->stage + s->v * b->p, lo = b->first[c], end = lo + b->count[c];
  gather_chunk_start (b, lo, end);
  if (c > 0)
    emit_p2p (b, MP_INSN_RECV, c - 1, c, s->mb, FALSE);
  for (guint l = lo; l < end; l++)
    {
      if (l + 1 < end && !in_root (b, l + 1))
        gather_layer (b, l + 1);      /* prefetch under this layer's compute */
      emit_compute (b, MP_INSN_FORWARD, c, l, s->mb);
    }
  if (c + 1 < b->chunks)
    emit_p2p (b, MP_INSN_SEND, c, c, s->mb, FALSE);
}

/* Bucket INDEX's reduce-scatter in S's backward, and after the last micro-batch's its
 * replicate all-reduce. */
static void
reduce_bucket (Builder *b, guint index, const Step *s)
{
  emit_reduce (b, index);
  if (s->mb == b->last_mb[s->v])
    emit_replicate (b, index);
}

static void
emit_backward (Builder *b, const Step *s)
{
  guint c = b->stage + s->v * b->p, lo = b->first[c], end = lo + b->count[c];
  /* DDP's no_sync and ZeRO-1: earlier micro-batches only accumulate into the full
   * gradients; ZeRO-2 (DeepSpeed stage 2, FSDP SHARD_GRAD_OP) and ZeRO-3 keep only a
   * shard, so they reduce-scatter every micro-batch's. */
  gboolean reduce = b->cfg->zero >= 2 || s->mb == b->last_mb[s->v];
  /* reshard_after_forward = False (fsdp17): the forward's gathers are still held */
  gboolean regather = !b->cfg->no_reshard;
  if (regather && !in_root (b, end - 1))
    gather_layer (b, end - 1);
  if (c + 1 < b->chunks)
    emit_p2p (b, MP_INSN_RECV, c, c, s->mb, TRUE);
  /* the root unit's buckets, reduced after the chunk's last backward (2 layers, 2 groups) */
  guint deferred[4], n_deferred = 0;
  for (guint l = end; l-- > lo;)
    {
      if (l > lo && regather && !in_root (b, l - 1))
        gather_layer (b, l - 1);
      emit_compute (b, MP_INSN_BACKWARD, c, l, s->mb);
      for (int g = 0; g < 2 && reduce; g++)
        if (b->closes[g][l] >= 0 && in_root (b, l) && n_deferred < G_N_ELEMENTS (deferred))
          deferred[n_deferred++] = (guint) b->closes[g][l];
        else if (b->closes[g][l] >= 0)
          reduce_bucket (b, (guint) b->closes[g][l], s);
    }
  for (guint k = 0; k < n_deferred; k++)
    reduce_bucket (b, deferred[k], s);
  if (c > 0)
    emit_p2p (b, MP_INSN_SEND, c - 1, c, s->mb, TRUE);
}

/* Fills the buckets of chunk C for PARAMS (dense or expert, reduced over GROUP) by the cost
 * model's rule (mp_cost_grad_buckets), so that each can be reduced as soon as the backward
 * of its lowest layer is done. */
static void
fill_buckets (Builder *b, guint c, MpCommGroup group, const double *params, gint *closes)
{
  g_autofree MpGradBucket *out = g_new (MpGradBucket, MAX (b->count[c], 1u));
  guint n = mp_cost_grad_buckets (params, b->first[c], b->count[c],
                                  mp_cost_bucket_bytes (b->cfg) / b->grad_bytes, out);
  for (guint k = 0; k < n; k++)
    {
      Bucket cur = { group, out[k].lo, out[k].n, out[k].params, G_MAXUINT };
      closes[out[k].lo] = (gint) b->buckets->len;
      g_array_append_val (b->buckets, cur);
    }
}

/* This stage's layer costs and parameters, and its buckets. */
static void
prepare_layers (Builder *b)
{
  const MpModel *model = mp_cost_context_model (b->ctx);
  guint n = model->n_layers;
  MpStageSpans spans;
  mp_cost_stage_spans (b->ctx, b->cfg, b->stage, &spans);
  b->fwd = g_new0 (MpPhaseCost, n);
  b->bwd = g_new0 (MpPhaseCost, n);
  b->dense = g_new0 (double, n);
  b->expert = g_new0 (double, n);
  for (int g = 0; g < 2; g++)
    {
      b->closes[g] = g_new (gint, n);
      for (guint l = 0; l < n; l++)
        b->closes[g][l] = -1;
    }
  for (guint v = 0; v < b->v; v++)
    {
      guint c = b->stage + v * b->p;
      for (guint l = b->first[c]; l < b->first[c] + b->count[c]; l++)
        {
          mp_cost_layer (b->ctx, b->cfg, &spans, l, &b->fwd[l], &b->bwd[l]);
          mp_cost_layer_params (b->ctx, b->cfg, l, &b->dense[l], &b->expert[l]);
        }
    }
  /* The last stage keeps a copy of the tied word embeddings for its head. */
  if (b->stage == b->p - 1)
    b->dense[n - 1] += mp_cost_tied_params (b->ctx, b->cfg);
  for (guint v = b->v; v-- > 0;)
    {
      guint c = b->stage + v * b->p;
      if (b->reduce_dense)
        fill_buckets (b, c, MP_GROUP_DP, b->dense, b->closes[0]);
      if (b->reduce_expert)
        fill_buckets (b, c, MP_GROUP_EDP, b->expert, b->closes[1]);
    }
}

/* About the instructions B will emit (every micro-batch through the stage's chunks,
 * ZeRO-3's two gathers per layer and pass), so that the array grows once. */
static guint
expected_insns (const Builder *b, const MpPlan *plan)
{
  guint per_mb = 0;
  for (guint v = 0; v < b->v; v++)
    per_mb += 2 * (b->count[b->stage + v * b->p] * (plan->cfg.zero >= 3 ? 3 : 1) + 2);
  return plan->cfg.num_micro_batches * per_mb + 64;
}

static void
builder_init (Builder *b, const MpCostContext *ctx, const MpPlan *plan, guint rank)
{
  const MpParallelConfig *cfg = &plan->cfg;
  memset (b, 0, sizeof *b);
  b->ctx = ctx;
  b->cfg = cfg;
  b->rank = rank;
  mp_plan_rank_coords (cfg, rank, &b->coord[MP_DIM_TP], &b->coord[MP_DIM_CP],
                       &b->coord[MP_DIM_DP], &b->coord[MP_DIM_PP]);
  b->stage = b->coord[MP_DIM_PP];
  b->p = cfg->pp;
  b->v = cfg->schedule == MP_SCHEDULE_INTERLEAVED ? MAX (cfg->vpp, 1u) : 1;
  b->chunks = b->p * b->v;
  b->first = g_new (guint, b->chunks);
  b->count = g_memdup2 (plan->chunk_layers, b->chunks * sizeof (guint));
  b->peer = g_new (guint, b->chunks);
  b->boundary = g_new (double, b->chunks);
  for (guint c = 0, at = 0; c < b->chunks; at += b->count[c], c++)
    {
      b->first[c] = at;
      b->peer[c] = mp_plan_rank_of (cfg, b->coord[MP_DIM_TP], b->coord[MP_DIM_CP],
                                    b->coord[MP_DIM_DP], c % b->p);
      b->boundary[c] = mp_cost_boundary_bytes (ctx, cfg, at + b->count[c] - 1);
    }
  double w;
  mp_model_state_bytes_per_param (mp_cost_context_model (ctx), &w, NULL, NULL);
  b->weight_bytes = w;
  b->grad_bytes = mp_cost_grad_bytes (ctx, cfg);
  guint replicas = cfg->dp * cfg->cp;
  b->reduce_dense = replicas > 1;
  b->reduce_expert = mp_parallel_config_edp (cfg) > 1;
  b->buckets = g_array_new (FALSE, FALSE, sizeof (Bucket));
  b->issued = g_array_new (FALSE, FALSE, sizeof (guint));
  b->insns = g_array_sized_new (FALSE, FALSE, sizeof (MpInsn), expected_insns (b, plan));
  b->last_mb = g_new0 (guint, b->v);
  prepare_layers (b);
}

static void
builder_clear (Builder *b)
{
  g_free (b->first);
  g_free (b->count);
  g_free (b->peer);
  g_free (b->boundary);
  g_free (b->fwd);
  g_free (b->bwd);
  g_free (b->dense);
  g_free (b->expert);
  g_free (b->closes[0]);
  g_free (b->closes[1]);
  g_free (b->last_mb);
  g_array_unref (b->buckets);
  g_array_unref (b->issued);
  if (b->insns)
    g_array_unref (b->insns);
}

/* After the last backward: the tied embeddings (Megatron's order, after the buckets),
 * every reduction waited for, the optimizer, and for ZeRO 1/2 the updated shards
 * gathered back bucket by bucket. */
static void
emit_step_end (Builder *b)
{
  double tied = mp_cost_tied_params (b->ctx, b->cfg);
  if (tied > 0 && (b->stage == 0 || b->stage == b->p - 1))
    {
      MpInsn *i = emit (b, MP_INSN_REDUCE_TIED, MP_STREAM_DP);
      i->layer = b->stage == 0 ? 0 : mp_cost_context_model (b->ctx)->n_layers - 1;
      i->n_layers = 1;
      i->coll = MP_COLL_ALL_REDUCE;
      i->group = MP_GROUP_PP_ENDS;
      i->bytes = tied * b->grad_bytes;
    }
  emit (b, MP_INSN_WAIT, MP_STREAM_DP);
  emit (b, MP_INSN_OPTIMIZER, MP_STREAM_COMPUTE);
  if (b->cfg->zero != 1 && b->cfg->zero != 2)
    return;
  for (guint k = 0; k < b->issued->len; k++)
    {
      const Bucket *bk = &g_array_index (b->buckets, Bucket,
                                         g_array_index (b->issued, guint, k));
      emit_gather (b, bk->group, bk->lo, bk->n, bk->params);
    }
  if (b->issued->len > 0)
    emit (b, MP_INSN_WAIT, MP_STREAM_DP);
}

MpProgram *
mp_program_build (const MpCostContext *ctx, const MpPlan *plan, guint rank)
{
  g_return_val_if_fail (ctx != NULL && plan != NULL && plan->chunk_layers != NULL, NULL);
  g_return_val_if_fail (rank < plan->world_size, NULL);
  const MpParallelConfig *cfg = &plan->cfg;
  /* Megatron's interleaved order needs whole groups of pp micro-batches. */
  g_return_val_if_fail (cfg->schedule != MP_SCHEDULE_INTERLEAVED
                        || cfg->num_micro_batches % cfg->pp == 0, NULL);
  Builder b;
  builder_init (&b, ctx, plan, rank);
  g_autoptr(GArray) steps = pl_schedule_steps (cfg, b.stage);
  for (guint i = 0; i < steps->len; i++)
    {
      const Step *s = &g_array_index (steps, Step, i);
      if (s->backward)
        b.last_mb[s->v] = s->mb;
    }
  for (guint i = 0; i < steps->len; i++)
    {
      const Step *s = &g_array_index (steps, Step, i);
      if (s->backward)
        emit_backward (&b, s);
      else
        emit_forward (&b, s);
    }
  emit_step_end (&b);

  MpProgram *prog = g_new0 (MpProgram, 1);
  prog->rank = rank;
  prog->stage = b.stage;
  prog->tp_rank = b.coord[MP_DIM_TP];
  prog->cp_rank = b.coord[MP_DIM_CP];
  prog->dp_rank = b.coord[MP_DIM_DP];
  prog->schedule = cfg->schedule;
  prog->pp = b.p;
  prog->vpp = b.v;
  prog->n_micro_batches = cfg->num_micro_batches;
  prog->n_insns = b.insns->len;
  prog->insns = (MpInsn *) g_array_free (b.insns, FALSE);
  b.insns = NULL;
  builder_clear (&b);
  return prog;
}

MpProgram **
mp_program_build_stages (const MpCostContext *ctx, const MpPlan *plan, guint *n)
{
  g_return_val_if_fail (ctx != NULL && plan != NULL && n != NULL, NULL);
  guint pp = plan->cfg.pp;
  MpProgram **out = g_new0 (MpProgram *, pp + 1);
  for (guint s = 0; s < pp; s++)
    out[s] = mp_program_build (ctx, plan, mp_plan_rank_of (&plan->cfg, 0, 0, 0, s));
  *n = pp;
  return out;
}

void
mp_program_stages_free (MpProgram **programs)
{
  if (programs == NULL)
    return;
  for (MpProgram **p = programs; *p; p++)
    mp_program_free (*p);
  g_free (programs);
}
