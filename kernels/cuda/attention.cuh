/* attention.cuh - the warp walk that attention.cu (causal attention) and
 * ring-attention.cu (its ring pieces) share: one warp per query row, ATT_ROWS rows per
 * block, keys in chunks of 32 (one per lane, a full q.k dot each), a key counted where
 * the caller's LIVE functor says (causal: every key up to the row's; the ring: by
 * position). Each lane holds its HD/32 slice of the row's output (or dq) in registers.
 * Static inline functions, functors and one template kernel (each .cu instantiates it
 * for its own keys): no definitions with linkage. HD, DV <= 256. Value heads may be
 * narrower than q and k (DV, ldv: MLA's v_head_dim); a sliding window masks by position
 * and a soft cap bends the scores (cap tanh (x / cap)), as the reference. */
#pragma once
#include "kernels/cuda/kernels-cuda.h"   /* MpkAttnShape */
#include "kernels/cuda/util.cuh"
#include <math.h>

#define ATT_ROWS 4      /* query rows (warps) per block */
#define ATT_MAXD 8      /* HD / 32 slices per lane: HD <= 256 */

/* Every key of the walk up to the row's counts (the caller bounds the walk by the row's
 * position), inside the sliding window when there is one: key j at position j. */
struct AttAll
{
  int qp, window;
  __device__ bool operator() (int j) const { return window <= 0 || qp - j < window; }
};

/* The key counts where its position is at most the query's (the causal chunk mask) and
 * inside the window. */
struct AttByPos
{
  const int *kpos;
  int qp, window;
  __device__ bool operator() (int j) const
  {
    return kpos[j] <= qp && (window <= 0 || qp - kpos[j] < window);
  }
};

/* The scaled score of a q.k DOT, soft-capped when CAP > 0. */
static __device__ __forceinline__ float
att_score (float dot, float scale, float cap)
{
  float x = dot * scale;
  return cap > 0.0f ? cap * tanhf (x / cap) : x;
}

/* d score / d (its uncapped value), from the score. */
static __device__ __forceinline__ float
att_score_grad (float sc, float cap)
{
  return cap > 0.0f ? 1.0f - (sc / cap) * (sc / cap) : 1.0f;
}

/* The query row this warp walks: (b, h, t) from the grid (ATT_ROWS rows per block,
 * grid (T / ATT_ROWS, NH, B)), its kv head, and its offsets in q (and dq), in out (and
 * dout) and among the (B, NH, T) rows of lse. */
struct AttRow
{
  int lane, warp, b, h, t, hk;
  size_t qo, oo, r;
};

static __device__ __forceinline__ AttRow
att_row (MpkAttnShape s)
{
  AttRow w;
  w.warp = threadIdx.x / MPK_WARP;
  w.lane = threadIdx.x % MPK_WARP;
  w.t = blockIdx.x * ATT_ROWS + w.warp;
  w.h = blockIdx.y;
  w.b = blockIdx.z;
  w.hk = w.h / (s.NH / s.NKV);
  size_t bt = (size_t) w.b * s.T + w.t;
  w.qo = bt * s.ldq + (size_t) w.h * s.HD;
  w.oo = bt * s.ldo + (size_t) w.h * mpk_attn_dv (s);
  w.r = ((size_t) w.b * s.NH + w.h) * s.T + w.t;
  return w;
}

/* The offset of row W's kv head in k (and dk), and in v (and dv), with NK keys per
 * sequence. */
static __device__ __forceinline__ size_t
att_kv (AttRow w, MpkAttnShape s, int nk)
{
  return (size_t) w.b * nk * s.ldkv + (size_t) w.hk * s.HD;
}

static __device__ __forceinline__ size_t
att_v (AttRow w, MpkAttnShape s, int nk)
{
  return (size_t) w.b * nk * mpk_attn_ldv (s) + (size_t) w.hk * mpk_attn_dv (s);
}

/* Row W's query from Q into its warp's HD floats of the block's shared memory SH;
 * returns them. */
static __device__ __forceinline__ float *
att_query_load (float *sh, AttRow w, const float *q, MpkAttnShape s)
{
  float *qs = sh + w.warp * s.HD;
  for (int d = w.lane; d < s.HD; d += MPK_WARP)
    qs[d] = q[w.qo + d];
  __syncwarp ();
  return qs;
}

