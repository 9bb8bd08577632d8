/* model-describe.c - what `mpplan describe` prints about a model: shape, parameters,
 * FLOPs per token, saved activations, training-state bytes, and the layers and ops.
 *
 * Text for people (human units), JSON for programs (SI base units, schema_version 1).
 * Nothing here computes model figures: it only reads the IR that model.c built. */
#define G_LOG_DOMAIN "mpplan-model"
#include "config.h"
#include "common/output.h"
#include "model/model-private.h"

#include <math.h>
#include <string.h>

/* ---- formatting -------------------------------------------------------------------- */

/* V with a decimal suffix and four significant digits, no space: "174.6B", "6.738B". */
static char *
format_count (double v)
{
  static const char *const suffix[] = { "", "k", "M", "B", "T", "P" };
  int i = 0;
  double m = v;
  while (i < 5 && fabs (m) >= 1000)
    {
      m /= 1000;
      i++;
    }
  if (i == 0)
    return g_strdup_printf ("%.0f", m);
  const char *fmt = fabs (m) >= 100 ? "%.1f%s" : fabs (m) >= 10 ? "%.2f%s" : "%.3f%s";
  return g_strdup_printf (fmt, m, suffix[i]);
}

/* FLOP (not FLOP/s) with a decimal prefix: "350.1 GFLOP". */
static char *
format_flop (double v)
{
  static const char *const prefix[] = { "", "k", "M", "G", "T", "P", "E" };
  int i = 0;
  double m = v;
  while (i < 6 && fabs (m) >= 1000)
    {
      m /= 1000;
      i++;
    }
  if (m == 0)
    return g_strdup ("0");
  return g_strdup_printf (fabs (m) >= 100 ? "%.1f %sFLOP" : "%.4g %sFLOP", m, prefix[i]);
}

static char *
format_bytes (double v)
{
  return mp_units_format (v, MP_UNIT_BYTES);
}

/* ---- shared figures ---------------------------------------------------------------- */

/* The layer whose saved activations describe "a layer": the first transformer block, or
 * for an MLP the dense layer that keeps the most. NULL for a model without layers. */
static const MpLayer *
reference_layer (const MpModel *m)
{
  const MpLayer *best = NULL;
  for (guint i = 0; i < m->n_layers; i++)
    {
      const MpLayer *l = &m->layers[i];
      if (l->kind == MP_LAYER_BLOCK)
        return l;
      if (l->kind == MP_LAYER_DENSE
          && (best == NULL || l->act_bytes + l->act_rep_bytes > best->act_bytes
                                                                + best->act_rep_bytes))
        best = l;
    }
  return best;
}

static double
layer_act_per_token (const MpLayer *l)
{
  return l ? l->act_bytes + l->act_rep_bytes + l->act_score_bytes : 0;
}

/* Two layers are printed as one row when everything the table shows is equal. */
static gboolean
same_layer (const MpLayer *a, const MpLayer *b)
{
  return a->kind == b->kind && a->window == b->window && a->n_ops == b->n_ops
         && a->params == b->params
         && a->active_params == b->active_params && a->fwd_flops == b->fwd_flops
         && a->bwd_flops == b->bwd_flops && layer_act_per_token (a) == layer_act_per_token (b);
}

/* What one "token" is: a position of a sequence, or one sample for an MLP. */
static const char *
token_word (const MpModel *m)
{
  return m->arch == MP_ARCH_MLP ? "sample" : "token";
}

static const char *
precision_text (const MpModel *m)
{
  switch (m->precision)
    {
    case MP_DTYPE_FP32: return "fp32";
    case MP_DTYPE_FP16: return "fp16 mixed precision";
    case MP_DTYPE_BF16: return "bf16 mixed precision";
    default: return mp_dtype_name (m->precision);
    }
}

/* ---- text -------------------------------------------------------------------------- */

/* Blocks with a sliding window. */
static guint
windowed_blocks (const MpModel *m)
{
  guint n = 0;
  for (guint i = 0; i < m->n_layers; i++)
    n += m->layers[i].window > 0;
  return n;
}

