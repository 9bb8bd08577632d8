/* backend-mpi.c - host-side exchanges over the MPI world, shared by the host and cuda
 * backends: what calibration times and checks with (a barrier before a timed loop, the
 * slowest rank's time, the count of wrong elements, every rank's host name). */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/backend-private.h"
#include "common/error.h"

#include <mpi.h>
#include <string.h>

gboolean
mp_mpi_error (int rc, const char *call, const char *file, int line, GError **error)
{
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string (rc, text, &len);
  g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "%s:%d %s: %.*s", file, line, call, len,
               text);
  return FALSE;
}

gboolean
mp_mpi_world_barrier (MpBackend *be, GError **error)
{
  if (be->size > 1)
    MP_MPI_TRY (MPI_Barrier (MPI_COMM_WORLD));
  return TRUE;
}

gboolean
mp_mpi_world_all_reduce (MpBackend *be, double *x, gsize n, MpReduceOp op, GError **error)
{
  if (be->size == 1 || n == 0)
    return TRUE;
  MP_MPI_TRY (MPI_Allreduce (MPI_IN_PLACE, x, (int) n, MPI_DOUBLE,
                             op == MP_REDUCE_MAX ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD));
  return TRUE;
}

gboolean
mp_mpi_world_all_gather (MpBackend *be, const void *mine, gsize bytes, void *all,
                         GError **error)
{
  if (be->size == 1)
    {
      memmove (all, mine, bytes);
      return TRUE;
    }
  MP_MPI_TRY (MPI_Allgather (mine, (int) bytes, MPI_BYTE, all, (int) bytes, MPI_BYTE,
                             MPI_COMM_WORLD));
  return TRUE;
}
