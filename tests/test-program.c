/* test-program.c - cmocka tests of planner/program.c: the programs a plan expands into.
 *
 * Over many plans (zoo models x shapes x schedules x vpp x ZeRO x recompute, and the top
 * plans of real searches) every program set is checked for:
 *  - pairing: every send has exactly one receive on its peer (same tag, same bytes, same
 *    micro-batch, neighbouring chunks) and every receive one send;
 *  - progress: a symbolic run of all the programs ends. The model (program/program.h,
 *    the programs section): each rank runs its instructions in order; a SEND posts its message
 *    and goes on (MPI_Isend); a RECV waits until the matching SEND has been reached; each
 *    rank's DP stream runs its collectives in order, and a collective completes when every
 *    member of its group has it at the head of its stream (NCCL's rule: members must issue
 *    a group's collectives in the same order, or hang), its members agreeing on its kind
 *    and size; WAIT (dp) waits for every collective the rank issued; under ZeRO-3 a
 *    layer's FORWARD / BACKWARD waits for the latest gather of that layer;
 *  - counts: one forward and one backward of each layer of each (chunk, micro-batch), in
 *    layer order and reverse, receives before and sends after;
 *  - memory: the micro-batches in flight at a stage's peak are the cost model's
 *    (mp_cost_in_flight: min(m, p - s) for 1F1B, m for GPipe, 1 for layer placement);
 *  - buckets: each gradient in one bucket per chunk, DDP's size rule, reduced after the
 *    last micro-batch's backward of its layers, sizes adding up to the stage's gradients;
 *  - the end: WAIT on dp, then OPTIMIZER (then ZeRO 1/2's gathers and a last WAIT);
 *  - costs: FLOPs and bytes add up to the cost model's stage figures.
 *
 * Zoo files are found through MPPLAN_DATADIR (the Makefile sets it to examples/). */
#include "tests/test-util.h"
#include "tests/test-env.h"
#include "planner/planner.h"

#include <string.h>

/* The plan being checked, for failure messages. */
static char current[256];

static void
describe (const MpModel *model, const MpParallelConfig *c)
{
  g_snprintf (current, sizeof current,
              "%s dp%u tp%u pp%u vpp%u cp%u ep%u %s m%u zero%u recompute %s sp%d order "
              "%u%u%u%u bucket %.0f", model->name, c->dp, c->tp, c->pp, c->vpp, c->cp, c->ep,
              mp_schedule_name (c->schedule), c->num_micro_batches, c->zero,
              mp_recompute_name (c->recompute), c->sequence_parallel, c->order[0],
              c->order[1], c->order[2], c->order[3], c->bucket_bytes);
}

#define CHECK(cond, ...)                                                                    \
  do                                                                                        \
    {                                                                                       \
      if (!(cond))                                                                          \
        {                                                                                   \
          g_autofree char *what_ = g_strdup_printf (__VA_ARGS__);                           \
          fail_msg ("%s: %s", current, what_);                                              \
        }                                                                                   \
    }                                                                                       \
  while (0)

/* ---- helpers -------------------------------------------------------------------------- */

static guint
chunks_of (const MpParallelConfig *cfg)
{
  return cfg->pp * (cfg->schedule == MP_SCHEDULE_INTERLEAVED ? cfg->vpp : 1);
}

static guint
chunk_first (const MpPlan *plan, guint c)
{
  guint at = 0;
  for (guint i = 0; i < c; i++)
    at += plan->chunk_layers[i];
  return at;
}

/* The chunk of LAYER. */
static guint
chunk_of_layer (const MpPlan *plan, guint layer)
{
  guint c = 0, end = plan->chunk_layers[0];
  while (layer >= end)
    end += plan->chunk_layers[++c];
  return c;
}

/* This rank's parameters of LAYER as the program counts them: the cost model's, with the
 * tied word embeddings on the last stage's head. */
static void
layer_params (const MpCostContext *ctx, const MpPlan *plan, guint stage, guint layer,
              double *dense, double *expert)
{
  mp_cost_layer_params (ctx, &plan->cfg, layer, dense, expert);
  if (stage == plan->cfg.pp - 1 && layer == mp_cost_context_model (ctx)->n_layers - 1)
    *dense += mp_cost_tied_params (ctx, &plan->cfg);
}

static gboolean
is_dp_coll (const MpInsn *i)
{
  return i->stream == MP_STREAM_DP && i->kind != MP_INSN_WAIT;
}

/* Programs of every rank (ALL) or the stage programs, as a GPtrArray of MpProgram. */
static GPtrArray *
build (const MpCostContext *ctx, const MpPlan *plan, gboolean all)
{
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify) mp_program_free);
  if (all)
    {
      for (guint r = 0; r < plan->world_size; r++)
        g_ptr_array_add (out, mp_program_build (ctx, plan, r));
      return out;
    }
  guint n = 0;
  MpProgram **stages = mp_program_build_stages (ctx, plan, &n);
  CHECK (n == plan->cfg.pp && stages[n] == NULL, "build_stages gave %u programs", n);
  for (guint s = 0; s < n; s++)
    {
      CHECK (stages[s]->stage == s && stages[s]->tp_rank == 0 && stages[s]->dp_rank == 0
             && stages[s]->cp_rank == 0, "stage program %u has the wrong coordinates", s);
      g_ptr_array_add (out, stages[s]);
    }
  g_free (stages);               /* the programs now belong to OUT */
  return out;
}

/* ---- pairing ---------------------------------------------------------------------------- */

typedef struct {
  const MpInsn *send, *recv;
  guint n_send, n_recv;
  guint send_rank, recv_rank;
} Pair;

static char *
pair_key (guint src, guint dst, guint tag)
{
  return g_strdup_printf ("%u>%u#%u", src, dst, tag);
}

static void
check_pairing (GPtrArray *progs)
{
  g_autoptr(GHashTable) pairs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                       g_free);
  for (guint k = 0; k < progs->len; k++)
    {
      const MpProgram *p = progs->pdata[k];
      for (guint i = 0; i < p->n_insns; i++)
        {
          const MpInsn *in = &p->insns[i];
          if (in->kind != MP_INSN_SEND && in->kind != MP_INSN_RECV)
            continue;
          CHECK (in->peer >= 0 && (guint) in->peer != p->rank, "rank %u insn %u: peer %d",
                 p->rank, i, in->peer);
          gboolean send = in->kind == MP_INSN_SEND;
          char *key = send ? pair_key (p->rank, in->peer, in->tag)
                           : pair_key (in->peer, p->rank, in->tag);
          Pair *pr = g_hash_table_lookup (pairs, key);
          if (pr == NULL)
            {
              pr = g_new0 (Pair, 1);
              g_hash_table_insert (pairs, key, pr);
            }
          else
            g_free (key);
          if (send)
            pr->send = in, pr->n_send++, pr->send_rank = p->rank;
          else
            pr->recv = in, pr->n_recv++, pr->recv_rank = p->rank;
        }
    }
  GHashTableIter it;
  gpointer key, value;
  g_hash_table_iter_init (&it, pairs);
  while (g_hash_table_iter_next (&it, &key, &value))
    {
      const Pair *pr = value;
      CHECK (pr->n_send == 1 && pr->n_recv == 1, "%s: %u sends, %u receives",
             (const char *) key, pr->n_send, pr->n_recv);
      const MpInsn *s = pr->send, *r = pr->recv;
      CHECK (s->bytes == r->bytes && s->bytes > 0, "%s: %g bytes sent, %g received",
             (const char *) key, s->bytes, r->bytes);
      CHECK (s->micro_batch == r->micro_batch && s->layer == r->layer,
             "%s: micro-batch or layer differ", (const char *) key);
      gboolean backward = s->tag & 1;
      CHECK (r->chunk == (backward ? s->chunk - 1 : s->chunk + 1),
             "%s: chunk %u sends to chunk %u", (const char *) key, s->chunk, r->chunk);
    }
}

/* ---- progress: the symbolic run --------------------------------------------------------- */

typedef struct {
  const MpInsn *insn;
  char *key;              /* the group instance: group kind, its ranks, sequence number */
} Issued;

typedef struct {
  const MpProgram *prog;
  guint pc;
  GArray *issued;         /* Issued, this rank's DP stream */
  guint head;             /* collectives of `issued` completed */
  GHashTable *seq;        /* group -> collectives issued on it so far */
  gint *gathered_at;      /* per layer: index in `issued` of its latest ZeRO-3 gather */
} Runner;

