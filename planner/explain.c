/* explain.c - plans in words: the ranked table, why the winner wins, and what would make
 * a plan fit when none does. Human units; the numbers are the closed form's. */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "planner/planner.h"

#include <math.h>
#include <string.h>

/* The choices the table has no column for: MoE's expert settings, FP8, the stack and the
 * extent of recompute (" etp=1 fp8 stack=torchtitan (block 4)"); with ALL, the rest of
 * what a phrase says beyond the sizes too (sp, zero, recompute) in phrase order. */
static void
append_uncolumned (GString *s, const MpParallelConfig *c, gboolean all)
{
  if (mp_parallel_config_etp (c) != c->tp)                 /* MoE (moe14) */
    g_string_append_printf (s, " etp=%u", mp_parallel_config_etp (c));
  if (c->dispatcher != MP_DISPATCH_ALLTOALL)
    g_string_append_printf (s, " dispatcher=%s", mp_dispatcher_name (c->dispatcher));
  if (c->sequence_parallel && all)
    g_string_append (s, " sp");
  if (c->fp8)
    g_string_append (s, " fp8");
  if (c->stack != MP_STACK_MEGATRON)
    g_string_append_printf (s, " stack=%s", mp_stack_name (c->stack));
  if (c->zero && all)
    g_string_append_printf (s, " zero=%u", c->zero);
  if (mp_parallel_config_zero_replicas (c) > 1)       /* HSDP (fsdp17): not a column */
    g_string_append_printf (s, " zero_shard=%u", mp_parallel_config_zero_shard (c));
  if (c->no_reshard)
    g_string_append (s, " reshard_after_forward=false");
  if (c->moe_a2a_overlap)
    g_string_append (s, " moe_a2a_overlap");
  if (c->compile)
    g_string_append (s, " compile");
  if (c->cp > 1 && c->cp_comm != MP_CP_COMM_STACK)
    g_string_append_printf (s, " cp_comm_type=%s", mp_cp_comm_name (c->cp_comm));
  if (c->recompute != MP_RECOMPUTE_NONE && all)
    g_string_append_printf (s, " recompute=%s", mp_recompute_name (c->recompute));
  if (c->recompute == MP_RECOMPUTE_FULL && c->recompute_num_layers > 0)
    g_string_append_printf (s, " (%s %u)", mp_recompute_method_name (c->recompute_method),
                            c->recompute_num_layers);
  if (c->recompute == MP_RECOMPUTE_SELECTIVE && c->recompute_modules != 0)
    {
      g_autofree char *mods = mp_recompute_modules_name (c->recompute_modules);
      g_string_append_printf (s, " (%s)", mods);
    }
}

/* "dp=64 tp=4 pp=4 vpp=8 sp zero=2 micro-batch 2 x 12 interleaved" - a plan in one
 * phrase. */
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
  append_uncolumned (s, c, TRUE);
  g_string_append_printf (s, " micro-batch %u x %u", c->micro_batch_size, c->num_micro_batches);
  if (c->pp > 1)
    g_string_append_printf (s, " %s", mp_schedule_name (c->schedule));
  /* the rank order tells apart plans that are otherwise the same (which links each
   * group crosses) */
  g_autofree char *order = mp_plan_order_text (c);
  if (order)
    g_string_append_printf (s, " order=%s", order);
  return g_string_free (s, FALSE);
}

/* What plan_phrase leaves out and can still tell two plans apart: the layer split, the
 * attention kernel, the gradients' precision and bucket, a custom placement. */
static void
append_details (GString *s, const MpPlan *p)
{
  const MpParallelConfig *c = &p->cfg;
  guint chunks = c->pp * MAX (c->vpp, 1u);
  if (c->chunk_layers != NULL && chunks > 1)
    for (guint i = 0; i < chunks; i++)
      g_string_append_printf (s, "%s%u", i ? "/" : " split=", c->chunk_layers[i]);
  if (!c->flash_attention)
    g_string_append (s, " no-flash-attention");
  if (c->fp32_grads)
    g_string_append (s, " fp32-grads");
  if (c->bucket_bytes > 0)
    {
      g_autofree char *b = mp_units_format (c->bucket_bytes, MP_UNIT_BYTES);
      g_string_append_printf (s, " bucket=%s", b);
    }
  if (c->placement != NULL)
    g_string_append (s, " placement");
}

