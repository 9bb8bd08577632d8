/* bench-planner.c - how fast `mpplan plan` searches the whole space: the space, the
 * configurations fully costed, pruned by the bounds and feasible, and the median wall and
 * CPU time of five searches (CPU time: what one core spends, whatever else the machine
 * runs), for the targets (GPT-3 175B on 1024 A100s: < 1 s; Llama-3 405B on 16384
 * H100s: < 2 s) and any MODEL CLUSTER pairs given as arguments, in the whole space (the
 * default), with its best plans' table once; with --limited first, in the smaller space of
 * earlier releases (MpSearchOptions.limited_space), for comparison (five searches each
 * either way; MPPLAN_BENCH_RUNS=N for N). Build and run:
 *   make bench/bench-planner && MPPLAN_DATADIR=examples bench/bench-planner [--limited | --moe]
 * With MPPLAN_BENCH_SHARDS=N (N >= 2) it also runs the search as N shards one after the
 * other (what N ranks of `mpirun -np N mpplan plan` each run) and merges them: the median
 * CPU time of the slowest shard and of the merge, and whole / (slowest + merge), the
 * speed-up N ranks can give the search once MPI has started; the merged best must be the
 * whole search's.
 * With --moe, the MoE zoo models on 16 DGX H100 (dgx-h100:128), the median of three
 * searches each against the target (< 2 s of CPU on one core).
 * Not part of `make check`: machines are shared and noisy; compare medians. */
#include "config.h"
#include "bench/bench-util.h"
#include "common/stats.h"
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

static gboolean limited;

/* One search, its CPU time into *CPU; NULL (said on stderr) when it fails. */
static MpSearchResult *
timed_search (const MpCostContext *ctx, const MpSearchOptions *opts, double *cpu)
{
  g_autoptr(GError) error = NULL;
  double cpu0 = cpu_seconds ();
  MpSearchResult *res = mp_planner_search (ctx, opts, &error);
  *cpu = cpu_seconds () - cpu0;
  if (res == NULL)
    fprintf (stderr, "bench-planner: %s\n", error->message);
  return res;
}

/* The search as N_SHARDS shards, each RUNS times, and their merge: prints the medians'
 * CPU times and the ratio to WHOLE_CPU (the unsharded search's median). */
static gboolean
bench_shards (const MpCostContext *ctx, guint n_shards, int runs, double whole_cpu,
              double whole_best)
{
  g_autoptr(GError) error = NULL;
  double slowest = 0, sum = 0, merge[16];
  g_autoptr(GString) each = g_string_new (NULL);
  g_autoptr(GPtrArray) parts = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  for (guint sh = 0; sh < n_shards; sh++)
    {
      MpSearchOptions opts = { .top_k = 5, .limited_space = limited, .shard = sh, .n_shards = n_shards };
      double cpu[16];
      for (int r = 0; r < runs; r++)
        {
          g_autoptr(MpSearchResult) res = timed_search (ctx, &opts, &cpu[r]);
          if (res == NULL)
            return FALSE;
          if (r == 0)
            g_ptr_array_add (parts, mp_search_result_pack (res));
        }
      double med = mp_stat_median (cpu, (guint) runs, NULL);
      g_string_append_printf (each, "%s%.3f", sh ? " " : "", med);
      slowest = MAX (slowest, med);
      sum += med;
    }
  MpSearchOptions opts = { .top_k = 5 };
  double best = 0;
  for (int r = 0; r < runs; r++)
    {
      double cpu0 = cpu_seconds ();
      g_autoptr(MpSearchResult) res = mp_search_result_merge (ctx, &opts, parts, 0, &error);
      merge[r] = cpu_seconds () - cpu0;
      if (res == NULL)
        {
          fprintf (stderr, "bench-planner: %s\n", error->message);
          return FALSE;
        }
      best = res->plans->len ? ((MpPlan *) g_ptr_array_index (res->plans, 0))->step_s : 0;
    }
  double m = mp_stat_median (merge, (guint) runs, NULL);
  printf ("  %u shards: cpu per shard %s s (sum %.3f), merge %.4f s; whole / (slowest + "
          "merge) = %.2fx; merged best step %.3f s (%s)\n", n_shards, each->str, sum, m,
          whole_cpu / (slowest + m), best, best == whole_best ? "same" : "DIFFERS");
  return best == whole_best;
}

