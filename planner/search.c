/* search.c - every plan of a model on a cluster, exhaustively: enumerate, drop what does
 * not fit, rank by predicted step time, keep the best K and the best of each family.
 *
 * Loops run from the choices that change layer costs (tp, cp, ep, micro-batch, sequence
 * parallelism, recompute) to those that do not (pipeline split, schedule, ZeRO, rank
 * order), so per-layer costs and layer splits are computed once per outer choice. A plan's
 * memory is computed before its time, and its time only when it fits. Two bounds prune:
 * a floor on memory drops whole branches that cannot fit (before their layer costs), a
 * floor on step time the fitting plans that cannot rank (before their time); a config
 * whose schedule's memory floor shows it cannot fit, or whose step bound shows it cannot
 * rank, is dropped before its layer split and memory when that floor also shows it cannot
 * be a smallest footprint (cannot_keep). */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "planner/planner-private.h"
#include "common/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The limited space's sizes (MpSearchOptions.limited_space; the default is the whole). */
#define MAX_VPP 8

guint
mp_planner_max_micro_batch (const MpModel *model)
{
  /* 64 sequences, or 64k tokens for short ones (an MLP's "sequence" is one sample). */
  return MAX (64u, 65536u / MAX ((guint) model->seq_len, 1u));
}

/* The model's layer classes (layers of a class cost alike: mp_cost_layer_class_first):
 * the classes' first layers, and each layer's class as an index into them. */
typedef struct {
  guint n_reps;
  guint *reps;                 /* n_reps first layers */
  guint *slot;                 /* per layer: its class's index in REPS */
} LayerClasses;

static void
layer_classes_init (LayerClasses *lc, const MpCostContext *ctx)
{
  guint n = mp_cost_context_model (ctx)->n_layers;
  lc->n_reps = 0;
  lc->reps = g_new (guint, n);
  lc->slot = g_new (guint, n);
  for (guint l = 0; l < n; l++)
    {
      guint first = mp_cost_layer_class_first (ctx, l);
      if (first == l)
        lc->reps[lc->n_reps++] = l;
      lc->slot[l] = first == l ? lc->n_reps - 1 : lc->slot[first];
    }
}

static void
layer_classes_clear (LayerClasses *lc)
{
  g_clear_pointer (&lc->reps, g_free);
  g_clear_pointer (&lc->slot, g_free);
}

/* The stages of a config whose spans differ from the stage before's (the stage index
 * aside), kept by the groups' inputs (mp_cost_stage_spans' memo key): the configs of
 * one pipeline depth ask for the same ones under each micro-batch size, layer costs
 * choice and dispatcher (issue 15: deepseek-v3 on 1024 H100s asked 4.1M spans of 663k
 * kernel floors). Entries share tp, cp, dp, pp and zero_shard; others start it again. */
typedef struct {
  guint ep, etp;
  MpParallelDim order[MP_DIM_N];
  guint first, n;              /* in SpanRuns.spans */
} SpanEntry;

typedef struct {
  gboolean valid;
  guint tp, cp, dp, pp, zero_shard;
  GArray *entries;             /* SpanEntry */
  GArray *spans;               /* MpStageSpans */
} SpanRuns;

/* Step times that plans other shards keep reach (MpSearchOptions.share): a config whose
 * bound exceeds one cannot take that slot, whatever this shard has kept itself.
 * G_MAXDOUBLE: none known. ANY: a plan honouring the pins fits (the smallest-footprint
 * slots are closed). */
typedef struct {
  double top, family[MP_FAMILY_N], free;
  gboolean any;
} Cutoffs;

typedef struct {
  const MpCostContext *ctx;
  const MpModel *model;
  const MpCluster *cluster;
  const MpSearchOptions *opts;
  guint global_batch;
  guint top_k;
  gboolean counting;           /* only count configs: a first pass (progress), or another
                                * shard's choice */
  guint64 total;
  /* index: configs enumerated; pinned: honouring the pins, over every shard; accepted:
   * allowed by opts->accept, over every shard */
  guint64 index, accepted, pinned;
  MpSearchResult *res;
  double *layer_cost;          /* per model layer, for the current outer choice */
  double *split_limits;        /* its splits' bottlenecks by chunks (pl_split_costs) */
  double floor_s;              /* its kernels' time per micro-batch (kernel_floor); < 0:
                                * no bound */
  const double *layer_floor;   /* its layers' shares of it (uneven_bound), or NULL */
  double *layer_floor_buf;     /* where search_branch spreads them (n_layers) */
  LayerClasses classes;
  SpanRuns span_runs;          /* the kernel floors' stages (kernel_floor) */
  MpParallelConfig base;       /* the config every branch starts from (run) */
  GArray *class_floors;        /* double: each branch's kernel_floor by class (n_reps a
                                * branch, Branch.floor_at): not a block per branch */
  double uneven_s;             /* uneven_bound of the current split; < 0: not yet */
  guint *split;                /* chunk_layers for the current pp * vpp */
  const double *split_cost;    /* the layer costs, pp and vpp SPLIT was made for */
  guint split_pp, split_vpp;
  gboolean split_pending;      /* the current split (one kind of device) is made when a
                                * config first needs it (visit): most are pruned first */
  double floor_peak[4];        /* the current branch's memory floor at each ZeRO stage
                                * (branch_floor): its peak, < 0 not yet computed */
  double floor_excess[4];
  double sched_peak[16];       /* the same under the current schedule and vpp, by ZeRO
                                * stage, shard group (whole or HSDP's) and resharding:
                                * 4 z + 2 h + keep (mp_cost_memory_floor_scheduled;
                                * with_split resets it) */
  double sched_excess[16];
  guint64 outer;               /* layer-cost choices met so far (with_layer_costs) */
  GArray *branches;            /* Branch: those met, to search (search_branches) */
  GHashTable *layer_costs;     /* GBytes key (search_branch) -> double[n_groups * n_layers] */
  GHashTable *split_fills;     /* &split_limits[chunks] -> pl_split_costs' FILLS */
  gboolean dropped;            /* the current branch cannot fit (memory_drops): count it
                                * as pruned, cost nothing */
  gboolean have_memory;        /* MEMORY, FITS: the current config's in another rank order */
  double stage_peak;           /* a stage's total of the current config (stage_exceeds),
                                * its other rank orders' too; < 0: none costed */
  MpPlanMemory memory;
  gboolean fits;
  guint *pinned_split;         /* the pins' layer split (n_pinned chunks), or NULL */
  guint n_pinned;
  Cutoffs cut;                 /* the other shards' (share_cutoffs) */
} Search;

/* Does CFG honour the pins, its layer split included? */
static gboolean
honours (const Search *s, const MpParallelConfig *cfg)
{
  if (!mp_plan_pins_match (s->opts->pins, cfg))
    return FALSE;
  if (s->pinned_split == NULL)
    return TRUE;
  return cfg->pp * cfg->vpp == s->n_pinned && cfg->chunk_layers != NULL
         && memcmp (cfg->chunk_layers, s->pinned_split, s->n_pinned * sizeof (guint)) == 0;
}

/* ---- bookkeeping of the best plans ---------------------------------------------------- */

/* Inserts a copy of PLAN into the sorted array TOP if it is among the best K. */
void
pl_keep_top (GPtrArray *top, guint k, const MpPlan *plan)
{
  if (top->len >= k && mp_plan_compare (plan, g_ptr_array_index (top, top->len - 1)) >= 0)
    return;
  /* After the plans it does not beat (binary search: a test keeps every plan). */
  guint lo = 0, hi = top->len;
  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;
      if (mp_plan_compare (plan, g_ptr_array_index (top, mid)) < 0)
        hi = mid;
      else
        lo = mid + 1;
    }
  guint at = lo;
  g_ptr_array_insert (top, (gint) at, mp_plan_copy (plan));
  if (top->len > k)
    g_ptr_array_remove_index (top, top->len - 1);
}

/* Replaces *SLOT by a copy of PLAN when PLAN is better by step time. */
void
pl_keep_best (MpPlan **slot, const MpPlan *plan)
{
  if (*slot == NULL || mp_plan_compare (plan, *slot) < 0)
    {
      mp_plan_free (*slot);
      *slot = mp_plan_copy (plan);
    }
}

/* Replaces *SLOT by a copy of PLAN when PLAN needs less memory (ties: the config order,
 * so that any split of the search keeps the same one). */
static gboolean smaller (const MpPlan *slot, const MpPlan *plan);

void
pl_keep_smallest (MpPlan **slot, const MpPlan *plan)
{
  if (smaller (*slot, plan))
    {
      mp_plan_free (*slot);
      *slot = mp_plan_copy (plan);
    }
}

/* ---- the bounds ----------------------------------------------------------------------- */

/* Rank orders the search tries (loop_order): Megatron's (tp, cp, dp, pp), and pipeline
 * neighbours inside a node (tp, cp, pp, dp). */
static const MpParallelDim ORDER_MEGATRON[MP_DIM_N] = { MP_DIM_TP, MP_DIM_CP, MP_DIM_DP,
                                                        MP_DIM_PP };
static const MpParallelDim ORDER_PP_INNER[MP_DIM_N] = { MP_DIM_TP, MP_DIM_CP, MP_DIM_PP,
                                                        MP_DIM_DP };

/* Does the search try CFG in ORDER_PP_INNER too (loop_order)? With both data and
 * pipeline parallelism while tp leaves room in a node. */
static gboolean
pp_inner_tried (const MpCluster *cluster, const MpParallelConfig *cfg)
{
  return cfg->dp > 1 && cfg->pp > 1 && cfg->tp * cfg->cp < cluster->groups[0].devices_per_node;
}

/* Appends CFG's stages whose spans differ from the stage before's to OUT. */
static void
stage_runs (const MpCostContext *ctx, const MpParallelConfig *cfg, GArray *out)
{
  MpStageSpans last;
  for (guint st = 0; st < cfg->pp; st++)
    {
      /* stages alike (most interior ones) cost alike: one of them (their index is
       * no input of a layer's cost) */
      MpStageSpans spans;
      memset (&spans, 0, sizeof spans);
      mp_cost_stage_spans (ctx, cfg, st, &spans);
      last.stage = st;
      if (st > 0 && memcmp (&spans, &last, sizeof spans) == 0)
        continue;
      last = spans;
      g_array_append_val (out, spans);
    }
}

