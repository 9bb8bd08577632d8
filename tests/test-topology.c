/* test-topology.c - cmocka tests of topology/: loading clusters (zoo, files, suffixes),
 * refusing bad ones with located messages, what groups of ranks span, and describe.
 *
 * Zoo files are found through MPPLAN_DATADIR (the Makefile sets it to examples/);
 * fixtures are read from the source tree's tests/data/. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/test-util.h"
#include "topology/topology.h"
#include "common/error.h"
#include "common/yamldoc.h"

#include <string.h>

#define DATA(name) MPPLAN_SRCDIR "/tests/data/" name

/* Loads NAME (zoo name, suffix or path) and fails the test on any error. */
static MpCluster *
load_ok (const char *name)
{
  g_autoptr(GError) error = NULL;
  MpCluster *c = mp_cluster_load (name, &error);
  if (c == NULL)
    fail_msg ("%s: %s", name, error->message);
  return c;
}

/* Loads YAML text that must be refused with a message containing WANT, located at
 * "inline.yaml:LINE:" when LINE > 0. */
static void
refused (const char *yaml, const char *want, guint line)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MpCluster) c = mp_cluster_load_data ("inline.yaml", yaml, strlen (yaml), &error);
  assert_null (c);
  assert_non_null (error);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  if (strstr (error->message, want) == NULL)
    fail_msg ("message lacks '%s':\n%s", want, error->message);
  if (line > 0)
    {
      g_autofree char *where = g_strdup_printf ("inline.yaml:%u:", line);
      if (strstr (error->message, where) == NULL)
        fail_msg ("no problem located at line %u:\n%s", line, error->message);
    }
}

/* Fills RANKS[i] = first + i * stride for i < n. */
static void
strided (guint *ranks, guint n, guint first, guint stride)
{
  for (guint i = 0; i < n; i++)
    ranks[i] = first + i * stride;
}

/* ---- spans ------------------------------------------------------------------------- */

static void
test_topology_tp_in_node (void **state)
{
  g_autoptr(MpCluster) c = load_ok ("dgx-a100-80g");
  guint ranks[8];
  MpGroupSpan s;
  strided (ranks, 8, 8, 1); /* node 1 */
  mp_cluster_span (c, NULL, ranks, 8, &s);
  assert_int_equal (s.n_ranks, 8);
  assert_int_equal (s.n_nodes, 1);
  assert_int_equal (s.ranks_per_node, 8);
  assert_int_equal (s.widest, MP_TIER_NODE);
  mp_assert_close (s.bw_Bps[MP_TIER_NODE], 300e9, 1e-12);
  mp_assert_close (s.latency_s[MP_TIER_NODE], 3e-6, 1e-12);
}

static void
test_topology_dp_strided (void **state)
{
  g_autoptr(MpCluster) c = load_ok ("dgx-a100-80g");
  guint ranks[128];
  MpGroupSpan s;
  strided (ranks, 128, 3, 8); /* one rank per node, as a DP group of a tp=8 plan */
  mp_cluster_span (c, NULL, ranks, 128, &s);
  assert_int_equal (s.n_nodes, 128);
  assert_int_equal (s.ranks_per_node, 1);
  assert_int_equal (s.widest, MP_TIER_CLUSTER);
  mp_assert_close (s.bw_Bps[MP_TIER_CLUSTER], 25e9, 1e-12); /* 200 Gb/s HDR, 8 NICs */
  mp_assert_close (s.latency_s[MP_TIER_CLUSTER], 5e-6, 1e-12);
}

static void
test_topology_pp_pair (void **state)
{
  g_autoptr(MpCluster) c = load_ok ("dgx-h100");
  guint ranks[2] = { 5, 13 };
  MpGroupSpan s;
  mp_cluster_span (c, NULL, ranks, 2, &s);
  assert_int_equal (s.n_nodes, 2);
  assert_int_equal (s.ranks_per_node, 1);
  assert_int_equal (s.widest, MP_TIER_CLUSTER);
  mp_assert_close (s.bw_Bps[MP_TIER_CLUSTER], 50e9, 1e-12); /* NDR 400 Gb/s */
  mp_assert_close (s.bw_Bps[MP_TIER_NODE], 450e9, 1e-12);
}

