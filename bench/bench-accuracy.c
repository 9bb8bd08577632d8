/* bench-accuracy.c - how close mpplan's predictions come to published measured training
 * runs (issue 16): each run of bench/data/published-runs.yaml planned with its published
 * plan pinned (accuracy.h), its predicted and measured figure and the error; the runs that
 * do not plan and why; per family, per stack, per cluster (the device: hold-out checks
 * compare A100 against H100 and Blackwell rows) and overall the count, the MAPE and the mean
 * signed error of the step time (negative: predicted too fast, positive: too slow). Build
 * and run:
 *   make bench/bench-accuracy && bench/bench-accuracy [--json] [RUNS.yaml]
 * A benchmark, not a test: public figures are noisy; the unit tests pin the mechanisms. */
#include "config.h"
#include "bench/accuracy.h"
#include "common/output.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  guint n;
  double abs_sum, signed_sum, worst;
} Tally;

static void
tally_add (GHashTable *groups, const char *key, double error)
{
  Tally *t = g_hash_table_lookup (groups, key);
  if (t == NULL)
    {
      t = g_new0 (Tally, 1);
      g_hash_table_insert (groups, g_strdup (key), t);
    }
  t->n++;
  t->abs_sum += fabs (error);
  t->signed_sum += error;
  t->worst = fabs (error) > fabs (t->worst) ? error : t->worst;
}

static void
print_groups (const char *title, GHashTable *groups)
{
  printf ("\n%-16s %4s %8s %8s %8s\n", title, "n", "MAPE", "signed", "worst");
  g_autoptr(GList) keys = g_list_sort (g_hash_table_get_keys (groups), (GCompareFunc) strcmp);
  for (GList *k = keys; k; k = k->next)
    {
      const Tally *t = g_hash_table_lookup (groups, k->data);
      printf ("%-16s %4u %7.1f%% %+7.1f%% %+7.1f%%\n", (const char *) k->data, t->n,
              100 * t->abs_sum / t->n, 100 * t->signed_sum / t->n, 100 * t->worst);
    }
}

