/* test-env.h - a model, a cluster and their cost context, loaded by name for a test
 * (zoo names through MPPLAN_DATADIR, or paths); a failed load fails the test. */
#pragma once
#include "tests/test-util.h"
#include "costmodel/costmodel.h"

typedef struct {
  MpModel *model;
  MpCluster *cluster;
  MpCostContext *ctx;
} Env;

static inline void
env_free (Env *e)
{
  mp_cost_context_free (e->ctx);
  mp_cluster_free (e->cluster);
  mp_model_free (e->model);
  g_free (e);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Env, env_free)

static inline Env *
env_new (const char *model, const char *cluster)
{
  g_autoptr(GError) error = NULL;
  Env *e = g_new0 (Env, 1);
  e->model = mp_model_load (model, &error);
  if (e->model)
    e->cluster = mp_cluster_load (cluster, &error);
  if (e->cluster == NULL)
    fail_msg ("%s on %s: %s", model, cluster, error->message);
  e->ctx = mp_cost_context_new (e->model, e->cluster, NULL);
  return e;
}
