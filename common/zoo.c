/* zoo.c - locating the bundled model and cluster YAML files. */
#include "config.h"
#include "common/zoo.h"

#include <string.h>

/* Candidate directories for KIND, in search order; caller owns. */
static GPtrArray *
zoo_dirs (const char *kind)
{
  GPtrArray *dirs = g_ptr_array_new_with_free_func (g_free);
  const char *env = g_getenv ("MPPLAN_DATADIR");
  if (env && *env)
    g_ptr_array_add (dirs, g_build_filename (env, kind, NULL));
  g_ptr_array_add (dirs, g_build_filename (MPPLAN_SRCDIR, "examples", kind, NULL));
  g_ptr_array_add (dirs, g_build_filename (MPPLAN_PKGDATADIR, kind, NULL));
  return dirs;
}

char *
mp_zoo_find (const char *kind, const char *name)
{
  g_return_val_if_fail (kind != NULL && name != NULL, NULL);
  if (*name == '\0' || strchr (name, '/') != NULL)
    return NULL;
  g_autoptr(GPtrArray) dirs = zoo_dirs (kind);
  g_autofree char *file = g_strconcat (name, ".yaml", NULL);
  for (guint i = 0; i < dirs->len; i++)
    {
      char *path = g_build_filename (g_ptr_array_index (dirs, i), file, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_REGULAR))
        return path;
      g_free (path);
    }
  return NULL;
}

static int
compare_names (gconstpointer a, gconstpointer b, gpointer unused)
{
  return strcmp (a, b);
}

static gboolean
collect_key (gpointer key, gpointer value, gpointer out)
{
  g_ptr_array_add (out, g_strdup (key));
  return FALSE;
}

char **
mp_zoo_list (const char *kind)
{
  g_autoptr(GPtrArray) dirs = zoo_dirs (kind);
  g_autoptr(GTree) names = g_tree_new_full (compare_names, NULL, g_free, NULL);
  for (guint i = 0; i < dirs->len; i++)
    {
      g_autoptr(GDir) dir = g_dir_open (g_ptr_array_index (dirs, i), 0, NULL);
      const char *f;
      while (dir && (f = g_dir_read_name (dir)) != NULL)
        if (g_str_has_suffix (f, ".yaml"))
          {
            char *n = g_strndup (f, strlen (f) - 5);
            if (g_tree_lookup_extended (names, n, NULL, NULL))
              g_free (n);
            else
              g_tree_insert (names, n, n);
          }
    }
  GPtrArray *out = g_ptr_array_new ();
  g_tree_foreach (names, collect_key, out);
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}
