/* test-profile.c - calibration profiles: the YAML file round-trips exactly, its problems
 * are located, the cost model uses its measured GEMM rates and collective tables in place
 * of the built-in curves, and the right profile is found for a cluster. */
#include "config.h"
#include "tests/test-util.h"
#include "costmodel/costmodel.h"
#include "common/error.h"
#include "common/stats.h"

#include <glib/gstdio.h>
#include <string.h>

/* Two ranks of cpu-core on one node, like the `host` cluster on a 2-core machine. */
static const char cluster_yaml[] =
  "name: host\nnodes: 1\ndevices_per_node: 2\n"
  "device: {name: cpu-core, calibrated: false, memory: 2 GiB, memory_bandwidth: 5 GB/s,\n"
  "         peak: {fp32: 50 GFLOPS, bf16: 50 GFLOPS}}\n"
  "device_overhead: 128 MiB\nlinks:\n  - {tier: node, name: shared-memory, bandwidth: 2.5 GB/s, latency: 1 us}\n";

static MpCluster *
two_cores (void)
{
  GError *error = NULL;
  MpCluster *c = mp_cluster_load_data ("two-cores", cluster_yaml, strlen (cluster_yaml),
                                       &error);
  if (c == NULL)
    fail_msg ("%s", error->message);
  return c;
}

/* A profile with awkward numbers (thirds, 0.1 + 0.2) that only an exact writer keeps. */
static MpCostProfile *
sample_profile (const char *hostname)
{
  MpCostProfile *p = mp_cost_profile_new ("cpu-core");
  MpProfileMachine m = { (char *) hostname, "Some \"CPU\": model (R)", 2, "2025-01-01T00:00:00Z",
                         "0.1.0" };
  mp_cost_profile_set_machine (p, &m);
  const double mm[] = { 16, 256 }, n[] = { 64, 512 }, k[] = { 32, 128, 1024 };
  double rate[12];
  for (int i = 0; i < 12; i++)
    rate[i] = 1e9 * (i + 1) / 3.0;
  assert_true (mp_cost_profile_set_gemm (p, MP_DTYPE_FP32, mm, 2, n, 2, k, 3, rate, NULL));
  mp_cost_profile_set_mem_bw (p, (0.1 + 0.2) * 1e10);
  mp_cost_profile_set_cold_weight_bw (p, 8.5e9 / 3);
  const double sizes[] = { 8, 1024, 1048576 }, busbw[] = { 1e6, 1e8 / 3, 2.5e9 };
  for (int c = 0; c < MP_COLL_N; c++)
    assert_true (mp_cost_profile_set_coll (p, (MpCollKind) c, MP_TIER_NODE, 2, sizes, busbw, 3,
                                           NULL));
  const double seq[] = { 128, 1024 }, fwd[] = { 1e9 / 3, 2e9 / 7 }, bwd[] = { 2.5e9 / 3, 1e9 };
  assert_true (mp_cost_profile_set_attention (p, seq, 2, fwd, bwd, NULL));
  mp_cost_profile_set_optimizer (p, 1e8 / 3, 0);
  mp_cost_profile_set_elementwise (p, MP_EW_NORM, 1e9 / 7, 3e9 / 7);
  mp_cost_profile_set_elementwise (p, MP_EW_LOSS, (0.1 + 0.2) * 1e9, 1e9);
  return p;
}

