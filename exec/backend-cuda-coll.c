/* backend-cuda-coll.c - the cuda backend's groups, collectives and messages: an MPI split
 * and one NCCL communicator per group, each group's collectives on its own stream after
 * the compute work that produced their buffers, messages on two world communicators (one
 * per direction), requests as CUDA events, and the calibration sweep's collectives. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/backend-cuda-private.h"
#include "exec/backend-private.h"

#include <mpi.h>

/* ---- groups: an MPI split, then one NCCL communicator per group ------------------------ */

/* A communicator over MPI communicator MCOMM (rank RANK of SIZE): rank 0 makes the
 * unique id, MPI broadcasts it, every rank joins. */
static gboolean
nccl_join (MPI_Comm mcomm, int rank, int size, ncclComm_t *out, GError **error)
{
  ncclUniqueId id;
  if (rank == 0)
    MP_NCCL_TRY (ncclGetUniqueId (&id));
  MP_MPI_TRY (MPI_Bcast (&id, (int) sizeof id, MPI_BYTE, 0, mcomm));
  MP_NCCL_TRY (ncclCommInitRank (out, size, id, rank));
  return TRUE;
}

/* The two world communicators for messages: [0] carries lower -> higher rank, [1] the
 * other way, each on its own stream. */
gboolean
mpcu_p2p_open (CudaBackend *c, GError **error)
{
  for (int d = 0; d < 2; d++)
    {
      if (!nccl_join (MPI_COMM_WORLD, c->base.rank, c->base.size, &c->p2p[d], error))
        return FALSE;
      MP_CUDA_TRY (cudaStreamCreateWithFlags (&c->p2p_stream[d], cudaStreamNonBlocking));
    }
  return TRUE;
}

MpGroup *
mpcu_group_split (MpBackend *be, int color, int key, GError **error)
{
  CudaBackend *c = (CudaBackend *) be;
  MpGroup *g = g_new0 (MpGroup, 1);
  g->size = 1;
  if (be->size > 1)
    {
      MPI_Comm m = MPI_COMM_NULL;
      if (MPI_Comm_split (MPI_COMM_WORLD, color, key, &m) != MPI_SUCCESS)
        {
          g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "MPI_Comm_split failed on rank %d",
                       be->rank);
          g_free (g);
          return NULL;
        }
      MPI_Comm_rank (m, &g->rank);
      MPI_Comm_size (m, &g->size);
      gboolean ok = g->size == 1 || nccl_join (m, g->rank, g->size, &g->comm, error);
      MPI_Comm_free (&m);
      if (!ok)
        {
          g_prefix_error (error, "rank %d: ", be->rank);
          g_free (g);
          return NULL;
        }
    }
  cudaError_t e = cudaStreamCreateWithFlags (&g->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "cudaStreamCreateWithFlags: %s",
                   cudaGetErrorString (e));
      if (g->comm)
        ncclCommDestroy (g->comm);
      g_free (g);
      return NULL;
    }
  g_ptr_array_add (c->groups, g);
  return g;
}

void
mpcu_group_free (MpBackend *be, MpGroup *g)
{
  CudaBackend *c = (CudaBackend *) be;
  if (g == NULL)
    return;
  cudaStreamSynchronize (g->stream);
  if (g->comm)
    ncclCommDestroy (g->comm);
  cudaStreamDestroy (g->stream);
  g_ptr_array_remove_fast (c->groups, g);
  g_free (g);
}

int
mpcu_group_size (const MpGroup *g)
{
  return g->size;
}

int
mpcu_group_rank (const MpGroup *g)
{
  return g->rank;
}

/* ---- collectives ----------------------------------------------------------------------- */

/* STREAM waits for everything queued so far on the compute stream. */
static gboolean
after_compute (CudaBackend *c, cudaStream_t stream, GError **error)
{
  cudaEvent_t ev;
  MP_CUDA_TRY (cudaEventCreateWithFlags (&ev, cudaEventDisableTiming));
  MP_CUDA_TRY (cudaEventRecord (ev, c->compute));
  MP_CUDA_TRY (cudaStreamWaitEvent (stream, ev, 0));
  MP_CUDA_TRY (cudaEventDestroy (ev));
  return TRUE;
}

