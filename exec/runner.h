/* runner.h - the instruction interpreter (runner.c), private to exec/. */
#pragma once
#include "exec/exec-private.h"

G_BEGIN_DECLS

/* Wall-clock record of one instruction in the last step (seconds, backend clock). */
typedef struct {
  double t0, t1;           /* issue and end */
  double tp_s;             /* inside tensor-parallel collectives (FORWARD / BACKWARD) */
  double pp_s;             /* completing a receive whose data had arrived */
  double wait_pp_s;        /* blocked on a receive whose data had not arrived, or on the
                            * other pipeline end before the tied embedding's reduction
                            * (bubble) */
  double wait_dp_s;        /* blocked on a ZeRO-3 gather or a reduction still in flight */
} MpInsnTime;

typedef struct _MpRunner MpRunner;

/* Runs PROG on EX; CHUNK_LAYERS (N_CHUNKS entries) as the plan's. Borrowed, all three. */
MpRunner *mp_runner_new (MpExec *ex, const MpProgram *prog, const guint *chunk_layers,
                         guint n_chunks);
void mp_runner_free (MpRunner *r);
/* One training step; *T_START, *T_END on the backend clock. FALSE with the failing
 * instruction named. */
gboolean mp_runner_step (MpRunner *r, guint step, double *t_start, double *t_end,
                         GError **error);
const MpInsnTime *mp_runner_times (const MpRunner *r);
double mp_runner_grad_norm (const MpRunner *r);

G_END_DECLS
