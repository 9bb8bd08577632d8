/* trace.c - the predicted timeline of a step as Chrome Trace Event JSON (report.h).
 *
 * Every time is rounded once to an integer nanosecond and written as microseconds, so a
 * parent slice ("F mb3 chunk0") and its children (one per layer) share exact bounds after
 * Perfetto converts back (llround(ts * 1000)): children nest, never overlap. The compute
 * thread also shows why it idled (bubble, or waiting on pp / dp) as slices, so idle time
 * is visible and the thread's slices tile [0, step]. TP collectives run inside F/B; their
 * total per layer is drawn on the TP thread at the end of the layer (the cost model knows
 * how long they take, not where inside the layer they fall). */
#define G_LOG_DOMAIN "mpplan-report"
#include "config.h"
#include "report/report.h"
#include "common/error.h"
#include "common/jsonread.h"
#include "common/output.h"

#include <math.h>

#define NONE G_MAXUINT

typedef struct {
  JsonBuilder *b;
  MpProgram *const *programs;
  guint n;
  const MpSimResult *sim;
} Trace;

static gint64
ns_of (double s)
{
  return llround (s * 1e9);
}

static MpStream
stream_of (const MpInsn *insn)
{
  return insn->kind == MP_INSN_WAIT ? MP_STREAM_COMPUTE : insn->stream;
}

/* ---- events ------------------------------------------------------------------------ */

static void
metadata (JsonBuilder *b, const char *name, guint pid, gint tid, const char *key,
          const char *text, gint64 value)
{
  json_builder_begin_object (b);
  mp_json_add_string (b, "name", name);
  mp_json_add_string (b, "ph", "M");
  mp_json_add_int (b, "pid", pid);
  if (tid >= 0)
    mp_json_add_int (b, "tid", tid);
  json_builder_set_member_name (b, "args");
  json_builder_begin_object (b);
  if (text)
    mp_json_add_string (b, key, text);
  else
    mp_json_add_int (b, key, value);
  json_builder_end_object (b);
  json_builder_end_object (b);
}

/* Opens an X event over [START, END] ns and its "args" object; close with x_end. */
static void
x_begin (JsonBuilder *b, const char *name, const char *cat, guint pid, guint tid, gint64 start,
         gint64 end)
{
  json_builder_begin_object (b);
  mp_json_add_string (b, "name", name);
  mp_json_add_string (b, "cat", cat);
  mp_json_add_string (b, "ph", "X");
  mp_json_add_double (b, "ts", start / 1000.0);
  mp_json_add_double (b, "dur", (end - start) / 1000.0);
  mp_json_add_int (b, "pid", pid);
  mp_json_add_int (b, "tid", tid);
  json_builder_set_member_name (b, "args");
  json_builder_begin_object (b);
}

static void
x_end (JsonBuilder *b)
{
  json_builder_end_object (b);
  json_builder_end_object (b);
}

/* A slice without arguments of its own, skipped when empty. */
static void
x_plain (JsonBuilder *b, const char *name, const char *cat, guint pid, guint tid, double start,
         double end)
{
  gint64 s = ns_of (start), e = ns_of (end);
  if (e <= s)
    return;
  x_begin (b, name, cat, pid, tid, s, e);
  x_end (b);
}

static void
flow (JsonBuilder *b, const char *ph, guint64 id, guint pid, gint64 ts)
{
  json_builder_begin_object (b);
  mp_json_add_string (b, "name", "p2p");
  mp_json_add_string (b, "cat", "pp");
  mp_json_add_string (b, "ph", ph);
  mp_json_add_int (b, "id", (gint64) id);
  mp_json_add_double (b, "ts", ts / 1000.0);
  mp_json_add_int (b, "pid", pid);
  mp_json_add_int (b, "tid", MP_TRACE_TID_PP);
  if (ph[0] == 'f')
    mp_json_add_string (b, "bp", "e");
  json_builder_end_object (b);
}

