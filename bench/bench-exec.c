/* bench-exec.c - the executor's speed on one rank (issue 6's targets):
 *  1. its GEMM-bound phases against OpenBLAS's own sgemm at the same shapes (target
 *     >= 80%): every linear-layer kernel call of the measured steps is timed inside the
 *     executor (through a wrapped kernel table), then the same sgemm calls are timed in a
 *     plain loop on fresh buffers; medians per shape, summed over a step's calls;
 *  2. the instruction interpreter's own overhead (target < 2% of a step): the step's wall
 *     time not inside any instruction (the runner's dispatch and bookkeeping between
 *     them), from the runner's per-instruction timestamps.
 * The plan must be a one-rank plan, e.g.
 *   mpplan plan -m examples/models/tiny-gpt.yaml -c tests/data/cluster-host1.yaml -o p.yaml
 *   bench/bench-exec p.yaml [steps]
 * The executor's linear backward also sums the bias gradient (not a GEMM); it counts
 * against the executor here, so the ratio is a lower bound. */
#include "config.h"
#include "bench/bench-util.h"
#include "common/stats.h"
#include "exec/exec.h"
#include "planner/planner.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>

/* One shape of linear-layer call: forward, or backward with or without the input grad. */
typedef struct {
  int N, C, OC;
  gboolean backward, dinp, dweight;
  GArray *times;               /* seconds per call inside the executor */
} Shape;

static GHashTable *shapes;     /* "f N C OC" -> Shape* */
static MpKernelOps wrapped;
static const MpKernelOps *host;

static Shape *
shape_of (int N, int C, int OC, gboolean backward, gboolean dinp, gboolean dweight)
{
  g_autofree char *key = g_strdup_printf ("%c%d%d %d %d %d", backward ? 'b' : 'f', dinp,
                                          dweight, N, C, OC);
  Shape *s = g_hash_table_lookup (shapes, key);
  if (s == NULL)
    {
      s = g_new0 (Shape, 1);
      *s = (Shape) { N, C, OC, backward, dinp, dweight, g_array_new (FALSE, FALSE, sizeof (double)) };
      g_hash_table_insert (shapes, g_steal_pointer (&key), s);
    }
  return s;
}

static void
timed_forward (MpBackend *be, float *out, const float *inp, const float *weight,
               const float *bias, int N, int C, int OC)
{
  double t0 = bench_now_s ();
  host->matmul_forward (be, out, inp, weight, bias, N, C, OC);
  double dt = bench_now_s () - t0;
  g_array_append_val (shape_of (N, C, OC, FALSE, FALSE, FALSE)->times, dt);
}

static void
timed_backward (MpBackend *be, float *dinp, float *dweight, float *dbias, const float *dout,
                const float *inp, const float *weight, int N, int C, int OC)
{
  double t0 = bench_now_s ();
  host->matmul_backward (be, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  double dt = bench_now_s () - t0;
  if (C > 0 && (dinp || dweight))            /* a bias-only call has no GEMM */
    g_array_append_val (shape_of (N, C, OC, TRUE, dinp != NULL, dweight != NULL)->times, dt);
}

/* The sgemm calls of one shape, as kernels/cpu/matmul.c makes them. */
static void
plain_sgemm (const Shape *s, float *a, float *b, float *c, float *d)
{
  if (!s->backward)
    {
      cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, s->N, s->OC, s->C, 1.0f, a, s->C,
                   b, s->C, 0.0f, c, s->OC);
      return;
    }
  if (s->dinp)
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, s->N, s->C, s->OC, 1.0f, c, s->OC,
                 b, s->C, 1.0f, a, s->C);
  if (s->dweight)
    cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, s->OC, s->C, s->N, 1.0f, c, s->OC, a,
                 s->C, 1.0f, d, s->C);
}

/* Median seconds of the shape's sgemm calls in a plain loop. */
static double
sgemm_median (const Shape *s, int reps)
{
  gsize big = (gsize) MAX (s->N, s->OC) * MAX (s->C, s->OC) + (gsize) s->N * s->C;
  float *a = g_new (float, big), *b = g_new (float, big), *c = g_new (float, big);
  float *d = g_new (float, big);
  for (gsize i = 0; i < big; i++)
    a[i] = b[i] = c[i] = d[i] = (float) ((i * 7919) % 1000) * 1e-3f;
  double *t = g_new (double, reps);
  plain_sgemm (s, a, b, c, d);                  /* warm */
  for (int r = 0; r < reps; r++)
    {
      double t0 = bench_now_s ();
      plain_sgemm (s, a, b, c, d);
      t[r] = bench_now_s () - t0;
    }
  double m = mp_stat_median (t, (guint) reps, NULL);
  g_free (a), g_free (b), g_free (c), g_free (d), g_free (t);
  return m;
}