/* Searches MODEL_NAME on CLUSTER_NAME RUNS times and prints the figures; the median CPU
 * time into *MEDIAN_CPU (may be NULL). */
static gboolean
bench (const char *model_name, const char *cluster_name, int runs, double *median_cpu)
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
  MpSearchOptions opts = { .top_k = 5, .limited_space = limited };
  double seconds[16], cpu[16];
  guint64 space = 0, evaluated = 0, pruned = 0, feasible = 0;
  double best = 0;
  for (int r = 0; r < runs; r++)
    {
      g_autoptr(MpSearchResult) res = timed_search (ctx, &opts, &cpu[r]);
      if (res == NULL)
        return FALSE;
      seconds[r] = res->stats.seconds;
      space = res->stats.space;
      evaluated = res->stats.evaluated;
      pruned = res->stats.pruned;
      feasible = res->stats.feasible;
      best = res->plans->len ? ((MpPlan *) g_ptr_array_index (res->plans, 0))->step_s : 0;
      if (!limited && r == runs - 1)
        {
          /* the plans the whole space ranks first */
          g_autofree char *table = mp_plan_table_text (res->plans);
          fputs (table, stdout);
        }
    }
  mp_stat_sort (seconds, (guint) runs);
  mp_stat_sort (cpu, (guint) runs);
  printf ("%-12s %-18s %6u GPUs  space %8" G_GUINT64_FORMAT "  evaluated %8" G_GUINT64_FORMAT
          "  pruned %8" G_GUINT64_FORMAT "  feasible %8" G_GUINT64_FORMAT
          "  median %.3f s (min %.3f, max %.3f), cpu %.3f s  best step %.3f s\n",
          model_name, cluster_name, cluster->world_size, space, evaluated, pruned, feasible,
          seconds[runs / 2], seconds[0], seconds[runs - 1], cpu[runs / 2], best);
  if (median_cpu != NULL)
    *median_cpu = cpu[runs / 2];
  const char *shards = g_getenv ("MPPLAN_BENCH_SHARDS");
  guint n_shards = shards ? (guint) g_ascii_strtoull (shards, NULL, 10) : 0;
  return n_shards < 2 || bench_shards (ctx, MIN (n_shards, 64u), runs, cpu[runs / 2], best);
}

/* The MoE zoo (issue 15: each < 2 s on one core): the median of three searches each. */
static gboolean
bench_moe (void)
{
  static const char *const models[] = { "deepseek-v3", "gpt-oss-120b", "mixtral-8x7b",
                                        "mixtral-8x22b", "qwen3-235b-a22b", "qwen3-30b-a3b" };
  const double target_s = 2;
  gboolean ok = TRUE;
  guint met = 0;
  for (gsize i = 0; i < G_N_ELEMENTS (models); i++)
    {
      double cpu = 0;
      ok &= bench (models[i], "dgx-h100:128", 3, &cpu);
      printf ("  %s: median cpu %.3f s, target < %.0f s: %s\n", models[i], cpu, target_s,
              cpu < target_s ? "met" : "MISSED");
      met += cpu < target_s;
    }
  printf ("MoE zoo: %u of %zu models under %.0f s\n", met, G_N_ELEMENTS (models), target_s);
  return ok;
}

int
main (int argc, char **argv)
{
  gboolean ok = TRUE;
  int first = 1;
  if (argc > 1 && strcmp (argv[1], "--moe") == 0)
    return bench_moe () ? 0 : 1;
  if (argc > 1 && strcmp (argv[1], "--limited") == 0)
    limited = TRUE, first = 2;
  const char *n_runs = g_getenv ("MPPLAN_BENCH_RUNS");
  const int runs = n_runs ? CLAMP (atoi (n_runs), 1, 15) : 5;
  if (argc > first)
    for (int i = first; i + 1 < argc; i += 2)
      ok &= bench (argv[i], argv[i + 1], runs, NULL);
  else
    {
      ok &= bench ("gpt3-175b", "dgx-a100-80g:128", runs, NULL);
      ok &= bench ("llama3-405b", "dgx-h100:2048", runs, NULL);
    }
  return ok ? 0 : 1;
}