/* Waits for EV, watching COMM for an asynchronous NCCL error (a peer failed): then the
 * communicator is aborted and the call fails instead of hanging. */
static gboolean
wait_event (CudaBackend *c, cudaEvent_t ev, ncclComm_t comm, GError **error)
{
  for (;;)
    {
      cudaError_t e = cudaEventQuery (ev);
      if (e == cudaSuccess)
        return TRUE;
      if (e != cudaErrorNotReady)
        MP_CUDA_TRY (e);
      if (comm != NULL)
        {
          ncclResult_t r = ncclSuccess;
          ncclCommGetAsyncError (comm, &r);
          if (r != ncclSuccess && r != ncclInProgress)
            {
              ncclCommAbort (comm);
              for (guint i = 0; i < c->groups->len; i++)
                if (((MpGroup *) g_ptr_array_index (c->groups, i))->comm == comm)
                  ((MpGroup *) g_ptr_array_index (c->groups, i))->comm = NULL;
              g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                           "NCCL failed on rank %d (communicator aborted): %s", c->base.rank,
                           ncclGetErrorString (r));
              return FALSE;
            }
        }
      g_usleep (20);
    }
}

typedef enum { COLL_ALL_REDUCE, COLL_ALL_GATHER, COLL_REDUCE_SCATTER } Coll;

/* Queues one collective on G's stream behind the compute stream; *DONE records its end
 * (caller destroys). */
static gboolean
launch (CudaBackend *c, MpGroup *g, Coll kind, const float *buf, float *out, gsize n,
        MpReduceOp op, cudaEvent_t *done, GError **error)
{
  if (!mpcu_check_sticky (c, error) || !after_compute (c, g->stream, error))
    return FALSE;
  if (g->comm == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "rank %d: the group's NCCL communicator was aborted", c->base.rank);
      return FALSE;
    }
  ncclRedOp_t rop = op == MP_REDUCE_MAX ? ncclMax : ncclSum;
  switch (kind)
    {
    case COLL_ALL_REDUCE:
      MP_NCCL_TRY (ncclAllReduce (buf, (void *) buf, n, ncclFloat32, rop, g->comm, g->stream));
      break;
    case COLL_ALL_GATHER:
      MP_NCCL_TRY (ncclAllGather (buf + (gsize) g->rank * n, (void *) buf, n, ncclFloat32,
                                  g->comm, g->stream));
      break;
    case COLL_REDUCE_SCATTER:
      MP_NCCL_TRY (ncclReduceScatter (buf, out, n, ncclFloat32, ncclSum, g->comm, g->stream));
      break;
    }
  MP_CUDA_TRY (cudaEventCreateWithFlags (done, cudaEventDisableTiming));
  MP_CUDA_TRY (cudaEventRecord (*done, g->stream));
  return TRUE;
}

/* Blocking; BUF may be host memory (staged through the device). */
static gboolean
blocking (CudaBackend *c, MpGroup *g, Coll kind, float *buf, float *out, gsize n, MpReduceOp op,
          GError **error)
{
  gsize total = kind == COLL_ALL_REDUCE ? n : n * (gsize) g->size;
  if (g->size == 1 || n == 0)
    {
      if (kind == COLL_REDUCE_SCATTER && out != buf)
        mpcu_copy (&c->base, out, buf, n * sizeof (float));
      return mpcu_check_sticky (c, error);
    }
  float *dbuf = buf, *dout = out;
  gboolean host = !mpcu_is_device (buf);
  if (host)
    {
      gsize need = (total + (kind == COLL_REDUCE_SCATTER ? n : 0)) * sizeof (float);
      if (!mpcu_ensure (c, &c->stage, &c->stage_bytes, need, error))
        return FALSE;
      dbuf = c->stage;
      dout = dbuf + total;
      MP_CUDA_TRY (cudaMemcpyAsync (dbuf, buf, total * sizeof (float), cudaMemcpyHostToDevice,
                                    c->compute));
    }
  cudaEvent_t done;
  if (!launch (c, g, kind, dbuf, dout, n, op, &done, error))
    return FALSE;
  gboolean ok = wait_event (c, done, g->comm, error);
  cudaEventDestroy (done);
  if (!ok)
    return FALSE;
  if (host)
    {
      float *src = kind == COLL_REDUCE_SCATTER ? dout : dbuf;
      float *dst = kind == COLL_REDUCE_SCATTER ? out : buf;
      gsize m = kind == COLL_REDUCE_SCATTER ? n : total;
      MP_CUDA_TRY (cudaMemcpy (dst, src, m * sizeof (float), cudaMemcpyDeviceToHost));
    }
  return TRUE;   /* the host waited for the collective: later kernels see its result */
}

