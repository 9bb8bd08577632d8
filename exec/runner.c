/* runner.c - the instruction interpreter: runs one rank's program (planner/program.c) for
 * a training step on an MpExec, in program order, with the program's three streams:
 *  - compute: FORWARD / BACKWARD / OPTIMIZER run when issued (their TP collectives are
 *    blocking, inside the layer);
 *  - pp: SEND is MPI_Isend of the boundary activation (or its gradient) and never holds
 *    anything up; RECV posts MPI_Irecv, and the first FORWARD / BACKWARD that reads the
 *    buffer waits for it;
 *  - dp: REDUCE_GRADS, GATHER_PARAMS are non-blocking collectives started when issued and
 *    completed in stream order (WAIT, a layer needing a gathered weight or a gradient
 *    buffer a reduction still reads); REDUCE_TIED first completes the stream, as it reads
 *    what the buckets reduced.
 * Between instructions the runner tests its requests so MPI progresses them (Open MPI has
 * no progress thread): that is where overlap with compute comes from.
 * Every instruction is timed (MpInsnTime); the schedule itself is the program's. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/runner.h"
#include "common/error.h"

#include <string.h>

typedef enum { DP_DONE_NOTHING, DP_DONE_ACCUMULATE } DpAction;

typedef struct {
  guint id;
  MpRequest *req;
  DpAction action;
  ExTensor *t;
} DpOp;

typedef struct {
  MpRequest *req;
  float *buf;
} SendOp;

struct _MpRunner {
  MpExec *ex;
  MpBackend *be;
  const MpProgram *prog;
  guint *first, *count;        /* per model chunk: first layer, layers */
  guint n_chunks;
  GQueue dp;                   /* DpOp*, in issue order */
  guint dp_next;               /* id of the next DP op (ids start at 1) */
  guint dp_done;               /* the last DP op completed (they complete in order) */
  guint last_reduce;           /* id of the last gradient reduction started (0: none) */
  GHashTable *recvs;           /* float ** slot -> MpRequest * */
  GPtrArray *sends;            /* SendOp* in flight */
  MpInsnTime *times;           /* per instruction of the last step */
  double grad_norm;
  MpWatchdog *watchdog;        /* borrowed, or NULL */
  gint stall_at;               /* test hook: instruction to stop before for good (-1) */
};

MpRunner *
mp_runner_new (MpExec *ex, const MpProgram *prog, const guint *chunk_layers, guint n_chunks)
{
  MpRunner *r = g_new0 (MpRunner, 1);
  r->ex = ex;
  r->be = ex->be;
  r->prog = prog;
  r->n_chunks = n_chunks;
  r->first = g_new (guint, n_chunks);
  r->count = g_memdup2 (chunk_layers, n_chunks * sizeof (guint));
  for (guint c = 0, at = 0; c < n_chunks; at += r->count[c], c++)
    r->first[c] = at;
  g_queue_init (&r->dp);
  r->dp_next = 1;
  r->recvs = g_hash_table_new (g_direct_hash, g_direct_equal);
  r->sends = g_ptr_array_new ();
  r->times = g_new0 (MpInsnTime, prog->n_insns);
  r->stall_at = -1;
  return r;
}

void
mp_runner_watch (MpRunner *r, MpWatchdog *w, gint stall_at)
{
  r->watchdog = w;
  r->stall_at = stall_at;
}

void
mp_runner_free (MpRunner *r)
{
  if (r == NULL)
    return;
  g_free (r->first);
  g_free (r->count);
  g_queue_clear_full (&r->dp, g_free);
  g_hash_table_unref (r->recvs);
  g_ptr_array_unref (r->sends);
  g_free (r->times);
  g_free (r);
}

const MpInsnTime *
mp_runner_times (const MpRunner *r)
{
  return r->times;
}

double
mp_runner_grad_norm (const MpRunner *r)
{
  return r->grad_norm;
}

static double
now (MpRunner *r)
{
  return r->be->ops->now_s (r->be);
}

/* ---- the dp stream ----------------------------------------------------------------- */

static guint dp_push (MpRunner *r, MpRequest *req, DpAction action, ExTensor *t);

/* HSDP (fsdp17): T's accumulated shard all-reduced over the replicate group, at the tail
 * of the dp stream. */
static gboolean
replicate_start (MpRunner *r, ExTensor *t, GError **error)
{
  MpRequest *req = NULL;
  t->replicate = FALSE;
  if (!r->be->ops->iall_reduce (r->be, r->ex->rep_group, t->gshard, t->shard_n, &req, error))
    return FALSE;
  t->pending = dp_push (r, req, DP_DONE_NOTHING, t);
  return TRUE;
}

