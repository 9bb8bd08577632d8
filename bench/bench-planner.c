/* bench-planner.c - how fast `mpplan plan` searches the whole space: the space, the
 * configurations fully costed, pruned by the bounds and feasible, and the median wall and
 * CPU time of five searches (CPU time: what one core spends, whatever else the machine
 * runs), for the targets (GPT-3 175B on 1024 A100s: < 1 s; Llama-3 405B on 16384
 * H100s: < 2 s) and any MODEL CLUSTER pairs given as arguments; with --whole first, in
 * the whole space (MpSearchOptions.whole_space), one search each. Build and run:
 *   make bench/bench-planner && MPPLAN_DATADIR=examples bench/bench-planner [--whole]
 * Not part of `make check`: machines are shared and noisy; compare medians. */
#include "config.h"
#include "bench/bench-util.h"
#include "planner/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* This process's CPU time in seconds. */
static double
cpu_seconds (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static gboolean whole;

static gboolean
bench (const char *model_name, const char *cluster_name, int runs)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MpModel) model = mp_model_load (model_name, &error);
  g_autoptr(MpCluster) cluster = model ? mp_cluster_load (cluster_name, &error) : NULL;
  if (cluster == NULL)
    {
      fprintf (stderr, "bench-planner: %s\n", error->message);
      return FALSE;
    }
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (model, cluster, NULL);
  MpSearchOptions opts = { .top_k = 5, .whole_space = whole };
  double seconds[16], cpu[16];
  guint64 space = 0, evaluated = 0, pruned = 0, feasible = 0;
  double best = 0;
  for (int r = 0; r < runs; r++)
    {
      double cpu0 = cpu_seconds ();
      g_autoptr(MpSearchResult) res = mp_planner_search (ctx, &opts, &error);
      cpu[r] = cpu_seconds () - cpu0;
      if (res == NULL)
        {
          fprintf (stderr, "bench-planner: %s\n", error->message);
          return FALSE;
        }
      seconds[r] = res->stats.seconds;
      space = res->stats.space;
      evaluated = res->stats.evaluated;
      pruned = res->stats.pruned;
      feasible = res->stats.feasible;
      best = res->plans->len ? ((MpPlan *) g_ptr_array_index (res->plans, 0))->step_s : 0;
      if (whole && r == runs - 1)
        {
          /* the plans the whole space ranks first */
          g_autofree char *table = mp_plan_table_text (res->plans);
          fputs (table, stdout);
        }
    }
  qsort (seconds, (size_t) runs, sizeof *seconds, bench_cmp_double);
  qsort (cpu, (size_t) runs, sizeof *cpu, bench_cmp_double);
  printf ("%-12s %-18s %6u GPUs  space %8" G_GUINT64_FORMAT "  evaluated %8" G_GUINT64_FORMAT
          "  pruned %8" G_GUINT64_FORMAT "  feasible %8" G_GUINT64_FORMAT
          "  median %.3f s (min %.3f, max %.3f), cpu %.3f s  best step %.3f s\n",
          model_name, cluster_name, cluster->world_size, space, evaluated, pruned, feasible,
          seconds[runs / 2], seconds[0], seconds[runs - 1], cpu[runs / 2], best);
  return TRUE;
}

int
main (int argc, char **argv)
{
  gboolean ok = TRUE;
  int first = 1;
  if (argc > 1 && strcmp (argv[1], "--whole") == 0)
    whole = TRUE, first = 2;
  const int runs = whole ? 1 : 5;
  if (argc > first)
    for (int i = first; i + 1 < argc; i += 2)
      ok &= bench (argv[i], argv[i + 1], runs);
  else
    {
      ok &= bench ("gpt3-175b", "dgx-a100-80g:128", runs);
      ok &= bench ("llama3-405b", "dgx-h100:2048", runs);
    }
  return ok ? 0 : 1;
}
