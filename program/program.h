/* program.h - the plan's vocabulary: how a step is split over ranks (MpParallelConfig),
 * the instructions one rank's step is made of (MpProgram), the phases a step's time is
 * broken into (MpPhase, MpStepTime) and the kinds of memory it holds (MpMemKind).
 *
 * Plain data and names, shared by everything above it: the planner chooses configs and
 * writes programs, the cost model and its simulator time them, the executor runs them and
 * the report compares the phases predicted with the phases measured. It includes only
 * model/ and topology/ (a config is checked against a model and a cluster); nothing here
 * costs, searches or runs anything.
 *
 * Decisions:
 *  - Program *generation* stays in planner/ (program.c, program-print.c): laying out a
 *    step needs the evaluated plan (its layer split) and the cost model's accounting of
 *    each rank (bucket sizes, bytes and FLOPs per layer), and this module sits below the
 *    cost model. What lives here is what a program *is*, which everybody reads.
 *  - MpCollKind lives here, not in costmodel/: an instruction names its collective, and
 *    the executor's backends run the same kinds; the cost model's formulas over the kinds
 *    (bus factors, algorithms) stay in costmodel/.
 *  - One phase table: a new phase is one enum entry plus one name below (program.c) and
 *    its computation where it is measured or predicted; every reader, writer, printer
 *    and chart loops over MP_PHASE_N.
 *
 * Units: seconds, bytes, FLOP. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>
#include "model/model.h"
#include "topology/topology.h"

G_BEGIN_DECLS

/* ==== the parallel config (config.c) =================================================== */

typedef enum {
  MP_RECOMPUTE_NONE,       /* keep every activation for backward */
  MP_RECOMPUTE_SELECTIVE,  /* recompute the attention core (Korthikanti et al. 2022) */
  MP_RECOMPUTE_FULL,       /* keep only each block's input; recompute the block */
} MpRecompute;

/* Which blocks full recompute applies to when recompute_num_layers = N > 0 (Megatron
 * --recompute-method; with N = 0 every block is recomputed and its input kept). */
typedef enum {
  MP_RECOMPUTE_METHOD_BLOCK,    /* the first N blocks of each model chunk; the rest keep
                                 * every activation */
  MP_RECOMPUTE_METHOD_UNIFORM,  /* every block, in groups of N checkpointed together: one
                                 * input kept per group, a group rebuilt at a time */
} MpRecomputeMethod;

/* What selective recompute re-runs (Megatron --recompute-modules); a set of these bits.
 * Output-discarding ones (layernorm, moe_act) drop the op's output that the next op
 * keeps; the others checkpoint a submodule: its input is kept, what is inside is not. */
typedef enum {
  MP_RECOMPUTE_CORE_ATTN = 1 << 0,       /* the attention core (Megatron's default) */
  MP_RECOMPUTE_LAYERNORM = 1 << 1,       /* the two norms of a block */
  MP_RECOMPUTE_MLP = 1 << 2,             /* a dense MLP: fc1, activation, fc2 */
  MP_RECOMPUTE_MOE_ACT = 1 << 3,         /* the experts' activation function */
  MP_RECOMPUTE_MOE = 1 << 4,             /* the MoE layer: router, dispatch, experts */
  MP_RECOMPUTE_SHARED_EXPERTS = 1 << 5,  /* the shared experts of an MoE layer */
  MP_RECOMPUTE_OP = 1 << 6,              /* torchtitan's op-level policy (alone): a block
                                          * keeps its input, attention's output and every
                                          * other linear's output; the rest is re-run */
  MP_RECOMPUTE_MLA_UP_PROJ = 1 << 7,     /* MLA's latent norms, up projections and rotary,
                                          * their outputs (the core's Q, K, V) discarded */
  MP_RECOMPUTE_MODULES_ALL = (1 << 8) - 1
} MpRecomputeModule;

typedef enum {
  MP_SCHEDULE_1F1B,        /* PipeDream-flush: stage i of p holds min(p - i, m) */
  MP_SCHEDULE_GPIPE,       /* all forwards, then all backwards: every stage holds m */
  MP_SCHEDULE_INTERLEAVED, /* Megatron's interleaved 1F1B over vpp chunks per stage */
  MP_SCHEDULE_NONE,        /* layer placement, one micro-batch in flight */
} MpSchedule;

/* The parallel dimensions that number ranks, for MpParallelConfig.order. */
typedef enum { MP_DIM_TP, MP_DIM_CP, MP_DIM_DP, MP_DIM_PP, MP_DIM_N } MpParallelDim;

/* MoE (moe14): how tokens reach their experts (Megatron-Core --moe-token-dispatcher-type). */
typedef enum {
  MP_DISPATCH_ALLTOALL,    /* permute, all-to-all over ep (then all-gather over etp) */
  MP_DISPATCH_ALLGATHER,   /* all-gather every token over etp x ep, reduce-scatter back */
} MpDispatcher;

/* How context parallelism exchanges K/V: ring send/receives, each hidden behind one
 * block's attention (Megatron-LM --cp-comm-type p2p, Transformer Engine's default), or
 * one all-gather of every rank's K/V after the local block (--cp-comm-type allgather;
 * Llama 3 trained its long-context stage so, "all-gather based CP", Llama 3 paper
 * section 3.3.2; torch's context_parallel by default). Zeroed: the stack's own
 * (mp_stack_cp_allgather). */