static void
process_metadata (JsonBuilder *b, const MpProgram *p, gboolean cp)
{
  g_autofree char *name = cp ? g_strdup_printf ("predicted rank %u (pp%u,tp%u,dp%u,cp%u)",
                                                p->rank, p->stage, p->tp_rank, p->dp_rank,
                                                p->cp_rank)
                             : g_strdup_printf ("predicted rank %u (pp%u,tp%u,dp%u)", p->rank,
                                                p->stage, p->tp_rank, p->dp_rank);
  mp_trace_process (b, p->rank, name, 2 * (gint64) p->rank);
}

/* ---- building blocks, shared with the measured trace (trace-measured.c) --------- */

void
mp_trace_process (JsonBuilder *b, guint pid, const char *name, gint64 sort_index)
{
  static const char *const threads[] = { "compute", "TP comm", "DP comm", "PP send/recv" };
  metadata (b, "process_name", pid, -1, "name", name, 0);
  metadata (b, "process_sort_index", pid, -1, "sort_index", NULL, sort_index);
  for (gint t = 0; t < (gint) G_N_ELEMENTS (threads); t++)
    {
      metadata (b, "thread_name", pid, t, "name", threads[t], 0);
      metadata (b, "thread_sort_index", pid, t, "sort_index", NULL, t);
    }
}

void
mp_trace_slice_begin (JsonBuilder *b, const char *name, const char *cat, guint pid, guint tid,
                      double start_s, double end_s)
{
  gint64 s = ns_of (start_s);
  x_begin (b, name, cat, pid, tid, s, MAX (s, ns_of (end_s)));
}

void
mp_trace_slice_end (JsonBuilder *b)
{
  x_end (b);
}

void
mp_trace_counter (JsonBuilder *b, const char *name, guint pid, double ts_s, const char *key,
                  double value)
{
  json_builder_begin_object (b);
  mp_json_add_string (b, "name", name);
  mp_json_add_string (b, "ph", "C");
  mp_json_add_int (b, "pid", pid);
  mp_json_add_double (b, "ts", ns_of (ts_s) / 1000.0);
  json_builder_set_member_name (b, "args");
  json_builder_begin_object (b);
  mp_json_add_double (b, key, value);
  json_builder_end_object (b);
  json_builder_end_object (b);
}

/* ---- the compute thread ------------------------------------------------------------- */

/* The idle time before compute instruction I: a bubble, then the wait on a transfer. */
static void
idle_slices (JsonBuilder *b, guint pid, const MpSimSlice *sl)
{
  if (!(sl->start_s > sl->idle_from_s))
    return;
  const char *bubble = mp_phase_name (MP_PHASE_BUBBLE);
  x_plain (b, bubble, bubble, pid, MP_TRACE_TID_COMPUTE, sl->idle_from_s, sl->comm_from_s);
  const char *what = sl->wait == MP_SIM_WAIT_DP ? "wait dp" : "wait pp";
  x_plain (b, what, "comm", pid, MP_TRACE_TID_COMPUTE, sl->comm_from_s, sl->start_s);
}

static void
unit_args (JsonBuilder *b, const MpProgram *p, const MpInsn *insn)
{
  mp_json_add_int (b, "microbatch", insn->micro_batch);
  mp_json_add_int (b, "chunk", insn->chunk);
  mp_json_add_int (b, "stage", p->stage);
  mp_json_add_string (b, "phase", insn->kind == MP_INSN_FORWARD ? "F" : "B");
}

