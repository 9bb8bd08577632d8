/* test-sim.c - cmocka tests of the discrete-event simulator (costmodel/sim.c) and the
 * predicted Chrome trace (report/trace.c).
 *
 * Most tests run hand-built stage programs with scripted durations (a cost function of
 * the test's own), so that the schedules' textbook step times hold exactly: GPipe and
 * 1F1B (m + p - 1)(t_f + t_b), interleaved m (t_f + t_b) + (p - 1)(t_f + t_b) / v, data-
 * parallel overlap (only the last bucket exposed when compute dominates), receives never
 * before their sends, ZeRO-3 gathers before use, the tied-embedding rendezvous, and
 * deadlocks and unmatched messages reported as errors. The end-to-end tests (programs
 * from planner/, durations from the cost model) compare the simulation with the closed
 * form on the zoo's best plans. */
#include "tests/test-util.h"
#include "tests/test-env.h"
#include "costmodel/costmodel.h"
#include "costmodel/eventq.h"
#include "common/error.h"
#include "planner/planner.h"
#include "report/report.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/resource.h>

/* ---- hand-built programs ---------------------------------------------------------------- */

/* Scripted durations: per layer forward and backward, a p2p, a gradient bucket, the
 * optimizer, a parameter gather, the tied all-reduce; TP collectives as a share of F/B. */
typedef struct {
  double f, b, p2p, bucket, opt, gather, tied;
  double tp_share;
} Times;

static void
scripted (const MpProgram *program, const MpInsn *insn, const MpProgram *peer, MpSimCost *out,
          gpointer data)
{
  const Times *t = data;
  (void) program;
  (void) peer;
  out->comm_s = 0;
  switch (insn->kind)
    {
    case MP_INSN_FORWARD:
      out->time_s = t->f;
      out->comm_s = t->tp_share * t->f;
      break;
    case MP_INSN_BACKWARD:
      out->time_s = t->b;
      out->comm_s = t->tp_share * t->b;
      break;
    case MP_INSN_SEND:
      out->time_s = t->p2p;
      break;
    case MP_INSN_REDUCE_GRADS:
      out->time_s = t->bucket * insn->n_layers;
      break;
    case MP_INSN_GATHER_PARAMS:
      out->time_s = t->gather;
      break;
    case MP_INSN_REDUCE_TIED:
      out->time_s = t->tied;
      break;
    case MP_INSN_OPTIMIZER:
      out->time_s = t->opt;
      break;
    default:
      out->time_s = 0;
      break;
    }
}

typedef struct {
  guint p, v, m, layers;        /* stages, chunks per stage, micro-batches, layers/chunk */
  guint extra_first;            /* more layers in each stage's first chunk (uneven split) */
  MpSchedule schedule;
  guint bucket_layers;          /* > 0: a REDUCE_GRADS per this many layers, last mb */
  gboolean zero3;               /* a GATHER_PARAMS before every chunk's F and B */
  gboolean tied;                /* REDUCE_TIED on the first and last stage */
} Shape;

static void
emit (GArray *a, MpInsnKind kind, MpStream stream, guint chunk, guint layer, guint mb, gint peer,
      guint tag)
{
  MpInsn insn = { .kind = kind, .stream = stream, .chunk = chunk, .layer = layer,
                  .n_layers = 1, .micro_batch = mb, .peer = peer, .tag = tag,
                  .coll = MP_COLL_ALL_REDUCE, .bytes = 1e6, .flops = 1e9 };
  g_array_append_val (a, insn);
}

/* A tag unique per (direction, model chunk, micro-batch). */
static guint
tag_of (gboolean backward, guint vstage, guint mb)
{
  return (backward ? 1u << 30 : 0) | vstage << 16 | mb;
}

/* Forward (or backward) of micro-batch MB through chunk C of stage I: receive from the
 * previous virtual stage, run the layers, send to the next. */
static void
emit_pass (GArray *a, const Shape *sh, guint i, guint c, guint mb, gboolean backward,
           guint *bucket_count)
{
  guint vs = c * sh->p + i, last = sh->p * sh->v - 1;
  gint prev = (gint) ((i + sh->p - 1) % sh->p), next = (gint) ((i + 1) % sh->p);
  guint layers = sh->layers + (c == 0 ? sh->extra_first : 0);
  guint first_layer = vs * (sh->layers + sh->extra_first);
  if (sh->zero3)
    {
      MpInsn g = { .kind = MP_INSN_GATHER_PARAMS, .stream = MP_STREAM_DP, .chunk = c,
                   .layer = first_layer, .n_layers = sh->layers, .peer = -1,
                   .coll = MP_COLL_ALL_GATHER, .bytes = 1e6 };
      g_array_append_val (a, g);
    }
  if (!backward)
    {
      if (vs > 0)
        emit (a, MP_INSN_RECV, MP_STREAM_PP, c, first_layer, mb, prev, tag_of (FALSE, vs - 1, mb));
      for (guint l = 0; l < layers; l++)
        emit (a, MP_INSN_FORWARD, MP_STREAM_COMPUTE, c, first_layer + l, mb, -1, 0);
      if (vs < last)
        emit (a, MP_INSN_SEND, MP_STREAM_PP, c, first_layer, mb, next, tag_of (FALSE, vs, mb));
      return;
    }
  if (vs < last)
    emit (a, MP_INSN_RECV, MP_STREAM_PP, c, first_layer, mb, next, tag_of (TRUE, vs + 1, mb));
  for (guint l = layers; l-- > 0;)
    {
      emit (a, MP_INSN_BACKWARD, MP_STREAM_COMPUTE, c, first_layer + l, mb, -1, 0);
      /* Buckets fill in backward order during the last micro-batch, as in DDP. */
      if (sh->bucket_layers && mb == sh->m - 1 && (layers - l) % sh->bucket_layers == 0)
        {
          MpInsn r = { .kind = MP_INSN_REDUCE_GRADS, .stream = MP_STREAM_DP, .chunk = c,
                       .layer = first_layer + l, .n_layers = sh->bucket_layers, .peer = -1,
                       .bucket = (*bucket_count)++, .coll = MP_COLL_ALL_REDUCE, .bytes = 1e6 };
          g_array_append_val (a, r);
        }
    }
  if (vs > 0)
    emit (a, MP_INSN_SEND, MP_STREAM_PP, c, first_layer, mb, prev, tag_of (TRUE, vs, mb));
}

/* Megatron's order of chunks and micro-batches: the K-th forward (or backward) of a
 * stage in the interleaved schedule. */
static void
interleaved_unit (const Shape *sh, guint k, gboolean backward, guint *chunk, guint *mb)
{
  guint in_group = k % (sh->p * sh->v);
  *chunk = in_group / sh->p;
  if (backward)
    *chunk = sh->v - 1 - *chunk;
  *mb = k / (sh->p * sh->v) * sh->p + in_group % sh->p;
}

static MpProgram *
stage_program (const Shape *sh, guint i)
{
  GArray *a = g_array_new (FALSE, FALSE, sizeof (MpInsn));
  guint buckets = 0, total = sh->m * sh->v;
  guint warm;
  switch (sh->schedule)
    {
    case MP_SCHEDULE_GPIPE:
      warm = total;
      break;
    case MP_SCHEDULE_INTERLEAVED:
      warm = MIN (total, (sh->p - i - 1) * 2 + (sh->v - 1) * sh->p);
      break;
    default:
      warm = MIN (total, sh->p - i - 1);
      break;
    }
  guint c, mb;
  for (guint k = 0; k < warm; k++)
    {
      interleaved_unit (sh, k, FALSE, &c, &mb);
      emit_pass (a, sh, i, c, mb, FALSE, &buckets);
    }
  for (guint k = 0; k < total - warm; k++)
    {
      interleaved_unit (sh, warm + k, FALSE, &c, &mb);
      emit_pass (a, sh, i, c, mb, FALSE, &buckets);
      interleaved_unit (sh, k, TRUE, &c, &mb);
      emit_pass (a, sh, i, c, mb, TRUE, &buckets);
    }
  for (guint k = total - warm; k < total; k++)
    {
      interleaved_unit (sh, k, TRUE, &c, &mb);
      emit_pass (a, sh, i, c, mb, TRUE, &buckets);
    }
  if (sh->tied && sh->p > 1 && (i == 0 || i == sh->p - 1))
    {
      MpInsn t = { .kind = MP_INSN_REDUCE_TIED, .stream = MP_STREAM_DP, .peer = -1,
                   .coll = MP_COLL_ALL_REDUCE, .bytes = 1e6 };
      g_array_append_val (a, t);
    }
  emit (a, MP_INSN_WAIT, MP_STREAM_DP, 0, 0, 0, -1, 0);
  emit (a, MP_INSN_OPTIMIZER, MP_STREAM_COMPUTE, 0, 0, 0, -1, 0);
  MpProgram *prog = g_new0 (MpProgram, 1);
  prog->rank = i;
  prog->stage = i;
  prog->n_insns = a->len;
  prog->insns = (MpInsn *) g_array_free (a, FALSE);
  return prog;
}

static MpProgram **
build (const Shape *sh)
{
  MpProgram **progs = g_new0 (MpProgram *, sh->p + 1);
  for (guint i = 0; i < sh->p; i++)
    progs[i] = stage_program (sh, i);
  return progs;
}

