/* kernels-cuda.h - the CUDA twins of kernels/cpu/kernels.h: one extern "C" launcher
 * mpk_cuda_<op>_<dir> per reference kernel, with the reference's arguments (device
 * pointers), its contract (forwards write, backwards accumulate, row-major fp32, packed
 * [q|k|v] heads, [gate|up] SwiGLU, vocabulary shards [v0, v0+Vl)) and a stream last.
 * Every launcher returns the launch's cudaError_t (cudaSuccess, or the first failure);
 * none allocates, synchronizes or touches GLib: exec/backend-cuda*.c turn the codes into
 * GError messages naming the launcher. Compiled by nvcc for the architectures configure
 * found the toolkit supports (sm_80, sm_90, sm_100: MPK_NVCC_GENCODE in configure.ac).
 *
 * Not here: anything that needs state (streams, handles, memory) beyond its arguments.
 * The GEMMs take the caller's cuBLAS handle and bf16 scratch.
 *
 * Index:
 *   matmul.cu     mpk_cuda_matmul_forward/backward (cuBLAS, fp32 or bf16 inputs, fp32 acc)
 *   elementwise.cu embedding, rotary, gelu, relu, swiglu, residual, add, scale, casts,
 *                 adamw, sgd, sumsq
 *   norm.cu       layernorm, rmsnorm
 *   attention.cu  causal GQA attention (fused, online softmax; backward from lse)
 *   ring-attention.cu  its ring pieces for context parallelism (begin, block, end,
 *                 backward block: the causal chunk mask, the online-softmax merge)
 *   attention.cuh the warp walk both attention files share
 *   loss.cu       cross-entropy and its vocab-parallel pieces
 *   moe.cu        MoE token permutation: gather_rows, scatter_add_rows, rows_dot
 *   router.cu     MoE router forward/backward and aux loss (kernels/cpu/router-row.h's code)
 *   grouped.cu    grouped expert GEMMs (cublasGemmGroupedBatchedEx, or a cublasGemmEx loop)
 *   fp8.cu        FP8 cast-GEMM-cast through cublasLt (E4M3 / E5M2, current scaling)
 *   gemm.cuh      the GEMM pieces matmul.cu lends grouped.cu and fp8.cu
 *   attn-extras.cu qk-norm, attention sinks, logit soft-capping, geglu (the attention
 *                 kernel has no window or score cap yet: the executor refuses those) */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include "kernels/cpu/kernels.h"   /* MpkAttnShape */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GEMMs (matmul.cu) ----
 * The reference's matmul with weight (OC, C). PRECISION 0: fp32 inputs, fp32 compute
 * (CUBLAS_COMPUTE_32F, no TF32), matching the CPU to ~1e-5. PRECISION 1: inputs cast to
 * bf16 into SCRATCH first (fp32 master weights stay untouched), fp32 accumulation and
 * output. SCRATCH must hold mpk_cuda_matmul_scratch_bytes (N, C, OC) bytes (NULL is
 * fine in fp32). A cuBLAS failure maps to a cudaError_t: NOT_INITIALIZED ->
 * cudaErrorInitializationError, ALLOC_FAILED -> cudaErrorMemoryAllocation,
 * INVALID_VALUE -> cudaErrorInvalidValue, NOT_SUPPORTED/ARCH_MISMATCH ->
 * cudaErrorNotSupported, others -> cudaErrorUnknown. */
size_t mpk_cuda_matmul_scratch_bytes (int N, int C, int OC);
cudaError_t mpk_cuda_matmul_forward (cublasHandle_t h, int precision, void *scratch,
                                     float *out, const float *inp, const float *weight,
                                     const float *bias, int N, int C, int OC,
                                     cudaStream_t stream);
cudaError_t mpk_cuda_matmul_backward (cublasHandle_t h, int precision, void *scratch,
                                      float *dinp, float *dweight, float *dbias,
                                      const float *dout, const float *inp,
                                      const float *weight, int N, int C, int OC,
                                      cudaStream_t stream);

/* ---- embedding, rotary (elementwise.cu) ---- */
cudaError_t mpk_cuda_embedding_forward (float *out, const int *tokens, const float *wte,
                                        const float *wpe, int N, int T, int C, int v0,
                                        int Vl, cudaStream_t stream);
