/* costmodel.h - what one op, one collective and one plan's memory cost on a cluster.
 *
 * Pure functions over an immutable model (model/model.h) and cluster
 * (topology/topology.h). mp_cost_context_new() precomputes what depends only on the pair
 * (device curves, per-op tensor-parallel roles, prefix sums over layers); everything else
 * takes a small plain-data MpParallelConfig (program/program.h) that the planner fills
 * from its plan, and costs microseconds; the discrete-event simulator (sim.c) times a
 * step's programs (program/program.h) with the same calls. Not here: the plan's
 * vocabulary (program/), searching plans and building programs (planner/).
 *
 * Three parts:
 *  - compute: roofline time of an op on one device, max (FLOPs / (peak x efficiency),
 *    bytes / (memory bandwidth x efficiency)) + kernel launches, with efficiency curves of
 *    GEMM shape (tile and wave quantisation), attention sequence and head size, and
 *    message size for memory-bound kernels; tensor-parallel ops are costed at their split
 *    shapes. Defaults per device class in curves.c, each with its source.
 *  - communication: nccl-tests definitions (algbw, busbw, bus factors) and NCCL's
 *    algorithms (ring, tree, NVLink SHARP) plus a hierarchical one, alpha-beta per link
 *    tier, the fastest picked per size as NCCL's tuner does.
 *  - memory: per pipeline stage and rank, broken down (weights, gradients, optimizer,
 *    activations, transient buffers, overhead).
 *
 * The module's one public header, in three files by size: this one, costmodel-comm.h
 * (communication) and costmodel-sim.h (the simulator), which it includes.
 *
 * Units: seconds, bytes, FLOP, bytes/s, FLOP/s. Sizes of collectives are nccl-tests'
 * "size": the whole buffer (for all-gather / reduce-scatter the gathered buffer, n times
 * what one rank contributes; for all-to-all what one rank sends in total). */
#pragma once
#define MP_COSTMODEL_H_INSIDE   /* its parts, costmodel-comm.h and costmodel-sim.h */
#include <glib.h>
#include <json-glib/json-glib.h>
#include "model/model.h"
#include "topology/topology.h"
#include "program/program.h"

G_BEGIN_DECLS

/* ==== device classes and their default curves (curves.c) ============================== */

typedef enum {
  MP_DEVICE_CLASS_A100,        /* NVIDIA Ampere A100 */
  MP_DEVICE_CLASS_HOPPER,      /* NVIDIA H100 / H200 / GH200 */
  MP_DEVICE_CLASS_BLACKWELL,   /* NVIDIA B200 (HGX / DGX B200, 1,000 W) */
  MP_DEVICE_CLASS_GB200,       /* NVIDIA GB200 / GB300 (the Blackwell GPU at up to 1,200 W) */
  MP_DEVICE_CLASS_GPU,         /* any other GPU: conservative A100-like curve */
  MP_DEVICE_CLASS_CPU,         /* one CPU core (the host backend) */
  MP_DEVICE_CLASS_N
} MpDeviceClass;

/* A GEMM tile a library may pick (rows x columns of the output per thread block) and its
 * speed factor once the GPU is full (data reuse; curves.c); the anchor scales it. */
typedef struct {
  guint m, n;
  double speed;
} MpGemmTile;

/* The built-in efficiency model of one device class. Read-only; curves.c cites the source
 * of every number. */
typedef struct {
  MpDeviceClass klass;
  const char *name;              /* "a100", "hopper", ... */
  guint sms;                     /* streaming multiprocessors (1 for a CPU core) */
  const MpGemmTile *tiles;       /* tile shapes the GEMM library chooses among */
  guint n_tiles;
  double k_overhead;             /* K-equivalent cost of a tile's prologue and epilogue */
  guint max_split_k;             /* split-K factors tried: 1 .. max_split_k */
  double small_dim_half;         /* CPU: the smallest dimension at half speed (0: unused) */
  double gemm_anchor_eff;        /* measured efficiency of a large GEMM at ... */
  double gemm_anchor[3];         /* ... this M, N, K (bf16, or fp32 on a CPU) */
  double fp32_simt_eff;          /* large fp32 (non tensor-core) GEMM efficiency */
  /* Sustained load (mp_cost_sustained_rate): the large GEMM's efficiency in a short run,
   * and the fraction of it that it keeps over a long one under the power limit; 0: no
   * such model (the class's figures stand as they are). */
  double burst_gemm_eff, sustained_of_burst;
  double attn_fwd_eff, attn_bwd_eff;  /* fused attention plateau, forward / backward */
  double attn_fa2_eff[2];        /* the same for FlashAttention-2-class kernels (stacks of
                                  * mp_stack_fa2_attention), forward / backward; 0: as
                                  * above (where FA2 is the native kernel) */
  double attn_seq_half;          /* sequence length at which attention is at half plateau */
  double mem_eff;                /* large memory-bound kernel: achieved / datasheet */
  double mem_latency_s;          /* start-up of a memory-bound kernel (a DRAM round trip):
                                  * it reaches half of mem_eff at bandwidth x this bytes */
  double launch_s;               /* per-kernel launch overhead */
  gboolean gemm_group_calls;     /* a grouped GEMM runs as one library call per group
                                  * member (FALSE: one grouped kernel) */
  double link_eff[MP_TIER_N];    /* large-message busbw / link rate, ring, per tier */
  double nvls_algbw_eff;         /* NVLink SHARP all-reduce algbw / NVLink rate; 0: none */
  gboolean nccl;                 /* NCCL protocols (LL, LL128) and base latencies */
  gboolean serial_tp_comm;       /* tensor-parallel collectives block the compute thread:
                                  * a stack's backward overlap of them does not happen */
  double workspace_bytes;        /* GEMM library workspace kept per device */
  double rated_power_w;          /* the power limit the anchors ran at; 0: no power model */
  double low_power_w;            /* a lower limit at which the vendor rates the same chip ... */
  double low_power_rate;         /* ... at this fraction of its tensor rate */
} MpDeviceCurve;

