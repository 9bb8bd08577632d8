/* comm.c - what a collective costs: nccl-tests' bandwidth definitions, NCCL's algorithms
 * and protocols as closed forms over an alpha-beta view of a group, and the choice of the
 * fastest per size as NCCL's tuner makes it.
 *
 * The mechanisms follow NVIDIA/nccl src/graph/tuning.cc (read at commit b6475625): a
 * per-call base latency per algorithm and protocol, a per-step latency per hardware class
 * (NVLink, PCI, network) and protocol, ring latency as intra-node steps plus inter-node
 * steps, tree latency over log2(nodes), and bandwidth factors for the LL (8-byte lines
 * with 4 bytes of data), LL128 (120 of 128 bytes) and Simple protocols. Our own step
 * latency comes from the cluster file (the link's small-message latency), taken as
 * Simple's ring step; NCCL's tables give the ratios of the other combinations to it.
 * The link efficiency (curves.c) scales Simple's bandwidth, since nccl-tests measured it.
 * Three tiers: node, NVLink domain, cluster. NCCL treats a multi-node NVLink domain as one
 * node (its MNNVL support: rings and trees cross the network only between domains), so
 * NCCL's "nodes" are our domains; without a domain tier every node is its own domain and
 * the forms reduce to the two-tier ones. Units: bytes, seconds, bytes/s. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/costmodel-private.h"

#include <math.h>
#include <string.h>

/* ---- nccl-tests definitions -------------------------------------------------------- */

double
mp_coll_bus_factor (MpCollKind kind, guint n)
{
  if (n <= 1)
    return 0;
  double nn = (double) n;
  switch (kind)
    {
    case MP_COLL_ALL_REDUCE:
      return 2 * (nn - 1) / nn;
    case MP_COLL_ALL_GATHER:
    case MP_COLL_REDUCE_SCATTER:
    case MP_COLL_ALL_TO_ALL:
      return (nn - 1) / nn;
    case MP_COLL_BROADCAST:
    case MP_COLL_SEND_RECV:
    default:
      return 1;
    }
}

double
mp_coll_algbw (double size, double time_s)
{
  return time_s > 0 ? size / time_s : 0;
}

double
mp_coll_busbw (MpCollKind kind, guint n, double size, double time_s)
{
  return mp_coll_algbw (size, time_s) * mp_coll_bus_factor (kind, n);
}

double
mp_coll_time_from_busbw (MpCollKind kind, guint n, double size, double busbw_Bps)
{
  g_return_val_if_fail (busbw_Bps > 0, G_MAXDOUBLE);
  return size * mp_coll_bus_factor (kind, n) / busbw_Bps;
}

/* ---- NCCL's latency model ------------------------------------------------------------ */

/* Only ring, tree and NVLS have entries in NCCL's tables; the others are built from them. */
enum { HW_NVLINK, HW_PCI, HW_NET, HW_N };
enum { T_TREE, T_RING, T_NVLS, T_N };

/* tuning.cc baseLat, us: Tree { LL, LL128, Simple }, Ring { ... }; NVLS has none. */
static const double base_us[T_N][MP_PROTO_N] = {
  { 6.8, 14.0, 0 }, { 6.6, 14.0, 8.4 }, { 0, 0, 0 }
};

/* tuning.cc hwLat, us, per hardware class: Tree, Ring, NVLS x { LL, LL128, Simple }. */
static const double step_us[HW_N][T_N][MP_PROTO_N] = {
  [HW_NVLINK] = { { 0.6, 1.25, 28 }, { 0.6, 1.9, 3.4 }, { 0, 0, 23 } },
  [HW_PCI] = { { 1.0, 1.9, 28 }, { 1.0, 2.5, 5.7 }, { 0, 0, 0 } },
  [HW_NET] = { { 5.0, 8.5, 28 }, { 2.7, 4.0, 14.0 }, { 0, 0, 18 } },
};

static int
table_of (MpCollAlgo algo)
{
  return algo == MP_ALGO_TREE ? T_TREE : algo == MP_ALGO_NVLS ? T_NVLS : T_RING;
}

