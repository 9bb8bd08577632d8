/* explain.c - plans in words: the ranked table, why the winner wins, and what would make
 * a plan fit when none does. Human units; the numbers are the closed form's. */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "planner/planner.h"

#include <math.h>

/* "dp64 tp4 pp4 vpp8 sp zero2 mbs2x12 interleaved" - a plan in one short phrase. */
static char *
plan_phrase (const MpPlan *p)
{
  const MpParallelConfig *c = &p->cfg;
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "dp=%u tp=%u pp=%u", c->dp, c->tp, c->pp);
  if (c->vpp > 1)
    g_string_append_printf (s, " vpp=%u", c->vpp);
  if (c->cp > 1)
    g_string_append_printf (s, " cp=%u", c->cp);
  if (c->ep > 1)
    g_string_append_printf (s, " ep=%u", c->ep);
  if (mp_parallel_config_etp (c) != c->tp)                 /* MoE (moe14) */
    g_string_append_printf (s, " etp=%u", mp_parallel_config_etp (c));
  if (c->dispatcher != MP_DISPATCH_ALLTOALL)
    g_string_append_printf (s, " dispatcher=%s", mp_dispatcher_name (c->dispatcher));
  if (c->sequence_parallel)
    g_string_append (s, " sp");
  if (c->fp8)
    g_string_append (s, " fp8");
  if (c->stack != MP_STACK_MEGATRON)
    g_string_append_printf (s, " stack=%s", mp_stack_name (c->stack));
  if (c->zero)
    g_string_append_printf (s, " zero=%u", c->zero);
  if (c->recompute != MP_RECOMPUTE_NONE)
    g_string_append_printf (s, " recompute=%s", mp_recompute_name (c->recompute));
  g_string_append_printf (s, " micro-batch %u x %u", c->micro_batch_size, c->num_micro_batches);
  if (c->pp > 1)
    g_string_append_printf (s, " %s", mp_schedule_name (c->schedule));
  return g_string_free (s, FALSE);
}

static void
append_units (GString *s, const char *fmt, double v, MpUnitKind kind)
{
  g_autofree char *u = mp_units_format (v, kind);
  g_string_append_printf (s, fmt, u);
}

char *
mp_plan_table_text (const GPtrArray *plans)
{
  GString *s = g_string_new (NULL);
  /* Plans refined by the simulator are ranked by it: show its step beside the closed form's. */
  gboolean simulated = FALSE;
  for (guint i = 0; i < plans->len; i++)
    simulated |= ((const MpPlan *) g_ptr_array_index ((GPtrArray *) plans, i))->simulated_step_s > 0;
  g_string_append_printf (s, "%4s %5s %3s %3s %3s %3s %3s %2s %4s %-9s %4s %5s %-11s %9s",
                          "rank", "dp", "tp", "pp", "vpp", "cp", "ep", "sp", "zero", "recompute",
                          "mbs", "m", "schedule", "step");
  if (simulated)
    g_string_append_printf (s, " %9s", "simulated");
  g_string_append_printf (s, " %11s %9s %5s %10s  %s\n", "tokens/s", "TFLOP/s", "MFU", "mem/GPU",
                          "dominant");
  for (guint i = 0; i < plans->len; i++)
    {
      const MpPlan *p = g_ptr_array_index ((GPtrArray *) plans, i);
      const MpParallelConfig *c = &p->cfg;
      g_autofree char *step = mp_units_format (p->step_s, MP_UNIT_SECONDS);
      g_autofree char *tok = mp_units_format (p->tokens_per_s, MP_UNIT_COUNT);
      g_autofree char *mem = mp_units_format (p->memory.peak_bytes, MP_UNIT_BYTES);
      g_string_append_printf (s, "%4u %5u %3u %3u %3u %3u %3u %2s %4u %-9s %4u %5u %-11s %9s",
                              i + 1, c->dp, c->tp, c->pp, c->vpp, c->cp, c->ep,
                              c->sequence_parallel ? "y" : "-",
                              c->zero, mp_recompute_name (c->recompute), c->micro_batch_size,
                              c->num_micro_batches,
                              c->schedule == MP_SCHEDULE_INTERLEAVED ? "interleaved"
                                                                      : mp_schedule_name (c->schedule),
                              step);
      if (simulated)
        {
          g_autofree char *sim = p->simulated_step_s > 0
                                     ? mp_units_format (p->simulated_step_s, MP_UNIT_SECONDS)
                                     : g_strdup ("-");
          g_string_append_printf (s, " %9s", sim);
        }
      g_string_append_printf (s, " %11s %9.1f %4.1f%% %10s  %s\n", tok, p->tflops_per_gpu / 1e12,
                              100 * p->mfu, mem, mp_plan_dominant (p));
    }
  return g_string_free (s, FALSE);
}

