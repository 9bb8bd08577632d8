/* test-search.c - cmocka tests of the search's bounds (planner/search.c): the step-time
 * bound it prunes by never exceeds the closed form's step of any config, nor the memory
 * floor the memory model's figures of any config, fitting or not; and the pruned
 * search returns what the search without bounds (every config fully costed) returns - the
 * same best plans in the same order, the same best of each family, the same smallest
 * footprints and the same best plan without the pins - on problems that are multi-node,
 * memory-bound, heterogeneous, MoE, long-sequence and pinned.
 *
 * Not here: the space itself and the constraints (tests/test-planner.c). Zoo files are
 * found through MPPLAN_DATADIR (the Makefile sets it to examples/). */
#include "tests/test-pair.h"
#include "planner/planner.h"
#include "common/error.h"

#include <string.h>

#define DATA(name) MPPLAN_SRCDIR "/tests/data/" name
/* Larger than any test's feasible count: the search then keeps every feasible plan. */
#define ALL_PLANS 1000000

static MpSearchResult *
search_in (const Pair *p, guint batch, guint top_k, const MpPlanPins *pins,
           gboolean no_bounds, gboolean whole)
{
  g_autoptr(GError) error = NULL;
  MpSearchOptions opts = { .global_batch = batch, .top_k = top_k, .pins = pins,
                           .no_bounds = no_bounds, .limited_space = !whole };
  MpSearchResult *res = mp_planner_search (p->ctx, &opts, &error);
  if (res == NULL)
    fail_msg ("search %s on %s: %s", p->model->name, p->cluster->name, error->message);
  return res;
}

/* The same in the limited space (MpSearchOptions.limited_space: the exhaustive searches
 * of 8-16 GPUs stay fast). */
static MpSearchResult *
search (const Pair *p, guint batch, guint top_k, const MpPlanPins *pins, gboolean no_bounds)
{
  return search_in (p, batch, top_k, pins, no_bounds, FALSE);
}

/* The pins TEXT names (--fix's syntax), or NULL for none. */
static MpPlanPins *
pins_of (const char *text)
{
  if (text == NULL)
    return NULL;
  g_autoptr(GError) error = NULL;
  MpPlanPins *pins = mp_plan_pins_parse (text, &error);
  if (pins == NULL)
    fail_msg ("--fix %s: %s", text, error->message);
  return pins;
}

/* A plan's JSON text (deterministic key order, %.17g numbers): its whole identity. */
static char *
plan_json (const MpPlan *plan)
{
  g_autoptr(JsonNode) node = mp_plan_to_json (plan);
  return json_to_string (node, FALSE);
}

static void
assert_same_plan (const MpPlan *a, const MpPlan *b, const char *problem, const char *what)
{
  if ((a == NULL) != (b == NULL))
    fail_msg ("%s: %s: one search has it, the other not", problem, what);
  if (a == NULL)
    return;
  g_autofree char *ja = plan_json (a), *jb = plan_json (b);
  if (strcmp (ja, jb) != 0)
    fail_msg ("%s: %s differs:\npruned:     %s\nexhaustive: %s", problem, what, ja, jb);
}

/* ---- 1. the bound is a bound ---------------------------------------------------------- */

static void
test_search_bound_below_step (void **state)
{
  (void) state;
  static const struct { const char *model, *cluster; guint batch; } pairs[] = {
    { "gpt3-1.3b", "dgx-a100-80g:16", 0 },
    { "mixtral-8x7b", "dgx-h100:8", 0 },
    { "llama3-8b", "dgx-h100:8", 0 },
    { DATA ("model-moe.yaml"), "dgx-a100-80g:1", 16 },
  };
  guint64 checked = 0;
  double tightest = 0;
  for (gsize i = 0; i < G_N_ELEMENTS (pairs); i++)
    {
      g_autoptr(Pair) p = pair_load (pairs[i].model, pairs[i].cluster);
      g_autoptr(MpSearchResult) res = search (p, pairs[i].batch, ALL_PLANS, NULL, TRUE);
      assert_true (res->plans->len > 100);
      for (guint k = 0; k < res->plans->len; k++)
        {
          const MpPlan *plan = g_ptr_array_index (res->plans, k);
          double floor_s = mp_planner_kernel_floor (p->ctx, &plan->cfg);
          double bound = mp_planner_step_bound (p->model, &plan->cfg, floor_s);
          if (!(floor_s > 0))
            fail_msg ("%s: plan %u: no floor (%g s)", pairs[i].model, k, floor_s);
          if (!(bound > 0))
            fail_msg ("%s: plan %u: no bound", pairs[i].model, k);
          if (bound > plan->step_s)
            fail_msg ("%s on %s: plan %u: bound %.12g s above its step %.12g s",
                      pairs[i].model, pairs[i].cluster, k, bound, plan->step_s);
          tightest = MAX (tightest, bound / plan->step_s);
          checked++;
        }
    }
  /* Many configs, and a bound worth pruning by (not a vacuous 0). */
  assert_true (checked > 1000);
  assert_true (tightest > 0.5);
}

