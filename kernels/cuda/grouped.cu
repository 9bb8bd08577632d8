/* grouped.cu - kernels/cpu/matmul.c's grouped matmul twin: the expert GEMMs of one MoE
 * layer (G segments of rows, one weight each) as ONE cuBLAS call,
 * cublasGemmGroupedBatchedEx (cuBLAS >= 12.5: CUBLAS_VERSION 120500), each non-empty
 * segment a group of one problem; with an older cuBLAS, or where the call reports
 * NOT_SUPPORTED for these types, a loop of cublasGemmEx does the same. Same layout and
 * precisions as matmul.cu (fp32, or bf16 inputs with fp32 accumulation); bias add and
 * gradient per segment. The device pointer arrays live at the head of the scratch. */
#include "kernels/cuda/kernels-cuda.h"
#include "kernels/cuda/gemm.cuh"

#include <stdlib.h>

/* cublasGemmGroupedBatchedEx first shipped in cuBLAS 12.5 (CUDA 12.5 release notes,
 * https://docs.nvidia.com/cuda/archive/12.5.0/cuda-toolkit-release-notes/). */
#if defined(CUBLAS_VERSION) && CUBLAS_VERSION >= 120500
#define MPK_HAVE_GROUPED 1
#else
#define MPK_HAVE_GROUPED 0
#endif

/* One batch of column-major problems C_i (m_i, n_i) = op(A_i) op(B_i) + beta C_i sharing
 * the operations, type and beta. */
typedef struct {
  int count;
  cublasOperation_t ta, tb;
  cudaDataType_t type;
  float beta;
  int *m, *n, *k, *lda, *ldb, *ldc;
  const void **A, **B;
  void **C;
} Problems;

static size_t
sum_rows (const int *rows, int G)
{
  size_t r = 0;
  for (int g = 0; g < G; g++)
    r += rows[g] > 0 ? (size_t) rows[g] : 0;
  return r;
}

static size_t
pointer_bytes (int G)
{
  return ((size_t) 3 * G * sizeof (void *) + 255) & ~(size_t) 255;
}

extern "C" size_t
mpk_cuda_grouped_matmul_scratch_bytes (const int *rows, int G, int C, int OC, int precision)
{
  size_t R = sum_rows (rows, G), bytes = pointer_bytes (G);
  if (precision == 1)
    bytes += (mpk_cuda_bf16_padded (R * C) + mpk_cuda_bf16_padded ((size_t) G * OC * C)
              + mpk_cuda_bf16_padded (R * OC))
             * sizeof (uint16_t);
  return bytes;
}

static Problems *
problems_new (int G, cublasOperation_t ta, cublasOperation_t tb, cudaDataType_t type,
              float beta)
{
  Problems *p = (Problems *) calloc (1, sizeof *p);
  int **ints[] = { &p->m, &p->n, &p->k, &p->lda, &p->ldb, &p->ldc };
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    *ints[i] = (int *) calloc (G > 0 ? G : 1, sizeof (int));
  p->A = (const void **) calloc (G > 0 ? G : 1, sizeof (void *));
  p->B = (const void **) calloc (G > 0 ? G : 1, sizeof (void *));
  p->C = (void **) calloc (G > 0 ? G : 1, sizeof (void *));
  p->ta = ta, p->tb = tb, p->type = type, p->beta = beta;
  return p;
}

static void
problems_free (Problems *p)
{
  free (p->m), free (p->n), free (p->k), free (p->lda), free (p->ldb), free (p->ldc);
  free (p->A), free (p->B), free (p->C);
  free (p);
}

static void
problems_add (Problems *p, int m, int n, int k, const void *A, int lda, const void *B,
              int ldb, float *C, int ldc)
{
  int i = p->count++;
  p->m[i] = m, p->n[i] = n, p->k[i] = k, p->lda[i] = lda, p->ldb[i] = ldb, p->ldc[i] = ldc;
  p->A[i] = A, p->B[i] = B, p->C[i] = C;
}

