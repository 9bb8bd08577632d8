/* evaluate.c - the closed form of one plan: its layer split, and its step time, memory
 * and throughput from the cost model's per-stage figures.
 *
 * Pipeline time (stages i = 0..p-1, c_i = forward + backward of one micro-batch through
 * stage i, P = one activation send/recv, m micro-batches, v chunks per stage):
 *   gpipe, 1f1b:  (m - 1) max_i (c_i + 2P) + sum_i c_i + 2 (p - 1) P
 *                 (uniform stages, P = 0: (m + p - 1) c, as in Narayanan et al. 2021)
 *   interleaved:  m max_i (c_i + 2vP) + (sum_i c_i - max_i c_i) r / v + 2 (p - 1) P
 *                 (fill and drain through one chunk of every other stage; r = the largest
 *                 chunk's blocks over the average chunk's; uniform: (p - 1)/v of c)
 *   none:         m (sum_i c_i + 2 (p - 1) P)   (layer placement, one stage busy at once)
 * Gradient reduction overlaps the last micro-batch's backward, bucket by bucket, as DDP
 * and Megatron's overlap_grad_reduce do; what does not fit under it is exposed. */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "planner/planner-private.h"
#include "common/error.h"

#include <math.h>
#include <string.h>

MpPlan *
mp_plan_copy (const MpPlan *plan)
{
  MpPlan *copy = g_memdup2 (plan, sizeof *plan);
  guint chunks = plan->cfg.pp * MAX (plan->cfg.vpp, 1u);
  copy->chunk_layers = g_memdup2 (plan->chunk_layers, chunks * sizeof (guint));
  copy->cfg.chunk_layers = copy->chunk_layers;
  return copy;
}

void
mp_plan_free (MpPlan *plan)
{
  if (plan == NULL)
    return;
  g_free (plan->chunk_layers);
  g_free (plan);
}

const char *
mp_plan_dominant (const MpPlan *plan)
{
  return mp_phase_name (mp_step_time_dominant (&plan->time));
}

const char *
mp_plan_family_name (MpPlanFamily family)
{
  static const char *const names[MP_FAMILY_N] = {
    "data parallel (DDP, Horovod, MirroredStrategy)", "ZeRO-2/3 / FSDP",
    "layer placement (no pipelining)", "pipeline only", "tensor, context or expert only", "2D",
    "full hybrid"
  };
  g_return_val_if_fail (family < MP_FAMILY_N, "?");
  return names[family];
}

MpPlanFamily
mp_plan_family_of (const MpParallelConfig *cfg)
{
  /* Context and expert parallelism split each layer's work like tensor parallelism
   * does: a cp = 8 plan is no plain data-parallel (DDP, Horovod) plan. */
  gboolean split = cfg->tp > 1 || cfg->cp > 1 || cfg->ep > 1;
  guint dims = (cfg->dp > 1) + split + (cfg->pp > 1);
  if (cfg->pp > 1 && cfg->schedule == MP_SCHEDULE_NONE && !split)
    return MP_FAMILY_PLACEMENT;
  if (dims >= 3)
    return MP_FAMILY_HYBRID;
  if (dims == 2)
    return MP_FAMILY_2D;
  if (split)
    return MP_FAMILY_TENSOR;
  if (cfg->pp > 1)
    return MP_FAMILY_PIPELINE;
  /* DDP, Horovod and MirroredStrategy replicate the gradients (ZeRO-1: DDP with PyTorch's
   * ZeroRedundancyOptimizer); sharded gradients are FSDP's (SHARD_GRAD_OP: ZeRO-2) or
   * DeepSpeed's. */
  return cfg->zero >= 2 ? MP_FAMILY_FSDP : MP_FAMILY_DATA;
}

/* ---- the layer split ------------------------------------------------------------------ */

/* Greedy fill of UNITS (costs) into at most N contiguous groups of cost <= LIMIT, each
 * non-empty; returns the groups used, or N + 1 when LIMIT is too small. */
