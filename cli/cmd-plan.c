/* cmd-plan.c - `mpplan plan`: search every way to split the model's training over the
 * cluster and recommend the best, with reasons. The main job of mpplan. */
#define G_LOG_DOMAIN "mpplan-cli"
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/output.h"
#include "exec/exec.h"
#include "planner/planner.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The bundled default: GPT-3 175B on 128 DGX A100 nodes (Narayanan et al. 2021's setup). */
#define DEFAULT_MODEL "gpt3-175b"
#define DEFAULT_CLUSTER "dgx-a100-80g:128"

typedef struct {
  gint64 start_us;
  gboolean shown;
} Progress;

/* A one-line progress bar on a terminal, once a search has run for a second. */
static void
show_progress (guint64 done, guint64 total, gpointer data)
{
  Progress *p = data;
  double elapsed = (g_get_monotonic_time () - p->start_us) / 1e6;
  if (elapsed < 1.0 && !(p->shown && done == total))
    return;
  if (!p->shown && done == total)
    return;
  p->shown = TRUE;
  double frac = total ? (double) done / total : 1;
  fprintf (stderr, "\rsearching: %" G_GUINT64_FORMAT " / %" G_GUINT64_FORMAT
           " plans (%3.0f%%), %.1f s", done, total, 100 * frac, elapsed);
  if (done == total)
    fprintf (stderr, "\n");
}

/* The --json object: inputs, search statistics and the ranked plans. */
static JsonNode *
result_json (const MpSearchResult *res, const MpModel *model, const MpCluster *cluster,
             guint global_batch)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  mp_plan_json_header (b, model, cluster, global_batch);
  json_builder_set_member_name (b, "search");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "space");
  json_builder_add_int_value (b, (gint64) res->stats.space);
  json_builder_set_member_name (b, "evaluated");
  json_builder_add_int_value (b, (gint64) res->stats.evaluated);
  json_builder_set_member_name (b, "pruned");
  json_builder_add_int_value (b, (gint64) res->stats.pruned);
  json_builder_set_member_name (b, "feasible");
  json_builder_add_int_value (b, (gint64) res->stats.feasible);
  json_builder_set_member_name (b, "seconds");
  json_builder_add_double_value (b, res->stats.seconds);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "plans");
  json_builder_begin_array (b);
  for (guint i = 0; i < res->plans->len; i++)
    json_builder_add_value (b, mp_plan_to_json (g_ptr_array_index (res->plans, i)));
  json_builder_end_array (b);
  if (res->stats.free_best)
    {
      json_builder_set_member_name (b, "free_best");
      json_builder_add_value (b, mp_plan_to_json (res->stats.free_best));
    }
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* Phase times under G_MESSAGES_DEBUG=mpplan-cli: where a run's time goes (start-up, load,
 * search, merge, refine, output), per MPI rank. */
typedef struct {
  gint64 last_us;
  double last_cpu;
  int rank;
} Phases;

