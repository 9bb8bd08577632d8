/* measure.c - from instruction timestamps to the planner's figures: each step's time split
 * into compute / tp_comm / pp_comm / dp_comm / bubble / optimizer per rank, the JSON of one
 * rank (gathered at rank 0), measured.json (the keys of mp_plan_to_json: step_s, time_s,
 * memory_bytes, plus spread and per-rank figures) and the Chrome trace of the last
 * measured step (ECOSYSTEM.md section 4.3 layout: measured rank r is pid 100000 + r; tid 0
 * compute, 1 TP comm, 2 DP comm, 3 PP send/recv).
 *
 * Attribution of one rank's step (wall clock from the step's start, after a barrier, to
 * the end of its last instruction and of everything it left in flight):
 *   compute   FORWARD / BACKWARD time less the parts below, plus nothing else;
 *   tp_comm   time inside the tensor-parallel collectives of FORWARD / BACKWARD;
 *   pp_comm   SEND / RECV instructions (posting), and completing a receive whose data had
 *             already arrived;
 *   dp_comm   REDUCE_GRADS / GATHER_PARAMS / REDUCE_TIED / WAIT instructions (posting and
 *             the waits for the dp stream), and a layer blocked on a ZeRO-3 gather;
 *   optimizer OPTIMIZER (the global gradient norm's all-reduce included);
 *   bubble    the rest: blocked on a receive whose data had not arrived or, before the
 *             tied embedding's reduction, on the other pipeline end (waiting on another
 *             stage), the end-of-step drain, the interpreter's own gaps.
 * The six add up to step_s. Units: seconds, bytes. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/measure.h"
#include "report/report.h"   /* defines: mp_trace_process, mp_trace_slice_*, mp_trace_measured */

#include <math.h>
#include <string.h>

/* The bubble of ST: its step less the other five parts. */
static void
fill_bubble (MpRankStep *st)
{
  double busy = 0;
  for (int p = 0; p < MP_PHASE_N; p++)
    if (p != MP_PHASE_BUBBLE)
      busy += st->time.t[p];
  st->time.t[MP_PHASE_BUBBLE] = MAX (0.0, st->step_s - busy);
}

void
mp_measure_attribute (const MpProgram *prog, const MpInsnTime *times, double t_start,
                      double t_end, MpRankStep *out)
{
  memset (out, 0, sizeof *out);
  out->step_s = t_end - t_start;
  double *t = out->time.t;
  for (guint i = 0; i < prog->n_insns; i++)
    {
      const MpInsnTime *tm = &times[i];
      double dur = tm->t1 - tm->t0;
      switch (prog->insns[i].kind)
        {
        case MP_INSN_FORWARD:
        case MP_INSN_BACKWARD:
          t[MP_PHASE_COMPUTE] += dur - tm->tp_s - tm->pp_s - tm->wait_pp_s - tm->wait_dp_s;
          t[MP_PHASE_TP] += tm->tp_s;
          t[MP_PHASE_PP] += tm->pp_s;
          t[MP_PHASE_DP] += tm->wait_dp_s;
          break;
        case MP_INSN_SEND:
        case MP_INSN_RECV:
          t[MP_PHASE_PP] += dur;
          break;
        case MP_INSN_OPTIMIZER:
          t[MP_PHASE_OPTIMIZER] += dur;
          break;
        default:   /* the dp stream; REDUCE_TIED's wait for the other end is bubble */
          t[MP_PHASE_DP] += dur - tm->wait_pp_s;
          break;
        }
    }
  fill_bubble (out);
}

