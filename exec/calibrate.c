/* calibrate.c - `mpplan calibrate --backend host|cuda`: measure this machine with every
 * rank of the MPI world at once, and fill a calibration profile (costmodel/costmodel.h).
 *
 * What is measured is backend-independent and lives here: the GEMM grid (powers of two plus
 * the dimensions of the zoo's models), the collective sweep printed as nccl-tests prints it
 * (ECOSYSTEM.md 5.1) with every result checked on the host, and the profile. Each backend
 * (a CalDevice below) brings only what differs: its GEMM dtypes and grid range, its memory
 * test and how it runs one collective.
 *
 *  - host: fp32 GEMMs through the host backend's matmul (OpenBLAS sgemm, one thread per
 *    rank); memory as a STREAM-style triad a[i] = b[i] + s c[i]; collectives through MPI,
 *    out-of-place except broadcast (MPI_Bcast has no out-of-place form).
 *  - cuda: the cuda backend's own GEMM (cuBLAS; bf16 inputs cast on the fly with fp32
 *    accumulation, which is what `exec --backend cuda` runs, and pedantic fp32), device-to-
 *    device copies, and NCCL collectives (exec/backend-cuda.c); one GPU per rank.
 *
 * GEMMs and memory go through MpBackendOps (alloc, upload, kernels, now_s, which
 * synchronises the device), so one timing loop serves both backends. A time is the slowest
 * rank's (nccl-tests `-a 3`), averaged over the timed iterations after a warm-up. Not
 * here: the profile file (costmodel/profile-yaml.c), the command line
 * (cli/cmd-calibrate.c). Units: seconds, bytes, FLOP/s, bytes/s. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec.h"
#include "exec/backend.h"
#include "common/error.h"
#include "costmodel/costmodel.h"
#include "kernels/cpu/kernels.h"
#include "model/model.h"

#include <math.h>
#include <mpi.h>
#include <string.h>
#include <time.h>

/* Turns a failed MPI call into a GError and returns FALSE; needs `error` in scope and a
 * gboolean function. */
#define CAL_MPI_TRY(call)                                                                    \
  G_STMT_START                                                                               \
  {                                                                                          \
    int rc_ = (call);                                                                        \
    if (rc_ != MPI_SUCCESS)                                                                  \
      {                                                                                      \
        char text_[MPI_MAX_ERROR_STRING];                                                    \
        int len_ = 0;                                                                        \
        MPI_Error_string (rc_, text_, &len_);                                                \
        g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "%s: %.*s", #call, len_, text_);     \
        return FALSE;                                                                        \
      }                                                                                      \
  }                                                                                          \
  G_STMT_END

typedef struct Cal Cal;

/* What one backend brings to the shared sweeps. */
typedef struct {
  const char *name;                      /* --backend */
  const char *default_device;            /* the profile's device; NULL: ask the backend */
  /* GEMM: the dtypes measured, the grid's power-of-two range (the step is 4 when quick),
   * the zoo models whose shapes join it, and FLOP per shape that set the repetitions. */
  const MpDtype *dtypes;
  guint n_dtypes;
  double gemm_lo, gemm_hi, gemm_hi_quick, gemm_flops, gemm_flops_quick;
  const char *const *zoo;
  const char *gemm_how;
  /* Passes over the GEMM grid and the kernels, each measurement's best kept. */
  int passes, passes_quick;
  /* Bytes read + written per second, and what was run (for the printed line). */
  gboolean (*memory) (Cal *c, double *bytes_per_s, char **how, GError **error);
  /* Collectives: the call each kind makes (the table's title), the largest message, the
   * bytes moved per row and the iterations that bound a row's repetitions. */
  const char *calls[MP_COLL_N];
  gsize coll_max, coll_max_quick, coll_budget, coll_budget_quick;
  int coll_iters, coll_iters_quick;
  gboolean host_memory;                  /* the backend's buffers are host memory */
  gboolean world_group;                  /* coll runs on a backend group of every rank */
  /* Runs KIND ITERS times back to back on backend buffers (layout: Coll below) and
   * returns when the results are in RECV. */
  gboolean (*coll) (Cal *c, MpCollKind kind, float *send, float *recv, gsize count,
                    int iters, GError **error);
  /* Before the GEMMs of DTYPE (NULL: the backend has one GEMM). */
  gboolean (*gemm_dtype) (Cal *c, MpDtype dtype, GError **error);
  /* The executor's reference kernels (kernels/cpu) are measured too. */
  gboolean reference_kernels;
} CalDevice;

struct Cal {
  MpWorld *world;
  int rank, size;
  gboolean quick;
  int passes;               /* GEMM grid and kernel passes, the best of them kept */
  FILE *out;                /* rank 0 only; NULL elsewhere */
  MpCostProfile *profile;
  const CalDevice *dev;
  MpBackend *be;
  MpGroup *group;           /* every rank, for the backend's collectives (cuda) */
};

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Measured values keep 4 significant digits: the noise is larger, and the file reads. */
static double
round4 (double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  return g_ascii_strtod (g_ascii_formatd (buf, sizeof buf, "%.4g", v), NULL);
}

static gboolean
barrier (Cal *c, GError **error)
{
  if (c->size > 1)
    CAL_MPI_TRY (MPI_Barrier (MPI_COMM_WORLD));
  return TRUE;
}

