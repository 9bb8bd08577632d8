/* model-exec.c - one rank's share of the model: which layers it holds (pipeline rank),
 * its tensor-parallel shard of each weight (tp rank, Megatron's splits), its ZeRO shard of
 * gradients (ZeRO-1: the full ones reduced into it once, ZeRO-2/3: every micro-batch's),
 * optimizer state and, for ZeRO-3, weights (dp rank); the weights' seeded
 * initialisation, the step's loss, the gradient norm and the optimizer.
 *
 * Every rank generates exactly its shard of each full tensor with the counter-based RNG
 * (kernels/cpu/random.c), one stream per tensor, so every layout starts from the same
 * model. The layer forward and backward are in model-layers.c. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec-private.h"
#include "exec/exec.h"
#include "common/error.h"

#include <math.h>
#include <string.h>

#define INIT_STD 0.02f

/* ---- tensors ----------------------------------------------------------------------- */

static void
tensor_free (MpExec *ex, ExTensor *t)
{
  MpBackend *be = ex->be;
  be->ops->release (be, t->param);
  be->ops->release (be, t->pshard);
  be->ops->release (be, t->grad);
  if (!t->gshard_in_grad)
    be->ops->release (be, t->gshard);
  be->ops->release (be, t->rs_tmp);
  be->ops->release (be, t->m);
  be->ops->release (be, t->v);
  g_free (t);
}

/* A tensor of N local elements for LAYER, with its gradient and optimizer state laid out
 * for the ZeRO stage; its values from HOST (n floats, this rank's local tensor). */
static ExTensor *
tensor_new_in (MpExec *ex, guint layer, const char *name, gsize n, const float *host,
               gboolean replicated, gboolean expert, GError **error)
{
  MpBackend *be = ex->be;
  ExTensor *t = g_new0 (ExTensor, 1);
  g_strlcpy (t->name, name, sizeof t->name);
  t->layer = layer;
  t->n = n;
  t->replicated = replicated;
  t->expert = expert;
  t->dp = expert ? ex->edp : ex->shard;
  t->dp_rank = expert ? ex->edp_rank : ex->shard_rank;
  t->rep_rank = expert ? 0 : ex->rep_rank;
  t->zero = t->dp > 1 ? ex->zero : 0;
  t->shard_n = t->zero >= 1 ? (n + t->dp - 1) / t->dp : n;
  t->padded = t->zero >= 1 ? t->shard_n * t->dp : n;
  gsize upd = t->shard_n * sizeof (float);       /* what this rank's optimizer updates */
  gboolean adam = ex->model->optimizer == MP_OPTIM_ADAM;
  g_ptr_array_add (ex->tensors, t);
  if (t->zero >= 3)
    {
      t->pshard = be->ops->alloc (be, upd, MP_MEM_WEIGHTS, error);
      if (t->pshard == NULL)
        return NULL;
      gsize off = t->dp_rank * t->shard_n;
      if (off < n)
        be->ops->upload (be, t->pshard, host + off, MIN (t->shard_n, n - off) * sizeof (float));
    }
  else
    {
      t->param = be->ops->alloc (be, t->padded * sizeof (float), MP_MEM_WEIGHTS, error);
      if (t->param == NULL)
        return NULL;
      be->ops->upload (be, t->param, host, n * sizeof (float));
    }
  /* ZeRO-2/3 keep only the reduced shard: the full gradient (and its reduce-scatter
   * result) lives from the layer's backward to the end of its reduction (runner.c). */
  if (t->zero < 2)
    {
      t->grad = be->ops->alloc (be, t->padded * sizeof (float), MP_MEM_GRADIENTS, error);
      if (t->grad == NULL)
        return NULL;
    }
  /* ZeRO-1 in place (mp_stack_zero1_in_place): the shard is the rank's block of the
   * full gradients, where the backend's in-place reduce-scatter leaves it. */
  t->gshard_in_grad = t->zero == 1 && mp_stack_zero1_in_place (ex->cfg.stack);
  if (t->gshard_in_grad)
    t->gshard = t->grad + be->ops->inplace_offset ((int) t->dp_rank, t->shard_n);
  else if (t->zero >= 1)
    {
      t->gshard = be->ops->alloc (be, upd, MP_MEM_GRADIENTS, error);
      if (t->gshard == NULL)
        return NULL;
    }
  t->m = be->ops->alloc (be, upd, MP_MEM_OPTIMIZER, error);
  if (t->m == NULL)
    return NULL;
  if (adam)
    {
      t->v = be->ops->alloc (be, upd, MP_MEM_OPTIMIZER, error);
      if (t->v == NULL)
        return NULL;
    }
  return t;
}

