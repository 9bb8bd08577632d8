/* rotary.c - rotary position embedding (Su et al. 2021) applied in place to the q and k
 * heads of each row, "rotate half" pairing: element i of a head is paired with i + HD/2
 * and turned by the angle pos * theta^(-2i/HD). Backward is the inverse rotation
 * (rotations are orthogonal), also in place. */
#include "kernels/cpu/kernels.h"

#include <math.h>

/* Turns the pair (x1, x2) by the angle whose cosine is c and sine s. */
static void
rotate_pair (float *x1, float *x2, double c, double s)
{
  double a = *x1, b = *x2;
  *x1 = (float) (a * c - b * s);
  *x2 = (float) (b * c + a * s);
}

/* sign = +1 rotates, -1 rotates back. The angle depends on (position, pair) only, so it
 * is computed once (in double: positions in the thousands lose float precision) and
 * applied to every sequence and head. */
static void
rotary_apply (float *x, int B, int T, int NHR, int HD, int ld, int pos0, float theta,
              double sign)
{
  int half = HD / 2;
  for (int t = 0; t < T; t++)
    for (int i = 0; i < half; i++)
      {
        double angle = (double) (pos0 + t) * pow ((double) theta, -2.0 * i / HD);
        double c = cos (angle), s = sign * sin (angle);
        for (int b = 0; b < B; b++)
          {
            float *row = x + ((size_t) b * T + t) * ld; /* (NHR, HD) */
            for (int h = 0; h < NHR; h++)
              rotate_pair (row + (size_t) h * HD + i, row + (size_t) h * HD + i + half, c, s);
          }
      }
}

void
mpk_cpu_rotary_forward (float *x, int B, int T, int NHR, int HD, int ld, int pos0,
                        float theta)
{
  rotary_apply (x, B, T, NHR, HD, ld, pos0, theta, 1.0);
}

void
mpk_cpu_rotary_backward (float *dx, int B, int T, int NHR, int HD, int ld, int pos0,
                         float theta)
{
  rotary_apply (dx, B, T, NHR, HD, ld, pos0, theta, -1.0);
}
