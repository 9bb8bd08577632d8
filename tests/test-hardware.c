/* test-hardware.c - cmocka tests of clusters as they are built and precision as H100/B200
 * runs use it: the NVLink domain tier (spans, collectives over three tiers, calibration
 * tables of the tier, the search keeping TP/EP groups in a domain), the B200 and GB200
 * device classes, and Transformer-Engine-style FP8 (GEMM rate, casts, weight copies).
 *
 * Zoo files come through MPPLAN_DATADIR; fixtures from the source tree's tests/data/. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/test-util.h"
#include "tests/test-load.h"
#include "costmodel/costmodel.h"
#include "planner/planner.h"
#include "common/error.h"

#include <string.h>

#define DATA(name) MPPLAN_SRCDIR "/tests/data/" name
#define GB200_256 DATA ("cluster-gb200-256.yaml")

/* The span of N ranks FIRST, FIRST + STRIDE, ... (rank r on device r). */
static void
span_of (const MpCluster *c, guint first, guint n, guint stride, MpGroupSpan *span)
{
  g_autofree guint *r = g_new (guint, n);
  for (guint i = 0; i < n; i++)
    r[i] = first + i * stride;
  mp_cluster_span (c, NULL, r, n, span);
}

/* ---- the domain tier ------------------------------------------------------------------ */

/* A 256-GPU job over GB200 trays of 4: 4 domains of 18 trays (the last one 10). A TP=8
 * group is two trays of one domain: it crosses the domain tier and nothing wider. */
static void
test_domain_spans (void **state)
{
  (void) state;
  g_autoptr(MpCluster) c = cluster_ok (GB200_256);
  assert_int_equal (c->world_size, 256);
  assert_int_equal (c->nodes_per_domain, 18);
  assert_int_equal (c->domains, 4);
  assert_int_equal (mp_cluster_domain_of (c, 71), 0);
  assert_int_equal (mp_cluster_domain_of (c, 72), 1);
  assert_int_equal (mp_cluster_domain_of (c, 255), 3);
  MpGroupSpan s;
  for (guint g = 0; g < 256 / 8; g++)
    {
      span_of (c, 8 * g, 8, 1, &s);
      assert_int_equal (s.n_domains, 1);
      assert_int_equal (s.n_nodes, 2);
      assert_int_equal (s.widest, MP_TIER_DOMAIN);
    }
  mp_assert_close (s.bw_Bps[MP_TIER_DOMAIN], 900e9, 1e-12);
  /* TP=16 at ranks 64-79 straddles racks 0 and 1. */
  span_of (c, 64, 16, 1, &s);
  assert_int_equal (s.n_domains, 2);
  assert_int_equal (s.ranks_per_domain, 8);
  assert_int_equal (s.widest, MP_TIER_CLUSTER);
  mp_assert_close (s.bw_Bps[MP_TIER_CLUSTER], 50e9, 1e-12);   /* one NDR NIC per GPU */
  /* One rank per tray over a rack: the domain tier only, 18 of its nodes. */
  span_of (c, 0, 18, 4, &s);
  assert_int_equal (s.ranks_per_node, 1);
  assert_int_equal (s.nodes_per_domain, 18);
  assert_int_equal (s.widest, MP_TIER_DOMAIN);
  /* Inside one tray: the node tier. */
  span_of (c, 4, 4, 1, &s);
  assert_int_equal (s.widest, MP_TIER_NODE);
  assert_int_equal (mp_span_widest (&s), MP_TIER_NODE);
}

