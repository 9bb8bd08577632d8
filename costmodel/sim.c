/* sim.c - the discrete-event simulator: one training step of a set of rank programs,
 * instruction by instruction, on per-rank streams (semantics in costmodel.h).
 *
 * Setup walks each program once: a node per instruction with its duration (from the cost
 * function), the stream it runs on and at most two same-rank instructions that must finish
 * first; SENDs are queued per pair of ranks, and each RECV then takes its SEND (in order
 * while the tags agree, by tag when they do not: O(n) in the usual case); REDUCE_TIEDs form
 * rings of partners. The run is driven by the event queue (eventq.h): starting an
 * instruction schedules its completion; a completion frees its stream and retries the heads
 * of its rank's streams (a SEND also the receiver's pp stream). When the queue runs dry,
 * every instruction must have run, or the programs deadlock and the stuck heads are
 * reported. The breakdown and the per-instruction slices are read off the nodes afterwards,
 * in one sequential pass, which keeps the event loop's memory traffic to one small node per
 * instruction (a 262k-instruction step runs in tens of milliseconds).
 *
 * Not here: what instructions cost (sim-cost.c, or a caller's function), how programs are
 * built (planner/). Units: seconds. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/costmodel-private.h"
#include "costmodel/eventq.h"
#include "common/error.h"

#include <math.h>
#include <string.h>

#define NONE G_MAXUINT

/* One instruction in the run: 40 bytes, the event loop's whole working set. */
typedef struct {
  double dur;
  double start, end;        /* -1 until known; RECV, REDUCE_TIED: start = when reached */
  guint dep;                /* an instruction of another stream of this rank that must
                             * finish first, or NONE */
  guint link;               /* FORWARD/BACKWARD: the GATHER_PARAMS it waits for (ZeRO-3);
                             * SEND, RECV: the matching instruction of the peer;
                             * REDUCE_TIED: the next partner's; else NONE */
  guint peer_rank;          /* SEND, RECV: the peer's rank; REDUCE_TIED: the next partner's */
  guint8 kind, stream;      /* stream: the one it runs on (WAIT: compute) */
  guint8 posted;            /* RECV, REDUCE_TIED: reached, local dependencies met */
} Node;

/* The same-rank instruction a FORWARD/BACKWARD also waits for (its ZeRO-3 gather). */
static inline guint
gather_dep (const Node *nd)
{
  return nd->kind == MP_INSN_FORWARD || nd->kind == MP_INSN_BACKWARD ? nd->link : NONE;
}

typedef struct {
  const MpProgram *prog;
  Node *nodes;
  double *comm;                /* FORWARD/BACKWARD: the collectives inside */
  double *ep;                  /* ... of them, the experts' dispatch (moe14) */
  double *cp;                  /* ... of them, the context-parallel ring (cp17) */
  guint *order[MP_STREAM_N];   /* each stream's instructions, program order */
  guint n_order[MP_STREAM_N];
  guint next[MP_STREAM_N];     /* the stream's head, an index into order[] */
  gboolean busy[MP_STREAM_N];
  guint done;
  GPtrArray *channels;         /* setup: Channel*, the SENDs to each peer */
  GArray *recvs;               /* setup: Sent, the RECVs (instruction and tag) */
  GArray *tied;                /* setup: instruction indices of REDUCE_TIED */
} Rank;

typedef struct {
  Rank *ranks;
  guint n;
  CmEventQueue *queue;
} Sim;

const char *
mp_sim_wait_name (MpSimWait wait)
{
  static const char *const names[] = { "none", "pp", "dp" };
  return (guint) wait < G_N_ELEMENTS (names) ? names[wait] : "?";
}

void
mp_sim_result_free (MpSimResult *result)
{
  if (result == NULL)
    return;
  for (guint r = 0; r < result->n_ranks; r++)
    g_free (result->ranks[r].slices);
  g_free (result->ranks);
  g_free (result);
}

/* WAIT runs on the compute stream; its `stream` is the one it waits for. */
static inline MpStream
stream_of (const MpInsn *insn)
{
  return insn->kind == MP_INSN_WAIT ? MP_STREAM_COMPUTE : insn->stream;
}

