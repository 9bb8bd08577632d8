/* topology-yaml.c - cluster YAML -> MpCluster, checked against its schema.
 *
 * Every problem is recorded with its FILE:LINE:COLUMN through the MpYamlReader and the walk
 * goes on, so one `mpplan validate` lists them all; a cluster is returned only when there
 * were none. The node-count suffix of a cluster argument ("dgx-a100-80g:16") is applied
 * while reading, before the checks that depend on the node count. Not here: what the
 * numbers mean for a group of ranks (topology.c). */
#define G_LOG_DOMAIN "mpplan-topology"
#include "topology/topology.h"
#include "common/error.h"
#include "common/yamldoc.h"
#include "common/zoo.h"

#include <string.h>

static const char *const top_keys[] = {
  "name", "nodes", "devices_per_node", "device", "groups", "links", "device_overhead",
  "profile", "nodes_per_domain", "devices_per_domain", NULL
};
static const char *const group_keys[] = { "name", "nodes", "devices_per_node", "device", NULL };
static const char *const device_keys[] = {
  "name", "memory", "memory_bandwidth", "peak", "calibrated", "power_limit_w", NULL
};
static const char *const link_keys[] = {
  "tier", "name", "bandwidth", "latency", "nics_per_node", NULL
};
/* Same order as MpTier. */
static const char *const tier_names[] = { "node", "domain", "cluster", NULL };
G_STATIC_ASSERT (G_N_ELEMENTS (tier_names) == MP_TIER_N + 1);

typedef struct {
  MpYamlReader r;
  MpCluster *c;
  guint override_nodes;      /* from a ":N" suffix; 0 = none */
  guint override_devices;    /* from a ":Ng" suffix (devices); 0 = none */
  const MpYamlNode *domain_key;  /* nodes_per_domain or devices_per_domain, if given */
} Loader;

/* ---- device ------------------------------------------------------------------------ */

/* No "did you mean" here: dtype names are one digit apart (fp64 is not fp16). */
static void
unknown_dtype (MpYamlReader *r, const MpYamlNode *key)
{
  g_autoptr(GString) list = g_string_new (NULL);
  for (int d = 0; d < MP_DTYPE_N; d++)
    g_string_append_printf (list, "%s%s", d ? ", " : "", mp_dtype_name ((MpDtype) d));
  mp_yaml_problem (r, key, "unknown dtype '%s' in 'peak' (one of %s)", key->value, list->str);
}

/* peak: {dtype: FLOP/s, ...}, dense rates; 0 (or absent) means the dtype is unsupported. */
static void
read_peaks (MpYamlReader *r, const MpYamlNode *device, MpDevice *dev)
{
  const MpYamlNode *peak = mp_yaml_lookup (device, "peak");
  if (peak == NULL)
    {
      mp_yaml_problem (r, device, "missing required key 'peak' (dense FLOP/s per dtype, "
                       "e.g. {bf16: 312 TFLOPS})");
      return;
    }
  if (!mp_yaml_expect_map (r, peak, "'peak'"))
    return;
  gboolean seen[MP_DTYPE_N] = { FALSE }, clean = TRUE, any = FALSE;
  for (guint i = 0; i < peak->keys->len; i++)
    {
      const MpYamlNode *key = g_ptr_array_index (peak->keys, i);
      MpDtype d;
      double flops;
      if (!mp_dtype_from_name (key->value, &d))
        {
          unknown_dtype (r, key);
          clean = FALSE;
        }
      else if (seen[d])
        {
          mp_yaml_problem (r, key, "dtype '%s' given twice in 'peak'", mp_dtype_name (d));
          clean = FALSE;
        }
      else if (mp_yaml_scalar_quantity (r, g_ptr_array_index (peak->items, i), MP_UNIT_FLOPS,
                                        TRUE, &flops))
        {
          seen[d] = TRUE;
          dev->peak_flops[d] = flops;
          any = any || flops > 0;
        }
      else
        clean = FALSE;
    }
  if (clean && !any)
    mp_yaml_problem (r, peak, "'peak' needs at least one dtype with a non-zero rate");
}