static void
test_profile_round_trip (void **state)
{
  g_autoptr(MpCostProfile) p = sample_profile ("box");
  g_autofree char *yaml = mp_cost_profile_to_yaml (p, "mpplan calibrate --quick");
  GError *error = NULL;
  g_autoptr(MpCostProfile) q = mp_cost_profile_load_data ("p.yaml", yaml, strlen (yaml), &error);
  if (q == NULL)
    fail_msg ("%s\n%s", error->message, yaml);
  g_autofree char *again = mp_cost_profile_to_yaml (q, "mpplan calibrate --quick");
  assert_string_equal (yaml, again);
  assert_true (mp_cost_profile_mem_bw (q) == (0.1 + 0.2) * 1e10);
  assert_true (mp_cost_profile_cold_weight_bw (q) == 8.5e9 / 3);
  assert_string_equal (mp_cost_profile_machine (q)->cpu, "Some \"CPU\": model (R)");
  assert_int_equal (mp_cost_profile_machine (q)->cores, 2);
  assert_true (mp_cost_profile_gemm_flops (q, MP_DTYPE_FP32, 100, 200, 300)
               == mp_cost_profile_gemm_flops (p, MP_DTYPE_FP32, 100, 200, 300));
  assert_true (mp_cost_profile_coll_busbw (q, MP_COLL_SEND_RECV, MP_TIER_NODE, 5000)
               == mp_cost_profile_coll_busbw (p, MP_COLL_SEND_RECV, MP_TIER_NODE, 5000));
  assert_true (mp_cost_profile_attention_flops (q, 128, TRUE) == 2.5e9 / 3);
  assert_true (mp_cost_profile_attention_flops (q, 500, FALSE)
               == mp_cost_profile_attention_flops (p, 500, FALSE));
  assert_true (mp_cost_profile_optimizer_params (q, MP_OPTIM_ADAM) == 1e8 / 3);
  assert_true (mp_cost_profile_optimizer_params (q, MP_OPTIM_SGD) == 0);
  assert_true (mp_cost_profile_elementwise_bps (q, MP_EW_NORM, FALSE) == 1e9 / 7);
  assert_true (mp_cost_profile_elementwise_bps (q, MP_EW_LOSS, FALSE) == (0.1 + 0.2) * 1e9);
  assert_true (mp_cost_profile_elementwise_bps (q, MP_EW_ACTIVATION, FALSE) == 0);
}

/* The spread of a calibration's repeats round-trips through the file; a kind not recorded
 * stays unrecorded (-1, no repeats). */
static void
test_profile_spread_round_trip (void **state)
{
  g_autoptr(MpCostProfile) p = sample_profile ("box");
  assert_true (mp_cost_profile_spread (p, MP_SPREAD_GEMM, NULL) == -1);
  mp_cost_profile_set_spread (p, MP_SPREAD_GEMM, 5, 0.1 / 3);
  mp_cost_profile_set_spread (p, MP_SPREAD_MEMORY, 10, 0);
  g_autofree char *yaml = mp_cost_profile_to_yaml (p, NULL);
  GError *error = NULL;
  g_autoptr(MpCostProfile) q = mp_cost_profile_load_data ("p.yaml", yaml, strlen (yaml), &error);
  if (q == NULL)
    fail_msg ("%s\n%s", error->message, yaml);
  g_autofree char *again = mp_cost_profile_to_yaml (q, NULL);
  assert_string_equal (yaml, again);
  guint reps = 0;
  assert_true (mp_cost_profile_spread (q, MP_SPREAD_GEMM, &reps) == 0.1 / 3);
  assert_int_equal (reps, 5);
  assert_true (mp_cost_profile_spread (q, MP_SPREAD_MEMORY, &reps) == 0);
  assert_int_equal (reps, 10);
  assert_true (mp_cost_profile_spread (q, MP_SPREAD_KERNELS, &reps) == -1);
  assert_int_equal (reps, 0);
  /* A negative spread or no repeats is bad input, located. */
  static const char bad[] = "kind: profile\nversion: 1\n"
                            "spread:\n  gemm: {repeats: 0, rel_iqr: -0.5}\n";
  assert_null (mp_cost_profile_load_data ("bad.yaml", bad, strlen (bad), &error));
  assert_non_null (strstr (error->message, "bad.yaml:4:"));
  g_error_free (error);
}

/* The calibration's statistic is the median: one wild repeat (a burst of load) does not
 * move it, where the mean and the best would; the spread is the interquartile range over
 * the median, with quartiles interpolated as numpy.percentile does. */
