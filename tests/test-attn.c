/* test-attn.c - cmocka tests of the attention and block variants of the model zoo (issue
 * 17): each kernel's backward against central finite differences of its forward (sliding
 * window with soft-capped scores, both backward paths; attention sinks; qk-norm; logit
 * soft-capping; geglu), the window's mask itself, and the executor's whole step on one
 * host rank (no MPI) for a model with every variant, where the gradient of each variant's
 * parameters (and of the scaled embedding) is checked against differences of the loss. */
#include "tests/test-util.h"
#include "exec/exec-private.h"
#include "kernels/cpu/kernels.h"
#include "costmodel/costmodel.h"
#include "topology/topology.h"

#include <string.h>

/* ---- finite differences ------------------------------------------------------------ */

typedef double (*Objective) (void *data);

/* Central differences of F in the elements of X listed by STRIDE (every STRIDE-th, from
 * 0) against GRAD, within TOL of the largest |GRAD| element. */
static void
check_grad (Objective f, void *data, const char *name, float *x, size_t n, const float *grad,
            double hstep, double tol, size_t stride)
{
  double scale = 1e-6;
  for (size_t i = 0; i < n; i++)
    scale = fmax (scale, fabs (grad[i]));
  for (size_t i = 0; i < n; i += stride)
    {
      float x0 = x[i];
      x[i] = (float) (x0 + hstep);
      double up = x[i], fu = f (data);
      x[i] = (float) (x0 - hstep);
      double down = x[i], fdn = f (data);
      x[i] = x0;
      double fd = (fu - fdn) / (up - down);
      if (!(fabs (fd - grad[i]) <= tol * scale))
        fail_msg ("%s[%zu]: backward %.7g vs finite difference %.7g (largest %.3g)", name, i,
                  grad[i], fd, scale);
    }
}

static double
dot_probe (const float *x, const float *probe, size_t n)
{
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += (double) x[i] * probe[i];
  return s;
}

/* ---- attention: window, soft cap, sinks -------------------------------------------- */

enum { AB = 2, AT = 9, ANH = 4, ANKV = 2, AHD = 4, ALD = (ANH + 2 * ANKV) * AHD };

typedef struct {
  MpkAttnShape s;
  float qkv[AB * AT * ALD], out[AB * AT * ANH * AHD], probe[AB * AT * ANH * AHD];
  float lse[AB * ANH * AT], probs[AB * ANH * AT * AT], sinks[ANH];
  gboolean with_sinks;
} Attn;

static void
attn_init (Attn *a, int window, float softcap, gboolean sinks)
{
  memset (a, 0, sizeof *a);
  a->s = (MpkAttnShape) { AB, AT, ANH, ANKV, AHD, ALD, ALD, ANH * AHD, window, softcap };
  mpk_cpu_fill_normal (a->qkv, G_N_ELEMENTS (a->qkv), 3, 1, 0, 0.0f, 1.5f);
  mpk_cpu_fill_normal (a->probe, G_N_ELEMENTS (a->probe), 3, 2, 0, 0.0f, 1.0f);
  mpk_cpu_fill_normal (a->sinks, ANH, 3, 3, 0, 0.0f, 1.0f);
  a->with_sinks = sinks;
}

static double
attn_objective (void *data)
{
  Attn *a = data;
  float *q = a->qkv, *k = q + ANH * AHD, *v = k + ANKV * AHD;
  mpk_cpu_attention_forward (a->out, a->lse, a->probs, q, k, v, a->s);
  if (a->with_sinks)
    mpk_cpu_attention_sinks_forward (a->out, a->lse, a->probs, a->sinks, a->s);
  return dot_probe (a->out, a->probe, G_N_ELEMENTS (a->out));
}

/* Gradients of sum (out * probe) in q, k, v (and the sinks), from the stored
 * probabilities or recomputed ones, against differences. */
