/* report.c - a prediction joined with its measurement (report.h): the six parts of a step
 * and the step, each predicted, measured (median over the measured steps, with the
 * smallest and largest step) and the error between them; memory predicted against each
 * measured rank; over several runs, the median error and whether the ranking held;
 * several measurements (rounds) of one plan merged into one.
 *
 * Inputs are JSON only (simulate --json, a plan's JSON, measured.json): they share the
 * planner's keys (step_s, time_s {...}, memory_bytes {...}), so a report is a join.
 * Errors are predicted / measured - 1: +10% means the model predicted 10% too slow. */
#define G_LOG_DOMAIN "mpplan-report"
#include "config.h"
#include "common/output.h"
#include "report/report.h"
#include "common/error.h"
#include "common/units.h"

#include <math.h>
#include <string.h>

const char *
mp_report_phase_name (guint column)
{
  g_return_val_if_fail (column < MP_REPORT_N, "?");
  return column == MP_REPORT_STEP ? "step" : mp_phase_name ((MpPhase) column);
}

const char *
mp_report_mem_name (guint column)
{
  g_return_val_if_fail (column < MP_REPORT_MEM_N, "?");
  return column == MP_REPORT_MEM_PEAK ? "peak" : mp_mem_kind_name ((MpMemKind) (column - 1));
}

double
mp_report_error (double predicted, double measured)
{
  if (measured > 0)
    return predicted / measured - 1;
  return predicted > 0 ? NAN : 0;
}

double
mp_report_phase_error (const MpReportRun *run, guint p)
{
  g_return_val_if_fail (p < MP_REPORT_N, NAN);
  const double *pr = run->predicted, *me = run->measured;
  if (pr[p] < 0.01 * pr[MP_REPORT_STEP] && me[p] < 0.01 * me[MP_REPORT_STEP])
    return NAN;
  return mp_report_error (pr[p], me[p]);
}

void
mp_report_run_free (MpReportRun *run)
{
  if (run == NULL)
    return;
  g_free (run->label);
  g_free (run->ranks);
  if (run->plan)
    json_node_unref (run->plan);
  if (run->predicted_trace)
    json_node_unref (run->predicted_trace);
  if (run->measured_trace)
    json_node_unref (run->measured_trace);
  g_free (run);
}

/* ---- reading ---------------------------------------------------------------------- */

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

/* The median of V[0..N-1], which it sorts; NAN when N is 0. */
static double
median_sorting (double *v, guint n)
{
  qsort (v, n, sizeof (double), cmp_double);
  return n == 0 ? NAN : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static JsonObject *
object_member (JsonObject *o, const char *key)
{
  JsonNode *n = o ? json_object_get_member (o, key) : NULL;
  return n && JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
}

/* O's number KEY into *OUT; FALSE (and *OUT untouched) when absent or not a number. */
static gboolean
number (JsonObject *o, const char *key, double *out)
{
  JsonNode *n = o ? json_object_get_member (o, key) : NULL;
  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n))
    return FALSE;
  GType t = json_node_get_value_type (n);
  if (t != G_TYPE_DOUBLE && t != G_TYPE_INT64)
    return FALSE;
  *out = json_node_get_double (n);
  return TRUE;
}

/* The six parts of TIME (a time_s object) into V[0..5]; absent parts are 0. */
static void
phases (JsonObject *time, double *v)
{
  for (int p = 0; p < MP_REPORT_STEP; p++)
    {
      v[p] = 0;
      number (time, mp_report_phase_name (p), &v[p]);
    }
}

static gboolean
memory (JsonObject *mem, double *v)
{
  if (mem == NULL)
    return FALSE;
  for (int k = 0; k < MP_REPORT_MEM_N; k++)
    {
      v[k] = 0;
      number (mem, mp_report_mem_name (k), &v[k]);
    }
  return TRUE;
}

/* The object a predicted file holds its figures in: `plan --json` keeps its plans in an
 * array, best first; simulate --json and a plan's JSON are the object itself. */
