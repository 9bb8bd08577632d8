/* framework.c - what each training framework can express, and how each reduces gradients.
 *
 * One table of rules serves `plan --emit` (refuse what a framework cannot run, re-plan
 * within what it can) and `compare` (the best plan of each framework side by side). The
 * rules are about the plan's shape only; the cost model prices every plan the same way,
 * except for the gradient bucket (each framework's default, cited below) and Horovod's
 * cycle time (mp_strategy_adjust). Not here: file formats (export.c), tables (compare.c). */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "planner/planner.h"

#include <string.h>

static const struct {
  const char *id, *title;
} frameworks[MP_FRAMEWORK_N] = {
  [MP_FRAMEWORK_MEGATRON] = { "megatron", "Megatron-LM" },
  [MP_FRAMEWORK_DEEPSPEED] = { "deepspeed", "DeepSpeed" },
  [MP_FRAMEWORK_TORCHRUN] = { "torchrun", "PyTorch (torchrun)" },
  [MP_FRAMEWORK_TORCHTITAN] = { "torchtitan", "torchtitan" },
  [MP_FRAMEWORK_HOROVOD] = { "horovod", "Horovod" },
  [MP_FRAMEWORK_TENSORFLOW] = { "tensorflow", "TensorFlow" },
  [MP_FRAMEWORK_MXNET] = { "mxnet", "MXNet" },
};

const char *
mp_framework_id (MpFramework fw)
{
  return (guint) fw < MP_FRAMEWORK_N ? frameworks[fw].id : "?";
}

const char *
mp_framework_title (MpFramework fw)
{
  return (guint) fw < MP_FRAMEWORK_N ? frameworks[fw].title : "?";
}

gboolean
mp_framework_from_id (const char *id, MpFramework *out)
{
  for (guint i = 0; i < MP_FRAMEWORK_N; i++)
    if (g_ascii_strcasecmp (id, frameworks[i].id) == 0)
      {
        *out = (MpFramework) i;
        return TRUE;
      }
  return FALSE;
}

/* ---- the rules, one function per framework ------------------------------------------- */

/* Data parallel only (Horovod, TensorFlow): every rank holds the whole model. */
static const char *
data_parallel_only (const MpParallelConfig *c, const char *tp, const char *pp,
                    const char *cp_ep, const char *zero)
{
  if (c->tp > 1)
    return tp;
  if (c->pp > 1)
    return pp;
  if (c->cp > 1 || c->ep > 1)
    return cp_ep;
  if (c->zero > 0)
    return zero;
  return NULL;
}

static const char *
rejects_megatron (const MpParallelConfig *c)
{
  /* --use-distributed-optimizer shards the optimizer state (ZeRO-1); Megatron's
   * gradients and weights stay whole per dp rank in the 3D setup compared here. */
  if (c->zero > 1)
    return "Megatron-LM's distributed optimizer shards only the optimizer state (ZeRO-1)";
  /* HSDP (fsdp17) of ZeRO-1: --num-distributed-optimizer-instances copies of the
   * distributed optimizer, each over a part of the data-parallel ranks; no FSDP2-style
   * reshard option, as no weights are sharded. */
  /* megatron/core/pipeline_parallel/schedules.py: 1F1B, interleaved 1F1B; no GPipe. */
  if (c->pp > 1 && c->schedule == MP_SCHEDULE_GPIPE)
    return "Megatron-LM has no GPipe schedule (1F1B and interleaved 1F1B only)";
  /* --recompute-modules takes Megatron's submodules (core_attn, moe_act, layernorm,
   * mla_up_proj, mlp, moe, shared_experts), not torchtitan's per-op policy. */
  if (c->recompute == MP_RECOMPUTE_SELECTIVE
      && (mp_recompute_modules_of (c) & MP_RECOMPUTE_OP))
    return "Megatron-LM's --recompute-modules has no op-level selective recompute "
           "(torchtitan's)";
  return NULL;
}