static void
check_attention (int window, float softcap, gboolean sinks)
{
  for (int stored = 0; stored < 2; stored++)
    {
      Attn a;
      attn_init (&a, window, softcap, sinks);
      attn_objective (&a);
      float dqkv[AB * AT * ALD] = { 0 }, dsinks[ANH] = { 0 };
      float *q = a.qkv, *k = q + ANH * AHD, *v = k + ANKV * AHD;
      float *dq = dqkv, *dk = dq + ANH * AHD, *dv = dk + ANKV * AHD;
      if (sinks)
        mpk_cpu_attention_sinks_backward (dsinks, a.probe, a.out, a.lse, a.sinks, a.s);
      mpk_cpu_attention_backward (dq, dk, dv, a.probe, a.out, a.lse, stored ? a.probs : NULL,
                                  q, k, v, a.s);
      check_grad (attn_objective, &a, "qkv", a.qkv, G_N_ELEMENTS (a.qkv), dqkv, 1e-2, 2e-3, 1);
      if (sinks)
        check_grad (attn_objective, &a, "sinks", a.sinks, ANH, dsinks, 1e-2, 2e-3, 1);
    }
}

static void
test_attention_window_gradient (void **state)
{
  (void) state;
  check_attention (3, 0, FALSE);
}

static void
test_attention_softcap_gradient (void **state)
{
  (void) state;
  check_attention (0, 1.5f, FALSE);   /* a cap of the scores' order: tanh bends them */
  check_attention (4, 1.5f, FALSE);
}

static void
test_attention_sinks_gradient (void **state)
{
  (void) state;
  check_attention (0, 0, TRUE);
  check_attention (3, 0, TRUE);
}

/* A windowed query does not see keys W or more positions back: changing key 0 changes
 * the outputs of positions 1 .. W - 1 only (position 0 sees it alone), and the
 * probabilities outside the window are 0. */
static void
test_attention_window_masks (void **state)
{
  (void) state;
  Attn a;
  attn_init (&a, 3, 0, FALSE);
  attn_objective (&a);
  float before[G_N_ELEMENTS (a.out)];
  memcpy (before, a.out, sizeof before);
  a.qkv[ANH * AHD] += 1.0f;                  /* sequence 0, position 0, kv head 0 */
  attn_objective (&a);
  for (int t = 0; t < AT; t++)
    for (int h = 0; h < ANH / ANKV; h++)     /* the query heads of kv head 0 */
      {
        size_t at = (size_t) t * ANH * AHD + (size_t) h * AHD;
        gboolean same = memcmp (before + at, a.out + at, AHD * sizeof (float)) == 0;
        assert_true (t >= 1 && t < 3 ? !same : same);  /* position 0 has one key: p = 1 */
      }
  for (int t = 0; t < AT; t++)
    for (int j = 0; j < AT; j++)
      if (j > t || t - j >= 3)
        assert_true (a.probs[(size_t) t * AT + j] == 0.0f);
}

/* The ring's blocks (context parallelism: cp = 3, positions in Megatron's load-balanced
 * order) give the windowed, capped attention of the whole sequence. */
static void
test_ring_attention_window (void **state)
{
  (void) state;
  enum { CP = 3, T = 18, TL = T / CP, LD = ALD };
  MpkAttnShape full = { 1, T, ANH, ANKV, AHD, LD, LD, ANH * AHD, 4, 1.5f };
  float qkv[T * LD], out[T * ANH * AHD], lse[ANH * T];
  mpk_cpu_fill_normal (qkv, G_N_ELEMENTS (qkv), 4, 1, 0, 0.0f, 1.5f);
  mpk_cpu_attention_forward (out, lse, NULL, qkv, qkv + ANH * AHD, qkv + (ANH + ANKV) * AHD,
                             full);
  int pos[CP][TL];
  float rows[CP][TL * LD];
  for (int r = 0; r < CP; r++)
    {
      mpk_cpu_cp_positions (pos[r], T, CP, r);
      for (int t = 0; t < TL; t++)
        memcpy (rows[r] + t * LD, qkv + pos[r][t] * LD, LD * sizeof (float));
    }
  MpkAttnShape s = full;
  s.T = TL;
  for (int r = 0; r < CP; r++)
    {
      float o[TL * ANH * AHD], m[ANH * TL], l[ANH * TL], ls[ANH * TL];
      mpk_cpu_ring_attention_begin (o, m, l, s);
      for (int b = 0; b < CP; b++)
        mpk_cpu_ring_attention_block (o, m, l, rows[r], rows[b] + ANH * AHD,
                                      rows[b] + (ANH + ANKV) * AHD, s, TL, pos[r], pos[b]);
      mpk_cpu_ring_attention_end (o, ls, m, l, s);
      for (int t = 0; t < TL; t++)
        for (int d = 0; d < ANH * AHD; d++)
          assert_true (fabsf (o[t * ANH * AHD + d] - out[pos[r][t] * ANH * AHD + d]) <= 1e-5f);
    }
}