static guint
greedy_groups (const double *units, guint n_units, double limit, guint n, guint *counts)
{
  guint group = 0, in_group = 0;
  double load = 0;
  for (guint u = 0; u < n_units; u++)
    {
      /* Start a new group when this unit would overflow it, or when every later group
       * needs one of the units left. */
      gboolean full = in_group > 0 && load + units[u] > limit;
      gboolean must = in_group > 0 && n_units - u <= n - 1 - group;
      if (full || must)
        {
          if (counts)
            counts[group] = in_group;
          if (++group >= n)
            return n + 1;
          in_group = 0;
          load = 0;
        }
      if (units[u] > limit)
        return n + 1;
      load += units[u];
      in_group++;
    }
  if (counts)
    counts[group] = in_group;
  return group + 1;
}

/* Fills UNITS into N contiguous groups of cost <= LIMIT (a bottleneck greedy_groups
 * meets), each as close to an even share of what is left as LIMIT and the groups after
 * it allow. The greedy fill packs the front groups to LIMIT and leaves slivers at the end
 * ([5, 4, 4, ..., 1, 1, 2]): as good for the largest chunk, but an interleaved stage then
 * waits on each round's largest chunk, and the first stages, which hold the most
 * micro-batches in flight, hold the most layers. Returns the groups used. */
static guint
balanced_groups (const double *units, guint n_units, double limit, guint n, guint *counts)
{
  double left = 0;
  for (guint u = 0; u < n_units; u++)
    left += units[u];
  guint u = 0, group = 0;
  for (; group < n && u < n_units; group++)
    {
      guint after = n - 1 - group;           /* groups still to fill after this one */
      double share = left / (after + 1), load = 0;
      guint start = u;
      /* The first unit whose suffix fits the groups after this one: every unit before it
       * must join this group. A suffix of a suffix that fits fits too, so bisect. */
      guint lo = start + 1, hi = n_units;
      while (lo < hi)
        {
          guint mid = lo + (hi - lo) / 2;
          if (greedy_groups (units + mid, n_units - mid, limit, after, NULL) <= after)
            hi = mid;
          else
            lo = mid + 1;
        }
      while (u < n_units)
        {
          gboolean must = u < lo;
          gboolean closer = load + units[u] <= limit && n_units - u - 1 >= after
                            && fabs (load + units[u] - share) < fabs (load - share);
          if (!must && !closer)
            break;
          load += units[u++];
        }
      counts[group] = u - start;
      left -= load;
    }
  return group;
}

void
pl_layer_costs (const MpCostContext *ctx, const MpParallelConfig *cfg, double *cost)
{
  const MpModel *model = mp_cost_context_model (ctx);
  MpParallelConfig even = *cfg;
  even.chunk_layers = NULL;
  even.vpp = 1;
  even.pp = 1;
  if (even.schedule == MP_SCHEDULE_INTERLEAVED)
    even.schedule = MP_SCHEDULE_1F1B;
  MpStageSpans spans;
  mp_cost_stage_spans (ctx, &even, 0, &spans);
  for (guint l = 0; l < model->n_layers; l++)
    {
      MpPhaseCost f, b;
      mp_cost_layer (ctx, &even, &spans, l, &f, &b);
      cost[l] = f.total_s + b.total_s;
    }
}

gboolean
mp_plan_split_layers (const MpCostContext *ctx, const MpParallelConfig *cfg,
                      guint *chunk_layers)
{
  const MpModel *model = mp_cost_context_model (ctx);
  g_autofree double *cost = g_new (double, model->n_layers);
  pl_layer_costs (ctx, cfg, cost);
  return pl_split_costs (model, cost, cfg->pp, MAX (cfg->vpp, 1u), chunk_layers);
}

