/* curves.c - the built-in efficiency model of each device class, with the source of
 * every number.
 *
 * These are defaults: a calibration profile (MpCostProfile) replaces the GEMM curve,
 * the memory rate and the collective tables with measurements. What is fixed here is the
 * shape of each curve (tile and wave quantisation, sequence and head-size dependence,
 * message-size dependence) and one measured anchor per class, never a fit to a whole
 * training run. Efficiencies are fractions of the datasheet's dense peak (the cluster
 * file's `peak`) and bandwidths. Units: s, bytes. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/costmodel.h"

#include <string.h>

/* Output tiles cuBLAS chooses among for tensor-core GEMMs, largest first: NVIDIA Deep
 * Learning Performance Guide, "Matrix Multiplication Background User's Guide", section
 * on tile quantisation (256x128, 128x256, 128x128, 256x64, 64x256, 128x64, 64x128,
 * 64x64; larger tiles reuse more data per load and so run faster once the GPU is full). */
#define TILE_HALF 16.0
#define REUSE(m, n) ((double) (m) * (n) / ((m) + (n)))
#define TILE(m, n) { m, n, REUSE (m, n) / (REUSE (m, n) + TILE_HALF) }
static const MpGemmTile gpu_tiles[] = {
  TILE (256, 128), TILE (128, 256), TILE (128, 128), TILE (256, 64),
  TILE (64, 256),  TILE (128, 64),  TILE (64, 128),  TILE (64, 64),
};

/* A CPU core has no tiles worth quantising (register blocks of a few elements). */
static const MpGemmTile cpu_tiles[] = { { 1, 1, 1.0 } };

/* Shared modelling constants of the GPU classes, each a mechanism rather than a fit:
 *  - TILE_HALF (above): a tile's speed is I / (I + TILE_HALF) with I = m n / (m + n), its
 *    multiply-adds per element loaded. 16 makes the smallest listed tile (64x64, I = 32)
 *    run at 0.79 of the largest (256x128, I = 85) when both fill the GPU: the guide's
 *    ordering, with the spread modest because cuBLAS keeps small tiles fed from L2.
 *  - K_OVERHEAD: a tile's prologue (first loads) and epilogue (writing C) cost about one
 *    64-deep main-loop iteration. Consistent with the measured best shapes of the MAMF
 *    table (stas00/ml-engineering) having K of only 1.5-2.8 k (a K of 2048 loses 3%).
 *  - MEM_LATENCY: a memory-bound kernel pays about one DRAM round trip before data
 *    streams, ~0.6 us on A100/H100 (Jia et al., "Dissecting the Ampere GPU architecture
 *    via microbenchmarking", GTC 2021: ~500-600 ns global-memory latency under load);
 *    the half-bandwidth size is then bandwidth x latency (Little's law).
 *  - LAUNCH: ~2 us per kernel. NVIDIA's "Getting Started with CUDA Graphs" (Gray, 2019)
 *    measures ~1 us of device-side gap per back-to-back kernel; eager PyTorch adds a
 *    few us of dispatch per op, hidden only behind long kernels. 2 us is between.
 *  - MAX_SPLIT_K: cuBLAS splits K for GEMMs too small to fill one wave (cuBLASLt
 *    CUBLASLT_ALGO_CONFIG_SPLITK_NUM); we try 1-4. */
#define K_OVERHEAD 64.0
#define MEM_LATENCY 0.6e-6
/* A power-limited GPU sustains less than its burst: A100's large GEMM runs at 230 TFLOP/s
 * as the median over >= 3 s of back-to-back calls (mli/transformers-benchmarks) against
 * 271.2 as the best of a short search (stas00/ml-engineering, compute/accelerator/
 * README.md, MAMF table row "A100 SXM 271.2 ... 2.6.0+cu126", there since commit
 * e695968 of 2025-09-02, read at 744d01e of 2026-08-22; the older CUDA-12.1 row it
 * replaced read 267.9), 0.848 of it,
 * its clock falling under 400 W from the boost the short run keeps. Classes whose anchor
 * is a short run only (Hopper's) are credited with that fraction of it: a constant
 * measured on A100 and checked on H100's published runs (bench-accuracy, held out by
 * family). Hopper is at least as power-bound ("matmuls on the H100 are primarily ...
 * power limited", H. He, "Strangely, Matrix Multiplications on GPUs Run Faster When
 * Given 'Predictable' Data", thonking.ai, 2024). The same holds for the other tensor-core
 * kernels whose figures are short runs (fused attention's plateaus): they keep the
 * fraction in proportion to how busy they keep the tensor cores, as their dynamic power
 * is (mp_cost_sustained_rate). */