/* Value heads narrower than the query and key heads (MLA's v_head_dim), v in its own
 * buffer with its own stride: the gradients against differences on both backward paths,
 * and the ring's blocks (cp = 2) give the same output. */
enum { VNH = 2, VHD = 6, VDV = 4, VT = 8, VLDQK = 2 * VNH * VHD, VLDV = VNH * VDV + 1 };

typedef struct {
  MpkAttnShape s;
  float qk[2 * VT * VLDQK], v[2 * VT * VLDV], out[2 * VT * VNH * VDV], probe[2 * VT * VNH * VDV];
  float lse[2 * VNH * VT], probs[2 * VNH * VT * VT];
} VAttn;

static double
vattn_objective (void *data)
{
  VAttn *a = data;
  mpk_cpu_attention_forward (a->out, a->lse, a->probs, a->qk, a->qk + VNH * VHD, a->v, a->s);
  return dot_probe (a->out, a->probe, G_N_ELEMENTS (a->out));
}

static void
test_attention_value_dim_gradient (void **state)
{
  (void) state;
  for (int stored = 0; stored < 2; stored++)
    {
      VAttn a;
      memset (&a, 0, sizeof a);
      a.s = (MpkAttnShape) { 2, VT, VNH, VNH, VHD, VLDQK, VLDQK, VNH * VDV, 0, 0, VDV, VLDV };
      mpk_cpu_fill_normal (a.qk, G_N_ELEMENTS (a.qk), 8, 1, 0, 0.0f, 1.5f);
      mpk_cpu_fill_normal (a.v, G_N_ELEMENTS (a.v), 8, 2, 0, 0.0f, 1.5f);
      mpk_cpu_fill_normal (a.probe, G_N_ELEMENTS (a.probe), 8, 3, 0, 0.0f, 1.0f);
      vattn_objective (&a);
      float dqk[G_N_ELEMENTS (a.qk)], dv[G_N_ELEMENTS (a.v)];
      memset (dqk, 0, sizeof dqk);
      memset (dv, 0, sizeof dv);
      mpk_cpu_attention_backward (dqk, dqk + VNH * VHD, dv, a.probe, a.out, a.lse,
                                  stored ? a.probs : NULL, a.qk, a.qk + VNH * VHD, a.v, a.s);
      check_grad (vattn_objective, &a, "qk", a.qk, G_N_ELEMENTS (a.qk), dqk, 1e-2, 2e-3, 1);
      check_grad (vattn_objective, &a, "v", a.v, G_N_ELEMENTS (a.v), dv, 1e-2, 2e-3, 1);
      for (int t = 0; t < 2 * VT; t++)           /* the padding column stays untouched */
        assert_true (dv[t * VLDV + VNH * VDV] == 0.0f);
    }
  /* ring: one sequence, 2 ranks of Megatron's chunks, each block's K and V packed apart */
  enum { TL = VT / 2 };
  VAttn a;
  memset (&a, 0, sizeof a);
  a.s = (MpkAttnShape) { 1, VT, VNH, VNH, VHD, VLDQK, VLDQK, VNH * VDV, 0, 0, VDV, VLDV };
  mpk_cpu_fill_normal (a.qk, G_N_ELEMENTS (a.qk), 8, 4, 0, 0.0f, 1.5f);
  mpk_cpu_fill_normal (a.v, G_N_ELEMENTS (a.v), 8, 5, 0, 0.0f, 1.5f);
  vattn_objective (&a);
  int pos[2][TL];
  float q[2][TL * VLDQK], k[2][TL * VNH * VHD], v[2][TL * VNH * VDV];
  for (int r = 0; r < 2; r++)
    {
      mpk_cpu_cp_positions (pos[r], VT, 2, r);
      for (int t = 0; t < TL; t++)
        {
          memcpy (q[r] + t * VLDQK, a.qk + pos[r][t] * VLDQK, VLDQK * sizeof (float));
          memcpy (k[r] + t * VNH * VHD, a.qk + pos[r][t] * VLDQK + VNH * VHD,
                  VNH * VHD * sizeof (float));
          memcpy (v[r] + t * VNH * VDV, a.v + pos[r][t] * VLDV, VNH * VDV * sizeof (float));
        }
    }
  MpkAttnShape s = a.s;
  s.T = TL;
  s.ldkv = VNH * VHD;
  s.ldv = VNH * VDV;
  for (int r = 0; r < 2; r++)
    {
      float o[TL * VNH * VDV], m[VNH * TL], l[VNH * TL], ls[VNH * TL];
      mpk_cpu_ring_attention_begin (o, m, l, s);
      for (int b = 0; b < 2; b++)
        mpk_cpu_ring_attention_block (o, m, l, q[r], k[b], v[b], s, TL, pos[r], pos[b]);
      mpk_cpu_ring_attention_end (o, ls, m, l, s);
      for (int t = 0; t < TL; t++)
        for (int d = 0; d < VNH * VDV; d++)
          assert_true (fabsf (o[t * VNH * VDV + d] - a.out[pos[r][t] * VNH * VDV + d]) <= 1e-5f);
    }
}

