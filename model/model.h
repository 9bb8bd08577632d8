/* model.h - a neural network as mpplan sees it: layers made of ops, each with its shapes,
 * parameters, FLOPs, memory traffic and the activations it keeps for backward.
 *
 * Built once by mp_model_load() (YAML, a zoo name, or later a Hugging Face config.json)
 * and read-only afterwards; the cost model and the planner read the structs directly.
 * Not here: clusters, plans, time. Units: counts, FLOP, bytes (per token unless a name
 * says otherwise); "token" = one position of one sequence. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>
#include "common/units.h"

G_BEGIN_DECLS

typedef enum { MP_ARCH_TRANSFORMER, MP_ARCH_MLP } MpArch;
/* GEGLU (Gemma): a gated MLP like swiglu with gelu on the gate. MP_ACT_NONE stays last. */
typedef enum { MP_ACT_GELU, MP_ACT_SWIGLU, MP_ACT_RELU, MP_ACT_GEGLU, MP_ACT_NONE } MpActivation;
typedef enum { MP_NORM_LAYERNORM, MP_NORM_RMSNORM } MpNorm;
typedef enum { MP_POS_LEARNED, MP_POS_ROTARY } MpPosition;
typedef enum { MP_OPTIM_ADAM, MP_OPTIM_SGD } MpOptimizer;
/* MoE: where a token's top-k experts sit among the experts (and so the EP ranks and NVLink
 * domains its dispatch reaches). SPREAD: k distinct experts drawn evenly over all of them,
 * as a trained router's balanced optimum. BLOCKED: k consecutive experts, token t taking
 * t*k .. t*k+k-1 (mod experts), as NeMo AutoModel's FakeBalancedGate routes
 * (nemo_automodel/components/moe/layers.py, FakeBalancedGate.forward: indices =
 * arange(n_tokens * k).view(-1, k) % experts), which its benchmarks enable
 * (docs/performance-summary.mdx: "Fake balanced gate is enabled to simulate ideal expert
 * routing"; the examples/llm_benchmark _te_deepep recipes: fake_balanced_gate: true). */
typedef enum { MP_ROUTING_SPREAD, MP_ROUTING_BLOCKED } MpRouting;
/* attention (ir14): biases of the attention projections. AS_MODEL (0) follows `bias`;
 * QKV: on q, k and v only (Qwen2). */
typedef enum { MP_ATTN_BIAS_AS_MODEL, MP_ATTN_BIAS_NONE, MP_ATTN_BIAS_QKV, MP_ATTN_BIAS_ALL }
  MpAttnBias;

typedef enum {
  MP_OP_EMBEDDING,   /* token (+ learned position) lookup: memory-bound gather */
  MP_OP_NORM,        /* layernorm / rmsnorm over the hidden dimension */
  MP_OP_GEMM,        /* per token: out[1 x n] = in[1 x k] @ W[k x n], `count` times */
  MP_OP_ATTENTION,   /* core: softmax(Q K^T / sqrt(d)) V over the sequence, all heads */
  MP_OP_ELEMENTWISE, /* activation function, residual add, dropout, rotary */
  MP_OP_ROUTER,      /* MoE gate: a small GEMM plus top-k; also the token dispatch */
  MP_OP_LOSS,        /* softmax + cross-entropy over the vocabulary */
} MpOpKind;

/* How an op is divided among t tensor-parallel ranks (Megatron-LM's scheme). */
typedef enum {
  MP_SPLIT_NONE,     /* every TP rank does all of it (norms, residuals; with sequence
                      * parallelism these are split by sequence instead) */
  MP_SPLIT_COLUMN,   /* GEMM n split: each rank gets n/t columns; no reduction after */
  MP_SPLIT_ROW,      /* GEMM k split: partial sums, all-reduce (or reduce-scatter) after */
  MP_SPLIT_HEADS,    /* attention core: heads (and kv heads) divided over t */
  MP_SPLIT_VOCAB,    /* embedding / output GEMM / loss: vocabulary divided over t */
  MP_SPLIT_EXPERT,   /* MoE expert GEMMs: experts divided over the expert-parallel group */
} MpSplit;

