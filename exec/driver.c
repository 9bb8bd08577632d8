/* driver.c - `mpplan exec`: every rank builds its share of the model and its program,
 * runs warm-up and measured steps, and rank 0 writes measured.json and the trace; with
 * --check rank 0 then runs the same model, seed and data alone (one rank, the same
 * micro-batches accumulated) and compares every step's loss and gradient norm.
 *
 * A failure after the ranks started working together (out of memory, an MPI error, a
 * program error) cannot be returned politely: the other ranks may be waiting in a
 * collective. The failing rank names itself and the reason on stderr and ends the job
 * with MPI_Abort. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec.h"
#include "exec/measure.h"
#include "common/error.h"
#include "common/output.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* --check tolerances, relative, on the loss and the gradient norm: host 1e-5 (the same
 * kernels in another order); cuda-fp32 1e-4 (fp32 GEMMs without TF32, atomics reorder the
 * sums); cuda (bf16 GEMM inputs): 3e-2 - a bf16 input keeps 8 significant bits (relative
 * rounding 2^-9 = 2e-3 per operand), a GEMM's fp32 sum of K such products has error about
 * 2e-3 relative on each output element, and through a few layers of a tiny model (and the
 * gradient norm, a sum of squares of such outputs) this reaches about 1e-2. */
#define CHECK_RTOL_HOST 1e-5
#define CHECK_RTOL_FP32 1e-4
#define CHECK_RTOL_BF16 3e-2
static double CHECK_RTOL = CHECK_RTOL_HOST;

typedef struct {
  MpBackend *be;
  MpExec *ex;
  MpProgram *prog;
  MpRunner *runner;
} Job;

/* Per step: loss and gradient norm; per measured step: one rank's phases. */
typedef struct {
  double *loss, *grad_norm;
  MpRankStep *phases;
  double last_start;
} Record;

static void
job_close (Job *j)
{
  mp_runner_free (j->runner);
  mp_program_free (j->prog);
  mp_exec_free (j->ex);
  if (j->be)
    j->be->ops->free (j->be);
}

static gboolean
job_open (Job *j, const char *backend, int rank, int size, const MpPlanResolved *res,
          const MpPlan *plan, guint64 seed, GError **error)
{
  const MpParallelConfig *cfg = &plan->cfg;
  const MpModel *model = res->model;
  guint tp, cp, dp, pp;
  mp_plan_rank_coords (cfg, (guint) rank, &tp, &cp, &dp, &pp);
  guint n_chunks = cfg->pp * MAX (cfg->vpp, 1u);
  g_autofree guint *stage_of = g_new0 (guint, model->n_layers);
  for (guint c = 0, at = 0; c < n_chunks; at += plan->chunk_layers[c], c++)
    for (guint l = at; l < at + plan->chunk_layers[c] && l < model->n_layers; l++)
      stage_of[l] = c % cfg->pp;
  j->be = mp_backend_new (backend, rank, size, error);
  if (j->be == NULL)
    return FALSE;
  double cap = 0;
  for (guint g = 0; g < res->cluster->n_groups; g++)
    if (cap == 0 || res->cluster->groups[g].device.memory_bytes < cap)
      cap = res->cluster->groups[g].device.memory_bytes;
  j->be->mem_limit_bytes = cap;
  j->ex = mp_exec_new (j->be, model, cfg, plan->global_batch, tp, dp, pp, stage_of, seed,
                       error);
  if (j->ex == NULL)
    return FALSE;
  j->prog = mp_program_build (res->ctx, plan, (guint) rank);
  if (j->prog == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "no program for rank %d of this plan", rank);
      return FALSE;
    }
  j->runner = mp_runner_new (j->ex, j->prog, plan->chunk_layers, n_chunks);
  return TRUE;
}

static gboolean
barrier (Job *j, GError **error)
{
  float one = 1;
  return j->be->ops->all_reduce (j->be, j->ex->world_group, &one, 1, MP_REDUCE_SUM, error);
}

/* The test hook for a rank failing mid-run (tests/exec.sh): MPPLAN_EXEC_FAIL_RANK=R makes
 * rank R fail at the start of its second step, when the others are already waiting for it
 * in a collective, so the test sees whether the job ends rather than hangs. */
static gboolean
injected_failure (const Job *j, guint step, GError **error)
{
  const char *env = g_getenv ("MPPLAN_EXEC_FAIL_RANK");
  if (env == NULL || step != 1 || j->be->size < 2 || atoi (env) != j->be->rank)
    return FALSE;
  g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
               "failure injected at step %u (MPPLAN_EXEC_FAIL_RANK=%s)", step, env);
  return TRUE;
}