char **
mp_plan_phrases (const MpPlan *const *plans, guint n)
{
  char **out = g_new0 (char *, n + 1);
  for (guint i = 0; i < n; i++)
    out[i] = plan_phrase (plans[i]);
  /* Details only where the short phrase is shared, so that most labels stay short. */
  g_autofree gboolean *shared = g_new0 (gboolean, n);
  for (guint i = 0; i < n; i++)
    for (guint j = i + 1; j < n; j++)
      if (strcmp (out[i], out[j]) == 0)
        shared[i] = shared[j] = TRUE;
  for (guint i = 0; i < n; i++)
    if (shared[i])
      {
        GString *s = g_string_new (out[i]);
        append_details (s, plans[i]);
        g_free (out[i]);
        out[i] = g_string_free (s, FALSE);
      }
  return out;
}

/* "run by Megatron-LM, torchtitan", or that no framework runs P, after SEP. */
static void
append_runners (GString *s, const char *sep, const MpPlan *p, const MpModel *model)
{
  g_autofree char *who = mp_framework_runners_text (mp_framework_runners (model, &p->cfg),
                                                    &p->cfg);
  g_string_append_printf (s, "%s%s%s", sep, who ? "run by " : "no framework's rules express it",
                          who ? who : "");
}

static void
append_units (GString *s, const char *fmt, double v, MpUnitKind kind)
{
  g_autofree char *u = mp_units_format (v, kind);
  g_string_append_printf (s, fmt, u);
}

/* Row I's choices beyond the table's columns: those it has no column for, and, when
 * KEYS (each row's columns) show another row the same, the details that tell them apart. */
static char *
row_extras (const GPtrArray *plans, char *const *keys, guint i)
{
  const MpPlan *p = g_ptr_array_index ((GPtrArray *) plans, i);
  GString *s = g_string_new (NULL);
  append_uncolumned (s, &p->cfg, FALSE);
  for (guint j = 0; j < plans->len; j++)
    if (j != i && strcmp (keys[i], keys[j]) == 0)
      {
        append_details (s, p);
        break;
      }
  return g_string_free (s, FALSE);
}

char *
mp_plan_table_text (const GPtrArray *plans)
{
  GString *s = g_string_new (NULL);
  /* Plans refined by the simulator are ranked by it: show its step beside the closed form's. */
  gboolean simulated = FALSE, ordered = FALSE, extra = FALSE;
  g_auto(GStrv) keys = g_new0 (char *, plans->len + 1);
  g_auto(GStrv) extras = g_new0 (char *, plans->len + 1);
  for (guint i = 0; i < plans->len; i++)
    {
      const MpPlan *p = g_ptr_array_index ((GPtrArray *) plans, i);
      const MpParallelConfig *c = &p->cfg;
      g_autofree char *order = mp_plan_order_text (c);
      simulated |= p->simulated_step_s > 0;
      ordered |= order != NULL;
      keys[i] = g_strdup_printf ("%u %u %u %u %u %u %d %u %d %u %u %d %s", c->dp, c->tp, c->pp,
                                 c->vpp, c->cp, c->ep, c->sequence_parallel, c->zero,
                                 c->recompute, c->micro_batch_size, c->num_micro_batches,
                                 c->schedule, order ? order : "");
    }
  for (guint i = 0; i < plans->len; i++)
    {
      extras[i] = row_extras (plans, keys, i);
      extra |= extras[i][0] != '\0';
    }
  g_string_append_printf (s, "%4s %5s %3s %3s %3s %3s %3s %2s %4s %-9s %4s %5s %-11s %9s",
                          "rank", "dp", "tp", "pp", "vpp", "cp", "ep", "sp", "zero", "recompute",
                          "mbs", "m", "schedule", "step");
  if (simulated)
    g_string_append_printf (s, " %9s", "simulated");
  g_string_append_printf (s, " %11s %9s %5s %10s  %s", "tokens/s", "TFLOP/s", "MFU", "mem/GPU",
                          "dominant");
  /* The rank order only when some plan's is not Megatron's default (tp, cp, dp, pp). */
  if (ordered)
    g_string_append (s, extra ? " order      " : " order");
  g_string_append (s, extra ? " other\n" : "\n");
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
      g_string_append_printf (s, " %11s %9.1f %4.1f%% %10s  ", tok, p->tflops_per_gpu / 1e12,
                              100 * p->mfu, mem);
      g_autofree char *order = mp_plan_order_text (c);
      if (ordered || extra)
        g_string_append_printf (s, "%-8s", mp_plan_dominant (p));
      else
        g_string_append (s, mp_plan_dominant (p));
      if (ordered)
        g_string_append_printf (s, extra ? " %-11s" : " %s", order ? order : "tp,cp,dp,pp");
      if (extra)
        g_string_append_printf (s, "%s", extras[i]);
      while (s->len > 0 && s->str[s->len - 1] == ' ')
        g_string_truncate (s, s->len - 1);     /* a row without extras ends with its last field */
      g_string_append (s, "\n");
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
  /* the runtime's part of "other", and what is left free on purpose */
  g_string_append (s, " (runtime:");
  for (int k = 0, n = 0; k < MP_RESERVE_N; k++)
    if (m->reserve[k] > 0)
      {
        g_autofree char *u = mp_units_format (m->reserve[k], MP_UNIT_BYTES);
        g_string_append_printf (s, "%s %s %s", n++ ? "," : "", mp_reserve_kind_name (k), u);
      }
  g_string_append (s, ")");
  if (m->headroom_bytes > 0)
    append_units (s, "; headroom %s left free", m->headroom_bytes, MP_UNIT_BYTES);
}