double
mp_coll_base_latency (MpCollAlgo algo, MpCollProto proto)
{
  g_return_val_if_fail ((guint) proto < MP_PROTO_N, 0);
  return base_us[table_of (algo)][proto] * 1e-6;
}

/* Step latency of ALGO/PROTO at TIER: the group's Simple ring step there, times NCCL's
 * ratio of this combination to that one on the same hardware. */
static double
step_latency (const MpAlphaBeta *ab, MpTier tier, int table, MpCollProto proto)
{
  int hw = tier == MP_TIER_CLUSTER ? HW_NET
           : tier == MP_TIER_DOMAIN ? (ab->domain_nvlink ? HW_NVLINK : HW_NET)
           : ab->nvlink ? HW_NVLINK : HW_PCI;
  return ab->alpha_s[tier] * step_us[hw][table][proto] / step_us[hw][T_RING][MP_PROTO_SIMPLE];
}

/* AB with its domain counts filled: where it leaves them 0, each node is a domain. */
static void
with_domains (const MpAlphaBeta *ab, MpAlphaBeta *out)
{
  *out = *ab;
  if (out->n_domains == 0)
    {
      out->n_domains = ab->n_nodes;
      out->ranks_per_domain = ab->ranks_per_node;
      out->nodes_per_domain = 1;
    }
  out->ranks_per_domain = out->ranks_per_domain ? out->ranks_per_domain : ab->ranks_per_node;
  out->nodes_per_domain = MAX (out->nodes_per_domain, 1u);
}

/* ---- closed forms -------------------------------------------------------------------- */

/* Ring bus bandwidth for Simple: every rank's link inside a node and across the nodes of
 * a domain, and at the domain boundary the NIC shares of the domain's ranks in the group
 * pooled (NCCL spreads its channels over all the NICs, so a ring crossing domains gets
 * them all). */
static double
ring_bw (const MpAlphaBeta *ab)
{
  double bw = G_MAXDOUBLE;
  if (ab->ranks_per_node > 1)
    bw = MIN (bw, ab->bw_Bps[MP_TIER_NODE]);
  if (ab->n_nodes > ab->n_domains)
    bw = MIN (bw, ab->bw_Bps[MP_TIER_DOMAIN]);
  if (ab->n_domains > 1)
    bw = MIN (bw, ab->ranks_per_domain * ab->bw_Bps[MP_TIER_CLUSTER]);
  return bw;
}

/* NCCL's bandwidth factors of the ring protocols relative to Simple (tuning.cc): LL
 * moves 4 data bytes per 8-byte line and runs at 1/4 (1/3 for all-gather-like
 * collectives inside a node); LL128 at 120/128 (0.92), 0.7 with one rank per node. */
static double
ring_proto_factor (MpCollKind kind, MpCollProto proto, const MpAlphaBeta *ab)
{
  switch (proto)
    {
    case MP_PROTO_LL:
      return (ab->n_domains > 1 || kind == MP_COLL_ALL_REDUCE) ? 1.0 / 4 : 1.0 / 3;
    case MP_PROTO_LL128:
      return ab->ranks_per_domain < 2 ? 0.7 : 0.92;
    case MP_PROTO_SIMPLE:
    default:
      return 1;
    }
}

/* Boundary steps of a ring over N units (nodes or domains): NCCL's count, 2 per unit for
 * all-reduce, one per boundary otherwise. */
static double
boundary_steps (MpCollKind kind, double units)
{
  if (kind == MP_COLL_ALL_REDUCE)
    return units > 1 ? 2 * units : 0;
  return units - 1;
}

/* Ring: intra-node steps, node-crossing ones inside a domain and domain-crossing ones (the
 * boundary counts above), then the bus bytes. */
