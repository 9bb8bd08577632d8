/* report-read.c - the predicted and measured files report joins, read with every member
 * checked (common/jsonread.h): a wrong type, a missing key, a number out of range, an
 * unknown schema_version or phase is refused as "FILE: key 'time_s.compute': expected a
 * number, got an array"; so is a measured file of another plan than its prediction (other
 * parallel sizes, world size or pipeline stages).
 *
 * Predicted: `simulate --json` (step_s, time_s, ranks), `plan --json` (its plans[0]) or
 * one plan's JSON (verify's predicted-N.json: the plan's keys). Measured: `exec -o`. */
#define G_LOG_DOMAIN "mpplan-report"
#include "config.h"
#include "report/report.h"
#include "common/error.h"
#include "common/jsonread.h"

#include <math.h>
#include <string.h>

/* Bounds on what a file may say: no step lasts 30 years, no device holds an exabyte, no
 * job has more ranks than a cluster file may describe, no run a billion steps. */
#define MAX_SECONDS 1e9
#define MAX_BYTES 1e18
#define MAX_RANKS (1u << 24)
#define MAX_SIZE (1u << 24)            /* dp, tp, pp, ... */
#define MAX_STEPS 1000000000u
#define SCHEMA_VERSION 1
/* No GPU does a zettaFLOP/s, no job a zetta-token per second. */
#define MAX_RATE 1e21
/* A cross-entropy: ln(vocab) ~ 12 at the start; a diverged run is inf, which JSON lacks. */
#define MAX_LOSS 1e9

/* The keys of a plan that say which plan it is; 0 / NULL where the file does not say. */
typedef struct {
  gboolean present;
  guint64 dp, tp, pp, vpp, cp, ep, zero, mbs, nmb, world;
  gboolean sp;
  const char *recompute, *schedule;
} PlanKeys;

/* What one side contributes besides its figures, for the cross-checks. */
typedef struct {
  PlanKeys plan;
  guint64 n_ranks;                /* ranks listed; 0: the file lists none */
  guint64 stages_seen;            /* 1 + the highest stage of a listed rank */
} Shape;

/* Refuses members of O (at WHERE) outside the NULL-terminated KNOWN: time_s and
 * memory_bytes are closed sets, and a typo there would silently read as 0. */
static void
known_keys_only (MpJsonReader *r, JsonObject *o, const char *where, const char *what,
                 const char **known)
{
  if (o == NULL)
    return;
  g_autoptr(GList) members = json_object_get_members (o);
  for (GList *l = members; l; l = l->next)
    {
      if (g_strv_contains (known, l->data))
        continue;
      g_autofree char *list = g_strjoinv (", ", (char **) known);
      g_autofree char *name = g_strconcat (where, ".", (const char *) l->data, NULL);
      mp_json_problem (r, name, "unknown %s (known: %s)", what, list);
      return;
    }
}

/* A closed set of figures, WHERE.KEY: the members NAME (0) .. NAME (N - 1), each a number
 * from 0 to MAX, into V (absent ones 0); any other member is refused as an unknown WHAT.
 * NULL when absent. */
static JsonObject *
read_set (MpJsonReader *r, JsonObject *o, const char *where, const char *key,
          gboolean required, const char *(*name) (guint), guint n, double max,
          const char *what, double *v)
{
  JsonObject *set = mp_json_get_object (r, o, where, key, required);
  g_autofree char *at = where ? g_strconcat (where, ".", key, NULL) : g_strdup (key);
  g_autofree const char **names = g_new0 (const char *, n + 1);
  for (guint i = 0; i < n; i++)
    {
      names[i] = name (i);
      v[i] = 0;
      mp_json_get_number (r, set, at, names[i], FALSE, 0, max, &v[i]);
    }
  known_keys_only (r, set, at, what, names);
  return set;
}

/* The six parts of WHERE.KEY (a time_s object) into V; absent parts are 0. */
static void
read_phases (MpJsonReader *r, JsonObject *o, const char *where, const char *key,
             gboolean required, double *v)
{
  read_set (r, o, where, key, required, mp_report_phase_name, MP_REPORT_STEP, MAX_SECONDS,
            "phase", v);
}