/* The zoo's NVL72 scales by racks; an old-style cluster has no domains. */
static void
test_domain_zoo (void **state)
{
  (void) state;
  g_autoptr(MpCluster) one = cluster_ok ("gb200-nvl72");
  assert_int_equal (one->world_size, 72);
  assert_int_equal (one->groups[0].devices_per_node, 4);
  assert_int_equal (one->domains, 1);
  g_autoptr(MpCluster) job = cluster_ok ("gb200-nvl72:256g");
  assert_int_equal (job->world_size, 256);
  assert_int_equal (job->nodes, 64);
  assert_int_equal (job->domains, 4);
  g_autoptr(MpCluster) h100 = cluster_ok ("dgx-h100:64g");
  assert_int_equal (h100->nodes, 8);
  g_autoptr(GError) error = NULL;
  assert_null (mp_cluster_load ("gb200-nvl72:6g", &error));
  assert_non_null (strstr (error->message, "not a whole number of nodes of 4 devices"));
  g_clear_error (&error);
  assert_null (mp_cluster_load ("gb200-nvl72:g", &error));
  g_autoptr(MpCluster) four = cluster_ok ("gb200-nvl72:4");
  assert_int_equal (four->world_size, 288);
  assert_int_equal (four->nodes, 72);
  assert_int_equal (four->domains, 4);
  assert_true (four->has_link[MP_TIER_DOMAIN]);
  g_autoptr(MpCluster) b200 = cluster_ok ("dgx-b200");
  assert_int_equal (b200->world_size, 256);
  assert_int_equal (b200->nodes_per_domain, 1);
  assert_false (b200->has_link[MP_TIER_DOMAIN]);
  mp_assert_close (b200->links[MP_TIER_NODE].bw_Bps, 900e9, 1e-12);
  mp_assert_close (b200->groups[0].device.peak_flops[MP_DTYPE_BF16], 2.25e15, 1e-12);
  mp_assert_close (b200->groups[0].device.peak_flops[MP_DTYPE_FP8], 4.5e15, 1e-12);
  mp_assert_close (four->groups[0].device.peak_flops[MP_DTYPE_BF16], 2.5e15, 1e-12);
  mp_assert_close (four->groups[0].device.mem_bw_Bps, 8e12, 1e-12);
  /* Without domains every node is its own: the cluster tier starts at the node. */
  g_autoptr(MpCluster) two = cluster_ok ("dgx-h100:2");
  MpGroupSpan s;
  span_of (two, 0, 2, 8, &s);
  assert_int_equal (s.n_domains, 2);
  assert_int_equal (s.widest, MP_TIER_CLUSTER);
  g_autofree char *text = mp_cluster_describe_text (four);
  assert_non_null (strstr (text, "4 domains of 18 nodes (72 devices)"));
  assert_non_null (strstr (text, "domain   nvlink5-nvl72"));
}

/* What a collective over domains costs: across two racks the ring's bottleneck is the
 * network; inside one rack the NVLink. */
static void
test_domain_allreduce_tiers (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = model_ok ("llama3-8b");
  g_autoptr(MpCluster) c = cluster_ok (GB200_256);
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
  const MpCostDevice *dev = mp_cost_device (ctx, 0);
  const double size = 1024.0 * 1024 * 1024;
  MpGroupSpan two_racks, two_trays;
  guint far[2] = { 0, 72 }, near[2] = { 0, 4 };
  mp_cluster_span (c, NULL, far, 2, &two_racks);
  mp_cluster_span (c, NULL, near, 2, &two_trays);
  assert_int_equal (two_racks.widest, MP_TIER_CLUSTER);
  assert_int_equal (two_trays.widest, MP_TIER_DOMAIN);
  MpCollCost across, inside;
  mp_cost_collective (ctx, dev, MP_COLL_ALL_REDUCE, size, &two_racks, MP_ALGO_AUTO, &across);
  mp_cost_collective (ctx, dev, MP_COLL_ALL_REDUCE, size, &two_trays, MP_ALGO_AUTO, &inside);
  /* The NIC's 50 GB/s at the cluster tier's efficiency bounds the cross-rack busbw. */
  double nic = 50e9 * dev->link_eff[MP_TIER_CLUSTER];
  assert_true (across.busbw_Bps <= nic * (1 + 1e-9));
  assert_true (across.busbw_Bps > 0.95 * nic);
  assert_true (inside.busbw_Bps > 0.95 * 900e9 * dev->link_eff[MP_TIER_DOMAIN]);
  /* Eight ranks in each of two racks: the ring pools the 8 NIC shares of a rack. */
  MpGroupSpan sixteen;
  span_of (c, 64, 16, 1, &sixteen);
  MpCollCost wide;
  mp_cost_collective (ctx, dev, MP_COLL_ALL_REDUCE, size, &sixteen, MP_ALGO_RING, &wide);
  assert_true (wide.busbw_Bps <= 8 * nic * (1 + 1e-9));
  assert_true (wide.busbw_Bps > 0.9 * 8 * nic);
  /* The same closed form by hand: alpha-beta with its domains set and left to default. */
  MpAlphaBeta ab;
  mp_cost_alpha_beta (ctx, dev, &two_racks, &ab);
  assert_int_equal (ab.n_domains, 2);
  double t = mp_coll_time (MP_COLL_ALL_REDUCE, MP_ALGO_RING, MP_PROTO_SIMPLE, size, &ab);
  assert_true (t >= size / nic);
}

