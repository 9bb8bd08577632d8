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

/* Offsets (in floats) of head h at position t of sequence b, in q (and dq), in k (and
 * dk: kv head h), in v (and dv), and in out (and dout). */
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
v_at (MpkAttnShape s, int b, int t, int h)
{
  return ((size_t) b * s.T + t) * mpk_attn_ldv (s) + (size_t) h * mpk_attn_dv (s);
}

static size_t
out_at (MpkAttnShape s, int b, int t, int h)
{
  return ((size_t) b * s.T + t) * s.ldo + (size_t) h * mpk_attn_dv (s);
}

/* Scaled score of query row qt against key row kj, soft-capped (cap tanh (x / cap)) when
 * s.softcap > 0, rounded to float once so the stored and the recomputed paths see the
 * same value. */
static float
score (const float *qt, const float *kj, MpkAttnShape s)
{
  double x = dot (qt, kj, s.HD) / sqrt ((double) s.HD);
  return (float) (s.softcap > 0 ? s.softcap * tanh (x / s.softcap) : x);
}

/* d score / d (its uncapped value), from the score: 1 - (score / cap)^2 under a cap. */
static double
score_grad (float sc, MpkAttnShape s)
{
  return s.softcap > 0 ? 1.0 - ((double) sc / s.softcap) * ((double) sc / s.softcap) : 1.0;
}

/* Does the query at position QP see the key at KP: causal, and inside the window. */
static int
visible (MpkAttnShape s, int qp, int kp)
{
  return kp <= qp && (s.window <= 0 || qp - kp < s.window);
}

/* The first key position a query at T sees. */
static int
first_key (MpkAttnShape s, int t)
{
  return s.window > 0 && t - s.window + 1 > 0 ? t - s.window + 1 : 0;
}

/* One query row: o (DV) = sum_j p_j v_j over the keys it sees; returns the row's lse. The
 * scores are computed twice (once for the max, once for the exponentials) unless prow
 * (T) is given, in which case they are kept there and then turned into probabilities. */
