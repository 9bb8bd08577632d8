/* planner.h - plans: how a training step is split over a cluster, what it is predicted
 * to cost, and the search that finds the best ones.
 *
 * A plan is an MpParallelConfig (program/program.h: dp, tp, pp, vpp, cp, ep, sequence parallel,
 * ZeRO stage, recompute, micro-batching, schedule, layer split, rank order) plus the
 * predictions the closed form gives it. The search enumerates every config the model and
 * cluster allow, drops those that do not fit in device memory, ranks the rest by predicted
 * step time and explains the winner. Not here: kernels, MPI (the CLI spreads a search over
 * MPI ranks through exec/), the simulator itself (costmodel/sim.c; refine.c uses it).
 * Units: seconds, bytes, FLOP, FLOP/s. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>
#include "program/program.h"
#include "costmodel/costmodel.h"

G_BEGIN_DECLS

/* The binding (fullest) stage's memory per device, broken down. */
typedef struct {
  double peak_bytes;
  double bytes[MP_MEM_N];   /* its parts by MpMemKind (program.h); MP_MEM_OTHER: transient
                             * buffers and the per-device overhead */
  double reserve[MP_RESERVE_N]; /* the runtime's part of MP_MEM_OTHER, by MpReserveKind */
  double headroom_bytes;    /* to be left free besides (--memory-headroom) */
  double capacity_bytes;
  guint binding_stage;
} MpPlanMemory;

/* Families a user knows plans by, for --explain (the best of each is reported). */
typedef enum {
  MP_FAMILY_DATA,       /* pure data parallel: DDP, Horovod, MirroredStrategy (ZeRO <= 1) */
  MP_FAMILY_FSDP,       /* data parallel with sharded gradients: ZeRO-2/3, FSDP */
  MP_FAMILY_PLACEMENT,  /* layer placement over devices, no pipelining (MXNet style) */
  MP_FAMILY_PIPELINE,   /* pipeline parallel only */
  MP_FAMILY_TENSOR,     /* tensor (or context, expert) parallel only */
  MP_FAMILY_2D,         /* two of data, tensor (context, expert), pipeline */
  MP_FAMILY_HYBRID,     /* all three */
  MP_FAMILY_N
} MpPlanFamily;

typedef struct _MpPlan MpPlan;
struct _MpPlan {
  MpParallelConfig cfg;        /* cfg.chunk_layers points at chunk_layers below */
  guint *chunk_layers;         /* model layers per chunk, pp * vpp entries (owned) */
  guint global_batch;          /* sequences per optimizer step */
  guint world_size;            /* dp * tp * pp * cp */
  /* predictions (closed form) */
  double step_s, tokens_per_s;
  double tflops_per_gpu, hw_tflops_per_gpu;  /* model FLOPs / hardware FLOPs per GPU */
  double mfu, hfu;             /* against the devices' mean dense peak at the compute dtype
                                * (bf16 even for an fp8 plan, as torchtitan reports it) */
  double mfu_fp8;              /* an fp8 plan's model FLOP/s over the fp8 peak; 0 otherwise */
  MpStepTime time;             /* the critical path's phases (compute: the bottleneck
                                * stage's kernels); they add up to step_s */
  MpPlanMemory memory;
  gboolean fits;               /* memory.peak_bytes + headroom <= capacity on every stage */
  MpPlanFamily family;
  double simulated_step_s;     /* the simulator's step (mp_planner_refine); 0: not simulated */
};

MpPlan *mp_plan_copy (const MpPlan *plan);
void mp_plan_free (MpPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpPlan, mp_plan_free)

/* Names: the dominant cost ("compute", "tp_comm", ...) and a family. */
const char *mp_plan_dominant (const MpPlan *plan);
const char *mp_plan_family_name (MpPlanFamily family);
MpPlanFamily mp_plan_family_of (const MpParallelConfig *cfg);

/* Splits the model's layers over CFG's pp * vpp chunks, balancing predicted time, each
 * stage's on its own device (a heterogeneous cluster's faster stages take more): the
 * embedding on the first chunk, the head (output layer and loss) on the last, blocks
 * contiguous. Writes pp * vpp counts to CHUNK_LAYERS. FALSE when there are fewer blocks
 * than chunks. */
gboolean mp_plan_split_layers (const MpCostContext *ctx, const MpParallelConfig *cfg,
                               guint *chunk_layers);