/* How a split of UNITS into CHUNKS groups of COUNTS (group c on stage c % pp) paces a
 * pipeline: *STAGE the largest stage's work (the steady state, as the closed form and
 * the simulation find it), *ROUNDS the sum over interleaving rounds of each round's
 * largest chunk (what a stage may wait on within a round). */
static void
split_score (const double *units, const guint *counts, guint chunks, guint pp,
             double *stage_max, double *rounds)
{
  g_autofree double *stage = g_new0 (double, pp);
  double round_max = 0;
  *stage_max = *rounds = 0;
  for (guint c = 0, u = 0; c < chunks; c++)
    {
      double load = 0;
      for (guint i = 0; i < counts[c]; i++)
        load += units[u++];
      stage[c % pp] += load;
      round_max = MAX (round_max, load);
      if (c % pp == pp - 1 || c == chunks - 1)
        {
          *rounds += round_max;
          round_max = 0;
        }
    }
  for (guint i = 0; i < pp; i++)
    *stage_max = MAX (*stage_max, stage[i]);
}

/* Is split A (counts) better than B: a lighter largest stage, else lighter rounds? */
static gboolean
split_better (const double *units, const guint *a, const guint *b, guint chunks, guint pp)
{
  double sa, ra, sb, rb;
  split_score (units, a, chunks, pp, &sa, &ra);
  split_score (units, b, chunks, pp, &sb, &rb);
  double tol = 1e-9 * MAX (sa, sb);
  return sa < sb - tol || (sa <= sb + tol && ra < rb - tol);
}

gboolean
pl_split_costs (const MpModel *model, const double *cost, guint pp, guint vpp,
                guint *chunk_layers)
{
  guint chunks = pp * vpp;
  /* Units are blocks; the embedding rides with the first and the head with the last,
   * unless there are more chunks than blocks (a pinned vpp): then they are units too and
   * end up alone in the end chunks, as Megatron's account_for_* splits put them. */
  gboolean transformer = model->arch == MP_ARCH_TRANSFORMER
                         && model->n_layers - 2 >= chunks;
  guint first = transformer ? 1 : 0;
  guint n_units = transformer ? model->n_layers - 2 : model->n_layers;
  if (n_units < chunks)
    return FALSE;
  g_autofree double *units = g_new (double, n_units);
  double lo = 0, hi = 0;
  for (guint u = 0; u < n_units; u++)
    {
      units[u] = cost[first + u];
      if (transformer && u == 0)
        units[u] += cost[0];
      if (transformer && u == n_units - 1)
        units[u] += cost[model->n_layers - 1];
      lo = MAX (lo, units[u]);
      hi += units[u];
    }
  /* Binary search on the bottleneck, then the tightest greedy fill. */
  for (int it = 0; it < 60 && hi - lo > 1e-9 * hi; it++)
    {
      double mid = 0.5 * (lo + hi);
      if (greedy_groups (units, n_units, mid, chunks, NULL) <= chunks)
        hi = mid;
      else
        lo = mid;
    }
  /* Two fills meet that bottleneck: the greedy one (its slack in the last chunks) and the
   * balanced one; the pipeline keeps the better (split_better), the balanced one on a tie
   * (lighter first stages, which hold the most micro-batches in flight). */
  g_autofree guint *greedy = g_new0 (guint, chunks);
  guint used = balanced_groups (units, n_units, hi, chunks, chunk_layers);
  guint used_greedy = greedy_groups (units, n_units, hi, chunks, greedy);
  if (used_greedy == chunks && used == chunks
      && split_better (units, greedy, chunk_layers, chunks, pp))
    memcpy (chunk_layers, greedy, chunks * sizeof *greedy);
  g_assert (used <= chunks);
  /* Fewer groups than chunks can only happen with all-zero costs: spread the rest. */
  for (guint c = used; c < chunks; c++)
    chunk_layers[c] = 0;
  for (guint c = used; c < chunks; c++)
    for (guint d = 0; d < chunks; d++)
      if (chunk_layers[d] > 1)
        {
          chunk_layers[d]--;
          chunk_layers[c]++;
          break;
        }
  if (transformer)
    {
      chunk_layers[0] += 1;
      chunk_layers[chunks - 1] += 1;
    }
  return TRUE;
}