/* The group a collective of rank P runs over, named by what its members share. */
static char *
group_name (const MpPlan *plan, const MpProgram *p, MpCommGroup group)
{
  const MpParallelConfig *c = &plan->cfg;
  switch (group)
    {
    case MP_GROUP_DP:
      /* HSDP: the shard group, zero_shard consecutive of the dp * cp ranks (cp fastest) */
      return g_strdup_printf ("dp tp%u pp%u s%u", p->tp_rank, p->stage,
                              (p->dp_rank * c->cp + p->cp_rank)
                              / mp_parallel_config_zero_shard (c));
    case MP_GROUP_DP_REP:
      return g_strdup_printf ("dp_rep tp%u pp%u s%u", p->tp_rank, p->stage,
                              (p->dp_rank * c->cp + p->cp_rank)
                              % mp_parallel_config_zero_shard (c));
    case MP_GROUP_EDP:
      /* The dp * cp ranks, cp fastest; every ep-th one holds the same experts. */
      return g_strdup_printf ("edp tp%u pp%u e%u", p->tp_rank, p->stage,
                              (p->dp_rank * c->cp + p->cp_rank) % c->ep);
    case MP_GROUP_PP_ENDS:
      return g_strdup_printf ("ends tp%u cp%u dp%u", p->tp_rank, p->cp_rank, p->dp_rank);
    case MP_GROUP_NONE:
    case MP_GROUP_N:
    default:
      return g_strdup ("none");
    }
}

/* Members of each group among the programs run: group name -> count. */
static GHashTable *
group_members (const MpPlan *plan, GPtrArray *progs)
{
  GHashTable *members = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (guint k = 0; k < progs->len; k++)
    {
      const MpProgram *p = progs->pdata[k];
      for (MpCommGroup g = MP_GROUP_DP; g < MP_GROUP_N; g++)
        {
          if (g == MP_GROUP_PP_ENDS && p->stage != 0 && p->stage != plan->cfg.pp - 1)
            continue;
          char *name = group_name (plan, p, g);
          guint n = GPOINTER_TO_UINT (g_hash_table_lookup (members, name));
          g_hash_table_replace (members, name, GUINT_TO_POINTER (n + 1));
        }
    }
  return members;
}

static void
issue (Runner *r, const MpPlan *plan, const MpInsn *in)
{
  g_autofree char *group = group_name (plan, r->prog, in->group);
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (r->seq, group));
  g_hash_table_replace (r->seq, g_strdup (group), GUINT_TO_POINTER (n + 1));
  Issued is = { in, g_strdup_printf ("%s #%u", group, n) };
  if (in->kind == MP_INSN_GATHER_PARAMS && plan->cfg.zero >= 3)
    r->gathered_at[in->layer] = (gint) r->issued->len;
  g_array_append_val (r->issued, is);
}

/* Runs R until it blocks; TRUE if it moved. */
static gboolean
advance (Runner *r, const MpPlan *plan, GHashTable *posted)
{
  gboolean moved = FALSE;
  while (r->pc < r->prog->n_insns)
    {
      const MpInsn *in = &r->prog->insns[r->pc];
      if (in->kind == MP_INSN_SEND)
        {
          char *key = pair_key (r->prog->rank, in->peer, in->tag);
          g_hash_table_add (posted, key);
        }
      else if (in->kind == MP_INSN_RECV)
        {
          g_autofree char *key = pair_key (in->peer, r->prog->rank, in->tag);
          if (!g_hash_table_remove (posted, key))
            break;
        }
      else if (in->kind == MP_INSN_WAIT)
        {
          if (r->head < r->issued->len)
            break;
        }
      else if (is_dp_coll (in))
        issue (r, plan, in);
      else if ((in->kind == MP_INSN_FORWARD || in->kind == MP_INSN_BACKWARD)
               && r->gathered_at[in->layer] >= (gint) r->head)
        break;
      r->pc++;
      moved = TRUE;
    }
  return moved;
}

/* Completes the collective at the head of R's DP stream if every member of its group has
 * it at the head of theirs; TRUE if it did. */
static gboolean
complete (Runner *runners, guint n, Runner *r, GHashTable *members)
{
  if (r->head >= r->issued->len)
    return FALSE;
  const Issued *mine = &g_array_index (r->issued, Issued, r->head);
  const char *group = strrchr (mine->key, '#');
  g_autofree char *name = g_strndup (mine->key, group - mine->key - 1);
  guint want = GPOINTER_TO_UINT (g_hash_table_lookup (members, name)), have = 0;
  for (guint k = 0; k < n; k++)
    {
      Runner *o = &runners[k];
      if (o->head < o->issued->len
          && strcmp (g_array_index (o->issued, Issued, o->head).key, mine->key) == 0)
        have++;
    }
  if (have < want)
    return FALSE;
  CHECK (have == want, "%s: %u members, %u expected", mine->key, have, want);
  for (guint k = 0; k < n; k++)
    {
      Runner *o = &runners[k];
      if (o->head >= o->issued->len)
        continue;
      const Issued *its = &g_array_index (o->issued, Issued, o->head);
      if (strcmp (its->key, mine->key) != 0)
        continue;
      CHECK (its->insn->kind == mine->insn->kind && its->insn->coll == mine->insn->coll
             && its->insn->bytes == mine->insn->bytes,
             "%s: rank %u issues %s of %g bytes, rank %u %s of %g", mine->key, r->prog->rank,
             mp_insn_kind_name (mine->insn->kind), mine->insn->bytes, o->prog->rank,
             mp_insn_kind_name (its->insn->kind), its->insn->bytes);
      o->head++;
    }
  return TRUE;
}

/* Runs PROGS symbolically; TRUE when every rank reaches its end with every collective
 * done and every message received, else FALSE with *WHY saying where it stopped. */
static gboolean
run_programs (const MpPlan *plan, GPtrArray *progs, guint n_layers, char **why)
{
  guint n = progs->len;
  Runner *runners = g_new0 (Runner, n);
  g_autoptr(GHashTable) posted = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GHashTable) members = group_members (plan, progs);
  for (guint k = 0; k < n; k++)
    {
      runners[k].prog = progs->pdata[k];
      runners[k].issued = g_array_new (FALSE, FALSE, sizeof (Issued));
      runners[k].seq = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      runners[k].gathered_at = g_new (gint, n_layers);
      for (guint l = 0; l < n_layers; l++)
        runners[k].gathered_at[l] = -1;
    }
  gboolean moved = TRUE;
  while (moved)
    {
      moved = FALSE;
      for (guint k = 0; k < n; k++)
        moved |= advance (&runners[k], plan, posted);
      for (guint k = 0; k < n; k++)
        moved |= complete (runners, n, &runners[k], members);
    }
  *why = NULL;
  for (guint k = 0; k < n && *why == NULL; k++)
    {
      Runner *r = &runners[k];
      if (r->pc < r->prog->n_insns || r->head < r->issued->len)
        *why = g_strdup_printf ("deadlock: rank %u stops at instruction %u of %u (%s), %u of "
                                "%u collectives done", r->prog->rank, r->pc,
                                r->prog->n_insns,
                                r->pc < r->prog->n_insns
                                  ? mp_insn_kind_name (r->prog->insns[r->pc].kind) : "end",
                                r->head, r->issued->len);
    }
  if (*why == NULL && g_hash_table_size (posted) > 0)
    *why = g_strdup_printf ("%u messages never received", g_hash_table_size (posted));
  for (guint k = 0; k < n; k++)
    {
      for (guint i = 0; i < runners[k].issued->len; i++)
        g_free (g_array_index (runners[k].issued, Issued, i).key);
      g_array_unref (runners[k].issued);
      g_hash_table_unref (runners[k].seq);
      g_free (runners[k].gathered_at);
    }
  g_free (runners);
  return *why == NULL;
}

static void
check_runs (const MpPlan *plan, GPtrArray *progs, guint n_layers)
{
  g_autofree char *why = NULL;
  gboolean ok = run_programs (plan, progs, n_layers, &why);
  CHECK (ok, "%s", why);
}

/* ---- one program ------------------------------------------------------------------------ */

/* Progress of one (chunk, micro-batch) through its layers. */
typedef struct {
  guint fwd, bwd;          /* layers done forward, backward */
  guint recvs[2], sends[2];/* forward (0) and backward (1) messages seen */
} Unit;

/* One forward and one backward of each layer of each (chunk, micro-batch), in layer order
 * and reverse, a receive before and a send after; and the in-flight peak. */