gboolean
mpcu_all_reduce (MpBackend *be, MpGroup *g, float *buf, gsize n, MpReduceOp op, GError **error)
{
  return blocking ((CudaBackend *) be, g, COLL_ALL_REDUCE, buf, NULL, n, op, error);
}

gboolean
mpcu_all_gather (MpBackend *be, MpGroup *g, float *buf, gsize n, GError **error)
{
  return blocking ((CudaBackend *) be, g, COLL_ALL_GATHER, buf, NULL, n, MP_REDUCE_SUM, error);
}

/* NCCL reduces in place when the output is the rank's own block of the input ("In-place
 * operations", NCCL user guide: recvbuff == sendbuff + rank * recvcount). */
gsize
mpcu_inplace_offset (int rank, gsize n)
{
  return (gsize) rank * n;
}

gboolean
mpcu_reduce_scatter (MpBackend *be, MpGroup *g, const float *buf, float *out, gsize n,
                     GError **error)
{
  return blocking ((CudaBackend *) be, g, COLL_REDUCE_SCATTER, (float *) buf, out, n,
                   MP_REDUCE_SUM, error);
}

static gboolean
start (CudaBackend *c, MpGroup *g, Coll kind, const float *buf, float *out, gsize n,
       MpRequest **req, GError **error)
{
  *req = NULL;
  if (g->size == 1 || n == 0)
    {
      if (kind == COLL_REDUCE_SCATTER && out != buf)
        mpcu_copy (&c->base, out, buf, n * sizeof (float));
      return mpcu_check_sticky (c, error);
    }
  if (!mpcu_is_device (buf))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "rank %d: a non-blocking collective on host memory (the cuda backend "
                   "reduces device buffers only)", c->base.rank);
      return FALSE;
    }
  MpRequest *r = g_new0 (MpRequest, 1);
  if (!launch (c, g, kind, buf, out, n, MP_REDUCE_SUM, &r->done[0], error))
    {
      g_free (r);
      return FALSE;
    }
  r->n = 1;
  r->comm[0] = g->comm;
  *req = r;
  return TRUE;
}

gboolean
mpcu_iall_reduce (MpBackend *be, MpGroup *g, float *buf, gsize n, MpRequest **req,
                  GError **error)
{
  return start ((CudaBackend *) be, g, COLL_ALL_REDUCE, buf, NULL, n, req, error);
}

gboolean
mpcu_iall_gather (MpBackend *be, MpGroup *g, float *buf, gsize n, MpRequest **req,
                  GError **error)
{
  return start ((CudaBackend *) be, g, COLL_ALL_GATHER, buf, NULL, n, req, error);
}

gboolean
mpcu_ireduce_scatter (MpBackend *be, MpGroup *g, const float *buf, float *out, gsize n,
                      MpRequest **req, GError **error)
{
  return start ((CudaBackend *) be, g, COLL_REDUCE_SCATTER, buf, out, n, req, error);
}

/* Messages: ncclSend / ncclRecv on the direction's world communicator. NCCL has no tags:
 * messages between a pair arrive in the order they were posted (as the programs post
 * them: MPI's non-overtaking order). */

/* The direction of a message from rank FROM to rank TO: [0] lower -> higher. */
static int
direction (int from, int to)
{
  return from < to ? 0 : 1;
}

/* Whether a message on direction DIR can leave or land in BUF; then DIR's stream waits
 * for the compute work queued so far (which produced BUF, or last read it). */
static gboolean
p2p_ready (CudaBackend *c, int dir, const void *buf, GError **error)
{
  int me = c->base.rank;
  if (c->p2p[dir] == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "rank %d: no NCCL world communicator for messages (a world of one?)", me);
      return FALSE;
    }
  if (!mpcu_is_device (buf))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "rank %d: a message from host memory (the cuda backend sends device "
                   "buffers only)", me);
      return FALSE;
    }
  return after_compute (c, c->p2p_stream[dir], error);
}

