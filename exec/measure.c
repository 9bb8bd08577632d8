/* measure.c - from instruction timestamps to the planner's figures: each step's time split
 * into compute / tp_comm / pp_comm / dp_comm / bubble / optimizer per rank, each rank's
 * record packed for the gather at rank 0, and the job's summary (measure-json.c writes it
 * as measured.json; report/ draws the trace).
 *
 * Attribution of one rank's step (wall clock from the step's start, after a barrier, to
 * the end of its last instruction and of everything it left in flight):
 *   compute   FORWARD / BACKWARD time less the parts below, plus nothing else;
 *   tp_comm   time inside the tensor-parallel collectives of FORWARD / BACKWARD;
 *   ep_comm   time inside the MoE token dispatch and combine (all-to-all over ep) of
 *             FORWARD / BACKWARD;
 *   pp_comm   SEND / RECV instructions (posting), and completing a receive whose data had
 *             already arrived;
 *   dp_comm   REDUCE_GRADS / GATHER_PARAMS / REDUCE_TIED / WAIT instructions (posting and
 *             the waits for the dp stream), and a layer blocked on a ZeRO-3 gather;
 *   optimizer OPTIMIZER (the tp sum of the gradients partial over tp and the global
 *             gradient norm's all-reduce included);
 *   bubble    the rest: blocked on a receive whose data had not arrived or, before the
 *             tied embedding's reduction, on the other pipeline end (waiting on another
 *             stage), the end-of-step drain, the interpreter's own gaps.
 * The seven add up to step_s. Units: seconds, bytes. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/measure.h"
#include "common/error.h"
#include "common/stats.h"

#include <string.h>

/* The bubble of ST: its step less the other five parts. */
static void
fill_bubble (MpRankStep *st)
{
  double busy = 0;
  for (int p = 0; p < MP_PHASE_N; p++)
    if (p != MP_PHASE_BUBBLE)
      busy += st->time.t[p];
  st->time.t[MP_PHASE_BUBBLE] = MAX (0.0, st->step_s - busy);
}

void
mp_measure_attribute (const MpProgram *prog, const MpInsnTime *times, double t_start,
                      double t_end, MpRankStep *out)
{
  memset (out, 0, sizeof *out);
  out->step_s = t_end - t_start;
  double *t = out->time.t;
  for (guint i = 0; i < prog->n_insns; i++)
    {
      const MpInsnTime *tm = &times[i];
      double dur = tm->t1 - tm->t0;
      switch (prog->insns[i].kind)
        {
        case MP_INSN_FORWARD:
        case MP_INSN_BACKWARD:
          t[MP_PHASE_COMPUTE] += dur - tm->tp_s - tm->cp_s - tm->ep_s - tm->pp_s
                                 - tm->wait_pp_s - tm->wait_dp_s;
          t[MP_PHASE_TP] += tm->tp_s;
          t[MP_PHASE_CP] += tm->cp_s;
          t[MP_PHASE_EP] += tm->ep_s;
          t[MP_PHASE_PP] += tm->pp_s;
          t[MP_PHASE_DP] += tm->wait_dp_s;
          break;
        case MP_INSN_SEND:
        case MP_INSN_RECV:
          t[MP_PHASE_PP] += dur;
          break;
        case MP_INSN_OPTIMIZER:
          t[MP_PHASE_OPTIMIZER] += dur;
          break;
        default:   /* the dp stream; REDUCE_TIED's wait for the other end is bubble */
          t[MP_PHASE_DP] += dur - tm->wait_pp_s;
          break;
        }
    }
  fill_bubble (out);
}

void
mp_measure_spread (const double *v, guint n, MpSpread *out)
{
  *out = (MpSpread) { 0, 0, 0 };
  if (n == 0)
    return;
  g_autofree double *s = g_memdup2 (v, n * sizeof (double));
  out->median = mp_stat_median (s, n, NULL);
  out->min = s[0];
  out->max = s[n - 1];
}

/* The spread of part P (MP_PHASE_N: the step itself) over N steps. */
static void
column_spread (const MpRankStep *st, guint n, int p, MpSpread *out)
{
  g_autofree double *v = g_new (double, MAX (n, 1u));
  for (guint s = 0; s < n; s++)
    v[s] = p == MP_PHASE_N ? st[s].step_s : st[s].time.t[p];
  mp_measure_spread (v, n, out);
}

