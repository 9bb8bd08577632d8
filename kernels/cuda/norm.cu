/* norm.cu - LayerNorm and RMSNorm, forward and backward: one block of 256 threads per row,
 * row statistics in double (as kernels/cpu/norm.c), weight and bias gradients accumulated
 * across rows with atomics (summation order differs from the CPU's: ~1e-6 relative). */
#include "kernels/cuda/kernels-cuda.h"
#include "kernels/cuda/util.cuh"

#define THREADS 256

__global__ static void
layernorm_forward_k (float *out, float *mean, float *rstd, const float *inp,
                     const float *weight, const float *bias, int C, float eps)
{
  __shared__ double scratch[32];
  size_t n = blockIdx.x;
  const float *x = inp + n * C;
  float *y = out + n * C;
  double s = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    s += x[c];
  double mu = block_sum (s, scratch) / C;
  double sq = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    sq += (x[c] - mu) * (x[c] - mu);
  double r = 1.0 / sqrt (block_sum (sq, scratch) / C + eps);
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    {
      float xhat = (float) ((x[c] - mu) * r);
      y[c] = xhat * weight[c] + (bias != NULL ? bias[c] : 0.0f);
    }
  if (threadIdx.x == 0)
    {
      mean[n] = (float) mu;
      rstd[n] = (float) r;
    }
}

__global__ static void
layernorm_backward_k (float *dinp, float *dweight, float *dbias, const float *dout,
                      const float *inp, const float *weight, const float *mean,
                      const float *rstd, int C)
{
  __shared__ double scratch[32];
  size_t n = blockIdx.x;
  const float *x = inp + n * C, *dy = dout + n * C;
  float mu = mean[n], r = rstd[n];
  double sum_g = 0, sum_gx = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    {
      float xhat = (x[c] - mu) * r;
      float g = dy[c] * weight[c];
      sum_g += g;
      sum_gx += (double) g * xhat;
      atomicAdd (&dweight[c], dy[c] * xhat);
      if (dbias != NULL)
        atomicAdd (&dbias[c], dy[c]);
    }
  sum_g = block_sum (sum_g, scratch);
  sum_gx = block_sum (sum_gx, scratch);
  if (dinp == NULL)
    return;
  float mean_g = (float) (sum_g / C), mean_gx = (float) (sum_gx / C);
  float *dx = dinp + n * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    {
      float xhat = (x[c] - mu) * r;
      dx[c] += r * (dy[c] * weight[c] - mean_g - xhat * mean_gx);
    }
}

__global__ static void
rmsnorm_forward_k (float *out, float *rstd, const float *inp, const float *weight, int C,
                   float eps)
{
  __shared__ double scratch[32];
  size_t n = blockIdx.x;
  const float *x = inp + n * C;
  float *y = out + n * C;
  double sq = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    sq += (double) x[c] * x[c];
  float r = (float) (1.0 / sqrt (block_sum (sq, scratch) / C + eps));
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    y[c] = x[c] * r * weight[c];
  if (threadIdx.x == 0)
    rstd[n] = r;
}

__global__ static void
rmsnorm_backward_k (float *dinp, float *dweight, const float *dout, const float *inp,
                    const float *weight, const float *rstd, int C)
{
  __shared__ double scratch[32];
  size_t n = blockIdx.x;
  const float *x = inp + n * C, *dy = dout + n * C;
  float r = rstd[n];
  double sum_gx = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    {
      float xhat = x[c] * r;
      sum_gx += (double) dy[c] * weight[c] * xhat;
      atomicAdd (&dweight[c], dy[c] * xhat);
    }
  sum_gx = block_sum (sum_gx, scratch);
  if (dinp == NULL)
    return;
  float mean_gx = (float) (sum_gx / C);
  float *dx = dinp + n * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    dx[c] += r * (dy[c] * weight[c] - x[c] * r * mean_gx);
}

extern "C" cudaError_t
mpk_cuda_layernorm_forward (float *out, float *mean, float *rstd, const float *inp,
                            const float *weight, const float *bias, int N, int C, float eps,
                            cudaStream_t stream)
{
  if (N <= 0)
    return cudaSuccess;
  layernorm_forward_k<<<N, THREADS, 0, stream>>> (out, mean, rstd, inp, weight, bias, C, eps);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_layernorm_backward (float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, const float *mean,
                             const float *rstd, int N, int C, cudaStream_t stream)
{
  if (N <= 0)
    return cudaSuccess;
  layernorm_backward_k<<<N, THREADS, 0, stream>>> (dinp, dweight, dbias, dout, inp, weight,
                                                   mean, rstd, C);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_rmsnorm_forward (float *out, float *rstd, const float *inp, const float *weight, int N,
                          int C, float eps, cudaStream_t stream)
{
  if (N <= 0)
    return cudaSuccess;
  rmsnorm_forward_k<<<N, THREADS, 0, stream>>> (out, rstd, inp, weight, C, eps);
  return cudaGetLastError ();
}

extern "C" cudaError_t
mpk_cuda_rmsnorm_backward (float *dinp, float *dweight, const float *dout, const float *inp,
                           const float *weight, const float *rstd, int N, int C,
                           cudaStream_t stream)
{
  if (N <= 0)
    return cudaSuccess;
  rmsnorm_backward_k<<<N, THREADS, 0, stream>>> (dinp, dweight, dout, inp, weight, rstd, C);
  return cudaGetLastError ();
}
