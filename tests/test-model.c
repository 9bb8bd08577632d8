/* test-model.c - the model IR against published parameter counts and the closed forms of
 * Narayanan et al. 2021 and Korthikanti et al. 2022; the loader's checks on bad input.
 *
 * Zoo files are found through MPPLAN_DATADIR (the Makefile sets it to examples/); the
 * fixtures in tests/data and tests/bad through the source tree. */
#include "config.h"
#include "test-util.h"

#include "model/model.h"
#include "common/error.h"
#include "common/output.h"
#include "common/yamldoc.h"
#include "common/zoo.h"

#include <string.h>

/* ---- helpers ----------------------------------------------------------------------- */

static MpModel *
load_ok (const char *name)
{
  GError *error = NULL;
  MpModel *m = mp_model_load (name, &error);
  if (m == NULL)
    fail_msg ("%s: %s", name, error->message);
  return m;
}

static MpModel *
load_text (const char *text)
{
  GError *error = NULL;
  MpModel *m = mp_model_load_data ("test.yaml", text, strlen (text), &error);
  if (m == NULL)
    fail_msg ("test.yaml: %s", error->message);
  return m;
}

/* Loads TEXT expecting failure; returns the message (caller frees). */
static char *
load_text_error (const char *text)
{
  GError *error = NULL;
  MpModel *m = mp_model_load_data ("bad.yaml", text, strlen (text), &error);
  assert_null (m);
  assert_non_null (error);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  char *msg = g_strdup (error->message);
  g_error_free (error);
  return msg;
}

static const MpOp *
find_op (const MpLayer *layer, const char *name)
{
  for (guint i = 0; i < layer->n_ops; i++)
    if (strcmp (layer->ops[i].name, name) == 0)
      return &layer->ops[i];
  fail_msg ("%s has no op %s", layer->name, name);
  return NULL;
}

static const MpLayer *
first_block (const MpModel *m)
{
  for (guint i = 0; i < m->n_layers; i++)
    if (m->layers[i].kind == MP_LAYER_BLOCK)
      return &m->layers[i];
  fail_msg ("%s has no block", m->name);
  return NULL;
}

static void
check_params (const char *zoo, double published, double rtol)
{
  g_autoptr(MpModel) m = load_ok (zoo);
  mp_assert_close (m->params_total, published, rtol);
}

/* A GPT in the shape the closed forms assume: learned positions, tied, gelu, ffn 4h. */
static const char gpt_text[] =
  "name: gpt\n"
  "layers: 4\nhidden: 512\nheads: 8\nvocab: 1000\nseq_len: 128\n"
  "tied_embeddings: %s\nkv_heads: %d\n";

static MpModel *
load_gpt (gboolean tied, int kv_heads)
{
  g_autofree char *text = g_strdup_printf (gpt_text, tied ? "true" : "false", kv_heads);
  return load_text (text);
}

/* ---- published parameter counts ----------------------------------------------------- */

static void
test_model_gpt3_175b_params (void **state)
{
  check_params ("gpt3-175b", 174.6e9, 0.005);
}

static void
test_model_gpt3_family_params (void **state)
{
  /* Brown et al. 2020 Table 2.1 (rounded; vocab padded to 51200 adds ~0.7M). */
  check_params ("gpt3-125m", 125e6, 0.01);
  check_params ("gpt3-1.3b", 1.3e9, 0.02);
  check_params ("gpt3-13b", 13.0e9, 0.01);
}

static void
test_model_gpt2_124m_params (void **state)
{
  /* Hugging Face GPT2Model: 124,439,808 (wte + wpe + 12 blocks + ln_f). */
  check_params ("gpt2-124m", 124439808, 1e-12);
}

static void
test_model_llama2_7b_params (void **state)
{
  check_params ("llama2-7b", 6.74e9, 0.005);
}

static void
test_model_llama3_8b_params (void **state)
{
  check_params ("llama3-8b", 8.03e9, 0.005);
}

static void
test_model_llama3_70b_params (void **state)
{
  check_params ("llama3-70b", 70.6e9, 0.005);
}

static void
test_model_llama3_405b_params (void **state)
{
  check_params ("llama3-405b", 405e9, 0.005);
}

static void
test_model_mixtral_total_and_active_params (void **state)
{
  g_autoptr(MpModel) m = load_ok ("mixtral-8x7b");
  mp_assert_close (m->params_total, 46.7e9, 0.005);
  mp_assert_close (m->params_active, 12.9e9, 0.005);
}

/* ---- MoE (moe14): the zoo's MoE models against their published sizes ------------------ */

/* Forward FLOPs per token from a published count of ACTIVE weights outside the input
 * embedding (a lookup): 2 per weight (biases and norm gains are a rounding error) plus
 * the attention core's 4 s q per block. */
static double
moe_fwd_flops (const MpModel *m, double active)
{
  double q = (double) m->heads * (double) m->head_dim;
  return 2 * active + 4.0 * (double) m->seq_len * q * (double) m->n_blocks;
}

static void
test_model_mixtral_8x22b_published (void **state)
{
  /* Mistral AI (April 2024): 141B parameters, 39B active. */
  g_autoptr(MpModel) m = load_ok ("mixtral-8x22b");
  mp_assert_close (m->params_total, 141e9, 0.005);
  mp_assert_close (m->params_active, 39e9, 0.005);
  mp_assert_close (m->fwd_flops_per_token, moe_fwd_flops (m, 39e9 - m->params_embedding),
                   0.005);
}

static void
test_model_qwen3_235b_published (void **state)
{
  /* Qwen3 report Table 2: 235B total, 22B activated. The active figure has two
   * significant digits (21.5B to 22.5B); the config's is 22.19B. */
  g_autoptr(MpModel) m = load_ok ("qwen3-235b-a22b");
  mp_assert_close (m->params_total, 235e9, 0.005);
  mp_assert_close (m->params_active, 22e9, 0.5 / 22);
  assert_int_equal (m->head_dim, 128);            /* not hidden / heads = 64 */
  mp_assert_close (find_op (first_block (m), "qkv")->gemm_n, (64 + 2 * 4) * 128.0, 0);
  mp_assert_close (m->fwd_flops_per_token, moe_fwd_flops (m, 22e9 - m->params_embedding),
                   0.5 / 22);
}

static void
test_model_qwen3_30b_published (void **state)
{
  /* Qwen3 report Table 2: 30.5B total, 3.3B activated (the config gives 3.35B, as
   * tests/test-import.c finds from the same config.json). */
  g_autoptr(MpModel) m = load_ok ("qwen3-30b-a3b");
  mp_assert_close (m->params_total, 30.5e9, 0.005);
  mp_assert_close (m->params_active, 3.3e9, 0.02);
}

static void
test_model_gpt_oss_120b_published (void **state)
{
  /* gpt-oss model card Table 1: 116.83B total, 5.13B active (the input embedding not
   * counted as active); the 2304 sink logits are a rounding error of either. */
  g_autoptr(MpModel) m = load_ok ("gpt-oss-120b");
  mp_assert_close (m->params_total, 116.83e9, 0.005);
  mp_assert_close (m->params_active - m->params_embedding, 5.13e9, 0.005);
  /* Biased experts and router: the expert up/gate projection keeps 2 ffn biases. */
  const MpLayer *b = first_block (m);
  mp_assert_close (find_op (b, "expert_fc1")->params, 128 * (2880.0 * 5760 + 5760), 0);
  mp_assert_close (find_op (b, "router")->params, 128 * 2880.0 + 128, 0);
  /* Half the blocks see the last 128 keys only: the full-square core counts min(s, W). */
  double q = 64 * 64.0, cores = 4 * q * (18 * 4096.0 + 18 * 128.0);
  mp_assert_close (m->fwd_flops_per_token, 2 * 5.13e9 + cores, 0.005);
  assert_int_equal (m->layers[1].window, 128);
  assert_int_equal (m->layers[2].window, 0);
}

