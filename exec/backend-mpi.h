/* backend-mpi.h - the host-side exchanges over the MPI world that every backend offers
 * alike (backend-mpi.c): the barrier, reductions of host doubles and the all-gather of
 * host bytes of MpBackendOps. Private to exec/'s backends; no MPI type appears here. */
#pragma once
#include "exec/backend.h"

G_BEGIN_DECLS

/* MpBackendOps.barrier, .host_all_reduce and .host_all_gather on MPI_COMM_WORLD (a world
 * of one, BE->size 1, never calls MPI). */
gboolean mp_mpi_world_barrier (MpBackend *be, GError **error);
gboolean mp_mpi_world_all_reduce (MpBackend *be, double *x, gsize n, MpReduceOp op,
                                  GError **error);
gboolean mp_mpi_world_all_gather (MpBackend *be, const void *mine, gsize bytes, void *all,
                                  GError **error);

G_END_DECLS
