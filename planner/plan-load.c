/* plan-load.c - plan files read back: checked against their schema with every problem
 * located, then resolved (their model and cluster loaded) and evaluated again.
 *
 * The format is in docs/plan-file.md and plan-io.c writes it. Nothing a file predicts is
 * trusted: mp_plan_file_resolve evaluates the config anew, so a plan written by an older
 * cost model is simply re-predicted. */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "planner/planner.h"
#include "common/error.h"
#include "common/yamldoc.h"

#include <string.h>

static const char *const top_keys[] = { "kind", "version", "model", "cluster", "global_batch",
                                        "parallel", "layers_per_chunk", "placement",
                                        "predicted", NULL };
static const char *const parallel_keys[] = {
  "dp", "tp", "pp", "vpp", "cp", "ep", "sequence_parallel", "zero", "zero_shard",
  "reshard_after_forward", "moe_a2a_overlap", "compile", "recompute",
  "micro_batch_size", "num_micro_batches", "schedule", "flash_attention", "fp32_grads",
  "fp8", "bucket_bytes", "order", "etp", "dispatcher", "recompute_method",
  "recompute_num_layers", "recompute_modules", "stack", "cp_comm_type", NULL
};
static const char *const predicted_keys[] = { "step_s", "tokens_per_s", "tflops_per_gpu",
                                              "mfu", "memory_bytes", "time_s", NULL };

typedef struct {
  MpYamlReader r;
  MpPlanFile *f;
  gboolean sizes_ok;       /* every parallel size was read, so products can be checked */
} Loader;

void
mp_plan_file_free (MpPlanFile *file)
{
  if (file == NULL)
    return;
  g_free (file->path);
  g_free (file->model);
  g_free (file->cluster);
  g_free (file->chunk_layers);
  g_free (file->placement);
  g_free (file);
}

static MpPlanFileMark
mark_of (const MpYamlNode *node)
{
  return (MpPlanFileMark) { node ? node->line : 0, node ? node->column : 0 };
}

/* Where KEY itself is written in MAP (a block value starts on a later line). */
static MpPlanFileMark
key_mark (const MpYamlNode *map, const char *key)
{
  for (guint i = 0; i < map->keys->len; i++)
    {
      const MpYamlNode *k = g_ptr_array_index (map->keys, i);
      if (strcmp (k->value, key) == 0)
        return mark_of (k);
    }
  return mark_of (NULL);
}

/* A whole number in [MIN, MAX] from a sequence item; records a problem otherwise. */
static gboolean
scalar_uint (MpYamlReader *r, const MpYamlNode *node, const char *what, guint64 min,
             guint64 max, guint64 *out)
{
  const char *s = node->kind == MP_YAML_SCALAR ? node->value : "";
  char *end = NULL;
  guint64 n = g_ascii_isdigit (s[0]) ? g_ascii_strtoull (s, &end, 10) : 0;
  if (end == NULL || *end != '\0')
    {
      mp_yaml_problem (r, node, "%s must be a whole number%s%s%s", what,
                       *s ? ", not '" : "", s, *s ? "'" : "");
      return FALSE;
    }
  if (n < min || n > max)   /* an overflowing number reads as G_MAXUINT64 */
    {
      mp_yaml_problem (r, node, "%s = %s is out of range [%" G_GUINT64_FORMAT ", %"
                       G_GUINT64_FORMAT "]", what, s, min, max);
      return FALSE;
    }
  *out = n;
  return TRUE;
}

/* KEY of MAP as a guint >= MIN into *OUT (left alone when absent and optional). FALSE
 * when a problem was recorded. */
static gboolean
read_size (MpYamlReader *r, const MpYamlNode *map, const char *key, gboolean required,
           guint min, guint *out)
{
  guint before = r->problems->len;
  guint64 v;
  if (mp_yaml_get_uint (r, map, key, required, min, G_MAXUINT, &v))
    *out = (guint) v;
  return r->problems->len == before;
}

