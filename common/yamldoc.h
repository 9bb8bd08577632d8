/* yamldoc.h - a YAML file as a small tree with source marks, and a reader that checks a
 * schema against it while collecting every problem as "FILE:LINE:COLUMN: message".
 *
 * Every mpplan input file (model, cluster, plan, profile) goes through here, so the hard
 * cases are refused in one place: empty files, binary garbage, several documents, aliases
 * (no "billion laughs"), nesting deeper than MP_YAML_MAX_DEPTH, duplicate keys, oversized
 * files. Loaders never stop at the first problem: they record it and go on, and
 * mp_yaml_reader_finish() turns the list into one GError (MP_ERROR_INPUT). */
#pragma once
#include <glib.h>
#include "common/units.h"

G_BEGIN_DECLS

#define MP_YAML_MAX_DEPTH 32
#define MP_YAML_MAX_BYTES (16 * 1024 * 1024)

typedef enum { MP_YAML_SCALAR, MP_YAML_MAP, MP_YAML_SEQ } MpYamlKind;

typedef struct _MpYamlNode MpYamlNode;
struct _MpYamlNode {
  MpYamlKind kind;
  guint line, column;     /* 1-based, where the node starts */
  char *value;            /* SCALAR: the text */
  gboolean plain;         /* SCALAR: unquoted (so "null", "true" may be keywords) */
  GPtrArray *keys;        /* MAP: key scalars (MpYamlNode*), parallel to items */
  GPtrArray *items;       /* MAP: values; SEQ: elements */
};

typedef struct _MpYamlDoc MpYamlDoc;
struct _MpYamlDoc {
  char *path;             /* as given, used in messages */
  MpYamlNode *root;
};

/* Loads PATH (a directory, unreadable path, empty or malformed file is an error).
 * Returns a new document (caller owns) or NULL with MP_ERROR_INPUT / MP_ERROR_IO and a
 * located message. */
MpYamlDoc *mp_yaml_load (const char *path, GError **error);
/* The same from memory; NAME is used in messages. */
MpYamlDoc *mp_yaml_load_data (const char *name, const char *data, gsize len, GError **error);
void mp_yaml_doc_free (MpYamlDoc *doc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpYamlDoc, mp_yaml_doc_free)

/* Value of KEY in MAP, or NULL (MAP may be NULL or not a map). Borrowed. */
const MpYamlNode *mp_yaml_lookup (const MpYamlNode *map, const char *key);

/* A reader collects problems while a loader walks the tree. */
typedef struct {
  const MpYamlDoc *doc;
  GPtrArray *problems;    /* char*, "FILE:LINE:COL: message" */
} MpYamlReader;

void mp_yaml_reader_init (MpYamlReader *r, const MpYamlDoc *doc);
void mp_yaml_reader_clear (MpYamlReader *r);
/* Records a problem at NODE (NULL: at the top of the file). */
void mp_yaml_problem (MpYamlReader *r, const MpYamlNode *node, const char *fmt, ...)
    G_GNUC_PRINTF (3, 4);
/* TRUE when no problem was recorded; else FALSE with all problems in one MP_ERROR_INPUT. */
gboolean mp_yaml_reader_finish (MpYamlReader *r, GError **error);

/* Records a problem unless NODE is a map; returns whether it is. */
gboolean mp_yaml_expect_map (MpYamlReader *r, const MpYamlNode *node, const char *what);
/* Records "unknown key 'x' (did you mean 'y'?)" for each key of MAP not in ALLOWED
 * (NULL-terminated). */
void mp_yaml_check_keys (MpYamlReader *r, const MpYamlNode *map, const char *const *allowed);

/* Typed getters. Each looks KEY up in MAP; when absent it records "missing required key"
 * if REQUIRED, else leaves *OUT alone (so callers preset defaults). A present value of the
 * wrong type or out of range is recorded. They return TRUE when *OUT was set. */
gboolean mp_yaml_get_string (MpYamlReader *r, const MpYamlNode *map, const char *key,
                             gboolean required, const char **out);
gboolean mp_yaml_get_bool (MpYamlReader *r, const MpYamlNode *map, const char *key,
                           gboolean required, gboolean *out);
/* An integer in [MIN, MAX]. */
gboolean mp_yaml_get_uint (MpYamlReader *r, const MpYamlNode *map, const char *key,
                           gboolean required, guint64 min, guint64 max, guint64 *out);
/* A quantity in human units; must be > 0 unless ALLOW_ZERO. */
gboolean mp_yaml_get_quantity (MpYamlReader *r, const MpYamlNode *map, const char *key,
                               MpUnitKind kind, gboolean required, gboolean allow_zero,
                               double *out);
/* One of NAMES (NULL-terminated), as its index. */
gboolean mp_yaml_get_enum (MpYamlReader *r, const MpYamlNode *map, const char *key,
                           gboolean required, const char *const *names, int *out);

/* Scalar-level helpers for values that are not map entries (sequence items). */
gboolean mp_yaml_scalar_quantity (MpYamlReader *r, const MpYamlNode *node, MpUnitKind kind,
                                  gboolean allow_zero, double *out);

/* The closest of CANDIDATES to WORD by edit distance, if close enough; else NULL. */
const char *mp_yaml_suggest (const char *word, const char *const *candidates);

G_END_DECLS
