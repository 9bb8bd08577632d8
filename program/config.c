/* config.c - the parallel config: defaults, names, checks against a model and a cluster,
 * the rank numbering, and the one order (and equality) on configs. */
#define G_LOG_DOMAIN "mpplan-program"
#include "config.h"
#include "program/program.h"
#include "common/error.h"

#include <string.h>

static const char *const recompute_names[] = { "none", "selective", "full", NULL };
static const char *const schedule_names[] = { "1f1b", "gpipe", "interleaved", "none", NULL };
static const char *const dispatcher_names[] = { "alltoall", "allgather", NULL };
static const char *const cp_comm_names[] = { "stack", "p2p", "allgather", NULL };
static const MpParallelDim default_order[MP_DIM_N] = { MP_DIM_TP, MP_DIM_CP, MP_DIM_DP,
                                                       MP_DIM_PP };

const char *
mp_recompute_name (MpRecompute r)
{
  return (guint) r < G_N_ELEMENTS (recompute_names) - 1 ? recompute_names[r] : "?";
}

const char *
mp_schedule_name (MpSchedule s)
{
  return (guint) s < G_N_ELEMENTS (schedule_names) - 1 ? schedule_names[s] : "?";
}

static gboolean
index_of (const char *const *names, const char *name, int *out)
{
  for (int i = 0; name && names[i]; i++)
    if (g_ascii_strcasecmp (names[i], name) == 0)
      {
        *out = i;
        return TRUE;
      }
  return FALSE;
}

gboolean
mp_recompute_from_name (const char *name, MpRecompute *out)
{
  int i;
  if (!index_of (recompute_names, name, &i))
    return FALSE;
  *out = (MpRecompute) i;
  return TRUE;
}

static const char *const stack_names[] = { "megatron", "nemo-automodel", "torchtitan",
                                           "llm-foundry", "deepspeed", "pytorch", NULL };
G_STATIC_ASSERT (G_N_ELEMENTS (stack_names) == MP_STACK_N + 1);

const char *
mp_stack_name (MpStack stack)
{
  return (guint) stack < MP_STACK_N ? stack_names[stack] : "?";
}

gboolean
mp_stack_from_name (const char *name, MpStack *out)
{
  int i;
  if (!index_of (stack_names, name, &i))
    return FALSE;
  *out = (MpStack) i;
  return TRUE;
}

gboolean
mp_stack_fa2_attention (MpStack stack)
{
  return stack == MP_STACK_TORCHTITAN || stack == MP_STACK_LLM_FOUNDRY
         || stack == MP_STACK_DEEPSPEED || stack == MP_STACK_PYTORCH;
}

gboolean
mp_stack_overlaps_tp_backward (MpStack stack)
{
  return stack == MP_STACK_MEGATRON || stack == MP_STACK_NEMO_AUTOMODEL;
}

gboolean
mp_stack_fused_loss (MpStack stack)
{
  return stack == MP_STACK_LLM_FOUNDRY || stack == MP_STACK_NEMO_AUTOMODEL
         || stack == MP_STACK_MEGATRON;
}

MpStateLayout
mp_stack_state_layout (MpStack stack)
{
  switch (stack)
    {
    case MP_STACK_TORCHTITAN:
    case MP_STACK_LLM_FOUNDRY:
    case MP_STACK_PYTORCH:
      return MP_STATE_FP32;
    case MP_STACK_NEMO_AUTOMODEL:
      return MP_STATE_16BIT;
    case MP_STACK_MEGATRON:
    case MP_STACK_DEEPSPEED:
    default:
      return MP_STATE_MASTER;
    }
}

gboolean
mp_stack_fp8_saves_fp8 (MpStack stack)
{
  return stack == MP_STACK_MEGATRON || stack == MP_STACK_NEMO_AUTOMODEL
         || stack == MP_STACK_LLM_FOUNDRY;
}

gboolean
mp_stack_gates_in_experts (MpStack stack)
{
  return stack == MP_STACK_MEGATRON;
}

gboolean
mp_stack_zero1_in_place (MpStack stack)
{
  return stack == MP_STACK_MEGATRON;
}

gboolean
mp_stack_fp8_saves_experts (MpStack stack)
{
  return stack == MP_STACK_MEGATRON;
}

gboolean
mp_stack_triton_attention (MpStack stack)
{
  return stack == MP_STACK_LLM_FOUNDRY;
}

