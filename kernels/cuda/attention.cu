/* attention.cu - causal attention with grouped-query heads (kernels/cpu/attention.c's
 * twin), fused: nothing quadratic is stored. Correctness first, simple, not FlashAttention:
 *   forward: one warp per query row, ROWS rows (a query tile) per block, grid
 *     (T/ROWS, NH, B). Keys come in chunks of 32, one per lane (a full q.k dot each); a
 *     warp max and sum per chunk drive the online softmax, then the chunk's 32 value rows
 *     are added to the per-lane output slice (HD/32 floats in registers). lse saved.
 *   backward: the same walk, recomputing p = exp(s - lse), dp = dout.v, ds = p (dp - D)
 *     with D = dout.out; dq in registers, dk and dv accumulated with atomics.
 * Scores in scaled units (q.k / sqrt(HD)) as the reference, soft-capped and windowed as
 * its shape says; value heads DV wide (MLA). HD, DV <= 256. The walks are attention.cuh's,
 * shared with ring-attention.cu. */
#include "kernels/cuda/attention.cuh"

#define ROWS ATT_ROWS

__global__ static void
attn_forward_k (float *out, float *lse, const float *q, const float *k, const float *v,
                MpkAttnShape s, float scale)
{
  extern __shared__ float sh[];
  AttRow w = att_row (s);
  if (w.t >= s.T)
    return;                       /* warp-uniform; only warp syncs below */
  float *qs = att_query_load (sh, w, q, s);
  float acc[ATT_MAXD] = { 0.0f };
  float m = -INFINITY, l = 0.0f;
  att_forward_walk (acc, &m, &l, qs, k + att_kv (w, s, s.T), v + att_v (w, s, s.T), s, w.t + 1,
                    scale, w.lane, AttAll { w.t, s.window });
#pragma unroll
  for (int i = 0; i < ATT_MAXD; i++)
    acc[i] /= l;
  att_slice_store (out + w.oo, acc, 1.0f, false, mpk_attn_dv (s), w.lane);
  if (w.lane == 0)
    lse[w.r] = m + logf (l);
}

/* probs (B, NH, T, T) = exp(s - lse) for the keys the row sees, zeros elsewhere. */
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
      if (j <= t && (s.window <= 0 || t - j < s.window))
        {
          int hk = h / (s.NH / s.NKV);
          const float *qrow = q + ((size_t) b * s.T + t) * s.ldq + (size_t) h * s.HD;
          const float *krow = k + ((size_t) b * s.T + j) * s.ldkv + (size_t) hk * s.HD;
          float dot = 0.0f;
          for (int d = 0; d < s.HD; d++)
            dot += qrow[d] * krow[d];
          p = expf (att_score (dot, scale, s.softcap) - lse[r]);
        }
      probs[idx] = p;
    }
}

extern "C" cudaError_t
mpk_cuda_attention_forward (float *out, float *lse, float *probs, const float *q,
                            const float *k, const float *v, MpkAttnShape s,
                            cudaStream_t stream)
{
  cudaError_t e = att_check_shape (s);
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
  cudaError_t e = att_check_shape (s);
  if (e != cudaSuccess || s.B == 0 || s.T == 0 || s.NH == 0)
    return e;
  float scale = 1.0f / sqrtf ((float) s.HD);
  dim3 grid ((s.T + ROWS - 1) / ROWS, s.NH, s.B);
  att_backward_k<<<grid, ROWS * MPK_WARP, ROWS * (s.HD + mpk_attn_dv (s)) * sizeof (float),
                   stream>>> (dq, dk, dv, dout, out, lse, q, k, v, s,
                              AttCausal { s.T, s.window }, scale);
  return cudaGetLastError ();
}
