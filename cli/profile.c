/* profile.c - a command's inputs: model, cluster, which calibration profile applies to
 * the cluster (the cluster replaced by its calibrated copy), and the cost context over
 * them. Shared by plan, compare,
 * verify, describe and simulate. The lookup rules are the cost model's
 * (mp_cost_profile_for_cluster); this file only joins them to the cluster. */
#include "config.h"
#include "cli/cli.h"
#include "costmodel/costmodel.h"
#include "common/error.h"
#include "common/yamldoc.h"

#include <stdio.h>
#include <string.h>

/* "PATH:LINE:COL: device: a profile of 'D', which cluster C does not have (its
 * devices: ...)", located at the profile's device key. */
static void
device_mismatch (const char *path, const char *device, const MpCluster *cluster,
                 GError **error)
{
  g_autoptr(MpYamlDoc) doc = mp_yaml_load (path, NULL);
  const MpYamlNode *at = doc ? mp_yaml_lookup (doc->root, "device") : NULL;
  g_autoptr(GString) have = g_string_new (NULL);
  for (guint i = 0; i < cluster->n_groups; i++)
    {
      const char *name = cluster->groups[i].device.name;
      if (strstr (have->str, name) == NULL)
        g_string_append_printf (have, "%s%s", have->len ? ", " : "", name);
    }
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s:%u:%u: device: a profile of '%s', "
               "which cluster %s does not have (its devices: %s)", path, at ? at->line : 1,
               at ? at->column : 1, device, cluster->name, have->str);
}

MpCostProfile *
mp_cli_cluster_profile (MpCluster **cluster, const char *explicit_path, GError **error)
{
  g_autofree char *path = NULL;
  g_autoptr(MpCostProfile) profile = mp_cost_profile_for_cluster (*cluster, explicit_path,
                                                                  &path, error);
  if (profile == NULL)
    return NULL;
  guint applied = 0;
  MpCluster *calibrated = mp_cost_profile_apply (profile, *cluster, path, &applied);
  mp_cluster_free (*cluster);
  *cluster = calibrated;
  if (applied != 0)
    return g_steal_pointer (&profile);
  /* A profile for another device changes nothing. The host profile found by itself is
   * only said so; one the user named (--profile, the cluster's profile:) is refused. */
  g_autofree char *host = mp_cost_profile_host_path ();
  if (explicit_path == NULL && host != NULL && strcmp (path, host) == 0)
    {
      fprintf (stderr, "mpplan: warning: %s measured '%s', which cluster %s does not have: "
               "not used\n", path, mp_cost_profile_device (profile), calibrated->name);
      return g_steal_pointer (&profile);
    }
  device_mismatch (path, mp_cost_profile_device (profile), calibrated, error);
  return NULL;
}

gboolean
mp_cli_inputs_try_load (MpCliInputs *in, const char *model, const char *cluster,
                        const char *profile_path, GError **error)
{
  memset (in, 0, sizeof *in);
  in->model = mp_model_load (model, error);
  if (in->model == NULL)
    return FALSE;
  in->cluster = mp_cluster_load (cluster, error);
  if (in->cluster == NULL)
    return FALSE;
  GError *own = NULL;
  in->profile = mp_cli_cluster_profile (&in->cluster, profile_path, &own);
  if (in->profile == NULL && own != NULL)
    {
      g_propagate_error (error, own);
      return FALSE;
    }
  in->ctx = mp_cost_context_new (in->model, in->cluster, in->profile);
  return TRUE;
}

int
mp_cli_inputs_load (MpCliInputs *in, const char *model, const char *cluster,
                    const char *profile_path)
{
  GError *error = NULL;
  return mp_cli_inputs_try_load (in, model, cluster, profile_path, &error) ? 0
                                                                          : mp_cli_fail (error);
}

gboolean
mp_cli_memory_headroom (MpCostContext *ctx, const char *text, GError **error)
{
  if (text == NULL)
    return TRUE;
  char *end = NULL;
  double f = g_ascii_strtod (text, &end);
  if (end != text && *end == '\0')
    {
      if (!(f >= 0 && f < 1))
        {
          g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                       "--memory-headroom: %s is not a fraction below 1 (for a size give "
                       "its unit, e.g. 4GiB)", text);
          return FALSE;
        }
      mp_cost_context_set_memory_headroom (ctx, f, 0);
      return TRUE;
    }
  double bytes;
  if (!mp_units_parse (text, MP_UNIT_BYTES, &bytes, error))
    {
      g_prefix_error (error, "--memory-headroom: ");
      return FALSE;
    }
  mp_cost_context_set_memory_headroom (ctx, 0, bytes);
  return TRUE;
}

void
mp_cli_inputs_clear (MpCliInputs *in)
{
  g_clear_pointer (&in->ctx, mp_cost_context_free);
  g_clear_pointer (&in->profile, mp_cost_profile_free);
  g_clear_pointer (&in->cluster, mp_cluster_free);
  g_clear_pointer (&in->model, mp_model_free);
}