/* CFG's stage_runs from RUNS, made when missing: *N of them. */
static const MpStageSpans *
span_runs (SpanRuns *runs, const MpCostContext *ctx, const MpParallelConfig *cfg, guint *n)
{
  if (!runs->valid || runs->tp != cfg->tp || runs->cp != cfg->cp || runs->dp != cfg->dp
      || runs->pp != cfg->pp || runs->zero_shard != cfg->zero_shard)
    {
      g_array_set_size (runs->entries, 0);
      g_array_set_size (runs->spans, 0);
      runs->tp = cfg->tp, runs->cp = cfg->cp, runs->dp = cfg->dp, runs->pp = cfg->pp;
      runs->zero_shard = cfg->zero_shard;
      runs->valid = TRUE;
    }
  guint ep = MAX (cfg->ep, 1u), etp = mp_parallel_config_etp (cfg);
  for (guint i = 0; i < runs->entries->len; i++)
    {
      const SpanEntry *e = &g_array_index (runs->entries, SpanEntry, i);
      if (e->ep == ep && e->etp == etp && memcmp (e->order, cfg->order, sizeof e->order) == 0)
        {
          *n = e->n;
          return &g_array_index (runs->spans, MpStageSpans, e->first);
        }
    }
  SpanEntry e = { .ep = ep, .etp = etp, .first = runs->spans->len };
  memcpy (e.order, cfg->order, sizeof e.order);
  stage_runs (ctx, cfg, runs->spans);
  e.n = runs->spans->len - e.first;
  g_array_append_val (runs->entries, e);
  *n = e.n;
  return &g_array_index (runs->spans, MpStageSpans, e.first);
}

static void
span_runs_init (SpanRuns *runs)
{
  runs->valid = FALSE;
  runs->entries = g_array_new (FALSE, FALSE, sizeof (SpanEntry));
  runs->spans = g_array_new (FALSE, FALSE, sizeof (MpStageSpans));
}

static void
span_runs_clear (SpanRuns *runs)
{
  g_clear_pointer (&runs->entries, g_array_unref);
  g_clear_pointer (&runs->spans, g_array_unref);
}

/* mp_planner_kernel_floor, and each layer class's share of it into FLOORS (LC's n_reps):
 * a floor on a layer of that class's forward plus backward on any stage. RUNS: where the
 * stages' spans are kept (NULL: made here, each time). */
static double
kernel_floor (const MpCostContext *ctx, const LayerClasses *lc, SpanRuns *runs,
              const MpParallelConfig *cfg, double *floors)
{
  /* Each stage's forward plus backward (mp_cost_stage_times' c_i) is the sum of its
   * layers' costs (mp_cost_layer's total_s: kernels, recomputation, exposed collectives)
   * on its spans, less the recomputation the block method skips, so the stages' summed
   * work is at least each layer's cheapest over every stage in every order the config
   * may take (its own and the search's). The ZeRO-2/3 overlap penalties only add: ZeRO 0
   * is the cheapest. */
  const MpModel *model = mp_cost_context_model (ctx);
  if (mp_cost_context_cluster (ctx)->n_groups != 1)
    return -1;
  MpParallelConfig one = *cfg;
  one.chunk_layers = NULL;
  one.vpp = 1;
  one.zero = 0;
  one.schedule = one.pp > 1 ? MP_SCHEDULE_GPIPE : MP_SCHEDULE_NONE;
  gboolean block = cfg->recompute == MP_RECOMPUTE_FULL && cfg->recompute_num_layers > 0
                   && cfg->recompute_method == MP_RECOMPUTE_METHOD_BLOCK;
  const MpParallelDim *orders[] = { cfg->order, ORDER_MEGATRON, ORDER_PP_INNER };
  g_autoptr(GArray) own = NULL;
  if (runs == NULL || cfg->placement != NULL)
    own = g_array_new (FALSE, FALSE, sizeof (MpStageSpans));
  for (guint i = 0; i < lc->n_reps; i++)
    floors[i] = G_MAXDOUBLE;
  for (gsize o = 0; o < G_N_ELEMENTS (orders); o++)
    {
      /* each order once; pipeline neighbours inside a node only where they are tried */
      if ((o > 0 && memcmp (orders[o], cfg->order, sizeof one.order) == 0)
          || (o == 2 && !pp_inner_tried (mp_cost_context_cluster (ctx), cfg)))
        continue;
      memcpy (one.order, orders[o], sizeof one.order);
      guint n;
      const MpStageSpans *list;
      if (own != NULL)
        {
          g_array_set_size (own, 0);
          stage_runs (ctx, &one, own);
          list = (const MpStageSpans *) (void *) own->data, n = own->len;
        }
      else
        list = span_runs (runs, ctx, &one, &n);
      for (guint k = 0; k < n; k++)
        {
          MpPhaseCost f[lc->n_reps], b[lc->n_reps];
          mp_cost_layers (ctx, &one, &list[k], lc->n_reps, lc->reps, f, b);
          for (guint i = 0; i < lc->n_reps; i++)
            {
              double c = f[i].total_s + b[i].total_s - (block ? b[i].recompute_s : 0);
              floors[i] = MIN (floors[i], c);
            }
        }
    }
  double sum = 0;
  for (guint l = 0; l < model->n_layers; l++)
    sum += floors[lc->slot[l]];
  return sum;
}

double
mp_planner_kernel_floor (const MpCostContext *ctx, const MpParallelConfig *cfg)
{
  LayerClasses lc;
  layer_classes_init (&lc, ctx);
  double floors[lc.n_reps];
  double sum = kernel_floor (ctx, &lc, NULL, cfg, floors);
  layer_classes_clear (&lc);
  return sum;
}

/* Does every chunk of CFG's split hold as many blocks (the end chunks' embedding and
 * head aside)? Then the closed form times the interleaved rounds by its formula. */
static gboolean
even_chunks (const MpModel *model, const MpParallelConfig *cfg)
{
  guint chunks = cfg->pp * MAX (cfg->vpp, 1u);
  gboolean transformer = model->arch == MP_ARCH_TRANSFORMER;
  if (cfg->chunk_layers == NULL)
    return TRUE;
  for (guint c = 0; c < chunks; c++)
    {
      guint ends = transformer ? (c == 0) + (c == chunks - 1) : 0;
      guint first = transformer ? 1 + (chunks == 1) : 0;
      if (cfg->chunk_layers[c] - ends != cfg->chunk_layers[0] - first)
        return FALSE;
    }
  return TRUE;
}

double
mp_planner_step_bound (const MpModel *model, const MpParallelConfig *cfg, double floor_s)
{
  /* The closed form's pipeline (evaluate.c) with S >= floor_s the stages' summed work
   * and max_i c_i >= S / p; the step is at least the pipeline:
   *   none:         m S
   *   gpipe, 1f1b:  (m - 1) max c + S             >= S (m - 1 + p) / p
   *   interleaved:  m max c + (S - max c) r / v   >= S (m + (p - 1) / v) / p  (r >= 1)
   * Interleaved rounds that differ are timed step by step (evaluate.c's schedule_run),
   * where each stage still runs its m micro-batches' work one step after the other:
   *                                               >= S m / p.
   * Less a relative 1e-9 for the rounding of sums taken in another order. */
  double m = cfg->num_micro_batches, p = cfg->pp, v = MAX (cfg->vpp, 1u), bound;
  if (floor_s <= 0)
    return 0;
  switch (cfg->schedule)
    {
    case MP_SCHEDULE_NONE: bound = m * floor_s; break;
    case MP_SCHEDULE_INTERLEAVED:
      bound = floor_s * (even_chunks (model, cfg) ? m + (p - 1) / v : m) / p;
      break;
    case MP_SCHEDULE_GPIPE:
    case MP_SCHEDULE_1F1B:
    default: bound = floor_s * (m - 1 + p) / p; break;
    }
  return bound * (1 - 1e-9);
}

/* The step bound of every schedule, vpp and split of CFG's pipeline depth and
 * micro-batches (mp_planner_step_bound's least: m S without a pipeline or with one
 * micro-batch, else each stage's share of the work, S m / p). */
static double
depth_bound (const MpParallelConfig *cfg, double floor_s)
{
  double m = cfg->num_micro_batches, p = cfg->pp;
  if (floor_s <= 0)
    return 0;
  return (p == 1 || m == 1 ? m * floor_s : floor_s * m / p) * (1 - 1e-9);
}

/* Could a plan of step time >= BOUND replace *SLOT (NULL: empty) as the fastest? */
static gboolean
may_beat (const MpPlan *slot, double bound)
{
  return slot == NULL || bound <= slot->step_s;
}

/* Could CFG (of FAMILY; its memory known or not, not yet timed) be kept by step time: among the best K, its
 * family's best, or the best without the pins? FALSE only when its bound shows it cannot
 * (ties are kept by memory, so a bound equal to a kept time may). */
/* CFG's step bound; an interleaved split not yet made (split_pending) may be uneven, so
 * its bound is that of any split (depth_bound's S m / p). */
/* The step bound of CFG's split where its interleaved rounds differ (pl_rounds_differ,
 * timed step by step), from LAYERS (kernel_floor's share of each layer; chunk j's floor
 * f_j, stage i's c_i = the sum of its chunks'): stage i's first forward waits for
 * micro-batch 0 through chunks 0 .. i - 1, then it runs its m micro-batches' work one
 * step after the other, its last step the backward of its first chunk (chunk i), after
 * which that micro-batch's backward runs through chunks i - 1 .. 0. So the step is at
 * least m c_i + sum_{j < i} f_j for every i (0 where the rounds are alike). */