/* R's next event, recorded on direction DIR's stream now. */
static gboolean
p2p_record (CudaBackend *c, MpRequest *r, int dir, GError **error)
{
  int i = r->n;
  MP_CUDA_TRY (cudaEventCreateWithFlags (&r->done[i], cudaEventDisableTiming));
  r->n++;
  r->comm[i] = c->p2p[dir];
  MP_CUDA_TRY (cudaEventRecord (r->done[i], c->p2p_stream[dir]));
  return TRUE;
}

static void
request_free (MpRequest *r)
{
  for (int i = 0; i < r->n; i++)
    cudaEventDestroy (r->done[i]);
  g_free (r);
}

/* A request for what was queued on directions DIRS (N of them) just now: *REQ, or FALSE
 * (nothing left allocated). */
static gboolean
p2p_request (CudaBackend *c, const int *dirs, int n, MpRequest **req, GError **error)
{
  MpRequest *r = g_new0 (MpRequest, 1);
  for (int i = 0; i < n; i++)
    if (!p2p_record (c, r, dirs[i], error))
      {
        request_free (r);
        return FALSE;
      }
  *req = r;
  return TRUE;
}

static gboolean
p2p (CudaBackend *c, gboolean send, void *buf, gsize bytes, int peer, MpRequest **req,
     GError **error)
{
  *req = NULL;
  int me = c->base.rank;
  int dir = send ? direction (me, peer) : direction (peer, me);
  if (!mpcu_check_sticky (c, error) || !p2p_ready (c, dir, buf, error))
    return FALSE;
  cudaStream_t st = c->p2p_stream[dir];
  if (send)
    MP_NCCL_TRY (ncclSend (buf, bytes, ncclChar, peer, c->p2p[dir], st));
  else
    MP_NCCL_TRY (ncclRecv (buf, bytes, ncclChar, peer, c->p2p[dir], st));
  return p2p_request (c, &dir, 1, req, error);
}

gboolean
mpcu_isend (MpBackend *be, const void *buf, gsize bytes, int peer, int tag, MpRequest **req,
            GError **error)
{
  return p2p ((CudaBackend *) be, TRUE, (void *) buf, bytes, peer, req, error);
}

gboolean
mpcu_irecv (MpBackend *be, void *buf, gsize bytes, int peer, int tag, MpRequest **req,
            GError **error)
{
  return p2p ((CudaBackend *) be, FALSE, buf, bytes, peer, req, error);
}

/* A ring's shift (context parallelism): SEND to TO, RECV from FROM. Where both travel on
 * one direction's communicator (every rank of a ring but the two at its wrap), they are
 * one NCCL group on its stream: posted one after the other they would run one after the
 * other, and the ring's ranks would pass the block along one at a time instead of all at
 * once. At the wrap the two directions' streams run them side by side anyway; there the
 * lower -> higher direction's goes first on every rank, because NCCL connects a pair on
 * its first message by a blocking exchange between the two ranks on that communicator:
 * posted the other way round, the two ranks of a cp = 2 ring would each wait in the
 * communicator the other has not reached. */
gboolean
mpcu_isendrecv (MpBackend *be, const void *send, int to, void *recv, int from, gsize bytes,
                int tag, MpRequest **req, GError **error)
{
  CudaBackend *c = (CudaBackend *) be;
  *req = NULL;
  int dirs[2] = { direction (be->rank, to), direction (from, be->rank) };
  if (!mpcu_check_sticky (c, error) || !p2p_ready (c, dirs[0], send, error)
      || !p2p_ready (c, dirs[1], recv, error))
    return FALSE;
  ncclComm_t sc = c->p2p[dirs[0]], rc = c->p2p[dirs[1]];
  cudaStream_t ss = c->p2p_stream[dirs[0]], rs = c->p2p_stream[dirs[1]];
  if (dirs[0] != dirs[1] && dirs[0] == 0)
    {
      MP_NCCL_TRY (ncclSend (send, bytes, ncclChar, to, sc, ss));
      MP_NCCL_TRY (ncclRecv (recv, bytes, ncclChar, from, rc, rs));
    }
  else if (dirs[0] != dirs[1])
    {
      MP_NCCL_TRY (ncclRecv (recv, bytes, ncclChar, from, rc, rs));
      MP_NCCL_TRY (ncclSend (send, bytes, ncclChar, to, sc, ss));
    }
  if (dirs[0] != dirs[1])
    return p2p_request (c, dirs, 2, req, error);
  MP_NCCL_TRY (ncclGroupStart ());
  ncclResult_t r = ncclSend (send, bytes, ncclChar, to, sc, ss);
  if (r == ncclSuccess || r == ncclInProgress)
    r = ncclRecv (recv, bytes, ncclChar, from, rc, rs);
  ncclResult_t end = ncclGroupEnd ();   /* always: an open group would poison the next call */
  MP_NCCL_TRY (r);
  MP_NCCL_TRY (end);
  return p2p_request (c, dirs, 1, req, error);
}