#define SUSTAINED_OF_BURST (230.0 / 271.2)
#define LAUNCH 2e-6
#define MAX_SPLIT_K 4

/* Fused attention's head-size and sequence curves are shared (compute.c): see
 * mp_cost_flash_attention. Per class: the plateau at head size 128 and long sequences,
 * and the sequence length at half of it. */

/* Blackwell (B200, GB200), with the large-GEMM efficiency GEMM_EFF of the device's dense
 * bf16 peak:
 *  - SMs: two dies of 74 enabled SMs each, 148 (Chips and Cheese, "Nvidia's B200: Keeping
 *    the CUDA Juggernaut Rolling", 2025).
 *  - GEMM: the short-run MAMF row of the device, GEMM_EFF (stas00/ml-engineering,
 *    "Maximum Achievable Matmul FLOPS comparison table": a mean of 100 calls after 50 of
 *    warm-up at the best shape of a search, like A100's 271.2 there), sustained at
 *    SUSTAINED_OF_BURST of it as Hopper's is: no longer-run Blackwell measurement is at
 *    hand, and a 1000-1200 W board is as power-bound as a 700 W one. A large cube stands
 *    for the anchor shape, as for the other classes.
 *  - Attention forward: FlashAttention-4 (Zadouri, Shah, Dao et al., "FlashAttention-4:
 *    Algorithm and Kernel Pipelining Co-Design for Asymmetric Hardware Scaling", 2026)
 *    reaches up to 1613 TFLOP/s bf16 on B200, 71% of 2250, a short benchmark run:
 *    sustained at mp_cost_sustained_rate of it, as FA3's plateau is on Hopper. Backward:
 *    no figure at hand; Hopper's 0.45 (FA3), which FA4's backward is not reported to fall
 *    below. The sequence curve is Hopper's.
 *  - Memory: 0.9 of HBM, as measured on H200 (REFERENCE-DATA.md).
 *  - NVLink 5 (node and domain: the same ports): all_reduce_perf over a full GB200 NVL72
 *    rack, busbw 835-847 GB/s at 4-8 GiB of 900 (coreweave/nccl-tests PR #43) -> 0.93;
 *    its algbw there, 423-429 GB/s, is what NVLink SHARP's all-reduce reaches -> 425/900.
 *    Inter-node: the same ConnectX-7 NDR NICs as Hopper's systems, 0.9.
 *  - Workspace: cuBLAS's 32 MiB recommendation for Hopper and later (cublasSetWorkspace). */
#define BLACKWELL_CURVE(KLASS, NAME, GEMM_EFF) {                                          \
    .klass = KLASS,                                                                      \
    .name = NAME,                                                                        \
    .sms = 148,                                                                          \
    .tiles = gpu_tiles, .n_tiles = G_N_ELEMENTS (gpu_tiles),                             \
    .k_overhead = K_OVERHEAD, .max_split_k = MAX_SPLIT_K,                                \
    .gemm_anchor_eff = (GEMM_EFF) * SUSTAINED_OF_BURST,                                  \
    .gemm_anchor = { 8192, 8192, 8192 },                                                 \
    .burst_gemm_eff = GEMM_EFF, .sustained_of_burst = SUSTAINED_OF_BURST,                \
    .fp32_simt_eff = 0.9,                                                                \
    .attn_fwd_eff = 1613.0 / 2250.0, .attn_bwd_eff = 0.45, .attn_seq_half = 240,         \
    .attn_fa2_eff = { 0.35, 0.30 },   /* FA2 on Blackwell: no figure; Hopper's (below) */ \
    .mem_eff = 0.9, .mem_latency_s = MEM_LATENCY,                                        \
    .launch_s = LAUNCH,                                                                  \
    .link_eff = { [MP_TIER_NODE] = 841.0 / 900.0, [MP_TIER_DOMAIN] = 841.0 / 900.0,      \
                  [MP_TIER_CLUSTER] = 0.90 },                                            \
    .nvls_algbw_eff = 425.0 / 900.0,                                                     \
    .nccl = TRUE,                                                                        \
    .workspace_bytes = 32.0 * 1024 * 1024,                                               \
  }

