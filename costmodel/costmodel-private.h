/* costmodel-private.h - what the files of costmodel/ share and nobody else sees: the
 * context's precomputed tables and a few helpers.
 *
 * context.c builds them once per (model, cluster); compute.c, comm.c, memory.c and
 * costmodel-describe.c read them. Units as in costmodel.h. */
#pragma once
#include "costmodel/costmodel.h"

#include <string.h>

G_BEGIN_DECLS

/* How a GEMM's shape changes under tensor parallelism. */
typedef enum {
  CM_GEMM_FULL,      /* every TP rank computes the whole product */
  CM_GEMM_SPLIT_N,   /* output columns divided (column-parallel, vocab-parallel) */
  CM_GEMM_SPLIT_K,   /* reduction dimension divided (row-parallel) */
} CmGemmSplit;

/* One op's tensor-parallel role, found by walking the model's ops in order (context.c).
 * A "region" is Megatron's f ... g pair: it opens at a column-parallel (or head-, vocab-,
 * expert-parallel) op whose input is replicated and closes after a row-parallel op; the
 * ops inside work on split tensors. Widths are elements per token. */
typedef struct {
  gboolean split;        /* its work and split activations are divided by t */
  gboolean expert;       /* an MoE expert op (shapes also depend on ep) */
  CmGemmSplit gemm;
  double entry_width;    /* > 0: opens a region; its input width (forward SP all-gather,
                          * backward all-reduce / reduce-scatter of the input gradient) */
  double exit_width;     /* > 0: a region closes after it; its output width (forward
                          * all-reduce / reduce-scatter, backward SP all-gather) */
  guint loss_reductions; /* vocab-parallel cross-entropy: fp32 all-reduces per token */
  double a2a_width;      /* MoE: token copies dispatched before (and combined after) the
                          * expert ops, h * top-k per token; on the first expert op */
  double out_width;      /* output elements per token, unsplit (backward buffers) */
} CmOp;

typedef struct {
  CmOp *ops;
  double params_split;   /* divided by t */
  double params_rep;     /* replicated over t */
  double params_expert;  /* divided by t * ep */
  /* Of params_rep, those whose gradient each tp rank computes only in part, summed over
   * tp once per step (Megatron-Core's finalize_model_grads): norms and replicated GEMMs
   * (MLA's down projections) on the rank's rows under sequence parallelism, and
   * replicated norms of the split heads (qk-norm) whenever t > 1. */
  double params_rows_partial, params_heads_partial;
  double fp8_split, fp8_rep, fp8_expert;  /* ... of them, in GEMMs that FP8 runs */
  double input_width;    /* elements per token of the layer's input (full recompute) */
  double output_width;   /* elements per token sent to the next pipeline stage */
  gboolean output_split; /* ... already divided by t (inside a region: mlp layers) */
  double max_out_width;  /* largest op output per token, unsplit */
  double max_out_split;  /* ... of split ops (divide by t) */
  guint klass;           /* index of the first layer with the same ops and roles */
  guint class_id;        /* dense number of that class, 0 .. n_classes - 1 */
  gboolean no_experts;   /* no op on the expert grid (CmOp.expert): below ZeRO-2 its
                          * costs read neither ep, etp, the dispatcher nor their groups */
} CmLayer;

/* Prefix sums over layers, n_layers + 1 entries each, so a chunk's sum is O(1). */
typedef enum {
  CM_SUM_PARAMS_SPLIT,
  CM_SUM_PARAMS_REP,
  CM_SUM_PARAMS_EXPERT,
  CM_SUM_FP8_SPLIT,      /* parameters of FP8 GEMMs (cm_fp8_op), as the three above */
  CM_SUM_FP8_REP,
  CM_SUM_FP8_EXPERT,
  CM_SUM_PARTIAL_ROWS,   /* params_rows_partial, params_heads_partial */
  CM_SUM_PARTIAL_HEADS,
  CM_SUM_ACT,            /* act_bytes per token */
  CM_SUM_ACT_REP,        /* act_rep_bytes per token */
  CM_SUM_ACT_SCORE,      /* act_score_bytes per token */
  CM_SUM_FULL_INPUT,     /* bytes per token a fully recomputed layer keeps (its input);
                          * layers that are never recomputed keep their usual ones */
  CM_SUM_RECOMPUTABLE,   /* 1 per layer that full recompute applies to */
  CM_SUM_NR_ACT,         /* act_bytes of layers full recompute does not apply to */
  CM_SUM_NR_ACT_REP,     /* ... their act_rep_bytes */
  CM_SUM_NR_ACT_SCORE,   /* ... their act_score_bytes */
  CM_SUM_EXPERT_ACT,     /* MoE (moe14): act_bytes of expert ops (in CM_SUM_ACT too) */
  CM_SUM_EXPERT_REP,     /* ... their act_rep_bytes: the dispatched token copies */
  CM_SUM_COMBINE_ROWS,   /* the k expert rows a weighted combine keeps (in CM_SUM_ACT_REP) */
  CM_SUM_N
} CmSum;