/* Scatter-add with atomics: summation order differs from the CPU's (~1e-6 relative). */
cudaError_t mpk_cuda_embedding_backward (float *dwte, float *dwpe, const float *dout,
                                         const int *tokens, int N, int T, int C, int v0,
                                         int Vl, cudaStream_t stream);
cudaError_t mpk_cuda_rotary_forward (float *x, int B, int T, int NHR, int HD, int ld,
                                     int pos0, float theta, cudaStream_t stream);
cudaError_t mpk_cuda_rotary_backward (float *dx, int B, int T, int NHR, int HD, int ld,
                                      int pos0, float theta, cudaStream_t stream);

/* ---- normalization (norm.cu): one block per row, statistics in double ---- */
cudaError_t mpk_cuda_layernorm_forward (float *out, float *mean, float *rstd,
                                        const float *inp, const float *weight,
                                        const float *bias, int N, int C, float eps,
                                        cudaStream_t stream);
cudaError_t mpk_cuda_layernorm_backward (float *dinp, float *dweight, float *dbias,
                                         const float *dout, const float *inp,
                                         const float *weight, const float *mean,
                                         const float *rstd, int N, int C,
                                         cudaStream_t stream);
cudaError_t mpk_cuda_rmsnorm_forward (float *out, float *rstd, const float *inp,
                                      const float *weight, int N, int C, float eps,
                                      cudaStream_t stream);
cudaError_t mpk_cuda_rmsnorm_backward (float *dinp, float *dweight, const float *dout,
                                       const float *inp, const float *weight,
                                       const float *rstd, int N, int C,
                                       cudaStream_t stream);

/* ---- attention (attention.cu) ----
 * One warp per query row, 4 rows (a query tile) per block, grid (T/4, NH, B); keys in
 * chunks of 32 with an online softmax, so nothing quadratic is stored. probs, when not
 * NULL, is written by a second kernel from the lse (the reference's "no flash" output).
 * Backward recomputes the probabilities from lse (probs is not read) and accumulates dk,
 * dv with atomics. HD <= 256. */
cudaError_t mpk_cuda_attention_forward (float *out, float *lse, float *probs, const float *q,
                                        const float *k, const float *v, MpkAttnShape s,
                                        cudaStream_t stream);
cudaError_t mpk_cuda_attention_backward (float *dq, float *dk, float *dv, const float *dout,
                                         const float *out, const float *lse,
                                         const float *probs, const float *q, const float *k,
                                         const float *v, MpkAttnShape s,
                                         cudaStream_t stream);

/* ---- ring attention (ring-attention.cu) ----
 * kernels/cpu's mpk_cpu_ring_attention_* with QPOS (s.T) and KPOS (TK) in device memory:
 * the same walk as attention.cu with keys masked by position (kpos[j] <= qpos[t]); block
 * merges one key block into the running max M, sum L (B, NH, T) and unnormalised OUT;
 * backward_block accumulates (dk, dv with atomics). HD <= 256. */
cudaError_t mpk_cuda_ring_attention_begin (float *out, float *m, float *l, MpkAttnShape s,
                                           cudaStream_t stream);
cudaError_t mpk_cuda_ring_attention_block (float *out, float *m, float *l, const float *q,
                                           const float *k, const float *v, MpkAttnShape s,
                                           int TK, const int *qpos, const int *kpos,
                                           cudaStream_t stream);
cudaError_t mpk_cuda_ring_attention_end (float *out, float *lse, const float *m,
                                         const float *l, MpkAttnShape s, cudaStream_t stream);
cudaError_t mpk_cuda_ring_attention_backward_block (float *dq, float *dk, float *dv,
                                                    const float *dout, const float *out,
                                                    const float *lse, const float *q,
                                                    const float *k, const float *v,
                                                    MpkAttnShape s, int TK, const int *qpos,
                                                    const int *kpos, cudaStream_t stream);

/* ---- activations, residuals (elementwise.cu) ---- */
cudaError_t mpk_cuda_gelu_forward (float *out, const float *inp, size_t n, cudaStream_t stream);
cudaError_t mpk_cuda_gelu_backward (float *dinp, const float *inp, const float *dout, size_t n,
                                    cudaStream_t stream);
cudaError_t mpk_cuda_relu_forward (float *out, const float *inp, size_t n, cudaStream_t stream);
cudaError_t mpk_cuda_relu_backward (float *dinp, const float *inp, const float *dout, size_t n,
                                    cudaStream_t stream);
cudaError_t mpk_cuda_swiglu_forward (float *out, const float *inp, int N, int F,
                                     cudaStream_t stream);
