/* test-kernels-cuda.c - every kernels/cuda launcher against its kernels/cpu twin (llm.c's
 * dev/cuda checks): seeded random inputs, sizes that are not multiples of the block or
 * warp sizes, device outputs poisoned (all bits set: NaN) before a forward so an element
 * left unwritten fails, backwards started from the same random gradient on both sides
 * (they accumulate). Prints the first mismatch and the largest relative difference.
 * Without a GPU (cudaGetDeviceCount fails or finds 0) every test calls skip() with
 * "no CUDA device". Built only with CUDA. */
#include "config.h"
#include "tests/test-util.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cuda/kernels-cuda.h"

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif
#define RTOL 1e-5   /* fp32 twins: the same formulas, other summation orders */
#define ATOL 1e-6

static int have_device = -1;
static cudaStream_t stream;

static void
need_device (void)
{
  if (have_device < 0)
    {
      int n = 0;
      have_device = cudaGetDeviceCount (&n) == cudaSuccess && n > 0;
      if (have_device)
        assert_int_equal (cudaStreamCreate (&stream), cudaSuccess);
    }
  if (!have_device)
    {
      print_message ("no CUDA device\n");
      skip ();
    }
}

/* Host buffer of N random values in [-1, 1) from stream SEED. */
static float *
rnd (size_t n, uint64_t seed)
{
  float *x = malloc (MAX (n, 1) * sizeof (float));
  mpk_cpu_fill_uniform (x, n, 1234, seed, 0, -1.0f, 1.0f);
  return x;
}

