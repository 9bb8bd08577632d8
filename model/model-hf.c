/* model-hf.c - a Hugging Face config.json -> checked hyper-parameters -> the IR; and any
 * model back to the model YAML of examples/models (what `mpplan import hf` prints).
 *
 * Families read: gpt2, llama (2 and 3), mistral, mixtral, qwen2, qwen3, qwen3_moe, bert,
 * with the key aliases of transformers' configuration_*.py (ECOSYSTEM.md 2.1): GPT-2's
 * n_layer / n_embd / n_head / n_inner / n_positions, num_key_value_heads (absent or null:
 * multi-head), head_dim (null: hidden / heads), MoE widths (Mixtral: intermediate_size
 * per expert; Qwen3-MoE: moe_intermediate_size), num_local_experts or num_experts,
 * num_experts_per_tok, tie_word_embeddings, attention_bias / mlp_bias, hidden_act or
 * activation_function, rms_norm_eps vs layer_norm_epsilon / layer_norm_eps, rope_theta /
 * rope_scaling / rope_parameters, max_position_embeddings, vocab_size, torch_dtype.
 *
 * Decisions (each also in --help and docs/mpplan.1):
 *  - What mpplan cannot cost is refused by name, never dropped: multi-head latent
 *    attention (q_lora_rank / kv_lora_rank), shared experts, dense-first or interleaved
 *    dense layers in an MoE (first_k_dense_replace, decoder_sparse_step != 1,
 *    mlp_only_layers), encoder-decoder models.
 *  - Sliding-window attention (Mistral v0.1: 4096 of 32768) costs the same as full
 *    attention for sequences up to the window, so seq_len is capped at the window and a
 *    note says so; longer sequences would be costed as full attention otherwise.
 *  - One bias flag covers every linear layer: attention_bias || mlp_bias. Qwen2's bias
 *    on q/k/v alone (0.002% of its parameters) is left out.
 *  - BERT's token-type embeddings, pooler and MLM transform (~2M) are left out, as in
 *    examples/models/bert-large.yaml. */
#define G_LOG_DOMAIN "mpplan-model"
#include "config.h"
#include "model/model-private.h"
#include "common/error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  const char *type;          /* model_type */
  gboolean gated;            /* silu means a gated (swiglu) MLP */
  gboolean learned;          /* learned positions (no rope keys) */
  gboolean tied;             /* tie_word_embeddings default of its config class */
  gboolean bias;             /* biases when no attention_bias / mlp_bias / bias key */
  MpNorm norm;               /* when no epsilon key says */
  guint64 context;           /* max_position_embeddings default of its config class
                              * (0: the key is required) */
  const char *parallel;      /* NULL, or why its blocks run attention and MLP side by side
                              * (noted: the IR costs them one after the other) */
} Family;

/* The defaults are those of transformers' configuration_<type>.py. Phi-3 and Phi-4 are
 * both "phi3"; Falcon's older exports say RefinedWeb / RefinedWebModel. */
static const Family families[] = {
  { "gpt2", FALSE, TRUE, TRUE, TRUE, MP_NORM_LAYERNORM, 0, NULL },
  { "bert", FALSE, TRUE, TRUE, TRUE, MP_NORM_LAYERNORM, 0, NULL },
  { "llama", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL },
  { "mistral", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL },
  { "mixtral", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL },
  { "qwen2", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL },
  { "qwen3", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL },
  { "qwen3_moe", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL },
  { "phi3", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL },
  { "olmo2", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL },
  { "internlm2", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL },
  { "starcoder2", FALSE, FALSE, TRUE, TRUE, MP_NORM_LAYERNORM, 0, NULL },
  { "gptj", FALSE, FALSE, FALSE, TRUE, MP_NORM_LAYERNORM, 0,
    "GPT-J's blocks are parallel (one layernorm feeds attention and MLP)" },
  { "gpt_neox", FALSE, FALSE, FALSE, TRUE, MP_NORM_LAYERNORM, 0, NULL },
  { "falcon", FALSE, FALSE, TRUE, FALSE, MP_NORM_LAYERNORM, 2048, NULL },
  { "RefinedWeb", FALSE, FALSE, TRUE, FALSE, MP_NORM_LAYERNORM, 2048, NULL },
  { "RefinedWebModel", FALSE, FALSE, TRUE, FALSE, MP_NORM_LAYERNORM, 2048, NULL },
};