static void
free_programs (MpProgram **progs)
{
  for (guint i = 0; progs[i]; i++)
    mp_program_free (progs[i]);
  g_free (progs);
}

static double
time_sum (const MpStepTime *t)
{
  double sum = 0;
  for (int p = 0; p < MP_PHASE_N; p++)
    sum += t->t[p];
  return sum;
}

/* Simulates SH with durations T; checks what holds for every run: each rank's parts add
 * up to the step, streams run one instruction at a time, receives end after their sends. */
static MpSimResult *
run (const Shape *sh, Times *t, MpProgram ***progs_out)
{
  MpProgram **progs = build (sh);
  MpSimOptions opts = { .cost = scripted, .cost_data = t, .slices = TRUE };
  g_autoptr(GError) error = NULL;
  MpSimResult *res = mp_simulate (NULL, NULL, progs, sh->p, &opts, &error);
  if (res == NULL)
    fail_msg ("simulate: %s", error->message);
  for (guint r = 0; r < res->n_ranks; r++)
    {
      const MpSimRank *rk = &res->ranks[r];
      mp_assert_close (time_sum (&rk->time), res->step_s, 1e-12);
      double busy_until[MP_STREAM_N] = { 0 };
      for (guint i = 0; i < progs[r]->n_insns; i++)
        {
          const MpInsn *insn = &progs[r]->insns[i];
          const MpSimSlice *sl = &rk->slices[i];
          MpStream s = insn->kind == MP_INSN_WAIT ? MP_STREAM_COMPUTE : insn->stream;
          assert_true (sl->start_s >= busy_until[s] - 1e-15 && sl->end_s >= sl->start_s);
          busy_until[s] = sl->end_s;
        }
    }
  if (progs_out)
    *progs_out = progs;
  else
    free_programs (progs);
  return res;
}

static double
pipeline_step (MpSchedule schedule, guint p, guint v, guint m, double f, double b)
{
  Shape sh = { .p = p, .v = v, .m = m, .layers = 2, .schedule = schedule };
  Times t = { .f = f, .b = b };
  g_autoptr(MpSimResult) res = run (&sh, &t, NULL);
  return res->step_s;
}

/* ---- schedules ----------------------------------------------------------------------- */

static void
test_sim_gpipe_and_1f1b_step (void **state)
{
  (void) state;
  const guint ps[] = { 1, 2, 4, 7 }, ms[] = { 1, 3, 8, 16 };
  for (gsize a = 0; a < G_N_ELEMENTS (ps); a++)
    for (gsize c = 0; c < G_N_ELEMENTS (ms); c++)
      {
        guint p = ps[a], m = ms[c];
        /* Two layers per stage: t_f = 2 x 1.5, t_b = 2 x 2.5 per stage and micro-batch. */
        double expect = (m + p - 1) * (3.0 + 5.0);
        mp_assert_close (pipeline_step (MP_SCHEDULE_1F1B, p, 1, m, 1.5, 2.5), expect, 1e-12);
        mp_assert_close (pipeline_step (MP_SCHEDULE_GPIPE, p, 1, m, 1.5, 2.5), expect, 1e-12);
      }
}

static void
test_sim_interleaved_step (void **state)
{
  (void) state;
  const guint ps[] = { 2, 4, 8 }, vs[] = { 2, 3, 4 };
  for (gsize a = 0; a < G_N_ELEMENTS (ps); a++)
    for (gsize c = 0; c < G_N_ELEMENTS (vs); c++)
      for (guint groups = 1; groups <= 3; groups++)
        {
          guint p = ps[a], v = vs[c], m = groups * p;
          /* Per chunk two layers of 1 + 2; per stage and micro-batch v times that. */
          double tf = v * 2.0, tb = v * 4.0;
          double expect = m * (tf + tb) + (p - 1) * (tf + tb) / v;
          mp_assert_close (pipeline_step (MP_SCHEDULE_INTERLEAVED, p, v, m, 1.0, 2.0), expect,
                           1e-12);
        }
}

static void
test_sim_bubble_breakdown (void **state)
{
  (void) state;
  /* Uniform 1F1B without communication: stage 0 ends last; its compute is m (t_f + t_b),
   * the bubble (p - 1)(t_f + t_b), as in the closed form. */
  Shape sh = { .p = 4, .v = 1, .m = 8, .layers = 1, .schedule = MP_SCHEDULE_1F1B };
  Times t = { .f = 1, .b = 2, .tp_share = 0.25 };
  g_autoptr(MpSimResult) res = run (&sh, &t, NULL);
  assert_int_equal (res->ranks[res->critical].stage, 0);
  mp_assert_close (res->time.t[MP_PHASE_COMPUTE] + res->time.t[MP_PHASE_TP], 8 * 3.0, 1e-12);
  mp_assert_close (res->time.t[MP_PHASE_TP], 0.25 * 8 * 3.0, 1e-12);
  mp_assert_close (res->time.t[MP_PHASE_BUBBLE], 3 * 3.0, 1e-12);
  assert_true (res->time.t[MP_PHASE_PP] == 0 && res->time.t[MP_PHASE_DP] == 0);
  mp_assert_close (res->ranks[2].busy_s[MP_STREAM_COMPUTE], 8 * 3.0, 1e-12);
}

static void
test_sim_p2p_on_the_path (void **state)
{
  (void) state;
  /* With a p2p time P, every micro-batch's forward and backward cross each stage boundary:
   * one stage of work per micro-batch more, and fill and drain, cost 2 (p - 1) P at least
   * and the closed form's (m - 1) 2P + 2 (p - 1) P at most. */
  Shape sh = { .p = 4, .v = 1, .m = 8, .layers = 1, .schedule = MP_SCHEDULE_1F1B };
  Times t = { .f = 1, .b = 2, .p2p = 0.1 };
  g_autoptr(MpSimResult) res = run (&sh, &t, NULL);
  double base = (8 + 4 - 1) * 3.0;
  assert_true (res->step_s >= base + 2 * 3 * 0.1 - 1e-12);
  assert_true (res->step_s <= base + 7 * 2 * 0.1 + 2 * 3 * 0.1 + 1e-12);
  assert_true (res->time.t[MP_PHASE_PP] > 0);
}

static void
test_sim_interleaved_uneven_chunks (void **state)
{
  (void) state;
  /* Interleaving's bubble, (p - 1)/v of a stage's time, assumes equal chunks. With p = 2,
   * v = 2, m = 2, each stage's first chunk 2 layers and its second 1 (f = 1, b = 2 a
   * layer; 9 a stage and micro-batch), the fill runs through the larger chunks: by hand,
   * stage 0 ends at 24, not m c + (p - 1) c / v = 22.5. The closed form (planner/
   * evaluate.c) uses the latter, so it is optimistic for splits it cannot make even;
   * test_sim_closed_form_uneven_interleaved shows it on a zoo plan. */
  Shape sh = { .p = 2, .v = 2, .m = 2, .layers = 1, .extra_first = 1,
               .schedule = MP_SCHEDULE_INTERLEAVED };
  Times t = { .f = 1, .b = 2 };
  g_autoptr(MpSimResult) res = run (&sh, &t, NULL);
  mp_assert_close (res->step_s, 24.0, 1e-12);
  /* Even chunks of 1.5 layers' work each give the formula. */
  Shape even = { .p = 2, .v = 2, .m = 2, .layers = 1, .schedule = MP_SCHEDULE_INTERLEAVED };
  Times t15 = { .f = 1.5, .b = 3 };
  g_autoptr(MpSimResult) res2 = run (&even, &t15, NULL);
  mp_assert_close (res2->step_s, 22.5, 1e-12);
}

/* ---- data parallelism ---------------------------------------------------------------- */

static void
test_sim_dp_overlap_compute_dominates (void **state)
{
  (void) state;
  /* 8 layers, a bucket per 2 layers: 4 buckets, each reduced in less time than the next
   * two layers' backward. Only the last bucket is exposed. */
  Shape sh = { .p = 1, .v = 1, .m = 2, .layers = 8, .schedule = MP_SCHEDULE_NONE,
               .bucket_layers = 2 };
  Times t = { .f = 1, .b = 2, .bucket = 0.7, .opt = 0.5 };
  g_autoptr(MpSimResult) res = run (&sh, &t, NULL);
  mp_assert_close (res->time.t[MP_PHASE_DP], 2 * 0.7, 1e-12);
  mp_assert_close (res->step_s, 2 * 8 * 3.0 + 2 * 0.7 + 0.5, 1e-12);
  mp_assert_close (res->time.t[MP_PHASE_OPTIMIZER], 0.5, 1e-12);
  mp_assert_close (res->ranks[0].busy_s[MP_STREAM_DP], 4 * 2 * 0.7, 1e-12);
}

static void
test_sim_dp_overlap_comm_dominates (void **state)
{
  (void) state;
  /* The buckets take 10x the backward: the dp stream runs back to back from the first
   * bucket on, so all of the reduction but the backward after the first bucket shows. */
  Shape sh = { .p = 1, .v = 1, .m = 1, .layers = 8, .schedule = MP_SCHEDULE_NONE,
               .bucket_layers = 2 };
  Times t = { .f = 1, .b = 0.2, .bucket = 2.0 };
  g_autoptr(MpSimResult) res = run (&sh, &t, NULL);
  double reduce = 4 * 2 * 2.0, after_first = 6 * 0.2;
  mp_assert_close (res->time.t[MP_PHASE_DP], reduce - after_first, 1e-12);
  assert_true (res->time.t[MP_PHASE_DP] > 0.9 * reduce);
}

