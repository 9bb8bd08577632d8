/* model-dense.c - the mlp architecture's layers, forward and backward for one micro-batch
 * on one rank, and its loss. (Its tensors are set up in model-exec.c.)
 *
 * Tensor parallelism is Megatron's for consecutive linear layers, as the model IR assigns
 * it (model.c build_mlp): even layers are column-parallel (each rank computes its block of
 * the outputs from the full input, and applies the activation to it), odd layers
 * row-parallel (each rank multiplies its block of the input features; the partial outputs
 * are all-reduced, or reduce-scattered over the rows under sequence parallelism, then the
 * replicated bias and the activation apply). So a column / row pair needs one reduction
 * forward and one backward, and the activation crossing from a column layer to the next
 * stays split over tp, also when it crosses a pipeline stage.
 *
 * The task: regression onto a seeded linear map. Sample g of the global batch is a row of
 * N(0, 1) features drawn from the counter-based generator (row g of one stream, so the
 * data are identical whatever the plan); its target is teacher . x, teacher an
 * (outputs, input) matrix with N(0, 1 / input) entries from the seed (ex->teacher). The
 * loss is the mean squared error over every output of every sample of the global batch.
 * A linear target is within reach of any of these networks (ReLU(z) - ReLU(-z) = z), so
 * the loss goes down; and as a sum over outputs it splits over tp with no gather: each
 * rank adds the squared errors of the outputs it holds. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/exec-private.h"
#include "common/error.h"

#include <string.h>

#define SAMPLE_STREAM UINT64_C (0xda7a5a3b)

enum { D_IN, D_Z, D_DY };   /* gathered / generated input, pre-activation, loss gradient */

/* Layer L as this rank computes it. */
typedef struct {
  gboolean column, last;
  int in;                   /* input features of the GEMM on this rank */
  int out_full;             /* the layer's outputs */
  int R, W;                 /* the output this rank holds: R rows of W features */
  MpActivation act;
} Dense;

static Dense
dense_of (const MpExec *ex, guint l)
{
  const MpModel *m = ex->model;
  Dense d;
  d.column = l % 2 == 0;
  d.last = l + 1 == ex->n_layers;
  int in = (int) (l == 0 ? m->input : m->mlp_layers[l - 1].out);
  d.out_full = (int) m->mlp_layers[l].out;
  d.in = d.column ? in : in / (int) ex->tp;
  d.R = d.column ? ex->N : ex->Ns;
  d.W = d.column ? d.out_full / (int) ex->tp : d.out_full;
  d.act = m->mlp_layers[l].activation;
  return d;
}

gsize
mp_exec_dense_boundary_n (const MpExec *ex, guint layer)
{
  Dense d = dense_of (ex, layer);
  return (gsize) d.R * d.W;
}

static float *
W_ (const ExLayer *L)
{
  return ((ExTensor *) g_ptr_array_index (L->uses, 0))->param;
}

static float *
B_ (const MpExec *ex, const ExLayer *L)
{
  return ex->model->bias ? ((ExTensor *) g_ptr_array_index (L->uses, 1))->param : NULL;
}

static float *
GW (const ExLayer *L)
{
  return ((ExTensor *) g_ptr_array_index (L->uses, 0))->grad;
}

static float *
GB (const MpExec *ex, const ExLayer *L)
{
  return ex->model->bias ? ((ExTensor *) g_ptr_array_index (L->uses, 1))->grad : NULL;
}

static float *
alloc_floats (MpExec *ex, gsize n, MpMemKind kind, GError **error)
{
  return ex->be->ops->alloc (ex->be, n * sizeof (float), kind, error);
}

/* Rows [R0, R0 + ROWS) of micro-batch MB's samples (input features each) into a new
 * backend buffer. The global sample index orders samples as the transformer's sequences:
 * step, then data rank, micro-batch and row. */
