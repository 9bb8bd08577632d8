/* profile.c - measured tables that override the built-in curves: achieved GEMM FLOP/s on a
 * (M, N, K) grid, achieved copy bandwidth, nccl-tests busbw against message size per
 * collective and link tier, and the executor's own kernels (attention against key length,
 * element-wise classes, the optimizer step). Interpolation is log-log, as these quantities are close to
 * power laws between samples.
 *
 * `mpplan calibrate` measures them (exec/calibrate*.c) and profile-yaml.c reads and writes
 * them; here are the setters (which check what they are given) and the interpolation.
 * Units: FLOP/s, bytes, bytes/s. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/profile-private.h"
#include "common/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

MpCostProfile *
mp_cost_profile_new (const char *device)
{
  MpCostProfile *p = g_new0 (MpCostProfile, 1);
  p->device = device && *device ? g_strdup (device) : NULL;
  for (int k = 0; k < MP_SPREAD_N; k++)
    p->spread[k] = -1;
  return p;
}

static void
gemm_clear (CmGemmTable *t)
{
  for (int a = 0; a < 3; a++)
    g_clear_pointer (&t->axis[a], g_free);
  g_clear_pointer (&t->flops, g_free);
  g_clear_pointer (&t->log_flops, g_free);
  memset (t, 0, sizeof *t);
}

static void
coll_clear (CmCollTable *t)
{
  g_free (t->size);
  g_free (t->busbw);
  g_free (t->log_size);
  g_free (t->log_busbw);
  memset (t, 0, sizeof *t);
}

static void
attn_clear (CmAttnTable *t)
{
  g_free (t->seq);
  g_free (t->flops[0]);
  g_free (t->flops[1]);
  memset (t, 0, sizeof *t);
}

static void
machine_clear (MpProfileMachine *m)
{
  g_free (m->hostname);
  g_free (m->cpu);
  g_free (m->date);
  g_free (m->version);
  memset (m, 0, sizeof *m);
}

void
mp_cost_profile_set_machine (MpCostProfile *profile, const MpProfileMachine *machine)
{
  g_return_if_fail (profile != NULL && machine != NULL);
  MpProfileMachine copy = {
    .hostname = g_strdup (machine->hostname),
    .cpu = g_strdup (machine->cpu),
    .cores = machine->cores,
    .date = g_strdup (machine->date),
    .version = g_strdup (machine->version),
  };
  machine_clear (&profile->machine);
  profile->machine = copy;
}

const MpProfileMachine *
mp_cost_profile_machine (const MpCostProfile *profile)
{
  g_return_val_if_fail (profile != NULL, NULL);
  return &profile->machine;
}

void
mp_cost_profile_free (MpCostProfile *profile)
{
  if (profile == NULL)
    return;
  for (int d = 0; d < MP_DTYPE_N; d++)
    gemm_clear (&profile->gemm[d]);
  for (int c = 0; c < MP_COLL_N; c++)
    for (int t = 0; t < MP_TIER_N; t++)
      coll_clear (&profile->coll[c][t]);
  attn_clear (&profile->attn);
  machine_clear (&profile->machine);
  g_free (profile->device);
  g_free (profile);
}

const char *
mp_cost_profile_device (const MpCostProfile *profile)
{
  return profile ? profile->device : NULL;
}

/* TRUE when V[N] is strictly increasing and positive (and N > 0). */
static gboolean
increasing (const double *v, guint n)
{
  if (v == NULL || n == 0)
    return FALSE;
  for (guint i = 0; i < n; i++)
    if (!(v[i] > 0 && isfinite (v[i])) || (i > 0 && !(v[i] > v[i - 1])))
      return FALSE;
  return TRUE;
}

static gboolean
all_positive (const double *v, gsize n)
{
  if (v == NULL)
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if (!(v[i] > 0 && isfinite (v[i])))
      return FALSE;
  return TRUE;
}

gboolean
mp_cost_profile_set_gemm (MpCostProfile *profile, MpDtype dtype, const double *m, guint nm,
                          const double *n, guint nn, const double *k, guint nk,
                          const double *flops_per_s, GError **error)
{
  g_return_val_if_fail (profile != NULL && (guint) dtype < MP_DTYPE_N, FALSE);
  const double *axes[3] = { m, n, k };
  guint lens[3] = { nm, nn, nk };
  static const char *const names[3] = { "M", "N", "K" };
  for (int a = 0; a < 3; a++)
    if (!increasing (axes[a], lens[a]))
      {
        g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                     "GEMM table: the %s axis must be positive and strictly increasing",
                     names[a]);
        return FALSE;
      }
  gsize cells = (gsize) nm * nn * nk;
  if (!all_positive (flops_per_s, cells))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                   "GEMM table: every achieved rate must be positive");
      return FALSE;
    }
  CmGemmTable *t = &profile->gemm[dtype];
  gemm_clear (t);
  for (int a = 0; a < 3; a++)
    {
      t->axis[a] = g_memdup2 (axes[a], lens[a] * sizeof (double));
      t->len[a] = lens[a];
    }
  t->flops = g_memdup2 (flops_per_s, cells * sizeof (double));
  t->log_flops = g_new (double, cells);
  for (gsize i = 0; i < cells; i++)
    t->log_flops[i] = log (flops_per_s[i]);
  return TRUE;
}