/* Predicts CFG (checked with mp_parallel_config_check) for GLOBAL_BATCH sequences: fills
 * every prediction of *PLAN (which takes a copy of CFG; chunk_layers is copied, or
 * computed with mp_plan_split_layers when CFG has none). FALSE with MP_ERROR_INPUT when
 * CFG is not a valid plan for the context's model and cluster. */
gboolean mp_plan_evaluate (const MpCostContext *ctx, const MpParallelConfig *cfg,
                           guint global_batch, MpPlan *plan, GError **error);

/* ---- the search ---------------------------------------------------------------------- */

/* Pins: "key=value" per JSON plan key (dp, tp, pp, vpp, cp, ep, sequence_parallel, zero,
 * recompute, recompute_method, recompute_num_layers, recompute_modules, micro_batch_size,
 * num_micro_batches, schedule, fp8, etp, dispatcher, stack, zero_shard,
 * reshard_after_forward, moe_a2a_overlap, compile, cp_comm_type) and the layer split's
 * (first_stage_layers, last_stage_layers, account_for_embedding, account_for_loss,
 * layers_per_chunk). */
typedef struct _MpPlanPins MpPlanPins;
/* Parses "tp=8,pp=8,recompute=full"; NULL with MP_ERROR_USAGE naming a bad key or value.
 * Caller owns. */
MpPlanPins *mp_plan_pins_parse (const char *text, GError **error);
void mp_plan_pins_free (MpPlanPins *pins);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpPlanPins, mp_plan_pins_free)
/* Does PINS (may be NULL) pin KEY (a JSON plan key)? Its value as stored into *VALUE (may
 * be NULL): sizes as numbers, booleans 0/1, enums as their MpRecompute/MpSchedule/... */
gboolean mp_plan_pins_get (const MpPlanPins *pins, const char *key, guint *value);
/* Does CFG honour every pin but the layer split's? (NULL pins: yes.) */
gboolean mp_plan_pins_match (const MpPlanPins *pins, const MpParallelConfig *cfg);
/* The pinned layer split of MODEL: model layers per chunk (*N_CHUNKS = pp x vpp of them)
 * from layers_per_chunk, or from Megatron-LM's flags first_stage_layers /
 * last_stage_layers (--decoder-first/last-pipeline-num-layers: blocks on the first / last
 * pipeline rank; the others share the rest evenly) or account_for_embedding /
 * account_for_loss (--account-for-*-in-pipeline-split: the embedding / loss counts as a
 * block), by Megatron's rules (every stage's blocks divisible by vpp, ...). Caller owns.
 * NULL without ERROR when no split is pinned; NULL with MP_ERROR_USAGE naming the rule
 * broken. */
guint *mp_plan_pins_split (const MpPlanPins *pins, const MpModel *model, guint *n_chunks,
                           GError **error);

/* Cutoffs the shards of one search share while they run (cli/cmd-plan.c passes them
 * between MPI ranks): each shard's best-so-far step times (the K-th best, each family's
 * best, the best without the pins; G_MAXDOUBLE: none yet) and 0 once a plan is kept
 * (else G_MAXDOUBLE), in MINE; the least of the other shards' in OTHERS. They come from
 * plans their shards keep, so pruning by them drops nothing the merge would keep. STOP
 * (set when another shard failed): the search skips what it has not begun, and its
 * result is partial, for the caller to discard. */
#define MP_SEARCH_SHARE_N (MP_FAMILY_N + 3)
typedef struct {
  GMutex lock;
  double mine[MP_SEARCH_SHARE_N], others[MP_SEARCH_SHARE_N];
  gboolean stop;
} MpSearchShare;