/* Fails (aborting the communicator) if one of R's communicators has an asynchronous
 * error (a peer died); *PENDING: whether some event of R has not completed. */
static gboolean
request_poll (CudaBackend *c, MpRequest *r, gboolean *pending, GError **error)
{
  *pending = FALSE;
  for (int i = 0; i < r->n; i++)
    {
      cudaError_t e = cudaEventQuery (r->done[i]);
      if (e == cudaSuccess)
        continue;
      if (e != cudaErrorNotReady)
        MP_CUDA_TRY (e);
      *pending = TRUE;
      ncclResult_t nr = ncclSuccess;
      if (r->comm[i])
        ncclCommGetAsyncError (r->comm[i], &nr);
      if (nr != ncclSuccess && nr != ncclInProgress)
        return wait_event (c, r->done[i], r->comm[i], error); /* aborts, fails */
    }
  return TRUE;
}

gboolean
mpcu_test (MpBackend *be, MpRequest *req, gboolean *done, GError **error)
{
  CudaBackend *c = (CudaBackend *) be;
  *done = TRUE;
  if (req == NULL)
    return mpcu_check_sticky (c, error);
  gboolean pending = FALSE;
  if (!request_poll (c, req, &pending, error))
    return FALSE;
  *done = !pending;
  if (*done)
    request_free (req);
  return TRUE;
}

/* The compute stream waits for the request; the host does not (the data is consumed by
 * later kernels, or downloaded, which synchronises). */
gboolean
mpcu_wait (MpBackend *be, MpRequest *req, GError **error)
{
  CudaBackend *c = (CudaBackend *) be;
  if (req == NULL)
    return mpcu_check_sticky (c, error);
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < req->n && e == cudaSuccess; i++)
    e = cudaStreamWaitEvent (c->compute, req->done[i], 0);
  request_free (req);
  MP_CUDA_TRY (e);
  return mpcu_check_sticky (c, error);
}

/* Queues BLOCKS sends of PER floats (block p of SEND to peer TO + p) and as many receives
 * (block p of RECV from FROM + p), peers modulo the group, as one NCCL group so that no
 * order of posting can deadlock. All-to-all: TO = FROM = 0, BLOCKS = size; a ring:
 * TO = rank + 1, FROM = rank - 1, BLOCKS = 1. */
static gboolean
exchange (MpGroup *g, const float *send, float *recv, gsize per, int blocks, int to,
          int from, GError **error)
{
  int n = g->size;
  MP_NCCL_TRY (ncclGroupStart ());
  ncclResult_t r = ncclSuccess;
  for (int p = 0; p < blocks && (r == ncclSuccess || r == ncclInProgress); p++)
    {
      r = ncclSend (send + (gsize) p * per, per, ncclFloat32, (to + p) % n, g->comm, g->stream);
      if (r == ncclSuccess || r == ncclInProgress)
        r = ncclRecv (recv + (gsize) p * per, per, ncclFloat32, ((from + p) % n + n) % n,
                      g->comm, g->stream);
    }
  ncclResult_t end = ncclGroupEnd ();   /* always: an open group would poison the next call */
  MP_NCCL_TRY (r);
  MP_NCCL_TRY (end);
  return TRUE;
}

