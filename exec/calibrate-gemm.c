/* calibrate-gemm.c - the GEMM grid of `mpplan calibrate`: M over powers of two (of four
 * when quick) and the zoo's token counts, N = K over powers of two and every GEMM
 * dimension of the zoo's models (whole and split over 2 tensor-parallel ranks), each cell
 * timed through the backend's matmul_forward (MpKernelOps) for each dtype the backend
 * measures, its median over the passes kept. Units: seconds, FLOP/s. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/calibrate-private.h"
#include "model/model.h"
#include "common/stats.h"

#include <math.h>
#include <string.h>

/* The dimensions of MODELS: every GEMM's n and k (M is tokens), whole and split over 2
 * tensor-parallel ranks, and their sequence lengths as token counts. */
static void
zoo_dims (const char *const *models, GArray *nk, GArray *m, double lo, double hi)
{
  for (int i = 0; models[i]; i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(MpModel) model = mp_model_load (models[i], &error);
      if (model == NULL)
        {
          g_debug ("zoo model %s: %s", models[i], error->message);
          continue;
        }
      cal_axis_add (m, (double) model->seq_len, lo, hi);
      for (guint l = 0; l < model->n_layers; l++)
        for (guint o = 0; o < model->layers[l].n_ops; o++)
          {
            const MpOp *op = &model->layers[l].ops[o];
            if (op->kind != MP_OP_GEMM)
              continue;
            for (int t = 1; t <= 2; t++)
              {
                cal_axis_add (nk, op->gemm_n / t, lo, hi);
                cal_axis_add (nk, op->gemm_k / t, lo, hi);
              }
          }
    }
}

/* Seconds per GEMM of M x N x K (slowest rank), after a warm-up, over REPS runs. The
 * backend's clock synchronises its device, so the time is the device's; a failed launch
 * surfaces through wait (NULL). */
static gboolean
time_gemm (Cal *c, float *out, const float *a, const float *w, int m, int n, int k,
           double *time_s, GError **error)
{
  MpBackend *be = c->be;
  double flops = 2.0 * m * n * k;
  int reps = (int) CLAMP ((c->quick ? c->dev->gemm_flops_quick : c->dev->gemm_flops) / flops,
                          1, 200);
  be->ops->kernels->matmul_forward (be, out, a, w, NULL, m, k, n);
  if (!be->ops->wait (be, NULL, error) || !cal_barrier (c, error))
    return FALSE;
  double t0 = be->ops->now_s (be);
  for (int r = 0; r < reps; r++)
    be->ops->kernels->matmul_forward (be, out, a, w, NULL, m, k, n);
  *time_s = (be->ops->now_s (be) - t0) / reps;
  if (!be->ops->wait (be, NULL, error))
    return FALSE;
  return cal_max_over_ranks (c, time_s, error);
}

/* Prints a few rows of the grid (its cube diagonal) and the range of rates. */
static void
print_gemm_summary (Cal *c, MpDtype dtype, GArray *axes[3], const double *rate)
{
  if (c->out == NULL)
    return;
  double lo = G_MAXDOUBLE, hi = 0;
  gsize cells = (gsize) axes[0]->len * axes[1]->len * axes[2]->len;
  for (gsize i = 0; i < cells; i++)
    lo = MIN (lo, rate[i]), hi = MAX (hi, rate[i]);
  fprintf (c->out, "#      M       N       K     GFLOP/s   (M = N = K rows of the grid)\n");
  for (guint i = 0; i < axes[0]->len; i++)
    for (guint j = 0; j < axes[1]->len; j++)
      for (guint l = 0; l < axes[2]->len; l++)
        {
          double m = g_array_index (axes[0], double, i);
          if (m != g_array_index (axes[1], double, j) || m != g_array_index (axes[2], double, l))
            continue;
          fprintf (c->out, "  %7.0f %7.0f %7.0f  %10.2f\n", m, m, m,
                   rate[((gsize) i * axes[1]->len + j) * axes[2]->len + l] / 1e9);
        }
  fprintf (c->out, "# GEMM %s: %zu shapes, %.2f to %.2f GFLOP/s per rank\n\n",
           mp_dtype_name (dtype), cells, lo / 1e9, hi / 1e9);
}

static gsize
grid_cells (const CalGemmGrid *g)
{
  return (gsize) g->m->len * g->nk->len * g->nk->len;
}

/* The axes, powers of two (of four when quick) and the zoo's own dimensions, and the
 * operands, filled with small values (no overflow or denormals in any dtype). */
