/* calibrate.c - `mpplan calibrate --backend host|cuda`: measure this machine with every
 * rank of the MPI world at once, and fill a calibration profile (costmodel/costmodel.h).
 *
 * What is measured is backend-independent: the GEMM grid (calibrate-gemm.c), the
 * executor's reference kernels (calibrate-kernels.c), memory bandwidth (here) and the
 * collective sweep printed as nccl-tests prints it (calibrate-coll.c), with every result
 * checked on the host. Each backend (a CalDevice below) brings only what differs: its GEMM
 * dtypes and grid range, its memory test and the sizes of its sweep; everything runs
 * through MpBackendOps (kernels, memory, run_coll, the host-side barrier and reductions),
 * so one timing loop serves both backends.
 *
 *  - host: fp32 GEMMs through the host backend's matmul (OpenBLAS sgemm, one thread per
 *    rank); memory as a STREAM-style triad a[i] = b[i] + s c[i]; collectives through MPI,
 *    out-of-place except broadcast (MPI has no out-of-place broadcast).
 *  - cuda: the cuda backend's own GEMM (cuBLAS; bf16 inputs cast on the fly with fp32
 *    accumulation, which is what `exec --backend cuda` runs, and pedantic fp32), device-to-
 *    device copies, and NCCL collectives; one GPU per rank.
 *
 * A time is the slowest rank's (nccl-tests `-a 3`), averaged over the timed iterations
 * after a warm-up; GEMMs, kernels and memory keep the median of their repeats and record
 * the repeats' spread in the profile (MpSpreadKind). Not here: the profile file (costmodel/profile-yaml.c), the command line
 * (cli/cmd-calibrate.c). Units: seconds, bytes, FLOP/s, bytes/s. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/calibrate-private.h"
#include "common/error.h"
#include "common/stats.h"

#include <math.h>
#include <string.h>
#include <time.h>

double
cal_now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double
cal_round4 (double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  return g_ascii_strtod (g_ascii_formatd (buf, sizeof buf, "%.4g", v), NULL);
}

gboolean
cal_barrier (Cal *c, GError **error)
{
  return c->be->ops->barrier (c->be, error);
}

gboolean
cal_max_over_ranks (Cal *c, double *x, GError **error)
{
  return c->be->ops->host_all_reduce (c->be, x, 1, MP_REDUCE_MAX, error);
}

float *
cal_dev_floats (Cal *c, gsize n, GError **error)
{
  return c->be->ops->alloc (c->be, MAX (n, (gsize) 1) * sizeof (float), MP_MEM_OTHER, error);
}

double
cal_median (double *x, guint n, GArray *spreads)
{
  double spread = 0, med = mp_stat_median (x, n, &spread);
  g_array_append_val (spreads, spread);
  return med;
}

void
cal_record_spread (Cal *c, MpSpreadKind kind, guint repeats, GArray *spreads)
{
  static const char *const what[] = { "GEMM grid", "reference kernels", "memory test" };
  G_STATIC_ASSERT (G_N_ELEMENTS (what) == MP_SPREAD_N);
  if (spreads->len == 0)
    return;
  double s = cal_round4 (mp_stat_median ((double *) spreads->data, spreads->len, NULL));
  mp_cost_profile_set_spread (c->profile, kind, repeats, s);
  if (c->out == NULL)
    return;
  fprintf (c->out, "# spread of the %s: %.1f%% (interquartile range of %u repeats over "
           "their median, median over %u measurement%s)\n", what[kind], 100 * s, repeats,
           spreads->len, spreads->len == 1 ? "" : "s");
  if (s > MP_SPREAD_WARN)
    fprintf (c->out, "# warning: repeats of the %s spread by more than %.0f%%: this machine "
             "was busy, and predictions from this profile will move with it. Calibrate "
             "again on an idle machine.\n", what[kind], 100 * MP_SPREAD_WARN);
  fputc ('\n', c->out);
}

void
cal_axis_add (GArray *axis, double v, double lo, double hi)
{
  if (v < lo || v > hi || v != floor (v))
    return;
  guint i = 0;
  while (i < axis->len && g_array_index (axis, double, i) < v)
    i++;
  if (i == axis->len || g_array_index (axis, double, i) != v)
    g_array_insert_val (axis, i, v);
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
  double t[11];
  g_assert (reps < (int) G_N_ELEMENTS (t));
  for (int r = 0; r <= reps; r++)
    {
      if (!cal_barrier (c, error))
        return FALSE;
      double t0 = cal_now_s ();
      for (gsize i = 0; i < n; i++)
        a[i] = b[i] + 3.0 * x[i];
      t[r] = cal_now_s () - t0;
      if (!cal_max_over_ranks (c, &t[r], error))
        return FALSE;
    }
  /* The first pass faults the pages in: left out. The median, as everywhere here. */
  g_autoptr(GArray) spreads = g_array_new (FALSE, FALSE, sizeof (double));
  double med = cal_median (t + 1, (guint) reps, spreads);
  cal_record_spread (c, MP_SPREAD_MEMORY, (guint) reps, spreads);
  /* STREAM counting: two arrays read, one written. The check keeps the loop alive. */
  if (a[n / 2] != 7.0)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "memory test: wrong result %g", a[n / 2]);
      return FALSE;
    }
  *bytes_per_s = 3.0 * sizeof (double) * n / med;
  *how = g_strdup_printf ("triad, %zu MiB per array", n * sizeof (double) >> 20);
  return TRUE;
}

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
      ok = cal_barrier (c, error);
      double t0 = be->ops->now_s (be);
      for (int i = 0; ok && i < inner; i++)
        be->ops->copy (be, dst, src, bytes);
      double t = (be->ops->now_s (be) - t0) / inner;
      ok = ok && be->ops->wait (be, NULL, error) && cal_max_over_ranks (c, &t, error);
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