/* Runs TOTAL steps, the first WARMUP not measured. */
static gboolean
run_steps (Job *j, guint total, guint warmup, Record *rec, GError **error)
{
  for (guint s = 0; s < total; s++)
    {
      double t0, t1;
      if (injected_failure (j, s, error) || !barrier (j, error)
          || !mp_runner_step (j->runner, s, &t0, &t1, error))
        return FALSE;
      if (s >= warmup)
        {
          mp_measure_attribute (j->prog, mp_runner_times (j->runner), t0, t1,
                                &rec->phases[s - warmup]);
          rec->last_start = t0;
        }
      rec->grad_norm[s] = mp_runner_grad_norm (j->runner);
      if (!mp_exec_step_loss (j->ex, &rec->loss[s], error))
        return FALSE;
    }
  return TRUE;
}

static void
record_init (Record *rec, guint total)
{
  rec->loss = g_new0 (double, total);
  rec->grad_norm = g_new0 (double, total);
  rec->phases = g_new0 (MpRankStep, total);
}

static void
record_clear (Record *rec)
{
  g_free (rec->loss);
  g_free (rec->grad_norm);
  g_free (rec->phases);
}

/* Ends the whole job after a failure on this rank. */
static void G_GNUC_NORETURN
fail_job (Job *j, GError *error)
{
  fprintf (stderr, "mpplan exec: rank %d failed: %s\n", j->be ? j->be->rank : -1,
           error ? error->message : "unknown error");
  fflush (stderr);
  j->be->ops->abort (j->be, 1);
  g_assert_not_reached ();
}

/* The single-rank reference: the plan's model, batch and micro-batch size on one rank,
 * no parallelism, the same micro-batches accumulated in order. */
static gboolean
reference_run (const MpPlanResolved *res, const MpPlan *plan, guint total, guint64 seed,
               Record *rec, GError **error)
{
  MpParallelConfig cfg = plan->cfg;
  cfg.num_micro_batches = plan->cfg.num_micro_batches * plan->cfg.dp;
  cfg.dp = cfg.tp = cfg.pp = cfg.cp = cfg.vpp = cfg.ep = 1;
  cfg.sequence_parallel = FALSE;
  cfg.zero = 0;
  cfg.recompute = MP_RECOMPUTE_NONE;
  cfg.schedule = MP_SCHEDULE_NONE;
  cfg.chunk_layers = NULL;
  cfg.placement = NULL;
  for (int d = 0; d < MP_DIM_N; d++)
    cfg.order[d] = 0;
  g_autoptr(MpPlan) one = g_new0 (MpPlan, 1);
  if (!mp_plan_evaluate (res->ctx, &cfg, plan->global_batch, one, error))
    return FALSE;
  Job j = { 0 };
  gboolean ok = job_open (&j, "host", 0, 1, res, one, seed, error)
                && run_steps (&j, total, total, rec, error);
  job_close (&j);
  return ok;
}

/* Prints both runs side by side; FALSE when a step differs by more than CHECK_RTOL. */
static gboolean
compare (const Record *par, const Record *ref, guint total, GString *report)
{
  gboolean ok = TRUE;
  g_string_append_printf (report, "%4s  %14s %14s %9s  %14s %14s %9s\n", "step",
                          "loss", "loss (1 rank)", "rel", "grad norm", "(1 rank)", "rel");
  for (guint s = 0; s < total; s++)
    {
      double rl = fabs (par->loss[s] - ref->loss[s]) / MAX (fabs (ref->loss[s]), 1e-30);
      double rg = fabs (par->grad_norm[s] - ref->grad_norm[s])
                  / MAX (fabs (ref->grad_norm[s]), 1e-30);
      gboolean bad = !(rl <= CHECK_RTOL) || !(rg <= CHECK_RTOL);
      ok = ok && !bad;
      g_string_append_printf (report, "%4u  %14.8f %14.8f %9.2e  %14.8g %14.8g %9.2e%s\n", s,
                              par->loss[s], ref->loss[s], rl, par->grad_norm[s],
                              ref->grad_norm[s], rg, bad ? "  MISMATCH" : "");
    }
  return ok;
}

