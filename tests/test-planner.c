/* test-planner.c - cmocka tests of the plan search (planner/search.c, evaluate.c, pins.c,
 * merge.c) as properties checked against independent code: every returned plan satisfies
 * every constraint; the search evaluates exactly the configs of its documented space and
 * keeps exactly those that fit (a brute force enumerates and evaluates them all with
 * mp_plan_evaluate); its best plan and the best of each family are the brute force's;
 * it is deterministic, also split into shards and merged; --fix pins are honoured and bad
 * ones refused; an impossible request says what would make it fit.
 *
 * Not here: the numbers themselves (tests/test-costmodel.c), plan files
 * (tests/test-plan-io.c), the command line and golden outputs (tests/planner.sh).
 * Zoo files are found through MPPLAN_DATADIR (the Makefile sets it to examples/). Small
 * models and clusters keep the program to a few seconds. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/test-pair.h"
#include "planner/planner.h"
#include "common/error.h"

#include <math.h>
#include <string.h>

#define DATA(name) MPPLAN_SRCDIR "/tests/data/" name

/* What search.c documents of its space (its MAX_VPP; the micro-batch cap is public). */
#define SEARCH_MAX_VPP 8
/* Larger than any test's feasible count: the search then returns every feasible plan. */
#define ALL_PLANS 1000000

static guint
n_blocks (const MpModel *m)
{
  return m->arch == MP_ARCH_TRANSFORMER ? (guint) m->n_blocks : m->n_layers;
}

static guint
batch_of (const Pair *p, guint batch)
{
  return batch ? batch : (guint) p->model->global_batch;
}

static MpSearchResult *
search_ok (const Pair *p, guint batch, guint top_k, const MpPlanPins *pins)
{
  g_autoptr(GError) error = NULL;
  MpSearchOptions opts = { .global_batch = batch, .top_k = top_k, .pins = pins,
                           .limited_space = TRUE };
  MpSearchResult *res = mp_planner_search (p->ctx, &opts, &error);
  if (res == NULL)
    fail_msg ("search %s on %s: %s", p->model->name, p->cluster->name, error->message);
  return res;
}

static MpPlanPins *
pins_ok (const char *text)
{
  g_autoptr(GError) error = NULL;
  MpPlanPins *pins = mp_plan_pins_parse (text, &error);
  if (pins == NULL)
    fail_msg ("--fix %s: %s", text, error->message);
  return pins;
}

/* Every field the search chooses, as text: the identity of a config. */
static char *
config_key (const MpParallelConfig *c)
{
  return g_strdup_printf ("dp%u tp%u pp%u cp%u ep%u vpp%u sp%d zero%u rc%d mbs%u m%u s%d "
                          "order%d%d%d%d etp%u d%d shard%u keep%d", c->dp, c->tp, c->pp, c->cp,
                          c->ep, c->vpp, c->sequence_parallel, c->zero, c->recompute,
                          c->micro_batch_size, c->num_micro_batches, c->schedule, c->order[0],
                          c->order[1], c->order[2], c->order[3], mp_parallel_config_etp (c),
                          c->dispatcher, mp_parallel_config_zero_shard (c), c->no_reshard);
}

/* A plan's JSON text (deterministic key order, %.17g numbers). */
static char *
plan_json (const MpPlan *plan)
{
  g_autoptr(JsonNode) node = mp_plan_to_json (plan);
  return json_to_string (node, FALSE);
}

static void
assert_same_plan (const MpPlan *a, const MpPlan *b, const char *what)
{
  if ((a == NULL) != (b == NULL))
    fail_msg ("%s: one is missing", what);
  if (a == NULL)
    return;
  g_autofree char *ka = config_key (&a->cfg), *kb = config_key (&b->cfg);
  if (mp_plan_compare (a, b) != 0)
    fail_msg ("%s: %s (%.9g s) vs %s (%.9g s)", what, ka, a->step_s, kb, b->step_s);
  g_autofree char *ja = plan_json (a), *jb = plan_json (b);
  if (strcmp (ja, jb) != 0)
    fail_msg ("%s: %s: different JSON:\n%s\n%s", what, ka, ja, jb);
}

/* Two results hold the same plans, statistics (but the time, how the configs split into
 * costed and pruned, and so how many of them are known to fit, which depend on the order
 * a shard met them) and
 * remembered plans. */
static void
assert_same_result (const MpSearchResult *a, const MpSearchResult *b)
{
  assert_int_equal (a->stats.space, b->stats.space);
  assert_int_equal (a->stats.evaluated + a->stats.pruned, b->stats.evaluated + b->stats.pruned);
  assert_int_equal (a->plans->len, b->plans->len);
  for (guint i = 0; i < a->plans->len; i++)
    {
      g_autofree char *what = g_strdup_printf ("plan %u", i + 1);
      assert_same_plan (g_ptr_array_index (a->plans, i), g_ptr_array_index (b->plans, i), what);
    }
  assert_same_plan (a->stats.smallest, b->stats.smallest, "smallest");
  assert_same_plan (a->stats.free_best, b->stats.free_best, "free_best");
  for (guint f = 0; f < MP_FAMILY_N; f++)
    {
      assert_same_plan (a->stats.family_best[f], b->stats.family_best[f],
                        mp_plan_family_id (f));
      assert_same_plan (a->stats.family_smallest[f], b->stats.family_smallest[f],
                        mp_plan_family_id (f));
    }
}

/* ---- the brute force ------------------------------------------------------------------- *
 * Enumerates a space wider than the search's (every schedule with every vpp up to twice
 * MAX_VPP, every ZeRO stage with every zero_shard and both reshard_after_forward, sequence
 * parallelism, both rank orders, every cp dividing the devices), keeps the configs that pass mp_parallel_config_check and the batch, and of
 * those the ones search.c says it searches (in_search_space), and evaluates each with
 * mp_plan_evaluate, which computes its own layer split. */

static const MpParallelDim MEGATRON[MP_DIM_N] = { MP_DIM_TP, MP_DIM_CP, MP_DIM_DP, MP_DIM_PP };
static const MpParallelDim PP_INNER[MP_DIM_N] = { MP_DIM_TP, MP_DIM_CP, MP_DIM_PP, MP_DIM_DP };

/* search.c's documented restrictions, beyond the constraints of a valid config. */
static gboolean
in_search_space (const Pair *p, const MpParallelConfig *c, gboolean pp_inner)
{
  const MpModel *m = p->model;
  guint seq = (guint) m->seq_len;
  /* Context parallelism only for long sequences: powers of two, >= 4096 tokens a rank,
   * the sequence in 2 cp load-balanced pieces. */
  if (c->cp > 1 && ((c->cp & (c->cp - 1)) != 0 || seq % (2 * c->cp) != 0 || seq / c->cp < 4096))
    return FALSE;
  if (c->sequence_parallel && (c->tp == 1 || m->arch != MP_ARCH_TRANSFORMER))
    return FALSE;
  if (c->zero > 0 && c->dp * c->cp == 1)   /* nothing to shard over */
    return FALSE;
  /* Selective recompute (of the attention core) saves nothing with fused attention. */
  if (c->recompute == MP_RECOMPUTE_SELECTIVE && c->flash_attention)
    return FALSE;
  if (c->micro_batch_size > mp_planner_max_micro_batch (m))
    return FALSE;
  /* MoE (moe14): etp divides tp; the all-gather dispatcher once tokens move. */
  guint etp = mp_parallel_config_etp (c);
  if (c->tp % etp != 0 || (c->dispatcher == MP_DISPATCH_ALLGATHER && etp * c->ep == 1))
    return FALSE;
  /* No pipeline or one micro-batch: layer placement; else the three pipelined schedules,
   * interleaved with 2..MAX_VPP chunks dividing the blocks per stage. */
  if (c->pp == 1 || c->num_micro_batches == 1)
    {
      if (c->schedule != MP_SCHEDULE_NONE || c->vpp != 1)
        return FALSE;
    }
  else if (c->schedule == MP_SCHEDULE_NONE)
    return FALSE;
  else if (c->schedule == MP_SCHEDULE_INTERLEAVED)
    {
      guint per_stage = n_blocks (m) / c->pp;
      if (c->vpp < 2 || c->vpp > SEARCH_MAX_VPP || per_stage % c->vpp != 0)
        return FALSE;
    }
  /* HSDP (fsdp17): whole shard groups, or a node's worth of replicas (tp apart). */
  guint per_node = p->cluster->groups[0].devices_per_node;
  if (c->zero_shard != 0 && (c->zero_shard * c->tp != per_node
                             || c->zero_shard >= c->dp * c->cp))
    return FALSE;
  /* Megatron's rank order, and pipeline neighbours inside a node when tp leaves room. */
  if (pp_inner)
    return c->dp > 1 && c->pp > 1 && c->tp * c->cp < p->cluster->groups[0].devices_per_node;
  return TRUE;
}

