/* test-util.h - what every cmocka test program shares. Include after <cmocka.h>'s
 * prerequisites: this header pulls them in itself, in the order cmocka 1.1.5 needs. */
#pragma once
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>

/* Asserts |a - b| <= rtol * max(|a|, |b|) (or both zero), printing both on failure. */
#define mp_assert_close(a, b, rtol)                                                          \
  do                                                                                         \
    {                                                                                        \
      double a_ = (double) (a), b_ = (double) (b), r_ = (double) (rtol);                     \
      double scale_ = fmax (fabs (a_), fabs (b_));                                           \
      if (!(fabs (a_ - b_) <= r_ * scale_))                                                  \
        fail_msg ("%s = %.9g vs %s = %.9g (rel. diff %.3g > %.3g)", #a, a_, #b, b_,          \
                  scale_ > 0 ? fabs (a_ - b_) / scale_ : 0.0, r_);                            \
    }                                                                                        \
  while (0)