static void
read_device (MpYamlReader *r, const MpYamlNode *map, MpDevice *dev)
{
  dev->calibrated = TRUE;
  if (!mp_yaml_expect_map (r, map, "'device'"))
    return;
  mp_yaml_check_keys (r, map, device_keys);
  const char *name = NULL;
  if (mp_yaml_get_string (r, map, "name", TRUE, &name))
    dev->name = g_strdup (name);
  mp_yaml_get_quantity (r, map, "memory", MP_UNIT_BYTES, TRUE, FALSE, &dev->memory_bytes);
  mp_yaml_get_quantity (r, map, "memory_bandwidth", MP_UNIT_BPS, TRUE, FALSE, &dev->mem_bw_Bps);
  mp_yaml_get_bool (r, map, "calibrated", FALSE, &dev->calibrated);
  /* The watts a board is held to (nvidia-smi -pl): the cost model lowers the tensor rate
   * it sustains (mp_cost_power_rate); the peaks stay the datasheet's, for MFU. */
  mp_yaml_get_quantity (r, map, "power_limit_w", MP_UNIT_COUNT, FALSE, FALSE,
                        &dev->power_limit_w);
  read_peaks (r, map, dev);
}

static gboolean
same_device (const MpDevice *a, const MpDevice *b)
{
  if (g_strcmp0 (a->name, b->name) != 0 || a->memory_bytes != b->memory_bytes
      || a->mem_bw_Bps != b->mem_bw_Bps || a->power_limit_w != b->power_limit_w)
    return FALSE;
  return memcmp (a->peak_flops, b->peak_flops, sizeof a->peak_flops) == 0;
}

/* ---- node groups ------------------------------------------------------------------- */

/* devices_per_node: a count, or `auto` = the CPU cores of this machine (one rank each). */
static void
read_devices_per_node (MpYamlReader *r, const MpYamlNode *map, guint *out)
{
  const MpYamlNode *v = mp_yaml_lookup (map, "devices_per_node");
  if (v != NULL && v->kind == MP_YAML_SCALAR && strcmp (v->value, "auto") == 0)
    {
      *out = CLAMP ((guint) g_get_num_processors (), 1, MP_CLUSTER_MAX_DEVICES_PER_NODE);
      return;
    }
  guint64 n;
  if (mp_yaml_get_uint (r, map, "devices_per_node", TRUE, 1, MP_CLUSTER_MAX_DEVICES_PER_NODE,
                        &n))
    *out = (guint) n;
}

/* nodes (default 1, or OVERRIDE_NODES when > 0), devices_per_node and device of MAP: the
 * top level of a homogeneous cluster or one of its `groups`. */
static void
read_group_body (MpYamlReader *r, const MpYamlNode *map, guint override_nodes, MpNodeGroup *g)
{
  guint64 nodes = 1;
  mp_yaml_get_uint (r, map, "nodes", FALSE, 1, MP_CLUSTER_MAX_NODES, &nodes);
  g->nodes = override_nodes > 0 ? override_nodes : (guint) nodes;
  read_devices_per_node (r, map, &g->devices_per_node);
  const MpYamlNode *device = mp_yaml_lookup (map, "device");
  if (device == NULL)
    mp_yaml_problem (r, map, "missing required key 'device'%s",
                     map == r->doc->root ? " (or a list of 'groups')" : "");
  else
    read_device (r, device, &g->device);
}

/* Top-level keys that a file with `groups` must not have (each group has its own). */
static void
check_no_single_keys (Loader *l, const MpYamlNode *root)
{
  static const char *const single[] = { "nodes", "devices_per_node", "device", NULL };
  for (const char *const *k = single; *k; k++)
    {
      const MpYamlNode *v = mp_yaml_lookup (root, *k);
      if (v != NULL)
        mp_yaml_problem (&l->r, v, "'%s' cannot be combined with 'groups' (each group gives "
                         "its own nodes, devices_per_node and device)", *k);
    }
}

