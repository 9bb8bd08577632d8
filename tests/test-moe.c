/* test-moe.c - cmocka tests of the executor's MoE MLP (exec/model-moe.c) on one host rank,
 * no MPI: its backward against central finite differences of its forward, for the input,
 * the router, the routed experts and the shared expert, with the load-balancing loss in
 * the objective (the scalar is sum (out * probe) plus the block's share of the step loss,
 * what mp_exec_moe_forward adds to loss_sum over loss_count); dropless and with a capacity
 * that drops tokens (the count checked against the loads the routing implies); and the
 * router kernels' own gradient through the renormalised top-k. */
#include "tests/test-util.h"
#include "exec/exec-private.h"
#include "exec/model-moe.h"
#include "kernels/cpu/kernels.h"

#include <string.h>

typedef struct {
  MpModel *model;
  MpBackend *be;
  MpExec *ex;
  ExLayer *L;
  guint first;           /* index in L->uses of the first MoE tensor */
  float *h, *out, *probe;
  gsize n;               /* N * C */
  Acts *a;
} Block;

static void
block_open (Block *b, double capacity_factor)
{
  memset (b, 0, sizeof *b);
  GError *err = NULL;
  g_autofree char *path = g_build_filename (MPPLAN_SRCDIR, "tests", "data",
                                            "model-moe-block.yaml", NULL);
  b->model = mp_model_load (path, &err);
  assert_non_null (b->model);
  b->model->capacity_factor = capacity_factor;
  b->be = mp_backend_host_new (0, 1);
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.micro_batch_size = 2;
  cfg.num_micro_batches = 1;
  g_autofree guint *stage_of = g_new0 (guint, b->model->n_layers);
  b->ex = mp_exec_new (b->be, b->model, &cfg, 2, 0, 0, 0, 0, stage_of, 7, &err);
  if (b->ex == NULL)
    fail_msg ("mp_exec_new: %s", err->message);
  b->L = &b->ex->layers[2];                  /* embedding, dense block, MoE block */
  assert_true (b->L->ir->moe);
  while (strncmp (((ExTensor *) g_ptr_array_index (b->L->uses, b->first))->name, "shared.", 7))
    b->first++;
  b->n = (gsize) b->ex->N * b->ex->C;
  b->h = g_new (float, b->n);
  b->out = g_new (float, b->n);
  b->probe = g_new (float, b->n);
  mpk_cpu_fill_normal (b->h, b->n, 11, 1, 0, 0.0f, 1.0f);
  mpk_cpu_fill_normal (b->probe, b->n, 11, 2, 0, 0.0f, 1.0f);
  /* larger weights than the init's, so that every term's gradient is well above the
   * differences' rounding */
  for (guint i = b->first; i < b->L->uses->len; i++)
    {
      ExTensor *t = g_ptr_array_index (b->L->uses, i);
      mpk_cpu_fill_normal (t->param, t->n, 11, 10 + i, 0, 0.0f, 0.5f);
    }
}

static void
block_close (Block *b)
{
  mp_exec_acts_free (b->ex, b->a);
  mp_exec_free (b->ex);
  b->be->ops->free (b->be);
  mp_model_free (b->model);
  g_free (b->h);
  g_free (b->out);
  g_free (b->probe);
}

/* The objective at the current inputs: sum out * probe plus the block's aux loss share. */
static double
objective (Block *b)
{
  mp_exec_acts_free (b->ex, b->a);
  b->a = g_new0 (Acts, 1);
  b->ex->loss_sum = 0;
  GError *err = NULL;
  if (!mp_exec_moe_forward (b->ex, b->L, b->first, b->a, b->h, b->out, &err))
    fail_msg ("forward: %s", err->message);
  double s = b->ex->loss_sum / b->ex->loss_count;
  for (gsize i = 0; i < b->n; i++)
    s += (double) b->out[i] * b->probe[i];
  return s;
}

/* Central differences of the objective in every element of X (n) against GRAD, within
 * TOL of the largest gradient element. */
