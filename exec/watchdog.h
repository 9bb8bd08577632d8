/* watchdog.h - the stall watchdog of `mpplan exec` (watchdog.c), private to exec/. */
#pragma once
#include <glib.h>
#include "program/program.h"

G_BEGIN_DECLS

typedef struct _MpWatchdog MpWatchdog;

/* A thread that ends this rank (exit 1) when it spends more than TIMEOUT_S in one
 * instruction or one exchange of the driver, after printing where it was waiting.
 * TIMEOUT_S <= 0: no watchdog (returns NULL; every call below takes NULL). */
MpWatchdog *mp_watchdog_new (int rank, double timeout_s);
void mp_watchdog_free (MpWatchdog *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpWatchdog, mp_watchdog_free)
/* This rank now runs instruction INDEX (IN) of its program in STEP; the clock restarts. */
void mp_watchdog_insn (MpWatchdog *w, guint step, guint index, const MpInsn *in);
/* This rank now waits in WHAT (a static string) of STEP; the clock restarts. */
void mp_watchdog_enter (MpWatchdog *w, guint step, const char *what);
/* Nothing to watch (this rank computes alone, e.g. the --check reference run). */
void mp_watchdog_pause (MpWatchdog *w);

G_END_DECLS