/* ---- the closed form ------------------------------------------------------------------ */

/* The largest chunk's blocks over the average chunk's (1 when they split evenly). The
 * embedding and head ride on the end chunks and are left out: blocks set the time. */
static double
largest_chunk_ratio (const MpParallelConfig *cfg, gboolean transformer)
{
  guint chunks = cfg->pp * MAX (cfg->vpp, 1u), largest = 0, total = 0;
  if (cfg->chunk_layers == NULL)
    return 1;
  for (guint c = 0; c < chunks; c++)
    {
      guint blocks = cfg->chunk_layers[c];
      if (transformer)
        blocks -= (c == 0) + (c == chunks - 1);
      largest = MAX (largest, blocks);
      total += blocks;
    }
  return total ? (double) largest * chunks / total : 1;
}

/* Are the chunks of every interleaving round alike (the same blocks on every stage, the
 * end chunks' embedding and head aside)? Then the closed form's rounds are exact. */
static gboolean
rounds_alike (const MpParallelConfig *cfg, gboolean transformer)
{
  guint p = cfg->pp, chunks = p * MAX (cfg->vpp, 1u);
  if (cfg->chunk_layers == NULL)
    return TRUE;
  for (guint c = 0; c < chunks; c++)
    {
      guint a = cfg->chunk_layers[c], b = cfg->chunk_layers[c - c % p];
      if (transformer)
        {
          a -= (c == 0) + (c == chunks - 1);
          b -= (c - c % p == 0);
        }
      if (a != b)
        return FALSE;
    }
  return TRUE;
}

/* Interleaved 1F1B chunk by chunk, for M micro-batches (a multiple of pp): each stage
 * runs its steps in its program's order (pl_schedule_steps); a forward waits for the
 * chunk before's, a backward for the chunk after's (on the last chunk, for its own
 * forward); a step that hands its result on ends with the P2P send, which the sender
 * waits out (the programs' blocking send). FWD, BWD: per model chunk. */
static double
interleaved_run (const MpParallelConfig *cfg, guint m, const double *fwd, const double *bwd,
                 double p2p)
{
  MpParallelConfig c = *cfg;
  c.num_micro_batches = m;
  guint p = c.pp, chunks = p * MAX (c.vpp, 1u), left = 2 * m * chunks;
  g_autofree double *out = g_new (double, (gsize) 2 * chunks * m);  /* forward, backward */
  for (gsize k = 0; k < (gsize) 2 * chunks * m; k++)
    out[k] = -1;
  double *out_f = out, *out_b = out + (gsize) chunks * m, step_s = 0;
  g_autofree double *free_at = g_new0 (double, p);
  g_autofree guint *next = g_new0 (guint, p);
  g_autoptr(GPtrArray) steps = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  for (guint i = 0; i < p; i++)
    g_ptr_array_add (steps, pl_schedule_steps (&c, i));
  for (gboolean moved = TRUE; left > 0 && moved;)
    {
      moved = FALSE;
      for (guint i = 0; i < p; i++)
        {
          GArray *mine = g_ptr_array_index (steps, i);
          for (; next[i] < mine->len; next[i]++)
            {
              const PlStep *s = &g_array_index (mine, PlStep, next[i]);
              guint ch = i + s->v * p;
              gsize at = (gsize) ch * m + s->mb;
              double ready = 0;
              if (s->backward)
                ready = ch + 1 < chunks ? out_b[at + m] : out_f[at];
              else if (ch > 0)
                ready = out_f[at - m];
              if (ready < 0)
                break;
              gboolean sends = s->backward ? ch > 0 : ch + 1 < chunks;
              double end = MAX (free_at[i], ready) + (s->backward ? bwd[ch] : fwd[ch])
                           + (sends ? p2p : 0);
              (s->backward ? out_b : out_f)[at] = end;
              free_at[i] = end;
              step_s = MAX (step_s, end);
              left--;
              moved = TRUE;
            }
        }
    }
  g_warn_if_fail (left == 0);       /* Megatron's order never deadlocks */
  return step_s;
}