gboolean
mp_stack_unfused_optimizer (MpStack stack)
{
  return stack == MP_STACK_LLM_FOUNDRY || stack == MP_STACK_TORCHTITAN;
}

gboolean
mp_stack_forwarded_dispatch (MpStack stack)
{
  return stack == MP_STACK_NEMO_AUTOMODEL;
}

gboolean
mp_stack_repeats_kv (MpStack stack)
{
  return stack == MP_STACK_TORCHTITAN || stack == MP_STACK_PYTORCH;
}

gboolean
mp_stack_cp_allgather (MpStack stack)
{
  return stack == MP_STACK_TORCHTITAN || stack == MP_STACK_PYTORCH;
}

gboolean
mp_parallel_config_fsdp_root (const MpParallelConfig *cfg, const MpLayer *layer)
{
  g_return_val_if_fail (cfg != NULL && layer != NULL, FALSE);
  return cfg->zero >= 3 && cfg->stack == MP_STACK_TORCHTITAN
         && (layer->kind == MP_LAYER_EMBEDDING || layer->kind == MP_LAYER_HEAD);
}

gboolean
mp_stack_fsdp2 (MpStack stack)
{
  return stack == MP_STACK_TORCHTITAN || stack == MP_STACK_NEMO_AUTOMODEL
         || stack == MP_STACK_PYTORCH;
}

gboolean
mp_stack_fsdp1 (MpStack stack)
{
  return stack == MP_STACK_LLM_FOUNDRY;
}

gboolean
mp_stack_fp32_reduce (MpStack stack)
{
  return stack == MP_STACK_TORCHTITAN || stack == MP_STACK_LLM_FOUNDRY;
}

gboolean
mp_stack_torch_pipelining (MpStack stack)
{
  return stack == MP_STACK_TORCHTITAN || stack == MP_STACK_PYTORCH;
}

gboolean
mp_stack_torchao_fp8 (MpStack stack)
{
  return stack == MP_STACK_TORCHTITAN || stack == MP_STACK_PYTORCH;
}

gboolean
mp_parallel_config_eager_ops (const MpParallelConfig *cfg)
{
  g_return_val_if_fail (cfg != NULL, FALSE);
  return !cfg->compile && (cfg->stack == MP_STACK_TORCHTITAN || cfg->stack == MP_STACK_PYTORCH);
}

gboolean
mp_stack_per_expert_gemm_calls (MpStack stack)
{
  return stack == MP_STACK_MEGATRON;
}

static const char *const method_names[] = { "block", "uniform", NULL };
/* The MpRecomputeModule bits' names: Megatron's --recompute-modules, torchtitan's
 * op-level policy (op), then Megatron's mla_up_proj. */
static const char *const module_names[] = { "core_attn", "layernorm", "mlp", "moe_act", "moe",
                                            "shared_experts", "op", "mla_up_proj", NULL };

const char *
mp_recompute_method_name (MpRecomputeMethod m)
{
  return (guint) m < G_N_ELEMENTS (method_names) - 1 ? method_names[m] : "?";
}

gboolean
mp_recompute_method_from_name (const char *name, MpRecomputeMethod *out)
{
  int i;
  if (!index_of (method_names, name, &i))
    return FALSE;
  *out = (MpRecomputeMethod) i;
  return TRUE;
}

char *
mp_recompute_modules_name (guint modules)
{
  GString *out = g_string_new (NULL);
  if (modules == 0)
    modules = MP_RECOMPUTE_CORE_ATTN;
  for (int i = 0; module_names[i]; i++)
    if (modules & (1u << i))
      g_string_append_printf (out, "%s%s", out->len ? "+" : "", module_names[i]);
  return g_string_free (out, FALSE);
}

gboolean
mp_recompute_modules_from_name (const char *names, guint *out)
{
  g_return_val_if_fail (names != NULL && out != NULL, FALSE);
  g_auto (GStrv) parts = g_strsplit_set (names, "+:", -1);
  guint set = 0;
  for (int p = 0; parts[p]; p++)
    {
      int i;
      if (!index_of (module_names, g_strstrip (parts[p]), &i))
        return FALSE;
      set |= 1u << i;
    }
  if (set == 0)
    return FALSE;
  *out = set;
  return TRUE;
}

/* ---- MoE (moe14) ---- */

