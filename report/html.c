/* html.c - the report as one self-contained HTML page (report.h): inline CSS and SVG, no
 * script and nothing fetched, so it opens offline and can be mailed or attached to CI.
 *
 * For each run: the phase table, bars of predicted against measured per phase (the
 * measured min-max as a whisker), memory per rank, and when the run has both traces the
 * two timelines as Gantt charts on one time axis (one row per process and stream, the
 * predicted rank above its measured twin). With several runs, a scatter of predicted
 * against measured step time around the y = x line. */
#define G_LOG_DOMAIN "mpplan-report"
#include "config.h"
#include "report/report.h"
#include "common/units.h"

#include <math.h>
#include <string.h>

#define PRED_COLOR "#4e79a7"
#define MEAS_COLOR "#f28e2b"

static void
text_escaped (GString *s, const char *text)
{
  g_autofree char *e = g_markup_escape_text (text, -1);
  g_string_append (s, e);
}

static char *
seconds (double v)
{
  return mp_units_format (v, MP_UNIT_SECONDS);
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) giving about N ticks up to MAX. */
static double
tick_step (double max, int n)
{
  double raw = max / n, p = pow (10, floor (log10 (raw)));
  double m = raw / p;
  return p * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
}

/* ---- phase table and bars ------------------------------------------------------- */

static void
phase_table (GString *s, const MpReportRun *r)
{
  g_string_append (s, "<table><tr><th>phase</th><th>predicted</th><th>measured (median)</th>"
                      "<th>min – max</th><th>error</th></tr>\n");
  for (int p = 0; p < MP_REPORT_N; p++)
    {
      g_autofree char *a = seconds (r->predicted[p]), *b = seconds (r->measured[p]);
      g_autofree char *lo = seconds (r->measured_min[p]), *hi = seconds (r->measured_max[p]);
      double e = mp_report_phase_error (r, p);
      g_autofree char *err = isnan (e) ? g_strdup ("–") : g_strdup_printf ("%+.1f%%", 100 * e);
      g_string_append_printf (s, "<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%s – %s</td>"
                                 "<td>%s</td></tr>\n", p == MP_REPORT_STEP ? " class=\"step\"" : "",
                              mp_report_phase_name (p), a, b, lo, hi, err);
    }
  g_string_append (s, "</table>\n");
}

static void
phase_bars (GString *s, const MpReportRun *r)
{
  const double left = 90, width = 620, row = 34, top = 24;
  double max = 0;
  for (int p = 0; p < MP_REPORT_N; p++)
    max = MAX (max, MAX (r->predicted[p], r->measured_max[p]));
  max = max > 0 ? max : 1;
  double h = top + row * MP_REPORT_N + 24;
  g_string_append_printf (s, "<svg class=\"chart\" width=\"%.0f\" height=\"%.0f\" role=\"img\">"
                             "<title>predicted and measured time per phase</title>\n",
                          left + width + 190, h);
  g_string_append_printf (s, "<rect x=\"%.0f\" y=\"4\" width=\"12\" height=\"10\" fill=\"%s\"/>"
                             "<text x=\"%.0f\" y=\"13\">predicted</text>"
                             "<rect x=\"%.0f\" y=\"4\" width=\"12\" height=\"10\" fill=\"%s\"/>"
                             "<text x=\"%.0f\" y=\"13\">measured (median, min–max)</text>\n",
                          left, PRED_COLOR, left + 16, left + 100, MEAS_COLOR, left + 116);
  for (int p = 0; p < MP_REPORT_N; p++)
    {
      double y = top + p * row;
      double wp = width * r->predicted[p] / max, wm = width * r->measured[p] / max;
      double x0 = left + width * r->measured_min[p] / max;
      double x1 = left + width * r->measured_max[p] / max;
      g_autofree char *a = seconds (r->predicted[p]), *b = seconds (r->measured[p]);
      g_string_append_printf (s, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                              left - 6, y + 17, mp_report_phase_name (p));
      g_string_append_printf (s, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"12\" "
                                 "fill=\"%s\"><title>predicted %s</title></rect>\n",
                              left, y + 2, wp, PRED_COLOR, a);
      g_string_append_printf (s, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"12\" "
                                 "fill=\"%s\"><title>measured %s</title></rect>\n",
                              left, y + 15, wm, MEAS_COLOR, b);
      g_string_append_printf (s, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                                 "class=\"whisker\"/>\n", x0, x1, y + 21, y + 21);
      g_string_append_printf (s, "<text x=\"%.1f\" y=\"%.1f\" class=\"small\">%s / %s</text>\n",
                              left + MAX (wp, MAX (wm, x1 - left)) + 4, y + 17, a, b);
    }
  g_string_append (s, "</svg>\n");
}