/* The lane's slice of ROW (HD floats) into ACC (zeros past HD). */
static __device__ __forceinline__ void
att_slice_load (float *acc, const float *row, int HD, int lane)
{
#pragma unroll
  for (int i = 0; i < ATT_MAXD; i++)
    {
      int d = lane + i * MPK_WARP;
      acc[i] = d < HD ? row[d] : 0.0f;
    }
}

/* ROW (HD floats) = ACC * MUL, or += when ADD. */
static __device__ __forceinline__ void
att_slice_store (float *row, const float *acc, float mul, bool add, int HD, int lane)
{
#pragma unroll
  for (int i = 0; i < ATT_MAXD; i++)
    {
      int d = lane + i * MPK_WARP;
      if (d < HD)
        row[d] = (add ? row[d] : 0.0f) + acc[i] * mul;
    }
}

/* The online-softmax walk of query QS (HD, shared) over NK keys (rows S.ldkv apart from
 * KB, values DV wide S.ldv apart from VB): the running max *M, sum *L and the lane's
 * unnormalised output slice ACC move to each chunk's new max. A chunk with no live key
 * before any was seen is skipped (the row's m stays -inf). */
template <typename Live>
static __device__ __forceinline__ void
att_forward_walk (float *acc, float *m, float *l, const float *qs, const float *kb,
                  const float *vb, MpkAttnShape s, int nk, float scale, int lane, Live live)
{
  int ld = s.ldkv, ldv = mpk_attn_ldv (s), HD = s.HD, DV = mpk_attn_dv (s);
  for (int j0 = 0; j0 < nk; j0 += MPK_WARP)
    {
      int j = j0 + lane;
      bool ok = j < nk && live (j);
      float sc = -INFINITY;
      if (ok)
        {
          const float *krow = kb + (size_t) j * ld;
          float dot = 0.0f;
          for (int d = 0; d < HD; d++)
            dot += qs[d] * krow[d];
          sc = att_score (dot, scale, s.softcap);
        }
      float mnew = fmaxf (*m, warp_max (sc));
      if (mnew == -INFINITY)
        continue;                 /* warp-uniform: nothing live yet */
      float p = ok ? expf (sc - mnew) : 0.0f;
      float corr = expf (*m - mnew);   /* 0 for the first keys the row sees */
      *l = *l * corr + warp_sum (p);
#pragma unroll
      for (int i = 0; i < ATT_MAXD; i++)
        acc[i] *= corr;
      int nj = min (MPK_WARP, nk - j0);
      for (int jj = 0; jj < nj; jj++)
        {
          float pj = __shfl_sync (0xffffffffu, p, jj);
          if (pj == 0.0f)
            continue;             /* masked (warp-uniform) */
          const float *vrow = vb + (size_t) (j0 + jj) * ldv;
#pragma unroll
          for (int i = 0; i < ATT_MAXD; i++)
            {
              int d = lane + i * MPK_WARP;
              if (d < DV)
                acc[i] += pj * vrow[d];
            }
        }
      *m = mnew;
    }
}

/* Row t's query (HD) and output gradient (DV) into QS, DOS (shared); returns
 * D = dout . out, the softmax gradient's row term. */
static __device__ __forceinline__ float
att_backward_load (float *qs, float *dos, const float *qrow, const float *dorow,
                   const float *orow, int HD, int DV, int lane)
{
  float dd = 0.0f;
  for (int d = lane; d < HD; d += MPK_WARP)
    qs[d] = qrow[d];
  for (int d = lane; d < DV; d += MPK_WARP)
    {
      dos[d] = dorow[d];
      dd += dorow[d] * orow[d];
    }
  float D = warp_sum (dd);
  __syncwarp ();
  return D;
}

/* The backward walk over NK keys (K, DK at KOFF, rows S.ldkv apart; V, DV at VOFF, S.ldv
 * apart) with the forward's final lse L: p = exp(s - L), ds = p (dout . v - D) times the
 * cap's derivative; the lane's dq slice ACC += ds k (unscaled), dk += scale ds q and
 * dv += p dout with atomics. */
