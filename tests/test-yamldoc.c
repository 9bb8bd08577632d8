/* test-yamldoc.c - the YAML tree and the schema reader: hostile input is refused with a
 * located message, and a reader reports every problem, not only the first. */
#include "tests/test-util.h"
#include "common/error.h"
#include "common/yamldoc.h"

#include <string.h>

/* Loads TEXT and expects failure with a message containing EXPECT. */
static void
load_fails (const char *text, gsize len, const char *expect)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MpYamlDoc) doc = mp_yaml_load_data ("t.yaml", text, len, &error);
  assert_null (doc);
  assert_non_null (error);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  if (strstr (error->message, expect) == NULL || strncmp (error->message, "t.yaml:", 7) != 0)
    fail_msg ("message '%s' is not located or lacks '%s'", error->message, expect);
}

static MpYamlDoc *
load_ok (const char *text)
{
  g_autoptr(GError) error = NULL;
  MpYamlDoc *doc = mp_yaml_load_data ("t.yaml", text, strlen (text), &error);
  if (doc == NULL)
    fail_msg ("did not load: %s", error->message);
  return doc;
}

static void
test_yamldoc_builds_tree_with_marks (void **state)
{
  g_autoptr(MpYamlDoc) doc = load_ok ("a: 1\nb:\n  - x\n  - {c: 2}\n");
  assert_int_equal (doc->root->kind, MP_YAML_MAP);
  const MpYamlNode *b = mp_yaml_lookup (doc->root, "b");
  assert_non_null (b);
  assert_int_equal (b->kind, MP_YAML_SEQ);
  assert_int_equal (b->items->len, 2);
  const MpYamlNode *c = mp_yaml_lookup (g_ptr_array_index (b->items, 1), "c");
  assert_string_equal (c->value, "2");
  assert_int_equal (c->line, 4);
  assert_int_equal (c->column, 9);
}

static void
test_yamldoc_refuses_duplicate_keys (void **state)
{
  load_fails ("a: 1\nb: 2\na: 3\n", 15, "t.yaml:3:1: duplicate key 'a' (first at line 1)");
}

static void
test_yamldoc_refuses_aliases (void **state)
{
  const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n"
                     "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n";
  load_fails (bomb, strlen (bomb), "aliases");
}

static void
test_yamldoc_refuses_deep_nesting (void **state)
{
  GString *s = g_string_new (NULL);
  for (int i = 0; i < 1000; i++)
    g_string_append_c (s, '[');
  load_fails (s->str, s->len, "nesting deeper");
  g_string_free (s, TRUE);
}

static void
test_yamldoc_refuses_empty_binary_and_multidoc (void **state)
{
  load_fails ("", 0, "empty file");
  load_fails ("# only a comment\n", 17, "empty file");
  const char garbage[] = { 'a', ':', ' ', '\x01', '\xff', '\xfe', 0, 'z' };
  load_fails (garbage, sizeof garbage, "malformed YAML");
  load_fails ("a: 1\n---\nb: 2\n", 14, "more than one YAML document");
  load_fails ("a: [1, 2\n", 9, "malformed YAML");
}

static void
test_yamldoc_refuses_directory_and_missing_file (void **state)
{
  g_autoptr(GError) e1 = NULL, e2 = NULL;
  assert_null (mp_yaml_load ("/", &e1));
  assert_true (g_error_matches (e1, MP_ERROR, MP_ERROR_IO));
  assert_non_null (strstr (e1->message, "directory"));
  assert_null (mp_yaml_load ("/nonexistent/x.yaml", &e2));
  assert_true (g_error_matches (e2, MP_ERROR, MP_ERROR_IO));
}

