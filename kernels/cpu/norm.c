/* norm.c - LayerNorm and RMSNorm over the last dimension, forward and backward. Row
 * statistics are summed in double; backward uses the mean/rstd the forward saved, so it
 * needs no second pass over the statistics. */
#include "kernels/cpu/kernels.h"

#include <math.h>

void
mpk_cpu_layernorm_forward (float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C, float eps)
{
  for (int n = 0; n < N; n++)
    {
      const float *x = inp + (size_t) n * C; /* (C) */
      float *y = out + (size_t) n * C;
      double sum = 0;
      for (int c = 0; c < C; c++)
        sum += x[c];
      double mu = sum / C;
      /* Two-pass variance: no cancellation when |mean| >> std. */
      double sq = 0;
      for (int c = 0; c < C; c++)
        sq += (x[c] - mu) * (x[c] - mu);
      double r = 1.0 / sqrt (sq / C + eps);
      for (int c = 0; c < C; c++)
        {
          float xhat = (float) ((x[c] - mu) * r);
          y[c] = xhat * weight[c] + (bias != NULL ? bias[c] : 0.0f);
        }
      mean[n] = (float) mu;
      rstd[n] = (float) r;
    }
}

/* With xhat = (x - mean) * rstd and g = dout * weight (the gradient at xhat):
 * dx = rstd * (g - mean(g) - xhat * mean(g * xhat)). */
void
mpk_cpu_layernorm_backward (float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C)
{
  for (int n = 0; n < N; n++)
    {
      const float *x = inp + (size_t) n * C, *dy = dout + (size_t) n * C;
      float mu = mean[n], r = rstd[n];
      double sum_g = 0, sum_gx = 0;
      for (int c = 0; c < C; c++)
        {
          float xhat = (x[c] - mu) * r;
          float g = dy[c] * weight[c];
          sum_g += g;
          sum_gx += (double) g * xhat;
          dweight[c] += dy[c] * xhat;
          if (dbias != NULL)
            dbias[c] += dy[c];
        }
      if (dinp == NULL)
        continue;
      float mean_g = (float) (sum_g / C), mean_gx = (float) (sum_gx / C);
      float *dx = dinp + (size_t) n * C;
      for (int c = 0; c < C; c++)
        {
          float xhat = (x[c] - mu) * r;
          dx[c] += r * (dy[c] * weight[c] - mean_g - xhat * mean_gx);
        }
    }
}

void
mpk_cpu_rmsnorm_forward (float *out, float *rstd, const float *inp, const float *weight,
                         int N, int C, float eps)
{
  for (int n = 0; n < N; n++)
    {
      const float *x = inp + (size_t) n * C; /* (C) */
      float *y = out + (size_t) n * C;
      double sq = 0;
      for (int c = 0; c < C; c++)
        sq += (double) x[c] * x[c];
      float r = (float) (1.0 / sqrt (sq / C + eps));
      for (int c = 0; c < C; c++)
        y[c] = x[c] * r * weight[c];
      rstd[n] = r;
    }
}

/* With xhat = x * rstd and g = dout * weight: dx = rstd * (g - xhat * mean(g * xhat))
 * (no mean term: RMSNorm does not centre). */
void
mpk_cpu_rmsnorm_backward (float *dinp, float *dweight, const float *dout, const float *inp,
                          const float *weight, const float *rstd, int N, int C)
{
  for (int n = 0; n < N; n++)
    {
      const float *x = inp + (size_t) n * C, *dy = dout + (size_t) n * C;
      float r = rstd[n];
      double sum_gx = 0;
      for (int c = 0; c < C; c++)
        {
          float xhat = x[c] * r;
          sum_gx += (double) dy[c] * weight[c] * xhat;
          dweight[c] += dy[c] * xhat;
        }
      if (dinp == NULL)
        continue;
      float mean_gx = (float) (sum_gx / C);
      float *dx = dinp + (size_t) n * C;
      for (int c = 0; c < C; c++)
        dx[c] += r * (dy[c] * weight[c] - x[c] * r * mean_gx);
    }
}