/* The class of a device, by name ("A100-SXM4-80GB" -> A100; "cpu-core" -> CPU) and, for
 * an unknown name, by whether it has a 16-bit tensor rate. */
MpDeviceClass mp_device_class_of (const MpDevice *device);
/* The fraction of its rated compute rate a device of CURVE sustains when held to LIMIT_W
 * watts (MpDevice.power_limit_w; 0: as rated): 1 at or above the rating, falling with the
 * clock the limit allows (curves.c). */
double mp_cost_power_rate (const MpDeviceCurve *curve, double limit_w);
/* The fraction of a short-run (burst) rate that a tensor-core kernel of CURVE's device
 * keeps under sustained load, for a kernel at BURST_EFF of peak in a short run: the GEMM
 * anchor's sustained_of_burst at the large GEMM's burst utilization, less in proportion
 * for a kernel that keeps the tensor cores less busy and so draws less of the power
 * limit; 1 for a class without the model (curves.c). */
double mp_cost_sustained_rate (const MpDeviceCurve *curve, double burst_eff);
/* The built-in curve of a class. Borrowed, static. */
const MpDeviceCurve *mp_device_curve (MpDeviceClass klass);
const char *mp_device_class_name (MpDeviceClass klass);

/* ==== calibration profile (profile.c) ================================================== */

/* Measured tables that override the built-in curves: `mpplan calibrate` measures them and
 * writes a YAML profile (profile-yaml.c reads and writes it; the format is in
 * docs/profile-file.md); the structure and the interpolation are in profile.c. */
typedef struct _MpCostProfile MpCostProfile;

/* What a profile says of the machine it measured. Strings may be NULL. */
typedef struct {
  char *hostname;   /* g_get_host_name () where it ran (rank 0) */
  char *cpu;        /* /proc/cpuinfo "model name" */
  guint cores;      /* online processors */
  char *date;       /* when, ISO 8601 UTC */
  char *version;    /* the mpplan version that measured it */
} MpProfileMachine;

/* A new empty profile for devices named DEVICE (NULL or "": any device). Caller owns. */
MpCostProfile *mp_cost_profile_new (const char *device);
void mp_cost_profile_free (MpCostProfile *profile);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpCostProfile, mp_cost_profile_free)
/* Sets the achieved GEMM rate of DTYPE on a full grid: axes M[NM], N[NN], K[NK] strictly
 * increasing and positive, FLOPS_PER_S[(i * NN + j) * NK + l] for (M[i], N[j], K[l]), all
 * positive. Copied. FALSE with MP_ERROR_INPUT otherwise (profile unchanged). */
gboolean mp_cost_profile_set_gemm (MpCostProfile *profile, MpDtype dtype, const double *m,
                                   guint nm, const double *n, guint nn, const double *k,
                                   guint nk, const double *flops_per_s, GError **error);
/* Sets the achieved copy bandwidth (bytes read + written per second). */
void mp_cost_profile_set_mem_bw (MpCostProfile *profile, double bytes_per_s);
/* Sets a nccl-tests table of KIND inside TIER (TIER_NODE: a group within one node;
 * TIER_DOMAIN: one rank per node of one NVLink domain; TIER_CLUSTER: one rank per domain,
 * i.e. per node without domains) measured on N_RANKS ranks: SIZES[COUNT] strictly
 * increasing (nccl-tests "size"), BUSBW_BPS[COUNT] positive. Copied. FALSE with
 * MP_ERROR_INPUT otherwise. */
gboolean mp_cost_profile_set_coll (MpCostProfile *profile, MpCollKind kind, MpTier tier,
                                   guint n_ranks, const double *sizes,
                                   const double *busbw_Bps, guint count, GError **error);
/* Interpolated achieved FLOP/s of an (M, N, K) GEMM: log-log trilinear inside the grid,
 * clamped to its edges outside. 0 when the profile has no table for DTYPE. */
double mp_cost_profile_gemm_flops (const MpCostProfile *profile, MpDtype dtype, double m,
                                   double n, double k);
/* Interpolated busbw of KIND in TIER at SIZE: log-log linear between samples, the first
 * sample's time below the table (a latency floor), the last busbw above it. 0 when the
 * profile has no such table. */
double mp_cost_profile_coll_busbw (const MpCostProfile *profile, MpCollKind kind,
                                   MpTier tier, double size);
