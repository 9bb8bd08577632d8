/* bench-util.h - what the benchmarks share: a monotonic clock and order statistics.
 * Machines are shared and noisy: benchmarks quote medians (with min and max). */
#pragma once
#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double
bench_now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static inline int
bench_cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* Sorts V[0..N-1] in place and returns its median. */
static inline double
bench_median (double *v, size_t n)
{
  qsort (v, n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
