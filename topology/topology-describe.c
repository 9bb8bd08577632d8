/* topology-describe.c - a loaded cluster as text for people and as JSON for programs.
 *
 * Text prints human units (mp_units_format); JSON carries SI base units (bytes, bytes/s,
 * seconds, FLOP/s) under keys that say so. Neither reads files or decides anything. */
#define G_LOG_DOMAIN "mpplan-topology"
#include "topology/topology.h"

#include <string.h>

/* ---- text -------------------------------------------------------------------------- */

#define VALUE_COLUMN 26   /* values line up here whatever the indent */

static void
append_row (GString *out, const char *indent, const char *label, const char *value)
{
  int width = MAX (1, VALUE_COLUMN - 1 - (int) strlen (indent));
  g_string_append_printf (out, "%s%-*s %s\n", indent, width, label, value);
}

static void
append_quantity (GString *out, const char *indent, const char *label, double value,
                 MpUnitKind kind)
{
  g_autofree char *v = mp_units_format (value, kind);
  append_row (out, indent, label, v);
}

static const char *
plural (guint n)
{
  return n == 1 ? "" : "s";
}

/* PROFILED: the cluster names a calibration profile (the `profile` row). */
/* The file's device_overhead, or -1 when the memory model reserves the runtime itself. */
static double
stated_overhead (const MpCluster *c)
{
  return c->device_overhead_given ? c->device_overhead_bytes : -1;
}

static void
append_device (GString *out, const MpDevice *d, double overhead_bytes, const char *indent,
               gboolean profiled)
{
  g_autofree char *name = g_strdup_printf ("%s%s", d->name,
                                           !d->calibrated ? "  (uncalibrated placeholder numbers)"
                                           : profiled ? "  (calibrated: see profile)" : "");
  append_row (out, indent, "device", name);
  g_autofree char *sub = g_strconcat (indent, "  ", NULL);
  g_autofree char *mem = mp_units_format (d->memory_bytes, MP_UNIT_BYTES);
  g_autofree char *res = mp_units_format (overhead_bytes, MP_UNIT_BYTES);
  g_autofree char *memory
      = overhead_bytes >= 0
            ? g_strdup_printf ("%s (%s reserved for runtime and fragmentation)", mem, res)
            : g_strdup_printf ("%s (runtime reserve modelled per plan)", mem);
  append_row (out, sub, "memory", memory);
  append_quantity (out, sub, "memory bandwidth", d->mem_bw_Bps, MP_UNIT_BPS);
  for (int t = 0; t < MP_DTYPE_N; t++)
    if (d->peak_flops[t] > 0)
      {
        g_autofree char *label = g_strdup_printf ("peak %s", mp_dtype_name ((MpDtype) t));
        append_quantity (out, sub, label, d->peak_flops[t], MP_UNIT_FLOPS);
      }
  if (d->power_limit_w > 0)
    {
      g_autofree char *limit = g_strdup_printf ("%g W", d->power_limit_w);
      append_row (out, sub, "power limit", limit);
    }
}

static void
append_link (GString *out, const MpCluster *c, MpTier tier)
{
  const MpLink *l = &c->links[tier];
  g_autofree char *bw = mp_units_format (l->bw_Bps, MP_UNIT_BPS);
  g_autofree char *lat = mp_units_format (l->latency_s, MP_UNIT_SECONDS);
  g_string_append_printf (out, "    %-8s %-20s %s per %s per direction", mp_tier_name (tier),
                          l->name, bw, tier == MP_TIER_CLUSTER ? "NIC" : "device");
  if (tier == MP_TIER_CLUSTER)
    {
      /* What one rank gets when all its node's devices send at once. */
      MpGroupSpan span;
      mp_cluster_span (c, NULL, NULL, 0, &span);
      g_autofree char *share = mp_units_format (span.bw_Bps[MP_TIER_CLUSTER], MP_UNIT_BPS);
      g_string_append_printf (out, ", %u NICs per node (%s per device when all send)",
                              l->nics_per_node, share);
    }
  g_string_append_printf (out, ", latency %s\n", lat);
}

/* The NVLink domains, when the cluster has a domain tier. */
static void
append_domains (GString *out, const MpCluster *c)
{
  if (c->nodes_per_domain < 2)
    return;
  guint last = c->nodes - (c->domains - 1) * c->nodes_per_domain;
  g_autoptr(GString) text = g_string_new (NULL);
  g_string_printf (text, "%u domain%s of %u nodes", c->domains, plural (c->domains),
                   c->nodes_per_domain);
  if (c->n_groups == 1)
    g_string_append_printf (text, " (%u devices)",
                            c->nodes_per_domain * c->groups[0].devices_per_node);
  if (last < c->nodes_per_domain)
    g_string_append_printf (text, ", the last of %u", last);
  append_row (out, "  ", "domains", text->str);
}

static void
append_groups (GString *out, const MpCluster *c)
{
  for (guint i = 0; i < c->n_groups; i++)
    {
      const MpNodeGroup *g = &c->groups[i];
      g_string_append_printf (out, "  group %s: nodes %u-%u, %u x %u devices (devices %u-%u)\n",
                              g->name, g->first_node, g->first_node + g->nodes - 1, g->nodes,
                              g->devices_per_node, g->first_device,
                              g->first_device + g->nodes * g->devices_per_node - 1);
      append_device (out, &g->device, stated_overhead (c), "    ", c->profile != NULL);
    }
}