static void
read_groups (Loader *l, const MpYamlNode *seq)
{
  if (seq->kind != MP_YAML_SEQ || seq->items->len == 0)
    {
      mp_yaml_problem (&l->r, seq, "'groups' must be a non-empty list of {name, nodes, "
                       "devices_per_node, device}");
      return;
    }
  if (l->override_nodes > 0 || l->override_devices > 0)
    mp_yaml_problem (&l->r, seq, "a size suffix (':%u%s') needs a cluster without 'groups'",
                     l->override_nodes + l->override_devices, l->override_devices ? "g" : "");
  MpCluster *c = l->c;
  c->n_groups = seq->items->len;
  c->groups = g_new0 (MpNodeGroup, c->n_groups);
  g_autoptr(GHashTable) names = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint i = 0; i < c->n_groups; i++)
    {
      const MpYamlNode *map = g_ptr_array_index (seq->items, i);
      MpNodeGroup *g = &c->groups[i];
      g->name = g_strdup ("");
      g->device.calibrated = TRUE;
      if (!mp_yaml_expect_map (&l->r, map, "a node group"))
        continue;
      mp_yaml_check_keys (&l->r, map, group_keys);
      const char *name = NULL;
      if (mp_yaml_get_string (&l->r, map, "name", TRUE, &name))
        {
          const MpYamlNode *first = g_hash_table_lookup (names, name);
          if (first != NULL)
            mp_yaml_problem (&l->r, mp_yaml_lookup (map, "name"),
                             "duplicate group name '%s' (first at line %u)", name, first->line);
          else
            g_hash_table_insert (names, (gpointer) name, (gpointer) map);
          g_free (g->name);
          g->name = g_strdup (name);
        }
      read_group_body (&l->r, map, 0, g);
    }
}

/* ---- links ------------------------------------------------------------------------- */

/* One link map; returns its tier or -1. Fills *LINK (caller frees link->name). */
static int
read_link (MpYamlReader *r, const MpYamlNode *map, MpLink *link)
{
  if (!mp_yaml_expect_map (r, map, "a link"))
    return -1;
  mp_yaml_check_keys (r, map, link_keys);
  int tier = -1;
  if (!mp_yaml_get_enum (r, map, "tier", TRUE, tier_names, &tier))
    tier = -1;
  const char *name = NULL;
  if (mp_yaml_get_string (r, map, "name", TRUE, &name))
    link->name = g_strdup (name);
  mp_yaml_get_quantity (r, map, "bandwidth", MP_UNIT_BPS, TRUE, FALSE, &link->bw_Bps);
  mp_yaml_get_quantity (r, map, "latency", MP_UNIT_SECONDS, TRUE, TRUE, &link->latency_s);
  guint64 nics = 0;
  const MpYamlNode *nics_node = mp_yaml_lookup (map, "nics_per_node");
  if (nics_node != NULL && tier >= 0 && tier != MP_TIER_CLUSTER)
    mp_yaml_problem (r, nics_node, "'nics_per_node' applies only to the 'cluster' tier");
  else if (mp_yaml_get_uint (r, map, "nics_per_node", FALSE, 1,
                             MP_CLUSTER_MAX_DEVICES_PER_NODE, &nics))
    link->nics_per_node = (guint) nics;
  if (tier >= 0)
    link->tier = (MpTier) tier;
  return tier;
}

static void
read_links (Loader *l, const MpYamlNode *seq)
{
  if (seq->kind != MP_YAML_SEQ)
    {
      mp_yaml_problem (&l->r, seq, "'links' must be a list of {tier, name, bandwidth, "
                       "latency}");
      return;
    }
  const MpYamlNode *first[MP_TIER_N] = { NULL };
  for (guint i = 0; i < seq->items->len; i++)
    {
      const MpYamlNode *map = g_ptr_array_index (seq->items, i);
      MpLink link = { 0 };
      int tier = read_link (&l->r, map, &link);
      if (tier >= 0 && first[tier] != NULL)
        {
          mp_yaml_problem (&l->r, mp_yaml_lookup (map, "tier"),
                           "duplicate link tier '%s' (first at line %u)", tier_names[tier],
                           first[tier]->line);
          tier = -1;
        }
      if (tier < 0)
        {
          g_free (link.name);
          continue;
        }
      first[tier] = map;
      l->c->links[tier] = link;
      l->c->has_link[tier] = TRUE;
    }
}

