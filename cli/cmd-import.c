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
                          "Parameters: %.0f (%s), %s active per token. The training block "
                          "is mpplan's default; edit it.", m->name, path, m->params_total,
                          total, active);
}

static int
import_hf (const char *path, const char *output)
{
  GError *error = NULL;
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(MpModel) m = mp_model_load_hf (path, notes, &error);
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
  const GOptionEntry entries[] = {
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
      "Write the model YAML to FILE (atomically; default stdout)", "FILE" },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &rest, NULL, NULL },
    G_OPTION_ENTRY_NULL
  };
  g_autoptr(GOptionContext) ctx = g_option_context_new ("hf CONFIG.json");
  g_option_context_set_help_enabled (ctx, FALSE);
  g_option_context_set_summary (
      ctx, "Turn a Hugging Face config.json (gpt2, llama, mistral, mixtral, qwen2, qwen3, "
           "qwen3_moe, qwen2_moe, deepseek_v2, deepseek_v3, gpt_oss, bert) into mpplan's "
           "model YAML. `plan -m`, `compare -m` and "
           "`describe` also read a config.json directly.");
  g_option_context_set_description (
      ctx, "Keys and aliases: num_hidden_layers|n_layer, hidden_size|n_embd, "
           "num_attention_heads|n_head, num_key_value_heads, head_dim, intermediate_size|"
           "n_inner (MoE: moe_intermediate_size first), num_local_experts|num_experts, "
           "num_experts_per_tok|experts_per_token, shared experts (n_shared_experts, "
           "shared_expert_intermediate_size), first_k_dense_replace, vocab_size, max_position_embeddings|n_positions, "
           "hidden_act|activation_function (silu in a gated family: swiglu; gelu*: gelu), "
           "rms_norm_eps (rmsnorm) or layer_norm_epsilon|layer_norm_eps (layernorm), "
           "rope_theta|rope_parameters|rope_scaling (rotary), tie_word_embeddings, "
           "attention_bias|mlp_bias, torch_dtype.\n"
           "Refused by name (exit 2): multi-head latent attention (q_lora_rank, "
           "kv_lora_rank), dense layers among the MoE layers (decoder_sparse_step or "
           "moe_layer_freq != 1, mlp_only_layers), alternating sliding-window layers "
           "(layer_types), encoder-decoder models, other "
           "model types. A sliding window shorter than the context sets seq_len to the "
           "window (a note on stderr): up to it, windowed attention costs what full "
           "attention does.\n" MP_CLI_EXIT_CODES);
  g_option_context_add_main_entries (ctx, entries, NULL);
  int status = mp_cli_parse (ctx, &argc, &argv, do_help);
  if (status >= 0)
    goto out;
  if (rest == NULL || rest[0] == NULL || strcmp (rest[0], "hf") != 0)
    status = mp_cli_usage (ctx, rest && rest[0] ? "the only import format is 'hf'"
                                                : "import needs a format: hf");
  else if (rest[1] == NULL || rest[2] != NULL)
    status = mp_cli_usage (ctx, "import hf needs exactly one config.json");
  else
    status = import_hf (rest[1], output);
out:
  g_free (output);
  return status;
}