static gboolean
dp_finish (MpRunner *r, DpOp *op, GError **error)
{
  if (op->req && !r->be->ops->wait (r->be, op->req, error))
    return FALSE;
  op->req = NULL;
  if (op->action == DP_DONE_ACCUMULATE)
    {
      /* ZeRO-2/3: this micro-batch's reduced shard joins the step's; the full gradient
       * is let go (the next backward of the layer starts a new one from zero). */
      ExTensor *t = op->t;
      r->ex->k->add (r->ex->be, t->gshard, t->rs_tmp, t->shard_n);
      r->be->ops->release (r->be, t->rs_tmp);
      r->be->ops->release (r->be, t->grad);
      t->rs_tmp = t->grad = NULL;
    }
  r->dp_done = op->id;
  if (op->t && op->t->replicate && op->t->pending == op->id)
    return replicate_start (r, op->t, error);
  return TRUE;
}

/* Completes DP ops in stream order up to and including ID (0: nothing; G_MAXUINT: all). */
static gboolean
dp_complete (MpRunner *r, guint id, GError **error)
{
  while (!g_queue_is_empty (&r->dp))
    {
      DpOp *op = g_queue_peek_head (&r->dp);
      if (op->id > id)
        break;
      g_queue_pop_head (&r->dp);
      gboolean ok = dp_finish (r, op, error);
      g_free (op);
      if (!ok)
        return FALSE;
    }
  return TRUE;
}

static guint
dp_push (MpRunner *r, MpRequest *req, DpAction action, ExTensor *t)
{
  DpOp *op = g_new0 (DpOp, 1);
  op->id = r->dp_next++;
  op->req = req;
  op->action = action;
  op->t = t;
  g_queue_push_tail (&r->dp, op);
  return op->id;
}

/* Lets MPI move requests along; completes the ones at the head of the dp stream that are
 * done, and the sends that are done. */
static gboolean
poke (MpRunner *r, GError **error)
{
  while (!g_queue_is_empty (&r->dp))
    {
      DpOp *op = g_queue_peek_head (&r->dp);
      gboolean done = TRUE;
      if (op->req && !r->be->ops->test (r->be, op->req, &done, error))
        return FALSE;
      if (!done)
        break;
      op->req = NULL;
      if (!dp_complete (r, op->id, error))
        return FALSE;
    }
  for (guint i = r->sends->len; i-- > 0;)
    {
      SendOp *s = g_ptr_array_index (r->sends, i);
      gboolean done;
      if (!r->be->ops->test (r->be, s->req, &done, error))
        return FALSE;
      if (done)
        {
          r->be->ops->release (r->be, s->buf);
          g_free (s);
          g_ptr_array_remove_index_fast (r->sends, i);
        }
    }
  return TRUE;
}

/* ---- instructions ------------------------------------------------------------------ */

static gboolean
layer_in_chunk (const MpRunner *r, guint layer, guint chunk)
{
  return chunk < r->n_chunks && layer >= r->first[chunk]
         && layer < r->first[chunk] + r->count[chunk];
}

/* Waits for a receive into SLOT if one is pending: time blocked on data that had not
 * arrived goes to WAIT_PP_S (the bubble), completing one that had to PP_S. */
static gboolean
await_recv (MpRunner *r, float **slot, MpInsnTime *tm, GError **error)
{
  MpRequest *req = g_hash_table_lookup (r->recvs, slot);
  if (req == NULL)
    return TRUE;
  g_hash_table_remove (r->recvs, slot);
  double t0 = now (r);
  gboolean done;
  if (!r->be->ops->test (r->be, req, &done, error))
    return FALSE;
  if (done)
    {
      tm->pp_s += now (r) - t0;
      return TRUE;
    }
  gboolean ok = r->be->ops->wait (r->be, req, error);
  tm->wait_pp_s += now (r) - t0;
  return ok;
}

/* ZeRO-3: LAYER's weights must be gathered (the program issued the gathers earlier). */
static gboolean
await_params (MpRunner *r, guint layer, gboolean backward, MpInsnTime *tm, GError **error)
{
  ExLayer *L = &r->ex->layers[layer];
  guint upto = 0;
  for (guint i = 0; i < L->uses->len; i++)
    {
      ExTensor *t = g_ptr_array_index (L->uses, i);
      upto = MAX (upto, t->pending);
      if (r->ex->zero >= 3 && t->param == NULL)
        {
          g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                       "program error: layer %u used before its parameters were gathered",
                       layer);
          return FALSE;
        }
    }
  double t0 = now (r);
  gboolean ok = dp_complete (r, upto, error);
  tm->wait_dp_s += now (r) - t0;
  return ok;
}

