/* backend.c - the backend registry: a name on the command line (`--backend`) to a backend
 * constructor. "host" always; "cuda" (bf16 GEMM inputs, fp32 master weights and
 * accumulation) and "cuda-fp32" (fp32 everywhere, no TF32) when built with CUDA, from the
 * module mpplan-cuda.so, opened here on first use: linked into mpplan, the CUDA libraries
 * cost every command 0.14 s and 218 MB more resident memory (`mpplan --version`, quiet,
 * median of 5; README's Build section). */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/backend.h"
#include "exec/backend-private.h"
#include "common/error.h"
#include "common/units.h"

#include <gmodule.h>
#include <string.h>

gboolean
mp_backend_name_valid (const char *name)
{
  return name != NULL
         && (strcmp (name, "host") == 0 || strcmp (name, "cuda") == 0
             || strcmp (name, "cuda-fp32") == 0);
}

#ifdef HAVE_CUDA
#define CUDA_MODULE_NAME "mpplan-cuda.so"
static const MpCudaModule *cuda_module;

/* Where the module is: $MPPLAN_CUDA_MODULE, else beside this program (a build tree, or
 * what scripts/gpu-check.sh --pack made), else the installed one. */
static char *
cuda_module_path (void)
{
  const char *env = g_getenv ("MPPLAN_CUDA_MODULE");
  if (env != NULL && *env != '\0')
    return g_strdup (env);
  g_autofree char *exe = g_file_read_link ("/proc/self/exe", NULL);
  if (exe != NULL)
    {
      g_autofree char *dir = g_path_get_dirname (exe);
      char *beside = g_build_filename (dir, CUDA_MODULE_NAME, NULL);
      if (g_file_test (beside, G_FILE_TEST_EXISTS))
        return beside;
      g_free (beside);
    }
  return g_build_filename (MPPLAN_PKGLIBDIR, CUDA_MODULE_NAME, NULL);
}

/* A module that is open stays open (and resident: NCCL and cuBLAS keep threads and
 * handlers that must not be unmapped), so this runs once per process. */
static const MpCudaModule *
cuda_module_open (GError **error)
{
  g_autofree char *path = cuda_module_path ();
  /* Every symbol bound now: a missing one fails here, named, not at its first call. */
  GModule *m = g_module_open (path, G_MODULE_BIND_LOCAL);
  gpointer sym = NULL;
  if (m == NULL)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_IO, "CUDA backend not available: %s",
                   g_module_error ());
      return NULL;
    }
  if (!g_module_symbol (m, "mp_cuda_module", &sym) || sym == NULL
      || ((const MpCudaModule *) sym)->abi != MP_CUDA_MODULE_ABI)
    {
      g_set_error (error, MP_ERROR, MP_ERROR_IO, "CUDA backend not available: %s is not "
                   "this mpplan's module (%s)", path,
                   sym == NULL ? g_module_error () : "built from other sources");
      g_module_close (m);
      return NULL;
    }
  g_module_make_resident (m);
  return sym;
}
#endif

gboolean
mp_backend_cuda_load (GError **error)
{
#ifdef HAVE_CUDA
  if (cuda_module == NULL)
    cuda_module = cuda_module_open (error);
  return cuda_module != NULL;
#else
  g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME,
               "no CUDA device: this mpplan was built without the CUDA backend "
               "(configure found no CUDA toolkit; see ./configure --with-cuda)");
  return FALSE;
#endif
}

MpBackend *
mp_backend_new (const char *name, int rank, int size, GError **error)
{
  if (name == NULL || strcmp (name, "host") == 0)
    return mp_backend_host_new (rank, size);
  if (strcmp (name, "cuda") == 0 || strcmp (name, "cuda-fp32") == 0)
    {
      if (!mp_backend_cuda_load (error))
        return NULL;
#ifdef HAVE_CUDA
      return cuda_module->open (rank, size, strcmp (name, "cuda") == 0, error);
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
  if (mp_backend_cuda_load (NULL))
    return cuda_module->devices ();
#endif
  return 0;
}

/* ---- allocation accounting ------------------------------------------------------- */

typedef struct {
  gsize bytes;
  MpMemKind kind;
} Held;

void
mp_mem_ledger_init (MpMemLedger *ledger)
{
  memset (ledger, 0, sizeof *ledger);
  ledger->live = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
}

void
mp_mem_ledger_clear (MpMemLedger *ledger)
{
  g_clear_pointer (&ledger->live, g_hash_table_unref);
}

void
mp_mem_ledger_add (MpMemLedger *ledger, void *ptr, gsize bytes, MpMemKind kind)
{
  Held *h = g_new (Held, 1);
  h->bytes = bytes;
  h->kind = kind;
  g_hash_table_insert (ledger->live, ptr, h);
  MpMemStats *m = &ledger->stats;
  m->current[kind] += (double) bytes;
  m->current_total += (double) bytes;
  m->peak[kind] = MAX (m->peak[kind], m->current[kind]);
  if (m->current_total > m->peak_total)
    {
      m->peak_total = m->current_total;
      memcpy (m->at_peak, m->current, sizeof m->current);
    }
}

char *
mp_mem_ledger_describe (const MpMemLedger *ledger)
{
  GString *s = g_string_new (NULL);
  for (int k = 0; k < MP_MEM_N; k++)
    {
      g_autofree char *b = mp_units_format (ledger->stats.current[k], MP_UNIT_BYTES);
      g_string_append_printf (s, "%s%s %s", k ? ", " : "", mp_mem_kind_name ((MpMemKind) k), b);
    }
  return g_string_free (s, FALSE);
}

gsize
mp_mem_ledger_remove (MpMemLedger *ledger, void *ptr)
{
  Held *h = g_hash_table_lookup (ledger->live, ptr);
  if (h == NULL)
    return 0;
  gsize bytes = h->bytes;
  ledger->stats.current[h->kind] -= (double) bytes;
  ledger->stats.current_total -= (double) bytes;
  g_hash_table_remove (ledger->live, ptr);
  return bytes;
}