void
mp_cost_profile_set_mem_bw (MpCostProfile *profile, double bytes_per_s)
{
  g_return_if_fail (profile != NULL && bytes_per_s >= 0);
  profile->mem_bw_Bps = bytes_per_s;
}

double
mp_cost_profile_mem_bw (const MpCostProfile *profile)
{
  return profile ? profile->mem_bw_Bps : 0;
}

void
mp_cost_profile_set_cold_weight_bw (MpCostProfile *profile, double bytes_per_s)
{
  g_return_if_fail (profile != NULL && bytes_per_s >= 0);
  profile->cold_weight_Bps = bytes_per_s;
}

double
mp_cost_profile_cold_weight_bw (const MpCostProfile *profile)
{
  return profile ? profile->cold_weight_Bps : 0;
}

/* A rate that is not positive and finite means "not measured". */
static double
rate_or_zero (double v)
{
  return v > 0 && isfinite (v) ? v : 0;
}

void
mp_cost_profile_set_elementwise (MpCostProfile *profile, MpEwClass klass,
                                 double fwd_bytes_per_s, double bwd_bytes_per_s)
{
  g_return_if_fail (profile != NULL && (guint) klass < MP_EW_N);
  profile->ew_Bps[klass][0] = rate_or_zero (fwd_bytes_per_s);
  profile->ew_Bps[klass][1] = rate_or_zero (bwd_bytes_per_s);
}

double
mp_cost_profile_elementwise_bps (const MpCostProfile *profile, MpEwClass klass,
                                 gboolean backward)
{
  if (profile == NULL || (guint) klass >= MP_EW_N)
    return 0;
  return profile->ew_Bps[klass][backward ? 1 : 0];
}

gboolean
mp_cost_profile_set_coll (MpCostProfile *profile, MpCollKind kind, MpTier tier,
                          guint n_ranks, const double *sizes, const double *busbw_Bps,
                          guint count, GError **error)
{
  g_return_val_if_fail (profile != NULL && (guint) kind < MP_COLL_N
                        && (guint) tier < MP_TIER_N, FALSE);
  if (!increasing (sizes, count) || !all_positive (busbw_Bps, count) || n_ranks < 2)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                   "%s table: sizes must be positive and strictly increasing, bandwidths "
                   "positive, and at least 2 ranks", mp_coll_kind_name (kind));
      return FALSE;
    }
  CmCollTable *t = &profile->coll[kind][tier];
  coll_clear (t);
  t->n_ranks = n_ranks;
  t->count = count;
  t->size = g_memdup2 (sizes, count * sizeof (double));
  t->busbw = g_memdup2 (busbw_Bps, count * sizeof (double));
  t->log_size = g_new (double, count);
  t->log_busbw = g_new (double, count);
  for (guint i = 0; i < count; i++)
    {
      t->log_size[i] = log (sizes[i]);
      t->log_busbw[i] = log (busbw_Bps[i]);
    }
  return TRUE;
}

/* The cell I and weight W (0..1 towards I + 1) of log(X) on log-spaced AXIS[N]; X outside
 * the axis is clamped to its ends. */
static void
locate (const double *axis, guint n, double x, guint *i, double *w)
{
  *i = 0;
  *w = 0;
  if (n < 2 || x <= axis[0])
    return;
  if (x >= axis[n - 1])
    {
      *i = n - 2;
      *w = 1;
      return;
    }
  guint lo = 0, hi = n - 1;
  while (hi - lo > 1)
    {
      guint mid = (lo + hi) / 2;
      if (axis[mid] <= x)
        lo = mid;
      else
        hi = mid;
    }
  *i = lo;
  *w = (log (x) - log (axis[lo])) / (log (axis[lo + 1]) - log (axis[lo]));
}

double
mp_cost_profile_gemm_flops (const MpCostProfile *profile, MpDtype dtype, double m, double n,
                            double k)
{
  if (profile == NULL || (guint) dtype >= MP_DTYPE_N)
    return 0;
  const CmGemmTable *t = &profile->gemm[dtype];
  if (t->log_flops == NULL)
    return 0;
  double x[3] = { m, n, k };
  guint idx[3];
  double w[3];
  for (int a = 0; a < 3; a++)
    locate (t->axis[a], t->len[a], x[a], &idx[a], &w[a]);
  /* Trilinear in log space over the 8 corners (a corner past a length-1 axis has weight
   * 0, so it is never read). */
  double acc = 0;
  for (int c = 0; c < 8; c++)
    {
      double weight = 1;
      guint at[3];
      for (int a = 0; a < 3; a++)
        {
          int up = (c >> a) & 1;
          weight *= up ? w[a] : 1 - w[a];
          at[a] = idx[a] + (up && t->len[a] > 1 ? 1 : 0);
        }
      if (weight == 0)
        continue;
      acc += weight * t->log_flops[((gsize) at[0] * t->len[1] + at[1]) * t->len[2] + at[2]];
    }
  return exp (acc);
}