/* attention (ir14): windows, MLA, the options beyond plain attention. */
static void
text_attention (GString *out, const MpModel *m)
{
  GString *a = g_string_new (NULL);
  guint windowed = windowed_blocks (m);
  if (windowed > 0)
    {
      g_string_append_printf (a, ", sliding window %" G_GUINT64_FORMAT " on %u of %"
                              G_GUINT64_FORMAT " blocks", m->window, windowed, m->n_blocks);
      if (m->n_window_pattern > 0)
        {
          g_string_append (a, " (pattern");
          for (guint i = 0; i < m->n_window_pattern; i++)
            g_string_append_printf (a, " %s", m->window_pattern[i] ? "window" : "full");
          g_string_append (a, ")");
        }
    }
  if (m->kv_lora_rank > 0)
    g_string_append_printf (a, ", latent (MLA): q rank %" G_GUINT64_FORMAT ", kv rank %"
                            G_GUINT64_FORMAT ", qk %" G_GUINT64_FORMAT " nope + %"
                            G_GUINT64_FORMAT " rope, v %" G_GUINT64_FORMAT, m->q_lora_rank,
                            m->kv_lora_rank, m->qk_nope_head_dim, m->qk_rope_head_dim,
                            m->v_head_dim);
  if (m->qk_norm)
    g_string_append (a, ", qk-norm");
  if (m->attn_sinks)
    g_string_append (a, ", sinks");
  if (m->attn_bias == MP_ATTN_BIAS_QKV)
    g_string_append (a, ", q/k/v biases");
  else if (m->attn_bias != MP_ATTN_BIAS_AS_MODEL)
    g_string_append_printf (a, ", %s", m->attn_bias == MP_ATTN_BIAS_ALL ? "biases"
                                                                        : "no biases");
  if (m->attn_softcap > 0)
    g_string_append_printf (a, ", scores soft-capped at %g", m->attn_softcap);
  if (m->post_norms)
    g_string_append (a, ", post-norms");
  if (m->embed_scale)
    g_string_append (a, ", embeddings x sqrt(hidden)");
  if (m->logit_softcap > 0)
    g_string_append_printf (a, ", logits soft-capped at %g", m->logit_softcap);
  if (a->len > 0)
    g_string_append_printf (out, "  attention        %s\n", a->str + 2);
  g_string_free (a, TRUE);
}


/* MoE (moe14): what differs from a plain MoE block (expert width, shared experts, dense
 * first blocks, capacity), on one line; nothing when all are defaults. */
static void
text_moe (GString *out, const MpModel *m)
{
  GString *s = g_string_new (NULL);
  if (m->moe_ffn_hidden != m->ffn_hidden)
    g_string_append_printf (s, ", expert ffn %" G_GUINT64_FORMAT, m->moe_ffn_hidden);
  if (m->shared_experts > 0)
    g_string_append_printf (s, ", %" G_GUINT64_FORMAT " shared of ffn %" G_GUINT64_FORMAT,
                            m->shared_experts, m->shared_expert_ffn);
  if (m->first_k_dense > 0)
    g_string_append_printf (s, ", first %" G_GUINT64_FORMAT " blocks dense",
                            m->first_k_dense);
  if (m->capacity_factor > 0)
    g_string_append_printf (s, ", capacity factor %g", m->capacity_factor);
  if (m->load_imbalance > 1)
    g_string_append_printf (s, ", load imbalance %g", m->load_imbalance);
  if (m->routing != MP_ROUTING_SPREAD)
    g_string_append_printf (s, ", %s routing", mp_routing_name (m->routing));
  if (s->len > 0)
    g_string_append_printf (out, "  moe              %s\n", s->str + 2);
  g_string_free (s, TRUE);
}
static void
text_shape (GString *out, const MpModel *m)
{
  if (m->arch == MP_ARCH_MLP)
    {
      g_string_append_printf (out, "  architecture     mlp, %u layers: %" G_GUINT64_FORMAT,
                              m->n_mlp_layers, m->input);
      for (guint i = 0; i < m->n_mlp_layers; i++)
        {
          g_string_append_printf (out, " -> %" G_GUINT64_FORMAT, m->mlp_layers[i].out);
          if (m->mlp_layers[i].activation != MP_ACT_NONE)
            g_string_append_printf (out, " (%s)",
                                    mp_activation_name (m->mlp_layers[i].activation));
        }
      g_string_append_printf (out, "\n  options          %s\n", m->bias ? "biases" : "no biases");
      return;
    }
  g_string_append_printf (out, "  architecture     transformer, %" G_GUINT64_FORMAT " blocks%s\n",
                          m->n_blocks, m->experts ? " (MoE)" : "");
  g_string_append_printf (out, "  shape            hidden %" G_GUINT64_FORMAT ", heads %"
                          G_GUINT64_FORMAT " (kv heads %" G_GUINT64_FORMAT ", head dim %"
                          G_GUINT64_FORMAT "), ffn %" G_GUINT64_FORMAT ", vocab %"
                          G_GUINT64_FORMAT ", seq %" G_GUINT64_FORMAT "\n",
                          m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn_hidden,
                          m->vocab, m->seq_len);
  if (m->experts)
    g_string_append_printf (out, "  experts          %" G_GUINT64_FORMAT " per block, top-%"
                            G_GUINT64_FORMAT " per token\n", m->experts, m->experts_per_token);
  if (m->experts)
    text_moe (out, m);
  g_string_append_printf (out, "  options          %s, %s, %s positions, %s, %s embeddings%s\n",
                          mp_activation_name (m->activation), mp_model_norm_name (m->norm),
                          mp_model_position_name (m->position),
                          m->bias ? "biases" : "no biases",
                          m->tied_embeddings ? "tied" : "untied",
                          m->no_dropout ? ", no dropout" : "");
  text_attention (out, m);
}

