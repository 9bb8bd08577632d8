/* model-cp.c - context parallelism in the executor, as Megatron-Core runs it: each
 * sequence is split over the cp ranks with causal load balancing (rank i holds chunks i
 * and 2cp-1-i of 2cp, kernels/cpu mpk_cpu_cp_positions), every per-token op (norms,
 * GEMMs, MLP, loss) runs on the rank's own T/cp positions, and attention meets the other
 * ranks' keys by a ring: the key/value block moves one rank along per step (send to the
 * next cp rank, receive from the previous, the next block in flight while this one is
 * computed), each rank merging it into its queries' running softmax. Backward runs the
 * same ring: the key/value block travels again, and its dK/dV accumulator travels with it,
 * one hop behind, so that after cp hops every block's key and value gradients are back on
 * the rank that owns them. With cp_comm_type allgather (Transformer Engine's
 * AttnFuncWithCPAndKVAllGather) the blocks are all-gathered over the cp group instead,
 * before any of the attention runs, and backward gathers them again, accumulates dK/dV
 * for every block and reduce-scatters them to their owners. Rotary and learned positions
 * use the held positions; the gradients are reduced over dp * cp (model-exec.c's dp
 * group). The exchange time goes to ex->cp_s. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec-private.h"
#include "planner/planner.h"
#include "common/error.h"

#include <string.h>

/* Message tags of the ring: key/value blocks and their gradients. The cp neighbours are
 * never a pipeline pair (they differ in cp, a pipeline pair in pp), so the pipeline's
 * tags cannot meet these. */
#define TAG_KV 0x4350
#define TAG_DKV 0x4351

gboolean
mp_exec_cp_setup (MpExec *ex, const MpParallelConfig *cfg, guint tp_rank, guint cp_rank,
                  guint dp_rank, guint pp_rank, GError **error)
{
  ex->cp = MAX (cfg->cp, 1u);
  ex->cp_rank = cp_rank;
  if (ex->cp == 1)
    return TRUE;
  /* seq_len splits into 2 cp chunks: mp_exec_check_plan */
  int T = (int) ex->model->seq_len, Tl = T / (int) ex->cp;
  ex->cp_pos = g_new (int, (gsize) ex->cp * Tl);
  for (guint r = 0; r < ex->cp; r++)
    mpk_cpu_cp_positions (ex->cp_pos + r * Tl, T, (int) ex->cp, (int) r);
  ex->cp_next = (int) mp_plan_rank_of (cfg, tp_rank, (cp_rank + 1) % ex->cp, dp_rank, pp_rank);
  ex->cp_prev = (int) mp_plan_rank_of (cfg, tp_rank, (cp_rank + ex->cp - 1) % ex->cp, dp_rank,
                                       pp_rank);
  return TRUE;
}

int
mp_exec_position (const MpExec *ex, int row)
{
  return ex->cp > 1 ? ex->cp_pos[ex->cp_rank * ex->Tl + row % ex->Tl] : row % ex->T;
}

void
mp_exec_rotary_heads (MpExec *ex, float *x, int ld, int heads, int hd, gboolean backward,
                      float theta)
{
  void (*rot) (MpBackend *, float *, int, int, int, int, int, int, float)
      = backward ? ex->k->rotary_backward : ex->k->rotary_forward;
  if (ex->cp == 1)
    {
      rot (ex->be, x, ex->mbs, ex->T, heads, hd, ld, 0, theta);
      return;
    }
  /* each sequence's two chunks, each a run of consecutive positions */
  int c = ex->Tl / 2;
  const int *pos = ex->cp_pos + ex->cp_rank * ex->Tl;
  for (int b = 0; b < ex->mbs; b++)
    for (int h = 0; h < 2; h++)
      rot (ex->be, x + ((gsize) b * ex->Tl + h * c) * ld, 1, c, heads, hd, ld, pos[h * c],
           theta);
}

void
mp_exec_rotary (MpExec *ex, float *qkv, int ld, gboolean backward, float theta)
{
  mp_exec_rotary_heads (ex, qkv, ld, ex->NHl + ex->NKVl, ex->HD, backward, theta);
}

/* ---- the ring ---------------------------------------------------------------------- */

/* A block of the ring: this step's rows of K | V (B * Tl rows of NKVl (HD + DV) floats: K
 * and V heads may differ in width, as MLA's). */