typedef struct {
  guint global_batch;          /* 0: the model's training.global_batch */
  guint top_k;                 /* plans kept, best first (default 5) */
  const MpPlanPins *pins;      /* NULL: none */
  guint shard, n_shards;       /* this process costs the configs of its share of the
                                * layer-cost choices (tp, cp, sp, recompute, pp,
                                * micro-batch, experts' grid), dealt in the order
                                * met alike on every process (MPI split); 0/0 or
                                * 0/1: all */
  MpSearchShare *share;        /* NULL, or where the shards share cutoffs */
  /* Constraints beyond pins (what a framework can express, planner/framework.c): a config
   * is only considered when ACCEPT (may be NULL) returns TRUE for it. */
  gboolean (*accept) (const MpParallelConfig *cfg, gpointer data);
  gpointer accept_data;
  double bucket_bytes;         /* every config's gradient bucket (0: the cost model's
                                * default, PyTorch DDP's 25 MiB) */
  MpStack stack;               /* every config's training stack unless a pin sets it
                                * (zeroed: megatron); the search never varies it */
  /* Called now and then with the configs enumerated so far and the total; may be NULL. */
  void (*progress) (guint64 done, guint64 total, gpointer data);
  gpointer progress_data;
  gboolean no_bounds;          /* cost every config fully (the brute force the bounds are
                                * tested against); FALSE: prune by lower bounds */
  gboolean limited_space;      /* the smaller space of earlier releases (vpp <= 8 dividing a
                                * stage's blocks, cp powers of two with >= 4096 tokens a
                                * rank, mp_planner_max_micro_batch), for the tests whose
                                * exhaustive searches of 8-16 GPUs the whole space would
                                * make slow; FALSE (the default): the whole space, every
                                * vpp the blocks allow (uneven chunks too), every cp that
                                * splits the sequence, every micro-batch up to a
                                * replica's share */
} MpSearchOptions;

/* Every config in the space is costed for memory; one that fits is then timed, unless a
 * lower bound on its step time shows that it can be neither among the best K, nor its
 * family's best, nor the best without the pins (pruned). space = evaluated + pruned on
 * one process; with shards, space is the whole space's and the others sum. */
typedef struct {
  guint64 space;               /* valid configs in the space (honouring ACCEPT) */
  guint64 evaluated;           /* fully costed: memory, and time when it fits */
  guint64 pruned;              /* fitting, but discarded by a bound on the step time */
  guint64 feasible;            /* fitting in memory (evaluated or pruned) */
  double seconds;              /* wall time of the search */
  /* the smallest-footprint config (for "nothing fits" advice): kept only while no plan
   * fits, so NULL when PLANS is not empty (or when no config was valid); owned */
  MpPlan *smallest;
  /* of each family, among the plans some framework runs (mp_framework_runners): */
  MpPlan *family_best[MP_FAMILY_N]; /* best feasible plan (may be NULL) */
  MpPlan *family_smallest[MP_FAMILY_N]; /* smallest-footprint plan, only while the family
                                         * has no best: NULL when family_best is set */
  MpPlan *free_best;           /* with pins: the best plan ignoring them */
} MpSearchStats;

typedef struct {
  GPtrArray *plans;            /* MpPlan*, best first, feasible and honouring pins */
  MpSearchStats stats;
} MpSearchResult;

/* Searches every plan of the context's model on its cluster. Returns a result (caller
 * owns; plans may be empty when nothing fits), or NULL with MP_ERROR_INPUT when the
 * request itself is impossible (a global batch no dp divides, pins no config honours). */
MpSearchResult *mp_planner_search (const MpCostContext *ctx, const MpSearchOptions *opts,
                                   GError **error);
void mp_search_result_free (MpSearchResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpSearchResult, mp_search_result_free)
/* The best plan honouring OPTS's pins on the context's devices given FACTOR times their
 * memory (the same model and profile, one process, no headroom): what a pinned plan that
 * does not fit would need. Its memory.capacity_bytes is the roomy devices'. Caller owns;
 * NULL with ERROR as mp_planner_search. */
MpSearchResult *mp_planner_search_roomy (const MpCostContext *ctx, const MpSearchOptions *opts,
                                         double factor, GError **error);

/* A search split over processes (MPI, through exec/): each packs its result; one merges
 * all the parts into the result a single process would have found. Pack: caller owns.
 * Merge: NULL with MP_ERROR_RUNTIME for a malformed part; SECONDS is the wall time. */
GBytes *mp_search_result_pack (const MpSearchResult *result);
MpSearchResult *mp_search_result_merge (const MpCostContext *ctx, const MpSearchOptions *opts,
                                        GPtrArray *parts, double seconds, GError **error);

/* One micro-batch through every layer of the context's model under CFG's tensor,
 * context and expert split and pipeline depth: each layer's cost (kernels, recomputation,
 * exposed collectives) on the cheapest of the stages' spans in CFG's rank order and the
 * search's, at most the stages' summed forward and backward whatever the split, schedule,
 * ZeRO stage and order. -1 (no floor) on a cluster of several device types. */