static void
check_counts (const MpPlan *plan, const MpProgram *p)
{
  const MpParallelConfig *cfg = &plan->cfg;
  guint m = cfg->num_micro_batches, chunks = chunks_of (cfg);
  g_autofree Unit *units = g_new0 (Unit, chunks * m);
  guint in_flight = 0, peak = 0;
  for (guint i = 0; i < p->n_insns; i++)
    {
      const MpInsn *in = &p->insns[i];
      gboolean p2p = in->kind == MP_INSN_SEND || in->kind == MP_INSN_RECV;
      if (!p2p && in->kind != MP_INSN_FORWARD && in->kind != MP_INSN_BACKWARD)
        continue;
      CHECK (in->micro_batch < m && in->chunk < chunks && in->chunk % cfg->pp == p->stage,
             "rank %u insn %u: chunk %u micro-batch %u", p->rank, i, in->chunk,
             in->micro_batch);
      Unit *u = &units[in->chunk * m + in->micro_batch];
      guint first = chunk_first (plan, in->chunk), n = plan->chunk_layers[in->chunk];
      if (p2p)
        {
          guint dir = in->tag & 1;
          gboolean recv = in->kind == MP_INSN_RECV;
          /* forward: receive before the first layer, send after the last; backward:
           * receive once forward is done, send once backward is. */
          gboolean placed = dir == 0 ? (recv ? u->fwd == 0 : u->fwd == n && u->bwd == 0)
                                     : (recv ? u->fwd == n && u->bwd == 0 : u->bwd == n);
          CHECK (placed, "rank %u insn %u: %s of chunk %u micro-batch %u out of place",
                 p->rank, i, mp_insn_kind_name (in->kind), in->chunk, in->micro_batch);
          (recv ? u->recvs : u->sends)[dir]++;
        }
      else if (in->kind == MP_INSN_FORWARD)
        {
          CHECK (u->bwd == 0 && u->fwd < n && in->layer == first + u->fwd,
                 "rank %u insn %u: forward of layer %u micro-batch %u out of order",
                 p->rank, i, in->layer, in->micro_batch);
          if (u->fwd++ == 0 && ++in_flight > peak)
            peak = in_flight;
        }
      else
        {
          CHECK (u->fwd == n && u->bwd < n && in->layer == first + n - 1 - u->bwd,
                 "rank %u insn %u: backward of layer %u micro-batch %u out of order",
                 p->rank, i, in->layer, in->micro_batch);
          if (++u->bwd == n)
            in_flight--;
        }
    }
  for (guint c = p->stage; c < chunks; c += cfg->pp)
    {
      guint remote_prev = c > 0 && (c - 1) % cfg->pp != p->stage;
      guint remote_next = c + 1 < chunks && (c + 1) % cfg->pp != p->stage;
      for (guint mb = 0; mb < m; mb++)
        {
          const Unit *u = &units[c * m + mb];
          CHECK (u->fwd == plan->chunk_layers[c] && u->bwd == plan->chunk_layers[c],
                 "rank %u: chunk %u micro-batch %u: %u forwards, %u backwards", p->rank, c,
                 mb, u->fwd, u->bwd);
          CHECK (u->recvs[0] == remote_prev && u->sends[0] == remote_next
                 && u->recvs[1] == remote_next && u->sends[1] == remote_prev,
                 "rank %u: chunk %u micro-batch %u has the wrong sends or receives",
                 p->rank, c, mb);
        }
    }
  /* The memory the program implies is the cost model's. */
  double want = mp_cost_in_flight (cfg, p->stage);
  CHECK ((double) peak / p->vpp == want, "stage %u holds %u chunk-micro-batches at its "
         "peak (%g per chunk); the cost model says %g", p->stage, peak,
         (double) peak / p->vpp, want);
  if (cfg->schedule == MP_SCHEDULE_1F1B)
    CHECK (peak <= cfg->pp - p->stage, "1F1B stage %u holds %u", p->stage, peak);
  if (cfg->schedule == MP_SCHEDULE_GPIPE)
    CHECK (peak == m, "GPipe stage %u holds %u of %u", p->stage, peak, m);
  if (cfg->schedule == MP_SCHEDULE_NONE)
    CHECK (peak == 1, "layer placement holds %u", peak);
}

/* What a rank's data-parallel groups are: more than one rank each? */
static void
reduces (const MpParallelConfig *cfg, gboolean *dense, gboolean *expert)
{
  guint replicas = cfg->dp * cfg->cp;
  *dense = replicas > 1;
  /* MoE (moe14): experts are reduced over the expert-data-parallel rest of the stage's
   * tp x cp x dp ranks once etp x ep of them hold an expert's shards. */
  guint etp = cfg->etp ? cfg->etp : cfg->tp;
  *expert = cfg->tp * cfg->cp * cfg->dp / (etp * cfg->ep) > 1;
}

/* This rank's parameters of layers [LO, LO + N) reduced over GROUP. */
static double
bucket_params (const MpCostContext *ctx, const MpPlan *plan, guint stage, MpCommGroup group,
               guint lo, guint n)
{
  double sum = 0;
  for (guint l = lo; l < lo + n; l++)
    {
      double d, e;
      layer_params (ctx, plan, stage, l, &d, &e);
      sum += group == MP_GROUP_DP ? d : e;
    }
  return sum;
}

/* Gradient buckets: DDP's size rule inside one chunk, reduced once the last micro-batch's
 * backward of every layer in them is done (ZeRO-3: each micro-batch's), each gradient in
 * exactly one bucket, the sizes adding up to the stage's gradients. */
static void
check_buckets (const MpCostContext *ctx, const MpPlan *plan, const MpProgram *p,
               const MpStageTime *st)
{
  const MpParallelConfig *cfg = &plan->cfg;
  guint n_layers = mp_cost_context_model (ctx)->n_layers, m = cfg->num_micro_batches;
  double g = mp_cost_grad_bytes (ctx, cfg), cap = mp_cost_bucket_bytes (cfg);
  gboolean on[MP_GROUP_N] = { FALSE };
  reduces (cfg, &on[MP_GROUP_DP], &on[MP_GROUP_EDP]);
  g_autofree guint *bwd_count = g_new0 (guint, n_layers);
  g_autofree guint *covered = g_new0 (guint, n_layers * MP_GROUP_N);
  g_autoptr(GArray) first_seen = g_array_new (FALSE, FALSE, sizeof (const MpInsn *));
  g_autoptr(GArray) times = g_array_new (FALSE, TRUE, sizeof (guint));
  double total = 0;
  guint reps = mp_parallel_config_zero_replicas (cfg), replicated = 0;
  for (guint i = 0; i < p->n_insns; i++)
    {
      const MpInsn *in = &p->insns[i];
      if (in->kind == MP_INSN_BACKWARD)
        bwd_count[in->layer]++;
      if (in->kind != MP_INSN_REDUCE_GRADS)
        continue;
      if (in->group == MP_GROUP_DP_REP)
        {
          /* HSDP: the accumulated shard all-reduced once, after its last reduce-scatter */
          CHECK (reps > 1, "a replicate all-reduce without HSDP");
          CHECK (in->coll == MP_COLL_ALL_REDUCE, "replicate group reduces with %s",
                 mp_coll_kind_name (in->coll));
          CHECK (in->bucket < first_seen->len
                 && g_array_index (times, guint, in->bucket) == (cfg->zero >= 2 ? m : 1u),
                 "bucket %u replicated before its last reduce-scatter", in->bucket);
          const MpInsn *was = g_array_index (first_seen, const MpInsn *, in->bucket);
          CHECK (was->group == MP_GROUP_DP && was->layer == in->layer
                 && in->bytes == was->bytes / mp_parallel_config_zero_shard (cfg),
                 "bucket %u: replicate all-reduce of %g bytes", in->bucket, in->bytes);
          replicated++;
          continue;
        }
      CHECK (in->group == MP_GROUP_DP || in->group == MP_GROUP_EDP, "bucket group %s",
             mp_comm_group_name (in->group));
      CHECK (on[in->group], "a bucket reduced over a group of one rank");
      CHECK (in->stream == MP_STREAM_DP && in->n_layers >= 1, "insn %u", i);
      CHECK (in->coll == (cfg->zero >= 1 ? MP_COLL_REDUCE_SCATTER : MP_COLL_ALL_REDUCE),
             "ZeRO %u reduces with %s", cfg->zero, mp_coll_kind_name (in->coll));
      guint lo = in->layer, hi = in->layer + in->n_layers - 1, c = chunk_of_layer (plan, lo);
      CHECK (chunk_of_layer (plan, hi) == c && c % cfg->pp == p->stage,
             "bucket %u spans chunks", in->bucket);
      double params = bucket_params (ctx, plan, p->stage, in->group, lo, in->n_layers);
      double lowest = bucket_params (ctx, plan, p->stage, in->group, lo, 1);
      CHECK (in->bytes > 0 && in->bytes == params * g, "bucket %u: %g bytes for %g "
             "parameters", in->bucket, in->bytes, params);
      CHECK (lowest > 0 && (params - lowest) * g < cap, "bucket %u was not closed as soon "
             "as it reached %g bytes", in->bucket, cap);
      /* Every backward of its layers so far: all of them (DDP), or this micro-batch's. */
      if (in->bucket >= times->len)
        g_array_set_size (times, in->bucket + 1);
      guint *done = &g_array_index (times, guint, in->bucket);
      guint want = cfg->zero >= 2 ? *done + 1 : m;
      for (guint l = lo; l <= hi; l++)
        CHECK (bwd_count[l] == want, "bucket %u (layers %u-%u) reduced after %u backwards "
               "of layer %u, not %u", in->bucket, lo, hi, bwd_count[l], l, want);
      (*done)++;
      if (in->bucket == first_seen->len)
        {
          g_array_append_val (first_seen, in);
          total += in->bytes;
          for (guint l = lo; l <= hi; l++)
            covered[l * MP_GROUP_N + in->group]++;
        }
      else
        {
          CHECK (in->bucket < first_seen->len, "bucket numbers not in issue order");
          const MpInsn *was = g_array_index (first_seen, const MpInsn *, in->bucket);
          CHECK (was->layer == lo && was->n_layers == in->n_layers && was->group == in->group,
                 "bucket %u changed", in->bucket);
        }
    }
  for (guint b = 0; b < times->len; b++)
    CHECK (g_array_index (times, guint, b) == (cfg->zero >= 2 ? m : 1u),
           "bucket %u reduced %u times", b, g_array_index (times, guint, b));
  guint dense_buckets = 0;
  for (guint b = 0; b < first_seen->len; b++)
    dense_buckets += g_array_index (first_seen, const MpInsn *, b)->group == MP_GROUP_DP;
  CHECK (replicated == (reps > 1 ? dense_buckets : 0), "%u replicate all-reduces for %u "
         "dense buckets over %u replicas", replicated, dense_buckets, reps);
  /* Each gradient in exactly one bucket of its group. */
  double want_total = 0;
  for (guint c = p->stage; c < chunks_of (cfg); c += cfg->pp)
    for (guint l = chunk_first (plan, c); l < chunk_first (plan, c) + plan->chunk_layers[c]; l++)
      {
        double d, e;
        layer_params (ctx, plan, p->stage, l, &d, &e);
        want_total += (on[MP_GROUP_DP] ? d : 0) + (on[MP_GROUP_EDP] ? e : 0);
        if (d > 0)
          CHECK (covered[l * MP_GROUP_N + MP_GROUP_DP] == (guint) on[MP_GROUP_DP],
                 "layer %u's dense gradients are in %u buckets", l,
                 covered[l * MP_GROUP_N + MP_GROUP_DP]);
        if (e > 0)
          CHECK (covered[l * MP_GROUP_N + MP_GROUP_EDP] == (guint) on[MP_GROUP_EDP],
                 "layer %u's expert gradients are in %u buckets", l,
                 covered[l * MP_GROUP_N + MP_GROUP_EDP]);
      }
  mp_assert_close (total, want_total * g, 1e-12);
  /* ... which is what the cost model reduces. */
  if (on[MP_GROUP_DP] && on[MP_GROUP_EDP])
    mp_assert_close (total, st->params * g, 1e-9);
}

