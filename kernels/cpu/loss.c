/* loss.c - fused softmax + cross-entropy over the vocabulary, whole or as vocab-parallel
 * shards (Megatron): each shard reduces its own slice to (max, sum of exponentials,
 * target logit), the caller all-reduces those three per position, and the finish and
 * backward steps need nothing else. The unsharded kernels are the one-shard case. */
#include "kernels/cpu/kernels.h"

#include <math.h>

/* Max of row x (n) and sum of exp(x - max) (in double); an empty row gives (-inf, 0). */
static void
row_stats (const float *x, int n, float *max_out, double *sum_out)
{
  float max = -INFINITY;
  for (int i = 0; i < n; i++)
    max = fmaxf (max, x[i]);
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += exp ((double) x[i] - max);
  *max_out = max;
  *sum_out = sum;
}

void
mpk_cpu_crossentropy_forward (float *losses, float *lse, const float *logits,
                              const int *targets, int N, int V)
{
  for (int n = 0; n < N; n++)
    {
      const float *x = logits + (size_t) n * V; /* (V) */
      float max;
      double sum;
      row_stats (x, V, &max, &sum);
      double l = max + log (sum);
      losses[n] = (float) (l - x[targets[n]]);
      if (lse != NULL)
        lse[n] = (float) l;
    }
}

void
mpk_cpu_crossentropy_backward (float *dlogits, const float *logits, const float *lse,
                               const int *targets, float scale, int N, int V)
{
  mpk_cpu_crossentropy_shard_backward (dlogits, logits, lse, targets, scale, N, V, 0);
}

void
mpk_cpu_crossentropy_shard_stats (float *lmax, float *lsum, float *tlogit, const float *logits,
                                  const int *targets, int N, int Vl, int v0)
{
  for (int n = 0; n < N; n++)
    {
      const float *x = logits + (size_t) n * Vl; /* (Vl): vocabulary [v0, v0+Vl) */
      double sum;
      row_stats (x, Vl, &lmax[n], &sum);
      lsum[n] = (float) sum;
      int local = targets[n] - v0;
      tlogit[n] = local >= 0 && local < Vl ? x[local] : 0.0f;
    }
}

void
mpk_cpu_crossentropy_shard_rescale (float *lsum, const float *lmax, const float *gmax, int N)
{
  for (int n = 0; n < N; n++)
    /* A shard with no entries has lsum 0 and lmax -inf: exp(-inf) = 0 keeps it 0. */
    lsum[n] = (float) (lsum[n] * exp ((double) lmax[n] - gmax[n]));
}

void
mpk_cpu_crossentropy_shard_finish (float *losses, float *lse, const float *gmax,
                                   const float *gsum, const float *tlogit, int N)
{
  for (int n = 0; n < N; n++)
    {
      double l = gmax[n] + log ((double) gsum[n]);
      lse[n] = (float) l;
      losses[n] = (float) (l - tlogit[n]);
    }
}

void
mpk_cpu_crossentropy_shard_backward (float *dlogits, const float *logits, const float *lse,
                                     const int *targets, float scale, int N, int Vl, int v0)
{
  for (int n = 0; n < N; n++)
    {
      const float *x = logits + (size_t) n * Vl;
      float *dx = dlogits + (size_t) n * Vl;
      int local = targets[n] - v0; /* the target's column here, if in this shard */
      for (int i = 0; i < Vl; i++)
        {
          double p = exp ((double) x[i] - lse[n]);
          dx[i] += (float) ((p - (i == local ? 1.0 : 0.0)) * scale);
        }
    }
}