static void
layer_slice (JsonBuilder *b, const MpProgram *p, const MpInsn *insn, const MpSimSlice *sl)
{
  const char *ph = insn->kind == MP_INSN_FORWARD ? "F" : "B";
  g_autofree char *name = g_strdup_printf ("%s layer %u", ph, insn->layer);
  x_begin (b, name, mp_phase_name (MP_PHASE_COMPUTE), p->rank, MP_TRACE_TID_COMPUTE,
           ns_of (sl->start_s), ns_of (sl->end_s));
  mp_json_add_int (b, "layer", insn->layer);
  unit_args (b, p, insn);
  mp_json_add_double (b, "flops", insn->flops);
  mp_json_add_double (b, "bytes", insn->bytes);
  if (insn->recompute)
    {
      json_builder_set_member_name (b, "recompute");
      json_builder_add_boolean_value (b, TRUE);
    }
  mp_json_add_double (b, "tp_comm_us", sl->comm_s * 1e6);
  x_end (b);
  if (ns_of (sl->end_s - sl->comm_s) < ns_of (sl->end_s) && sl->comm_s > 0)
    {
      g_autofree char *tp = g_strdup_printf ("TP collectives (%s layer %u)", ph, insn->layer);
      x_begin (b, tp, "comm", p->rank, MP_TRACE_TID_TP, ns_of (sl->end_s - sl->comm_s),
               ns_of (sl->end_s));
      mp_json_add_int (b, "layer", insn->layer);
      unit_args (b, p, insn);
      mp_json_add_string (b, "group", "tp");
      mp_json_add_string (b, "placement", "their total, drawn at the end of the layer");
      x_end (b);
    }
}

static gboolean
same_unit (const MpInsn *a, const MpInsn *b)
{
  return a->kind == b->kind && a->chunk == b->chunk && a->micro_batch == b->micro_batch;
}

/* One run of layers of the same pass (F or B of one chunk and micro-batch): a parent
 * slice and a child per layer. IDX[N] are compute-stream instructions; returns how many
 * it drew. */
static guint
pass_slices (JsonBuilder *b, const MpProgram *p, const MpSimRank *rk, const guint *idx, guint n)
{
  const MpInsn *first = &p->insns[idx[0]];
  guint k = 1;
  while (k < n && same_unit (&p->insns[idx[k]], first))
    k++;
  idle_slices (b, p->rank, &rk->slices[idx[0]]);
  const char *ph = first->kind == MP_INSN_FORWARD ? "F" : "B";
  g_autofree char *name = g_strdup_printf ("%s mb%u chunk%u", ph, first->micro_batch,
                                           first->chunk);
  x_begin (b, name, mp_phase_name (MP_PHASE_COMPUTE), p->rank, MP_TRACE_TID_COMPUTE,
           ns_of (rk->slices[idx[0]].start_s), ns_of (rk->slices[idx[k - 1]].end_s));
  unit_args (b, p, first);
  mp_json_add_int (b, "first_layer", first->layer);
  mp_json_add_int (b, "layers", k);
  x_end (b);
  for (guint j = 0; j < k; j++)
    {
      if (j > 0)
        idle_slices (b, p->rank, &rk->slices[idx[j]]);
      layer_slice (b, p, &p->insns[idx[j]], &rk->slices[idx[j]]);
    }
  return k;
}

