/* backend.c - the backend registry: a name on the command line (`--backend`) to a backend
 * constructor. "host" always; "cuda" (bf16 GEMM inputs, fp32 master weights and
 * accumulation) and "cuda-fp32" (fp32 everywhere, no TF32) when built with CUDA. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/backend.h"
#include "common/error.h"

#include <string.h>

gboolean
mp_backend_name_valid (const char *name)
{
  return name != NULL
         && (strcmp (name, "host") == 0 || strcmp (name, "cuda") == 0
             || strcmp (name, "cuda-fp32") == 0);
}

MpBackend *
mp_backend_new (const char *name, int rank, int size, GError **error)
{
  if (name == NULL || strcmp (name, "host") == 0)
    return mp_backend_host_new (rank, size);
  if (strcmp (name, "cuda") == 0 || strcmp (name, "cuda-fp32") == 0)
    {
#ifdef HAVE_CUDA
      return mp_backend_cuda_new (rank, size, strcmp (name, "cuda") == 0, error);
#else
      g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
                   "no CUDA device: this mpplan was built without the CUDA backend "
                   "(configure found no CUDA toolkit; see ./configure --with-cuda)");
      return NULL;
#endif
    }
  g_set_error (error, MP_ERROR, MP_ERROR_INPUT,
               "unknown backend '%s' (known: host, cuda, cuda-fp32)", name);
  return NULL;
}

int
mp_backend_cuda_device_count (void)
{
#ifdef HAVE_CUDA
  return mp_backend_cuda_devices ();
#else
  return 0;
#endif
}