static int
cmp_double (gconstpointer a, gconstpointer b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

/* ---- one rank ---------------------------------------------------------------------- */

/* A slice of the measured trace, with the instruction's figures when IN is given. */
static void
trace_slice (JsonBuilder *b, const char *name, const char *cat, guint pid, guint tid,
             double ts_s, double dur_s, const MpInsn *in)
{
  mp_trace_slice_begin (b, name, cat, pid, tid, ts_s, ts_s + MAX (dur_s, 0.0));
  if (in)
    {
      json_builder_set_member_name (b, "layer");
      json_builder_add_int_value (b, in->layer);
      json_builder_set_member_name (b, "microbatch");
      json_builder_add_int_value (b, in->micro_batch);
      json_builder_set_member_name (b, "chunk");
      json_builder_add_int_value (b, in->chunk);
      json_builder_set_member_name (b, "bytes");
      json_builder_add_double_value (b, in->bytes);
      json_builder_set_member_name (b, "flops");
      json_builder_add_double_value (b, in->flops);
      json_builder_set_member_name (b, "measured_us");
      json_builder_add_double_value (b, dur_s * 1e6);
    }
  mp_trace_slice_end (b);
}

/* The trace events of one rank's last measured step, times relative to its start (the
 * shared origin of report/trace.c's layout: measured rank r is pid 100000 + r, sorted
 * just after predicted rank r). */
static void
rank_trace (JsonBuilder *b, const MpProgram *prog, const MpModel *model,
            const MpInsnTime *times, double t_start, const MpMemStats *mem)
{
  guint pid = MP_TRACE_MEASURED_PID + prog->rank;
  g_autofree char *pname = g_strdup_printf ("measured rank %u (pp%u,tp%u,dp%u)", prog->rank,
                                            prog->stage, prog->tp_rank, prog->dp_rank);
  mp_trace_process (b, pid, pname, 2 * (gint64) prog->rank + 1);
  for (guint i = 0; i < prog->n_insns; i++)
    {
      const MpInsn *in = &prog->insns[i];
      const MpInsnTime *tm = &times[i];
      double ts = tm->t0 - t_start, dur = tm->t1 - tm->t0;
      const char *lname = in->layer < model->n_layers ? model->layers[in->layer].name : "?";
      g_autofree char *name = NULL;
      switch (in->kind)
        {
        case MP_INSN_FORWARD:
        case MP_INSN_BACKWARD:
          {
            double wait = tm->wait_pp_s + tm->wait_dp_s;
            if (wait > 0)
              trace_slice (b, "bubble", "bubble", pid, MP_TRACE_TID_COMPUTE, ts, wait, NULL);
            name = g_strdup_printf ("%s %s mb%u", in->kind == MP_INSN_FORWARD ? "F" : "B",
                                    lname, in->micro_batch);
            trace_slice (b, name, "compute", pid, MP_TRACE_TID_COMPUTE, ts + wait, dur - wait,
                         in);
            /* the layer's TP collectives, summed, drawn at its end */
            if (tm->tp_s > 0)
              trace_slice (b, "tp collectives", "comm", pid, MP_TRACE_TID_TP,
                           tm->t1 - t_start - tm->tp_s, tm->tp_s, in);
            break;
          }
        case MP_INSN_SEND:
        case MP_INSN_RECV:
          name = g_strdup_printf ("%s %s mb%u peer %d", mp_insn_kind_name (in->kind), lname,
                                  in->micro_batch, in->peer);
          trace_slice (b, name, "comm", pid, MP_TRACE_TID_PP, ts, dur, in);
          break;
        case MP_INSN_OPTIMIZER:
          trace_slice (b, "optimizer", "optimizer", pid, MP_TRACE_TID_COMPUTE, ts, dur, in);
          break;
        default:
          if (tm->wait_pp_s > 0)
            trace_slice (b, "bubble", "bubble", pid, MP_TRACE_TID_DP, ts, tm->wait_pp_s, NULL);
          name = g_strdup_printf ("%s %s", mp_insn_kind_name (in->kind), lname);
          trace_slice (b, name, "comm", pid, MP_TRACE_TID_DP, ts + tm->wait_pp_s,
                       dur - tm->wait_pp_s, in);
          break;
        }
    }
  mp_trace_counter (b, "memory", pid, 0, "peak_bytes", mem->peak_total);
}

static void
add_memory (JsonBuilder *b, const MpMemStats *mem)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "peak");
  json_builder_add_double_value (b, mem->peak_total);
  for (int k = 0; k < MP_MEM_N; k++)
    {
      json_builder_set_member_name (b, mp_mem_kind_name (k));
      json_builder_add_double_value (b, mem->at_peak[k]);
    }
  json_builder_end_object (b);
}

char *
mp_measure_rank_json (const MpProgram *prog, const MpModel *model, const MpRankStep *steps,
                      guint n_steps, const MpInsnTime *last_times, double last_start,
                      const MpMemStats *mem)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "rank");
  json_builder_add_int_value (b, prog->rank);
  json_builder_set_member_name (b, "stage");
  json_builder_add_int_value (b, prog->stage);
  json_builder_set_member_name (b, "tp_rank");
  json_builder_add_int_value (b, prog->tp_rank);
  json_builder_set_member_name (b, "dp_rank");
  json_builder_add_int_value (b, prog->dp_rank);
  json_builder_set_member_name (b, "steps");
  json_builder_begin_array (b);
  for (guint s = 0; s < n_steps; s++)
    {
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "step_s");
      json_builder_add_double_value (b, steps[s].step_s);
      mp_step_time_add_json (b, "time_s", &steps[s].time);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_set_member_name (b, "memory_bytes");
  add_memory (b, mem);
  json_builder_set_member_name (b, "trace");
  json_builder_begin_array (b);
  if (n_steps > 0)
    rank_trace (b, prog, model, last_times, last_start, mem);
  json_builder_end_array (b);
  json_builder_end_object (b);
  g_autoptr(JsonNode) root = json_builder_get_root (b);
  return json_to_string (root, FALSE);
}