typedef struct {
  GPtrArray *plans;            /* MpPlan*: every valid config of the search's space */
  GHashTable *by_key;          /* config_key -> plan (borrowed from plans) */
  guint64 fitting;
  const MpPlan *best;          /* by mp_plan_compare, of those that fit */
  const MpPlan *family_best[MP_FAMILY_N];
} Brute;

static void
brute_free (Brute *b)
{
  if (b == NULL)
    return;
  g_hash_table_unref (b->by_key);
  g_ptr_array_unref (b->plans);
  g_free (b);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Brute, brute_free)

static void
brute_add (Brute *b, const Pair *p, const MpParallelConfig *c, guint batch)
{
  g_autoptr(GError) error = NULL;
  MpPlan *plan = g_new0 (MpPlan, 1);
  if (!mp_plan_evaluate (p->ctx, c, batch, plan, &error))
    fail_msg ("evaluate of a checked config: %s", error->message);
  g_ptr_array_add (b->plans, plan);
  char *key = config_key (&plan->cfg);
  if (!g_hash_table_insert (b->by_key, key, plan))
    fail_msg ("brute force: %s twice", key);
  if (!plan->fits)
    return;
  b->fitting++;
  if (b->best == NULL || mp_plan_compare (plan, b->best) < 0)
    b->best = plan;
  if (mp_framework_runners (p->model, &plan->cfg) == 0)
    return;                    /* in no family's row: no framework runs it */
  const MpPlan **fb = &b->family_best[plan->family];
  if (*fb == NULL || mp_plan_compare (plan, *fb) < 0)
    *fb = plan;
}

/* Every choice of the per-replica dimensions for given tp, cp, pp, dp and micro-batch. */
static void
brute_force_choices (Brute *b, const Pair *p, MpParallelConfig *c, guint batch)
{
  guint experts = (guint) MAX (p->model->experts, 1u);
  guint etps = p->model->experts > 0 ? c->tp * c->cp * c->dp : 1;
  for (guint etp = 1; etp <= etps; etp++)
  for (int d = 0; d <= (p->model->experts > 0 ? MP_DISPATCH_ALLGATHER : 0); d++)
  for (guint ep = 1; ep <= experts; ep++)
    for (int sp = 0; sp <= 1; sp++)
      for (int r = MP_RECOMPUTE_NONE; r <= MP_RECOMPUTE_FULL; r++)
        for (guint zero = 0; zero <= 3; zero++)
          for (guint shard = 0; shard <= c->dp * c->cp; shard += shard ? 1 : 2)
          for (int keep = 0; keep <= 1; keep++)
          for (int sch = 0; sch <= MP_SCHEDULE_NONE; sch++)
            for (guint vpp = 1; vpp <= 2 * SEARCH_MAX_VPP; vpp++)
              for (int o = 0; o <= 1; o++)
                {
                  c->zero_shard = shard, c->no_reshard = keep;
                  c->ep = ep, c->sequence_parallel = sp, c->recompute = (MpRecompute) r;
                  c->etp = p->model->experts > 0 ? etp : 0;
                  c->dispatcher = (MpDispatcher) d;
                  c->zero = zero, c->schedule = (MpSchedule) sch, c->vpp = vpp;
                  memcpy (c->order, o ? PP_INNER : MEGATRON, sizeof c->order);
                  if (mp_parallel_config_check (c, p->model, p->cluster, NULL)
                      && in_search_space (p, c, o))
                    brute_add (b, p, c, batch);
                }
}

static Brute *
brute_force (const Pair *p, guint batch)
{
  Brute *b = g_new0 (Brute, 1);
  b->plans = g_ptr_array_new_with_free_func ((GDestroyNotify) mp_plan_free);
  b->by_key = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  guint world = p->cluster->world_size;
  /* Every split of the devices into tp x cp x pp x dp, every micro-batch that divides a
   * replica's share of the batch. */
  for (guint tp = 1; tp <= world; tp++)
    for (guint cp = 1; cp <= world / tp; cp++)
      for (guint pp = 1; pp <= world / (tp * cp); pp++)
        {
          if (world % (tp * cp * pp) != 0)
            continue;
          guint dp = world / (tp * cp * pp);
          if (batch % dp != 0)
            continue;
          guint local = batch / dp;
          for (guint mbs = 1; mbs <= local; mbs++)
            {
              if (local % mbs != 0)
                continue;
              MpParallelConfig c;
              mp_parallel_config_init (&c);
              c.dp = dp, c.tp = tp, c.pp = pp, c.cp = cp;
              c.micro_batch_size = mbs, c.num_micro_batches = local / mbs;
              brute_force_choices (b, p, &c, batch);
            }
        }
  return b;
}

/* The small spaces the brute force covers: memory that binds, 8 GPUs in a node (ZeRO,
 * both rank orders, interleaving), GQA with context parallelism, experts, an MLP. */
static const struct {
  const char *model, *cluster;
  guint batch;                 /* 0: the model's */
} SPACES[] = {
  { "gpt3-125m", "workstation-pcie4", 0 },
  { "gpt3-1.3b", "dgx-a100-40g:1", 32 },
  { "tiny-gpt", "dgx-a100-80g:2", 8 },
  { "llama3-8b", "dgx-h100:1", 32 },
  { DATA ("model-moe.yaml"), "dgx-a100-80g:1", 8 },
  { "mlp-1024", "workstation-pcie4", 0 },
};

/* The brute force of SPACES[i], computed once for the tests that share it. */
static Pair *space_pair[G_N_ELEMENTS (SPACES)];
static Brute *space_brute[G_N_ELEMENTS (SPACES)];

static void
space_get (guint i, Pair **pair, Brute **brute)
{
  if (space_pair[i] == NULL)
    {
      space_pair[i] = pair_load (SPACES[i].model, SPACES[i].cluster);
      space_brute[i] = brute_force (space_pair[i], batch_of (space_pair[i], SPACES[i].batch));
    }
  *pair = space_pair[i];
  *brute = space_brute[i];
}

static int
group_teardown (void **state)
{
  (void) state;
  for (guint i = 0; i < G_N_ELEMENTS (SPACES); i++)
    {
      brute_free (g_steal_pointer (&space_brute[i]));
      pair_free (g_steal_pointer (&space_pair[i]));
    }
  return 0;
}

/* ---- 1. constraints ------------------------------------------------------------------- */

/* Asserts every constraint of a plan of P for GLOBAL_BATCH, re-deriving each from the
 * model and cluster rather than trusting the planner. */