static void
check_grad (Block *b, const char *name, float *x, gsize n, const float *grad, double tol)
{
  double scale = 1e-6, hstep = 1e-2;
  for (gsize i = 0; i < n; i++)
    scale = fmax (scale, fabs (grad[i]));
  for (gsize i = 0; i < n; i++)
    {
      float x0 = x[i];
      x[i] = (float) (x0 + hstep);
      double up = x[i], lu = objective (b);
      x[i] = (float) (x0 - hstep);
      double down = x[i], ld = objective (b);
      x[i] = x0;
      double fd = (lu - ld) / (up - down);
      if (!(fabs (fd - grad[i]) <= tol * scale))
        fail_msg ("%s[%zu]: backward %.7g vs finite difference %.7g (largest %.3g)", name,
                  (size_t) i, grad[i], fd, scale);
    }
}

static void
check_block (double capacity_factor, gboolean expect_drops, gboolean aux_only)
{
  Block b;
  block_open (&b, capacity_factor);
  if (aux_only)                     /* the objective is the load-balancing loss alone */
    memset (b.probe, 0, b.n * sizeof (float));
  mp_exec_step_begin (b.ex, 0);
  guint64 dropped0 = b.ex->moe_dropped;
  objective (&b);
  guint64 dropped = b.ex->moe_dropped - dropped0;
  if (expect_drops)
    assert_true (dropped > 0);
  else
    assert_int_equal (dropped, 0);
  g_autofree float *dh = g_new0 (float, b.n);
  GError *err = NULL;
  if (!mp_exec_moe_backward (b.ex, b.L, b.first, b.a, b.probe, b.h, dh, &err))
    fail_msg ("backward: %s", err->message);
  check_grad (&b, "h", b.h, b.n, dh, 2e-3);
  for (guint i = b.first; i < b.L->uses->len; i++)
    {
      ExTensor *t = g_ptr_array_index (b.L->uses, i);
      g_autofree float *g = g_memdup2 (t->grad, t->n * sizeof (float));
      check_grad (&b, t->name, t->param, t->n, g, 2e-3);
    }
  block_close (&b);
}

static void
test_moe_gradients_dropless (void **state)
{
  (void) state;
  check_block (0.0, FALSE, FALSE);
}

/* The load-balancing loss's gradient alone (router and input), too small next to the
 * experts' to be seen in the test above. */
static void
test_moe_gradients_aux (void **state)
{
  (void) state;
  check_block (0.0, FALSE, TRUE);
}

static const MpOp *
ir_op (const MpLayer *l, const char *name)
{
  for (guint i = 0; i < l->n_ops; i++)
    if (strcmp (l->ops[i].name, name) == 0)
      return &l->ops[i];
  fail_msg ("no op %s in %s", name, l->name);
  return NULL;
}

/* The IR's permutation and combine (model.c) charge the bytes the executor moves for
 * them: dropless, gather_rows copies R = N K rows of C floats by R indices, and
 * scatter_add_rows reads the R expert rows and their R gates and adds them into the N
 * token rows; the combine keeps the R expert rows and gates for backward. */
static void
test_moe_dispatch_bytes_are_the_executors (void **state)
{
  (void) state;
  Block b;
  block_open (&b, 0.0);
  mp_exec_step_begin (b.ex, 0);
  objective (&b);
  const ExRoute *r = b.a->route;
  double N = b.ex->N, C = b.ex->C, R = r->R, f = sizeof (float);
  assert_int_equal (r->R, b.ex->N * (int) b.model->experts_per_token);
  const MpOp *perm = ir_op (b.L->ir, "expert_permute");
  const MpOp *comb = ir_op (b.L->ir, "expert_combine");
  mp_assert_close (perm->fwd_bytes * N, 2 * R * C * f + R * sizeof (int), 1e-12);
  mp_assert_close (comb->fwd_bytes * N, R * C * f + R * f + 2 * N * C * f, 1e-12);
  mp_assert_close (comb->act_rep_bytes * N, R * C * f + R * f, 1e-12);
  assert_true (perm->kind == MP_OP_ELEMENTWISE && comb->kind == MP_OP_ELEMENTWISE);
  block_close (&b);
}

