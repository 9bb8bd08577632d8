/* trace-measured.c - the Chrome trace of a measured run (exec/ measures, this draws): each
 * rank's last measured step, instruction by instruction (ECOSYSTEM.md section 4.3 layout:
 * measured rank r is pid 100000 + r; tid 0 compute, 1 TP comm, 2 DP comm, 3 PP
 * send/recv), a layer's waits drawn as bubble slices before it, its TP collectives
 * summed at its end, and the rank's peak memory as a counter. Units: seconds in, whole
 * nanoseconds out (mp_trace_slice_begin). */
#include "config.h"
#include "report/report.h"

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
 * shared origin of trace.c's layout: measured rank r is pid 100000 + r, sorted just after
 * predicted rank r). */
static void
rank_trace (JsonBuilder *b, const MpTraceRank *rank, const MpModel *model)
{
  const MpProgram *prog = rank->prog;
  const MpInsnTime *times = rank->times;
  double t_start = rank->t_start;
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
            /* and its waits on the context-parallel ring (cp17), just before them */
            if (tm->cp_s > 0)
              trace_slice (b, "cp ring", "comm", pid, MP_TRACE_TID_TP,
                           tm->t1 - t_start - tm->tp_s - tm->cp_s, tm->cp_s, in);
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
  mp_trace_counter (b, "memory", pid, 0, "peak_bytes", rank->peak_bytes);
}


JsonNode *
mp_trace_measured_run (const MpTraceRank *ranks, guint n, const MpModel *model,
                       JsonNode *plan, double step_s)
{
  g_autoptr(GPtrArray) nodes = g_ptr_array_new_with_free_func ((GDestroyNotify) json_node_unref);
  g_autofree JsonArray **events = g_new0 (JsonArray *, MAX (n, 1u));
  for (guint r = 0; r < n; r++)
    {
      g_autoptr(JsonBuilder) b = json_builder_new ();
      json_builder_begin_array (b);
      rank_trace (b, &ranks[r], model);
      json_builder_end_array (b);
      JsonNode *node = json_builder_get_root (b);
      g_ptr_array_add (nodes, node);
      events[r] = json_node_get_array (node);
    }
  return mp_trace_measured (events, n, plan, step_s);
}
