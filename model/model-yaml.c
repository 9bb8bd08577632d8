/* model-yaml.c - model YAML -> checked hyper-parameters in an MpModel -> the IR.
 *
 * Every problem is recorded (FILE:LINE:COLUMN: message) and loading goes on, so one run
 * lists them all. The format, with defaults:
 *
 *   name: gpt3-175b            # default: the file name without extension
 *   architecture: transformer  # transformer (default) | mlp
 *   layers: 96                 # transformer blocks (required)
 *   hidden: 12288              # required
 *   heads: 96                  # required; must divide hidden unless head_dim is given
 *   kv_heads: 96               # default heads; must divide heads (fewer: GQA, 1: MQA)
 *   head_dim: 128              # default hidden / heads
 *   ffn_hidden: 49152          # default 4 hidden; swiglu: 8/3 hidden rounded up to 256
 *   vocab: 51200               # required
 *   seq_len: 2048              # required
 *   activation: gelu           # gelu (default) | swiglu | relu | geglu
 *   norm: layernorm            # layernorm (default) | rmsnorm
 *   position: learned          # learned (default) | rotary
 *   rope_theta: 10000          # rotary base (default 10000; Llama 3: 500000)
 *   bias: true                 # biases on linear layers (default true)
 *   tied_embeddings: true      # output projection shares the token embedding (default true)
 *   experts: 0                 # MoE experts per block (default 0: dense)
 *   experts_per_token: 2       # MoE top-k; required when experts > 0
 *   attention:                 # optional (ir14); every key optional
 *     window: 4096             # sliding window, keys per query (at most seq_len)
 *     pattern: [window, full]  # which blocks are windowed, repeated over the blocks
 *                              # (default: all); as long as `layers`: one per block
 *     sinks: true              # a learned sink logit per head (GPT-OSS)
 *     qk_norm: true            # RMSNorm of each q and k head (Qwen3, Gemma 3)
 *     bias: qkv                # true | false | qkv (q, k, v only); default `bias`
 *     softcap: 50              # tanh soft-capping of the scores (Gemma 2)
 *     mla:                     # multi-head latent attention (DeepSeek-V2/V3)
 *       q_lora_rank: 1536      # optional: without it q is projected directly
 *       kv_lora_rank: 512      # required
 *       qk_nope_head_dim: 128  # required
 *       qk_rope_head_dim: 64   # required; head_dim = nope + rope
 *       v_head_dim: 128        # required
 *   post_norms: true           # Gemma 2/3: also normalise attention and MLP outputs
 *   embed_scale: true          # Gemma: embeddings x sqrt(hidden)
 *   dropout: false             # no hidden/embedding dropout: no masks kept (default true)
 *   logit_softcap: 30          # tanh soft-capping of the output logits (Gemma 2)
 *   moe_ffn_hidden: 1536       # MoE (moe14): routed expert width (default ffn_hidden)
 *   shared_experts: 1          #   experts every token goes through (default 0)
 *   shared_expert_ffn: 2048    #   width of one shared expert (default moe_ffn_hidden)
 *   first_k_dense: 3           #   leading blocks with a dense ffn_hidden MLP (default 0)
 *   capacity_factor: 1.25      #   expert capacity over its mean load (default 0: dropless)
 *   load_imbalance: 1.1        #   busiest expert rank's tokens over the mean (default 1)
 *   routing: spread            #   a token's experts: spread (default) | blocked (MpRouting)
 *   training:                  # optional
 *     global_batch: 1536       # sequences per step; default ~1M tokens (2^20 / seq_len),
 *                              # 256 samples for an mlp
 *     precision: bf16          # fp32 | fp16 | bf16 (default; mixed, fp32 master weights)
 *     optimizer: adam          # adam (default) | sgd (with momentum)
 *
 * architecture: mlp takes `input: 1024` and `layers:` as a list of
 * `{out: 512, activation: relu}` (activation: relu | gelu | none, default none), plus
 * name, bias and training. Numbers accept count suffixes ("4k", "1.5M"). Limits (see
 * model-private.h): sizes up to 1e7, at most 10000 layers and 100000 experts. */