/* ZeRO-2/3: the full gradients LAYER's backward adds to, new (zero) where the last
 * micro-batch's were reduced and let go. */
static gboolean
grads_ready (MpRunner *r, guint layer, GError **error)
{
  if (r->ex->zero < 2)
    return TRUE;
  ExLayer *L = &r->ex->layers[layer];
  for (guint i = 0; i < L->uses->len; i++)
    {
      ExTensor *t = g_ptr_array_index (L->uses, i);
      if (t->grad == NULL
          && (t->grad = r->be->ops->alloc (r->be, t->padded * sizeof (float),
                                           MP_MEM_GRADIENTS, error)) == NULL)
        return FALSE;
    }
  return TRUE;
}

/* ZeRO-3: a use of LAYER's gathered weights is over (after the FORWARD, or the backward).
 * With reshard_after_forward = False, and for the root FSDP unit, the forward's gather is
 * held to the backward. */
static void
release_params (MpRunner *r, guint layer, gboolean forward)
{
  ExLayer *L = &r->ex->layers[layer];
  if (r->ex->zero < 3 || (forward && (r->ex->no_reshard || L->kept)))
    return;
  for (guint i = 0; i < L->uses->len; i++)
    {
      ExTensor *t = g_ptr_array_index (L->uses, i);
      if (t->gathers > 0 && --t->gathers == 0)
        {
          r->be->ops->release (r->be, t->param);
          t->param = NULL;
        }
    }
}

static gboolean
run_compute (MpRunner *r, const MpInsn *in, MpInsnTime *tm, GError **error)
{
  MpExec *ex = r->ex;
  gboolean fwd = in->kind == MP_INSN_FORWARD;
  guint l = in->layer, mb = in->micro_batch;
  float **slot = fwd ? &ex->input[l * ex->M + mb] : &ex->dinput[(l + 1) * ex->M + mb];
  if ((fwd ? l > 0 : l + 1 < ex->n_layers) && !await_recv (r, slot, tm, error))
    return FALSE;
  if (!await_params (r, l, !fwd, tm, error) || (!fwd && !grads_ready (r, l, error)))
    return FALSE;
  ex->tp_s = ex->cp_s = ex->ep_s = 0;
  gboolean ok = fwd ? mp_exec_forward (ex, l, mb, error) : mp_exec_backward (ex, l, mb, error);
  tm->tp_s = ex->tp_s;
  tm->cp_s = ex->cp_s;
  tm->ep_s = ex->ep_s;
  release_params (r, l, fwd);
  return ok;
}

/* SEND / RECV of the activation leaving LAYER (forward) or of its gradient (backward). */
static gboolean
run_p2p (MpRunner *r, const MpInsn *in, GError **error)
{
  MpExec *ex = r->ex;
  gboolean mine = layer_in_chunk (r, in->layer, in->chunk);
  gboolean send = in->kind == MP_INSN_SEND;
  /* a send from the chunk holding LAYER, or a receive into the chunk above it, is forward */
  gboolean forward = send ? mine : !mine;
  float **table = forward ? ex->input : ex->dinput;
  float **slot = &table[(in->layer + 1) * ex->M + in->micro_batch];
  gsize bytes = mp_exec_boundary_n (ex, in->layer) * sizeof (float);
  MpRequest *req = NULL;
  if (send)
    {
      if (*slot == NULL)
        {
          g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                       "program error: send of layer %u micro-batch %u before it was computed",
                       in->layer, in->micro_batch);
          return FALSE;
        }
      if (!r->be->ops->isend (r->be, *slot, bytes, in->peer, (int) in->tag, &req, error))
        return FALSE;
      SendOp *s = g_new (SendOp, 1);
      s->req = req;
      s->buf = *slot;              /* the buffer travels with the send, freed when done */
      *slot = NULL;
      g_ptr_array_add (r->sends, s);
      return TRUE;
    }
  g_assert (*slot == NULL);
  *slot = r->be->ops->alloc (r->be, bytes, MP_MEM_ACTIVATIONS, error);
  if (*slot == NULL
      || !r->be->ops->irecv (r->be, *slot, bytes, in->peer, (int) in->tag, &req, error))
    return FALSE;
  g_hash_table_insert (r->recvs, slot, req);
  return TRUE;
}

/* The tensors of layers [layer, layer + n) on this rank, by the layers' OWNS (reductions)
 * or USES (ZeRO-3 gathers), those of the instruction's group: MoE experts' over edp, the
 * rest over dp (a program with experts reduces them in buckets of their own). */