static void
memory_table (GString *s, const MpReportRun *r)
{
  g_string_append (s, "<table><tr><th></th>");
  for (guint k = 0; k < MP_REPORT_MEM_N; k++)
    g_string_append_printf (s, "<th>%s</th>", mp_report_mem_name (k));
  g_string_append (s, "</tr>\n");
  for (guint i = 0; i < r->n_ranks + 1; i++)
    {
      if (i == 0 && !r->has_predicted_mem)
        continue;
      const double *v = i == 0 ? r->predicted_mem : r->ranks[i - 1].bytes;
      if (i == 0)
        g_string_append (s, "<tr><td>predicted (fullest stage)</td>");
      else
        g_string_append_printf (s, "<tr><td>measured rank %u (pp%u)</td>", r->ranks[i - 1].rank,
                                r->ranks[i - 1].stage);
      for (guint k = 0; k < MP_REPORT_MEM_N; k++)
        {
          g_autofree char *t = mp_units_format (v[k], MP_UNIT_BYTES);
          g_string_append_printf (s, "<td>%s</td>", t);
        }
      g_string_append (s, "</tr>\n");
    }
  g_string_append (s, "</table>\n<p class=\"note\">The predicted \"other\" includes the "
                      "per-device overhead (an MPI process and its buffers), which the "
                      "executor does not allocate.</p>\n");
}

/* ---- Gantt charts --------------------------------------------------------------- */

typedef struct {
  gint64 pid, tid;
  double ts_us, dur_us;
  const char *name, *cat;
} Slice;

typedef struct {
  gint64 pid, tid;
  gint64 sort;               /* process sort index, then the stream */
  char *label;
} Row;

static void
row_free (gpointer p)
{
  Row *row = p;
  g_free (row->label);
  g_free (row);
}

static gint
row_cmp (gconstpointer a, gconstpointer b)
{
  const Row *x = *(Row *const *) a, *y = *(Row *const *) b;
  if (x->sort != y->sort)
    return x->sort < y->sort ? -1 : 1;
  return (x->tid > y->tid) - (x->tid < y->tid);
}

static const char *
member_string (JsonObject *o, const char *key)
{
  JsonNode *n = json_object_get_member (o, key);
  return n && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING
             ? json_node_get_string (n) : "";
}

/* Reads TRACE's X slices into SLICES and process names and sort indexes into NAMES and
 * SORTS (pid -> value); returns the end of the last slice (us). */
static double
collect (JsonNode *trace, GArray *slices, GHashTable *names, GHashTable *sorts)
{
  JsonObject *o = json_node_get_object (trace);
  JsonArray *ev = json_object_get_array_member (o, "traceEvents");
  double end = 0;
  for (guint i = 0; ev && i < json_array_get_length (ev); i++)
    {
      JsonNode *n = json_array_get_element (ev, i);
      if (!JSON_NODE_HOLDS_OBJECT (n))
        continue;
      JsonObject *e = json_node_get_object (n);
      const char *ph = member_string (e, "ph"), *name = member_string (e, "name");
      gint64 pid = json_object_get_int_member_with_default (e, "pid", 0);
      JsonObject *args = json_object_get_member (e, "args")
                             && JSON_NODE_HOLDS_OBJECT (json_object_get_member (e, "args"))
                             ? json_object_get_object_member (e, "args") : NULL;
      if (strcmp (ph, "M") == 0 && args && strcmp (name, "process_name") == 0)
        g_hash_table_insert (names, GINT_TO_POINTER ((gint) pid),
                             (gpointer) member_string (args, "name"));
      else if (strcmp (ph, "M") == 0 && args && strcmp (name, "process_sort_index") == 0)
        g_hash_table_insert (sorts, GINT_TO_POINTER ((gint) pid),
                             GINT_TO_POINTER ((gint) json_object_get_int_member_with_default (
                                 args, "sort_index", 0) + 1));
      else if (strcmp (ph, "X") == 0)
        {
          Slice sl = { pid, json_object_get_int_member_with_default (e, "tid", 0),
                       json_object_get_double_member_with_default (e, "ts", 0),
                       json_object_get_double_member_with_default (e, "dur", 0), name,
                       member_string (e, "cat") };
          g_array_append_val (slices, sl);
          end = MAX (end, sl.ts_us + sl.dur_us);
        }
    }
  return end;
}

