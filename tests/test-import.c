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
  /* 14.3B with q/k/v biases and the shared-expert gate left out (see model-hf.c). */
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
  /* Mistral v0.1's 4096-token window caps seq_len (model-hf.c). */
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *path = hf_path ("mistral-7b");
  g_autoptr(MpModel) mi = mp_model_load_hf (path, notes, NULL);
  assert_non_null (mi);
  assert_int_equal (mi->seq_len, 4096);
  assert_int_equal (notes->len, 1);
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

static void
test_import_refuses_mla_by_name (void **state)
{
  (void) state;
  g_autofree char *path = hf_path ("deepseek-v3-like");
  GError *error = NULL;
  assert_null (mp_model_load_hf (path, NULL, &error));
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  assert_non_null (strstr (error->message,
                           "unsupported feature: multi-head latent attention (kv_lora_rank)"));
  g_error_free (error);
}

static void
test_import_refuses_other_features (void **state)
{
  (void) state;
  static const struct {
    const char *text, *want;
  } cases[] = {
    { "{\"model_type\": \"deepseek_v2\", \"moe_layer_freq\": 2}", "moe_layer_freq" },
    { "{\"model_type\": \"gpt_oss\", \"layer_types\": [\"sliding_attention\", "
      "\"full_attention\"]}", "alternating sliding-window and full attention" },
    { "{\"model_type\": \"qwen3_moe\", \"decoder_sparse_step\": 2}", "decoder_sparse_step" },
    { "{\"model_type\": \"qwen3_moe\", \"mlp_only_layers\": [0, 1]}", "mlp_only_layers" },
    { "{\"model_type\": \"t5\", \"num_layers\": 6}", "unsupported model_type 't5'" },
    { "{\"model_type\": \"llama\", \"hidden_act\": \"gelu\", \"num_hidden_layers\": 2,"
      " \"hidden_size\": 64, \"num_attention_heads\": 4, \"intermediate_size\": 128,"
      " \"vocab_size\": 10, \"max_position_embeddings\": 8}", "activation 'gelu'" },
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
    { "{\"model_type\": \"gpt2\", \"n_layer\": \"12\"}", "'n_layer' must be a whole number, not a string" },
    { "{\"model_type\": \"llama\", \"num_hidden_layers\": 2}", "'hidden_size'" },
    { "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4,"
      " \"vocab_size\": 10}", "missing required key 'max_position_embeddings'" },
    { "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64,"
      " \"num_attention_heads\": 4, \"num_key_value_heads\": 3, \"intermediate_size\": 128,"
      " \"vocab_size\": 10, \"max_position_embeddings\": 8}", "'num_key_value_heads'" },
    { "{\"model_type\": \"gpt2\", \"n_layer\": 2.5}", "'n_layer'" },
    { "{\"model_type\": 7}", "'model_type' must be a string" },
    { "{\"model_type\": \"llama\", \"tie_word_embeddings\": \"no\", \"num_hidden_layers\": 2,"
      " \"hidden_size\": 64, \"num_attention_heads\": 4, \"intermediate_size\": 128,"
      " \"vocab_size\": 10, \"max_position_embeddings\": 8}", "'tie_word_embeddings'" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *msg = import_error (cases[i].text);
      if (strstr (msg, cases[i].want) == NULL || !g_str_has_prefix (msg, "config.json: "))
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
                                       "qwen3-30b-a3b", "bert-large-uncased" };
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

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_import_gpt2_exact),
    cmocka_unit_test (test_import_dense_published_sizes),
    cmocka_unit_test (test_import_moe_published_sizes),
    cmocka_unit_test (test_import_shared_experts_and_dense_first),
    cmocka_unit_test (test_import_aliases_and_kinds),
    cmocka_unit_test (test_import_head_dim_differs),
    cmocka_unit_test (test_import_refuses_mla_by_name),
    cmocka_unit_test (test_import_refuses_other_features),
    cmocka_unit_test (test_import_bad_input_names_the_key),
    cmocka_unit_test (test_import_yaml_round_trips),
    cmocka_unit_test (test_import_mlp_yaml_round_trips),
    cmocka_unit_test (test_import_model_load_detects_json),
  };
  return cmocka_run_group_tests_name ("import", tests, NULL, NULL);
}
