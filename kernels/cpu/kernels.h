/* kernels.h - the reference CPU kernels: forward and backward of every op the executor
 * runs, in plain C11 and fp32. These are what exec/'s host backend calls and what every
 * kernels/cuda/ twin (mpk_cuda_<op>_<dir>) is checked against, so they favour being
 * obviously right over being fast; only the GEMMs go through a fast library (OpenBLAS).
 * No GLib, no MPI, no allocation: a kernel touches only the buffers it is given.
 *
 * Conventions, for every kernel unless its comment says otherwise:
 *  - Row-major, last index fastest. N is a number of rows (tokens: N = B*T for a batch of
 *    B sequences of T positions). Shapes are given in comments as (dim, dim, ...).
 *  - Sizes are explicit: a tensor-parallel shard (local heads, local ffn columns, local
 *    vocabulary [v0, v0+Vl)) is just a smaller size, never a special case.
 *  - Forward kernels WRITE every element of their outputs (zeros included).
 *  - Backward kernels ACCUMULATE (+=) into every gradient they produce, input gradients
 *    and parameter gradients alike (as llm.c does): the caller zeroes gradient buffers
 *    once, and a tensor read by two ops (residual stream, tied embedding) just receives
 *    both contributions. A NULL gradient pointer means "not wanted" where noted.
 *    Exception: rotary backward, which transforms its buffer in place.
 *  - Elementwise forwards may run in place (out == inp); backwards must not alias a
 *    gradient they accumulate into with one they read.
 *  - Row statistics (norm mean/variance, softmax sums, dot products in attention, bias
 *    gradients, sums of squares) accumulate in double; products and sums over vectors
 *    (GEMMs, the attention-weighted sum of v) are fp32 as on a GPU. A CUDA twin should
 *    match to about 1e-5 relative in fp32.
 *  - Preconditions (NKV divides NH, HD even for rotary, targets in [0, V)) are the
 *    caller's: kernels do not check them.
 *
 * Index of this header:
 *   matmul.c     mpk_cpu_init_threads, mpk_cpu_matmul_forward/backward,
 *                mpk_cpu_grouped_matmul_forward/backward (MoE expert segments)
 *   fp8.c        mpk_fp8_round, mpk_fp8_scale, mpk_cpu_fp8_quantize,
 *                mpk_cpu_matmul_fp8_forward/backward (E4M3/E5M2, current scaling)
 *   embedding.c  mpk_cpu_embedding_forward/backward
 *   norm.c       mpk_cpu_layernorm_forward/backward, mpk_cpu_rmsnorm_forward/backward
 *   rotary.c     mpk_cpu_rotary_forward/backward
 *   attention.c  MpkAttnShape, mpk_cpu_attention_forward/backward,
 *                mpk_cpu_ring_attention_* (context parallelism)
 *   activation.c mpk_cpu_gelu_*, mpk_cpu_relu_*, mpk_cpu_swiglu_*, mpk_cpu_geglu_*,
 *                mpk_cpu_residual_*, mpk_cpu_add
 *   attn-extras.c mpk_cpu_qknorm_*, mpk_cpu_attention_sinks_*, mpk_cpu_softcap_*
 *   loss.c       mpk_cpu_crossentropy_forward/backward, _shard_stats/_shard_rescale/
 *                _shard_finish/_shard_backward (vocab parallel)
 *   optimizer.c  mpk_cpu_adamw_update, mpk_cpu_sgd_update, mpk_cpu_sumsq, mpk_cpu_scale
 *   random.c     mpk_rng_u64 (inline), mpk_cpu_fill_uniform/normal/tokens (+ _block)
 *   moe.c        mpk_cpu_router_forward/backward, mpk_cpu_router_aux, mpk_cpu_gather_rows,
 *                mpk_cpu_scatter_add_rows, mpk_cpu_rows_dot (the router's per-token code
 *                in router-row.h, shared with kernels/cuda/router.cu) */
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Lets the inline helpers below compile for both host and device in a .cu file. */
#ifdef __CUDACC__
#define MPK_HOSTDEV __host__ __device__
#else
#define MPK_HOSTDEV
#endif

/* ---- threads --------------------------------------------------------------------------- */

/* Sets how many threads OpenBLAS may use for the GEMMs (the executor runs one per rank:
 * mpk_cpu_init_threads (1)). Every other kernel is single-threaded. */
