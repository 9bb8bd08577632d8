/* exec-private.h - what the files of exec/ share: one rank's model state (its shards of
 * the weights, their gradients and optimizer state, activations in flight), the layer
 * forward and backward, and the timing record of a step. Not a public header. */
#pragma once
#include <glib.h>
#include "exec/backend.h"
#include "model/model.h"
#include "program/program.h"
#include "costmodel/costmodel.h"

G_BEGIN_DECLS

/* One parameter tensor as this rank holds it: its tensor-parallel shard (n floats, the
 * "local" tensor), padded to a multiple of dp so ZeRO splits it into equal shards. */
typedef struct {
  char name[24];
  guint layer;             /* owner layer */
  gsize n;                 /* local elements */
  gsize shard_n;           /* ZeRO shard: padded / dp (n when not sharded) */
  gsize padded;            /* shard_n * dp when sharded, else n */
  float *param;            /* (padded) the local tensor; under ZeRO-3 only while gathered */
  float *pshard;           /* ZeRO-3: this rank's persistent shard (shard_n) */
  float *grad;             /* (padded) ZeRO 0/1: accumulated over micro-batches; ZeRO 2/3:
                            * one micro-batch's, from its backward to its reduction */
  float *gshard;           /* ZeRO >= 1: the reduced shard (shard_n) */
  gboolean gshard_in_grad; /* ZeRO-1 in place: gshard is a block of grad, not its own */
  float *rs_tmp;           /* ZeRO 2/3: a micro-batch's reduce-scatter result (shard_n),
                            * while it is in flight */
  float *m, *v;            /* optimizer state over what this rank updates */
  guint gathers;           /* ZeRO-3: outstanding uses of the gathered param */
  gboolean replicated;     /* identical on every tp rank (counted once in the norm) */
  gboolean tp_partial;     /* replicated, but each tp rank's backward adds only what its
                            * own rows gave (sequence parallelism: norms, MLA's down
                            * projections): summed over tp once per step, before the
                            * optimizer (mp_exec_optimizer) */
  gboolean tied_copy;      /* the last stage's copy of the tied word embedding */
  guint pending;           /* DP stream op that last read its grad (0: none) */
  gboolean expert;         /* MoE expert weights: this ep rank's experts, their gradient
                            * reduced over the expert-data-parallel group */
  guint dp, dp_rank;       /* the replicas its gradient is reduced over (dp, or edp for
                            * experts; HSDP: the shard group) and this rank's place there */
  guint rep_rank;          /* HSDP (fsdp17): which shard group (0 without HSDP) */
  gboolean replicate;      /* HSDP: all-reduce gshard over the replicate group once the
                            * pending reduction is done (runner.c) */
  guint zero;              /* its ZeRO stage: the plan's, 0 over a group of one (experts
                            * with edp = 1: nothing to shard, reduce or gather) */
} ExTensor;

typedef struct {
  const MpLayer *ir;
  gboolean here;           /* on this rank's pipeline stage */
  GPtrArray *owns;         /* ExTensor* whose gradient this layer's bucket reduces */
  GPtrArray *uses;         /* ExTensor* its forward reads (owns, plus a shared embedding) */
  gpointer *acts;          /* per micro-batch: saved activations (layer kind's struct) */
  gboolean kept;           /* ZeRO-3: its forward's gather held to its backward (the root
                            * FSDP unit, mp_parallel_config_fsdp_root) */
} ExLayer;

