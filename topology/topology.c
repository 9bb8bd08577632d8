/* topology.c - questions about a loaded cluster: where a device sits, and what a group of
 * ranks spans.
 *
 * The cluster is read-only here (a changed one is a copy, mp_cluster_copy); loading and
 * checking it is topology-yaml.c. Devices are
 * numbered node-major over the node groups in file order, so group g holds devices
 * [first_device, first_device + nodes * devices_per_node). Units: bytes/s, seconds. */
#define G_LOG_DOMAIN "mpplan-topology"
#include "topology/topology.h"
#include "common/zoo.h"

#include <stdlib.h>
#include <string.h>

static const char *const tier_names[MP_TIER_N] = { "node", "domain", "cluster" };

const char *
mp_tier_name (MpTier tier)
{
  g_return_val_if_fail (tier < MP_TIER_N, "?");
  return tier_names[tier];
}

void
mp_cluster_free (MpCluster *cluster)
{
  if (cluster == NULL)
    return;
  for (guint i = 0; i < cluster->n_groups; i++)
    {
      g_free (cluster->groups[i].name);
      g_free (cluster->groups[i].device.name);
    }
  g_free (cluster->groups);
  for (int t = 0; t < MP_TIER_N; t++)
    g_free (cluster->links[t].name);
  g_free (cluster->name);
  g_free (cluster->source);
  g_free (cluster->profile);
  g_free (cluster);
}

MpCluster *
mp_cluster_copy (const MpCluster *cluster)
{
  MpCluster *c = g_memdup2 (cluster, sizeof *cluster);
  c->groups = g_memdup2 (cluster->groups, MAX (cluster->n_groups, 1u) * sizeof *c->groups);
  for (guint i = 0; i < c->n_groups; i++)
    {
      c->groups[i].name = g_strdup (cluster->groups[i].name);
      c->groups[i].device.name = g_strdup (cluster->groups[i].device.name);
    }
  for (int t = 0; t < MP_TIER_N; t++)
    c->links[t].name = g_strdup (cluster->links[t].name);
  c->name = g_strdup (cluster->name);
  c->source = g_strdup (cluster->source);
  c->profile = g_strdup (cluster->profile);
  return c;
}

char **
mp_cluster_zoo_list (void)
{
  return mp_zoo_list ("clusters");
}

/* Index of the last group whose first index (device or node, read by FIRST) is <= I.
 * Groups are in ascending order of both, and none is empty. */
static guint
find_group (const MpCluster *c, guint i, gboolean by_node)
{
  guint lo = 0, hi = c->n_groups;
  while (hi - lo > 1)
    {
      guint mid = lo + (hi - lo) / 2;
      guint first = by_node ? c->groups[mid].first_node : c->groups[mid].first_device;
      if (first <= i)
        lo = mid;
      else
        hi = mid;
    }
  return lo;
}

const MpNodeGroup *
mp_cluster_group_of (const MpCluster *cluster, guint device)
{
  g_return_val_if_fail (cluster != NULL && cluster->n_groups > 0, NULL);
  g_return_val_if_fail (device < cluster->world_size, NULL);
  return &cluster->groups[find_group (cluster, device, FALSE)];
}

guint
mp_cluster_node_of (const MpCluster *cluster, guint device)
{
  const MpNodeGroup *g = mp_cluster_group_of (cluster, device);
  g_return_val_if_fail (g != NULL, 0);
  return g->first_node + (device - g->first_device) / g->devices_per_node;
}

guint
mp_cluster_domain_of (const MpCluster *cluster, guint device)
{
  return mp_cluster_node_of (cluster, device) / MAX (cluster->nodes_per_domain, 1u);
}

/* The rate a device is ranked by: bf16 where it has one, else fp32. */
static double
device_speed (const MpDevice *d)
{
  return d->peak_flops[MP_DTYPE_BF16] > 0 ? d->peak_flops[MP_DTYPE_BF16]
                                          : d->peak_flops[MP_DTYPE_FP32];
}

const MpDevice *
mp_cluster_slowest_device (const MpCluster *cluster)
{
  g_return_val_if_fail (cluster != NULL && cluster->n_groups > 0, NULL);
  const MpDevice *slowest = &cluster->groups[0].device;
  for (guint i = 1; i < cluster->n_groups; i++)
    if (device_speed (&cluster->groups[i].device) < device_speed (slowest))
      slowest = &cluster->groups[i].device;
  return slowest;
}

