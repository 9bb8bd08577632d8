/* test-import.c - Hugging Face config.json import: parameter counts of the configs in
 * tests/data/hf (written from the published config.json values) against the published
 * model sizes, the key aliases, refusals by name, bad input naming the key, and the YAML
 * written back loading to the same model. */
#include "config.h"
#include "test-util.h"

#include "model/model.h"
#include "common/error.h"

#include <glib/gstdio.h>
#include <string.h>

static char *
hf_path (const char *name)
{
  g_autofree char *file = g_strconcat (name, ".json", NULL);
  return g_build_filename (MPPLAN_SRCDIR, "tests", "data", "hf", file, NULL);
}

/* NAME imported at training length SEQ_LEN (0: import's default). */
static MpModel *
import_at (const char *name, guint64 seq_len, GPtrArray *notes)
{
  g_autofree char *path = hf_path (name);
  GError *error = NULL;
  MpHfOptions opts = { .seq_len = seq_len };
  MpModel *m = mp_model_load_hf_with (path, &opts, notes, &error);
  if (m == NULL)
    fail_msg ("%s: %s", path, error->message);
  return m;
}

static MpModel *
import_ok (const char *name)
{
  g_autofree char *path = hf_path (name);
  GError *error = NULL;
  MpModel *m = mp_model_load_hf (path, NULL, &error);
  if (m == NULL)
    fail_msg ("%s: %s", path, error->message);
  return m;
}

/* Imports TEXT expecting MP_ERROR_INPUT; returns the message (caller frees). */
static char *
import_error (const char *text)
{
  GError *error = NULL;
  MpModel *m = mp_model_load_hf_data ("config.json", text, strlen (text), NULL, &error);
  assert_null (m);
  assert_non_null (error);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  char *msg = g_strdup (error->message);
  g_error_free (error);
  return msg;
}

static void
check_counts (const char *name, double total, double active, double rtol)
{
  g_autoptr(MpModel) m = import_ok (name);
  mp_assert_close (m->params_total, total, rtol);
  mp_assert_close (m->params_active, active, rtol);
}

/* ---- published sizes ----------------------------------------------------------------- */

static void
test_import_gpt2_exact (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = import_ok ("gpt2");
  /* GPT-2 small: 124,439,808 with the lm_head tied to the token embedding. */
  assert_int_equal ((gint64) m->params_total, 124439808);
  assert_int_equal (m->ffn_hidden, 3072);          /* n_inner null: 4 n_embd */
  assert_int_equal (m->seq_len, 1024);             /* n_positions */
  assert_int_equal (m->position, MP_POS_LEARNED);
  assert_int_equal (m->norm, MP_NORM_LAYERNORM);
  assert_int_equal (m->activation, MP_ACT_GELU);   /* gelu_new */
  assert_true (m->tied_embeddings && m->bias);
}

/* Dropout: a config with a residual or embedding rate above 0 keeps Korthikanti's masks;
 * Llama-family configs (attention_dropout alone) and zero rates import as dropout: false,
 * and the written YAML says so. */
static void
test_import_dropout (void **state)
{
  (void) state;
  static const struct { const char *name; gboolean none; } cases[] = {
    { "gpt2", FALSE }, { "bert-large-uncased", FALSE }, { "starcoder2-3b", FALSE },
    { "llama-3-8b", TRUE }, { "phi-3-mini-4k", TRUE }, { "falcon-7b", TRUE },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(MpModel) m = import_ok (cases[i].name);
      assert_int_equal (m->no_dropout, cases[i].none);
    }
  g_autoptr(MpModel) llama = import_ok ("llama-3-8b");
  g_autofree char *yaml = mp_model_to_yaml (llama, NULL);
  assert_non_null (strstr (yaml, "dropout: false\n"));
}

static void
test_import_dense_published_sizes (void **state)
{
  (void) state;
  check_counts ("llama-2-7b", 6.74e9, 6.74e9, 0.005);
  check_counts ("llama-3-8b", 8.03e9, 8.03e9, 0.005);
  check_counts ("mistral-7b", 7.24e9, 7.24e9, 0.005);
  check_counts ("qwen2-7b", 7.62e9, 7.62e9, 0.005);
  check_counts ("qwen3-8b", 8.19e9, 8.19e9, 0.005);
  /* BERT-large: ~335M (HF); token types, pooler and MLM transform are left out. */
  check_counts ("bert-large-uncased", 335e6, 335e6, 0.02);
}