/* A full NVL72 rack reproduces the all_reduce_perf measurement its curve cites: algbw
 * 423-429 GB/s at 4-8 GiB over 72 GPUs (coreweave/nccl-tests PR #43). */
static void
test_domain_rack_allreduce_measured (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = model_ok ("llama3-8b");
  g_autoptr(MpCluster) c = cluster_ok ("gb200-nvl72");
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
  const MpCostDevice *dev = mp_cost_device (ctx, 0);
  assert_int_equal (dev->curve->klass, MP_DEVICE_CLASS_GB200);
  assert_true (dev->domain_nvswitch);
  MpGroupSpan rack;
  span_of (c, 0, 72, 1, &rack);
  MpCollCost cost;
  mp_cost_collective (ctx, dev, MP_COLL_ALL_REDUCE, 4294967296.0, &rack, MP_ALGO_AUTO, &cost);
  mp_assert_close (cost.algbw_Bps, 425e9, 0.03);
  /* NVLink SHARP is available over the rack's switches, and gives the measured algbw. */
  MpCollCost nvls;
  mp_cost_collective (ctx, dev, MP_COLL_ALL_REDUCE, 4294967296.0, &rack, MP_ALGO_NVLS, &nvls);
  assert_true (nvls.time_s < G_MAXDOUBLE);
  mp_assert_close (nvls.algbw_Bps, 425e9, 0.03);
  /* ... but not between racks. */
  g_autoptr(MpCluster) c2 = cluster_ok ("gb200-nvl72:2");
  g_autoptr(MpCostContext) ctx2 = mp_cost_context_new (m, c2, NULL);
  MpGroupSpan racks;
  span_of (c2, 0, 144, 1, &racks);
  mp_cost_collective (ctx2, mp_cost_device (ctx2, 0), MP_COLL_ALL_REDUCE, 4294967296.0,
                      &racks, MP_ALGO_NVLS, &nvls);
  assert_true (nvls.time_s == G_MAXDOUBLE);
}

/* A profile's domain table prices a one-rank-per-tray group in one rack; a profile from
 * before the domain tier still reads, its tables where they were. */
