/* moe.cu - the CUDA twins of kernels/cpu/moe.c's token permutation: row gathers with an
 * optional per-row scale, the scatter-add back (atomics: a token's K rows meet in one
 * output row, so the summation order differs from the CPU's, ~1e-6 relative), and the
 * per-row dot products of the gates' gradient (one block per row, in double). The router
 * runs on the host (exec/model-moe.c), as its counts size the expert GEMMs. */
#include "kernels/cuda/kernels-cuda.h"
#include "kernels/cuda/util.cuh"

#define THREADS 256

__global__ static void
gather_rows_k (float *out, const float *x, const int *idx, const float *scale, int R, int C)
{
  size_t n = (size_t) R * C;
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x)
    {
      size_t r = i / C, c = i % C;
      float s = scale != NULL ? scale[r] : 1.0f;
      out[i] = s * x[(size_t) idx[r] * C + c];
    }
}

__global__ static void
scatter_add_rows_k (float *y, const float *x, const int *idx, const float *scale, int R, int C)
{
  size_t n = (size_t) R * C;
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
       i += (size_t) gridDim.x * blockDim.x)
    {
      size_t r = i / C, c = i % C;
      float s = scale != NULL ? scale[r] : 1.0f;
      atomicAdd (&y[(size_t) idx[r] * C + c], s * x[i]);
    }
}

__global__ static void
rows_dot_k (float *out, const float *a, const int *idx, const float *b, int C)
{
  __shared__ double scratch[32];
  int r = blockIdx.x;
  const float *ar = a + (size_t) idx[r] * C, *br = b + (size_t) r * C;
  double s = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    s += (double) ar[c] * br[c];
  s = block_sum (s, scratch);
  if (threadIdx.x == 0)
    out[r] = (float) s;
}

extern "C" cudaError_t
mpk_cuda_gather_rows (float *out, const float *x, const int *idx, const float *scale, int R,
                      int C, cudaStream_t stream)
{
  size_t n = (size_t) R * C;
  if (n == 0)
    return cudaSuccess;
  gather_rows_k<<<mpk_blocks (n, THREADS), THREADS, 0, stream>>> (out, x, idx, scale, R, C);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_scatter_add_rows (float *y, const float *x, const int *idx, const float *scale,
                           int R, int C, cudaStream_t stream)
{
  size_t n = (size_t) R * C;
  if (n == 0)
    return cudaSuccess;
  scatter_add_rows_k<<<mpk_blocks (n, THREADS), THREADS, 0, stream>>> (y, x, idx, scale, R,
                                                                         C);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_rows_dot (float *out, const float *a, const int *idx, const float *b, int R, int C,
                   cudaStream_t stream)
{
  if (R == 0)
    return cudaSuccess;
  rows_dot_k<<<R, THREADS, 0, stream>>> (out, a, idx, b, C);
  return cudaGetLastError ();
}
