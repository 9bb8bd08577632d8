/* backend-host.c - the host backend: kernels/cpu (GEMMs through OpenBLAS, one thread per
 * rank), memory from the C heap with every byte accounted, collectives and messages
 * through MPI (non-blocking ones as MPI_I*; Open MPI progresses them inside later MPI
 * calls, which the runner makes by testing its requests between instructions).
 * A world of one never calls MPI, so a plan of one rank runs without mpirun. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/backend.h"
#include "exec/backend-private.h"
#include "common/error.h"
#include "common/units.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  MpBackend base;
  MpMemLedger mem;
} HostBackend;

struct _MpGroup {
  MPI_Comm comm;            /* MPI_COMM_NULL for a group of one */
  int rank, size;
};

struct _MpRequest {
  MPI_Request req;
};

/* ---- memory ------------------------------------------------------------------------ */

static void *
host_alloc (MpBackend *be, gsize bytes, MpMemKind kind, GError **error)
{
  HostBackend *h = (HostBackend *) be;
  gsize asked = MAX (bytes, 1u);
  double after = h->mem.stats.current_total + (double) asked;
  void *p = NULL;
  if ((be->mem_limit_bytes <= 0 || after <= be->mem_limit_bytes)
      && posix_memalign (&p, 64, asked) != 0)
    p = NULL;
  if (p == NULL)
    {
      g_autofree char *a = mp_units_format ((double) asked, MP_UNIT_BYTES);
      g_autofree char *u = mp_units_format (h->mem.stats.current_total, MP_UNIT_BYTES);
      g_autofree char *l = mp_units_format (be->mem_limit_bytes, MP_UNIT_BYTES);
      g_autofree char *held = mp_mem_ledger_describe (&h->mem);
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "out of memory on rank %d: asked %s (%zu bytes) for %s with %s in use%s%s "
                   "(ledger: %s)", be->rank, a, asked, mp_mem_kind_name (kind), u,
                   be->mem_limit_bytes > 0 ? " of the device's " : "",
                   be->mem_limit_bytes > 0 ? l : "", held);
      return NULL;
    }
  memset (p, 0, asked);
  mp_mem_ledger_add (&h->mem, p, asked, kind);
  return p;
}

static void
host_release (MpBackend *be, void *ptr)
{
  HostBackend *h = (HostBackend *) be;
  if (ptr == NULL)
    return;
  g_return_if_fail (mp_mem_ledger_remove (&h->mem, ptr) > 0);
  free (ptr);
}

static void
host_copy (MpBackend *be, void *dst, const void *src, gsize bytes)
{
  if (dst != src)
    memmove (dst, src, bytes);
}

static void
host_copy_2d (MpBackend *be, void *dst, gsize dpitch, const void *src, gsize spitch,
              gsize width, gsize rows)
{
  for (gsize r = 0; r < rows; r++)
    memmove ((char *) dst + r * dpitch, (const char *) src + r * spitch, width);
}

static void
host_zero (MpBackend *be, void *dst, gsize bytes)
{
  memset (dst, 0, bytes);
}

static void
host_get_mem (MpBackend *be, MpMemStats *out)
{
  *out = ((HostBackend *) be)->mem.stats;
}

/* ---- groups ------------------------------------------------------------------------ */

static MpGroup *
host_group_split (MpBackend *be, int color, int key, GError **error)
{
  MpGroup *g = g_new0 (MpGroup, 1);
  g->comm = MPI_COMM_NULL;
  g->size = 1;
  if (be->size == 1)
    return g;
  int rc = MPI_Comm_split (MPI_COMM_WORLD, color, key, &g->comm);
  if (rc != MPI_SUCCESS)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "MPI_Comm_split failed on rank %d",
                   be->rank);
      g_free (g);
      return NULL;
    }
  MPI_Comm_set_errhandler (g->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank (g->comm, &g->rank);
  MPI_Comm_size (g->comm, &g->size);
  return g;
}