static float *
make_samples (MpExec *ex, guint mb, int r0, int rows, MpMemKind kind, GError **error)
{
  gsize in = ex->model->input;
  guint64 first = (guint64) ex->step * ex->global_batch
                  + ((guint64) ex->data_rank * ex->M + mb) * ex->mbs + (guint64) r0;
  g_autofree float *host = g_new (float, (gsize) rows * in);
  mpk_cpu_fill_normal_block (host, ex->seed, SAMPLE_STREAM, in, first, rows, 0, in, 0.0f, 1.0f);
  float *x = alloc_floats (ex, (gsize) rows * in, kind, error);
  if (x)
    ex->be->ops->upload (ex->be, x, host, (gsize) rows * in * sizeof (float));
  return x;
}

/* The input of the GEMM (N rows): generated (layer 0), gathered over the sequence shards
 * (a column layer under sequence parallelism; kept in D_IN), or the layer's input. */
static const float *
dense_input (MpExec *ex, guint l, guint mb, const Dense *d, Acts *a, GError **error)
{
  if (l == 0)
    return a->buf[D_IN] = make_samples (ex, mb, 0, ex->N, MP_MEM_ACTIVATIONS, error);
  const float *x = ex->input[l * ex->M + mb];
  if (!d->column || !ex->sp)
    return x;
  if (mp_exec_act_alloc (ex, a, D_IN, (gsize) ex->N * d->in, error) == NULL)
    return NULL;
  return mp_exec_tp_gather_width (ex, x, a->buf[D_IN], d->in, error);
}

static void
activate (MpExec *ex, const Dense *d, float *y, const float *z)
{
  gsize n = (gsize) d->R * d->W;
  if (d->act == MP_ACT_RELU)
    ex->k->relu_forward (ex->be, y, z, n);
  else if (d->act == MP_ACT_GELU)
    ex->k->gelu_forward (ex->be, y, z, n);
  else
    ex->be->ops->copy (ex->be, y, z, n * sizeof (float));
}

/* The layer on micro-batch MB into Y (R, W), keeping its input and pre-activation in A. */
static gboolean
dense_run (MpExec *ex, guint l, guint mb, Acts *a, float *y, GError **error)
{
  const ExLayer *L = &ex->layers[l];
  Dense d = dense_of (ex, l);
  const float *x = dense_input (ex, l, mb, &d, a, error);
  if (x == NULL || mp_exec_act_alloc (ex, a, D_Z, (gsize) d.R * d.W, error) == NULL)
    return FALSE;
  if (d.column)
    {
      ex->k->matmul_forward (ex->be, a->buf[D_Z], x, W_ (L), B_ (ex, L), ex->N, d.in, d.W);
      activate (ex, &d, y, a->buf[D_Z]);
      return TRUE;
    }
  /* Row-parallel: partial sums (N, out) over tp; reduced in place into D_Z, or
   * reduce-scattered from a scratch buffer under sequence parallelism. */
  float *full = ex->sp ? alloc_floats (ex, (gsize) ex->N * d.W, MP_MEM_OTHER, error)
                       : a->buf[D_Z];
  if (full == NULL)
    return FALSE;
  ex->k->matmul_forward (ex->be, full, x, W_ (L), NULL, ex->N, d.in, d.W);
  gboolean ok = mp_exec_tp_reduce_width (ex, full, a->buf[D_Z], d.W, error) != NULL;
  if (ex->sp)
    ex->be->ops->release (ex->be, full);
  if (!ok)
    return FALSE;
  const float *b = B_ (ex, L);
  for (int r = 0; b && r < d.R; r++)
    ex->k->add (ex->be, a->buf[D_Z] + (gsize) r * d.W, b, (gsize) d.W);
  activate (ex, &d, y, a->buf[D_Z]);
  return TRUE;
}

/* The last layer's loss on Y (R, W): adds the squared errors to ex->loss_sum (on every
 * rank holding distinct outputs: all of them when the outputs are split over tp, by
 * features or rows; tp rank 0 when they are replicated) and keeps dloss / dY in D_DY. */
