/* attention.cu - causal attention with grouped-query heads (kernels/cpu/attention.c's
 * twin), fused: nothing quadratic is stored. Correctness first, simple, not FlashAttention:
 *   forward: one warp per query row, ROWS rows (a query tile) per block, grid
 *     (T/ROWS, NH, B). Keys come in chunks of 32, one per lane (a full q.k dot each); a
 *     warp max and sum per chunk drive the online softmax, then the chunk's 32 value rows
 *     are added to the per-lane output slice (HD/32 floats in registers). lse saved.
 *   backward: the same walk, recomputing p = exp(s - lse), dp = dout.v, ds = p (dp - D)
 *     with D = dout.out; dq in registers, dk and dv accumulated with atomics.
 * Scores in scaled units (q.k / sqrt(HD)) as the reference. HD <= 256. */
#include "kernels/cuda/kernels-cuda.h"
#include "kernels/cuda/util.cuh"
#include <math.h>

#define ROWS 4          /* query rows (warps) per block */
#define MAXD 8          /* HD / 32 slices per lane: HD <= 256 */

__global__ static void
attn_forward_k (float *out, float *lse, const float *q, const float *k, const float *v,
                MpkAttnShape s, float scale)
{
  extern __shared__ float sh[];
  int warp = threadIdx.x / MPK_WARP, lane = threadIdx.x % MPK_WARP;
  int t = blockIdx.x * ROWS + warp, h = blockIdx.y, b = blockIdx.z;
  if (t >= s.T)
    return;                       /* warp-uniform; only warp syncs below */
  int hk = h / (s.NH / s.NKV), HD = s.HD;
  float *qs = sh + warp * HD;
  const float *qrow = q + ((size_t) b * s.T + t) * s.ldq + (size_t) h * HD;
  for (int d = lane; d < HD; d += MPK_WARP)
    qs[d] = qrow[d];
  __syncwarp ();
  const float *kbase = k + (size_t) b * s.T * s.ldkv + (size_t) hk * HD;
  const float *vbase = v + (size_t) b * s.T * s.ldkv + (size_t) hk * HD;
  float acc[MAXD];
#pragma unroll
  for (int i = 0; i < MAXD; i++)
    acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int j0 = 0; j0 <= t; j0 += MPK_WARP)
    {
      int j = j0 + lane;
      float sc = -INFINITY;
      if (j <= t)
        {
          const float *krow = kbase + (size_t) j * s.ldkv;
          float dot = 0.0f;
          for (int d = 0; d < HD; d++)
            dot += qs[d] * krow[d];
          sc = dot * scale;
        }
      float mnew = fmaxf (m, warp_max (sc));
      float p = j <= t ? expf (sc - mnew) : 0.0f;
      float corr = expf (m - mnew);
      l = l * corr + warp_sum (p);
#pragma unroll
      for (int i = 0; i < MAXD; i++)
        acc[i] *= corr;
      int nj = min (MPK_WARP, t - j0 + 1);
      for (int jj = 0; jj < nj; jj++)
        {
          float pj = __shfl_sync (0xffffffffu, p, jj);
          const float *vrow = vbase + (size_t) (j0 + jj) * s.ldkv;
#pragma unroll
          for (int i = 0; i < MAXD; i++)
            {
              int d = lane + i * MPK_WARP;
              if (d < HD)
                acc[i] += pj * vrow[d];
            }
        }
      m = mnew;
    }
  float *orow = out + ((size_t) b * s.T + t) * s.ldo + (size_t) h * HD;
#pragma unroll
  for (int i = 0; i < MAXD; i++)
    {
      int d = lane + i * MPK_WARP;
      if (d < HD)
        orow[d] = acc[i] / l;
    }
  if (lane == 0)
    lse[((size_t) b * s.NH + h) * s.T + t] = m + logf (l);
}

/* probs (B, NH, T, T) = exp(s - lse) below the diagonal, zeros above. */
__global__ static void
attn_probs_k (float *probs, const float *lse, const float *q, const float *k, MpkAttnShape s,
              float scale)
{
  MPK_FOR (idx, (size_t) s.B * s.NH * s.T * s.T)
    {
      int j = (int) (idx % s.T);
      size_t r = idx / s.T;   /* (b * NH + h) * T + t */
      int t = (int) (r % s.T), h = (int) ((r / s.T) % s.NH), b = (int) (r / s.T / s.NH);
      float p = 0.0f;
      if (j <= t)
        {
          int hk = h / (s.NH / s.NKV);
          const float *qrow = q + ((size_t) b * s.T + t) * s.ldq + (size_t) h * s.HD;
          const float *krow = k + ((size_t) b * s.T + j) * s.ldkv + (size_t) hk * s.HD;
          float dot = 0.0f;
          for (int d = 0; d < s.HD; d++)
            dot += qrow[d] * krow[d];
          p = expf (dot * scale - lse[r]);
        }
      probs[idx] = p;
    }
}