static JsonObject *
predicted_object (JsonNode *root)
{
  JsonObject *o = JSON_NODE_HOLDS_OBJECT (root) ? json_node_get_object (root) : NULL;
  JsonNode *plans = o ? json_object_get_member (o, "plans") : NULL;
  if (plans && JSON_NODE_HOLDS_ARRAY (plans) && json_array_get_length (json_node_get_array (plans)))
    {
      JsonNode *first = json_array_get_element (json_node_get_array (plans), 0);
      return JSON_NODE_HOLDS_OBJECT (first) ? json_node_get_object (first) : NULL;
    }
  return o;
}

static gboolean
require (JsonObject *o, const char *what, const char *key, GError **error)
{
  if (o && json_object_has_member (o, key))
    return TRUE;
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s has no '%s' (is it %s?)", what, key,
               strcmp (what, "measured") == 0 ? "the -o file of `mpplan exec`"
                                              : "`mpplan simulate --json` or a plan's JSON");
  return FALSE;
}

static char *
plan_label (JsonObject *plan)
{
  if (plan == NULL || !json_object_has_member (plan, "dp"))
    return g_strdup ("plan");
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "dp%" G_GINT64_FORMAT " tp%" G_GINT64_FORMAT " pp%" G_GINT64_FORMAT,
                          json_object_get_int_member (plan, "dp"),
                          json_object_get_int_member (plan, "tp"),
                          json_object_get_int_member (plan, "pp"));
  const char *opt[] = { "vpp", "cp", "ep" };
  for (guint i = 0; i < G_N_ELEMENTS (opt); i++)
    if (json_object_get_int_member_with_default (plan, opt[i], 1) > 1)
      g_string_append_printf (s, " %s%" G_GINT64_FORMAT, opt[i],
                              json_object_get_int_member (plan, opt[i]));
  if (json_object_get_boolean_member_with_default (plan, "sequence_parallel", FALSE))
    g_string_append (s, " sp");
  if (json_object_get_int_member_with_default (plan, "zero", 0) > 0)
    g_string_append_printf (s, " zero%" G_GINT64_FORMAT, json_object_get_int_member (plan, "zero"));
  const char *rc = json_object_get_string_member_with_default (plan, "recompute", "none");
  if (strcmp (rc, "none") != 0)
    g_string_append_printf (s, " recompute-%s", rc);
  g_string_append_printf (s, " %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT " %s",
                          json_object_get_int_member_with_default (plan, "micro_batch_size", 1),
                          json_object_get_int_member_with_default (plan, "num_micro_batches", 1),
                          json_object_get_string_member_with_default (plan, "schedule", ""));
  return g_string_free (s, FALSE);
}

static void
read_ranks (MpReportRun *run, JsonObject *measured)
{
  JsonNode *n = json_object_get_member (measured, "ranks");
  JsonArray *a = n && JSON_NODE_HOLDS_ARRAY (n) ? json_node_get_array (n) : NULL;
  run->n_ranks = a ? json_array_get_length (a) : 0;
  run->ranks = g_new0 (MpReportRankMem, MAX (run->n_ranks, 1u));
  for (guint r = 0; r < run->n_ranks; r++)
    {
      JsonNode *e = json_array_get_element (a, r);
      JsonObject *o = JSON_NODE_HOLDS_OBJECT (e) ? json_node_get_object (e) : NULL;
      double rank = r, stage = 0;
      number (o, "rank", &rank);
      number (o, "stage", &stage);
      run->ranks[r].rank = (guint) rank;
      run->ranks[r].stage = (guint) stage;
      memory (object_member (o, "memory_bytes"), run->ranks[r].bytes);
    }
}

static void
read_measured (MpReportRun *run, JsonObject *m)
{
  double *v = run->measured, *lo = run->measured_min, *hi = run->measured_max;
  phases (object_member (m, "time_s"), v);
  number (m, "step_s", &v[MP_REPORT_STEP]);
  memcpy (lo, v, sizeof run->measured);
  memcpy (hi, v, sizeof run->measured);
  /* Older measured files have no per-phase spread: the median stands for both ends. */
  if (object_member (m, "time_s_min"))
    phases (object_member (m, "time_s_min"), lo);
  if (object_member (m, "time_s_max"))
    phases (object_member (m, "time_s_max"), hi);
  number (m, "step_s_min", &lo[MP_REPORT_STEP]);
  number (m, "step_s_max", &hi[MP_REPORT_STEP]);
  double steps = 0, rounds = 1;    /* one exec run is one round */
  number (m, "steps", &steps);
  number (m, "rounds", &rounds);
  run->steps = (guint) steps;
  run->rounds = (guint) rounds;
  read_ranks (run, m);
}

