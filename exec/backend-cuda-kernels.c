/* backend-cuda-kernels.c - the cuda backend's kernels: the kernels/cuda launchers and the
 * cuBLAS GEMMs, queued in order on the backend's compute stream. A failed launch is kept
 * as the backend's sticky error (the kernels take no GError). Token ids, row indices and
 * the ring's positions from host memory are staged to the device first. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/backend-cuda-private.h"
#include "kernels/cuda/kernels-cuda.h"

#include <string.h>

/* Token ids from host memory on the device (stream-ordered, so one buffer serves). */
static const int *
device_ints (CudaBackend *c, const int *p, gsize n)
{
  if (mpcu_is_device (p))
    return p;
  GError *err = NULL;
  if (!mpcu_ensure (c, &c->stage, &c->stage_bytes, n * sizeof (int), &err))
    {
      if (c->sticky == NULL)
        c->sticky = err;
      else
        g_error_free (err);
      return NULL;
    }
  mpcu_note (
      c, cudaMemcpyAsync (c->stage, p, n * sizeof (int), cudaMemcpyHostToDevice, c->compute),
      "cudaMemcpyAsync (tokens)");
  return c->stage;
}

/* The ring's query positions QPOS (T) and key positions KPOS (TK), host arrays, on the
 * device as one array (device_ints has one staging buffer: two calls would share it),
 * queries first. */
static const int *
device_positions (CudaBackend *c, const int *qpos, int T, const int *kpos, int TK)
{
  g_autofree int *both = g_new (int, (gsize) T + TK);
  memcpy (both, qpos, (gsize) T * sizeof (int));
  memcpy (both + T, kpos, (gsize) TK * sizeof (int));
  return device_ints (c, both, (gsize) T + TK);   /* pageable: staged before it returns */
}

/* ---- kernels: the launchers on the compute stream -------------------------------------- */

/* C's scratch grown to BYTES; FALSE (the failure kept as sticky, naming LAUNCHER) if the
 * arena cannot. */
static gboolean
scratch_for (CudaBackend *c, gsize bytes, const char *launcher)
{
  GError *err = NULL;
  if (mpcu_ensure (c, &c->scratch, &c->scratch_bytes, bytes, &err))
    return TRUE;
  mpcu_note (c, cudaErrorMemoryAllocation, launcher);
  g_error_free (err);
  return FALSE;
}

/* Whether this GEMM runs in FP8: an fp8 plan's, where cublasLt's FP8 alignment holds for
 * the shape and the outputs D1, D2 (fp8.cu); the others stay at bf16, as Transformer
 * Engine keeps such layers out of FP8. */
static gboolean
fp8_gemm (const CudaBackend *c, int N, int C, int OC, const void *d1, const void *d2)
{
  return c->precision == 2 && mpk_cuda_matmul_fp8_fits (N, C, OC) && mpk_cuda_fp8_aligned (d1)
         && mpk_cuda_fp8_aligned (d2);
}

/* The cuBLAS precision of a non-FP8 GEMM: FP8 mode's fallback is bf16. */
static int
blas_precision (const CudaBackend *c)
{
  return c->precision == 2 ? 1 : c->precision;
}

/* One GEMM at C's precision (FP8 where FP8 is allowed and fits, else cuBLAS). */
static void
matmul_forward_at (CudaBackend *c, gboolean fp8_ok, float *out, const float *inp,
                   const float *weight, const float *bias, int N, int C, int OC)
{
  if (fp8_ok && fp8_gemm (c, N, C, OC, out, NULL))
    {
      if (scratch_for (c, mpk_cuda_matmul_fp8_scratch_bytes (N, C, OC),
                       "mpk_cuda_matmul_fp8_forward (scratch)"))
        mpcu_note (c,
                   mpk_cuda_matmul_fp8_forward (c->lt, c->scratch, out, inp, weight, bias, N, C,
                                                OC, c->compute),
                   "mpk_cuda_matmul_fp8_forward");
      return;
    }
  int p = blas_precision (c);
  if (p == 1
      && !scratch_for (c, mpk_cuda_matmul_scratch_bytes (N, C, OC),
                       "mpk_cuda_matmul_forward (bf16 scratch)"))
    return;
  mpcu_note (c,
             mpk_cuda_matmul_forward (c->blas, p, c->scratch, out, inp, weight, bias, N, C, OC,
                                      c->compute),
             "mpk_cuda_matmul_forward");
}

