/* merge.c - a search split over processes: each packs what it kept (the configs of its
 * best plans, family bests and smallest footprints, and its counts); one process unpacks
 * them all, re-evaluates the configs (cheap, and deterministic) and keeps the best, so the
 * answer is the one a single process would give.
 *
 * The packed form is an array of guint32 in host order (all processes run the same
 * binary on the same kind of machine under mpirun): a header, then one record per kept
 * plan. Nothing outside this file reads it. */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "planner/planner-private.h"
#include "common/error.h"

#include <string.h>

enum { SLOT_TOP, SLOT_SMALLEST, SLOT_FREE_BEST, SLOT_FAMILY_BEST, SLOT_FAMILY_SMALLEST };
#define MAGIC 0x6d70706cu  /* "mppl" */

static void
put (GArray *a, guint32 v)
{
  g_array_append_val (a, v);
}

static void
put_plan (GArray *a, guint slot, guint family, const MpPlan *p)
{
  if (p == NULL)
    return;
  const MpParallelConfig *c = &p->cfg;
  guint chunks = c->pp * MAX (c->vpp, 1u);
  const guint32 fields[] = { slot, family, c->dp, c->tp, c->pp, c->cp, c->vpp, c->ep,
                             c->sequence_parallel, c->zero, c->recompute, c->micro_batch_size,
                             c->num_micro_batches, c->schedule, c->flash_attention,
                             c->fp32_grads, c->fp8, c->order[0], c->order[1], c->order[2],
                             c->order[3], c->recompute_method, c->recompute_num_layers,
                             c->recompute_modules, c->etp, c->dispatcher, c->stack,
                             c->zero_shard,
                             c->no_reshard | (c->moe_a2a_overlap << 1) | (c->compile << 2)
                             | ((guint32) c->cp_comm << 3),
                             chunks };
  g_array_append_vals (a, fields, G_N_ELEMENTS (fields));
  for (guint i = 0; i < chunks; i++)
    put (a, p->chunk_layers[i]);
}

GBytes *
mp_search_result_pack (const MpSearchResult *res)
{
  g_autoptr(GArray) a = g_array_new (FALSE, FALSE, sizeof (guint32));
  const MpSearchStats *st = &res->stats;
  put (a, MAGIC);
  put (a, (guint32) (st->evaluated >> 32));
  put (a, (guint32) st->evaluated);
  put (a, (guint32) (st->feasible >> 32));
  put (a, (guint32) st->feasible);
  put (a, (guint32) (st->space >> 32));
  put (a, (guint32) st->space);
  put (a, (guint32) (st->pruned >> 32));
  put (a, (guint32) st->pruned);
  for (guint i = 0; i < res->plans->len; i++)
    put_plan (a, SLOT_TOP, 0, g_ptr_array_index (res->plans, i));
  put_plan (a, SLOT_SMALLEST, 0, st->smallest);
  put_plan (a, SLOT_FREE_BEST, 0, st->free_best);
  for (guint f = 0; f < MP_FAMILY_N; f++)
    {
      put_plan (a, SLOT_FAMILY_BEST, f, st->family_best[f]);
      put_plan (a, SLOT_FAMILY_SMALLEST, f, st->family_smallest[f]);
    }
  gsize len = a->len * sizeof (guint32);
  return g_bytes_new_take (g_array_free (g_steal_pointer (&a), FALSE), len);
}

/* Keeps PLAN (owned) in its slot of RES. */
static void
merge_plan (MpSearchResult *res, guint slot, guint family, MpPlan *plan, guint top_k)
{
  MpSearchStats *st = &res->stats;
  MpPlan **target = NULL;
  gboolean by_memory = FALSE;
  switch (slot)
    {
    case SLOT_TOP:
      pl_keep_top (res->plans, top_k, plan);
      mp_plan_free (plan);
      return;
    case SLOT_SMALLEST: target = &st->smallest; by_memory = TRUE; break;
    case SLOT_FREE_BEST: target = &st->free_best; break;
    case SLOT_FAMILY_BEST: target = &st->family_best[family]; break;
    case SLOT_FAMILY_SMALLEST: target = &st->family_smallest[family]; by_memory = TRUE; break;
    default: break;
    }
  if (by_memory)
    pl_keep_smallest (target, plan);
  else
    pl_keep_best (target, plan);
  mp_plan_free (plan);
}