typedef enum {
  MP_CP_COMM_STACK,
  MP_CP_COMM_P2P,
  MP_CP_COMM_ALLGATHER,
} MpCpComm;

/* The training stack a plan runs under (acc16): the same plan runs at different speed
 * under each, by the kernels it calls. Traits (docs/plan-file.md, "stack"), of which the
 * cost model uses the attention kernel:
 *  - megatron: Megatron-Core + Transformer Engine (the default): cuDNN fused attention
 *    (FlashAttention-3 class on Hopper and later), fused norms, bias-GeLU/SwiGLU and
 *    rotary, backward TP collectives under the gradient GEMMs.
 *  - nemo-automodel: PyTorch FSDP2 with Transformer Engine's kernels: attention as
 *    megatron's; MoE tokens through DeepEP.
 *  - torchtitan: PyTorch FSDP2; attention through scaled_dot_product_attention, whose
 *    flash backend is FlashAttention-2; norms and activations eager or torch.compile'd.
 *  - llm-foundry: Composer + PyTorch FSDP1; MPT attention through the Triton
 *    FlashAttention kernel (attn_impl: triton, as its published benchmarks ran).
 *  - deepspeed: DeepSpeed ZeRO with Hugging Face models and flash-attn 2.
 *  - pytorch: plain PyTorch (torchrun: DDP / FSDP2, DeviceMesh TP) with
 *    scaled_dot_product_attention: attention as torchtitan's.
 * The cost model uses the attention kernel (mp_stack_fa2_attention), the backward TP
 * overlap (mp_stack_overlaps_tp_backward), the Triton kernel (mp_stack_triton_attention),
 * the loss's precision (mp_stack_fused_loss), the optimizer's kernels
 * (mp_stack_unfused_optimizer), FP8's saved activations (mp_stack_fp8_saves_fp8,
 * mp_stack_fp8_saves_experts), the gates' place (mp_stack_gates_in_experts) and the
 * MoE dispatch (mp_stack_forwarded_dispatch), the experts' GEMM calls
 * (mp_stack_per_expert_gemm_calls), the gradients' reduce width (mp_stack_fp32_reduce),
 * FSDP1's gradient passes (mp_stack_fsdp1) and what torch's pipelining holds
 * (mp_stack_torch_pipelining). On A100 FlashAttention-2 is the native kernel
 * and on CPUs attention is GEMMs, so there the kernel trait costs the same. */
typedef enum {
  MP_STACK_MEGATRON,
  MP_STACK_NEMO_AUTOMODEL,
  MP_STACK_TORCHTITAN,
  MP_STACK_LLM_FOUNDRY,
  MP_STACK_DEEPSPEED,
  MP_STACK_PYTORCH,
  MP_STACK_N
} MpStack;

/* How a step is split over ranks; plain data (the planner builds one per plan). The
 * ranks used are dp * tp * pp * cp. Experts use Megatron-Core's second grid over the
 * same tp * cp * dp ranks of a pipeline stage (parallel_state.py, its expert rank
 * generator): etp fastest, then ep, then the expert-data-parallel rest, so ep may
 * exceed dp * cp when etp < tp (ep folded over tensor ranks). Experts are divided over
 * ep and tensor-split over etp; their gradients are reduced over
 * edp = tp * cp * dp / (etp * ep). With etp = tp this is ep carved out of dp * cp. */
typedef struct {
  guint dp, tp, pp, cp;        /* data, tensor, pipeline, context parallel sizes (>= 1) */
  guint vpp;                   /* model chunks per pipeline rank (interleaved); 1 otherwise */
  guint ep;                    /* expert parallel size (1 for dense models) */
  /* MoE (moe14) */
  guint etp;                   /* expert tensor parallel size; 0: tp (Megatron's default) */
  MpDispatcher dispatcher;     /* token dispatch (all-to-all when zeroed) */
  gboolean sequence_parallel;  /* Megatron SP: norms/dropout split by sequence over tp */
  guint zero;                  /* ZeRO stage 0-3 over the dp * cp replicas */
  /* HSDP (fsdp17): ZeRO shards over groups of zero_shard consecutive replicas (of the
   * dp * cp ranks in the gradient group's order) and replicates over the dp * cp /
   * zero_shard groups: gradients reduce-scattered in the shard group, then the shard
   * all-reduced over the replicate group; weights gathered in the shard group only
   * (torchtitan's data_parallel_shard_degree, DeepSpeed ZeRO++ hpZ, MiCS). 0: dp * cp. */
  guint zero_shard;
  gboolean no_reshard;         /* ZeRO-3: FSDP2 reshard_after_forward = False (a layer's
                                * gathered weights kept from forward through backward) */
  MpRecompute recompute;
  /* Recompute's extent (zero: every block, full; the attention core, selective). */
  MpRecomputeMethod recompute_method;  /* full with recompute_num_layers > 0 */
  guint recompute_num_layers;  /* full: N of the method; 0: every block */
  guint recompute_modules;     /* selective: MpRecomputeModule bits; 0: core_attn */
  guint micro_batch_size;      /* sequences per micro-batch */
  guint num_micro_batches;     /* micro-batches per optimizer step per replica */
  MpSchedule schedule;
  gboolean flash_attention;    /* fused attention: no score matrix in memory */
  gboolean fp32_grads;         /* gradients accumulated in fp32 (Megatron with bf16); else
                                * at the model's state_bytes_per_param gradient size */
  gboolean fp8;                /* Transformer Engine FP8 (hybrid: E4M3 forward, E5M2
                                * gradients) for the blocks' GEMMs; bf16 elsewhere */
  double bucket_bytes;         /* data-parallel gradient bucket; 0: 25 MiB (PyTorch DDP) */
  MpStack stack;               /* the training stack (acc16); zeroed: megatron */
  MpCpComm cp_comm;            /* cp > 1: the K/V exchange; zeroed: the stack's */
  gboolean moe_a2a_overlap;    /* MoE: Megatron-Core's combined 1F1B (Megatron-Bridge
                                * moe_a2a_overlap, --overlap-moe-expert-parallel-comm):
                                * one micro-batch's dispatch and combine run under an
                                * adjacent one's compute (mp_cost_ep_overlap_paired) */
  gboolean compile;            /* torch.compile on the model (torchtitan's
                                * training.compile): its element-wise ops fused by
                                * Inductor; without it an eager stack runs them op by op
                                * (mp_parallel_config_eager_ops) */
  /* Model layers (model->layers, embedding and head included) per model chunk, pp * vpp
   * entries in chunk order; chunk c runs on pipeline rank c % pp. NULL: blocks spread
   * evenly, the embedding on the first chunk and the head on the last. Borrowed. */
  const guint *chunk_layers;
  /* Rank numbering, innermost first (Megatron's default tp, cp, dp, pp). An order that
   * is not a permutation (e.g. all zero, as in a zeroed struct) means the default. */
  MpParallelDim order[MP_DIM_N];
  /* Rank -> device (world_size entries), NULL: rank r on device r. Borrowed. */
  const guint *placement;
} MpParallelConfig;