/* Per-rank share of the node's NICs when all devices of a node of group G send at once:
 * a rank never gets more than one NIC, and fewer NICs than devices are shared evenly. */
static double
nic_share_Bps (const MpLink *link, const MpNodeGroup *g)
{
  double nics = link->nics_per_node > 0 ? link->nics_per_node : g->devices_per_node;
  return link->bw_Bps * MIN (1.0, nics / g->devices_per_node);
}

static int
cmp_guint (const void *a, const void *b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;
  return (x > y) - (x < y);
}

/* Distinct nodes in the sorted array NODES[N], the longest run, and the slowest
 * cluster-tier share among them; then the domains they fall in (nodes sorted, so a
 * domain's nodes are one run). */
static void
count_nodes (const MpCluster *c, const guint *nodes, guint n, MpGroupSpan *span)
{
  const MpLink *nic = &c->links[MP_TIER_CLUSTER];
  guint npd = MAX (c->nodes_per_domain, 1u);
  double share = G_MAXDOUBLE;
  guint run = 0, domain_run = 0, domain_nodes = 0;
  for (guint i = 0; i < n; i++)
    {
      gboolean same_domain = i > 0 && nodes[i] / npd == nodes[i - 1] / npd;
      domain_run = same_domain ? domain_run + 1 : 1;
      span->ranks_per_domain = MAX (span->ranks_per_domain, domain_run);
      span->n_domains += same_domain ? 0 : 1;
      run = (i > 0 && nodes[i] == nodes[i - 1]) ? run + 1 : 1;
      span->ranks_per_node = MAX (span->ranks_per_node, run);
      if (run > 1)
        continue;
      span->n_nodes++;
      domain_nodes = same_domain ? domain_nodes + 1 : 1;
      span->nodes_per_domain = MAX (span->nodes_per_domain, domain_nodes);
      if (c->has_link[MP_TIER_CLUSTER])
        share = MIN (share, nic_share_Bps (nic, &c->groups[find_group (c, nodes[i], TRUE)]));
    }
  if (c->has_link[MP_TIER_CLUSTER])
    span->bw_Bps[MP_TIER_CLUSTER] = share;
}

MpTier
mp_span_widest (const MpGroupSpan *span)
{
  g_return_val_if_fail (span != NULL, MP_TIER_NODE);
  return span->n_domains > 1 ? MP_TIER_CLUSTER
         : span->n_nodes > 1 ? MP_TIER_DOMAIN : MP_TIER_NODE;
}

void
mp_cluster_span (const MpCluster *cluster, const guint *placement, const guint *ranks,
                 guint n, MpGroupSpan *span)
{
  g_return_if_fail (cluster != NULL && span != NULL && (ranks != NULL || n == 0));
  memset (span, 0, sizeof *span);
  span->n_ranks = n;
  span->widest = MP_TIER_NODE;
  for (int t = 0; t < MP_TIER_N; t++)
    if (cluster->has_link[t])
      {
        span->bw_Bps[t] = cluster->links[t].bw_Bps;
        span->latency_s[t] = cluster->links[t].latency_s;
      }
  if (cluster->has_link[MP_TIER_CLUSTER])
    {
      /* With no ranks, the slowest share anywhere (there is nothing better to say). */
      double share = G_MAXDOUBLE;
      for (guint i = 0; i < cluster->n_groups; i++)
        share = MIN (share, nic_share_Bps (&cluster->links[MP_TIER_CLUSTER],
                                           &cluster->groups[i]));
      span->bw_Bps[MP_TIER_CLUSTER] = share;
    }
  if (n == 0)
    return;

  g_autofree guint *nodes = g_new (guint, n);
  for (guint i = 0; i < n; i++)
    {
      g_return_if_fail (ranks[i] < cluster->world_size);
      guint device = placement ? placement[ranks[i]] : ranks[i];
      g_return_if_fail (device < cluster->world_size);
      nodes[i] = mp_cluster_node_of (cluster, device);
    }
  qsort (nodes, n, sizeof *nodes, cmp_guint);
  count_nodes (cluster, nodes, n, span);
  span->widest = mp_span_widest (span);
}
