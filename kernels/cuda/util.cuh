/* util.cuh - inline device helpers shared by kernels/cuda/*.cu (warp and block sums in
 * double, grid sizes). Only static inline functions: no definitions with linkage. */
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

#define MPK_WARP 32

static inline unsigned
mpk_blocks (size_t n, unsigned threads)
{
  size_t b = (n + threads - 1) / threads;
  return (unsigned) (b > 65535u * 16u ? 65535u * 16u : (b == 0 ? 1 : b));
}

template <typename T>
static __device__ __forceinline__ T
warp_sum (T v)
{
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync (0xffffffffu, v, o);
  return v;
}

static __device__ __forceinline__ float
warp_max (float v)
{
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf (v, __shfl_xor_sync (0xffffffffu, v, o));
  return v;
}

/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets it. SCRATCH
 * holds 32 T; the block must call it uniformly. */
template <typename T>
static __device__ __forceinline__ T
block_sum (T v, T *scratch)
{
  int lane = threadIdx.x % MPK_WARP, w = threadIdx.x / MPK_WARP;
  int nw = (blockDim.x + MPK_WARP - 1) / MPK_WARP;
  v = warp_sum (v);
  __syncthreads ();
  if (lane == 0)
    scratch[w] = v;
  __syncthreads ();
  T r = lane < nw ? scratch[lane] : (T) 0;
  return warp_sum (r);
}

static __device__ __forceinline__ float
block_max (float v, float *scratch)
{
  int lane = threadIdx.x % MPK_WARP, w = threadIdx.x / MPK_WARP;
  int nw = (blockDim.x + MPK_WARP - 1) / MPK_WARP;
  v = warp_max (v);
  __syncthreads ();
  if (lane == 0)
    scratch[w] = v;
  __syncthreads ();
  float r = lane < nw ? scratch[lane] : -INFINITY;
  return warp_max (r);
}

/* GELU, tanh approximation (kernels/cpu/activation.c), and its derivative. */
#define MPK_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define MPK_GELU_C 0.044715f

static __device__ __forceinline__ float
mpk_gelu (float x)
{
  return 0.5f * x * (1.0f + tanhf (MPK_GELU_K * (x + MPK_GELU_C * x * x * x)));
}

static __device__ __forceinline__ float
mpk_gelu_grad (float x)
{
  float th = tanhf (MPK_GELU_K * (x + MPK_GELU_C * x * x * x));
  float du = MPK_GELU_K * (1.0f + 3.0f * MPK_GELU_C * x * x);
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

/* Launches KERNEL over N elements (grid-stride, MPK_THREADS a block) on STREAM and
 * returns the launch's error, from an extern "C" launcher; nothing for N = 0. */
#define MPK_THREADS 256
#define MPK_LAUNCH(kernel, n, stream, ...)                                                  \
  do {                                                                                      \
    if ((n) == 0)                                                                           \
      return cudaSuccess;                                                                   \
    kernel<<<mpk_blocks ((n), MPK_THREADS), MPK_THREADS, 0, (stream)>>> (__VA_ARGS__);      \
    return cudaGetLastError ();                                                             \
  } while (0)

/* Grid-stride loop over n elements. */
#define MPK_FOR(i, n)                                                                       \
  for (size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < (n);                  \
       i += (size_t) gridDim.x * blockDim.x)