/* The profile's copy bandwidth, 0 if unset; and its device name (NULL: any). */
double mp_cost_profile_mem_bw (const MpCostProfile *profile);
/* The rate (bytes/s) at which a GEMM's weight operand that is not in cache streams in
 * before its kernel runs, on top of the grid's warm rate (a host core: OpenBLAS packs the
 * weight first); 0: not measured (every weight priced warm). */
void mp_cost_profile_set_cold_weight_bw (MpCostProfile *profile, double bytes_per_s);
double mp_cost_profile_cold_weight_bw (const MpCostProfile *profile);
const char *mp_cost_profile_device (const MpCostProfile *profile);
/* Kernel classes whose achieved rate a profile may hold: a device's own element-wise
 * kernels can run far below its memory roofline (the host executor's reference kernels
 * spend their time in expf/tanhf, not in moving bytes). */
typedef enum {
  MP_EW_NORM,         /* layernorm / rmsnorm */
  MP_EW_ACTIVATION,   /* the MLP activation (gelu, relu) */
  MP_EW_LOSS,         /* softmax + cross-entropy over a vocabulary row */
  MP_EW_GATED,        /* a gated MLP activation (swiglu, geglu): the host's swiglu moves
                       * 1.5x gelu's bytes per output in a quarter of its time (expf, not
                       * tanhf: 6.5 against 27 ns per output here), so it has a rate of its own */
  MP_EW_N,
  MP_EW_NONE = MP_EW_N  /* a plain stream (residual, dropout, embedding, optimizer) */
} MpEwClass;
/* Sets the achieved rate of the attention core against key length: at SEQ[N] (strictly
 * increasing, positive) keys, FWD[N] and BWD[N] FLOP/s as mp_cost_attention_flops counts
 * them. The rate of a reference kernel falls as its keys outgrow the caches, so one
 * number does not fit every sequence length. SEQ may be NULL when N is 1 (one rate for
 * every length). FALSE with MP_ERROR_INPUT otherwise (profile unchanged). */
gboolean mp_cost_profile_set_attention (MpCostProfile *profile, const double *seq, guint n,
                                        const double *fwd_flops_per_s,
                                        const double *bwd_flops_per_s, GError **error);
/* The measured attention rate forward or BACKWARD at SEQ_KV keys, interpolated log-log and
 * clamped to the table's ends; 0 if unset (NULL-safe). */
double mp_cost_profile_attention_flops (const MpCostProfile *profile, double seq_kv,
                                        gboolean backward);
/* Sets the achieved rate of the optimizer step (the gradient-norm pass and the update) in
 * parameters per second per rank, for Adam(W) and for SGD with momentum; 0 unsets. */
void mp_cost_profile_set_optimizer (MpCostProfile *profile, double adam_params_per_s,
                                    double sgd_params_per_s);
/* The measured optimizer rate for OPTIMIZER in parameters/s, 0 if unset (NULL-safe). */
double mp_cost_profile_optimizer_params (const MpCostProfile *profile, MpOptimizer optimizer);
/* Sets the achieved rate of element-wise class KLASS, forward and backward, in bytes/s of
 * the traffic the cost model charges (the IR's fwd_bytes forward, twice that backward);
 * 0 unsets. */
void mp_cost_profile_set_elementwise (MpCostProfile *profile, MpEwClass klass,
                                      double fwd_bytes_per_s, double bwd_bytes_per_s);
/* The measured rate of KLASS forward or BACKWARD, 0 if unset (NULL-safe). */
double mp_cost_profile_elementwise_bps (const MpCostProfile *profile, MpEwClass klass,
                                        gboolean backward);
/* How far a calibration's repeats of one kind of measurement scattered, so that a reader
 * can tell a quiet calibration from a busy one: each measurement's interquartile range
 * over its median (common/stats.h), the median of that over the measurements of KIND,
 * each measured REPEATS times. The profile file names them gemm, kernels, memory. */
typedef enum {
  MP_SPREAD_GEMM,       /* the GEMM grid's cells */
  MP_SPREAD_KERNELS,    /* the reference kernels (attention, element-wise, optimizer) */
  MP_SPREAD_MEMORY,     /* the memory test */
  MP_SPREAD_N
} MpSpreadKind;
/* Relative spreads above this are printed as a warning: the machine was busy. */
#define MP_SPREAD_WARN 0.1
/* Sets KIND's spread (REL_IQR >= 0) and its repeats (>= 1). */
void mp_cost_profile_set_spread (MpCostProfile *profile, MpSpreadKind kind, guint repeats,
                                 double rel_iqr);
/* KIND's spread and (REPEATS may be NULL) its repeats; -1 and 0 if not recorded. */
double mp_cost_profile_spread (const MpCostProfile *profile, MpSpreadKind kind,
                               guint *repeats);
/* Sets (copies) and returns (borrowed) the machine description. */
void mp_cost_profile_set_machine (MpCostProfile *profile, const MpProfileMachine *machine);
const MpProfileMachine *mp_cost_profile_machine (const MpCostProfile *profile);

/* ---- profile files (profile-yaml.c) ---- */