static const MpDeviceCurve curves[MP_DEVICE_CLASS_N] = {
  [MP_DEVICE_CLASS_A100] = {
    .klass = MP_DEVICE_CLASS_A100,
    .name = "a100",
    /* NVIDIA A100 Tensor Core GPU Architecture whitepaper: 108 SMs. */
    .sms = 108,
    .tiles = gpu_tiles, .n_tiles = G_N_ELEMENTS (gpu_tiles),
    .k_overhead = K_OVERHEAD, .max_split_k = MAX_SPLIT_K,
    /* The rate a training run sustains, not a burst: fp16 8192^3 matmul on an A100 80GB at
     * 230 of 312 TFLOP/s, the median over >= 3 s of back-to-back calls
     * (mli/transformers-benchmarks, README and micro_bench.ipynb, NGC PyTorch 22.07).
     * Short best-of-a-search runs reach 271.2 (stas00/ml-engineering, "Maximum Achievable
     * Matmul FLOPS comparison table", at SUSTAINED_OF_BURST above), but under sustained load the clock falls to what
     * 400 W allows (NVIDIA's HPL Rpeak counts 1305 of the 1410 MHz boost clock; Glenn
     * Lockwood, "Peak FLOPS", glennklockwood.com/garden/peak-FLOPS). The burst anchor made
     * Korthikanti et al. 2022's layers (Table 4) 9-17% too fast and its MFUs (Table 5) 7-10
     * points too high; this one puts the layers within 6% and the MFUs within 5 points
     * (tests/test-costmodel.c), and FlashAttention-2's "up to 72% MFU" GPT training on 8
     * A100s (Dao 2023, abstract) at 70%. */
    .gemm_anchor_eff = 230.0 / 312.0,
    .gemm_anchor = { 8192, 8192, 8192 },
    /* The same two measurements: 271.2 of 312 in a short run, 230 of it sustained. */
    .burst_gemm_eff = 271.2 / 312.0, .sustained_of_burst = SUSTAINED_OF_BURST,
    /* fp32 without tensor cores: cuBLAS SGEMM runs close to the SIMT peak; 0.9 is an
     * estimate (no measurement in REFERENCE-DATA.md) to be replaced by calibration. */
    .fp32_simt_eff = 0.9,
    /* FlashAttention-2 (Dao 2023, arXiv 2307.08691): "50-73% of the theoretical maximum
     * FLOPs/s on A100"; forward at the top of that range at long sequences and head dim
     * 128, backward lower (its 5 products per 2 of forward, dQ accumulated atomically).
     * Short benchmark runs: sustained at mp_cost_sustained_rate of them. */
    .attn_fwd_eff = 0.70, .attn_bwd_eff = 0.55, .attn_seq_half = 200,
    /* Device copy: 0.9 of HBM bandwidth, the H200 measurement below (REFERENCE-DATA.md);
     * the memory controllers of HBM2e and HBM3e reach similar fractions. */
    .mem_eff = 0.9, .mem_latency_s = MEM_LATENCY,
    .launch_s = LAUNCH,
    /* nccl-tests busbw: 8-GPU NVSwitch all-reduce 200-233 GB/s of NVLink3's 300 (issues
     * NVIDIA/nccl-tests #149, #175, #178) -> 0.77 (REFERENCE-DATA.md rule of thumb);
     * multi-node with 4 x HDR per 8 GPUs 85-96 of 100 GB/s (#119, #175) -> 0.9. A domain
     * link is the same NVLink ports (no A100 domain system is known): the node's. */
    .link_eff = { [MP_TIER_NODE] = 0.77, [MP_TIER_DOMAIN] = 0.77, [MP_TIER_CLUSTER] = 0.90 },
    .nvls_algbw_eff = 0,           /* A100's NVSwitch has no SHARP */
    .nccl = TRUE,
    /* cuBLAS documentation (cublasSetWorkspace): 4 MiB default workspace before Hopper. */
    .workspace_bytes = 4.0 * 1024 * 1024,
  },
  [MP_DEVICE_CLASS_HOPPER] = {
    .klass = MP_DEVICE_CLASS_HOPPER,
    .name = "hopper",
    /* NVIDIA H100 Tensor Core GPU Architecture whitepaper: 132 SMs in H100 SXM5; the
     * H200 is the same chip (PyTorch reported 132 multiprocessors on an H200 here). */
    .sms = 132,
    .tiles = gpu_tiles, .n_tiles = G_N_ELEMENTS (gpu_tiles),
    .k_overhead = K_OVERHEAD, .max_split_k = MAX_SPLIT_K,
    /* REFERENCE-DATA.md: 8192^3 bf16 GEMM on one H200 measured 769-798 TFLOP/s of 989.4
     * -> 0.79 in a short run (the MAMF table's best of a search gives H100 SXM 794.5 =
     * 0.80, the same: its torch 2.7.0+cu126 row, at the commits SUSTAINED_OF_BURST cites;
     * the CUDA-12.1 row before read 792.1); sustained, SUSTAINED_OF_BURST of it: 664
     * TFLOP/s, 0.67. */
    .gemm_anchor_eff = 783.5 / 989.4 * SUSTAINED_OF_BURST,
    .gemm_anchor = { 8192, 8192, 8192 },
    .burst_gemm_eff = 783.5 / 989.4, .sustained_of_burst = SUSTAINED_OF_BURST,
    .fp32_simt_eff = 0.9,          /* estimate, as for A100 */
    /* FlashAttention-3 forward on H100, head dim 128 (pytorch/benchmark PR #2391): 430,
     * 517, 566, 590, 614, 621 TFLOP/s at s = 512 ... 16384, i.e. 0.64 * s / (s + 240)
     * within 2%. Backward: FA3 paper (Shah et al. 2024, arXiv 2407.08608) reports it
     * 1.5-1.75x FA2's, which is ~0.3 of peak on H100: 0.45. Short runs, as FA2's below:
     * sustained at mp_cost_sustained_rate of them. */
    .attn_fwd_eff = 0.64, .attn_bwd_eff = 0.45, .attn_seq_half = 240,
    /* FlashAttention-2 on H100 (the kernel of PyTorch SDPA's flash backend and of the
     * flash-attn 2 package: Ampere's mma.sync, no wgmma or TMA): "only 35% utilization on
     * the H100 GPU" (FA3 paper, Shah et al. 2024, abstract) forward; backward ~0.3 of
     * peak, FA3's 0.45 over the 1.5-1.75x the same paper reports FA3's backward faster. */
    .attn_fa2_eff = { 0.35, 0.30 },
    /* REFERENCE-DATA.md: device-to-device copy 4.3 of 4.8 TB/s on an H200 -> 0.9. */
    .mem_eff = 0.9, .mem_latency_s = MEM_LATENCY,
    .launch_s = LAUNCH,
    /* nccl-tests issue #212 (NCCL maintainer): 8-GPU H100 ring busbw ~370 of 450 GB/s
     * -> 0.82; inter-node 0.85-0.95 x NIC rate (REFERENCE-DATA.md) -> 0.9. A domain
     * (the DGX H100 NVLink Switch System) uses the same NVLink ports: the node's. */
    .link_eff = { [MP_TIER_NODE] = 0.82, [MP_TIER_DOMAIN] = 0.82, [MP_TIER_CLUSTER] = 0.90 },
    /* Same issue: all-reduce with NVLink SHARP reaches algbw ~275 GB/s on 8 GPUs. */
    .nvls_algbw_eff = 275.0 / 450.0,
    .nccl = TRUE,
    /* cuBLAS documentation (cublasSetWorkspace): 32 MiB recommended on Hopper. */
    .workspace_bytes = 32.0 * 1024 * 1024,
    /* Power (mp_cost_power_rate): the anchors are SXM5 boards at their 700 W. NVIDIA's H100
     * datasheet rates the same 132-SM chip as H100 NVL, at 350-400 W, at 1,671 TFLOPS bf16
     * with sparsity against the SXM's 1,979: the tensor clock 400 W sustains, 0.844. A
     * board between (torchtitan's 500 W H100s: "the actual peak TFLOPs number is between
     * SXM and NVL", benchmarks/llama3_h100_202412_torchtitan.md, note 2) lies between. */
    .rated_power_w = 700, .low_power_w = 400, .low_power_rate = 1671.0 / 1979.0,
  },
  [MP_DEVICE_CLASS_BLACKWELL] = BLACKWELL_CURVE (MP_DEVICE_CLASS_BLACKWELL, "blackwell",
                                                 1745.0 / 2250.0),
  /* GB200: the same chip at a higher power limit (datasheets: up to 1,200 W against
   * HGX B200's 1,000 W) and a higher dense peak (2.5 against 2.25 PFLOPS bf16). Its own
   * MAMF row: GB200 SXM bf16 1822.0 of 2500 TFLOP/s (the same table, best shape
   * 4096x9728x2048, torch 2.10.0.dev20250916+cu130), a short run like B200's. */
  [MP_DEVICE_CLASS_GB200] = BLACKWELL_CURVE (MP_DEVICE_CLASS_GB200, "gb200",
                                             1822.0 / 2500.0),
  [MP_DEVICE_CLASS_GPU] = {
    .klass = MP_DEVICE_CLASS_GPU,
    .name = "gpu",
    /* Unknown GPU: A100's layout and a GEMM anchor below every measured class (0.7), so
     * an unknown device is never predicted faster than the known ones. */
    .sms = 108,
    .tiles = gpu_tiles, .n_tiles = G_N_ELEMENTS (gpu_tiles),
    .k_overhead = K_OVERHEAD, .max_split_k = MAX_SPLIT_K,
    .gemm_anchor_eff = 0.70,
    .gemm_anchor = { 8192, 8192, 8192 },
    .fp32_simt_eff = 0.8,
    .attn_fwd_eff = 0.55, .attn_bwd_eff = 0.45, .attn_seq_half = 240,
    .mem_eff = 0.85, .mem_latency_s = MEM_LATENCY,
    .launch_s = LAUNCH,
    .link_eff = { [MP_TIER_NODE] = 0.75, [MP_TIER_DOMAIN] = 0.75, [MP_TIER_CLUSTER] = 0.85 },
    .nvls_algbw_eff = 0,
    .nccl = TRUE,
    .workspace_bytes = 4.0 * 1024 * 1024,
  },
  [MP_DEVICE_CLASS_CPU] = {
    .klass = MP_DEVICE_CLASS_CPU,
    .name = "cpu",
    .sms = 1,
    .tiles = cpu_tiles, .n_tiles = G_N_ELEMENTS (cpu_tiles),
    .k_overhead = 0, .max_split_k = 1,
    /* OpenBLAS SGEMM on one core, measured on the development machine for this issue
     * (x86-64 Xeon VM, OPENBLAS_NUM_THREADS=1): after the per-call cost below, 32^3 runs
     * at 77%, 64^3 at 89% and 128^3 at 98% of the 256^3 rate: about d / (d + 8) in the
     * smallest dimension d. */
    .small_dim_half = 8,
    /* The host cluster's `peak` is already OpenBLAS's achieved SGEMM rate (see
     * examples/clusters/host.yaml), so large GEMMs reach 1.0 of it. */
    .gemm_anchor_eff = 1.0,
    .gemm_anchor = { 1024, 1024, 1024 },
    .fp32_simt_eff = 1.0,
    /* Attention on a CPU is two GEMMs and a softmax: the GEMM rate. */
    .attn_fwd_eff = 1.0, .attn_bwd_eff = 1.0, .attn_seq_half = 12,
    /* host.yaml's bandwidth is already a per-core share of what DRAM delivers; a DRAM
     * round trip is ~0.1 us. */
    .mem_eff = 1.0, .mem_latency_s = 0.1e-6,
    /* The same measurement: a 16^3 SGEMM call takes 0.54 us where its arithmetic at
     * the large-GEMM rate would take 0.29 us: ~0.25 us per call. */
    .launch_s = 0.25e-6,
    /* The host executor runs the local experts' grouped GEMM as one sgemm per expert
     * (exec/model-moe.c, ffn_forward and ffn_backward): each call of few rows pays its own
     * small-shape rate (the calibrated grid's, or small_dim_half above) and call cost. */
    .gemm_group_calls = TRUE,
    /* host.yaml's shared-memory bandwidth already counts the copy in and out. */
    .link_eff = { [MP_TIER_NODE] = 1.0, [MP_TIER_DOMAIN] = 1.0, [MP_TIER_CLUSTER] = 0.9 },
    .nvls_algbw_eff = 0,
    .nccl = FALSE,                 /* MPI: no NCCL protocols or base latencies */
    /* The host executor calls its tp collectives as blocking MPI calls between its
     * kernels on the one compute thread (exec/model-shared.c): none runs under a GEMM. */
    .serial_tp_comm = TRUE,
    .workspace_bytes = 0,
  },
};