/* *X becomes the largest *X over the ranks. */
static gboolean
max_over_ranks (Cal *c, double *x, GError **error)
{
  if (c->size > 1)
    CAL_MPI_TRY (MPI_Allreduce (MPI_IN_PLACE, x, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return TRUE;
}

/* A backend buffer of N floats (zeroed), or NULL with ERROR set. */
static float *
dev_floats (Cal *c, gsize n, GError **error)
{
  return c->be->ops->alloc (c->be, MAX (n, (gsize) 1) * sizeof (float), MP_MEM_OTHER, error);
}

/* ---- GEMM ----------------------------------------------------------------------------- */

/* Inserts V into the sorted set AXIS if it lies in [LO, HI]. */
static void
axis_add (GArray *axis, double v, double lo, double hi)
{
  if (v < lo || v > hi || v != floor (v))
    return;
  guint i = 0;
  while (i < axis->len && g_array_index (axis, double, i) < v)
    i++;
  if (i == axis->len || g_array_index (axis, double, i) != v)
    g_array_insert_val (axis, i, v);
}

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
      axis_add (m, (double) model->seq_len, lo, hi);
      for (guint l = 0; l < model->n_layers; l++)
        for (guint o = 0; o < model->layers[l].n_ops; o++)
          {
            const MpOp *op = &model->layers[l].ops[o];
            if (op->kind != MP_OP_GEMM)
              continue;
            for (int t = 1; t <= 2; t++)
              {
                axis_add (nk, op->gemm_n / t, lo, hi);
                axis_add (nk, op->gemm_k / t, lo, hi);
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
  be->ops->kernels->matmul_forward (out, a, w, NULL, m, k, n);
  if (!be->ops->wait (be, NULL, error) || !barrier (c, error))
    return FALSE;
  double t0 = be->ops->now_s (be);
  for (int r = 0; r < reps; r++)
    be->ops->kernels->matmul_forward (out, a, w, NULL, m, k, n);
  *time_s = (be->ops->now_s (be) - t0) / reps;
  if (!be->ops->wait (be, NULL, error))
    return FALSE;
  return max_over_ranks (c, time_s, error);
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

/* The GEMM grid being measured: its axes (M, and N = K), the operands (the largest
 * shapes') and each measured dtype's best rate per cell so far. */
typedef struct {
  GArray *m, *nk;
  float *a, *w, *out;
  double *rate[MP_DTYPE_N];
} GemmGrid;

static gsize
grid_cells (const GemmGrid *g)
{
  return (gsize) g->m->len * g->nk->len * g->nk->len;
}

/* The axes, powers of two (of four when quick) and the zoo's own dimensions, and the
 * operands, filled with small values (no overflow or denormals in any dtype). */
static gboolean
gemm_grid_init (Cal *c, GemmGrid *g, GError **error)
{
  const CalDevice *d = c->dev;
  double lo = d->gemm_lo, hi = c->quick ? d->gemm_hi_quick : d->gemm_hi;
  g->m = g_array_new (FALSE, FALSE, sizeof (double));
  g->nk = g_array_new (FALSE, FALSE, sizeof (double));
  for (double v = lo; v <= hi; v *= c->quick ? 4 : 2)
    {
      axis_add (g->m, v, lo, hi);
      axis_add (g->nk, v, lo, hi);
    }
  zoo_dims (d->zoo, g->nk, g->m, lo, hi);
  for (guint i = 0; i < d->n_dtypes; i++)
    g->rate[d->dtypes[i]] = g_new0 (double, grid_cells (g));
  gsize big = (gsize) hi * hi;
  g_autofree float *pattern = g_new (float, big);
  for (gsize i = 0; i < big; i++)
    pattern[i] = (float) ((i % 17) - 8) / 8.0f;
  MpBackend *be = c->be;
  if ((g->a = dev_floats (c, big, error)) == NULL || (g->w = dev_floats (c, big, error)) == NULL
      || (g->out = dev_floats (c, big, error)) == NULL)
    return FALSE;
  be->ops->upload (be, g->a, pattern, big * sizeof (float));
  be->ops->upload (be, g->w, pattern, big * sizeof (float));
  return TRUE;
}

static void
gemm_grid_clear (Cal *c, GemmGrid *g)
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
static gboolean
gemm_grid_pass (Cal *c, GemmGrid *g, GError **error)
{
  guint nk = g->nk->len;
  for (guint i = 0; i < c->dev->n_dtypes; i++)
    {
      MpDtype dtype = c->dev->dtypes[i];
      if (c->dev->gemm_dtype && !c->dev->gemm_dtype (c, dtype, error))
        return FALSE;
      for (gsize cell = 0; cell < grid_cells (g); cell++)
        {
          int mm = (int) g_array_index (g->m, double, cell / (nk * nk));
          int n = (int) g_array_index (g->nk, double, cell / nk % nk);
          int k = (int) g_array_index (g->nk, double, cell % nk);
          double t = 0;
          if (!time_gemm (c, g->out, g->a, g->w, mm, n, k, &t, error))
            return FALSE;
          g->rate[dtype][cell] = MAX (g->rate[dtype][cell], round4 (2.0 * mm * n * k / t));
        }
    }
  return TRUE;
}

/* The best rates into the profile, each dtype's summary printed. */
static gboolean
gemm_grid_finish (Cal *c, GemmGrid *g, GError **error)
{
  GArray *axes[3] = { g->m, g->nk, g->nk };
  for (guint i = 0; i < c->dev->n_dtypes; i++)
    {
      MpDtype dtype = c->dev->dtypes[i];
      if (c->out)
        fprintf (c->out, "# GEMM %s (%s, %d rank%s at once): %u x %u x %u shapes, best of %d "
                 "pass%s\n", mp_dtype_name (dtype), c->dev->gemm_how, c->size,
                 c->size == 1 ? "" : "s", g->m->len, g->nk->len, g->nk->len, c->passes,
                 c->passes == 1 ? "" : "es");
      print_gemm_summary (c, dtype, axes, g->rate[dtype]);
      if (!mp_cost_profile_set_gemm (c->profile, dtype, (double *) g->m->data, g->m->len,
                                     (double *) g->nk->data, g->nk->len,
                                     (double *) g->nk->data, g->nk->len, g->rate[dtype], error))
        return FALSE;
    }
  return TRUE;
}

/* ---- memory --------------------------------------------------------------------------- */

/* host: a STREAM triad over arrays well beyond any last-level cache share of one core. */
static gboolean
triad_bandwidth (Cal *c, double *bytes_per_s, char **how, GError **error)
{
  gsize n = (c->quick ? 4u : 16u) << 20;
  int reps = c->quick ? 5 : 10;
  g_autofree double *a = g_new (double, n), *b = g_new (double, n), *x = g_new (double, n);
  for (gsize i = 0; i < n; i++)
    a[i] = 0, b[i] = 1, x[i] = 2;
  double best = G_MAXDOUBLE;
  for (int r = 0; r <= reps; r++)
    {
      if (!barrier (c, error))
        return FALSE;
      double t0 = now_s ();
      for (gsize i = 0; i < n; i++)
        a[i] = b[i] + 3.0 * x[i];
      double t = now_s () - t0;
      if (!max_over_ranks (c, &t, error))
        return FALSE;
      if (r > 0)   /* the first pass faults the pages in */
        best = MIN (best, t);
    }
  /* STREAM counting: two arrays read, one written. The check keeps the loop alive. */
  if (a[n / 2] != 7.0)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "memory test: wrong result %g", a[n / 2]);
      return FALSE;
    }
  *bytes_per_s = 3.0 * sizeof (double) * n / best;
  *how = g_strdup_printf ("triad, %zu MiB per array", n * sizeof (double) >> 20);
  return TRUE;
}

#ifdef HAVE_CUDA   /* generic over MpBackendOps, but only a device backend uses it */
/* A device: copies of one buffer to another through the backend (cudaMemcpyAsync device to
 * device), 10 back to back per timing so launch latency is noise; the best of REPS. */
static gboolean
copy_bandwidth (Cal *c, double *bytes_per_s, char **how, GError **error)
{
  MpBackend *be = c->be;
  gsize bytes = (gsize) (c->quick ? 256 : 1024) << 20;
  int reps = c->quick ? 3 : 5, inner = 10;
  void *src = be->ops->alloc (be, bytes, MP_MEM_OTHER, error);
  void *dst = src ? be->ops->alloc (be, bytes, MP_MEM_OTHER, error) : NULL;
  double best = G_MAXDOUBLE;
  gboolean ok = dst != NULL;
  for (int r = 0; ok && r <= reps; r++)
    {
      ok = barrier (c, error);
      double t0 = be->ops->now_s (be);
      for (int i = 0; ok && i < inner; i++)
        be->ops->copy (be, dst, src, bytes);
      double t = (be->ops->now_s (be) - t0) / inner;
      ok = ok && be->ops->wait (be, NULL, error) && max_over_ranks (c, &t, error);
      if (r > 0)   /* the first pass is the warm-up */
        best = MIN (best, t);
    }
  be->ops->release (be, dst);
  be->ops->release (be, src);
  if (!ok)
    return FALSE;
  *bytes_per_s = 2.0 * bytes / best;   /* every byte read once and written once */
  *how = g_strdup_printf ("device-to-device copy of %zu MiB", bytes >> 20);
  return TRUE;
}
#endif

static gboolean
measure_memory (Cal *c, GError **error)
{
  double bw = 0;
  g_autofree char *how = NULL;
  if (!c->dev->memory (c, &bw, &how, error))
    return FALSE;
  bw = round4 (bw);
  if (c->out)
    fprintf (c->out, "# memory (%s, %d rank%s at once): %.2f GB/s per rank read + written\n\n",
             how, c->size, c->size == 1 ? "" : "s", bw / 1e9);
  mp_cost_profile_set_mem_bw (c->profile, bw);
  return TRUE;
}

/* ---- the executor's other kernels (host) ------------------------------------------------ */

/* What the reference kernels (kernels/cpu) are measured as: an element-wise class
 * (MpEwClass), causal attention, or an optimizer step. */
enum { KB_ATTENTION = MP_EW_N, KB_ADAM, KB_SGD };

/* One of the reference kernels at one shape, with its buffers. What the cost model charges
 * it (FLOPs, bytes or parameters) is in fwd_units / bwd_units (0: no backward). */
typedef struct {
  int klass;                   /* MpEwClass or KB_* */
  gboolean rmsnorm;            /* MP_EW_NORM: rmsnorm rather than layernorm */
  MpkAttnShape s;              /* attention */
  gsize n, c;                  /* element-wise: rows, row width; optimizer: parameters */
  double fwd_units, bwd_units;
  /* The kernels' arguments: views into the buffers below. */
  float *in, *out, *din, *dout, *k, *v, *dk, *dv, *w, *b, *dw, *db, *stat1, *stat2;
  int *targets;
  float *owned[14];
  guint n_owned;
} KBench;

/* A buffer of N floats owned by K: zeros, or reproducible values in [-1, 1) when FILL (the
 * kernels' speed depends on the values only through tanhf and expf, and real activations
 * are of this size). */
static float *
kb_floats (KBench *k, gsize n, gboolean fill)
{
  g_assert (k->n_owned < G_N_ELEMENTS (k->owned));
  float *x = g_new0 (float, MAX (n, (gsize) 1));
  for (gsize i = 0; fill && i < n; i++)
    x[i] = (float) ((i * 7919) % 2001) / 1000.0f - 1.0f;
  return k->owned[k->n_owned++] = x;
}

static void
kbench_clear (KBench *k)
{
  for (guint i = 0; i < k->n_owned; i++)
    g_free (k->owned[i]);
  g_free (k->targets);
  memset (k, 0, sizeof *k);
}

/* Norm, activation or loss forward or BACKWARD. */
static void
kbench_run_elementwise (KBench *k, gboolean backward)
{
  int n = (int) k->n, c = (int) k->c;
  if (k->klass == MP_EW_NORM && k->rmsnorm)
    {
      if (!backward)
        mpk_cpu_rmsnorm_forward (k->out, k->stat2, k->in, k->w, n, c, 1e-5f);
      else
        mpk_cpu_rmsnorm_backward (k->din, k->dw, k->dout, k->in, k->w, k->stat2, n, c);
    }
  else if (k->klass == MP_EW_NORM && !backward)
    mpk_cpu_layernorm_forward (k->out, k->stat1, k->stat2, k->in, k->w, k->b, n, c, 1e-5f);
  else if (k->klass == MP_EW_NORM)
    mpk_cpu_layernorm_backward (k->din, k->dw, k->db, k->dout, k->in, k->w, k->stat1, k->stat2,
                                n, c);
  else if (k->klass == MP_EW_ACTIVATION && !backward)
    mpk_cpu_gelu_forward (k->out, k->in, k->n * k->c);
  else if (k->klass == MP_EW_ACTIVATION)
    mpk_cpu_gelu_backward (k->din, k->in, k->dout, k->n * k->c);
  else if (!backward)
    mpk_cpu_crossentropy_forward (k->out, k->stat1, k->in, k->targets, n, c);
  else
    mpk_cpu_crossentropy_backward (k->din, k->in, k->stat1, k->targets, 1.0f / n, n, c);
}

/* The optimizer step as the executor takes it (exec/model-exec.c): the gradient's sum of
 * squares, then the update. The sum is kept in stat1 so the pass is not optimised away. */
static void
kbench_run_optimizer (KBench *k)
{
  k->stat1[0] += (float) mpk_cpu_sumsq (k->in, k->n);
  if (k->klass == KB_ADAM)
    mpk_cpu_adamw_update (k->out, k->in, k->k, k->v, k->n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 2);
  else
    mpk_cpu_sgd_update (k->out, k->in, k->k, k->n, 0.05f, 0.9f);
}

static void
kbench_run (KBench *k, gboolean backward)
{
  if (k->klass < MP_EW_N)
    kbench_run_elementwise (k, backward);
  else if (k->klass != KB_ATTENTION)
    kbench_run_optimizer (k);
  else if (!backward)
    mpk_cpu_attention_forward (k->out, k->stat1, NULL, k->in, k->k, k->v, k->s);
  else
    mpk_cpu_attention_backward (k->din, k->dk, k->dv, k->dout, k->out, k->stat1, NULL, k->in,
                                k->k, k->v, k->s);
}

/* Causal attention of MODEL over one sequence on one group of query heads sharing a kv
 * head, laid out as the executor lays them out at tp 1 (every head's q, k and v packed in
 * one row per position): heads are independent, so the rate per FLOP is that of every
 * head count, and a gpt2-124m sequence stays well under a second. The rate does depend on
 * the sequence (the keys outgrow the caches), so each model's length is measured. */
static void
kbench_attention (KBench *k, const MpModel *m)
{
  int kvh = (int) MAX (m->kv_heads, 1u), group = (int) MAX (m->heads / (guint) kvh, 1u);
  int hd = (int) m->head_dim, t = (int) m->seq_len;
  int ldqkv = ((int) m->heads + 2 * kvh) * hd, ldo = (int) m->heads * hd;
  k->klass = KB_ATTENTION;
  k->s = (MpkAttnShape) { 1, t, group, 1, hd, ldqkv, ldqkv, ldo };
  gsize qkv = (gsize) t * ldqkv, o = (gsize) t * ldo;
  /* q at column 0, k and v after every query head (the packed layout's offsets). */
  k->in = kb_floats (k, qkv, TRUE), k->din = kb_floats (k, qkv, FALSE);
  k->k = k->in + (gsize) m->heads * hd, k->v = k->k + (gsize) kvh * hd;
  k->dk = k->din + (gsize) m->heads * hd, k->dv = k->dk + (gsize) kvh * hd;
  k->out = kb_floats (k, o, FALSE), k->dout = kb_floats (k, o, TRUE);
  k->stat1 = kb_floats (k, (gsize) group * t, FALSE);
  /* The cost model's count for this shape (causal, as it costs a transformer). */
  k->fwd_units = mp_cost_attention_flops (1, group, hd, t, t, TRUE, FALSE);
  k->bwd_units = mp_cost_attention_flops (1, group, hd, t, t, TRUE, TRUE);
}

/* The element-wise op of MODEL in KLASS (ew_op: NULL if MODEL has none, or its kernel is
 * not one measured here: only gelu among the activations); kbench_elementwise sets it up at
 * N rows: bytes charged are the IR's fwd_bytes per token forward and twice that backward
 * (compute.c). */
static const MpOp *
ew_op (const MpModel *m, MpEwClass klass)
{
  if (klass == MP_EW_ACTIVATION && m->activation != MP_ACT_GELU)
    return NULL;
  for (guint l = 0; l < m->n_layers; l++)
    for (guint o = 0; o < m->layers[l].n_ops; o++)
      if (mp_cost_op_ew_class (&m->layers[l].ops[o]) == klass)
        return &m->layers[l].ops[o];
  return NULL;
}

static void
kbench_elementwise (KBench *k, const MpModel *m, MpEwClass klass)
{
  const MpOp *op = ew_op (m, klass);
  gsize c = klass == MP_EW_NORM ? m->hidden : klass == MP_EW_LOSS ? m->vocab : m->ffn_hidden;
  /* One sequence, or fewer rows where a row is long (a vocabulary): 16 MiB per tensor. */
  gsize n = CLAMP (((gsize) 4 << 20) / c, 1, MAX (m->seq_len, 1u)), cells = n * c;
  k->klass = klass;
  k->rmsnorm = m->norm == MP_NORM_RMSNORM;
  k->n = n, k->c = c;
  k->in = kb_floats (k, cells, TRUE), k->dout = kb_floats (k, cells, TRUE);
  k->out = kb_floats (k, cells, FALSE), k->din = kb_floats (k, cells, FALSE);
  k->w = kb_floats (k, c, TRUE), k->b = kb_floats (k, c, TRUE);
  k->dw = kb_floats (k, c, FALSE), k->db = kb_floats (k, c, FALSE);
  k->stat1 = kb_floats (k, n, FALSE), k->stat2 = kb_floats (k, n, FALSE);
  k->targets = g_new (int, n);
  for (gsize i = 0; i < n; i++)
    k->targets[i] = (int) ((i * 131u) % c);
  k->fwd_units = op->fwd_bytes * n;
  k->bwd_units = 2 * op->fwd_bytes * n;
}

/* The optimizer step KLASS (KB_ADAM, KB_SGD) over 2M parameters (32 MiB of parameters,
 * gradients and state: past the caches, as a model's are). */
static void
kbench_optimizer (KBench *k, int klass)
{
  gsize n = (gsize) 1 << 21;
  k->klass = klass;
  k->n = n;
  k->in = kb_floats (k, n, TRUE), k->out = kb_floats (k, n, TRUE);  /* gradients, weights */
  k->k = kb_floats (k, n, FALSE);                                     /* momentum */
  k->v = klass == KB_ADAM ? kb_floats (k, n, FALSE) : NULL;           /* second moment */
  k->stat1 = kb_floats (k, 1, FALSE);
  k->fwd_units = (double) n;
}
/* Seconds per run of K forward or BACKWARD, slowest rank, every rank running it at once
 * (as the executor does, one rank per core): a warm-up run sizes the repetitions. */
static gboolean
time_kbench (Cal *c, KBench *k, gboolean backward, double *time_s, GError **error)
{
  double t0 = now_s ();
  kbench_run (k, backward);
  double once = now_s () - t0;
  if (!max_over_ranks (c, &once, error))
    return FALSE;
  int reps = (int) CLAMP ((c->quick ? 0.05 : 0.2) / MAX (once, 1e-9), 1, 200);
  if (!barrier (c, error))
    return FALSE;
  t0 = now_s ();
  for (int r = 0; r < reps; r++)
    kbench_run (k, backward);
  *time_s = (now_s () - t0) / reps;
  return max_over_ranks (c, time_s, error);
}

/* One kernel to measure: a class at a zoo model's shape (MODEL NULL: an optimizer), what
 * the cost model charges it and its best seconds so far, forward and backward. */
typedef struct {
  const MpModel *model;
  int klass;
  double units[2], best[2];
} KJob;

/* Times JOB once more, keeping its best. */
static gboolean
kjob_time (Cal *c, KJob *job, GError **error)
{
  KBench k = { 0 };
  if (job->klass == KB_ATTENTION)
    kbench_attention (&k, job->model);
  else if (job->klass >= KB_ADAM)
    kbench_optimizer (&k, job->klass);
  else
    kbench_elementwise (&k, job->model, (MpEwClass) job->klass);
  job->units[0] = k.fwd_units, job->units[1] = k.bwd_units;
  double t[2] = { 0, 0 };
  gboolean ok = time_kbench (c, &k, FALSE, &t[0], error)
                && (k.bwd_units == 0 || time_kbench (c, &k, TRUE, &t[1], error));
  kbench_clear (&k);
  for (int b = 0; ok && b < 2; b++)
    if (t[b] > 0)
      job->best[b] = job->best[b] > 0 ? MIN (job->best[b], t[b]) : t[b];
  return ok;
}

/* The jobs for the transformers among ZOO (loaded into MODELS, which owns them): attention
 * and each element-wise class a model has, then Adam and SGD. */
static GArray *
kjobs_new (const char *const *zoo, GPtrArray *models)
{
  GArray *jobs = g_array_new (FALSE, TRUE, sizeof (KJob));
  for (int i = 0; zoo[i]; i++)
    {
      g_autoptr(GError) local = NULL;
      MpModel *m = mp_model_load (zoo[i], &local);
      if (m == NULL || m->arch != MP_ARCH_TRANSFORMER)
        {
          g_clear_pointer (&m, mp_model_free);
          continue;
        }
      g_ptr_array_add (models, m);
      g_array_append_val (jobs, ((KJob) { .model = m, .klass = KB_ATTENTION }));
      for (int e = 0; e < MP_EW_N; e++)
        if (ew_op (m, (MpEwClass) e) != NULL)
          g_array_append_val (jobs, ((KJob) { .model = m, .klass = e }));
    }
  g_array_append_val (jobs, ((KJob) { .klass = KB_ADAM }));
  g_array_append_val (jobs, ((KJob) { .klass = KB_SGD }));
  return jobs;
}

/* Rate of class KLASS (at sequence length SEQ for attention; 0: any), forward or BACKWARD:
 * its jobs' total units over their total best time; 0 if none. */
static double
kjobs_rate (GArray *jobs, int klass, double seq, gboolean backward)
{
  double units = 0, secs = 0;
  for (guint i = 0; i < jobs->len; i++)
    {
      const KJob *j = &g_array_index (jobs, KJob, i);
      if (j->klass == klass && (seq == 0 || (double) j->model->seq_len == seq))
        units += j->units[backward], secs += j->best[backward];
    }
  return secs > 0 ? round4 (units / secs) : 0;
}

/* The attention table: one point per distinct sequence length among the jobs. */
static gboolean
set_attention_rates (Cal *c, GArray *jobs, GError **error)
{
  g_autoptr(GArray) seq = g_array_new (FALSE, FALSE, sizeof (double));
  for (guint i = 0; i < jobs->len; i++)
    {
      const KJob *j = &g_array_index (jobs, KJob, i);
      if (j->klass == KB_ATTENTION)
        axis_add (seq, (double) j->model->seq_len, 1, G_MAXDOUBLE);
    }
  if (seq->len == 0)
    return TRUE;
  g_autofree double *f = g_new (double, seq->len), *b = g_new (double, seq->len);
  for (guint i = 0; i < seq->len; i++)
    {
      double t = g_array_index (seq, double, i);
      f[i] = kjobs_rate (jobs, KB_ATTENTION, t, FALSE);
      b[i] = kjobs_rate (jobs, KB_ATTENTION, t, TRUE);
      if (c->out)
        fprintf (c->out, "# attention (reference kernel, %d rank%s at once), %g keys: %.3g "
                 "GFLOP/s forward, %.3g backward per rank\n", c->size,
                 c->size == 1 ? "" : "s", t, f[i] / 1e9, b[i] / 1e9);
    }
  return mp_cost_profile_set_attention (c->profile, (double *) seq->data, seq->len, f, b,
                                        error);
}

/* Times every job once more. */
static gboolean
kjobs_pass (Cal *c, GArray *jobs, GError **error)
{
  for (guint i = 0; i < jobs->len; i++)
    if (!kjob_time (c, &g_array_index (jobs, KJob, i), error))
      return FALSE;
  return TRUE;
}

/* The executor's attention, element-wise and optimizer kernels at the host zoo's shapes
 * (JOBS, after the passes), as rates of what the cost model charges them: these reference
 * kernels run far below the roofline that GEMM and triad rates imply. One rate per class
 * (attention: per sequence length), its total units over its total best time. */
static gboolean
kjobs_finish (Cal *c, GArray *jobs, GError **error)
{
  static const char *const names[] = { "norm", "activation", "loss" };
  if (!set_attention_rates (c, jobs, error))
    return FALSE;
  for (int e = 0; e < MP_EW_N; e++)
    {
      double f = kjobs_rate (jobs, e, 0, FALSE), b = kjobs_rate (jobs, e, 0, TRUE);
      if (!(f > 0))
        continue;
      mp_cost_profile_set_elementwise (c->profile, (MpEwClass) e, f, b);
      if (c->out)
        fprintf (c->out, "# %s (reference kernel): %.3g GB/s forward, %.3g backward per "
                 "rank, of the bytes the cost model charges\n", names[e], f / 1e9, b / 1e9);
    }
  double adam = kjobs_rate (jobs, KB_ADAM, 0, FALSE), sgd = kjobs_rate (jobs, KB_SGD, 0, FALSE);
  mp_cost_profile_set_optimizer (c->profile, adam, sgd);
  if (c->out)
    fprintf (c->out, "# optimizer step (gradient norm + update): Adam %.3g, SGD %.3g "
             "Mparameters/s per rank\n\n", adam / 1e6, sgd / 1e6);
  return TRUE;
}

/* ---- collectives ---------------------------------------------------------------------- */

/* One collective as nccl-tests tests it, whatever runs it (CalDevice.coll). Buffers hold
 * floats; COUNT is what the printed `count` column says (per rank for all-gather and
 * reduce-scatter, ECOSYSTEM.md 5.1). Broadcast is in place on the receive buffer (MPI has
 * no out-of-place form, and both backends run the same test). */
typedef struct Coll Coll;
struct Coll {
  MpCollKind kind;
  const char *redop;
  int root;                                  /* -1: none */
  /* Elements of the send and receive buffers for COUNT. */
  void (*buffers) (int n, gsize count, gsize *send, gsize *recv);
  /* COUNT for a size in bytes, 0 when it cannot be formed. */
  gsize (*count_of) (int n, gsize bytes);
  gsize (*bytes_of) (int n, gsize count);     /* nccl-tests size */
  void (*fill) (int rank, int n, gsize count, float *send, float *recv);
  gsize (*check) (int rank, int n, gsize count, const float *recv);  /* wrong elements */
};

/* Exactly representable test values: small integers. */
static float
value (gsize a, gsize b, gsize i)
{
  return (float) ((a * 31 + b * 7 + i) % 1021);
}

static gsize count_whole (int n, gsize bytes) { (void) n; return bytes / sizeof (float); }
static gsize count_per_rank (int n, gsize bytes) { return bytes / sizeof (float) / (gsize) n; }
static gsize bytes_whole (int n, gsize count) { (void) n; return count * sizeof (float); }
static gsize bytes_all (int n, gsize count) { return count * sizeof (float) * (gsize) n; }

/* all_reduce: rank r contributes (r + 1) v(i); the sum is n(n+1)/2 v(i). */
static void
ar_buffers (int n, gsize count, gsize *send, gsize *recv)
{
  (void) n;
  *send = *recv = count;
}
static void
ar_fill (int rank, int n, gsize count, float *send, float *recv)
{
  (void) n;
  for (gsize i = 0; i < count; i++)
    send[i] = (float) (rank + 1) * value (0, 0, i % 13), recv[i] = -1;
}
static int
ar_run (float *send, float *recv, gsize count, int rank, int n)
{
  return MPI_Allreduce (send, recv, (int) count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static gsize
ar_check (int rank, int n, gsize count, const float *recv)
{
  gsize wrong = 0;
  for (gsize i = 0; i < count; i++)
    wrong += recv[i] != (float) (n * (n + 1) / 2) * value (0, 0, i % 13);
  return wrong;
}

/* all_gather: rank r's block is v(r, 0, i). */
static void
ag_buffers (int n, gsize count, gsize *send, gsize *recv)
{
  *send = count;
  *recv = count * n;
}
static void
ag_fill (int rank, int n, gsize count, float *send, float *recv)
{
  for (gsize i = 0; i < count; i++)
    send[i] = value (rank, 0, i);
  for (gsize i = 0; i < count * n; i++)
    recv[i] = -1;
}
static int
ag_run (float *send, float *recv, gsize count, int rank, int n)
{
  return MPI_Allgather (send, (int) count, MPI_FLOAT, recv, (int) count, MPI_FLOAT,
                        MPI_COMM_WORLD);
}
static gsize
ag_check (int rank, int n, gsize count, const float *recv)
{
  gsize wrong = 0;
  for (int r = 0; r < n; r++)
    for (gsize i = 0; i < count; i++)
      wrong += recv[r * count + i] != value (r, 0, i);
  return wrong;
}

/* reduce_scatter: rank r contributes (r + 1) v(j) over the whole buffer and keeps block r
 * of the sum. */
static void
rs_buffers (int n, gsize count, gsize *send, gsize *recv)
{
  *send = count * n;
  *recv = count;
}
static void
rs_fill (int rank, int n, gsize count, float *send, float *recv)
{
  for (gsize j = 0; j < count * n; j++)
    send[j] = (float) (rank + 1) * value (0, 0, j % 13);
  for (gsize i = 0; i < count; i++)
    recv[i] = -1;
}
static int
rs_run (float *send, float *recv, gsize count, int rank, int n)
{
  return MPI_Reduce_scatter_block (send, recv, (int) count, MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD);
}
static gsize
rs_check (int rank, int n, gsize count, const float *recv)
{
  gsize wrong = 0;
  for (gsize i = 0; i < count; i++)
    wrong += recv[i] != (float) (n * (n + 1) / 2) * value (0, 0, (rank * count + i) % 13);
  return wrong;
}

/* all_to_all: rank r sends v(r, p, i) to peer p; COUNT is all it sends, COUNT / n each. */
static gsize
a2a_count (int n, gsize bytes)
{
  return bytes / sizeof (float) / (gsize) n * (gsize) n;
}
static void
a2a_fill (int rank, int n, gsize count, float *send, float *recv)
{
  gsize per = count / n;
  for (int p = 0; p < n; p++)
    for (gsize i = 0; i < per; i++)
      send[p * per + i] = value (rank, p, i), recv[p * per + i] = -1;
}
static int
a2a_run (float *send, float *recv, gsize count, int rank, int n)
{
  int per = (int) (count / n);
  return MPI_Alltoall (send, per, MPI_FLOAT, recv, per, MPI_FLOAT, MPI_COMM_WORLD);
}
static gsize
a2a_check (int rank, int n, gsize count, const float *recv)
{
  gsize per = count / n, wrong = 0;
  for (int r = 0; r < n; r++)
    for (gsize i = 0; i < per; i++)
      wrong += recv[r * per + i] != value (r, rank, i);
  return wrong;
}

/* broadcast from rank 0 of v(0, 0, i); the other ranks start from -1 (in place: MPI has
 * no out-of-place broadcast, so the send buffer is the root's receive buffer). */
static void
bc_fill (int rank, int n, gsize count, float *send, float *recv)
{
  for (gsize i = 0; i < count; i++)
    recv[i] = rank == 0 ? value (0, 0, i) : -1;
}
static int
bc_run (float *send, float *recv, gsize count, int rank, int n)
{
  return MPI_Bcast (recv, (int) count, MPI_FLOAT, 0, MPI_COMM_WORLD);
}
static gsize
bc_check (int rank, int n, gsize count, const float *recv)
{
  gsize wrong = 0;
  for (gsize i = 0; i < count; i++)
    wrong += recv[i] != value (0, 0, i);
  return wrong;
}

/* send_recv: rank r sends v(r, 1, i) to r + 1 and receives from r - 1 (a ring, as
 * nccl-tests' sendrecv_perf). */
static void
sr_fill (int rank, int n, gsize count, float *send, float *recv)
{
  for (gsize i = 0; i < count; i++)
    send[i] = value (rank, 1, i), recv[i] = -1;
}
static int
sr_run (float *send, float *recv, gsize count, int rank, int n)
{
  return MPI_Sendrecv (send, (int) count, MPI_FLOAT, (rank + 1) % n, 7, recv, (int) count,
                       MPI_FLOAT, (rank + n - 1) % n, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
static gsize
sr_check (int rank, int n, gsize count, const float *recv)
{
  gsize wrong = 0;
  for (gsize i = 0; i < count; i++)
    wrong += recv[i] != value ((rank + n - 1) % n, 1, i);
  return wrong;
}

static const Coll colls[] = {
  { MP_COLL_ALL_REDUCE, "sum", -1, ar_buffers, count_whole, bytes_whole, ar_fill, ar_check },
  { MP_COLL_ALL_GATHER, "none", -1, ag_buffers, count_per_rank, bytes_all, ag_fill, ag_check },
  { MP_COLL_REDUCE_SCATTER, "sum", -1, rs_buffers, count_per_rank, bytes_all, rs_fill,
    rs_check },
  { MP_COLL_ALL_TO_ALL, "none", -1, ar_buffers, a2a_count, bytes_whole, a2a_fill, a2a_check },
  { MP_COLL_BROADCAST, "none", 0, ar_buffers, count_whole, bytes_whole, bc_fill, bc_check },
  { MP_COLL_SEND_RECV, "none", -1, ar_buffers, count_whole, bytes_whole, sr_fill, sr_check },
};

/* host: the MPI call of each kind, on host buffers laid out as the Coll above says. */
typedef int (*MpiRun) (float *send, float *recv, gsize count, int rank, int n);
static const MpiRun mpi_runs[MP_COLL_N] = {
  [MP_COLL_ALL_REDUCE] = ar_run, [MP_COLL_ALL_GATHER] = ag_run,
  [MP_COLL_REDUCE_SCATTER] = rs_run, [MP_COLL_ALL_TO_ALL] = a2a_run,
  [MP_COLL_BROADCAST] = bc_run, [MP_COLL_SEND_RECV] = sr_run,
};

static gboolean
mpi_coll (Cal *c, MpCollKind kind, float *send, float *recv, gsize count, int iters,
          GError **error)
{
  for (int i = 0; i < iters; i++)
    CAL_MPI_TRY (mpi_runs[kind] (send, recv, count, c->rank, c->size));
  return TRUE;
}

/* The buffers of one sweep: the backend's (SEND, RECV) and the host's copies that are
 * filled and checked (the same memory when the backend's is host memory). */
typedef struct {
  float *send, *recv, *hsend, *hrecv;
  gsize send_n, recv_n;
} CollBufs;

static void
bufs_free (Cal *c, CollBufs *b)
{
  if (!c->dev->host_memory)
    {
      g_free (b->hsend);
      g_free (b->hrecv);
    }
  c->be->ops->release (c->be, b->recv);
  c->be->ops->release (c->be, b->send);
}

/* Room for COLL's largest message. */
static gboolean
bufs_alloc (Cal *c, const Coll *coll, gsize max_bytes, CollBufs *b, GError **error)
{
  memset (b, 0, sizeof *b);
  coll->buffers (c->size, coll->count_of (c->size, max_bytes), &b->send_n, &b->recv_n);
  b->send = dev_floats (c, b->send_n, error);
  b->recv = b->send ? dev_floats (c, b->recv_n, error) : NULL;
  if (b->recv == NULL)
    {
      bufs_free (c, b);
      return FALSE;
    }
  b->hsend = c->dev->host_memory ? b->send : g_new (float, MAX (b->send_n, (gsize) 1));
  b->hrecv = c->dev->host_memory ? b->recv : g_new (float, MAX (b->recv_n, (gsize) 1));
  return TRUE;
}

/* One row: time (slowest rank, mean over ITERS after a warm-up) and #wrong (all ranks),
 * counted on the results copied back to the host. */
static gboolean
run_size (Cal *c, const Coll *coll, gsize count, CollBufs *b, int iters, double *time_s,
          long *wrong, GError **error)
{
  MpBackend *be = c->be;
  gsize send_n, recv_n;
  coll->buffers (c->size, count, &send_n, &recv_n);
  coll->fill (c->rank, c->size, count, b->hsend, b->hrecv);
  if (!c->dev->host_memory)
    {
      be->ops->upload (be, b->send, b->hsend, send_n * sizeof (float));
      be->ops->upload (be, b->recv, b->hrecv, recv_n * sizeof (float));
    }
  if (!c->dev->coll (c, coll->kind, b->send, b->recv, count, 1, error) || !barrier (c, error))
    return FALSE;
  double t0 = now_s ();
  if (!c->dev->coll (c, coll->kind, b->send, b->recv, count, iters, error))
    return FALSE;
  *time_s = (now_s () - t0) / iters;
  if (!max_over_ranks (c, time_s, error))
    return FALSE;
  if (!c->dev->host_memory)
    be->ops->download (be, b->hrecv, b->recv, recv_n * sizeof (float));
  long mine = (long) coll->check (c->rank, c->size, count, b->hrecv);
  CAL_MPI_TRY (MPI_Allreduce (&mine, wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
  return TRUE;
}

static void
print_header (Cal *c, const Coll *coll, int iters)
{
  fprintf (c->out, "# %s_perf: %s, %d ranks, %s, float; time = the slowest rank's mean over "
           "up to %d iterations after 1 warm-up (nccl-tests -a 3)\n#\n",
           mp_coll_kind_name (coll->kind), c->dev->calls[coll->kind], c->size,
           coll->kind == MP_COLL_BROADCAST ? "in place" : "out-of-place", iters);
  fprintf (c->out, "#       size         count      type   redop    root     time   algbw   "
                   "busbw  #wrong\n");
  fprintf (c->out, "#        (B)    (elements)                               (us)  (GB/s)  "
                   "(GB/s)\n");
}

static void
print_row (Cal *c, const Coll *coll, gsize bytes, gsize count, double t, long wrong)
{
  double us = t * 1e6;
  const char *fmt = us >= 1e4 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f";
  char time_text[32];
  g_snprintf (time_text, sizeof time_text, fmt, us);
  fprintf (c->out, "%12zu  %12zu  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6ld\n", bytes, count,
           "float", coll->redop, coll->root, time_text, mp_coll_algbw (bytes, t) / 1e9,
           mp_coll_busbw (coll->kind, c->size, bytes, t) / 1e9, wrong);
}

/* Sweeps COLL over 8 B .. the backend's largest message; adds the busbw table to the
 * profile in TIER (unless TIER is MP_TIER_N: ranks neither all on one node nor one per
 * node). */
static gboolean
sweep (Cal *c, const Coll *coll, MpTier tier, long *total_wrong, GError **error)
{
  const CalDevice *d = c->dev;
  gsize max_bytes = c->quick ? d->coll_max_quick : d->coll_max;
  int max_iters = c->quick ? d->coll_iters_quick : d->coll_iters;
  /* Fewer iterations for large messages: about BUDGET bytes moved per row. */
  gsize budget = c->quick ? d->coll_budget_quick : d->coll_budget;
  CollBufs b;
  if (!bufs_alloc (c, coll, max_bytes, &b, error))
    return FALSE;
  g_autoptr(GArray) sizes = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr(GArray) busbw = g_array_new (FALSE, FALSE, sizeof (double));
  double sum_busbw = 0;
  long wrong_here = 0;
  gboolean ok = TRUE;
  if (c->out)
    print_header (c, coll, max_iters);
  for (gsize s = 8; ok && s <= max_bytes; s *= 2)
    {
      gsize count = coll->count_of (c->size, s), bytes = coll->bytes_of (c->size, count);
      if (count == 0 || (sizes->len && bytes <= g_array_index (sizes, double, sizes->len - 1)))
        continue;
      int iters = (int) CLAMP (budget / bytes, (gsize) 3, (gsize) max_iters);
      double t = 0;
      long wrong = 0;
      ok = run_size (c, coll, count, &b, iters, &t, &wrong, error);
      if (!ok)
        break;
      double bus = mp_coll_busbw (coll->kind, c->size, bytes, t);
      sum_busbw += bus;
      wrong_here += wrong;
      double size_d = (double) bytes, bus_r = round4 (bus);
      g_array_append_val (sizes, size_d);
      g_array_append_val (busbw, bus_r);
      if (c->out)
        print_row (c, coll, bytes, count, t, wrong);
    }
  bufs_free (c, &b);
  if (!ok)
    return FALSE;
  if (c->out)
    fprintf (c->out, "# Out of bounds values : %ld %s\n# Avg bus bandwidth : %g\n\n", wrong_here,
             wrong_here ? "FAILED" : "OK", sizes->len ? sum_busbw / sizes->len / 1e9 : 0.0);
  *total_wrong += wrong_here;
  if (tier == MP_TIER_N || sizes->len == 0)
    return TRUE;
  return mp_cost_profile_set_coll (c->profile, coll->kind, tier, (guint) c->size,
                                   (double *) sizes->data, (double *) busbw->data, sizes->len,
                                   error);
}

/* The tier the ranks span: NODE when they share one host, CLUSTER when each has its own,
 * MP_TIER_N (no table recorded) for a mix. */
static gboolean
ranks_tier (Cal *c, MpTier *tier, GError **error)
{
  char mine[MPI_MAX_PROCESSOR_NAME] = { 0 };
  int len = 0;
  CAL_MPI_TRY (MPI_Get_processor_name (mine, &len));
  g_autofree char *all = g_malloc0 ((gsize) MPI_MAX_PROCESSOR_NAME * c->size);
  CAL_MPI_TRY (MPI_Allgather (mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all,
                              MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD));
  g_autoptr(GHashTable) hosts = g_hash_table_new (g_str_hash, g_str_equal);
  for (int r = 0; r < c->size; r++)
    g_hash_table_add (hosts, all + (gsize) r * MPI_MAX_PROCESSOR_NAME);
  guint nodes = g_hash_table_size (hosts);
  *tier = nodes == 1 ? MP_TIER_NODE : nodes == (guint) c->size ? MP_TIER_CLUSTER : MP_TIER_N;
  return TRUE;
}

static gboolean
measure_collectives (Cal *c, gboolean *all_right, GError **error)
{
  MpTier tier;
  if (!ranks_tier (c, &tier, error))
    return FALSE;
  if (c->out && tier == MP_TIER_N)
    fprintf (c->out, "# ranks span several nodes unevenly: tables printed, not recorded\n");
  long wrong = 0;
  for (guint i = 0; i < G_N_ELEMENTS (colls); i++)
    if (!sweep (c, &colls[i], tier, &wrong, error))
      return FALSE;
  *all_right = wrong == 0;
  return TRUE;
}

/* ---- the whole run -------------------------------------------------------------------- */

/* The "model name" line of /proc/cpuinfo, or NULL. */
static char *
cpu_model (void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents ("/proc/cpuinfo", &text, NULL, NULL))
    return NULL;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (int i = 0; lines[i]; i++)
    if (g_str_has_prefix (lines[i], "model name"))
      {
        const char *colon = strchr (lines[i], ':');
        return colon ? g_strstrip (g_strdup (colon + 1)) : NULL;
      }
  return NULL;
}

static void
describe_machine (MpCostProfile *p)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *date = g_date_time_format (now, "%Y-%m-%dT%H:%M:%SZ");
  g_autofree char *cpu = cpu_model ();
  MpProfileMachine m = { (char *) g_get_host_name (), cpu, g_get_num_processors (), date,
                         (char *) PACKAGE_VERSION };
  mp_cost_profile_set_machine (p, &m);
}

/* ---- the backends ----------------------------------------------------------------------- */

static const MpDtype host_dtypes[] = { MP_DTYPE_FP32 };
static const char *const host_zoo[] = { "tiny-gpt", "gpt2-124m", "mlp-1024", NULL };

static const CalDevice host_device = {
  .name = "host",
  .default_device = "cpu-core",
  .dtypes = host_dtypes,
  .n_dtypes = G_N_ELEMENTS (host_dtypes),
  /* Enough repetitions for a few milliseconds at a few tens of GFLOP/s. */
  .gemm_lo = 16, .gemm_hi = 2048, .gemm_hi_quick = 1024,
  .gemm_flops = 1e9, .gemm_flops_quick = 2e8,
  .zoo = host_zoo,
  .gemm_how = "OpenBLAS sgemm, 1 thread per rank",
  /* A shared CPU sees bursts of load from elsewhere that last seconds. */
  .passes = 3, .passes_quick = 2,
  .memory = triad_bandwidth,
  .calls = { [MP_COLL_ALL_REDUCE] = "MPI_Allreduce", [MP_COLL_ALL_GATHER] = "MPI_Allgather",
             [MP_COLL_REDUCE_SCATTER] = "MPI_Reduce_scatter_block",
             [MP_COLL_ALL_TO_ALL] = "MPI_Alltoall", [MP_COLL_BROADCAST] = "MPI_Bcast",
             [MP_COLL_SEND_RECV] = "MPI_Sendrecv" },
  .coll_max = (gsize) 64 << 20, .coll_max_quick = (gsize) 4 << 20,
  .coll_budget = (gsize) 64 << 20, .coll_budget_quick = (gsize) 8 << 20,
  .coll_iters = 20, .coll_iters_quick = 10,
  .host_memory = TRUE,
  .coll = mpi_coll,
  .reference_kernels = TRUE,
};

#ifdef HAVE_CUDA
static gboolean
cuda_coll (Cal *c, MpCollKind kind, float *send, float *recv, gsize count, int iters,
           GError **error)
{
  return mp_backend_cuda_run_coll (c->be, c->group, kind, send, recv, count, iters, error);
}

static gboolean
cuda_gemm_dtype (Cal *c, MpDtype dtype, GError **error)
{
  return mp_backend_cuda_set_gemm_dtype (c->be, dtype, error);
}

/* bf16 first: the `cuda` backend's GEMM, then the `cuda-fp32` one. */
static const MpDtype cuda_dtypes[] = { MP_DTYPE_BF16, MP_DTYPE_FP32 };
static const char *const cuda_zoo[] = { "gpt2-124m", NULL };

static const CalDevice cuda_device = {
  .name = "cuda",
  .default_device = NULL,   /* the GPU's name */
  .dtypes = cuda_dtypes,
  .n_dtypes = G_N_ELEMENTS (cuda_dtypes),
  /* 256: below it a GEMM is launch latency. Repetitions for a few milliseconds at a few
   * hundred TFLOP/s (an 8192^3 GEMM runs once after its warm-up). */
  .gemm_lo = 256, .gemm_hi = 8192, .gemm_hi_quick = 4096,
  .gemm_flops = 2e12, .gemm_flops_quick = 5e11,
  .zoo = cuda_zoo,
  .passes = 1, .passes_quick = 1,
  .gemm_how = "the cuda backend's cuBLAS GEMM: bf16 inputs cast in the call, fp32 "
              "accumulation; fp32 without TF32; one GPU per rank",
  .memory = copy_bandwidth,
  .calls = { [MP_COLL_ALL_REDUCE] = "ncclAllReduce", [MP_COLL_ALL_GATHER] = "ncclAllGather",
             [MP_COLL_REDUCE_SCATTER] = "ncclReduceScatter",
             [MP_COLL_ALL_TO_ALL] = "ncclSend/ncclRecv to every peer",
             [MP_COLL_BROADCAST] = "ncclBroadcast",
             [MP_COLL_SEND_RECV] = "ncclSend/ncclRecv in a ring" },
  .coll_max = (gsize) 256 << 20, .coll_max_quick = (gsize) 64 << 20,
  .coll_budget = (gsize) 4 << 30, .coll_budget_quick = (gsize) 1 << 30,
  .coll_iters = 20, .coll_iters_quick = 10,
  .host_memory = FALSE,
  .world_group = TRUE,
  .coll = cuda_coll,
  .gemm_dtype = cuda_gemm_dtype,
};
#endif

/* The device the profile applies to: OPTS's, the backend's default, or the GPU's name. */
static char *
profile_device (const Cal *c, const MpCalibrateOptions *opts, GError **error)
{
  if (opts->device != NULL && opts->device[0] != '\0')
    return g_strdup (opts->device);
  if (c->dev->default_device != NULL)
    return g_strdup (c->dev->default_device);
#ifdef HAVE_CUDA
  return mp_backend_cuda_device_name (c->be, error);
#else
  g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "backend %s names no device", c->dev->name);
  return NULL;
#endif
}

/* A fixed GEMM (512^3, or the grid's largest below it) timed at the start of a pass, its
 * rate into *PROBE: how busy the machine is, pass by pass. */
static gboolean
probe_pass (Cal *c, GemmGrid *g, double *probe, GError **error)
{
  int n = (int) MIN (512.0, g_array_index (g->m, double, g->m->len - 1));
  double t = 0;
  if (!time_gemm (c, g->out, g->a, g->w, n, n, n, &t, error))
    return FALSE;
  *probe = 2.0 * n * n * n / t;
  return TRUE;
}

/* The GEMM grid and the reference kernels in whole passes, each measurement's best kept:
 * load from elsewhere on a shared machine comes in bursts of seconds, and a pass over
 * both spreads each measurement's repeats over the run. Warns when the probe GEMM varied
 * between passes: the machine was not idle. */
static gboolean
measure_passes (Cal *c, GError **error)
{
  GemmGrid grid = { 0 };
  g_autoptr(GPtrArray) models = g_ptr_array_new_with_free_func ((GDestroyNotify) mp_model_free);
  g_autoptr(GArray) jobs = c->dev->reference_kernels ? kjobs_new (c->dev->zoo, models) : NULL;
  double lo = G_MAXDOUBLE, hi = 0;
  gboolean ok = gemm_grid_init (c, &grid, error);
  for (int pass = 0; ok && pass < c->passes; pass++)
    {
      double probe = 0;
      ok = probe_pass (c, &grid, &probe, error);
      if (ok && c->out)
        {
          fprintf (c->out, "# pass %d/%d: probe GEMM %.2f GFLOP/s; the GEMM grid%s\n",
                   pass + 1, c->passes, probe / 1e9, jobs ? " and the reference kernels" : "");
          fflush (c->out);
        }
      lo = MIN (lo, probe), hi = MAX (hi, probe);
      ok = ok && gemm_grid_pass (c, &grid, error) && (jobs == NULL || kjobs_pass (c, jobs, error));
    }
  if (ok && c->out)
    fputc ('\n', c->out);
  ok = ok && gemm_grid_finish (c, &grid, error) && (jobs == NULL || kjobs_finish (c, jobs, error));
  gemm_grid_clear (c, &grid);
  if (ok && c->out && hi > 1.1 * lo)
    fprintf (c->out, "# note: the probe GEMM ran at %.2f to %.2f GFLOP/s over the passes: "
             "this machine was busy. Each rate is its best over the passes; if no pass was "
             "quiet, run calibrate again on an idle machine.\n\n", lo / 1e9, hi / 1e9);
  return ok;
}

/* Everything, once the backend is open. */
static MpCostProfile *
calibrate (Cal *c, const MpCalibrateOptions *opts, GError **error)
{
  g_autofree char *device = profile_device (c, opts, error);
  if (device == NULL)
    return NULL;
  g_autoptr(MpCostProfile) profile = mp_cost_profile_new (device);
  c->profile = profile;
  describe_machine (profile);
  if (c->out)
    fprintf (c->out, "# calibrate --backend %s: profile for device '%s'\n\n", c->dev->name,
             device);
  if (!measure_passes (c, error) || !measure_memory (c, error))
    return NULL;
  gboolean all_right = TRUE;
  if (c->size < 2)
    {
      if (c->out)
        fprintf (c->out, "# collectives skipped: one process (start it under mpirun -np N "
                         "to measure them)\n");
    }
  else if (!measure_collectives (c, &all_right, error))
    return NULL;
  if (!all_right)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "collectives returned wrong results (#wrong above): profile not written");
      return NULL;
    }
  return g_steal_pointer (&profile);
}

MpCostProfile *
mp_calibrate (MpWorld *world, const MpCalibrateOptions *opts, GError **error)
{
  g_return_val_if_fail (world != NULL && opts != NULL, NULL);
  const char *name = opts->backend ? opts->backend : "host";
  const CalDevice *dev = NULL;
  if (strcmp (name, "host") == 0)
    dev = &host_device;
#ifdef HAVE_CUDA
  else if (strcmp (name, "cuda") == 0)
    dev = &cuda_device;
#endif
  int rank = mp_world_rank (world), size = mp_world_size (world);
  /* The registry first: it says "no CUDA device" without a GPU or a CUDA build. */
  MpBackend *be = mp_backend_new (name, rank, size, error);
  if (be == NULL)
    return NULL;
  if (dev == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "calibrate: backend '%s' is not one of "
                   "host, cuda", name);
      be->ops->free (be);
      return NULL;
    }
  Cal c = { world, rank, size, opts->quick, opts->quick ? dev->passes_quick : dev->passes,
            rank == 0 ? opts->out : NULL, NULL, dev, be, NULL };
  MpCostProfile *profile = NULL;
  /* A group of every rank before any buffer: the cuda backend's collectives need its
   * communicator, made while the device still has room for NCCL's own buffers. */
  if (size < 2 || !dev->world_group
      || (c.group = be->ops->group_split (be, 0, rank, error)) != NULL)
    profile = calibrate (&c, opts, error);
  if (c.group)
    be->ops->group_free (be, c.group);
  be->ops->free (be);
  return profile;
}
