/* log.c - the g_log writer: "[rank N] domain: message" on stderr, rank 0 only below
 * warnings. */
#include "common/log.h"

#include <stdio.h>
#include <string.h>

static int log_rank = -1;
static gboolean log_verbose = FALSE;

static const char *
field (const GLogField *fields, gsize n, const char *key)
{
  for (gsize i = 0; i < n; i++)
    if (strcmp (fields[i].key, key) == 0 && fields[i].length < 0)
      return fields[i].value;
  return NULL;
}

static GLogWriterOutput
writer (GLogLevelFlags level, const GLogField *fields, gsize n, gpointer data)
{
  gboolean chatty = (level & (G_LOG_LEVEL_INFO | G_LOG_LEVEL_DEBUG | G_LOG_LEVEL_MESSAGE)) != 0;
  if (chatty && log_rank > 0)
    return G_LOG_WRITER_HANDLED;
  const char *domain = field (fields, n, "GLIB_DOMAIN");
  if ((level & G_LOG_LEVEL_DEBUG) && !log_verbose && g_log_writer_default_would_drop (level, domain))
    return G_LOG_WRITER_HANDLED;
  if ((level & G_LOG_LEVEL_INFO) && !log_verbose && g_log_writer_default_would_drop (level, domain))
    return G_LOG_WRITER_HANDLED;
  const char *msg = field (fields, n, "MESSAGE");
  const char *tag = (level & G_LOG_LEVEL_ERROR) ? " error"
                    : (level & G_LOG_LEVEL_CRITICAL) ? " critical"
                    : (level & G_LOG_LEVEL_WARNING) ? " warning"
                    : "";
  if (log_rank >= 0)
    fprintf (stderr, "[rank %d] ", log_rank);
  fprintf (stderr, "%s%s: %s\n", domain ? domain : "mpplan", tag, msg ? msg : "");
  return G_LOG_WRITER_HANDLED;
}

void
mp_log_init (int rank, gboolean verbose)
{
  static gboolean installed = FALSE;
  log_rank = rank;
  log_verbose = verbose;
  if (!installed)
    {
      g_log_set_writer_func (writer, NULL, NULL);
      installed = TRUE;
    }
}