static void
assert_plan_valid (const Pair *p, const MpPlan *plan, guint global_batch)
{
  const MpModel *m = p->model;
  const MpParallelConfig *c = &plan->cfg;
  g_autofree char *key = config_key (c);
  guint world = p->cluster->world_size;
  if (c->dp * c->tp * c->pp * c->cp != world || plan->world_size != world)
    fail_msg ("%s: uses %u of %u devices", key, c->dp * c->tp * c->pp * c->cp, world);
  if (m->arch == MP_ARCH_TRANSFORMER)
    {
      if (m->heads % c->tp || m->kv_heads % c->tp || m->ffn_hidden % c->tp)
        fail_msg ("%s: tp does not divide heads %u, kv heads %u, ffn %u", key,
                  (guint) m->heads, (guint) m->kv_heads, (guint) m->ffn_hidden);
      if (m->seq_len % c->cp)
        fail_msg ("%s: cp does not divide the sequence", key);
    }
  else
    {
      for (guint i = 0; i < m->n_mlp_layers; i++)
        if (m->mlp_layers[i].out % c->tp)
          fail_msg ("%s: tp does not divide layer %u's outputs", key, i);
      if (c->cp != 1 || c->sequence_parallel)
        fail_msg ("%s: cp or sp on an MLP", key);
    }
  if (c->sequence_parallel && c->tp == 1)
    fail_msg ("%s: sequence parallel without tp", key);
  if (c->pp > n_blocks (m))
    fail_msg ("%s: more stages than blocks", key);
  if (c->schedule == MP_SCHEDULE_INTERLEAVED)
    {
      if (c->vpp < 2 || (n_blocks (m) / c->pp) % c->vpp || c->num_micro_batches % c->pp)
        fail_msg ("%s: interleaved needs vpp | blocks per stage and pp | micro-batches", key);
    }
  else if (c->vpp != 1)
    fail_msg ("%s: vpp without the interleaved schedule", key);
  if ((c->pp == 1 || c->num_micro_batches == 1) != (c->schedule == MP_SCHEDULE_NONE))
    fail_msg ("%s: schedule none exactly without a pipeline or with one micro-batch", key);
  if ((guint64) c->dp * c->micro_batch_size * c->num_micro_batches != global_batch
      || plan->global_batch != global_batch)
    fail_msg ("%s: dp x mbs x m is not the global batch %u", key, global_batch);
  guint stage = c->tp * c->cp * c->dp, grid = mp_parallel_config_etp (c) * c->ep;
  if (m->experts == 0 ? c->ep != 1 || mp_parallel_config_etp (c) != c->tp
                      : (m->experts % c->ep || stage % grid))
    fail_msg ("%s: ep does not divide the experts or etp x ep the stage's tp x cp x dp", key);

  /* The layer split: pp x vpp chunks of contiguous layers, each with a block, the
   * embedding in the first and the head in the last. */
  guint chunks = c->pp * c->vpp, at = 0;
  assert_ptr_equal (c->chunk_layers, plan->chunk_layers);
  for (guint k = 0; k < chunks; k++)
    {
      guint blocks = 0;
      for (guint l = at; l < at + plan->chunk_layers[k] && l < m->n_layers; l++)
        blocks += m->layers[l].kind == MP_LAYER_BLOCK || m->layers[l].kind == MP_LAYER_DENSE;
      if (blocks == 0)
        fail_msg ("%s: chunk %u has no block", key, k);
      at += plan->chunk_layers[k];
    }
  if (at != m->n_layers)
    fail_msg ("%s: the chunks hold %u layers of %u", key, at, m->n_layers);
  if (m->arch == MP_ARCH_TRANSFORMER)
    {
      assert_int_equal (m->layers[0].kind, MP_LAYER_EMBEDDING);
      assert_int_equal (m->layers[m->n_layers - 1].kind, MP_LAYER_HEAD);
    }

  g_autoptr(GError) error = NULL;
  if (!mp_parallel_config_check (c, m, p->cluster, &error))
    fail_msg ("%s: %s", key, error->message);

  /* Fits: evaluated again, and every stage's memory under its capacity. */
  MpPlan again;
  if (!mp_plan_evaluate (p->ctx, c, global_batch, &again, &error))
    fail_msg ("%s: %s", key, error->message);
  g_free (again.chunk_layers);
  if (!plan->fits || !again.fits)
    fail_msg ("%s: does not fit", key);
  if (again.step_s != plan->step_s || again.memory.peak_bytes != plan->memory.peak_bytes)
    fail_msg ("%s: evaluated again: %.9g s, %.9g B; the search said %.9g s, %.9g B", key,
              again.step_s, again.memory.peak_bytes, plan->step_s, plan->memory.peak_bytes);
  g_autofree MpStageMemory *mem = g_new0 (MpStageMemory, c->pp);
  guint binding = mp_cost_memory (p->ctx, c, mem);
  for (guint i = 0; i < c->pp; i++)
    if (mem[i].total_bytes > mem[i].capacity_bytes)
      fail_msg ("%s: stage %u needs %.6g B of %.6g B", key, i, mem[i].total_bytes,
                mem[i].capacity_bytes);
  assert_true (plan->memory.peak_bytes == mem[binding].total_bytes);
  assert_true (plan->step_s > 0 && plan->tokens_per_s > 0);
}

static void
test_planner_plans_satisfy_constraints (void **state)
{
  (void) state;
  static const struct { const char *model, *cluster; guint batch; } pairs[] = {
    { "gpt3-1.3b", "dgx-a100-80g:2", 0 },
    { "mixtral-8x7b", "dgx-h100:2", 0 },     /* experts, long sequences: ep and cp */
    { "llama3-8b", "dgx-h100:1", 0 },
    { "tiny-gpt", "dgx-a100-80g:1", 0 },
    { "mlp-1024", "workstation-pcie4", 0 },
    { DATA ("model-moe.yaml"), "dgx-a100-80g:1", 16 },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (pairs); i++)
    {
      g_autoptr(Pair) p = pair_load (pairs[i].model, pairs[i].cluster);
      g_autoptr(MpSearchResult) res = search_ok (p, pairs[i].batch, 200, NULL);
      assert_true (res->plans->len > 0);
      assert_true (res->plans->len == MIN (200, res->stats.feasible));
      for (guint k = 0; k < res->plans->len; k++)
        assert_plan_valid (p, g_ptr_array_index (res->plans, k), batch_of (p, pairs[i].batch));
    }
}

static void
test_planner_plans_ranked (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-1.3b", "dgx-a100-80g:2");
  g_autoptr(MpSearchResult) res = search_ok (p, 64, 100, NULL);
  assert_int_equal (res->plans->len, 100);
  for (guint k = 1; k < res->plans->len; k++)
    {
      const MpPlan *a = g_ptr_array_index (res->plans, k - 1);
      const MpPlan *b = g_ptr_array_index (res->plans, k);
      if (mp_plan_compare (a, b) >= 0 || a->step_s > b->step_s)
        fail_msg ("plan %u (%.9g s) is not ahead of plan %u (%.9g s)", k, a->step_s, k + 1,
                  b->step_s);
    }
  /* The top 5 are the first 5 of the top 100. */
  g_autoptr(MpSearchResult) top5 = search_ok (p, 64, 5, NULL);
  assert_int_equal (top5->plans->len, 5);
  for (guint k = 0; k < 5; k++)
    assert_same_plan (g_ptr_array_index (top5->plans, k), g_ptr_array_index (res->plans, k),
                      "top 5");
}

/* ---- 2. what is dropped violates a constraint ------------------------------------------ */

