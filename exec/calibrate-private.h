/* calibrate-private.h - what the files of `mpplan calibrate` share (private to exec/):
 * one run's state, what a backend brings to the sweeps (CalDevice), the helpers every
 * timing loop uses, and the measurements of each file:
 *   calibrate.c          the backends' tables, memory bandwidth, the passes, the profile;
 *   calibrate-gemm.c     the GEMM grid (powers of two and the zoo's dimensions);
 *   calibrate-kernels.c  the executor's reference kernels (host);
 *   calibrate-coll.c     the collective sweep, printed as nccl-tests prints it.
 * Every exchange between ranks goes through the backend (MpBackendOps). */
#pragma once
#include <stdio.h>
#include "exec/exec.h"
#include "exec/backend.h"
#include "costmodel/costmodel.h"

G_BEGIN_DECLS

typedef struct Cal Cal;

/* What one backend brings to the shared sweeps. */
typedef struct {
  const char *name;                      /* --backend */
  const char *default_device;            /* the profile's device; NULL: ask the backend */
  /* GEMM: the dtypes measured, the grid's power-of-two range (the step is 4 when quick),
   * the zoo models whose shapes join it, and FLOP per shape that set the repetitions. */
  const MpDtype *dtypes;
  guint n_dtypes;
  double gemm_lo, gemm_hi, gemm_hi_quick, gemm_flops, gemm_flops_quick;
  const char *const *zoo;
  const char *gemm_how;
  /* Passes over the GEMM grid and the kernels, each measurement's median kept. */
  int passes, passes_quick;
  /* Bytes read + written per second, and what was run (for the printed line). */
  gboolean (*memory) (Cal *c, double *bytes_per_s, char **how, GError **error);
  /* Collectives: the call each kind makes (the table's title), the largest message, the
   * bytes moved per row and the iterations that bound a row's repetitions. */
  const char *calls[MP_COLL_N];
  gsize coll_max, coll_max_quick, coll_budget, coll_budget_quick;
  int coll_iters, coll_iters_quick;
  gboolean host_memory;                  /* the backend's buffers are host memory */
  /* The executor's reference kernels (kernels/cpu) are measured too. */
  gboolean reference_kernels;
} CalDevice;

struct Cal {
  int rank, size;
  gboolean quick;
  int passes;               /* GEMM grid and kernel passes, the median of them kept */
  FILE *out;                /* rank 0 only; NULL elsewhere */
  MpCostProfile *profile;
  const CalDevice *dev;
  MpBackend *be;
  MpGroup *group;           /* every rank (with 2 or more), for the collectives */
};

/* ---- helpers (calibrate.c) ---- */
double cal_now_s (void);                 /* CLOCK_MONOTONIC, seconds */
/* Measured values keep 4 significant digits: the noise is larger, and the file reads. */
double cal_round4 (double v);
gboolean cal_barrier (Cal *c, GError **error);
/* *X becomes the largest *X over the ranks. */
gboolean cal_max_over_ranks (Cal *c, double *x, GError **error);
/* A backend buffer of N floats (zeroed), or NULL with ERROR set. */
float *cal_dev_floats (Cal *c, gsize n, GError **error);
/* The median of X[N] (sorted in place), its relative spread appended to SPREADS. */
double cal_median (double *x, guint n, GArray *spreads);
/* Records the median of SPREADS as KIND's spread (REPEATS each) and prints it, warning when
 * it is large. */
void cal_record_spread (Cal *c, MpSpreadKind kind, guint repeats, GArray *spreads);
/* Inserts V into the sorted set AXIS (doubles) if it is whole and lies in [LO, HI]. */
void cal_axis_add (GArray *axis, double v, double lo, double hi);

/* ---- the GEMM grid (calibrate-gemm.c) ---- */
/* Its axes (M, and N = K), the operands (the largest shapes') and each measured dtype's
 * rate per cell in each pass so far ([cell * passes + pass]). */
typedef struct {
  GArray *m, *nk;
  float *a, *w, *out;
  double *rate[MP_DTYPE_N];
  int done;                 /* passes run */
} CalGemmGrid;

gboolean cal_gemm_grid_init (Cal *c, CalGemmGrid *g, GError **error);
void cal_gemm_grid_clear (Cal *c, CalGemmGrid *g);
/* Times every cell once more for each dtype. */
gboolean cal_gemm_grid_pass (Cal *c, CalGemmGrid *g, GError **error);
/* A fixed GEMM (512^3, or the grid's largest below it): its rate into *PROBE. */
gboolean cal_gemm_probe (Cal *c, CalGemmGrid *g, double *probe, GError **error);
/* Each cell's median rate over the passes into the profile, with the spread of the passes
 * (MP_SPREAD_GEMM); each dtype's summary printed. */
gboolean cal_gemm_grid_finish (Cal *c, CalGemmGrid *g, GError **error);
/* Host: the rate a GEMM's cold weight streams in at, into the profile. */
gboolean cal_gemm_cold_weight (Cal *c, GError **error);

/* ---- the reference kernels (calibrate-kernels.c) ---- */
/* The jobs for the transformers among ZOO (loaded into MODELS, which owns them). */
GArray *cal_kjobs_new (const char *const *zoo, GPtrArray *models);
gboolean cal_kjobs_pass (Cal *c, GArray *jobs, GError **error);   /* each once more */
gboolean cal_kjobs_finish (Cal *c, GArray *jobs, GError **error); /* rates to the profile */

/* ---- the collectives (calibrate-coll.c) ---- */
/* Every collective swept, checked and (when the ranks span one tier) recorded; *ALL_RIGHT
 * FALSE when any returned a wrong element. */
gboolean cal_measure_collectives (Cal *c, gboolean *all_right, GError **error);

G_END_DECLS
