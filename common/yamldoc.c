/* yamldoc.c - libyaml events -> MpYamlNode tree, and the schema-checking reader.
 *
 * The tree is built from the event stream with an explicit stack, so depth is bounded by
 * MP_YAML_MAX_DEPTH rather than by the C stack, and an alias is refused as soon as it is
 * seen (aliases are never needed in mpplan files and are how "billion laughs" works). */
#include "common/yamldoc.h"
#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static void
node_free (MpYamlNode *n)
{
  if (n == NULL)
    return;
  g_free (n->value);
  if (n->keys)
    g_ptr_array_unref (n->keys);
  if (n->items)
    g_ptr_array_unref (n->items);
  g_free (n);
}

static MpYamlNode *
node_new (MpYamlKind kind, const yaml_mark_t *mark)
{
  MpYamlNode *n = g_new0 (MpYamlNode, 1);
  n->kind = kind;
  n->line = (guint) mark->line + 1;
  n->column = (guint) mark->column + 1;
  if (kind != MP_YAML_SCALAR)
    n->items = g_ptr_array_new_with_free_func ((GDestroyNotify) node_free);
  if (kind == MP_YAML_MAP)
    n->keys = g_ptr_array_new_with_free_func ((GDestroyNotify) node_free);
  return n;
}

void
mp_yaml_doc_free (MpYamlDoc *doc)
{
  if (doc == NULL)
    return;
  node_free (doc->root);
  g_free (doc->path);
  g_free (doc);
}

/* Building state: a stack of open collections; for maps, whether a key is pending. */
typedef struct {
  MpYamlNode *node;
  MpYamlNode *pending_key;
} Frame;

static gboolean
fail_at (GError **error, const char *name, const yaml_mark_t *m, const char *msg)
{
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s:%zu:%zu: %s", name, m->line + 1,
               m->column + 1, msg);
  return FALSE;
}

/* Attaches CHILD to the innermost open collection; FALSE (and frees CHILD) on a duplicate
 * or non-scalar key. */
static gboolean
attach (GArray *stack, MpYamlNode *child, const char *name, GError **error)
{
  Frame *top = &g_array_index (stack, Frame, stack->len - 1);
  if (top->node->kind == MP_YAML_SEQ)
    {
      g_ptr_array_add (top->node->items, child);
      return TRUE;
    }
  if (top->pending_key == NULL)
    {
      yaml_mark_t m = { 0, child->line - 1, child->column - 1 };
      if (child->kind != MP_YAML_SCALAR)
        {
          node_free (child);
          return fail_at (error, name, &m, "mapping keys must be plain scalars");
        }
      for (guint i = 0; i < top->node->keys->len; i++)
        {
          MpYamlNode *k = g_ptr_array_index (top->node->keys, i);
          if (strcmp (k->value, child->value) == 0)
            {
              g_autofree char *msg = g_strdup_printf ("duplicate key '%s' (first at line %u)",
                                                      child->value, k->line);
              node_free (child);
              return fail_at (error, name, &m, msg);
            }
        }
      top->pending_key = child;
      return TRUE;
    }
  g_ptr_array_add (top->node->keys, top->pending_key);
  g_ptr_array_add (top->node->items, child);
  top->pending_key = NULL;
  return TRUE;
}

static void
stack_clear (GArray *stack)
{
  for (guint i = 0; i < stack->len; i++)
    {
      Frame *f = &g_array_index (stack, Frame, i);
      node_free (f->pending_key);
      if (i == 0)
        node_free (f->node); /* children are owned by their parents */
    }
  g_array_set_size (stack, 0);
}

