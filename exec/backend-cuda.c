/* backend-cuda.c - the cuda backend: kernels/cuda launchers and cuBLAS GEMMs on one GPU
 * per rank (device = local rank % devices), memory from one cudaMalloc arena with every
 * byte accounted (so peak memory is exact), NCCL for every collective and message, MPI
 * only to broadcast each communicator's ncclUniqueId. Plain C compiled by gcc against
 * cuda_runtime.h, cublas_v2.h and nccl.h; the .cu launchers never see GLib.
 *
 * Streams: kernels run in order on one compute stream; each group's collectives run on
 * that group's own stream (and messages on one stream per direction, lower -> higher rank
 * and back, so a pair exchanging both ways cannot deadlock), after an event that orders
 * them behind the compute work that produced their buffers. Waiting for a request makes
 * the compute stream wait for its event; the host does not block. now_s synchronises the
 * compute stream first, so the runner's per-instruction times are device times.
 *
 * Kernel errors: MpKernelOps has no error argument (the host kernels cannot fail), so a
 * failed launch is kept as a sticky error of the process's one backend (`current`: one
 * rank per process, one backend per rank) and returned by the next call that takes a
 * GError (a collective, test, wait, alloc) - the step fails there, naming the launcher.
 *
 * Host pointers: the executor passes token ids from host memory and reduces a few host
 * floats (loss, gradient norm); such pointers are detected with cudaPointerGetAttributes
 * and staged through device scratch. An NCCL failure (or a peer that died) aborts the
 * communicator (ncclCommAbort) and fails the call instead of hanging. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/backend.h"
#include "exec/backend-mpi.h"
#include "common/error.h"
#include "common/units.h"
#include "kernels/cuda/kernels-cuda.h"

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <nccl.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Turn a foreign failure into a GError naming the call; they assume a function returning
 * gboolean with `error` in scope (STYLE.md's MP_*_TRY pattern). */
#define MP_CUDA_TRY(call)                                                                   \
  G_STMT_START                                                                              \
  {                                                                                         \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess)                                                                  \
      {                                                                                     \
        g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "%s:%d %s: %s", __FILE__, __LINE__, \
                     #call, cudaGetErrorString (e_));                                       \
        return FALSE;                                                                       \
      }                                                                                     \
  }                                                                                         \
  G_STMT_END
#define MP_NCCL_TRY(call)                                                                   \
  G_STMT_START                                                                              \
  {                                                                                         \
    ncclResult_t r_ = (call);                                                               \
    if (r_ != ncclSuccess && r_ != ncclInProgress)                                          \
      {                                                                                     \
        g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "%s:%d %s: %s", __FILE__, __LINE__, \
                     #call, ncclGetErrorString (r_));                                       \
        return FALSE;                                                                       \
      }                                                                                     \
  }                                                                                         \
  G_STMT_END
#define MP_MPI_TRY(call)                                                                    \
  G_STMT_START                                                                              \
  {                                                                                         \
    int rc_ = (call);                                                                       \
    if (rc_ != MPI_SUCCESS)                                                                 \
      {                                                                                     \
        g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "%s:%d %s failed (%d)", __FILE__,    \
                     __LINE__, #call, rc_);                                                 \
        return FALSE;                                                                       \
      }                                                                                     \
  }                                                                                         \
  G_STMT_END

#define ALIGN 256

typedef struct {
  gsize off, bytes;
} Block;

struct _MpGroup {
  ncclComm_t comm;          /* NULL for a group of one */
  cudaStream_t stream;      /* this group's communication stream */
  int rank, size;
};

struct _MpRequest {
  cudaEvent_t done;
  ncclComm_t comm;          /* checked for asynchronous errors while waiting */
};

typedef struct {
  MpBackend base;
  int device, precision;    /* precision: 0 fp32 GEMMs, 1 bf16 GEMM inputs */
  cudaStream_t compute;
  cublasHandle_t blas;
  char *arena;              /* one cudaMalloc, carved by a first-fit free list */
  gsize arena_bytes;
  GArray *free_blocks;      /* Block, sorted by offset, coalesced */
  MpMemLedger mem;          /* what each carved block holds; the peak */
  void *scratch;            /* bf16 GEMM operands, grown on demand (MP_MEM_OTHER) */
  gsize scratch_bytes;
  void *stage;              /* host tokens / floats staged to the device */
  gsize stage_bytes;
  double *d_sumsq;
  ncclComm_t p2p[2];        /* world communicators: [0] lower -> higher, [1] higher -> lower */
  cudaStream_t p2p_stream[2];
  GPtrArray *groups;        /* MpGroup* alive, for abort */
  GError *sticky;           /* first failed kernel launch */
} CudaBackend;

