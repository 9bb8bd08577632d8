/* jsonread.c - JSON documents parsed with their hard cases refused, and members read with
 * presence, type and range checked (jsonread.h). */
#include "common/jsonread.h"
#include "common/error.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

/* ---- parsing ---------------------------------------------------------------------- */

/* Line and column (1-based) of byte AT of DATA. */
static void
locate (const char *data, gsize at, guint *line, guint *col)
{
  *line = 1;
  *col = 1;
  for (gsize i = 0; i < at; i++)
    if (data[i] == '\n')
      {
        ++*line;
        *col = 1;
      }
    else
      ++*col;
}

/* Refuses nesting deeper than MP_JSON_MAX_DEPTH before json-glib sees it: its parser
 * recurses once per level and a file of '[' alone would overflow the stack. */
static gboolean
check_depth (const char *name, const char *data, gsize len, GError **error)
{
  guint depth = 0;
  gboolean in_string = FALSE;
  for (gsize i = 0; i < len; i++)
    {
      char c = data[i];
      if (in_string)
        {
          if (c == '\\')
            i++;
          else if (c == '"')
            in_string = FALSE;
          continue;
        }
      if (c == '"')
        in_string = TRUE;
      else if (c == '[' || c == '{')
        {
          if (++depth > MP_JSON_MAX_DEPTH)
            {
              guint line, col;
              locate (data, i, &line, &col);
              g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s:%u:%u: nested deeper than "
                           "%d levels", name, line, col, MP_JSON_MAX_DEPTH);
              return FALSE;
            }
        }
      else if ((c == ']' || c == '}') && depth > 0)
        depth--;
    }
  return TRUE;
}

/* Duplicate keys: json-glib keeps the last silently; the first one found is kept here. */
typedef struct {
  GHashTable *seen;            /* JsonObject* -> GHashTable of its member names */
  char *duplicate;             /* "LINE:COL: key 'K' appears twice", or NULL */
} DupCheck;

static void
on_member (JsonParser *parser, JsonObject *object, const char *name, gpointer data)
{
  DupCheck *d = data;
  if (d->duplicate != NULL)
    return;
  GHashTable *names = g_hash_table_lookup (d->seen, object);
  if (names == NULL)
    {
      names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      g_hash_table_insert (d->seen, object, names);
    }
  if (!g_hash_table_add (names, g_strdup (name)))
    d->duplicate = g_strdup_printf ("%u:%u: key '%s' appears twice",
                                    json_parser_get_current_line (parser),
                                    json_parser_get_current_pos (parser), name);
}

/* json-glib says "<data>:LINE:COL: Parse error: WHAT"; the file's name replaces "<data>". */
static void
set_parse_error (const char *name, const GError *parse, GError **error)
{
  const char *msg = parse->message;
  if (g_str_has_prefix (msg, "<data>:"))
    msg += strlen ("<data>:");
  const char *what = strstr (msg, "Parse error: ");
  if (what != NULL && what - msg >= 2 && what[-2] == ':')
    g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s:%.*s: not valid JSON: %s", name,
                 (int) (what - msg - 2), msg, what + strlen ("Parse error: "));
  else
    g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s: not valid JSON: %s", name, msg);
}

static gboolean
check_text (const char *name, const char *data, gsize len, GError **error)
{
  const char *bad = NULL;
  if (len > MP_JSON_MAX_BYTES)
    g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s: larger than %d MiB", name,
                 MP_JSON_MAX_BYTES >> 20);
  else if (!g_utf8_validate (data, (gssize) len, &bad))
    {
      guint line, col;
      locate (data, (gsize) (bad - data), &line, &col);
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s:%u:%u: not UTF-8 text (a NUL or "
                   "binary byte)", name, line, col);
    }
  else
    return check_depth (name, data, len, error);
  return FALSE;
}

