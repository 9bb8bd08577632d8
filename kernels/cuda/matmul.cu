/* matmul.cu - kernels/cpu/matmul.c's twin: out (N, OC) = inp (N, C) . weight (OC, C)^T +
 * bias through cuBLAS (cublasGemmEx), row-major mapped onto column-major as
 * out^T = W . inp^T. fp32 (CUBLAS_COMPUTE_32F, pedantic: no TF32) or bf16 inputs (cast
 * into the caller's scratch) with fp32 accumulation and fp32 outputs; backwards
 * accumulate (beta = 1). Bias add and bias gradient are small kernels here. */
#include "kernels/cuda/kernels-cuda.h"
#include "kernels/cuda/util.cuh"
#include "kernels/cuda/gemm.cuh"

cudaError_t
mpk_cuda_from_cublas (cublasStatus_t st)
{
  switch (st)
    {
    case CUBLAS_STATUS_SUCCESS: return cudaSuccess;
    case CUBLAS_STATUS_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUBLAS_STATUS_ALLOC_FAILED: return cudaErrorMemoryAllocation;
    case CUBLAS_STATUS_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH: return cudaErrorNotSupported;
    default: return cudaErrorUnknown;
    }
}

__global__ static void
bias_forward_k (float *out, const float *bias, int N, int OC)
{
  MPK_FOR (i, (size_t) N * OC) out[i] += bias[i % OC];
}

/* dbias (OC) += column sums of dout (N, OC): one thread per column, rows summed in double
 * (the reference's bias gradients are double sums). */
__global__ static void
bias_backward_k (float *dbias, const float *dout, int N, int OC)
{
  MPK_FOR (c, (size_t) OC)
    {
      double s = 0;
      for (int n = 0; n < N; n++)
        s += dout[(size_t) n * OC + c];
      dbias[c] += (float) s;
    }
}

cudaError_t
mpk_cuda_bias_forward (float *out, const float *bias, int N, int OC, cudaStream_t stream)
{
  if (N <= 0 || OC <= 0)
    return cudaSuccess;
  bias_forward_k<<<mpk_blocks ((size_t) N * OC, 256), 256, 0, stream>>> (out, bias, N, OC);
  return cudaGetLastError ();
}

cudaError_t
mpk_cuda_bias_backward (float *dbias, const float *dout, int N, int OC, cudaStream_t stream)
{
  if (N <= 0 || OC <= 0)
    return cudaSuccess;
  bias_backward_k<<<mpk_blocks (OC, 128), 128, 0, stream>>> (dbias, dout, N, OC);
  return cudaGetLastError ();
}

size_t
mpk_cuda_bf16_padded (size_t n)
{
  return (n + 127) & ~(size_t) 127;
}

/* The three operands as to_bf16 lays them out, each padded (the plain sum plus 256 bytes
 * it once was let the last operand run up to 252 bytes past the end). */
extern "C" size_t
mpk_cuda_matmul_scratch_bytes (int N, int C, int OC)
{
  return (mpk_cuda_bf16_padded ((size_t) N * C) + mpk_cuda_bf16_padded ((size_t) OC * C)
          + mpk_cuda_bf16_padded ((size_t) N * OC))
         * sizeof (uint16_t);
}

cudaError_t
mpk_cuda_gemm (cublasHandle_t h, cudaDataType_t type, cublasOperation_t ta,
               cublasOperation_t tb, int m, int n, int k, const void *A, int lda, const void *B,
               int ldb, float beta, float *C, int ldc)
{
  const float alpha = 1.0f;
  return mpk_cuda_from_cublas (cublasGemmEx (h, ta, tb, m, n, k, &alpha, A, type, lda, B,
                                             type, ldb, &beta, C, CUDA_R_32F, ldc,
                                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

cudaError_t
mpk_cuda_to_bf16 (uint16_t **dst, uint16_t **cursor, const float *src, size_t n,
                  cudaStream_t stream)
{
  *dst = *cursor;
  *cursor += mpk_cuda_bf16_padded (n);   /* 256-byte aligned pieces */
  return mpk_cuda_cast_f32_to_bf16 (*dst, src, n, stream);
}

extern "C" cudaError_t
mpk_cuda_matmul_forward (cublasHandle_t h, int precision, void *scratch, float *out,
                         const float *inp, const float *weight, const float *bias, int N, int C,
                         int OC, cudaStream_t stream)
{
  if (N <= 0 || OC <= 0)
    return cudaSuccess;
  cudaError_t e = mpk_cuda_from_cublas (cublasSetStream (h, stream));
  if (e != cudaSuccess)
    return e;
  const void *A = weight, *B = inp;
  cudaDataType_t type = CUDA_R_32F;
  if (precision == 1)
    {
      uint16_t *cur = (uint16_t *) scratch, *wb, *ib;
      if ((e = mpk_cuda_to_bf16 (&wb, &cur, weight, (size_t) OC * C, stream)) != cudaSuccess
          || (e = mpk_cuda_to_bf16 (&ib, &cur, inp, (size_t) N * C, stream)) != cudaSuccess)
        return e;
      A = wb, B = ib, type = CUDA_R_16BF;
    }
  e = mpk_cuda_gemm (h, type, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, A, C, B, C, 0.0f, out, OC);
  if (e != cudaSuccess || bias == NULL)
    return e;
  return mpk_cuda_bias_forward (out, bias, N, OC, stream);
}

extern "C" cudaError_t
mpk_cuda_matmul_backward (cublasHandle_t h, int precision, void *scratch, float *dinp,
                          float *dweight, float *dbias, const float *dout, const float *inp,
                          const float *weight, int N, int C, int OC, cudaStream_t stream)
{
  if (N <= 0 || OC <= 0)
    return cudaSuccess;
  cudaError_t e = mpk_cuda_from_cublas (cublasSetStream (h, stream));
  if (e != cudaSuccess)
    return e;
  const void *W = weight, *X = inp, *DY = dout;
  cudaDataType_t type = CUDA_R_32F;
  if (precision == 1)
    {
      uint16_t *cur = (uint16_t *) scratch, *wb = NULL, *xb = NULL, *db;
      if ((e = mpk_cuda_to_bf16 (&db, &cur, dout, (size_t) N * OC, stream)) != cudaSuccess)
        return e;
      if (dinp != NULL
          && (e = mpk_cuda_to_bf16 (&wb, &cur, weight, (size_t) OC * C, stream)) != cudaSuccess)
        return e;
      if (dweight != NULL
          && (e = mpk_cuda_to_bf16 (&xb, &cur, inp, (size_t) N * C, stream)) != cudaSuccess)
        return e;
      W = wb, X = xb, DY = db, type = CUDA_R_16BF;
    }
  /* dinp^T (C, N) += W^T-as-stored (C, OC) . dout^T (OC, N) */
  if (dinp != NULL
      && (e = mpk_cuda_gemm (h, type, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, W, C, DY, OC, 1.0f,
                             dinp, C))
             != cudaSuccess)
    return e;
  /* dW^T (C, OC) += inp^T (C, N) . dout (N, OC) */
  if (dweight != NULL
      && (e = mpk_cuda_gemm (h, type, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, X, C, DY, OC, 1.0f,
                             dweight, C))
             != cudaSuccess)
    return e;
  if (dbias != NULL)
    e = mpk_cuda_bias_backward (dbias, dout, N, OC, stream);
  return e;
}