static void
matmul_backward_at (CudaBackend *c, gboolean fp8_ok, float *dinp, float *dweight, float *dbias,
                    const float *dout, const float *inp, const float *weight, int N, int C,
                    int OC)
{
  if (fp8_ok && fp8_gemm (c, N, C, OC, dinp, dweight))
    {
      if (scratch_for (c, mpk_cuda_matmul_fp8_scratch_bytes (N, C, OC),
                       "mpk_cuda_matmul_fp8_backward (scratch)"))
        mpcu_note (c,
                   mpk_cuda_matmul_fp8_backward (c->lt, c->scratch, dinp, dweight, dbias, dout,
                                                 inp, weight, N, C, OC, c->compute),
                   "mpk_cuda_matmul_fp8_backward");
      return;
    }
  int p = blas_precision (c);
  if (p == 1
      && !scratch_for (c, mpk_cuda_matmul_scratch_bytes (N, C, OC),
                       "mpk_cuda_matmul_backward (bf16 scratch)"))
    return;
  mpcu_note (c,
             mpk_cuda_matmul_backward (c->blas, p, c->scratch, dinp, dweight, dbias, dout, inp,
                                       weight, N, C, OC, c->compute),
             "mpk_cuda_matmul_backward");
}

static void
k_matmul_forward (MpBackend *be, float *out, const float *inp, const float *weight,
                  const float *bias, int N, int C, int OC)
{
  matmul_forward_at ((CudaBackend *) be, TRUE, out, inp, weight, bias, N, C, OC);
}

static void
k_matmul_backward (MpBackend *be, float *dinp, float *dweight, float *dbias, const float *dout,
                   const float *inp, const float *weight, int N, int C, int OC)
{
  matmul_backward_at ((CudaBackend *) be, TRUE, dinp, dweight, dbias, dout, inp, weight, N, C,
                      OC);
}

static void
k_matmul_hp_forward (MpBackend *be, float *out, const float *inp, const float *weight,
                     const float *bias, int N, int C, int OC)
{
  matmul_forward_at ((CudaBackend *) be, FALSE, out, inp, weight, bias, N, C, OC);
}

static void
k_matmul_hp_backward (MpBackend *be, float *dinp, float *dweight, float *dbias,
                      const float *dout, const float *inp, const float *weight, int N, int C,
                      int OC)
{
  matmul_backward_at ((CudaBackend *) be, FALSE, dinp, dweight, dbias, dout, inp, weight, N, C,
                      OC);
}

/* The expert GEMMs as one grouped call, at the bf16 or fp32 precision (FP8 mode: bf16;
 * the grouped GEMM has no FP8 path). */
static void
k_grouped_forward (MpBackend *be, float *out, const float *inp, const float *weight,
                   const float *bias, const int *rows, int G, int C, int OC)
{
  CudaBackend *c = (CudaBackend *) be;
  int p = blas_precision (c);
  if (scratch_for (c, mpk_cuda_grouped_matmul_scratch_bytes (rows, G, C, OC, p),
                   "mpk_cuda_grouped_matmul_forward (scratch)"))
    mpcu_note (c,
               mpk_cuda_grouped_matmul_forward (c->blas, p, c->scratch, out, inp, weight, bias,
                                                rows, G, C, OC, c->compute),
               "mpk_cuda_grouped_matmul_forward");
}

static void
k_grouped_backward (MpBackend *be, float *dinp, float *dweight, float *dbias,
                    const float *dout, const float *inp, const float *weight, const int *rows,
                    int G, int C, int OC)
{
  CudaBackend *c = (CudaBackend *) be;
  int p = blas_precision (c);
  if (scratch_for (c, mpk_cuda_grouped_matmul_scratch_bytes (rows, G, C, OC, p),
                   "mpk_cuda_grouped_matmul_backward (scratch)"))
    mpcu_note (c,
               mpk_cuda_grouped_matmul_backward (c->blas, p, c->scratch, dinp, dweight, dbias,
                                                 dout, inp, weight, rows, G, C, OC,
                                                 c->compute),
               "mpk_cuda_grouped_matmul_backward");
}