cudaError_t mpk_cuda_swiglu_backward (float *dinp, const float *inp, const float *dout, int N,
                                      int F, cudaStream_t stream);
cudaError_t mpk_cuda_residual_forward (float *out, const float *a, const float *b, size_t n,
                                       cudaStream_t stream);
cudaError_t mpk_cuda_residual_backward (float *da, float *db, const float *dout, size_t n,
                                        cudaStream_t stream);
cudaError_t mpk_cuda_add (float *y, const float *x, size_t n, cudaStream_t stream);
cudaError_t mpk_cuda_scale (float *x, size_t n, float s, cudaStream_t stream);

/* ---- mixed precision casts (elementwise.cu): round to nearest even ---- */
cudaError_t mpk_cuda_cast_f32_to_bf16 (uint16_t *out, const float *inp, size_t n,
                                       cudaStream_t stream);
cudaError_t mpk_cuda_cast_bf16_to_f32 (float *out, const uint16_t *inp, size_t n,
                                       cudaStream_t stream);

/* ---- loss (loss.cu): one block per row, sums in double ---- */
cudaError_t mpk_cuda_crossentropy_forward (float *losses, float *lse, const float *logits,
                                           const int *targets, int N, int V,
                                           cudaStream_t stream);
cudaError_t mpk_cuda_crossentropy_backward (float *dlogits, const float *logits,
                                            const float *lse, const int *targets, float scale,
                                            int N, int V, cudaStream_t stream);
cudaError_t mpk_cuda_crossentropy_shard_stats (float *lmax, float *lsum, float *tlogit,
                                               const float *logits, const int *targets, int N,
                                               int Vl, int v0, cudaStream_t stream);
cudaError_t mpk_cuda_crossentropy_shard_rescale (float *lsum, const float *lmax,
                                                 const float *gmax, int N,
                                                 cudaStream_t stream);
cudaError_t mpk_cuda_crossentropy_shard_finish (float *losses, float *lse, const float *gmax,
                                                const float *gsum, const float *tlogit, int N,
                                                cudaStream_t stream);
cudaError_t mpk_cuda_crossentropy_shard_backward (float *dlogits, const float *logits,
                                                  const float *lse, const int *targets,
                                                  float scale, int N, int Vl, int v0,
                                                  cudaStream_t stream);

/* ---- optimizers and norm (elementwise.cu) ---- */
cudaError_t mpk_cuda_adamw_update (float *param, const float *grad, float *m, float *v,
                                   size_t n, float lr, float beta1, float beta2, float eps,
                                   float weight_decay, int t, cudaStream_t stream);
cudaError_t mpk_cuda_sgd_update (float *param, const float *grad, float *mom, size_t n,
                                 float lr, float momentum, cudaStream_t stream);
/* *OUT (one device double) = sum of x^2 in double. Writes *out (no accumulation). */
cudaError_t mpk_cuda_sumsq (double *out, const float *x, size_t n, cudaStream_t stream);

/* ---- MoE token permutation (moe.cu): kernels/cpu/moe.c's, IDX on the device ---- */
cudaError_t mpk_cuda_gather_rows (float *out, const float *x, const int *idx,
                                  const float *scale, int R, int C, cudaStream_t stream);
/* Scatter-add with atomics (summation order differs from the CPU's, ~1e-6 relative). */
cudaError_t mpk_cuda_scatter_add_rows (float *y, const float *x, const int *idx,
                                       const float *scale, int R, int C, cudaStream_t stream);
cudaError_t mpk_cuda_rows_dot (float *out, const float *a, const int *idx, const float *b,
                               int R, int C, cudaStream_t stream);

/* ---- MoE router (router.cu): kernels/cpu/moe.c's mpk_cpu_router_*, all on the device;
 * one thread per token. aux writes *LOSS (one device double; no accumulation) and
 * accumulates DPROBS (NULL: not wanted); it runs as one block. ---- */
cudaError_t mpk_cuda_router_forward (float *probs, int *idx, float *gates, const float *logits,
                                     int N, int E, int K, cudaStream_t stream);
cudaError_t mpk_cuda_router_backward (float *dlogits, const float *probs, const int *idx,
                                      const float *gates, const float *dgates,
                                      const float *dprobs, int N, int E, int K,
                                      cudaStream_t stream);