double
mp_cost_profile_coll_busbw (const MpCostProfile *profile, MpCollKind kind, MpTier tier,
                            double size)
{
  if (profile == NULL || (guint) kind >= MP_COLL_N || (guint) tier >= MP_TIER_N
      || !(size > 0))
    return 0;
  const CmCollTable *t = &profile->coll[kind][tier];
  if (t->count == 0)
    return 0;
  double ls = log (size);
  /* Below the table the smallest message's time holds (latency floor), so busbw falls in
   * proportion to the size; above it the largest message's busbw holds. */
  if (ls <= t->log_size[0])
    return exp (t->log_busbw[0] + ls - t->log_size[0]);
  if (ls >= t->log_size[t->count - 1])
    return exp (t->log_busbw[t->count - 1]);
  guint lo = 0, hi = t->count - 1;
  while (hi - lo > 1)
    {
      guint mid = (lo + hi) / 2;
      if (t->log_size[mid] <= ls)
        lo = mid;
      else
        hi = mid;
    }
  double w = (ls - t->log_size[lo]) / (t->log_size[lo + 1] - t->log_size[lo]);
  return exp (t->log_busbw[lo] + w * (t->log_busbw[lo + 1] - t->log_busbw[lo]));
}

gboolean
mp_cost_profile_set_attention (MpCostProfile *profile, const double *seq, guint n,
                               const double *fwd_flops_per_s, const double *bwd_flops_per_s,
                               GError **error)
{
  g_return_val_if_fail (profile != NULL, FALSE);
  if (n == 0 || (seq == NULL && n != 1) || (seq != NULL && !increasing (seq, n))
      || !all_positive (fwd_flops_per_s, n) || !all_positive (bwd_flops_per_s, n))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
                   "attention table: key lengths must be positive and strictly increasing, "
                   "one forward and one backward rate each, every rate positive");
      return FALSE;
    }
  CmAttnTable *t = &profile->attn;
  attn_clear (t);
  t->n = n;
  t->seq = seq ? g_memdup2 (seq, n * sizeof (double)) : NULL;
  t->flops[0] = g_memdup2 (fwd_flops_per_s, n * sizeof (double));
  t->flops[1] = g_memdup2 (bwd_flops_per_s, n * sizeof (double));
  return TRUE;
}

double
mp_cost_profile_attention_flops (const MpCostProfile *profile, double seq_kv,
                                 gboolean backward)
{
  if (profile == NULL || profile->attn.n == 0)
    return 0;
  const CmAttnTable *t = &profile->attn;
  const double *y = t->flops[backward ? 1 : 0];
  if (t->seq == NULL || t->n == 1)
    return y[0];
  guint i;
  double w;
  locate (t->seq, t->n, MAX (seq_kv, 1), &i, &w);
  if (w == 0 || w == 1)
    return y[i + (w == 1)];   /* a sample itself, exactly */
  return exp ((1 - w) * log (y[i]) + w * log (y[i + 1]));
}

void
mp_cost_profile_set_optimizer (MpCostProfile *profile, double adam_params_per_s,
                               double sgd_params_per_s)
{
  g_return_if_fail (profile != NULL);
  profile->optim_params[MP_OPTIM_ADAM] = rate_or_zero (adam_params_per_s);
  profile->optim_params[MP_OPTIM_SGD] = rate_or_zero (sgd_params_per_s);
}

double
mp_cost_profile_optimizer_params (const MpCostProfile *profile, MpOptimizer optimizer)
{
  if (profile == NULL || (guint) optimizer > MP_OPTIM_SGD)
    return 0;
  return profile->optim_params[optimizer];
}

/* ---- the spread of the repeats ------------------------------------------------------- */

void
mp_cost_profile_set_spread (MpCostProfile *profile, MpSpreadKind kind, guint repeats,
                            double rel_iqr)
{
  g_return_if_fail (profile != NULL && (guint) kind < MP_SPREAD_N && repeats >= 1
                    && rel_iqr >= 0);
  profile->spread[kind] = rel_iqr;
  profile->spread_repeats[kind] = repeats;
}

double
mp_cost_profile_spread (const MpCostProfile *profile, MpSpreadKind kind, guint *repeats)
{
  gboolean set = profile != NULL && (guint) kind < MP_SPREAD_N && profile->spread[kind] >= 0;
  if (repeats)
    *repeats = set ? profile->spread_repeats[kind] : 0;
  return set ? profile->spread[kind] : -1;
}
