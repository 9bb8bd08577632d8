/* moe.c - mixture-of-experts pieces around the expert GEMMs: the router (softmax, top-k,
 * renormalised gates), its sequence-wise load-balancing loss, and the row gathers and
 * scatters that permute tokens to their experts and combine them back. Forward writes,
 * backward accumulates (kernels.h); row dot products and softmax sums in double. The
 * router's per-token arithmetic is router-row.h's, shared with kernels/cuda/router.cu. */
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/router-row.h"

#include <math.h>

void
mpk_cpu_gather_rows (float *out, const float *x, const int *idx, const float *scale, int R,
                     int C)
{
  for (int r = 0; r < R; r++)
    {
      const float *src = x + (size_t) idx[r] * C;
      float s = scale != NULL ? scale[r] : 1.0f;
      for (int c = 0; c < C; c++)
        out[(size_t) r * C + c] = s * src[c];
    }
}

void
mpk_cpu_scatter_add_rows (float *y, const float *x, const int *idx, const float *scale, int R,
                          int C)
{
  for (int r = 0; r < R; r++)
    {
      float *dst = y + (size_t) idx[r] * C;
      float s = scale != NULL ? scale[r] : 1.0f;
      for (int c = 0; c < C; c++)
        dst[c] += s * x[(size_t) r * C + c];
    }
}

void
mpk_cpu_rows_dot (float *out, const float *a, const int *idx, const float *b, int R, int C)
{
  for (int r = 0; r < R; r++)
    {
      const float *ar = a + (size_t) idx[r] * C, *br = b + (size_t) r * C;
      double s = 0;
      for (int c = 0; c < C; c++)
        s += (double) ar[c] * br[c];
      out[r] = (float) s;
    }
}

void
mpk_cpu_router_forward (float *probs, int *idx, float *gates, const float *logits, int N,
                        int E, int K)
{
  for (int n = 0; n < N; n++)
    {
      float *p = probs + (size_t) n * E;
      mpk_router_softmax_row (p, logits + (size_t) n * E, E);
      mpk_router_topk_row (idx + (size_t) n * K, gates + (size_t) n * K, p, E, K);
    }
}

void
mpk_cpu_router_backward (float *dlogits, const float *probs, const int *idx,
                         const float *gates, const float *dgates, const float *dprobs, int N,
                         int E, int K)
{
  for (int n = 0; n < N; n++)
    mpk_router_backward_row (dlogits + (size_t) n * E, probs + (size_t) n * E,
                             idx + (size_t) n * K, gates + (size_t) n * K,
                             dgates + (size_t) n * K, dprobs ? dprobs + (size_t) n * E : NULL,
                             E, K);
}

double
mpk_cpu_router_aux (float *dprobs, const float *probs, const int *idx, int B, int T, int E,
                    int K, float alpha, float dscale)
{
  double loss = 0;
  for (int b = 0; b < B; b++)
    for (int e = 0; e < E; e++)
      {
        double f;
        loss += mpk_router_aux_term (&f, probs, idx, b, e, T, E, K, alpha);
        for (int t = 0; dprobs != NULL && t < T; t++)
          dprobs[((size_t) b * T + t) * E + e] += (float) (dscale * alpha * f / T);
      }
  return loss;
}