void mpk_cpu_init_threads (int n);

/* ---- matmul (matmul.c) ----------------------------------------------------------------- */

/* out (N, OC) = inp (N, C) . weight^T + bias, with weight (OC, C) — the nn.Linear layout:
 * one row per output feature, so a column-parallel shard (local output features) is a
 * contiguous block of rows and a row-parallel shard is its own (OC, C_local) matrix.
 * bias (OC) or NULL; a row-parallel layer's partial sums are all-reduced, so pass its bias
 * on one rank only (or add it after the reduction). Writes out. */
void mpk_cpu_matmul_forward (float *out, const float *inp, const float *weight,
                             const float *bias, int N, int C, int OC);
/* dinp (N, C) += dout (N, OC) . weight (OC, C);  dweight (OC, C) += dout^T . inp (N, C);
 * dbias (OC) += sum over rows of dout. Any of dinp, dweight, dbias may be NULL (not
 * wanted: the first layer needs no dinp, a bias-free layer has no dbias). */
void mpk_cpu_matmul_backward (float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const float *weight, int N, int C, int OC);

/* Grouped matmul (the expert GEMMs of one MoE layer): G segments of consecutive rows,
 * segment g ROWS[g] (>= 0) rows of inp (R, C) and out (R, OC), R the sum of ROWS, each
 * through its own weight (OC, C) at weight + g*OC*C and bias (OC) at bias + g*OC (bias
 * NULL: none) — mpk_cpu_matmul_forward/backward per segment. ROWS is host memory.
 * Forward writes out; backward accumulates dinp (R, C), dweight (G, OC, C), dbias (G, OC),
 * any of them NULL when not wanted. */
void mpk_cpu_grouped_matmul_forward (float *out, const float *inp, const float *weight,
                                     const float *bias, const int *rows, int G, int C, int OC);
void mpk_cpu_grouped_matmul_backward (float *dinp, float *dweight, float *dbias,
                                      const float *dout, const float *inp, const float *weight,
                                      const int *rows, int G, int C, int OC);

/* ---- FP8 (fp8.c): the reference of the cuda backend's cast-GEMM-cast ----------------- */

/* The two OCP FP8 formats (OCP 8-bit Floating Point Specification v1.0, 2023, table 1):
 * E4M3 (bias 7, no infinities, max 448, smallest subnormal 2^-9) for weights and
 * activations, E5M2 (bias 15, max 57344, smallest subnormal 2^-16) for gradients: the
 * "HYBRID" recipe of NVIDIA Transformer Engine (recipe.Format.HYBRID). */
typedef enum { MPK_FP8_E4M3, MPK_FP8_E5M2 } MpkFp8Format;
#define MPK_FP8_E4M3_MAX 448.0f    /* (1 + 6/8) * 2^8, OCP FP8 spec table 1 */
#define MPK_FP8_E5M2_MAX 57344.0f  /* (1 + 3/4) * 2^15, OCP FP8 spec table 1 */

/* X rounded to the nearest FMT value, ties to even, saturating: a finite value (or an
 * infinity) beyond the largest finite one gives that one with X's sign (CUDA's
 * __NV_SATFINITE conversion); NaN stays NaN. */
float mpk_fp8_round (float x, MpkFp8Format fmt);
/* Transformer Engine's current (per-tensor) scaling: the scale that maps the tensor's
 * amax onto FMT's largest value, fmax / amax (1 when amax is 0 or not finite). */
float mpk_fp8_scale (float amax, MpkFp8Format fmt);
/* out (n) = round (x * scale) / scale with scale = mpk_fp8_scale (amax of x): what a
 * tensor is worth after its cast to FMT and back (out may be x). Returns the scale. */
float mpk_cpu_fp8_quantize (float *out, const float *x, size_t n, MpkFp8Format fmt);
/* mpk_cpu_matmul_forward/backward on FP8 operands, the products summed in fp32: forward
 * casts inp and weight to E4M3; backward casts dout to E5M2 and inp, weight to E4M3 (each
 * tensor its own current scale). SCRATCH holds mpk_cpu_matmul_fp8_scratch (N, C, OC)
 * floats. Forward writes out; backward accumulates, as the fp32 matmul. */