static void
test_topology_custom_placement (void **state)
{
  g_autoptr(MpCluster) c = load_ok ("dgx-a100-80g:2");
  /* Rank r on device (r % 2) * 8 + r / 2: consecutive ranks alternate between nodes. */
  guint placement[16];
  for (guint r = 0; r < 16; r++)
    placement[r] = (r % 2) * 8 + r / 2;
  guint ranks[8];
  MpGroupSpan s;
  strided (ranks, 8, 0, 1);
  mp_cluster_span (c, placement, ranks, 8, &s);
  assert_int_equal (s.n_nodes, 2);
  assert_int_equal (s.ranks_per_node, 4);
  assert_int_equal (s.widest, MP_TIER_CLUSTER);
  strided (ranks, 8, 0, 2); /* even ranks: devices 0..7, all on node 0 */
  mp_cluster_span (c, placement, ranks, 8, &s);
  assert_int_equal (s.n_nodes, 1);
  assert_int_equal (s.ranks_per_node, 8);
  assert_int_equal (s.widest, MP_TIER_NODE);
  /* The same even ranks without the placement straddle both nodes. */
  mp_cluster_span (c, NULL, ranks, 8, &s);
  assert_int_equal (s.n_nodes, 2);
}

static void
test_topology_nic_sharing (void **state)
{
  g_autoptr(MpCluster) c = load_ok (DATA ("cluster-nic4.yaml"));
  assert_int_equal (c->links[MP_TIER_CLUSTER].nics_per_node, 4);
  mp_assert_close (c->links[MP_TIER_CLUSTER].bw_Bps, 25e9, 1e-12);
  guint ranks[4];
  MpGroupSpan s;
  strided (ranks, 4, 0, 8);
  mp_cluster_span (c, NULL, ranks, 4, &s);
  /* 4 NICs for 8 GPUs: each GPU gets half a NIC when all send. */
  mp_assert_close (s.bw_Bps[MP_TIER_CLUSTER], 12.5e9, 1e-12);
}

static void
test_topology_single_rank (void **state)
{
  g_autoptr(MpCluster) c = load_ok ("h200");
  assert_int_equal (c->world_size, 1);
  assert_false (c->has_link[MP_TIER_NODE]);
  assert_false (c->has_link[MP_TIER_CLUSTER]);
  guint rank = 0;
  MpGroupSpan s;
  mp_cluster_span (c, NULL, &rank, 1, &s);
  assert_int_equal (s.n_nodes, 1);
  assert_int_equal (s.ranks_per_node, 1);
  assert_int_equal (s.widest, MP_TIER_NODE);
  assert_true (s.bw_Bps[MP_TIER_CLUSTER] == 0);
}

/* ---- node groups ------------------------------------------------------------------- */

static void
test_topology_heterogeneous (void **state)
{
  g_autoptr(MpCluster) c = load_ok (DATA ("cluster-hetero.yaml"));
  assert_int_equal (c->n_groups, 2);
  assert_true (c->heterogeneous);
  assert_int_equal (c->nodes, 5);
  assert_int_equal (c->world_size, 2 * 8 + 3 * 4);
  assert_int_equal (c->groups[1].first_node, 2);
  assert_int_equal (c->groups[1].first_device, 16);
  assert_string_equal (c->profile, "calib/test-hetero.yaml");

  assert_int_equal (mp_cluster_node_of (c, 0), 0);
  assert_int_equal (mp_cluster_node_of (c, 15), 1);
  assert_int_equal (mp_cluster_node_of (c, 16), 2);
  assert_int_equal (mp_cluster_node_of (c, 20), 3);
  assert_int_equal (mp_cluster_node_of (c, 27), 4);
  assert_string_equal (mp_cluster_group_of (c, 15)->name, "a100");
  assert_string_equal (mp_cluster_group_of (c, 16)->name, "h100");
  assert_string_equal (mp_cluster_group_of (c, 27)->name, "h100");
  assert_string_equal (mp_cluster_slowest_device (c)->name, "A100-SXM4-80GB");

  /* 4 NICs: half a NIC per A100 (8 per node), a whole one per H100 (4 per node); a group
   * is as fast as its slowest node. */
  guint h100s[2] = { 16, 20 }, mixed[2] = { 0, 16 };
  MpGroupSpan s;
  mp_cluster_span (c, NULL, h100s, 2, &s);
  assert_int_equal (s.n_nodes, 2);
  mp_assert_close (s.bw_Bps[MP_TIER_CLUSTER], 25e9, 1e-12);
  mp_cluster_span (c, NULL, mixed, 2, &s);
  mp_assert_close (s.bw_Bps[MP_TIER_CLUSTER], 12.5e9, 1e-12);
}

