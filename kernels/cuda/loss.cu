/* loss.cu - softmax + cross-entropy (kernels/cpu/loss.c's twin) and its vocab-parallel
 * pieces: statistics one block per row (max in fp32, sum of exponentials in double, as the
 * reference), the per-row finishes elementwise, the backward one thread per logit with the
 * exponential in double. */
#include "kernels/cuda/kernels-cuda.h"
#include "kernels/cuda/util.cuh"
#include <math.h>

#define THREADS 256

/* Row max, sum exp(x - max) and the target's logit of one row of Vl logits. */
__global__ static void
shard_stats_k (float *lmax, float *lsum, float *tlogit, float *losses, float *lse,
               const float *logits, const int *targets, int Vl, int v0)
{
  __shared__ float fscratch[32];
  __shared__ double dscratch[32];
  size_t n = blockIdx.x;
  const float *x = logits + n * Vl;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < Vl; i += blockDim.x)
    m = fmaxf (m, x[i]);
  m = block_max (m, fscratch);
  double s = 0;
  for (int i = threadIdx.x; i < Vl; i += blockDim.x)
    s += exp ((double) x[i] - m);
  s = block_sum (s, dscratch);
  if (threadIdx.x != 0)
    return;
  int local = targets[n] - v0;
  float t = local >= 0 && local < Vl ? x[local] : 0.0f;
  if (losses != NULL)   /* the unsharded forward */
    {
      double l = m + log (s);
      losses[n] = (float) (l - t);
      if (lse != NULL)
        lse[n] = (float) l;
      return;
    }
  lmax[n] = m;
  lsum[n] = (float) s;
  tlogit[n] = t;
}

__global__ static void
rescale_k (float *lsum, const float *lmax, const float *gmax, int N)
{
  MPK_FOR (n, (size_t) N) lsum[n] = (float) (lsum[n] * exp ((double) lmax[n] - gmax[n]));
}

__global__ static void
finish_k (float *losses, float *lse, const float *gmax, const float *gsum, const float *tlogit,
          int N)
{
  MPK_FOR (n, (size_t) N)
    {
      double l = gmax[n] + log ((double) gsum[n]);
      lse[n] = (float) l;
      losses[n] = (float) (l - tlogit[n]);
    }
}

__global__ static void
shard_backward_k (float *dlogits, const float *logits, const float *lse, const int *targets,
                  float scale, int N, int Vl, int v0)
{
  MPK_FOR (idx, (size_t) N * Vl)
    {
      size_t n = idx / Vl;
      int i = (int) (idx % Vl), local = targets[n] - v0;
      double p = exp ((double) logits[idx] - lse[n]);
      dlogits[idx] += (float) ((p - (i == local ? 1.0 : 0.0)) * scale);
    }
}

extern "C" cudaError_t
mpk_cuda_crossentropy_forward (float *losses, float *lse, const float *logits,
                               const int *targets, int N, int V, cudaStream_t stream)
{
  if (N <= 0)
    return cudaSuccess;
  shard_stats_k<<<N, THREADS, 0, stream>>> (NULL, NULL, NULL, losses, lse, logits, targets, V,
                                            0);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_crossentropy_backward (float *dlogits, const float *logits, const float *lse,
                                const int *targets, float scale, int N, int V,
                                cudaStream_t stream)
{
  return mpk_cuda_crossentropy_shard_backward (dlogits, logits, lse, targets, scale, N, V, 0,
                                               stream);
}

extern "C" cudaError_t
mpk_cuda_crossentropy_shard_stats (float *lmax, float *lsum, float *tlogit, const float *logits,
                                   const int *targets, int N, int Vl, int v0,
                                   cudaStream_t stream)
{
  if (N <= 0)
    return cudaSuccess;
  shard_stats_k<<<N, THREADS, 0, stream>>> (lmax, lsum, tlogit, NULL, NULL, logits, targets,
                                            Vl, v0);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_crossentropy_shard_rescale (float *lsum, const float *lmax, const float *gmax, int N,
                                     cudaStream_t stream)
{
  if (N <= 0)
    return cudaSuccess;
  rescale_k<<<mpk_blocks (N, THREADS), THREADS, 0, stream>>> (lsum, lmax, gmax, N);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_crossentropy_shard_finish (float *losses, float *lse, const float *gmax,
                                    const float *gsum, const float *tlogit, int N,
                                    cudaStream_t stream)
{
  if (N <= 0)
    return cudaSuccess;
  finish_k<<<mpk_blocks (N, THREADS), THREADS, 0, stream>>> (losses, lse, gmax, gsum, tlogit,
                                                             N);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_crossentropy_shard_backward (float *dlogits, const float *logits, const float *lse,
                                      const int *targets, float scale, int N, int Vl, int v0,
                                      cudaStream_t stream)
{
  size_t n = (size_t) N * Vl;
  if (n == 0)
    return cudaSuccess;
  shard_backward_k<<<mpk_blocks (n, THREADS), THREADS, 0, stream>>> (dlogits, logits, lse,
                                                                     targets, scale, N, Vl, v0);
  return cudaGetLastError ();
}