const char *
mp_dispatcher_name (MpDispatcher d)
{
  return (guint) d < G_N_ELEMENTS (dispatcher_names) - 1 ? dispatcher_names[d] : "?";
}

gboolean
mp_dispatcher_from_name (const char *name, MpDispatcher *out)
{
  int i;
  if (!index_of (dispatcher_names, name, &i))
    return FALSE;
  *out = (MpDispatcher) i;
  return TRUE;
}

const char *
mp_cp_comm_name (MpCpComm c)
{
  return (guint) c < G_N_ELEMENTS (cp_comm_names) - 1 ? cp_comm_names[c] : "?";
}

gboolean
mp_cp_comm_from_name (const char *name, MpCpComm *out)
{
  int i;
  if (!index_of (cp_comm_names, name, &i))
    return FALSE;
  *out = (MpCpComm) i;
  return TRUE;
}

gboolean
mp_parallel_config_cp_allgather (const MpParallelConfig *cfg)
{
  g_return_val_if_fail (cfg != NULL, FALSE);
  if (cfg->cp < 2)
    return FALSE;
  if (cfg->cp_comm == MP_CP_COMM_STACK)
    return mp_stack_cp_allgather (cfg->stack);
  return cfg->cp_comm == MP_CP_COMM_ALLGATHER;
}

guint
mp_recompute_modules_of (const MpParallelConfig *cfg)
{
  g_return_val_if_fail (cfg != NULL, 0);
  return cfg->recompute_modules ? cfg->recompute_modules : MP_RECOMPUTE_CORE_ATTN;
}

guint
mp_parallel_config_etp (const MpParallelConfig *cfg)
{
  return cfg->etp > 0 ? cfg->etp : MAX (cfg->tp, 1u);
}

guint
mp_parallel_config_edp (const MpParallelConfig *cfg)
{
  guint grid = mp_parallel_config_etp (cfg) * MAX (cfg->ep, 1u);
  return MAX ((cfg->tp * cfg->cp * cfg->dp) / MAX (grid, 1u), 1u);
}

guint
mp_parallel_config_zero_shard (const MpParallelConfig *cfg)
{
  guint dpcp = MAX (cfg->dp * cfg->cp, 1u);
  guint s = cfg->zero >= 1 && cfg->zero_shard > 0 ? cfg->zero_shard : dpcp;
  return dpcp % s == 0 ? s : dpcp;
}

guint
mp_parallel_config_zero_replicas (const MpParallelConfig *cfg)
{
  return MAX (cfg->dp * cfg->cp, 1u) / mp_parallel_config_zero_shard (cfg);
}

gboolean
mp_schedule_from_name (const char *name, MpSchedule *out)
{
  int i;
  /* Accept the planner's spelling of the interleaved schedule too. */
  if (name && g_ascii_strcasecmp (name, "interleaved-1f1b") == 0)
    name = "interleaved";
  if (!index_of (schedule_names, name, &i))
    return FALSE;
  *out = (MpSchedule) i;
  return TRUE;
}

void
mp_parallel_config_init (MpParallelConfig *cfg)
{
  g_return_if_fail (cfg != NULL);
  memset (cfg, 0, sizeof *cfg);
  cfg->dp = cfg->tp = cfg->pp = cfg->cp = cfg->vpp = cfg->ep = 1;
  cfg->micro_batch_size = cfg->num_micro_batches = 1;
  cfg->schedule = MP_SCHEDULE_1F1B;
  cfg->recompute = MP_RECOMPUTE_NONE;
  cfg->flash_attention = TRUE;
  memcpy (cfg->order, default_order, sizeof default_order);
}

/* CFG's order if it is a permutation of the four dimensions, else the default. */
static const MpParallelDim *
config_order (const MpParallelConfig *cfg)
{
  guint seen = 0;
  for (int i = 0; i < MP_DIM_N; i++)
    {
      if ((guint) cfg->order[i] >= MP_DIM_N)
        return default_order;
      seen |= 1u << cfg->order[i];
    }
  return seen == (1u << MP_DIM_N) - 1 ? cfg->order : default_order;
}

guint
mp_parallel_config_vpp (const MpParallelConfig *cfg)
{
  return cfg->schedule == MP_SCHEDULE_INTERLEAVED && cfg->vpp > 1 ? cfg->vpp : 1;
}

guint
mp_parallel_config_chunks (const MpParallelConfig *cfg)
{
  return cfg->pp * mp_parallel_config_vpp (cfg);
}