static void
read_schedule (MpYamlReader *r, const MpYamlNode *map, MpSchedule *out)
{
  const MpYamlNode *v = mp_yaml_lookup (map, "schedule");
  /* costmodel's own spelling of the interleaved schedule is read too. */
  if (v && v->kind == MP_YAML_SCALAR && mp_schedule_from_name (v->value, out))
    return;
  const char *names[MP_SCHEDULE_NONE + 2];
  for (int s = 0; s <= MP_SCHEDULE_NONE; s++)
    names[s] = mp_plan_schedule_name ((MpSchedule) s);
  names[MP_SCHEDULE_NONE + 1] = NULL;
  int i;
  if (mp_yaml_get_enum (r, map, "schedule", FALSE, names, &i))
    *out = (MpSchedule) i;
}

static void
read_recompute (MpYamlReader *r, const MpYamlNode *map, MpRecompute *out)
{
  const char *names[MP_RECOMPUTE_FULL + 2];
  for (int m = 0; m <= MP_RECOMPUTE_FULL; m++)
    names[m] = mp_recompute_name ((MpRecompute) m);
  names[MP_RECOMPUTE_FULL + 1] = NULL;
  int i;
  if (mp_yaml_get_enum (r, map, "recompute", FALSE, names, &i))
    *out = (MpRecompute) i;
}

/* recompute_method, recompute_num_layers, recompute_modules (optional; the checker
 * says which recompute they need). */
static void
read_recompute_extent (MpYamlReader *r, const MpYamlNode *map, MpParallelConfig *c)
{
  static const char *const methods[] = { "block", "uniform", NULL };
  int i;
  if (mp_yaml_get_enum (r, map, "recompute_method", FALSE, methods, &i))
    c->recompute_method = (MpRecomputeMethod) i;
  guint64 n = 0;
  if (mp_yaml_get_uint (r, map, "recompute_num_layers", FALSE, 0, G_MAXUINT32, &n))
    c->recompute_num_layers = (guint) n;
  const MpYamlNode *mods = mp_yaml_lookup (map, "recompute_modules");
  if (mods == NULL)
    return;
  if (mods->kind != MP_YAML_SCALAR || !mp_recompute_modules_from_name (mods->value,
                                                                        &c->recompute_modules))
    mp_yaml_problem (r, mods, "'recompute_modules': names joined by '+' among core_attn, "
                              "layernorm, mlp, moe_act, moe, shared_experts");
}

static void
read_order (MpYamlReader *r, const MpYamlNode *node, MpParallelDim *order)
{
  if (node->kind != MP_YAML_SEQ || node->items->len != MP_DIM_N)
    {
      mp_yaml_problem (r, node, "'order' must list tp, cp, dp and pp once each, innermost "
                                "first (e.g. [tp, cp, dp, pp])");
      return;
    }
  MpParallelDim got[MP_DIM_N];
  guint seen = 0;
  gboolean ok = TRUE;
  for (guint i = 0; i < MP_DIM_N; i++)
    {
      const MpYamlNode *item = g_ptr_array_index (node->items, i);
      int d = -1;
      for (int k = 0; item->kind == MP_YAML_SCALAR && k < MP_DIM_N; k++)
        if (g_ascii_strcasecmp (item->value, mp_plan_dim_name ((MpParallelDim) k)) == 0)
          d = k;
      if (d < 0 || (seen & (1u << d)))
        {
          mp_yaml_problem (r, item, "'order': %s '%s' (each of tp, cp, dp, pp once)",
                           d < 0 ? "unknown dimension" : "repeated dimension",
                           item->kind == MP_YAML_SCALAR ? item->value : "?");
          ok = FALSE;
          continue;
        }
      seen |= 1u << d;
      got[i] = (MpParallelDim) d;
    }
  if (ok)
    memcpy (order, got, sizeof got);
}