/* DeepSeek-V3 whole (MLA + shared experts + 3 dense blocks): the report's 671B total and
 * 37B activated per token, which DeepSeek's README_WEIGHTS.md gives as 36.6B with the
 * 0.9B output head (the main model, its MTP module apart; tests/data/hf/README.md): as
 * for gpt-oss, without the input embedding lookup. Forward FLOPs from the active weights
 * plus the latent attention core, s (qk + v) 2 FLOPs per head and token: scores over
 * the 192-wide q/k heads, the weighted sum over the 128-wide values. */
static void
test_model_deepseek_v3_published (void **state)
{
  g_autoptr(MpModel) m = load_ok ("deepseek-v3");
  mp_assert_close (m->params_total, 671e9, 0.005);
  mp_assert_close (m->params_active - m->params_embedding, 36.6e9, 0.005);
  double core = 2.0 * (double) m->seq_len * 128 * (192 + 128) * 61;
  mp_assert_close (m->fwd_flops_per_token,
                   2 * (m->params_active - m->params_embedding) + core, 0.005);
  /* What an inference cache keeps per token: the 512 latent and the 64-wide rotary key,
   * not 2 x 128 heads x 192 (DeepSeek-V2 report, sec. 2.1.2). */
  mp_assert_close (m->kv_cache_bytes_per_token, 61 * (512 + 64) * 2.0, 0);
}

/* DeepSeek-V3's MoE side (its attention is multi-head latent attention, which this test
 * leaves plain): 61 blocks, the first 3 dense with an 18432 MLP, then 256 routed experts
 * of 2048 (top-8) and one shared expert of 2048 (DeepSeek-V3 config.json). */
static const char deepseek_moe_text[] =
  "layers: 61\nhidden: 7168\nheads: 128\nffn_hidden: 18432\nvocab: 129280\n"
  "seq_len: 4096\nactivation: swiglu\nnorm: rmsnorm\nposition: rotary\nbias: false\n"
  "tied_embeddings: false\nexperts: 256\nexperts_per_token: 8\nmoe_ffn_hidden: 2048\n"
  "shared_experts: 1\nfirst_k_dense: 3\n";

static void
test_model_shared_experts_and_first_k_dense (void **state)
{
  g_autoptr(MpModel) m = load_text (deepseek_moe_text);
  double h = 7168, dense = 18432, f = 2048;
  /* The first three blocks are dense, the rest MoE. */
  for (guint i = 1; i <= 61; i++)
    assert_int_equal (m->layers[i].moe, i > 3);
  const MpLayer *d = &m->layers[1], *e = &m->layers[4];
  mp_assert_close (find_op (d, "fc1")->params, 2 * dense * h, 0);
  mp_assert_close (find_op (e, "shared_fc1")->params, 2 * f * h, 0);
  mp_assert_close (find_op (e, "shared_fc2")->active_params, f * h, 0);
  mp_assert_close (find_op (e, "expert_fc1")->params, 256 * 2 * f * h, 0);
  /* MLP weights in all: 3 dense blocks, 58 of (256 routed + 1 shared + the router);
   * 657.7B of DeepSeek-V3's 671B (the rest: attention and embeddings). */
  double mlp = 3 * 3 * dense * h + 58 * (257 * 3 * f * h + 256 * h);
  double sum = 0;
  for (guint i = 1; i <= 61; i++)
    for (guint j = 0; j < m->layers[i].n_ops; j++)
      {
        const MpOp *op = &m->layers[i].ops[j];
        if (op->kind == MP_OP_ROUTER || strstr (op->name, "fc") != NULL)
          sum += op->params;
      }
  mp_assert_close (sum, mlp, 1e-12);
  mp_assert_close (mlp, 657.7e9, 0.001);
  /* Active per MoE block: 8 routed + 1 shared expert and the router. */
  double active = 0;
  for (guint j = 0; j < e->n_ops; j++)
    if (e->ops[j].kind == MP_OP_ROUTER || strstr (e->ops[j].name, "fc") != NULL)
      active += e->ops[j].active_params;
  mp_assert_close (active, 9 * 3 * f * h + 256 * h, 1e-12);
  /* The YAML it prints reads back to the same model. */
  g_autofree char *yaml = mp_model_to_yaml (m, NULL);
  g_autoptr(MpModel) back = load_text (yaml);
  mp_assert_close (back->params_total, m->params_total, 0);
  assert_int_equal (back->first_k_dense, 3);
  assert_int_equal (back->shared_experts, 1);
}

static void
test_model_moe_keys_refused_on_bad_input (void **state)
{
  static const struct {
    const char *text, *want;
  } cases[] = {
    { "layers: 2\nhidden: 64\nheads: 4\nvocab: 10\nseq_len: 8\nshared_experts: 1\n",
      "'shared_experts' needs 'experts' > 0" },
    { "layers: 2\nhidden: 64\nheads: 4\nvocab: 10\nseq_len: 8\nexperts: 4\n"
      "experts_per_token: 2\nfirst_k_dense: 2\n", "leaves none of the 2 blocks" },
    { "layers: 2\nhidden: 64\nheads: 4\nvocab: 10\nseq_len: 8\nexperts: 4\n"
      "experts_per_token: 2\nload_imbalance: 0.5\n", "'load_imbalance' = 0.5" },
    { "layers: 2\nhidden: 64\nheads: 4\nvocab: 10\nseq_len: 8\nexperts: 4\n"
      "experts_per_token: 2\ncapacity_factor: 9\n", "'capacity_factor' = 9" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *msg = load_text_error (cases[i].text);
      if (strstr (msg, cases[i].want) == NULL || strstr (msg, "bad.yaml:") == NULL)
        fail_msg ("case %zu: '%s' lacks '%s'", i, msg, cases[i].want);
    }
}

/* routing: spread by default (a trained router's balanced spread), blocked as NeMo
 * AutoModel's FakeBalancedGate; it reads back from the YAML the model prints, and a value
 * that is neither, or the key on a dense model, is refused naming the key. */
static void
test_model_moe_routing_key (void **state)
{
  (void) state;
  static const char moe[] = "layers: 2\nhidden: 64\nheads: 4\nvocab: 10\nseq_len: 8\n"
                            "experts: 8\nexperts_per_token: 2\n";
  g_autoptr(MpModel) spread = load_text (moe);
  assert_int_equal (spread->routing, MP_ROUTING_SPREAD);
  g_autofree char *text = g_strconcat (moe, "routing: blocked\n", NULL);
  g_autoptr(MpModel) blocked = load_text (text);
  assert_int_equal (blocked->routing, MP_ROUTING_BLOCKED);
  g_autofree char *yaml = mp_model_to_yaml (blocked, NULL);
  g_autoptr(MpModel) back = load_text (yaml);
  assert_int_equal (back->routing, MP_ROUTING_BLOCKED);
  MpRouting r = MP_ROUTING_BLOCKED;
  assert_true (mp_routing_from_name ("spread", &r) && r == MP_ROUTING_SPREAD);
  assert_false (mp_routing_from_name ("random", &r));
  assert_string_equal (mp_routing_name (MP_ROUTING_BLOCKED), "blocked");
  g_autofree char *bad = g_strconcat (moe, "routing: random\n", NULL);
  g_autofree char *msg = load_text_error (bad);
  if (strstr (msg, "'routing': unknown value 'random'") == NULL)
    fail_msg ("'%s' does not name the key and value", msg);
  g_autofree char *dense = load_text_error ("layers: 2\nhidden: 64\nheads: 4\nvocab: 10\n"
                                            "seq_len: 8\nrouting: blocked\n");
  if (strstr (dense, "'routing' needs 'experts' > 0") == NULL)
    fail_msg ("'%s' lacks the dense refusal", dense);
}

static void
test_model_bert_large_params (void **state)
{
  check_params ("bert-large", 336e6, 0.02);
}

static void
test_model_mlp_params (void **state)
{
  g_autoptr(MpModel) m = load_ok ("mlp-1024");
  assert_int_equal (m->arch, MP_ARCH_MLP);
  assert_int_equal (m->n_layers, 2);
  mp_assert_close (m->params_total, 1024.0 * 512 + 512 + 512.0 * 256 + 256, 0);
  mp_assert_close (m->params_active, m->params_total, 0);
  mp_assert_close (m->params_embedding, 0, 0);
  /* 2 FLOP per multiply-add forward, twice that backward. */
  mp_assert_close (m->fwd_flops_per_token, 2 * (1024.0 * 512 + 512.0 * 256), 0);
  mp_assert_close (m->train_flops_per_token, 3 * m->fwd_flops_per_token, 0);
}

/* ---- closed forms ------------------------------------------------------------------- */

/* Narayanan et al. 2021 eq. 2: P = 12 L h^2 (1 + 13/(12h) + (V + s)/(12 L h)); it leaves
 * out the final norm (2h), which the IR has. */
static void
test_model_narayanan_param_formula (void **state)
{
  static const char *const zoo[] = { "gpt3-125m", "gpt3-1.3b", "gpt3-175b", "gpt2-124m",
                                     "tiny-gpt" };
  for (guint i = 0; i < G_N_ELEMENTS (zoo); i++)
    {
      g_autoptr(MpModel) m = load_ok (zoo[i]);
      double L = m->n_blocks, h = m->hidden, V = m->vocab, s = m->seq_len;
      double closed = 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h));
      mp_assert_close (m->params_total - 2 * h, closed, 1e-12);
    }
}