double mp_planner_kernel_floor (const MpCostContext *ctx, const MpParallelConfig *cfg);
/* A lower bound on the closed form's step time of CFG (its schedule, pp, vpp, split and
 * micro-batches) for MODEL when FLOOR_S is at most the summed kernel time of one
 * micro-batch through every layer; 0 (none) when FLOOR_S <= 0. The search prunes by
 * it. */
double mp_planner_step_bound (const MpModel *model, const MpParallelConfig *cfg,
                              double floor_s);

/* The largest micro-batch (sequences) the search tries for MODEL. */
guint mp_planner_max_micro_batch (const MpModel *model);

/* A total order on plans: faster first, then a fixed order of the config's fields, so
 * the same inputs rank the same whatever the enumeration or sharding. */
int mp_plan_compare (const MpPlan *a, const MpPlan *b);

/* ---- simulation (refine.c) ----------------------------------------------------------- */

/* Simulates one step of PLAN: the stage programs of one data-parallel replica
 * (mp_program_build_stages) timed by the discrete-event simulator (costmodel.h) with the
 * cost model. OPTS may be NULL (cost-model durations, no slices). With PROGRAMS, *PROGRAMS
 * gets the programs (caller owns: mp_program_stages_free) and *N_PROGRAMS their count.
 * Caller owns the result; NULL with MP_ERROR_INPUT when the programs cannot run (a
 * deadlock) or would be too large (mp_plan_check_program_size). */
/* The most micro-batch steps (pp x vpp x num_micro_batches) a plan may have to be built
 * into programs, simulated or run: memory and time grow with them (a pp 2, vpp 2 plan of
 * 2^20 micro-batches is 25M instructions, 3.3 GB and 29 s to simulate, measured with
 * `/usr/bin/time mpplan simulate`), and a real step has a few thousand. */
#define MP_PLAN_MAX_MICRO_STEPS (1u << 20)
/* FALSE with MP_ERROR_INPUT saying so when CFG has more than MP_PLAN_MAX_MICRO_STEPS. */
gboolean mp_plan_check_program_size (const MpParallelConfig *cfg, GError **error);

MpSimResult *mp_plan_simulate (const MpCostContext *ctx, const MpPlan *plan,
                               const MpSimOptions *opts, MpProgram ***programs,
                               guint *n_programs, GError **error);

/* Refines RESULT's ranking with the simulator: its best K plans by the closed form are
 * simulated (each gets simulated_step_s) and re-ranked by simulated step time (ties:
 * mp_plan_compare); plans after the K-th keep their closed-form order; a plan too large to
 * simulate (mp_plan_check_program_size) keeps its closed-form step as its simulated one.
 * FALSE with the simulator's error. */
gboolean mp_planner_refine (const MpCostContext *ctx, MpSearchResult *result, guint k,
                            GError **error);
/* How far the simulation of PLAN is from its closed form: simulated / closed - 1 (0 when
 * not simulated). */
double mp_plan_simulation_gap (const MpPlan *plan);
/* Lines saying which of the first SHOWN of PLANS (refined) the simulation and the closed
 * form disagree on by more than THRESHOLD (0.03: 3%), and whether the simulation changed
 * the winner; "" when nothing is worth saying. Caller owns. */
char *mp_plan_refine_text (const GPtrArray *plans, guint shown, guint refined,
                           double threshold);

/* ---- printing (explain.c) ------------------------------------------------------------ */

/* The ranked table of PLANS (MpPlan*): one row each. Caller owns. */
char *mp_plan_table_text (const GPtrArray *plans);
/* Why RESULT's best plan wins: its time and memory breakdown, and how the runner-up and
 * the best of each other family compare. With FULL, every family with what holds it back
 * (memory, or its dominant cost). Caller owns. */
char *mp_plan_explain_text (const MpSearchResult *result, const MpCostContext *ctx,
                            gboolean full);
/* Each of the N PLANS in one phrase ("dp=8 tp=2 pp=1 cp=2 zero=3 micro-batch 16 x 1"),
 * with the details that tell plans apart (layer split, gradient precision, bucket,
 * placement) added to the phrases that would otherwise read alike. A NULL-terminated
 * array; caller owns (g_strfreev). */
char **mp_plan_phrases (const MpPlan *const *plans, guint n);
/* When nothing fits: the smallest footprint found, how far over it is, and what would
 * make a plan fit. Caller owns. */