static double
uneven_bound (const MpModel *model, const MpParallelConfig *cfg, const double *layers)
{
  guint p = cfg->pp, chunks = p * MAX (cfg->vpp, 1u);
  if (layers == NULL || cfg->chunk_layers == NULL
      || !pl_rounds_differ (cfg, model->arch == MP_ARCH_TRANSFORMER))
    return 0;
  double stage[p], first[p], bound = 0, lead = 0;
  memset (stage, 0, sizeof stage);
  for (guint c = 0, l = 0; c < chunks; c++)
    {
      double f = 0;
      for (guint k = 0; k < cfg->chunk_layers[c]; k++)
        f += layers[l++];
      stage[c % p] += f;
      if (c < p)
        first[c] = f;
    }
  for (guint i = 0; i < p; i++)
    {
      bound = MAX (bound, cfg->num_micro_batches * stage[i] + lead);
      lead += first[i];
    }
  return bound * (1 - 1e-9);
}

static double
config_bound (const Search *s, const MpParallelConfig *cfg)
{
  if (cfg->schedule == MP_SCHEDULE_INTERLEAVED && cfg->chunk_layers == NULL)
    return depth_bound (cfg, s->floor_s);
  double bound = mp_planner_step_bound (s->model, cfg, s->floor_s);
  if (bound <= 0)
    return bound;
  /* once per split: its ZeRO stages and rank orders ask again (with_split resets it) */
  Search *memo = (Search *) s;
  if (memo->uneven_s < 0)
    memo->uneven_s = uneven_bound (s->model, cfg, s->layer_floor);
  return MAX (bound, s->uneven_s);
}

/* Could a plan of step time >= BOUND be among the best K, its FAMILY's best, or the best
 * without the pins: by what this shard keeps, and by the other shards' cutoffs. */
static gboolean
top_may (const Search *s, double bound)
{
  GPtrArray *top = s->res->plans;
  return (top->len < s->top_k || may_beat (g_ptr_array_index (top, top->len - 1), bound))
         && bound <= s->cut.top;
}

static gboolean
family_may (const Search *s, MpPlanFamily family, double bound)
{
  return may_beat (s->res->stats.family_best[family], bound)
         && bound <= s->cut.family[family];
}

static gboolean
free_may (const Search *s, double bound)
{
  return may_beat (s->res->stats.free_best, bound) && bound <= s->cut.free;
}

static gboolean
may_rank (const Search *s, const MpParallelConfig *cfg, MpPlanFamily family)
{
  double bound = config_bound (s, cfg);
  if (bound <= 0)
    return TRUE;
  gboolean top_open = top_may (s, bound);
  if (family_may (s, family, bound))
    return TRUE;
  if (s->opts->pins == NULL)
    return top_open;
  if (!cfg->fp8 && free_may (s, bound))
    return TRUE;
  return top_open && honours (s, cfg);
}

/* Would PLAN replace *SLOT as the smallest footprint (pl_keep_smallest's order)? */
static gboolean
smaller (const MpPlan *slot, const MpPlan *plan)
{
  return slot == NULL || plan->memory.peak_bytes < slot->memory.peak_bytes
         || (plan->memory.peak_bytes == slot->memory.peak_bytes
             && mp_parallel_config_compare (&plan->cfg, &slot->cfg) < 0);
}

/* The output reads a smallest-footprint slot only while nothing it stands in for fits:
 * the smallest while no plan is kept (nothing fits: "no plan fits"), a family's while
 * that family has no best ("does not fit"). Once one fits the slot is closed for good:
 * it bounds no config and keeps none, and pl_settle_smallest clears it. */
static gboolean
smallest_open (const MpSearchResult *res)
{
  return res->plans->len == 0;
}

static gboolean
family_smallest_open (const MpSearchResult *res, MpPlanFamily family)
{
  return res->stats.family_best[family] == NULL;
}

/* The same in a search: closed too once another shard keeps such a plan. */
static gboolean
search_smallest_open (const Search *s)
{
  return smallest_open (s->res) && !s->cut.any;
}

static gboolean
family_slot_open (const Search *s, MpPlanFamily family)
{
  return family_smallest_open (s->res, family) && s->cut.family[family] == G_MAXDOUBLE;
}

/* Could a plan of peak PEAK or more still take SLOT (NULL: empty), OPEN or closed? Ties
 * may (they are kept by the config order). */
static gboolean
may_take (const MpPlan *slot, gboolean open, double peak)
{
  return open && (slot == NULL || !(peak > slot->memory.peak_bytes));
}

void
pl_settle_smallest (MpSearchResult *res)
{
  MpSearchStats *st = &res->stats;
  if (!smallest_open (res))
    g_clear_pointer (&st->smallest, mp_plan_free);
  for (guint f = 0; f < MP_FAMILY_N; f++)
    if (!family_smallest_open (res, (MpPlanFamily) f))
      g_clear_pointer (&st->family_smallest[f], mp_plan_free);
}

/* The memory floor of every config of the branch CFG heads at ZeRO stage ZERO (its
 * schedules, vpps, splits, shard groups and rank orders): its excess over the device,
 * *PEAK its peak. Computed once per branch on one kind of device (search_branch resets
 * it); on several, the rank order moves stages to other devices, so each time. */
static double
branch_floor (Search *s, const MpParallelConfig *cfg, guint zero, double *peak)
{
  if (s->cluster->n_groups == 1 && s->floor_peak[zero] >= 0)
    {
      *peak = s->floor_peak[zero];
      return s->floor_excess[zero];
    }
  MpParallelConfig probe = *cfg;
  probe.chunk_layers = NULL;
  probe.vpp = 1;
  /* loop_schedule's: the family tells only this one apart from the pipelined ones */
  probe.schedule = cfg->pp == 1 || cfg->num_micro_batches == 1 ? MP_SCHEDULE_NONE
                                                                : MP_SCHEDULE_GPIPE;
  probe.zero = zero;
  probe.zero_shard = 0;                 /* HSDP and kept weights only add memory */
  probe.no_reshard = FALSE;
  double excess = mp_cost_memory_floor (s->ctx, &probe, peak);
  s->floor_peak[zero] = *peak;
  s->floor_excess[zero] = excess;
  return excess;
}

/* Can no config of the branch CFG heads fit, nor be kept as a smallest footprint
 * (pl_keep_smallest's slots: the smallest, its family's)? By the memory floor at CFG's
 * ZeRO stage, or with ANY_ZERO at ZeRO-3's, which bounds every stage. */
static gboolean
memory_drops (Search *s, const MpParallelConfig *cfg, gboolean any_zero)
{
  if (s->opts->no_bounds || s->counting)
    return FALSE;
  const MpSearchStats *st = &s->res->stats;
  guint top = cfg->dp * cfg->cp > 1 ? 3 : 0, zero = any_zero ? top : cfg->zero;
  double peak, excess = branch_floor (s, cfg, zero, &peak);
  if (!(excess > 0) || may_take (st->smallest, search_smallest_open (s), peak))
    return FALSE;
  /* the families of its ZeRO stages: they differ only between 0-1 and 2-3 */
  MpParallelConfig probe = *cfg;
  probe.schedule = cfg->pp == 1 || cfg->num_micro_batches == 1 ? MP_SCHEDULE_NONE
                                                                : MP_SCHEDULE_GPIPE;
  for (guint z = any_zero ? 0 : zero; z <= zero; z += 2)
    {
      probe.zero = z;
      MpPlanFamily f = mp_plan_family_of (&probe);
      if (may_take (st->family_smallest[f], family_slot_open (s, f), peak))
        return FALSE;
    }
  return TRUE;
}

/* Can no config of the branch CFG heads (its schedules, vpps, splits, ZeRO stages and
 * rank orders; STAGED: CFG's schedule and split, every ZeRO stage and order) be kept?
 * Its step time is at least BOUND (a step bound on the branch), so it could not rank;
 * its memory at least the ZeRO-3 floor's peak, so it could not be a smallest footprint.
 * Then the branch is pruned whole, its memory not costed. */
static gboolean
branch_drops (Search *s, const MpParallelConfig *cfg, double bound, gboolean staged)
{
  if (s->opts->no_bounds || s->counting || bound <= 0)
    return FALSE;
  const MpSearchStats *st = &s->res->stats;
  if (top_may (s, bound) || (s->opts->pins != NULL && !cfg->fp8 && free_may (s, bound)))
    return FALSE;
  MpParallelConfig probe = *cfg;
  double peak;
  branch_floor (s, cfg, cfg->dp * cfg->cp > 1 ? 3 : 0, &peak);
  if (may_take (st->smallest, search_smallest_open (s), peak))
    return FALSE;
  /* the families its configs may fall in: by the schedule (none or pipelined) and the
   * ZeRO stage (0-1 or 2-3) */
  for (guint z = 0; z <= 2; z += 2)
    for (guint pipe = 0; pipe <= 1; pipe++)
      {
        probe.zero = z;
        probe.schedule = staged ? cfg->schedule
                                : pipe ? MP_SCHEDULE_GPIPE : MP_SCHEDULE_NONE;
        MpPlanFamily f = mp_plan_family_of (&probe);
        if (family_may (s, f, bound)
            || may_take (st->family_smallest[f], family_slot_open (s, f), peak))
          return FALSE;
      }
  return TRUE;
}

/* PLAN's memory. The rank order moves no tensor, and on a cluster of one device type it
 * moves no stage to another device either: the orders of one config share it. */
static void
plan_memory (Search *s, MpPlan *plan)
{
  if (s->have_memory && s->cluster->n_groups == 1)
    {
      plan->memory = s->memory;
      plan->fits = s->fits;
      return;
    }
  pl_plan_memory (s->ctx, plan);
  s->memory = plan->memory;
  s->fits = plan->fits;
  s->have_memory = TRUE;
}

/* Could CFG, its memory not yet costed, be kept neither by step time (may_rank) nor as a
 * smallest footprint (its branch's memory floor above the smallest's and its family's)?
 * Then it is pruned before its memory and split are made. */
