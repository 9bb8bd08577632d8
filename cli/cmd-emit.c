/* cmd-emit.c - `mpplan plan --emit FRAMEWORK [-o DIR]`: the launch files of the chosen
 * plan for one framework. When the framework cannot run the plan (Horovod and tp = 8), it
 * says why on stderr, searches again within what the framework can run, and writes the
 * best of those, within the --fix pins first: the user asked for launch files and gets
 * the best ones that exist (exit 0); only when nothing the framework can run fits, or it
 * cannot train the model at all, is the exit status 3. */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "planner/planner.h"

#include <stdio.h>
#include <string.h>

/* "dp=64 tp=1 pp=1 zero=0 (step 1.2 s)". */
static char *
short_plan (const MpPlan *p)
{
  const MpParallelConfig *c = &p->cfg;
  g_autofree char *step = mp_units_format (p->step_s, MP_UNIT_SECONDS);
  /* HSDP (fsdp17): the shard groups and ZeRO-3's kept weights, when set */
  g_autofree char *shard = mp_parallel_config_zero_replicas (c) > 1
                           ? g_strdup_printf (" zero_shard=%u", mp_parallel_config_zero_shard (c))
                           : g_strdup ("");
  g_autofree char *cp_comm = c->cp > 1 && c->cp_comm != MP_CP_COMM_STACK
                             ? g_strdup_printf (" cp_comm_type=%s", mp_cp_comm_name (c->cp_comm))
                             : g_strdup ("");
  return g_strdup_printf ("dp=%u tp=%u pp=%u vpp=%u cp=%u ep=%u zero=%u%s%s%s%s%s recompute=%s "
                          "micro-batch %u x %u schedule %s (step %s)", c->dp, c->tp, c->pp,
                          c->vpp, c->cp, c->ep, c->zero, shard, cp_comm,
                          c->no_reshard ? " reshard_after_forward=false" : "",
                          c->moe_a2a_overlap ? " moe_a2a_overlap=true" : "",
                          c->compile ? " compile=true" : "",
                          mp_recompute_name (c->recompute), c->micro_batch_size,
                          c->num_micro_batches, mp_plan_schedule_name (c->schedule), step);
}

/* The framework whose launch files run a plan of STACK (`--emit stack`): FALSE for a
 * stack mpplan writes none for (NeMo AutoModel's and llm-foundry's recipes). */
static gboolean
stack_framework (MpStack stack, MpFramework *out)
{
  switch (stack)
    {
    case MP_STACK_MEGATRON: *out = MP_FRAMEWORK_MEGATRON; return TRUE;
    case MP_STACK_TORCHTITAN: *out = MP_FRAMEWORK_TORCHTITAN; return TRUE;
    case MP_STACK_DEEPSPEED: *out = MP_FRAMEWORK_DEEPSPEED; return TRUE;
    case MP_STACK_PYTORCH: *out = MP_FRAMEWORK_TORCHRUN; return TRUE;
    case MP_STACK_NEMO_AUTOMODEL:
    case MP_STACK_LLM_FOUNDRY:
    case MP_STACK_N:
    default: return FALSE;
    }
}

gboolean
mp_cli_framework_check (const char *id, GError **error)
{
  MpFramework fw;
  if (mp_framework_from_id (id, &fw) || strcmp (id, "stack") == 0)
    return TRUE;
  GString *list = g_string_new (NULL);
  for (guint i = 0; i < MP_FRAMEWORK_N; i++)
    g_string_append_printf (list, "%s%s", i ? ", " : "", mp_framework_id ((MpFramework) i));
  g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "--emit: unknown framework '%s' (one of: %s; "
               "or stack, the plan's stack's)", id, list->str);
  g_string_free (list, TRUE);
  return FALSE;
}

/* The best plan FW can run, within the --fix pins when one honours them (the pins are
 * the user's; only when FW can run none of them are they dropped, and the message says
 * so). NULL when FW can run no plan at all (the reason in *ERROR); *PINNED says whether
 * the pins were kept. */
