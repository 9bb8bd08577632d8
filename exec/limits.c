/* limits.c - what this executor runs: the one list of the forms the planner costs and
 * exec refuses by name (exit 2), which check_plan tests and `exec --help` prints in the
 * same words, and the shape rules a plan must meet here. Decided from the model and the
 * config alone, so every rank reaches the same verdict with no communication, and
 * `exec --dry-run` reaches it with no world at all. Not here: what one backend lacks
 * kernels for (model-attn.c mp_exec_attn_check_backend; both backends have them all). */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec.h"
#include "common/error.h"

/* A form not run yet: its name (the refusal's and --help's words) and whether MODEL
 * under CFG has it. */
typedef struct {
  const char *what;
  gboolean (*has) (const MpModel *model, const MpParallelConfig *cfg);
} ExecLimit;

static gboolean
mla_extras (const MpModel *m, const MpParallelConfig *cfg)
{
  return mp_model_attention_extras (m) != NULL;
}

static gboolean
uniform_groups (const MpParallelConfig *cfg)
{
  return cfg->recompute == MP_RECOMPUTE_FULL && cfg->recompute_num_layers > 1
         && cfg->recompute_method == MP_RECOMPUTE_METHOD_UNIFORM;
}

static gboolean
uniform_mlp (const MpModel *m, const MpParallelConfig *cfg)
{
  return uniform_groups (cfg) && m->arch == MP_ARCH_MLP;
}

static gboolean
uniform_zero3 (const MpModel *m, const MpParallelConfig *cfg)
{
  return uniform_groups (cfg) && m->arch != MP_ARCH_MLP && cfg->zero >= 3
         && cfg->dp * cfg->cp > 1;
}

static gboolean
other_modules (const MpModel *m, const MpParallelConfig *cfg)
{
  const guint runs = MP_RECOMPUTE_CORE_ATTN | MP_RECOMPUTE_LAYERNORM | MP_RECOMPUTE_MLP
                     | MP_RECOMPUTE_MOE_ACT | MP_RECOMPUTE_SHARED_EXPERTS;
  return cfg->recompute == MP_RECOMPUTE_SELECTIVE && (mp_recompute_modules_of (cfg) & ~runs);
}

static const ExecLimit LIMITS[] = {
  { "multi-head latent attention with attention biases, qk-norm or layernorm", mla_extras },
  { "uniform recompute in groups of an mlp model's dense layers (recompute_method=uniform)",
    uniform_mlp },
  { "uniform recompute (recompute_method=uniform) under ZeRO-3 (the program gathers one "
    "block's weights at a time, a group needs all of its own)", uniform_zero3 },
  { "selective recompute of the whole MoE layer (moe), of MLA's up projections "
    "(mla_up_proj) or torchtitan's op-level policy (op) (recompute_modules)", other_modules },
};

/* What runs that a reader of the list might doubt, and what runs otherwise than the plan
 * says (fp8, moe_a2a_overlap, cp_comm_type: cli/cmd-exec.c says so on stderr). */
#define EXEC_RUNS_OTHERWISE                                                               \
  "DeepSeek's MLA runs (RMSNorm latents, no biases), and so do sliding windows, "        \
  "soft-capped scores, sinks, qk-norm, logit soft-capping, post-norms, scaled "          \
  "embeddings and geglu, on both backends; selective recompute's mlp is the dense MLPs', " \
  "moe_act and shared_experts the MoE layer's parts, as Megatron-Core's. An fp8 plan "    \
  "runs its GEMMs in FP8 on cuda (cast-GEMM-cast through cublasLt: E4M3 forward, E5M2 "   \
  "gradients, per-tensor current scaling; compute capability 8.9 or newer, refused "     \
  "below; the router's and the output head's GEMMs, those whose N, C, OC are not "      \
  "multiples of 16, and the grouped expert GEMMs in bf16; --check tolerance 1e-1), in "  \
  "fp32 on the host and on cuda-fp32; "                                                  \
  "moe_a2a_overlap's dispatch and combine run without the overlap, and a torch stack's " \
  "context parallelism reduce-scatters dK/dV as Transformer Engine's all-gather CP does " \
  "(cp_comm_type allgather; torch rings them); each said on stderr."

char *
mp_exec_limits_text (void)
{
  GString *s = g_string_new ("Not run yet, refused by name (exit 2): ");
  for (gsize i = 0; i < G_N_ELEMENTS (LIMITS); i++)
    g_string_append_printf (s, "%s%s", i ? "; " : "", LIMITS[i].what);
  g_string_append (s, ". " EXEC_RUNS_OTHERWISE);
  return g_string_free (s, FALSE);
}

/* An mlp's column-parallel widths split over tp, and under sequence parallelism the rows
 * of a micro-batch. */
static gboolean
check_dense (const MpModel *m, const MpParallelConfig *cfg, GError **error)
{
  for (guint l = 0; l < m->n_mlp_layers; l += 2)
    if (m->mlp_layers[l].out % cfg->tp != 0)
      {
        g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                     "mpplan exec: tp=%u does not divide the %" G_GUINT64_FORMAT
                     " outputs of dense layer %u (column-parallel): plan another tp",
                     cfg->tp, m->mlp_layers[l].out, l);
        return FALSE;
      }
  if (cfg->sequence_parallel && cfg->tp > 1 && cfg->micro_batch_size % cfg->tp != 0)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                   "mpplan exec: sequence parallelism splits a micro-batch's %u samples "
                   "over tp=%u, which does not divide them", cfg->micro_batch_size, cfg->tp);
      return FALSE;
    }
  return TRUE;
}

/* Context parallelism's load balancing: 2 cp equal chunks of every sequence. */
static gboolean
check_cp (const MpModel *m, const MpParallelConfig *cfg, GError **error)
{
  guint cp = MAX (cfg->cp, 1u);
  if (cp == 1 || (m->arch != MP_ARCH_MLP && m->seq_len % (2 * cp) == 0))
    return TRUE;
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
               "mpplan exec: context parallelism splits each sequence into 2 cp = %u equal "
               "chunks, which seq_len %" G_GUINT64_FORMAT " of model %s is not: plan "
               "another cp", 2 * cp, m->seq_len, m->name);
  return FALSE;
}

gboolean
mp_exec_check_plan (const MpModel *model, const MpParallelConfig *cfg, GError **error)
{
  g_return_val_if_fail (model != NULL && cfg != NULL, FALSE);
  if ((model->arch == MP_ARCH_MLP && !check_dense (model, cfg, error))
      || !check_cp (model, cfg, error))
    return FALSE;
  for (gsize i = 0; i < G_N_ELEMENTS (LIMITS); i++)
    if (LIMITS[i].has (model, cfg))
      {
        /* the model's own words for its attention (which of the extras it has) */
        const char *what = LIMITS[i].has == mla_extras ? mp_model_attention_extras (model)
                                                       : LIMITS[i].what;
        g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "mpplan exec does not run %s (model "
                     "%s) yet: plan without it", what, model->name);
        return FALSE;
      }
  return TRUE;
}
