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
    "data parallel (ZeRO-0/1)", "sharded data parallel (ZeRO-2/3)",
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

/* What a split fills: UNITS (blocks, the embedding and head riding on the end ones) costed
 * on each node group's device, n_groups rows of n_units; chunk c runs on stage c % pp,
 * whose device is that of group stage_group[c % pp] (NULL: group 0 everywhere). On a
 * heterogeneous cluster a unit costs less on the faster stages, so they take more. */
typedef struct {
  const double *units;
  guint n_units, n_groups, pp;
  const guint *stage_group;
} Units;

static inline double
unit_cost (const Units *us, guint chunk, guint u)
{
  guint g = us->stage_group ? us->stage_group[chunk % us->pp] : 0;
  return us->units[(gsize) g * us->n_units + u];
}

/* The limits a greedy fill decides alike for: [lo, hi), every sum it compared with its
 * limit lying below lo (<= it) or at hi and above (> it). */
typedef struct {
  double lo, hi;
} Alike;

static inline gboolean
over (double v, double limit, Alike *alike)
{
  if (v > limit)
    {
      alike->hi = MIN (alike->hi, v);
      return TRUE;
    }
  alike->lo = MAX (alike->lo, v);
  return FALSE;
}

/* Greedy fill of units U0.. into at most N contiguous groups (chunks C0 ..) of cost
 * <= LIMIT, each non-empty; returns the groups used, or N + 1 when LIMIT is too small.
 * ALIKE (may be NULL): the limits the fill runs the same way for. */
static guint
greedy_groups_alike (const Units *us, guint u0, guint c0, double limit, guint n,
                     guint *counts, Alike *alike)
{
  guint group = 0, in_group = 0;
  double load = 0;
  Alike a = { -G_MAXDOUBLE, G_MAXDOUBLE };
  alike = alike ? alike : &a;
  *alike = a;
  for (guint u = u0; u < us->n_units; u++)
    {
      /* Start a new group when this unit would overflow it, or when every later group
       * needs one of the units left. */
      double cost = unit_cost (us, c0 + group, u);
      gboolean full = in_group > 0 && over (load + cost, limit, alike);
      gboolean must = in_group > 0 && us->n_units - u <= n - 1 - group;
      if (full || must)
        {
          if (counts)
            counts[group] = in_group;
          if (++group >= n)
            return n + 1;
          in_group = 0;
          load = 0;
          cost = unit_cost (us, c0 + group, u);
        }
      if (over (cost, limit, alike))
        return n + 1;
      load += cost;
      in_group++;
    }
  if (counts)
    counts[group] = in_group;
  return group + 1;
}

/* On one kind of device, where a unit costs alike in every chunk: the groups of cost
 * <= LIMIT that greedy_groups fills from unit U to the end (G_MAXUINT where a unit is
 * over LIMIT), NEED[U] once known (0: not yet; NEED has n_units + 1 entries). A greedy
 * group from u ends where greedy_groups' does (the same sums in the same order) and the
 * rest starts afresh there, so NEED[u] = 1 + NEED[end]. greedy_groups' rule that every
 * later group needs a unit only splits groups further, so a suffix fits into N groups
 * exactly when NEED <= N: the search's many splits ask that in one step instead of a
 * greedy fill each (issue 15), and only for the units a split asks about, each group's
 * sum taken once. */
static guint
suffix_groups (const Units *us, double limit, guint *need, guint u)
{
  guint n = us->n_units;
  if (u == n)
    return 1;                               /* greedy_groups' count for no units */
  if (need[u] != 0)
    return need[u];
  double load = 0;
  guint v = u;
  gboolean too_big = FALSE;
  for (; v < n; v++)
    {
      double cost = us->units[v];
      if (v > u && load + cost > limit)
        break;
      if (cost > limit)
        too_big = TRUE;
      if (too_big)
        break;
      load += cost;
    }
  guint rest = too_big || v == n ? 0 : suffix_groups (us, limit, need, v);
  need[u] = too_big || rest == G_MAXUINT ? G_MAXUINT : 1 + rest;
  return need[u];
}

static guint
greedy_groups (const Units *us, guint u0, guint c0, double limit, guint n, guint *counts)
{
  return greedy_groups_alike (us, u0, c0, limit, n, counts, NULL);
}

/* Do units U.. fit into the AFTER groups from chunk C0 at LIMIT? By suffix_groups (its table
 * NEED, filled as asked) where there is one, else by a greedy fill. */