/* What holds a family's best plan back against the winner, in one clause. Family bests
 * are closed-form figures, so they are set against the winner's closed form (like against
 * like). One can be the faster there only with pins (PINNED: family bests ignore them) or
 * when the simulation re-ranked the closed form's best plans (all of those faster than
 * the winner were simulated and found slower). */
static void
append_holdback (GString *s, const MpPlan *best, const MpPlan *smallest, const MpPlan *winner,
                 const MpModel *model, gboolean pinned)
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
      if (smallest->memory.headroom_bytes > 0)
        append_units (s, " with %s kept free (--memory-headroom)",
                      smallest->memory.headroom_bytes, MP_UNIT_BYTES);
      g_autofree char *what = plan_phrase (smallest);
      g_string_append_printf (s, " (smallest: %s", what);
      append_runners (s, ", ", smallest, model);
      g_string_append (s, ")");
      return;
    }
  g_autofree char *what = plan_phrase (best);
  g_string_append (s, what);
  append_runners (s, " (", best, model);
  g_string_append (s, ")");
  g_autofree char *step = mp_units_format (best->step_s, MP_UNIT_SECONDS);
  MpPhase dominant = mp_step_time_dominant (&best->time);
  const char *dom = mp_phase_name (dominant);
  const double *t = best->time.t, *w = winner->time.t;
  double share = t[dominant];
  g_string_append_printf (s, ": %s, %.2fx the winner's step, %.1f%% MFU", step,
                          best->step_s / winner->step_s, 100 * best->mfu);
  if (best->step_s < winner->step_s)
    {
      g_string_append (s, pinned ? "; faster than the pinned plan"
                                 : "; faster in the closed form, slower simulated");
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
  const MpModel *model = mp_cost_context_model (ctx);
  g_string_append_printf (s, "Recommended: %s (%s", what, mp_plan_family_name (w->family));
  append_runners (s, "; ", w, model);
  g_string_append (s, ")\n");
  g_string_append_printf (s, "  step %s, %s tokens/s, %.1f TFLOP/s per GPU, MFU %.1f%% "
                             "(model FLOPs, %s dense peak), HFU %.1f%%", step, tok,
                          w->tflops_per_gpu / 1e12, 100 * w->mfu,
                          mp_dtype_name (mp_cost_device (ctx, 0)->dtype), 100 * w->hfu);
  if (w->mfu_fp8 > 0)
    g_string_append_printf (s, "; %.1f%% of the fp8 peak", 100 * w->mfu_fp8);
  g_string_append_c (s, '\n');
  g_string_append (s, "  time: ");
  append_breakdown (s, w);
  g_string_append (s, "\n  memory: ");
  append_memory (s, w);
  g_string_append (s, "\n");
  if (result->plans->len > 1)
    {
      /* Simulated against simulated when the simulation ranked them, else closed forms. */
      const MpPlan *r = g_ptr_array_index (result->plans, 1);
      gboolean sim = r->simulated_step_s > 0 && w->simulated_step_s > 0;
      double rs = sim ? r->simulated_step_s : r->step_s, ws = sim ? w->simulated_step_s : w->step_s;
      const MpPlan *pair[] = { w, r };
      g_auto (GStrv) phrases = mp_plan_phrases (pair, 2);
      const char *ww = phrases[0], *rw = phrases[1];
      g_string_append_printf (s, "  runner-up: %s, %.2f%% slower%s", rw, 100 * (rs / ws - 1),
                              sim ? " (simulated)" : "");
      if (strcmp (ww, what) != 0)
        g_string_append_printf (s, " (the winner: %s)", ww + strlen (what) + 1);
      g_string_append (s, "\n");
    }
  gboolean pinned = result->stats.free_best != NULL;
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
        append_holdback (s, best, result->stats.family_smallest[f], w, model, pinned);
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

/* Device memory multiples tried for a pinned plan that does not fit, smallest first: the
 * first that holds one gives the plan that comes closest, and the last covers what the
 * search's other choices leave (a pinned ZeRO-0 over many replicas). */
static const double roomy_factors[] = { 1.25, 1.5, 2, 4, 16 };

char *
mp_plan_pinned_infeasible_text (const MpSearchResult *result, const MpCostContext *ctx,
                                const MpSearchOptions *opts, const char *pins_text)
{
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "no plan honouring --fix %s fits", pins_text);
  for (guint i = 0; i < G_N_ELEMENTS (roomy_factors); i++)
    {
      double f = roomy_factors[i];
      g_autoptr(MpSearchResult) roomy = mp_planner_search_roomy (ctx, opts, f, NULL);
      if (roomy == NULL || roomy->plans->len == 0)
        continue;
      const MpPlan *p = g_ptr_array_index (roomy->plans, 0);
      MpPlan real = *p;
      real.memory.capacity_bytes /= f;
      g_autofree char *what = plan_phrase (p);
      double usable = real.memory.capacity_bytes - real.memory.headroom_bytes;
      g_string_append_printf (s, ": the best of them on devices with %gx the memory, %s, "
                                 "needs ", f, what);
      append_memory (s, &real);
      if (usable > 0)
        g_string_append_printf (s, " (%.2fx over)", p->memory.peak_bytes / usable);
      break;
    }
  const MpPlan *free_best = result->stats.free_best;
  if (free_best != NULL)
    {
      g_autofree char *what = plan_phrase (free_best);
      g_string_append_printf (s, ".\nWithout the pins the best plan that fits is %s: step ",
                              what);
      append_units (s, "%s", free_best->step_s, MP_UNIT_SECONDS);
    }
  g_string_append (s, ".");
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
  double usable = small->memory.capacity_bytes - small->memory.headroom_bytes;
  double over = usable > 0 ? small->memory.peak_bytes / usable : INFINITY;
  append_units (s, "no plan fits in device memory: the smallest footprint is %s per GPU",
                small->memory.peak_bytes, MP_UNIT_BYTES);
  append_units (s, ", %s available", small->memory.capacity_bytes, MP_UNIT_BYTES);
  if (small->memory.headroom_bytes > 0)
    append_units (s, " less %s kept free (--memory-headroom)", small->memory.headroom_bytes,
                  MP_UNIT_BYTES);
  g_string_append_printf (s, " (%.1fx over), with %s.\n", over, what);
  g_string_append (s, "To make a plan fit:");
  /* Sharded state scales down with more devices; activations with smaller micro-batches
   * and recompute. Say which of those the smallest plan has not used yet. */
  const double *bytes = small->memory.bytes;
  double state = bytes[MP_MEM_WEIGHTS] + bytes[MP_MEM_GRADIENTS] + bytes[MP_MEM_OPTIMIZER];
  /* ZeRO shards over data-parallel replicas: no help without them. */
  if (small->cfg.zero < 3 && small->cfg.dp * small->cfg.cp > 1)
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