/* Reading state: the file name for messages, the first problem, notes for stderr. */
typedef struct {
  const char *name;
  JsonObject *root;
  GError *error;
  GPtrArray *notes;
  const MpHfOptions *opts;   /* never NULL */
} Reader;

static void note (Reader *r, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

/* An approximation or choice made, for stderr. */
static void
note (Reader *r, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_ptr_array_add (r->notes, g_strdup_printf ("%s: %s", r->name, msg));
}

static void problem (Reader *r, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

/* Records the first problem only: later keys often fail because of it. */
static void
problem (Reader *r, const char *fmt, ...)
{
  if (r->error != NULL)
    return;
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  r->error = g_error_new (MP_ERROR, MP_ERROR_INPUT, "%s: %s", r->name, msg);
}

/* The first of the NULL-terminated KEYS present with a non-null value, or NULL. */
static JsonNode *
lookup (Reader *r, const char *const *keys, const char **found)
{
  for (guint i = 0; keys[i]; i++)
    {
      JsonNode *n = json_object_get_member (r->root, keys[i]);
      if (n != NULL && !JSON_NODE_HOLDS_NULL (n))
        {
          *found = keys[i];
          return n;
        }
    }
  *found = keys[0];
  return NULL;
}

static const char *
node_type_name (JsonNode *n)
{
  if (JSON_NODE_HOLDS_OBJECT (n))
    return "an object";
  if (JSON_NODE_HOLDS_ARRAY (n))
    return "an array";
  GType t = json_node_get_value_type (n);
  return t == G_TYPE_STRING ? "a string" : t == G_TYPE_BOOLEAN ? "a boolean" : "a number";
}

/* A whole number in [1, MAX] under one of KEYS; *OUT untouched when absent. FALSE when
 * absent (a problem if REQUIRED) or bad. */
static gboolean
get_count (Reader *r, const char *const *keys, gboolean required, guint64 max, guint64 *out)
{
  const char *key;
  JsonNode *n = lookup (r, keys, &key);
  if (n == NULL)
    {
      if (required)
        problem (r, "missing required key '%s'", key);
      return FALSE;
    }
  GType t = JSON_NODE_HOLDS_VALUE (n) ? json_node_get_value_type (n) : G_TYPE_INVALID;
  if (t != G_TYPE_INT64 && t != G_TYPE_DOUBLE)
    {
      problem (r, "'%s' must be a whole number, not %s", key, node_type_name (n));
      return FALSE;
    }
  double x = json_node_get_double (n);
  if (x != floor (x) || x < 1 || x > (double) max)
    {
      problem (r, "'%s' = %g must be a whole number from 1 to %" G_GUINT64_FORMAT, key, x,
               max);
      return FALSE;
    }
  *out = (guint64) x;
  return TRUE;
}

static gboolean
get_dim (Reader *r, const char *const *keys, gboolean required, guint64 *out)
{
  return get_count (r, keys, required, MP_MODEL_MAX_DIM, out);
}

/* A boolean under KEY; DEFAULT when absent. */
static gboolean
get_bool (Reader *r, const char *key, gboolean def)
{
  JsonNode *n = json_object_get_member (r->root, key);
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return def;
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
    {
      problem (r, "'%s' must be true or false, not %s", key, node_type_name (n));
      return def;
    }
  return json_node_get_boolean (n);
}

/* A string under one of KEYS, or NULL when absent (a problem when of another type). */
static const char *
get_string (Reader *r, const char *const *keys)
{
  const char *key;
  JsonNode *n = lookup (r, keys, &key);
  if (n == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    {
      problem (r, "'%s' must be a string, not %s", key, node_type_name (n));
      return NULL;
    }
  return json_node_get_string (n);
}

/* Is KEY present with a value that turns a feature on (a non-zero number, true, a
 * non-empty array or a non-empty string)? */
static gboolean
feature_on (Reader *r, const char *key)
{
  JsonNode *n = json_object_get_member (r->root, key);
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return FALSE;
  if (JSON_NODE_HOLDS_ARRAY (n))
    return json_array_get_length (json_node_get_array (n)) > 0;
  if (JSON_NODE_HOLDS_OBJECT (n))
    return TRUE;
  GType t = json_node_get_value_type (n);
  if (t == G_TYPE_BOOLEAN)
    return json_node_get_boolean (n);
  if (t == G_TYPE_STRING)
    return json_node_get_string (n)[0] != '\0';
  return json_node_get_double (n) != 0;
}

/* Refuses what the IR cannot cost, naming the feature and the key that shows it. */
static void
refuse_unsupported (Reader *r)
{
  static const struct {
    const char *key, *feature;
  } refused[] = {
    { "kv_lora_rank", "multi-head latent attention" },
    { "q_lora_rank", "multi-head latent attention" },
    { "n_shared_experts", "shared experts" },
    { "shared_expert_intermediate_size", "shared experts" },
    { "first_k_dense_replace", "dense layers before the MoE layers" },
    { "mlp_only_layers", "dense layers among the MoE layers" },
    { "is_encoder_decoder", "encoder-decoder models" },
    /* Gemma 2/3: tanh soft-capping of the attention scores and logits, and local
     * (sliding-window) layers interleaved with global ones: the IR has one attention
     * kind for every block. */
    { "attn_logit_softcapping", "attention logit soft-capping" },
    { "final_logit_softcapping", "final logit soft-capping" },
    { "sliding_window_pattern", "interleaved sliding-window and global layers" },
    { "layer_types", "per-layer attention kinds" },
    { "alibi", "ALiBi positions" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (refused); i++)
    if (feature_on (r, refused[i].key))
      {
        problem (r, "unsupported feature: %s (%s)", refused[i].feature, refused[i].key);
        return;
      }
  guint64 step = 1;
  static const char *const step_key[] = { "decoder_sparse_step", NULL };
  if (get_count (r, step_key, FALSE, MP_MODEL_MAX_LAYERS, &step) && step != 1)
    problem (r, "unsupported feature: an MoE layer every %" G_GUINT64_FORMAT " layers "
             "(decoder_sparse_step)", step);
}

static const Family *
find_family (Reader *r)
{
  static const char *const type_key[] = { "model_type", NULL };
  const char *type = get_string (r, type_key);
  if (type == NULL)
    {
      /* Old GPT-2 exports lack model_type; their n_embd says what they are. */
      if (json_object_has_member (r->root, "n_embd"))
        type = "gpt2";
      else
        {
          problem (r, "missing required key 'model_type'");
          return NULL;
        }
    }
  for (gsize i = 0; i < G_N_ELEMENTS (families); i++)
    if (strcmp (type, families[i].type) == 0)
      return &families[i];
  problem (r, "unsupported model_type '%s' (supported: gpt2, llama, mistral, mixtral, "
           "qwen2, qwen3, qwen3_moe, bert, phi3, olmo2, internlm2, starcoder2, gptj, "
           "gpt_neox, falcon)", type);
  return NULL;
}

/* hidden_act / activation_function: silu in a gated family is swiglu; the gelus are
 * gelu (their differences cost nothing); relu is relu. */
static void
read_activation (Reader *r, const Family *f, MpModel *m)
{
  static const char *const keys[] = { "hidden_act", "activation_function", NULL };
  const char *act = get_string (r, keys);
  if (act == NULL)
    act = f->gated ? "silu" : "gelu";
  gboolean silu = strcmp (act, "silu") == 0 || strcmp (act, "swish") == 0;
  gboolean gelu = g_str_has_prefix (act, "gelu");
  if (f->gated && silu)
    m->activation = MP_ACT_SWIGLU;
  else if (!f->gated && gelu)
    m->activation = MP_ACT_GELU;
  else if (!f->gated && strcmp (act, "relu") == 0)
    m->activation = MP_ACT_RELU;
  else
    problem (r, "unsupported feature: activation '%s' in a %s MLP (hidden_act)", act,
             f->gated ? "gated" : "plain");
}

/* Positions: rope keys mean rotary, else the family's kind; norm from the epsilon key. */
static void
read_position_norm (Reader *r, const Family *f, MpModel *m)
{
  gboolean rope = feature_on (r, "rope_theta") || feature_on (r, "rope_parameters")
                  || feature_on (r, "rope_scaling") || feature_on (r, "rotary_emb_base");
  m->position = rope || !f->learned ? MP_POS_ROTARY : MP_POS_LEARNED;
  static const char *const pos_key[] = { "position_embedding_type", NULL };
  const char *pos = get_string (r, pos_key);
  if (pos != NULL && strcmp (pos, "absolute") != 0)
    problem (r, "unsupported feature: %s position embeddings (position_embedding_type)",
             pos);
  if (json_object_has_member (r->root, "rms_norm_eps"))
    m->norm = MP_NORM_RMSNORM;
  else if (json_object_has_member (r->root, "layer_norm_epsilon")
           || json_object_has_member (r->root, "layer_norm_eps")
           || json_object_has_member (r->root, "norm_epsilon"))
    m->norm = MP_NORM_LAYERNORM;
  else
    m->norm = f->norm;
}

/* Experts: num_local_experts (Mixtral) or num_experts (Qwen3-MoE), with top-k. */
static void
read_experts (Reader *r, MpModel *m)
{
  static const char *const n_keys[] = { "num_local_experts", "num_experts",
                                        "n_routed_experts", NULL };
  static const char *const k_keys[] = { "num_experts_per_tok", NULL };
  if (!get_count (r, n_keys, FALSE, MP_MODEL_MAX_EXPERTS, &m->experts))
    return;
  if (get_count (r, k_keys, TRUE, MP_MODEL_MAX_EXPERTS, &m->experts_per_token)
      && m->experts_per_token > m->experts)
    problem (r, "'num_experts_per_tok' = %" G_GUINT64_FORMAT " is more than the %"
             G_GUINT64_FORMAT " experts", m->experts_per_token, m->experts);
}

/* The attention shape: heads, kv heads (GQA), head_dim; with the checks the IR needs. */
static void
read_attention (Reader *r, MpModel *m)
{
  static const char *const heads_keys[] = { "num_attention_heads", "n_head", NULL };
  static const char *const kv_keys[] = { "num_key_value_heads", "num_kv_heads", NULL };
  static const char *const dim_keys[] = { "head_dim", NULL };
  if (!get_dim (r, heads_keys, TRUE, &m->heads))
    return;
  m->kv_heads = m->heads;
  if (get_dim (r, kv_keys, FALSE, &m->kv_heads) && m->heads % m->kv_heads != 0)
    problem (r, "'num_key_value_heads' = %" G_GUINT64_FORMAT " does not divide "
             "'num_attention_heads' = %" G_GUINT64_FORMAT, m->kv_heads, m->heads);
  if (get_dim (r, dim_keys, FALSE, &m->head_dim))
    return;
  if (m->hidden == 0 || m->hidden % m->heads != 0)
    {
      problem (r, "'num_attention_heads' = %" G_GUINT64_FORMAT " does not divide the hidden "
               "size (give head_dim)", m->heads);
      return;
    }
  m->head_dim = m->hidden / m->heads;
}

/* FFN width: per expert for an MoE (moe_intermediate_size before intermediate_size),
 * else intermediate_size or GPT-2's n_inner (null: 4 hidden). */
static void
read_ffn (Reader *r, MpModel *m)
{
  static const char *const moe_keys[] = { "moe_intermediate_size", "intermediate_size",
                                          NULL };
  static const char *const dense_keys[] = { "intermediate_size", "n_inner", "ffn_hidden_size",
                                            NULL };
  const char *const *keys = m->experts > 0 ? moe_keys : dense_keys;
  if (!get_dim (r, keys, FALSE, &m->ffn_hidden) && r->error == NULL)
    {
      if (m->activation == MP_ACT_SWIGLU)
        problem (r, "missing required key '%s'", keys[0]);
      else
        m->ffn_hidden = 4 * m->hidden;
    }
}

/* seq_len: the training length (--seq-len; default the context up to
 * MP_HF_DEFAULT_SEQ_LEN), capped at a sliding window (see the file comment). */
static void
read_seq_len (Reader *r, const Family *f, MpModel *m)
{
  static const char *const keys[] = { "max_position_embeddings", "n_positions", "n_ctx",
                                      NULL };
  static const char *const window_key[] = { "sliding_window", NULL };
  guint64 context = f->context;
  if (!get_dim (r, keys, context == 0 && r->opts->seq_len == 0, &context) && context == 0)
    context = r->opts->seq_len;
  if (r->error != NULL)
    return;
  m->seq_len = r->opts->seq_len;
  if (m->seq_len == 0 && m->position == MP_POS_LEARNED)
    m->seq_len = context;          /* the position table's length: nothing else runs */
  else if (m->seq_len == 0)
    {
      m->seq_len = MIN (context, MP_HF_DEFAULT_SEQ_LEN);
      if (m->seq_len < context)
        note (r, "training length %" G_GUINT64_FORMAT " tokens of the %" G_GUINT64_FORMAT
              "-token context (mpplan's default; --seq-len sets it)", m->seq_len, context);
    }
  else if (m->seq_len > context)
    note (r, "--seq-len %" G_GUINT64_FORMAT " is longer than the model's %" G_GUINT64_FORMAT
          "-token context", m->seq_len, context);
  if (m->position == MP_POS_LEARNED && m->seq_len != context)
    problem (r, "learned positions: the position table has %" G_GUINT64_FORMAT " rows, "
             "so the training length must be that (not %" G_GUINT64_FORMAT ")", context,
             m->seq_len);
  guint64 window = 0;
  if (get_bool (r, "use_sliding_window", TRUE)
      && get_count (r, window_key, FALSE, G_MAXUINT32, &window) && window < m->seq_len)
    {
      note (r, "sliding-window attention (%" G_GUINT64_FORMAT " tokens): seq_len set to "
            "the window, where it costs what full attention costs (asked: %"
            G_GUINT64_FORMAT ")", window, m->seq_len);
      m->seq_len = window;
    }
}

/* rope_theta (rope_parameters.rope_theta in newer files, GPT-NeoX's rotary_emb_base),
 * rounded: StarCoder2 says 999999.44. */
static void
read_rope_theta (Reader *r, MpModel *m)
{
  m->rope_theta = 10000;
  JsonNode *n = json_object_get_member (r->root, "rope_theta");
  if (n == NULL)
    n = json_object_get_member (r->root, "rotary_emb_base");
  JsonNode *params = json_object_get_member (r->root, "rope_parameters");
  if (n == NULL && params != NULL && JSON_NODE_HOLDS_OBJECT (params))
    n = json_object_get_member (json_node_get_object (params), "rope_theta");
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return;
  GType t = JSON_NODE_HOLDS_VALUE (n) ? json_node_get_value_type (n) : G_TYPE_INVALID;
  double x = t == G_TYPE_INT64 || t == G_TYPE_DOUBLE ? json_node_get_double (n) : -1;
  if (x < 1 || x > 1e12)
    problem (r, "'rope_theta' must be a number from 1 to 1e12");
  else
    m->rope_theta = (guint64) llround (x);
}

/* What the IR approximates in the newer families, said on stderr: parallel blocks,
 * rotary on part of each head, QK-norm; and Falcon's multi-query attention. */
static void
read_quirks (Reader *r, const Family *f, MpModel *m)
{
  gboolean falcon = g_str_has_prefix (f->type, "falcon") || g_str_has_prefix (f->type,
                                                                            "RefinedWeb");
  const char *parallel = f->parallel;
  if (falcon && get_bool (r, "parallel_attn", TRUE))
    parallel = "Falcon's blocks are parallel (attention and MLP side by side)";
  if (strcmp (f->type, "gpt_neox") == 0 && get_bool (r, "use_parallel_residual", TRUE))
    parallel = "GPT-NeoX's blocks are parallel (use_parallel_residual)";
  if (parallel != NULL)
    note (r, "%s: costed as attention then MLP, with two norms and two tensor-parallel "
          "reductions per block (a fused implementation needs one); the matrix FLOPs are "
          "the same", parallel);
  if (falcon && !get_bool (r, "new_decoder_architecture", FALSE)
      && get_bool (r, "multi_query", TRUE))
    m->kv_heads = 1;
  static const char *const dim_key[] = { "rotary_dim", NULL };
  guint64 rot = m->head_dim;
  get_dim (r, dim_key, FALSE, &rot);
  const char *frac_keys[] = { "rotary_pct", "partial_rotary_factor" };
  for (gsize i = 0; i < G_N_ELEMENTS (frac_keys); i++)
    {
      JsonNode *n = json_object_get_member (r->root, frac_keys[i]);
      if (n != NULL && JSON_NODE_HOLDS_VALUE (n)
          && json_node_get_value_type (n) == G_TYPE_DOUBLE)
        rot = (guint64) llround (json_node_get_double (n) * (double) m->head_dim);
    }
  if (m->position == MP_POS_ROTARY && rot < m->head_dim)
    note (r, "rotary positions on %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " head "
          "dimensions: costed as on all of them (an elementwise op)", rot, m->head_dim);
  if (strcmp (f->type, "olmo2") == 0)
    note (r, "QK-norm (q_norm, k_norm) left out: 2 x %" G_GUINT64_FORMAT " parameters per "
          "block, an elementwise op", m->heads * m->head_dim);
}

static void
read_training (Reader *r, MpModel *m)
{
  static const char *const dtype_keys[] = { "torch_dtype", "dtype", NULL };
  const char *dtype = get_string (r, dtype_keys);
  m->precision = MP_DTYPE_BF16;
  if (dtype != NULL && strcmp (dtype, "float16") == 0)
    m->precision = MP_DTYPE_FP16;
  else if (dtype != NULL && strcmp (dtype, "float32") == 0)
    m->precision = MP_DTYPE_FP32;
  m->optimizer = MP_OPTIM_ADAM;
  /* --tokens-per-batch, else the YAML loader's default: about 1M tokens per step. */
  guint64 tokens = r->opts->tokens_per_batch ? r->opts->tokens_per_batch
                                             : G_GUINT64_CONSTANT (1) << 20;
  if (tokens < m->seq_len)
    problem (r, "--tokens-per-batch %" G_GUINT64_FORMAT " holds no whole sequence of %"
             G_GUINT64_FORMAT " tokens", tokens, m->seq_len);
  m->global_batch = MAX (1, tokens / MAX (m->seq_len, 1));
}

/* Every hyper-parameter of a transformer; problems in R. */
static void
read_config (Reader *r, MpModel *m)
{
  static const char *const layer_keys[] = { "num_hidden_layers", "n_layer", NULL };
  static const char *const hidden_keys[] = { "hidden_size", "n_embd", NULL };
  static const char *const vocab_keys[] = { "vocab_size", NULL };
  refuse_unsupported (r);
  const Family *f = find_family (r);
  if (f == NULL)
    return;
  m->arch = MP_ARCH_TRANSFORMER;
  get_count (r, layer_keys, TRUE, MP_MODEL_MAX_LAYERS, &m->n_blocks);
  get_dim (r, hidden_keys, TRUE, &m->hidden);
  read_attention (r, m);
  get_dim (r, vocab_keys, TRUE, &m->vocab);
  read_activation (r, f, m);
  read_position_norm (r, f, m);
  read_seq_len (r, f, m);
  read_rope_theta (r, m);
  read_experts (r, m);
  read_ffn (r, m);
  m->tied_embeddings = get_bool (r, "tie_word_embeddings", f->tied);
  /* InternLM2 and Falcon say "bias", StarCoder2 "use_bias". */
  gboolean bias = get_bool (r, "use_bias", get_bool (r, "bias", f->bias));
  gboolean attn_bias = get_bool (r, "attention_bias", bias);
  m->bias = get_bool (r, "mlp_bias", bias) || attn_bias;
  if (r->error == NULL)
    read_quirks (r, f, m);
  if (m->position == MP_POS_ROTARY && m->head_dim % 2 != 0)
    problem (r, "rotary positions need an even head width, not %" G_GUINT64_FORMAT,
             m->head_dim);
  read_training (r, m);
}

/* The model's name: the file's, or its folder's for a hub snapshot's "config.json". */
static char *
name_from_path (const char *path)
{
  g_autofree char *base = g_path_get_basename (path);
  if (strcmp (base, "config.json") == 0)
    {
      g_autofree char *dir = g_path_get_dirname (path);
      g_autofree char *parent = g_path_get_basename (dir);
      if (strcmp (parent, ".") != 0 && strcmp (parent, "/") != 0)
        return g_steal_pointer (&parent);
    }
  char *dot = strrchr (base, '.');
  if (dot != NULL && dot != base)
    *dot = '\0';
  return g_steal_pointer (&base);
}

static MpModel *
load_data (const char *name, const char *data, gsize len, const MpHfOptions *opts,
           GPtrArray *notes, GError **error)
{
  g_return_val_if_fail (name != NULL && data != NULL, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  GError *parse_error = NULL;
  if (!json_parser_load_from_data (parser, data, (gssize) len, &parse_error))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s: not valid JSON: %s", name,
                   parse_error->message);
      g_error_free (parse_error);
      return NULL;
    }
  JsonNode *root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s: a config.json must be one JSON "
                   "object", name);
      return NULL;
    }
  g_autoptr(GPtrArray) own_notes = g_ptr_array_new_with_free_func (g_free);
  static const MpHfOptions defaults = { 0 };
  Reader r = { name, json_node_get_object (root), NULL, notes ? notes : own_notes,
               opts ? opts : &defaults };
  g_autoptr(MpModel) m = g_new0 (MpModel, 1);
  read_config (&r, m);
  if (r.error != NULL)
    {
      g_propagate_error (error, r.error);
      return NULL;
    }
  m->name = name_from_path (name);
  m->source = g_strdup (name);
  mp_model_build_ir (m);
  return g_steal_pointer (&m);
}

MpModel *
mp_model_load_hf_data (const char *name, const char *data, gsize len, GPtrArray *notes,
                       GError **error)
{
  return load_data (name, data, len, NULL, notes, error);
}

MpModel *
mp_model_load_hf (const char *path, GPtrArray *notes, GError **error)
{
  return mp_model_load_hf_with (path, NULL, notes, error);
}

MpModel *
mp_model_load_hf_with (const char *path, const MpHfOptions *opts, GPtrArray *notes,
                       GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_autofree char *data = NULL;
  gsize len;
  GError *io = NULL;
  if (!g_file_get_contents (path, &data, &len, &io))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_IO, "%s", io->message);
      g_error_free (io);
      return NULL;
    }
  return load_data (path, data, len, opts, notes, error);
}