gboolean
cal_gemm_grid_init (Cal *c, CalGemmGrid *g, GError **error)
{
  const CalDevice *d = c->dev;
  double lo = d->gemm_lo, hi = c->quick ? d->gemm_hi_quick : d->gemm_hi;
  g->m = g_array_new (FALSE, FALSE, sizeof (double));
  g->nk = g_array_new (FALSE, FALSE, sizeof (double));
  for (double v = lo; v <= hi; v *= c->quick ? 4 : 2)
    {
      cal_axis_add (g->m, v, lo, hi);
      cal_axis_add (g->nk, v, lo, hi);
    }
  zoo_dims (d->zoo, g->nk, g->m, lo, hi);
  for (guint i = 0; i < d->n_dtypes; i++)
    g->rate[d->dtypes[i]] = g_new0 (double, grid_cells (g) * c->passes);
  gsize big = (gsize) hi * hi;
  g_autofree float *pattern = g_new (float, big);
  for (gsize i = 0; i < big; i++)
    pattern[i] = (float) ((i % 17) - 8) / 8.0f;
  MpBackend *be = c->be;
  if ((g->a = cal_dev_floats (c, big, error)) == NULL || (g->w = cal_dev_floats (c, big,
      error)) == NULL
      || (g->out = cal_dev_floats (c, big, error)) == NULL)
    return FALSE;
  be->ops->upload (be, g->a, pattern, big * sizeof (float));
  be->ops->upload (be, g->w, pattern, big * sizeof (float));
  return TRUE;
}

void
cal_gemm_grid_clear (Cal *c, CalGemmGrid *g)
{
  MpBackend *be = c->be;
  be->ops->release (be, g->out);
  be->ops->release (be, g->w);
  be->ops->release (be, g->a);
  for (int d = 0; d < MP_DTYPE_N; d++)
    g_free (g->rate[d]);
  if (g->m)
    g_array_unref (g->m);
  if (g->nk)
    g_array_unref (g->nk);
  memset (g, 0, sizeof *g);
}

/* Times every cell of the grid once for each dtype, keeping each cell's best. */
gboolean
cal_gemm_grid_pass (Cal *c, CalGemmGrid *g, GError **error)
{
  guint nk = g->nk->len;
  for (guint i = 0; i < c->dev->n_dtypes; i++)
    {
      MpDtype dtype = c->dev->dtypes[i];
      if (c->be->ops->set_gemm_dtype && !c->be->ops->set_gemm_dtype (c->be, dtype, error))
        return FALSE;
      for (gsize cell = 0; cell < grid_cells (g); cell++)
        {
          int mm = (int) g_array_index (g->m, double, cell / (nk * nk));
          int n = (int) g_array_index (g->nk, double, cell / nk % nk);
          int k = (int) g_array_index (g->nk, double, cell % nk);
          double t = 0;
          if (!time_gemm (c, g->out, g->a, g->w, mm, n, k, &t, error))
            return FALSE;
          g->rate[dtype][cell * c->passes + g->done] = 2.0 * mm * n * k / t;
        }
    }
  g->done++;
  return TRUE;
}

/* The best rates into the profile, each dtype's summary printed. */
gboolean
cal_gemm_grid_finish (Cal *c, CalGemmGrid *g, GError **error)
{
  GArray *axes[3] = { g->m, g->nk, g->nk };
  g_autoptr(GArray) spreads = g_array_new (FALSE, FALSE, sizeof (double));
  g_autofree double *median = g_new (double, grid_cells (g));
  for (guint i = 0; i < c->dev->n_dtypes; i++)
    {
      MpDtype dtype = c->dev->dtypes[i];
      for (gsize cell = 0; cell < grid_cells (g); cell++)
        median[cell] = cal_round4 (cal_median (g->rate[dtype] + cell * c->passes,
                                               (guint) g->done, spreads));
      if (c->out)
        fprintf (c->out, "# GEMM %s (%s, %d rank%s at once): %u x %u x %u shapes, median of "
                 "%d pass%s\n", mp_dtype_name (dtype), c->dev->gemm_how, c->size,
                 c->size == 1 ? "" : "s", g->m->len, g->nk->len, g->nk->len, g->done,
                 g->done == 1 ? "" : "es");
      print_gemm_summary (c, dtype, axes, median);
      if (!mp_cost_profile_set_gemm (c->profile, dtype, (double *) g->m->data, g->m->len,
                                     (double *) g->nk->data, g->nk->len,
                                     (double *) g->nk->data, g->nk->len, median, error))
        return FALSE;
    }
  cal_record_spread (c, MP_SPREAD_GEMM, (guint) g->done, spreads);
  return TRUE;
}