typedef struct _MpExec MpExec;
struct _MpExec {
  MpBackend *be;
  const MpKernelOps *k;
  const MpModel *model;
  MpParallelConfig cfg;
  guint global_batch;
  guint64 seed;
  guint step;               /* 0-based, for the data and Adam's t */
  guint tp, dp, pp, tp_rank, dp_rank, pp_rank;  /* dp, dp_rank: the gradient group's,
                            * the dp * cp ranks with this rank's tp and pp coordinates */
  guint data_rank;          /* which sequences this rank trains on: the dp coordinate */
  guint cp, cp_rank;        /* context parallelism (model-cp.c) */
  int cp_next, cp_prev;     /* world ranks of the next and previous cp rank (the ring) */
  MpGroup *cp_group;        /* the cp ranks in cp-rank order, when K/V are all-gathered
                             * (mp_parallel_config_cp_allgather); else NULL */
  int *cp_pos;              /* [cp * Tl]: the positions each cp rank holds, in row order */
  guint *chunk_layers;      /* the plan's split, owned (cfg.chunk_layers points here), or
                             * NULL: the default split */
  guint *group_start;       /* [layer]: recompute_method=uniform, the first block of the
                             * layer's group (the layer itself outside groups); or NULL */
  guint zero;               /* effective stage (0 when dp is 1) */
  /* HSDP (fsdp17): ZeRO shards over groups of `shard` consecutive of the dp ranks
   * (shard_group, shard_rank in it) replicated over `reps` such groups (rep_group, the
   * same shard's holders, rep_rank in it). Without HSDP shard = dp, shard_group is
   * dp_group, reps = 1 and rep_group NULL. */
  guint shard, shard_rank, reps, rep_rank;
  MpGroup *shard_group, *rep_group;
  gboolean no_reshard;      /* ZeRO-3 reshard_after_forward = False */
  gboolean sp;
  MpGroup *tp_group, *dp_group, *ends_group, *world_group;
  /* MoE (Megatron-Core's expert grid over a stage's tp * dp ranks): experts split over
   * etp, ep ranks hold different experts, edp ranks the same ones (edp_group is dp_group
   * when ep = 1 and etp = tp) */
  guint etp, etp_rank, ep, ep_rank, edp, edp_rank;
  MpGroup *ep_group, *edp_group;
  /* MoE: the ranks holding parts of this rank's sequences (its tp and cp peers), when a
   * sequence is split (cp > 1, or experts folded over tp inside a sequence); else NULL */
  MpGroup *seq_group;
  MpGroup *etp_group;       /* MoE, 1 < etp < tp: the tp ranks of one etp group; else NULL */
  /* shapes: T positions per sequence, Tl = T / cp of them on this rank; N = mbs * Tl
   * rows per micro-batch, Ns of them on this rank's sequence-parallel shard */
  int mbs, T, Tl, N, Ns, C, NH, NKV, HD, NHl, NKVl, F, Fl, V, v0, Vl;
  int DV;                   /* value head width: HD, or MLA's v_head_dim */
  gboolean swiglu;
  guint M;                  /* micro-batches per step on this data rank */
  ExLayer *layers;
  guint n_layers;
  GPtrArray *tensors;       /* every ExTensor of this rank (owned) */
  float **input;            /* [layer * M + mb]: the layer's input (Ns, C), owned */
  float **dinput;           /* [layer * M + mb]: gradient of that input (Ns, C), owned */
  double loss_sum;          /* summed token losses of this step (last stage, tp rank 0) */
  double loss_count;        /* the step loss is loss_sum (over the world) / loss_count */
  float *teacher;           /* mlp: this rank's rows of the seeded target map (last stage) */
  double tp_s;              /* time inside TP collectives since last reset */
  double cp_s;              /* time waiting on the cp exchange since last reset */
  double ep_s;              /* time inside MoE dispatch and combine since last reset */
  guint64 moe_routed;       /* MoE: (token, expert) choices routed by this rank, and */
  guint64 moe_dropped;      /* those over an expert's capacity, since the start */
  gboolean recomputing;     /* a forward again for backward: losses already counted */
  float lr;
};

/* A layer's saved activations: named slots into one list, so release is uniform (the
 * layer kinds number their slots; model-layers.c, model-dense.c). */
#define MAX_BUFS 40
typedef struct _ExRoute ExRoute;   /* an MoE block's routing of the micro-batch (host) */
typedef struct {
  float *buf[MAX_BUFS];
  ExRoute *route;                  /* MoE blocks (model-moe.c) */
} Acts;