static gboolean
suffix_fits (const Units *us, guint *need, guint u, guint c0, double limit, guint after)
{
  return need ? suffix_groups (us, limit, need, u) <= after
              : greedy_groups (us, u, c0, limit, after, NULL) <= after;
}

/* The even share of the work LEFT (per node group: the units not yet placed, costed on
 * that group's device) for chunk FIRST, when chunks FIRST .. N - 1 take it all: each the
 * same time T, so chunk j takes T / left_j of the work and T = 1 / sum_j 1 / left_j (on
 * one kind of device, left / chunks). */
static double
even_share (const Units *us, const double *left, guint first, guint n)
{
  if (us->stage_group == NULL)
    return left[0] / (n - first);
  double inv = 0;
  for (guint j = first; j < n; j++)
    {
      double l = left[us->stage_group[j % us->pp]];
      if (l <= 0)
        return 0;
      inv += 1 / l;
    }
  return 1 / inv;
}

/* Fills the units into N contiguous groups of cost <= LIMIT (a bottleneck greedy_groups
 * meets), each as close to an even share of what is left as LIMIT and the groups after
 * it allow. The greedy fill packs the front groups to LIMIT and leaves slivers at the end
 * ([5, 4, 4, ..., 1, 1, 2]): as good for the largest chunk, but an interleaved stage then
 * waits on each round's largest chunk, and the first stages, which hold the most
 * micro-batches in flight, hold the most layers. Returns the groups used. */