MpReportRun *
mp_report_run_new (JsonNode *predicted, JsonNode *measured, GError **error)
{
  g_return_val_if_fail (predicted != NULL && measured != NULL, NULL);
  JsonObject *p = predicted_object (predicted);
  JsonObject *m = JSON_NODE_HOLDS_OBJECT (measured) ? json_node_get_object (measured) : NULL;
  if (!require (p, "predicted", "step_s", error) || !require (p, "predicted", "time_s", error)
      || !require (m, "measured", "step_s", error) || !require (m, "measured", "time_s", error))
    return NULL;
  g_autoptr(MpReportRun) run = g_new0 (MpReportRun, 1);
  phases (object_member (p, "time_s"), run->predicted);
  number (p, "step_s", &run->predicted[MP_REPORT_STEP]);
  read_measured (run, m);
  /* The plan: the predicted object when it is one (it has the config's keys), else the
   * plan the executor ran (measured.json records it). */
  JsonObject *plan = json_object_has_member (p, "dp") ? p : object_member (m, "plan");
  if (plan)
    {
      run->plan = json_node_new (JSON_NODE_OBJECT);
      json_node_set_object (run->plan, plan);
    }
  run->label = plan_label (plan);
  /* simulate --json has no memory: the plan's prediction (the same cost model) has. */
  JsonObject *mem = object_member (p, "memory_bytes");
  run->has_predicted_mem = memory (mem ? mem : object_member (plan, "memory_bytes"),
                                   run->predicted_mem);
  return g_steal_pointer (&run);
}

/* ---- several rounds of one plan --------------------------------------------------- */

/* ROUND's step_times_s appended to ALL; FALSE with MP_ERROR_INPUT when it has none. */
static gboolean
append_step_times (JsonNode *round, GArray *all, GError **error)
{
  JsonObject *o = JSON_NODE_HOLDS_OBJECT (round) ? json_node_get_object (round) : NULL;
  if (!require (o, "measured", "step_times_s", error))
    return FALSE;
  JsonNode *n = json_object_get_member (o, "step_times_s");
  JsonArray *a = JSON_NODE_HOLDS_ARRAY (n) ? json_node_get_array (n) : NULL;
  if (a == NULL || json_array_get_length (a) == 0)
    {
      g_set_error_literal (error, MP_ERROR, MP_ERROR_INPUT,
                           "measured has no step times (step_times_s is empty)");
      return FALSE;
    }
  for (guint s = 0; s < json_array_get_length (a); s++)
    {
      JsonNode *e = json_array_get_element (a, s);
      double t = JSON_NODE_HOLDS_VALUE (e) ? json_node_get_double (e) : 0;
      g_array_append_val (all, t);
    }
  return TRUE;
}

/* The quietest round: the one with the lowest median step (its step_s); the first on a
 * tie. Load from elsewhere only ever slows a run down, so the quietest round is the one
 * nearest the machine itself (the reason timeit reports the best of its repeats). */
static guint
quietest_round (JsonNode *const *rounds, guint n)
{
  guint best = 0;
  double best_step = G_MAXDOUBLE;
  for (guint r = 0; r < n; r++)
    {
      double step = NAN;
      number (json_node_get_object (rounds[r]), "step_s", &step);
      if (!isnan (step) && step < best_step)
        {
          best = r;
          best_step = step;
        }
    }
  return best;
}

