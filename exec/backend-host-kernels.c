/* backend-host-kernels.c - the host backend's kernel table: kernels/cpu, which need no
 * backend state (OpenBLAS keeps its own), behind MpKernelOps's backend argument. */
#include "config.h"
#include "exec/backend-private.h"
#include "kernels/cpu/kernels.h"

static void
hk_matmul_forward (MpBackend *be, float *out, const float *inp, const float *weight,
                   const float *bias, int N, int C, int OC)
{
  (void) be;
  mpk_cpu_matmul_forward (out, inp, weight, bias, N, C, OC);
}

static void
hk_matmul_backward (MpBackend *be, float *dinp, float *dweight, float *dbias,
                    const float *dout, const float *inp, const float *weight, int N, int C,
                    int OC)
{
  (void) be;
  mpk_cpu_matmul_backward (dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

static void
hk_embedding_forward (MpBackend *be, float *out, const int *tokens, const float *wte,
                      const float *wpe, int N, int T, int C, int v0, int Vl)
{
  (void) be;
  mpk_cpu_embedding_forward (out, tokens, wte, wpe, N, T, C, v0, Vl);
}

static void
hk_embedding_backward (MpBackend *be, float *dwte, float *dwpe, const float *dout,
                       const int *tokens, int N, int T, int C, int v0, int Vl)
{
  (void) be;
  mpk_cpu_embedding_backward (dwte, dwpe, dout, tokens, N, T, C, v0, Vl);
}

static void
hk_layernorm_forward (MpBackend *be, float *out, float *mean, float *rstd, const float *inp,
                      const float *weight, const float *bias, int N, int C, float eps)
{
  (void) be;
  mpk_cpu_layernorm_forward (out, mean, rstd, inp, weight, bias, N, C, eps);
}

static void
hk_layernorm_backward (MpBackend *be, float *dinp, float *dweight, float *dbias,
                       const float *dout, const float *inp, const float *weight,
                       const float *mean, const float *rstd, int N, int C)
{
  (void) be;
  mpk_cpu_layernorm_backward (dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

static void
hk_rmsnorm_forward (MpBackend *be, float *out, float *rstd, const float *inp,
                    const float *weight, int N, int C, float eps)
{
  (void) be;
  mpk_cpu_rmsnorm_forward (out, rstd, inp, weight, N, C, eps);
}

static void
hk_rmsnorm_backward (MpBackend *be, float *dinp, float *dweight, const float *dout,
                     const float *inp, const float *weight, const float *rstd, int N, int C)
{
  (void) be;
  mpk_cpu_rmsnorm_backward (dinp, dweight, dout, inp, weight, rstd, N, C);
}

static void
hk_rotary_forward (MpBackend *be, float *x, int B, int T, int NHR, int HD, int ld, int pos0,
                   float theta)
{
  (void) be;
  mpk_cpu_rotary_forward (x, B, T, NHR, HD, ld, pos0, theta);
}

static void
hk_rotary_backward (MpBackend *be, float *dx, int B, int T, int NHR, int HD, int ld, int pos0,
                    float theta)
{
  (void) be;
  mpk_cpu_rotary_backward (dx, B, T, NHR, HD, ld, pos0, theta);
}

static void
hk_attention_forward (MpBackend *be, float *out, float *lse, float *probs, const float *q,
                      const float *k, const float *v, MpkAttnShape s)
{
  (void) be;
  mpk_cpu_attention_forward (out, lse, probs, q, k, v, s);
}

static void
hk_attention_backward (MpBackend *be, float *dq, float *dk, float *dv, const float *dout,
                       const float *out, const float *lse, const float *probs, const float *q,
                       const float *k, const float *v, MpkAttnShape s)
{
  (void) be;
  mpk_cpu_attention_backward (dq, dk, dv, dout, out, lse, probs, q, k, v, s);
}

static void
hk_ring_attention_begin (MpBackend *be, float *out, float *m, float *l, MpkAttnShape s)
{
  (void) be;
  mpk_cpu_ring_attention_begin (out, m, l, s);
}

static void
hk_ring_attention_block (MpBackend *be, float *out, float *m, float *l, const float *q,
                         const float *k, const float *v, MpkAttnShape s, int TK,
                         const int *qpos, const int *kpos)
{
  (void) be;
  mpk_cpu_ring_attention_block (out, m, l, q, k, v, s, TK, qpos, kpos);
}

static void
hk_ring_attention_end (MpBackend *be, float *out, float *lse, const float *m, const float *l,
                       MpkAttnShape s)
{
  (void) be;
  mpk_cpu_ring_attention_end (out, lse, m, l, s);
}

static void
hk_ring_attention_backward_block (MpBackend *be, float *dq, float *dk, float *dv,
                                  const float *dout, const float *out, const float *lse,
                                  const float *q, const float *k, const float *v,
                                  MpkAttnShape s, int TK, const int *qpos, const int *kpos)
{
  (void) be;
  mpk_cpu_ring_attention_backward_block (dq, dk, dv, dout, out, lse, q, k, v, s, TK, qpos,
                                         kpos);
}

static void
hk_gelu_forward (MpBackend *be, float *out, const float *inp, size_t n)
{
  (void) be;
  mpk_cpu_gelu_forward (out, inp, n);
}

static void
hk_gelu_backward (MpBackend *be, float *dinp, const float *inp, const float *dout, size_t n)
{
  (void) be;
  mpk_cpu_gelu_backward (dinp, inp, dout, n);
}

static void
hk_relu_forward (MpBackend *be, float *out, const float *inp, size_t n)
{
  (void) be;
  mpk_cpu_relu_forward (out, inp, n);
}

static void
hk_relu_backward (MpBackend *be, float *dinp, const float *inp, const float *dout, size_t n)
{
  (void) be;
  mpk_cpu_relu_backward (dinp, inp, dout, n);
}

static void
hk_swiglu_forward (MpBackend *be, float *out, const float *inp, int N, int F)
{
  (void) be;
  mpk_cpu_swiglu_forward (out, inp, N, F);
}

static void
hk_swiglu_backward (MpBackend *be, float *dinp, const float *inp, const float *dout, int N,
                    int F)
{
  (void) be;
  mpk_cpu_swiglu_backward (dinp, inp, dout, N, F);
}

static void
hk_residual_forward (MpBackend *be, float *out, const float *a, const float *b, size_t n)
{
  (void) be;
  mpk_cpu_residual_forward (out, a, b, n);
}

static void
hk_add (MpBackend *be, float *y, const float *x, size_t n)
{
  (void) be;
  mpk_cpu_add (y, x, n);
}

static void
hk_crossentropy_shard_stats (MpBackend *be, float *lmax, float *lsum, float *tlogit,
                             const float *logits, const int *targets, int N, int Vl, int v0)
{
  (void) be;
  mpk_cpu_crossentropy_shard_stats (lmax, lsum, tlogit, logits, targets, N, Vl, v0);
}

static void
hk_crossentropy_shard_rescale (MpBackend *be, float *lsum, const float *lmax,
                               const float *gmax, int N)
{
  (void) be;
  mpk_cpu_crossentropy_shard_rescale (lsum, lmax, gmax, N);
}

static void
hk_crossentropy_shard_finish (MpBackend *be, float *losses, float *lse, const float *gmax,
                              const float *gsum, const float *tlogit, int N)
{
  (void) be;
  mpk_cpu_crossentropy_shard_finish (losses, lse, gmax, gsum, tlogit, N);
}

static void
hk_crossentropy_shard_backward (MpBackend *be, float *dlogits, const float *logits,
                                const float *lse, const int *targets, float scale, int N,
                                int Vl, int v0)
{
  (void) be;
  mpk_cpu_crossentropy_shard_backward (dlogits, logits, lse, targets, scale, N, Vl, v0);
}

static void
hk_adamw_update (MpBackend *be, float *param, const float *grad, float *m, float *v, size_t n,
                 float lr, float beta1, float beta2, float eps, float weight_decay, int t)
{
  (void) be;
  mpk_cpu_adamw_update (param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, t);
}

static void
hk_sgd_update (MpBackend *be, float *param, const float *grad, float *mom, size_t n, float lr,
               float momentum)
{
  (void) be;
  mpk_cpu_sgd_update (param, grad, mom, n, lr, momentum);
}

static double
hk_sumsq (MpBackend *be, const float *x, size_t n)
{
  (void) be;
  return mpk_cpu_sumsq (x, n);
}

static void
hk_gather_rows (MpBackend *be, float *out, const float *x, const int *idx, const float *scale,
                int R, int C)
{
  (void) be;
  mpk_cpu_gather_rows (out, x, idx, scale, R, C);
}

static void
hk_scatter_add_rows (MpBackend *be, float *y, const float *x, const int *idx,
                     const float *scale, int R, int C)
{
  (void) be;
  mpk_cpu_scatter_add_rows (y, x, idx, scale, R, C);
}

static void
hk_rows_dot (MpBackend *be, float *out, const float *a, const int *idx, const float *b, int R,
             int C)
{
  (void) be;
  mpk_cpu_rows_dot (out, a, idx, b, R, C);
}

static void
hk_router_forward (MpBackend *be, float *probs, int *idx, float *gates, const float *logits,
                   int N, int E, int K)
{
  (void) be;
  mpk_cpu_router_forward (probs, idx, gates, logits, N, E, K);
}

static void
hk_grouped_matmul_forward (MpBackend *be, float *out, const float *inp, const float *weight,
                           const float *bias, const int *rows, int G, int C, int OC)
{
  (void) be;
  mpk_cpu_grouped_matmul_forward (out, inp, weight, bias, rows, G, C, OC);
}

static void
hk_grouped_matmul_backward (MpBackend *be, float *dinp, float *dweight, float *dbias,
                            const float *dout, const float *inp, const float *weight,
                            const int *rows, int G, int C, int OC)
{
  (void) be;
  mpk_cpu_grouped_matmul_backward (dinp, dweight, dbias, dout, inp, weight, rows, G, C, OC);
}

const MpKernelOps mp_backend_host_kernels = {
  .matmul_forward = hk_matmul_forward,
  .matmul_backward = hk_matmul_backward,
  .embedding_forward = hk_embedding_forward,
  .embedding_backward = hk_embedding_backward,
  .layernorm_forward = hk_layernorm_forward,
  .layernorm_backward = hk_layernorm_backward,
  .rmsnorm_forward = hk_rmsnorm_forward,
  .rmsnorm_backward = hk_rmsnorm_backward,
  .rotary_forward = hk_rotary_forward,
  .rotary_backward = hk_rotary_backward,
  .attention_forward = hk_attention_forward,
  .attention_backward = hk_attention_backward,
  .gelu_forward = hk_gelu_forward,
  .gelu_backward = hk_gelu_backward,
  .relu_forward = hk_relu_forward,
  .relu_backward = hk_relu_backward,
  .swiglu_forward = hk_swiglu_forward,
  .swiglu_backward = hk_swiglu_backward,
  .residual_forward = hk_residual_forward,
  .add = hk_add,
  .crossentropy_shard_stats = hk_crossentropy_shard_stats,
  .crossentropy_shard_rescale = hk_crossentropy_shard_rescale,
  .crossentropy_shard_finish = hk_crossentropy_shard_finish,
  .crossentropy_shard_backward = hk_crossentropy_shard_backward,
  .adamw_update = hk_adamw_update,
  .sgd_update = hk_sgd_update,
  .sumsq = hk_sumsq,
  .ring_attention_begin = hk_ring_attention_begin,
  .ring_attention_block = hk_ring_attention_block,
  .ring_attention_end = hk_ring_attention_end,
  .ring_attention_backward_block = hk_ring_attention_backward_block,
  .gather_rows = hk_gather_rows,
  .scatter_add_rows = hk_scatter_add_rows,
  .rows_dot = hk_rows_dot,
  .router_forward = hk_router_forward,
  .grouped_matmul_forward = hk_grouped_matmul_forward,
  .grouped_matmul_backward = hk_grouped_matmul_backward,
  .attn = &mp_backend_host_attn_kernels,
};