static void
test_import_moe_published_sizes (void **state)
{
  (void) state;
  check_counts ("mixtral-8x7b", 46.7e9, 12.9e9, 0.005);
  check_counts ("qwen3-30b-a3b", 30.5e9, 3.3e9, 0.02);
  g_autoptr(MpModel) q = import_ok ("qwen3-30b-a3b");
  assert_int_equal (q->experts, 128);              /* num_experts */
  assert_int_equal (q->experts_per_token, 8);
  assert_int_equal (q->ffn_hidden, 768);           /* moe_intermediate_size, not 6144 */
  mp_assert_close (q->params_active, 3.3e9, 0.02);
}

/* The two shared-expert families from their whole published config.json files.
 * Qwen1.5-MoE-A2.7B (model card: 14.3B in total, 2.7B activated): by its config's
 * arithmetic 14,315,784,192, of which mpplan counts all but the shared expert's scalar
 * gate (Linear(2048, 1) per block, 49,152 in all); activated, the embedding and the head
 * included, 2,689,124,352. DeepSeek-V3 (README_WEIGHTS.md of deepseek-ai/DeepSeek-V3:
 * main model 671B, 36.6B activated of which 0.9B the output head, i.e. the embedding
 * lookup not counted; the multi-token-prediction module's 11.5B more are not in the 671B
 * and not in mpplan's count, which a note says). */
static void
test_import_shared_expert_models_published_sizes (void **state)
{
  (void) state;
  g_autoptr(MpModel) q = import_ok ("qwen1.5-moe-a2.7b");
  mp_assert_close (q->params_total, 14.3e9, 0.005);
  mp_assert_close (q->params_active, 2.7e9, 0.005);
  assert_int_equal ((gint64) q->params_total, 14315784192 - 24 * 2048);
  assert_int_equal ((gint64) q->params_active, 2689124352);
  assert_int_equal (q->attn_bias, MP_ATTN_BIAS_QKV);   /* Qwen2MoeAttention: q, k, v */
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(MpModel) d = import_at ("deepseek-v3", 4096, notes);
  mp_assert_close (d->params_total, 671e9, 0.005);
  mp_assert_close (d->params_active - d->params_embedding, 36.6e9, 0.005);
  assert_int_equal ((gint64) d->params_total, 671026404352);
  assert_int_equal ((gint64) d->params_active, 37552282624);
  assert_int_equal (d->first_k_dense, 3);
  assert_int_equal (d->experts, 256);
  assert_int_equal (d->shared_experts, 1);
  assert_int_equal (d->q_lora_rank, 1536);
  gboolean mtp = FALSE;
  for (guint i = 0; i < notes->len; i++)
    mtp = mtp || strstr (g_ptr_array_index (notes, i), "num_nextn_predict_layers 1") != NULL;
  assert_true (mtp);
}