size_t mpk_cpu_matmul_fp8_scratch (int N, int C, int OC);
void mpk_cpu_matmul_fp8_forward (float *out, float *scratch, const float *inp,
                                 const float *weight, const float *bias, int N, int C, int OC);
void mpk_cpu_matmul_fp8_backward (float *dinp, float *dweight, float *dbias, float *scratch,
                                  const float *dout, const float *inp, const float *weight,
                                  int N, int C, int OC);

/* ---- embedding (embedding.c) ----------------------------------------------------------- */

/* out (N, C): row n = wte[tokens[n] - v0] + wpe[n % T]. wte (Vl, C) holds the vocabulary
 * shard [v0, v0+Vl) (the whole vocabulary: v0 = 0, Vl = V); a token outside the shard
 * contributes zeros, so summing the outputs of all shards (an all-reduce) gives the full
 * lookup (Megatron's vocab-parallel embedding). wpe (T, C) learned positions, or NULL
 * (rotary models); it points at the row of the first position the rows use (a sequence
 * shard starting at t0 passes wpe + t0*C). Under vocab parallelism pass wpe on ONE shard
 * only, or the all-reduce counts it several times. Writes out. */
void mpk_cpu_embedding_forward (float *out, const int *tokens, const float *wte,
                                const float *wpe, int N, int T, int C, int v0, int Vl);
/* dwte (Vl, C) += dout rows of the tokens inside the shard (scatter-add);
 * dwpe (T, C) += dout summed over sequences (dwpe may be NULL). */
void mpk_cpu_embedding_backward (float *dwte, float *dwpe, const float *dout,
                                 const int *tokens, int N, int T, int C, int v0, int Vl);

/* ---- mixture of experts (moe.c) -------------------------------------------------------- */

/* Router: probs (N, E) = softmax of logits (N, E) per token; idx (N, K) the K most probable
 * experts, most probable first (ties: the lower expert); gates (N, K) their probabilities
 * renormalised to sum to 1 (Megatron-Core's default top-k, then softmax over the k; Mixtral's
 * norm_topk_prob). Writes all three. */
void mpk_cpu_router_forward (float *probs, int *idx, float *gates, const float *logits, int N,
                             int E, int K);
/* dlogits (N, E) += the gradient through the renormalised gates given dgates (N, K), plus
 * dprobs (N, E) straight on the probabilities (the aux loss's; NULL: none). */
void mpk_cpu_router_backward (float *dlogits, const float *probs, const int *idx,
                              const float *gates, const float *dgates, const float *dprobs,
                              int N, int E, int K);
/* Sequence-wise load-balancing loss over B sequences of T tokens (DeepSeek-V3 report eq.
 * 17-20; Switch Transformer's f.P form per sequence): per sequence alpha * sum_e f_e P_e,
 * f_e = E / (K T) * tokens choosing e, P_e = mean probability of e. Returns the sum over
 * the sequences; dprobs (N, E) += dscale * its gradient (NULL: not wanted). */
double mpk_cpu_router_aux (float *dprobs, const float *probs, const int *idx, int B, int T,
                           int E, int K, float alpha, float dscale);
/* out (R, C) row r = scale[r] * x[idx[r]] (scale NULL: 1): tokens permuted to experts.
 * Writes out. */
void mpk_cpu_gather_rows (float *out, const float *x, const int *idx, const float *scale,
                          int R, int C);
/* y[idx[r]] += scale[r] * x[r] (scale NULL: 1): expert outputs combined back (forward, y
 * pre-filled) or permuted gradients summed into their tokens (backward). */
void mpk_cpu_scatter_add_rows (float *y, const float *x, const int *idx, const float *scale,
                               int R, int C);
/* out (R) = dot (a[idx[r]], b[r]) over C: the gates' gradient. Writes out. */
void mpk_cpu_rows_dot (float *out, const float *a, const int *idx, const float *b, int R,
                       int C);

/* ---- normalization (norm.c) ------------------------------------------------------------ */

/* LayerNorm over the last dimension: out (N, C) = (inp - mean) * rstd * weight + bias.
 * Saves mean (N) and rstd (N) = 1/sqrt(var + eps) for backward (biased variance, as
 * PyTorch). bias (C) may be NULL. Writes out, mean, rstd. */
void mpk_cpu_layernorm_forward (float *out, float *mean, float *rstd, const float *inp,
                                const float *weight, const float *bias, int N, int C,
                                float eps);
