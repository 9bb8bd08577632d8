/* model-shared.c - what every layer kind (model-layers.c, model-dense.c) uses: its saved
 * activations, accounted as MP_MEM_ACTIVATIONS, and the tensor-parallel collectives,
 * timed into ex->tp_s (the tp_comm phase of the step). */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec-private.h"

float *
mp_exec_act_alloc (MpExec *ex, Acts *a, int slot, gsize n, GError **error)
{
  a->buf[slot] = ex->be->ops->alloc (ex->be, n * sizeof (float), MP_MEM_ACTIVATIONS, error);
  return a->buf[slot];
}

void
mp_exec_acts_free (MpExec *ex, Acts *a)
{
  if (a == NULL)
    return;
  for (int i = 0; i < MAX_BUFS; i++)
    ex->be->ops->release (ex->be, a->buf[i]);
  mp_exec_route_free (a->route);
  g_free (a);
}

void
mp_exec_release_acts (MpExec *ex, guint layer, guint mb)
{
  mp_exec_acts_free (ex, ex->layers[layer].acts[mb]);
  ex->layers[layer].acts[mb] = NULL;
}

/* ---- tensor-parallel collectives, timed -------------------------------------------- */

gboolean
mp_exec_tp_all_reduce (MpExec *ex, float *buf, gsize n, MpReduceOp op, GError **error)
{
  double t0 = ex->be->ops->now_s (ex->be);
  gboolean ok = ex->be->ops->all_reduce (ex->be, ex->tp_group, buf, n, op, error);
  ex->tp_s += ex->be->ops->now_s (ex->be) - t0;
  return ok;
}

float *
mp_exec_tp_reduce_width (MpExec *ex, float *full, float *out, int width, GError **error)
{
  if (!ex->sp)
    return mp_exec_tp_all_reduce (ex, full, (gsize) ex->N * width, MP_REDUCE_SUM, error) ? full
                                                                                         : NULL;
  double t0 = ex->be->ops->now_s (ex->be);
  gboolean ok = ex->be->ops->reduce_scatter (ex->be, ex->tp_group, full, out,
                                             (gsize) ex->Ns * width, error);
  ex->tp_s += ex->be->ops->now_s (ex->be) - t0;
  return ok ? out : NULL;
}

float *
mp_exec_tp_gather_width (MpExec *ex, const float *shard, float *full, int width,
                         GError **error)
{
  if (!ex->sp)
    return (float *) shard;
  gsize n = (gsize) ex->Ns * width;
  ex->be->ops->copy (ex->be, full + ex->tp_rank * n, shard, n * sizeof (float));
  double t0 = ex->be->ops->now_s (ex->be);
  gboolean ok = ex->be->ops->all_gather (ex->be, ex->tp_group, full, n, error);
  ex->tp_s += ex->be->ops->now_s (ex->be) - t0;
  return ok ? full : NULL;
}

const float *
mp_exec_tp_regather_width (MpExec *ex, MpExecTmp *t, const float *saved, const float *shard,
                           int width, GError **error)
{
  if (!ex->sp || saved != NULL)
    return ex->sp ? saved : shard;
  float *full = mp_exec_tmp_floats (t, (gsize) ex->N * width, error);
  return full ? mp_exec_tp_gather_width (ex, shard, full, width, error) : NULL;
}

float *
mp_exec_tmp_floats (MpExecTmp *t, gsize n, GError **error)
{
  g_assert (t->n < (int) G_N_ELEMENTS (t->p));
  float *p = t->ex->be->ops->alloc (t->ex->be, n * sizeof (float), MP_MEM_OTHER, error);
  if (p)
    t->p[t->n++] = p;
  return p;
}

void
mp_exec_tmp_release (MpExecTmp *t)
{
  for (int i = 0; i < t->n; i++)
    t->ex->be->ops->release (t->ex->be, t->p[i]);
  t->n = 0;
}
