/* test-plan-io.c - cmocka tests of planner/plan-io.c: the plan JSON object, plan files
 * written, read back and evaluated again bit for bit, references to models and clusters
 * (zoo names, ":N" suffixes, paths relative to the plan file), and bad plan files refused
 * with located messages.
 *
 * Zoo files are found through MPPLAN_DATADIR (the Makefile sets it to examples/);
 * fixtures are read from the source tree's tests/data/. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/test-util.h"
#include "planner/planner.h"
#include "common/error.h"
#include "common/yamldoc.h"

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#define DATA(name) MPPLAN_SRCDIR "/tests/data/" name

/* gpt3-1.3b on two DGX A100 nodes: 16 GPUs, shared by the tests. */
typedef struct {
  MpModel *model;
  MpCluster *cluster;
  MpCostContext *ctx;
  char *tmp;                   /* a scratch folder, removed at the end */
} Fixture;

static void
remove_tree (const char *path)
{
  if (g_file_test (path, G_FILE_TEST_IS_DIR) && !g_file_test (path, G_FILE_TEST_IS_SYMLINK))
    {
      g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
      const char *name;
      while (dir && (name = g_dir_read_name (dir)) != NULL)
        {
          g_autofree char *child = g_build_filename (path, name, NULL);
          remove_tree (child);
        }
      g_rmdir (path);
    }
  else
    g_unlink (path);
}

static int
setup (void **state)
{
  Fixture *f = g_new0 (Fixture, 1);
  g_autoptr(GError) error = NULL;
  f->model = mp_model_load ("gpt3-1.3b", &error);
  if (f->model != NULL)
    f->cluster = mp_cluster_load ("dgx-a100-80g:2", &error);
  if (f->cluster == NULL)
    {
      fprintf (stderr, "setup: %s\n", error->message);
      return -1;
    }
  f->ctx = mp_cost_context_new (f->model, f->cluster, NULL);
  f->tmp = g_dir_make_tmp ("test-plan-io-XXXXXX", NULL);
  *state = f;
  return f->tmp ? 0 : -1;
}

static int
teardown (void **state)
{
  Fixture *f = *state;
  mp_cost_context_free (f->ctx);
  mp_cluster_free (f->cluster);
  mp_model_free (f->model);
  if (f->tmp)
    remove_tree (f->tmp);
  g_free (f->tmp);
  g_free (f);
  return 0;
}

/* dp 2, tp 4, pp 2, micro-batch 2, global batch 64: a plan of 16 ranks to vary. */
static void
base_config (MpParallelConfig *cfg)
{
  mp_parallel_config_init (cfg);
  cfg->dp = 2;
  cfg->tp = 4;
  cfg->pp = 2;
  cfg->micro_batch_size = 2;
  cfg->num_micro_batches = 16;
}

static MpPlan *
evaluate_ok (const MpCostContext *ctx, const MpParallelConfig *cfg, guint global_batch)
{
  g_autoptr(GError) error = NULL;
  MpPlan *plan = g_new0 (MpPlan, 1);
  if (!mp_plan_evaluate (ctx, cfg, global_batch, plan, &error))
    fail_msg ("evaluate: %s", error->message);
  return plan;
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void
assert_member (JsonObject *o, const char *key, GType type)
{
  JsonNode *n = json_object_get_member (o, key);
  if (n == NULL)
    fail_msg ("JSON plan lacks '%s'", key);
  if (type == JSON_TYPE_OBJECT || type == JSON_TYPE_ARRAY)
    {
      if (!(type == JSON_TYPE_OBJECT ? JSON_NODE_HOLDS_OBJECT (n) : JSON_NODE_HOLDS_ARRAY (n)))
        fail_msg ("JSON plan: '%s' has the wrong type", key);
      return;
    }
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != type)
    fail_msg ("JSON plan: '%s' is a %s, expected a %s", key, json_node_type_name (n),
              g_type_name (type));
}