static void
text_params (GString *out, const MpModel *m)
{
  g_autofree char *total = format_count (m->params_total);
  g_string_append_printf (out, "\nParameters\n  total            %s\n", total);
  if (m->arch == MP_ARCH_TRANSFORMER)
    {
      const MpLayer *block = reference_layer (m);
      g_autofree char *emb = format_count (m->params_embedding);
      g_autofree char *per = format_count (block ? block->params : 0);
      g_autofree char *head = format_count (m->n_layers ? m->layers[m->n_layers - 1].params
                                                         : 0);
      g_string_append_printf (out, "  embedding        %s\n  per block        %s\n"
                              "  head             %s%s\n", emb, per, head,
                              m->tied_embeddings ? " (output tied to the embedding)" : "");
    }
  if (m->params_active != m->params_total)
    {
      g_autofree char *act = format_count (m->params_active);
      g_string_append_printf (out, "  active per token %s (top-%" G_GUINT64_FORMAT " of %"
                              G_GUINT64_FORMAT " experts)\n", act, m->experts_per_token,
                              m->experts);
    }
}

static void
text_flops (GString *out, const MpModel *m)
{
  g_autofree char *fwd = format_flop (m->fwd_flops_per_token);
  g_autofree char *train = format_flop (m->train_flops_per_token);
  double tokens = (double) m->global_batch * (double) m->seq_len;
  g_autofree char *step = format_flop (m->train_flops_per_token * tokens);
  g_autofree char *tok = format_count (tokens);
  g_string_append_printf (out, "\nFLOPs per %s (matrix products; no causal halving)\n"
                          "  forward          %s\n"
                          "  training         %s (forward + backward, no recompute)\n"
                          "  per step         %s (%s %ss)\n", token_word (m), fwd, train, step,
                          tok, token_word (m));
  if (m->arch == MP_ARCH_TRANSFORMER)
    {
      g_autofree char *causal = format_flop (m->train_flops_per_token_causal);
      g_autofree char *kv = format_bytes (m->kv_cache_bytes_per_token);
      g_string_append_printf (out, "  training, causal %s (only the pairs the mask keeps; mfu "
                              "counts the full square above)\n"
                              "  KV cache         %s per token, all blocks (inference)\n",
                              causal, kv);
    }
}