/* Builds rank state for MODEL under CFG (tp/dp/pp coordinates given), generating its
 * shards of the weights from SEED. NULL with MP_ERROR_INPUT for a model or config the
 * executor does not run, or MP_ERROR_RUNTIME (out of memory, MPI). Caller owns. */
MpExec *mp_exec_new (MpBackend *be, const MpModel *model, const MpParallelConfig *cfg,
                     guint global_batch, guint tp_rank, guint cp_rank, guint dp_rank,
                     guint pp_rank,
                     const guint *chunk_of_layer_stage, guint64 seed, GError **error);
void mp_exec_free (MpExec *ex);
/* The plan's model chunks (N_CHUNKS, CHUNK_LAYERS layers each): which blocks full
 * recompute of the first N per chunk rebuilds, and the groups of recompute_method=uniform,
 * which do not cross chunks. */
void mp_exec_set_chunks (MpExec *ex, const guint *chunk_layers, guint n_chunks);
/* Zeroes gradients and loss before a step. */
void mp_exec_step_begin (MpExec *ex, guint step);
gboolean mp_exec_forward (MpExec *ex, guint layer, guint mb, GError **error);
gboolean mp_exec_backward (MpExec *ex, guint layer, guint mb, GError **error);
/* The tp_partial gradients summed over tp, the global gradient norm (collective over the
 * world), then the optimizer update. */
gboolean mp_exec_optimizer (MpExec *ex, double *grad_norm, GError **error);
/* Step loss: mean over the global batch (collective over the world). */
gboolean mp_exec_step_loss (MpExec *ex, double *loss, GError **error);
/* Elements of the activation crossing from LAYER to LAYER + 1 (Ns * C for a transformer). */
gsize mp_exec_boundary_n (const MpExec *ex, guint layer);

/* ---- shared by the layer kinds (model-shared.c) ---- */
/* Transient buffers of one call (MP_MEM_OTHER, zeroed), released together: { ex }. */
typedef struct {
  MpExec *ex;
  float *p[16];
  int n;
} MpExecTmp;
float *mp_exec_tmp_floats (MpExecTmp *t, gsize n, GError **error);
void mp_exec_tmp_release (MpExecTmp *t);
/* A column GEMM's (N, WIDTH) input for its backward under sequence parallelism: SAVED
 * while the forward's gather is still held (a recompute just made it), else this rank's
 * rows SHARD gathered again into scratch of T, as Megatron-Core keeps only the rank's
 * rows and gathers again for the weight gradient (the backward all-gather the cost
 * model charges); SHARD itself without sequence parallelism. NULL on failure. */
const float *mp_exec_tp_regather_width (MpExec *ex, MpExecTmp *t, const float *saved,
                                        const float *shard, int width, GError **error);
float *mp_exec_act_alloc (MpExec *ex, Acts *a, int slot, gsize n, GError **error);
void mp_exec_acts_free (MpExec *ex, Acts *a);      /* NULL-safe */
void mp_exec_release_acts (MpExec *ex, guint layer, guint mb);
/* Tensor-parallel collectives, timed into ex->tp_s. All-reduce of BUF (n) over tp. */
gboolean mp_exec_tp_all_reduce (MpExec *ex, float *buf, gsize n, MpReduceOp op,
                                GError **error);
/* FULL (N, WIDTH) partial sums over tp -> OUT (Ns, WIDTH): all-reduce in place (returns
 * FULL), or reduce-scatter under sequence parallelism (returns OUT). NULL on failure. */
float *mp_exec_tp_reduce_width (MpExec *ex, float *full, float *out, int width,
                                GError **error);
/* SHARD (Ns, WIDTH) -> FULL (N, WIDTH) under sequence parallelism (all-gather); else
 * returns SHARD. NULL on failure. */
float *mp_exec_tp_gather_width (MpExec *ex, const float *shard, float *full, int width,
                                GError **error);