static CudaBackend *current;

/* ---- errors -------------------------------------------------------------------------- */

static void
note (cudaError_t e, const char *launcher)
{
  if (e != cudaSuccess && current != NULL && current->sticky == NULL)
    g_set_error (&current->sticky, MP_ERROR, MP_ERROR_RUNTIME, "%s on rank %d: %s", launcher,
                 current->base.rank, cudaGetErrorString (e));
}

static gboolean
check_sticky (CudaBackend *c, GError **error)
{
  if (c->sticky == NULL)
    return TRUE;
  g_propagate_error (error, g_error_copy (c->sticky));
  return FALSE;
}

/* ---- memory: the arena ----------------------------------------------------------------- */

static gboolean
arena_open (CudaBackend *c, GError **error)
{
  size_t free_b = 0, total_b = 0;
  MP_CUDA_TRY (cudaMemGetInfo (&free_b, &total_b));
  gsize reserve = (gsize) 1 << 30; /* cuBLAS and NCCL workspaces, the CUDA context */
  gsize bytes = free_b > 2 * reserve ? free_b - reserve : free_b / 2;
  if (c->base.mem_limit_bytes > 0 && (double) bytes > c->base.mem_limit_bytes)
    bytes = (gsize) c->base.mem_limit_bytes;
  bytes &= ~(gsize) (ALIGN - 1);
  void *p = NULL;
  MP_CUDA_TRY (cudaMalloc (&p, bytes));
  c->arena = p;
  c->arena_bytes = bytes;
  Block all = { 0, bytes };
  g_array_append_val (c->free_blocks, all);
  return TRUE;
}

static void *
cuda_alloc (MpBackend *be, gsize bytes, MpMemKind kind, GError **error)
{
  CudaBackend *c = (CudaBackend *) be;
  if (!check_sticky (c, error))
    return NULL;
  if (c->arena == NULL && !arena_open (c, error))
    return NULL;
  gsize asked = (MAX (bytes, 1u) + ALIGN - 1) & ~(gsize) (ALIGN - 1);
  double after = c->mem.stats.current_total + (double) asked;
  guint i = 0;
  if (be->mem_limit_bytes <= 0 || after <= be->mem_limit_bytes)
    for (; i < c->free_blocks->len; i++)
      if (g_array_index (c->free_blocks, Block, i).bytes >= asked)
        break;
  if (i >= c->free_blocks->len)
    {
      g_autofree char *a = mp_units_format ((double) asked, MP_UNIT_BYTES);
      g_autofree char *u = mp_units_format (c->mem.stats.current_total, MP_UNIT_BYTES);
      g_autofree char *l = mp_units_format ((double) c->arena_bytes, MP_UNIT_BYTES);
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "out of device memory on rank %d (GPU %d): asked %s (%zu bytes) for %s "
                   "with %s in use of an arena of %s", be->rank, c->device, a, asked,
                   mp_mem_kind_name (kind), u, l);
      return NULL;
    }
  Block *b = &g_array_index (c->free_blocks, Block, i);
  char *p = c->arena + b->off;
  b->off += asked;
  b->bytes -= asked;
  if (b->bytes == 0)
    g_array_remove_index (c->free_blocks, i);
  cudaError_t e = cudaMemsetAsync (p, 0, asked, c->compute);
  if (e != cudaSuccess)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "cudaMemsetAsync: %s",
                   cudaGetErrorString (e));
      return NULL;
    }
  mp_mem_ledger_add (&c->mem, p, asked, kind);
  return p;
}

/* Returns [ptr, ptr+bytes) to the free list, merging with its neighbours. Reuse is safe
 * for the compute stream (stream order); buffers a collective still reads must have been
 * waited for first, as on the host backend. */
