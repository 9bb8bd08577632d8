/* model-attn.c - the attention variants of the model zoo inside a transformer block
 * (issue 17): their tensors (qk-norm gains, sink logits, post-norm gains), qk-norm forward
 * and backward, and the refusal of what a backend
 * has no kernel for. The block's order of ops is model-layers.c's. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec-private.h"
#include "common/error.h"

/* Sink logits start at a seeded N(0, SINK_STD): of the order of the scaled scores at
 * initialisation, so the sink takes a visible share of each softmax from step 0 (its
 * gradient is then tested, not just its presence). GPT-OSS ships trained values only. */
#define SINK_STD 1.0f
#define SINK_STREAM UINT64_C (0x5113c000)

static gboolean
add_owned (ExLayer *L, ExTensor *t)
{
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  return TRUE;
}

/* A qk-norm gain (ones, HD): every tp rank holds it whole, its heads use it, so its
 * gradient is partial over tp (tp_partial: summed once per step). */
static gboolean
add_qknorm_gain (MpExec *ex, ExLayer *L, guint layer, const char *name, const float *ones,
                 GError **error)
{
  ExTensor *t = mp_exec_tensor_new (ex, layer, name, ex->HD, ones, TRUE, FALSE, error);
  if (!add_owned (L, t))
    return FALSE;
  t->tp_partial = ex->tp > 1;
  return TRUE;
}

static gboolean
setup_qknorm (MpExec *ex, ExLayer *L, guint layer, GError **error)
{
  g_autofree float *ones = g_new (float, ex->HD);
  for (int d = 0; d < ex->HD; d++)
    ones[d] = 1.0f;
  return add_qknorm_gain (ex, L, layer, "qnorm.w", ones, error)
         && add_qknorm_gain (ex, L, layer, "knorm.w", ones, error);
}

/* Sink logits of this rank's heads: entries [tp_rank NHl, ...) of the seeded (NH). */
static gboolean
setup_sinks (MpExec *ex, ExLayer *L, guint layer, GError **error)
{
  g_autofree float *host = g_new (float, ex->NHl);
  mpk_cpu_fill_normal_block (host, ex->seed, SINK_STREAM + layer, (gsize) ex->NH, 0, 1,
                             (gsize) ex->tp_rank * ex->NHl, (gsize) ex->NHl, 0.0f, SINK_STD);
  return add_owned (L, mp_exec_tensor_new (ex, layer, "sinks", ex->NHl, host, FALSE, FALSE,
                                           error));
}

gboolean
mp_exec_attn_setup (MpExec *ex, ExLayer *L, guint layer, GError **error)
{
  const MpModel *m = ex->model;
  return (!m->qk_norm || setup_qknorm (ex, L, layer, error))
         && (!m->attn_sinks || setup_sinks (ex, L, layer, error))
         && (!m->post_norms || (mp_exec_add_norm_tensors (ex, L, layer, "pnorm1", error)
                                && mp_exec_add_norm_tensors (ex, L, layer, "pnorm2", error)));
}

void
mp_exec_qknorm_forward (MpExec *ex, float *qkv, int ld, const float *wq, const float *wk,
                        float *raw, float *rstd, float eps)
{
  ex->k->attn->qknorm_forward (ex->be, qkv, raw, rstd, wq, wk, ex->N, ex->NHl, ex->NKVl,
                               ex->HD, ld, eps);
}

/* Each tp rank normalised its own heads with the shared gains: GQ, GK get their part
 * (tp_partial). */
void
mp_exec_qknorm_backward (MpExec *ex, float *dqkv, int ld, float *gq, float *gk,
                         const float *raw, const float *rstd, const float *wq,
                         const float *wk)
{
  ex->k->attn->qknorm_backward (ex->be, dqkv, gq, gk, raw, rstd, wq, wk, ex->N, ex->NHl,
                                ex->NKVl, ex->HD, ld);
}

gboolean
mp_exec_attn_check_backend (const MpModel *m, const MpBackend *be, GError **error)
{
  const MpAttnKernelOps *k = be->ops->kernels->attn;
  gboolean masks = k != NULL && k->masks;
  const char *what = NULL;
  if (m->kv_lora_rank > 0 && (k == NULL || !k->value_heads))
    what = "multi-head latent attention";
  else if (m->window > 0 && !masks)
    what = "sliding-window attention";
  else if (m->attn_softcap > 0 && !masks)
    what = "soft-capped attention scores";
  else if (m->attn_sinks && (k == NULL || k->sinks_forward == NULL))
    what = "attention sinks";
  else if (m->qk_norm && (k == NULL || k->qknorm_forward == NULL))
    what = "qk-norm";
  else if (m->embed_scale && (k == NULL || k->scale == NULL))
    what = "scaled embeddings";
  else if (m->logit_softcap > 0 && (k == NULL || k->softcap_forward == NULL))
    what = "logit soft-capping";
  else if (m->activation == MP_ACT_GEGLU && (k == NULL || k->geglu_forward == NULL))
    what = "geglu MLPs";
  if (what == NULL)
    return TRUE;
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "mpplan exec does not run %s (model %s) on "
               "the %s backend yet (no kernels for it): use --backend host", what, m->name,
               be->ops->name);
  return FALSE;
}
