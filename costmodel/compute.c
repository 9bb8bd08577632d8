/* compute.c - time of an op on one device, of a layer on one rank, of a pipeline stage.
 *
 * An op's time is a roofline, max (FLOPs / (peak x efficiency), bytes / (bandwidth x
 * efficiency)), plus a launch overhead per kernel. GEMM efficiency comes from the shape
 * (tile and wave quantisation over the SMs, a tile's fixed cost, split-K), anchored to one
 * measured large GEMM per device class (curves.c) or read from a calibration profile.
 * Tensor-parallel ops are costed at their split shapes, so a TP-8 GEMM that fills a
 * fraction of a wave is as slow as it really is. A layer adds Megatron's tensor-parallel
 * collectives, MoE all-to-alls and context-parallel exchanges, and recomputation.
 * Units: s, FLOP, bytes. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/costmodel-private.h"

#include <math.h>
#include <string.h>

/* ---- kernels ------------------------------------------------------------------------- */

/* The device's rate at DTYPE; a dtype it lacks runs at fp32, or failing that at its
 * fastest rate (a file may list only bf16). Never 0: the loader requires one peak. A
 * board held below its rated power runs every unit at the lower clock (power_rate). */
static double
peak (const MpCostDevice *dev, MpDtype dtype)
{
  const double *p = dev->device->peak_flops;
  if (p[dtype] > 0)
    return p[dtype] * dev->power_rate;
  if (p[MP_DTYPE_FP32] > 0)
    return p[MP_DTYPE_FP32] * dev->power_rate;
  double best = 0;
  for (int d = 0; d < MP_DTYPE_N; d++)
    best = MAX (best, p[d]);
  return best * dev->power_rate;
}

static double
mem_rate (const MpCostDevice *dev)
{
  return dev->device->mem_bw_Bps * dev->mem_eff;
}

/* Efficiency of one tile choice, before the anchor: the tile's own speed, the useful part
 * of the last partial tiles, the busy part of the last partial wave, and the main loop's
 * share of a tile's time (one division: this runs millions of times in a search). */
static double
tile_efficiency (const MpDeviceCurve *c, const MpGemmTile *tile, double m, double n,
                 double k, double batch, double split)
{
  if (c->small_dim_half > 0)
    {
      /* A CPU core: only very small dimensions lose (loop overheads, no register block). */
      double d = MIN (m, MIN (n, k));
      return d / (d + c->small_dim_half);
    }
  double rows = ceil (m / tile->m) * tile->m, cols = ceil (n / tile->n) * tile->n;
  guint64 ctas = (guint64) (batch * (rows / tile->m) * (cols / tile->n) * split);
  guint64 slots = (ctas + c->sms - 1) / c->sms * c->sms;
  double kk = k / split;
  return tile->speed * (m * n * (double) ctas * kk)
         / (rows * cols * (double) slots * (kk + c->k_overhead));
}

double
mp_cost_gemm_shape_efficiency (const MpDeviceCurve *curve, double m, double n, double k,
                               double batch)
{
  g_return_val_if_fail (curve != NULL, 1);
  if (!(m > 0 && n > 0 && k > 0))
    return 1;
  double best = 0;
  for (guint i = 0; i < curve->n_tiles; i++)
    best = MAX (best, tile_efficiency (curve, &curve->tiles[i], m, n, k, MAX (batch, 1), 1));
  return best;
}

/* The anchor scale of DEV for DTYPE: fp32 on a GPU runs without tensor cores, at its own
 * plateau. */
static double
gemm_scale (const MpCostDevice *dev, MpDtype dtype)
{
  const MpDeviceCurve *c = dev->curve;
  if (dtype == MP_DTYPE_FP32 && c->klass != MP_DEVICE_CLASS_CPU)
    return dev->gemm_scale * c->fp32_simt_eff / c->gemm_anchor_eff;
  return dev->gemm_scale;
}

/* mp_cost_gemm with the output written at OUT_ELT bytes an element (FP8 GEMMs write
 * bf16). */
static void
gemm_cost (const MpCostDevice *dev, MpDtype dtype, double out_elt, double m, double n,
           double k, double batch, MpKernelCost *out)
{
  memset (out, 0, sizeof *out);
  batch = MAX (batch, 1);
  if (!(m > 0 && n > 0 && k > 0))
    return;
  const MpDeviceCurve *c = dev->curve;
  double elt = mp_dtype_bytes (dtype);
  double flops = 2 * m * n * k * batch;
  double c_elems = out_elt == elt ? m * n : m * n * out_elt / elt;
  double bytes = (m * k + k * n + c_elems) * batch * elt;
  double pk = peak (dev, dtype), bw = mem_rate (dev);
  out->flops = flops;
  out->bytes = bytes;
  out->kernels = 1;

  double measured = mp_cost_profile_gemm_flops (dev->profile, dtype, m * batch, n, k);
  /* A CPU computes 16-bit formats in fp32, so the fp32 table measured them. */
  if (measured == 0 && dev->curve->klass == MP_DEVICE_CLASS_CPU)
    measured = mp_cost_profile_gemm_flops (dev->profile, MP_DTYPE_FP32, m * batch, n, k);
  if (measured > 0)
    {
      /* A measured rate already includes the kernel's overheads. */
      out->time_s = MAX (flops / measured, bytes / bw);
      out->efficiency = measured / pk;
      out->memory_bound = bytes / bw > flops / measured;
      return;
    }

  double scale = gemm_scale (dev, dtype), best = G_MAXDOUBLE, best_eff = 0;
  for (guint i = 0; i < c->n_tiles; i++)
    {
      const MpGemmTile *tile = &c->tiles[i];
      double ctas = batch * ceil (m / tile->m) * ceil (n / tile->n);
      for (guint s = 1; s <= c->max_split_k; s++)
        {
          /* Split K only while one wave is not full (shallow parts lose in k_overhead). */
          if (s > 1 && ctas * (s - 1) >= c->sms)
            break;
          double eff = MIN (1.0, scale * tile_efficiency (c, tile, m, n, k, batch, s));
          double t = MAX (flops / (pk * eff), bytes / bw);
          /* Split-K writes s fp32 partial products and reads them back to sum them. */
          if (s > 1)
            t += 8 * s * m * n * batch / bw;
          if (t < best)
            {
              best = t;
              best_eff = eff;
            }
        }
    }
  out->efficiency = best_eff;
  out->memory_bound = bytes / bw >= flops / (pk * best_eff);
  out->time_s = best + c->launch_s;
}

void
mp_cost_gemm (const MpCostDevice *dev, MpDtype dtype, double m, double n, double k,
              double batch, MpKernelCost *out)
{
  g_return_if_fail (dev != NULL && out != NULL);
  gemm_cost (dev, dtype, mp_dtype_bytes (dtype), m, n, k, batch, out);
}

/* ---- the GEMM memo --------------------------------------------------------------------
 * A search prices the same few thousand GEMM shapes millions of times (every layer-memo
 * miss re-costs its ops), so gemm_cost's answers are kept in CTX per device of CTX and
 * shape. The key holds every input gemm_cost reads that is not fixed for a device of the
 * context (the dtype, the output width and the shape, doubles by their bits), so a hit is
 * the very result a call would give. A device not of CTX (a caller's copy) is costed
 * afresh. */
#define GEMM_MEMO_WORDS 6

/* Is DEV one of CTX's devices (CTX may be NULL)? Then its index in *AT. By address, as DEV
 * need not point into the array. */
static gboolean
context_device (const MpCostContext *ctx, const MpCostDevice *dev, guint64 *at)
{
  if (ctx == NULL)
    return FALSE;
  guintptr off = (guintptr) dev - (guintptr) ctx->devices;
  *at = off / sizeof *dev;
  return off < ctx->n_devices * sizeof *dev && off % sizeof *dev == 0;
}

static void
gemm_cost_memo (const MpCostContext *ctx, const MpCostDevice *dev, MpDtype dtype,
                double out_elt, double m, double n, double k, double batch,
                MpKernelCost *out)
{
  guint64 at;
  if (!context_device (ctx, dev, &at))
    {
      gemm_cost (dev, dtype, out_elt, m, n, k, batch, out);
      return;
    }
  guint64 key[GEMM_MEMO_WORDS] = { at * MP_DTYPE_N + dtype };
  const double shape[GEMM_MEMO_WORDS - 1] = { out_elt, m, n, k, batch };
  memcpy (key + 1, shape, sizeof shape);
  MpCostContext *memo = (MpCostContext *) ctx;          /* the memo only: see its field */
  const MpKernelCost *hit = cm_memo_get (memo->gemm_memo, key, GEMM_MEMO_WORDS);
  if (hit != NULL)
    {
      *out = *hit;
      return;
    }
  gemm_cost (dev, dtype, out_elt, m, n, k, batch, out);
  cm_memo_put (&memo->gemm_memo, key, GEMM_MEMO_WORDS, out, sizeof *out);
}

/* GROUPS products as DEV runs a grouped GEMM: one kernel over all of them, or one call
 * each, the profile's rate looked up at one call's rows (not the group's) and each call's
 * overhead paid. CTX (may be NULL) holds the GEMM memo. */
static void
group_cost (const MpCostContext *ctx, const MpCostDevice *dev, MpDtype dtype, double out_elt,
            double m, double n, double k, double groups, MpKernelCost *out)
{
  groups = MAX (groups, 1);
  if (!dev->curve->gemm_group_calls)
    {
      gemm_cost_memo (ctx, dev, dtype, out_elt, m, n, k, groups, out);
      return;
    }
  gemm_cost_memo (ctx, dev, dtype, out_elt, m, n, k, 1, out);
  out->time_s *= groups;
  out->flops *= groups;
  out->bytes *= groups;
  out->kernels = (guint) ceil (groups);
}

void
mp_cost_gemm_group (const MpCostDevice *dev, MpDtype dtype, double m, double n, double k,
                    double groups, MpKernelCost *out)
{
  g_return_if_fail (dev != NULL && out != NULL);
  group_cost (NULL, dev, dtype, mp_dtype_bytes (dtype), m, n, k, groups, out);
}

/* ---- FP8 (Transformer Engine) ---------------------------------------------------------
 * Transformer Engine's FP8 recipe ("Using FP8 with Transformer Engine", TE documentation;
 * DelayedScaling, format HYBRID): the three GEMMs of a linear layer (forward, input and
 * weight gradients) take FP8 operands, E4M3 activations and weights, E5M2 gradients, and
 * accumulate and write in bf16; everything else (attention core, norms, element-wise
 * ops) stays bf16, and the optimizer keeps fp32 master weights. Each FP8 operand is made
 * by a cast kernel that also records the tensor's amax for the delayed scaling factor
 * (TE's fused cast-transpose: it reads the bf16 tensor once and writes the FP8 tensor and,
 * where the GEMM needs it, its transpose); the scaling factors are updated from the amax
 * history once per step, one fused kernel. Hopper's FP8 tensor cores take only the TN
 * layout, so TE keeps transposed copies there (transformer_engine.pytorch.utils,
 * is_non_tn_fp8_gemm_supported: compute capabilities 10.x-11.x, B200 and GB200, and 13.x
 * take any layout). Costed here: the GEMMs at the FP8 rate with the device's GEMM curve,
 * the bf16 anchor's fraction of the FP8 peak (a profile's fp8 table replaces it).
 * Measured: tilelang's FP8 GEMM benchmark on H800 SXM, whose FP8 peak is H100 SXM's 1979
 * TFLOP/s dense, reaches 1461-1541 TFLOP/s at 8192 x 8192 x K, K = 8192-16384
 * (benchmark/matmul_fp8/README.md, xwhzz/tilelang), 0.74-0.78 of peak against Hopper's
 * bf16 short-run 0.79 (both short runs; both then sustained at curves.c's
 * SUSTAINED_OF_BURST of it). Also costed: a cast kernel for the input (forward) and the output
 * gradient (backward) of every FP8 GEMM, counted unfused (TE fuses some into the norm or
 * the activation before them: an upper bound of their traffic), the weights' casts once
 * per step with the optimizer (TE casts at the first micro-batch and caches:
 * is_first_microbatch), and the FP8 weight copies in memory (memory.c). Not costed: the
 * per-step scale update (one kernel) and amax all-reduce over the amax reduction group (a
 * few bytes per tensor: latency only). The FP8 inputs saved for backward in place of
 * bf16 ones, where the stack saves them (mp_stack_fp8_saves_fp8), are memory.c's. */

gboolean
cm_fp8_op (const MpLayer *layer, const MpOp *op)
{
  return op->kind == MP_OP_GEMM
         && (layer->kind == MP_LAYER_BLOCK || layer->kind == MP_LAYER_DENSE);
}

gboolean
cm_fp8_on (const MpParallelConfig *cfg, const MpCostDevice *dev)
{
  return cfg->fp8 && dev->device->peak_flops[MP_DTYPE_FP8] > 0
         && dev->curve->klass != MP_DEVICE_CLASS_CPU;
}

double
cm_fp8_copy_bytes (const MpCostDevice *dev)
{
  gboolean any_layout = dev->curve->klass == MP_DEVICE_CLASS_BLACKWELL
                        || dev->curve->klass == MP_DEVICE_CLASS_GB200;
  return any_layout ? 1 : 2;
}

void
cm_fp8_params (const MpCostContext *ctx, const MpParallelConfig *cfg, guint first, guint n,
               double *dense, double *expert)
{
  *dense = cm_sum (ctx, CM_SUM_FP8_SPLIT, first, n) / cfg->tp
           + cm_sum (ctx, CM_SUM_FP8_REP, first, n);
  *expert = cm_sum (ctx, CM_SUM_FP8_EXPERT, first, n) / cm_expert_shards (cfg);
}

/* The cast (with its amax) of ELEMENTS bf16 values to FP8 on DEV, and its transpose where
 * the device needs one. */
static void
fp8_cast (const MpCostDevice *dev, double elements, MpKernelCost *out)
{
  double bf16 = mp_dtype_bytes (MP_DTYPE_BF16);
  mp_cost_memory_kernel (dev, elements * (bf16 + cm_fp8_copy_bytes (dev)), 0, out);
}

