/* attention.c - causal scaled-dot-product attention with grouped-query heads, the plain
 * reference: one query row at a time, no tiling. Forward keeps each row's log-normaliser
 * (lse) and, optionally, the full probability matrix; backward uses the matrix when it
 * was kept and otherwise recomputes each probability from q, k and lse (what a fused
 * "flash" kernel does), so both the stored and the recompute paths are covered.
 * Layouts and strides: see MpkAttnShape in kernels.h. */
#include "kernels/cpu/kernels.h"

#include <math.h>

static double
dot (const float *a, const float *b, int n)
{
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += (double) a[i] * b[i];
  return sum;
}

/* y (n) += alpha * x */
static void
axpy (float *y, float alpha, const float *x, int n)
{
  for (int i = 0; i < n; i++)
    y[i] += alpha * x[i];
}

/* Offsets (in floats) of head h at position t of sequence b, in q (and dq), in k or v
 * (and dk, dv: kv head h), and in out (and dout). */
static size_t
q_at (MpkAttnShape s, int b, int t, int h)
{
  return ((size_t) b * s.T + t) * s.ldq + (size_t) h * s.HD;
}

static size_t
kv_at (MpkAttnShape s, int b, int t, int h)
{
  return ((size_t) b * s.T + t) * s.ldkv + (size_t) h * s.HD;
}

static size_t
out_at (MpkAttnShape s, int b, int t, int h)
{
  return ((size_t) b * s.T + t) * s.ldo + (size_t) h * s.HD;
}

/* Scaled score of query row qt against key row kj, rounded to float once so the stored
 * and the recomputed paths see the same value. */
static float
score (const float *qt, const float *kj, int HD)
{
  return (float) (dot (qt, kj, HD) / sqrt ((double) HD));
}

/* One query row: o (HD) = sum_j p_j v_j over keys j <= t; returns the row's lse. The
 * scores are computed twice (once for the max, once for the exponentials) unless prow
 * (T) is given, in which case they are kept there and then turned into probabilities. */
static float
forward_row (float *o, float *prow, const float *q, const float *k, const float *v,
             MpkAttnShape s, int b, int t, int h)
{
  int kvh = h / (s.NH / s.NKV);
  const float *qt = q + q_at (s, b, t, h);
  double max = -INFINITY;
  for (int j = 0; j <= t; j++)
    {
      float sj = score (qt, k + kv_at (s, b, j, kvh), s.HD);
      if (prow != NULL)
        prow[j] = sj;
      max = fmax (max, sj);
    }
  for (int d = 0; d < s.HD; d++)
    o[d] = 0.0f;
  double sum = 0;
  for (int j = 0; j <= t; j++)
    {
      float sj = prow != NULL ? prow[j] : score (qt, k + kv_at (s, b, j, kvh), s.HD);
      double e = exp (sj - max);
      sum += e;
      axpy (o, (float) e, v + kv_at (s, b, j, kvh), s.HD);
    }
  for (int d = 0; d < s.HD; d++)
    o[d] = (float) (o[d] / sum);
  double lse = max + log (sum);
  if (prow != NULL)
    for (int j = 0; j < s.T; j++)
      prow[j] = j <= t ? (float) exp (prow[j] - lse) : 0.0f;
  return (float) lse;
}

void
mpk_cpu_attention_forward (float *out, float *lse, float *probs, const float *q,
                           const float *k, const float *v, MpkAttnShape s)
{
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int t = 0; t < s.T; t++)
        {
          size_t r = ((size_t) b * s.NH + h) * s.T + t; /* row of (B, NH, T) */
          float *prow = probs != NULL ? probs + r * s.T : NULL;
          lse[r] = forward_row (out + out_at (s, b, t, h), prow, q, k, v, s, b, t, h);
        }
}

/* One query row's share of the gradients. With p_j the probabilities and
 * dp_j = dout . v_j, the softmax gradient is ds_j = p_j (dp_j - sum_i p_i dp_i), and
 * sum_i p_i dp_i = dout . out, so that sum needs no extra pass over the keys. */
static void
backward_row (float *dq, float *dk, float *dv, const float *dout, const float *out,
              float lse, const float *prow, const float *q, const float *k, const float *v,
              MpkAttnShape s, int b, int t, int h)
{
  int kvh = h / (s.NH / s.NKV);
  double scale = 1.0 / sqrt ((double) s.HD);
  const float *qt = q + q_at (s, b, t, h);
  const float *gt = dout + out_at (s, b, t, h); /* gradient at this output row */
  float *dqt = dq + q_at (s, b, t, h);
  double D = dot (gt, out + out_at (s, b, t, h), s.HD);
  for (int j = 0; j <= t; j++)
    {
      size_t at = kv_at (s, b, j, kvh);
      double p = prow != NULL ? prow[j] : exp (score (qt, k + at, s.HD) - lse);
      double ds = p * (dot (gt, v + at, s.HD) - D);
      axpy (dqt, (float) (scale * ds), k + at, s.HD);
      axpy (dk + at, (float) (scale * ds), qt, s.HD);
      axpy (dv + at, (float) p, gt, s.HD);
    }
}

void
mpk_cpu_attention_backward (float *dq, float *dk, float *dv, const float *dout,
                            const float *out, const float *lse, const float *probs,
                            const float *q, const float *k, const float *v, MpkAttnShape s)
{
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int t = 0; t < s.T; t++)
        {
          size_t r = ((size_t) b * s.NH + h) * s.T + t;
          const float *prow = probs != NULL ? probs + r * s.T : NULL;
          backward_row (dq, dk, dv, dout, out, lse[r], prow, q, k, v, s, b, t, h);
        }
}
