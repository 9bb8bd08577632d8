/* refine.c - the simulator in the planner: a plan's step simulated from its programs, and
 * the search's best candidates re-ranked by it.
 *
 * The closed form (evaluate.c) ranks millions of configs in seconds; the simulator times
 * the actual schedule (per-boundary p2p, bucket-by-bucket overlap, uneven stages, the
 * tied-embedding rendezvous) but costs milliseconds a plan, so only the best K of the
 * closed form are simulated. Units: seconds. */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "planner/planner-private.h"
#include "common/error.h"
#include "common/units.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

gboolean
mp_plan_check_program_size (const MpParallelConfig *cfg, GError **error)
{
  guint64 steps = (guint64) cfg->pp * cfg->vpp * cfg->num_micro_batches;
  if (steps <= MP_PLAN_MAX_MICRO_STEPS)
    return TRUE;
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%u stages x %u chunks x %u micro-batches "
               "= %" G_GUINT64_FORMAT " micro-batch steps, more than the %u mpplan builds, "
               "simulates or runs: use larger micro-batches", cfg->pp, cfg->vpp,
               cfg->num_micro_batches, steps, MP_PLAN_MAX_MICRO_STEPS);
  return FALSE;
}

MpSimResult *
mp_plan_simulate (const MpCostContext *ctx, const MpPlan *plan, const MpSimOptions *opts,
                  MpProgram ***programs, guint *n_programs, GError **error)
{
  g_return_val_if_fail (ctx != NULL && plan != NULL, NULL);
  if (!mp_plan_check_program_size (&plan->cfg, error))
    return NULL;
  guint n = 0;
  MpProgram **progs = mp_program_build_stages (ctx, plan, &n);
  MpSimResult *res = mp_simulate (ctx, &plan->cfg, progs, n, opts, error);
  if (res && programs)
    {
      *programs = progs;
      if (n_programs)
        *n_programs = n;
    }
  else
    mp_program_stages_free (progs);
  return res;
}

double
mp_plan_simulation_gap (const MpPlan *plan)
{
  return plan->simulated_step_s > 0 && plan->step_s > 0
             ? plan->simulated_step_s / plan->step_s - 1 : 0;
}

static int
by_simulated_step (const void *pa, const void *pb)
{
  const MpPlan *a = *(MpPlan *const *) pa, *b = *(MpPlan *const *) pb;
  if (a->simulated_step_s != b->simulated_step_s)
    return a->simulated_step_s < b->simulated_step_s ? -1 : 1;
  return mp_plan_compare (a, b);
}

gboolean
mp_planner_refine (const MpCostContext *ctx, MpSearchResult *result, guint k, GError **error)
{
  g_return_val_if_fail (ctx != NULL && result != NULL, FALSE);
  GPtrArray *plans = result->plans;
  k = MIN (k, plans->len);
  for (guint i = 0; i < k; i++)
    {
      MpPlan *plan = g_ptr_array_index (plans, i);
      if (!mp_plan_check_program_size (&plan->cfg, NULL))
        {
          plan->simulated_step_s = plan->step_s;   /* the closed form is all there is */
          continue;
        }
      g_autoptr(MpSimResult) sim = mp_plan_simulate (ctx, plan, NULL, NULL, NULL, error);
      if (sim == NULL)
        {
          g_prefix_error (error, "simulating plan %u: ", i + 1);
          return FALSE;
        }
      plan->simulated_step_s = sim->step_s;
      g_debug ("refine: plan %u: closed form %.6g s, simulated %.6g s (%+.2f%%)", i + 1,
               plan->step_s, sim->step_s, 100 * mp_plan_simulation_gap (plan));
    }
  /* Sort the first K in place: the rest of the array stays as the closed form put it. */
  if (k > 1)
    {
      g_autofree gpointer *head = g_memdup2 (plans->pdata, k * sizeof (gpointer));
      qsort (head, k, sizeof (gpointer), by_simulated_step);
      memcpy (plans->pdata, head, k * sizeof (gpointer));
    }
  return TRUE;
}

char *
mp_plan_refine_text (const GPtrArray *plans, guint shown, guint refined, double threshold)
{
  GString *s = g_string_new (NULL);
  refined = MIN (refined, plans->len);
  if (refined == 0)
    return g_string_free (s, FALSE);
  /* The closed form's winner among those simulated. */
  const MpPlan *best = g_ptr_array_index (plans, 0), *closed = best;
  for (guint i = 1; i < refined; i++)
    {
      const MpPlan *p = g_ptr_array_index (plans, i);
      if (mp_plan_compare (p, closed) < 0)
        closed = p;
    }
  if (closed != best)
    {
      g_autofree char *a = mp_units_format (best->simulated_step_s, MP_UNIT_SECONDS);
      g_autofree char *b = mp_units_format (closed->simulated_step_s, MP_UNIT_SECONDS);
      g_string_append_printf (s, "Simulation re-ranked the best %u: plan 1 simulates at %s, "
                              "the closed form's best at %s.\n", refined, a, b);
    }
  for (guint i = 0; i < MIN (shown, refined); i++)
    {
      const MpPlan *p = g_ptr_array_index (plans, i);
      double gap = mp_plan_simulation_gap (p);
      if (fabs (gap) <= threshold)
        continue;
      g_autofree char *sim = mp_units_format (p->simulated_step_s, MP_UNIT_SECONDS);
      g_autofree char *cf = mp_units_format (p->step_s, MP_UNIT_SECONDS);
      g_string_append_printf (s, "Plan %u: the simulation (%s) and the closed form (%s) differ "
                              "by %+.1f%%.\n", i + 1, sim, cf, 100 * gap);
    }
  return g_string_free (s, FALSE);
}