static void
test_domain_profile (void **state)
{
  (void) state;
  g_autoptr(MpCostProfile) p = mp_cost_profile_new (NULL);
  const double sizes[] = { 1e6, 1e9 }, busbw[] = { 100e9, 700e9 };
  assert_true (mp_cost_profile_set_coll (p, MP_COLL_ALL_REDUCE, MP_TIER_DOMAIN, 18, sizes,
                                         busbw, 2, NULL));
  g_autofree char *yaml = mp_cost_profile_to_yaml (p, NULL);
  assert_non_null (strstr (yaml, "tier: domain"));
  g_autoptr(GError) error = NULL;
  g_autoptr(MpCostProfile) q = mp_cost_profile_load_data ("p.yaml", yaml, strlen (yaml), &error);
  assert_non_null (q);
  mp_assert_close (mp_cost_profile_coll_busbw (q, MP_COLL_ALL_REDUCE, MP_TIER_DOMAIN, 1e9), 700e9,
                   1e-9);
  assert_true (mp_cost_profile_coll_busbw (q, MP_COLL_ALL_REDUCE, MP_TIER_CLUSTER, 1e9) == 0);

  g_autoptr(MpModel) m = model_ok ("llama3-8b");
  g_autoptr(MpCluster) c = cluster_ok (GB200_256);
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, q);
  const MpCostDevice *dev = mp_cost_device (ctx, 0);
  MpGroupSpan trays, racks;
  span_of (c, 0, 18, 4, &trays);
  span_of (c, 0, 4, 72, &racks);
  MpCollCost a, b;
  mp_cost_collective (ctx, dev, MP_COLL_ALL_REDUCE, 1e9, &trays, MP_ALGO_AUTO, &a);
  mp_cost_collective (ctx, dev, MP_COLL_ALL_REDUCE, 1e9, &racks, MP_ALGO_AUTO, &b);
  assert_true (a.from_profile);
  mp_assert_close (a.busbw_Bps, 700e9, 1e-9);
  assert_false (b.from_profile);

  static const char old[] =
    "kind: profile\nversion: 1\n"
    "collectives:\n"
    "  - {kind: all_reduce, tier: node, ranks: 8, sizes: [1e6, 1e9], busbw: [5e10, 3e11]}\n"
    "  - {kind: all_gather, tier: cluster, ranks: 2, sizes: [1e6, 1e9], busbw: [5e9, 4e10]}\n";
  g_autoptr(MpCostProfile) o = mp_cost_profile_load_data ("old.yaml", old, strlen (old), &error);
  assert_non_null (o);
  mp_assert_close (mp_cost_profile_coll_busbw (o, MP_COLL_ALL_REDUCE, MP_TIER_NODE, 1e9), 3e11, 1e-9);
  mp_assert_close (mp_cost_profile_coll_busbw (o, MP_COLL_ALL_GATHER, MP_TIER_CLUSTER, 1e9), 4e10,
                   1e-9);
  assert_true (mp_cost_profile_coll_busbw (o, MP_COLL_ALL_GATHER, MP_TIER_DOMAIN, 1e9) == 0);
  g_autofree char *again = mp_cost_profile_to_yaml (o, NULL);
  assert_null (strstr (again, "domain"));
}

/* Which TP and EP groups stay in their domains, rank by rank. */
static void
test_domain_groups_check (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = model_ok ("mixtral-8x7b");
  g_autoptr(MpCluster) c = cluster_ok (GB200_256);
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.tp = 8;
  cfg.dp = 32;
  assert_true (mp_cost_groups_in_domains (ctx, &cfg, TRUE, TRUE));   /* 72 = 9 x 8 */
  cfg.ep = 8;   /* 64 consecutive ranks per expert group: 64-127 straddles a rack */
  assert_true (mp_cost_groups_in_domains (ctx, &cfg, TRUE, FALSE));
  assert_false (mp_cost_groups_in_domains (ctx, &cfg, TRUE, TRUE));
  cfg.tp = 1;
  cfg.dp = 256;   /* 8-rank expert groups tile the racks */
  assert_true (mp_cost_groups_in_domains (ctx, &cfg, TRUE, TRUE));
  cfg.tp = 16;
  cfg.dp = 16;
  cfg.ep = 1;
  assert_false (mp_cost_groups_in_domains (ctx, &cfg, TRUE, TRUE));
  assert_true (mp_cost_groups_in_domains (ctx, &cfg, FALSE, TRUE));
}

/* What a search considered: configs, and those with a TP or EP group off its domain. */
typedef struct {
  const MpCostContext *ctx;
  guint64 seen, crossing;
} Watch;

static gboolean
watch_config (const MpParallelConfig *cfg, gpointer data)
{
  Watch *w = data;
  w->seen++;
  w->crossing += !mp_cost_groups_in_domains (w->ctx, cfg, TRUE, TRUE);
  return TRUE;
}