static gboolean
cannot_keep (Search *s, const MpParallelConfig *cfg)
{
  const MpSearchStats *st = &s->res->stats;
  MpPlanFamily family = mp_plan_family_of (cfg);
  const MpPlan *least = st->family_smallest[family];
  gboolean open = search_smallest_open (s), family_open = family_slot_open (s, family);
  if (s->opts->no_bounds || (open && st->smallest == NULL) || (family_open && least == NULL))
    return FALSE;
  gboolean rank = s->floor_s <= 0 || may_rank (s, cfg, family);
  double peak;
  if (!rank)
    {
      branch_floor (s, cfg, cfg->zero, &peak);
      if (!may_take (st->smallest, open, peak) && !may_take (least, family_open, peak))
        return TRUE;
    }
  /* The floor of its schedule and vpp: a plan that cannot fit cannot rank either. */
  guint z = 4 * cfg->zero + 2 * (cfg->zero_shard > 0) + cfg->no_reshard;
  if (s->sched_peak[z] < 0 || s->cluster->n_groups > 1)
    {
      MpParallelConfig probe = *cfg;
      /* the pinned split, whose stages may hold no block; else any the search makes */
      probe.chunk_layers = cfg->chunk_layers == s->pinned_split ? s->pinned_split : NULL;
      s->sched_excess[z] = mp_cost_memory_floor_scheduled (s->ctx, &probe, &s->sched_peak[z]);
    }
  if (rank && !(s->sched_excess[z] > 0))
    return FALSE;
  peak = s->sched_peak[z];
  return !may_take (st->smallest, open, peak) && !may_take (least, family_open, peak);
}

/* Makes CFG's split for the current layer costs (the one made last when it was for the
 * same costs and chunks: GPipe and 1F1B split alike; on one kind of device only, where
 * the stages' devices do not follow the rank layout). */
static gboolean
make_split (Search *s, MpParallelConfig *cfg)
{
  if (s->split_cost != s->layer_cost || s->split_pp != cfg->pp || s->split_vpp != cfg->vpp
      || s->cluster->n_groups > 1)
    {
      s->split_cost = NULL;
      /* the fills of these costs and chunks (pl_split_costs), kept under the address of
       * their bottleneck: one of each for the search */
      guint chunks = cfg->pp * MAX (cfg->vpp, 1u), *fills = NULL;
      if (s->cluster->n_groups == 1 && chunks <= s->model->n_layers)
        {
          double *at = &s->split_limits[chunks];
          fills = g_hash_table_lookup (s->split_fills, at);
          if (fills == NULL)
            {
              fills = g_new (guint, 2 + 2 * (gsize) chunks);
              fills[0] = PL_FILLS_NONE;
              g_hash_table_insert (s->split_fills, at, fills);
            }
        }
      if (!pl_split_costs (s->ctx, cfg, s->layer_cost, s->split_limits, fills, s->split))
        return FALSE;
      s->split_cost = s->layer_cost;
      s->split_pp = cfg->pp;
      s->split_vpp = cfg->vpp;
    }
  cfg->chunk_layers = s->split;
  return TRUE;
}

/* Is CFG, its memory not yet costed, one that its bound shows cannot rank while a stage
 * of it is larger than every smallest-footprint slot it could take (pl_keep_smallest's:
 * the smallest, and its family's when a framework RUNS it)? On one kind of device a
 * plan's peak is its largest stage's total (mp_cost_memory's binding stage), so one such
 * stage shows that nothing keeps it: its other stages are not costed. Stage 0 (the most
 * micro-batches in flight) and the last (the head) are tried; the rest are left to
 * plan_memory. */
static gboolean
stage_exceeds (Search *s, const MpParallelConfig *cfg)
{
  const MpSearchStats *st = &s->res->stats;
  MpPlanFamily family = mp_plan_family_of (cfg);
  const MpPlan *least = st->family_smallest[family];
  gboolean open = search_smallest_open (s);
  if (s->opts->no_bounds || s->cluster->n_groups > 1 || s->have_memory
      || (open && st->smallest == NULL) || may_rank (s, cfg, family))
    return FALSE;
  gboolean runs = family_slot_open (s, family)
                  && mp_framework_runners (s->model, cfg) != 0;
  if (runs && least == NULL)
    return FALSE;
  /* the largest open slot's peak; none open: nothing keeps it, no stage need be costed */
  double limit = MAX (open ? st->smallest->memory.peak_bytes : -1,
                      runs ? least->memory.peak_bytes : -1);
  if (limit < 0)
    return TRUE;
  for (guint k = 0; k < MIN (cfg->pp, 2u) && !(s->stage_peak > limit); k++)
    {
      MpStageMemory mem;
      mp_cost_stage_memory (s->ctx, cfg, k ? cfg->pp - 1 : 0, &mem);
      s->stage_peak = MAX (s->stage_peak, mem.total_bytes);
    }
  return s->stage_peak > limit;
}

/* One complete config: evaluate it if it is this shard's, and keep what is worth it. */
static void
visit (Search *s, MpParallelConfig *cfg)
{
  guint64 i = s->index++;
  if (s->opts->accept != NULL && !s->opts->accept (cfg, s->opts->accept_data))
    return;
  s->accepted++;
  /* Counted on every shard (another shard's configs too, with_layer_costs), so that each
   * knows whether any config honours them. */
  if (s->opts->pins != NULL && honours (s, cfg))
    s->pinned++;
  if (s->counting)
    return;
  MpSearchStats *st = &s->res->stats;
  if (s->dropped)
    {
      st->pruned++;
      return;
    }
  if (s->opts->progress && (i & 4095) == 0)
    s->opts->progress (i, s->total, s->opts->progress_data);
  if (cannot_keep (s, cfg))
    {
      st->pruned++;
      return;
    }
  if (s->split_pending)
    {
      s->split_pending = FALSE;
      /* with_split checked pl_split_costs' condition (chunks <= layers) */
      if (!make_split (s, cfg))
        g_return_if_reached ();
      /* an even interleaved split's bound is tighter */
      if (cfg->schedule == MP_SCHEDULE_INTERLEAVED && cannot_keep (s, cfg))
        {
          st->pruned++;
          return;
        }
    }

  if (stage_exceeds (s, cfg))
    {
      st->pruned++;
      return;
    }
  g_autoptr(MpPlan) plan = g_new0 (MpPlan, 1);
  pl_plan_init (plan, cfg, cfg->chunk_layers, s->global_batch);
  plan_memory (s, plan);
  /* Timed before it is kept, so that a kept plan has its figures whichever way it is
   * kept (merge.c times every fitting plan it unpacks); not timed when a bound shows
   * that only a smallest-footprint slot could keep it, and none does. */
  gboolean open = search_smallest_open (s);
  gboolean family_open = family_slot_open (s, plan->family);
  if (plan->fits && !s->opts->no_bounds && !may_rank (s, cfg, plan->family)
      && !(open && smaller (st->smallest, plan))
      && !(family_open && smaller (st->family_smallest[plan->family], plan)))
    {
      st->pruned++;
      st->feasible++;
      return;
    }
  st->evaluated++;
  if (plan->fits)
    pl_plan_time (s->ctx, plan);
  if (open)
    pl_keep_smallest (&st->smallest, plan);
  /* A family's plans are those some framework runs (its label names them). */
  gboolean runs = mp_framework_runners (s->model, cfg) != 0;
  if (runs && family_open)
    pl_keep_smallest (&st->family_smallest[plan->family], plan);
  if (!plan->fits)
    return;
  st->feasible++;
  if (runs)
    pl_keep_best (&st->family_best[plan->family], plan);
  if (s->opts->pins == NULL)
    {
      pl_keep_top (s->res->plans, s->top_k, plan);
      return;
    }
  /* The best plan without the pins is one the search would make without them: bf16. */
  if (!cfg->fp8)
    pl_keep_best (&st->free_best, plan);
  if (honours (s, cfg))
    pl_keep_top (s->res->plans, s->top_k, plan);
}

/* ---- the loops, innermost first -------------------------------------------------------- */

/* Counting with nothing to ask of each config (accept, pins): the configs are counted in
 * bulk (loop_zero, loop_order). */
static gboolean
counts_only (const Search *s)
{
  return s->counting && s->opts->accept == NULL && s->opts->pins == NULL;
}

/* On a cluster with NVLink domains, a tensor- or expert-parallel group that leaves its
 * domain would run its per-layer collectives over the network, and on a heterogeneous
 * one a group over two kinds of device at the slower's pace: such a config is visited
 * only when the user pins that dimension (tp, ep). */
static gboolean
in_domains (const Search *s, const MpParallelConfig *cfg)
{
  if (s->cluster->nodes_per_domain <= 1 && !s->cluster->heterogeneous)
    return TRUE;
  gboolean tp = !mp_plan_pins_get (s->opts->pins, "tp", NULL);
  gboolean ep = !mp_plan_pins_get (s->opts->pins, "ep", NULL);
  if (s->cluster->nodes_per_domain > 1 && !mp_cost_groups_in_domains (s->ctx, cfg, tp, ep))
    return FALSE;
  return !s->cluster->heterogeneous || mp_cost_groups_one_device (s->ctx, cfg, tp, ep);
}

static void
visit_in_domains (Search *s, MpParallelConfig *cfg)
{
  if (in_domains (s, cfg))
    visit (s, cfg);
}

/* Rank orders worth trying: Megatron's (tp, cp, dp, pp), and with both data and pipeline
 * parallelism while tp leaves room in a node, pipeline neighbours inside the node. */
static void
loop_order (Search *s, MpParallelConfig *cfg)
{
  const MpParallelDim *const orders[] = { ORDER_MEGATRON, ORDER_PP_INNER };
  s->have_memory = FALSE;
  s->stage_peak = -1;
  for (guint o = 0; o < (pp_inner_tried (s->cluster, cfg) ? 2u : 1u); o++)
    {
      memcpy (cfg->order, orders[o], sizeof ORDER_MEGATRON);
      /* a counting pass with nothing to ask of each config counts them here (loop_zero) */
      if (counts_only (s))
        s->index += in_domains (s, cfg);
      else
        visit_in_domains (s, cfg);
    }
  memcpy (cfg->order, ORDER_MEGATRON, sizeof ORDER_MEGATRON);
  s->have_memory = FALSE;
}

/* HSDP (fsdp17): a shard group of a node's worth of replicas (the gradient group's ranks
 * are tp apart), or the pinned zero_shard, when that divides dp * cp and leaves at least
 * two groups; else 0. */
