/* fp8.c - the reference of FP8 training's cast-GEMM-cast (what kernels/cuda/fp8.cu runs
 * through cublasLt): rounding to the OCP E4M3 and E5M2 formats, Transformer Engine's
 * current (per-tensor amax) scaling, and the matmul on the cast operands. Values are kept
 * as the floats the FP8 codes stand for (dequantised), so the GEMM is plain fp32 sgemm on
 * exactly the values the device multiplies. */
#include "kernels/cpu/kernels.h"

#include <math.h>

/* Mantissa bits and the smallest normal exponent of each format (OCP FP8 spec v1.0 table
 * 1: E4M3 bias 7, E5M2 bias 15, so the smallest normal is 2^(1 - bias)). */
static const struct {
  int mbits, emin;
  float max;
} FMT[] = {
  [MPK_FP8_E4M3] = { 3, -6, MPK_FP8_E4M3_MAX },
  [MPK_FP8_E5M2] = { 2, -14, MPK_FP8_E5M2_MAX },
};

float
mpk_fp8_round (float x, MpkFp8Format fmt)
{
  if (isnan (x))
    return x;
  double a = fabs ((double) x);
  if (a >= FMT[fmt].max)
    return copysignf (FMT[fmt].max, x);   /* saturate, infinities included */
  if (a == 0)
    return x;
  int e;
  frexp (a, &e);                          /* a in [2^(e-1), 2^e) */
  int ex = e - 1 < FMT[fmt].emin ? FMT[fmt].emin : e - 1;   /* subnormals: fixed step */
  double q = ldexp (1.0, ex - FMT[fmt].mbits);               /* the spacing at a */
  double r = nearbyint (a / q) * q;       /* default rounding mode: to nearest, ties even */
  return (float) copysign (r > FMT[fmt].max ? FMT[fmt].max : r, (double) x);
}

float
mpk_fp8_scale (float amax, MpkFp8Format fmt)
{
  return amax > 0 && isfinite (amax) ? FMT[fmt].max / amax : 1.0f;
}

float
mpk_cpu_fp8_quantize (float *out, const float *x, size_t n, MpkFp8Format fmt)
{
  float amax = 0;
  for (size_t i = 0; i < n; i++)
    amax = fmaxf (amax, fabsf (x[i]));
  float s = mpk_fp8_scale (amax, fmt);
  for (size_t i = 0; i < n; i++)
    out[i] = mpk_fp8_round (x[i] * s, fmt) / s;
  return s;
}

size_t
mpk_cpu_matmul_fp8_scratch (int N, int C, int OC)
{
  return (size_t) N * C + (size_t) OC * C + (size_t) N * OC;
}

void
mpk_cpu_matmul_fp8_forward (float *out, float *scratch, const float *inp, const float *weight,
                            const float *bias, int N, int C, int OC)
{
  float *qi = scratch, *qw = scratch + (size_t) N * C;
  mpk_cpu_fp8_quantize (qi, inp, (size_t) N * C, MPK_FP8_E4M3);
  mpk_cpu_fp8_quantize (qw, weight, (size_t) OC * C, MPK_FP8_E4M3);
  mpk_cpu_matmul_forward (out, qi, qw, bias, N, C, OC);
}

void
mpk_cpu_matmul_fp8_backward (float *dinp, float *dweight, float *dbias, float *scratch,
                             const float *dout, const float *inp, const float *weight, int N,
                             int C, int OC)
{
  float *qi = scratch, *qw = scratch + (size_t) N * C, *qd = qw + (size_t) OC * C;
  mpk_cpu_fp8_quantize (qi, inp, (size_t) N * C, MPK_FP8_E4M3);
  mpk_cpu_fp8_quantize (qw, weight, (size_t) OC * C, MPK_FP8_E4M3);
  mpk_cpu_fp8_quantize (qd, dout, (size_t) N * OC, MPK_FP8_E5M2);
  /* the bias gradient from the unquantised dout, as Transformer Engine's (its dbias is
   * reduced from the high-precision gradient before the cast) */
  mpk_cpu_matmul_backward (dinp, dweight, NULL, qd, qi, qw, N, C, OC);
  mpk_cpu_matmul_backward (NULL, NULL, dbias, dout, inp, weight, N, C, OC);
}
