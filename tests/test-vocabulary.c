/* test-vocabulary.c - cmocka tests of program/: the one order on parallel configs, the
 * chunk count, and the name tables of phases and memory kinds with the time_s writer. */
#include "tests/test-util.h"
#include "program/program.h"

#include <string.h>

static int
sign (int v)
{
  return (v > 0) - (v < 0);
}

/* compare (a, b) == -compare (b, a), and equal () agrees with it. */
static void
assert_antisymmetric (const MpParallelConfig *a, const MpParallelConfig *b)
{
  assert_int_equal (sign (mp_parallel_config_compare (a, b)),
                    -sign (mp_parallel_config_compare (b, a)));
  assert_true (mp_parallel_config_equal (a, b) == (mp_parallel_config_compare (a, b) == 0));
}

static void
test_config_order_every_field (void **state)
{
  (void) state;
  MpParallelConfig a, b;
  mp_parallel_config_init (&a);
  a.pp = 2;
  b = a;
  assert_int_equal (mp_parallel_config_compare (&a, &b), 0);
  assert_true (mp_parallel_config_equal (&a, &b));
  /* The planner's fields order first: tp before pp, whatever comes after. */
  b.tp = 2;
  a.num_micro_batches = 8;
  assert_true (mp_parallel_config_compare (&a, &b) < 0);
  assert_antisymmetric (&a, &b);
  /* Fields a search holds fixed still tell configs apart (verify's old same_config). */
  b = a;
  b.num_micro_batches = 4;
  assert_true (mp_parallel_config_compare (&b, &a) < 0);
  b = a;
  b.flash_attention = FALSE;
  assert_false (mp_parallel_config_equal (&a, &b));
  assert_antisymmetric (&a, &b);
  b = a;
  b.bucket_bytes = 1e6;
  assert_false (mp_parallel_config_equal (&a, &b));
  assert_antisymmetric (&a, &b);
}

static void
test_config_order_tables (void **state)
{
  (void) state;
  MpParallelConfig a, b;
  mp_parallel_config_init (&a);
  a.pp = 2;
  b = a;
  const guint s1[] = { 3, 5 }, s2[] = { 4, 4 }, s1_copy[] = { 3, 5 };
  /* The balanced split (NULL) first, then by the counts, equal by value. */
  b.chunk_layers = s1;
  assert_true (mp_parallel_config_compare (&a, &b) < 0);
  assert_antisymmetric (&a, &b);
  a.chunk_layers = s2;
  assert_true (mp_parallel_config_compare (&b, &a) < 0);
  a.chunk_layers = s1_copy;
  assert_true (mp_parallel_config_equal (&a, &b));
  /* Placement: the identity (NULL) first; world = pp = 2 entries compared. */
  const guint swap[] = { 1, 0 }, ident[] = { 0, 1 };
  b.placement = swap;
  assert_true (mp_parallel_config_compare (&a, &b) < 0);
  a.placement = ident;
  assert_true (mp_parallel_config_compare (&a, &b) < 0);
  assert_antisymmetric (&a, &b);
}

static void
test_config_chunks (void **state)
{
  (void) state;
  MpParallelConfig c;
  mp_parallel_config_init (&c);
  c.pp = 2;
  c.vpp = 3;
  /* vpp counts only under the interleaved schedule. */
  assert_int_equal (mp_parallel_config_vpp (&c), 1);
  assert_int_equal (mp_parallel_config_chunks (&c), 2);
  c.schedule = MP_SCHEDULE_INTERLEAVED;
  assert_int_equal (mp_parallel_config_vpp (&c), 3);
  assert_int_equal (mp_parallel_config_chunks (&c), 6);
  /* So two 1F1B configs that differ only in an unused vpp compare their 2 chunks. */
  MpParallelConfig a, b;
  mp_parallel_config_init (&a);
  a.pp = 2;
  b = a;
  const guint split[] = { 3, 5 };
  a.chunk_layers = b.chunk_layers = split;
  assert_true (mp_parallel_config_equal (&a, &b));
}

static void
test_phase_names (void **state)
{
  (void) state;
  for (int p = 0; p < MP_PHASE_N; p++)
    {
      MpPhase back;
      assert_true (mp_phase_from_name (mp_phase_name (p), &back));
      assert_int_equal (back, p);
      for (int q = 0; q < p; q++)
        assert_string_not_equal (mp_phase_name (p), mp_phase_name (q));
    }
  MpPhase out = MP_PHASE_N;
  assert_false (mp_phase_from_name ("step", &out));
  assert_false (mp_phase_from_name (NULL, &out));
  assert_int_equal (out, MP_PHASE_N);
  assert_string_equal (mp_phase_name (MP_PHASE_N), "?");
  for (int k = 0; k < MP_MEM_N; k++)
    for (int j = 0; j < k; j++)
      assert_string_not_equal (mp_mem_kind_name (k), mp_mem_kind_name (j));
  assert_string_equal (mp_mem_kind_name (MP_MEM_N), "?");
}

static void
test_step_time (void **state)
{
  (void) state;
  MpStepTime t = { { 0 } };
  assert_int_equal (mp_step_time_dominant (&t), 0);   /* ties: the first */
  t.t[MP_PHASE_BUBBLE] = 2;
  t.t[MP_PHASE_OPTIMIZER] = 2;
  assert_int_equal (mp_step_time_dominant (&t), MP_PHASE_BUBBLE);
  t.t[MP_PHASE_TP] = NAN;
  g_autoptr(JsonNode) node = mp_step_time_to_json (&t);
  JsonObject *o = json_node_get_object (node);
  assert_int_equal (json_object_get_size (o), MP_PHASE_N);
  g_autoptr(GList) members = json_object_get_members (o);
  int p = 0;
  for (GList *l = members; l; l = l->next, p++)
    assert_string_equal (l->data, mp_phase_name (p));   /* in enum order */
  assert_true (JSON_NODE_HOLDS_NULL (json_object_get_member (o, mp_phase_name (MP_PHASE_TP))));
  mp_assert_close (json_object_get_double_member (o, mp_phase_name (MP_PHASE_BUBBLE)), 2, 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_config_order_every_field),
    cmocka_unit_test (test_config_order_tables),
    cmocka_unit_test (test_config_chunks),
    cmocka_unit_test (test_phase_names),
    cmocka_unit_test (test_step_time),
  };
  return cmocka_run_group_tests_name ("vocabulary", tests, NULL, NULL);
}
