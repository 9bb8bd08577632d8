/* accuracy.c - the published-runs file and one prediction per run (accuracy.h). */
#include "config.h"
#include "bench/accuracy.h"
#include "common/error.h"
#include "common/yamldoc.h"

#include <string.h>

static void
run_free (gpointer p)
{
  AccRun *r = p;
  g_free (r->id);
  g_free (r->source);
  g_free (r->family);
  g_free (r->stack);
  g_free (r->model);
  g_free (r->cluster);
  g_free (r->precision);
  g_free (r->pins);
  g_free (r);
}

void
acc_runs_free (AccRuns *runs)
{
  if (runs == NULL)
    return;
  g_free (runs->path);
  g_free (runs->models_dir);
  g_free (runs->clusters_dir);
  if (runs->runs)
    g_ptr_array_unref (runs->runs);
  g_free (runs);
}

static const char *const run_keys[] = {
  "id", "source", "family", "stack", "model", "seq_len", "gpus", "cluster", "precision",
  "global_batch", "plan", "measured", "note", "routing", NULL
};
static const char *const measured_keys[] = {
  "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "step_s", "memory_gib", NULL
};
static const char *const precisions[] = { "bf16", "fp16", "fp8", "mxfp8", NULL };
static const char *const routings[] = { "spread", "blocked", NULL };   /* MpRouting */

/* A non-negative number of MAP's KEY into *OUT (left alone when absent). */
static void
get_number (MpYamlReader *r, const MpYamlNode *map, const char *key, double *out)
{
  const MpYamlNode *v = mp_yaml_lookup (map, key);
  if (v == NULL)
    return;
  char *end = NULL;
  double x = v->kind == MP_YAML_SCALAR ? g_ascii_strtod (v->value, &end) : -1;
  if (v->kind != MP_YAML_SCALAR || end == v->value || *end != '\0' || !(x >= 0)
      || x > 1e15)
    mp_yaml_problem (r, v, "'%s' must be a number >= 0", key);
  else
    *out = x;
}

static char *
dup_string (MpYamlReader *r, const MpYamlNode *map, const char *key)
{
  const char *s = NULL;
  return mp_yaml_get_string (r, map, key, TRUE, &s) ? g_strdup (s) : g_strdup ("");
}

/* The plan map as --fix text: its scalars as KEY=VALUE, in file order. */
static char *
pins_text (MpYamlReader *r, const MpYamlNode *plan, gboolean fp8)
{
  GString *s = g_string_new (NULL);
  if (plan != NULL && !mp_yaml_expect_map (r, plan, "plan"))
    plan = NULL;
  for (guint i = 0; plan != NULL && i < plan->keys->len; i++)
    {
      const MpYamlNode *k = g_ptr_array_index (plan->keys, i);
      const MpYamlNode *v = g_ptr_array_index (plan->items, i);
      if (v->kind != MP_YAML_SCALAR || strchr (v->value, ',') != NULL)
        {
          mp_yaml_problem (r, v, "plan value of '%s' must be one scalar", k->value);
          continue;
        }
      g_string_append_printf (s, "%s%s=%s", s->len ? "," : "", k->value, v->value);
    }
  if (fp8)
    g_string_append_printf (s, "%sfp8=true", s->len ? "," : "");
  return g_string_free (s, FALSE);
}

/* ", stack=NAME" for a stack mpplan models (the runs' meta and fairscale it does not). */
static void
add_stack (char **pins, const char *stack)
{
  MpStack st;
  if (!mp_stack_from_name (stack, &st))
    return;
  char *with = g_strdup_printf ("%s%sstack=%s", *pins, **pins ? "," : "", stack);
  g_free (*pins);
  *pins = with;
}

static AccRun *
read_run (MpYamlReader *r, const MpYamlNode *node)
{
  if (!mp_yaml_expect_map (r, node, "run"))
    return NULL;
  mp_yaml_check_keys (r, node, run_keys);
  AccRun *run = g_new0 (AccRun, 1);
  run->line = node->line;
  run->id = dup_string (r, node, "id");
  run->source = dup_string (r, node, "source");
  run->family = dup_string (r, node, "family");
  run->stack = dup_string (r, node, "stack");
  run->model = dup_string (r, node, "model");
  run->cluster = dup_string (r, node, "cluster");
  int prec = 0;
  mp_yaml_get_enum (r, node, "precision", TRUE, precisions, &prec);
  run->precision = g_strdup (precisions[prec]);
  int routing = MP_ROUTING_SPREAD;
  mp_yaml_get_enum (r, node, "routing", FALSE, routings, &routing);
  run->routing = (MpRouting) routing;
  mp_yaml_get_uint (r, node, "seq_len", TRUE, 1, 10000000, &run->seq_len);
  mp_yaml_get_uint (r, node, "gpus", TRUE, 1, 1000000, &run->gpus);
  mp_yaml_get_uint (r, node, "global_batch", TRUE, 1, 1000000000, &run->global_batch);
  run->pins = pins_text (r, mp_yaml_lookup (node, "plan"), prec >= 2);
  add_stack (&run->pins, run->stack);
  const MpYamlNode *m = mp_yaml_lookup (node, "measured");
  if (m == NULL || !mp_yaml_expect_map (r, m, "measured"))
    {
      mp_yaml_problem (r, node, "run '%s' needs a 'measured' map", run->id);
      return run;
    }
  mp_yaml_check_keys (r, m, measured_keys);
  get_number (r, m, "tokens_per_s_per_gpu", &run->tokens_per_s_per_gpu);
  get_number (r, m, "tflops_per_gpu", &run->tflops_per_gpu);
  get_number (r, m, "mfu", &run->mfu);
  get_number (r, m, "step_s", &run->step_s);
  get_number (r, m, "memory_gib", &run->memory_gib);
  if (run->tokens_per_s_per_gpu <= 0 && run->tflops_per_gpu <= 0 && run->mfu <= 0)
    mp_yaml_problem (r, m, "run '%s' measures none of tokens_per_s_per_gpu, "
                     "tflops_per_gpu, mfu", run->id);
  return run;
}