static void
test_stat_median_ignores_an_outlier (void **state)
{
  double x[] = { 10, 11, 9, 100, 10 };   /* sorted: 9 10 10 11 100 */
  double spread = -1;
  assert_true (mp_stat_median (x, 5, &spread) == 10);
  assert_true (spread == (11.0 - 10.0) / 10.0);   /* q1 = 10, q3 = 11 */
  double lucky[] = { 20, 20, 2, 20, 21 };   /* one too-fast repeat leaves it too */
  assert_true (mp_stat_median (lucky, 5, NULL) == 20);
  double even[] = { 4, 1, 3, 2 };   /* the middle two averaged; q1 1.75, q3 3.25 */
  assert_true (mp_stat_median (even, 4, &spread) == 2.5);
  mp_assert_close (spread, 1.5 / 2.5, 1e-12);
  double one = 7;
  assert_true (mp_stat_median (&one, 1, &spread) == 7 && spread == 0);
}

/* tiny-gpt on two cores, costed with the sample profile (ctx) and without it (plain). */
typedef struct {
  MpCluster *cluster;
  MpModel *model;
  MpCostProfile *p;
  MpCostContext *ctx, *plain;
} Costed;

static int
costed_setup (void **state)
{
  Costed *f = g_new0 (Costed, 1);
  f->cluster = two_cores ();
  f->model = mp_model_load ("tiny-gpt", NULL);
  f->p = sample_profile ("box");
  if (f->model == NULL)
    return -1;
  f->ctx = mp_cost_context_new (f->model, f->cluster, f->p);
  f->plain = mp_cost_context_new (f->model, f->cluster, NULL);
  *state = f;
  return 0;
}

static int
costed_teardown (void **state)
{
  Costed *f = *state;
  mp_cost_context_free (f->plain);
  mp_cost_context_free (f->ctx);
  mp_cost_profile_free (f->p);
  mp_model_free (f->model);
  mp_cluster_free (f->cluster);
  g_free (f);
  return 0;
}

/* Measured attention and element-wise rates replace the curve and the roofline: the time
 * is exactly the charged FLOPs or bytes over the rate; unmeasured classes are unchanged. */
static void
test_profile_kernel_rates (void **state)
{
  Costed *f = *state;
  const MpModel *model = f->model;
  const MpCostDevice *dev = mp_cost_device (f->ctx, 0), *pdev = mp_cost_device (f->plain, 0);
  for (int bwd = 0; bwd <= 1; bwd++)
    {
      MpKernelCost a;
      mp_cost_flash_attention (dev, MP_DTYPE_FP32, 2, 4, 4, 64, 128, 128, TRUE, bwd, &a);
      double flops = mp_cost_attention_flops (2, 4, 64, 128, 128, TRUE, bwd);
      assert_true (a.flops == flops);
      mp_assert_close (a.time_s, flops / (bwd ? 2.5e9 / 3 : 1e9 / 3), 1e-12);
    }
  MpKernelCost k, roof;
  double bytes = 1e6;
  mp_cost_elementwise_kernel (dev, MP_EW_NORM, TRUE, bytes, &k);
  mp_assert_close (k.time_s, bytes / (3e9 / 7), 1e-12);
  mp_cost_elementwise_kernel (dev, MP_EW_LOSS, FALSE, bytes, &k);
  mp_assert_close (k.time_s, bytes / ((0.1 + 0.2) * 1e9), 1e-12);
  /* No activation rate, no profile: the roofline, as before. */
  mp_cost_elementwise_kernel (dev, MP_EW_ACTIVATION, FALSE, bytes, &k);
  mp_cost_memory_kernel (dev, bytes, 0, &roof);
  assert_true (k.time_s == roof.time_s);
  mp_cost_elementwise_kernel (pdev, MP_EW_NORM, FALSE, bytes, &k);
  mp_cost_memory_kernel (pdev, bytes, 0, &roof);
  assert_true (k.time_s == roof.time_s);
  /* The IR's ops map to the classes: tiny-gpt has a norm, gelu and a loss. */
  guint seen[MP_EW_N + 1] = { 0 };
  for (guint l = 0; l < model->n_layers; l++)
    for (guint o = 0; o < model->layers[l].n_ops; o++)
      seen[mp_cost_op_ew_class (model, &model->layers[l].ops[o])]++;
  assert_true (seen[MP_EW_NORM] > 0 && seen[MP_EW_ACTIVATION] == 4 && seen[MP_EW_LOSS] == 1);
}