/* Several device types: no floor, so no bound (the kernels differ by stage). */
static void
test_search_no_bound_heterogeneous (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-1.3b", DATA ("cluster-hetero.yaml"));
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.dp = 28;
  assert_true (mp_planner_kernel_floor (p->ctx, &cfg) < 0);
  assert_true (mp_planner_step_bound (p->model, &cfg, -1) == 0);
}

/* The memory floor (mp_cost_memory_floor) below the memory model, on every config of
 * the space, fitting or not: the largest excess and the binding stage's total, at the
 * config's ZeRO stage and at ZeRO-3's (which the search uses before it picks one), and
 * the floor of its schedule and vpp (mp_cost_memory_floor_scheduled). */
typedef struct {
  const MpCostContext *ctx;
  guint64 checked;
  double tightest, last_peak;
  guint64 sched_tighter;       /* configs whose scheduled floor is above the plain one */
  const char *problem;
} FloorCheck;

static gboolean
check_floor (const MpParallelConfig *cfg, gpointer data)
{
  FloorCheck *fc = data;
  MpStageMemory mem[cfg->pp];
  guint b = mp_cost_memory (fc->ctx, cfg, mem);
  double excess = -G_MAXDOUBLE;
  for (guint i = 0; i < cfg->pp; i++)
    excess = MAX (excess, mem[i].total_bytes + mem[i].headroom_bytes - mem[i].capacity_bytes);
  MpParallelConfig z3 = *cfg;
  z3.zero = cfg->dp * cfg->cp > 1 ? 3 : 0;
  const MpParallelConfig *at[] = { cfg, &z3, cfg };
  for (gsize k = 0; k < G_N_ELEMENTS (at); k++)
    {
      double peak, floor_excess = k < 2 ? mp_cost_memory_floor (fc->ctx, at[k], &peak)
                                        : mp_cost_memory_floor_scheduled (fc->ctx, cfg, &peak);
      if (floor_excess > excess || peak > mem[b].total_bytes)
        fail_msg ("%s: dp=%u tp=%u pp=%u vpp=%u cp=%u ep=%u etp=%u mbs=%u zero=%u "
                  "recompute=%d sp=%d (floor at zero %u): floor %.6g / %.6g above %.6g / %.6g",
                  fc->problem, cfg->dp, cfg->tp, cfg->pp, cfg->vpp, cfg->cp, cfg->ep,
                  mp_parallel_config_etp (cfg), cfg->micro_batch_size, cfg->zero,
                  cfg->recompute, cfg->sequence_parallel, at[k]->zero, floor_excess, peak,
                  excess, mem[b].total_bytes);
      if (k == 0)
        fc->tightest = MAX (fc->tightest, peak / mem[b].total_bytes);
      if (k == 2)
        fc->sched_tighter += peak > fc->last_peak;
      fc->last_peak = peak;
    }
  fc->checked++;
  return TRUE;
}

