/* test-kernels.c - the reference CPU kernels (kernels/cpu/): every backward against
 * central differences of its forward, matmul against a naive loop in double, sharded forms
 * (vocab shards, head subsets, sequence shards, ZeRO ranges, generator blocks) against the
 * whole, optimizer steps against hand-computed values. Shapes are small and deliberately
 * odd (T, C, HD not multiples of anything). Outputs are poisoned with NaN first, and
 * gradients start from a non-zero value, so unwritten elements and "=" instead of "+="
 * both show up. */
#include "tests/test-util.h"
#include "kernels/cpu/kernels.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SEED 20240601
#define GRAD_BASE 0.25f /* gradients start here: backward must add, not overwrite */

/* ---- buffers ------------------------------------------------------------------------- */

static uint64_t next_stream = 1; /* a fresh random stream for every buffer */

static float *
fpoison (size_t n)
{
  float *x = test_malloc ((n ? n : 1) * sizeof (float));
  for (size_t i = 0; i < n; i++)
    x[i] = NAN;
  return x;
}

static float *
fconst (size_t n, float c)
{
  float *x = fpoison (n);
  for (size_t i = 0; i < n; i++)
    x[i] = c;
  return x;
}

static float *
frand (size_t n, float lo, float hi)
{
  float *x = fpoison (n);
  mpk_cpu_fill_uniform (x, n, SEED, next_stream++, 0, lo, hi);
  return x;
}

static int *
tokens_rand (size_t n, int vocab)
{
  int *t = test_malloc (n * sizeof (int));
  mpk_cpu_fill_tokens (t, n, SEED, next_stream++, 0, vocab);
  return t;
}

static void
assert_finite (const float *x, size_t n, const char *what)
{
  for (size_t i = 0; i < n; i++)
    if (!isfinite (x[i]))
      fail_msg ("%s[%zu] = %g: not written (or overflowed)", what, i, x[i]);
}

/* |got - want| <= tol * max(1, |want|) elementwise. */
static void
assert_near (const float *got, const float *want, size_t n, double tol, const char *what)
{
  for (size_t i = 0; i < n; i++)
    if (!(fabs ((double) got[i] - want[i]) <= tol * fmax (1.0, fabs (want[i]))))
      fail_msg ("%s[%zu]: %.9g vs %.9g", what, i, got[i], want[i]);
}

/* ---- finite differences -------------------------------------------------------------- */

/* A forward under test, reduced to the scalar loss L = sum out * probe: the probe is the
 * gradient fed to backward, so dL/dx is what backward must produce for each input x. */
typedef struct {
  void (*forward) (void *ctx); /* recomputes *out from the current inputs */
  void *ctx;
  const float *out, *probe;    /* (n_out) */
  size_t n_out;
} Fd;

static double
fd_loss (const Fd *f)
{
  f->forward (f->ctx);
  double loss = 0;
  for (size_t i = 0; i < f->n_out; i++)
    loss += (double) f->out[i] * f->probe[i];
  return loss;
}

/* Checks grad (n) - base, the backward's contribution, against central differences of
 * the loss in every element of x (n), to tol relative to the largest gradient element.
 * An fp32 forward differenced with step 1e-2 lands within ~3e-5 of that scale on these
 * shapes, so tol 1e-3 leaves a wide margin and still catches a wrong term. */
static void
check_grad (const Fd *f, const char *name, float *x, size_t n, const float *grad, float base,
            double h, double tol)
{
  double scale = 1e-3;
  for (size_t i = 0; i < n; i++)
    scale = fmax (scale, fabs ((double) grad[i] - base));
  for (size_t i = 0; i < n; i++)
    {
      float x0 = x[i];
      x[i] = (float) (x0 + h);
      double up = x[i], loss_up = fd_loss (f);
      x[i] = (float) (x0 - h);
      double down = x[i], loss_down = fd_loss (f);
      x[i] = x0;
      double fd = (loss_up - loss_down) / (up - down);
      double an = (double) grad[i] - base;
      if (!(fabs (fd - an) <= tol * scale))
        fail_msg ("%s[%zu]: backward %.7g vs finite difference %.7g (largest %.3g)", name, i,
                  an, fd, scale);
    }
  f->forward (f->ctx); /* leave the outputs as they were at x */
}

/* ---- matmul -------------------------------------------------------------------------- */

/* The plain triple loop, in double: out (N, OC) = inp (N, C) . w (OC, C)^T + bias. */
static void
naive_matmul (double *out, const float *inp, const float *w, const float *bias, int N, int C,
              int OC)
{
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++)
      {
        double sum = bias != NULL ? bias[o] : 0.0;
        for (int c = 0; c < C; c++)
          sum += (double) inp[(size_t) n * C + c] * w[(size_t) o * C + c];
        out[(size_t) n * OC + o] = sum;
      }
}

static void
assert_near_d (const float *got, const double *want, size_t n, double tol, const char *what)
{
  for (size_t i = 0; i < n; i++)
    if (!(fabs ((double) got[i] - want[i]) <= tol * fmax (1.0, fabs (want[i]))))
      fail_msg ("%s[%zu]: %.9g vs %.9g", what, i, got[i], want[i]);
}

static void
matmul_case (int N, int C, int OC, bool with_bias)
{
  float *inp = frand ((size_t) N * C, -1, 1), *w = frand ((size_t) OC * C, -1, 1);
  float *bias = with_bias ? frand (OC, -1, 1) : NULL;
  float *out = fpoison ((size_t) N * OC);
  double *want = test_malloc ((size_t) N * OC * sizeof (double));
  mpk_cpu_matmul_forward (out, inp, w, bias, N, C, OC);
  naive_matmul (want, inp, w, bias, N, C, OC);
  assert_near_d (out, want, (size_t) N * OC, 1e-5, "matmul out");

  /* Backward: dinp = dout . W, dweight = dout^T . inp, dbias = column sums, each added
   * to what the buffers held. The naive forms reuse naive_matmul on transposed views. */
  float *dout = frand ((size_t) N * OC, -1, 1);
  float *dinp = fconst ((size_t) N * C, GRAD_BASE), *dw = fconst ((size_t) OC * C, GRAD_BASE);
  float *db = with_bias ? fconst (OC, GRAD_BASE) : NULL;
  mpk_cpu_matmul_backward (dinp, dw, db, dout, inp, w, N, C, OC);
  float *wt = fpoison ((size_t) C * OC), *doutt = fpoison ((size_t) OC * N);
  float *inpt = fpoison ((size_t) C * N);
  for (int o = 0; o < OC; o++)
    for (int c = 0; c < C; c++)
      wt[(size_t) c * OC + o] = w[(size_t) o * C + c];
  for (int n = 0; n < N; n++)
    {
      for (int o = 0; o < OC; o++)
        doutt[(size_t) o * N + n] = dout[(size_t) n * OC + o];
      for (int c = 0; c < C; c++)
        inpt[(size_t) c * N + n] = inp[(size_t) n * C + c];
    }
  double *want_dinp = test_malloc ((size_t) N * C * sizeof (double));
  double *want_dw = test_malloc ((size_t) OC * C * sizeof (double));
  naive_matmul (want_dinp, dout, wt, NULL, N, OC, C); /* dout (N, OC) . wt^T (OC, C) */
  naive_matmul (want_dw, doutt, inpt, NULL, OC, N, C); /* dout^T (OC, N) . inpt^T (N, C) */
  for (size_t i = 0; i < (size_t) N * C; i++)
    want_dinp[i] += GRAD_BASE;
  for (size_t i = 0; i < (size_t) OC * C; i++)
    want_dw[i] += GRAD_BASE;
  assert_near_d (dinp, want_dinp, (size_t) N * C, 1e-5, "matmul dinp");
  assert_near_d (dw, want_dw, (size_t) OC * C, 1e-5, "matmul dweight");
  for (int o = 0; with_bias && o < OC; o++)
    {
      double col = GRAD_BASE;
      for (int n = 0; n < N; n++)
        col += dout[(size_t) n * OC + o];
      mp_assert_close (db[o], col, 1e-5);
    }

  /* NULL gradients are skipped, not written. */
  mpk_cpu_matmul_backward (NULL, NULL, NULL, dout, inp, w, N, C, OC);
  test_free (wt), test_free (doutt), test_free (inpt), test_free (want_dinp);
  test_free (want_dw), test_free (dout), test_free (dinp), test_free (dw);
  test_free (inp), test_free (w), test_free (out), test_free (want);
  if (with_bias)
    test_free (bias), test_free (db);
}