/* ---- the job (rank 0) -------------------------------------------------------------- */

void
mp_measure_spread (const double *v, guint n, MpSpread *out)
{
  *out = (MpSpread) { 0, 0, 0 };
  if (n == 0)
    return;
  g_autofree double *s = g_memdup2 (v, n * sizeof (double));
  qsort (s, n, sizeof (double), (int (*) (const void *, const void *)) cmp_double);
  out->median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  out->min = s[0];
  out->max = s[n - 1];
}

/* The spread of part P (MP_PHASE_N: the step itself) over N steps. */
static void
column_spread (const MpRankStep *st, guint n, int p, MpSpread *out)
{
  g_autofree double *v = g_new (double, MAX (n, 1u));
  for (guint s = 0; s < n; s++)
    v[s] = p == MP_PHASE_N ? st[s].step_s : st[s].time.t[p];
  mp_measure_spread (v, n, out);
}

/* The spread of each of the six parts over N steps, into T[0..5]. */
static void
parts_spread (const MpRankStep *st, guint n, MpSpread *t)
{
  for (int p = 0; p < MP_PHASE_N; p++)
    column_spread (st, n, p, &t[p]);
}

/* A job's figures are spreads over its steps, each part over the same steps as the step:
 * a part's median is then inside its min-max, which a part taken as the rest of a median
 * step (a median of sums less a sum of medians) is not. Per step the six parts add up to
 * the job's step; their medians need not add up to its median. */
void
mp_measure_summarize (const MpRankStep *const *ranks, guint n_ranks, guint n_steps,
                      MpRankStep *job, MpJobSummary *out)
{
  memset (out, 0, sizeof *out);
  double most = -1;
  for (guint r = 0; r < n_ranks; r++)
    {
      MpSpread c;
      column_spread (ranks[r], n_steps, MP_PHASE_COMPUTE, &c);
      if (c.median > most)
        {
          most = c.median;
          out->time_rank = r;
        }
    }
  for (guint s = 0; s < n_steps; s++)
    {
      job[s] = n_ranks ? ranks[out->time_rank][s] : (MpRankStep) { 0 };
      for (guint r = 0; r < n_ranks; r++)
        job[s].step_s = MAX (job[s].step_s, ranks[r][s].step_s);
      fill_bubble (&job[s]);
    }
  column_spread (job, n_steps, MP_PHASE_N, &out->step);
  parts_spread (job, n_steps, out->t);
}

/* The medians, smallest and largest of the six spreads T into MED, LO, HI. */
static void
split_spreads (const MpSpread *t, MpStepTime *med, MpStepTime *lo, MpStepTime *hi)
{
  for (int p = 0; p < MP_PHASE_N; p++)
    {
      med->t[p] = t[p].median;
      lo->t[p] = t[p].min;
      hi->t[p] = t[p].max;
    }
}

/* A rank's object and its first N_STEPS steps (0 where it has fewer); caller frees. */
static MpRankStep *
rank_steps (JsonObject *o, guint n_steps)
{
  MpRankStep *st = g_new0 (MpRankStep, MAX (n_steps, 1u));
  JsonArray *steps = json_object_get_array_member (o, "steps");
  guint n = MIN (json_array_get_length (steps), n_steps);
  for (guint s = 0; s < n; s++)
    {
      JsonObject *so = json_array_get_object_element (steps, s);
      st[s].step_s = json_object_get_double_member (so, "step_s");
      JsonObject *to = json_object_get_object_member (so, "time_s");
      for (int p = 0; p < MP_PHASE_N; p++)
        st[s].time.t[p] = json_object_get_double_member (to, mp_phase_name (p));
    }
  return st;
}

/* One entry of ranks[]: its coordinates, its medians over its own steps, its memory. */
static void
add_rank (JsonBuilder *b, JsonObject *o, const MpRankStep *st, guint n_steps)
{
  json_builder_begin_object (b);
  const char *keys[] = { "rank", "stage", "tp_rank", "dp_rank" };
  for (int k = 0; k < 4; k++)
    {
      json_builder_set_member_name (b, keys[k]);
      json_builder_add_int_value (b, json_object_get_int_member (o, keys[k]));
    }
  MpSpread step, t[MP_PHASE_N];
  column_spread (st, n_steps, MP_PHASE_N, &step);
  parts_spread (st, n_steps, t);
  MpStepTime med, lo, hi;
  split_spreads (t, &med, &lo, &hi);
  json_builder_set_member_name (b, "step_s");
  json_builder_add_double_value (b, step.median);
  mp_step_time_add_json (b, "time_s", &med);
  json_builder_set_member_name (b, "memory_bytes");
  json_builder_add_value (b, json_node_copy (json_object_get_member (o, "memory_bytes")));
  json_builder_end_object (b);
}