static gboolean
fail (GError **error, const Rank *rk, guint i, const char *what)
{
  const MpInsn *insn = &rk->prog->insns[i];
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "rank %u, instruction %u (%s, micro-batch %u, "
               "chunk %u): %s", rk->prog->rank, i, mp_insn_kind_name (insn->kind),
               insn->micro_batch, insn->chunk, what);
  return FALSE;
}

/* ---- matching sends and receives -------------------------------------------------------- */

/* A send's or receive's instruction and tag (kept together: matching reads no
 * instruction, which would be a cache miss each). */
typedef struct {
  guint insn, tag;
} Sent;

/* The sends from one rank to another, in program order. */
typedef struct {
  guint dst;
  GArray *sends;               /* Sent */
  guint cursor;                /* next to match in order */
  GHashTable *by_tag;          /* tag -> index + 1 of the unmatched, after a disagreement */
} Channel;

static void
channel_free (gpointer p)
{
  Channel *ch = p;
  g_array_unref (ch->sends);
  if (ch->by_tag)
    g_hash_table_unref (ch->by_tag);
  g_free (ch);
}

static Channel *
channel_to (Rank *src, guint dst, gboolean create)
{
  for (guint i = 0; i < src->channels->len; i++)
    {
      Channel *ch = g_ptr_array_index (src->channels, i);
      if (ch->dst == dst)
        return ch;
    }
  if (!create)
    return NULL;
  Channel *ch = g_new0 (Channel, 1);
  ch->dst = dst;
  ch->sends = g_array_new (FALSE, FALSE, sizeof (Sent));
  g_ptr_array_add (src->channels, ch);
  return ch;
}

/* The unmatched send of CH that carries TAG, or NONE. */
static guint
channel_take (Channel *ch, guint tag)
{
  if (ch->by_tag == NULL && ch->cursor < ch->sends->len)
    {
      const Sent *sent = &g_array_index (ch->sends, Sent, ch->cursor);
      if (sent->tag == tag)
        {
          ch->cursor++;
          return sent->insn;
        }
    }
  if (ch->by_tag == NULL)
    {
      ch->by_tag = g_hash_table_new (NULL, NULL);
      for (guint k = ch->cursor; k < ch->sends->len; k++)
        {
          const Sent *sent = &g_array_index (ch->sends, Sent, k);
          g_hash_table_insert (ch->by_tag, GUINT_TO_POINTER (sent->tag),
                               GUINT_TO_POINTER (sent->insn + 1));
        }
    }
  guint i = GPOINTER_TO_UINT (g_hash_table_lookup (ch->by_tag, GUINT_TO_POINTER (tag)));
  if (i == 0)
    return NONE;
  g_hash_table_remove (ch->by_tag, GUINT_TO_POINTER (tag));
  return i - 1;
}

static gboolean
match_p2p (Sim *sim, GError **error)
{
  for (guint r = 0; r < sim->n; r++)
    {
      Rank *rk = &sim->ranks[r];
      for (guint k = 0; k < rk->recvs->len; k++)
        {
          const Sent *recv = &g_array_index (rk->recvs, Sent, k);
          guint i = recv->insn, q = rk->nodes[i].peer_rank;
          Channel *ch = channel_to (&sim->ranks[q], r, FALSE);
          guint s = ch ? channel_take (ch, recv->tag) : NONE;
          if (s == NONE)
            return fail (error, rk, i, "no send from its peer carries its tag");
          rk->nodes[i].link = s;
          sim->ranks[q].nodes[s].link = i;
        }
    }
  for (guint r = 0; r < sim->n; r++)
    {
      Rank *rk = &sim->ranks[r];
      for (guint c = 0; c < rk->channels->len; c++)
        {
          Channel *ch = g_ptr_array_index (rk->channels, c);
          for (guint k = 0; k < ch->sends->len; k++)
            {
              guint i = g_array_index (ch->sends, Sent, k).insn;
              if (rk->nodes[i].link == NONE)
                return fail (error, rk, i, "no receive matches it");
            }
        }
    }
  return TRUE;
}