static void
text_activations (GString *out, const MpModel *m)
{
  const MpLayer *l = reference_layer (m);
  if (l == NULL)
    return;
  double s = (double) m->seq_len;
  g_autofree char *total = format_bytes (s * layer_act_per_token (l));
  g_autofree char *split = format_bytes (s * l->act_bytes);
  g_autofree char *rep = format_bytes (s * l->act_rep_bytes);
  g_string_append_printf (out, "\nActivations saved per %s per %s (no parallelism, "
                          "micro-batch 1; Korthikanti et al. 2022)\n"
                          "  total            %s\n"
                          "  split by TP      %s\n"
                          "  replicated by TP %s (norm and GEMM inputs, dropout masks)\n",
                          m->arch == MP_ARCH_MLP ? "layer (largest)" : "block",
                          m->arch == MP_ARCH_MLP ? "sample" : "sequence", total, split, rep);
  if (m->arch == MP_ARCH_TRANSFORMER)
    {
      double h = (double) m->hidden, as = (double) m->heads * s;
      g_autofree char *score = format_bytes (s * l->act_score_bytes);
      g_string_append_printf (out, "  attention scores %s (dropped by flash attention or "
                              "selective recompute)\n"
                              "  per token        %.4g h split + %.4g h replicated + %.4g a s "
                              "scores (GPT: 24 + 10 + 5)\n", score, l->act_bytes / h,
                              l->act_rep_bytes / h, l->act_score_bytes / as);
    }
}

static void
text_state (GString *out, const MpModel *m)
{
  double w, g, o;
  mp_model_state_bytes_per_param (m, &w, &g, &o);
  double p = m->params_total;
  g_autofree char *wb = format_bytes (w * p);
  g_autofree char *gb = format_bytes (g * p);
  g_autofree char *ob = format_bytes (o * p);
  g_autofree char *tb = format_bytes ((w + g + o) * p);
  gboolean mixed = m->precision != MP_DTYPE_FP32;
  gboolean adam = m->optimizer == MP_OPTIM_ADAM;
  g_string_append_printf (out, "\nTraining state, unsharded (%s, %s)\n"
                          "  weights          %s (%g B/param)\n"
                          "  gradients        %s (%g B/param)\n"
                          "  optimizer        %s (%g B/param: %s%s)\n"
                          "  total            %s (%g B/param)\n",
                          precision_text (m), mp_model_optimizer_name (m->optimizer),
                          wb, w, gb, g, ob, o, mixed ? "fp32 master weights + " : "",
                          adam ? "fp32 Adam moments m, v" : "fp32 momentum", tb, w + g + o);
}

static void
text_layers (GString *out, const MpModel *m)
{
  g_string_append_printf (out, "\nLayers (per %s)\n  %-24s %-9s %10s %13s %13s %11s\n",
                          token_word (m), "layer", "kind", "params", "fwd FLOP", "bwd FLOP",
                          "act bytes");
  for (guint i = 0; i < m->n_layers;)
    {
      const MpLayer *l = &m->layers[i];
      guint j = i + 1;
      while (j < m->n_layers && same_layer (l, &m->layers[j]))
        j++;
      g_autofree char *name = j - i > 1 ? g_strdup_printf ("%s..%s (x%u)", l->name,
                                                         m->layers[j - 1].name, j - i)
                                        : g_strdup (l->name);
      g_autofree char *params = format_count (l->params);
      g_autofree char *fwd = format_flop (l->fwd_flops);
      g_autofree char *bwd = format_flop (l->bwd_flops);
      g_autofree char *act = format_bytes (layer_act_per_token (l));
      g_string_append_printf (out, "  %-24s %-9s %10s %13s %13s %11s\n", name,
                              l->window ? "block/win" : mp_layer_kind_name (l->kind), params,
                              fwd, bwd, act);
      i = j;
    }
}

static void
text_ops (GString *out, const MpLayer *l)
{
  g_string_append_printf (out, "\nOps of %s (per token)\n  %-14s %-11s %-6s %10s %13s %11s "
                          "%11s %11s %11s\n", l->name, "op", "kind", "split", "params",
                          "fwd FLOP", "fwd bytes", "act split", "act repl.", "act scores");
  for (guint i = 0; i < l->n_ops; i++)
    {
      const MpOp *op = &l->ops[i];
      g_autofree char *params = format_count (op->params);
      g_autofree char *fwd = format_flop (op->fwd_flops);
      g_autofree char *bytes = format_bytes (op->fwd_bytes);
      g_autofree char *a = format_bytes (op->act_bytes);
      g_autofree char *r = format_bytes (op->act_rep_bytes);
      g_autofree char *s = format_bytes (op->act_score_bytes);
      g_string_append_printf (out, "  %-14s %-11s %-6s %10s %13s %11s %11s %11s %11s\n",
                              op->name, mp_op_kind_name (op->kind), mp_split_name (op->split),
                              params, fwd, bytes, a, r, s);
    }
}

