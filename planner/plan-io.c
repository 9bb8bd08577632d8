/* plan-io.c - a plan as JSON, and as a plan file (writing; plan-load.c reads them back).
 *
 * A plan file is YAML with `kind: plan` and `version: 1`; docs/plan-file.md describes it.
 * It holds every field of the MpParallelConfig, so that write -> load -> evaluate gives
 * the very same step time: doubles are written with as many digits as it takes to read
 * back the same bits. The predicted figures in it are for people; readers never trust
 * them and evaluate the config again (mp_plan_file_resolve).
 *
 * Not here: the search, the cost model, where the text is written (the CLI writes it with
 * mp_output_write, atomically). */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "common/output.h"
#include "planner/planner-private.h"
#include "common/error.h"
#include "common/units.h"
#include "common/zoo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ---------------------------------------------------------------------------- */

static const char *const schedule_names[] = { "1f1b", "gpipe", "interleaved-1f1b", "none" };
static const char *const dim_names[] = { "tp", "cp", "dp", "pp" };

/* The tables above are indexed by these enums. */
G_STATIC_ASSERT (MP_SCHEDULE_1F1B == 0 && MP_SCHEDULE_GPIPE == 1
                 && MP_SCHEDULE_INTERLEAVED == 2 && MP_SCHEDULE_NONE == 3);
G_STATIC_ASSERT (MP_DIM_TP == 0 && MP_DIM_CP == 1 && MP_DIM_DP == 2 && MP_DIM_PP == 3);

const char *
mp_plan_schedule_name (MpSchedule schedule)
{
  /* Only the interleaved schedule is spelt differently from costmodel's mp_schedule_name
   * (the and Megatron's "interleaved-1f1b"). */
  return (guint) schedule <= MP_SCHEDULE_NONE ? schedule_names[schedule] : "?";
}

const char *
mp_plan_dim_name (MpParallelDim dim)
{
  return (guint) dim < MP_DIM_N ? dim_names[dim] : "?";
}

const char *
mp_plan_family_id (MpPlanFamily family)
{
  static const char *const ids[MP_FAMILY_N] = { "data", "fsdp", "placement", "pipeline",
                                                "tensor", "2d", "hybrid" };
  return (guint) family < MP_FAMILY_N ? ids[family] : "?";
}

/* CFG's rank order if it is a permutation of the four dimensions, else Megatron's default
 * (tp, cp, dp, pp), which is what the cost model uses for such a config. */
static void
effective_order (const MpParallelConfig *cfg, MpParallelDim order[MP_DIM_N])
{
  guint seen = 0;
  for (int i = 0; i < MP_DIM_N; i++)
    if ((guint) cfg->order[i] < MP_DIM_N)
      seen |= 1u << cfg->order[i];
  for (int i = 0; i < MP_DIM_N; i++)
    order[i] = seen == (1u << MP_DIM_N) - 1 ? cfg->order[i] : (MpParallelDim) i;
}

char *
mp_plan_order_text (const MpParallelConfig *cfg)
{
  g_return_val_if_fail (cfg != NULL, NULL);
  MpParallelDim order[MP_DIM_N];
  effective_order (cfg, order);
  gboolean def = TRUE;
  GString *s = g_string_new (NULL);
  for (int i = 0; i < MP_DIM_N; i++)
    {
      def &= order[i] == (MpParallelDim) i;
      g_string_append_printf (s, "%s%s", i ? "," : "", mp_plan_dim_name (order[i]));
    }
  return g_string_free (s, def);
}

static guint
n_chunks (const MpParallelConfig *cfg)
{
  return cfg->pp * MAX (cfg->vpp, 1u);
}

/* ---- JSON ----------------------------------------------------------------------------- */

