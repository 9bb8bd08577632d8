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

/* --refine holds the programs and the simulator's state of one plan, about 1 kB a
 * micro-batch step (pp x vpp x micro-batches): up to this many steps a plan is simulated
 * whole (4 MB; the zoo's default plans and the goldens), beyond it by its steady state. */
#define REFINE_WHOLE_STEPS (1u << 12)

/* PLAN's step simulated with M micro-batches in place of its own. */
static gboolean
simulated_step (const MpCostContext *ctx, const MpPlan *plan, guint m, double *step_s,
                GError **error)
{
  g_autoptr(MpPlan) copy = mp_plan_copy (plan);
  copy->cfg.num_micro_batches = m;
  g_autoptr(MpSimResult) sim = mp_plan_simulate (ctx, copy, NULL, NULL, NULL, error);
  if (sim == NULL)
    return FALSE;
  *step_s = sim->step_s;
  return TRUE;
}

/* After the pipeline fills, every schedule repeats itself each pp micro-batches (1F1B and
 * GPipe one forward and one backward a stage per micro-batch, interleaved pp
 * micro-batches through every chunk), and the fill, the drain and the data-parallel tail
 * do not depend on the count: the step then grows by the same time every period. So a
 * plan of M micro-batches is simulated with m1, m1 + pp and m1 + 2 pp (m1 = M modulo pp,
 * the same last partial period), and where the two growths agree to 1e-9 the line is
 * extended to M (on the goldens' plans it lands within 1e-13 of the whole simulation):
 * memory and time O(pp^2 vpp), whatever M. Where they do not (a transient longer than
 * m1), m1 doubles while M stays beyond; past that the plan keeps the closed form's step. */
static gboolean
steady_state_step (const MpCostContext *ctx, const MpPlan *plan, double *step_s,
                   GError **error)
{
  guint64 m = plan->cfg.num_micro_batches, period = plan->cfg.pp;
  guint64 chunks = (guint64) plan->cfg.pp * plan->cfg.vpp;
  *step_s = plan->step_s;
  for (guint64 periods = 4; (periods + 2) * period < m
                            && (periods + 3) * period * chunks <= MP_PLAN_MAX_MICRO_STEPS;
       periods *= 2)
    {
      guint64 m1 = periods * period + m % period;
      double t[3];
      for (guint i = 0; i < 3; i++)
        if (!simulated_step (ctx, plan, (guint) (m1 + i * period), &t[i], error))
          return FALSE;
      double d1 = t[1] - t[0], d2 = t[2] - t[1];
      g_debug ("refine: %" G_GUINT64_FORMAT " micro-batches: periods of %" G_GUINT64_FORMAT
               " from %" G_GUINT64_FORMAT ": %.9g s, then %.9g s", m, period, m1, d1, d2);
      if (fabs (d2 - d1) <= 1e-9 * t[2])
        {
          *step_s = t[2] + (double) (m - m1 - 2 * period) / (double) period * d2;
          return TRUE;
        }
    }
  return TRUE;
}

/* PLAN's step simulated: whole when it is small, else by its steady state; the closed
 * form's when it is too large for either. */
static gboolean
refined_step (const MpCostContext *ctx, const MpPlan *plan, double *step_s, GError **error)
{
  const MpParallelConfig *cfg = &plan->cfg;
  guint64 steps = (guint64) cfg->pp * cfg->vpp * cfg->num_micro_batches;
  if (steps > REFINE_WHOLE_STEPS && cfg->num_micro_batches > 6 * cfg->pp)
    return steady_state_step (ctx, plan, step_s, error);
  *step_s = plan->step_s;
  return !mp_plan_check_program_size (cfg, NULL)
         || simulated_step (ctx, plan, cfg->num_micro_batches, step_s, error);
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
      if (!refined_step (ctx, plan, &plan->simulated_step_s, error))
        {
          g_prefix_error (error, "simulating plan %u: ", i + 1);
          return FALSE;
        }
      g_debug ("refine: plan %u: closed form %.6g s, simulated %.6g s (%+.2f%%)", i + 1,
               plan->step_s, plan->simulated_step_s, 100 * mp_plan_simulation_gap (plan));
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