/* WHERE.memory_bytes into V; FALSE when absent. */
static gboolean
read_memory (MpJsonReader *r, JsonObject *o, const char *where, double *v)
{
  return read_set (r, o, where, "memory_bytes", FALSE, mp_report_mem_name, MP_REPORT_MEM_N,
                   MAX_BYTES, "kind of memory", v) != NULL;
}

/* The plan's identifying keys of O (at WHERE): dp, tp, pp required, the rest optional. */
static void
read_plan_keys (MpJsonReader *r, JsonObject *o, const char *where, PlanKeys *k)
{
  memset (k, 0, sizeof *k);
  k->present = TRUE;
  k->vpp = k->cp = k->ep = 1;
  mp_json_get_uint (r, o, where, "dp", TRUE, 1, MAX_SIZE, &k->dp);
  mp_json_get_uint (r, o, where, "tp", TRUE, 1, MAX_SIZE, &k->tp);
  mp_json_get_uint (r, o, where, "pp", TRUE, 1, MAX_SIZE, &k->pp);
  mp_json_get_uint (r, o, where, "vpp", FALSE, 1, MAX_SIZE, &k->vpp);
  mp_json_get_uint (r, o, where, "cp", FALSE, 1, MAX_SIZE, &k->cp);
  mp_json_get_uint (r, o, where, "ep", FALSE, 1, MAX_SIZE, &k->ep);
  mp_json_get_uint (r, o, where, "zero", FALSE, 0, 3, &k->zero);
  mp_json_get_uint (r, o, where, "micro_batch_size", FALSE, 1, MAX_STEPS, &k->mbs);
  mp_json_get_uint (r, o, where, "num_micro_batches", FALSE, 1, MAX_STEPS, &k->nmb);
  mp_json_get_bool (r, o, where, "sequence_parallel", FALSE, &k->sp);
  k->recompute = mp_json_get_string (r, o, where, "recompute", FALSE);
  k->schedule = mp_json_get_string (r, o, where, "schedule", FALSE);
  if (r->error != NULL)
    return;
  /* The product, saturated above MAX_RANKS (four factors of up to 2^24 would overflow). */
  const guint64 sizes[] = { k->dp, k->tp, k->pp, k->cp };
  guint64 world = 1;
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    world = world > MAX_RANKS / sizes[i] ? MAX_RANKS + 1 : world * sizes[i];
  if (world > MAX_RANKS)
    {
      g_autofree char *name = where ? g_strconcat (where, ".dp", NULL) : g_strdup ("dp");
      mp_json_problem (r, name, "dp x tp x pp x cp is more than %u ranks", MAX_RANKS);
    }
  if (mp_json_get_uint (r, o, where, "world_size", FALSE, 1, MAX_RANKS, &k->world)
      && k->world != world)
    {
      g_autofree char *name = where ? g_strconcat (where, ".world_size", NULL)
                                    : g_strdup ("world_size");
      mp_json_problem (r, name, "%" G_GUINT64_FORMAT " is not dp x tp x pp x cp = %"
                       G_GUINT64_FORMAT, k->world, world);
    }
  k->world = world;
}

/* The rest of a plan object (mp_plan_to_json, docs/json.md): not joined, but checked.
 * tflops_per_gpu / hw_tflops_per_gpu are the older names of the FLOP/s; mfu passes 1 in
 * FP8 plans (it is over the bf16 peak). */
