/* calibrate.c - `mpplan calibrate --backend host`: measure this machine with every rank of
 * the MPI world at once, and fill a calibration profile (costmodel/costmodel.h) with it.
 *
 *  - GEMM: fp32 through mpk_cpu_matmul_forward (OpenBLAS sgemm, one thread per rank) on a
 *    grid whose axes are powers of two plus the dimensions the zoo's small models use
 *    (tiny-gpt, gpt2-124m, mlp-1024, whole and split over two tensor-parallel ranks).
 *  - memory: a STREAM-style triad, a[i] = b[i] + s c[i]; bytes read + written per second.
 *  - collectives (2 ranks or more): every one the cost model uses, and send/recv, printed
 *    as nccl-tests prints them (ECOSYSTEM.md 5.1), out-of-place only (MPI_Bcast has no
 *    out-of-place form: its buffer is the root's data), every result checked.
 *
 * All ranks run every measurement together, as the executor's ranks share the machine;
 * a time is the slowest rank's (nccl-tests `-a 3`), averaged over the timed iterations
 * after a warm-up. Not here: the profile file (costmodel/profile-yaml.c), the command
 * line (cli/cmd-calibrate.c). Units: seconds, bytes, FLOP/s, bytes/s. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec.h"
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

typedef struct {
  MpWorld *world;
  int rank, size;
  gboolean quick;
  FILE *out;                /* rank 0 only; NULL elsewhere */
  MpCostProfile *profile;
} Cal;

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

/* The dimensions of the zoo's small models: every GEMM's n and k (M is tokens), whole and
 * split over 2 tensor-parallel ranks, and their sequence lengths as token counts. */
static void
zoo_dims (GArray *nk, GArray *m, double lo, double hi)
{
  static const char *const models[] = { "tiny-gpt", "gpt2-124m", "mlp-1024", NULL };
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

/* Seconds per GEMM of M x N x K (slowest rank), after a warm-up, over REPS runs. */
static gboolean
time_gemm (Cal *c, float *out, const float *a, const float *w, int m, int n, int k,
           double *time_s, GError **error)
{
  double flops = 2.0 * m * n * k;
  /* Enough repetitions for a few milliseconds at a few tens of GFLOP/s. */
  int reps = (int) CLAMP ((c->quick ? 2e8 : 1e9) / flops, 1, 200);
  mpk_cpu_matmul_forward (out, a, w, NULL, m, k, n);
  if (!barrier (c, error))
    return FALSE;
  double t0 = now_s ();
  for (int r = 0; r < reps; r++)
    mpk_cpu_matmul_forward (out, a, w, NULL, m, k, n);
  *time_s = (now_s () - t0) / reps;
  return max_over_ranks (c, time_s, error);
}

/* Prints a few rows of the grid (its cube diagonal) and the range of rates. */
static void
print_gemm_summary (Cal *c, GArray *axes[3], const double *rate)
{
  if (c->out == NULL)
    return;
  double lo = G_MAXDOUBLE, hi = 0;
  gsize cells = (gsize) axes[0]->len * axes[1]->len * axes[2]->len;
  for (gsize i = 0; i < cells; i++)
    lo = MIN (lo, rate[i]), hi = MAX (hi, rate[i]);
  fprintf (c->out, "#      M       N       K   GFLOP/s   (M = N = K rows of the grid)\n");
  for (guint i = 0; i < axes[0]->len; i++)
    for (guint j = 0; j < axes[1]->len; j++)
      for (guint l = 0; l < axes[2]->len; l++)
        {
          double m = g_array_index (axes[0], double, i);
          if (m != g_array_index (axes[1], double, j) || m != g_array_index (axes[2], double, l))
            continue;
          fprintf (c->out, "  %7.0f %7.0f %7.0f  %8.2f\n", m, m, m,
                   rate[((gsize) i * axes[1]->len + j) * axes[2]->len + l] / 1e9);
        }
  fprintf (c->out, "# GEMM fp32: %zu shapes, %.2f to %.2f GFLOP/s per rank\n\n", cells,
           lo / 1e9, hi / 1e9);
}

static gboolean
measure_gemm (Cal *c, GError **error)
{
  double lo = 16, hi = c->quick ? 1024 : 2048;
  g_autoptr(GArray) m = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr(GArray) nk = g_array_new (FALSE, FALSE, sizeof (double));
  /* Powers of two (of four when quick), then the zoo's own dimensions. */
  for (double v = lo; v <= hi; v *= c->quick ? 4 : 2)
    {
      axis_add (m, v, lo, hi);
      axis_add (nk, v, lo, hi);
    }
  zoo_dims (nk, m, lo, hi);
  GArray *axes[3] = { m, nk, nk };
  gsize cells = (gsize) m->len * nk->len * nk->len;
  if (c->out)
    fprintf (c->out, "# GEMM fp32 (OpenBLAS sgemm, 1 thread per rank, %d rank%s at once): "
             "%u x %u x %u shapes\n", c->size, c->size == 1 ? "" : "s", m->len, nk->len,
             nk->len);
  mpk_cpu_init_threads (1);
  gsize big = (gsize) hi * hi;
  g_autofree float *a = g_new (float, big), *w = g_new (float, big), *out = g_new (float, big);
  for (gsize i = 0; i < big; i++)
    a[i] = w[i] = (float) ((i % 17) - 8) / 8.0f;
  g_autofree double *rate = g_new (double, cells);
  for (gsize cell = 0; cell < cells; cell++)
    {
      gsize i = cell / (nk->len * nk->len), j = cell / nk->len % nk->len, l = cell % nk->len;
      int mm = (int) g_array_index (m, double, i), n = (int) g_array_index (nk, double, j),
          k = (int) g_array_index (nk, double, l);
      double t = 0;
      if (!time_gemm (c, out, a, w, mm, n, k, &t, error))
        return FALSE;
      rate[cell] = round4 (2.0 * mm * n * k / t);
    }
  print_gemm_summary (c, axes, rate);
  return mp_cost_profile_set_gemm (c->profile, MP_DTYPE_FP32, (double *) m->data, m->len,
                                   (double *) nk->data, nk->len, (double *) nk->data, nk->len,
                                   rate, error);
}

/* ---- memory --------------------------------------------------------------------------- */

static gboolean
measure_memory (Cal *c, GError **error)
{
  /* Arrays well beyond any last-level cache share of one core. */
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
  double bw = round4 (3.0 * sizeof (double) * n / best);
  if (a[n / 2] != 7.0)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "memory test: wrong result %g", a[n / 2]);
      return FALSE;
    }
  if (c->out)
    fprintf (c->out, "# memory (triad, %zu MiB per array, %d rank%s at once): %.2f GB/s per "
             "rank read + written\n\n", n * sizeof (double) >> 20, c->size,
             c->size == 1 ? "" : "s", bw / 1e9);
  mp_cost_profile_set_mem_bw (c->profile, bw);
  return TRUE;
}