/* A slice's colour by its category: a phase's name (every comm phase alike) or "comm". */
static const char *
cat_color (const char *cat)
{
  MpPhase p;
  if (!mp_phase_from_name (cat, &p))
    p = MP_PHASE_TP;
  switch (p)
    {
    case MP_PHASE_COMPUTE:
      return "#59a14f";
    case MP_PHASE_BUBBLE:
      return "#d3d3d3";
    case MP_PHASE_OPTIMIZER:
      return "#b07aa1";
    default:
      return "#e15759";   /* comm */
    }
}

/* The rows: every (pid, tid) with a slice, labelled by its process name and stream. */
static GPtrArray *
gantt_rows (GArray *slices, GHashTable *names, GHashTable *sorts)
{
  static const char *const streams[] = { "compute", "TP comm", "DP comm", "PP send/recv" };
  GPtrArray *rows = g_ptr_array_new_with_free_func (row_free);
  g_autoptr(GHashTable) seen = g_hash_table_new (g_int64_hash, g_int64_equal);
  g_autofree gint64 *keys = g_new (gint64, MAX (slices->len, 1u));
  for (guint i = 0; i < slices->len; i++)
    {
      const Slice *sl = &g_array_index (slices, Slice, i);
      keys[i] = sl->pid * 64 + sl->tid;
      if (g_hash_table_contains (seen, &keys[i]))
        continue;
      g_hash_table_add (seen, &keys[i]);
      Row *row = g_new0 (Row, 1);
      row->pid = sl->pid;
      row->tid = sl->tid;
      gint sort = GPOINTER_TO_INT (g_hash_table_lookup (sorts, GINT_TO_POINTER ((gint) sl->pid)));
      row->sort = sort > 0 ? sort - 1 : sl->pid;
      const char *pname = g_hash_table_lookup (names, GINT_TO_POINTER ((gint) sl->pid));
      row->label = g_strdup_printf ("%s · %s", pname ? pname : "?",
                                    sl->tid >= 0 && sl->tid < 4 ? streams[sl->tid] : "other");
      g_ptr_array_add (rows, row);
    }
  g_ptr_array_sort (rows, row_cmp);
  return rows;
}

static guint
row_index (GPtrArray *rows, const Slice *sl)
{
  for (guint i = 0; i < rows->len; i++)
    {
      const Row *row = g_ptr_array_index (rows, i);
      if (row->pid == sl->pid && row->tid == sl->tid)
        return i;
    }
  return 0;
}

static void
time_axis (GString *s, double left, double width, double y, double h, double end_us)
{
  double step = tick_step (end_us, 8);
  for (double t = 0; t <= end_us * 1.0001; t += step)
    {
      double x = left + width * t / end_us;
      g_autofree char *label = seconds (t * 1e-6);
      g_string_append_printf (s, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                                 "class=\"grid\"/><text x=\"%.1f\" y=\"%.1f\" "
                                 "text-anchor=\"middle\" class=\"small\">%s</text>\n",
                              x, x, y, y + h, x, y + h + 12, label);
    }
}