char *
mp_model_describe_text (const MpModel *m)
{
  g_return_val_if_fail (m != NULL, NULL);
  GString *out = g_string_new (NULL);
  g_autofree char *params = format_count (m->params_total);
  g_string_append_printf (out, "%s: %s parameters (%s)\n", m->name ? m->name : "?", params,
                          m->source ? m->source : "memory");
  text_shape (out, m);
  double tokens = (double) m->global_batch * (double) m->seq_len;
  g_autofree char *tok = format_count (tokens);
  if (m->arch == MP_ARCH_MLP)
    g_string_append_printf (out, "  training         global batch %" G_GUINT64_FORMAT
                            " samples, %s, %s\n", m->global_batch, precision_text (m),
                            mp_model_optimizer_name (m->optimizer));
  else
    g_string_append_printf (out, "  training         global batch %" G_GUINT64_FORMAT
                            " sequences (%s tokens), %s, %s\n", m->global_batch, tok,
                            precision_text (m), mp_model_optimizer_name (m->optimizer));
  text_params (out, m);
  text_flops (out, m);
  text_activations (out, m);
  text_state (out, m);
  text_layers (out, m);
  const MpLayer *ref = reference_layer (m);
  if (ref != NULL && m->arch == MP_ARCH_TRANSFORMER)
    text_ops (out, ref);
  return g_string_free (out, FALSE);
}

/* ---- JSON -------------------------------------------------------------------------- */

/* shape.attention (ir14). */
static void
json_attention (JsonBuilder *b, const MpModel *m)
{
  static const char *const bias_names[] = { NULL, "none", "qkv", "all" };
  json_builder_set_member_name (b, "attention");
  json_builder_begin_object (b);
  mp_json_add_int (b, "window", m->window);
  mp_json_add_int (b, "windowed_blocks", windowed_blocks (m));
  json_builder_set_member_name (b, "pattern");
  json_builder_begin_array (b);
  for (guint i = 0; i < m->n_window_pattern; i++)
    json_builder_add_string_value (b, m->window_pattern[i] ? "window" : "full");
  json_builder_end_array (b);
  mp_json_add_bool (b, "sinks", m->attn_sinks);
  mp_json_add_bool (b, "qk_norm", m->qk_norm);
  mp_json_add_string (b, "bias", m->attn_bias ? bias_names[m->attn_bias]
                                              : m->bias ? "all" : "none");
  mp_json_add_double (b, "softcap", m->attn_softcap);
  mp_json_add_double (b, "logit_softcap", m->logit_softcap);
  mp_json_add_bool (b, "post_norms", m->post_norms);
  mp_json_add_bool (b, "embed_scale", m->embed_scale);
  json_builder_set_member_name (b, "mla");
  if (m->kv_lora_rank > 0)
    {
      json_builder_begin_object (b);
      mp_json_add_int (b, "q_lora_rank", m->q_lora_rank);
      mp_json_add_int (b, "kv_lora_rank", m->kv_lora_rank);
      mp_json_add_int (b, "qk_nope_head_dim", m->qk_nope_head_dim);
      mp_json_add_int (b, "qk_rope_head_dim", m->qk_rope_head_dim);
      mp_json_add_int (b, "v_head_dim", m->v_head_dim);
      json_builder_end_object (b);
    }
  else
    json_builder_add_null_value (b);
  json_builder_end_object (b);
}