/* Sets every size to 1, 1F1B, flash attention on, default order, no chunk split. */
void mp_parallel_config_init (MpParallelConfig *cfg);
/* TRUE when CFG can run MODEL on CLUSTER: sizes >= 1, world fits, fp8 only on devices with
 * an FP8 rate, tp divides heads, kv
 * heads and ffn (mlp: every layer's outputs), cp divides the sequence, ep divides experts,
 * etp * ep divides tp * cp * dp, etp divides the expert width and tp the shared one,
 * etp != tp needs sequence parallelism when tp > 1, zero_shard divides dp * cp (below it
 * only with ZeRO and without expert parallelism), no_reshard only with ZeRO-3, vpp needs the interleaved schedule (whose micro-batches pp divides, as
 * Megatron-LM requires), chunk_layers sums to the layer count with no empty chunk (so
 * the embedding is on the first chunk and the head on the last), or without it every
 * chunk gets a block. Else FALSE with MP_ERROR_INPUT naming the first problem. */
gboolean mp_parallel_config_check (const MpParallelConfig *cfg, const MpModel *model,
                                   const MpCluster *cluster, GError **error);
/* MoE (moe14): the expert tensor-parallel size (etp, or tp when 0) and the
 * expert-data-parallel size tp * cp * dp / (etp * ep) under CFG. */
guint mp_parallel_config_etp (const MpParallelConfig *cfg);
guint mp_parallel_config_edp (const MpParallelConfig *cfg);
/* HSDP (fsdp17): the replicas a ZeRO shard spans (zero_shard, or dp * cp when 0 or when
 * ZeRO is off) and the replicate groups' size, dp * cp over that. */
guint mp_parallel_config_zero_shard (const MpParallelConfig *cfg);
guint mp_parallel_config_zero_replicas (const MpParallelConfig *cfg);
const char *mp_dispatcher_name (MpDispatcher d);
gboolean mp_dispatcher_from_name (const char *name, MpDispatcher *out);
/* "stack", "p2p", "allgather" and back (cp_comm_type in plans; "stack" is not written). */
const char *mp_cp_comm_name (MpCpComm c);
gboolean mp_cp_comm_from_name (const char *name, MpCpComm *out);
/* Does CFG exchange K/V by all-gather (cp_comm allgather, or zeroed under a stack that
 * does, mp_stack_cp_allgather)? FALSE without context parallelism. */
gboolean mp_parallel_config_cp_allgather (const MpParallelConfig *cfg);
/* Model chunks per pipeline rank: vpp under the interleaved schedule, else 1. */
guint mp_parallel_config_vpp (const MpParallelConfig *cfg);
/* Model chunks in all, pp * mp_parallel_config_vpp: the entries of chunk_layers. */
guint mp_parallel_config_chunks (const MpParallelConfig *cfg);
/* Rank strides under CFG's order, indexed by MpParallelDim: rank = sum over the four
 * dimensions of coordinate x stride (the numbering every group of the cost model uses). */
void mp_parallel_config_strides (const MpParallelConfig *cfg, guint stride[MP_DIM_N]);
/* A total order on configs, over every field: the sizes and choices (tp, pp, dp, cp, ep,
 * vpp, sequence_parallel, zero, recompute, micro_batch_size, schedule, then the rank
 * order, etp (effective), dispatcher, num_micro_batches, flash_attention, fp32_grads, fp8,
 * bucket_bytes, the recompute extent, the effective zero_shard, no_reshard,
 * moe_a2a_overlap, compile, cp_comm), then the layer
 * split (mp_parallel_config_chunks entries; NULL, the balanced split, first) and the
 * placement (world entries; NULL, the identity, first). 0: the same plan. */