JsonNode *
mp_report_measured_merge (JsonNode *const *rounds, guint n, guint *chosen, GError **error)
{
  g_return_val_if_fail (rounds != NULL && n > 0, NULL);
  g_autoptr(GArray) all = g_array_new (FALSE, FALSE, sizeof (double));
  for (guint r = 0; r < n; r++)
    if (!append_step_times (rounds[r], all, error))
      return NULL;
  JsonArray *times = json_array_sized_new (all->len);
  double lo = all->len ? G_MAXDOUBLE : 0, hi = 0;
  for (guint s = 0; s < all->len; s++)
    {
      double t = g_array_index (all, double, s);
      json_array_add_double_element (times, t);
      lo = MIN (lo, t);
      hi = MAX (hi, t);
    }
  guint pick = quietest_round (rounds, n);
  JsonNode *out = json_node_copy (rounds[pick]);
  JsonObject *o = json_node_get_object (out);
  json_object_set_double_member (o, "step_s_min", lo);
  json_object_set_double_member (o, "step_s_max", hi);
  json_object_set_int_member (o, "steps", all->len);
  json_object_set_int_member (o, "rounds", n);
  json_object_set_array_member (o, "step_times_s", times);
  if (chosen)
    *chosen = pick;
  return out;
}

/* ---- several runs ----------------------------------------------------------------- */

void
mp_report_summarize (GPtrArray *runs, MpReportSummary *out)
{
  memset (out, 0, sizeof *out);
  if (runs->len == 0)
    return;
  g_autofree double *abs_err = g_new (double, runs->len);
  guint n = 0;
  for (guint i = 0; i < runs->len; i++)
    {
      const MpReportRun *r = g_ptr_array_index (runs, i);
      const MpReportRun *bp = g_ptr_array_index (runs, out->best_predicted);
      const MpReportRun *bm = g_ptr_array_index (runs, out->best_measured);
      double e = mp_report_error (r->predicted[MP_REPORT_STEP], r->measured[MP_REPORT_STEP]);
      if (!isnan (e))
        abs_err[n++] = fabs (e);
      if (r->predicted[MP_REPORT_STEP] < bp->predicted[MP_REPORT_STEP])
        out->best_predicted = i;
      if (r->measured[MP_REPORT_STEP] < bm->measured[MP_REPORT_STEP])
        out->best_measured = i;
    }
  out->median_abs_error = median_sorting (abs_err, n);
  const MpReportRun *bp = g_ptr_array_index (runs, out->best_predicted);
  const MpReportRun *bm = g_ptr_array_index (runs, out->best_measured);
  /* Steps of plans this close cannot be told apart on a noisy machine: a pick whose
   * median falls inside the winner's spread is as good as the winner. */
  out->ranking_matches = bp == bm
                         || bp->measured[MP_REPORT_STEP] <= bm->measured_max[MP_REPORT_STEP];
}

/* 1-based rank of run I among RUNS by predicted (BY_MEASURED: measured) step. */
static guint
rank_of (GPtrArray *runs, guint i, gboolean by_measured)
{
  const MpReportRun *ri = g_ptr_array_index (runs, i);
  double v = by_measured ? ri->measured[MP_REPORT_STEP] : ri->predicted[MP_REPORT_STEP];
  guint rank = 1;
  for (guint j = 0; j < runs->len; j++)
    {
      const MpReportRun *rj = g_ptr_array_index (runs, j);
      double w = by_measured ? rj->measured[MP_REPORT_STEP] : rj->predicted[MP_REPORT_STEP];
      rank += w < v || (w == v && j < i);
    }
  return rank;
}

/* ---- text ------------------------------------------------------------------------- */

static void
append_error (GString *s, double e)
{
  if (isnan (e))
    g_string_append_printf (s, " %9s", "-");
  else
    g_string_append_printf (s, " %+8.1f%%", 100 * e);
}

static void
append_seconds (GString *s, const char *fmt, double v)
{
  g_autofree char *t = mp_units_format (v, MP_UNIT_SECONDS);
  g_string_append_printf (s, fmt, t);
}

static void
append_spread (GString *s, double lo, double hi)
{
  g_autofree char *a = mp_units_format (lo, MP_UNIT_SECONDS);
  g_autofree char *b = mp_units_format (hi, MP_UNIT_SECONDS);
  g_autofree char *t = g_strdup_printf ("%s - %s", a, b);
  g_string_append_printf (s, "  %-22s", t);
}