/* Dynamic power grows with the tensor cores' activity, so a kernel that keeps them at a
 * fraction u of the large GEMM's short-run activity asks for u of the clock cut the GEMM
 * takes: 1 - (1 - sustained_of_burst) u, linear as mp_cost_power_rate is in watts.
 * Kernels as busy as the GEMM or busier take the GEMM's whole cut. */
double
mp_cost_sustained_rate (const MpDeviceCurve *curve, double burst_eff)
{
  g_return_val_if_fail (curve != NULL, 1.0);
  if (!(curve->burst_gemm_eff > 0 && curve->sustained_of_burst > 0 && burst_eff > 0))
    return 1.0;
  double u = MIN (1.0, burst_eff / curve->burst_gemm_eff);
  return 1 - (1 - curve->sustained_of_burst) * u;
}

static const char *const class_names[MP_DEVICE_CLASS_N] = {
  "a100", "hopper", "blackwell", "gb200", "gpu", "cpu"
};

const char *
mp_device_class_name (MpDeviceClass klass)
{
  return (guint) klass < MP_DEVICE_CLASS_N ? class_names[klass] : "?";
}

const MpDeviceCurve *
mp_device_curve (MpDeviceClass klass)
{
  g_return_val_if_fail ((guint) klass < MP_DEVICE_CLASS_N, &curves[MP_DEVICE_CLASS_GPU]);
  return &curves[klass];
}