static void
compute_thread (JsonBuilder *b, const MpProgram *p, const MpSimRank *rk, double step_s)
{
  g_autofree guint *idx = g_new (guint, MAX (p->n_insns, 1u));
  guint n = 0;
  double stream_end[MP_STREAM_N] = { 0 };
  for (guint i = 0; i < p->n_insns; i++)
    {
      MpStream s = stream_of (&p->insns[i]);
      stream_end[s] = MAX (stream_end[s], rk->slices[i].end_s);
      if (s == MP_STREAM_COMPUTE)
        idx[n++] = i;
    }
  for (guint k = 0; k < n;)
    {
      const MpInsn *insn = &p->insns[idx[k]];
      const MpSimSlice *sl = &rk->slices[idx[k]];
      if (insn->kind == MP_INSN_FORWARD || insn->kind == MP_INSN_BACKWARD)
        {
          k += pass_slices (b, p, rk, idx + k, n - k);
          continue;
        }
      idle_slices (b, p->rank, sl);
      if (insn->kind == MP_INSN_OPTIMIZER)
        x_plain (b, mp_phase_name (MP_PHASE_OPTIMIZER), mp_phase_name (MP_PHASE_OPTIMIZER),
                 p->rank, MP_TRACE_TID_COMPUTE, sl->start_s, sl->end_s);
      else if (insn->kind != MP_INSN_WAIT)
        x_plain (b, mp_insn_kind_name (insn->kind), "comm", p->rank, MP_TRACE_TID_COMPUTE,
                 sl->start_s, sl->end_s);
      k++;
    }
  /* After its last compute: its own dp, then pp, work, then the slowest rank (sim.c). */
  double from = stream_end[MP_STREAM_COMPUTE];
  double dp = CLAMP (stream_end[MP_STREAM_DP] - from, 0, step_s - from);
  double pp = CLAMP (stream_end[MP_STREAM_PP] - from - dp, 0, step_s - from - dp);
  x_plain (b, "wait dp", "comm", p->rank, MP_TRACE_TID_COMPUTE, from, from + dp);
  x_plain (b, "wait pp", "comm", p->rank, MP_TRACE_TID_COMPUTE, from + dp, from + dp + pp);
  const char *bubble = mp_phase_name (MP_PHASE_BUBBLE);
  x_plain (b, bubble, bubble, p->rank, MP_TRACE_TID_COMPUTE, from + dp + pp, step_s);
}

/* ---- the communication threads ------------------------------------------------------ */

static void
dp_slice (JsonBuilder *b, const MpProgram *p, const MpInsn *insn, const MpSimSlice *sl)
{
  const char *coll = mp_coll_kind_name (insn->coll);
  g_autofree char *name = NULL;
  if (insn->kind == MP_INSN_REDUCE_GRADS)
    name = g_strdup_printf ("%s bucket %u", coll, insn->bucket);
  else if (insn->kind == MP_INSN_GATHER_PARAMS)
    name = g_strdup_printf ("%s params, layers %u-%u", coll, insn->layer,
                            insn->layer + MAX (insn->n_layers, 1u) - 1);
  else if (insn->kind == MP_INSN_REDUCE_TIED)
    name = g_strdup_printf ("%s tied embedding", coll);
  else
    name = g_strdup (mp_insn_kind_name (insn->kind));
  x_begin (b, name, "comm", p->rank, MP_TRACE_TID_DP, ns_of (sl->start_s), ns_of (sl->end_s));
  mp_json_add_string (b, "group", insn->kind == MP_INSN_REDUCE_TIED ? "pp ends" : "dp");
  mp_json_add_string (b, "collective", coll);
  mp_json_add_int (b, "layer", insn->layer);
  mp_json_add_int (b, "layers", insn->n_layers);
  if (insn->kind == MP_INSN_REDUCE_GRADS)
    mp_json_add_int (b, "bucket", insn->bucket);
  mp_json_add_int (b, "stage", p->stage);
  mp_json_add_double (b, "bytes", insn->bytes);
  x_end (b);
}

/* Index of the program whose world rank is RANK, or NONE. */
static guint
program_of (const Trace *t, gint rank)
{
  for (guint r = 0; r < t->n; r++)
    if ((gint) t->programs[r]->rank == rank)
      return r;
  return NONE;
}

/* A send or receive, and its end of the flow arrow. PHASE: "F" for activations, "B" for
 * their gradients (the pass that produces or consumes them). */
