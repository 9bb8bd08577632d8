/* costmodel-describe.c - the per-layer cost table of `mpplan describe MODEL --cluster
 * CLUSTER`: what the cost model believes one micro-batch costs on one rank, layer by layer
 * and op by op, so a user can check it against a profiler.
 *
 * Consecutive identical layers are folded into one row ("block.0-95 x96"); each distinct
 * layer then gets its op table (split shape, efficiency, compute- or memory-bound).
 * Text columns use fixed units (ms, GFLOP, MB) so rows line up; JSON carries SI units. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "common/output.h"
#include "costmodel/costmodel-private.h"

#include <string.h>

/* A run of consecutive layers of the same class. */
typedef struct {
  guint first, count;
  MpPhaseCost fwd, bwd;
  double params, activations;
} Run;

/* CFG, or the default of a describe: one device, micro-batch 1. */
static void
effective_config (const MpParallelConfig *cfg, MpParallelConfig *out)
{
  if (cfg)
    *out = *cfg;
  else
    mp_parallel_config_init (out);
}

static GArray *
runs_of (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpStageSpans *spans)
{
  GArray *runs = g_array_new (FALSE, TRUE, sizeof (Run));
  const MpModel *m = ctx->model;
  for (guint i = 0; i < m->n_layers; i++)
    {
      Run *last = runs->len ? &g_array_index (runs, Run, runs->len - 1) : NULL;
      if (last && ctx->layers[last->first].class_id == ctx->layers[i].class_id)
        {
          last->count++;
          continue;
        }
      Run r = { .first = i, .count = 1 };
      mp_cost_layer (ctx, cfg, spans, i, &r.fwd, &r.bwd);
      const CmLayer *cl = &ctx->layers[i];
      r.params = cl->params_split / cfg->tp + cl->params_rep
                 + cl->params_expert / cm_expert_shards (cfg);
      r.activations = mp_cost_layer_activation_bytes (ctx, cfg, i);
      g_array_append_val (runs, r);
    }
  return runs;
}

static char *
run_name (const MpModel *m, const Run *r)
{
  const char *a = m->layers[r->first].name;
  if (r->count == 1)
    return g_strdup (a);
  /* "block.0" .. "block.95" -> "block.0-95"; otherwise "first..last". */
  const char *b = m->layers[r->first + r->count - 1].name;
  const char *dot_a = strrchr (a, '.'), *dot_b = strrchr (b, '.');
  if (dot_a && dot_b && dot_a - a == dot_b - b && strncmp (a, b, dot_a - a) == 0)
    return g_strdup_printf ("%s-%s", a, dot_b + 1);
  return g_strdup_printf ("%s..%s", a, b);
}

static const char *
op_shape (const MpOpCost *oc, char *buf, gsize len)
{
  if (oc->m <= 0)
    return "";
  if (oc->batch > 1)
    g_snprintf (buf, len, "%.0fx%.0fx%.0f x%.0f", oc->m, oc->n, oc->k, oc->batch);
  else
    g_snprintf (buf, len, "%.0fx%.0fx%.0f", oc->m, oc->n, oc->k);
  return buf;
}

static void
describe_ops (GString *s, const MpCostContext *ctx, const MpParallelConfig *cfg,
              const MpStageSpans *spans, const Run *r)
{
  const MpLayer *l = &ctx->model->layers[r->first];
  g_autofree char *name = run_name (ctx->model, r);
  g_string_append_printf (s, "\n%s: ops (one layer)\n", name);
  g_string_append_printf (s, "  %-16s %-11s %-7s %-22s %9s %9s %10s %9s %5s %s\n", "op", "kind",
                          "split", "shape MxNxK [xbatch]", "fwd ms", "bwd ms", "fwd GFLOP",
                          "fwd MB", "eff", "bound");
  for (guint i = 0; i < l->n_ops; i++)
    {
      const MpOp *op = &l->ops[i];
      MpOpCost oc;
      char shape[64];
      mp_cost_op (ctx, cfg, spans, r->first, i, &oc);
      g_string_append_printf (s, "  %-16s %-11s %-7s %-22s %9.4f %9.4f %10.2f %9.2f %5.2f %s\n",
                              op->name, mp_op_kind_name (op->kind), mp_split_name (op->split),
                              op_shape (&oc, shape, sizeof shape), oc.fwd.time_s * 1e3,
                              oc.bwd.time_s * 1e3, oc.fwd.flops / 1e9, oc.fwd.bytes / 1e6,
                              oc.fwd.efficiency,
                              oc.fwd.memory_bound ? "memory" : "compute");
    }
}