template <typename Live>
static __device__ __forceinline__ void
att_backward_walk (float *acc, float *dk, float *dv, const float *qs, const float *dos,
                   float D, float L, const float *k, const float *v, size_t koff, size_t voff,
                   MpkAttnShape s, int nk, float scale, int lane, Live live)
{
  int ld = s.ldkv, ldv = mpk_attn_ldv (s), HD = s.HD, DV = mpk_attn_dv (s);
  for (int j0 = 0; j0 < nk; j0 += MPK_WARP)
    {
      int j = j0 + lane;
      bool ok = j < nk && live (j);
      float p = 0.0f, ds = 0.0f;
      if (ok)
        {
          const float *krow = k + koff + (size_t) j * ld;
          const float *vrow = v + voff + (size_t) j * ldv;
          float dot = 0.0f, dp = 0.0f;
          for (int d = 0; d < HD; d++)
            dot += qs[d] * krow[d];
          for (int d = 0; d < DV; d++)
            dp += dos[d] * vrow[d];
          float sc = att_score (dot, scale, s.softcap);
          p = expf (sc - L);
          ds = p * (dp - D) * att_score_grad (sc, s.softcap);
        }
      unsigned live_lanes = __ballot_sync (0xffffffffu, ok);
      int nj = min (MPK_WARP, nk - j0);
      for (int jj = 0; jj < nj; jj++)
        {
          float pj = __shfl_sync (0xffffffffu, p, jj);
          float dsj = __shfl_sync (0xffffffffu, ds, jj);
          if (!(live_lanes >> jj & 1u))
            continue;             /* masked (warp-uniform) */
          size_t at = koff + (size_t) (j0 + jj) * ld, vat = voff + (size_t) (j0 + jj) * ldv;
#pragma unroll
          for (int i = 0; i < ATT_MAXD; i++)
            {
              int d = lane + i * MPK_WARP;
              if (d < HD)
                {
                  acc[i] += dsj * k[at + d];
                  atomicAdd (&dk[at + d], scale * dsj * qs[d]);
                }
              if (d < DV)
                atomicAdd (&dv[vat + d], pj * dos[d]);
            }
        }
    }
}

/* Which keys a row walks: causal attention's, every key up to the row's own of the T
 * per sequence; the ring's, the TK keys of a block masked by position. */
struct AttCausal
{
  int T, window;
  __device__ AttAll at (int t) const { return AttAll { t, window }; }
  __device__ int keys (int t) const { return t + 1; }
  __device__ int per_seq () const { return T; }
};

struct AttRing
{
  const int *qpos, *kpos;
  int TK, window;
  __device__ AttByPos at (int t) const { return AttByPos { kpos, qpos[t], window }; }
  __device__ int keys (int) const { return TK; }
  __device__ int per_seq () const { return TK; }
};

/* The backward of both, grid (T / ATT_ROWS, NH, B), ATT_ROWS (HD + DV) floats of shared
 * memory: dq += in registers, dk, dv += with atomics, from the forward's final out and
 * lse. */
template <typename Keys>
__global__ static void
att_backward_k (float *dq, float *dk, float *dv, const float *dout, const float *out,
                const float *lse, const float *q, const float *k, const float *v,
                MpkAttnShape s, Keys keys, float scale)
{
  extern __shared__ float sh[];
  AttRow w = att_row (s);
  if (w.t >= s.T)
    return;                       /* warp-uniform; only warp syncs below */
  float *qs = sh + w.warp * (s.HD + mpk_attn_dv (s)), *dos = qs + s.HD;
  float D = att_backward_load (qs, dos, q + w.qo, dout + w.oo, out + w.oo, s.HD, mpk_attn_dv (s),
                               w.lane);
  float acc[ATT_MAXD] = { 0.0f };
  att_backward_walk (acc, dk, dv, qs, dos, D, lse[w.r], k, v, att_kv (w, s, keys.per_seq ()),
                     att_v (w, s, keys.per_seq ()), s, keys.keys (w.t), scale, w.lane,
                     keys.at (w.t));
  att_slice_store (dq + w.qo, acc, scale, true, s.HD, w.lane);
}

/* attention.cu's and ring-attention.cu's limits on the shape. */
static inline cudaError_t
att_check_shape (MpkAttnShape s)
{
  if (s.HD <= 0 || s.HD > ATT_MAXD * MPK_WARP || mpk_attn_dv (s) > ATT_MAXD * MPK_WARP
      || s.NKV <= 0 || s.NH % s.NKV != 0 || s.window < 0 || s.softcap < 0.0f)
    return cudaErrorInvalidValue;
  if (s.NH > 65535 || s.B > 65535)
    return cudaErrorInvalidConfiguration;
  return cudaSuccess;
}
