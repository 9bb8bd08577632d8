/* model-moe.c - the MoE MLP of a transformer block (Megatron-Core's MoELayer): shared
 * experts (one tensor-parallel MLP every token goes through), the router (a replicated
 * (E, C) GEMM, softmax, top-k with renormalised gates, the sequence-wise load-balancing
 * loss), the capacity check with its dropped tokens counted, the token permutation to
 * the experts, the grouped expert GEMMs (one GEMM per local expert), and the weighted
 * combine back; forward and backward.
 *
 * Layout (the cost model's expert grid, program/program.h's MpParallelConfig): experts
 * are divided over ep in contiguous blocks (ep rank r holds experts [r El, (r + 1) El)).
 * With etp = tp each expert is tensor-split like a dense MLP (fc1 column-, fc2
 * row-parallel), its outputs partial sums over tp that the block's tp reduction adds, and
 * the router sees all N rows of the micro-batch (gathered under sequence parallelism) on
 * every tp rank, computing the same gates there. With etp < tp (experts folded over the
 * tensor ranks) each group of etp consecutive tp ranks routes its members'
 * sequence-parallel rows to its experts (split over the group: partial sums again when
 * etp > 1) and adds their outputs to those rows only. Dispatch and combine over the ep group, by
 * all-to-all or all-gather as the plan says, are in model-moe-ep.c.
 *
 * The routing is small (N x E) and decides the shapes of the expert GEMMs, so it runs on
 * the host (as Megatron-Core syncs the per-expert counts to the host): the logits are
 * read back, routed with kernels/cpu/moe.c, and the per-row gates sent back. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/model-moe.h"
#include "common/error.h"

#include <math.h>
#include <string.h>

/* The load-balancing loss's coefficient: Switch Transformer's alpha = 1e-2 (Fedus et al.,
 * JMLR 2022, sec. 2.2), also Megatron-LM's Mixtral recipe (--moe-aux-loss-coeff 1e-2).
 * The model IR has no key for it. */
#define AUX_ALPHA 1e-2f
#define INIT_STD 0.02f

/* Activation slots of an MoE block, after model-layers.c's block slots (A_ACT = 14). */
enum { M_S_FC1 = 15, M_S_ACT, M_XP, M_E_FC1, M_E_ACT, M_E_OUT, M_GATE, M_END };
G_STATIC_ASSERT (M_END <= MAX_BUFS);

void
mp_exec_route_free (ExRoute *r)
{
  if (r == NULL)
    return;
  g_free (r->probs);
  g_free (r->idx);
  g_free (r->gates);
  g_free (r->src);
  g_free (r->slot);
  g_free (r->grow);
  if (r->lcount != r->count)
    g_free (r->lcount);
  g_free (r->count);
  g_free (r->perm);
  g_free (r->asrc);
  g_free (r->aslot);
  g_free (r->agate);
  g_free (r->send_n);
  g_free (r->recv_n);
  g_free (r->auxf);
  g_free (r);
}

/* ---- shapes and tensors ------------------------------------------------------------ */

static MoeShape
moe_shape (const MpExec *ex)
{
  const MpModel *m = ex->model;
  MoeShape s;
  s.E = (int) m->experts;
  s.K = (int) m->experts_per_token;
  s.El = s.E / (int) ex->ep;
  s.Fel = (int) m->moe_ffn_hidden / (int) ex->etp;
  /* etp < tp: the etp consecutive tp ranks of one expert tensor-parallel group route the
   * rows of their sequence-parallel shards, together */
  gboolean folded = ex->etp != ex->tp;
  int group = (int) (ex->tp_rank / ex->etp);
  s.row0 = folded ? group * (int) ex->etp * ex->Ns : 0;
  s.Nt = folded ? (int) ex->etp * ex->Ns : ex->N;
  s.partial = ex->etp > 1;
  s.owner = !s.partial || ex->etp_rank == 0;
  s.f1e = ex->swiglu ? 2 * s.Fel : s.Fel;
  s.Fsl = (int) (m->shared_experts * m->shared_expert_ffn) / (int) ex->tp;
  s.f1s = ex->swiglu ? 2 * s.Fsl : s.Fsl;
  return s;
}

/* fc1 rows (f1 x C, gate rows then up rows for SwiGLU) and fc2 (C x Fl) of one MLP of full
 * width F as part PART of its tensor split holds it, from two seeded streams, into W1 and
 * W2. */
static void
fill_mlp (const MpExec *ex, float *w1, float *w2, guint64 s1, guint64 s2, int F, int Fl,
          guint part, float std2)
{
  gsize C = ex->C, r0 = (gsize) part * Fl;
  mpk_cpu_fill_normal_block (w1, ex->seed, s1, C, r0, Fl, 0, C, 0.0f, INIT_STD);
  if (ex->swiglu)
    mpk_cpu_fill_normal_block (w1 + (gsize) Fl * C, ex->seed, s1, C, (gsize) F + r0, Fl, 0, C,
                               0.0f, INIT_STD);
  mpk_cpu_fill_normal_block (w2, ex->seed, s2, F, 0, C, r0, Fl, 0.0f, std2);
}