static guint
node_shard (const Search *s, const MpParallelConfig *cfg)
{
  guint per_node = s->cluster->groups[0].devices_per_node, dpcp = cfg->dp * cfg->cp;
  guint shard = per_node % cfg->tp == 0 ? per_node / cfg->tp : 0;
  mp_plan_pins_get (s->opts->pins, "zero_shard", &shard);    /* a pinned size instead */
  return shard >= 2 && shard < dpcp && dpcp % shard == 0 && cfg->ep <= 1 ? shard : 0;
}

/* The ZeRO stage, then (ZeRO >= 1) whole or node-sized shard groups and (ZeRO-3) both
 * ways of reshard_after_forward. */
static void
loop_zero (Search *s, MpParallelConfig *cfg)
{
  guint max_zero = cfg->dp * cfg->cp > 1 ? 3 : 0, hsdp = node_shard (s, cfg);
  if (counts_only (s))
    {
      /* Only the count, the same for every variant (the orders' do not depend on the
       * ZeRO stage): ZeRO-0, then per stage 1-3 whole and (hsdp) node shard groups,
       * ZeRO-3 with both reshardings: 1 + 4 h. */
      guint64 before = s->index, variants = max_zero ? 1 + 4 * (hsdp ? 2 : 1) : 1;
      loop_order (s, cfg);
      s->index = before + (s->index - before) * variants;
      s->accepted += s->index - before;
      return;
    }
  gboolean dropped = s->dropped;
  for (guint z = 0; z <= max_zero; z++)
    {
      /* HSDP and kept weights only add memory: plain sharding's floor bounds them. */
      cfg->zero = z;
      cfg->zero_shard = 0;
      cfg->no_reshard = FALSE;
      s->dropped = dropped || memory_drops (s, cfg, FALSE);
      for (guint h = 0; h < (z >= 1 && hsdp ? 2u : 1u); h++)
        for (guint keep = 0; keep < (z == 3 ? 2u : 1u); keep++)
          {
            cfg->zero_shard = h ? hsdp : 0;
            cfg->no_reshard = keep;
            loop_order (s, cfg);
          }
    }
  s->dropped = dropped;
  cfg->zero = 0;
  cfg->zero_shard = 0;
  cfg->no_reshard = FALSE;
}

static guint
n_blocks (const MpModel *m)
{
  return m->arch == MP_ARCH_TRANSFORMER ? (guint) m->n_blocks : m->n_layers;
}

/* Splits the layers over pp * vpp chunks for the current costs, checks the config, then
 * goes on. */
static void
with_split (Search *s, MpParallelConfig *cfg)
{
  guint chunks = cfg->pp * cfg->vpp;
  cfg->chunk_layers = NULL;
  if (s->pinned_split != NULL && chunks == s->n_pinned)
    cfg->chunk_layers = s->pinned_split;   /* the split the user pinned */
  else if (!s->counting && !s->dropped)
    {
      if (chunks > s->model->n_layers)
        return;                            /* pl_split_costs cannot split them */
      /* On one kind of device the split waits until a config needs it (visit), where the
       * config check passes without one as with it: a block or more a chunk. */
      if (s->cluster->n_groups == 1 && chunks <= n_blocks (s->model))
        s->split_pending = TRUE;
      else if (!make_split (s, cfg))
        return;
    }
  for (guint z = 0; z < G_N_ELEMENTS (s->sched_peak); z++)
    s->sched_peak[z] = -1;
  s->uneven_s = -1;
  if (mp_parallel_config_check (cfg, s->model, s->cluster, NULL))
    {
      /* this schedule bounds every ZeRO stage and rank order of it */
      gboolean dropped = s->dropped;
      if (!dropped && (cfg->chunk_layers != NULL || s->split_pending))
        s->dropped = branch_drops (s, cfg, config_bound (s, cfg), TRUE);
      loop_zero (s, cfg);
      s->dropped = dropped;
    }
  s->split_pending = FALSE;
  cfg->chunk_layers = NULL;
}


static void
loop_schedule (Search *s, MpParallelConfig *cfg)
{
  cfg->vpp = 1;
  if (cfg->pp == 1 || cfg->num_micro_batches == 1)
    {
      /* No pipeline, or one micro-batch: plain layer placement, nothing to overlap. */
      cfg->schedule = MP_SCHEDULE_NONE;
      with_split (s, cfg);
      return;
    }
  cfg->schedule = MP_SCHEDULE_GPIPE;
  with_split (s, cfg);
  cfg->schedule = MP_SCHEDULE_1F1B;
  with_split (s, cfg);
  /* Megatron's interleaved schedule needs the micro-batches to be a multiple of pp. Every
   * vpp that leaves each chunk a block is tried, chunks split unevenly where the blocks
   * do not divide (pl_split_costs); a pinned vpp only. */
  guint least = 2, most = n_blocks (s->model) / cfg->pp;
  if (mp_plan_pins_get (s->opts->pins, "vpp", &most))
    least = most;
  if (cfg->num_micro_batches % cfg->pp == 0)
    for (guint v = MAX (least, 2u); v <= most; v++)
      if (least == most || !s->opts->limited_space
          || (v <= MAX_VPP && (n_blocks (s->model) / cfg->pp) % v == 0))
      {
        cfg->schedule = MP_SCHEDULE_INTERLEAVED;
        cfg->vpp = v;
        with_split (s, cfg);
      }
  cfg->vpp = 1;
}

/* A layer-cost choice (tp, cp, ep, sp, recompute, pipeline depth, micro-batch) met by
 * the enumeration, searched later in the order of its step bound (best first), so that
 * the fastest plans are kept early and prune the rest. */
typedef struct {
  /* the config's fields the loops above with_layer_costs set (the rest: Search.base) */
  guint32 tp, cp, pp, dp, ep, etp, micro_batch_size, num_micro_batches;
  guint32 recompute_num_layers, recompute_modules;
  guint8 sequence_parallel, recompute, recompute_method, dispatcher, fp8;
  guint64 outer;               /* its place in the enumeration (the sharding's) */
  double floor_s, bound;       /* kernel_floor and depth_bound; bound G_MAXDOUBLE: its
                                * memory floor shows nothing fits */
  guint64 floor_at;            /* kernel_floor's classes in Search.class_floors, with
                                * floor_s; NO_FLOOR: not computed */
  double floor_peak, floor_excess;   /* branch_floor's at its top ZeRO stage; peak < 0:
                                      * not computed */
  guint64 counted, accepted;   /* the configs it counts and accepts when dropped
                                * (search_branch); NOT_COUNTED: not yet */
} Branch;

/* A branch is kept small (a million of them on deepseek-v3 / 1024 H100s): CFG's own
 * choices only, the rest of the config being the search's base. */
static void
branch_pack (Branch *b, const MpParallelConfig *cfg)
{
  b->tp = cfg->tp, b->cp = cfg->cp, b->pp = cfg->pp, b->dp = cfg->dp;
  b->ep = cfg->ep, b->etp = cfg->etp;
  b->micro_batch_size = cfg->micro_batch_size, b->num_micro_batches = cfg->num_micro_batches;
  b->recompute_num_layers = cfg->recompute_num_layers;
  b->recompute_modules = cfg->recompute_modules;
  b->sequence_parallel = (guint8) cfg->sequence_parallel, b->recompute = (guint8) cfg->recompute;
  b->recompute_method = (guint8) cfg->recompute_method;
  b->dispatcher = (guint8) cfg->dispatcher, b->fp8 = (guint8) cfg->fp8;
}

static void
branch_unpack (const Branch *b, const MpParallelConfig *base, MpParallelConfig *cfg)
{
  *cfg = *base;
  cfg->tp = b->tp, cfg->cp = b->cp, cfg->pp = b->pp, cfg->dp = b->dp;
  cfg->ep = b->ep, cfg->etp = b->etp;
  cfg->micro_batch_size = b->micro_batch_size, cfg->num_micro_batches = b->num_micro_batches;
  cfg->recompute_num_layers = b->recompute_num_layers;
  cfg->recompute_modules = b->recompute_modules;
  cfg->sequence_parallel = b->sequence_parallel, cfg->recompute = (MpRecompute) b->recompute;
  cfg->recompute_method = (MpRecomputeMethod) b->recompute_method;
  cfg->dispatcher = (MpDispatcher) b->dispatcher, cfg->fp8 = b->fp8;
}

#define NO_FLOOR G_MAXUINT64
#define NOT_COUNTED G_MAXUINT64

/* A branch's place in the search order: by bound, then as met (outer: each its own). */
typedef struct {
  double bound;
  guint64 outer;
  guint index;                 /* in Search.branches */
} BranchOrder;

static int
branch_cmp (const void *a, const void *b)
{
  const BranchOrder *x = a, *y = b;
  if (x->bound != y->bound)
    return x->bound < y->bound ? -1 : 1;
  return x->outer < y->outer ? -1 : x->outer > y->outer;
}

/* A key that orders as bound X does (-0 as +0): its bits, the sign's flipped for a
 * positive value, all of them for a negative one. */
static guint64
bound_bits (double x)
{
  guint64 u;
  x = x == 0 ? 0 : x;
  memcpy (&u, &x, sizeof u);
  return u >> 63 ? ~u : u | G_GUINT64_CONSTANT (1) << 63;
}

/* Sorts ORDER[N] as qsort with branch_cmp would: by bound, then as met. The branches come
 * as met (outer rising), so a stable sort by bound alone does it: a least-significant
 * digit radix sort on bound_bits, a byte a pass, skipping the bytes that all keys share
 * (deepseek-v3 on 1024 H100s: 943k branches, which qsort's merge sort took 0.9 G
 * instructions to order). Out of that order, or with a NaN bound, qsort. */