static void
host_group_free (MpBackend *be, MpGroup *g)
{
  if (g == NULL)
    return;
  if (g->comm != MPI_COMM_NULL)
    MPI_Comm_free (&g->comm);
  g_free (g);
}

static int
host_group_size (const MpGroup *g)
{
  return g->size;
}

static int
host_group_rank (const MpGroup *g)
{
  return g->rank;
}

/* ---- collectives ------------------------------------------------------------------- */

static gboolean
host_all_reduce (MpBackend *be, MpGroup *g, float *buf, gsize n, MpReduceOp op,
                 GError **error)
{
  if (g->size == 1 || n == 0)
    return TRUE;
  MP_MPI_TRY (MPI_Allreduce (MPI_IN_PLACE, buf, (int) n, MPI_FLOAT,
                             op == MP_REDUCE_MAX ? MPI_MAX : MPI_SUM, g->comm));
  return TRUE;
}

static gboolean
host_all_gather (MpBackend *be, MpGroup *g, float *buf, gsize n, GError **error)
{
  if (g->size == 1 || n == 0)
    return TRUE;
  MP_MPI_TRY (MPI_Allgather (MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int) n, MPI_FLOAT,
                             g->comm));
  return TRUE;
}

static gboolean
host_reduce_scatter (MpBackend *be, MpGroup *g, const float *buf, float *out, gsize n,
                     GError **error)
{
  if (g->size == 1 || n == 0)
    {
      if (out != buf)
        memmove (out, buf, n * sizeof (float));
      return TRUE;
    }
  MP_MPI_TRY (MPI_Reduce_scatter_block (out == buf ? MPI_IN_PLACE : buf, out, (int) n,
                                        MPI_FLOAT, MPI_SUM, g->comm));
  return TRUE;
}

/* MPI_IN_PLACE leaves every rank's block at the start of the buffer (MPI 4.0, sec. 6.10.1,
 * MPI_Reduce_scatter_block: the result is stored in the receive buffer). */
static gsize
host_inplace_offset (int rank, gsize n)
{
  (void) rank, (void) n;
  return 0;
}

static gboolean
host_all_to_all_v (MpBackend *be, MpGroup *g, const float *send, const gsize *send_n,
                   float *recv, const gsize *recv_n, GError **error)
{
  if (g->size == 1)
    {
      memmove (recv, send, recv_n[0] * sizeof (float));
      return TRUE;
    }
  g_autofree int *sc = g_new (int, 4 * (gsize) g->size);
  int *sd = sc + g->size, *rc = sd + g->size, *rd = rc + g->size;
  for (int p = 0, so = 0, ro = 0; p < g->size; p++)
    {
      if (send_n[p] > G_MAXINT || recv_n[p] > G_MAXINT)
        {
          g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "rank %d: an all-to-all block of "
                       "more than %d floats", be->rank, G_MAXINT);
          return FALSE;
        }
      sc[p] = (int) send_n[p], sd[p] = so, so += sc[p];
      rc[p] = (int) recv_n[p], rd[p] = ro, ro += rc[p];
    }
  MP_MPI_TRY (MPI_Alltoallv (send, sc, sd, MPI_FLOAT, recv, rc, rd, MPI_FLOAT, g->comm));
  return TRUE;
}

static MpRequest *
request_new (void)
{
  MpRequest *r = g_new (MpRequest, 1);
  r->req = MPI_REQUEST_NULL;
  return r;
}

/* Starts CALL into a new request stored in *REQ; on failure frees it. */
#define START_REQUEST(call)                                                                 \
  G_STMT_START                                                                              \
  {                                                                                         \
    MpRequest *r_ = request_new ();                                                         \
    int rc_ = (call);                                                                       \
    if (rc_ != MPI_SUCCESS)                                                                 \
      {                                                                                     \
        g_free (r_);                                                                        \
        g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "%s failed on rank %d", #call,      \
                     be->rank);                                                             \
        return FALSE;                                                                       \
      }                                                                                     \
    *req = r_;                                                                              \
  }                                                                                         \
  G_STMT_END