/* The cost model charges the host's windowed attention what its row kernel computes:
 * W (W + 1) / 2 + (S - W) W of the causal S (S + 1) / 2 pairs (tiny-gemma: S 64, W 16). */
static void
test_cost_host_window (void **state)
{
  (void) state;
  GError *err = NULL;
  g_autoptr(MpModel) m = mp_model_load ("tiny-gemma", &err);
  g_autoptr(MpCluster) c = mp_cluster_load ("host", &err);
  if (m == NULL || c == NULL)
    fail_msg ("load: %s", err->message);
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
  const MpCostDevice *dev = mp_cost_device (ctx, 0);
  for (int bwd = 0; bwd < 2; bwd++)
    {
      MpKernelCost full, win;
      mp_cost_flash_attention_window (dev, MP_DTYPE_FP32, 2, 4, 2, 48, 64, 64, 0, TRUE, bwd,
                                      &full);
      mp_cost_flash_attention_window (dev, MP_DTYPE_FP32, 2, 4, 2, 48, 64, 64, 16, TRUE, bwd,
                                      &win);
      mp_assert_close (win.flops / full.flops, (16.0 * 17 / 2 + 48.0 * 16) / (64.0 * 65 / 2),
                       1e-12);
      assert_true (win.time_s < full.time_s);
    }
}

/* ---- qk-norm, soft-capping, geglu -------------------------------------------------- */

enum { QN = 3, QNH = 2, QNKV = 1, QHD = 6, QLD = (QNH + 2 * QNKV) * QHD };

typedef struct {
  float x[QN * QLD], y[QN * QLD], probe[QN * QLD], wq[QHD], wk[QHD];
  float raw[QN * (QNH + QNKV) * QHD], rstd[QN * (QNH + QNKV)];
} QkNorm;