static MpSearchResult *
search_watched (const MpCostContext *ctx, const char *fix, guint top_k, Watch *watch)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MpPlanPins) pins = fix ? mp_plan_pins_parse (fix, &error) : NULL;
  MpSearchOptions opts = { .top_k = top_k, .pins = pins };
  if (watch)
    {
      opts.accept = watch_config;
      opts.accept_data = watch;
    }
  MpSearchResult *res = mp_planner_search (ctx, &opts, &error);
  if (res == NULL)
    fail_msg ("search %s: %s", fix ? fix : "", error->message);
  return res;
}

static MpSearchResult *
search (const MpCostContext *ctx, const char *fix, guint top_k)
{
  return search_watched (ctx, fix, top_k, NULL);
}

/* The planner keeps every TP (and EP) group inside a rack unless tp is pinned; a pinned
 * TP=8 group on the 256-GPU job crosses only the domain tier. */
static void
test_domain_planner (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = model_ok ("gpt3-175b");
  g_autoptr(MpCluster) c = cluster_ok (GB200_256);
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
  Watch watch = { .ctx = ctx };
  g_autoptr(MpSearchResult) free = search_watched (ctx, NULL, 20, &watch);
  assert_true (free->plans->len > 0);
  assert_true (watch.seen > 1000);
  assert_int_equal (watch.crossing, 0);
  for (guint i = 0; i < free->plans->len; i++)
    {
      const MpPlan *p = g_ptr_array_index (free->plans, i);
      assert_true (mp_cost_groups_in_domains (ctx, &p->cfg, TRUE, TRUE));
    }
  for (guint f = 0; f < MP_FAMILY_N; f++)
    if (free->stats.family_best[f])
      assert_true (mp_cost_groups_in_domains (ctx, &free->stats.family_best[f]->cfg, TRUE,
                                              TRUE));
  g_autoptr(MpSearchResult) tp8 = search (ctx, "tp=8", 1);
  const MpPlan *best = g_ptr_array_index (tp8->plans, 0);
  assert_int_equal (best->cfg.tp, 8);
  MpStageSpans sp;
  mp_cost_stage_spans (ctx, &best->cfg, 0, &sp);
  assert_int_equal (sp.tp.n_domains, 1);
  assert_int_equal (sp.tp.widest, MP_TIER_DOMAIN);
  /* Pinned, a TP group may cross racks (gpt3-175b's 96 heads take tp=16). */
  Watch pinned = { .ctx = ctx };
  g_autoptr(MpSearchResult) tp16 = search_watched (ctx, "tp=16", 1, &pinned);
  assert_true (pinned.crossing > 0);
  best = g_ptr_array_index (tp16->plans, 0);
  assert_int_equal (best->cfg.tp, 16);
  assert_false (mp_cost_groups_in_domains (ctx, &best->cfg, TRUE, FALSE));
}

/* A plan file names a domain cluster by its domains, so that it reloads as planned; one
 * whose last domain is short by its devices. */
static void
test_domain_plan_file (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = model_ok ("llama3-8b");
  const char *const names[] = { "gb200-nvl72:2", "gb200-nvl72:256g" };
  const char *const want[] = { "cluster: gb200-nvl72:2\n", "cluster: gb200-nvl72:256g\n" };
  for (guint i = 0; i < 2; i++)
    {
      g_autoptr(MpCluster) c = cluster_ok (names[i]);
      g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
      g_autoptr(MpPlanPins) pins = mp_plan_pins_parse ("tp=4,pp=1,zero=1", NULL);
      MpSearchOptions opts = { .top_k = 1, .pins = pins, .global_batch = c->world_size / 4 * 8 };
      g_autoptr(MpSearchResult) res = mp_planner_search (ctx, &opts, NULL);
      assert_non_null (res);
      g_autofree char *yaml = mp_plan_to_yaml (g_ptr_array_index (res->plans, 0), m, c, NULL);
      if (strstr (yaml, want[i]) == NULL)
        fail_msg ("plan file lacks '%s':\n%s", want[i], yaml);
    }
}

/* ---- device classes ------------------------------------------------------------------ */

