/* backend-cuda-private.h - what the files of the cuda backend share (private to exec/):
 * the backend's state, its groups and requests, the error macros, and the helpers each
 * file lends the others:
 *   backend-cuda.c          memory (one arena), the device, the ops table, open and free;
 *   backend-cuda-kernels.c  the kernels/cuda launchers and cuBLAS GEMMs (MpKernelOps);
 *   backend-cuda-coll.c     groups, NCCL collectives and messages, requests.
 * Plain C against cuda_runtime.h, cublas_v2.h and nccl.h; compiled only with CUDA. */
#pragma once
#include "exec/backend.h"
#include "common/error.h"

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <nccl.h>

G_BEGIN_DECLS

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
#define ALIGN 256

typedef struct {
  gsize off, bytes;
} Block;

struct _MpGroup {
  ncclComm_t comm;          /* NULL for a group of one */
  cudaStream_t stream;      /* this group's communication stream */
  int rank, size;
};

/* A request's end: an event on each stream it used (a ring shift may use two). */
struct _MpRequest {
  int n;                    /* events in use, 1 or 2 */
  cudaEvent_t done[2];
  ncclComm_t comm[2];       /* checked for asynchronous errors while waiting */
};

typedef struct {
  MpBackend base;
  int device, precision;    /* precision: 0 fp32 GEMMs, 1 bf16 GEMM inputs, 2 FP8 (where
                             * the shape allows, else bf16) */
  cudaStream_t compute;
  cublasHandle_t blas;
  cublasLtHandle_t lt;      /* FP8 GEMMs */
  char *arena;              /* one cudaMalloc, carved by a first-fit free list */
  gsize arena_bytes;
  GArray *free_blocks;      /* Block, sorted by offset, coalesced */
  MpMemLedger mem;          /* what each carved block holds; the peak */
  void *scratch;            /* bf16 / FP8 GEMM operands, the FP8 GEMM's workspace, the
                             * grouped GEMM's pointer arrays: grown on demand
                             * (MP_MEM_OTHER) */
  gsize scratch_bytes;
  void *stage;              /* host tokens / floats staged to the device */
  gsize stage_bytes;
  double *d_sumsq;
  ncclComm_t p2p[2];        /* world communicators: [0] lower -> higher, [1] higher -> lower */
  cudaStream_t p2p_stream[2];
  GPtrArray *groups;        /* MpGroup* alive, for abort */
  GError *sticky;           /* first failed kernel launch (kernels have no GError) */
} CudaBackend;

/* ---- backend-cuda.c ---- */
/* Keeps a failed launch E of LAUNCHER as C's sticky error (the first one wins). */
void mpcu_note (CudaBackend *c, cudaError_t e, const char *launcher);
/* FALSE with the sticky error, if a launch failed. */
gboolean mpcu_check_sticky (CudaBackend *c, GError **error);
/* Whether P is device (or managed) memory, not a plain host pointer. */
gboolean mpcu_is_device (const void *p);
/* A device buffer of at least BYTES in *BUF (grown from the arena, MP_MEM_OTHER). */
gboolean mpcu_ensure (CudaBackend *c, void **buf, gsize *have, gsize bytes, GError **error);
void mpcu_copy (MpBackend *be, void *dst, const void *src, gsize bytes);  /* ops->copy */

/* ---- backend-cuda-kernels.c ---- */
extern const MpKernelOps mpcu_kernels;
/* ---- backend-cuda-attn.c ---- */
extern const MpAttnKernelOps mpcu_attn_kernels;

/* ---- backend-cuda-coll.c: the ops of groups, collectives and messages ---- */
/* The two world communicators for messages (one per direction) and their streams. */
gboolean mpcu_p2p_open (CudaBackend *c, GError **error);
MpGroup *mpcu_group_split (MpBackend *be, int color, int key, GError **error);
void mpcu_group_free (MpBackend *be, MpGroup *g);
int mpcu_group_size (const MpGroup *g);
int mpcu_group_rank (const MpGroup *g);
gboolean mpcu_all_reduce (MpBackend *be, MpGroup *g, float *buf, gsize n, MpReduceOp op,
                          GError **error);
gboolean mpcu_all_gather (MpBackend *be, MpGroup *g, float *buf, gsize n, GError **error);
gboolean mpcu_all_to_all_v (MpBackend *be, MpGroup *g, const float *send, const gsize *send_n,
                            float *recv, const gsize *recv_n, GError **error);
gsize mpcu_inplace_offset (int rank, gsize n);
gboolean mpcu_reduce_scatter (MpBackend *be, MpGroup *g, const float *buf, float *out,
                              gsize n, GError **error);
gboolean mpcu_iall_reduce (MpBackend *be, MpGroup *g, float *buf, gsize n, MpRequest **req,
                           GError **error);
gboolean mpcu_iall_gather (MpBackend *be, MpGroup *g, float *buf, gsize n, MpRequest **req,
                           GError **error);
gboolean mpcu_ireduce_scatter (MpBackend *be, MpGroup *g, const float *buf, float *out,
                               gsize n, MpRequest **req, GError **error);
gboolean mpcu_isend (MpBackend *be, const void *buf, gsize bytes, int peer, int tag,
                     MpRequest **req, GError **error);
gboolean mpcu_irecv (MpBackend *be, void *buf, gsize bytes, int peer, int tag,
                     MpRequest **req, GError **error);
gboolean mpcu_isendrecv (MpBackend *be, const void *send, int to, void *recv, int from,
                         gsize bytes, int tag, MpRequest **req, GError **error);
gboolean mpcu_test (MpBackend *be, MpRequest *req, gboolean *done, GError **error);
gboolean mpcu_wait (MpBackend *be, MpRequest *req, GError **error);
gboolean mpcu_run_coll (MpBackend *be, MpGroup *g, MpCollKind kind, const float *send,
                        float *recv, gsize count, int iters, GError **error);

G_END_DECLS
