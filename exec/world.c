/* world.c - the MPI world: join it under mpirun, gather bytes at rank 0. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec.h"
#include "common/error.h"

#include <mpi.h>
#include <string.h>

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

/* A launcher's variable as a number from 0 to G_MAXINT; -1 when unset or not one. */
static int
env_int (const char *name)
{
  const char *text = g_getenv (name);
  guint64 v = 0;
  if (text == NULL || !g_ascii_string_to_unsigned (text, 10, 0, G_MAXINT, &v, NULL))
    return -1;
  return (int) v;
}

/* The rank and size the launcher exported: Open MPI's mpirun, MPICH's Hydra (PMI),
 * Slurm's srun (PMIx or PMI-2). */
static gboolean
launch_rank (int *rank, int *size)
{
  static const char *const pairs[][2] = { { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
                                          { "PMI_RANK", "PMI_SIZE" },
                                          { "SLURM_PROCID", "SLURM_NTASKS" } };
  if (!under_mpirun ())
    return FALSE;
  for (gsize i = 0; i < G_N_ELEMENTS (pairs); i++)
    {
      int r = env_int (pairs[i][0]), n = env_int (pairs[i][1]);
      if (r >= 0 && n > r)
        {
          *rank = r;
          *size = n;
          return TRUE;
        }
    }
  return FALSE;
}

gboolean
mp_world_early_rank (int *rank, int *size)
{
  const char *memory = g_getenv ("OMPI_MCA_memory");
  return (memory == NULL || strcmp (memory, "^patcher") == 0) && launch_rank (rank, size);
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

static MpWorld *
world_of_one (void)
{
  MpWorld *w = g_new0 (MpWorld, 1);
  w->size = 1;
  return w;
}

/* FUNNELED (when asked): the caller runs a thread, which makes no MPI call, while MPI
 * starts or stops. */
static MpWorld *
join (int *argc, char ***argv, gboolean funneled, GError **error)
{
  MpWorld *w = world_of_one ();
  if (!under_mpirun ())
    return w;
  int inited = 0, provided = 0;
  MPI_Initialized (&inited);
  if (!inited)
    {
      int rc = funneled ? MPI_Init_thread (argc, argv, MPI_THREAD_FUNNELED, &provided)
                        : MPI_Init (argc, argv);
      if (!mpi_ok (rc, "MPI_Init", error))
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

MpWorld *
mp_world_join (int *argc, char ***argv, GError **error)
{
  return join (argc, argv, FALSE, error);
}

/* The ranks exchange a few kB once (planner/merge.c): Open MPI's ob1 messaging starts in
 * 0.12 s where probing UCX takes 0.33 s of MPI_Init (Open MPI 4.1.4 on this 2-core machine,
 * median of 3 `mpirun -np 2` runs of an MPI_Init-only program, with and without
 * OMPI_MCA_pml=ob1). The caller runs a thread while MPI_Init runs, and Open MPI's memory
 * patcher rewrites the first instructions of mmap, munmap and the like in place during
 * MPI_Init, under a thread that may be inside them: it is left out (it only feeds the
 * registration cache that mpi_leave_pinned keeps for large RDMA messages, a speed setting;
 * without it Open MPI registers each message, as correct on a real fabric). A pml or
 * memory component the user chose is kept. A world of one (mpirun -np 1) needs no MPI. */
MpWorld *
mp_world_join_light (int *argc, char ***argv, GError **error)
{
  int rank = 0, size = 0;
  if (launch_rank (&rank, &size) && size == 1)
    return world_of_one ();
  if (g_getenv ("OMPI_COMM_WORLD_SIZE") != NULL)
    {
      g_setenv ("OMPI_MCA_pml", "ob1", FALSE);
      g_setenv ("OMPI_MCA_memory", "^patcher", FALSE);
    }
  return join (argc, argv, TRUE, error);
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

#define SHARE_TAG 0x6d70  /* apart from any other message of a run */

/* Sends MINE (N values and the done flag) to every other rank; the requests and
 * buffers wait in REQUESTS and BUFFERS until the end. */
static gboolean
share_send (const MpWorld *world, const double *mine, guint n, GArray *requests,
            GPtrArray *buffers, GError **error)
{
  double *copy = g_memdup2 (mine, (n + 1) * sizeof (double));
  g_ptr_array_add (buffers, copy);
  for (int r = 0; r < world->size; r++)
    if (r != world->rank)
      {
        MPI_Request q;
        if (!mpi_ok (MPI_Isend (copy, (int) n + 1, MPI_DOUBLE, r, SHARE_TAG, MPI_COMM_WORLD, &q),
                     "MPI_Isend", error))
          return FALSE;
        g_array_append_val (requests, q);
      }
  return TRUE;
}

/* Takes every message that has come into LEAST; counts the ranks done in *DONE and
 * sets *STOP once one has failed. */
static gboolean
share_receive (double *least, guint n, int *done, gboolean *stop, GError **error)
{
  g_autofree double *got = g_new (double, n + 1);
  for (;;)
    {
      int flag = 0;
      MPI_Status st;
      if (!mpi_ok (MPI_Iprobe (MPI_ANY_SOURCE, SHARE_TAG, MPI_COMM_WORLD, &flag, &st),
                   "MPI_Iprobe", error))
        return FALSE;
      if (!flag)
        return TRUE;
      if (!mpi_ok (MPI_Recv (got, (int) n + 1, MPI_DOUBLE, st.MPI_SOURCE, SHARE_TAG,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv", error))
        return FALSE;
      for (guint i = 0; i < n; i++)
        least[i] = MIN (least[i], got[i]);
      *done += got[n] != MP_SHARE_WORKING;
      *stop |= got[n] == MP_SHARE_FAILED;
    }
}

gboolean
mp_world_share_least (MpWorld *world, guint n, MpShareState (*read) (double *mine, gpointer data),
                      void (*take) (const double *least, gboolean stop, gpointer data),
                      gpointer data, GError **error)
{
  g_autofree double *mine = g_new (double, n + 1), *sent = g_new (double, n + 1);
  g_autofree double *least = g_new (double, n);
  for (guint i = 0; i < n; i++)
    least[i] = sent[i] = G_MAXDOUBLE;
  g_autoptr(GArray) requests = g_array_new (FALSE, FALSE, sizeof (MPI_Request));
  g_autoptr(GPtrArray) buffers = g_ptr_array_new_with_free_func (g_free);
  gboolean ok = TRUE, finished = FALSE, stop = FALSE;
  int done = 0;
  /* every rank sends its last values once, marked done or failed; it stops when all
   * have. The sends are non-blocking and the receives probe, so a rank done early (or
   * failed) only waits for the others' last message, which each sends once its thread
   * ends: the thread must end soon after TAKE says STOP. */
  while (ok && (!finished || done < world->size - 1))
    {
      if (!finished)
        {
          MpShareState state = read (mine, data);
          finished = state != MP_SHARE_WORKING;
          mine[n] = state;
          if (finished || memcmp (mine, sent, n * sizeof (double)) != 0)
            {
              ok = share_send (world, mine, n, requests, buffers, error);
              memcpy (sent, mine, n * sizeof (double));
            }
        }
      ok = ok && share_receive (least, n, &done, &stop, error);
      if (ok)
        take (least, stop, data);
      if (ok && (!finished || done < world->size - 1))
        g_usleep (1000);
    }
  if (requests->len > 0)
    ok &= mpi_ok (MPI_Waitall ((int) requests->len, (MPI_Request *) requests->data,
                               MPI_STATUSES_IGNORE), "MPI_Waitall", ok ? error : NULL);
  return ok;
}

gboolean
mp_world_agree (MpWorld *world, int status, int *worst, int *first, GError **error)
{
  *worst = status;
  *first = status != 0 ? world->rank : -1;
  if (world->size == 1)
    return TRUE;
  /* one MAX reduction: the worst status, and size - rank of the lowest failed rank */
  int in[2] = { status, status != 0 ? world->size - world->rank : 0 }, out[2] = { 0, 0 };
  if (!mpi_ok (MPI_Allreduce (in, out, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce",
               error))
    return FALSE;
  *worst = out[0];
  *first = out[1] > 0 ? world->size - out[1] : -1;
  return TRUE;
}
