/* units.c - human units <-> SI base units. One table per kind; suffixes are matched
 * case-sensitively where case carries meaning (Gb/s is bits, GB/s bytes). */
#include "common/units.h"
#include "common/error.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *suffix;
  double scale;
} Suffix;

static const Suffix count_suffixes[] = {
  { "", 1 }, { "k", 1e3 }, { "K", 1e3 }, { "M", 1e6 }, { "B", 1e9 }, { "G", 1e9 }, { "T", 1e12 },
  { NULL, 0 }
};
static const Suffix byte_suffixes[] = {
  { "", 1 }, { "B", 1 }, { "kB", 1e3 }, { "KB", 1e3 }, { "MB", 1e6 }, { "GB", 1e9 },
  { "TB", 1e12 }, { "KiB", 1024.0 }, { "MiB", 1048576.0 }, { "GiB", 1073741824.0 },
  { "TiB", 1099511627776.0 }, { NULL, 0 }
};
static const Suffix bps_suffixes[] = {
  { "", 1 }, { "B/s", 1 }, { "kB/s", 1e3 }, { "MB/s", 1e6 }, { "GB/s", 1e9 }, { "TB/s", 1e12 },
  { "KiB/s", 1024.0 }, { "MiB/s", 1048576.0 }, { "GiB/s", 1073741824.0 },
  { "b/s", 1.0 / 8 }, { "kb/s", 1e3 / 8 }, { "Mb/s", 1e6 / 8 }, { "Gb/s", 1e9 / 8 },
  { "Tb/s", 1e12 / 8 }, { "Mbps", 1e6 / 8 }, { "Gbps", 1e9 / 8 }, { "Tbps", 1e12 / 8 },
  { "GBps", 1e9 }, { NULL, 0 }
};
static const Suffix flops_suffixes[] = {
  { "", 1 }, { "FLOPS", 1 }, { "FLOP/s", 1 }, { "GFLOPS", 1e9 }, { "GFLOP/s", 1e9 },
  { "TFLOPS", 1e12 }, { "TFLOP/s", 1e12 }, { "PFLOPS", 1e15 }, { "PFLOP/s", 1e15 },
  { NULL, 0 }
};
static const Suffix second_suffixes[] = {
  { "", 1 }, { "s", 1 }, { "ms", 1e-3 }, { "us", 1e-6 }, { "\xc2\xb5s", 1e-6 }, { "ns", 1e-9 },
  { NULL, 0 }
};

static const Suffix *
suffixes_for (MpUnitKind kind)
{
  switch (kind)
    {
    case MP_UNIT_BYTES: return byte_suffixes;
    case MP_UNIT_BPS: return bps_suffixes;
    case MP_UNIT_FLOPS: return flops_suffixes;
    case MP_UNIT_SECONDS: return second_suffixes;
    case MP_UNIT_COUNT:
    default: return count_suffixes;
    }
}

/* The largest quantity of each kind a file may give: far above any machine or model
 * (1 EB of memory, 10 PB/s of bandwidth, 1 ZFLOP/s per device, 30 years, 1e18 of a
 * count: a B200's dense FP8 is 4.5 PFLOP/s, an NVLink 5 port 900 GB/s), so that an
 * absurd figure is refused where it is written, not carried into the arithmetic. */
static double
max_for (MpUnitKind kind)
{
  switch (kind)
    {
    case MP_UNIT_BYTES: return 1e18;
    case MP_UNIT_BPS: return 1e16;
    case MP_UNIT_FLOPS: return 1e21;
    case MP_UNIT_SECONDS: return 1e9;
    case MP_UNIT_COUNT:
    default: return 1e18;
    }
}

static const char *
kind_name (MpUnitKind kind)
{
  static const char *names[] = { "a number", "a size in bytes", "a bandwidth",
                                 "a FLOP rate", "a time" };
  return names[kind];
}

/* Length of the decimal number at P: [+-]digits[.digits][e[+-]digits]; 0 if none. */
static gsize
scan_decimal (const char *p)
{
  const char *q = p;
  gsize digits = 0;
  if (*q == '+' || *q == '-')
    q++;
  for (; g_ascii_isdigit (*q); q++)
    digits++;
  if (*q == '.')
    for (q++; g_ascii_isdigit (*q); q++)
      digits++;
  if (digits == 0)
    return 0;
  if (*q == 'e' || *q == 'E')
    {
      const char *e = q + 1;
      if (*e == '+' || *e == '-')
        e++;
      if (g_ascii_isdigit (*e))
        {
          while (g_ascii_isdigit (*e))
            e++;
          q = e;
        }
    }
  return (gsize) (q - p);
}

