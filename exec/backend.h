/* backend.h - what the executor needs from a machine: accounted memory, the compute
 * kernels, collectives over groups of ranks, point-to-point messages and a clock.
 *
 * One table of function pointers (MpBackendOps) per backend, filled at run time, so one
 * binary serves several: "host" (kernels/cpu + OpenBLAS + MPI, backend-host*.c) and
 * "cuda" (kernels/cuda + cuBLAS + NCCL, backend-cuda*.c, built with the CUDA toolkit into
 * the module mpplan-cuda.so, loaded only when a cuda backend is asked for);
 * both share backend-mpi.c's host-side exchanges. No CUDA, NCCL or MPI type appears here:
 * buffers are plain pointers into the backend's memory (host memory for "host", device
 * memory for "cuda"), groups and requests are opaque.
 *
 * Failure contract: every call that can fail takes GError ** last and returns FALSE / NULL
 * with MP_ERROR_RUNTIME set (an out-of-memory names the size asked). Collectives are
 * collective: every rank of the group calls them in the same order. Units: bytes,
 * seconds; element counts are floats unless a name says otherwise. */
#pragma once
#include <glib.h>
#include "kernels/cpu/kernels.h"
#include "common/units.h"      /* MpDtype */
#include "program/program.h"  /* MpMemKind, MpCollKind */

G_BEGIN_DECLS

typedef struct _MpBackend MpBackend;
typedef struct _MpGroup MpGroup;         /* an ordered set of world ranks */
typedef struct _MpRequest MpRequest;     /* a non-blocking operation in flight */

/* Bytes in use now, and at the moment the total peaked (with the total's parts then);
 * and each kind's own peak (gradients peak in backward, activations before it). */
typedef struct {
  double current[MP_MEM_N];
  double current_total;
  double peak_total;
  double at_peak[MP_MEM_N];
  double peak[MP_MEM_N];
} MpMemStats;

/* The accounting every backend keeps of its allocations: what each live pointer holds,
 * and the peak (backend.c). */
typedef struct {
  GHashTable *live;          /* pointer -> its size and kind */
  MpMemStats stats;
} MpMemLedger;

void mp_mem_ledger_init (MpMemLedger *ledger);
void mp_mem_ledger_clear (MpMemLedger *ledger);
/* Records PTR holding BYTES of KIND (and a new peak if it is one). */
void mp_mem_ledger_add (MpMemLedger *ledger, void *ptr, gsize bytes, MpMemKind kind);
/* Forgets PTR; returns its bytes, 0 for a pointer the ledger does not know. */
gsize mp_mem_ledger_remove (MpMemLedger *ledger, void *ptr);
/* What the ledger holds now by kind, for an out-of-memory message: "weights 8 MiB,
 * gradients 8 MiB, ..." (g_free it). */
char *mp_mem_ledger_describe (const MpMemLedger *ledger);

typedef enum { MP_REDUCE_SUM, MP_REDUCE_MAX } MpReduceOp;

/* The kernels, with kernels/cpu/kernels.h's signatures and contracts (forwards write,
 * backwards accumulate) after their first argument, the backend that runs them (its
 * stream, its GEMM handle, where a failed launch is kept until the next call that takes a
 * GError); a backend points them at its own implementations. */
