/* matmul.c - the linear layer, out = inp . W^T + b, forward and backward through OpenBLAS
 * sgemm. The only kernels here that use a library: GEMMs are where the time goes, and the
 * executor's speed target is OpenBLAS's own sgemm rate. Weight layout (OC, C): see
 * kernels.h. */
#include "kernels/cpu/kernels.h"

#include <cblas.h>
#include <string.h>

void
mpk_cpu_init_threads (int n)
{
  openblas_set_num_threads (n < 1 ? 1 : n);
}

/* Every row of out (N, OC) starts as the bias, or zero, so the GEMM can add into it. */
static void
fill_rows_with_bias (float *out, const float *bias, int N, int OC)
{
  for (int n = 0; n < N; n++)
    {
      float *row = out + (size_t) n * OC;
      if (bias != NULL)
        memcpy (row, bias, (size_t) OC * sizeof (float));
      else
        memset (row, 0, (size_t) OC * sizeof (float));
    }
}

void
mpk_cpu_matmul_forward (float *out, const float *inp, const float *weight, const float *bias,
                        int N, int C, int OC)
{
  if (N <= 0 || OC <= 0)
    return;
  if (C <= 0 || bias != NULL)
    fill_rows_with_bias (out, bias, N, OC);
  if (C <= 0)
    return;
  /* out (N, OC) = inp (N, C) . weight (OC, C)^T [+ out]; beta 0 skips the read. */
  cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C,
               bias != NULL ? 1.0f : 0.0f, out, OC);
}

/* dbias (OC) += column sums of dout (N, OC), summed in double. Columns go in blocks of
 * BIAS_BLOCK so each row is read contiguously rather than with stride OC. */
#define BIAS_BLOCK 64
static void
bias_backward (float *dbias, const float *dout, int N, int OC)
{
  for (int o0 = 0; o0 < OC; o0 += BIAS_BLOCK)
    {
      int width = OC - o0 < BIAS_BLOCK ? OC - o0 : BIAS_BLOCK;
      double sum[BIAS_BLOCK] = { 0 };
      for (int n = 0; n < N; n++)
        {
          const float *row = dout + (size_t) n * OC + o0;
          for (int j = 0; j < width; j++)
            sum[j] += row[j];
        }
      for (int j = 0; j < width; j++)
        dbias[o0 + j] += (float) sum[j];
    }
}

void
mpk_cpu_matmul_backward (float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC)
{
  if (N <= 0 || OC <= 0)
    return;
  if (dinp != NULL && C > 0)
    /* dinp (N, C) += dout (N, OC) . weight (OC, C) */
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight,
                 C, 1.0f, dinp, C);
  if (dweight != NULL && C > 0)
    /* dweight (OC, C) += dout^T (OC, N) . inp (N, C) */
    cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C,
                 1.0f, dweight, C);
  if (dbias != NULL)
    bias_backward (dbias, dout, N, OC);
}

void
mpk_cpu_grouped_matmul_forward (float *out, const float *inp, const float *weight,
                                const float *bias, const int *rows, int G, int C, int OC)
{
  size_t off = 0;
  for (int g = 0; g < G; off += (size_t) rows[g], g++)
    mpk_cpu_matmul_forward (out + off * OC, inp + off * C, weight + (size_t) g * OC * C,
                            bias != NULL ? bias + (size_t) g * OC : NULL, rows[g], C, OC);
}

void
mpk_cpu_grouped_matmul_backward (float *dinp, float *dweight, float *dbias, const float *dout,
                                 const float *inp, const float *weight, const int *rows, int G,
                                 int C, int OC)
{
  size_t off = 0;
  for (int g = 0; g < G; off += (size_t) rows[g], g++)
    mpk_cpu_matmul_backward (dinp != NULL ? dinp + off * C : NULL,
                             dweight != NULL ? dweight + (size_t) g * OC * C : NULL,
                             dbias != NULL ? dbias + (size_t) g * OC : NULL, dout + off * OC,
                             inp + off * C, weight + (size_t) g * OC * C, rows[g], C, OC);
}