static const char *
rejects_deepspeed (const MpParallelConfig *c)
{
  if (c->tp > 1)
    return "the DeepSpeed engine has no Megatron-style tensor parallelism (use Megatron-LM)";
  if (c->cp > 1)
    return "DeepSpeed has no ring context parallelism (Ulysses splits heads, not modelled)";
  /* deepspeed/runtime/pipe/engine.py asserts ZeRO stage < 2 with pipeline parallelism. */
  if (c->pp > 1 && c->zero > 1)
    return "DeepSpeed's pipeline engine refuses ZeRO-2 and ZeRO-3";
  /* HSDP (fsdp17): MiCS (mics_shard_size, deepspeed/runtime/zero/mics.py) shards ZeRO-3
   * within groups and replicates over them; ZeRO++ hpZ (zero_hpz_partition_size) keeps
   * only a secondary weight copy per group, its gradients and optimizer over every rank. */
  if (mp_parallel_config_zero_replicas (c) > 1 && c->zero != 3)
    return "DeepSpeed shards in groups (MiCS) under ZeRO-3 only";
  if (c->no_reshard)
    return "DeepSpeed ZeRO-3 gathers the weights again for backward (no "
           "reshard_after_forward=False)";
  /* deepspeed/runtime/pipe/schedule.py TrainSchedule is 1F1B without interleaving; its
   * engine pipelines every micro-batch it is given, so a placement without pipelining is
   * the same only with one micro-batch. */
  if (c->pp > 1 && c->schedule != MP_SCHEDULE_1F1B
      && !(c->schedule == MP_SCHEDULE_NONE && c->num_micro_batches == 1))
    return "DeepSpeed pipelines run one 1F1B schedule (no GPipe, no interleaving, every "
           "micro-batch pipelined)";
  /* deepspeed/moe/sharded_moe.py MOELayer: experts reached by all-to-all (_AllToAll). */
  if (c->ep > 1 && c->dispatcher != MP_DISPATCH_ALLTOALL)
    return "DeepSpeed-MoE dispatches tokens to experts by all-to-all only";
  return NULL;
}

static const char *
rejects_torchrun (const MpParallelConfig *c)
{
  /* Core PyTorch has DDP (+ ZeroRedundancyOptimizer: ZeRO-1), FSDP2 (ZeRO-2 with
   * reshard_after_forward=False, ZeRO-3), DeviceMesh TP, context_parallel and
   * torch.distributed.pipelining (GPipe, 1F1B, Interleaved1F1B), but no expert
   * parallelism (that is torchtitan's). FSDP over pipeline stages is torchtitan's too. */
  if (c->ep > 1)
    return "plain PyTorch has no expert parallelism (torchtitan has)";
  /* HSDP (fsdp17): FSDP2's fully_shard over a 2-D (replicate, shard) mesh; ZeRO-1 over a
   * part of the ranks and HSDP beside context parallelism are not in the export. */
  if (mp_parallel_config_zero_replicas (c) > 1 && (c->zero < 2 || c->cp > 1))
    return c->zero < 2 ? "plain PyTorch shards in groups (HSDP) with FSDP2, ZeRO-2/3 only"
                       : "the torchrun export writes HSDP without context parallelism only";
  return NULL;
}

static const char *
rejects_torchtitan (const MpParallelConfig *c)
{
  /* Data parallelism is dp_replicate (DDP) x dp_shard (FSDP2): no ZeRO-1. */
  if (c->zero == 1)
    return "torchtitan shards with FSDP2 (ZeRO-2/3) or replicates; it has no ZeRO-1";
  /* HSDP (fsdp17): dp_replicate x dp_shard, FSDP2 sharding over dp_shard x cp. */
  if (mp_parallel_config_zero_shard (c) % c->cp != 0)
    return "torchtitan's FSDP shards over dp_shard x cp, which zero_shard must be a "
           "multiple of";
  /* torchtitan/distributed/activation_checkpoint.py SelectiveAC is a per-op policy (the
   * plan's recompute_modules=op); it names no submodule to recompute. */
  if (c->recompute == MP_RECOMPUTE_SELECTIVE && mp_recompute_modules_of (c) != MP_RECOMPUTE_OP)
    return "torchtitan's selective activation checkpointing is op-level (recompute_modules="
           "op), not a list of submodules";
  /* FullAC checkpoints every block on its own (recompute_num_layers 0, or uniform 1). */
  if (c->recompute == MP_RECOMPUTE_FULL && c->recompute_num_layers > 0
      && !(c->recompute_method == MP_RECOMPUTE_METHOD_UNIFORM && c->recompute_num_layers == 1))
    return "torchtitan's full activation checkpointing recomputes every block, one at a "
           "time (no recompute_num_layers)";
  /* config/configs.py expert_parallel_degree: the experts' region is efsdp x ep over the
   * dense dp_shard x cp x tp ranks, so experts are not tensor-split, and EP borrows only
   * from the sharded ranks (dp_replicate is outside it). */
  if (c->ep > 1 && mp_parallel_config_etp (c) != 1)
    return "torchtitan does not tensor-split experts (expert tensor parallelism 1 only)";
  if (c->ep > 1 && ((c->zero >= 2 ? c->dp : 1) * c->cp * c->tp) % c->ep != 0)
    return "torchtitan's expert parallelism borrows from dp_shard x cp x tp only, which ep "
           "must divide";
  if (c->ep > 1 && c->dispatcher != MP_DISPATCH_ALLTOALL)
    return "torchtitan dispatches tokens to experts by all-to-all only";
  return NULL;
}