/* Does this YAML document look like a profile (`kind: profile`)? NULL-safe. */
struct _MpYamlNode;
gboolean mp_cost_profile_yaml_is_profile (const struct _MpYamlNode *root);
/* Loads a profile file. Caller owns; NULL with MP_ERROR_INPUT listing every problem as
 * FILE:LINE:COLUMN: message (MP_ERROR_IO when it cannot be read). */
MpCostProfile *mp_cost_profile_load (const char *path, GError **error);
MpCostProfile *mp_cost_profile_load_data (const char *name, const char *data, gsize len,
                                          GError **error);
/* The profile as a YAML file (version 1) that mp_cost_profile_load reads back to an equal
 * profile, every number exact. COMMAND (may be NULL) is recorded in a comment. Caller
 * owns. */
char *mp_cost_profile_to_yaml (const MpCostProfile *profile, const char *command);
/* One line: device, machine, what was measured. Caller owns. */
char *mp_cost_profile_summary (const MpCostProfile *profile);

/* Where the `host` cluster's profile lives: $MPPLAN_PROFILE when set (empty: none),
 * else $XDG_CACHE_HOME/mpplan/host-profile.yaml (~/.cache/... without it). Caller owns;
 * NULL when MPPLAN_PROFILE is set empty. */
char *mp_cost_profile_host_path (void);
/* The profile that applies to CLUSTER, in this order: EXPLICIT_PATH (--profile) when
 * given; else the cluster file's `profile:` key (relative to the cluster file); else, for
 * the cluster named "host", the host profile (mp_cost_profile_host_path) when it exists
 * and was measured on this machine (same hostname). Returns a new profile (caller owns)
 * with its path in *PATH_OUT (caller owns; may be NULL), or NULL: with ERROR set when a
 * named profile cannot be loaded, without when none applies. */
MpCostProfile *mp_cost_profile_for_cluster (const MpCluster *cluster,
                                            const char *explicit_path, char **path_out,
                                            GError **error);
/* CLUSTER as PROFILE calibrates it: a copy (caller owns; CLUSTER is left as loaded) whose
 * devices PROFILE applies to are marked calibrated, their placeholder numbers (an
 * uncalibrated device, such as the host's cpu-core) replaced by the measured ones: the
 * copy bandwidth, and every non-zero peak by the fastest GEMM rate measured (the host
 * computes 16-bit formats in fp32). The copy's profile is PATH (may be NULL). *APPLIED
 * (may be NULL): how many node groups PROFILE applies to. */
MpCluster *mp_cost_profile_apply (const MpCostProfile *profile, const MpCluster *cluster,
                                  const char *path, guint *applied);

/* ==== the context ====================================================================== */

typedef struct _MpCostContext MpCostContext;

/* Precomputes what depends only on MODEL and CLUSTER (and PROFILE, may be NULL). MODEL,
 * CLUSTER and PROFILE are borrowed and must outlive the context. Cannot fail for a loaded
 * model and cluster. Caller owns. The context is read-only afterwards, so it may be
 * shared by threads. */
MpCostContext *mp_cost_context_new (const MpModel *model, const MpCluster *cluster,
                                    const MpCostProfile *profile);
void mp_cost_context_free (MpCostContext *ctx);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpCostContext, mp_cost_context_free)
const MpModel *mp_cost_context_model (const MpCostContext *ctx);
/* The first layer equal to LAYER (its class): equal layers cost alike under any config. */
guint mp_cost_layer_class_first (const MpCostContext *ctx, guint layer);
const MpCluster *mp_cost_context_cluster (const MpCostContext *ctx);
const MpCostProfile *mp_cost_context_profile (const MpCostContext *ctx);

/* One kind of device of the cluster, as the cost model sees it (one per node group). */
typedef struct {
  const MpDevice *device;        /* borrowed from the cluster */
  const MpDeviceCurve *curve;
  double gemm_scale;             /* normalises the GEMM shape model to its anchor */
  double power_rate;             /* mp_cost_power_rate at the device's power limit (1 under
                                  * a measured profile, which ran at it) */
  double mem_eff;                /* curve's, or the profile's measured copy rate */
  MpDtype dtype;                 /* compute dtype of the model's GEMMs on this device */
  const MpCostProfile *profile;  /* applies to this device, or NULL */
  double link_eff[MP_TIER_N];    /* curve's, or the profile's measured busbw / link rate */
  gboolean nvlink;               /* the node link is NVLink (NCCL's NVLINK latencies) */
  gboolean nvswitch;             /* ... through NVSwitches (NVLink SHARP possible) */
  gboolean domain_nvlink;        /* the domain link is NVLink ... */
  gboolean domain_nvswitch;      /* ... through NVLink switches (SHARP over the domain) */
} MpCostDevice;

/* The device of node group GROUP (0 for a homogeneous cluster). Borrowed. */
const MpCostDevice *mp_cost_device (const MpCostContext *ctx, guint group);
/* The node group whose device pipeline stage STAGE (< cfg->pp) of CFG runs at: the slowest
 * (lowest dense peak) its ranks sit on under CFG's rank order and placement; 0 on a
 * homogeneous cluster. The closed form, the memory model and the simulator all cost a
 * stage on this device. */
guint mp_cost_stage_group (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage);

/* ==== compute (compute.c) ============================================================== */