/* Gathers every rank's figures; rank 0 writes measured.json and the trace. */
static gboolean
write_results (MpWorld *world, Job *j, const MpPlanResolved *res, const Record *rec,
               const MpExecOptions *opts, GError **error)
{
  MpMemStats mem;
  j->be->ops->get_mem (j->be, &mem);
  g_autofree char *mine = mp_measure_rank_json (j->prog, res->model, rec->phases, opts->steps,
                                                mp_runner_times (j->runner), rec->last_start,
                                                &mem);
  g_autoptr(GBytes) bytes = g_bytes_new (mine, strlen (mine));
  g_autoptr(GPtrArray) all = mp_world_gather (world, bytes, error);
  if (all == NULL)
    return FALSE;
  if (mp_world_rank (world) != 0)
    return TRUE;
  g_autoptr(JsonNode) plan_json = mp_plan_to_json (res->plan);
  g_autoptr(JsonNode) trace = NULL;
  g_autoptr(JsonNode) root = mp_measure_job_json (all, plan_json, rec->loss, rec->grad_norm,
                                                  opts->steps, opts->warmup,
                                                  opts->backend ? opts->backend : "host",
                                                  opts->trace_path ? &trace : NULL, error);
  if (root == NULL)
    return FALSE;
  JsonObject *o = json_node_get_object (root);
  JsonObject *t = json_object_get_object_member (o, "time_s");
  printf ("measured %u step%s after %u warm-up: step %.4f s (min %.4f, max %.4f); ",
          opts->steps, opts->steps == 1 ? "" : "s", opts->warmup,
          json_object_get_double_member (o, "step_s"),
          json_object_get_double_member (o, "step_s_min"),
          json_object_get_double_member (o, "step_s_max"));
  for (int p = 0; p < MP_PHASE_N; p++)
    printf ("%s%s %.4f", p ? ", " : "", mp_phase_name (p),
            json_object_get_double_member (t, mp_phase_name (p)));
  printf ("; peak memory %.1f MiB\n",
          json_object_get_double_member (json_object_get_object_member (o, "memory_bytes"),
                                         "peak") / 1048576.0);
  if (opts->output_path && !mp_json_write (opts->output_path, root, error))
    return FALSE;
  return opts->trace_path == NULL || mp_json_write (opts->trace_path, trace, error);
}

gboolean
mp_exec_plan (MpWorld *world, const MpPlanResolved *res, const MpExecOptions *opts,
              GError **error)
{
  const MpPlan *plan = res->plan;
  int rank = mp_world_rank (world), size = mp_world_size (world);
  if ((guint) size != plan->world_size)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                   "the plan runs on %u rank%s but %d %s started: use mpirun -np %u",
                   plan->world_size, plan->world_size == 1 ? "" : "s", size,
                   size == 1 ? "was" : "were", plan->world_size);
      return FALSE;
    }
  guint total = opts->warmup + opts->steps;
  const char *backend = opts->backend ? opts->backend : "host";
  CHECK_RTOL = g_str_equal (backend, "cuda") ? CHECK_RTOL_BF16
               : g_str_equal (backend, "cuda-fp32") ? CHECK_RTOL_FP32 : CHECK_RTOL_HOST;
  if (g_str_has_prefix (backend, "cuda") && mp_backend_cuda_device_count () <= 0)
    {
      /* The same verdict on every rank, before anyone waits for anyone. */
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "no CUDA device: --backend %s needs an NVIDIA GPU per rank (none visible "
                   "to rank %d%s); use --backend host", backend, rank,
#ifdef HAVE_CUDA
                   ""
#else
                   ", and this mpplan was built without CUDA"
#endif
                   );
      return FALSE;
    }
  Job j = { 0 };
  GError *local = NULL;
  if (!job_open (&j, opts->backend, rank, size, res, plan, opts->seed, &local))
    {
      if (local->code == MP_ERROR_INPUT || size == 1)
        {
          g_propagate_error (error, local);
          job_close (&j);
          return FALSE;
        }
      fail_job (&j, local);
    }
  Record rec;
  record_init (&rec, total);
  if (!run_steps (&j, total, opts->warmup, &rec, &local)
      || !write_results (world, &j, res, &rec, opts, &local))
    {
      if (size == 1)
        {
          g_propagate_error (error, local);
          record_clear (&rec);
          job_close (&j);
          return FALSE;
        }
      fail_job (&j, local);
    }
  gboolean ok = TRUE;
  if (opts->check)
    {
      float bad = 0;
      if (rank == 0)
        {
          Record ref;
          record_init (&ref, total);
          if (!reference_run (res, plan, total, opts->seed, &ref, &local))
            {
              if (size == 1)
                {
                  g_propagate_error (error, local);
                  record_clear (&ref);
                  record_clear (&rec);
                  job_close (&j);
                  return FALSE;
                }
              fail_job (&j, local);
            }
          g_autoptr(GString) report = g_string_new (NULL);
          bad = compare (&rec, &ref, total, report) ? 0 : 1;
          printf ("check against one rank on the host backend (relative tolerance %g):\n%s", CHECK_RTOL,
                  report->str);
          printf ("check: %s\n", bad ? "MISMATCH" : "ok, every step matches");
          fflush (stdout);
          record_clear (&ref);
        }
      if (!j.be->ops->all_reduce (j.be, j.ex->world_group, &bad, 1, MP_REDUCE_MAX, &local))
        fail_job (&j, local);
      if (bad > 0)
        {
          g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                       "mpplan exec --check: the parallel run does not compute what one rank "
                       "computes (loss or gradient norm off by more than %g relative; see the "
                       "table above)", CHECK_RTOL);
          ok = FALSE;
        }
    }
  else if (rank == 0)
    {
      printf ("loss: first %.6f, last %.6f\n", rec.loss[0], rec.loss[total - 1]);
    }
  record_clear (&rec);
  job_close (&j);
  return ok;
}