/* interleaved_run for the plan's micro-batches; past six groups of pp the schedule's
 * steady state repeats group by group, so a long run is the fifth group's time on. */
static double
interleaved_pipe (const MpParallelConfig *cfg, const double *fwd, const double *bwd,
                  double p2p)
{
  guint p = cfg->pp, groups = cfg->num_micro_batches / p;
  if (groups <= 6)
    return interleaved_run (cfg, cfg->num_micro_batches, fwd, bwd, p2p);
  double four = interleaved_run (cfg, 4 * p, fwd, bwd, p2p);
  double five = interleaved_run (cfg, 5 * p, fwd, bwd, p2p);
  return five + (groups - 5) * (five - four);
}

typedef struct {
  double pipe_s;                   /* fill, steady state and drain */
  guint bottleneck;                /* the stage whose work sets the steady state */
  double pp_comm_s;
} Pipeline;

/* CHUNK_FWD, CHUNK_BWD: each chunk's times, given where the chunks of a round differ
 * (rounds_alike), else NULL. */
static void
pipeline_time (const MpParallelConfig *cfg, gboolean transformer, const MpStageTime *st,
               const double *chunk_fwd, const double *chunk_bwd, Pipeline *out)
{
  guint p = cfg->pp, v = MAX (cfg->vpp, 1u);
  double m = cfg->num_micro_batches;
  double sum = 0, max_c = 0, p2p = 0;
  out->bottleneck = 0;
  for (guint i = 0; i < p; i++)
    {
      double c = st[i].fwd.total_s + st[i].bwd.total_s;
      sum += c;
      if (c > max_c)
        {
          max_c = c;
          out->bottleneck = i;
        }
      if (i + 1 < p)
        p2p = MAX (p2p, st[i].p2p_s);
    }
  double edge = 2.0 * (p - 1) * p2p;       /* fill and drain cross every boundary twice */
  switch (cfg->schedule)
    {
    case MP_SCHEDULE_NONE:
      out->pipe_s = m * (sum + edge);
      out->pp_comm_s = m * edge;
      break;
    case MP_SCHEDULE_INTERLEAVED:
      {
        /* Fill and drain run through single chunks: with uneven chunks (blocks that do
         * not divide over p * v) the largest chunk sets them, not the average. */
        double steady = p > 1 ? 2.0 * v * p2p : 0;
        double rest = (sum - max_c) / v * largest_chunk_ratio (cfg, transformer);
        out->pipe_s = m * (max_c + steady) + rest + edge;
        out->pp_comm_s = m * steady + edge;
        /* Rounds whose chunks differ make stages wait on each other within the steady
         * state as well as in the fill and drain: time the schedule step by step. */
        if (chunk_fwd != NULL)
          out->pipe_s = interleaved_pipe (cfg, chunk_fwd, chunk_bwd, p2p);
      }
      break;
    case MP_SCHEDULE_GPIPE:
    case MP_SCHEDULE_1F1B:
    default:
      {
        double steady = p > 1 ? 2.0 * p2p : 0;
        out->pipe_s = (m - 1) * (max_c + steady) + sum + edge;
        out->pp_comm_s = (m - 1) * steady + edge;
      }
      break;
    }
}