static void
json_config (JsonBuilder *b, const MpPlan *plan)
{
  const MpParallelConfig *c = &plan->cfg;
  mp_json_add_int (b, "dp", c->dp);
  mp_json_add_int (b, "tp", c->tp);
  mp_json_add_int (b, "pp", c->pp);
  mp_json_add_int (b, "vpp", c->vpp);
  mp_json_add_int (b, "cp", c->cp);
  mp_json_add_int (b, "ep", c->ep);
  mp_json_add_bool (b, "sequence_parallel", c->sequence_parallel);
  mp_json_add_int (b, "zero", c->zero);
  if (mp_parallel_config_zero_replicas (c) > 1)
    mp_json_add_int (b, "zero_shard", mp_parallel_config_zero_shard (c));
  if (c->no_reshard)
    mp_json_add_bool (b, "reshard_after_forward", FALSE);
  if (c->moe_a2a_overlap)
    mp_json_add_bool (b, "moe_a2a_overlap", TRUE);
  if (c->compile)
    mp_json_add_bool (b, "compile", TRUE);
  if (c->cp_comm != MP_CP_COMM_STACK)
    mp_json_add_string (b, "cp_comm_type", mp_cp_comm_name (c->cp_comm));
  mp_json_add_string (b, "recompute", mp_recompute_name (c->recompute));
  if (c->recompute_num_layers > 0)
    {
      mp_json_add_string (b, "recompute_method", mp_recompute_method_name (c->recompute_method));
      mp_json_add_int (b, "recompute_num_layers", c->recompute_num_layers);
    }
  if (c->recompute == MP_RECOMPUTE_SELECTIVE)
    {
      g_autofree char *mods = mp_recompute_modules_name (c->recompute_modules);
      mp_json_add_string (b, "recompute_modules", mods);
    }
  mp_json_add_int (b, "micro_batch_size", c->micro_batch_size);
  mp_json_add_int (b, "num_micro_batches", c->num_micro_batches);
  mp_json_add_string (b, "schedule", mp_plan_schedule_name (c->schedule));
  if (c->fp8)       /* only when on: plans without it read as before */
    mp_json_add_bool (b, "fp8", TRUE);
  if (c->stack != MP_STACK_MEGATRON)   /* likewise only when not the default */
    mp_json_add_string (b, "stack", mp_stack_name (c->stack));
  if (pl_config_has_experts (c))
    {
      mp_json_add_int (b, "etp", mp_parallel_config_etp (c));
      mp_json_add_string (b, "dispatcher", mp_dispatcher_name (c->dispatcher));
    }
}

static void
json_predictions (JsonBuilder *b, const MpPlan *plan)
{
  mp_json_add_double (b, "step_s", plan->step_s);
  if (plan->simulated_step_s > 0)
    mp_json_add_double (b, "simulated_step_s", plan->simulated_step_s);
  mp_json_add_double (b, "tokens_per_s", plan->tokens_per_s);
  mp_json_add_double (b, "flops_per_gpu", plan->tflops_per_gpu);
  mp_json_add_double (b, "hw_flops_per_gpu", plan->hw_tflops_per_gpu);
  mp_json_add_double (b, "mfu", plan->mfu);
  mp_json_add_double (b, "hfu", plan->hfu);
  if (plan->mfu_fp8 > 0)
    mp_json_add_double (b, "mfu_fp8", plan->mfu_fp8);

  const MpPlanMemory *m = &plan->memory;
  json_builder_set_member_name (b, "memory_bytes");
  json_builder_begin_object (b);
  mp_json_add_double (b, "peak", m->peak_bytes);
  for (int k = 0; k < MP_MEM_N; k++)
    mp_json_add_double (b, mp_mem_kind_name (k), m->bytes[k]);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "memory_reserve_bytes");
  json_builder_begin_object (b);
  for (int k = 0; k < MP_RESERVE_N; k++)
    mp_json_add_double (b, mp_reserve_kind_name (k), m->reserve[k]);
  mp_json_add_double (b, "headroom", m->headroom_bytes);
  json_builder_end_object (b);

  mp_step_time_add_json (b, "time_s", &plan->time);
}

void
mp_plan_json_header (JsonBuilder *b, const MpModel *model, const MpCluster *cluster,
                     guint global_batch)
{
  mp_json_add_int (b, "schema_version", 1);
  mp_json_add_string (b, "model", model->name);
  mp_json_add_string (b, "cluster", cluster->name);
  mp_json_add_int (b, "world_size", cluster->world_size);
  mp_json_add_int (b, "global_batch", global_batch);
}