static void
sort_branches (BranchOrder *order, guint n)
{
  gboolean radix = TRUE;
  for (guint i = 0; i < n && radix; i++)
    radix = !isnan (order[i].bound) && (i == 0 || order[i - 1].outer < order[i].outer);
  if (!radix)
    {
      qsort (order, n, sizeof *order, branch_cmp);
      return;
    }
  g_autofree guint64 *keys = g_new (guint64, 2 * (gsize) MAX (n, 1u));
  g_autofree BranchOrder *spare = g_new (BranchOrder, MAX (n, 1u));
  guint64 *key = keys, *key_to = keys + n;
  BranchOrder *from = order, *to = spare;
  for (guint i = 0; i < n; i++)
    key[i] = bound_bits (order[i].bound);
  for (guint shift = 0; n > 1 && shift < 64; shift += 8)
    {
      guint at[256] = { 0 };
      for (guint i = 0; i < n; i++)
        at[(key[i] >> shift) & 0xff]++;
      if (at[(key[0] >> shift) & 0xff] == n)
        continue;
      for (guint d = 0, sum = 0; d < 256; d++)
        {
          guint c = at[d];
          at[d] = sum;
          sum += c;
        }
      for (guint i = 0; i < n; i++)
        {
          guint j = at[(key[i] >> shift) & 0xff]++;
          key_to[j] = key[i];
          to[j] = from[i];
        }
      guint64 *k = key;
      key = key_to, key_to = k;
      BranchOrder *b = from;
      from = to, to = b;
    }
  if (from != order)
    memcpy (order, from, n * sizeof *order);
}

/* The shard of the layer-cost choice met O-th: dealt back and forth in the order met (0 1
 * 1 0 0 1 ... on two), which spreads the costly choices evenly where they come in runs
 * (choices met in turn are alike), without counting them first. gpt3-175b on 1024 A100s
 * in the whole space: the whole search's per-choice CPU time so dealt splits 0.501 :
 * 0.499 (dealt by configs 0.535 : 0.465, in turn 0.619 : 0.381), and the two shards
 * run 6.18 and 6.30 G instructions where one process runs 11.70 G (callgrind; dealt by
 * configs after a counting pass: 6.34 and 6.71 G). */
static guint
choice_shard (guint64 o, guint n)
{
  guint64 round = o / n, k = o % n;
  return (guint) (round % 2 == 0 ? k : n - 1 - k);
}

/* Notes the current layer-cost choice as a branch (to be searched by search_branch). */
static void
with_layer_costs (Search *s, MpParallelConfig *cfg)
{
  guint64 o = s->outer++;
  if (s->counting || choice_shard (o, MAX (s->opts->n_shards, 1u)) != s->opts->shard)
    {
      /* Another shard's choice is only counted, without a split (which does not change
       * which configs are valid: one always exists for the chunks tried, and
       * mp_parallel_config_check asks only that of it). */
      gboolean counting = s->counting;
      s->counting = TRUE;
      loop_schedule (s, cfg);
      s->counting = counting;
      return;
    }
  Branch b = { .outer = o, .floor_s = -1, .bound = G_MAXDOUBLE, .floor_at = NO_FLOOR,
               .floor_peak = -1, .counted = NOT_COUNTED, .accepted = NOT_COUNTED };
  branch_pack (&b, cfg);
  for (guint z = 0; z < 4; z++)
    s->floor_peak[z] = -1;
  double peak;
  guint top = cfg->dp * cfg->cp > 1 ? 3 : 0;
  if (!s->opts->no_bounds && !(branch_floor (s, cfg, top, &peak) > 0))
    {
      /* on this pp's stages: not shared with the other depths */
      guint n = s->classes.n_reps;
      b.floor_at = s->class_floors->len;
      g_array_set_size (s->class_floors, s->class_floors->len + n);
      b.floor_s = kernel_floor (s->ctx, &s->classes, &s->span_runs, cfg,
                                &g_array_index (s->class_floors, double, b.floor_at));
      b.bound = b.floor_s > 0 ? depth_bound (cfg, b.floor_s) : 0;
    }
  b.floor_peak = s->floor_peak[top];
  b.floor_excess = s->floor_excess[top];
  g_array_append_val (s->branches, b);
}

/* May a dropped branch be counted as another shard's choice is (counts_only): nothing
 * to ask of each config? */
static gboolean
counts_only_dropped (const Search *s)
{
  return s->opts->accept == NULL && s->opts->pins == NULL;
}

/* Is B the same choice as A but for the dispatcher? */
static gboolean
other_dispatcher (const Branch *a, const Branch *b)
{
  return a->dispatcher != b->dispatcher && a->tp == b->tp && a->cp == b->cp
         && a->pp == b->pp && a->dp == b->dp && a->ep == b->ep && a->etp == b->etp
         && a->micro_batch_size == b->micro_batch_size
         && a->num_micro_batches == b->num_micro_batches
         && a->recompute_num_layers == b->recompute_num_layers
         && a->recompute_modules == b->recompute_modules
         && a->sequence_parallel == b->sequence_parallel && a->recompute == b->recompute
         && a->recompute_method == b->recompute_method && a->fp8 == b->fp8;
}

/* The configs dropped branch I counts (counts_only_dropped), counted in bulk as another
 * shard's are (with_layer_costs), or taken from its other dispatcher's, met next to it
 * (loop_ep): the count reads the dispatcher only where mp_parallel_config_check asks
 * that it is known (issue 15: counting took ~4.5 G of deepseek-v3's instructions on
 * 1024 H100s, nearly every branch but ep = 1 having two dispatchers). */
static void
count_dropped (Search *s, guint i, MpParallelConfig *cfg)
{
  Branch *b = &g_array_index (s->branches, Branch, i);
  for (gint d = -1; d <= 1 && b->counted == NOT_COUNTED; d += 2)
    {
      gint j = (gint) i + d;
      if (j < 0 || (guint) j >= s->branches->len)
        continue;
      const Branch *pair = &g_array_index (s->branches, Branch, j);
      if (pair->counted != NOT_COUNTED && other_dispatcher (pair, b))
        b->counted = pair->counted, b->accepted = pair->accepted;
    }
  if (b->counted == NOT_COUNTED)
    {
      guint64 before = s->index, accepted = s->accepted;
      s->counting = TRUE;
      loop_schedule (s, cfg);
      s->counting = FALSE;
      b->counted = s->index - before;
      b->accepted = s->accepted - accepted;
    }
  else
    {
      s->index += b->counted;
      s->accepted += b->accepted;
    }
  s->res->stats.pruned += b->counted;
}

/* The per-layer costs of branch I's choice, computed once for every pipeline depth
 * that shares them, then its configs. */
static void
search_branch (Search *s, guint i)
{
  Branch *b = &g_array_index (s->branches, Branch, i);
  MpParallelConfig branch_cfg, *cfg = &branch_cfg;
  branch_unpack (b, &s->base, cfg);
  for (guint z = 0; z < 4; z++)
    s->floor_peak[z] = -1;
  guint top = cfg->dp * cfg->cp > 1 ? 3 : 0;
  s->floor_peak[top] = b->floor_peak;
  s->floor_excess[top] = b->floor_excess;
  s->dropped = memory_drops (s, cfg, TRUE);
  if (!s->dropped)
    {
      double floors[s->classes.n_reps];
      const double *by_class = floors;
      if (b->floor_at != NO_FLOOR)
        by_class = &g_array_index (s->class_floors, double, b->floor_at);
      else if (!s->opts->no_bounds)
        b->floor_s = kernel_floor (s->ctx, &s->classes, &s->span_runs, cfg, floors);
      s->floor_s = b->floor_s;
      s->layer_floor = NULL;
      if (b->floor_s > 0)
        {
          for (guint l = 0; l < s->model->n_layers; l++)
            s->layer_floor_buf[l] = by_class[s->classes.slot[l]];
          s->layer_floor = s->layer_floor_buf;
        }
      s->dropped = branch_drops (s, cfg, depth_bound (cfg, s->floor_s), FALSE);
    }
  if (!s->dropped)
    {
      /* MoE (moe14): etp and the dispatcher change layer costs too. */
      guint64 key[] = { cfg->tp, cfg->cp, cfg->sequence_parallel, cfg->recompute,
                        cfg->recompute_num_layers, cfg->recompute_method,
                        cfg->recompute_modules, cfg->fp8, cfg->micro_batch_size, cfg->etp,
                        cfg->ep, cfg->dispatcher };
      g_autoptr(GBytes) k = g_bytes_new (key, sizeof key);
      double *cost = g_hash_table_lookup (s->layer_costs, k);
      if (cost == NULL)
        {
          /* the layers' on each kind of device, then their splits' bottlenecks */
          gsize n = (gsize) s->cluster->n_groups * s->model->n_layers;
          cost = g_new (double, n + s->model->n_layers + 1);
          pl_layer_costs (s->ctx, cfg, cost);
          for (gsize i = n; i <= n + s->model->n_layers; i++)
            cost[i] = -1;
          g_hash_table_insert (s->layer_costs, g_bytes_ref (k), cost);
        }
      s->layer_cost = cost;
      s->split_limits = cost + (gsize) s->cluster->n_groups * s->model->n_layers;
    }
  if (s->dropped && counts_only_dropped (s))
    count_dropped (s, i, cfg);     /* nothing of it is kept nor asked of each config */
  else
    loop_schedule (s, cfg);
  s->dropped = FALSE;
  s->layer_floor = NULL;
}

static void
cutoffs_none (Cutoffs *cut)
{
  cut->top = cut->free = G_MAXDOUBLE;
  for (guint f = 0; f < MP_FAMILY_N; f++)
    cut->family[f] = G_MAXDOUBLE;
  cut->any = FALSE;
}

/* The cutoffs RES's plans give (TOP_K: the plans a full list holds). */
static void
cutoffs_of (const MpSearchResult *res, guint top_k, Cutoffs *cut)
{
  const MpSearchStats *st = &res->stats;
  cutoffs_none (cut);
  if (res->plans->len >= top_k)
    cut->top = ((const MpPlan *) g_ptr_array_index (res->plans, res->plans->len - 1))->step_s;
  for (guint f = 0; f < MP_FAMILY_N; f++)
    if (st->family_best[f] != NULL)
      cut->family[f] = st->family_best[f]->step_s;
  if (st->free_best != NULL)
    cut->free = st->free_best->step_s;
  cut->any = res->plans->len > 0;
}

/* Shares this shard's cutoffs and takes the other shards' (MpSearchOptions.share);
 * FALSE once the search is to stop (another shard failed). */