void
mp_cost_memory_kernel (const MpCostDevice *dev, double bytes, double flops,
                       MpKernelCost *out)
{
  g_return_if_fail (dev != NULL && out != NULL);
  memset (out, 0, sizeof *out);
  if (!(bytes > 0) && !(flops > 0))
    return;
  /* Streams after a DRAM round trip: half the bandwidth at bandwidth x latency bytes. */
  double stream = bytes / mem_rate (dev) + dev->curve->mem_latency_s;
  double math = flops / peak (dev, MP_DTYPE_FP32);
  out->time_s = MAX (stream, math) + dev->curve->launch_s;
  out->flops = flops;
  out->bytes = bytes;
  out->memory_bound = TRUE;
  out->kernels = 1;
}

MpEwClass
mp_cost_op_ew_class (const MpModel *model, const MpOp *op)
{
  g_return_val_if_fail (model != NULL && op != NULL, MP_EW_NONE);
  switch (op->kind)
    {
    case MP_OP_NORM:
      return MP_EW_NORM;
    case MP_OP_LOSS:
      return MP_EW_LOSS;
    case MP_OP_ELEMENTWISE:
      /* The IR names an MLP activation after its function (model.c) and an MoE expert's
       * by its split (the model's function); residuals, dropout and rotary are plain
       * streams. */
      for (int a = 0; a < MP_ACT_NONE; a++)
        if (op->name && strcmp (op->name, mp_activation_name ((MpActivation) a)) == 0)
          return mp_activation_gated ((MpActivation) a) ? MP_EW_GATED : MP_EW_ACTIVATION;
      if (op->split != MP_SPLIT_EXPERT)
        return MP_EW_NONE;
      return mp_activation_gated (model->activation) ? MP_EW_GATED : MP_EW_ACTIVATION;
    default:
      return MP_EW_NONE;
    }
}

void
mp_cost_elementwise_kernel (const MpCostDevice *dev, MpEwClass klass, gboolean backward,
                            double bytes, MpKernelCost *out)
{
  g_return_if_fail (dev != NULL && out != NULL);
  mp_cost_memory_kernel (dev, bytes, 0, out);
  double measured = mp_cost_profile_elementwise_bps (dev->profile, klass, backward);
  /* The kernel cannot beat the roofline, and it runs no faster than measured. */
  if (measured > 0 && bytes > 0)
    out->time_s = MAX (out->time_s, bytes / measured);
}

static void
kernel_add (MpKernelCost *acc, const MpKernelCost *k)
{
  acc->time_s += k->time_s;
  acc->flops += k->flops;
  acc->bytes += k->bytes;
  acc->kernels += k->kernels;
  acc->memory_bound = acc->memory_bound && k->memory_bound;
}

/* Fraction of the full score matrix a causal kernel computes with 128-query blocks: the
 * lower triangle plus the diagonal blocks. Context parallelism balances the triangle over
 * ranks (Megatron splits the sequence in 2 cp chunks), so the same holds per rank. */
static double
causal_fraction (double s_q)
{
  double blocks = ceil (s_q / 128);
  return 0.5 + 0.5 / MAX (blocks, 1.0);
}

/* Head-size factor of fused attention, 1 at 128: the softmax's exponentials run on the
 * special-function units at 1/256 of the tensor-core rate on H100 (3.9 vs 989 TFLOP/s,
 * FlashAttention-3 paper, sec. 3), i.e. like ~64 multiply-adds of head dimension per
 * score, which small heads cannot hide. Matches FA2/FA3's head dim 64 running at ~0.75
 * and 256 at ~1.2 of head dim 128. */
static double
head_factor (const MpDeviceCurve *c, double d)
{
  if (c->klass == MP_DEVICE_CLASS_CPU)
    return 1;
  return (d / (d + 64)) / (128.0 / (128 + 64));
}

/* attention (ir14): the part of the full score matrix of S_KV keys a causal kernel in
 * 128 x 128 blocks computes when each query sees only the last WINDOW keys (< S_KV):
 * block row r touches min(r + 1, ceil(W / 128) + 1) blocks. Over the whole sequence, which
 * context parallelism balances over its ranks like the triangle. */
static double
window_fraction (double s_kv, double window)
{
  double rows = MAX (ceil (s_kv / 128), 1.0), wb = ceil (window / 128) + 1;
  double blocks = rows <= wb ? rows * (rows + 1) / 2 : wb * (wb + 1) / 2 + (rows - wb) * wb;
  return blocks / (rows * rows);
}

double
mp_cost_attention_flops_window (double batch, double heads, double head_dim, double s_q,
                                double s_kv, double window, gboolean causal,
                                gboolean backward)
{
  double counted = 4 * batch * heads * s_q * s_kv * head_dim;
  double part = causal ? causal_fraction (s_q) : 1;
  if (window > 0 && window < s_kv)
    part = causal ? window_fraction (s_kv, window) : MIN (1.0, 2 * window / s_kv);
  /* Backward redoes Q K^T and adds dV, dP, dQ, dK: 5 products to forward's 2. */
  return counted * part * (backward ? 2.5 : 1);
}

double
mp_cost_attention_flops (double batch, double heads, double head_dim, double s_q,
                         double s_kv, gboolean causal, gboolean backward)
{
  return mp_cost_attention_flops_window (batch, heads, head_dim, s_q, s_kv, 0, causal,
                                         backward);
}

/* The host executor's attention (kernels/cpu/attention.c) runs one query row at a time,
 * so a window W < S saves exactly the (query, key) pairs it masks: of the causal
 * S (S + 1) / 2, W (W + 1) / 2 + (S - W) W remain. Its calibrated rate (per sequence
 * length, in mp_cost_attention_flops's causal units) is then charged that share of the
 * causal work at S: the kernel's loop bounds (first_key), not blocks of 128. */
static double
row_window_share (double s, double w)
{
  return (w * (w + 1) / 2 + (s - w) * w) / (s * (s + 1) / 2);
}

/* Fused attention whose plateau is PLATEAU (the kernel's efficiency at head size 128 and
 * long sequences). */
static void
flash_attention (const MpCostDevice *dev, double plateau, MpDtype dtype, double batch,
                 double heads, double kv_heads, double head_dim, double s_q, double s_kv,
                 double window, gboolean causal, gboolean backward, MpKernelCost *out)
{
  g_return_if_fail (dev != NULL && out != NULL);
  memset (out, 0, sizeof *out);
  if (!(batch > 0 && heads > 0 && head_dim > 0 && s_q > 0 && s_kv > 0))
    return;
  const MpDeviceCurve *c = dev->curve;
  double elt = mp_dtype_bytes (dtype);
  double executed = mp_cost_attention_flops_window (batch, heads, head_dim, s_q, s_kv, window,
                                                    causal, backward);
  /* A query's keys: the sequence, or its window (what a short-sequence kernel lacks). */
  double keys = window > 0 && window < s_kv ? window : s_kv;
  if (c->klass == MP_DEVICE_CLASS_CPU && causal && keys < s_kv)
    {
      executed = mp_cost_attention_flops (batch, heads, head_dim, s_q, s_kv, TRUE, backward)
                 * row_window_share (s_kv, keys);
      keys = s_kv;                         /* the rate of the row kernel at S */
    }
  double eff = plateau * keys / (keys + c->attn_seq_half) * head_factor (c, head_dim);
  eff = MIN (eff, 1.0);
  /* The plateaus are short benchmark runs: sustained, the kernel keeps what the power
   * limit leaves at its tensor-core activity. */
  eff *= mp_cost_sustained_rate (c, eff);
  /* Forward reads Q, K, V and writes O (and the fp32 log-sum-exp); backward reads Q, K,
   * V, O, dO and writes dQ, dK, dV. */
  double tokens = batch * s_q;
  double bytes = tokens * ((backward ? 4 : 2) * (heads + kv_heads) * head_dim * elt
                           + heads * 4 * (backward ? 2 : 1));
  double pk = peak (dev, dtype);
  double math = executed / (pk * eff), stream = bytes / mem_rate (dev);
  out->kernels = backward ? 2 : 1;       /* FA2 backward: a preprocessing kernel + main */
  out->time_s = MAX (math, stream) + out->kernels * c->launch_s;
  double measured = mp_cost_profile_attention_flops (dev->profile, keys, backward);
  if (measured > 0)
    {
      /* The device's own kernel, timed: overheads and memory traffic included. */
      math = executed / measured;
      eff = measured / pk;
      out->time_s = math;
    }
  out->flops = executed;
  out->bytes = bytes;
  out->efficiency = eff;
  out->memory_bound = stream > math;
}

void
mp_cost_flash_attention_window (const MpCostDevice *dev, MpDtype dtype, double batch,
                                double heads, double kv_heads, double head_dim, double s_q,
                                double s_kv, double window, gboolean causal,
                                gboolean backward, MpKernelCost *out)
{
  g_return_if_fail (dev != NULL);
  double plateau = backward ? dev->curve->attn_bwd_eff : dev->curve->attn_fwd_eff;
  flash_attention (dev, plateau, dtype, batch, heads, kv_heads, head_dim, s_q, s_kv, window,
                   causal, backward, out);
}

/* FlashAttention in Triton against FlashAttention-2 on A100: FA2 "around 1.3-1.5x faster
 * ... in the forward pass and around 2x faster in the backward pass" (Dao 2023, arXiv
 * 2307.08691, sec. 4.1): the middle of the forward range, and the backward's. Measured on
 * A100; applied to FA2's plateau on every GPU (the Triton kernel of that era has no Hopper
 * wgmma either) and checked on llm-foundry's H100 rows (bench-accuracy). */
#define TRITON_FA2_SLOWDOWN_FWD 1.4
#define TRITON_FA2_SLOWDOWN_BWD 2.0

/* The plateau of STACK's attention kernel on DEV, forward or BACKWARD (acc16). */
static double
stack_attention_plateau (const MpCostDevice *dev, MpStack stack, gboolean backward)
{
  const MpDeviceCurve *c = dev->curve;
  double fa2 = c->attn_fa2_eff[backward ? 1 : 0];
  double native = backward ? c->attn_bwd_eff : c->attn_fwd_eff;
  if (mp_stack_triton_attention (stack) && c->klass != MP_DEVICE_CLASS_CPU)
    return (fa2 > 0 ? fa2 : native)
           / (backward ? TRITON_FA2_SLOWDOWN_BWD : TRITON_FA2_SLOWDOWN_FWD);
  if (mp_stack_fa2_attention (stack) && fa2 > 0)
    return fa2;
  return native;
}

void
mp_cost_flash_attention (const MpCostDevice *dev, MpDtype dtype, double batch, double heads,
                         double kv_heads, double head_dim, double s_q, double s_kv,
                         gboolean causal, gboolean backward, MpKernelCost *out)
{
  mp_cost_flash_attention_window (dev, dtype, batch, heads, kv_heads, head_dim, s_q, s_kv, 0,
                                  causal, backward, out);
}

/* ---- ops ----------------------------------------------------------------------------- */

static gboolean
sequence_parallel (const MpParallelConfig *cfg)
{
  return cfg->sequence_parallel && cfg->tp > 1;
}

/* Unfused attention as Megatron runs it without flash attention: Q K^T as a batched GEMM,
 * the fused scale-mask-softmax (reads and writes the scores), dropout (reads them, writes
 * them and a 1-byte mask), then P V; backward the four products and the two element-wise
 * passes in reverse. */
static void
unfused_attention (const MpCostDevice *dev, MpDtype dtype, double elt, double b, double s_q,
                   double s_kv, double d, gboolean softcap, MpOpCost *out)
{
  MpKernelCost k;
  double scores = b * s_q * s_kv;
  mp_cost_gemm (dev, dtype, s_q, s_kv, d, b, &k);
  kernel_add (&out->fwd, &k);
  if (softcap)
    {
      /* Gemma 2's cap tanh (scores / cap): one more pass over the scores each way. */
      mp_cost_memory_kernel (dev, scores * 2 * elt, 0, &k);
      kernel_add (&out->fwd, &k);
      mp_cost_memory_kernel (dev, scores * 3 * elt, 0, &k);
      kernel_add (&out->bwd, &k);
    }
  mp_cost_memory_kernel (dev, scores * 2 * elt, 0, &k);
  kernel_add (&out->fwd, &k);
  mp_cost_memory_kernel (dev, scores * (2 * elt + 1), 0, &k);
  kernel_add (&out->fwd, &k);
  mp_cost_gemm (dev, dtype, s_q, d, s_kv, b, &k);
  kernel_add (&out->fwd, &k);

  mp_cost_gemm (dev, dtype, s_kv, d, s_q, b, &k);        /* dV = P^T dO */
  kernel_add (&out->bwd, &k);
  mp_cost_gemm (dev, dtype, s_q, s_kv, d, b, &k);        /* dP = dO V^T */
  kernel_add (&out->bwd, &k);
  mp_cost_memory_kernel (dev, scores * (2 * elt + 1), 0, &k);   /* dropout backward */
  kernel_add (&out->bwd, &k);
  mp_cost_memory_kernel (dev, scores * 3 * elt, 0, &k);  /* softmax backward */
  kernel_add (&out->bwd, &k);
  mp_cost_gemm (dev, dtype, s_q, d, s_kv, b, &k);        /* dQ = dS K */
  kernel_add (&out->bwd, &k);
  mp_cost_gemm (dev, dtype, s_kv, d, s_q, b, &k);        /* dK = dS^T Q */
  kernel_add (&out->bwd, &k);
  out->fwd.memory_bound = out->bwd.memory_bound = FALSE;
}

/* The attention core. Heads (and kv heads) divide over tp, queries over cp. MLA's values
 * are narrower than its queries and keys: the kernel is costed at their mean width, which
 * gives its FLOPs exactly (2 s (d_qk + d_v) per query head and key). A sliding window
 * (ir14) saves work only in a kernel that skips the blocks outside the band (flash
 * attention with a window, as FlashAttention-2's window_size and Transformer Engine's);
 * unfused attention masks a full square, as Megatron's and Hugging Face's eager
 * attention do. */
