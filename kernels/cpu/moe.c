/* moe.c - mixture-of-experts pieces around the expert GEMMs: the router (softmax, top-k,
 * renormalised gates), its sequence-wise load-balancing loss, and the row gathers and
 * scatters that permute tokens to their experts and combine them back. Forward writes,
 * backward accumulates (kernels.h); row dot products and softmax sums in double. */
#include "kernels/cpu/kernels.h"

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

/* Row softmax of one token's logits (E) into P. */
static void
softmax_row (float *p, const float *z, int E)
{
  float mx = z[0];
  for (int e = 1; e < E; e++)
    mx = z[e] > mx ? z[e] : mx;
  double sum = 0;
  for (int e = 0; e < E; e++)
    sum += exp ((double) (z[e] - mx));
  for (int e = 0; e < E; e++)
    p[e] = (float) (exp ((double) (z[e] - mx)) / sum);
}

void
mpk_cpu_router_forward (float *probs, int *idx, float *gates, const float *logits, int N,
                        int E, int K)
{
  for (int n = 0; n < N; n++)
    {
      float *p = probs + (size_t) n * E;
      int *ix = idx + (size_t) n * K;
      softmax_row (p, logits + (size_t) n * E, E);
      /* top-k by selection: the largest not yet taken, the lower expert on a tie */
      double z = 0;
      for (int j = 0; j < K; j++)
        {
          int best = -1;
          for (int e = 0; e < E; e++)
            {
              int taken = 0;
              for (int i = 0; i < j; i++)
                taken |= ix[i] == e;
              if (!taken && (best < 0 || p[e] > p[best]))
                best = e;
            }
          ix[j] = best;
          z += p[best];
        }
      for (int j = 0; j < K; j++)
        gates[(size_t) n * K + j] = (float) (p[ix[j]] / z);
    }
}

void
mpk_cpu_router_backward (float *dlogits, const float *probs, const int *idx,
                         const float *gates, const float *dgates, const float *dprobs, int N,
                         int E, int K)
{
  for (int n = 0; n < N; n++)
    {
      const float *p = probs + (size_t) n * E, *da = dprobs ? dprobs + (size_t) n * E : NULL;
      const int *ix = idx + (size_t) n * K;
      const float *g = gates + (size_t) n * K, *dg = dgates + (size_t) n * K;
      float *dz = dlogits + (size_t) n * E;
      /* g_j = p_j / Z over the chosen set: dp_m = (dg_m - sum_j dg_j g_j) / Z, m chosen;
       * then the softmax, dz_e = p_e (dp_e - sum_m p_m dp_m), dp the sum of both parts */
      double z = 0, gdg = 0, pdp = 0;
      for (int j = 0; j < K; j++)
        {
          z += p[ix[j]];
          gdg += (double) dg[j] * g[j];
        }
      for (int j = 0; j < K; j++)
        pdp += (double) p[ix[j]] * ((double) dg[j] - gdg) / z;
      for (int e = 0; da != NULL && e < E; e++)
        pdp += (double) p[e] * da[e];
      for (int e = 0; e < E; e++)
        dz[e] += (float) (p[e] * ((da != NULL ? da[e] : 0.0) - pdp));
      for (int j = 0; j < K; j++)
        dz[ix[j]] += (float) (p[ix[j]] * ((double) dg[j] - gdg) / z);
    }
}

double
mpk_cpu_router_aux (float *dprobs, const float *probs, const int *idx, int B, int T, int E,
                    int K, float alpha, float dscale)
{
  double loss = 0;
  for (int b = 0; b < B; b++)
    for (int e = 0; e < E; e++)
      {
        double f = 0, P = 0;
        for (int t = 0; t < T; t++)
          {
            size_t n = (size_t) b * T + t;
            for (int j = 0; j < K; j++)
              f += idx[n * K + j] == e;
            P += probs[n * E + e];
          }
        f *= (double) E / ((double) K * T);
        P /= T;
        loss += alpha * f * P;
        for (int t = 0; dprobs != NULL && t < T; t++)
          dprobs[((size_t) b * T + t) * E + e] += (float) (dscale * alpha * f / T);
      }
  return loss;
}
