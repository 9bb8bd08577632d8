/* calibrate-kernels.c - the executor's reference kernels (kernels/cpu) in `mpplan
 * calibrate --backend host`: attention, the element-wise classes (norm, activation, loss,
 * gated activation) and the optimizer step, at the shapes of the zoo's transformers, every rank running
 * them at once (as the executor does, one rank per core), timed as rates of what the cost
 * model charges them (FLOPs, bytes, parameters). Units: seconds, FLOP/s, bytes/s. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/calibrate-private.h"
#include "kernels/cpu/kernels.h"
#include "model/model.h"

#include <string.h>

/* What the reference kernels (kernels/cpu) are measured as: an element-wise class
 * (MpEwClass), causal attention, or an optimizer step. */
enum { KB_ATTENTION = MP_EW_N, KB_ADAM, KB_SGD };

/* One of the reference kernels at one shape, with its buffers. What the cost model charges
 * it (FLOPs, bytes or parameters) is in fwd_units / bwd_units (0: no backward). */
typedef struct {
  int klass;                   /* MpEwClass or KB_* */
  gboolean rmsnorm;            /* MP_EW_NORM: rmsnorm rather than layernorm */
  MpkAttnShape s;              /* attention */
  gsize n, c;                  /* element-wise: rows, row width; optimizer: parameters */
  double fwd_units, bwd_units;
  /* The kernels' arguments: views into the buffers below. */
  float *in, *out, *din, *dout, *k, *v, *dk, *dv, *w, *b, *dw, *db, *stat1, *stat2;
  int *targets;
  float *owned[14];
  guint n_owned;
} KBench;

/* A buffer of N floats owned by K: zeros, or reproducible values in [-1, 1) when FILL (the
 * kernels' speed depends on the values only through tanhf and expf, and real activations
 * are of this size). */
static float *
kb_floats (KBench *k, gsize n, gboolean fill)
{
  g_assert (k->n_owned < G_N_ELEMENTS (k->owned));
  float *x = g_new0 (float, MAX (n, (gsize) 1));
  for (gsize i = 0; fill && i < n; i++)
    x[i] = (float) ((i * 7919) % 2001) / 1000.0f - 1.0f;
  return k->owned[k->n_owned++] = x;
}

static void
kbench_clear (KBench *k)
{
  for (guint i = 0; i < k->n_owned; i++)
    g_free (k->owned[i]);
  g_free (k->targets);
  memset (k, 0, sizeof *k);
}

/* Norm, activation or loss forward or BACKWARD. */
static void
kbench_run_elementwise (KBench *k, gboolean backward)
{
  int n = (int) k->n, c = (int) k->c;
  if (k->klass == MP_EW_NORM && k->rmsnorm)
    {
      if (!backward)
        mpk_cpu_rmsnorm_forward (k->out, k->stat2, k->in, k->w, n, c, 1e-5f);
      else
        mpk_cpu_rmsnorm_backward (k->din, k->dw, k->dout, k->in, k->w, k->stat2, n, c);
    }
  else if (k->klass == MP_EW_NORM && !backward)
    mpk_cpu_layernorm_forward (k->out, k->stat1, k->stat2, k->in, k->w, k->b, n, c, 1e-5f);
  else if (k->klass == MP_EW_NORM)
    mpk_cpu_layernorm_backward (k->din, k->dw, k->db, k->dout, k->in, k->w, k->stat1, k->stat2,
                                n, c);
  else if (k->klass == MP_EW_ACTIVATION && !backward)
    mpk_cpu_gelu_forward (k->out, k->in, k->n * k->c);
  else if (k->klass == MP_EW_ACTIVATION)
    mpk_cpu_gelu_backward (k->din, k->in, k->dout, k->n * k->c);
  else if (k->klass == MP_EW_GATED && !backward)
    mpk_cpu_swiglu_forward (k->out, k->in, n, c);
  else if (k->klass == MP_EW_GATED)
    mpk_cpu_swiglu_backward (k->din, k->in, k->dout, n, c);
  else if (!backward)
    mpk_cpu_crossentropy_forward (k->out, k->stat1, k->in, k->targets, n, c);
  else
    mpk_cpu_crossentropy_backward (k->din, k->in, k->stat1, k->targets, 1.0f / n, n, c);
}

/* The optimizer step as the executor takes it (exec/model-exec.c): the gradient's sum of
 * squares, then the update. The sum is kept in stat1 so the pass is not optimised away. */
static void
kbench_run_optimizer (KBench *k)
{
  k->stat1[0] += (float) mpk_cpu_sumsq (k->in, k->n);
  if (k->klass == KB_ADAM)
    mpk_cpu_adamw_update (k->out, k->in, k->k, k->v, k->n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 2);
  else
    mpk_cpu_sgd_update (k->out, k->in, k->k, k->n, 0.05f, 0.9f);
}