static void
test_sim_zero3_gather_before_use (void **state)
{
  (void) state;
  /* A gather slower than the chunk's compute: every F and B waits for its gather. The
   * program issues each gather right before its use, after the compute before it (a
   * program prefetches by issuing it earlier), so gathers and compute alternate. */
  Shape sh = { .p = 1, .v = 1, .m = 2, .layers = 1, .schedule = MP_SCHEDULE_NONE,
               .zero3 = TRUE };
  Times t = { .f = 1, .b = 2, .gather = 5 };
  MpProgram **progs;
  g_autoptr(MpSimResult) res = run (&sh, &t, &progs);
  const MpProgram *p = progs[0];
  for (guint i = 0; i < p->n_insns; i++)
    if (p->insns[i].kind == MP_INSN_FORWARD || p->insns[i].kind == MP_INSN_BACKWARD)
      {
        assert_int_equal (p->insns[i - 1].kind, MP_INSN_GATHER_PARAMS);
        mp_assert_close (res->ranks[0].slices[i].start_s, res->ranks[0].slices[i - 1].end_s,
                         1e-12);
        assert_int_equal (res->ranks[0].slices[i].wait, MP_SIM_WAIT_DP);
      }
  mp_assert_close (res->step_s, 4 * 5.0 + 2 * (1.0 + 2.0), 1e-12);
  mp_assert_close (res->time.t[MP_PHASE_DP], 4 * 5.0, 1e-12);
  free_programs (progs);
}

/* ---- messages ------------------------------------------------------------------------ */

static void
test_sim_recv_never_before_send (void **state)
{
  (void) state;
  /* Random shapes and times: every receive ends at or after its send, and a compute
   * instruction after a receive starts after it. */
  GRand *rng = g_rand_new_with_seed (42);
  for (int trial = 0; trial < 40; trial++)
    {
      guint p = g_rand_int_range (rng, 2, 6), v = g_rand_int_range (rng, 1, 4);
      MpSchedule sched = v > 1 ? MP_SCHEDULE_INTERLEAVED
                               : (g_rand_boolean (rng) ? MP_SCHEDULE_GPIPE : MP_SCHEDULE_1F1B);
      Shape sh = { .p = p, .v = v, .m = p * (guint) g_rand_int_range (rng, 1, 4),
                   .layers = g_rand_int_range (rng, 1, 3), .schedule = sched,
                   .bucket_layers = 1, .tied = TRUE };
      Times t = { .f = g_rand_double_range (rng, 0.1, 2), .b = g_rand_double_range (rng, 0.1, 4),
                  .p2p = g_rand_double_range (rng, 0, 1), .bucket = g_rand_double_range (rng, 0, 1),
                  .tied = 0.3, .opt = 0.1 };
      MpProgram **progs;
      g_autoptr(MpSimResult) res = run (&sh, &t, &progs);
      for (guint r = 0; r < p; r++)
        for (guint i = 0; i < progs[r]->n_insns; i++)
          {
            const MpInsn *insn = &progs[r]->insns[i];
            if (insn->kind != MP_INSN_RECV)
              continue;
            const MpProgram *src = progs[insn->peer];
            for (guint j = 0; j < src->n_insns; j++)
              if (src->insns[j].kind == MP_INSN_SEND && src->insns[j].tag == insn->tag)
                assert_true (res->ranks[r].slices[i].end_s
                             >= res->ranks[insn->peer].slices[j].end_s);
            for (guint k = i + 1; k < progs[r]->n_insns; k++)
              if (progs[r]->insns[k].stream == MP_STREAM_COMPUTE)
                {
                  assert_true (res->ranks[r].slices[k].start_s >= res->ranks[r].slices[i].end_s);
                  break;
                }
          }
      free_programs (progs);
    }
  g_rand_free (rng);
}

static void
test_sim_tied_rendezvous (void **state)
{
  (void) state;
  /* The first and last stage reduce the tied embedding together: both start when the
   * later (stage 0, which drains last) gets there. */
  Shape sh = { .p = 4, .v = 1, .m = 4, .layers = 1, .schedule = MP_SCHEDULE_1F1B,
               .tied = TRUE };
  Times t = { .f = 1, .b = 2, .tied = 0.5 };
  MpProgram **progs;
  g_autoptr(MpSimResult) res = run (&sh, &t, &progs);
  double start[2];
  for (int k = 0; k < 2; k++)
    {
      guint r = k == 0 ? 0 : 3;
      for (guint i = 0; i < progs[r]->n_insns; i++)
        if (progs[r]->insns[i].kind == MP_INSN_REDUCE_TIED)
          start[k] = res->ranks[r].slices[i].start_s;
    }
  mp_assert_close (start[0], start[1], 1e-15);
  mp_assert_close (start[0], (4 + 4 - 1) * 3.0, 1e-12);
  mp_assert_close (res->step_s, (4 + 4 - 1) * 3.0 + 0.5, 1e-12);
  mp_assert_close (res->time.t[MP_PHASE_DP], 0.5, 1e-12);
  free_programs (progs);
}

static MpProgram *
hand (guint rank, const MpInsn *insns, guint n)
{
  MpProgram *p = g_new0 (MpProgram, 1);
  p->rank = rank;
  p->stage = rank;
  p->insns = g_memdup2 (insns, n * sizeof *insns);
  p->n_insns = n;
  return p;
}

static void
test_sim_deadlock_and_unmatched (void **state)
{
  (void) state;
  Times t = { .f = 1, .b = 1, .p2p = 1 };
  MpSimOptions opts = { .cost = scripted, .cost_data = &t, .slices = TRUE };
  /* Each rank first waits for the other's message: a deadlock, reported by instruction. */
  const MpInsn a[] = {
    { .kind = MP_INSN_RECV, .stream = MP_STREAM_PP, .peer = 1, .tag = 1 },
    { .kind = MP_INSN_FORWARD, .stream = MP_STREAM_COMPUTE, .peer = -1 },
    { .kind = MP_INSN_SEND, .stream = MP_STREAM_PP, .peer = 1, .tag = 2 },
  };
  const MpInsn b[] = {
    { .kind = MP_INSN_RECV, .stream = MP_STREAM_PP, .peer = 0, .tag = 2 },
    { .kind = MP_INSN_FORWARD, .stream = MP_STREAM_COMPUTE, .peer = -1 },
    { .kind = MP_INSN_SEND, .stream = MP_STREAM_PP, .peer = 0, .tag = 1 },
  };
  MpProgram *progs[2] = { hand (0, a, 3), hand (1, b, 3) };
  g_autoptr(GError) error = NULL;
  MpSimResult *res = mp_simulate (NULL, NULL, progs, 2, &opts, &error);
  assert_null (res);
  assert_true (g_error_matches (error, MP_ERROR, MP_ERROR_INPUT));
  assert_non_null (strstr (error->message, "deadlock"));
  assert_non_null (strstr (error->message, "rank 1, pp stream: stuck at instruction 0 (recv"));
  g_clear_error (&error);
  /* A receive whose tag no send carries. */
  progs[1]->insns[0].tag = 7;
  assert_null (mp_simulate (NULL, NULL, progs, 2, &opts, &error));
  assert_non_null (strstr (error->message, "no send from its peer carries its tag"));
  g_clear_error (&error);
  /* A peer without a program. */
  progs[1]->insns[0].peer = 5;
  assert_null (mp_simulate (NULL, NULL, progs, 2, &opts, &error));
  assert_non_null (strstr (error->message, "peer rank 5 has no program"));
  g_clear_error (&error);
  /* Out-of-order but matching tags are fine: rank 1 receives two messages in the order
   * opposite to their sending. */
  const MpInsn c[] = {
    { .kind = MP_INSN_FORWARD, .stream = MP_STREAM_COMPUTE, .peer = -1 },
    { .kind = MP_INSN_SEND, .stream = MP_STREAM_PP, .peer = 1, .tag = 1 },
    { .kind = MP_INSN_SEND, .stream = MP_STREAM_PP, .peer = 1, .tag = 2 },
  };
  const MpInsn d[] = {
    { .kind = MP_INSN_RECV, .stream = MP_STREAM_PP, .peer = 0, .tag = 2 },
    { .kind = MP_INSN_RECV, .stream = MP_STREAM_PP, .peer = 0, .tag = 1 },
    { .kind = MP_INSN_FORWARD, .stream = MP_STREAM_COMPUTE, .peer = -1 },
  };
  MpProgram *ok[2] = { hand (0, c, 3), hand (1, d, 3) };
  g_autoptr(MpSimResult) good = mp_simulate (NULL, NULL, ok, 2, &opts, &error);
  if (good == NULL)
    fail_msg ("%s", error->message);
  mp_assert_close (good->ranks[1].slices[0].end_s, 3.0, 1e-15);
  mp_assert_close (good->ranks[1].slices[1].end_s, 3.0, 1e-15);
  mp_assert_close (good->step_s, 4.0, 1e-15);
  for (int i = 0; i < 2; i++)
    {
      mp_program_free (progs[i]);
      mp_program_free (ok[i]);
    }
}

typedef struct {
  CmEventQueue *q;
  GArray *seen;               /* (a, time) pairs as the events ran */
} QueueLog;

