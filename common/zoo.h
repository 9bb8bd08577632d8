/* zoo.h - where the bundled model and cluster files are found.
 *
 * Search order: $MPPLAN_DATADIR/<kind>, the source tree's examples/<kind> (an uninstalled
 * build), then $(datadir)/mpplan/<kind>. KIND is "models" or "clusters". */
#pragma once
#include <glib.h>

G_BEGIN_DECLS

/* Path of zoo file NAME.yaml of KIND, or NULL. Caller owns. */
char *mp_zoo_find (const char *kind, const char *name);
/* Sorted, de-duplicated names (without .yaml) of KIND over all zoo dirs. Caller owns. */
char **mp_zoo_list (const char *kind);

G_END_DECLS