/* Cost of one kernel or fused group of kernels on one device. */
typedef struct {
  double time_s;       /* roofline + launches */
  double flops;        /* FLOPs executed (hardware: causal attention skips, recompute...) */
  double bytes;        /* memory traffic */
  double efficiency;   /* of the compute roof (0 for memory-only kernels) */
  gboolean memory_bound;
  guint kernels;
} MpKernelCost;

/* Efficiency (of peak) of a GEMM of BATCH independent (M x K) @ (K x N) products on a
 * device of curve CURVE, before the anchor normalisation: tile and wave quantisation over
 * the SMs and a tile's fixed cost, for the best of the library's tiles (mp_cost_gemm also
 * tries split-K). In (0, 1]. */
double mp_cost_gemm_shape_efficiency (const MpDeviceCurve *curve, double m, double n,
                                      double k, double batch);
/* Time of that GEMM on DEV at dtype DTYPE: the profile's table if it has one, else the
 * curve (anchored), roofline against memory (A, B read, C written at the dtype's size). */
void mp_cost_gemm (const MpCostDevice *dev, MpDtype dtype, double m, double n, double k,
                   double batch, MpKernelCost *out);
/* A grouped GEMM of GROUPS (M x K) @ (K x N) products, as DEV runs one (the MoE experts):
 * one grouped kernel (mp_cost_gemm with batch GROUPS), or where the curve's
 * gemm_group_calls says so GROUPS calls, each at its own shape's rate and call cost. */
void mp_cost_gemm_group (const MpCostDevice *dev, MpDtype dtype, double m, double n, double k,
                         double groups, MpKernelCost *out);
/* A memory-bound kernel moving BYTES (read + written) with FLOPS of arithmetic. */
void mp_cost_memory_kernel (const MpCostDevice *dev, double bytes, double flops,
                            MpKernelCost *out);
/* The element-wise class of OP of MODEL (MP_EW_NONE for anything not a norm, the MLP
 * activation or the loss): which measured rate of a profile its kernel runs at. */
MpEwClass mp_cost_op_ew_class (const MpModel *model, const MpOp *op);
/* A memory-bound kernel of class KLASS moving BYTES: mp_cost_memory_kernel, or the
 * measured rate of KLASS (forward or BACKWARD) in DEV's profile when that is slower
 * (a measured rate already includes the kernel's overheads). */
void mp_cost_elementwise_kernel (const MpCostDevice *dev, MpEwClass klass, gboolean backward,
                                 double bytes, MpKernelCost *out);
/* FLOPs a fused attention kernel executes, forward or BACKWARD (which redoes Q K^T: 2.5x
 * forward), causal ones skipping the blocks above the diagonal: what the time of
 * mp_cost_flash_attention is charged for, and what a measured attention rate counts. */
double mp_cost_attention_flops (double batch, double heads, double head_dim, double s_q,
                                double s_kv, gboolean causal, gboolean backward);
/* The same when each query sees only the last WINDOW keys (0, or >= S_KV: all of them):
 * a causal kernel computes the 128 x 128 blocks that meet the band (ir14). */
double mp_cost_attention_flops_window (double batch, double heads, double head_dim,
                                       double s_q, double s_kv, double window,
                                       gboolean causal, gboolean backward);
/* Fused (flash) attention forward or backward: BATCH sequences, HEADS query heads of
 * HEAD_DIM over S_Q queries and S_KV keys, causal or not. With a measured attention rate
 * in DEV's profile: its FLOPs at that rate. */
void mp_cost_flash_attention (const MpCostDevice *dev, MpDtype dtype, double batch,
                              double heads, double kv_heads, double head_dim, double s_q,
                              double s_kv, gboolean causal, gboolean backward,
                              MpKernelCost *out);
/* The same with a sliding WINDOW of keys per query (0: none); its efficiency is that of
 * a sequence as long as the window. */
void mp_cost_flash_attention_window (const MpCostDevice *dev, MpDtype dtype, double batch,
                                     double heads, double kv_heads, double head_dim,
                                     double s_q, double s_kv, double window,
                                     gboolean causal, gboolean backward, MpKernelCost *out);

/* The groups that one stage's first rank belongs to, and its device. Spans follow
 * topology's mp_cluster_span (per-rank bandwidth when all groups of the kind run). */
typedef struct {
  guint stage;
  const MpCostDevice *device;
  MpGroupSpan tp, cp;
  MpGroupSpan dp;                    /* the gradient group: dp * cp ranks */
  MpGroupSpan dp_shard, dp_rep;      /* HSDP (fsdp17): the ZeRO shard group (zero_shard
                                      * consecutive of dp's ranks; dp without HSDP) and
                                      * the replicate group (one rank of each shard group) */
  MpGroupSpan ep, edp;               /* expert-parallel; expert-gradient (edp ranks) */
  MpGroupSpan etp, etp_ep;           /* MoE (moe14): expert tensor-parallel; etp x ep (the
                                      * all-gather dispatcher's group) */
  MpGroupSpan pp_next;               /* this rank and its peer on the next stage */
  MpGroupSpan pp_ends;               /* first and last stage (tied embedding gradients) */
} MpStageSpans;

/* Does every tensor-parallel group (with TP) and every expert-parallel group (with EP)
 * under CFG lie inside one NVLink domain (one node, on a cluster without domains)? */