int mp_parallel_config_compare (const MpParallelConfig *a, const MpParallelConfig *b);
/* mp_parallel_config_compare (A, B) == 0. */
gboolean mp_parallel_config_equal (const MpParallelConfig *a, const MpParallelConfig *b);
/* Lower-case names ("selective", "interleaved") and their inverses (case-insensitive;
 * the schedule also as "interleaved-1f1b", the plan files' spelling). */
const char *mp_recompute_name (MpRecompute r);
const char *mp_schedule_name (MpSchedule s);
gboolean mp_recompute_from_name (const char *name, MpRecompute *out);
/* "megatron", "nemo-automodel", "torchtitan", "llm-foundry", "deepspeed", "pytorch" and
 * back. */
const char *mp_stack_name (MpStack stack);
gboolean mp_stack_from_name (const char *name, MpStack *out);
/* Does STACK call FlashAttention-2-class attention kernels (no Hopper wgmma/TMA), rather
 * than cuDNN's / FlashAttention-3's? */
gboolean mp_stack_fa2_attention (MpStack stack);
/* Does STACK overlap the backward tensor-parallel collectives with the gradient GEMMs?
 * Megatron's linear layers launch the input-gradient all-reduce (with SP: the input
 * all-gather and the gradient reduce-scatter) asynchronously under the weight-gradient
 * GEMM (megatron/core/tensor_parallel/layers.py,
 * LinearWithGradAccumulationAndAsyncCommunication); PyTorch's DTensor tensor
 * parallelism (torchtitan without its opt-in AsyncTP, torchrun) and DeepSpeed's issue
 * them in line, so each is exposed ("Introducing Async Tensor Parallelism in PyTorch",
 * PyTorch forums, 2024: vanilla TP's collectives are serialized with the matmuls). */
gboolean mp_stack_overlaps_tp_backward (MpStack stack);
/* Does STACK compute the loss in one fused kernel on the 16-bit logits, keeping them and
 * their gradient at that size, rather than an fp32 softmax and fp32 gradient? llm-foundry
 * does: its models' default loss_fn is fused_crossentropy, flash-attn's CrossEntropyLoss
 * (llmfoundry/models/mpt/modeling_mpt.py), which keeps its input logits and one fp32
 * log-sum-exp per row and writes the gradient in the logits' dtype. NeMo AutoModel's
 * benchmark recipes (examples/benchmark/configs: qwen3_moe_30b_te_deepep.yaml,
 * gptoss_120b_te_deepep.yaml, deepseek_v3_te_deepep.yaml) take MaskedCrossEntropy with
 * fp32_upcast: false, a
 * cross_entropy on the bf16 logits: its saved log-softmax and its gradient are bf16, the
 * same bytes. megatron as Megatron-Bridge runs it too: its GPT provider turns on
 * cross_entropy_loss_fusion (src/megatron/bridge/models/gpt_provider.py, v0.2.0) and its
 * performance recipes pick Transformer Engine's kernel (scripts/performance/utils/
 * helpers.py: cross_entropy_fusion_impl = "te"), whose parallel_cross_entropy writes the
 * gradient into the logits in place and saves only them (transformer_engine/pytorch/
 * cross_entropy.py). Megatron-Core's unfused vocab-parallel loss (Megatron-LM's default,
 * --cross-entropy-loss-fusion off) and torchtitan's (cross_entropy on logits.float())
 * keep fp32. */
gboolean mp_stack_fused_loss (MpStack stack);
/* Does STACK's FP8 keep each FP8 GEMM's input for the weight gradient as the FP8 tensor
 * it cast (1 byte an element), rather than at 16 bits? Transformer Engine's linear layers
 * do (transformer_engine/pytorch/module/linear.py and layernorm_linear.py save the
 * quantized input for wgrad): megatron and nemo-automodel, and llm-foundry, whose fp8
 * precision swaps in te.Linear. torchtitan's and plain PyTorch's torchao float8 keep
 * the high-precision input and cast it again in backward. */
gboolean mp_stack_fp8_saves_fp8 (MpStack stack);
/* Does STACK weight each expert row by its router gate inside the experts (the activation
 * times the gate, before fc2), so that the combine back to the tokens is a plain sum that
 * keeps nothing for backward? Megatron-Core does since "Memory efficient token
 * permutation" (Megatron-LM 2659630, 2025-04-09: experts.py activation_func_with_probs /
 * weighted_bias_swiglu_impl; token_dispatcher.py unpermute without probs); its experts'
 * TE GroupedLinear also saves FP8 inputs as FP8 (grouped_linear.py: the quantized
 * inputmats, columnwise), as its dense layers do. Other stacks weight at the combine,
 * which keeps the k expert rows to form the gates' gradient. */
gboolean mp_stack_gates_in_experts (MpStack stack);
/* Does STACK's ZeRO-1 reduce-scatter its gradients in place, into this rank's block of
 * the full gradient buffer, rather than into a shard of its own? Megatron-Core's
 * distributed optimizer does: start_grad_sync reduce-scatters each bucket's grad_data
 * into local_data_view, its own shard of that buffer (megatron/core/distributed/
 * param_and_grad_buffer.py, Megatron-LM d98e8a6). DeepSpeed's stage 1 keeps the reduced
 * partition apart (its fp32 partition's gradient), and so is costed with a shard more. */