#define CHECK(cond, ...)                                                                    \
  G_STMT_START                                                                              \
  {                                                                                         \
    if (!(cond))                                                                            \
      {                                                                                     \
        g_set_error (error, MP_ERROR, MP_ERROR_INPUT, __VA_ARGS__);                         \
        return FALSE;                                                                       \
      }                                                                                     \
  }                                                                                         \
  G_STMT_END

static gboolean
check_chunks (const MpParallelConfig *cfg, const MpModel *model, GError **error)
{
  guint chunks = mp_parallel_config_chunks (cfg);
  if (cfg->chunk_layers == NULL)
    {
      guint spread = model->arch == MP_ARCH_TRANSFORMER ? (guint) model->n_blocks
                                                          : model->n_layers;
      CHECK (spread >= chunks, "pp * vpp = %u model chunks but only %u layers to spread",
             chunks, spread);
      return TRUE;
    }
  guint64 total = 0;
  for (guint c = 0; c < chunks; c++)
    {
      CHECK (cfg->chunk_layers[c] > 0, "model chunk %u has no layers", c);
      total += cfg->chunk_layers[c];
    }
  CHECK (total == model->n_layers, "the chunks hold %" G_GUINT64_FORMAT " layers, the model "
         "has %u", total, model->n_layers);
  return TRUE;
}

/* MoE (moe14): Megatron-Core's expert grid (see MpParallelConfig) and the widths it
 * splits. Megatron-Core asks for sequence parallelism with MoE and tp > 1; here it is
 * needed where the expert grid differs from the dense one (etp != tp), whose tokens
 * then come from the sequence-split hidden state. */
static gboolean
check_experts (const MpParallelConfig *cfg, const MpModel *model, GError **error)
{
  guint etp = mp_parallel_config_etp (cfg), stage = cfg->tp * cfg->cp * cfg->dp;
  if (model->experts == 0)
    {
      CHECK (cfg->ep == 1, "ep = %u on a dense model", cfg->ep);
      CHECK (etp == cfg->tp, "etp = %u on a dense model", etp);
      return TRUE;
    }
  CHECK (model->experts % cfg->ep == 0, "ep = %u does not divide %" G_GUINT64_FORMAT
         " experts", cfg->ep, model->experts);
  CHECK (stage % (etp * cfg->ep) == 0, "etp * ep = %u * %u does not divide the tp * cp * dp "
         "= %u ranks of a pipeline stage", etp, cfg->ep, stage);
  CHECK (model->moe_ffn_hidden % etp == 0, "etp = %u does not divide the expert width %"
         G_GUINT64_FORMAT, etp, model->moe_ffn_hidden);
  CHECK (model->shared_experts * model->shared_expert_ffn % cfg->tp == 0, "tp = %u does not "
         "divide the shared experts' width %" G_GUINT64_FORMAT, cfg->tp,
         model->shared_experts * model->shared_expert_ffn);
  CHECK (etp == cfg->tp || cfg->tp == 1 || cfg->sequence_parallel, "etp = %u with tp = %u "
         "needs sequence_parallel (experts take their tokens from the sequence-split hidden "
         "state, as in Megatron-Core)", etp, cfg->tp);
  CHECK ((guint) cfg->dispatcher <= MP_DISPATCH_ALLGATHER, "unknown token dispatcher");
  return TRUE;
}