/* MoE (moe14): shared experts and dense first layers are read, not refused. */
static void
test_import_shared_experts_and_dense_first (void **state)
{
  (void) state;
  /* Qwen1.5-MoE-A2.7B (Qwen2-MoE config.json): 60 experts of 1408, top-4, one shared
   * expert of 5632, 24 layers of 2048; published 14.3B parameters, 2.7B activated. */
  static const char qwen2_moe[] =
    "{\"model_type\": \"qwen2_moe\", \"hidden_size\": 2048, \"num_hidden_layers\": 24,"
    " \"num_attention_heads\": 16, \"num_key_value_heads\": 16, \"intermediate_size\": 5632,"
    " \"moe_intermediate_size\": 1408, \"shared_expert_intermediate_size\": 5632,"
    " \"num_experts\": 60, \"num_experts_per_tok\": 4, \"decoder_sparse_step\": 1,"
    " \"mlp_only_layers\": [], \"vocab_size\": 151936, \"max_position_embeddings\": 8192,"
    " \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-06, \"hidden_act\": \"silu\","
    " \"tie_word_embeddings\": false}";
  GError *error = NULL;
  g_autoptr(MpModel) q = mp_model_load_hf_data ("qwen1.5-moe.json", qwen2_moe,
                                                strlen (qwen2_moe), NULL, &error);
  assert_non_null (q);
  assert_int_equal (q->shared_experts, 1);
  assert_int_equal (q->shared_expert_ffn, 5632);
  assert_int_equal (q->moe_ffn_hidden, 1408);
  assert_int_equal (q->first_k_dense, 0);
  /* 14.3B (the shared expert's scalar gate left out). */
  mp_assert_close (q->params_total, 14.3e9, 0.005);
  /* DeepSeek-V3's MoE side (its MLA keys taken out; that attention is refused below):
   * 3 dense layers of 18432, then 256 experts of 2048 and one shared expert. */
  g_autofree char *path = g_build_filename (MPPLAN_SRCDIR, "tests", "data", "hf",
                                            "deepseek-v3-like.json", NULL);
  g_autofree char *text = NULL;
  assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_autoptr(JsonParser) parser = json_parser_new ();
  assert_true (json_parser_load_from_data (parser, text, -1, NULL));
  JsonObject *o = json_node_get_object (json_parser_get_root (parser));
  json_object_remove_member (o, "kv_lora_rank");
  json_object_remove_member (o, "q_lora_rank");
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  json_generator_set_root (gen, json_parser_get_root (parser));
  g_autofree char *plain = json_generator_to_data (gen, NULL);
  g_autoptr(MpModel) d = mp_model_load_hf_data ("deepseek.json", plain, strlen (plain), NULL,
                                                &error);
  assert_non_null (d);
  assert_int_equal (d->first_k_dense, 3);
  assert_int_equal (d->ffn_hidden, 18432);
  assert_int_equal (d->moe_ffn_hidden, 2048);
  assert_int_equal (d->shared_experts, 1);
  assert_int_equal (d->shared_expert_ffn, 2048);
  assert_int_equal (d->experts, 256);
  assert_false (d->layers[3].moe);
  assert_true (d->layers[4].moe);
  /* The YAML it would print reads back to the same model. */
  g_autofree char *yaml = mp_model_to_yaml (d, NULL);
  g_autoptr(MpModel) back = mp_model_load_data ("back.yaml", yaml, strlen (yaml), &error);
  assert_non_null (back);
  mp_assert_close (back->params_total, d->params_total, 0);
}

static void
test_import_aliases_and_kinds (void **state)
{
  (void) state;
  g_autoptr(MpModel) l = import_ok ("llama-3-8b");
  assert_int_equal (l->kv_heads, 8);
  assert_int_equal (l->activation, MP_ACT_SWIGLU);  /* silu in a gated family */
  assert_int_equal (l->norm, MP_NORM_RMSNORM);
  assert_int_equal (l->position, MP_POS_ROTARY);
  assert_false (l->tied_embeddings);
  assert_false (l->bias);
  assert_int_equal (l->precision, MP_DTYPE_BF16);
  g_autoptr(MpModel) q = import_ok ("qwen3-8b");
  assert_int_equal (q->head_dim, 128);              /* given, = 4096 / 32 here */
  g_autoptr(MpModel) b = import_ok ("bert-large-uncased");
  assert_int_equal (b->norm, MP_NORM_LAYERNORM);    /* layer_norm_eps */
  assert_int_equal (b->position, MP_POS_LEARNED);
  /* Mistral v0.1's 4096-token window is a window on every block when it trains on its
   * whole 32768-token context. */
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(MpModel) mi = import_at ("mistral-7b", 32768, notes);
  assert_int_equal (mi->seq_len, 32768);
  assert_int_equal (mi->window, 4096);
  assert_int_equal (mi->n_window_pattern, 0);
  assert_int_equal (notes->len, 0);
  /* Qwen2 biases q, k and v only; Qwen3 normalises q and k. */
  g_autoptr(MpModel) q2 = import_ok ("qwen2-7b");
  assert_int_equal (q2->attn_bias, MP_ATTN_BIAS_QKV);
  assert_false (q2->bias);
  assert_true (q->qk_norm);
}