char *
mp_cluster_describe_text (const MpCluster *cluster)
{
  g_return_val_if_fail (cluster != NULL && cluster->n_groups > 0, NULL);
  const MpCluster *c = cluster;
  GString *out = g_string_new (NULL);
  g_string_append_printf (out, "cluster %s (%s)\n", c->name, c->source ? c->source : "-");
  if (c->n_groups == 1)
    {
      const MpNodeGroup *g = &c->groups[0];
      g_autofree char *shape = g_strdup_printf ("%u node%s x %u device%s = %u device%s",
                                                g->nodes, plural (g->nodes),
                                                g->devices_per_node, plural (g->devices_per_node),
                                                c->world_size, plural (c->world_size));
      append_row (out, "  ", "nodes", shape);
      append_domains (out, c);
      append_device (out, &g->device, stated_overhead (c), "  ", c->profile != NULL);
    }
  else
    {
      g_autofree char *shape = g_strdup_printf ("%u in %u groups, %u devices%s", c->nodes,
                                                c->n_groups, c->world_size,
                                                c->heterogeneous ? " (heterogeneous)" : "");
      append_row (out, "  ", "nodes", shape);
      append_domains (out, c);
      append_groups (out, c);
    }
  g_string_append (out, "  links\n");
  for (int t = 0; t < MP_TIER_N; t++)
    if (c->has_link[t])
      append_link (out, c, (MpTier) t);
  if (!c->has_link[MP_TIER_NODE] && !c->has_link[MP_TIER_DOMAIN]
      && !c->has_link[MP_TIER_CLUSTER])
    g_string_append (out, "    (none: a single device)\n");
  if (c->profile)
    append_row (out, "  ", "profile", c->profile);
  return g_string_free (out, FALSE);
}

/* ---- JSON -------------------------------------------------------------------------- */

static void
build_device (JsonBuilder *b, const MpDevice *d)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, d->name);
  json_builder_set_member_name (b, "memory_bytes");
  json_builder_add_double_value (b, d->memory_bytes);
  json_builder_set_member_name (b, "memory_bandwidth_Bps");
  json_builder_add_double_value (b, d->mem_bw_Bps);
  json_builder_set_member_name (b, "peak_flops");
  json_builder_begin_object (b);
  for (int t = 0; t < MP_DTYPE_N; t++)
    if (d->peak_flops[t] > 0)   /* unsupported dtypes are left out */
      {
        json_builder_set_member_name (b, mp_dtype_name ((MpDtype) t));
        json_builder_add_double_value (b, d->peak_flops[t]);
      }
  json_builder_end_object (b);
  if (d->power_limit_w > 0)
    {
      json_builder_set_member_name (b, "power_limit_w");
      json_builder_add_double_value (b, d->power_limit_w);
    }
  json_builder_set_member_name (b, "calibrated");
  json_builder_add_boolean_value (b, d->calibrated);
  json_builder_end_object (b);
}

static void
build_link (JsonBuilder *b, const MpLink *l, MpTier tier)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "tier");
  json_builder_add_string_value (b, mp_tier_name (tier));
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, l->name);
  json_builder_set_member_name (b, "bandwidth_Bps");
  json_builder_add_double_value (b, l->bw_Bps);
  json_builder_set_member_name (b, "latency_s");
  json_builder_add_double_value (b, l->latency_s);
  if (tier == MP_TIER_CLUSTER)
    {
      json_builder_set_member_name (b, "nics_per_node");
      json_builder_add_int_value (b, l->nics_per_node);
    }
  json_builder_end_object (b);
}

static void
build_group (JsonBuilder *b, const MpNodeGroup *g)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, g->name);
  json_builder_set_member_name (b, "nodes");
  json_builder_add_int_value (b, g->nodes);
  json_builder_set_member_name (b, "devices_per_node");
  json_builder_add_int_value (b, g->devices_per_node);
  json_builder_set_member_name (b, "first_node");
  json_builder_add_int_value (b, g->first_node);
  json_builder_set_member_name (b, "first_device");
  json_builder_add_int_value (b, g->first_device);
  json_builder_set_member_name (b, "device");
  build_device (b, &g->device);
  json_builder_end_object (b);
}

static void
add_string_or_null (JsonBuilder *b, const char *key, const char *value)
{
  json_builder_set_member_name (b, key);
  if (value)
    json_builder_add_string_value (b, value);
  else
    json_builder_add_null_value (b);
}

JsonNode *
mp_cluster_describe_json (const MpCluster *cluster)
{
  g_return_val_if_fail (cluster != NULL && cluster->n_groups > 0, NULL);
  const MpCluster *c = cluster;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "schema_version");
  json_builder_add_int_value (b, 1);
  add_string_or_null (b, "name", c->name);
  add_string_or_null (b, "source", c->source);
  json_builder_set_member_name (b, "nodes");
  json_builder_add_int_value (b, c->nodes);
  json_builder_set_member_name (b, "devices_per_node");
  json_builder_add_int_value (b, c->groups[0].devices_per_node);
  json_builder_set_member_name (b, "world_size");
  json_builder_add_int_value (b, c->world_size);
  json_builder_set_member_name (b, "nodes_per_domain");
  json_builder_add_int_value (b, c->nodes_per_domain);
  json_builder_set_member_name (b, "domains");
  json_builder_add_int_value (b, c->domains);
  json_builder_set_member_name (b, "heterogeneous");
  json_builder_add_boolean_value (b, c->heterogeneous);
  json_builder_set_member_name (b, "device_overhead_bytes");
  json_builder_add_double_value (b, c->device_overhead_bytes);
  add_string_or_null (b, "profile", c->profile);
  json_builder_set_member_name (b, "device");
  build_device (b, &c->groups[0].device);
  json_builder_set_member_name (b, "links");
  json_builder_begin_array (b);
  for (int t = 0; t < MP_TIER_N; t++)
    if (c->has_link[t])
      build_link (b, &c->links[t], (MpTier) t);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "groups");
  json_builder_begin_array (b);
  for (guint i = 0; i < c->n_groups; i++)
    build_group (b, &c->groups[i]);
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