/* Softmax, top-k and gates on the device, from logits already there. */
static void
k_router_forward (MpBackend *be, float *probs, int *idx, float *gates, const float *logits,
                  int N, int E, int K)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_router_forward (probs, idx, gates, logits, N, E, K, c->compute),
             "mpk_cuda_router_forward");
}

static void
k_embedding_forward (MpBackend *be, float *out, const int *tokens, const float *wte,
                     const float *wpe, int N, int T, int C, int v0, int Vl)
{
  CudaBackend *c = (CudaBackend *) be;
  const int *d = device_ints (c, tokens, (gsize) N);
  if (d != NULL)
    mpcu_note (c, mpk_cuda_embedding_forward (out, d, wte, wpe, N, T, C, v0, Vl, c->compute),
               "mpk_cuda_embedding_forward");
}

static void
k_embedding_backward (MpBackend *be, float *dwte, float *dwpe, const float *dout,
                      const int *tokens, int N, int T, int C, int v0, int Vl)
{
  CudaBackend *c = (CudaBackend *) be;
  const int *d = device_ints (c, tokens, (gsize) N);
  if (d != NULL)
    mpcu_note (c,
               mpk_cuda_embedding_backward (dwte, dwpe, dout, d, N, T, C, v0, Vl, c->compute),
               "mpk_cuda_embedding_backward");
}

static void
k_layernorm_forward (MpBackend *be, float *out, float *mean, float *rstd, const float *inp,
                     const float *w, const float *b, int N, int C, float eps)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_layernorm_forward (out, mean, rstd, inp, w, b, N, C, eps, c->compute),
             "mpk_cuda_layernorm_forward");
}

static void
k_layernorm_backward (MpBackend *be, float *dinp, float *dw, float *db, const float *dout,
                      const float *inp, const float *w, const float *mean, const float *rstd,
                      int N, int C)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (
      c, mpk_cuda_layernorm_backward (dinp, dw, db, dout, inp, w, mean, rstd, N, C, c->compute),
      "mpk_cuda_layernorm_backward");
}

static void
k_rmsnorm_forward (MpBackend *be, float *out, float *rstd, const float *inp, const float *w,
                   int N, int C, float eps)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_rmsnorm_forward (out, rstd, inp, w, N, C, eps, c->compute),
             "mpk_cuda_rmsnorm_forward");
}

static void
k_rmsnorm_backward (MpBackend *be, float *dinp, float *dw, const float *dout, const float *inp,
                    const float *w, const float *rstd, int N, int C)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_rmsnorm_backward (dinp, dw, dout, inp, w, rstd, N, C, c->compute),
             "mpk_cuda_rmsnorm_backward");
}

static void
k_rotary_forward (MpBackend *be, float *x, int B, int T, int NHR, int HD, int ld, int pos0,
                  float theta)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_rotary_forward (x, B, T, NHR, HD, ld, pos0, theta, c->compute),
             "mpk_cuda_rotary_forward");
}

static void
k_rotary_backward (MpBackend *be, float *x, int B, int T, int NHR, int HD, int ld, int pos0,
                   float theta)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_rotary_backward (x, B, T, NHR, HD, ld, pos0, theta, c->compute),
             "mpk_cuda_rotary_backward");
}

static void
k_attention_forward (MpBackend *be, float *out, float *lse, float *probs, const float *q,
                     const float *k, const float *v, MpkAttnShape s)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_attention_forward (out, lse, probs, q, k, v, s, c->compute),
             "mpk_cuda_attention_forward");
}

static void
k_attention_backward (MpBackend *be, float *dq, float *dk, float *dv, const float *dout,
                      const float *out, const float *lse, const float *probs, const float *q,
                      const float *k, const float *v, MpkAttnShape s)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (
      c,
      mpk_cuda_attention_backward (dq, dk, dv, dout, out, lse, probs, q, k, v, s, c->compute),
      "mpk_cuda_attention_backward");
}

static void
k_gelu_forward (MpBackend *be, float *out, const float *inp, size_t n)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_gelu_forward (out, inp, n, c->compute), "mpk_cuda_gelu_forward");
}

static void
k_gelu_backward (MpBackend *be, float *dinp, const float *inp, const float *dout, size_t n)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_gelu_backward (dinp, inp, dout, n, c->compute),
             "mpk_cuda_gelu_backward");
}

