/* stats.h - order statistics of small samples: the medians and spreads that calibration,
 * measurement and report take over repeated timings. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* Sorts X[N] in place, ascending. */
void mp_stat_sort (double *x, guint n);
/* The Q-quantile (0 <= Q <= 1) of sorted X[N] (N >= 1), linear between order statistics
 * (numpy.percentile's default). */
double mp_stat_quantile (const double *x, guint n, double q);
/* The median of X[N] (N >= 1; X is sorted in place) and, when REL_IQR is not NULL, the
 * interquartile range over the median (0 when the median is 0). */
double mp_stat_median (double *x, guint n, double *rel_iqr);

G_END_DECLS