typedef struct {
  void (*matmul_forward) (MpBackend *be, float *out, const float *inp, const float *weight,
                          const float *bias, int N, int C, int OC);
  void (*matmul_backward) (MpBackend *be, float *dinp, float *dweight, float *dbias,
                           const float *dout, const float *inp, const float *weight, int N,
                           int C, int OC);
  void (*embedding_forward) (MpBackend *be, float *out, const int *tokens, const float *wte,
                             const float *wpe, int N, int T, int C, int v0, int Vl);
  void (*embedding_backward) (MpBackend *be, float *dwte, float *dwpe, const float *dout,
                              const int *tokens, int N, int T, int C, int v0, int Vl);
  void (*layernorm_forward) (MpBackend *be, float *out, float *mean, float *rstd,
                             const float *inp, const float *weight, const float *bias, int N,
                             int C, float eps);
  void (*layernorm_backward) (MpBackend *be, float *dinp, float *dweight, float *dbias,
                              const float *dout, const float *inp, const float *weight,
                              const float *mean, const float *rstd, int N, int C);
  void (*rmsnorm_forward) (MpBackend *be, float *out, float *rstd, const float *inp,
                           const float *weight, int N, int C, float eps);
  void (*rmsnorm_backward) (MpBackend *be, float *dinp, float *dweight, const float *dout,
                            const float *inp, const float *weight, const float *rstd, int N,
                            int C);
  void (*rotary_forward) (MpBackend *be, float *x, int B, int T, int NHR, int HD, int ld,
                          int pos0, float theta);
  void (*rotary_backward) (MpBackend *be, float *dx, int B, int T, int NHR, int HD, int ld,
                           int pos0, float theta);
  void (*attention_forward) (MpBackend *be, float *out, float *lse, float *probs,
                             const float *q, const float *k, const float *v, MpkAttnShape s);
  void (*attention_backward) (MpBackend *be, float *dq, float *dk, float *dv,
                              const float *dout, const float *out, const float *lse,
                              const float *probs, const float *q, const float *k,
                              const float *v, MpkAttnShape s);
  void (*gelu_forward) (MpBackend *be, float *out, const float *inp, size_t n);
  void (*gelu_backward) (MpBackend *be, float *dinp, const float *inp, const float *dout,
                         size_t n);
  void (*relu_forward) (MpBackend *be, float *out, const float *inp, size_t n);
  void (*relu_backward) (MpBackend *be, float *dinp, const float *inp, const float *dout,
                         size_t n);
  void (*swiglu_forward) (MpBackend *be, float *out, const float *inp, int N, int F);
  void (*swiglu_backward) (MpBackend *be, float *dinp, const float *inp, const float *dout,
                           int N, int F);
  void (*residual_forward) (MpBackend *be, float *out, const float *a, const float *b,
                            size_t n);
  void (*add) (MpBackend *be, float *y, const float *x, size_t n);
  void (*crossentropy_shard_stats) (MpBackend *be, float *lmax, float *lsum, float *tlogit,
                                    const float *logits, const int *targets, int N, int Vl,
                                    int v0);
  void (*crossentropy_shard_rescale) (MpBackend *be, float *lsum, const float *lmax,
                                      const float *gmax, int N);
  void (*crossentropy_shard_finish) (MpBackend *be, float *losses, float *lse,
                                     const float *gmax, const float *gsum,
                                     const float *tlogit, int N);
  void (*crossentropy_shard_backward) (MpBackend *be, float *dlogits, const float *logits,
                                       const float *lse, const int *targets, float scale,
                                       int N, int Vl, int v0);
  void (*adamw_update) (MpBackend *be, float *param, const float *grad, float *m, float *v,
                        size_t n, float lr, float beta1, float beta2, float eps,
                        float weight_decay, int t);
  void (*sgd_update) (MpBackend *be, float *param, const float *grad, float *mom, size_t n,
                      float lr, float momentum);
  double (*sumsq) (MpBackend *be, const float *x, size_t n);
  /* Ring attention for context parallelism (kernels/cpu/kernels.h mpk_cpu_ring_*; QPOS
   * and KPOS are host arrays; both backends have them). */
  void (*ring_attention_begin) (MpBackend *be, float *out, float *m, float *l,
                                MpkAttnShape s);
  void (*ring_attention_block) (MpBackend *be, float *out, float *m, float *l,
                                const float *q, const float *k, const float *v,
                                MpkAttnShape s, int TK, const int *qpos, const int *kpos);
  void (*ring_attention_end) (MpBackend *be, float *out, float *lse, const float *m,
                              const float *l, MpkAttnShape s);
  void (*ring_attention_backward_block) (MpBackend *be, float *dq, float *dk, float *dv,
                                         const float *dout, const float *out,
                                         const float *lse, const float *q, const float *k,
                                         const float *v, MpkAttnShape s, int TK,
                                         const int *qpos, const int *kpos);
  /* MoE token permutation (kernels/cpu/moe.c); IDX is host memory, as tokens above. */
  void (*gather_rows) (MpBackend *be, float *out, const float *x, const int *idx,
                       const float *scale, int R, int C);
  void (*scatter_add_rows) (MpBackend *be, float *y, const float *x, const int *idx,
                            const float *scale, int R, int C);
  void (*rows_dot) (MpBackend *be, float *out, const float *a, const int *idx, const float *b,
                    int R, int C);
  /* matmul_forward/backward kept out of FP8: the router's and the output head's GEMMs,
   * which Transformer Engine's recipe keeps at the training precision. NULL on a backend
   * whose matmul never runs FP8 (host): matmul_* then. */
  void (*matmul_hp_forward) (MpBackend *be, float *out, const float *inp, const float *weight,
                             const float *bias, int N, int C, int OC);
  void (*matmul_hp_backward) (MpBackend *be, float *dinp, float *dweight, float *dbias,
                              const float *dout, const float *inp, const float *weight, int N,
                              int C, int OC);
  /* The MoE router (kernels/cpu/moe.c mpk_cpu_router_forward) on backend memory: the
   * cuda backend routes on the device. PROBS may be LOGITS (each row is read before it is
   * written). */
  void (*router_forward) (MpBackend *be, float *probs, int *idx, float *gates,
                          const float *logits, int N, int E, int K);
  /* The expert GEMMs of one MoE layer as one grouped call (mpk_cpu_grouped_matmul_*;
   * ROWS host memory, G segments, weights G consecutive (OC, C) blocks). */
  void (*grouped_matmul_forward) (MpBackend *be, float *out, const float *inp,
                                  const float *weight, const float *bias, const int *rows,
                                  int G, int C, int OC);
  void (*grouped_matmul_backward) (MpBackend *be, float *dinp, float *dweight, float *dbias,
                                   const float *dout, const float *inp, const float *weight,
                                   const int *rows, int G, int C, int OC);
  /* The attention variants (MpAttnKernelOps below); NULL on a backend without them. */
  const struct _MpAttnKernelOps *attn;
} MpKernelOps;