static ExTensor *
tensor_new (MpExec *ex, guint layer, const char *name, gsize n, const float *host,
            gboolean replicated, GError **error)
{
  return tensor_new_in (ex, layer, name, n, host, replicated, FALSE, error);
}

ExTensor *
mp_exec_tensor_new (MpExec *ex, guint layer, const char *name, gsize n, const float *host,
                    gboolean replicated, gboolean expert, GError **error)
{
  return tensor_new_in (ex, layer, name, n, host, replicated, expert, error);
}

/* Host scratch for one tensor's initial values; the *_rows helpers fill a block of rows
 * of the full row-major tensor (FULL_COLS wide) into rows [DST, DST + ROWS) of it. */
static void
normal_rows (float *host, gsize local_cols, gsize dst, guint64 seed, guint64 stream,
             gsize full_cols, gsize r0, gsize rows, gsize c0, float std)
{
  mpk_cpu_fill_normal_block (host + dst * local_cols, seed, stream, full_cols, r0, rows, c0,
                             local_cols, 0.0f, std);
}

static void
fill_const (float *host, gsize n, float value)
{
  for (gsize i = 0; i < n; i++)
    host[i] = value;
}

static guint64
stream_of (guint layer, guint index)
{
  return (guint64) layer * 16 + index + 1;
}

/* Adds a replicated constant vector (norm gains 1, biases 0). */
static ExTensor *
add_const (MpExec *ex, guint layer, const char *name, gsize n, float value,
           gboolean replicated, GError **error)
{
  g_autofree float *host = g_new (float, n);
  fill_const (host, n, value);
  return tensor_new (ex, layer, name, n, host, replicated, error);
}