static void
test_planner_drops_only_violations (void **state)
{
  (void) state;
  for (guint i = 0; i < G_N_ELEMENTS (SPACES); i++)
    {
      Pair *p;
      Brute *b;
      space_get (i, &p, &b);
      g_autoptr(MpSearchResult) res = search_ok (p, SPACES[i].batch, ALL_PLANS, NULL);
      const char *name = SPACES[i].model;
      if (res->stats.space != b->plans->len || res->stats.feasible != b->fitting)
        fail_msg ("%s on %s: the search evaluated %" G_GUINT64_FORMAT " configs, %"
                  G_GUINT64_FORMAT " fitting; the brute force has %u, %" G_GUINT64_FORMAT,
                  name, SPACES[i].cluster, res->stats.space, res->stats.feasible,
                  b->plans->len, b->fitting);
      /* Every plan that fits is returned, with the split and figures the brute force
       * computed on its own. */
      assert_int_equal (res->plans->len, b->fitting);
      for (guint k = 0; k < res->plans->len; k++)
        {
          const MpPlan *plan = g_ptr_array_index (res->plans, k);
          g_autofree char *key = config_key (&plan->cfg);
          const MpPlan *ref = g_hash_table_lookup (b->by_key, key);
          if (ref == NULL || !ref->fits)
            fail_msg ("%s: the search kept %s, outside the brute force's fitting set", name, key);
          if (memcmp (plan->chunk_layers, ref->chunk_layers,
                      plan->cfg.pp * plan->cfg.vpp * sizeof (guint)) != 0)
            fail_msg ("%s on %s: %s split %u,%u,%u.. against the brute force's %u,%u,%u..",
                      name, SPACES[i].cluster, key, plan->chunk_layers[0],
                      plan->chunk_layers[1], plan->chunk_layers[2], ref->chunk_layers[0],
                      ref->chunk_layers[1], ref->chunk_layers[2]);
          assert_same_plan (plan, ref, key);
        }
      /* Non-vacuous: memory drops some configs in the first space. */
      if (i == 0)
        assert_true (b->fitting > 0 && b->fitting < b->plans->len);
    }
}

/* ---- 3. the optimum ------------------------------------------------------------------- */

static void
test_planner_finds_brute_force_optimum (void **state)
{
  (void) state;
  for (guint i = 0; i < G_N_ELEMENTS (SPACES); i++)
    {
      Pair *p;
      Brute *b;
      space_get (i, &p, &b);
      double min_step = G_MAXDOUBLE;
      for (guint k = 0; k < b->plans->len; k++)
        {
          const MpPlan *plan = g_ptr_array_index (b->plans, k);
          if (plan->fits)
            min_step = MIN (min_step, plan->step_s);
        }
      assert_non_null (b->best);
      g_autoptr(MpSearchResult) res = search_ok (p, SPACES[i].batch, 1, NULL);
      assert_int_equal (res->plans->len, 1);
      const MpPlan *best = g_ptr_array_index (res->plans, 0);
      if (best->step_s != min_step)
        fail_msg ("%s on %s: best %.12g s, brute force %.12g s", SPACES[i].model,
                  SPACES[i].cluster, best->step_s, min_step);
      assert_same_plan (best, b->best, "best");
    }
}

/* ---- 7. family bests ------------------------------------------------------------------ */

static void
test_planner_family_bests (void **state)
{
  (void) state;
  guint seen = 0;
  for (guint i = 0; i < G_N_ELEMENTS (SPACES); i++)
    {
      Pair *p;
      Brute *b;
      space_get (i, &p, &b);
      g_autoptr(MpSearchResult) res = search_ok (p, SPACES[i].batch, 1, NULL);
      for (guint f = 0; f < MP_FAMILY_N; f++)
        {
          const MpPlan *fb = res->stats.family_best[f];
          const MpPlan *ref = b->family_best[f];
          if ((fb == NULL) != (ref == NULL))
            fail_msg ("%s on %s: family %s: search %s, brute force %s", SPACES[i].model,
                      SPACES[i].cluster, mp_plan_family_id (f), fb ? "has one" : "none",
                      ref ? "has one" : "none");
          if (fb == NULL)
            continue;
          seen |= 1u << f;
          assert_true (fb->fits);
          assert_int_equal (fb->family, f);
          assert_int_equal (mp_plan_family_of (&fb->cfg), f);
          assert_true (mp_framework_runners (p->model, &fb->cfg) != 0);
          /* No plan of the family is faster. */
          for (guint k = 0; k < b->plans->len; k++)
            {
              const MpPlan *q = g_ptr_array_index (b->plans, k);
              if (q->fits && mp_plan_family_of (&q->cfg) == f && q->step_s < fb->step_s
                  && mp_framework_runners (p->model, &q->cfg) != 0)
                {
                  g_autofree char *key = config_key (&q->cfg);
                  fail_msg ("family %s: %s is faster (%.9g s < %.9g s)", mp_plan_family_id (f),
                            key, q->step_s, fb->step_s);
                }
            }
          assert_same_plan (fb, ref, mp_plan_family_id (f));
        }
    }
  /* Every family occurs in some space. */
  assert_int_equal (seen, (1u << MP_FAMILY_N) - 1);
}

/* ---- 4. determinism ------------------------------------------------------------------- */

static void
test_planner_deterministic (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-1.3b", "dgx-a100-80g:2");
  g_autoptr(MpSearchResult) a = search_ok (p, 0, 50, NULL);
  g_autoptr(MpSearchResult) b = search_ok (p, 0, 50, NULL);
  assert_same_result (a, b);
  /* A second context over the same files gives the same too. */
  g_autoptr(Pair) q = pair_load ("gpt3-1.3b", "dgx-a100-80g:2");
  g_autoptr(MpSearchResult) c = search_ok (q, 0, 50, NULL);
  assert_same_result (a, c);
}

/* Searches P in N shards, packs each and merges them. */
static MpSearchResult *
search_sharded (const Pair *p, guint batch, guint top_k, const MpPlanPins *pins, guint n)
{
  g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  MpSearchOptions opts = { .global_batch = batch, .top_k = top_k, .pins = pins,
                           .limited_space = TRUE };
  for (guint s = 0; s < n; s++)
    {
      opts.shard = s;
      opts.n_shards = n;
      g_autoptr(GError) error = NULL;
      g_autoptr(MpSearchResult) part = mp_planner_search (p->ctx, &opts, &error);
      if (part == NULL)
        fail_msg ("shard %u: %s", s, error->message);
      assert_true (part->stats.evaluated > 0);
      g_ptr_array_add (parts, mp_search_result_pack (part));
    }
  opts.shard = opts.n_shards = 0;
  g_autoptr(GError) error = NULL;
  MpSearchResult *merged = mp_search_result_merge (p->ctx, &opts, parts, 0, &error);
  if (merged == NULL)
    fail_msg ("merge: %s", error->message);
  return merged;
}

static void
test_planner_shards_merge_to_whole (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-1.3b", "dgx-a100-80g:2");
  g_autoptr(MpSearchResult) whole = search_ok (p, 0, 20, NULL);
  g_autoptr(MpSearchResult) merged = search_sharded (p, 0, 20, NULL, 3);
  assert_same_result (whole, merged);

  /* With pins (free_best travels too), and on an MoE model. */
  g_autoptr(MpPlanPins) pins = pins_ok ("pp=2");
  g_autoptr(MpSearchResult) whole_pinned = search_ok (p, 0, 20, pins);
  g_autoptr(MpSearchResult) merged_pinned = search_sharded (p, 0, 20, pins, 3);
  assert_non_null (whole_pinned->stats.free_best);
  assert_same_result (whole_pinned, merged_pinned);

  g_autoptr(Pair) moe = pair_load (DATA ("model-moe.yaml"), "dgx-a100-80g:1");
  g_autoptr(MpSearchResult) whole_moe = search_ok (moe, 8, 20, NULL);
  g_autoptr(MpSearchResult) merged_moe = search_sharded (moe, 8, 20, NULL, 3);
  assert_same_result (whole_moe, merged_moe);
}

