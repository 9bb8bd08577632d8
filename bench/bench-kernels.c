/* bench-kernels.c - how close the linear-layer kernels (mpk_cpu_matmul_forward/backward)
 * come to OpenBLAS's own sgemm rate at a model's GEMM shapes. The executor's GEMM-bound
 * phases are these calls, and their target is >= 80% of plain sgemm; the gap is the bias
 * (a row fill before the forward GEMM, a column sum after the backward ones).
 *
 * For each GEMM of one layer (qkv, attention out, fc1, fc2, output layer; the dense layers
 * of an MLP model) on one micro-batch of global_batch * seq_len tokens: the median of
 * REPEATS timed calls of the kernel and of the bare cblas_sgemm call(s) doing the same
 * products, alternated, after one warm-up each. Prints GFLOP/s and the ratio, then the
 * totals over all shapes. Not part of `make check`.
 *
 * Usage: bench/bench-kernels [MODEL [REPEATS [THREADS]]]   (default tiny-gpt 21 1;
 * MPPLAN_DATADIR for the zoo) */
#include "config.h"
#include "bench/bench-util.h"
#include "common/stats.h"
#include "kernels/cpu/kernels.h"
#include "model/model.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
  const char *name;
  int C, OC; /* in, out features */
} Gemm;




/* The GEMM shapes of one layer of M, at most MAX of them. */
static int
model_gemms (const MpModel *m, Gemm *out, int max)
{
  int n = 0;
  if (m->arch == MP_ARCH_MLP)
    {
      int in = (int) m->input;
      for (guint i = 0; i < m->n_mlp_layers && n < max; i++)
        {
          out[n++] = (Gemm) { "dense", in, (int) m->mlp_layers[i].out };
          in = (int) m->mlp_layers[i].out;
        }
      return n;
    }
  int C = (int) m->hidden, A = (int) (m->heads * m->head_dim);
  int F = (int) m->ffn_hidden * (m->activation == MP_ACT_SWIGLU ? 2 : 1);
  Gemm all[] = {
    { "qkv", C, (int) ((m->heads + 2 * m->kv_heads) * m->head_dim) },
    { "attn_out", A, C },
    { "fc1", C, F },
    { "fc2", (int) m->ffn_hidden, C },
    { "output", C, (int) m->vocab },
  };
  for (int i = 0; i < 5 && n < max; i++)
    out[n++] = all[i];
  return n;
}

static float *
random_buffer (size_t n, uint64_t stream)
{
  float *x = malloc (n * sizeof (float));
  if (x == NULL)
    {
      fprintf (stderr, "bench-kernels: out of memory (%zu floats)\n", n);
      exit (1);
    }
  mpk_cpu_fill_uniform (x, n, 1, stream, 0, -1, 1);
  return x;
}

/* Times forward (dir 0) or backward (dir 1) of one shape; returns the two medians. */
static void
time_gemm (const Gemm *g, int N, int bias, int dir, int reps, double *mpk_s, double *blas_s)
{
  float *inp = random_buffer ((size_t) N * g->C, 1), *w = random_buffer ((size_t) g->OC * g->C, 2);
  float *b = random_buffer (g->OC, 3), *out = random_buffer ((size_t) N * g->OC, 4);
  float *dinp = random_buffer ((size_t) N * g->C, 5), *dw = random_buffer ((size_t) g->OC * g->C, 6);
  float *db = random_buffer (g->OC, 7);
  double *tm = malloc ((reps + 1) * sizeof (double)), *tb = malloc ((reps + 1) * sizeof (double));
  for (int r = 0; r <= reps; r++) /* run 0 is the warm-up */
    {
      double t0 = bench_now_s ();
      if (dir == 0)
        mpk_cpu_matmul_forward (out, inp, w, bias ? b : NULL, N, g->C, g->OC);
      else
        mpk_cpu_matmul_backward (dinp, dw, bias ? db : NULL, out, inp, w, N, g->C, g->OC);
      double t1 = bench_now_s ();
      if (dir == 0)
        cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, N, g->OC, g->C, 1.0f, inp, g->C,
                     w, g->C, 0.0f, out, g->OC);
      else
        {
          cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, N, g->C, g->OC, 1.0f, out,
                       g->OC, w, g->C, 1.0f, dinp, g->C);
          cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, g->OC, g->C, N, 1.0f, out,
                       g->OC, inp, g->C, 1.0f, dw, g->C);
        }
      double t2 = bench_now_s ();
      tm[r] = t1 - t0, tb[r] = t2 - t1;
    }
  *mpk_s = mp_stat_median (tm + 1, (guint) reps, NULL);
  *blas_s = mp_stat_median (tb + 1, (guint) reps, NULL);
  free (inp), free (w), free (b), free (out), free (dinp), free (dw), free (db);
  free (tm), free (tb);
}

int
main (int argc, char **argv)
{
  const char *name = argc > 1 ? argv[1] : "tiny-gpt";
  int reps = argc > 2 ? atoi (argv[2]) : 21, threads = argc > 3 ? atoi (argv[3]) : 1;
  if (reps < 1)
    reps = 1;
  g_autoptr (GError) error = NULL;
  g_autoptr (MpModel) m = mp_model_load (name, &error);
  if (m == NULL)
    {
      fprintf (stderr, "bench-kernels: %s\n", error->message);
      return 2;
    }
  mpk_cpu_init_threads (threads);
  int N = (int) (m->global_batch * (m->seq_len ? m->seq_len : 1));
  Gemm gemms[16];
  int n = model_gemms (m, gemms, 16);
  printf ("# %s: %d tokens per micro-batch, bias %s, %d OpenBLAS thread(s), median of %d\n",
          m->name, N, m->bias ? "yes" : "no", threads, reps);
  printf ("%-9s %6s %6s %6s %4s %12s %12s %7s\n", "gemm", "N", "C", "OC", "dir",
          "mpk GFLOP/s", "sgemm GFLOP/s", "ratio");
  double total_flop[2] = { 0 }, total_mpk[2] = { 0 }, total_blas[2] = { 0 };
  for (int dir = 0; dir < 2; dir++)
    for (int i = 0; i < n; i++)
      {
        /* The output layer is tied to the embedding here, without a bias. */
        int bias = m->bias && g_strcmp0 (gemms[i].name, "output") != 0;
        double mpk_s, blas_s;
        time_gemm (&gemms[i], N, bias, dir, reps, &mpk_s, &blas_s);
        double flop = 2.0 * N * gemms[i].C * gemms[i].OC * (dir == 0 ? 1 : 2);
        printf ("%-9s %6d %6d %6d %4s %12.2f %12.2f %7.3f\n", gemms[i].name, N, gemms[i].C,
                gemms[i].OC, dir == 0 ? "fwd" : "bwd", flop / mpk_s * 1e-9,
                flop / blas_s * 1e-9, blas_s / mpk_s);
        total_flop[dir] += flop, total_mpk[dir] += mpk_s, total_blas[dir] += blas_s;
      }
  for (int dir = 0; dir < 2; dir++)
    printf ("%-9s %6s %6s %6s %4s %12.2f %12.2f %7.3f\n", "total", "", "", "",
            dir == 0 ? "fwd" : "bwd", total_flop[dir] / total_mpk[dir] * 1e-9,
            total_flop[dir] / total_blas[dir] * 1e-9, total_blas[dir] / total_mpk[dir]);
  return 0;
}