/* B200 and GB200 are classes of their own, each with its own short-run MAMF row (B200
 * SXM 1745, GB200 SXM 1822 TFLOP/s bf16) sustained at A100's measured 230 / 271.2 of it,
 * as Hopper's anchor is: a large GEMM runs at the product. */
static void
test_blackwell_classes (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = model_ok ("llama3-8b");
  const char *const names[] = { "dgx-b200:1", "gb200-nvl72" };
  const MpDeviceClass want[] = { MP_DEVICE_CLASS_BLACKWELL, MP_DEVICE_CLASS_GB200 };
  const double mamf[] = { 1745e12, 1822e12 };
  for (guint i = 0; i < 2; i++)
    {
      g_autoptr(MpCluster) c = cluster_ok (names[i]);
      g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
      const MpCostDevice *dev = mp_cost_device (ctx, 0);
      assert_int_equal (dev->curve->klass, want[i]);
      assert_int_equal (mp_device_class_of (dev->device), want[i]);
      MpKernelCost k;
      mp_cost_gemm (dev, MP_DTYPE_BF16, 8192, 8192, 8192, 1, &k);
      mp_assert_close (k.flops / k.time_s, mamf[i] * 230.0 / 271.2, 0.01);
      mp_assert_close (dev->curve->sustained_of_burst, 230.0 / 271.2, 1e-12);
      assert_true (dev->nvlink && dev->nvswitch);
    }
  assert_string_equal (mp_device_class_name (MP_DEVICE_CLASS_GB200), "gb200");
}

/* A plan a published run used is predicted to fit (issue 16): Megatron-Bridge's GB200
 * Llama 3.1 405B FP8 recipe (LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V2: tp 4, pp 16,
 * vpp 4, the distributed optimizer over dp 4, no recompute, GBS 1536 of 8k sequences) ran
 * on 256 GB200s. It fits only in the memory the driver reports, 189471 MiB (gb200-nvl72's
 * device), not in "186GB" read as 10^9 bytes. */
static void
test_gb200_recipe_fits (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = model_ok ("llama3-405b");
  g_autoptr(GError) error = NULL;
  assert_true (mp_model_set_seq_len (m, 8192, &error));
  g_autoptr(MpCluster) c = cluster_ok ("gb200-nvl72:256g");
  mp_assert_close (c->groups[0].device.memory_bytes, 189471.0 * 1024 * 1024, 1e-12);
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
  g_autoptr(MpPlanPins) pins = mp_plan_pins_parse ("dp=4,tp=4,pp=16,vpp=4,cp=1,zero=1,"
                                                   "micro_batch_size=1,num_micro_batches=384,"
                                                   "recompute=none,fp8=true,stack=megatron",
                                                   &error);
  assert_non_null (pins);
  MpSearchOptions opts = { .top_k = 1, .pins = pins, .global_batch = 1536 };
  g_autoptr(MpSearchResult) res = mp_planner_search (ctx, &opts, &error);
  if (res == NULL)
    fail_msg ("search: %s", error->message);
  assert_true (res->plans->len == 1);
  const MpPlan *p = g_ptr_array_index (res->plans, 0);
  assert_true (p->memory.peak_bytes <= c->groups[0].device.memory_bytes);
  assert_true (p->memory.peak_bytes > 186e9);
}

/* ---- FP8 ------------------------------------------------------------------------------ */

static void
fp8_config (MpParallelConfig *cfg, guint tp, guint dp, gboolean fp8)
{
  mp_parallel_config_init (cfg);
  cfg->tp = tp;
  cfg->dp = dp;
  cfg->num_micro_batches = 4;
  cfg->fp8 = fp8;
}