gboolean mp_stack_zero1_in_place (MpStack stack);
/* Does STACK's FP8 keep its experts' grouped GEMM inputs as the FP8 tensors it cast, and
 * the attention output projection's input at 16 bits (the attention core keeps that
 * tensor itself)? Megatron-Core does: TE GroupedLinear saves the quantized inputmats
 * (transformer_engine/pytorch/module/grouped_linear.py), and with a non-delayed FP8
 * recipe Megatron sets save_original_input on linear_proj, "the output of the fused
 * core_attn is saved by itself" (megatron/core/transformer/attention.py, Megatron-LM
 * 781e765, 2025-08-19). Other stacks' experts are kept at 16 bits. */
gboolean mp_stack_fp8_saves_experts (MpStack stack);
/* Does STACK run attention in the Triton FlashAttention kernel (the FA1-era Triton port)
 * rather than FlashAttention-2's CUDA one? llm-foundry's published benchmarks do: its
 * scripts/train/benchmarking/submit_benchmarks.py defaults --attn_impl to triton, which
 * sweep.sh (llm-foundry v0.0.4, PyTorch 2.0.1) does not override. */
gboolean mp_stack_triton_attention (MpStack stack);
/* Does STACK update parameters with one kernel (or one multi-tensor launch) per term of
 * Adam rather than one fused kernel? llm-foundry does: its recipes' optimizer is
 * Composer's DecoupledAdamW (`optimizer: name: decoupled_adamw`), whose step loops over
 * the parameters in Python with one in-place kernel per term
 * (composer/optim/decoupled_weight_decay.py, DecoupledAdamW.adamw), after its
 * gradient_clipping algorithm's norm pass. torchtitan does too: its build_optimizers
 * (torchtitan/optimizer.py, 2024-12) passes fused=optimizer.fused, off by default
 * (config_manager.py: store_true), and foreach=not fused to torch.optim.AdamW, whose
 * _multi_tensor_adamw runs each term as a _foreach_ op over all the tensors, after
 * utils.clip_grad_norm_ (training.max_norm 1.0 by default). Megatron and Transformer
 * Engine stacks use a fused Adam (Apex / TE FusedAdam). */
gboolean mp_stack_unfused_optimizer (MpStack stack);
/* Does STACK dispatch MoE tokens with DeepEP's normal (training) kernels, which send a
 * token once to each other NVLink domain holding one of its experts (RDMA) and fan it out
 * there over NVLink, rather than one copy per expert as a flat all-to-all? NeMo
 * Automodel's published MoE benchmarks do: their te_deepep configs set
 * backend.enable_deepep: true (NVIDIA-NeMo/Automodel,
 * examples/benchmark/configs/deepseek_v3_te_deepep.yaml and the others so named);
 * DeepEP's README, "Normal kernels with NVLink and RDMA forwarding". */
gboolean mp_stack_forwarded_dispatch (MpStack stack);
/* Does CFG run its blocks' element-wise ops as eager PyTorch does, one ATen kernel per
 * operator of the model's Python code (no torch.compile, cfg->compile unset), rather than
 * fused? torchtitan's and plain PyTorch's models do (torchtitan models/norms.py RMSNorm,
 * models/llama/model.py apply_rotary_emb and FeedForward); Transformer Engine stacks fuse
 * them in their own kernels and llm-foundry's MPT runs one ATen layer_norm per norm. */
gboolean mp_parallel_config_eager_ops (const MpParallelConfig *cfg);
/* Does STACK's attention copy each K/V head to the query heads it serves before the
 * kernel (grouped-query attention through scaled_dot_product_attention without
 * enable_gqa)? torchtitan's does (models/llama/model.py, Attention.forward: repeat_kv of
 * keys and values, an expand then a reshape that copies), eager or compiled, and so do
 * plain PyTorch models written like it; the fused-attention stacks read K/V as they are. */
gboolean mp_stack_repeats_kv (MpStack stack);
/* Does STACK exchange context-parallel K/V shards by one all-gather after the first
 * (local) sub-attention rather than ring send/receives, each overlapping one block?
 * torchtitan does by default: its parallelism.context_parallel_rotate_method is
 * "allgather" ("all-gather all kv shards on ranks after the first sub-SDPA computation",
 * torchtitan config/job_config.py), PyTorch's context_parallel rotate method; plain
 * PyTorch's context_parallel too. Megatron-Core (Transformer Engine's p2p CP) rings. */
gboolean mp_stack_cp_allgather (MpStack stack);
/* Does STACK shard ZeRO-3 parameters with PyTorch's FSDP2 (fully_shard), whose all-gather
 * lands in one flat buffer that foreach_all_gather_copy_out (torch/distributed/fsdp/
 * _fully_shard/_fsdp_collectives.py) then copies into each parameter's own tensor on the
 * compute stream? torchtitan, nemo-automodel and plain PyTorch do; FSDP1 (llm-foundry)
 * and DeepSpeed gather into the buffer the parameters view, Megatron into its own. */
