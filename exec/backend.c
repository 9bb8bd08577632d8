/* backend.c - the backend registry: a name on the command line (`--backend`) to a backend
 * constructor. "host" always; "cuda" (bf16 GEMM inputs, fp32 master weights and
 * accumulation) and "cuda-fp32" (fp32 everywhere, no TF32) when built with CUDA. */
#define G_LOG_DOMAIN "mpplan-exec"
#include "config.h"
#include "exec/backend.h"
#include "common/error.h"
#include "common/units.h"

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
