/* attn-extras.cu - the CUDA twins of kernels/cpu/attn-extras.c and of the GEGLU kernels
 * (activation.c): qk-norm, attention sinks, logit soft-capping, geglu. One thread per
 * head row (qk-norm), per softmax row (sinks) or per element, the reference's formulas
 * and precision (row statistics in double); weight gradients summed with atomics, so
 * their order differs from the CPU's (~1e-6 relative). */
#include "kernels/cuda/kernels-cuda.h"
#include "kernels/cuda/util.cuh"
#include <math.h>

#define LAUNCH MPK_LAUNCH

/* ---- qk-norm: one thread per (row, q or k head) ----------------------------------------- */

__global__ static void
qknorm_forward_k (float *qkv, float *raw, float *rstd, const float *wq, const float *wk, int N,
                  int NH, int NKV, int HD, int ld, float eps)
{
  int H = NH + NKV;
  MPK_FOR (i, (size_t) N * H)
    {
      int n = (int) (i / H), h = (int) (i % H);
      float *x = qkv + (size_t) n * ld + (size_t) h * HD, *keep = raw + i * HD;
      const float *w = h < NH ? wq : wk;
      double ss = 0;
      for (int d = 0; d < HD; d++)
        {
          keep[d] = x[d];
          ss += (double) x[d] * x[d];
        }
      float r = (float) (1.0 / sqrt (ss / HD + eps));
      for (int d = 0; d < HD; d++)
        x[d] = keep[d] * r * w[d];
      rstd[i] = r;
    }
}

__global__ static void
qknorm_backward_k (float *dqkv, float *dwq, float *dwk, const float *raw, const float *rstd,
                   const float *wq, const float *wk, int N, int NH, int NKV, int HD, int ld)
{
  int H = NH + NKV;
  MPK_FOR (i, (size_t) N * H)
    {
      int n = (int) (i / H), h = (int) (i % H);
      float *g = dqkv + (size_t) n * ld + (size_t) h * HD;
      const float *x = raw + i * HD, *w = h < NH ? wq : wk;
      float *dw = h < NH ? dwq : dwk;
      double r = rstd[i], dot = 0;
      for (int d = 0; d < HD; d++)
        {
          dot += (double) x[d] * w[d] * g[d];
          atomicAdd (&dw[d], (float) (x[d] * r * g[d]));
        }
      double c = r * r * dot / HD;
      for (int d = 0; d < HD; d++)
        g[d] = (float) (r * (w[d] * g[d] - x[d] * c));
    }
}

extern "C" cudaError_t
mpk_cuda_qknorm_forward (float *qkv, float *raw, float *rstd, const float *wq, const float *wk,
                         int N, int NH, int NKV, int HD, int ld, float eps, cudaStream_t stream)
{
  LAUNCH (qknorm_forward_k, (size_t) N * (NH + NKV), stream, qkv, raw, rstd, wq, wk, N, NH, NKV,
          HD, ld, eps);
}

extern "C" cudaError_t
mpk_cuda_qknorm_backward (float *dqkv, float *dwq, float *dwk, const float *raw,
                          const float *rstd, const float *wq, const float *wk, int N, int NH,
                          int NKV, int HD, int ld, cudaStream_t stream)
{
  LAUNCH (qknorm_backward_k, (size_t) N * (NH + NKV), stream, dqkv, dwq, dwk, raw, rstd, wq, wk,
          N, NH, NKV, HD, ld);
}

/* ---- attention sinks: one thread per softmax row (b, h, t) ------------------------------ */

/* Rows of (B, NH, T) in that order; out row (b, t) head h. */
static __device__ __forceinline__ size_t
sink_out_at (MpkAttnShape s, size_t r)
{
  int t = (int) (r % s.T), h = (int) ((r / s.T) % s.NH), b = (int) (r / ((size_t) s.T * s.NH));
  return ((size_t) b * s.T + t) * s.ldo + (size_t) h * mpk_attn_dv (s);
}