gboolean
mp_exec_add_norm_tensors (MpExec *ex, ExLayer *L, guint layer, const char *name,
                          GError **error)
{
  g_autofree char *w = g_strdup_printf ("%s.w", name);
  ExTensor *t = add_const (ex, layer, w, ex->C, 1.0f, TRUE, error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  t->tp_partial = ex->sp;          /* under sequence parallelism it normalises its rows */
  if (ex->model->norm != MP_NORM_LAYERNORM)
    return TRUE;
  g_autofree char *b = g_strdup_printf ("%s.b", name);
  t = add_const (ex, layer, b, ex->C, 0.0f, TRUE, error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  t->tp_partial = ex->sp;
  return TRUE;
}

/* A bias of N local elements (zeros), when the model has biases (WANT: attention biases
 * may differ from the MLP's). */
static gboolean
add_bias_if (MpExec *ex, ExLayer *L, guint layer, const char *name, gsize n,
             gboolean replicated, gboolean want, GError **error)
{
  if (!want)
    return TRUE;
  ExTensor *t = add_const (ex, layer, name, n, 0.0f, replicated, error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  return TRUE;
}

static gboolean
add_bias (MpExec *ex, ExLayer *L, guint layer, const char *name, gsize n,
          gboolean replicated, GError **error)
{
  return add_bias_if (ex, L, layer, name, n, replicated, ex->model->bias, error);
}

/* The word embedding shard: rows [v0, v0 + Vl) of (V, C). */
static ExTensor *
add_wte (MpExec *ex, guint layer, const char *name, guint64 stream, GError **error)
{
  gsize n = (gsize) ex->Vl * ex->C;
  g_autofree float *host = g_new (float, n);
  normal_rows (host, ex->C, 0, ex->seed, stream, ex->C, ex->v0, ex->Vl, 0, INIT_STD);
  return tensor_new (ex, layer, name, n, host, FALSE, error);
}

static gboolean
setup_embedding (MpExec *ex, ExLayer *L, guint layer, GError **error)
{
  ExTensor *t = add_wte (ex, layer, "wte", stream_of (0, 0), error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  if (ex->model->position != MP_POS_LEARNED)
    return TRUE;
  gsize n = (gsize) ex->T * ex->C;
  g_autofree float *host = g_new (float, n);
  normal_rows (host, ex->C, 0, ex->seed, stream_of (layer, 1), ex->C, 0, ex->T, 0, 0.01f);
  t = tensor_new (ex, layer, "wpe", n, host, TRUE, error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  return TRUE;
}

/* qkv (QKVl, C): this rank's q heads, then its k heads, then its v heads, each a block of
 * rows of the full [q (NH*HD) | k (NKV*HD) | v (NKV*HD)] weight. */
static gboolean
setup_qkv (MpExec *ex, ExLayer *L, guint layer, GError **error)
{
  gsize q = (gsize) ex->NHl * ex->HD, kv = (gsize) ex->NKVl * ex->HD, rows = q + 2 * kv;
  gsize fq = (gsize) ex->NH * ex->HD, fkv = (gsize) ex->NKV * ex->HD;
  g_autofree float *host = g_new (float, rows * ex->C);
  guint64 s = stream_of (layer, 2);
  normal_rows (host, ex->C, 0, ex->seed, s, ex->C, ex->tp_rank * q, q, 0, INIT_STD);
  normal_rows (host, ex->C, q, ex->seed, s, ex->C, fq + ex->tp_rank * kv, kv, 0, INIT_STD);
  normal_rows (host, ex->C, q + kv, ex->seed, s, ex->C, fq + fkv + ex->tp_rank * kv, kv, 0,
               INIT_STD);
  ExTensor *t = tensor_new (ex, layer, "wqkv", rows * ex->C, host, FALSE, error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  return add_bias_if (ex, L, layer, "bqkv", rows, FALSE, mp_model_qkv_bias (ex->model), error);
}

/* A row-parallel weight (C, K_local): columns [tp_rank * k, ...) of (C, K_full). */
static gboolean
setup_row_parallel (MpExec *ex, ExLayer *L, guint layer, const char *name, guint index,
                    gsize k, gsize k_full, float std, GError **error)
{
  g_autofree float *host = g_new (float, (gsize) ex->C * k);
  mpk_cpu_fill_normal_block (host, ex->seed, stream_of (layer, index), k_full, 0, ex->C,
                             ex->tp_rank * k, k, 0.0f, std);
  ExTensor *t = tensor_new (ex, layer, name, (gsize) ex->C * k, host, FALSE, error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  g_autofree char *b = g_strdup_printf ("b%s", name + 1);
  gboolean want = index == 3 ? mp_model_out_bias (ex->model) : ex->model->bias;  /* wo */
  return add_bias_if (ex, L, layer, b, ex->C, TRUE, want, error);
}

/* fc1 (F1l, C): the local gate rows and, for SwiGLU, the local up rows after them. */
static gboolean
setup_fc1 (MpExec *ex, ExLayer *L, guint layer, GError **error)
{
  gsize fl = ex->Fl, rows = ex->swiglu ? 2 * fl : fl;
  g_autofree float *host = g_new (float, rows * ex->C);
  guint64 s = stream_of (layer, 4);
  normal_rows (host, ex->C, 0, ex->seed, s, ex->C, ex->tp_rank * fl, fl, 0, INIT_STD);
  if (ex->swiglu)
    normal_rows (host, ex->C, fl, ex->seed, s, ex->C, (gsize) ex->F + ex->tp_rank * fl, fl, 0,
                 INIT_STD);
  ExTensor *t = tensor_new (ex, layer, "w1", rows * ex->C, host, FALSE, error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  return add_bias (ex, L, layer, "b1", rows, FALSE, error);
}

static gboolean
setup_block (MpExec *ex, ExLayer *L, guint layer, GError **error)
{
  /* GPT-2's scaled init of the projections into the residual stream. */
  float proj_std = INIT_STD / sqrtf (2.0f * (float) MAX (ex->model->n_blocks, 1u));
  return mp_exec_add_norm_tensors (ex, L, layer, "ln1", error)
         && (ex->model->kv_lora_rank > 0 ? mp_exec_mla_setup (ex, L, layer, error)
                                         : setup_qkv (ex, L, layer, error))
         && setup_row_parallel (ex, L, layer, "wo", 3, (gsize) ex->NHl * ex->DV,
                                (gsize) ex->NH * ex->DV, proj_std, error)
         && mp_exec_attn_setup (ex, L, layer, error)
         && mp_exec_add_norm_tensors (ex, L, layer, "ln2", error)
         && (L->ir->moe ? mp_exec_moe_setup (ex, L, layer, error)
                        : setup_fc1 (ex, L, layer, error)
                          && setup_row_parallel (ex, L, layer, "w2", 5, ex->Fl, ex->F,
                                                 proj_std, error));
}

/* Final norm and the output weight: the word embedding itself when it is on this rank
 * (tied, one stage), a copy of it (tied, pp > 1: REDUCE_TIED keeps the two equal), or its
 * own (untied). */
static gboolean
setup_head (MpExec *ex, ExLayer *L, guint layer, GError **error)
{
  if (!mp_exec_add_norm_tensors (ex, L, layer, "lnf", error))
    return FALSE;
  if (ex->model->tied_embeddings && ex->layers[0].here)
    {
      g_ptr_array_add (L->uses, g_ptr_array_index (ex->layers[0].owns, 0));
      return TRUE;
    }
  gboolean tied = ex->model->tied_embeddings;
  ExTensor *t = add_wte (ex, layer, tied ? "wte.copy" : "wout",
                         tied ? stream_of (0, 0) : stream_of (layer, 7), error);
  if (t == NULL)
    return FALSE;
  t->tied_copy = tied;
  g_ptr_array_add (L->owns, t);
  return TRUE;
}

/* ---- the mlp architecture ---------------------------------------------------------- */

/* Dense layer L's widths: in, out; even layers are column-parallel (out split over tp),
 * odd ones row-parallel (in split), as the model IR assigns them (model.c build_mlp). */
static void
dense_widths (const MpModel *m, guint l, gsize *in, gsize *out)
{
  *in = l == 0 ? m->input : m->mlp_layers[l - 1].out;
  *out = m->mlp_layers[l].out;
}

/* The weight (out, in) as this rank holds it: its block of rows (column-parallel) or of
 * columns (row-parallel) of the full seeded tensor, LeCun's 1/sqrt(in) scale so that a
 * deep stack neither explodes nor vanishes; biases zero, the row-parallel one replicated
 * (added after the reduction). */
static gboolean
setup_dense (MpExec *ex, ExLayer *L, guint l, GError **error)
{
  gsize in, out;
  dense_widths (ex->model, l, &in, &out);
  gboolean column = l % 2 == 0;
  gsize rows = column ? out / ex->tp : out, cols = column ? in : in / ex->tp;
  gsize r0 = column ? ex->tp_rank * rows : 0, c0 = column ? 0 : ex->tp_rank * cols;
  g_autofree float *host = g_new (float, rows * cols);
  mpk_cpu_fill_normal_block (host, ex->seed, stream_of (l, 0), in, r0, rows, c0, cols, 0.0f,
                             1.0f / sqrtf ((float) in));
  ExTensor *t = tensor_new (ex, l, "w", rows * cols, host, FALSE, error);
  if (t == NULL)
    return FALSE;
  g_ptr_array_add (L->owns, t);
  guint before = L->owns->len;
  if (!add_bias (ex, L, l, "b", rows, !column, error))
    return FALSE;
  /* a row layer's bias gradient under sequence parallelism: from this rank's rows */
  if (L->owns->len > before)
    ((ExTensor *) g_ptr_array_index (L->owns, before))->tp_partial = ex->sp && !column;
  return TRUE;
}

/* The target map of the regression task (model-dense.c): a seeded (out, input) matrix,
 * this rank's rows of it when the last layer's output is split over tp. */
static gboolean
setup_teacher (MpExec *ex, guint l, GError **error)
{
  gsize in = ex->model->input, out = ex->model->mlp_layers[l].out;
  gsize rows = l % 2 == 0 ? out / ex->tp : out, r0 = l % 2 == 0 ? ex->tp_rank * rows : 0;
  g_autofree float *host = g_new (float, rows * in);
  mpk_cpu_fill_normal_block (host, ex->seed, UINT64_C (0x7eac4e7), in, r0, rows, 0, in, 0.0f,
                             1.0f / sqrtf ((float) in));
  ex->teacher = ex->be->ops->alloc (ex->be, rows * in * sizeof (float), MP_MEM_OTHER, error);
  if (ex->teacher == NULL)
    return FALSE;
  ex->be->ops->upload (ex->be, ex->teacher, host, rows * in * sizeof (float));
  return TRUE;
}

gboolean
mp_exec_dense_setup (MpExec *ex, guint l, GError **error)
{
  if (!setup_dense (ex, &ex->layers[l], l, error))
    return FALSE;
  return l + 1 < ex->n_layers || setup_teacher (ex, l, error);
}

/* ---- the rank ---------------------------------------------------------------------- */

static void
set_shapes (MpExec *ex)
{
  const MpModel *m = ex->model;
  ex->mbs = (int) ex->cfg.micro_batch_size;
  /* An mlp's "token" is a sample: one row per sample. */
  ex->T = m->arch == MP_ARCH_MLP ? 1 : (int) m->seq_len;
  ex->Tl = ex->T / (int) ex->cp;
  ex->N = ex->mbs * ex->Tl;
  ex->Ns = ex->sp ? ex->N / (int) ex->tp : ex->N;
  ex->C = (int) m->hidden;
  ex->NH = (int) m->heads;
  ex->NKV = (int) m->kv_heads;
  ex->HD = (int) m->head_dim;       /* MLA: qk_nope_head_dim + qk_rope_head_dim */
  ex->DV = m->kv_lora_rank > 0 ? (int) m->v_head_dim : ex->HD;
  ex->NHl = ex->NH / (int) ex->tp;
  ex->NKVl = ex->NKV / (int) ex->tp;
  ex->F = (int) m->ffn_hidden;
  ex->Fl = ex->F / (int) ex->tp;
  ex->swiglu = mp_activation_gated (m->activation);   /* swiglu or geglu */
  ex->V = (int) m->vocab;
  /* Vocabulary shards as even as they come; the kernels take any [v0, v0 + Vl). */
  ex->v0 = (int) ((gint64) ex->V * ex->tp_rank / ex->tp);
  ex->Vl = (int) ((gint64) ex->V * (ex->tp_rank + 1) / ex->tp) - ex->v0;
}

/* HSDP (fsdp17): inside the dp group of colour DP_COLOUR, the shard groups (consecutive
 * dp ranks) and the replicate groups (the same place in each shard group); without HSDP
 * the shard group is the dp group. */
static gboolean
make_hsdp_groups (MpExec *ex, int dp_colour, GError **error)
{
  MpBackend *be = ex->be;
  if (ex->reps == 1)
    {
      ex->shard_group = ex->dp_group;
      return TRUE;
    }
  int shard = (int) ex->shard, reps = (int) ex->reps;
  ex->shard_group = be->ops->group_split (be, dp_colour * reps + (int) ex->rep_rank,
                                         (int) ex->shard_rank, error);
  if (ex->shard_group == NULL)
    return FALSE;
  ex->rep_group = be->ops->group_split (be, dp_colour * shard + (int) ex->shard_rank,
                                       (int) ex->rep_rank, error);
  return ex->rep_group != NULL;
}

/* The groups: tp (same dp, pp), dp (same tp, pp), the first and last stage's peers (same
 * tp, dp) and the world. Colours are unique per group; keys order ranks by coordinate. */
static gboolean
make_groups (MpExec *ex, GError **error)
{
  MpBackend *be = ex->be;
  int tp = (int) ex->tp, dp = (int) ex->dp;
  int tpr = (int) ex->tp_rank, dpr = (int) ex->dp_rank, ppr = (int) ex->pp_rank;
  gboolean end = ex->pp_rank == 0 || ex->pp_rank == ex->pp - 1;
  ex->tp_group = be->ops->group_split (be, dpr * (int) ex->pp + ppr, tpr, error);
  if (ex->tp_group == NULL)
    return FALSE;
  ex->dp_group = be->ops->group_split (be, tpr * (int) ex->pp + ppr, dpr, error);
  if (ex->dp_group == NULL)
    return FALSE;
  ex->ends_group = be->ops->group_split (be, end ? dpr * tp + tpr : tp * dp + be->rank,
                                         ppr, error);
  if (ex->ends_group == NULL)
    return FALSE;
  ex->world_group = be->ops->group_split (be, 0, be->rank, error);
  if (ex->world_group == NULL)
    return FALSE;
  if (!make_hsdp_groups (ex, tpr * (int) ex->pp + ppr, error))
    return FALSE;
  if (ex->model->experts > 0 && (ex->cp > 1 || (ex->etp < ex->tp && ex->sp
                                                && ex->mbs % (int) ex->tp != 0)))
    {
      ex->seq_group = be->ops->group_split (be, (int) ex->data_rank * (int) ex->pp + ppr,
                                           (int) (ex->cp_rank * ex->tp) + tpr, error);
      if (ex->seq_group == NULL)
        return FALSE;
    }
  if (ex->cp > 1 && mp_parallel_config_cp_allgather (&ex->cfg))
    {
      /* one per (tp, dp, pp) coordinate: the ranks that gather each other's K/V */
      int colour = (ppr * (int) ex->cfg.dp + (int) ex->data_rank) * tp + tpr;
      ex->cp_group = be->ops->group_split (be, colour, (int) ex->cp_rank, error);
      if (ex->cp_group == NULL)
        return FALSE;
    }
  if (ex->model->experts > 0 && ex->etp > 1 && ex->etp < ex->tp)
    {
      int color = ppr * tp * dp + (dpr * tp + tpr) / (int) ex->etp;   /* its grid slot */
      ex->etp_group = be->ops->group_split (be, color, (int) ex->etp_rank, error);
      if (ex->etp_group == NULL)
        return FALSE;
    }
  /* MoE: the expert-parallel group (same edp and etp rank) and the expert-data-parallel
   * one (same ep and etp rank), inside a stage */
  if (ex->ep == 1 && ex->etp == ex->tp)
    {
      ex->edp_group = ex->dp_group;
      return TRUE;
    }
  int etp = (int) ex->etp, etpr = (int) ex->etp_rank, stage = ppr * tp * dp;
  ex->ep_group = be->ops->group_split (be, stage + (int) ex->edp_rank * etp + etpr,
                                      (int) ex->ep_rank, error);
  if (ex->ep_group == NULL)
    return FALSE;
  ex->edp_group = be->ops->group_split (be, stage + (int) ex->ep_rank * etp + etpr,
                                       (int) ex->edp_rank, error);
  return ex->edp_group != NULL;
}

MpGroup *
mp_exec_tensor_group (const MpExec *ex, const ExTensor *t)
{
  return t->expert ? ex->edp_group : ex->shard_group;
}

MpExec *
mp_exec_new (MpBackend *be, const MpModel *model, const MpParallelConfig *cfg,
             guint global_batch, guint tp_rank, guint cp_rank, guint dp_rank, guint pp_rank,
             const guint *stage_of_layer, guint64 seed, GError **error)
{
  if (!mp_exec_check_plan (model, cfg, error))
    return NULL;
  if (!mp_exec_attn_check_backend (model, be, error))
    return NULL;
  MpExec *ex = g_new0 (MpExec, 1);
  ex->be = be;
  ex->k = be->ops->kernels;
  ex->model = model;
  ex->cfg = *cfg;
  ex->cfg.chunk_layers = NULL;
  ex->cfg.placement = NULL;
  ex->global_batch = global_batch;
  ex->seed = seed;
  ex->tp = cfg->tp;
  ex->pp = cfg->pp;
  ex->tp_rank = tp_rank;
  ex->pp_rank = pp_rank;
  ex->data_rank = dp_rank;
  if (!mp_exec_cp_setup (ex, cfg, tp_rank, cp_rank, dp_rank, pp_rank, error))
    {
      g_free (ex);
      return NULL;
    }
  /* The expert grid (costmodel/context.c expert_grid_rank): a stage's tp * cp * dp ranks
   * numbered tp-fastest, then cp, taken etp-fastest, then ep, then edp. */
  guint grid = (dp_rank * ex->cp + cp_rank) * cfg->tp + tp_rank;
  ex->etp = mp_parallel_config_etp (cfg);
  ex->ep = MAX (cfg->ep, 1u);
  ex->etp_rank = grid % ex->etp;
  ex->ep_rank = grid / ex->etp % ex->ep;
  ex->edp = mp_parallel_config_edp (cfg);
  ex->edp_rank = grid / (ex->etp * ex->ep);
  /* the dp * cp ranks hold the same weights and reduce (ZeRO: shard) gradients together,
   * as Megatron-Core's data-parallel group with context parallelism */
  ex->dp = cfg->dp * ex->cp;
  ex->dp_rank = dp_rank * ex->cp + cp_rank;
  ex->zero = ex->dp > 1 ? cfg->zero : 0;
  ex->shard = ex->zero >= 1 ? mp_parallel_config_zero_shard (cfg) : ex->dp;
  ex->reps = ex->dp / ex->shard;
  ex->shard_rank = ex->dp_rank % ex->shard;
  ex->rep_rank = ex->dp_rank / ex->shard;
  ex->no_reshard = ex->zero >= 3 && cfg->no_reshard;
  ex->sp = cfg->sequence_parallel && cfg->tp > 1;
  ex->M = cfg->num_micro_batches;
  ex->lr = model->optimizer == MP_OPTIM_ADAM ? 3e-3f : 0.05f;
  set_shapes (ex);
  /* The loss is a mean over every token (transformer), or over every output of every
   * sample (mlp regression). */
  ex->loss_count = (double) global_batch * ex->T;
  if (model->arch == MP_ARCH_MLP)
    ex->loss_count *= (double) model->mlp_layers[model->n_mlp_layers - 1].out;
  ex->tensors = g_ptr_array_new ();
  ex->n_layers = model->n_layers;
  ex->layers = g_new0 (ExLayer, ex->n_layers);
  ex->input = g_new0 (float *, (gsize) ex->n_layers * ex->M);
  ex->dinput = g_new0 (float *, (gsize) ex->n_layers * ex->M);
  if (!make_groups (ex, error))
    goto fail;
  for (guint l = 0; l < ex->n_layers; l++)
    {
      ExLayer *L = &ex->layers[l];
      L->ir = &model->layers[l];
      L->here = stage_of_layer[l] == pp_rank;
      L->owns = g_ptr_array_new ();
      L->uses = g_ptr_array_new ();
      L->acts = g_new0 (gpointer, ex->M);
      L->kept = ex->zero >= 3 && mp_parallel_config_fsdp_root (cfg, L->ir);
    }
  for (guint l = 0; l < ex->n_layers; l++)
    {
      ExLayer *L = &ex->layers[l];
      if (!L->here)
        continue;
      gboolean ok = L->ir->kind == MP_LAYER_EMBEDDING ? setup_embedding (ex, L, l, error)
                    : L->ir->kind == MP_LAYER_HEAD    ? setup_head (ex, L, l, error)
                    : L->ir->kind == MP_LAYER_DENSE   ? mp_exec_dense_setup (ex, l, error)
                                                      : setup_block (ex, L, l, error);
      if (!ok)
        goto fail;
      /* uses: the layer's own tensors first, then a shared word embedding (head) */
      for (guint i = 0; i < L->owns->len; i++)
        g_ptr_array_insert (L->uses, (gint) i, g_ptr_array_index (L->owns, i));
    }
  return ex;
fail:
  mp_exec_free (ex);
  return NULL;
}

void
mp_exec_free (MpExec *ex)
{
  if (ex == NULL)
    return;
  MpBackend *be = ex->be;
  for (guint l = 0; l < ex->n_layers && ex->layers; l++)
    {
      for (guint mb = 0; mb < ex->M; mb++)
        {
          mp_exec_release_acts (ex, l, mb);
          be->ops->release (be, ex->input[l * ex->M + mb]);
          be->ops->release (be, ex->dinput[l * ex->M + mb]);
        }
      if (ex->layers[l].owns)
        g_ptr_array_unref (ex->layers[l].owns);
      if (ex->layers[l].uses)
        g_ptr_array_unref (ex->layers[l].uses);
      g_free (ex->layers[l].acts);
    }
  for (guint i = 0; ex->tensors && i < ex->tensors->len; i++)
    tensor_free (ex, g_ptr_array_index (ex->tensors, i));
  if (ex->tensors)
    g_ptr_array_unref (ex->tensors);
  be->ops->group_free (be, ex->tp_group);
  be->ops->group_free (be, ex->dp_group);
  be->ops->group_free (be, ex->ends_group);
  be->ops->group_free (be, ex->world_group);
  if (ex->shard_group != ex->dp_group)
    be->ops->group_free (be, ex->shard_group);
  if (ex->rep_group != NULL)
    be->ops->group_free (be, ex->rep_group);
  if (ex->seq_group)
    be->ops->group_free (be, ex->seq_group);
  if (ex->cp_group)
    be->ops->group_free (be, ex->cp_group);
  if (ex->etp_group)
    be->ops->group_free (be, ex->etp_group);
  if (ex->edp_group != ex->dp_group)
    {
      be->ops->group_free (be, ex->ep_group);
      be->ops->group_free (be, ex->edp_group);
    }
  be->ops->release (be, ex->teacher);
  g_free (ex->layers);
  g_free (ex->input);
  g_free (ex->dinput);
  g_free (ex->cp_pos);
  g_free (ex->group_start);
  g_free (ex->chunk_layers);
  g_free (ex);
}

void
mp_exec_set_chunks (MpExec *ex, const guint *chunk_layers, guint n_chunks)
{
  /* the plan's split (an uneven one included) decides which blocks full recompute with
   * recompute_num_layers rebuilds (mp_recompute_full_layer), as in the program */
  if (n_chunks == mp_parallel_config_chunks (&ex->cfg))
    {
      g_free (ex->chunk_layers);
      ex->chunk_layers = g_memdup2 (chunk_layers, n_chunks * sizeof (guint));
      ex->cfg.chunk_layers = ex->chunk_layers;
    }
  guint n = ex->cfg.recompute_num_layers;
  if (ex->cfg.recompute != MP_RECOMPUTE_FULL || n < 2
      || ex->cfg.recompute_method != MP_RECOMPUTE_METHOD_UNIFORM)
    return;
  g_free (ex->group_start);
  ex->group_start = g_new (guint, ex->n_layers);
  for (guint c = 0, at = 0; c < n_chunks; at += chunk_layers[c], c++)
    for (guint l = at, blocks = 0, start = at; l < at + chunk_layers[c] && l < ex->n_layers; l++)
      {
        MpLayerKind kind = ex->model->layers[l].kind;
        if (kind == MP_LAYER_EMBEDDING || kind == MP_LAYER_HEAD || kind == MP_LAYER_DENSE)
          {
            ex->group_start[l] = l;
            continue;
          }
        if (blocks++ % n == 0)
          start = l;
        ex->group_start[l] = start;
      }
}

gsize
mp_exec_boundary_n (const MpExec *ex, guint layer)
{
  if (ex->model->arch == MP_ARCH_MLP)
    return mp_exec_dense_boundary_n (ex, layer);
  return (gsize) ex->Ns * ex->C;
}

void
mp_exec_step_begin (MpExec *ex, guint step)
{
  ex->step = step;
  ex->loss_sum = 0;
  for (guint i = 0; i < ex->tensors->len; i++)
    {
      ExTensor *t = g_ptr_array_index (ex->tensors, i);
      if (t->grad)
        ex->be->ops->zero (ex->be, t->grad, t->padded * sizeof (float));
      if (t->gshard && !t->gshard_in_grad)
        ex->be->ops->zero (ex->be, t->gshard, t->shard_n * sizeof (float));
      t->pending = 0;
    }
}

/* ---- step end: loss, gradient norm, optimizer -------------------------------------- */

gboolean
mp_exec_step_loss (MpExec *ex, double *loss, GError **error)
{
  /* A float sum is enough for the mean of a few thousand losses near 1..10 (the sum is
   * in double on each rank; the world all-reduce adds a few numbers). */
  float v = (float) ex->loss_sum;
  if (!ex->be->ops->all_reduce (ex->be, ex->world_group, &v, 1, MP_REDUCE_SUM, error))
    return FALSE;
  *loss = (double) v / ex->loss_count;
  return TRUE;
}

/* The reduced gradient this rank is responsible for, and its length. */
static const float *
reduced_grad (const MpExec *ex, const ExTensor *t, gsize *n)
{
  if (t->zero >= 1)
    {
      *n = t->shard_n;
      return t->gshard;
    }
  *n = t->n;
  return t->grad;
}

/* Sum of squares counting every distinct parameter once: replicated tensors on tp rank 0
 * (expert ones, replicated over etp: on etp rank 0), unsharded gradients on dp rank 0,
 * HSDP's shards in the first shard group, the tied copy not at all. */
static double
local_sumsq (const MpExec *ex)
{
  double s = 0;
  for (guint i = 0; i < ex->tensors->len; i++)
    {
      const ExTensor *t = g_ptr_array_index (ex->tensors, i);
      if (t->tied_copy || (t->replicated && (t->expert ? ex->etp_rank : ex->tp_rank) != 0)
          || (t->zero == 0 && t->dp_rank != 0) || t->rep_rank != 0)
        continue;
      gsize n;
      const float *g = reduced_grad (ex, t, &n);
      s += ex->k->sumsq (ex->be, g, n);
    }
  return s;
}

/* The parameters this rank updates: the whole local tensor, or its ZeRO shard. */
static float *
updated_params (const MpExec *ex, ExTensor *t)
{
  if (t->zero >= 3)
    return t->pshard;
  if (t->zero >= 1)
    return t->param + t->dp_rank * t->shard_n;
  return t->param;
}

/* Copies the tp_partial tensors' reduced gradients into BUF, one after another (INTO),
 * or back out of it; returns how many floats that is (BUF NULL: only counts). */
static gsize
pack_tp_partial (const MpExec *ex, float *buf, gboolean into)
{
  gsize at = 0, n;
  for (guint i = 0; i < ex->tensors->len; i++)
    {
      const ExTensor *t = g_ptr_array_index (ex->tensors, i);
      if (!t->tp_partial)
        continue;
      float *g = (float *) reduced_grad (ex, t, &n);
      if (buf && into)
        ex->be->ops->copy (ex->be, buf + at, g, n * sizeof (float));
      else if (buf)
        ex->be->ops->copy (ex->be, g, buf + at, n * sizeof (float));
      at += n;
    }
  return at;
}

/* The tp_partial gradients summed over tp in one all-reduce, once per step, as
 * Megatron-Core's finalize_model_grads does for sequence-parallel parameters (not after
 * every micro-batch's backward). The sum commutes with the dp reduction before it: every
 * tp rank holds the same shard of a replicated tensor. */
static gboolean
finalize_tp_grads (MpExec *ex, GError **error)
{
  gsize total = ex->tp > 1 ? pack_tp_partial (ex, NULL, FALSE) : 0;
  if (total == 0)
    return TRUE;
  float *buf = ex->be->ops->alloc (ex->be, total * sizeof (float), MP_MEM_OTHER, error);
  if (buf == NULL)
    return FALSE;
  pack_tp_partial (ex, buf, TRUE);
  gboolean ok = ex->be->ops->all_reduce (ex->be, ex->tp_group, buf, total, MP_REDUCE_SUM,
                                         error);
  if (ok)
    pack_tp_partial (ex, buf, FALSE);
  ex->be->ops->release (ex->be, buf);
  return ok;
}

gboolean
mp_exec_optimizer (MpExec *ex, double *grad_norm, GError **error)
{
  if (!finalize_tp_grads (ex, error))
    return FALSE;
  /* Two floats: the sum in double is split into a high and a low part so that the
   * all-reduce in fp32 keeps about 1e-14 of it. */
  double s = local_sumsq (ex);
  float parts[2] = { (float) s, (float) (s - (double) (float) s) };
  if (!ex->be->ops->all_reduce (ex->be, ex->world_group, parts, 2, MP_REDUCE_SUM, error))
    return FALSE;
  *grad_norm = sqrt ((double) parts[0] + (double) parts[1]);
  for (guint i = 0; i < ex->tensors->len; i++)
    {
      ExTensor *t = g_ptr_array_index (ex->tensors, i);
      gsize n;
      const float *g = reduced_grad (ex, t, &n);
      float *p = updated_params (ex, t);
      if (ex->model->optimizer == MP_OPTIM_ADAM)
        ex->k->adamw_update (ex->be, p, g, t->m, t->v, n, ex->lr, 0.9f, 0.95f, 1e-8f, 0.0f,
                             (int) ex->step + 1);
      else
        ex->k->sgd_update (ex->be, p, g, t->m, n, ex->lr, 0.9f);
    }
  return TRUE;
}