static gboolean
add_tensor (MpExec *ex, ExLayer *L, guint layer, const char *name, gsize n, const float *host,
            gboolean replicated, gboolean expert, GError **error)
{
  ExTensor *t = mp_exec_tensor_new (ex, layer, name, n, host, replicated, expert, error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  return TRUE;
}

/* The bias NAME of N local floats (zeros) after its weight, when the model has biases. */
static gboolean
add_bias (MpExec *ex, ExLayer *L, guint layer, const char *name, gsize n, gboolean replicated,
          gboolean expert, GError **error)
{
  if (!ex->model->bias)
    return TRUE;
  g_autofree float *zeros = g_new0 (float, MAX (n, 1));
  return add_tensor (ex, L, layer, name, n, zeros, replicated, expert, error);
}

/* A seeded stream per tensor of block LAYER: INDEX 0 the router, 1 and 2 the shared
 * experts, 3 + 2e and 4 + 2e expert e (above the dense layers' streams, model-exec.c). */
static guint64
moe_stream (guint layer, guint index)
{
  return (UINT64_C (1) << 40) + ((guint64) layer << 20) + index;
}

gboolean
mp_exec_moe_setup (MpExec *ex, ExLayer *L, guint layer, GError **error)
{
  MoeShape s = moe_shape (ex);
  const MpModel *m = ex->model;
  gsize C = ex->C;
  float proj_std = INIT_STD / sqrtf (2.0f * (float) MAX (m->n_blocks, 1u));
  if (s.Fsl > 0)
    {
      g_autofree float *w1 = g_new (float, (gsize) s.f1s * C);
      g_autofree float *w2 = g_new (float, C * s.Fsl);
      fill_mlp (ex, w1, w2, moe_stream (layer, 1), moe_stream (layer, 2),
                (int) (m->shared_experts * m->shared_expert_ffn), s.Fsl, ex->tp_rank, proj_std);
      /* fc2's bias is added once, by tp rank 0, to the partial sums the tp reduction adds */
      if (!add_tensor (ex, L, layer, "shared.w1", (gsize) s.f1s * C, w1, FALSE, FALSE, error)
          || !add_bias (ex, L, layer, "shared.b1", s.f1s, FALSE, FALSE, error)
          || !add_tensor (ex, L, layer, "shared.w2", C * s.Fsl, w2, FALSE, FALSE, error)
          || !add_bias (ex, L, layer, "shared.b2", C, TRUE, FALSE, error))
        return FALSE;
    }
  g_autofree float *wr = g_new (float, (gsize) s.E * C);
  mpk_cpu_fill_normal_block (wr, ex->seed, moe_stream (layer, 0), C, 0, s.E, 0, C, 0.0f,
                             INIT_STD);
  if (!add_tensor (ex, L, layer, "router", (gsize) s.E * C, wr, TRUE, FALSE, error)
      || !add_bias (ex, L, layer, "router.b", s.E, TRUE, FALSE, error))
    return FALSE;
  gsize n1 = (gsize) s.f1e * C, n2 = C * s.Fel;
  g_autofree float *w1 = g_new (float, n1 * s.El);
  g_autofree float *w2 = g_new (float, n2 * s.El);
  for (int el = 0; el < s.El; el++)
    {
      guint e = ex->ep_rank * (guint) s.El + (guint) el;       /* its global number */
      fill_mlp (ex, w1 + el * n1, w2 + el * n2, moe_stream (layer, 3 + 2 * e),
                moe_stream (layer, 4 + 2 * e), (int) m->moe_ffn_hidden, s.Fel, ex->etp_rank,
                proj_std);
    }
  /* fc2's bias, whole on every etp rank (replicated over etp > 1), added by its owner */
  return add_tensor (ex, L, layer, "experts.w1", n1 * s.El, w1, FALSE, TRUE, error)
         && add_bias (ex, L, layer, "experts.b1", (gsize) s.f1e * s.El, FALSE, TRUE, error)
         && add_tensor (ex, L, layer, "experts.w2", n2 * s.El, w2, FALSE, TRUE, error)
         && add_bias (ex, L, layer, "experts.b2", C * s.El, s.partial, TRUE, error);
}

static MoeTensors
moe_tensors (const MpExec *ex, const ExLayer *L, guint first)
{
  MoeTensors t = { NULL };
  gboolean b = ex->model->bias;
  guint i = first;
#define NEXT() ((ExTensor *) g_ptr_array_index (L->uses, i++))
  if (moe_shape (ex).Fsl > 0)
    {
      t.s1 = NEXT ();
      t.sb1 = b ? NEXT () : NULL;
      t.s2 = NEXT ();
      t.sb2 = b ? NEXT () : NULL;
    }
  t.router = NEXT ();
  t.rb = b ? NEXT () : NULL;
  t.e1 = NEXT ();
  t.eb1 = b ? NEXT () : NULL;
  t.e2 = NEXT ();
  t.eb2 = b ? NEXT () : NULL;
#undef NEXT
  return t;
}

/* ---- GEMMs kept out of FP8; one MLP (shared experts, one expert) ------------------- */

void
mp_exec_matmul_hp_forward (MpExec *ex, float *out, const float *inp, const float *weight,
                           const float *bias, int N, int C, int OC)
{
  (ex->k->matmul_hp_forward ? ex->k->matmul_hp_forward : ex->k->matmul_forward) (
      ex->be, out, inp, weight, bias, N, C, OC);
}

void
mp_exec_matmul_hp_backward (MpExec *ex, float *dinp, float *dweight, float *dbias,
                            const float *dout, const float *inp, const float *weight, int N,
                            int C, int OC)
{
  (ex->k->matmul_hp_backward ? ex->k->matmul_hp_backward : ex->k->matmul_backward) (
      ex->be, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

void
mp_exec_act_forward (MpExec *ex, float *act, const float *fc1, int R, int Fl)
{
  if (ex->model->activation == MP_ACT_GEGLU)
    ex->k->attn->geglu_forward (ex->be, act, fc1, R, Fl);
  else if (ex->swiglu)
    ex->k->swiglu_forward (ex->be, act, fc1, R, Fl);
  else if (ex->model->activation == MP_ACT_RELU)
    ex->k->relu_forward (ex->be, act, fc1, (gsize) R * Fl);
  else
    ex->k->gelu_forward (ex->be, act, fc1, (gsize) R * Fl);
}

void
mp_exec_act_backward (MpExec *ex, float *dfc1, const float *fc1, const float *dact, int R,
                      int Fl)
{
  if (ex->model->activation == MP_ACT_GEGLU)
    ex->k->attn->geglu_backward (ex->be, dfc1, fc1, dact, R, Fl);
  else if (ex->swiglu)
    ex->k->swiglu_backward (ex->be, dfc1, fc1, dact, R, Fl);
  else if (ex->model->activation == MP_ACT_RELU)
    ex->k->relu_backward (ex->be, dfc1, fc1, dact, (gsize) R * Fl);
  else
    ex->k->gelu_backward (ex->be, dfc1, fc1, dact, (gsize) R * Fl);
}

/* One MLP's weights (or gradients) at one expert: fc1, its bias, fc2, its bias (biases
 * NULL: none, or fc2's not added on this rank). */
typedef struct {
  float *w1, *b1, *w2, *b2;
} Ffn;

static float *
at (float *base, gsize off)
{
  return base ? base + off : NULL;
}

/* MLP E (0: the shared one) of the tensors W1 B1 W2 B2: its parameters (fc2's bias only
 * where ADD_B2) or, when GRAD, its gradients. */
static Ffn
ffn_at (const MpExec *ex, const ExTensor *w1, const ExTensor *b1, const ExTensor *w2,
        const ExTensor *b2, int e, int f1, int Fl, gboolean add_b2, gboolean grad)
{
  gsize C = ex->C, n1 = (gsize) f1 * C, n2 = C * Fl;
#define PART(t) ((t) ? ((grad) ? (t)->grad : (t)->param) : NULL)
  Ffn f = { at (PART (w1), e * n1), at (PART (b1), (gsize) e * f1), at (PART (w2), e * n2),
            add_b2 || grad ? at (PART (b2), e * C) : NULL };
#undef PART
  return f;
}

/* fc1 (R, f1) = fc1 (x) and act (R, Fl) = act (fc1). */
static void
ffn_fc1 (MpExec *ex, const float *x, const Ffn *w, int R, int Fl, float *fc1, float *act)
{
  int f1 = ex->swiglu ? 2 * Fl : Fl;
  ex->k->matmul_forward (ex->be, fc1, x, w->w1, w->b1, R, ex->C, f1);
  mp_exec_act_forward (ex, act, fc1, R, Fl);
}

/* out (R, C) = fc2 (act (fc1 (x))), keeping fc1 (R, f1) and act (R, Fl). */
static void
ffn_forward (MpExec *ex, const float *x, const Ffn *w, int R, int Fl, float *fc1, float *act,
             float *out)
{
  ffn_fc1 (ex, x, w, R, Fl, fc1, act);
  ex->k->matmul_forward (ex->be, out, act, w->w2, w->b2, R, Fl, ex->C);
}

/* dx (R, C) +=, G's gradients += from dout (R, C); DACT (R, Fl) and DFC1 (R, f1) zeroed
 * scratch. */
static void
ffn_backward (MpExec *ex, float *dx, const Ffn *g, const float *dout, const float *x,
              const float *fc1, const float *act, const Ffn *w, int R, int Fl, float *dact,
              float *dfc1)
{
  int f1 = ex->swiglu ? 2 * Fl : Fl;
  ex->k->matmul_backward (ex->be, dact, g->w2, g->b2, dout, act, w->w2, R, Fl, ex->C);
  mp_exec_act_backward (ex, dfc1, fc1, dact, R, Fl);
  ex->k->matmul_backward (ex->be, dx, g->w1, g->b1, dfc1, x, w->w1, R, ex->C, f1);
}

/* Local expert E's parameters (GRAD: gradients); fc2's bias by its owner only. */
static Ffn
expert_ffn (const MpExec *ex, const MoeShape *s, const MoeTensors *t, int e, gboolean grad)
{
  return ffn_at (ex, t->e1, t->eb1, t->e2, t->eb2, e, s->f1e, s->Fel, s->owner, grad);
}

/* The shared experts' (tp-split: fc2's bias added by tp rank 0). */
static Ffn
shared_ffn (const MpExec *ex, const MoeShape *s, const MoeTensors *t, gboolean grad)
{
  return ffn_at (ex, t->s1, t->sb1, t->s2, t->sb2, 0, s->f1s, s->Fsl, ex->tp_rank == 0, grad);
}

/* ---- routing ----------------------------------------------------------------------- */

/* Experts take at most ceil (capacity_factor * N K / E) rows each (Megatron-Core's
 * capacity per micro-batch and rank); first choices before second ones, tokens in order
 * inside a choice; the rest is dropped (its gate weighs nothing). */
static int
capacity (const MpExec *ex, const MoeShape *s)
{
  double cf = ex->model->capacity_factor;
  if (cf <= 0)
    return G_MAXINT;
  return (int) ceil (cf * s->Nt * s->K / s->E);
}

/* R's kept choices (capacity) and their permutation to experts, from R's probs, idx and
 * gates. */
static void
route (MpExec *ex, const MoeShape *s, ExRoute *r)
{
  int N = s->Nt, K = s->K, E = s->E;
  int cap = capacity (ex, s);
  g_autofree gboolean *kept = g_new0 (gboolean, (gsize) N * K);
  g_autofree int *load = g_new0 (int, E);
  for (int j = 0; j < K; j++)
    for (int n = 0; n < N; n++)
      {
        int e = r->idx[n * K + j];
        if (load[e] < cap)
          {
            load[e]++;
            kept[n * K + j] = TRUE;
            r->R++;
          }
      }
  if (s->owner && !ex->recomputing)          /* once per token */
    {
      ex->moe_dropped += (guint64) N * K - (guint64) r->R;
      ex->moe_routed += (guint64) N * K;
    }
  r->count = g_new0 (int, E);
  r->src = g_new (int, MAX (r->R, 1));
  r->slot = g_new (int, MAX (r->R, 1));
  r->grow = g_new (float, MAX (r->R, 1));
  int row = 0;
  for (int e = 0; e < E; e++)
    for (int n = 0; n < N; n++)
      for (int j = 0; j < K; j++)
        if (kept[n * K + j] && r->idx[n * K + j] == e)
          {
            r->src[row] = n;
            r->slot[row] = n * K + j;
            r->grow[row] = r->gates[n * K + j];
            r->count[e]++;
            row++;
          }
}

/* Every local expert's MLP on its rows of XE (Rr, C) into YE (Rr, C): fc1 of all experts
 * as one grouped GEMM, the activation on all rows, fc2 as another grouped GEMM. */
static void
experts_forward (MpExec *ex, const MoeShape *s, const MoeTensors *w, const ExRoute *r,
                 Acts *a, const float *xe, float *ye)
{
  Ffn f = expert_ffn (ex, s, w, 0, FALSE);   /* expert 0's: the others follow it */
  ex->k->grouped_matmul_forward (ex->be, a->buf[M_E_FC1], xe, f.w1, f.b1, r->lcount, s->El,
                                 ex->C, s->f1e);
  mp_exec_act_forward (ex, a->buf[M_E_ACT], a->buf[M_E_FC1], r->Rr, s->Fel);
  ex->k->grouped_matmul_forward (ex->be, ye, a->buf[M_E_ACT], f.w2, f.b2, r->lcount, s->El,
                                 s->Fel, ex->C);
}

/* ---- forward and backward ---------------------------------------------------------- */

/* The shared experts, or zeros. */
static gboolean
shared_forward (MpExec *ex, const MoeShape *s, const MoeTensors *w, Acts *a, const float *h,
                float *out, GError **error)
{
  int N = ex->N;
  if (s->Fsl == 0)
    {
      ex->be->ops->zero (ex->be, out, (gsize) N * ex->C * sizeof (float));
      return TRUE;
    }
  if (!mp_exec_act_alloc (ex, a, M_S_FC1, (gsize) N * s->f1s, error)
      || !mp_exec_act_alloc (ex, a, M_S_ACT, (gsize) N * s->Fsl, error))
    return FALSE;
  Ffn f = shared_ffn (ex, s, w, FALSE);
  ffn_forward (ex, h, &f, N, s->Fsl, a->buf[M_S_FC1], a->buf[M_S_ACT], out);
  return TRUE;
}

/* The sequence-wise load-balancing loss (Megatron-Core's seq_aux_loss; kernels/cpu/moe.c
 * mpk_cpu_router_aux on whole sequences): per sequence b and expert e, alpha f_be P_be
 * with f_be = E / (K T) times the choices of e and P_be the mean probability of e over
 * b's T tokens. Row i of this rank's Nt is token (row0 + i) mod Tl of sequence
 * (row0 + i) / Tl; where sequences are split (cp, experts folded over tp inside a
 * sequence) the counts and sums are all-reduced over the seq group, and each rank adds
 * its tokens' share of b's loss. Sets R's auxf; returns the loss this rank adds. */
static gboolean
aux_loss (MpExec *ex, const MoeShape *s, ExRoute *r, double *loss, GError **error)
{
  int E = s->E, K = s->K, B = ex->mbs, T = ex->T, Tl = ex->Tl;
  gsize n = (gsize) B * E;
  g_autofree float *st = g_new0 (float, 2 * n);      /* choices, then probability sums */
  g_autofree int *mine = g_new0 (int, B);            /* this rank's tokens per sequence */
  /* once per token: where tp ranks route the same rows, their owner counts them */
  gboolean counts = s->owner || ex->seq_group == NULL;
  for (int i = 0; counts && i < s->Nt; i++)
    {
      int b = (s->row0 + i) / Tl;
      mine[b]++;
      for (int j = 0; j < K; j++)
        st[(gsize) b * E + r->idx[i * K + j]] += 1;
      for (int e = 0; e < E; e++)
        st[n + (gsize) b * E + e] += r->probs[(gsize) i * E + e];
    }
  if (ex->seq_group != NULL)
    {
      MpBackend *be = ex->be;
      double t0 = be->ops->now_s (be);
      float *d = be->ops->alloc (be, 2 * n * sizeof (float), MP_MEM_OTHER, error);
      if (d == NULL)
        return FALSE;
      be->ops->upload (be, d, st, 2 * n * sizeof (float));
      gboolean ok = be->ops->all_reduce (be, ex->seq_group, d, 2 * n, MP_REDUCE_SUM, error);
      if (ok)
        be->ops->download (be, st, d, 2 * n * sizeof (float));
      be->ops->release (be, d);
      ex->ep_s += be->ops->now_s (be) - t0;
      if (!ok)
        return FALSE;
    }
  r->auxf = g_new (float, n);
  *loss = 0;
  for (int b = 0; b < B; b++)
    for (int e = 0; e < E; e++)
      {
        gsize q = (gsize) b * E + e;
        r->auxf[q] = (float) ((double) st[q] * E / ((double) K * T));
        *loss += AUX_ALPHA * r->auxf[q] * (st[n + q] / T) * mine[b] / T;
      }
  return TRUE;
}

/* d aux / d probs of this rank's rows, scaled by DSCALE, into DPROBS (Nt, E) +=. */
static void
aux_backward (const MpExec *ex, const MoeShape *s, const ExRoute *r, float *dprobs,
              float dscale)
{
  for (int i = 0; i < s->Nt; i++)
    {
      const float *f = r->auxf + (gsize) ((s->row0 + i) / ex->Tl) * s->E;
      for (int e = 0; e < s->E; e++)
        dprobs[(gsize) i * s->E + e] += dscale * AUX_ALPHA * f[e] / ex->T;
    }
}

/* The router on H (N, C): logits, softmax and top-k on the backend (the cuda backend's
 * device), read back for the capacity and the permutation on the host, which size the
 * expert GEMMs and the all-to-all. */
static ExRoute *
router_forward (MpExec *ex, const MoeShape *s, const MoeTensors *w, const float *h,
                GError **error)
{
  G_STATIC_ASSERT (sizeof (int) == sizeof (float));   /* the choices share the buffer */
  MpBackend *be = ex->be;
  gsize n = (gsize) s->Nt * s->E, nk = (gsize) s->Nt * s->K;
  /* logits, overwritten by the probabilities; then the gates and the choices */
  float *d = be->ops->alloc (be, (n + 2 * nk) * sizeof (float), MP_MEM_OTHER, error);
  if (d == NULL)
    return NULL;
  mp_exec_matmul_hp_forward (ex, d, h + (gsize) s->row0 * ex->C, w->router->param,
                             w->rb ? w->rb->param : NULL, s->Nt, ex->C, s->E);
  ex->k->router_forward (be, d, (int *) (d + n + nk), d + n, d, s->Nt, s->E, s->K);
  ExRoute *r = g_new0 (ExRoute, 1);
  r->probs = g_new (float, n);
  r->gates = g_new (float, nk);
  r->idx = g_new (int, nk);
  be->ops->download (be, r->probs, d, n * sizeof (float));
  be->ops->download (be, r->gates, d + n, nk * sizeof (float));
  be->ops->download (be, r->idx, d + n + nk, nk * sizeof (int));
  be->ops->release (be, d);
  route (ex, s, r);
  /* the load-balancing loss, once per token: loss_sum holds token losses, the step's
   * loss is loss_sum / (global_batch T), and the aux term is a mean over sequences */
  double aux;
  if (!aux_loss (ex, s, r, &aux, error))
    {
      mp_exec_route_free (r);
      return NULL;
    }
  if (s->owner && !ex->recomputing)
    ex->loss_sum += aux * ex->T;
  return r;
}

/* The sum over this rank's expert tensor-parallel group (its tp group when etp = tp),
 * timed as tensor-parallel communication. */
static gboolean
etp_all_reduce (MpExec *ex, float *buf, gsize n, GError **error)
{
  if (ex->etp_group == NULL)
    return mp_exec_tp_all_reduce (ex, buf, n, MP_REDUCE_SUM, error);
  double t0 = ex->be->ops->now_s (ex->be);
  gboolean ok = ex->be->ops->all_reduce (ex->be, ex->etp_group, buf, n, MP_REDUCE_SUM, error);
  ex->tp_s += ex->be->ops->now_s (ex->be) - t0;
  return ok;
}

/* Tokens reach the experts by all-gather over ep (the plan's dispatcher, ep > 1). */
static gboolean
gathers (const MpExec *ex)
{
  return ex->ep > 1 && ex->cfg.dispatcher == MP_DISPATCH_ALLGATHER;
}

static gboolean
alloc_rows (MpExec *ex, const MoeShape *s, Acts *a, gsize rows_out, gsize gates,
            const ExRoute *r, GError **error)
{
  gsize Rr = (gsize) MAX (r->Rr, 1), C = ex->C;
  return mp_exec_act_alloc (ex, a, M_XP, Rr * C, error)
         && mp_exec_act_alloc (ex, a, M_E_FC1, Rr * s->f1e, error)
         && mp_exec_act_alloc (ex, a, M_E_ACT, Rr * s->Fel, error)
         && mp_exec_act_alloc (ex, a, M_E_OUT, MAX (rows_out, 1) * C, error)
         && mp_exec_act_alloc (ex, a, M_GATE, MAX (gates, 1), error);
}

/* This rank's routed rows: permuted, to their experts (by all-to-all with ep > 1) and
 * back into M_E_OUT (R, C) in this rank's order, then weighed by their gates into OUT
 * (the routed tokens' rows). */
static gboolean
routed_forward (MpExec *ex, const MoeShape *s, const MoeTensors *w, Acts *a, ExRoute *r,
                const float *h, float *out, GError **error)
{
  MpBackend *be = ex->be;
  gboolean ep = ex->ep > 1;
  int C = ex->C;
  if (ep && !mp_moe_a2a_layout (ex, s, r, error))
    return FALSE;
  if (!ep)
    {
      r->Rr = r->R;
      r->lcount = r->count;
    }
  gsize R = (gsize) MAX (r->R, 1), Rr = (gsize) MAX (r->Rr, 1);
  if (!alloc_rows (ex, s, a, R, R, r, error))
    return FALSE;
  be->ops->upload (be, a->buf[M_GATE], r->grow, (gsize) r->R * sizeof (float));
  float *xp = ep ? be->ops->alloc (be, R * C * sizeof (float), MP_MEM_OTHER, error)
                 : a->buf[M_XP];
  float *ye = ep ? be->ops->alloc (be, Rr * C * sizeof (float), MP_MEM_OTHER, error)
                 : a->buf[M_E_OUT];
  gboolean ok = xp != NULL && ye != NULL;
  if (ok)
    {
      ex->k->gather_rows (be, xp, h, r->src, NULL, r->R, C);
      ok = !ep || mp_moe_a2a_dispatch (ex, r, xp, a->buf[M_XP], error);
    }
  if (ok)
    {
      experts_forward (ex, s, w, r, a, a->buf[M_XP], ye);
      ok = !ep || mp_moe_a2a_combine (ex, r, ye, a->buf[M_E_OUT], error);
    }
  if (ok)
    ex->k->scatter_add_rows (be, out, a->buf[M_E_OUT], r->src, a->buf[M_GATE], r->R, C);
  if (ep)
    {
      be->ops->release (be, xp);
      be->ops->release (be, ye);
    }
  return ok;
}

/* The all-gather dispatcher: every ep rank's tokens gathered, this rank's experts on the
 * rows routed to them (outputs kept in M_E_OUT (Rr, C)), weighed by their gates into the
 * group's rows, and reduce-scattered back into OUT. */
static gboolean
gathered_forward (MpExec *ex, const MoeShape *s, const MoeTensors *w, Acts *a, ExRoute *r,
                  const float *h, float *out, GError **error)
{
  MpBackend *be = ex->be;
  gsize C = ex->C, n = (gsize) ex->ep * s->Nt * C;
  if (!mp_moe_ag_layout (ex, s, r, error) || !alloc_rows (ex, s, a, r->Rr, r->Rr, r, error))
    return FALSE;
  be->ops->upload (be, a->buf[M_GATE], r->agate, (gsize) r->Rr * sizeof (float));
  float *all = be->ops->alloc (be, n * sizeof (float), MP_MEM_OTHER, error);
  float *mine = all ? be->ops->alloc (be, (gsize) s->Nt * C * sizeof (float), MP_MEM_OTHER,
                                      error) : NULL;
  gboolean ok = mine != NULL && mp_moe_ag_gather (ex, s, h, all, error);
  if (ok)
    {
      ex->k->gather_rows (be, a->buf[M_XP], all, r->asrc, NULL, r->Rr, (int) C);
      experts_forward (ex, s, w, r, a, a->buf[M_XP], a->buf[M_E_OUT]);
      be->ops->zero (be, all, n * sizeof (float));
      ex->k->scatter_add_rows (be, all, a->buf[M_E_OUT], r->asrc, a->buf[M_GATE], r->Rr,
                               (int) C);
      ok = mp_moe_ag_reduce (ex, s, all, mine, (int) C, error);
    }
  if (ok)
    ex->k->add (be, out, mine, (gsize) s->Nt * C);
  be->ops->release (be, all);
  be->ops->release (be, mine);
  return ok;
}

gboolean
mp_exec_moe_forward (MpExec *ex, const ExLayer *L, guint first, Acts *a, const float *h,
                     float *out, GError **error)
{
  MoeShape s = moe_shape (ex);
  MoeTensors w = moe_tensors (ex, L, first);
  if (!shared_forward (ex, &s, &w, a, h, out, error))
    return FALSE;
  ExRoute *r = a->route = router_forward (ex, &s, &w, h, error);
  if (r == NULL)
    return FALSE;
  gsize off = (gsize) s.row0 * ex->C;
  return gathers (ex) ? gathered_forward (ex, &s, &w, a, r, h + off, out + off, error)
                      : routed_forward (ex, &s, &w, a, r, h + off, out + off, error);
}

/* The gates' gradient through the router into DH (the routed rows; with partial expert
 * outputs on tp rank 0 only, as the others' dh are partial sums the tp reduction adds)
 * and the router weight's (summed over tp where tp ranks route different tokens); DG (R)
 * the rows' gate gradients, whole. */
static gboolean
router_backward (MpExec *ex, const MoeShape *s, const MoeTensors *w, const ExRoute *r,
                 const float *dg, const float *h, float *dh, GError **error)
{
  MpBackend *be = ex->be;
  int N = s->Nt, E = s->E, K = s->K;
  g_autofree float *dgates = g_new0 (float, (gsize) N * K);
  g_autofree float *dprobs = g_new0 (float, (gsize) N * E);
  g_autofree float *dlog = g_new0 (float, (gsize) N * E);
  for (int i = 0; i < r->R; i++)
    dgates[r->slot[i]] = dg[i];
  aux_backward (ex, s, r, dprobs, 1.0f / (float) ex->global_batch);
  mpk_cpu_router_backward (dlog, r->probs, r->idx, r->gates, dgates, dprobs, N, E, K);
  gboolean apart = ex->etp < ex->tp;      /* etp groups of tp ranks routed other tokens */
  gsize nw = (gsize) E * ex->C, nb = w->rb ? (gsize) E : 0;
  float *d = be->ops->alloc (be, ((gsize) N * E + (apart ? nw + nb : 0)) * sizeof (float),
                             MP_MEM_OTHER, error);
  if (d == NULL)
    return FALSE;
  float *dw = apart ? d + (gsize) N * E : w->router->grad;
  float *db = !w->rb ? NULL : apart ? dw + nw : w->rb->grad;
  if (apart)
    be->ops->zero (be, dw, (nw + nb) * sizeof (float));
  be->ops->upload (be, d, dlog, (gsize) N * E * sizeof (float));
  mp_exec_matmul_hp_backward (ex, s->owner ? dh : NULL, dw, db, d, h, w->router->param, N,
                              ex->C, E);
  if (apart && !s->owner)                 /* its group's owner adds the group's part */
    be->ops->zero (be, dw, (nw + nb) * sizeof (float));
  gboolean ok = !apart || mp_exec_tp_all_reduce (ex, dw, nw + nb, MP_REDUCE_SUM, error);
  if (ok && apart)
    ex->k->add (be, w->router->grad, dw, nw);
  if (ok && apart && db)
    ex->k->add (be, w->rb->grad, db, nb);
  be->ops->release (be, d);
  return ok;
}

/* Every local expert's backward on its rows: DYE (Rr, C) in, DXE (Rr, C) +=; SCRATCH holds
 * Rr * (Fel + f1e) zeroed floats. fc2's and fc1's backward are one grouped GEMM each. */
static void
experts_backward (MpExec *ex, const MoeShape *s, const MoeTensors *w, const ExRoute *r,
                  Acts *a, const float *dye, float *dxe, float *scratch)
{
  float *dact = scratch, *dfc1 = scratch + (gsize) MAX (r->Rr, 1) * s->Fel;
  Ffn g = expert_ffn (ex, s, w, 0, TRUE), p = expert_ffn (ex, s, w, 0, FALSE);
  ex->k->grouped_matmul_backward (ex->be, dact, g.w2, g.b2, dye, a->buf[M_E_ACT], p.w2,
                                  r->lcount, s->El, s->Fel, ex->C);
  mp_exec_act_backward (ex, dfc1, a->buf[M_E_FC1], dact, r->Rr, s->Fel);
  ex->k->grouped_matmul_backward (ex->be, dxe, g.w1, g.b1, dfc1, a->buf[M_XP], p.w1,
                                  r->lcount, s->El, ex->C, s->f1e);
}

/* The routed rows' backward from DOUT (the routed tokens' rows): the gates' gradient
 * into DG (R, host: whole, summed over etp), the experts' (to them by all-to-all with
 * ep > 1, and back) into DH. */
static gboolean
routed_backward (MpExec *ex, const MoeShape *s, const MoeTensors *w, Acts *a,
                 const ExRoute *r, const float *dout, float *dh, float *dg, GError **error)
{
  MpBackend *be = ex->be;
  gboolean ep = ex->ep > 1;
  gsize R = (gsize) MAX (r->R, 1), Rr = (gsize) MAX (r->Rr, 1), C = ex->C;
  enum { DEO, DGR, DYE, DXE, EXP, DXP, N_BUF };
  gsize len[N_BUF] = { R * C, R, ep ? Rr * C : 1, ep ? Rr * C : 1, Rr * (s->Fel + s->f1e),
                       R * C };
  float *b[N_BUF] = { NULL };
  gboolean ok = TRUE;
  for (int i = 0; i < N_BUF && ok; i++)
    ok = (b[i] = be->ops->alloc (be, len[i] * sizeof (float), MP_MEM_OTHER, error)) != NULL;
  if (ok)
    {
      /* d expert_out = gate * dout, d gate = dout . expert_out (partial over etp) */
      ex->k->gather_rows (be, b[DEO], dout, r->src, a->buf[M_GATE], r->R, (int) C);
      ex->k->rows_dot (be, b[DGR], dout, r->src, a->buf[M_E_OUT], r->R, (int) C);
      ok = !s->partial || etp_all_reduce (ex, b[DGR], R, error);
    }
  float *dye = ep ? b[DYE] : b[DEO], *dxe = ep ? b[DXE] : b[DXP];
  ok = ok && (!ep || mp_moe_a2a_dispatch (ex, r, b[DEO], dye, error));
  if (ok)
    experts_backward (ex, s, w, r, a, dye, dxe, b[EXP]);
  ok = ok && (!ep || mp_moe_a2a_combine (ex, r, dxe, b[DXP], error));
  if (ok)
    {
      ex->k->scatter_add_rows (be, dh, b[DXP], r->src, NULL, r->R, (int) C);
      be->ops->download (be, dg, b[DGR], (gsize) r->R * sizeof (float));
    }
  for (int i = 0; i < N_BUF; i++)
    be->ops->release (be, b[i]);
  return ok;
}

/* The all-gather dispatcher's backward: the group's output gradients gathered, this
 * rank's experts' backward on their rows, the input gradients and the gates' (by (token,
 * choice)) reduce-scattered back; DG (R) in this rank's row order. */
static gboolean
gathered_backward (MpExec *ex, const MoeShape *s, const MoeTensors *w, Acts *a,
                   const ExRoute *r, const float *dout, float *dh, float *dg, GError **error)
{
  MpBackend *be = ex->be;
  gsize Rr = (gsize) MAX (r->Rr, 1), C = ex->C, Nt = s->Nt, K = s->K, ep = ex->ep;
  enum { ALL, MINE, DYE, DGR, DXE, EXP, GALL, GMINE, N_BUF };
  gsize len[N_BUF] = { ep * Nt * C, Nt * C, Rr * C, Rr, Rr * C, Rr * (s->Fel + s->f1e),
                       ep * Nt * K, Nt * K };
  float *b[N_BUF] = { NULL };
  gboolean ok = TRUE;
  for (int i = 0; i < N_BUF && ok; i++)
    ok = (b[i] = be->ops->alloc (be, len[i] * sizeof (float), MP_MEM_OTHER, error)) != NULL;
  ok = ok && mp_moe_ag_gather (ex, s, dout, b[ALL], error);
  if (ok)
    {
      ex->k->gather_rows (be, b[DYE], b[ALL], r->asrc, a->buf[M_GATE], r->Rr, (int) C);
      ex->k->rows_dot (be, b[DGR], b[ALL], r->asrc, a->buf[M_E_OUT], r->Rr, (int) C);
      ok = !s->partial || etp_all_reduce (ex, b[DGR], Rr, error);
    }
  if (ok)
    {
      experts_backward (ex, s, w, r, a, b[DYE], b[DXE], b[EXP]);
      be->ops->zero (be, b[ALL], len[ALL] * sizeof (float));
      ex->k->scatter_add_rows (be, b[ALL], b[DXE], r->asrc, NULL, r->Rr, (int) C);
      ok = mp_moe_ag_reduce (ex, s, b[ALL], b[MINE], (int) C, error);
    }
  if (ok)
    {
      ex->k->add (be, dh, b[MINE], Nt * C);
      /* the gates' gradients to the ranks that routed them */
      g_autofree float *dgr = g_new (float, Rr);
      g_autofree float *gall = g_new0 (float, len[GALL]);
      g_autofree float *gmine = g_new (float, len[GMINE]);
      be->ops->download (be, dgr, b[DGR], (gsize) r->Rr * sizeof (float));
      for (int q = 0; q < r->Rr; q++)
        gall[r->aslot[q]] = dgr[q];
      be->ops->upload (be, b[GALL], gall, len[GALL] * sizeof (float));
      ok = mp_moe_ag_reduce (ex, s, b[GALL], b[GMINE], (int) K, error);
      if (ok)
        {
          be->ops->download (be, gmine, b[GMINE], len[GMINE] * sizeof (float));
          for (int i = 0; i < r->R; i++)
            dg[i] = gmine[r->slot[i]];
        }
    }
  for (int i = 0; i < N_BUF; i++)
    be->ops->release (be, b[i]);
  return ok;
}

/* ---- selective recompute ------------------------------------------------------------ */

void
mp_exec_moe_selective_drop (MpExec *ex, Acts *a, guint modules)
{
  static const int experts[] = { M_E_ACT }, shared[] = { M_S_FC1, M_S_ACT };
  for (gsize i = 0; i < G_N_ELEMENTS (experts) && (modules & MP_RECOMPUTE_MOE_ACT); i++)
    {
      ex->be->ops->release (ex->be, a->buf[experts[i]]);
      a->buf[experts[i]] = NULL;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (shared) && (modules & MP_RECOMPUTE_SHARED_EXPERTS); i++)
    {
      ex->be->ops->release (ex->be, a->buf[shared[i]]);
      a->buf[shared[i]] = NULL;
    }
}

/* What mp_exec_moe_selective_drop let go, rebuilt before the backward: the experts'
 * activations from their fc1 outputs (one call over the rows of every local expert, which
 * lie in expert order), the shared experts' fc1 and activation from the MLP's input H. */
static gboolean
selective_restore (MpExec *ex, const MoeShape *s, const MoeTensors *w, Acts *a,
                   const float *h, GError **error)
{
  const ExRoute *r = a->route;
  if (a->buf[M_E_FC1] != NULL && a->buf[M_E_ACT] == NULL)
    {
      int rows = 0;
      for (int e = 0; e < s->El; e++)
        rows += r->lcount[e];
      if (!mp_exec_act_alloc (ex, a, M_E_ACT, (gsize) MAX (r->Rr, 1) * s->Fel, error))
        return FALSE;
      if (rows > 0)
        mp_exec_act_forward (ex, a->buf[M_E_ACT], a->buf[M_E_FC1], rows, s->Fel);
    }
  if (s->Fsl > 0 && a->buf[M_S_FC1] == NULL)
    {
      gsize N = ex->N;
      if (!mp_exec_act_alloc (ex, a, M_S_FC1, N * s->f1s, error)
          || !mp_exec_act_alloc (ex, a, M_S_ACT, N * s->Fsl, error))
        return FALSE;
      Ffn f = shared_ffn (ex, s, w, FALSE);
      ffn_fc1 (ex, h, &f, (int) N, s->Fsl, a->buf[M_S_FC1], a->buf[M_S_ACT]);
    }
  return TRUE;
}

gboolean
mp_exec_moe_backward (MpExec *ex, const ExLayer *L, guint first, Acts *a, const float *dout,
                      const float *h, float *dh, GError **error)
{
  MoeShape s = moe_shape (ex);
  MoeTensors w = moe_tensors (ex, L, first);
  MpBackend *be = ex->be;
  const ExRoute *r = a->route;
  int N = ex->N;
  if (!selective_restore (ex, &s, &w, a, h, error))
    return FALSE;
  if (s.Fsl > 0)
    {
      float *sc = be->ops->alloc (be, (gsize) N * (s.Fsl + s.f1s) * sizeof (float),
                                  MP_MEM_OTHER, error);
      if (sc == NULL)
        return FALSE;
      Ffn g = shared_ffn (ex, &s, &w, TRUE), p = shared_ffn (ex, &s, &w, FALSE);
      ffn_backward (ex, dh, &g, dout, h, a->buf[M_S_FC1], a->buf[M_S_ACT], &p, N, s.Fsl, sc,
                    sc + (gsize) N * s.Fsl);
      be->ops->release (be, sc);
    }
  gsize off = (gsize) s.row0 * ex->C;
  g_autofree float *dg = g_new (float, MAX (r->R, 1));
  gboolean ok = gathers (ex)
                    ? gathered_backward (ex, &s, &w, a, r, dout + off, dh + off, dg, error)
                    : routed_backward (ex, &s, &w, a, r, dout + off, dh + off, dg, error);
  return ok && router_backward (ex, &s, &w, r, dg, h + off, dh + off, error);
}