/* ---- NVLink domains ----------------------------------------------------------------- */

/* nodes_per_domain: N, or devices_per_domain: D (a multiple of devices_per_node, which a
 * cluster with `groups` does not have one of). A domain holds at least two nodes: one
 * node is the node tier. Sets c->nodes_per_domain (1 without either key). */
static void
read_domain (Loader *l, const MpYamlNode *root)
{
  MpCluster *c = l->c;
  c->nodes_per_domain = 1;
  const MpYamlNode *by_nodes = mp_yaml_lookup (root, "nodes_per_domain");
  const MpYamlNode *by_devices = mp_yaml_lookup (root, "devices_per_domain");
  if (by_nodes != NULL && by_devices != NULL)
    {
      mp_yaml_problem (&l->r, by_devices, "give 'nodes_per_domain' or 'devices_per_domain', "
                       "not both");
      return;
    }
  l->domain_key = by_nodes ? by_nodes : by_devices;
  guint64 n;
  if (by_nodes != NULL)
    {
      if (mp_yaml_get_uint (&l->r, root, "nodes_per_domain", FALSE, 2, MP_CLUSTER_MAX_NODES,
                            &n))
        c->nodes_per_domain = (guint) n;
      return;
    }
  if (by_devices == NULL
      || !mp_yaml_get_uint (&l->r, root, "devices_per_domain", FALSE, 1, G_MAXUINT, &n))
    return;
  if (c->n_groups != 1 || mp_yaml_lookup (root, "groups") != NULL)
    {
      mp_yaml_problem (&l->r, by_devices, "'devices_per_domain' needs a cluster without "
                       "'groups' (give 'nodes_per_domain')");
      return;
    }
  guint dpn = c->groups[0].devices_per_node;
  if (dpn == 0)
    return; /* already reported */
  if (n % dpn != 0 || n / dpn < 2)
    {
      mp_yaml_problem (&l->r, by_devices, "devices_per_domain (%" G_GUINT64_FORMAT ") must be "
                       "a multiple of devices_per_node (%u), at least two nodes", n, dpn);
      return;
    }
  c->nodes_per_domain = (guint) (n / dpn);
}

/* A ":Ng" suffix sets the devices: a whole number of nodes. A ":N" suffix on a cluster
 * with domains counts domains (racks): N x nodes_per_domain nodes. FALSE (with a
 * problem) when the size does not fit. */
static gboolean
apply_domain_suffix (Loader *l, const MpYamlNode *where)
{
  MpCluster *c = l->c;
  if (l->override_devices > 0 && c->n_groups == 1)
    {
      guint dpn = c->groups[0].devices_per_node;
      if (dpn == 0 || l->override_devices % dpn != 0)
        {
          mp_yaml_problem (&l->r, where, "':%ug' devices are not a whole number of nodes of "
                           "%u devices", l->override_devices, dpn);
          return FALSE;
        }
      c->groups[0].nodes = l->override_devices / dpn;
      return TRUE;
    }
  if (l->override_nodes == 0 || c->nodes_per_domain < 2 || c->n_groups != 1)
    return TRUE;
  guint64 nodes = (guint64) l->override_nodes * c->nodes_per_domain;
  if (nodes > MP_CLUSTER_MAX_NODES)
    {
      mp_yaml_problem (&l->r, where, "':%u' domains of %u nodes are %" G_GUINT64_FORMAT
                       " nodes (at most %u)", l->override_nodes, c->nodes_per_domain, nodes,
                       MP_CLUSTER_MAX_NODES);
      return FALSE;
    }
  c->groups[0].nodes = (guint) nodes;
  return TRUE;
}