static void
cost_attention (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpCostDevice *dev,
                const MpOp *op, MpOpCost *out)
{
  double t = cfg->tp, b = cfg->micro_batch_size, d = op->head_dim;
  if (op->v_head_dim > 0 && op->v_head_dim != op->head_dim)
    d = (op->head_dim + op->v_head_dim) / 2;
  double heads = op->heads / t, kv = MAX (op->kv_heads / t, 1.0);
  double s_kv = (double) MAX (ctx->model->seq_len, 1u), s_q = s_kv / cfg->cp;
  double keys = op->window > 0 && op->window < s_kv ? op->window : s_kv;
  out->m = s_q;
  out->n = s_kv;
  out->k = d;
  out->batch = b * heads;
  out->model_fwd_flops = 4 * b * heads * s_q * keys * d;
  /* A measured attention kernel is what the device runs for the core, with or without
   * flash attention (the host executor's one kernel stores or recomputes the scores). */
  if (cfg->flash_attention || mp_cost_profile_attention_flops (dev->profile, s_kv, FALSE) > 0)
    {
      /* The stack picks the kernel (acc16): FlashAttention-2 class or cuDNN / FA3. */
      flash_attention (dev, stack_attention_plateau (dev, cfg->stack, FALSE), dev->dtype, b,
                       heads, kv, d, s_q, s_kv, op->window, ctx->causal, FALSE, &out->fwd);
      flash_attention (dev, stack_attention_plateau (dev, cfg->stack, TRUE), dev->dtype, b,
                       heads, kv, d, s_q, s_kv, op->window, ctx->causal, TRUE, &out->bwd);
    }
  else
    unfused_attention (dev, dev->dtype, ctx->elt, b * heads, s_q, s_kv, d,
                       ctx->model->attn_softcap > 0, out);
}

/* BYTES of a GEMM's weight streamed in cold before the kernel (as a profile measured it)
 * added to K's time. */
static void
cold_weight (const MpCostDevice *dev, double bytes, MpKernelCost *k)
{
  double bw = mp_cost_profile_cold_weight_bw (dev->profile);
  if (bw > 0)
    k->time_s += bytes / bw;
}

/* One torchao dynamic cast of ELEMENTS 16-bit values (mp_stack_torchao_fp8): the amax
 * pass (a read) and the scaled cast (a read and a 1-byte write), two kernels, into ACC. */
static double
torchao_cast (const MpCostDevice *dev, double elements, MpKernelCost *acc)
{
  double bf16 = mp_dtype_bytes (MP_DTYPE_BF16);
  MpKernelCost amax, cast;
  mp_cost_memory_kernel (dev, elements * bf16, 0, &amax);
  mp_cost_memory_kernel (dev, elements * (bf16 + 1), 0, &cast);
  kernel_add (acc, &amax);
  kernel_add (acc, &cast);
  return amax.time_s + cast.time_s;
}

/* A torchao Float8Linear's casts of its input X, weight W and output gradient DY
 * (elements): X and W forward; backward DY and W before dgrad, DY again and X before
 * wgrad. */
static void
torchao_casts (const MpCostDevice *dev, double x, double w, double dy, MpOpCost *out)
{
  torchao_cast (dev, x, &out->fwd);
  torchao_cast (dev, w, &out->fwd);
  out->dgrad_s += torchao_cast (dev, dy, &out->bwd) + torchao_cast (dev, w, &out->bwd);
  out->wgrad_s += torchao_cast (dev, dy, &out->bwd) + torchao_cast (dev, x, &out->bwd);
}

/* Transformer Engine's grouped GEMM (mp_stack_per_expert_gemm_calls): one cuBLASLt call
 * per local expert, each preceded on the host by its descriptors and a heuristic query
 * (cublas_gemm in TE's cublaslt_gemm.cu calls cublasLtMatmulAlgoGetHeuristic every time).
 * Measured on SM100 (B200 class), TE PR #3134 (NVIDIA/TransformerEngine, "Single-launch
 * CUTLASS grouped GEMM for per-tensor NVFP4", benchmarks/linear/benchmark_grouped_linear.py):
 * 8 experts of 128 tokens, N = K = 2048, take 0.267 ms through the multi-stream path with
 * operands prepared ("pure"), where one grouped kernel does the same arithmetic in
 * 0.069 ms: 0.267 / 8 = 33 us a call, paid in series on the host. Megatron-Core's dropless
 * alltoall dispatcher synchronizes the host with the GPU once per MoE layer forward,
 * before the experts (token_dispatcher.py, MoEAlltoAllTokenDispatcher: cuda_sync_point
 * "before_ep_alltoall", or "before_finish" without ep and tp; the counts move to the host
 * for the all-to-all splits and GroupedLinear's m_splits), so the host is not ahead of
 * the GPU there: a group cannot end before its last call is issued. In backward the host
 * may be ahead by what the GPU still has queued; the same floor there is an upper bound. */
#define TE_GROUPED_CALL_S (0.267e-3 / 8)

/* The host's floor under CALLS sequential GEMM calls, applied to K (a group of them). */
static void
expert_call_floor (double calls, MpKernelCost *k)
{
  k->time_s = MAX (k->time_s, calls * TE_GROUPED_CALL_S);
  k->kernels = MAX (k->kernels, (guint) ceil (calls));
}

/* A GEMM (or the router's) at its split shape. MoE experts (moe14): each rank holds
 * experts / ep of them, tensor-split over etp, and after the dispatch (and the etp
 * all-gather) computes tokens * top-k * etp / tp token copies (its tp peers hold the
 * other sequence shards: the same rows per rank whichever grid), i.e. that x ep / experts
 * rows per local expert, times the load of the busiest rank: a grouped GEMM of
 * experts / ep small GEMMs, as Megatron-Core's --moe-grouped-gemm runs them (on a device
 * whose executor calls one GEMM per expert, gemm_group_calls, priced call by call). */
static void
cost_gemm_op (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpCostDevice *dev,
              const MpLayer *layer, const MpOp *op, const CmOp *r, MpOpCost *out)
{
  double t = cfg->tp, tokens = cm_tokens (ctx, cfg);
  double count = MAX (op->count, 1.0);
  double m = tokens * count, n = op->gemm_n, k = op->gemm_k, batch = 1;
  double load = 1;
  if (r->expert)
    {
      double experts = (double) MAX (ctx->model->experts, 1u), ep = cfg->ep;
      double etp = mp_parallel_config_etp (cfg);
      load = cm_expert_load (ctx->model);
      batch = experts / ep;
      m = tokens * count * ep / experts * (etp / t) * load;
      t = etp;
    }
  if (r->gemm == CM_GEMM_SPLIT_N)
    n /= t;
  else if (r->gemm == CM_GEMM_SPLIT_K)
    k /= t;
  else if (r->split)
    m /= t;
  else if (sequence_parallel (cfg))
    m /= t;                  /* a replicated GEMM (the router) on this rank's tokens */
  out->m = m;
  out->n = n;
  out->k = k;
  out->batch = batch;
  gboolean fp8 = cm_fp8_op (layer, op) && cm_fp8_on (cfg, dev);
  MpDtype dt = fp8 ? MP_DTYPE_FP8 : dev->dtype;
  double out_elt = fp8 ? mp_dtype_bytes (MP_DTYPE_BF16) : mp_dtype_bytes (dt);
  group_cost (ctx, dev, dt, out_elt, m, n, k, batch, &out->fwd);
  out->model_fwd_flops = out->fwd.flops / load;   /* the mean rank's share */
  MpKernelCost dgrad, wgrad;
  group_cost (ctx, dev, dt, out_elt, m, k, n, batch, &dgrad);     /* dX = dY W^T */
  group_cost (ctx, dev, dt, out_elt, k, n, m, batch, &wgrad);     /* dW = X^T dY */
  /* A step touches each weight once per micro-batch in each of the three GEMMs (W, W
   * again, dW accumulated), and between two touches the rest of the model passes through
   * the caches (tiny-gpt's weights, gradients and Adam state: 53 MB against the host's
   * 8 MiB L3), so every one is cold: a profile that measured the cost (the host's,
   * mp_cost_profile_cold_weight_bw) adds it to each. */
  double wbytes = n * k * batch * mp_dtype_bytes (dt);
  cold_weight (dev, wbytes, &out->fwd);
  cold_weight (dev, wbytes, &dgrad);
  cold_weight (dev, wbytes, &wgrad);
  if (r->expert && op->kind == MP_OP_GEMM && mp_stack_per_expert_gemm_calls (cfg->stack)
      && dev->curve->klass != MP_DEVICE_CLASS_CPU)
    {
      expert_call_floor (batch, &out->fwd);
      expert_call_floor (batch, &dgrad);
      expert_call_floor (batch, &wgrad);
    }
  out->dgrad_s = dgrad.time_s;
  out->wgrad_s = wgrad.time_s;
  out->bwd = dgrad;
  kernel_add (&out->bwd, &wgrad);
  out->bwd.efficiency = (dgrad.efficiency + wgrad.efficiency) / 2;
  if (fp8 && mp_stack_torchao_fp8 (cfg->stack))
    torchao_casts (dev, m * k * batch, n * k * batch, m * n * batch, out);
  else if (fp8)
    {
      /* The input cast before the forward GEMM; the output gradient's before dgrad. */
      MpKernelCost cast;
      fp8_cast (dev, m * k * batch, &cast);
      kernel_add (&out->fwd, &cast);
      fp8_cast (dev, m * n * batch, &cast);
      kernel_add (&out->bwd, &cast);
      out->dgrad_s += cast.time_s;
    }
}

/* ---- eager element-wise ops (fsdp18) -----------------------------------------------------
 * Without torch.compile (mp_parallel_config_eager_ops) a block's element-wise ops run as
 * the model's Python writes them, one ATen kernel per operator, each reading its inputs
 * from HBM and writing its output there, with fp32 intermediates where the code upcasts.
 * The IR's figures are one fused kernel per op: a 16-bit read and write (e bytes each) of
 * each element. Counted from torchtitan 9dec370 (the code of its 2024-12 benchmarks), with
 * f = 4 bytes for fp32:
 *  - RMSNorm (torchtitan/models/norms.py, RMSNorm.forward: x.float(), pow(2), mean(-1),
 *    + eps, rsqrt, x * r, type_as(x), * weight): e + f, 2f, f, 2f, f + e, 2e over the six
 *    full-size kernels (+ eps and rsqrt touch one value a row but launch) = 4e + 7f, in 8
 *    kernels, against the fused 2e. (A LayerNorm is one ATen native_layer_norm: fused.)
 *  - rotary (models/llama/model.py, apply_rotary_emb: xq.float(), the complex product with
 *    freqs_cis, type_as; view_as_complex / view_as_real are views): e + f, 2f, f + e per
 *    element = 2e + 4f, 3 kernels for q and 3 for k, against 2e in one.
 *  - the gated activation (FeedForward.forward: F.silu (w1 (x)) * w3 (x)): silu 2e, the
 *    product 3e, two kernels, against 3e fused.
 * Backward is autograd's derivative of each of those kernels: as for the fused ops, twice
 * the forward's traffic. Residual adds and dropout are one kernel either way. Host devices
 * run the executor's own kernels (exec/), so none of this applies there. */
static double
eager_traffic (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpCostDevice *dev,
               const MpOp *op, MpEwClass klass, guint *kernels)
{
  *kernels = 1;
  if (!mp_parallel_config_eager_ops (cfg) || dev->curve->klass == MP_DEVICE_CLASS_CPU)
    return 1.0;
  const double e = ctx->elt, f = 4.0;
  if (op->kind == MP_OP_NORM && ctx->model->norm == MP_NORM_RMSNORM)
    {
      *kernels = 8;
      return (4 * e + 7 * f) / (2 * e);
    }
  if (op->kind == MP_OP_ELEMENTWISE && op->name && strcmp (op->name, "rotary") == 0)
    {
      *kernels = 6;
      return (2 * e + 4 * f) / (2 * e);
    }
  if (klass == MP_EW_GATED && op->split != MP_SPLIT_EXPERT)
    {
      *kernels = 2;
      return 5.0 / 3.0;
    }
  return 1.0;
}

/* The K/V head copies of a stack that repeats them (mp_stack_repeats_kv): for keys and
 * values, one kernel each reading the kv_heads-wide tensor and writing it heads wide,
 * per token of the micro-batch on this rank; backward sums the copies' gradients back
 * (the same bytes the other way) and, as for the other element-wise ops, is costed at
 * twice the forward's traffic. Nothing without grouped-query attention (repeat_kv returns
 * its input) or on host devices. */
static void
repeated_kv (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpCostDevice *dev,
             const MpOp *op, MpOpCost *out)
{
  if (!mp_stack_repeats_kv (cfg->stack) || dev->curve->klass == MP_DEVICE_CLASS_CPU
      || !(op->kv_heads > 0 && op->kv_heads < op->heads))
    return;
  double width = (op->heads + op->kv_heads) * op->head_dim / cfg->tp;
  double bytes = cm_tokens (ctx, cfg) * width * ctx->elt;
  for (int kv = 0; kv < 2; kv++)
    {
      MpKernelCost f, b;
      mp_cost_elementwise_kernel (dev, MP_EW_NONE, FALSE, bytes, &f);
      mp_cost_elementwise_kernel (dev, MP_EW_NONE, TRUE, 2 * bytes, &b);
      kernel_add (&out->fwd, &f);
      kernel_add (&out->bwd, &b);
    }
}

/* torch's context parallelism (the stacks of mp_stack_cp_allgather) runs each of its cp
 * steps as its own SDPA call and keeps what joins them in eager element-wise ops
 * (torch/distributed/tensor/experimental/_attention.py): after each step past the first,
 * _SDPAMerger (convert_to_f32) casts the step's output to fp32 and folds it into the
 * running output, out - sigmoid(lse_step - lse) * (out - out_step): 4 kernels, ~38 bytes
 * per output element; every step but the last concatenates K and V for the rotater (2
 * bytes each way per element). Backward adds each step's dQ, dK, dV into fp32
 * accumulators (read 4 + 2, write 4) and concatenates the fp32 dK, dV it sends on (read
 * and write 4 each) and K, V again. The published runs are compiled; whether Dynamo
 * traces this wrapper and Inductor fuses the merge into fewer passes is not established
 * here, so the eager ops are counted: an upper bound on this cost. */
