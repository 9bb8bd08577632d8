/* sim-cost.c - the simulator's default durations: each instruction of a stage program
 * priced with the same cost-model calls the closed form sums, so that simulation and
 * closed form differ only by the schedule, never by the unit costs.
 *
 * F/B: mp_cost_layer, cached per (stage groups, layer class): stages whose device and
 * tensor-, context- and expert-parallel groups look alike share a row, so a 128-layer,
 * 64-stage plan costs a handful of layers. Collectives: mp_cost_collective over the
 * stage's groups (MpStageSpans), remembered for the last few sizes, since a program
 * repeats the same bucket and activation sizes hundreds of times. Units: seconds. */
#define G_LOG_DOMAIN "mpplan-costmodel"
#include "config.h"
#include "costmodel/costmodel-private.h"

#include <math.h>
#include <string.h>

#define NONE G_MAXUINT
#define MEMO 8

typedef struct {
  const MpGroupSpan *span;
  MpCollKind kind;
  double bytes;
  double time_s;
} Memo;

struct _CmSimCost {
  const MpCostContext *ctx;
  const MpParallelConfig *cfg;
  guint pp, n_classes;
  MpStageSpans *spans;          /* pp; valid where have_spans */
  gboolean *have_spans;
  guint *row;                   /* pp: the stage whose layer costs this one shares */
  MpPhaseCost *layers;          /* [stage][class][fwd, bwd], rows' stages only */
  gboolean *have_layer;         /* [stage][class] */
  MpStageTime *stage_times;     /* pp, computed on first OPTIMIZER */
  GHashTable *pair_spans;       /* "a:b" -> MpGroupSpan*, for p2p between far stages */
  Memo memo[MEMO];
  guint memo_next;
};

CmSimCost *
cm_sim_cost_new (const MpCostContext *ctx, const MpParallelConfig *cfg)
{
  g_return_val_if_fail (ctx != NULL && cfg != NULL && cm_config_sane (cfg), NULL);
  CmSimCost *c = g_new0 (CmSimCost, 1);
  c->ctx = ctx;
  c->cfg = cfg;
  c->pp = cfg->pp;
  c->n_classes = MAX (ctx->n_classes, 1u);
  c->spans = g_new (MpStageSpans, c->pp);
  c->have_spans = g_new0 (gboolean, c->pp);
  c->row = g_new (guint, c->pp);
  for (guint s = 0; s < c->pp; s++)
    c->row[s] = NONE;
  c->layers = g_new (MpPhaseCost, (gsize) 2 * c->pp * c->n_classes);
  c->have_layer = g_new0 (gboolean, (gsize) c->pp * c->n_classes);
  c->pair_spans = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  return c;
}

void
cm_sim_cost_free (CmSimCost *c)
{
  if (c == NULL)
    return;
  g_free (c->spans);
  g_free (c->have_spans);
  g_free (c->row);
  g_free (c->layers);
  g_free (c->have_layer);
  g_free (c->stage_times);
  g_hash_table_unref (c->pair_spans);
  g_free (c);
}

static const MpStageSpans *
spans_of (CmSimCost *c, guint stage)
{
  if (!c->have_spans[stage])
    {
      mp_cost_stage_spans (c->ctx, c->cfg, stage, &c->spans[stage]);
      c->have_spans[stage] = TRUE;
    }
  return &c->spans[stage];
}

static guint
row_of (CmSimCost *c, guint stage)
{
  if (c->row[stage] != NONE)
    return c->row[stage];
  const MpStageSpans *sp = spans_of (c, stage);
  c->row[stage] = stage;
  for (guint s = 0; s < c->pp; s++)
    if (s != stage && c->row[s] == s && cm_same_layer_groups (&c->spans[s], sp))
      {
        c->row[stage] = s;
        break;
      }
  return c->row[stage];
}

/* Forward and backward of LAYER on STAGE ([0] and [1] of the returned pair). */
static const MpPhaseCost *
layer_cost (CmSimCost *c, guint stage, guint layer)
{
  guint row = row_of (c, stage);
  guint id = c->ctx->layers[layer].class_id;
  gsize slot = (gsize) row * c->n_classes + id;
  MpPhaseCost *pair = &c->layers[2 * slot];
  if (!c->have_layer[slot])
    {
      mp_cost_layer (c->ctx, c->cfg, spans_of (c, row), c->ctx->class_first[id], &pair[0],
                     &pair[1]);
      c->have_layer[slot] = TRUE;
    }
  return pair;
}

static double
collective (CmSimCost *c, const MpCostDevice *dev, MpCollKind kind, double bytes,
            const MpGroupSpan *span)
{
  for (guint i = 0; i < MEMO; i++)
    if (c->memo[i].span == span && c->memo[i].kind == kind && c->memo[i].bytes == bytes)
      return c->memo[i].time_s;
  MpCollCost cc;
  mp_cost_collective (c->ctx, dev, kind, bytes, span, MP_ALGO_AUTO, &cc);
  c->memo[c->memo_next] = (Memo) { span, kind, bytes, cc.time_s };
  c->memo_next = (c->memo_next + 1) % MEMO;
  return cc.time_s;
}