static void
append_memory_row (GString *s, const char *who, const double *v)
{
  g_string_append_printf (s, "  %-14s", who);
  for (int k = 0; k < MP_REPORT_MEM_N; k++)
    {
      g_autofree char *t = mp_units_format (v[k], MP_UNIT_BYTES);
      g_string_append_printf (s, " %11s", t);
    }
  g_string_append_c (s, '\n');
}

static void
append_memory (GString *s, const MpReportRun *run)
{
  g_string_append (s, "\nMemory per rank (predicted: the fullest stage; its \"other\" includes "
                      "the device overhead\nthe executor does not allocate):\n");
  g_string_append_printf (s, "  %-14s", "");
  for (int k = 0; k < MP_REPORT_MEM_N; k++)
    g_string_append_printf (s, " %11s", mp_report_mem_name (k));
  g_string_append_c (s, '\n');
  if (run->has_predicted_mem)
    append_memory_row (s, "predicted", run->predicted_mem);
  for (guint r = 0; r < run->n_ranks; r++)
    {
      g_autofree char *who = g_strdup_printf ("rank %u (pp%u)", run->ranks[r].rank,
                                              run->ranks[r].stage);
      append_memory_row (s, who, run->ranks[r].bytes);
    }
}

char *
mp_report_text (const MpReportRun *run)
{
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "%s: predicted against measured (median over the measured "
                             "steps; error = predicted / measured - 1)\n\n", run->label);
  g_string_append_printf (s, "  %-10s %12s %12s  %-22s %9s\n", "phase", "predicted",
                          "measured", "(min - max)", "error");
  for (int p = 0; p < MP_REPORT_N; p++)
    {
      g_string_append_printf (s, "  %-10s", mp_report_phase_name (p));
      append_seconds (s, " %12s", run->predicted[p]);
      append_seconds (s, " %12s", run->measured[p]);
      append_spread (s, run->measured_min[p], run->measured_max[p]);
      append_error (s, mp_report_phase_error (run, p));
      g_string_append_c (s, '\n');
    }
  append_memory (s, run);
  return g_string_free (s, FALSE);
}

char *
mp_report_runs_text (GPtrArray *runs)
{
  MpReportSummary sum;
  mp_report_summarize (runs, &sum);
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "  %-36s %11s %11s  %-22s %9s %5s %5s\n", "plan", "predicted",
                          "measured", "(min - max)", "error", "#pred", "#meas");
  for (guint i = 0; i < runs->len; i++)
    {
      const MpReportRun *r = g_ptr_array_index (runs, i);
      g_string_append_printf (s, "  %-36s", r->label);
      append_seconds (s, " %11s", r->predicted[MP_REPORT_STEP]);
      append_seconds (s, " %11s", r->measured[MP_REPORT_STEP]);
      append_spread (s, r->measured_min[MP_REPORT_STEP], r->measured_max[MP_REPORT_STEP]);
      append_error (s, mp_report_error (r->predicted[MP_REPORT_STEP],
                                        r->measured[MP_REPORT_STEP]));
      g_string_append_printf (s, " %5u %5u\n", rank_of (runs, i, FALSE), rank_of (runs, i, TRUE));
    }
  const MpReportRun *bp = g_ptr_array_index (runs, sum.best_predicted);
  const MpReportRun *bm = g_ptr_array_index (runs, sum.best_measured);
  g_string_append_printf (s, "\nMedian absolute step-time error: %.1f%% over %u plans.\n",
                          100 * sum.median_abs_error, runs->len);
  if (bp == bm)
    g_string_append_printf (s, "Ranking: matched; the best predicted plan (%s) is the best "
                               "measured.\n", bp->label);
  else
    g_string_append_printf (s, "Ranking: %s; the best predicted plan (%s) measured %.1f%% "
                               "slower than the best measured (%s)%s.\n",
                            sum.ranking_matches ? "matched" : "did not match", bp->label,
                            100 * (bp->measured[MP_REPORT_STEP] / bm->measured[MP_REPORT_STEP] - 1),
                            bm->label,
                            sum.ranking_matches ? ", within its measured spread" : "");
  return g_string_free (s, FALSE);
}