/* A large compute-bound GEMM at the FP8 rate takes half its bf16 time on H100. */
static void
test_fp8_gemm_rate (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = model_ok ("llama3-8b");
  g_autoptr(MpCluster) c = cluster_ok ("dgx-h100:1");
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
  const MpCostDevice *dev = mp_cost_device (ctx, 0);
  MpKernelCost b16, f8;
  mp_cost_gemm (dev, MP_DTYPE_BF16, 16384, 16384, 16384, 1, &b16);
  mp_cost_gemm (dev, MP_DTYPE_FP8, 16384, 16384, 16384, 1, &f8);
  assert_false (b16.memory_bound || f8.memory_bound);
  mp_assert_close (f8.time_s, 0.5 * b16.time_s, 0.001);

  /* In a block: the GEMMs at the FP8 rate plus their casts; the attention core, the
   * norms and the output head exactly as in bf16. */
  MpParallelConfig bf, fp;
  fp8_config (&bf, 1, 8, FALSE);
  fp8_config (&fp, 1, 8, TRUE);
  MpStageSpans sp;
  mp_cost_stage_spans (ctx, &bf, 0, &sp);
  gboolean seen_gemm = FALSE;
  for (guint li = 0; li < m->n_layers; li++)
    {
      const MpLayer *l = &m->layers[li];
      for (guint o = 0; o < l->n_ops; o++)
        {
          MpOpCost a, b;
          mp_cost_op (ctx, &bf, &sp, li, o, &a);
          mp_cost_op (ctx, &fp, &sp, li, o, &b);
          gboolean fp8_gemm = l->ops[o].kind == MP_OP_GEMM && l->kind == MP_LAYER_BLOCK;
          if (!fp8_gemm)
            {
              assert_true (a.fwd.time_s == b.fwd.time_s && a.bwd.time_s == b.bwd.time_s);
              continue;
            }
          seen_gemm = TRUE;
          assert_true (a.fwd.flops == b.fwd.flops);
          assert_true (b.fwd.time_s < a.fwd.time_s && b.bwd.time_s < a.bwd.time_s);
          /* The cast reads the bf16 input and writes its FP8 copy and transpose. */
          double cast = b.m * b.k * (2 + 2) / (dev->device->mem_bw_Bps * dev->mem_eff);
          assert_true (b.fwd.time_s > 0.5 * a.fwd.time_s + 0.9 * cast);
        }
    }
  assert_true (seen_gemm);
}

/* Sum of the parameters of the blocks' GEMMs (what FP8 keeps copies of), per TP rank. */
static double
fp8_params (const MpModel *m, guint tp)
{
  double sum = 0;
  for (guint li = 0; li < m->n_layers; li++)
    if (m->layers[li].kind == MP_LAYER_BLOCK)
      for (guint o = 0; o < m->layers[li].n_ops; o++)
        if (m->layers[li].ops[o].kind == MP_OP_GEMM)
          sum += m->layers[li].ops[o].params / tp;
  return sum;
}

/* FP8 memory: the bf16 weights, fp32 master and gradients as before, plus an FP8 copy of
 * every FP8 GEMM weight and, on Hopper, its transpose; on Blackwell no transpose. */
static void
test_fp8_memory_copies (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = model_ok ("llama3-8b");
  const char *const names[] = { "dgx-h100:1", "dgx-b200:1" };
  const double copy_bytes[] = { 2, 1 };
  for (guint i = 0; i < 2; i++)
    {
      g_autoptr(MpCluster) c = cluster_ok (names[i]);
      g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
      MpParallelConfig bf, fp;
      fp8_config (&bf, 2, 4, FALSE);
      fp8_config (&fp, 2, 4, TRUE);
      MpStageMemory a, b;
      mp_cost_stage_memory (ctx, &bf, 0, &a);
      mp_cost_stage_memory (ctx, &fp, 0, &b);
      mp_assert_close (b.weights_bytes - a.weights_bytes, fp8_params (m, 2) * copy_bytes[i],
                       1e-9);
      assert_true (a.grads_bytes == b.grads_bytes && a.optimizer_bytes == b.optimizer_bytes);
      /* ZeRO-3 shards the copies like the weights. */
      bf.zero = fp.zero = 3;
      mp_cost_stage_memory (ctx, &bf, 0, &a);
      mp_cost_stage_memory (ctx, &fp, 0, &b);
      mp_assert_close (b.weights_bytes - a.weights_bytes,
                       fp8_params (m, 2) * copy_bytes[i] / 4, 1e-9);
    }
}

