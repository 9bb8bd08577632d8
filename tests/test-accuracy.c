/* test-accuracy.c - bench/data/published-runs.yaml, the input of bench/bench-accuracy:
 * it parses, it holds the 50 or more runs, and every run's model (at its seq_len),
 * cluster (its device count) and pins load; a malformed runs file is refused with its
 * location; a run's routing reaches its model; the rows placed on segmented GB200 racks
 * keep their expert groups in one NVLink domain. Not a timing test: the predictions themselves are the benchmark's. */
#include "config.h"
#include "test-util.h"

#include "bench/accuracy.h"
#include "common/error.h"
#include "costmodel/costmodel.h"

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

/* bench/data/published-runs.yaml, loaded (the test fails with the message if not). */
static AccRuns *
published_runs (void)
{
  g_autoptr(GError) error = NULL;
  AccRuns *runs = acc_runs_load (MPPLAN_SRCDIR "/bench/data/published-runs.yaml", &error);
  if (runs == NULL)
    fail_msg ("%s", error->message);
  return runs;
}

static void
test_accuracy_runs_load (void **state)
{
  (void) state;
  g_autoptr(GError) error = NULL;
  g_autoptr(AccRuns) runs = published_runs ();
  assert_true (runs->runs->len >= 50);
  for (guint i = 0; i < runs->runs->len; i++)
    {
      const AccRun *run = g_ptr_array_index (runs->runs, i);
      g_autoptr(MpModel) m = acc_run_model (runs, run, &error);
      if (m == NULL)
        fail_msg ("%s: %s", run->id, error->message);
      assert_int_equal (m->seq_len, run->seq_len);
      g_autoptr(MpCluster) c = acc_run_cluster (runs, run, &error);
      if (c == NULL)
        fail_msg ("%s: %s", run->id, error->message);
      assert_int_equal (c->world_size, run->gpus);
      g_autoptr(MpPlanPins) pins = mp_plan_pins_parse (run->pins, &error);
      if (pins == NULL)
        fail_msg ("%s: %s", run->id, error->message);
      guint fp8 = 0;
      gboolean fp8_precision = strcmp (run->precision, "fp8") == 0
                               || strcmp (run->precision, "mxfp8") == 0;
      assert_int_equal (mp_plan_pins_get (pins, "fp8", &fp8) && fp8, fp8_precision);
      MpStack stack;
      guint pinned = 0;
      assert_int_equal (mp_plan_pins_get (pins, "stack", &pinned),
                        mp_stack_from_name (run->stack, &stack));
      if (mp_stack_from_name (run->stack, &stack))
        assert_int_equal (pinned, stack);
    }
}

/* TEXT as a runs file, loaded: NULL with ERROR set, *PATH_OUT (caller owns) its name. */
static AccRuns *
runs_from_text (const char *text, char **path_out, GError **error)
{
  char *path = g_build_filename (g_get_tmp_dir (), "mpplan-acc-XXXXXX.yaml", NULL);
  int fd = g_mkstemp (path);
  assert_true (fd >= 0);
  assert_true (write (fd, text, strlen (text)) == (ssize_t) strlen (text));
  close (fd);
  AccRuns *runs = acc_runs_load (path, error);
  g_unlink (path);
  *path_out = path;
  return runs;
}

static void
test_accuracy_runs_bad (void **state)
{
  (void) state;
  const char *text = "version: 1\nsources: {a: b}\nruns:\n"
                     "  - {id: x, source: a, family: f, stack: s, model: tiny-gpt,\n"
                     "     seq_len: 128, gpus: 1, cluster: host, precision: bf16,\n"
                     "     global_batch: 4, measured: {tokens: 5}}\n";
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  g_autoptr(AccRuns) runs = runs_from_text (text, &path, &error);
  assert_null (runs);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  g_autofree char *where = g_strdup_printf ("%s:6:", path);
  assert_non_null (strstr (error->message, where));
  assert_non_null (strstr (error->message, "unknown key 'tokens'"));
}

