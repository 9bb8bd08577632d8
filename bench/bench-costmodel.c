/* bench-costmodel.c - how long the cost model takes to evaluate one plan.
 *
 * A plan evaluation is what the planner's closed-form search does per candidate: check the
 * config, the memory of every pipeline stage, and every stage's times (layers, TP/DP/PP
 * communication, optimizer). The benchmark sweeps a planner-like space for a model on a
 * cluster (default GPT-3 175B on 128 DGX A100 nodes) and prints the median, 10th and 90th
 * percentile microseconds per evaluation. Not part of `make check`.
 *
 * Usage: bench/bench-costmodel [MODEL [CLUSTER [REPEATS]]]   (MPPLAN_DATADIR for the zoo) */
#include "config.h"
#include "bench/bench-util.h"
#include "common/stats.h"
#include "costmodel/costmodel.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>



/* Every config of a planner-like space that fits the cluster and passes the checks. */
static GArray *
space (const MpModel *m, const MpCluster *c)
{
  GArray *cfgs = g_array_new (FALSE, FALSE, sizeof (MpParallelConfig));
  guint world = c->world_size;
  for (guint tp = 1; tp <= 8; tp *= 2)
    for (guint pp = 1; pp <= 64; pp *= 2)
      for (guint mbs = 1; mbs <= 4; mbs *= 2)
        for (guint rc = 0; rc < 3; rc++)
          for (guint zero = 0; zero < 4; zero++)
            for (guint sched = 0; sched < 2; sched++)
              {
                if (world % (tp * pp) != 0)
                  continue;
                MpParallelConfig cfg;
                mp_parallel_config_init (&cfg);
                cfg.tp = tp;
                cfg.pp = pp;
                cfg.dp = world / (tp * pp);
                cfg.micro_batch_size = mbs;
                cfg.recompute = (MpRecompute) rc;
                cfg.zero = zero;
                cfg.sequence_parallel = tp > 1;
                if (m->global_batch % ((guint64) cfg.dp * mbs) != 0)
                  continue;
                cfg.num_micro_batches = (guint) (m->global_batch / ((guint64) cfg.dp * mbs));
                if (sched == 1)
                  {
                    if (pp == 1)
                      continue;
                    cfg.schedule = MP_SCHEDULE_INTERLEAVED;
                    cfg.vpp = 2;
                  }
                if (mp_parallel_config_check (&cfg, m, c, NULL))
                  g_array_append_val (cfgs, cfg);
              }
  return cfgs;
}

int
main (int argc, char **argv)
{
  const char *model_name = argc > 1 ? argv[1] : "gpt3-175b";
  const char *cluster_name = argc > 2 ? argv[2] : "dgx-a100-80g:128";
  int repeats = argc > 3 ? atoi (argv[3]) : 5;
  if (g_getenv ("MPPLAN_DATADIR") == NULL)
    g_setenv ("MPPLAN_DATADIR", MPPLAN_SRCDIR "/examples", TRUE);
  GError *error = NULL;
  g_autoptr(MpModel) m = mp_model_load (model_name, &error);
  if (m == NULL)
    {
      fprintf (stderr, "bench-costmodel: %s\n", error->message);
      return 2;
    }
  g_autoptr(MpCluster) c = mp_cluster_load (cluster_name, &error);
  if (c == NULL)
    {
      fprintf (stderr, "bench-costmodel: %s\n", error->message);
      return 2;
    }
  double t0 = bench_now_s ();
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
  double setup = bench_now_s () - t0;
  g_autoptr(GArray) cfgs = space (m, c);
  guint n = cfgs->len;
  if (n == 0)
    {
      fprintf (stderr, "bench-costmodel: no valid config\n");
      return 1;
    }
  g_autofree double *per = g_new (double, (gsize) n * repeats);
  MpStageMemory *mem = g_new (MpStageMemory, 128);
  MpStageTime *st = g_new (MpStageTime, 128);
  double sink = 0;
  guint fits = 0;
  for (int r = 0; r < repeats; r++)
    for (guint i = 0; i < n; i++)
      {
        const MpParallelConfig *cfg = &g_array_index (cfgs, MpParallelConfig, i);
        double a = bench_now_s ();
        gboolean ok = mp_parallel_config_check (cfg, m, c, NULL);
        guint worst = mp_cost_memory (ctx, cfg, mem);
        mp_cost_stage_times (ctx, cfg, st);
        double b = bench_now_s ();
        per[(gsize) r * n + i] = (b - a) * 1e6;
        sink += ok + st[cfg->pp - 1].bwd.total_s + st[0].dp_reduce_s;
        if (r == 0 && mem[worst].total_bytes <= mem[worst].capacity_bytes)
          fits++;
      }
  mp_stat_sort (per, (guint) (n * repeats));
  gsize total = (gsize) n * repeats;
  printf ("model %s, cluster %s (%u devices)\n", m->name, c->name, c->world_size);
  printf ("context: %.1f us once; %u configs x %d repeats, %u fit in memory\n", setup * 1e6, n,
          repeats, fits);
  printf ("per plan evaluation (check + memory of every stage + stage times): median %.2f us,"
          " p10 %.2f us, p90 %.2f us, max %.2f us\n",
          per[total / 2], per[total / 10], per[total * 9 / 10], per[total - 1]);
  g_free (mem);
  g_free (st);
  return sink < 0;    /* keeps the work from being optimised away */
}
