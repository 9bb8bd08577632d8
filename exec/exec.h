/* exec.h - running things on many processes: the MPI world (and, in later issues, the
 * backends that execute plans). The only module besides kernels/ that knows MPI exists;
 * no MPI type appears in this header.
 *
 * Processes are started the way HPC users start them, `mpirun -np N mpplan ...`; a
 * process started without mpirun is a world of one and never touches MPI. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

typedef struct _MpWorld MpWorld;

/* Joins the MPI world when this process was started by mpirun (MPI_Init), else makes a
 * world of one. Caller owns; NULL with MP_ERROR_RUNTIME if MPI fails to start. */
MpWorld *mp_world_join (int *argc, char ***argv, GError **error);
/* Leaves the world (MPI_Finalize when it was joined). NULL-safe. */
void mp_world_leave (MpWorld *world);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpWorld, mp_world_leave)

int mp_world_rank (const MpWorld *world);
int mp_world_size (const MpWorld *world);

/* Gathers every rank's MINE at rank 0. On rank 0 returns a new array of the world's
 * GBytes in rank order (caller owns); on other ranks an empty array. NULL with
 * MP_ERROR_RUNTIME on an MPI failure. Collective: every rank must call it. */
GPtrArray *mp_world_gather (MpWorld *world, GBytes *mine, GError **error);

G_END_DECLS