/* `routing:` reaches the run's model: the AutoModel MoE rows (its benchmarks fake a
 * balanced gate) load blocked, the others spread; a dense model is left spread. */
static void
test_accuracy_routing_reaches_model (void **state)
{
  (void) state;
  g_autoptr(GError) error = NULL;
  g_autoptr(AccRuns) runs = published_runs ();
  guint blocked = 0;
  for (guint i = 0; i < runs->runs->len; i++)
    {
      const AccRun *run = g_ptr_array_index (runs->runs, i);
      g_autoptr(MpModel) m = acc_run_model (runs, run, &error);
      assert_non_null (m);
      gboolean am_moe = strcmp (run->source, "automodel") == 0 && m->experts > 0;
      assert_int_equal (run->routing, am_moe ? MP_ROUTING_BLOCKED : MP_ROUTING_SPREAD);
      assert_int_equal (m->routing, run->routing);
      blocked += m->routing == MP_ROUTING_BLOCKED;
    }
  assert_true (blocked >= 4);
  /* A bad value is refused naming the key. */
  const char *text = "version: 1\nsources: {a: b}\nruns:\n"
                     "  - {id: x, source: a, family: f, stack: s, model: tiny-moe,\n"
                     "     seq_len: 128, gpus: 1, cluster: host, precision: bf16,\n"
                     "     routing: random, global_batch: 4,\n"
                     "     measured: {tokens_per_s_per_gpu: 5}}\n";
  g_autofree char *path = NULL;
  g_autoptr(AccRuns) bad = runs_from_text (text, &path, &error);
  assert_null (bad);
  assert_non_null (strstr (error->message, "'routing': unknown value 'random'"));
}

/* The rows on gb200-nvl72-seg16 (bench/data/clusters/: 256-GPU jobs placed by Slurm
 * segment 16, 64 GPUs to a rack): every expert-parallel group of a pinned plan lies in one
 * NVLink domain there, where the same job packed 72 GPUs to a rack would leave some
 * straddling two racks (their all-to-all then over InfiniBand). */
static void
test_accuracy_segmented_placement (void **state)
{
  (void) state;
  g_autoptr(GError) error = NULL;
  g_autoptr(AccRuns) runs = published_runs ();
  guint checked = 0;
  for (guint i = 0; i < runs->runs->len; i++)
    {
      const AccRun *run = g_ptr_array_index (runs->runs, i);
      if (strcmp (run->cluster, "gb200-nvl72-seg16") != 0)
        continue;
      g_autoptr(MpPlanPins) pins = mp_plan_pins_parse (run->pins, &error);
      assert_non_null (pins);
      MpParallelConfig cfg;
      mp_parallel_config_init (&cfg);
      assert_true (mp_plan_pins_get (pins, "dp", &cfg.dp) && mp_plan_pins_get (pins, "tp", &cfg.tp)
                   && mp_plan_pins_get (pins, "pp", &cfg.pp));
      if (!mp_plan_pins_get (pins, "ep", &cfg.ep) || cfg.ep < 2)
        continue;
      g_autoptr(MpModel) m = acc_run_model (runs, run, &error);
      g_autoptr(MpCluster) seg = acc_run_cluster (runs, run, &error);
      g_autofree char *spec = g_strdup_printf ("gb200-nvl72:%ug", (guint) run->gpus);
      g_autoptr(MpCluster) packed = mp_cluster_load (spec, &error);
      assert_true (m != NULL && seg != NULL && packed != NULL);
      assert_int_equal (seg->world_size, 256);
      g_autoptr(MpCostContext) in_seg = mp_cost_context_new (m, seg, NULL);
      g_autoptr(MpCostContext) in_packed = mp_cost_context_new (m, packed, NULL);
      assert_true (mp_cost_groups_in_domains (in_seg, &cfg, FALSE, TRUE));
      assert_false (mp_cost_groups_in_domains (in_packed, &cfg, FALSE, TRUE));
      checked++;
    }
  assert_true (checked >= 4);   /* the three DeepSeek-V3 rows and Qwen3-235B */
}

