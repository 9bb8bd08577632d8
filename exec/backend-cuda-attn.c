/* backend-cuda-attn.c - the cuda backend's attention variants: kernels/cuda/attn-extras.cu
 * launched on the compute stream, a failed launch kept as the sticky error. Its attention
 * kernels (kernels/cuda/attention.cuh) take windows, score caps and value heads of their
 * own width (MLA), as kernels/cpu's (tests/test-kernels-cuda). */
#include "config.h"
#include "exec/backend-cuda-private.h"
#include "kernels/cuda/kernels-cuda.h"

static void
ca_qknorm_forward (MpBackend *be, float *qkv, float *raw, float *rstd, const float *wq,
                   const float *wk, int N, int NH, int NKV, int HD, int ld, float eps)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_qknorm_forward (qkv, raw, rstd, wq, wk, N, NH, NKV, HD, ld, eps,
                                         c->compute), "mpk_cuda_qknorm_forward");
}

static void
ca_qknorm_backward (MpBackend *be, float *dqkv, float *dwq, float *dwk, const float *raw,
                    const float *rstd, const float *wq, const float *wk, int N, int NH,
                    int NKV, int HD, int ld)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_qknorm_backward (dqkv, dwq, dwk, raw, rstd, wq, wk, N, NH, NKV, HD, ld,
                                          c->compute), "mpk_cuda_qknorm_backward");
}

static void
ca_sinks_forward (MpBackend *be, float *out, float *lse, float *probs, const float *sinks,
                  MpkAttnShape s)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_attention_sinks_forward (out, lse, probs, sinks, s, c->compute),
             "mpk_cuda_attention_sinks_forward");
}

static void
ca_sinks_backward (MpBackend *be, float *dsinks, const float *dout, const float *out,
                   const float *lse, const float *sinks, MpkAttnShape s)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_attention_sinks_backward (dsinks, dout, out, lse, sinks, s,
                                                   c->compute),
             "mpk_cuda_attention_sinks_backward");
}

static void
ca_softcap_forward (MpBackend *be, float *x, size_t n, float cap)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_softcap_forward (x, n, cap, c->compute), "mpk_cuda_softcap_forward");
}

static void
ca_softcap_backward (MpBackend *be, float *dx, const float *y, size_t n, float cap)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_softcap_backward (dx, y, n, cap, c->compute),
             "mpk_cuda_softcap_backward");
}

static void
ca_geglu_forward (MpBackend *be, float *out, const float *inp, int N, int F)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_geglu_forward (out, inp, N, F, c->compute), "mpk_cuda_geglu_forward");
}

static void
ca_geglu_backward (MpBackend *be, float *dinp, const float *inp, const float *dout, int N,
                   int F)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_geglu_backward (dinp, inp, dout, N, F, c->compute),
             "mpk_cuda_geglu_backward");
}

static void
ca_scale (MpBackend *be, float *x, size_t n, float s)
{
  CudaBackend *c = (CudaBackend *) be;
  mpcu_note (c, mpk_cuda_scale (x, n, s, c->compute), "mpk_cuda_scale");
}

const MpAttnKernelOps mpcu_attn_kernels = {
  .masks = TRUE,
  .value_heads = TRUE,
  .qknorm_forward = ca_qknorm_forward,
  .qknorm_backward = ca_qknorm_backward,
  .sinks_forward = ca_sinks_forward,
  .sinks_backward = ca_sinks_backward,
  .softcap_forward = ca_softcap_forward,
  .softcap_backward = ca_softcap_backward,
  .geglu_forward = ca_geglu_forward,
  .geglu_backward = ca_geglu_backward,
  .scale = ca_scale,
};