char *mp_plan_infeasible_text (const MpSearchResult *result, const MpCostContext *ctx);
/* When plans fit but none honouring the pins PINS_TEXT (RESULT's search, with OPTS): what
 * the best of those needs (on roomier devices: mp_planner_search_roomy) against what the
 * devices have, broken down, and the best plan without the pins. Caller owns. */
char *mp_plan_pinned_infeasible_text (const MpSearchResult *result, const MpCostContext *ctx,
                                      const MpSearchOptions *opts, const char *pins_text);
/* ==== plan files (plan-io.c writes, plan-load.c reads) ================================ *
 * A plan as JSON (one object; keys in docs/json.md, SI base units) and as a versioned
 * YAML plan file (format in docs/plan-file.md) that `mpplan plan -o` writes and
 * `validate`, `simulate`, `program`, `exec` and `report` read. A plan file names its model
 * and cluster (zoo name or path), the global batch, every choice of the config, the layer
 * split and the rank placement; its predicted figures are informative only: readers
 * evaluate the config again (mp_plan_file_resolve). */

#define MP_PLAN_FILE_VERSION 1

/* Plan-file and JSON names: "1f1b", "gpipe", "interleaved-1f1b", "none" (program.h's
 * mp_schedule_from_name reads them back); the dimension names "tp", "cp", "dp", "pp";
 * short family ids "data", "fsdp", "placement", "pipeline", "tensor", "2d", "hybrid". */
const char *mp_plan_schedule_name (MpSchedule schedule);
const char *mp_plan_dim_name (MpParallelDim dim);
/* CFG's rank order as "tp,dp,cp,pp" (innermost first), or NULL when it is Megatron's
 * default (tp, cp, dp, pp). Caller frees. */
char *mp_plan_order_text (const MpParallelConfig *cfg);
const char *mp_plan_family_id (MpPlanFamily family);

/* PLAN as one JSON object: the config (dp ... schedule, chunk_layers, order), the
 * predictions (step_s ... hfu, memory_bytes {...}, time_s {...}), family, dominant, fits,
 * binding_stage, world_size, global_batch. Caller owns (json_node_unref). */
JsonNode *mp_plan_to_json (const MpPlan *plan);
/* The members every planner JSON object opens with: schema_version, model, cluster,
 * world_size, global_batch (B is inside an open object). */
void mp_plan_json_header (JsonBuilder *b, const MpModel *model, const MpCluster *cluster,
                          guint global_batch);

/* PLAN as a complete plan file for MODEL on CLUSTER (the ones it was evaluated with).
 * PLAN_PATH is where the text will be written: a model or cluster given by a relative path
 * is written relative to the plan file's folder, where readers look for it (NULL or "-",
 * stdout: the folder is unknown, so such paths are written absolute). Zoo names stay zoo
 * names. COMMAND (may be NULL) is recorded in the header comment. Caller owns; cannot
 * fail. */
char *mp_plan_to_yaml_for_path (const MpPlan *plan, const MpModel *model,
                                const MpCluster *cluster, const char *plan_path,
                                const char *command);
/* The same with PLAN_PATH NULL (model and cluster files by absolute path). */
char *mp_plan_to_yaml (const MpPlan *plan, const MpModel *model, const MpCluster *cluster,
                       const char *command);

/* A plan file as read, before its model and cluster are loaded. */
typedef struct {
  guint line, column;          /* 1-based; 0 when the key was absent */
} MpPlanFileMark;

typedef struct {
  char *path;                  /* the file, as given (used in messages) */
  char *model;                 /* as written: a zoo name or a path (relative: to path's folder) */
  char *cluster;               /* as written: a zoo name or a path, optional ":N" suffix */
  guint global_batch;
  MpParallelConfig cfg;        /* cfg.chunk_layers and cfg.placement point below */
  guint *chunk_layers;         /* pp * vpp entries, or NULL: the balanced split */
  guint *placement;            /* rank -> device, dp * tp * pp * cp entries; NULL: identity */
  double predicted_step_s;     /* as the file says (not trusted); 0 when absent */
  MpPlanFileMark model_at, cluster_at, parallel_at, placement_at;
} MpPlanFile;

/* Reads and checks the plan file at PATH (version, keys with did-you-mean, types, enum
 * values, sizes >= 1, one chunk per pp * vpp, placement a permutation of the ranks, dp x
 * micro_batch_size x num_micro_batches = global_batch). Caller owns; NULL with
 * MP_ERROR_INPUT listing every problem as FILE:LINE:COLUMN: message (MP_ERROR_IO when the
 * file cannot be read). */