/* The end of a step: WAIT (dp) then OPTIMIZER, every reduction before them; for ZeRO 1/2
 * the buckets' updated shards gathered after, then a last WAIT. Tied embeddings reduced
 * on the two end stages. */
static void
check_end (const MpCostContext *ctx, const MpPlan *plan, const MpProgram *p)
{
  const MpParallelConfig *cfg = &plan->cfg;
  guint opt = G_MAXUINT, n_opt = 0, n_tied = 0, n_buckets = 0;
  double g = mp_cost_grad_bytes (ctx, cfg), w;
  mp_model_state_bytes_per_param (mp_cost_context_model (ctx), &w, NULL, NULL);
  for (guint i = 0; i < p->n_insns; i++)
    {
      const MpInsn *in = &p->insns[i];
      if (in->kind == MP_INSN_OPTIMIZER)
        opt = i, n_opt++;
      if (in->kind == MP_INSN_REDUCE_GRADS || in->kind == MP_INSN_REDUCE_TIED)
        CHECK (opt == G_MAXUINT, "a reduction after the optimizer");
      if (in->kind == MP_INSN_REDUCE_GRADS && in->bucket + 1 > n_buckets)
        n_buckets = in->bucket + 1;
      if (in->kind == MP_INSN_REDUCE_TIED)
        {
          n_tied++;
          CHECK (in->group == MP_GROUP_PP_ENDS && in->coll == MP_COLL_ALL_REDUCE
                 && in->stream == MP_STREAM_DP, "tied embeddings reduced wrongly");
          CHECK (in->bytes == mp_cost_tied_params (ctx, cfg) * g, "tied: %g bytes",
                 in->bytes);
        }
    }
  CHECK (n_opt == 1 && opt > 0, "%u optimizer steps", n_opt);
  const MpInsn *wait = &p->insns[opt - 1];
  CHECK (wait->kind == MP_INSN_WAIT && wait->stream == MP_STREAM_DP,
         "the optimizer does not follow a wait on dp");
  gboolean ends = p->stage == 0 || p->stage == cfg->pp - 1;
  CHECK (n_tied == (guint) (mp_cost_tied_params (ctx, cfg) > 0 && ends), "%u tied "
         "reductions on stage %u", n_tied, p->stage);
  guint after = p->n_insns - 1 - opt;
  if ((cfg->zero == 1 || cfg->zero == 2) && n_buckets > 0)
    {
      CHECK (after == n_buckets + 1, "%u instructions after the optimizer, %u buckets", after,
             n_buckets);
      const MpInsn *last = &p->insns[p->n_insns - 1];
      CHECK (last->kind == MP_INSN_WAIT && last->stream == MP_STREAM_DP, "no last wait");
      for (guint i = opt + 1; i + 1 < p->n_insns; i++)
        {
          const MpInsn *in = &p->insns[i];
          double params = bucket_params (ctx, plan, p->stage, in->group, in->layer,
                                         in->n_layers);
          CHECK (in->kind == MP_INSN_GATHER_PARAMS && in->coll == MP_COLL_ALL_GATHER
                 && in->bytes == params * w, "insn %u after the optimizer", i);
        }
    }
  else
    CHECK (after == 0, "%u instructions after the optimizer", after);
}

/* ZeRO-3: a gather of each layer (per group) before every forward and backward of it,
 * 2 m in all (m for torchtitan's root unit, kept from forward to backward); other stages
 * gather nothing before the optimizer. */
static void
check_gathers (const MpCostContext *ctx, const MpPlan *plan, const MpProgram *p)
{
  const MpParallelConfig *cfg = &plan->cfg;
  const MpModel *model = mp_cost_context_model (ctx);
  guint n_layers = model->n_layers;
  gboolean on[MP_GROUP_N] = { FALSE };
  reduces (cfg, &on[MP_GROUP_DP], &on[MP_GROUP_EDP]);
  /* gathers not yet used up: reshard_after_forward = False keeps a forward's to its
   * backward, while other micro-batches' forwards gather again */
  g_autofree guint *ready = g_new0 (guint, n_layers * MP_GROUP_N);
  g_autofree guint *count = g_new0 (guint, n_layers * MP_GROUP_N);
  double w;
  mp_model_state_bytes_per_param (mp_cost_context_model (ctx), &w, NULL, NULL);
  for (guint i = 0; i < p->n_insns && p->insns[i].kind != MP_INSN_OPTIMIZER; i++)
    {
      const MpInsn *in = &p->insns[i];
      if (in->kind == MP_INSN_GATHER_PARAMS)
        {
          CHECK (cfg->zero >= 3, "ZeRO %u gathers before the optimizer", cfg->zero);
          CHECK (in->n_layers == 1 && in->coll == MP_COLL_ALL_GATHER && on[in->group]
                 && in->bytes == bucket_params (ctx, plan, p->stage, in->group, in->layer, 1)
                                 * w, "insn %u: a wrong gather", i);
          ready[in->layer * MP_GROUP_N + in->group]++;
          count[in->layer * MP_GROUP_N + in->group]++;
        }
      if ((in->kind != MP_INSN_FORWARD && in->kind != MP_INSN_BACKWARD) || cfg->zero < 3)
        continue;
      for (MpCommGroup gr = MP_GROUP_DP; gr <= MP_GROUP_EDP; gr++)
        {
          if (!on[gr] || !(bucket_params (ctx, plan, p->stage, gr, in->layer, 1) > 0))
            continue;
          CHECK (ready[in->layer * MP_GROUP_N + gr] > 0, "insn %u: layer %u used without "
                 "its %s gather", i, in->layer, mp_comm_group_name (gr));
          /* reshard_after_forward = False: the forward's gather serves the backward */
          gboolean kept = cfg->no_reshard
                          || mp_parallel_config_fsdp_root (cfg, &model->layers[in->layer]);
          if (!kept || in->kind == MP_INSN_BACKWARD)
            ready[in->layer * MP_GROUP_N + gr]--;
        }
    }
  if (cfg->zero < 3)
    return;
  for (guint l = 0; l < n_layers; l++)
    for (MpCommGroup gr = MP_GROUP_DP; gr <= MP_GROUP_EDP; gr++)
      {
        gboolean mine = p->stage == chunk_of_layer (plan, l) % cfg->pp && on[gr]
                        && bucket_params (ctx, plan, p->stage, gr, l, 1) > 0;
        guint passes = cfg->no_reshard || mp_parallel_config_fsdp_root (cfg, &model->layers[l])
                         ? 1 : 2;
        CHECK (count[l * MP_GROUP_N + gr] == (mine ? passes * cfg->num_micro_batches : 0),
               "layer %u gathered %u times over %s", l, count[l * MP_GROUP_N + gr],
               mp_comm_group_name (gr));
      }
}