static void
cuda_release (MpBackend *be, void *ptr)
{
  CudaBackend *c = (CudaBackend *) be;
  if (ptr == NULL)
    return;
  gsize bytes = mp_mem_ledger_remove (&c->mem, ptr);
  g_return_if_fail (bytes > 0);
  Block nb = { (gsize) ((char *) ptr - c->arena), bytes };
  guint i = 0;
  while (i < c->free_blocks->len && g_array_index (c->free_blocks, Block, i).off < nb.off)
    i++;
  g_array_insert_val (c->free_blocks, i, nb);
  if (i + 1 < c->free_blocks->len)
    {
      Block *x = &g_array_index (c->free_blocks, Block, i), *y = x + 1;
      if (x->off + x->bytes == y->off)
        {
          x->bytes += y->bytes;
          g_array_remove_index (c->free_blocks, i + 1);
        }
    }
  if (i > 0)
    {
      Block *w = &g_array_index (c->free_blocks, Block, i - 1), *x = w + 1;
      if (w->off + w->bytes == x->off)
        {
          w->bytes += x->bytes;
          g_array_remove_index (c->free_blocks, i);
        }
    }
}

static gboolean
is_device (const void *p)
{
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes (&at, p) != cudaSuccess)
    {
      (void) cudaGetLastError (); /* clear: a plain host pointer on old drivers */
      return FALSE;
    }
  return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
}

static void
cuda_copy (MpBackend *be, void *dst, const void *src, gsize bytes)
{
  CudaBackend *c = (CudaBackend *) be;
  if (dst != src && bytes > 0)
    note (cudaMemcpyAsync (dst, src, bytes, cudaMemcpyDefault, c->compute), "cudaMemcpyAsync");
}

static void
cuda_zero (MpBackend *be, void *dst, gsize bytes)
{
  CudaBackend *c = (CudaBackend *) be;
  if (bytes > 0)
    note (cudaMemsetAsync (dst, 0, bytes, c->compute), "cudaMemsetAsync");
}

/* Host <-> device, ordered after the compute stream's work, complete on return. */
static void
cuda_transfer (MpBackend *be, void *dst, const void *src, gsize bytes)
{
  CudaBackend *c = (CudaBackend *) be;
  if (bytes == 0)
    return;
  note (cudaMemcpyAsync (dst, src, bytes, cudaMemcpyDefault, c->compute), "cudaMemcpyAsync");
  note (cudaStreamSynchronize (c->compute), "cudaStreamSynchronize");
}

static void
cuda_get_mem (MpBackend *be, MpMemStats *out)
{
  *out = ((CudaBackend *) be)->mem.stats;
}

/* A device buffer of at least BYTES in *BUF (grown from the arena, MP_MEM_OTHER). */
static gboolean
ensure (CudaBackend *c, void **buf, gsize *have, gsize bytes, GError **error)
{
  if (*have >= bytes)
    return TRUE;
  gsize want = MAX (bytes, *have * 2);
  cuda_release (&c->base, *buf);
  *buf = NULL;
  *have = 0;
  *buf = cuda_alloc (&c->base, want, MP_MEM_OTHER, error);
  if (*buf == NULL)
    return FALSE;
  *have = want;
  return TRUE;
}

/* Token ids from host memory on the device (stream-ordered, so one buffer serves). */
static const int *
device_ints (const int *p, gsize n)
{
  CudaBackend *c = current;
  if (is_device (p))
    return p;
  GError *err = NULL;
  if (!ensure (c, &c->stage, &c->stage_bytes, n * sizeof (int), &err))
    {
      if (c->sticky == NULL)
        c->sticky = err;
      else
        g_error_free (err);
      return NULL;
    }
  note (cudaMemcpyAsync (c->stage, p, n * sizeof (int), cudaMemcpyHostToDevice, c->compute),
        "cudaMemcpyAsync (tokens)");
  return c->stage;
}

/* ---- kernels: the launchers on the compute stream -------------------------------------- */

#define S (current->compute)

static void
k_matmul_forward (float *out, const float *inp, const float *weight, const float *bias, int N,
                  int C, int OC)
{
  GError *err = NULL;
  if (current->precision == 1
      && !ensure (current, &current->scratch, &current->scratch_bytes,
                  mpk_cuda_matmul_scratch_bytes (N, C, OC), &err))
    {
      note (cudaErrorMemoryAllocation, "mpk_cuda_matmul_forward (bf16 scratch)");
      g_error_free (err);
      return;
    }
  note (mpk_cuda_matmul_forward (current->blas, current->precision, current->scratch, out, inp,
                                 weight, bias, N, C, OC, S), "mpk_cuda_matmul_forward");
}