/* The stack (acc16) is the user's: every plan of a search pinned to stack=torchtitan
 * runs under it (the best plan ignoring the pins too), it survives the MPI merge's wire
 * record, and the plan file states it and reads back to it; a plan under the default
 * writes no `stack` line. On an H100 the FA2 stack is slower (its attention kernel). */
static void
test_planner_stack_pinned (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-1.3b", "dgx-h100:1");
  g_autoptr(MpPlanPins) pins = pins_ok ("stack=torchtitan,pp=1");
  g_autoptr(MpSearchResult) whole = search_ok (p, 0, 10, pins);
  g_autoptr(MpSearchResult) merged = search_sharded (p, 0, 10, pins, 2);
  assert_same_result (whole, merged);
  assert_true (whole->plans->len > 0);
  for (guint i = 0; i < merged->plans->len; i++)
    assert_int_equal (((MpPlan *) g_ptr_array_index (merged->plans, i))->cfg.stack,
                      MP_STACK_TORCHTITAN);
  assert_int_equal (whole->stats.free_best->cfg.stack, MP_STACK_TORCHTITAN);

  const MpPlan *best = g_ptr_array_index (whole->plans, 0);
  g_autofree char *yaml = mp_plan_to_yaml (best, p->model, p->cluster, NULL);
  assert_non_null (strstr (yaml, "  stack: torchtitan\n"));
  g_autoptr(GError) error = NULL;
  g_autoptr(MpPlanFile) file = mp_plan_file_load_data ("p.yaml", yaml, strlen (yaml), &error);
  if (file == NULL)
    fail_msg ("%s", error->message);
  assert_int_equal (file->cfg.stack, MP_STACK_TORCHTITAN);

  g_autoptr(MpPlanPins) plain = pins_ok ("pp=1");
  g_autoptr(MpSearchResult) megatron = search_ok (p, 0, 10, plain);
  const MpPlan *mbest = g_ptr_array_index (megatron->plans, 0);
  g_autofree char *myaml = mp_plan_to_yaml (mbest, p->model, p->cluster, NULL);
  assert_null (strstr (myaml, "stack:"));
  assert_true (best->step_s > mbest->step_s);
}

/* DeepSpeed's pipeline engine runs 1F1B over every micro-batch it is given: a placement
 * without pipelining is DeepSpeed's only with one micro-batch. */
static void
test_planner_deepspeed_pipelines_every_micro_batch (void **state)
{
  (void) state;
  MpParallelConfig c;
  mp_parallel_config_init (&c);
  c.pp = 2;
  c.schedule = MP_SCHEDULE_1F1B;
  c.num_micro_batches = 4;
  assert_null (mp_framework_rejects (MP_FRAMEWORK_DEEPSPEED, &c));
  c.schedule = MP_SCHEDULE_NONE;
  assert_non_null (mp_framework_rejects (MP_FRAMEWORK_DEEPSPEED, &c));
  c.num_micro_batches = 1;
  assert_null (mp_framework_rejects (MP_FRAMEWORK_DEEPSPEED, &c));
  c.schedule = MP_SCHEDULE_GPIPE;
  assert_non_null (mp_framework_rejects (MP_FRAMEWORK_DEEPSPEED, &c));
}

static void
test_planner_merge_refuses_malformed (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("tiny-gpt", "dgx-a100-80g:1");
  g_autoptr(MpSearchResult) res = search_ok (p, 0, 5, NULL);
  g_autoptr(GBytes) packed = mp_search_result_pack (res);
  gsize len;
  const guint8 *data = g_bytes_get_data (packed, &len);
  MpSearchOptions opts = { .top_k = 5 };
  /* Truncated mid-record, and a wrong magic number. */
  g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_ptr_array_add (parts, g_bytes_new (data, len - sizeof (guint32)));
  g_autoptr(GError) error = NULL;
  assert_null (mp_search_result_merge (p->ctx, &opts, parts, 0, &error));
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_RUNTIME));
  g_clear_error (&error);
  g_autofree guint8 *bad = g_memdup2 (data, len);
  bad[0] ^= 0xff;
  g_ptr_array_set_size (parts, 0);
  g_ptr_array_add (parts, g_bytes_new (bad, len));
  assert_null (mp_search_result_merge (p->ctx, &opts, parts, 0, &error));
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_RUNTIME));
}

/* ---- 5. --fix ------------------------------------------------------------------------- */

typedef struct {
  const char *text;
  int dp, tp, pp, zero, mbs, sp;       /* -1: not pinned */
  int recompute, schedule;
} PinCase;

static gboolean
pin_case_matches (const PinCase *pc, const MpParallelConfig *c)
{
  return (pc->dp < 0 || c->dp == (guint) pc->dp) && (pc->tp < 0 || c->tp == (guint) pc->tp)
         && (pc->pp < 0 || c->pp == (guint) pc->pp)
         && (pc->zero < 0 || c->zero == (guint) pc->zero)
         && (pc->mbs < 0 || c->micro_batch_size == (guint) pc->mbs)
         && (pc->sp < 0 || c->sequence_parallel == pc->sp)
         && (pc->recompute < 0 || c->recompute == (MpRecompute) pc->recompute)
         && (pc->schedule < 0 || c->schedule == (MpSchedule) pc->schedule);
}

static void
test_planner_pins_honoured (void **state)
{
  (void) state;
  static const PinCase cases[] = {
    { "tp=2", -1, 2, -1, -1, -1, -1, -1, -1 },
    { "pp=2,schedule=1f1b", -1, -1, 2, -1, -1, -1, -1, MP_SCHEDULE_1F1B },
    { "zero=3,recompute=full", -1, -1, -1, 3, -1, -1, MP_RECOMPUTE_FULL, -1 },
    { "micro_batch_size=1,sequence_parallel=true", -1, -1, -1, -1, 1, 1, -1, -1 },
    { "dp=4", 4, -1, -1, -1, -1, -1, -1, -1 },
    { "tp=4, pp=4,schedule=interleaved-1f1b,", -1, 4, 4, -1, -1, -1, -1,
      MP_SCHEDULE_INTERLEAVED },
  };
  g_autoptr(Pair) p = pair_load ("gpt3-1.3b", "dgx-a100-80g:2");
  g_autoptr(MpSearchResult) all = search_ok (p, 64, ALL_PLANS, NULL);
  assert_int_equal (all->plans->len, all->stats.feasible);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const PinCase *pc = &cases[i];
      g_autoptr(GError) error = NULL;
      g_autoptr(MpPlanPins) pins = mp_plan_pins_parse (pc->text, &error);
      if (pins == NULL)
        fail_msg ("--fix '%s': %s", pc->text, error->message);
      g_autoptr(MpSearchResult) res = search_ok (p, 64, ALL_PLANS, pins);
      /* Every plan honours every pin, and they are exactly the pinned ones of the
       * unconstrained search, in its order. */
      guint want = 0;
      for (guint k = 0; k < all->plans->len; k++)
        {
          const MpPlan *plan = g_ptr_array_index (all->plans, k);
          if (!pin_case_matches (pc, &plan->cfg))
            continue;
          if (want >= res->plans->len)
            fail_msg ("--fix %s: plan %u of the free search is missing", pc->text, k + 1);
          assert_same_plan (g_ptr_array_index (res->plans, want), plan, pc->text);
          want++;
        }
      if (want == 0 || want != res->plans->len)
        fail_msg ("--fix %s: %u plans, %u expected", pc->text, res->plans->len, want);
      for (guint k = 0; k < res->plans->len; k++)
        assert_true (pin_case_matches (pc, &((MpPlan *) g_ptr_array_index (res->plans, k))->cfg));
      /* Pinning narrows what is kept, not what is searched; feasible counts the configs
       * known to fit, and a config neither kept nor smallest is pruned before its memory. */
      assert_int_equal (res->stats.space, all->stats.space);
      assert_true (res->stats.feasible <= all->stats.feasible);
      /* free_best is the unpinned best. */
      assert_same_plan (res->stats.free_best, g_ptr_array_index (all->plans, 0), "free_best");
    }
  /* Without pins there is no free_best. */
  assert_null (all->stats.free_best);
}

