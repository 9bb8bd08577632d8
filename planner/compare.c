/* compare.c - `mpplan compare`: the best plan each framework's strategy can express, side
 * by side, with what limits it; the rules and buckets are framework.c's. */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "planner/planner.h"


void
mp_compare_row_free (MpCompareRow *row)
{
  if (row == NULL)
    return;
  mp_plan_free (row->best);
  mp_plan_free (row->smallest);
  g_free (row->limit);
  g_free (row);
}

/* The share of the step its dominant part takes. */
static double
dominant_share (const MpPlan *p)
{
  double v = p->time.t[mp_step_time_dominant (&p->time)];
  return p->step_s > 0 ? v / p->step_s : 0;
}

/* "dp_comm 41% of the step; memory 93% full", or why nothing fits. */
static char *
limit_phrase (const MpPlan *best, const MpPlan *smallest)
{
  if (best == NULL && smallest == NULL)
    return g_strdup ("no plan of this kind splits the model over this cluster");
  if (best == NULL)
    {
      g_autofree char *need = mp_units_format (smallest->memory.peak_bytes, MP_UNIT_BYTES);
      g_autofree char *has = mp_units_format (smallest->memory.capacity_bytes, MP_UNIT_BYTES);
      g_autofree char *room = mp_units_format (smallest->memory.headroom_bytes, MP_UNIT_BYTES);
      if (smallest->memory.headroom_bytes > 0)
        return g_strdup_printf ("memory: the smallest plan needs %s per GPU of %s, %s kept "
                                "free (--memory-headroom)", need, has, room);
      return g_strdup_printf ("memory: the smallest plan needs %s per GPU of %s", need, has);
    }
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "%s %.0f%% of the step", mp_plan_dominant (best),
                          100 * dominant_share (best));
  double full = best->memory.peak_bytes / best->memory.capacity_bytes;
  if (full > 0.9)
    g_string_append_printf (s, "; memory %.0f%% full", 100 * full);
  return g_string_free (s, FALSE);
}

/* One strategy's row from its search; RES may be NULL (nothing expressible). */
static MpCompareRow *
row_from (MpStrategy st, const MpSearchResult *res)
{
  MpCompareRow *row = g_new0 (MpCompareRow, 1);
  row->strategy = st;
  if (res != NULL && res->plans->len > 0)
    row->best = mp_plan_copy (g_ptr_array_index (res->plans, 0));
  if (res != NULL && res->stats.smallest != NULL)
    row->smallest = mp_plan_copy (res->stats.smallest);
  row->limit = limit_phrase (row->best, row->smallest);
  return row;
}

/* A strategy's row. When no config of the strategy splits the batch (DDP on 1024 GPUs
 * needs dp = 1024 to divide it), the batch is rounded up to a multiple of the world so
 * that the row still says what would limit the strategy, and the row says so. */
static MpCompareRow *
strategy_row (const MpCostContext *ctx, MpStrategy st, const MpSearchOptions *opts)
{
  const char *cannot = mp_framework_rejects_model (mp_strategy_framework (st),
                                                   mp_cost_context_model (ctx));
  if (cannot != NULL)
    {
      MpCompareRow *row = row_from (st, NULL);
      g_free (row->limit);
      row->limit = g_strdup (cannot);
      return row;
    }
  g_autoptr(MpSearchResult) res = mp_strategy_search (ctx, st, opts, NULL);
  if (res != NULL)
    return row_from (st, res);
  guint world = mp_cost_context_cluster (ctx)->world_size;
  guint batch = opts->global_batch ? opts->global_batch
                                   : (guint) mp_cost_context_model (ctx)->global_batch;
  MpSearchOptions o = *opts;
  o.global_batch = (batch + world - 1) / world * world;
  g_autoptr(MpSearchResult) rounded = mp_strategy_search (ctx, st, &o, NULL);
  MpCompareRow *row = row_from (st, rounded);
  g_autofree char *was = row->limit;
  row->limit = rounded ? g_strdup_printf ("the batch of %u splits no way (shown at %u): %s",
                                          batch, o.global_batch, was)
                       : g_strdup_printf ("no config of this kind splits the model over "
                                          "this cluster");
  return row;
}

GPtrArray *
mp_compare_strategies (const MpCostContext *ctx, guint global_batch, GError **error)
{
  MpSearchOptions opts = { .global_batch = global_batch, .top_k = 1 };
  /* The unconstrained search first: it fails only when the batch splits no way. */
  g_autoptr(MpSearchResult) any = mp_planner_search (ctx, &opts, error);
  if (any == NULL)
    return NULL;
  GPtrArray *rows = g_ptr_array_new_with_free_func ((GDestroyNotify) mp_compare_row_free);
  for (guint st = 0; st < MP_STRATEGY_N; st++)
    g_ptr_array_add (rows, strategy_row (ctx, (MpStrategy) st, &opts));
  g_ptr_array_add (rows, row_from (MP_STRATEGY_N, any));
  return rows;
}