/* FLOPs and bytes add up to the cost model's stage figures; sends carry its p2p_bytes;
 * backward recomputes where the cost model does. */
static void
check_costs (const MpCostContext *ctx, const MpPlan *plan, const MpProgram *p,
             const MpStageTime *st)
{
  const MpParallelConfig *cfg = &plan->cfg;
  double sum[4] = { 0 };
  for (guint i = 0; i < p->n_insns; i++)
    {
      const MpInsn *in = &p->insns[i];
      if (in->kind == MP_INSN_FORWARD || in->kind == MP_INSN_BACKWARD)
        {
          gboolean b = in->kind == MP_INSN_BACKWARD;
          sum[b ? 2 : 0] += in->flops;
          sum[b ? 3 : 1] += in->bytes;
          CHECK (in->recompute == (b && mp_cost_layer_recomputes (ctx, cfg, in->layer)),
                 "insn %u: recompute %d", i, in->recompute);
          CHECK (in->n_layers == 1 && in->peer == -1 && in->stream == MP_STREAM_COMPUTE,
                 "insn %u", i);
        }
      if (in->kind == MP_INSN_SEND && !(in->tag & 1) && p->vpp == 1)
        CHECK (in->bytes == st->p2p_bytes, "send of %g bytes; the cost model's p2p_bytes "
               "is %g", in->bytes, st->p2p_bytes);
    }
  double m = cfg->num_micro_batches;
  mp_assert_close (sum[0], m * st->fwd.flops, 1e-9);
  mp_assert_close (sum[1], m * st->fwd.bytes, 1e-9);
  mp_assert_close (sum[2], m * st->bwd.flops, 1e-9);
  mp_assert_close (sum[3], m * st->bwd.bytes, 1e-9);
}

/* ---- a whole plan ----------------------------------------------------------------------- */

static guint n_checked;

/* Every check on PLAN: all ranks' programs when the world is small (16 ranks), else the
 * stage programs (the other ranks are symmetric). */
static void
check_plan (const MpCostContext *ctx, const MpPlan *plan)
{
  const MpModel *model = mp_cost_context_model (ctx);
  describe (model, &plan->cfg);
  gboolean all = plan->world_size <= 16;
  g_autoptr(GPtrArray) progs = build (ctx, plan, all);
  check_pairing (progs);
  check_runs (plan, progs, model->n_layers);
  g_autofree MpStageTime *st = g_new (MpStageTime, plan->cfg.pp);
  mp_cost_stage_times (ctx, &plan->cfg, st);
  for (guint k = 0; k < progs->len; k++)
    {
      const MpProgram *p = progs->pdata[k];
      check_counts (plan, p);
      check_buckets (ctx, plan, p, &st[p->stage]);
      check_end (ctx, plan, p);
      check_gathers (ctx, plan, p);
      check_costs (ctx, plan, p, &st[p->stage]);
    }
  if (all)
    {
      /* The stage programs are those ranks' programs. */
      g_autoptr(GPtrArray) stages = build (ctx, plan, FALSE);
      for (guint s = 0; s < stages->len; s++)
        {
          const MpProgram *a = stages->pdata[s];
          const MpProgram *b = progs->pdata[a->rank];
          CHECK (a->n_insns == b->n_insns
                 && memcmp (a->insns, b->insns, a->n_insns * sizeof *a->insns) == 0,
                 "stage program %u differs from rank %u's", s, a->rank);
        }
    }
  n_checked++;
}

/* Evaluates CFG with its global batch; NULL (and no failure) when the config is not a
 * valid plan for the model and cluster. Caller owns. */
static MpPlan *
try_plan (const MpCostContext *ctx, const MpParallelConfig *cfg)
{
  MpPlan *plan = g_new0 (MpPlan, 1);
  guint batch = cfg->dp * cfg->micro_batch_size * cfg->num_micro_batches;
  if (!mp_plan_evaluate (ctx, cfg, batch, plan, NULL))
    {
      g_free (plan);
      return NULL;
    }
  return plan;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void
test_program_rank_coords (void **state)
{
  (void) state;
  const MpParallelDim orders[][MP_DIM_N] = {
    { MP_DIM_TP, MP_DIM_CP, MP_DIM_DP, MP_DIM_PP }, { MP_DIM_TP, MP_DIM_CP, MP_DIM_PP, MP_DIM_DP },
    { MP_DIM_PP, MP_DIM_DP, MP_DIM_CP, MP_DIM_TP }, { MP_DIM_DP, MP_DIM_TP, MP_DIM_PP, MP_DIM_CP },
  };
  for (gsize o = 0; o < G_N_ELEMENTS (orders); o++)
    {
      MpParallelConfig cfg;
      mp_parallel_config_init (&cfg);
      cfg.tp = 2, cfg.cp = 3, cfg.dp = 4, cfg.pp = 5;
      memcpy (cfg.order, orders[o], sizeof cfg.order);
      guint world = 2 * 3 * 4 * 5;
      g_autofree gboolean *seen = g_new0 (gboolean, world);
      for (guint r = 0; r < world; r++)
        {
          guint tp, cp, dp, pp;
          mp_plan_rank_coords (&cfg, r, &tp, &cp, &dp, &pp);
          assert_true (tp < 2 && cp < 3 && dp < 4 && pp < 5);
          assert_int_equal (mp_plan_rank_of (&cfg, tp, cp, dp, pp), r);
          guint c[MP_DIM_N] = { tp, cp, dp, pp }, size[MP_DIM_N] = { 2, 3, 4, 5 };
          guint key = 0;
          for (int d = 0; d < MP_DIM_N; d++)
            key = key * size[d] + c[d];
          assert_false (seen[key]);
          seen[key] = TRUE;
          /* Innermost first: the first dimension of the order varies fastest. */
          guint first = orders[o][0];
          assert_int_equal (c[first], r % size[first]);
        }
    }
  /* The default (a zeroed order too): Megatron's tp, cp, dp, pp. */
  MpParallelConfig cfg;
  memset (&cfg, 0, sizeof cfg);
  cfg.tp = 2, cfg.cp = 1, cfg.dp = 2, cfg.pp = 2;
  guint tp, cp, dp, pp;
  mp_plan_rank_coords (&cfg, 5, &tp, &cp, &dp, &pp);
  assert_int_equal (tp, 1);
  assert_int_equal (dp, 0);
  assert_int_equal (pp, 1);
}

/* The (F or B, chunk, micro-batch) steps of P as "F0.1 B1.0 ...": chunk index on the
 * stage, micro-batch. */
static char *
steps_text (const MpProgram *p, const MpPlan *plan)
{
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < p->n_insns; i++)
    {
      const MpInsn *in = &p->insns[i];
      guint first = chunk_first (plan, in->chunk);
      gboolean f = in->kind == MP_INSN_FORWARD && in->layer == first;
      gboolean b = in->kind == MP_INSN_BACKWARD && in->layer == first;
      if (f || b)
        g_string_append_printf (s, "%s%c%u.%u", s->len ? " " : "", f ? 'F' : 'B',
                                in->chunk / plan->cfg.pp, in->micro_batch);
    }
  return g_string_free (s, FALSE);
}

static void
expect_steps (const MpCostContext *ctx, MpParallelConfig *cfg, guint stage, const char *want)
{
  g_autoptr(MpPlan) plan = try_plan (ctx, cfg);
  assert_non_null (plan);
  g_autoptr(MpProgram) p = mp_program_build (ctx, plan, mp_plan_rank_of (cfg, 0, 0, 0, stage));
  g_autofree char *got = steps_text (p, plan);
  assert_string_equal (got, want);
}