static void
kbench_run (KBench *k, gboolean backward)
{
  if (k->klass < MP_EW_N)
    kbench_run_elementwise (k, backward);
  else if (k->klass != KB_ATTENTION)
    kbench_run_optimizer (k);
  else if (!backward)
    mpk_cpu_attention_forward (k->out, k->stat1, NULL, k->in, k->k, k->v, k->s);
  else
    mpk_cpu_attention_backward (k->din, k->dk, k->dv, k->dout, k->out, k->stat1, NULL, k->in,
                                k->k, k->v, k->s);
}

/* Causal attention of MODEL over one sequence on one group of query heads sharing a kv
 * head, laid out as the executor lays them out at tp 1 (every head's q, k and v packed in
 * one row per position): heads are independent, so the rate per FLOP is that of every
 * head count, and a gpt2-124m sequence stays well under a second. The rate does depend on
 * the sequence (the keys outgrow the caches), so each model's length is measured. */
static void
kbench_attention (KBench *k, const MpModel *m)
{
  int kvh = (int) MAX (m->kv_heads, 1u), group = (int) MAX (m->heads / (guint) kvh, 1u);
  int hd = (int) m->head_dim, t = (int) m->seq_len;
  int ldqkv = ((int) m->heads + 2 * kvh) * hd, ldo = (int) m->heads * hd;
  k->klass = KB_ATTENTION;
  k->s = (MpkAttnShape) { 1, t, group, 1, hd, ldqkv, ldqkv, ldo };
  gsize qkv = (gsize) t * ldqkv, o = (gsize) t * ldo;
  /* q at column 0, k and v after every query head (the packed layout's offsets). */
  k->in = kb_floats (k, qkv, TRUE), k->din = kb_floats (k, qkv, FALSE);
  k->k = k->in + (gsize) m->heads * hd, k->v = k->k + (gsize) kvh * hd;
  k->dk = k->din + (gsize) m->heads * hd, k->dv = k->dk + (gsize) kvh * hd;
  k->out = kb_floats (k, o, FALSE), k->dout = kb_floats (k, o, TRUE);
  k->stat1 = kb_floats (k, (gsize) group * t, FALSE);
  /* The cost model's count for this shape (causal, as it costs a transformer). */
  k->fwd_units = mp_cost_attention_flops (1, group, hd, t, t, TRUE, FALSE);
  k->bwd_units = mp_cost_attention_flops (1, group, hd, t, t, TRUE, TRUE);
}

/* The element-wise op of MODEL in KLASS (ew_op: NULL if MODEL has none, or its kernel is
 * not one measured here: gelu and swiglu among the activations); kbench_elementwise sets
 * it up at N rows: bytes charged are the IR's fwd_bytes per token forward and twice that
 * backward (compute.c). */
static const MpOp *
ew_op (const MpModel *m, MpEwClass klass)
{
  if ((klass == MP_EW_ACTIVATION && m->activation != MP_ACT_GELU)
      || (klass == MP_EW_GATED && m->activation != MP_ACT_SWIGLU))
    return NULL;
  for (guint l = 0; l < m->n_layers; l++)
    for (guint o = 0; o < m->layers[l].n_ops; o++)
      if (mp_cost_op_ew_class (m, &m->layers[l].ops[o]) == klass)
        return &m->layers[l].ops[o];
  return NULL;
}

static void
kbench_elementwise (KBench *k, const MpModel *m, MpEwClass klass)
{
  const MpOp *op = ew_op (m, klass);
  gsize c = klass == MP_EW_NORM ? m->hidden : klass == MP_EW_LOSS ? m->vocab : m->ffn_hidden;
  /* One sequence, or fewer rows where a row is long (a vocabulary): 16 MiB per tensor. */
  gsize n = CLAMP (((gsize) 4 << 20) / c, 1, MAX (m->seq_len, 1u)), cells = n * c;
  gsize in = klass == MP_EW_GATED ? 2 * cells : cells;   /* gate and up */
  k->klass = klass;
  k->rmsnorm = m->norm == MP_NORM_RMSNORM;
  k->n = n, k->c = c;
  k->in = kb_floats (k, in, TRUE), k->dout = kb_floats (k, cells, TRUE);
  k->out = kb_floats (k, cells, FALSE), k->din = kb_floats (k, in, FALSE);
  k->w = kb_floats (k, c, TRUE), k->b = kb_floats (k, c, TRUE);
  k->dw = kb_floats (k, c, FALSE), k->db = kb_floats (k, c, FALSE);
  k->stat1 = kb_floats (k, n, FALSE), k->stat2 = kb_floats (k, n, FALSE);
  k->targets = g_new (int, n);
  for (gsize i = 0; i < n; i++)
    k->targets[i] = (int) ((i * 131u) % c);
  k->fwd_units = op->fwd_bytes * n;
  k->bwd_units = 2 * op->fwd_bytes * n;
}

