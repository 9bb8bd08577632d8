/* fp8.cu - kernels/cpu/fp8.c's twin: a matmul as cast-GEMM-cast. Each operand gets its
 * current (per-tensor amax) scale, is cast to FP8 with round-to-nearest-even and
 * saturation (cuda_fp8.h __NV_SATFINITE), and cublasLt multiplies the FP8 operands with
 * the inverse scales as its A and B scale pointers, accumulating and writing fp32: the
 * "HYBRID" recipe of Transformer Engine, E4M3 for weights and activations, E5M2 for the
 * output gradient. cublasLt's FP8 GEMM takes only the "TN" layout (A transposed, B not),
 * so the operands are cast into transposed copies where the row-major GEMM needs it.
 * Needs compute capability 8.9 (Ada) or newer; shapes whose dimensions are not multiples
 * of 16 (mpk_cuda_matmul_fp8_fits) and outputs not 16-byte aligned (mpk_cuda_fp8_aligned)
 * return cudaErrorNotSupported before anything runs, so a caller keeps them at its other
 * precision, as Transformer Engine keeps such layers out of FP8. */
#include "kernels/cuda/kernels-cuda.h"
#include "kernels/cuda/util.cuh"
#include "kernels/cuda/gemm.cuh"

#include <cublasLt.h>
#include <cuda_fp8.h>

/* cuBLAS's recommended workspace for Hopper and newer, 32 MiB (cuBLAS docs, "cublasSet
 * Workspace": "32 MiB for Hopper architecture"); Transformer Engine gives cublasLt the
 * same (transformer_engine/common/util: 32 MiB on sm_90+). */
#define LT_WORKSPACE ((size_t) 32 << 20)
#define PAD(n) (((size_t) (n) + 255) & ~(size_t) 255)

/* The scratch: LT_WORKSPACE, then 256 bytes of per-tensor state (amax bits x3, inverse
 * scales x3), then the three FP8 operands, each 256-byte aligned. */
typedef struct {
  void *ws;
  unsigned *amax;                 /* (3) |x| maxima as float bits */
  float *inv;                     /* (3) 1 / scale: what the codes are multiplied by */
  uint8_t *q[3];                  /* inp, weight, dout as FP8 codes (transposed or not) */
} Fp8Scratch;

extern "C" size_t
mpk_cuda_matmul_fp8_scratch_bytes (int N, int C, int OC)
{
  return LT_WORKSPACE + 256 + PAD ((size_t) N * C) + PAD ((size_t) OC * C)
         + PAD ((size_t) N * OC);
}

extern "C" int
mpk_cuda_matmul_fp8_fits (int N, int C, int OC)
{
  return N > 0 && C > 0 && OC > 0 && N % 16 == 0 && C % 16 == 0 && OC % 16 == 0;
}

/* cublasLt wants its output 16-byte aligned (cublasLt docs, "cublasLtMatmul": FP8
 * requirements); NULL (not wanted) is fine. */
extern "C" int
mpk_cuda_fp8_aligned (const void *p)
{
  return ((uintptr_t) p & 15) == 0;
}

static Fp8Scratch
carve (void *scratch, int N, int C, int OC)
{
  char *p = (char *) scratch;
  Fp8Scratch s;
  s.ws = p;
  s.amax = (unsigned *) (p + LT_WORKSPACE);
  s.inv = (float *) (s.amax + 4);
  s.q[0] = (uint8_t *) (p + LT_WORKSPACE + 256);
  s.q[1] = s.q[0] + PAD ((size_t) N * C);
  s.q[2] = s.q[1] + PAD ((size_t) OC * C);
  return s;
}

/* *AMAX = max |x| as float bits (non-negative floats order as their bits). */
__global__ static void
amax_k (unsigned *amax, const float *x, size_t n)
{
  float m = 0;
  MPK_FOR (i, n) m = fmaxf (m, fabsf (x[i]));
  m = warp_max (m);
  if (threadIdx.x % MPK_WARP == 0)
    atomicMax (amax, __float_as_uint (m));
}

static __device__ __forceinline__ float
fp8_scale (unsigned amax_bits, float fmax)
{
  float a = __uint_as_float (amax_bits);
  return a > 0 && isfinite (a) ? fmax / a : 1.0f;   /* kernels/cpu/fp8.c mpk_fp8_scale */
}

/* Q = the FMT codes of X (ROWS, COLS) * scale, written transposed (COLS, ROWS) when
 * TRANSPOSE; *INV = 1 / scale. */