static void
cp_merges (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpCostDevice *dev,
           const MpOp *op, MpOpCost *out)
{
  if (cfg->cp < 2 || !mp_stack_cp_allgather (cfg->stack) || op->window > 0
      || dev->curve->klass == MP_DEVICE_CLASS_CPU)
    return;
  double tokens = cm_tokens (ctx, cfg), e = ctx->elt, steps = cfg->cp - 1;
  double kv_heads = op->kv_heads > 0 && !mp_stack_repeats_kv (cfg->stack) ? op->kv_heads
                                                                           : op->heads;
  double width = op->v_head_dim > 0 ? op->head_dim + op->v_head_dim : 2 * op->head_dim;
  double vd = op->v_head_dim > 0 ? op->v_head_dim : op->head_dim;
  double o = tokens * MAX (op->heads / cfg->tp, 1.0) * vd;
  double q = tokens * MAX (op->heads / cfg->tp, 1.0) * op->head_dim;
  double kv = tokens * MAX (kv_heads / cfg->tp, 1.0) * width;
  MpKernelCost f, b;
  mp_cost_elementwise_kernel (dev, MP_EW_NONE, FALSE, steps * (38 * o + 2 * e * kv), &f);
  mp_cost_elementwise_kernel (dev, MP_EW_NONE, TRUE,
                              steps * (10 * (q + kv) + 16 * kv + 2 * e * kv), &b);
  kernel_add (&out->fwd, &f);
  kernel_add (&out->bwd, &b);
  double each = dev->curve->launch_s + dev->curve->mem_latency_s;
  out->fwd.time_s += (5 * steps - 1) * each;
  out->fwd.kernels += 5 * steps - 1;
  out->bwd.time_s += (5 * steps - 1) * each;
  out->bwd.kernels += 5 * steps - 1;
}

/* The launches and DRAM round trips of an eager op's KERNELS beyond the one that
 * mp_cost_elementwise_kernel charged, forward, and as many again twice backward. */
static void
eager_kernels (const MpCostDevice *dev, guint kernels, MpOpCost *out)
{
  if (kernels <= 1)
    return;
  double each = dev->curve->launch_s + dev->curve->mem_latency_s;
  out->fwd.time_s += (kernels - 1) * each;
  out->fwd.kernels += kernels - 1;
  out->bwd.time_s += 2 * (kernels - 1) * each;
  out->bwd.kernels += 2 * (kernels - 1);
}

void
mp_cost_op (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpStageSpans *spans,
            guint layer, guint op_index, MpOpCost *out)
{
  g_return_if_fail (ctx != NULL && cfg != NULL && spans != NULL && out != NULL);
  g_return_if_fail (cm_config_sane (cfg) && layer < ctx->model->n_layers);
  const MpLayer *l = &ctx->model->layers[layer];
  g_return_if_fail (op_index < l->n_ops);
  const MpOp *op = &l->ops[op_index];
  const CmOp *r = &ctx->layers[layer].ops[op_index];
  const MpCostDevice *dev = spans->device;
  memset (out, 0, sizeof *out);
  switch (op->kind)
    {
    case MP_OP_GEMM:
    case MP_OP_ROUTER:
      cost_gemm_op (ctx, cfg, dev, l, op, r, out);
      break;
    case MP_OP_ATTENTION:
      cost_attention (ctx, cfg, dev, op, out);
      repeated_kv (ctx, cfg, dev, op, out);
      cp_merges (ctx, cfg, dev, op, out);
      break;
    case MP_OP_NORM:
    case MP_OP_ELEMENTWISE:
    case MP_OP_EMBEDDING:
    case MP_OP_LOSS:
    default:
      {
        /* Memory-bound: split ops work on 1/t of the tensor; replicated ones on all of it,
         * or on 1/t of the tokens with sequence parallelism. A vocab-parallel lookup
         * writes a full-width output on every rank. */
        double div = r->split ? cfg->tp : sequence_parallel (cfg) ? cfg->tp : 1;
        if (op->kind == MP_OP_EMBEDDING && op->split == MP_SPLIT_VOCAB)
          div = 1;
        double bytes = op->fwd_bytes * cm_tokens (ctx, cfg) / div;
        if (r->expert)
          bytes *= cm_expert_load (ctx->model);
        MpEwClass klass = mp_cost_op_ew_class (ctx->model, op);
        guint kernels = 1;
        bytes *= eager_traffic (ctx, cfg, dev, op, klass, &kernels);
        mp_cost_elementwise_kernel (dev, klass, FALSE, bytes, &out->fwd);
        /* Backward reads the output gradient and the saved input and writes the input
         * gradient: about twice the traffic; a norm adds a kernel for its weights. */
        mp_cost_elementwise_kernel (dev, klass, TRUE, 2 * bytes, &out->bwd);
        if (op->kind == MP_OP_NORM)
          {
            out->bwd.time_s += dev->curve->launch_s;
            out->bwd.kernels++;
          }
        eager_kernels (dev, kernels, out);
        break;
      }
    }
}

/* ---- overlap ------------------------------------------------------------------------- */

/* NCCL's channels in a collective overlapped with compute: an all-gather under FSDP's
 * prefetch on an 8-GPU H100 node launched 24 blocks, holding 24 of the 132 SMs while the
 * GEMM beside it got the rest (Nsight Systems trace in "Compute-Communication Overlap
 * Causes Severe GEMM Performance Degradation because of Tail Effect", NVIDIA developer
 * forums, 2025). 24 / SMs is 0.18 on H100, 0.22 on A100, 0.16 on B200: the range of Lee
 * et al., "Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed
 * Deep Learning" (arXiv 2507.03114, 2025), who measured GPT and LLaMA training compute
 * 18.9% slower on average (40% at most) while overlapped, on A100 and H100. Left out: the
 * wave-quantisation tail that post shows for one-wave GEMMs, and HBM contention. */
#define NCCL_OVERLAP_CHANNELS 24.0

double
mp_cost_overlap_share (const MpCostDevice *dev)
{
  g_return_val_if_fail (dev != NULL, 0);
  const MpDeviceCurve *c = dev->curve;
  return c->nccl && c->sms > NCCL_OVERLAP_CHANNELS ? NCCL_OVERLAP_CHANNELS / c->sms : 0;
}

double
mp_cost_overlap_penalty (double share, double comm, double compute)
{
  if (!(share > 0 && comm > 0 && compute > 0))
    return 0;
  return MAX (0.0, share * MIN (comm, compute) - MAX (0.0, comm - compute));
}

/* ---- layers -------------------------------------------------------------------------- */

static guint64 *memo_span (guint64 *w, const MpGroupSpan *g);

/* The time of KIND moving SIZE bytes over SPAN from DEV, kept in CTX's collective memo
 * when DEV is CTX's (as the GEMM memo: the key holds every input that a device of CTX
 * leaves free, the span by value, so a hit is what mp_cost_collective gives). */
#define COLL_MEMO_WORDS (2 + 7 + 2 * MP_TIER_N)

static double
coll (const MpCostContext *ctx, const MpCostDevice *dev, MpCollKind kind, double size,
      const MpGroupSpan *span)
{
  MpCollCost c;
  guint64 at, key[COLL_MEMO_WORDS];
  if (!context_device (ctx, dev, &at))
    {
      mp_cost_collective (ctx, dev, kind, size, span, MP_ALGO_AUTO, &c);
      return c.time_s;
    }
  key[0] = at * MP_COLL_N + kind;
  memcpy (&key[1], &size, sizeof size);
  memo_span (key + 2, span);
  MpCostContext *memo = (MpCostContext *) ctx;          /* the memo only: see its field */
  const double *hit = cm_memo_get (memo->coll_memo, key, COLL_MEMO_WORDS);
  if (hit != NULL)
    return *hit;
  mp_cost_collective (ctx, dev, kind, size, span, MP_ALGO_AUTO, &c);
  cm_memo_put (&memo->coll_memo, key, COLL_MEMO_WORDS, &c.time_s, sizeof c.time_s);
  return c.time_s;
}

static void
phase_total (MpPhaseCost *p)
{
  p->total_s = p->compute_s + p->recompute_s + p->tp_comm_s + p->ep_comm_s + p->cp_comm_s;
}

/* Megatron's tensor-parallel collectives around op R (costed as OC), added to FWD and
 * BWD. Without SP: the region's exit all-reduces forward; its entry all-reduces the input
 * gradient backward, overlapped with the weight-gradient GEMM. With SP: entry all-gathers
 * forward and, backward, all-gathers the input again (overlapped with the input-gradient
 * GEMM) and reduce-scatters its gradient (overlapped with the weight-gradient GEMM); the
 * exit reduce-scatters forward and all-gathers the gradient backward. A stack that does
 * not overlap them (mp_stack_overlaps_tp_backward), or a device whose executor cannot
 * (serial_tp_comm: the host), exposes every backward collective; one that does slows the
 * GEMMs under them (mp_cost_overlap_penalty). */
static void
tp_collectives (const MpCostContext *ctx, const MpParallelConfig *cfg,
                const MpStageSpans *spans, const CmOp *r, const MpOpCost *oc,
                MpPhaseCost *fwd, MpPhaseCost *bwd)
{
  const MpCostDevice *dev = spans->device;
  const MpGroupSpan *g = &spans->tp;
  double tokens = cm_tokens (ctx, cfg), e = ctx->elt;
  gboolean sp = sequence_parallel (cfg);
  gboolean overlap = mp_stack_overlaps_tp_backward (cfg->stack) && !dev->curve->serial_tp_comm;
  double under_dgrad = overlap ? oc->dgrad_s : 0, under_wgrad = overlap ? oc->wgrad_s : 0;
  double share = mp_cost_overlap_share (dev);     /* the GEMMs under them run slower */
  if (r->entry_width > 0)
    {
      double size = tokens * r->entry_width * e;
      if (sp)
        {
          double ag = coll (ctx, dev, MP_COLL_ALL_GATHER, size, g);
          fwd->tp_comm_s += ag;
          double rs = coll (ctx, dev, MP_COLL_REDUCE_SCATTER, size, g);
          bwd->tp_comm_s += MAX (0, ag - under_dgrad) + MAX (0, rs - under_wgrad)
                            + mp_cost_overlap_penalty (share, ag, under_dgrad)
                            + mp_cost_overlap_penalty (share, rs, under_wgrad);
        }
      else
        {
          double ar = coll (ctx, dev, MP_COLL_ALL_REDUCE, size, g);
          bwd->tp_comm_s += MAX (0, ar - under_wgrad)
                            + mp_cost_overlap_penalty (share, ar, under_wgrad);
        }
    }
  if (r->exit_width > 0)
    {
      double size = tokens * r->exit_width * e;
      fwd->tp_comm_s += coll (ctx, dev, sp ? MP_COLL_REDUCE_SCATTER : MP_COLL_ALL_REDUCE,
                              size, g);
      if (sp)
        bwd->tp_comm_s += coll (ctx, dev, MP_COLL_ALL_GATHER, size, g);
    }
  if (r->loss_reductions > 0)
    fwd->tp_comm_s += r->loss_reductions
                      * coll (ctx, dev, MP_COLL_ALL_REDUCE, tokens * 4, g);
}

double
mp_cost_moe_dispatch_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg,
                            guint layer)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL && cm_config_sane (cfg), 0);
  g_return_val_if_fail (layer < ctx->model->n_layers, 0);
  const CmLayer *cl = &ctx->layers[layer];
  double width = 0;
  for (guint i = 0; i < ctx->model->layers[layer].n_ops; i++)
    width += cl->ops[i].a2a_width;
  double ep = MAX (cfg->ep, 1u);
  return cm_tokens (ctx, cfg) / (sequence_parallel (cfg) ? cfg->tp : 1) * width * ctx->elt
         * cm_expert_load (ctx->model) * (ep - 1) / ep;
}

/* One MoE dispatch (or combine) all-to-all of SIZE bytes over EP: under a stack that runs
 * DeepEP (mp_stack_forwarded_dispatch) a token goes once per destination rank, forwarded
 * over RDMA once per NVLink domain when the group spans domains; else NCCL's flat
 * all-to-all of every copy. */
static double
dispatch_a2a (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpCostDevice *dev,
              double size, const MpGroupSpan *ep)
{
  const MpModel *m = ctx->model;
  if (!mp_stack_forwarded_dispatch (cfg->stack) || dev->curve->klass == MP_DEVICE_CLASS_CPU)
    return coll (ctx, dev, MP_COLL_ALL_TO_ALL, size, ep);
  if (ep->n_domains <= 1)
    return coll (ctx, dev, MP_COLL_ALL_TO_ALL,
                 mp_coll_dedup_a2a_size (size, (double) m->experts_per_token,
                                         (double) m->experts, m->routing, cfg->ep),
                 ep);
  MpAlphaBeta ab;
  mp_cost_alpha_beta (ctx, dev, ep, &ab);
  return mp_coll_forwarded_a2a_time (size, (double) m->experts_per_token,
                                     (double) m->experts, m->routing, &ab);
}

/* MoE (moe14): the token dispatch before the experts of op R and the combine after,
 * forward and backward (the backward mirrors each), as Megatron-Core's dispatchers run
 * them. All-to-all: each rank sends its tokens' top-k copies (h wide, at the busiest
 * rank's load) over ep, of which (ep - 1) / ep leave the rank; on the expert grid with
 * etp > 1 the received copies are then all-gathered over etp and the outputs
 * reduce-scattered back. All-gather: every rank's tokens (h wide, once) are gathered
 * over etp x ep and the outputs reduce-scattered. Outside the expert grid (no sequence
 * parallelism, etp = tp) the dense region's tensor-parallel collectives stand in for
 * the etp ones. */
static void
moe_dispatch (const MpCostContext *ctx, const MpParallelConfig *cfg,
              const MpStageSpans *spans, const CmOp *r, MpPhaseCost *fwd, MpPhaseCost *bwd)
{
  const MpCostDevice *dev = spans->device;
  double tokens = cm_tokens (ctx, cfg) / (sequence_parallel (cfg) ? cfg->tp : 1);
  double load = cm_expert_load (ctx->model), etp = mp_parallel_config_etp (cfg);
  if (cfg->dispatcher == MP_DISPATCH_ALLGATHER)
    {
      double size = tokens * (double) ctx->model->hidden * ctx->elt * etp * cfg->ep;
      double both = coll (ctx, dev, MP_COLL_ALL_GATHER, size, &spans->etp_ep)
                    + coll (ctx, dev, MP_COLL_REDUCE_SCATTER, size, &spans->etp_ep);
      fwd->ep_comm_s += both;
      bwd->ep_comm_s += both;
      return;
    }
  double size = tokens * r->a2a_width * ctx->elt * load;
  if (cfg->ep > 1)
    {
      double a2a = dispatch_a2a (ctx, cfg, dev, size, &spans->ep);
      fwd->ep_comm_s += 2 * a2a;
      bwd->ep_comm_s += 2 * a2a;
    }
  if (etp > 1 && cm_expert_grid (cfg))
    {
      double both = coll (ctx, dev, MP_COLL_ALL_GATHER, etp * size, &spans->etp)
                    + coll (ctx, dev, MP_COLL_REDUCE_SCATTER, etp * size, &spans->etp);
      fwd->ep_comm_s += both;
      bwd->ep_comm_s += both;
    }
}