typedef struct {
  MpExec *ex;
  gsize row;                 /* floats per packed row */
  gsize kw, vw;              /* of which K's (first), V's (after) */
  gsize n;                   /* floats of a block */
  float *cur, *next;         /* the block computed on, the one arriving */
  float *dcur, *dnext;       /* backward: their dK | dV accumulators */
} Ring;

/* R's buffers for EX: CUR and DCUR (backward) of BLOCKS blocks each, NEXT and DNEXT
 * (backward) of one: the ring's two of each, or the all-gather's cp blocks and the
 * reduce-scatter's landing block. */
static gboolean
ring_open_blocks (Ring *r, MpExec *ex, gboolean backward, guint blocks, GError **error)
{
  MpBackend *be = ex->be;
  r->ex = ex;
  r->kw = (gsize) ex->NKVl * ex->HD;
  r->vw = (gsize) ex->NKVl * ex->DV;
  r->row = r->kw + r->vw;
  r->n = (gsize) ex->N * r->row;
  gsize bytes = r->n * sizeof (float);
  r->cur = be->ops->alloc (be, blocks * bytes, MP_MEM_OTHER, error);
  r->next = r->cur ? be->ops->alloc (be, bytes, MP_MEM_OTHER, error) : NULL;
  if (!backward || r->next == NULL)
    return r->next != NULL;
  r->dcur = be->ops->alloc (be, blocks * bytes, MP_MEM_OTHER, error);
  r->dnext = r->dcur ? be->ops->alloc (be, bytes, MP_MEM_OTHER, error) : NULL;
  return r->dnext != NULL;
}

static gboolean
ring_open (Ring *r, MpExec *ex, gboolean backward, GError **error)
{
  return ring_open_blocks (r, ex, backward, 1, error);
}

static void
ring_close (Ring *r)
{
  MpBackend *be = r->ex->be;
  be->ops->release (be, r->cur);
  be->ops->release (be, r->next);
  be->ops->release (be, r->dcur);
  be->ops->release (be, r->dnext);
}

static void
swap (float **a, float **b)
{
  float *t = *a;
  *a = *b;
  *b = t;
}

/* This rank's K and V rows (LDK and LDV floats apart) packed into the block. */
static void
ring_pack (Ring *r, const float *k, int ldk, const float *v, int ldv)
{
  MpExec *ex = r->ex;
  for (int i = 0; i < ex->N; i++)
    {
      ex->be->ops->copy (ex->be, r->cur + i * r->row, k + (gsize) i * ldk,
                         r->kw * sizeof (float));
      ex->be->ops->copy (ex->be, r->cur + i * r->row + r->kw, v + (gsize) i * ldv,
                         r->vw * sizeof (float));
    }
}

/* Starts BUF (N floats) to the next cp rank and the receive of INTO from the previous
 * (as one exchange where the backend has one: *SEND is then NULL). */
static gboolean
ring_shift_start (MpExec *ex, const float *buf, float *into, gsize n, int tag,
                  MpRequest **send, MpRequest **recv, GError **error)
{
  gsize bytes = n * sizeof (float);
  *send = NULL;
  if (ex->be->ops->isendrecv != NULL)
    return ex->be->ops->isendrecv (ex->be, buf, ex->cp_next, into, ex->cp_prev, bytes, tag,
                                   recv, error);
  return ex->be->ops->irecv (ex->be, into, bytes, ex->cp_prev, tag, recv, error)
         && ex->be->ops->isend (ex->be, buf, bytes, ex->cp_next, tag, send, error);
}

static gboolean
ring_shift_end (MpExec *ex, MpRequest *send, MpRequest *recv, GError **error)
{
  double t0 = ex->be->ops->now_s (ex->be);
  gboolean ok = ex->be->ops->wait (ex->be, recv, error) && ex->be->ops->wait (ex->be, send, error);
  ex->cp_s += ex->be->ops->now_s (ex->be) - t0;
  return ok;
}

/* Lets MPI move the ring's transfers along (Open MPI has no progress thread here): tests
 * each request of REQS (N, NULL when done), clearing those that completed. */