/* Korthikanti et al. 2022 eq. 7 per token (divide by B s): training FLOPs
 * 72 L h^2 (1 + s/(6h) + V/(12 L h)), forward one third of it. */
static void
test_model_flops_closed_form (void **state)
{
  static const char *const zoo[] = { "gpt3-175b", "gpt3-1.3b", "gpt2-124m", "tiny-gpt" };
  for (guint i = 0; i < G_N_ELEMENTS (zoo); i++)
    {
      g_autoptr(MpModel) m = load_ok (zoo[i]);
      double L = m->n_blocks, h = m->hidden, V = m->vocab, s = m->seq_len;
      double closed = 72 * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
      mp_assert_close (m->train_flops_per_token, closed, 1e-12);
      mp_assert_close (m->fwd_flops_per_token, closed / 3, 1e-12);
    }
}

/* Korthikanti et al. 2022 Table 2: s b h (34 + 5 a s / h) bytes per layer (b = 1), of which
 * 10 s b h are replicated under tensor parallelism, 24 s b h split and 5 a s^2 b scores. */
static void
test_model_korthikanti_activation_per_layer (void **state)
{
  g_autoptr(MpModel) m = load_ok ("gpt3-175b");
  const MpLayer *b = first_block (m);
  double h = m->hidden, s = m->seq_len, a = m->heads;
  mp_assert_close (s * (b->act_bytes + b->act_rep_bytes + b->act_score_bytes),
                   s * h * (34 + 5 * a * s / h), 1e-12);
  mp_assert_close (b->act_rep_bytes, 10 * h, 1e-12);
  mp_assert_close (b->act_bytes, 24 * h, 1e-12);
  mp_assert_close (b->act_score_bytes, 5 * a * s, 1e-12);
}

/* fp32 training keeps 4-byte activations; the 1-byte dropout masks stay 1 byte. */
static void
test_model_fp32_activations_double (void **state)
{
  g_autoptr(MpModel) m = load_ok ("tiny-gpt");
  const MpLayer *b = first_block (m);
  double h = m->hidden, s = m->seq_len, a = m->heads;
  assert_int_equal (m->precision, MP_DTYPE_FP32);
  mp_assert_close (b->act_bytes, 48 * h, 1e-12);
  mp_assert_close (b->act_rep_bytes, 4 * 4 * h + 2 * h, 1e-12);  /* 4 inputs + 2 masks */
  mp_assert_close (b->act_score_bytes, 9 * a * s, 1e-12);
}

/* A model trained without dropout (`dropout: false`: Llama, Qwen, ...) keeps no 1-byte
 * masks: a block keeps 2 h per token less (its two residuals'), the embedding nothing, and
 * the residuals no longer write the mask; the rest is the same. */
static void
test_model_no_dropout_keeps_no_masks (void **state)
{
  const char *text = "name: t\nlayers: 2\nhidden: 256\nheads: 4\nvocab: 1000\nseq_len: 128\n"
                     "activation: swiglu\nnorm: rmsnorm\nposition: rotary\nbias: false\n";
  g_autofree char *off = g_strconcat (text, "dropout: false\n", NULL);
  g_autoptr(MpModel) with = load_text (text);
  g_autoptr(MpModel) without = load_text (off);
  assert_false (with->no_dropout);
  assert_true (without->no_dropout);
  double h = with->hidden;
  const MpLayer *bw = first_block (with), *bo = first_block (without);
  mp_assert_close (bw->act_rep_bytes - bo->act_rep_bytes, 2 * h, 1e-12);
  mp_assert_close (bw->act_bytes, bo->act_bytes, 1e-12);
  mp_assert_close (bw->act_score_bytes, bo->act_score_bytes, 1e-12);
  mp_assert_close (bw->fwd_bytes - bo->fwd_bytes, 2 * h, 1e-12);
  assert_int_equal (with->layers[0].kind, MP_LAYER_EMBEDDING);
  mp_assert_close (with->layers[0].act_rep_bytes, h, 1e-12);
  mp_assert_close (without->layers[0].act_rep_bytes, 0, 1e-12);
  mp_assert_close (with->params_total, without->params_total, 1e-12);
  /* the zoo's Llama 3 is marked so: 23.75 h split and 8 h replicated a token */
  g_autoptr(MpModel) llama = load_ok ("llama3-405b");
  assert_true (llama->no_dropout);
  mp_assert_close (first_block (llama)->act_rep_bytes, 8 * (double) llama->hidden, 1e-12);
}

/* ---- structure ---------------------------------------------------------------------- */

static void
test_model_tied_embeddings_counted_once (void **state)
{
  g_autoptr(MpModel) tied = load_gpt (TRUE, 8);
  g_autoptr(MpModel) untied = load_gpt (FALSE, 8);
  double vh = 1000.0 * 512;
  mp_assert_close (untied->params_total - tied->params_total, vh, 0);
  mp_assert_close (tied->params_embedding, (1000.0 + 128) * 512, 0);
  const MpLayer *head = &tied->layers[tied->n_layers - 1];
  assert_int_equal (head->kind, MP_LAYER_HEAD);
  const MpOp *out = find_op (head, "output");
  mp_assert_close (out->params, 0, 0);
  /* The output GEMM still costs the same FLOPs. */
  mp_assert_close (out->fwd_flops, 2 * vh, 0);
  mp_assert_close (find_op (&untied->layers[untied->n_layers - 1], "output")->params, vh, 0);
}