typedef struct CmBucketSlot CmBucketSlot;
typedef struct CmFloorSlot CmFloorSlot;
typedef struct CmMemo CmMemo;
typedef struct CmLayerRow CmLayerRow;

struct _MpCostContext {
  const MpModel *model;
  const MpCluster *cluster;
  const MpCostProfile *profile;
  MpCostDevice *devices;          /* one per node group */
  guint n_devices;
  double elt;                     /* bytes of an activation element */
  MpDtype dtype;                  /* compute dtype of GEMMs */
  gboolean causal;                /* decoder attention (all transformers here) */
  CmLayer *layers;                /* model->n_layers */
  double *sums[CM_SUM_N];
  double tied_params;             /* word-embedding matrix the head shares (0: untied) */
  guint n_classes;                /* distinct layers */
  guint *class_first;             /* n_classes: the first layer of each class */
  double attn_fwd_flops;          /* per token, all attention cores (IR, forward) */
  double recomputable_fwd_flops;  /* per token, layers full recompute applies to */
  MpGroupSpan any_span;           /* per-tier bandwidth and latency of any group */
  double headroom_fraction;       /* memory plans must leave free (memory.c) */
  double headroom_bytes;
  /* Memo of per-layer-class costs across configs (compute.c, mp_cost_layer): keyed by
   * what mp_cost_layer reads, so a search costs each distinct layer once; a row of every
   * class's per key, LAYER_ROW the one asked last (0: the full key's, 1: the key without
   * the expert grid's, for classes without experts: memo_key). Filled lazily through a
   * const context; mpplan runs one search per process, no threads (each MPI rank has its
   * own). */
  CmMemo *layer_memo;
  CmLayerRow *layer_row[2];
  CmMemo *span_memo;              /* the same for mp_cost_stage_spans (context.c) */
  CmMemo *gemm_memo;              /* ... for a GEMM shape on a device of devices (compute.c) */
  CmMemo *coll_memo;              /* ... for a collective's time from one (compute.c) */
  CmMemo *op_memo;                /* ... for a layer class's ops (compute.c, op_row) */
  CmBucketSlot *bucket_slots;     /* the last buckets of each stage (memory.c) */
  CmFloorSlot *floor_slot;        /* the memory floor's last layer terms (memory.c) */
};

/* cm_stage_buckets's last answers, CM_BUCKET_SLOTS of them (by stage, kind, cap or none). */
#define CM_BUCKET_SLOTS 512u
void cm_bucket_slots_free (CmBucketSlot *slots);
void cm_floor_slot_free (CmFloorSlot *slot);

/* Entries and bytes a memo holds at most; a full one starts again (bounds a long search's
 * memory). */
#define CM_MEMO_MAX 200000u
#define CM_MEMO_MAX_BYTES (256u << 20)
/* Memos keyed by N_WORDS 64-bit words (spans and doubles by their bits, so that equal
 * keys give bit-identical results): the value kept under KEY in MEMO (may be NULL), or
 * NULL; and keeping a copy of VALUE (SIZE bytes; NULL: zeros) under KEY in *MEMO, made
 * when missing and started again when full: returns the copy, the memo's to free. */
void *cm_memo_get (const CmMemo *memo, const guint64 *key, guint n_words);
void *cm_memo_put (CmMemo **memo, const guint64 *key, guint n_words, const void *value,
                   gsize size);