char *
mp_cost_describe_layers_text (const MpCostContext *ctx, const MpParallelConfig *cfg_in)
{
  g_return_val_if_fail (ctx != NULL, NULL);
  MpParallelConfig cfg;
  effective_config (cfg_in, &cfg);
  MpStageSpans spans;
  mp_cost_stage_spans (ctx, &cfg, 0, &spans);
  const MpCostDevice *dev = spans.device;
  const MpModel *m = ctx->model;
  GString *s = g_string_new (NULL);
  g_autofree char *pk = mp_units_format (dev->device->peak_flops[dev->dtype], MP_UNIT_FLOPS);
  g_autofree char *bw = mp_units_format (dev->device->mem_bw_Bps, MP_UNIT_BPS);
  g_string_append_printf (s, "Cost per layer of %s on %s (%s curve%s): %s peak %s, memory %s\n",
                          m->name, dev->device->name, dev->curve->name,
                          dev->profile ? ", calibrated" : "", mp_dtype_name (dev->dtype), pk,
                          bw);
  g_string_append_printf (s, "one micro-batch of %u x %" G_GUINT64_FORMAT " tokens on one rank; "
                          "tp %u, cp %u, ep %u, sequence parallel %s, flash attention %s, "
                          "recompute %s\n",
                          cfg.micro_batch_size, MAX (m->seq_len, (guint64) 1), cfg.tp, cfg.cp,
                          cfg.ep, cfg.sequence_parallel ? "on" : "off",
                          cfg.flash_attention ? "on" : "off", mp_recompute_name (cfg.recompute));
  g_string_append (s, "(bwd includes recomputation; comm = exposed tensor/expert/context-"
                      "parallel collectives; GFLOP = model FLOPs per rank, attention counted "
                      "without causal halving;\n op tables: the FLOPs the kernels execute, "
                      "their efficiency against peak, and what bounds them)\n\n");
  g_string_append_printf (s, "%-18s %5s %9s %9s %9s %10s %10s %10s %11s %11s\n", "layers",
                          "count", "fwd ms", "bwd ms", "comm ms", "fwd GFLOP", "bwd GFLOP",
                          "fwd MB", "params", "act MiB");
  g_autoptr(GArray) runs = runs_of (ctx, &cfg, &spans);
  MpPhaseCost fwd = { 0 }, bwd = { 0 };
  double params = 0, act = 0;
  for (guint i = 0; i < runs->len; i++)
    {
      const Run *r = &g_array_index (runs, Run, i);
      g_autofree char *name = run_name (m, r);
      g_autofree char *p = mp_units_format (r->params, MP_UNIT_COUNT);
      double comm = r->fwd.tp_comm_s + r->fwd.ep_comm_s + r->fwd.cp_comm_s + r->bwd.tp_comm_s
                    + r->bwd.ep_comm_s + r->bwd.cp_comm_s;
      g_string_append_printf (s, "%-18s %5u %9.3f %9.3f %9.3f %10.1f %10.1f %10.1f %11s %11.1f\n",
                              name, r->count, r->fwd.total_s * 1e3, r->bwd.total_s * 1e3,
                              comm * 1e3, r->fwd.model_flops / 1e9, r->bwd.model_flops / 1e9,
                              r->fwd.bytes / 1e6, p, r->activations / 1048576.0);
      fwd.total_s += r->count * r->fwd.total_s;
      bwd.total_s += r->count * r->bwd.total_s;
      fwd.flops += r->count * r->fwd.model_flops;
      bwd.flops += r->count * r->bwd.model_flops;
      fwd.bytes += r->count * r->fwd.bytes;
      params += r->count * r->params;
      act += r->count * r->activations;
    }
  g_autofree char *p = mp_units_format (params, MP_UNIT_COUNT);
  g_string_append_printf (s, "%-18s %5u %9.3f %9.3f %9s %10.1f %10.1f %10.1f %11s %11.1f\n",
                          "total", m->n_layers, fwd.total_s * 1e3, bwd.total_s * 1e3, "",
                          fwd.flops / 1e9, bwd.flops / 1e9, fwd.bytes / 1e6, p,
                          act / 1048576.0);
  for (guint i = 0; i < runs->len; i++)
    describe_ops (s, ctx, &cfg, &spans, &g_array_index (runs, Run, i));
  return g_string_free (s, FALSE);
}