cudaError_t mpk_cuda_router_aux (double *loss, float *dprobs, const float *probs,
                                 const int *idx, int B, int T, int E, int K, float alpha,
                                 float dscale, cudaStream_t stream);

/* ---- grouped GEMM (grouped.cu): mpk_cpu_grouped_matmul_*, ROWS (G) in host memory, one
 * cuBLAS grouped call (or a loop where cuBLAS lacks or refuses it); PRECISION as matmul's.
 * SCRATCH holds mpk_cuda_grouped_matmul_scratch_bytes (device pointer arrays, and the
 * bf16 operands in precision 1). ---- */
size_t mpk_cuda_grouped_matmul_scratch_bytes (const int *rows, int G, int C, int OC,
                                              int precision);
cudaError_t mpk_cuda_grouped_matmul_forward (cublasHandle_t h, int precision, void *scratch,
                                             float *out, const float *inp,
                                             const float *weight, const float *bias,
                                             const int *rows, int G, int C, int OC,
                                             cudaStream_t stream);
cudaError_t mpk_cuda_grouped_matmul_backward (cublasHandle_t h, int precision, void *scratch,
                                              float *dinp, float *dweight, float *dbias,
                                              const float *dout, const float *inp,
                                              const float *weight, const int *rows, int G,
                                              int C, int OC, cudaStream_t stream);

/* ---- FP8 (fp8.cu): mpk_cpu_matmul_fp8_* through cublasLt. cudaSuccess from
 * mpk_cuda_fp8_supported when DEVICE can (compute capability >= 8.9), else
 * cudaErrorNotSupported. A GEMM runs in FP8 when mpk_cuda_matmul_fp8_fits (N, C, OC
 * multiples of 16, cublasLt's FP8 alignment) and its outputs are mpk_cuda_fp8_aligned
 * (16 bytes; NULL passes); otherwise the GEMMs return cudaErrorNotSupported and do
 * nothing. SCRATCH holds
 * mpk_cuda_matmul_fp8_scratch_bytes (cublasLt's workspace, the FP8 copies). ---- */
cudaError_t mpk_cuda_fp8_supported (int device);
int mpk_cuda_matmul_fp8_fits (int N, int C, int OC);
int mpk_cuda_fp8_aligned (const void *p);
size_t mpk_cuda_matmul_fp8_scratch_bytes (int N, int C, int OC);
cudaError_t mpk_cuda_matmul_fp8_forward (cublasLtHandle_t lt, void *scratch, float *out,
                                         const float *inp, const float *weight,
                                         const float *bias, int N, int C, int OC,
                                         cudaStream_t stream);
cudaError_t mpk_cuda_matmul_fp8_backward (cublasLtHandle_t lt, void *scratch, float *dinp,
                                          float *dweight, float *dbias, const float *dout,
                                          const float *inp, const float *weight, int N,
                                          int C, int OC, cudaStream_t stream);

/* ---- attention and block variants (attn-extras.cu) ---- */
cudaError_t mpk_cuda_qknorm_forward (float *qkv, float *raw, float *rstd, const float *wq,
                                     const float *wk, int N, int NH, int NKV, int HD, int ld,
                                     float eps, cudaStream_t stream);
/* The gains' gradients with atomics (summation order differs from the CPU's). */
cudaError_t mpk_cuda_qknorm_backward (float *dqkv, float *dwq, float *dwk, const float *raw,
                                      const float *rstd, const float *wq, const float *wk,
                                      int N, int NH, int NKV, int HD, int ld,
                                      cudaStream_t stream);
cudaError_t mpk_cuda_attention_sinks_forward (float *out, float *lse, float *probs,
                                              const float *sinks, MpkAttnShape s,
                                              cudaStream_t stream);
cudaError_t mpk_cuda_attention_sinks_backward (float *dsinks, const float *dout,
                                               const float *out, const float *lse,
                                               const float *sinks, MpkAttnShape s,
                                               cudaStream_t stream);
cudaError_t mpk_cuda_softcap_forward (float *x, size_t n, float cap, cudaStream_t stream);
cudaError_t mpk_cuda_softcap_backward (float *dx, const float *y, size_t n, float cap,
                                       cudaStream_t stream);
cudaError_t mpk_cuda_geglu_forward (float *out, const float *inp, int N, int F,
                                    cudaStream_t stream);
cudaError_t mpk_cuda_geglu_backward (float *dinp, const float *inp, const float *dout, int N,
                                     int F, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