/* The step's parts with their shares: "compute 12.9 s (87%), tp_comm 599 ms (4%), ...". */
static void
append_breakdown (GString *s, const MpPlan *p)
{
  for (int i = 0; i < MP_PHASE_N; i++)
    {
      double v = p->time.t[i];
      g_autofree char *u = mp_units_format (v, MP_UNIT_SECONDS);
      g_string_append_printf (s, "%s%s %s (%.0f%%)", i ? ", " : "", mp_phase_name (i), u,
                              100 * v / p->step_s);
    }
}

static void
append_memory (GString *s, const MpPlan *p)
{
  const MpPlanMemory *m = &p->memory;
  append_units (s, "%s per GPU", m->peak_bytes, MP_UNIT_BYTES);
  append_units (s, " of %s", m->capacity_bytes, MP_UNIT_BYTES);
  g_string_append_printf (s, " on stage %u: ", m->binding_stage);
  for (int k = 0; k < MP_MEM_N; k++)
    {
      g_autofree char *u = mp_units_format (m->bytes[k], MP_UNIT_BYTES);
      g_string_append_printf (s, "%s%s %s", k ? ", " : "", mp_mem_kind_name (k), u);
    }
}

/* What holds a family's best plan back against the winner, in one clause. */
static void
append_holdback (GString *s, const MpPlan *best, const MpPlan *smallest, const MpPlan *winner)
{
  if (best == NULL)
    {
      if (smallest == NULL)
        {
          g_string_append (s, "no valid plan of this kind for this model and cluster");
          return;
        }
      append_units (s, "does not fit: needs %s per GPU", smallest->memory.peak_bytes,
                    MP_UNIT_BYTES);
      append_units (s, ", has %s", smallest->memory.capacity_bytes, MP_UNIT_BYTES);
      g_autofree char *what = plan_phrase (smallest);
      g_string_append_printf (s, " (smallest: %s)", what);
      return;
    }
  g_autofree char *what = plan_phrase (best);
  g_autofree char *step = mp_units_format (best->step_s, MP_UNIT_SECONDS);
  MpPhase dominant = mp_step_time_dominant (&best->time);
  const char *dom = mp_phase_name (dominant);
  const double *t = best->time.t, *w = winner->time.t;
  double share = t[dominant];
  g_string_append_printf (s, "%s: %s, %.2fx the winner's step, %.1f%% MFU", what, step,
                          best->step_s / winner->step_s, 100 * best->mfu);
  if (best->step_s < winner->step_s)
    {
      /* Only with pins: a family's best can beat the pinned winner. */
      g_string_append (s, "; faster than the pinned plan");
      return;
    }
  if (best != winner && dominant != MP_PHASE_COMPUTE)
    g_string_append_printf (s, "; %s is %.0f%% of its step", dom, 100 * share / best->step_s);
  else if (best != winner)
    {
      /* Compute-bound but slower: show where the extra time goes. */
      double extra = best->step_s - winner->step_s;
      double comm = 0;
      for (int p = MP_PHASE_TP; p <= MP_PHASE_BUBBLE; p++)
        comm += t[p] - w[p];
      g_string_append_printf (s, "; %.0f%% of the extra time is communication and bubble",
                              extra > 0 ? 100 * CLAMP (comm / extra, 0.0, 1.0) : 0.0);
    }
  if (best->cfg.tp > 1 && t[MP_PHASE_TP] > 0.2 * best->step_s)
    g_string_append_printf (s, " (tp=%u: TP communication is %.0f%% of the step)", best->cfg.tp,
                            100 * t[MP_PHASE_TP] / best->step_s);
}