/* Time STAGE has from the start of its first backward to the end of its last, for a
 * data-parallel stream that starts there (ZeRO-2's per-micro-batch reductions). With 1F1B
 * and interleaving it is the pipeline's time PIPE_S less the first micro-batch's way
 * there (forward through every chunk, backward from the last stage through the last
 * chunks down to this one) and less AHEAD, by which it drains before stage 0; idle time
 * in between hides reductions too. Never less than its own compute after the first
 * backward: every backward, and the forwards not run before it (Megatron's warm-up: p - i
 * in 1F1B, 2 (p - i - 1) + (v - 1) p + 1 chunks interleaved; GPipe runs all of them
 * first; one runs before the first backward without pipelining). */
static double
backward_window (const MpParallelConfig *cfg, const MpStageTime *st, guint stage,
                 double pipe_s, double ahead)
{
  double m = cfg->num_micro_batches, v = MAX (cfg->vpp, 1u), p = cfg->pp, i = stage;
  double before = 1;                  /* micro-batches' forwards before the first backward */
  if (cfg->schedule == MP_SCHEDULE_GPIPE)
    before = m;
  else if (cfg->schedule == MP_SCHEDULE_INTERLEAVED && v > 1)
    before = MIN (m * v, 2 * (p - i - 1) + (v - 1) * p + 1) / v;
  else if (cfg->schedule != MP_SCHEDULE_NONE)
    before = MIN (m, p - i);
  double own = m * st[stage].bwd.total_s + (m - before) * st[stage].fwd.total_s;
  if (cfg->schedule != MP_SCHEDULE_1F1B && cfg->schedule != MP_SCHEDULE_INTERLEAVED)
    return own;
  double way = 0;
  for (guint j = 0; j < cfg->pp; j++)
    way += st[j].fwd.total_s + (j > stage ? st[j].bwd.total_s / v : 0);
  return MAX (own, pipe_s - ahead - way);
}

/* Exposed data-parallel time after the pipeline drains: each stage reduces its gradients
 * under its last backward; stage i drains ahead of stage 0 by the backward work of the
 * stages before it, which hides that much more of its reduction. */
static double
dp_exposed (const MpParallelConfig *cfg, const MpStageTime *st, double pipe_s)
{
  double worst = 0, ahead = 0;
  for (guint i = 0; i < cfg->pp; i++)
    {
      double b = st[i].bwd.total_s;
      double exposed = MAX (st[i].dp_last_bucket_s, st[i].dp_reduce_s - b);
      double zero3 = 0;
      if (cfg->zero == 2)
        {
          /* ZeRO-2 reduce-scatters every micro-batch's gradients from its backward on:
           * the stream hides under the compute from the first backward to the end of the
           * last, and the last micro-batch's last bucket is left. */
          double window = backward_window (cfg, st, i, pipe_s, ahead);
          exposed = MAX (st[i].dp_last_bucket_s, st[i].dp_reduce_s - window);
        }
      if (cfg->zero == 3)
        {
          /* ZeRO-3 (FSDP) gathers weights one layer ahead and reduce-scatters gradients
           * every micro-batch, all on the one data-parallel stream: each pass waits for
           * its first gather, for any gather longer than the layer it hides under, and
           * the stream's tail (zero3_wait_s); in total never less than the stream's
           * excess over the micro-batch's compute. */
          double m = cfg->num_micro_batches, per = st[i].dp_reduce_s / m;
          double c = st[i].fwd.total_s + b;
          zero3 = m * MAX (st[i].zero3_wait_s, st[i].zero3_gather_s + per - c);
          exposed = 0;
        }
      worst = MAX (worst, MAX (0.0, exposed - ahead) + zero3 + st[i].dp_gather_s
                              + st[i].tied_embedding_s);
      ahead += b;
    }
  return worst;
}