JsonNode *
mp_json_load_data (const char *name, const char *data, gsize len, GError **error)
{
  g_return_val_if_fail (name != NULL && (data != NULL || len == 0), NULL);
  if (!check_text (name, data ? data : "", len, error))
    return NULL;
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  DupCheck dup = { g_hash_table_new_full (NULL, NULL, NULL,
                                          (GDestroyNotify) g_hash_table_unref), NULL };
  g_signal_connect (parser, "object-member", G_CALLBACK (on_member), &dup);
  GError *parse = NULL;
  gboolean parsed = json_parser_load_from_data (parser, data ? data : "", (gssize) len, &parse);
  g_hash_table_unref (dup.seen);
  g_autofree char *duplicate = dup.duplicate;
  if (!parsed)
    {
      set_parse_error (name, parse, error);
      g_error_free (parse);
      return NULL;
    }
  if (duplicate != NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s:%s", name, duplicate);
      return NULL;
    }
  JsonNode *root = json_parser_get_root (parser);
  if (root == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s: empty (no JSON value)", name);
      return NULL;
    }
  return json_node_ref (root);
}

JsonNode *
mp_json_load (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_autofree char *data = NULL;
  gsize len = 0;
  GError *io = NULL;
  GStatBuf st;
  if (g_stat (path, &st) == 0 && S_ISDIR (st.st_mode))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_IO, "%s: is a directory, not a JSON file", path);
      return NULL;
    }
  /* Refused before it is read: a huge file would be held whole in memory first. */
  if (g_stat (path, &st) == 0 && S_ISREG (st.st_mode) && st.st_size > MP_JSON_MAX_BYTES)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s: larger than %d MiB", path,
                   MP_JSON_MAX_BYTES >> 20);
      return NULL;
    }
  if (!g_file_get_contents (path, &data, &len, &io))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_IO, "%s", io->message);
      g_error_free (io);
      return NULL;
    }
  return mp_json_load_data (path, data, len, error);
}

/* ---- the reader ------------------------------------------------------------------- */

void
mp_json_reader_init (MpJsonReader *r, const char *file)
{
  r->file = file;
  r->error = NULL;
}

void
mp_json_problem (MpJsonReader *r, const char *key, const char *fmt, ...)
{
  if (r->error != NULL)
    return;
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (key != NULL)
    r->error = g_error_new (MP_ERROR, MP_ERROR_INPUT, "%s: key '%s': %s", r->file, key, msg);
  else
    r->error = g_error_new (MP_ERROR, MP_ERROR_INPUT, "%s: %s", r->file, msg);
}

gboolean
mp_json_reader_finish (MpJsonReader *r, GError **error)
{
  if (r->error == NULL)
    return TRUE;
  g_propagate_error (error, g_steal_pointer (&r->error));
  return FALSE;
}

void
mp_json_reader_clear (MpJsonReader *r)
{
  g_clear_error (&r->error);
}

const char *
mp_json_type_name (JsonNode *n)
{
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return "null";
  if (JSON_NODE_HOLDS_OBJECT (n))
    return "an object";
  if (JSON_NODE_HOLDS_ARRAY (n))
    return "an array";
  GType t = json_node_get_value_type (n);
  return t == G_TYPE_STRING ? "a string" : t == G_TYPE_BOOLEAN ? "a boolean" : "a number";
}

/* WHERE.KEY, or KEY when WHERE is NULL. Caller owns. */
static char *
full_name (const char *where, const char *key)
{
  return where ? g_strconcat (where, ".", key, NULL) : g_strdup (key);
}

JsonNode *
mp_json_member (MpJsonReader *r, JsonObject *o, const char *where, const char *key,
                gboolean required)
{
  g_auto (GStrv) parts = g_strsplit (key, ".", -1);
  JsonNode *n = NULL;
  for (guint i = 0; parts[i] && o != NULL; i++)
    {
      n = json_object_get_member (o, parts[i]);
      o = NULL;
      if (parts[i + 1] == NULL)
        break;
      if (n != NULL && JSON_NODE_HOLDS_OBJECT (n))
        o = json_node_get_object (n);
      else if (n != NULL && !JSON_NODE_HOLDS_NULL (n))
        {
          g_autofree char *name = full_name (where, key);
          mp_json_problem (r, name, "'%s' is %s, not an object", parts[i],
                           mp_json_type_name (n));
          return NULL;
        }
      else
        n = NULL;
    }
  if (n != NULL && !JSON_NODE_HOLDS_NULL (n))
    return n;
  if (required)
    {
      g_autofree char *name = full_name (where, key);
      mp_json_problem (r, name, n ? "must not be null" : "missing");
    }
  return NULL;
}

JsonObject *
mp_json_node_object (MpJsonReader *r, JsonNode *n, const char *name)
{
  if (n != NULL && JSON_NODE_HOLDS_OBJECT (n))
    return json_node_get_object (n);
  mp_json_problem (r, name, "expected an object, got %s", mp_json_type_name (n));
  return NULL;
}