double
mp_cost_ep_overlap_paired (const MpParallelConfig *cfg)
{
  g_return_val_if_fail (cfg != NULL && cm_config_sane (cfg), 0);
  double m = cfg->num_micro_batches, p = cfg->pp, v = mp_parallel_config_vpp (cfg);
  if (!cfg->moe_a2a_overlap || cfg->schedule == MP_SCHEDULE_GPIPE || !(m > 0))
    return 0;
  if (cfg->pp == 1)
    return (m - 1) / m;
  double warmup = 0;
  for (guint i = 0; i < cfg->pp; i++)
    warmup += cfg->schedule == MP_SCHEDULE_INTERLEAVED
              ? MIN (m * v, 2 * (p - i - 1) + (v - 1) * p) : MIN (m, p - i - 1);
  return MAX (0.0, 1 - warmup / p / (m * v));
}

/* Combined 1F1B (cfg->moe_a2a_overlap; Megatron-Core user guide, "Combined 1F1B:
 * Expert-Parallel All-to-All Overlap"): in a pair, the forward's dispatch and combine run
 * under the other micro-batch's backward compute and the backward's under the forward's,
 * each hidden up to that compute and slowing it as any overlapped collective does
 * (mp_cost_overlap_penalty); the unpaired passes (mp_cost_ep_overlap_paired) expose
 * theirs. A pair runs a forward and a backward of the same layer kind, so the layer's
 * own figures stand in for its partner's. */
static void
ep_overlap (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpCostDevice *dev,
            MpPhaseCost *fwd, MpPhaseCost *bwd)
{
  (void) ctx;
  double paired = mp_cost_ep_overlap_paired (cfg);
  if (!(paired > 0) || !(fwd->ep_comm_s > 0 || bwd->ep_comm_s > 0))
    return;
  double share = mp_cost_overlap_share (dev);
  double f_comm = fwd->ep_comm_s, b_comm = bwd->ep_comm_s;
  double f_compute = fwd->compute_s, b_compute = bwd->compute_s;
  fwd->ep_comm_s -= paired * MIN (f_comm, b_compute);
  bwd->ep_comm_s -= paired * MIN (b_comm, f_compute);
  fwd->compute_s += paired * mp_cost_overlap_penalty (share, b_comm, f_compute);
  bwd->compute_s += paired * mp_cost_overlap_penalty (share, f_comm, b_compute);
}

/* ZeRO-2/3 (FSDP, DeepSpeed stage 2/3): the collectives of a layer's parameters run under
 * the compute of one micro-batch, every micro-batch: ZeRO-3 gathers the next layer's
 * weights (the same size: uniform blocks) under this one's forward and backward, and
 * ZeRO-2/3 reduce-scatter this layer's gradients under the next backward. The SMs they hold
 * slow that compute (mp_cost_overlap_penalty); the collectives' own exposure is the
 * planner's (dp_comm). In the layer's cost, so that the closed form and the simulator
 * price it alike. */
static void
zero_overlap (const MpCostContext *ctx, const MpParallelConfig *cfg,
              const MpStageSpans *spans, guint layer, MpPhaseCost *fwd, MpPhaseCost *bwd)
{
  const MpCostDevice *dev = spans->device;
  double share = mp_cost_overlap_share (dev);
  if (cfg->zero < 2 || !(share > 0))
    return;
  double d, x, w, g = cm_reduce_bytes (ctx, cfg);
  mp_cost_layer_params (ctx, cfg, layer, &d, &x);
  mp_model_state_bytes_per_param (ctx->model, &w, NULL, NULL);
  double gather = 0, reduce = 0;
  const MpGroupSpan *group[2] = { &spans->dp_shard, &spans->edp };
  double params[2] = { d, x };
  for (int k = 0; k < 2; k++)
    if (params[k] > 0 && group[k]->n_ranks > 1)
      {
        if (cfg->zero >= 3)
          gather += coll (ctx, dev, MP_COLL_ALL_GATHER, params[k] * w, group[k]);
        reduce += coll (ctx, dev, MP_COLL_REDUCE_SCATTER, params[k] * g, group[k]);
      }
  fwd->compute_s += mp_cost_overlap_penalty (share, gather, fwd->compute_s);
  /* reshard_after_forward = False (fsdp17): no gather under backward */
  double bwd_gather = cfg->no_reshard ? 0 : gather;
  bwd->compute_s += mp_cost_overlap_penalty (share, bwd_gather + reduce, bwd->compute_s);
}

/* The parameters of LAYER that a ZeRO group of more than one rank shards under CFG (the
 * dense ones over dp_shard, the experts over edp), in *SHARD (may be NULL) the part of
 * them one rank holds, and in *W their 16-bit size. */
static double
sharded_params (const MpCostContext *ctx, const MpParallelConfig *cfg,
                const MpStageSpans *spans, guint layer, double *shard, double *w)
{
  double d, x, nd = spans->dp_shard.n_ranks, ne = spans->edp.n_ranks;
  mp_cost_layer_params (ctx, cfg, layer, &d, &x);
  mp_model_state_bytes_per_param (ctx->model, w, NULL, NULL);
  d = nd > 1 ? d : 0;
  x = ne > 1 ? x : 0;
  if (shard)
    *shard = (d > 0 ? d / nd : 0) + (x > 0 ? x / ne : 0);
  return d + x;
}

/* A memory-bound kernel moving BYTES on DEV, in line with PHASE's compute. */
static void
memory_pass (const MpCostDevice *dev, double bytes, MpPhaseCost *phase)
{
  MpKernelCost k;
  mp_cost_memory_kernel (dev, bytes, 0, &k);
  phase->compute_s += k.time_s;
  phase->bytes += k.bytes;
}

/* FSDP2's copy-out (mp_stack_fsdp2): after each ZeRO-3 all-gather of a layer's weights
 * the compute stream waits for it and copies the gathered buffer into the parameters
 * (split_with_sizes_copy: the unsharded weights read and written once), a memory-bound
 * kernel in line with the layer's compute, forward and, when the layer was resharded,
 * again before its backward. And its copy-in before each gather (accfsdp19):
 * foreach_all_gather (_fsdp_collectives.py) takes each shard at the compute dtype
 * (_get_param_all_gather_inputs: a _foreach_copy_ casting the stored shard, 4 + e bytes
 * an element under fp32 storage, mp_stack_state_layout; none when already 16-bit) and
 * copies it into the all-gather's input buffer (_foreach_copy_, e + e), on FSDP2's
 * copy-in stream, charged in line as FSDP1's passes are (fsdp1_grad_passes). */
static void
fsdp2_copy_out (const MpCostContext *ctx, const MpParallelConfig *cfg,
                const MpStageSpans *spans, guint layer, MpPhaseCost *fwd, MpPhaseCost *bwd)
{
  const MpCostDevice *dev = spans->device;
  if (cfg->zero < 3 || !mp_stack_fsdp2 (cfg->stack) || dev->curve->klass == MP_DEVICE_CLASS_CPU)
    return;
  double w, shard, gathered = sharded_params (ctx, cfg, spans, layer, &shard, &w);
  if (!(gathered > 0))
    return;
  gboolean cast = ctx->model->precision != MP_DTYPE_FP32
                  && mp_stack_state_layout (cfg->stack) == MP_STATE_FP32;
  double in = shard * ((cast ? 4 + w : 0) + 2 * w);
  memory_pass (dev, in, fwd);
  memory_pass (dev, 2 * gathered * w, fwd);
  if (!cfg->no_reshard)
    {
      memory_pass (dev, in, bwd);
      memory_pass (dev, 2 * gathered * w, bwd);
    }
}

/* FSDP2's copy-in (mp_stack_fsdp2): before each ZeRO-2/3 reduce-scatter, foreach_reduce
 * (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py) copies the layer's unsharded
 * gradients into one flat buffer of the reduce dtype (foreach_reduce_scatter_copy_in,
 * torch._chunk_cat) on the compute stream, before the reduce-scatter stream waits for it:
 * a kernel reading each gradient (e bytes) and writing it at the reduce width
 * (cm_reduce_bytes), in line with the layer's backward, every micro-batch. */
static void
fsdp2_copy_in (const MpCostContext *ctx, const MpParallelConfig *cfg,
               const MpStageSpans *spans, guint layer, MpPhaseCost *bwd)
{
  const MpCostDevice *dev = spans->device;
  if (cfg->zero < 2 || !mp_stack_fsdp2 (cfg->stack) || dev->curve->klass == MP_DEVICE_CLASS_CPU)
    return;
  double w, reduced = sharded_params (ctx, cfg, spans, layer, NULL, &w);
  if (reduced > 0)
    memory_pass (dev, reduced * (w + cm_reduce_bytes (ctx, cfg)), bwd);
}

/* FSDP1's gradient pre-divide factor for a group of N ranks: torch/distributed/fsdp/
 * _init_utils.py, _get_gradient_predivide_factor (factor = 1; while N % factor == 0 and
 * N / factor > factor: factor *= 2); the post-divide is N over it. */
static double
fsdp1_predivide (double n)
{
  double f = 1;
  while (fmod (n, f) == 0 && n / f > f)
    f *= 2;
  return f;
}

/* FSDP1's passes over a unit's gradients (mp_stack_fsdp1), each a memory-bound kernel, per
 * micro-batch (it reduces every micro-batch, program.c). On the unsharded gradient (P
 * parameters, e-byte elements; r = cm_reduce_bytes):
 *  - autograd's backward of the views FlatParamHandle makes with torch.split
 *    (torch/distributed/fsdp/_flat_param.py, _get_unflat_views_unaligned):
 *    split_with_sizes_backward cats the parameters' gradients into the flat one: e + e;
 *  - the cast to the reduce dtype (_runtime_utils.py, _post_backward_hook:
 *    flat_param.grad.to(handle._reduce_dtype)) when it is wider: e + r;
 *  - the pre-divide (_reduce_grad: _div_if_needed (padded_unsharded_grad,
 *    _gradient_predivide_factor)) when the factor exceeds 1: r + r.
 * On the shard (P / N): the post-divide (r + r) when N over the factor exceeds 1, and under
 * ZeRO-3 before each all-gather the fp32 shard cast to the 16-bit shard it sends
 * (FlatParamHandle._use_low_precision_shard: 4 + e). FSDP2 has none of these: its
 * parameters are their own tensors and NCCL divides (ReduceOp.AVG) for fp32 and bf16.
 * The cast and divides run on FSDP1's post-backward stream, but each fills the GPU with
 * blocks (unlike NCCL's few channels, mp_cost_overlap_share), so they are charged in line
 * with the compute they share the SMs with. Left out: the accumulation of the shard over
 * micro-batches (_accumulate_sharded_grad, 3 r / N). */
static void
fsdp1_grad_passes (const MpCostContext *ctx, const MpParallelConfig *cfg,
                   const MpStageSpans *spans, guint layer, MpPhaseCost *fwd, MpPhaseCost *bwd)
{
  const MpCostDevice *dev = spans->device;
  if (cfg->zero < 2 || !mp_stack_fsdp1 (cfg->stack) || dev->curve->klass == MP_DEVICE_CLASS_CPU)
    return;
  double d, x, w, r = cm_reduce_bytes (ctx, cfg);
  mp_cost_layer_params (ctx, cfg, layer, &d, &x);
  mp_model_state_bytes_per_param (ctx->model, &w, NULL, NULL);
  const MpGroupSpan *group[2] = { &spans->dp_shard, &spans->edp };
  double params[2] = { d, x }, unsharded = 0, shard_b = 0, shard_f = 0;
  for (int k = 0; k < 2; k++)
    {
      double n = group[k]->n_ranks, pre = fsdp1_predivide (n);
      if (!(params[k] > 0) || n <= 1)
        continue;
      unsharded += params[k] * (2 * w + (r > w ? w + r : 0) + (pre > 1 ? 2 * r : 0));
      shard_b += n / pre > 1 ? params[k] / n * 2 * r : 0;
      shard_f += cfg->zero >= 3 ? params[k] / n * (4 + w) : 0;
    }
  if (!(unsharded > 0))
    return;
  memory_pass (dev, unsharded + shard_b, bwd);
  if (!(shard_f > 0))
    return;
  memory_pass (dev, shard_f, fwd);
  if (!cfg->no_reshard)
    memory_pass (dev, shard_f, bwd);
}

/* ---- the layer memo ------------------------------------------------------------------ */

/* A memo key: every input of mp_cost_layer but the layer's class, as words (spans by
 * value, their doubles by their bits), so that equal keys give bit-identical costs. */
#define MEMO_SPAN_WORDS (7 + 2 * MP_TIER_N)
#define MEMO_WORDS (16 + 7 * MEMO_SPAN_WORDS)

static guint64 *
memo_span (guint64 *w, const MpGroupSpan *g)
{
  *w++ = g->n_ranks;
  *w++ = g->n_nodes;
  *w++ = g->ranks_per_node;
  *w++ = g->n_domains;
  *w++ = g->ranks_per_domain;
  *w++ = g->nodes_per_domain;
  *w++ = (guint64) g->widest;
  memcpy (w, g->bw_Bps, sizeof g->bw_Bps);
  memcpy (w + MP_TIER_N, g->latency_s, sizeof g->latency_s);
  return w + 2 * MP_TIER_N;
}