static gboolean
name_has (const char *lower, const char *const *needles)
{
  for (int i = 0; needles[i]; i++)
    if (strstr (lower, needles[i]))
      return TRUE;
  return FALSE;
}

/* Between the two limits the vendor rates the chip at, the rate is interpolated linearly
 * in watts: the datasheet gives no point between, and as power grows faster than the
 * clock (the voltage rises with it) the true curve lies above that line, so a limit in
 * between errs slow, not fast. Below the lower limit it falls in proportion to the watts,
 * as a clock at a fixed voltage does. */
double
mp_cost_power_rate (const MpDeviceCurve *curve, double limit_w)
{
  g_return_val_if_fail (curve != NULL, 1.0);
  double rated = curve->rated_power_w, low = curve->low_power_w;
  if (limit_w <= 0 || rated <= 0 || low <= 0 || limit_w >= rated)
    return 1.0;
  if (limit_w < low)
    return curve->low_power_rate * limit_w / low;
  return curve->low_power_rate + (1 - curve->low_power_rate) * (limit_w - low) / (rated - low);
}

MpDeviceClass
mp_device_class_of (const MpDevice *device)
{
  g_return_val_if_fail (device != NULL, MP_DEVICE_CLASS_GPU);
  static const char *const a100[] = { "a100", "a800", NULL };
  static const char *const hopper[] = { "h100", "h200", "h800", "gh200", NULL };
  static const char *const gb200[] = { "gb200", "gb300", NULL };
  static const char *const blackwell[] = { "b200", "b100", "b300", NULL };
  static const char *const cpu[] = { "cpu", "core", "host", "xeon", "epyc", NULL };
  g_autofree char *lower = g_ascii_strdown (device->name ? device->name : "", -1);
  if (name_has (lower, gb200))
    return MP_DEVICE_CLASS_GB200;
  if (name_has (lower, blackwell))
    return MP_DEVICE_CLASS_BLACKWELL;
  if (name_has (lower, hopper))
    return MP_DEVICE_CLASS_HOPPER;
  if (name_has (lower, a100))
    return MP_DEVICE_CLASS_A100;
  if (name_has (lower, cpu))
    return MP_DEVICE_CLASS_CPU;
  /* No 16-bit rate above fp32's: no tensor cores, so most likely a CPU. */
  double f32 = device->peak_flops[MP_DTYPE_FP32], b16 = device->peak_flops[MP_DTYPE_BF16];
  if (b16 <= f32 && f32 < 10e12)
    return MP_DEVICE_CLASS_CPU;
  return MP_DEVICE_CLASS_GPU;
}