static void
read_parallel (Loader *l, const MpYamlNode *map)
{
  MpYamlReader *r = &l->r;
  MpParallelConfig *c = &l->f->cfg;
  if (!mp_yaml_expect_map (r, map, "'parallel'"))
    return;
  mp_yaml_check_keys (r, map, parallel_keys);
  gboolean ok = read_size (r, map, "dp", TRUE, 1, &c->dp);
  ok &= read_size (r, map, "tp", TRUE, 1, &c->tp);
  ok &= read_size (r, map, "pp", TRUE, 1, &c->pp);
  ok &= read_size (r, map, "vpp", FALSE, 1, &c->vpp);
  ok &= read_size (r, map, "cp", FALSE, 1, &c->cp);
  ok &= read_size (r, map, "ep", FALSE, 1, &c->ep);
  /* MoE (moe14): etp absent is tp (Megatron's default). */
  if (mp_yaml_lookup (map, "etp") != NULL)
    ok &= read_size (r, map, "etp", FALSE, 1, &c->etp);
  int d;
  static const char *const dispatchers[] = { "alltoall", "allgather", NULL };
  if (mp_yaml_get_enum (r, map, "dispatcher", FALSE, dispatchers, &d))
    c->dispatcher = (MpDispatcher) d;
  ok &= read_size (r, map, "micro_batch_size", TRUE, 1, &c->micro_batch_size);
  ok &= read_size (r, map, "num_micro_batches", TRUE, 1, &c->num_micro_batches);
  l->sizes_ok = ok;
  guint64 zero = c->zero;
  mp_yaml_get_uint (r, map, "zero", FALSE, 0, 3, &zero);
  c->zero = (guint) zero;
  guint64 shard = 0;
  mp_yaml_get_uint (r, map, "zero_shard", FALSE, 1, G_MAXUINT, &shard);
  c->zero_shard = (guint) shard;
  gboolean reshard = TRUE;
  mp_yaml_get_bool (r, map, "reshard_after_forward", FALSE, &reshard);
  c->no_reshard = !reshard;
  mp_yaml_get_bool (r, map, "moe_a2a_overlap", FALSE, &c->moe_a2a_overlap);
  mp_yaml_get_bool (r, map, "compile", FALSE, &c->compile);
  static const char *const cp_comms[] = { "p2p", "allgather", NULL };  /* MpCpComm, less stack */
  if (mp_yaml_get_enum (r, map, "cp_comm_type", FALSE, cp_comms, &d))
    c->cp_comm = (MpCpComm) (d + 1);
  read_recompute (r, map, &c->recompute);
  read_recompute_extent (r, map, c);
  read_schedule (r, map, &c->schedule);
  mp_yaml_get_bool (r, map, "sequence_parallel", FALSE, &c->sequence_parallel);
  mp_yaml_get_bool (r, map, "flash_attention", FALSE, &c->flash_attention);
  mp_yaml_get_bool (r, map, "fp32_grads", FALSE, &c->fp32_grads);
  mp_yaml_get_bool (r, map, "fp8", FALSE, &c->fp8);
  const char *stack = NULL;
  if (mp_yaml_get_string (r, map, "stack", FALSE, &stack) && !mp_stack_from_name (stack, &c->stack))
    mp_yaml_problem (r, mp_yaml_lookup (map, "stack"), "unknown stack '%s' (megatron, "
                     "nemo-automodel, torchtitan, llm-foundry, deepspeed, pytorch)", stack);
  mp_yaml_get_quantity (r, map, "bucket_bytes", MP_UNIT_BYTES, FALSE, TRUE, &c->bucket_bytes);
  const MpYamlNode *order = mp_yaml_lookup (map, "order");
  if (order)
    read_order (r, order, c->order);
}

/* layers_per_chunk: one count >= 1 per model chunk, pp * vpp of them. */
static void
read_chunks (Loader *l, const MpYamlNode *node)
{
  MpYamlReader *r = &l->r;
  if (node->kind != MP_YAML_SEQ || node->items->len == 0)
    {
      mp_yaml_problem (r, node, "'layers_per_chunk' must be a list of layer counts, one per "
                                "model chunk");
      return;
    }
  guint n = node->items->len;
  g_autofree guint *counts = g_new (guint, n);
  gboolean ok = TRUE;
  for (guint i = 0; i < n; i++)
    {
      guint64 v = 0;
      ok &= scalar_uint (r, g_ptr_array_index (node->items, i), "a chunk's layer count", 1,
                         G_MAXUINT, &v);
      counts[i] = (guint) v;
    }
  const MpParallelConfig *c = &l->f->cfg;
  guint64 chunks = (guint64) c->pp * c->vpp;
  if (l->sizes_ok && n != chunks)
    {
      mp_yaml_problem (r, node, "'layers_per_chunk' has %u entries but pp x vpp = %u x %u = %"
                       G_GUINT64_FORMAT " model chunks", n, c->pp, c->vpp, chunks);
      ok = FALSE;
    }
  if (ok)
    l->f->chunk_layers = g_steal_pointer (&counts);
}