/* The memo key of CFG and SP; with NO_EXPERTS (a class without experts, CmLayer.no_experts)
 * the expert grid's inputs left zero below ZeRO-2: its layers cost the same on every grid
 * and dispatcher, so the grids of one layer-cost choice share them (issue 15: deepseek-v3's
 * kernel floors costed its embedding, dense blocks and head again for each of ~17 grids).
 * etp 0 keeps those keys apart from every full one (mp_parallel_config_etp >= 1). */
static void
memo_key (const MpParallelConfig *cfg, const MpStageSpans *sp, gboolean no_experts,
          guint64 *w)
{
  /* ZeRO-2/3 price their overlap with the layer's compute (zero_overlap): then the
   * data-parallel groups and the gradient width count too; else they are left zero. */
  gboolean sharded = cfg->zero >= 2;
  gboolean grid = !no_experts || sharded;
  gboolean gather = mp_parallel_config_cp_allgather (cfg);   /* the K/V exchange */
  /* Combined 1F1B (ep_overlap) depends on the schedule through its paired share; it
   * moves only expert-parallel time, which a layer without experts has none of. */
  double paired = grid ? mp_cost_ep_overlap_paired (cfg) : 0;
  guint64 paired_bits;
  memcpy (&paired_bits, &paired, sizeof paired_bits);
  const guint64 head[16] = { cfg->tp, cfg->cp, grid ? cfg->ep : 0,
                             grid ? mp_parallel_config_etp (cfg) : 0,
                             cfg->sequence_parallel, cfg->recompute, cfg->recompute_modules,
                             cfg->micro_batch_size, grid ? cfg->dispatcher : 0, cfg->fp8,
                             cfg->flash_attention,
                             cfg->stack + MP_STACK_N * (cfg->compile + 2u * gather),
                             GPOINTER_TO_SIZE (sp->device),
                             sharded ? cfg->zero + 4u * cfg->no_reshard : 0,
                             sharded && cfg->fp32_grads, paired_bits };
  memcpy (w, head, sizeof head);
  w += G_N_ELEMENTS (head);
  const MpGroupSpan none = { 0 };
  w = memo_span (w, &sp->tp);
  w = memo_span (w, &sp->cp);
  w = memo_span (w, grid ? &sp->ep : &none);
  w = memo_span (w, grid ? &sp->etp : &none);
  w = memo_span (w, grid ? &sp->etp_ep : &none);
  w = memo_span (w, sharded ? &sp->dp_shard : &none);
  memo_span (w, sharded ? &sp->edp : &none);
}

/* The exposed context-parallel K/V exchange of attention op OP (costs OC) into FWD and
 * BWD's cp_comm: the ring, Transformer Engine's all-gather or torch's (cp_comm). */
static void
cp_exchange (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpCostDevice *dev,
             const MpStageSpans *spans, const MpOp *op, const MpOpCost *oc, MpPhaseCost *fwd,
             MpPhaseCost *bwd)
{
  double e = ctx->elt;
  /* Ring attention: cp - 1 steps each passing a K, V block to the next rank while the
   * current block is computed; backward passes K, V and their gradients. Only the part
   * the computation does not hide counts. */
  double cp = cfg->cp, kv = MAX (op->kv_heads / cfg->tp, 1.0);
  /* A stack that repeats K/V heads before the kernel sends them repeated. */
  if (mp_stack_repeats_kv (cfg->stack) && op->kv_heads > 0)
    kv = MAX (op->heads / cfg->tp, 1.0);
  double chunk = (double) ctx->model->seq_len / cp;
  double width = op->v_head_dim > 0 ? op->head_dim + op->v_head_dim : 2 * op->head_dim;
  double block = cfg->micro_batch_size * chunk * kv * width * e;
  double step = coll (ctx, dev, MP_COLL_SEND_RECV, block, &spans->cp);
  double step2 = coll (ctx, dev, MP_COLL_SEND_RECV, 2 * block, &spans->cp);
  /* A window reaches back only over the chunks it spans (ir14). */
  double steps = cp - 1;
  if (op->window > 0)
    steps = MIN (steps, ceil (op->window / chunk));
  gboolean gather = mp_parallel_config_cp_allgather (cfg) && op->window == 0;
  if (gather && !mp_stack_cp_allgather (cfg->stack))
    {
      /* Transformer Engine's (AttnFuncWithCPAndKVAllGather, "KV all-gather between CP
       * ranks is exposed", citing Llama 3 section 3.3.2): K and V each gathered whole
       * before any of the attention runs; backward gathers them again and reduce-scatters
       * dK and dV (each cp blocks, at the model's width) after the last step
       * (transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py:
       * gather_along_first_dim, then reduce_scatter_along_first_dim). Nothing overlaps
       * them. */
      double ag = coll (ctx, dev, MP_COLL_ALL_GATHER, cp * block / 2, &spans->cp);
      double rs = coll (ctx, dev, MP_COLL_REDUCE_SCATTER, cp * block / 2, &spans->cp);
      fwd->cp_comm_s += 2 * ag;
      bwd->cp_comm_s += 2 * (ag + rs);
      return;
    }
  if (gather)
    {
      /* torch's: one all-gather of every rank's block, hidden only behind the local
       * block's sub-attention; the rest waits for it. Backward gathers K, V so again, and
       * rings dK, dV (all-to-all rotater) in fp32 (convert_to_f32): 2 blocks' bytes a
       * step, as the ring's K, V + dK, dV (torch/distributed/tensor/experimental/
       * _attention.py, _templated_ring_attention_backward: kv_rotater, dkv_rotater). */
      double ag = coll (ctx, dev, MP_COLL_ALL_GATHER, cp * block, &spans->cp);
      fwd->cp_comm_s += MAX (0, ag - oc->fwd.time_s / cp);
      bwd->cp_comm_s += MAX (0, ag - oc->bwd.time_s / cp);
    }
  else
    fwd->cp_comm_s += MAX (0, steps * (step - oc->fwd.time_s / cp));
  bwd->cp_comm_s += MAX (0, steps * (step2 - oc->bwd.time_s / cp));
}

/* ---- the op memo ----------------------------------------------------------------------
 * A layer-memo miss costs every op of the layer again, though mp_cost_op reads few of the
 * configuration's fields: tp, cp, the micro-batch, sequence parallelism, fp8, flash
 * attention, the stack and torch.compile, and for an expert op (CmOp.expert) ep and etp
 * too; never the dispatcher, recompute, ZeRO or the spans beyond their device. So one
 * row per layer class and kind of op (expert or not) under those fields keeps the ops'
 * costs across the expert grids and dispatchers that the layer memo keeps apart (issue
 * 15: deepseek-v3's attention, norms, router and shared expert were costed again for
 * each grid, its experts for each dispatcher). A key holds every input mp_cost_op reads
 * that a layer class fixes not, so a hit is the very result a call would give. */
#define OP_MEMO_WORDS 13

typedef struct {
  MpOpCost cost;
  gboolean have;
} OpCell;

/* The row of LAYER's class and kind EXPERT under CFG on DEV in CTX's op memo, made (empty)
 * when missing. */
static OpCell *
op_row (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpCostDevice *dev,
        guint layer, gboolean expert)
{
  const guint64 key[OP_MEMO_WORDS] = { ctx->layers[layer].class_id, expert, cfg->tp, cfg->cp,
                                       cfg->micro_batch_size, cfg->sequence_parallel,
                                       cfg->fp8, cfg->flash_attention, cfg->stack,
                                       cfg->compile, GPOINTER_TO_SIZE (dev),
                                       expert ? cfg->ep : 0,
                                       expert ? mp_parallel_config_etp (cfg) : 0 };
  MpCostContext *memo = (MpCostContext *) ctx;          /* the memo only: see its field */
  OpCell *row = cm_memo_get (memo->op_memo, key, OP_MEMO_WORDS);
  if (row == NULL)
    row = cm_memo_put (&memo->op_memo, key, OP_MEMO_WORDS, NULL,
                       MAX (ctx->model->layers[layer].n_ops, 1u) * sizeof *row);
  return row;
}

/* mp_cost_op's figures for op I of LAYER, from ROWS (the layer's two rows, NULL till
 * asked; a memo started again takes the other with it) or costed into them: the memo's,
 * good till the next call. */
static const MpOpCost *
op_cost (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpStageSpans *spans,
         guint layer, guint i, OpCell *rows[2])
{
  gboolean expert = ctx->layers[layer].ops[i].expert;
  if (rows[expert] == NULL)
    {
      rows[expert] = op_row (ctx, cfg, spans->device, layer, expert);
      if (cm_memo_size (ctx->op_memo) == 1)
        rows[!expert] = NULL;
    }
  OpCell *cell = &rows[expert][i];
  if (!cell->have)
    {
      mp_cost_op (ctx, cfg, spans, layer, i, &cell->cost);
      cell->have = TRUE;
    }
  return &cell->cost;
}

/* mp_cost_layer's figures, computed (mp_cost_layer memoizes them). */
static void
layer_cost (const MpCostContext *ctx, const MpParallelConfig *cfg,
            const MpStageSpans *spans, guint layer, MpPhaseCost *fwd, MpPhaseCost *bwd)
{
  const MpLayer *l = &ctx->model->layers[layer];
  const CmLayer *cl = &ctx->layers[layer];
  const MpCostDevice *dev = spans->device;
  double again_s = 0, again_flops = 0;   /* selective: the forward work re-run */
  OpCell *rows[2] = { NULL, NULL };
  memset (fwd, 0, sizeof *fwd);
  memset (bwd, 0, sizeof *bwd);
  for (guint i = 0; i < l->n_ops; i++)
    {
      const MpOp *op = &l->ops[i];
      const CmOp *r = &cl->ops[i];
      const MpOpCost *oc = op_cost (ctx, cfg, spans, layer, i, rows);
      double comm_before = fwd->tp_comm_s + fwd->ep_comm_s;
      fwd->compute_s += oc->fwd.time_s;
      fwd->flops += oc->fwd.flops;
      fwd->bytes += oc->fwd.bytes;
      fwd->model_flops += oc->model_fwd_flops;
      bwd->compute_s += oc->bwd.time_s;
      bwd->flops += oc->bwd.flops;
      bwd->bytes += oc->bwd.bytes;
      bwd->model_flops += op->fwd_flops > 0
                          ? oc->model_fwd_flops * op->bwd_flops / op->fwd_flops : 0;
      if (cfg->tp > 1 && !(r->expert && cm_expert_grid (cfg)))
        tp_collectives (ctx, cfg, spans, r, oc, fwd, bwd);
      if (r->a2a_width > 0)
        moe_dispatch (ctx, cfg, spans, r, fwd, bwd);
      double share = cm_op_recompute_share (l, i, cfg);
      if (share > 0)
        {
          /* Its kernels and the collectives it runs forward, once more (the op-level
           * policy keeps what collectives produce: only the kernels). */
          double comm = fwd->tp_comm_s + fwd->ep_comm_s - comm_before;
          if (mp_recompute_modules_of (cfg) == MP_RECOMPUTE_OP)
            comm = 0;
          again_s += share * oc->fwd.time_s + comm;
          again_flops += share * oc->fwd.flops;
        }
      if (op->kind == MP_OP_ATTENTION && cfg->cp > 1)
        cp_exchange (ctx, cfg, dev, spans, op, oc, fwd, bwd);
    }
  ep_overlap (ctx, cfg, dev, fwd, bwd);
  zero_overlap (ctx, cfg, spans, layer, fwd, bwd);
  phase_total (fwd);
  if (cfg->recompute == MP_RECOMPUTE_FULL && cm_recomputable (l))
    {
      /* The whole forward again, collectives included, before the backward (the block
       * method's other blocks: mp_cost_stage_times takes this out again). */
      bwd->recompute_s = fwd->total_s;
      bwd->flops += fwd->flops;
    }
  else if (cfg->recompute == MP_RECOMPUTE_SELECTIVE)
    {
      /* The modules' forward again: the attention core (with flash attention too: the
       * checkpoint re-runs its forward kernel), norms, MLP, experts. */
      bwd->recompute_s = again_s;
      bwd->flops += again_flops;
    }
  /* After the recompute is priced: a recomputed forward finds its weights gathered. */
  fsdp2_copy_out (ctx, cfg, spans, layer, fwd, bwd);
  fsdp2_copy_in (ctx, cfg, spans, layer, bwd);
  fsdp1_grad_passes (ctx, cfg, spans, layer, fwd, bwd);
  phase_total (fwd);
  phase_total (bwd);
}

/* A row of the layer memo: under one key, each layer class's costs as they are asked for.
 * Callers ask class after class under one key (a stage's layers, the kernel floor's
 * classes), so the row asked last is compared first, without a hash. */
typedef struct {
  MpPhaseCost fwd, bwd;
  gboolean have;
} MemoCell;

struct CmLayerRow {
  guint64 key[MEMO_WORDS];
  MemoCell cells[];               /* n_classes */
};

/* The row of KEY in CTX's layer memo, made (empty) when missing; WHICH: the full key's
 * (0) or one without the expert grid's (1), each compared first with the one asked last. */
static CmLayerRow *
layer_row (const MpCostContext *ctx, const guint64 *key, guint which)
{
  MpCostContext *memo = (MpCostContext *) ctx;          /* the memo only: see its field */
  CmLayerRow *row = memo->layer_row[which];
  if (row != NULL && memcmp (row->key, key, sizeof row->key) == 0)
    return row;
  row = cm_memo_get (memo->layer_memo, key, MEMO_WORDS);
  if (row == NULL)
    {
      /* may start the memo again (at the same address, maybe): the last rows go with
       * it */
      row = cm_memo_put (&memo->layer_memo, key, MEMO_WORDS, NULL,
                         sizeof *row + MAX (ctx->n_classes, 1u) * sizeof (MemoCell));
      if (cm_memo_size (memo->layer_memo) == 1)
        memo->layer_row[0] = memo->layer_row[1] = NULL;
      memcpy (row->key, key, sizeof row->key);
    }
  memo->layer_row[which] = row;
  return row;
}

