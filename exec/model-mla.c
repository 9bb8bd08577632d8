/* model-mla.c - multi-head latent attention (DeepSeek-V2 sec. 2.1, V3) in a transformer
 * block, as Megatron-Core's MLASelfAttention runs it under tensor parallelism: the down
 * projections to the latents (q_down: C -> q_lora_rank, kv_down: C -> kv_lora_rank + the
 * rotary key shared by all heads) and the latents' RMSNorms are replicated on every tp
 * rank ("duplicated" TELinear) and, under sequence parallelism, run on the rank's own
 * rows, their outputs gathered; the up projections (q_up, kv_up) are column-parallel over
 * the heads, so the latents' gradients are partial sums over tp, all-reduced (or
 * reduce-scattered) before the replicated part's backward, as the cost model's region
 * entry at q_up / kv_up says. Without q_lora_rank (V2-Lite) q is projected directly
 * (column-parallel, its input the gathered hidden state).
 *
 * Per local head: q = [q_nope | q_rope], k = [k_nope | k_rope (the shared rotary key)],
 * v (v_head_dim); RoPE on q_rope and the shared key; the core scales by
 * 1 / sqrt (nope + rope) (the IR has no YaRN mscale). The block's attention core reads
 * them from one packed buffer [q heads | k heads | v heads] (model-layers.c). */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec-private.h"
#include "common/error.h"

#define INIT_STD 0.02f
#define NORM_EPS 1e-5f
#define ROPE_THETA 10000.0f
#define MLA_STREAM (UINT64_C (0x317a) << 32)

/* Activation slots, after the attention variants' (model-layers.c): the raw q latent and
 * its rstd, the normalised one (this rank's rows) and gathered (sequence parallelism: during
 * the forward, or a recompute's; mp_exec_mla_release_gathers);
 * the same for the kv latent. */
enum { L_CQ = 32, L_CQR, L_CQN, L_LQ, L_CKV, L_CKVR, L_CKVN, L_LKV, L_END };
G_STATIC_ASSERT (L_END <= MAX_BUFS);

/* Where a block's MLA tensors sit in its `uses`, from FIRST. */
typedef struct {
  int wq;        /* q_lora: q_down (qr, C), else q_proj (NHl D, C) */
  int qn, wuq;   /* q_lora: q_norm (qr), q_up (NHl D, qr); else -1 */
  int wdkv, kvn, wukv;  /* kv_down (kvr + rope, C), kv_norm (kvr), kv_up (NHl (nope + dv), kvr) */
} MlaIdx;

/* The widths of the model's MLA. */
typedef struct {
  int qr, kvr, nope, rope, dv, D;
} MlaDims;

static MlaDims
dims_of (const MpModel *m)
{
  return (MlaDims) { (int) m->q_lora_rank, (int) m->kv_lora_rank, (int) m->qk_nope_head_dim,
                     (int) m->qk_rope_head_dim, (int) m->v_head_dim,
                     (int) (m->qk_nope_head_dim + m->qk_rope_head_dim) };
}

static MlaIdx
idx_of (const MpModel *m, guint first)
{
  int k = (int) first;
  MlaIdx i;
  i.wq = k++;
  i.qn = m->q_lora_rank > 0 ? k++ : -1;
  i.wuq = m->q_lora_rank > 0 ? k++ : -1;
  i.wdkv = k++;
  i.kvn = k++;
  i.wukv = k++;
  return i;
}

int
mp_exec_mla_n_tensors (const MpModel *m)
{
  return m->q_lora_rank > 0 ? 6 : 4;
}

gboolean
mp_exec_mla_reads_hidden (const MpModel *m)
{
  return m->q_lora_rank == 0;
}

static float *
P (const ExLayer *L, int i)
{
  return ((ExTensor *) g_ptr_array_index (L->uses, (guint) i))->param;
}

static float *
G (const ExLayer *L, int i)
{
  return ((ExTensor *) g_ptr_array_index (L->uses, (guint) i))->grad;
}

/* ---- tensors ----------------------------------------------------------------------- */

/* Rows [R0, R0 + ROWS) of the seeded (FULL_ROWS, IN) weight INDEX of block LAYER: the
 * whole of a replicated one, this rank's heads of a column-parallel one. */