typedef struct {
  char *name;            /* "qkv", "attn_core", "attn_out", "fc1", "gelu", "fc2", ... */
  MpOpKind kind;
  MpSplit split;
  /* GEMM and ROUTER shapes per token (M = number of tokens). For MoE expert GEMMs,
   * count = experts_per_token (each token goes through that many experts); the expert
   * activation op carries it too. Every per-token figure below already includes count;
   * count is 1 for all other ops. */
  double gemm_n, gemm_k, count;
  /* ATTENTION shape: query heads, kv heads, head dim; sequence length is the model's. */
  double heads, kv_heads, head_dim;
  /* attention (ir14): the value (and output) head width, = head_dim but for multi-head
   * latent attention; the sliding window in keys per query (0: full causal attention);
   * both on the ATTENTION op only. */
  double v_head_dim, window;
  double params;          /* parameters owned by this op (all experts for MoE); 0 for the
                           * output GEMM with tied embeddings, whose weight (gemm_n x gemm_k)
                           * is the token embedding's (a pipeline keeps it on both ends) */
  double active_params;   /* parameters a token goes through (MoE: top-k experts) */
  double fwd_flops;       /* per token, forward; matrix products only ("model FLOPs"):
                           * 0 for norms, elementwise ops, embeddings and the loss, which
                           * are memory-bound and costed by fwd_bytes */
  double bwd_flops;       /* per token, backward (input + weight gradients) */
  double fwd_bytes;       /* per token, memory traffic of the forward kernel(s) at the
                           * activation dtype (roofline for memory-bound ops); activations
                           * only: weights are read once per micro-batch, not per token */
  /* Activations kept for backward, per token, at the activation dtype (Korthikanti et al.
   * 2022 counting: 16-bit tensors, 1-byte dropout masks):
   *   act_bytes        - split by t under tensor parallelism,
   *   act_rep_bytes    - replicated under tensor parallelism, split by t only with
   *                      sequence parallelism (norm inputs, dropout masks, GEMM inputs
   *                      before a column-parallel GEMM),
   *   act_score_bytes  - the attention score terms (5 a s per token); split by t; dropped
   *                      by selective recompute and by fused (flash) attention. */
  double act_bytes, act_rep_bytes, act_score_bytes;
} MpOp;

typedef enum {
  MP_LAYER_EMBEDDING,    /* input embedding (and learned positions) */
  MP_LAYER_BLOCK,        /* a transformer block: attention + MLP (or MoE) */
  MP_LAYER_DENSE,        /* one MLP layer (architecture: mlp) */
  MP_LAYER_HEAD,         /* final norm + output projection + loss */
} MpLayerKind;

typedef struct {
  char *name;            /* "embedding", "block.0", ..., "head" */
  MpLayerKind kind;
  MpOp *ops;
  guint n_ops;
  gboolean moe;          /* block with an MoE MLP (routed experts; not a first-k dense one) */
  guint64 window;        /* attention (ir14): its sliding window, 0: full attention */
  /* Sums over ops (per token). */
  double params, active_params, fwd_flops, bwd_flops, fwd_bytes;
  double act_bytes, act_rep_bytes, act_score_bytes;
} MpLayer;

typedef struct {
  guint64 out;                 /* output features */
  MpActivation activation;     /* MP_ACT_NONE for a linear layer */
} MpMlpLayerSpec;

typedef struct _MpModel MpModel;
struct _MpModel {
  char *name;
  char *source;                /* file it came from, or "zoo:<name>" */
  MpArch arch;

  /* transformer hyper-parameters (zero for mlp) */
  guint64 n_blocks, hidden, heads, kv_heads, head_dim, ffn_hidden, vocab, seq_len;
  MpActivation activation;
  MpNorm norm;
  MpPosition position;
  gboolean tied_embeddings, bias;
  guint64 rope_theta;          /* rotary base (10000 unless a file says; costs nothing,
                                * launch files need it) */
  guint64 experts, experts_per_token;   /* experts == 0: dense */
  /* MoE (moe14): the shapes Megatron-Core's MoE layer and the HF MoE families use. */
  guint64 moe_ffn_hidden;      /* one routed expert's MLP width (--moe-ffn-hidden-size;
                                * ffn_hidden stays the dense blocks' width) */
  guint64 shared_experts;      /* experts every token goes through (DeepSeek
                                * n_shared_experts; Qwen2-MoE: 1); 0: none */
  guint64 shared_expert_ffn;   /* width of one shared expert; they run as one MLP of
                                * shared_experts x this, tensor-split over tp */
  guint64 first_k_dense;       /* leading blocks with a dense MLP of ffn_hidden
                                * (DeepSeek first_k_dense_replace) */
  double capacity_factor;      /* tokens an expert takes at most, over its mean
                                * (--moe-expert-capacity-factor); 0: dropless */
  double load_imbalance;       /* tokens of the busiest expert rank over the mean (>= 1).
                                * Default 1, balanced routing: the optimum of the
                                * load-balancing loss (Switch Transformer, Fedus et al.
                                * JMLR 2022, eq. 4: minimal at uniform routing) and of
                                * DeepSeek-V3's bias balancing (report sec. 2.1.2); a
                                * measured imbalance is the user's to set. The
                                * expert GEMMs and dispatch run at this, capped by the
                                * capacity factor (the rest is dropped) */
  MpRouting routing;           /* which experts a token's top-k are (default spread) */

