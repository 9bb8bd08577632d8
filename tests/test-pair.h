/* test-pair.h - a model on a cluster with its cost context, for the planner's tests.
 * Zoo files are found through MPPLAN_DATADIR (the Makefile sets it to examples/). */
#pragma once
#include "tests/test-util.h"
#include "planner/planner.h"

typedef struct {
  MpModel *model;
  MpCluster *cluster;
  MpCostContext *ctx;
} Pair;

static inline void
pair_free (Pair *p)
{
  if (p == NULL)
    return;
  mp_cost_context_free (p->ctx);
  mp_cluster_free (p->cluster);
  mp_model_free (p->model);
  g_free (p);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Pair, pair_free)

/* MODEL on CLUSTER (zoo names or files); fails the test when either does not load. */
static inline Pair *
pair_load (const char *model, const char *cluster)
{
  g_autoptr(GError) error = NULL;
  Pair *p = g_new0 (Pair, 1);
  p->model = mp_model_load (model, &error);
  if (p->model == NULL)
    fail_msg ("%s: %s", model, error->message);
  p->cluster = mp_cluster_load (cluster, &error);
  if (p->cluster == NULL)
    fail_msg ("%s: %s", cluster, error->message);
  p->ctx = mp_cost_context_new (p->model, p->cluster, NULL);
  return p;
}
