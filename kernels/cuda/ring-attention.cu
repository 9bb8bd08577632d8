/* ring-attention.cu - the pieces of ring attention (context parallelism), the twins of
 * kernels/cpu/attention.c's mpk_cpu_ring_attention_*: the queries of a rank meet one block
 * of keys at a time, each key masked unless its position (KPOS) is at most the query's
 * (QPOS), the causal chunk mask of a sequence split over ranks.
 *   begin: out zeroed, running max m = -inf, running sum l = 0 per (b, h, t) row.
 *   block: attention.cuh's online-softmax walk (one warp per query row), started from
 *     the row's m, l and unnormalised out and written back to them: the merge of one more
 *     block. The reference takes the block's max first and rescales once; here each chunk
 *     of 32 keys rescales (the same value, other roundings).
 *   end: out /= l, lse = m + log l.
 *   backward_block: attention.cu's backward on one block with the mask, p recomputed
 *     from the forward's final lse, D = dout . out; dq += in registers, dk, dv += with
 *     atomics.
 * Positions are device arrays here (exec/backend-cuda-kernels.c stages the host's).
 * The walks are attention.cuh's (keys masked with AttByPos, the window by position too;
 * scores capped as the shape says; value heads DV wide). HD, DV <= 256. */
#include "kernels/cuda/attention.cuh"

#define ROWS ATT_ROWS

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
  size_t w = (size_t) s.NH * mpk_attn_dv (s);
  MPK_FOR (i, (size_t) s.B * s.T * w)
    out[(i / w) * s.ldo + i % w] = 0.0f;
}

__global__ static void
ring_block_k (float *out, float *m, float *l, const float *q, const float *k, const float *v,
              MpkAttnShape s, int TK, const int *qpos, const int *kpos, float scale)
{
  extern __shared__ float sh[];
  AttRow w = att_row (s);
  if (w.t >= s.T)
    return;                       /* warp-uniform; only warp syncs below */
  float *qs = att_query_load (sh, w, q, s);
  float acc[ATT_MAXD];
  att_slice_load (acc, out + w.oo, mpk_attn_dv (s), w.lane);
  float mr = m[w.r], lr = l[w.r];
  att_forward_walk (acc, &mr, &lr, qs, k + att_kv (w, s, TK), v + att_v (w, s, TK), s, TK, scale,
                    w.lane, AttByPos { kpos, qpos[w.t], s.window });
  att_slice_store (out + w.oo, acc, 1.0f, false, mpk_attn_dv (s), w.lane);
  if (w.lane == 0)
    {
      m[w.r] = mr;
      l[w.r] = lr;
    }
}

__global__ static void
ring_end_k (float *out, float *lse, const float *m, const float *l, MpkAttnShape s)
{
  int dv = mpk_attn_dv (s);
  MPK_FOR (i, (size_t) s.B * s.T * s.NH * dv)
    {
      size_t w = (size_t) s.NH * dv, bt = i / w;
      int h = (int) ((i % w) / dv), b = (int) (bt / s.T), t = (int) (bt % s.T);
      out[bt * s.ldo + i % w] /= l[row_of (s, b, h, t)];
    }
  MPK_FOR (i, (size_t) s.B * s.NH * s.T)
    lse[i] = m[i] + logf (l[i]);
}

/* attention.cuh's limits, and TK >= 0 keys in a block. */
static cudaError_t
check_shape (MpkAttnShape s, int TK)
{
  return TK < 0 ? cudaErrorInvalidValue : att_check_shape (s);
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
  size_t n = (size_t) s.B * s.T * s.NH * mpk_attn_dv (s);
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
  size_t n = (size_t) s.B * s.T * s.NH * mpk_attn_dv (s);
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
  att_backward_k<<<grid, ROWS * MPK_WARP, ROWS * (s.HD + mpk_attn_dv (s)) * sizeof (float),
                   stream>>> (dq, dk, dv, dout, out, lse, q, k, v, s,
                              AttRing { qpos, kpos, TK, s.window }, scale);
  return cudaGetLastError ();
}