/* The schedules' orders, written out (Megatron's for 1F1B and interleaved). */
static void
test_program_schedules (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("tiny-gpt", "dgx-a100-80g:1");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.pp = 2;
  cfg.num_micro_batches = 4;
  cfg.schedule = MP_SCHEDULE_GPIPE;
  expect_steps (e->ctx, &cfg, 0, "F0.0 F0.1 F0.2 F0.3 B0.0 B0.1 B0.2 B0.3");
  cfg.schedule = MP_SCHEDULE_NONE;
  expect_steps (e->ctx, &cfg, 1, "F0.0 B0.0 F0.1 B0.1 F0.2 B0.2 F0.3 B0.3");
  cfg.schedule = MP_SCHEDULE_1F1B;
  cfg.pp = 4;
  /* Stage 0 of 4: three warm-up forwards; the last stage none. */
  expect_steps (e->ctx, &cfg, 0, "F0.0 F0.1 F0.2 F0.3 B0.0 B0.1 B0.2 B0.3");
  cfg.num_micro_batches = 6;
  expect_steps (e->ctx, &cfg, 0, "F0.0 F0.1 F0.2 F0.3 B0.0 F0.4 B0.1 F0.5 B0.2 B0.3 B0.4 B0.5");
  expect_steps (e->ctx, &cfg, 3, "F0.0 B0.0 F0.1 B0.1 F0.2 B0.2 F0.3 B0.3 F0.4 B0.4 F0.5 B0.5");
  /* Interleaved, p = 2, v = 2, m = 4: stage 0 warms up with 2 (p - 1) + (v - 1) p = 4. */
  cfg.pp = 2;
  cfg.vpp = 2;
  cfg.num_micro_batches = 4;
  cfg.schedule = MP_SCHEDULE_INTERLEAVED;
  expect_steps (e->ctx, &cfg, 0, "F0.0 F0.1 F1.0 F1.1 F0.2 B1.0 F0.3 B1.1 F1.2 B0.0 F1.3 "
                                 "B0.1 B1.2 B1.3 B0.2 B0.3");
  expect_steps (e->ctx, &cfg, 1, "F0.0 F0.1 F1.0 B1.0 F1.1 B1.1 F0.2 B0.0 F0.3 B0.1 F1.2 "
                                 "B1.2 F1.3 B1.3 B0.2 B0.3");
}

/* Buckets of a known size: with one block's gradients per bucket, the head rides with the
 * last block, and each bucket is reduced right after its lowest layer's last backward. */
static void
test_program_buckets (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("tiny-gpt", "dgx-a100-80g:1");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.dp = 2;
  cfg.num_micro_batches = 3;
  double dense, expert;
  mp_cost_layer_params (e->ctx, &cfg, 1, &dense, &expert);
  cfg.bucket_bytes = dense * mp_cost_grad_bytes (e->ctx, &cfg);
  g_autoptr(MpPlan) plan = try_plan (e->ctx, &cfg);
  g_autoptr(MpProgram) p = mp_program_build (e->ctx, plan, 1);
  /* embedding, block.0-3, head: buckets [block.3, head], block.2, .1, .0, embedding. */
  const guint want_lo[] = { 4, 3, 2, 1, 0 }, want_n[] = { 2, 1, 1, 1, 1 };
  guint k = 0;
  for (guint i = 0; i < p->n_insns; i++)
    {
      const MpInsn *in = &p->insns[i];
      if (in->kind != MP_INSN_REDUCE_GRADS)
        continue;
      assert_true (k < G_N_ELEMENTS (want_lo));
      assert_int_equal (in->bucket, k);
      assert_int_equal (in->layer, want_lo[k]);
      assert_int_equal (in->n_layers, want_n[k]);
      assert_int_equal (in->coll, MP_COLL_ALL_REDUCE);
      const MpInsn *before = &p->insns[i - 1];
      assert_int_equal (before->kind, MP_INSN_BACKWARD);
      assert_int_equal (before->layer, want_lo[k]);
      assert_int_equal (before->micro_batch, 2);
      k++;
    }
  assert_int_equal (k, G_N_ELEMENTS (want_lo));
  describe (e->model, &plan->cfg);
  check_plan (e->ctx, plan);
}

/* The ZeRO tests' config: dp 4, two micro-batches, one bucket per layer. */
static void
zero_config (MpParallelConfig *cfg)
{
  mp_parallel_config_init (cfg);
  cfg->dp = 4;
  cfg->num_micro_batches = 2;
  cfg->bucket_bytes = 1;
}

/* ZeRO: 1 reduce-scatters once, 2 every micro-batch, both gather after the optimizer; 3
 * gathers each layer one ahead of its forward and its backward and reduce-scatters every
 * micro-batch. */
static void
test_program_zero (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("tiny-gpt", "dgx-a100-80g:1");
  MpParallelConfig cfg;
  zero_config (&cfg);
  for (guint zero = 0; zero <= 3; zero++)
    {
      cfg.zero = zero;
      g_autoptr(MpPlan) plan = try_plan (e->ctx, &cfg);
      g_autoptr(MpProgram) p = mp_program_build (e->ctx, plan, 0);
      guint n_layers = e->model->n_layers, reduces = 0, gathers = 0;
      for (guint i = 0; i < p->n_insns; i++)
        {
          reduces += p->insns[i].kind == MP_INSN_REDUCE_GRADS;
          gathers += p->insns[i].kind == MP_INSN_GATHER_PARAMS;
        }
      assert_int_equal (reduces, zero >= 2 ? 2 * n_layers : n_layers);
      assert_int_equal (gathers, zero == 3 ? 2 * 2 * n_layers : zero >= 1 ? n_layers : 0);
      if (zero == 3)
        {
          /* gather(embedding), gather(block.0), forward(embedding), gather(block.1) ... */
          assert_int_equal (p->insns[0].kind, MP_INSN_GATHER_PARAMS);
          assert_int_equal (p->insns[0].layer, 0);
          assert_int_equal (p->insns[1].kind, MP_INSN_GATHER_PARAMS);
          assert_int_equal (p->insns[1].layer, 1);
          assert_int_equal (p->insns[2].kind, MP_INSN_FORWARD);
          assert_int_equal (p->insns[2].layer, 0);
        }
      describe (e->model, &plan->cfg);
      check_plan (e->ctx, plan);
    }
}

/* torchtitan's root FSDP unit (fsdp20, mp_parallel_config_fsdp_root): under ZeRO-3 the
 * embedding and the head are gathered once per micro-batch, together, before its first
 * forward (the head before the embedding, on which the forward waits), never in
 * backward, and their gradients reduce-scattered after the micro-batch's last backward;
 * the blocks as for every stack. Under pytorch (FSDP2 too, but its own wrapping) the head
 * is gathered again before its backward and reduced right after it. */
static void
test_program_fsdp_root (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("tiny-gpt", "dgx-a100-80g:1");
  guint n = e->model->n_layers, head = n - 1;
  MpParallelConfig cfg;
  zero_config (&cfg);
  cfg.zero = 3;
  for (int k = 0; k < 2; k++)
    {
      cfg.stack = k ? MP_STACK_PYTORCH : MP_STACK_TORCHTITAN;
      g_autoptr(MpPlan) plan = try_plan (e->ctx, &cfg);
      g_autoptr(MpProgram) p = mp_program_build (e->ctx, plan, 0);
      guint head_gathers = 0, late = 0, reduces = 0, blocks = 0;
      gint first_compute = -1, head_gather = -1, emb_gather = -1;
      const MpInsn *last = NULL;   /* the last forward or backward so far */
      for (guint i = 0; i < p->n_insns; i++)
        {
          const MpInsn *in = &p->insns[i];
          if (in->kind == MP_INSN_FORWARD || in->kind == MP_INSN_BACKWARD)
            {
              first_compute = first_compute < 0 ? (gint) i : first_compute;
              last = in;
            }
          if (in->kind == MP_INSN_GATHER_PARAMS && in->layer == head)
            {
              head_gathers++;
              head_gather = head_gather < 0 ? (gint) i : head_gather;
            }
          if (in->kind == MP_INSN_GATHER_PARAMS && in->layer == 0 && emb_gather < 0)
            emb_gather = (gint) i;
          if (in->kind == MP_INSN_GATHER_PARAMS && in->layer > 0 && in->layer < head)
            blocks++;
          /* the head's reduce-scatter: after the embedding's backward, or its own */
          if (in->kind == MP_INSN_REDUCE_GRADS && in->layer + in->n_layers > head)
            {
              reduces++;
              late += last && last->kind == MP_INSN_BACKWARD && last->layer == 0;
            }
        }
      assert_int_equal (reduces, cfg.num_micro_batches);
      assert_int_equal (blocks, 2 * cfg.num_micro_batches * (n - 2));
      if (k == 0)
        {
          assert_int_equal (head_gathers, cfg.num_micro_batches);
          assert_true (head_gather >= 0 && head_gather < emb_gather
                       && emb_gather < first_compute);
          assert_int_equal (late, reduces);
        }
      else
        {
          assert_int_equal (head_gathers, 2 * cfg.num_micro_batches);
          assert_true (head_gather > first_compute);
          assert_int_equal (late, 0);
        }
      check_plan (e->ctx, plan);
    }
}