static gboolean
ring_poll (MpExec *ex, MpRequest **reqs, int n, GError **error)
{
  for (int i = 0; i < n; i++)
    {
      gboolean done = FALSE;
      if (reqs[i] != NULL && !ex->be->ops->test (ex->be, reqs[i], &done, error))
        return FALSE;
      if (done)
        reqs[i] = NULL;
    }
  return TRUE;
}

/* A block's work in pieces, one per sequence and kv-head group (a kv head and its query
 * heads), with the transfers in flight polled between them: that is where they overlap
 * with the computation. Piece (b, g) of shape S (the block's) offsets its rows by b
 * sequences and its heads by group g. */
typedef struct {
  MpkAttnShape s;             /* one sequence, one kv head and its query heads */
  gsize q, k, v, o, row;      /* offsets in floats into q (dq), the block's K and V, out,
                               * (B NH T) rows */
} Piece;

static Piece
piece (const MpExec *ex, MpkAttnShape s, int b, int g)
{
  int grp = s.NH / s.NKV;
  int dv = mpk_attn_dv (s);
  Piece p = { s, 0, 0, 0, 0, 0 };
  p.s.B = 1, p.s.NH = grp, p.s.NKV = 1;
  p.q = (gsize) b * ex->Tl * s.ldq + (gsize) g * grp * s.HD;
  p.k = (gsize) b * ex->Tl * s.ldkv + (gsize) g * s.HD;
  p.v = (gsize) b * ex->Tl * s.ldkv + (gsize) s.NKV * s.HD + (gsize) g * dv;
  p.o = (gsize) b * ex->Tl * s.ldo + (gsize) g * grp * dv;
  p.row = ((gsize) b * s.NH + (gsize) g * grp) * ex->Tl;
  return p;
}

/* The cp rank whose block ring step STEP computes on: cp_rank - step. */
static guint
ring_owner (const MpExec *ex, guint step)
{
  return (ex->cp_rank + ex->cp - step % ex->cp) % ex->cp;
}

/* The positions of the block of ring step STEP. */
static const int *
ring_kpos (const MpExec *ex, guint step)
{
  return ex->cp_pos + ring_owner (ex, step) * ex->Tl;
}

/* The block's shape: queries as S, keys and values packed. */
static MpkAttnShape
ring_shape (const Ring *r, MpkAttnShape s)
{
  s.ldkv = (int) r->row;
  s.ldv = 0;                   /* K and V rows share the block's stride */
  return s;
}

/* The forward ring on blocks R, running max and sum M, L (B NH T each). */
static gboolean
ring_forward (Ring *r, float *out, float *lse, float *m, float *l, const float *q,
              MpkAttnShape s, GError **error)
{
  MpExec *ex = r->ex;
  const MpKernelOps *kk = ex->k;
  MpkAttnShape bs = ring_shape (r, s);
  const int *qpos = ring_kpos (ex, 0);
  kk->ring_attention_begin (ex->be, out, m, l, s);
  for (guint step = 0; step < ex->cp; step++)
    {
      MpRequest *reqs[2] = { NULL, NULL };   /* send, receive */
      gboolean more = step + 1 < ex->cp;
      if (more && !ring_shift_start (ex, r->cur, r->next, r->n, TAG_KV, &reqs[0], &reqs[1],
                                     error))
        return FALSE;
      for (int b = 0; b < s.B; b++)
        for (int g = 0; g < s.NKV; g++)
          {
            Piece p = piece (ex, bs, b, g);
            kk->ring_attention_block (ex->be, out + p.o, m + p.row, l + p.row, q + p.q,
                                      r->cur + p.k, r->cur + p.v, p.s, ex->Tl,
                                      qpos, ring_kpos (ex, step));
            if (!ring_poll (ex, reqs, 2, error))
              return FALSE;
          }
      if (more && !ring_shift_end (ex, reqs[0], reqs[1], error))
        return FALSE;
      swap (&r->cur, &r->next);
    }
  kk->ring_attention_end (ex->be, out, lse, m, l, s);
  return TRUE;
}

/* This rank's block's gradients, arrived in DNEXT, added into DK and DV (rows LDK and LDV
 * apart). */
static void
ring_add_grads (Ring *r, float *dk, int ldk, float *dv, int ldv)
{
  MpExec *ex = r->ex;
  for (int i = 0; i < ex->N; i++)
    {
      ex->k->add (ex->be, dk + (gsize) i * ldk, r->dnext + i * r->row, r->kw);
      ex->k->add (ex->be, dv + (gsize) i * ldv, r->dnext + i * r->row + r->kw, r->vw);
    }
}

