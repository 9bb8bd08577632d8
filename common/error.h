/* error.h - the one error domain every mpplan module reports in.
 *
 * Anything a user or the environment can cause (a bad file, a plan that does not fit, an
 * MPI failure) is a GError in MP_ERROR; the code says which exit status the CLI returns.
 * Programming errors are g_return_val_if_fail / g_assert, never a GError. */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

#define MP_ERROR (mp_error_quark ())
GQuark mp_error_quark (void);

typedef enum {
  MP_ERROR_USAGE,      /* bad command line                                   -> exit 2 */
  MP_ERROR_INPUT,      /* bad input file or impossible shape                 -> exit 2 */
  MP_ERROR_IO,         /* a file cannot be read or written                   -> exit 2 for inputs */
  MP_ERROR_RUNTIME,    /* something failed while running                     -> exit 1 */
  MP_ERROR_INFEASIBLE, /* no plan fits                                       -> exit 3 */
} MpErrorCode;

/* Exit status for an error (0 for NULL): 2 usage/input/io, 1 runtime, 3 infeasible. */
int mp_error_exit_code (const GError *error);

G_END_DECLS
