/* fuzz-loader.c - libFuzzer harness for one of mpplan's loaders, chosen at build time:
 * -DFUZZ_MODEL (model YAML, the default), -DFUZZ_CLUSTER (cluster YAML), -DFUZZ_PLAN (plan
 * YAML), -DFUZZ_PROFILE (calibration profile YAML), -DFUZZ_HF (Hugging Face config.json)
 * or -DFUZZ_REPORT (the bytes as report's measured file against a good prediction, then
 * as its predicted file against a good measurement). Any bytes must load or be refused
 * with an error naming the file ("fuzz.yaml:LINE:COL:" for YAML, "fuzz.json:" for JSON);
 * a crash, a leak, undefined behaviour, an unnamed error or a GLib critical or warning
 * (made fatal here) is a finding. See tests/fuzz/README.md for how to build and run it
 * (libmpplan needs -fsanitize=fuzzer-no-link for coverage). */
#include "common/jsonread.h"
#include "costmodel/costmodel.h"
#include "model/model.h"
#include "planner/planner.h"
#include "report/report.h"
#include "topology/topology.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);
int LLVMFuzzerInitialize (int *argc, char ***argv);

/* Does MESSAGE start with "NAME:"? */
static int
names (const char *message, const char *name)
{
  size_t n = strlen (name);
  return strncmp (message, name, n) == 0 && message[n] == ':';
}

#ifndef FUZZ_REPORT
/* The error must exist and start with "NAME:"; anything else is a finding. */
static void
check_refusal (const char *name, GError *error)
{
  if (error == NULL || !names (error->message, name))
    __builtin_trap ();
  g_error_free (error);
}
#endif

#ifdef FUZZ_REPORT
/* A prediction and a measurement of the same 2-rank plan, as simulate --json and exec -o
 * write them (trimmed to the keys report reads). */
static const char good_predicted[] =
  "{\"schema_version\":1,\"dp\":2,\"tp\":1,\"pp\":1,\"zero\":0,\"recompute\":\"none\","
  "\"micro_batch_size\":2,\"num_micro_batches\":1,\"schedule\":\"1f1b\",\"step_s\":0.5,"
  "\"time_s\":{\"compute\":0.4,\"tp_comm\":0,\"pp_comm\":0,\"dp_comm\":0.05,\"bubble\":0,"
  "\"optimizer\":0.05},\"memory_bytes\":{\"peak\":1e9,\"weights\":1e8,\"gradients\":1e8,"
  "\"optimizer\":2e8,\"activations\":5e8,\"other\":1e8}}";
static const char good_measured[] =
  "{\"schema_version\":1,\"world_size\":2,\"steps\":2,\"step_s\":0.6,\"step_s_min\":0.5,"
  "\"step_s_max\":0.7,\"step_times_s\":[0.5,0.7],\"time_s\":{\"compute\":0.5,\"tp_comm\":0,"
  "\"pp_comm\":0,\"dp_comm\":0.05,\"bubble\":0,\"optimizer\":0.05},"
  "\"ranks\":[{\"rank\":0,\"stage\":0,\"memory_bytes\":{\"peak\":9e8}},"
  "{\"rank\":1,\"stage\":0,\"memory_bytes\":{\"peak\":9e8}}],"
  "\"plan\":{\"dp\":2,\"tp\":1,\"pp\":1}}";

/* The join of the two; a refusal names one of them (a measured file of another plan is
 * refused naming the measured file, whichever was fuzzed). */
static void
join (const char *pname, const char *p, size_t plen, const char *mname, const char *m,
      size_t mlen)
{
  GError *error = NULL;
  MpReportRun *run = mp_report_run_load_data (pname, p, plen, mname, m, mlen, &error);
  if (run == NULL)
    {
      if (error == NULL || !(names (error->message, pname) || names (error->message, mname)))
        __builtin_trap ();
      g_error_free (error);
    }
  else
    {
      g_free (mp_report_text (run));
      g_autoptr(GPtrArray) runs = g_ptr_array_new ();
      g_ptr_array_add (runs, run);
      json_node_unref (mp_report_json (runs));
      g_free (mp_report_html (runs, "fuzz"));
    }
  mp_report_run_free (run);
}
#endif

static void
load (const char *data, size_t size)
{
#ifndef FUZZ_REPORT
  GError *error = NULL;
#endif
#if defined FUZZ_CLUSTER
  MpCluster *c = mp_cluster_load_data ("fuzz.yaml", data, size, &error);
  if (c == NULL)
    check_refusal ("fuzz.yaml", error);
  mp_cluster_free (c);
#elif defined FUZZ_PLAN
  MpPlanFile *f = mp_plan_file_load_data ("fuzz.yaml", data, size, &error);
  if (f == NULL)
    check_refusal ("fuzz.yaml", error);
  mp_plan_file_free (f);
#elif defined FUZZ_PROFILE
  MpCostProfile *p = mp_cost_profile_load_data ("fuzz.yaml", data, size, &error);
  if (p == NULL)
    check_refusal ("fuzz.yaml", error);
  else
    g_free (mp_cost_profile_to_yaml (p, NULL));
  mp_cost_profile_free (p);
#elif defined FUZZ_HF
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  MpModel *m = mp_model_load_hf_data ("fuzz.json", data, size, notes, &error);
  if (m == NULL)
    check_refusal ("fuzz.json", error);
  mp_model_free (m);
#elif defined FUZZ_REPORT
  join ("good.json", good_predicted, strlen (good_predicted), "fuzz.json", data, size);
  join ("fuzz.json", data, size, "good.json", good_measured, strlen (good_measured));
#else
  MpModel *m = mp_model_load_data ("fuzz.yaml", data, size, &error);
  if (m == NULL)
    check_refusal ("fuzz.yaml", error);
  mp_model_free (m);
#endif
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  (void) argc;
  (void) argv;
  /* A json-glib or GLib critical means a reader skipped a check: make it a crash. */
  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  load ((const char *) data, size);
  return 0;
}