JsonNode *
mp_plan_to_json (const MpPlan *plan)
{
  g_return_val_if_fail (plan != NULL, NULL);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_config (b, plan);
  json_predictions (b, plan);
  mp_json_add_string (b, "family", mp_plan_family_id (plan->family));
  mp_json_add_string (b, "dominant", mp_plan_dominant (plan));
  mp_json_add_bool (b, "fits", plan->fits);
  json_builder_set_member_name (b, "chunk_layers");
  json_builder_begin_array (b);
  for (guint c = 0; plan->chunk_layers && c < n_chunks (&plan->cfg); c++)
    json_builder_add_int_value (b, plan->chunk_layers[c]);
  json_builder_end_array (b);
  MpParallelDim order[MP_DIM_N];
  effective_order (&plan->cfg, order);
  json_builder_set_member_name (b, "order");
  json_builder_begin_array (b);
  for (int i = 0; i < MP_DIM_N; i++)
    json_builder_add_string_value (b, mp_plan_dim_name (order[i]));
  json_builder_end_array (b);
  mp_json_add_int (b, "binding_stage", plan->memory.binding_stage);
  mp_json_add_int (b, "world_size", plan->world_size);
  mp_json_add_int (b, "global_batch", plan->global_batch);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* ---- writing a plan file -------------------------------------------------------------- */

/* The shortest of %.15g .. %.17g that reads back as exactly V, so figures survive a
 * round trip bit for bit and still read well. */
static void
append_double (GString *out, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  static const char *const formats[] = { "%.15g", "%.16g", "%.17g" };
  for (gsize i = 0; i < G_N_ELEMENTS (formats); i++)
    {
      g_ascii_formatd (buf, sizeof buf, formats[i], v);
      if (g_ascii_strtod (buf, NULL) == v)
        break;
    }
  g_string_append (out, buf);
}

/* Could S be read as something other than a string (a bool, null) by a YAML 1.1 tool? */
static gboolean
is_yaml_keyword (const char *s)
{
  static const char *const words[] = { "true", "false", "yes", "no", "on", "off", "null",
                                       "y", "n", NULL };
  for (const char *const *w = words; *w; w++)
    if (g_ascii_strcasecmp (s, *w) == 0)
      return TRUE;
  return FALSE;
}

/* S as a YAML scalar: plain when it is a simple name or path, else double-quoted. */
static void
append_string (GString *out, const char *s)
{
  gsize len = strlen (s);
  gboolean plain = len > 0 && (g_ascii_isalpha (s[0]) || strchr ("._/", s[0]))
                   && s[len - 1] != ':' && !is_yaml_keyword (s);
  for (const char *p = s; plain && *p; p++)
    plain = g_ascii_isalnum (*p) || strchr ("._/+-:", *p) != NULL;
  if (plain)
    {
      g_string_append (out, s);
      return;
    }
  g_string_append_c (out, '"');
  for (const unsigned char *p = (const unsigned char *) s; *p; p++)
    if (*p == '"' || *p == '\\')
      g_string_append_printf (out, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f)
      g_string_append_printf (out, "\\x%02x", *p);
    else
      g_string_append_c (out, (char) *p);
  g_string_append_c (out, '"');
}

/* TARGET relative to the folder DIR, both absolute and canonical ("../models/x.yaml"). */
static char *
relative_path (const char *target, const char *dir)
{
  g_auto(GStrv) t = g_strsplit (target, "/", -1);
  g_auto(GStrv) d = g_strsplit (dir, "/", -1);
  guint nt = g_strv_length (t), nd = g_strv_length (d), common = 0;
  while (common < nt && common < nd && strcmp (t[common], d[common]) == 0)
    common++;
  g_autoptr(GString) out = g_string_new (NULL);
  for (guint i = common; i < nd; i++)
    if (*d[i])
      g_string_append (out, "../");
  for (guint i = common; i < nt; i++)
    if (*t[i])
      g_string_append_printf (out, "%s%s", t[i], i + 1 < nt ? "/" : "");
  return g_string_free (g_steal_pointer (&out), FALSE);
}

/* PATH absolute, with symbolic links resolved when it exists (so that ".." in a relative
 * path means what the kernel will make of it), else only tidied. */
static char *
absolute_path (const char *path)
{
  char *real = realpath (path, NULL);
  if (real == NULL)
    return g_canonicalize_filename (path, NULL);
  char *copy = g_strdup (real);
  free (real);
  return copy;
}

/* How a plan file in PLAN_DIR should name the file PATH (as the user gave it): an absolute
 * path stays absolute; a relative one is made relative to the plan's folder, where readers
 * look for it, with a '/' in it so that it is never taken for a zoo name. PLAN_DIR NULL:
 * the plan's folder is unknown, so the path is made absolute. */
static char *
path_reference (const char *path, const char *plan_dir)
{
  if (g_path_is_absolute (path))
    return g_strdup (path);
  g_autofree char *abs = absolute_path (path);
  if (plan_dir == NULL)
    return g_steal_pointer (&abs);
  g_autofree char *rel = relative_path (abs, plan_dir);
  return strchr (rel, '/') ? g_steal_pointer (&rel) : g_strconcat ("./", rel, NULL);
}

/* The zoo name of the cluster file at PATH when it is the file the zoo finds for that
 * name (clusters record the path they came from, not how they were named). */
static char *
cluster_zoo_name (const char *path)
{
  g_autofree char *base = g_path_get_basename (path);
  if (!g_str_has_suffix (base, ".yaml"))
    return NULL;
  base[strlen (base) - strlen (".yaml")] = '\0';
  g_autofree char *found = mp_zoo_find ("clusters", base);
  if (found == NULL)
    return NULL;
  g_autofree char *a = absolute_path (found);
  g_autofree char *b = absolute_path (path);
  return strcmp (a, b) == 0 ? g_steal_pointer (&base) : NULL;
}

static char *
model_reference (const MpModel *model, const char *plan_dir)
{
  if (model->source == NULL)
    return g_strdup (model->name);
  if (g_str_has_prefix (model->source, "zoo:"))
    return g_strdup (model->source + strlen ("zoo:"));
  return path_reference (model->source, plan_dir);
}

/* The cluster's zoo name or path, with its node (domain) count as a ":N" suffix whenever
 * the loader accepts one (a cluster without node groups), so that the plan reloads onto
 * the same number of devices whatever the file's default. */
static char *
cluster_reference (const MpCluster *cluster, const char *plan_dir)
{
  g_autofree char *base = NULL;
  if (cluster->source == NULL)
    base = g_strdup (cluster->name);
  else if ((base = cluster_zoo_name (cluster->source)) == NULL)
    base = path_reference (cluster->source, plan_dir);
  if (cluster->n_groups != 1)
    return g_steal_pointer (&base);
  /* With NVLink domains the suffix counts domains; a short last domain needs the device
   * count (":Ng"). */
  guint npd = MAX (cluster->nodes_per_domain, 1u);
  if (npd > 1 && cluster->nodes % npd != 0)
    return g_strdup_printf ("%s:%ug", base, cluster->world_size);
  return g_strdup_printf ("%s:%u", base, cluster->nodes / npd);
}

/* The folder a plan written to PLAN_PATH lives in, absolute and canonical; NULL when it
 * is not known (stdout may be redirected anywhere). */
static char *
plan_folder (const char *plan_path)
{
  if (plan_path == NULL || strcmp (plan_path, "-") == 0)
    return NULL;
  g_autofree char *dir = g_path_get_dirname (plan_path);
  return absolute_path (dir);
}

/* S inside a comment: control characters (a line break would end the comment and let the
 * rest be read as keys) become spaces. */
static void
append_comment_text (GString *out, const char *s)
{
  for (const unsigned char *p = (const unsigned char *) s; *p; p++)
    g_string_append_c (out, *p < 0x20 || *p == 0x7f ? ' ' : (char) *p);
}

static void
write_header (GString *out, const MpPlan *plan, const MpModel *model,
              const MpCluster *cluster, const char *command)
{
  g_string_append_printf (out, "# mpplan plan file, version %d, written by %s\n",
                          MP_PLAN_FILE_VERSION, PACKAGE_STRING);
  if (command != NULL)
    {
      g_string_append (out, "# command: ");
      append_comment_text (out, command);
      g_string_append_c (out, '\n');
    }
  g_string_append (out, "# ");
  append_comment_text (out, model->name);
  g_string_append (out, " on ");
  append_comment_text (out, cluster->name);
  g_string_append_printf (out, ": %u of %u devices.\n", plan->world_size, cluster->world_size);
  g_string_append (out, "# Readers evaluate the plan again; the predicted figures at the "
                        "end are for people.\n");
}

static void
write_parallel (GString *out, const MpParallelConfig *c)
{
  g_string_append (out, "parallel:\n");
  g_string_append_printf (out, "  dp: %u\n  tp: %u\n  pp: %u\n  vpp: %u\n  cp: %u\n  ep: %u\n",
                          c->dp, c->tp, c->pp, c->vpp, c->cp, c->ep);
  g_string_append_printf (out, "  sequence_parallel: %s\n  zero: %u\n  recompute: %s\n",
                          c->sequence_parallel ? "true" : "false", c->zero,
                          mp_recompute_name (c->recompute));
  if (mp_parallel_config_zero_replicas (c) > 1)
    g_string_append_printf (out, "  zero_shard: %u\n", mp_parallel_config_zero_shard (c));
  if (c->no_reshard)
    g_string_append (out, "  reshard_after_forward: false\n");
  if (c->moe_a2a_overlap)
    g_string_append (out, "  moe_a2a_overlap: true\n");
  if (c->compile)
    g_string_append (out, "  compile: true\n");
  if (c->cp_comm != MP_CP_COMM_STACK)
    g_string_append_printf (out, "  cp_comm_type: %s\n", mp_cp_comm_name (c->cp_comm));
  if (c->recompute_num_layers > 0)
    g_string_append_printf (out, "  recompute_method: %s\n  recompute_num_layers: %u\n",
                            mp_recompute_method_name (c->recompute_method),
                            c->recompute_num_layers);
  if (c->recompute == MP_RECOMPUTE_SELECTIVE)
    {
      g_autofree char *mods = mp_recompute_modules_name (c->recompute_modules);
      g_string_append_printf (out, "  recompute_modules: %s\n", mods);
    }
  g_string_append_printf (out, "  micro_batch_size: %u\n  num_micro_batches: %u\n",
                          c->micro_batch_size, c->num_micro_batches);
  g_string_append_printf (out, "  schedule: %s\n  flash_attention: %s\n  fp32_grads: %s\n",
                          mp_plan_schedule_name (c->schedule),
                          c->flash_attention ? "true" : "false",
                          c->fp32_grads ? "true" : "false");
  if (c->fp8)
    g_string_append (out, "  fp8: true\n");
  if (c->stack != MP_STACK_MEGATRON)
    g_string_append_printf (out, "  stack: %s\n", mp_stack_name (c->stack));
  if (pl_config_has_experts (c))
    g_string_append_printf (out, "  etp: %u\n  dispatcher: %s\n", mp_parallel_config_etp (c),
                            mp_dispatcher_name (c->dispatcher));
  if (c->bucket_bytes > 0)
    {
      g_string_append (out, "  bucket_bytes: ");
      append_double (out, c->bucket_bytes);
      g_string_append_c (out, '\n');
    }
  MpParallelDim order[MP_DIM_N];
  effective_order (c, order);
  g_string_append (out, "  order: [");
  for (int i = 0; i < MP_DIM_N; i++)
    g_string_append_printf (out, "%s%s", i ? ", " : "", mp_plan_dim_name (order[i]));
  g_string_append (out, "]   # rank numbering, innermost first\n");
}

/* layers_per_chunk, after a comment saying which layers each chunk (and stage) holds. */
static void
write_layers (GString *out, const MpPlan *plan, const MpModel *model)
{
  guint chunks = n_chunks (&plan->cfg), first = 0;
  gboolean interleaved = chunks > plan->cfg.pp;
  g_string_append (out, "# model layers per chunk, in order; chunk c runs on pipeline stage "
                        "c mod pp:\n");
  for (guint c = 0; c < chunks; c++)
    {
      guint n = plan->chunk_layers[c], last = first + n - 1;
      if (interleaved)
        g_string_append_printf (out, "#   chunk %u (stage %u): ", c, c % plan->cfg.pp);
      else
        g_string_append_printf (out, "#   stage %u: ", c);
      if (n == 0 || last >= model->n_layers)
        g_string_append (out, "no layers\n");
      else if (n == 1)
        {
          g_string_append_printf (out, "layer %u (", first);
          append_comment_text (out, model->layers[first].name);
          g_string_append (out, ")\n");
        }
      else
        {
          g_string_append_printf (out, "layers %u-%u (", first, last);
          append_comment_text (out, model->layers[first].name);
          g_string_append (out, " .. ");
          append_comment_text (out, model->layers[last].name);
          g_string_append (out, ")\n");
        }
      first += n;
    }
  g_string_append (out, "layers_per_chunk: [");
  for (guint c = 0; c < chunks; c++)
    g_string_append_printf (out, "%s%u", c ? ", " : "", plan->chunk_layers[c]);
  g_string_append (out, "]\n");
}

static void
write_placement (GString *out, const MpPlan *plan)
{
  const guint *pl = plan->cfg.placement;
  if (pl == NULL)
    {
      g_string_append (out, "placement: identity   # rank r on device r\n");
      return;
    }
  g_string_append (out, "# rank r on device placement[r]\nplacement: [");
  for (guint r = 0; r < plan->world_size; r++)
    {
      if (r > 0)
        g_string_append (out, r % 16 == 0 ? ",\n    " : ", ");
      g_string_append_printf (out, "%u", pl[r]);
    }
  g_string_append (out, "]\n");
}

/* "INDENT KEY: VALUE   # HUMAN UNIT_SUFFIX", the comment printed in KIND's human unit
 * (no comment when KIND is negative). */
static void
write_figure (GString *out, const char *indent, const char *key, double v, int kind,
              const char *unit_suffix)
{
  g_string_append_printf (out, "%s%s: ", indent, key);
  /* A figure the cost model could not compute must not make the file unreadable. */
  if (!isfinite (v))
    {
      g_string_append (out, "null   # not a number\n");
      return;
    }
  append_double (out, v);
  if (kind >= 0)
    {
      g_autofree char *human = mp_units_format (v, (MpUnitKind) kind);
      g_string_append_printf (out, "   # %s%s", human, unit_suffix);
    }
  g_string_append_c (out, '\n');
}

static void
write_predicted (GString *out, const MpPlan *plan)
{
  const MpPlanMemory *m = &plan->memory;
  g_string_append (out, "predicted:   # informative only (SI units); readers evaluate again\n");
  write_figure (out, "  ", "step_s", plan->step_s, MP_UNIT_SECONDS, "");
  write_figure (out, "  ", "tokens_per_s", plan->tokens_per_s, MP_UNIT_COUNT, " tokens/s");
  write_figure (out, "  ", "tflops_per_gpu", plan->tflops_per_gpu, MP_UNIT_FLOPS,
                " of model FLOPs per GPU");
  write_figure (out, "  ", "mfu", plan->mfu, -1, NULL);
  g_string_append (out, "  memory_bytes:   # per device, binding stage\n");
  write_figure (out, "    ", "peak", m->peak_bytes, MP_UNIT_BYTES, "");
  for (int k = 0; k < MP_MEM_N; k++)
    write_figure (out, "    ", mp_mem_kind_name (k), m->bytes[k], MP_UNIT_BYTES, "");
  g_string_append (out, "  time_s:   # where the step goes\n");
  for (int p = 0; p < MP_PHASE_N; p++)
    write_figure (out, "    ", mp_phase_name (p), plan->time.t[p], MP_UNIT_SECONDS, "");
}

char *
mp_plan_to_yaml_for_path (const MpPlan *plan, const MpModel *model, const MpCluster *cluster,
                          const char *plan_path, const char *command)
{
  g_return_val_if_fail (plan != NULL && model != NULL && cluster != NULL, NULL);
  g_return_val_if_fail (plan->chunk_layers != NULL, NULL);
  g_autofree char *dir = plan_folder (plan_path);
  g_autofree char *model_ref = model_reference (model, dir);
  g_autofree char *cluster_ref = cluster_reference (cluster, dir);
  GString *out = g_string_new (NULL);
  write_header (out, plan, model, cluster, command);
  g_string_append_printf (out, "kind: plan\nversion: %d\nmodel: ", MP_PLAN_FILE_VERSION);
  append_string (out, model_ref);
  g_string_append (out, "\ncluster: ");
  append_string (out, cluster_ref);
  g_string_append_printf (out, "\nglobal_batch: %u   # sequences per optimizer step\n",
                          plan->global_batch);
  write_parallel (out, &plan->cfg);
  write_layers (out, plan, model);
  write_placement (out, plan);
  write_predicted (out, plan);
  return g_string_free (out, FALSE);
}

char *
mp_plan_to_yaml (const MpPlan *plan, const MpModel *model, const MpCluster *cluster,
                 const char *command)
{
  return mp_plan_to_yaml_for_path (plan, model, cluster, NULL, command);
}
