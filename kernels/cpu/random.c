/* random.c - fills from the counter-based generator of kernels.h (mpk_rng_u64): the value
 * of an element depends only on (seed, stream, its index in the full tensor), so every
 * parallel layout generates bit-identical weights and data for the elements it holds. */
#include "kernels/cpu/kernels.h"

#include <math.h>

/* Uniform in [0, 1) from the top 24 bits: exactly representable as a float. */
static double
unit_uniform (uint64_t bits)
{
  return (double) (bits >> 40) * (1.0 / 16777216.0);
}

/* Standard normal by Box-Muller: u1 in (0, 1] from the high 32 bits (never log 0), u2 in
 * [0, 1) from the low 32 bits. One draw per element, so elements stay independent. */
static double
unit_normal (uint64_t bits)
{
  double u1 = ((double) (bits >> 32) + 1.0) * (1.0 / 4294967296.0);
  double u2 = (double) (bits & UINT64_C (0xffffffff)) * (1.0 / 4294967296.0);
  return sqrt (-2.0 * log (u1)) * cos (6.283185307179586 * u2);
}

void
mpk_cpu_fill_uniform (float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                      float lo, float hi)
{
  for (size_t j = 0; j < n; j++)
    out[j] = (float) (lo + (hi - (double) lo) * unit_uniform (mpk_rng_u64 (seed, stream,
                                                                          offset + j)));
}

void
mpk_cpu_fill_normal (float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                     float mean, float std)
{
  for (size_t j = 0; j < n; j++)
    out[j] = (float) (mean + std * unit_normal (mpk_rng_u64 (seed, stream, offset + j)));
}

/* Multiply-shift maps the high 32 bits onto [0, vocab) without a division; the bias is
 * below vocab / 2^32. */
void
mpk_cpu_fill_tokens (int *out, size_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                     int vocab)
{
  for (size_t j = 0; j < n; j++)
    {
      uint64_t hi = mpk_rng_u64 (seed, stream, offset + j) >> 32;
      out[j] = (int) ((hi * (uint64_t) vocab) >> 32);
    }
}

void
mpk_cpu_fill_uniform_block (float *out, uint64_t seed, uint64_t stream, size_t full_cols,
                            size_t r0, size_t rows, size_t c0, size_t cols, float lo, float hi)
{
  for (size_t r = 0; r < rows; r++)
    mpk_cpu_fill_uniform (out + r * cols, cols, seed, stream, (r0 + r) * full_cols + c0, lo,
                          hi);
}

void
mpk_cpu_fill_normal_block (float *out, uint64_t seed, uint64_t stream, size_t full_cols,
                           size_t r0, size_t rows, size_t c0, size_t cols, float mean,
                           float std)
{
  for (size_t r = 0; r < rows; r++)
    mpk_cpu_fill_normal (out + r * cols, cols, seed, stream, (r0 + r) * full_cols + c0, mean,
                         std);
}