/* dinp (N, C) +=, dweight (C) +=, dbias (C) += (dbias may be NULL; dinp may be NULL). */
void mpk_cpu_layernorm_backward (float *dinp, float *dweight, float *dbias, const float *dout,
                                 const float *inp, const float *weight, const float *mean,
                                 const float *rstd, int N, int C);
/* RMSNorm: out (N, C) = inp * rstd * weight, rstd (N) = 1/sqrt(mean(inp^2) + eps). */
void mpk_cpu_rmsnorm_forward (float *out, float *rstd, const float *inp, const float *weight,
                              int N, int C, float eps);
/* dinp (N, C) += (may be NULL), dweight (C) +=. */
void mpk_cpu_rmsnorm_backward (float *dinp, float *dweight, const float *dout,
                               const float *inp, const float *weight, const float *rstd,
                               int N, int C);

/* ---- rotary position embedding (rotary.c) ---------------------------------------------- */

/* Rotates, IN PLACE, NHR heads of HD (even) floats at the start of each of the B*T rows of
 * x; rows are ld floats apart (ld >= NHR*HD), so the q and k heads of a packed qkv row
 * ([q heads | k heads | v heads], see attention) are rotated in one call with NHR = NH + NKV.
 * Pairs are (i, i + HD/2) ("rotate half", as GPT-NeoX / Hugging Face Llama), angle
 * pos * theta^(-2i/HD) for i < HD/2, position pos = pos0 + (row % T): a sequence shard
 * starting at position pos0 gets the same result as the full sequence. */
void mpk_cpu_rotary_forward (float *x, int B, int T, int NHR, int HD, int ld, int pos0,
                             float theta);
/* The transpose (inverse) rotation, IN PLACE: turns the gradient at the rotation's output
 * into the gradient at its input. Writes (does not accumulate). */
void mpk_cpu_rotary_backward (float *dx, int B, int T, int NHR, int HD, int ld, int pos0,
                              float theta);

/* ---- causal attention with grouped-query heads (attention.c) --------------------------- */

/* q and k (B, T, NH or NKV, HD), v (B, T, NKV, DV), out (B, T, NH, DV), each row (one
 * position) ld* floats apart so they can live inside a packed buffer. The layout that fits a
 * column-parallel qkv GEMM is one (B*T, (NH + 2*NKV)*HD) buffer per rank holding its local
 * heads as [q heads | k heads | v heads]: q = qkv, k = qkv + NH*HD, v = k + NKV*HD, ldq =
 * ldkv = (NH + 2*NKV)*HD. Query head h reads kv head h / (NH/NKV). A head subset
 * (tensor parallel: local heads h0.., kv heads h0/(NH/NKV)..) is the same call on pointers
 * offset to its first head, with NH, NKV set to the local counts. */
typedef struct {
  int B, T;        /* sequences, positions (all of them: causal attention sees every key) */
  int NH, NKV;     /* query heads, key/value heads; NKV divides NH */
  int HD;          /* head dimension; scale 1/sqrt(HD) */
  int ldq, ldkv, ldo; /* row strides in floats of q (and dq), k and v (and dk, dv), out */
  int window;      /* sliding window: a query sees the last `window` keys, itself included
                    * (0: every earlier key) */
  float softcap;   /* scores soft-capped to softcap tanh (score / softcap) (0: none) */
  int DV;          /* value (and output) head dimension, 0: HD; MLA's v_head_dim differs */
  int ldv;         /* row stride of v (and dv), 0: ldkv */
} MpkAttnShape;

/* S's value head dimension and v row stride, their defaults resolved (for the CUDA
 * kernels' device code too). */
#ifdef __CUDACC__
#define MPK_HOST_DEVICE __host__ __device__
#else
#define MPK_HOST_DEVICE
#endif
static inline MPK_HOST_DEVICE int
mpk_attn_dv (MpkAttnShape s)
{
  return s.DV > 0 ? s.DV : s.HD;
}

static inline MPK_HOST_DEVICE int
mpk_attn_ldv (MpkAttnShape s)
{
  return s.ldv > 0 ? s.ldv : s.ldkv;
}