gboolean mp_stack_fsdp2 (MpStack stack);
/* Is LAYER part of the root FSDP unit under CFG: parameters that ZeRO-3 gathers together
 * before the first layer of the chunk, keeps gathered into backward and reduce-scatters
 * after the chunk's last backward? torchtitan's apply_fsdp (parallelize_llama.py,
 * 2024-12) calls fully_shard on each transformer block and then on the whole model, whose
 * group is what is left: the token embedding, the final norm and the output projection
 * (the embedding and head layers). FSDP2 never reshards the root after forward
 * (_fsdp_state.py, _lazy_init: "For the root, do not reshard after forward since for
 * training, the parameters would be freed and all-gathered immediately"), and the root's
 * post-backward, whose inputs (token ids) need no gradient, runs in
 * _root_post_backward_final_callback at the end of backward, which the step then waits
 * for. Other stacks' embedding and head are gathered and reduced as their own units. */
gboolean mp_parallel_config_fsdp_root (const MpParallelConfig *cfg, const MpLayer *layer);
/* Does STACK shard ZeRO-2/3 parameters with PyTorch's FSDP1 (FullyShardedDataParallel and
 * its FlatParameter)? llm-foundry does (Composer's FSDP). Its backward passes over each
 * unit's unsharded gradient beside the reduce-scatter (compute.c, fsdp1_grad_passes). */
gboolean mp_stack_fsdp1 (MpStack stack);
/* Does STACK reduce its data-parallel gradients in fp32 whatever the compute dtype?
 * torchtitan does (training.mixed_precision_reduce, default and only choice "float32",
 * torchtitan/config_manager.py, as of its 2024-12 benchmarks) and so does llm-foundry: its
 * published benchmarks ran "MP Mode DEFAULT" (scripts/train/benchmarking/README.md, every
 * table), which Composer's get_mixed_precision (composer/trainer/mosaic_fsdp_utils.py,
 * the torch 2.0.1-era file) maps to MixedPrecision(param_dtype=bf16,
 * reduce_dtype=torch.float32, buffer_dtype=bf16). Megatron's is fp32_grads. */
gboolean mp_stack_fp32_reduce (MpStack stack);
/* Does STACK pipeline with torch.distributed.pipelining (PipelineStage and its schedules)?
 * torchtitan does, and plain PyTorch's pipelining too. Two of its habits cost memory
 * (memory.c, torch_pipelining_extra): with FSDP2 each micro-batch's backward but the last
 * runs with set_requires_gradient_sync(False) (stage.py, backward_maybe_with_nosync /
 * _configure_data_parallel_mode), so the stage's unsharded gradients accumulate at the
 * reduce dtype (FSDPParam.to_accumulated_grad_if_needed) until the last; and the last
 * stage appends every micro-batch's output to output_chunks (forward_one_chunk) for the
 * schedule's merge after the step, so it holds all of their logits. */
gboolean mp_stack_torch_pipelining (MpStack stack);
/* Does STACK train FP8 with torchao's float8 linears (dynamic tensorwise scaling) rather
 * than Transformer Engine's? torchtitan and plain PyTorch do (torchtitan's
 * float8.enable_float8_linear). Each Float8Linear (torchao/float8/float8_linear.py,
 * matmul_with_hp_or_float8_args) saves its 16-bit input and weight and casts at every use,
 * each cast after an amax pass over the tensor: input and weight forward; the output
 * gradient twice (one layout for each gradient GEMM), the weight and the input again
 * backward; no FP8 weight copy is cached between micro-batches. */
gboolean mp_stack_torchao_fp8 (MpStack stack);
/* Does STACK run a layer's local experts as one cuBLASLt GEMM call per expert (on four
 * streams), each call building its descriptors and querying cuBLASLt's heuristic on the
 * host, rather than one grouped kernel? Megatron-Core's TEGroupedMLP does: its
 * te.GroupedLinear calls general_grouped_gemm, whose nvte_multi_tensor_gemm takes the
 * CUTLASS grouped kernel only on Hopper with NVTE_USE_CUTLASS_GROUPED_GEMM=1 (off by
 * default) and otherwise multi_stream_cublas_gemm, a loop of nvte_cublas_gemm_v2 calls
 * (TransformerEngine transformer_engine/common/gemm/cublaslt_gemm.cu; 4 compute streams,
 * common/util/multi_stream.cpp), as in TE 2.9-2.10, the 25.11 containers' generation;
 * TE's later single-launch grouped-tensor path is opted into by
 * NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM (module/grouped_linear.py). The others'
 * experts are not costed per call. */
gboolean mp_stack_per_expert_gemm_calls (MpStack stack);
/* How STACK keeps a mixed-precision model's training state, per parameter (memory.c):
 *  - MP_STATE_MASTER (megatron, deepspeed): 16-bit weights and gradients; the optimizer
 *    keeps an fp32 master copy and its fp32 moments (Megatron's distributed optimizer,
 *    DeepSpeed ZeRO's fp32 partition).
 *  - MP_STATE_FP32 (torchtitan, llm-foundry, pytorch): the parameters stay fp32 and are
 *    the master (FSDP's sharded parameter; AMP's), their gradients fp32 (FSDP2 casts the
 *    reduced shard to the parameter's dtype, _fsdp_collectives.py foreach_reduce; FSDP1's
 *    MixedPrecision too, keep_low_precision_grads being False by default), fp32 moments; the 16-bit copies exist only gathered for compute
 *    (MixedPrecisionPolicy param_dtype; torchtitan's mixed_precision_param).
 *  - MP_STATE_16BIT (nemo-automodel): 16-bit parameters, gradients and moments with no
 *    master: its benchmark recipes leave model.torch_dtype unset, which from_config resolves
 *    to bfloat16, and step torch.optim.Adam, whose moments take the parameter's dtype
 *    (NVIDIA-NeMo/Automodel docs/guides/mixed-precision-training.mdx, "Risky Pattern";
 *    examples/llm_benchmark/qwen/qwen3_moe_30b_te_deepep.yaml and the other _te_deepep
 *    recipes). */