void
mp_measure_spreads (const MpRankStep *st, guint n, MpSpread *step, MpSpread *t)
{
  column_spread (st, n, MP_PHASE_N, step);
  for (int p = 0; p < MP_PHASE_N; p++)
    column_spread (st, n, p, &t[p]);
}

/* A job's figures are spreads over its steps, each part over the same steps as the step:
 * a part's median is then inside its min-max, which a part taken as the rest of a median
 * step (a median of sums less a sum of medians) is not. Per step the six parts add up to
 * the job's step; their medians need not add up to its median. */
void
mp_measure_summarize (const MpRankStep *const *ranks, guint n_ranks, guint n_steps,
                      MpRankStep *job, MpJobSummary *out)
{
  memset (out, 0, sizeof *out);
  double most = -1;
  for (guint r = 0; r < n_ranks; r++)
    {
      MpSpread c;
      column_spread (ranks[r], n_steps, MP_PHASE_COMPUTE, &c);
      if (c.median > most)
        {
          most = c.median;
          out->time_rank = r;
        }
    }
  for (guint s = 0; s < n_steps; s++)
    {
      job[s] = n_ranks ? ranks[out->time_rank][s] : (MpRankStep) { 0 };
      for (guint r = 0; r < n_ranks; r++)
        job[s].step_s = MAX (job[s].step_s, ranks[r][s].step_s);
      fill_bubble (&job[s]);
    }
  mp_measure_spreads (job, n_steps, &out->step, out->t);
}


/* ---- one rank's record, gathered at rank 0 --------------------------------------------- */

/* What precedes a rank's steps and instruction times in its packed record. */
typedef struct {
  guint n_steps, n_insns;
  double last_start;
  MpMemStats mem;
} RankHead;

GBytes *
mp_measure_rank_pack (const MpRankStep *steps, guint n_steps, const MpInsnTime *times,
                      guint n_insns, double last_start, const MpMemStats *mem)
{
  RankHead h;
  memset (&h, 0, sizeof h);   /* no uninitialised padding on the wire */
  h.n_steps = n_steps, h.n_insns = n_insns, h.last_start = last_start, h.mem = *mem;
  GByteArray *b = g_byte_array_new ();
  g_byte_array_append (b, (const guint8 *) &h, sizeof h);
  g_byte_array_append (b, (const guint8 *) steps, n_steps * sizeof *steps);
  g_byte_array_append (b, (const guint8 *) times, n_insns * sizeof *times);
  return g_byte_array_free_to_bytes (b);
}

gboolean
mp_measure_rank_unpack (GBytes *bytes, guint n_steps, MpExecRank *out, GError **error)
{
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (bytes, &len);
  RankHead h;
  guint n_insns = out->prog->n_insns;
  if (len >= sizeof h)
    memcpy (&h, p, sizeof h);
  if (len < sizeof h || h.n_steps != n_steps || h.n_insns != n_insns
      || len != sizeof h + n_steps * sizeof (MpRankStep) + n_insns * sizeof (MpInsnTime))
    {
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "rank %u sent a malformed record (%zu "
                   "bytes for %u steps and %u instructions)", out->prog->rank, len, n_steps,
                   n_insns);
      return FALSE;
    }
  out->last_start = h.last_start;
  out->mem = h.mem;
  out->steps = g_new0 (MpRankStep, MAX (n_steps, 1u));
  out->times = g_new0 (MpInsnTime, MAX (n_insns, 1u));
  memcpy (out->steps, p + sizeof h, n_steps * sizeof (MpRankStep));
  memcpy (out->times, p + sizeof h + n_steps * sizeof (MpRankStep),
          n_insns * sizeof (MpInsnTime));
  return TRUE;
}

/* ---- the job (rank 0) -------------------------------------------------------------- */

void
mp_measure_result_summarize (MpExecResult *r)
{
  g_autofree const MpRankStep **steps = g_new0 (const MpRankStep *, MAX (r->n_ranks, 1u));
  for (guint i = 0; i < r->n_ranks; i++)
    steps[i] = r->ranks[i].steps;
  r->job = g_new0 (MpRankStep, MAX (r->steps, 1u));
  mp_measure_summarize (steps, r->n_ranks, r->steps, r->job, &r->summary);
  r->mem_rank = 0;
  for (guint i = 1; i < r->n_ranks; i++)
    if (r->ranks[i].mem.peak_total > r->ranks[r->mem_rank].mem.peak_total)
      r->mem_rank = i;
}
