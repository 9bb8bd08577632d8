/* cmd-calibrate.c - `mpirun -np N mpplan calibrate --backend host [-o FILE] [--quick]`:
 * measure this machine (exec/calibrate.c) and write the profile the cost model then uses
 * in place of its built-in curves (rank 0 writes it, whole or not at all). */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/output.h"
#include "costmodel/costmodel.h"
#include "exec/exec.h"

#include <stdio.h>
#include <string.h>

typedef struct {
  char *backend, *output;
  gboolean quick;
} CalibrateArgs;

/* Joins the world, measures, and writes the profile on rank 0; returns the exit status. */
static int
calibrate (const CalibrateArgs *a, int *argc, char ***argv, const char *command)
{
  GError *error = NULL;
  g_autoptr(MpWorld) world = mp_world_join (argc, argv, &error);
  if (world == NULL)
    return mp_cli_fail (error);
  MpCalibrateOptions opts = { .quick = a->quick, .device = "cpu-core", .out = stdout };
  g_autoptr(MpCostProfile) profile = mp_calibrate_host (world, &opts, &error);
  if (profile == NULL)
    return mp_cli_fail (error);
  if (mp_world_rank (world) != 0)
    return 0;
  g_autofree char *path = a->output ? g_strdup (a->output) : mp_cost_profile_host_path ();
  if (path == NULL)
    {
      fprintf (stderr, "mpplan: MPPLAN_PROFILE is empty and no -o FILE given: profile not "
                       "written\n");
      return 2;
    }
  g_autofree char *dir = g_path_get_dirname (path);
  if (a->output == NULL && g_mkdir_with_parents (dir, 0755) != 0)
    {
      fprintf (stderr, "mpplan: %s: cannot create the folder\n", dir);
      return 1;
    }
  g_autofree char *yaml = mp_cost_profile_to_yaml (profile, command);
  if (!mp_output_write (path, yaml, strlen (yaml), &error))
    return mp_cli_fail (error);
  fflush (stdout);
  if (strcmp (path, "-") != 0)
    printf ("Profile written to %s\n", path);
  return 0;
}

int
mp_cmd_calibrate (int argc, char **argv, gboolean do_help)
{
  CalibrateArgs a = { 0 };
  g_auto (GStrv) rest = NULL;
  g_autofree char *args = g_strjoinv (" ", argv);
  g_autofree char *command = g_strconcat ("mpplan ", args, NULL);
  const GOptionEntry entries[] = {
    { "backend", 0, 0, G_OPTION_ARG_STRING, &a.backend,
      "What to measure: host (OpenBLAS GEMMs and MPI collectives; the default)", "host" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &a.output,
      "Write the profile to FILE (default: this machine's host profile, see below)", "FILE" },
    { "quick", 0, 0, G_OPTION_ARG_NONE, &a.quick,
      "A smaller GEMM grid and messages up to 4 MB (under a minute; what CI runs)", NULL },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &rest, NULL, NULL },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new (NULL);
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "Measure this machine and write a calibration profile (YAML, docs/profile-file.md): "
           "fp32 GEMM rates on an M x N x K grid (powers of two and the zoo's small models' "
           "shapes; OpenBLAS, one thread per rank, all ranks at once), memory bandwidth "
           "(triad), and under `mpirun -np N` (N >= 2) all-reduce, all-gather, reduce-scatter, "
           "all-to-all, broadcast and send/recv from 8 B to 64 MB (4 MB with --quick), "
           "printed as nccl-tests prints them (out-of-place only) with every result checked.\n"
           "Run as one process it measures GEMMs and memory and skips the collectives.");
  g_autofree char *description = g_strdup_printf (
      "The profile applies to the `host` cluster's device (cpu-core).\n%s\n\n%s",
      MP_CLI_PROFILE_HELP, MP_CLI_EXIT_CODES);
  g_option_context_set_description (ctx, description);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status < 0 && rest != NULL && rest[0] != NULL)
    {
      g_autofree char *msg = g_strdup_printf ("unexpected argument '%s'", rest[0]);
      status = mp_cli_usage (ctx, msg);
    }
  if (status < 0 && a.backend != NULL && strcmp (a.backend, "cuda") == 0)
    {
      /* Refused, not stubbed: the GPU sweep (bf16/fp32 cuBLAS GEMMs, device bandwidth, NCCL
       * collectives) is not written yet. */
      fprintf (stderr, "mpplan: calibrate --backend cuda is not implemented yet (the GPU "
                       "sweep of issue 8 is pending); only --backend host calibrates in "
                       "this version\n");
      status = 1;
    }
  if (status < 0 && a.backend != NULL && strcmp (a.backend, "host") != 0)
    {
      g_autofree char *msg = g_strdup_printf ("unknown backend '%s' (this build calibrates: "
                                              "host)", a.backend);
      status = mp_cli_usage (ctx, msg);
    }
  if (status < 0)
    status = calibrate (&a, &argc, &argv, command);
  g_free (a.backend);
  g_free (a.output);
  return status;
}
