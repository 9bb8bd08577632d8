/* elementwise.cu - the CUDA twins of kernels/cpu's elementwise, embedding, rotary and
 * optimizer kernels (activation.c, embedding.c, rotary.c, optimizer.c): grid-stride loops,
 * 256 threads, the reference's formulas in the reference's precision (rotary angles and
 * the sum of squares in double). Not tuned: no vector loads yet. */
#include "kernels/cuda/kernels-cuda.h"
#include "kernels/cuda/util.cuh"
#include <cuda_bf16.h>
#include <math.h>

#define THREADS MPK_THREADS
#define LAUNCH MPK_LAUNCH


/* ---- embedding -------------------------------------------------------------------------- */

__global__ static void
embedding_forward_k (float *out, const int *tokens, const float *wte, const float *wpe, int N,
                     int T, int C, int v0, int Vl)
{
  MPK_FOR (i, (size_t) N * C)
    {
      int n = (int) (i / C), c = (int) (i % C), tok = tokens[n] - v0;
      float e = tok >= 0 && tok < Vl ? wte[(size_t) tok * C + c] : 0.0f;
      float p = wpe != NULL ? wpe[(size_t) (n % T) * C + c] : 0.0f;
      out[i] = e + p;
    }
}

__global__ static void
embedding_backward_k (float *dwte, float *dwpe, const float *dout, const int *tokens, int N,
                      int T, int C, int v0, int Vl)
{
  MPK_FOR (i, (size_t) N * C)
    {
      int n = (int) (i / C), c = (int) (i % C), tok = tokens[n] - v0;
      if (tok >= 0 && tok < Vl)
        atomicAdd (&dwte[(size_t) tok * C + c], dout[i]);
      if (dwpe != NULL)
        atomicAdd (&dwpe[(size_t) (n % T) * C + c], dout[i]);
    }
}

extern "C" cudaError_t
mpk_cuda_embedding_forward (float *out, const int *tokens, const float *wte, const float *wpe,
                            int N, int T, int C, int v0, int Vl, cudaStream_t stream)
{
  LAUNCH (embedding_forward_k, (size_t) N * C, stream, out, tokens, wte, wpe, N, T, C, v0, Vl);
}

extern "C" cudaError_t
mpk_cuda_embedding_backward (float *dwte, float *dwpe, const float *dout, const int *tokens,
                             int N, int T, int C, int v0, int Vl, cudaStream_t stream)
{
  LAUNCH (embedding_backward_k, (size_t) N * C, stream, dwte, dwpe, dout, tokens, N, T, C, v0,
          Vl);
}

/* ---- rotary: one thread per (row, head, pair) ------------------------------------------ */

__global__ static void
rotary_k (float *x, int B, int T, int NHR, int HD, int ld, int pos0, float theta, double sign)
{
  int half = HD / 2;
  MPK_FOR (idx, (size_t) B * T * NHR * half)
    {
      int i = (int) (idx % half);
      size_t rest = idx / half;
      int h = (int) (rest % NHR);
      size_t row = rest / NHR; /* b * T + t */
      int t = (int) (row % T);
      double angle = (double) (pos0 + t) * pow ((double) theta, -2.0 * i / HD);
      double c = cos (angle), s = sign * sin (angle);
      float *p = x + row * ld + (size_t) h * HD + i;
      double a = p[0], b = p[half];
      p[0] = (float) (a * c - b * s);
      p[half] = (float) (b * c + a * s);
    }
}

extern "C" cudaError_t
mpk_cuda_rotary_forward (float *x, int B, int T, int NHR, int HD, int ld, int pos0, float theta,
                         cudaStream_t stream)
{
  LAUNCH (rotary_k, (size_t) B * T * NHR * (HD / 2), stream, x, B, T, NHR, HD, ld, pos0, theta,
          1.0);
}

extern "C" cudaError_t
mpk_cuda_rotary_backward (float *dx, int B, int T, int NHR, int HD, int ld, int pos0,
                          float theta, cudaStream_t stream)
{
  LAUNCH (rotary_k, (size_t) B * T * NHR * (HD / 2), stream, dx, B, T, NHR, HD, ld, pos0, theta,
          -1.0);
}

