/* profile-yaml.c - calibration profiles as YAML files (docs/profile-file.md).
 *
 * The reader goes through common/yamldoc.h, so every problem is reported at its
 * FILE:LINE:COLUMN and a file is refused whole. The writer prints every number in the
 * shortest form that reads back to the same double, so load (to_yaml (p)) equals p.
 * Not here: measuring (exec/calibrate*.c), interpolating (profile.c), which profile
 * applies to a cluster (profile-apply.c).
 * Units: FLOP/s, bytes, bytes/s; files may use human units ("12 GFLOPS", "4 MiB"). */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/profile-private.h"
#include "common/error.h"
#include "common/yamldoc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROFILE_VERSION 1

static const char *const top_keys[] = {
  "kind", "version", "machine", "device", "memory_bandwidth", "gemm_cold_weight_bandwidth",
  "gemm", "attention",
  "elementwise", "optimizer", "collectives", "spread", NULL
};
/* Indexed by MpSpreadKind (mp_spread_kind_name), each {repeats, rel_iqr}. */
static const char *const spread_names[] = { "gemm", "kernels", "memory", NULL };
static const char *const spread_keys[] = { "repeats", "rel_iqr", NULL };
static const char *const attention_keys[] = { "seq", "fwd_flops_per_s", "bwd_flops_per_s",
                                              NULL };
/* Indexed by MpOptimizer. */
static const char *const optimizer_keys[] = { "adam_params_per_s", "sgd_params_per_s", NULL };
static const char *const ew_rate_keys[] = { "fwd_bytes_per_s", "bwd_bytes_per_s", NULL };
/* Indexed by MpEwClass. */
static const char *const ew_names[] = { "norm", "activation", "loss", "gated_activation",
                                         NULL };
static const char *const machine_keys[] = { "hostname", "cpu", "cores", "date", "mpplan", NULL };
static const char *const gemm_keys[] = { "m", "n", "k", "flops_per_s", NULL };
static const char *const coll_keys[] = { "kind", "tier", "ranks", "sizes", "busbw", NULL };
/* Same order as MpTier; a profile from before the domain tier has only node and cluster. */
static const char *const tier_names[] = { "node", "domain", "cluster", NULL };
G_STATIC_ASSERT (G_N_ELEMENTS (tier_names) == MP_TIER_N + 1);
static const char *const coll_names[] = {
  "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv", NULL
};
static const char *const dtype_names[] = { "fp32", "tf32", "bf16", "fp16", "fp8", NULL };

gboolean
mp_cost_profile_yaml_is_profile (const MpYamlNode *root)
{
  const MpYamlNode *kind = mp_yaml_lookup (root, "kind");
  return kind != NULL && kind->kind == MP_YAML_SCALAR && strcmp (kind->value, "profile") == 0;
}

/* ---- reading ------------------------------------------------------------------------ */

/* Reads sequence NODE of quantities of KIND into a new array (caller owns) of *LEN values,
 * recording a problem for anything else; NULL after a problem. WHAT names it. */
static double *
read_numbers (MpYamlReader *r, const MpYamlNode *node, MpUnitKind kind, const char *what,
              guint *len)
{
  if (node == NULL || node->kind != MP_YAML_SEQ || node->items->len == 0)
    {
      mp_yaml_problem (r, node, "'%s' must be a non-empty list of numbers", what);
      return NULL;
    }
  g_autofree double *v = g_new (double, node->items->len);
  gboolean ok = TRUE;
  for (guint i = 0; i < node->items->len; i++)
    ok &= mp_yaml_scalar_quantity (r, g_ptr_array_index (node->items, i), kind, FALSE, &v[i]);
  *len = node->items->len;
  return ok ? g_steal_pointer (&v) : NULL;
}

