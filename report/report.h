/* report.h - what mpplan shows of a step: for now, the predicted timeline as a Chrome
 * Trace Event file (Perfetto, chrome://tracing).
 *
 * Layout (docs/trace.md): one process per simulated rank, pid = world rank, named
 * "predicted rank R (ppS,tpT,dpD)" and sorted by 2R (so that a measured rank, pid 100000 +
 * R, can sort at 2R + 1 beside it); one thread per stream: tid 0 compute, 1 TP comm, 2 DP
 * comm, 3 PP send/recv. X slices in microseconds of integer nanoseconds, so that nesting
 * survives Perfetto's rounding; flows s -> f from each send to its receive. Not here:
 * simulating (costmodel/sim.c), measuring (exec/), the planner. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>
#include "costmodel/costmodel.h"

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
/* The same, written atomically to PATH ("-": stdout). FALSE with MP_ERROR_IO. */
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

G_END_DECLS