/* placement: "identity", or the device of each rank, every device at most once. */
static void
read_placement (Loader *l, const MpYamlNode *node)
{
  MpYamlReader *r = &l->r;
  if (node->kind == MP_YAML_SCALAR && strcmp (node->value, "identity") == 0)
    return;
  if (node->kind != MP_YAML_SEQ || node->items->len == 0)
    {
      mp_yaml_problem (r, node, "'placement' must be 'identity' or a list giving each "
                                "rank's device");
      return;
    }
  guint n = node->items->len;
  const MpParallelConfig *c = &l->f->cfg;
  guint64 world = (guint64) c->dp * c->tp * c->pp * c->cp;
  if (l->sizes_ok && n != world)
    {
      mp_yaml_problem (r, node, "'placement' has %u entries but dp x tp x pp x cp = %"
                       G_GUINT64_FORMAT " ranks", n, world);
      return;
    }
  g_autofree guint *devices = g_new (guint, n);
  g_autoptr(GHashTable) rank_of = g_hash_table_new (g_direct_hash, g_direct_equal);
  gboolean ok = TRUE;
  for (guint i = 0; i < n; i++)
    {
      const MpYamlNode *item = g_ptr_array_index (node->items, i);
      guint64 d = 0;
      /* Devices are stored +1 in the table so that device 0 is not a NULL key. */
      if (!scalar_uint (r, item, "a device", 0, G_MAXUINT - 1, &d))
        ok = FALSE;
      else if (g_hash_table_contains (rank_of, GUINT_TO_POINTER (d + 1)))
        {
          gpointer first = g_hash_table_lookup (rank_of, GUINT_TO_POINTER (d + 1));
          mp_yaml_problem (r, item, "'placement': device %" G_GUINT64_FORMAT " is given to "
                           "rank %u and rank %u", d, GPOINTER_TO_UINT (first), i);
          ok = FALSE;
        }
      else
        g_hash_table_insert (rank_of, GUINT_TO_POINTER (d + 1), GUINT_TO_POINTER (i));
      devices[i] = (guint) d;
    }
  if (ok)
    l->f->placement = g_steal_pointer (&devices);
}

/* An informative figure of the predicted block: a number >= 0 of KIND, or null (the
 * writer's mark for a figure that was not a number). Not trusted, but still checked. */
static void
read_figure (MpYamlReader *r, const MpYamlNode *map, const char *key, MpUnitKind kind,
             double *out)
{
  const MpYamlNode *n = mp_yaml_lookup (map, key);
  if (n && n->kind == MP_YAML_SCALAR && n->plain && strcmp (n->value, "null") == 0)
    return;
  double v = 0;
  if (mp_yaml_get_quantity (r, map, key, kind, FALSE, TRUE, &v) && out)
    *out = v;
}

/* A map of figures under KEY, its keys among NAMES, each of KIND. */
static void
read_figures (MpYamlReader *r, const MpYamlNode *map, const char *key,
              const char *const *names, MpUnitKind kind)
{
  const MpYamlNode *m = mp_yaml_lookup (map, key);
  g_autofree char *what = g_strdup_printf ("'%s'", key);
  if (m == NULL || !mp_yaml_expect_map (r, m, what))
    return;
  mp_yaml_check_keys (r, m, names);
  for (guint i = 0; names[i]; i++)
    read_figure (r, m, names[i], kind, NULL);
}