/* The GEMM table: per shape, calls per step, executor vs plain sgemm medians. */
static void
report_gemms (guint steps)
{
  double exec_s = 0, blas_s = 0;
  printf ("%-9s %6s %6s %6s %6s %12s %12s %7s\n", "call", "N", "C", "OC", "/step",
          "executor ms", "sgemm ms", "ratio");
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init (&it, shapes);
  while (g_hash_table_iter_next (&it, &key, &value))
    {
      Shape *s = value;
      double per_step = (double) s->times->len / steps;
      double em = mp_stat_median ((double *) (void *) s->times->data, s->times->len, NULL);
      double bm = sgemm_median (s, 15);
      exec_s += per_step * em;
      blas_s += per_step * bm;
      printf ("%-9s %6d %6d %6d %6.0f %12.3f %12.3f %6.1f%%\n",
              !s->backward ? "forward" : s->dinp && s->dweight ? "backward" : s->dinp ? "bwd-in"
                                                                               : "bwd-w",
              s->N, s->C, s->OC, per_step, em * 1e3, bm * 1e3, 100 * bm / em);
    }
  printf ("GEMM phases per step: executor %.1f ms, plain sgemm %.1f ms: %.1f%% of OpenBLAS's "
          "rate (target >= 80%%)\n", exec_s * 1e3, blas_s * 1e3, 100 * blas_s / exec_s);
}

/* Step wall time, and the part of it outside every instruction. */
static void
step_overhead (const MpExecSession *r, guint n_insns, double t0, double t1, double *step,
               double *outside)
{
  const MpInsnTime *tm = mp_exec_session_times (r);
  double inside = 0;
  for (guint i = 0; i < n_insns; i++)
    inside += tm[i].t1 - tm[i].t0;
  *step = t1 - t0;
  *outside = *step - inside;
}

static int
run (const char *path, guint steps)
{
  GError *error = NULL;
  g_autoptr(MpPlanFile) file = mp_plan_file_load (path, &error);
  g_autoptr(MpPlanResolved) res = file ? mp_plan_file_resolve (file, &error) : NULL;
  if (res == NULL || res->plan->world_size != 1)
    {
      fprintf (stderr, "bench-exec: %s\n",
               error ? error->message : "the plan must be for one rank");
      g_clear_error (&error);
      return 2;
    }
  const MpPlan *plan = res->plan;
  MpBackend *be = mp_backend_host_new (0, 1);
  host = be->ops->kernels;
  wrapped = *host;
  wrapped.matmul_forward = timed_forward;
  wrapped.matmul_backward = timed_backward;
  MpBackendOps ops = *be->ops;
  ops.kernels = &wrapped;
  be->ops = &ops;
  MpExecSession *r = mp_exec_session_new (be, res, plan, 1, &error);
  if (r == NULL)
    {
      fprintf (stderr, "bench-exec: %s\n", error->message);
      return 2;
    }
  const MpProgram *prog = mp_exec_session_program (r);
  double *step = g_new (double, steps), *outside = g_new (double, steps), frac_max = 0;
  for (guint s = 0; s < steps + 1; s++)
    {
      double t0, t1;
      if (s == 1)                               /* step 0 warms up, uncounted */
        g_hash_table_remove_all (shapes);
      if (!mp_exec_session_step (r, s, &t0, &t1, &error))
        {
          fprintf (stderr, "bench-exec: %s\n", error->message);
          return 1;
        }
      if (s > 0)
        {
          step_overhead (r, prog->n_insns, t0, t1, &step[s - 1], &outside[s - 1]);
          frac_max = MAX (frac_max, outside[s - 1] / step[s - 1]);
        }
    }
  printf ("%s on one rank, %u measured steps, %u instructions a step\n", res->model->name,
          steps, prog->n_insns);
  report_gemms (steps);
  double ms = mp_stat_median (step, (guint) steps, NULL);
  double mo = mp_stat_median (outside, (guint) steps, NULL);
  printf ("step %.1f ms (median); interpreter outside instructions %.3f ms = %.3f%% of a step "
          "(max %.3f%%; target < 2%%)\n", ms * 1e3, mo * 1e3, 100 * mo / ms, 100 * frac_max);
  g_free (step), g_free (outside);
  mp_exec_session_free (r);
  be->ops->free (be);
  return 0;
}

static void
shape_free (gpointer p)
{
  Shape *s = p;
  g_array_unref (s->times);
  g_free (s);
}

int
main (int argc, char **argv)
{
  if (argc < 2)
    {
      fprintf (stderr, "usage: bench-exec ONE-RANK-PLAN.yaml [STEPS (default 5)]\n");
      return 2;
    }
  shapes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, shape_free);
  int status = run (argv[1], argc > 2 ? (guint) atoi (argv[2]) : 5u);
  g_hash_table_unref (shapes);
  return status;
}