static void
test_topology_groups_same_device (void **state)
{
  static const char yaml[] =
    "name: two-halves\n"
    "groups:\n"
    "  - {name: a, nodes: 2, devices_per_node: 4, device: {name: X, memory: 16 GiB,"
    " memory_bandwidth: 1 TB/s, peak: {bf16: 100 TFLOPS}}}\n"
    "  - {name: b, devices_per_node: 2, device: {name: X, memory: 16 GiB,"
    " memory_bandwidth: 1 TB/s, peak: {bf16: 100 TFLOPS}}}\n"
    "links:\n"
    "  - {tier: node, name: nvl, bandwidth: 100 GB/s, latency: 2 us}\n"
    "  - {tier: cluster, name: eth, bandwidth: 100 Gb/s, latency: 10 us}\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(MpCluster) c = mp_cluster_load_data ("same.yaml", yaml, strlen (yaml), &error);
  assert_null (error);
  assert_false (c->heterogeneous);   /* same device, different node shapes */
  assert_int_equal (c->nodes, 3);
  assert_int_equal (c->world_size, 10);
  assert_int_equal (c->groups[1].nodes, 1);  /* default */
  /* Default NICs: one per device of the widest node. */
  assert_int_equal (c->links[MP_TIER_CLUSTER].nics_per_node, 4);
  assert_int_equal (mp_cluster_node_of (c, 9), 2);
}

/* ---- zoo and suffixes -------------------------------------------------------------- */

static void
test_topology_suffix (void **state)
{
  g_autoptr(MpCluster) full = load_ok ("dgx-a100-80g");
  assert_int_equal (full->nodes, 128);
  assert_int_equal (full->world_size, 1024);
  g_autoptr(MpCluster) c = load_ok ("dgx-a100-80g:16");
  assert_int_equal (c->nodes, 16);
  assert_int_equal (c->groups[0].nodes, 16);
  assert_int_equal (c->world_size, 128);
  assert_string_equal (c->name, "dgx-a100-80g");
  /* A path takes the suffix too. */
  g_autoptr(MpCluster) p = load_ok (DATA ("cluster-nic4.yaml") ":2");
  assert_int_equal (p->nodes, 2);
}

static void
test_topology_host (void **state)
{
  guint cores = g_get_num_processors ();
  g_autoptr(MpCluster) c = load_ok ("host");
  assert_int_equal (c->nodes, 1);
  assert_int_equal (c->groups[0].devices_per_node, cores);
  assert_int_equal (c->world_size, cores);
  assert_false (c->groups[0].device.calibrated);
  assert_false (c->has_link[MP_TIER_CLUSTER]);
  g_autoptr(MpCluster) one = load_ok ("host:1");
  assert_int_equal (one->world_size, cores);

  /* host has no cluster tier, so more than one node is refused (with its location). */
  g_autoptr(GError) error = NULL;
  g_autoptr(MpCluster) two = mp_cluster_load ("host:2", &error);
  assert_null (two);
  assert_non_null (strstr (error->message, "2 nodes (from the ':N' suffix) need a link of "
                                           "tier 'cluster'"));
  assert_non_null (strstr (error->message, "host.yaml:"));
}