static void
test_matmul_vs_naive (void **state)
{
  matmul_case (7, 13, 5, true);
  matmul_case (7, 13, 5, false);
  matmul_case (33, 65, 17, true);
  matmul_case (1, 1, 1, true);
  matmul_case (3, 130, 70, true); /* OC > one bias block */
}

/* Grouped matmul: each segment (one empty, one of a single row) through its own weight
 * and bias is the plain matmul of that segment, forward against the naive loop, backward
 * against mpk_cpu_matmul_backward on copies; the empty segment's gradients stay put. */
static void
test_grouped_matmul (void **state)
{
  int rows[] = { 5, 0, 9, 1 }, G = 4, C = 13, OC = 7, R = 15;
  size_t nw = (size_t) OC * C;
  float *inp = frand ((size_t) R * C, -1, 1), *w = frand (G * nw, -1, 1);
  float *bias = frand ((size_t) G * OC, -1, 1), *out = fpoison ((size_t) R * OC);
  float *dout = frand ((size_t) R * OC, -1, 1);
  float *dinp = fconst ((size_t) R * C, GRAD_BASE), *dw = fconst (G * nw, GRAD_BASE);
  float *db = fconst ((size_t) G * OC, GRAD_BASE);
  float *ref_dinp = fconst ((size_t) R * C, GRAD_BASE), *ref_dw = fconst (G * nw, GRAD_BASE);
  float *ref_db = fconst ((size_t) G * OC, GRAD_BASE);
  double *want = test_malloc ((size_t) R * OC * sizeof (double));
  mpk_cpu_grouped_matmul_forward (out, inp, w, bias, rows, G, C, OC);
  mpk_cpu_grouped_matmul_backward (dinp, dw, db, dout, inp, w, rows, G, C, OC);
  for (int g = 0, off = 0; g < G; off += rows[g], g++)
    {
      naive_matmul (want + (size_t) off * OC, inp + (size_t) off * C, w + g * nw,
                    bias + (size_t) g * OC, rows[g], C, OC);
      mpk_cpu_matmul_backward (ref_dinp + (size_t) off * C, ref_dw + g * nw,
                               ref_db + (size_t) g * OC, dout + (size_t) off * OC,
                               inp + (size_t) off * C, w + g * nw, rows[g], C, OC);
    }
  assert_near_d (out, want, (size_t) R * OC, 1e-5, "grouped out");
  assert_memory_equal (dinp, ref_dinp, (size_t) R * C * sizeof (float));
  assert_memory_equal (dw, ref_dw, G * nw * sizeof (float));
  assert_memory_equal (db, ref_db, (size_t) G * OC * sizeof (float));
  for (size_t i = 0; i < nw; i++)
    assert_true (dw[nw + i] == GRAD_BASE);   /* expert 1 had no rows */
  /* NULL gradients are skipped */
  mpk_cpu_grouped_matmul_backward (NULL, NULL, NULL, dout, inp, w, rows, G, C, OC);
  test_free (inp), test_free (w), test_free (bias), test_free (out), test_free (dout);
  test_free (dinp), test_free (dw), test_free (db), test_free (ref_dinp), test_free (ref_dw);
  test_free (ref_db), test_free (want);
}

/* ---- FP8 ------------------------------------------------------------------------------ */

/* Known values of both formats (OCP FP8 spec v1.0 table 1): the largest finite values,
 * saturation of larger ones and of infinities, ties to even among normals and
 * subnormals, the smallest subnormal and normal, NaN and signed zero. */