static gboolean
dense_loss (MpExec *ex, guint mb, const Dense *d, Acts *a, const float *y, GError **error)
{
  int r0 = d->column || !ex->sp ? 0 : (int) ex->tp_rank * ex->Ns;
  gsize n = (gsize) d->R * d->W;
  float *x = make_samples (ex, mb, r0, d->R, MP_MEM_OTHER, error);
  if (x == NULL || mp_exec_act_alloc (ex, a, D_DY, n, error) == NULL)
    {
      ex->be->ops->release (ex->be, x);
      return FALSE;
    }
  float *dy = a->buf[D_DY];
  ex->k->matmul_forward (ex->be, dy, x, ex->teacher, NULL, d->R, (int) ex->model->input, d->W);
  ex->be->ops->release (ex->be, x);
  g_autofree float *h = g_new (float, n);
  g_autofree float *t = g_new (float, n);
  ex->be->ops->download (ex->be, h, y, n * sizeof (float));
  ex->be->ops->download (ex->be, t, dy, n * sizeof (float));
  double sum = 0;
  float scale = (float) (2.0 / ex->loss_count);
  for (gsize i = 0; i < n; i++)
    {
      double e = (double) h[i] - (double) t[i];
      sum += e * e;
      h[i] = scale * (float) e;
    }
  if (d->column || ex->sp || ex->tp_rank == 0)
    ex->loss_sum += sum;
  ex->be->ops->upload (ex->be, dy, h, n * sizeof (float));
  return TRUE;
}

gboolean
mp_exec_dense_forward (MpExec *ex, guint l, guint mb, GError **error)
{
  Dense d = dense_of (ex, l);
  gsize n = (gsize) d.R * d.W;
  Acts *a = g_new0 (Acts, 1);
  float **slot = d.last ? NULL : &ex->input[(l + 1) * ex->M + mb];
  float *y = alloc_floats (ex, n, d.last ? MP_MEM_OTHER : MP_MEM_ACTIVATIONS, error);
  gboolean ok = y && dense_run (ex, l, mb, a, y, error)
                && (!d.last || dense_loss (ex, mb, &d, a, y, error));
  if (!ok || d.last)
    ex->be->ops->release (ex->be, y);
  if (!ok)
    {
      mp_exec_acts_free (ex, a);
      return FALSE;
    }
  if (slot)
    {
      g_assert (*slot == NULL);
      *slot = y;
    }
  /* Full recompute keeps only the layer's input; the last layer keeps its loss gradient
   * (its forward is the loss, not to be counted twice). */
  if (mp_recompute_full_layer (&ex->cfg, ex->model, l) && !d.last)
    mp_exec_acts_free (ex, a);
  else
    ex->layers[l].acts[mb] = a;
  return TRUE;
}

/* Rebuilds a dropped layer's activations (full recompute), its output thrown away. */
static Acts *
dense_recompute (MpExec *ex, guint l, guint mb, GError **error)
{
  Acts *a = g_new0 (Acts, 1);
  float *y = alloc_floats (ex, mp_exec_dense_boundary_n (ex, l), MP_MEM_OTHER, error);
  gboolean ok = y && dense_run (ex, l, mb, a, y, error);
  ex->be->ops->release (ex->be, y);
  if (ok)
    return a;
  mp_exec_acts_free (ex, a);
  return NULL;
}

/* dL/dz (R, W) from dL/dy through the activation: a new buffer, or DY itself when the
 * layer is linear (*OWNED FALSE). */
static float *
deactivate (MpExec *ex, const Dense *d, const float *z, float *dy, gboolean *owned,
            GError **error)
{
  gsize n = (gsize) d->R * d->W;
  *owned = d->act != MP_ACT_NONE;
  if (!*owned)
    return dy;
  float *dz = alloc_floats (ex, n, MP_MEM_OTHER, error);
  if (dz == NULL)
    return NULL;
  if (d->act == MP_ACT_RELU)
    ex->k->relu_backward (ex->be, dz, z, dy, n);
  else
    ex->k->gelu_backward (ex->be, dz, z, dy, n);
  return dz;
}

/* Column-parallel backward: dW, db from this rank's outputs; the input gradient is a
 * partial sum over tp, all-reduced (or reduce-scattered) into the previous layer's
 * gradient slot. Layer 0 has no input gradient. */
