/* measure.h - timings to figures (measure.c), private to exec/. */
#pragma once
#include <json-glib/json-glib.h>
#include "exec/runner.h"

G_BEGIN_DECLS

/* One rank's step: its wall time and its phases (program.h; they add up to step_s). */
typedef struct {
  double step_s;
  MpStepTime time;
} MpRankStep;

/* Splits one step of PROG (TIMES per instruction, the step from T_START to T_END). */
void mp_measure_attribute (const MpProgram *prog, const MpInsnTime *times, double t_start,
                           double t_end, MpRankStep *out);

/* The median, smallest and largest of one set of samples (all 0 for none). */
typedef struct {
  double median, min, max;
} MpSpread;

void mp_measure_spread (const double *v, guint n, MpSpread *out);

/* What measured.json reports: each figure's spread over the same measured steps. */
typedef struct {
  guint time_rank;             /* the rank the parts are of: the most compute (median) */
  MpSpread step;               /* the job's steps: in each, the slowest rank's */
  MpSpread t[MP_PHASE_N];      /* time_rank's parts of each job step */
} MpJobSummary;

/* RANKS: N_RANKS arrays of N_STEPS steps. Fills JOB (N_STEPS entries): the job's step s,
 * the slowest rank's, split as time_rank's step s, its bubble taking up the rest. */
void mp_measure_summarize (const MpRankStep *const *ranks, guint n_ranks, guint n_steps,
                           MpRankStep *job, MpJobSummary *out);

/* One rank's figures and trace events as compact JSON text (caller owns). */
char *mp_measure_rank_json (const MpProgram *prog, const MpModel *model,
                            const MpRankStep *steps, guint n_steps,
                            const MpInsnTime *last_times, double last_start,
                            const MpMemStats *mem);
/* measured.json from every rank's text (RANK_TEXTS: GBytes in rank order), and the Chrome
 * trace into *TRACE_OUT when not NULL. LOSSES and GRAD_NORMS: WARMUP + N_STEPS entries.
 * Caller owns. NULL with an error for malformed rank text. */
JsonNode *mp_measure_job_json (GPtrArray *rank_texts, JsonNode *plan_json,
                               const double *losses, const double *grad_norms, guint n_steps,
                               guint warmup, const char *backend, JsonNode **trace_out,
                               GError **error);

G_END_DECLS