static void
test_plan_io_json_keys (void **state)
{
  Fixture *f = *state;
  MpParallelConfig cfg;
  base_config (&cfg);
  cfg.schedule = MP_SCHEDULE_INTERLEAVED;
  cfg.vpp = 2;
  g_autoptr(MpPlan) plan = evaluate_ok (f->ctx, &cfg, 64);
  g_autoptr(JsonNode) root = mp_plan_to_json (plan);
  assert_true (JSON_NODE_HOLDS_OBJECT (root));
  JsonObject *o = json_node_get_object (root);

  const char *ints[] = { "dp", "tp", "pp", "vpp", "cp", "ep", "zero", "micro_batch_size",
                         "num_micro_batches", "binding_stage", "world_size", "global_batch" };
  const char *doubles[] = { "step_s", "tokens_per_s", "flops_per_gpu", "hw_flops_per_gpu",
                            "mfu", "hfu" };
  const char *strings[] = { "recompute", "schedule", "family", "dominant" };
  for (gsize i = 0; i < G_N_ELEMENTS (ints); i++)
    assert_member (o, ints[i], G_TYPE_INT64);
  for (gsize i = 0; i < G_N_ELEMENTS (doubles); i++)
    assert_member (o, doubles[i], G_TYPE_DOUBLE);
  for (gsize i = 0; i < G_N_ELEMENTS (strings); i++)
    assert_member (o, strings[i], G_TYPE_STRING);
  assert_member (o, "sequence_parallel", G_TYPE_BOOLEAN);
  assert_member (o, "fits", G_TYPE_BOOLEAN);
  assert_member (o, "chunk_layers", JSON_TYPE_ARRAY);
  assert_member (o, "order", JSON_TYPE_ARRAY);
  assert_member (o, "memory_bytes", JSON_TYPE_OBJECT);
  assert_member (o, "time_s", JSON_TYPE_OBJECT);

  JsonObject *mem = json_object_get_object_member (o, "memory_bytes");
  const char *mem_keys[] = { "peak", "weights", "gradients", "optimizer", "activations", "other" };
  for (gsize i = 0; i < G_N_ELEMENTS (mem_keys); i++)
    assert_member (mem, mem_keys[i], G_TYPE_DOUBLE);
  assert_int_equal (json_object_get_size (mem), G_N_ELEMENTS (mem_keys));
  JsonObject *time = json_object_get_object_member (o, "time_s");
  const char *time_keys[] = { "compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm",
                              "bubble", "optimizer" };
  for (gsize i = 0; i < G_N_ELEMENTS (time_keys); i++)
    assert_member (time, time_keys[i], G_TYPE_DOUBLE);
  assert_int_equal (json_object_get_size (time), G_N_ELEMENTS (time_keys));
  JsonObject *reserve = json_object_get_object_member (o, "memory_reserve_bytes");
  assert_non_null (reserve);
  for (int k = 0; k < MP_RESERVE_N; k++)
    assert_member (reserve, mp_reserve_kind_name (k), G_TYPE_DOUBLE);
  assert_member (reserve, "headroom", G_TYPE_DOUBLE);
  /* 12 config + 6 figures + 3 breakdowns + 8 extra keys, and nothing else. */
  assert_int_equal (json_object_get_size (o), 29);

  assert_string_equal (json_object_get_string_member (o, "schedule"), "interleaved-1f1b");
  assert_string_equal (json_object_get_string_member (o, "family"), "hybrid");
  assert_int_equal (json_array_get_length (json_object_get_array_member (o, "chunk_layers")), 4);
  JsonArray *order = json_object_get_array_member (o, "order");
  assert_int_equal (json_array_get_length (order), 4);
  assert_string_equal (json_array_get_string_element (order, 0), "tp");
  assert_string_equal (json_array_get_string_element (order, 3), "pp");
  assert_true (json_object_get_double_member (o, "step_s") == plan->step_s);
  assert_int_equal (json_object_get_int_member (o, "world_size"), 16);
}

static void
test_plan_io_names (void **state)
{
  (void) state;
  const MpSchedule all[] = { MP_SCHEDULE_1F1B, MP_SCHEDULE_GPIPE, MP_SCHEDULE_INTERLEAVED,
                             MP_SCHEDULE_NONE };
  const char *want[] = { "1f1b", "gpipe", "interleaved-1f1b", "none" };
  for (gsize i = 0; i < G_N_ELEMENTS (all); i++)
    {
      MpSchedule back;
      assert_string_equal (mp_plan_schedule_name (all[i]), want[i]);
      assert_true (mp_schedule_from_name (want[i], &back));
      assert_int_equal (back, all[i]);
    }
  assert_string_equal (mp_plan_dim_name (MP_DIM_CP), "cp");
  assert_string_equal (mp_plan_family_id (MP_FAMILY_FSDP), "fsdp");
}