/* The domain tier's link exists exactly when domains are declared. */
static void
check_domain_tier (Loader *l, const MpYamlNode *links)
{
  MpCluster *c = l->c;
  if (c->nodes_per_domain > 1 && !c->has_link[MP_TIER_DOMAIN])
    mp_yaml_problem (&l->r, l->domain_key, "a domain of %u nodes needs a link of tier "
                     "'domain' (between the nodes of a domain) in 'links'",
                     c->nodes_per_domain);
  if (c->nodes_per_domain < 2 && c->has_link[MP_TIER_DOMAIN] && l->domain_key == NULL)
    mp_yaml_problem (&l->r, links, "a link of tier 'domain' needs 'nodes_per_domain' or "
                     "'devices_per_domain' (how many nodes share the domain link)");
}

/* ---- whole-cluster checks ---------------------------------------------------------- */

/* Offsets, totals and the size limits; FALSE (with a problem) when too large. */
static gboolean
count_world (Loader *l, const MpYamlNode *where)
{
  MpCluster *c = l->c;
  guint64 nodes = 0, devices = 0;
  for (guint i = 0; i < c->n_groups; i++)
    {
      MpNodeGroup *g = &c->groups[i];
      if (g->nodes == 0 || g->devices_per_node == 0)
        return FALSE; /* already reported */
      g->first_node = (guint) nodes;
      g->first_device = (guint) devices;
      nodes += g->nodes;
      devices += (guint64) g->nodes * g->devices_per_node;
      if (nodes > MP_CLUSTER_MAX_NODES || devices > G_MAXUINT)
        {
          mp_yaml_problem (&l->r, where, "cluster too large: %" G_GUINT64_FORMAT " nodes, %"
                           G_GUINT64_FORMAT " devices so far (at most %u nodes and %u devices)",
                           nodes, devices, MP_CLUSTER_MAX_NODES, G_MAXUINT);
          return FALSE;
        }
    }
  c->nodes = (guint) nodes;
  c->world_size = (guint) devices;
  c->domains = (c->nodes + c->nodes_per_domain - 1) / c->nodes_per_domain;
  return TRUE;
}

/* Where a node count came from, for a message. */
static const char *
suffix_note (const Loader *l)
{
  return l->override_devices > 0 ? " (from the ':Ng' suffix)"
         : l->override_nodes > 0 ? " (from the ':N' suffix)" : "";
}

/* Tiers the shape needs: node for several devices on a node, cluster for several nodes. */
static void
check_tiers (Loader *l, const MpYamlNode *links)
{
  MpCluster *c = l->c;
  guint max_dpn = 0;
  for (guint i = 0; i < c->n_groups; i++)
    max_dpn = MAX (max_dpn, c->groups[i].devices_per_node);
  if (max_dpn > 1 && !c->has_link[MP_TIER_NODE])
    mp_yaml_problem (&l->r, links, "%u devices per node need a link of tier 'node' (between "
                     "the devices of a node)", max_dpn);
  if (c->domains > 1 && !c->has_link[MP_TIER_CLUSTER])
    {
      if (c->nodes_per_domain > 1)
        mp_yaml_problem (&l->r, links, "%u domains%s need a link of tier 'cluster' (between "
                         "domains)", c->domains, suffix_note (l));
      else
        mp_yaml_problem (&l->r, links, "%u nodes%s need a link of tier 'cluster' (between "
                         "nodes)", c->nodes, suffix_note (l));
    }
  check_domain_tier (l, links);
  /* Default: one NIC per device on the widest node, which no group then shares. */
  if (c->has_link[MP_TIER_CLUSTER] && c->links[MP_TIER_CLUSTER].nics_per_node == 0)
    c->links[MP_TIER_CLUSTER].nics_per_node = MAX (max_dpn, 1);
}

static void
check_overhead (Loader *l, const MpYamlNode *where)
{
  MpCluster *c = l->c;
  for (guint i = 0; i < c->n_groups; i++)
    {
      const MpDevice *d = &c->groups[i].device;
      if (d->memory_bytes <= 0 || c->device_overhead_bytes < d->memory_bytes)
        continue;
      g_autofree char *o = mp_units_format (c->device_overhead_bytes, MP_UNIT_BYTES);
      g_autofree char *m = mp_units_format (d->memory_bytes, MP_UNIT_BYTES);
      mp_yaml_problem (&l->r, where, "device_overhead (%s) leaves no memory on device '%s' "
                       "(%s)", o, d->name ? d->name : "?", m);
      return;
    }
}