void cm_memo_free (CmMemo *memo);
/* The entries MEMO holds (0: none yet); 1 after a put: it started again, or afresh. */
guint cm_memo_size (const CmMemo *memo);

/* Is OP of LAYER a GEMM that Transformer Engine runs in FP8 under fp8 (the linear layers
 * of blocks and mlp layers; not the output head, the embedding or the MoE router, which
 * Megatron-Core keeps in bf16)? And does CFG run them in FP8 on DEV (fp8 on, and the
 * device has an FP8 rate)? */
gboolean cm_fp8_op (const MpLayer *layer, const MpOp *op);
gboolean cm_fp8_on (const MpParallelConfig *cfg, const MpCostDevice *dev);
/* Bytes per parameter of the FP8 weight copies Transformer Engine keeps on DEV (1, and 1
 * more for the transposed copy on devices whose FP8 GEMMs take only the TN layout). */
double cm_fp8_copy_bytes (const MpCostDevice *dev);
/* FP8 parameters one rank of a stage holds over chunk layers [FIRST, FIRST + N), before
 * ZeRO: dense (tensor-split or replicated) and expert. */
/* Parameters of layers [FIRST, FIRST + N) one tp rank holds whole but computes the
 * gradient of only in part under CFG (CmLayer's params_rows_partial under sequence
 * parallelism, params_heads_partial), summed over tp once per step; 0 for t = 1. */
double cm_tp_partial_params (const MpCostContext *ctx, const MpParallelConfig *cfg, guint first,
                             guint n);
void cm_fp8_params (const MpCostContext *ctx, const MpParallelConfig *cfg, guint first,
                    guint n, double *dense, double *expert);

/* Is LAYER one that full recomputation applies to (blocks and mlp layers)? */
gboolean cm_recomputable (const MpLayer *layer);

/* Full recompute's block limit per chunk (the block method's N), G_MAXUINT: every block. */
guint cm_recompute_blocks (const MpParallelConfig *cfg);
/* The share of op OP of LAYER's forward that selective recompute under CFG re-runs in
 * backward: 1 when its module is in the set, part of a GEMM under the op-level policy
 * (the linears whose output it does not keep), else 0 (and 0 unless selective). */
double cm_op_recompute_share (const MpLayer *layer, guint op, const MpParallelConfig *cfg);
/* Bytes per token a block LAYER keeps under the op-level policy (MP_RECOMPUTE_OP), at
 * CFG's tensor and sequence split: its input, attention's output, the saved linears'
 * outputs and the experts' dispatched tokens (what a collective produced). */
double cm_op_policy_kept (const MpLayer *layer, const MpParallelConfig *cfg);
/* The activation bytes per token of op OP of LAYER that selective recompute under CFG
 * does not keep: *SPLIT of its act_bytes (divided by t), *REP of its act_rep_bytes,
 * *SCORE of its act_score_bytes. */
void cm_op_dropped (const MpLayer *layer, guint op, const MpParallelConfig *cfg,
                    double *split, double *rep, double *score);

/* The sizes every function divides by are set (mp_parallel_config_check says more). */
static inline gboolean
cm_config_sane (const MpParallelConfig *cfg)
{
  return cfg->dp >= 1 && cfg->tp >= 1 && cfg->pp >= 1 && cfg->cp >= 1 && cfg->ep >= 1
         && cfg->vpp >= 1 && cfg->micro_batch_size >= 1 && cfg->num_micro_batches >= 1;
}

/* Number of layers per chunk under CFG into COUNTS[pp * vpp] and the first layer of each
 * into FIRST[pp * vpp]. */
void cm_chunk_layers (const MpCostContext *ctx, const MpParallelConfig *cfg, guint *first,
                      guint *counts);
/* Sum of table WHICH over layers [FIRST, FIRST + N). */
static inline double
cm_sum (const MpCostContext *ctx, CmSum which, guint first, guint n)
{
  return ctx->sums[which][first + n] - ctx->sums[which][first];
}
/* Tokens one rank processes per micro-batch: micro_batch_size * seq_len / cp. */
double cm_tokens (const MpCostContext *ctx, const MpParallelConfig *cfg);
/* MoE (moe14): ranks one expert's weights are divided over, etp * ep. */
static inline double
cm_expert_shards (const MpParallelConfig *cfg)
{
  return (double) mp_parallel_config_etp (cfg) * MAX (cfg->ep, 1u);
}
/* Layers cost the same on two stages with the same device and tensor-, context- and
 * expert-parallel groups (MoE (moe14): the expert grid's etp and etp x ep ones too). */
