/* model-hf.c - a Hugging Face config.json -> checked hyper-parameters -> the IR; and any
 * model back to the model YAML of examples/models (what `mpplan import hf` prints).
 *
 * Families read: gpt2, llama (2 and 3), mistral, mixtral, qwen2, qwen3, qwen3_moe, bert,
 * gemma2, gemma3 (its text_config), gpt_oss, deepseek_v2, deepseek_v3, qwen2_moe, with the
 * key aliases of transformers' configuration_*.py (ECOSYSTEM.md 2.1): GPT-2's
 * n_layer / n_embd / n_head / n_inner / n_positions, num_key_value_heads (absent or null:
 * multi-head), head_dim (null: hidden / heads), MoE widths (Mixtral: intermediate_size
 * per expert; Qwen3-MoE: moe_intermediate_size), num_local_experts or num_experts,
 * num_experts_per_tok, tie_word_embeddings, attention_bias / mlp_bias, hidden_act or
 * activation_function, rms_norm_eps vs layer_norm_epsilon / layer_norm_eps, rope_theta /
 * rope_scaling / rope_parameters, max_position_embeddings, vocab_size, torch_dtype.
 *
 * Decisions (each also in --help and docs/mpplan.1):
 *  - What mpplan cannot cost is refused by name, never dropped: interleaved dense layers
 *    in an MoE (decoder_sparse_step or moe_layer_freq != 1, mlp_only_layers), chunked
 *    attention layers, encoder-decoder models. Shared experts (n_shared_experts,
 *    shared_expert_intermediate_size) and dense first layers (first_k_dense_replace) are
 *    read (moe14).
 *  - Attention as the families' modeling code builds it (ir14): sliding_window is real
 *    windowed attention (Mistral v0.1: 4096 of 32768) on the blocks layer_types (or the
 *    family's period, Gemma 2: every other block, Gemma 3: 5 of 6, GPT-OSS: every other)
 *    makes windowed; a window covering the training length is full attention (a note
 *    says so). Multi-head latent attention from kv_lora_rank, q_lora_rank (null: direct
 *    q), qk_nope_head_dim, qk_rope_head_dim, v_head_dim. Qwen3 and Gemma 3 normalise q
 *    and k per head; Qwen2 and Qwen2-MoE bias q, k, v only; GPT-OSS has a sink per head; Gemma 2/3
 *    scale the embeddings, normalise the attention and MLP outputs, and (2) soft-cap
 *    scores and logits. query_pre_attn_scalar only changes a scale: it costs nothing.
 *  - attention_bias sets the attention projections' biases, mlp_bias the MLP's (and the
 *    router's).
 *  - Gemma 3's vision tower (vision_config) is left out with a note: the text decoder
 *    (text_config) is the model. So is DeepSeek-V3's multi-token-prediction module
 *    (num_nextn_predict_layers): the 61 blocks of its 671B are the model. Qwen2-MoE's
 *    shared-expert gate (one scalar per token and block) is not counted.
 *  - BERT's token-type embeddings, pooler and MLM transform (~2M) are left out, as in
 *    examples/models/bert-large.yaml. */
#define G_LOG_DOMAIN "mpplan-model"
#include "config.h"
#include "model/model-private.h"
#include "common/error.h"
#include "common/jsonread.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  const char *type;          /* model_type */
  gboolean gated;            /* silu means a gated (swiglu) MLP, gelu geglu */
  gboolean learned;          /* learned positions (no rope keys) */
  gboolean tied;             /* tie_word_embeddings default of its config class */
  gboolean bias;             /* biases when no attention_bias / mlp_bias / bias key */
  MpNorm norm;               /* when no epsilon key says */
  guint64 context;           /* max_position_embeddings default of its config class
                              * (0: the key is required) */
  const char *parallel;      /* NULL, or why its blocks run attention and MLP side by side
                              * (noted: the IR costs them one after the other) */
  /* attention (ir14); NULL for families with none of it. */
  const struct _HfAttention *attn;
} Family;

/* What an attention-side family's modeling_*.py builds beyond its config keys (ir14). */
typedef struct _HfAttention {
  MpAttnBias bias;           /* attention biases when no attention_bias key */
  gboolean qk_norm;          /* q_norm / k_norm per head (Qwen3, Gemma 3) */
  gboolean gemma;            /* post-norms and sqrt(hidden)-scaled embeddings */
  gboolean sinks;            /* a learned sink per head (GPT-OSS) */
  guint period;              /* a full-attention block every PERIOD blocks (Gemma 2: 2,
                              * Gemma 3: 6), the others windowed; 0: all windowed */
  guint64 vocab;             /* vocab_size default, 0: the key is required */
} HfAttention;