gboolean mp_cost_groups_in_domains (const MpCostContext *ctx, const MpParallelConfig *cfg,
                                    gboolean tp, gboolean ep);
/* Does every tensor-parallel group (with TP) and every expert-parallel group (with EP)
 * under CFG sit on one kind of device (on a heterogeneous cluster, a group of A100s and
 * H100s would run its per-layer collectives at the slower one's pace)? */
gboolean mp_cost_groups_one_device (const MpCostContext *ctx, const MpParallelConfig *cfg,
                                    gboolean tp, gboolean ep);
/* Fills *OUT for STAGE (< cfg->pp). Cannot fail for a checked CFG. */
void mp_cost_stage_spans (const MpCostContext *ctx, const MpParallelConfig *cfg, guint stage,
                          MpStageSpans *out);

/* One op of one layer for one micro-batch on one rank of a stage, at its split shape. */
typedef struct {
  MpKernelCost fwd, bwd;      /* bwd: input + weight gradients (no recomputation) */
  double dgrad_s, wgrad_s;    /* GEMMs: bwd's input- and weight-gradient products */
  double m, n, k, batch;      /* GEMM (attention: Q K^T) shape per rank, else 0 */
  double model_fwd_flops;     /* the IR's FLOPs for this rank (no causal skipping) */
} MpOpCost;

void mp_cost_op (const MpCostContext *ctx, const MpParallelConfig *cfg,
                 const MpStageSpans *spans, guint layer, guint op, MpOpCost *out);

/* One layer for one micro-batch on one rank: forward, and backward including whatever
 * CFG recomputes. TP collectives (Megatron: all-reduce, or all-gather + reduce-scatter
 * with SP) are on the critical path in forward; in backward the input-gradient ones
 * overlap the weight-gradient GEMM and only the excess counts. */
typedef struct {
  double compute_s;     /* kernels */
  double recompute_s;   /* backward only: the forward work redone first (its kernels and,
                         * for full recompute, its collectives again) */
  double tp_comm_s;     /* exposed TP collective time */
  double ep_comm_s;     /* MoE all-to-all (dispatch + combine) */
  double cp_comm_s;     /* exposed context-parallel KV exchange */
  double total_s;       /* compute + recompute + the exposed communication */
  double flops;         /* hardware FLOPs (recomputation included) */
  double model_flops;   /* the IR's FLOPs (no recomputation) */
  double bytes;         /* memory traffic */
} MpPhaseCost;

/* MoE (moe14): bytes one rank's all-to-all dispatch of LAYER sends to other ranks per
 * micro-batch, one way: its tokens x top-k x hidden x element size x (ep - 1) / ep, at
 * the busiest rank's load (model load_imbalance, capped by capacity_factor); 0 for a
 * dense layer. The combine sends as much back. */
double mp_cost_moe_dispatch_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg,
                                   guint layer);
void mp_cost_layer (const MpCostContext *ctx, const MpParallelConfig *cfg,
                    const MpStageSpans *spans, guint layer, MpPhaseCost *fwd,
                    MpPhaseCost *bwd);
/* mp_cost_layer of each of the N LAYERS under one CFG and SPANS (FWD, BWD: N each), the
 * memo's key made once: the planner's kernel floor asks for every layer class so. */
void mp_cost_layers (const MpCostContext *ctx, const MpParallelConfig *cfg,
                     const MpStageSpans *spans, guint n, const guint *layers,
                     MpPhaseCost *fwd, MpPhaseCost *bwd);

/* Everything the planner needs of one stage, per micro-batch and per step. */
typedef struct {
  guint stage;
  guint chunks;                       /* model chunks on this stage (vpp) */
  guint layers;                       /* model layers on this stage, over its chunks */
  double params;                      /* parameters one rank holds (after TP/EP) */
  MpPhaseCost fwd, bwd;               /* one micro-batch through all chunks of the stage */
  double p2p_bytes;                   /* activation (or gradient) sent to the next stage */
  double p2p_s;                       /* one such send/recv, per chunk boundary */
  double dp_reduce_s;                 /* gradient all-reduce / reduce-scatter, per step
                                       * (ZeRO-2/3: every micro-batch's, summed) */
  double dp_last_bucket_s;            /* its last bucket (exposed when overlapped) */
  double dp_gather_s;                 /* ZeRO 1/2 parameter all-gather after the step */
  double zero3_gather_s;              /* ZeRO-3 parameter all-gathers, per micro-batch */
  double zero3_wait_s;                /* ZeRO-3: what one micro-batch's passes wait for
                                       * those gathers and its reduce-scatters, layer by
                                       * layer (one layer ahead, the programs' order) */
  double tied_embedding_s;            /* first/last stage embedding-gradient all-reduce */
  double optimizer_s;                 /* optimizer step on this rank's shard */
} MpStageTime;

/* Overlap is not free (issue 16): the share of a device's compute that an NCCL
 * collective running beside it takes, NCCL's channels (one CTA, so one SM, each for the
 * collective's length) over the device's SMs; 0 without NCCL. Compute that overlaps a
 * collective for T seconds takes T x this longer (compute.c cites the figures). */