/* A run of MODEL on 8 H100s at global batch 16 pinned to PLAN, as runs-file text. */
static char *
h100_row (const char *id, const char *model, const char *plan)
{
  return g_strdup_printf ("  - {id: %s, source: a, family: f, stack: megatron, model: %s, "
                          "seq_len: 128, gpus: 8, cluster: dgx-h100, precision: bf16, "
                          "global_batch: 16, plan: {%s}, "
                          "measured: {tokens_per_s_per_gpu: 5}}\n", id, model, plan);
}

/* An MoE run's prediction carries its MoE shape (bench-accuracy --moe): tiny-moe's three
 * MoE blocks (its first is dense) over pp 2, once per micro-batch of 4, its 8 experts over
 * ep 2 and a micro-batch's 1 x 128 tokens; a dense run's are zeros. */
static void
test_accuracy_moe_shape (void **state)
{
  (void) state;
  g_autofree char *moe_row = h100_row ("moe", "tiny-moe", "dp: 4, tp: 1, pp: 2, ep: 2, "
                                       "micro_batch_size: 1, num_micro_batches: 4");
  g_autofree char *dense_row = h100_row ("dense", "tiny-gpt", "dp: 8, tp: 1, pp: 1");
  g_autofree char *text = g_strconcat ("version: 1\nsources: {a: b}\nruns:\n", moe_row,
                                       dense_row, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  g_autoptr(AccRuns) runs = runs_from_text (text, &path, &error);
  assert_non_null (runs);
  AccResult moe, dense;
  assert_true (acc_run_predict (runs, g_ptr_array_index (runs->runs, 0), &moe, &error));
  assert_true (acc_run_predict (runs, g_ptr_array_index (runs->runs, 1), &dense, &error));
  assert_true (moe.planned && dense.planned);
  mp_assert_close (moe.moe_layer_passes, 3.0 / 2 * 4, 1e-12);
  mp_assert_close (moe.local_experts, 4, 0);
  mp_assert_close (moe.micro_tokens, 128, 0);
  mp_assert_close (dense.moe_layer_passes + dense.local_experts + dense.micro_tokens, 0, 0);
  acc_result_clear (&moe);
  acc_result_clear (&dense);
}

/* A published plan mpplan thinks overflows is still timed as stated, on roomier devices
 * (over_memory), with its reason and its overflowing memory: gpt3-13b on 8 H100s as pure
 * data parallelism without ZeRO (16 bytes a parameter: 208 GB a device) times the same
 * step as on devices with room, and its peak exceeds the real capacity. */
static void
test_accuracy_over_memory (void **state)
{
  (void) state;
  g_autofree char *row = h100_row ("big", "gpt3-13b", "dp: 8, tp: 1, pp: 1, zero: 0, "
                                   "recompute: none, micro_batch_size: 1, num_micro_batches: 2");
  g_autofree char *text = g_strconcat ("version: 1\nsources: {a: b}\nruns:\n", row, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  g_autoptr(AccRuns) runs = runs_from_text (text, &path, &error);
  assert_non_null (runs);
  const AccRun *run = g_ptr_array_index (runs->runs, 0);
  AccResult res;
  assert_true (acc_run_predict (runs, run, &res, &error));
  assert_true (res.planned && res.over_memory && res.mem_known);
  assert_non_null (strstr (res.reason, "fits in memory"));
  assert_true (res.mem.peak_bytes > res.mem.capacity_bytes);
  assert_true (res.pred_step_s > 0 && res.predicted > 0);
  mp_assert_close (res.error, res.measured / res.predicted - 1, 1e-12);
  acc_result_clear (&res);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_accuracy_runs_load),
    cmocka_unit_test (test_accuracy_runs_bad),
    cmocka_unit_test (test_accuracy_routing_reaches_model),
    cmocka_unit_test (test_accuracy_segmented_placement),
    cmocka_unit_test (test_accuracy_moe_shape),
    cmocka_unit_test (test_accuracy_over_memory),
  };
  return cmocka_run_group_tests_name ("accuracy", tests, NULL, NULL);
}