/* The attention rate follows the key length: each sample at its own length, log-log in
 * between (the geometric mean halfway in log), the end samples beyond the table. */
static void
test_profile_attention_by_length (void **state)
{
  g_autoptr(MpCostProfile) p = sample_profile ("box");
  assert_true (mp_cost_profile_attention_flops (p, 1024, FALSE) == 2e9 / 7);
  mp_assert_close (mp_cost_profile_attention_flops (p, sqrt (128.0 * 1024), FALSE),
                   sqrt (1e9 / 3 * 2e9 / 7), 1e-12);
  assert_true (mp_cost_profile_attention_flops (p, 16, TRUE) == 2.5e9 / 3);
  assert_true (mp_cost_profile_attention_flops (p, 1e6, TRUE) == 1e9);
  /* A profile from before the table: one rate for every length. */
  static const char old[] = "kind: profile\nversion: 1\n"
                            "attention: {fwd_flops_per_s: 3 GFLOPS, bwd_flops_per_s: 5e9}\n";
  GError *error = NULL;
  g_autoptr(MpCostProfile) q = mp_cost_profile_load_data ("old.yaml", old, strlen (old), &error);
  if (q == NULL)
    fail_msg ("%s", error->message);
  assert_true (mp_cost_profile_attention_flops (q, 128, FALSE) == 3e9);
  assert_true (mp_cost_profile_attention_flops (q, 4096, TRUE) == 5e9);
  /* Lengths out of order, or one rate short, are refused where they are. */
  static const char bad[] = "kind: profile\nversion: 1\nattention:\n  seq: [256, 128]\n"
                            "  fwd_flops_per_s: [1e9, 2e9]\n  bwd_flops_per_s: [1e9]\n";
  g_autoptr(MpCostProfile) r = mp_cost_profile_load_data ("bad.yaml", bad, strlen (bad), &error);
  assert_null (r);
  assert_non_null (strstr (error->message, "bad.yaml:4:"));
  assert_non_null (strstr (error->message, "strictly increasing"));
  g_clear_error (&error);
  const double seq[] = { 256, 128 }, rate[] = { 1e9, 2e9 };
  assert_false (mp_cost_profile_set_attention (p, seq, 2, rate, rate, &error));
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  g_clear_error (&error);
}

/* A measured optimizer rate sets the stage's optimizer time: the parameters the rank
 * updates over the rate (SGD, not measured here, keeps the byte roofline). */
static void
test_profile_optimizer_rate (void **state)
{
  Costed *f = *state;
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  MpStageTime st, roof;
  mp_cost_stage_times (f->ctx, &cfg, &st);
  mp_cost_stage_times (f->plain, &cfg, &roof);
  mp_assert_close (st.optimizer_s, f->model->params_total / (1e8 / 3), 1e-9);
  assert_true (fabs (st.optimizer_s - roof.optimizer_s) > 0.1 * roof.optimizer_s);
}