/* The optimizer step KLASS (KB_ADAM, KB_SGD) over 2M parameters (32 MiB of parameters,
 * gradients and state: past the caches, as a model's are). */
static void
kbench_optimizer (KBench *k, int klass)
{
  gsize n = (gsize) 1 << 21;
  k->klass = klass;
  k->n = n;
  k->in = kb_floats (k, n, TRUE), k->out = kb_floats (k, n, TRUE);  /* gradients, weights */
  k->k = kb_floats (k, n, FALSE);                                     /* momentum */
  k->v = klass == KB_ADAM ? kb_floats (k, n, FALSE) : NULL;           /* second moment */
  k->stat1 = kb_floats (k, 1, FALSE);
  k->fwd_units = (double) n;
}

/* Seconds per run of K forward or BACKWARD, slowest rank, every rank running it at once
 * (as the executor does, one rank per core): a warm-up run sizes the repetitions. */
static gboolean
time_kbench (Cal *c, KBench *k, gboolean backward, double *time_s, GError **error)
{
  double t0 = cal_now_s ();
  kbench_run (k, backward);
  double once = cal_now_s () - t0;
  if (!cal_max_over_ranks (c, &once, error))
    return FALSE;
  int reps = (int) CLAMP ((c->quick ? 0.05 : 0.2) / MAX (once, 1e-9), 1, 200);
  if (!cal_barrier (c, error))
    return FALSE;
  t0 = cal_now_s ();
  for (int r = 0; r < reps; r++)
    kbench_run (k, backward);
  *time_s = (cal_now_s () - t0) / reps;
  return cal_max_over_ranks (c, time_s, error);
}

/* Passes a job keeps (CalDevice.passes is at most this). */
#define KJOB_PASSES 8

/* One kernel to measure: a class at a zoo model's shape (MODEL NULL: an optimizer), what
 * the cost model charges it, its seconds in each pass so far and, once finished, their
 * median; forward and backward. */
typedef struct {
  const MpModel *model;
  int klass;
  double units[2], secs[2][KJOB_PASSES], median[2];
  guint done;
} KJob;

/* Times JOB once more. */
static gboolean
kjob_time (Cal *c, KJob *job, GError **error)
{
  KBench k = { 0 };
  if (job->klass == KB_ATTENTION)
    kbench_attention (&k, job->model);
  else if (job->klass >= KB_ADAM)
    kbench_optimizer (&k, job->klass);
  else
    kbench_elementwise (&k, job->model, (MpEwClass) job->klass);
  job->units[0] = k.fwd_units, job->units[1] = k.bwd_units;
  double t[2] = { 0, 0 };
  gboolean ok = time_kbench (c, &k, FALSE, &t[0], error)
                && (k.bwd_units == 0 || time_kbench (c, &k, TRUE, &t[1], error));
  kbench_clear (&k);
  g_assert (job->done < KJOB_PASSES);
  for (int b = 0; ok && b < 2; b++)
    job->secs[b][job->done] = t[b];
  job->done += ok;
  return ok;
}

/* The jobs for the transformers among ZOO (loaded into MODELS, which owns them): attention
 * and each element-wise class a model has, then Adam and SGD. */
GArray *
cal_kjobs_new (const char *const *zoo, GPtrArray *models)
{
  GArray *jobs = g_array_new (FALSE, TRUE, sizeof (KJob));
  for (int i = 0; zoo[i]; i++)
    {
      g_autoptr(GError) local = NULL;
      MpModel *m = mp_model_load (zoo[i], &local);
      if (m == NULL || m->arch != MP_ARCH_TRANSFORMER)
        {
          g_clear_pointer (&m, mp_model_free);
          continue;
        }
      g_ptr_array_add (models, m);
      g_array_append_val (jobs, ((KJob) { .model = m, .klass = KB_ATTENTION }));
      for (int e = 0; e < MP_EW_N; e++)
        if (ew_op (m, (MpEwClass) e) != NULL)
          g_array_append_val (jobs, ((KJob) { .model = m, .klass = e }));
    }
  g_array_append_val (jobs, ((KJob) { .klass = KB_ADAM }));
  g_array_append_val (jobs, ((KJob) { .klass = KB_SGD }));
  return jobs;
}