/* Records a problem at NODE unless V[N] is strictly increasing. */
static gboolean
check_increasing (MpYamlReader *r, const MpYamlNode *node, const char *what, const double *v,
                  guint n)
{
  for (guint i = 1; i < n; i++)
    if (!(v[i] > v[i - 1]))
      {
        mp_yaml_problem (r, g_ptr_array_index (node->items, i),
                         "'%s' must be strictly increasing (%g follows %g)", what, v[i],
                         v[i - 1]);
        return FALSE;
      }
  return TRUE;
}

/* Records a problem unless NODE is a sequence of N entries (one per value of AXIS). */
static gboolean
expect_seq (MpYamlReader *r, const MpYamlNode *node, guint n, const char *axis)
{
  if (node->kind == MP_YAML_SEQ && node->items->len == n)
    return TRUE;
  mp_yaml_problem (r, node, "'flops_per_s' must be nested lists [m][n][k]: %u entries (one "
                   "per '%s' value) expected here", n, axis);
  return FALSE;
}

/* Reads the [m][n][k] nested lists of rates into FLOPS (LEN[0] * LEN[1] * LEN[2]). */
static gboolean
read_rates (MpYamlReader *r, const MpYamlNode *node, const guint len[3], double *flops)
{
  if (!expect_seq (r, node, len[0], "m"))
    return FALSE;
  gboolean ok = TRUE;
  for (guint i = 0; i < len[0]; i++)
    {
      const MpYamlNode *plane = g_ptr_array_index (node->items, i);
      if (!expect_seq (r, plane, len[1], "n"))
        return FALSE;
      for (guint j = 0; j < len[1]; j++)
        {
          const MpYamlNode *row = g_ptr_array_index (plane->items, j);
          if (!expect_seq (r, row, len[2], "k"))
            return FALSE;
          double *out = flops + ((gsize) i * len[1] + j) * len[2];
          for (guint l = 0; l < len[2]; l++)
            ok &= mp_yaml_scalar_quantity (r, g_ptr_array_index (row->items, l), MP_UNIT_FLOPS,
                                           FALSE, &out[l]);
        }
    }
  return ok;
}

/* One dtype's table: {m, n, k, flops_per_s}. */
static void
read_gemm_table (MpYamlReader *r, MpCostProfile *p, MpDtype dtype, const MpYamlNode *map)
{
  if (!mp_yaml_expect_map (r, map, "a GEMM table {m, n, k, flops_per_s}"))
    return;
  mp_yaml_check_keys (r, map, gemm_keys);
  g_autofree double *axis0 = NULL, *axis1 = NULL, *axis2 = NULL;
  double **axes[3] = { &axis0, &axis1, &axis2 };
  guint len[3] = { 0, 0, 0 };
  gboolean ok = TRUE;
  for (int a = 0; a < 3; a++)
    {
      const MpYamlNode *v = mp_yaml_lookup (map, gemm_keys[a]);
      if (v == NULL)
        {
          mp_yaml_problem (r, map, "missing required key '%s'", gemm_keys[a]);
          ok = FALSE;
          continue;
        }
      *axes[a] = read_numbers (r, v, MP_UNIT_COUNT, gemm_keys[a], &len[a]);
      ok &= *axes[a] != NULL && check_increasing (r, v, gemm_keys[a], *axes[a], len[a]);
    }
  const MpYamlNode *rates = mp_yaml_lookup (map, "flops_per_s");
  if (rates == NULL)
    mp_yaml_problem (r, map, "missing required key 'flops_per_s'");
  if (!ok || rates == NULL)
    return;
  g_autofree double *flops = g_new (double, (gsize) len[0] * len[1] * len[2]);
  if (!read_rates (r, rates, len, flops))
    return;
  g_autoptr(GError) error = NULL;
  if (!mp_cost_profile_set_gemm (p, dtype, axis0, len[0], axis1, len[1], axis2, len[2], flops,
                                 &error))
    mp_yaml_problem (r, map, "%s", error->message);
}