/* ---- context parallelism (model-cp.c) ---- */
/* Sets EX's cp, cp_rank, the held positions and the ring neighbours (world ranks, from
 * CFG's rank layout); FALSE with MP_ERROR_INPUT for a model cp cannot split. */
gboolean mp_exec_cp_setup (MpExec *ex, const MpParallelConfig *cfg, guint tp_rank,
                           guint cp_rank, guint dp_rank, guint pp_rank, GError **error);
/* The sequence position of local row ROW (of N). */
int mp_exec_position (const MpExec *ex, int row);
/* Rotary (or its backward) on the q and k heads of QKV (N rows, ld apart) at the held
 * positions. */
void mp_exec_rotary (MpExec *ex, float *qkv, int ld, gboolean backward, float theta);
/* The same on HEADS consecutive heads HD wide from X (N rows, LD apart). */
void mp_exec_rotary_heads (MpExec *ex, float *x, int ld, int heads, int hd, gboolean backward,
                           float theta);
/* Causal attention of this rank's queries over the whole sequence: the kernel when cp is
 * 1, else the ring (PROBS must then be NULL). FALSE when an exchange fails. */
gboolean mp_exec_attention_forward (MpExec *ex, float *out, float *lse, float *probs,
                                    const float *q, const float *k, const float *v,
                                    MpkAttnShape s, GError **error);
gboolean mp_exec_attention_backward (MpExec *ex, float *dq, float *dk, float *dv,
                                     const float *dout, const float *out, const float *lse,
                                     const float *probs, const float *q, const float *k,
                                     const float *v, MpkAttnShape s, GError **error);
/* A parameter tensor of N local elements for LAYER (values HOST), with its gradient and
 * optimizer state laid out for the ZeRO stage; added to ex->tensors (model-exec.c). */
ExTensor *mp_exec_tensor_new (MpExec *ex, guint layer, const char *name, gsize n,
                              const float *host, gboolean replicated, gboolean expert,
                              GError **error);
/* The group T's gradient is reduced over: dp_group, or edp_group for experts. */
MpGroup *mp_exec_tensor_group (const MpExec *ex, const ExTensor *t);

/* A norm's gain NAME.w (ones) and, for layernorm, its bias NAME.b (zeros), replicated,
 * owned by L (model-exec.c). */
gboolean mp_exec_add_norm_tensors (MpExec *ex, ExLayer *L, guint layer, const char *name,
                                   GError **error);

/* ---- attention variants (model-attn.c) ---- */
/* Block LAYER's variant tensors, after its attention output projection's: qk-norm gains
 * (q, k), sink logits (this rank's heads), post-norm gains (attention, MLP). */
gboolean mp_exec_attn_setup (MpExec *ex, ExLayer *L, guint layer, GError **error);
/* qk-norm of QKV's q and k heads (N rows, LD apart) in place, keeping RAW and RSTD. */
void mp_exec_qknorm_forward (MpExec *ex, float *qkv, int ld, const float *wq, const float *wk,
                             float *raw, float *rstd, float eps);
/* Its backward, in place on DQKV; the gains' gradients GQ, GK += this rank's heads'
 * part (tp_partial). */
void mp_exec_qknorm_backward (MpExec *ex, float *dqkv, int ld, float *gq, float *gk,
                              const float *raw, const float *rstd, const float *wq,
                              const float *wk);
/* FALSE with MP_ERROR_INPUT naming the variant of MODEL that BE has no kernels for. */
gboolean mp_exec_attn_check_backend (const MpModel *model, const MpBackend *be,
                                     GError **error);

/* ---- multi-head latent attention (model-mla.c) ---- */
/* How many tensors a block's MLA has (they stand where a qkv weight would), and whether
 * its q projection reads the gathered hidden state (no q_lora_rank) rather than a latent. */
int mp_exec_mla_n_tensors (const MpModel *m);
gboolean mp_exec_mla_reads_hidden (const MpModel *m);
/* Block LAYER's MLA tensors (after its first norm's), and its activation slots. */
gboolean mp_exec_mla_setup (MpExec *ex, ExLayer *L, guint layer, GError **error);
gboolean mp_exec_mla_acts (MpExec *ex, Acts *a, GError **error);
/* After the forward: lets the latents' sequence-parallel gathers go (backward gathers
 * them again, mp_exec_tp_regather_width). */
