/* cmd-calibrate.c - `mpirun -np N mpplan calibrate --backend host|cuda [-o FILE] [--quick]
 * [--device NAME]`: measure this machine (exec/calibrate*.c) and write the profile the cost
 * model then uses in place of its built-in curves (rank 0 writes it, whole or not at all). */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/output.h"
#include "costmodel/costmodel.h"
#include "exec/exec.h"

#include <stdio.h>
#include <string.h>

typedef struct {
  char *backend, *output, *device;
  gboolean quick;
} CalibrateArgs;

/* Where the profile goes without -o: the host profile's path for host (the `host` cluster
 * finds it there); for cuda, cuda-profile.yaml beside it, so a GPU profile never replaces
 * the host one. NULL when MPPLAN_PROFILE is empty. */
static char *
default_path (const char *backend)
{
  g_autofree char *host = mp_cost_profile_host_path ();
  if (host == NULL || strcmp (backend, "host") == 0)
    return g_steal_pointer (&host);
  g_autofree char *dir = g_path_get_dirname (host);
  return g_build_filename (dir, "cuda-profile.yaml", NULL);
}

/* Joins the world, measures, and writes the profile on rank 0; returns the exit status. */
static int
calibrate (const CalibrateArgs *a, int *argc, char ***argv, const char *command)
{
  GError *error = NULL;
  g_autoptr(MpWorld) world = mp_world_join (argc, argv, &error);
  if (world == NULL)
    return mp_cli_fail (error);
  MpCalibrateOptions opts = { .backend = a->backend, .quick = a->quick, .device = a->device,
                              .out = stdout };
  g_autoptr(MpCostProfile) profile = mp_calibrate (world, &opts, &error);
  if (profile == NULL)
    return mp_cli_fail (error);
  if (mp_world_rank (world) != 0)
    return 0;
  g_autofree char *path = a->output ? g_strdup (a->output) : default_path (a->backend);
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
  g_autofree char *args = g_strjoinv (" ", argv);
  g_autofree char *command = g_strconcat ("mpplan ", args, NULL);
  const GOptionEntry entries[] = {
    { "backend", 0, 0, G_OPTION_ARG_STRING, &a.backend,
      "What to measure: host (OpenBLAS GEMMs and MPI collectives; the default) or cuda (one "
      "GPU per rank: cuBLAS GEMMs, device copies, NCCL collectives)", "host|cuda" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &a.output,
      "Write the profile to FILE (default: see below)", "FILE" },
    { "quick", 0, 0, G_OPTION_ARG_NONE, &a.quick,
      "A smaller GEMM grid and messages up to 4 MB (host) or 64 MB (cuda): under a minute",
      NULL },
    { "device", 0, 0, G_OPTION_ARG_STRING, &a.device,
      "The cluster device the profile applies to (default: cpu-core for host, the GPU's "
      "name for cuda)", "NAME" },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new (NULL);
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "Measure this machine and write a calibration profile (YAML, docs/profile-file.md): "
           "GEMM rates on an M x N x K grid (powers of two and the zoo models' shapes), "
           "memory bandwidth, and under `mpirun -np N` (N >= 2) all-reduce, all-gather, "
           "reduce-scatter, all-to-all, broadcast and send/recv, printed as nccl-tests prints "
           "them (out-of-place; broadcast in place) with every result checked, all ranks at "
           "once.\n"
           "--backend host: fp32 GEMMs (OpenBLAS, one thread per rank) 16..2048, the cost of "
           "a GEMM's cold weight, a memory triad, the executor's own attention (at each zoo model's sequence length), norm, "
           "gelu, loss and optimizer kernels, MPI collectives from 8 B to 64 MB (4 MB with "
           "--quick). GEMMs and kernels: the median of 5 whole passes (3 with --quick), since "
           "load from elsewhere comes in bursts; the spread of the passes is printed and kept "
           "in the profile, with a warning above 10%; run it on an otherwise idle machine.\n"
           "--backend cuda: one GPU per rank; bf16 (fp32 accumulation, the cuda backend's "
           "GEMM) and fp32 GEMMs through cuBLAS 256..8192 plus gpt2-124m's shapes, device-to-"
           "device copy bandwidth, NCCL collectives from 8 B to 256 MB (64 MB with --quick). "
           "Without a GPU (or in a build without CUDA) it exits 1: \"no CUDA device\"; without "
           "its module mpplan-cuda.so, 2: \"CUDA backend not available\".\n"
           "Run as one process it measures GEMMs and memory and skips the collectives.");
  g_autofree char *description = g_strdup_printf (
      "The profile applies to the cluster devices named --device (host: cpu-core, the `host` "
      "cluster's; cuda: the GPU's name, e.g. --device H200-SXM-141GB to match the h200 "
      "cluster). Without -o, host writes the host profile (below) and cuda "
      "cuda-profile.yaml beside it.\n%s\n\n%s",
      MP_CLI_PROFILE_HELP, MP_CLI_EXIT_CODES);
  g_option_context_set_description (ctx, description);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (a.backend == NULL)
    a.backend = g_strdup ("host");
  if (status < 0 && strcmp (a.backend, "host") != 0 && strcmp (a.backend, "cuda") != 0)
    {
      g_autofree char *msg = g_strdup_printf ("unknown backend '%s' (known: host, cuda)",
                                              a.backend);
      status = mp_cli_usage (ctx, msg);
    }
  if (status < 0)
    status = calibrate (&a, &argc, &argv, command);
  g_free (a.backend);
  g_free (a.output);
  g_free (a.device);
  return status;
}