/* HSDP (fsdp17): zero_shard = dp builds the plain program; zero_shard = 2 of dp = 4 adds
 * one all-reduce per dense bucket over the replicate group after its last micro-batch's
 * reduce-scatter; reshard_after_forward = False gathers only in forward. */
static void
test_program_hsdp (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("tiny-gpt", "dgx-a100-80g:1");
  MpParallelConfig cfg;
  zero_config (&cfg);
  guint n_layers = e->model->n_layers;
  for (guint zero = 1; zero <= 3; zero++)
    {
      cfg.zero = zero;
      cfg.zero_shard = 0;
      cfg.no_reshard = FALSE;
      g_autoptr(MpPlan) plain = try_plan (e->ctx, &cfg);
      g_autoptr(MpProgram) p0 = mp_program_build (e->ctx, plain, 0);
      cfg.zero_shard = 4;
      g_autoptr(MpPlan) whole = try_plan (e->ctx, &cfg);
      g_autoptr(MpProgram) p1 = mp_program_build (e->ctx, whole, 0);
      assert_int_equal (p0->n_insns, p1->n_insns);
      for (guint i = 0; i < p0->n_insns; i++)
        {
          const MpInsn *a = &p0->insns[i], *b = &p1->insns[i];
          assert_true (a->kind == b->kind && a->layer == b->layer && a->group == b->group
                       && a->coll == b->coll && a->bytes == b->bytes
                       && a->micro_batch == b->micro_batch);
        }
      for (guint keep = 0; keep < (zero == 3 ? 2u : 1u); keep++)
        {
          cfg.zero_shard = 2;
          cfg.no_reshard = keep;
          g_autoptr(MpPlan) plan = try_plan (e->ctx, &cfg);
          g_autoptr(MpProgram) p = mp_program_build (e->ctx, plan, 0);
          /* a gather is for the pass of the next compute after it */
          guint rep = 0, shard_reduces = 0, gathers = 0, bwd_gathers = 0, pending = 0;
          for (guint i = 0; i < p->n_insns; i++)
            {
              const MpInsn *in = &p->insns[i];
              rep += in->kind == MP_INSN_REDUCE_GRADS && in->group == MP_GROUP_DP_REP;
              shard_reduces += in->kind == MP_INSN_REDUCE_GRADS && in->group == MP_GROUP_DP;
              gathers += in->kind == MP_INSN_GATHER_PARAMS && zero == 3;
              pending += in->kind == MP_INSN_GATHER_PARAMS && zero == 3;
              if (in->kind == MP_INSN_FORWARD || in->kind == MP_INSN_BACKWARD)
                {
                  bwd_gathers += in->kind == MP_INSN_BACKWARD ? pending : 0;
                  pending = 0;
                }
            }
          assert_int_equal (rep, n_layers);
          assert_int_equal (shard_reduces, zero >= 2 ? 2 * n_layers : n_layers);
          if (zero == 3)
            {
              assert_int_equal (gathers, (keep ? 1 : 2) * 2 * n_layers);
              assert_true (keep ? bwd_gathers == 0 : bwd_gathers > 0);
            }
          describe (e->model, &plan->cfg);
          check_plan (e->ctx, plan);
        }
    }
}

/* Tied embeddings: both ends all-reduce the same bytes, after their buckets; untied
 * models and pp = 1 don't. */
static void
test_program_tied (void **state)
{
  (void) state;
  const char *models[] = { "tiny-gpt", "llama3-8b" };
  for (gsize mi = 0; mi < G_N_ELEMENTS (models); mi++)
    {
      g_autoptr(Env) e = env_new (models[mi], "dgx-a100-80g:1");
      for (guint pp = 1; pp <= 4; pp *= 2)
        {
          MpParallelConfig cfg;
          mp_parallel_config_init (&cfg);
          cfg.pp = pp;
          cfg.dp = 2;
          cfg.num_micro_batches = 4;
          g_autoptr(MpPlan) plan = try_plan (e->ctx, &cfg);
          guint n = 0;
          MpProgram **stages = mp_program_build_stages (e->ctx, plan, &n);
          double bytes[2] = { 0, 0 };
          for (guint s = 0; s < n; s++)
            for (guint i = 0; i < stages[s]->n_insns; i++)
              if (stages[s]->insns[i].kind == MP_INSN_REDUCE_TIED)
                {
                  assert_true (s == 0 || s == n - 1);
                  bytes[s != 0] = stages[s]->insns[i].bytes;
                }
          gboolean tied = e->model->tied_embeddings && pp > 1;
          assert_true (tied ? bytes[0] > 0 && bytes[0] == bytes[1] : bytes[0] + bytes[1] == 0);
          mp_program_stages_free (stages);
          describe (e->model, &plan->cfg);
          check_plan (e->ctx, plan);
        }
    }
}

/* MoE: expert gradients go in their own buckets over dp * cp / ep ranks. */
static void
test_program_experts (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("mixtral-8x7b", "dgx-h100:2");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.dp = 4;
  cfg.ep = 2;
  cfg.pp = 2;
  cfg.tp = 2;
  cfg.num_micro_batches = 2;
  g_autoptr(MpPlan) plan = try_plan (e->ctx, &cfg);
  assert_non_null (plan);
  g_autoptr(MpProgram) p = mp_program_build (e->ctx, plan, 0);
  double by_group[MP_GROUP_N] = { 0 };
  for (guint i = 0; i < p->n_insns; i++)
    if (p->insns[i].kind == MP_INSN_REDUCE_GRADS)
      by_group[p->insns[i].group] += p->insns[i].bytes;
  assert_true (by_group[MP_GROUP_DP] > 0 && by_group[MP_GROUP_EDP] > by_group[MP_GROUP_DP]);
  check_plan (e->ctx, plan);
  /* ep = dp * cp: every expert on one rank, nothing to reduce. */
  cfg.ep = 4;
  g_autoptr(MpPlan) all_ep = try_plan (e->ctx, &cfg);
  assert_non_null (all_ep);
  g_autoptr(MpProgram) q = mp_program_build (e->ctx, all_ep, 0);
  for (guint i = 0; i < q->n_insns; i++)
    assert_true (q->insns[i].group != MP_GROUP_EDP);
  check_plan (e->ctx, all_ep);
}

/* Megatron's --recompute-method block --recompute-num-layers 1: only the first block of
 * each chunk is marked, and the programs' FLOPs still add up to the stage figures. */
static void
test_program_recompute_first_n (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("gpt3-125m", "dgx-a100-80g:1");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.pp = 2;
  cfg.vpp = 2;
  cfg.schedule = MP_SCHEDULE_INTERLEAVED;
  cfg.num_micro_batches = 4;
  cfg.recompute = MP_RECOMPUTE_FULL;
  cfg.recompute_num_layers = 1;
  g_autoptr(MpPlan) plan = try_plan (e->ctx, &cfg);
  assert_non_null (plan);
  check_plan (e->ctx, plan);
  guint first[4], marked = 0;
  for (guint c = 0, at = 0; c < 4; at += plan->chunk_layers[c], c++)
    first[c] = at + (c == 0);                 /* chunk 0 starts with the embedding */
  for (guint s = 0; s < 2; s++)
    {
      g_autoptr(MpProgram) p = mp_program_build (e->ctx, plan, s);
      for (guint i = 0; i < p->n_insns; i++)
        {
          const MpInsn *in = &p->insns[i];
          if (in->kind != MP_INSN_BACKWARD)
            continue;
          assert_int_equal (in->recompute, in->layer == first[in->chunk]);
          marked += in->recompute;
        }
    }
  assert_int_equal (marked, 4 * cfg.num_micro_batches);
}

/* The symbolic run has teeth: a last stage that holds back its first gradient send until
 * the end of its program deadlocks 1F1B. */
static void
test_program_deadlock_found (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("tiny-gpt", "dgx-a100-80g:1");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.pp = 2;
  cfg.num_micro_batches = 4;
  g_autoptr(MpPlan) plan = try_plan (e->ctx, &cfg);
  describe (e->model, &plan->cfg);
  g_autoptr(GPtrArray) progs = build (e->ctx, plan, TRUE);
  g_autofree char *why = NULL;
  assert_true (run_programs (plan, progs, e->model->n_layers, &why));
  MpProgram *last = progs->pdata[1];
  guint i = 0;
  while (!(last->insns[i].kind == MP_INSN_SEND && (last->insns[i].tag & 1)))
    i++;
  MpInsn send = last->insns[i];
  memmove (&last->insns[i], &last->insns[i + 1], (last->n_insns - i - 1) * sizeof send);
  last->insns[last->n_insns - 1] = send;
  assert_false (run_programs (plan, progs, e->model->n_layers, &why));
  assert_non_null (strstr (why, "deadlock"));
}

typedef struct {
  guint dp, tp, pp, cp, ep;
} Shape;

/* Every schedule on many shapes of several zoo models, with ZeRO, recompute, sequence
 * parallelism, rank orders, bucket sizes and fp32 gradients varied along. */
