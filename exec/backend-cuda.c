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
 * failed launch is kept as a sticky error of the backend the kernel was given and
 * returned by the next call that takes a GError (a collective, test, wait, alloc) - the
 * step fails there, naming the launcher.
 *
 * Host pointers: the executor passes token ids from host memory and reduces a few host
 * floats (loss, gradient norm); such pointers are detected with cudaPointerGetAttributes
 * and staged through device scratch. An NCCL failure (or a peer that died) aborts the
 * communicator (ncclCommAbort) and fails the call instead of hanging.
 *
 * Built as the module mpplan-cuda.so (never into mpplan itself, so that only a cuda run
 * loads the CUDA libraries): mp_cuda_module at the end is all it exports.
 *
 * This file: the arena, host <-> device transfers, the device's name and GEMM mode, the
 * ops table, open and free; the launchers are in backend-cuda-kernels.c, groups,
 * collectives and messages in backend-cuda-coll.c (backend-cuda-private.h). */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/backend-cuda-private.h"
#include "kernels/cuda/kernels-cuda.h"
#include "exec/backend-private.h"
#include "common/units.h"

#include <gmodule.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- errors -------------------------------------------------------------------------- */

void
mpcu_note (CudaBackend *c, cudaError_t e, const char *launcher)
{
  if (e != cudaSuccess && c->sticky == NULL)
    g_set_error (&c->sticky, MP_ERROR, MP_ERROR_RUNTIME, "%s on rank %d: %s", launcher,
                 c->base.rank, cudaGetErrorString (e));
}

gboolean
mpcu_check_sticky (CudaBackend *c, GError **error)
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
  /* What is still to come once the arena is taken (the CUDA context is already out of
   * free_b): NCCL's buffers, 16 channels x 2 peers x NCCL_BUFFSIZE 4 MiB = 128 MiB per
   * communicator (costmodel/memory.c's runtime reserve, with its sources), for up to the
   * six communicators a 4D plan opens (768 MiB), and cuBLAS's workspace (32 MiB, cuBLAS
   * documentation's recommendation for Hopper); rounded up to 1 GiB. */
  gsize reserve = (gsize) 1 << 30;
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

static void cuda_release (MpBackend *be, void *ptr);

static void *
cuda_alloc (MpBackend *be, gsize bytes, MpMemKind kind, GError **error)
{
  CudaBackend *c = (CudaBackend *) be;
  if (!mpcu_check_sticky (c, error))
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
      g_autofree char *held = mp_mem_ledger_describe (&c->mem);
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "out of device memory on rank %d (GPU %d): asked %s (%zu bytes) for %s "
                   "with %s in use of an arena of %s (ledger: %s)", be->rank, c->device, a,
                   asked, mp_mem_kind_name (kind), u, l, held);
      return NULL;
    }
  Block *b = &g_array_index (c->free_blocks, Block, i);
  char *p = c->arena + b->off;
  b->off += asked;
  b->bytes -= asked;
  if (b->bytes == 0)
    g_array_remove_index (c->free_blocks, i);
  mp_mem_ledger_add (&c->mem, p, asked, kind);
  cudaError_t e = cudaMemsetAsync (p, 0, asked, c->compute);
  if (e != cudaSuccess)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "cudaMemsetAsync: %s",
                   cudaGetErrorString (e));
      cuda_release (be, p);    /* back to the free list, not lost */
      return NULL;
    }
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

gboolean
mpcu_is_device (const void *p)
{
  struct cudaPointerAttributes at;
  if (cudaPointerGetAttributes (&at, p) != cudaSuccess)
    {
      (void) cudaGetLastError (); /* clear: a plain host pointer on old drivers */
      return FALSE;
    }
  return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
}

void
mpcu_copy (MpBackend *be, void *dst, const void *src, gsize bytes)
{
  CudaBackend *c = (CudaBackend *) be;
  if (dst != src && bytes > 0)
    mpcu_note (c, cudaMemcpyAsync (dst, src, bytes, cudaMemcpyDefault, c->compute),
               "cudaMemcpyAsync");
}

static void
cuda_copy_2d (MpBackend *be, void *dst, gsize dpitch, const void *src, gsize spitch,
              gsize width, gsize rows)
{
  CudaBackend *c = (CudaBackend *) be;
  if (width > 0 && rows > 0)
    mpcu_note (c, cudaMemcpy2DAsync (dst, dpitch, src, spitch, width, rows, cudaMemcpyDefault,
                                     c->compute),
               "cudaMemcpy2DAsync");
}

static void
cuda_zero (MpBackend *be, void *dst, gsize bytes)
{
  CudaBackend *c = (CudaBackend *) be;
  if (bytes > 0)
    mpcu_note (c, cudaMemsetAsync (dst, 0, bytes, c->compute), "cudaMemsetAsync");
}

/* Host <-> device, ordered after the compute stream's work, complete on return. */
static void
cuda_transfer (MpBackend *be, void *dst, const void *src, gsize bytes)
{
  CudaBackend *c = (CudaBackend *) be;
  if (bytes == 0)
    return;
  mpcu_note (c, cudaMemcpyAsync (dst, src, bytes, cudaMemcpyDefault, c->compute),
             "cudaMemcpyAsync");
  mpcu_note (c, cudaStreamSynchronize (c->compute), "cudaStreamSynchronize");
}