static inline gboolean
cm_same_layer_groups (const MpStageSpans *a, const MpStageSpans *b)
{
  return a->device == b->device && memcmp (&a->tp, &b->tp, sizeof a->tp) == 0
         && memcmp (&a->cp, &b->cp, sizeof a->cp) == 0
         && memcmp (&a->ep, &b->ep, sizeof a->ep) == 0
         && memcmp (&a->etp, &b->etp, sizeof a->etp) == 0
         && memcmp (&a->etp_ep, &b->etp_ep, sizeof a->etp_ep) == 0;
}
/* MoE (moe14): the busiest expert rank's tokens over the mean: the model's load
 * imbalance, capped by its capacity factor (tokens past capacity are dropped). */
static inline double
cm_expert_load (const MpModel *m)
{
  double load = MAX (m->load_imbalance, 1.0);
  return m->capacity_factor > 0 ? MIN (load, MAX (m->capacity_factor, 1.0)) : load;
}
/* MoE (moe14): do the experts run on Megatron-Core's own expert grid (dispatch over ep,
 * then all-gather over etp), rather than inside the dense tensor-parallel region (no
 * sequence parallelism, etp = tp, all-to-all)? */
static inline gboolean
cm_expert_grid (const MpParallelConfig *cfg)
{
  return (cfg->sequence_parallel && cfg->tp > 1) || mp_parallel_config_etp (cfg) != cfg->tp
         || cfg->dispatcher == MP_DISPATCH_ALLGATHER;
}
/* The device STAGE runs at (mp_cost_stage_group). */
const MpCostDevice *cm_stage_device (const MpCostContext *ctx, const MpParallelConfig *cfg,
                                     guint stage);
/* The data-parallel bucket size in bytes. */
double cm_bucket_bytes (const MpParallelConfig *cfg);
/* Gradient bytes per parameter under CFG. */
double cm_grad_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg);
/* Bytes per parameter of the data-parallel gradient collectives under CFG: 4 when the
 * stack reduces in fp32 (mp_stack_fp32_reduce) or with fp32_grads, else cm_grad_bytes. */
double cm_reduce_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg);
/* STAGE's gradient buckets (mp_cost_grad_buckets over its chunks, the last chunk first,
 * the tied word-embedding copy with the last stage's head) of its dense (EXPERT FALSE) or
 * expert parameters, closing at CAP_PARAMS (0: one per layer). Caller frees. */
MpGradBucket *cm_stage_buckets (const MpCostContext *ctx, const MpParallelConfig *cfg,
                                guint stage, gboolean expert, double cap_params, guint *n);

/* Activation bytes per micro-batch crossing from a stage whose layers end at LAST_LAYER
 * to the next stage (for the last stage, whose output is the loss: the gradient of the
 * input of FIRST_LAYER going back). */
double cm_boundary_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg,
                          guint last_layer, guint first_layer);

/* Link efficiency of TIER for DEV (comm.c): the profile's measured one or the curve's. */
double cm_tier_efficiency (const MpCluster *cluster, const MpCostDevice *dev, MpTier tier);

/* Whether stages A and B of CFG have identical spans (homogeneous cluster, ranks on
 * devices in order, first ranks at the same place in a node, neither the last stage). */
gboolean cm_spans_equal (const MpCostContext *ctx, const MpParallelConfig *cfg, guint a,
                         guint b);

/* The simulator's default durations (sim-cost.c): the cost model's price of each
 * instruction under CFG (borrowed, like CTX, for the object's life). cm_sim_cost is an
 * MpSimCostFunc whose data is the CmSimCost. */
typedef struct _CmSimCost CmSimCost;
CmSimCost *cm_sim_cost_new (const MpCostContext *ctx, const MpParallelConfig *cfg);
void cm_sim_cost_free (CmSimCost *cost);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (CmSimCost, cm_sim_cost_free)
void cm_sim_cost (const MpProgram *program, const MpInsn *insn, const MpProgram *peer,
                  MpSimCost *out, gpointer data);

G_END_DECLS