/* out = softmax(q k^T / sqrt(HD), causal, windowed and capped as s says) v. Writes out,
 * lse (B, NH, T) = the log of each softmax row's normaliser (scores in scaled units), and,
 * when probs is not NULL, the probabilities probs (B, NH, T, T) (zeros where the mask
 * hides a key): the "no flash" reference.
 * With probs NULL nothing quadratic is stored and backward recomputes the scores. */
void mpk_cpu_attention_forward (float *out, float *lse, float *probs, const float *q,
                                const float *k, const float *v, MpkAttnShape s);
/* dq +=, dk +=, dv += (strides as q, k, v); kv-head gradients summed over their query
 * group. Needs the forward's out and lse, and its probs if it stored them (else NULL:
 * recompute from q, k, lse). dout and out use ldo. */
void mpk_cpu_attention_backward (float *dq, float *dk, float *dv, const float *dout,
                                 const float *out, const float *lse, const float *probs,
                                 const float *q, const float *k, const float *v,
                                 MpkAttnShape s);

/* Ring attention (context parallelism): the causal attention of sequences split over
 * ranks, one block of keys at a time. A rank's s.T query rows per sequence sit at
 * positions QPOS (s.T entries, the same for every sequence); a block holds TK key and
 * value rows per sequence (rows s.ldkv apart, B * TK of them) at positions KPOS, and a
 * query sees the keys at positions <= its own. Forward: _begin, then _block for every
 * key block in any order (a running max M and sum L per row (B, NH, T), OUT unnormalised
 * in between), then _end; OUT and LSE are then those of mpk_cpu_attention_forward over
 * all the keys, to rounding. Backward: _backward_block for every key block, with the
 * forward's final OUT and LSE: dq += its share; dk +=, dv += the block's rows' (strides
 * as k, v). Summed over the blocks it is mpk_cpu_attention_backward, to rounding. */
/* The positions RANK of CP holds of a sequence of T (2 * CP divides T), Megatron-Core's
 * causal load balancing: chunks RANK and 2 CP - 1 - RANK of 2 CP equal chunks, so every
 * rank has the same causal work. POS gets T / CP entries, in row order. */
void mpk_cpu_cp_positions (int *pos, int T, int cp, int rank);
void mpk_cpu_ring_attention_begin (float *out, float *m, float *l, MpkAttnShape s);
void mpk_cpu_ring_attention_block (float *out, float *m, float *l, const float *q,
                                   const float *k, const float *v, MpkAttnShape s, int TK,
                                   const int *qpos, const int *kpos);
void mpk_cpu_ring_attention_end (float *out, float *lse, const float *m, const float *l,
                                 MpkAttnShape s);
void mpk_cpu_ring_attention_backward_block (float *dq, float *dk, float *dv,
                                            const float *dout, const float *out,
                                            const float *lse, const float *q,
                                            const float *k, const float *v, MpkAttnShape s,
                                            int TK, const int *qpos, const int *kpos);

/* ---- attention extras (attn-extras.c) -------------------------------------------------- */

/* qk-norm (Qwen3, Gemma 3): RMSNorm of every q head (weight wq, HD) and k head (wk, HD)
 * of the N packed qkv rows (ld floats apart, [NH q heads | NKV k heads | ...]), IN PLACE;
 * the heads before it go to raw (N, NH + NKV, HD) and their rstd to rstd (N * (NH + NKV))
 * for backward. Runs before rotary, as Hugging Face's Qwen3 and Gemma 3 do. */
void mpk_cpu_qknorm_forward (float *qkv, float *raw, float *rstd, const float *wq,
                             const float *wk, int N, int NH, int NKV, int HD, int ld,
                             float eps);
/* IN PLACE on dqkv's q and k heads: the gradient at the norm's output becomes that at
 * its input (writes, as rotary backward); dwq (HD) +=, dwk (HD) +=. */
void mpk_cpu_qknorm_backward (float *dqkv, float *dwq, float *dwk, const float *raw,
                              const float *rstd, const float *wq, const float *wk, int N,
                              int NH, int NKV, int HD, int ld);
/* Attention sinks (GPT-OSS): each head h's softmax also holds a learned logit sinks[h]
 * (scaled-score units) with no value. Turns the forward's out and lse (and probs when not
 * NULL) without it into those with it, IN PLACE: lse' = log (e^lse + e^sink), out and
 * probs times e^(lse - lse'). The attention backward given out' and lse' is then the
 * gradient of q, k and v with the sink. */