static void
test_planner_bad_pins_refused (void **state)
{
  (void) state;
  static const char *const bad[] = {
    "foo=1", "tensor=2", "tp", "tp=", "=2", "tp=0", "tp=x", "tp=2x", "tp=-1",
    "tp=99999999999", "zero=4", "recompute=sometimes", "schedule=round-robin",
    "sequence_parallel=maybe", "sequence_parallel=2", "pp=2,bogus=1",
    "recompute_method=sometimes", "recompute_modules=core_attn+fast", "recompute_modules=",
    "layers_per_chunk=4:x", "layers_per_chunk=4:0", "account_for_loss=2",
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(MpPlanPins) pins = mp_plan_pins_parse (bad[i], &error);
      if (pins != NULL)
        fail_msg ("--fix '%s' was accepted", bad[i]);
      if (!g_error_matches (error, MP_ERROR, MP_ERROR_USAGE))
        fail_msg ("--fix '%s': not a usage error", bad[i]);
      assert_non_null (strstr (error->message, "--fix"));
    }
  /* An unknown key lists the keys. */
  g_autoptr(GError) error = NULL;
  assert_null (mp_plan_pins_parse ("tensor=2", &error));
  assert_non_null (strstr (error->message, "micro_batch_size"));
  /* The empty list pins nothing. */
  g_autoptr(MpPlanPins) none = pins_ok ("");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  assert_true (mp_plan_pins_match (none, &cfg));
}

/* The layer split as Megatron-LM's flags make it (transformer_block.py
 * get_num_layers_to_build), in model layers per chunk: embedding and head included. */