static void
k_matmul_backward (float *dinp, float *dweight, float *dbias, const float *dout,
                   const float *inp, const float *weight, int N, int C, int OC)
{
  GError *err = NULL;
  if (current->precision == 1
      && !ensure (current, &current->scratch, &current->scratch_bytes,
                  mpk_cuda_matmul_scratch_bytes (N, C, OC), &err))
    {
      note (cudaErrorMemoryAllocation, "mpk_cuda_matmul_backward (bf16 scratch)");
      g_error_free (err);
      return;
    }
  note (mpk_cuda_matmul_backward (current->blas, current->precision, current->scratch, dinp,
                                  dweight, dbias, dout, inp, weight, N, C, OC, S),
        "mpk_cuda_matmul_backward");
}

static void
k_embedding_forward (float *out, const int *tokens, const float *wte, const float *wpe, int N,
                     int T, int C, int v0, int Vl)
{
  const int *d = device_ints (tokens, (gsize) N);
  if (d != NULL)
    note (mpk_cuda_embedding_forward (out, d, wte, wpe, N, T, C, v0, Vl, S),
          "mpk_cuda_embedding_forward");
}

static void
k_embedding_backward (float *dwte, float *dwpe, const float *dout, const int *tokens, int N,
                      int T, int C, int v0, int Vl)
{
  const int *d = device_ints (tokens, (gsize) N);
  if (d != NULL)
    note (mpk_cuda_embedding_backward (dwte, dwpe, dout, d, N, T, C, v0, Vl, S),
          "mpk_cuda_embedding_backward");
}

static void
k_layernorm_forward (float *out, float *mean, float *rstd, const float *inp, const float *w,
                     const float *b, int N, int C, float eps)
{
  note (mpk_cuda_layernorm_forward (out, mean, rstd, inp, w, b, N, C, eps, S),
        "mpk_cuda_layernorm_forward");
}

static void
k_layernorm_backward (float *dinp, float *dw, float *db, const float *dout, const float *inp,
                      const float *w, const float *mean, const float *rstd, int N, int C)
{
  note (mpk_cuda_layernorm_backward (dinp, dw, db, dout, inp, w, mean, rstd, N, C, S),
        "mpk_cuda_layernorm_backward");
}

static void
k_rmsnorm_forward (float *out, float *rstd, const float *inp, const float *w, int N, int C,
                   float eps)
{
  note (mpk_cuda_rmsnorm_forward (out, rstd, inp, w, N, C, eps, S), "mpk_cuda_rmsnorm_forward");
}

static void
k_rmsnorm_backward (float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                    const float *rstd, int N, int C)
{
  note (mpk_cuda_rmsnorm_backward (dinp, dw, dout, inp, w, rstd, N, C, S),
        "mpk_cuda_rmsnorm_backward");
}

static void
k_rotary_forward (float *x, int B, int T, int NHR, int HD, int ld, int pos0, float theta)
{
  note (mpk_cuda_rotary_forward (x, B, T, NHR, HD, ld, pos0, theta, S), "mpk_cuda_rotary_forward");
}

static void
k_rotary_backward (float *x, int B, int T, int NHR, int HD, int ld, int pos0, float theta)
{
  note (mpk_cuda_rotary_backward (x, B, T, NHR, HD, ld, pos0, theta, S),
        "mpk_cuda_rotary_backward");
}

static void
k_attention_forward (float *out, float *lse, float *probs, const float *q, const float *k,
                     const float *v, MpkAttnShape s)
{
  note (mpk_cuda_attention_forward (out, lse, probs, q, k, v, s, S),
        "mpk_cuda_attention_forward");
}

static void
k_attention_backward (float *dq, float *dk, float *dv, const float *dout, const float *out,
                      const float *lse, const float *probs, const float *q, const float *k,
                      const float *v, MpkAttnShape s)
{
  note (mpk_cuda_attention_backward (dq, dk, dv, dout, out, lse, probs, q, k, v, s, S),
        "mpk_cuda_attention_backward");
}

static void
k_gelu_forward (float *out, const float *inp, size_t n)
{
  note (mpk_cuda_gelu_forward (out, inp, n, S), "mpk_cuda_gelu_forward");
}

static void
k_gelu_backward (float *dinp, const float *inp, const float *dout, size_t n)
{
  note (mpk_cuda_gelu_backward (dinp, inp, dout, n, S), "mpk_cuda_gelu_backward");
}

static void
k_relu_forward (float *out, const float *inp, size_t n)
{
  note (mpk_cuda_relu_forward (out, inp, n, S), "mpk_cuda_relu_forward");
}

static void
k_relu_backward (float *dinp, const float *inp, const float *dout, size_t n)
{
  note (mpk_cuda_relu_backward (dinp, inp, dout, n, S), "mpk_cuda_relu_backward");
}