static void
note (gpointer data, guint a, guint b)
{
  QueueLog *log = data;
  double now = cm_eventq_now (log->q);
  g_array_append_val (log->seen, a);
  /* An event may schedule another for now: it runs in the same proceed(). */
  if (b > 0)
    cm_eventq_schedule (log->q, now, note, log, a + 100, 0);
}

static void
test_sim_event_queue_order (void **state)
{
  (void) state;
  /* Events run in time order, ties in the order scheduled; time never goes back. */
  g_autoptr(CmEventQueue) q = cm_eventq_new ();
  QueueLog log = { q, g_array_new (FALSE, FALSE, sizeof (guint)) };
  const double times[] = { 3, 1, 2, 1, 0, 3 };
  for (guint i = 0; i < G_N_ELEMENTS (times); i++)
    cm_eventq_schedule (q, times[i], note, &log, i, i == 3);
  assert_false (cm_eventq_finished (q));
  cm_eventq_proceed (q);
  mp_assert_close (cm_eventq_now (q), 0, 0);
  cm_eventq_proceed (q);
  mp_assert_close (cm_eventq_now (q), 1, 0);
  while (!cm_eventq_finished (q))
    cm_eventq_proceed (q);
  const guint expect[] = { 4, 1, 3, 103, 2, 0, 5 };
  assert_int_equal (log.seen->len, G_N_ELEMENTS (expect));
  for (guint i = 0; i < G_N_ELEMENTS (expect); i++)
    assert_int_equal (g_array_index (log.seen, guint, i), expect[i]);
  mp_assert_close (cm_eventq_now (q), 3, 0);
  assert_int_equal (cm_eventq_count (q), 7);
  g_array_unref (log.seen);
}

/* ---- the trace ------------------------------------------------------------------------ */

typedef struct {
  gint64 pid, tid, start, end;     /* ns, as Perfetto reads them */
  const char *name;
} Span;

static gint64
ns_field (JsonObject *o, const char *key)
{
  return llround (json_object_get_double_member (o, key) * 1000.0);
}

static gint
span_order (gconstpointer pa, gconstpointer pb)
{
  const Span *a = pa, *b = pb;
  if (a->pid != b->pid)
    return a->pid < b->pid ? -1 : 1;
  if (a->tid != b->tid)
    return a->tid < b->tid ? -1 : 1;
  if (a->start != b->start)
    return a->start < b->start ? -1 : 1;
  return a->end > b->end ? -1 : a->end < b->end;
}

/* Slices on one (pid, tid) nest: each lies inside the open one or after it. Returns the
 * time the top-level slices of (PID, 0) cover. */
static gint64
check_nesting (GArray *spans, gint64 pid)
{
  g_array_sort (spans, span_order);
  gint64 covered = 0;
  Span stack[16];
  int depth = 0;
  for (guint i = 0; i < spans->len; i++)
    {
      const Span *s = &g_array_index (spans, Span, i);
      if (i > 0)
        {
          const Span *prev = &g_array_index (spans, Span, i - 1);
          if (prev->pid != s->pid || prev->tid != s->tid)
            depth = 0;
        }
      while (depth > 0 && s->start >= stack[depth - 1].end)
        depth--;
      if (depth > 0 && s->end > stack[depth - 1].end)
        fail_msg ("pid %" G_GINT64_FORMAT " tid %" G_GINT64_FORMAT ": '%s' [%" G_GINT64_FORMAT
                  ", %" G_GINT64_FORMAT "] overlaps '%s' without nesting", s->pid, s->tid,
                  s->name, s->start, s->end, stack[depth - 1].name);
      if (depth == 0 && s->pid == pid && s->tid == 0)
        covered += s->end - s->start;
      assert_true (depth < 16);
      stack[depth++] = *s;
    }
  return covered;
}

/* Is TS (ns) inside a slice of (PID, TID)? */
static gboolean
inside_slice (GArray *spans, gint64 pid, gint64 tid, gint64 ts)
{
  for (guint i = 0; i < spans->len; i++)
    {
      const Span *s = &g_array_index (spans, Span, i);
      if (s->pid == pid && s->tid == tid && s->start <= ts && ts <= s->end)
        return TRUE;
    }
  return FALSE;
}

static void
check_x_event (JsonObject *e)
{
  const char *cat = json_object_get_string_member (e, "cat");
  assert_true (g_strv_contains ((const char *const[]) { "compute", "comm", "bubble",
                                                        "optimizer", NULL }, cat));
  assert_true (json_object_has_member (e, "tid") && json_object_has_member (e, "dur"));
  assert_true (json_object_get_double_member (e, "dur") >= 0);
  JsonObject *args = json_object_get_object_member (e, "args");
  assert_non_null (args);
  const char *name = json_object_get_string_member (e, "name");
  if (g_str_has_prefix (name, "F layer ") || g_str_has_prefix (name, "B layer "))
    for (const char *const *k = (const char *const[]) { "layer", "microbatch", "chunk", "stage",
                                                        "phase", "flops", "bytes", NULL };
         *k; k++)
      assert_true (json_object_has_member (args, *k));
}

/* Writes the trace of RES (PROGS[N]) to a file, reads it back as Perfetto would and checks
 * what Perfetto needs: the wrapper, names of processes and threads, X events with their
 * fields, slices that nest on every thread, a compute thread that tiles the step, and an
 * arrow from each send that starts in it and ends later in its receive. */
