/* bench-sim.c - how fast the discrete-event simulator times a step: the target is a
 * 1T-parameter-class plan with pp = 64 and several hundred micro-batches in under 50 ms.
 * The plan is Narayanan et al. 2021's 1T GPT (bench/gpt-1t.yaml) on 384 DGX A100 nodes:
 * dp 6, tp 8, pp 64, 512 micro-batches of one sequence per replica, 1F1B (and interleaved
 * with 2 chunks per stage). Prints the median of five simulations, wall clock and this
 * thread's CPU time (programs built once, timed apart), the instructions and events, and
 * the simulated against the closed-form step. Build and run from the source tree:
 *   make bench/bench-sim && MPPLAN_DATADIR=examples bench/bench-sim
 * Not part of `make check`: machines are shared and noisy; compare medians. */
#include "config.h"
#include "common/stats.h"
#include "planner/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RUNS 5

static double
now_ms (void)
{
  return g_get_monotonic_time () / 1e3;
}

/* This thread's CPU time: on a shared, loaded machine the wall clock also counts the
 * time other processes held the CPU. */
static double
cpu_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static gboolean
bench (const MpCostContext *ctx, MpSchedule schedule, guint vpp)
{
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.dp = 6;
  cfg.tp = 8;
  cfg.pp = 64;
  cfg.vpp = vpp;
  cfg.sequence_parallel = TRUE;
  cfg.zero = 1;
  cfg.micro_batch_size = 1;
  cfg.num_micro_batches = 512;
  cfg.schedule = schedule;
  g_autoptr(GError) error = NULL;
  MpPlan plan;
  if (!mp_plan_evaluate (ctx, &cfg, 3072, &plan, &error))
    {
      fprintf (stderr, "bench-sim: %s\n", error->message);
      return FALSE;
    }
  double t0 = now_ms ();
  guint n = 0;
  MpProgram **programs = mp_program_build_stages (ctx, &plan, &n);
  double build_ms = now_ms () - t0;
  double ms[RUNS], cpu[RUNS], step = 0;
  guint64 insns = 0, events = 0;
  for (int r = 0; r < RUNS; r++)
    {
      t0 = now_ms ();
      double c0 = cpu_ms ();
      g_autoptr(MpSimResult) sim = mp_simulate (ctx, &plan.cfg, programs, n, NULL, &error);
      cpu[r] = cpu_ms () - c0;
      ms[r] = now_ms () - t0;
      if (sim == NULL)
        {
          fprintf (stderr, "bench-sim: %s\n", error->message);
          mp_program_stages_free (programs);
          g_free (plan.chunk_layers);
          return FALSE;
        }
      step = sim->step_s;
      insns = sim->n_insns;
      events = sim->n_events;
    }
  mp_stat_sort (ms, RUNS);
  mp_stat_sort (cpu, RUNS);
  printf ("gpt-1t dp 6 tp 8 pp 64 vpp %u %-16s m 512: %7" G_GUINT64_FORMAT " instructions, %7"
          G_GUINT64_FORMAT " events  simulate median %.1f ms (min %.1f, max %.1f; CPU %.1f ms)"
          "  build %.1f ms  step %.3f s (closed form %.3f s, %+.2f%%)\n", vpp,
          mp_plan_schedule_name (schedule), insns, events, ms[RUNS / 2], ms[0], ms[RUNS - 1],
          cpu[RUNS / 2], build_ms, step, plan.step_s, 100 * (step / plan.step_s - 1));
  mp_program_stages_free (programs);
  g_free (plan.chunk_layers);
  return TRUE;
}

int
main (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MpModel) model = mp_model_load (MPPLAN_SRCDIR "/bench/gpt-1t.yaml", &error);
  g_autoptr(MpCluster) cluster = model ? mp_cluster_load ("dgx-a100-80g:384", &error) : NULL;
  if (cluster == NULL)
    {
      fprintf (stderr, "bench-sim: %s\n", error->message);
      return 1;
    }
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (model, cluster, NULL);
  gboolean ok = bench (ctx, MP_SCHEDULE_1F1B, 1);
  ok &= bench (ctx, MP_SCHEDULE_INTERLEAVED, 2);
  return ok ? 0 : 1;
}
