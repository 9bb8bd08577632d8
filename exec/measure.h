/* measure.h - timings to figures (measure.c, measure-json.c), private to exec/. */
#pragma once
#include <json-glib/json-glib.h>
#include "exec/exec.h"
#include "exec/runner.h"

G_BEGIN_DECLS

/* Splits one step of PROG (TIMES per instruction, the step from T_START to T_END). */
void mp_measure_attribute (const MpProgram *prog, const MpInsnTime *times, double t_start,
                           double t_end, MpRankStep *out);

void mp_measure_spread (const double *v, guint n, MpSpread *out);
/* The spreads of the step (*STEP) and of each part (T, MP_PHASE_N) over ST's N steps. */
void mp_measure_spreads (const MpRankStep *st, guint n, MpSpread *step, MpSpread *t);

/* RANKS: N_RANKS arrays of N_STEPS steps. Fills JOB (N_STEPS entries): the job's step s,
 * the slowest rank's, split as time_rank's step s, its bubble taking up the rest. */
void mp_measure_summarize (const MpRankStep *const *ranks, guint n_ranks, guint n_steps,
                           MpRankStep *job, MpJobSummary *out);

/* One rank's record for the gather: its N_STEPS steps, its last step's N_INSNS times and
 * start, its memory. Caller owns. */
GBytes *mp_measure_rank_pack (const MpRankStep *steps, guint n_steps, const MpInsnTime *times,
                              guint n_insns, double last_start, const MpMemStats *mem);
/* The inverse into OUT, whose prog (the rank's program, rebuilt at rank 0) is set: FALSE
 * with MP_ERROR_RUNTIME for a record of other sizes. */
gboolean mp_measure_rank_unpack (GBytes *bytes, guint n_steps, MpExecRank *out,
                                 GError **error);
/* R's job, summary and mem_rank from its ranks. */
void mp_measure_result_summarize (MpExecResult *r);

G_END_DECLS
