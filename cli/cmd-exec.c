/* cmd-exec.c - `mpirun -np N mpplan exec -p plan.yaml [--steps S] [--warmup W] [--seed X]
 * [-o measured.json] [--trace trace.json] [--check]`: run a plan for real on the host
 * backend (exec/), one process per rank; without mpirun, a world of one.
 *
 * Every rank reads the plan and reaches the same verdict on bad input, so each exits 2
 * with no communication; only rank 0 prints the message. */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "exec/exec.h"
#include "exec/backend.h"
#include "planner/planner.h"

#include <stdio.h>

/* Prints ERROR on rank 0 only (every rank has the same one) and returns its status. */
static int
fail_once (int rank, GError *error)
{
  if (rank == 0)
    return mp_cli_fail (error);
  int status = mp_error_exit_code (error);
  g_error_free (error);
  return status;
}

static int
run (int *argc, char ***argv, const char *plan_path, const MpExecOptions *opts)
{
  GError *error = NULL;
  g_autoptr(MpWorld) world = mp_world_join (argc, argv, &error);
  if (world == NULL)
    return mp_cli_fail (error);
  int rank = mp_world_rank (world);
  g_autoptr(MpPlanFile) file = mp_plan_file_load (plan_path, &error);
  if (file == NULL)
    return fail_once (rank, error);
  g_autoptr(MpPlanResolved) res = mp_plan_file_resolve (file, &error);
  if (res == NULL)
    return fail_once (rank, error);
  if (!mp_exec_plan (world, res, opts, &error))
    return fail_once (rank, error);
  return 0;
}

int
mp_cmd_exec (int argc, char **argv, gboolean do_help)
{
  g_autofree char *plan_path = NULL, *output = NULL, *trace = NULL;
  gint64 steps = 5, warmup = 1, seed = 1234;
  gboolean check = FALSE;
  g_autofree char *backend = NULL;
  const GOptionEntry entries[] = {
    { "plan", 'p', 0, G_OPTION_ARG_FILENAME, &plan_path, "Plan file (mpplan plan -o)", "FILE" },
    { "steps", 0, 0, G_OPTION_ARG_INT64, &steps, "Measured training steps (default 5)", "S" },
    { "warmup", 0, 0, G_OPTION_ARG_INT64, &warmup,
      "Steps run first and left out of the timings (default 1)", "W" },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Seed of weights and data (default 1234)", "X" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
      "Write measured figures as JSON (the planner's keys)", "FILE" },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &trace,
      "Write a Chrome trace of the last measured step", "FILE" },
    { "check", 0, 0, G_OPTION_ARG_NONE, &check,
      "Also run on one rank and compare every step's loss and gradient norm (1e-5)", NULL },
    { "backend", 0, 0, G_OPTION_ARG_STRING, &backend,
      "host (default: OpenBLAS and MPI), cuda (one GPU per rank: CUDA kernels, cuBLAS with "
      "bf16 inputs and fp32 accumulation, NCCL) or cuda-fp32 (the same in fp32)", "NAME" },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new (NULL);
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "Run a plan for real: `mpirun -np N mpplan exec -p plan.yaml` with N the plan's "
           "world size (without mpirun: a plan of one rank). Trains the plan's model on "
           "seeded synthetic data with the plan's data, tensor and pipeline split, ZeRO "
           "stage and recomputation (host backend: OpenBLAS and MPI), measures each "
           "instruction, and prints the median step time.");
  g_option_context_set_description (ctx, MP_CLI_EXIT_CODES);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status >= 0)
    return status;
  if (plan_path == NULL)
    return mp_cli_usage (ctx, "no plan file given (-p plan.yaml)");
  if (steps < 1 || steps > 100000 || warmup < 0 || warmup > 100000)
    return mp_cli_usage (ctx, "--steps must be 1 or more and --warmup 0 or more");
  if (backend != NULL && !mp_backend_name_valid (backend))
    {
      g_autofree char *msg = g_strdup_printf ("unknown backend '%s' (host, cuda, cuda-fp32)",
                                              backend);
      return mp_cli_usage (ctx, msg);
    }
  MpExecOptions opts = { (guint) steps, (guint) warmup, (guint64) seed, check, output, trace,
                         backend };
  return run (&argc, &argv, plan_path, &opts);
}