void
mp_cost_layer (const MpCostContext *ctx, const MpParallelConfig *cfg,
               const MpStageSpans *spans, guint layer, MpPhaseCost *fwd, MpPhaseCost *bwd)
{
  g_return_if_fail (ctx != NULL && cfg != NULL && spans != NULL && fwd != NULL && bwd != NULL);
  g_return_if_fail (cm_config_sane (cfg) && layer < ctx->model->n_layers);
  guint64 key[MEMO_WORDS];
  guint which = ctx->layers[layer].no_experts;
  memo_key (cfg, spans, which, key);
  guint id = ctx->layers[layer].class_id;
  const MemoCell *hit = &layer_row (ctx, key, which)->cells[id];
  if (hit->have)
    {
      *fwd = hit->fwd;
      *bwd = hit->bwd;
      return;
    }
  layer_cost (ctx, cfg, spans, layer, fwd, bwd);
  /* the row found again: costing may have asked for others */
  layer_row (ctx, key, which)->cells[id] = (MemoCell) { *fwd, *bwd, TRUE };
}

void
mp_cost_layers (const MpCostContext *ctx, const MpParallelConfig *cfg,
                const MpStageSpans *spans, guint n, const guint *layers, MpPhaseCost *fwd,
                MpPhaseCost *bwd)
{
  g_return_if_fail (ctx != NULL && cfg != NULL && spans != NULL && (n == 0 || (layers != NULL
                    && fwd != NULL && bwd != NULL)));
  g_return_if_fail (cm_config_sane (cfg));
  guint64 key[2][MEMO_WORDS];
  gboolean made[2] = { FALSE, FALSE };
  CmLayerRow *rows[2] = { NULL, NULL };
  for (guint i = 0; i < n; i++)
    {
      g_return_if_fail (layers[i] < ctx->model->n_layers);
      const CmLayer *cl = &ctx->layers[layers[i]];
      guint id = cl->class_id, which = cl->no_experts;
      if (!made[which])
        {
          memo_key (cfg, spans, which, key[which]);
          made[which] = TRUE;
        }
      if (rows[which] == NULL)
        rows[which] = layer_row (ctx, key[which], which);
      if (rows[which]->cells[id].have)
        {
          fwd[i] = rows[which]->cells[id].fwd;
          bwd[i] = rows[which]->cells[id].bwd;
          continue;
        }
      layer_cost (ctx, cfg, spans, layers[i], &fwd[i], &bwd[i]);
      /* found again: costing may have asked for others, and a memo started again takes
       * the rows with it */
      rows[0] = rows[1] = NULL;
      rows[which] = layer_row (ctx, key[which], which);
      rows[which]->cells[id] = (MemoCell) { fwd[i], bwd[i], TRUE };
    }
}

/* ---- stages -------------------------------------------------------------------------- */

static void
phase_add (MpPhaseCost *acc, const MpPhaseCost *p, double times)
{
  acc->compute_s += times * p->compute_s;
  acc->recompute_s += times * p->recompute_s;
  acc->tp_comm_s += times * p->tp_comm_s;
  acc->ep_comm_s += times * p->ep_comm_s;
  acc->cp_comm_s += times * p->cp_comm_s;
  acc->total_s += times * p->total_s;
  acc->flops += times * p->flops;
  acc->model_flops += times * p->model_flops;
  acc->bytes += times * p->bytes;
}

/* Takes a layer's recomputation (forward FWD, backward BWD as mp_cost_layer gave them)
 * out of ACC again: a block that the block method leaves alone. */
static void
unrecompute (MpPhaseCost *acc, const MpPhaseCost *fwd, const MpPhaseCost *bwd)
{
  acc->recompute_s -= bwd->recompute_s;
  acc->total_s -= bwd->recompute_s;
  acc->flops -= fwd->flops;
}

/* BUCKETS[N] at BYTES per parameter moved by KIND over SPAN, one collective each (the
 * programs' buckets, cm_stage_buckets): the total time, and the last bucket's (what is
 * left once backward has finished). */
static double
bucketed (const MpCostContext *ctx, const MpCostDevice *dev, MpCollKind kind,
          const MpGradBucket *buckets, guint n, double bytes, const MpGroupSpan *span,
          double *last)
{
  double total = 0, size = -1, one = 0;
  if (bytes > 0 && span->n_ranks > 1)
    for (guint i = 0; i < n; i++)
      {
        if (buckets[i].params * bytes != size)
          one = coll (ctx, dev, kind, size = buckets[i].params * bytes, span);
        total += one;
      }
  if (last)
    *last = total > 0 ? one : 0;
  return total;
}

/* Fills PER[layer] with each bucket's time by KIND over SPAN at BYTES per parameter,
 * charged to the bucket's lowest layer (where backward closes it). */
static void
per_layer_buckets (const MpCostContext *ctx, const MpCostDevice *dev, MpCollKind kind,
                   const MpGradBucket *buckets, guint n, double bytes, const MpGroupSpan *span,
                   double *per)
{
  double size = -1, one = 0;
  if (bytes > 0 && span->n_ranks > 1)
    for (guint i = 0; i < n; i++)
      {
        if (buckets[i].params * bytes != size)
          one = coll (ctx, dev, kind, size = buckets[i].params * bytes, span);
        per[buckets[i].lo] += one;
      }
}

/* ZeRO-3 / FSDP as the programs run it (program.c emit_forward, emit_backward): one
 * data-parallel stream, first in first out, that gathers each layer's weights one layer
 * ahead (issued once the compute before the previous layer is done) and reduce-scatters
 * each bucket once the backward of its lowest layer is done. Layer by layer a gather can
 * outlast the compute it hides under (a large expert layer behind a short forward),
 * which the micro-batch's totals do not show. The time one micro-batch's forward and
 * backward passes over chunk [LO, LO + N) wait beyond their compute FWD[l] + BWD[l], with
 * gathers G[l] and reduce-scatters RS[l]; the stream drains before the next pass. */
static double
zero3_pass_wait (guint lo, guint n, const double *fwd, const double *bwd, const double *g,
                 const double *rs, const gboolean *root, gboolean regather)
{
  guint end = lo + n;
  /* The root unit (mp_parallel_config_fsdp_root): gathered before the first layer, which
   * waits for all of it; not regathered; its buckets reduced after the last backward. */
  double stream = g[lo], late_rs = 0;
  for (guint l = lo + 1; l < end; l++)
    stream += root[l] ? g[l] : 0;
  double ready = stream, t = 0, compute = 0;
  for (guint l = lo; l < end; l++)
    {
      /* T is when the previous layer's forward ends: the prefetch waits for it. */
      double next = l + 1 < end && !root[l + 1] ? (stream = MAX (stream, t) + g[l + 1]) : 0;
      t = MAX (t, ready) + fwd[l];
      compute += fwd[l];
      ready = next;
    }
  /* reshard_after_forward = False (fsdp17): backward finds the weights still gathered. */
  gboolean first = regather && !root[end - 1];
  ready = stream = MAX (stream, t) + (first ? g[end - 1] : 0);
  for (guint l = end; l-- > lo;)
    {
      double next = 0;
      if (l > lo && !(regather && root[l - 1]))
        next = stream = MAX (stream, t) + (regather ? g[l - 1] : 0);
      t = MAX (t, ready) + bwd[l];
      compute += bwd[l];
      if (rs[l] > 0 && root[l])
        late_rs += rs[l];
      else if (rs[l] > 0)
        stream = MAX (stream, t) + rs[l];
      ready = next;
    }
  if (late_rs > 0)
    stream = MAX (stream, t) + late_rs;
  return MAX (t, stream) - compute;
}

/* ZeRO-3: the wait of one micro-batch's passes over every chunk of STAGE (zero3_pass_wait)
 * with the layers' forward and backward times FWD, BWD (by model layer), the layers'
 * gathers LAYERS[2] and the gradient buckets BUCKETS[2] (dense, expert: N of each). */
static double
zero3_stage_wait (const MpCostContext *ctx, const MpParallelConfig *cfg,
                  const MpStageSpans *sp, guint stage, const double *fwd, const double *bwd,
                  MpGradBucket *const layers[2], const guint n_layers[2],
                  MpGradBucket *const buckets[2], const guint n_buckets[2])
{
  guint nl = ctx->model->n_layers, pp = cfg->pp, vpp = mp_parallel_config_vpp (cfg);
  double w, g = cm_reduce_bytes (ctx, cfg);
  mp_model_state_bytes_per_param (ctx->model, &w, NULL, NULL);
  g_autofree double *gather = g_new0 (double, 2 * nl);
  double *rs = gather + nl;
  g_autofree gboolean *root = g_new (gboolean, nl);
  for (guint l = 0; l < nl; l++)
    root[l] = mp_parallel_config_fsdp_root (cfg, &ctx->model->layers[l]);
  for (int e = 0; e < 2; e++)
    {
      const MpGroupSpan *span = e ? &sp->edp : &sp->dp_shard;
      per_layer_buckets (ctx, sp->device, MP_COLL_ALL_GATHER, layers[e], n_layers[e], w,
                         span, gather);
      per_layer_buckets (ctx, sp->device, MP_COLL_REDUCE_SCATTER, buckets[e], n_buckets[e],
                         g, span, rs);
    }
  guint chunks = pp * vpp, first[chunks], count[chunks];
  cm_chunk_layers (ctx, cfg, first, count);
  double wait = 0;
  for (guint v = 0; v < vpp; v++)
    if (count[stage + v * pp] > 0)
      wait += zero3_pass_wait (first[stage + v * pp], count[stage + v * pp], fwd, bwd,
                               gather, rs, root, !cfg->no_reshard);
  return wait;
}

double
cm_tp_partial_params (const MpCostContext *ctx, const MpParallelConfig *cfg, guint first,
                      guint n)
{
  if (cfg->tp <= 1)
    return 0;
  return (sequence_parallel (cfg) ? cm_sum (ctx, CM_SUM_PARTIAL_ROWS, first, n) : 0)
         + cm_sum (ctx, CM_SUM_PARTIAL_HEADS, first, n);
}

/* The optimizer's memory traffic under STACK against one fused Adam kernel's (which reads
 * each parameter's gradient, weight and two moments and writes the three back: 7 element
 * accesses). Composer's DecoupledAdamW loop (mp_stack_unfused_optimizer) runs per tensor
 * weight decay (param.mul_: 2 accesses), exp_avg.mul_(b1).add_(grad) (2 + 3),
 * exp_avg_sq.mul_(b2).addcmul_(grad, grad) (2 + 3), sqrt, / and add_(eps) (2 each) and
 * param.addcdiv_ (4): 22. torchtitan's foreach AdamW (torch/optim/adamw.py,
 * _multi_tensor_adamw, decoupled weight decay, not capturable): _foreach_mul_ of the
 * params (2), _foreach_lerp_ of exp_avg to the grads (3), _foreach_mul_ and
 * _foreach_addcmul_ of exp_avg_sq (2 + 3), _foreach_sqrt into a new list (2), its
 * _foreach_div_ by the bias correction and _foreach_add_ of eps (2 + 2) and
 * _foreach_addcdiv_ of the params (4): 20. Both clip first, reading every gradient for
 * the norm and scaling it (clip_grad_norm_: 1 + 2): 25 and 23 against 7. */
static double
optimizer_passes (MpStack stack)
{
  if (!mp_stack_unfused_optimizer (stack))
    return 1.0;
  return (stack == MP_STACK_TORCHTITAN ? 20.0 + 3.0 : 22.0 + 3.0) / 7.0;
}

/* Data-parallel and optimizer times of a stage whose rank holds DENSE and EXPERT
 * parameters, FP8[2] of them (dense, expert) in FP8 GEMMs, PARTIAL of them replicated
 * over tp with gradients partial over it (cm_tp_partial_params); TIED: it also shares the word
 * embeddings with the other end stage; FWD_S, BWD_S: ZeRO-3's layer times by model layer;
 * RS_LAYER (ZeRO <= 2, or NULL): one backward's reductions by bucket's lowest layer. */