__global__ static void
cast_k (uint8_t *q, float *inv, const float *x, const unsigned *amax, int rows, int cols,
        int transpose, int e5m2)
{
  float fmax = e5m2 ? MPK_FP8_E5M2_MAX : MPK_FP8_E4M3_MAX;
  float s = fp8_scale (*amax, fmax);
  __nv_fp8_interpretation_t fmt = e5m2 ? __NV_E5M2 : __NV_E4M3;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *inv = 1.0f / s;
  MPK_FOR (i, (size_t) rows * cols)
    {
      size_t r = i / cols, c = i % cols;
      size_t o = transpose ? c * rows + r : i;
      q[o] = (uint8_t) __nv_cvt_float_to_fp8 (x[i] * s, __NV_SATFINITE, fmt);
    }
}

/* The FP8 codes of X (ROWS, COLS) in Q, slot SLOT's amax and inverse scale. */
static cudaError_t
cast (Fp8Scratch *s, int slot, const float *x, int rows, int cols, int transpose, int e5m2,
      cudaStream_t stream)
{
  size_t n = (size_t) rows * cols;
  cudaError_t e = cudaMemsetAsync (s->amax + slot, 0, sizeof (unsigned), stream);
  if (e != cudaSuccess)
    return e;
  amax_k<<<mpk_blocks (n, MPK_THREADS), MPK_THREADS, 0, stream>>> (s->amax + slot, x, n);
  cast_k<<<mpk_blocks (n, MPK_THREADS), MPK_THREADS, 0, stream>>> (
      s->q[slot], s->inv + slot, x, s->amax + slot, rows, cols, transpose, e5m2);
  return cudaGetLastError ();
}

#define LT_TRY(call)                                                                        \
  do {                                                                                      \
    if ((st = (call)) != CUBLAS_STATUS_SUCCESS)                                             \
      goto out;                                                                             \
  } while (0)

/* Column-major D (m, n) = inv_a inv_b A^T B + beta D with A (k, m) and B (k, n) FP8 codes
 * stored with leading dimension k (the TN layout), D fp32. */