/* The k-th REDUCE_TIED of every rank that has any forms the k-th collective: a ring. */
static gboolean
match_tied (Sim *sim, GError **error)
{
  g_autoptr(GArray) owners = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint r = 0; r < sim->n; r++)
    if (sim->ranks[r].tied->len > 0)
      g_array_append_val (owners, r);
  for (guint k = 0; k < owners->len; k++)
    {
      Rank *rk = &sim->ranks[g_array_index (owners, guint, k)];
      guint r1 = g_array_index (owners, guint, (k + 1) % owners->len);
      GArray *next = sim->ranks[r1].tied;
      if (rk->tied->len != next->len)
        {
          g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "ranks %u and %u reduce tied "
                       "embeddings %u and %u times", rk->prog->rank, sim->ranks[r1].prog->rank,
                       rk->tied->len, next->len);
          return FALSE;
        }
      for (guint j = 0; j < rk->tied->len; j++)
        {
          Node *nd = &rk->nodes[g_array_index (rk->tied, guint, j)];
          nd->peer_rank = r1;
          nd->link = g_array_index (next, guint, j);
        }
    }
  return TRUE;
}

/* ---- setup ------------------------------------------------------------------------------ */

typedef struct {
  guint *index_of;             /* world rank -> program index, NONE */
  guint max_rank;
  MpSimCostFunc cost;
  gpointer data;
} Setup;

/* The dependencies of instruction I (rules in costmodel.h). LAST_ON: the last instruction
 * so far of each stream; GATHER_OF: the last GATHER_PARAMS covering each layer. */
static void
link_node (Node *nd, const MpInsn *insn, const guint *last_on, GArray *gather_of)
{
  nd->dep = nd->link = NONE;
  if (insn->kind == MP_INSN_WAIT)
    nd->dep = last_on[insn->stream];
  else if (nd->stream == MP_STREAM_COMPUTE)
    {
      nd->dep = last_on[MP_STREAM_PP];
      if ((insn->kind == MP_INSN_FORWARD || insn->kind == MP_INSN_BACKWARD)
          && insn->layer < gather_of->len)
        nd->link = g_array_index (gather_of, guint, insn->layer);
    }
  else
    nd->dep = last_on[MP_STREAM_COMPUTE];
}

static void
note_gather (GArray *gather_of, const MpInsn *insn, guint i)
{
  guint end = insn->layer + MAX (insn->n_layers, 1u);
  guint none = NONE;
  while (gather_of->len < end)
    g_array_append_val (gather_of, none);
  for (guint l = insn->layer; l < end; l++)
    g_array_index (gather_of, guint, l) = i;
}

/* The peer program index of I's SEND or RECV, or NONE with ERROR set. */
static guint
peer_of (const Setup *su, const Rank *rk, guint i, GError **error)
{
  gint peer = rk->prog->insns[i].peer;
  if (peer < 0 || (guint) peer > su->max_rank || su->index_of[peer] == NONE)
    {
      g_autofree char *msg = g_strdup_printf ("peer rank %d has no program", peer);
      fail (error, rk, i, msg);
      return NONE;
    }
  return su->index_of[peer];
}