/* A fixed GEMM (512^3, or the grid's largest below it) timed at the start of a pass, its
 * rate into *PROBE: how busy the machine is, pass by pass. */
gboolean
cal_gemm_probe (Cal *c, CalGemmGrid *g, double *probe, GError **error)
{
  int n = (int) MIN (512.0, g_array_index (g->m, double, g->m->len - 1));
  double t = 0;
  if (!time_gemm (c, g->out, g->a, g->w, n, n, n, &t, error))
    return FALSE;
  *probe = 2.0 * n * n * n / t;
  return TRUE;
}


/* ---- the cold weight (host) ------------------------------------------------------------ */

/* The executor touches each weight once per micro-batch, and a model's weights outgrow the
 * caches, so every GEMM of a step finds its weight cold; the grid reuses one weight, warm.
 * Measured at tiny-moe's expert fc1 (32 rows, the rows an expert gets at one sequence, x a
 * 512 x 128 weight), where OpenBLAS's packing of the weight before its kernel shows most:
 * calls on one weight and on one of COLD_POOL / weight distinct ones taken in turn,
 * interleaved (a burst of load slows both), each kind's 10th-percentile time kept; the
 * difference over the weight's bytes is the rate. On the 2-core EPYC VM (8 MiB L3) this
 * pass gave 137 -> 168 us, 256 KiB at 8.56 GB/s (`mpirun -np 2 mpplan calibrate --quick`,
 * load 13); a cblas_sgemm loop of the same design gave 8.5 GB/s at 32 and 64 x 512 x 128
 * and 32 x 128 x 256, less at 128 rows (11 GB/s) and none seen at 256 (the packing then
 * overlaps): an upper bound for the dense GEMMs' many rows, a few percent of theirs. */
#define COLD_M 32
#define COLD_N 512
#define COLD_K 128
#define COLD_POOL ((gsize) 64 << 20)
#define COLD_CALLS 200

gboolean
cal_gemm_cold_weight (Cal *c, GError **error)
{
  MpBackend *be = c->be;
  gsize wn = (gsize) COLD_N * COLD_K, nw = COLD_POOL / (wn * sizeof (float));
  float *a = cal_dev_floats (c, (gsize) COLD_M * COLD_K, error);
  float *out = a ? cal_dev_floats (c, (gsize) COLD_M * COLD_N, error) : NULL;
  float *pool = out ? cal_dev_floats (c, wn * nw, error) : NULL;
  gboolean ok = pool != NULL && cal_barrier (c, error);
  double warm[COLD_CALLS], cold[COLD_CALLS];
  for (int i = 0; ok && i < COLD_CALLS; i++)
    {
      const float *w = pool + wn * (1 + (gsize) i % (nw - 1));
      double t0 = be->ops->now_s (be);
      be->ops->kernels->matmul_forward (be, out, a, pool, NULL, COLD_M, COLD_K, COLD_N);
      double t1 = be->ops->now_s (be);
      be->ops->kernels->matmul_forward (be, out, a, w, NULL, COLD_M, COLD_K, COLD_N);
      warm[i] = t1 - t0;
      cold[i] = be->ops->now_s (be) - t1;
    }
  be->ops->release (be, pool);
  be->ops->release (be, out);
  be->ops->release (be, a);
  if (!ok)
    return FALSE;
  mp_stat_sort (warm, COLD_CALLS);
  mp_stat_sort (cold, COLD_CALLS);
  double extra = cold[COLD_CALLS / 10] - warm[COLD_CALLS / 10];
  /* the slowest rank's: its rate the lowest */
  double rate = extra > 0 ? wn * sizeof (float) / extra : 0, neg = -rate;
  if (!cal_max_over_ranks (c, &neg, error))
    return FALSE;
  rate = cal_round4 (-neg);
  if (c->out)
    fprintf (c->out, "# GEMM cold weight (%d x %d x %d, one weight against %zu in turn): "
             "%.1f us warm, %.1f us cold: %.2f GB/s per rank%s\n\n", COLD_M, COLD_N, COLD_K,
             nw, warm[COLD_CALLS / 10] * 1e6, cold[COLD_CALLS / 10] * 1e6, rate / 1e9,
             rate > 0 ? "" : " (no cost seen, not recorded)");
  mp_cost_profile_set_cold_weight_bw (c->profile, MAX (rate, 0));
  return TRUE;
}