static double
qknorm_objective (void *data)
{
  QkNorm *n = data;
  memcpy (n->y, n->x, sizeof n->y);
  mpk_cpu_qknorm_forward (n->y, n->raw, n->rstd, n->wq, n->wk, QN, QNH, QNKV, QHD, QLD, 1e-5f);
  return dot_probe (n->y, n->probe, G_N_ELEMENTS (n->y));
}

static void
test_qknorm_gradient (void **state)
{
  (void) state;
  QkNorm n;
  mpk_cpu_fill_normal (n.x, G_N_ELEMENTS (n.x), 5, 1, 0, 0.0f, 1.0f);
  mpk_cpu_fill_normal (n.probe, G_N_ELEMENTS (n.probe), 5, 2, 0, 0.0f, 1.0f);
  mpk_cpu_fill_normal (n.wq, QHD, 5, 3, 0, 1.0f, 0.3f);
  mpk_cpu_fill_normal (n.wk, QHD, 5, 4, 0, 1.0f, 0.3f);
  qknorm_objective (&n);
  /* each q and k head has unit RMS over its gains; v is untouched */
  for (int h = 0; h < QNH + QNKV; h++)
    {
      double ss = 0;
      for (int d = 0; d < QHD; d++)
        {
          double g = n.y[h * QHD + d] / (h < QNH ? n.wq[d] : n.wk[d]);
          ss += g * g;
        }
      mp_assert_close (ss / QHD, 1.0, 1e-4);
    }
  assert_memory_equal (n.y + (QNH + QNKV) * QHD, n.x + (QNH + QNKV) * QHD, QHD * sizeof (float));
  float d[QN * QLD], dwq[QHD] = { 0 }, dwk[QHD] = { 0 };
  memcpy (d, n.probe, sizeof d);
  mpk_cpu_qknorm_backward (d, dwq, dwk, n.raw, n.rstd, n.wq, n.wk, QN, QNH, QNKV, QHD, QLD);
  check_grad (qknorm_objective, &n, "x", n.x, G_N_ELEMENTS (n.x), d, 1e-2, 2e-3, 1);
  check_grad (qknorm_objective, &n, "wq", n.wq, QHD, dwq, 1e-2, 2e-3, 1);
  check_grad (qknorm_objective, &n, "wk", n.wk, QHD, dwk, 1e-2, 2e-3, 1);
}

typedef struct {
  float x[24], y[24], probe[24];
  gboolean geglu;
} Elementwise;

static double
elementwise_objective (void *data)
{
  Elementwise *e = data;
  if (e->geglu)                         /* (3, 2 x 4) -> (3, 4) */
    {
      mpk_cpu_geglu_forward (e->y, e->x, 3, 4);
      return dot_probe (e->y, e->probe, 12);
    }
  memcpy (e->y, e->x, sizeof e->y);
  mpk_cpu_softcap_forward (e->y, 24, 2.0f);
  return dot_probe (e->y, e->probe, 24);
}

static void
test_softcap_geglu_gradient (void **state)
{
  (void) state;
  for (int geglu = 0; geglu < 2; geglu++)
    {
      Elementwise e = { .geglu = geglu };
      mpk_cpu_fill_normal (e.x, 24, 6, 1, 0, 0.0f, 2.0f);
      mpk_cpu_fill_normal (e.probe, 24, 6, 2, 0, 0.0f, 1.0f);
      elementwise_objective (&e);
      float d[24] = { 0 };
      if (geglu)
        mpk_cpu_geglu_backward (d, e.x, e.probe, 3, 4);
      else
        {
          for (int i = 0; i < 24; i++)
            assert_true (fabsf (e.y[i]) < 2.0f);    /* capped */
          memcpy (d, e.probe, sizeof d);
          mpk_cpu_softcap_backward (d, e.y, 24, 2.0f);
        }
      check_grad (elementwise_objective, &e, geglu ? "geglu" : "softcap", e.x, 24, d, 1e-3,
                  2e-3, 1);
    }
}

/* ---- the executor's step on one rank ----------------------------------------------- */

