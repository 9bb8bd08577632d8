/* accuracy.h - published measured training runs (bench/data/published-runs.yaml) and
 * mpplan's prediction of each, pinned to the published plan: what bench/bench-accuracy
 * prints and tests/test-accuracy checks loads.
 *
 * A run names a model (a zoo name, or a file of the runs file's models/ folder) trained at
 * its own seq_len (mp_model_set_seq_len) and, for an MoE model, the run's `routing:`
 * (MpRouting: blocked where the benchmark fakes a balanced gate), a cluster (a zoo name, or a file of its
 * clusters/ folder: the machine the source ran on where the zoo has none) holding `gpus`
 * devices ("CLUSTER:<gpus>g"), the global batch and the plan keys the source states (pinned with
 * `--fix` semantics; fp8 and mxfp8 precision pin fp8=true). Its measured figure is tokens/s
 * per GPU, or where the source gives none its TFLOP/s per GPU or its MFU; the prediction is
 * compared on the same figure. The run's stack, where it is one mpplan knows
 * (mp_stack_from_name), is pinned too. Not a test of timing: figures from public tables are noisy,
 * the unit tests pin the mechanisms. */
#pragma once
#include <glib.h>
#include "model/model.h"
#include "topology/topology.h"
#include "planner/planner.h"

G_BEGIN_DECLS

typedef struct {
  char *id, *source, *family, *stack, *model, *cluster, *precision;
  guint64 seq_len, gpus, global_batch;
  MpRouting routing;           /* the MoE model's routing (`routing:`, default spread) */
  char *pins;                  /* the plan as --fix text, fp8=true added for fp8 precisions */
  /* measured; 0 where the source does not give it */
  double tokens_per_s_per_gpu, tflops_per_gpu, mfu, step_s, memory_gib;
  guint line;                  /* of the run in the file */
} AccRun;

typedef struct {
  char *path;                  /* the runs file */
  char *models_dir;            /* its models/ folder */
  char *clusters_dir;          /* its clusters/ folder */
  GPtrArray *runs;             /* AccRun* */
} AccRuns;

/* Which figure a run is compared on: its tokens/s per GPU, else TFLOP/s per GPU (the
 * model FLOPs of the plan's `tflops_per_gpu`), else MFU. */
typedef enum { ACC_TOKENS, ACC_TFLOPS, ACC_MFU } AccMetric;

typedef struct {
  gboolean planned;            /* FALSE: REASON says why */
  gboolean over_memory;        /* planned, but only on devices with room to spare: the
                                * pinned plan does not fit the real ones (REASON), and
                                * is timed as it would run there */
  char *reason;
  AccMetric metric;
  double measured, predicted;  /* the metric's value */
  double error;                /* of the step time: predicted / measured - 1, i.e. measured
                                * rate / predicted rate - 1 (negative: predicted too
                                * fast, the sign) */
  double pred_tokens_per_gpu, pred_mfu, pred_step_s, pred_memory_gib;
  char *plan;                  /* the predicted plan's summary line */
  /* The predicted plan's memory; for a run that does not fit, that of the best plan
   * honouring the pins on devices with room to spare, so that the terms that
   * overflow can be read (mem_known: either was found). */
  gboolean mem_known;
  MpPlanMemory mem;
  /* An MoE model's plan (0 otherwise): the MoE layers a stage's rank runs per step (its
   * layers / pp, once per micro-batch), its local experts and a micro-batch's tokens. */
  double moe_layer_passes, local_experts, micro_tokens;
} AccResult;

/* Loads the runs file PATH (libyaml through common/yamldoc; every problem as
 * FILE:LINE:COL). Caller owns (acc_runs_free). */
AccRuns *acc_runs_load (const char *path, GError **error);
void acc_runs_free (AccRuns *runs);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (AccRuns, acc_runs_free)

/* RUN's model at its seq_len, and its cluster (a file of the runs file's clusters/
 * folder, or a zoo name) with RUN's gpus. Caller owns; NULL with ERROR. */
MpModel *acc_run_model (const AccRuns *runs, const AccRun *run, GError **error);
MpCluster *acc_run_cluster (const AccRuns *runs, const AccRun *run, GError **error);
/* Plans RUN with its pins (the best plan honouring them) into *OUT (acc_result_clear
 * frees it). FALSE with ERROR only when the model or cluster does not load; a run that
 * does not plan is *OUT with planned FALSE and the reason, one whose pinned plan fits
 * only on roomier devices is planned there with over_memory (its time is the stated
 * configuration's; that mpplan thinks it overflows is a memory error of its own). */
gboolean acc_run_predict (const AccRuns *runs, const AccRun *run, AccResult *out,
                          GError **error);
void acc_result_clear (AccResult *res);
const char *acc_metric_name (AccMetric metric);

G_END_DECLS