static const MpJsonKey plan_figures[] = {
  { "etp", MP_JSON_WHOLE, 1, MAX_SIZE }, { "dispatcher", MP_JSON_STRING, 0, 0 },
  { "recompute_method", MP_JSON_STRING, 0, 0 },
  { "recompute_num_layers", MP_JSON_WHOLE, 1, MAX_SIZE },
  { "recompute_modules", MP_JSON_STRING, 0, 0 }, { "fp8", MP_JSON_BOOL, 0, 0 },
  { "step_s", MP_JSON_NUMBER, 0, MAX_SECONDS },
  { "simulated_step_s", MP_JSON_NUMBER, 0, MAX_SECONDS },
  { "tokens_per_s", MP_JSON_NUMBER, 0, MAX_RATE },
  { "flops_per_gpu", MP_JSON_NUMBER, 0, MAX_RATE },
  { "hw_flops_per_gpu", MP_JSON_NUMBER, 0, MAX_RATE },
  { "tflops_per_gpu", MP_JSON_NUMBER, 0, MAX_RATE },
  { "hw_tflops_per_gpu", MP_JSON_NUMBER, 0, MAX_RATE },
  { "mfu", MP_JSON_NUMBER, 0, 100 }, { "hfu", MP_JSON_NUMBER, 0, 100 },
  { "family", MP_JSON_STRING, 0, 0 }, { "dominant", MP_JSON_STRING, 0, 0 },
  { "fits", MP_JSON_BOOL, 0, 0 }, { "chunk_layers", MP_JSON_WHOLES, 0, MAX_SIZE },
  { "order", MP_JSON_STRINGS, 0, 0 }, { "binding_stage", MP_JSON_WHOLE, 0, MAX_SIZE },
  { "global_batch", MP_JSON_WHOLE, 1, MAX_STEPS }, { "cp_comm_type", MP_JSON_STRING, 0, 0 },
};

/* A plan object O at WHERE: its identifying keys into K, every other member checked. */
static void
read_plan (MpJsonReader *r, JsonObject *o, const char *where, PlanKeys *k)
{
  read_plan_keys (r, o, where, k);
  mp_json_check_keys (r, o, where, plan_figures, G_N_ELEMENTS (plan_figures));
  double scratch[MP_REPORT_N + MP_REPORT_MEM_N];
  read_memory (r, o, where, scratch);
  if (mp_json_member (r, o, where, "time_s", FALSE))
    read_phases (r, o, where, "time_s", TRUE, scratch);
}

void
mp_report_check_plan (MpJsonReader *r, JsonObject *plan, const char *where)
{
  PlanKeys k;
  read_plan (r, plan, where, &k);
}

/* The plan in words: "dp2 tp1 pp1 zero1 2x1 1f1b". */
static char *
plan_label (const PlanKeys *k)
{
  if (!k->present)
    return g_strdup ("plan");
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "dp%" G_GUINT64_FORMAT " tp%" G_GUINT64_FORMAT " pp%"
                          G_GUINT64_FORMAT, k->dp, k->tp, k->pp);
  const char *opt[] = { "vpp", "cp", "ep" };
  const guint64 val[] = { k->vpp, k->cp, k->ep };
  for (guint i = 0; i < G_N_ELEMENTS (opt); i++)
    if (val[i] > 1)
      g_string_append_printf (s, " %s%" G_GUINT64_FORMAT, opt[i], val[i]);
  if (k->sp)
    g_string_append (s, " sp");
  if (k->zero > 0)
    g_string_append_printf (s, " zero%" G_GUINT64_FORMAT, k->zero);
  if (k->recompute && strcmp (k->recompute, "none") != 0)
    g_string_append_printf (s, " recompute-%s", k->recompute);
  g_string_append_printf (s, " %" G_GUINT64_FORMAT "x%" G_GUINT64_FORMAT " %s",
                          MAX (k->mbs, 1), MAX (k->nmb, 1), k->schedule ? k->schedule : "");
  return g_string_free (s, FALSE);
}

/* What else a rank lists (exec: step_s, time_s, tp_rank, dp_rank; simulate: end_s,
 * busy_s): not joined, but checked like the rest. */
static void
read_rank_figures (MpJsonReader *r, JsonObject *e, const char *at)
{
  double v = 0, busy[MP_REPORT_N];
  guint64 i = 0;
  mp_json_get_number (r, e, at, "step_s", FALSE, 0, MAX_SECONDS, &v);
  mp_json_get_number (r, e, at, "end_s", FALSE, 0, MAX_SECONDS, &v);
  mp_json_get_uint (r, e, at, "tp_rank", FALSE, 0, MAX_SIZE, &i);
  mp_json_get_uint (r, e, at, "dp_rank", FALSE, 0, MAX_SIZE, &i);
  if (mp_json_member (r, e, at, "time_s", FALSE))
    read_phases (r, e, at, "time_s", TRUE, busy);
  JsonObject *b = mp_json_get_object (r, e, at, "busy_s", FALSE);
  g_autofree char *bat = g_strconcat (at, ".busy_s", NULL);
  static const char *streams[] = { "compute", "tp", "pp", "dp", NULL };
  for (guint k = 0; b && streams[k]; k++)
    mp_json_get_number (r, b, bat, streams[k], FALSE, 0, MAX_SECONDS, &v);
  known_keys_only (r, b, bat, "stream", streams);
}