static void
test_model_gqa_reduces_qkv_params (void **state)
{
  g_autoptr(MpModel) mha = load_gpt (TRUE, 8);
  g_autoptr(MpModel) gqa = load_gpt (TRUE, 2);
  const MpOp *q_mha = find_op (first_block (mha), "qkv");
  const MpOp *q_gqa = find_op (first_block (gqa), "qkv");
  double h = 512, d = 64;
  /* n = (heads + 2 kv_heads) head_dim, plus the bias. */
  mp_assert_close (q_mha->gemm_n, 3 * h, 0);
  mp_assert_close (q_gqa->gemm_n, (8 + 2 * 2) * d, 0);
  mp_assert_close (q_gqa->params, h * (8 + 4) * d + (8 + 4) * d, 0);
  mp_assert_close (mha->params_total - gqa->params_total,
                   4 * (2 * (8 - 2) * d * h + 2 * (8 - 2) * d), 0);
  /* Fewer K and V heads also means fewer saved K and V bytes. */
  assert_true (first_block (gqa)->act_bytes < first_block (mha)->act_bytes);
  mp_assert_close (find_op (first_block (gqa), "attn_core")->kv_heads, 2, 0);
}

static void
test_model_moe_total_vs_active (void **state)
{
  g_autoptr(MpModel) m = load_ok ("mixtral-8x7b");
  const MpLayer *b = first_block (m);
  assert_true (b->moe);
  const MpOp *fc1 = find_op (b, "expert_fc1");
  const MpOp *router = find_op (b, "router");
  assert_int_equal (fc1->split, MP_SPLIT_EXPERT);
  mp_assert_close (fc1->count, 2, 0);
  mp_assert_close (fc1->params, 8 * 2.0 * 14336 * 4096, 0);
  mp_assert_close (fc1->active_params, 2 * 2.0 * 14336 * 4096, 0);
  mp_assert_close (router->gemm_n, 8, 0);
  mp_assert_close (router->params, 8.0 * 4096, 0);
  /* Each of 32 blocks keeps 6 idle experts of 3 ffn x h weights. */
  mp_assert_close (m->params_total - m->params_active, 32 * 6 * 3.0 * 14336 * 4096, 1e-12);
  /* FLOPs follow the active experts: 2 FLOP per active weight in the expert GEMMs. */
  mp_assert_close (fc1->fwd_flops, 2 * fc1->active_params, 0);
}

static void
test_model_moe_biases_counted (void **state)
{
  g_autofree char *path = g_build_filename (MPPLAN_SRCDIR, "tests", "data", "model-moe.yaml",
                                            NULL);
  g_autoptr(MpModel) m = load_ok (path);
  const MpLayer *b = first_block (m);
  double h = 256, f = 512, e = 4, k = 2;
  mp_assert_close (find_op (b, "router")->params, e * h + e, 0);
  mp_assert_close (find_op (b, "expert_fc1")->params, e * (h * f + f), 0);
  mp_assert_close (find_op (b, "expert_fc2")->active_params, k * (f * h + h), 0);
}

/* Every layer's sums equal its ops', and the model's totals equal the layers'. */
static void
test_model_sums_consistent (void **state)
{
  g_auto(GStrv) names = mp_model_zoo_list ();
  for (char **n = names; *n; n++)
    {
      g_autoptr(MpModel) m = load_ok (*n);
      double params = 0, active = 0, fwd = 0, bwd = 0;
      for (guint i = 0; i < m->n_layers; i++)
        {
          const MpLayer *l = &m->layers[i];
          double lp = 0, lf = 0, lb = 0, la = 0;
          for (guint j = 0; j < l->n_ops; j++)
            {
              lp += l->ops[j].params;
              lf += l->ops[j].fwd_flops;
              lb += l->ops[j].bwd_flops;
              la += l->ops[j].act_bytes + l->ops[j].act_rep_bytes + l->ops[j].act_score_bytes;
            }
          mp_assert_close (l->params, lp, 1e-12);
          mp_assert_close (l->fwd_flops, lf, 1e-12);
          mp_assert_close (l->bwd_flops, lb, 1e-12);
          mp_assert_close (l->act_bytes + l->act_rep_bytes + l->act_score_bytes, la, 1e-12);
          params += l->params;
          active += l->active_params;
          fwd += l->fwd_flops;
          bwd += l->bwd_flops;
        }
      mp_assert_close (m->params_total, params, 1e-12);
      mp_assert_close (m->params_active, active, 1e-12);
      mp_assert_close (m->fwd_flops_per_token, fwd, 1e-12);
      mp_assert_close (m->train_flops_per_token, fwd + bwd, 1e-12);
      assert_true (m->params_active <= m->params_total);
    }
}

static void
test_model_block_op_order (void **state)
{
  static const char *const want[] = { "norm1", "qkv", "rotary", "attn_core", "attn_out",
                                      "attn_residual", "norm2", "fc1", "swiglu", "fc2",
                                      "mlp_residual" };
  static const MpSplit splits[] = { MP_SPLIT_NONE, MP_SPLIT_COLUMN, MP_SPLIT_HEADS,
                                    MP_SPLIT_HEADS, MP_SPLIT_ROW, MP_SPLIT_NONE, MP_SPLIT_NONE,
                                    MP_SPLIT_COLUMN, MP_SPLIT_COLUMN, MP_SPLIT_ROW,
                                    MP_SPLIT_NONE };
  g_autoptr(MpModel) m = load_ok ("llama2-7b");
  const MpLayer *b = first_block (m);
  assert_int_equal (b->n_ops, G_N_ELEMENTS (want));
  for (guint i = 0; i < b->n_ops; i++)
    {
      assert_string_equal (b->ops[i].name, want[i]);
      assert_int_equal (b->ops[i].split, splits[i]);
    }
  assert_string_equal (m->layers[0].name, "embedding");
  assert_string_equal (m->layers[1].name, "block.0");
  assert_string_equal (m->layers[m->n_layers - 1].name, "head");
  assert_int_equal (m->n_layers, 32 + 2);
  /* swiglu: fc1 holds gate and up (2 ffn), fc2 takes ffn. */
  mp_assert_close (find_op (b, "fc1")->gemm_n, 2 * 11008, 0);
  mp_assert_close (find_op (b, "fc2")->gemm_k, 11008, 0);
}

static void
test_model_defaults (void **state)
{
  g_autoptr(MpModel) m = load_text ("layers: 2\nhidden: 256\nheads: 4\nvocab: 512\n"
                                    "seq_len: 1024\n");
  assert_string_equal (m->name, "test");
  assert_int_equal (m->arch, MP_ARCH_TRANSFORMER);
  assert_int_equal (m->kv_heads, 4);
  assert_int_equal (m->head_dim, 64);
  assert_int_equal (m->ffn_hidden, 1024);
  assert_int_equal (m->activation, MP_ACT_GELU);
  assert_int_equal (m->norm, MP_NORM_LAYERNORM);
  assert_int_equal (m->position, MP_POS_LEARNED);
  assert_true (m->bias);
  assert_true (m->tied_embeddings);
  assert_int_equal (m->experts, 0);
  assert_int_equal (m->precision, MP_DTYPE_BF16);
  assert_int_equal (m->optimizer, MP_OPTIM_ADAM);
  assert_int_equal (m->global_batch, 1024);   /* 2^20 tokens / 1024 */
  double w, g, o;
  mp_model_state_bytes_per_param (m, &w, &g, &o);
  mp_assert_close (w + g + o, 16, 0);
}

static void
test_model_swiglu_default_ffn (void **state)
{
  g_autoptr(MpModel) m = load_text ("layers: 1\nhidden: 4096\nheads: 32\nvocab: 512\n"
                                    "seq_len: 128\nactivation: swiglu\n");
  assert_int_equal (m->ffn_hidden, 11008);      /* Llama: 8h/3 rounded up to 256 */
}

