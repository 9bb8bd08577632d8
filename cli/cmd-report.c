/* cmd-report.c - `mpplan report -p predicted.json -m measured.json [-p ... -m ...] [--json]
 * [--html FILE] [--trace FILE] [--predicted-trace T --measured-trace T ...]`: a prediction
 * against its measurement, phase by phase (report/report.c, report/html.c), and both
 * timelines in one Chrome trace (report/trace.c). Several -p/-m pairs: one table of step
 * times, the median error and the ranking; the HTML page adds a scatter. */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/jsonread.h"
#include "common/output.h"
#include "report/report.h"

#include <stdio.h>
#include <string.h>

typedef struct {
  char **predicted, **measured, **predicted_traces, **measured_traces;
  char *html, *trace;
  gboolean json;
} ReportArgs;

/* Run I: its two files joined, with its traces when given. */
static MpReportRun *
load_run (const ReportArgs *a, guint i, GError **error)
{
  MpReportRun *run = mp_report_run_load (a->predicted[i], a->measured[i], error);
  if (run == NULL)
    return NULL;
  guint np = a->predicted_traces ? g_strv_length (a->predicted_traces) : 0;
  guint nm = a->measured_traces ? g_strv_length (a->measured_traces) : 0;
  if (i < np
      && ((run->predicted_trace = mp_json_load (a->predicted_traces[i], error)) == NULL
          || !mp_trace_check (run->predicted_trace, a->predicted_traces[i], FALSE, error)))
    goto fail;
  if (i < nm
      && ((run->measured_trace = mp_json_load (a->measured_traces[i], error)) == NULL
          || !mp_trace_check (run->measured_trace, a->measured_traces[i], TRUE, error)))
    goto fail;
  return run;
fail:
  mp_report_run_free (run);
  return NULL;
}

/* --trace: the first run's two traces side by side. */
static gboolean
write_trace (const char *path, const MpReportRun *run, GError **error)
{
  if (run->predicted_trace == NULL || run->measured_trace == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "--trace needs --predicted-trace and "
                   "--measured-trace (from `simulate --trace` and `exec --trace`)");
      return FALSE;
    }
  g_autoptr(JsonNode) both = mp_trace_merge (run->predicted_trace, run->measured_trace, error);
  return both != NULL && mp_json_write (path, both, error);
}

static int
report (const ReportArgs *a)
{
  GError *error = NULL;
  g_autoptr(GPtrArray) runs = g_ptr_array_new_with_free_func ((GDestroyNotify) mp_report_run_free);
  for (guint i = 0; a->predicted[i]; i++)
    {
      MpReportRun *run = load_run (a, i, &error);
      if (run == NULL)
        return mp_cli_fail (error);
      g_ptr_array_add (runs, run);
    }
  if (a->trace && !write_trace (a->trace, g_ptr_array_index (runs, 0), &error))
    return mp_cli_fail (error);
  if (a->html)
    {
      g_autofree char *page = mp_report_html (runs, "mpplan report: predicted against measured");
      if (!mp_output_write (a->html, page, strlen (page), &error))
        return mp_cli_fail (error);
    }
  if (a->json)
    {
      g_autoptr(JsonNode) root = mp_report_json (runs);
      return mp_json_write ("-", root, &error) ? 0 : mp_cli_fail (error);
    }
  for (guint i = 0; i < runs->len; i++)
    {
      g_autofree char *text = mp_report_text (g_ptr_array_index (runs, i));
      printf ("%s%s", i ? "\n" : "", text);
    }
  if (runs->len > 1)
    {
      g_autofree char *table = mp_report_runs_text (runs);
      printf ("\nStep time over all runs:\n%s", table);
    }
  return 0;
}

static const char *
check_args (const ReportArgs *a)
{
  guint np = a->predicted ? g_strv_length (a->predicted) : 0;
  guint nm = a->measured ? g_strv_length (a->measured) : 0;
  if (np == 0 || nm == 0)
    return "give a predicted and a measured file (-p predicted.json -m measured.json)";
  if (np != nm)
    return "give as many -m measured files as -p predicted files (they pair in order)";
  if ((a->predicted_traces && g_strv_length (a->predicted_traces) > np)
      || (a->measured_traces && g_strv_length (a->measured_traces) > np))
    return "more traces than runs (each trace pairs with the -p/-m pair of the same order)";
  return NULL;
}

int
mp_cmd_report (int argc, char **argv, gboolean do_help)
{
  ReportArgs a = { 0 };
  const GOptionEntry entries[] = {
    { "predicted", 'p', 0, G_OPTION_ARG_FILENAME_ARRAY, &a.predicted,
      "Prediction: `simulate --json` or a plan's JSON (repeat for several runs)", "FILE" },
    { "measured", 'm', 0, G_OPTION_ARG_FILENAME_ARRAY, &a.measured,
      "Measurement: `exec -o` (repeat, in the order of -p)", "FILE" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &a.json, "Print one JSON object (docs/json.md)", NULL },
    { "html", 0, 0, G_OPTION_ARG_FILENAME, &a.html,
      "Write a self-contained HTML page (inline SVG charts)", "FILE" },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &a.trace,
      "Write the first run's predicted and measured timelines side by side as one Chrome "
      "trace", "FILE" },
    { "predicted-trace", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &a.predicted_traces,
      "Predicted timeline (`simulate --trace`), for --trace and the Gantt chart", "FILE" },
    { "measured-trace", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &a.measured_traces,
      "Measured timeline (`exec --trace`)", "FILE" },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new (NULL);
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "Compare a prediction with a measurement: per phase (compute, tp_comm, cp_comm, ep_comm, "
           "pp_comm,\ndp_comm, bubble, optimizer, step) the predicted time, the measured median with "
           "its min-max and the\nerror (predicted / measured - 1); memory predicted against "
           "each measured rank.");
  g_option_context_set_description (ctx, MP_CLI_EXIT_CODES);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  const char *bad = NULL;
  if (status >= 0)
    goto out;
  if ((bad = check_args (&a)) != NULL)
    status = mp_cli_usage (ctx, bad);
  else
    status = report (&a);
out:
  g_strfreev (a.predicted);
  g_strfreev (a.measured);
  g_strfreev (a.predicted_traces);
  g_strfreev (a.measured_traces);
  g_free (a.html);
  g_free (a.trace);
  return status;
}
