/* profile-private.h - the calibration profile's tables, shared by profile.c (setters and
 * interpolation) and profile-yaml.c (file format); nobody else sees them.
 *
 * Each table keeps the values it was given as well as their logarithms: interpolation
 * reads the logs, the YAML writer the given values, so a file round-trips exactly. */
#pragma once
#include "costmodel/costmodel.h"

G_BEGIN_DECLS

typedef struct {
  double *axis[3];      /* M, N, K, each strictly increasing */
  guint len[3];
  double *flops;        /* achieved FLOP/s, [(i * len[1] + j) * len[2] + l] */
  double *log_flops;    /* log of the same */
} CmGemmTable;

typedef struct {
  guint n_ranks;
  double *size, *busbw; /* nccl-tests size (bytes) and busbw (bytes/s), count each */
  double *log_size, *log_busbw;
  guint count;
} CmCollTable;

typedef struct {
  guint n;
  double *seq;          /* key lengths, strictly increasing; NULL: one rate (n == 1) */
  double *flops[2];     /* forward, backward FLOP/s at each */
} CmAttnTable;

struct _MpCostProfile {
  char *device;
  MpProfileMachine machine;
  CmGemmTable gemm[MP_DTYPE_N];
  double mem_bw_Bps;
  double cold_weight_Bps;           /* a GEMM's cold weight streamed in; 0: not measured */
  CmAttnTable attn;                 /* n == 0: not measured */
  double optim_params[2];           /* Adam, SGD parameters/s; 0: not measured */
  double ew_Bps[MP_EW_N][2];        /* per class, forward, backward; 0: not measured */
  CmCollTable coll[MP_COLL_N][MP_TIER_N];
  double spread[MP_SPREAD_N];       /* relative IQR; -1: not recorded */
  guint spread_repeats[MP_SPREAD_N];
};

G_END_DECLS