static void
test_topology_bad_arguments (void **state)
{
  static const char *const bad_suffix[] = { "dgx-a100-80g:0", "dgx-a100-80g:x",
                                            "dgx-a100-80g:", "dgx-a100-80g:1000001",
                                            "dgx-a100-80g:99999999999999999999", NULL };
  for (const char *const *a = bad_suffix; *a; a++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(MpCluster) c = mp_cluster_load (*a, &error);
      assert_null (c);
      assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_USAGE));
      assert_non_null (strstr (error->message, "node count"));
    }
  g_autoptr(GError) error = NULL;
  g_autoptr(MpCluster) c = mp_cluster_load ("dgx-a100-80:4", &error);
  assert_null (c);
  assert_non_null (strstr (error->message, "did you mean 'dgx-a100-80g'"));
  g_clear_error (&error);
  c = mp_cluster_load ("/nonexistent/cluster.yaml", &error);
  assert_null (c);
  assert_int_equal (mp_error_exit_code (error), 2);
  g_clear_error (&error);
  c = mp_cluster_load (MPPLAN_SRCDIR "/tests/data", &error);  /* a directory */
  assert_null (c);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_IO));
}

/* Every zoo cluster loads, and the figures the planner leans on are the dense ones. */
static void
test_topology_zoo (void **state)
{
  g_auto(GStrv) names = mp_cluster_zoo_list ();
  static const char *const expected[] = { "dgx-a100-40g", "dgx-a100-80g", "dgx-b200", "dgx-h100",
                                          "gb200-nvl72", "h200", "hgx-h200", "host",
                                          "workstation-pcie4", NULL };
  for (const char *const *e = expected; *e; e++)
    if (!g_strv_contains ((const char *const *) names, *e))
      fail_msg ("zoo lacks %s", *e);
  for (int i = 0; names[i]; i++)
    {
      g_autoptr(MpCluster) c = load_ok (names[i]);
      assert_string_equal (c->name, names[i]);
      assert_true (c->world_size > 0);
      assert_true (c->groups[0].device.peak_flops[MP_DTYPE_BF16] > 0);
      assert_true (c->device_overhead_bytes < c->groups[0].device.memory_bytes);
    }
  g_autoptr(MpCluster) h100 = load_ok ("dgx-h100");
  mp_assert_close (h100->groups[0].device.peak_flops[MP_DTYPE_BF16], 989.4e12, 1e-9);
  g_autoptr(MpCluster) gb = load_ok ("gb200-nvl72");
  mp_assert_close (gb->groups[0].device.peak_flops[MP_DTYPE_BF16], 2.5e15, 1e-9);
  assert_int_equal (gb->world_size, 72);
  mp_assert_close (gb->links[MP_TIER_NODE].bw_Bps, 900e9, 1e-12);
  g_autoptr(MpCluster) a100 = load_ok ("dgx-a100-80g");
  mp_assert_close (a100->device_overhead_bytes, MP_CLUSTER_DEFAULT_DEVICE_OVERHEAD_BYTES, 0);
  assert_true (a100->groups[0].device.peak_flops[MP_DTYPE_FP8] == 0);
  g_autoptr(MpCluster) ws = load_ok ("workstation-pcie4");
  assert_int_equal (ws->world_size, 4);
  mp_assert_close (ws->links[MP_TIER_NODE].bw_Bps, 31.5e9, 1e-12);
}

/* ---- bad input --------------------------------------------------------------------- */

#define GOOD_DEVICE                                                                       \
  "device:\n  name: A100\n  memory: 80 GiB\n  memory_bandwidth: 2039 GB/s\n"             \
  "  peak: {bf16: 312 TFLOPS}\n"
#define GOOD_LINKS                                                                        \
  "links:\n  - {tier: node, name: nvl, bandwidth: 300 GB/s, latency: 3 us}\n"            \
  "  - {tier: cluster, name: ib, bandwidth: 25 GB/s, latency: 5 us}\n"