static cudaError_t
run_loop (cublasHandle_t h, const Problems *p)
{
  for (int i = 0; i < p->count; i++)
    {
      cudaError_t e = mpk_cuda_gemm (h, p->type, p->ta, p->tb, p->m[i], p->n[i], p->k[i],
                                     p->A[i], p->lda[i], p->B[i], p->ldb[i], p->beta,
                                     (float *) p->C[i], p->ldc[i]);
      if (e != cudaSuccess)
        return e;
    }
  return cudaSuccess;
}

/* Every problem of P in one grouped call (pointer arrays staged into DPTRS, 3 count
 * pointers of device memory); the loop where the grouped call is missing or refuses. */
static cudaError_t
run (cublasHandle_t h, const Problems *p, void *dptrs, cudaStream_t stream)
{
  if (p->count <= 0)
    return cudaSuccess;
#if MPK_HAVE_GROUPED
  int G = p->count;
  const void **host = (const void **) malloc ((size_t) 3 * G * sizeof (void *));
  for (int i = 0; i < G; i++)
    host[i] = p->A[i], host[G + i] = p->B[i], host[2 * G + i] = p->C[i];
  /* pageable source: staged before the call returns, so host may go right after */
  cudaError_t e = cudaMemcpyAsync (dptrs, host, (size_t) 3 * G * sizeof (void *),
                                   cudaMemcpyHostToDevice, stream);
  free (host);
  if (e != cudaSuccess)
    return e;
  cublasOperation_t *ta = (cublasOperation_t *) malloc (2 * (size_t) G * sizeof *ta);
  cublasOperation_t *tb = ta + G;
  float *alpha = (float *) malloc (2 * (size_t) G * sizeof (float)), *beta = alpha + G;
  int *size = (int *) malloc ((size_t) G * sizeof (int));
  for (int i = 0; i < G; i++)
    ta[i] = p->ta, tb[i] = p->tb, alpha[i] = 1.0f, beta[i] = p->beta, size[i] = 1;
  void **d = (void **) dptrs;
  cublasStatus_t st = cublasGemmGroupedBatchedEx (
      h, ta, tb, p->m, p->n, p->k, alpha, (const void *const *) d, p->type, p->lda,
      (const void *const *) (d + G), p->type, p->ldb, beta, d + 2 * G, CUDA_R_32F, p->ldc, G,
      size, CUBLAS_COMPUTE_32F);
  free (ta), free (alpha), free (size);
  if (st != CUBLAS_STATUS_NOT_SUPPORTED)
    return mpk_cuda_from_cublas (st);
#else
  (void) dptrs, (void) stream;
#endif
  return run_loop (h, p);
}

/* The bf16 copies of the operands behind the pointer arrays, or the fp32 ones. */
typedef struct {
  const void *x, *w, *dy;
  size_t esz;                   /* element size: 4 (fp32) or 2 (bf16) */
  cudaDataType_t type;
} Operands;

static cudaError_t
operands (Operands *o, int precision, void *scratch, int G, size_t R, int C, int OC,
          const float *x, const float *w, const float *dy, cudaStream_t stream)
{
  *o = (Operands) { x, w, dy, sizeof (float), CUDA_R_32F };
  if (precision != 1)
    return cudaSuccess;
  uint16_t *cur = (uint16_t *) ((char *) scratch + pointer_bytes (G)), *xb = NULL, *wb = NULL,
           *db = NULL;
  cudaError_t e = cudaSuccess;
  if (x != NULL && R > 0)
    e = mpk_cuda_to_bf16 (&xb, &cur, x, R * C, stream);
  if (e == cudaSuccess && w != NULL)
    e = mpk_cuda_to_bf16 (&wb, &cur, w, (size_t) G * OC * C, stream);
  if (e == cudaSuccess && dy != NULL && R > 0)
    e = mpk_cuda_to_bf16 (&db, &cur, dy, R * OC, stream);
  *o = (Operands) { xb, wb, db, sizeof (uint16_t), CUDA_R_16BF };
  return e;
}

/* H on STREAM and the operands in O. */
static cudaError_t
prepare (Operands *o, cublasHandle_t h, int precision, void *scratch, int G, size_t R, int C,
         int OC, const float *x, const float *w, const float *dy, cudaStream_t stream)
{
  cudaError_t e = mpk_cuda_from_cublas (cublasSetStream (h, stream));
  return e != cudaSuccess ? e : operands (o, precision, scratch, G, R, C, OC, x, w, dy, stream);
}