static void
k_relu_forward (MpBackend *be, float *out, const float *inp, size_t n)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_relu_forward (out, inp, n, c->compute), "mpk_cuda_relu_forward");
}

static void
k_relu_backward (MpBackend *be, float *dinp, const float *inp, const float *dout, size_t n)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_relu_backward (dinp, inp, dout, n, c->compute),
             "mpk_cuda_relu_backward");
}

static void
k_swiglu_forward (MpBackend *be, float *out, const float *inp, int N, int F)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_swiglu_forward (out, inp, N, F, c->compute),
             "mpk_cuda_swiglu_forward");
}

static void
k_swiglu_backward (MpBackend *be, float *dinp, const float *inp, const float *dout, int N,
                   int F)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_swiglu_backward (dinp, inp, dout, N, F, c->compute),
             "mpk_cuda_swiglu_backward");
}

static void
k_residual_forward (MpBackend *be, float *out, const float *a, const float *b, size_t n)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_residual_forward (out, a, b, n, c->compute),
             "mpk_cuda_residual_forward");
}

static void
k_add (MpBackend *be, float *y, const float *x, size_t n)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_add (y, x, n, c->compute), "mpk_cuda_add");
}

static void
k_ce_stats (MpBackend *be, float *lmax, float *lsum, float *tlogit, const float *logits,
            const int *targets, int N, int Vl, int v0)
{
  CudaBackend *c = (CudaBackend *) be;
  const int *d = device_ints (c, targets, (gsize) N);
  if (d != NULL)
    mpcu_note (c,
               mpk_cuda_crossentropy_shard_stats (lmax, lsum, tlogit, logits, d, N, Vl, v0,
                                                  c->compute),
               "mpk_cuda_crossentropy_shard_stats");
}

static void
k_ce_rescale (MpBackend *be, float *lsum, const float *lmax, const float *gmax, int N)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_crossentropy_shard_rescale (lsum, lmax, gmax, N, c->compute),
             "mpk_cuda_crossentropy_shard_rescale");
}

static void
k_ce_finish (MpBackend *be, float *losses, float *lse, const float *gmax, const float *gsum,
             const float *tlogit, int N)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (
      c, mpk_cuda_crossentropy_shard_finish (losses, lse, gmax, gsum, tlogit, N, c->compute),
      "mpk_cuda_crossentropy_shard_finish");
}

static void
k_ce_backward (MpBackend *be, float *dlogits, const float *logits, const float *lse,
               const int *targets, float scale, int N, int Vl, int v0)
{
  CudaBackend *c = (CudaBackend *) be;
  const int *d = device_ints (c, targets, (gsize) N);
  if (d != NULL)
    mpcu_note (c,
               mpk_cuda_crossentropy_shard_backward (dlogits, logits, lse, d, scale, N, Vl, v0,
                                                     c->compute),
               "mpk_cuda_crossentropy_shard_backward");
}

static void
k_adamw (MpBackend *be, float *p, const float *g, float *m, float *v, size_t n, float lr,
         float b1, float b2, float eps, float wd, int t)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_adamw_update (p, g, m, v, n, lr, b1, b2, eps, wd, t, c->compute),
             "mpk_cuda_adamw_update");
}

static void
k_sgd (MpBackend *be, float *p, const float *g, float *mom, size_t n, float lr, float momentum)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_sgd_update (p, g, mom, n, lr, momentum, c->compute),
             "mpk_cuda_sgd_update");
}

/* Synchronous: the norm is needed on the host before the update. */
static double
k_sumsq (MpBackend *be, const float *x, size_t n)
{
  CudaBackend *c = (CudaBackend *) be;
  double s = 0;
  mpcu_note (c, mpk_cuda_sumsq (c->d_sumsq, x, n, c->compute), "mpk_cuda_sumsq");
  mpcu_note (c, cudaMemcpyAsync (&s, c->d_sumsq, sizeof s, cudaMemcpyDeviceToHost, c->compute),
             "cudaMemcpyAsync (sumsq)");
  mpcu_note (c, cudaStreamSynchronize (c->compute), "cudaStreamSynchronize (sumsq)");
  return s;
}

static void
k_ring_begin (MpBackend *be, float *out, float *m, float *l, MpkAttnShape s)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_ring_attention_begin (out, m, l, s, c->compute),
             "mpk_cuda_ring_attention_begin");
}

