/* cmd-emit.c - `mpplan plan --emit FRAMEWORK [-o DIR]`: the launch files of the chosen
 * plan for one framework. When the framework cannot run the plan (Horovod and tp = 8), it
 * says why on stderr, searches again within what the framework can run, and writes the
 * best of those: the user asked for launch files and gets the best ones that exist
 * (exit 0); only when nothing the framework can run fits is the exit status 3. */
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
  return g_strdup_printf ("dp=%u tp=%u pp=%u cp=%u ep=%u zero=%u recompute=%s micro-batch "
                          "%u x %u (step %s)", c->dp, c->tp, c->pp, c->cp, c->ep, c->zero,
                          mp_recompute_name (c->recompute), c->micro_batch_size,
                          c->num_micro_batches, step);
}

gboolean
mp_cli_framework_check (const char *id, GError **error)
{
  MpFramework fw;
  if (mp_framework_from_id (id, &fw))
    return TRUE;
  GString *list = g_string_new (NULL);
  for (guint i = 0; i < MP_FRAMEWORK_N; i++)
    g_string_append_printf (list, "%s%s", i ? ", " : "", mp_framework_id ((MpFramework) i));
  g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "--emit: unknown framework '%s' (one of: %s)",
               id, list->str);
  g_string_free (list, TRUE);
  return FALSE;
}

int
mp_cli_emit (const char *id, const char *dir, const MpPlan *best, const MpCostContext *ctx,
             const MpSearchOptions *opts)
{
  GError *error = NULL;
  MpFramework fw;
  if (!mp_framework_from_id (id, &fw))
    return mp_cli_framework_check (id, &error) ? 2 : mp_cli_fail (error);
  const MpPlan *plan = best;
  g_autoptr(MpSearchResult) res = NULL;
  const char *why = mp_framework_rejects (fw, &best->cfg);
  if (why != NULL)
    {
      MpSearchOptions o = *opts;
      o.progress = NULL;
      o.top_k = 1;
      /* Pins the framework cannot honour are what made the plan inexpressible; the
       * framework's own limits replace them. */
      o.pins = NULL;
      res = mp_framework_search (ctx, fw, &o, &error);
      if (res == NULL)
        return mp_cli_fail (error);
      g_autofree char *was = short_plan (best);
      if (res->plans->len == 0)
        {
          fprintf (stderr, "mpplan: %s; no plan %s can run fits in memory (the best plan "
                   "is %s)\n", why, mp_framework_title (fw), was);
          return 3;
        }
      plan = g_ptr_array_index (res->plans, 0);
      g_autofree char *now = short_plan (plan);
      fprintf (stderr, "mpplan: %s; best plan %s can run: %s, %.2fx the best plan's step "
               "(%s); emitting it\n", why, mp_framework_title (fw), now,
               plan->step_s / best->step_s, was);
    }
  g_autofree char *folder = g_strdup (dir ? dir : mp_framework_id (fw));
  g_autoptr(GPtrArray) written = g_ptr_array_new_with_free_func (g_free);
  if (!mp_export_plan (fw, plan, mp_cost_context_model (ctx), mp_cost_context_cluster (ctx),
                       folder, written, &error))
    return mp_cli_fail (error);
  for (guint i = 0; i < written->len; i++)
    fprintf (stderr, "mpplan: wrote %s\n", (const char *) g_ptr_array_index (written, i));
  return 0;
}