static void
k_swiglu_forward (float *out, const float *inp, int N, int F)
{
  note (mpk_cuda_swiglu_forward (out, inp, N, F, S), "mpk_cuda_swiglu_forward");
}

static void
k_swiglu_backward (float *dinp, const float *inp, const float *dout, int N, int F)
{
  note (mpk_cuda_swiglu_backward (dinp, inp, dout, N, F, S), "mpk_cuda_swiglu_backward");
}

static void
k_residual_forward (float *out, const float *a, const float *b, size_t n)
{
  note (mpk_cuda_residual_forward (out, a, b, n, S), "mpk_cuda_residual_forward");
}

static void
k_add (float *y, const float *x, size_t n)
{
  note (mpk_cuda_add (y, x, n, S), "mpk_cuda_add");
}

static void
k_ce_stats (float *lmax, float *lsum, float *tlogit, const float *logits, const int *targets,
            int N, int Vl, int v0)
{
  const int *d = device_ints (targets, (gsize) N);
  if (d != NULL)
    note (mpk_cuda_crossentropy_shard_stats (lmax, lsum, tlogit, logits, d, N, Vl, v0, S),
          "mpk_cuda_crossentropy_shard_stats");
}

static void
k_ce_rescale (float *lsum, const float *lmax, const float *gmax, int N)
{
  note (mpk_cuda_crossentropy_shard_rescale (lsum, lmax, gmax, N, S),
        "mpk_cuda_crossentropy_shard_rescale");
}

static void
k_ce_finish (float *losses, float *lse, const float *gmax, const float *gsum,
             const float *tlogit, int N)
{
  note (mpk_cuda_crossentropy_shard_finish (losses, lse, gmax, gsum, tlogit, N, S),
        "mpk_cuda_crossentropy_shard_finish");
}

static void
k_ce_backward (float *dlogits, const float *logits, const float *lse, const int *targets,
               float scale, int N, int Vl, int v0)
{
  const int *d = device_ints (targets, (gsize) N);
  if (d != NULL)
    note (mpk_cuda_crossentropy_shard_backward (dlogits, logits, lse, d, scale, N, Vl, v0, S),
          "mpk_cuda_crossentropy_shard_backward");
}

static void
k_adamw (float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
         float eps, float wd, int t)
{
  note (mpk_cuda_adamw_update (p, g, m, v, n, lr, b1, b2, eps, wd, t, S),
        "mpk_cuda_adamw_update");
}

static void
k_sgd (float *p, const float *g, float *mom, size_t n, float lr, float momentum)
{
  note (mpk_cuda_sgd_update (p, g, mom, n, lr, momentum, S), "mpk_cuda_sgd_update");
}

/* Synchronous: the norm is needed on the host before the update. */
static double
k_sumsq (const float *x, size_t n)
{
  double s = 0;
  note (mpk_cuda_sumsq (current->d_sumsq, x, n, S), "mpk_cuda_sumsq");
  note (cudaMemcpyAsync (&s, current->d_sumsq, sizeof s, cudaMemcpyDeviceToHost, S),
        "cudaMemcpyAsync (sumsq)");
  note (cudaStreamSynchronize (S), "cudaStreamSynchronize (sumsq)");
  return s;
}

#undef S

static const MpKernelOps cuda_kernels = {
  k_matmul_forward, k_matmul_backward,
  k_embedding_forward, k_embedding_backward,
  k_layernorm_forward, k_layernorm_backward,
  k_rmsnorm_forward, k_rmsnorm_backward,
  k_rotary_forward, k_rotary_backward,
  k_attention_forward, k_attention_backward,
  k_gelu_forward, k_gelu_backward,
  k_relu_forward, k_relu_backward,
  k_swiglu_forward, k_swiglu_backward,
  k_residual_forward, k_add,
  k_ce_stats, k_ce_rescale, k_ce_finish, k_ce_backward,
  k_adamw, k_sgd, k_sumsq,
};

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

static MpGroup *
cuda_group_split (MpBackend *be, int color, int key, GError **error)
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

static void
cuda_group_free (MpBackend *be, MpGroup *g)
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

static int
cuda_group_size (const MpGroup *g)
{
  return g->size;
}