/* One pass over rank R's program: nodes, stream lists, sends and receives, durations. */
static gboolean
prepare_rank (Sim *sim, const Setup *su, guint r, GError **error)
{
  Rank *rk = &sim->ranks[r];
  const MpProgram *p = rk->prog;
  guint n = p->n_insns;
  guint last_on[MP_STREAM_N] = { NONE, NONE, NONE };
  g_autoptr(GArray) gather_of = g_array_new (FALSE, FALSE, sizeof (guint));
  rk->nodes = g_new (Node, MAX (n, 1u));
  rk->comm = g_new0 (double, MAX (n, 1u));
  rk->ep = g_new0 (double, MAX (n, 1u));
  rk->cp = g_new0 (double, MAX (n, 1u));
  rk->order[0] = g_new (guint, (gsize) MP_STREAM_N * MAX (n, 1u));
  for (int s = 1; s < MP_STREAM_N; s++)
    rk->order[s] = rk->order[0] + (gsize) s * n;
  for (guint i = 0; i < n; i++)
    {
      const MpInsn *insn = &p->insns[i];
      Node *nd = &rk->nodes[i];
      if ((guint) insn->kind >= MP_INSN_N || (guint) insn->stream >= MP_STREAM_N)
        return fail (error, rk, i, "unknown instruction kind or stream");
      *nd = (Node) { .start = -1, .end = -1, .peer_rank = NONE,
                     .kind = (guint8) insn->kind, .stream = (guint8) stream_of (insn) };
      link_node (nd, insn, last_on, gather_of);
      if (insn->kind == MP_INSN_GATHER_PARAMS)
        note_gather (gather_of, insn, i);
      last_on[nd->stream] = i;
      rk->order[nd->stream][rk->n_order[nd->stream]++] = i;
      const MpProgram *peer = NULL;
      if (insn->kind == MP_INSN_SEND || insn->kind == MP_INSN_RECV)
        {
          if ((nd->peer_rank = peer_of (su, rk, i, error)) == NONE)
            return FALSE;
          peer = sim->ranks[nd->peer_rank].prog;
          Sent sent = { i, insn->tag };
          if (insn->kind == MP_INSN_SEND)
            g_array_append_val (channel_to (rk, nd->peer_rank, TRUE)->sends, sent);
          else
            g_array_append_val (rk->recvs, sent);
        }
      else if (insn->kind == MP_INSN_REDUCE_TIED)
        g_array_append_val (rk->tied, i);
      MpSimCost c = { 0, 0, 0, 0 };
      if (insn->kind != MP_INSN_RECV && insn->kind != MP_INSN_WAIT)
        su->cost (p, insn, peer, &c, su->data);
      if (!isfinite (c.time_s) || c.time_s < 0 || !isfinite (c.comm_s) || c.comm_s < 0)
        return fail (error, rk, i, "the cost model gives it no valid duration");
      nd->dur = c.time_s;
      rk->comm[i] = MIN (c.comm_s, c.time_s);
      rk->ep[i] = CLAMP (c.ep_s, 0, rk->comm[i]);
      rk->cp[i] = CLAMP (c.cp_s, 0, rk->comm[i] - rk->ep[i]);
    }
  return TRUE;
}

static gboolean
setup (Sim *sim, MpProgram *const *programs, MpSimCostFunc cost, gpointer data,
       GError **error)
{
  Setup su = { NULL, 0, cost, data };
  for (guint r = 0; r < sim->n; r++)
    su.max_rank = MAX (su.max_rank, programs[r]->rank);
  g_autofree guint *index_of = su.index_of = g_new (guint, su.max_rank + 1);
  for (guint k = 0; k <= su.max_rank; k++)
    index_of[k] = NONE;
  for (guint r = 0; r < sim->n; r++)
    {
      Rank *rk = &sim->ranks[r];
      rk->prog = programs[r];
      rk->channels = g_ptr_array_new_with_free_func (channel_free);
      rk->recvs = g_array_new (FALSE, FALSE, sizeof (Sent));
      rk->tied = g_array_new (FALSE, FALSE, sizeof (guint));
      if (index_of[rk->prog->rank] != NONE)
        {
          g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "two programs for rank %u",
                       rk->prog->rank);
          return FALSE;
        }
      index_of[rk->prog->rank] = r;
    }
  for (guint r = 0; r < sim->n; r++)
    if (!prepare_rank (sim, &su, r, error))
      return FALSE;
  return match_p2p (sim, error) && match_tied (sim, error);
}

static void
sim_clear (Sim *sim)
{
  for (guint r = 0; r < sim->n; r++)
    {
      Rank *rk = &sim->ranks[r];
      g_free (rk->nodes);
      g_free (rk->comm);
      g_free (rk->ep);
      g_free (rk->cp);
      g_free (rk->order[0]);
      if (rk->channels)
        g_ptr_array_unref (rk->channels);
      if (rk->recvs)
        g_array_unref (rk->recvs);
      if (rk->tied)
        g_array_unref (rk->tied);
    }
  g_free (sim->ranks);
  cm_eventq_free (sim->queue);
}

/* ---- the run ---------------------------------------------------------------------------- */

static void complete (gpointer data, guint r, guint i);