void mpk_cpu_attention_sinks_forward (float *out, float *lse, float *probs,
                                      const float *sinks, MpkAttnShape s);
/* dsinks (NH) += -sum over rows of e^(sink - lse') (dout . out'), from the final out'
 * and lse'. */
void mpk_cpu_attention_sinks_backward (float *dsinks, const float *dout, const float *out,
                                       const float *lse, const float *sinks,
                                       MpkAttnShape s);
/* Logit soft-capping (Gemma 2): x = cap tanh (x / cap), IN PLACE. Backward, IN PLACE from
 * the forward's output y: dx *= 1 - (y / cap)^2 (writes). */
void mpk_cpu_softcap_forward (float *x, size_t n, float cap);
void mpk_cpu_softcap_backward (float *dx, const float *y, size_t n, float cap);

/* ---- activations and residuals (activation.c) ------------------------------------------ */

/* GELU, tanh approximation (GPT-2, Megatron): 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))).
 * out (n) may be inp. */
void mpk_cpu_gelu_forward (float *out, const float *inp, size_t n);
/* dinp (n) += gelu'(inp) * dout. */
void mpk_cpu_gelu_backward (float *dinp, const float *inp, const float *dout, size_t n);
/* ReLU; out may be inp. Backward: dinp += (inp > 0) * dout. */
void mpk_cpu_relu_forward (float *out, const float *inp, size_t n);
void mpk_cpu_relu_backward (float *dinp, const float *inp, const float *dout, size_t n);
/* SwiGLU: inp (N, 2F) holds each row as [gate (F) | up (F)]; out (N, F) =
 * silu(gate) * up, silu(g) = g / (1 + exp(-g)). A column-parallel fc1 shard produces
 * [local gate | local up] per row with F the local ffn width. out must not alias inp. */
void mpk_cpu_swiglu_forward (float *out, const float *inp, int N, int F);
/* dinp (N, 2F) += both halves' gradients. */
void mpk_cpu_swiglu_backward (float *dinp, const float *inp, const float *dout, int N, int F);
/* GEGLU (Gemma): the SwiGLU layout with out = gelu(gate) * up (gelu as above). */
void mpk_cpu_geglu_forward (float *out, const float *inp, int N, int F);
void mpk_cpu_geglu_backward (float *dinp, const float *inp, const float *dout, int N, int F);
/* out (n) = a + b (out may be a or b). Backward: da += dout, db += dout (either NULL). */
void mpk_cpu_residual_forward (float *out, const float *a, const float *b, size_t n);
void mpk_cpu_residual_backward (float *da, float *db, const float *dout, size_t n);
/* y (n) += x: gradient accumulation between buffers. */
void mpk_cpu_add (float *y, const float *x, size_t n);

/* ---- softmax + cross-entropy (loss.c) -------------------------------------------------- */

/* losses (N) = logsumexp(logits row) - logits[target] for logits (N, V), targets (N) in
 * [0, V). One loss per position, NOT averaged: the mean (over the global batch, which only
 * the caller knows) is the caller's. Writes losses and lse (N) (lse may be NULL). */
void mpk_cpu_crossentropy_forward (float *losses, float *lse, const float *logits,
                                   const int *targets, int N, int V);
/* dlogits (N, V) += (softmax(logits) - onehot(target)) * scale, from the forward's lse.
 * scale is dloss/dloss_n, e.g. 1/(tokens in the global batch) for a mean loss. */
void mpk_cpu_crossentropy_backward (float *dlogits, const float *logits, const float *lse,
                                    const int *targets, float scale, int N, int V);

/* Vocab-parallel cross-entropy over logit shards (N, Vl) holding vocabulary [v0, v0+Vl):
 *   1. _shard_stats: lmax (N) = local row max, lsum (N) = sum exp(logit - lmax),
 *      tlogit (N) = target logit if the target is in this shard, else 0.
 *   2. caller: gmax = all-reduce MAX of lmax;
 *   3. _shard_rescale: lsum *= exp(lmax - gmax) (now relative to the global max);
 *   4. caller: all-reduce SUM of lsum and of tlogit (one call if they share a buffer);
 *   5. _shard_finish: lse = gmax + log(lsum), losses = lse - tlogit;
 *   6. _shard_backward: dlogits shard += (exp(logit - lse) - onehot) * scale.
 * With one shard (v0 = 0, Vl = V) this is exactly the unsharded kernel. */
