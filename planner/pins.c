/* pins.c - `--fix KEY=VALUE,...`: dimensions of a plan the user pins. Keys are the JSON
 * plan keys, so what `mpplan plan --json` prints can be pinned back. */
#define G_LOG_DOMAIN "mpplan-planner"
#include "config.h"
#include "planner/planner.h"
#include "common/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
  PIN_DP, PIN_TP, PIN_PP, PIN_VPP, PIN_CP, PIN_EP, PIN_SP, PIN_ZERO, PIN_RECOMPUTE,
  PIN_MBS, PIN_NMB, PIN_SCHEDULE, PIN_ETP, PIN_DISPATCHER, PIN_N
} PinKey;

static const char *const pin_names[PIN_N + 1] = {
  "dp", "tp", "pp", "vpp", "cp", "ep", "sequence_parallel", "zero", "recompute",
  "micro_batch_size", "num_micro_batches", "schedule", "etp", "dispatcher", NULL
};

struct _MpPlanPins {
  gboolean set[PIN_N];
  guint value[PIN_N];
};

void
mp_plan_pins_free (MpPlanPins *pins)
{
  g_free (pins);
}

/* The value of KEY in CFG, as the pins store it. */
static guint
value_of (const MpParallelConfig *cfg, PinKey key)
{
  switch (key)
    {
    case PIN_DP: return cfg->dp;
    case PIN_TP: return cfg->tp;
    case PIN_PP: return cfg->pp;
    case PIN_VPP: return cfg->vpp;
    case PIN_CP: return cfg->cp;
    case PIN_EP: return cfg->ep;
    case PIN_SP: return cfg->sequence_parallel ? 1 : 0;
    case PIN_ZERO: return cfg->zero;
    case PIN_RECOMPUTE: return cfg->recompute;
    case PIN_MBS: return cfg->micro_batch_size;
    case PIN_NMB: return cfg->num_micro_batches;
    case PIN_SCHEDULE: return cfg->schedule;
    case PIN_ETP: return mp_parallel_config_etp (cfg);
    case PIN_DISPATCHER: return cfg->dispatcher;
    case PIN_N:
    default: return 0;
    }
}

/* Parses VALUE for KEY into *OUT; FALSE if it is not a value KEY takes. */
static gboolean
parse_value (PinKey key, const char *value, guint *out)
{
  if (key == PIN_RECOMPUTE)
    {
      MpRecompute r;
      if (!mp_recompute_from_name (value, &r))
        return FALSE;
      *out = r;
      return TRUE;
    }
  if (key == PIN_SCHEDULE)
    {
      MpSchedule sch;
      if (!mp_schedule_from_name (value, &sch))
        return FALSE;
      *out = sch;
      return TRUE;
    }
  if (key == PIN_DISPATCHER)
    {
      MpDispatcher d;
      if (!mp_dispatcher_from_name (value, &d))
        return FALSE;
      *out = d;
      return TRUE;
    }
  if (key == PIN_SP && (strcmp (value, "true") == 0 || strcmp (value, "false") == 0))
    {
      *out = strcmp (value, "true") == 0;
      return TRUE;
    }
  if (!g_ascii_isdigit (value[0]))
    return FALSE;
  errno = 0;
  char *end = NULL;
  guint64 v = g_ascii_strtoull (value, &end, 10);
  if (*end != '\0' || errno == ERANGE || v > G_MAXUINT32)
    return FALSE;
  gboolean zero_ok = key == PIN_ZERO || key == PIN_SP;
  if ((v == 0 && !zero_ok) || (key == PIN_ZERO && v > 3) || (key == PIN_SP && v > 1))
    return FALSE;
  *out = (guint) v;
  return TRUE;
}

MpPlanPins *
mp_plan_pins_parse (const char *text, GError **error)
{
  g_return_val_if_fail (text != NULL, NULL);
  g_autoptr(MpPlanPins) pins = g_new0 (MpPlanPins, 1);
  g_auto (GStrv) items = g_strsplit (text, ",", -1);
  for (int i = 0; items[i]; i++)
    {
      char *item = g_strstrip (items[i]);
      if (*item == '\0')
        continue;
      char *eq = strchr (item, '=');
      if (eq == NULL)
        {
          g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "--fix: '%s' is not KEY=VALUE", item);
          return NULL;
        }
      *eq = '\0';
      int key = -1;
      for (int k = 0; k < PIN_N; k++)
        if (strcmp (pin_names[k], item) == 0)
          key = k;
      if (key < 0)
        {
          g_autofree char *keys = g_strjoinv (", ", (char **) pin_names);
          g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "--fix: unknown key '%s' (keys: %s)",
                       item, keys);
          return NULL;
        }
      if (!parse_value ((PinKey) key, eq + 1, &pins->value[key]))
        {
          g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "--fix: bad value '%s' for %s", eq + 1,
                       item);
          return NULL;
        }
      pins->set[key] = TRUE;
    }
  return g_steal_pointer (&pins);
}

gboolean
mp_plan_pins_match (const MpPlanPins *pins, const MpParallelConfig *cfg)
{
  if (pins == NULL)
    return TRUE;
  for (int k = 0; k < PIN_N; k++)
    if (pins->set[k] && value_of (cfg, (PinKey) k) != pins->value[k])
      return FALSE;
  return TRUE;
}