static void
cuda_get_mem (MpBackend *be, MpMemStats *out)
{
  *out = ((CudaBackend *) be)->mem.stats;
}

gboolean
mpcu_ensure (CudaBackend *c, void **buf, gsize *have, gsize bytes, GError **error)
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

static double
cuda_now_s (MpBackend *be)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, cudaStreamSynchronize (c->compute), "cudaStreamSynchronize");
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
    mpcu_group_free (be, g_ptr_array_index (c->groups, c->groups->len - 1));
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
  if (c->lt)
    cublasLtDestroy (c->lt);
  if (c->compute)
    cudaStreamDestroy (c->compute);
  if (c->d_sumsq)
    cudaFree (c->d_sumsq);
  if (c->arena)
    cudaFree (c->arena);
  g_array_unref (c->free_blocks);
  mp_mem_ledger_clear (&c->mem);
  g_clear_error (&c->sticky);
  g_free (c);
}

/* ---- for calibration (exec/calibrate*.c) ------------------------------------------------- */

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
  CudaBackend *c = (CudaBackend *) be;
  if (dtype != MP_DTYPE_BF16 && dtype != MP_DTYPE_FP32 && dtype != MP_DTYPE_FP8)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "the cuda backend's GEMM has no %s mode "
                   "(bf16, fp32 or fp8)", mp_dtype_name (dtype));
      return FALSE;
    }
  if (dtype == MP_DTYPE_FP8 && mpk_cuda_fp8_supported (c->device) != cudaSuccess)
    {
      int major = 0, minor = 0;
      cudaDeviceGetAttribute (&major, cudaDevAttrComputeCapabilityMajor, c->device);
      cudaDeviceGetAttribute (&minor, cudaDevAttrComputeCapabilityMinor, c->device);
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                   "FP8 GEMMs need compute capability 8.9 or newer (Ada, Hopper, Blackwell); "
                   "device %d is sm_%d%d: run the plan with --backend cuda-fp32, or plan "
                   "without fp8", c->device, major, minor);
      return FALSE;
    }
  c->precision = dtype == MP_DTYPE_FP8 ? 2 : dtype == MP_DTYPE_BF16 ? 1 : 0;
  return TRUE;
}

static const MpBackendOps cuda_ops = {
  .name = "cuda",
  .alloc = cuda_alloc,
  .release = cuda_release,
  .copy = mpcu_copy,
  .copy_2d = cuda_copy_2d,
  .zero = cuda_zero,
  .upload = cuda_transfer,
  .download = cuda_transfer,
  .kernels = &mpcu_kernels,
  .group_split = mpcu_group_split,
  .group_free = mpcu_group_free,
  .group_size = mpcu_group_size,
  .group_rank = mpcu_group_rank,
  .all_reduce = mpcu_all_reduce,
  .all_gather = mpcu_all_gather,
  .reduce_scatter = mpcu_reduce_scatter,
  .inplace_offset = mpcu_inplace_offset,
  .all_to_all_v = mpcu_all_to_all_v,
  .iall_reduce = mpcu_iall_reduce,
  .iall_gather = mpcu_iall_gather,
  .ireduce_scatter = mpcu_ireduce_scatter,
  .isend = mpcu_isend,
  .irecv = mpcu_irecv,
  .isendrecv = mpcu_isendrecv,
  .test = mpcu_test,
  .wait = mpcu_wait,
  .run_coll = mpcu_run_coll,
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

static int
cuda_devices (void)
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
  int n = cuda_devices ();
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
  st = cublasSetMathMode (c->blas, CUBLAS_PEDANTIC_MATH);
  if (st != CUBLAS_STATUS_SUCCESS)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "cublasSetMathMode: %s",
                   cublasGetStatusString (st));
      return FALSE;
    }
  st = cublasLtCreate (&c->lt);
  if (st != CUBLAS_STATUS_SUCCESS)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "cublasLtCreate: %s",
                   cublasGetStatusString (st));
      return FALSE;
    }
  MP_CUDA_TRY (cudaMalloc ((void **) &c->d_sumsq, sizeof (double)));
  return size == 1 || mpcu_p2p_open (c, error);
}

static MpBackend *
cuda_new (int rank, int size, gboolean bf16, GError **error)
{
  CudaBackend *c = g_new0 (CudaBackend, 1);
  c->base.ops = &cuda_ops;
  c->base.rank = rank;
  c->base.size = size;
  c->precision = bf16 ? 1 : 0;
  c->free_blocks = g_array_new (FALSE, FALSE, sizeof (Block));
  mp_mem_ledger_init (&c->mem);
  c->groups = g_ptr_array_new ();
  if (!cuda_open (c, rank, size, error))
    {
      cuda_free (&c->base);
      return NULL;
    }
  return &c->base;
}

/* What mpplan-cuda.so offers exec/backend.c, which opens it on demand (backend-private.h). */
G_MODULE_EXPORT const MpCudaModule mp_cuda_module = {
  .abi = MP_CUDA_MODULE_ABI,
  .open = cuda_new,
  .devices = cuda_devices,
};