/* The row's name: the strategy's, except MXNet's when its best plan places no layers
 * (pp = 1 is plain kvstore data parallelism, not layer placement). */
static const char *
row_title (const MpCompareRow *r)
{
  const MpPlan *p = r->best ? r->best : r->smallest;
  if (r->strategy == MP_STRATEGY_MXNET && p != NULL && p->cfg.pp == 1)
    return "MXNet data parallel (kvstore)";
  return mp_strategy_title (r->strategy);
}

/* "dp=8 tp=1 pp=1 zero=3" and the rest of the choices that tell strategies apart. */
static char *
config_phrase (const MpPlan *p)
{
  const MpParallelConfig *c = &p->cfg;
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "dp%u tp%u pp%u", c->dp, c->tp, c->pp);
  if (c->vpp > 1)
    g_string_append_printf (s, " vpp%u", c->vpp);
  if (c->cp > 1)
    g_string_append_printf (s, " cp%u", c->cp);
  if (c->ep > 1)
    g_string_append_printf (s, " ep%u", c->ep);
  if (mp_parallel_config_etp (c) != c->tp)                 /* MoE (moe14) */
    g_string_append_printf (s, " etp%u", mp_parallel_config_etp (c));
  if (c->dispatcher != MP_DISPATCH_ALLTOALL)
    g_string_append_printf (s, " %s", mp_dispatcher_name (c->dispatcher));
  if (c->sequence_parallel)
    g_string_append (s, " sp");
  if (c->fp8)
    g_string_append (s, " fp8");
  if (c->zero > 0)
    g_string_append_printf (s, " z%u", c->zero);
  if (c->recompute != MP_RECOMPUTE_NONE)
    g_string_append_printf (s, " rc-%s", mp_recompute_name (c->recompute));
  g_string_append_printf (s, " mb%ux%u", c->micro_batch_size, c->num_micro_batches);
  return g_string_free (s, FALSE);
}

char *
mp_compare_text (const GPtrArray *rows)
{
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "%-29s %-36s %10s %10s %10s %4s  %s\n", "strategy", "best plan",
                          "step", "tokens/s", "mem/GPU", "fits", "limited by");
  for (guint i = 0; i < rows->len; i++)
    {
      const MpCompareRow *r = g_ptr_array_index ((GPtrArray *) rows, i);
      const MpPlan *p = r->best ? r->best : r->smallest;
      if (p == NULL)
        {
          g_string_append_printf (s, "%-29s %-36s %10s %10s %10s %4s  %s\n",
                                  row_title (r), "-", "-", "-", "-", "no",
                                  r->limit);
          continue;
        }
      g_autofree char *what = config_phrase (p);
      g_autofree char *step = r->best ? mp_units_format (p->step_s, MP_UNIT_SECONDS)
                                      : g_strdup ("-");
      g_autofree char *tok = r->best ? mp_units_format (p->tokens_per_s, MP_UNIT_COUNT)
                                     : g_strdup ("-");
      g_autofree char *mem = mp_units_format (p->memory.peak_bytes, MP_UNIT_BYTES);
      g_string_append_printf (s, "%-29s %-36s %10s %10s %10s %4s  %s\n",
                              row_title (r), what, step, tok, mem,
                              r->best ? "yes" : "no", r->limit);
    }
  return g_string_free (s, FALSE);
}

JsonNode *
mp_compare_json (const GPtrArray *rows, const MpModel *model, const MpCluster *cluster,
                 guint global_batch)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  mp_plan_json_header (b, model, cluster, global_batch);
  json_builder_set_member_name (b, "strategies");
  json_builder_begin_array (b);
  for (guint i = 0; i < rows->len; i++)
    {
      const MpCompareRow *r = g_ptr_array_index ((GPtrArray *) rows, i);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "strategy");
      json_builder_add_string_value (b, mp_strategy_id (r->strategy));
      json_builder_set_member_name (b, "title");
      json_builder_add_string_value (b, row_title (r));
      if (r->strategy < MP_STRATEGY_N)
        {
          json_builder_set_member_name (b, "framework");
          json_builder_add_string_value (
              b, mp_framework_id (mp_strategy_framework (r->strategy)));
        }
      json_builder_set_member_name (b, "fits");
      json_builder_add_boolean_value (b, r->best != NULL);
      json_builder_set_member_name (b, "limited_by");
      json_builder_add_string_value (b, r->limit);
      json_builder_set_member_name (b, "plan");
      if (r->best || r->smallest)
        json_builder_add_value (b, mp_plan_to_json (r->best ? r->best : r->smallest));
      else
        json_builder_add_null_value (b);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
