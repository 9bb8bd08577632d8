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
  PIN_MBS, PIN_NMB, PIN_SCHEDULE, PIN_FP8, PIN_ETP, PIN_DISPATCHER, PIN_RC_METHOD,
  PIN_RC_LAYERS, PIN_RC_MODULES, PIN_STACK, PIN_ZERO_SHARD, PIN_RESHARD, PIN_A2A_OVERLAP,
  PIN_COMPILE, PIN_CP_COMM,
  /* The layer split, resolved by mp_plan_pins_split (Megatron-LM's flags). */
  PIN_FIRST, PIN_LAST, PIN_EMBEDDING, PIN_LOSS, PIN_LAYERS, PIN_N
} PinKey;

static const char *const pin_names[PIN_N + 1] = {
  "dp", "tp", "pp", "vpp", "cp", "ep", "sequence_parallel", "zero", "recompute",
  "micro_batch_size", "num_micro_batches", "schedule", "fp8", "etp", "dispatcher",
  "recompute_method", "recompute_num_layers", "recompute_modules", "stack", "zero_shard",
  "reshard_after_forward", "moe_a2a_overlap", "compile", "cp_comm_type", "first_stage_layers",
  "last_stage_layers", "account_for_embedding", "account_for_loss", "layers_per_chunk", NULL
};

struct _MpPlanPins {
  gboolean set[PIN_N];
  guint value[PIN_N];
  GArray *layers;              /* layers_per_chunk (guint), or NULL */
};

void
mp_plan_pins_free (MpPlanPins *pins)
{
  if (pins && pins->layers)
    g_array_unref (pins->layers);
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
    case PIN_FP8: return cfg->fp8 ? 1 : 0;
    case PIN_ETP: return mp_parallel_config_etp (cfg);
    case PIN_DISPATCHER: return cfg->dispatcher;
    case PIN_RC_METHOD: return cfg->recompute_method;
    case PIN_RC_LAYERS: return cfg->recompute_num_layers;
    case PIN_RC_MODULES:
      return cfg->recompute == MP_RECOMPUTE_SELECTIVE ? mp_recompute_modules_of (cfg) : 0;
    case PIN_STACK: return cfg->stack;
    case PIN_ZERO_SHARD: return mp_parallel_config_zero_shard (cfg);
    case PIN_RESHARD: return cfg->no_reshard ? 0 : 1;
    case PIN_A2A_OVERLAP: return cfg->moe_a2a_overlap ? 1 : 0;
    case PIN_COMPILE: return cfg->compile ? 1 : 0;
    case PIN_CP_COMM:          /* the exchange in effect; none without context parallelism */
      if (cfg->cp < 2)
        return MP_CP_COMM_STACK;
      return mp_parallel_config_cp_allgather (cfg) ? MP_CP_COMM_ALLGATHER : MP_CP_COMM_P2P;
    case PIN_FIRST:
    case PIN_LAST:
    case PIN_EMBEDDING:
    case PIN_LOSS:
    case PIN_LAYERS:
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
  if (key == PIN_RC_METHOD)
    {
      MpRecomputeMethod m;
      if (!mp_recompute_method_from_name (value, &m))
        return FALSE;
      *out = m;
      return TRUE;
    }
  if (key == PIN_RC_MODULES)
    return mp_recompute_modules_from_name (value, out);
  if (key == PIN_CP_COMM)
    {
      MpCpComm c;
      if (!mp_cp_comm_from_name (value, &c) || c == MP_CP_COMM_STACK)
        return FALSE;
      *out = c;
      return TRUE;
    }
  if (key == PIN_STACK)
    {
      MpStack st;
      if (!mp_stack_from_name (value, &st))
        return FALSE;
      *out = st;
      return TRUE;
    }
  gboolean flag = key == PIN_SP || key == PIN_FP8 || key == PIN_EMBEDDING || key == PIN_LOSS
                  || key == PIN_RESHARD || key == PIN_A2A_OVERLAP || key == PIN_COMPILE;
  if (flag && (strcmp (value, "true") == 0 || strcmp (value, "false") == 0))
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
  gboolean zero_ok = key == PIN_ZERO || flag || key == PIN_RC_LAYERS || key == PIN_FIRST
                    || key == PIN_LAST;
  if ((v == 0 && !zero_ok) || (key == PIN_ZERO && v > 3) || (flag && v > 1))
    return FALSE;
  *out = (guint) v;
  return TRUE;
}