/* Attention and block variants of the model zoo (kernels/cpu/kernels.h mpk_cpu_qknorm_*,
 * _attention_sinks_*, _softcap_*, _geglu_*, _scale), with MpKernelOps's conventions; and
 * whether attention_forward/backward and the ring honour MpkAttnShape's window and
 * softcap. A backend without a kernel leaves it NULL (FALSE) and the executor refuses
 * the feature on it by name. */
typedef struct _MpAttnKernelOps {
  gboolean masks;                  /* window and softcap in the attention kernels */
  gboolean value_heads;            /* value heads of their own width (MpkAttnShape.DV, ldv:
                                    * MLA's v_head_dim) in the attention kernels */
  void (*qknorm_forward) (MpBackend *be, float *qkv, float *raw, float *rstd, const float *wq,
                          const float *wk, int N, int NH, int NKV, int HD, int ld, float eps);
  void (*qknorm_backward) (MpBackend *be, float *dqkv, float *dwq, float *dwk,
                           const float *raw, const float *rstd, const float *wq,
                           const float *wk, int N, int NH, int NKV, int HD, int ld);
  void (*sinks_forward) (MpBackend *be, float *out, float *lse, float *probs,
                         const float *sinks, MpkAttnShape s);
  void (*sinks_backward) (MpBackend *be, float *dsinks, const float *dout, const float *out,
                          const float *lse, const float *sinks, MpkAttnShape s);
  void (*softcap_forward) (MpBackend *be, float *x, size_t n, float cap);
  void (*softcap_backward) (MpBackend *be, float *dx, const float *y, size_t n, float cap);
  void (*geglu_forward) (MpBackend *be, float *out, const float *inp, int N, int F);
  void (*geglu_backward) (MpBackend *be, float *dinp, const float *inp, const float *dout,
                          int N, int F);
  void (*scale) (MpBackend *be, float *x, size_t n, float s);
} MpAttnKernelOps;

