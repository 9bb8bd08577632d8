/* report.c - a prediction joined with its measurement (report.h): the six parts of a step
 * and the step, each predicted, measured (median over the measured steps, with the
 * smallest and largest step) and the error between them; memory predicted against each
 * measured rank; over several runs, the median error and whether the ranking held;
 * several measurements (rounds) of one plan merged into one.
 *
 * Inputs are JSON only (simulate --json, a plan's JSON, measured.json), read with every
 * member checked in report-read.c: they share the planner's keys (step_s, time_s {...},
 * memory_bytes {...}), so a report is a join.
 * Errors are predicted / measured - 1: +10% means the model predicted 10% too slow. */
#define G_LOG_DOMAIN "mpplan-report"
#include "config.h"
#include "common/output.h"
#include "report/report.h"
#include "common/error.h"
#include "common/units.h"
#include "common/stats.h"

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
  out->median_abs_error = n == 0 ? NAN : mp_stat_median (abs_err, n, NULL);
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
  int width = 36;                             /* the plan column: as wide as its labels */
  for (guint i = 0; i < runs->len; i++)
    width = MAX (width, (int) strlen (((const MpReportRun *) g_ptr_array_index (runs, i))->label));
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "  %-*s %11s %11s  %-22s %9s %5s %5s\n", width, "plan", "predicted",
                          "measured", "(min - max)", "error", "#pred", "#meas");
  for (guint i = 0; i < runs->len; i++)
    {
      const MpReportRun *r = g_ptr_array_index (runs, i);
      g_string_append_printf (s, "  %-*s", width, r->label);
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
