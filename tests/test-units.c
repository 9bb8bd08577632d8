/* test-units.c - the human-units parser and printer, alone. */
#include "tests/test-util.h"
#include "common/error.h"
#include "common/units.h"

#include <string.h>

static double
parse_ok (const char *text, MpUnitKind kind)
{
  double v = -1;
  g_autoptr(GError) error = NULL;
  gboolean ok = mp_units_parse (text, kind, &v, &error);
  if (!ok)
    fail_msg ("'%s' did not parse: %s", text, error->message);
  return v;
}

static void
parse_fails (const char *text, MpUnitKind kind, const char *expect)
{
  double v = 42;
  g_autoptr(GError) error = NULL;
  assert_false (mp_units_parse (text, kind, &v, &error));
  assert_non_null (error);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  if (strstr (error->message, expect) == NULL)
    fail_msg ("'%s': message '%s' lacks '%s'", text, error->message, expect);
  assert_true (v == 42); /* untouched on failure */
}

static void
test_units_bytes_binary_and_decimal (void **state)
{
  mp_assert_close (parse_ok ("80 GiB", MP_UNIT_BYTES), 80.0 * 1073741824.0, 1e-15);
  mp_assert_close (parse_ok ("40GB", MP_UNIT_BYTES), 40e9, 1e-15);
  mp_assert_close (parse_ok ("512 KiB", MP_UNIT_BYTES), 512.0 * 1024, 1e-15);
  mp_assert_close (parse_ok ("1024", MP_UNIT_BYTES), 1024, 1e-15);
}

static void
test_units_bandwidth_bytes_and_bits (void **state)
{
  mp_assert_close (parse_ok ("2039 GB/s", MP_UNIT_BPS), 2039e9, 1e-15);
  mp_assert_close (parse_ok ("200 Gb/s", MP_UNIT_BPS), 25e9, 1e-15);
  mp_assert_close (parse_ok ("400 Gbps", MP_UNIT_BPS), 50e9, 1e-15);
  mp_assert_close (parse_ok ("4.8 TB/s", MP_UNIT_BPS), 4.8e12, 1e-15);
}

static void
test_units_flops_and_time (void **state)
{
  mp_assert_close (parse_ok ("312 TFLOPS", MP_UNIT_FLOPS), 312e12, 1e-15);
  mp_assert_close (parse_ok ("989.4 TFLOP/s", MP_UNIT_FLOPS), 989.4e12, 1e-15);
  mp_assert_close (parse_ok ("3 us", MP_UNIT_SECONDS), 3e-6, 1e-15);
  mp_assert_close (parse_ok ("5 \xc2\xb5s", MP_UNIT_SECONDS), 5e-6, 1e-15);
  mp_assert_close (parse_ok ("1.5 ms", MP_UNIT_SECONDS), 1.5e-3, 1e-15);
  mp_assert_close (parse_ok ("2e-6", MP_UNIT_SECONDS), 2e-6, 1e-15);
}

static void
test_units_count_suffixes (void **state)
{
  mp_assert_close (parse_ok ("175B", MP_UNIT_COUNT), 175e9, 1e-15);
  mp_assert_close (parse_ok ("7 M", MP_UNIT_COUNT), 7e6, 1e-15);
}

static void
test_units_rejects_bad_text (void **state)
{
  parse_fails ("fast", MP_UNIT_BPS, "is not");
  parse_fails ("80 GiBB", MP_UNIT_BYTES, "unknown unit 'GiBB'");
  parse_fails ("300 GB/s", MP_UNIT_BYTES, "unknown unit");
  parse_fails ("-5 us", MP_UNIT_SECONDS, "negative");
  parse_fails ("nan", MP_UNIT_COUNT, "is not");
  parse_fails ("inf TFLOPS", MP_UNIT_FLOPS, "is not");
  parse_fails ("0x10", MP_UNIT_COUNT, "unknown unit");
  parse_fails ("", MP_UNIT_COUNT, "is not");
  parse_fails ("1e999 GB", MP_UNIT_BYTES, "overflows");
  parse_fails ("1e299 PFLOPS", MP_UNIT_FLOPS, "overflows");
}

static void
test_units_format_round_trips (void **state)
{
  const struct { double v; MpUnitKind k; const char *s; } cases[] = {
    { 80.0 * 1073741824.0, MP_UNIT_BYTES, "80 GiB" },
    { 2039e9, MP_UNIT_BPS, "2.039 TB/s" },
    { 312e12, MP_UNIT_FLOPS, "312 TFLOP/s" },
    { 3e-6, MP_UNIT_SECONDS, "3 us" },
    { 174.6e9, MP_UNIT_COUNT, "174.6B" },
    { 1.3e9, MP_UNIT_COUNT, "1.3B" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *s = mp_units_format (cases[i].v, cases[i].k);
      assert_string_equal (s, cases[i].s);
    }
}

static void
test_units_dtype_names_and_sizes (void **state)
{
  MpDtype d;
  assert_true (mp_dtype_from_name ("BF16", &d));
  assert_int_equal (d, MP_DTYPE_BF16);
  assert_true (mp_dtype_bytes (d) == 2);
  assert_true (mp_dtype_bytes (MP_DTYPE_TF32) == 4);
  assert_false (mp_dtype_from_name ("fp64", &d));
  assert_string_equal (mp_dtype_name (MP_DTYPE_FP8), "fp8");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_units_bytes_binary_and_decimal),
    cmocka_unit_test (test_units_bandwidth_bytes_and_bits),
    cmocka_unit_test (test_units_flops_and_time),
    cmocka_unit_test (test_units_count_suffixes),
    cmocka_unit_test (test_units_rejects_bad_text),
    cmocka_unit_test (test_units_format_round_trips),
    cmocka_unit_test (test_units_dtype_names_and_sizes),
  };
  return cmocka_run_group_tests_name ("units", tests, NULL, NULL);
}