static double
ring_time (MpCollKind kind, MpCollProto proto, double size, const MpAlphaBeta *ab)
{
  double n = ab->n_ranks;
  double steps = kind == MP_COLL_ALL_REDUCE ? 2 * (n - 1) : n - 1;
  double inter = MIN (boundary_steps (kind, ab->n_domains), steps);
  double crossing = MIN (MAX (boundary_steps (kind, ab->n_nodes), inter), steps);
  double lat = ab->base_scale * base_us[T_RING][proto] * 1e-6
               + (steps - crossing) * step_latency (ab, MP_TIER_NODE, T_RING, proto);
  if (crossing > inter)
    lat += (crossing - inter) * step_latency (ab, MP_TIER_DOMAIN, T_RING, proto);
  lat += inter * step_latency (ab, MP_TIER_CLUSTER, T_RING, proto);
  double bw = ring_bw (ab) * ring_proto_factor (kind, proto, ab);
  /* A broadcast pipelines the whole buffer down the chain: bus factor 1. */
  return lat + size * mp_coll_bus_factor (kind, ab->n_ranks) / bw;
}

/* NCCL's double binary tree (all-reduce): a chain inside each node, a tree over a
 * domain's nodes and one over the domains; reduce up then broadcast down, so algbw is
 * half the bus bandwidth, which NCCL takes as 0.92 of the ring's (LL: / 3.8; LL128: 7/9
 * in one domain, 120/128 across). */
static double
tree_time (MpCollProto proto, double size, const MpAlphaBeta *ab)
{
  double r = ab->ranks_per_node, domains = ab->n_domains, npd = ab->nodes_per_domain;
  double depth = domains > 1 ? ceil (log2 (domains)) : 0;
  double hops = (r - 1) * step_latency (ab, MP_TIER_NODE, T_TREE, proto);
  if (npd > 1)
    hops += ceil (log2 (npd)) * step_latency (ab, MP_TIER_DOMAIN, T_TREE, proto);
  double lat = ab->base_scale * base_us[T_TREE][proto] * 1e-6
               + 2 * (hops + depth * step_latency (ab, MP_TIER_CLUSTER, T_TREE, proto));
  double factor = 0.92;
  if (proto == MP_PROTO_LL)
    factor *= 1.0 / 3.8;
  else if (proto == MP_PROTO_LL128)
    factor *= domains > 1 ? 120.0 / 128 : 7.0 / 9;
  return lat + size / (0.5 * ring_bw (ab) * factor);
}

/* A group of the same shape restricted to one domain's ranks, or to one rank per domain. */
static void
sub_group (const MpAlphaBeta *ab, gboolean intra, MpAlphaBeta *out)
{
  *out = *ab;
  if (intra)
    {
      out->n_ranks = ab->ranks_per_domain;
      out->n_nodes = ab->nodes_per_domain;
      out->n_domains = 1;
    }
  else
    {
      out->n_ranks = ab->n_domains;
      out->n_nodes = ab->n_domains;
      out->ranks_per_node = 1;
      out->ranks_per_domain = 1;
      out->nodes_per_domain = 1;
    }
}

/* Reduce-scatter inside domains, the collective across domains on each rank's 1/r share
 * (r concurrent rails, each rank using its own NIC share), all-gather inside domains. The
 * inter-domain all-reduce is the faster of ring and tree with the same protocol. */
static double
hierarchical_time (MpCollKind kind, MpCollProto proto, double size, const MpAlphaBeta *ab)
{
  MpAlphaBeta in, across;
  sub_group (ab, TRUE, &in);
  sub_group (ab, FALSE, &across);
  double share = size / ab->ranks_per_domain;
  switch (kind)
    {
    case MP_COLL_ALL_REDUCE:
      return ring_time (MP_COLL_REDUCE_SCATTER, proto, size, &in)
             + MIN (ring_time (MP_COLL_ALL_REDUCE, proto, share, &across),
                    tree_time (proto, share, &across))
             + ring_time (MP_COLL_ALL_GATHER, proto, size, &in);
    case MP_COLL_ALL_GATHER:
      return ring_time (MP_COLL_ALL_GATHER, proto, share, &across)
             + ring_time (MP_COLL_ALL_GATHER, proto, size, &in);
    case MP_COLL_REDUCE_SCATTER:
      return ring_time (MP_COLL_REDUCE_SCATTER, proto, size, &in)
             + ring_time (MP_COLL_REDUCE_SCATTER, proto, share, &across);
    default:
      return -1;
    }
}

/* All-to-all as NCCL does it, every peer at once: what leaves the domain goes through the
 * rank's NIC share, the rest over its scale-up ports (node link, then the domain link
 * through the same ports, so those two add), both at the same time; the latency of n - 1
 * exchanges. Send/recv: one message over the tier the pair crosses. */