static void
add_doubles (JsonBuilder *b, const char *key, const double *v, guint n)
{
  json_builder_set_member_name (b, key);
  json_builder_begin_array (b);
  for (guint i = 0; i < n; i++)
    json_builder_add_double_value (b, v[i]);
  json_builder_end_array (b);
}

JsonNode *
mp_measure_job_json (GPtrArray *rank_texts, JsonNode *plan_json, const double *losses,
                     const double *grad_norms, guint n_steps, guint warmup,
                     const char *backend, JsonNode **trace_out, GError **error)
{
  guint R = rank_texts->len;
  g_autoptr(GPtrArray) parsers = g_ptr_array_new_with_free_func (g_object_unref);
  g_autoptr(GPtrArray) steps = g_ptr_array_new_with_free_func (g_free);
  g_autofree JsonObject **o = g_new0 (JsonObject *, MAX (R, 1u));
  for (guint r = 0; r < R; r++)
    {
      JsonParser *p = json_parser_new ();
      g_ptr_array_add (parsers, p);
      gsize len;
      const char *text = g_bytes_get_data (g_ptr_array_index (rank_texts, r), &len);
      if (!json_parser_load_from_data (p, text, (gssize) len, error))
        return NULL;
      o[r] = json_node_get_object (json_parser_get_root (p));
      g_ptr_array_add (steps, rank_steps (o[r], n_steps));
    }
  g_autofree MpRankStep *job = g_new0 (MpRankStep, MAX (n_steps, 1u));
  MpJobSummary sum;
  mp_measure_summarize ((const MpRankStep *const *) steps->pdata, R, n_steps, job, &sum);
  guint mem_rank = 0;
  for (guint r = 1; r < R; r++)
    {
      JsonObject *m = json_object_get_object_member (o[r], "memory_bytes");
      JsonObject *mb = json_object_get_object_member (o[mem_rank], "memory_bytes");
      if (json_object_get_double_member (m, "peak") > json_object_get_double_member (mb, "peak"))
        mem_rank = r;
    }

  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "schema_version");
  json_builder_add_int_value (b, 1);
  json_builder_set_member_name (b, "source");
  json_builder_add_string_value (b, "measured");
  json_builder_set_member_name (b, "backend");
  json_builder_add_string_value (b, backend);
  json_builder_set_member_name (b, "step_s");
  json_builder_add_double_value (b, sum.step.median);
  json_builder_set_member_name (b, "step_s_min");
  json_builder_add_double_value (b, sum.step.min);
  json_builder_set_member_name (b, "step_s_max");
  json_builder_add_double_value (b, sum.step.max);
  json_builder_set_member_name (b, "steps");
  json_builder_add_int_value (b, n_steps);
  json_builder_set_member_name (b, "warmup_steps");
  json_builder_add_int_value (b, warmup);
  MpStepTime med, lo, hi;
  split_spreads (sum.t, &med, &lo, &hi);
  mp_step_time_add_json (b, "time_s", &med);
  mp_step_time_add_json (b, "time_s_min", &lo);
  mp_step_time_add_json (b, "time_s_max", &hi);
  json_builder_set_member_name (b, "time_s_rank");
  json_builder_add_int_value (b, sum.time_rank);
  json_builder_set_member_name (b, "memory_bytes");
  json_builder_add_value (b, json_node_copy (json_object_get_member (o[mem_rank],
                                                                     "memory_bytes")));
  json_builder_set_member_name (b, "memory_bytes_rank");
  json_builder_add_int_value (b, mem_rank);
  g_autofree double *step_times = g_new0 (double, MAX (n_steps, 1u));
  for (guint s = 0; s < n_steps; s++)
    step_times[s] = job[s].step_s;
  add_doubles (b, "step_times_s", step_times, n_steps);
  add_doubles (b, "loss", losses, n_steps + warmup);
  add_doubles (b, "grad_norm", grad_norms, n_steps + warmup);
  json_builder_set_member_name (b, "ranks");
  json_builder_begin_array (b);
  for (guint r = 0; r < R; r++)
    add_rank (b, o[r], g_ptr_array_index (steps, r), n_steps);
  json_builder_end_array (b);
  if (plan_json)
    {
      json_builder_set_member_name (b, "plan");
      json_builder_add_value (b, json_node_copy (plan_json));
    }
  json_builder_end_object (b);

  if (trace_out)
    {
      g_autofree JsonArray **events = g_new0 (JsonArray *, MAX (R, 1u));
      for (guint r = 0; r < R; r++)
        events[r] = json_object_get_array_member (o[r], "trace");
      *trace_out = mp_trace_measured (events, R, plan_json, sum.step.median);
    }
  return json_builder_get_root (b);
}