void
pl_plan_memory (const MpCostContext *ctx, MpPlan *plan)
{
  const MpParallelConfig *cfg = &plan->cfg;
  g_autofree MpStageMemory *mem = g_new0 (MpStageMemory, cfg->pp);
  guint binding = mp_cost_memory (ctx, cfg, mem);
  const MpStageMemory *b = &mem[binding];
  plan->memory = (MpPlanMemory) {
    .peak_bytes = b->total_bytes,
    .bytes = {
      [MP_MEM_WEIGHTS] = b->weights_bytes,
      [MP_MEM_GRADIENTS] = b->grads_bytes,
      [MP_MEM_OPTIMIZER] = b->optimizer_bytes,
      [MP_MEM_ACTIVATIONS] = b->activations_bytes,
      [MP_MEM_OTHER] = b->transient_bytes + b->overhead_bytes,
    },
    .headroom_bytes = b->headroom_bytes,
    .capacity_bytes = b->capacity_bytes,
    .binding_stage = binding,
  };
  memcpy (plan->memory.reserve, b->reserve, sizeof b->reserve);
  plan->fits = TRUE;
  for (guint i = 0; i < cfg->pp; i++)
    if (mem[i].total_bytes + mem[i].headroom_bytes > mem[i].capacity_bytes)
      plan->fits = FALSE;
}

static void
fill_throughput (const MpCostContext *ctx, const MpParallelConfig *cfg, MpPlan *plan)
{
  const MpModel *model = mp_cost_context_model (ctx);
  const MpCluster *cluster = mp_cost_context_cluster (ctx);
  double world = plan->world_size;
  double tokens = (double) plan->global_batch * MAX (model->seq_len, 1u);
  plan->tokens_per_s = tokens / plan->step_s;
  plan->tflops_per_gpu = mp_cost_step_flops (ctx, cfg, FALSE) / plan->step_s / world;
  plan->hw_tflops_per_gpu = mp_cost_step_flops (ctx, cfg, TRUE) / plan->step_s / world;
  const MpDevice *slowest = mp_cluster_slowest_device (cluster);
  double peak = slowest->peak_flops[mp_cost_device (ctx, 0)->dtype];
  if (peak <= 0)
    peak = slowest->peak_flops[MP_DTYPE_FP32];
  plan->mfu = peak > 0 ? plan->tflops_per_gpu / peak : 0;
  plan->hfu = peak > 0 ? plan->hw_tflops_per_gpu / peak : 0;
}

void
pl_plan_init (MpPlan *plan, const MpParallelConfig *cfg, const guint *chunk_layers,
              guint global_batch)
{
  guint chunks = cfg->pp * MAX (cfg->vpp, 1u);
  memset (plan, 0, sizeof *plan);
  plan->cfg = *cfg;
  plan->chunk_layers = g_memdup2 (chunk_layers, chunks * sizeof (guint));
  plan->cfg.chunk_layers = plan->chunk_layers;
  plan->global_batch = global_batch;
  plan->world_size = cfg->dp * cfg->tp * cfg->pp * cfg->cp;
  plan->family = mp_plan_family_of (cfg);
}