__global__ static void
attn_backward_k (float *dq, float *dk, float *dv, const float *dout, const float *out,
                 const float *lse, const float *q, const float *k, const float *v,
                 MpkAttnShape s, float scale)
{
  extern __shared__ float sh[];
  int warp = threadIdx.x / MPK_WARP, lane = threadIdx.x % MPK_WARP;
  int t = blockIdx.x * ROWS + warp, h = blockIdx.y, b = blockIdx.z;
  if (t >= s.T)
    return;
  int hk = h / (s.NH / s.NKV), HD = s.HD;
  float *qs = sh + warp * 2 * HD, *dos = qs + HD;
  const float *qrow = q + ((size_t) b * s.T + t) * s.ldq + (size_t) h * HD;
  const float *dorow = dout + ((size_t) b * s.T + t) * s.ldo + (size_t) h * HD;
  const float *orow = out + ((size_t) b * s.T + t) * s.ldo + (size_t) h * HD;
  float dd = 0.0f;
  for (int d = lane; d < HD; d += MPK_WARP)
    {
      qs[d] = qrow[d];
      dos[d] = dorow[d];
      dd += dorow[d] * orow[d];
    }
  float D = warp_sum (dd);
  __syncwarp ();
  float L = lse[((size_t) b * s.NH + h) * s.T + t];
  size_t kvoff = (size_t) b * s.T * s.ldkv + (size_t) hk * HD;
  float acc[MAXD];
#pragma unroll
  for (int i = 0; i < MAXD; i++)
    acc[i] = 0.0f;
  for (int j0 = 0; j0 <= t; j0 += MPK_WARP)
    {
      int j = j0 + lane;
      float p = 0.0f, ds = 0.0f;
      if (j <= t)
        {
          const float *krow = k + kvoff + (size_t) j * s.ldkv;
          const float *vrow = v + kvoff + (size_t) j * s.ldkv;
          float dot = 0.0f, dp = 0.0f;
          for (int d = 0; d < HD; d++)
            {
              dot += qs[d] * krow[d];
              dp += dos[d] * vrow[d];
            }
          p = expf (dot * scale - L);
          ds = p * (dp - D);
        }
      int nj = min (MPK_WARP, t - j0 + 1);
      for (int jj = 0; jj < nj; jj++)
        {
          float pj = __shfl_sync (0xffffffffu, p, jj);
          float dsj = __shfl_sync (0xffffffffu, ds, jj);
          size_t at = kvoff + (size_t) (j0 + jj) * s.ldkv;
#pragma unroll
          for (int i = 0; i < MAXD; i++)
            {
              int d = lane + i * MPK_WARP;
              if (d < HD)
                {
                  acc[i] += dsj * k[at + d];
                  atomicAdd (&dk[at + d], scale * dsj * qs[d]);
                  atomicAdd (&dv[at + d], pj * dos[d]);
                }
            }
        }
    }
  float *dqrow = dq + ((size_t) b * s.T + t) * s.ldq + (size_t) h * HD;
#pragma unroll
  for (int i = 0; i < MAXD; i++)
    {
      int d = lane + i * MPK_WARP;
      if (d < HD)
        dqrow[d] += scale * acc[i];
    }
}

static cudaError_t
check_shape (MpkAttnShape s)
{
  if (s.HD <= 0 || s.HD > MAXD * MPK_WARP || s.NKV <= 0 || s.NH % s.NKV != 0)
    return cudaErrorInvalidValue;
  if (s.NH > 65535 || s.B > 65535)
    return cudaErrorInvalidConfiguration;
  return cudaSuccess;
}

extern "C" cudaError_t
mpk_cuda_attention_forward (float *out, float *lse, float *probs, const float *q,
                            const float *k, const float *v, MpkAttnShape s,
                            cudaStream_t stream)
{
  cudaError_t e = check_shape (s);
  if (e != cudaSuccess || s.B == 0 || s.T == 0 || s.NH == 0)
    return e;
  float scale = 1.0f / sqrtf ((float) s.HD);
  dim3 grid ((s.T + ROWS - 1) / ROWS, s.NH, s.B);
  attn_forward_k<<<grid, ROWS * MPK_WARP, ROWS * s.HD * sizeof (float), stream>>> (
      out, lse, q, k, v, s, scale);
  e = cudaGetLastError ();
  if (e != cudaSuccess || probs == NULL)
    return e;
  size_t n = (size_t) s.B * s.NH * s.T * s.T;
  attn_probs_k<<<mpk_blocks (n, 256), 256, 0, stream>>> (probs, lse, q, k, s, scale);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_attention_backward (float *dq, float *dk, float *dv, const float *dout,
                             const float *out, const float *lse, const float *probs,
                             const float *q, const float *k, const float *v, MpkAttnShape s,
                             cudaStream_t stream)
{
  (void) probs;   /* recomputed from lse: the same values the forward normalised */
  cudaError_t e = check_shape (s);
  if (e != cudaSuccess || s.B == 0 || s.T == 0 || s.NH == 0)
    return e;
  float scale = 1.0f / sqrtf ((float) s.HD);
  dim3 grid ((s.T + ROWS - 1) / ROWS, s.NH, s.B);
  attn_backward_k<<<grid, ROWS * MPK_WARP, 2 * ROWS * s.HD * sizeof (float), stream>>> (
      dq, dk, dv, dout, out, lse, q, k, v, s, scale);
  return cudaGetLastError ();
}