static void
test_model_state_bytes_fp32_adam (void **state)
{
  g_autoptr(MpModel) m = load_ok ("tiny-gpt");
  double w, g, o;
  mp_model_state_bytes_per_param (m, &w, &g, &o);
  mp_assert_close (w, 4, 0);
  mp_assert_close (g, 4, 0);
  mp_assert_close (o, 8, 0);
}

/* ---- loading ------------------------------------------------------------------------ */

static void
test_model_load_data_works (void **state)
{
  g_autofree char *path = g_build_filename (MPPLAN_SRCDIR, "tests", "data", "model-small.yaml",
                                            NULL);
  g_autofree char *text = NULL;
  gsize len = 0;
  assert_true (g_file_get_contents (path, &text, &len, NULL));
  GError *error = NULL;
  g_autoptr(MpModel) m = mp_model_load_data ("small.yaml", text, len, &error);
  assert_null (error);
  assert_non_null (m);
  assert_string_equal (m->name, "small-llama");
  assert_string_equal (m->source, "small.yaml");
  assert_int_equal (m->kv_heads, 2);
  assert_int_equal (m->ffn_hidden, 1536);       /* 8 * 512 / 3 = 1365.3 -> 1536 */
  assert_int_equal (m->global_batch, 16);
  /* The same file loaded by path gives the same model. */
  g_autoptr(MpModel) f = load_ok (path);
  mp_assert_close (f->params_total, m->params_total, 0);
  assert_string_equal (f->source, path);
  /* By hand: per block 2 rmsnorms (h), qkv h (8 + 4) 64, out (8 64) h, fc1 h 2f, fc2 f h. */
  double h = 512, f_ = 1536, V = 1000;
  double block = 2 * h + h * 12 * 64 + 8 * 64 * h + h * 2 * f_ + f_ * h;
  mp_assert_close (m->params_total, 2 * block + V * h + h + V * h, 0);
}

static void
test_model_zoo_lists_all_models (void **state)
{
  static const char *const want[] = {
    "mlp-1024", "gpt3-125m", "gpt3-1.3b", "gpt3-13b", "gpt3-175b", "llama2-7b", "llama2-70b",
    "llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b", "bert-large", "tiny-gpt",
    "gpt2-124m", "mixtral-8x22b", "qwen3-235b-a22b", "gpt-oss-120b", "tiny-moe", "qwen3-30b-a3b",
    "deepseek-v3", "llama3.1-405b", "gemma3-27b", "qwen3-32b"
  };
  g_auto(GStrv) names = mp_model_zoo_list ();
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    {
      if (!g_strv_contains ((const char *const *) names, want[i]))
        fail_msg ("zoo lacks %s", want[i]);
      g_autoptr(MpModel) m = load_ok (want[i]);
      g_autofree char *src = g_strconcat ("zoo:", want[i], NULL);
      assert_string_equal (m->name, want[i]);
      assert_string_equal (m->source, src);
    }
}

static void
test_model_unknown_zoo_name_lists_names (void **state)
{
  GError *error = NULL;
  MpModel *m = mp_model_load ("gpt3-175", &error);
  assert_null (m);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  assert_non_null (strstr (error->message, "did you mean 'gpt3-175b'"));
  assert_non_null (strstr (error->message, "llama3-8b"));
  g_error_free (error);
}

/* A file with three problems reports three located messages. */
static void
test_model_errors_collected (void **state)
{
  g_autofree char *msg = load_text_error ("architecture: transformer\n"
                                          "layers: 0\n"
                                          "hidden: 256\nheads: 4\nvocab: 512\nseq_len: 64\n"
                                          "hiden: 3\n"
                                          "norm: rmsnrom\n");
  g_auto(GStrv) lines = g_strsplit (msg, "\n", -1);
  assert_int_equal (g_strv_length (lines), 3);
  g_autoptr(GRegex) re = g_regex_new ("^bad\\.yaml:[0-9]+:[0-9]+: ", 0, 0, NULL);
  for (guint i = 0; i < 3; i++)
    if (!g_regex_match (re, lines[i], 0, NULL))
      fail_msg ("not located: %s", lines[i]);
  assert_non_null (strstr (msg, "bad.yaml:7:1: unknown key 'hiden' (did you mean 'hidden'?)"));
  assert_non_null (strstr (msg, "bad.yaml:2:9: 'layers' must be greater than zero"));
  assert_non_null (strstr (msg, "did you mean 'rmsnorm'"));
}

/* Every tests/bad/model-*.yaml is refused with a located message holding its expectation. */
static void
test_model_bad_corpus_refused (void **state)
{
  g_autofree char *dir = g_build_filename (MPPLAN_SRCDIR, "tests", "bad", NULL);
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  assert_non_null (d);
  guint n = 0;
  const char *f;
  while ((f = g_dir_read_name (d)) != NULL)
    {
      if (!g_str_has_prefix (f, "model-") || !g_str_has_suffix (f, ".yaml"))
        continue;
      g_autofree char *path = g_build_filename (dir, f, NULL);
      g_autofree char *text = NULL;
      assert_true (g_file_get_contents (path, &text, NULL, NULL));
      assert_true (g_str_has_prefix (text, "# expect: "));
      g_autofree char *expect = g_strndup (text + 10, strcspn (text + 10, "\n"));
      GError *error = NULL;
      MpModel *m = mp_model_load_file (path, &error);
      if (m != NULL)
        fail_msg ("%s loaded", f);
      g_autofree char *prefix = g_strconcat (path, ":", NULL);
      if (!g_str_has_prefix (error->message, prefix) || !strstr (error->message, expect))
        fail_msg ("%s: wanted '%s', got:\n%s", f, expect, error->message);
      g_error_free (error);
      n++;
    }
  assert_true (n >= 10);
}

/* Every prefix of every zoo file loads or is refused with a located message. */
static void
test_model_truncated_files_never_crash (void **state)
{
  g_auto(GStrv) names = mp_model_zoo_list ();
  for (char **n = names; *n; n++)
    {
      g_autofree char *path = mp_zoo_find ("models", *n);
      g_autofree char *text = NULL;
      gsize len = 0;
      assert_non_null (path);
      assert_true (g_file_get_contents (path, &text, &len, NULL));
      for (gsize cut = 0; cut <= len; cut += 7)
        {
          GError *error = NULL;
          MpModel *m = mp_model_load_data ("cut.yaml", text, cut, &error);
          if (m == NULL)
            {
              assert_non_null (error);
              assert_true (g_str_has_prefix (error->message, "cut.yaml:"));
              g_error_free (error);
            }
          mp_model_free (m);
        }
    }
}

static void
test_model_is_model (void **state)
{
  GError *error = NULL;
  static const char model[] = "architecture: mlp\ninput: 4\nlayers: [{out: 2}]\n";
  static const char cluster[] = "name: c\nnodes: 2\n";
  g_autoptr(MpYamlDoc) a = mp_yaml_load_data ("a", model, strlen (model), &error);
  g_autoptr(MpYamlDoc) b = mp_yaml_load_data ("b", cluster, strlen (cluster), &error);
  assert_non_null (a);
  assert_non_null (b);
  assert_true (mp_model_yaml_is_model (a->root));
  assert_false (mp_model_yaml_is_model (b->root));
}

/* ---- attention (ir14) ------------------------------------------------------------ */

/* The sum of the params of LAYER's ops from FIRST up to (not including) LAST. */
static double
op_params_between (const MpLayer *l, const char *first, const char *last)
{
  double sum = 0;
  gboolean on = FALSE;
  for (guint i = 0; i < l->n_ops; i++)
    {
      on = on || strcmp (l->ops[i].name, first) == 0;
      if (strcmp (l->ops[i].name, last) == 0)
        break;
      if (on)
        sum += l->ops[i].params;
    }
  return sum;
}

