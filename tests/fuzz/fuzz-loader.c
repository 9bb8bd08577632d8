/* fuzz-loader.c - libFuzzer harness for the model loader (default) or, built with
 * -DFUZZ_CLUSTER, the cluster loader: any bytes must load or be refused with a located
 * "fuzz.yaml:LINE:COL:" error; never a crash, a leak or undefined behaviour.
 * See tests/fuzz/README.md for how to build and run it (libmpplan needs
 * -fsanitize=fuzzer-no-link for coverage). */
#include "model/model.h"
#include "topology/topology.h"

#include <stdint.h>
#include <string.h>

#ifdef FUZZ_CLUSTER
#define LOAD mp_cluster_load_data
#define FREE(x) mp_cluster_free (x)
#else
#define LOAD mp_model_load_data
#define FREE(x) mp_model_free (x)
#endif

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  GError *error = NULL;
  void *loaded = LOAD ("fuzz.yaml", (const char *) data, size, &error);
  if (loaded == NULL)
    {
      if (error == NULL || strncmp (error->message, "fuzz.yaml:", 10) != 0)
        __builtin_trap ();
      g_error_free (error);
    }
  FREE (loaded);
  return 0;
}