static void
read_predicted (Loader *l, const MpYamlNode *map)
{
  MpYamlReader *r = &l->r;
  if (!mp_yaml_expect_map (r, map, "'predicted'"))
    return;
  mp_yaml_check_keys (r, map, predicted_keys);
  read_figure (r, map, "step_s", MP_UNIT_SECONDS, &l->f->predicted_step_s);
  read_figure (r, map, "tokens_per_s", MP_UNIT_COUNT, NULL);
  read_figure (r, map, "tflops_per_gpu", MP_UNIT_FLOPS, NULL);
  read_figure (r, map, "mfu", MP_UNIT_COUNT, NULL);
  /* memory_bytes: peak and the memory kinds; time_s: the phases (program.h's names). */
  const char *memory_keys[MP_MEM_N + 2] = { "peak" }, *time_keys[MP_PHASE_N + 1] = { 0 };
  for (int k = 0; k < MP_MEM_N; k++)
    memory_keys[k + 1] = mp_mem_kind_name (k);
  for (int p = 0; p < MP_PHASE_N; p++)
    time_keys[p] = mp_phase_name (p);
  read_figures (r, map, "memory_bytes", memory_keys, MP_UNIT_BYTES);
  read_figures (r, map, "time_s", time_keys, MP_UNIT_SECONDS);
}

/* dp x micro_batch_size x num_micro_batches must be the global batch. */
static void
check_batch (Loader *l, const MpYamlNode *root)
{
  const MpParallelConfig *c = &l->f->cfg;
  guint64 a, b;
  gboolean fits = g_uint64_checked_mul (&a, c->dp, c->micro_batch_size)
                  && g_uint64_checked_mul (&b, a, c->num_micro_batches);
  if (fits && b == l->f->global_batch)
    return;
  g_autofree char *product = fits ? g_strdup_printf ("%" G_GUINT64_FORMAT, b) : g_strdup ("more");
  mp_yaml_problem (&l->r, mp_yaml_lookup (root, "global_batch"), "dp %u x micro_batch_size %u "
                   "x num_micro_batches %u = %s sequences, not global_batch %u", c->dp,
                   c->micro_batch_size, c->num_micro_batches, product, l->f->global_batch);
}

/* version: 1. FALSE (with the problem recorded) when the file is of another version,
 * whose other keys this mpplan cannot be trusted to understand. */
static gboolean
check_version (MpYamlReader *r, const MpYamlNode *root)
{
  guint64 version = MP_PLAN_FILE_VERSION;
  if (!mp_yaml_get_uint (r, root, "version", TRUE, 0, G_MAXUINT64, &version)
      || version == MP_PLAN_FILE_VERSION)
    return TRUE;
  mp_yaml_problem (r, mp_yaml_lookup (root, "version"), "plan file version %" G_GUINT64_FORMAT
                   ", this mpplan reads version %d (%s)", version, MP_PLAN_FILE_VERSION,
                   version > MP_PLAN_FILE_VERSION
                   ? "written by a newer mpplan: upgrade, or plan again with this one"
                   : "write the plan again with `mpplan plan -o`");
  return FALSE;
}

static void
read_top (Loader *l, const MpYamlNode *root)
{
  MpYamlReader *r = &l->r;
  MpPlanFile *f = l->f;
  mp_yaml_check_keys (r, root, top_keys);
  const char *kind = NULL;
  if (mp_yaml_get_string (r, root, "kind", TRUE, &kind) && strcmp (kind, "plan") != 0)
    mp_yaml_problem (r, mp_yaml_lookup (root, "kind"), "'kind' is '%s': a plan file has "
                     "'kind: plan'", kind);
  const char *s = NULL;
  if (mp_yaml_get_string (r, root, "model", TRUE, &s))
    f->model = g_strdup (s);
  if (mp_yaml_get_string (r, root, "cluster", TRUE, &s))
    f->cluster = g_strdup (s);
  f->model_at = mark_of (mp_yaml_lookup (root, "model"));
  f->cluster_at = mark_of (mp_yaml_lookup (root, "cluster"));
  gboolean batch_ok = read_size (r, root, "global_batch", TRUE, 1, &f->global_batch);
  const MpYamlNode *parallel = mp_yaml_lookup (root, "parallel");
  f->parallel_at = key_mark (root, "parallel");
  if (parallel)
    read_parallel (l, parallel);
  else
    mp_yaml_problem (r, root, "missing required key 'parallel'");
  if (batch_ok && l->sizes_ok)
    check_batch (l, root);
  const MpYamlNode *node;
  if ((node = mp_yaml_lookup (root, "layers_per_chunk")) != NULL)
    read_chunks (l, node);
  if ((node = mp_yaml_lookup (root, "placement")) != NULL)
    {
      f->placement_at = key_mark (root, "placement");
      read_placement (l, node);
    }
  if ((node = mp_yaml_lookup (root, "predicted")) != NULL)
    read_predicted (l, node);
}

