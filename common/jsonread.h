/* jsonread.h - JSON documents read with every member checked.
 *
 * Every JSON file mpplan reads (predicted and measured files, traces, config.json) goes
 * through here, so the hard cases are refused in one place: empty files, nesting deeper
 * than MP_JSON_MAX_DEPTH (json-glib recurses without a bound), duplicate keys, oversized
 * files, parse errors (as FILE:LINE:COLUMN:). Members are read through a reader that
 * checks presence, type and range and keeps the first problem as
 * "FILE: key 'time_s.compute': expected a number, got an array" (MP_ERROR_INPUT): no
 * json-glib accessor is ever called on a node of the wrong type, so no critical. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define MP_JSON_MAX_DEPTH 64
#define MP_JSON_MAX_BYTES (256 * 1024 * 1024)

/* Parses PATH (MP_ERROR_IO when it cannot be read). Caller owns; NULL with MP_ERROR_INPUT
 * and a message that names PATH (and the line and column where the text is at fault). */
JsonNode *mp_json_load (const char *path, GError **error);
/* The same from memory; NAME stands for the path in messages. */
JsonNode *mp_json_load_data (const char *name, const char *data, gsize len, GError **error);

/* What a reader of one document carries: its name and its first problem. */
typedef struct {
  const char *file;
  GError *error;
} MpJsonReader;

void mp_json_reader_init (MpJsonReader *r, const char *file);
/* Records "FILE: key 'KEY': message" unless a problem is recorded already (later members
 * often fail because of the first). KEY NULL: "FILE: message". */
void mp_json_problem (MpJsonReader *r, const char *key, const char *fmt, ...)
    G_GNUC_PRINTF (3, 4);
/* TRUE when nothing was recorded; else FALSE with the problem moved to ERROR. */
gboolean mp_json_reader_finish (MpJsonReader *r, GError **error);
void mp_json_reader_clear (MpJsonReader *r);

/* "an object", "an array", "a string", "a number", "a boolean", "null". */
const char *mp_json_type_name (JsonNode *node);

/* The member KEY of O, which may be a dotted path ("time_s.compute") through objects.
 * WHERE (may be NULL) is O's own path in the document, for messages ("ranks[2]"). A
 * member that is absent or null is a problem when REQUIRED, else NULL quietly. The
 * typed getters below return FALSE / NULL and leave *OUT untouched when the member is
 * absent or bad (bad: a problem recorded). */
JsonNode *mp_json_member (MpJsonReader *r, JsonObject *o, const char *where, const char *key,
                          gboolean required);
JsonObject *mp_json_get_object (MpJsonReader *r, JsonObject *o, const char *where,
                                const char *key, gboolean required);
JsonArray *mp_json_get_array (MpJsonReader *r, JsonObject *o, const char *where,
                              const char *key, gboolean required);
const char *mp_json_get_string (MpJsonReader *r, JsonObject *o, const char *where,
                                const char *key, gboolean required);
gboolean mp_json_get_bool (MpJsonReader *r, JsonObject *o, const char *where,
                           const char *key, gboolean required, gboolean *out);
/* A finite number in [MIN, MAX]. */
gboolean mp_json_get_number (MpJsonReader *r, JsonObject *o, const char *where,
                             const char *key, gboolean required, double min, double max,
                             double *out);
/* A whole number in [MIN, MAX] (1e3 and 1000.0 are whole; 2.5 is not). */
gboolean mp_json_get_uint (MpJsonReader *r, JsonObject *o, const char *where,
                           const char *key, gboolean required, guint64 min, guint64 max,
                           guint64 *out);

/* Checks of nodes already in hand, for array elements and aliases; NAME is the full key
 * for messages ("step_times_s[3]"). */
JsonObject *mp_json_node_object (MpJsonReader *r, JsonNode *node, const char *name);
gboolean mp_json_node_number (MpJsonReader *r, JsonNode *node, const char *name, double min,
                              double max, double *out);
gboolean mp_json_node_uint (MpJsonReader *r, JsonNode *node, const char *name, guint64 min,
                            guint64 max, guint64 *out);
const char *mp_json_node_string (MpJsonReader *r, JsonNode *node, const char *name);
gboolean mp_json_node_bool (MpJsonReader *r, JsonNode *node, const char *name,
                            gboolean *out);

/* What a member holds, for mp_json_check_keys. */
typedef enum {
  MP_JSON_STRING, MP_JSON_BOOL, MP_JSON_OBJECT,
  MP_JSON_WHOLE,                  /* a whole number from LO to HI */
  MP_JSON_NUMBER,                 /* a number from LO to HI */
  MP_JSON_ABOVE,                  /* a number above LO, up to HI */
  MP_JSON_STRINGS, MP_JSON_WHOLES, MP_JSON_NUMBERS   /* a list of those (WHOLE, NUMBER) */
} MpJsonKind;

typedef struct {
  const char *key;                /* a dotted path below the object checked */
  MpJsonKind kind;
  double lo, hi;
} MpJsonKey;

/* Each of the N KEYS present and not null in O (at WHERE) holds what it says; absent ones
 * are no problem. For members a reader does not otherwise use (an alias, a figure only
 * shown), so that a wrong one is refused all the same. */
void mp_json_check_keys (MpJsonReader *r, JsonObject *o, const char *where,
                         const MpJsonKey *keys, gsize n);

/* A document's schema_version: absent, not a whole number or other than one this mpplan
 * reads (1 .. KNOWN) is refused by name ("schema_version 2 is newer than this mpplan
 * reads (1)"). WHAT names the kind of file for the message ("a measured file"). */
gboolean mp_json_check_schema (MpJsonReader *r, JsonObject *root, const char *what,
                               gint64 known);

G_END_DECLS