/* Runs the parser over the whole stream; returns the root or NULL with ERROR set. */
static MpYamlNode *
build_tree (yaml_parser_t *parser, const char *name, GError **error)
{
  g_autoptr(GArray) stack = g_array_new (FALSE, TRUE, sizeof (Frame));
  MpYamlNode *root = NULL;
  int documents = 0;
  gboolean ok = TRUE, done = FALSE;

  while (ok && !done)
    {
      yaml_event_t ev;
      if (!yaml_parser_parse (parser, &ev))
        {
          g_autofree char *msg = g_strdup_printf ("malformed YAML: %s%s%s",
                                                  parser->problem ? parser->problem : "error",
                                                  parser->context ? " " : "",
                                                  parser->context ? parser->context : "");
          ok = fail_at (error, name, &parser->problem_mark, msg);
          break;
        }
      MpYamlNode *n = NULL;
      switch (ev.type)
        {
        case YAML_STREAM_END_EVENT:
          done = TRUE;
          break;
        case YAML_DOCUMENT_START_EVENT:
          if (++documents > 1)
            ok = fail_at (error, name, &ev.start_mark, "more than one YAML document in the file");
          break;
        case YAML_ALIAS_EVENT:
          ok = fail_at (error, name, &ev.start_mark, "aliases (*name) are not allowed");
          break;
        case YAML_SCALAR_EVENT:
          n = node_new (MP_YAML_SCALAR, &ev.start_mark);
          n->value = g_strndup ((const char *) ev.data.scalar.value, ev.data.scalar.length);
          n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
          if (strlen (n->value) != ev.data.scalar.length)
            {
              node_free (n);
              ok = fail_at (error, name, &ev.start_mark, "NUL byte in a scalar");
            }
          else if (stack->len == 0)
            root = n;
          else
            ok = attach (stack, n, name, error);
          break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
          if (stack->len >= MP_YAML_MAX_DEPTH)
            {
              ok = fail_at (error, name, &ev.start_mark, "nesting deeper than 32 levels");
              break;
            }
          n = node_new (ev.type == YAML_SEQUENCE_START_EVENT ? MP_YAML_SEQ : MP_YAML_MAP,
                        &ev.start_mark);
          if (stack->len > 0 && !attach (stack, n, name, error))
            {
              ok = FALSE;
              break;
            }
          g_array_append_val (stack, ((Frame) { n, NULL }));
          break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
          {
            Frame f = g_array_index (stack, Frame, stack->len - 1);
            g_array_set_size (stack, stack->len - 1);
            if (stack->len == 0)
              root = f.node;
          }
          break;
        default:
          break;
        }
      yaml_event_delete (&ev);
    }
  if (!ok)
    {
      if (stack->len > 0)
        {
          if (root == g_array_index (stack, Frame, 0).node)
            root = NULL;
          stack_clear (stack);
        }
      node_free (root);
      return NULL;
    }
  if (root == NULL)
    {
      yaml_mark_t m = { 0, 0, 0 };
      fail_at (error, name, &m, "empty file: expected a YAML mapping");
    }
  return root;
}

MpYamlDoc *
mp_yaml_load_data (const char *name, const char *data, gsize len, GError **error)
{
  g_return_val_if_fail (name != NULL && (data != NULL || len == 0), NULL);
  if (len > MP_YAML_MAX_BYTES)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s:1:1: file larger than %d MiB", name,
                   MP_YAML_MAX_BYTES >> 20);
      return NULL;
    }
  yaml_parser_t parser;
  if (!yaml_parser_initialize (&parser))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "%s: cannot start the YAML parser", name);
      return NULL;
    }
  yaml_parser_set_input_string (&parser, (const unsigned char *) (data ? data : ""), len);
  MpYamlNode *root = build_tree (&parser, name, error);
  yaml_parser_delete (&parser);
  if (root == NULL)
    return NULL;
  MpYamlDoc *doc = g_new0 (MpYamlDoc, 1);
  doc->path = g_strdup (name);
  doc->root = root;
  return doc;
}

MpYamlDoc *
mp_yaml_load (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  if (g_file_test (path, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_IO, "%s: is a directory, expected a YAML file", path);
      return NULL;
    }
  g_autofree char *data = NULL;
  gsize len = 0;
  g_autoptr(GError) local = NULL;
  if (!g_file_get_contents (path, &data, &len, &local))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_IO, "%s: %s", path, local->message);
      return NULL;
    }
  return mp_yaml_load_data (path, data, len, error);
}

const MpYamlNode *
mp_yaml_lookup (const MpYamlNode *map, const char *key)
{
  if (map == NULL || map->kind != MP_YAML_MAP)
    return NULL;
  for (guint i = 0; i < map->keys->len; i++)
    {
      const MpYamlNode *k = g_ptr_array_index (map->keys, i);
      if (strcmp (k->value, key) == 0)
        return g_ptr_array_index (map->items, i);
    }
  return NULL;
}

/* ---- the reader -------------------------------------------------------------------- */

