/* model-moe-ep.c - the MoE layer's token dispatch and combine over the expert-parallel
 * group (Megatron-Core's token dispatchers): all-to-all, where each rank sends the rows
 * it routed to the ranks of their experts and gets back their outputs; all-gather, where
 * every rank gathers the group's tokens and routing, runs its experts on the rows routed
 * to them and the outputs are reduce-scattered back. Every collective is timed into
 * ex->ep_s (the ep_comm phase). */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/model-moe.h"
#include "common/error.h"

/* A backend buffer of N floats, or NULL with ERROR set. */
static float *
scratch (MpExec *ex, gsize n, GError **error)
{
  return ex->be->ops->alloc (ex->be, MAX (n, 1) * sizeof (float), MP_MEM_OTHER, error);
}

/* An all-to-all over the ep group, timed into ex->ep_s (the ep_comm phase). */
static gboolean
ep_all_to_all (MpExec *ex, const float *send, const gsize *send_n, float *recv,
               const gsize *recv_n, GError **error)
{
  double t0 = ex->be->ops->now_s (ex->be);
  gboolean ok = ex->be->ops->all_to_all_v (ex->be, ex->ep_group, send, send_n, recv, recv_n,
                                           error);
  ex->ep_s += ex->be->ops->now_s (ex->be) - t0;
  return ok;
}

/* ---- all-to-all -------------------------------------------------------------------- */

/* The counts go as floats through the backend (exact below 2^24); R->Rr rows come back
 * from the ep ranks in rank order, each's by local expert; R->perm orders them by local
 * expert, source rank inside. */
gboolean
mp_moe_a2a_layout (MpExec *ex, const MoeShape *s, ExRoute *r, GError **error)
{
  MpBackend *be = ex->be;
  int ep = (int) ex->ep, El = s->El, C = ex->C;
  g_autofree float *mine = g_new (float, s->E);
  g_autofree float *theirs = g_new (float, s->E);
  g_autofree gsize *n = g_new (gsize, ep);
  for (int e = 0; e < s->E; e++)
    mine[e] = (float) r->count[e];
  for (int p = 0; p < ep; p++)
    n[p] = (gsize) El;
  float *buf = scratch (ex, 2 * (gsize) s->E, error);
  if (buf == NULL)
    return FALSE;
  be->ops->upload (be, buf, mine, (gsize) s->E * sizeof (float));
  gboolean ok = ep_all_to_all (ex, buf, n, buf + s->E, n, error);
  if (ok)
    be->ops->download (be, theirs, buf + s->E, (gsize) s->E * sizeof (float));
  be->ops->release (be, buf);
  if (!ok)
    return FALSE;
  r->send_n = g_new0 (gsize, ep);
  r->recv_n = g_new0 (gsize, ep);
  r->lcount = g_new0 (int, El);
  for (int p = 0; p < ep; p++)
    for (int el = 0; el < El; el++)
      {
        int got = (int) theirs[p * El + el];
        r->send_n[p] += (gsize) r->count[p * El + el] * C;
        r->recv_n[p] += (gsize) got * C;
        r->lcount[el] += got;
        r->Rr += got;
      }
  r->perm = g_new (int, MAX (r->Rr, 1));
  g_autofree int *start = g_new (int, El);    /* expert-major slot of each expert's next */
  for (int el = 0, q = 0; el < El; q += r->lcount[el], el++)
    start[el] = q;
  for (int p = 0, row = 0; p < ep; p++)
    for (int el = 0; el < El; el++)
      for (int i = 0; i < (int) theirs[p * El + el]; i++)
        r->perm[start[el]++] = row++;
  return TRUE;
}

gboolean
mp_moe_a2a_dispatch (MpExec *ex, const ExRoute *r, const float *x, float *xe, GError **error)
{
  MpBackend *be = ex->be;
  float *recv = scratch (ex, (gsize) r->Rr * ex->C, error);
  gboolean ok = recv != NULL && ep_all_to_all (ex, x, r->send_n, recv, r->recv_n, error);
  if (ok)
    ex->k->gather_rows (be, xe, recv, r->perm, NULL, r->Rr, ex->C);
  be->ops->release (be, recv);
  return ok;
}