static void
pp_slice (Trace *t, guint r, guint i, const char *phase)
{
  const MpProgram *p = t->programs[r];
  const MpInsn *insn = &p->insns[i];
  const MpSimSlice *sl = &t->sim->ranks[r].slices[i];
  gboolean send = insn->kind == MP_INSN_SEND;
  g_autofree char *name = g_strdup_printf ("%s %s mb%u chunk%u %s rank %d", send ? "send" : "recv",
                                           phase, insn->micro_batch, insn->chunk,
                                           send ? "\u2192" : "\u2190", insn->peer);
  gint64 s = ns_of (sl->start_s), e = ns_of (sl->end_s);
  x_begin (t->b, name, "comm", p->rank, MP_TRACE_TID_PP, s, e);
  mp_json_add_int (t->b, "microbatch", insn->micro_batch);
  mp_json_add_int (t->b, "chunk", insn->chunk);
  mp_json_add_int (t->b, "stage", p->stage);
  mp_json_add_string (t->b, "phase", phase);
  mp_json_add_int (t->b, "peer", insn->peer);
  mp_json_add_int (t->b, "tag", insn->tag);
  mp_json_add_double (t->b, "bytes", insn->bytes);
  mp_json_add_string (t->b, "group", "pp");
  x_end (t->b);
  /* Flow ids: the sender's rank and instruction, known to both ends. An arrow must start
   * before it ends: the receive's end point is no earlier than the send's. */
  guint q = program_of (t, insn->peer);
  if (q == NONE || sl->peer_insn == NONE)
    return;
  const MpSimSlice *other = &t->sim->ranks[q].slices[sl->peer_insn];
  gint64 mid_send = send ? (s + e) / 2 : (ns_of (other->start_s) + ns_of (other->end_s)) / 2;
  guint64 id = send ? ((guint64) r << 32 | i) : ((guint64) q << 32 | sl->peer_insn);
  if (send)
    flow (t->b, "s", id + 1, p->rank, mid_send);
  else
    flow (t->b, "f", id + 1, p->rank, CLAMP (MAX ((s + e) / 2, mid_send), s, e));
}

static void
comm_threads (Trace *t, guint r)
{
  const MpProgram *p = t->programs[r];
  const MpSimRank *rk = &t->sim->ranks[r];
  /* The pass next to each p2p: the compute before a send, the compute after a receive. */
  g_autofree guint8 *after = g_new (guint8, MAX (p->n_insns, 1u));
  guint8 next = MP_INSN_FORWARD;
  for (guint i = p->n_insns; i-- > 0;)
    {
      after[i] = next;
      if (p->insns[i].kind == MP_INSN_FORWARD || p->insns[i].kind == MP_INSN_BACKWARD)
        next = (guint8) p->insns[i].kind;
    }
  MpInsnKind before = MP_INSN_FORWARD;
  for (guint i = 0; i < p->n_insns; i++)
    {
      const MpInsn *insn = &p->insns[i];
      switch (insn->kind)
        {
        case MP_INSN_FORWARD:
        case MP_INSN_BACKWARD:
          before = insn->kind;
          break;
        case MP_INSN_SEND:
          pp_slice (t, r, i, before == MP_INSN_FORWARD ? "F" : "B");
          break;
        case MP_INSN_RECV:
          pp_slice (t, r, i, after[i] == MP_INSN_FORWARD ? "F" : "B");
          break;
        case MP_INSN_REDUCE_GRADS:
        case MP_INSN_GATHER_PARAMS:
        case MP_INSN_REDUCE_TIED:
          if (stream_of (insn) != MP_STREAM_COMPUTE)
            dp_slice (t->b, p, insn, &rk->slices[i]);
          break;
        default:
          break;
        }
    }
}

/* ---- the file --------------------------------------------------------------------------- */

static void
other_data (JsonBuilder *b, const Trace *t, const MpTraceInfo *info)
{
  json_builder_set_member_name (b, "otherData");
  json_builder_begin_object (b);
  mp_json_add_string (b, "source", "predicted");
  mp_json_add_string (b, "mpplan_version", PACKAGE_VERSION);
  if (info && info->model)
    mp_json_add_string (b, "model", info->model);
  if (info && info->cluster)
    mp_json_add_string (b, "cluster", info->cluster);
  if (info && info->plan_path)
    mp_json_add_string (b, "plan_path", info->plan_path);
  if (info && info->plan)
    {
      json_builder_set_member_name (b, "plan");
      json_builder_add_value (b, json_node_copy (info->plan));
    }
  mp_json_add_double (b, "step_s", t->sim->step_s);
  if (info && info->closed_form_step_s > 0)
    mp_json_add_double (b, "closed_form_step_s", info->closed_form_step_s);
  mp_json_add_int (b, "critical_rank", t->programs[t->sim->critical]->rank);
  mp_step_time_add_json (b, "time_s", &t->sim->time);
  json_builder_end_object (b);
}

