/* cmd-simulate.c - `mpplan simulate -p PLAN`: one training step of a plan file, simulated
 * instruction by instruction (costmodel/sim.c), its breakdown beside the closed form's,
 * and optionally the predicted timeline as a Chrome trace (report/trace.c). */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/output.h"
#include "common/units.h"
#include "planner/planner.h"
#include "report/report.h"

#include <math.h>
#include <stdio.h>

typedef struct {
  char *plan, *trace, *profile;
  gboolean json;
} SimArgs;

static void
rank_json (JsonBuilder *b, const MpSimRank *rk)
{
  json_builder_begin_object (b);
  mp_json_add_int (b, "rank", rk->rank);
  mp_json_add_int (b, "stage", rk->stage);
  mp_json_add_double (b, "end_s", rk->end_s);
  json_builder_set_member_name (b, "busy_s");
  json_builder_begin_object (b);
  for (int s = 0; s < MP_STREAM_N; s++)
    mp_json_add_double (b, mp_stream_name ((MpStream) s), rk->busy_s[s]);
  json_builder_end_object (b);
  mp_step_time_add_json (b, "time_s", &rk->time);
  json_builder_end_object (b);
}

/* The --json object (docs/json.md). */
static JsonNode *
result_json (const MpPlanResolved *res, const char *path, const MpSimResult *sim)
{
  const MpPlan *plan = res->plan;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  mp_json_add_int (b, "schema_version", 1);
  json_builder_set_member_name (b, "plan");
  json_builder_add_string_value (b, path);
  json_builder_set_member_name (b, "model");
  json_builder_add_string_value (b, res->model->name);
  json_builder_set_member_name (b, "cluster");
  json_builder_add_string_value (b, res->cluster->name);
  mp_json_add_double (b, "step_s", sim->step_s);
  mp_step_time_add_json (b, "time_s", &sim->time);
  mp_json_add_double (b, "closed_form_step_s", plan->step_s);
  mp_step_time_add_json (b, "closed_form_time_s", &plan->time);
  mp_json_add_double (b, "difference", plan->step_s > 0 ? sim->step_s / plan->step_s - 1 : 0);
  mp_json_add_int (b, "critical_rank", sim->ranks[sim->critical].rank);
  mp_json_add_int (b, "critical_stage", sim->ranks[sim->critical].stage);
  mp_json_add_int (b, "instructions", (gint64) sim->n_insns);
  mp_json_add_int (b, "events", (gint64) sim->n_events);
  json_builder_set_member_name (b, "ranks");
  json_builder_begin_array (b);
  for (guint r = 0; r < sim->n_ranks; r++)
    rank_json (b, &sim->ranks[r]);
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static void
print_row (const char *name, double sim_s, double closed_s)
{
  g_autofree char *a = mp_units_format (sim_s, MP_UNIT_SECONDS);
  g_autofree char *c = mp_units_format (closed_s, MP_UNIT_SECONDS);
  if (closed_s > 0)
    printf ("  %-10s %12s %12s %+9.1f%%\n", name, a, c, 100 * (sim_s / closed_s - 1));
  else
    printf ("  %-10s %12s %12s %10s\n", name, a, c, sim_s > 0 ? "new" : "-");
}

static void
print_text (const MpPlanResolved *res, const char *path, const MpSimResult *sim)
{
  const MpPlan *plan = res->plan;
  const MpParallelConfig *c = &plan->cfg;
  printf ("%s: %s on %s, %u ranks (dp %u, tp %u, pp %u", path, res->model->name,
          res->cluster->name, plan->world_size, c->dp, c->tp, c->pp);
  if (c->vpp > 1)
    printf (", vpp %u", c->vpp);
  printf ("), %s, %u micro-batches of %u\n\n", mp_plan_schedule_name (c->schedule),
          c->num_micro_batches, c->micro_batch_size);
  printf ("  %-10s %12s %12s %10s\n", "", "simulated", "closed form", "difference");
  print_row ("step", sim->step_s, plan->step_s);
  for (int p = 0; p < MP_PHASE_N; p++)
    print_row (mp_phase_name (p), sim->time.t[p], plan->time.t[p]);
  const MpSimRank *crit = &sim->ranks[sim->critical];
  printf ("\nThe simulated parts are those of rank %u (stage %u), whose step ends last; the "
          "closed form's\nare those of its bottleneck stage. Simulated %u rank%s (one per "
          "stage of one replica):\n%" G_GUINT64_FORMAT " instructions, %" G_GUINT64_FORMAT
          " events.\n", crit->rank, crit->stage, sim->n_ranks, sim->n_ranks == 1 ? "" : "s",
          sim->n_insns, sim->n_events);
}

/* The profile for the plan's cluster: --profile, the cluster's own, or this machine's. */
static MpCostProfile *
profile_for (MpCluster *cluster, gpointer data, GError **error)
{
  const SimArgs *a = data;
  return mp_cli_cluster_profile (cluster, a->profile, error);
}

static int
simulate (const SimArgs *a)
{
  GError *error = NULL;
  g_autoptr(MpPlanFile) file = mp_plan_file_load (a->plan, &error);
  if (file == NULL)
    return mp_cli_fail (error);
  g_autoptr(MpPlanResolved) res = mp_plan_file_resolve_full (file, profile_for, (gpointer) a,
                                                             &error);
  if (res == NULL)
    return mp_cli_fail (error);
  MpSimOptions opts = { .slices = a->trace != NULL };
  MpProgram **programs = NULL;
  guint n = 0;
  g_autoptr(MpSimResult) sim = mp_plan_simulate (res->ctx, res->plan, &opts, &programs, &n,
                                                 &error);
  if (sim == NULL)
    return mp_cli_fail (error);
  int status = 0;
  if (a->trace)
    {
      g_autoptr(JsonNode) plan_json = mp_plan_to_json (res->plan);
      MpTraceInfo info = { .model = res->model->name, .cluster = res->cluster->name,
                           .plan_path = a->plan, .plan = plan_json,
                           .closed_form_step_s = res->plan->step_s };
      if (!mp_trace_write_predicted (a->trace, programs, n, sim, &info, &error))
        status = mp_cli_fail (error);
    }
  mp_program_stages_free (programs);
  if (status != 0)
    return status;
  if (a->json)
    {
      g_autoptr(JsonNode) root = result_json (res, a->plan, sim);
      return mp_json_write ("-", root, &error) ? 0 : mp_cli_fail (error);
    }
  print_text (res, a->plan, sim);
  if (a->trace)
    printf ("Trace written to %s (Perfetto: ui.perfetto.dev, or chrome://tracing).\n",
            a->trace);
  return 0;
}

int
mp_cmd_simulate (int argc, char **argv, gboolean do_help)
{
  SimArgs a = { 0 };
  const GOptionEntry entries[] = {
    { "plan", 'p', 0, G_OPTION_ARG_FILENAME, &a.plan, "Plan file (as `mpplan plan -o` writes)",
      "PLAN" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &a.json, "Print one JSON object (docs/json.md)", NULL },
    { "trace", 't', 0, G_OPTION_ARG_FILENAME, &a.trace,
      "Write the predicted timeline as Chrome Trace Event JSON (Perfetto)", "FILE" },
    { "profile", 0, 0, G_OPTION_ARG_FILENAME, &a.profile,
      "Calibration profile (from `mpplan calibrate`) to use in place of the built-in curves",
      "FILE" },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new (NULL);
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "Simulate one training step of a plan, instruction by instruction: every pipeline "
           "stage's\nprogram on its compute and communication streams, with the cost model's "
           "durations.\nPrints the step and where it goes, beside the closed form the planner "
           "ranks with.");
  g_option_context_set_description (ctx, MP_CLI_PROFILE_HELP "\n\n" MP_CLI_EXIT_CODES);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status >= 0)
    goto out;
  if (a.plan == NULL)
    {
      status = mp_cli_usage (ctx, "no plan file given (-p PLAN)");
      goto out;
    }
  status = simulate (&a);
out:
  g_free (a.plan);
  g_free (a.trace);
  g_free (a.profile);
  return status;
}