static GPtrArray *
tensors_of (MpRunner *r, const MpInsn *in, gboolean uses)
{
  GPtrArray *out = g_ptr_array_new ();
  for (guint l = in->layer; l < in->layer + MAX (in->n_layers, 1u); l++)
    {
      ExLayer *L = &r->ex->layers[l];
      if (!L->here)
        continue;
      GPtrArray *src = uses ? L->uses : L->owns;
      for (guint i = 0; i < src->len; i++)
        {
          ExTensor *t = g_ptr_array_index (src, i);
          if (t->expert == (in->group == MP_GROUP_EDP))
            g_ptr_array_add (out, t);
        }
    }
  return out;
}

/* HSDP (fsdp17): the bucket's accumulated shards all-reduced over the replicate group,
 * each once its last reduce-scatter is in: now, or when that completes (dp_finish), so
 * that backward goes on meanwhile. */
static gboolean
run_replicate (MpRunner *r, const MpInsn *in, GError **error)
{
  g_autoptr(GPtrArray) ts = tensors_of (r, in, FALSE);
  for (guint i = 0; i < ts->len; i++)
    {
      ExTensor *t = g_ptr_array_index (ts, i);
      if (t->zero == 0 || t->expert)
        continue;
      t->replicate = TRUE;
      if (t->pending <= r->dp_done && !replicate_start (r, t, error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
run_reduce (MpRunner *r, const MpInsn *in, GError **error)
{
  MpExec *ex = r->ex;
  if (in->group == MP_GROUP_DP_REP)
    return ex->rep_group == NULL || run_replicate (r, in, error);
  g_autoptr(GPtrArray) ts = tensors_of (r, in, FALSE);
  /* ZeRO-2/3: one bucket reduced while the next fills (DeepSpeed's double-buffered IPG
   * buckets with overlap_comm): the one before this is completed first, so at most two
   * buckets of full gradients are alive, as the memory model counts (memory.c). */
  if (ex->zero >= 2 && !dp_complete (r, r->last_reduce, error))
    return FALSE;
  for (guint i = 0; i < ts->len; i++)
    {
      ExTensor *t = g_ptr_array_index (ts, i);
      MpRequest *req = NULL;
      gboolean ok;
      DpAction action = DP_DONE_NOTHING;
      if (ex->zero == 0)
        ok = r->be->ops->iall_reduce (r->be, mp_exec_tensor_group (ex, t), t->grad, t->n, &req, error);
      else if (ex->zero < 2)
        ok = r->be->ops->ireduce_scatter (r->be, mp_exec_tensor_group (ex, t), t->grad, t->gshard, t->shard_n,
                                          &req, error);
      else
        {
          t->rs_tmp = r->be->ops->alloc (r->be, t->shard_n * sizeof (float), MP_MEM_GRADIENTS,
                                         error);
          ok = t->rs_tmp != NULL
               && r->be->ops->ireduce_scatter (r->be, mp_exec_tensor_group (ex, t), t->grad, t->rs_tmp,
                                               t->shard_n, &req, error);
          action = DP_DONE_ACCUMULATE;
        }
      if (!ok)
        return FALSE;
      t->pending = r->last_reduce = dp_push (r, req, action, t);
    }
  return TRUE;
}

static gboolean
run_gather (MpRunner *r, const MpInsn *in, GError **error)
{
  MpExec *ex = r->ex;
  gboolean zero3 = ex->zero >= 3;
  g_autoptr(GPtrArray) ts = tensors_of (r, in, zero3);
  for (guint i = 0; i < ts->len; i++)
    {
      ExTensor *t = g_ptr_array_index (ts, i);
      if (zero3 && t->gathers++ > 0)
        continue;                  /* already gathered for another use */
      if (zero3)
        {
          /* not weights held but a transient gather, as the cost model counts it */
          t->param = r->be->ops->alloc (r->be, t->padded * sizeof (float), MP_MEM_OTHER, error);
          if (t->param == NULL)
            return FALSE;
          r->be->ops->copy (r->be, t->param + t->dp_rank * t->shard_n, t->pshard,
                            t->shard_n * sizeof (float));
        }
      MpRequest *req = NULL;
      if (!r->be->ops->iall_gather (r->be, mp_exec_tensor_group (ex, t), t->param, t->shard_n, &req, error))
        return FALSE;
      t->pending = dp_push (r, req, DP_DONE_NOTHING, t);
    }
  return TRUE;
}

/* The tied word embedding's reduced gradient, summed between the first and last stage.
 * The two ends reach it at different times (the last stage finishes its backward first),
 * so a one-float handshake comes first: waiting there is waiting on the other stage
 * (bubble, TM's wait_pp_s), and the reduction after it is what dp_comm counts, as the
 * cost model does. */
static gboolean
run_reduce_tied (MpRunner *r, const MpInsn *in, MpInsnTime *tm, GError **error)
{
  MpExec *ex = r->ex;
  if (!dp_complete (r, G_MAXUINT, error))
    return FALSE;
  ExLayer *L = &ex->layers[in->layer];
  ExTensor *t = NULL;
  for (guint i = 0; i < L->owns->len && t == NULL; i++)
    {
      ExTensor *c = g_ptr_array_index (L->owns, i);
      if (c->tied_copy || g_str_equal (c->name, "wte"))
        t = c;
    }
  if (t == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "program error: REDUCE_TIED on layer %u, which holds no word embedding",
                   in->layer);
      return FALSE;
    }
  float *g = ex->zero >= 1 ? t->gshard : t->grad;
  gsize n = ex->zero >= 1 ? t->shard_n : t->n;
  float ready = 1;
  double t0 = now (r);
  if (!r->be->ops->all_reduce (r->be, ex->ends_group, &ready, 1, MP_REDUCE_SUM, error))
    return FALSE;
  tm->wait_pp_s += now (r) - t0;
  return r->be->ops->all_reduce (r->be, ex->ends_group, g, n, MP_REDUCE_SUM, error);
}

static gboolean
run_insn (MpRunner *r, const MpInsn *in, MpInsnTime *tm, GError **error)
{
  switch (in->kind)
    {
    case MP_INSN_FORWARD:
    case MP_INSN_BACKWARD:
      return run_compute (r, in, tm, error);
    case MP_INSN_SEND:
    case MP_INSN_RECV:
      return run_p2p (r, in, error);
    case MP_INSN_REDUCE_GRADS:
      return run_reduce (r, in, error);
    case MP_INSN_GATHER_PARAMS:
      return run_gather (r, in, error);
    case MP_INSN_REDUCE_TIED:
      return run_reduce_tied (r, in, tm, error);
    case MP_INSN_WAIT:
      return in->stream == MP_STREAM_DP ? dp_complete (r, G_MAXUINT, error) : TRUE;
    case MP_INSN_OPTIMIZER:
      return mp_exec_optimizer (r->ex, &r->grad_norm, error);
    default:
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "unknown instruction kind %d", in->kind);
      return FALSE;
    }
}

/* Everything still in flight at the end of a step: the dp stream, and the sends. */
static gboolean
drain (MpRunner *r, GError **error)
{
  if (!dp_complete (r, G_MAXUINT, error))
    return FALSE;
  while (r->sends->len > 0)
    {
      SendOp *s = g_ptr_array_steal_index (r->sends, r->sends->len - 1);
      gboolean ok = r->be->ops->wait (r->be, s->req, error);
      r->be->ops->release (r->be, s->buf);
      g_free (s);
      if (!ok)
        return FALSE;
    }
  if (g_hash_table_size (r->recvs) > 0)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "program error: %u receive(s) never read", g_hash_table_size (r->recvs));
      return FALSE;
    }
  return TRUE;
}