/* The group of a p2p between the ranks of PROGRAM and PEER: the closed form's pp_next for
 * neighbours and pp_ends for the first and last stage (the interleaved wrap-around);
 * other pairs are spanned as they are. */
static const MpGroupSpan *
pair_span (CmSimCost *c, const MpProgram *program, const MpProgram *peer)
{
  guint a = MIN (program->stage, peer->stage), b = MAX (program->stage, peer->stage);
  if (b == a + 1)
    return &spans_of (c, a)->pp_next;
  if (a == 0 && b == c->pp - 1)
    return &spans_of (c, 0)->pp_ends;
  g_autofree char *key = g_strdup_printf ("%u:%u", MIN (program->rank, peer->rank),
                                          MAX (program->rank, peer->rank));
  MpGroupSpan *span = g_hash_table_lookup (c->pair_spans, key);
  if (span == NULL)
    {
      const MpCluster *cluster = mp_cost_context_cluster (c->ctx);
      guint ranks[2] = { MIN (program->rank, peer->rank), MAX (program->rank, peer->rank) };
      span = g_new (MpGroupSpan, 1);
      mp_cluster_span (cluster, c->cfg->placement, ranks, 2, span);
      g_hash_table_insert (c->pair_spans, g_steal_pointer (&key), span);
    }
  return span;
}

/* The ranks a collective runs over; without a group, what its kind implies. */
static const MpGroupSpan *
group_of (const MpStageSpans *sp, const MpInsn *insn)
{
  switch (insn->group)
    {
    case MP_GROUP_EDP:
      return &sp->edp;
    case MP_GROUP_PP_ENDS:
      return &sp->pp_ends;
    case MP_GROUP_DP:
      return &sp->dp_shard;       /* HSDP (fsdp17): the shard group; else dp itself */
    case MP_GROUP_DP_REP:
      return &sp->dp_rep;
    case MP_GROUP_NONE:
    case MP_GROUP_N:
    default:
      return insn->kind == MP_INSN_REDUCE_TIED ? &sp->pp_ends : &sp->dp;
    }
}

static double
optimizer_time (CmSimCost *c, guint stage)
{
  if (c->stage_times == NULL)
    {
      c->stage_times = g_new (MpStageTime, c->pp);
      mp_cost_stage_times (c->ctx, c->cfg, c->stage_times);
    }
  return c->stage_times[stage].optimizer_s;
}

static double
collectives_in (const MpPhaseCost *p)
{
  return p->tp_comm_s + p->ep_comm_s + p->cp_comm_s;
}

void
cm_sim_cost (const MpProgram *program, const MpInsn *insn, const MpProgram *peer,
             MpSimCost *out, gpointer data)
{
  CmSimCost *c = data;
  out->time_s = out->comm_s = out->ep_s = out->cp_s = 0;
  /* Out-of-range references price as NaN, which mp_simulate reports. */
  if (program->stage >= c->pp
      || ((insn->kind == MP_INSN_FORWARD || insn->kind == MP_INSN_BACKWARD)
          && insn->layer >= c->ctx->model->n_layers))
    {
      out->time_s = NAN;
      return;
    }
  const MpStageSpans *sp = spans_of (c, program->stage);
  switch (insn->kind)
    {
    case MP_INSN_FORWARD:
      {
        const MpPhaseCost *f = &layer_cost (c, program->stage, insn->layer)[0];
        out->time_s = f->total_s;
        out->comm_s = collectives_in (f);
        out->ep_s = f->ep_comm_s;
        out->cp_s = f->cp_comm_s;   /* cp17 */
      }
      break;
    case MP_INSN_BACKWARD:
      {
        const MpPhaseCost *b = &layer_cost (c, program->stage, insn->layer)[1];
        out->time_s = b->total_s - (insn->recompute ? 0 : b->recompute_s);
        out->comm_s = collectives_in (b);
        out->ep_s = b->ep_comm_s;
        out->cp_s = b->cp_comm_s;   /* cp17 */
      }
      break;
    case MP_INSN_SEND:
      if (peer == NULL || peer->stage >= c->pp)
        out->time_s = NAN;
      else
        out->time_s = collective (c, sp->device, MP_COLL_SEND_RECV, insn->bytes,
                                  pair_span (c, program, peer));
      break;
    case MP_INSN_REDUCE_GRADS:
    case MP_INSN_GATHER_PARAMS:
    case MP_INSN_REDUCE_TIED:
      out->time_s = collective (c, sp->device, insn->coll, insn->bytes, group_of (sp, insn));
      break;
    case MP_INSN_OPTIMIZER:
      out->time_s = optimizer_time (c, program->stage);
      break;
    case MP_INSN_RECV:
    case MP_INSN_WAIT:
    case MP_INSN_N:
    default:
      break;
    }
}