static gboolean
host_iall_reduce (MpBackend *be, MpGroup *g, float *buf, gsize n, MpRequest **req,
                  GError **error)
{
  *req = NULL;
  if (g->size == 1 || n == 0)
    return TRUE;
  START_REQUEST (MPI_Iallreduce (MPI_IN_PLACE, buf, (int) n, MPI_FLOAT, MPI_SUM, g->comm,
                                 &r_->req));
  return TRUE;
}

static gboolean
host_iall_gather (MpBackend *be, MpGroup *g, float *buf, gsize n, MpRequest **req,
                  GError **error)
{
  *req = NULL;
  if (g->size == 1 || n == 0)
    return TRUE;
  START_REQUEST (MPI_Iallgather (MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int) n, MPI_FLOAT,
                                 g->comm, &r_->req));
  return TRUE;
}

static gboolean
host_ireduce_scatter (MpBackend *be, MpGroup *g, const float *buf, float *out, gsize n,
                      MpRequest **req, GError **error)
{
  *req = NULL;
  if (g->size == 1 || n == 0)
    {
      if (out != buf)
        memmove (out, buf, n * sizeof (float));
      return TRUE;
    }
  START_REQUEST (MPI_Ireduce_scatter_block (out == buf ? MPI_IN_PLACE : buf, out, (int) n,
                                            MPI_FLOAT, MPI_SUM, g->comm, &r_->req));
  return TRUE;
}

static gboolean
host_isend (MpBackend *be, const void *buf, gsize bytes, int peer, int tag, MpRequest **req,
            GError **error)
{
  START_REQUEST (MPI_Isend (buf, (int) bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                            &r_->req));
  return TRUE;
}

static gboolean
host_irecv (MpBackend *be, void *buf, gsize bytes, int peer, int tag, MpRequest **req,
            GError **error)
{
  START_REQUEST (MPI_Irecv (buf, (int) bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                            &r_->req));
  return TRUE;
}

static gboolean
host_test (MpBackend *be, MpRequest *req, gboolean *done, GError **error)
{
  *done = TRUE;
  if (req == NULL)
    return TRUE;
  int flag = 0;
  MP_MPI_TRY (MPI_Test (&req->req, &flag, MPI_STATUS_IGNORE));
  *done = flag != 0;
  if (*done)
    g_free (req);
  return TRUE;
}

static gboolean
host_wait (MpBackend *be, MpRequest *req, GError **error)
{
  if (req == NULL)
    return TRUE;
  int rc = MPI_Wait (&req->req, MPI_STATUS_IGNORE);
  g_free (req);
  if (rc != MPI_SUCCESS)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "MPI_Wait failed on rank %d", be->rank);
      return FALSE;
    }
  return TRUE;
}

/* One collective of the calibration sweep (the layouts of backend.h) as its MPI call. */
static int
mpi_coll (MpGroup *g, MpCollKind kind, const float *send, float *recv, gsize count)
{
  int c = (int) count, n = g->size;
  switch (kind)
    {
    case MP_COLL_ALL_REDUCE:
      return MPI_Allreduce (send, recv, c, MPI_FLOAT, MPI_SUM, g->comm);
    case MP_COLL_ALL_GATHER:
      return MPI_Allgather (send, c, MPI_FLOAT, recv, c, MPI_FLOAT, g->comm);
    case MP_COLL_REDUCE_SCATTER:
      return MPI_Reduce_scatter_block (send, recv, c, MPI_FLOAT, MPI_SUM, g->comm);
    case MP_COLL_ALL_TO_ALL:
      return MPI_Alltoall (send, c / n, MPI_FLOAT, recv, c / n, MPI_FLOAT, g->comm);
    case MP_COLL_BROADCAST:   /* MPI_Bcast has no out-of-place form */
      return MPI_Bcast (recv, c, MPI_FLOAT, 0, g->comm);
    case MP_COLL_SEND_RECV:
      return MPI_Sendrecv (send, c, MPI_FLOAT, (g->rank + 1) % n, 7, recv, c, MPI_FLOAT,
                           (g->rank + n - 1) % n, 7, g->comm, MPI_STATUS_IGNORE);
    case MP_COLL_N:
      break;
    }
  return MPI_ERR_OP;
}

