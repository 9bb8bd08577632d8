/* model-hf.c - a Hugging Face config.json -> checked hyper-parameters -> the IR; and any
 * model back to the model YAML of examples/models (what `mpplan import hf` prints).
 *
 * Families read: gpt2, llama (2 and 3), mistral, mixtral, qwen2, qwen3, qwen3_moe, bert,
 * qwen2_moe, deepseek_v2 / deepseek_v3 (their MoE side), gpt_oss (its experts),
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
 *    attention (q_lora_rank / kv_lora_rank), interleaved dense layers in an MoE
 *    (decoder_sparse_step or moe_layer_freq != 1, mlp_only_layers), encoder-decoder
 *    models. Shared experts (n_shared_experts, shared_expert_intermediate_size) and dense
 *    first layers (first_k_dense_replace) are read (moe14).
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
  gboolean bias;             /* biases when no attention_bias / mlp_bias key */
  MpNorm norm;               /* when no epsilon key says */
} Family;

static const Family families[] = {
  { "gpt2", FALSE, TRUE, TRUE, TRUE, MP_NORM_LAYERNORM },
  { "bert", FALSE, TRUE, TRUE, TRUE, MP_NORM_LAYERNORM },
  { "llama", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM },
  { "mistral", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM },
  { "mixtral", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM },
  { "qwen2", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM },
  { "qwen3", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM },
  { "qwen3_moe", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM },
  /* MoE (moe14) */
  { "qwen2_moe", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM },
  { "deepseek_v2", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM },
  { "deepseek_v3", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM },
  { "gpt_oss", TRUE, FALSE, FALSE, TRUE, MP_NORM_RMSNORM },
};

/* Reading state: the file name for messages, the first problem, notes for stderr. */
typedef struct {
  const char *name;
  JsonObject *root;
  GError *error;
  GPtrArray *notes;
} Reader;

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
    { "mlp_only_layers", "dense layers among the MoE layers" },
    { "is_encoder_decoder", "encoder-decoder models" },
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
  /* GPT-OSS alternates sliding-window and full layers; until the IR holds per-layer
   * windows (ir14) that is refused rather than costed as one window. */
  JsonNode *types = json_object_get_member (r->root, "layer_types");
  if (types != NULL && JSON_NODE_HOLDS_ARRAY (types))
    {
      JsonArray *a = json_node_get_array (types);
      for (guint i = 0; i < json_array_get_length (a); i++)
        {
          JsonNode *t = json_array_get_element (a, i);
          if (JSON_NODE_HOLDS_VALUE (t) && json_node_get_value_type (t) == G_TYPE_STRING
              && strcmp (json_node_get_string (t), "sliding_attention") == 0)
            {
              problem (r, "unsupported feature: alternating sliding-window and full "
                       "attention layers (layer_types)");
              return;
            }
        }
    }
  static const char *const freq_key[] = { "moe_layer_freq", NULL };
  if (get_count (r, freq_key, FALSE, MP_MODEL_MAX_LAYERS, &step) && step != 1)
    problem (r, "unsupported feature: an MoE layer every %" G_GUINT64_FORMAT " layers "
             "(moe_layer_freq)", step);
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
           "qwen2, qwen3, qwen3_moe, qwen2_moe, deepseek_v2, deepseek_v3, gpt_oss, bert)",
           type);
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
                  || feature_on (r, "rope_scaling");
  m->position = rope || !f->learned ? MP_POS_ROTARY : MP_POS_LEARNED;
  static const char *const pos_key[] = { "position_embedding_type", NULL };
  const char *pos = get_string (r, pos_key);
  if (pos != NULL && strcmp (pos, "absolute") != 0)
    problem (r, "unsupported feature: %s position embeddings (position_embedding_type)",
             pos);
  if (json_object_has_member (r->root, "rms_norm_eps"))
    m->norm = MP_NORM_RMSNORM;
  else if (json_object_has_member (r->root, "layer_norm_epsilon")
           || json_object_has_member (r->root, "layer_norm_eps"))
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
  static const char *const k_keys[] = { "num_experts_per_tok", "experts_per_token", NULL };
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
  static const char *const kv_keys[] = { "num_key_value_heads", NULL };
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
  static const char *const dense_keys[] = { "intermediate_size", "n_inner", NULL };
  const char *const *keys = m->experts > 0 ? moe_keys : dense_keys;
  if (!get_dim (r, keys, FALSE, &m->ffn_hidden) && r->error == NULL)
    {
      if (m->activation == MP_ACT_SWIGLU)
        problem (r, "missing required key '%s'", keys[0]);
      else
        m->ffn_hidden = 4 * m->hidden;
    }
}

/* MoE (moe14): shared experts (DeepSeek n_shared_experts of moe_intermediate_size;
 * Qwen2-MoE one of shared_expert_intermediate_size) and DeepSeek's dense first blocks
 * (first_k_dense_replace, of intermediate_size: then ffn_hidden is the dense width and
 * moe_ffn_hidden the expert's). Routed scaling, group-limited routing and the score
 * function change no cost and are not read. */
