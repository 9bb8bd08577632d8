/* router-row.h - the router's per-token arithmetic (softmax, top-k by selection, the
 * renormalised gates, their backward) and the aux loss's per (sequence, expert) counts,
 * as static inline plain C that compiles for the host (kernels/cpu/moe.c) and for the
 * device (kernels/cuda/router.cu): both backends route with the same code, so a CUDA
 * twin differs from the reference only by the device's exp (double, within an ulp).
 * Private to kernels/: the public contract is kernels.h's mpk_cpu_router_*. */
#pragma once
#include <math.h>
#include <stddef.h>

#ifdef __CUDACC__
#define MPK_ROUTER_FN static inline __host__ __device__
#else
#define MPK_ROUTER_FN static inline
#endif

/* P (E) = softmax of one token's logits Z (E), the sum in double. */
MPK_ROUTER_FN void
mpk_router_softmax_row (float *p, const float *z, int E)
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

/* IX (K) the K most probable experts of P (E), most probable first (ties: the lower
 * expert), and GATES (K) their probabilities renormalised over the K. */
MPK_ROUTER_FN void
mpk_router_topk_row (int *ix, float *gates, const float *p, int E, int K)
{
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
    gates[j] = (float) (p[ix[j]] / z);
}

/* DZ (E) += one token's logit gradient from DG (K) on the gates and DA (E, or NULL) on
 * the probabilities. g_j = p_j / Z over the chosen set: dp_m = (dg_m - sum_j dg_j g_j) / Z
 * for m chosen; then the softmax, dz_e = p_e (dp_e - sum_m p_m dp_m). */
MPK_ROUTER_FN void
mpk_router_backward_row (float *dz, const float *p, const int *ix, const float *g,
                         const float *dg, const float *da, int E, int K)
{
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

/* Sequence B's share of the load-balancing loss for expert E_: f = E / (K T) * the
 * choices of e_ among its T tokens, P = their mean probability of e_. Returns alpha f P
 * and stores f in *F (the gradient on each of B's probabilities of e_ is alpha f / T). */
MPK_ROUTER_FN double
mpk_router_aux_term (double *f_out, const float *probs, const int *idx, int b, int e_, int T,
                     int E, int K, float alpha)
{
  double f = 0, P = 0;
  for (int t = 0; t < T; t++)
    {
      size_t n = (size_t) b * T + t;
      for (int j = 0; j < K; j++)
        f += idx[n * K + j] == e_;
      P += probs[n * E + e_];
    }
  f *= (double) E / ((double) K * T);
  P /= T;
  *f_out = f;
  return alpha * f * P;
}