static const HfAttention qwen2_attn = { MP_ATTN_BIAS_QKV, FALSE, FALSE, FALSE, 0, 0 };
static const HfAttention qwen3_attn = { MP_ATTN_BIAS_AS_MODEL, TRUE, FALSE, FALSE, 0, 0 };
/* Gemma2Config / Gemma3TextConfig defaults (transformers 4.50). */
static const HfAttention gemma2_attn = { MP_ATTN_BIAS_AS_MODEL, FALSE, TRUE, FALSE, 2, 256000 };
static const HfAttention gemma3_attn = { MP_ATTN_BIAS_AS_MODEL, TRUE, TRUE, FALSE, 6, 262208 };
static const HfAttention gpt_oss_attn = { MP_ATTN_BIAS_AS_MODEL, FALSE, FALSE, TRUE, 2, 0 };

/* The defaults are those of transformers' configuration_<type>.py. Phi-3 and Phi-4 are
 * both "phi3"; Falcon's older exports say RefinedWeb / RefinedWebModel. */
static const Family families[] = {
  { "gpt2", FALSE, TRUE, TRUE, TRUE, MP_NORM_LAYERNORM, 0, NULL, NULL },
  { "bert", FALSE, TRUE, TRUE, TRUE, MP_NORM_LAYERNORM, 0, NULL, NULL },
  { "llama", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, NULL },
  { "mistral", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, NULL },
  { "mixtral", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, NULL },
  { "qwen2", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, &qwen2_attn },
  { "qwen3", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, &qwen3_attn },
  { "qwen3_moe", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, &qwen3_attn },
  { "gemma2", TRUE, FALSE, TRUE, FALSE, MP_NORM_RMSNORM, 8192, NULL, &gemma2_attn },
  { "gemma3_text", TRUE, FALSE, TRUE, FALSE, MP_NORM_RMSNORM, 131072, NULL, &gemma3_attn },
  { "gemma3", TRUE, FALSE, TRUE, FALSE, MP_NORM_RMSNORM, 131072, NULL, &gemma3_attn },
  { "gpt_oss", TRUE, FALSE, FALSE, TRUE, MP_NORM_RMSNORM, 0, NULL, &gpt_oss_attn },
  { "qwen2_moe", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, &qwen2_attn },
  { "deepseek_v2", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, NULL },
  { "deepseek_v3", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, NULL },
  { "phi3", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, NULL },
  { "olmo2", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, NULL },
  { "internlm2", TRUE, FALSE, FALSE, FALSE, MP_NORM_RMSNORM, 0, NULL, NULL },
  { "starcoder2", FALSE, FALSE, TRUE, TRUE, MP_NORM_LAYERNORM, 0, NULL, NULL },
  { "gptj", FALSE, FALSE, FALSE, TRUE, MP_NORM_LAYERNORM, 0,
    "GPT-J's blocks are parallel (one layernorm feeds attention and MLP)", NULL },
  { "gpt_neox", FALSE, FALSE, FALSE, TRUE, MP_NORM_LAYERNORM, 0, NULL, NULL },
  { "falcon", FALSE, FALSE, TRUE, FALSE, MP_NORM_LAYERNORM, 2048, NULL, NULL },
  { "RefinedWeb", FALSE, FALSE, TRUE, FALSE, MP_NORM_LAYERNORM, 2048, NULL, NULL },
  { "RefinedWebModel", FALSE, FALSE, TRUE, FALSE, MP_NORM_LAYERNORM, 2048, NULL, NULL },
};

/* Reading state: the file name for messages, the first problem (common/jsonread.h), notes
 * for stderr. */
typedef struct {
  const char *name;
  JsonObject *root;
  MpJsonReader json;
  GPtrArray *notes;
  const MpHfOptions *opts;   /* never NULL */
  JsonObject *top;           /* the file's object (ROOT may be its text_config) */
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
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  mp_json_problem (&r->json, NULL, "%s", msg);
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
  return mp_json_node_uint (&r->json, n, key, 1, max, out);
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
  gboolean v = def;
  mp_json_node_bool (&r->json, n, key, &v);
  return v;
}