static void
test_import_head_dim_differs (void **state)
{
  (void) state;
  static const char text[] =
    "{\"model_type\": \"qwen3\", \"num_hidden_layers\": 2, \"hidden_size\": 1024,"
    " \"num_attention_heads\": 16, \"num_key_value_heads\": 8, \"head_dim\": 128,"
    " \"intermediate_size\": 3072, \"vocab_size\": 1000, \"max_position_embeddings\": 256,"
    " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}";
  g_autoptr(MpModel) m = mp_model_load_hf_data ("config.json", text, strlen (text), NULL,
                                                NULL);
  assert_non_null (m);
  assert_int_equal (m->head_dim, 128);
  assert_int_equal (m->position, MP_POS_ROTARY);   /* rope_parameters (transformers v5) */
  /* qkv: q 16 x 128 + k, v 2 x 8 x 128 wide, 1024 deep. */
  const MpOp *qkv = &m->layers[1].ops[1];
  assert_string_equal (qkv->name, "qkv");
  mp_assert_close (qkv->params, 1024.0 * (2048 + 2048), 1e-12);
}

/* ---- refusals and bad input ------------------------------------------------------------ */

/* ---- attention-side families (ir14) ----------------------------------------------------- */

/* Gemma 2 9B: 9.24B (Gemma 2 report, Table 1 and the model card: 9,241,705,984 by its
 * config's arithmetic); head_dim 256; every other block windowed (4096); soft-capping. */
static void
test_import_gemma2 (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = import_at ("gemma-2-9b", 8192, NULL);   /* its whole context */
  mp_assert_close (m->params_total, 9.24e9, 0.005);
  assert_int_equal ((gint64) m->params_total, 9241705984);
  assert_int_equal (m->head_dim, 256);
  assert_int_equal (m->activation, MP_ACT_GEGLU);
  assert_int_equal (m->window, 4096);
  assert_int_equal (m->n_window_pattern, 2);
  assert_true (m->window_pattern[0] && !m->window_pattern[1]);
  assert_true (m->post_norms && m->embed_scale && m->tied_embeddings);
  mp_assert_close (m->attn_softcap, 50, 0);
  mp_assert_close (m->logit_softcap, 30, 0);
  assert_int_equal (m->layers[1].window, 4096);
  assert_int_equal (m->layers[2].window, 0);
}

/* Gemma 3 27B's text decoder (text_config and Gemma3TextConfig's defaults): 27.0B, of
 * which 25.6B not embeddings (Gemma 3 report, Table 1); 5 local (1024) : 1 global; qk-norm;
 * the vision tower noted, not costed. */
static void
test_import_gemma3 (void **state)
{
  (void) state;
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(MpModel) m = import_at ("gemma-3-27b", 8192, notes);
  mp_assert_close (m->params_total, 27.0e9, 0.005);
  mp_assert_close (m->params_total - m->params_embedding, 25.6e9, 0.005);
  assert_int_equal (m->vocab, 262208);
  assert_int_equal (m->window, 1024);
  assert_int_equal (m->n_window_pattern, 6);
  for (guint i = 0; i < 6; i++)
    assert_int_equal (m->window_pattern[i], i < 5);
  assert_true (m->qk_norm);
  assert_int_equal (notes->len, 1);
  assert_non_null (strstr (g_ptr_array_index (notes, 0), "vision tower"));
  /* The same shape as the zoo's gemma3-27b. */
  g_autoptr(MpModel) zoo = mp_model_load ("gemma3-27b", NULL);
  assert_non_null (zoo);
  assert_true (zoo->params_total == m->params_total);
}

/* GPT-OSS-120B (model card: 116.83B total; 5.13B active, which counts the unembedding
 * but not the embedding lookup): sinks, attention biases, a 128-token window on every
 * other block. */
static void
test_import_gpt_oss (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = import_ok ("gpt-oss-120b");
  mp_assert_close (m->params_total, 116.83e9, 0.005);
  mp_assert_close (m->params_active - m->params_embedding, 5.13e9, 0.005);
  assert_true (m->attn_sinks && m->bias);
  assert_int_equal (m->window, 128);
  assert_int_equal (m->n_window_pattern, 2);
  assert_int_equal (m->head_dim, 64);
  assert_int_equal (m->experts, 128);
  assert_int_equal (m->experts_per_token, 4);
}

/* DeepSeek-V3's MLA keys are read (its config refuses on shared experts until the IR has
 * them): a dense model with V3's attention has its 187,107,328 attention parameters per
 * block; V2-Lite's null q_lora_rank projects q directly. */