typedef enum {
  MP_STATE_MASTER,
  MP_STATE_FP32,
  MP_STATE_16BIT,
} MpStateLayout;
MpStateLayout mp_stack_state_layout (MpStack stack);
gboolean mp_schedule_from_name (const char *name, MpSchedule *out);
const char *mp_recompute_method_name (MpRecomputeMethod m);
gboolean mp_recompute_method_from_name (const char *name, MpRecomputeMethod *out);
/* A module set as "core_attn+mlp" (Megatron's order; 0 prints as "core_attn"), and back
 * from names joined by '+' (or ':'). Caller owns the string. FALSE on an unknown name. */
char *mp_recompute_modules_name (guint modules);
gboolean mp_recompute_modules_from_name (const char *names, guint *out);
/* The selective module set CFG means (its recompute_modules, or core_attn for 0). */
guint mp_recompute_modules_of (const MpParallelConfig *cfg);

/* ==== phases of a step (program.c) ====================================================== */

/* Where a step's time goes; the parts of one rank's (or the critical path's) step add up
 * to the step. Names ("compute", "tp_comm", ...) are the time_s keys of every JSON. */
typedef enum {
  MP_PHASE_COMPUTE,      /* kernels, recomputation included */
  MP_PHASE_TP,           /* exposed tensor-parallel collectives */
  MP_PHASE_CP,           /* context parallelism: the ring's K/V (and dK/dV) exchange */
  MP_PHASE_EP,           /* MoE (moe14): the experts' token dispatch and combine */
  MP_PHASE_PP,           /* pipeline sends and receives on the critical path */
  MP_PHASE_DP,           /* exposed gradient reduction, ZeRO gathers, tied embeddings */
  MP_PHASE_BUBBLE,       /* pipeline fill and drain, waiting on slower stages */
  MP_PHASE_OPTIMIZER,    /* the optimizer step */
  MP_PHASE_N
} MpPhase;

/* The step breakdown: seconds per phase (predicted by the planner and the simulator,
 * measured by the executor, compared by the report). */
typedef struct {
  double t[MP_PHASE_N];
} MpStepTime;

/* "compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "bubble",
 * "optimizer"; "?" out of range. */
const char *mp_phase_name (MpPhase phase);
/* The inverse (exact match); FALSE for any other name. */
gboolean mp_phase_from_name (const char *name, MpPhase *out);
/* The phase with the most time (ties: the first). */
MpPhase mp_step_time_dominant (const MpStepTime *time);
/* Adds member KEY to B's open object: an object of TIME's phases by name, in enum order
 * (non-finite values as null). The time_s object of every JSON mpplan writes. */
void mp_step_time_add_json (JsonBuilder *b, const char *key, const MpStepTime *time);
/* The same object as a node. Caller owns. */
JsonNode *mp_step_time_to_json (const MpStepTime *time);

/* ==== memory (program.c) ================================================================ */

/* What memory holds, the parts of a breakdown (the memory_bytes keys after "peak"). */
typedef enum {
  MP_MEM_WEIGHTS,
  MP_MEM_GRADIENTS,
  MP_MEM_OPTIMIZER,      /* optimizer state, fp32 master weights included */
  MP_MEM_ACTIVATIONS,
  MP_MEM_OTHER,          /* transient buffers: gathers, messages, logits, scratch, overhead */
  MP_MEM_N
} MpMemKind;

/* "weights", "gradients", "optimizer", "activations", "other"; "?" out of range. */
const char *mp_mem_kind_name (MpMemKind kind);

/* ==== collectives (program.c) =========================================================== */

typedef enum {
  MP_COLL_ALL_REDUCE,
  MP_COLL_ALL_GATHER,
  MP_COLL_REDUCE_SCATTER,
  MP_COLL_ALL_TO_ALL,
  MP_COLL_BROADCAST,
  MP_COLL_SEND_RECV,
  MP_COLL_N
} MpCollKind;

/* "all_reduce", "all_gather", ... (nccl-tests' names with underscores); "?" else. */
const char *mp_coll_kind_name (MpCollKind kind);

/* ==== programs: one rank's training step as instructions (program.c) =================== */

/* A plan expands into one program per rank (planner/ writes them); the simulator
 * (costmodel/sim.c) and the executor (exec/) interpret the same programs.
 *
 * The builder assumes: instructions are issued in program order; each stream runs its own
 * in order; an instruction on the PP or DP stream starts once the compute work issued
 * before it is done (its data is ready); a SEND holds up nothing after it, whatever its
 * receiver does (MPI_Isend; with NCCL, not in order behind later receives); a RECV holds
 * up the compute work after it until its data has arrived. Under these rules every
 * program set planner/ builds runs to the end (tests/test-program.c). */