static void
finish_cluster (Loader *l, const MpYamlNode *root, const MpYamlNode *links)
{
  MpCluster *c = l->c;
  const MpYamlNode *size_node = mp_yaml_lookup (root, "groups");
  if (size_node == NULL)
    size_node = mp_yaml_lookup (root, "devices_per_node");
  if (c->n_groups == 0 || !apply_domain_suffix (l, size_node ? size_node : root)
      || !count_world (l, size_node ? size_node : root))
    return;
  if (links != NULL)
    check_tiers (l, links);
  const MpYamlNode *overhead = mp_yaml_lookup (root, "device_overhead");
  check_overhead (l, overhead ? overhead : root);
  for (guint i = 1; i < c->n_groups; i++)
    if (!same_device (&c->groups[0].device, &c->groups[i].device))
      c->heterogeneous = TRUE;
}

/* ---- the document ------------------------------------------------------------------ */

static void
read_cluster (Loader *l)
{
  const MpYamlNode *root = l->r.doc->root;
  MpCluster *c = l->c;
  if (!mp_yaml_expect_map (&l->r, root, "a cluster file"))
    return;
  mp_yaml_check_keys (&l->r, root, top_keys);
  const char *name = NULL;
  if (mp_yaml_get_string (&l->r, root, "name", TRUE, &name))
    c->name = g_strdup (name);

  const MpYamlNode *groups = mp_yaml_lookup (root, "groups");
  if (groups != NULL)
    {
      check_no_single_keys (l, root);
      read_groups (l, groups);
    }
  else
    {
      c->n_groups = 1;
      c->groups = g_new0 (MpNodeGroup, 1);
      c->groups[0].name = g_strdup ("");
      read_group_body (&l->r, root, l->override_nodes, &c->groups[0]);
    }

  const MpYamlNode *links = mp_yaml_lookup (root, "links");
  if (links == NULL)
    mp_yaml_problem (&l->r, root, "missing required key 'links' (a list of {tier, name, "
                     "bandwidth, latency})");
  else
    read_links (l, links);

  read_domain (l, root);
  c->device_overhead_bytes = MP_CLUSTER_DEFAULT_DEVICE_OVERHEAD_BYTES;
  c->device_overhead_given = mp_yaml_lookup (root, "device_overhead") != NULL;
  mp_yaml_get_quantity (&l->r, root, "device_overhead", MP_UNIT_BYTES, FALSE, TRUE,
                        &c->device_overhead_bytes);
  const char *profile = NULL;
  if (mp_yaml_get_string (&l->r, root, "profile", FALSE, &profile))
    c->profile = g_strdup (profile);
  finish_cluster (l, root, links);
}

/* Reads DOC into a new cluster (caller owns), or NULL with every problem in ERROR. */
static MpCluster *
cluster_from_doc (const MpYamlDoc *doc, guint override_nodes, guint override_devices,
                  GError **error)
{
  g_autoptr(MpCluster) c = g_new0 (MpCluster, 1);
  c->source = g_strdup (doc->path);
  Loader l = { .c = c, .override_nodes = override_nodes, .override_devices = override_devices };
  mp_yaml_reader_init (&l.r, doc);
  read_cluster (&l);
  gboolean ok = mp_yaml_reader_finish (&l.r, error);
  mp_yaml_reader_clear (&l.r);
  return ok ? g_steal_pointer (&c) : NULL;
}

MpCluster *
mp_cluster_load_data (const char *name, const char *data, gsize len, GError **error)
{
  g_return_val_if_fail (name != NULL, NULL);
  g_autoptr(MpYamlDoc) doc = mp_yaml_load_data (name, data, len, error);
  return doc ? cluster_from_doc (doc, 0, 0, error) : NULL;
}