/* FP8 makes a step faster on H100, refreshes its weight copies with the optimizer, and is
 * refused on a device without an FP8 rate. */
static void
test_fp8_step_and_check (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = model_ok ("llama3-8b");
  g_autoptr(MpCluster) c = cluster_ok ("dgx-h100:1");
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
  MpParallelConfig bf, fp;
  fp8_config (&bf, 1, 8, FALSE);
  fp8_config (&fp, 1, 8, TRUE);
  assert_true (mp_parallel_config_check (&fp, m, c, NULL));
  MpStageTime a, b;
  mp_cost_stage_times (ctx, &bf, &a);
  mp_cost_stage_times (ctx, &fp, &b);
  assert_true (b.fwd.compute_s < a.fwd.compute_s && b.bwd.compute_s < a.bwd.compute_s);
  assert_true (b.fwd.model_flops == a.fwd.model_flops);
  /* Casting every FP8 weight (2 bytes read, 2 written) once per step. */
  const MpCostDevice *dev = mp_cost_device (ctx, 0);
  double cast = fp8_params (m, 1) * 4 / (dev->device->mem_bw_Bps * dev->mem_eff);
  assert_true (b.optimizer_s - a.optimizer_s > 0.9 * cast);
  assert_true (b.optimizer_s - a.optimizer_s < 1.1 * cast + 1e-4);

  g_autoptr(MpCluster) a100 = cluster_ok ("dgx-a100-80g:1");
  g_autoptr(GError) error = NULL;
  assert_false (mp_parallel_config_check (&fp, m, a100, &error));
  assert_non_null (strstr (error->message, "fp8 needs an FP8 rate"));
}

/* --fix fp8=true plans FP8 (every plan), and the best plan without the pins is bf16. */
static void
test_fp8_pinned_search (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = model_ok ("llama3-8b");
  g_autoptr(MpCluster) c = cluster_ok ("dgx-h100:1");
  g_autoptr(MpCostContext) ctx = mp_cost_context_new (m, c, NULL);
  g_autoptr(MpSearchResult) plain = search (ctx, NULL, 3);
  g_autoptr(MpSearchResult) fp8 = search (ctx, "fp8=true", 3);
  for (guint i = 0; i < plain->plans->len; i++)
    assert_false (((const MpPlan *) g_ptr_array_index (plain->plans, i))->cfg.fp8);
  for (guint i = 0; i < fp8->plans->len; i++)
    assert_true (((const MpPlan *) g_ptr_array_index (fp8->plans, i))->cfg.fp8);
  const MpPlan *p0 = g_ptr_array_index (plain->plans, 0), *f0 = g_ptr_array_index (fp8->plans, 0);
  assert_true (f0->step_s < p0->step_s);
  assert_non_null (fp8->stats.free_best);
  assert_false (fp8->stats.free_best->cfg.fp8);
  mp_assert_close (fp8->stats.free_best->step_s, p0->step_s, 1e-12);
  g_autofree char *yaml = mp_plan_to_yaml (f0, m, c, NULL);
  assert_non_null (strstr (yaml, "  fp8: true\n"));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_domain_spans),
    cmocka_unit_test (test_domain_zoo),
    cmocka_unit_test (test_domain_allreduce_tiers),
    cmocka_unit_test (test_domain_rack_allreduce_measured),
    cmocka_unit_test (test_domain_profile),
    cmocka_unit_test (test_domain_groups_check),
    cmocka_unit_test (test_domain_planner),
    cmocka_unit_test (test_domain_plan_file),
    cmocka_unit_test (test_blackwell_classes),
    cmocka_unit_test (test_gb200_recipe_fits),
    cmocka_unit_test (test_fp8_gemm_rate),
    cmocka_unit_test (test_fp8_memory_copies),
    cmocka_unit_test (test_fp8_step_and_check),
    cmocka_unit_test (test_fp8_pinned_search),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