/* ---- round trips ----------------------------------------------------------------------- */

/* Writes PLAN to DIR/NAME, reads it back and evaluates it again. */
static MpPlanResolved *
round_trip (const Fixture *f, const MpPlan *plan, const MpModel *model,
            const MpCluster *cluster, const char *name)
{
  g_autofree char *path = g_build_filename (f->tmp, name, NULL);
  g_autofree char *yaml = mp_plan_to_yaml_for_path (plan, model, cluster, path,
                                                    "mpplan plan --test");
  g_autoptr(GError) error = NULL;
  if (!g_file_set_contents (path, yaml, -1, &error))
    fail_msg ("%s", error->message);
  g_autoptr(MpPlanFile) file = mp_plan_file_load (path, &error);
  if (file == NULL)
    fail_msg ("reload:\n%s\n---\n%s", error->message, yaml);
  assert_true (file->predicted_step_s == plan->step_s);
  MpPlanResolved *res = mp_plan_file_resolve (file, &error);
  if (res == NULL)
    fail_msg ("resolve:\n%s\n---\n%s", error->message, yaml);
  return res;
}

/* Every field of two plans is the same, bit for bit. */
static void
assert_same_plan (const MpPlan *a, const MpPlan *b)
{
  const MpParallelConfig *x = &a->cfg, *y = &b->cfg;
  assert_int_equal (x->dp, y->dp);
  assert_int_equal (x->tp, y->tp);
  assert_int_equal (x->pp, y->pp);
  assert_int_equal (x->cp, y->cp);
  assert_int_equal (x->vpp, y->vpp);
  assert_int_equal (x->ep, y->ep);
  assert_int_equal (x->sequence_parallel, y->sequence_parallel);
  assert_int_equal (x->zero, y->zero);
  assert_int_equal (x->recompute, y->recompute);
  assert_int_equal (x->micro_batch_size, y->micro_batch_size);
  assert_int_equal (x->num_micro_batches, y->num_micro_batches);
  assert_int_equal (x->schedule, y->schedule);
  assert_int_equal (x->flash_attention, y->flash_attention);
  assert_int_equal (x->fp32_grads, y->fp32_grads);
  assert_true (x->bucket_bytes == y->bucket_bytes);
  assert_memory_equal (x->order, y->order, sizeof x->order);
  assert_int_equal (x->placement == NULL, y->placement == NULL);
  if (x->placement)
    assert_memory_equal (x->placement, y->placement, a->world_size * sizeof (guint));
  assert_memory_equal (a->chunk_layers, b->chunk_layers, x->pp * x->vpp * sizeof (guint));
  assert_int_equal (a->global_batch, b->global_batch);
  assert_int_equal (a->world_size, b->world_size);
  assert_int_equal (a->family, b->family);
  assert_int_equal (a->fits, b->fits);
  /* Doubles compared exactly: the file must reproduce the very same evaluation. */
  assert_true (a->step_s == b->step_s);
  assert_true (a->tokens_per_s == b->tokens_per_s);
  assert_true (a->tflops_per_gpu == b->tflops_per_gpu);
  assert_true (a->hw_tflops_per_gpu == b->hw_tflops_per_gpu);
  assert_true (a->mfu == b->mfu && a->hfu == b->hfu);
  assert_memory_equal (&a->time, &b->time, sizeof a->time);
  assert_memory_equal (&a->memory, &b->memory, sizeof a->memory);
}

static void
check_round_trip (const Fixture *f, const MpParallelConfig *cfg, guint batch, const char *name)
{
  g_autoptr(MpPlan) plan = evaluate_ok (f->ctx, cfg, batch);
  g_autoptr(MpPlanResolved) res = round_trip (f, plan, f->model, f->cluster, name);
  assert_same_plan (plan, res->plan);
  assert_int_equal (res->cluster->world_size, f->cluster->world_size);
  /* And the JSON of both is the same text. */
  g_autoptr(JsonNode) ja = mp_plan_to_json (plan);
  g_autoptr(JsonNode) jb = mp_plan_to_json (res->plan);
  g_autofree char *sa = json_to_string (ja, FALSE);
  g_autofree char *sb = json_to_string (jb, FALSE);
  assert_string_equal (sa, sb);
}