/* A string under one of KEYS, or NULL when absent (a problem when of another type). */
static const char *
get_string (Reader *r, const char *const *keys)
{
  const char *key;
  JsonNode *n = lookup (r, keys, &key);
  return n ? mp_json_node_string (&r->json, n, key) : NULL;
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

/* ---- the type of every key read ------------------------------------------------- */

#define HF_STRING(k) { k, MP_JSON_STRING, 0, 0 }
#define HF_BOOL(k) { k, MP_JSON_BOOL, 0, 0 }
#define HF_DIM(k) { k, MP_JSON_WHOLE, 1, MP_MODEL_MAX_DIM }
#define HF_LAYERS(k, lo) { k, MP_JSON_WHOLE, lo, MP_MODEL_MAX_LAYERS }
#define HF_EXPERTS(k, lo) { k, MP_JSON_WHOLE, lo, MP_MODEL_MAX_EXPERTS }

/* Every key this reader looks at, with its type and the widest range a real config.json
 * holds, so that a wrong value is refused whether or not the key is used afterwards: an
 * alias behind another (GPT-2's n_ctx behind n_positions, intermediate_size behind
 * moe_intermediate_size), a window use_sliding_window turns off, an epsilon whose
 * presence alone names the norm. null is absent; 0 is allowed where configs write it
 * for "none" (first_k_dense_replace, n_shared_experts, ...). Epsilons are added to a
 * variance of order 1 (real ones 1e-12 to 1e-5), rotary fractions are of a head, rope
 * bases end at read_rope_theta's 1e12, soft-caps (Gemma 2: 30, 50) at 1e6, where tanh
 * capping no longer caps anything. */
static const MpJsonKey hf_keys[] = {
  HF_STRING ("model_type"), HF_STRING ("hidden_activation"), HF_STRING ("hidden_act"),
  HF_STRING ("activation_function"), HF_STRING ("position_embedding_type"),
  HF_STRING ("torch_dtype"), HF_STRING ("dtype"),
  HF_BOOL ("tie_word_embeddings"), HF_BOOL ("use_bias"), HF_BOOL ("bias"),
  HF_BOOL ("mlp_bias"), HF_BOOL ("attention_bias"), HF_BOOL ("use_sliding_window"),
  HF_BOOL ("parallel_attn"), HF_BOOL ("use_parallel_residual"),
  HF_BOOL ("new_decoder_architecture"), HF_BOOL ("multi_query"),
  HF_LAYERS ("num_hidden_layers", 1), HF_LAYERS ("n_layer", 1),
  HF_LAYERS ("decoder_sparse_step", 1), HF_LAYERS ("moe_layer_freq", 1),
  HF_LAYERS ("sliding_window_pattern", 1), HF_LAYERS ("max_window_layers", 0),
  HF_LAYERS ("first_k_dense_replace", 0), HF_LAYERS ("num_nextn_predict_layers", 0),
  HF_DIM ("hidden_size"), HF_DIM ("n_embd"), HF_DIM ("num_attention_heads"),
  HF_DIM ("n_head"), HF_DIM ("num_key_value_heads"), HF_DIM ("num_kv_heads"),
  HF_DIM ("head_dim"), HF_DIM ("vocab_size"), HF_DIM ("intermediate_size"),
  HF_DIM ("n_inner"), HF_DIM ("ffn_hidden_size"), HF_DIM ("moe_intermediate_size"),
  HF_DIM ("kv_lora_rank"), HF_DIM ("q_lora_rank"), HF_DIM ("qk_nope_head_dim"),
  HF_DIM ("qk_rope_head_dim"), HF_DIM ("v_head_dim"), HF_DIM ("rotary_dim"),
  HF_DIM ("max_position_embeddings"), HF_DIM ("n_positions"), HF_DIM ("n_ctx"),
  { "shared_expert_intermediate_size", MP_JSON_WHOLE, 0, MP_MODEL_MAX_DIM },
  { "sliding_window", MP_JSON_WHOLE, 0, G_MAXUINT32 },
  HF_EXPERTS ("num_local_experts", 1), HF_EXPERTS ("num_experts", 1),
  HF_EXPERTS ("n_routed_experts", 1), HF_EXPERTS ("num_experts_per_tok", 1),
  HF_EXPERTS ("experts_per_token", 1), HF_EXPERTS ("n_shared_experts", 0),
  { "rms_norm_eps", MP_JSON_ABOVE, 0, 1 }, { "layer_norm_epsilon", MP_JSON_ABOVE, 0, 1 },
  { "layer_norm_eps", MP_JSON_ABOVE, 0, 1 }, { "norm_epsilon", MP_JSON_ABOVE, 0, 1 },
  { "rope_theta", MP_JSON_ABOVE, 0, 1e12 }, { "rotary_emb_base", MP_JSON_ABOVE, 0, 1e12 },
  { "rope_parameters", MP_JSON_OBJECT, 0, 0 },
  { "rope_parameters.rope_theta", MP_JSON_ABOVE, 0, 1e12 },
  { "rotary_pct", MP_JSON_ABOVE, 0, 1 }, { "partial_rotary_factor", MP_JSON_ABOVE, 0, 1 },
  { "attn_logit_softcapping", MP_JSON_ABOVE, 0, 1e6 },
  { "final_logit_softcapping", MP_JSON_ABOVE, 0, 1e6 },
  { "rope_scaling", MP_JSON_OBJECT, 0, 0 }, { "text_config", MP_JSON_OBJECT, 0, 0 },
  { "vision_config", MP_JSON_OBJECT, 0, 0 }, { "layer_types", MP_JSON_STRINGS, 0, 0 },
};

/* Every key of hf_keys present in O (at WHERE, NULL: the top) has its type and range. */
static void
check_types (Reader *r, JsonObject *o, const char *where)
{
  mp_json_check_keys (&r->json, o, where, hf_keys, G_N_ELEMENTS (hf_keys));
}

/* Refuses what the IR cannot cost, naming the feature and the key that shows it. */
static void
refuse_unsupported (Reader *r)
{
  static const struct {
    const char *key, *feature;
  } refused[] = {

    { "mlp_only_layers", "dense layers among the MoE layers" },
    { "is_encoder_decoder", "encoder-decoder models" },
    { "alibi", "ALiBi positions" },
  };
  /* Their types first (before the family, like the refusals): an object is no list. */
  static const MpJsonKey types[] = {
    { "mlp_only_layers", MP_JSON_WHOLES, 0, MP_MODEL_MAX_LAYERS },
    { "is_encoder_decoder", MP_JSON_BOOL, 0, 0 }, { "alibi", MP_JSON_BOOL, 0, 0 },
  };
  mp_json_check_keys (&r->json, r->root, NULL, types, G_N_ELEMENTS (types));
  for (gsize i = 0; i < G_N_ELEMENTS (refused) && r->json.error == NULL; i++)
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
           "qwen2, qwen3, qwen3_moe, qwen2_moe, bert, gemma2, gemma3, gpt_oss, deepseek_v2, "
           "deepseek_v3, phi3, olmo2, internlm2, starcoder2, gptj, gpt_neox, falcon)", type);
  return NULL;
}

