/* world.c - the MPI world: join it under mpirun, gather bytes at rank 0. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec.h"
#include "common/error.h"

#include <mpi.h>

struct _MpWorld {
  gboolean mpi;      /* MPI_Init was called by us */
  int rank, size;
};

/* Set by Open MPI's launcher (and PMIx / Slurm's) in every process it starts. */
static gboolean
under_mpirun (void)
{
  return g_getenv ("OMPI_COMM_WORLD_SIZE") != NULL || g_getenv ("PMIX_RANK") != NULL
         || g_getenv ("PMI_SIZE") != NULL;
}

/* Turns a failed MPI call into a GError naming it. */
static gboolean
mpi_ok (int rc, const char *call, GError **error)
{
  if (rc == MPI_SUCCESS)
    return TRUE;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string (rc, text, &len);
  g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "%s: %.*s", call, len, text);
  return FALSE;
}

MpWorld *
mp_world_join (int *argc, char ***argv, GError **error)
{
  MpWorld *w = g_new0 (MpWorld, 1);
  w->size = 1;
  if (!under_mpirun ())
    return w;
  int inited = 0;
  MPI_Initialized (&inited);
  if (!inited)
    {
      if (!mpi_ok (MPI_Init (argc, argv), "MPI_Init", error))
        {
          g_free (w);
          return NULL;
        }
      w->mpi = TRUE;
    }
  /* Errors come back as codes, so a failure becomes a message rather than an abort. */
  MPI_Comm_set_errhandler (MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank (MPI_COMM_WORLD, &w->rank);
  MPI_Comm_size (MPI_COMM_WORLD, &w->size);
  return w;
}

/* The ranks exchange a few kB once (planner/merge.c): Open MPI's ob1 messaging starts in
 * 0.12 s where probing UCX takes 0.33 s of MPI_Init (Open MPI 4.1.4 on this 2-core machine,
 * median of 3 `mpirun -np 2` runs of an MPI_Init-only program, with and without
 * OMPI_MCA_pml=ob1). A pml the user chose is kept. */
MpWorld *
mp_world_join_light (int *argc, char ***argv, GError **error)
{
  if (g_getenv ("OMPI_COMM_WORLD_SIZE") != NULL)
    g_setenv ("OMPI_MCA_pml", "ob1", FALSE);
  return mp_world_join (argc, argv, error);
}

void
mp_world_leave (MpWorld *world)
{
  if (world == NULL)
    return;
  if (world->mpi)
    MPI_Finalize ();
  g_free (world);
}

int
mp_world_rank (const MpWorld *world)
{
  return world->rank;
}

int
mp_world_size (const MpWorld *world)
{
  return world->size;
}

GPtrArray *
mp_world_gather (MpWorld *world, GBytes *mine, GError **error)
{
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  if (world->size == 1)
    {
      g_ptr_array_add (out, g_bytes_ref (mine));
      return out;
    }
  gsize len = 0;
  const void *data = g_bytes_get_data (mine, &len);
  if (len > G_MAXINT)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "gather: %zu bytes is too much", len);
      g_ptr_array_unref (out);
      return NULL;
    }
  int n = (int) len;
  g_autofree int *lens = world->rank == 0 ? g_new (int, world->size) : NULL;
  g_autofree int *offsets = world->rank == 0 ? g_new (int, world->size) : NULL;
  if (!mpi_ok (MPI_Gather (&n, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather",
               error))
    {
      g_ptr_array_unref (out);
      return NULL;
    }
  gsize total = 0;
  for (int r = 0; world->rank == 0 && r < world->size; r++)
    {
      offsets[r] = (int) total;
      total += (gsize) lens[r];
    }
  g_autofree char *all = world->rank == 0 ? g_malloc (MAX (total, 1u)) : NULL;
  if (!mpi_ok (MPI_Gatherv (data, n, MPI_BYTE, all, lens, offsets, MPI_BYTE, 0, MPI_COMM_WORLD),
               "MPI_Gatherv", error))
    {
      g_ptr_array_unref (out);
      return NULL;
    }
  for (int r = 0; world->rank == 0 && r < world->size; r++)
    g_ptr_array_add (out, g_bytes_new (all + offsets[r], (gsize) lens[r]));
  return out;
}