/* This process's CPU time in seconds (the wall time counts other processes' too). */
static double
cpu_seconds (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
phase_done (Phases *ph, const char *what)
{
  gint64 now = g_get_monotonic_time ();
  double cpu = cpu_seconds ();
  g_debug ("rank %d: %s %.3f s (cpu %.3f s)", ph->rank, what, (now - ph->last_us) / 1e6,
           cpu - ph->last_cpu);
  ph->last_us = now;
  ph->last_cpu = cpu;
}

typedef struct {
  char *model, *cluster, *output, *fix, *emit, *profile, *headroom, *stack;
  int batch, top, refine;
  gboolean json, explain, quiet;
} PlanArgs;

/* One rank's run of `plan`: its inputs and options, then its share of the search and, on
 * rank 0, the merged result that it prints. */
typedef struct {
  const PlanArgs *a;
  char **argv;
  MpCliInputs in;
  MpPlanPins *pins;
  Progress progress;
  MpSearchOptions opts;
  MpSearchResult *res;
  int status;            /* nonzero: the exit status to stop with */
  GError *error;         /* why, until the ranks agree which of them prints it */
  Phases ph;
  gboolean sharing;      /* the search thread shares cutoffs with the other ranks */
  MpSearchShare share;
  gboolean searched;     /* the search thread is done (under share.lock) */
} PlanRun;

static void
plan_run_clear (PlanRun *r)
{
  g_clear_pointer (&r->res, mp_search_result_free);
  g_clear_pointer (&r->pins, mp_plan_pins_free);
  g_clear_error (&r->error);
  mp_cli_inputs_clear (&r->in);
}

/* Notes a failure of this rank's part (the first one's reason is kept). */
static void
plan_run_fail (PlanRun *r, GError *error)
{
  if (r->status == 0)
    r->status = mp_error_exit_code (error);
  if (r->error == NULL)
    r->error = error;
  else
    g_error_free (error);
}

/* Loads the inputs and sets the options; FALSE (plan_run_fail) on bad input. */
static gboolean
prepare (PlanRun *r)
{
  GError *error = NULL;
  const PlanArgs *a = r->a;
  if (!mp_cli_inputs_try_load (&r->in, a->model, a->cluster, a->profile, &error))
    {
      plan_run_fail (r, error);
      return FALSE;
    }
  phase_done (&r->ph, "model, cluster and cost context");
  if (!mp_cli_memory_headroom (r->in.ctx, a->headroom, &error)
      || (a->fix && (r->pins = mp_plan_pins_parse (a->fix, &error)) == NULL))
    {
      plan_run_fail (r, error);
      return FALSE;
    }
  r->progress = (Progress) { g_get_monotonic_time (), FALSE };
  r->opts = (MpSearchOptions) {
    .global_batch = a->batch > 0 ? (guint) a->batch : 0,
    .top_k = (guint) MAX (a->top, a->refine),
    .pins = r->pins,
    .progress_data = &r->progress,
  };
  return TRUE;
}

/* This rank's share of the search (all of it in a world of one) into R->res. */
static void
search_shard (PlanRun *r, int rank, int size)
{
  GError *error = NULL;
  g_clear_pointer (&r->res, mp_search_result_free);
  r->opts.shard = size > 1 ? (guint) rank : 0;
  r->opts.n_shards = size > 1 ? (guint) size : 0;
  r->opts.share = r->sharing ? &r->share : NULL;
  r->opts.progress = !r->a->quiet && rank == 0 && isatty (STDERR_FILENO) ? show_progress
                                                                          : NULL;
  r->res = mp_planner_search (r->in.ctx, &r->opts, &error);
  if (r->res == NULL)
    plan_run_fail (r, error);
  else
    phase_done (&r->ph, size > 1 ? "search (its shard)" : "search");
}

/* The launcher's rank and size (mp_world_early_rank) travel with R into the thread. */
typedef struct {
  PlanRun *run;
  int rank, size;
} ShardJob;

/* Thread body: the inputs and this rank's shard, while the main thread starts MPI. */
static gpointer
prepare_and_search (gpointer data)
{
  ShardJob *job = data;
  PlanRun *r = job->run;
  if (prepare (r))
    search_shard (r, job->rank, job->size);
  g_mutex_lock (&r->share.lock);
  r->searched = TRUE;
  g_mutex_unlock (&r->share.lock);
  return NULL;
}

/* mp_world_share_least's: this rank's cutoffs, and whether its thread is done (or failed:
 * R->status is the thread's until it ends) ... */
static MpShareState
read_cutoffs (double *mine, gpointer data)
{
  PlanRun *r = data;
  g_mutex_lock (&r->share.lock);
  memcpy (mine, r->share.mine, sizeof r->share.mine);
  MpShareState state = !r->searched ? MP_SHARE_WORKING
                       : r->status != 0 ? MP_SHARE_FAILED : MP_SHARE_DONE;
  g_mutex_unlock (&r->share.lock);
  return state;
}

/* ... and the other ranks' for the search thread, which stops once one has failed. */
static void
take_cutoffs (const double *least, gboolean stop, gpointer data)
{
  PlanRun *r = data;
  g_mutex_lock (&r->share.lock);
  memcpy (r->share.others, least, sizeof r->share.others);
  r->share.stop |= stop;
  g_mutex_unlock (&r->share.lock);
}

/* The ranks agree on how this part ended: on a failure anywhere every rank stops with
 * the worst status, and the lowest failed rank alone prints why (bad input fails alike
 * on every rank). FALSE (R->status set) when some rank failed. */
static gboolean
agree (PlanRun *r, MpWorld *world)
{
  GError *error = NULL;
  int worst = 0, first = -1;
  if (!mp_world_agree (world, r->status, &worst, &first, &error))
    {
      g_clear_error (&r->error);
      r->status = mp_cli_fail (error);
      return FALSE;
    }
  if (r->error != NULL && first == mp_world_rank (world))
    mp_cli_fail (g_steal_pointer (&r->error));
  g_clear_error (&r->error);
  r->status = worst;
  return worst == 0;
}

/* Every rank's share at rank 0, merged into the result one process would have found
 * (other ranks keep their own). FALSE (R->status set) on failure. */
static gboolean
gather (PlanRun *r, MpWorld *world, gint64 start_us)
{
  GError *error = NULL;
  g_autoptr(GBytes) packed = mp_search_result_pack (r->res);
  g_autoptr(GPtrArray) parts = mp_world_gather (world, packed, &error);
  if (parts == NULL)
    {
      r->status = mp_cli_fail (error);
      return FALSE;
    }
  phase_done (&r->ph, "gather (waiting for the other ranks)");
  if (mp_world_rank (world) != 0)
    return TRUE;
  MpSearchResult *merged = mp_search_result_merge (
      r->in.ctx, &r->opts, parts, (g_get_monotonic_time () - start_us) / 1e6, &error);
  if (merged == NULL)
    {
      r->status = mp_cli_fail (error);
      return FALSE;
    }
  mp_search_result_free (r->res);
  r->res = merged;
  phase_done (&r->ph, "merge");
  return TRUE;
}

/* --refine: re-ranks the best plans by simulating them (a line when the simulation and
 * the closed form disagree, into *TEXT), then keeps the --top best. */
static gboolean
refine_plans (const MpCostContext *ctx, MpSearchResult *res, const PlanArgs *a, char **text,
              GError **error)
{
  if (a->refine > 0 && !mp_planner_refine (ctx, res, (guint) a->refine, error))
    return FALSE;
  *text = mp_plan_refine_text (res->plans, (guint) a->top, (guint) a->refine, 0.03);
  if (res->plans->len > (guint) a->top)
    g_ptr_array_set_size (res->plans, a->top);
  return TRUE;
}

/* Rank 0's part after the search: refine and print; returns the exit status. */
static int
report (PlanRun *r)
{
  GError *error = NULL;
  const PlanArgs *a = r->a;
  MpModel *model = r->in.model;
  MpCluster *cluster = r->in.cluster;
  MpCostContext *ctx = r->in.ctx;
  MpSearchResult *res = r->res;
  guint global_batch = a->batch > 0 ? (guint) a->batch : (guint) model->global_batch;

  if (res->plans->len == 0)
    {
      g_autofree char *why = r->pins && res->stats.feasible > 0
                                 ? mp_plan_pinned_infeasible_text (res, ctx, &r->opts, a->fix)
                                 : mp_plan_infeasible_text (res, ctx);
      fprintf (stderr, "mpplan: %s: %s\n", model->name, why);
      return 3;
    }
  g_autofree char *refined = NULL;
  if (!refine_plans (ctx, res, a, &refined, &error))
    return mp_cli_fail (error);
  phase_done (&r->ph, "refine");
  const MpPlan *best = g_ptr_array_index (res->plans, 0);
  if (a->output && a->emit == NULL)
    {
      g_autofree char *command = g_strjoinv (" ", r->argv);
      g_autofree char *yaml = mp_plan_to_yaml_for_path (best, model, cluster, a->output,
                                                        command);
      if (!mp_output_write (a->output, yaml, strlen (yaml), &error))
        return mp_cli_fail (error);
    }
  /* With --emit, -o names the folder of the launch files (cmd-emit.c). */
  int emitted = a->emit ? mp_cli_emit (a->emit, a->output, best, ctx, &r->opts) : 0;
  if (emitted != 0)
    return emitted;
  if (a->json)
    {
      g_autoptr(JsonNode) root = result_json (res, model, cluster, global_batch);
      return mp_json_write ("-", root, &error) ? 0 : mp_cli_fail (error);
    }
  /* With -o - the plan file is standard output, and the table goes to stderr. */
  gboolean plan_to_stdout = a->output && a->emit == NULL && strcmp (a->output, "-") == 0;
  FILE *text = plan_to_stdout ? stderr : stdout;
  g_autofree char *params = mp_units_format (model->params_total, MP_UNIT_COUNT);
  fprintf (text, "%s (%s parameters) on %s (%u devices), global batch %u\n\n", model->name,
           params, cluster->name, cluster->world_size, global_batch);
  g_autofree char *table = mp_plan_table_text (res->plans);
  g_autofree char *why = mp_plan_explain_text (res, ctx, a->explain);
  fprintf (text, "%s\n%s%s", table, why, refined);
  /* Timing goes to stderr so that the same inputs give byte-identical output. */
  fflush (stdout);
  if (!a->quiet)
    fprintf (stderr, "Searched %" G_GUINT64_FORMAT " plans (%" G_GUINT64_FORMAT
             " known to fit; %" G_GUINT64_FORMAT " costed, %" G_GUINT64_FORMAT
             " pruned by bounds) in %.2f s.\n", res->stats.space, res->stats.feasible,
             res->stats.evaluated, res->stats.pruned, res->stats.seconds);
  if (a->output && a->emit == NULL && !plan_to_stdout)
    printf ("Plan written to %s\n", a->output);
  phase_done (&r->ph, "output");
  return 0;
}

static gpointer
report_thread (gpointer data)
{
  PlanRun *r = data;
  r->status = report (r);
  return NULL;
}

/* Under mpirun every rank searches its share and rank 0 merges and prints. MPI's start
 * and stop are mostly waits on the launcher (MPI_Init 0.03 s, MPI_Finalize 0.05 s of
 * wall on this machine for a 0.2 s search), so both overlap work in a thread: the
 * shard, with the rank and size the launcher exported, runs while MPI_Init does (the
 * shard is searched again, after it, if MPI disagrees), and rank 0 refines and prints
 * while MPI_Finalize runs. */
static int
join_and_plan (const PlanArgs *a, int *argc, char ***argv, char **all_argv)
{
  GError *error = NULL;
  gint64 start_us = g_get_monotonic_time ();
  PlanRun r = { .a = a, .argv = all_argv };
  r.ph = (Phases) { start_us, cpu_seconds (), 0 };
  int status = 0;
  Phases mpi = r.ph;
  ShardJob job = { &r, 0, 1 };
  GThread *early = NULL;
  g_mutex_init (&r.share.lock);
  for (guint i = 0; i < MP_SEARCH_SHARE_N; i++)
    r.share.mine[i] = r.share.others[i] = G_MAXDOUBLE;
  if (mp_world_early_rank (&job.rank, &job.size) && job.size > 1)
    {
      r.ph.rank = job.rank;
      r.sharing = TRUE;
      early = g_thread_new ("mpplan-search", prepare_and_search, &job);
    }
  MpWorld *world = mp_world_join_light (argc, argv, &error);
  mpi.rank = job.rank;
  phase_done (&mpi, early ? "MPI start-up (mp_world_join, beside the search)"
                          : "MPI start-up (mp_world_join)");
  /* Once MPI is up the shards pass their best-so-far to each other, so that each prunes
   * by the whole search's: every rank runs the thread (the launcher said so to all). */
  if (early != NULL && world != NULL && mp_world_size (world) > 1
      && !mp_world_share_least (world, MP_SEARCH_SHARE_N, read_cutoffs, take_cutoffs, &r,
                                &error))
    status = mp_cli_fail (error);
  if (early != NULL)
    g_thread_join (early);
  r.sharing = FALSE;
  if (world == NULL)
    {
      status = mp_cli_fail (error);
      goto out;
    }
  int rank = mp_world_rank (world), size = mp_world_size (world);
  r.ph.rank = rank;
  if ((early == NULL ? prepare (&r) : r.status == 0)
      && (r.res == NULL || rank != job.rank || size != job.size))
    search_shard (&r, rank, size);
  /* a rank that failed or was stopped has its status agreed before any waits on it */
  r.status = r.status ? r.status : status;
  if (!agree (&r, world) || (size > 1 && !gather (&r, world, start_us)) || rank != 0)
    goto out;
  if (size == 1)
    {
      r.status = report (&r);
      goto out;
    }
  GThread *printing = g_thread_new ("mpplan-report", report_thread, &r);
  g_clear_pointer (&world, mp_world_leave);
  g_thread_join (printing);
out:
  mp_world_leave (world);
  status = status ? status : r.status;
  plan_run_clear (&r);
  g_mutex_clear (&r.share.lock);
  return status;
}

int
mp_cmd_plan (int argc, char **argv, gboolean do_help)
{
  PlanArgs a = { .top = 5, .refine = 8, .batch = G_MININT };  /* G_MININT: not given */
  g_auto (GStrv) all_argv = g_strdupv (argv);
  const GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_STRING, &a.model,
      "Model: YAML file or zoo name (default " DEFAULT_MODEL ")", "MODEL" },
    { "cluster", 'c', 0, G_OPTION_ARG_STRING, &a.cluster,
      "Cluster: YAML file or zoo name[:NODES] (default " DEFAULT_CLUSTER ")", "CLUSTER" },
    { "batch", 'b', 0, G_OPTION_ARG_INT, &a.batch,
      "Global batch in sequences (default: the model's training.global_batch)", "N" },
    { "top", 'k', 0, G_OPTION_ARG_INT, &a.top, "Show the best K plans (default 5)", "K" },
    { "refine", 0, 0, G_OPTION_ARG_INT, &a.refine,
      "Re-rank the best K plans by simulating their step (default 8; 0: closed form only)",
      "K" },
    { "fix", 0, 0, G_OPTION_ARG_STRING, &a.fix,
      "Pin dimensions by their JSON keys, e.g. tp=8,pp=8,recompute=full (fp8=true: plan "
      "Transformer Engine FP8 training; stack=torchtitan: the training stack; compile=true: "
      "torch.compile, element-wise ops fused)",
      "KEY=VALUE,..." },
    { "stack", 0, 0, G_OPTION_ARG_STRING, &a.stack,
      "The training stack the plans run under (megatron, nemo-automodel, torchtitan, "
      "llm-foundry, deepspeed, pytorch): the same as --fix stack=NAME", "NAME" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &a.json, "Print one JSON object (docs/json.md)", NULL },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &a.output,
      "Write the best plan to FILE (YAML; -: standard output, the table then on stderr); "
      "with --emit, the folder of the launch files",
      "FILE|DIR" },
    { "emit", 0, 0, G_OPTION_ARG_STRING, &a.emit,
      "Write launch files for FRAMEWORK (megatron, deepspeed, torchrun, torchtitan, horovod, "
      "tensorflow, mxnet; stack: the plan's stack's) into -o DIR (default: ./FRAMEWORK); a "
      "plan the framework cannot run is replaced by the best it can run, with the reason on "
      "stderr", "FRAMEWORK" },
    { "explain", 0, 0, G_OPTION_ARG_NONE, &a.explain,
      "Explain the choice: the best plan of every family and what holds each back", NULL },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &a.quiet, "No progress bar", NULL },
    { "profile", 0, 0, G_OPTION_ARG_FILENAME, &a.profile,
      "Calibration profile (from `mpplan calibrate`) to use in place of the built-in curves",
      "FILE" },
    { "memory-headroom", 0, 0, G_OPTION_ARG_STRING, &a.headroom, MP_CLI_HEADROOM_HELP,
      "F|SIZE" },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new (NULL);
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "Search data, tensor, pipeline and hybrid plans (with ZeRO, recompute, sequence "
           "parallelism, micro-batching, interleaved stages and expert parallelism for MoE) "
           "and recommend the fastest that fits in memory.\n"
           "The whole space is searched, exactly: every context-parallel size that divides the "
           "devices and splits each sequence in 2 cp pieces, every vpp that leaves each chunk "
           "a block (uneven splits too), every micro-batch up to a replica's share; lower "
           "bounds on step time and memory prune only what cannot rank or fit.");
  g_option_context_set_description (
      ctx, MP_CLI_PROFILE_HELP "\n\n"
           "Exit status: 0 success, 1 runtime failure, 2 bad usage or bad input, 3 no plan "
           "fits (the message says what would make one fit).");
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status >= 0)
    goto out;
  if (a.refine < 0)
    {
      status = mp_cli_usage (ctx, "--refine must be 0 or more");
      goto out;
    }
  if (a.top < 1 || (a.batch != G_MININT && (a.batch < 1 || a.batch > MP_CLI_MAX_BATCH)))
    {
      status = mp_cli_usage (ctx, a.top < 1 ? "--top must be at least 1"
                                            : "--batch must be from 1 to " G_STRINGIFY (
                                                  MP_CLI_MAX_BATCH) " sequences");
      goto out;
    }
  if (a.json && a.output && a.emit == NULL && strcmp (a.output, "-") == 0)
    {
      status = mp_cli_usage (ctx, "-o - and --json both write to standard output: give -o "
                                  "a file");
      goto out;
    }
  GError *emit_error = NULL;
  if (a.emit && !mp_cli_framework_check (a.emit, &emit_error))
    {
      status = mp_cli_usage (ctx, emit_error->message);
      g_error_free (emit_error);
      goto out;
    }
  MpStack stack;
  if (a.stack && !mp_stack_from_name (a.stack, &stack))
    {
      status = mp_cli_usage (ctx, "--stack: unknown stack (one of: megatron, "
                                  "nemo-automodel, torchtitan, llm-foundry, deepspeed, "
                                  "pytorch)");
      goto out;
    }
  if (a.stack && a.fix && strstr (a.fix, "stack="))
    {
      status = mp_cli_usage (ctx, "give the stack once: --stack or --fix stack=");
      goto out;
    }
  if (a.stack)
    {
      /* --stack NAME is --fix stack=NAME. */
      char *fix = g_strdup_printf ("%s%sstack=%s", a.fix ? a.fix : "", a.fix ? "," : "",
                                   a.stack);
      g_free (a.fix);
      a.fix = fix;
    }
  if (a.model == NULL)
    a.model = g_strdup (DEFAULT_MODEL);
  if (a.cluster == NULL)
    a.cluster = g_strdup (DEFAULT_CLUSTER);
  status = join_and_plan (&a, &argc, &argv, all_argv);
out:
  g_free (a.model);
  g_free (a.cluster);
  g_free (a.output);
  g_free (a.fix);
  g_free (a.profile);
  g_free (a.headroom);
  g_free (a.emit);
  g_free (a.stack);
  return status;
}