/* hidden_act / activation_function: silu in a gated family is swiglu; the gelus are
 * gelu (their differences cost nothing); relu is relu. */
static void
read_activation (Reader *r, const Family *f, MpModel *m)
{
  static const char *const keys[] = { "hidden_activation", "hidden_act", "activation_function",
                                      NULL };
  const char *act = get_string (r, keys);
  if (act == NULL)
    act = f->attn && f->attn->gemma ? "gelu_pytorch_tanh" : f->gated ? "silu" : "gelu";
  gboolean silu = strcmp (act, "silu") == 0 || strcmp (act, "swish") == 0;
  gboolean gelu = g_str_has_prefix (act, "gelu");
  if (f->gated && silu)
    m->activation = MP_ACT_SWIGLU;
  else if (f->gated && gelu)
    m->activation = MP_ACT_GEGLU;       /* Gemma's gelu_pytorch_tanh gate */
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
  static const char *const k_keys[] = { "num_experts_per_tok", "experts_per_token", NULL };
  if (!get_count (r, n_keys, FALSE, MP_MODEL_MAX_EXPERTS, &m->experts))
    return;
  if (get_count (r, k_keys, TRUE, MP_MODEL_MAX_EXPERTS, &m->experts_per_token)
      && m->experts_per_token > m->experts)
    problem (r, "'num_experts_per_tok' = %" G_GUINT64_FORMAT " is more than the %"
             G_GUINT64_FORMAT " experts", m->experts_per_token, m->experts);
}

