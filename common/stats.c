/* stats.c - order statistics of small samples (see stats.h). */
#include "config.h"
#include "common/stats.h"

#include <math.h>
#include <stdlib.h>

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

void
mp_stat_sort (double *x, guint n)
{
  if (n > 1)
    qsort (x, n, sizeof *x, cmp_double);
}

double
mp_stat_quantile (const double *x, guint n, double q)
{
  g_return_val_if_fail (x != NULL && n >= 1, 0);
  double pos = q * (n - 1);
  guint i = (guint) pos;
  return i + 1 < n ? x[i] + (pos - i) * (x[i + 1] - x[i]) : x[n - 1];
}

double
mp_stat_median (double *x, guint n, double *rel_iqr)
{
  g_return_val_if_fail (x != NULL && n >= 1, 0);
  mp_stat_sort (x, n);
  double med = mp_stat_quantile (x, n, 0.5);
  if (rel_iqr)
    *rel_iqr = med != 0
                 ? (mp_stat_quantile (x, n, 0.75) - mp_stat_quantile (x, n, 0.25)) / fabs (med)
                 : 0;
  return med;
}