/* Training FLOPs per token under PaLM's convention (Chowdhery et al. 2022, app. B):
 * 6 x the parameters of the matrix products + 12 x sum over blocks of heads x head_dim x
 * the keys a query sees (seq_len, or a shorter window). */
static double
palm_flops (const MpModel *m)
{
  double matrices = m->params_total - m->params_embedding
                    + (m->tied_embeddings ? (double) m->vocab * m->hidden : 0);
  double attn = 0;
  for (guint64 b = 0; b < m->n_blocks; b++)
    {
      guint64 w = mp_model_block_window (m, b);
      double keys = w > 0 && w < m->seq_len ? w : m->seq_len;
      double d = m->kv_lora_rank ? (m->head_dim + m->v_head_dim) / 2.0 : m->head_dim;
      attn += 12.0 * m->heads * d * keys;
    }
  return 6 * matrices + attn;
}

/* The new zoo models against their published sizes, and their FLOPs against PaLM's
 * count; sources in each file's header. */
static void
test_model_attn_zoo_published_sizes (void **state)
{
  static const struct {
    const char *name;
    double total, non_embedding;
  } cases[] = {
    { "llama3.1-405b", 405e9, 0 },
    { "gemma3-27b", 27.0e9, 25.6e9 },    /* Gemma 3 report, Table 1: 25,600M */
    { "qwen3-32b", 32.8e9, 31.2e9 },     /* model card */
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(MpModel) m = load_ok (cases[i].name);
      mp_assert_close (m->params_total, cases[i].total, 0.005);
      double output = m->tied_embeddings ? 0 : m->layers[m->n_layers - 1].params;
      if (cases[i].non_embedding > 0)
        mp_assert_close (m->params_total - m->params_embedding - output,
                         cases[i].non_embedding, 0.005);
      mp_assert_close (m->train_flops_per_token, palm_flops (m), 0.005);
    }
}

/* The causal count is the convention of Megatron-LM's num_floating_point_operations: the
 * TFLOP/s Megatron-Bridge publishes (bench/data/published-runs.yaml, source mb-2511, H100
 * rows: Llama 3 8B 744 TFLOP/s at 14,451 tokens/s per GPU, Llama 3.1 405B 737 at 292, both
 * at 8192 tokens) over its tokens/s are these models' causal training FLOPs per token,
 * not the full-square ones (~12% and ~4% more). */
static void
test_model_causal_count_is_megatrons (void **state)
{
  g_autoptr(MpModel) small = load_ok ("llama3-8b");
  g_autoptr(MpModel) big = load_ok ("llama3.1-405b");
  mp_assert_close (small->train_flops_per_token_causal, 744e12 / 14451, 0.005);
  mp_assert_close (big->train_flops_per_token_causal, 737e12 / 292, 0.005);
  assert_true (small->train_flops_per_token > 1.1 * 744e12 / 14451);
}

/* head_dim independent of hidden / heads (Qwen3-32B: 5120 / 64 = 80, head_dim 128):
 * parameters, FLOPs and activations follow head_dim, not hidden / heads. */
static void
test_model_head_dim_independent (void **state)
{
  g_autoptr(MpModel) m = load_ok ("qwen3-32b");
  const MpLayer *b = first_block (m);
  double h = 5120, q = 64 * 128, kv = 8 * 128, s = m->seq_len;
  mp_assert_close (find_op (b, "qkv")->params, h * (q + 2 * kv), 0);
  mp_assert_close (find_op (b, "attn_out")->params, q * h, 0);
  mp_assert_close (find_op (b, "attn_core")->fwd_flops, 4 * s * q, 0);
  mp_assert_close (find_op (b, "attn_core")->act_bytes, 2 * (q + 2 * kv), 0);
  mp_assert_close (find_op (b, "attn_out")->act_bytes, 2 * q, 0);
  /* qk-norm: one head_dim gain for q and one for k. */
  mp_assert_close (find_op (b, "qk_norm")->params, 2 * 128, 0);
}

/* A windowed block's core: full-square FLOPs over min(s, W) keys per query, the causal
 * count W (W + 1) / 2 + (s - W) W pairs per sequence; the pattern picks the blocks. */
static void
test_model_window_flops_causal_count (void **state)
{
  static const char text[] =
    "layers: 6\nhidden: 256\nheads: 4\nvocab: 100\nseq_len: 1000\n"
    "attention: {window: 300, pattern: [window, window, full]}\n";
  g_autoptr(MpModel) m = load_text (text);
  g_autoptr(MpModel) full = load_text ("layers: 6\nhidden: 256\nheads: 4\nvocab: 100\n"
                                       "seq_len: 1000\n");
  double s = 1000, w = 300, q = 256;
  for (guint b = 0; b < 6; b++)
    {
      const MpLayer *l = &m->layers[b + 1];
      gboolean windowed = b % 3 != 2;
      assert_int_equal (l->window, windowed ? 300 : 0);
      assert_int_equal (mp_model_block_window (m, b), windowed ? 300 : 0);
      mp_assert_close (find_op (l, "attn_core")->fwd_flops, 4 * (windowed ? w : s) * q, 0);
      mp_assert_close (find_op (l, "attn_core")->window, windowed ? w : 0, 0);
    }
  /* The causal count: training = 3 x forward; per token = pairs / s. */
  double pairs_w = w * (w + 1) / 2 + (s - w) * w, pairs_full = s * (s + 1) / 2;
  double core_full = 3 * 4 * q / s * (4 * pairs_w + 2 * pairs_full);
  double core_square = 3 * 4 * q * (4 * w + 2 * s);
  mp_assert_close (m->train_flops_per_token_causal,
                   m->train_flops_per_token - core_square + core_full, 1e-12);
  /* Without windows the causal count is (s + 1) / 2s of the square. */
  mp_assert_close (full->train_flops_per_token - full->train_flops_per_token_causal,
                   6 * 3 * 4 * q * (s - (s + 1) / 2), 1e-12);
  /* Parameters do not depend on the window. */
  assert_true (m->params_total == full->params_total);
}

/* DeepSeek-V3's MLA (config.json: hidden 7168, 128 heads, q_lora_rank 1536, kv_lora_rank
 * 512, qk_nope 128, qk_rope 64, v 128): its attention parameters per block by the
 * config's arithmetic, 187,107,328; its GEMMs; its KV cache (kv_lora_rank + rope) x 2
 * bytes x blocks; its core FLOPs 2 s heads (192 + 128). */