static void
read_moe (Reader *r, MpModel *m)
{
  static const char *const n_shared_key[] = { "n_shared_experts", NULL };
  static const char *const qwen_shared_key[] = { "shared_expert_intermediate_size", NULL };
  static const char *const dense_key[] = { "first_k_dense_replace", NULL };
  static const char *const dense_ffn_key[] = { "intermediate_size", NULL };
  if (m->experts == 0 || r->error != NULL)
    return;
  m->moe_ffn_hidden = m->ffn_hidden;
  if (feature_on (r, "n_shared_experts")
      && get_count (r, n_shared_key, FALSE, MP_MODEL_MAX_EXPERTS, &m->shared_experts))
    m->shared_expert_ffn = m->moe_ffn_hidden;
  else if (feature_on (r, "shared_expert_intermediate_size")
           && get_dim (r, qwen_shared_key, FALSE, &m->shared_expert_ffn))
    m->shared_experts = 1;
  if (feature_on (r, "first_k_dense_replace")
      && get_count (r, dense_key, FALSE, MP_MODEL_MAX_LAYERS, &m->first_k_dense))
    {
      if (m->first_k_dense >= m->n_blocks)
        problem (r, "'first_k_dense_replace' = %" G_GUINT64_FORMAT " leaves none of the %"
                 G_GUINT64_FORMAT " layers an MoE one", m->first_k_dense, m->n_blocks);
      else
        get_dim (r, dense_ffn_key, TRUE, &m->ffn_hidden);
    }
}

/* seq_len: the context, capped at a sliding window (see the file comment). */
static void
read_seq_len (Reader *r, MpModel *m)
{
  static const char *const keys[] = { "max_position_embeddings", "n_positions", "n_ctx",
                                      NULL };
  static const char *const window_key[] = { "sliding_window", NULL };
  if (!get_dim (r, keys, TRUE, &m->seq_len))
    return;
  guint64 window = 0;
  if (get_bool (r, "use_sliding_window", TRUE)
      && get_count (r, window_key, FALSE, G_MAXUINT32, &window) && window < m->seq_len)
    {
      g_ptr_array_add (r->notes, g_strdup_printf (
          "%s: sliding-window attention (%" G_GUINT64_FORMAT " tokens): seq_len set to the "
          "window, where it costs what full attention costs (the context is %"
          G_GUINT64_FORMAT ")", r->name, window, m->seq_len));
      m->seq_len = window;
    }
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
  /* The YAML loader's default: about 1M tokens per step. */
  m->global_batch = MAX (1, (G_GUINT64_CONSTANT (1) << 20) / MAX (m->seq_len, 1));
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
  read_seq_len (r, m);
  read_activation (r, f, m);
  read_position_norm (r, f, m);
  read_experts (r, m);
  read_ffn (r, m);
  read_moe (r, m);
  m->tied_embeddings = get_bool (r, "tie_word_embeddings", f->tied);
  gboolean attn_bias = get_bool (r, "attention_bias", f->bias);
  m->bias = get_bool (r, "mlp_bias", f->bias) || attn_bias;
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

MpModel *
mp_model_load_hf_data (const char *name, const char *data, gsize len, GPtrArray *notes,
                       GError **error)
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
  Reader r = { name, json_node_get_object (root), NULL, notes ? notes : own_notes };
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
mp_model_load_hf (const char *path, GPtrArray *notes, GError **error)
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
  return mp_model_load_hf_data (path, data, len, notes, error);
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

/* MoE (moe14): the keys that differ from their defaults. */
static void
append_moe (GString *s, const MpModel *m)
{
  if (m->moe_ffn_hidden != m->ffn_hidden)
    g_string_append_printf (s, "moe_ffn_hidden: %" G_GUINT64_FORMAT "\n", m->moe_ffn_hidden);
  if (m->shared_experts > 0)
    g_string_append_printf (s, "shared_experts: %" G_GUINT64_FORMAT "\nshared_expert_ffn: %"
                            G_GUINT64_FORMAT "\n", m->shared_experts, m->shared_expert_ffn);
  if (m->first_k_dense > 0)
    g_string_append_printf (s, "first_k_dense: %" G_GUINT64_FORMAT "\n", m->first_k_dense);
  if (m->capacity_factor > 0)
    g_string_append_printf (s, "capacity_factor: %.17g\n", m->capacity_factor);
  if (m->load_imbalance > 1)
    g_string_append_printf (s, "load_imbalance: %.17g\n", m->load_imbalance);
}

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
  if (m->experts > 0)
    g_string_append_printf (s, "experts: %" G_GUINT64_FORMAT "\nexperts_per_token: %"
                            G_GUINT64_FORMAT "\n", m->experts, m->experts_per_token);
  if (m->experts > 0)
    append_moe (s, m);
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