#define G_LOG_DOMAIN "mpplan-model"
#include "config.h"
#include "model/model-private.h"
#include "common/error.h"
#include "common/yamldoc.h"

#include <math.h>
#include <string.h>

#define MAX_NAME_LEN 256

static const char *const common_keys[] = { "name", "architecture", "layers", "bias",
                                           "training", NULL };
static const char *const transformer_keys[] = {
  "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "seq_len", "activation",
  "norm", "position", "rope_theta", "tied_embeddings", "experts", "experts_per_token",
  "attention", "post_norms", "embed_scale", "logit_softcap", "dropout",
  /* MoE (moe14) */
  "moe_ffn_hidden", "shared_experts", "shared_expert_ffn", "first_k_dense", "capacity_factor",
  "load_imbalance", "routing", NULL
};
static const char *const mlp_keys[] = { "input", NULL };
static const char *const all_keys[] = {
  "name", "architecture", "layers", "bias", "training", "hidden", "heads", "kv_heads",
  "head_dim", "ffn_hidden", "vocab", "seq_len", "activation", "norm", "position",
  "rope_theta", "tied_embeddings", "experts", "experts_per_token", "input", "attention",
  "post_norms", "embed_scale", "logit_softcap", "dropout",
  /* MoE (moe14) */
  "moe_ffn_hidden", "shared_experts", "shared_expert_ffn", "first_k_dense", "capacity_factor",
  "load_imbalance", "routing", NULL
};
static const char *const training_keys[] = { "global_batch", "precision", "optimizer", NULL };
static const char *const mlp_layer_keys[] = { "out", "activation", NULL };
static const char *const attention_keys[] = { "window", "pattern", "sinks", "qk_norm", "bias",
                                              "softcap", "mla", NULL };