static MpTier
widest_tier (const MpAlphaBeta *ab)
{
  return ab->n_domains > 1 ? MP_TIER_CLUSTER : ab->n_nodes > 1 ? MP_TIER_DOMAIN : MP_TIER_NODE;
}

/* The latency of an all-to-all's n - 1 exchanges, after the call's base latency. */
static double
a2a_latency (const MpAlphaBeta *ab)
{
  double base = ab->base_scale * base_us[T_RING][MP_PROTO_SIMPLE] * 1e-6;
  return base + (ab->n_ranks - 1.0) * step_latency (ab, widest_tier (ab), T_RING,
                                                    MP_PROTO_SIMPLE);
}

/* BYTES a rank sends to the other ranks of its domain, spread evenly over them, over its
 * scale-up ports (node link, then the domain link through the same ports). */
static double
scale_up_time (double bytes, const MpAlphaBeta *ab)
{
  double r = ab->ranks_per_node, rd = ab->ranks_per_domain;
  if (rd <= 1)
    return 0;
  return bytes * (r - 1) / (rd - 1) / ab->bw_Bps[MP_TIER_NODE]
         + (rd > r ? bytes * (rd - r) / (rd - 1) / ab->bw_Bps[MP_TIER_DOMAIN] : 0);
}

static double
direct_time (MpCollKind kind, double size, const MpAlphaBeta *ab)
{
  double n = ab->n_ranks, r = ab->ranks_per_node, rd = ab->ranks_per_domain;
  if (kind == MP_COLL_SEND_RECV)
    {
      double base = ab->base_scale * base_us[T_RING][MP_PROTO_SIMPLE] * 1e-6;
      MpTier widest = widest_tier (ab);
      return base + step_latency (ab, widest, T_RING, MP_PROTO_SIMPLE)
             + size / ab->bw_Bps[widest];
    }
  double intra = r > 1 ? size * (r - 1) / n / ab->bw_Bps[MP_TIER_NODE] : 0;
  if (rd > r)
    intra += size * (rd - r) / n / ab->bw_Bps[MP_TIER_DOMAIN];
  double inter = ab->n_domains > 1 ? size * (n - rd) / n / ab->bw_Bps[MP_TIER_CLUSTER] : 0;
  return a2a_latency (ab) + MAX (intra, inter);
}

/* Groups a run of K consecutive experts from START covers, of GROUPS runs of
 * EXPERTS / GROUPS (expert e in group e * groups / experts), wrapping past the last. */
static double
run_groups (guint64 start, guint64 k, guint64 experts, guint64 groups)
{
  if (k >= experts)
    return (double) groups;
  guint64 first = start * groups / experts, end = start + k - 1;
  if (end < experts)
    return (double) (end * groups / experts - first + 1);
  guint64 last = (end - experts) * groups / experts;
  return (double) MIN (groups - first + last + 1, groups);
}

double
mp_coll_remote_groups (double experts, guint k, guint groups, MpRouting routing)
{
  if (groups <= 1 || k == 0 || !(experts >= 1))
    return 0;
  double g = groups, covered = 0;
  if (routing == MP_ROUTING_BLOCKED)
    {
      /* FakeBalancedGate: token t takes experts t*k .. t*k+k-1 (mod E); the starts cycle
       * through the multiples of gcd(k, E), each as often. */
      guint64 e = (guint64) experts, a = e, b = k;
      while (b != 0)
        {
          guint64 t = a % b;
          a = b;
          b = t;
        }
      for (guint64 s = 0; s < e; s += a)
        covered += run_groups (s, k, e, groups);
      covered /= (double) (e / a);
    }
  else
    {
      /* k distinct of the E, E / g in each group: a group holds none of them with
       * probability C(E - E / g, k) / C(E, k). */
      double miss = 1;
      for (guint j = 0; j < k; j++)
        miss *= MAX (experts - experts / g - j, 0.0) / (experts - j);
      covered = g * (1 - miss);
    }
  /* k experts lie in at most k groups (the form above overcounts groups of under one
   * expert each). */
  covered = MIN (covered, MIN ((double) k, g));
  return covered * (g - 1) / g;
}

