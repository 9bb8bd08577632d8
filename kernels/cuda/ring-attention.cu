/* ring-attention.cu - the pieces of ring attention (context parallelism), the twins of
 * kernels/cpu/attention.c's mpk_cpu_ring_attention_*: the queries of a rank meet one block
 * of keys at a time, each key masked unless its position (KPOS) is at most the query's
 * (QPOS), the causal chunk mask of a sequence split over ranks.
 *   begin: out zeroed, running max m = -inf, running sum l = 0 per (b, h, t) row.
 *   block: attention.cu's walk (one warp per query row, ROWS rows per block, keys in
 *     chunks of 32, one per lane), started from the row's m, l and unnormalised out and
 *     written back to them: the online-softmax merge of one more block. The reference
 *     takes the block's max first and rescales once; here each chunk rescales (the same
 *     value, other roundings).
 *   end: out /= l, lse = m + log l.
 *   backward_block: attention.cu's backward on one block with the mask, p recomputed
 *     from the forward's final lse, D = dout . out; dq += in registers, dk, dv += with
 *     atomics.
 * Positions are device arrays here (exec/backend-cuda-kernels.c stages the host's).
 * HD <= 256, as attention.cu. */
#include "kernels/cuda/kernels-cuda.h"
#include "kernels/cuda/util.cuh"
#include <math.h>

#define ROWS 4          /* query rows (warps) per block */
#define MAXD 8          /* HD / 32 slices per lane: HD <= 256 */

static __device__ __forceinline__ size_t
row_of (MpkAttnShape s, int b, int h, int t)
{
  return ((size_t) b * s.NH + h) * s.T + t;
}

__global__ static void
ring_begin_k (float *out, float *m, float *l, MpkAttnShape s)
{
  MPK_FOR (i, (size_t) s.B * s.NH * s.T)
    {
      m[i] = -INFINITY;
      l[i] = 0.0f;
    }
  size_t w = (size_t) s.NH * s.HD;
  MPK_FOR (i, (size_t) s.B * s.T * w)
    out[(i / w) * s.ldo + i % w] = 0.0f;
}

__global__ static void
ring_block_k (float *out, float *m, float *l, const float *q, const float *k, const float *v,
              MpkAttnShape s, int TK, const int *qpos, const int *kpos, float scale)
{
  extern __shared__ float sh[];
  int warp = threadIdx.x / MPK_WARP, lane = threadIdx.x % MPK_WARP;
  int t = blockIdx.x * ROWS + warp, h = blockIdx.y, b = blockIdx.z;
  if (t >= s.T)
    return;                       /* warp-uniform; only warp syncs below */
  int hk = h / (s.NH / s.NKV), HD = s.HD, qp = qpos[t];
  float *qs = sh + warp * HD;
  const float *qrow = q + ((size_t) b * s.T + t) * s.ldq + (size_t) h * HD;
  for (int d = lane; d < HD; d += MPK_WARP)
    qs[d] = qrow[d];
  __syncwarp ();
  const float *kbase = k + (size_t) b * TK * s.ldkv + (size_t) hk * HD;
  const float *vbase = v + (size_t) b * TK * s.ldkv + (size_t) hk * HD;
  size_t r = row_of (s, b, h, t);
  float *orow = out + ((size_t) b * s.T + t) * s.ldo + (size_t) h * HD;
  float acc[MAXD];
#pragma unroll
  for (int i = 0; i < MAXD; i++)
    {
      int d = lane + i * MPK_WARP;
      acc[i] = d < HD ? orow[d] : 0.0f;
    }
  float mr = m[r], lr = l[r];
  for (int j0 = 0; j0 < TK; j0 += MPK_WARP)
    {
      int j = j0 + lane;
      int live = j < TK && kpos[j] <= qp;
      float sc = -INFINITY;
      if (live)
        {
          const float *krow = kbase + (size_t) j * s.ldkv;
          float dot = 0.0f;
          for (int d = 0; d < HD; d++)
            dot += qs[d] * krow[d];
          sc = dot * scale;
        }
      float mnew = fmaxf (mr, warp_max (sc));
      if (mnew == -INFINITY)
        continue;                 /* nothing seen yet: this chunk lies in the row's future */
      float p = live ? expf (sc - mnew) : 0.0f;
      float corr = expf (mr - mnew);   /* 0 for the first keys the row sees */
      lr = lr * corr + warp_sum (p);
#pragma unroll
      for (int i = 0; i < MAXD; i++)
        acc[i] *= corr;
      int nj = min (MPK_WARP, TK - j0);
      for (int jj = 0; jj < nj; jj++)
        {
          float pj = __shfl_sync (0xffffffffu, p, jj);
          if (pj == 0.0f)
            continue;             /* masked (warp-uniform: every lane has the same pj) */
          const float *vrow = vbase + (size_t) (j0 + jj) * s.ldkv;
#pragma unroll
          for (int i = 0; i < MAXD; i++)
            {
              int d = lane + i * MPK_WARP;
              if (d < HD)
                acc[i] += pj * vrow[d];
            }
        }
      mr = mnew;
    }
#pragma unroll
  for (int i = 0; i < MAXD; i++)
    {
      int d = lane + i * MPK_WARP;
      if (d < HD)
        orow[d] = acc[i];
    }
  if (lane == 0)
    {
      m[r] = mr;
      l[r] = lr;
    }
}