static gboolean
host_run_coll (MpBackend *be, MpGroup *g, MpCollKind kind, const float *send, float *recv,
               gsize count, int iters, GError **error)
{
  if (g->comm == MPI_COMM_NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "rank %d: a collective on a group of "
                   "one", be->rank);
      return FALSE;
    }
  for (int i = 0; i < iters; i++)
    MP_MPI_TRY (mpi_coll (g, kind, send, recv, count));
  return TRUE;
}

static gboolean
host_set_gemm_dtype (MpBackend *be, MpDtype dtype, GError **error)
{
  if (dtype == MP_DTYPE_FP32)
    return TRUE;
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "the host backend's GEMM is fp32 only, not %s",
               mp_dtype_name (dtype));
  return FALSE;
}

static double
host_now_s (MpBackend *be)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static void
host_abort (MpBackend *be, int status)
{
  if (be->size > 1)
    MPI_Abort (MPI_COMM_WORLD, status);
  exit (status);
}

static void
host_free (MpBackend *be)
{
  HostBackend *h = (HostBackend *) be;
  if (h == NULL)
    return;
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init (&it, h->mem.live);
  while (g_hash_table_iter_next (&it, &key, NULL))
    free (key);
  mp_mem_ledger_clear (&h->mem);
  g_free (h);
}


static const MpBackendOps host_ops = {
  .name = "host",
  .alloc = host_alloc,
  .release = host_release,
  .copy = host_copy,
  .copy_2d = host_copy_2d,
  .zero = host_zero,
  .upload = host_copy,
  .download = host_copy,
  .kernels = &mp_backend_host_kernels,
  .group_split = host_group_split,
  .group_free = host_group_free,
  .group_size = host_group_size,
  .group_rank = host_group_rank,
  .all_reduce = host_all_reduce,
  .all_gather = host_all_gather,
  .reduce_scatter = host_reduce_scatter,
  .inplace_offset = host_inplace_offset,
  .all_to_all_v = host_all_to_all_v,
  .iall_reduce = host_iall_reduce,
  .iall_gather = host_iall_gather,
  .ireduce_scatter = host_ireduce_scatter,
  .isend = host_isend,
  .irecv = host_irecv,
  .test = host_test,
  .wait = host_wait,
  .run_coll = host_run_coll,
  .run_coll_calls = { [MP_COLL_ALL_REDUCE] = "MPI_Allreduce",
                      [MP_COLL_ALL_GATHER] = "MPI_Allgather",
                      [MP_COLL_REDUCE_SCATTER] = "MPI_Reduce_scatter_block",
                      [MP_COLL_ALL_TO_ALL] = "MPI_Alltoall", [MP_COLL_BROADCAST] = "MPI_Bcast",
                      [MP_COLL_SEND_RECV] = "MPI_Sendrecv" },
  .barrier = mp_mpi_world_barrier,
  .host_all_reduce = mp_mpi_world_all_reduce,
  .host_all_gather = mp_mpi_world_all_gather,
  .set_gemm_dtype = host_set_gemm_dtype,
  .now_s = host_now_s,
  .abort = host_abort,
  .get_mem = host_get_mem,
  .free = host_free,
};

MpBackend *
mp_backend_host_new (int rank, int size)
{
  HostBackend *h = g_new0 (HostBackend, 1);
  h->base.ops = &host_ops;
  h->base.rank = rank;
  h->base.size = size;
  mp_mem_ledger_init (&h->mem);
  mpk_cpu_init_threads (1);
  return &h->base;
}