gboolean
mp_parallel_config_check (const MpParallelConfig *cfg, const MpModel *model,
                          const MpCluster *cluster, GError **error)
{
  g_return_val_if_fail (cfg != NULL && model != NULL && cluster != NULL, FALSE);
  CHECK (cfg->dp >= 1 && cfg->tp >= 1 && cfg->pp >= 1 && cfg->cp >= 1 && cfg->ep >= 1
         && cfg->vpp >= 1, "every parallel size must be at least 1");
  CHECK (cfg->micro_batch_size >= 1 && cfg->num_micro_batches >= 1,
         "micro_batch_size and num_micro_batches must be at least 1");
  CHECK (cfg->zero <= 3, "zero stage %u: must be 0, 1, 2 or 3", cfg->zero);
  guint dpcp = cfg->dp * cfg->cp;
  CHECK (cfg->zero_shard != 1 || dpcp == 1, "zero_shard = 1 shards nothing: use zero = 0 "
         "(plain data parallelism)");
  CHECK (cfg->zero_shard == 0 || dpcp % cfg->zero_shard == 0,
         "zero_shard = %u does not divide dp * cp = %u", cfg->zero_shard, dpcp);
  CHECK (cfg->zero_shard == 0 || cfg->zero_shard == dpcp || cfg->zero >= 1,
         "zero_shard = %u needs zero >= 1 (there is nothing to shard)", cfg->zero_shard);
  /* Experts shard over their own edp group; HSDP over it is not modelled. */
  CHECK (mp_parallel_config_zero_replicas (cfg) == 1 || cfg->ep <= 1,
         "zero_shard = %u with ep = %u: HSDP is modelled for dense models only",
         cfg->zero_shard, cfg->ep);
  CHECK (!cfg->no_reshard || cfg->zero == 3,
         "reshard_after_forward: false needs zero = 3 (only ZeRO-3 reshards weights)");
  CHECK ((guint) cfg->recompute <= MP_RECOMPUTE_FULL, "unknown recompute mode");
  /* Megatron: --recompute-num-layers and --recompute-method are for full granularity,
   * --recompute-modules for selective. */
  CHECK (cfg->recompute_num_layers == 0 || cfg->recompute == MP_RECOMPUTE_FULL,
         "recompute_num_layers = %u needs recompute = full", cfg->recompute_num_layers);
  CHECK ((guint) cfg->recompute_method <= MP_RECOMPUTE_METHOD_UNIFORM,
         "unknown recompute method");
  CHECK (cfg->recompute_modules == 0 || cfg->recompute == MP_RECOMPUTE_SELECTIVE,
         "recompute_modules need recompute = selective");
  CHECK ((cfg->recompute_modules & ~(guint) MP_RECOMPUTE_MODULES_ALL) == 0,
         "unknown recompute module");
  CHECK (!(cfg->recompute_modules & MP_RECOMPUTE_OP) || cfg->recompute_modules == MP_RECOMPUTE_OP,
         "recompute_modules: op (torchtitan's op-level policy) covers every module and "
         "takes no others");
  CHECK ((guint) cfg->schedule <= MP_SCHEDULE_NONE, "unknown schedule");
  guint64 world = (guint64) cfg->dp * cfg->tp * cfg->pp * cfg->cp;
  CHECK (world <= cluster->world_size, "dp * tp * pp * cp = %" G_GUINT64_FORMAT
         " ranks, the cluster has %u devices", world, cluster->world_size);
  CHECK (cfg->vpp == 1 || cfg->schedule == MP_SCHEDULE_INTERLEAVED,
         "vpp = %u needs the interleaved schedule", cfg->vpp);
  /* Megatron-LM's interleaved schedule runs micro-batches in groups of pp. */
  CHECK (cfg->schedule != MP_SCHEDULE_INTERLEAVED || cfg->num_micro_batches % cfg->pp == 0,
         "the interleaved schedule needs num_micro_batches (%u) divisible by pp (%u) "
         "(Megatron-LM runs them in groups of microbatch_group_size_per_vp_stage = pp)",
         cfg->num_micro_batches, cfg->pp);
  if (model->arch == MP_ARCH_TRANSFORMER)
    {
      CHECK (model->heads % cfg->tp == 0, "tp = %u does not divide %" G_GUINT64_FORMAT
             " heads", cfg->tp, model->heads);
      /* Megatron splits kv heads (query groups) over tp too. */
      CHECK (model->kv_heads % cfg->tp == 0, "tp = %u does not divide %" G_GUINT64_FORMAT
             " kv heads", cfg->tp, model->kv_heads);
      /* MoE (moe14): an MoE model's ffn_hidden matters only in its dense blocks. */
      CHECK (model->ffn_hidden % cfg->tp == 0 || (model->experts > 0
                                                  && model->first_k_dense == 0),
             "tp = %u does not divide ffn_hidden %" G_GUINT64_FORMAT, cfg->tp,
             model->ffn_hidden);
      CHECK (model->seq_len % cfg->cp == 0, "cp = %u does not divide seq_len %"
             G_GUINT64_FORMAT, cfg->cp, model->seq_len);
    }
  else
    {
      CHECK (cfg->cp == 1, "context parallelism needs a sequence model");
      for (guint i = 0; i < model->n_mlp_layers; i++)
        CHECK (model->mlp_layers[i].out % cfg->tp == 0, "tp = %u does not divide the %"
               G_GUINT64_FORMAT " outputs of layer %u", cfg->tp, model->mlp_layers[i].out, i);
    }
  CHECK ((guint) cfg->stack < MP_STACK_N, "unknown stack %u", (guint) cfg->stack);
  CHECK ((guint) cfg->cp_comm <= MP_CP_COMM_ALLGATHER, "unknown cp_comm_type %u",
         (guint) cfg->cp_comm);
  for (guint g = 0; cfg->fp8 && g < cluster->n_groups; g++)
    CHECK (cluster->groups[g].device.peak_flops[MP_DTYPE_FP8] > 0, "fp8 needs an FP8 rate "
           "on every device, and '%s' lists none in its peak", cluster->groups[g].device.name);
  if (!check_experts (cfg, model, error))
    return FALSE;
  return check_chunks (cfg, model, error);
}