static void
test_fp8_rounding (void **state)
{
  static const struct {
    MpkFp8Format f;
    float x, want;
  } cases[] = {
    { MPK_FP8_E4M3, 448, 448 },          { MPK_FP8_E4M3, 449, 448 },
    { MPK_FP8_E4M3, 464, 448 },          { MPK_FP8_E4M3, 1e6f, 448 },
    { MPK_FP8_E4M3, -INFINITY, -448 },   { MPK_FP8_E4M3, 240, 240 },
    { MPK_FP8_E4M3, 1.0625f, 1 },        /* halfway 1 and 1.125: to the even 1 */
    { MPK_FP8_E4M3, 1.1875f, 1.25f },    /* halfway 1.125 and 1.25: to the even 1.25 */
    { MPK_FP8_E4M3, 1.07f, 1.125f },     { MPK_FP8_E4M3, -3.3f, -3.25f },
    { MPK_FP8_E4M3, 0.015625f, 0.015625f }, /* 2^-6, the smallest normal */
    { MPK_FP8_E4M3, 0.001953125f, 0.001953125f }, /* 2^-9, the smallest subnormal */
    { MPK_FP8_E4M3, 0.0009765625f, 0 },  /* 2^-10, halfway 0 and 2^-9: to 0 */
    { MPK_FP8_E4M3, 0.0029296875f, 0.00390625f }, /* 1.5 * 2^-9: to the even 2^-8 */
    { MPK_FP8_E4M3, 0.0012f, 0.001953125f },
    { MPK_FP8_E5M2, 57344, 57344 },      { MPK_FP8_E5M2, 60000, 57344 },
    { MPK_FP8_E5M2, INFINITY, 57344 },   { MPK_FP8_E5M2, 1.125f, 1 },
    { MPK_FP8_E5M2, 1.375f, 1.5f },      { MPK_FP8_E5M2, -3, -3 },
    { MPK_FP8_E5M2, 6.2e-5f, 6.103515625e-5f }, /* to 2^-14, the smallest normal */
    { MPK_FP8_E5M2, 1.52587890625e-5f, 1.52587890625e-5f }, /* 2^-16 */
    { MPK_FP8_E5M2, 7.62939453125e-6f, 0 },     /* 2^-17: the tie goes to 0 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      float got = mpk_fp8_round (cases[i].x, cases[i].f);
      if (got != cases[i].want)
        fail_msg ("%s (%.9g) = %.9g, want %.9g", cases[i].f == MPK_FP8_E4M3 ? "e4m3" : "e5m2",
                  (double) cases[i].x, (double) got, (double) cases[i].want);
    }
  assert_true (isnan (mpk_fp8_round (NAN, MPK_FP8_E4M3)));
  assert_true (isnan (mpk_fp8_round (NAN, MPK_FP8_E5M2)));
  assert_true (signbit (mpk_fp8_round (-0.0f, MPK_FP8_E4M3)));
  assert_true (signbit (mpk_fp8_round (-1e-9f, MPK_FP8_E5M2)));
  /* current scaling maps the amax onto the format's largest value */
  mp_assert_close (mpk_fp8_scale (2, MPK_FP8_E4M3), 224, 1e-7);
  assert_true (mpk_fp8_scale (0, MPK_FP8_E5M2) == 1);
  float x[] = { 0.5f, -7, 3.1f, 0 }, q[4];
  float sc = mpk_cpu_fp8_quantize (q, x, 4, MPK_FP8_E4M3);
  mp_assert_close (sc, 64, 1e-7);
  mp_assert_close (q[1], -7, 1e-6);          /* the amax survives */
  mp_assert_close (q[2], 3.0, 1e-6);         /* 198.4 -> 192 (spacing 16 there), / 64 */
  mp_assert_close (q[0], 0.5, 1e-6);
  assert_true (q[3] == 0);
}

/* Frobenius norm of a - b over that of b. */
static double
rel_frobenius (const float *a, const float *b, size_t n)
{
  double d = 0, s = 0;
  for (size_t i = 0; i < n; i++)
    d += ((double) a[i] - b[i]) * ((double) a[i] - b[i]), s += (double) b[i] * b[i];
  return sqrt (d / s);
}

/* The fp8 matmul against fp32: E4M3 keeps 3 mantissa bits (rounding error uniform within
 * half a spacing, 2^-4 relative at most, RMS 2^-4/sqrt(3) = 3.6% per operand), E5M2 2 bits
 * (7.2% RMS). A product of random-sign terms carries about the RMS sum of its operands'
 * errors: forward ~5%, backward ~8%; the bounds are twice that. It must also differ from
 * fp32 (the casts happened), and dbias is fp32's. */
static void
test_matmul_fp8 (void **state)
{
  int N = 24, C = 40, OC = 16;
  size_t nx = (size_t) N * C, nw = (size_t) OC * C, ny = (size_t) N * OC;
  float *inp = frand (nx, -1, 1), *w = frand (nw, -1, 1), *bias = frand (OC, -1, 1);
  float *dout = frand (ny, -1, 1), *scratch = fpoison (mpk_cpu_matmul_fp8_scratch (N, C, OC));
  float *out = fpoison (ny), *out32 = fpoison (ny);
  float *dinp = fconst (nx, 0), *dw = fconst (nw, 0), *db = fconst (OC, 0);
  float *dinp32 = fconst (nx, 0), *dw32 = fconst (nw, 0), *db32 = fconst (OC, 0);
  mpk_cpu_matmul_fp8_forward (out, scratch, inp, w, NULL, N, C, OC);
  mpk_cpu_matmul_forward (out32, inp, w, NULL, N, C, OC);
  double e = rel_frobenius (out, out32, ny);
  print_message ("fp8 forward rel. error %.3g\n", e);
  assert_true (e > 1e-3 && e < 0.1);
  mpk_cpu_matmul_fp8_forward (out, scratch, inp, w, bias, N, C, OC);
  assert_finite (out, ny, "fp8 out");
  mpk_cpu_matmul_fp8_backward (dinp, dw, db, scratch, dout, inp, w, N, C, OC);
  mpk_cpu_matmul_backward (dinp32, dw32, db32, dout, inp, w, N, C, OC);
  double ei = rel_frobenius (dinp, dinp32, nx), ew = rel_frobenius (dw, dw32, nw);
  print_message ("fp8 backward rel. error dinp %.3g dweight %.3g\n", ei, ew);
  assert_true (ei > 1e-3 && ei < 0.16);
  assert_true (ew > 1e-3 && ew < 0.16);
  assert_memory_equal (db, db32, OC * sizeof (float));
  test_free (inp), test_free (w), test_free (bias), test_free (dout), test_free (scratch);
  test_free (out), test_free (out32), test_free (dinp), test_free (dw), test_free (db);
  test_free (dinp32), test_free (dw32), test_free (db32);
}

/* ---- embedding ----------------------------------------------------------------------- */

typedef struct {
  float *out, *wte, *wpe;
  const int *tokens;
  int N, T, C, v0, Vl;
} EmbCtx;

static void
emb_forward (void *p)
{
  EmbCtx *e = p;
  mpk_cpu_embedding_forward (e->out, e->tokens, e->wte, e->wpe, e->N, e->T, e->C, e->v0,
                             e->Vl);
}

static void
test_embedding_gradients (void **state)
{
  const int B = 2, T = 3, C = 5, V = 11, N = B * T;
  int *tokens = tokens_rand (N, V);
  EmbCtx e = { fpoison ((size_t) N * C), frand ((size_t) V * C, -1, 1),
               frand ((size_t) T * C, -1, 1), tokens, N, T, C, 0, V };
  emb_forward (&e);
  assert_finite (e.out, (size_t) N * C, "embedding out");
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      assert_true (e.out[n * C + c] == e.wte[tokens[n] * C + c] + e.wpe[(n % T) * C + c]);

  float *probe = frand ((size_t) N * C, -1, 1);
  float *dwte = fconst ((size_t) V * C, GRAD_BASE), *dwpe = fconst ((size_t) T * C, GRAD_BASE);
  mpk_cpu_embedding_backward (dwte, dwpe, probe, tokens, N, T, C, 0, V);
  Fd f = { emb_forward, &e, e.out, probe, (size_t) N * C };
  check_grad (&f, "dwte", e.wte, (size_t) V * C, dwte, GRAD_BASE, 1e-2, 1e-3);
  check_grad (&f, "dwpe", e.wpe, (size_t) T * C, dwpe, GRAD_BASE, 1e-2, 1e-3);
  test_free (tokens), test_free (e.out), test_free (e.wte), test_free (e.wpe);
  test_free (probe), test_free (dwte), test_free (dwpe);
}

/* Vocab shards [0,4) [4,9) [9,11): the shard outputs sum (the all-reduce) to the whole
 * lookup, and each shard's gradient is its slice of the whole gradient. */
static void
test_embedding_vocab_shards (void **state)
{
  const int B = 3, T = 4, C = 3, V = 11, N = B * T;
  const int bounds[] = { 0, 4, 9, 11 };
  int *tokens = tokens_rand (N, V);
  float *wte = frand ((size_t) V * C, -1, 1), *wpe = frand ((size_t) T * C, -1, 1);
  float *full = fpoison ((size_t) N * C), *sum = fconst ((size_t) N * C, 0);
  float *shard = fpoison ((size_t) N * C), *dout = frand ((size_t) N * C, -1, 1);
  float *dfull = fconst ((size_t) V * C, 0), *dshard = fconst ((size_t) V * C, 0);
  mpk_cpu_embedding_forward (full, tokens, wte, wpe, N, T, C, 0, V);
  mpk_cpu_embedding_backward (dfull, NULL, dout, tokens, N, T, C, 0, V);
  for (int s = 0; s < 3; s++)
    {
      int v0 = bounds[s], Vl = bounds[s + 1] - v0;
      const float *wpe_s = s == 0 ? wpe : NULL; /* positions added by one shard only */
      for (size_t i = 0; i < (size_t) N * C; i++)
        shard[i] = NAN;
      mpk_cpu_embedding_forward (shard, tokens, wte + (size_t) v0 * C, wpe_s, N, T, C, v0, Vl);
      assert_finite (shard, (size_t) N * C, "embedding shard out");
      mpk_cpu_residual_forward (sum, sum, shard, (size_t) N * C);
      mpk_cpu_embedding_backward (dshard + (size_t) v0 * C, NULL, dout, tokens, N, T, C, v0,
                                  Vl);
    }
  assert_near (sum, full, (size_t) N * C, 0, "sum of shards");
  assert_near (dshard, dfull, (size_t) V * C, 0, "shard dwte");
  test_free (tokens), test_free (wte), test_free (wpe), test_free (full), test_free (sum);
  test_free (shard), test_free (dout), test_free (dfull), test_free (dshard);
}

/* ---- norms --------------------------------------------------------------------------- */

typedef struct {
  float *out, *mean, *rstd, *inp, *weight, *bias;
  int N, C;
  bool rms;
} NormCtx;

static void
norm_forward (void *p)
{
  NormCtx *k = p;
  if (k->rms)
    mpk_cpu_rmsnorm_forward (k->out, k->rstd, k->inp, k->weight, k->N, k->C, 1e-5f);
  else
    mpk_cpu_layernorm_forward (k->out, k->mean, k->rstd, k->inp, k->weight, k->bias, k->N,
                               k->C, 1e-5f);
}

static void
norm_case (bool rms, int N, int C)
{
  size_t nc = (size_t) N * C;
  NormCtx k = { fpoison (nc), fpoison (N), fpoison (N), frand (nc, -2, 3),
                frand (C, 0.5f, 1.5f), frand (C, -0.5f, 0.5f), N, C, rms };
  norm_forward (&k);
  assert_finite (k.out, nc, "norm out");
  assert_finite (k.rstd, N, "norm rstd");
  if (!rms)
    assert_finite (k.mean, N, "norm mean");
  float *probe = frand (nc, -1, 1);
  float *dinp = fconst (nc, GRAD_BASE), *dw = fconst (C, GRAD_BASE);
  float *db = fconst (C, GRAD_BASE);
  if (rms)
    mpk_cpu_rmsnorm_backward (dinp, dw, probe, k.inp, k.weight, k.rstd, N, C);
  else
    mpk_cpu_layernorm_backward (dinp, dw, db, probe, k.inp, k.weight, k.mean, k.rstd, N, C);
  Fd f = { norm_forward, &k, k.out, probe, nc };
  check_grad (&f, rms ? "rmsnorm dinp" : "layernorm dinp", k.inp, nc, dinp, GRAD_BASE, 1e-2,
              1e-3);
  check_grad (&f, rms ? "rmsnorm dweight" : "layernorm dweight", k.weight, C, dw, GRAD_BASE,
              1e-2, 1e-3);
  if (!rms)
    check_grad (&f, "layernorm dbias", k.bias, C, db, GRAD_BASE, 1e-2, 1e-3);
  test_free (k.out), test_free (k.mean), test_free (k.rstd), test_free (k.inp);
  test_free (k.weight), test_free (k.bias), test_free (probe), test_free (dinp);
  test_free (dw), test_free (db);
}

static void
test_layernorm_gradients (void **state)
{
  norm_case (false, 5, 7);
  norm_case (false, 2, 1); /* a single feature: output is the bias, gradient 0 */
  norm_case (false, 3, 33);
}

static void
test_rmsnorm_gradients (void **state)
{
  norm_case (true, 5, 7);
  norm_case (true, 3, 33);
}

/* LayerNorm of a row is invariant to adding a constant, and a NULL bias means zero. */
static void
test_layernorm_values (void **state)
{
  const int N = 2, C = 5;
  float inp[] = { 1, 2, 3, 4, 5, 1001, 1002, 1003, 1004, 1005 };
  float weight[] = { 1, 1, 1, 1, 1 }, out[10], mean[2], rstd[2];
  mpk_cpu_layernorm_forward (out, mean, rstd, inp, weight, NULL, N, C, 0.0f);
  mp_assert_close (mean[0], 3.0, 1e-7);
  mp_assert_close (rstd[0], 1.0 / sqrt (2.0), 1e-6);
  for (int c = 0; c < C; c++)
    {
      mp_assert_close (out[c], (c - 2) / sqrt (2.0), 1e-6);
      mp_assert_close (out[C + c], out[c], 1e-4); /* two-pass variance keeps this */
    }
}

/* ---- rotary -------------------------------------------------------------------------- */

typedef struct {
  float *out;
  const float *inp;
  size_t n;
  int B, T, NHR, HD, ld, pos0;
} RotCtx;

static void
rot_forward (void *p)
{
  RotCtx *r = p;
  memcpy (r->out, r->inp, r->n * sizeof (float));
  mpk_cpu_rotary_forward (r->out, r->B, r->T, r->NHR, r->HD, r->ld, r->pos0, 10000.0f);
}

static void
test_rotary (void **state)
{
  const int B = 2, T = 5, NHR = 3, HD = 6, ld = NHR * HD + 4, pos0 = 3;
  size_t n = (size_t) B * T * ld;
  float *x = frand (n, -1, 1);
  RotCtx r = { fpoison (n), x, n, B, T, NHR, HD, ld, pos0 };
  rot_forward (&r);
  for (size_t row = 0; row < (size_t) B * T; row++)
    for (int i = NHR * HD; i < ld; i++) /* past the heads: untouched */
      assert_true (r.out[row * ld + i] == x[row * ld + i]);

  /* Backward (in place, writes) = the transpose; with a probe it is checked by
   * differences, and applied to the forward's output it gives the input back. */
  float *probe = frand (n, -1, 1), *grad = fpoison (n);
  memcpy (grad, probe, n * sizeof (float));
  mpk_cpu_rotary_backward (grad, B, T, NHR, HD, ld, pos0, 10000.0f);
  for (size_t row = 0; row < (size_t) B * T; row++)
    for (int i = NHR * HD; i < ld; i++)
      {
        assert_true (grad[row * ld + i] == probe[row * ld + i]);
        probe[row * ld + i] = 0; /* so the differences ignore the padding */
        grad[row * ld + i] = 0;
      }
  Fd f = { rot_forward, &r, r.out, probe, n };
  check_grad (&f, "rotary dx", x, n, grad, 0, 1e-2, 1e-4);
  float *back = fpoison (n);
  memcpy (back, r.out, n * sizeof (float));
  mpk_cpu_rotary_backward (back, B, T, NHR, HD, ld, pos0, 10000.0f);
  assert_near (back, x, n, 1e-6, "rotary round trip");

  /* Sequence shard: positions [2, 5) of the same rows, rotated with pos0 + 2. */
  const int t0 = 2, Ts = T - t0;
  float *part = fpoison ((size_t) B * Ts * ld);
  for (int b = 0; b < B; b++)
    memcpy (part + (size_t) b * Ts * ld, x + ((size_t) b * T + t0) * ld,
            (size_t) Ts * ld * sizeof (float));
  mpk_cpu_rotary_forward (part, B, Ts, NHR, HD, ld, pos0 + t0, 10000.0f);
  for (int b = 0; b < B; b++)
    assert_near (part + (size_t) b * Ts * ld, r.out + ((size_t) b * T + t0) * ld,
                 (size_t) Ts * ld, 0, "rotary sequence shard");
  test_free (x), test_free (r.out), test_free (probe), test_free (grad), test_free (back);
  test_free (part);
}

/* Position 0 is the identity; position p turns pair 0 by p radians. */
static void
test_rotary_values (void **state)
{
  float x[4] = { 1, 0, 0, 0 }; /* one head of 4: pairs (0, 2) and (1, 3) */
  mpk_cpu_rotary_forward (x, 1, 1, 1, 4, 4, 0, 10000.0f);
  assert_true (x[0] == 1 && x[2] == 0);
  mpk_cpu_rotary_forward (x, 1, 1, 1, 4, 4, 1, 10000.0f);
  mp_assert_close (x[0], cos (1.0), 1e-6);
  mp_assert_close (x[2], sin (1.0), 1e-6);
}

/* ---- attention ----------------------------------------------------------------------- */

typedef struct {
  float *out, *lse, *probs; /* probs NULL: the recompute path */
  float *qkv;               /* packed (B, T, NH + 2 NKV, HD) */
  MpkAttnShape s;
} AttnCtx;

static const float *
attn_q (const AttnCtx *a)
{
  return a->qkv;
}

static const float *
attn_k (const AttnCtx *a)
{
  return a->qkv + (size_t) a->s.NH * a->s.HD;
}

static const float *
attn_v (const AttnCtx *a)
{
  return a->qkv + (size_t) (a->s.NH + a->s.NKV) * a->s.HD;
}

static void
attn_forward (void *p)
{
  AttnCtx *a = p;
  mpk_cpu_attention_forward (a->out, a->lse, a->probs, attn_q (a), attn_k (a), attn_v (a),
                             a->s);
}

static MpkAttnShape
attn_shape (int B, int T, int NH, int NKV, int HD)
{
  int ld = (NH + 2 * NKV) * HD;
  return (MpkAttnShape) { B, T, NH, NKV, HD, ld, ld, NH * HD };
}

/* Gradients of q, k and v at once (they share the packed buffer), by differences; returns
 * dqkv so the stored and recompute paths can be compared. */
static float *
attention_gradcheck (int B, int T, int NH, int NKV, int HD, bool store)
{
  MpkAttnShape s = attn_shape (B, T, NH, NKV, HD);
  size_t nqkv = (size_t) B * T * s.ldq, nout = (size_t) B * T * s.ldo;
  size_t nlse = (size_t) B * NH * T, nprobs = nlse * T;
  AttnCtx a = { fpoison (nout), fpoison (nlse), store ? fpoison (nprobs) : NULL,
                frand (nqkv, -2, 2), s };
  attn_forward (&a);
  assert_finite (a.out, nout, "attention out");
  assert_finite (a.lse, nlse, "attention lse");
  if (store)
    {
      assert_finite (a.probs, nprobs, "attention probs");
      for (size_t r = 0; r < nlse; r++) /* causal: zero above the diagonal, rows sum to 1 */
        {
          int t = (int) (r % T);
          double sum = 0;
          for (int j = 0; j < T; j++)
            {
              sum += a.probs[r * T + j];
              if (j > t)
                assert_true (a.probs[r * T + j] == 0.0f);
            }
          mp_assert_close (sum, 1.0, 1e-6);
        }
    }
  float *probe = frand (nout, -1, 1), *dqkv = fconst (nqkv, GRAD_BASE);
  float *dq = dqkv, *dk = dqkv + (attn_k (&a) - a.qkv), *dv = dqkv + (attn_v (&a) - a.qkv);
  mpk_cpu_attention_backward (dq, dk, dv, probe, a.out, a.lse, a.probs, attn_q (&a),
                              attn_k (&a), attn_v (&a), s);
  Fd f = { attn_forward, &a, a.out, probe, nout };
  check_grad (&f, store ? "attention dqkv (stored)" : "attention dqkv (recompute)", a.qkv,
              nqkv, dqkv, GRAD_BASE, 1e-2, 1e-3);
  test_free (a.out), test_free (a.lse), test_free (a.qkv), test_free (probe);
  if (store)
    test_free (a.probs);
  return dqkv;
}

static void
attention_case (int B, int T, int NH, int NKV, int HD)
{
  uint64_t stream = next_stream;
  float *stored = attention_gradcheck (B, T, NH, NKV, HD, true);
  next_stream = stream; /* same inputs for the recompute path */
  float *recomputed = attention_gradcheck (B, T, NH, NKV, HD, false);
  size_t n = (size_t) B * T * (NH + 2 * NKV) * HD;
  assert_near (recomputed, stored, n, 1e-5, "recompute vs stored dqkv");
  test_free (stored), test_free (recomputed);
}

static void
test_attention_gradients (void **state)
{
  attention_case (2, 5, 4, 2, 3);  /* grouped-query: 2 query heads per kv head */
  attention_case (1, 7, 3, 1, 5);  /* multi-query */
  attention_case (1, 4, 2, 2, 4);  /* plain multi-head */
  attention_case (2, 1, 2, 1, 3);  /* one position */
}

/* The first position attends only to itself: its output is its own value row. */
static void
test_attention_causal_first (void **state)
{
  MpkAttnShape s = attn_shape (1, 3, 2, 1, 3);
  float *qkv = frand ((size_t) 3 * s.ldq, -1, 1), *out = fpoison ((size_t) 3 * s.ldo);
  float *lse = fpoison (6);
  const float *v = qkv + (size_t) (s.NH + s.NKV) * s.HD;
  mpk_cpu_attention_forward (out, lse, NULL, qkv, qkv + s.NH * s.HD, v, s);
  for (int h = 0; h < s.NH; h++)
    for (int d = 0; d < s.HD; d++)
      mp_assert_close (out[h * s.HD + d], v[d], 1e-6);
  test_free (qkv), test_free (out), test_free (lse);
}

/* Tensor parallel: query heads [2, 4) with their kv head 1, run as a 2-head problem on
 * pointers into the full packed buffer, give exactly the full run's slices. */
static void
test_attention_head_subset (void **state)
{
  const int B = 2, T = 6, NH = 4, NKV = 2, HD = 5, h0 = 2, group = NH / NKV;
  MpkAttnShape full = attn_shape (B, T, NH, NKV, HD);
  size_t nqkv = (size_t) B * T * full.ldq, nout = (size_t) B * T * full.ldo;
  float *qkv = frand (nqkv, -2, 2), *dout = frand (nout, -1, 1);
  float *out = fpoison (nout), *lse = fpoison ((size_t) B * NH * T);
  float *dqkv = fconst (nqkv, 0);
  const float *k = qkv + NH * HD, *v = k + NKV * HD;
  mpk_cpu_attention_forward (out, lse, NULL, qkv, k, v, full);
  mpk_cpu_attention_backward (dqkv, dqkv + NH * HD, dqkv + (NH + NKV) * HD, dout, out, lse,
                              NULL, qkv, k, v, full);

  MpkAttnShape sub = full;
  sub.NH = NH - h0, sub.NKV = NKV - h0 / group;
  size_t qo = (size_t) h0 * HD, kvo = (size_t) (h0 / group) * HD;
  float *sout = fpoison (nout), *slse = fpoison ((size_t) B * sub.NH * T);
  float *sdqkv = fconst (nqkv, 0);
  mpk_cpu_attention_forward (sout + qo, slse, NULL, qkv + qo, k + kvo, v + kvo, sub);
  mpk_cpu_attention_backward (sdqkv + qo, sdqkv + NH * HD + kvo,
                              sdqkv + (NH + NKV) * HD + kvo, dout + qo, out + qo, slse, NULL,
                              qkv + qo, k + kvo, v + kvo, sub);
  for (int bt = 0; bt < B * T; bt++)
    {
      size_t row = (size_t) bt * full.ldo;
      assert_near (sout + row + qo, out + row + qo, (size_t) sub.NH * HD, 0, "subset out");
      size_t qrow = (size_t) bt * full.ldq;
      assert_near (sdqkv + qrow + qo, dqkv + qrow + qo, (size_t) sub.NH * HD, 0, "subset dq");
      for (int part = 0; part < 2; part++) /* dk, then dv of kv head 1 */
        {
          size_t at = qrow + (size_t) (NH + part * NKV) * HD + kvo;
          assert_near (sdqkv + at, dqkv + at, (size_t) sub.NKV * HD, 0, "subset dk/dv");
        }
    }
  for (int b = 0; b < B; b++)
    assert_near (slse + (size_t) b * sub.NH * T, lse + ((size_t) b * NH + h0) * T,
                 (size_t) sub.NH * T, 0, "subset lse");
  test_free (qkv), test_free (dout), test_free (out), test_free (lse), test_free (dqkv);
  test_free (sout), test_free (slse), test_free (sdqkv);
}

/* Context parallelism: a sequence of T split over CP ranks (chunks i and 2 CP - 1 - i),
 * each rank's queries meeting every rank's key block in ring order, gives the full
 * attention's output, lse and q, k, v gradients at the rows each rank holds. */
static void
ring_case (int B, int T, int NH, int NKV, int HD, int cp)
{
  MpkAttnShape full = attn_shape (B, T, NH, NKV, HD);
  int Tl = T / cp, ld = full.ldq;
  size_t nqkv = (size_t) B * T * ld, nout = (size_t) B * T * full.ldo;
  float *qkv = frand (nqkv, -2, 2), *dout = frand (nout, -1, 1);
  float *out = fpoison (nout), *lse = fpoison ((size_t) B * NH * T);
  float *dqkv = fconst (nqkv, GRAD_BASE);
  mpk_cpu_attention_forward (out, lse, NULL, qkv, qkv + NH * HD, qkv + (NH + NKV) * HD, full);
  mpk_cpu_attention_backward (dqkv, dqkv + NH * HD, dqkv + (NH + NKV) * HD, dout, out, lse,
                              NULL, qkv, qkv + NH * HD, qkv + (NH + NKV) * HD, full);
  MpkAttnShape s = full;
  s.T = Tl;
  size_t nl = (size_t) B * Tl * ld, nlo = (size_t) B * Tl * s.ldo, nll = (size_t) B * NH * Tl;
  int *pos = test_malloc ((size_t) cp * Tl * sizeof (int));
  float *lq = fpoison (cp * nl), *lg = fpoison (cp * nlo), *lo = fpoison (cp * nlo);
  float *llse = fpoison (cp * nll), *m = fpoison (cp * nll), *l = fpoison (cp * nll);
  float *ld_ = fconst (cp * nl, GRAD_BASE);
  for (int r = 0; r < cp; r++) /* each rank's rows of q, k, v and of the output gradient */
    {
      mpk_cpu_cp_positions (pos + r * Tl, T, cp, r);
      for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
          {
            size_t src = (size_t) b * T + pos[r * Tl + t], dst = (size_t) b * Tl + t;
            memcpy (lq + r * nl + dst * ld, qkv + src * ld, ld * sizeof (float));
            memcpy (lg + r * nlo + dst * s.ldo, dout + src * full.ldo, s.ldo * sizeof (float));
          }
    }
  for (int r = 0; r < cp; r++)
    {
      float *q = lq + r * nl;
      mpk_cpu_ring_attention_begin (lo + r * nlo, m + r * nll, l + r * nll, s);
      for (int step = 0; step < cp; step++) /* the block of rank r - step, as the ring brings it */
        {
          int j = (r - step + cp) % cp;
          float *kj = lq + j * nl + NH * HD;
          mpk_cpu_ring_attention_block (lo + r * nlo, m + r * nll, l + r * nll, q, kj,
                                        kj + NKV * HD, s, Tl, pos + r * Tl, pos + j * Tl);
        }
      mpk_cpu_ring_attention_end (lo + r * nlo, llse + r * nll, m + r * nll, l + r * nll, s);
    }
  for (int r = 0; r < cp; r++)
    for (int step = 0; step < cp; step++)
      {
        int j = (r - step + cp) % cp;
        float *kj = lq + j * nl + NH * HD, *dkj = ld_ + j * nl + NH * HD;
        mpk_cpu_ring_attention_backward_block (ld_ + r * nl, dkj, dkj + NKV * HD, lg + r * nlo,
                                               lo + r * nlo, llse + r * nll, lq + r * nl, kj,
                                               kj + NKV * HD, s, Tl, pos + r * Tl,
                                               pos + j * Tl);
      }
  for (int r = 0; r < cp; r++)
    for (int b = 0; b < B; b++)
      for (int t = 0; t < Tl; t++)
        {
          size_t src = (size_t) b * T + pos[r * Tl + t], dst = (size_t) b * Tl + t;
          assert_near (lo + r * nlo + dst * s.ldo, out + src * full.ldo, (size_t) NH * HD, 1e-5,
                       "ring out");
          assert_near (ld_ + r * nl + dst * ld, dqkv + src * ld, (size_t) ld, 1e-5,
                       "ring dq, dk, dv");
          for (int h = 0; h < NH; h++)
            assert_near (llse + r * nll + ((size_t) b * NH + h) * Tl + t,
                         lse + ((size_t) b * NH + h) * T + pos[r * Tl + t], 1, 1e-5, "ring lse");
        }
  test_free (qkv), test_free (dout), test_free (out), test_free (lse), test_free (dqkv);
  test_free (pos), test_free (lq), test_free (lg), test_free (lo), test_free (llse);
  test_free (m), test_free (l), test_free (ld_);
}

static void
test_ring_attention (void **state)
{
  ring_case (2, 8, 4, 2, 5, 2);  /* grouped-query, cp 2: chunks {0, 3} and {1, 2} */
  ring_case (1, 12, 3, 1, 4, 3); /* multi-query, cp 3: a block wholly in some rows' future */
  ring_case (1, 4, 2, 2, 3, 1);  /* cp 1: one block, the whole sequence */
}

/* Load balancing: every position once, and every rank the same causal work (the sum of
 * its positions plus one, the keys its queries see). */
static void
test_cp_positions (void **state)
{
  const int T = 24;
  for (int cp = 1; cp <= 4; cp++)
    {
      if (T % (2 * cp))
        continue;
      int seen[24] = { 0 }, pos[24];
      long work0 = -1;
      for (int r = 0; r < cp; r++)
        {
          mpk_cpu_cp_positions (pos, T, cp, r);
          long work = 0;
          for (int t = 0; t < T / cp; t++)
            seen[pos[t]]++, work += pos[t] + 1;
          if (work0 < 0)
            work0 = work;
          assert_int_equal (work, work0);
        }
      for (int p = 0; p < T; p++)
        assert_int_equal (seen[p], 1);
    }
}

/* ---- activations --------------------------------------------------------------------- */

typedef enum { ACT_GELU, ACT_RELU, ACT_SWIGLU } ActKind;

typedef struct {
  float *out, *inp;
  int N, F; /* elementwise: N*F elements; SwiGLU: inp (N, 2F) -> out (N, F) */
  ActKind kind;
} ActCtx;

static void
act_forward (void *p)
{
  ActCtx *a = p;
  size_t n = (size_t) a->N * a->F;
  if (a->kind == ACT_GELU)
    mpk_cpu_gelu_forward (a->out, a->inp, n);
  else if (a->kind == ACT_RELU)
    mpk_cpu_relu_forward (a->out, a->inp, n);
  else
    mpk_cpu_swiglu_forward (a->out, a->inp, a->N, a->F);
}

static void
act_case (ActKind kind, int N, int F)
{
  size_t nout = (size_t) N * F, nin = kind == ACT_SWIGLU ? 2 * nout : nout;
  ActCtx a = { fpoison (nout), frand (nin, -3, 3), N, F, kind };
  if (kind == ACT_RELU) /* keep clear of the kink at 0, where differences are wrong */
    for (size_t i = 0; i < nin; i++)
      a.inp[i] += a.inp[i] < 0 ? -0.1f : 0.1f;
  act_forward (&a);
  assert_finite (a.out, nout, "activation out");
  float *probe = frand (nout, -1, 1), *dinp = fconst (nin, GRAD_BASE);
  if (kind == ACT_GELU)
    mpk_cpu_gelu_backward (dinp, a.inp, probe, nout);
  else if (kind == ACT_RELU)
    mpk_cpu_relu_backward (dinp, a.inp, probe, nout);
  else
    mpk_cpu_swiglu_backward (dinp, a.inp, probe, N, F);
  Fd f = { act_forward, &a, a.out, probe, nout };
  check_grad (&f, "activation dinp", a.inp, nin, dinp, GRAD_BASE, 1e-2, 1e-3);
  test_free (a.out), test_free (a.inp), test_free (probe), test_free (dinp);
}

static void
test_activation_gradients (void **state)
{
  act_case (ACT_GELU, 3, 13);
  act_case (ACT_RELU, 3, 13);
  act_case (ACT_SWIGLU, 3, 5);
  act_case (ACT_SWIGLU, 1, 1);
}

static void
test_activation_values (void **state)
{
  float x[] = { 1.0f, -1.0f, 2.0f, -100.0f }, y[4];
  mpk_cpu_gelu_forward (y, x, 4);
  mp_assert_close (y[0], 0.8411919906082768, 1e-6);
  mp_assert_close (y[1], -0.15880800939172324, 1e-6);
  mp_assert_close (y[2], 1.954597694087775, 1e-6);
  assert_true (fabsf (y[3]) < 1e-30f);
  mpk_cpu_gelu_forward (x, x, 1); /* in place */
  assert_true (x[0] == y[0]);

  /* SwiGLU row [gate | up] = [g1 g2 | u1 u2]: out_f = silu(g_f) u_f; a very negative
   * gate gives 0, not NaN. */
  float in[] = { 1.0f, -1000.0f, 2.0f, 3.0f }, out[2];
  mpk_cpu_swiglu_forward (out, in, 1, 2);
  mp_assert_close (out[0], 1.0 / (1.0 + exp (-1.0)) * 2.0, 1e-6);
  assert_true (out[1] == 0.0f);
  float dout[] = { 1, 1 }, din[4] = { 0 };
  mpk_cpu_swiglu_backward (din, in, dout, 1, 2);
  assert_finite (din, 4, "swiglu dinp at a saturated gate");
}

static void
test_residual (void **state)
{
  float a[] = { 1, 2, 3 }, b[] = { 10, 20, 30 }, out[3], da[] = { 1, 1, 1 }, db[3] = { 0 };
  mpk_cpu_residual_forward (out, a, b, 3);
  assert_true (out[0] == 11 && out[1] == 22 && out[2] == 33);
  mpk_cpu_residual_forward (a, a, b, 3); /* in place */
  assert_true (a[2] == 33);
  mpk_cpu_residual_backward (da, db, b, 3);
  assert_true (da[0] == 11 && db[0] == 10 && da[2] == 31 && db[2] == 30);
  mpk_cpu_residual_backward (NULL, db, b, 3);
  assert_true (db[1] == 40);
}

/* ---- cross-entropy ------------------------------------------------------------------- */

typedef struct {
  float *losses, *lse, *logits;
  const int *targets;
  int N, V;
} CeCtx;

static void
ce_forward (void *p)
{
  CeCtx *c = p;
  mpk_cpu_crossentropy_forward (c->losses, c->lse, c->logits, c->targets, c->N, c->V);
}

static void
test_crossentropy_gradients (void **state)
{
  const int N = 5, V = 13;
  int *targets = tokens_rand (N, V);
  CeCtx c = { fpoison (N), fpoison (N), frand ((size_t) N * V, -3, 3), targets, N, V };
  ce_forward (&c);
  for (int n = 0; n < N; n++) /* against the definition, in double */
    {
      double sum = 0;
      for (int v = 0; v < V; v++)
        sum += exp (c.logits[n * V + v]);
      mp_assert_close (c.lse[n], log (sum), 1e-6);
      mp_assert_close (c.losses[n], log (sum) - c.logits[n * V + targets[n]], 1e-5);
    }
  /* Mean loss over the N positions: dloss/dlosses = 1/N for every position. */
  float scale = 1.0f / N, *probe = fconst (N, scale);
  float *dlogits = fconst ((size_t) N * V, GRAD_BASE);
  mpk_cpu_crossentropy_backward (dlogits, c.logits, c.lse, targets, scale, N, V);
  Fd f = { ce_forward, &c, c.losses, probe, (size_t) N };
  check_grad (&f, "dlogits", c.logits, (size_t) N * V, dlogits, GRAD_BASE, 1e-2, 1e-3);
  test_free (targets), test_free (c.losses), test_free (c.lse), test_free (c.logits);
  test_free (probe), test_free (dlogits);
}

static void
test_crossentropy_values (void **state)
{
  /* Equal logits: loss log V whatever the target. Huge logits: no overflow. */
  float logits[] = { 7, 7, 7, 7, 1000, 0, -1000, 999 }, losses[2], lse[2];
  int targets[] = { 2, 3 };
  mpk_cpu_crossentropy_forward (losses, lse, logits, targets, 2, 4);
  mp_assert_close (losses[0], log (4.0), 1e-6);
  mp_assert_close (losses[1], log1p (exp (-1.0)) + 1.0, 1e-6);
  mpk_cpu_crossentropy_forward (losses, NULL, logits, targets, 2, 4); /* lse optional */
  assert_finite (losses, 2, "losses");
}

/* Vocab shards [0,5) [5,6) [6,13) (one of a single column), reduced as the caller would:
 * MAX over shards, rescale, SUM. Losses, lse and the gradient shards match the whole. */
static void
test_crossentropy_vocab_shards (void **state)
{
  const int N = 6, V = 13, S = 3;
  const int bounds[] = { 0, 5, 6, 13 };
  int *targets = tokens_rand (N, V);
  float *logits = frand ((size_t) N * V, -4, 4);
  float *losses = fpoison (N), *lse = fpoison (N), *dfull = fconst ((size_t) N * V, 0);
  mpk_cpu_crossentropy_forward (losses, lse, logits, targets, N, V);
  mpk_cpu_crossentropy_backward (dfull, logits, lse, targets, 0.5f, N, V);

  float *shard[3], *lmax[3], *lsum[3], *tlogit[3];
  float *gmax = fconst (N, -INFINITY), *gsum = fconst (N, 0), *gt = fconst (N, 0);
  for (int s = 0; s < S; s++)
    {
      int v0 = bounds[s], Vl = bounds[s + 1] - v0;
      shard[s] = fpoison ((size_t) N * Vl);
      for (int n = 0; n < N; n++)
        memcpy (shard[s] + (size_t) n * Vl, logits + (size_t) n * V + v0, Vl * sizeof (float));
      lmax[s] = fpoison (N), lsum[s] = fpoison (N), tlogit[s] = fpoison (N);
      mpk_cpu_crossentropy_shard_stats (lmax[s], lsum[s], tlogit[s], shard[s], targets, N, Vl,
                                        v0);
      for (int n = 0; n < N; n++) /* all-reduce MAX */
        gmax[n] = fmaxf (gmax[n], lmax[s][n]);
    }
  for (int s = 0; s < S; s++)
    {
      mpk_cpu_crossentropy_shard_rescale (lsum[s], lmax[s], gmax, N);
      mpk_cpu_residual_forward (gsum, gsum, lsum[s], N); /* all-reduce SUM */
      mpk_cpu_residual_forward (gt, gt, tlogit[s], N);
    }
  float *slosses = fpoison (N), *slse = fpoison (N);
  mpk_cpu_crossentropy_shard_finish (slosses, slse, gmax, gsum, gt, N);
  assert_near (slosses, losses, N, 1e-6, "sharded losses");
  assert_near (slse, lse, N, 1e-6, "sharded lse");
  for (int s = 0; s < S; s++)
    {
      int v0 = bounds[s], Vl = bounds[s + 1] - v0;
      float *ds = fconst ((size_t) N * Vl, 0);
      mpk_cpu_crossentropy_shard_backward (ds, shard[s], slse, targets, 0.5f, N, Vl, v0);
      for (int n = 0; n < N; n++)
        assert_near (ds + (size_t) n * Vl, dfull + (size_t) n * V + v0, Vl, 1e-6,
                     "sharded dlogits");
      test_free (ds), test_free (shard[s]), test_free (lmax[s]), test_free (lsum[s]);
      test_free (tlogit[s]);
    }
  test_free (targets), test_free (logits), test_free (losses), test_free (lse);
  test_free (dfull), test_free (gmax), test_free (gsum), test_free (gt), test_free (slosses);
  test_free (slse);
}

/* ---- optimizers ---------------------------------------------------------------------- */

/* Two AdamW steps from p = 1 with g = 0.5 then -0.25 (lr 0.1, betas 0.9/0.999, eps 1e-8,
 * decay 0.01), worked by hand (in double):
 *   t=1: m = 0.05, v = 2.5e-4, m^ = 0.5, v^ = 0.25, p = 1 - 0.1 (0.5/0.5 + 0.01) = 0.899
 *   t=2: m = 0.02, v = 3.1225e-4, m^ = 0.02/0.19, v^ = 3.1225e-4/0.001999,
 *        p = 0.899 - 0.1 (m^/sqrt(v^) + 0.01 * 0.899) = 0.8714672987 */
static void
test_adamw_step (void **state)
{
  float p = 1, m = 0, v = 0, g = 0.5f;
  mpk_cpu_adamw_update (&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
  mp_assert_close (p, 0.899000002, 1e-6);
  mp_assert_close (m, 0.05, 1e-6);
  mp_assert_close (v, 2.5e-4, 2e-5); /* 1 - 0.999f is 1.3e-5 off 0.001 */
  g = -0.25f;
  mpk_cpu_adamw_update (&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 2);
  mp_assert_close (p, 0.8714672987058464, 1e-6);
}

/* ZeRO: updating [0, 4) and [4, 10) separately is the same as the whole. */
static void
test_optimizer_ranges (void **state)
{
  const size_t n = 10, cut = 4;
  float *p1 = frand (n, -1, 1), *g = frand (n, -1, 1), *p2 = fpoison (n);
  memcpy (p2, p1, n * sizeof (float));
  float *m1 = fconst (n, 0), *v1 = fconst (n, 0), *m2 = fconst (n, 0), *v2 = fconst (n, 0);
  for (int t = 1; t <= 3; t++)
    {
      mpk_cpu_adamw_update (p1, g, m1, v1, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
      mpk_cpu_adamw_update (p2, g, m2, v2, cut, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
      mpk_cpu_adamw_update (p2 + cut, g + cut, m2 + cut, v2 + cut, n - cut, 1e-2f, 0.9f, 0.95f,
                            1e-8f, 0.1f, t);
    }
  assert_near (p2, p1, n, 0, "AdamW over two ranges");
  test_free (p1), test_free (g), test_free (p2), test_free (m1), test_free (v1);
  test_free (m2), test_free (v2);
}

static void
test_sgd_step (void **state)
{
  float p = 1, g = 0.5f, mom = 0;
  mpk_cpu_sgd_update (&p, &g, NULL, 1, 0.1f, 0);
  mp_assert_close (p, 0.95, 1e-7);
  p = 1;
  mpk_cpu_sgd_update (&p, &g, &mom, 1, 0.1f, 0.9f); /* mom = 0.5 */
  mpk_cpu_sgd_update (&p, &g, &mom, 1, 0.1f, 0.9f); /* mom = 0.95 */
  mp_assert_close (mom, 0.95, 1e-7);
  mp_assert_close (p, 1 - 0.05 - 0.095, 1e-6);
}

static void
test_sumsq_and_scale (void **state)
{
  float x[] = { 3, -4 };
  mp_assert_close (mpk_cpu_sumsq (x, 2), 25, 1e-15);
  mpk_cpu_scale (x, 2, 0.5f);
  assert_true (x[0] == 1.5f && x[1] == -2.0f);
  /* 1e5 equal squares: a float running sum would drift by ~1e-3, double by ~1e-11. */
  const size_t n = 100000;
  float *y = fconst (n, 0.1f);
  mp_assert_close (mpk_cpu_sumsq (y, n), (double) n * 0.1f * 0.1f, 1e-10);
  test_free (y);
}

/* ---- random numbers ------------------------------------------------------------------ */

static void
test_rng_reproducible (void **state)
{
  float a[64], b[64], c[64];
  mpk_cpu_fill_normal (a, 64, 7, 3, 0, 0, 1);
  mpk_cpu_fill_normal (b, 64, 7, 3, 0, 0, 1);
  assert_memory_equal (a, b, sizeof a);
  mpk_cpu_fill_normal (c, 64, 7, 4, 0, 0, 1); /* another stream */
  assert_memory_not_equal (a, c, sizeof a);
  mpk_cpu_fill_normal (c, 64, 8, 3, 0, 0, 1); /* another seed */
  assert_memory_not_equal (a, c, sizeof a);
  /* The scheme is part of the contract (every layout and the CUDA twin rely on it): pin
   * one value so a change to it is a deliberate one. */
  assert_true (mpk_rng_u64 (0, 0, 0) == UINT64_C (0x568a9b0b1a2c05ec));
  assert_true (mpk_rng_u64 (SEED, 3, 1000) == UINT64_C (0x234bed39e371d4ee));
}

/* Any shard is generated alone and equals its slice of the full tensor, bit for bit. */
static void
test_rng_shard_independent (void **state)
{
  enum { R = 6, COLS = 10 };
  float full[R * COLS], blk[3 * 5], range[17];
  mpk_cpu_fill_normal (full, R * COLS, 11, 5, 0, 0, 0.02f);
  mpk_cpu_fill_normal_block (blk, 11, 5, COLS, 2, 3, 4, 5, 0, 0.02f);
  for (int r = 0; r < 3; r++)
    assert_memory_equal (blk + r * 5, full + (2 + r) * COLS + 4, 5 * sizeof (float));
  mpk_cpu_fill_normal (range, 17, 11, 5, 23, 0, 0.02f);
  assert_memory_equal (range, full + 23, sizeof range);
  mpk_cpu_fill_uniform (full, R * COLS, 11, 6, 0, -1, 1);
  mpk_cpu_fill_uniform_block (blk, 11, 6, COLS, 1, 3, 0, 5, -1, 1);
  for (int r = 0; r < 3; r++)
    assert_memory_equal (blk + r * 5, full + (1 + r) * COLS, 5 * sizeof (float));
  int tok_full[40], tok_part[15];
  mpk_cpu_fill_tokens (tok_full, 40, 11, 7, 0, 50257);
  mpk_cpu_fill_tokens (tok_part, 15, 11, 7, 20, 50257);
  assert_memory_equal (tok_part, tok_full + 20, sizeof tok_part);
}

static void
test_rng_distributions (void **state)
{
  const size_t n = 200000;
  float *x = fpoison (n);
  double s1 = 0, s2 = 0;
  mpk_cpu_fill_uniform (x, n, 1, 1, 0, -1, 3);
  for (size_t i = 0; i < n; i++)
    {
      assert_true (x[i] >= -1 && x[i] < 3);
      s1 += x[i], s2 += (double) x[i] * x[i];
    }
  mp_assert_close (s1 / n, 1.0, 1e-2);                   /* mean (lo + hi)/2 */
  mp_assert_close (s2 / n - (s1 / n) * (s1 / n), 16.0 / 12, 1e-2); /* (hi - lo)^2 / 12 */
  mpk_cpu_fill_normal (x, n, 1, 2, 0, 0, 2);
  s1 = s2 = 0;
  for (size_t i = 0; i < n; i++)
    s1 += x[i], s2 += (double) x[i] * x[i];
  assert_true (fabs (s1 / n) < 0.02);
  mp_assert_close (sqrt (s2 / n), 2.0, 1e-2);
  test_free (x);

  enum { V = 7 };
  int *tok = test_malloc (n * sizeof (int)), count[V] = { 0 };
  mpk_cpu_fill_tokens (tok, n, 1, 3, 0, V);
  for (size_t i = 0; i < n; i++)
    {
      assert_true (tok[i] >= 0 && tok[i] < V);
      count[tok[i]]++;
    }
  for (int v = 0; v < V; v++)
    mp_assert_close (count[v] * (double) V / n, 1.0, 3e-2);
  test_free (tok);
}

int
main (void)
{
  mpk_cpu_init_threads (1);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_matmul_vs_naive),
    cmocka_unit_test (test_grouped_matmul),
    cmocka_unit_test (test_fp8_rounding),
    cmocka_unit_test (test_matmul_fp8),
    cmocka_unit_test (test_embedding_gradients),
    cmocka_unit_test (test_embedding_vocab_shards),
    cmocka_unit_test (test_layernorm_gradients),
    cmocka_unit_test (test_rmsnorm_gradients),
    cmocka_unit_test (test_layernorm_values),
    cmocka_unit_test (test_rotary),
    cmocka_unit_test (test_rotary_values),
    cmocka_unit_test (test_attention_gradients),
    cmocka_unit_test (test_attention_causal_first),
    cmocka_unit_test (test_attention_head_subset),
    cmocka_unit_test (test_ring_attention),
    cmocka_unit_test (test_cp_positions),
    cmocka_unit_test (test_activation_gradients),
    cmocka_unit_test (test_activation_values),
    cmocka_unit_test (test_residual),
    cmocka_unit_test (test_crossentropy_gradients),
    cmocka_unit_test (test_crossentropy_values),
    cmocka_unit_test (test_crossentropy_vocab_shards),
    cmocka_unit_test (test_adamw_step),
    cmocka_unit_test (test_optimizer_ranges),
    cmocka_unit_test (test_sgd_step),
    cmocka_unit_test (test_sumsq_and_scale),
    cmocka_unit_test (test_rng_reproducible),
    cmocka_unit_test (test_rng_shard_independent),
    cmocka_unit_test (test_rng_distributions),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