typedef struct {
  const char *name;                                   /* "host", "cuda" */
  /* Memory, accounted under KIND. alloc zero-fills. */
  void *(*alloc) (MpBackend *be, gsize bytes, MpMemKind kind, GError **error);
  void (*release) (MpBackend *be, void *ptr);         /* NULL-safe */
  void (*copy) (MpBackend *be, void *dst, const void *src, gsize bytes);
  /* ROWS rows of WIDTH bytes, from SRC (rows SPITCH bytes apart) to DST (DPITCH apart),
   * in one call: a block of columns of a row-major matrix. */
  void (*copy_2d) (MpBackend *be, void *dst, gsize dpitch, const void *src, gsize spitch,
                   gsize width, gsize rows);
  void (*zero) (MpBackend *be, void *dst, gsize bytes);
  /* Host <-> backend memory (weights are generated on the host, losses read back). */
  void (*upload) (MpBackend *be, void *dst, const void *host, gsize bytes);
  void (*download) (MpBackend *be, void *host, const void *src, gsize bytes);
  const MpKernelOps *kernels;

  /* Groups: every world rank calls split with its COLOR (ranks with equal colours form a
   * group) and KEY (order inside it). A world of one never talks to anyone. */
  MpGroup *(*group_split) (MpBackend *be, int color, int key, GError **error);
  void (*group_free) (MpBackend *be, MpGroup *group);
  int (*group_size) (const MpGroup *group);
  int (*group_rank) (const MpGroup *group);

  /* Blocking collectives over floats, in place where they can be: all_reduce on BUF (n);
   * all_gather: BUF (n * size) gets every rank's block, this rank's already at its place;
   * reduce_scatter: BUF (n * size) in, this rank's summed block out to OUT (n); OUT may be
   * BUF + inplace_offset (its block inside BUF: the reduction in place). */
  gboolean (*all_reduce) (MpBackend *be, MpGroup *g, float *buf, gsize n, MpReduceOp op,
                          GError **error);
  gboolean (*all_gather) (MpBackend *be, MpGroup *g, float *buf, gsize n, GError **error);
  gboolean (*reduce_scatter) (MpBackend *be, MpGroup *g, const float *buf, float *out,
                              gsize n, GError **error);
  /* Where, in floats from BUF's start, an in-place reduce_scatter of blocks of N leaves
   * group rank RANK's block: MPI_IN_PLACE puts it first, NCCL at RANK * N. */
  gsize (*inplace_offset) (int rank, gsize n);
  /* All-to-all with per-peer sizes (MoE token dispatch): SEND holds SEND_N[p] floats for
   * group rank p, block after block in rank order; RECV gets RECV_N[p] from each p, the
   * same way. The counts are host memory, one per group rank; SEND and RECV must not
   * overlap. */
  gboolean (*all_to_all_v) (MpBackend *be, MpGroup *g, const float *send, const gsize *send_n,
                            float *recv, const gsize *recv_n, GError **error);
  /* The same, non-blocking: *REQ to test / wait (NULL when nothing needed doing). */
  gboolean (*iall_reduce) (MpBackend *be, MpGroup *g, float *buf, gsize n, MpRequest **req,
                           GError **error);
  gboolean (*iall_gather) (MpBackend *be, MpGroup *g, float *buf, gsize n, MpRequest **req,
                           GError **error);
  gboolean (*ireduce_scatter) (MpBackend *be, MpGroup *g, const float *buf, float *out,
                               gsize n, MpRequest **req, GError **error);
  /* Point to point with a world rank, BYTES from / into BUF. */
  gboolean (*isend) (MpBackend *be, const void *buf, gsize bytes, int peer, int tag,
                     MpRequest **req, GError **error);
  gboolean (*irecv) (MpBackend *be, void *buf, gsize bytes, int peer, int tag,
                     MpRequest **req, GError **error);
  /* Optional (NULL: the caller posts irecv and isend): BYTES of SEND to world rank TO and
   * as many into RECV from FROM, posted together, one request for both - a ring's shift,
   * which the cuda backend runs as one NCCL group so that every rank of the ring moves
   * its block at once. */
  gboolean (*isendrecv) (MpBackend *be, const void *send, int to, void *recv, int from,
                         gsize bytes, int tag, MpRequest **req, GError **error);
  /* TEST: *DONE set when REQ has completed (REQ is then freed). WAIT blocks, then frees.
   * NULL requests are complete. */
  gboolean (*test) (MpBackend *be, MpRequest *req, gboolean *done, GError **error);
  gboolean (*wait) (MpBackend *be, MpRequest *req, GError **error);

  /* Calibration (exec/calibrate-coll.c): collective KIND ITERS times back to back on G,
   * out of place, returning once the last result is in RECV. Backend buffers, COUNT as
   * nccl-tests counts it: all_reduce SEND, RECV (count); all_gather SEND (count), RECV
   * (count * size); reduce_scatter SEND (count * size), RECV (count); all_to_all SEND,
   * RECV (count, count / size per peer); broadcast in place on RECV (count) from group
   * rank 0; send_recv a ring, SEND (count) to rank + 1 and RECV (count) from rank - 1. */
  gboolean (*run_coll) (MpBackend *be, MpGroup *g, MpCollKind kind, const float *send,
                        float *recv, gsize count, int iters, GError **error);
  const char *run_coll_calls[MP_COLL_N];             /* what run_coll calls, per kind */
  /* Host-side exchanges over every world rank (a world of one returns at once), for
   * figures rather than tensors: a barrier; N doubles of host memory X reduced in place;
   * BYTES of MINE from every rank into ALL (size * BYTES, in rank order). */
  gboolean (*barrier) (MpBackend *be, GError **error);
  gboolean (*host_all_reduce) (MpBackend *be, double *x, gsize n, MpReduceOp op,
                               GError **error);
  gboolean (*host_all_gather) (MpBackend *be, const void *mine, gsize bytes, void *all,
                               GError **error);
  /* The device's name (caller owns; NULL op: the backend names none, as host) and what
   * matmul_forward/backward compute from now on (NULL op: one GEMM, fp32): MP_DTYPE_BF16
   * (bf16 inputs, fp32 accumulation: backend "cuda"), MP_DTYPE_FP32 (no TF32), or on
   * cuda MP_DTYPE_FP8 (cast-GEMM-cast, E4M3 / E5M2, where the shape allows; bf16
   * otherwise: kernels/cuda/fp8.cu; refused, MP_ERROR_INPUT, below compute capability
   * 8.9). */
  char *(*device_name) (MpBackend *be, GError **error);
  gboolean (*set_gemm_dtype) (MpBackend *be, MpDtype dtype, GError **error);

  double (*now_s) (MpBackend *be);                    /* monotonic, seconds */
  /* Ends every rank of the job now (MPI_Abort), after a failure on this one. */
  void (*abort) (MpBackend *be, int status);
  void (*get_mem) (MpBackend *be, MpMemStats *out);
  void (*free) (MpBackend *be);
} MpBackendOps;