static cudaError_t
lt_gemm (cublasLtHandle_t lt, int m, int n, int k, const uint8_t *A, cudaDataType_t ta,
         const float *inv_a, const uint8_t *B, cudaDataType_t tb, const float *inv_b,
         float beta, float *D, const Fp8Scratch *s, cudaStream_t stream)
{
  cublasLtMatmulDesc_t op = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  cublasStatus_t st;
  cublasOperation_t T = CUBLAS_OP_T, N = CUBLAS_OP_N;
  size_t wsb = LT_WORKSPACE;
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  const float alpha = 1.0f;
  LT_TRY (cublasLtMatmulDescCreate (&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  LT_TRY (cublasLtMatmulDescSetAttribute (op, CUBLASLT_MATMUL_DESC_TRANSA, &T, sizeof T));
  LT_TRY (cublasLtMatmulDescSetAttribute (op, CUBLASLT_MATMUL_DESC_TRANSB, &N, sizeof N));
  LT_TRY (cublasLtMatmulDescSetAttribute (op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &inv_a,
                                          sizeof inv_a));
  LT_TRY (cublasLtMatmulDescSetAttribute (op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &inv_b,
                                          sizeof inv_b));
  LT_TRY (cublasLtMatrixLayoutCreate (&la, ta, k, m, k));
  LT_TRY (cublasLtMatrixLayoutCreate (&lb, tb, k, n, k));
  LT_TRY (cublasLtMatrixLayoutCreate (&ld, CUDA_R_32F, m, n, m));
  LT_TRY (cublasLtMatmulPreferenceCreate (&pref));
  LT_TRY (cublasLtMatmulPreferenceSetAttribute (pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &wsb, sizeof wsb));
  LT_TRY (cublasLtMatmulAlgoGetHeuristic (lt, op, la, lb, ld, ld, pref, 1, &heur, &found));
  if (found == 0)
    {
      st = CUBLAS_STATUS_NOT_SUPPORTED;
      goto out;
    }
  LT_TRY (cublasLtMatmul (lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &heur.algo, s->ws,
                          wsb, stream));
out:
  if (pref)
    cublasLtMatmulPreferenceDestroy (pref);
  if (ld)
    cublasLtMatrixLayoutDestroy (ld);
  if (lb)
    cublasLtMatrixLayoutDestroy (lb);
  if (la)
    cublasLtMatrixLayoutDestroy (la);
  if (op)
    cublasLtMatmulDescDestroy (op);
  return mpk_cuda_from_cublas (st);
}

/* One operand of a cast GEMM: X (ROWS, COLS) cast into slot SLOT, transposed or not, to
 * E4M3 or (E5M2) E5M2. */
typedef struct {
  const float *x;
  int slot, rows, cols, transpose, e5m2;
} CastIn;

/* D (m, n) = A^T B + beta D over K after casting both operands (lt_gemm's layout). */
static cudaError_t
cast_gemm (cublasLtHandle_t lt, Fp8Scratch *s, CastIn a, CastIn b, int m, int n, int k,
           float beta, float *D, cudaStream_t stream)
{
  cudaError_t e;
  if ((e = cast (s, a.slot, a.x, a.rows, a.cols, a.transpose, a.e5m2, stream)) != cudaSuccess
      || (e = cast (s, b.slot, b.x, b.rows, b.cols, b.transpose, b.e5m2, stream))
             != cudaSuccess)
    return e;
  return lt_gemm (lt, m, n, k, s->q[a.slot], a.e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3,
                  s->inv + a.slot, s->q[b.slot], b.e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3,
                  s->inv + b.slot, beta, D, s, stream);
}

/* FP8 needs sm_89 or newer: Ada's and Hopper's tensor cores (CUDA C++ Programming Guide,
 * compute capabilities table, "FP8" row). */
extern "C" cudaError_t
mpk_cuda_fp8_supported (int device)
{
  int major = 0, minor = 0;
  cudaError_t e = cudaDeviceGetAttribute (&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute (&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e != cudaSuccess)
    return e;
  return major * 10 + minor >= 89 ? cudaSuccess : cudaErrorNotSupported;
}

extern "C" cudaError_t
mpk_cuda_matmul_fp8_forward (cublasLtHandle_t lt, void *scratch, float *out, const float *inp,
                             const float *weight, const float *bias, int N, int C, int OC,
                             cudaStream_t stream)
{
  if (!mpk_cuda_matmul_fp8_fits (N, C, OC) || !mpk_cuda_fp8_aligned (out))
    return cudaErrorNotSupported;
  Fp8Scratch s = carve (scratch, N, C, OC);
  /* out^T (OC, N) = W (C, OC stored: W row-major)^T . inp^T (C, N stored: inp row-major) */
  CastIn w = { weight, 1, OC, C, 0, 0 }, x = { inp, 0, N, C, 0, 0 };
  cudaError_t e = cast_gemm (lt, &s, w, x, OC, N, C, 0.0f, out, stream);
  if (e != cudaSuccess || bias == NULL)
    return e;
  return mpk_cuda_bias_forward (out, bias, N, OC, stream);
}

extern "C" cudaError_t
mpk_cuda_matmul_fp8_backward (cublasLtHandle_t lt, void *scratch, float *dinp, float *dweight,
                              float *dbias, const float *dout, const float *inp,
                              const float *weight, int N, int C, int OC, cudaStream_t stream)
{
  if (!mpk_cuda_matmul_fp8_fits (N, C, OC) || !mpk_cuda_fp8_aligned (dinp)
      || !mpk_cuda_fp8_aligned (dweight))
    return cudaErrorNotSupported;
  Fp8Scratch s = carve (scratch, N, C, OC);
  cudaError_t e = cudaSuccess;
  /* dinp^T (C, N) += (W^T stored (OC, C) col-major)^T . dout^T (OC, N: dout row-major) */
  CastIn wt = { weight, 1, OC, C, 1, 0 }, dy = { dout, 2, N, OC, 0, 1 };
  if (dinp != NULL && (e = cast_gemm (lt, &s, wt, dy, C, N, OC, 1.0f, dinp, stream)) != cudaSuccess)
    return e;
  /* dW^T (C, OC) += (inp stored (N, C) col-major)^T . (dout stored (N, OC) col-major):
   * transposed copies of both row-major tensors */
  CastIn xt = { inp, 0, N, C, 1, 0 }, dyt = { dout, 2, N, OC, 1, 1 };
  if (dweight != NULL
      && (e = cast_gemm (lt, &s, xt, dyt, C, OC, N, 1.0f, dweight, stream)) != cudaSuccess)
    return e;
  /* the bias gradient from the fp32 dout, as the reference */
  return dbias != NULL ? mpk_cuda_bias_backward (dbias, dout, N, OC, stream) : e;
}