static int
cuda_group_rank (const MpGroup *g)
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
  if (!check_sticky (c, error) || !after_compute (c, g->stream, error))
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
        cuda_copy (&c->base, out, buf, n * sizeof (float));
      return check_sticky (c, error);
    }
  float *dbuf = buf, *dout = out;
  gboolean host = !is_device (buf);
  if (host)
    {
      gsize need = (total + (kind == COLL_REDUCE_SCATTER ? n : 0)) * sizeof (float);
      if (!ensure (c, &c->stage, &c->stage_bytes, need, error))
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

static gboolean
cuda_all_reduce (MpBackend *be, MpGroup *g, float *buf, gsize n, MpReduceOp op, GError **error)
{
  return blocking ((CudaBackend *) be, g, COLL_ALL_REDUCE, buf, NULL, n, op, error);
}

static gboolean
cuda_all_gather (MpBackend *be, MpGroup *g, float *buf, gsize n, GError **error)
{
  return blocking ((CudaBackend *) be, g, COLL_ALL_GATHER, buf, NULL, n, MP_REDUCE_SUM, error);
}

static gboolean
cuda_reduce_scatter (MpBackend *be, MpGroup *g, const float *buf, float *out, gsize n,
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
        cuda_copy (&c->base, out, buf, n * sizeof (float));
      return check_sticky (c, error);
    }
  if (!is_device (buf))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "rank %d: a non-blocking collective on host memory (the cuda backend "
                   "reduces device buffers only)", c->base.rank);
      return FALSE;
    }
  MpRequest *r = g_new0 (MpRequest, 1);
  if (!launch (c, g, kind, buf, out, n, MP_REDUCE_SUM, &r->done, error))
    {
      g_free (r);
      return FALSE;
    }
  r->comm = g->comm;
  *req = r;
  return TRUE;
}

static gboolean
cuda_iall_reduce (MpBackend *be, MpGroup *g, float *buf, gsize n, MpRequest **req,
                  GError **error)
{
  return start ((CudaBackend *) be, g, COLL_ALL_REDUCE, buf, NULL, n, req, error);
}

static gboolean
cuda_iall_gather (MpBackend *be, MpGroup *g, float *buf, gsize n, MpRequest **req,
                  GError **error)
{
  return start ((CudaBackend *) be, g, COLL_ALL_GATHER, buf, NULL, n, req, error);
}

static gboolean
cuda_ireduce_scatter (MpBackend *be, MpGroup *g, const float *buf, float *out, gsize n,
                      MpRequest **req, GError **error)
{
  return start ((CudaBackend *) be, g, COLL_REDUCE_SCATTER, buf, out, n, req, error);
}

/* Messages: ncclSend / ncclRecv on the direction's world communicator. NCCL has no tags:
 * messages between a pair arrive in the order they were posted (as the programs post
 * them: MPI's non-overtaking order). */
static gboolean
p2p (CudaBackend *c, gboolean send, void *buf, gsize bytes, int peer, MpRequest **req,
     GError **error)
{
  *req = NULL;
  if (!check_sticky (c, error))
    return FALSE;
  int me = c->base.rank;
  int dir = send ? (me < peer ? 0 : 1) : (peer < me ? 0 : 1);
  if (c->p2p[dir] == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "rank %d: no NCCL world communicator for messages (a world of one?)", me);
      return FALSE;
    }
  if (!is_device (buf))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "rank %d: a message from host memory (the cuda backend sends device "
                   "buffers only)", me);
      return FALSE;
    }
  cudaStream_t st = c->p2p_stream[dir];
  if (!after_compute (c, st, error))
    return FALSE;
  if (send)
    MP_NCCL_TRY (ncclSend (buf, bytes, ncclChar, peer, c->p2p[dir], st));
  else
    MP_NCCL_TRY (ncclRecv (buf, bytes, ncclChar, peer, c->p2p[dir], st));
  MpRequest *r = g_new0 (MpRequest, 1);
  MP_CUDA_TRY (cudaEventCreateWithFlags (&r->done, cudaEventDisableTiming));
  MP_CUDA_TRY (cudaEventRecord (r->done, st));
  r->comm = c->p2p[dir];
  *req = r;
  return TRUE;
}

static gboolean
cuda_isend (MpBackend *be, const void *buf, gsize bytes, int peer, int tag, MpRequest **req,
            GError **error)
{
  return p2p ((CudaBackend *) be, TRUE, (void *) buf, bytes, peer, req, error);
}

static gboolean
cuda_irecv (MpBackend *be, void *buf, gsize bytes, int peer, int tag, MpRequest **req,
            GError **error)
{
  return p2p ((CudaBackend *) be, FALSE, buf, bytes, peer, req, error);
}

