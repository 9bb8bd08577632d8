/* report.h - what mpplan shows of a step: the predicted and measured timelines as Chrome
 * Trace Event files (Perfetto, chrome://tracing), and the report that joins a prediction
 * with a measurement (report.c: phases, errors, memory; text and JSON; html.c: the page).
 *
 * Layout (docs/trace.md): one process per simulated rank, pid = world rank, named
 * "predicted rank R (ppS,tpT,dpD)" and sorted by 2R (so that a measured rank, pid 100000 +
 * R, can sort at 2R + 1 beside it); one thread per stream: tid 0 compute, 1 TP comm, 2 DP
 * comm, 3 PP send/recv. X slices in microseconds of integer nanoseconds, so that nesting
 * survives Perfetto's rounding; flows s -> f from each send to its receive. Not here:
 * simulating (costmodel/sim.c), measuring and running
 * processes (exec/, cli/), the planner's search. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>
#include "program/program.h"
#include "costmodel/costmodel.h"   /* MpSimResult */
#include "common/jsonread.h"

G_BEGIN_DECLS

/* What the trace says about where it came from (otherData). Every field may be NULL. */
typedef struct {
  const char *model, *cluster;
  const char *plan_path;       /* the plan file */
  JsonNode *plan;              /* the plan as JSON (borrowed; copied into otherData.plan) */
  double closed_form_step_s;   /* > 0: recorded beside the simulated step */
} MpTraceInfo;

/* The predicted trace of SIM, the simulation of PROGRAMS[N] (the same programs, in the same
 * order). Caller owns (json_node_unref). */
JsonNode *mp_trace_predicted (MpProgram *const *programs, guint n, const MpSimResult *sim,
                              const MpTraceInfo *info);
/* The most slices mp_trace_write_predicted writes (about 300 MB of JSON). */
#define MP_TRACE_MAX_SLICES (1u << 21)
/* The same, written to PATH (common/output.h; "-": stdout). FALSE with MP_ERROR_INPUT
 * when SIM has more than MP_TRACE_MAX_SLICES instructions, MP_ERROR_RUNTIME when the file
 * cannot be written. */
gboolean mp_trace_write_predicted (const char *path, MpProgram *const *programs, guint n,
                                   const MpSimResult *sim, const MpTraceInfo *info,
                                   GError **error);

/* Thread ids of the streams (ECOSYSTEM.md 4.3), and the pid offset of measured ranks. */
enum {
  MP_TRACE_TID_COMPUTE = 0,
  MP_TRACE_TID_TP = 1,
  MP_TRACE_TID_DP = 2,
  MP_TRACE_TID_PP = 3,
  MP_TRACE_MEASURED_PID = 100000,
};

/* ---- building blocks of a trace, shared by the predicted and measured ones ---- */

/* The metadata of a process: its name, sort index, and the names of the four streams. */
void mp_trace_process (JsonBuilder *b, guint pid, const char *name, gint64 sort_index);
/* Opens an X slice over [START_S, END_S] (rounded to whole nanoseconds, so that slices
 * nest exactly) and its "args" object; add args, then close with mp_trace_slice_end. */
void mp_trace_slice_begin (JsonBuilder *b, const char *name, const char *cat, guint pid,
                           guint tid, double start_s, double end_s);
void mp_trace_slice_end (JsonBuilder *b);
/* A counter sample (ph C): KEY = VALUE at TS_S. */
void mp_trace_counter (JsonBuilder *b, const char *name, guint pid, double ts_s,
                       const char *key, double value);

/* The measured trace of a job: RANK_EVENTS[N] (each rank's events, built with the blocks
 * above; NULL entries skipped) in one file, otherData naming PLAN (may be NULL) and the
 * measured STEP_S. Caller owns. */
JsonNode *mp_trace_measured (JsonArray *const *rank_events, guint n, JsonNode *plan,
                             double step_s);
/* One measured rank for the trace (exec/'s figures as plain data, borrowed): its
 * program, each instruction's record in its last measured step and that step's start
 * (the same clock), and its peak memory. */
typedef struct {
  const MpProgram *prog;
  const MpInsnTime *times;
  double t_start;
  double peak_bytes;
} MpTraceRank;

/* The measured trace of RANKS[N] (trace-measured.c; layer names from MODEL) through
 * mp_trace_measured. Caller owns. */
JsonNode *mp_trace_measured_run (const MpTraceRank *ranks, guint n, const MpModel *model,
                                 JsonNode *plan, double step_s);
/* One trace holding a predicted and a measured trace side by side (ECOSYSTEM.md 4.3): the
 * predicted ranks keep pids < 100000, the measured ones pids 100000 + r; both start their
 * step at t = 0. NULL with MP_ERROR_INPUT when either is not a trace of its kind. Caller
 * owns. */
JsonNode *mp_trace_merge (JsonNode *predicted, JsonNode *measured, GError **error);
/* Is TRACE (the file NAME) a trace of its kind (MEASURED: pids >= 100000) that the report
 * can read: traceEvents an array of objects, their pid, tid, ts, dur, ph, name, cat and
 * args of the right types and ranges? FALSE with MP_ERROR_INPUT "NAME: key
 * 'traceEvents[3].pid': ..." otherwise. */
gboolean mp_trace_check (JsonNode *trace, const char *name, gboolean measured, GError **error);

/* ==== predicted against measured (report.c, html.c) =================================== */

/* The columns of a report's time rows: the phases (MpPhase, program.h; the time_s keys),
 * then the step itself. */
enum { MP_REPORT_STEP = MP_PHASE_N, MP_REPORT_N };
/* The columns of its memory rows (memory_bytes keys): peak, then kind K (MpMemKind) at
 * K + 1. */
