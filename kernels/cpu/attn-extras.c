/* attn-extras.c - the attention variants beyond plain causal attention that live outside
 * its kernel: per-head q/k RMSNorm (qk-norm), learned softmax sinks, and tanh
 * soft-capping of the output logits. Forward writes, backward accumulates into parameter
 * gradients; the in-place transforms are said in kernels.h. Row statistics in double. */
#include "kernels/cpu/kernels.h"

#include <math.h>

/* One head: y = x r w, r = 1 / sqrt (mean (x^2) + eps); returns r. */
static float
head_norm (float *y, const float *x, const float *w, int HD, float eps)
{
  double ss = 0;
  for (int d = 0; d < HD; d++)
    ss += (double) x[d] * x[d];
  float r = (float) (1.0 / sqrt (ss / HD + eps));
  for (int d = 0; d < HD; d++)
    y[d] = x[d] * r * w[d];
  return r;
}

void
mpk_cpu_qknorm_forward (float *qkv, float *raw, float *rstd, const float *wq,
                        const float *wk, int N, int NH, int NKV, int HD, int ld, float eps)
{
  int H = NH + NKV;
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++)
      {
        float *x = qkv + (size_t) n * ld + (size_t) h * HD;
        float *keep = raw + ((size_t) n * H + h) * HD;
        for (int d = 0; d < HD; d++)
          keep[d] = x[d];
        rstd[(size_t) n * H + h] = head_norm (x, keep, h < NH ? wq : wk, HD, eps);
      }
}

/* y = x r w:  dx = r (w dy - x r^2 mean (x w dy)),  dw += x r dy. */
void
mpk_cpu_qknorm_backward (float *dqkv, float *dwq, float *dwk, const float *raw,
                         const float *rstd, const float *wq, const float *wk, int N, int NH,
                         int NKV, int HD, int ld)
{
  int H = NH + NKV;
  for (int n = 0; n < N; n++)
    for (int h = 0; h < H; h++)
      {
        float *g = dqkv + (size_t) n * ld + (size_t) h * HD;
        const float *x = raw + ((size_t) n * H + h) * HD, *w = h < NH ? wq : wk;
        float *dw = h < NH ? dwq : dwk;
        double r = rstd[(size_t) n * H + h], dot = 0;
        for (int d = 0; d < HD; d++)
          {
            dot += (double) x[d] * w[d] * g[d];
            dw[d] += (float) (x[d] * r * g[d]);
          }
        double c = r * r * dot / HD;
        for (int d = 0; d < HD; d++)
          g[d] = (float) (r * (w[d] * g[d] - x[d] * c));
      }
}

/* Row r of (B, NH, T) is query position t of head h in sequence b. */
static size_t
out_row (MpkAttnShape s, int b, int t, int h)
{
  return ((size_t) b * s.T + t) * s.ldo + (size_t) h * mpk_attn_dv (s);
}

void
mpk_cpu_attention_sinks_forward (float *out, float *lse, float *probs, const float *sinks,
                                 MpkAttnShape s)
{
  for (int b = 0; b < s.B; b++)
    for (int h = 0; h < s.NH; h++)
      for (int t = 0; t < s.T; t++)
        {
          size_t r = ((size_t) b * s.NH + h) * s.T + t;
          double l = lse[r], sk = sinks[h], m = fmax (l, sk);
          double nl = m + log (exp (l - m) + exp (sk - m));
          float f = (float) exp (l - nl);
          float *o = out + out_row (s, b, t, h);
          for (int d = 0; d < mpk_attn_dv (s); d++)
            o[d] *= f;
          if (probs != NULL)
            for (int j = 0; j < s.T; j++)
              probs[r * s.T + j] *= f;
          lse[r] = (float) nl;
        }
}

void
mpk_cpu_attention_sinks_backward (float *dsinks, const float *dout, const float *out,
                                  const float *lse, const float *sinks, MpkAttnShape s)
{
  for (int h = 0; h < s.NH; h++)
    {
      double sum = 0;
      for (int b = 0; b < s.B; b++)
        for (int t = 0; t < s.T; t++)
          {
            size_t r = ((size_t) b * s.NH + h) * s.T + t, at = out_row (s, b, t, h);
            double D = 0;
            for (int d = 0; d < mpk_attn_dv (s); d++)
              D += (double) dout[at + d] * out[at + d];
            sum += exp ((double) sinks[h] - lse[r]) * D;
          }
      dsinks[h] -= (float) sum;
    }
}

void
mpk_cpu_softcap_forward (float *x, size_t n, float cap)
{
  for (size_t i = 0; i < n; i++)
    x[i] = cap * tanhf (x[i] / cap);
}

void
mpk_cpu_softcap_backward (float *dx, const float *y, size_t n, float cap)
{
  for (size_t i = 0; i < n; i++)
    {
      float t = y[i] / cap;
      dx[i] *= 1.0f - t * t;
    }
}