  /* attention (ir14). head_dim is the query/key head width, independent of hidden /
   * heads (Qwen3, Gemma). Sliding windows: a windowed block's query sees the last
   * `window` keys (itself included); window_pattern[i % n_window_pattern] says whether
   * block i is windowed (TRUE) or full; no pattern with a window: every block windowed.
   * Multi-head latent attention (DeepSeek-V2/V3) when kv_lora_rank > 0: q through a
   * q_lora_rank latent (0: projected directly), K and V through one kv_lora_rank latent,
   * a qk_rope_head_dim rotary part shared by all heads; head_dim = qk_nope_head_dim +
   * qk_rope_head_dim; kv_heads = heads. */
  guint64 window;
  gboolean *window_pattern;
  guint n_window_pattern;
  gboolean attn_sinks;          /* a learned sink logit per head (GPT-OSS) */
  gboolean qk_norm;             /* RMSNorm of each q and k head (Qwen3, Gemma 3) */
  MpAttnBias attn_bias;         /* biases of the q/k/v and output projections */
  guint64 q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
  gboolean post_norms;          /* Gemma 2/3: attention and MLP outputs normalised too */
  gboolean embed_scale;         /* Gemma: embeddings multiplied by sqrt(hidden) */
  gboolean no_dropout;          /* trained without dropout (Llama, Qwen, ...): the residuals and
                                 * the embedding keep no 1-byte masks; zeroed: Korthikanti's */
  double attn_softcap, logit_softcap;  /* Gemma 2: tanh soft-capping (0: none) */

  /* mlp hyper-parameters (architecture: mlp) */
  guint64 input;               /* input features; seq_len is 1 for an MLP */
  MpMlpLayerSpec *mlp_layers;
  guint n_mlp_layers;

  /* training */
  guint64 global_batch;        /* sequences (samples) per optimizer step */
  MpDtype precision;           /* fp32, or bf16/fp16 mixed precision */
  MpOptimizer optimizer;

  /* the IR: embedding, blocks..., head (transformer) or dense layers (mlp) */
  MpLayer *layers;
  guint n_layers;

  /* totals */
  double params_total;         /* every parameter once (tied embeddings counted once) */
  double params_embedding;     /* input embedding (+ learned positions) */
  double params_active;        /* parameters one token goes through (MoE: top-k) */
  double fwd_flops_per_token;  /* forward, all layers including the output layer */
  double train_flops_per_token;/* forward + backward, no recompute */
  /* attention (ir14). Two conventions count attention FLOPs. Full-square (PaLM, Chowdhery
   * et al. 2022 app. B: 6N + 12 L H Q T; Korthikanti et al. 2022 eq. 7; what the op
   * fwd_flops above hold and what a plan's `mfu` uses): every query against every key
   * it could see without the causal mask, i.e. min(s, window) keys. Causal: only the
   * (query, key) pairs the mask keeps, s (s + 1) / 2 per sequence, or with a window W < s
   * W (W + 1) / 2 + (s - W) W; about half the full-square count for full attention.
   * Megatron-LM's num_floating_point_operations (so Megatron-Bridge's published TFLOP/s)
   * counts causally (tests/test-model.c checks two of its figures). */
  double train_flops_per_token_causal;
  /* Bytes one token adds to an inference KV cache, every block, at the activation dtype:
   * 2 kv_heads head_dim (K and V) per block, or with MLA the latent and the rotary key,
   * kv_lora_rank + qk_rope_head_dim. A windowed block keeps at most `window` tokens. */
  double kv_cache_bytes_per_token;
};

/* Loads a model from NAME_OR_PATH: an existing file path (or anything with a '/' or a
 * .yaml/.yml/.json suffix; a Hugging Face config.json when mp_model_file_is_hf), else a
 * zoo name (common/zoo.h; source "zoo:<name>"). Returns a new model (caller owns) or NULL with an
 * MP_ERROR_INPUT error listing every problem as FILE:LINE:COLUMN: message. */
MpModel *mp_model_load (const char *name_or_path, GError **error);
/* Loads from a YAML file path only. */
MpModel *mp_model_load_file (const char *path, GError **error);
/* Loads from YAML text in memory (NAME used in messages); for tests and fuzzing. */
MpModel *mp_model_load_data (const char *name, const char *data, gsize len, GError **error);
/* Loads a Hugging Face config.json (model/model-hf.c: GPT-2, Llama, Mistral, Mixtral,
 * Qwen2/3, Qwen3-MoE, BERT, Gemma 2/3, GPT-OSS, DeepSeek-V2/V3 and their key aliases).
 * Features mpplan cannot cost are refused by name: "PATH: unsupported feature: shared
 * experts (n_shared_experts)". Bad JSON, wrong types and missing keys are MP_ERROR_INPUT
 * naming the key. What is left out (a vision tower) or read as something equivalent (a
 * window covering the context) is appended to NOTES (may be NULL) as messages for
 * stderr. */
