/* measure-json.c - measured.json from a run's result (rank 0): the keys of
 * mp_plan_to_json (step_s, time_s, memory_bytes) with their spreads over the measured
 * steps (each part's over the same steps as the step, ECOSYSTEM.md 4.2), the job's step
 * times, losses and gradient norms, and every rank's medians and memory. Units: seconds,
 * bytes. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/measure.h"

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

/* Each kind's own peak over the run (memory_bytes holds them at the total's peak). */
static void
add_kind_peaks (JsonBuilder *b, const MpMemStats *mem)
{
  json_builder_set_member_name (b, "memory_peak_bytes");
  json_builder_begin_object (b);
  for (int k = 0; k < MP_MEM_N; k++)
    {
      json_builder_set_member_name (b, mp_mem_kind_name (k));
      json_builder_add_double_value (b, mem->peak[k]);
    }
  json_builder_end_object (b);
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

/* One entry of ranks[]: its coordinates, its medians over its own steps, its memory. */
static void
add_rank (JsonBuilder *b, const MpExecRank *rank, guint n_steps)
{
  json_builder_begin_object (b);
  const MpProgram *prog = rank->prog;
  const char *keys[] = { "rank", "stage", "tp_rank", "dp_rank" };
  const guint values[] = { prog->rank, prog->stage, prog->tp_rank, prog->dp_rank };
  for (int k = 0; k < 4; k++)
    {
      json_builder_set_member_name (b, keys[k]);
      json_builder_add_int_value (b, values[k]);
    }
  MpSpread step, t[MP_PHASE_N];
  mp_measure_spreads (rank->steps, n_steps, &step, t);
  MpStepTime med, lo, hi;
  split_spreads (t, &med, &lo, &hi);
  json_builder_set_member_name (b, "step_s");
  json_builder_add_double_value (b, step.median);
  mp_step_time_add_json (b, "time_s", &med);
  json_builder_set_member_name (b, "memory_bytes");
  add_memory (b, &rank->mem);
  add_kind_peaks (b, &rank->mem);
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
mp_exec_result_to_json (const MpExecResult *r, JsonNode *plan_json)
{
  g_return_val_if_fail (r->n_ranks > 0, NULL);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "schema_version");
  json_builder_add_int_value (b, 1);
  json_builder_set_member_name (b, "source");
  json_builder_add_string_value (b, "measured");
  json_builder_set_member_name (b, "backend");
  json_builder_add_string_value (b, r->backend);
  json_builder_set_member_name (b, "step_s");
  json_builder_add_double_value (b, r->summary.step.median);
  json_builder_set_member_name (b, "step_s_min");
  json_builder_add_double_value (b, r->summary.step.min);
  json_builder_set_member_name (b, "step_s_max");
  json_builder_add_double_value (b, r->summary.step.max);
  json_builder_set_member_name (b, "steps");
  json_builder_add_int_value (b, r->steps);
  json_builder_set_member_name (b, "warmup_steps");
  json_builder_add_int_value (b, r->warmup);
  MpStepTime med, lo, hi;
  split_spreads (r->summary.t, &med, &lo, &hi);
  mp_step_time_add_json (b, "time_s", &med);
  mp_step_time_add_json (b, "time_s_min", &lo);
  mp_step_time_add_json (b, "time_s_max", &hi);
  json_builder_set_member_name (b, "time_s_rank");
  json_builder_add_int_value (b, r->summary.time_rank);
  json_builder_set_member_name (b, "memory_bytes");
  add_memory (b, &r->ranks[r->mem_rank].mem);
  add_kind_peaks (b, &r->ranks[r->mem_rank].mem);
  json_builder_set_member_name (b, "memory_bytes_rank");
  json_builder_add_int_value (b, r->mem_rank);
  g_autofree double *step_times = g_new0 (double, MAX (r->steps, 1u));
  for (guint s = 0; s < r->steps; s++)
    step_times[s] = r->job[s].step_s;
  add_doubles (b, "step_times_s", step_times, r->steps);
  add_doubles (b, "loss", r->loss, r->steps + r->warmup);
  add_doubles (b, "grad_norm", r->grad_norm, r->steps + r->warmup);
  json_builder_set_member_name (b, "ranks");
  json_builder_begin_array (b);
  for (guint i = 0; i < r->n_ranks; i++)
    add_rank (b, &r->ranks[i], r->steps);
  json_builder_end_array (b);
  if (plan_json)
    {
      json_builder_set_member_name (b, "plan");
      json_builder_add_value (b, json_node_copy (plan_json));
    }
  json_builder_end_object (b);

  return json_builder_get_root (b);
}