double
mp_coll_dedup_a2a_size (double size, double copies, double experts, MpRouting routing,
                        guint n)
{
  guint k = (guint) MAX (round (copies), 1.0);
  if (n <= 1 || !(experts >= k))
    return size;
  /* direct_time sends (n - 1) / n of its size away: size' (n - 1) / n = bytes per token
   * x the other ranks the token goes to. */
  return size / k * mp_coll_remote_groups (experts, k, n, routing) * n / (n - 1.0);
}

double
mp_coll_forwarded_a2a_time (double size, double copies, double experts, MpRouting routing,
                            const MpAlphaBeta *group)
{
  g_return_val_if_fail (group != NULL, -1);
  MpAlphaBeta full;
  with_domains (group, &full);
  const MpAlphaBeta *ab = &full;
  if (ab->n_ranks <= 1 || !(size > 0))
    return 0;
  double n = ab->n_ranks, rd = ab->ranks_per_domain, nd = ab->n_domains;
  guint k = (guint) MAX (round (copies), 1.0);
  if (!(experts >= k))
    return direct_time (MP_COLL_ALL_TO_ALL, size, ab);
  if (nd <= 1)
    return direct_time (MP_COLL_ALL_TO_ALL,
                        mp_coll_dedup_a2a_size (size, copies, experts, routing, ab->n_ranks),
                        ab);
  double token = size / k;
  double rdma = token * mp_coll_remote_groups (experts, k, ab->n_domains, routing);
  /* p: the chance that a given other rank is one the token goes to (the same for each,
   * the rank's own place being any of the n alike). Scale-up: the rd - 1 others of its
   * domain directly, and in each of the nd - 1 others the rd - 1 ranks beside the rail
   * rank that the RDMA copy is forwarded to (the rail rank keeps its own). */
  double p = mp_coll_remote_groups (experts, k, ab->n_ranks, routing) / (n - 1);
  double nvlink = token * (rd - 1) * p * nd;
  return a2a_latency (ab)
         + MAX (scale_up_time (nvlink, ab), rdma / ab->bw_Bps[MP_TIER_CLUSTER]);
}

/* NVLink SHARP all-reduce inside one NVSwitch node or NVLink-switch domain: the switch
 * reduces, so the time is the buffer over the measured algbw, after NCCL's NVLS latency
 * (at the domain tier once the group spans nodes). */
static double
nvls_time (double size, const MpAlphaBeta *ab)
{
  MpTier tier = ab->n_nodes > 1 ? MP_TIER_DOMAIN : MP_TIER_NODE;
  return step_latency (ab, tier, T_NVLS, MP_PROTO_SIMPLE) + size / ab->nvls_algbw_Bps;
}

/* Does ALGO implement KIND on a group shaped like AB? */
static gboolean
algo_applies (MpCollKind kind, MpCollAlgo algo, MpCollProto proto, const MpAlphaBeta *ab)
{
  if ((proto != MP_PROTO_SIMPLE && !ab->protocols) || (proto == MP_PROTO_LL128 && !ab->ll128))
    return FALSE;
  switch (algo)
    {
    case MP_ALGO_RING:
      return kind == MP_COLL_ALL_REDUCE || kind == MP_COLL_ALL_GATHER
             || kind == MP_COLL_REDUCE_SCATTER || kind == MP_COLL_BROADCAST;
    case MP_ALGO_TREE:
      return kind == MP_COLL_ALL_REDUCE;
    case MP_ALGO_HIERARCHICAL:
      return (kind == MP_COLL_ALL_REDUCE || kind == MP_COLL_ALL_GATHER
              || kind == MP_COLL_REDUCE_SCATTER)
             && ab->n_domains > 1 && ab->ranks_per_domain > 1;
    case MP_ALGO_NVLS:
      return kind == MP_COLL_ALL_REDUCE && ab->n_domains == 1 && ab->nvls_algbw_Bps > 0
             && proto == MP_PROTO_SIMPLE;
    case MP_ALGO_DIRECT:
      return (kind == MP_COLL_ALL_TO_ALL || kind == MP_COLL_SEND_RECV)
             && proto == MP_PROTO_SIMPLE;
    case MP_ALGO_AUTO:
    default:
      return FALSE;
    }
}

