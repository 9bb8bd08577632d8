/* exec.h - running things on many processes: the MPI world, calibration, and running a
 * plan, which returns what it measured as plain data (cli/ prints it and writes
 * measured.json, report/ draws the trace). The only module besides kernels/ that knows
 * MPI exists; no MPI type appears in this header (nor in backend.h, the backends).
 *
 * Processes are started the way HPC users start them, `mpirun -np N mpplan ...`; a
 * process started without mpirun is a world of one and never touches MPI. */
#pragma once
#include <glib.h>
#include "planner/planner.h"
#include "exec/backend.h"
#include <stdio.h>

G_BEGIN_DECLS

typedef struct _MpWorld MpWorld;

/* Joins the MPI world when this process was started by mpirun (MPI_Init), else makes a
 * world of one. Caller owns; NULL with MP_ERROR_RUNTIME if MPI fails to start. */
MpWorld *mp_world_join (int *argc, char ***argv, GError **error);
/* mp_world_join for a job whose ranks exchange a few kB (plan): the lightest messaging
 * layer, unless the user chose one; no MPI at all for a launch of one process. The
 * caller may run threads, which make no MPI call, while MPI starts and stops (FUNNELED). */
MpWorld *mp_world_join_light (int *argc, char ***argv, GError **error);
/* The rank and size the launcher exported to this process (Open MPI's mpirun, MPICH's
 * Hydra, Slurm's srun), for work in a thread beside mp_world_join_light's MPI_Init; FALSE
 * when it did not say, or when the user chose Open MPI's memory component (its patcher
 * rewrites code that such a thread may run). */
gboolean mp_world_early_rank (int *rank, int *size);
/* Leaves the world (MPI_Finalize when it was joined). NULL-safe. */
void mp_world_leave (MpWorld *world);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpWorld, mp_world_leave)

int mp_world_rank (const MpWorld *world);
int mp_world_size (const MpWorld *world);

/* Gathers every rank's MINE at rank 0. On rank 0 returns a new array of the world's
 * GBytes in rank order (caller owns); on other ranks an empty array. NULL with
 * MP_ERROR_RUNTIME on an MPI failure. Collective: every rank must call it. */
GPtrArray *mp_world_gather (MpWorld *world, GBytes *mine, GError **error);

/* What a rank's worker thread is at, for mp_world_share_least. */
typedef enum { MP_SHARE_WORKING, MP_SHARE_DONE, MP_SHARE_FAILED } MpShareState;

/* Passes N doubles between the ranks while each works in a thread: READ (called about
 * every millisecond) gives this rank's and its state, the values sent whenever they
 * change; TAKE gets the least of every other rank's so far, element by element, and STOP
 * once some rank's thread has failed (this one's should then end soon). Returns once
 * every rank is done or failed. FALSE with MP_ERROR_RUNTIME on an MPI failure.
 * Collective: every rank must call it. */
gboolean mp_world_share_least (MpWorld *world, guint n,
                               MpShareState (*read) (double *mine, gpointer data),
                               void (*take) (const double *least, gboolean stop,
                                             gpointer data),
                               gpointer data, GError **error);

/* Agreement at the end of a rank's work: every rank's exit STATUS (0: success) gives the
 * worst of them in *WORST and the lowest rank that failed in *FIRST (-1: none), so that
 * every rank stops alike and one prints the reason. FALSE with MP_ERROR_RUNTIME on an
 * MPI failure. Collective: every rank must call it. */
gboolean mp_world_agree (MpWorld *world, int status, int *worst, int *first, GError **error);

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
 * without a GPU or a CUDA build; MP_ERROR_IO "CUDA backend not available" without the
 * cuda module). Collective: every rank must call it. */
struct _MpCostProfile;
struct _MpCostProfile *mp_calibrate (MpWorld *world, const MpCalibrateOptions *opts,
                                     GError **error);

/* ---- what the executor runs (limits.c) ---------------------------------------------- */

/* Whether this executor runs MODEL under CFG, as every rank of mp_exec_plan decides it
 * before the run (no world or backend needed: exec --dry-run): FALSE with MP_ERROR_INPUT
 * naming the form it does not run, or the shape rule the plan breaks. */
gboolean mp_exec_check_plan (const MpModel *model, const MpParallelConfig *cfg,
                             GError **error);
/* --help's paragraph: every form mp_exec_check_plan refuses by name, in its words, and
 * what runs otherwise than the plan says. Caller owns. */
char *mp_exec_limits_text (void);

/* ---- running a plan (driver.c; backends in backend.h) ----------------------------- */

typedef struct {
  guint steps;             /* measured steps */
  guint warmup;            /* steps run first and left out of the timings */
  guint64 seed;            /* weights and data */
  gboolean check;          /* compare loss and gradient norm with one rank, every step */
  const char *backend;     /* "host" (NULL), "cuda", "cuda-fp32": see mp_backend_new */
  double timeout_s;        /* the stall watchdog: most seconds a rank may spend in one
                            * instruction; 0: no watchdog; < 0: mp_exec_default_timeout */
} MpExecOptions;

/* The watchdog's default timeout for PLAN: a generous multiple of its predicted step, with
 * a floor for tiny plans on slow or loaded hosts (driver.c says how much). */
