/* cmd-verify.c - `mpplan verify -m MODEL -c CLUSTER [--top K] [-np N] [--profile FILE]
 * [--steps S] [--rounds R] [--json] [--html FILE] [--dir DIR]`: the whole loop in one
 * command. Plan; take the best K plans and the best plan of each family that fits on at
 * most N ranks; for each, predict its step with the simulator (with the calibration
 * profile) and write it as a plan file; run every plan R times under `mpirun -np WORLD
 * mpplan exec`, round-robin, so that a burst of load on a shared machine falls on
 * different plans in different rounds instead of on all of one plan's steps; merge each
 * plan's rounds and join them with the prediction (report/report.c); print one table, the
 * median error and whether the ranking held.
 *
 * This file starts the processes (mpirun, with argv, never a shell); the arithmetic of the
 * comparison is report/'s. Progress goes to stderr, results to stdout. */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/jsonread.h"
#include "common/output.h"
#include "common/units.h"
#include "planner/planner.h"
#include "report/report.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  char *model, *cluster, *profile, *html, *dir, *fix;
  gint64 top, np, steps, warmup, rounds;
  gboolean json;
} VerifyArgs;

/* Everything one verify holds while it runs. */
typedef struct {
  const VerifyArgs *a;
  MpModel *model;
  MpCluster *cluster;
  MpCostContext *ctx;
  char *dir;                   /* where plan files and measurements go */
  char *exe;                   /* this mpplan, for mpirun to start */
} Verify;

/* ---- choosing plans ------------------------------------------------------------------ */

static void
add_plan (GPtrArray *chosen, const MpPlan *plan, guint max_ranks)
{
  if (plan == NULL || !plan->fits || plan->world_size > max_ranks)
    return;
  for (guint i = 0; i < chosen->len; i++)
    {
      const MpPlan *had = g_ptr_array_index (chosen, i);
      if (mp_parallel_config_equal (&had->cfg, &plan->cfg))
        return;
    }
  g_ptr_array_add (chosen, (gpointer) plan);
}

/* The best TOP plans (simulator's ranking), then the best of each family not yet in:
 * borrowed from RES. */
static GPtrArray *
choose_plans (const MpSearchResult *res, guint top, guint max_ranks)
{
  GPtrArray *chosen = g_ptr_array_new ();
  for (guint i = 0; i < res->plans->len && chosen->len < top; i++)
    add_plan (chosen, g_ptr_array_index (res->plans, i), max_ranks);
  for (int f = 0; f < MP_FAMILY_N; f++)
    add_plan (chosen, res->stats.family_best[f], max_ranks);
  return chosen;
}

/* ---- one plan ------------------------------------------------------------------------ */

/* The prediction: the plan's keys, with the simulator's step and parts in place of the
 * closed form's (the closed form kept as closed_form_step_s). With TRACE, the predicted
 * timeline too. NULL with the simulator's error. */
static JsonNode *
predict (const Verify *v, const MpPlan *plan, JsonNode **trace, GError **error)
{
  MpSimOptions opts = { .slices = trace != NULL };
  MpProgram **programs = NULL;
  guint n = 0;
  g_autoptr(MpSimResult) sim = mp_plan_simulate (v->ctx, plan, &opts, &programs, &n, error);
  if (sim == NULL)
    return NULL;
  g_autoptr(JsonNode) plan_json = mp_plan_to_json (plan);
  if (trace)
    {
      MpTraceInfo info = { .model = v->model->name, .cluster = v->cluster->name,
                           .plan = plan_json, .closed_form_step_s = plan->step_s };
      *trace = mp_trace_predicted (programs, n, sim, &info);
    }
  mp_program_stages_free (programs);
  JsonNode *out = json_node_copy (plan_json);
  JsonObject *o = json_node_get_object (out);
  json_object_set_int_member (o, "schema_version", 1);   /* a predicted file, as report reads */
  json_object_set_double_member (o, "closed_form_step_s", plan->step_s);
  json_object_set_double_member (o, "step_s", sim->step_s);
  json_object_set_member (o, "time_s", mp_step_time_to_json (&sim->time));
  return out;
}

/* The environment of mpirun: ours, and as root (containers, CI) Open MPI's consent to run
 * as root, which it otherwise refuses; variables already set are kept. */