static void
test_search_memory_floor_below_memory (void **state)
{
  (void) state;
  static const struct { const char *model, *cluster, *pins; guint batch; } pairs[] = {
    { "gpt3-13b", "dgx-a100-40g:8", NULL, 0 },
    { "llama3-70b", "dgx-h100:8", NULL, 0 },
    { "mixtral-8x7b", "dgx-h100:4", NULL, 32 },
    { "qwen3-30b-a3b", "dgx-h100:2", "fp8=true", 16 },
    { "gpt3-1.3b", DATA ("cluster-hetero.yaml"), NULL, 0 },
    { "llama3-8b", "dgx-h100:8", "recompute=full,recompute_num_layers=3", 0 },
    { "llama3-8b", "dgx-h100:8", "recompute=full,recompute_method=uniform,recompute_num_layers=2",
      0 },
    { DATA ("model-moe.yaml"), "dgx-a100-80g:1", NULL, 16 },
  };
  FloorCheck fc = { 0 };
  double tightest = 0;
  for (gsize i = 0; i < G_N_ELEMENTS (pairs); i++)
    {
      g_autoptr(Pair) p = pair_load (pairs[i].model, pairs[i].cluster);
      g_autoptr(MpPlanPins) pins = pins_of (pairs[i].pins);
      fc.ctx = p->ctx;
      fc.problem = pairs[i].model;
      fc.tightest = 0;
      g_autoptr(GError) error = NULL;
      MpSearchOptions opts = { .global_batch = pairs[i].batch, .top_k = 1, .pins = pins,
                               .no_bounds = TRUE, .accept = check_floor, .accept_data = &fc,
                               .limited_space = TRUE };
      g_autoptr(MpSearchResult) res = mp_planner_search (p->ctx, &opts, &error);
      assert_non_null (res);
      tightest = MAX (tightest, fc.tightest);
    }
  /* Many configs, and a floor worth pruning by. */
  assert_true (fc.checked > 5000);
  assert_true (tightest > 0.8);
  /* the schedule's floor is tighter on many (1F1B, interleaved and GPipe hold more) */
  assert_true (fc.sched_tighter * 4 > fc.checked);
}

/* ---- 2. pruning drops nothing that counts --------------------------------------------- */

typedef struct {
  const char *what, *model, *cluster, *pins;
  guint batch, top_k;
} Problem;

static const Problem PROBLEMS[] = {
  { "small", "gpt3-1.3b", "dgx-a100-80g:2", NULL, 0, 5 },
  { "multi-node", "gpt3-1.3b", "dgx-a100-80g:16", NULL, 0, 10 },
  { "multi-node 13B", "gpt3-13b", "dgx-a100-80g:16", NULL, 0, 5 },
  { "memory-bound", "llama3-70b", "dgx-h100:8", NULL, 0, 5 },
  { "memory-bound 40 GB", "gpt3-13b", "dgx-a100-40g:8", NULL, 0, 5 },
  { "heterogeneous", "gpt3-1.3b", DATA ("cluster-hetero.yaml"), NULL, 0, 5 },
  { "MoE", "mixtral-8x7b", "dgx-h100:8", NULL, 0, 5 },
  { "MoE small", DATA ("model-moe.yaml"), "dgx-a100-80g:1", NULL, 16, 5 },
  { "long sequence", "gemma3-27b", "dgx-h100:8", NULL, 0, 5 },
  { "pinned pp", "gpt3-1.3b", "dgx-a100-80g:8", "pp=2", 0, 5 },
  { "pinned tp, zero", "llama3-8b", "dgx-h100:8", "tp=2,zero=1", 0, 5 },
  { "pinned fp8", "llama3-8b", "dgx-h100:8", "fp8=true", 0, 3 },
  { "one device", "tiny-gpt", "dgx-a100-80g:1", NULL, 0, 20 },
  { "mlp", "mlp-1024", "workstation-pcie4", NULL, 0, 5 },
};

/* RES keeps a smallest footprint only where the output reads one: the smallest while no
 * plan fits, a family's while the family has no best (pl_settle_smallest). */
static void
assert_settled (const MpSearchResult *res, const char *what)
{
  if (res->plans->len > 0 && res->stats.smallest != NULL)
    fail_msg ("%s: a plan fits, yet a smallest footprint is kept", what);
  for (guint f = 0; f < MP_FAMILY_N; f++)
    if (res->stats.family_best[f] != NULL && res->stats.family_smallest[f] != NULL)
      fail_msg ("%s: family %s has a best and a smallest footprint", what,
                mp_plan_family_id (f));
}

/* Pruned and exhaustive searches of PB (in the whole space with WHOLE) keep the same
 * plans; returns the pruned search's count of pruned configs. */