/* N's value type when N holds a value, else G_TYPE_INVALID. */
static GType
value_type (JsonNode *n)
{
  return n && JSON_NODE_HOLDS_VALUE (n) ? json_node_get_value_type (n) : G_TYPE_INVALID;
}

gboolean
mp_json_node_number (MpJsonReader *r, JsonNode *n, const char *name, double min, double max,
                     double *out)
{
  GType t = value_type (n);
  if (t != G_TYPE_INT64 && t != G_TYPE_DOUBLE)
    {
      mp_json_problem (r, name, "expected a number, got %s", mp_json_type_name (n));
      return FALSE;
    }
  double x = t == G_TYPE_INT64 ? (double) json_node_get_int (n) : json_node_get_double (n);
  if (!isfinite (x) || x < min || x > max)
    {
      mp_json_problem (r, name, "%g is out of range (%g to %g)", x, min, max);
      return FALSE;
    }
  *out = x;
  return TRUE;
}

gboolean
mp_json_node_uint (MpJsonReader *r, JsonNode *n, const char *name, guint64 min, guint64 max,
                   guint64 *out)
{
  GType t = value_type (n);
  if (t != G_TYPE_INT64 && t != G_TYPE_DOUBLE)
    {
      mp_json_problem (r, name, "expected a whole number, got %s", mp_json_type_name (n));
      return FALSE;
    }
  gboolean ok;
  guint64 v = 0;
  if (t == G_TYPE_INT64)
    {
      gint64 i = json_node_get_int (n);
      ok = i >= 0 && (guint64) i >= min && (guint64) i <= max;
      v = (guint64) i;
      if (!ok)
        mp_json_problem (r, name, "%" G_GINT64_FORMAT " is out of range (%" G_GUINT64_FORMAT
                         " to %" G_GUINT64_FORMAT ")", i, min, max);
    }
  else
    {
      double x = json_node_get_double (n);
      ok = isfinite (x) && x == floor (x) && x >= (double) min && x <= (double) max;
      if (ok)
        v = (guint64) x;
      else
        mp_json_problem (r, name, "%g is not a whole number from %" G_GUINT64_FORMAT " to %"
                         G_GUINT64_FORMAT, x, min, max);
    }
  if (ok)
    *out = v;
  return ok;
}

const char *
mp_json_node_string (MpJsonReader *r, JsonNode *n, const char *name)
{
  if (value_type (n) == G_TYPE_STRING)
    return json_node_get_string (n);
  mp_json_problem (r, name, "expected a string, got %s", mp_json_type_name (n));
  return NULL;
}

gboolean
mp_json_node_bool (MpJsonReader *r, JsonNode *n, const char *name, gboolean *out)
{
  if (value_type (n) == G_TYPE_BOOLEAN)
    {
      *out = json_node_get_boolean (n);
      return TRUE;
    }
  mp_json_problem (r, name, "expected true or false, got %s", mp_json_type_name (n));
  return FALSE;
}

JsonObject *
mp_json_get_object (MpJsonReader *r, JsonObject *o, const char *where, const char *key,
                    gboolean required)
{
  JsonNode *n = mp_json_member (r, o, where, key, required);
  g_autofree char *name = n ? full_name (where, key) : NULL;
  return n ? mp_json_node_object (r, n, name) : NULL;
}

JsonArray *
mp_json_get_array (MpJsonReader *r, JsonObject *o, const char *where, const char *key,
                   gboolean required)
{
  JsonNode *n = mp_json_member (r, o, where, key, required);
  if (n == NULL)
    return NULL;
  if (JSON_NODE_HOLDS_ARRAY (n))
    return json_node_get_array (n);
  g_autofree char *name = full_name (where, key);
  mp_json_problem (r, name, "expected an array, got %s", mp_json_type_name (n));
  return NULL;
}

const char *
mp_json_get_string (MpJsonReader *r, JsonObject *o, const char *where, const char *key,
                    gboolean required)
{
  JsonNode *n = mp_json_member (r, o, where, key, required);
  g_autofree char *name = n ? full_name (where, key) : NULL;
  return n ? mp_json_node_string (r, n, name) : NULL;
}

