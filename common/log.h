/* log.h - rank-aware logging on top of g_log.
 *
 * Each folder sets G_LOG_DOMAIN ("mpplan-model", "mpplan-planner", ...), so
 * G_MESSAGES_DEBUG=mpplan-planner filters by subsystem. Logs go to stderr, prefixed
 * "[rank N]" under MPI; info and debug print on rank 0 only. Results go to stdout. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* Installs the writer. RANK < 0: not under MPI (no prefix). VERBOSE enables debug
 * output of every mpplan domain. Safe to call again (e.g. once MPI knows the rank). */
void mp_log_init (int rank, gboolean verbose);

G_END_DECLS