static const char *
rejects_mxnet (const MpParallelConfig *c)
{
  if (c->tp > 1)
    return "MXNet has no tensor parallelism";
  if (c->cp > 1 || c->ep > 1 || c->zero > 0)
    return "MXNet's kvstore replicates the model (no sharding, context or expert "
           "parallelism)";
  if (c->fp8)
    return "MXNet 1.9 has no FP8 training";
  /* group2ctxs places layers on devices; nothing pipelines micro-batches through them. */
  if (c->pp > 1 && c->num_micro_batches > 1)
    return "MXNet layer placement runs one batch at a time (no pipelined micro-batches)";
  return NULL;
}

const char *
mp_framework_rejects (MpFramework fw, const MpParallelConfig *cfg)
{
  switch (fw)
    {
    case MP_FRAMEWORK_MEGATRON:
      return rejects_megatron (cfg);
    case MP_FRAMEWORK_DEEPSPEED:
      return rejects_deepspeed (cfg);
    case MP_FRAMEWORK_TORCHRUN:
      return rejects_torchrun (cfg);
    case MP_FRAMEWORK_TORCHTITAN:
      return rejects_torchtitan (cfg);
    case MP_FRAMEWORK_HOROVOD:
      return data_parallel_only (cfg, "Horovod has no tensor parallelism",
                                 "Horovod has no pipeline parallelism",
                                 "Horovod has no context or expert parallelism",
                                 "Horovod replicates optimizer state (no ZeRO)");
    case MP_FRAMEWORK_TENSORFLOW:
      return data_parallel_only (cfg, "MirroredStrategy has no tensor parallelism",
                                 "MirroredStrategy has no pipeline parallelism",
                                 "MirroredStrategy has no context or expert parallelism",
                                 "MirroredStrategy replicates optimizer state (no ZeRO)");
    case MP_FRAMEWORK_MXNET:
      return rejects_mxnet (cfg);
    case MP_FRAMEWORK_N:
    default:
      break;
    }
  return "unknown framework";
}

/* What pretrain_gpt.py's GPTModel cannot be told by Megatron-LM core_v0.15.3's arguments
 * (megatron/training/arguments.py): its gated activations are --swiglu (silu) and
 * --quick-geglu (x sigmoid(1.702 x)), no GeGLU; no soft-capping, Gemma's post-norms or
 * scaled embeddings; biases on every linear (add_bias_linear), none, or q/k/v only
 * (--add-qkv-bias). */
static const char *
megatron_rejects_model (const MpModel *m)
{
  if (m->activation == MP_ACT_GEGLU)
    return "Megatron-LM's arguments have no GeGLU activation (--swiglu and --quick-geglu "
           "only)";
  if (m->attn_softcap > 0 || m->logit_softcap > 0)
    return "Megatron-LM's arguments have no attention or logit soft-capping";
  if (m->post_norms)
    return "Megatron-LM's arguments have no norms after attention and the MLP (Gemma's "
           "post-norms)";
  if (m->embed_scale)
    return "Megatron-LM's arguments have no scaled embeddings (Gemma's sqrt(hidden))";
  MpAttnBias b = m->attn_bias == MP_ATTN_BIAS_AS_MODEL
                   ? (m->bias ? MP_ATTN_BIAS_ALL : MP_ATTN_BIAS_NONE) : m->attn_bias;
  if (m->bias ? b != MP_ATTN_BIAS_ALL : b == MP_ATTN_BIAS_ALL)
    return "Megatron-LM biases every linear layer, none, or q/k/v only (--add-qkv-bias), "
           "not the attention and the MLP apart";
  return NULL;
}