static char **
mpirun_environ (void)
{
  char **env = g_get_environ ();
  if (getuid () == 0)
    {
      env = g_environ_setenv (env, "OMPI_ALLOW_RUN_AS_ROOT", "1", FALSE);
      env = g_environ_setenv (env, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", FALSE);
    }
  return env;
}

/* Runs PLAN_PATH on NP ranks under mpirun ($MPIRUN, else mpirun from PATH), writing
 * MEASURED (and TRACE when not NULL). FALSE with MP_ERROR_RUNTIME and the tail of its
 * output. */
static gboolean
measure (const Verify *v, const char *plan_path, guint np, const char *measured,
         const char *trace, GError **error)
{
  const char *mpirun = g_getenv ("MPIRUN") ? g_getenv ("MPIRUN") : "mpirun";
  g_autofree char *n = g_strdup_printf ("%u", np);
  g_autofree char *steps = g_strdup_printf ("%" G_GINT64_FORMAT, v->a->steps);
  g_autofree char *warmup = g_strdup_printf ("%" G_GINT64_FORMAT, v->a->warmup);
  /* More ranks than cores: Open MPI refuses unless told to oversubscribe. */
  gboolean over = np > g_get_num_processors ();
  const char *argv[20];
  int k = 0;
  argv[k++] = mpirun;
  argv[k++] = "-np";
  argv[k++] = n;
  if (over)
    argv[k++] = "--oversubscribe";
  const char *rest[] = { v->exe, "exec", "-p", plan_path, "--steps", steps, "--warmup", warmup,
                         "-o", measured };
  for (guint i = 0; i < G_N_ELEMENTS (rest); i++)
    argv[k++] = rest[i];
  if (trace)
    {
      argv[k++] = "--trace";
      argv[k++] = trace;
    }
  argv[k] = NULL;
  g_auto (GStrv) env = mpirun_environ ();
  g_autofree char *out = NULL, *err = NULL;
  int wait_status = 0;
  if (!g_spawn_sync (NULL, (char **) argv, env, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                     &wait_status, error)
      || !g_spawn_check_wait_status (wait_status, error))
    {
      gsize len = err ? strlen (err) : 0;
      const char *tail = err ? err + (len > 800 ? len - 800 : 0) : "";
      g_autofree char *msg = g_strdup_printf ("%s -np %u ... exec -p %s failed: %s\n%s", mpirun,
                                              np, plan_path, (*error)->message, tail);
      g_clear_error (error);
      g_set_error_literal (error, MP_ERROR, MP_ERROR_RUNTIME, msg);
      return FALSE;
    }
  return TRUE;
}

/* One chosen plan through the rounds. */
typedef struct {
  const MpPlan *plan;          /* borrowed from the search */
  guint index;                 /* 0-based; its files are named index + 1 */
  JsonNode *predicted, *trace; /* the prediction; its timeline (NULL without --html) */
  char *label;
  GPtrArray *rounds;           /* JsonNode*: measured.json of each round run so far */
} Subject;

static void
subject_free (Subject *s)
{
  json_node_unref (s->predicted);
  if (s->trace)
    json_node_unref (s->trace);
  g_free (s->label);
  g_ptr_array_unref (s->rounds);
  g_free (s);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Subject, subject_free)

/* DIR/KIND-I.json, or with ROUND > 0 DIR/KIND-I.round-ROUND.json. Caller owns. */
static char *
file_path (const Verify *v, const char *kind, const Subject *s, guint round)
{
  if (round == 0)
    return g_strdup_printf ("%s/%s-%u.json", v->dir, kind, s->index + 1);
  return g_strdup_printf ("%s/%s-%u.round-%u.json", v->dir, kind, s->index + 1, round);
}

static char *
plan_path (const Verify *v, const Subject *s)
{
  return g_strdup_printf ("%s/plan-%u.yaml", v->dir, s->index + 1);
}

static double
predicted_step_s (const Subject *s)
{
  return json_object_get_double_member (json_node_get_object (s->predicted), "step_s");
}

/* Plan I of the verify, called LABEL, predicted and written as plan-I+1.yaml. Caller
 * owns. */
static Subject *
prepare (const Verify *v, const MpPlan *plan, guint i, const char *label, GError **error)
{
  g_autoptr(Subject) s = g_new0 (Subject, 1);
  s->plan = plan;
  s->index = i;
  s->label = g_strdup (label);
  s->rounds = g_ptr_array_new_with_free_func ((GDestroyNotify) json_node_unref);
  s->predicted = predict (v, plan, v->a->html ? &s->trace : NULL, error);
  if (s->predicted == NULL)
    return NULL;
  g_autofree char *path = plan_path (v, s);
  g_autofree char *yaml = mp_plan_to_yaml_for_path (plan, v->model, v->cluster, path,
                                                    "mpplan verify");
  if (!mp_output_write (path, yaml, strlen (yaml), error))
    return NULL;
  return g_steal_pointer (&s);
}

/* Round ROUND (1-based) of S, one of TOTAL plans: run under mpirun, its measured.json
 * kept in S->rounds. */
static gboolean
run_round (const Verify *v, Subject *s, guint total, guint round, GError **error)
{
  g_autofree char *path = plan_path (v, s);
  g_autofree char *meas_path = file_path (v, "measured", s, round);
  g_autofree char *trace_path = file_path (v, "trace", s, round);
  g_autofree char *where = g_strdup_printf ("verify: round %u/%" G_GINT64_FORMAT " [%u/%u]",
                                            round, v->a->rounds, s->index + 1, total);
  g_autofree char *pred = mp_units_format (predicted_step_s (s), MP_UNIT_SECONDS);
  fprintf (stderr, "%s %s: predicted %s; running %u ranks x %" G_GINT64_FORMAT " steps...\n",
           where, s->label, pred, s->plan->world_size, v->a->warmup + v->a->steps);
  if (!measure (v, path, s->plan->world_size, meas_path, s->trace ? trace_path : NULL, error))
    return FALSE;
  JsonNode *measured = mp_json_load (meas_path, error);
  if (measured == NULL)
    {
      (*error)->code = MP_ERROR_RUNTIME;   /* exec wrote it: not the user's input */
      return FALSE;
    }
  g_ptr_array_add (s->rounds, measured);
  double step_s = json_object_get_double_member_with_default (json_node_get_object (measured),
                                                              "step_s", 0);
  g_autofree char *meas = mp_units_format (step_s, MP_UNIT_SECONDS);
  fprintf (stderr, "%s measured %s (error %+.1f%%)\n", where, meas,
           100 * mp_report_error (predicted_step_s (s), step_s));
  return TRUE;
}

/* S's rounds merged (written as measured-I.json) and joined with its prediction; the
 * measured timeline is that of the round the merge took the phases from. */
static MpReportRun *
join (const Verify *v, Subject *s, GError **error)
{
  guint chosen = 0;
  g_autoptr(JsonNode) measured = mp_report_measured_merge ((JsonNode *const *) s->rounds->pdata,
                                                           s->rounds->len, &chosen, error);
  g_autofree char *meas_path = file_path (v, "measured", s, 0);
  if (measured == NULL || !mp_json_write (meas_path, measured, error))
    return NULL;
  g_autofree char *plan = plan_path (v, s);
  g_autofree char *pred_name = g_strdup_printf ("the prediction of %s", plan);
  MpReportRun *run = mp_report_run_new (pred_name, s->predicted, meas_path, measured, error);
  if (run == NULL)
    return NULL;
  g_free (run->label);                  /* the planner's words, which tell the plans apart */
  run->label = g_strdup (s->label);
  if (s->trace)
    {
      g_autofree char *trace_path = file_path (v, "trace", s, chosen + 1);
      run->predicted_trace = json_node_ref (s->trace);
      run->measured_trace = mp_json_load (trace_path, NULL);
      if (run->measured_trace && !mp_trace_check (run->measured_trace, trace_path, TRUE, NULL))
        g_clear_pointer (&run->measured_trace, json_node_unref);
    }
  return run;
}

/* ---- the loop ------------------------------------------------------------------------ */

static MpSearchResult *
plan_search (const Verify *v, GError **error)
{
  g_autoptr(MpPlanPins) pins = NULL;
  if (v->a->fix && (pins = mp_plan_pins_parse (v->a->fix, error)) == NULL)
    return NULL;
  MpSearchOptions opts = { .top_k = 64, .pins = pins };
  g_autoptr(MpSearchResult) res = mp_planner_search (v->ctx, &opts, error);
  if (res == NULL)
    return NULL;
  if (res->plans->len == 0)
    {
      g_autofree char *why = mp_plan_infeasible_text (res, v->ctx);
      g_set_error (error, MP_ERROR, MP_ERROR_INFEASIBLE, "%s: %s", v->model->name, why);
      return NULL;
    }
  /* Rank as `mpplan plan` does: the closed form's best re-ranked by the simulator. */
  if (!mp_planner_refine (v->ctx, res, 8, error))
    return NULL;
  return g_steal_pointer (&res);
}

static int
print_results (const Verify *v, GPtrArray *runs)
{
  GError *error = NULL;
  if (v->a->html)
    {
      g_autofree char *title = g_strdup_printf ("mpplan verify: %s on %s", v->model->name,
                                                v->cluster->name);
      g_autofree char *page = mp_report_html (runs, title);
      if (!mp_output_write (v->a->html, page, strlen (page), &error))
        return mp_cli_fail (error);
    }
  if (v->a->json)
    {
      g_autoptr(JsonNode) root = mp_report_json (runs);
      JsonObject *o = json_node_get_object (root);
      json_object_set_string_member (o, "model", v->model->name);
      json_object_set_string_member (o, "cluster", v->cluster->name);
      json_object_set_int_member (o, "steps", v->a->steps);
      json_object_set_int_member (o, "rounds", v->a->rounds);
      return mp_json_write ("-", root, &error) ? 0 : mp_cli_fail (error);
    }
  g_autofree char *table = mp_report_runs_text (runs);
  printf ("%s on %s: %u plans predicted (simulator%s) and measured (median of %" G_GINT64_FORMAT
          " steps in the quietest of %" G_GINT64_FORMAT " round%s; min - max over all)\n\n%s",
          v->model->name,
          v->cluster->name, runs->len,
          v->cluster->groups[0].device.calibrated ? ", calibrated"
                                                  : ", built-in curves: not calibrated",
          v->a->steps, v->a->rounds, v->a->rounds == 1 ? "" : "s", table);
  return 0;
}

static int
verify_all (Verify *v)
{
  GError *error = NULL;
  g_autoptr(MpSearchResult) res = plan_search (v, &error);
  if (res == NULL)
    return mp_cli_fail (error);
  guint max_ranks = v->a->np > 0 ? (guint) v->a->np : v->cluster->world_size;
  g_autoptr(GPtrArray) chosen = choose_plans (res, (guint) v->a->top, max_ranks);
  if (chosen->len == 0)
    {
      fprintf (stderr, "mpplan: no plan that fits uses %u ranks or fewer\n", max_ranks);
      return 3;
    }
  g_autoptr(GPtrArray) subjects = g_ptr_array_new_with_free_func ((GDestroyNotify) subject_free);
  g_auto (GStrv) labels = mp_plan_phrases ((const MpPlan *const *) chosen->pdata, chosen->len);
  for (guint i = 0; i < chosen->len; i++)
    {
      Subject *s = prepare (v, g_ptr_array_index (chosen, i), i, labels[i], &error);
      if (s == NULL)
        return mp_cli_fail (error);
      g_ptr_array_add (subjects, s);
    }
  /* Round-robin: a burst of load lasts seconds, so it slows one round of a few plans
   * rather than every round of one plan. */
  for (guint r = 1; r <= v->a->rounds; r++)
    for (guint i = 0; i < subjects->len; i++)
      if (!run_round (v, g_ptr_array_index (subjects, i), subjects->len, r, &error))
        return mp_cli_fail (error);
  g_autoptr(GPtrArray) runs = g_ptr_array_new_with_free_func ((GDestroyNotify) mp_report_run_free);
  for (guint i = 0; i < subjects->len; i++)
    {
      MpReportRun *run = join (v, g_ptr_array_index (subjects, i), &error);
      if (run == NULL)
        return mp_cli_fail (error);
      g_ptr_array_add (runs, run);
    }
  return print_results (v, runs);
}

/* Removes the files verify wrote into DIR, then DIR (only when verify made it). */
static void
remove_dir (const char *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  while (d && (name = g_dir_read_name (d)) != NULL)
    if (g_str_has_prefix (name, "plan-") || g_str_has_prefix (name, "measured-")
        || g_str_has_prefix (name, "trace-"))
      {
        g_autofree char *path = g_build_filename (dir, name, NULL);
        g_remove (path);
      }
  g_rmdir (dir);
}

static int
verify (const VerifyArgs *a)
{
  GError *error = NULL;
  g_auto (MpCliInputs) in = { 0 };
  int status = mp_cli_inputs_load (&in, a->model, a->cluster, a->profile);
  if (status != 0)
    return status;
  MpModel *model = in.model;
  MpCluster *cluster = in.cluster;
  MpCostContext *ctx = in.ctx;
  g_autofree char *dir = a->dir ? g_strdup (a->dir) : g_dir_make_tmp ("mpplan-verify-XXXXXX", &error);
  if (dir == NULL || g_mkdir_with_parents (dir, 0755) != 0)
    {
      fprintf (stderr, "mpplan: cannot make a folder for the plan files: %s\n",
               error ? error->message : g_strerror (errno));
      g_clear_error (&error);
      return 1;
    }
  g_autofree char *exe = g_file_read_link ("/proc/self/exe", NULL);
  Verify v = { a, model, cluster, ctx, dir, exe ? g_steal_pointer (&exe) : g_strdup ("mpplan") };
  status = verify_all (&v);
  if (a->dir == NULL)
    remove_dir (dir);
  g_free (v.exe);
  return status;
}

int
mp_cmd_verify (int argc, char **argv, gboolean do_help)
{
  VerifyArgs a = { .top = 3, .steps = 5, .warmup = 1, .rounds = 5 };
  const GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_STRING, &a.model, "Model: YAML file or zoo name", "MODEL" },
    { "cluster", 'c', 0, G_OPTION_ARG_STRING, &a.cluster,
      "Cluster: YAML file or zoo name (host: this machine)", "CLUSTER" },
    { "top", 'k', 0, G_OPTION_ARG_INT64, &a.top,
      "Run the best K plans, and the best of each other family (default 3)", "K" },
    { "np", 'n', 0, G_OPTION_ARG_INT64, &a.np,
      "Only plans on at most N ranks (default: the cluster's world size)", "N" },
    { "profile", 0, 0, G_OPTION_ARG_FILENAME, &a.profile,
      "Calibration profile (from `mpplan calibrate`) for the predictions", "FILE" },
    { "steps", 0, 0, G_OPTION_ARG_INT64, &a.steps,
      "Measured steps per plan in each round (default 5)", "S" },
    { "warmup", 0, 0, G_OPTION_ARG_INT64, &a.warmup,
      "Steps run first in each round and left out (default 1)", "W" },
    { "rounds", 0, 0, G_OPTION_ARG_INT64, &a.rounds,
      "Run every plan R times, round-robin (default 5, at most 100)", "R" },
    { "fix", 0, 0, G_OPTION_ARG_STRING, &a.fix,
      "The best plans honouring these pins (as plan --fix, e.g. cp=2), and the best of "
      "each other family", "KEY=VALUE,..." },
    { "json", 0, 0, G_OPTION_ARG_NONE, &a.json, "Print one JSON object (docs/json.md)", NULL },
    { "html", 0, 0, G_OPTION_ARG_FILENAME, &a.html,
      "Write the report as a self-contained HTML page (with timelines and a scatter)", "FILE" },
    { "dir", 0, 0, G_OPTION_ARG_FILENAME, &a.dir,
      "Keep the plan files, measurements and traces in DIR (default: a temporary folder, "
      "removed)", "DIR" },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new (NULL);
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "Check the predictions by running them: plan, take the best K plans and the best "
           "of each\nfamily that fits, predict each with the simulator, run each under "
           "`mpirun -np WORLD mpplan exec`,\nand print predicted against measured step time, "
           "the ranking by each, the median absolute\nerror and whether the predicted best "
           "was the measured best (or within its spread).\n\nEach plan runs --rounds times, "
           "round-robin, so that a burst of load on a shared machine\nslows different plans "
           "in different rounds. Its measured step, phases and memory are those of its\nquietest "
           "round (the lowest median step: load from elsewhere only slows a run down);\nthe "
           "spread, min - max, is over the steps of every round.\n\nmpirun comes from "
           "$MPIRUN or PATH; as root, OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) are set for it.");
  g_autofree char *desc = g_strdup_printf ("%s\n\n%s", MP_CLI_PROFILE_HELP, MP_CLI_EXIT_CODES);
  g_option_context_set_description (ctx, desc);
  g_option_context_add_main_entries (ctx, entries, NULL);
  /* mpirun's spelling, -np N, would read as -n -p: take it as --np. */
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "-np") == 0)
      argv[i] = (char *) "--np";
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status >= 0)
    goto out;
  if (a.model == NULL || a.cluster == NULL)
    status = mp_cli_usage (ctx, "give a model and a cluster (-m MODEL -c CLUSTER)");
  else if (a.top < 1 || a.np < 0 || a.steps < 1 || a.warmup < 0 || a.steps > 100000
           || a.warmup > 100000)
    status = mp_cli_usage (ctx, "--top must be 1 or more, --steps from 1 to 100000, --warmup from 0 to "
                           "100000 and -np 0 or more");
  else if (a.rounds < 1 || a.rounds > 100)
    status = mp_cli_usage (ctx, "--rounds must be 1 to 100");
  else
    status = verify (&a);
out:
  g_free (a.model);
  g_free (a.cluster);
  g_free (a.profile);
  g_free (a.html);
  g_free (a.dir);
  return status;
}
