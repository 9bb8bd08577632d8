/* output.c - atomic file output and JSON serialisation. */
#include "common/output.h"
#include "common/error.h"

#include <stdio.h>
#include <string.h>

gboolean
mp_output_write (const char *path, const char *data, gsize len, GError **error)
{
  g_return_val_if_fail (path != NULL, FALSE);
  if (strcmp (path, "-") == 0)
    {
      if (fwrite (data, 1, len, stdout) != len || fflush (stdout) != 0)
        {
          g_set_error (error, MP_ERROR, MP_ERROR_IO, "cannot write to standard output");
          return FALSE;
        }
      return TRUE;
    }
  /* g_file_set_contents writes a temporary file beside PATH and renames it. */
  g_autoptr(GError) local = NULL;
  if (!g_file_set_contents (path, data, (gssize) len, &local))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_IO, "%s", local->message);
      return FALSE;
    }
  return TRUE;
}

char *
mp_json_to_string (JsonNode *root)
{
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  json_generator_set_pretty (gen, TRUE);
  json_generator_set_indent (gen, 2);
  json_generator_set_root (gen, root);
  g_autofree char *text = json_generator_to_data (gen, NULL);
  return g_strconcat (text, "\n", NULL);
}

gboolean
mp_json_write (const char *path, JsonNode *root, GError **error)
{
  g_autofree char *text = mp_json_to_string (root);
  return mp_output_write (path, text, strlen (text), error);
}