const char *
mp_framework_rejects_model (MpFramework fw, const MpModel *model)
{
  /* Megatron-LM's pretrain_gpt.py builds its own GPTModel from the model arguments, and
   * torchtitan trains the decoder models of its registry (--module/--config): neither
   * runs a user's network, so an mlp is no model either can train. */
  if (model->arch == MP_ARCH_TRANSFORMER)
    return fw == MP_FRAMEWORK_MEGATRON ? megatron_rejects_model (model) : NULL;
  if (fw == MP_FRAMEWORK_MEGATRON)
    return "Megatron-LM trains its own transformer models (pretrain_gpt.py), not an mlp";
  if (fw == MP_FRAMEWORK_TORCHTITAN)
    return "torchtitan trains the transformer models of its registry, not an mlp";
  return NULL;
}

/* ---- who runs a plan ------------------------------------------------------------------ */

guint
mp_framework_runners (const MpModel *model, const MpParallelConfig *cfg)
{
  guint mask = 0;
  for (guint fw = 0; fw < MP_FRAMEWORK_N; fw++)
    if (mp_framework_rejects ((MpFramework) fw, cfg) == NULL
        && (model == NULL || mp_framework_rejects_model ((MpFramework) fw, model) == NULL))
      mask |= 1u << fw;
  return mask;
}

char *
mp_framework_runners_text (guint mask, const MpParallelConfig *cfg)
{
  if (mask == 0)
    return NULL;
  GString *s = g_string_new (NULL);
  for (guint fw = 0; fw < MP_FRAMEWORK_N; fw++)
    {
      if (!(mask & (1u << fw)))
        continue;
      /* Plain PyTorch and MXNet by the wrapper that runs this plan. */
      const char *title = mp_framework_title ((MpFramework) fw);
      if (fw == MP_FRAMEWORK_TORCHRUN && mp_strategy_rejects (MP_STRATEGY_DDP, cfg) == NULL)
        title = mp_strategy_title (MP_STRATEGY_DDP);
      else if (fw == MP_FRAMEWORK_TORCHRUN
               && mp_strategy_rejects (MP_STRATEGY_FSDP, cfg) == NULL)
        title = mp_strategy_title (MP_STRATEGY_FSDP);
      else if (fw == MP_FRAMEWORK_MXNET)
        title = cfg->pp > 1 ? mp_strategy_title (MP_STRATEGY_MXNET) : "MXNet kvstore";
      g_string_append_printf (s, "%s%s", s->len ? ", " : "", title);
    }
  return g_string_free (s, FALSE);
}

/* ---- strategies ------------------------------------------------------------------------ */

static const struct {
  const char *id, *title;
  MpFramework fw;
} strategies[MP_STRATEGY_N] = {
  [MP_STRATEGY_DDP] = { "ddp", "PyTorch DDP", MP_FRAMEWORK_TORCHRUN },
  [MP_STRATEGY_FSDP] = { "fsdp", "PyTorch FSDP (ZeRO-3)", MP_FRAMEWORK_TORCHRUN },
  [MP_STRATEGY_TF_MIRRORED] = { "tf-mirrored", "TensorFlow MirroredStrategy",
                                MP_FRAMEWORK_TENSORFLOW },
  [MP_STRATEGY_HOROVOD] = { "horovod", "Horovod", MP_FRAMEWORK_HOROVOD },
  [MP_STRATEGY_MXNET] = { "mxnet-placement", "MXNet layer placement", MP_FRAMEWORK_MXNET },
  [MP_STRATEGY_MEGATRON] = { "megatron-3d", "Megatron-LM 3D", MP_FRAMEWORK_MEGATRON },
  [MP_STRATEGY_DEEPSPEED] = { "deepspeed", "DeepSpeed ZeRO + pipeline",
                              MP_FRAMEWORK_DEEPSPEED },
};

const char *
mp_strategy_title (MpStrategy st)
{
  return (guint) st < MP_STRATEGY_N ? strategies[st].title : "mpplan (any plan)";
}

const char *
mp_strategy_id (MpStrategy st)
{
  return (guint) st < MP_STRATEGY_N ? strategies[st].id : "any";
}

MpFramework
mp_strategy_framework (MpStrategy st)
{
  g_return_val_if_fail ((guint) st < MP_STRATEGY_N, MP_FRAMEWORK_TORCHRUN);
  return strategies[st].fw;
}

/* FW's main strategy (DDP for torchrun), MP_STRATEGY_N for torchtitan, which has none
 * of its own in the comparison. */