/* Unpacks one process's part into RES. FALSE if it is malformed. */
static gboolean
merge_part (const MpCostContext *ctx, guint global_batch, guint top_k, GBytes *part,
            MpSearchResult *res)
{
  gsize len = 0;
  const guint32 *w = g_bytes_get_data (part, &len);
  gsize n = len / sizeof (guint32), at = 9;
  if (n < 9 || w[0] != MAGIC)
    return FALSE;
  res->stats.evaluated += ((guint64) w[1] << 32) | w[2];
  res->stats.feasible += ((guint64) w[3] << 32) | w[4];
  /* Every part enumerates the whole space (and counts it); each prunes its own share. */
  res->stats.space = MAX (res->stats.space, ((guint64) w[5] << 32) | w[6]);
  res->stats.pruned += ((guint64) w[7] << 32) | w[8];
  const gsize fixed = 30;
  while (at + fixed <= n)
    {
      const guint32 *f = w + at;
      guint chunks = f[29];
      if (chunks == 0 || f[1] >= MP_FAMILY_N || at + fixed + chunks > n)
        return FALSE;
      MpParallelConfig cfg;
      mp_parallel_config_init (&cfg);
      cfg.dp = f[2], cfg.tp = f[3], cfg.pp = f[4], cfg.cp = f[5], cfg.vpp = f[6];
      cfg.ep = f[7], cfg.sequence_parallel = f[8], cfg.zero = f[9];
      cfg.recompute = (MpRecompute) f[10], cfg.micro_batch_size = f[11];
      cfg.num_micro_batches = f[12], cfg.schedule = (MpSchedule) f[13];
      cfg.flash_attention = f[14], cfg.fp32_grads = f[15], cfg.fp8 = f[16];
      for (int d = 0; d < MP_DIM_N; d++)
        cfg.order[d] = (MpParallelDim) f[17 + d];
      cfg.recompute_method = (MpRecomputeMethod) f[21], cfg.recompute_num_layers = f[22];
      cfg.recompute_modules = f[23];
      cfg.etp = f[24], cfg.dispatcher = (MpDispatcher) f[25];     /* MoE (moe14) */
      cfg.stack = (MpStack) f[26];          /* checked by mp_parallel_config_check */
      cfg.zero_shard = f[27], cfg.no_reshard = (f[28] & 1) != 0;     /* HSDP (fsdp17) */
      cfg.moe_a2a_overlap = (f[28] & 2) != 0;
      cfg.compile = (f[28] & 4) != 0;
      cfg.cp_comm = (MpCpComm) (f[28] >> 3);      /* checked by mp_parallel_config_check */
      cfg.chunk_layers = w + at + fixed;
      if (cfg.pp * MAX (cfg.vpp, 1u) != chunks
          || !mp_parallel_config_check (&cfg, mp_cost_context_model (ctx),
                                        mp_cost_context_cluster (ctx), NULL))
        return FALSE;
      MpPlan *plan = g_new0 (MpPlan, 1);
      pl_plan_init (plan, &cfg, cfg.chunk_layers, global_batch);
      pl_plan_memory (ctx, plan);
      if (plan->fits)
        pl_plan_time (ctx, plan);
      merge_plan (res, f[0], f[1], plan, top_k);
      at += fixed + chunks;
    }
  return at == n;
}

MpSearchResult *
mp_search_result_merge (const MpCostContext *ctx, const MpSearchOptions *opts,
                        GPtrArray *parts, double seconds, GError **error)
{
  const MpModel *model = mp_cost_context_model (ctx);
  guint global_batch = opts->global_batch ? opts->global_batch : (guint) model->global_batch;
  MpSearchResult *res = g_new0 (MpSearchResult, 1);
  res->plans = g_ptr_array_new_with_free_func ((GDestroyNotify) mp_plan_free);
  for (guint i = 0; i < parts->len; i++)
    if (!merge_part (ctx, global_batch, MAX (opts->top_k, 1u), g_ptr_array_index (parts, i),
                     res))
      {
        mp_search_result_free (res);
        g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "search part %u is malformed", i);
        return NULL;
      }
  pl_settle_smallest (res);
  res->stats.seconds = seconds;
  return res;
}