/* Every problem is reported, each at its line and column. */
static void
test_profile_problems_located (void **state)
{
  static const char bad[] =
    "kind: profile\nversion: 1\ndevise: cpu-core\n"
    "collectives:\n  - {kind: all_reduce, tier: nod, ranks: 2, sizes: [8], busbw: [1e6]}\n";
  GError *error = NULL;
  g_autoptr(MpCostProfile) p = mp_cost_profile_load_data ("bad.yaml", bad, strlen (bad), &error);
  assert_null (p);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  assert_non_null (strstr (error->message, "bad.yaml:3:1: unknown key 'devise'"));
  assert_non_null (strstr (error->message, "bad.yaml:5:"));
  assert_non_null (strstr (error->message, "did you mean 'node'"));
  g_error_free (error);
}

/* With a profile, a GEMM takes the profile's interpolated rate, not the curve's. */
static void
test_profile_gemm_replaces_curve (void **state)
{
  Costed *f = *state;
  const MpCostProfile *p = f->p;
  const MpCostDevice *dev = mp_cost_device (f->ctx, 0);
  assert_ptr_equal (dev->profile, p);
  MpKernelCost cost, curve;
  mp_cost_gemm (dev, MP_DTYPE_FP32, 128, 256, 512, 1, &cost);
  mp_cost_gemm (mp_cost_device (f->plain, 0), MP_DTYPE_FP32, 128, 256, 512, 1, &curve);
  double rate = mp_cost_profile_gemm_flops (p, MP_DTYPE_FP32, 128, 256, 512);
  mp_assert_close (cost.time_s, 2.0 * 128 * 256 * 512 / rate, 1e-12);
  assert_true (fabs (cost.time_s - curve.time_s) > 0.1 * curve.time_s);
  /* A CPU computes bf16 in fp32: the fp32 table serves it. */
  MpKernelCost bf16;
  mp_cost_gemm (dev, MP_DTYPE_BF16, 128, 256, 512, 1, &bf16);
  mp_assert_close (bf16.time_s, cost.time_s, 1e-12);
}

/* A collective inside the node takes its time from the measured busbw table. */
static void
test_profile_collective_from_table (void **state)
{
  g_autoptr(MpCluster) cluster = two_cores ();
  g_autoptr(MpModel) model = mp_model_load ("tiny-gpt", NULL);
  g_autoptr(MpCostProfile) p = sample_profile ("box");
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (model, cluster, p);
  const guint ranks[] = { 0, 1 };
  MpGroupSpan span;
  mp_cluster_span (cluster, NULL, ranks, 2, &span);
  MpCollCost out;
  mp_cost_collective (ctx, mp_cost_device (ctx, 0), MP_COLL_ALL_REDUCE, 65536, &span,
                      MP_ALGO_AUTO, &out);
  assert_true (out.from_profile);
  double busbw = mp_cost_profile_coll_busbw (p, MP_COLL_ALL_REDUCE, MP_TIER_NODE, 65536);
  mp_assert_close (out.time_s, 65536 * 2.0 * (2 - 1) / 2 / busbw, 1e-12);
}

/* Applying a profile to a placeholder device puts the measured numbers in. */
static void
test_profile_apply_replaces_placeholders (void **state)
{
  g_autoptr(MpCluster) loaded = two_cores ();
  g_autoptr(MpCostProfile) p = sample_profile ("box");
  assert_false (loaded->groups[0].device.calibrated);
  guint applied = 0;
  g_autoptr(MpCluster) cluster = mp_cost_profile_apply (p, loaded, "p.yaml", &applied);
  assert_int_equal (applied, 1);
  /* the loaded cluster stays as it was */
  assert_false (loaded->groups[0].device.calibrated);
  assert_null (loaded->profile);
  const MpDevice *d = &cluster->groups[0].device;
  assert_true (d->calibrated);
  assert_true (d->mem_bw_Bps == mp_cost_profile_mem_bw (p));
  mp_assert_close (d->peak_flops[MP_DTYPE_FP32], 4e9, 1e-12);
  mp_assert_close (d->peak_flops[MP_DTYPE_BF16], 4e9, 1e-12);
  assert_true (d->peak_flops[MP_DTYPE_FP16] == 0);
  assert_string_equal (cluster->profile, "p.yaml");
}