gboolean
mp_units_parse (const char *text, MpUnitKind kind, double *out, GError **error)
{
  g_return_val_if_fail (text != NULL && out != NULL, FALSE);

  const char *p = text;
  while (g_ascii_isspace (*p))
    p++;
  /* Scan a plain decimal number ourselves: strtod would also take "nan", "inf", hex. */
  gsize n = scan_decimal (p);
  if (n == 0)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "'%s' is not %s", text, kind_name (kind));
      return FALSE;
    }
  g_autofree char *number = g_strndup (p, n);
  errno = 0;
  double v = g_ascii_strtod (number, NULL);
  const char *end = p + n;
  if (errno == ERANGE || !isfinite (v))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "'%s' overflows", text);
      return FALSE;
    }
  if (v < 0)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "'%s' is negative", text);
      return FALSE;
    }
  while (g_ascii_isspace (*end))
    end++;
  g_autofree char *suffix = g_strdup (end);
  g_strchomp (suffix);

  for (const Suffix *s = suffixes_for (kind); s->suffix; s++)
    if (strcmp (s->suffix, suffix) == 0)
      {
        double r = v * s->scale;
        if (!isfinite (r))
          {
            g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "'%s' overflows", text);
            return FALSE;
          }
        if (fabs (r) > max_for (kind))
          {
            g_autofree char *max = mp_units_format (max_for (kind), kind);
            g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "'%s' is more than %s, too large "
                         "for %s", text, max, kind_name (kind));
            return FALSE;
          }
        *out = r;
        return TRUE;
      }
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "'%s': unknown unit '%s' for %s", text, suffix,
               kind_name (kind));
  return FALSE;
}

/* Picks the largest prefix that keeps the mantissa >= 1. */
static char *
format_scaled (double v, const char *const *units, const double *scales, int n,
               const char *sep)
{
  int i = n - 1;
  while (i > 0 && fabs (v) < scales[i])
    i--;
  double m = v / scales[i];
  /* Four significant digits, trailing zeros dropped: "174.6B", "2.039 TB/s", "80 GiB". */
  int decimals = fabs (m) >= 100 ? 1 : fabs (m) >= 10 ? 2 : 3;
  char num[64];
  g_snprintf (num, sizeof num, "%.*f", decimals, m);
  if (strchr (num, '.'))
    {
      char *z = num + strlen (num) - 1;
      while (*z == '0')
        *z-- = '\0';
      if (*z == '.')
        *z = '\0';
    }
  return g_strdup_printf ("%s%s%s", num, *units[i] ? sep : "", units[i]);
}

char *
mp_units_format (double value, MpUnitKind kind)
{
  static const char *bytes_u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
  static const double bytes_s[] = { 1, 1024.0, 1048576.0, 1073741824.0, 1099511627776.0,
                                    1125899906842624.0 };
  static const char *bps_u[] = { "B/s", "kB/s", "MB/s", "GB/s", "TB/s" };
  static const char *flops_u[] = { "FLOP/s", "kFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s",
                                   "PFLOP/s", "EFLOP/s" };
  static const char *count_u[] = { "", "k", "M", "B", "T", "P" };
  static const double dec[] = { 1, 1e3, 1e6, 1e9, 1e12, 1e15, 1e18 };
  static const char *sec_u[] = { "ns", "us", "ms", "s" };
  static const double sec_s[] = { 1e-9, 1e-6, 1e-3, 1 };

  switch (kind)
    {
    case MP_UNIT_BYTES: return format_scaled (value, bytes_u, bytes_s, 6, " ");
    case MP_UNIT_BPS: return format_scaled (value, bps_u, dec, 5, " ");
    case MP_UNIT_FLOPS: return format_scaled (value, flops_u, dec, 7, " ");
    case MP_UNIT_SECONDS:
      if (value == 0)
        return g_strdup ("0 s");
      return format_scaled (value, sec_u, sec_s, 4, " ");
    case MP_UNIT_COUNT:
    default:
      return format_scaled (value, count_u, dec, 6, "");
    }
}

static const char *const dtype_names[MP_DTYPE_N] = { "fp32", "tf32", "bf16", "fp16", "fp8" };
static const double dtype_bytes[MP_DTYPE_N] = { 4, 4, 2, 2, 1 };

double
mp_dtype_bytes (MpDtype dtype)
{
  g_return_val_if_fail (dtype < MP_DTYPE_N, 4);
  return dtype_bytes[dtype];
}

const char *
mp_dtype_name (MpDtype dtype)
{
  g_return_val_if_fail (dtype < MP_DTYPE_N, "?");
  return dtype_names[dtype];
}

gboolean
mp_dtype_from_name (const char *name, MpDtype *out)
{
  for (int i = 0; i < MP_DTYPE_N; i++)
    if (name && g_ascii_strcasecmp (name, dtype_names[i]) == 0)
      {
        *out = (MpDtype) i;
        return TRUE;
      }
  return FALSE;
}