static MpCluster *
load_path (const char *path, guint override_nodes, guint override_devices, GError **error)
{
  g_autoptr(MpYamlDoc) doc = mp_yaml_load (path, error);
  return doc ? cluster_from_doc (doc, override_nodes, override_devices, error) : NULL;
}

MpCluster *
mp_cluster_load_file (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  return load_path (path, 0, 0, error);
}

/* Splits "BASE:N" into BASE (caller owns) and N nodes, or "BASE:Ng" into N devices; no
 * suffix leaves both 0. */
static char *
split_suffix (const char *arg, guint *nodes, guint *devices, GError **error)
{
  *nodes = *devices = 0;
  const char *colon = strrchr (arg, ':');
  if (colon == NULL)
    return g_strdup (arg);
  const char *s = colon + 1;
  gsize len = strlen (s);
  gboolean by_devices = len > 1 && s[len - 1] == 'g';
  len -= by_devices ? 1 : 0;
  guint64 n = 0, max = by_devices ? G_MAXUINT : MP_CLUSTER_MAX_NODES;
  gboolean digits = len > 0 && len <= 10;
  for (gsize i = 0; digits && i < len; i++)
    digits = g_ascii_isdigit (s[i]);
  if (digits)
    n = g_ascii_strtoull (s, NULL, 10);
  if (!digits || n < 1 || n > max)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "'%s': the part after ':' must be a "
                   "node count from 1 to %u (e.g. dgx-a100-80g:16), a domain count on a "
                   "cluster with domains (gb200-nvl72:4), or a device count with 'g' "
                   "(gb200-nvl72:256g)", arg, MP_CLUSTER_MAX_NODES);
      return NULL;
    }
  *(by_devices ? devices : nodes) = (guint) n;
  return g_strndup (arg, colon - arg);
}

/* A word with a slash or a YAML extension is meant as a file, never as a zoo name. */
static gboolean
looks_like_path (const char *s)
{
  return strchr (s, '/') != NULL || g_str_has_suffix (s, ".yaml") || g_str_has_suffix (s, ".yml");
}

/* Is S a file to load: a regular file, or anything that exists and looks like a path (so a
 * directory given as a path is refused as one, not looked up in the zoo)? */
static gboolean
is_file_arg (const char *s)
{
  return g_file_test (s, G_FILE_TEST_IS_REGULAR)
         || (looks_like_path (s) && g_file_test (s, G_FILE_TEST_EXISTS));
}

static void
set_not_found (const char *base, GError **error)
{
  if (looks_like_path (base))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_IO, "%s: no such cluster file", base);
      return;
    }
  g_auto(GStrv) zoo = mp_cluster_zoo_list ();
  g_autofree char *list = g_strjoinv (", ", zoo);
  const char *hint = mp_yaml_suggest (base, (const char *const *) zoo);
  g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "unknown cluster '%s'%s%s%s (not a file; "
               "bundled clusters: %s)", base, hint ? " (did you mean '" : "", hint ? hint : "",
               hint ? "'?)" : "", *list ? list : "none found");
}

MpCluster *
mp_cluster_load (const char *name_or_path, GError **error)
{
  g_return_val_if_fail (name_or_path != NULL, NULL);
  if (is_file_arg (name_or_path))
    return load_path (name_or_path, 0, 0, error);
  guint nodes = 0, devices = 0;
  g_autofree char *base = split_suffix (name_or_path, &nodes, &devices, error);
  if (base == NULL)
    return NULL;
  if (is_file_arg (base))
    return load_path (base, nodes, devices, error);
  g_autofree char *path = mp_zoo_find ("clusters", base);
  if (path == NULL)
    {
      set_not_found (base, error);
      return NULL;
    }
  return load_path (path, nodes, devices, error);
}

gboolean
mp_cluster_yaml_is_cluster (const MpYamlNode *root)
{
  static const char *const marks[] = { "devices_per_node", "groups", "links", "device", NULL };
  if (root == NULL || root->kind != MP_YAML_MAP)
    return FALSE;
  for (const char *const *k = marks; *k; k++)
    if (mp_yaml_lookup (root, *k) != NULL)
      return TRUE;
  return FALSE;
}
