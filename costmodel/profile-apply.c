/* profile-apply.c - which calibration profile applies to a cluster (an explicit path, the
 * cluster file's own, or for `host` this machine's), and the cluster it calibrates: a
 * copy, the loaded cluster staying read-only (topology.h). Units: FLOP/s, bytes/s. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/profile-private.h"
#include "common/error.h"

#include <string.h>

char *
mp_cost_profile_host_path (void)
{
  const char *env = g_getenv ("MPPLAN_PROFILE");
  if (env != NULL)
    return *env ? g_strdup (env) : NULL;
  return g_build_filename (g_get_user_cache_dir (), "mpplan", "host-profile.yaml", NULL);
}

/* The cluster file's `profile:` as a path: relative to the folder of the cluster file. */
static char *
cluster_profile_path (const MpCluster *cluster)
{
  if (g_path_is_absolute (cluster->profile) || cluster->source == NULL
      || !g_file_test (cluster->source, G_FILE_TEST_IS_REGULAR))
    return g_strdup (cluster->profile);
  g_autofree char *dir = g_path_get_dirname (cluster->source);
  return g_build_filename (dir, cluster->profile, NULL);
}

/* The host profile when it exists and measured this machine; else NULL (and why, at
 * debug level: a missing or foreign profile is not an error, the built-in curves apply). */
static MpCostProfile *
host_profile (char **path_out, GError **error)
{
  g_autofree char *path = mp_cost_profile_host_path ();
  if (path == NULL || !g_file_test (path, G_FILE_TEST_EXISTS))
    return NULL;
  g_autoptr(MpCostProfile) p = mp_cost_profile_load (path, error);
  if (p == NULL)
    return NULL;
  const char *measured_on = p->machine.hostname;
  if (g_strcmp0 (measured_on, g_get_host_name ()) != 0)
    {
      g_debug ("%s measured %s, not this machine (%s): not used", path,
               measured_on ? measured_on : "an unnamed machine", g_get_host_name ());
      return NULL;
    }
  if (path_out)
    *path_out = g_steal_pointer (&path);
  return g_steal_pointer (&p);
}

MpCostProfile *
mp_cost_profile_for_cluster (const MpCluster *cluster, const char *explicit_path,
                             char **path_out, GError **error)
{
  g_return_val_if_fail (cluster != NULL, NULL);
  if (path_out)
    *path_out = NULL;
  g_autofree char *path = explicit_path ? g_strdup (explicit_path)
                          : cluster->profile ? cluster_profile_path (cluster) : NULL;
  if (path == NULL)
    return g_strcmp0 (cluster->name, "host") == 0 ? host_profile (path_out, error) : NULL;
  MpCostProfile *p = mp_cost_profile_load (path, error);
  if (p != NULL && path_out)
    *path_out = g_steal_pointer (&path);
  return p;
}

/* The fastest rate in DTYPE's GEMM table; 0 without one. */
static double
fastest_gemm (const MpCostProfile *p, MpDtype dtype)
{
  const CmGemmTable *t = &p->gemm[dtype];
  double best = 0;
  gsize cells = t->flops ? (gsize) t->len[0] * t->len[1] * t->len[2] : 0;
  for (gsize i = 0; i < cells; i++)
    best = MAX (best, t->flops[i]);
  return best;
}

/* Replaces DEV's placeholder numbers with what P measured. */
static void
replace_placeholders (const MpCostProfile *p, MpDevice *dev)
{
  if (p->mem_bw_Bps > 0)
    dev->mem_bw_Bps = p->mem_bw_Bps;
  double fp32 = fastest_gemm (p, MP_DTYPE_FP32);
  for (int d = 0; d < MP_DTYPE_N; d++)
    {
      double measured = fastest_gemm (p, (MpDtype) d);
      if (dev->peak_flops[d] > 0 && (measured > 0 || fp32 > 0))
        dev->peak_flops[d] = measured > 0 ? measured : fp32;
    }
}

MpCluster *
mp_cost_profile_apply (const MpCostProfile *profile, const MpCluster *cluster,
                       const char *path, guint *applied)
{
  g_return_val_if_fail (profile != NULL && cluster != NULL, NULL);
  MpCluster *out = mp_cluster_copy (cluster);
  guint n = 0;
  for (guint g = 0; g < out->n_groups; g++)
    {
      MpDevice *dev = &out->groups[g].device;
      if (profile->device != NULL && g_strcmp0 (profile->device, dev->name) != 0)
        continue;
      if (!dev->calibrated)
        replace_placeholders (profile, dev);
      dev->calibrated = TRUE;
      n++;
    }
  g_free (out->profile);
  out->profile = g_strdup (path);
  if (applied)
    *applied = n;
  return out;
}