MpModel *mp_model_load_hf (const char *path, GPtrArray *notes, GError **error);
/* Training choices a config.json does not hold (0: the defaults): seq_len is the
 * context up to MP_HF_DEFAULT_SEQ_LEN (a note says when that is shorter than the
 * context), the batch about 2^20 tokens. */
#define MP_HF_DEFAULT_SEQ_LEN 4096
#define MP_HF_MAX_SEQ_LEN 10000000   /* MP_MODEL_MAX_DIM */
typedef struct {
  guint64 seq_len;             /* tokens per sequence */
  guint64 tokens_per_batch;    /* global batch = tokens_per_batch / seq_len sequences */
} MpHfOptions;
MpModel *mp_model_load_hf_with (const char *path, const MpHfOptions *opts, GPtrArray *notes,
                                GError **error);
MpModel *mp_model_load_hf_data (const char *name, const char *data, gsize len,
                                GPtrArray *notes, GError **error);
/* Is the file at PATH a config.json: named *.json, or starting with '{'? */
gboolean mp_model_file_is_hf (const char *path);
/* MODEL as model YAML (the examples/models format, every key explicit) that
 * mp_model_load reads back to the same model; COMMENT (may be NULL, may hold newlines)
 * becomes the header comment. Caller owns. */
char *mp_model_to_yaml (const MpModel *model, const char *comment);
/* Sets MODEL's sequence length (a transformer's; 1..10^7 and at least its sliding window)
 * and rebuilds its layers and totals for it, as if its file had said seq_len: SEQ_LEN; the
 * global batch (sequences) is kept. FALSE with MP_ERROR_INPUT, MODEL unchanged, when
 * SEQ_LEN is out of range. For runs that train a zoo model at another length
 * (bench/bench-accuracy). */
gboolean mp_model_set_seq_len (MpModel *model, guint64 seq_len, GError **error);
void mp_model_free (MpModel *model);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpModel, mp_model_free)

/* Does this YAML document look like a model (has 'architecture' or 'layers')? For
 * `mpplan validate`, which must tell file kinds apart. Borrowed root. */
struct _MpYamlNode;
gboolean mp_model_yaml_is_model (const struct _MpYamlNode *root);

/* Bytes per parameter of weights, gradients and optimizer state for the model's precision
 * and optimizer, unsharded (mixed-precision Adam: 2 + 2 + 12 = 16). */
void mp_model_state_bytes_per_param (const MpModel *model, double *weights, double *grads,
                                     double *optimizer);

/* Zoo: names of the bundled models, sorted; caller owns the strv. */
char **mp_model_zoo_list (void);

/* attention (ir14): the window of block BLOCK (0-based) in keys, 0 when it is full. */
guint64 mp_model_block_window (const MpModel *model, guint64 block);
/* Is ACT a gated MLP (swiglu, geglu): fc1 computes gate and up, 2 ffn wide? */
gboolean mp_activation_gated (MpActivation act);
/* The attention feature of MODEL that mpplan exec does not run (multi-head latent
 * attention combined with attention biases, qk-norm or layernorm), named for a refusal,
 * or NULL. Every other variant (MLA, windows, sinks, qk-norm, separate attention biases,
 * post-norms, scaled embeddings, soft-capping, geglu) runs. */
const char *mp_model_attention_extras (const MpModel *model);
/* Do the q/k/v projections, and the attention output projection, have biases? */
gboolean mp_model_qkv_bias (const MpModel *model);
gboolean mp_model_out_bias (const MpModel *model);

/* Names for printing. */
const char *mp_op_kind_name (MpOpKind kind);
const char *mp_split_name (MpSplit split);
const char *mp_activation_name (MpActivation act);
/* "spread" / "blocked", and back; FALSE (OUT unchanged) on another name. */
const char *mp_routing_name (MpRouting routing);
gboolean mp_routing_from_name (const char *name, MpRouting *out);

/* `mpplan describe`: name, shape, parameters, FLOPs per token, activation bytes per layer
 * (Korthikanti breakdown), training-state bytes and a per-layer table. Caller owns. */
char *mp_model_describe_text (const MpModel *m);
/* The same as a JSON object (schema_version 1, SI base units); caller owns the node. */
JsonNode *mp_model_describe_json (const MpModel *m);

G_END_DECLS