/* ---- JSON ------------------------------------------------------------------------- */

static void
add_phases (JsonBuilder *b, const char *key, const double *v)
{
  json_builder_set_member_name (b, key);
  json_builder_begin_object (b);
  for (int p = 0; p < MP_REPORT_STEP; p++)
    mp_json_add_double (b, mp_report_phase_name (p), v[p]);
  json_builder_end_object (b);
}

static void
add_memory (JsonBuilder *b, const double *v)
{
  json_builder_set_member_name (b, "memory_bytes");
  json_builder_begin_object (b);
  for (int k = 0; k < MP_REPORT_MEM_N; k++)
    mp_json_add_double (b, mp_report_mem_name (k), v[k]);
  json_builder_end_object (b);
}

static void
measured_json (JsonBuilder *b, const MpReportRun *r)
{
  json_builder_set_member_name (b, "measured");
  json_builder_begin_object (b);
  mp_json_add_double (b, "step_s", r->measured[MP_REPORT_STEP]);
  mp_json_add_double (b, "step_s_min", r->measured_min[MP_REPORT_STEP]);
  mp_json_add_double (b, "step_s_max", r->measured_max[MP_REPORT_STEP]);
  mp_json_add_int (b, "steps", r->steps);
  mp_json_add_int (b, "rounds", r->rounds);
  add_phases (b, "time_s", r->measured);
  add_phases (b, "time_s_min", r->measured_min);
  add_phases (b, "time_s_max", r->measured_max);
  json_builder_set_member_name (b, "ranks");
  json_builder_begin_array (b);
  for (guint i = 0; i < r->n_ranks; i++)
    {
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "rank");
      json_builder_add_int_value (b, r->ranks[i].rank);
      json_builder_set_member_name (b, "stage");
      json_builder_add_int_value (b, r->ranks[i].stage);
      add_memory (b, r->ranks[i].bytes);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
}

static void
run_json (JsonBuilder *b, const MpReportRun *r)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "label");
  json_builder_add_string_value (b, r->label);
  json_builder_set_member_name (b, "plan");
  json_builder_add_value (b, r->plan ? json_node_copy (r->plan) : json_node_new (JSON_NODE_NULL));
  json_builder_set_member_name (b, "predicted");
  json_builder_begin_object (b);
  mp_json_add_double (b, "step_s", r->predicted[MP_REPORT_STEP]);
  add_phases (b, "time_s", r->predicted);
  if (r->has_predicted_mem)
    add_memory (b, r->predicted_mem);
  json_builder_end_object (b);
  measured_json (b, r);
  mp_json_add_double (b, "error", mp_report_error (r->predicted[MP_REPORT_STEP],
                                           r->measured[MP_REPORT_STEP]));
  json_builder_set_member_name (b, "errors");
  json_builder_begin_object (b);
  for (int p = 0; p < MP_REPORT_N; p++)
    mp_json_add_double (b, mp_report_phase_name (p), mp_report_phase_error (r, p));
  json_builder_end_object (b);
  json_builder_end_object (b);
}

JsonNode *
mp_report_json (GPtrArray *runs)
{
  MpReportSummary sum;
  mp_report_summarize (runs, &sum);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "schema_version");
  json_builder_add_int_value (b, 1);
  json_builder_set_member_name (b, "runs");
  json_builder_begin_array (b);
  for (guint i = 0; i < runs->len; i++)
    run_json (b, g_ptr_array_index (runs, i));
  json_builder_end_array (b);
  mp_json_add_double (b, "median_abs_error", sum.median_abs_error);
  json_builder_set_member_name (b, "ranking_matches");
  json_builder_add_boolean_value (b, sum.ranking_matches);
  json_builder_set_member_name (b, "best_predicted");
  json_builder_add_int_value (b, sum.best_predicted);
  json_builder_set_member_name (b, "best_measured");
  json_builder_add_int_value (b, sum.best_measured);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