static char *
write_profile (const char *dir, const char *name, const char *hostname)
{
  g_autoptr(MpCostProfile) p = sample_profile (hostname);
  g_autofree char *yaml = mp_cost_profile_to_yaml (p, NULL);
  char *path = g_build_filename (dir, name, NULL);
  assert_true (g_file_set_contents (path, yaml, -1, NULL));
  return path;
}

/* `host` finds this machine's profile (MPPLAN_PROFILE), never another machine's. */
static void
test_profile_host_lookup (void **state)
{
  g_autofree char *dir = g_dir_make_tmp ("mpplan-profile-XXXXXX", NULL);
  g_autofree char *mine = write_profile (dir, "mine.yaml", g_get_host_name ());
  g_autofree char *other = write_profile (dir, "other.yaml", "not-this-machine");
  g_autoptr(MpCluster) cluster = two_cores ();
  GError *error = NULL;
  g_autofree char *used = NULL;

  g_setenv ("MPPLAN_PROFILE", mine, TRUE);
  g_autoptr(MpCostProfile) p = mp_cost_profile_for_cluster (cluster, NULL, &used, &error);
  assert_non_null (p);
  assert_string_equal (used, mine);

  g_setenv ("MPPLAN_PROFILE", other, TRUE);
  g_autoptr(MpCostProfile) q = mp_cost_profile_for_cluster (cluster, NULL, NULL, &error);
  assert_null (q);
  assert_null (error);

  g_setenv ("MPPLAN_PROFILE", "", TRUE);
  assert_null (mp_cost_profile_host_path ());
  /* An explicit profile applies whatever machine measured it. */
  g_autoptr(MpCostProfile) r = mp_cost_profile_for_cluster (cluster, other, NULL, &error);
  assert_non_null (r);
  g_unlink (mine);
  g_unlink (other);
  g_rmdir (dir);
}

/* A cluster file's `profile:` is relative to the cluster file. */
static void
test_profile_cluster_key_relative (void **state)
{
  g_autofree char *dir = g_dir_make_tmp ("mpplan-profile-XXXXXX", NULL);
  g_autofree char *prof = write_profile (dir, "p.yaml", "elsewhere");
  g_autofree char *text = g_strconcat (cluster_yaml, "profile: p.yaml\n", NULL);
  g_autofree char *cpath = g_build_filename (dir, "c.yaml", NULL);
  assert_true (g_file_set_contents (cpath, text, -1, NULL));
  GError *error = NULL;
  g_autoptr(MpCluster) cluster = mp_cluster_load_file (cpath, &error);
  assert_non_null (cluster);
  g_autofree char *used = NULL;
  g_autoptr(MpCostProfile) p = mp_cost_profile_for_cluster (cluster, NULL, &used, &error);
  assert_non_null (p);
  assert_string_equal (used, prof);
  g_unlink (prof);
  g_unlink (cpath);
  g_rmdir (dir);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_profile_round_trip),
    cmocka_unit_test (test_profile_problems_located),
    cmocka_unit_test (test_profile_spread_round_trip),
    cmocka_unit_test (test_stat_median_ignores_an_outlier),
    cmocka_unit_test_setup_teardown (test_profile_gemm_replaces_curve, costed_setup, costed_teardown),
    cmocka_unit_test_setup_teardown (test_profile_kernel_rates, costed_setup, costed_teardown),
    cmocka_unit_test (test_profile_attention_by_length),
    cmocka_unit_test_setup_teardown (test_profile_optimizer_rate, costed_setup, costed_teardown),
    cmocka_unit_test (test_profile_collective_from_table),
    cmocka_unit_test (test_profile_apply_replaces_placeholders),
    cmocka_unit_test (test_profile_host_lookup),
    cmocka_unit_test (test_profile_cluster_key_relative),
  };
  return cmocka_run_group_tests_name ("profile", tests, NULL, NULL);
}