void
mp_yaml_reader_init (MpYamlReader *r, const MpYamlDoc *doc)
{
  r->doc = doc;
  r->problems = g_ptr_array_new_with_free_func (g_free);
}

void
mp_yaml_reader_clear (MpYamlReader *r)
{
  g_clear_pointer (&r->problems, g_ptr_array_unref);
}

void
mp_yaml_problem (MpYamlReader *r, const MpYamlNode *node, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_ptr_array_add (r->problems, g_strdup_printf ("%s:%u:%u: %s", r->doc->path,
                                                 node ? node->line : 1, node ? node->column : 1,
                                                 msg));
}

gboolean
mp_yaml_reader_finish (MpYamlReader *r, GError **error)
{
  if (r->problems->len == 0)
    return TRUE;
  g_ptr_array_add (r->problems, NULL);
  g_autofree char *all = g_strjoinv ("\n", (char **) r->problems->pdata);
  g_ptr_array_remove_index (r->problems, r->problems->len - 1);
  g_set_error_literal (error, MP_ERROR, MP_ERROR_INPUT, all);
  return FALSE;
}

gboolean
mp_yaml_expect_map (MpYamlReader *r, const MpYamlNode *node, const char *what)
{
  if (node != NULL && node->kind == MP_YAML_MAP)
    return TRUE;
  mp_yaml_problem (r, node, "%s must be a mapping (key: value lines)", what);
  return FALSE;
}

static guint
edit_distance (const char *a, const char *b)
{
  gsize la = strlen (a), lb = strlen (b);
  if (la > 64 || lb > 64)
    return G_MAXUINT;
  guint prev[65], cur[65];
  for (gsize j = 0; j <= lb; j++)
    prev[j] = (guint) j;
  for (gsize i = 1; i <= la; i++)
    {
      cur[0] = (guint) i;
      for (gsize j = 1; j <= lb; j++)
        {
          guint sub = prev[j - 1] + (g_ascii_tolower (a[i - 1]) != g_ascii_tolower (b[j - 1]));
          cur[j] = MIN (sub, MIN (prev[j] + 1, cur[j - 1] + 1));
        }
      memcpy (prev, cur, sizeof prev);
    }
  return prev[lb];
}

const char *
mp_yaml_suggest (const char *word, const char *const *candidates)
{
  const char *best = NULL;
  guint best_d = G_MAXUINT;
  for (const char *const *c = candidates; *c; c++)
    {
      guint d = edit_distance (word, *c);
      if (d < best_d)
        {
          best_d = d;
          best = *c;
        }
    }
  /* Close enough: at most a third of the word's letters wrong (and at least one allowed). */
  return best_d <= MAX (1u, (guint) strlen (word) / 3) ? best : NULL;
}

void
mp_yaml_check_keys (MpYamlReader *r, const MpYamlNode *map, const char *const *allowed)
{
  if (map == NULL || map->kind != MP_YAML_MAP)
    return;
  for (guint i = 0; i < map->keys->len; i++)
    {
      const MpYamlNode *k = g_ptr_array_index (map->keys, i);
      if (g_strv_contains (allowed, k->value))
        continue;
      const char *hint = mp_yaml_suggest (k->value, allowed);
      if (hint)
        mp_yaml_problem (r, k, "unknown key '%s' (did you mean '%s'?)", k->value, hint);
      else
        mp_yaml_problem (r, k, "unknown key '%s'", k->value);
    }
}

/* Finds KEY; records a missing required key. Returns the scalar or NULL. */
static const MpYamlNode *
get_scalar (MpYamlReader *r, const MpYamlNode *map, const char *key, gboolean required)
{
  const MpYamlNode *v = mp_yaml_lookup (map, key);
  if (v == NULL)
    {
      if (required)
        mp_yaml_problem (r, map, "missing required key '%s'", key);
      return NULL;
    }
  if (v->kind != MP_YAML_SCALAR)
    {
      mp_yaml_problem (r, v, "'%s' must be a single value, not a %s", key,
                       v->kind == MP_YAML_MAP ? "mapping" : "list");
      return NULL;
    }
  return v;
}

gboolean
mp_yaml_get_string (MpYamlReader *r, const MpYamlNode *map, const char *key, gboolean required,
                    const char **out)
{
  const MpYamlNode *v = get_scalar (r, map, key, required);
  if (v == NULL)
    return FALSE;
  if (v->value[0] == '\0')
    {
      mp_yaml_problem (r, v, "'%s' is empty", key);
      return FALSE;
    }
  *out = v->value;
  return TRUE;
}