static gboolean
cuda_test (MpBackend *be, MpRequest *req, gboolean *done, GError **error)
{
  CudaBackend *c = (CudaBackend *) be;
  *done = TRUE;
  if (req == NULL)
    return check_sticky (c, error);
  cudaError_t e = cudaEventQuery (req->done);
  if (e == cudaErrorNotReady)
    {
      *done = FALSE;
      ncclResult_t r = ncclSuccess;
      if (req->comm)
        ncclCommGetAsyncError (req->comm, &r);
      if (r != ncclSuccess && r != ncclInProgress)
        return wait_event (c, req->done, req->comm, error); /* aborts, fails */
      return TRUE;
    }
  MP_CUDA_TRY (e);
  cudaEventDestroy (req->done);
  g_free (req);
  return TRUE;
}

/* The compute stream waits for the request; the host does not (the data is consumed by
 * later kernels, or downloaded, which synchronises). */
static gboolean
cuda_wait (MpBackend *be, MpRequest *req, GError **error)
{
  CudaBackend *c = (CudaBackend *) be;
  if (req == NULL)
    return check_sticky (c, error);
  cudaError_t e = cudaStreamWaitEvent (c->compute, req->done, 0);
  cudaEventDestroy (req->done);
  g_free (req);
  MP_CUDA_TRY (e);
  return check_sticky (c, error);
}

static double
cuda_now_s (MpBackend *be)
{
  CudaBackend *c = (CudaBackend *) be;
  note (cudaStreamSynchronize (c->compute), "cudaStreamSynchronize");
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static void
cuda_abort (MpBackend *be, int status)
{
  CudaBackend *c = (CudaBackend *) be;
  for (guint i = 0; i < c->groups->len; i++)
    {
      MpGroup *g = g_ptr_array_index (c->groups, i);
      if (g->comm)
        ncclCommAbort (g->comm);
      g->comm = NULL;
    }
  for (int d = 0; d < 2; d++)
    if (c->p2p[d])
      ncclCommAbort (c->p2p[d]);
  if (be->size > 1)
    MPI_Abort (MPI_COMM_WORLD, status);
  exit (status);
}

static void
cuda_free (MpBackend *be)
{
  CudaBackend *c = (CudaBackend *) be;
  if (c == NULL)
    return;
  cudaDeviceSynchronize ();
  while (c->groups->len > 0)
    cuda_group_free (be, g_ptr_array_index (c->groups, c->groups->len - 1));
  g_ptr_array_unref (c->groups);
  for (int d = 0; d < 2; d++)
    {
      if (c->p2p[d])
        ncclCommDestroy (c->p2p[d]);
      if (c->p2p_stream[d])
        cudaStreamDestroy (c->p2p_stream[d]);
    }
  if (c->blas)
    cublasDestroy (c->blas);
  if (c->compute)
    cudaStreamDestroy (c->compute);
  if (c->d_sumsq)
    cudaFree (c->d_sumsq);
  if (c->arena)
    cudaFree (c->arena);
  g_array_unref (c->free_blocks);
  mp_mem_ledger_clear (&c->mem);
  g_clear_error (&c->sticky);
  if (current == c)
    current = NULL;
  g_free (c);
}

/* ---- calibration (exec/calibrate*.c) ---------------------------------------------------- */

static char *
cuda_device_name (MpBackend *be, GError **error)
{
  struct cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties (&prop, ((CudaBackend *) be)->device);
  if (e != cudaSuccess)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "cudaGetDeviceProperties: %s",
                   cudaGetErrorString (e));
      return NULL;
    }
  return g_strndup (prop.name, sizeof prop.name);
}

static gboolean
cuda_set_gemm_dtype (MpBackend *be, MpDtype dtype, GError **error)
{
  if (dtype != MP_DTYPE_BF16 && dtype != MP_DTYPE_FP32)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "the cuda backend's GEMM has no %s mode "
                   "(bf16 or fp32)", mp_dtype_name (dtype));
      return FALSE;
    }
  ((CudaBackend *) be)->precision = dtype == MP_DTYPE_BF16 ? 1 : 0;
  return TRUE;
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