static void
add_phase (JsonBuilder *b, const char *key, const MpPhaseCost *p)
{
  json_builder_set_member_name (b, key);
  json_builder_begin_object (b);
  const struct { const char *k; double v; } f[] = {
    { "total_s", p->total_s },       { "compute_s", p->compute_s },
    { "recompute_s", p->recompute_s }, { "tp_comm_s", p->tp_comm_s },
    { "ep_comm_s", p->ep_comm_s },   { "cp_comm_s", p->cp_comm_s },
    { "flops", p->flops },           { "model_flops", p->model_flops },
    { "bytes", p->bytes },
  };
  for (guint i = 0; i < G_N_ELEMENTS (f); i++)
    {
      json_builder_set_member_name (b, f[i].k);
      json_builder_add_double_value (b, f[i].v);
    }
  json_builder_end_object (b);
}

static void
add_ops (JsonBuilder *b, const MpCostContext *ctx, const MpParallelConfig *cfg,
         const MpStageSpans *spans, guint layer)
{
  const MpLayer *l = &ctx->model->layers[layer];
  json_builder_set_member_name (b, "ops");
  json_builder_begin_array (b);
  for (guint i = 0; i < l->n_ops; i++)
    {
      MpOpCost oc;
      mp_cost_op (ctx, cfg, spans, layer, i, &oc);
      json_builder_begin_object (b);
      mp_json_add_string (b, "name", l->ops[i].name);
      mp_json_add_string (b, "kind", mp_op_kind_name (l->ops[i].kind));
      mp_json_add_string (b, "split", mp_split_name (l->ops[i].split));
      if (oc.m > 0)
        {
          json_builder_set_member_name (b, "shape");
          json_builder_begin_array (b);
          json_builder_add_double_value (b, oc.m);
          json_builder_add_double_value (b, oc.n);
          json_builder_add_double_value (b, oc.k);
          json_builder_add_double_value (b, oc.batch);
          json_builder_end_array (b);
        }
      mp_json_add_double (b, "fwd_s", oc.fwd.time_s);
      mp_json_add_double (b, "bwd_s", oc.bwd.time_s);
      mp_json_add_double (b, "fwd_flops", oc.fwd.flops);
      mp_json_add_double (b, "bwd_flops", oc.bwd.flops);
      mp_json_add_double (b, "fwd_bytes", oc.fwd.bytes);
      mp_json_add_double (b, "efficiency", oc.fwd.efficiency);
      mp_json_add_string (b, "bound", oc.fwd.memory_bound ? "memory" : "compute");
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
}

JsonNode *
mp_cost_describe_layers_json (const MpCostContext *ctx, const MpParallelConfig *cfg_in)
{
  g_return_val_if_fail (ctx != NULL, NULL);
  MpParallelConfig cfg;
  effective_config (cfg_in, &cfg);
  MpStageSpans spans;
  mp_cost_stage_spans (ctx, &cfg, 0, &spans);
  const MpCostDevice *dev = spans.device;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  mp_json_add_int (b, "schema_version", 1);
  mp_json_add_string (b, "model", ctx->model->name);
  mp_json_add_string (b, "cluster", ctx->cluster->name);
  mp_json_add_string (b, "device", dev->device->name);
  mp_json_add_string (b, "device_class", dev->curve->name);
  mp_json_add_string (b, "dtype", mp_dtype_name (dev->dtype));
  json_builder_set_member_name (b, "calibrated");
  json_builder_add_boolean_value (b, dev->profile != NULL);
  json_builder_set_member_name (b, "config");
  json_builder_begin_object (b);
  mp_json_add_int (b, "tp", cfg.tp);
  mp_json_add_int (b, "cp", cfg.cp);
  mp_json_add_int (b, "ep", cfg.ep);
  mp_json_add_int (b, "micro_batch_size", cfg.micro_batch_size);
  json_builder_set_member_name (b, "sequence_parallel");
  json_builder_add_boolean_value (b, cfg.sequence_parallel);
  json_builder_set_member_name (b, "flash_attention");
  json_builder_add_boolean_value (b, cfg.flash_attention);
  mp_json_add_string (b, "recompute", mp_recompute_name (cfg.recompute));
  json_builder_end_object (b);
  json_builder_set_member_name (b, "layers");
  json_builder_begin_array (b);
  g_autoptr(GArray) runs = runs_of (ctx, &cfg, &spans);
  for (guint i = 0; i < runs->len; i++)
    {
      const Run *r = &g_array_index (runs, Run, i);
      g_autofree char *name = run_name (ctx->model, r);
      json_builder_begin_object (b);
      mp_json_add_string (b, "name", name);
      mp_json_add_int (b, "first", r->first);
      mp_json_add_int (b, "count", r->count);
      add_phase (b, "forward", &r->fwd);
      add_phase (b, "backward", &r->bwd);
      mp_json_add_double (b, "params", r->params);
      mp_json_add_double (b, "activation_bytes", r->activations);
      add_ops (b, ctx, &cfg, &spans, r->first);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