static gboolean
add_weight (MpExec *ex, ExLayer *L, guint layer, const char *name, guint index, gsize rows,
            gsize in, gsize r0, gboolean replicated, GError **error)
{
  g_autofree float *host = g_new (float, rows * in);
  mpk_cpu_fill_normal_block (host, ex->seed, MLA_STREAM + layer * 8 + index, in, r0, rows, 0,
                             in, 0.0f, INIT_STD);
  ExTensor *t = mp_exec_tensor_new (ex, layer, name, rows * in, host, replicated, FALSE,
                                    error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  t->tp_partial = replicated && ex->sp;  /* under sequence parallelism: on its rows */
  return TRUE;
}

/* A latent's RMSNorm gain (ones), replicated. */
static gboolean
add_gain (MpExec *ex, ExLayer *L, guint layer, const char *name, gsize n, GError **error)
{
  g_autofree float *host = g_new (float, n);
  for (gsize i = 0; i < n; i++)
    host[i] = 1.0f;
  ExTensor *t = mp_exec_tensor_new (ex, layer, name, n, host, TRUE, FALSE, error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  t->tp_partial = ex->sp;
  return TRUE;
}

gboolean
mp_exec_mla_setup (MpExec *ex, ExLayer *L, guint layer, GError **error)
{
  MlaDims d = dims_of (ex->model);
  gsize C = ex->C, hl = ex->NHl, h0 = (gsize) ex->tp_rank * hl;
  gboolean ok = d.qr > 0
                    ? add_weight (ex, L, layer, "wdq", 0, d.qr, C, 0, TRUE, error)
                      && add_gain (ex, L, layer, "qnorm.w", d.qr, error)
                      && add_weight (ex, L, layer, "wuq", 1, hl * d.D, d.qr, h0 * d.D, FALSE,
                                     error)
                    : add_weight (ex, L, layer, "wq", 1, hl * d.D, C, h0 * d.D, FALSE, error);
  return ok && add_weight (ex, L, layer, "wdkv", 2, (gsize) d.kvr + d.rope, C, 0, TRUE, error)
         && add_gain (ex, L, layer, "kvnorm.w", d.kvr, error)
         && add_weight (ex, L, layer, "wukv", 3, hl * (d.nope + d.dv), d.kvr,
                        h0 * (d.nope + d.dv), FALSE, error);
}

gboolean
mp_exec_mla_acts (MpExec *ex, Acts *a, GError **error)
{
  MlaDims d = dims_of (ex->model);
  gsize N = ex->N, Ns = ex->Ns;
  gboolean sp = ex->sp;
  return (d.qr == 0
          || (mp_exec_act_alloc (ex, a, L_CQ, Ns * d.qr, error)
              && mp_exec_act_alloc (ex, a, L_CQR, Ns, error)
              && mp_exec_act_alloc (ex, a, L_CQN, Ns * d.qr, error)
              && (!sp || mp_exec_act_alloc (ex, a, L_LQ, N * d.qr, error))))
         && mp_exec_act_alloc (ex, a, L_CKV, Ns * d.kvr, error)
         && mp_exec_act_alloc (ex, a, L_CKVR, Ns, error)
         && mp_exec_act_alloc (ex, a, L_CKVN, Ns * d.kvr, error)
         && (!sp || mp_exec_act_alloc (ex, a, L_LKV, N * d.kvr, error));
}

void
mp_exec_mla_release_gathers (MpExec *ex, Acts *a)
{
  ex->be->ops->release (ex->be, a->buf[L_LQ]);
  ex->be->ops->release (ex->be, a->buf[L_LKV]);
  a->buf[L_LQ] = a->buf[L_LKV] = NULL;
}

/* ---- helpers ----------------------------------------------------------------------- */

/* ROWS rows of WIDTH floats from SRC (LDS apart) to DST (LDD apart), in one call. */
static void
copy_block (MpExec *ex, float *dst, int ldd, const float *src, int lds, int rows, int width)
{
  gsize f = sizeof (float);
  ex->be->ops->copy_2d (ex->be, dst, (gsize) ldd * f, src, (gsize) lds * f, (gsize) width * f,
                        (gsize) rows);
}

/* RoPE (or its backward) on the rope part of each of HEADS heads D wide from X (rows LD
 * apart): the last ROPE of each head's D features. */
static void
rope_parts (MpExec *ex, float *x, int ld, int heads, MlaDims d, gboolean backward)
{
  for (int h = 0; h < heads; h++)
    mp_exec_rotary_heads (ex, x + (gsize) h * d.D + d.nope, ld, 1, d.rope, backward,
                          ROPE_THETA);
}

/* ---- forward ----------------------------------------------------------------------- */

/* One latent: RAW (Ns, W) = XLN W_down's rows and its RMSNorm into NORMED with RSTD. */
static void
latent_forward (MpExec *ex, const float *xln, const float *w, const float *gain, int width,
                float *raw, float *rstd, float *normed)
{
  ex->k->matmul_forward (ex->be, raw, xln, w, NULL, ex->Ns, ex->C, width);
  ex->k->rmsnorm_forward (ex->be, normed, rstd, raw, gain, ex->Ns, width, NORM_EPS);
}

/* Under sequence parallelism, kv_down's whole output on this rank's rows - the normed kv
 * latent LKV_S (Ns, kvr) and the rotary key KPE_S (Ns, rope) - gathered in ONE all-gather
 * (the cost model's single entry at kv_up, kv_down's width), then split into LKV (N, kvr)
 * and KPE (N, rope): a collective per block saved against gathering them apart. */
static gboolean
kv_gather (MpExec *ex, MpExecTmp *t, const float *lkv_s, const float *kpe_s, float *lkv,
           float *kpe, MlaDims d, GError **error)
{
  int Ns = ex->Ns, N = ex->N, w = d.kvr + d.rope;
  float *shard = mp_exec_tmp_floats (t, (gsize) Ns * w, error);
  float *full = shard ? mp_exec_tmp_floats (t, (gsize) N * w, error) : NULL;
  if (full == NULL)
    return FALSE;
  copy_block (ex, shard, w, lkv_s, d.kvr, Ns, d.kvr);
  copy_block (ex, shard + d.kvr, w, kpe_s, d.rope, Ns, d.rope);
  if (mp_exec_tp_gather_width (ex, shard, full, w, error) == NULL)
    return FALSE;
  copy_block (ex, lkv, d.kvr, full, w, N, d.kvr);
  copy_block (ex, kpe, d.rope, full + d.kvr, w, N, d.rope);
  return TRUE;
}

gboolean
mp_exec_mla_forward (MpExec *ex, const ExLayer *L, guint first, Acts *a, const float *xln,
                     const float *h1, float *qkv, int ld, GError **error)
{
  const MpKernelOps *k = ex->k;
  MlaDims d = dims_of (ex->model);
  MlaIdx I = idx_of (ex->model, first);
  int N = ex->N, hl = ex->NHl, kvw = d.nope + d.dv;
  MpExecTmp t = { ex };
  float *q = mp_exec_tmp_floats (&t, (gsize) N * hl * d.D, error);
  float *kv = q ? mp_exec_tmp_floats (&t, (gsize) N * hl * kvw, error) : NULL;
  float *kpe_s = kv ? mp_exec_tmp_floats (&t, (gsize) ex->Ns * d.rope, error) : NULL;
  float *kpe_f = kpe_s && ex->sp ? mp_exec_tmp_floats (&t, (gsize) N * d.rope, error) : NULL;
  if (kpe_s == NULL || (ex->sp && kpe_f == NULL))
    goto fail;
  /* q: through its latent, or straight from the gathered hidden state */
  if (d.qr > 0)
    {
      latent_forward (ex, xln, P (L, I.wq), P (L, I.qn), d.qr, a->buf[L_CQ], a->buf[L_CQR],
                      a->buf[L_CQN]);
      const float *lq = mp_exec_tp_gather_width (ex, a->buf[L_CQN], a->buf[L_LQ], d.qr,
                                                 error);
      if (lq == NULL)
        goto fail;
      k->matmul_forward (ex->be, q, lq, P (L, I.wuq), NULL, N, d.qr, hl * d.D);
    }
  else
    k->matmul_forward (ex->be, q, h1, P (L, I.wq), NULL, N, ex->C, hl * d.D);
  /* kv latent (kv_down's first kvr rows) and the rotary key (its last rope rows) */
  const float *wdkv = P (L, I.wdkv);
  latent_forward (ex, xln, wdkv, P (L, I.kvn), d.kvr, a->buf[L_CKV], a->buf[L_CKVR],
                  a->buf[L_CKVN]);
  k->matmul_forward (ex->be, kpe_s, xln, wdkv + (gsize) d.kvr * ex->C, NULL, ex->Ns, ex->C,
                     d.rope);
  const float *lkv = ex->sp ? a->buf[L_LKV] : a->buf[L_CKVN];
  float *kpe = ex->sp ? kpe_f : kpe_s;
  if (ex->sp && !kv_gather (ex, &t, a->buf[L_CKVN], kpe_s, a->buf[L_LKV], kpe_f, d, error))
    goto fail;
  k->matmul_forward (ex->be, kv, lkv, P (L, I.wukv), NULL, N, d.kvr, hl * kvw);
  mp_exec_rotary_heads (ex, kpe, d.rope, 1, d.rope, FALSE, ROPE_THETA);
  /* pack [q heads | k heads (k_nope, the shared k_rope) | v heads] */
  float *kh = qkv + (gsize) hl * d.D, *vh = kh + (gsize) hl * d.D;
  copy_block (ex, qkv, ld, q, hl * d.D, N, hl * d.D);
  rope_parts (ex, qkv, ld, hl, d, FALSE);
  for (int h = 0; h < hl; h++)
    {
      copy_block (ex, kh + h * d.D, ld, kv + h * kvw, hl * kvw, N, d.nope);
      copy_block (ex, kh + h * d.D + d.nope, ld, kpe, d.rope, N, d.rope);
      copy_block (ex, vh + h * d.dv, ld, kv + h * kvw + d.nope, hl * kvw, N, d.dv);
    }
  mp_exec_tmp_release (&t);
  return TRUE;
fail:
  mp_exec_tmp_release (&t);
  return FALSE;
}

/* ---- backward ---------------------------------------------------------------------- */

/* One latent's backward from D (Ns, W), the gradient at the up projection's input summed
 * over tp on this rank's rows: through its RMSNorm (gain gradient into GGAIN) and its
 * down projection rows W (gradient GW), into DXLN (Ns, C) +=. Under sequence parallelism
 * GW and GGAIN get this rank's rows' part (tp_partial). */
static gboolean
latent_backward (MpExec *ex, const float *d, const float *xln, const float *w, float *gw,
                 const float *gain, float *ggain, int width, const float *raw,
                 const float *rstd, float *dxln, GError **error)
{
  MpExecTmp t = { ex };
  float *draw = mp_exec_tmp_floats (&t, (gsize) ex->Ns * width, error);
  if (draw)
    {
      ex->k->rmsnorm_backward (ex->be, draw, ggain, d, raw, gain, rstd, ex->Ns, width);
      ex->k->matmul_backward (ex->be, dxln, gw, NULL, draw, xln, w, ex->Ns, ex->C, width);
    }
  mp_exec_tmp_release (&t);
  return draw != NULL;
}

/* The gradients at kv_down's output, the kv latent's DLKV (N, kvr) and the rotary key's
 * DKPE (N, rope), partial over tp: summed in ONE collective of kv_down's width (an
 * all-reduce, or under sequence parallelism a reduce-scatter to this rank's rows), as the
 * cost model's entry at kv_up charges, into *DLKV_S (Ns, kvr) and *DKPE_S (Ns, rope). */
static gboolean
kv_reduce (MpExec *ex, MpExecTmp *t, const float *dlkv, const float *dkpe, float **dlkv_s,
           float **dkpe_s, MlaDims d, GError **error)
{
  int Ns = ex->Ns, N = ex->N, w = d.kvr + d.rope;
  float *full = mp_exec_tmp_floats (t, (gsize) N * w, error);
  float *shard = full ? mp_exec_tmp_floats (t, (gsize) Ns * w, error) : NULL;
  *dlkv_s = shard ? mp_exec_tmp_floats (t, (gsize) Ns * d.kvr, error) : NULL;
  *dkpe_s = *dlkv_s ? mp_exec_tmp_floats (t, (gsize) Ns * d.rope, error) : NULL;
  if (*dkpe_s == NULL)
    return FALSE;
  copy_block (ex, full, w, dlkv, d.kvr, N, d.kvr);
  copy_block (ex, full + d.kvr, w, dkpe, d.rope, N, d.rope);
  const float *r = mp_exec_tp_reduce_width (ex, full, shard, w, error);
  if (r == NULL)
    return FALSE;
  copy_block (ex, *dlkv_s, d.kvr, r, w, Ns, d.kvr);
  copy_block (ex, *dkpe_s, d.rope, r + d.kvr, w, Ns, d.rope);
  return TRUE;
}

float *
mp_exec_mla_backward (MpExec *ex, const ExLayer *L, guint first, Acts *a, float *dqkv, int ld,
                      const float *xln, const float *h1, float *dh1, float *dh1s,
                      GError **error)
{
  const MpKernelOps *k = ex->k;
  MlaDims d = dims_of (ex->model);
  MlaIdx I = idx_of (ex->model, first);
  int N = ex->N, Ns = ex->Ns, C = ex->C, hl = ex->NHl, kvw = d.nope + d.dv;
  MpExecTmp t = { ex };
  float *dq = mp_exec_tmp_floats (&t, (gsize) N * hl * d.D, error);
  float *dkv = dq ? mp_exec_tmp_floats (&t, (gsize) N * hl * kvw, error) : NULL;
  float *dlkv = dkv ? mp_exec_tmp_floats (&t, (gsize) N * d.kvr, error) : NULL;
  float *dkpe = dlkv ? mp_exec_tmp_floats (&t, (gsize) N * d.rope, error) : NULL;
  float *dkph = dkpe ? mp_exec_tmp_floats (&t, (gsize) N * d.rope, error) : NULL;
  float *dlq = dkph && d.qr > 0 ? mp_exec_tmp_floats (&t, (gsize) N * d.qr, error) : NULL;
  float *dlq_s = dlq ? mp_exec_tmp_floats (&t, (gsize) Ns * d.qr, error) : NULL;
  float *dn = NULL;
  if (dkph == NULL || (d.qr > 0 && dlq_s == NULL))
    goto done;
  /* unpack: q heads (RoPE undone), k_nope and v heads, the shared key's gradient summed
   * over this rank's heads (each head's block copied out whole, then added at once) */
  float *dkh = dqkv + (gsize) hl * d.D, *dvh = dkh + (gsize) hl * d.D;
  rope_parts (ex, dqkv, ld, hl, d, TRUE);
  copy_block (ex, dq, hl * d.D, dqkv, ld, N, hl * d.D);
  for (int h = 0; h < hl; h++)
    {
      copy_block (ex, dkv + h * kvw, hl * kvw, dkh + h * d.D, ld, N, d.nope);
      copy_block (ex, dkv + h * kvw + d.nope, hl * kvw, dvh + h * d.dv, ld, N, d.dv);
      copy_block (ex, h == 0 ? dkpe : dkph, d.rope, dkh + h * d.D + d.nope, ld, N, d.rope);
      if (h > 0)
        k->add (ex->be, dkpe, dkph, (gsize) N * d.rope);
    }
  mp_exec_rotary_heads (ex, dkpe, d.rope, 1, d.rope, TRUE, ROPE_THETA);
  /* the column-parallel up projections: their weights, and their inputs' partial sums */
  const float *lkv = mp_exec_tp_regather_width (ex, &t, a->buf[L_LKV], a->buf[L_CKVN], d.kvr,
                                                error);
  if (lkv == NULL)
    goto fail;
  k->matmul_backward (ex->be, dlkv, G (L, I.wukv), NULL, dkv, lkv, P (L, I.wukv), N, d.kvr,
                      hl * kvw);
  if (d.qr > 0)
    {
      const float *lq = mp_exec_tp_regather_width (ex, &t, a->buf[L_LQ], a->buf[L_CQN], d.qr,
                                                   error);
      if (lq == NULL)
        goto fail;
      k->matmul_backward (ex->be, dlq, G (L, I.wuq), NULL, dq, lq, P (L, I.wuq), N, d.qr,
                          hl * d.D);
      dn = dh1s;
    }
  else
    {
      k->matmul_backward (ex->be, dh1, G (L, I.wq), NULL, dq, h1, P (L, I.wq), N, C, hl * d.D);
      dn = mp_exec_tp_reduce_width (ex, dh1, dh1s, C, error);
      if (dn == NULL)
        goto done;
    }
  /* the replicated part, on this rank's rows: the kv latent and rotary key (one sum over
   * tp, where there is a tp), q_down */
  float *wdkv = P (L, I.wdkv), *gdkv = G (L, I.wdkv);
  gsize nr = (gsize) d.kvr * C;
  float *dlkv_s = dlkv, *dkpe_s = dkpe;
  if (ex->tp > 1 && !kv_reduce (ex, &t, dlkv, dkpe, &dlkv_s, &dkpe_s, d, error))
    goto fail;
  k->matmul_backward (ex->be, dn, gdkv + nr, NULL, dkpe_s, xln, wdkv + nr, Ns, C, d.rope);
  if (!latent_backward (ex, dlkv_s, xln, wdkv, gdkv, P (L, I.kvn), G (L, I.kvn), d.kvr,
                        a->buf[L_CKV], a->buf[L_CKVR], dn, error))
    goto fail;
  if (d.qr > 0)
    {
      const float *dq_s = mp_exec_tp_reduce_width (ex, dlq, dlq_s, d.qr, error);
      if (dq_s == NULL
          || !latent_backward (ex, dq_s, xln, P (L, I.wq), G (L, I.wq), P (L, I.qn),
                               G (L, I.qn), d.qr, a->buf[L_CQ], a->buf[L_CQR], dn, error))
        goto fail;
    }
done:
  mp_exec_tmp_release (&t);
  return dn;
fail:
  mp_exec_tmp_release (&t);
  return NULL;
}