static inline void
start (Sim *sim, guint r, guint i, double now)
{
  Rank *rk = &sim->ranks[r];
  Node *nd = &rk->nodes[i];
  rk->busy[nd->stream] = TRUE;
  if (nd->kind != MP_INSN_RECV)
    nd->start = now;
  cm_eventq_schedule (sim->queue, now + nd->dur, complete, sim, r, i);
}

/* A REDUCE_TIED starts when every partner has reached its own: then all start at once. */
static gboolean
tied_ready (const Sim *sim, guint r, guint i)
{
  guint pr = sim->ranks[r].nodes[i].peer_rank, pi = sim->ranks[r].nodes[i].link;
  while (pr != r || pi != i)
    {
      const Node *nd = &sim->ranks[pr].nodes[pi];
      if (!nd->posted)
        return FALSE;
      pr = nd->peer_rank;
      pi = nd->link;
    }
  return TRUE;
}

static void
start_tied (Sim *sim, guint r, guint i, double now)
{
  guint pr = r, pi = i;
  do
    {
      const Node *nd = &sim->ranks[pr].nodes[pi];
      guint nr = nd->peer_rank, ni = nd->link;
      start (sim, pr, pi, now);
      pr = nr;
      pi = ni;
    }
  while (pr != r || pi != i);
}

/* Starts the head of stream S of rank R if it can start now. */
static void
try_start (Sim *sim, guint r, MpStream s)
{
  Rank *rk = &sim->ranks[r];
  if (rk->busy[s] || rk->next[s] == rk->n_order[s])
    return;
  guint i = rk->order[s][rk->next[s]];
  Node *nd = &rk->nodes[i];
  if (nd->dep != NONE && rk->nodes[nd->dep].end < 0)
    return;
  guint gather = gather_dep (nd);
  if (gather != NONE && rk->nodes[gather].end < 0)
    return;
  double now = cm_eventq_now (sim->queue);
  if (nd->kind == MP_INSN_RECV || nd->kind == MP_INSN_REDUCE_TIED)
    {
      if (!nd->posted)
        {
          nd->posted = TRUE;
          nd->start = now;
        }
      if (nd->kind == MP_INSN_REDUCE_TIED)
        {
          if (tied_ready (sim, r, i))
            start_tied (sim, r, i, now);
          return;
        }
      if (sim->ranks[nd->peer_rank].nodes[nd->link].end < 0)
        return;
    }
  start (sim, r, i, now);
}

static void
complete (gpointer data, guint r, guint i)
{
  Sim *sim = data;
  Rank *rk = &sim->ranks[r];
  Node *nd = &rk->nodes[i];
  nd->end = cm_eventq_now (sim->queue);
  rk->busy[nd->stream] = FALSE;
  guint next = ++rk->next[nd->stream];
  rk->done++;
  /* The instruction after the new head will be needed a few hundred events from now:
   * fetching its node early keeps the event loop off main memory's latency. */
  if (next + 1 < rk->n_order[nd->stream])
    __builtin_prefetch (&rk->nodes[rk->order[nd->stream][next + 1]]);
  for (int s = 0; s < MP_STREAM_N; s++)
    try_start (sim, r, (MpStream) s);
  if (nd->kind == MP_INSN_SEND)
    try_start (sim, nd->peer_rank, MP_STREAM_PP);
}

/* The stuck heads of every stream, when the queue ran dry before the programs ended. */
static void
report_deadlock (const Sim *sim, GError **error)
{
  g_autoptr(GString) msg = g_string_new ("the programs deadlock:");
  guint shown = 0;
  for (guint r = 0; r < sim->n && shown < 6; r++)
    for (int s = 0; s < MP_STREAM_N && shown < 6; s++)
      {
        const Rank *rk = &sim->ranks[r];
        if (rk->next[s] == rk->n_order[s])
          continue;
        guint i = rk->order[s][rk->next[s]];
        const MpInsn *insn = &rk->prog->insns[i];
        g_string_append_printf (msg, "\n  rank %u, %s stream: stuck at instruction %u (%s, "
                                "micro-batch %u, chunk %u", rk->prog->rank,
                                mp_stream_name ((MpStream) s), i, mp_insn_kind_name (insn->kind),
                                insn->micro_batch, insn->chunk);
        if (insn->kind == MP_INSN_SEND || insn->kind == MP_INSN_RECV)
          g_string_append_printf (msg, ", peer %d, tag %u", insn->peer, insn->tag);
        g_string_append (msg, ")");
        shown++;
      }
  g_set_error_literal (error, MP_ERROR, MP_ERROR_INPUT, msg->str);
}