/* A device copy of host X (N floats); POISON: NaN instead of X. */
static float *
dev (const float *x, size_t n, int poison)
{
  void *d = NULL;
  assert_int_equal (cudaMalloc (&d, MAX (n, 1) * sizeof (float)), cudaSuccess);
  if (poison)
    assert_int_equal (cudaMemset (d, 0xff, n * sizeof (float)), cudaSuccess);
  else
    assert_int_equal (cudaMemcpy (d, x, n * sizeof (float), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

static int *
dev_ints (const int *x, size_t n)
{
  void *d = NULL;
  assert_int_equal (cudaMalloc (&d, MAX (n, 1) * sizeof (int)), cudaSuccess);
  assert_int_equal (cudaMemcpy (d, x, n * sizeof (int), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

/* Compares device D with host REF (N floats) to RTOL relative (ATOL absolute floor). */
static void
check (const char *what, const float *d, const float *ref, size_t n, double rtol)
{
  assert_int_equal (cudaStreamSynchronize (stream), cudaSuccess);
  float *h = malloc (MAX (n, 1) * sizeof (float));
  assert_int_equal (cudaMemcpy (h, d, n * sizeof (float), cudaMemcpyDeviceToHost), cudaSuccess);
  double worst = 0;
  size_t bad = 0, first = n;
  for (size_t i = 0; i < n; i++)
    {
      double diff = fabs ((double) h[i] - ref[i]);
      double rel = diff / fmax (fabs (ref[i]), 1e-30);
      if (!(diff <= ATOL + rtol * fabs (ref[i])))
        {
          if (first == n)
            first = i;
          bad++;
        }
      if (diff > ATOL && rel > worst)
        worst = rel;
    }
  print_message ("%-28s %zu elements, max rel diff %.3g%s\n", what, n, worst,
                 bad ? "  NOT OK" : "  OK");
  if (bad)
    {
      float g = h[first];
      free (h);
      fail_msg ("%s: %zu of %zu differ; first [%zu] cuda %.9g cpu %.9g", what, bad, n, first,
                (double) g, (double) ref[first]);
    }
  free (h);
}

#define FREE_ALL(...)                                                                       \
  do {                                                                                      \
    void *p_[] = { __VA_ARGS__ };                                                           \
    for (size_t i_ = 0; i_ < sizeof p_ / sizeof p_[0]; i_++)                                \
      cudaFree (p_[i_]);                                                                    \
  } while (0)

static void
test_cuda_elementwise (void **state)
{
  need_device ();
  size_t n = 100003;
  float *x = rnd (n, 1), *y = rnd (n, 2), *g = rnd (n, 3), *ref = malloc (n * sizeof (float));
  float *dx = dev (x, n, 0), *dy = dev (y, n, 0), *dg = dev (g, n, 0), *dout = dev (NULL, n, 1);
  /* gelu */
  mpk_cpu_gelu_forward (ref, x, n);
  assert_int_equal (mpk_cuda_gelu_forward (dout, dx, n, stream), cudaSuccess);
  check ("gelu_forward", dout, ref, n, RTOL);
  memcpy (ref, g, n * sizeof (float));
  mpk_cpu_gelu_backward (ref, x, y, n);
  float *dacc = dev (g, n, 0);
  assert_int_equal (mpk_cuda_gelu_backward (dacc, dx, dy, n, stream), cudaSuccess);
  check ("gelu_backward", dacc, ref, n, RTOL);
  /* relu */
  assert_int_equal (cudaMemset (dout, 0xff, n * sizeof (float)), cudaSuccess);
  mpk_cpu_relu_forward (ref, x, n);
  assert_int_equal (mpk_cuda_relu_forward (dout, dx, n, stream), cudaSuccess);
  check ("relu_forward", dout, ref, n, RTOL);
  memcpy (ref, g, n * sizeof (float));
  mpk_cpu_relu_backward (ref, x, y, n);
  cudaMemcpy (dacc, g, n * sizeof (float), cudaMemcpyHostToDevice);
  assert_int_equal (mpk_cuda_relu_backward (dacc, dx, dy, n, stream), cudaSuccess);
  check ("relu_backward", dacc, ref, n, RTOL);
  /* residual, add, scale */
  assert_int_equal (cudaMemset (dout, 0xff, n * sizeof (float)), cudaSuccess);
  mpk_cpu_residual_forward (ref, x, y, n);
  assert_int_equal (mpk_cuda_residual_forward (dout, dx, dy, n, stream), cudaSuccess);
  check ("residual_forward", dout, ref, n, RTOL);
  memcpy (ref, g, n * sizeof (float));
  mpk_cpu_residual_backward (ref, NULL, y, n);
  cudaMemcpy (dacc, g, n * sizeof (float), cudaMemcpyHostToDevice);
  assert_int_equal (mpk_cuda_residual_backward (dacc, NULL, dy, n, stream), cudaSuccess);
  check ("residual_backward", dacc, ref, n, RTOL);
  mpk_cpu_scale (ref, n, 0.37f);
  assert_int_equal (mpk_cuda_scale (dacc, n, 0.37f, stream), cudaSuccess);
  check ("scale", dacc, ref, n, RTOL);
  /* swiglu: N rows of [gate | up] */
  int N = 129, F = 777;
  float *in2 = rnd ((size_t) N * 2 * F, 4), *d2 = rnd ((size_t) N * F, 5);
  float *gi = rnd ((size_t) N * 2 * F, 6), *r2 = malloc ((size_t) N * 2 * F * sizeof (float));
  float *din2 = dev (in2, (size_t) N * 2 * F, 0), *dd2 = dev (d2, (size_t) N * F, 0);
  float *dsw = dev (NULL, (size_t) N * F, 1), *dgi = dev (gi, (size_t) N * 2 * F, 0);
  mpk_cpu_swiglu_forward (r2, in2, N, F);
  assert_int_equal (mpk_cuda_swiglu_forward (dsw, din2, N, F, stream), cudaSuccess);
  check ("swiglu_forward", dsw, r2, (size_t) N * F, RTOL);
  memcpy (r2, gi, (size_t) N * 2 * F * sizeof (float));
  mpk_cpu_swiglu_backward (r2, in2, d2, N, F);
  assert_int_equal (mpk_cuda_swiglu_backward (dgi, din2, dd2, N, F, stream), cudaSuccess);
  check ("swiglu_backward", dgi, r2, (size_t) N * 2 * F, RTOL);
  /* casts: bf16 round trip equals rounding to 8 significant bits */
  uint16_t *db = NULL;
  assert_int_equal (cudaMalloc ((void **) &db, n * sizeof (uint16_t)), cudaSuccess);
  assert_int_equal (cudaMemset (dout, 0xff, n * sizeof (float)), cudaSuccess);
  assert_int_equal (mpk_cuda_cast_f32_to_bf16 (db, dx, n, stream), cudaSuccess);
  assert_int_equal (mpk_cuda_cast_bf16_to_f32 (dout, db, n, stream), cudaSuccess);
  check ("cast fp32->bf16->fp32", dout, x, n, 1.0 / 256);
  free (x), free (y), free (g), free (ref), free (in2), free (d2), free (gi), free (r2);
  FREE_ALL (dx, dy, dg, dout, dacc, din2, dd2, dsw, dgi, db);
}

static void
test_cuda_embedding_rotary (void **state)
{
  need_device ();
  int B = 3, T = 37, C = 70, V = 101, v0 = 40, Vl = 33, N = B * T;
  int *tok = malloc (N * sizeof (int));
  mpk_cpu_fill_tokens (tok, N, 1234, 7, 0, V);
  float *wte = rnd ((size_t) Vl * C, 8), *wpe = rnd ((size_t) T * C, 9);
  float *ref = malloc ((size_t) N * C * sizeof (float)), *dref = rnd ((size_t) N * C, 10);
  float *gte = rnd ((size_t) Vl * C, 11), *gpe = rnd ((size_t) T * C, 12);
  int *dtok = dev_ints (tok, N);
  float *dwte = dev (wte, (size_t) Vl * C, 0), *dwpe = dev (wpe, (size_t) T * C, 0);
  float *dout = dev (NULL, (size_t) N * C, 1), *ddout = dev (dref, (size_t) N * C, 0);
  float *dgte = dev (gte, (size_t) Vl * C, 0), *dgpe = dev (gpe, (size_t) T * C, 0);
  mpk_cpu_embedding_forward (ref, tok, wte, wpe, N, T, C, v0, Vl);
  assert_int_equal (mpk_cuda_embedding_forward (dout, dtok, dwte, dwpe, N, T, C, v0, Vl, stream),
                    cudaSuccess);
  check ("embedding_forward", dout, ref, (size_t) N * C, RTOL);
  mpk_cpu_embedding_backward (gte, gpe, dref, tok, N, T, C, v0, Vl);
  assert_int_equal (mpk_cuda_embedding_backward (dgte, dgpe, ddout, dtok, N, T, C, v0, Vl,
                                                 stream), cudaSuccess);
  check ("embedding_backward dwte", dgte, gte, (size_t) Vl * C, 1e-4);
  check ("embedding_backward dwpe", dgpe, gpe, (size_t) T * C, 1e-4);
  /* rotary on a packed row: NHR heads of HD inside rows of ld floats */
  int NHR = 5, HD = 22, ld = 7 * HD;
  size_t rn = (size_t) B * T * ld;
  float *x = rnd (rn, 13), *dx = dev (x, rn, 0);
  mpk_cpu_rotary_forward (x, B, T, NHR, HD, ld, 3, 10000.0f);
  assert_int_equal (mpk_cuda_rotary_forward (dx, B, T, NHR, HD, ld, 3, 10000.0f, stream),
                    cudaSuccess);
  check ("rotary_forward", dx, x, rn, RTOL);
  mpk_cpu_rotary_backward (x, B, T, NHR, HD, ld, 3, 10000.0f);
  assert_int_equal (mpk_cuda_rotary_backward (dx, B, T, NHR, HD, ld, 3, 10000.0f, stream),
                    cudaSuccess);
  check ("rotary_backward", dx, x, rn, RTOL);
  free (tok), free (wte), free (wpe), free (ref), free (dref), free (gte), free (gpe), free (x);
  FREE_ALL (dtok, dwte, dwpe, dout, ddout, dgte, dgpe, dx);
}

static void
test_cuda_norms (void **state)
{
  need_device ();
  int N = 67, C = 300;
  size_t n = (size_t) N * C;
  float *x = rnd (n, 20), *w = rnd (C, 21), *b = rnd (C, 22), *dy = rnd (n, 23);
  float *gx = rnd (n, 24), *gw = rnd (C, 25), *gb = rnd (C, 26);
  float *out = malloc (n * sizeof (float)), *mean = malloc (N * sizeof (float)),
        *rstd = malloc (N * sizeof (float));
  float *dx = dev (x, n, 0), *dw = dev (w, C, 0), *db = dev (b, C, 0), *ddy = dev (dy, n, 0);
  float *dout = dev (NULL, n, 1), *dmean = dev (NULL, N, 1), *drstd = dev (NULL, N, 1);
  float *dgx = dev (gx, n, 0), *dgw = dev (gw, C, 0), *dgb = dev (gb, C, 0);
  mpk_cpu_layernorm_forward (out, mean, rstd, x, w, b, N, C, 1e-5f);
  assert_int_equal (mpk_cuda_layernorm_forward (dout, dmean, drstd, dx, dw, db, N, C, 1e-5f,
                                                stream), cudaSuccess);
  check ("layernorm_forward out", dout, out, n, RTOL);
  check ("layernorm_forward mean", dmean, mean, N, RTOL);
  check ("layernorm_forward rstd", drstd, rstd, N, RTOL);
  mpk_cpu_layernorm_backward (gx, gw, gb, dy, x, w, mean, rstd, N, C);
  assert_int_equal (mpk_cuda_layernorm_backward (dgx, dgw, dgb, ddy, dx, dw, dmean, drstd, N, C,
                                                 stream), cudaSuccess);
  check ("layernorm_backward dinp", dgx, gx, n, 1e-4);
  check ("layernorm_backward dweight", dgw, gw, C, 1e-4);
  check ("layernorm_backward dbias", dgb, gb, C, 1e-4);
  cudaMemset (dout, 0xff, n * sizeof (float));
  mpk_cpu_rmsnorm_forward (out, rstd, x, w, N, C, 1e-6f);
  assert_int_equal (mpk_cuda_rmsnorm_forward (dout, drstd, dx, dw, N, C, 1e-6f, stream),
                    cudaSuccess);
  check ("rmsnorm_forward out", dout, out, n, RTOL);
  mpk_cpu_rmsnorm_backward (gx, gw, dy, x, w, rstd, N, C);
  assert_int_equal (mpk_cuda_rmsnorm_backward (dgx, dgw, ddy, dx, dw, drstd, N, C, stream),
                    cudaSuccess);
  check ("rmsnorm_backward dinp", dgx, gx, n, 1e-4);
  check ("rmsnorm_backward dweight", dgw, gw, C, 1e-4);
  free (x), free (w), free (b), free (dy), free (gx), free (gw), free (gb), free (out),
      free (mean), free (rstd);
  FREE_ALL (dx, dw, db, ddy, dout, dmean, drstd, dgx, dgw, dgb);
}

/* Causal attention of value heads DV wide (MLA's v_head_dim when DV != HD), a sliding
 * WINDOW (0: none) and scores capped at CAP (0: none), against kernels/cpu's. */
static void
run_attention (int B, int T, int NH, int NKV, int HD, int DV, int window, float cap,
               int with_probs)
{
  int ld = (NH + NKV) * HD + NKV * DV, ldo = NH * DV;
  MpkAttnShape s = { B, T, NH, NKV, HD, ld, ld, ldo, window, cap, DV, 0 };
  size_t nq = (size_t) B * T * ld, no = (size_t) B * T * ldo, nl = (size_t) B * NH * T;
  size_t np = (size_t) B * NH * T * T;
  float *qkv = rnd (nq, 30), *out = malloc (no * sizeof (float)), *lse = malloc (nl * 4);
  float *probs = with_probs ? malloc (np * sizeof (float)) : NULL;
  float *dout = rnd (no, 31), *dqkv = rnd (nq, 32);
  float *d_qkv = dev (qkv, nq, 0), *d_out = dev (NULL, no, 1), *d_lse = dev (NULL, nl, 1);
  float *d_probs = with_probs ? dev (NULL, np, 1) : NULL;
  float *d_dout = dev (dout, no, 0), *d_dqkv = dev (dqkv, nq, 0);
  const float *q = qkv, *k = qkv + NH * HD, *v = k + NKV * HD;
  const float *dq = d_qkv, *dk = d_qkv + NH * HD, *dv = dk + NKV * HD;
  mpk_cpu_attention_forward (out, lse, probs, q, k, v, s);
  assert_int_equal (mpk_cuda_attention_forward (d_out, d_lse, d_probs, dq, dk, dv, s, stream),
                    cudaSuccess);
  check ("attention_forward out", d_out, out, no, 1e-4);
  check ("attention_forward lse", d_lse, lse, nl, 1e-5);
  if (with_probs)
    check ("attention_forward probs", d_probs, probs, np, 1e-4);
  mpk_cpu_attention_backward (dqkv, dqkv + NH * HD, dqkv + (NH + NKV) * HD, dout, out, lse,
                              probs, q, k, v, s);
  assert_int_equal (mpk_cuda_attention_backward (d_dqkv, d_dqkv + NH * HD,
                                                 d_dqkv + (NH + NKV) * HD, d_dout, d_out, d_lse,
                                                 d_probs, dq, dk, dv, s, stream), cudaSuccess);
  check ("attention_backward dqkv", d_dqkv, dqkv, nq, 1e-3);
  free (qkv), free (out), free (lse), free (probs), free (dout), free (dqkv);
  FREE_ALL (d_qkv, d_out, d_lse, d_probs, d_dout, d_dqkv);
}

static void
test_cuda_attention (void **state)
{
  need_device ();
  run_attention (2, 37, 4, 2, 40, 40, 0, 0, 0);  /* GQA, T and HD not multiples of the tile */
  run_attention (1, 70, 3, 3, 64, 64, 0, 0, 1);  /* MHA, probs stored */
  run_attention (1, 5, 2, 1, 256, 256, 0, 0, 0); /* the largest head dimension */
  run_attention (2, 37, 4, 4, 48, 32, 0, 0, 1);  /* MLA: v heads narrower (tiny-mla's) */
  run_attention (1, 70, 4, 2, 40, 40, 17, 0, 1); /* a sliding window, across warp chunks */
  run_attention (2, 37, 4, 2, 40, 40, 0, 1.5f, 1);  /* capped scores (Gemma 2) */
  run_attention (1, 70, 4, 4, 24, 16, 9, 1.5f, 0);  /* all three */
}

/* Ring attention as a cp = CP ring runs it on rank RANK: its B sequences' TL query rows at
 * the rank's positions (chunks rank and 2cp-1-rank), the key/value blocks of every rank
 * (K | V packed in rows, as exec/model-cp.c sends them) merged in ring order, then the
 * backward block by block, on both sides from the same inputs. Tolerances as attention's:
 * scores and sums in float against the reference's double dots, the merge rescaling per
 * chunk of 32 keys instead of once per block (out 1e-4, lse 1e-5), and the backward's
 * atomics (1e-3). */
static void
run_ring (int B, int TL, int NH, int NKV, int HD, int DV, int window, float cap, int CP,
          int RANK)
{
  int ldq = NH * HD + 3, ldkv = NKV * (HD + DV), ldo = NH * DV;   /* q rows padded */
  MpkAttnShape s = { B, TL, NH, NKV, HD, ldq, ldkv, ldo, window, cap, DV, 0 };
  int T = TL * CP;
  size_t nq = (size_t) B * TL * ldq, nb = (size_t) B * TL * ldkv, no = (size_t) B * TL * ldo;
  size_t nl = (size_t) B * NH * TL;
  int *pos = malloc ((size_t) T * sizeof (int));
  for (int r = 0; r < CP; r++)
    mpk_cpu_cp_positions (pos + r * TL, T, CP, r);
  int *dpos = dev_ints (pos, (size_t) T);
  const int *qpos = pos + RANK * TL, *dqpos = dpos + RANK * TL;
  float *q = rnd (nq, 40), *kv = rnd (nb * CP, 41), *dout = rnd (no, 42);
  float *out = malloc (no * sizeof (float)), *lse = malloc (nl * sizeof (float));
  float *m = malloc (2 * nl * sizeof (float)), *l = m + nl;
  float *dq = rnd (nq, 43), *dkv = rnd (nb * CP, 44);
  float *d_q = dev (q, nq, 0), *d_kv = dev (kv, nb * CP, 0), *d_dout = dev (dout, no, 0);
  float *d_out = dev (NULL, no, 1), *d_lse = dev (NULL, nl, 1), *d_m = dev (NULL, 2 * nl, 1);
  float *d_dq = dev (dq, nq, 0), *d_dkv = dev (dkv, nb * CP, 0);
  mpk_cpu_ring_attention_begin (out, m, l, s);
  assert_int_equal (mpk_cuda_ring_attention_begin (d_out, d_m, d_m + nl, s, stream),
                    cudaSuccess);
  for (int step = 0; step < CP; step++)
    {
      int r = (RANK + CP - step) % CP;   /* the block of rank r, the ring's order */
      const float *kb = kv + r * nb, *dkb = d_kv + r * nb;
      mpk_cpu_ring_attention_block (out, m, l, q, kb, kb + NKV * HD, s, TL, qpos, pos + r * TL);
      assert_int_equal (mpk_cuda_ring_attention_block (d_out, d_m, d_m + nl, d_q, dkb,
                                                       dkb + NKV * HD, s, TL, dqpos,
                                                       dpos + r * TL, stream),
                        cudaSuccess);
    }
  mpk_cpu_ring_attention_end (out, lse, m, l, s);
  assert_int_equal (mpk_cuda_ring_attention_end (d_out, d_lse, d_m, d_m + nl, s, stream),
                    cudaSuccess);
  check ("ring_attention out", d_out, out, no, 1e-4);
  check ("ring_attention lse", d_lse, lse, nl, 1e-5);
  if (CP == 1)          /* one block, the whole sequence: plain causal attention */
    {
      float *aout = malloc (no * sizeof (float)), *alse = malloc (nl * sizeof (float));
      mpk_cpu_attention_forward (aout, alse, NULL, q, kv, kv + NKV * HD, s);
      check ("ring_attention = attention out", d_out, aout, no, 1e-4);
      check ("ring_attention = attention lse", d_lse, alse, nl, 1e-5);
      free (aout), free (alse);
    }
  for (int r = 0; r < CP; r++)
    {
      float *kb = kv + r * nb, *gkb = dkv + r * nb, *dkb = d_kv + r * nb, *dgkb = d_dkv + r * nb;
      mpk_cpu_ring_attention_backward_block (dq, gkb, gkb + NKV * HD, dout, out, lse, q, kb,
                                             kb + NKV * HD, s, TL, qpos, pos + r * TL);
      assert_int_equal (mpk_cuda_ring_attention_backward_block (
                            d_dq, dgkb, dgkb + NKV * HD, d_dout, d_out, d_lse, d_q, dkb,
                            dkb + NKV * HD, s, TL, dqpos, dpos + r * TL, stream),
                        cudaSuccess);
    }
  check ("ring_attention_backward dq", d_dq, dq, nq, 1e-3);
  check ("ring_attention_backward dk|dv", d_dkv, dkv, nb * CP, 1e-3);
  free (pos), free (q), free (kv), free (dout), free (out), free (lse), free (m), free (dq);
  free (dkv);
  FREE_ALL (dpos, d_q, d_kv, d_dout, d_out, d_lse, d_m, d_dq, d_dkv);
}

/* The ring's pieces against kernels/cpu's; with cp = 1 (one block) also against plain
 * causal attention. */
static void
test_cuda_ring_attention (void **state)
{
  need_device ();
  run_ring (2, 38, 4, 2, 40, 40, 0, 0, 2, 0);   /* GQA, cp 2, rank 0: chunks 0 and 3 */
  run_ring (2, 38, 4, 2, 40, 40, 0, 0, 2, 1);   /* rank 1: chunks 1 and 2 */
  run_ring (1, 70, 3, 3, 64, 64, 0, 0, 4, 2);   /* MHA, cp 4, blocks longer than a chunk */
  run_ring (1, 8, 2, 1, 256, 256, 0, 0, 2, 0);  /* the largest head dimension */
  run_ring (1, 38, 4, 2, 40, 40, 0, 0, 1, 0);   /* cp 1: the ring is plain attention */
  run_ring (2, 38, 4, 4, 48, 32, 0, 0, 2, 1);   /* MLA: K and V of different widths */
  run_ring (1, 70, 4, 2, 40, 40, 23, 1.5f, 4, 1);  /* window by position, capped scores */
  run_ring (1, 38, 4, 2, 24, 16, 11, 1.5f, 1, 0);  /* all three, cp 1: = attention */
}

static void
test_cuda_loss (void **state)
{
  need_device ();
  int N = 45, V = 1003, v0 = 300, Vl = 411;
  int *tgt = malloc (N * sizeof (int));
  mpk_cpu_fill_tokens (tgt, N, 1234, 40, 0, V);
  float *logits = rnd ((size_t) N * V, 41), *g = rnd ((size_t) N * V, 42);
  for (size_t i = 0; i < (size_t) N * V; i++)
    logits[i] *= 8.0f;
  float *loss = malloc (N * 4), *lse = malloc (N * 4);
  int *dt = dev_ints (tgt, N);
  float *dl = dev (logits, (size_t) N * V, 0), *dg = dev (g, (size_t) N * V, 0);
  float *dloss = dev (NULL, N, 1), *dlse = dev (NULL, N, 1);
  mpk_cpu_crossentropy_forward (loss, lse, logits, tgt, N, V);
  assert_int_equal (mpk_cuda_crossentropy_forward (dloss, dlse, dl, dt, N, V, stream),
                    cudaSuccess);
  check ("crossentropy_forward loss", dloss, loss, N, RTOL);
  check ("crossentropy_forward lse", dlse, lse, N, RTOL);
  mpk_cpu_crossentropy_backward (g, logits, lse, tgt, 1.0f / N, N, V);
  assert_int_equal (mpk_cuda_crossentropy_backward (dg, dl, dlse, dt, 1.0f / N, N, V, stream),
                    cudaSuccess);
  check ("crossentropy_backward", dg, g, (size_t) N * V, RTOL);
  /* the vocab-parallel pieces on one shard [v0, v0+Vl) of its own (N, Vl) logits */
  float *sh = rnd ((size_t) N * Vl, 43), *lmax = malloc (N * 4), *lsum = malloc (N * 4),
        *tl = malloc (N * 4), *gmax = rnd (N, 44), *gs = rnd ((size_t) N * Vl, 45);
  for (int i = 0; i < N; i++)
    gmax[i] = 1.0f + fabsf (gmax[i]);
  float *dsh = dev (sh, (size_t) N * Vl, 0), *dlmax = dev (NULL, N, 1), *dlsum = dev (NULL, N, 1);
  float *dtl = dev (NULL, N, 1), *dgmax = dev (gmax, N, 0), *dgs = dev (gs, (size_t) N * Vl, 0);
  mpk_cpu_crossentropy_shard_stats (lmax, lsum, tl, sh, tgt, N, Vl, v0);
  assert_int_equal (mpk_cuda_crossentropy_shard_stats (dlmax, dlsum, dtl, dsh, dt, N, Vl, v0,
                                                       stream), cudaSuccess);
  check ("shard_stats lmax", dlmax, lmax, N, RTOL);
  check ("shard_stats lsum", dlsum, lsum, N, RTOL);
  check ("shard_stats tlogit", dtl, tl, N, RTOL);
  mpk_cpu_crossentropy_shard_rescale (lsum, lmax, gmax, N);
  assert_int_equal (mpk_cuda_crossentropy_shard_rescale (dlsum, dlmax, dgmax, N, stream),
                    cudaSuccess);
  check ("shard_rescale", dlsum, lsum, N, RTOL);
  cudaMemset (dloss, 0xff, N * 4), cudaMemset (dlse, 0xff, N * 4);
  mpk_cpu_crossentropy_shard_finish (loss, lse, gmax, lsum, tl, N);
  assert_int_equal (mpk_cuda_crossentropy_shard_finish (dloss, dlse, dgmax, dlsum, dtl, N,
                                                        stream), cudaSuccess);
  check ("shard_finish loss", dloss, loss, N, RTOL);
  check ("shard_finish lse", dlse, lse, N, RTOL);
  mpk_cpu_crossentropy_shard_backward (gs, sh, lse, tgt, 0.5f, N, Vl, v0);
  assert_int_equal (mpk_cuda_crossentropy_shard_backward (dgs, dsh, dlse, dt, 0.5f, N, Vl, v0,
                                                          stream), cudaSuccess);
  check ("shard_backward", dgs, gs, (size_t) N * Vl, RTOL);
  free (tgt), free (logits), free (g), free (loss), free (lse), free (sh), free (lmax),
      free (lsum), free (tl), free (gmax), free (gs);
  FREE_ALL (dt, dl, dg, dloss, dlse, dsh, dlmax, dlsum, dtl, dgmax, dgs);
}

static void
test_cuda_optimizer (void **state)
{
  need_device ();
  size_t n = 33333;
  float *p = rnd (n, 50), *g = rnd (n, 51), *m = rnd (n, 52), *v = rnd (n, 53);
  for (size_t i = 0; i < n; i++)
    v[i] = fabsf (v[i]);
  float *dp = dev (p, n, 0), *dg = dev (g, n, 0), *dm = dev (m, n, 0), *dv = dev (v, n, 0);
  mpk_cpu_adamw_update (p, g, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3);
  assert_int_equal (mpk_cuda_adamw_update (dp, dg, dm, dv, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f,
                                           3, stream), cudaSuccess);
  check ("adamw param", dp, p, n, RTOL);
  check ("adamw m", dm, m, n, RTOL);
  check ("adamw v", dv, v, n, RTOL);
  mpk_cpu_sgd_update (p, g, m, n, 0.1f, 0.9f);
  assert_int_equal (mpk_cuda_sgd_update (dp, dg, dm, n, 0.1f, 0.9f, stream), cudaSuccess);
  check ("sgd param", dp, p, n, RTOL);
  check ("sgd momentum", dm, m, n, RTOL);
  double *ds = NULL, s = 0;
  assert_int_equal (cudaMalloc ((void **) &ds, sizeof (double)), cudaSuccess);
  assert_int_equal (mpk_cuda_sumsq (ds, dg, n, stream), cudaSuccess);
  assert_int_equal (cudaMemcpy (&s, ds, sizeof s, cudaMemcpyDeviceToHost), cudaSuccess);
  mp_assert_close (s, mpk_cpu_sumsq (g, n), 1e-12);
  free (p), free (g), free (m), free (v);
  FREE_ALL (dp, dg, dm, dv, ds);
}

/* One GEMM case's operands, host and device: x (R, C), G weights w (OC, C) and biases b
 * (OC), dy (R, OC), the gradients' starting values gx, gw, gb (backwards accumulate), the
 * forward's host result out, its device output dout (poisoned), and a scratch of SB bytes
 * followed by GUARD bytes of 0xa5 the launcher must not reach. */
#define GUARD 4096
typedef struct {
  size_t nx, nw, nb, ny, sb;
  float *x, *w, *b, *dy, *gx, *gw, *gb, *out;
  float *dx, *dw, *db, *ddy, *dgx, *dgw, *dgb, *dout;
  void *scratch;
} GemmCase;

static GemmCase
gemm_case (int R, int G, int C, int OC, size_t sb, uint64_t seed)
{
  GemmCase g = { (size_t) R * C, (size_t) G * OC * C, (size_t) G * OC, (size_t) R * OC, sb };
  g.x = rnd (g.nx, seed), g.w = rnd (g.nw, seed + 1), g.b = rnd (g.nb, seed + 2);
  g.dy = rnd (g.ny, seed + 3), g.gx = rnd (g.nx, seed + 4), g.gw = rnd (g.nw, seed + 5);
  g.gb = rnd (g.nb, seed + 6), g.out = malloc (MAX (g.ny, 1) * sizeof (float));
  g.dx = dev (g.x, g.nx, 0), g.dw = dev (g.w, g.nw, 0), g.db = dev (g.b, g.nb, 0);
  g.ddy = dev (g.dy, g.ny, 0), g.dgx = dev (g.gx, g.nx, 0), g.dgw = dev (g.gw, g.nw, 0);
  g.dgb = dev (g.gb, g.nb, 0), g.dout = dev (NULL, g.ny, 1);
  assert_int_equal (cudaMalloc (&g.scratch, sb + GUARD), cudaSuccess);
  assert_int_equal (cudaMemset ((char *) g.scratch + sb, 0xa5, GUARD), cudaSuccess);
  return g;
}

/* The backward's three gradients against the host's (gx, gw, gb after the reference ran),
 * and the scratch's guard. */
static void
gemm_case_check_backward (const GemmCase *g, const char *what, double rtol)
{
  char name[64];
  snprintf (name, sizeof name, "%s dinp", what);
  check (name, g->dgx, g->gx, g->nx, rtol);
  snprintf (name, sizeof name, "%s dweight", what);
  check (name, g->dgw, g->gw, g->nw, rtol);
  snprintf (name, sizeof name, "%s dbias", what);
  check (name, g->dgb, g->gb, g->nb, 1e-5);
  unsigned char *b = malloc (GUARD);
  assert_int_equal (cudaMemcpy (b, (const char *) g->scratch + g->sb, GUARD,
                                cudaMemcpyDeviceToHost),
                    cudaSuccess);
  for (size_t i = 0; i < GUARD; i++)
    if (b[i] != 0xa5)
      fail_msg ("%s wrote guard byte %zu past its %zu-byte scratch", what, i, g->sb);
  free (b);
}

static void
gemm_case_free (GemmCase *g)
{
  free (g->x), free (g->w), free (g->b), free (g->dy), free (g->gx), free (g->gw);
  free (g->gb), free (g->out);
  FREE_ALL (g->dx, g->dw, g->db, g->ddy, g->dgx, g->dgw, g->dgb, g->dout, g->scratch);
}

static cublasHandle_t
blas_new (void)
{
  cublasHandle_t h;
  assert_int_equal (cublasCreate (&h), CUBLAS_STATUS_SUCCESS);
  cublasSetMathMode (h, CUBLAS_PEDANTIC_MATH);
  return h;
}

static void
run_matmul (int precision, double rtol)
{
  int N = 67, C = 45, OC = 33;
  GemmCase g = gemm_case (N, 1, C, OC, mpk_cuda_matmul_scratch_bytes (N, C, OC), 60);
  cublasHandle_t h = blas_new ();
  mpk_cpu_matmul_forward (g.out, g.x, g.w, g.b, N, C, OC);
  assert_int_equal (mpk_cuda_matmul_forward (h, precision, g.scratch, g.dout, g.dx, g.dw, g.db,
                                             N, C, OC, stream),
                    cudaSuccess);
  check (precision ? "matmul_forward bf16" : "matmul_forward fp32", g.dout, g.out, g.ny, rtol);
  mpk_cpu_matmul_backward (g.gx, g.gw, g.gb, g.dy, g.x, g.w, N, C, OC);
  assert_int_equal (mpk_cuda_matmul_backward (h, precision, g.scratch, g.dgx, g.dgw, g.dgb,
                                              g.ddy, g.dx, g.dw, N, C, OC, stream),
                    cudaSuccess);
  gemm_case_check_backward (&g, "matmul_backward", rtol);
  cublasDestroy (h);
  gemm_case_free (&g);
}

static void
test_cuda_matmul (void **state)
{
  need_device ();
  run_matmul (0, 1e-4);
  /* bf16 inputs: 8 significant bits per operand (2^-9 relative rounding), K = 45..67 terms
   * of mixed sign summed in fp32: a few 1e-2 relative on small outputs. Elements near zero
   * are judged by the absolute floor as well. */
  run_matmul (1, 5e-2);
}

/* MoE token permutation: rows gathered to their experts with and without gates, scattered
 * back (a token's K rows meet in one row: atomics), and the gates' row dot products. */
static void
test_cuda_moe_permute (void **state)
{
  need_device ();
  int N = 37, K = 3, C = 70, R = N * K - 5;   /* five choices dropped */
  int *idx = malloc ((size_t) R * sizeof (int));
  for (int r = 0; r < R; r++)
    idx[r] = (r * 7 + 3) % N;                 /* each token up to K times, out of order */
  float *x = rnd ((size_t) N * C, 20), *gate = rnd (R, 21), *rows = rnd ((size_t) R * C, 22);
  float *y = rnd ((size_t) N * C, 23), *ref = malloc ((size_t) R * C * sizeof (float));
  float *dot = malloc ((size_t) R * sizeof (float));
  int *didx = dev_ints (idx, R);
  float *dx = dev (x, (size_t) N * C, 0), *dgate = dev (gate, R, 0);
  float *drows = dev (rows, (size_t) R * C, 0), *dy = dev (y, (size_t) N * C, 0);
  float *dout = dev (NULL, (size_t) R * C, 1), *ddot = dev (NULL, R, 1);
  mpk_cpu_gather_rows (ref, x, idx, NULL, R, C);
  assert_int_equal (mpk_cuda_gather_rows (dout, dx, didx, NULL, R, C, stream), cudaSuccess);
  check ("gather_rows", dout, ref, (size_t) R * C, RTOL);
  mpk_cpu_gather_rows (ref, x, idx, gate, R, C);
  assert_int_equal (mpk_cuda_gather_rows (dout, dx, didx, dgate, R, C, stream), cudaSuccess);
  check ("gather_rows (gated)", dout, ref, (size_t) R * C, RTOL);
  mpk_cpu_scatter_add_rows (y, rows, idx, gate, R, C);
  assert_int_equal (mpk_cuda_scatter_add_rows (dy, drows, didx, dgate, R, C, stream),
                    cudaSuccess);
  check ("scatter_add_rows (gated)", dy, y, (size_t) N * C, 1e-4);
  mpk_cpu_rows_dot (dot, x, idx, rows, R, C);
  assert_int_equal (mpk_cuda_rows_dot (ddot, dx, didx, drows, R, C, stream), cudaSuccess);
  check ("rows_dot", ddot, dot, R, RTOL);
  free (idx), free (x), free (gate), free (rows), free (y), free (ref), free (dot);
  FREE_ALL (didx, dx, dgate, drows, dy, dout, ddot);
}

/* The router: softmax, top-k (indices must match exactly), renormalised gates; backward
 * with and without the aux loss's probability gradient; the aux loss itself. */
static void
test_cuda_router (void **state)
{
  need_device ();
  int B = 3, T = 37, N = B * T, E = 13, K = 3;
  size_t ne = (size_t) N * E, nk = (size_t) N * K;
  float *logits = rnd (ne, 70), *dg = rnd (nk, 71), *da = rnd (ne, 72), *dz = rnd (ne, 73);
  float *probs = malloc (ne * 4), *gates = malloc (nk * 4);
  int *idx = malloc (nk * sizeof (int)), *hidx = malloc (nk * sizeof (int));
  for (size_t i = 0; i < ne; i++)
    logits[i] *= 4;                       /* peaked enough that top-k is not a coin toss */
  float *dl = dev (logits, ne, 0), *dp = dev (NULL, ne, 1), *dgt = dev (NULL, nk, 1);
  float *ddg = dev (dg, nk, 0), *dda = dev (da, ne, 0), *ddz = dev (dz, ne, 0);
  int *di = NULL;
  assert_int_equal (cudaMalloc ((void **) &di, nk * sizeof (int)), cudaSuccess);
  mpk_cpu_router_forward (probs, idx, gates, logits, N, E, K);
  assert_int_equal (mpk_cuda_router_forward (dp, di, dgt, dl, N, E, K, stream), cudaSuccess);
  check ("router_forward probs", dp, probs, ne, RTOL);
  check ("router_forward gates", dgt, gates, nk, RTOL);
  assert_int_equal (cudaMemcpy (hidx, di, nk * sizeof (int), cudaMemcpyDeviceToHost),
                    cudaSuccess);
  for (size_t i = 0; i < nk; i++)
    if (hidx[i] != idx[i])
      fail_msg ("router_forward idx[%zu]: cuda %d cpu %d", i, hidx[i], idx[i]);
  /* backward from the device's own routing (identical, checked above) */
  mpk_cpu_router_backward (dz, probs, idx, gates, dg, da, N, E, K);
  assert_int_equal (mpk_cuda_router_backward (ddz, dp, di, dgt, ddg, dda, N, E, K, stream),
                    cudaSuccess);
  check ("router_backward (+dprobs)", ddz, dz, ne, 1e-4);
  mpk_cpu_router_backward (dz, probs, idx, gates, dg, NULL, N, E, K);
  assert_int_equal (mpk_cuda_router_backward (ddz, dp, di, dgt, ddg, NULL, N, E, K, stream),
                    cudaSuccess);
  check ("router_backward", ddz, dz, ne, 1e-4);
  /* aux loss: value and its probability gradient, accumulated into da */
  double want = mpk_cpu_router_aux (da, probs, idx, B, T, E, K, 1e-2f, 0.5f), got = 0;
  double *dloss = NULL;
  assert_int_equal (cudaMalloc ((void **) &dloss, sizeof (double)), cudaSuccess);
  assert_int_equal (mpk_cuda_router_aux (dloss, dda, dp, di, B, T, E, K, 1e-2f, 0.5f, stream),
                    cudaSuccess);
  check ("router_aux dprobs", dda, da, ne, RTOL);
  assert_int_equal (cudaMemcpy (&got, dloss, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
  mp_assert_close (got, want, 1e-6);
  free (logits), free (dg), free (da), free (dz), free (probs), free (gates), free (idx);
  free (hidx);
  FREE_ALL (dl, dp, dgt, ddg, dda, ddz, di, dloss);
}

/* Grouped expert GEMMs (one empty expert, one of a single row) against the CPU's
 * segment-by-segment matmuls, fp32 and bf16, with and without biases (the empty expert's
 * gradients must stay as they were). */
static void
run_grouped (int precision, int with_bias, double rtol)
{
  int rows[] = { 13, 0, 29, 1, 20 }, G = 5, C = 45, OC = 33, R = 63;
  GemmCase g = gemm_case (R, G, C, OC,
                          mpk_cuda_grouped_matmul_scratch_bytes (rows, G, C, OC, precision), 80);
  cublasHandle_t h = blas_new ();
  const float *bias = with_bias ? g.b : NULL, *dbias = with_bias ? g.db : NULL;
  mpk_cpu_grouped_matmul_forward (g.out, g.x, g.w, bias, rows, G, C, OC);
  assert_int_equal (mpk_cuda_grouped_matmul_forward (h, precision, g.scratch, g.dout, g.dx, g.dw,
                                                     dbias, rows, G, C, OC, stream),
                    cudaSuccess);
  check (precision ? "grouped_forward bf16" : "grouped_forward fp32", g.dout, g.out, g.ny, rtol);
  mpk_cpu_grouped_matmul_backward (g.gx, g.gw, with_bias ? g.gb : NULL, g.dy, g.x, g.w, rows, G,
                                   C, OC);
  assert_int_equal (mpk_cuda_grouped_matmul_backward (h, precision, g.scratch, g.dgx, g.dgw,
                                                      with_bias ? g.dgb : NULL, g.ddy, g.dx,
                                                      g.dw, rows, G, C, OC, stream),
                    cudaSuccess);
  gemm_case_check_backward (&g, "grouped_backward", rtol);
  cublasDestroy (h);
  gemm_case_free (&g);
}

static void
test_cuda_grouped_matmul (void **state)
{
  need_device ();
  run_grouped (0, 1, 1e-4);
  run_grouped (0, 0, 1e-4);
  run_grouped (1, 1, 5e-2);   /* bf16 inputs: test_cuda_matmul's tolerance, and why */
}

/* FP8 cast-GEMM-cast against kernels/cpu/fp8.c: both multiply the same FP8 values (the
 * device's RNE-with-saturation cast is the reference's rounding), so they differ only by
 * fp32 summation order and the inverse scale's rounding, ~1e-6 relative; 1e-3 leaves room
 * for an fp32 accumulation of 64 products and the absolute floor covers cancellation. */
static void
test_cuda_fp8 (void **state)
{
  need_device ();
  int device = 0;
  cudaGetDevice (&device);
  assert_false (mpk_cuda_matmul_fp8_fits (47, 64, 32));   /* cublasLt's FP8 alignment */
  assert_true (mpk_cuda_matmul_fp8_fits (48, 64, 32));
  if (mpk_cuda_fp8_supported (device) != cudaSuccess)
    {
      print_message ("FP8 GEMMs need compute capability 8.9 or newer\n");
      skip ();
    }
  int N = 48, C = 64, OC = 32;
  GemmCase g = gemm_case (N, 1, C, OC, mpk_cuda_matmul_fp8_scratch_bytes (N, C, OC), 90);
  float *ref = malloc (mpk_cpu_matmul_fp8_scratch (N, C, OC) * sizeof (float));
  cublasLtHandle_t lt;
  assert_int_equal (cublasLtCreate (&lt), CUBLAS_STATUS_SUCCESS);
  assert_int_equal (mpk_cuda_matmul_fp8_forward (lt, g.scratch, g.dout, g.dx, g.dw, g.db, 47, C,
                                                 OC, stream),
                    cudaErrorNotSupported);
  assert_false (mpk_cuda_fp8_aligned (g.dout + 1));       /* refused before it writes */
  assert_int_equal (mpk_cuda_matmul_fp8_forward (lt, g.scratch, g.dout + 1, g.dx, g.dw, g.db, N,
                                                 C, OC, stream),
                    cudaErrorNotSupported);
  mpk_cpu_matmul_fp8_forward (g.out, ref, g.x, g.w, g.b, N, C, OC);
  assert_int_equal (mpk_cuda_matmul_fp8_forward (lt, g.scratch, g.dout, g.dx, g.dw, g.db, N, C,
                                                 OC, stream),
                    cudaSuccess);
  check ("matmul_fp8_forward", g.dout, g.out, g.ny, 1e-3);
  mpk_cpu_matmul_fp8_backward (g.gx, g.gw, g.gb, ref, g.dy, g.x, g.w, N, C, OC);
  assert_int_equal (mpk_cuda_matmul_fp8_backward (lt, g.scratch, g.dgx, g.dgw, g.dgb, g.ddy, g.dx,
                                                  g.dw, N, C, OC, stream),
                    cudaSuccess);
  gemm_case_check_backward (&g, "matmul_fp8_backward", 1e-3);
  cublasLtDestroy (lt);
  free (ref);
  gemm_case_free (&g);
}

/* The attention variants (attn-extras.cu): qk-norm, sinks (with probs), logit
 * soft-capping, geglu, each against kernels/cpu from the same inputs. */
static void
test_cuda_attn_extras (void **state)
{
  need_device ();
  int N = 37, NH = 4, NKV = 2, HD = 40, ld = (NH + 2 * NKV) * HD, H = NH + NKV;
  size_t nq = (size_t) N * ld, nr = (size_t) N * H;
  float *x = rnd (nq, 60), *wq = rnd (HD, 61), *wk = rnd (HD, 62), *g = rnd (nq, 63);
  float *raw = malloc (nr * HD * 4), *rstd = malloc (nr * 4), *dwq = calloc (HD, 4),
        *dwk = calloc (HD, 4);
  float *dx = dev (x, nq, 0), *dwqd = dev (wq, HD, 0), *dwkd = dev (wk, HD, 0);
  float *draw = dev (NULL, nr * HD, 1), *drstd = dev (NULL, nr, 1), *dg = dev (g, nq, 0);
  float *dgq = dev (dwq, HD, 0), *dgk = dev (dwk, HD, 0);
  mpk_cpu_qknorm_forward (x, raw, rstd, wq, wk, N, NH, NKV, HD, ld, 1e-5f);
  assert_int_equal (mpk_cuda_qknorm_forward (dx, draw, drstd, dwqd, dwkd, N, NH, NKV, HD, ld,
                                             1e-5f, stream), cudaSuccess);
  check ("qknorm_forward", dx, x, nq, RTOL);
  check ("qknorm_forward rstd", drstd, rstd, nr, RTOL);
  mpk_cpu_qknorm_backward (g, dwq, dwk, raw, rstd, wq, wk, N, NH, NKV, HD, ld);
  assert_int_equal (mpk_cuda_qknorm_backward (dg, dgq, dgk, draw, drstd, dwqd, dwkd, N, NH, NKV,
                                              HD, ld, stream), cudaSuccess);
  check ("qknorm_backward", dg, g, nq, RTOL);
  check ("qknorm_backward dwq", dgq, dwq, HD, 1e-4);
  check ("qknorm_backward dwk", dgk, dwk, HD, 1e-4);
  /* sinks on an attention's out, lse and probs */
  MpkAttnShape s = { 2, 23, NH, NKV, HD, ld, ld, NH * HD, 0, 0 };
  size_t no = (size_t) s.B * s.T * s.ldo, nl = (size_t) s.B * NH * s.T, np = nl * s.T;
  float *out = rnd (no, 64), *lse = rnd (nl, 65), *probs = rnd (np, 66), *sk = rnd (NH, 67);
  float *dout = rnd (no, 68), *dsk = calloc (NH, 4);
  float *d_out = dev (out, no, 0), *d_lse = dev (lse, nl, 0), *d_probs = dev (probs, np, 0);
  float *d_sk = dev (sk, NH, 0), *d_dout = dev (dout, no, 0), *d_dsk = dev (dsk, NH, 0);
  mpk_cpu_attention_sinks_forward (out, lse, probs, sk, s);
  assert_int_equal (mpk_cuda_attention_sinks_forward (d_out, d_lse, d_probs, d_sk, s, stream),
                    cudaSuccess);
  check ("sinks_forward out", d_out, out, no, RTOL);
  check ("sinks_forward lse", d_lse, lse, nl, RTOL);
  check ("sinks_forward probs", d_probs, probs, np, RTOL);
  mpk_cpu_attention_sinks_backward (dsk, dout, out, lse, sk, s);
  assert_int_equal (mpk_cuda_attention_sinks_backward (d_dsk, d_dout, d_out, d_lse, d_sk, s,
                                                       stream), cudaSuccess);
  check ("sinks_backward", d_dsk, dsk, NH, 1e-4);
  /* soft-capping and geglu on (N, 2F) */
  int F = 301;
  size_t ne = (size_t) N * 2 * F;
  float *e = rnd (ne, 69), *ge = rnd (ne, 70), *act = malloc ((size_t) N * F * 4);
  float *ga = rnd ((size_t) N * F, 71);
  for (size_t i = 0; i < ne; i++)
    e[i] *= 4.0f;
  float *d_e = dev (e, ne, 0), *d_ge = dev (ge, ne, 0), *d_act = dev (NULL, (size_t) N * F, 1);
  float *d_ga = dev (ga, (size_t) N * F, 0);
  mpk_cpu_geglu_forward (act, e, N, F);
  assert_int_equal (mpk_cuda_geglu_forward (d_act, d_e, N, F, stream), cudaSuccess);
  check ("geglu_forward", d_act, act, (size_t) N * F, RTOL);
  mpk_cpu_geglu_backward (ge, e, ga, N, F);
  assert_int_equal (mpk_cuda_geglu_backward (d_ge, d_e, d_ga, N, F, stream), cudaSuccess);
  check ("geglu_backward", d_ge, ge, ne, RTOL);
  mpk_cpu_softcap_forward (e, ne, 3.0f);
  assert_int_equal (mpk_cuda_softcap_forward (d_e, ne, 3.0f, stream), cudaSuccess);
  check ("softcap_forward", d_e, e, ne, RTOL);
  mpk_cpu_softcap_backward (ge, e, ne, 3.0f);
  assert_int_equal (mpk_cuda_softcap_backward (d_ge, d_e, ne, 3.0f, stream), cudaSuccess);
  check ("softcap_backward", d_ge, ge, ne, RTOL);
  free (x), free (wq), free (wk), free (g), free (raw), free (rstd), free (dwq), free (dwk);
  free (out), free (lse), free (probs), free (sk), free (dout), free (dsk);
  free (e), free (ge), free (act), free (ga);
  FREE_ALL (dx, dwqd, dwkd, draw, drstd, dg, dgq, dgk, d_out, d_lse, d_probs, d_sk, d_dout,
            d_dsk, d_e, d_ge, d_act, d_ga);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_cuda_elementwise),
    cmocka_unit_test (test_cuda_embedding_rotary),
    cmocka_unit_test (test_cuda_norms),
    cmocka_unit_test (test_cuda_attention),
    cmocka_unit_test (test_cuda_ring_attention),
    cmocka_unit_test (test_cuda_loss),
    cmocka_unit_test (test_cuda_optimizer),
    cmocka_unit_test (test_cuda_matmul),
    cmocka_unit_test (test_cuda_moe_permute),
    cmocka_unit_test (test_cuda_router),
    cmocka_unit_test (test_cuda_grouped_matmul),
    cmocka_unit_test (test_cuda_fp8),
    cmocka_unit_test (test_cuda_attn_extras),
  };
  /* cmocka 1.1's TAP marks a skip() as "not ok # SKIP", which automake's TAP driver counts
   * as a failure: without a device, skip the whole program with a TAP plan of none. */
  int n = 0;
  if (cudaGetDeviceCount (&n) != cudaSuccess || n == 0)
    {
      printf ("1..0 # SKIP no CUDA device\n");
      return 0;
    }
  return cmocka_run_group_tests_name ("kernels-cuda", tests, NULL, NULL);
}