JsonNode *
mp_trace_predicted (MpProgram *const *programs, guint n, const MpSimResult *sim,
                    const MpTraceInfo *info)
{
  g_return_val_if_fail (programs != NULL && sim != NULL && sim->n_ranks == n, NULL);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  Trace t = { b, programs, n, sim };
  gboolean cp = FALSE;
  for (guint r = 0; r < n; r++)
    cp |= programs[r]->cp_rank > 0;
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "traceEvents");
  json_builder_begin_array (b);
  for (guint r = 0; r < n; r++)
    process_metadata (b, programs[r], cp);
  for (guint r = 0; r < n; r++)
    {
      compute_thread (b, programs[r], &sim->ranks[r], sim->step_s);
      comm_threads (&t, r);
    }
  json_builder_end_array (b);
  mp_json_add_string (b, "displayTimeUnit", "ms");
  other_data (b, &t, info);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

gboolean
mp_trace_write_predicted (const char *path, MpProgram *const *programs, guint n,
                          const MpSimResult *sim, const MpTraceInfo *info, GError **error)
{
  /* A slice is ~150 bytes of JSON and several JSON nodes while built: bounded first. */
  if (sim->n_insns > MP_TRACE_MAX_SLICES)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s: the trace would hold %"
                   G_GUINT64_FORMAT " slices, more than %u: trace a plan of fewer "
                   "micro-batches", path, sim->n_insns, MP_TRACE_MAX_SLICES);
      return FALSE;
    }
  g_autoptr(JsonNode) root = mp_trace_predicted (programs, n, sim, info);
  return mp_json_write (path, root, error);
}

/* ---- measured and merged traces ------------------------------------------------------- */

static void
add_events (JsonBuilder *b, JsonArray *events)
{
  for (guint i = 0; events && i < json_array_get_length (events); i++)
    json_builder_add_value (b, json_node_copy (json_array_get_element (events, i)));
}

JsonNode *
mp_trace_measured (JsonArray *const *rank_events, guint n, JsonNode *plan, double step_s)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "traceEvents");
  json_builder_begin_array (b);
  for (guint r = 0; r < n; r++)
    add_events (b, rank_events[r]);
  json_builder_end_array (b);
  mp_json_add_string (b, "displayTimeUnit", "ms");
  json_builder_set_member_name (b, "otherData");
  json_builder_begin_object (b);
  mp_json_add_string (b, "source", "measured");
  mp_json_add_string (b, "mpplan_version", PACKAGE_VERSION);
  if (plan)
    {
      json_builder_set_member_name (b, "plan");
      json_builder_add_value (b, json_node_copy (plan));
    }
  mp_json_add_double (b, "step_s", step_s);
  json_builder_end_object (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* What the events' args hold (process and thread names, slices' figures, docs/trace.md). */