/* A positive number under KEY (soft-capping values), 0 when absent or null. */
static double
get_positive (Reader *r, const char *key)
{
  JsonNode *n = json_object_get_member (r->root, key);
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return 0;
  GType t = JSON_NODE_HOLDS_VALUE (n) ? json_node_get_value_type (n) : G_TYPE_INVALID;
  if ((t != G_TYPE_INT64 && t != G_TYPE_DOUBLE) || !(json_node_get_double (n) > 0))
    {
      problem (r, "'%s' must be a positive number or null", key);
      return 0;
    }
  return json_node_get_double (n);
}

/* Trained without dropout unless a residual or embedding dropout rate above 0 is set
 * (GPT-2's resid_pdrop and embd_pdrop, BERT's hidden_dropout_prob, Falcon's hidden_dropout,
 * StarCoder2's residual_dropout and embedding_dropout, OPT's dropout): Llama-family configs carry only attention_dropout, and their models apply
 * no dropout to the residual stream. */
static void
read_dropout (Reader *r, MpModel *m)
{
  static const char *const keys[] = { "resid_pdrop", "embd_pdrop", "hidden_dropout",
                                      "hidden_dropout_prob", "residual_dropout",
                                      "embedding_dropout", "dropout", NULL };
  m->no_dropout = TRUE;
  for (guint i = 0; keys[i] != NULL; i++)
    {
      JsonNode *n = json_object_get_member (r->root, keys[i]);
      GType t = n != NULL && JSON_NODE_HOLDS_VALUE (n) ? json_node_get_value_type (n)
                                                       : G_TYPE_INVALID;
      if ((t == G_TYPE_INT64 || t == G_TYPE_DOUBLE) && json_node_get_double (n) > 0)
        m->no_dropout = FALSE;
    }
}

/* Multi-head latent attention (DeepSeek-V2/V3, ir14): kv_lora_rank turns it on;
 * q_lora_rank null means q is projected directly (V2-Lite); the head widths are required.
 * K and V are per head: kv_heads = heads, whatever num_key_value_heads says. */