static guint64
assert_pruned_exact (const Problem *pb, gboolean whole)
{
  const char *what = pb->what;
  g_autoptr(Pair) p = pair_load (pb->model, pb->cluster);
  g_autoptr(MpPlanPins) pins = pins_of (pb->pins);
  g_autoptr(MpSearchResult) a = search_in (p, pb->batch, pb->top_k, pins, FALSE, whole);
  g_autoptr(MpSearchResult) b = search_in (p, pb->batch, pb->top_k, pins, TRUE, whole);
  /* The same space, all of it accounted for; the exhaustive search costs it all. */
  assert_int_equal (a->stats.space, b->stats.space);
  /* a branch pruned whole is not costed for memory: its fitting configs are unknown */
  assert_true (a->stats.feasible <= b->stats.feasible);
  assert_int_equal (a->stats.evaluated + a->stats.pruned, a->stats.space);
  assert_int_equal (b->stats.evaluated, b->stats.space);
  assert_int_equal (b->stats.pruned, 0);
  assert_true (a->plans->len > 0);
  assert_int_equal (a->plans->len, b->plans->len);
  for (guint j = 0; j < a->plans->len; j++)
    {
      g_autofree char *n = g_strdup_printf ("plan %u", j + 1);
      assert_same_plan (g_ptr_array_index (a->plans, j), g_ptr_array_index (b->plans, j),
                        what, n);
    }
  assert_same_plan (a->stats.smallest, b->stats.smallest, what, "smallest");
  assert_same_plan (a->stats.free_best, b->stats.free_best, what, "free_best");
  for (guint f = 0; f < MP_FAMILY_N; f++)
    {
      assert_same_plan (a->stats.family_best[f], b->stats.family_best[f], what,
                        mp_plan_family_id (f));
      assert_same_plan (a->stats.family_smallest[f], b->stats.family_smallest[f], what,
                        mp_plan_family_id (f));
    }
  assert_settled (a, what);
  /* The heterogeneous clusters have no step bound: every config that fits is timed there
   * (the memory floors prune only configs that cannot fit). */
  if (strncmp (what, "heterogeneous", 13) == 0)
    assert_int_equal (a->stats.feasible, b->stats.feasible);
  return a->stats.pruned;
}

static void
test_search_pruned_equals_exhaustive (void **state)
{
  (void) state;
  guint64 pruned = 0;
  for (gsize i = 0; i < G_N_ELEMENTS (PROBLEMS); i++)
    pruned += assert_pruned_exact (&PROBLEMS[i], FALSE);
  /* Non-vacuous: the bounds do prune. */
  assert_true (pruned > 0);
}

/* Where nothing fits, the bounds keep the smallest footprints open to the end: the
 * pruned search keeps the exhaustive one's smallest and family smallest, and so do two
 * shards merged (gpt3-175b's training state is over 2 TB: 8 A100s of 40 GB cannot hold
 * it). */
static void
test_search_smallest_when_nothing_fits (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-175b", "dgx-a100-40g:1");
  g_autoptr(MpSearchResult) a = search (p, 8, 5, NULL, FALSE);
  g_autoptr(MpSearchResult) b = search (p, 8, 5, NULL, TRUE);
  assert_int_equal (a->plans->len, 0);
  assert_int_equal (b->plans->len, 0);
  assert_non_null (a->stats.smallest);
  assert_same_plan (a->stats.smallest, b->stats.smallest, "nothing fits", "smallest");
  for (guint f = 0; f < MP_FAMILY_N; f++)
    assert_same_plan (a->stats.family_smallest[f], b->stats.family_smallest[f],
                      "nothing fits", mp_plan_family_id (f));
  assert_true (a->stats.pruned > 0);
  g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  MpSearchOptions opts = { .global_batch = 8, .top_k = 5, .n_shards = 2, .limited_space = TRUE };
  for (opts.shard = 0; opts.shard < 2; opts.shard++)
    {
      g_autoptr(MpSearchResult) part = mp_planner_search (p->ctx, &opts, NULL);
      assert_non_null (part);
      g_ptr_array_add (parts, mp_search_result_pack (part));
    }
  opts.shard = opts.n_shards = 0;
  g_autoptr(MpSearchResult) merged = mp_search_result_merge (p->ctx, &opts, parts, 0, NULL);
  assert_non_null (merged);
  assert_same_plan (merged->stats.smallest, b->stats.smallest, "nothing fits", "merged");
  for (guint f = 0; f < MP_FAMILY_N; f++)
    assert_same_plan (merged->stats.family_smallest[f], b->stats.family_smallest[f],
                      "nothing fits, merged", mp_plan_family_id (f));
}

/* The whole space (every vpp, uneven chunks too, every cp that splits the sequence,
 * every micro-batch), brute-forced on small problems. */