__global__ static void
ring_end_k (float *out, float *lse, const float *m, const float *l, MpkAttnShape s)
{
  MPK_FOR (i, (size_t) s.B * s.T * s.NH * s.HD)
    {
      size_t w = (size_t) s.NH * s.HD, bt = i / w;
      int h = (int) ((i % w) / s.HD), b = (int) (bt / s.T), t = (int) (bt % s.T);
      out[bt * s.ldo + i % w] /= l[row_of (s, b, h, t)];
    }
  MPK_FOR (i, (size_t) s.B * s.NH * s.T)
    lse[i] = m[i] + logf (l[i]);
}

__global__ static void
ring_backward_k (float *dq, float *dk, float *dv, const float *dout, const float *out,
                 const float *lse, const float *q, const float *k, const float *v,
                 MpkAttnShape s, int TK, const int *qpos, const int *kpos, float scale)
{
  extern __shared__ float sh[];
  int warp = threadIdx.x / MPK_WARP, lane = threadIdx.x % MPK_WARP;
  int t = blockIdx.x * ROWS + warp, h = blockIdx.y, b = blockIdx.z;
  if (t >= s.T)
    return;
  int hk = h / (s.NH / s.NKV), HD = s.HD, qp = qpos[t];
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
  float L = lse[row_of (s, b, h, t)];
  size_t kvoff = (size_t) b * TK * s.ldkv + (size_t) hk * HD;
  float acc[MAXD];
#pragma unroll
  for (int i = 0; i < MAXD; i++)
    acc[i] = 0.0f;
  for (int j0 = 0; j0 < TK; j0 += MPK_WARP)
    {
      int j = j0 + lane;
      int live = j < TK && kpos[j] <= qp;
      float p = 0.0f, ds = 0.0f;
      if (live)
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
      if (__ballot_sync (0xffffffffu, live) == 0)
        continue;                 /* the whole chunk is in the row's future */
      int nj = min (MPK_WARP, TK - j0);
      for (int jj = 0; jj < nj; jj++)
        {
          int lj = __shfl_sync (0xffffffffu, live, jj);
          float pj = __shfl_sync (0xffffffffu, p, jj);
          float dsj = __shfl_sync (0xffffffffu, ds, jj);
          if (!lj)
            continue;             /* warp-uniform */
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

/* attention.cu's limits, and TK >= 0 keys in a block. */
static cudaError_t
check_shape (MpkAttnShape s, int TK)
{
  if (s.HD <= 0 || s.HD > MAXD * MPK_WARP || s.NKV <= 0 || s.NH % s.NKV != 0 || TK < 0)
    return cudaErrorInvalidValue;
  if (s.NH > 65535 || s.B > 65535)
    return cudaErrorInvalidConfiguration;
  return cudaSuccess;
}

static int
empty (MpkAttnShape s)
{
  return s.B == 0 || s.T == 0 || s.NH == 0;
}

extern "C" cudaError_t
mpk_cuda_ring_attention_begin (float *out, float *m, float *l, MpkAttnShape s,
                               cudaStream_t stream)
{
  cudaError_t e = check_shape (s, 0);
  if (e != cudaSuccess || empty (s))
    return e;
  size_t n = (size_t) s.B * s.T * s.NH * s.HD;
  ring_begin_k<<<mpk_blocks (n, 256), 256, 0, stream>>> (out, m, l, s);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_ring_attention_block (float *out, float *m, float *l, const float *q, const float *k,
                               const float *v, MpkAttnShape s, int TK, const int *qpos,
                               const int *kpos, cudaStream_t stream)
{
  cudaError_t e = check_shape (s, TK);
  if (e != cudaSuccess || empty (s) || TK == 0)
    return e;
  float scale = 1.0f / sqrtf ((float) s.HD);
  dim3 grid ((s.T + ROWS - 1) / ROWS, s.NH, s.B);
  ring_block_k<<<grid, ROWS * MPK_WARP, ROWS * s.HD * sizeof (float), stream>>> (
      out, m, l, q, k, v, s, TK, qpos, kpos, scale);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_ring_attention_end (float *out, float *lse, const float *m, const float *l,
                             MpkAttnShape s, cudaStream_t stream)
{
  cudaError_t e = check_shape (s, 0);
  if (e != cudaSuccess || empty (s))
    return e;
  size_t n = (size_t) s.B * s.T * s.NH * s.HD;
  ring_end_k<<<mpk_blocks (n, 256), 256, 0, stream>>> (out, lse, m, l, s);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_ring_attention_backward_block (float *dq, float *dk, float *dv, const float *dout,
                                        const float *out, const float *lse, const float *q,
                                        const float *k, const float *v, MpkAttnShape s, int TK,
                                        const int *qpos, const int *kpos, cudaStream_t stream)
{
  cudaError_t e = check_shape (s, TK);
  if (e != cudaSuccess || empty (s) || TK == 0)
    return e;
  float scale = 1.0f / sqrtf ((float) s.HD);
  dim3 grid ((s.T + ROWS - 1) / ROWS, s.NH, s.B);
  ring_backward_k<<<grid, ROWS * MPK_WARP, 2 * ROWS * s.HD * sizeof (float), stream>>> (
      dq, dk, dv, dout, out, lse, q, k, v, s, TK, qpos, kpos, scale);
  return cudaGetLastError ();
}