static void
test_yamldoc_reader_collects_every_problem (void **state)
{
  g_autoptr(MpYamlDoc) doc = load_ok ("name: x\nlayrs: 3\nhidden: -4\nsize: 80 GiBB\n");
  static const char *const allowed[] = { "name", "layers", "hidden", "size", NULL };
  MpYamlReader r;
  mp_yaml_reader_init (&r, doc);
  mp_yaml_check_keys (&r, doc->root, allowed);
  guint64 layers = 7, hidden = 0;
  double size = 0;
  assert_false (mp_yaml_get_uint (&r, doc->root, "layers", TRUE, 1, 1000, &layers));
  assert_false (mp_yaml_get_uint (&r, doc->root, "hidden", TRUE, 1, 1000, &hidden));
  assert_false (mp_yaml_get_quantity (&r, doc->root, "size", MP_UNIT_BYTES, TRUE, FALSE, &size));
  assert_int_equal (layers, 7);
  g_autoptr(GError) error = NULL;
  assert_false (mp_yaml_reader_finish (&r, &error));
  mp_yaml_reader_clear (&r);
  g_auto (GStrv) lines = g_strsplit (error->message, "\n", -1);
  assert_int_equal (g_strv_length (lines), 4);
  assert_non_null (strstr (lines[0], "t.yaml:2:1: unknown key 'layrs' (did you mean 'layers'?)"));
  assert_non_null (strstr (lines[1], "missing required key 'layers'"));
  assert_non_null (strstr (lines[2], "t.yaml:3:9: 'hidden' must be a whole number"));
  assert_non_null (strstr (lines[3], "t.yaml:4:7:"));
}

static void
test_yamldoc_typed_getters_accept_good_values (void **state)
{
  g_autoptr(MpYamlDoc) doc = load_ok ("n: 96\nbw: 300 GB/s\non: yes\nact: GeLU\ns: hi\n");
  static const char *const acts[] = { "relu", "gelu", "swiglu", NULL };
  MpYamlReader r;
  mp_yaml_reader_init (&r, doc);
  guint64 n;
  double bw;
  gboolean on = FALSE;
  int act = -1;
  const char *s = NULL;
  assert_true (mp_yaml_get_uint (&r, doc->root, "n", TRUE, 1, 100, &n));
  assert_true (mp_yaml_get_quantity (&r, doc->root, "bw", MP_UNIT_BPS, TRUE, FALSE, &bw));
  assert_true (mp_yaml_get_bool (&r, doc->root, "on", TRUE, &on));
  assert_true (mp_yaml_get_enum (&r, doc->root, "act", TRUE, acts, &act));
  assert_true (mp_yaml_get_string (&r, doc->root, "s", TRUE, &s));
  assert_true (mp_yaml_reader_finish (&r, NULL));
  mp_yaml_reader_clear (&r);
  assert_int_equal (n, 96);
  mp_assert_close (bw, 300e9, 1e-15);
  assert_true (on);
  assert_int_equal (act, 1);
  assert_string_equal (s, "hi");
}

static void
test_yamldoc_suggest_needs_a_close_match (void **state)
{
  static const char *const keys[] = { "devices_per_node", "nodes", "links", NULL };
  assert_string_equal (mp_yaml_suggest ("devices_per_nod", keys), "devices_per_node");
  assert_string_equal (mp_yaml_suggest ("Nodes", keys), "nodes");
  assert_null (mp_yaml_suggest ("colour", keys));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_yamldoc_builds_tree_with_marks),
    cmocka_unit_test (test_yamldoc_refuses_duplicate_keys),
    cmocka_unit_test (test_yamldoc_refuses_aliases),
    cmocka_unit_test (test_yamldoc_refuses_deep_nesting),
    cmocka_unit_test (test_yamldoc_refuses_empty_binary_and_multidoc),
    cmocka_unit_test (test_yamldoc_refuses_directory_and_missing_file),
    cmocka_unit_test (test_yamldoc_reader_collects_every_problem),
    cmocka_unit_test (test_yamldoc_typed_getters_accept_good_values),
    cmocka_unit_test (test_yamldoc_suggest_needs_a_close_match),
  };
  return cmocka_run_group_tests_name ("yamldoc", tests, NULL, NULL);
}