static const char *const mla_keys[] = { "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                        "qk_rope_head_dim", "v_head_dim", NULL };
static const char *const attn_bias_names[] = { "false", "true", "qkv", NULL };
static const MpAttnBias attn_bias_values[] = { MP_ATTN_BIAS_NONE, MP_ATTN_BIAS_ALL,
                                               MP_ATTN_BIAS_QKV };
static const char *const pattern_names[] = { "full", "window", NULL };

static const char *const arch_names[] = { "transformer", "mlp", NULL };
static const char *const act_names[] = { "gelu", "swiglu", "relu", "geglu", NULL }; /* MpActivation */
static const char *const norm_names[] = { "layernorm", "rmsnorm", NULL };    /* MpNorm */
static const char *const pos_names[] = { "learned", "rotary", NULL };        /* MpPosition */
static const char *const routing_names[] = { "spread", "blocked", NULL }; /* MpRouting */
static const char *const optim_names[] = { "adam", "sgd", NULL };            /* MpOptimizer */
static const char *const precision_names[] = { "fp32", "fp16", "bf16", NULL };
static const MpDtype precision_dtypes[] = { MP_DTYPE_FP32, MP_DTYPE_FP16, MP_DTYPE_BF16 };
static const char *const mlp_act_names[] = { "relu", "gelu", "none", NULL };
static const MpActivation mlp_act_values[] = { MP_ACT_RELU, MP_ACT_GELU, MP_ACT_NONE };

/* Reads KEY as a whole number in [MIN, MAX]; count suffixes ("4k") are allowed. Records
 * a problem for junk, fractions, zero (when MIN > 0), negatives and values past MAX. */
static gboolean
get_count (MpYamlReader *r, const MpYamlNode *map, const char *key, gboolean required,
           guint64 min, guint64 max, guint64 *out)
{
  double x;
  if (!mp_yaml_get_quantity (r, map, key, MP_UNIT_COUNT, required, TRUE, &x))
    return FALSE;
  const MpYamlNode *v = mp_yaml_lookup (map, key);
  if (x != floor (x))
    mp_yaml_problem (r, v, "'%s' must be a whole number, not '%s'", key, v->value);
  else if (x == 0 && min > 0)
    mp_yaml_problem (r, v, "'%s' must be greater than zero", key);
  else if (x < (double) min)
    mp_yaml_problem (r, v, "'%s' = %s is less than %" G_GUINT64_FORMAT, key, v->value, min);
  else if (x > (double) max)
    mp_yaml_problem (r, v, "'%s' = %s is too large (at most %" G_GUINT64_FORMAT ")", key,
                     v->value, max);
  else
    {
      *out = (guint64) x;
      return TRUE;
    }
  return FALSE;
}

/* get_count for a size that must be >= 1 and at most MP_MODEL_MAX_DIM. */
static gboolean
get_dim (MpYamlReader *r, const MpYamlNode *map, const char *key, gboolean required,
         guint64 *out)
{
  return get_count (r, map, key, required, 1, MP_MODEL_MAX_DIM, out);
}

/* Unknown keys (with a suggestion), then known keys of the other architecture. */
static void
check_root_keys (MpYamlReader *r, const MpYamlNode *root, MpArch arch, gboolean arch_known)
{
  mp_yaml_check_keys (r, root, all_keys);
  if (!arch_known)
    return;
  const char *const *own = arch == MP_ARCH_MLP ? mlp_keys : transformer_keys;
  for (guint i = 0; i < root->keys->len; i++)
    {
      const MpYamlNode *k = g_ptr_array_index (root->keys, i);
      if (g_strv_contains (all_keys, k->value) && !g_strv_contains (common_keys, k->value)
          && !g_strv_contains (own, k->value))
        mp_yaml_problem (r, k, "'%s' does not apply to architecture: %s", k->value,
                         mp_model_arch_name (arch));
    }
}

/* The optional training block; *BATCH_SET says whether global_batch was given. */
static void
read_training (MpYamlReader *r, const MpYamlNode *root, MpModel *m, gboolean *batch_set)
{
  m->precision = MP_DTYPE_BF16;
  m->optimizer = MP_OPTIM_ADAM;
  *batch_set = FALSE;
  const MpYamlNode *t = mp_yaml_lookup (root, "training");
  if (t == NULL || !mp_yaml_expect_map (r, t, "'training'"))
    return;
  mp_yaml_check_keys (r, t, training_keys);
  *batch_set = get_count (r, t, "global_batch", FALSE, 1, MP_MODEL_MAX_BATCH,
                          &m->global_batch);
  int i;
  if (mp_yaml_get_enum (r, t, "precision", FALSE, precision_names, &i))
    m->precision = precision_dtypes[i];
  if (mp_yaml_get_enum (r, t, "optimizer", FALSE, optim_names, &i))
    m->optimizer = (MpOptimizer) i;
}

/* head_dim: given, or nope + rope with MLA, or hidden / heads when heads divides hidden. */
static gboolean
read_head_dim (MpYamlReader *r, const MpYamlNode *root, MpModel *m, gboolean shape_ok)
{
  guint64 mla_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
  const MpYamlNode *v = mp_yaml_lookup (root, "head_dim");
  if (v != NULL)
    {
      if (!get_dim (r, root, "head_dim", FALSE, &m->head_dim))
        return FALSE;
      if (m->kv_lora_rank > 0 && m->head_dim != mla_dim)
        mp_yaml_problem (r, v, "'head_dim' = %" G_GUINT64_FORMAT " is not qk_nope_head_dim + "
                         "qk_rope_head_dim = %" G_GUINT64_FORMAT " (leave it out with mla)",
                         m->head_dim, mla_dim);
      return TRUE;
    }
  if (m->kv_lora_rank > 0)
    {
      m->head_dim = mla_dim;
      return TRUE;
    }
  if (!shape_ok)
    return FALSE;
  if (m->hidden % m->heads != 0)
    {
      mp_yaml_problem (r, mp_yaml_lookup (root, "heads"),
                       "'heads' = %" G_GUINT64_FORMAT " does not divide 'hidden' = %"
                       G_GUINT64_FORMAT " (give head_dim for another head width)",
                       m->heads, m->hidden);
      return FALSE;
    }
  m->head_dim = m->hidden / m->heads;
  return TRUE;
}

/* kv_heads: default heads; must divide heads (grouped-query attention); = heads with
 * MLA, whose K and V are per head. */
static void
read_kv_heads (MpYamlReader *r, const MpYamlNode *root, MpModel *m, gboolean heads_ok)
{
  m->kv_heads = m->heads;
  const MpYamlNode *v = mp_yaml_lookup (root, "kv_heads");
  if (v == NULL || !get_dim (r, root, "kv_heads", FALSE, &m->kv_heads) || !heads_ok)
    return;
  if (m->kv_lora_rank > 0 && m->kv_heads != m->heads)
    mp_yaml_problem (r, v, "'kv_heads' = %" G_GUINT64_FORMAT " with mla: latent attention "
                     "has a key and a value per head (kv_heads = heads = %" G_GUINT64_FORMAT
                     ")", m->kv_heads, m->heads);
  else if (m->kv_heads > m->heads)
    mp_yaml_problem (r, v, "'kv_heads' = %" G_GUINT64_FORMAT " is more than 'heads' = %"
                     G_GUINT64_FORMAT, m->kv_heads, m->heads);
  else if (m->heads % m->kv_heads != 0)
    mp_yaml_problem (r, v, "'kv_heads' = %" G_GUINT64_FORMAT " does not divide 'heads' = %"
                     G_GUINT64_FORMAT, m->kv_heads, m->heads);
}

/* experts / experts_per_token: both absent (dense), or 1 <= top-k <= experts. */
static void
read_experts (MpYamlReader *r, const MpYamlNode *root, MpModel *m)
{
  const MpYamlNode *e = mp_yaml_lookup (root, "experts");
  const MpYamlNode *k = mp_yaml_lookup (root, "experts_per_token");
  gboolean e_ok = e == NULL || get_count (r, root, "experts", FALSE, 0, MP_MODEL_MAX_EXPERTS,
                                          &m->experts);
  gboolean k_ok = k == NULL || get_count (r, root, "experts_per_token", FALSE, 1,
                                          MP_MODEL_MAX_EXPERTS, &m->experts_per_token);
  if (!e_ok || !k_ok)
    return;
  if (k != NULL && m->experts == 0)
    mp_yaml_problem (r, k, "'experts_per_token' needs 'experts' > 0 (an MoE model)");
  else if (k == NULL && m->experts > 0)
    mp_yaml_problem (r, e, "'experts' = %" G_GUINT64_FORMAT " needs 'experts_per_token' "
                     "(how many experts each token goes through)", m->experts);
  else if (m->experts_per_token > m->experts)
    mp_yaml_problem (r, k, "'experts_per_token' = %" G_GUINT64_FORMAT " is more than "
                     "'experts' = %" G_GUINT64_FORMAT, m->experts_per_token, m->experts);
}

/* attention.mla: the latent ranks and head widths (all required but q_lora_rank). */
static void
read_mla (MpYamlReader *r, const MpYamlNode *mla, MpModel *m)
{
  if (!mp_yaml_expect_map (r, mla, "'mla'"))
    return;
  mp_yaml_check_keys (r, mla, mla_keys);
  const MpYamlNode *q = mp_yaml_lookup (mla, "q_lora_rank");
  if (q != NULL && get_count (r, mla, "q_lora_rank", FALSE, 0, MP_MODEL_MAX_DIM,
                              &m->q_lora_rank) && m->q_lora_rank == 0)
    mp_yaml_problem (r, q, "'q_lora_rank' must be greater than zero (leave it out when q "
                     "is projected directly, as in DeepSeek-V2-Lite)");
  guint64 kv = 0;
  gboolean ok = get_dim (r, mla, "kv_lora_rank", TRUE, &kv);
  ok &= get_dim (r, mla, "qk_nope_head_dim", TRUE, &m->qk_nope_head_dim);
  ok &= get_dim (r, mla, "qk_rope_head_dim", TRUE, &m->qk_rope_head_dim);
  ok &= get_dim (r, mla, "v_head_dim", TRUE, &m->v_head_dim);
  if (ok)
    m->kv_lora_rank = kv;
  else
    m->qk_nope_head_dim = m->qk_rope_head_dim = m->v_head_dim = 0;
}

/* attention.pattern: `window` / `full` per block, repeated over the blocks. */
static void
read_pattern (MpYamlReader *r, const MpYamlNode *v, MpModel *m)
{
  guint n = v->kind == MP_YAML_SEQ ? v->items->len : 0;
  if (v->kind != MP_YAML_SEQ || n == 0 || (m->n_blocks > 0 && n > m->n_blocks))
    {
      mp_yaml_problem (r, v, "'pattern' must be a list of 1 to 'layers' entries like "
                       "[window, window, full] (repeated over the blocks)");
      return;
    }
  g_autofree gboolean *pattern = g_new0 (gboolean, n);
  gboolean ok = TRUE;
  for (guint i = 0; i < n; i++)
    {
      const MpYamlNode *item = g_ptr_array_index (v->items, i);
      int k = -1;
      for (int j = 0; item->kind == MP_YAML_SCALAR && pattern_names[j]; j++)
        if (strcmp (item->value, pattern_names[j]) == 0)
          k = j;
      if (k < 0)
        {
          mp_yaml_problem (r, item, "pattern entry %u must be 'window' or 'full'", i);
          ok = FALSE;
        }
      pattern[i] = k == 1;
    }
  if (!ok)
    return;
  m->window_pattern = g_steal_pointer (&pattern);
  m->n_window_pattern = n;
}

/* attention.window: at most seq_len (a window covering the sequence is full attention;
 * a longer one is a mistake, not a window). */
static void
read_window (MpYamlReader *r, const MpYamlNode *attn, MpModel *m)
{
  const MpYamlNode *v = mp_yaml_lookup (attn, "window");
  const MpYamlNode *p = mp_yaml_lookup (attn, "pattern");
  if (v != NULL && get_dim (r, attn, "window", FALSE, &m->window) && m->seq_len > 0
      && m->window > m->seq_len)
    {
      mp_yaml_problem (r, v, "'window' = %" G_GUINT64_FORMAT " is longer than seq_len = %"
                       G_GUINT64_FORMAT " (a window covering the sequence is full "
                       "attention: lower it or leave it out)", m->window, m->seq_len);
      m->window = 0;
    }
  if (p != NULL && v == NULL)
    mp_yaml_problem (r, p, "'pattern' needs 'window' (the width of the windowed blocks)");
  else if (p != NULL)
    read_pattern (r, p, m);
}

/* The optional `attention:` block. */
static void
read_attention (MpYamlReader *r, const MpYamlNode *root, MpModel *m)
{
  const MpYamlNode *attn = mp_yaml_lookup (root, "attention");
  if (attn == NULL || !mp_yaml_expect_map (r, attn, "'attention'"))
    return;
  mp_yaml_check_keys (r, attn, attention_keys);
  read_window (r, attn, m);
  mp_yaml_get_bool (r, attn, "sinks", FALSE, &m->attn_sinks);
  mp_yaml_get_bool (r, attn, "qk_norm", FALSE, &m->qk_norm);
  int i;
  if (mp_yaml_get_enum (r, attn, "bias", FALSE, attn_bias_names, &i))
    m->attn_bias = attn_bias_values[i];
  if (mp_yaml_lookup (attn, "softcap") != NULL)
    mp_yaml_get_quantity (r, attn, "softcap", MP_UNIT_COUNT, FALSE, FALSE, &m->attn_softcap);
  const MpYamlNode *mla = mp_yaml_lookup (attn, "mla");
  if (mla != NULL)
    read_mla (r, mla, m);
  if (mla != NULL && m->qk_norm)
    mp_yaml_problem (r, mp_yaml_lookup (attn, "qk_norm"), "'qk_norm' does not apply to "
                     "mla (its latents have their own norms)");
}

/* MoE (moe14): the keys that shape an MoE block; each needs experts > 0, and at least
 * the last block must stay an MoE one. */
static void
read_moe (MpYamlReader *r, const MpYamlNode *root, MpModel *m)
{
  static const char *const keys[] = { "moe_ffn_hidden", "shared_experts",
                                      "shared_expert_ffn", "first_k_dense",
                                      "capacity_factor", "load_imbalance", "routing",
                                      NULL };
  for (guint i = 0; keys[i] != NULL; i++)
    if (m->experts == 0 && mp_yaml_lookup (root, keys[i]) != NULL)
      {
        mp_yaml_problem (r, mp_yaml_lookup (root, keys[i]), "'%s' needs 'experts' > 0 (an "
                         "MoE model)", keys[i]);
        return;
      }
  get_dim (r, root, "moe_ffn_hidden", FALSE, &m->moe_ffn_hidden);
  get_count (r, root, "shared_experts", FALSE, 0, MP_MODEL_MAX_EXPERTS, &m->shared_experts);
  get_dim (r, root, "shared_expert_ffn", FALSE, &m->shared_expert_ffn);
  const MpYamlNode *k = mp_yaml_lookup (root, "first_k_dense");
  if (k != NULL && get_count (r, root, "first_k_dense", FALSE, 0, MP_MODEL_MAX_LAYERS,
                              &m->first_k_dense)
      && m->n_blocks > 0 && m->first_k_dense >= m->n_blocks)
    mp_yaml_problem (r, k, "'first_k_dense' = %" G_GUINT64_FORMAT " leaves none of the %"
                     G_GUINT64_FORMAT " blocks an MoE one", m->first_k_dense, m->n_blocks);
  const MpYamlNode *c = mp_yaml_lookup (root, "capacity_factor");
  if (c != NULL && mp_yaml_get_quantity (r, root, "capacity_factor", MP_UNIT_COUNT, FALSE,
                                         TRUE, &m->capacity_factor)
      && (m->capacity_factor < 0 || m->capacity_factor > m->experts))
    mp_yaml_problem (r, c, "'capacity_factor' = %s must be 0 (dropless) or more than 0 and "
                     "at most 'experts' (every token to every expert)", c->value);
  const MpYamlNode *b = mp_yaml_lookup (root, "load_imbalance");
  if (b != NULL && mp_yaml_get_quantity (r, root, "load_imbalance", MP_UNIT_COUNT, FALSE,
                                         FALSE, &m->load_imbalance)
      && (m->load_imbalance < 1 || m->load_imbalance > m->experts))
    mp_yaml_problem (r, b, "'load_imbalance' = %s must be from 1 (balanced) to 'experts' "
                     "(every token on one expert)", b->value);
  int routing;
  if (mp_yaml_get_enum (r, root, "routing", FALSE, routing_names, &routing))
    m->routing = (MpRouting) routing;
}

/* Swiglu's customary width (Llama): 2/3 of 4h, rounded up to a multiple of 256. */
static guint64
default_ffn (const MpModel *m)
{
  if (!mp_activation_gated (m->activation))
    return 4 * m->hidden;
  guint64 w = (8 * m->hidden + 2) / 3;
  return (w + 255) / 256 * 256;
}

static void
read_transformer (MpYamlReader *r, const MpYamlNode *root, MpModel *m)
{
  const MpYamlNode *layers = mp_yaml_lookup (root, "layers");
  if (layers != NULL && layers->kind == MP_YAML_SEQ)
    mp_yaml_problem (r, layers, "'layers' must be the number of blocks for architecture: "
                     "transformer (a list of layers needs architecture: mlp)");
  else
    get_count (r, root, "layers", TRUE, 1, MP_MODEL_MAX_LAYERS, &m->n_blocks);

  gboolean hidden_ok = get_dim (r, root, "hidden", TRUE, &m->hidden);
  gboolean heads_ok = get_dim (r, root, "heads", TRUE, &m->heads);
  get_dim (r, root, "vocab", TRUE, &m->vocab);
  get_dim (r, root, "seq_len", TRUE, &m->seq_len);

  int i;
  m->activation = MP_ACT_GELU;
  if (mp_yaml_get_enum (r, root, "activation", FALSE, act_names, &i))
    m->activation = (MpActivation) i;
  m->norm = MP_NORM_LAYERNORM;
  if (mp_yaml_get_enum (r, root, "norm", FALSE, norm_names, &i))
    m->norm = (MpNorm) i;
  m->position = MP_POS_LEARNED;
  if (mp_yaml_get_enum (r, root, "position", FALSE, pos_names, &i))
    m->position = (MpPosition) i;
  m->rope_theta = 10000;
  get_count (r, root, "rope_theta", FALSE, 1, G_GUINT64_CONSTANT (1000000000), &m->rope_theta);
  m->tied_embeddings = TRUE;
  mp_yaml_get_bool (r, root, "tied_embeddings", FALSE, &m->tied_embeddings);

  read_attention (r, root, m);
  mp_yaml_get_bool (r, root, "post_norms", FALSE, &m->post_norms);
  mp_yaml_get_bool (r, root, "embed_scale", FALSE, &m->embed_scale);
  gboolean dropout = TRUE;
  mp_yaml_get_bool (r, root, "dropout", FALSE, &dropout);
  m->no_dropout = !dropout;
  if (mp_yaml_lookup (root, "logit_softcap") != NULL)
    mp_yaml_get_quantity (r, root, "logit_softcap", MP_UNIT_COUNT, FALSE, FALSE,
                          &m->logit_softcap);
  gboolean head_dim_ok = read_head_dim (r, root, m, hidden_ok && heads_ok);
  read_kv_heads (r, root, m, heads_ok);
  /* The rotary part of a head: all of it, or MLA's decoupled qk_rope_head_dim. */
  guint64 rotary = m->kv_lora_rank > 0 ? m->qk_rope_head_dim : m->head_dim;
  if (head_dim_ok && m->position == MP_POS_ROTARY && rotary % 2 != 0)
    mp_yaml_problem (r, mp_yaml_lookup (root, "position"),
                     "rotary positions need an even head width, not %" G_GUINT64_FORMAT,
                     rotary);
  read_experts (r, root, m);
  read_moe (r, root, m);

  if (mp_yaml_lookup (root, "ffn_hidden") != NULL)
    get_dim (r, root, "ffn_hidden", FALSE, &m->ffn_hidden);
  else if (hidden_ok)
    m->ffn_hidden = default_ffn (m);
}

/* One item of an mlp `layers:` list. */
static void
read_mlp_layer (MpYamlReader *r, const MpYamlNode *item, guint index, MpMlpLayerSpec *spec)
{
  spec->activation = MP_ACT_NONE;
  if (item->kind != MP_YAML_MAP)
    {
      mp_yaml_problem (r, item, "layer %u must be a mapping like {out: 512, activation: relu}",
                       index);
      return;
    }
  mp_yaml_check_keys (r, item, mlp_layer_keys);
  get_dim (r, item, "out", TRUE, &spec->out);
  int i;
  if (mp_yaml_get_enum (r, item, "activation", FALSE, mlp_act_names, &i))
    spec->activation = mlp_act_values[i];
}

static void
read_mlp (MpYamlReader *r, const MpYamlNode *root, MpModel *m)
{
  get_dim (r, root, "input", TRUE, &m->input);
  m->seq_len = 1;
  m->activation = MP_ACT_NONE;

  const MpYamlNode *layers = mp_yaml_lookup (root, "layers");
  if (layers == NULL)
    {
      mp_yaml_problem (r, root, "missing required key 'layers'");
      return;
    }
  if (layers->kind != MP_YAML_SEQ)
    {
      mp_yaml_problem (r, layers, "'layers' must be a list like '- {out: 512, activation: "
                       "relu}' for architecture: mlp");
      return;
    }
  if (layers->items->len == 0 || layers->items->len > MP_MODEL_MAX_LAYERS)
    {
      mp_yaml_problem (r, layers, "'layers' must hold 1 to %u layers, not %u",
                       MP_MODEL_MAX_LAYERS, layers->items->len);
      return;
    }
  m->n_mlp_layers = layers->items->len;
  m->mlp_layers = g_new0 (MpMlpLayerSpec, m->n_mlp_layers);
  for (guint i = 0; i < m->n_mlp_layers; i++)
    read_mlp_layer (r, g_ptr_array_index (layers->items, i), i, &m->mlp_layers[i]);
}

/* The file name without folders and extension, for a model without `name:`. */
static char *
name_from_path (const char *path)
{
  g_autofree char *base = g_path_get_basename (path);
  char *dot = strrchr (base, '.');
  if (dot != NULL && dot != base)
    *dot = '\0';
  return g_strdup (base);
}

static void
read_model (MpYamlReader *r, const MpYamlNode *root, MpModel *m)
{
  if (!mp_yaml_expect_map (r, root, "a model file"))
    return;

  int arch = MP_ARCH_TRANSFORMER;
  gboolean arch_known = mp_yaml_lookup (root, "architecture") == NULL
                        || mp_yaml_get_enum (r, root, "architecture", FALSE, arch_names, &arch);
  m->arch = (MpArch) arch;
  check_root_keys (r, root, m->arch, arch_known);

  const char *name = NULL;
  if (mp_yaml_get_string (r, root, "name", FALSE, &name))
    {
      if (strlen (name) > MAX_NAME_LEN)
        mp_yaml_problem (r, mp_yaml_lookup (root, "name"), "'name' is longer than %d "
                         "characters", MAX_NAME_LEN);
      else
        m->name = g_strdup (name);
    }
  m->bias = TRUE;
  mp_yaml_get_bool (r, root, "bias", FALSE, &m->bias);

  gboolean batch_set;
  read_training (r, root, m, &batch_set);
  if (!arch_known)
    return;
  if (m->arch == MP_ARCH_TRANSFORMER)
    read_transformer (r, root, m);
  else
    read_mlp (r, root, m);
  if (!batch_set)
    m->global_batch = m->arch == MP_ARCH_MLP ? 256 : MAX (1, (G_GUINT64_CONSTANT (1) << 20)
                                                             / MAX (m->seq_len, 1));
}

/* Checks DOC and builds the model; NULL with every problem in ERROR. */
static MpModel *
model_from_doc (const MpYamlDoc *doc, GError **error)
{
  g_autoptr(MpModel) m = g_new0 (MpModel, 1);
  MpYamlReader r;
  mp_yaml_reader_init (&r, doc);
  read_model (&r, doc->root, m);
  gboolean ok = mp_yaml_reader_finish (&r, error);
  mp_yaml_reader_clear (&r);
  if (!ok)
    return NULL;
  if (m->name == NULL)
    m->name = name_from_path (doc->path);
  m->source = g_strdup (doc->path);
  mp_model_build_ir (m);
  return g_steal_pointer (&m);
}

MpModel *
mp_model_load_file (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_autoptr(MpYamlDoc) doc = mp_yaml_load (path, error);
  if (doc == NULL)
    return NULL;
  return model_from_doc (doc, error);
}

MpModel *
mp_model_load_data (const char *name, const char *data, gsize len, GError **error)
{
  g_return_val_if_fail (name != NULL, NULL);
  g_autoptr(MpYamlDoc) doc = mp_yaml_load_data (name, data, len, error);
  if (doc == NULL)
    return NULL;
  return model_from_doc (doc, error);
}

gboolean
mp_model_yaml_is_model (const struct _MpYamlNode *root)
{
  return root != NULL && root->kind == MP_YAML_MAP
         && (mp_yaml_lookup (root, "architecture") != NULL
             || mp_yaml_lookup (root, "layers") != NULL);
}