static void
json_shape (JsonBuilder *b, const MpModel *m)
{
  json_builder_set_member_name (b, "shape");
  json_builder_begin_object (b);
  mp_json_add_bool (b, "bias", m->bias);
  if (m->arch == MP_ARCH_MLP)
    {
      mp_json_add_int (b, "input", m->input);
      json_builder_set_member_name (b, "layers");
      json_builder_begin_array (b);
      for (guint i = 0; i < m->n_mlp_layers; i++)
        {
          json_builder_begin_object (b);
          mp_json_add_int (b, "out", m->mlp_layers[i].out);
          mp_json_add_string (b, "activation", mp_activation_name (m->mlp_layers[i].activation));
          json_builder_end_object (b);
        }
      json_builder_end_array (b);
    }
  else
    {
      mp_json_add_int (b, "layers", m->n_blocks);
      mp_json_add_int (b, "hidden", m->hidden);
      mp_json_add_int (b, "heads", m->heads);
      mp_json_add_int (b, "kv_heads", m->kv_heads);
      mp_json_add_int (b, "head_dim", m->head_dim);
      mp_json_add_int (b, "ffn_hidden", m->ffn_hidden);
      mp_json_add_int (b, "vocab", m->vocab);
      mp_json_add_int (b, "seq_len", m->seq_len);
      mp_json_add_string (b, "activation", mp_activation_name (m->activation));
      mp_json_add_string (b, "norm", mp_model_norm_name (m->norm));
      mp_json_add_string (b, "position", mp_model_position_name (m->position));
      mp_json_add_bool (b, "tied_embeddings", m->tied_embeddings);
      mp_json_add_int (b, "experts", m->experts);
      mp_json_add_int (b, "experts_per_token", m->experts_per_token);
      json_attention (b, m);
      if (m->experts > 0)
        {
          /* MoE (moe14) */
          mp_json_add_int (b, "moe_ffn_hidden", m->moe_ffn_hidden);
          mp_json_add_int (b, "shared_experts", m->shared_experts);
          mp_json_add_int (b, "shared_expert_ffn", m->shared_expert_ffn);
          mp_json_add_int (b, "first_k_dense", m->first_k_dense);
          mp_json_add_double (b, "capacity_factor", m->capacity_factor);
          mp_json_add_double (b, "load_imbalance", m->load_imbalance);
          mp_json_add_string (b, "routing", mp_routing_name (m->routing));
        }
    }
  json_builder_end_object (b);
}

/* The per-token figures every op and layer carries. */
static void
json_figures (JsonBuilder *b, double params, double active, double fwd, double bwd,
              double bytes, double act, double rep, double score)
{
  mp_json_add_double (b, "params", params);
  mp_json_add_double (b, "active_params", active);
  mp_json_add_double (b, "fwd_flops", fwd);
  mp_json_add_double (b, "bwd_flops", bwd);
  mp_json_add_double (b, "fwd_bytes", bytes);
  mp_json_add_double (b, "act_bytes", act);
  mp_json_add_double (b, "act_rep_bytes", rep);
  mp_json_add_double (b, "act_score_bytes", score);
  mp_json_add_double (b, "act_total_bytes", act + rep + score);
}

static void
json_op (JsonBuilder *b, const MpOp *op)
{
  json_builder_begin_object (b);
  mp_json_add_string (b, "name", op->name);
  mp_json_add_string (b, "kind", mp_op_kind_name (op->kind));
  mp_json_add_string (b, "split", mp_split_name (op->split));
  mp_json_add_double (b, "count", op->count);
  if (op->kind == MP_OP_GEMM || op->kind == MP_OP_ROUTER)
    {
      mp_json_add_double (b, "gemm_n", op->gemm_n);
      mp_json_add_double (b, "gemm_k", op->gemm_k);
    }
  if (op->heads > 0)
    {
      mp_json_add_double (b, "heads", op->heads);
      mp_json_add_double (b, "kv_heads", op->kv_heads);
      mp_json_add_double (b, "head_dim", op->head_dim);
    }
  if (op->kind == MP_OP_ATTENTION)
    {
      mp_json_add_double (b, "v_head_dim", op->v_head_dim);
      mp_json_add_double (b, "window", op->window);
    }
  json_figures (b, op->params, op->active_params, op->fwd_flops, op->bwd_flops, op->fwd_bytes,
                op->act_bytes, op->act_rep_bytes, op->act_score_bytes);
  json_builder_end_object (b);
}