static void
test_plan_io_round_trip (void **state)
{
  Fixture *f = *state;
  MpParallelConfig cfg;

  base_config (&cfg);
  check_round_trip (f, &cfg, 64, "plain.yaml");

  /* Interleaved, sequence parallel, selective recompute, ZeRO-1, a non-default order. */
  base_config (&cfg);
  cfg.schedule = MP_SCHEDULE_INTERLEAVED;
  cfg.vpp = 3;
  cfg.sequence_parallel = TRUE;
  cfg.recompute = MP_RECOMPUTE_SELECTIVE;
  cfg.zero = 1;
  cfg.order[0] = MP_DIM_TP;
  cfg.order[1] = MP_DIM_PP;
  cfg.order[2] = MP_DIM_CP;
  cfg.order[3] = MP_DIM_DP;
  check_round_trip (f, &cfg, 64, "interleaved.yaml");

  /* GPipe, full recompute, ZeRO-3, no flash attention, fp32 gradients, an odd bucket. */
  base_config (&cfg);
  cfg.schedule = MP_SCHEDULE_GPIPE;
  cfg.recompute = MP_RECOMPUTE_FULL;
  cfg.zero = 3;
  cfg.flash_attention = FALSE;
  cfg.fp32_grads = TRUE;
  cfg.bucket_bytes = 1e7 / 3.0;
  check_round_trip (f, &cfg, 64, "gpipe.yaml");

  /* Layer placement with an explicit uneven split and a permuted rank placement. */
  base_config (&cfg);
  cfg.schedule = MP_SCHEDULE_NONE;
  cfg.dp = 1;
  cfg.pp = 4;
  cfg.tp = 2;
  cfg.micro_batch_size = 1;
  cfg.num_micro_batches = 1;
  const guint split[] = { 9, 6, 6, 5 };
  cfg.chunk_layers = split;
  guint placement[8];
  for (guint r = 0; r < 8; r++)
    placement[r] = 15 - 2 * r;
  cfg.placement = placement;
  check_round_trip (f, &cfg, 1, "placement.yaml");

  /* Context parallel with a cp-outermost order. */
  base_config (&cfg);
  cfg.cp = 2;
  cfg.dp = 1;
  cfg.num_micro_batches = 32;
  cfg.order[0] = MP_DIM_DP;
  cfg.order[1] = MP_DIM_TP;
  cfg.order[2] = MP_DIM_PP;
  cfg.order[3] = MP_DIM_CP;
  check_round_trip (f, &cfg, 64, "cp.yaml");
}

/* Written text: version, zoo references with the node count, comments, placement. */
static void
test_plan_io_yaml_text (void **state)
{
  Fixture *f = *state;
  MpParallelConfig cfg;
  base_config (&cfg);
  g_autoptr(MpPlan) plan = evaluate_ok (f->ctx, &cfg, 64);
  g_autofree char *yaml = mp_plan_to_yaml (plan, f->model, f->cluster,
                                           "mpplan plan -m gpt3-1.3b\n-c x");
  const char *want[] = { "\nkind: plan\n", "\nversion: 1\n", "\nmodel: gpt3-1.3b\n",
                         "\ncluster: dgx-a100-80g:2\n", "\nglobal_batch: 64",
                         "# command: mpplan plan -m gpt3-1.3b -c x\n", "  schedule: 1f1b\n",
                         "  order: [tp, cp, dp, pp]", "#   stage 0: layers 0-", "(embedding ..",
                         ".. head)\n", "\nplacement: identity", "\npredicted:", "  step_s: ",
                         "# mpplan plan file, version 1, written by mpplan " };
  for (gsize i = 0; i < G_N_ELEMENTS (want); i++)
    if (strstr (yaml, want[i]) == NULL)
      fail_msg ("plan file lacks '%s':\n%s", want[i], yaml);
  /* The same plan writes the same text. */
  g_autofree char *again = mp_plan_to_yaml (plan, f->model, f->cluster,
                                            "mpplan plan -m gpt3-1.3b\n-c x");
  assert_string_equal (yaml, again);
}