static gboolean
share_cutoffs (Search *s)
{
  MpSearchShare *share = s->opts->share;
  if (share == NULL)
    return TRUE;
  Cutoffs mine;
  cutoffs_of (s->res, s->top_k, &mine);
  double v[MP_SEARCH_SHARE_N];
  v[0] = mine.top;
  for (guint f = 0; f < MP_FAMILY_N; f++)
    v[1 + f] = mine.family[f];
  v[1 + MP_FAMILY_N] = mine.free;
  v[2 + MP_FAMILY_N] = mine.any ? 0 : G_MAXDOUBLE;
  g_mutex_lock (&share->lock);
  memcpy (share->mine, v, sizeof v);
  memcpy (v, share->others, sizeof v);
  gboolean stop = share->stop;
  g_mutex_unlock (&share->lock);
  s->cut.top = v[0];
  for (guint f = 0; f < MP_FAMILY_N; f++)
    s->cut.family[f] = v[1 + f];
  s->cut.free = v[1 + MP_FAMILY_N];
  s->cut.any = v[2 + MP_FAMILY_N] == 0;
  return !stop;
}

/* Searches the branches noted, best bound first. */
static void
search_branches (Search *s)
{
  /* Their keys sorted, not the branches (~100 bytes each; deepseek-v3 on 1024 H100s
   * meets 943k: GLib's merge sort of them took 5.2 G of its 28 G instructions). */
  guint n = s->branches->len;
  BranchOrder *order = g_new (BranchOrder, MAX (n, 1u));
  for (guint i = 0; i < n; i++)
    {
      const Branch *b = &g_array_index (s->branches, Branch, i);
      order[i] = (BranchOrder) { b->bound, b->outer, i };
    }
  sort_branches (order, n);
  for (guint i = 0; i < n && share_cutoffs (s); i++)
    search_branch (s, order[i].index);
  g_free (order);
  share_cutoffs (s);
  g_array_set_size (s->branches, 0);
  g_array_set_size (s->class_floors, 0);
}

/* MoE (moe14): Megatron-Core's expert grid over a stage's tp * cp * dp ranks: ep
 * dividing the experts, etp a divisor of tp that divides the expert width (etp != tp
 * only with sequence parallelism when tp > 1, as mp_parallel_config_check asks), etp * ep
 * dividing the stage, and both dispatchers once tokens move (etp * ep > 1). Dense
 * models: ep = 1, etp = tp, all-to-all. */
static void
loop_ep (Search *s, MpParallelConfig *cfg)
{
  guint experts = (guint) s->model->experts, stage = cfg->tp * cfg->cp * cfg->dp;
  guint64 width = s->model->moe_ffn_hidden;
  cfg->ep = 1;
  cfg->etp = cfg->tp;
  cfg->dispatcher = MP_DISPATCH_ALLTOALL;
  if (experts == 0)
    {
      with_layer_costs (s, cfg);
      return;
    }
  for (guint etp = cfg->tp; etp >= 1; etp--)
    {
      if (cfg->tp % etp != 0 || width % etp != 0
          || (etp != cfg->tp && cfg->tp > 1 && !cfg->sequence_parallel))
        continue;
      cfg->etp = etp;
      for (guint ep = 1; ep <= experts && etp * ep <= stage; ep++)
        {
          if (experts % ep != 0 || stage % (etp * ep) != 0)
            continue;
          cfg->ep = ep;
          for (int d = MP_DISPATCH_ALLTOALL; d <= MP_DISPATCH_ALLGATHER; d++)
            if (d == MP_DISPATCH_ALLTOALL || etp * ep > 1)
              {
                cfg->dispatcher = (MpDispatcher) d;
                with_layer_costs (s, cfg);
              }
        }
    }
  cfg->ep = 1;
  cfg->etp = cfg->tp;
  cfg->dispatcher = MP_DISPATCH_ALLTOALL;
}

/* The most divisors a 32-bit number has (1344, of 3,491,888,400). */
#define DIVISORS_MAX 1344

/* N's divisors in ascending order into OUT (DIVISORS_MAX entries); returns how many. In
 * sqrt (N) steps: a batch of 10^9 sequences has 100 micro-batch sizes, not 10^9 to try. */
static guint
divisors (guint n, guint *out)
{
  guint small = 0, large = 0, high[DIVISORS_MAX];
  for (guint d = 1; d <= n / d; d++)
    if (n % d == 0)
      {
        out[small++] = d;
        if (d != n / d)
          high[large++] = n / d;
      }
  while (large > 0)
    out[small++] = high[--large];
  return small;
}

static void
loop_pp (Search *s, MpParallelConfig *cfg, guint rest)
{
  for (guint pp = 1; pp <= rest && pp <= n_blocks (s->model); pp++)
    {
      if (rest % pp != 0)
        continue;
      cfg->pp = pp;
      cfg->dp = rest / pp;
      if (s->global_batch % cfg->dp != 0)
        continue;
      /* Every micro-batch up to the replica's share: the large ones' activations are
       * what the memory floor drops first (with_layer_costs). */
      guint local = s->global_batch / cfg->dp;
      guint most = !s->opts->limited_space || mp_plan_pins_get (s->opts->pins, "micro_batch_size",
                                                             NULL)
                   ? local : mp_planner_max_micro_batch (s->model);
      guint mbs_of[DIVISORS_MAX], n_mbs = divisors (local, mbs_of);
      for (guint d = 0; d < n_mbs && mbs_of[d] <= most; d++)
        {
          guint mbs = mbs_of[d];
          cfg->micro_batch_size = mbs;
          cfg->num_micro_batches = local / mbs;
          loop_ep (s, cfg);
        }
    }
  cfg->pp = cfg->dp = 1;
}

static void
loop_recompute (Search *s, MpParallelConfig *cfg, guint rest)
{
  const MpPlanPins *pins = s->opts->pins;
  guint pinned = 0;
  gboolean pin = mp_plan_pins_get (pins, "recompute", &pinned);
  for (int r = MP_RECOMPUTE_NONE; r <= MP_RECOMPUTE_FULL; r++)
    {
      /* Fused attention keeps no score matrix, so selective recompute of the attention
       * core saves next to nothing: the search tries it only when it is pinned. */
      if (r == MP_RECOMPUTE_SELECTIVE && cfg->flash_attention && !(pin && pinned == (guint) r))
        continue;
      cfg->recompute = (MpRecompute) r;
      /* Its extent: the pinned one, else all blocks (full) or the attention core. */
      guint v = 0;
      if (r == MP_RECOMPUTE_FULL && mp_plan_pins_get (pins, "recompute_num_layers", &v))
        cfg->recompute_num_layers = v;
      if (r == MP_RECOMPUTE_FULL && mp_plan_pins_get (pins, "recompute_method", &v))
        cfg->recompute_method = (MpRecomputeMethod) v;
      if (r == MP_RECOMPUTE_SELECTIVE && mp_plan_pins_get (pins, "recompute_modules", &v))
        cfg->recompute_modules = v;
      loop_pp (s, cfg, rest);
      cfg->recompute_num_layers = cfg->recompute_modules = 0;
      cfg->recompute_method = MP_RECOMPUTE_METHOD_BLOCK;
    }
  cfg->recompute = MP_RECOMPUTE_NONE;
}

static void
loop_sequence_parallel (Search *s, MpParallelConfig *cfg, guint rest)
{
  cfg->sequence_parallel = FALSE;
  loop_recompute (s, cfg, rest);
  if (cfg->tp > 1 && s->model->arch == MP_ARCH_TRANSFORMER)
    {
      cfg->sequence_parallel = TRUE;
      loop_recompute (s, cfg, rest);
      cfg->sequence_parallel = FALSE;
    }
}

/* Does cp split the model's sequence for causal load balancing (Megatron-Core's context
 * parallelism: 2 cp pieces, rank i taking pieces i and 2 cp - 1 - i)? NULL if so, else
 * the rule it breaks (caller owns). */
static char *
cp_rule (const MpModel *model, guint cp)
{
  if (cp <= 1 || model->seq_len % (2 * (guint64) cp) == 0)
    return NULL;
  return g_strdup_printf ("seq_len %" G_GUINT64_FORMAT " is not divisible by 2 * cp = %u "
                          "(context parallelism splits each sequence in 2 cp pieces)",
                          model->seq_len, 2 * cp);
}

/* Every context-parallel size that divides the devices left and splits the sequence
 * (cp_rule); the exposed KV exchange of a large cp is in the step bound (kernel_floor). */
static void
loop_cp (Search *s, MpParallelConfig *cfg, guint rest)
{
  guint pin = 0;
  for (guint cp = 1; cp <= rest; cp++)
    {
      if (cp > 1 && s->model->arch != MP_ARCH_TRANSFORMER)
        break;                         /* context parallelism needs a sequence */
      g_autofree char *broken = rest % cp == 0 ? cp_rule (s->model, cp) : NULL;
      if (rest % cp != 0 || broken != NULL)
        continue;
      /* the limited space: powers of two keeping >= 4096 tokens a rank, or the pinned cp */
      gboolean pinned = mp_plan_pins_get (s->opts->pins, "cp", &pin) && pin == cp;
      if (s->opts->limited_space && !pinned && cp > 1
          && ((cp & (cp - 1)) != 0 || s->model->seq_len / cp < 4096))
        continue;
      cfg->cp = cp;
      loop_sequence_parallel (s, cfg, rest / cp);
    }
  cfg->cp = 1;
}

static void
loop_tp (Search *s, MpParallelConfig *cfg)
{
  guint world = s->cluster->world_size;
  for (guint tp = 1; tp <= world; tp++)
    {
      if (world % tp != 0)
        continue;
      cfg->tp = tp;
      /* tp must divide the heads, kv heads and ffn: ask the checker with pp = 1. */
      MpParallelConfig probe = *cfg;
      probe.dp = world / tp;
      probe.etp = 0;                   /* MoE (moe14): the experts' grid is probed later */
      probe.ep = 1;
      if (!mp_parallel_config_check (&probe, s->model, s->cluster, NULL))
        continue;
      loop_cp (s, cfg, world / tp);
    }
}

/* Is the on/off setting KEY pinned on (--fix KEY=true)? Settings the search never tries. */
static gboolean
pinned_on (const Search *s, const char *key)
{
  guint on = 0;
  return mp_plan_pins_get (s->opts->pins, key, &on) && on != 0;
}