static void
test_program_grid (void **state)
{
  (void) state;
  const char *models[] = { "tiny-gpt", "gpt3-125m", "mlp-1024", "llama3-8b", "mixtral-8x7b" };
  const Shape shapes[] = {
    { 1, 1, 1, 1, 1 }, { 2, 1, 1, 1, 1 }, { 1, 2, 1, 1, 1 }, { 1, 1, 2, 1, 1 },
    { 1, 1, 3, 1, 1 }, { 1, 1, 4, 1, 1 }, { 2, 2, 2, 1, 1 }, { 2, 1, 4, 1, 1 },
    { 1, 2, 4, 1, 1 }, { 4, 1, 2, 1, 1 }, { 2, 1, 2, 2, 1 }, { 1, 1, 2, 2, 1 },
    { 4, 1, 1, 1, 2 }, { 2, 1, 2, 1, 2 }, { 2, 2, 2, 2, 2 }, { 8, 1, 2, 1, 4 },
  };
  const MpSchedule schedules[] = { MP_SCHEDULE_1F1B, MP_SCHEDULE_GPIPE, MP_SCHEDULE_NONE,
                                   MP_SCHEDULE_INTERLEAVED, MP_SCHEDULE_INTERLEAVED };
  const guint micro_batches[] = { 1, 2, 3, 4, 8 };
  const double buckets[] = { 0, 1 << 20, 16 << 20 };
  const MpParallelDim alt_order[MP_DIM_N] = { MP_DIM_TP, MP_DIM_CP, MP_DIM_PP, MP_DIM_DP };
  guint variant = 0, before = n_checked;
  for (gsize mi = 0; mi < G_N_ELEMENTS (models); mi++)
    {
      g_autoptr(Env) e = env_new (models[mi], "dgx-a100-80g:2");
      for (gsize si = 0; si < G_N_ELEMENTS (shapes); si++)
        for (gsize ci = 0; ci < G_N_ELEMENTS (schedules); ci++)
          for (gsize bi = 0; bi < G_N_ELEMENTS (micro_batches); bi++, variant++)
            {
              const Shape *sh = &shapes[si];
              MpParallelConfig cfg;
              mp_parallel_config_init (&cfg);
              cfg.dp = sh->dp, cfg.tp = sh->tp, cfg.pp = sh->pp, cfg.cp = sh->cp;
              cfg.ep = sh->ep;
              cfg.schedule = schedules[ci];
              cfg.vpp = cfg.schedule == MP_SCHEDULE_INTERLEAVED ? 2 + (ci == 4) : 1;
              cfg.num_micro_batches = micro_batches[bi];
              cfg.zero = variant % 4;
              cfg.recompute = (MpRecompute) (variant / 4 % 3);
              cfg.sequence_parallel = cfg.tp > 1 && variant % 2;
              cfg.bucket_bytes = buckets[variant % 3];
              cfg.fp32_grads = variant % 7 == 0;
              if (variant % 5 == 0)
                memcpy (cfg.order, alt_order, sizeof cfg.order);
              g_autoptr(MpPlan) plan = try_plan (e->ctx, &cfg);
              if (plan)
                check_plan (e->ctx, plan);
            }
    }
  print_message ("# %u plans checked over the grid\n", n_checked - before);
  assert_true (n_checked - before > 500);
}

/* The best plans of real searches (every family the planner emits). */
static void
test_program_searched (void **state)
{
  (void) state;
  const struct { const char *model, *cluster; guint batch, k; } cases[] = {
    { "gpt3-1.3b", "dgx-a100-80g:2", 64, 150 },
    { "llama3-8b", "dgx-h100:2", 32, 100 },
    { "mixtral-8x7b", "dgx-h100:4", 64, 100 },
    { "gpt2-124m", "workstation-pcie4", 16, 100 },
    { "gpt3-13b", "dgx-a100-80g:4", 32, 60 },
  };
  guint before = n_checked;
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(Env) e = env_new (cases[i].model, cases[i].cluster);
      MpSearchOptions opts = { .global_batch = cases[i].batch, .top_k = cases[i].k };
      g_autoptr(GError) error = NULL;
      g_autoptr(MpSearchResult) res = mp_planner_search (e->ctx, &opts, &error);
      if (res == NULL)
        fail_msg ("search %s: %s", cases[i].model, error->message);
      assert_true (res->plans->len > 0);
      for (guint k = 0; k < res->plans->len; k++)
        check_plan (e->ctx, g_ptr_array_index (res->plans, k));
      for (int f = 0; f < MP_FAMILY_N; f++)
        if (res->stats.family_best[f])
          check_plan (e->ctx, res->stats.family_best[f]);
    }
  print_message ("# %u searched plans checked\n", n_checked - before);
}

/* A large plan's stage programs, as the simulator gets them. */
static void
test_program_large (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("gpt3-175b", "dgx-a100-80g:128");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.tp = 8, cfg.pp = 16, cfg.dp = 8, cfg.vpp = 3;
  cfg.schedule = MP_SCHEDULE_INTERLEAVED;
  cfg.num_micro_batches = 64;
  cfg.zero = 1;
  cfg.recompute = MP_RECOMPUTE_SELECTIVE;
  cfg.sequence_parallel = TRUE;
  g_autoptr(MpPlan) plan = try_plan (e->ctx, &cfg);
  assert_non_null (plan);
  check_plan (e->ctx, plan);
}

/* The listing: a header, then one line per instruction; the JSON object: one entry per
 * instruction with the keys of its kind. */
static void
test_program_print (void **state)
{
  (void) state;
  g_autoptr(Env) e = env_new ("tiny-gpt", "dgx-a100-80g:1");
  MpParallelConfig cfg;
  mp_parallel_config_init (&cfg);
  cfg.pp = 2, cfg.dp = 2, cfg.num_micro_batches = 2, cfg.zero = 1;
  g_autoptr(MpPlan) plan = try_plan (e->ctx, &cfg);
  /* Default order tp, cp, dp, pp: rank 2 is dp 0 of stage 1. */
  g_autoptr(MpProgram) p = mp_program_build (e->ctx, plan, 2);
  g_autofree char *text = mp_program_text (p, e->model);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  assert_true (g_str_has_prefix (lines[0], "Program of rank 2: tp 0, cp 0, dp 0, pp 1 "));
  assert_non_null (strstr (lines[1], "1f1b"));
  assert_int_equal (g_strv_length (lines), 4 + p->n_insns + 1);   /* + the empty last */
  assert_non_null (strstr (text, "block.2"));
  assert_non_null (strstr (text, "reduce_scatter over dp"));
  assert_non_null (strstr (text, "all_reduce over pp_ends"));
  for (guint i = 0; lines[i]; i++)
    assert_false (g_str_has_suffix (lines[i], " "));

  g_autoptr(JsonNode) root = mp_program_to_json (p, e->model);
  JsonObject *o = json_node_get_object (root);
  assert_int_equal (json_object_get_int_member (o, "rank"), 2);
  assert_int_equal (json_object_get_int_member (o, "stage"), 1);
  assert_string_equal (json_object_get_string_member (o, "schedule"), "1f1b");
  JsonArray *insns = json_object_get_array_member (o, "instructions");
  assert_int_equal (json_array_get_length (insns), p->n_insns);
  for (guint i = 0; i < p->n_insns; i++)
    {
      JsonObject *io = json_array_get_object_element (insns, i);
      const char *kind = json_object_get_string_member (io, "kind");
      assert_string_equal (kind, mp_insn_kind_name (p->insns[i].kind));
      if (p->insns[i].kind == MP_INSN_SEND)
        assert_int_equal (json_object_get_int_member (io, "peer"), p->insns[i].peer);
      if (p->insns[i].kind == MP_INSN_BACKWARD)
        assert_true (json_object_has_member (io, "recompute")
                     && json_object_has_member (io, "flops"));
      if (p->insns[i].kind == MP_INSN_REDUCE_GRADS)
        assert_string_equal (json_object_get_string_member (io, "group"), "dp");
    }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_program_rank_coords),
    cmocka_unit_test (test_program_schedules),
    cmocka_unit_test (test_program_buckets),
    cmocka_unit_test (test_program_zero),
    cmocka_unit_test (test_program_hsdp),
    cmocka_unit_test (test_program_fsdp_root),
    cmocka_unit_test (test_program_tied),
    cmocka_unit_test (test_program_experts),
    cmocka_unit_test (test_program_recompute_first_n),
    cmocka_unit_test (test_program_deadlock_found),
    cmocka_unit_test (test_program_grid),
    cmocka_unit_test (test_program_searched),
    cmocka_unit_test (test_program_large),
    cmocka_unit_test (test_program_print),
  };
  return cmocka_run_group_tests_name ("program", tests, NULL, NULL);
}