/* O's ranks (optional): each rank's id (distinct, below the count) and stage (below pp
 * when the plan is known) into SHAPE; each rank's memory into RUN when RUN is not NULL. */
static void
read_ranks (MpJsonReader *r, JsonObject *o, Shape *shape, MpReportRun *run)
{
  JsonArray *a = mp_json_get_array (r, o, NULL, "ranks", FALSE);
  guint n = a ? json_array_get_length (a) : 0;
  if (n > MAX_RANKS)
    {
      mp_json_problem (r, "ranks", "%u ranks, more than %u", n, MAX_RANKS);
      return;
    }
  shape->n_ranks = n;
  g_autofree gboolean *seen = g_new0 (gboolean, MAX (n, 1u));
  if (run)
    {
      run->n_ranks = n;
      run->ranks = g_new0 (MpReportRankMem, MAX (n, 1u));
    }
  guint64 max_stage = shape->plan.present ? shape->plan.pp - 1 : MAX_SIZE;
  for (guint i = 0; i < n && r->error == NULL; i++)
    {
      g_autofree char *at = g_strdup_printf ("ranks[%u]", i);
      JsonObject *e = mp_json_node_object (r, json_array_get_element (a, i), at);
      guint64 rank = i, stage = 0;
      if (mp_json_get_uint (r, e, at, "rank", FALSE, 0, n - 1, &rank) && seen[rank])
        {
          g_autofree char *name = g_strconcat (at, ".rank", NULL);
          mp_json_problem (r, name, "rank %" G_GUINT64_FORMAT " is listed twice", rank);
        }
      seen[rank] = TRUE;
      mp_json_get_uint (r, e, at, "stage", FALSE, 0, max_stage, &stage);
      shape->stages_seen = MAX (shape->stages_seen, stage + 1);
      read_rank_figures (r, e, at);
      if (run)
        {
          run->ranks[i].rank = (guint) rank;
          run->ranks[i].stage = (guint) stage;
          read_memory (r, e, at, run->ranks[i].bytes);
        }
    }
}

/* The file's top-level object, refused with what the file should have been otherwise. */
static JsonObject *
root_object (MpJsonReader *r, JsonNode *root, const char *what)
{
  if (root != NULL && JSON_NODE_HOLDS_OBJECT (root))
    return json_node_get_object (root);
  mp_json_problem (r, NULL, "expected a JSON object (%s), got %s", what,
                   mp_json_type_name (root));
  return NULL;
}

/* step_s_min <= step_s <= step_s_max, and the same per phase: the medians of a measured
 * file lie within its spread. */
static void
check_spread (MpJsonReader *r, const MpReportRun *run)
{
  for (int p = 0; p <= MP_REPORT_STEP && r->error == NULL; p++)
    if (!(run->measured_min[p] <= run->measured[p] && run->measured[p] <= run->measured_max[p]))
      {
        g_autofree char *name = p == MP_REPORT_STEP
                                    ? g_strdup ("step_s")
                                    : g_strconcat ("time_s.", mp_report_phase_name (p), NULL);
        mp_json_problem (r, name, "the median %g is outside its min - max (%g - %g)",
                         run->measured[p], run->measured_min[p], run->measured_max[p]);
      }
}

/* Appends to a "missing" message what the file should have been. */
static void
add_hint (MpJsonReader *r, const char *what)
{
  if (r->error == NULL || !g_str_has_suffix (r->error->message, ": missing"))
    return;
  char *msg = g_strdup_printf ("%s (is it %s?)", r->error->message, what);
  g_free (r->error->message);
  r->error->message = msg;
}