static MpPlanFile *
plan_from_doc (const MpYamlDoc *doc, GError **error)
{
  g_autoptr(MpPlanFile) f = g_new0 (MpPlanFile, 1);
  f->path = g_strdup (doc->path);
  mp_parallel_config_init (&f->cfg);
  Loader l = { .f = f };
  mp_yaml_reader_init (&l.r, doc);
  if (mp_yaml_expect_map (&l.r, doc->root, "a plan file") && check_version (&l.r, doc->root))
    read_top (&l, doc->root);
  gboolean ok = mp_yaml_reader_finish (&l.r, error);
  mp_yaml_reader_clear (&l.r);
  if (!ok)
    return NULL;
  f->cfg.chunk_layers = f->chunk_layers;
  f->cfg.placement = f->placement;
  return g_steal_pointer (&f);
}

MpPlanFile *
mp_plan_file_load (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_autoptr(MpYamlDoc) doc = mp_yaml_load (path, error);
  return doc ? plan_from_doc (doc, error) : NULL;
}

MpPlanFile *
mp_plan_file_load_data (const char *name, const char *data, gsize len, GError **error)
{
  g_return_val_if_fail (name != NULL, NULL);
  g_autoptr(MpYamlDoc) doc = mp_yaml_load_data (name, data, len, error);
  return doc ? plan_from_doc (doc, error) : NULL;
}

gboolean
mp_plan_yaml_is_plan (const MpYamlNode *root)
{
  if (root == NULL || root->kind != MP_YAML_MAP)
    return FALSE;
  const MpYamlNode *kind = mp_yaml_lookup (root, "kind");
  if (kind != NULL && kind->kind == MP_YAML_SCALAR && strcmp (kind->value, "plan") == 0)
    return TRUE;
  /* Models and clusters have neither key, so a file with both is a plan, whose loader
   * then explains a missing or wrong 'kind'. */
  return mp_yaml_lookup (root, "version") != NULL && mp_yaml_lookup (root, "parallel") != NULL;
}

/* ---- resolving: the plan's model and cluster, and its evaluation ---------------------- */

void
mp_plan_resolved_free (MpPlanResolved *resolved)
{
  if (resolved == NULL)
    return;
  mp_plan_free (resolved->plan);
  mp_cost_context_free (resolved->ctx);
  mp_cost_profile_free (resolved->profile);
  mp_cluster_free (resolved->cluster);
  mp_model_free (resolved->model);
  g_free (resolved->placement);
  g_free (resolved);
}

/* REF as the loaders should see it: a relative path (anything with a '/' or a file
 * suffix, or a file present in the plan's folder) is taken from DIR, the plan file's
 * folder; zoo names and absolute paths are left alone. A ":N" node-count suffix stays. */
static char *
resolve_reference (const char *ref, const char *dir)
{
  gsize base_len = strlen (ref);
  const char *colon = strrchr (ref, ':');
  if (colon && colon[1] != '\0' && strspn (colon + 1, "0123456789") == strlen (colon + 1))
    base_len = (gsize) (colon - ref);
  g_autofree char *base = g_strndup (ref, base_len);
  g_autofree char *joined = g_build_filename (dir, base, NULL);
  gboolean path_like = strchr (base, '/') || g_str_has_suffix (base, ".yaml")
                       || g_str_has_suffix (base, ".yml") || g_str_has_suffix (base, ".json")
                       || g_file_test (joined, G_FILE_TEST_IS_REGULAR);
  if (g_path_is_absolute (base) || !path_like)
    return g_strdup (ref);
  return g_strconcat (joined, ref + base_len, NULL);
}

