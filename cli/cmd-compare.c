/* cmd-compare.c - `mpplan compare`: the best plan of each framework (PyTorch DDP and FSDP,
 * TensorFlow, Horovod, MXNet, Megatron-LM, DeepSpeed) for one model on one cluster. */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/output.h"
#include "planner/planner.h"

#include <stdio.h>

typedef struct {
  char *model, *cluster, *headroom;
  int batch;
  gboolean json;
} CompareArgs;

static int
compare (const CompareArgs *a)
{
  GError *error = NULL;
  g_auto (MpCliInputs) in = { 0 };
  int status = mp_cli_inputs_load (&in, a->model, a->cluster, NULL);
  if (status != 0)
    return status;
  MpModel *model = in.model;
  MpCluster *cluster = in.cluster;
  MpCostContext *ctx = in.ctx;
  if (!mp_cli_memory_headroom (ctx, a->headroom, &error))
    return mp_cli_fail (error);
  guint batch = a->batch > 0 ? (guint) a->batch : (guint) model->global_batch;
  g_autoptr(GPtrArray) rows = mp_compare_strategies (ctx, batch, &error);
  if (rows == NULL)
    return mp_cli_fail (error);
  if (a->json)
    {
      g_autoptr(JsonNode) root = mp_compare_json (rows, model, cluster, batch);
      return mp_json_write ("-", root, &error) ? 0 : mp_cli_fail (error);
    }
  g_autofree char *params = mp_units_format (model->params_total, MP_UNIT_COUNT);
  g_autofree char *table = mp_compare_text (rows);
  printf ("%s (%s parameters) on %s (%u devices), global batch %u\n\n%s", model->name,
          params, cluster->name, cluster->world_size, batch, table);
  return 0;
}

int
mp_cmd_compare (int argc, char **argv, gboolean do_help)
{
  CompareArgs a = { .batch = G_MININT };
  const GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_STRING, &a.model,
      "Model: YAML file, Hugging Face config.json or zoo name (required)", "MODEL" },
    { "cluster", 'c', 0, G_OPTION_ARG_STRING, &a.cluster,
      "Cluster: YAML file or zoo name[:NODES] (required)", "CLUSTER" },
    { "batch", 'b', 0, G_OPTION_ARG_INT, &a.batch,
      "Global batch in sequences (default: the model's training.global_batch)", "N" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &a.json, "Print one JSON object", NULL },
    { "memory-headroom", 0, 0, G_OPTION_ARG_STRING, &a.headroom, MP_CLI_HEADROOM_HELP,
      "F|SIZE" },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new (NULL);
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "The best plan each framework can express, side by side: PyTorch DDP (25 MB "
           "buckets overlapped with backward), FSDP (ZeRO-3), TensorFlow MirroredStrategy "
           "(one all-reduce after backward), Horovod (128 MB fusion buffer, 1 ms cycle), "
           "MXNet layer placement (no pipelining), Megatron-LM 3D (ZeRO-1 at most, "
           "transformers only) and DeepSpeed (ZeRO 0-3, pipeline with ZeRO <= 1), then "
           "mpplan's unconstrained best. Each row: step time, tokens/s, memory per GPU, "
           "whether it fits and what limits it.");
  g_option_context_set_description (ctx, MP_CLI_EXIT_CODES);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status >= 0)
    goto out;
  if (a.model == NULL || a.cluster == NULL)
    status = mp_cli_usage (ctx, "compare needs --model and --cluster");
  else if (a.batch != G_MININT && (a.batch < 1 || a.batch > MP_CLI_MAX_BATCH))
    status = mp_cli_usage (ctx, "--batch must be from 1 to " G_STRINGIFY (MP_CLI_MAX_BATCH)
                                " sequences");
  else
    status = compare (&a);
out:
  g_free (a.model);
  g_free (a.cluster);
  g_free (a.headroom);
  return status;
}
