/* cmd-exec.c - `mpirun -np N mpplan exec -p plan.yaml [--steps S] [--warmup W] [--seed X]
 * [-o measured.json] [--trace trace.json] [--check] [--timeout S]`: run a plan for real (exec/), one
 * process per rank (without mpirun, a world of one); rank 0 prints what it measured and
 * writes measured.json and the trace (report/ draws it). `mpplan exec -p plan.yaml
 * --dry-run` checks a plan of any size the same way, runs nothing.
 *
 * Every rank reads the plan and reaches the same verdict on bad input, so each exits 2
 * with no communication; only rank 0 prints the message. */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "exec/exec.h"
#include "exec/backend.h"
#include "planner/planner.h"
#include "report/report.h"
#include "common/output.h"

#include <stdio.h>

/* Where the figures go (rank 0): measured.json and the trace, or NULL. */
typedef struct {
  const char *output_path, *trace_path;
} ExecFiles;

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

/* The summary line of a run (rank 0's result). */
static void
print_summary (const MpExecResult *r)
{
  printf ("measured %u step%s after %u warm-up: step %.4f s (min %.4f, max %.4f); ",
          r->steps, r->steps == 1 ? "" : "s", r->warmup, r->summary.step.median,
          r->summary.step.min, r->summary.step.max);
  for (int p = 0; p < MP_PHASE_N; p++)
    printf ("%s%s %.4f", p ? ", " : "", mp_phase_name (p), r->summary.t[p].median);
  const MpMemStats *mem = &r->ranks[r->mem_rank].mem;
  printf ("; peak memory %.1f MiB (gradients at most %.1f MiB)\n", mem->peak_total / 1048576.0,
          mem->peak[MP_MEM_GRADIENTS] / 1048576.0);
  if (r->moe_choices > 0)
    printf ("MoE: %.0f of %.0f (token, expert) choices dropped over the experts' capacity "
            "(%.2f%%), warm-up included\n", r->moe_dropped, r->moe_choices,
            100 * r->moe_dropped / r->moe_choices);
}

/* --check: both runs side by side, step by step, and the verdict. */
static void
print_check (const MpExecResult *r)
{
  printf ("check against one rank on the host backend (relative tolerance %g):\n",
          r->check_rtol);
  printf ("%4s  %14s %14s %9s  %14s %14s %9s\n", "step", "loss", "loss (1 rank)", "rel",
          "grad norm", "(1 rank)", "rel");
  for (guint s = 0; s < r->warmup + r->steps; s++)
    {
      const MpExecCheckStep *c = &r->check[s];
      printf ("%4u  %14.8f %14.8f %9.2e  %14.8g %14.8g %9.2e%s\n", s, c->loss, c->ref_loss,
              c->rel_loss, c->grad_norm, c->ref_grad_norm, c->rel_grad_norm,
              c->mismatch ? "  MISMATCH" : "");
    }
  printf ("check: %s\n", r->check_ok ? "ok, every step matches" : "MISMATCH");
  fflush (stdout);
}

/* measured.json and the trace of the last measured step (report/ draws it). */
static gboolean
write_files (const MpExecResult *r, const MpPlanResolved *res, const ExecFiles *files,
             GError **error)
{
  g_autoptr(JsonNode) plan_json = mp_plan_to_json (res->plan);
  if (files->output_path)
    {
      g_autoptr(JsonNode) measured = mp_exec_result_to_json (r, plan_json);
      if (!mp_json_write (files->output_path, measured, error))
        return FALSE;
    }
  if (files->trace_path == NULL)
    return TRUE;
  g_autofree MpTraceRank *ranks = g_new0 (MpTraceRank, r->n_ranks);
  for (guint i = 0; i < r->n_ranks; i++)
    ranks[i] = (MpTraceRank) { r->ranks[i].prog, r->ranks[i].times, r->ranks[i].last_start,
                               r->ranks[i].mem.peak_total };
  g_autoptr(JsonNode) trace = mp_trace_measured_run (ranks, r->n_ranks, res->model, plan_json,
                                                     r->summary.step.median);
  return mp_json_write (files->trace_path, trace, error);
}

/* Rank 0 prints and writes what the run measured. */
static gboolean
report_run (const MpExecResult *r, const MpPlanResolved *res, const ExecFiles *files,
            GError **error)
{
  print_summary (r);
  if (!write_files (r, res, files, error))
    return FALSE;
  if (r->checked)
    print_check (r);
  else
    printf ("loss: first %.6f, last %.6f\n", r->loss[0], r->loss[r->warmup + r->steps - 1]);
  return TRUE;
}