#undef CHECK

/* ---- rank numbering ------------------------------------------------------------------ */

void
mp_parallel_config_strides (const MpParallelConfig *cfg, guint stride[MP_DIM_N])
{
  const MpParallelDim *order = config_order (cfg);
  guint size[MP_DIM_N] = { cfg->tp, cfg->cp, cfg->dp, cfg->pp };
  guint s = 1;
  for (int i = 0; i < MP_DIM_N; i++)
    {
      stride[order[i]] = s;
      s *= size[order[i]];
    }
}


/* ---- one order on configs ----------------------------------------------------------- */

static int
cmp_guint (guint a, guint b)
{
  return a < b ? -1 : a > b ? 1 : 0;
}

/* Two borrowed tables of N entries, NULL (the default) before any table. */
static int
cmp_table (const guint *a, const guint *b, guint n)
{
  if (a == NULL || b == NULL)
    return cmp_guint (a != NULL, b != NULL);
  for (guint i = 0; i < n; i++)
    if (a[i] != b[i])
      return cmp_guint (a[i], b[i]);
  return 0;
}

int
mp_parallel_config_compare (const MpParallelConfig *x, const MpParallelConfig *y)
{
  /* The planner's tie-break order: the sizes and choices a search varies, then the rank
   * order; what a search holds fixed comes after, so its ranking is unchanged. */
  const guint kx[] = { x->tp, x->pp, x->dp, x->cp, x->ep, x->vpp, x->sequence_parallel,
                       x->zero, x->recompute, x->micro_batch_size, x->schedule,
                       x->order[0], x->order[1], x->order[2], x->order[3],
                       mp_parallel_config_etp (x), x->dispatcher,
                       x->num_micro_batches, x->flash_attention, x->fp32_grads, x->fp8,
                       x->recompute_num_layers, x->recompute_method, x->recompute_modules,
                       x->stack, mp_parallel_config_zero_shard (x), x->no_reshard,
                       x->moe_a2a_overlap, x->compile, x->cp_comm };
  const guint ky[] = { y->tp, y->pp, y->dp, y->cp, y->ep, y->vpp, y->sequence_parallel,
                       y->zero, y->recompute, y->micro_batch_size, y->schedule,
                       y->order[0], y->order[1], y->order[2], y->order[3],
                       mp_parallel_config_etp (y), y->dispatcher,
                       y->num_micro_batches, y->flash_attention, y->fp32_grads, y->fp8,
                       y->recompute_num_layers, y->recompute_method, y->recompute_modules,
                       y->stack, mp_parallel_config_zero_shard (y), y->no_reshard,
                       y->moe_a2a_overlap, y->compile, y->cp_comm };
  G_STATIC_ASSERT (MP_DIM_N == 4);
  for (gsize i = 0; i < G_N_ELEMENTS (kx); i++)
    if (kx[i] != ky[i])
      return cmp_guint (kx[i], ky[i]);
  if (x->bucket_bytes != y->bucket_bytes)
    return x->bucket_bytes < y->bucket_bytes ? -1 : 1;
  int c = cmp_table (x->chunk_layers, y->chunk_layers, mp_parallel_config_chunks (x));
  if (c != 0)
    return c;
  return cmp_table (x->placement, y->placement, x->dp * x->tp * x->pp * x->cp);
}

gboolean
mp_parallel_config_equal (const MpParallelConfig *a, const MpParallelConfig *b)
{
  return mp_parallel_config_compare (a, b) == 0;
}