static gboolean
measure_memory (Cal *c, GError **error)
{
  double bw = 0;
  g_autofree char *how = NULL;
  if (!c->dev->memory (c, &bw, &how, error))
    return FALSE;
  bw = cal_round4 (bw);
  if (c->out)
    fprintf (c->out, "# memory (%s, %d rank%s at once): %.2f GB/s per rank read + written\n\n",
             how, c->size, c->size == 1 ? "" : "s", bw / 1e9);
  mp_cost_profile_set_mem_bw (c->profile, bw);
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
/* tiny-moe: the swiglu and the small expert GEMM shapes the host runs. */
static const char *const host_zoo[] = { "tiny-gpt", "gpt2-124m", "mlp-1024", "tiny-moe", NULL };

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
  .passes = 5, .passes_quick = 3,
  .memory = triad_bandwidth,
  .coll_max = (gsize) 64 << 20, .coll_max_quick = (gsize) 4 << 20,
  .coll_budget = (gsize) 64 << 20, .coll_budget_quick = (gsize) 8 << 20,
  .coll_iters = 20, .coll_iters_quick = 10,
  .host_memory = TRUE,
  .reference_kernels = TRUE,
};

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
  .coll_max = (gsize) 256 << 20, .coll_max_quick = (gsize) 64 << 20,
  .coll_budget = (gsize) 4 << 30, .coll_budget_quick = (gsize) 1 << 30,
  .coll_iters = 20, .coll_iters_quick = 10,
  .host_memory = FALSE,
};

/* The device the profile applies to: OPTS's, the backend's default, or the GPU's name. */
static char *
profile_device (const Cal *c, const MpCalibrateOptions *opts, GError **error)
{
  if (opts->device != NULL && opts->device[0] != '\0')
    return g_strdup (opts->device);
  if (c->dev->default_device != NULL)
    return g_strdup (c->dev->default_device);
  if (c->be->ops->device_name != NULL)
    return c->be->ops->device_name (c->be, error);
  g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "backend %s names no device", c->dev->name);
  return NULL;
}

/* The GEMM grid and the reference kernels in whole passes, each measurement's median over
 * them kept: load from elsewhere on a shared machine comes in bursts of seconds, and a
 * pass over both spreads each measurement's repeats over the run. The median and not the
 * best: the best of a few passes is an extreme of the load (one quiet pass moves it, so
 * two calibrations disagree), while the median of an odd count ignores a minority of busy
 * or lucky passes; and the executor's step, which the profile predicts, is itself the
 * median of its steps (report/, `verify`). pyperf, the CPython benchmarks' runner, reports
 * "Median +- MAD" for the same reason (`pyperf stats`; adopted in github.com/haypo/perf
 * issue #1, "Use a better measures than average and standard deviation"). Warns when the
 * probe GEMM varied between passes. */
static gboolean
measure_passes (Cal *c, GError **error)
{
  CalGemmGrid grid = { 0 };
  g_autoptr(GPtrArray) models = g_ptr_array_new_with_free_func ((GDestroyNotify) mp_model_free);
  g_autoptr(GArray) jobs = c->dev->reference_kernels ? cal_kjobs_new (c->dev->zoo, models) : NULL;
  double lo = G_MAXDOUBLE, hi = 0;
  gboolean ok = cal_gemm_grid_init (c, &grid, error);
  for (int pass = 0; ok && pass < c->passes; pass++)
    {
      double probe = 0;
      ok = cal_gemm_probe (c, &grid, &probe, error);
      if (ok && c->out)
        {
          fprintf (c->out, "# pass %d/%d: probe GEMM %.2f GFLOP/s; the GEMM grid%s\n",
                   pass + 1, c->passes, probe / 1e9, jobs ? " and the reference kernels" : "");
          fflush (c->out);
        }
      lo = MIN (lo, probe), hi = MAX (hi, probe);
      ok = ok && cal_gemm_grid_pass (c, &grid, error) && (jobs == NULL || cal_kjobs_pass (c,
                                     jobs, error));
    }
  if (ok && c->out)
    fputc ('\n', c->out);
  ok = ok && cal_gemm_grid_finish (c, &grid, error) && (jobs == NULL || cal_kjobs_finish (c,
                                   jobs, error))
       && (!c->dev->host_memory || cal_gemm_cold_weight (c, error));
  cal_gemm_grid_clear (c, &grid);
  if (ok && c->out && hi > 1.1 * lo)
    fprintf (c->out, "# note: the probe GEMM ran at %.2f to %.2f GFLOP/s over the passes: "
             "this machine was busy. Each rate is its median over the passes; if most were "
             "busy, run calibrate again on an idle machine.\n\n", lo / 1e9, hi / 1e9);
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
  else if (!cal_measure_collectives (c, &all_right, error))
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
  else if (strcmp (name, "cuda") == 0)
    dev = &cuda_device;
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
  Cal c = { rank, size, opts->quick, opts->quick ? dev->passes_quick : dev->passes,
            rank == 0 ? opts->out : NULL, NULL, dev, be, NULL };
  MpCostProfile *profile = NULL;
  /* A group of every rank before any buffer: the cuda backend's collectives need its
   * communicator, made while the device still has room for NCCL's own buffers. */
  if (size < 2 || (c.group = be->ops->group_split (be, 0, rank, error)) != NULL)
    profile = calibrate (&c, opts, error);
  if (c.group)
    be->ops->group_free (be, c.group);
  be->ops->free (be);
  return profile;
}