/* ---- collectives ---------------------------------------------------------------------- */

/* One collective as nccl-tests tests it. Buffers hold floats; COUNT is what the printed
 * `count` column says (per rank for all-gather and reduce-scatter, ECOSYSTEM.md 5.1). */
typedef struct Coll Coll;
struct Coll {
  MpCollKind kind;
  const char *mpi_name, *redop;
  int root;                                  /* -1: none */
  /* Elements of the send and receive buffers for COUNT. */
  void (*buffers) (int n, gsize count, gsize *send, gsize *recv);
  /* COUNT for a size in bytes, 0 when it cannot be formed. */
  gsize (*count_of) (int n, gsize bytes);
  gsize (*bytes_of) (int n, gsize count);     /* nccl-tests size */
  void (*fill) (int rank, int n, gsize count, float *send, float *recv);
  int (*run) (float *send, float *recv, gsize count, int rank, int n);
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
  { MP_COLL_ALL_REDUCE, "MPI_Allreduce", "sum", -1, ar_buffers, count_whole, bytes_whole,
    ar_fill, ar_run, ar_check },
  { MP_COLL_ALL_GATHER, "MPI_Allgather", "none", -1, ag_buffers, count_per_rank, bytes_all,
    ag_fill, ag_run, ag_check },
  { MP_COLL_REDUCE_SCATTER, "MPI_Reduce_scatter_block", "sum", -1, rs_buffers, count_per_rank,
    bytes_all, rs_fill, rs_run, rs_check },
  { MP_COLL_ALL_TO_ALL, "MPI_Alltoall", "none", -1, ar_buffers, a2a_count, bytes_whole,
    a2a_fill, a2a_run, a2a_check },
  { MP_COLL_BROADCAST, "MPI_Bcast", "none", 0, ar_buffers, count_whole, bytes_whole, bc_fill,
    bc_run, bc_check },
  { MP_COLL_SEND_RECV, "MPI_Sendrecv", "none", -1, ar_buffers, count_whole, bytes_whole,
    sr_fill, sr_run, sr_check },
};