/* Every variant at once, small: windowed and full blocks, qk-norm, capped scores and
 * logits, sinks, biased attention beside a bias-free MLP, post-norms, scaled embeddings,
 * geglu, head_dim != hidden / heads. */
static const char every_variant[] =
  "name: every-variant\nlayers: 2\nhidden: 16\nheads: 2\nkv_heads: 1\nhead_dim: 12\n"
  "ffn_hidden: 24\nvocab: 32\nseq_len: 8\nactivation: geglu\nnorm: rmsnorm\n"
  "position: rotary\nbias: false\ntied_embeddings: true\n"
  "attention: {window: 3, pattern: [window, full], qk_norm: true, softcap: 2, sinks: true,"
  " bias: true}\npost_norms: true\nembed_scale: true\nlogit_softcap: 3\n"
  "training: {global_batch: 2, precision: fp32, optimizer: adam}\n";

typedef struct {
  MpModel *model;
  MpBackend *be;
  MpExec *ex;
} Step;

/* The step's loss (the mean token loss) after one forward and backward of the whole
 * micro-batch; the gradients are then in the tensors. */
static double
step_objective (void *data)
{
  Step *st = data;
  MpExec *ex = st->ex;
  GError *err = NULL;
  mp_exec_step_begin (ex, 0);
  for (guint l = 0; l < ex->n_layers; l++)
    if (!mp_exec_forward (ex, l, 0, &err))
      fail_msg ("forward %u: %s", l, err->message);
  double loss = ex->loss_sum / ((double) ex->global_batch * ex->T);
  for (guint l = ex->n_layers; l-- > 0;)
    if (!mp_exec_backward (ex, l, 0, &err))
      fail_msg ("backward %u: %s", l, err->message);
  return loss;
}

/* One host rank's step on the model TEXT (NAME): its tensors hold the IR's parameter
 * count, and the gradient of every tensor named in TENSORS (EXPECT of them in all)
 * against differences of the loss, steps HSTEP apart.
 * FLASH: the attention backward recomputes the probabilities. */
static void
check_step_gradients (const char *name, const char *text, gboolean flash, double hstep,
                      const char *const *tensors, guint n_tensors, guint expect)
{
  Step st;
  GError *err = NULL;
  st.model = mp_model_load_data (name, text, strlen (text), &err);
  if (st.model == NULL)
    fail_msg ("model: %s", err->message);
  assert_null (mp_model_attention_extras (st.model));
  st.be = mp_backend_host_new (0, 1);
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.micro_batch_size = 2;
  cfg.num_micro_batches = 1;
  cfg.flash_attention = flash;
  g_autofree guint *stage_of = g_new0 (guint, st.model->n_layers);
  st.ex = mp_exec_new (st.be, st.model, &cfg, 2, 0, 0, 0, 0, stage_of, 7, &err);
  if (st.ex == NULL)
    fail_msg ("mp_exec_new: %s", err->message);
  /* larger weights than the init's, so every variant moves the loss well above the
   * differences' rounding */
  for (guint i = 0; i < st.ex->tensors->len; i++)
    {
      ExTensor *t = g_ptr_array_index (st.ex->tensors, i);
      gboolean gain = g_str_has_suffix (t->name, ".w");
      mpk_cpu_fill_normal (t->param, t->n, 9, 20 + i, 0, gain ? 1.0f : 0.0f,
                           gain ? 0.2f : 0.3f);
    }
  /* one rank holds every parameter once: the IR's count (tied embedding once) */
  double held = 0;
  for (guint i = 0; i < st.ex->tensors->len; i++)
    held += (double) ((ExTensor *) g_ptr_array_index (st.ex->tensors, i))->n;
  mp_assert_close (held, st.model->params_total, 0);
  step_objective (&st);
  guint checked = 0;
  for (guint i = 0; i < st.ex->tensors->len; i++)
    {
      ExTensor *t = g_ptr_array_index (st.ex->tensors, i);
      for (guint v = 0; v < n_tensors; v++)
        if (strcmp (t->name, tensors[v]) == 0)
          {
            g_autofree float *g = g_memdup2 (t->grad, t->n * sizeof (float));
            g_autofree char *what = g_strdup_printf ("layer %u %s", t->layer, t->name);
            check_grad (step_objective, &st, what, t->param, t->n, g, hstep, 1e-2,
                        t->n > 64 ? t->n / 13 : 1);
            checked++;
          }
    }
  assert_int_equal (checked, expect);
  mp_exec_free (st.ex);
  st.be->ops->free (st.be);
  mp_model_free (st.model);
}

