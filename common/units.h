/* units.h - the one parser and printer of human units, and the numeric dtypes.
 *
 * Inside mpplan every quantity is a double in SI base units (bytes, seconds, FLOP,
 * bytes/s, FLOP/s). Files accept human units ("80 GiB", "2039 GB/s", "200 Gb/s",
 * "312 TFLOPS", "3 us") or plain numbers in base units; output prints them back. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  MP_UNIT_COUNT,    /* plain number, optional k/M/B/G/T suffix (1e3 steps) */
  MP_UNIT_BYTES,    /* B, kB/MB/GB/TB (1e3), KiB/MiB/GiB/TiB (2^10) */
  MP_UNIT_BPS,      /* bytes/s: B/s, GB/s, GiB/s, ...; bits: Gb/s, Gbps (/8) */
  MP_UNIT_FLOPS,    /* FLOP/s: FLOPS, GFLOPS, TFLOPS, PFLOPS (also TFLOP/s) */
  MP_UNIT_SECONDS,  /* s, ms, us (or µs), ns */
} MpUnitKind;

/* Numeric formats. Ordered by the size of one element only where noted. */
typedef enum {
  MP_DTYPE_FP32,
  MP_DTYPE_TF32,   /* fp32 storage, tensor-core math */
  MP_DTYPE_BF16,
  MP_DTYPE_FP16,
  MP_DTYPE_FP8,
  MP_DTYPE_N
} MpDtype;

/* Parses TEXT as a quantity of KIND into *OUT (base units). FALSE with MP_ERROR_INPUT and a
 * message (no location: the caller adds it) for junk, a wrong unit, a negative, NaN or an
 * overflowing value. */
gboolean mp_units_parse (const char *text, MpUnitKind kind, double *out, GError **error);

/* Formats VALUE of KIND in a human unit with 3-4 significant digits; caller owns. */
char *mp_units_format (double value, MpUnitKind kind);

/* Bytes per element of a dtype (tf32 is stored as 4 bytes). */
double mp_dtype_bytes (MpDtype dtype);
/* Lower-case name ("bf16"); NULL-safe inverse returns FALSE for an unknown name. */
const char *mp_dtype_name (MpDtype dtype);
gboolean mp_dtype_from_name (const char *name, MpDtype *out);

G_END_DECLS
