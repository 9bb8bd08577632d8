/* test-measure.c - cmocka tests of the executor's figures (exec/measure.c) on crafted
 * steps, no MPI: the spread of a set of samples, and measured.json's summary of a job,
 * where each part's median must lie within its own min-max. The crafted job is one a
 * bubble taken as "median step less the other parts' medians" gets wrong: the busiest
 * rank's compute and tp_comm trade places from step to step (a median of sums is not a
 * sum of medians), and the other rank is the slowest in one step. */
#include "tests/test-util.h"
#include "exec/measure.h"

#include <string.h>

#define N_STEPS 3

/* Rank 0: little compute, the slowest in step 2. Rank 1: the most compute; compute and
 * tp_comm trade places, steps 2, 5, 5 with no bubble of its own. */
static const MpRankStep rank0[N_STEPS] = {
  { 1.0, { { 0.5, 0, 0, 0, 0.5, 0 } } },
  { 1.0, { { 0.5, 0, 0, 0, 0.5, 0 } } },
  { 6.0, { { 0.5, 0, 0, 0, 5.5, 0 } } },
};
static const MpRankStep rank1[N_STEPS] = {
  { 2.0, { { 1.0, 1.0, 0, 0, 0, 0 } } },
  { 5.0, { { 2.0, 3.0, 0, 0, 0, 0 } } },
  { 5.0, { { 3.0, 2.0, 0, 0, 0, 0 } } },
};

static void
assert_spread (const MpSpread *sp, double median, double min, double max)
{
  mp_assert_close (sp->median, median, 1e-12);
  mp_assert_close (sp->min, min, 1e-12);
  mp_assert_close (sp->max, max, 1e-12);
}

static void
assert_within (const char *what, double lo, double median, double hi)
{
  if (!(lo <= median && median <= hi))
    fail_msg ("%s: median %.9g outside min-max %.9g - %.9g", what, median, lo, hi);
}

static void
test_measure_spread (void **state)
{
  (void) state;
  MpSpread sp;
  mp_measure_spread ((const double[]) { 3, 1, 2 }, 3, &sp);
  assert_spread (&sp, 2, 1, 3);
  mp_measure_spread ((const double[]) { 4, 1, 2, 10 }, 4, &sp);
  assert_spread (&sp, 3, 1, 10);
  mp_measure_spread (NULL, 0, &sp);
  assert_spread (&sp, 0, 0, 0);
}

static void
test_measure_summary_same_steps (void **state)
{
  (void) state;
  const MpRankStep *ranks[] = { rank0, rank1 };
  MpRankStep job[N_STEPS];
  MpJobSummary sum;
  mp_measure_summarize (ranks, 2, N_STEPS, job, &sum);
  assert_int_equal (sum.time_rank, 1);
  /* each job step is the slowest rank's; rank 1's parts, its bubble the rest */
  assert_spread (&sum.step, 5, 2, 6);
  assert_spread (&sum.t[MP_PHASE_COMPUTE], 2, 1, 3);
  assert_spread (&sum.t[MP_PHASE_TP], 2, 1, 3);
  assert_spread (&sum.t[MP_PHASE_BUBBLE], 0, 0, 1);
  for (guint s = 0; s < N_STEPS; s++)
    {
      double total = 0;
      for (int p = 0; p < MP_PHASE_N; p++)
        total += job[s].time.t[p];
      mp_assert_close (total, job[s].step_s, 1e-12);
    }
  for (int p = 0; p < MP_PHASE_N; p++)
    assert_within (mp_phase_name (p), sum.t[p].min, sum.t[p].median, sum.t[p].max);
}

