/* profile.c - which calibration profile a command uses for its cluster, and applying it:
 * shared by plan and describe (and simulate, verify). The lookup rules are the cost
 * model's (mp_cost_profile_for_cluster); this file only joins them to the cluster. */
#include "config.h"
#include "cli/cli.h"
#include "costmodel/costmodel.h"

#include <stdio.h>

MpCostProfile *
mp_cli_cluster_profile (MpCluster *cluster, const char *explicit_path, GError **error)
{
  g_autofree char *path = NULL;
  g_autoptr(MpCostProfile) profile = mp_cost_profile_for_cluster (cluster, explicit_path,
                                                                  &path, error);
  if (profile == NULL)
    return NULL;
  /* A profile for another device changes nothing; say so rather than look calibrated. */
  if (mp_cost_profile_apply (profile, cluster, path) == 0)
    fprintf (stderr, "mpplan: warning: %s measured '%s', which cluster %s does not have: "
             "not used\n", path, mp_cost_profile_device (profile), cluster->name);
  return g_steal_pointer (&profile);
}