static MpStrategy
framework_strategy (MpFramework fw)
{
  for (guint i = 0; i < MP_STRATEGY_N; i++)
    if (strategies[i].fw == fw && i != MP_STRATEGY_FSDP)
      return (MpStrategy) i;
  /* torchtitan: FSDP2 is its data parallelism; its rules alone bound the search. */
  return MP_STRATEGY_N;
}

/* The DDP and FSDP wrappers of plain PyTorch: whole model per rank, no model split. */
static const char *
rejects_wrapper (const MpParallelConfig *c, gboolean sharded)
{
  if (c->tp > 1 || c->pp > 1 || c->cp > 1)
    return sharded ? "FSDP alone splits no layer (no tensor, pipeline or context "
                     "parallelism)"
                   : "DDP replicates the whole model (no tensor, pipeline or context "
                     "parallelism)";
  if (!sharded && c->zero > 0)
    return "DDP replicates optimizer state (ZeRO-1 needs ZeroRedundancyOptimizer)";
  /* One rank has nothing to shard with; FSDP then runs unsharded. */
  if (sharded && c->zero != 3 && c->dp > 1)
    return "FSDP with full sharding is ZeRO-3";
  return NULL;
}

const char *
mp_strategy_rejects (MpStrategy st, const MpParallelConfig *cfg)
{
  g_return_val_if_fail ((guint) st < MP_STRATEGY_N, "unknown strategy");
  const char *why = mp_framework_rejects (strategies[st].fw, cfg);
  if (why != NULL)
    return why;
  if (st == MP_STRATEGY_DDP || st == MP_STRATEGY_FSDP)
    return rejects_wrapper (cfg, st == MP_STRATEGY_FSDP);
  return NULL;
}

/* Every gradient of MODEL at its gradient size: a bucket is never bigger. */
static double
gradient_bytes (const MpModel *model)
{
  double g;
  mp_model_state_bytes_per_param (model, NULL, &g, NULL);
  return model->params_total * g;
}

/* The largest single parameter tensor's gradient (one op's weights). */
static double
largest_tensor_bytes (const MpModel *model)
{
  double g, most = 0;
  mp_model_state_bytes_per_param (model, NULL, &g, NULL);
  for (guint i = 0; i < model->n_layers; i++)
    for (guint j = 0; j < model->layers[i].n_ops; j++)
      most = MAX (most, model->layers[i].ops[j].params * g);
  return most;
}

double
mp_strategy_bucket_bytes (MpStrategy st, const MpModel *model)
{
  double all = gradient_bytes (model), g, bucket = 0;
  mp_model_state_bytes_per_param (model, NULL, &g, NULL);
  switch (st)
    {
    case MP_STRATEGY_TF_MIRRORED:
      /* MirroredStrategy (and MultiWorkerMirroredStrategy) reduce the gradients in
       * apply_gradients, after backward, packed into one all-reduce (NcclAllReduce
       * num_packs=1, tf.distribute docs): nothing overlaps backward. One bucket of every
       * gradient says exactly that to the cost model. */
      return all;
    case MP_STRATEGY_HOROVOD:
      /* HOROVOD_FUSION_THRESHOLD / --fusion-threshold-mb: 128 MB by default since Horovod
       * 0.21 (commit 3ffe479e, Nov 2020, "fusion threshold from 64MB to 128MB";
       * docs/tensor-fusion.rst at v0.28.1: "Default fusion buffer size is 128 MB"). */
      bucket = 128.0 * 1024 * 1024;
      break;
    case MP_STRATEGY_MXNET:
      /* The kvstore pushes each parameter's gradient on its own as backward produces it
       * (Module.update, priority = -index): no fusion, one tensor per "bucket". */
      bucket = largest_tensor_bytes (model);
      break;
    case MP_STRATEGY_MEGATRON:
      /* DistributedDataParallelConfig.bucket_size: max(40M, 1M x dp) parameters when
       * unset (megatron/core/distributed/distributed_data_parallel_config.py); the
       * 40M floor holds up to dp 40. */
      bucket = 4e7 * g;
      break;
    case MP_STRATEGY_DEEPSPEED:
      /* zero_optimization.reduce_bucket_size: 5e8 elements by default (DeepSpeed config
       * docs). */
      bucket = 5e8 * g;
      break;
    case MP_STRATEGY_DDP:
    case MP_STRATEGY_FSDP:
    case MP_STRATEGY_N:
    default:
      /* DDP bucket_cap_mb = 25 (the cost model's default). FSDP2 reduce-scatters once per
       * fully_shard unit (a block), which the default bucket approximates. */
      return 0;
    }
  return MIN (bucket, all);
}

