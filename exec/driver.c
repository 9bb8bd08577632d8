/* driver.c - `mpplan exec`: every rank builds its share of the model and its program,
 * runs warm-up and measured steps, and sends its figures to rank 0, which returns them
 * with the job's summary (cli/cmd-exec.c prints them and writes the files); with --check
 * rank 0 then runs the same model, seed and data alone (one rank, the same micro-batches
 * accumulated) and compares every step's loss and gradient norm.
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
/* cuda with an fp8 plan (FP8 GEMMs, E4M3 forward, E5M2 gradients): 1e-1. E4M3 keeps 3
 * mantissa bits (rounding uniform within half a spacing: 2^-4 relative at most, RMS
 * 2^-4/sqrt(3) = 3.6% per operand), E5M2 2 bits (7.2% RMS); a GEMM of such operands is
 * off by the RMS sum of its two operands' errors, ~5% forward and ~8% for the gradients
 * (tests/test-kernels.c test_matmul_fp8 measures 3.7% and 5.4-5.8%). The loss averages
 * over tokens and sits near log V, so it moves far less; the gradient norm carries the
 * gradients' few percent, plus what bf16 adds on the GEMMs FP8 leaves out. */
#define CHECK_RTOL_FP8 1e-1

/* The watchdog's default: 100 predicted steps for one instruction (one instruction is at
 * most a step's work, so a healthy run stays two orders of magnitude under it), at least
 * 60 s, as a tiny plan's predicted step is milliseconds while an ASan build on a shared
 * 2-core host runs it tens of times slower. Like PyTorch's 10-minute process-group
 * default, it is there to end a hang, not to police speed. */
#define WATCHDOG_STEPS 100
#define WATCHDOG_FLOOR_S 60.0

double
mp_exec_default_timeout (const MpPlan *plan)
{
  return MAX (WATCHDOG_FLOOR_S, WATCHDOG_STEPS * plan->step_s);
}

/* Whether BACKEND runs the plan's GEMMs in FP8: "cuda" with an fp8 plan ("cuda-fp32" is
 * fp32 as asked; the host is fp32 and says so). */
static gboolean
runs_fp8 (const char *backend, const MpPlan *plan)
{
  return plan->cfg.fp8 && backend != NULL && g_str_equal (backend, "cuda");
}

static double
check_rtol (const char *backend, const MpPlan *plan)
{
  return runs_fp8 (backend, plan)            ? CHECK_RTOL_FP8
         : g_str_equal (backend, "cuda")      ? CHECK_RTOL_BF16
         : g_str_equal (backend, "cuda-fp32") ? CHECK_RTOL_FP32
                                              : CHECK_RTOL_HOST;
}

/* ---- one rank's share -------------------------------------------------------------- */

struct _MpExecSession {
  MpBackend *be;            /* borrowed */
  MpExec *ex;
  MpProgram *prog;
  MpRunner *runner;
};

void
mp_exec_session_free (MpExecSession *s)
{
  if (s == NULL)
    return;
  mp_runner_free (s->runner);
  mp_program_free (s->prog);
  mp_exec_free (s->ex);
  g_free (s);
}

MpExecSession *
mp_exec_session_new (MpBackend *be, const MpPlanResolved *res, const MpPlan *plan,
                     guint64 seed, GError **error)
{
  const MpParallelConfig *cfg = &plan->cfg;
  const MpModel *model = res->model;
  guint tp, cp, dp, pp;
  mp_plan_rank_coords (cfg, (guint) be->rank, &tp, &cp, &dp, &pp);
  guint n_chunks = cfg->pp * MAX (cfg->vpp, 1u);
  g_autofree guint *stage_of = g_new0 (guint, model->n_layers);
  for (guint c = 0, at = 0; c < n_chunks; at += plan->chunk_layers[c], c++)
    for (guint l = at; l < at + plan->chunk_layers[c] && l < model->n_layers; l++)
      stage_of[l] = c % cfg->pp;
  double cap = 0;
  for (guint g = 0; g < res->cluster->n_groups; g++)
    if (cap == 0 || res->cluster->groups[g].device.memory_bytes < cap)
      cap = res->cluster->groups[g].device.memory_bytes;
  be->mem_limit_bytes = cap;
  MpExecSession *s = g_new0 (MpExecSession, 1);
  s->be = be;
  s->ex = mp_exec_new (be, model, cfg, plan->global_batch, tp, cp, dp, pp, stage_of, seed,
                       error);
  if (s->ex == NULL)
    {
      mp_exec_session_free (s);
      return NULL;
    }
  mp_exec_set_chunks (s->ex, plan->chunk_layers, n_chunks);
  s->prog = mp_program_build (res->ctx, plan, (guint) be->rank);
  if (s->prog == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "no program for rank %d of this plan",
                   be->rank);
      mp_exec_session_free (s);
      return NULL;
    }
  s->runner = mp_runner_new (s->ex, s->prog, plan->chunk_layers, n_chunks);
  return s;
}