static gboolean
column_backward (MpExec *ex, guint l, guint mb, const Dense *d, const float *x,
                 const float *dz, GError **error)
{
  const ExLayer *L = &ex->layers[l];
  if (l == 0)
    {
      ex->k->matmul_backward (ex->be, NULL, GW (L), GB (ex, L), dz, x, W_ (L), ex->N, d->in, d->W);
      return TRUE;
    }
  float **dslot = &ex->dinput[l * ex->M + mb];
  g_assert (*dslot == NULL);
  *dslot = alloc_floats (ex, (gsize) ex->Ns * d->in, MP_MEM_ACTIVATIONS, error);
  /* without sequence parallelism the slot is the all-reduce's buffer */
  float *full = ex->sp ? alloc_floats (ex, (gsize) ex->N * d->in, MP_MEM_OTHER, error) : *dslot;
  if (*dslot == NULL || full == NULL)
    return FALSE;
  ex->k->matmul_backward (ex->be, full, GW (L), GB (ex, L), dz, x, W_ (L), ex->N, d->in, d->W);
  gboolean ok = mp_exec_tp_reduce_width (ex, full, *dslot, d->in, error) != NULL;
  if (ex->sp)
    ex->be->ops->release (ex->be, full);
  return ok;
}

/* Row-parallel backward: the replicated bias's gradient (under sequence parallelism from
 * this rank's rows, summed over tp once per step: tp_partial), then dz gathered to every
 * row for this rank's block of dW and of the input gradient (split, as the input was). */
static gboolean
row_backward (MpExec *ex, guint l, guint mb, const Dense *d, const float *x, const float *dz,
              GError **error)
{
  const ExLayer *L = &ex->layers[l];
  float *gb = GB (ex, L);
  float *full = ex->sp ? alloc_floats (ex, (gsize) ex->N * d->W, MP_MEM_OTHER, error) : NULL;
  float **dslot = &ex->dinput[l * ex->M + mb];
  g_assert (*dslot == NULL);
  *dslot = alloc_floats (ex, (gsize) ex->N * d->in, MP_MEM_ACTIVATIONS, error);
  gboolean ok = *dslot && (!ex->sp || full);
  if (ok && gb)
    ex->k->matmul_backward (ex->be, NULL, NULL, gb, dz, NULL, NULL, d->R, 0, d->W);
  const float *dzf = ok ? mp_exec_tp_gather_width (ex, dz, full, d->W, error) : NULL;
  if (dzf)
    ex->k->matmul_backward (ex->be, *dslot, GW (L), NULL, dzf, x, W_ (L), ex->N, d->in, d->W);
  ex->be->ops->release (ex->be, full);
  return dzf != NULL;
}

gboolean
mp_exec_dense_backward (MpExec *ex, guint l, guint mb, GError **error)
{
  ExLayer *L = &ex->layers[l];
  Dense d = dense_of (ex, l);
  Acts *a = L->acts[mb];
  if (a == NULL && (a = dense_recompute (ex, l, mb, error)) == NULL)
    return FALSE;
  L->acts[mb] = a;
  float **dyslot = d.last ? NULL : &ex->dinput[(l + 1) * ex->M + mb];
  float *dy = d.last ? a->buf[D_DY] : *dyslot;
  gboolean owned;
  float *dz = deactivate (ex, &d, a->buf[D_Z], dy, &owned, error);
  if (dz == NULL)
    return FALSE;
  const float *x = a->buf[D_IN] ? a->buf[D_IN] : ex->input[l * ex->M + mb];
  gboolean ok = d.column ? column_backward (ex, l, mb, &d, x, dz, error)
                         : row_backward (ex, l, mb, &d, x, dz, error);
  if (owned)
    ex->be->ops->release (ex->be, dz);
  if (!ok)
    return FALSE;
  if (dyslot)
    {
      ex->be->ops->release (ex->be, *dyslot);
      *dyslot = NULL;
    }
  mp_exec_release_acts (ex, l, mb);
  return TRUE;
}