enum { MP_REPORT_MEM_PEAK, MP_REPORT_MEM_N = MP_MEM_N + 1 };

/* mp_phase_name of a phase column, "step" for MP_REPORT_STEP. */
const char *mp_report_phase_name (guint column);
/* "peak", then mp_mem_kind_name of the kinds. */
const char *mp_report_mem_name (guint column);

/* One measured rank's memory (bytes, memory_bytes keys in order). */
typedef struct {
  guint rank, stage;
  double bytes[MP_REPORT_MEM_N];
} MpReportRankMem;

/* A prediction joined with its measurement. */
typedef struct {
  char *label;                       /* the plan in words: "dp2 tp1 pp1 zero0 2x1 none" */
  JsonNode *plan;                    /* the plan's keys (mp_plan_to_json), or NULL */
  double predicted[MP_REPORT_N];     /* seconds */
  double measured[MP_REPORT_N];      /* medians over the measured steps */
  double measured_min[MP_REPORT_N], measured_max[MP_REPORT_N];
  guint steps, rounds;               /* measured steps (all rounds together), rounds run */
  gboolean has_predicted_mem;        /* the predicted file (or the plan) gave memory */
  double predicted_mem[MP_REPORT_MEM_N];  /* the fullest stage */
  MpReportRankMem *ranks;            /* measured memory of each rank */
  guint n_ranks;
  JsonNode *predicted_trace, *measured_trace;   /* optional (Gantt charts), owned */
} MpReportRun;

/* Joins PREDICTED (`simulate --json`, a plan's JSON, or `plan --json`: its best plan),
 * read as the file PNAME, and MEASURED (measured.json of `mpplan exec`), the file MNAME
 * (report-read.c). Every member is checked: NULL with MP_ERROR_INPUT naming the file and
 * the key ("FILE: key 'time_s.compute': expected a number, got an array"), an unknown
 * schema_version, or a measured file of another plan (world size, stages, sizes).
 * Borrowed; the run copies what it keeps. Caller owns. */
MpReportRun *mp_report_run_new (const char *pname, JsonNode *predicted, const char *mname,
                                JsonNode *measured, GError **error);
/* The same from the files' text, and from the files at PPATH and MPATH (MP_ERROR_IO when
 * one cannot be read). */
MpReportRun *mp_report_run_load_data (const char *pname, const char *pdata, gsize plen,
                                      const char *mname, const char *mdata, gsize mlen,
                                      GError **error);
MpReportRun *mp_report_run_load (const char *ppath, const char *mpath, GError **error);
/* Checks a plan object (mp_plan_to_json's keys, docs/json.md) found at WHERE of R's
 * document, as the readers above do: for a trace's otherData.plan. */
void mp_report_check_plan (MpJsonReader *r, JsonObject *plan, const char *where);
void mp_report_run_free (MpReportRun *run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpReportRun, mp_report_run_free)

/* The measured.json files of N runs (rounds) of one plan as one measured file: the keys
 * of the quietest round (the lowest median step: step_s, time_s and its spread,
 * memory_bytes, ranks, plan, ...), whose index goes to *CHOSEN, with step_s_min /
 * step_s_max the extremes of every round's steps, step_times_s all of them, steps their
 * count, rounds N. Load from elsewhere only slows runs down, so the quietest round is the
 * machine's own speed; the spread still shows every round. Borrowed; caller owns. NULL with
 * MP_ERROR_INPUT when a round has no step_times_s or a bad one ("measured round 2: key
 * 'step_times_s[0]': ..."). */
JsonNode *mp_report_measured_merge (JsonNode *const *rounds, guint n, guint *chosen,
                                    GError **error);

/* predicted / measured - 1; NAN when MEASURED is 0 and PREDICTED is not. */
double mp_report_error (double predicted, double measured);

/* The error of RUN's phase P; NAN when the phase is under 1% of the step both predicted
 * and measured, where a percentage of almost nothing says nothing. */
double mp_report_phase_error (const MpReportRun *run, guint p);

/* Over several runs (MpReportRun*): the median of |step error|, the best plan by each,
 * and whether the ranking matched: the best predicted is the best measured, or its
 * measured median lies within the best measured's spread (at most its maximum). */
typedef struct {
  double median_abs_error;
  guint best_predicted, best_measured;
  gboolean ranking_matches;
} MpReportSummary;
void mp_report_summarize (GPtrArray *runs, MpReportSummary *out);

/* One run as text: the phase table (predicted, measured median and min-max, error) and
 * memory per rank. Caller owns. */
char *mp_report_text (const MpReportRun *run);
/* Several runs as one table (plan, predicted, measured, spread, error, rank by each)
 * and the summary lines. Caller owns. */
char *mp_report_runs_text (GPtrArray *runs);
/* One JSON object: runs (each: plan, predicted {step_s, time_s, memory_bytes}, measured
 * {step_s, step_s_min, step_s_max, steps, rounds, time_s, time_s_min, time_s_max, ranks},
 * error, errors {phase: error, null when negligible}), median_abs_error, ranking_matches, best_predicted,
 * best_measured (docs/json.md). Caller owns. */
JsonNode *mp_report_json (GPtrArray *runs);
/* A self-contained HTML page (inline SVG and CSS, no script, nothing fetched): per run
 * the phase bars, memory, both timelines as Gantt charts on one time axis (runs with
 * traces), and with several runs the scatter of predicted against measured step time.
 * Caller owns. */
char *mp_report_html (GPtrArray *runs, const char *title);

G_END_DECLS