/* "5:4:4:5" into *OUT (a new array of guint, each >= 1). */
static gboolean
parse_list (const char *text, GArray **out)
{
  g_auto (GStrv) parts = g_strsplit (text, ":", -1);
  g_autoptr(GArray) list = g_array_new (FALSE, FALSE, sizeof (guint));
  for (int i = 0; parts[i]; i++)
    {
      guint v;
      if (!parse_value (PIN_DP, parts[i], &v))
        return FALSE;
      g_array_append_val (list, v);
    }
  if (list->len == 0)
    return FALSE;
  if (*out)
    g_array_unref (*out);
  *out = g_steal_pointer (&list);
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
      if (key == PIN_LAYERS)
        {
          if (!parse_list (eq + 1, &pins->layers))
            {
              g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "--fix: bad value '%s' for %s "
                           "(model layers per chunk, joined by ':', e.g. 5:4:4:5)", eq + 1,
                           item);
              return NULL;
            }
        }
      else if (!parse_value ((PinKey) key, eq + 1, &pins->value[key]))
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
mp_plan_pins_get (const MpPlanPins *pins, const char *key, guint *value)
{
  g_return_val_if_fail (key != NULL, FALSE);
  for (int k = 0; pins != NULL && k < PIN_N; k++)
    if (strcmp (pin_names[k], key) == 0 && pins->set[k])
      {
        if (value)
          *value = pins->value[k];
        return TRUE;
      }
  return FALSE;
}

gboolean
mp_plan_pins_match (const MpPlanPins *pins, const MpParallelConfig *cfg)
{
  if (pins == NULL)
    return TRUE;
  for (int k = 0; k < PIN_FIRST; k++)
    if (pins->set[k] && value_of (cfg, (PinKey) k) != pins->value[k])
      return FALSE;
  return TRUE;
}

/* ---- the layer split, as Megatron-LM's flags make it ---------------------------------- */

#define RULE(cond, ...)                                                                     \
  G_STMT_START                                                                              \
  {                                                                                         \
    if (!(cond))                                                                            \
      {                                                                                     \
        g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "--fix: " __VA_ARGS__);               \
        return NULL;                                                                        \
      }                                                                                     \
  }                                                                                         \
  G_STMT_END

/* Blocks of each pipeline rank into PER_STAGE[pp] from first_stage_layers and
 * last_stage_layers (transformer_block.py get_num_layers_to_build): the others share
 * what is left evenly. */
static gboolean
uneven_stages (const MpPlanPins *pins, guint blocks, guint pp, guint *per_stage,
               GError **error)
{
  guint64 rest = blocks, left = pp;
  for (int k = PIN_FIRST; k <= PIN_LAST; k++)
    if (pins->set[k])
      {
        if (rest < pins->value[k] || left == 0)
          {
            g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "--fix: first_stage_layers + "
                         "last_stage_layers exceed the %u blocks over pp = %u stages", blocks,
                         pp);
            return FALSE;
          }
        rest -= pins->value[k];
        left--;
      }
  if (left > 0 && rest % left != 0)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "--fix: with uneven pipelining the "
                   "left-over blocks (%" G_GUINT64_FORMAT ") must be divisible by the "
                   "left-over stages (%" G_GUINT64_FORMAT ")", rest, left);
      return FALSE;
    }
  if (left == 0 && rest > 0)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_USAGE, "--fix: first_stage_layers + "
                   "last_stage_layers leave %" G_GUINT64_FORMAT " of the %u blocks on no "
                   "stage (pp = %u)", rest, blocks, pp);
      return FALSE;
    }
  for (guint i = 0; i < pp; i++)
    per_stage[i] = left > 0 ? (guint) (rest / left) : 0;
  if (pins->set[PIN_FIRST])
    per_stage[0] = pins->value[PIN_FIRST];
  if (pins->set[PIN_LAST])
    per_stage[pp - 1] = pins->value[PIN_LAST];
  return TRUE;
}