static float
forward_row (float *o, float *prow, const float *q, const float *k, const float *v,
             MpkAttnShape s, int b, int t, int h)
{
  int kvh = h / (s.NH / s.NKV);
  const float *qt = q + q_at (s, b, t, h);
  double max = -INFINITY;
  int j0 = first_key (s, t);
  for (int j = j0; j <= t; j++)
    {
      float sj = score (qt, k + kv_at (s, b, j, kvh), s);
      if (prow != NULL)
        prow[j] = sj;
      max = fmax (max, sj);
    }
  int dv = mpk_attn_dv (s);
  for (int d = 0; d < dv; d++)
    o[d] = 0.0f;
  double sum = 0;
  for (int j = j0; j <= t; j++)
    {
      float sj = prow != NULL ? prow[j] : score (qt, k + kv_at (s, b, j, kvh), s);
      double e = exp (sj - max);
      sum += e;
      axpy (o, (float) e, v + v_at (s, b, j, kvh), dv);
    }
  for (int d = 0; d < dv; d++)
    o[d] = (float) (o[d] / sum);
  double lse = max + log (sum);
  if (prow != NULL)
    for (int j = 0; j < s.T; j++)
      prow[j] = visible (s, t, j) ? (float) exp (prow[j] - lse) : 0.0f;
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

/* One query row's share of the gradients from N_KEYS key rows KB, VB (with their
 * gradients DKB, DVB; rows s.ldkv and ldv apart) at positions KPOS (NULL: 0, 1, ...), those the
 * query at QP sees. With p_j the probabilities and dp_j = dout . v_j, the softmax
 * gradient is ds_j = p_j (dp_j - D), D = sum_i p_i dp_i = dout . out (over every key the
 * row saw), so D needs no extra pass over the keys; a soft cap multiplies it by its
 * derivative. */
static void
backward_keys (float *dqt, float *dkb, float *dvb, const float *gt, double D, float lse,
               const float *prow, const float *qt, const float *kb, const float *vb,
               MpkAttnShape s, int kvh, int n_keys, int qp, const int *kpos)
{
  double scale = 1.0 / sqrt ((double) s.HD);
  int dv = mpk_attn_dv (s);
  for (int j = 0; j < n_keys; j++)
    {
      if (!visible (s, qp, kpos != NULL ? kpos[j] : j))
        continue;
      size_t at = (size_t) j * s.ldkv + (size_t) kvh * s.HD;
      size_t vat = (size_t) j * mpk_attn_ldv (s) + (size_t) kvh * dv;
      float sc = prow == NULL || s.softcap > 0 ? score (qt, kb + at, s) : 0.0f;
      double p = prow != NULL ? prow[j] : exp (sc - lse);
      double ds = p * (dot (gt, vb + vat, dv) - D) * score_grad (sc, s);
      axpy (dqt, (float) (scale * ds), kb + at, s.HD);
      axpy (dkb + at, (float) (scale * ds), qt, s.HD);
      axpy (dvb + vat, (float) p, gt, dv);
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
          const float *gt = dout + out_at (s, b, t, h);
          size_t kb = kv_at (s, b, 0, 0), vb = v_at (s, b, 0, 0);
          backward_keys (dq + q_at (s, b, t, h), dk + kb, dv + vb, gt,
                         dot (gt, out + out_at (s, b, t, h), mpk_attn_dv (s)), lse[r], prow,
                         q + q_at (s, b, t, h), k + kb, v + vb, s, h / (s.NH / s.NKV), t + 1,
                         t, NULL);
        }
}

/* ---- ring attention (context parallelism) ------------------------------------------ */

void
mpk_cpu_cp_positions (int *pos, int T, int cp, int rank)
{
  int c = T / (2 * cp), hi = 2 * cp - 1 - rank;
  for (int t = 0; t < c; t++)
    pos[t] = rank * c + t, pos[c + t] = hi * c + t;
}

void
mpk_cpu_ring_attention_begin (float *out, float *m, float *l, MpkAttnShape s)
{
  size_t rows = (size_t) s.B * s.NH * s.T;
  for (size_t r = 0; r < rows; r++)
    m[r] = -INFINITY, l[r] = 0.0f;
  for (int b = 0; b < s.B; b++)
    for (int t = 0; t < s.T; t++)
      for (int d = 0; d < s.NH * mpk_attn_dv (s); d++)
        out[out_at (s, b, t, 0) + d] = 0.0f;
}

/* One query row against one key block (rows s.ldkv and ldv apart, positions KPOS): the running
 * max *M and sum *L move to the new max, O (unnormalised) with them. */
static void
ring_row (float *o, float *m, float *l, const float *qt, const float *kb, const float *vb,
          MpkAttnShape s, int kvh, int TK, int qp, const int *kpos)
{
  double bmax = -INFINITY;
  for (int j = 0; j < TK; j++)
    if (visible (s, qp, kpos[j]))
      bmax = fmax (bmax, score (qt, kb + (size_t) j * s.ldkv + (size_t) kvh * s.HD, s));
  if (bmax == -INFINITY)
    return;                        /* the whole block lies in this row's future */
  double nm = fmax (*m, bmax);
  double alpha = exp (*m - nm);    /* 0 for the first block the row sees */
  int dv = mpk_attn_dv (s);
  for (int d = 0; d < dv; d++)
    o[d] = (float) (o[d] * alpha);
  double sum = *l * alpha;
  for (int j = 0; j < TK; j++)
    {
      if (!visible (s, qp, kpos[j]))
        continue;
      size_t at = (size_t) j * s.ldkv + (size_t) kvh * s.HD;
      double e = exp (score (qt, kb + at, s) - nm);
      sum += e;
      axpy (o, (float) e, vb + (size_t) j * mpk_attn_ldv (s) + (size_t) kvh * dv, dv);
    }
  *m = (float) nm;
  *l = (float) sum;
}

void
mpk_cpu_ring_attention_block (float *out, float *m, float *l, const float *q, const float *k,
                              const float *v, MpkAttnShape s, int TK, const int *qpos,
                              const int *kpos)
{
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int t = 0; t < s.T; t++)
        {
          size_t r = ((size_t) b * s.NH + h) * s.T + t;
          size_t kb = (size_t) b * TK * s.ldkv, vb = (size_t) b * TK * mpk_attn_ldv (s);
          ring_row (out + out_at (s, b, t, h), m + r, l + r, q + q_at (s, b, t, h), k + kb,
                    v + vb, s, h / (s.NH / s.NKV), TK, qpos[t], kpos);
        }
}

void
mpk_cpu_ring_attention_end (float *out, float *lse, const float *m, const float *l,
                            MpkAttnShape s)
{
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int t = 0; t < s.T; t++)
        {
          size_t r = ((size_t) b * s.NH + h) * s.T + t;
          float *o = out + out_at (s, b, t, h);
          for (int d = 0; d < mpk_attn_dv (s); d++)
            o[d] = (float) (o[d] / (double) l[r]);
          lse[r] = (float) (m[r] + log ((double) l[r]));
        }
}

void
mpk_cpu_ring_attention_backward_block (float *dq, float *dk, float *dv, const float *dout,
                                       const float *out, const float *lse, const float *q,
                                       const float *k, const float *v, MpkAttnShape s,
                                       int TK, const int *qpos, const int *kpos)
{
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int t = 0; t < s.T; t++)
        {
          size_t r = ((size_t) b * s.NH + h) * s.T + t;
          size_t kb = (size_t) b * TK * s.ldkv, vb = (size_t) b * TK * mpk_attn_ldv (s);
          const float *gt = dout + out_at (s, b, t, h);
          backward_keys (dq + q_at (s, b, t, h), dk + kb, dv + vb, gt,
                         dot (gt, out + out_at (s, b, t, h), mpk_attn_dv (s)), lse[r], NULL,
                         q + q_at (s, b, t, h), k + kb, v + vb, s, h / (s.NH / s.NKV), TK,
                         qpos[t], kpos);
        }
}