/* What else `exec -o` (and verify's merge) writes, checked though not joined. */
static const MpJsonKey measured_extras[] = {
  { "source", MP_JSON_STRING, 0, 0 }, { "backend", MP_JSON_STRING, 0, 0 },
  { "warmup_steps", MP_JSON_WHOLE, 0, MAX_STEPS },
  { "time_s_rank", MP_JSON_WHOLE, 0, MAX_RANKS - 1 },
  { "memory_bytes_rank", MP_JSON_WHOLE, 0, MAX_RANKS - 1 },
  { "step_times_s", MP_JSON_NUMBERS, 0, MAX_SECONDS },
  { "loss", MP_JSON_NUMBERS, 0, MAX_LOSS }, { "grad_norm", MP_JSON_NUMBERS, 0, MAX_BYTES },
};

static void
read_measured (MpJsonReader *r, JsonObject *m, MpReportRun *run, Shape *shape)
{
  if (!mp_json_check_schema (r, m, "a measured file", SCHEMA_VERSION))
    return;
  double *v = run->measured, *lo = run->measured_min, *hi = run->measured_max;
  read_phases (r, m, NULL, "time_s", TRUE, v);
  mp_json_get_number (r, m, NULL, "step_s", TRUE, 0, MAX_SECONDS, &v[MP_REPORT_STEP]);
  if (r->error != NULL)
    {
      add_hint (r, "the -o file of `mpplan exec`");
      return;
    }
  memcpy (lo, v, sizeof run->measured);
  memcpy (hi, v, sizeof run->measured);
  /* Older measured files have no per-phase spread: the median stands for both ends. */
  if (mp_json_member (r, m, NULL, "time_s_min", FALSE))
    read_phases (r, m, NULL, "time_s_min", TRUE, lo);
  if (mp_json_member (r, m, NULL, "time_s_max", FALSE))
    read_phases (r, m, NULL, "time_s_max", TRUE, hi);
  mp_json_get_number (r, m, NULL, "step_s_min", FALSE, 0, MAX_SECONDS, &lo[MP_REPORT_STEP]);
  mp_json_get_number (r, m, NULL, "step_s_max", FALSE, 0, MAX_SECONDS, &hi[MP_REPORT_STEP]);
  check_spread (r, run);
  guint64 steps = 0, rounds = 1;    /* one exec run is one round */
  mp_json_get_uint (r, m, NULL, "steps", FALSE, 1, MAX_STEPS, &steps);
  mp_json_get_uint (r, m, NULL, "rounds", FALSE, 1, MAX_STEPS, &rounds);
  run->steps = (guint) steps;
  run->rounds = (guint) rounds;
  JsonObject *plan = mp_json_get_object (r, m, NULL, "plan", FALSE);
  if (plan)
    read_plan (r, plan, "plan", &shape->plan);
  /* Not joined (the ranks' are), but checked like the rest. */
  double scratch[MP_REPORT_N + MP_REPORT_MEM_N];
  read_memory (r, m, NULL, scratch);
  mp_json_check_keys (r, m, NULL, measured_extras, G_N_ELEMENTS (measured_extras));
  read_ranks (r, m, shape, run);
  if (r->error == NULL && shape->plan.present && shape->n_ranks > 0
      && shape->n_ranks != shape->plan.world)
    mp_json_problem (r, "ranks", "%" G_GUINT64_FORMAT " ranks, but its plan has %"
                     G_GUINT64_FORMAT, shape->n_ranks, shape->plan.world);
}

/* The object a predicted file holds its figures in: `plan --json` keeps its plans in an
 * array, best first; simulate --json and a plan's JSON are the object itself. *WHERE is
 * its path. */
static JsonObject *
predicted_object (MpJsonReader *r, JsonObject *root, const char **where)
{
  *where = NULL;
  if (!json_object_has_member (root, "plans"))
    return root;
  JsonArray *plans = mp_json_get_array (r, root, NULL, "plans", TRUE);
  if (plans == NULL)
    return NULL;
  if (json_array_get_length (plans) == 0)
    {
      mp_json_problem (r, "plans", "empty: no plan fitted, so there is nothing predicted");
      return NULL;
    }
  *where = "plans[0]";
  return mp_json_node_object (r, json_array_get_element (plans, 0), *where);
}

