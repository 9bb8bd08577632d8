/* output.h - writing results: whole files or nothing, and JSON through json-glib.
 *
 * Every output (-o, --trace, --html, stdout) goes through mp_output_write: a regular file
 * is written to a temporary file in the same folder and renamed into place, so a failure
 * never leaves a half-written file; a symbolic link is followed and its target written
 * so; a device or FIFO (/dev/full, /dev/stdout, a named pipe) is written in place and
 * never replaced. PATH "-" means stdout. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Writes LEN bytes of DATA to PATH as above ("-": stdout). FALSE with MP_ERROR_RUNTIME
 * "cannot write PATH: REASON" (ENOSPC, EACCES, EIO, a folder, ...). */
gboolean mp_output_write (const char *path, const char *data, gsize len, GError **error);

/* Members of the object being built: "KEY": value. A non-finite double is written as
 * null (JSON has no NaN); a NULL string as null. */
void mp_json_add_int (JsonBuilder *b, const char *key, gint64 v);
void mp_json_add_double (JsonBuilder *b, const char *key, double v);
void mp_json_add_string (JsonBuilder *b, const char *key, const char *v);
void mp_json_add_bool (JsonBuilder *b, const char *key, gboolean v);

/* Serialises ROOT (pretty, 2-space indent, trailing newline); caller owns. */
char *mp_json_to_string (JsonNode *root);
/* Writes ROOT as JSON to PATH through mp_output_write ("-": stdout). */
gboolean mp_json_write (const char *path, JsonNode *root, GError **error);

G_END_DECLS