gboolean
mp_exec_session_step (MpExecSession *s, guint step, double *t_start, double *t_end,
                      GError **error)
{
  return mp_runner_step (s->runner, step, t_start, t_end, error);
}

const MpProgram *
mp_exec_session_program (const MpExecSession *s)
{
  return s->prog;
}

const MpInsnTime *
mp_exec_session_times (const MpExecSession *s)
{
  return mp_runner_times (s->runner);
}

/* ---- the job ----------------------------------------------------------------------- */

typedef struct {
  MpBackend *be;
  MpExecSession *s;
  MpWatchdog *watchdog;     /* borrowed, or NULL */
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
  mp_exec_session_free (j->s);
  if (j->be)
    j->be->ops->free (j->be);
}

static gboolean
job_open (Job *j, const char *backend, int rank, int size, const MpPlanResolved *res,
          const MpPlan *plan, guint64 seed, GError **error)
{
  j->be = mp_backend_new (backend, rank, size, error);
  if (j->be != NULL && runs_fp8 (backend, plan)
      && !j->be->ops->set_gemm_dtype (j->be, MP_DTYPE_FP8, error))
    return FALSE;
  return j->be != NULL && (j->s = mp_exec_session_new (j->be, res, plan, seed, error)) != NULL;
}

static gboolean
barrier (Job *j, GError **error)
{
  float one = 1;
  return j->be->ops->all_reduce (j->be, j->s->ex->world_group, &one, 1, MP_REDUCE_SUM, error);
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

/* The test hook for a stalled rank (tests/exec-watchdog.sh): MPPLAN_EXEC_STALL=R:K makes
 * rank R stop for good before instruction K of its program, the others waiting for it, so
 * the test sees the watchdog end the job. -1 on every other rank. */
static gint
injected_stall (const Job *j)
{
  const char *env = g_getenv ("MPPLAN_EXEC_STALL");
  int rank, insn;
  if (env == NULL || sscanf (env, "%d:%d", &rank, &insn) != 2 || rank != j->be->rank
      || insn < 0)
    return -1;
  return insn;
}

/* Runs TOTAL steps, the first WARMUP not measured. */
static gboolean
run_steps (Job *j, guint total, guint warmup, Record *rec, GError **error)
{
  mp_runner_watch (j->s->runner, j->watchdog, injected_stall (j));
  for (guint s = 0; s < total; s++)
    {
      double t0, t1;
      if (injected_failure (j, s, error))
        return FALSE;
      mp_watchdog_enter (j->watchdog, s, "the barrier before the step");
      if (!barrier (j, error) || !mp_runner_step (j->s->runner, s, &t0, &t1, error))
        return FALSE;
      if (s >= warmup)
        {
          mp_measure_attribute (j->s->prog, mp_runner_times (j->s->runner), t0, t1,
                                &rec->phases[s - warmup]);
          rec->last_start = t0;
        }
      rec->grad_norm[s] = mp_runner_grad_norm (j->s->runner);
      mp_watchdog_enter (j->watchdog, s, "the step loss's all-reduce");
      if (!mp_exec_step_loss (j->s->ex, &rec->loss[s], error))
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
  cfg.etp = 0;                     /* MoE: experts as tp splits them, i.e. whole */
  cfg.sequence_parallel = FALSE;
  cfg.zero = cfg.zero_shard = 0;
  cfg.no_reshard = FALSE;
  cfg.recompute = MP_RECOMPUTE_NONE;
  cfg.recompute_num_layers = cfg.recompute_modules = 0;
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

/* Both runs side by side into R->check (TOTAL steps); FALSE when a step differs by more
 * than R->check_rtol. */
static gboolean
compare (const Record *par, const Record *ref, guint total, MpExecResult *r)
{
  gboolean ok = TRUE;
  r->check = g_new0 (MpExecCheckStep, MAX (total, 1u));
  for (guint s = 0; s < total; s++)
    {
      MpExecCheckStep *c = &r->check[s];
      c->loss = par->loss[s], c->ref_loss = ref->loss[s];
      c->grad_norm = par->grad_norm[s], c->ref_grad_norm = ref->grad_norm[s];
      c->rel_loss = fabs (c->loss - c->ref_loss) / MAX (fabs (c->ref_loss), 1e-30);
      c->rel_grad_norm = fabs (c->grad_norm - c->ref_grad_norm)
                         / MAX (fabs (c->ref_grad_norm), 1e-30);
      c->mismatch = !(c->rel_loss <= r->check_rtol) || !(c->rel_grad_norm <= r->check_rtol);
      ok = ok && !c->mismatch;
    }
  return ok;
}

/* Every rank's figures to rank 0, which rebuilds each rank's program (the same plan gives
 * the same programs) and sums the job up in R. */
static gboolean
gather_results (MpWorld *world, Job *j, const MpPlanResolved *res, const Record *rec,
                MpExecResult *r, GError **error)
{
  MpMemStats mem;
  j->be->ops->get_mem (j->be, &mem);
  mp_watchdog_enter (j->watchdog, r->warmup + r->steps, "gathering the figures at rank 0");
  const MpProgram *prog = j->s->prog;
  g_autoptr(GBytes) mine = mp_measure_rank_pack (rec->phases, r->steps,
                                                 mp_runner_times (j->s->runner),
                                                 prog->n_insns, rec->last_start, &mem);
  g_autoptr(GPtrArray) all = mp_world_gather (world, mine, error);
  if (all == NULL)
    return FALSE;
  if (mp_world_rank (world) != 0)
    return TRUE;
  r->ranks = g_new0 (MpExecRank, all->len);
  r->n_ranks = all->len;
  for (guint i = 0; i < all->len; i++)
    {
      r->ranks[i].prog = mp_program_build (res->ctx, res->plan, i);
      if (r->ranks[i].prog == NULL)
        {
          g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "no program for rank %u", i);
          return FALSE;
        }
      if (!mp_measure_rank_unpack (g_ptr_array_index (all, i), r->steps, &r->ranks[i],
                                   error))
        return FALSE;
    }
  mp_measure_result_summarize (r);
  return TRUE;
}

void
mp_exec_result_free (MpExecResult *r)
{
  if (r == NULL)
    return;
  for (guint i = 0; i < r->n_ranks; i++)
    {
      mp_program_free (r->ranks[i].prog);
      g_free (r->ranks[i].steps);
      g_free (r->ranks[i].times);
    }
  g_free (r->ranks);
  g_free (r->job);
  g_free (r->loss);
  g_free (r->grad_norm);
  g_free (r->check);
  g_free (r->backend);
  g_free (r);
}

gboolean
mp_exec_result_check (const MpExecResult *r, GError **error)
{
  if (!r->checked || r->check_ok)
    return TRUE;
  g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
               "mpplan exec --check: the parallel run does not compute what one rank "
               "computes (loss or gradient norm off by more than %g relative; see the "
               "table above)", r->check_rtol);
  return FALSE;
}

/* The same verdict on every rank, before anyone waits for anyone: a cuda backend needs a
 * GPU per rank. */
static gboolean
devices_present (const char *backend, int rank, GError **error)
{
  if (!g_str_has_prefix (backend, "cuda"))
    return TRUE;
#ifdef HAVE_CUDA
  if (!mp_backend_cuda_load (error))    /* "CUDA backend not available": no module */
    return FALSE;
#endif
  if (mp_backend_cuda_device_count () > 0)
    return TRUE;
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

/* --check on rank 0 against the reference run; the verdict to every rank. FALSE (a world
 * of one) when the reference run fails; with several ranks that ends the job. */
static gboolean
check_job (Job *j, const MpPlanResolved *res, const Record *rec, guint64 seed,
           MpExecResult *r, GError **error)
{
  GError *local = NULL;
  guint total = r->warmup + r->steps;
  float bad = 0;
  /* Rank 0 runs the whole model alone for every step while the others wait: nothing a
   * per-instruction timeout could bound. */
  mp_watchdog_pause (j->watchdog);
  if (j->be->rank == 0)
    {
      Record ref;
      record_init (&ref, total);
      if (!reference_run (res, res->plan, total, seed, &ref, &local))
        {
          record_clear (&ref);
          if (j->be->size > 1)
            fail_job (j, local);
          g_propagate_error (error, local);
          return FALSE;
        }
      bad = compare (rec, &ref, total, r) ? 0 : 1;
      record_clear (&ref);
    }
  if (!j->be->ops->all_reduce (j->be, j->s->ex->world_group, &bad, 1, MP_REDUCE_MAX, &local))
    fail_job (j, local);
  r->checked = TRUE;
  r->check_ok = bad == 0;
  return TRUE;
}

/* MoE: the job's routed and dropped (token, expert) choices into R. */
static gboolean
moe_counts (Job *j, MpExecResult *r, GError **error)
{
  const MpExec *ex = j->s->ex;
  if (ex->model->experts == 0)
    return TRUE;
  double v[2] = { (double) ex->moe_routed, (double) ex->moe_dropped };
  if (!j->be->ops->host_all_reduce (j->be, v, 2, MP_REDUCE_SUM, error))
    return FALSE;
  r->moe_choices = v[0];
  r->moe_dropped = v[1];
  return TRUE;
}

MpExecResult *
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
      return NULL;
    }
  guint total = opts->warmup + opts->steps;
  const char *backend = opts->backend ? opts->backend : "host";
  if (!devices_present (backend, rank, error))
    return NULL;
  g_autoptr(MpWatchdog) watchdog = NULL;
  if (size > 1)
    watchdog = mp_watchdog_new (rank, opts->timeout_s < 0 ? mp_exec_default_timeout (plan)
                                                          : opts->timeout_s);
  Job j = { .watchdog = watchdog };
  GError *local = NULL;
  mp_watchdog_enter (watchdog, 0, "the set-up (communicators, weights)");
  if (!job_open (&j, opts->backend, rank, size, res, plan, opts->seed, &local))
    {
      if (local->code == MP_ERROR_INPUT || size == 1)
        {
          g_propagate_error (error, local);
          job_close (&j);
          return NULL;
        }
      fail_job (&j, local);
    }
  g_autoptr(MpExecResult) r = g_new0 (MpExecResult, 1);
  r->backend = g_strdup (backend);
  r->steps = opts->steps;
  r->warmup = opts->warmup;
  r->check_rtol = check_rtol (backend, plan);
  Record rec;
  record_init (&rec, total);
  if (!run_steps (&j, total, opts->warmup, &rec, &local)
      || !gather_results (world, &j, res, &rec, r, &local))
    {
      if (size == 1)
        {
          g_propagate_error (error, local);
          record_clear (&rec);
          job_close (&j);
          return NULL;
        }
      fail_job (&j, local);
    }
  if (!moe_counts (&j, r, &local))
    fail_job (&j, local);
  gboolean ok = !opts->check || check_job (&j, res, &rec, opts->seed, r, error);
  r->loss = g_steal_pointer (&rec.loss);
  r->grad_norm = g_steal_pointer (&rec.grad_norm);
  record_clear (&rec);
  job_close (&j);
  return ok ? g_steal_pointer (&r) : NULL;
}