/* The plan's keys (the predicted object's, or the measured file's plan) into RUN. */
static void
keep_plan (MpReportRun *run, JsonObject *plan)
{
  run->plan = json_node_new (JSON_NODE_OBJECT);
  json_node_set_object (run->plan, plan);
}

/* What else `simulate --json` and `plan --json` write beside the figures, checked though
 * not joined (plan: the plan file's path in simulate's output). */
static const MpJsonKey predicted_extras[] = {
  { "plan", MP_JSON_STRING, 0, 0 }, { "model", MP_JSON_STRING, 0, 0 },
  { "cluster", MP_JSON_STRING, 0, 0 },
  { "closed_form_step_s", MP_JSON_NUMBER, 0, MAX_SECONDS },
  { "difference", MP_JSON_NUMBER, -1, MAX_SECONDS },
  { "critical_rank", MP_JSON_WHOLE, 0, MAX_RANKS - 1 },
  { "critical_stage", MP_JSON_WHOLE, 0, MAX_SIZE - 1 },
  { "instructions", MP_JSON_WHOLE, 0, 1e15 }, { "events", MP_JSON_WHOLE, 0, 1e15 },
  { "world_size", MP_JSON_WHOLE, 1, MAX_RANKS },
  { "global_batch", MP_JSON_WHOLE, 1, MAX_STEPS }, { "search", MP_JSON_OBJECT, 0, 0 },
  { "search.evaluated", MP_JSON_WHOLE, 0, 1e15 },
  { "search.feasible", MP_JSON_WHOLE, 0, 1e15 },
  { "search.seconds", MP_JSON_NUMBER, 0, MAX_SECONDS },
  { "free_best", MP_JSON_OBJECT, 0, 0 },
};

/* The members of a predicted file beside the predicted object's: the extras, simulate's
 * closed form, and plan --json's other plans (plans[1..], free_best). */
static void
read_predicted_extras (MpJsonReader *r, JsonObject *root)
{
  mp_json_check_keys (r, root, NULL, predicted_extras, G_N_ELEMENTS (predicted_extras));
  double scratch[MP_REPORT_N];
  if (mp_json_member (r, root, NULL, "closed_form_time_s", FALSE))
    read_phases (r, root, NULL, "closed_form_time_s", TRUE, scratch);
  JsonArray *plans = json_object_has_member (root, "plans")
                         ? mp_json_get_array (r, root, NULL, "plans", TRUE) : NULL;
  for (guint i = 1; plans && i < json_array_get_length (plans) && r->error == NULL; i++)
    {
      g_autofree char *at = g_strdup_printf ("plans[%u]", i);
      JsonObject *o = mp_json_node_object (r, json_array_get_element (plans, i), at);
      if (o)
        mp_report_check_plan (r, o, at);
    }
  JsonObject *best = mp_json_get_object (r, root, NULL, "free_best", FALSE);
  if (best)
    mp_report_check_plan (r, best, "free_best");
}

static void
read_predicted (MpJsonReader *r, JsonObject *root, MpReportRun *run, Shape *shape)
{
  const char *source = NULL;
  if (!mp_json_check_schema (r, root, "a predicted file", SCHEMA_VERSION))
    return;
  if ((source = mp_json_get_string (r, root, NULL, "source", FALSE)) != NULL
      && strcmp (source, "measured") == 0)
    {
      mp_json_problem (r, "source", "this is a measured file (`exec -o`): give it with -m, "
                       "and `simulate --json` with -p");
      return;
    }
  const char *where = NULL;
  JsonObject *p = predicted_object (r, root, &where);
  if (p == NULL)
    return;
  read_phases (r, p, where, "time_s", TRUE, run->predicted);
  mp_json_get_number (r, p, where, "step_s", TRUE, 0, MAX_SECONDS,
                      &run->predicted[MP_REPORT_STEP]);
  if (r->error != NULL)
    {
      add_hint (r, "`mpplan simulate --json` or a plan's JSON");
      return;
    }
  if (json_object_has_member (p, "dp"))
    {
      read_plan (r, p, where, &shape->plan);
      keep_plan (run, p);
    }
  else if (where == NULL)
    read_ranks (r, p, shape, NULL);   /* simulate --json lists its ranks and stages */
  run->has_predicted_mem = read_memory (r, p, where, run->predicted_mem);
  read_predicted_extras (r, root);
}