/* A figure the cost model got wrong (NaN) is written as null and the file still loads. */
static void
test_plan_io_not_a_number (void **state)
{
  Fixture *f = *state;
  MpParallelConfig cfg;
  base_config (&cfg);
  g_autoptr(MpPlan) plan = evaluate_ok (f->ctx, &cfg, 64);
  plan->step_s = NAN;
  plan->time.t[MP_PHASE_BUBBLE] = INFINITY;
  g_autofree char *yaml = mp_plan_to_yaml (plan, f->model, f->cluster, NULL);
  assert_non_null (strstr (yaml, "  step_s: null"));
  g_autoptr(GError) error = NULL;
  g_autoptr(MpPlanFile) file = mp_plan_file_load_data ("nan.yaml", yaml, strlen (yaml), &error);
  if (file == NULL)
    fail_msg ("%s", error->message);
  assert_true (file->predicted_step_s == 0);
}

/* ---- references to models and clusters ---------------------------------------------------- */

static char *
copy_into (const char *src, const char *dir, const char *name)
{
  g_autofree char *data = NULL;
  gsize len = 0;
  assert_true (g_file_get_contents (src, &data, &len, NULL));
  g_mkdir_with_parents (dir, 0755);
  char *dst = g_build_filename (dir, name, NULL);
  assert_true (g_file_set_contents (dst, data, (gssize) len, NULL));
  return dst;
}

/* A model given by a relative path is written relative to the plan's folder and found
 * again from any working directory. */
static void
test_plan_io_relative_model (void **state)
{
  Fixture *f = *state;
  g_autofree char *models = g_build_filename (f->tmp, "rel", "my models", NULL);
  g_autofree char *copy = copy_into (DATA ("model-small.yaml"), models, "small.yaml");
  assert_true (g_file_test (copy, G_FILE_TEST_IS_REGULAR));
  g_autofree char *cwd = g_get_current_dir ();
  assert_int_equal (g_chdir (f->tmp), 0);

  g_autoptr(GError) error = NULL;
  g_autoptr(MpModel) model = mp_model_load ("rel/my models/small.yaml", &error);
  assert_non_null (model);
  g_autoptr(MpCluster) cluster = mp_cluster_load ("dgx-a100-80g:1", &error);
  assert_non_null (cluster);
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (model, cluster, NULL);
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.tp = 2;
  cfg.pp = 2;
  cfg.dp = 2;
  cfg.micro_batch_size = 2;
  cfg.num_micro_batches = 4;
  g_autoptr(MpPlan) plan = evaluate_ok (ctx, &cfg, 16);
  g_mkdir_with_parents ("rel/plans", 0755);
  g_autofree char *yaml = mp_plan_to_yaml_for_path (plan, model, cluster, "rel/plans/p.yaml",
                                                    NULL);
  assert_true (g_file_set_contents ("rel/plans/p.yaml", yaml, -1, NULL));
  /* A path with a space is quoted. */
  if (strstr (yaml, "\nmodel: \"../my models/small.yaml\"\n") == NULL)
    fail_msg ("model not relative to the plan:\n%s", yaml);

  /* With no plan path (stdout) the model is written by its absolute path. */
  g_autofree char *here = g_get_current_dir ();
  g_autofree char *no_path = mp_plan_to_yaml (plan, model, cluster, NULL);
  g_autofree char *want = g_strdup_printf ("\nmodel: \"%s/rel/my models/small.yaml\"\n", here);
  if (strstr (no_path, want) == NULL)
    fail_msg ("lacks '%s':\n%s", want, no_path);

  /* Read it from elsewhere. */
  assert_int_equal (g_chdir ("/"), 0);
  g_autofree char *plan_path = g_build_filename (f->tmp, "rel", "plans", "p.yaml", NULL);
  g_autoptr(MpPlanFile) file = mp_plan_file_load (plan_path, &error);
  assert_non_null (file);
  g_autoptr(MpPlanResolved) res = mp_plan_file_resolve (file, &error);
  if (res == NULL)
    fail_msg ("%s", error->message);
  assert_string_equal (res->model->name, "small-llama");
  assert_true (res->plan->step_s == plan->step_s);
  assert_int_equal (g_chdir (cwd), 0);
}