void mp_exec_mla_release_gathers (MpExec *ex, Acts *a);
/* From the first norm's output XLN (Ns, C) and, without q_lora_rank, its gathered H1
 * (N, C): the packed [q | k | v] heads QKV (N rows, LD apart), RoPE applied; saves into A.
 * FIRST: the index in L->uses of the first MLA tensor. */
gboolean mp_exec_mla_forward (MpExec *ex, const ExLayer *L, guint first, Acts *a,
                              const float *xln, const float *h1, float *qkv, int ld,
                              GError **error);
/* Its backward from DQKV (clobbered): the weights' gradients, and the gradient at XLN
 * (Ns, C), summed over tp, returned (DH1S or DH1, both zeroed scratch: (Ns, C), (N, C));
 * NULL on failure. */
float *mp_exec_mla_backward (MpExec *ex, const ExLayer *L, guint first, Acts *a, float *dqkv,
                             int ld, const float *xln, const float *h1, float *dh1,
                             float *dh1s, GError **error);

/* ---- mixture of experts (model-moe.c) ---- */
/* The MoE MLP's tensors of block LAYER (after its second norm's): shared experts, router,
 * this rank's experts. */
gboolean mp_exec_moe_setup (MpExec *ex, ExLayer *L, guint layer, GError **error);
/* H (N, C) -> OUT (N, C), partial sums over tp; saves into A (its MoE slots and route).
 * FIRST: the index in L->uses of the first MoE tensor. */
gboolean mp_exec_moe_forward (MpExec *ex, const ExLayer *L, guint first, Acts *a,
                              const float *h, float *out, GError **error);
/* DH (N, C) += the input gradient (partial over tp) from DOUT (N, C); weight gradients. */
gboolean mp_exec_moe_backward (MpExec *ex, const ExLayer *L, guint first, Acts *a,
                               const float *dout, const float *h, float *dh, GError **error);
/* Selective recompute's MoE modules (MODULES: MpRecomputeModule bits): moe_act lets go of
 * the experts' activation outputs, shared_experts of the shared experts' fc1 and
 * activation, after the forward; mp_exec_moe_backward rebuilds them first. */
void mp_exec_moe_selective_drop (MpExec *ex, Acts *a, guint modules);
void mp_exec_route_free (ExRoute *route);            /* NULL-safe */
/* The GEMMs an FP8 plan keeps out of FP8 (router, output head): the backend's
 * matmul_hp_*, or its matmul_* where it has none. */
void mp_exec_matmul_hp_forward (MpExec *ex, float *out, const float *inp, const float *weight,
                                const float *bias, int N, int C, int OC);
void mp_exec_matmul_hp_backward (MpExec *ex, float *dinp, float *dweight, float *dbias,
                                 const float *dout, const float *inp, const float *weight,
                                 int N, int C, int OC);
/* The model's activation on FC1 (R, f1) -> ACT (R, Fl); backward accumulates into DFC1. */
void mp_exec_act_forward (MpExec *ex, float *act, const float *fc1, int R, int Fl);
void mp_exec_act_backward (MpExec *ex, float *dfc1, const float *fc1, const float *dact,
                           int R, int Fl);

/* ---- the mlp architecture (model-dense.c) ---- */
/* Its tensors and the seeded target map; FALSE with MP_ERROR_INPUT for widths tp does
 * not divide. */
gboolean mp_exec_dense_setup (MpExec *ex, guint layer, GError **error);
gboolean mp_exec_dense_forward (MpExec *ex, guint layer, guint mb, GError **error);
gboolean mp_exec_dense_backward (MpExec *ex, guint layer, guint mb, GError **error);
gsize mp_exec_dense_boundary_n (const MpExec *ex, guint layer);

G_END_DECLS