static void
test_topology_refuses (void **state)
{
  refused ("name: x\nnodes: 2\ndevices_per_node: 8\n" GOOD_DEVICE "lnks: []\n",
           "unknown key 'lnks' (did you mean 'links'?)", 9);
  refused ("name: x\nnodes: 2\ndevices_per_node: 8\n" GOOD_DEVICE "lnks: []\n",
           "missing required key 'links'", 1);
  refused ("name: x\nnodes: two\ndevices_per_node: 8\n" GOOD_DEVICE GOOD_LINKS,
           "'nodes' must be a whole number, not 'two'", 2);
  refused ("name: x\nnodes: -3\ndevices_per_node: 8\n" GOOD_DEVICE GOOD_LINKS,
           "must be a whole number", 2);
  refused ("name: x\ndevices_per_node: 8\ndevice: A100\n" GOOD_LINKS,
           "'device' must be a mapping", 3);
  refused ("name: x\nnodes: 2\n" GOOD_DEVICE GOOD_LINKS, "missing required key "
           "'devices_per_node'", 1);
  refused ("nodes: 2\ndevices_per_node: 8\n" GOOD_DEVICE GOOD_LINKS,
           "missing required key 'name'", 1);
  refused ("name: x\ndevices_per_node: 8\ndevice: {name: A, memory: 0 GiB, memory_bandwidth:"
           " 1 TB/s, peak: {bf16: 1 TFLOPS}}\n" GOOD_LINKS,
           "'memory' must be greater than zero", 3);
  refused ("name: x\ndevices_per_node: 8\ndevice: {name: A, memory: 1 GiB, memory_bandwidth:"
           " 1 TB/s, peak: {BF16: 1 TFLOPS, bf16: 2 TFLOPS}}\n" GOOD_LINKS,
           "dtype 'bf16' given twice", 3);
  refused ("name: x\ndevices_per_node: 8\ndevice: {name: A, memory: 1 GiB, memory_bandwidth:"
           " 1 TB/s, peak: [1 TFLOPS]}\n" GOOD_LINKS, "'peak' must be a mapping", 3);
  refused ("name: x\ndevices_per_node: 8\ndevice: {name: A, memory: 1 GiB, memory_bandwidth:"
           " 1 TB/s, peak: {bf16: fast}}\n" GOOD_LINKS, "'fast' is not a FLOP rate", 3);
  refused ("name: x\ndevices_per_node: 8\n" GOOD_DEVICE "links: {tier: node}\n",
           "'links' must be a list", 8);
  refused ("name: x\ndevices_per_node: 8\n" GOOD_DEVICE "links: []\n",
           "8 devices per node need a link of tier 'node'", 8);
  refused ("name: x\ndevices_per_node: 8\n" GOOD_DEVICE
           "links:\n  - {tier: node, name: a, bandwidth: 1 GB/s}\n",
           "missing required key 'latency'", 9);
  refused ("name: x\ndevices_per_node: 8\n" GOOD_DEVICE
           "links:\n  - {tier: node, name: a, bandwidth: 1 GB/s, latency: 1 us}\n"
           "  - {tier: cluster, name: b, bandwidth: 1 GB/s, latency: 1 us, nics_per_node: 0}\n",
           "'nics_per_node' = 0 is out of range", 10);
  refused ("name: x\ngroups: []\n" GOOD_LINKS, "'groups' must be a non-empty list", 2);
  refused ("name: x\ngroups:\n  - 3\n" GOOD_LINKS, "a node group must be a mapping", 3);
  refused ("name: x\ngroups:\n  - {name: a, devices_per_node: 2}\n" GOOD_LINKS,
           "missing required key 'device'", 3);
  refused ("name: x\ndevices_per_node: 8\n" GOOD_DEVICE GOOD_LINKS "device_overhead: lots\n",
           "'lots' is not a size in bytes", 11);
  refused ("- just\n- a list\n", "a cluster file must be a mapping", 1);
  /* A device count that overflows a guint, across groups. */
  refused ("name: x\ngroups:\n"
           "  - {name: a, nodes: 600000, devices_per_node: 5000, device: {name: A, memory: 1 GiB,"
           " memory_bandwidth: 1 TB/s, peak: {bf16: 1 TFLOPS}}}\n"
           "  - {name: b, nodes: 600000, devices_per_node: 5000, device: {name: A, memory: 1 GiB,"
           " memory_bandwidth: 1 TB/s, peak: {bf16: 1 TFLOPS}}}\n" GOOD_LINKS,
           "cluster too large", 3);
}