typedef enum {
  MP_STREAM_COMPUTE,     /* kernels, and the tensor-parallel collectives that block them */
  MP_STREAM_PP,          /* pipeline send / receive */
  MP_STREAM_DP,          /* gradient reduction, ZeRO parameter gathers, tied embeddings */
  MP_STREAM_N
} MpStream;

typedef enum {
  MP_INSN_FORWARD,       /* forward of one model layer for one micro-batch, with the
                          * tensor/context/expert-parallel collectives inside it */
  MP_INSN_BACKWARD,      /* backward of one layer for one micro-batch (input and weight
                          * gradients, and its TP collectives); with `recompute` set it
                          * first re-runs what the plan recomputes */
  MP_INSN_SEND,          /* activations (forward) or their gradients (backward) to `peer` */
  MP_INSN_RECV,          /* the matching receive from `peer` (same tag) */
  MP_INSN_REDUCE_GRADS,  /* data-parallel all-reduce (ZeRO 0) or reduce-scatter (ZeRO 1-3,
                          * as the cost model) of one gradient bucket, layers [layer, layer +
                          * n_layers), issued when its last gradient is ready: in the last
                          * micro-batch (ZeRO-3: in every micro-batch) */
  MP_INSN_GATHER_PARAMS, /* all-gather of parameters: of one layer before its forward and
                          * again before its backward (ZeRO-3, issued one layer ahead; the
                          * layer's FORWARD / BACKWARD waits for it, as for a receive), or
                          * of a bucket's updated shards after the optimizer (ZeRO 1/2) */
  MP_INSN_REDUCE_TIED,   /* all-reduce of the tied embedding's gradient (first, last stage) */
  MP_INSN_WAIT,          /* the compute stream waits until `stream`'s work issued so far is
                          * done (before the optimizer: every gradient reduced) */
  MP_INSN_OPTIMIZER,     /* optimizer step on this rank's parameters (or ZeRO shard) */
  MP_INSN_N
} MpInsnKind;

/* The ranks a collective runs over, relative to the rank running it. */
typedef enum {
  MP_GROUP_NONE,         /* not a collective */
  MP_GROUP_DP,           /* dense gradients: the dp * cp ranks with this rank's tp, pp
                          * (HSDP: the zero_shard of them in its shard group) */
  MP_GROUP_EDP,          /* expert gradients: the dp * cp / ep of those with its experts */
  MP_GROUP_PP_ENDS,      /* tied embeddings: its peers on the first and the last stage */
  MP_GROUP_DP_REP,       /* HSDP: one rank of each shard group, the same shard's holders */
  MP_GROUP_N
} MpCommGroup;

typedef struct {
  MpInsnKind kind;
  MpStream stream;       /* where it runs (WAIT: the stream waited on) */
  guint chunk;           /* model chunk (virtual stage); for F/B/SEND/RECV */
  guint layer;           /* model layer (F/B); first layer of a bucket (REDUCE/GATHER) */
  guint n_layers;        /* layers a bucket or gather covers (1 for F/B) */
  guint micro_batch;     /* F/B/SEND/RECV */
  gboolean recompute;    /* BACKWARD re-runs recomputed forward work first */
  gint peer;             /* SEND/RECV: the other rank (world rank); -1 otherwise */
  guint tag;             /* SEND/RECV: equal on a send and its receive, unique per pair */
  guint bucket;          /* REDUCE_GRADS: bucket number on this rank, in issue order */
  MpCollKind coll;       /* collectives: which one */
  double bytes;          /* bytes moved (comm) or model bytes touched (F/B) */
  double flops;          /* F/B: FLOPs executed (recomputation included) */
  MpCommGroup group;     /* REDUCE_GRADS, GATHER_PARAMS, REDUCE_TIED: over which ranks */
} MpInsn;

typedef struct {
  guint rank;            /* world rank */
  guint stage;           /* pipeline rank */
  guint dp_rank, tp_rank, cp_rank;
  MpSchedule schedule;   /* the plan's, with its shape, for listings */
  guint pp, vpp, n_micro_batches;
  MpInsn *insns;
  guint n_insns;
} MpProgram;

void mp_program_free (MpProgram *program);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpProgram, mp_program_free)

/* Wall-clock record of one instruction of a program as the executor ran it (seconds, the
 * backend's clock); exec/ measures it, report/ draws it. */
typedef struct {
  double t0, t1;           /* issue and end */
  double tp_s;             /* inside tensor-parallel collectives (FORWARD / BACKWARD) */
  double cp_s;             /* waiting on the context-parallel ring (FORWARD / BACKWARD) */
  double ep_s;             /* inside MoE token dispatch and combine (FORWARD / BACKWARD) */
  double pp_s;             /* completing a receive whose data had arrived */
  double wait_pp_s;        /* blocked on a receive whose data had not arrived, or on the
                            * other pipeline end before the tied embedding's reduction
                            * (bubble) */
  double wait_dp_s;        /* blocked on a ZeRO-3 gather or a reduction still in flight */
} MpInsnTime;
const char *mp_insn_kind_name (MpInsnKind kind);
const char *mp_stream_name (MpStream stream);
const char *mp_comm_group_name (MpCommGroup group);

G_END_DECLS