/* One rank's text as mp_measure_rank_json writes it (the keys the job reads). */
static GBytes *
rank_text (guint rank, const MpRankStep *steps)
{
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "{\"rank\":%u,\"stage\":0,\"tp_rank\":%u,\"dp_rank\":0,"
                          "\"steps\":[", rank, rank);
  for (guint i = 0; i < N_STEPS; i++)
    {
      g_string_append_printf (s, "%s{\"step_s\":%.17g,\"time_s\":{", i ? "," : "",
                              steps[i].step_s);
      for (int p = 0; p < MP_PHASE_N; p++)
        g_string_append_printf (s, "%s\"%s\":%.17g", p ? "," : "", mp_phase_name (p), steps[i].time.t[p]);
      g_string_append (s, "}}");
    }
  g_string_append (s, "],\"memory_bytes\":{\"peak\":1},\"trace\":[]}");
  return g_string_free_to_bytes (s);
}

static double
member (JsonObject *o, const char *obj, const char *key)
{
  return json_object_get_double_member (json_object_get_object_member (o, obj), key);
}

static void
test_measure_job_json_spread_holds (void **state)
{
  (void) state;
  g_autoptr(GPtrArray) texts = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_ptr_array_add (texts, rank_text (0, rank0));
  g_ptr_array_add (texts, rank_text (1, rank1));
  double losses[N_STEPS] = { 0 }, norms[N_STEPS] = { 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = mp_measure_job_json (texts, NULL, losses, norms, N_STEPS, 0,
                                                  "host", NULL, &error);
  assert_non_null (root);
  JsonObject *m = json_node_get_object (root);
  assert_int_equal (json_object_get_int_member (m, "time_s_rank"), 1);
  for (int p = 0; p < MP_PHASE_N; p++)
    assert_within (mp_phase_name (p), member (m, "time_s_min", mp_phase_name (p)),
                   member (m, "time_s", mp_phase_name (p)), member (m, "time_s_max", mp_phase_name (p)));
  assert_within ("step", json_object_get_double_member (m, "step_s_min"),
                 json_object_get_double_member (m, "step_s"),
                 json_object_get_double_member (m, "step_s_max"));
  mp_assert_close (member (m, "time_s", "bubble"), 0, 0);
  mp_assert_close (member (m, "time_s_max", "bubble"), 1, 1e-12);
  JsonArray *steps = json_object_get_array_member (m, "step_times_s");
  assert_int_equal (json_array_get_length (steps), N_STEPS);
  mp_assert_close (json_array_get_double_element (steps, 2), 6, 1e-12);
}

/* A pipeline end's step: a backward, the tied embedding's reduction (most of it spent
 * waiting for the other end), the optimizer. The wait is bubble, the rest dp_comm, and
 * the six parts still add up to the step. */
static void
test_measure_tied_wait_is_bubble (void **state)
{
  (void) state;
  MpInsn insns[3] = { { .kind = MP_INSN_BACKWARD }, { .kind = MP_INSN_REDUCE_TIED },
                      { .kind = MP_INSN_OPTIMIZER } };
  MpProgram prog = { .insns = insns, .n_insns = 3 };
  const MpInsnTime times[3] = { { .t0 = 0, .t1 = 2 },
                                { .t0 = 2, .t1 = 3, .wait_pp_s = 0.75 },
                                { .t0 = 3, .t1 = 3.5 } };
  MpRankStep st;
  mp_measure_attribute (&prog, times, 0, 3.5, &st);
  mp_assert_close (st.time.t[MP_PHASE_COMPUTE], 2, 1e-12);
  mp_assert_close (st.time.t[MP_PHASE_DP], 0.25, 1e-12);
  mp_assert_close (st.time.t[MP_PHASE_BUBBLE], 0.75, 1e-12);
  mp_assert_close (st.time.t[MP_PHASE_OPTIMIZER], 0.5, 1e-12);
  double sum = 0;
  for (int p = 0; p < MP_PHASE_N; p++)
    sum += st.time.t[p];
  mp_assert_close (sum, st.step_s, 1e-12);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_measure_spread),
    cmocka_unit_test (test_measure_summary_same_steps),
    cmocka_unit_test (test_measure_job_json_spread_holds),
    cmocka_unit_test (test_measure_tied_wait_is_bubble),
  };
  return cmocka_run_group_tests_name ("measure", tests, NULL, NULL);
}