/* ---- reading the result off the nodes ------------------------------------------------- */

/* Why compute instruction I started only at its start, its stream free since FROM: the
 * dependency that finished last; before the transfer it waited on began, the other rank
 * was still working (a bubble). Fills *COMM_FROM and returns the wait. */
static MpSimWait
idle_cause (const Sim *sim, const Rank *rk, guint i, double from, double *comm_from)
{
  const Node *nd = &rk->nodes[i];
  *comm_from = nd->start;
  guint bind = nd->dep, gather = gather_dep (nd);
  if (gather != NONE && (bind == NONE || rk->nodes[gather].end > rk->nodes[bind].end))
    bind = gather;
  if (!(nd->start > from) || bind == NONE || rk->nodes[bind].end < nd->start)
    return MP_SIM_WAIT_NONE;
  const Node *b = &rk->nodes[bind];
  if (b->stream == MP_STREAM_DP)
    {
      *comm_from = from;
      return MP_SIM_WAIT_DP;
    }
  if (b->stream != MP_STREAM_PP)
    return MP_SIM_WAIT_NONE;
  double began = b->start;
  if (b->kind == MP_INSN_RECV)
    began = sim->ranks[b->peer_rank].nodes[b->link].start;
  *comm_from = CLAMP (began, from, nd->start);
  return MP_SIM_WAIT_PP;
}

/* Adds compute instruction I's own time to T; EP of its COMM is expert dispatch, CP the
 * context-parallel ring. */
static void
account (MpStepTime *t, const Node *nd, double comm, double ep, double cp)
{
  switch (nd->kind)
    {
    case MP_INSN_FORWARD:
    case MP_INSN_BACKWARD:
      t->t[MP_PHASE_COMPUTE] += nd->dur - comm;
      t->t[MP_PHASE_TP] += comm - ep - cp;
      t->t[MP_PHASE_EP] += ep;
      t->t[MP_PHASE_CP] += cp;
      break;
    case MP_INSN_OPTIMIZER:
      t->t[MP_PHASE_OPTIMIZER] += nd->dur;
      break;
    case MP_INSN_SEND:
    case MP_INSN_RECV:
      t->t[MP_PHASE_PP] += nd->dur;
      break;
    default:
      t->t[MP_PHASE_DP] += nd->dur;
      break;
    }
}

/* The compute stream's timeline over [0, STEP_S] (its gaps by cause, then after its last
 * compute: its own dp, then pp, work, then waiting for the slowest rank), busy times and,
 * with SLICES, every instruction's slice. */