/* ---- the all-gather (cp_comm_type allgather) ----------------------------------------- */

/* Step STEP's block of the gathered BLOCKS: rank cp_rank - step's, as the ring's. */
static float *
gathered (const Ring *r, float *blocks, guint step)
{
  const MpExec *ex = r->ex;
  return blocks + (gsize) ring_owner (ex, step) * r->n;
}

/* Every cp rank's K | V block into R->cur, in cp-rank order, this rank's packed from K
 * and V (rows LDK and LDV apart). */
static gboolean
gather_kv (Ring *r, const float *k, int ldk, const float *v, int ldv, GError **error)
{
  MpExec *ex = r->ex;
  float *all = r->cur;
  r->cur = all + (gsize) ex->cp_rank * r->n;
  ring_pack (r, k, ldk, v, ldv);
  r->cur = all;
  double t0 = ex->be->ops->now_s (ex->be);
  gboolean ok = ex->be->ops->all_gather (ex->be, ex->cp_group, all, r->n, error);
  ex->cp_s += ex->be->ops->now_s (ex->be) - t0;
  return ok;
}

/* The forward over the gathered blocks: the ring's steps with nothing in flight. */
static void
gather_forward (Ring *r, float *out, float *lse, float *m, float *l, const float *q,
                MpkAttnShape s)
{
  MpExec *ex = r->ex;
  MpkAttnShape bs = ring_shape (r, s);
  const int *qpos = ring_kpos (ex, 0);
  ex->k->ring_attention_begin (ex->be, out, m, l, s);
  for (guint step = 0; step < ex->cp; step++)
    for (int b = 0; b < s.B; b++)
      for (int g = 0; g < s.NKV; g++)
        {
          Piece p = piece (ex, bs, b, g);
          float *blk = gathered (r, r->cur, step);
          ex->k->ring_attention_block (ex->be, out + p.o, m + p.row, l + p.row, q + p.q,
                                       blk + p.k, blk + p.v, p.s, ex->Tl, qpos,
                                       ring_kpos (ex, step));
        }
  ex->k->ring_attention_end (ex->be, out, lse, m, l, s);
}

/* Backward over the gathered blocks, each block's dK | dV accumulated in R->dcur, then
 * reduce-scattered so that every rank gets its own, added into DK and DV. */
static gboolean
gather_backward (Ring *r, float *dq, float *dk, float *dv, const float *dout,
                 const float *out, const float *lse, const float *q, MpkAttnShape s,
                 GError **error)
{
  MpExec *ex = r->ex;
  MpkAttnShape bs = ring_shape (r, s);
  const int *qpos = ring_kpos (ex, 0);
  for (guint step = 0; step < ex->cp; step++)
    for (int b = 0; b < s.B; b++)
      for (int g = 0; g < s.NKV; g++)
        {
          Piece p = piece (ex, bs, b, g);
          float *blk = gathered (r, r->cur, step), *dblk = gathered (r, r->dcur, step);
          ex->k->ring_attention_backward_block (ex->be, dq + p.q, dblk + p.k, dblk + p.v,
                                                dout + p.o, out + p.o, lse + p.row, q + p.q,
                                                blk + p.k, blk + p.v, p.s, ex->Tl, qpos,
                                                ring_kpos (ex, step));
        }
  double t0 = ex->be->ops->now_s (ex->be);
  gboolean ok = ex->be->ops->reduce_scatter (ex->be, ex->cp_group, r->dcur, r->dnext, r->n,
                                             error);
  ex->cp_s += ex->be->ops->now_s (ex->be) - t0;
  if (ok)
    ring_add_grads (r, dk, s.ldkv, dv, mpk_attn_ldv (s));
  return ok;
}

