/* bench-util.h - what the benchmarks share: a monotonic clock. Machines are shared and
 * noisy: benchmarks quote medians (with min and max), from common/stats.h. */
#pragma once
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double
bench_now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}