/* Blocks until the work queued on G's stream so far is done (wait_event's polling). */
static gboolean
wait_stream (CudaBackend *c, MpGroup *g, GError **error)
{
  cudaEvent_t done;
  MP_CUDA_TRY (cudaEventCreateWithFlags (&done, cudaEventDisableTiming));
  cudaError_t e = cudaEventRecord (done, g->stream);
  gboolean ok = e == cudaSuccess ? wait_event (c, done, g->comm, error) : FALSE;
  if (e != cudaSuccess)
    g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "cudaEventRecord: %s",
                 cudaGetErrorString (e));
  cudaEventDestroy (done);
  return ok;
}

/* All-to-all with per-peer sizes: one NCCL group of a send and a receive per peer on G's
 * stream behind the compute stream (device buffers), waited for. */
gboolean
mpcu_all_to_all_v (MpBackend *be, MpGroup *g, const float *send, const gsize *send_n,
                   float *recv, const gsize *recv_n, GError **error)
{
  CudaBackend *c = (CudaBackend *) be;
  if (g->size == 1)
    {
      mpcu_copy (be, recv, send, recv_n[0] * sizeof (float));
      return mpcu_check_sticky (c, error);
    }
  if (!mpcu_check_sticky (c, error) || !after_compute (c, g->stream, error))
    return FALSE;
  if (g->comm == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "rank %d: the group's NCCL communicator was aborted", be->rank);
      return FALSE;
    }
  MP_NCCL_TRY (ncclGroupStart ());
  ncclResult_t r = ncclSuccess;
  gsize so = 0, ro = 0;
  for (int p = 0; p < g->size && (r == ncclSuccess || r == ncclInProgress); p++)
    {
      if (send_n[p] > 0)
        r = ncclSend (send + so, send_n[p], ncclFloat32, p, g->comm, g->stream);
      if (recv_n[p] > 0 && (r == ncclSuccess || r == ncclInProgress))
        r = ncclRecv (recv + ro, recv_n[p], ncclFloat32, p, g->comm, g->stream);
      so += send_n[p];
      ro += recv_n[p];
    }
  ncclResult_t end = ncclGroupEnd ();   /* always: an open group would poison the next call */
  MP_NCCL_TRY (r);
  MP_NCCL_TRY (end);
  return wait_stream (c, g, error);
}

/* One collective of the calibration sweep on G's stream (layouts: backend.h). */
static gboolean
enqueue_coll (MpGroup *g, MpCollKind kind, const float *send, float *recv, gsize count,
              GError **error)
{
  switch (kind)
    {
    case MP_COLL_ALL_REDUCE:
      MP_NCCL_TRY (ncclAllReduce (send, recv, count, ncclFloat32, ncclSum, g->comm, g->stream));
      return TRUE;
    case MP_COLL_ALL_GATHER:
      MP_NCCL_TRY (ncclAllGather (send, recv, count, ncclFloat32, g->comm, g->stream));
      return TRUE;
    case MP_COLL_REDUCE_SCATTER:
      MP_NCCL_TRY (ncclReduceScatter (send, recv, count, ncclFloat32, ncclSum, g->comm,
                                      g->stream));
      return TRUE;
    case MP_COLL_ALL_TO_ALL:
      /* Grouped sends and receives, as nccl-tests' alltoall_perf (older NCCLs have no
       * ncclAlltoAll). Block p goes to peer p. */
      return exchange (g, send, recv, count / (gsize) g->size, g->size, 0, 0, error);
    case MP_COLL_BROADCAST:
      MP_NCCL_TRY (ncclBroadcast (recv, recv, count, ncclFloat32, 0, g->comm, g->stream));
      return TRUE;
    case MP_COLL_SEND_RECV:
      return exchange (g, send, recv, count, 1, g->rank + 1, g->rank - 1, error);
    case MP_COLL_N:
      break;
    }
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "no such collective (%d)", (int) kind);
  return FALSE;
}

gboolean
mpcu_run_coll (MpBackend *be, MpGroup *g, MpCollKind kind, const float *send, float *recv,
               gsize count, int iters, GError **error)
{
  CudaBackend *c = (CudaBackend *) be;
  if (!mpcu_check_sticky (c, error) || !after_compute (c, g->stream, error))
    return FALSE;
  if (g->comm == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "rank %d: no NCCL communicator (a group "
                   "of one, or aborted)", be->rank);
      return FALSE;
    }
  for (int i = 0; i < iters; i++)
    if (!enqueue_coll (g, kind, send, recv, count, error))
      return FALSE;
  return wait_stream (c, g, error);
}

