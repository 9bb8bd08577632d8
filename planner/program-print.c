/* program-print.c - a rank's program for people (`mpplan program`) and as JSON.
 *
 * One line (or object) per instruction with what it works on: the layer and micro-batch
 * of a forward or backward, the peer and tag of a send or receive, the collective, group
 * and layers of a gradient bucket or a gather. Units: human in the text, SI in JSON. */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "common/output.h"
#include "planner/planner.h"

#include <string.h>

static const char *
layer_name (const MpModel *model, guint layer)
{
  return model && layer < model->n_layers ? model->layers[layer].name : "?";
}

static gboolean
is_compute (const MpInsn *i)
{
  return i->kind == MP_INSN_FORWARD || i->kind == MP_INSN_BACKWARD;
}

static gboolean
is_p2p (const MpInsn *i)
{
  return i->kind == MP_INSN_SEND || i->kind == MP_INSN_RECV;
}

static gboolean
is_collective (const MpInsn *i)
{
  return i->kind == MP_INSN_REDUCE_GRADS || i->kind == MP_INSN_GATHER_PARAMS
         || i->kind == MP_INSN_REDUCE_TIED;
}

/* The layers column: one name, or "first..last" for a bucket or gather of several. */
static char *
layers_text (const MpInsn *i, const MpModel *model)
{
  if (is_collective (i) && i->n_layers > 1)
    return g_strdup_printf ("%s..%s", layer_name (model, i->layer),
                            layer_name (model, i->layer + i->n_layers - 1));
  if (is_compute (i) || is_p2p (i) || is_collective (i))
    return g_strdup (layer_name (model, i->layer));
  return g_strdup ("");
}

/* The detail column: peer and tag, collective and group, or what is waited for. */
static char *
detail_text (const MpInsn *i)
{
  switch (i->kind)
    {
    case MP_INSN_SEND:
      return g_strdup_printf ("to %d, tag %u", i->peer, i->tag);
    case MP_INSN_RECV:
      return g_strdup_printf ("from %d, tag %u", i->peer, i->tag);
    case MP_INSN_BACKWARD:
      return g_strdup (i->recompute ? "recompute" : "");
    case MP_INSN_REDUCE_GRADS:
      return g_strdup_printf ("bucket %u, %s over %s", i->bucket, mp_coll_kind_name (i->coll),
                              mp_comm_group_name (i->group));
    case MP_INSN_GATHER_PARAMS:
    case MP_INSN_REDUCE_TIED:
      return g_strdup_printf ("%s over %s", mp_coll_kind_name (i->coll),
                              mp_comm_group_name (i->group));
    case MP_INSN_WAIT:
      return g_strdup_printf ("for the %s stream", mp_stream_name (i->stream));
    case MP_INSN_FORWARD:
    case MP_INSN_OPTIMIZER:
    default:
      return g_strdup ("");
    }
}

static void
append_line (GString *s, const MpInsn *i, guint index, const MpModel *model)
{
  g_autofree char *chunk = is_compute (i) || is_p2p (i) ? g_strdup_printf ("%u", i->chunk)
                                                        : g_strdup ("");
  g_autofree char *mb = is_compute (i) || is_p2p (i) ? g_strdup_printf ("%u", i->micro_batch)
                                                     : g_strdup ("");
  g_autofree char *layers = layers_text (i, model);
  g_autofree char *detail = detail_text (i);
  g_autofree char *bytes = i->bytes > 0 ? mp_units_format (i->bytes, MP_UNIT_BYTES)
                                        : g_strdup ("");
  g_autofree char *flops = i->flops > 0 ? mp_units_format (i->flops, MP_UNIT_COUNT)
                                        : g_strdup ("");
  gsize start = s->len;
  g_string_append_printf (s, "%6u  %-7s  %-13s %5s  %-20s %4s  %-34s %10s %8s", index,
                          mp_stream_name (i->stream), mp_insn_kind_name (i->kind), chunk,
                          layers, mb, detail, bytes, flops);
  /* No trailing blanks when the last columns are empty. */
  while (s->len > start && s->str[s->len - 1] == ' ')
    g_string_truncate (s, s->len - 1);
  g_string_append_c (s, '\n');
}

