/* backend-host-attn.c - the host backend's attention variants: kernels/cpu behind
 * MpAttnKernelOps's backend argument (unused: the kernels need no state). */
#include "config.h"
#include "exec/backend-private.h"
#include "kernels/cpu/kernels.h"

static void
ha_qknorm_forward (MpBackend *be, float *qkv, float *raw, float *rstd, const float *wq,
                   const float *wk, int N, int NH, int NKV, int HD, int ld, float eps)
{
  (void) be;
  mpk_cpu_qknorm_forward (qkv, raw, rstd, wq, wk, N, NH, NKV, HD, ld, eps);
}

static void
ha_qknorm_backward (MpBackend *be, float *dqkv, float *dwq, float *dwk, const float *raw,
                    const float *rstd, const float *wq, const float *wk, int N, int NH,
                    int NKV, int HD, int ld)
{
  (void) be;
  mpk_cpu_qknorm_backward (dqkv, dwq, dwk, raw, rstd, wq, wk, N, NH, NKV, HD, ld);
}

static void
ha_sinks_forward (MpBackend *be, float *out, float *lse, float *probs, const float *sinks,
                  MpkAttnShape s)
{
  (void) be;
  mpk_cpu_attention_sinks_forward (out, lse, probs, sinks, s);
}

static void
ha_sinks_backward (MpBackend *be, float *dsinks, const float *dout, const float *out,
                   const float *lse, const float *sinks, MpkAttnShape s)
{
  (void) be;
  mpk_cpu_attention_sinks_backward (dsinks, dout, out, lse, sinks, s);
}

static void
ha_softcap_forward (MpBackend *be, float *x, size_t n, float cap)
{
  (void) be;
  mpk_cpu_softcap_forward (x, n, cap);
}

static void
ha_softcap_backward (MpBackend *be, float *dx, const float *y, size_t n, float cap)
{
  (void) be;
  mpk_cpu_softcap_backward (dx, y, n, cap);
}

static void
ha_geglu_forward (MpBackend *be, float *out, const float *inp, int N, int F)
{
  (void) be;
  mpk_cpu_geglu_forward (out, inp, N, F);
}

static void
ha_geglu_backward (MpBackend *be, float *dinp, const float *inp, const float *dout, int N,
                   int F)
{
  (void) be;
  mpk_cpu_geglu_backward (dinp, inp, dout, N, F);
}

static void
ha_scale (MpBackend *be, float *x, size_t n, float s)
{
  (void) be;
  mpk_cpu_scale (x, n, s);
}

const MpAttnKernelOps mp_backend_host_attn_kernels = {
  .masks = TRUE,
  .value_heads = TRUE,
  .qknorm_forward = ha_qknorm_forward,
  .qknorm_backward = ha_qknorm_backward,
  .sinks_forward = ha_sinks_forward,
  .sinks_backward = ha_sinks_backward,
  .softcap_forward = ha_softcap_forward,
  .softcap_backward = ha_softcap_backward,
  .geglu_forward = ha_geglu_forward,
  .geglu_backward = ha_geglu_backward,
  .scale = ha_scale,
};