static void
gantt (GString *s, const MpReportRun *r)
{
  g_autoptr(GArray) slices = g_array_new (FALSE, FALSE, sizeof (Slice));
  g_autoptr(GHashTable) names = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) sorts = g_hash_table_new (g_direct_hash, g_direct_equal);
  double end = MAX (collect (r->predicted_trace, slices, names, sorts),
                    collect (r->measured_trace, slices, names, sorts));
  if (slices->len == 0 || end <= 0)
    return;
  g_autoptr(GPtrArray) rows = gantt_rows (slices, names, sorts);
  const double left = 270, width = 760, row_h = 16, top = 8;
  double h = rows->len * row_h;
  g_string_append_printf (s, "<svg class=\"chart\" width=\"%.0f\" height=\"%.0f\" role=\"img\">"
                             "<title>predicted and measured timelines of one step</title>\n",
                          left + width + 20, top + h + 30);
  for (guint i = 0; i < rows->len; i++)
    {
      const Row *row = g_ptr_array_index (rows, i);
      g_string_append_printf (s, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" "
                                 "class=\"small%s\">", left - 6, top + i * row_h + 12,
                              row->pid >= MP_TRACE_MEASURED_PID ? " meas" : "");
      text_escaped (s, row->label);
      g_string_append (s, "</text>\n");
    }
  time_axis (s, left, width, top, h, end);
  for (guint i = 0; i < slices->len; i++)
    {
      const Slice *sl = &g_array_index (slices, Slice, i);
      double x = left + width * sl->ts_us / end, w = MAX (width * sl->dur_us / end, 0.5);
      g_autofree char *d = seconds (sl->dur_us * 1e-6);
      g_string_append_printf (s, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" "
                                 "fill=\"%s\"><title>", x, top + row_index (rows, sl) * row_h + 2,
                              w, row_h - 4, cat_color (sl->cat));
      text_escaped (s, sl->name);
      g_string_append_printf (s, " (%s)</title></rect>\n", d);
    }
  g_string_append (s, "</svg>\n<p class=\"note\">Green compute, red communication, grey "
                      "bubble, purple optimizer. Both runs start their step at 0; the "
                      "predicted timeline simulates one data-parallel replica.</p>\n");
}

/* ---- scatter -------------------------------------------------------------------- */

static void
scatter (GString *s, GPtrArray *runs)
{
  const double left = 70, size = 420, top = 16;
  /* Both axes span the runs' steps (whiskers included) with a margin, not 0 .. max:
   * plans a few percent apart would otherwise sit on one spot. */
  double lo = G_MAXDOUBLE, hi = 0;
  for (guint i = 0; i < runs->len; i++)
    {
      const MpReportRun *r = g_ptr_array_index (runs, i);
      lo = MIN (lo, MIN (r->predicted[MP_REPORT_STEP], r->measured_min[MP_REPORT_STEP]));
      hi = MAX (hi, MAX (r->predicted[MP_REPORT_STEP], r->measured_max[MP_REPORT_STEP]));
    }
  if (!(hi > 0))
    lo = 0, hi = 1;
  if (hi - lo < 0.1 * hi)   /* one point, or nearly: a range around it */
    lo = MAX (0, lo - 0.05 * hi), hi *= 1.05;
  double step = tick_step (hi - lo, 6);
  lo = MAX (0, floor ((lo - 0.05 * (hi - lo)) / step) * step);
  hi += 0.05 * (hi - lo);
  double span = hi - lo;
  g_string_append_printf (s, "<svg class=\"chart\" width=\"%.0f\" height=\"%.0f\" role=\"img\">"
                             "<title>predicted against measured step time</title>\n",
                          left + size + 30, top + size + 50);
  for (double t = lo; t <= hi; t += step)
    {
      double x = left + size * (t - lo) / span, y = top + size - size * (t - lo) / span;
      g_autofree char *label = seconds (t);
      g_string_append_printf (s, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.0f\" y2=\"%.0f\" "
                                 "class=\"grid\"/><line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" "
                                 "y2=\"%.1f\" class=\"grid\"/>\n<text x=\"%.1f\" y=\"%.0f\" "
                                 "text-anchor=\"middle\" class=\"small\">%s</text><text "
                                 "x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" class=\"small\">%s"
                                 "</text>\n", x, x, top, top + size, left, left + size, y, y,
                              x, top + size + 14, label, left - 4, y + 4, label);
    }
  g_string_append_printf (s, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" "
                             "class=\"diag\"/><text x=\"%.0f\" y=\"%.0f\" class=\"small\">"
                             "y = x</text>\n", left, top + size, left + size, top, left + size - 40,
                          top + 14);
  g_string_append_printf (s, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">predicted "
                             "step</text><text x=\"14\" y=\"%.0f\" text-anchor=\"middle\" "
                             "transform=\"rotate(-90 14 %.0f)\">measured step</text>\n",
                          left + size / 2, top + size + 36, top + size / 2, top + size / 2);
  for (guint i = 0; i < runs->len; i++)
    {
      const MpReportRun *r = g_ptr_array_index (runs, i);
      double x = left + size * (r->predicted[MP_REPORT_STEP] - lo) / span;
      double y = top + size - size * (r->measured[MP_REPORT_STEP] - lo) / span;
      double y0 = top + size - size * (r->measured_min[MP_REPORT_STEP] - lo) / span;
      double y1 = top + size - size * (r->measured_max[MP_REPORT_STEP] - lo) / span;
      g_string_append_printf (s, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
                                 "class=\"whisker\"/><circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" "
                                 "fill=\"%s\"><title>", x, x, y0, y1, x, y, MEAS_COLOR);
      text_escaped (s, r->label);
      g_string_append_printf (s, "</title></circle><text x=\"%.1f\" y=\"%.1f\" "
                                 "class=\"small\">%u</text>\n", x + 7, y - 4, i + 1);
    }
  g_string_append (s, "</svg>\n");
}