guint *
mp_plan_pins_split (const MpPlanPins *pins, const MpModel *model, guint *n_chunks,
                    GError **error)
{
  g_return_val_if_fail (model != NULL && n_chunks != NULL, NULL);
  *n_chunks = 0;
  gboolean uneven = pins && (pins->set[PIN_FIRST] || pins->set[PIN_LAST]);
  gboolean account = pins && ((pins->set[PIN_EMBEDDING] && pins->value[PIN_EMBEDDING])
                              || (pins->set[PIN_LOSS] && pins->value[PIN_LOSS]));
  if (pins == NULL || (!uneven && !account && pins->layers == NULL))
    return NULL;
  RULE (pins->set[PIN_PP], "the layer split (first_stage_layers, last_stage_layers, "
        "account_for_*, layers_per_chunk) needs pp pinned too");
  guint pp = pins->value[PIN_PP];
  if (pins->layers)
    {
      RULE (!uneven && !account, "layers_per_chunk sets every chunk: it takes no "
            "first_stage_layers, last_stage_layers or account_for_*");
      guint n = pins->layers->len;
      RULE (n % pp == 0, "layers_per_chunk has %u entries, not a multiple of pp = %u (one "
            "per model chunk, pp x vpp)", n, pp);
      RULE (!pins->set[PIN_VPP] || n == pp * pins->value[PIN_VPP], "layers_per_chunk has %u "
            "entries but pp x vpp = %u x %u chunks", n, pp, pins->value[PIN_VPP]);
      guint64 sum = 0;
      for (guint c = 0; c < n; c++)
        sum += g_array_index (pins->layers, guint, c);
      RULE (sum == model->n_layers, "layers_per_chunk sums to %" G_GUINT64_FORMAT " layers, "
            "the model has %u (embedding and head included)", sum, model->n_layers);
      *n_chunks = n;
      return g_memdup2 (pins->layers->data, n * sizeof (guint));
    }
  gboolean transformer = model->arch == MP_ARCH_TRANSFORMER;
  RULE (transformer, "first_stage_layers, last_stage_layers and account_for_* split the "
        "blocks of a transformer");
  /* Megatron: "Does not support standalone embedding stage and standalone loss stage with
   * uneven pp". */
  RULE (!(uneven && account), "first_stage_layers / last_stage_layers do not combine with "
        "account_for_embedding / account_for_loss (as in Megatron-LM)");
  guint v = pins->set[PIN_VPP] ? pins->value[PIN_VPP] : 1, blocks = (guint) model->n_blocks;
  guint emb = pins->set[PIN_EMBEDDING] && pins->value[PIN_EMBEDDING];
  guint loss = pins->set[PIN_LOSS] && pins->value[PIN_LOSS];
  g_autofree guint *per_stage = g_new (guint, pp);
  if (uneven)
    {
      if (!uneven_stages (pins, blocks, pp, per_stage, error))
        return NULL;
    }
  else
    {
      guint units = blocks + emb + loss;
      RULE (units % pp == 0, "blocks%s%s (%u) must be divisible by pp = %u", emb ?
            " + embedding" : "", loss ? " + loss" : "", units, pp);
      for (guint i = 0; i < pp; i++)
        per_stage[i] = units / pp;
    }
  guint chunks = pp * v;
  g_autofree guint *split = g_new (guint, chunks);
  for (guint i = 0; i < pp; i++)
    {
      RULE (per_stage[i] % v == 0, "the %u blocks%s of pipeline stage %u must be divisible "
            "by vpp = %u", per_stage[i], account ? " (embedding and loss counted)" : "", i, v);
      for (guint c = i; c < chunks; c += pp)
        split[c] = per_stage[i] / v;
    }
  RULE (split[0] >= emb && split[chunks - 1] >= loss, "not enough layers in the first (or "
        "last) model chunk for the embedding (or loss) it accounts for");
  /* Back to model layers: the embedding layer joins the first chunk, the head the last. */
  split[0] += 1 - emb;
  split[chunks - 1] += 1 - loss;
  for (guint c = 0; c < chunks; c++)
    RULE (split[c] > 0, "model chunk %u would hold no layers", c);
  *n_chunks = chunks;
  return g_steal_pointer (&split);
}