static const Problem WHOLE[] = {
  { "small", "gpt3-1.3b", "dgx-a100-80g:1", NULL, 32, 5 },
  { "multi-node", "gpt3-1.3b", "dgx-a100-80g:2", NULL, 32, 5 },
  { "memory-bound", "gpt3-13b", "dgx-a100-40g:1", NULL, 16, 5 },
  { "heterogeneous", "gpt3-1.3b", "mixed-a100-h100", NULL, 32, 3 },
  { "MoE", "mixtral-8x7b", "dgx-h100:2", NULL, 16, 5 },
  { "MoE small", DATA ("model-moe.yaml"), "dgx-a100-80g:1", NULL, 16, 5 },
  { "long sequence", "gemma3-27b", "dgx-h100:1", NULL, 8, 5 },
  { "pinned pp", "gpt3-1.3b", "dgx-a100-80g:1", "pp=2", 32, 5 },
  { "pinned tp, zero", "llama3-8b", "dgx-h100:1", "tp=2,zero=1", 16, 5 },
  { "pinned vpp, uneven", "gpt3-1.3b", "dgx-a100-80g:1", "pp=2,vpp=5", 32, 3 },
  { "FSDP / HSDP", "gpt3-1.3b", "dgx-a100-80g:2", "zero=3", 32, 5 },
  { "pinned fp8", "llama3-8b", "dgx-h100:1", "fp8=true", 16, 3 },
  { "one device", "tiny-gpt", "dgx-a100-80g:1", NULL, 0, 20 },
  { "mlp", "mlp-1024", "workstation-pcie4", NULL, 0, 5 },
};

static void
test_search_whole_space_exact (void **state)
{
  (void) state;
  guint64 pruned = 0;
  for (gsize i = 0; i < G_N_ELEMENTS (WHOLE); i++)
    pruned += assert_pruned_exact (&WHOLE[i], TRUE);
  assert_true (pruned > 0);
}

/* Shard S of a search whose shards share cutoffs (SHARE; NULL: none), one after the
 * other: each takes the least of those the shards before it left (as MPI ranks pass
 * them, cli/cmd-plan.c, here in the order that gives the later shards all of them). */
static MpSearchResult *
shard_search (const Pair *p, MpSearchOptions *opts, MpSearchShare *share)
{
  opts->share = share;
  double least[MP_SEARCH_SHARE_N];
  if (share != NULL)
    {
      memcpy (least, share->others, sizeof least);
      for (guint i = 0; i < MP_SEARCH_SHARE_N; i++)
        share->mine[i] = G_MAXDOUBLE;
    }
  g_autoptr(GError) error = NULL;
  MpSearchResult *part = mp_planner_search (p->ctx, opts, &error);
  assert_non_null (part);
  for (guint i = 0; share != NULL && i < MP_SEARCH_SHARE_N; i++)
    share->others[i] = MIN (least[i], share->mine[i]);
  return part;
}

/* The search as N shards (sharing cutoffs when SHARED), merged: the plans, family bests
 * and space of WHOLE (the same search on one process); returns the most configs one
 * shard fully costed, their sum in *SUM. */
static guint64
assert_shards_merge_shared (const Pair *p, guint top_k, gboolean whole_space, guint n,
                            const MpSearchResult *whole, gboolean shared, guint64 *sum)
{
  g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  MpSearchOptions opts = { .top_k = top_k, .n_shards = n, .limited_space = !whole_space };
  MpSearchShare share = { .stop = FALSE };
  g_mutex_init (&share.lock);
  for (guint i = 0; i < MP_SEARCH_SHARE_N; i++)
    share.others[i] = G_MAXDOUBLE;
  guint64 most = 0, costed = 0;
  *sum = 0;
  for (guint s = 0; s < n; s++)
    {
      opts.shard = s;
      g_autoptr(MpSearchResult) part = shard_search (p, &opts, shared ? &share : NULL);
      assert_int_equal (part->stats.space, whole->stats.space);
      most = MAX (most, part->stats.evaluated);
      *sum += part->stats.evaluated;
      costed += part->stats.evaluated + part->stats.pruned;
      g_ptr_array_add (parts, mp_search_result_pack (part));
    }
  g_mutex_clear (&share.lock);
  opts.share = NULL;
  /* every config costed or pruned by exactly one shard */
  assert_int_equal (costed, whole->stats.space);
  opts.shard = opts.n_shards = 0;
  g_autoptr(GError) error = NULL;
  g_autoptr(MpSearchResult) merged = mp_search_result_merge (p->ctx, &opts, parts, 0, &error);
  assert_non_null (merged);
  assert_int_equal (merged->stats.space, whole->stats.space);
  assert_int_equal (merged->stats.evaluated + merged->stats.pruned, whole->stats.space);
  assert_int_equal (merged->plans->len, whole->plans->len);
  for (guint j = 0; j < merged->plans->len; j++)
    assert_same_plan (g_ptr_array_index (merged->plans, j),
                      g_ptr_array_index (whole->plans, j), "sharded", "plan");
  for (guint f = 0; f < MP_FAMILY_N; f++)
    assert_same_plan (merged->stats.family_best[f], whole->stats.family_best[f], "sharded",
                      mp_plan_family_id (f));
  assert_same_plan (merged->stats.smallest, whole->stats.smallest, "sharded", "smallest");
  assert_settled (merged, "sharded");
  return most;
}