double mp_exec_default_timeout (const MpPlan *plan);

/* One rank's step: its wall time and its phases (program.h; they add up to step_s;
 * measure.c splits each instruction's time into them). */
typedef struct {
  double step_s;
  MpStepTime time;
} MpRankStep;

/* The median, smallest and largest of one set of samples (all 0 for none). */
typedef struct {
  double median, min, max;
} MpSpread;

/* What measured.json reports: each figure's spread over the same measured steps. */
typedef struct {
  guint time_rank;             /* the rank the parts are of: the most compute (median) */
  MpSpread step;               /* the job's steps: in each, the slowest rank's */
  MpSpread t[MP_PHASE_N];      /* time_rank's parts of each job step */
} MpJobSummary;

/* One measured rank: plain data, gathered at rank 0. */
typedef struct {
  MpProgram *prog;         /* its program (owned): coordinates and instructions */
  MpRankStep *steps;     /* each measured step's parts on this rank */
  MpInsnTime *times;       /* per instruction of PROG in the last measured step */
  double last_start;       /* that step's start on the rank's clock */
  MpMemStats mem;          /* its allocations, at their peak */
} MpExecRank;

/* One step of --check: the parallel run against one rank, relative differences. */
typedef struct {
  double loss, ref_loss, rel_loss;
  double grad_norm, ref_grad_norm, rel_grad_norm;
  gboolean mismatch;       /* either relative difference above the tolerance */
} MpExecCheckStep;

/* What a run measured. Every rank has the losses and the check verdict; rank 0 also every
 * rank's figures, the job's summary and (with --check) the step-by-step comparison. */
typedef struct {
  char *backend;           /* "host", "cuda", "cuda-fp32" */
  guint steps, warmup;
  double *loss;            /* warmup + steps: the step loss (mean over the global batch) */
  double *grad_norm;       /* warmup + steps: the global gradient norm */
  MpExecRank *ranks;       /* rank 0: n_ranks in rank order; elsewhere NULL, 0 */
  guint n_ranks;
  MpRankStep *job;       /* rank 0, steps: the job's step s, the slowest rank's */
  MpJobSummary summary;    /* rank 0: the spreads of JOB */
  guint mem_rank;          /* rank 0: the rank with the highest peak memory */
  gboolean checked;        /* --check ran */
  double check_rtol;       /* its relative tolerance (depends on the backend) */
  MpExecCheckStep *check;  /* rank 0, warmup + steps */
  gboolean check_ok;       /* every step within the tolerance (every rank) */
  /* MoE: (token, expert) choices the routers made over the run, warm-up included, and
   * those dropped over an expert's capacity (every rank: the job's sums) */
  double moe_choices, moe_dropped;
} MpExecResult;

void mp_exec_result_free (MpExecResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpExecResult, mp_exec_result_free)

/* Runs RESOLVED's plan on WORLD (every rank calls it): the backend, seeded synthetic data,
 * the plan's programs, the figures gathered at rank 0; with OPTS->check rank 0 then runs
 * the same model, seed and data alone (one rank on the host backend, the same
 * micro-batches accumulated) and compares every step. Caller owns the result, also when
 * the check found a mismatch (mp_exec_result_check says so). NULL with MP_ERROR_INPUT (the
 * same on every rank: a world of the wrong size, a model or form not supported) or
 * MP_ERROR_RUNTIME (the message of a failure after the run began, which has already ended
 * the job with MPI_Abort when the world has several ranks). */
MpExecResult *mp_exec_plan (MpWorld *world, const MpPlanResolved *resolved,
                            const MpExecOptions *opts, GError **error);
/* FALSE with MP_ERROR_RUNTIME when RESULT's --check found a step off by more than its
 * tolerance (the same on every rank). */
gboolean mp_exec_result_check (const MpExecResult *result, GError **error);
/* measured.json of rank 0's RESULT (the planner's keys: step_s, time_s, memory_bytes, with
 * their spreads and per-rank figures; PLAN_JSON copied in when not NULL). Caller owns. */
JsonNode *mp_exec_result_to_json (const MpExecResult *result, JsonNode *plan_json);

/* ---- one rank's share of a plan, stepped by hand (driver.c) ----------------------------
 * What mp_exec_plan runs on each rank, for tools that time the executor from inside
 * (bench/bench-exec.c wraps the backend's kernel table): the model state of rank
 * BE->rank under PLAN (its model, cost context and cluster from RESOLVED), its program
 * and the interpreter. BE, RESOLVED and PLAN are borrowed and must outlive it; BE's
 * memory limit becomes the cluster's smallest device memory. */
typedef struct _MpExecSession MpExecSession;

MpExecSession *mp_exec_session_new (MpBackend *be, const MpPlanResolved *resolved,
                                    const MpPlan *plan, guint64 seed, GError **error);
void mp_exec_session_free (MpExecSession *session);   /* NULL-safe; BE stays */
/* One training step; *T_START, *T_END on the backend's clock. */
gboolean mp_exec_session_step (MpExecSession *session, guint step, double *t_start,
                               double *t_end, GError **error);
const MpProgram *mp_exec_session_program (const MpExecSession *session);
/* Per instruction of the program, the last step's record. */
const MpInsnTime *mp_exec_session_times (const MpExecSession *session);

G_END_DECLS