AccRuns *
acc_runs_load (const char *path, GError **error)
{
  g_autoptr(MpYamlDoc) doc = mp_yaml_load (path, error);
  if (doc == NULL)
    return NULL;
  g_autoptr(AccRuns) runs = g_new0 (AccRuns, 1);
  runs->path = g_strdup (path);
  g_autofree char *dir = g_path_get_dirname (path);
  runs->models_dir = g_build_filename (dir, "models", NULL);
  runs->clusters_dir = g_build_filename (dir, "clusters", NULL);
  runs->runs = g_ptr_array_new_with_free_func (run_free);
  MpYamlReader r;
  mp_yaml_reader_init (&r, doc);
  const MpYamlNode *list = mp_yaml_lookup (doc->root, "runs");
  if (mp_yaml_expect_map (&r, doc->root, "runs file"))
    {
      static const char *const top[] = { "version", "sources", "runs", NULL };
      mp_yaml_check_keys (&r, doc->root, top);
      const MpYamlNode *sources = mp_yaml_lookup (doc->root, "sources");
      if (list == NULL || list->kind != MP_YAML_SEQ)
        mp_yaml_problem (&r, list, "'runs' must be a list of runs");
      g_autoptr(GHashTable) ids = g_hash_table_new (g_str_hash, g_str_equal);
      for (guint i = 0; list && list->kind == MP_YAML_SEQ && i < list->items->len; i++)
        {
          const MpYamlNode *node = g_ptr_array_index (list->items, i);
          AccRun *run = read_run (&r, node);
          if (run == NULL)
            continue;
          if (!g_hash_table_add (ids, run->id))
            mp_yaml_problem (&r, node, "duplicate run id '%s'", run->id);
          if (mp_yaml_lookup (sources, run->source) == NULL)
            mp_yaml_problem (&r, node, "run '%s': source '%s' is not in 'sources'", run->id,
                             run->source);
          g_ptr_array_add (runs->runs, run);
        }
    }
  gboolean ok = mp_yaml_reader_finish (&r, error);
  mp_yaml_reader_clear (&r);
  return ok ? g_steal_pointer (&runs) : NULL;
}

MpModel *
acc_run_model (const AccRuns *runs, const AccRun *run, GError **error)
{
  g_autofree char *file = g_strconcat (run->model, ".yaml", NULL);
  g_autofree char *path = g_build_filename (runs->models_dir, file, NULL);
  g_autoptr(MpModel) m = g_file_test (path, G_FILE_TEST_IS_REGULAR)
                             ? mp_model_load_file (path, error)
                             : mp_model_load (run->model, error);
  if (m == NULL || !mp_model_set_seq_len (m, run->seq_len, error))
    return NULL;
  if (m->experts > 0)
    m->routing = run->routing;
  return g_steal_pointer (&m);
}

MpCluster *
acc_run_cluster (const AccRuns *runs, const AccRun *run, GError **error)
{
  g_autofree char *file = g_strconcat (run->cluster, ".yaml", NULL);
  g_autofree char *path = g_build_filename (runs->clusters_dir, file, NULL);
  const char *name = g_file_test (path, G_FILE_TEST_IS_REGULAR) ? path : run->cluster;
  g_autofree char *spec = g_strdup_printf ("%s:%" G_GUINT64_FORMAT "g", name, run->gpus);
  return mp_cluster_load (spec, error);
}

const char *
acc_metric_name (AccMetric metric)
{
  static const char *const names[] = { "tokens/s/GPU", "TFLOP/s/GPU", "MFU" };
  return names[metric];
}