static gboolean
cuda_run_coll (MpBackend *be, MpGroup *g, MpCollKind kind, const float *send, float *recv,
               gsize count, int iters, GError **error)
{
  CudaBackend *c = (CudaBackend *) be;
  if (!check_sticky (c, error) || !after_compute (c, g->stream, error))
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

static const MpBackendOps cuda_ops = {
  .name = "cuda",
  .alloc = cuda_alloc,
  .release = cuda_release,
  .copy = cuda_copy,
  .zero = cuda_zero,
  .upload = cuda_transfer,
  .download = cuda_transfer,
  .kernels = &cuda_kernels,
  .group_split = cuda_group_split,
  .group_free = cuda_group_free,
  .group_size = cuda_group_size,
  .group_rank = cuda_group_rank,
  .all_reduce = cuda_all_reduce,
  .all_gather = cuda_all_gather,
  .reduce_scatter = cuda_reduce_scatter,
  .iall_reduce = cuda_iall_reduce,
  .iall_gather = cuda_iall_gather,
  .ireduce_scatter = cuda_ireduce_scatter,
  .isend = cuda_isend,
  .irecv = cuda_irecv,
  .test = cuda_test,
  .wait = cuda_wait,
  .run_coll = cuda_run_coll,
  .run_coll_calls = { [MP_COLL_ALL_REDUCE] = "ncclAllReduce",
                      [MP_COLL_ALL_GATHER] = "ncclAllGather",
                      [MP_COLL_REDUCE_SCATTER] = "ncclReduceScatter",
                      [MP_COLL_ALL_TO_ALL] = "ncclSend/ncclRecv to every peer",
                      [MP_COLL_BROADCAST] = "ncclBroadcast",
                      [MP_COLL_SEND_RECV] = "ncclSend/ncclRecv in a ring" },
  .barrier = mp_mpi_world_barrier,
  .host_all_reduce = mp_mpi_world_all_reduce,
  .host_all_gather = mp_mpi_world_all_gather,
  .device_name = cuda_device_name,
  .set_gemm_dtype = cuda_set_gemm_dtype,
  .now_s = cuda_now_s,
  .abort = cuda_abort,
  .get_mem = cuda_get_mem,
  .free = cuda_free,
};

int
mp_backend_cuda_devices (void)
{
  int n = 0;
  if (cudaGetDeviceCount (&n) != cudaSuccess)
    {
      (void) cudaGetLastError ();
      return 0;
    }
  return n;
}

static gboolean
cuda_open (CudaBackend *c, int rank, int size, GError **error)
{
  int n = mp_backend_cuda_devices ();
  if (n <= 0)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "no CUDA device: the cuda backend needs an NVIDIA GPU visible to rank %d "
                   "(cudaGetDeviceCount found none; check the driver and "
                   "CUDA_VISIBLE_DEVICES), or use --backend host", rank);
      return FALSE;
    }
  const char *lr = g_getenv ("OMPI_COMM_WORLD_LOCAL_RANK");
  int local = lr != NULL ? atoi (lr) : rank;
  c->device = local % n;
  MP_CUDA_TRY (cudaSetDevice (c->device));
  MP_CUDA_TRY (cudaStreamCreateWithFlags (&c->compute, cudaStreamNonBlocking));
  cublasStatus_t st = cublasCreate (&c->blas);
  if (st != CUBLAS_STATUS_SUCCESS)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "cublasCreate: %s",
                   cublasGetStatusString (st));
      return FALSE;
    }
  /* fp32 mode is true fp32 (no TF32), so --check holds to 1e-4. */
  cublasSetMathMode (c->blas, CUBLAS_PEDANTIC_MATH);
  MP_CUDA_TRY (cudaMalloc ((void **) &c->d_sumsq, sizeof (double)));
  if (size > 1)
    for (int d = 0; d < 2; d++)
      {
        if (!nccl_join (MPI_COMM_WORLD, rank, size, &c->p2p[d], error))
          return FALSE;
        MP_CUDA_TRY (cudaStreamCreateWithFlags (&c->p2p_stream[d], cudaStreamNonBlocking));
      }
  return TRUE;
}

MpBackend *
mp_backend_cuda_new (int rank, int size, gboolean bf16, GError **error)
{
  g_return_val_if_fail (current == NULL, NULL);
  CudaBackend *c = g_new0 (CudaBackend, 1);
  c->base.ops = &cuda_ops;
  c->base.rank = rank;
  c->base.size = size;
  c->precision = bf16 ? 1 : 0;
  c->free_blocks = g_array_new (FALSE, FALSE, sizeof (Block));
  mp_mem_ledger_init (&c->mem);
  c->groups = g_ptr_array_new ();
  current = c;
  if (!cuda_open (c, rank, size, error))
    {
      cuda_free (&c->base);
      return NULL;
    }
  return &c->base;
}