/* Several problems in one file are all reported, one line each. */
static void
test_topology_collects_all (void **state)
{
  static const char yaml[] =
    "name: many\n"
    "nodes: 0\n"
    "devices_per_node: 8\n"
    "device: {name: A, memory: 80 GiBB, memory_bandwidth: 2 TB/s, peak: {fp64: 1 TFLOPS}}\n"
    "links:\n"
    "  - {tier: rack, name: a, bandwidth: 1 GB/s, latency: 1 us}\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(MpCluster) c = mp_cluster_load_data ("many.yaml", yaml, sizeof yaml - 1, &error);
  assert_null (c);
  g_auto(GStrv) lines = g_strsplit (error->message, "\n", -1);
  assert_true (g_strv_length (lines) >= 4);
  for (int i = 0; lines[i]; i++)
    assert_true (g_str_has_prefix (lines[i], "many.yaml:"));
  assert_non_null (strstr (error->message, "many.yaml:2:8: 'nodes' = 0 is out of range"));
  assert_non_null (strstr (error->message, "unknown unit 'GiBB'"));
  assert_non_null (strstr (error->message, "unknown dtype 'fp64'"));
  assert_non_null (strstr (error->message, "unknown value 'rack'"));
}

/* Garbage never crashes and is always refused with a located message. */
static void
test_topology_garbage (void **state)
{
  static const char *const inputs[] = {
    "", "\n", "null", "[]", "{}", "name: x\n", "groups: 5\n", "groups: [[]]\n",
    "devices_per_node: auto\n", "links: [1, 2]\n", "device: {peak: {}}\n",
    "devices_per_node: 99999999999999999999999\n", "name: [a]\ndevice: []\n",
    "\xff\xfe\x00garbage", "name: x\ngroups:\n  - {name: a, nodes: 1, devices_per_node: 1,"
    " device: {name: A, memory: 1 GiB, memory_bandwidth: 1 GB/s, peak: {fp32: 1 GFLOPS}}}\n"
    "links: []\nnodes: 2\n",
    NULL
  };
  for (const char *const *in = inputs; *in; in++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(MpCluster) c = mp_cluster_load_data ("g.yaml", *in, strlen (*in), &error);
      assert_null (c);
      if (!g_str_has_prefix (error->message, "g.yaml:"))
        fail_msg ("unlocated: %s", error->message);
    }
}

/* ---- describe, kinds, names -------------------------------------------------------- */

static void
test_topology_describe_text (void **state)
{
  g_autoptr(MpCluster) c = load_ok ("dgx-a100-80g:4");
  g_autofree char *t = mp_cluster_describe_text (c);
  static const char *const want[] = { "dgx-a100-80g", "4 nodes x 8 devices = 32 devices",
                                      "A100-SXM4-80GB", "80 GiB", "peak bf16", "312 TFLOP/s",
                                      "nvlink3-nvswitch", "ib-hdr", "8 NICs per node",
                                      "(25 GB/s per device when all send)", NULL };
  for (const char *const *w = want; *w; w++)
    if (strstr (t, *w) == NULL)
      fail_msg ("describe lacks '%s':\n%s", *w, t);
  assert_null (strstr (t, "uncalibrated"));

  g_autoptr(MpCluster) host = load_ok ("host");
  g_autofree char *h = mp_cluster_describe_text (host);
  assert_non_null (strstr (h, "uncalibrated placeholder"));
  assert_non_null (strstr (h, "shared-memory"));

  g_autoptr(MpCluster) het = load_ok (DATA ("cluster-hetero.yaml"));
  g_autofree char *g = mp_cluster_describe_text (het);
  assert_non_null (strstr (g, "group a100: nodes 0-1"));
  assert_non_null (strstr (g, "group h100: nodes 2-4"));
  assert_non_null (strstr (g, "(heterogeneous)"));

  g_autoptr(MpCluster) one = load_ok ("h200");
  g_autofree char *o = mp_cluster_describe_text (one);
  assert_non_null (strstr (o, "none: a single device"));
}