__global__ static void
sinks_forward_k (float *out, float *lse, float *probs, const float *sinks, MpkAttnShape s)
{
  MPK_FOR (r, (size_t) s.B * s.NH * s.T)
    {
      int h = (int) ((r / s.T) % s.NH);
      double l = lse[r], sk = sinks[h], m = fmax (l, sk);
      double nl = m + log (exp (l - m) + exp (sk - m));
      float f = (float) exp (l - nl);
      float *o = out + sink_out_at (s, r);
      for (int d = 0; d < mpk_attn_dv (s); d++)
        o[d] *= f;
      if (probs != NULL)
        for (int j = 0; j < s.T; j++)
          probs[r * s.T + j] *= f;
      lse[r] = (float) nl;
    }
}

__global__ static void
sinks_backward_k (float *dsinks, const float *dout, const float *out, const float *lse,
                  const float *sinks, MpkAttnShape s)
{
  MPK_FOR (r, (size_t) s.B * s.NH * s.T)
    {
      int h = (int) ((r / s.T) % s.NH);
      size_t at = sink_out_at (s, r);
      double D = 0;
      for (int d = 0; d < mpk_attn_dv (s); d++)
        D += (double) dout[at + d] * out[at + d];
      atomicAdd (&dsinks[h], (float) (-exp ((double) sinks[h] - lse[r]) * D));
    }
}

extern "C" cudaError_t
mpk_cuda_attention_sinks_forward (float *out, float *lse, float *probs, const float *sinks,
                                  MpkAttnShape s, cudaStream_t stream)
{
  LAUNCH (sinks_forward_k, (size_t) s.B * s.NH * s.T, stream, out, lse, probs, sinks, s);
}

extern "C" cudaError_t
mpk_cuda_attention_sinks_backward (float *dsinks, const float *dout, const float *out,
                                   const float *lse, const float *sinks, MpkAttnShape s,
                                   cudaStream_t stream)
{
  LAUNCH (sinks_backward_k, (size_t) s.B * s.NH * s.T, stream, dsinks, dout, out, lse, sinks, s);
}

/* ---- soft-capping, geglu: one thread per element ---------------------------------------- */

__global__ static void
softcap_forward_k (float *x, size_t n, float cap)
{
  MPK_FOR (i, n) x[i] = cap * tanhf (x[i] / cap);
}

__global__ static void
softcap_backward_k (float *dx, const float *y, size_t n, float cap)
{
  MPK_FOR (i, n)
    {
      float t = y[i] / cap;
      dx[i] *= 1.0f - t * t;
    }
}

extern "C" cudaError_t
mpk_cuda_softcap_forward (float *x, size_t n, float cap, cudaStream_t stream)
{
  LAUNCH (softcap_forward_k, n, stream, x, n, cap);
}

extern "C" cudaError_t
mpk_cuda_softcap_backward (float *dx, const float *y, size_t n, float cap, cudaStream_t stream)
{
  LAUNCH (softcap_backward_k, n, stream, dx, y, n, cap);
}

__global__ static void
geglu_forward_k (float *out, const float *inp, int N, int F)
{
  MPK_FOR (i, (size_t) N * F)
    {
      size_t n = i / F, f = i % F;
      const float *gate = inp + n * 2 * F;
      out[i] = mpk_gelu (gate[f]) * gate[F + f];
    }
}

__global__ static void
geglu_backward_k (float *dinp, const float *inp, const float *dout, int N, int F)
{
  MPK_FOR (i, (size_t) N * F)
    {
      size_t n = i / F, f = i % F;
      const float *gate = inp + n * 2 * F;
      float *dgate = dinp + n * 2 * F;
      dgate[f] += dout[i] * gate[F + f] * mpk_gelu_grad (gate[f]);
      dgate[F + f] += dout[i] * mpk_gelu (gate[f]);
    }
}

extern "C" cudaError_t
mpk_cuda_geglu_forward (float *out, const float *inp, int N, int F, cudaStream_t stream)
{
  LAUNCH (geglu_forward_k, (size_t) N * F, stream, out, inp, N, F);
}

extern "C" cudaError_t
mpk_cuda_geglu_backward (float *dinp, const float *inp, const float *dout, int N, int F,
                         cudaStream_t stream)
{
  LAUNCH (geglu_backward_k, (size_t) N * F, stream, dinp, inp, dout, N, F);
}