/* The hand-written fixture names its model by a bare file name beside it. */
static void
test_plan_io_fixture (void **state)
{
  (void) state;
  g_autofree char *cwd = g_get_current_dir ();
  assert_int_equal (g_chdir ("/"), 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(MpPlanFile) file = mp_plan_file_load (DATA ("plan-small.yaml"), &error);
  if (file == NULL)
    fail_msg ("%s", error->message);
  assert_string_equal (file->model, "model-small.yaml");
  assert_int_equal (file->cfg.schedule, MP_SCHEDULE_1F1B);
  assert_int_equal (file->cfg.recompute, MP_RECOMPUTE_NONE);   /* defaults */
  assert_null (file->chunk_layers);
  g_autoptr(MpPlanResolved) res = mp_plan_file_resolve (file, &error);
  if (res == NULL)
    fail_msg ("%s", error->message);
  assert_int_equal (res->plan->world_size, 4);
  assert_int_equal (res->cluster->world_size, 8);
  assert_true (res->plan->step_s > 0);
  assert_int_equal (g_chdir (cwd), 0);
}

/* Clusters: a zoo file named by its path is written as its zoo name; any other file
 * keeps its path; both keep the node count as ":N", which a heterogeneous cluster (node
 * groups) cannot take. */
static void
test_plan_io_cluster_reference (void **state)
{
  Fixture *f = *state;
  g_autofree char *own_dir = g_build_filename (f->tmp, "clusters", NULL);
  g_autofree char *own = copy_into (MPPLAN_SRCDIR "/examples/clusters/dgx-a100-40g.yaml",
                                    own_dir, "own.yaml");
  g_autofree char *own_arg = g_strconcat (own, ":2", NULL);
  g_autofree char *own_want = g_strconcat ("\ncluster: ", own, ":2\n", NULL);
  const struct { const char *arg; const char *want; } cases[] = {
    { own_arg, own_want },
    { MPPLAN_SRCDIR "/examples/clusters/dgx-a100-40g.yaml:2", "\ncluster: dgx-a100-40g:2\n" },
    { DATA ("cluster-hetero.yaml"), "/tests/data/cluster-hetero.yaml\n" },
    { "dgx-a100-80g", "\ncluster: dgx-a100-80g:128\n" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(MpCluster) cluster = mp_cluster_load (cases[i].arg, &error);
      if (cluster == NULL)
        fail_msg ("%s", error->message);
      g_autoptr(MpCostContext) ctx = mp_cost_context_new (f->model, cluster, NULL);
      MpParallelConfig cfg;
      base_config (&cfg);
      g_autoptr(MpPlan) plan = evaluate_ok (ctx, &cfg, 64);
      g_autofree char *name = g_strdup_printf ("cluster-%zu.yaml", i);
      g_autofree char *path = g_build_filename (f->tmp, name, NULL);
      g_autofree char *yaml = mp_plan_to_yaml_for_path (plan, f->model, cluster, path, NULL);
      if (strstr (yaml, cases[i].want) == NULL)
        fail_msg ("%s: lacks '%s':\n%s", cases[i].arg, cases[i].want, yaml);
      g_autoptr(MpPlanResolved) res = round_trip (f, plan, f->model, cluster, name);
      assert_int_equal (res->cluster->world_size, cluster->world_size);
      assert_same_plan (plan, res->plan);
    }
}

/* ---- refusals -------------------------------------------------------------------------- */

/* A complete valid plan text with line LINE (1-based) replaced by REPLACEMENT (which may
 * hold several lines, or be "" to drop the line). */
static char *
plan_text (guint line, const char *replacement)
{
  static const char *const lines[] = {
    "kind: plan",                         /* 1 */
    "version: 1",                         /* 2 */
    "model: gpt3-1.3b",                   /* 3 */
    "cluster: dgx-a100-80g:2",            /* 4 */
    "global_batch: 16",                   /* 5 */
    "parallel:",                          /* 6 */
    "  dp: 2",                            /* 7 */
    "  tp: 2",                            /* 8 */
    "  pp: 2",                            /* 9 */
    "  micro_batch_size: 2",              /* 10 */
    "  num_micro_batches: 4",             /* 11 */
    "  schedule: 1f1b",                   /* 12 */
    "layers_per_chunk: [13, 13]",         /* 13 */
    "placement: identity",                /* 14 */
  };
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < G_N_ELEMENTS (lines); i++)
    if (i + 1 != line)
      g_string_append_printf (s, "%s\n", lines[i]);
    else if (*replacement)
      g_string_append_printf (s, "%s\n", replacement);
  return g_string_free (s, FALSE);
}

/* The plan text with LINE replaced must be refused, on load or on resolve, with a message
 * containing WANT located at inline.yaml:AT:. */
static void
refused (guint line, const char *replacement, const char *want, guint at)
{
  g_autofree char *text = plan_text (line, replacement);
  g_autoptr(GError) error = NULL;
  g_autoptr(MpPlanFile) file = mp_plan_file_load_data ("inline.yaml", text, strlen (text), &error);
  g_autoptr(MpPlanResolved) res = file ? mp_plan_file_resolve (file, &error) : NULL;
  if (res != NULL)
    fail_msg ("accepted:\n%s", text);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  if (strstr (error->message, want) == NULL)
    fail_msg ("message lacks '%s':\n%s", want, error->message);
  g_autofree char *where = g_strdup_printf ("inline.yaml:%u:", at);
  if (strstr (error->message, where) == NULL)
    fail_msg ("not located at line %u:\n%s", at, error->message);
}

static void
test_plan_io_valid_text (void **state)
{
  (void) state;
  g_autofree char *text = plan_text (0, "");
  g_autoptr(GError) error = NULL;
  g_autoptr(MpPlanFile) file = mp_plan_file_load_data ("inline.yaml", text, strlen (text), &error);
  if (file == NULL)
    fail_msg ("%s", error->message);
  g_autoptr(MpPlanResolved) res = mp_plan_file_resolve (file, &error);
  if (res == NULL)
    fail_msg ("%s", error->message);
  assert_int_equal (res->plan->chunk_layers[0], 13);
}

static void
test_plan_io_refused (void **state)
{
  (void) state;
  refused (2, "version: 2", "plan file version 2, this mpplan reads version 1 (written by a "
           "newer mpplan", 2);
  refused (2, "", "missing required key 'version'", 1);
  refused (1, "kind: model", "'kind' is 'model'", 1);
  refused (10, "  micro_bach_size: 2", "unknown key 'micro_bach_size' (did you mean "
           "'micro_batch_size'?)", 10);
  refused (10, "  micro_bach_size: 2", "missing required key 'micro_batch_size'", 7);
  refused (1, "kind: plan\nmdel: x", "unknown key 'mdel' (did you mean 'model'?)", 2);
  refused (12, "  schedule: gpipee", "unknown value 'gpipee' (did you mean 'gpipe'?", 12);
  refused (12, "  recompute: some", "'recompute': unknown value 'some'", 12);
  refused (8, "  tp: 0", "'tp' = 0 is out of range [1,", 8);
  refused (8, "  tp: two", "'tp' must be a whole number", 8);
  refused (8, "  tp: 2\n  zero: 4", "'zero' = 4 is out of range [0, 3]", 9);
  refused (8, "  tp: 2\n  sequence_parallel: maybe", "must be true or false", 9);
  refused (13, "layers_per_chunk: [13, 12, 1]", "'layers_per_chunk' has 3 entries but pp x "
           "vpp = 2 x 1 = 2 model chunks", 13);
  refused (13, "layers_per_chunk: [26, 0]", "a chunk's layer count = 0 is out of range", 13);
  refused (13, "layers_per_chunk: 26", "must be a list of layer counts", 13);
  refused (5, "global_batch: 32", "dp 2 x micro_batch_size 2 x num_micro_batches 4 = 16 "
           "sequences, not global_batch 32", 5);
  refused (14, "placement: [0, 1, 2, 1, 4, 5, 6, 7]", "device 1 is given to rank 1 and rank 3",
           14);
  refused (14, "placement: [0, 1, 2]", "'placement' has 3 entries but dp x tp x pp x cp = 8", 14);
  refused (14, "placement: random", "must be 'identity' or a list", 14);
  refused (14, "placement: [0, 1, 2, 3, 4, 5, 6, 16]", "rank 7 is placed on device 16, but "
           "the cluster has devices 0 to 15", 14);
  refused (12, "  schedule: 1f1b\n  order: [tp, dp, dp, pp]", "repeated dimension 'dp'", 13);
  refused (12, "  schedule: 1f1b\n  order: [tp, dp]", "'order' must list tp, cp, dp and pp", 13);
  refused (12, "  schedule: 1f1b\n  order: [tp, xp, dp, pp]", "unknown dimension 'xp'", 13);
  /* Problems found once the model and cluster are known: located at their lines. */
  refused (3, "model: gpt3-1.3", "model 'gpt3-1.3': unknown model 'gpt3-1.3'", 3);
  refused (3, "model: ./no-such-model.yaml", "model './no-such-model.yaml': ", 3);
  refused (8, "  tp: 3", "this plan cannot run: tp = 3 does not divide 16 heads", 6);
  refused (13, "layers_per_chunk: [14, 13]", "the chunks hold 27 layers, the model has 26", 6);
  /* Line 13 becomes part of 'parallel' (and the split is left to the planner). */
  refused (13, "  vpp: 2", "vpp = 2 needs the interleaved schedule", 6);
  refused (4, "cluster: dgx-a100-80g:0", "node count", 4);
  refused (8, "  tp: 8", "32 ranks, the cluster has 16 devices", 6);
}

static void
test_plan_io_not_yaml_map (void **state)
{
  (void) state;
  const char *text = "- kind: plan\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(MpPlanFile) file = mp_plan_file_load_data ("list.yaml", text, strlen (text), &error);
  assert_null (file);
  assert_non_null (strstr (error->message, "list.yaml:1:1: a plan file must be a mapping"));
  g_clear_error (&error);
  const char *scalar = "kind: plan\nversion: 1\nmodel: a\ncluster: b\nglobal_batch: 1\n"
                       "parallel: 3\n";
  assert_null (mp_plan_file_load_data ("p.yaml", scalar, strlen (scalar), &error));
  assert_non_null (strstr (error->message, "p.yaml:6:11: 'parallel' must be a mapping"));
  g_clear_error (&error);
  assert_null (mp_plan_file_load ("/nonexistent/plan.yaml", &error));
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_IO));
}