static void
stage_sync (const MpCostContext *ctx, const MpParallelConfig *cfg, const MpStageSpans *sp,
            guint stage, double dense, double expert, const double fp8[2], double partial,
            double tied, const double *fwd_s, const double *bwd_s, double *rs_layer,
            MpStageTime *out)
{
  const MpCostDevice *dev = sp->device;
  double w, g, o, last_d = 0, last_e = 0, last_r = 0;
  mp_model_state_bytes_per_param (ctx->model, &w, NULL, &o);
  g = cm_reduce_bytes (ctx, cfg);
  /* HSDP (fsdp17): dense state shards over the shard group (dp * cp without HSDP). */
  double reps = mp_parallel_config_zero_shard (cfg), ereps = mp_parallel_config_edp (cfg);
  double cap = cm_bucket_bytes (cfg) / g;
  guint nd, ne;
  g_autofree MpGradBucket *bd = cm_stage_buckets (ctx, cfg, stage, FALSE, cap, &nd);
  g_autofree MpGradBucket *be = cm_stage_buckets (ctx, cfg, stage, TRUE, cap, &ne);
  /* ZeRO-1: once after the last micro-batch; ZeRO-2/3: every micro-batch (program.c). */
  double times = cfg->zero >= 2 ? cfg->num_micro_batches : 1;
  MpCollKind reduce = cfg->zero >= 1 ? MP_COLL_REDUCE_SCATTER : MP_COLL_ALL_REDUCE;
  out->dp_reduce_s = times * (bucketed (ctx, dev, reduce, bd, nd, g, &sp->dp_shard, &last_d)
                              + bucketed (ctx, dev, reduce, be, ne, g, &sp->edp, &last_e));
  /* HSDP: each bucket's accumulated shard all-reduced over the replicate group once, after
   * the last micro-batch's reduce-scatter (FSDP2's set_requires_all_reduce(False) on the
   * earlier ones; program.c emit_backward). */
  out->dp_reduce_s += bucketed (ctx, dev, MP_COLL_ALL_REDUCE, bd, nd, g / reps, &sp->dp_rep,
                                &last_r);
  last_d += last_r;
  if (rs_layer && cfg->zero <= 2)
    {
      per_layer_buckets (ctx, dev, reduce, bd, nd, g, &sp->dp_shard, rs_layer);
      per_layer_buckets (ctx, dev, reduce, be, ne, g, &sp->edp, rs_layer);
    }
  if (cfg->zero == 1 || cfg->zero == 2)
    /* the updated weights gathered back, bucket by bucket */
    out->dp_gather_s = bucketed (ctx, dev, MP_COLL_ALL_GATHER, bd, nd, w, &sp->dp_shard, NULL)
                       + bucketed (ctx, dev, MP_COLL_ALL_GATHER, be, ne, w, &sp->edp, NULL);
  else if (cfg->zero >= 3)
    {
      /* ZeRO-3 / FSDP: each layer's weights gathered before its forward and, unless
       * reshard_after_forward is off, again before its backward, every micro-batch. */
      guint ld, le;
      g_autofree MpGradBucket *pd = cm_stage_buckets (ctx, cfg, stage, FALSE, 0, &ld);
      g_autofree MpGradBucket *pe = cm_stage_buckets (ctx, cfg, stage, TRUE, 0, &le);
      out->zero3_gather_s
        = (cfg->no_reshard ? 1 : 2)
          * (bucketed (ctx, dev, MP_COLL_ALL_GATHER, pd, ld, w, &sp->dp_shard, NULL)
             + bucketed (ctx, dev, MP_COLL_ALL_GATHER, pe, le, w, &sp->edp, NULL));
      MpGradBucket *const layers[2] = { pd, pe }, *const buckets[2] = { bd, be };
      const guint n_layers[2] = { ld, le }, n_buckets[2] = { nd, ne };
      out->zero3_wait_s = zero3_stage_wait (ctx, cfg, sp, stage, fwd_s, bwd_s, layers,
                                            n_layers, buckets, n_buckets);
    }
  out->dp_last_bucket_s = MAX (last_d, last_e);
  if (tied > 0)
    out->tied_embedding_s = coll (ctx, dev, MP_COLL_ALL_REDUCE, tied * g, &sp->pp_ends);
  /* The optimizer streams each owned parameter's state: gradient read, state read and
   * written, 16-bit weights written (fp32 training: the weights read and written). */
  gboolean mixed = ctx->model->precision != MP_DTYPE_FP32;
  double owned = cfg->zero >= 1 ? dense / reps + expert / ereps : dense + expert;
  double per_param = cm_grad_bytes (ctx, cfg) + 2 * o + (mixed ? w : 2 * w);
  MpKernelCost k;
  mp_cost_memory_kernel (dev, owned * per_param * optimizer_passes (cfg->stack), 0, &k);
  out->optimizer_s = k.time_s;
  /* The device's own optimizer, timed (a CPU's update is bound by its divisions and
   * square roots, not by the bytes it streams). */
  double measured = mp_cost_profile_optimizer_params (dev->profile, ctx->model->optimizer);
  if (measured > 0)
    out->optimizer_s = owned / measured;
  /* Before the update, the gradients partial over tp summed over it in one all-reduce
   * (finalize_model_grads; exec/model-exec.c finalize_tp_grads), of the shard this rank
   * updates under ZeRO. */
  if (partial > 0)
    out->optimizer_s += coll (ctx, dev, MP_COLL_ALL_REDUCE,
                              (cfg->zero >= 1 ? partial / reps : partial) * g, &sp->tp);
  /* The FP8 weight copies, refreshed once per step from the updated weights (ZeRO-3: of
   * this rank's shard, which is what it gathers); torchao keeps none, it casts at each use. */
  if (cm_fp8_on (cfg, dev) && fp8[0] + fp8[1] > 0 && !mp_stack_torchao_fp8 (cfg->stack))
    {
      double cast = cfg->zero >= 3 ? fp8[0] / reps + fp8[1] / ereps : fp8[0] + fp8[1];
      fp8_cast (dev, cast, &k);
      out->optimizer_s += k.time_s;
    }
}

double
cm_boundary_bytes (const MpCostContext *ctx, const MpParallelConfig *cfg, guint last_layer,
                guint first_layer)
{
  const CmLayer *cl = &ctx->layers[last_layer];
  double width = cl->output_width;
  gboolean split = cl->output_split;
  if (width <= 0)
    {
      width = ctx->layers[first_layer].input_width;
      split = first_layer > 0 && ctx->layers[first_layer - 1].output_split;
    }
  double div = split || sequence_parallel (cfg) ? cfg->tp : 1;
  return cm_tokens (ctx, cfg) * width * ctx->elt / div;
}

/* mp_cost_stage_times, and when CHUNK_FWD is given each chunk's forward, backward and
 * (ZeRO <= 2) gradient reductions (mp_cost_chunk_times). */
static void
stage_times (const MpCostContext *ctx, const MpParallelConfig *cfg, MpStageTime *out,
             double *chunk_fwd, double *chunk_bwd, double *chunk_rs)
{
  guint pp = cfg->pp, vpp = mp_parallel_config_vpp (cfg), chunks = pp * vpp;
  guint nc = MAX (ctx->n_classes, 1u);
  g_autofree guint *first = g_new (guint, chunks);
  g_autofree guint *count = g_new (guint, chunks);
  cm_chunk_layers (ctx, cfg, first, count);

  /* Stages whose groups look alike share their spans; stages whose tensor-, context- and
   * expert-parallel groups (and device) are alike share their per-class layer costs. */
  g_autofree MpStageSpans *spans = g_new (MpStageSpans, pp);
  g_autofree guint *reps = g_new (guint, pp);
  g_autofree guint *layer_row = g_new (guint, pp);
  g_autofree MpPhaseCost *cache = g_new (MpPhaseCost, (gsize) 2 * nc * pp);
  g_autofree gboolean *have = g_new0 (gboolean, (gsize) nc * pp);
  g_autofree guint *rep_of = g_new (guint, pp);
  guint n_reps = 0, recompute_blocks = cm_recompute_blocks (cfg);
  /* ZeRO-3's layer-by-layer wait needs each layer's times, by model layer. */
  guint nl = ctx->model->n_layers;
  gboolean per_layer = cfg->zero >= 3 || chunk_fwd != NULL;
  g_autofree double *rs_layer = chunk_rs && cfg->zero <= 2 ? g_new0 (double, nl) : NULL;
  g_autofree double *fwd_s = per_layer ? g_new0 (double, nl) : NULL;
  g_autofree double *bwd_s = per_layer ? g_new0 (double, nl) : NULL;
  double prev_dense = 0, prev_expert = 0, prev_tied = 0, prev_fp8[2] = { 0, 0 };
  double prev_partial = 0;

  for (guint s = 0; s < pp; s++)
    {
      guint rep = G_MAXUINT;
      for (guint i = 0; i < n_reps && rep == G_MAXUINT; i++)
        if (cm_spans_equal (ctx, cfg, reps[i], s))
          rep = reps[i];
      if (rep == G_MAXUINT)
        {
          rep = s;
          mp_cost_stage_spans (ctx, cfg, s, &spans[s]);
          layer_row[s] = s;
          for (guint i = 0; i < n_reps; i++)
            if (cm_same_layer_groups (&spans[reps[i]], &spans[s]))
              {
                layer_row[s] = layer_row[reps[i]];
                break;
              }
          reps[n_reps++] = s;
        }
      const MpStageSpans *sp = &spans[rep];
      guint row = layer_row[rep];

      MpStageTime *st = &out[s];
      memset (st, 0, sizeof *st);
      st->stage = s;
      st->chunks = vpp;
      double dense = 0, expert = 0, fp8[2] = { 0, 0 }, partial = 0;
      guint last_layer = 0, first_layer = G_MAXUINT;
      for (guint v = 0; v < vpp; v++)
        {
          guint c = s + v * pp, blocks = 0;
          for (guint li = first[c]; li < first[c] + count[c]; li++)
            {
              guint id = ctx->layers[li].class_id;
              gsize slot = (gsize) row * nc + id;
              if (!have[slot])
                {
                  mp_cost_layer (ctx, cfg, sp, ctx->class_first[id], &cache[2 * slot],
                                 &cache[2 * slot + 1]);
                  have[slot] = TRUE;
                }
              phase_add (&st->fwd, &cache[2 * slot], 1);
              phase_add (&st->bwd, &cache[2 * slot + 1], 1);
              /* The block method recomputes only the chunk's first N blocks. */
              gboolean again = TRUE;
              if (cm_recomputable (&ctx->model->layers[li]) && blocks++ >= recompute_blocks)
                {
                  unrecompute (&st->bwd, &cache[2 * slot], &cache[2 * slot + 1]);
                  again = FALSE;
                }
              if (fwd_s)
                {
                  fwd_s[li] = cache[2 * slot].total_s;
                  bwd_s[li] = cache[2 * slot + 1].total_s
                              - (again ? 0 : cache[2 * slot + 1].recompute_s);
                }
            }
          if (chunk_fwd)
            {
              chunk_fwd[c] = chunk_bwd[c] = 0;
              for (guint li = first[c]; li < first[c] + count[c]; li++)
                {
                  chunk_fwd[c] += fwd_s[li];
                  chunk_bwd[c] += bwd_s[li];
                }
            }
          st->layers += count[c];
          dense += cm_sum (ctx, CM_SUM_PARAMS_SPLIT, first[c], count[c]) / cfg->tp
                   + cm_sum (ctx, CM_SUM_PARAMS_REP, first[c], count[c]);
          expert += cm_sum (ctx, CM_SUM_PARAMS_EXPERT, first[c], count[c])
                    / cm_expert_shards (cfg);
          double fd, fe;
          cm_fp8_params (ctx, cfg, first[c], count[c], &fd, &fe);
          fp8[0] += fd;
          fp8[1] += fe;
          partial += cm_tp_partial_params (ctx, cfg, first[c], count[c]);
          first_layer = MIN (first_layer, first[c]);
          last_layer = first[c] + count[c] - 1;
        }
      /* Tied embeddings: the last stage keeps its own copy of the word embeddings. */
      double tied = 0;
      if (ctx->tied_params > 0 && pp > 1 && (s == 0 || s == pp - 1))
        tied = ctx->tied_params / cfg->tp;
      if (s == pp - 1 && tied > 0)
        dense += tied;
      st->params = dense + expert;
      if (pp > 1)
        {
          st->p2p_bytes = cm_boundary_bytes (ctx, cfg, last_layer, first_layer);
          st->p2p_s = coll (ctx, sp->device, MP_COLL_SEND_RECV, st->p2p_bytes, &sp->pp_next);
        }
      /* Interior stages usually hold the same parameters over the same groups. */
      const MpStageTime *prev = s > 0 ? &out[s - 1] : NULL;
      gboolean shared = TRUE;
      if (prev && rep_of[s - 1] == rep && prev_dense == dense && prev_expert == expert
          && prev_tied == tied && prev_fp8[0] == fp8[0] && prev_fp8[1] == fp8[1]
          && prev_partial == partial
          && (cfg->zero < 3 || (prev->fwd.total_s == st->fwd.total_s
                                && prev->bwd.total_s == st->bwd.total_s)))
        {
          st->dp_reduce_s = prev->dp_reduce_s;
          st->dp_last_bucket_s = prev->dp_last_bucket_s;
          st->dp_gather_s = prev->dp_gather_s;
          st->zero3_gather_s = prev->zero3_gather_s;
          st->zero3_wait_s = prev->zero3_wait_s;
          st->tied_embedding_s = prev->tied_embedding_s;
          st->optimizer_s = prev->optimizer_s;
        }
      else
        {
          stage_sync (ctx, cfg, sp, s, dense, expert, fp8, partial, tied, fwd_s, bwd_s,
                      rs_layer, st);
          shared = FALSE;
        }
      /* A stage like the one before reduces its chunks alike too. */
      for (guint v = 0; chunk_rs && v < vpp; v++)
        {
          guint c = s + v * pp;
          chunk_rs[c] = shared ? chunk_rs[c - 1] : 0;
          for (guint li = first[c]; !shared && rs_layer && li < first[c] + count[c]; li++)
            chunk_rs[c] += rs_layer[li];
        }
      rep_of[s] = rep;
      prev_dense = dense;
      prev_expert = expert;
      prev_tied = tied;
      prev_fp8[0] = fp8[0];
      prev_fp8[1] = fp8[1];
      prev_partial = partial;
    }
}

void
mp_cost_stage_times (const MpCostContext *ctx, const MpParallelConfig *cfg, MpStageTime *out)
{
  g_return_if_fail (ctx != NULL && cfg != NULL && out != NULL && cm_config_sane (cfg));
  stage_times (ctx, cfg, out, NULL, NULL, NULL);
}

void
mp_cost_chunk_times (const MpCostContext *ctx, const MpParallelConfig *cfg, MpStageTime *out,
                     double *fwd_s, double *bwd_s, double *rs_s)
{
  g_return_if_fail (ctx != NULL && cfg != NULL && out != NULL && cm_config_sane (cfg));
  g_return_if_fail (fwd_s != NULL && bwd_s != NULL && rs_s != NULL);
  stage_times (ctx, cfg, out, fwd_s, bwd_s, rs_s);
}

/* The IR's forward FLOPs per token of LAYER that CFG's recompute runs again. */
static double
recomputed_fwd_flops (const MpCostContext *ctx, const MpParallelConfig *cfg, guint li)
{
  const MpLayer *l = &ctx->model->layers[li];
  if (cfg->recompute == MP_RECOMPUTE_FULL)
    return mp_recompute_full_layer (cfg, ctx->model, li) ? l->fwd_flops : 0;
  double f = 0;
  for (guint i = 0; i < l->n_ops; i++)
    f += cm_op_recompute_share (l, i, cfg) * l->ops[i].fwd_flops;
  return f;
}

double
mp_cost_step_flops (const MpCostContext *ctx, const MpParallelConfig *cfg, gboolean hardware)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL && cm_config_sane (cfg), 0);
  const MpModel *m = ctx->model;
  double tokens = (double) cfg->dp * cfg->micro_batch_size * cfg->num_micro_batches
                  * MAX (m->seq_len, 1u);
  double per_token = m->train_flops_per_token;
  if (hardware)
    {
      if (cfg->recompute == MP_RECOMPUTE_FULL && cm_recompute_blocks (cfg) == G_MAXUINT)
        per_token += ctx->recomputable_fwd_flops;
      else if (cfg->recompute != MP_RECOMPUTE_NONE)
        for (guint li = 0; li < m->n_layers; li++)
          per_token += recomputed_fwd_flops (ctx, cfg, li);
      /* Flash attention's backward recomputes Q K^T: 2.5x forward instead of 2x. */
      if (cfg->flash_attention)
        per_token += 0.5 * ctx->attn_fwd_flops;
    }
  return per_token * tokens;
}