double
mp_coll_time (MpCollKind kind, MpCollAlgo algo, MpCollProto proto, double size,
              const MpAlphaBeta *group)
{
  g_return_val_if_fail (group != NULL && (guint) kind < MP_COLL_N, -1);
  MpAlphaBeta full;
  with_domains (group, &full);
  const MpAlphaBeta *ab = &full;
  if (!algo_applies (kind, algo, proto, ab))
    return -1;
  if (ab->n_ranks <= 1 || size <= 0)
    return 0;
  switch (algo)
    {
    case MP_ALGO_RING:
      return ring_time (kind, proto, size, ab);
    case MP_ALGO_TREE:
      return tree_time (proto, size, ab);
    case MP_ALGO_HIERARCHICAL:
      return hierarchical_time (kind, proto, size, ab);
    case MP_ALGO_NVLS:
      return nvls_time (size, ab);
    case MP_ALGO_DIRECT:
      return direct_time (kind, size, ab);
    default:
      return -1;
    }
}

/* ---- from a span to a time ----------------------------------------------------------- */

/* Efficiency of TIER for DEV: the profile's largest-message busbw over the link's rate
 * where it measured one, else the curve's. */
double
cm_tier_efficiency (const MpCluster *cluster, const MpCostDevice *dev, MpTier tier)
{
  const MpLink *link = &cluster->links[tier];
  if (dev->profile && link->bw_Bps > 0)
    {
      double busbw = mp_cost_profile_coll_busbw (dev->profile, MP_COLL_ALL_REDUCE, tier,
                                                 G_MAXDOUBLE);
      if (busbw <= 0)
        busbw = mp_cost_profile_coll_busbw (dev->profile, MP_COLL_ALL_GATHER, tier,
                                            G_MAXDOUBLE);
      if (busbw > 0)
        return MIN (1.0, busbw / link->bw_Bps);
    }
  return dev->curve->link_eff[tier];
}

void
mp_cost_alpha_beta (const MpCostContext *ctx, const MpCostDevice *dev,
                    const MpGroupSpan *span, MpAlphaBeta *out)
{
  (void) ctx;
  memset (out, 0, sizeof *out);
  out->n_ranks = span->n_ranks;
  out->n_nodes = MAX (span->n_nodes, 1u);
  out->ranks_per_node = MAX (span->ranks_per_node, 1u);
  out->n_domains = span->n_domains ? span->n_domains : out->n_nodes;
  out->ranks_per_domain = span->ranks_per_domain ? span->ranks_per_domain
                                                 : out->ranks_per_node;
  out->nodes_per_domain = MAX (span->nodes_per_domain, 1u);
  for (int t = 0; t < MP_TIER_N; t++)
    {
      out->bw_Bps[t] = span->bw_Bps[t] * dev->link_eff[t];
      out->alpha_s[t] = span->latency_s[t];
    }
  out->nvlink = dev->nvlink;
  out->domain_nvlink = dev->domain_nvlink;
  out->base_scale = dev->curve->nccl ? 1 : 0;
  out->protocols = dev->curve->nccl;
  out->ll128 = dev->curve->nccl && dev->nvlink;
  if (dev->curve->nvls_algbw_eff > 0 && dev->nvswitch)
    out->nvls_algbw_Bps = dev->curve->nvls_algbw_eff * span->bw_Bps[MP_TIER_NODE];
  /* Over several nodes of one domain, the domain's switches must reduce, at the slower of
   * the two tiers' rates. */
  if (dev->curve->nvls_algbw_eff > 0 && span->n_nodes > 1)
    out->nvls_algbw_Bps = dev->domain_nvswitch
                          ? dev->curve->nvls_algbw_eff * MIN (span->bw_Bps[MP_TIER_NODE],
                                                              span->bw_Bps[MP_TIER_DOMAIN])
                          : 0;
}

/* The measured table that covers a group lying in one tier, as busbw at SIZE (node: one
 * node; domain: one rank per node of one domain; cluster: one rank per domain); 0 if
 * none. */
