/* test-load.h - loading the zoo and inline files in cmocka tests, failing the test with
 * the loader's message when one cannot be loaded. Include after tests/test-util.h. */
#pragma once
#include "model/model.h"
#include "topology/topology.h"

#include <string.h>

static inline MpModel *
model_ok (const char *name)
{
  g_autoptr(GError) error = NULL;
  MpModel *m = mp_model_load (name, &error);
  if (m == NULL)
    fail_msg ("%s: %s", name, error->message);
  return m;
}

static inline MpCluster *
cluster_ok (const char *name)
{
  g_autoptr(GError) error = NULL;
  MpCluster *c = mp_cluster_load (name, &error);
  if (c == NULL)
    fail_msg ("%s: %s", name, error->message);
  return c;
}

static inline MpCluster *
cluster_text (const char *yaml)
{
  g_autoptr(GError) error = NULL;
  MpCluster *c = mp_cluster_load_data ("inline.yaml", yaml, strlen (yaml), &error);
  if (c == NULL)
    fail_msg ("inline cluster: %s", error->message);
  return c;
}