/* Rate of class KLASS (at sequence length SEQ for attention; 0: any), forward or BACKWARD:
 * its jobs' total units over their total median time; 0 if none. */
static double
kjobs_rate (GArray *jobs, int klass, double seq, gboolean backward)
{
  double units = 0, secs = 0;
  for (guint i = 0; i < jobs->len; i++)
    {
      const KJob *j = &g_array_index (jobs, KJob, i);
      if (j->klass == klass && (seq == 0 || (double) j->model->seq_len == seq))
        units += j->units[backward], secs += j->median[backward];
    }
  return secs > 0 ? cal_round4 (units / secs) : 0;
}

/* The attention table: one point per distinct sequence length among the jobs. */
static gboolean
set_attention_rates (Cal *c, GArray *jobs, GError **error)
{
  g_autoptr(GArray) seq = g_array_new (FALSE, FALSE, sizeof (double));
  for (guint i = 0; i < jobs->len; i++)
    {
      const KJob *j = &g_array_index (jobs, KJob, i);
      if (j->klass == KB_ATTENTION)
        cal_axis_add (seq, (double) j->model->seq_len, 1, G_MAXDOUBLE);
    }
  if (seq->len == 0)
    return TRUE;
  g_autofree double *f = g_new (double, seq->len), *b = g_new (double, seq->len);
  for (guint i = 0; i < seq->len; i++)
    {
      double t = g_array_index (seq, double, i);
      f[i] = kjobs_rate (jobs, KB_ATTENTION, t, FALSE);
      b[i] = kjobs_rate (jobs, KB_ATTENTION, t, TRUE);
      if (c->out)
        fprintf (c->out, "# attention (reference kernel, %d rank%s at once), %g keys: %.3g "
                 "GFLOP/s forward, %.3g backward per rank\n", c->size,
                 c->size == 1 ? "" : "s", t, f[i] / 1e9, b[i] / 1e9);
    }
  return mp_cost_profile_set_attention (c->profile, (double *) seq->data, seq->len, f, b,
                                        error);
}

/* Times every job once more. */
gboolean
cal_kjobs_pass (Cal *c, GArray *jobs, GError **error)
{
  for (guint i = 0; i < jobs->len; i++)
    if (!kjob_time (c, &g_array_index (jobs, KJob, i), error))
      return FALSE;
  return TRUE;
}

/* Each job's median time over its passes, the spread of the passes (MP_SPREAD_KERNELS)
 * recorded. */
static void
kjobs_medians (Cal *c, GArray *jobs)
{
  g_autoptr(GArray) spreads = g_array_new (FALSE, FALSE, sizeof (double));
  guint repeats = 0;
  for (guint i = 0; i < jobs->len; i++)
    {
      KJob *j = &g_array_index (jobs, KJob, i);
      for (int b = 0; b < 2 && j->done > 0; b++)
        if (j->units[b] > 0)
          j->median[b] = cal_median (j->secs[b], j->done, spreads);
      repeats = MAX (repeats, j->done);
    }
  if (repeats > 0)
    cal_record_spread (c, MP_SPREAD_KERNELS, repeats, spreads);
}

/* The executor's attention, element-wise and optimizer kernels at the host zoo's shapes
 * (JOBS, after the passes), as rates of what the cost model charges them: these reference
 * kernels run far below the roofline that GEMM and triad rates imply. One rate per class
 * (attention: per sequence length), its total units over its total median time. */
gboolean
cal_kjobs_finish (Cal *c, GArray *jobs, GError **error)
{
  static const char *const names[] = { "norm", "activation", "loss", "gated activation" };
  kjobs_medians (c, jobs);
  if (!set_attention_rates (c, jobs, error))
    return FALSE;
  for (int e = 0; e < MP_EW_N; e++)
    {
      double f = kjobs_rate (jobs, e, 0, FALSE), b = kjobs_rate (jobs, e, 0, TRUE);
      if (!(f > 0))
        continue;
      mp_cost_profile_set_elementwise (c->profile, (MpEwClass) e, f, b);
      if (c->out)
        fprintf (c->out, "# %s (reference kernel): %.3g GB/s forward, %.3g backward per "
                 "rank, of the bytes the cost model charges\n", names[e], f / 1e9, b / 1e9);
    }
  double adam = kjobs_rate (jobs, KB_ADAM, 0, FALSE), sgd = kjobs_rate (jobs, KB_SGD, 0, FALSE);
  mp_cost_profile_set_optimizer (c->profile, adam, sgd);
  if (c->out)
    fprintf (c->out, "# optimizer step (gradient norm + update): Adam %.3g, SGD %.3g "
             "Mparameters/s per rank\n\n", adam / 1e6, sgd / 1e6);
  return TRUE;
}