static guint
balanced_groups (const Units *us, double limit, guint n, guint *counts)
{
  guint n_units = us->n_units;
  /* on the stack: the search makes tens of thousands of splits */
  double left[us->n_groups];
  guint need_room[us->stage_group == NULL ? n_units + 1 : 1];
  guint *need = us->stage_group == NULL ? need_room : NULL;
  memset (left, 0, sizeof left);
  memset (need_room, 0, sizeof need_room);
  for (guint g = 0; g < us->n_groups; g++)
    for (guint u = 0; u < n_units; u++)
      left[g] += us->units[(gsize) g * n_units + u];
  guint u = 0, group = 0;
  for (; group < n && u < n_units; group++)
    {
      guint after = n - 1 - group;           /* groups still to fill after this one */
      double share = even_share (us, left, group, n), load = 0;
      guint start = u;
      /* The first unit whose suffix fits the groups after this one: every unit before it
       * must join this group. A suffix of a suffix that fits fits too, so bisect; below
       * the bottleneck's group most groups need no unit but their first, so that is tried
       * first. */
      guint lo = start + 1, hi = n_units;
      if (lo < hi && suffix_fits (us, need, lo, group + 1, limit, after))
        hi = lo;
      while (lo < hi)
        {
          guint mid = lo + (hi - lo) / 2;
          if (suffix_fits (us, need, mid, group + 1, limit, after))
            hi = mid;
          else
            lo = mid + 1;
        }
      while (u < n_units)
        {
          double cost = unit_cost (us, group, u);
          gboolean must = u < lo;
          gboolean closer = load + cost <= limit && n_units - u - 1 >= after
                            && fabs (load + cost - share) < fabs (load - share);
          if (!must && !closer)
            break;
          load += cost;
          u++;
        }
      counts[group] = u - start;
      for (guint g = 0; g < us->n_groups; g++)
        {
          double taken = 0;                  /* summed as LOAD is, for this chunk's group */
          for (guint i = start; i < u; i++)
            taken += us->units[(gsize) g * n_units + i];
          left[g] -= taken;
        }
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
  /* The split weighs layers by their own work: ZeRO-2/3's overlap with it (zero_overlap)
   * slows every layer of a stage alike and would tie the split to the ZeRO stage, which
   * the search chooses after the split. */
  even.zero = 0;
  if (even.schedule == MP_SCHEDULE_INTERLEAVED)
    even.schedule = MP_SCHEDULE_1F1B;
  MpStageSpans spans;
  mp_cost_stage_spans (ctx, &even, 0, &spans);
  /* Each node group's device in turn, the groups' spans as the whole world's (the links
   * are the cluster's): what a stage on that device pays. */
  guint n_groups = mp_cost_context_cluster (ctx)->n_groups;
  for (guint g = 0; g < n_groups; g++)
    {
      if (n_groups > 1)
        spans.device = mp_cost_device (ctx, g);
      for (guint l = 0; l < model->n_layers; l++)
        {
          MpPhaseCost f, b;
          mp_cost_layer (ctx, &even, &spans, l, &f, &b);
          cost[(gsize) g * model->n_layers + l] = f.total_s + b.total_s;
        }
    }
}

gboolean
mp_plan_split_layers (const MpCostContext *ctx, const MpParallelConfig *cfg,
                      guint *chunk_layers)
{
  const MpModel *model = mp_cost_context_model (ctx);
  guint n_groups = mp_cost_context_cluster (ctx)->n_groups;
  g_autofree double *cost = g_new (double, (gsize) n_groups * model->n_layers);
  pl_layer_costs (ctx, cfg, cost);
  return pl_split_costs (ctx, cfg, cost, NULL, NULL, chunk_layers);
}

/* How a split of the units into CHUNKS groups of COUNTS (group c on stage c % pp) paces a
 * pipeline: *STAGE the largest stage's work (the steady state, as the closed form and
 * the simulation find it), *ROUNDS the sum over interleaving rounds of each round's
 * largest chunk (what a stage may wait on within a round). */
static void
split_score (const Units *us, const guint *counts, guint chunks, double *stage_max,
             double *rounds)
{
  guint pp = us->pp;
  double stage[pp], round_max = 0;
  memset (stage, 0, sizeof stage);
  *stage_max = *rounds = 0;
  for (guint c = 0, u = 0; c < chunks; c++)
    {
      double load = 0;
      for (guint i = 0; i < counts[c]; i++)
        load += unit_cost (us, c, u++);
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
split_better (const Units *us, const guint *a, const guint *b, guint chunks)
{
  double sa, ra, sb, rb;
  split_score (us, a, chunks, &sa, &ra);
  split_score (us, b, chunks, &sb, &rb);
  double tol = 1e-9 * MAX (sa, sb);
  return sa < sb - tol || (sa <= sb + tol && ra < rb - tol);
}

static gboolean pick_split (const Units *us, guint chunks, gboolean transformer, guint used,
                            guint used_greedy, const guint *greedy, guint *chunk_layers);

/* The node group of each of CFG's stages, or NULL on a homogeneous cluster. */
static guint *
stage_groups (const MpCostContext *ctx, const MpParallelConfig *cfg)
{
  if (mp_cost_context_cluster (ctx)->n_groups == 1)
    return NULL;
  guint *groups = g_new (guint, cfg->pp);
  for (guint i = 0; i < cfg->pp; i++)
    groups[i] = mp_cost_stage_group (ctx, cfg, i);
  return groups;
}

gboolean
pl_split_costs (const MpCostContext *ctx, const MpParallelConfig *cfg, const double *cost,
                double *limits, guint *fills, guint *chunk_layers)
{
  const MpModel *model = mp_cost_context_model (ctx);
  guint pp = cfg->pp, chunks = pp * MAX (cfg->vpp, 1u);
  /* Units are blocks; the embedding rides with the first and the head with the last,
   * unless there are more chunks than blocks (a pinned vpp): then they are units too and
   * end up alone in the end chunks, as Megatron's account_for_* splits put them. */
  gboolean transformer = model->arch == MP_ARCH_TRANSFORMER
                         && model->n_layers - 2 >= chunks;
  guint first = transformer ? 1 : 0, n_layers = model->n_layers;
  guint n_units = transformer ? n_layers - 2 : n_layers;
  if (n_units < chunks)
    return FALSE;
  g_autofree guint *groups = stage_groups (ctx, cfg);
  Units us = { .n_units = n_units, .n_groups = groups ? mp_cost_context_cluster (ctx)->n_groups : 1,
               .pp = pp, .stage_group = groups };
  double units[(gsize) us.n_groups * n_units];
  us.units = units;
  for (guint g = 0; g < us.n_groups; g++)
    for (guint u = 0; u < n_units; u++)
      {
        const double *row = cost + (gsize) g * n_layers;
        double *v = &units[(gsize) g * n_units + u];
        *v = row[first + u];
        if (transformer && u == 0)
          *v += row[0];
        if (transformer && u == n_units - 1)
          *v += row[n_layers - 1];
      }
  /* On one kind of device the bottleneck depends on the units and chunks alone: the one
   * found before for these chunks, where the caller keeps them; and so do the two fills
   * of it (FILLS), which only the pipeline depth's choice between them (split_better)
   * tells apart. */
  double *known = groups == NULL && limits != NULL ? &limits[chunks] : NULL;
  if (groups != NULL)
    fills = NULL;
  guint greedy[chunks], used, used_greedy;
  if (fills != NULL && fills[0] != PL_FILLS_NONE)
    {
      used = fills[0];
      used_greedy = fills[1];
      memcpy (chunk_layers, fills + 2, chunks * sizeof *fills);
      memcpy (greedy, fills + 2 + chunks, chunks * sizeof *fills);
      return pick_split (&us, chunks, transformer, used, used_greedy, greedy, chunk_layers);
    }
  /* Bounds on the bottleneck: no unit costs less than on the fastest of the stages'
   * devices, and every unit on the slowest one's fits under the sum. */
  double lo = 0, hi = 0;
  for (guint u = 0; u < n_units; u++)
    {
      double fast = unit_cost (&us, 0, u), slow = fast;
      for (guint i = 1; groups && i < pp; i++)
        {
          fast = MIN (fast, unit_cost (&us, i, u));
          slow = MAX (slow, unit_cost (&us, i, u));
        }
      lo = MAX (lo, fast);
      hi += slow;
    }
  /* Binary search on the bottleneck, then the tightest greedy fill. A fill decides alike
   * for every limit of its range (greedy_groups_alike): the last fill that fitted and the
   * last that did not answer for the limits in theirs. */
  Alike fit = { 1, 0 }, unfit = { 1, 0 };
  for (int it = 0; it < 60 && hi - lo > 1e-9 * hi && !(known && *known >= 0); it++)
    {
      double mid = 0.5 * (lo + hi);
      gboolean fits;
      if (mid >= fit.lo && mid < fit.hi)
        fits = TRUE;
      else if (mid >= unfit.lo && mid < unfit.hi)
        fits = FALSE;
      else
        {
          Alike alike;
          fits = greedy_groups_alike (&us, 0, 0, mid, chunks, NULL, &alike) <= chunks;
          *(fits ? &fit : &unfit) = alike;
        }
      if (fits)
        hi = mid;
      else
        lo = mid;
    }
  if (known && *known >= 0)
    hi = *known;
  else if (known)
    *known = hi;
  memset (greedy, 0, sizeof greedy);
  used = balanced_groups (&us, hi, chunks, chunk_layers);
  used_greedy = greedy_groups (&us, 0, 0, hi, chunks, greedy);
  if (fills != NULL)
    {
      fills[0] = used;
      fills[1] = used_greedy;
      memcpy (fills + 2, chunk_layers, chunks * sizeof *fills);
      memcpy (fills + 2 + chunks, greedy, chunks * sizeof *fills);
    }
  return pick_split (&us, chunks, transformer, used, used_greedy, greedy, chunk_layers);
}

/* Two fills meet the bottleneck: the greedy one (GREEDY, its slack in the last chunks)
 * and the balanced one (CHUNK_LAYERS); the pipeline keeps the better (split_better), the
 * balanced one on a tie (lighter first stages, which hold the most micro-batches in
 * flight). Then the end chunks take the embedding and head back (TRANSFORMER). */
static gboolean
pick_split (const Units *us, guint chunks, gboolean transformer, guint used,
            guint used_greedy, const guint *greedy, guint *chunk_layers)
{
  if (used_greedy == chunks && used == chunks
      && split_better (us, greedy, chunk_layers, chunks))
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

/* The blocks of chunk C: the embedding and head ride on the end chunks and are left out,
 * since blocks set the time. */
static guint
chunk_blocks (const MpParallelConfig *cfg, guint c, gboolean transformer)
{
  guint chunks = cfg->pp * MAX (cfg->vpp, 1u);
  return cfg->chunk_layers[c] - (transformer ? (c == 0) + (c == chunks - 1) : 0);
}

/* The largest chunk's blocks over the average chunk's (1 when they split evenly). */
static double
largest_chunk_ratio (const MpParallelConfig *cfg, gboolean transformer)
{
  guint chunks = cfg->pp * MAX (cfg->vpp, 1u), largest = 0, total = 0;
  if (cfg->chunk_layers == NULL)
    return 1;
  for (guint c = 0; c < chunks; c++)
    {
      guint blocks = chunk_blocks (cfg, c, transformer);
      largest = MAX (largest, blocks);
      total += blocks;
    }
  return total ? (double) largest * chunks / total : 1;
}

/* Are the chunks of every interleaving round alike (the same blocks on every stage)? Then
 * the closed form's rounds are exact. */
static gboolean
rounds_alike (const MpParallelConfig *cfg, gboolean transformer)
{
  guint p = cfg->pp, chunks = p * MAX (cfg->vpp, 1u);
  if (cfg->chunk_layers == NULL)
    return TRUE;
  for (guint c = 0; c < chunks; c++)
    if (chunk_blocks (cfg, c, transformer) != chunk_blocks (cfg, c - c % p, transformer))
      return FALSE;
  return TRUE;
}

/* A pipeline schedule chunk by chunk, for M micro-batches: each stage runs its steps in
 * its program's order (pl_schedule_steps); a forward waits for the chunk before's, a
 * backward for the chunk after's (on the last chunk, for its own forward); a step that
 * hands its result on ends with the P2P send, which the sender waits out (the programs'
 * blocking send). FWD, BWD: per model chunk. With RS (per chunk, the reductions of its
 * gradient buckets that a backward issues; LAST[stage]: the last bucket's), each stage's
 * one data-parallel stream takes them as the backward makes them, in order: after every
 * backward under ZeRO-2, after each chunk's last micro-batch's under ZeRO 0/1 (DDP's
 * no_sync and Megatron's overlap_grad_reduce, program.c emit_backward), so that an
 * interleaved stage's chunks reduce in the drain while its lower chunks still run;
 * *DP_END: when the last such stream is done. Returns when the last step ends. */
static double
schedule_run (const MpParallelConfig *cfg, guint m, const double *fwd, const double *bwd,
              double p2p, const double *rs, const double *last, double *dp_end)
{
  gboolean every = cfg->zero >= 2;   /* reduces every micro-batch's gradients */
  MpParallelConfig c = *cfg;
  c.num_micro_batches = m;
  guint p = c.pp, chunks = p * mp_parallel_config_vpp (&c), left = 2 * m * chunks;
  g_autofree double *out = g_new (double, (gsize) 2 * chunks * m);  /* forward, backward */
  for (gsize k = 0; k < (gsize) 2 * chunks * m; k++)
    out[k] = -1;
  double *out_f = out, *out_b = out + (gsize) chunks * m, step_s = 0;
  g_autofree double *free_at = g_new0 (double, 2 * p);
  double *stream = free_at + p;
  g_autofree guint *next = g_new0 (guint, p);
  g_autofree PlSchedule *steps = g_new (PlSchedule, p);
  for (guint i = 0; i < p; i++)
    pl_schedule_of (&c, i, &steps[i]);
  /* the K-th forward of any stage (its K-th backward: the same micro-batch, its chunks
   * the other way round), looked up instead of made for each step */
  guint total = steps[0].total, v = steps[0].v;
  g_autofree PlStep *kth = g_new (PlStep, total);
  for (guint k = 0; k < total; k++)
    kth[k] = pl_schedule_kth (&steps[0], k, FALSE);
  for (gboolean moved = TRUE; left > 0 && moved;)
    {
      moved = FALSE;
      for (guint i = 0; i < p; i++)
        {
          while (next[i] < steps[i].n_steps)
            {
              guint k;
              gboolean backward = pl_schedule_nth (&steps[i], next[i], &k);
              const PlStep step = { backward, backward ? v - 1 - kth[k].v : kth[k].v,
                                    kth[k].mb }, *s = &step;
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
              double start = MAX (free_at[i], ready), dur = s->backward ? bwd[ch] : fwd[ch];
              double end = start + dur + (sends ? p2p : 0);
              /* The chunk's buckets close through its backward; the last at its end. */
              if (s->backward && rs && rs[ch] > 0 && (every || s->mb + 1 == m))
                stream[i] = MAX (MAX (stream[i], start) + rs[ch], start + dur + last[i]);
              (s->backward ? out_b : out_f)[at] = end;
              free_at[i] = end;
              step_s = MAX (step_s, end);
              left--;
              moved = TRUE;
              next[i]++;
            }
        }
    }
  g_warn_if_fail (left == 0);       /* Megatron's order never deadlocks */
  *dp_end = 0;
  for (guint i = 0; i < p; i++)
    *dp_end = MAX (*dp_end, stream[i]);
  return step_s;
}

/* schedule_run for the plan's micro-batches. Past a few rounds of the schedule (groups of
 * pp micro-batches when interleaved, else single ones) its steady state repeats, so a
 * long run is a short one's last round, again and again: both the step and the data-
 * parallel stream's lead over it, which grows each round where the stream is the
 * slower (ZeRO-2's, fed every round; ZeRO 0/1's only takes the drain's, the same lead
 * for any number of rounds). */
static double
schedule_pipe (const MpParallelConfig *cfg, const double *fwd, const double *bwd, double p2p,
               const double *rs, const double *last, double *dp_end)
{
  guint p = cfg->pp, m = cfg->num_micro_batches;
  guint round = cfg->schedule == MP_SCHEDULE_INTERLEAVED ? p : 1;
  if (m <= 4 * p)
    return schedule_run (cfg, m, fwd, bwd, p2p, rs, last, dp_end);
  double end_a, end_b;
  double a = schedule_run (cfg, 3 * p, fwd, bwd, p2p, rs, last, &end_a);
  double b = schedule_run (cfg, 3 * p + round, fwd, bwd, p2p, rs, last, &end_b);
  double rounds = (double) (m - 3 * p - round) / round;
  double step_s = b + rounds * (b - a);
  double grows = cfg->zero >= 2 ? (end_b - b) - (end_a - a) : 0;
  *dp_end = step_s + MAX (0.0, (end_b - b) + rounds * grows);
  return step_s;
}

typedef struct {
  double pipe_s;                   /* fill, steady state and drain */
  guint bottleneck;                /* the stage whose work sets the steady state */
  double pp_comm_s;
  double dp_end_s;                 /* ZeRO <= 2 timed chunk by chunk: when the last stage's
                                    * gradient reductions end (schedule_run); else -1 */
} Pipeline;

/* Is the closed form's pipeline timed chunk by chunk? Where an interleaving round's
 * chunks differ from stage to stage (stages wait on each other within the steady state
 * too), and for ZeRO-2 pipelines whose per-micro-batch reductions of a chunk take longer
 * than its backward (they fall behind the backwards that make them, most in the drain,
 * which runs backwards only), and for ZeRO 0/1 interleaved pipelines whose reduction
 * outlasts a micro-batch's backward (drain_reduces). chunk_by_chunk: whether the chunks'
 * times are needed to tell from the schedule alone; steps_needed, given them (CHUNK,
 * mp_cost_chunk_times). */
gboolean
pl_rounds_differ (const MpParallelConfig *cfg, gboolean transformer)
{
  return cfg->schedule == MP_SCHEDULE_INTERLEAVED && cfg->vpp > 1
         && !rounds_alike (cfg, transformer);
}

/* ZeRO 0/1 interleaved: does some stage's reduction outlast the window the stage's
 * totals give it (one micro-batch's backward through all its chunks, stage_dp_exposed)?
 * Then the drain that the chunks' reductions hide in sets what is left (schedule_run). */
static gboolean
drain_reduces (const MpParallelConfig *cfg, const MpStageTime *st)
{
  if (cfg->pp < 2 || cfg->zero > 1 || cfg->schedule != MP_SCHEDULE_INTERLEAVED
      || cfg->vpp < 2)
    return FALSE;
  for (guint i = 0; i < cfg->pp; i++)
    if (st[i].dp_reduce_s - st[i].bwd.total_s > st[i].dp_last_bucket_s)
      return TRUE;
  return FALSE;
}

static gboolean
steps_needed (const MpParallelConfig *cfg, gboolean transformer, const MpStageTime *st,
              const double *chunk)
{
  guint chunks = cfg->pp * mp_parallel_config_vpp (cfg);
  if (pl_rounds_differ (cfg, transformer) || drain_reduces (cfg, st))
    return TRUE;
  for (guint c = 0; c < chunks && cfg->zero == 2; c++)
    if (chunk[2 * chunks + c] > chunk[chunks + c])
      return TRUE;
  return FALSE;
}

static gboolean
chunk_by_chunk (const MpParallelConfig *cfg, gboolean transformer)
{
  if (cfg->pp < 2)
    return FALSE;
  if (pl_rounds_differ (cfg, transformer))
    return TRUE;
  return cfg->zero == 2 && (cfg->schedule == MP_SCHEDULE_INTERLEAVED
                            || cfg->schedule == MP_SCHEDULE_1F1B);
}

/* CHUNK: each chunk's forward, backward and gradient reductions (mp_cost_chunk_times) where
 * the schedule is timed chunk by chunk (chunk_by_chunk), else NULL. */
static void
pipeline_time (const MpParallelConfig *cfg, gboolean transformer, const MpStageTime *st,
               const double *chunk, Pipeline *out)
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
  out->dp_end_s = -1;
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
  if (chunk != NULL && steps_needed (cfg, transformer, st, chunk))
    {
      guint chunks = p * v;
      g_autofree double *last = g_new (double, p);
      for (guint i = 0; i < p; i++)
        last[i] = st[i].dp_last_bucket_s;
      out->pipe_s = schedule_pipe (cfg, chunk, chunk + chunks, p2p,
                                   cfg->zero <= 2 ? chunk + 2 * chunks : NULL, last,
                                   &out->dp_end_s);
      if (cfg->zero > 2)
        out->dp_end_s = -1;
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

/* Stage I's data-parallel time left after the pipeline ends. The stage drains ahead of
 * stage 0 by AHEAD, the backward work of the stages before it, which hides that much more
 * of a reduction that follows the last backward. */
static double
stage_dp_exposed (const MpParallelConfig *cfg, const MpStageTime *st, guint i,
                  const Pipeline *pipe, double ahead)
{
  const MpStageTime *s = &st[i];
  double after = s->dp_gather_s + s->tied_embedding_s;
  if (cfg->zero == 3)
    {
      /* ZeRO-3 (FSDP) gathers weights one layer ahead and reduce-scatters gradients
       * every micro-batch, all on the one data-parallel stream: each pass waits for
       * its first gather, for any gather longer than the layer it hides under, and
       * the stream's tail (zero3_wait_s); in total never less than the stream's
       * excess over the micro-batch's compute. */
      double m = cfg->num_micro_batches, per = s->dp_reduce_s / m;
      double c = s->fwd.total_s + s->bwd.total_s;
      return m * MAX (s->zero3_wait_s, s->zero3_gather_s + per - c) + after;
    }
  if (cfg->zero <= 2 && pipe->dp_end_s >= 0)
    /* timed chunk by chunk: what the streams have left when the pipeline ends */
    return MAX (0.0, pipe->dp_end_s - pipe->pipe_s) + after;
  /* ZeRO-2 reduce-scatters every micro-batch's gradients from its backward on: the
   * stream hides under the compute from the first backward to the end of the last.
   * Otherwise the reduction hides under the last backward. Either way the last
   * micro-batch's last bucket is left. */
  double window = cfg->zero == 2 ? backward_window (cfg, st, i, pipe->pipe_s, ahead)
                                 : s->bwd.total_s;
  double exposed = MAX (s->dp_last_bucket_s, s->dp_reduce_s - window);
  return MAX (0.0, exposed - ahead) + after;
}

/* Exposed data-parallel time: the worst stage's. */
static double
dp_exposed (const MpParallelConfig *cfg, const MpStageTime *st, const Pipeline *pipe)
{
  double worst = 0, ahead = 0;
  for (guint i = 0; i < cfg->pp; i++)
    {
      worst = MAX (worst, stage_dp_exposed (cfg, st, i, pipe, ahead));
      ahead += st[i].bwd.total_s;
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

/* Node group G's dense peak at DTYPE, or at its compute dtype when DTYPE is
 * MP_DTYPE_N (fp32 for a device without it). */
static double
group_peak (const MpCostContext *ctx, guint g, MpDtype dtype)
{
  const MpCostDevice *d = mp_cost_device (ctx, g);
  double peak = d->device->peak_flops[dtype < MP_DTYPE_N ? dtype : d->dtype];
  return peak > 0 ? peak : d->device->peak_flops[MP_DTYPE_FP32];
}

/* The peak of CFG's WORLD ranks' devices, averaged over the ranks: MFU is the model's
 * FLOP/s over the sum of the devices' peaks (a mixed cluster's against neither the
 * slowest nor the fastest alone). */
static double
mean_peak (const MpCostContext *ctx, const MpParallelConfig *cfg, guint world, MpDtype dtype)
{
  const MpCluster *cluster = mp_cost_context_cluster (ctx);
  if (cluster->n_groups == 1)
    return group_peak (ctx, 0, dtype);
  double sum = 0;
  if (cfg->placement == NULL)
    for (guint g = 0; g < cluster->n_groups; g++)
      {
        /* ranks on devices in order: group g holds the ranks in its device range */
        const MpNodeGroup *ng = &cluster->groups[g];
        guint64 end = ng->first_device + (guint64) ng->nodes * ng->devices_per_node;
        guint64 n = MIN (end, (guint64) world) - MIN ((guint64) ng->first_device, world);
        sum += n * group_peak (ctx, g, dtype);
      }
  else
    for (guint r = 0; r < world; r++)
      sum += group_peak (ctx, (guint) (mp_cluster_group_of (cluster, cfg->placement[r])
                                       - cluster->groups), dtype);
  return world > 0 ? sum / world : 0;
}

static void
fill_throughput (const MpCostContext *ctx, const MpParallelConfig *cfg, MpPlan *plan)
{
  const MpModel *model = mp_cost_context_model (ctx);
  double world = plan->world_size;
  double tokens = (double) plan->global_batch * MAX (model->seq_len, 1u);
  plan->tokens_per_s = tokens / plan->step_s;
  plan->tflops_per_gpu = mp_cost_step_flops (ctx, cfg, FALSE) / plan->step_s / world;
  plan->hw_tflops_per_gpu = mp_cost_step_flops (ctx, cfg, TRUE) / plan->step_s / world;
  /* MFU against the compute dtype's (bf16's) dense peak even when the linears run in fp8,
   * as torchtitan reports it (torchtitan/tools/utils.py, get_peak_flops: "hardcoded BF16
   * type peak flops") and as published MFUs are read; an fp8 plan also states its share
   * of the fp8 peak, the rate its linears could reach (a bf16 MFU near 100% is no
   * ceiling for them). */
  double peak = mean_peak (ctx, cfg, plan->world_size, MP_DTYPE_N);
  plan->mfu = peak > 0 ? plan->tflops_per_gpu / peak : 0;
  plan->hfu = peak > 0 ? plan->hw_tflops_per_gpu / peak : 0;
  double peak8 = cfg->fp8 ? mean_peak (ctx, cfg, plan->world_size, MP_DTYPE_FP8) : 0;
  plan->mfu_fp8 = peak8 > 0 ? plan->tflops_per_gpu / peak8 : 0;
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
  guint chunks = cfg->pp * mp_parallel_config_vpp (cfg);
  if (chunk_by_chunk (cfg, transformer))
    {
      chunk = g_new (double, 3 * chunks);
      mp_cost_chunk_times (ctx, cfg, st, chunk, chunk + chunks, chunk + 2 * chunks);
    }
  else
    {
      mp_cost_stage_times (ctx, cfg, st);
      if (drain_reduces (cfg, st))
        {
          chunk = g_new (double, 3 * chunks);
          mp_cost_chunk_times (ctx, cfg, st, chunk, chunk + chunks, chunk + 2 * chunks);
        }
    }
  Pipeline pipe;
  pipeline_time (cfg, transformer, st, chunk, &pipe);
  const MpStageTime *b = &st[pipe.bottleneck];
  double m = cfg->num_micro_batches;
  double *t = plan->time.t;
  t[MP_PHASE_COMPUTE] = m * (b->fwd.compute_s + b->fwd.recompute_s + b->bwd.compute_s
                             + b->bwd.recompute_s);
  t[MP_PHASE_TP] = m * (b->fwd.tp_comm_s + b->bwd.tp_comm_s);
  t[MP_PHASE_CP] = m * (b->fwd.cp_comm_s + b->bwd.cp_comm_s);
  t[MP_PHASE_EP] = m * (b->fwd.ep_comm_s + b->bwd.ep_comm_s);
  t[MP_PHASE_PP] = pipe.pp_comm_s;
  t[MP_PHASE_BUBBLE] = MAX (0.0, pipe.pipe_s - t[MP_PHASE_COMPUTE] - t[MP_PHASE_TP]
                                 - t[MP_PHASE_CP] - t[MP_PHASE_EP] - t[MP_PHASE_PP]);
  if (t[MP_PHASE_BUBBLE] < 1e-12 * pipe.pipe_s)
    t[MP_PHASE_BUBBLE] = 0;      /* rounding left by the subtraction, not a bubble */
  t[MP_PHASE_DP] = dp_exposed (cfg, st, &pipe);
  t[MP_PHASE_OPTIMIZER] = 0;
  for (guint i = 0; i < cfg->pp; i++)
    t[MP_PHASE_OPTIMIZER] = MAX (t[MP_PHASE_OPTIMIZER], st[i].optimizer_s);
  /* The pipeline's part first, then what follows it: the step's time line in order. */
  plan->step_s = t[MP_PHASE_COMPUTE] + t[MP_PHASE_TP] + t[MP_PHASE_CP] + t[MP_PHASE_EP]
                 + t[MP_PHASE_PP]
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