static MpSearchResult *
search_framework (const MpCostContext *ctx, MpFramework fw, const MpSearchOptions *opts,
                  gboolean *pinned, GError **error)
{
  MpSearchOptions o = *opts;
  o.progress = NULL;
  o.top_k = 1;
  *pinned = o.pins != NULL;
  if (o.pins != NULL)
    {
      MpSearchResult *res = mp_framework_search (ctx, fw, &o, NULL);
      if (res != NULL && res->plans->len > 0)
        return res;
      if (res != NULL)
        mp_search_result_free (res);
      o.pins = NULL;
      *pinned = FALSE;
    }
  return mp_framework_search (ctx, fw, &o, error);
}

/* "mpplan: plan --emit horovod: " - every message names the command and framework. */
#define EMIT_SUBJECT "mpplan: plan --emit %s: "

int
mp_cli_emit (const char *id, const char *dir, const MpPlan *best, const MpCostContext *ctx,
             const MpSearchOptions *opts)
{
  GError *error = NULL;
  MpFramework fw;
  if (strcmp (id, "stack") == 0 && !stack_framework (best->cfg.stack, &fw))
    {
      fprintf (stderr, "mpplan: --emit stack: mpplan writes no launch files for the %s "
               "stack; name a framework\n", mp_stack_name (best->cfg.stack));
      return 2;
    }
  if (strcmp (id, "stack") != 0 && !mp_framework_from_id (id, &fw))
    return mp_cli_framework_check (id, &error) ? 2 : mp_cli_fail (error);
  const char *fw_id = mp_framework_id (fw), *title = mp_framework_title (fw);
  const char *cannot = mp_framework_rejects_model (fw, mp_cost_context_model (ctx));
  if (cannot != NULL)
    {
      fprintf (stderr, EMIT_SUBJECT "%s: no plan %s can run\n", fw_id, cannot, title);
      return 3;
    }
  const MpPlan *plan = best;
  g_autoptr(MpSearchResult) res = NULL;
  const char *why = mp_framework_rejects (fw, &best->cfg);
  if (why != NULL)
    {
      gboolean pinned;
      g_autofree char *was = short_plan (best);
      res = search_framework (ctx, fw, opts, &pinned, &error);
      if (res == NULL || res->plans->len == 0)
        {
          if (res == NULL)
            fprintf (stderr, EMIT_SUBJECT "%s; %s can run no plan here: %s (the best plan "
                     "is %s)\n", fw_id, why, title, error->message, was);
          else
            fprintf (stderr, EMIT_SUBJECT "%s; no plan %s can run fits in memory (the "
                     "best plan is %s)\n", fw_id, why, title, was);
          g_clear_error (&error);
          return 3;
        }
      plan = g_ptr_array_index (res->plans, 0);
      g_autofree char *now = short_plan (plan);
      g_autofree char *best_step = mp_units_format (best->step_s, MP_UNIT_SECONDS);
      fprintf (stderr, EMIT_SUBJECT "%s; the best plan %s can run%s: %s, against %s for "
               "the best plan (%s); emitting it\n", fw_id, why, title,
               pinned ? " within the --fix pins"
               : opts->pins ? " (it can run none that honours the --fix pins)" : "",
               now, best_step, was);
    }
  g_autofree char *folder = g_strdup (dir ? dir : fw_id);
  g_autoptr(GPtrArray) written = g_ptr_array_new_with_free_func (g_free);
  if (!mp_export_plan (fw, plan, mp_cost_context_model (ctx), mp_cost_context_cluster (ctx),
                       folder, written, &error))
    return mp_cli_fail (error);
  for (guint i = 0; i < written->len; i++)
    fprintf (stderr, "mpplan: wrote %s\n", (const char *) g_ptr_array_index (written, i));
  return 0;
}
