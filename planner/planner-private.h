/* planner-private.h - what the planner's files share; not for other modules. */
#pragma once
#include "planner/planner.h"

G_BEGIN_DECLS

/* Forward + backward time of each model layer for one micro-batch under CFG's tensor,
 * context and expert split (pipeline ignored), on each node group's device: COST has
 * cluster->n_groups rows of model->n_layers entries (group g's at g * n_layers). */
void pl_layer_costs (const MpCostContext *ctx, const MpParallelConfig *cfg, double *cost);
/* Balanced contiguous split of the layers with costs COST (pl_layer_costs') into
 * cfg->pp * vpp chunks, chunk c on stage c % pp and costed on that stage's device
 * (mp_cost_stage_group under CFG's order; see mp_plan_split_layers). LIMITS (may be
 * NULL; n_layers + 1 entries, < 0 at first): the bottleneck of each chunk count on one
 * kind of device, kept by the caller for the next split of the same COST. FILLS (may be
 * NULL; 2 + 2 * chunks entries, fills[0] PL_FILLS_NONE at first): the two fills of that
 * bottleneck on one kind of device, kept by the caller for the next split of the same
 * COST into as many chunks (at another pipeline depth). */
#define PL_FILLS_NONE G_MAXUINT
gboolean pl_split_costs (const MpCostContext *ctx, const MpParallelConfig *cfg,
                         const double *cost, double *limits, guint *fills,
                         guint *chunk_layers);

/* Does CFG's interleaved pipeline run rounds whose chunks differ from stage to stage
 * (TRANSFORMER: the end chunks' embedding and head aside)? Then the closed form times it
 * step by step (schedule_run), whatever its ZeRO stage. */
gboolean pl_rounds_differ (const MpParallelConfig *cfg, gboolean transformer);

/* One chunk's forward or backward for one micro-batch; V is the chunk's index on the
 * stage (model chunk stage + v * pp). */
typedef struct {
  gboolean backward;
  guint v, mb;
} PlStep;
/* The steps of STAGE under CFG in the order its program runs them (PlStep; program.c):
 * the one schedule the programs and the closed form's interleaved pipeline share. */
GArray *pl_schedule_steps (const MpParallelConfig *cfg, guint stage);
/* The same schedule as a rule (pl_schedule_of), its steps one at a time without a list,
 * for the closed form's many runs of it: WARMUP forwards, then a forward and a backward
 * in turn, then the backwards left (TOTAL of each, N_STEPS in all). */
typedef struct {
  guint n_steps, warmup, total;
  guint p, v;             /* Megatron's groups: p micro-batches through v chunks (GPipe: 1) */
} PlSchedule;
void pl_schedule_of (const MpParallelConfig *cfg, guint stage, PlSchedule *out);
/* Step I of SC: the stage's K-th forward, or its K-th backward (TRUE) ... */
static inline gboolean
pl_schedule_nth (const PlSchedule *sc, guint i, guint *k)
{
  guint w = sc->warmup, t = sc->total;
  if (i < w)
    {
      *k = i;
      return FALSE;
    }
  guint j = i - w;
  if (j >= 2 * (t - w))
    {
      *k = i - t;
      return TRUE;
    }
  *k = j % 2 ? j / 2 : j / 2 + w;
  return j % 2;
}
/* ... which is this step (the same on every stage of one schedule). */
PlStep pl_schedule_kth (const PlSchedule *sc, guint k, gboolean backward);

/* A plan in three steps, so the search can skip the time of a plan that does not fit:
 * take CFG and CHUNK_LAYERS (copied; CFG checked by the caller), then its memory, then
 * its time and throughput. */
void pl_plan_init (MpPlan *plan, const MpParallelConfig *cfg, const guint *chunk_layers,
                   guint global_batch);
void pl_plan_memory (const MpCostContext *ctx, MpPlan *plan);
void pl_plan_time (const MpCostContext *ctx, MpPlan *plan);

/* Keeping the best: a copy of PLAN goes into TOP (sorted, at most K), or replaces *SLOT
 * when it is faster (keep_best) or smaller (keep_smallest). */
void pl_keep_top (GPtrArray *top, guint k, const MpPlan *plan);
void pl_keep_best (MpPlan **slot, const MpPlan *plan);
void pl_keep_smallest (MpPlan **slot, const MpPlan *plan);
/* Clears the smallest-footprint slots the output does not read: the smallest when a plan
 * is kept, a family's when the family has a best (after a search, and after a merge). */
void pl_settle_smallest (MpSearchResult *res);
/* MoE (moe14): does C use experts' own settings worth writing out (ep > 1, etp != tp, or
 * the all-gather dispatcher)? Plans without them keep their former files. */
static inline gboolean
pl_config_has_experts (const MpParallelConfig *c)
{
  return c->ep > 1 || mp_parallel_config_etp (c) != c->tp
         || c->dispatcher != MP_DISPATCH_ALLTOALL;
}

G_END_DECLS