static void
test_import_deepseek_mla (void **state)
{
  (void) state;
  g_autofree char *path = hf_path ("deepseek-v3-like");
  GError *error = NULL;
  g_autoptr(MpModel) full = mp_model_load_hf (path, NULL, &error);
  assert_non_null (full);               /* MLA and shared experts both imported */
  assert_int_equal (full->shared_experts, 1);
  assert_true (full->kv_lora_rank > 0);
  static const char text[] =
    "{\"model_type\": \"deepseek_v3\", \"num_hidden_layers\": 3, \"hidden_size\": 7168,"
    " \"intermediate_size\": 18432, \"num_attention_heads\": 128,"
    " \"num_key_value_heads\": 128, \"q_lora_rank\": 1536, \"kv_lora_rank\": 512,"
    " \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"v_head_dim\": 128,"
    " \"vocab_size\": 129280, \"max_position_embeddings\": 4096, \"rope_theta\": 10000,"
    " \"rms_norm_eps\": 1e-06, \"hidden_act\": \"silu\", \"attention_bias\": false,"
    " \"tie_word_embeddings\": false}";
  g_autoptr(MpModel) m = mp_model_load_hf_data ("config.json", text, strlen (text), NULL,
                                                &error);
  assert_non_null (m);
  assert_int_equal (m->kv_lora_rank, 512);
  assert_int_equal (m->head_dim, 192);
  const MpLayer *b = &m->layers[1];
  double attn = 0;
  for (guint i = 1; i < b->n_ops && strcmp (b->ops[i].name, "attn_residual") != 0; i++)
    attn += b->ops[i].params;
  mp_assert_close (attn, 187107328, 0);
  mp_assert_close (m->kv_cache_bytes_per_token, 3 * 2.0 * (512 + 64), 0);
  g_autofree char *yaml = mp_model_to_yaml (m, NULL);
  g_autoptr(MpModel) back = mp_model_load_data ("back.yaml", yaml, strlen (yaml), &error);
  assert_non_null (back);
  assert_true (back->params_total == m->params_total);
  g_autofree char *lite = g_strdup (text);
  char *at = strstr (lite, "1536");
  memcpy (at, "null", 4);
  g_autoptr(MpModel) l = mp_model_load_hf_data ("config.json", lite, strlen (lite), NULL,
                                                &error);
  assert_non_null (l);
  assert_int_equal (l->q_lora_rank, 0);
}

/* layer_types with chunked attention (Llama 4) is refused by name; a window covering the
 * context is full attention, with a note. */
static void
test_import_window_edges (void **state)
{
  (void) state;
  g_autofree char *msg = import_error (
    "{\"model_type\": \"gpt_oss\", \"num_hidden_layers\": 2, \"hidden_size\": 64,"
    " \"num_attention_heads\": 4, \"intermediate_size\": 128, \"vocab_size\": 10,"
    " \"max_position_embeddings\": 64, \"sliding_window\": 16,"
    " \"layer_types\": [\"chunked_attention\", \"full_attention\"]}");
  assert_non_null (strstr (msg, "unsupported feature: 'chunked_attention' layers"));
  static const char text[] =
    "{\"model_type\": \"mistral\", \"num_hidden_layers\": 2, \"hidden_size\": 64,"
    " \"num_attention_heads\": 4, \"intermediate_size\": 128, \"vocab_size\": 10,"
    " \"max_position_embeddings\": 64, \"sliding_window\": 64}";
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(MpModel) m = mp_model_load_hf_data ("config.json", text, strlen (text), notes,
                                                NULL);
  assert_non_null (m);
  assert_int_equal (m->window, 0);
  assert_int_equal (notes->len, 1);
  /* Qwen2 windows the blocks from max_window_layers on. */
  static const char qwen[] =
    "{\"model_type\": \"qwen2\", \"num_hidden_layers\": 3, \"hidden_size\": 64,"
    " \"num_attention_heads\": 4, \"intermediate_size\": 128, \"vocab_size\": 10,"
    " \"max_position_embeddings\": 64, \"sliding_window\": 16,"
    " \"use_sliding_window\": true, \"max_window_layers\": 1}";
  g_autoptr(MpModel) q = mp_model_load_hf_data ("config.json", qwen, strlen (qwen), NULL,
                                                NULL);
  assert_non_null (q);
  assert_int_equal (q->window, 16);
  assert_int_equal (q->layers[1].window, 0);
  assert_int_equal (q->layers[2].window, 16);
  assert_int_equal (q->layers[3].window, 16);
}