/* What the backend runs otherwise than the plan says (exec's --help lists them too). */
static void
print_notes (const char *plan_path, const MpParallelConfig *cfg, const char *backend)
{
  const char *b = backend ? backend : "host";
  if (cfg->fp8 && g_str_equal (b, "cuda"))
    fprintf (stderr, "mpplan: note: %s: the plan's fp8 GEMMs run in FP8 (E4M3 forward, E5M2 "
             "gradients, per-tensor current scaling) where N, C and OC are multiples of 16; "
             "the router, the output head and the grouped expert GEMMs run in bf16\n",
             plan_path);
  else if (cfg->fp8)
    fprintf (stderr, "mpplan: note: %s: the plan's fp8 GEMMs run in fp32 on the %s backend "
             "(FP8 runs on --backend cuda)\n", plan_path, b);
  if (cfg->moe_a2a_overlap)
    fprintf (stderr, "mpplan: note: %s: moe_a2a_overlap: the MoE dispatch and combine run "
             "without the overlap (the executor runs micro-batches one at a time)\n",
             plan_path);
  if (mp_parallel_config_cp_allgather (cfg) && mp_stack_cp_allgather (cfg->stack))
    fprintf (stderr, "mpplan: note: %s: %s's context parallelism: K/V all-gathered as it "
             "does, dK/dV reduce-scattered as Transformer Engine does (torch rings them)\n",
             plan_path, mp_stack_name (cfg->stack));
}

/* --dry-run: the plan checked as every rank checks it before a run, with no world. */
static int
dry_run (const char *plan_path, const char *backend)
{
  GError *error = NULL;
  g_autoptr(MpPlanResolved) res = mp_cli_plan_load (plan_path, &error);
  if (res == NULL)
    return mp_cli_fail (error);
  if (!mp_exec_check_plan (res->model, &res->plan->cfg, &error))
    return mp_cli_fail (error);
  print_notes (plan_path, &res->plan->cfg, backend);
  guint n = res->plan->world_size;
  if (n == 1)
    printf ("%s: exec runs this plan on one rank: mpplan exec -p %s\n", plan_path, plan_path);
  else
    printf ("%s: exec runs this plan on %u ranks: mpirun -np %u mpplan exec -p %s\n",
            plan_path, n, n, plan_path);
  return 0;
}

static int
run (int *argc, char ***argv, const char *plan_path, const MpExecOptions *opts,
     const ExecFiles *files)
{
  GError *error = NULL;
  g_autoptr(MpWorld) world = mp_world_join (argc, argv, &error);
  if (world == NULL)
    return mp_cli_fail (error);
  int rank = mp_world_rank (world);
  g_autoptr(MpPlanResolved) res = mp_cli_plan_load (plan_path, &error);
  if (res == NULL)
    return fail_once (rank, error);
  if (rank == 0)
    print_notes (plan_path, &res->plan->cfg, opts->backend);
  g_autoptr(MpExecResult) result = mp_exec_plan (world, res, opts, &error);
  if (result == NULL)
    return fail_once (rank, error);
  if (rank == 0 && !report_run (result, res, files, &error))
    return mp_cli_fail (error);
  if (!mp_exec_result_check (result, &error))
    return fail_once (rank, error);
  return 0;
}

int
mp_cmd_exec (int argc, char **argv, gboolean do_help)
{
  g_autofree char *plan_path = NULL, *output = NULL, *trace = NULL;
  gint64 steps = 5, warmup = 1, seed = 1234;
  gboolean check = FALSE, dry = FALSE;
  double timeout = -1;
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
    { "timeout", 0, 0, G_OPTION_ARG_DOUBLE, &timeout,
      "Stall watchdog: a rank that spends more than S seconds in one instruction prints "
      "where it waits and the job ends, exit 1 (default: 100 predicted steps, at least 60 "
      "s; 0: none)", "S" },
    { "dry-run", 0, 0, G_OPTION_ARG_NONE, &dry,
      "Check the plan as every rank does before a run (what exec refuses, exit 2) and "
      "print the mpirun line, without running it (no MPI)", NULL },
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
           "seeded synthetic data with the plan's data, tensor, context, pipeline and expert "
           "split, ZeRO stage and recomputation (host backend: OpenBLAS and MPI), measures "
           "each instruction, and prints the median step time (and for an MoE model the "
           "token choices dropped over the experts' capacity).");
  g_autofree char *limits = mp_exec_limits_text ();
  g_autofree char *description = g_strconcat (limits, "\n\n", MP_CLI_EXIT_CODES, NULL);
  g_option_context_set_description (ctx, description);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status >= 0)
    return status;
  if (plan_path == NULL)
    return mp_cli_usage (ctx, "no plan file given (-p plan.yaml)");
  if (steps < 1 || steps > 100000 || warmup < 0 || warmup > 100000)
    return mp_cli_usage (ctx, "--steps must be from 1 to 100000 and --warmup from 0 to 100000");
  if (backend != NULL && !mp_backend_name_valid (backend))
    {
      g_autofree char *msg = g_strdup_printf ("unknown backend '%s' (host, cuda, cuda-fp32)",
                                              backend);
      return mp_cli_usage (ctx, msg);
    }
  if (timeout != -1 && !(timeout >= 0 && timeout <= 1e6))
    return mp_cli_usage (ctx, "--timeout must be from 0 (no watchdog) to 1000000 seconds");
  if (dry)
    return dry_run (plan_path, backend);
  MpExecOptions opts = { (guint) steps, (guint) warmup, (guint64) seed, check, backend,
                         timeout };
  ExecFiles files = { output, trace };
  return run (&argc, &argv, plan_path, &opts, &files);
}