static void
test_model_mla_deepseek_v3_attention (void **state)
{
  static const char text[] =
    "layers: 3\nhidden: 7168\nheads: 128\nvocab: 129280\nseq_len: 4096\nffn_hidden: 18432\n"
    "activation: swiglu\nnorm: rmsnorm\nposition: rotary\nbias: false\n"
    "tied_embeddings: false\n"
    "attention:\n  mla: {q_lora_rank: 1536, kv_lora_rank: 512, qk_nope_head_dim: 128,\n"
    "        qk_rope_head_dim: 64, v_head_dim: 128}\n";
  g_autoptr(MpModel) m = load_text (text);
  const MpLayer *b = first_block (m);
  assert_int_equal (m->head_dim, 192);
  assert_int_equal (m->kv_heads, 128);
  mp_assert_close (find_op (b, "q_down")->params, 7168.0 * 1536, 0);
  mp_assert_close (find_op (b, "kv_down")->params, 7168.0 * (512 + 64), 0);
  mp_assert_close (find_op (b, "q_up")->params, 1536.0 * 128 * 192, 0);
  mp_assert_close (find_op (b, "kv_up")->params, 512.0 * 128 * (128 + 128), 0);
  mp_assert_close (find_op (b, "attn_out")->params, 128.0 * 128 * 7168, 0);
  mp_assert_close (op_params_between (b, "q_down", "attn_residual"), 187107328, 0);
  assert_int_equal (find_op (b, "q_down")->split, MP_SPLIT_NONE);
  assert_int_equal (find_op (b, "kv_up")->split, MP_SPLIT_COLUMN);
  mp_assert_close (find_op (b, "attn_core")->fwd_flops, 2 * 4096.0 * 128 * (192 + 128), 0);
  mp_assert_close (m->kv_cache_bytes_per_token, (512 + 64) * 2.0 * 3, 0);
  /* Every GEMM's FLOPs are 2 x its parameters per token. */
  for (guint i = 0; i < b->n_ops; i++)
    if (b->ops[i].kind == MP_OP_GEMM)
      mp_assert_close (b->ops[i].fwd_flops, 2 * b->ops[i].params, 0);
  /* Without q_lora_rank (DeepSeek-V2-Lite) q is projected directly. */
  static const char lite[] =
    "layers: 1\nhidden: 2048\nheads: 16\nvocab: 100\nseq_len: 256\nbias: false\n"
    "attention: {mla: {kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64,"
    " v_head_dim: 128}}\n";
  g_autoptr(MpModel) l = load_text (lite);
  mp_assert_close (find_op (first_block (l), "q_proj")->params, 2048.0 * 16 * 192, 0);
  assert_int_equal (l->q_lora_rank, 0);
}

/* Sinks: one parameter per head and block, no matrix FLOPs; separate attention biases;
 * Gemma's post-norms, geglu and logit soft-capping. */
static void
test_model_attention_options (void **state)
{
  static const char base[] = "layers: 2\nhidden: 256\nheads: 4\nkv_heads: 2\nvocab: 100\n"
                             "seq_len: 64\nbias: false\n";
  g_autoptr(MpModel) plain = load_text (base);
  g_autofree char *t1 = g_strconcat (base, "attention: {sinks: true, bias: qkv}\n", NULL);
  g_autoptr(MpModel) m = load_text (t1);
  double q = 256, kv = 128;
  mp_assert_close (m->params_total - plain->params_total, 2 * (4 + q + 2 * kv), 0);
  assert_true (m->train_flops_per_token == plain->train_flops_per_token);
  mp_assert_close (find_op (first_block (m), "attn_core")->params, 4, 0);
  assert_null (mp_model_attention_extras (m));           /* exec runs sinks */
  assert_true (mp_model_qkv_bias (m) && !mp_model_out_bias (m));
  g_autofree char *t2 = g_strconcat (base, "activation: geglu\npost_norms: true\n"
                                     "logit_softcap: 30\nembed_scale: true\n", NULL);
  g_autoptr(MpModel) g = load_text (t2);
  const MpLayer *b = first_block (g);
  mp_assert_close (find_op (b, "fc1")->params, 256.0 * 2 * g->ffn_hidden, 0);
  mp_assert_close (find_op (b, "post_attn_norm")->params, 2 * 256, 0);  /* layernorm */
  mp_assert_close (find_op (b, "post_mlp_norm")->params, 2 * 256, 0);
  const MpLayer *head = &g->layers[g->n_layers - 1];
  mp_assert_close (find_op (head, "logit_softcap")->act_bytes, 2 * 100.0, 0);
  find_op (&g->layers[0], "embed_scale");
}

/* Every attention key survives mp_model_to_yaml and loading it back. */
static void
test_model_attention_yaml_round_trips (void **state)
{
  static const char *const texts[] = {
    "layers: 12\nhidden: 256\nheads: 4\nvocab: 100\nseq_len: 512\n"
    "attention: {window: 128, pattern: [window, full], sinks: true, qk_norm: true,"
    " bias: qkv, softcap: 50}\npost_norms: true\nembed_scale: true\nlogit_softcap: 30\n"
    "activation: geglu\n",
    "layers: 2\nhidden: 512\nheads: 8\nvocab: 100\nseq_len: 128\n"
    "attention: {mla: {q_lora_rank: 96, kv_lora_rank: 64, qk_nope_head_dim: 32,"
    " qk_rope_head_dim: 16, v_head_dim: 32}}\n",
  };
  for (gsize i = 0; i < G_N_ELEMENTS (texts); i++)
    {
      g_autoptr(MpModel) m = load_text (texts[i]);
      g_autofree char *yaml = mp_model_to_yaml (m, NULL);
      g_autoptr(MpModel) back = load_text (yaml);
      assert_true (back->params_total == m->params_total);
      assert_true (back->train_flops_per_token == m->train_flops_per_token);
      assert_true (back->train_flops_per_token_causal == m->train_flops_per_token_causal);
      assert_true (back->kv_cache_bytes_per_token == m->kv_cache_bytes_per_token);
      assert_int_equal (back->n_window_pattern, m->n_window_pattern);
      g_autofree char *again = mp_model_to_yaml (back, NULL);
      assert_string_equal (again, yaml);
    }
}

/* The bad attention inputs name their key at its line and column. */
static void
test_model_attention_bad_input (void **state)
{
  static const struct {
    const char *text, *want;
  } cases[] = {
    { "attention: {window: 2048}\n", "test.yaml:6:21: 'window' = 2048 is longer than "
                                     "seq_len = 1024" },
    { "attention: {window: 0}\n", "test.yaml:6:21: 'window' must be greater than zero" },
    { "attention: {pattern: [full]}\n", "'pattern' needs 'window'" },
    { "attention: {window: 16, pattern: [window, half]}\n", "pattern entry 1 must be" },
    { "attention: {mla: {kv_lora_rank: 0, qk_nope_head_dim: 8, qk_rope_head_dim: 8,"
      " v_head_dim: 8}}\n", "'kv_lora_rank' must be greater than zero" },
    { "attention: {mla: {q_lora_rank: 0, kv_lora_rank: 8, qk_nope_head_dim: 8,"
      " qk_rope_head_dim: 8, v_head_dim: 8}}\n", "'q_lora_rank' must be greater than zero" },
    { "attention: {mla: {kv_lora_rank: 8}}\n", "missing required key 'qk_nope_head_dim'" },
    { "head_dim: 0\n", "test.yaml:6:11: 'head_dim' must be greater than zero" },
    { "head_dim: 40\nattention: {mla: {kv_lora_rank: 8, qk_nope_head_dim: 8,"
      " qk_rope_head_dim: 8, v_head_dim: 8}}\n", "is not qk_nope_head_dim + qk_rope_head_dim" },
  };
  static const char base[] = "layers: 2\nhidden: 64\nheads: 4\nvocab: 10\nseq_len: 1024\n";
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *text = g_strconcat (base, cases[i].text, NULL);
      GError *error = NULL;
      MpModel *m = mp_model_load_data ("test.yaml", text, strlen (text), &error);
      assert_null (m);
      if (strstr (error->message, cases[i].want) == NULL)
        fail_msg ("case %zu: '%s' lacks '%s'", i, error->message, cases[i].want);
      g_error_free (error);
    }
}

/* ---- describe ----------------------------------------------------------------------- */