static void
test_import_refuses_other_features (void **state)
{
  (void) state;
  static const struct {
    const char *text, *want;
  } cases[] = {
    { "{\"model_type\": \"deepseek_v2\", \"moe_layer_freq\": 2}", "moe_layer_freq" },
    { "{\"model_type\": \"qwen3_moe\", \"decoder_sparse_step\": 2}", "decoder_sparse_step" },
    { "{\"model_type\": \"qwen3_moe\", \"mlp_only_layers\": [0, 1]}", "mlp_only_layers" },
    { "{\"model_type\": \"t5\", \"num_layers\": 6}", "unsupported model_type 't5'" },
    { "{\"model_type\": \"llama\", \"hidden_act\": \"tanh\", \"num_hidden_layers\": 2,"
      " \"hidden_size\": 64, \"num_attention_heads\": 4, \"intermediate_size\": 128,"
      " \"vocab_size\": 10, \"max_position_embeddings\": 8}", "activation 'tanh'" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *msg = import_error (cases[i].text);
      if (strstr (msg, cases[i].want) == NULL)
        fail_msg ("case %zu: '%s' lacks '%s'", i, msg, cases[i].want);
    }
}

static void
test_import_bad_input_names_the_key (void **state)
{
  (void) state;
  static const struct {
    const char *text, *want;
  } cases[] = {
    { "{\"model_type\": \"llama\",", "not valid JSON" },
    { "[1, 2]", "one JSON object" },
    { "{\"model_type\": \"gpt2\", \"n_layer\": \"12\"}", "key 'n_layer': expected a whole number, got a string" },
    { "{\"model_type\": \"llama\", \"num_hidden_layers\": 2}", "'hidden_size'" },
    { "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4,"
      " \"vocab_size\": 10}", "missing required key 'max_position_embeddings'" },
    { "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64,"
      " \"num_attention_heads\": 4, \"num_key_value_heads\": 3, \"intermediate_size\": 128,"
      " \"vocab_size\": 10, \"max_position_embeddings\": 8}", "'num_key_value_heads'" },
    { "{\"model_type\": \"gpt2\", \"n_layer\": 2.5}", "'n_layer'" },
    { "{\"model_type\": 7}", "key 'model_type': expected a string, got a number" },
    { "{\"model_type\": \"llama\", \"tie_word_embeddings\": \"no\", \"num_hidden_layers\": 2,"
      " \"hidden_size\": 64, \"num_attention_heads\": 4, \"intermediate_size\": 128,"
      " \"vocab_size\": 10, \"max_position_embeddings\": 8}", "'tie_word_embeddings'" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *msg = import_error (cases[i].text);
      if (strstr (msg, cases[i].want) == NULL || !g_str_has_prefix (msg, "config.json:"))
        fail_msg ("case %zu: '%s' lacks '%s'", i, msg, cases[i].want);
    }
}

/* ---- YAML out, and loading by path ---------------------------------------------------- */

static void
check_round_trip (const char *name)
{
  g_autoptr(MpModel) m = import_ok (name);
  g_autofree char *yaml = mp_model_to_yaml (m, "test\nheader");
  GError *error = NULL;
  g_autoptr(MpModel) back = mp_model_load_data ("back.yaml", yaml, strlen (yaml), &error);
  if (back == NULL)
    fail_msg ("%s: %s\n%s", name, error->message, yaml);
  assert_string_equal (back->name, m->name);
  assert_true (back->params_total == m->params_total);
  assert_true (back->params_active == m->params_active);
  assert_true (back->train_flops_per_token == m->train_flops_per_token);
  assert_int_equal (back->global_batch, m->global_batch);
  assert_int_equal (back->precision, m->precision);
}

static void
test_import_yaml_round_trips (void **state)
{
  (void) state;
  static const char *const names[] = { "gpt2", "llama-2-7b", "llama-3-8b", "mistral-7b",
                                       "mixtral-8x7b", "qwen2-7b", "qwen3-8b",
                                       "qwen3-30b-a3b", "bert-large-uncased", "gemma-2-9b",
                                       "gemma-3-27b", "gpt-oss-120b" };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    check_round_trip (names[i]);
}

static void
test_import_mlp_yaml_round_trips (void **state)
{
  (void) state;
  GError *error = NULL;
  g_autoptr(MpModel) m = mp_model_load ("mlp-1024", &error);
  assert_non_null (m);
  g_autofree char *yaml = mp_model_to_yaml (m, NULL);
  g_autoptr(MpModel) back = mp_model_load_data ("back.yaml", yaml, strlen (yaml), &error);
  assert_non_null (back);
  assert_true (back->params_total == m->params_total);
}

static void
test_import_model_load_detects_json (void **state)
{
  (void) state;
  /* By suffix. */
  g_autofree char *path = hf_path ("llama-3-8b");
  g_autoptr(MpModel) a = mp_model_load (path, NULL);
  assert_non_null (a);
  assert_string_equal (a->name, "llama-3-8b");
  /* By content, in a hub snapshot folder: named after the folder. */
  g_autofree char *dir = g_dir_make_tmp ("mpplan-hf-XXXXXX", NULL);
  g_autofree char *sub = g_build_filename (dir, "Meta-Llama-3-8B", NULL);
  g_autofree char *cfg = g_build_filename (sub, "config", NULL);
  g_autofree char *text = NULL;
  assert_true (g_file_get_contents (path, &text, NULL, NULL));
  assert_int_equal (g_mkdir (sub, 0700), 0);
  assert_true (g_file_set_contents (cfg, text, -1, NULL));
  g_autoptr(MpModel) b = mp_model_load (cfg, NULL);
  assert_non_null (b);
  assert_true (b->params_total == a->params_total);
  g_remove (cfg);
  g_autofree char *json = g_build_filename (sub, "config.json", NULL);
  assert_true (g_file_set_contents (json, text, -1, NULL));
  g_autoptr(MpModel) c = mp_model_load (json, NULL);
  assert_non_null (c);
  assert_string_equal (c->name, "Meta-Llama-3-8B");
  g_remove (json);
  g_rmdir (sub);
  g_rmdir (dir);
}

/* The families the IR costs since issue 18, against their published sizes (model cards
 * and the safetensors totals; sources in tests/data/hf/README.md), within 0.5%. */
static void
test_import_new_families_published_sizes (void **state)
{
  (void) state;
  check_counts ("phi-3-mini-4k", 3.82e9, 3.82e9, 0.005);
  check_counts ("phi-3.5-mini", 3.82e9, 3.82e9, 0.005);
  check_counts ("phi-4", 14.7e9, 14.7e9, 0.005);
  check_counts ("olmo-2-7b", 7.30e9, 7.30e9, 0.005);
  check_counts ("internlm2-7b", 7.74e9, 7.74e9, 0.005);
  check_counts ("starcoder2-3b", 3.03e9, 3.03e9, 0.005);
  check_counts ("gpt-j-6b", 6053381344, 6053381344, 0.005);
  check_counts ("gpt-neox-20b", 20554567680, 20554567680, 0.005);
  check_counts ("falcon-7b", 6.92e9, 6.92e9, 0.005);
}

/* Their quirks: Falcon-7B is multi-query without a max_position_embeddings key (2048 by
 * its config class), StarCoder2 is layernorm by norm_epsilon and biased by use_bias with
 * a fractional rope_theta, NeoX gets its rotary base from rotary_emb_base, GPT-J is
 * rotary with n_* keys, InternLM2 says "bias". */
static void
test_import_family_quirks (void **state)
{
  (void) state;
  g_autoptr(MpModel) falcon = import_ok ("falcon-7b");
  assert_int_equal (falcon->kv_heads, 1);
  assert_int_equal (falcon->seq_len, 2048);
  assert_false (falcon->bias);
  assert_true (falcon->tied_embeddings);
  g_autoptr(MpModel) sc = import_ok ("starcoder2-3b");
  assert_int_equal (sc->norm, MP_NORM_LAYERNORM);
  assert_true (sc->bias);
  assert_int_equal (sc->activation, MP_ACT_GELU);
  assert_int_equal (sc->rope_theta, 999999);
  assert_int_equal (sc->kv_heads, 2);
  g_autoptr(MpModel) neox = import_ok ("gpt-neox-20b");
  assert_int_equal (neox->position, MP_POS_ROTARY);
  assert_int_equal (neox->rope_theta, 10000);
  g_autoptr(MpModel) gptj = import_ok ("gpt-j-6b");
  assert_int_equal (gptj->position, MP_POS_ROTARY);
  assert_int_equal (gptj->head_dim, 256);
  g_autoptr(MpModel) intern = import_ok ("internlm2-7b");
  assert_false (intern->bias);
  assert_int_equal (intern->kv_heads, 8);
  assert_int_equal (intern->rope_theta, 1000000);
}

/* What the IR cannot cost is refused by name: Gemma 2's soft-capping, Qwen2-MoE's shared
 * experts. */
static void
test_import_refusals_by_name (void **state)
{
  (void) state;
  /* Qwen2-MoE's shared expert, once refused, is read (moe14); what stays refused is
   * refused by name (test_import_refuses_other_features). */
  g_autoptr(MpModel) m = import_ok ("qwen1.5-moe-a2.7b");
  assert_int_equal (m->shared_experts, 1);
  assert_true (m->shared_expert_ffn > 0);
}

/* The training length: 4096 of a longer context by default, with a note; --seq-len and
 * --tokens-per-batch set seq_len and the batch; a learned position table fixes it. */
static void
test_import_training_length (void **state)
{
  (void) state;
  g_autofree char *llama = hf_path ("llama-3-8b");
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GError) error = NULL;
  g_autoptr(MpModel) m = mp_model_load_hf_with (llama, NULL, notes, &error);
  assert_non_null (m);
  assert_int_equal (m->seq_len, MP_HF_DEFAULT_SEQ_LEN);
  assert_int_equal (m->global_batch, (1 << 20) / MP_HF_DEFAULT_SEQ_LEN);
  assert_int_equal (notes->len, 1);
  assert_non_null (strstr (g_ptr_array_index (notes, 0), "of the 8192-token context"));
  MpHfOptions o = { .seq_len = 2048, .tokens_per_batch = 4 << 20 };
  g_autoptr(MpModel) m2 = mp_model_load_hf_with (llama, &o, NULL, &error);
  assert_non_null (m2);
  assert_int_equal (m2->seq_len, 2048);
  assert_int_equal (m2->global_batch, 2048);
  mp_assert_close (m2->params_total, m->params_total, 1e-12);
  g_autofree char *gpt2 = hf_path ("gpt2");
  g_autoptr(MpModel) bad = mp_model_load_hf_with (gpt2, &o, NULL, &error);
  assert_null (bad);
  assert_non_null (strstr (error->message, "learned positions"));
  g_clear_error (&error);
  MpHfOptions tiny = { .tokens_per_batch = 100 };
  g_autoptr(MpModel) none = mp_model_load_hf_with (llama, &tiny, NULL, &error);
  assert_null (none);
  assert_non_null (strstr (error->message, "holds no whole sequence of 4096 tokens"));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_import_gpt2_exact),
    cmocka_unit_test (test_import_dropout),
    cmocka_unit_test (test_import_new_families_published_sizes),
    cmocka_unit_test (test_import_family_quirks),
    cmocka_unit_test (test_import_refusals_by_name),
    cmocka_unit_test (test_import_training_length),
    cmocka_unit_test (test_import_dense_published_sizes),
    cmocka_unit_test (test_import_moe_published_sizes),
    cmocka_unit_test (test_import_shared_experts_and_dense_first),
    cmocka_unit_test (test_import_shared_expert_models_published_sizes),
    cmocka_unit_test (test_import_aliases_and_kinds),
    cmocka_unit_test (test_import_head_dim_differs),
    cmocka_unit_test (test_import_gemma2),
    cmocka_unit_test (test_import_gemma3),
    cmocka_unit_test (test_import_gpt_oss),
    cmocka_unit_test (test_import_deepseek_mla),
    cmocka_unit_test (test_import_window_edges),
    cmocka_unit_test (test_import_refuses_other_features),
    cmocka_unit_test (test_import_bad_input_names_the_key),
    cmocka_unit_test (test_import_yaml_round_trips),
    cmocka_unit_test (test_import_mlp_yaml_round_trips),
    cmocka_unit_test (test_import_model_load_detects_json),
  };
  return cmocka_run_group_tests_name ("import", tests, NULL, NULL);
}