MpPlanFile *mp_plan_file_load (const char *path, GError **error);
/* The same from memory; NAME stands for the path (messages, relative references). */
MpPlanFile *mp_plan_file_load_data (const char *name, const char *data, gsize len,
                                    GError **error);
void mp_plan_file_free (MpPlanFile *file);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpPlanFile, mp_plan_file_free)

/* Does this YAML document look like a plan file: `kind: plan`, or both `version` and
 * `parallel` (keys no model or cluster has)? For `mpplan validate`. Borrowed root;
 * NULL-safe. */
struct _MpYamlNode;
gboolean mp_plan_yaml_is_plan (const struct _MpYamlNode *root);

/* A plan file's plan, evaluated again on its model and cluster. Owns everything. */
typedef struct {
  MpModel *model;
  MpCluster *cluster;
  MpCostContext *ctx;          /* over model and cluster (and profile, if any) */
  MpCostProfile *profile;      /* the calibration profile applied, or NULL */
  MpPlan *plan;                /* plan->cfg.placement points at placement */
  guint *placement;            /* the file's, copied; NULL: identity */
} MpPlanResolved;

/* Loads FILE's model and cluster (relative paths against the plan file's folder), checks
 * the config against them and evaluates it with mp_plan_evaluate. Caller owns; NULL with
 * MP_ERROR_INPUT located in the plan file (at `model:`, `cluster:`, `placement:` or
 * `parallel:`). */
MpPlanResolved *mp_plan_file_resolve (const MpPlanFile *file, GError **error);
/* The same with a calibration profile: once the cluster is loaded, PROFILE_FOR (may be
 * NULL) returns the profile for it (caller of it owns; NULL and no error: none), which the
 * cost model then uses, and may replace *CLUSTER by the copy it calibrates (freeing the
 * loaded one); the result owns both. */
typedef MpCostProfile *(*MpProfileFor) (MpCluster **cluster, gpointer data, GError **error);
MpPlanResolved *mp_plan_file_resolve_full (const MpPlanFile *file, MpProfileFor profile_for,
                                           gpointer data, GError **error);
void mp_plan_resolved_free (MpPlanResolved *resolved);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpPlanResolved, mp_plan_resolved_free)

/* ==== programs (program.c builds, program-print.c prints) ============================= *
 * A plan expands into one program per rank: one training step as instructions
 * (program/program.h: MpProgram), which the simulator times and the executor runs. For each
 * micro-batch and model chunk of the rank, in the order the plan's schedule gives:
 *   gpipe        every forward, then every backward, micro-batches in order;
 *   1f1b         PipeDream-flush (Megatron): p - s - 1 warm-up forwards on stage s, then
 *                one forward and one backward in turn, then the remaining backwards;
 *   interleaved  Megatron's with vpp > 1 chunks per rank: 2 (p - s - 1) + (vpp - 1) p
 *                warm-up forwards, micro-batches taken in groups of p per chunk;
 *   none         layer placement: each micro-batch's forward then its backward, one
 *                micro-batch in the pipeline at a time (gradient accumulation).
 * A chunk's forward is RECV (activations, unless the model's first chunk), FORWARD of each
 * layer, SEND (unless the last chunk); its backward is RECV (gradients, unless the last
 * chunk), BACKWARD of each layer in reverse, SEND (unless the first chunk). Peers are the
 * ranks with the same tp, cp, dp coordinates whose pipeline rank holds the neighbouring
 * chunk (chunk c on c mod pp); a send and its receive share a tag, unique per ordered pair
 * of ranks: (micro_batch * vpp + c / pp) * 2 + (0 forward, 1 backward), c the lower chunk
 * of the boundary. SEND and RECV carry in `layer` the layer whose output crosses.
 * With dp * cp > 1, gradients go in DDP buckets (bucket_bytes, 25 MiB by default) filled
 * in reverse layer order within a chunk, a bucket closing once it reaches the size (whole
 * layers: a layer is never split), dense and expert gradients apart (MP_GROUP_DP / EDP);
 * REDUCE_GRADS follows the BACKWARD that completes its bucket, in the chunk's last
 * micro-batch (ZeRO-3: every micro-batch, as FSDP reduce-scatters). ZeRO-3 gathers each
 * layer's parameters before its forward and again before its backward, one layer ahead.
 * The step ends with REDUCE_TIED on the first and last stage (tied embeddings, pp > 1),
 * WAIT (dp), OPTIMIZER, and for ZeRO 1/2 a GATHER_PARAMS per bucket and a last WAIT. */