gboolean
mp_runner_step (MpRunner *r, guint step, double *t_start, double *t_end, GError **error)
{
  mp_exec_step_begin (r->ex, step);
  memset (r->times, 0, r->prog->n_insns * sizeof (MpInsnTime));
  *t_start = now (r);
  for (guint i = 0; i < r->prog->n_insns; i++)
    {
      MpInsnTime *tm = &r->times[i];
      mp_watchdog_insn (r->watchdog, step, i, &r->prog->insns[i]);
      while (r->stall_at == (gint) i)
        g_usleep (G_USEC_PER_SEC);     /* the stalled rank's test hook: never returns */
      tm->t0 = now (r);
      if (!run_insn (r, &r->prog->insns[i], tm, error) || !poke (r, error))
        {
          g_prefix_error (error, "rank %d, instruction %u (%s of layer %u, micro-batch %u): ",
                          r->be->rank, i, mp_insn_kind_name (r->prog->insns[i].kind),
                          r->prog->insns[i].layer, r->prog->insns[i].micro_batch);
          return FALSE;
        }
      tm->t1 = now (r);
    }
  mp_watchdog_enter (r->watchdog, step, "the end of the step (sends and reductions in "
                     "flight)");
  gboolean ok = drain (r, error);
  *t_end = now (r);
  return ok;
}