double mp_cost_overlap_share (const MpCostDevice *dev);
/* The time that overlapping COMM seconds of communication with COMPUTE seconds of
 * compute adds to the longer of the two at SHARE (mp_cost_overlap_share): the compute
 * stretched by SHARE x the overlapped time, less the slack a longer collective leaves. */
double mp_cost_overlap_penalty (double share, double comm, double compute);
/* MoE (acc16): of CFG's forward and backward chunk passes, the share that Megatron-Core's
 * combined 1F1B (cfg->moe_a2a_overlap) runs in pairs, one micro-batch's forward beside
 * another's backward, so that each one's dispatch and combine run under the other's
 * compute: every pass but the warm-up forwards and the cool-down backwards of the 1F1B
 * schedules (Megatron's num_warmup_microbatches, p - i - 1, interleaved 2 (p - i - 1) +
 * (v - 1) p, of m v), averaged over the stages; without pipelining all but the first
 * forward and the last backward. 0 without the overlap or under GPipe. */
double mp_cost_ep_overlap_paired (const MpParallelConfig *cfg);

/* Fills OUT[0 .. cfg->pp - 1]. The per-layer costs are computed once per distinct layer
 * and device, so this costs microseconds for any pp. */
void mp_cost_stage_times (const MpCostContext *ctx, const MpParallelConfig *cfg,
                          MpStageTime *out);
/* The same, and FWD_S, BWD_S, RS_S[0 .. pp * vpp - 1]: each model chunk's forward and
 * backward of one micro-batch, and (ZeRO <= 2; else 0) the reductions of its gradient
 * buckets that a backward issues: ZeRO-2 after each one, ZeRO 0/1 after the last micro-
 * batch's only (for whoever times the schedule chunk by chunk). */
void mp_cost_chunk_times (const MpCostContext *ctx, const MpParallelConfig *cfg,
                          MpStageTime *out, double *fwd_s, double *bwd_s, double *rs_s);

/* The cost model's accounting of one rank, for whoever lays out a step (the programs
 * below) and must count what the closed form counts. Parameters of LAYER one rank holds
 * under CFG, before ZeRO: DENSE (tensor-split or replicated), EXPERT (over tp * ep). */
void mp_cost_layer_params (const MpCostContext *ctx, const MpParallelConfig *cfg,
                           guint layer, double *dense, double *expert);
/* Word-embedding parameters per rank that the first and the last stage share when
 * embeddings are tied and pp > 1 (the last stage keeps a copy for the head); else 0. */
double mp_cost_tied_params (const MpCostContext *ctx, const MpParallelConfig *cfg);
/* Gradient bytes per parameter that the data-parallel collectives move (fp32_grads, or a
 * stack that reduces in fp32, mp_stack_fp32_reduce: 4) and the data-parallel bucket size. */
double mp_cost_grad_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg);
double mp_cost_bucket_bytes (const MpParallelConfig *cfg);
/* One data-parallel gradient bucket: layers [lo, lo + n) of a chunk, holding PARAMS of
 * this rank's parameters (dense or expert). */
typedef struct {
  guint lo, n;
  double params;
} MpGradBucket;
/* The one bucket rule the closed form, the memory model, the programs and the executor
 * share: the layers [FIRST, FIRST + COUNT) of a chunk with PARAMS[layer] parameters each,
 * from the last layer down (the order backward produces gradients), a bucket closing at
 * the end of the layer that brings it to CAP_PARAMS, or at the lowest layer with
 * parameters. Fills OUT (room for COUNT) in that order; returns how many. */
guint mp_cost_grad_buckets (const double *params, guint first, guint count, double cap_params,
                            MpGradBucket *out);
/* Bytes per micro-batch of the activation LAYER hands to the next layer when that one is
 * on another pipeline stage, and of its gradient coming back (MpStageTime.p2p_bytes). */
double mp_cost_boundary_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg,
                               guint layer);
/* Does LAYER's backward re-run forward work under CFG's recompute (full: blocks and mlp
 * layers, with the block method only the first recompute_num_layers of each chunk;
 * selective: layers with an op of the module set)? */
gboolean mp_cost_layer_recomputes (const MpCostContext *ctx, const MpParallelConfig *cfg,
                                   guint layer);
/* Does full recompute rebuild LAYER of MODEL under CFG (a block or mlp layer, and with
 * the block method one of the first recompute_num_layers of its chunk)? FALSE unless
 * cfg->recompute is full. Needs no cost context: the executor asks it too. */
gboolean mp_recompute_full_layer (const MpParallelConfig *cfg, const MpModel *model,
                                  guint layer);

/* Model FLOPs of one optimizer step (global batch = dp * micro_batch_size *
 * num_micro_batches sequences): the IR's matrix-product FLOPs, forward + backward; with
 * HARDWARE, plus what CFG recomputes (full: the blocks' forward again; selective without
 * flash attention: the attention core's; flash attention: Q K^T again in its backward,
 * half the core's forward). Causal skipping is not subtracted (the MFU/HFU convention). */
double mp_cost_step_flops (const MpCostContext *ctx, const MpParallelConfig *cfg,
                           gboolean hardware);

/* ==== communication (comm.c): in costmodel-comm.h ===================================== */

#include "costmodel/costmodel-comm.h"