static void
test_topology_describe_json (void **state)
{
  g_autoptr(MpCluster) c = load_ok (DATA ("cluster-hetero.yaml"));
  g_autoptr(JsonNode) root = mp_cluster_describe_json (c);
  JsonObject *o = json_node_get_object (root);
  assert_int_equal (json_object_get_int_member (o, "schema_version"), 1);
  assert_string_equal (json_object_get_string_member (o, "name"), "test-hetero");
  assert_int_equal (json_object_get_int_member (o, "nodes"), 5);
  assert_int_equal (json_object_get_int_member (o, "devices_per_node"), 8);
  assert_int_equal (json_object_get_int_member (o, "world_size"), 28);
  JsonObject *dev = json_object_get_object_member (o, "device");
  mp_assert_close (json_object_get_double_member (dev, "memory_bytes"), 80.0 * (1 << 30), 0);
  mp_assert_close (json_object_get_double_member (dev, "memory_bandwidth_Bps"), 2039e9, 1e-12);
  JsonObject *peak = json_object_get_object_member (dev, "peak_flops");
  mp_assert_close (json_object_get_double_member (peak, "bf16"), 312e12, 1e-12);
  assert_false (json_object_has_member (peak, "fp8"));
  assert_true (json_object_get_boolean_member (dev, "calibrated"));
  JsonArray *links = json_object_get_array_member (o, "links");
  assert_int_equal (json_array_get_length (links), 2);
  JsonObject *ib = json_array_get_object_element (links, 1);
  assert_string_equal (json_object_get_string_member (ib, "tier"), "cluster");
  mp_assert_close (json_object_get_double_member (ib, "bandwidth_Bps"), 25e9, 1e-12);
  mp_assert_close (json_object_get_double_member (ib, "latency_s"), 5e-6, 1e-12);
  assert_int_equal (json_object_get_int_member (ib, "nics_per_node"), 4);
  JsonArray *groups = json_object_get_array_member (o, "groups");
  assert_int_equal (json_array_get_length (groups), 2);
  JsonObject *g1 = json_array_get_object_element (groups, 1);
  assert_int_equal (json_object_get_int_member (g1, "first_node"), 2);
  assert_string_equal (json_object_get_string_member (
                           json_object_get_object_member (g1, "device"), "name"),
                       "H100-SXM5-80GB");
}

static void
test_topology_is_cluster (void **state)
{
  static const char cluster[] = "name: c\ndevices_per_node: 8\n";
  static const char model[] = "name: m\narchitecture: transformer\nhidden: 1024\n";
  g_autoptr(MpYamlDoc) a = mp_yaml_load_data ("a.yaml", cluster, strlen (cluster), NULL);
  g_autoptr(MpYamlDoc) b = mp_yaml_load_data ("b.yaml", model, strlen (model), NULL);
  assert_true (mp_cluster_yaml_is_cluster (a->root));
  assert_false (mp_cluster_yaml_is_cluster (b->root));
  assert_false (mp_cluster_yaml_is_cluster (NULL));
  assert_string_equal (mp_tier_name (MP_TIER_NODE), "node");
  assert_string_equal (mp_tier_name (MP_TIER_CLUSTER), "cluster");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_topology_tp_in_node),
    cmocka_unit_test (test_topology_dp_strided),
    cmocka_unit_test (test_topology_pp_pair),
    cmocka_unit_test (test_topology_custom_placement),
    cmocka_unit_test (test_topology_nic_sharing),
    cmocka_unit_test (test_topology_single_rank),
    cmocka_unit_test (test_topology_heterogeneous),
    cmocka_unit_test (test_topology_groups_same_device),
    cmocka_unit_test (test_topology_suffix),
    cmocka_unit_test (test_topology_host),
    cmocka_unit_test (test_topology_bad_arguments),
    cmocka_unit_test (test_topology_zoo),
    cmocka_unit_test (test_topology_refuses),
    cmocka_unit_test (test_topology_collects_all),
    cmocka_unit_test (test_topology_garbage),
    cmocka_unit_test (test_topology_describe_text),
    cmocka_unit_test (test_topology_describe_json),
    cmocka_unit_test (test_topology_is_cluster),
  };
  return cmocka_run_group_tests_name ("topology", tests, NULL, NULL);
}