struct _MpBackend {
  const MpBackendOps *ops;
  int rank, size;                                     /* in the world */
  double mem_limit_bytes;   /* allocations beyond this fail as out-of-memory; 0: none */
};

/* The host backend over a world of SIZE ranks (RANK is this one); SIZE 1 never calls MPI.
 * Caller owns (be->ops->free). */
MpBackend *mp_backend_host_new (int rank, int size);

/* The backend registry (backend.c): NAME "host", "cuda" (bf16 GEMM inputs, fp32 master
 * weights and accumulation) or "cuda-fp32" (fp32 throughout). NULL with MP_ERROR_INPUT for
 * an unknown name, MP_ERROR_RUNTIME for "cuda*" without a device or in a build without
 * CUDA (the message starts "no CUDA device"), mp_backend_cuda_load's error without its
 * module. Caller owns. */
MpBackend *mp_backend_new (const char *name, int rank, int size, GError **error);
gboolean mp_backend_name_valid (const char *name);
/* GPUs this process sees (0 without a driver, a device, the module, or a CUDA build). */
int mp_backend_cuda_device_count (void);
/* Opens the cuda backend's module (mpplan-cuda.so) unless it is open: the one next to this
 * program (a build tree), else the installed one in pkglibdir; MPPLAN_CUDA_MODULE names
 * another. FALSE with MP_ERROR_IO, "CUDA backend not available: <why>", when it cannot be
 * loaded (in a build without CUDA: MP_ERROR_RUNTIME, "no CUDA device: ..."). */
gboolean mp_backend_cuda_load (GError **error);

G_END_DECLS