static double
profile_busbw (const MpCostDevice *dev, MpCollKind kind, const MpGroupSpan *span, double size)
{
  if (dev->profile == NULL)
    return 0;
  if (span->n_nodes <= 1)
    return mp_cost_profile_coll_busbw (dev->profile, kind, MP_TIER_NODE, size);
  if (span->ranks_per_node <= 1 && span->n_domains <= 1)
    return mp_cost_profile_coll_busbw (dev->profile, kind, MP_TIER_DOMAIN, size);
  if (span->ranks_per_domain <= 1)
    return mp_cost_profile_coll_busbw (dev->profile, kind, MP_TIER_CLUSTER, size);
  return 0;
}

/* The algorithms that may implement each collective, as NCCL has them (plus ours). */
static const MpCollAlgo algos_of[MP_COLL_N][5] = {
  [MP_COLL_ALL_REDUCE] = { MP_ALGO_RING, MP_ALGO_TREE, MP_ALGO_HIERARCHICAL, MP_ALGO_NVLS,
                           MP_ALGO_AUTO },
  [MP_COLL_ALL_GATHER] = { MP_ALGO_RING, MP_ALGO_HIERARCHICAL, MP_ALGO_AUTO },
  [MP_COLL_REDUCE_SCATTER] = { MP_ALGO_RING, MP_ALGO_HIERARCHICAL, MP_ALGO_AUTO },
  [MP_COLL_ALL_TO_ALL] = { MP_ALGO_DIRECT, MP_ALGO_AUTO },
  [MP_COLL_BROADCAST] = { MP_ALGO_RING, MP_ALGO_AUTO },
  [MP_COLL_SEND_RECV] = { MP_ALGO_DIRECT, MP_ALGO_AUTO },
};

void
mp_cost_collective (const MpCostContext *ctx, const MpCostDevice *dev, MpCollKind kind,
                    double size, const MpGroupSpan *span, MpCollAlgo algo, MpCollCost *out)
{
  g_return_if_fail (ctx != NULL && dev != NULL && span != NULL && out != NULL);
  memset (out, 0, sizeof *out);
  out->algo = algo == MP_ALGO_AUTO ? MP_ALGO_RING : algo;
  out->proto = MP_PROTO_SIMPLE;
  if (span->n_ranks <= 1 || !(size > 0))
    return;
  double busbw = algo == MP_ALGO_AUTO ? profile_busbw (dev, kind, span, size) : 0;
  if (busbw > 0)
    {
      out->time_s = mp_coll_time_from_busbw (kind, span->n_ranks, size, busbw);
      out->from_profile = TRUE;
    }
  else
    {
      MpAlphaBeta ab;
      mp_cost_alpha_beta (ctx, dev, span, &ab);
      double best = -1;
      for (const MpCollAlgo *a = algos_of[kind]; *a != MP_ALGO_AUTO; a++)
        {
          if (algo != MP_ALGO_AUTO && *a != algo)
            continue;
          for (int p = 0; p < MP_PROTO_N; p++)
            {
              double t = mp_coll_time (kind, *a, (MpCollProto) p, size, &ab);
              if (t >= 0 && (best < 0 || t < best))
                {
                  best = t;
                  out->algo = *a;
                  out->proto = (MpCollProto) p;
                }
            }
        }
      /* An algorithm that cannot run this collective: report it as unavailable. */
      out->time_s = best >= 0 ? best : G_MAXDOUBLE;
    }
  out->algbw_Bps = mp_coll_algbw (size, out->time_s);
  out->busbw_Bps = out->algbw_Bps * mp_coll_bus_factor (kind, span->n_ranks);
}

/* ---- names ---------------------------------------------------------------------------- */

const char *
mp_coll_algo_name (MpCollAlgo algo)
{
  static const char *const names[] = { "auto", "ring", "tree", "hierarchical", "nvls",
                                       "direct" };
  return (guint) algo < G_N_ELEMENTS (names) ? names[algo] : "?";
}

const char *
mp_coll_proto_name (MpCollProto proto)
{
  static const char *const names[] = { "LL", "LL128", "Simple" };
  return (guint) proto < G_N_ELEMENTS (names) ? names[proto] : "?";
}