void mpk_cpu_crossentropy_shard_stats (float *lmax, float *lsum, float *tlogit,
                                       const float *logits, const int *targets, int N,
                                       int Vl, int v0);
void mpk_cpu_crossentropy_shard_rescale (float *lsum, const float *lmax, const float *gmax,
                                         int N);
void mpk_cpu_crossentropy_shard_finish (float *losses, float *lse, const float *gmax,
                                        const float *gsum, const float *tlogit, int N);
void mpk_cpu_crossentropy_shard_backward (float *dlogits, const float *logits,
                                          const float *lse, const int *targets, float scale,
                                          int N, int Vl, int v0);

/* ---- optimizers and gradient norm (optimizer.c) ---------------------------------------- */

/* One AdamW step (decoupled weight decay, as PyTorch AdamW and llm.c) over n contiguous
 * elements, so a ZeRO shard is updated by passing pointers to its range:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr * ( (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * p ).
 * t is the 1-based step. Plain Adam without decay is weight_decay = 0. */
void mpk_cpu_adamw_update (float *param, const float *grad, float *m, float *v, size_t n,
                           float lr, float beta1, float beta2, float eps, float weight_decay,
                           int t);
/* SGD: with momentum (mom (n) not NULL): mom = momentum * mom + g, p -= lr * mom (PyTorch,
 * no dampening; mom starts at zero); without (mom NULL): p -= lr * g. */
void mpk_cpu_sgd_update (float *param, const float *grad, float *mom, size_t n, float lr,
                         float momentum);
/* Sum of squares in double (gradient norm: sum over shards and ranks, then sqrt). */
double mpk_cpu_sumsq (const float *x, size_t n);
/* x (n) *= s (gradient clipping). */
void mpk_cpu_scale (float *x, size_t n, float s);

/* ---- counter-based random numbers (random.c) ------------------------------------------- */

/* Element `index` of stream `stream` under `seed` is a pure function of the three:
 * splitmix64's finaliser applied to a per-(seed, stream) key plus the index. No state, so
 * any shard of a tensor is generated without the rest and every layout sees the same full
 * tensor: give each tensor its own stream id and index its elements as in the full,
 * unsharded row-major tensor. */
static inline MPK_HOSTDEV uint64_t
mpk_rng_mix64 (uint64_t z)
{
  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static inline MPK_HOSTDEV uint64_t
mpk_rng_u64 (uint64_t seed, uint64_t stream, uint64_t index)
{
  const uint64_t golden = UINT64_C (0x9e3779b97f4a7c15);
  uint64_t key = mpk_rng_mix64 (seed ^ mpk_rng_mix64 (stream * golden + golden));
  return mpk_rng_mix64 (key + (index + 1) * golden);
}

/* out[j] for j < n is element offset + j of the stream: uniform in [lo, hi) (24-bit
 * resolution), normal(mean, std) (Box-Muller on the two 32-bit halves, computed in
 * double), or token ids uniform in [0, vocab). */
void mpk_cpu_fill_uniform (float *out, size_t n, uint64_t seed, uint64_t stream,
                           uint64_t offset, float lo, float hi);
void mpk_cpu_fill_normal (float *out, size_t n, uint64_t seed, uint64_t stream,
                          uint64_t offset, float mean, float std);
void mpk_cpu_fill_tokens (int *out, size_t n, uint64_t seed, uint64_t stream,
                          uint64_t offset, int vocab);
/* The 2-D shard forms: out (rows, cols) is the block [r0, r0+rows) x [c0, c0+cols) of a
 * full row-major tensor with full_cols columns (element (r, c) has index r*full_cols + c).
 * A column- or row-parallel weight shard, or one of the [q | k | v] row groups of a qkv
 * shard, is one such block. */
void mpk_cpu_fill_uniform_block (float *out, uint64_t seed, uint64_t stream,
                                 size_t full_cols, size_t r0, size_t rows, size_t c0,
                                 size_t cols, float lo, float hi);
void mpk_cpu_fill_normal_block (float *out, uint64_t seed, uint64_t stream,
                                size_t full_cols, size_t r0, size_t rows, size_t c0,
                                size_t cols, float mean, float std);

#ifdef __cplusplus
}
#endif