/* Is the measured file a measurement of the predicted plan? The same world size and
 * pipeline stages, the same parallel sizes and schedule where both files say. */
static void
check_same_plan (MpJsonReader *r, const Shape *pred, const Shape *meas, const char *pname)
{
  const PlanKeys *a = &pred->plan, *b = &meas->plan;
  guint64 wp = a->present ? a->world : 0;
  guint64 wm = meas->n_ranks ? meas->n_ranks : b->present ? b->world : 0;
  /* simulate --json lists one rank per stage of one replica. */
  guint64 sp = a->present ? a->pp : pred->n_ranks;
  guint64 sm = b->present ? b->pp : meas->stages_seen;
  if (wp && wm && wp != wm)
    mp_json_problem (r, NULL, "a measurement of %" G_GUINT64_FORMAT " ranks, but %s "
                     "predicts %" G_GUINT64_FORMAT ": a measured file of another plan",
                     wm, pname, wp);
  else if (sp && sm && (b->present ? sm != sp : sm > sp))
    mp_json_problem (r, NULL, "a pipeline of %" G_GUINT64_FORMAT " stages, but %s predicts "
                     "%" G_GUINT64_FORMAT ": a measured file of another plan", sm, pname, sp);
  if (r->error != NULL || !a->present || !b->present)
    return;
  gboolean same = a->dp == b->dp && a->tp == b->tp && a->pp == b->pp && a->vpp == b->vpp
                  && a->cp == b->cp && a->ep == b->ep && a->zero == b->zero
                  && a->sp == b->sp && (!a->mbs || !b->mbs || a->mbs == b->mbs)
                  && (!a->nmb || !b->nmb || a->nmb == b->nmb)
                  && (!a->schedule || !b->schedule || strcmp (a->schedule, b->schedule) == 0)
                  && (!a->recompute || !b->recompute || strcmp (a->recompute, b->recompute) == 0);
  if (!same)
    {
      g_autofree char *la = plan_label (a), *lb = plan_label (b);
      mp_json_problem (r, "plan", "the measured plan (%s) is not the predicted one (%s, in "
                       "%s): a measured file of another plan", lb, la, pname);
    }
}

MpReportRun *
mp_report_run_new (const char *pname, JsonNode *predicted, const char *mname,
                   JsonNode *measured, GError **error)
{
  g_return_val_if_fail (pname && predicted != NULL && mname && measured != NULL, NULL);
  g_autoptr(MpReportRun) run = g_new0 (MpReportRun, 1);
  MpJsonReader pr, mr;
  mp_json_reader_init (&pr, pname);
  mp_json_reader_init (&mr, mname);
  Shape ps = { 0 }, ms = { 0 };
  JsonObject *p = root_object (&pr, predicted, "`mpplan simulate --json` or a plan's JSON");
  if (p)
    read_predicted (&pr, p, run, &ps);
  JsonObject *m = pr.error ? NULL : root_object (&mr, measured, "the -o file of `mpplan exec`");
  if (m)
    read_measured (&mr, m, run, &ms);
  if (pr.error == NULL && mr.error == NULL)
    check_same_plan (&mr, &ps, &ms, pname);
  gboolean ok = mp_json_reader_finish (&pr, error) && mp_json_reader_finish (&mr, error);
  mp_json_reader_clear (&pr);
  mp_json_reader_clear (&mr);
  if (ok)
    {
      /* The plan: the predicted object when it is one, else the plan the executor ran. */
      JsonObject *plan = run->plan ? NULL : mp_json_get_object (&mr, m, NULL, "plan", FALSE);
      if (plan)
        keep_plan (run, plan);
      run->label = plan_label (ps.plan.present ? &ps.plan : &ms.plan);
      /* simulate --json has no memory: the plan's prediction (the same cost model) has. */
      if (!run->has_predicted_mem && plan)
        run->has_predicted_mem = read_memory (&mr, plan, "plan", run->predicted_mem);
      ok = mp_json_reader_finish (&mr, error);
    }
  return ok ? g_steal_pointer (&run) : NULL;
}