static void
finish_rank (const Sim *sim, const Rank *rk, double step_s, MpSimRank *out, gboolean slices)
{
  const MpProgram *p = rk->prog;
  double end[MP_STREAM_N] = { 0 };
  out->rank = p->rank;
  out->stage = p->stage;
  if (slices)
    out->slices = g_new0 (MpSimSlice, MAX (p->n_insns, 1u));
  for (guint i = 0; i < p->n_insns; i++)
    {
      const Node *nd = &rk->nodes[i];
      out->busy_s[nd->stream] += nd->dur;
      end[nd->stream] = MAX (end[nd->stream], nd->end);
      if (slices)
        out->slices[i] = (MpSimSlice) {
          .start_s = nd->start, .end_s = nd->end, .comm_s = rk->comm[i],
          .idle_from_s = nd->start, .comm_from_s = nd->start, .wait = MP_SIM_WAIT_NONE,
          .peer_insn = nd->kind == MP_INSN_SEND || nd->kind == MP_INSN_RECV ? nd->link
                                                                             : NONE,
        };
    }
  MpStepTime *t = &out->time;
  double from = 0;
  for (guint k = 0; k < rk->n_order[MP_STREAM_COMPUTE]; k++)
    {
      guint i = rk->order[MP_STREAM_COMPUTE][k];
      const Node *nd = &rk->nodes[i];
      double comm_from;
      MpSimWait wait = idle_cause (sim, rk, i, from, &comm_from);
      double idle = MAX (nd->start - from, 0);
      double waited = wait == MP_SIM_WAIT_NONE ? 0 : nd->start - comm_from;
      t->t[MP_PHASE_BUBBLE] += idle - waited;
      if (wait == MP_SIM_WAIT_PP)
        t->t[MP_PHASE_PP] += waited;
      else if (wait == MP_SIM_WAIT_DP)
        t->t[MP_PHASE_DP] += waited;
      account (t, nd, rk->comm[i], rk->ep[i], rk->cp[i]);
      if (slices)
        {
          MpSimSlice *sl = &out->slices[i];
          sl->idle_from_s = MIN (from, nd->start);
          sl->comm_from_s = wait == MP_SIM_WAIT_NONE ? nd->start : comm_from;
          sl->wait = wait;
        }
      from = nd->end;
    }
  out->end_s = MAX (end[MP_STREAM_COMPUTE], MAX (end[MP_STREAM_PP], end[MP_STREAM_DP]));
  double dp = CLAMP (end[MP_STREAM_DP] - from, 0, step_s - from);
  double pp = CLAMP (end[MP_STREAM_PP] - from - dp, 0, step_s - from - dp);
  t->t[MP_PHASE_DP] += dp;
  t->t[MP_PHASE_PP] += pp;
  t->t[MP_PHASE_BUBBLE] += step_s - from - dp - pp;
}

static MpSimResult *
finish (const Sim *sim, gboolean slices)
{
  MpSimResult *res = g_new0 (MpSimResult, 1);
  res->n_ranks = sim->n;
  res->ranks = g_new0 (MpSimRank, sim->n);
  for (guint r = 0; r < sim->n; r++)
    {
      const Rank *rk = &sim->ranks[r];
      res->n_insns += rk->prog->n_insns;
      for (guint i = 0; i < rk->prog->n_insns; i++)
        res->step_s = MAX (res->step_s, rk->nodes[i].end);
    }
  for (guint r = 0; r < sim->n; r++)
    finish_rank (sim, &sim->ranks[r], res->step_s, &res->ranks[r], slices);
  for (guint r = 1; r < sim->n; r++)
    {
      const MpSimRank *a = &res->ranks[r], *b = &res->ranks[res->critical];
      if (a->end_s > b->end_s
          || (a->end_s == b->end_s && a->busy_s[MP_STREAM_COMPUTE] > b->busy_s[MP_STREAM_COMPUTE]))
        res->critical = r;
    }
  res->time = res->ranks[res->critical].time;
  res->n_events = cm_eventq_count (sim->queue);
  return res;
}

MpSimResult *
mp_simulate (const MpCostContext *ctx, const MpParallelConfig *cfg, MpProgram *const *programs,
             guint n, const MpSimOptions *opts, GError **error)
{
  g_return_val_if_fail (programs != NULL && n > 0, NULL);
  g_return_val_if_fail ((opts && opts->cost) || (ctx && cfg), NULL);
  g_autoptr(CmSimCost) model = NULL;
  MpSimCostFunc cost = opts ? opts->cost : NULL;
  gpointer data = opts ? opts->cost_data : NULL;
  if (cost == NULL)
    {
      model = cm_sim_cost_new (ctx, cfg);
      cost = cm_sim_cost;
      data = model;
    }
  Sim sim = { g_new0 (Rank, n), n, cm_eventq_new () };
  MpSimResult *res = NULL;
  if (setup (&sim, programs, cost, data, error))
    {
      for (guint r = 0; r < n; r++)
        for (int s = 0; s < MP_STREAM_N; s++)
          try_start (&sim, r, (MpStream) s);
      while (!cm_eventq_finished (sim.queue))
        cm_eventq_proceed (sim.queue);
      gboolean all = TRUE;
      for (guint r = 0; r < n; r++)
        all &= sim.ranks[r].done == sim.ranks[r].prog->n_insns;
      if (all)
        res = finish (&sim, opts && opts->slices);
      else
        report_deadlock (&sim, error);
    }
  sim_clear (&sim);
  return res;
}