gboolean
mp_model_file_is_hf (const char *path)
{
  if (g_str_has_suffix (path, ".json"))
    return TRUE;
  /* Otherwise by content: a JSON object, not a YAML document. */
  FILE *f = fopen (path, "r");
  if (f == NULL)
    return FALSE;
  int c;
  while ((c = fgetc (f)) != EOF && g_ascii_isspace (c))
    ;
  fclose (f);
  return c == '{';
}

/* ---- model -> YAML ---------------------------------------------------------------- */

static void
append_transformer (GString *s, const MpModel *m)
{
  g_string_append_printf (s, "architecture: transformer\nlayers: %" G_GUINT64_FORMAT
                          "\nhidden: %" G_GUINT64_FORMAT "\nheads: %" G_GUINT64_FORMAT
                          "\nkv_heads: %" G_GUINT64_FORMAT "\nhead_dim: %" G_GUINT64_FORMAT
                          "\nffn_hidden: %" G_GUINT64_FORMAT "\nvocab: %" G_GUINT64_FORMAT
                          "\nseq_len: %" G_GUINT64_FORMAT "\n",
                          m->n_blocks, m->hidden, m->heads, m->kv_heads, m->head_dim,
                          m->ffn_hidden, m->vocab, m->seq_len);
  g_string_append_printf (s, "activation: %s\nnorm: %s\nposition: %s\nbias: %s\n"
                          "tied_embeddings: %s\n",
                          mp_activation_name (m->activation), mp_model_norm_name (m->norm),
                          mp_model_position_name (m->position), m->bias ? "true" : "false",
                          m->tied_embeddings ? "true" : "false");
  if (m->position == MP_POS_ROTARY)
    g_string_append_printf (s, "rope_theta: %" G_GUINT64_FORMAT "\n", m->rope_theta);
  if (m->experts > 0)
    g_string_append_printf (s, "experts: %" G_GUINT64_FORMAT "\nexperts_per_token: %"
                            G_GUINT64_FORMAT "\n", m->experts, m->experts_per_token);
}