gboolean
mp_yaml_get_bool (MpYamlReader *r, const MpYamlNode *map, const char *key, gboolean required,
                  gboolean *out)
{
  static const char *const yes[] = { "true", "True", "TRUE", "yes", "on", NULL };
  static const char *const no[] = { "false", "False", "FALSE", "no", "off", NULL };
  const MpYamlNode *v = get_scalar (r, map, key, required);
  if (v == NULL)
    return FALSE;
  if (g_strv_contains (yes, v->value))
    *out = TRUE;
  else if (g_strv_contains (no, v->value))
    *out = FALSE;
  else
    {
      mp_yaml_problem (r, v, "'%s' must be true or false, not '%s'", key, v->value);
      return FALSE;
    }
  return TRUE;
}

gboolean
mp_yaml_get_uint (MpYamlReader *r, const MpYamlNode *map, const char *key, gboolean required,
                  guint64 min, guint64 max, guint64 *out)
{
  const MpYamlNode *v = get_scalar (r, map, key, required);
  if (v == NULL)
    return FALSE;
  const char *s = v->value;
  if (!g_ascii_isdigit (s[0]))
    {
      mp_yaml_problem (r, v, "'%s' must be a whole number, not '%s'", key, s);
      return FALSE;
    }
  errno = 0;
  char *end = NULL;
  guint64 n = g_ascii_strtoull (s, &end, 10);
  if (*end != '\0')
    {
      mp_yaml_problem (r, v, "'%s' must be a whole number, not '%s'", key, s);
      return FALSE;
    }
  if (errno == ERANGE || n > max || n < min)
    {
      mp_yaml_problem (r, v, "'%s' = %s is out of range [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
                       "]", key, s, min, max);
      return FALSE;
    }
  *out = n;
  return TRUE;
}

gboolean
mp_yaml_scalar_quantity (MpYamlReader *r, const MpYamlNode *node, MpUnitKind kind,
                         gboolean allow_zero, double *out)
{
  if (node == NULL || node->kind != MP_YAML_SCALAR)
    {
      mp_yaml_problem (r, node, "expected a single value");
      return FALSE;
    }
  g_autoptr(GError) e = NULL;
  double v;
  if (!mp_units_parse (node->value, kind, &v, &e))
    {
      mp_yaml_problem (r, node, "%s", e->message);
      return FALSE;
    }
  if (v == 0 && !allow_zero)
    {
      mp_yaml_problem (r, node, "'%s' must be greater than zero", node->value);
      return FALSE;
    }
  *out = v;
  return TRUE;
}

gboolean
mp_yaml_get_quantity (MpYamlReader *r, const MpYamlNode *map, const char *key, MpUnitKind kind,
                      gboolean required, gboolean allow_zero, double *out)
{
  const MpYamlNode *v = get_scalar (r, map, key, required);
  if (v == NULL)
    return FALSE;
  g_autoptr(GError) e = NULL;
  double x;
  if (!mp_units_parse (v->value, kind, &x, &e))
    {
      mp_yaml_problem (r, v, "'%s': %s", key, e->message);
      return FALSE;
    }
  if (x == 0 && !allow_zero)
    {
      mp_yaml_problem (r, v, "'%s' must be greater than zero", key);
      return FALSE;
    }
  *out = x;
  return TRUE;
}

gboolean
mp_yaml_get_enum (MpYamlReader *r, const MpYamlNode *map, const char *key, gboolean required,
                  const char *const *names, int *out)
{
  const MpYamlNode *v = get_scalar (r, map, key, required);
  if (v == NULL)
    return FALSE;
  for (int i = 0; names[i]; i++)
    if (g_ascii_strcasecmp (names[i], v->value) == 0)
      {
        *out = i;
        return TRUE;
      }
  g_autofree char *list = g_strjoinv (" | ", (char **) names);
  const char *hint = mp_yaml_suggest (v->value, names);
  if (hint)
    mp_yaml_problem (r, v, "'%s': unknown value '%s' (did you mean '%s'?; one of %s)", key,
                     v->value, hint, list);
  else
    mp_yaml_problem (r, v, "'%s': unknown value '%s' (one of %s)", key, v->value, list);
  return FALSE;
}