void
pl_plan_time (const MpCostContext *ctx, MpPlan *plan)
{
  const MpParallelConfig *cfg = &plan->cfg;
  MpStageTime st_small[16];
  g_autofree MpStageTime *st_big = cfg->pp > 16 ? g_new (MpStageTime, cfg->pp) : NULL;
  MpStageTime *st = st_big ? st_big : st_small;
  gboolean transformer = mp_cost_context_model (ctx)->arch == MP_ARCH_TRANSFORMER;
  g_autofree double *chunk = NULL;
  guint chunks = cfg->pp * MAX (cfg->vpp, 1u);
  if (cfg->schedule == MP_SCHEDULE_INTERLEAVED && cfg->pp > 1 && chunks > cfg->pp
      && !rounds_alike (cfg, transformer))
    {
      chunk = g_new (double, 2 * chunks);
      mp_cost_chunk_times (ctx, cfg, st, chunk, chunk + chunks);
    }
  else
    mp_cost_stage_times (ctx, cfg, st);
  Pipeline pipe;
  pipeline_time (cfg, transformer, st, chunk, chunk ? chunk + chunks : NULL, &pipe);
  const MpStageTime *b = &st[pipe.bottleneck];
  double m = cfg->num_micro_batches;
  double *t = plan->time.t;
  t[MP_PHASE_COMPUTE] = m * (b->fwd.compute_s + b->fwd.recompute_s + b->bwd.compute_s
                             + b->bwd.recompute_s);
  t[MP_PHASE_TP] = m * (b->fwd.tp_comm_s + b->fwd.cp_comm_s + b->bwd.tp_comm_s
                        + b->bwd.cp_comm_s);
  t[MP_PHASE_EP] = m * (b->fwd.ep_comm_s + b->bwd.ep_comm_s);
  t[MP_PHASE_PP] = pipe.pp_comm_s;
  t[MP_PHASE_BUBBLE] = MAX (0.0, pipe.pipe_s - t[MP_PHASE_COMPUTE] - t[MP_PHASE_TP]
                                 - t[MP_PHASE_EP] - t[MP_PHASE_PP]);
  if (t[MP_PHASE_BUBBLE] < 1e-12 * pipe.pipe_s)
    t[MP_PHASE_BUBBLE] = 0;      /* rounding left by the subtraction, not a bubble */
  t[MP_PHASE_DP] = dp_exposed (cfg, st, pipe.pipe_s);
  t[MP_PHASE_OPTIMIZER] = 0;
  for (guint i = 0; i < cfg->pp; i++)
    t[MP_PHASE_OPTIMIZER] = MAX (t[MP_PHASE_OPTIMIZER], st[i].optimizer_s);
  /* The pipeline's part first, then what follows it: the step's time line in order. */
  plan->step_s = t[MP_PHASE_COMPUTE] + t[MP_PHASE_TP] + t[MP_PHASE_EP] + t[MP_PHASE_PP]
                 + t[MP_PHASE_BUBBLE]
                 + t[MP_PHASE_DP] + t[MP_PHASE_OPTIMIZER];
  fill_throughput (ctx, cfg, plan);
}

gboolean
mp_plan_evaluate (const MpCostContext *ctx, const MpParallelConfig *cfg, guint global_batch,
                  MpPlan *plan, GError **error)
{
  const MpModel *model = mp_cost_context_model (ctx);
  if (!mp_parallel_config_check (cfg, model, mp_cost_context_cluster (ctx), error))
    return FALSE;
  guint64 batch = (guint64) cfg->dp * cfg->micro_batch_size * cfg->num_micro_batches;
  if (batch != global_batch)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                   "dp %u x micro-batch %u x %u micro-batches = %" G_GUINT64_FORMAT
                   " sequences, not the global batch %u", cfg->dp, cfg->micro_batch_size,
                   cfg->num_micro_batches, batch, global_batch);
      return FALSE;
    }
  guint chunks = cfg->pp * MAX (cfg->vpp, 1u);
  g_autofree guint *split = g_new (guint, chunks);
  if (cfg->chunk_layers)
    memcpy (split, cfg->chunk_layers, chunks * sizeof (guint));
  else if (!mp_plan_split_layers (ctx, cfg, split))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%u model chunks but fewer layers", chunks);
      return FALSE;
    }
  pl_plan_init (plan, cfg, split, global_batch);
  pl_plan_memory (ctx, plan);
  pl_plan_time (ctx, plan);
  return TRUE;
}

/* ---- ordering ------------------------------------------------------------------------- */

int
mp_plan_compare (const MpPlan *a, const MpPlan *b)
{
  if (a->step_s != b->step_s)
    return a->step_s < b->step_s ? -1 : 1;
  /* Ties: the smaller footprint, then a fixed order of the config's fields. */
  if (a->memory.peak_bytes != b->memory.peak_bytes)
    return a->memory.peak_bytes < b->memory.peak_bytes ? -1 : 1;
  return mp_parallel_config_compare (&a->cfg, &b->cfg);
}
