/* activation.c - elementwise ops: GELU (tanh approximation), ReLU, SwiGLU, GEGLU, residual
 * adds. Forward writes, backward accumulates (kernels.h). Float math throughout, as a
 * GPU kernel would do it; the twins are compared within float rounding. */
#include "kernels/cpu/kernels.h"

#include <math.h>

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

static float
gelu (float x)
{
  return 0.5f * x * (1.0f + tanhf (GELU_K * (x + GELU_C * x * x * x)));
}

/* d/dx 0.5 x (1 + tanh u), u = k (x + c x^3):
 *   0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 c x^2). */
static float
gelu_grad (float x)
{
  float th = tanhf (GELU_K * (x + GELU_C * x * x * x));
  float du = GELU_K * (1.0f + 3.0f * GELU_C * x * x);
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

void
mpk_cpu_gelu_forward (float *out, const float *inp, size_t n)
{
  for (size_t i = 0; i < n; i++)
    out[i] = gelu (inp[i]);
}

void
mpk_cpu_gelu_backward (float *dinp, const float *inp, const float *dout, size_t n)
{
  for (size_t i = 0; i < n; i++)
    dinp[i] += gelu_grad (inp[i]) * dout[i];
}

void
mpk_cpu_relu_forward (float *out, const float *inp, size_t n)
{
  for (size_t i = 0; i < n; i++)
    out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void
mpk_cpu_relu_backward (float *dinp, const float *inp, const float *dout, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (inp[i] > 0.0f)
      dinp[i] += dout[i];
}

/* Logistic sigmoid; exp overflowing to inf for very negative g gives 0, not NaN. */
static float
sigmoid (float g)
{
  return 1.0f / (1.0f + expf (-g));
}

static float
silu (float g)
{
  return g * sigmoid (g);
}

/* silu'(g) = s (1 + g (1 - s)), s = sigmoid(g). */
static float
silu_grad (float g)
{
  float s = sigmoid (g);
  return s * (1.0f + g * (1.0f - s));
}

/* A gated MLP's activation: inp (N, 2F) rows [gate (F) | up (F)], out (N, F) =
 * act(gate) * up. Backward: d/dup = act(gate), d/dgate = up act'(gate). */
static void
gated_forward (float *out, const float *inp, int N, int F, float (*act) (float))
{
  for (int n = 0; n < N; n++)
    {
      const float *gate = inp + (size_t) n * 2 * F, *up = gate + F; /* (F) each */
      float *o = out + (size_t) n * F;
      for (int f = 0; f < F; f++)
        o[f] = act (gate[f]) * up[f];
    }
}

static void
gated_backward (float *dinp, const float *inp, const float *dout, int N, int F,
                float (*act) (float), float (*grad) (float))
{
  for (int n = 0; n < N; n++)
    {
      const float *gate = inp + (size_t) n * 2 * F, *up = gate + F;
      const float *d = dout + (size_t) n * F;
      float *dgate = dinp + (size_t) n * 2 * F, *dup = dgate + F;
      for (int f = 0; f < F; f++)
        {
          dgate[f] += d[f] * up[f] * grad (gate[f]);
          dup[f] += d[f] * act (gate[f]);
        }
    }
}

void
mpk_cpu_swiglu_forward (float *out, const float *inp, int N, int F)
{
  gated_forward (out, inp, N, F, silu);
}

void
mpk_cpu_swiglu_backward (float *dinp, const float *inp, const float *dout, int N, int F)
{
  gated_backward (dinp, inp, dout, N, F, silu, silu_grad);
}

/* GEGLU (Gemma's gated MLP, gelu_pytorch_tanh on the gate): the SwiGLU layout. */
void
mpk_cpu_geglu_forward (float *out, const float *inp, int N, int F)
{
  gated_forward (out, inp, N, F, gelu);
}

void
mpk_cpu_geglu_backward (float *dinp, const float *inp, const float *dout, int N, int F)
{
  gated_backward (dinp, inp, dout, N, F, gelu, gelu_grad);
}

void
mpk_cpu_residual_forward (float *out, const float *a, const float *b, size_t n)
{
  for (size_t i = 0; i < n; i++)
    out[i] = a[i] + b[i];
}

void
mpk_cpu_residual_backward (float *da, float *db, const float *dout, size_t n)
{
  if (da != NULL)
    mpk_cpu_add (da, dout, n);
  if (db != NULL)
    mpk_cpu_add (db, dout, n);
}

void
mpk_cpu_add (float *y, const float *x, size_t n)
{
  for (size_t i = 0; i < n; i++)
    y[i] += x[i];
}