static guint64
assert_shards_merge (const Pair *p, guint top_k, gboolean whole_space, guint n,
                     const MpSearchResult *whole)
{
  guint64 sum;
  return assert_shards_merge_shared (p, top_k, whole_space, n, whole, FALSE, &sum);
}

/* Sharded, each shard prunes on its own share; merged, the result is the whole one's
 * (against the search without bounds in the default space; in the whole space on 2 and
 * 4 shards). The shares are even: no shard fully costs more than 2/3 of the configs one
 * process costs on 2 shards, 1/2 on 4 (gpt3-1.3b on 16 A100s in the whole space: 3754
 * and 2657 of 6304; each shard's plans prune only its share, so more than 1/2, 1/4). */
static void
test_search_pruned_shards_merge (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-1.3b", "dgx-a100-80g:16");
  g_autoptr(MpSearchResult) brute = search (p, 0, 10, NULL, TRUE);
  assert_shards_merge (p, 10, FALSE, 2, brute);
  g_autoptr(MpSearchResult) whole = search_in (p, 0, 8, NULL, FALSE, TRUE);
  guint64 two = assert_shards_merge (p, 8, TRUE, 2, whole);
  guint64 four = assert_shards_merge (p, 8, TRUE, 4, whole);
  assert_true (two * 3 <= whole->stats.evaluated * 2);
  assert_true (four * 2 <= whole->stats.evaluated);
}

/* Shards that prune by the cutoffs other shards shared (the best-so-far step times of
 * the plans they keep): merged, still the whole search's result, in the whole space on 2
 * and 4 shards, and the shards together cost fewer configs than without them. */
static void
test_search_shared_cutoffs_merge (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-1.3b", "dgx-a100-80g:16");
  g_autoptr(MpSearchResult) whole = search_in (p, 0, 8, NULL, FALSE, TRUE);
  for (guint n = 2; n <= 4; n += 2)
    {
      guint64 alone, shared;
      assert_shards_merge_shared (p, 8, TRUE, n, whole, FALSE, &alone);
      assert_shards_merge_shared (p, 8, TRUE, n, whole, TRUE, &shared);
      assert_true (shared < alone);
    }
  /* nothing fits: the smallest footprints survive the sharing */
  g_autoptr(Pair) big = pair_load ("gpt3-175b", "dgx-a100-40g:1");
  g_autoptr(MpSearchResult) b = search (big, 8, 5, NULL, TRUE);
  g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  MpSearchOptions opts = { .global_batch = 8, .top_k = 5, .n_shards = 2, .limited_space = TRUE };
  MpSearchShare share = { .stop = FALSE };
  g_mutex_init (&share.lock);
  for (guint i = 0; i < MP_SEARCH_SHARE_N; i++)
    share.others[i] = G_MAXDOUBLE;
  for (opts.shard = 0; opts.shard < 2; opts.shard++)
    {
      g_autoptr(MpSearchResult) part = shard_search (big, &opts, &share);
      g_ptr_array_add (parts, mp_search_result_pack (part));
    }
  g_mutex_clear (&share.lock);
  opts.shard = opts.n_shards = 0;
  opts.share = NULL;
  g_autoptr(MpSearchResult) merged = mp_search_result_merge (big->ctx, &opts, parts, 0, NULL);
  assert_non_null (merged);
  assert_int_equal (merged->plans->len, 0);
  assert_same_plan (merged->stats.smallest, b->stats.smallest, "shared", "smallest");
  for (guint f = 0; f < MP_FAMILY_N; f++)
    assert_same_plan (merged->stats.family_smallest[f], b->stats.family_smallest[f],
                      "shared", mp_plan_family_id (f));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_search_bound_below_step),
    cmocka_unit_test (test_search_no_bound_heterogeneous),
    cmocka_unit_test (test_search_memory_floor_below_memory),
    cmocka_unit_test (test_search_pruned_equals_exhaustive),
    cmocka_unit_test (test_search_whole_space_exact),
    cmocka_unit_test (test_search_smallest_when_nothing_fits),
    cmocka_unit_test (test_search_pruned_shards_merge),
    cmocka_unit_test (test_search_shared_cutoffs_merge),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