/* ---- activations ------------------------------------------------------------------------ */

__global__ static void
gelu_forward_k (float *out, const float *inp, size_t n)
{
  MPK_FOR (i, n) out[i] = mpk_gelu (inp[i]);
}

__global__ static void
gelu_backward_k (float *dinp, const float *inp, const float *dout, size_t n)
{
  MPK_FOR (i, n) dinp[i] += dout[i] * mpk_gelu_grad (inp[i]);
}

__global__ static void
relu_forward_k (float *out, const float *inp, size_t n)
{
  MPK_FOR (i, n) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

__global__ static void
relu_backward_k (float *dinp, const float *inp, const float *dout, size_t n)
{
  MPK_FOR (i, n)
    if (inp[i] > 0.0f)
      dinp[i] += dout[i];
}

static __device__ __forceinline__ float
sigmoid (float g)
{
  return 1.0f / (1.0f + expf (-g));
}

__global__ static void
swiglu_forward_k (float *out, const float *inp, int N, int F)
{
  MPK_FOR (i, (size_t) N * F)
    {
      size_t n = i / F, f = i % F;
      float g = inp[n * 2 * F + f], u = inp[n * 2 * F + F + f];
      out[i] = g * sigmoid (g) * u;
    }
}

__global__ static void
swiglu_backward_k (float *dinp, const float *inp, const float *dout, int N, int F)
{
  MPK_FOR (i, (size_t) N * F)
    {
      size_t n = i / F, f = i % F;
      float g = inp[n * 2 * F + f], u = inp[n * 2 * F + F + f], sg = sigmoid (g), d = dout[i];
      dinp[n * 2 * F + f] += d * u * sg * (1.0f + g * (1.0f - sg));
      dinp[n * 2 * F + F + f] += d * g * sg;
    }
}

__global__ static void
residual_forward_k (float *out, const float *a, const float *b, size_t n)
{
  MPK_FOR (i, n) out[i] = a[i] + b[i];
}

__global__ static void
add_k (float *y, const float *x, size_t n)
{
  MPK_FOR (i, n) y[i] += x[i];
}

__global__ static void
scale_k (float *x, size_t n, float s)
{
  MPK_FOR (i, n) x[i] *= s;
}

extern "C" cudaError_t
mpk_cuda_gelu_forward (float *out, const float *inp, size_t n, cudaStream_t stream)
{
  LAUNCH (gelu_forward_k, n, stream, out, inp, n);
}

extern "C" cudaError_t
mpk_cuda_gelu_backward (float *dinp, const float *inp, const float *dout, size_t n,
                        cudaStream_t stream)
{
  LAUNCH (gelu_backward_k, n, stream, dinp, inp, dout, n);
}

extern "C" cudaError_t
mpk_cuda_relu_forward (float *out, const float *inp, size_t n, cudaStream_t stream)
{
  LAUNCH (relu_forward_k, n, stream, out, inp, n);
}

extern "C" cudaError_t
mpk_cuda_relu_backward (float *dinp, const float *inp, const float *dout, size_t n,
                        cudaStream_t stream)
{
  LAUNCH (relu_backward_k, n, stream, dinp, inp, dout, n);
}

extern "C" cudaError_t
mpk_cuda_swiglu_forward (float *out, const float *inp, int N, int F, cudaStream_t stream)
{
  LAUNCH (swiglu_forward_k, (size_t) N * F, stream, out, inp, N, F);
}

extern "C" cudaError_t
mpk_cuda_swiglu_backward (float *dinp, const float *inp, const float *dout, int N, int F,
                          cudaStream_t stream)
{
  LAUNCH (swiglu_backward_k, (size_t) N * F, stream, dinp, inp, dout, N, F);
}

extern "C" cudaError_t
mpk_cuda_residual_forward (float *out, const float *a, const float *b, size_t n,
                           cudaStream_t stream)
{
  LAUNCH (residual_forward_k, n, stream, out, a, b, n);
}

extern "C" cudaError_t
mpk_cuda_add (float *y, const float *x, size_t n, cudaStream_t stream)
{
  LAUNCH (add_k, n, stream, y, x, n);
}

extern "C" cudaError_t
mpk_cuda_residual_backward (float *da, float *db, const float *dout, size_t n,
                            cudaStream_t stream)
{
  cudaError_t e = cudaSuccess;
  if (da != NULL)
    e = mpk_cuda_add (da, dout, n, stream);
  if (e == cudaSuccess && db != NULL)
    e = mpk_cuda_add (db, dout, n, stream);
  return e;
}

extern "C" cudaError_t
mpk_cuda_scale (float *x, size_t n, float s, cudaStream_t stream)
{
  LAUNCH (scale_k, n, stream, x, n, s);
}

/* ---- casts ------------------------------------------------------------------------------ */

__global__ static void
f32_to_bf16_k (uint16_t *out, const float *inp, size_t n)
{
  MPK_FOR (i, n) out[i] = __bfloat16_as_ushort (__float2bfloat16_rn (inp[i]));
}

__global__ static void
bf16_to_f32_k (float *out, const uint16_t *inp, size_t n)
{
  MPK_FOR (i, n) out[i] = __bfloat162float (__ushort_as_bfloat16 (inp[i]));
}

extern "C" cudaError_t
mpk_cuda_cast_f32_to_bf16 (uint16_t *out, const float *inp, size_t n, cudaStream_t stream)
{
  LAUNCH (f32_to_bf16_k, n, stream, out, inp, n);
}

extern "C" cudaError_t
mpk_cuda_cast_bf16_to_f32 (float *out, const uint16_t *inp, size_t n, cudaStream_t stream)
{
  LAUNCH (bf16_to_f32_k, n, stream, out, inp, n);
}

/* ---- optimizers ------------------------------------------------------------------------- */

__global__ static void
adamw_k (float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
         float beta2, float eps, float wd, float bc1, float bc2)
{
  MPK_FOR (i, n)
    {
      float g = grad[i];
      float mi = beta1 * m[i] + (1.0f - beta1) * g;
      float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
      m[i] = mi;
      v[i] = vi;
      float mhat = mi / bc1, vhat = vi / bc2;
      param[i] -= lr * (mhat / (sqrtf (vhat) + eps) + wd * param[i]);
    }
}

__global__ static void
sgd_k (float *param, const float *grad, float *mom, size_t n, float lr, float momentum)
{
  MPK_FOR (i, n)
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

__global__ static void
sumsq_k (double *out, const float *x, size_t n)
{
  __shared__ double scratch[32];
  double s = 0;
  MPK_FOR (i, n) s += (double) x[i] * x[i];
  s = block_sum (s, scratch);
  if (threadIdx.x == 0)
    atomicAdd (out, s);
}

extern "C" cudaError_t
mpk_cuda_adamw_update (float *param, const float *grad, float *m, float *v, size_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int t,
                       cudaStream_t stream)
{
  /* Bias corrections once per call in double, as the reference. */
  float bc1 = (float) (1.0 - pow (beta1, t));
  float bc2 = (float) (1.0 - pow (beta2, t));
  LAUNCH (adamw_k, n, stream, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1,
          bc2);
}

extern "C" cudaError_t
mpk_cuda_sgd_update (float *param, const float *grad, float *mom, size_t n, float lr,
                     float momentum, cudaStream_t stream)
{
  LAUNCH (sgd_k, n, stream, param, grad, mom, n, lr, momentum);
}

extern "C" cudaError_t
mpk_cuda_sumsq (double *out, const float *x, size_t n, cudaStream_t stream)
{
  cudaError_t e = cudaMemsetAsync (out, 0, sizeof (double), stream);
  if (e != cudaSuccess || n == 0)
    return e;
  unsigned blocks = mpk_blocks (n, THREADS);
  if (blocks > 1024)
    blocks = 1024;
  sumsq_k<<<blocks, THREADS, 0, stream>>> (out, x, n);
  return cudaGetLastError ();
}