/* One row: time (slowest rank, mean over ITERS after a warm-up) and #wrong (all ranks). */
static gboolean
run_size (Cal *c, const Coll *coll, gsize count, float *send, float *recv, int iters,
          double *time_s, long *wrong, GError **error)
{
  coll->fill (c->rank, c->size, count, send, recv);
  CAL_MPI_TRY (coll->run (send, recv, count, c->rank, c->size));
  if (!barrier (c, error))
    return FALSE;
  double t0 = now_s ();
  for (int i = 0; i < iters; i++)
    CAL_MPI_TRY (coll->run (send, recv, count, c->rank, c->size));
  *time_s = (now_s () - t0) / iters;
  if (!max_over_ranks (c, time_s, error))
    return FALSE;
  long mine = (long) coll->check (c->rank, c->size, count, recv);
  CAL_MPI_TRY (MPI_Allreduce (&mine, wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
  return TRUE;
}

static void
print_header (Cal *c, const Coll *coll, int iters)
{
  fprintf (c->out, "# %s_perf: %s, %d ranks, out-of-place, float; time = the slowest rank's "
           "mean over up to %d iterations after 1 warm-up (nccl-tests -a 3)\n#\n",
           mp_coll_kind_name (coll->kind), coll->mpi_name, c->size, iters);
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

/* Sweeps COLL over 8 B .. MAX_BYTES; adds the busbw table to the profile in TIER (unless
 * TIER is MP_TIER_N: ranks neither all on one node nor one per node). */
static gboolean
sweep (Cal *c, const Coll *coll, MpTier tier, long *total_wrong, GError **error)
{
  gsize max_bytes = (gsize) (c->quick ? 4 : 64) << 20;
  int max_iters = c->quick ? 10 : 20;
  gsize send_n, recv_n;
  coll->buffers (c->size, coll->count_of (c->size, max_bytes), &send_n, &recv_n);
  g_autofree float *send = g_new (float, MAX (send_n, (gsize) 1));
  g_autofree float *recv = g_new (float, MAX (recv_n, (gsize) 1));
  g_autoptr(GArray) sizes = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr(GArray) busbw = g_array_new (FALSE, FALSE, sizeof (double));
  double sum_busbw = 0;
  long wrong_here = 0;
  if (c->out)
    print_header (c, coll, max_iters);
  for (gsize b = 8; b <= max_bytes; b *= 2)
    {
      gsize count = coll->count_of (c->size, b), bytes = coll->bytes_of (c->size, count);
      if (count == 0 || (sizes->len && bytes <= g_array_index (sizes, double, sizes->len - 1)))
        continue;
      /* Fewer iterations for large messages: about 8 MB (quick) moved per row. */
      gsize budget = (gsize) (c->quick ? 8 : 64) << 20;
      int iters = (int) CLAMP (budget / bytes, (gsize) 3, (gsize) max_iters);
      double t = 0;
      long wrong = 0;
      if (!run_size (c, coll, count, send, recv, iters, &t, &wrong, error))
        return FALSE;
      double bus = mp_coll_busbw (coll->kind, c->size, bytes, t);
      sum_busbw += bus;
      wrong_here += wrong;
      double size_d = (double) bytes, bus_r = round4 (bus);
      g_array_append_val (sizes, size_d);
      g_array_append_val (busbw, bus_r);
      if (c->out)
        print_row (c, coll, bytes, count, t, wrong);
    }
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

MpCostProfile *
mp_calibrate_host (MpWorld *world, const MpCalibrateOptions *opts, GError **error)
{
  g_return_val_if_fail (world != NULL && opts != NULL, NULL);
  g_autoptr(MpCostProfile) profile = mp_cost_profile_new (opts->device);
  Cal c = { world, mp_world_rank (world), mp_world_size (world), opts->quick,
            mp_world_rank (world) == 0 ? opts->out : NULL, profile };
  describe_machine (profile);
  if (!measure_gemm (&c, error) || !measure_memory (&c, error))
    return NULL;
  gboolean all_right = TRUE;
  if (c.size < 2)
    {
      if (c.out)
        fprintf (c.out, "# collectives skipped: one process (start it under mpirun -np N "
                        "to measure them)\n");
    }
  else if (!measure_collectives (&c, &all_right, error))
    return NULL;
  if (!all_right)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "collectives returned wrong results (#wrong above): profile not written");
      return NULL;
    }
  return g_steal_pointer (&profile);
}