static void
run (Search *s)
{
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.bucket_bytes = s->opts->bucket_bytes;
  /* The stack is the user's, not a choice of the search: every config (the best one
   * without the pins too) runs under the pinned one, else the options'. */
  guint stack = s->opts->stack;
  mp_plan_pins_get (s->opts->pins, "stack", &stack);
  cfg.stack = (MpStack) stack;
  cfg.moe_a2a_overlap = pinned_on (s, "moe_a2a_overlap");     /* MoE: pinned only */
  cfg.compile = pinned_on (s, "compile");       /* torch.compile: the user's, as the stack */
  /* The K/V exchange: the user's or the stack's. All-gathering hides less than the ring
   * does, so the search would never pick it (it matters only where cp > 1). */
  guint comm = MP_CP_COMM_STACK;
  mp_plan_pins_get (s->opts->pins, "cp_comm_type", &comm);
  cfg.cp_comm = (MpCpComm) comm;
  s->base = cfg;
  s->index = s->outer = s->accepted = s->pinned = 0;
  s->dropped = FALSE;
  /* FP8 changes the numerics, so the search tries it only when the user pins it
   * (--fix fp8=true), and then bf16 too for the best plan without the pins. */
  gboolean with_fp8 = pinned_on (s, "fp8");
  for (guint f = 0; f <= (with_fp8 ? 1u : 0u); f++)
    {
      cfg.fp8 = f;
      loop_tp (s, &cfg);
    }
}

/* ---- the entry point ------------------------------------------------------------------ */

/* Why no config honours the pins, when a rule says so: the checker's verdict on the
 * pinned sizes (the rest as the search's first choice, the micro-batches from the batch).
 * Caller owns; NULL when the pinned sizes alone break no rule. */
static char *
pins_reason (const Search *s)
{
  static const char *const keys[] = { "dp", "tp", "pp", "vpp", "cp", "ep", "etp",
                                      "micro_batch_size", "num_micro_batches" };
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  guint *field[] = { &cfg.dp, &cfg.tp, &cfg.pp, &cfg.vpp, &cfg.cp, &cfg.ep, &cfg.etp,
                     &cfg.micro_batch_size, &cfg.num_micro_batches };
  for (gsize i = 0; i < G_N_ELEMENTS (keys); i++)
    mp_plan_pins_get (s->opts->pins, keys[i], field[i]);
  guint v;
  if (mp_plan_pins_get (s->opts->pins, "schedule", &v))
    cfg.schedule = (MpSchedule) v;
  else if (cfg.vpp > 1)
    cfg.schedule = MP_SCHEDULE_INTERLEAVED;
  if (!mp_plan_pins_get (s->opts->pins, "num_micro_batches", &v)
      && s->global_batch % (cfg.dp * cfg.micro_batch_size) == 0)
    cfg.num_micro_batches = s->global_batch / (cfg.dp * cfg.micro_batch_size);
  if (mp_plan_pins_get (s->opts->pins, "recompute", &v))
    cfg.recompute = (MpRecompute) v;
  if (mp_plan_pins_get (s->opts->pins, "recompute_num_layers", &v))
    cfg.recompute_num_layers = v;
  if (mp_plan_pins_get (s->opts->pins, "recompute_modules", &v))
    cfg.recompute_modules = v;
  cfg.chunk_layers = s->pinned_split && s->n_pinned == cfg.pp * cfg.vpp ? s->pinned_split
                                                                         : NULL;
  char *broken = cp_rule (s->model, cfg.cp);
  if (broken != NULL)
    return broken;
  g_autoptr(GError) error = NULL;
  /* Only the pinned part: a world larger than the pins ask is not a reason. */
  MpCluster cluster = *s->cluster;
  cluster.world_size = G_MAXUINT;
  if (!mp_parallel_config_check (&cfg, s->model, &cluster, &error))
    return g_strdup (error->message);
  /* dp * micro_batch_size * num_micro_batches is the batch: the pinned ones divide it */
  static const char *const sizes[] = { "dp", "micro_batch_size", "num_micro_batches" };
  guint *size[] = { &cfg.dp, &cfg.micro_batch_size, &cfg.num_micro_batches };
  guint64 part = 1;
  g_autoptr(GString) named = g_string_new (NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (sizes); i++)
    if (mp_plan_pins_get (s->opts->pins, sizes[i], NULL))
      {
        part *= *size[i];
        g_string_append_printf (named, "%s%s %u", named->len ? " x " : "", sizes[i], *size[i]);
      }
  return s->global_batch % part != 0
         ? g_strdup_printf ("%s does not divide the global batch of %u", named->str,
                            s->global_batch)
         : NULL;
}

MpSearchResult *
mp_planner_search_roomy (const MpCostContext *ctx, const MpSearchOptions *opts, double factor,
                         GError **error)
{
  g_return_val_if_fail (ctx != NULL && opts != NULL && factor >= 1, NULL);
  g_autoptr(MpCluster) roomy = mp_cluster_copy (mp_cost_context_cluster (ctx));
  for (guint i = 0; i < roomy->n_groups; i++)
    roomy->groups[i].device.memory_bytes *= factor;
  g_autoptr(MpCostContext) big = mp_cost_context_new (mp_cost_context_model (ctx), roomy,
                                                      mp_cost_context_profile (ctx));
  MpSearchOptions one = *opts;
  one.top_k = 1;
  one.shard = one.n_shards = 0;
  one.share = NULL;
  one.progress = NULL;
  return mp_planner_search (big, &one, error);
}

void
mp_search_result_free (MpSearchResult *result)
{
  if (result == NULL)
    return;
  g_ptr_array_unref (result->plans);
  MpSearchStats *st = &result->stats;
  mp_plan_free (st->smallest);
  mp_plan_free (st->free_best);
  for (guint f = 0; f < MP_FAMILY_N; f++)
    {
      mp_plan_free (st->family_best[f]);
      mp_plan_free (st->family_smallest[f]);
    }
  g_free (result);
}

MpSearchResult *
mp_planner_search (const MpCostContext *ctx, const MpSearchOptions *opts, GError **error)
{
  g_return_val_if_fail (ctx != NULL && opts != NULL, NULL);
  const MpModel *model = mp_cost_context_model (ctx);
  Search s = {
    .ctx = ctx,
    .model = model,
    .cluster = mp_cost_context_cluster (ctx),
    .opts = opts,
    .global_batch = opts->global_batch ? opts->global_batch : (guint) model->global_batch,
    .top_k = MAX (opts->top_k, 1u),
  };
  if (s.global_batch == 0)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "the global batch must be at least 1");
      return NULL;
    }
  guint fp8 = 0;
  for (guint g = 0; mp_plan_pins_get (opts->pins, "fp8", &fp8) && fp8
                    && g < s.cluster->n_groups; g++)
    if (s.cluster->groups[g].device.peak_flops[MP_DTYPE_FP8] <= 0)
      {
        g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "--fix fp8=true: device '%s' of %s "
                     "has no FP8 rate (its peak lists no fp8)",
                     s.cluster->groups[g].device.name, s.cluster->name);
        return NULL;
      }
  gint64 start = g_get_monotonic_time ();
  if (opts->progress && opts->n_shards <= 1)
    {
      s.counting = TRUE;
      run (&s);
      s.total = s.index;
      s.counting = FALSE;
    }
  s.res = g_new0 (MpSearchResult, 1);
  s.res->plans = g_ptr_array_new_with_free_func ((GDestroyNotify) mp_plan_free);
  GError *pin_error = NULL;
  s.pinned_split = mp_plan_pins_split (opts->pins, model, &s.n_pinned, &pin_error);
  if (pin_error != NULL)
    {
      g_propagate_error (error, pin_error);
      mp_search_result_free (s.res);
      return NULL;
    }
  guint max_vpp = MAX_VPP;
  mp_plan_pins_get (opts->pins, "vpp", &max_vpp);
  s.split = g_new (guint, (gsize) n_blocks (model) * MAX (max_vpp, MAX_VPP) + 2);
  s.branches = g_array_new (FALSE, FALSE, sizeof (Branch));
  layer_classes_init (&s.classes, ctx);
  span_runs_init (&s.span_runs);
  s.class_floors = g_array_new (FALSE, FALSE, sizeof (double));
  s.layer_floor_buf = g_new (double, model->n_layers);
  s.layer_costs = g_hash_table_new_full (g_bytes_hash, g_bytes_equal,
                                         (GDestroyNotify) g_bytes_unref, g_free);
  s.split_fills = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  cutoffs_none (&s.cut);
  run (&s);
  search_branches (&s);
  g_array_unref (s.branches);
  g_array_unref (s.class_floors);
  layer_classes_clear (&s.classes);
  span_runs_clear (&s.span_runs);
  g_free (s.layer_floor_buf);
  g_hash_table_unref (s.split_fills);
  g_hash_table_unref (s.layer_costs);
  s.res->stats.space = s.accepted;
  pl_settle_smallest (s.res);
  g_free (s.split);
  s.res->stats.seconds = (g_get_monotonic_time () - start) / 1e6;
  if (opts->progress)
    opts->progress (s.index, s.index, opts->progress_data);
  if (s.index == 0)
    {
      mp_search_result_free (s.res);
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                   "no way to split %s over %u devices with a global batch of %u: no data "
                   "parallel size divides the batch, or no tensor size divides the heads",
                   model->name, s.cluster->world_size, s.global_batch);
      return NULL;
    }
  if (opts->accept != NULL && s.accepted == 0)
    {
      mp_search_result_free (s.res);
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                   "no split of %s over %u devices with a global batch of %u meets the "
                   "constraints", model->name, s.cluster->world_size, s.global_batch);
      return NULL;
    }
  if (opts->pins != NULL && s.pinned == 0)
    {
      g_autofree char *why = pins_reason (&s);
      mp_search_result_free (s.res);
      g_free (s.pinned_split);
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                   "no split of %s over %u devices with a global batch of %u honours the "
                   "pins (--fix)%s%s", model->name, s.cluster->world_size, s.global_batch,
                   why ? ": " : "", why ? why : "");
      return NULL;
    }
  g_free (s.pinned_split);
  return s.res;
}
