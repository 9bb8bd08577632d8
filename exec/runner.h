/* runner.h - the instruction interpreter (runner.c), private to exec/. */
#pragma once
#include "exec/exec-private.h"
#include "exec/watchdog.h"

G_BEGIN_DECLS

typedef struct _MpRunner MpRunner;

/* Runs PROG on EX; CHUNK_LAYERS (N_CHUNKS entries) as the plan's. Borrowed, all three. */
MpRunner *mp_runner_new (MpExec *ex, const MpProgram *prog, const guint *chunk_layers,
                         guint n_chunks);
void mp_runner_free (MpRunner *r);
/* Tells W (borrowed, NULL: none) each instruction as it starts. STALL_AT >= 0: the test
 * hook of a stalled rank, which stops for good before that instruction of every step. */
void mp_runner_watch (MpRunner *r, MpWatchdog *w, gint stall_at);
/* One training step; *T_START, *T_END on the backend clock. FALSE with the failing
 * instruction named. */
gboolean mp_runner_step (MpRunner *r, guint step, double *t_start, double *t_end,
                         GError **error);
const MpInsnTime *mp_runner_times (const MpRunner *r);
double mp_runner_grad_norm (const MpRunner *r);

G_END_DECLS