static void
json_layers (JsonBuilder *b, const MpModel *m)
{
  json_builder_set_member_name (b, "layers");
  json_builder_begin_array (b);
  for (guint i = 0; i < m->n_layers; i++)
    {
      const MpLayer *l = &m->layers[i];
      json_builder_begin_object (b);
      mp_json_add_string (b, "name", l->name);
      mp_json_add_string (b, "kind", mp_layer_kind_name (l->kind));
      mp_json_add_bool (b, "moe", l->moe);
      mp_json_add_int (b, "window", l->window);
      json_figures (b, l->params, l->active_params, l->fwd_flops, l->bwd_flops, l->fwd_bytes,
                    l->act_bytes, l->act_rep_bytes, l->act_score_bytes);
      json_builder_set_member_name (b, "ops");
      json_builder_begin_array (b);
      for (guint j = 0; j < l->n_ops; j++)
        json_op (b, &l->ops[j]);
      json_builder_end_array (b);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
}

static void
json_totals (JsonBuilder *b, const MpModel *m)
{
  json_builder_set_member_name (b, "parameters");
  json_builder_begin_object (b);
  mp_json_add_double (b, "total", m->params_total);
  mp_json_add_double (b, "embedding", m->params_embedding);
  mp_json_add_double (b, "active", m->params_active);
  json_builder_end_object (b);

  json_builder_set_member_name (b, "flops_per_token");
  json_builder_begin_object (b);
  mp_json_add_double (b, "forward", m->fwd_flops_per_token);
  mp_json_add_double (b, "training", m->train_flops_per_token);
  mp_json_add_double (b, "training_causal", m->train_flops_per_token_causal);
  json_builder_end_object (b);
  mp_json_add_double (b, "kv_cache_bytes_per_token", m->kv_cache_bytes_per_token);

  const MpLayer *l = reference_layer (m);
  double s = (double) m->seq_len;
  mp_json_add_double (b, "activation_bytes_per_layer_per_sequence", s * layer_act_per_token (l));
  json_builder_set_member_name (b, "activation_breakdown_per_layer_per_sequence");
  json_builder_begin_object (b);
  mp_json_add_string (b, "layer", l ? l->name : "");
  mp_json_add_double (b, "split", l ? s * l->act_bytes : 0);
  mp_json_add_double (b, "replicated", l ? s * l->act_rep_bytes : 0);
  mp_json_add_double (b, "attention_scores", l ? s * l->act_score_bytes : 0);
  json_builder_end_object (b);

  double w, g, o;
  mp_model_state_bytes_per_param (m, &w, &g, &o);
  json_builder_set_member_name (b, "state_bytes");
  json_builder_begin_object (b);
  mp_json_add_double (b, "weights", w * m->params_total);
  mp_json_add_double (b, "gradients", g * m->params_total);
  mp_json_add_double (b, "optimizer", o * m->params_total);
  mp_json_add_double (b, "total", (w + g + o) * m->params_total);
  json_builder_set_member_name (b, "per_param");
  json_builder_begin_object (b);
  mp_json_add_double (b, "weights", w);
  mp_json_add_double (b, "gradients", g);
  mp_json_add_double (b, "optimizer", o);
  json_builder_end_object (b);
  json_builder_end_object (b);
}

JsonNode *
mp_model_describe_json (const MpModel *m)
{
  g_return_val_if_fail (m != NULL, NULL);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  mp_json_add_int (b, "schema_version", 1);
  mp_json_add_string (b, "name", m->name ? m->name : "");
  mp_json_add_string (b, "source", m->source ? m->source : "");
  mp_json_add_string (b, "architecture", mp_model_arch_name (m->arch));
  json_shape (b, m);

  json_builder_set_member_name (b, "training");
  json_builder_begin_object (b);
  mp_json_add_int (b, "global_batch", m->global_batch);
  mp_json_add_string (b, "precision", mp_dtype_name (m->precision));
  mp_json_add_string (b, "optimizer", mp_model_optimizer_name (m->optimizer));
  json_builder_end_object (b);

  json_totals (b, m);
  json_layers (b, m);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
