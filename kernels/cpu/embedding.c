/* embedding.c - token (+ learned position) lookup and its scatter-add backward, over a
 * vocabulary shard [v0, v0+Vl) so that Megatron's vocab-parallel embedding is the same
 * kernel: tokens outside the shard give zero rows and the caller all-reduces. */
#include "kernels/cpu/kernels.h"

#include <stdbool.h>

/* Is TOKEN in the shard [v0, v0+Vl)? Then its row of the shard's table is token - v0. */
static bool
in_shard (int token, int v0, int Vl)
{
  return token >= v0 && token - v0 < Vl;
}

void
mpk_cpu_embedding_forward (float *out, const int *tokens, const float *wte, const float *wpe,
                           int N, int T, int C, int v0, int Vl)
{
  for (int n = 0; n < N; n++)
    {
      float *o = out + (size_t) n * C; /* (C) */
      const float *e = in_shard (tokens[n], v0, Vl) ? wte + (size_t) (tokens[n] - v0) * C
                                                     : NULL;
      const float *p = wpe != NULL ? wpe + (size_t) (n % T) * C : NULL;
      for (int c = 0; c < C; c++)
        o[c] = (e != NULL ? e[c] : 0.0f) + (p != NULL ? p[c] : 0.0f);
    }
}

void
mpk_cpu_embedding_backward (float *dwte, float *dwpe, const float *dout, const int *tokens,
                            int N, int T, int C, int v0, int Vl)
{
  for (int n = 0; n < N; n++)
    {
      const float *d = dout + (size_t) n * C; /* (C) */
      if (in_shard (tokens[n], v0, Vl))
        {
          float *e = dwte + (size_t) (tokens[n] - v0) * C;
          for (int c = 0; c < C; c++)
            e[c] += d[c];
        }
      if (dwpe != NULL)
        {
          float *p = dwpe + (size_t) (n % T) * C;
          for (int c = 0; c < C; c++)
            p[c] += d[c];
        }
    }
}