static void
json_groups (JsonBuilder *b, const char *name, GHashTable *groups)
{
  json_builder_set_member_name (b, name);
  json_builder_begin_object (b);
  g_autoptr(GList) keys = g_list_sort (g_hash_table_get_keys (groups), (GCompareFunc) strcmp);
  for (GList *k = keys; k; k = k->next)
    {
      const Tally *t = g_hash_table_lookup (groups, k->data);
      json_builder_set_member_name (b, k->data);
      json_builder_begin_object (b);
      mp_json_add_int (b, "n", t->n);
      mp_json_add_double (b, "mape", t->abs_sum / t->n);
      mp_json_add_double (b, "mean_signed", t->signed_sum / t->n);
      mp_json_add_double (b, "worst", t->worst);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
}

#define GIB(x) ((x) / (1024.0 * 1024 * 1024))

static void
print_memory_header (void)
{
  printf ("\n%-34s %8s %8s %8s %6s %6s %6s %6s %6s %6s  %s\n", "run (memory, GiB)",
          "measured", "peak", "capacity", "weight", "grad", "optim", "activ", "transnt",
          "reserve", "fits");
}

static void
print_memory (const AccRun *run, const AccResult *res)
{
  const MpPlanMemory *m = &res->mem;
  double reserve = 0;
  for (int k = 0; k < MP_RESERVE_N; k++)
    reserve += m->reserve[k];
  g_autofree char *measured = run->memory_gib > 0 ? g_strdup_printf ("%.1f", run->memory_gib)
                                                  : g_strdup ("-");
  printf ("%-34s %8s %8.1f %8.1f %6.1f %6.1f %6.1f %6.1f %6.1f %6.1f  %s\n", run->id,
          measured, GIB (m->peak_bytes), GIB (m->capacity_bytes), GIB (m->bytes[MP_MEM_WEIGHTS]),
          GIB (m->bytes[MP_MEM_GRADIENTS]), GIB (m->bytes[MP_MEM_OPTIMIZER]),
          GIB (m->bytes[MP_MEM_ACTIVATIONS]), GIB (m->bytes[MP_MEM_OTHER] - reserve),
          GIB (reserve), res->planned && !res->over_memory ? "yes" : "NO");
}

/* --moe: each MoE run's step shortfall (measured - predicted) spread over the MoE layer
 * passes of a stage, and over its local experts. A cost the model lacks per expert call on
 * the host reads about the same per expert across devices and micro-batch sizes; one on
 * the GPU grows with the tokens and shrinks on a faster device. */
static void
print_moe_header (void)
{
  printf ("\n%-34s %-18s %6s %7s %9s %9s %12s %12s\n", "run (MoE step shortfall)", "cluster",
          "local", "tok/mb", "measured", "predicted", "per layer", "per expert");
}

static void
print_moe (const AccRun *run, const AccResult *res)
{
  double measured = res->pred_step_s / (1 + res->error);
  double gap = (measured - res->pred_step_s) / res->moe_layer_passes;
  printf ("%-34s %-18s %6.0f %7.0f %8.2fs %8.2fs %9.2f ms %9.0f us\n", run->id, run->cluster,
          res->local_experts, res->micro_tokens, measured, res->pred_step_s, 1e3 * gap,
          1e6 * gap / res->local_experts);
}

typedef struct {
  const AccRun *run;
  AccResult res;
} MemRow;

static gboolean
selected (const AccRun *run, GPtrArray *only)
{
  for (guint i = 0; i < only->len; i++)
    if (strstr (run->id, only->pdata[i]) || strstr (run->family, only->pdata[i]))
      return TRUE;
  return only->len == 0;
}

static void
json_row (JsonBuilder *b, const AccRun *run, const AccResult *res)
{
  json_builder_begin_object (b);
  mp_json_add_string (b, "id", run->id);
  mp_json_add_string (b, "family", run->family);
  mp_json_add_string (b, "stack", run->stack);
  mp_json_add_bool (b, "planned", res->planned);
  mp_json_add_bool (b, "over_memory", res->over_memory);
  if (res->reason)
    mp_json_add_string (b, "reason", res->reason);
  else
    {
      mp_json_add_string (b, "metric", acc_metric_name (res->metric));
      mp_json_add_double (b, "measured", res->measured);
      mp_json_add_double (b, "predicted", res->predicted);
      mp_json_add_double (b, "error", res->error);
      mp_json_add_double (b, "predicted_tokens_per_s_per_gpu", res->pred_tokens_per_gpu);
      mp_json_add_double (b, "predicted_mfu", res->pred_mfu);
      mp_json_add_double (b, "predicted_step_s", res->pred_step_s);
      mp_json_add_string (b, "plan", res->plan);
    }
  json_builder_end_object (b);
}

int
main (int argc, char **argv)
{
  gboolean json = FALSE, memory = FALSE, moe = FALSE;
  const char *path = MPPLAN_SRCDIR "/bench/data/published-runs.yaml";
  g_autoptr(GPtrArray) only = g_ptr_array_new ();
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--json") == 0)
      json = TRUE;
    else if (strcmp (argv[i], "--memory") == 0)
      memory = TRUE;
    else if (strcmp (argv[i], "--moe") == 0)
      moe = TRUE;
    else if (strcmp (argv[i], "--only") == 0 && i + 1 < argc)
      g_ptr_array_add (only, argv[++i]);
    else if (argv[i][0] == '-')
      {
        fprintf (stderr, "usage: bench-accuracy [--json] [--memory] [--moe] [--only TEXT]... "
                 "[RUNS.yaml]\n");
        return 2;
      }
    else
      path = argv[i];

  g_autoptr(GError) error = NULL;
  g_autoptr(AccRuns) runs = acc_runs_load (path, &error);
  if (runs == NULL)
    {
      fprintf (stderr, "bench-accuracy: %s\n", error->message);
      return 2;
    }
  g_autoptr(GHashTable) families = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                          g_free);
  g_autoptr(GHashTable) stacks = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                        g_free);
  g_autoptr(GHashTable) clusters = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                          g_free);
  g_autoptr(GHashTable) overall = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                         g_free);
  g_autoptr(GString) skipped = g_string_new (NULL), overflowing = g_string_new (NULL);
  g_autoptr(GPtrArray) results = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "runs");
  json_builder_begin_array (b);
  if (!json)
    printf ("%-34s %-13s %-13s %10s %10s %7s  %s\n", "run", "family", "metric", "measured",
            "predicted", "error", "plan");
  for (guint i = 0; i < runs->runs->len; i++)
    {
      const AccRun *run = g_ptr_array_index (runs->runs, i);
      AccResult res;
      if (!selected (run, only))
        continue;
      if (!acc_run_predict (runs, run, &res, &error))
        {
          fprintf (stderr, "bench-accuracy: %s:%u: %s: %s\n", path, run->line, run->id,
                   error->message);
          return 2;
        }
      json_row (b, run, &res);
      if (res.planned)
        {
          tally_add (families, run->family, res.error);
          tally_add (stacks, run->stack, res.error);
          tally_add (clusters, run->cluster, res.error);
          tally_add (overall, "overall", res.error);
          if (!json)
            printf ("%-34s %-13s %-13s %10.4g %10.4g %+6.1f%%  %s%s\n", run->id, run->family,
                    acc_metric_name (res.metric), res.measured, res.predicted,
                    100 * res.error, res.plan, res.over_memory ? " [over memory]" : "");
          if (res.over_memory)
            g_string_append_printf (overflowing, "%-34s %-13s %s\n", run->id, run->family,
                                    res.reason);
        }
      else
        g_string_append_printf (skipped, "%-34s %-13s %s\n", run->id, run->family,
                                res.reason);
      if ((memory && res.mem_known) || (moe && res.planned && res.moe_layer_passes > 0))
        {
          MemRow *row = g_new (MemRow, 1);
          *row = (MemRow) { run, res };
          g_ptr_array_add (results, row);
        }
      else
        acc_result_clear (&res);
    }
  json_builder_end_array (b);
  if (json)
    {
      json_groups (b, "families", families);
      json_groups (b, "stacks", stacks);
      json_groups (b, "clusters", clusters);
      json_groups (b, "overall", overall);
      json_builder_end_object (b);
      g_autoptr(JsonNode) root = json_builder_get_root (b);
      return mp_json_write ("-", root, &error) ? 0 : 1;
    }
  if (memory)
    print_memory_header ();
  for (guint i = 0; memory && i < results->len; i++)
    {
      MemRow *row = g_ptr_array_index (results, i);
      if (row->res.mem_known)
        print_memory (row->run, &row->res);
    }
  if (moe)
    print_moe_header ();
  for (guint i = 0; moe && i < results->len; i++)
    {
      MemRow *row = g_ptr_array_index (results, i);
      if (row->res.planned && row->res.moe_layer_passes > 0)
        print_moe (row->run, &row->res);
    }
  for (guint i = 0; i < results->len; i++)
    acc_result_clear (&((MemRow *) g_ptr_array_index (results, i))->res);
  const Tally *all = g_hash_table_lookup (overall, "overall");
  printf ("\n%u of %u runs plan. Not planned:\n%s", all ? all->n : 0, runs->runs->len,
          skipped->len ? skipped->str : "(none)\n");
  printf ("Timed on devices with room to spare ([over memory]: mpplan predicts the published "
          "plan does not fit):\n%s", overflowing->len ? overflowing->str : "(none)\n");
  print_groups ("family", families);
  print_groups ("stack", stacks);
  print_groups ("cluster", clusters);
  print_groups ("all", overall);
  return 0;
}