gboolean
mp_json_get_bool (MpJsonReader *r, JsonObject *o, const char *where, const char *key,
                  gboolean required, gboolean *out)
{
  JsonNode *n = mp_json_member (r, o, where, key, required);
  g_autofree char *name = n ? full_name (where, key) : NULL;
  return n && mp_json_node_bool (r, n, name, out);
}

gboolean
mp_json_get_number (MpJsonReader *r, JsonObject *o, const char *where, const char *key,
                    gboolean required, double min, double max, double *out)
{
  JsonNode *n = mp_json_member (r, o, where, key, required);
  g_autofree char *name = n ? full_name (where, key) : NULL;
  return n && mp_json_node_number (r, n, name, min, max, out);
}

gboolean
mp_json_get_uint (MpJsonReader *r, JsonObject *o, const char *where, const char *key,
                  gboolean required, guint64 min, guint64 max, guint64 *out)
{
  JsonNode *n = mp_json_member (r, o, where, key, required);
  g_autofree char *name = n ? full_name (where, key) : NULL;
  return n && mp_json_node_uint (r, n, name, min, max, out);
}

/* Checks N (NAME in messages) as K says. */
static void
check_value (MpJsonReader *r, JsonNode *n, const char *name, const MpJsonKey *k)
{
  guint64 u;
  double x;
  gboolean b;
  switch (k->kind)
    {
    case MP_JSON_STRING:
      mp_json_node_string (r, n, name);
      break;
    case MP_JSON_BOOL:
      mp_json_node_bool (r, n, name, &b);
      break;
    case MP_JSON_OBJECT:
      mp_json_node_object (r, n, name);
      break;
    case MP_JSON_WHOLE:
      mp_json_node_uint (r, n, name, (guint64) k->lo, (guint64) k->hi, &u);
      break;
    case MP_JSON_NUMBER:
    case MP_JSON_ABOVE:
      if (mp_json_node_number (r, n, name, k->lo, k->hi, &x) && k->kind == MP_JSON_ABOVE
          && x <= k->lo)
        mp_json_problem (r, name, "%g is not above %g", x, k->lo);
      break;
    case MP_JSON_STRINGS:
    case MP_JSON_WHOLES:
    case MP_JSON_NUMBERS:
      {
        if (!JSON_NODE_HOLDS_ARRAY (n))
          {
            mp_json_problem (r, name, "expected a list, got %s", mp_json_type_name (n));
            break;
          }
        JsonArray *a = json_node_get_array (n);
        MpJsonKey e = { NULL, k->kind == MP_JSON_STRINGS ? MP_JSON_STRING
                              : k->kind == MP_JSON_WHOLES ? MP_JSON_WHOLE : MP_JSON_NUMBER,
                        k->lo, k->hi };
        for (guint i = 0; i < json_array_get_length (a) && r->error == NULL; i++)
          {
            g_autofree char *at = g_strdup_printf ("%s[%u]", name, i);
            check_value (r, json_array_get_element (a, i), at, &e);
          }
        break;
      }
    }
}

void
mp_json_check_keys (MpJsonReader *r, JsonObject *o, const char *where, const MpJsonKey *keys,
                    gsize n)
{
  for (gsize i = 0; i < n && o != NULL && r->error == NULL; i++)
    {
      JsonNode *node = mp_json_member (r, o, where, keys[i].key, FALSE);
      if (node == NULL)
        continue;
      g_autofree char *name = full_name (where, keys[i].key);
      check_value (r, node, name, &keys[i]);
    }
}

gboolean
mp_json_check_schema (MpJsonReader *r, JsonObject *root, const char *what, gint64 known)
{
  guint64 v = 0;
  if (!mp_json_get_uint (r, root, NULL, "schema_version", FALSE, 0, G_MAXINT64, &v))
    {
      if (r->error == NULL)
        mp_json_problem (r, "schema_version", "missing (%s written by mpplan has one)", what);
      return FALSE;
    }
  if (v < 1 || v > (guint64) known)
    {
      mp_json_problem (r, "schema_version", "%" G_GUINT64_FORMAT " is %s this mpplan "
                       "reads (%" G_GINT64_FORMAT "): %s", v,
                       v < 1 ? "not a version" : "newer than", known,
                       v < 1 ? "not a file mpplan wrote" : "written by a newer mpplan");
      return FALSE;
    }
  return TRUE;
}