static void
test_model_describe_text_shows_params (void **state)
{
  g_autoptr(MpModel) m = load_ok ("gpt3-175b");
  g_autofree char *text = mp_model_describe_text (m);
  assert_non_null (strstr (text, "174.6B"));
  assert_non_null (strstr (text, "block.0..block.95 (x96)"));
  g_autoptr(MpModel) x = load_ok ("mixtral-8x7b");
  g_autofree char *xt = mp_model_describe_text (x);
  assert_non_null (strstr (xt, "46.70B"));
  assert_non_null (strstr (xt, "active per token 12.88B"));
  g_autoptr(MpModel) p = load_ok ("mlp-1024");
  g_autofree char *pt = mp_model_describe_text (p);
  assert_non_null (strstr (pt, "656.1k"));
}

static void
test_model_describe_json_keys (void **state)
{
  g_autoptr(MpModel) m = load_ok ("gpt3-175b");
  g_autoptr(JsonNode) root = mp_model_describe_json (m);
  JsonObject *o = json_node_get_object (root);
  assert_int_equal (json_object_get_int_member (o, "schema_version"), 1);
  assert_string_equal (json_object_get_string_member (o, "name"), "gpt3-175b");
  JsonObject *p = json_object_get_object_member (o, "parameters");
  mp_assert_close (json_object_get_double_member (p, "total"), m->params_total, 0);
  assert_true (json_object_has_member (p, "embedding"));
  assert_true (json_object_has_member (p, "active"));
  JsonObject *f = json_object_get_object_member (o, "flops_per_token");
  mp_assert_close (json_object_get_double_member (f, "training"), m->train_flops_per_token, 0);
  assert_true (json_object_has_member (f, "forward"));
  JsonObject *s = json_object_get_object_member (o, "state_bytes");
  mp_assert_close (json_object_get_double_member (s, "optimizer"), 12 * m->params_total, 0);
  assert_true (json_object_has_member (s, "weights"));
  assert_true (json_object_has_member (s, "gradients"));
  double h = m->hidden, seq = m->seq_len, a = m->heads;
  mp_assert_close (json_object_get_double_member (o, "activation_bytes_per_layer_per_sequence"),
                   seq * h * (34 + 5 * a * seq / h), 1e-12);
  JsonArray *layers = json_object_get_array_member (o, "layers");
  assert_int_equal (json_array_get_length (layers), m->n_layers);
  JsonObject *l1 = json_array_get_object_element (layers, 1);
  assert_string_equal (json_object_get_string_member (l1, "kind"), "block");
  assert_true (json_object_has_member (l1, "params"));
  assert_true (json_object_has_member (l1, "fwd_flops"));
  assert_true (json_object_has_member (l1, "bwd_flops"));
  assert_true (json_object_has_member (l1, "act_bytes"));
  JsonArray *ops = json_object_get_array_member (l1, "ops");
  assert_int_equal (json_array_get_length (ops), first_block (m)->n_ops);
  /* It serialises to one JSON object. */
  g_autofree char *text = mp_json_to_string (root);
  assert_true (text[0] == '{');
}

/* mp_model_set_seq_len rebuilds the IR for the new length: parameters stay, and the
 * training FLOPs per token change by exactly the attention term, 12 L (heads x head_dim)
 * per key under the full-square convention (6N + 12 L H Q T, PaLM app. B); out-of-range
 * lengths and lengths under a sliding window are refused and leave the model as it was. */
static void
test_model_set_seq_len (void **state)
{
  (void) state;
  g_autoptr(MpModel) m = load_ok ("llama3-8b");
  double params = m->params_total, flops = m->train_flops_per_token;
  guint64 s0 = m->seq_len;
  GError *error = NULL;
  assert_true (mp_model_set_seq_len (m, 2 * s0, &error));
  assert_int_equal (m->seq_len, 2 * s0);
  mp_assert_close (m->params_total, params, 1e-12);
  double attn = 12.0 * m->n_blocks * m->heads * m->head_dim * (double) s0;
  mp_assert_close (m->train_flops_per_token - flops, attn, 1e-9);
  assert_false (mp_model_set_seq_len (m, 0, &error));
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  g_clear_error (&error);
  assert_int_equal (m->seq_len, 2 * s0);

  g_autoptr(MpModel) w = load_text ("layers: 2\nhidden: 64\nheads: 4\nvocab: 100\n"
                                     "seq_len: 256\nattention: {window: 128}\n");
  assert_int_equal (w->window, 128);
  assert_false (mp_model_set_seq_len (w, w->window - 1, &error));
  assert_non_null (strstr (error->message, "window"));
  g_clear_error (&error);
  assert_true (mp_model_set_seq_len (w, 8192, &error));
  assert_int_equal (w->seq_len, 8192);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_model_gpt3_175b_params),
    cmocka_unit_test (test_model_no_dropout_keeps_no_masks),
    cmocka_unit_test (test_model_gpt3_family_params),
    cmocka_unit_test (test_model_gpt2_124m_params),
    cmocka_unit_test (test_model_llama2_7b_params),
    cmocka_unit_test (test_model_llama3_8b_params),
    cmocka_unit_test (test_model_llama3_70b_params),
    cmocka_unit_test (test_model_llama3_405b_params),
    cmocka_unit_test (test_model_mixtral_total_and_active_params),
    cmocka_unit_test (test_model_mixtral_8x22b_published),
    cmocka_unit_test (test_model_qwen3_235b_published),
    cmocka_unit_test (test_model_qwen3_30b_published),
    cmocka_unit_test (test_model_gpt_oss_120b_published),
    cmocka_unit_test (test_model_deepseek_v3_published),
    cmocka_unit_test (test_model_shared_experts_and_first_k_dense),
    cmocka_unit_test (test_model_moe_keys_refused_on_bad_input),
    cmocka_unit_test (test_model_moe_routing_key),
    cmocka_unit_test (test_model_bert_large_params),
    cmocka_unit_test (test_model_mlp_params),
    cmocka_unit_test (test_model_narayanan_param_formula),
    cmocka_unit_test (test_model_flops_closed_form),
    cmocka_unit_test (test_model_korthikanti_activation_per_layer),
    cmocka_unit_test (test_model_fp32_activations_double),
    cmocka_unit_test (test_model_tied_embeddings_counted_once),
    cmocka_unit_test (test_model_gqa_reduces_qkv_params),
    cmocka_unit_test (test_model_moe_total_vs_active),
    cmocka_unit_test (test_model_moe_biases_counted),
    cmocka_unit_test (test_model_sums_consistent),
    cmocka_unit_test (test_model_block_op_order),
    cmocka_unit_test (test_model_defaults),
    cmocka_unit_test (test_model_swiglu_default_ffn),
    cmocka_unit_test (test_model_state_bytes_fp32_adam),
    cmocka_unit_test (test_model_load_data_works),
    cmocka_unit_test (test_model_zoo_lists_all_models),
    cmocka_unit_test (test_model_unknown_zoo_name_lists_names),
    cmocka_unit_test (test_model_errors_collected),
    cmocka_unit_test (test_model_bad_corpus_refused),
    cmocka_unit_test (test_model_truncated_files_never_crash),
    cmocka_unit_test (test_model_is_model),
    cmocka_unit_test (test_model_describe_text_shows_params),
    cmocka_unit_test (test_model_describe_json_keys),
    cmocka_unit_test (test_model_attn_zoo_published_sizes),
    cmocka_unit_test (test_model_causal_count_is_megatrons),
    cmocka_unit_test (test_model_head_dim_independent),
    cmocka_unit_test (test_model_window_flops_causal_count),
    cmocka_unit_test (test_model_mla_deepseek_v3_attention),
    cmocka_unit_test (test_model_attention_options),
    cmocka_unit_test (test_model_attention_yaml_round_trips),
    cmocka_unit_test (test_model_attention_bad_input),
    cmocka_unit_test (test_model_set_seq_len),
  };
  return cmocka_run_group_tests_name ("model", tests, NULL, NULL);
}