/* Capacity 0.5: each expert takes ceil (0.5 * 12 * 2 / 4) = 3 of the 24 (token, choice)
 * rows at most; the rest of its load, as the router kernel assigns it, is dropped. */
static void
test_moe_gradients_with_drops (void **state)
{
  (void) state;
  check_block (0.5, TRUE, FALSE);
  Block b;
  block_open (&b, 0.5);
  objective (&b);
  ExTensor *router = g_ptr_array_index (b.L->uses, b.first + 2);
  assert_string_equal (router->name, "router");
  float logits[12 * 4], probs[12 * 4], gates[12 * 2];
  int idx[12 * 2], load[4] = { 0 };
  assert_int_equal (b.ex->N, 12);
  mpk_cpu_matmul_forward (logits, b.h, router->param, NULL, 12, b.ex->C, 4);
  mpk_cpu_router_forward (probs, idx, gates, logits, 12, 4, 2);
  for (int i = 0; i < 24; i++)
    load[idx[i]]++;
  guint64 want = 0;
  for (int e = 0; e < 4; e++)
    want += load[e] > 3 ? (guint64) (load[e] - 3) : 0;
  assert_int_equal (b.ex->moe_routed, 24);
  assert_int_equal (b.ex->moe_dropped, want);
  assert_true (want > 0);
  block_close (&b);
}

/* The router kernels alone: the gradient of sum gates * probe + aux through softmax,
 * top-k and the renormalisation. */
typedef struct {
  float logits[12 * 5], probs[12 * 5], gates[12 * 2], probe[12 * 2];
  int idx[12 * 2];
} Router;

static double
router_objective (Router *r)
{
  mpk_cpu_router_forward (r->probs, r->idx, r->gates, r->logits, 12, 5, 2);
  double s = mpk_cpu_router_aux (NULL, r->probs, r->idx, 3, 4, 5, 2, 0.3f, 0.0f);
  for (int i = 0; i < 24; i++)
    s += (double) r->gates[i] * r->probe[i];
  return s;
}

static void
test_router_gradient (void **state)
{
  (void) state;
  Router r;
  mpk_cpu_fill_normal (r.logits, 60, 5, 1, 0, 0.0f, 1.0f);
  mpk_cpu_fill_normal (r.probe, 24, 5, 2, 0, 0.0f, 1.0f);
  router_objective (&r);
  /* the top-k is sorted by probability */
  for (int n = 0; n < 12; n++)
    assert_true (r.probs[n * 5 + r.idx[n * 2]] >= r.probs[n * 5 + r.idx[n * 2 + 1]]);
  float dprobs[60] = { 0 }, dlog[60] = { 0 };
  mpk_cpu_router_aux (dprobs, r.probs, r.idx, 3, 4, 5, 2, 0.3f, 1.0f);
  mpk_cpu_router_backward (dlog, r.probs, r.idx, r.gates, r.probe, dprobs, 12, 5, 2);
  double scale = 0;
  for (int i = 0; i < 60; i++)
    scale = fmax (scale, fabs (dlog[i]));
  for (int i = 0; i < 60; i++)
    {
      float x0 = r.logits[i];
      /* a small step: a larger one swaps two near-equal choices of token 5 */
      r.logits[i] = x0 + 1e-3f;
      double up = r.logits[i], lu = router_objective (&r);
      r.logits[i] = x0 - 1e-3f;
      double down = r.logits[i], ld = router_objective (&r);
      r.logits[i] = x0;
      double fd = (lu - ld) / (up - down);
      if (!(fabs (fd - dlog[i]) <= 2e-3 * scale))
        fail_msg ("dlogits[%d]: backward %.7g vs finite difference %.7g", i, dlog[i], fd);
    }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_router_gradient),
    cmocka_unit_test (test_moe_gradients_dropless),
    cmocka_unit_test (test_moe_gradients_aux),
    cmocka_unit_test (test_moe_gradients_with_drops),
    cmocka_unit_test (test_moe_dispatch_bytes_are_the_executors),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