MpReportRun *
mp_report_run_load_data (const char *pname, const char *pdata, gsize plen, const char *mname,
                         const char *mdata, gsize mlen, GError **error)
{
  g_autoptr(JsonNode) p = mp_json_load_data (pname, pdata, plen, error);
  if (p == NULL)
    return NULL;
  g_autoptr(JsonNode) m = mp_json_load_data (mname, mdata, mlen, error);
  return m ? mp_report_run_new (pname, p, mname, m, error) : NULL;
}

MpReportRun *
mp_report_run_load (const char *ppath, const char *mpath, GError **error)
{
  g_autoptr(JsonNode) p = mp_json_load (ppath, error);
  if (p == NULL)
    return NULL;
  g_autoptr(JsonNode) m = mp_json_load (mpath, error);
  return m ? mp_report_run_new (ppath, p, mpath, m, error) : NULL;
}

/* ---- several rounds of one plan --------------------------------------------------- */

/* Round I's step_times_s appended to ALL and its step_s to *STEP; FALSE with
 * MP_ERROR_INPUT when it has none or they are not times. */
static gboolean
read_round (JsonNode *round, guint i, GArray *all, double *step, GError **error)
{
  g_autofree char *name = g_strdup_printf ("measured round %u", i + 1);
  MpJsonReader r;
  mp_json_reader_init (&r, name);
  JsonObject *o = root_object (&r, round, "the -o file of `mpplan exec`");
  if (o && mp_json_check_schema (&r, o, "a measured file", SCHEMA_VERSION))
    {
      JsonArray *a = mp_json_get_array (&r, o, NULL, "step_times_s", TRUE);
      guint n = a ? json_array_get_length (a) : 0;
      if (a && n == 0)
        mp_json_problem (&r, "step_times_s", "empty: no step times");
      for (guint s = 0; s < n && r.error == NULL; s++)
        {
          g_autofree char *at = g_strdup_printf ("step_times_s[%u]", s);
          double t = 0;
          if (mp_json_node_number (&r, json_array_get_element (a, s), at, 0, MAX_SECONDS, &t))
            g_array_append_val (all, t);
        }
      mp_json_get_number (&r, o, NULL, "step_s", TRUE, 0, MAX_SECONDS, step);
    }
  return mp_json_reader_finish (&r, error);
}

JsonNode *
mp_report_measured_merge (JsonNode *const *rounds, guint n, guint *chosen, GError **error)
{
  g_return_val_if_fail (rounds != NULL && n > 0, NULL);
  g_autoptr(GArray) all = g_array_new (FALSE, FALSE, sizeof (double));
  /* The quietest round: the one with the lowest median step (its step_s); the first on a
   * tie. Load from elsewhere only ever slows a run down, so the quietest round is the one
   * nearest the machine itself (the reason timeit reports the best of its repeats). */
  guint pick = 0;
  double best_step = G_MAXDOUBLE;
  for (guint r = 0; r < n; r++)
    {
      double step = 0;
      if (!read_round (rounds[r], r, all, &step, error))
        return NULL;
      if (step < best_step)
        {
          pick = r;
          best_step = step;
        }
    }
  JsonArray *times = json_array_sized_new (all->len);
  double lo = G_MAXDOUBLE, hi = 0;
  for (guint s = 0; s < all->len; s++)
    {
      double t = g_array_index (all, double, s);
      json_array_add_double_element (times, t);
      lo = MIN (lo, t);
      hi = MAX (hi, t);
    }
  JsonNode *out = json_node_copy (rounds[pick]);
  JsonObject *o = json_node_get_object (out);
  json_object_set_double_member (o, "step_s_min", lo);
  json_object_set_double_member (o, "step_s_max", hi);
  json_object_set_int_member (o, "steps", all->len);
  json_object_set_int_member (o, "rounds", n);
  json_object_set_array_member (o, "step_times_s", times);
  if (chosen)
    *chosen = pick;
  return out;
}