static gboolean
read_mla (Reader *r, MpModel *m)
{
  static const char *const kv_key[] = { "kv_lora_rank", NULL };
  static const char *const q_key[] = { "q_lora_rank", NULL };
  static const char *const nope_key[] = { "qk_nope_head_dim", NULL };
  static const char *const rope_key[] = { "qk_rope_head_dim", NULL };
  static const char *const v_key[] = { "v_head_dim", NULL };
  guint64 kv = 0;
  if (!get_dim (r, kv_key, FALSE, &kv))
    return FALSE;
  get_dim (r, q_key, FALSE, &m->q_lora_rank);
  if (get_dim (r, nope_key, TRUE, &m->qk_nope_head_dim)
      && get_dim (r, rope_key, TRUE, &m->qk_rope_head_dim)
      && get_dim (r, v_key, TRUE, &m->v_head_dim))
    {
      m->kv_lora_rank = kv;
      m->kv_heads = m->heads;
      m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
    }
  return TRUE;
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
  if (read_mla (r, m))
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

/* The smallest period P with types[i] == types[i % P]: a short pattern for the YAML. */
static guint
pattern_period (const gboolean *types, guint n)
{
  for (guint p = 1; p < n; p++)
    {
      guint i = p;
      while (i < n && types[i] == types[i % p])
        i++;
      if (i == n)
        return p;
    }
  return n;
}

/* layer_types (transformers >= 4.53): "sliding_attention" / "full_attention" per block,
 * into a pattern; TRUE when the key was there. */
static gboolean
read_layer_types (Reader *r, MpModel *m)
{
  JsonNode *n = json_object_get_member (r->root, "layer_types");
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return FALSE;
  JsonArray *a = JSON_NODE_HOLDS_ARRAY (n) ? json_node_get_array (n) : NULL;
  guint len = a ? json_array_get_length (a) : 0;
  if (a == NULL || len != m->n_blocks)
    {
      problem (r, "'layer_types' must be a list of one kind per layer (%" G_GUINT64_FORMAT ")",
               m->n_blocks);
      return TRUE;
    }
  g_autofree gboolean *types = g_new0 (gboolean, len);
  for (guint i = 0; i < len; i++)
    {
      JsonNode *e = json_array_get_element (a, i);
      const char *t = JSON_NODE_HOLDS_VALUE (e) && json_node_get_value_type (e) == G_TYPE_STRING
                      ? json_node_get_string (e) : "";
      if (strcmp (t, "sliding_attention") == 0)
        types[i] = TRUE;
      else if (strcmp (t, "full_attention") != 0)
        {
          problem (r, "unsupported feature: '%s' layers (layer_types)", t);
          return TRUE;
        }
    }
  m->n_window_pattern = pattern_period (types, len);
  m->window_pattern = g_memdup2 (types, m->n_window_pattern * sizeof *types);
  return TRUE;
}

/* Which blocks a sliding window applies to: layer_types, else Qwen2's max_window_layers
 * (the blocks from it on), else the family's period (sliding_window_pattern overrides it:
 * the last of each PERIOD blocks is full), else all of them. */
static void
read_window_pattern (Reader *r, const Family *f, MpModel *m)
{
  static const char *const period_key[] = { "sliding_window_pattern", NULL };
  static const char *const full_key[] = { "max_window_layers", NULL };
  if (read_layer_types (r, m))
    return;
  guint64 period = f->attn ? f->attn->period : 0, full = 0;
  get_count (r, period_key, FALSE, MP_MODEL_MAX_LAYERS, &period);
  gboolean qwen = get_count (r, full_key, FALSE, MP_MODEL_MAX_LAYERS, &full)
                  && full < m->n_blocks;
  guint n = qwen ? (guint) m->n_blocks : (guint) period;
  if (n <= 1 || n > m->n_blocks)
    return;                                /* every block windowed */
  g_autofree gboolean *types = g_new (gboolean, n);
  for (guint i = 0; i < n; i++)
    types[i] = qwen ? i >= full : i + 1 < period;
  m->n_window_pattern = pattern_period (types, n);
  m->window_pattern = g_memdup2 (types, m->n_window_pattern * sizeof *types);
}

/* sliding_window (Mistral, Gemma 2/3, GPT-OSS; off with use_sliding_window: false, as
 * Qwen2/3 ship): real windowed attention; a window that covers the context is full
 * attention, said in a note. */
static void
read_window (Reader *r, const Family *f, MpModel *m)
{
  static const char *const window_key[] = { "sliding_window", NULL };
  guint64 window = 0;
  if (!get_bool (r, "use_sliding_window", TRUE)
      || !get_count (r, window_key, FALSE, G_MAXUINT32, &window))
    return;
  if (window >= m->seq_len)
    {
      g_ptr_array_add (r->notes, g_strdup_printf (
          "%s: the sliding window (%" G_GUINT64_FORMAT " tokens) covers the %" G_GUINT64_FORMAT
          "-token context: full attention", r->name, window, m->seq_len));
      return;
    }
  m->window = window;
  read_window_pattern (r, f, m);
  if (m->n_window_pattern == 1)
    {
      /* Every block alike: windowed (no pattern needed) or full (no window). */
      if (!m->window_pattern[0])
        m->window = 0;
      g_clear_pointer (&m->window_pattern, g_free);
      m->n_window_pattern = 0;
    }
}

/* What Gemma, GPT-OSS and the Qwens build beyond the shape (ir14): qk-norm, attention
 * biases, sinks, post-norms, scaled embeddings, soft-capping. */
static void
read_attention_extras (Reader *r, const Family *f, MpModel *m, gboolean bias_default)
{
  const HfAttention *a = f->attn;
  gboolean attn_bias = get_bool (r, "attention_bias", bias_default);
  MpAttnBias bias = attn_bias ? MP_ATTN_BIAS_ALL : MP_ATTN_BIAS_NONE;
  if (!json_object_has_member (r->root, "attention_bias") && a && a->bias)
    bias = a->bias;
  if (bias != (m->bias ? MP_ATTN_BIAS_ALL : MP_ATTN_BIAS_NONE))
    m->attn_bias = bias;
  if (a == NULL)
    return;
  m->qk_norm = a->qk_norm;
  m->attn_sinks = a->sinks;
  m->post_norms = m->embed_scale = a->gemma;
  m->attn_softcap = get_positive (r, "attn_logit_softcapping");
  m->logit_softcap = get_positive (r, "final_logit_softcapping");
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
  if (!get_dim (r, keys, FALSE, &m->ffn_hidden) && r->json.error == NULL)
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
  if (m->experts == 0 || r->json.error != NULL)
    return;
  m->moe_ffn_hidden = m->ffn_hidden;
  if (feature_on (r, "n_shared_experts")
      && get_count (r, n_shared_key, FALSE, MP_MODEL_MAX_EXPERTS, &m->shared_experts))
    m->shared_expert_ffn = m->moe_ffn_hidden;
  else if (feature_on (r, "shared_expert_intermediate_size")
           && get_dim (r, qwen_shared_key, FALSE, &m->shared_expert_ffn))
    m->shared_experts = 1;
  /* DeepSeek-V3's multi-token-prediction module (README_WEIGHTS.md: 11.5B parameters
   * of its own beyond the 671B) trains beside the main model; the IR has no such layer. */
  static const char *const mtp_key[] = { "num_nextn_predict_layers", NULL };
  guint64 mtp = 0;
  if (feature_on (r, "num_nextn_predict_layers")
      && get_count (r, mtp_key, FALSE, MP_MODEL_MAX_LAYERS, &mtp))
    note (r, "the multi-token-prediction module (num_nextn_predict_layers %" G_GUINT64_FORMAT
          ") is left out: the main model's %" G_GUINT64_FORMAT " blocks are costed",
          mtp, m->n_blocks);
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

/* seq_len: the training length (--seq-len; default the context up to
 * MP_HF_DEFAULT_SEQ_LEN, or the position table's length for learned positions). */
static void
read_seq_len (Reader *r, const Family *f, MpModel *m)
{
  static const char *const keys[] = { "max_position_embeddings", "n_positions", "n_ctx",
                                      NULL };
  guint64 context = f->context;
  if (!get_dim (r, keys, context == 0 && r->opts->seq_len == 0, &context) && context == 0)
    context = r->opts->seq_len;
  if (r->json.error != NULL)
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
  if (dtype == NULL && r->top != r->root)
    {
      /* Gemma 3 gives its dtype beside text_config, not in it. */
      JsonObject *text = r->root;
      r->root = r->top;
      dtype = get_string (r, dtype_keys);
      r->root = text;
    }
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
  JsonObject *text = mp_json_get_object (&r->json, r->root, NULL, "text_config", FALSE);
  if (text != NULL)
    {
      /* A vision-language checkpoint (Gemma 3): the text decoder is the model trained
       * here; a vision tower is not costed. */
      if (json_object_has_member (r->root, "vision_config"))
        g_ptr_array_add (r->notes, g_strdup_printf ("%s: the vision tower (vision_config) is "
                                                    "left out: this is its text decoder",
                                                    r->name));
      r->root = text;
    }
  refuse_unsupported (r);
  const Family *f = find_family (r);
  if (f == NULL)
    return;
  /* After the family: a config of another family is refused by its model_type, not by
   * a key of its own kind (OpenELM's list of kv heads). */
  check_types (r, r->top, NULL);
  JsonObject *vision = mp_json_get_object (&r->json, r->top, NULL, "vision_config", FALSE);
  if (vision != NULL)
    check_types (r, vision, "vision_config");
  if (text != NULL)
    check_types (r, text, "text_config");
  m->arch = MP_ARCH_TRANSFORMER;
  get_count (r, layer_keys, TRUE, MP_MODEL_MAX_LAYERS, &m->n_blocks);
  get_dim (r, hidden_keys, TRUE, &m->hidden);
  read_attention (r, m);
  guint64 vocab = f->attn ? f->attn->vocab : 0;
  if (!get_dim (r, vocab_keys, vocab == 0, &m->vocab) && r->json.error == NULL)
    m->vocab = vocab;
  read_activation (r, f, m);
  read_position_norm (r, f, m);
  read_seq_len (r, f, m);
  read_window (r, f, m);
  read_rope_theta (r, m);
  read_experts (r, m);
  read_ffn (r, m);
  read_moe (r, m);
  m->tied_embeddings = get_bool (r, "tie_word_embeddings", f->tied);
  read_dropout (r, m);
  /* InternLM2 and Falcon say "bias", StarCoder2 "use_bias". */
  gboolean bias = get_bool (r, "use_bias", get_bool (r, "bias", f->bias));
  m->bias = get_bool (r, "mlp_bias", bias);
  read_attention_extras (r, f, m, bias);
  if (r->json.error == NULL)
    read_quirks (r, f, m);
  guint64 rotary = m->kv_lora_rank > 0 ? m->qk_rope_head_dim : m->head_dim;
  if (m->position == MP_POS_ROTARY && rotary % 2 != 0)
    problem (r, "rotary positions need an even head width, not %" G_GUINT64_FORMAT, rotary);
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
  g_autoptr(JsonNode) root = mp_json_load_data (name, data, len, error);
  if (root == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT, "%s: a config.json must be one JSON "
                   "object, not %s", name, mp_json_type_name (root));
      return NULL;
    }
  g_autoptr(GPtrArray) own_notes = g_ptr_array_new_with_free_func (g_free);
  static const MpHfOptions defaults = { 0 };
  Reader r = { name, json_node_get_object (root), { 0 }, notes ? notes : own_notes,
               opts ? opts : &defaults, json_node_get_object (root) };
  guint n_notes = r.notes->len;
  mp_json_reader_init (&r.json, name);
  g_autoptr(MpModel) m = g_new0 (MpModel, 1);
  read_config (&r, m);
  if (!mp_json_reader_finish (&r.json, error))
    {
      /* A refused file gets its error alone: notes after a problem describe a model read
       * from a broken value (a "0-token context"). */
      g_ptr_array_set_size (r.notes, n_notes);
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

/* The `attention:` block and Gemma's keys, when the model has any of them (ir14). */
static void
append_attention (GString *s, const MpModel *m)
{
  static const char *const bias_names[] = { NULL, "false", "qkv", "true" };
  gboolean any = m->window || m->attn_sinks || m->qk_norm || m->attn_bias
                 || m->attn_softcap > 0 || m->kv_lora_rank;
  if (any)
    g_string_append (s, "attention:\n");
  if (m->window)
    g_string_append_printf (s, "  window: %" G_GUINT64_FORMAT "\n", m->window);
  if (m->window && m->n_window_pattern)
    {
      g_string_append (s, "  pattern: [");
      for (guint i = 0; i < m->n_window_pattern; i++)
        g_string_append_printf (s, "%s%s", i ? ", " : "",
                                m->window_pattern[i] ? "window" : "full");
      g_string_append (s, "]\n");
    }
  if (m->attn_sinks)
    g_string_append (s, "  sinks: true\n");
  if (m->qk_norm)
    g_string_append (s, "  qk_norm: true\n");
  if (m->attn_bias)
    g_string_append_printf (s, "  bias: %s\n", bias_names[m->attn_bias]);
  if (m->attn_softcap > 0)
    g_string_append_printf (s, "  softcap: %.17g\n", m->attn_softcap);
  if (m->kv_lora_rank)
    {
      g_string_append (s, "  mla:\n");
      if (m->q_lora_rank)
        g_string_append_printf (s, "    q_lora_rank: %" G_GUINT64_FORMAT "\n", m->q_lora_rank);
      g_string_append_printf (s, "    kv_lora_rank: %" G_GUINT64_FORMAT "\n"
                              "    qk_nope_head_dim: %" G_GUINT64_FORMAT "\n"
                              "    qk_rope_head_dim: %" G_GUINT64_FORMAT "\n"
                              "    v_head_dim: %" G_GUINT64_FORMAT "\n", m->kv_lora_rank,
                              m->qk_nope_head_dim, m->qk_rope_head_dim, m->v_head_dim);
    }
  if (m->post_norms)
    g_string_append (s, "post_norms: true\n");
  if (m->embed_scale)
    g_string_append (s, "embed_scale: true\n");
  if (m->no_dropout)
    g_string_append (s, "dropout: false\n");
  if (m->logit_softcap > 0)
    g_string_append_printf (s, "logit_softcap: %.17g\n", m->logit_softcap);
}

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
  if (m->routing != MP_ROUTING_SPREAD)
    g_string_append_printf (s, "routing: %s\n", mp_routing_name (m->routing));
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
  if (m->position == MP_POS_ROTARY)
    g_string_append_printf (s, "rope_theta: %" G_GUINT64_FORMAT "\n", m->rope_theta);
  if (m->experts > 0)
    g_string_append_printf (s, "experts: %" G_GUINT64_FORMAT "\nexperts_per_token: %"
                            G_GUINT64_FORMAT "\n", m->experts, m->experts_per_token);
  append_attention (s, m);
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