static const MpJsonKey event_args[] = {
  { "name", MP_JSON_STRING, 0, 0 }, { "sort_index", MP_JSON_WHOLE, 0, G_MAXINT32 },
  { "phase", MP_JSON_STRING, 0, 0 }, { "group", MP_JSON_STRING, 0, 0 },
  { "layer", MP_JSON_WHOLE, 0, G_MAXINT32 }, { "first_layer", MP_JSON_WHOLE, 0, G_MAXINT32 },
  { "layers", MP_JSON_WHOLE, 0, G_MAXINT32 }, { "microbatch", MP_JSON_WHOLE, 0, G_MAXINT32 },
  { "chunk", MP_JSON_WHOLE, 0, G_MAXINT32 }, { "stage", MP_JSON_WHOLE, 0, G_MAXINT32 },
  { "peer", MP_JSON_WHOLE, 0, G_MAXINT32 }, { "tag", MP_JSON_WHOLE, 0, G_MAXINT64 },
  { "bytes", MP_JSON_NUMBER, 0, 1e18 }, { "flops", MP_JSON_NUMBER, 0, 1e21 },
  { "measured_us", MP_JSON_NUMBER, 0, 1e15 }, { "tp_comm_us", MP_JSON_NUMBER, 0, 1e15 },
  { "recompute", MP_JSON_BOOL, 0, 0 }, { "placement", MP_JSON_STRING, 0, 0 },
  { "collective", MP_JSON_STRING, 0, 0 }, { "bucket", MP_JSON_WHOLE, 0, G_MAXINT32 },
  { "peak_bytes", MP_JSON_NUMBER, 0, 1e18 },
};

/* One event of a trace: an object whose pid and tid are whole numbers, ts and dur times
 * in microseconds, ph, name and cat strings and args an object, where present. */
static void
check_event (MpJsonReader *r, JsonNode *node, guint i, gboolean measured)
{
  g_autofree char *at = g_strdup_printf ("traceEvents[%u]", i);
  JsonObject *e = mp_json_node_object (r, node, at);
  guint64 pid = 0, tid = 0, sort = 0;
  double t = 0;
  if (mp_json_get_uint (r, e, at, "pid", FALSE, 0, G_MAXINT32, &pid)
      && (pid >= MP_TRACE_MEASURED_PID) != measured)
    {
      g_autofree char *name = g_strconcat (at, ".pid", NULL);
      mp_json_problem (r, name, "%" G_GUINT64_FORMAT " is not the pid of a %s rank (%s "
                       "100000): not a %s trace", pid, measured ? "measured" : "predicted",
                       measured ? ">=" : "<", measured ? "measured" : "predicted");
    }
  mp_json_get_uint (r, e, at, "tid", FALSE, 0, G_MAXINT32, &tid);
  mp_json_get_number (r, e, at, "ts", FALSE, -1e15, 1e15, &t);
  mp_json_get_number (r, e, at, "dur", FALSE, 0, 1e15, &t);
  mp_json_get_string (r, e, at, "ph", FALSE);
  mp_json_get_string (r, e, at, "name", FALSE);
  mp_json_get_string (r, e, at, "cat", FALSE);
  mp_json_get_uint (r, e, at, "id", FALSE, 0, G_MAXINT64, &sort);
  mp_json_get_string (r, e, at, "bp", FALSE);
  JsonObject *args = mp_json_get_object (r, e, at, "args", FALSE);
  g_autofree char *args_at = g_strconcat (at, ".args", NULL);
  mp_json_check_keys (r, args, args_at, event_args, G_N_ELEMENTS (event_args));
}

/* otherData (mp_trace_predicted, mp_trace_measured): copied into a merged trace, and
 * checked like the events. */
static void
check_other_data (MpJsonReader *r, JsonObject *o)
{
  static const MpJsonKey keys[] = {
    { "source", MP_JSON_STRING, 0, 0 }, { "mpplan_version", MP_JSON_STRING, 0, 0 },
    { "model", MP_JSON_STRING, 0, 0 }, { "cluster", MP_JSON_STRING, 0, 0 },
    { "plan_path", MP_JSON_STRING, 0, 0 }, { "step_s", MP_JSON_NUMBER, 0, 1e9 },
    { "closed_form_step_s", MP_JSON_NUMBER, 0, 1e9 },
    { "critical_rank", MP_JSON_WHOLE, 0, G_MAXINT32 }, { "time_s", MP_JSON_OBJECT, 0, 0 },
  };
  JsonObject *d = mp_json_get_object (r, o, NULL, "otherData", FALSE);
  mp_json_check_keys (r, d, "otherData", keys, G_N_ELEMENTS (keys));
  JsonObject *t = mp_json_get_object (r, d, "otherData", "time_s", FALSE);
  for (guint p = 0; t && p < MP_REPORT_STEP; p++)
    {
      double v;
      mp_json_get_number (r, t, "otherData.time_s", mp_report_phase_name (p), FALSE, 0, 1e9,
                          &v);
    }
  JsonObject *plan = mp_json_get_object (r, d, "otherData", "plan", FALSE);
  if (plan)
    mp_report_check_plan (r, plan, "otherData.plan");
}