void
mp_strategy_adjust (MpStrategy st, MpPlan *plan)
{
  /* Horovod's background thread starts fused all-reduces once per cycle,
   * HOROVOD_CYCLE_TIME / --cycle-time-ms = 1 ms by default since 0.21 (commit 3ffe479e,
   * docs/tensor-fusion.rst): the
   * last gradients wait half a cycle on average after backward ends. */
  if (st != MP_STRATEGY_HOROVOD || plan->cfg.dp * plan->cfg.cp <= 1)
    return;
  double extra = 0.5e-3, scale = plan->step_s / (plan->step_s + extra);
  plan->time.t[MP_PHASE_DP] += extra;
  plan->step_s += extra;
  plan->tokens_per_s *= scale;
  plan->tflops_per_gpu *= scale;
  plan->hw_tflops_per_gpu *= scale;
  plan->mfu *= scale;
  plan->mfu_fp8 *= scale;
  plan->hfu *= scale;
}

/* ---- searching within a strategy ---------------------------------------------------- */

/* A search's constraint: a strategy (data < MP_STRATEGY_N) or a framework
 * (MP_STRATEGY_N + framework). */
static gboolean
accept_rules (const MpParallelConfig *cfg, gpointer data)
{
  guint which = GPOINTER_TO_UINT (data);
  if (which < MP_STRATEGY_N)
    return mp_strategy_rejects ((MpStrategy) which, cfg) == NULL;
  return mp_framework_rejects ((MpFramework) (which - MP_STRATEGY_N), cfg) == NULL;
}

/* The training stack whose kernels FW's plans run (acc16): PyTorch's own for torchrun;
 * the default (Megatron-Core + TE traits) for those with no known attention kernel. */
static MpStack
framework_stack (MpFramework fw)
{
  switch (fw)
    {
    case MP_FRAMEWORK_DEEPSPEED: return MP_STACK_DEEPSPEED;
    case MP_FRAMEWORK_TORCHRUN: return MP_STACK_PYTORCH;
    case MP_FRAMEWORK_TORCHTITAN: return MP_STACK_TORCHTITAN;
    case MP_FRAMEWORK_MEGATRON:
    case MP_FRAMEWORK_HOROVOD:
    case MP_FRAMEWORK_TENSORFLOW:
    case MP_FRAMEWORK_MXNET:
    case MP_FRAMEWORK_N:
    default: return MP_STACK_MEGATRON;
    }
}

/* The search under rule set WHICH, with strategy ST's bucket and adjustment (ST may be
 * MP_STRATEGY_N: the cost model's defaults) and its framework's stack. */
static MpSearchResult *
search_rules (const MpCostContext *ctx, guint which, MpStrategy st,
              const MpSearchOptions *opts, GError **error)
{
  MpSearchOptions o = *opts;
  o.accept = accept_rules;
  o.accept_data = GUINT_TO_POINTER (which);
  o.bucket_bytes = mp_strategy_bucket_bytes (st, mp_cost_context_model (ctx));
  o.stack = framework_stack (which < MP_STRATEGY_N ? mp_strategy_framework ((MpStrategy) which)
                                                   : (MpFramework) (which - MP_STRATEGY_N));
  o.shard = o.n_shards = 0;
  MpSearchResult *res = mp_planner_search (ctx, &o, error);
  if (res == NULL)
    return NULL;
  for (guint i = 0; i < res->plans->len; i++)
    mp_strategy_adjust (st, g_ptr_array_index (res->plans, i));
  for (guint f = 0; f < MP_FAMILY_N; f++)
    if (res->stats.family_best[f] != NULL)
      mp_strategy_adjust (st, res->stats.family_best[f]);
  return res;
}

MpSearchResult *
mp_strategy_search (const MpCostContext *ctx, MpStrategy st, const MpSearchOptions *opts,
                    GError **error)
{
  g_return_val_if_fail ((guint) st < MP_STRATEGY_N, NULL);
  return search_rules (ctx, st, st, opts, error);
}

MpSearchResult *
mp_framework_search (const MpCostContext *ctx, MpFramework fw, const MpSearchOptions *opts,
                     GError **error)
{
  g_return_val_if_fail ((guint) fw < MP_FRAMEWORK_N, NULL);
  return search_rules (ctx, MP_STRATEGY_N + fw, framework_strategy (fw), opts, error);
}