char *
mp_plan_explain_text (const MpSearchResult *result, const MpCostContext *ctx, gboolean full)
{
  GString *s = g_string_new (NULL);
  if (result->plans->len == 0)
    return g_string_free (s, FALSE);
  const MpPlan *w = g_ptr_array_index (result->plans, 0);
  g_autofree char *what = plan_phrase (w);
  g_autofree char *step = mp_units_format (w->step_s, MP_UNIT_SECONDS);
  g_autofree char *tok = mp_units_format (w->tokens_per_s, MP_UNIT_COUNT);
  g_string_append_printf (s, "Recommended: %s (%s)\n", what, mp_plan_family_name (w->family));
  g_string_append_printf (s, "  step %s, %s tokens/s, %.1f TFLOP/s per GPU, MFU %.1f%% "
                             "(model FLOPs, dense peak), HFU %.1f%%\n", step, tok,
                          w->tflops_per_gpu / 1e12, 100 * w->mfu, 100 * w->hfu);
  g_string_append (s, "  time: ");
  append_breakdown (s, w);
  g_string_append (s, "\n  memory: ");
  append_memory (s, w);
  g_string_append (s, "\n");
  if (result->plans->len > 1)
    {
      const MpPlan *r = g_ptr_array_index (result->plans, 1);
      g_autofree char *rw = plan_phrase (r);
      g_string_append_printf (s, "  runner-up: %s, %.2f%% slower\n", rw,
                              100 * (r->step_s / w->step_s - 1));
    }
  g_string_append (s, full ? "Best plan of each family:\n" : "Other families:\n");
  for (guint f = 0; f < MP_FAMILY_N; f++)
    {
      const MpPlan *best = result->stats.family_best[f];
      if (best != NULL && best->family == w->family && !full)
        continue;
      if (!full && best == NULL && result->stats.family_smallest[f] == NULL)
        continue;
      g_string_append_printf (s, "  %-48s ", mp_plan_family_name ((MpPlanFamily) f));
      if (best != NULL && mp_plan_compare (best, w) == 0)
        g_string_append (s, "the recommended plan");
      else
        append_holdback (s, best, result->stats.family_smallest[f], w);
      g_string_append (s, "\n");
    }
  const MpPlan *fb = result->stats.free_best;
  if (fb != NULL && mp_plan_compare (fb, w) < 0)
    {
      g_autofree char *fw = plan_phrase (fb);
      g_string_append_printf (s, "Without the pins: %s would be %.1f%% faster.\n", fw,
                              100 * (1 - fb->step_s / w->step_s));
    }
  return g_string_free (s, FALSE);
}

char *
mp_plan_infeasible_text (const MpSearchResult *result, const MpCostContext *ctx)
{
  GString *s = g_string_new (NULL);
  const MpPlan *small = result->stats.smallest;
  const MpCluster *cluster = mp_cost_context_cluster (ctx);
  if (small == NULL)
    {
      g_string_append (s, "no valid plan at all for this model on this cluster");
      return g_string_free (s, FALSE);
    }
  g_autofree char *what = plan_phrase (small);
  double over = small->memory.peak_bytes / small->memory.capacity_bytes;
  append_units (s, "no plan fits in device memory: the smallest footprint is %s per GPU",
                small->memory.peak_bytes, MP_UNIT_BYTES);
  append_units (s, ", %s available", small->memory.capacity_bytes, MP_UNIT_BYTES);
  g_string_append_printf (s, " (%.1fx over), with %s.\n", over, what);
  g_string_append (s, "To make a plan fit:");
  /* Sharded state scales down with more devices; activations with smaller micro-batches
   * and recompute. Say which of those the smallest plan has not used yet. */
  const double *bytes = small->memory.bytes;
  double state = bytes[MP_MEM_WEIGHTS] + bytes[MP_MEM_GRADIENTS] + bytes[MP_MEM_OPTIMIZER];
  /* ZeRO shards over data-parallel replicas: no help on a single device. */
  if (small->cfg.zero < 3 && cluster->world_size > 1)
    g_string_append (s, " shard with ZeRO-3 / FSDP;");
  if (small->cfg.recompute != MP_RECOMPUTE_FULL)
    g_string_append (s, " recompute (full);");
  if (small->cfg.micro_batch_size > 1)
    g_string_append (s, " a smaller micro-batch;");
  double free_bytes = small->memory.capacity_bytes - bytes[MP_MEM_OTHER]
                      - bytes[MP_MEM_ACTIVATIONS];
  double factor = free_bytes > 0 ? state / free_bytes : INFINITY;
  g_autofree char *state_h = mp_units_format (state, MP_UNIT_BYTES);
  if (isfinite (factor) && factor > 1)
    g_string_append_printf (s, " about %.0fx the devices (%u or more), since weights, "
                               "gradients and optimizer state (%s here) shrink with them",
                            ceil (factor), (guint) ceil (factor * cluster->world_size),
                            state_h);
  else
    g_string_append (s, " devices with more memory");
  g_string_append (s, ".");
  return g_string_free (s, FALSE);
}