gboolean
mp_trace_check (JsonNode *trace, const char *name, gboolean measured, GError **error)
{
  MpJsonReader r;
  mp_json_reader_init (&r, name);
  JsonObject *o = trace && JSON_NODE_HOLDS_OBJECT (trace) ? json_node_get_object (trace) : NULL;
  if (o == NULL)
    mp_json_problem (&r, NULL, "not a Chrome trace (a JSON object with traceEvents)");
  JsonArray *a = mp_json_get_array (&r, o, NULL, "traceEvents", TRUE);
  for (guint i = 0; a && i < json_array_get_length (a) && r.error == NULL; i++)
    check_event (&r, json_array_get_element (a, i), i, measured);
  mp_json_get_string (&r, o, NULL, "displayTimeUnit", FALSE);
  check_other_data (&r, o);
  return mp_json_reader_finish (&r, error);
}

/* TRACE's events, checked (mp_trace_check): a predicted trace given as the measured one
 * would put both runs on the same processes. */
static JsonArray *
trace_events (JsonNode *trace, gboolean measured, GError **error)
{
  if (!mp_trace_check (trace, measured ? "measured trace" : "predicted trace", measured,
                       error))
    return NULL;
  return json_object_get_array_member (json_node_get_object (trace), "traceEvents");
}

static JsonNode *
other_data_of (JsonNode *trace)
{
  JsonObject *o = json_node_get_object (trace);
  return json_object_has_member (o, "otherData") ? json_object_get_member (o, "otherData")
                                                 : NULL;
}

JsonNode *
mp_trace_merge (JsonNode *predicted, JsonNode *measured, GError **error)
{
  JsonArray *pe = trace_events (predicted, FALSE, error);
  if (pe == NULL)
    return NULL;
  JsonArray *me = trace_events (measured, TRUE, error);
  if (me == NULL)
    return NULL;
  /* Both already share the origin: each step starts at t = 0 (the simulator's clock, and
   * the executor's step start after a barrier, rank by rank). */
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "traceEvents");
  json_builder_begin_array (b);
  add_events (b, pe);
  add_events (b, me);
  json_builder_end_array (b);
  mp_json_add_string (b, "displayTimeUnit", "ms");
  json_builder_set_member_name (b, "otherData");
  json_builder_begin_object (b);
  mp_json_add_string (b, "source", "predicted and measured");
  mp_json_add_string (b, "mpplan_version", PACKAGE_VERSION);
  JsonNode *pod = other_data_of (predicted), *mod = other_data_of (measured);
  JsonObject *po = pod && JSON_NODE_HOLDS_OBJECT (pod) ? json_node_get_object (pod) : NULL;
  const char *keys[] = { "plan", "model", "cluster" };
  for (guint k = 0; po && k < G_N_ELEMENTS (keys); k++)
    if (json_object_has_member (po, keys[k]))
      {
        json_builder_set_member_name (b, keys[k]);
        json_builder_add_value (b, json_node_copy (json_object_get_member (po, keys[k])));
      }
  json_builder_set_member_name (b, "predicted");
  json_builder_add_value (b, pod ? json_node_copy (pod) : json_node_new (JSON_NODE_NULL));
  json_builder_set_member_name (b, "measured");
  json_builder_add_value (b, mod ? json_node_copy (mod) : json_node_new (JSON_NODE_NULL));
  json_builder_end_object (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
