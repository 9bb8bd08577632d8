/* error.c - the MP_ERROR domain and its mapping to exit codes. */
#include "common/error.h"

G_DEFINE_QUARK (mpplan-error-quark, mp_error)

int
mp_error_exit_code (const GError *error)
{
  if (error == NULL)
    return 0;
  if (error->domain != MP_ERROR)
    return 1;
  switch ((MpErrorCode) error->code)
    {
    case MP_ERROR_USAGE:
    case MP_ERROR_INPUT:
    case MP_ERROR_IO:
      return 2;
    case MP_ERROR_INFEASIBLE:
      return 3;
    case MP_ERROR_RUNTIME:
    default:
      return 1;
    }
}
