/* output.c - atomic file output and JSON serialisation. */
#include "common/output.h"
#include "common/error.h"

#include <math.h>
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

void
mp_json_add_int (JsonBuilder *b, const char *key, gint64 v)
{
  json_builder_set_member_name (b, key);
  json_builder_add_int_value (b, v);
}

void
mp_json_add_double (JsonBuilder *b, const char *key, double v)
{
  json_builder_set_member_name (b, key);
  if (isfinite (v))
    json_builder_add_double_value (b, v);
  else
    json_builder_add_null_value (b);
}

void
mp_json_add_string (JsonBuilder *b, const char *key, const char *v)
{
  json_builder_set_member_name (b, key);
  if (v != NULL)
    json_builder_add_string_value (b, v);
  else
    json_builder_add_null_value (b);
}

void
mp_json_add_bool (JsonBuilder *b, const char *key, gboolean v)
{
  json_builder_set_member_name (b, key);
  json_builder_add_boolean_value (b, v);
}