static const void *
elem (const void *base, size_t i, size_t esz)
{
  return (const char *) base + i * esz;
}

extern "C" cudaError_t
mpk_cuda_grouped_matmul_forward (cublasHandle_t h, int precision, void *scratch, float *out,
                                 const float *inp, const float *weight, const float *bias,
                                 const int *rows, int G, int C, int OC, cudaStream_t stream)
{
  size_t R = sum_rows (rows, G);
  if (R == 0 || OC <= 0)
    return cudaSuccess;
  Operands o;
  cudaError_t e = prepare (&o, h, precision, scratch, G, R, C, OC, inp, weight, NULL, stream);
  if (e != cudaSuccess)
    return e;
  /* out_g^T (OC, n_g) = W_g-as-stored^T (OC, C) . inp_g^T (C, n_g) */
  Problems *p = problems_new (G, CUBLAS_OP_T, CUBLAS_OP_N, o.type, 0.0f);
  size_t off = 0;
  for (int g = 0; g < G; off += rows[g] > 0 ? rows[g] : 0, g++)
    if (rows[g] > 0)
      problems_add (p, OC, rows[g], C, elem (o.w, (size_t) g * OC * C, o.esz), C,
                    elem (o.x, off * C, o.esz), C, out + off * OC, OC);
  e = run (h, p, scratch, stream);
  problems_free (p);
  off = 0;
  for (int g = 0; e == cudaSuccess && bias != NULL && g < G;
       off += rows[g] > 0 ? rows[g] : 0, g++)
    if (rows[g] > 0)
      e = mpk_cuda_bias_forward (out + off * OC, bias + (size_t) g * OC, rows[g], OC, stream);
  return e;
}

extern "C" cudaError_t
mpk_cuda_grouped_matmul_backward (cublasHandle_t h, int precision, void *scratch, float *dinp,
                                  float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *weight, const int *rows,
                                  int G, int C, int OC, cudaStream_t stream)
{
  size_t R = sum_rows (rows, G);
  if (R == 0 || OC <= 0)
    return cudaSuccess;
  Operands o;
  cudaError_t e = prepare (&o, h, precision, scratch, G, R, C, OC, dweight ? inp : NULL,
                           dinp ? weight : NULL, dout, stream);
  if (e != cudaSuccess)
    return e;
  Problems *pi = problems_new (G, CUBLAS_OP_N, CUBLAS_OP_N, o.type, 1.0f);
  Problems *pw = problems_new (G, CUBLAS_OP_N, CUBLAS_OP_T, o.type, 1.0f);
  size_t off = 0;
  for (int g = 0; g < G; off += rows[g] > 0 ? rows[g] : 0, g++)
    {
      if (rows[g] <= 0)
        continue;
      const void *dy = elem (o.dy, off * OC, o.esz);
      /* dinp_g^T (C, n_g) += W_g-as-stored (C, OC) . dout_g^T (OC, n_g) */
      if (dinp != NULL)
        problems_add (pi, C, rows[g], OC, elem (o.w, (size_t) g * OC * C, o.esz), C, dy, OC,
                      dinp + off * C, C);
      /* dW_g^T (C, OC) += inp_g^T (C, n_g) . dout_g (n_g, OC) */
      if (dweight != NULL)
        problems_add (pw, C, OC, rows[g], elem (o.x, off * C, o.esz), C, dy, OC,
                      dweight + (size_t) g * OC * C, C);
    }
  e = run (h, pi, scratch, stream);
  if (e == cudaSuccess)
    e = run (h, pw, scratch, stream);   /* stream-ordered after the first: one pointer area */
  problems_free (pi), problems_free (pw);
  off = 0;
  for (int g = 0; e == cudaSuccess && dbias != NULL && g < G;
       off += rows[g] > 0 ? rows[g] : 0, g++)
    if (rows[g] > 0)
      e = mpk_cuda_bias_backward (dbias + (size_t) g * OC, dout + off * OC, rows[g], OC,
                                  stream);
  return e;
}