/* ==== memory (memory.c) ================================================================ */

/* The memory a device's runtime holds besides the tensors (memory.c cites each): the CUDA
 * context, NCCL's buffers of the rank's communicators, the GEMM library's workspace, and
 * what the caching allocator loses to fragmentation; or the cluster file's
 * device_overhead in place of all but the workspace. */
typedef enum {
  MP_RESERVE_CONTEXT,
  MP_RESERVE_NCCL,
  MP_RESERVE_WORKSPACE,
  MP_RESERVE_FRAGMENTATION,
  MP_RESERVE_DEVICE_OVERHEAD,
  MP_RESERVE_N
} MpReserveKind;
const char *mp_reserve_kind_name (MpReserveKind kind);   /* "cuda_context", ... */

/* Memory of one rank of one pipeline stage at its peak, broken down. */
typedef struct {
  guint stage;
  double params;              /* parameters this rank holds (after TP/EP, before ZeRO) */
  double weights_bytes;       /* its share of the weights (ZeRO-3: sharded) */
  double grads_bytes;         /* gradients (ZeRO-1: full + its reduced shard; ZeRO-2/3:
                               * the accumulated shard + the buckets in flight) */
  double optimizer_bytes;     /* optimizer state, the fp32 master weights included where the
                               * stack keeps them apart (mp_stack_state_layout) */
  double activations_bytes;   /* saved for backward, all micro-batches in flight */
  double in_flight;           /* micro-batches of this stage's activations held */
  double transient_bytes;     /* logits/loss, recompute and backward buffers, ZeRO-3
                               * gathers, TP gathers, pipeline buffers */
  double reserve[MP_RESERVE_N]; /* the runtime's reserve by part (MpReserveKind) */
  double overhead_bytes;      /* their sum: the runtime's reserve */
  double total_bytes;         /* all of the above */
  double headroom_bytes;      /* what the plan must leave free besides (--memory-headroom) */
  double capacity_bytes;      /* the device's memory */
} MpStageMemory;


/* The memory every plan evaluated with CTX must leave free on each device: FRACTION of
 * its memory plus BYTES (plan --memory-headroom; default none). */
void mp_cost_context_set_memory_headroom (MpCostContext *ctx, double fraction, double bytes);

/* Fills *OUT for STAGE (< cfg->pp). */
void mp_cost_stage_memory (const MpCostContext *ctx, const MpParallelConfig *cfg,
                           guint stage, MpStageMemory *out);
/* Fills OUT[0 .. cfg->pp - 1] (may be NULL) and returns the stage with the largest
 * total_bytes - capacity_bytes (the binding one). */
guint mp_cost_memory (const MpCostContext *ctx, const MpParallelConfig *cfg,
                      MpStageMemory *out);
/* A floor for the search: a lower bound on the largest total_bytes + headroom_bytes -
 * capacity_bytes over the stages (> 0: some stage does not fit) of every
 * config that shares CFG's tp, cp, dp, pp, ep, etp, micro-batches, recompute, sequence
 * parallelism, precision and stack, whatever its schedule, vpp, layer split and rank
 * order, at CFG's ZeRO stage (the floor at ZeRO-3 bounds every stage); *PEAK (may be NULL): a
 * lower bound on mp_cost_memory's binding stage's total_bytes. */
double mp_cost_memory_floor (const MpCostContext *ctx, const MpParallelConfig *cfg,
                             double *peak);
/* The same floor for the configs that also share CFG's schedule and vpp and whose every
 * stage holds a block (CFG's split where it has one, else any split the search makes:
 * each chunk a block or more; any rank order): the stages' micro-batches in flight count,
 * each layer's state with its activations, and what a block brings to every stage
 * (ZeRO-3's gathers, ZeRO-2/3's buckets); at least the unscheduled floor. */
double mp_cost_memory_floor_scheduled (const MpCostContext *ctx, const MpParallelConfig *cfg,
                                       double *peak);
/* Activation bytes one transformer layer keeps per micro-batch on one rank under CFG
 * (no pipeline factor): the Korthikanti et al. 2022 Table 2 quantity. */
double mp_cost_layer_activation_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg,
                                       guint layer);
/* Micro-batches of STAGE's activations in flight at its peak under CFG's schedule
 * (chunk-weighted for the interleaved schedule: 1 = one micro-batch through all chunks). */
double mp_cost_in_flight (const MpParallelConfig *cfg, guint stage);

/* ==== describe (costmodel-describe.c) ================================================== */

/* `mpplan describe MODEL --cluster CLUSTER`: per-layer forward/backward time, FLOPs,
 * bytes and activations on stage 0's device under CFG (NULL: one device, micro-batch 1),
 * consecutive identical layers folded, then each distinct layer's ops. Caller owns. */
char *mp_cost_describe_layers_text (const MpCostContext *ctx, const MpParallelConfig *cfg);
/* The same as a JSON object in SI base units (schema_version 1). Caller owns. */
JsonNode *mp_cost_describe_layers_json (const MpCostContext *ctx,
                                        const MpParallelConfig *cfg);

/* ==== simulator (sim.c): in costmodel-sim.h =========================================== */

G_END_DECLS

#include "costmodel/costmodel-sim.h"
