/* program.c - the names of the plan's vocabulary (phases, memory kinds, collectives,
 * instructions, streams, groups) and freeing a program. Each table is the only place
 * its names are spelled. */
#define G_LOG_DOMAIN "mpplan-program"
#include "config.h"
#include "program/program.h"
#include "common/output.h"

#include <string.h>

/* One name per phase: the time_s keys of every JSON, the rows of every table. */
static const char *const phase_names[MP_PHASE_N] = {
  "compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "bubble", "optimizer"
};

const char *
mp_phase_name (MpPhase phase)
{
  return (guint) phase < MP_PHASE_N ? phase_names[phase] : "?";
}

gboolean
mp_phase_from_name (const char *name, MpPhase *out)
{
  for (int p = 0; name && p < MP_PHASE_N; p++)
    if (strcmp (phase_names[p], name) == 0)
      {
        *out = (MpPhase) p;
        return TRUE;
      }
  return FALSE;
}

MpPhase
mp_step_time_dominant (const MpStepTime *time)
{
  MpPhase best = 0;
  for (int p = 1; p < MP_PHASE_N; p++)
    if (time->t[p] > time->t[best])
      best = (MpPhase) p;
  return best;
}

JsonNode *
mp_step_time_to_json (const MpStepTime *time)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  for (int p = 0; p < MP_PHASE_N; p++)
    mp_json_add_double (b, phase_names[p], time->t[p]);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

void
mp_step_time_add_json (JsonBuilder *b, const char *key, const MpStepTime *time)
{
  json_builder_set_member_name (b, key);
  json_builder_add_value (b, mp_step_time_to_json (time));
}

const char *
mp_mem_kind_name (MpMemKind kind)
{
  static const char *const names[MP_MEM_N] = { "weights", "gradients", "optimizer",
                                               "activations", "other" };
  return (guint) kind < MP_MEM_N ? names[kind] : "?";
}

const char *
mp_coll_kind_name (MpCollKind kind)
{
  static const char *const names[MP_COLL_N] = { "all_reduce", "all_gather",
                                                "reduce_scatter", "all_to_all", "broadcast",
                                                "send_recv" };
  return (guint) kind < MP_COLL_N ? names[kind] : "?";
}


void
mp_program_free (MpProgram *program)
{
  if (program == NULL)
    return;
  g_free (program->insns);
  g_free (program);
}

const char *
mp_insn_kind_name (MpInsnKind kind)
{
  static const char *const names[MP_INSN_N] = {
    "forward", "backward", "send", "recv", "reduce_grads", "gather_params", "reduce_tied",
    "wait", "optimizer"
  };
  return kind < MP_INSN_N ? names[kind] : "?";
}

const char *
mp_stream_name (MpStream stream)
{
  static const char *const names[MP_STREAM_N] = { "compute", "pp", "dp" };
  return stream < MP_STREAM_N ? names[stream] : "?";
}

const char *
mp_comm_group_name (MpCommGroup group)
{
  static const char *const names[MP_GROUP_N] = { "none", "dp", "edp", "pp_ends",
                                                  "dp_rep" };
  return group < MP_GROUP_N ? names[group] : "?";
}