static void
read_gemm (MpYamlReader *r, MpCostProfile *p, const MpYamlNode *map)
{
  if (!mp_yaml_expect_map (r, map, "'gemm' (a table per dtype)"))
    return;
  for (guint i = 0; i < map->keys->len; i++)
    {
      const MpYamlNode *key = g_ptr_array_index (map->keys, i);
      MpDtype dtype;
      if (!mp_dtype_from_name (key->value, &dtype))
        {
          const char *hint = mp_yaml_suggest (key->value, dtype_names);
          mp_yaml_problem (r, key, "unknown dtype '%s'%s%s%s", key->value,
                           hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
          continue;
        }
      read_gemm_table (r, p, dtype, g_ptr_array_index (map->items, i));
    }
}

/* One collective table; SEEN[kind][tier] holds the item that set it first. */
static void
read_coll (MpYamlReader *r, MpCostProfile *p, const MpYamlNode *item,
           const MpYamlNode *seen[MP_COLL_N][MP_TIER_N])
{
  if (!mp_yaml_expect_map (r, item, "a collective table {kind, tier, ranks, sizes, busbw}"))
    return;
  mp_yaml_check_keys (r, item, coll_keys);
  int kind = 0, tier = 0;
  guint64 ranks = 0;
  gboolean ok = mp_yaml_get_enum (r, item, "kind", TRUE, coll_names, &kind);
  ok &= mp_yaml_get_enum (r, item, "tier", TRUE, tier_names, &tier);
  ok &= mp_yaml_get_uint (r, item, "ranks", TRUE, 2, G_MAXUINT32, &ranks);
  const MpYamlNode *sizes_node = mp_yaml_lookup (item, "sizes");
  const MpYamlNode *busbw_node = mp_yaml_lookup (item, "busbw");
  if (sizes_node == NULL || busbw_node == NULL)
    {
      mp_yaml_problem (r, item, "missing required key '%s'", sizes_node ? "busbw" : "sizes");
      return;
    }
  guint ns = 0, nb = 0;
  g_autofree double *sizes = read_numbers (r, sizes_node, MP_UNIT_BYTES, "sizes", &ns);
  g_autofree double *busbw = read_numbers (r, busbw_node, MP_UNIT_BPS, "busbw", &nb);
  if (!ok || sizes == NULL || busbw == NULL
      || !check_increasing (r, sizes_node, "sizes", sizes, ns))
    return;
  if (ns != nb)
    {
      mp_yaml_problem (r, busbw_node, "'busbw' has %u values but 'sizes' has %u", nb, ns);
      return;
    }
  if (seen[kind][tier] != NULL)
    {
      mp_yaml_problem (r, item, "a second %s table for tier %s (first at line %u)",
                       coll_names[kind], tier_names[tier], seen[kind][tier]->line);
      return;
    }
  seen[kind][tier] = item;
  g_autoptr(GError) error = NULL;
  if (!mp_cost_profile_set_coll (p, (MpCollKind) kind, (MpTier) tier, (guint) ranks, sizes,
                                 busbw, ns, &error))
    mp_yaml_problem (r, item, "%s", error->message);
}

/* attention: {seq: [keys...], fwd_flops_per_s: [...], bwd_flops_per_s: [...]}, or without
 * seq one rate each for every key length (the form profiles had before the table). */
static void
read_attention (MpYamlReader *r, MpCostProfile *p, const MpYamlNode *map)
{
  if (!mp_yaml_expect_map (r, map, "'attention' {seq, fwd_flops_per_s, bwd_flops_per_s}"))
    return;
  mp_yaml_check_keys (r, map, attention_keys);
  const MpYamlNode *seq_node = mp_yaml_lookup (map, "seq");
  g_autofree double *seq = NULL, *fwd = NULL, *bwd = NULL;
  guint n = 1, nf = 0, nb = 0;
  if (seq_node == NULL)
    {
      fwd = g_new0 (double, 1), bwd = g_new0 (double, 1);
      if (!mp_yaml_get_quantity (r, map, "fwd_flops_per_s", MP_UNIT_FLOPS, TRUE, FALSE, fwd)
          || !mp_yaml_get_quantity (r, map, "bwd_flops_per_s", MP_UNIT_FLOPS, TRUE, FALSE, bwd))
        return;
    }
  else
    {
      const MpYamlNode *f = mp_yaml_lookup (map, "fwd_flops_per_s");
      const MpYamlNode *b = mp_yaml_lookup (map, "bwd_flops_per_s");
      if (f == NULL || b == NULL)
        {
          mp_yaml_problem (r, map, "missing required key '%s'",
                           f ? "bwd_flops_per_s" : "fwd_flops_per_s");
          return;
        }
      seq = read_numbers (r, seq_node, MP_UNIT_COUNT, "seq", &n);
      fwd = read_numbers (r, f, MP_UNIT_FLOPS, "fwd_flops_per_s", &nf);
      bwd = read_numbers (r, b, MP_UNIT_FLOPS, "bwd_flops_per_s", &nb);
      if (seq == NULL || fwd == NULL || bwd == NULL
          || !check_increasing (r, seq_node, "seq", seq, n))
        return;
      if (nf != n || nb != n)
        {
          mp_yaml_problem (r, nf != n ? f : b, "'%s' has %u values but 'seq' has %u",
                           nf != n ? "fwd_flops_per_s" : "bwd_flops_per_s", nf != n ? nf : nb,
                           n);
          return;
        }
    }
  g_autoptr(GError) error = NULL;
  if (!mp_cost_profile_set_attention (p, seq, n, fwd, bwd, &error))
    mp_yaml_problem (r, map, "%s", error->message);
}

/* optimizer: {adam_params_per_s, sgd_params_per_s}, either or both. */
static void
read_optimizer (MpYamlReader *r, MpCostProfile *p, const MpYamlNode *map)
{
  if (!mp_yaml_expect_map (r, map, "'optimizer' {adam_params_per_s, sgd_params_per_s}"))
    return;
  mp_yaml_check_keys (r, map, optimizer_keys);
  double rate[2] = { 0, 0 };  /* an absent key leaves its 0 (not measured); a bad one
                               * is recorded and fails the file */
  for (int o = 0; o < 2; o++)
    mp_yaml_get_quantity (r, map, optimizer_keys[o], MP_UNIT_COUNT, FALSE, FALSE, &rate[o]);
  mp_cost_profile_set_optimizer (p, rate[MP_OPTIM_ADAM], rate[MP_OPTIM_SGD]);
}

/* elementwise: {norm|activation|loss|gated_activation: {fwd_bytes_per_s, bwd_bytes_per_s}},
 * any subset. */
static void
read_elementwise (MpYamlReader *r, MpCostProfile *p, const MpYamlNode *map)
{
  if (!mp_yaml_expect_map (r, map, "'elementwise' {norm, activation, loss, gated_activation}"))
    return;
  mp_yaml_check_keys (r, map, ew_names);
  for (int k = 0; k < MP_EW_N; k++)
    {
      const MpYamlNode *v = mp_yaml_lookup (map, ew_names[k]);
      if (v == NULL || !mp_yaml_expect_map (r, v, "{fwd_bytes_per_s, bwd_bytes_per_s}"))
        continue;
      mp_yaml_check_keys (r, v, ew_rate_keys);
      double fwd = 0, bwd = 0;
      if (mp_yaml_get_quantity (r, v, "fwd_bytes_per_s", MP_UNIT_BPS, TRUE, FALSE, &fwd)
          && mp_yaml_get_quantity (r, v, "bwd_bytes_per_s", MP_UNIT_BPS, TRUE, FALSE, &bwd))
        mp_cost_profile_set_elementwise (p, (MpEwClass) k, fwd, bwd);
    }
}

/* spread: {gemm|kernels|memory: {repeats, rel_iqr}}, any subset. */
static void
read_spread (MpYamlReader *r, MpCostProfile *p, const MpYamlNode *map)
{
  if (!mp_yaml_expect_map (r, map, "'spread' {gemm, kernels, memory}"))
    return;
  mp_yaml_check_keys (r, map, spread_names);
  for (int k = 0; k < MP_SPREAD_N; k++)
    {
      const MpYamlNode *v = mp_yaml_lookup (map, spread_names[k]);
      if (v == NULL || !mp_yaml_expect_map (r, v, "{repeats, rel_iqr}"))
        continue;
      mp_yaml_check_keys (r, v, spread_keys);
      guint64 repeats = 0;
      double iqr = 0;
      if (mp_yaml_get_uint (r, v, "repeats", TRUE, 1, 1000000, &repeats)
          && mp_yaml_get_quantity (r, v, "rel_iqr", MP_UNIT_COUNT, TRUE, TRUE, &iqr))
        mp_cost_profile_set_spread (p, (MpSpreadKind) k, (guint) repeats, iqr);
    }
}

static void
read_machine (MpYamlReader *r, MpCostProfile *p, const MpYamlNode *map)
{
  if (!mp_yaml_expect_map (r, map, "'machine' {hostname, cpu, cores, date, mpplan}"))
    return;
  mp_yaml_check_keys (r, map, machine_keys);
  const char *host = NULL, *cpu = NULL, *date = NULL, *version = NULL;
  guint64 cores = 0;
  mp_yaml_get_string (r, map, "hostname", FALSE, &host);
  mp_yaml_get_string (r, map, "cpu", FALSE, &cpu);
  mp_yaml_get_uint (r, map, "cores", FALSE, 1, G_MAXUINT32, &cores);
  mp_yaml_get_string (r, map, "date", FALSE, &date);
  mp_yaml_get_string (r, map, "mpplan", FALSE, &version);
  MpProfileMachine m = { (char *) host, (char *) cpu, (guint) cores, (char *) date,
                         (char *) version };
  mp_cost_profile_set_machine (p, &m);
}

/* Checks `kind` and `version`; FALSE when the rest should not be read. */
static gboolean
read_header (MpYamlReader *r, const MpYamlNode *root)
{
  const MpYamlNode *kind = mp_yaml_lookup (root, "kind");
  if (kind == NULL)
    {
      mp_yaml_problem (r, root, "missing required key 'kind' (kind: profile)");
      return FALSE;
    }
  if (kind->kind != MP_YAML_SCALAR || strcmp (kind->value, "profile") != 0)
    {
      mp_yaml_problem (r, kind, "'kind' must be 'profile'");
      return FALSE;
    }
  guint64 version = 0;
  if (!mp_yaml_get_uint (r, root, "version", TRUE, 0, G_MAXUINT32, &version))
    return FALSE;
  if (version != PROFILE_VERSION)
    {
      mp_yaml_problem (r, mp_yaml_lookup (root, "version"),
                       "profile version %" G_GUINT64_FORMAT " is not supported by this mpplan "
                       "(it reads version %d); run `mpplan calibrate` again", version,
                       PROFILE_VERSION);
      return FALSE;
    }
  return TRUE;
}

static MpCostProfile *
profile_from_doc (const MpYamlDoc *doc, GError **error)
{
  MpYamlReader r;
  mp_yaml_reader_init (&r, doc);
  const MpYamlNode *root = doc->root;
  g_autoptr(MpCostProfile) p = NULL;
  if (mp_yaml_expect_map (&r, root, "a profile") && read_header (&r, root))
    {
      mp_yaml_check_keys (&r, root, top_keys);
      const char *device = NULL;
      mp_yaml_get_string (&r, root, "device", FALSE, &device);
      p = mp_cost_profile_new (device);
      const MpYamlNode *v;
      if ((v = mp_yaml_lookup (root, "machine")) != NULL)
        read_machine (&r, p, v);
      double bw = 0;
      if (mp_yaml_get_quantity (&r, root, "memory_bandwidth", MP_UNIT_BPS, FALSE, FALSE, &bw))
        mp_cost_profile_set_mem_bw (p, bw);
      double cold = 0;
      if (mp_yaml_get_quantity (&r, root, "gemm_cold_weight_bandwidth", MP_UNIT_BPS, FALSE,
                                FALSE, &cold))
        mp_cost_profile_set_cold_weight_bw (p, cold);
      if ((v = mp_yaml_lookup (root, "gemm")) != NULL)
        read_gemm (&r, p, v);
      if ((v = mp_yaml_lookup (root, "attention")) != NULL)
        read_attention (&r, p, v);
      if ((v = mp_yaml_lookup (root, "elementwise")) != NULL)
        read_elementwise (&r, p, v);
      if ((v = mp_yaml_lookup (root, "optimizer")) != NULL)
        read_optimizer (&r, p, v);
      if ((v = mp_yaml_lookup (root, "spread")) != NULL)
        read_spread (&r, p, v);
      const MpYamlNode *seen[MP_COLL_N][MP_TIER_N] = { { NULL } };
      if ((v = mp_yaml_lookup (root, "collectives")) != NULL)
        {
          if (v->kind != MP_YAML_SEQ)
            mp_yaml_problem (&r, v, "'collectives' must be a list of tables");
          else
            for (guint i = 0; i < v->items->len; i++)
              read_coll (&r, p, g_ptr_array_index (v->items, i), seen);
        }
    }
  gboolean ok = mp_yaml_reader_finish (&r, error);
  mp_yaml_reader_clear (&r);
  return ok ? g_steal_pointer (&p) : NULL;
}

MpCostProfile *
mp_cost_profile_load (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_autoptr(MpYamlDoc) doc = mp_yaml_load (path, error);
  return doc ? profile_from_doc (doc, error) : NULL;
}

MpCostProfile *
mp_cost_profile_load_data (const char *name, const char *data, gsize len, GError **error)
{
  g_autoptr(MpYamlDoc) doc = mp_yaml_load_data (name, data, len, error);
  return doc ? profile_from_doc (doc, error) : NULL;
}

/* ---- writing ------------------------------------------------------------------------ */

/* Appends V in the shortest "%.Ng" that reads back as exactly V (measured values are
 * rounded when measured, so they print short; 17 digits always suffice). */
static void
append_number (GString *out, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  for (int digits = 1; digits <= 17; digits++)
    {
      char format[8];
      g_snprintf (format, sizeof format, "%%.%dg", digits);
      g_ascii_formatd (buf, sizeof buf, format, v);
      if (g_ascii_strtod (buf, NULL) == v)
        break;
    }
  g_string_append (out, buf);
}

static void
append_list (GString *out, const double *v, guint n)
{
  g_string_append_c (out, '[');
  for (guint i = 0; i < n; i++)
    {
      if (i > 0)
        g_string_append (out, ", ");
      append_number (out, v[i]);
    }
  g_string_append_c (out, ']');
}

/* A string as a double-quoted YAML scalar (cpu names carry '(R)', ':' and such). */
static void
append_quoted (GString *out, const char *s)
{
  g_string_append_c (out, '"');
  for (const char *c = s; *c; c++)
    {
      if (*c == '"' || *c == '\\')
        g_string_append_c (out, '\\');
      if ((guchar) *c < 0x20)
        g_string_append_printf (out, "\\x%02x", (guchar) *c);
      else
        g_string_append_c (out, *c);
    }
  g_string_append_c (out, '"');
}

static void
append_machine (GString *out, const MpProfileMachine *m)
{
  if (!m->hostname && !m->cpu && !m->cores && !m->date && !m->version)
    return;
  g_string_append (out, "machine:\n");
  const char *keys[] = { "hostname", "cpu", "date", "mpplan" };
  const char *vals[] = { m->hostname, m->cpu, m->date, m->version };
  for (int i = 0; i < 4; i++)
    {
      if (i == 2 && m->cores)
        g_string_append_printf (out, "  cores: %u\n", m->cores);
      if (vals[i] == NULL)
        continue;
      g_string_append_printf (out, "  %s: ", keys[i]);
      append_quoted (out, vals[i]);
      g_string_append_c (out, '\n');
    }
}

static void
append_gemm (GString *out, const MpCostProfile *p)
{
  gboolean any = FALSE;
  for (int d = 0; d < MP_DTYPE_N; d++)
    {
      const CmGemmTable *t = &p->gemm[d];
      if (t->flops == NULL)
        continue;
      if (!any)
        g_string_append (out, "gemm:                   # achieved FLOP/s of (M x K) @ (K x N)\n");
      any = TRUE;
      g_string_append_printf (out, "  %s:\n", mp_dtype_name ((MpDtype) d));
      for (int a = 0; a < 3; a++)
        {
          g_string_append_printf (out, "    %s: ", gemm_keys[a]);
          append_list (out, t->axis[a], t->len[a]);
          g_string_append_c (out, '\n');
        }
      g_string_append (out, "    flops_per_s:          # [m][n][k]\n");
      for (guint i = 0; i < t->len[0]; i++)
        for (guint j = 0; j < t->len[1]; j++)
          {
            g_string_append (out, j == 0 ? "      - - " : "        - ");
            append_list (out, t->flops + ((gsize) i * t->len[1] + j) * t->len[2], t->len[2]);
            g_string_append (out, "\n");
          }
    }
}

static void
append_collectives (GString *out, const MpCostProfile *p)
{
  gboolean any = FALSE;
  for (int t = 0; t < MP_TIER_N; t++)
    for (int c = 0; c < MP_COLL_N; c++)
      {
        const CmCollTable *ct = &p->coll[c][t];
        if (ct->count == 0)
          continue;
        if (!any)
          g_string_append (out, "collectives:            # nccl-tests size (bytes) and busbw "
                                "(bytes/s)\n");
        any = TRUE;
        g_string_append_printf (out, "  - kind: %s\n    tier: %s\n    ranks: %u\n    sizes: ",
                                coll_names[c], tier_names[t], ct->n_ranks);
        append_list (out, ct->size, ct->count);
        g_string_append (out, "\n    busbw: ");
        append_list (out, ct->busbw, ct->count);
        g_string_append_c (out, '\n');
      }
}

static void
append_kernels (GString *out, const MpCostProfile *p)
{
  const CmAttnTable *a = &p->attn;
  if (a->n > 0)
    {
      g_string_append (out, "attention:  # FLOP/s of causal attention as the cost model "
                            "counts them, per rank, every rank busy");
      if (a->seq)
        {
          g_string_append (out, ", by key length\n  seq: ");
          append_list (out, a->seq, a->n);
        }
      for (int b = 0; b < 2; b++)
        {
          g_string_append_printf (out, "\n  %s: ", attention_keys[1 + b]);
          if (a->seq)
            append_list (out, a->flops[b], a->n);
          else
            append_number (out, a->flops[b][0]);
        }
      g_string_append_c (out, '\n');
    }
  gboolean any = FALSE;
  for (int k = 0; k < MP_EW_N; k++)
    {
      if (!(p->ew_Bps[k][0] > 0))
        continue;
      if (!any)
        g_string_append (out, "elementwise:  # bytes/s of the traffic the cost model charges, "
                              "per rank, every rank busy\n");
      any = TRUE;
      g_string_append_printf (out, "  %s:\n    fwd_bytes_per_s: ", ew_names[k]);
      append_number (out, p->ew_Bps[k][0]);
      g_string_append (out, "\n    bwd_bytes_per_s: ");
      append_number (out, p->ew_Bps[k][1]);
      g_string_append_c (out, '\n');
    }
  if (p->optim_params[MP_OPTIM_ADAM] > 0 || p->optim_params[MP_OPTIM_SGD] > 0)
    {
      g_string_append (out, "optimizer:  # parameters/s of a step (gradient norm + update), "
                            "per rank, every rank busy\n");
      for (int o = 0; o < 2; o++)
        if (p->optim_params[o] > 0)
          {
            g_string_append_printf (out, "  %s: ", optimizer_keys[o]);
            append_number (out, p->optim_params[o]);
            g_string_append_c (out, '\n');
          }
    }
}

static void
append_spread (GString *out, const MpCostProfile *p)
{
  gboolean any = FALSE;
  for (int k = 0; k < MP_SPREAD_N; k++)
    {
      if (p->spread[k] < 0)
        continue;
      if (!any)
        g_string_append (out, "spread:  # of each measurement's repeats: interquartile range "
                              "over the median;\n"
                              "         # the median of that over the measurements of a "
                              "kind\n");
      any = TRUE;
      g_string_append_printf (out, "  %s: {repeats: %u, rel_iqr: ", spread_names[k],
                              p->spread_repeats[k]);
      append_number (out, p->spread[k]);
      g_string_append (out, "}\n");
    }
}

char *
mp_cost_profile_to_yaml (const MpCostProfile *profile, const char *command)
{
  g_return_val_if_fail (profile != NULL, NULL);
  GString *out = g_string_new ("# mpplan calibration profile: measured rates that replace the "
                               "cost model's\n# built-in curves (docs/profile-file.md). Units: "
                               "FLOP/s, bytes, bytes/s.\n");
  if (command)
    g_string_append_printf (out, "# written by: %s\n", command);
  g_string_append_printf (out, "kind: profile\nversion: %d\n", PROFILE_VERSION);
  append_machine (out, &profile->machine);
  if (profile->device)
    {
      g_string_append (out, "device: ");
      append_quoted (out, profile->device);
      g_string_append_c (out, '\n');
    }
  if (profile->mem_bw_Bps > 0)
    {
      g_string_append (out, "memory_bandwidth: ");
      append_number (out, profile->mem_bw_Bps);
      g_string_append (out, "  # bytes/s read + written, per rank, every rank busy\n");
    }
  if (profile->cold_weight_Bps > 0)
    {
      g_string_append (out, "gemm_cold_weight_bandwidth: ");
      append_number (out, profile->cold_weight_Bps);
      g_string_append (out, "  # bytes/s a cold GEMM weight adds, per rank, every rank busy\n");
    }
  append_gemm (out, profile);
  append_kernels (out, profile);
  append_collectives (out, profile);
  append_spread (out, profile);
  return g_string_free (out, FALSE);
}

char *
mp_cost_profile_summary (const MpCostProfile *profile)
{
  const MpProfileMachine *m = &profile->machine;
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "profile for %s", profile->device ? profile->device : "any device");
  if (m->hostname)
    g_string_append_printf (s, " measured on %s", m->hostname);
  if (m->cpu)
    g_string_append_printf (s, " (%s)", m->cpu);
  for (int d = 0; d < MP_DTYPE_N; d++)
    if (profile->gemm[d].flops)
      g_string_append_printf (s, ", %s GEMM on %ux%ux%u shapes", mp_dtype_name ((MpDtype) d),
                              profile->gemm[d].len[0], profile->gemm[d].len[1],
                              profile->gemm[d].len[2]);
  if (profile->mem_bw_Bps > 0)
    {
      g_autofree char *bw = mp_units_format (profile->mem_bw_Bps, MP_UNIT_BPS);
      g_string_append_printf (s, ", memory %s", bw);
    }
  if (profile->attn.n > 0)
    g_string_append_printf (s, ", attention at %u key length%s", profile->attn.n,
                            profile->attn.n == 1 ? "" : "s");
  guint classes = 0;
  for (int k = 0; k < MP_EW_N; k++)
    classes += profile->ew_Bps[k][0] > 0;
  if (classes > 0)
    g_string_append_printf (s, ", %u element-wise rate%s", classes, classes == 1 ? "" : "s");
  if (profile->optim_params[MP_OPTIM_ADAM] > 0 || profile->optim_params[MP_OPTIM_SGD] > 0)
    g_string_append (s, ", optimizer rate");
  guint tables = 0;
  for (int c = 0; c < MP_COLL_N; c++)
    for (int t = 0; t < MP_TIER_N; t++)
      tables += profile->coll[c][t].count > 0;
  g_string_append_printf (s, ", %u collective table%s", tables, tables == 1 ? "" : "s");
  return g_string_free (s, FALSE);
}