gboolean
mp_moe_a2a_combine (MpExec *ex, const ExRoute *r, const float *ye, float *y, GError **error)
{
  MpBackend *be = ex->be;
  float *send = scratch (ex, (gsize) r->Rr * ex->C, error);
  if (send == NULL)
    return FALSE;
  ex->k->scatter_add_rows (be, send, ye, r->perm, NULL, r->Rr, ex->C);
  gboolean ok = ep_all_to_all (ex, send, r->recv_n, y, r->send_n, error);
  be->ops->release (be, send);
  return ok;
}

/* ---- all-gather -------------------------------------------------------------------- */

gboolean
mp_moe_ag_gather (MpExec *ex, const MoeShape *s, const float *x, float *all, GError **error)
{
  gsize n = (gsize) s->Nt * ex->C;
  ex->be->ops->copy (ex->be, all + ex->ep_rank * n, x, n * sizeof (float));
  double t0 = ex->be->ops->now_s (ex->be);
  gboolean ok = ex->be->ops->all_gather (ex->be, ex->ep_group, all, n, error);
  ex->ep_s += ex->be->ops->now_s (ex->be) - t0;
  return ok;
}

gboolean
mp_moe_ag_reduce (MpExec *ex, const MoeShape *s, const float *all, float *y, int width,
                  GError **error)
{
  double t0 = ex->be->ops->now_s (ex->be);
  gboolean ok = ex->be->ops->reduce_scatter (ex->be, ex->ep_group, all, y,
                                             (gsize) s->Nt * width, error);
  ex->ep_s += ex->be->ops->now_s (ex->be) - t0;
  return ok;
}

/* Every (token, choice) of the group as (expert or -1 when dropped, gate), ep Nt K pairs
 * in rank order, on the host in ALL. */
static gboolean
gather_routing (MpExec *ex, const MoeShape *s, const ExRoute *r, float *all, GError **error)
{
  MpBackend *be = ex->be;
  gsize n = (gsize) s->Nt * s->K * 2, total = n * ex->ep;
  g_autofree float *mine = g_new (float, n);
  for (gsize i = 0; i < n / 2; i++)
    mine[2 * i] = -1, mine[2 * i + 1] = 0;
  for (int i = 0; i < r->R; i++)
    mine[2 * r->slot[i]] = (float) r->idx[r->slot[i]], mine[2 * r->slot[i] + 1] = r->grow[i];
  float *buf = scratch (ex, total, error);
  if (buf == NULL)
    return FALSE;
  be->ops->upload (be, buf + ex->ep_rank * n, mine, n * sizeof (float));
  double t0 = be->ops->now_s (be);
  gboolean ok = be->ops->all_gather (be, ex->ep_group, buf, n, error);
  ex->ep_s += be->ops->now_s (be) - t0;
  if (ok)
    be->ops->download (be, all, buf, total * sizeof (float));
  be->ops->release (be, buf);
  return ok;
}

gboolean
mp_moe_ag_layout (MpExec *ex, const MoeShape *s, ExRoute *r, GError **error)
{
  int ep = (int) ex->ep, K = s->K, El = s->El, Nt = s->Nt;
  gsize pairs = (gsize) ep * Nt * K;
  g_autofree float *all = g_new (float, 2 * pairs);
  if (!gather_routing (ex, s, r, all, error))
    return FALSE;
  int e0 = (int) ex->ep_rank * El;
  r->lcount = g_new0 (int, El);
  for (gsize i = 0; i < pairs; i++)
    {
      int e = (int) all[2 * i] - e0;
      if (all[2 * i] >= 0 && e >= 0 && e < El)
        r->lcount[e]++, r->Rr++;
    }
  r->asrc = g_new (int, MAX (r->Rr, 1));
  r->aslot = g_new (int, MAX (r->Rr, 1));
  g_autofree int *start = g_new (int, El);
  for (int el = 0, q = 0; el < El; q += r->lcount[el], el++)
    start[el] = q;
  for (gsize i = 0; i < pairs; i++)      /* by expert, then rank, token and choice */
    {
      int e = (int) all[2 * i] - e0;
      if (all[2 * i] >= 0 && e >= 0 && e < El)
        {
          r->asrc[start[e]] = (int) (i / K);
          r->aslot[start[e]++] = (int) i;
        }
    }
  r->agate = g_new (float, MAX (r->Rr, 1));
  for (int q = 0; q < r->Rr; q++)
    r->agate[q] = all[2 * (gsize) r->aslot[q] + 1];
  return TRUE;
}
