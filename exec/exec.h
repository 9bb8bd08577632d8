/* exec.h - running things on many processes: the MPI world (and, in later issues, the
 * backends that execute plans). The only module besides kernels/ that knows MPI exists;
 * no MPI type appears in this header.
 *
 * Processes are started the way HPC users start them, `mpirun -np N mpplan ...`; a
 * process started without mpirun is a world of one and never touches MPI. */
#pragma once
#include <glib.h>
#include "planner/planner.h"
#include <stdio.h>

G_BEGIN_DECLS

typedef struct _MpWorld MpWorld;

/* Joins the MPI world when this process was started by mpirun (MPI_Init), else makes a
 * world of one. Caller owns; NULL with MP_ERROR_RUNTIME if MPI fails to start. */
MpWorld *mp_world_join (int *argc, char ***argv, GError **error);
/* Leaves the world (MPI_Finalize when it was joined). NULL-safe. */
void mp_world_leave (MpWorld *world);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpWorld, mp_world_leave)

int mp_world_rank (const MpWorld *world);
int mp_world_size (const MpWorld *world);

/* Gathers every rank's MINE at rank 0. On rank 0 returns a new array of the world's
 * GBytes in rank order (caller owns); on other ranks an empty array. NULL with
 * MP_ERROR_RUNTIME on an MPI failure. Collective: every rank must call it. */
GPtrArray *mp_world_gather (MpWorld *world, GBytes *mine, GError **error);

/* ---- calibration (calibrate.c) ---- */

typedef struct {
  const char *backend;     /* "host" (NULL) or "cuda" (one GPU per rank) */
  gboolean quick;          /* smaller GEMM grid and messages: under a minute */
  const char *device;      /* the device name the profile applies to; NULL: "cpu-core"
                            * for host, the GPU's name (cudaGetDeviceProperties) for cuda */
  FILE *out;               /* where rank 0 prints the tables (nccl-tests format) */
} MpCalibrateOptions;

/* Measures this machine with every rank of WORLD at once through OPTS's backend: GEMM
 * rates on a grid (host: fp32, OpenBLAS, one thread per rank; cuda: bf16 and fp32 through
 * cuBLAS), memory bandwidth, and with 2 ranks or more every collective and send/recv (MPI
 * or NCCL), checking their results. Returns the profile on every rank (caller owns; rank 0
 * writes it), or NULL with MP_ERROR_RUNTIME when MPI, CUDA or NCCL fails, a collective
 * returns a wrong result, or the backend cannot open (the message starts "no CUDA device"
 * without a GPU or a CUDA build). Collective: every rank must call it. */
struct _MpCostProfile;
struct _MpCostProfile *mp_calibrate (MpWorld *world, const MpCalibrateOptions *opts,
                                     GError **error);

/* ---- running a plan (driver.c; backends in backend.h) ----------------------------- */

typedef struct {
  guint steps;             /* measured steps */
  guint warmup;            /* steps run first and left out of the timings */
  guint64 seed;            /* weights and data */
  gboolean check;          /* compare loss and gradient norm with one rank, every step */
  const char *output_path; /* measured.json, or NULL */
  const char *trace_path;  /* Chrome trace, or NULL */
  const char *backend;     /* "host" (NULL), "cuda", "cuda-fp32": see mp_backend_new */
} MpExecOptions;

/* Runs RESOLVED's plan on WORLD (every rank calls it): the host backend, seeded synthetic
 * data, the plan's programs, then the figures written by rank 0. FALSE with MP_ERROR_INPUT
 * (the same on every rank: a world of the wrong size, a model or form not supported) or
 * MP_ERROR_RUNTIME (--check mismatch; also the message of a failure after the run began,
 * which has already ended the job with MPI_Abort when the world has several ranks). */
gboolean mp_exec_plan (MpWorld *world, const MpPlanResolved *resolved,
                       const MpExecOptions *opts, GError **error);

G_END_DECLS