static void
append_mlp (GString *s, const MpModel *m)
{
  g_string_append_printf (s, "architecture: mlp\ninput: %" G_GUINT64_FORMAT "\nbias: %s\n"
                          "layers:\n", m->input, m->bias ? "true" : "false");
  for (guint i = 0; i < m->n_mlp_layers; i++)
    g_string_append_printf (s, "  - {out: %" G_GUINT64_FORMAT ", activation: %s}\n",
                            m->mlp_layers[i].out,
                            mp_activation_name (m->mlp_layers[i].activation));
}

char *
mp_model_to_yaml (const MpModel *m, const char *comment)
{
  g_return_val_if_fail (m != NULL, NULL);
  GString *s = g_string_new (NULL);
  if (comment != NULL)
    {
      g_auto (GStrv) lines = g_strsplit (comment, "\n", -1);
      for (guint i = 0; lines[i]; i++)
        g_string_append_printf (s, "# %s\n", lines[i]);
    }
  /* Quoted: a name like "1.3b" or "yes" must stay a string. */
  g_autofree char *name = g_strescape (m->name, NULL);
  g_string_append_printf (s, "name: \"%s\"\n", name);
  if (m->arch == MP_ARCH_TRANSFORMER)
    append_transformer (s, m);
  else
    append_mlp (s, m);
  g_string_append_printf (s, "training:\n  global_batch: %" G_GUINT64_FORMAT
                          "\n  precision: %s\n  optimizer: %s\n",
                          m->global_batch, mp_dtype_name (m->precision),
                          mp_model_optimizer_name (m->optimizer));
  return g_string_free (s, FALSE);
}