static void
check_trace (MpProgram **progs, guint n, const MpSimResult *res)
{
  MpTraceInfo info = { .model = "test-model", .cluster = "test-cluster",
                       .closed_form_step_s = 1.0 };
  g_autofree char *dir = g_dir_make_tmp ("mpplan-trace-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "trace.json", NULL);
  g_autoptr(GError) error = NULL;
  if (!mp_trace_write_predicted (path, progs, n, res, &info, &error))
    fail_msg ("%s", error->message);
  g_autoptr(JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_file (parser, path, &error))
    fail_msg ("%s", error->message);
  g_unlink (path);
  g_rmdir (dir);
  JsonObject *root = json_node_get_object (json_parser_get_root (parser));
  assert_string_equal (json_object_get_string_member (root, "displayTimeUnit"), "ms");
  JsonObject *other = json_object_get_object_member (root, "otherData");
  assert_string_equal (json_object_get_string_member (other, "model"), "test-model");
  assert_true (json_object_has_member (other, "mpplan_version"));
  JsonArray *events = json_object_get_array_member (root, "traceEvents");
  g_autoptr(GArray) spans = g_array_new (FALSE, FALSE, sizeof (Span));
  g_autoptr(GArray) flow_at = g_array_new (FALSE, FALSE, sizeof (gint64) * 4);
  guint names = 0, threads = 0, starts = 0, ends = 0, sends = 0, expect_sends = 0;
  for (guint r = 0; r < n; r++)
    for (guint i = 0; i < progs[r]->n_insns; i++)
      expect_sends += progs[r]->insns[i].kind == MP_INSN_SEND;
  for (guint i = 0; i < json_array_get_length (events); i++)
    {
      JsonObject *e = json_array_get_object_element (events, i);
      const char *ph = json_object_get_string_member (e, "ph");
      const char *name = json_object_get_string_member (e, "name");
      gint64 pid = json_object_get_int_member (e, "pid");
      guint r = 0;
      while (r < n && progs[r]->rank != pid)
        r++;
      assert_true (r < n);
      if (strcmp (ph, "M") == 0)
        {
          JsonObject *args = json_object_get_object_member (e, "args");
          if (strcmp (name, "process_name") == 0)
            {
              g_autofree char *want = g_strdup_printf ("predicted rank %u (pp%u,tp0,dp0)",
                                                       progs[r]->rank, progs[r]->stage);
              assert_string_equal (json_object_get_string_member (args, "name"), want);
              names++;
            }
          threads += strcmp (name, "thread_name") == 0;
          continue;
        }
      gint64 ts = ns_field (e, "ts");
      assert_true (ts >= 0);
      if (strcmp (ph, "X") == 0)
        {
          check_x_event (e);
          Span sp = { pid, json_object_get_int_member (e, "tid"), ts, ts + ns_field (e, "dur"),
                      name };
          g_array_append_val (spans, sp);
          sends += g_str_has_prefix (name, "send ");
          continue;
        }
      assert_true (strcmp (ph, "s") == 0 || strcmp (ph, "f") == 0);
      gint64 rec[4] = { json_object_get_int_member (e, "id"), ph[0] == 's', pid, ts };
      g_array_append_vals (flow_at, rec, 1);
      starts += ph[0] == 's';
      ends += ph[0] == 'f';
    }
  assert_int_equal (names, n);
  assert_int_equal (threads, 4 * n);
  assert_int_equal (sends, expect_sends);
  assert_int_equal (starts, sends);
  assert_int_equal (ends, sends);
  /* Every thread's slices nest; the compute thread's top level tiles the step. */
  for (guint r = 0; r < n; r++)
    {
      gint64 covered = check_nesting (spans, progs[r]->rank);
      gint64 step = llround (res->step_s * 1e9);
      assert_true (llabs (covered - step) <= 64);
    }
  /* Each arrow starts in a send, ends later in its receive. */
  for (guint i = 0; i < flow_at->len; i++)
    {
      const gint64 *a = &g_array_index (flow_at, gint64, 4 * i);
      assert_true (inside_slice (spans, a[2], 3, a[3]));
      if (!a[1])
        continue;
      gboolean found = FALSE;
      for (guint j = 0; j < flow_at->len && !found; j++)
        {
          const gint64 *b = &g_array_index (flow_at, gint64, 4 * j);
          if (!b[1] && b[0] == a[0])
            {
              assert_true (b[3] >= a[3]);
              found = TRUE;
            }
        }
      assert_true (found);
    }
}

static void
test_sim_trace_perfetto_fields (void **state)
{
  (void) state;
  Shape sh = { .p = 4, .v = 2, .m = 8, .layers = 3, .schedule = MP_SCHEDULE_INTERLEAVED,
               .bucket_layers = 2, .tied = TRUE };
  Times t = { .f = 1.0e-3, .b = 2.1e-3, .p2p = 0.13e-3, .bucket = 0.4e-3, .tied = 0.2e-3,
              .opt = 0.5e-3, .tp_share = 0.1 };
  MpProgram **progs;
  g_autoptr(MpSimResult) res = run (&sh, &t, &progs);
  check_trace (progs, sh.p, res);
  free_programs (progs);
}

/* ---- end to end: programs from planner/, durations from the cost model ---------------- */

/* CFG evaluated for dp x micro-batch x micro-batches sequences; NULL when invalid. */
static MpPlan *
evaluate (const Env *e, const MpParallelConfig *cfg)
{
  MpPlan *plan = g_new0 (MpPlan, 1);
  guint batch = cfg->dp * cfg->micro_batch_size * cfg->num_micro_batches;
  if (!mp_plan_evaluate (e->ctx, cfg, batch, plan, NULL))
    {
      g_free (plan);
      return NULL;
    }
  return plan;
}

static MpSimResult *
simulate_plan (const Env *e, const MpPlan *plan, const MpSimOptions *opts, MpProgram ***progs,
               guint *n)
{
  g_autoptr(GError) error = NULL;
  MpSimResult *res = mp_plan_simulate (e->ctx, plan, opts, progs, n, &error);
  if (res == NULL)
    fail_msg ("dp %u tp %u pp %u vpp %u %s zero %u mbs %u m %u: %s", plan->cfg.dp,
              plan->cfg.tp, plan->cfg.pp, plan->cfg.vpp, mp_schedule_name (plan->cfg.schedule),
              plan->cfg.zero, plan->cfg.micro_batch_size, plan->cfg.num_micro_batches,
              error->message);
  mp_assert_close (time_sum (&res->time), res->step_s, 1e-9);
  return res;
}

/* PLAN simulated, its step within 2% of the closed form's (WHAT names it on failure). */
static MpSimResult *
simulate_near_closed_form (const Env *e, const MpPlan *plan, const char *what)
{
  MpSimResult *res = simulate_plan (e, plan, NULL, NULL, NULL);
  double gap = res->step_s / plan->step_s - 1;
  if (fabs (gap) > 0.02)
    fail_msg ("%s: simulated %.6g s, closed form %.6g s (%+.2f%%)", what, res->step_s,
              plan->step_s, 100 * gap);
  return res;
}

static void
test_sim_planner_schedules_exact (void **state)
{
  (void) state;
  /* The generator's schedules under scripted durations (every layer 1 forward, 2 backward,
   * nothing else costs): uniform stages without communication, so the textbook step
   * times hold to rounding. gpt3-125m has 12 blocks + embedding + head = 14 layers. */
  g_autoptr(Env) e = env_new ("gpt3-125m", "dgx-a100-80g:2");
  Times t = { .f = 1, .b = 2 };
  MpSimOptions opts = { .cost = scripted, .cost_data = &t };
  const struct { MpSchedule s; guint p, v, m; } cases[] = {
    { MP_SCHEDULE_1F1B, 2, 1, 8 }, { MP_SCHEDULE_1F1B, 7, 1, 3 }, { MP_SCHEDULE_1F1B, 7, 1, 14 },
    { MP_SCHEDULE_GPIPE, 2, 1, 5 }, { MP_SCHEDULE_GPIPE, 7, 1, 9 },
    { MP_SCHEDULE_INTERLEAVED, 2, 7, 4 }, { MP_SCHEDULE_INTERLEAVED, 7, 2, 14 },
    { MP_SCHEDULE_NONE, 7, 1, 3 },
  };
  for (gsize k = 0; k < G_N_ELEMENTS (cases); k++)
    {
      MpParallelConfig cfg;
      mp_parallel_config_init (&cfg);
      cfg.pp = cases[k].p;
      cfg.vpp = cases[k].v;
      cfg.schedule = cases[k].s;
      cfg.num_micro_batches = cases[k].m;
      guint chunks = cfg.pp * cfg.vpp, split[14];
      for (guint c = 0; c < chunks; c++)
        split[c] = 14 / chunks;
      cfg.chunk_layers = split;
      g_autoptr(MpPlan) plan = evaluate (e, &cfg);
      assert_non_null (plan);
      g_autoptr(MpSimResult) res = simulate_plan (e, plan, &opts, NULL, NULL);
      double p = cfg.pp, v = cfg.vpp, m = cfg.num_micro_batches, c = 14 / p * 3.0;
      double expect = cfg.schedule == MP_SCHEDULE_INTERLEAVED ? m * c + (p - 1) * c / v
                      : cfg.schedule == MP_SCHEDULE_NONE     ? m * p * c
                                                             : (m + p - 1) * c;
      mp_assert_close (res->step_s, expect, 1e-12);
    }
}

/* The simulation of the best plans of MODEL on CLUSTER against their closed form: within
 * 2%. */
static void
check_best_plans (const char *model, const char *cluster, guint top)
{
  g_autoptr(Env) e = env_new (model, cluster);
  MpSearchOptions opts = { .top_k = top };
  g_autoptr(GError) error = NULL;
  g_autoptr(MpSearchResult) found = mp_planner_search (e->ctx, &opts, &error);
  assert_non_null (found);
  assert_true (found->plans->len > 0);
  for (guint i = 0; i < found->plans->len; i++)
    {
      const MpPlan *plan = g_ptr_array_index (found->plans, i);
      g_autofree char *what = g_strdup_printf ("%s on %s, plan %u", model, cluster, i + 1);
      g_autoptr(MpSimResult) res = simulate_near_closed_form (e, plan, what);
    }
}

static void
test_sim_closed_form_agrees_on_zoo (void **state)
{
  (void) state;
  check_best_plans ("gpt3-1.3b", "dgx-a100-80g:2", 5);
  check_best_plans ("llama3-8b", "dgx-h100:1", 5);
  check_best_plans ("mixtral-8x7b", "dgx-h100:4", 5);
  check_best_plans ("llama2-70b", "dgx-h100:16", 5);
  check_best_plans ("gpt3-175b", "dgx-a100-80g:128", 5);
  check_best_plans ("tiny-gpt", MPPLAN_SRCDIR "/tests/data/cluster-host4.yaml", 5);
  /* The expressiveness issue's zoo: MoE (ep, etp, dispatchers), windows, qk-norm, the
   * NVLink domain tier and B200 (clusters small enough to search in a second). */
  check_best_plans ("qwen3-30b-a3b", "dgx-h100:1", 3);
  check_best_plans ("mixtral-8x22b", "dgx-h100:4", 3);
  check_best_plans ("tiny-moe", MPPLAN_SRCDIR "/tests/data/cluster-host4.yaml", 3);
  check_best_plans ("gemma3-27b", "dgx-h100:1", 3);
  check_best_plans ("qwen3-32b", "dgx-h100:2", 3);
  check_best_plans ("llama3-70b", "gb200-nvl72:1", 3);
  check_best_plans ("gpt3-13b", "dgx-b200:2", 3);
}

static void
test_sim_zero3_gathers_explained (void **state)
{
  (void) state;
  /* ZeRO-3 on a 2-layer MLP over PCIe: the gathers take longer than the layers. The
   * program can only issue a gather one layer ahead and after the compute before it, so
   * the first layer's gather of each pass waits in full, and the gathers and
   * reduce-scatters queue on one data-parallel stream. The closed form follows the
   * stream layer by layer (zero3_wait_s): it agrees with the simulation, all of the wait
   * is exposed dp time, and that wait is more than the micro-batches' totals show
   * (gathers and reductions beyond compute). */
  g_autoptr(Env) e = env_new ("mlp-1024", "workstation-pcie4");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.dp = 4;
  cfg.zero = 3;
  cfg.micro_batch_size = 64;
  cfg.schedule = MP_SCHEDULE_NONE;
  g_autoptr(MpPlan) plan = evaluate (e, &cfg);
  assert_non_null (plan);
  g_autoptr(MpSimResult) res = simulate_plan (e, plan, NULL, NULL, NULL);
  mp_assert_close (res->step_s, plan->step_s, 1e-9);
  mp_assert_close (res->time.t[MP_PHASE_DP], plan->time.t[MP_PHASE_DP], 1e-9);
  MpStageTime st;
  mp_cost_stage_times (e->ctx, &plan->cfg, &st);
  double m = plan->cfg.num_micro_batches;
  double totals = m * (st.zero3_gather_s + st.dp_reduce_s / m - st.fwd.total_s - st.bwd.total_s);
  assert_true (plan->time.t[MP_PHASE_DP] > 1.02 * MAX (totals, 0.0));
  /* With 1F1B across 12 blocks, and with a large MoE model whose expert gathers outlast
   * each layer's forward (DeepSeek-V3, ep 8 over 1024 ranks), the same. */
  g_autoptr(Env) g = env_new ("gpt3-125m", "dgx-a100-80g:1");
  mp_parallel_config_init (&cfg);
  cfg.dp = 8;
  cfg.zero = 3;
  cfg.micro_batch_size = 4;
  cfg.num_micro_batches = 4;
  cfg.schedule = MP_SCHEDULE_NONE;
  g_autoptr(MpPlan) big = evaluate (g, &cfg);
  g_autoptr(MpSimResult) bres = simulate_plan (g, big, NULL, NULL, NULL);
  mp_assert_close (bres->step_s, big->step_s, 1e-9);
  g_autoptr(Env) d = env_new ("deepseek-v3", "dgx-h100:128");
  mp_parallel_config_init (&cfg);
  cfg.dp = 1024;
  cfg.ep = 8;
  cfg.zero = 3;
  cfg.recompute = MP_RECOMPUTE_FULL;
  cfg.micro_batch_size = 5;
  cfg.num_micro_batches = 3;
  cfg.schedule = MP_SCHEDULE_NONE;
  g_autoptr(MpPlan) moe = evaluate (d, &cfg);
  assert_non_null (moe);
  g_autoptr(MpSimResult) mres = simulate_plan (d, moe, NULL, NULL, NULL);
  mp_assert_close (mres->step_s, moe->step_s, 1e-9);
  assert_true (moe->time.t[MP_PHASE_DP] > 2 * 0.555);   /* the totals' view: 0.555 s */
}

/* torchtitan's root FSDP unit (fsdp20): the embedding and head gathered together before
 * the first layer, kept into backward and reduce-scattered after the last backward. The
 * closed form (zero3_pass_wait) follows the program: over PCIe, where the collectives
 * outlast the layers, with and without reshard_after_forward, the simulated step and dp
 * time are the closed form's on one stage; on two (the head among the last stage's
 * blocks, 1F1B) the closed form bounds the simulation from above. */
static void
test_sim_fsdp_root (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("gpt3-125m", "workstation-pcie4");
  for (guint pp = 1; pp <= 2; pp++)
    for (int keep = 0; keep < 2; keep++)
      {
        MpParallelConfig cfg;
        mp_parallel_config_init (&cfg);
        cfg.stack = MP_STACK_TORCHTITAN;
        cfg.dp = 4 / pp;
        cfg.pp = pp;
        cfg.zero = 3;
        cfg.no_reshard = keep;
        cfg.micro_batch_size = 2;
        cfg.num_micro_batches = 4;
        cfg.schedule = pp > 1 ? MP_SCHEDULE_1F1B : MP_SCHEDULE_NONE;
        g_autoptr(MpPlan) plan = evaluate (e, &cfg);
        assert_non_null (plan);
        g_autoptr(MpSimResult) res = simulate_plan (e, plan, NULL, NULL, NULL);
        if (pp == 1)
          {
            mp_assert_close (res->step_s, plan->step_s, 1e-9);
            mp_assert_close (res->time.t[MP_PHASE_DP], plan->time.t[MP_PHASE_DP], 1e-9);
          }
        else
          /* the closed form adds each pass's wait where the pipeline's own waits overlap
           * them: an upper bound (7% above here; pytorch's wrapping 1-4%) */
          assert_true (plan->step_s >= res->step_s && plan->step_s < 1.08 * res->step_s);
        assert_true (plan->time.t[MP_PHASE_DP] > 0);
      }
}

static void
test_sim_closed_form_uneven_interleaved (void **state)
{
  (void) state;
  /* The best plan for Llama-3 405B on 16384 H100s interleaves 16 stages x 7 chunks: 126
   * blocks + embedding + head over 112 chunks, so 16 chunks hold 2 layers and 96 hold 1.
   * Every interior stage does the closed form's work (the same kernels and collectives),
   * but the fill and drain run through the 2-layer chunks (test_sim_interleaved_uneven_
   * chunks), and their rounds differ from stage to stage: stage 0 waits on stage 15's
   * 2-layer chunks within the steady state too. Charging the fill and drain at the
   * largest chunk's blocks left the closed form 3.2% fast here (4.2% with dp = 1); it now
   * times such schedules chunk by chunk (evaluate.c interleaved_pipe), and the bound is
   * the 2% of every other comparison. ZeRO-1, which the planner picks here since ZeRO-2
   * reduce-scatters each of the 32 micro-batches. */
  g_autoptr(Env) e = env_new ("llama3-405b", "dgx-h100:2048");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.dp = 64;
  cfg.tp = 8;
  cfg.pp = 16;
  cfg.vpp = 7;
  cfg.cp = 2;
  cfg.sequence_parallel = TRUE;
  cfg.zero = 1;
  cfg.micro_batch_size = 1;
  cfg.num_micro_batches = 32;
  cfg.schedule = MP_SCHEDULE_INTERLEAVED;
  g_autoptr(MpPlan) plan = evaluate (e, &cfg);
  assert_non_null (plan);
  g_autoptr(MpSimResult) res = simulate_near_closed_form (e, plan, "the plan");
  mp_assert_close (res->ranks[1].time.t[MP_PHASE_COMPUTE] + res->ranks[1].time.t[MP_PHASE_TP],
                   plan->time.t[MP_PHASE_COMPUTE] + plan->time.t[MP_PHASE_TP], 1e-9);
}

/* Llama-3 70B on 64 DGX H100s, 4 stages x 5 even chunks, DDP (ZeRO-0) and the distributed
 * optimizer (ZeRO-1), 4-byte gradient reduces (fp32_grads): each chunk's reduce follows its
 * last micro-batch's backward (program.c emit_backward) and so runs in the drain, where
 * the stage's lower chunks still compute and the other stages' leave gaps. Hidden only
 * under one micro-batch's backward, the closed form's ZeRO-0 dp_comm was 3.3x the
 * simulator's (0.232 s vs 0.071 s) and its step 2.0% slow; it now times such pipelines
 * chunk by chunk (evaluate.c drain_reduces). */
static void
test_sim_closed_form_drain_reduces (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("llama3-70b", "dgx-h100:64");
  for (guint zero = 0; zero <= 1; zero++)
    {
      MpParallelConfig cfg;
      mp_parallel_config_init (&cfg);
      cfg.stack = MP_STACK_MEGATRON;
      cfg.dp = 16;
      cfg.tp = 8;
      cfg.pp = 4;
      cfg.vpp = 5;
      cfg.sequence_parallel = TRUE;
      cfg.zero = zero;
      cfg.fp32_grads = TRUE;        /* 4-byte reduces, whatever the stack's default */
      cfg.micro_batch_size = 1;
      cfg.num_micro_batches = 32;
      cfg.schedule = MP_SCHEDULE_INTERLEAVED;
      g_autoptr(MpPlan) plan = evaluate (e, &cfg);
      assert_non_null (plan);
      g_autofree char *what = g_strdup_printf ("ZeRO-%u", zero);
      g_autoptr(MpSimResult) res = simulate_near_closed_form (e, plan, what);
      double dp = plan->time.t[MP_PHASE_DP], sim_dp = res->time.t[MP_PHASE_DP];
      if (fabs (dp / sim_dp - 1) > 0.15)
        fail_msg ("ZeRO-%u: dp_comm simulated %.4g s, closed form %.4g s", zero, sim_dp, dp);
    }
}

/* The best plans honouring --fix FIX (the search's top TOP): simulation and closed form
 * within 2%; returns the first one's chunk_layers[WHICH] for the caller to check. */
static guint
check_pinned_plans (const char *model, const char *cluster, const char *fix, guint top,
                    guint which)
{
  g_autoptr(Env) e = env_new (model, cluster);
  g_autoptr(GError) error = NULL;
  g_autoptr(MpPlanPins) pins = mp_plan_pins_parse (fix, &error);
  assert_non_null (pins);
  MpSearchOptions opts = { .top_k = top, .pins = pins };
  g_autoptr(MpSearchResult) found = mp_planner_search (e->ctx, &opts, &error);
  if (found == NULL)
    fail_msg ("--fix %s: %s", fix, error->message);
  assert_true (found->plans->len > 0);
  for (guint i = 0; i < found->plans->len; i++)
    {
      const MpPlan *plan = g_ptr_array_index (found->plans, i);
      g_autofree char *what = g_strdup_printf ("%s --fix %s, plan %u", model, fix, i + 1);
      g_autoptr(MpSimResult) res = simulate_near_closed_form (e, plan, what);
    }
  return ((const MpPlan *) g_ptr_array_index (found->plans, 0))->chunk_layers[which];
}

/* Gradient reductions in a program (bucket reduce-scatters or all-reduces). */
static guint
count_reductions (const MpProgram *prog)
{
  guint n = 0;
  for (guint i = 0; i < prog->n_insns; i++)
    n += prog->insns[i].kind == MP_INSN_REDUCE_GRADS;
  return n;
}

static void
test_sim_zero2_reduces_every_micro_batch (void **state)
{
  (void) state;
  /* ZeRO-1 (Megatron's distributed optimizer) accumulates the full gradients and
   * reduce-scatters them once after the last micro-batch; ZeRO-2 (DeepSpeed stage 2,
   * FSDP SHARD_GRAD_OP) keeps only a shard, so it reduce-scatters every micro-batch's.
   * A 2-layer MLP with dp 4 over PCIe (mlp-1024 on workstation-pcie4, micro-batches of 4):
   * the reductions outlast the compute, so ZeRO-2's exposed dp_comm grows with the
   * micro-batches as its programs' and the closed form's reductions do, while ZeRO-1's
   * stays what it is. */
  g_autoptr(Env) e = env_new ("mlp-1024", "workstation-pcie4");
  double dp[2][2], reduce[2][2];
  guint insns[2][2];
  const guint ms[2] = { 1, 8 };
  for (guint z = 1; z <= 2; z++)
    for (guint k = 0; k < 2; k++)
      {
        MpParallelConfig cfg;
        mp_parallel_config_init (&cfg);
        cfg.dp = 4;
        cfg.zero = z;
        cfg.micro_batch_size = 4;
        cfg.num_micro_batches = ms[k];
        cfg.schedule = MP_SCHEDULE_NONE;
        g_autoptr(MpPlan) plan = evaluate (e, &cfg);
        assert_non_null (plan);
        MpStageTime st;
        mp_cost_stage_times (e->ctx, &plan->cfg, &st);
        MpProgram *prog = mp_program_build (e->ctx, plan, 0);
        dp[z - 1][k] = plan->time.t[MP_PHASE_DP];
        reduce[z - 1][k] = st.dp_reduce_s;
        insns[z - 1][k] = count_reductions (prog);
        mp_program_free (prog);
      }
  /* ZeRO-1: the same reductions whatever the micro-batches */
  assert_int_equal (insns[0][1], insns[0][0]);
  mp_assert_close (reduce[0][1], reduce[0][0], 1e-12);
  mp_assert_close (dp[0][1], dp[0][0], 1e-9);
  /* ZeRO-2: eight times the reductions, and more of them exposed */
  assert_int_equal (insns[1][1], 8 * insns[1][0]);
  mp_assert_close (reduce[1][1], 8 * reduce[1][0], 1e-12);
  mp_assert_close (reduce[1][0], reduce[0][0], 1e-12);
  if (!(dp[1][1] > 1.5 * dp[1][0]))
    fail_msg ("zero 2: exposed dp_comm %.6g s with 1 micro-batch, %.6g s with 8", dp[1][0],
              dp[1][1]);
}

static void
test_sim_closed_form_zero2 (void **state)
{
  (void) state;
  /* ZeRO-2 plans, per-micro-batch reductions included: the simulation of their programs
   * and the closed form within 2% (check_pinned_plans), on one node, on 64 H100s and on
   * 1024 A100s. */
  check_pinned_plans ("gpt3-1.3b", "dgx-a100-80g:2", "zero=2", 5, 0);
  check_pinned_plans ("llama3-70b", "dgx-h100:8", "zero=2", 5, 0);
  check_pinned_plans ("gpt3-175b", "dgx-a100-80g:128", "zero=2", 5, 0);
  /* and ZeRO-3, whose gathers the closed form follows layer by layer (zero3_wait_s).
   * Known gap: llama3-70b's fourth (dp2 tp2 pp8 cp2, 1F1B over 256 micro-batches) is
   * 2.5% slow in the closed form (dp 2.34 s against 1.87 s simulated: in a pipeline a
   * pass's first gather also hides under the receive before it), so the top 3 there. */
  check_pinned_plans ("gpt3-1.3b", "dgx-a100-80g:2", "zero=3", 5, 0);
  check_pinned_plans ("llama3-70b", "dgx-h100:8", "zero=3", 3, 0);
  check_pinned_plans ("mixtral-8x7b", "dgx-h100:4", "zero=3", 3, 0);
}

static void
test_sim_closed_form_zero2_falls_behind (void **state)
{
  (void) state;
  /* Mixtral 8x22B on 128 H100s, dp 32 ep 8 pp 2 vpp 4, ZeRO-2: each chunk's expert
   * gradients take longer to reduce-scatter (87 ms) than its backward (58 ms), so the
   * data-parallel stream falls behind in the drain, which runs backwards only; with the
   * whole backward window as the hiding place the closed form was 2.5% fast (dp 359 ms
   * against 531 ms simulated). Timed chunk by chunk, the step and its dp time agree. */
  g_autoptr(Env) e = env_new ("mixtral-8x22b", "dgx-h100:16");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.dp = 32;
  cfg.tp = 2;
  cfg.pp = 2;
  cfg.vpp = 4;
  cfg.ep = 8;
  cfg.sequence_parallel = TRUE;
  cfg.zero = 2;
  cfg.micro_batch_size = 1;
  cfg.num_micro_batches = 16;
  cfg.schedule = MP_SCHEDULE_INTERLEAVED;
  g_autoptr(MpPlan) plan = evaluate (e, &cfg);
  assert_non_null (plan);
  g_autoptr(MpSimResult) res = simulate_plan (e, plan, NULL, NULL, NULL);
  if (fabs (res->step_s / plan->step_s - 1) > 0.01)
    fail_msg ("simulated %.6g s, closed form %.6g s", res->step_s, plan->step_s);
  double dp = plan->time.t[MP_PHASE_DP], sim_dp = res->time.t[MP_PHASE_DP];
  if (fabs (dp / sim_dp - 1) > 0.05)
    fail_msg ("dp_comm simulated %.6g s, closed form %.6g s", sim_dp, dp);
}

static void
test_sim_closed_form_megatron_splits (void **state)
{
  (void) state;
  /* Uneven interleaved splits as Megatron-Core makes them, on 94 blocks of Qwen3-235B's
   * shape: the search's own (by cost: the end chunks, which hold the embedding and the
   * heavy 152k-vocabulary head, get fewer blocks), the embedding and loss counted as
   * layers (96 / 8 = 12 per stage: the first chunk has 2 blocks, the last 2), first and
   * last stages pinned, and pp32 vpp3 (96 chunks: the embedding and the head alone).
   * The closed form charges fill and drain with the other stages' chunks; with (p - 1)
   * of the bottleneck stage's it was 2.4-4.1% above the simulation on these. */
  const char *m94 = MPPLAN_SRCDIR "/tests/data/model-94.yaml";
  guint last = check_pinned_plans (m94, "dgx-h100:64", "pp=8,vpp=4", 3, 31);
  assert_true (last < 1 + 94 / 32);                   /* the head's chunk is lighter */
  assert_int_equal (check_pinned_plans (m94, "dgx-h100:64", "pp=8,vpp=4,account_for_"
                                        "embedding=true,account_for_loss=true", 3, 0), 1 + 2);
  assert_int_equal (check_pinned_plans (m94, "dgx-h100:64", "pp=8,vpp=2,first_stage_"
                                        "layers=10,last_stage_layers=12", 3, 0), 1 + 5);
  assert_int_equal (check_pinned_plans (m94, "dgx-h100:64", "pp=32,vpp=3", 3, 95), 1);
  /* Rounds that differ from stage to stage (the split [4 x 11, 1, 1, 1, 1, 2]: stage 3's
   * third chunk has 1 block where the others have 4) over 512 micro-batches: timed chunk
   * by chunk for five groups of pp and extended by the fifth group's time (the steady
   * state repeats), it was 8.4% fast with the fill and drain alone. */
  check_pinned_plans ("qwen3-30b-a3b", "dgx-h100:1", "tp=2,pp=4,vpp=4,ep=2,sequence_"
                      "parallel=true,zero=0,micro_batch_size=1,layers_per_chunk=4:4:4:4:4:4:"
                      "4:4:4:4:4:1:1:1:1:2", 1, 0);
}

static void
random_config (GRand *rng, guint experts, MpParallelConfig *cfg)
{
  mp_parallel_config_init (cfg);
  const guint sizes[] = { 1, 2, 4 };
  cfg->dp = sizes[g_rand_int_range (rng, 0, 3)];
  cfg->tp = sizes[g_rand_int_range (rng, 0, 3)];
  cfg->pp = sizes[g_rand_int_range (rng, 0, 3)];
  cfg->zero = cfg->dp > 1 ? (guint) g_rand_int_range (rng, 0, 4) : 0;
  cfg->recompute = (MpRecompute) g_rand_int_range (rng, 0, 3);
  cfg->sequence_parallel = cfg->tp > 1 && g_rand_boolean (rng);
  cfg->micro_batch_size = g_rand_int_range (rng, 1, 3);
  cfg->num_micro_batches = cfg->pp * (guint) g_rand_int_range (rng, 1, 4);
  cfg->schedule = (MpSchedule) g_rand_int_range (rng, 0, 4);
  if (cfg->schedule == MP_SCHEDULE_INTERLEAVED)
    cfg->vpp = g_rand_int_range (rng, 1, 3);
  if (experts > 0 && cfg->dp > 1 && g_rand_boolean (rng))
    cfg->ep = 2;
}

static void
test_sim_random_plans_run (void **state)
{
  (void) state;
  /* Plans the planner could emit, at random: every one runs to the end (no deadlock, every
   * send received), its breakdown adds up, and no rank computes for longer than the step. */
  const char *models[] = { "tiny-gpt", "gpt3-125m", "mixtral-8x7b" };
  GRand *rng = g_rand_new_with_seed (7);
  guint ran = 0;
  for (gsize k = 0; k < G_N_ELEMENTS (models); k++)
    {
      g_autoptr(Env) e = env_new (models[k], "dgx-h100:8");
      for (int trial = 0; trial < 40; trial++)
        {
          MpParallelConfig cfg;
          random_config (rng, (guint) e->model->experts, &cfg);
          if (!mp_parallel_config_check (&cfg, e->model, e->cluster, NULL))
            continue;
          g_autoptr(MpPlan) plan = evaluate (e, &cfg);
          if (plan == NULL)
            continue;
          g_autoptr(MpSimResult) res = simulate_plan (e, plan, NULL, NULL, NULL);
          for (guint r = 0; r < res->n_ranks; r++)
            assert_true (res->ranks[r].busy_s[MP_STREAM_COMPUTE] <= res->step_s * (1 + 1e-12));
          ran++;
        }
    }
  g_rand_free (rng);
  assert_true (ran > 40);
}

static void
test_sim_refine_ranks_by_simulation (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("llama2-70b", "dgx-h100:16");
  MpSearchOptions opts = { .top_k = 8 };
  g_autoptr(GError) error = NULL;
  g_autoptr(MpSearchResult) found = mp_planner_search (e->ctx, &opts, &error);
  assert_non_null (found);
  assert_true (mp_planner_refine (e->ctx, found, 6, &error));
  for (guint i = 0; i < found->plans->len; i++)
    {
      const MpPlan *p = g_ptr_array_index (found->plans, i);
      assert_true (i < 6 ? p->simulated_step_s > 0 : p->simulated_step_s == 0);
      if (i > 0 && i < 6)
        assert_true (p->simulated_step_s
                     >= ((MpPlan *) g_ptr_array_index (found->plans, i - 1))->simulated_step_s);
    }
  /* The simulated step is in the plan's JSON. */
  g_autoptr(JsonNode) json = mp_plan_to_json (g_ptr_array_index (found->plans, 0));
  assert_true (json_object_has_member (json_node_get_object (json), "simulated_step_s"));
  g_autofree char *text = mp_plan_refine_text (found->plans, 5, 6, 0.0);
  assert_non_null (strstr (text, "differ by"));
}

/* PLAN's step as --refine simulates it (mp_planner_refine on a result of one plan). */
static double
refined (const Env *e, const MpPlan *plan)
{
  g_autoptr(GError) error = NULL;
  MpSearchResult res = { .plans = g_ptr_array_new () };
  g_ptr_array_add (res.plans, (gpointer) plan);
  assert_true (mp_planner_refine (e->ctx, &res, 1, &error));
  g_ptr_array_unref (res.plans);
  return plan->simulated_step_s;
}

/* A gpt3-1.3b plan on 2 DGX A100 with M micro-batches (NULL when it does not evaluate). */
static MpPlan *
long_plan (const Env *e, guint pp, guint vpp, MpSchedule schedule, guint zero, guint m)
{
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.dp = 16 / pp / 2;
  cfg.tp = 2;
  cfg.pp = pp;
  cfg.vpp = vpp;
  cfg.zero = zero;
  cfg.schedule = schedule;
  cfg.sequence_parallel = TRUE;
  cfg.micro_batch_size = 1;
  cfg.num_micro_batches = m;
  return evaluate (e, &cfg);
}

static void
test_sim_refine_steady_state_exact (void **state)
{
  (void) state;
  /* Past 4096 micro-batch steps --refine simulates the steady state and extends it: the
   * same step as simulating every micro-batch, for each schedule, uneven last periods
   * (m not a multiple of pp) and ZeRO-2's reduce-scatter every micro-batch. */
  g_autoptr(Env) e = env_new ("gpt3-1.3b", "dgx-a100-80g:2");
  const struct { guint pp, vpp; MpSchedule schedule; guint zero, m; } cases[] = {
    { 4, 1, MP_SCHEDULE_1F1B, 1, 1203 },
    { 8, 1, MP_SCHEDULE_1F1B, 2, 601 },
    { 4, 2, MP_SCHEDULE_INTERLEAVED, 1, 1024 },
    { 2, 1, MP_SCHEDULE_GPIPE, 0, 2101 },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(MpPlan) plan = long_plan (e, cases[i].pp, cases[i].vpp, cases[i].schedule,
                                          cases[i].zero, cases[i].m);
      assert_non_null (plan);
      assert_true ((guint64) cases[i].pp * cases[i].vpp * cases[i].m > 4096);
      g_autoptr(MpSimResult) whole = simulate_plan (e, plan, NULL, NULL, NULL);
      mp_assert_close (refined (e, plan), whole->step_s, 1e-9);
      assert_true (plan->simulated_step_s != plan->step_s);
    }
}

/* This process's peak resident memory in bytes. */
static double
peak_rss_bytes (void)
{
  struct rusage u;
  getrusage (RUSAGE_SELF, &u);
  return u.ru_maxrss * 1024.0;
}

static void
test_sim_refine_memory_bounded (void **state)
{
  (void) state;
  /* --refine's memory does not grow with the micro-batch count: 256, 512 and 262,144
   * micro-batches through 4 stages (the last is 2^20 steps, ~1 GB simulated whole) move
   * the peak by less than 32 MB, and the long one is simulated (not left to the closed
   * form) on the line through the two short ones (simulated whole). */
  g_autoptr(Env) e = env_new ("gpt3-1.3b", "dgx-a100-80g:2");
  const guint m[3] = { 256, 512, 1u << 18 };
  double step[3];
  double before = peak_rss_bytes ();
  for (guint i = 0; i < 3; i++)
    {
      g_autoptr(MpPlan) plan = long_plan (e, 4, 1, MP_SCHEDULE_1F1B, 1, m[i]);
      assert_non_null (plan);
      step[i] = refined (e, plan);
      assert_true (step[i] != plan->step_s);
    }
  assert_true (peak_rss_bytes () - before < 32.0 * 1024 * 1024);
  mp_assert_close (step[2], step[0] + (m[2] - m[0]) * (step[1] - step[0]) / (m[1] - m[0]),
                   1e-9);
}

static void
test_sim_trace_of_a_real_plan (void **state)
{
  (void) state;
  /* An interleaved plan with TP, DP buckets, tied embeddings: its trace is well formed. */
  g_autoptr(Env) e = env_new ("gpt3-1.3b", "dgx-a100-80g:2");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.dp = 2;
  cfg.tp = 2;
  cfg.pp = 4;
  cfg.vpp = 2;
  cfg.sequence_parallel = TRUE;
  cfg.schedule = MP_SCHEDULE_INTERLEAVED;
  cfg.micro_batch_size = 2;
  cfg.num_micro_batches = 8;
  g_autoptr(MpPlan) plan = evaluate (e, &cfg);
  assert_non_null (plan);
  MpSimOptions opts = { .slices = TRUE };
  MpProgram **progs = NULL;
  guint n = 0;
  g_autoptr(MpSimResult) res = simulate_plan (e, plan, &opts, &progs, &n);
  assert_int_equal (n, 4);
  assert_true (res->time.t[MP_PHASE_TP] > 0 && res->time.t[MP_PHASE_PP] > 0 && res->time.t[MP_PHASE_BUBBLE] > 0);
  check_trace (progs, n, res);
  mp_program_stages_free (progs);
}

int
main (void)
{
  if (g_getenv ("MPPLAN_DATADIR") == NULL)
    g_setenv ("MPPLAN_DATADIR", MPPLAN_SRCDIR "/examples", TRUE);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_sim_event_queue_order),
    cmocka_unit_test (test_sim_gpipe_and_1f1b_step),
    cmocka_unit_test (test_sim_interleaved_step),
    cmocka_unit_test (test_sim_interleaved_uneven_chunks),
    cmocka_unit_test (test_sim_bubble_breakdown),
    cmocka_unit_test (test_sim_p2p_on_the_path),
    cmocka_unit_test (test_sim_dp_overlap_compute_dominates),
    cmocka_unit_test (test_sim_dp_overlap_comm_dominates),
    cmocka_unit_test (test_sim_zero3_gather_before_use),
    cmocka_unit_test (test_sim_recv_never_before_send),
    cmocka_unit_test (test_sim_tied_rendezvous),
    cmocka_unit_test (test_sim_deadlock_and_unmatched),
    cmocka_unit_test (test_sim_trace_perfetto_fields),
    cmocka_unit_test (test_sim_planner_schedules_exact),
    cmocka_unit_test (test_sim_closed_form_agrees_on_zoo),
    cmocka_unit_test (test_sim_closed_form_megatron_splits),
    cmocka_unit_test (test_sim_closed_form_zero2_falls_behind),
    cmocka_unit_test (test_sim_zero3_gathers_explained),
    cmocka_unit_test (test_sim_fsdp_root),
    cmocka_unit_test (test_sim_zero2_reduces_every_micro_batch),
    cmocka_unit_test (test_sim_closed_form_zero2),
    cmocka_unit_test (test_sim_closed_form_uneven_interleaved),
    cmocka_unit_test (test_sim_closed_form_drain_reduces),
    cmocka_unit_test (test_sim_random_plans_run),
    cmocka_unit_test (test_sim_refine_ranks_by_simulation),
    cmocka_unit_test (test_sim_refine_steady_state_exact),
    cmocka_unit_test (test_sim_refine_memory_bounded),
    cmocka_unit_test (test_sim_trace_of_a_real_plan),
  };
  return cmocka_run_group_tests_name ("sim", tests, NULL, NULL);
}