char *
mp_program_text (const MpProgram *program, const MpModel *model)
{
  g_return_val_if_fail (program != NULL, NULL);
  const MpProgram *p = program;
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "Program of rank %u: tp %u, cp %u, dp %u, pp %u (of %u "
                             "pipeline stages)\n", p->rank, p->tp_rank, p->cp_rank,
                          p->dp_rank, p->stage, p->pp);
  g_string_append_printf (s, "Schedule %s: %u micro-batches, %u model chunk%s per stage; "
                             "%u instructions\n\n", mp_plan_schedule_name (p->schedule),
                          p->n_micro_batches, p->vpp, p->vpp == 1 ? "" : "s", p->n_insns);
  g_string_append_printf (s, "%6s  %-7s  %-13s %5s  %-20s %4s  %-34s %10s %8s\n", "#",
                          "stream", "instruction", "chunk", "layer", "mb",
                          "peer, tag / collective", "bytes", "FLOP");
  for (guint k = 0; k < p->n_insns; k++)
    append_line (s, &p->insns[k], k, model);
  return g_string_free (s, FALSE);
}

/* ---- JSON ------------------------------------------------------------------------------ */

/* One instruction: the keys that mean something for its kind (docs/json.md). */
static void
add_insn (JsonBuilder *b, const MpInsn *i, guint index, const MpModel *model)
{
  json_builder_begin_object (b);
  mp_json_add_int (b, "index", index);
  mp_json_add_string (b, "kind", mp_insn_kind_name (i->kind));
  mp_json_add_string (b, "stream", mp_stream_name (i->stream));
  if (is_compute (i) || is_p2p (i))
    {
      mp_json_add_int (b, "chunk", i->chunk);
      mp_json_add_int (b, "micro_batch", i->micro_batch);
    }
  if (is_compute (i) || is_p2p (i) || is_collective (i))
    {
      mp_json_add_int (b, "layer", i->layer);
      mp_json_add_string (b, "layer_name", layer_name (model, i->layer));
    }
  if (is_collective (i))
    {
      mp_json_add_int (b, "n_layers", i->n_layers);
      mp_json_add_string (b, "coll", mp_coll_kind_name (i->coll));
      mp_json_add_string (b, "group", mp_comm_group_name (i->group));
    }
  if (i->kind == MP_INSN_REDUCE_GRADS)
    mp_json_add_int (b, "bucket", i->bucket);
  if (is_p2p (i))
    {
      mp_json_add_int (b, "peer", i->peer);
      mp_json_add_int (b, "tag", i->tag);
    }
  if (i->kind == MP_INSN_BACKWARD)
    {
      json_builder_set_member_name (b, "recompute");
      json_builder_add_boolean_value (b, i->recompute);
    }
  if (is_compute (i) || is_p2p (i) || is_collective (i))
    mp_json_add_double (b, "bytes", i->bytes);
  if (is_compute (i))
    mp_json_add_double (b, "flops", i->flops);
  json_builder_end_object (b);
}

JsonNode *
mp_program_to_json (const MpProgram *program, const MpModel *model)
{
  g_return_val_if_fail (program != NULL, NULL);
  const MpProgram *p = program;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  mp_json_add_int (b, "schema_version", 1);
  mp_json_add_int (b, "rank", p->rank);
  mp_json_add_int (b, "stage", p->stage);
  mp_json_add_int (b, "tp_rank", p->tp_rank);
  mp_json_add_int (b, "cp_rank", p->cp_rank);
  mp_json_add_int (b, "dp_rank", p->dp_rank);
  mp_json_add_string (b, "schedule", mp_plan_schedule_name (p->schedule));
  mp_json_add_int (b, "pp", p->pp);
  mp_json_add_int (b, "vpp", p->vpp);
  mp_json_add_int (b, "num_micro_batches", p->n_micro_batches);
  json_builder_set_member_name (b, "instructions");
  json_builder_begin_array (b);
  for (guint k = 0; k < p->n_insns; k++)
    add_insn (b, &p->insns[k], k, model);
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}
