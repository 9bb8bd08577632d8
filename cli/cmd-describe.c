/* cmd-describe.c - `mpplan describe MODEL_OR_CLUSTER [--json]`: what mpplan knows of a
 * model (parameters, FLOPs, activation and state bytes, per layer) or a cluster (devices,
 * peaks, memory, link tiers). `--list` lists the zoo. */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/output.h"
#include "common/yamldoc.h"
#include "costmodel/costmodel.h"
#include "model/model.h"
#include "topology/topology.h"

#include <stdio.h>
#include <string.h>

typedef enum { KIND_UNKNOWN, KIND_MODEL, KIND_CLUSTER } Kind;

/* Is ARG a model or a cluster? Files are read; names are looked up in the two zoos. */
static Kind
classify (const char *arg, GError **error)
{
  /* A Hugging Face config.json is a model (mp_model_load reads it). */
  if (g_file_test (arg, G_FILE_TEST_IS_REGULAR) && mp_model_file_is_hf (arg))
    return KIND_MODEL;
  if (g_file_test (arg, G_FILE_TEST_EXISTS))
    {
      g_autoptr(MpYamlDoc) doc = mp_yaml_load (arg, error);
      if (doc == NULL)
        return KIND_UNKNOWN;
      if (mp_model_yaml_is_model (doc->root))
        return KIND_MODEL;
      if (mp_cluster_yaml_is_cluster (doc->root))
        return KIND_CLUSTER;
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s:%u:%u: neither a model nor a cluster",
                   arg, doc->root->line, doc->root->column);
      return KIND_UNKNOWN;
    }
  g_auto (GStrv) models = mp_model_zoo_list ();
  if (g_strv_contains ((const char *const *) models, arg))
    return KIND_MODEL;
  /* A node-count suffix makes it a cluster: "dgx-a100-80g:16", "my-cluster.yaml:4". */
  g_autofree char *base = g_strdup (arg);
  char *colon = strrchr (base, ':');
  if (colon)
    *colon = '\0';
  g_auto (GStrv) clusters = mp_cluster_zoo_list ();
  if (g_strv_contains ((const char *const *) clusters, base) ||
      (colon && g_file_test (base, G_FILE_TEST_IS_REGULAR)))
    return KIND_CLUSTER;
  g_autofree char *m = g_strjoinv (", ", models);
  g_autofree char *c = g_strjoinv (", ", clusters);
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
               "mpplan: '%s' is neither a file nor a zoo name\n  models: %s\n  clusters: %s",
               arg, m, c);
  return KIND_UNKNOWN;
}

static int
list_zoo (void)
{
  g_auto (GStrv) models = mp_model_zoo_list ();
  g_auto (GStrv) clusters = mp_cluster_zoo_list ();
  printf ("models:\n");
  for (int i = 0; models[i]; i++)
    printf ("  %s\n", models[i]);
  printf ("clusters (NAME or NAME:NODES):\n");
  for (int i = 0; clusters[i]; i++)
    printf ("  %s\n", clusters[i]);
  return 0;
}

/* Prints TEXT, or JSON when AS_JSON; both go to stdout. */
static int
emit (char *text, JsonNode *json)
{
  GError *error = NULL;
  gboolean ok = TRUE;
  if (json)
    {
      ok = mp_json_write ("-", json, &error);
      json_node_unref (json);
    }
  else
    {
      ok = mp_output_write ("-", text, strlen (text), &error);
      g_free (text);
    }
  return ok ? 0 : mp_cli_fail (error);
}

/* `describe MODEL --cluster CLUSTER`: what the cost model believes of each layer. */
static int
describe_costs (const MpModel *model, const char *cluster_arg, const char *profile_arg,
                gboolean as_json)
{
  GError *error = NULL;
  g_autoptr(MpCluster) cluster = mp_cluster_load (cluster_arg, &error);
  if (cluster == NULL)
    return mp_cli_fail (error);
  g_autoptr(MpCostProfile) profile = mp_cli_cluster_profile (&cluster, profile_arg, &error);
  if (profile == NULL && error != NULL)
    return mp_cli_fail (error);
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (model, cluster, profile);
  return as_json ? emit (NULL, mp_cost_describe_layers_json (ctx, NULL))
                 : emit (mp_cost_describe_layers_text (ctx, NULL), NULL);
}

int
mp_cmd_describe (int argc, char **argv, gboolean do_help)
{
  gboolean as_json = FALSE, list = FALSE;
  g_autofree char *cluster_arg = NULL, *profile_arg = NULL;
  g_auto (GStrv) args = NULL;
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &as_json, "Print one JSON object (SI base units)", NULL },
    { "list", 'l', 0, G_OPTION_ARG_NONE, &list, "List the bundled models and clusters", NULL },
    { "cluster", 'c', 0, G_OPTION_ARG_STRING, &cluster_arg,
      "With a model: each layer's forward/backward time, FLOPs and bytes on this cluster's "
      "device (one device, micro-batch 1)", "CLUSTER" },
    { "profile", 0, 0, G_OPTION_ARG_FILENAME, &profile_arg,
      "Calibration profile (from `mpplan calibrate`) for the cluster's figures and costs",
      "FILE" },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &args, NULL, "MODEL_OR_CLUSTER" },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new ("MODEL_OR_CLUSTER");
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "Describe a model (parameters, FLOPs per token, activation and state bytes, per "
           "layer) or a cluster (devices, peak FLOP/s per dtype, memory, link tiers).\n"
           "MODEL_OR_CLUSTER is a YAML file or a zoo name; a cluster name takes a node-count "
           "suffix (dgx-a100-80g:128).");
  g_option_context_set_description (ctx, MP_CLI_PROFILE_HELP "\n\n" MP_CLI_EXIT_CODES);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status >= 0)
    return status;
  if (list)
    return list_zoo ();
  if (args == NULL || args[0] == NULL)
    return mp_cli_usage (ctx, "no model or cluster given (try --list)");
  if (args[1] != NULL)
    return mp_cli_usage (ctx, "describe takes one model or cluster");

  GError *error = NULL;
  switch (classify (args[0], &error))
    {
    case KIND_MODEL:
      {
        g_autoptr(MpModel) model = mp_model_load (args[0], &error);
        if (model == NULL)
          return mp_cli_fail (error);
        if (cluster_arg)
          return describe_costs (model, cluster_arg, profile_arg, as_json);
        return as_json ? emit (NULL, mp_model_describe_json (model))
                       : emit (mp_model_describe_text (model), NULL);
      }
    case KIND_CLUSTER:
      {
        if (cluster_arg)
          return mp_cli_usage (ctx, "--cluster goes with a model, not a cluster");
        g_autoptr(MpCluster) cluster = mp_cluster_load (args[0], &error);
        if (cluster == NULL)
          return mp_cli_fail (error);
        /* A profile that applies makes the cluster calibrated, with its measured numbers. */
        g_autoptr(MpCostProfile) profile = mp_cli_cluster_profile (&cluster, profile_arg, &error);
        if (profile == NULL && error != NULL)
          return mp_cli_fail (error);
        return as_json ? emit (NULL, mp_cluster_describe_json (cluster))
                       : emit (mp_cluster_describe_text (cluster), NULL);
      }
    case KIND_UNKNOWN:
    default:
      return mp_cli_fail (error);
    }
}