/* Sets ERROR to MP_ERROR_INPUT at AT in FILE: "PATH:LINE:COL: WHAT: CAUSE". Frees CAUSE. */
static void
fail_at (GError **error, const MpPlanFile *file, MpPlanFileMark at, GError *cause,
         const char *what)
{
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s:%u:%u: %s: %s", file->path,
               MAX (at.line, 1u), MAX (at.column, 1u), what, cause->message);
  g_error_free (cause);
}

/* Every device of the placement must exist on the cluster. */
static gboolean
check_placement (const MpPlanFile *file, const MpCluster *cluster, GError **error)
{
  guint world = file->cfg.dp * file->cfg.tp * file->cfg.pp * file->cfg.cp;
  for (guint r = 0; file->placement && r < world; r++)
    if (file->placement[r] >= cluster->world_size)
      {
        GError *cause = g_error_new (MP_ERROR, MP_ERROR_INPUT, "rank %u is placed on device "
                                     "%u, but the cluster has devices 0 to %u", r,
                                     file->placement[r], cluster->world_size - 1);
        fail_at (error, file, file->placement_at, cause, "placement");
        return FALSE;
      }
  return TRUE;
}

static gboolean
load_inputs (const MpPlanFile *file, MpPlanResolved *res, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (file->path);
  g_autofree char *model_ref = resolve_reference (file->model, dir);
  g_autofree char *cluster_ref = resolve_reference (file->cluster, dir);
  GError *cause = NULL;
  g_autofree char *what = NULL;
  if ((res->model = mp_model_load (model_ref, &cause)) == NULL)
    {
      what = g_strdup_printf ("model '%s'", file->model);
      fail_at (error, file, file->model_at, cause, what);
      return FALSE;
    }
  if ((res->cluster = mp_cluster_load (cluster_ref, &cause)) == NULL)
    {
      what = g_strdup_printf ("cluster '%s'", file->cluster);
      fail_at (error, file, file->cluster_at, cause, what);
      return FALSE;
    }
  return TRUE;
}

MpPlanResolved *
mp_plan_file_resolve (const MpPlanFile *file, GError **error)
{
  return mp_plan_file_resolve_full (file, NULL, NULL, error);
}

MpPlanResolved *
mp_plan_file_resolve_full (const MpPlanFile *file, MpProfileFor profile_for, gpointer data,
                           GError **error)
{
  g_return_val_if_fail (file != NULL && file->model != NULL && file->cluster != NULL, NULL);
  g_autoptr(MpPlanResolved) res = g_new0 (MpPlanResolved, 1);
  GError *too_big = NULL;
  if (!mp_plan_check_program_size (&file->cfg, &too_big))
    {
      fail_at (error, file, file->parallel_at, too_big, "this plan cannot run");
      return NULL;
    }
  if (!load_inputs (file, res, error) || !check_placement (file, res->cluster, error))
    return NULL;
  if (profile_for != NULL)
    {
      GError *local = NULL;
      res->profile = profile_for (&res->cluster, data, &local);
      if (local != NULL)
        {
          g_propagate_error (error, local);
          return NULL;
        }
    }
  MpParallelConfig cfg = file->cfg;
  cfg.chunk_layers = file->chunk_layers;
  if (file->placement)
    {
      guint world = cfg.dp * cfg.tp * cfg.pp * cfg.cp;
      res->placement = g_memdup2 (file->placement, world * sizeof (guint));
    }
  cfg.placement = res->placement;
  res->ctx = mp_cost_context_new (res->model, res->cluster, res->profile);
  res->plan = g_new0 (MpPlan, 1);
  GError *cause = NULL;
  if (!mp_plan_evaluate (res->ctx, &cfg, file->global_batch, res->plan, &cause))
    {
      fail_at (error, file, file->parallel_at, cause, "this plan cannot run");
      return NULL;
    }
  return g_steal_pointer (&res);
}