/* Coordinates of world RANK under CFG's order (rank numbering innermost first, the cost
 * model's: mp_parallel_config_strides), and the rank of given coordinates. */
void mp_plan_rank_coords (const MpParallelConfig *cfg, guint rank, guint *tp, guint *cp,
                          guint *dp, guint *pp);
guint mp_plan_rank_of (const MpParallelConfig *cfg, guint tp, guint cp, guint dp, guint pp);

/* The program of RANK (< plan->world_size) for PLAN, evaluated on CTX's model and
 * cluster. Caller owns (mp_program_free). Cannot fail for an evaluated plan. */
MpProgram *mp_program_build (const MpCostContext *ctx, const MpPlan *plan, guint rank);
/* The programs of the ranks with tp, cp and dp coordinates 0, one per pipeline stage, in
 * stage order: what the simulator runs (the other ranks are symmetric). *N = pp. Caller
 * owns the NULL-terminated array; free it with mp_program_stages_free. */
MpProgram **mp_program_build_stages (const MpCostContext *ctx, const MpPlan *plan,
                                     guint *n);
void mp_program_stages_free (MpProgram **programs);

/* A readable listing: a header (rank, coordinates, schedule), then one instruction per
 * line. MODEL names the layers. Caller owns. */
char *mp_program_text (const MpProgram *program, const MpModel *model);
/* The same as one JSON object (keys in docs/json.md). Caller owns (json_node_unref). */
JsonNode *mp_program_to_json (const MpProgram *program, const MpModel *model);

/* ==== frameworks (framework.c): what each launcher can express ======================== *
 * A plan is only useful if the user's framework can run it: Horovod has no tensor
 * parallelism, DeepSpeed's pipeline engine refuses ZeRO-2/3, Megatron-LM has no GPipe.
 * `plan --emit` (export.c) and `compare` (compare.c) share these rules. */

typedef enum {
  MP_FRAMEWORK_MEGATRON,      /* Megatron-LM / Megatron-Core */
  MP_FRAMEWORK_DEEPSPEED,     /* DeepSpeed engine: ZeRO and PipelineModule */
  MP_FRAMEWORK_TORCHRUN,      /* plain PyTorch: DDP / FSDP2, DeviceMesh TP, pipelining */
  MP_FRAMEWORK_TORCHTITAN,
  MP_FRAMEWORK_HOROVOD,
  MP_FRAMEWORK_TENSORFLOW,    /* tf.distribute MirroredStrategy / MultiWorkerMirrored */
  MP_FRAMEWORK_MXNET,         /* kvstore data parallelism, ctx-group layer placement */
  MP_FRAMEWORK_N
} MpFramework;

/* "megatron", as --emit spells it; "Megatron-LM" for messages; the inverse of the id. */
const char *mp_framework_id (MpFramework fw);
const char *mp_framework_title (MpFramework fw);
gboolean mp_framework_from_id (const char *id, MpFramework *out);
/* NULL when FW can run CFG, else the first reason it cannot, as a phrase
 * ("Horovod has no tensor parallelism"). Static string. */
const char *mp_framework_rejects (MpFramework fw, const MpParallelConfig *cfg);
/* The frameworks that can run CFG (and MODEL, when not NULL: mp_framework_rejects_model),
 * one bit (1 << fw) each; 0 when none of them can. A family's best plan is one of these
 * (the search keeps no family best that no framework runs). */
guint mp_framework_runners (const MpModel *model, const MpParallelConfig *cfg);
/* "PyTorch DDP, Horovod, TensorFlow" for MASK (mp_framework_runners of CFG): plain
 * PyTorch named by its wrapper when CFG is a DDP or FSDP plan. Caller owns; NULL for 0. */
char *mp_framework_runners_text (guint mask, const MpParallelConfig *cfg);
/* NULL when FW can train MODEL at all, else why not (Megatron-LM and an mlp). */
const char *mp_framework_rejects_model (MpFramework fw, const MpModel *model);

/* The strategies `mpplan compare` puts side by side: a framework and, for PyTorch, one
 * of its data-parallel wrappers. */
