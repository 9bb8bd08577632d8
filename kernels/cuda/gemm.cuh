/* gemm.cuh - the GEMM pieces matmul.cu defines and grouped.cu and fp8.cu reuse (C++
 * linkage, private to kernels/cuda): cuBLAS status mapping, one cublasGemmEx with fp32
 * accumulation, the bias kernels, and the bf16 operand packing of the scratch. */
#pragma once
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stddef.h>
#include <stdint.h>

/* A cuBLAS status as the cudaError_t kernels-cuda.h documents. */
cudaError_t mpk_cuda_from_cublas (cublasStatus_t st);
/* One GEMM, column-major C (m, n) = op(A) op(B) + beta C, A and B of TYPE, fp32 C and
 * compute. */
cudaError_t mpk_cuda_gemm (cublasHandle_t h, cudaDataType_t type, cublasOperation_t ta,
                           cublasOperation_t tb, int m, int n, int k, const void *A, int lda,
                           const void *B, int ldb, float beta, float *C, int ldc);
/* out (N, OC) += bias (OC) on every row; dbias (OC) += column sums of dout (double). */
cudaError_t mpk_cuda_bias_forward (float *out, const float *bias, int N, int OC,
                                   cudaStream_t stream);
cudaError_t mpk_cuda_bias_backward (float *dbias, const float *dout, int N, int OC,
                                    cudaStream_t stream);
/* The bf16 elements an operand of N floats takes in a scratch: each starts on a 256-byte
 * (128-element) boundary. */
size_t mpk_cuda_bf16_padded (size_t n);
/* *DST = *CURSOR, a bf16 copy of SRC (N), and *CURSOR moved past it (padded). */
cudaError_t mpk_cuda_to_bf16 (uint16_t **dst, uint16_t **cursor, const float *src, size_t n,
                              cudaStream_t stream);