static void
k_ring_block (MpBackend *be, float *out, float *m, float *l, const float *q, const float *k,
              const float *v, MpkAttnShape s, int TK, const int *qpos, const int *kpos)
{
  CudaBackend *c = (CudaBackend *) be;
  const int *d = device_positions (c, qpos, s.T, kpos, TK);
  if (d != NULL)
    mpcu_note (c,
               mpk_cuda_ring_attention_block (out, m, l, q, k, v, s, TK, d, d + s.T,
                                              c->compute),
               "mpk_cuda_ring_attention_block");
}

static void
k_ring_end (MpBackend *be, float *out, float *lse, const float *m, const float *l,
            MpkAttnShape s)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_ring_attention_end (out, lse, m, l, s, c->compute),
             "mpk_cuda_ring_attention_end");
}

static void
k_ring_backward_block (MpBackend *be, float *dq, float *dk, float *dv, const float *dout,
                       const float *out, const float *lse, const float *q, const float *k,
                       const float *v, MpkAttnShape s, int TK, const int *qpos,
                       const int *kpos)
{
  CudaBackend *c = (CudaBackend *) be;
  const int *d = device_positions (c, qpos, s.T, kpos, TK);
  if (d != NULL)
    mpcu_note (c,
               mpk_cuda_ring_attention_backward_block (dq, dk, dv, dout, out, lse, q, k, v, s,
                                                       TK, d, d + s.T, c->compute),
               "mpk_cuda_ring_attention_backward_block");
}

static void
k_gather_rows (MpBackend *be, float *out, const float *x, const int *idx, const float *scale,
               int R, int C)
{
  CudaBackend *c = (CudaBackend *) be;
  const int *d = device_ints (c, idx, (gsize) R);
  if (d != NULL)
    mpcu_note (c, mpk_cuda_gather_rows (out, x, d, scale, R, C, c->compute),
               "mpk_cuda_gather_rows");
}

static void
k_scatter_add_rows (MpBackend *be, float *y, const float *x, const int *idx,
                    const float *scale, int R, int C)
{
  CudaBackend *c = (CudaBackend *) be;
  const int *d = device_ints (c, idx, (gsize) R);
  if (d != NULL)
    mpcu_note (c, mpk_cuda_scatter_add_rows (y, x, d, scale, R, C, c->compute),
               "mpk_cuda_scatter_add_rows");
}

static void
k_rows_dot (MpBackend *be, float *out, const float *a, const int *idx, const float *b, int R,
            int C)
{
  CudaBackend *c = (CudaBackend *) be;
  const int *d = device_ints (c, idx, (gsize) R);
  if (d != NULL)
    mpcu_note (c, mpk_cuda_rows_dot (out, a, d, b, R, C, c->compute), "mpk_cuda_rows_dot");
}

const MpKernelOps mpcu_kernels = {
  k_matmul_forward,
  k_matmul_backward,
  k_embedding_forward,
  k_embedding_backward,
  k_layernorm_forward,
  k_layernorm_backward,
  k_rmsnorm_forward,
  k_rmsnorm_backward,
  k_rotary_forward,
  k_rotary_backward,
  k_attention_forward,
  k_attention_backward,
  k_gelu_forward,
  k_gelu_backward,
  k_relu_forward,
  k_relu_backward,
  k_swiglu_forward,
  k_swiglu_backward,
  k_residual_forward,
  k_add,
  k_ce_stats,
  k_ce_rescale,
  k_ce_finish,
  k_ce_backward,
  k_adamw,
  k_sgd,
  k_sumsq,
  /* ring attention (context parallelism) */
  .ring_attention_begin = k_ring_begin,
  .ring_attention_block = k_ring_block,
  .ring_attention_end = k_ring_end,
  .ring_attention_backward_block = k_ring_backward_block,
  /* MoE token permutation */
  .gather_rows = k_gather_rows,
  .scatter_add_rows = k_scatter_add_rows,
  .rows_dot = k_rows_dot,
  .matmul_hp_forward = k_matmul_hp_forward,
  .matmul_hp_backward = k_matmul_hp_backward,
  .router_forward = k_router_forward,
  .grouped_matmul_forward = k_grouped_forward,
  .grouped_matmul_backward = k_grouped_backward,
  .attn = &mpcu_attn_kernels,
};