typedef enum {
  MP_STRATEGY_DDP,            /* PyTorch DistributedDataParallel */
  MP_STRATEGY_FSDP,           /* PyTorch FSDP / FSDP2, full sharding (ZeRO-3) */
  MP_STRATEGY_TF_MIRRORED,    /* TensorFlow (MultiWorker)MirroredStrategy */
  MP_STRATEGY_HOROVOD,        /* Horovod DistributedOptimizer */
  MP_STRATEGY_MXNET,          /* MXNet kvstore + layer placement over devices */
  MP_STRATEGY_MEGATRON,       /* Megatron-LM 3D (tp, pp, dp, cp, ep; ZeRO-1 at most) */
  MP_STRATEGY_DEEPSPEED,      /* DeepSpeed ZeRO 0-3, or pipeline with ZeRO <= 1 */
  MP_STRATEGY_N
} MpStrategy;

const char *mp_strategy_title (MpStrategy st);     /* "PyTorch DDP" */
const char *mp_strategy_id (MpStrategy st);        /* "ddp", for --json */
MpFramework mp_strategy_framework (MpStrategy st);
/* The framework's reasons, then the strategy's own (DDP: no sharding, no model split). */
const char *mp_strategy_rejects (MpStrategy st, const MpParallelConfig *cfg);
/* The gradient bucket (fusion buffer) the strategy reduces in, for MODEL's gradients:
 * each framework's default, capped at the whole gradient. 0: the cost model's default. */
double mp_strategy_bucket_bytes (MpStrategy st, const MpModel *model);
/* Adds to PLAN's predictions what the closed form leaves out for ST and is the same for
 * every plan of ST (Horovod's cycle time), so it does not change which plan is best. */
void mp_strategy_adjust (MpStrategy st, MpPlan *plan);

/* The best plan ST can express: a search (OPTS's batch, pins and top_k are used) limited
 * by mp_strategy_rejects, with the strategy's bucket. Caller owns; NULL with an error
 * when no config is expressible. */
MpSearchResult *mp_strategy_search (const MpCostContext *ctx, MpStrategy st,
                                    const MpSearchOptions *opts, GError **error);
/* The same for everything FW can express (--emit re-plans with it), with the bucket of
 * FW's main strategy (Horovod's fusion buffer, ...). */
MpSearchResult *mp_framework_search (const MpCostContext *ctx, MpFramework fw,
                                     const MpSearchOptions *opts, GError **error);

/* ==== exports (export.c): launch files for a plan ====================================== *
 * What a user needs to run PLAN with FW, DeepSpeed-autotuner style (a config file and a
 * command file): megatron: megatron_args.txt + cmd.sh; deepspeed: ds_config.json +
 * cmd.sh; torchrun: parallel.py + cmd.sh; torchtitan: train.toml + cmd.sh; horovod:
 * cmd.sh; tensorflow: tf_config.json (one TF_CONFIG per worker) + strategy.py + cmd.sh;
 * mxnet: mxnet_setup.py + cmd.sh. Every file is written atomically into DIR (created if
 * missing); the paths written are appended to WRITTEN (may be NULL). PLAN must be one
 * FW can express (mp_framework_rejects). */
gboolean mp_export_plan (MpFramework fw, const MpPlan *plan, const MpModel *model,
                         const MpCluster *cluster, const char *dir, GPtrArray *written,
                         GError **error);

/* ==== compare (compare.c) ============================================================== */

typedef struct {
  MpStrategy strategy;
  MpPlan *best;                /* fastest fitting plan, adjusted; NULL when none fits */
  MpPlan *smallest;            /* smallest footprint (for "does not fit" rows); may be NULL */
  char *limit;                 /* what limits it, one phrase */
} MpCompareRow;

/* One row per strategy (MP_STRATEGY_N rows, in enum order), then a last row with
 * strategy MP_STRATEGY_N: mpplan's unconstrained best. GLOBAL_BATCH 0: the model's.
 * Caller owns (g_ptr_array_unref). NULL with an error only when the batch splits no way. */
GPtrArray *mp_compare_strategies (const MpCostContext *ctx, guint global_batch,
                                  GError **error);
void mp_compare_row_free (MpCompareRow *row);
/* The table, and the same as JSON (schema_version 1). */
char *mp_compare_text (const GPtrArray *rows);
JsonNode *mp_compare_json (const GPtrArray *rows, const MpModel *model,
                           const MpCluster *cluster, guint global_batch);

G_END_DECLS
