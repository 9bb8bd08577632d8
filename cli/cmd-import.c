/* cmd-import.c - `mpplan import hf config.json [-o model.yaml]`: a Hugging Face model
 * config as mpplan's model YAML, to read, edit (batch, precision) and plan with. */
#include "config.h"
#include "cli/cli.h"
#include "common/error.h"
#include "common/output.h"
#include "model/model.h"

#include <stdio.h>
#include <string.h>

/* The header comment of the YAML: where it came from and what it adds up to. */
static char *
header (const MpModel *m, const char *path)
{
  g_autofree char *total = mp_units_format (m->params_total, MP_UNIT_COUNT);
  g_autofree char *active = mp_units_format (m->params_active, MP_UNIT_COUNT);
  return g_strdup_printf ("%s - imported by `mpplan import hf` from %s.\n"
                          "Parameters: %.0f (%s), %s active per token. seq_len and the "
                          "batch are\nthe training choices of the import (--seq-len, "
                          "--tokens-per-batch); edit them.", m->name, path, m->params_total,
                          total, active);
}

static int
import_hf (const char *path, const char *output, const MpHfOptions *opts)
{
  GError *error = NULL;
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(MpModel) m = mp_model_load_hf_with (path, opts, notes, &error);
  for (guint i = 0; i < notes->len; i++)
    fprintf (stderr, "mpplan: note: %s\n", (const char *) g_ptr_array_index (notes, i));
  if (m == NULL)
    return mp_cli_fail (error);
  g_autofree char *comment = header (m, path);
  g_autofree char *yaml = mp_model_to_yaml (m, comment);
  if (!mp_output_write (output ? output : "-", yaml, strlen (yaml), &error))
    return mp_cli_fail (error);
  return 0;
}

int
mp_cmd_import (int argc, char **argv, gboolean do_help)
{
  char *output = NULL;
  g_auto (GStrv) rest = NULL;
  gint64 seq_len = 0, tokens = 0;
  const GOptionEntry entries[] = {
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
      "Write the model YAML to FILE (atomically; default stdout)", "FILE" },
    { "seq-len", 0, 0, G_OPTION_ARG_INT64, &seq_len,
      "Training sequence length (default: max_position_embeddings up to 4096; a note "
      "says when the context is longer)", "N" },
    { "tokens-per-batch", 0, 0, G_OPTION_ARG_INT64, &tokens,
      "Global batch in tokens: tokens / seq_len sequences (default 1048576)", "N" },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &rest, NULL, NULL },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new ("hf CONFIG.json");
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "Turn a Hugging Face config.json (gpt2, llama, mistral, mixtral, qwen2, qwen3, "
           "qwen3_moe, qwen2_moe, bert, gemma2, gemma3, gpt_oss, deepseek_v2, deepseek_v3, phi3 "
           "(Phi-3, 3.5, 4), olmo2, internlm2, starcoder2, gptj, gpt_neox, falcon) into "
           "mpplan's model YAML. `plan -m`, `compare -m` and `describe` also read a "
           "config.json directly, with the default training length and batch.");
  g_option_context_set_description (
      ctx, "Keys and aliases: num_hidden_layers|n_layer, hidden_size|n_embd, "
           "num_attention_heads|n_head, num_key_value_heads, head_dim, intermediate_size|"
           "n_inner (MoE: moe_intermediate_size first), num_local_experts|num_experts, "
           "num_experts_per_tok, vocab_size, max_position_embeddings|n_positions, "
           "hidden_activation|hidden_act|activation_function (silu in a gated family: "
           "swiglu, gelu*: geglu; else gelu*: gelu), "
           "rms_norm_eps (rmsnorm) or layer_norm_epsilon|layer_norm_eps (layernorm), "
           "rope_theta|rope_parameters|rope_scaling|rotary_emb_base (rotary), "
           "tie_word_embeddings, attention_bias (attention projections), "
           "mlp_bias|bias|use_bias, norm_epsilon (layernorm), num_kv_heads and multi_query "
           "(Falcon), torch_dtype; sliding_window (off with use_sliding_window: false) on "
           "the blocks layer_types or the family makes windowed (Gemma 2: every other, "
           "Gemma 3: 5 of 6, sliding_window_pattern), kv_lora_rank, q_lora_rank, "
           "qk_nope_head_dim, qk_rope_head_dim, v_head_dim (multi-head latent attention), "
           "attn_logit_softcapping, final_logit_softcapping; Gemma 3's text_config. "
           "Qwen3 and Gemma 3 get qk-norm, Qwen2 and Qwen2-MoE q/k/v biases, GPT-OSS attention sinks, "
           "Gemma post-norms and scaled embeddings.\n"
           "seq_len is the training length, not the context: --seq-len, else "
           "max_position_embeddings up to 4096 (a note when shorter than the context); "
           "learned positions need the table's length. The batch is --tokens-per-batch / "
           "seq_len sequences (default 2^20 tokens).\n"
           "Noted on stderr, costed approximately: parallel blocks (GPT-J, GPT-NeoX, "
           "Falcon) as sequential, partial rotary as full, OLMo 2's QK-norm left out; also "
           "a window covering the context (full attention), a vision tower and DeepSeek-V3's "
           "multi-token-prediction module (num_nextn_predict_layers) left out.\n"
           "Shared experts (n_shared_experts, shared_expert_intermediate_size) and dense first "
           "layers (first_k_dense_replace) are read.\n"
           "Refused by name (exit 2): dense layers among the MoE layers "
           "(decoder_sparse_step or moe_layer_freq != 1, mlp_only_layers), chunked "
           "attention layers, ALiBi, encoder-decoder models, other model types.\n"
           MP_CLI_EXIT_CODES);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status >= 0)
    goto out;
  if (rest == NULL || rest[0] == NULL || strcmp (rest[0], "hf") != 0)
    status = mp_cli_usage (ctx, rest && rest[0] ? "the only import format is 'hf'"
                                                : "import needs a format: hf");
  else if (rest[1] == NULL || rest[2] != NULL)
    status = mp_cli_usage (ctx, "import hf needs exactly one config.json");
  else if (seq_len < 0 || seq_len > MP_HF_MAX_SEQ_LEN)
    status = mp_cli_usage (ctx, "--seq-len must be from 1 to 10000000");
  else if (tokens < 0 || (tokens > 0 && tokens < seq_len))
    status = mp_cli_usage (ctx, "--tokens-per-batch must hold at least one sequence");
  else
    {
      MpHfOptions opts = { (guint64) seq_len, (guint64) tokens };
      status = import_hf (rest[1], output, &opts);
    }
out:
  g_free (output);
  return status;
}