static void
test_plan_io_is_plan (void **state)
{
  (void) state;
  const struct { const char *text; gboolean plan; } cases[] = {
    { "kind: plan\n", TRUE },
    { "version: 1\nparallel: {dp: 1}\n", TRUE },
    { "kind: model\nversion: 1\nparallel: {}\n", TRUE },   /* the loader says 'kind' */
    { "kind: model\nversion: 1\n", FALSE },
    { "version: 1\n", FALSE },
    { "name: x\narchitecture: transformer\n", FALSE },
    { "[1, 2]\n", FALSE },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(MpYamlDoc) doc = mp_yaml_load_data ("x.yaml", cases[i].text,
                                                    strlen (cases[i].text), NULL);
      assert_non_null (doc);
      if (mp_plan_yaml_is_plan (doc->root) != cases[i].plan)
        fail_msg ("is_plan wrong for:\n%s", cases[i].text);
    }
  assert_false (mp_plan_yaml_is_plan (NULL));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_plan_io_json_keys),
    cmocka_unit_test (test_plan_io_names),
    cmocka_unit_test (test_plan_io_round_trip),
    cmocka_unit_test (test_plan_io_yaml_text),
    cmocka_unit_test (test_plan_io_not_a_number),
    cmocka_unit_test (test_plan_io_relative_model),
    cmocka_unit_test (test_plan_io_fixture),
    cmocka_unit_test (test_plan_io_cluster_reference),
    cmocka_unit_test (test_plan_io_valid_text),
    cmocka_unit_test (test_plan_io_refused),
    cmocka_unit_test (test_plan_io_not_yaml_map),
    cmocka_unit_test (test_plan_io_is_plan),
  };
  return cmocka_run_group_tests_name ("plan-io", tests, setup, teardown);
}
