/* optimizer.c - parameter updates (AdamW, SGD) and the gradient-norm pieces. Each works on
 * a contiguous range so that a ZeRO shard is just a pointer and a length. */
#include "kernels/cpu/kernels.h"

#include <math.h>

void
mpk_cpu_adamw_update (float *param, const float *grad, float *m, float *v, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int t)
{
  /* Bias corrections, once per call, in double: 1 - beta2^t is tiny for small t. */
  float bc1 = (float) (1.0 - pow (beta1, t));
  float bc2 = (float) (1.0 - pow (beta2, t));
  for (size_t i = 0; i < n; i++)
    {
      float g = grad[i];
      m[i] = beta1 * m[i] + (1.0f - beta1) * g;
      v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
      float mhat = m[i] / bc1, vhat = v[i] / bc2;
      param[i] -= lr * (mhat / (sqrtf (vhat) + eps) + weight_decay * param[i]);
    }
}

void
mpk_cpu_sgd_update (float *param, const float *grad, float *mom, size_t n, float lr,
                    float momentum)
{
  for (size_t i = 0; i < n; i++)
    {
      float step = grad[i];
      if (mom != NULL)
        {
          mom[i] = momentum * mom[i] + grad[i];
          step = mom[i];
        }
      param[i] -= lr * step;
    }
}

double
mpk_cpu_sumsq (const float *x, size_t n)
{
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += (double) x[i] * x[i];
  return sum;
}

void
mpk_cpu_scale (float *x, size_t n, float s)
{
  for (size_t i = 0; i < n; i++)
    x[i] *= s;
}
