/* json.h: reading JSON with errors that name the file and the JSON path, and
 * writing JSON string literals into hand-built lines.
 *
 * Loading: qs_json_load_file / qs_json_load_text parse one document (Jansson
 * underneath); a syntax error becomes "FILE:LINE: invalid JSON at column C: what".
 * qs_jsonl_* walk a JSON-lines file (plain or zstd) one object per line.
 *
 * Reading: a qs_json_at names one value of a parsed document together with
 * where it sits (its container and the key or index in it) and the file/line
 * it came from.  The typed getters read a member of an object (key NULL: the
 * value itself) and on failure fill the diag with the file, the line (JSON
 * lines) and the JSON path:
 *   tasks/arc_easy.json: $.data.eval[2]: expected string, found integer
 *   config.json: $.hidden_size: expected integer in [1, 16777216], found 0
 *   config.json: $.vocab_size: required key is missing
 * Paths are rendered only on error, so a getter costs a lookup and a type check.
 * "_or" getters take a default for a member that is absent or JSON null.
 *
 *   json_t *root;
 *   if ((rc = qs_json_load_file(path, QS_JSON_OBJECT, &root, d))) return rc;
 *   qs_json_at r = qs_json_root(root, path, -1);
 *   const char *name; int n;
 *   if (!(rc = qs_json_str(&r, "task", &name, d)) &&
 *       !(rc = qs_json_int_or(&r, "shots", 0, 25, 0, &n, d))) ...use name, n...
 *   json_decref(root);
 *
 * Jansson's header stays out of include/ (STYLE §1): values are `struct json_t`,
 * which is Jansson's json_t; code that needs Jansson's own API includes it.
 */
#ifndef QS_JSON_H
#define QS_JSON_H

#include <stddef.h>

#include "qs/err.h"

struct json_t;
struct zlog_reader;

/* load flags */
enum {
    QS_JSON_NO_DUPLICATES = 1, /* a key twice in one object is an error */
    QS_JSON_OBJECT = 2,        /* the top level must be an object */
};

/* Parse a whole file (a ".zst" name is decompressed).  *out gets a new reference
 * (json_decref it); on error *out is NULL and the diag says where. */
int qs_json_load_file(const char *path, int flags, struct json_t **out, qs_diag *d);
/* Parse len bytes of text that start at line `line` (>= 1) of `file`; line <= 0
 * for JSON embedded in a binary file (the error then gives the byte offset). */
int qs_json_load_text(const char *text, size_t len, const char *file, long line, int flags,
                      struct json_t **out, qs_diag *d);

/* One value and its place in the document (for error messages).  Build with
 * qs_json_root / qs_json_key / qs_json_item; a child points at its container,
 * which must outlive it (both usually live on the same stack frame). */
typedef struct qs_json_at {
    const struct json_t *v;        /* the value; NULL when absent */
    const struct qs_json_at *up;   /* the container; NULL at the root */
    const char *key;               /* member name in the container, or NULL */
    size_t index;                  /* position in the container array (key NULL) */
    const char *file;              /* file for diags (may be NULL) */
    long line;                     /* line for diags, -1 if none */
} qs_json_at;

qs_json_at qs_json_root(const struct json_t *v, const char *file, long line);
/* Member of an object (v NULL when absent or when obj is not an object). */
qs_json_at qs_json_key(const qs_json_at *at, const char *key);
/* Element of an array (v NULL when out of range or not an array). */
qs_json_at qs_json_item(const qs_json_at *at, size_t i);

/* "object", "array", "string", "integer", "number" (real), "boolean", "null";
 * "nothing" for NULL. */
const char *qs_json_type_name(const struct json_t *v);

/* The JSON path of at ("$", "$.data.eval[2]", "$.vocab[\"a b\"]") into buf. */
void qs_json_path(const qs_json_at *at, char *buf, size_t buf_bytes);

/* Fill d with "FILE[:LINE]: <path of at[.key]>: <message>" and return code. */
int qs_json_fail(const qs_json_at *at, const char *key, int code, qs_diag *d, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));

/* Typed getters: member `key` of the object at (key NULL: at's value itself).
 * The string stays owned by the document.  Integers must lie in [min, max]
 * (for qs_json_int a range inside int's). */
int qs_json_str(const qs_json_at *at, const char *key, const char **out, qs_diag *d);
int qs_json_str_or(const qs_json_at *at, const char *key, const char *dflt, const char **out,
                   qs_diag *d);
int qs_json_int(const qs_json_at *at, const char *key, long long min, long long max, int *out,
                qs_diag *d);
int qs_json_int_or(const qs_json_at *at, const char *key, long long min, long long max, int dflt,
                   int *out, qs_diag *d);
int qs_json_i64(const qs_json_at *at, const char *key, long long min, long long max,
                long long *out, qs_diag *d);
int qs_json_i64_or(const qs_json_at *at, const char *key, long long min, long long max,
                   long long dflt, long long *out, qs_diag *d);
/* integer or real */
int qs_json_num(const qs_json_at *at, const char *key, double *out, qs_diag *d);
int qs_json_num_or(const qs_json_at *at, const char *key, double dflt, double *out, qs_diag *d);
int qs_json_bool(const qs_json_at *at, const char *key, int *out, qs_diag *d);
int qs_json_bool_or(const qs_json_at *at, const char *key, int dflt, int *out, qs_diag *d);
/* Arrays and objects: *out names the value (for qs_json_item / the getters);
 * n (may be NULL) gets the element count. */
int qs_json_arr(const qs_json_at *at, const char *key, qs_json_at *out, size_t *n, qs_diag *d);
int qs_json_obj(const qs_json_at *at, const char *key, qs_json_at *out, qs_diag *d);

/* Writing with Jansson: a real, or null for NaN and +-Inf (which JSON cannot hold). */
struct json_t *qs_json_real_or_null(double v);

/* JSON-lines reader: one object per non-empty line of a plain or zstd file. */
typedef struct qs_jsonl {
    struct zlog_reader *z;
    const char *path;
    int flags;
    long line;
    struct json_t *cur;   /* the current line's object (owned) */
} qs_jsonl;
int qs_jsonl_open(qs_jsonl *r, const char *path, int flags, qs_diag *d);
/* 1 with *rec naming the next line's object (valid until the next call), 0 at
 * a clean end, or a negative code: QS_ETRUNC after the last complete line of a
 * cut file, QS_EFORMAT for a line that is not a JSON object. */
int qs_jsonl_next(qs_jsonl *r, qs_json_at *rec, qs_diag *d);
void qs_jsonl_close(qs_jsonl *r);   /* safe on a zeroed or closed reader */

/* Writing: the JSON string literal of s, quotes included, into buf (always
 * NUL-terminated when buf_bytes > 0).  '"' and '\\' get a backslash, bytes
 * below 0x20 become \u00XX, every other byte (UTF-8) passes through.  Returns
 * the length of the whole literal, like snprintf: >= buf_bytes means it was cut. */
size_t qs_json_quote(char *buf, size_t buf_bytes, const char *s);
/* The same literal in a new qs_malloc'd string (qs_free it); NULL on OOM. */
char *qs_json_quote_dup(const char *s);

#endif