static void
test_exec_every_variant_gradient (void **state)
{
  (void) state;
  static const char *const variants[] = { "qnorm.w", "knorm.w", "sinks", "pnorm1.w",
                                          "pnorm2.w", "bqkv", "bo", "wte", "wqkv", "w1" };
  /* 9 per block, the (tied) embedding; the stored-probabilities path */
  check_step_gradients ("every-variant", every_variant, FALSE, 1e-2, variants,
                        G_N_ELEMENTS (variants), 2 * 9 + 1);
}

/* Multi-head latent attention (DeepSeek-V3's, and V2-Lite's without a q latent): every
 * projection, both latent norms and the block's first norm, through the rotary parts
 * shared and per head, with v heads narrower than q and k. */
static const char mla_q_lora[] =
  "name: mla\nlayers: 2\nhidden: 16\nheads: 2\nkv_heads: 2\nhead_dim: 10\n"
  "ffn_hidden: 24\nvocab: 32\nseq_len: 8\nactivation: swiglu\nnorm: rmsnorm\n"
  "position: rotary\nbias: false\ntied_embeddings: true\n"
  "attention: {mla: {q_lora_rank: 6, kv_lora_rank: 5, qk_nope_head_dim: 6,"
  " qk_rope_head_dim: 4, v_head_dim: 3}}\n"
  "training: {global_batch: 2, precision: fp32, optimizer: adam}\n";
static const char mla_lite[] =
  "name: mla-lite\nlayers: 2\nhidden: 16\nheads: 2\nkv_heads: 2\nhead_dim: 10\n"
  "ffn_hidden: 24\nvocab: 32\nseq_len: 8\nactivation: swiglu\nnorm: rmsnorm\n"
  "position: rotary\nbias: false\ntied_embeddings: true\n"
  "attention: {mla: {kv_lora_rank: 5, qk_nope_head_dim: 6, qk_rope_head_dim: 4,"
  " v_head_dim: 3}}\n"
  "training: {global_batch: 2, precision: fp32, optimizer: adam}\n";

static void
test_exec_mla_gradient (void **state)
{
  (void) state;
  static const char *const q_lora[] = { "wdq", "qnorm.w", "wuq", "wdkv", "kvnorm.w", "wukv",
                                        "wo", "ln1.w" };
  static const char *const lite[] = { "wq", "wdkv", "kvnorm.w", "wukv", "wo" };
  /* the latents' norms over 5 and 6 features bend the loss: smaller steps than above */
  check_step_gradients ("mla", mla_q_lora, FALSE, 3e-3, q_lora, G_N_ELEMENTS (q_lora), 2 * 8);
  check_step_gradients ("mla-lite", mla_lite, TRUE, 3e-3, lite, G_N_ELEMENTS (lite), 2 * 5);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_attention_window_gradient),
    cmocka_unit_test (test_attention_softcap_gradient),
    cmocka_unit_test (test_attention_sinks_gradient),
    cmocka_unit_test (test_attention_window_masks),
    cmocka_unit_test (test_ring_attention_window),
    cmocka_unit_test (test_attention_value_dim_gradient),
    cmocka_unit_test (test_cost_host_window),
    cmocka_unit_test (test_qknorm_gradient),
    cmocka_unit_test (test_softcap_geglu_gradient),
    cmocka_unit_test (test_exec_every_variant_gradient),
    cmocka_unit_test (test_exec_mla_gradient),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