static void
test_planner_megatron_split_pins (void **state)
{
  (void) state;
  g_autoptr(GError) error = NULL;
  g_autoptr(MpModel) l405 = mp_model_load ("llama3-405b", &error);
  assert_non_null (l405);
  /* 126 blocks + embedding + loss = 128 over pp16 vpp8: one each; the first chunk holds
   * only the embedding, the last only the head. */
  g_autoptr(MpPlanPins) acc = pins_ok ("pp=16,vpp=8,account_for_embedding=true,"
                                       "account_for_loss=true");
  guint n = 0;
  g_autofree guint *split = mp_plan_pins_split (acc, l405, &n, &error);
  assert_non_null (split);
  assert_int_equal (n, 128);
  for (guint c = 0; c < n; c++)
    assert_int_equal (split[c], 1);
  /* 94 blocks at pp8 vpp2, first stage 10 and last 12: the other six get 12 each, 6 per
   * chunk; the first chunk adds the embedding, the last the head. */
  g_autofree char *path = g_build_filename (MPPLAN_SRCDIR, "tests", "data", "model-94.yaml",
                                            NULL);
  g_autoptr(MpModel) m94 = mp_model_load (path, &error);
  assert_non_null (m94);
  g_autoptr(MpPlanPins) uneven = pins_ok ("pp=8,vpp=2,first_stage_layers=10,"
                                          "last_stage_layers=12");
  g_autofree guint *u = mp_plan_pins_split (uneven, m94, &n, &error);
  assert_non_null (u);
  assert_int_equal (n, 16);
  const guint want[16] = { 6, 6, 6, 6, 6, 6, 6, 6, 5, 6, 6, 6, 6, 6, 6, 7 };
  for (guint c = 0; c < n; c++)
    assert_int_equal (u[c], want[c]);
  /* No split pinned: NULL, no error. */
  g_autoptr(MpPlanPins) plain = pins_ok ("pp=8,vpp=4");
  assert_null (mp_plan_pins_split (plain, m94, &n, &error));
  assert_null (error);
  /* Broken rules are named. */
  static const struct { const char *fix, *rule; } bad[] = {
    { "pp=8,vpp=4,first_stage_layers=8,last_stage_layers=14", "divisible by vpp = 4" },
    { "pp=8,first_stage_layers=8,last_stage_layers=12", "left-over stages (6)" },
    { "pp=8,vpp=5,account_for_embedding=true,account_for_loss=true", "divisible by vpp" },
    { "pp=7,account_for_embedding=true", "divisible by pp = 7" },
    { "pp=2,first_stage_layers=10,account_for_loss=true", "do not combine" },
    { "pp=2,layers_per_chunk=48:47", "sums to 95 layers, the model has 96" },
    { "pp=2,vpp=2,layers_per_chunk=48:48", "2 entries but pp x vpp = 2 x 2" },
    { "pp=4,layers_per_chunk=1:95", "not a multiple of pp = 4" },
    { "first_stage_layers=4", "needs pp pinned" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(MpPlanPins) pins = pins_ok (bad[i].fix);
      g_autoptr(GError) err = NULL;
      g_autofree guint *none = mp_plan_pins_split (pins, m94, &n, &err);
      if (none != NULL || err == NULL)
        fail_msg ("--fix %s was accepted", bad[i].fix);
      if (strstr (err->message, bad[i].rule) == NULL)
        fail_msg ("--fix %s: '%s' does not say '%s'", bad[i].fix, err->message, bad[i].rule);
      assert_true (g_error_matches (err, MP_ERROR, MP_ERROR_USAGE));
    }
}

/* Pins that no valid config honours are an impossible request (planner.h), unlike pins
 * whose configs exist but do not fit (an empty result). */
static void
test_planner_unmatched_pins_refused (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-1.3b", "dgx-a100-80g:1");
  static const char *const never[] = { "tp=3", "cp=3", "ep=2", "dp=16", "vpp=2,pp=1" };
  for (gsize i = 0; i < G_N_ELEMENTS (never); i++)
    {
      g_autoptr(MpPlanPins) pins = pins_ok (never[i]);
      MpSearchOptions opts = { .top_k = 5, .pins = pins };
      g_autoptr(GError) error = NULL;
      g_autoptr(MpSearchResult) res = mp_planner_search (p->ctx, &opts, &error);
      if (res != NULL)
        fail_msg ("--fix %s: a result with %u plans", never[i], res->plans->len);
      assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
    }
  /* Also when split in shards: each shard refuses alike. */
  g_autoptr(MpPlanPins) pins = pins_ok ("tp=3");
  MpSearchOptions opts = { .top_k = 5, .pins = pins, .shard = 1, .n_shards = 3 };
  g_autoptr(GError) error = NULL;
  assert_null (mp_planner_search (p->ctx, &opts, &error));
}

/* ---- 6. impossible requests ----------------------------------------------------------- */

static void
test_planner_impossible_request (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("llama3-405b", "h200");
  g_autoptr(MpSearchResult) res = search_ok (p, 0, 5, NULL);
  assert_int_equal (res->plans->len, 0);
  assert_int_equal (res->stats.feasible, 0);
  assert_true (res->stats.evaluated > 0);
  const MpPlan *small = res->stats.smallest;
  assert_non_null (small);
  assert_false (small->fits);
  assert_true (small->memory.peak_bytes > small->memory.capacity_bytes);
  assert_true (small->memory.capacity_bytes > 140.0 * (1u << 30));
  for (guint f = 0; f < MP_FAMILY_N; f++)
    assert_null (res->stats.family_best[f]);
  /* The smallest footprint is the smallest of any config. */
  for (guint f = 0; f < MP_FAMILY_N; f++)
    if (res->stats.family_smallest[f])
      assert_true (res->stats.family_smallest[f]->memory.peak_bytes >= small->memory.peak_bytes);
  g_autofree char *text = mp_plan_infeasible_text (res, p->ctx);
  if (strstr (text, "fit") == NULL)
    fail_msg ("says nothing about fitting: %s", text);
  if (strstr (text, "devices") == NULL)
    fail_msg ("does not suggest more devices: %s", text);
}

static void
test_planner_indivisible_batch_refused (void **state)
{
  (void) state;
  /* 4 heads and 4 blocks on 64 GPUs: dp is at least 4 in the limited space (cp only
   * with >= 4096 tokens a rank), so a batch of 2 has no split there; the whole space has
   * some (dp 1 or 2 with a larger cp). */
  g_autoptr(Pair) p = pair_load ("tiny-gpt", "dgx-a100-80g:8");
  MpSearchOptions opts = { .global_batch = 2, .top_k = 5, .limited_space = TRUE };
  g_autoptr(GError) error = NULL;
  g_autoptr(MpSearchResult) res = mp_planner_search (p->ctx, &opts, &error);
  assert_null (res);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  opts.limited_space = FALSE;
  g_autoptr(MpSearchResult) whole = mp_planner_search (p->ctx, &opts, NULL);
  assert_non_null (whole);
  assert_true (whole->stats.space > 0);
}

/* Horovod fuses up to 128 MB (its default since 0.21), so compare prices its gradient
 * buckets at that; a model with less gradient than that is one bucket. */
static void
test_planner_horovod_fusion_buffer (void **state)
{
  (void) state;
  g_autoptr(Pair) big = pair_load ("gpt3-1.3b", "dgx-a100-80g:1");
  assert_true (mp_strategy_bucket_bytes (MP_STRATEGY_HOROVOD, big->model)
               == 128.0 * 1024 * 1024);
  g_autoptr(Pair) small = pair_load ("mlp-1024", "dgx-a100-80g:1");
  double g;
  mp_model_state_bytes_per_param (small->model, NULL, &g, NULL);
  assert_true (mp_strategy_bucket_bytes (MP_STRATEGY_HOROVOD, small->model)
               == small->model->params_total * g);
}

/* A context-parallel plan splits each layer's tokens: it is not labelled data parallel
 * (DDP, Horovod), which it could not run as. */
static void
test_planner_cp_family (void **state)
{
  (void) state;
  MpParallelConfig c = { .dp = 1, .tp = 1, .pp = 1, .vpp = 1, .cp = 8, .ep = 1 };
  assert_int_equal (mp_plan_family_of (&c), MP_FAMILY_TENSOR);
  c.dp = 4;
  assert_int_equal (mp_plan_family_of (&c), MP_FAMILY_2D);
  c.cp = 1;
  assert_int_equal (mp_plan_family_of (&c), MP_FAMILY_DATA);
  /* Sharded gradients are not what DDP or Horovod run: ZeRO-2 is FSDP's SHARD_GRAD_OP. */
  c.zero = 1;
  assert_int_equal (mp_plan_family_of (&c), MP_FAMILY_DATA);
  c.zero = 2;
  assert_int_equal (mp_plan_family_of (&c), MP_FAMILY_FSDP);
}

/* MFU is stated against the compute dtype's (bf16's) dense peak even for an fp8 plan, as
 * torchtitan reports it; an fp8 plan adds its share of the fp8 peak, a bf16 plan none,
 * and the summary names the peak each figure is of. */
static void
test_planner_mfu_peaks (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("llama3-8b", "dgx-h100");
  g_autoptr(MpSearchResult) res = search_ok (p, 0, 3, NULL);
  const double bf16 = 989.4e12, fp8 = 1978.9e12;    /* dgx-h100.yaml's dense peaks */
  MpPlan *w = g_ptr_array_index (res->plans, 0);
  MpParallelConfig cfg = w->cfg;
  cfg.fp8 = FALSE;
  MpPlan b, e;
  assert_true (mp_plan_evaluate (p->ctx, &cfg, w->global_batch, &b, NULL));
  mp_assert_close (b.mfu, b.tflops_per_gpu / bf16, 1e-9);
  assert_true (b.mfu_fp8 == 0);
  cfg.fp8 = TRUE;
  assert_true (mp_plan_evaluate (p->ctx, &cfg, w->global_batch, &e, NULL));
  mp_assert_close (e.mfu, e.tflops_per_gpu / bf16, 1e-9);
  mp_assert_close (e.mfu_fp8, e.tflops_per_gpu / fp8, 1e-9);
  assert_true (e.tflops_per_gpu > b.tflops_per_gpu);
  g_free (b.chunk_layers);
  /* The summary line of the fp8 plan, in the winner's place (the result owns it now). */
  g_free (w->chunk_layers);
  *w = e;
  g_autofree char *text = mp_plan_explain_text (res, p->ctx, FALSE);
  assert_non_null (strstr (text, "(model FLOPs, bf16 dense peak)"));
  assert_non_null (strstr (text, "of the fp8 peak"));
}

/* ---- heterogeneous clusters ------------------------------------------------------------ */

/* Forward layers stage PROGRAM runs per micro-batch. */
static guint
program_layers (const MpProgram *program)
{
  guint n = 0;
  for (guint i = 0; i < program->n_insns; i++)
    n += program->insns[i].kind == MP_INSN_FORWARD && program->insns[i].micro_batch == 0;
  return n;
}

/* gpt3-13b on 2 A100 nodes then 2 H100 nodes: the layer split follows each stage's device
 * (the H100 stage takes more layers, and the split is as fast as the best of every
 * two-way split tried by hand), MFU is against the devices' mean peak (never above
 * 100%), no tensor-parallel group mixes device kinds, and the simulator, the programs
 * and the closed form agree on the uneven plan. */
static void
test_planner_heterogeneous_split (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-13b", "mixed-a100-h100");
  assert_true (p->cluster->heterogeneous);
  g_autoptr(MpSearchResult) res = search_ok (p, 0, 20, NULL);
  const double a100 = 312e12, h100 = 989.4e12;      /* the zoo file's bf16 peaks */
  const MpPlan *two = NULL;
  for (guint i = 0; i < res->plans->len; i++)
    {
      const MpPlan *q = g_ptr_array_index (res->plans, i);
      assert_true (q->mfu > 0 && q->mfu <= 1.0);
      assert_true (mp_cost_groups_one_device (p->ctx, &q->cfg, TRUE, TRUE));
      if (two == NULL && q->cfg.pp == 2 && q->cfg.vpp == 1)
        two = q;
    }
  for (guint f = 0; f < MP_FAMILY_N; f++)
    if (res->stats.family_best[f] != NULL)
      {
        assert_true (res->stats.family_best[f]->mfu <= 1.0);
        assert_true (mp_cost_groups_one_device (p->ctx, &res->stats.family_best[f]->cfg, TRUE,
                                                TRUE));
      }
  assert_non_null (two);
  /* Stage 0 on the A100s, stage 1 on the H100s, about 3x faster: it takes more. */
  assert_int_equal (mp_cost_stage_group (p->ctx, &two->cfg, 0), 0);
  assert_int_equal (mp_cost_stage_group (p->ctx, &two->cfg, 1), 1);
  assert_true (two->chunk_layers[1] > 2 * two->chunk_layers[0]);
  /* Against the mean of the 16 A100 and 16 H100 peaks. */
  mp_assert_close (two->mfu, two->tflops_per_gpu / ((a100 + h100) / 2), 1e-9);
  /* Every hand split of the same config: none is more than 1% faster. */
  double best_hand = G_MAXDOUBLE;
  guint n = p->model->n_layers;
  for (guint first = 1; first < n; first++)
    {
      guint split[2] = { first, n - first };
      MpParallelConfig cfg = two->cfg;
      cfg.chunk_layers = split;
      MpPlan hand;
      if (!mp_plan_evaluate (p->ctx, &cfg, two->global_batch, &hand, NULL))
        continue;
      best_hand = MIN (best_hand, hand.step_s);
      g_free (hand.chunk_layers);
    }
  assert_true (two->step_s <= 1.01 * best_hand);
  /* An even split, what stage 0's costs alone give, is far slower. */
  guint even[2] = { n / 2, n - n / 2 };
  MpParallelConfig cfg = two->cfg;
  cfg.chunk_layers = even;
  MpPlan evenly;
  assert_true (mp_plan_evaluate (p->ctx, &cfg, two->global_batch, &evenly, NULL));
  assert_true (evenly.step_s > 1.5 * two->step_s);
  g_free (evenly.chunk_layers);
  /* The simulator costs each stage on the same device as the closed form. */
  g_autoptr(GError) error = NULL;
  guint n_programs = 0;
  MpProgram **programs = NULL;
  g_autoptr(MpSimResult) sim = mp_plan_simulate (p->ctx, two, NULL, &programs, &n_programs,
                                                 &error);
  if (sim == NULL)
    fail_msg ("simulate: %s", error->message);
  assert_true (fabs (sim->step_s / two->step_s - 1) < 0.03);
  /* The programs run the uneven split: each stage its chunk's layers. */
  assert_int_equal (n_programs, 2);
  assert_int_equal (program_layers (programs[0]), two->chunk_layers[0]);
  assert_int_equal (program_layers (programs[1]), two->chunk_layers[1]);
  mp_program_stages_free (programs);
  /* A tensor-parallel group strided over the whole cluster mixes A100s and H100s. */
  MpParallelConfig mixed;
  mp_parallel_config_init (&mixed);
  mixed.tp = 8;
  mixed.dp = 4;
  mixed.order[0] = MP_DIM_DP;
  mixed.order[1] = MP_DIM_TP;
  mixed.order[2] = MP_DIM_CP;
  mixed.order[3] = MP_DIM_PP;
  assert_false (mp_cost_groups_one_device (p->ctx, &mixed, TRUE, FALSE));
  assert_true (mp_cost_groups_one_device (p->ctx, &mixed, FALSE, FALSE));
}

/* Two plans that differ only in their layer split: the runner-up line shows both splits,
 * so it never reads as the winner's. */
static void
test_planner_runner_up_shows_split (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-13b", "mixed-a100-h100");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.dp = 16;
  cfg.pp = 2;
  cfg.micro_batch_size = 2;
  cfg.num_micro_batches = 32;
  MpSearchResult *res = g_new0 (MpSearchResult, 1);
  res->plans = g_ptr_array_new_with_free_func ((GDestroyNotify) mp_plan_free);
  guint splits[2][2] = { { 10, 32 }, { 11, 31 } };
  for (guint i = 0; i < 2; i++)
    {
      MpPlan *plan = g_new0 (MpPlan, 1);
      cfg.chunk_layers = splits[i];
      assert_true (mp_plan_evaluate (p->ctx, &cfg, 1024, plan, NULL));
      g_ptr_array_add (res->plans, plan);
    }
  /* The faster first, as a search ranks (which split wins moves with the devices'
   * relative speed; the line's content is what is tested). */
  double a = ((MpPlan *) res->plans->pdata[0])->step_s;
  double b = ((MpPlan *) res->plans->pdata[1])->step_s;
  assert_true (a != b);
  guint w = a < b ? 0 : 1;
  if (w == 1)
    {
      gpointer t = res->plans->pdata[0];
      res->plans->pdata[0] = res->plans->pdata[1];
      res->plans->pdata[1] = t;
    }
  g_autofree char *winner = g_strdup_printf ("(the winner: split=%u/%u)", splits[w][0],
                                             splits[w][1]);
  g_autofree char *loser = g_strdup_printf ("split=%u/%u", splits[1 - w][0],
                                            splits[1 - w][1]);
  g_autofree char *text = mp_plan_explain_text (res, p->ctx, FALSE);
  const char *line = strstr (text, "runner-up: ");
  assert_non_null (line);
  g_autofree char *runner = g_strndup (line, strcspn (line, "\n"));
  assert_non_null (strstr (runner, loser));
  assert_non_null (strstr (runner, winner));
  mp_search_result_free (res);
}

/* The labels verify prints: every one distinct, and details only on those that need them
 * (two plans apart only by their split show it; a third that differs in dp does not). */
static void
test_planner_phrases_tell_plans_apart (void **state)
{
  (void) state;
  g_autoptr(Pair) p = pair_load ("gpt3-13b", "mixed-a100-h100");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.pp = 2;
  cfg.micro_batch_size = 2;
  cfg.num_micro_batches = 32;
  guint splits[3][2] = { { 10, 32 }, { 11, 31 }, { 21, 21 } };
  const guint dps[3] = { 16, 16, 8 };
  g_autoptr(GPtrArray) plans = g_ptr_array_new_with_free_func ((GDestroyNotify) mp_plan_free);
  for (guint i = 0; i < 3; i++)
    {
      MpPlan *plan = g_new0 (MpPlan, 1);
      cfg.dp = dps[i];
      cfg.chunk_layers = splits[i];
      assert_true (mp_plan_evaluate (p->ctx, &cfg, dps[i] * 64, plan, NULL));
      g_ptr_array_add (plans, plan);
    }
  g_auto (GStrv) phrases = mp_plan_phrases ((const MpPlan *const *) plans->pdata, 3);
  assert_int_equal (g_strv_length (phrases), 3);
  for (guint i = 0; i < 3; i++)
    for (guint j = i + 1; j < 3; j++)
      assert_string_not_equal (phrases[i], phrases[j]);
  assert_non_null (strstr (phrases[0], "split=10/32"));
  assert_non_null (strstr (phrases[1], "split=11/31"));
  assert_null (strstr (phrases[2], "split="));
  assert_non_null (strstr (phrases[2], "dp=8"));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_planner_horovod_fusion_buffer),
    cmocka_unit_test (test_planner_cp_family),
    cmocka_unit_test (test_planner_mfu_peaks),
    cmocka_unit_test (test_planner_heterogeneous_split),
    cmocka_unit_test (test_planner_runner_up_shows_split),
    cmocka_unit_test (test_planner_phrases_tell_plans_apart),
    cmocka_unit_test (test_planner_plans_satisfy_constraints),
    cmocka_unit_test (test_planner_plans_ranked),
    cmocka_unit_test (test_planner_drops_only_violations),
    cmocka_unit_test (test_planner_finds_brute_force_optimum),
    cmocka_unit_test (test_planner_family_bests),
    cmocka_unit_test (test_planner_deterministic),
    cmocka_unit_test (test_planner_shards_merge_to_whole),
    cmocka_unit_test (test_planner_merge_refuses_malformed),
    cmocka_unit_test (test_planner_stack_pinned),
    cmocka_unit_test (test_planner_deepspeed_pipelines_every_micro_batch),
    cmocka_unit_test (test_planner_pins_honoured),
    cmocka_unit_test (test_planner_bad_pins_refused),
    cmocka_unit_test (test_planner_megatron_split_pins),
    cmocka_unit_test (test_planner_unmatched_pins_refused),
    cmocka_unit_test (test_planner_impossible_request),
    cmocka_unit_test (test_planner_indivisible_batch_refused),
  };
  return cmocka_run_group_tests_name ("planner", tests, NULL, group_teardown);
}