static char *
plan_summary (const MpPlan *p)
{
  const MpParallelConfig *c = &p->cfg;
  return g_strdup_printf ("dp%u tp%u pp%u vpp%u cp%u ep%u%s zero%u %s mb%ux%u %s%s%s", c->dp,
                          c->tp, c->pp, mp_parallel_config_vpp (c), c->cp, c->ep,
                          c->sequence_parallel ? " sp" : "", c->zero,
                          mp_recompute_name (c->recompute), c->micro_batch_size,
                          c->num_micro_batches, mp_schedule_name (c->schedule),
                          c->fp8 ? " fp8" : "", c->compile ? " compile" : "");
}

/* The measured figure RUN is compared on, and PLAN's prediction of it. */
static void
compare (const AccRun *run, const MpPlan *plan, AccResult *out)
{
  out->pred_tokens_per_gpu = plan->tokens_per_s / plan->world_size;
  out->pred_mfu = plan->mfu;
  out->pred_step_s = plan->step_s;
  out->pred_memory_gib = plan->memory.peak_bytes / (1024.0 * 1024 * 1024);
  out->mem_known = TRUE;
  out->mem = plan->memory;
  if (run->tokens_per_s_per_gpu > 0)
    {
      out->metric = ACC_TOKENS;
      out->measured = run->tokens_per_s_per_gpu;
      out->predicted = out->pred_tokens_per_gpu;
    }
  else if (run->tflops_per_gpu > 0)
    {
      out->metric = ACC_TFLOPS;
      out->measured = run->tflops_per_gpu;
      out->predicted = plan->tflops_per_gpu / 1e12;
    }
  else
    {
      out->metric = ACC_MFU;
      out->measured = run->mfu;
      out->predicted = plan->mfu;
    }
  /* As a step time: predicted time / measured time - 1 (the figures are rates). */
  out->error = out->measured / out->predicted - 1;
}

/* PLAN's MoE shape on MODEL into OUT (AccResult's moe_ fields; zeros for a dense model). */
static void
moe_shape (const MpModel *model, const MpPlan *plan, AccResult *out)
{
  const MpParallelConfig *c = &plan->cfg;
  guint moe = 0;
  for (guint i = 0; i < model->n_layers; i++)
    moe += model->layers[i].moe ? 1 : 0;
  if (moe == 0 || model->experts == 0)
    return;
  out->moe_layer_passes = (double) moe / c->pp * c->num_micro_batches;
  out->local_experts = (double) model->experts / MAX (c->ep, 1u);
  out->micro_tokens = (double) c->micro_batch_size * (double) model->seq_len;
}

/* For a run no plan of which fits: OUT is the best plan honouring PINS on CLUSTER's
 * devices with 16 times their memory (over_memory), its capacity the real one. */
static void
overflowing_memory (const AccRun *run, const MpModel *model, const MpCostContext *ctx,
                    const MpSearchOptions *opts, AccResult *out)
{
  const double factor = 16;
  g_autoptr(MpSearchResult) res = mp_planner_search_roomy (ctx, opts, factor, NULL);
  if (res == NULL || res->plans->len == 0)
    return;
  const MpPlan *best = g_ptr_array_index (res->plans, 0);
  out->plan = plan_summary (best);
  compare (run, best, out);
  out->mem.capacity_bytes /= factor;
  moe_shape (model, best, out);
  out->planned = out->over_memory = TRUE;
}

gboolean
acc_run_predict (const AccRuns *runs, const AccRun *run, AccResult *out, GError **error)
{
  memset (out, 0, sizeof *out);
  g_autoptr(MpModel) model = acc_run_model (runs, run, error);
  g_autoptr(MpCluster) cluster = model ? acc_run_cluster (runs, run, error) : NULL;
  if (cluster == NULL)
    return FALSE;
  g_autoptr(GError) why = NULL;
  g_autoptr(MpPlanPins) pins = mp_plan_pins_parse (run->pins, &why);
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (model, cluster, NULL);
  MpSearchOptions opts = { .global_batch = (guint) run->global_batch, .top_k = 1,
                           .pins = pins };
  g_autoptr(MpSearchResult) res = pins ? mp_planner_search (ctx, &opts, &why) : NULL;
  if (res == NULL)
    out->reason = g_strdup (why->message);
  else if (res->plans->len == 0)
    {
      /* The search costs configurations beside the pinned ones (the best plan without
       * the pins is reported with them): its feasible count is of those. */
      out->reason = g_strdup_printf ("no plan honouring the pins fits in memory (%"
                                     G_GUINT64_FORMAT " configs known to fit, %"
                                     G_GUINT64_FORMAT " fully costed, none honour them)",
                                     res->stats.feasible, res->stats.evaluated);
      overflowing_memory (run, model, ctx, &opts, out);
    }
  else
    {
      const MpPlan *best = g_ptr_array_index (res->plans, 0);
      out->planned = TRUE;
      out->plan = plan_summary (best);
      compare (run, best, out);
      moe_shape (model, best, out);
    }
  return TRUE;
}

void
acc_result_clear (AccResult *res)
{
  g_free (res->reason);
  g_free (res->plan);
  memset (res, 0, sizeof *res);
}
