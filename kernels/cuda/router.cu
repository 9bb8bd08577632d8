/* router.cu - the CUDA twins of kernels/cpu/moe.c's router: softmax, top-k and the
 * renormalised gates (forward), their backward, and the sequence-wise load-balancing loss.
 * One thread per token (E, the experts, is small: tens to hundreds) runs router-row.h's
 * per-token code, the same code the CPU runs, so only the device's double exp can differ;
 * the aux loss is one block, a thread per (sequence, expert), summed in double. */
#include "kernels/cuda/kernels-cuda.h"
#include "kernels/cuda/util.cuh"
#include "kernels/cpu/router-row.h"

__global__ static void
router_forward_k (float *probs, int *idx, float *gates, const float *logits, int N, int E,
                  int K)
{
  MPK_FOR (n, (size_t) N)
    {
      float *p = probs + n * E;
      mpk_router_softmax_row (p, logits + n * E, E);
      mpk_router_topk_row (idx + n * K, gates + n * K, p, E, K);
    }
}

__global__ static void
router_backward_k (float *dlogits, const float *probs, const int *idx, const float *gates,
                   const float *dgates, const float *dprobs, int N, int E, int K)
{
  MPK_FOR (n, (size_t) N)
    mpk_router_backward_row (dlogits + n * E, probs + n * E, idx + n * K, gates + n * K,
                             dgates + n * K, dprobs ? dprobs + n * E : NULL, E, K);
}

/* One block: each thread takes (sequence, expert) pairs; *LOSS their sum. A pair owns
 * its column of DPROBS over the sequence, so no two threads write one element. */
__global__ static void
router_aux_k (double *loss, float *dprobs, const float *probs, const int *idx, int B, int T,
              int E, int K, float alpha, float dscale)
{
  __shared__ double scratch[32];
  double s = 0;
  for (int q = threadIdx.x; q < B * E; q += blockDim.x)
    {
      int b = q / E, e = q % E;
      double f;
      s += mpk_router_aux_term (&f, probs, idx, b, e, T, E, K, alpha);
      for (int t = 0; dprobs != NULL && t < T; t++)
        dprobs[((size_t) b * T + t) * E + e] += (float) (dscale * alpha * f / T);
    }
  s = block_sum (s, scratch);
  if (threadIdx.x == 0)
    *loss = s;
}

extern "C" cudaError_t
mpk_cuda_router_forward (float *probs, int *idx, float *gates, const float *logits, int N,
                         int E, int K, cudaStream_t stream)
{
  MPK_LAUNCH (router_forward_k, (size_t) N, stream, probs, idx, gates, logits, N, E, K);
}

extern "C" cudaError_t
mpk_cuda_router_backward (float *dlogits, const float *probs, const int *idx,
                          const float *gates, const float *dgates, const float *dprobs, int N,
                          int E, int K, cudaStream_t stream)
{
  MPK_LAUNCH (router_backward_k, (size_t) N, stream, dlogits, probs, idx, gates, dgates,
              dprobs, N, E, K);
}

extern "C" cudaError_t
mpk_cuda_router_aux (double *loss, float *dprobs, const float *probs, const int *idx, int B,
                     int T, int E, int K, float alpha, float dscale, cudaStream_t stream)
{
  router_aux_k<<<1, MPK_THREADS, 0, stream>>> (loss, dprobs, probs, idx, B, T, E, K, alpha,
                                               dscale);
  return cudaGetLastError ();
}