gboolean
mp_exec_attention_forward (MpExec *ex, float *out, float *lse, float *probs, const float *q,
                           const float *k, const float *v, MpkAttnShape s, GError **error)
{
  if (ex->cp == 1)
    {
      ex->k->attention_forward (ex->be, out, lse, probs, q, k, v, s);
      return TRUE;
    }
  Ring r = { 0 };
  gsize rows = (gsize) s.B * s.NH * s.T;
  float *m = NULL;
  guint blocks = ex->cp_group ? ex->cp : 1;
  gboolean ok = ring_open_blocks (&r, ex, FALSE, blocks, error)
                && (m = ex->be->ops->alloc (ex->be, 2 * rows * sizeof (float), MP_MEM_OTHER,
                                            error)) != NULL;
  if (ok && ex->cp_group)
    {
      ok = gather_kv (&r, k, s.ldkv, v, mpk_attn_ldv (s), error);
      if (ok)
        gather_forward (&r, out, lse, m, m + rows, q, s);
    }
  else if (ok)
    {
      ring_pack (&r, k, s.ldkv, v, mpk_attn_ldv (s));
      ok = ring_forward (&r, out, lse, m, m + rows, q, s, error);
    }
  ex->be->ops->release (ex->be, m);
  ring_close (&r);
  return ok;
}

/* After the ring's last step the accumulator in DCUR is that of the next rank's block:
 * one more hop brings every rank its own, added into DK and DV. */
static gboolean
ring_return_grads (Ring *r, float *dk, int ldk, float *dv, int ldv, GError **error)
{
  MpExec *ex = r->ex;
  MpRequest *send = NULL, *recv = NULL;
  if (!ring_shift_start (ex, r->dcur, r->dnext, r->n, TAG_DKV, &send, &recv, error)
      || !ring_shift_end (ex, send, recv, error))
    return FALSE;
  ring_add_grads (r, dk, ldk, dv, ldv);
  return TRUE;
}

gboolean
mp_exec_attention_backward (MpExec *ex, float *dq, float *dk, float *dv, const float *dout,
                            const float *out, const float *lse, const float *probs,
                            const float *q, const float *k, const float *v, MpkAttnShape s,
                            GError **error)
{
  const MpKernelOps *kk = ex->k;
  if (ex->cp == 1)
    {
      kk->attention_backward (ex->be, dq, dk, dv, dout, out, lse, probs, q, k, v, s);
      return TRUE;
    }
  Ring r = { 0 };
  if (ex->cp_group)
    {
      gboolean ok = ring_open_blocks (&r, ex, TRUE, ex->cp, error)
                    && gather_kv (&r, k, s.ldkv, v, mpk_attn_ldv (s), error)
                    && gather_backward (&r, dq, dk, dv, dout, out, lse, q, s, error);
      ring_close (&r);
      return ok;
    }
  gboolean ok = ring_open (&r, ex, TRUE, error);
  MpkAttnShape bs = ring_shape (&r, s);
  const int *qpos = ring_kpos (ex, 0);
  if (ok)
    ring_pack (&r, k, s.ldkv, v, mpk_attn_ldv (s));
  for (guint step = 0; ok && step < ex->cp; step++)
    {
      /* the next key/value block is in flight while this one is computed; its gradient
       * accumulator can leave the previous rank only once that rank is done with it */
      MpRequest *reqs[2] = { NULL, NULL }, *dsend = NULL, *drecv = NULL;
      gboolean more = step + 1 < ex->cp;
      if (more && !(ok = ring_shift_start (ex, r.cur, r.next, r.n, TAG_KV, &reqs[0], &reqs[1],
                                           error)))
        break;
      for (int b = 0; ok && b < s.B; b++)
        for (int g = 0; ok && g < s.NKV; g++)
          {
            Piece p = piece (ex, bs, b, g);
            kk->ring_attention_backward_block (ex->be, dq + p.q, r.dcur + p.k, r.dcur + p.v,
                                               dout + p.o, out + p.o, lse + p.row, q + p.q,
                                               r.cur + p.k, r.cur + p.v, p.s, ex->Tl, qpos,
                                               ring_kpos (ex, step));
            ok = ring_poll (ex, reqs, 2, error);
          }
      if (!ok || !more)
        break;
      ok = ring_shift_start (ex, r.dcur, r.dnext, r.n, TAG_DKV, &dsend, &drecv, error)
           && ring_shift_end (ex, reqs[0], reqs[1], error)
           && ring_shift_end (ex, dsend, drecv, error);
      if (ok)
        {
          swap (&r.cur, &r.next);
          swap (&r.dcur, &r.dnext);
        }
    }
  ok = ok && ring_return_grads (&r, dk, s.ldkv, dv, mpk_attn_ldv (s), error);
  ring_close (&r);
  return ok;
}