static void
runs_table (GString *s, GPtrArray *runs)
{
  MpReportSummary sum;
  mp_report_summarize (runs, &sum);
  g_string_append (s, "<table><tr><th>#</th><th>plan</th><th>predicted</th><th>measured</th>"
                      "<th>min – max</th><th>error</th></tr>\n");
  for (guint i = 0; i < runs->len; i++)
    {
      const MpReportRun *r = g_ptr_array_index (runs, i);
      g_autofree char *a = seconds (r->predicted[MP_REPORT_STEP]);
      g_autofree char *b = seconds (r->measured[MP_REPORT_STEP]);
      g_autofree char *lo = seconds (r->measured_min[MP_REPORT_STEP]);
      g_autofree char *hi = seconds (r->measured_max[MP_REPORT_STEP]);
      double e = mp_report_error (r->predicted[MP_REPORT_STEP], r->measured[MP_REPORT_STEP]);
      g_string_append_printf (s, "<tr><td>%u</td><td class=\"name\">", i + 1);
      text_escaped (s, r->label);
      g_string_append_printf (s, "%s%s</td><td>%s</td><td>%s</td><td>%s – %s</td><td>%+.1f%%"
                                 "</td></tr>\n", i == sum.best_predicted ? " ★pred" : "",
                              i == sum.best_measured ? " ★meas" : "", a, b, lo, hi, 100 * e);
    }
  g_string_append_printf (s, "</table>\n<p>Median absolute step-time error <b>%.1f%%</b>; "
                             "ranking %s.</p>\n", 100 * sum.median_abs_error,
                          sum.ranking_matches ? "matched (the best predicted plan is the best "
                                                "measured, or within its spread)"
                                              : "<b>did not match</b>");
}

static const char style[] =
  "body{font:14px/1.4 sans-serif;margin:24px;color:#222;max-width:1100px}"
  "h1{font-size:20px}h2{font-size:16px;margin-top:32px;border-top:1px solid #ccc;"
  "padding-top:12px}table{border-collapse:collapse;margin:8px 0}"
  "td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}"
  "td:first-child,th:first-child,td.name{text-align:left}tr.step td{font-weight:bold}"
  "svg.chart{display:block;margin:8px 0}svg text{font:12px sans-serif;fill:#222}"
  "svg text.small{font-size:10px}svg text.meas{fill:#a0522d}"
  ".grid{stroke:#eee;stroke-width:1}.whisker{stroke:#333;stroke-width:1.5}"
  ".diag{stroke:#888;stroke-dasharray:4 3}.note{color:#666;font-size:12px}";

char *
mp_report_html (GPtrArray *runs, const char *title)
{
  GString *s = g_string_new ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>");
  text_escaped (s, title);
  g_string_append_printf (s, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", style);
  text_escaped (s, title);
  g_string_append (s, "</h1>\n<p class=\"note\">error = predicted / measured − 1; measured "
                      "figures are medians over a run's measured steps (verify: those of its "
                      "quietest round); min – max span every measured step.</p>\n");
  if (runs->len > 1)
    {
      g_string_append (s, "<h2>Step time over all runs</h2>\n");
      runs_table (s, runs);
      scatter (s, runs);
    }
  for (guint i = 0; i < runs->len; i++)
    {
      const MpReportRun *r = g_ptr_array_index (runs, i);
      g_string_append_printf (s, "<h2>%u. ", i + 1);
      text_escaped (s, r->label);
      g_string_append (s, "</h2>\n");
      phase_table (s, r);
      phase_bars (s, r);
      memory_table (s, r);
      if (r->predicted_trace && r->measured_trace)
        gantt (s, r);
    }
  g_string_append (s, "</body>\n</html>\n");
  return g_string_free (s, FALSE);
}
