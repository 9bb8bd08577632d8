/* cmd-validate.c - `mpplan validate FILE...`: parse each file as what it looks like (model,
 * cluster, plan or calibration profile) and report every problem found in every file.
 *
 * A plan file (`kind: plan`, or `version` and `parallel` without a `kind`) is checked
 * whole: the file itself, then its model and cluster, then its config on them, which is
 * evaluated again. */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/yamldoc.h"
#include "costmodel/costmodel.h"
#include "model/model.h"
#include "planner/planner.h"
#include "topology/topology.h"

#include <stdio.h>

/* Validates a plan file: its own content, then its model, cluster and config. */
static int
validate_plan (const char *path, gboolean quiet)
{
  GError *error = NULL;
  g_autoptr(MpPlanFile) file = mp_plan_file_load (path, &error);
  if (file == NULL)
    return mp_cli_fail (error);
  g_autoptr(MpPlanResolved) res = mp_plan_file_resolve (file, &error);
  if (res == NULL)
    return mp_cli_fail (error);
  const MpPlan *plan = res->plan;
  if (!plan->fits)
    {
      g_autofree char *peak = mp_units_format (plan->memory.peak_bytes, MP_UNIT_BYTES);
      g_autofree char *cap = mp_units_format (plan->memory.capacity_bytes, MP_UNIT_BYTES);
      fprintf (stderr, "%s: warning: the plan does not fit: stage %u needs %s per device, "
               "which has %s\n", path, plan->memory.binding_stage, peak, cap);
    }
  if (quiet)
    return 0;
  g_autofree char *step = mp_units_format (plan->step_s, MP_UNIT_SECONDS);
  printf ("%s: ok: plan for %s on %s, %u ranks (dp %u, tp %u, pp %u), step %s", path,
          res->model->name, res->cluster->name, plan->world_size, plan->cfg.dp, plan->cfg.tp,
          plan->cfg.pp, step);
  /* The file's figure is informative; say when this mpplan predicts otherwise. */
  if (file->predicted_step_s > 0 && file->predicted_step_s != plan->step_s)
    {
      g_autofree char *was = mp_units_format (file->predicted_step_s, MP_UNIT_SECONDS);
      printf (" (the file says %s)", was);
    }
  printf ("\n");
  return 0;
}

/* Validates one file; prints a summary line on success. Returns its exit status. */
static int
validate_one (const char *path, gboolean quiet)
{
  GError *error = NULL;
  g_autoptr(MpYamlDoc) doc = mp_yaml_load (path, &error);
  if (doc == NULL)
    return mp_cli_fail (error);

  if (mp_plan_yaml_is_plan (doc->root))
    return validate_plan (path, quiet);
  if (mp_model_yaml_is_model (doc->root))
    {
      g_autoptr(MpModel) model = mp_model_load_file (path, &error);
      if (model == NULL)
        return mp_cli_fail (error);
      if (!quiet)
        {
          g_autofree char *params = mp_units_format (model->params_total, MP_UNIT_COUNT);
          printf ("%s: ok: model %s, %s parameters\n", path, model->name, params);
        }
      return 0;
    }
  if (mp_cost_profile_yaml_is_profile (doc->root))
    {
      g_autoptr(MpCostProfile) profile = mp_cost_profile_load (path, &error);
      if (profile == NULL)
        return mp_cli_fail (error);
      g_autofree char *summary = mp_cost_profile_summary (profile);
      if (!quiet)
        printf ("%s: ok: %s\n", path, summary);
      return 0;
    }
  if (mp_cluster_yaml_is_cluster (doc->root))
    {
      g_autoptr(MpCluster) cluster = mp_cluster_load_file (path, &error);
      if (cluster == NULL)
        return mp_cli_fail (error);
      if (!quiet)
        printf ("%s: ok: cluster %s, %u devices on %u nodes\n", path, cluster->name,
                cluster->world_size, cluster->nodes);
      return 0;
    }
  const MpYamlNode *root = doc->root;
  fprintf (stderr, "%s:%u:%u: not a model (no 'architecture' or 'layers'), a cluster (no "
           "'devices_per_node' or 'groups'), a plan (no 'kind: plan') nor a profile (no 'kind: "
           "profile')\n", path, root->line,
           root->column);
  return 2;
}

int
mp_cmd_validate (int argc, char **argv, gboolean do_help)
{
  gboolean quiet = FALSE;
  g_auto (GStrv) files = NULL;
  const GOptionEntry entries[] = {
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "Print nothing for valid files", NULL },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &files, NULL, "FILE..." },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new ("FILE...");
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (ctx, "Check model, cluster, plan and profile YAML files. "
                                     "Every problem is reported as FILE:LINE:COLUMN: message.");
  g_option_context_set_description (ctx, MP_CLI_EXIT_CODES);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status >= 0)
    return status;
  if (files == NULL || files[0] == NULL)
    return mp_cli_usage (ctx, "no file given");

  int worst = 0;
  for (int i = 0; files[i]; i++)
    {
      int s = validate_one (files[i], quiet);
      worst = MAX (worst, s);
    }
  return worst;
}
