/* json.c: JSON loading, typed getters with file + JSON path errors, JSON-lines
 * reading and string quoting (see include/qs/json.h). */
#include "qs/json.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/zlog.h"

#define QS_JSON_PATH_MAX 256
#define QS_JSON_DEPTH_MAX 32

/* ---- loading ------------------------------------------------------------ */

int qs_json_load_text(const char *text, size_t len, const char *file, long line, int flags,
                      json_t **out, qs_diag *d)
{
    json_error_t je;
    *out = NULL;
    json_t *root = json_loadb(text, len, flags & QS_JSON_NO_DUPLICATES ? JSON_REJECT_DUPLICATES : 0,
                              &je);
    if (!root) {
        if (line <= 0)
            return diag_set(d, QS_EFORMAT, file, -1, "invalid JSON at byte %d: %s", je.position,
                            je.text);
        return diag_set(d, QS_EFORMAT, file, line + (je.line > 1 ? je.line - 1 : 0),
                        "invalid JSON at column %d: %s", je.column, je.text);
    }
    if ((flags & QS_JSON_OBJECT) && !json_is_object(root)) {
        /* a one-line document (a JSON-lines record) has a line; a file's top level does not */
        long root_line = line > 0 && !memchr(text, '\n', len) ? line : -1;
        qs_json_at at = qs_json_root(root, file, root_line);
        int rc = qs_json_fail(&at, NULL, QS_EFORMAT, d, "expected object, found %s",
                              qs_json_type_name(root));
        json_decref(root);
        return rc;
    }
    *out = root;
    return 0;
}

int qs_json_load_file(const char *path, int flags, json_t **out, qs_diag *d)
{
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = fileio_read_all(path, &text, &len, d);
    if (rc)
        return rc;
    rc = qs_json_load_text(text, len, path, 1, flags, out, d);
    qs_free(text);
    return rc;
}

/* ---- places and paths --------------------------------------------------- */

qs_json_at qs_json_root(const json_t *v, const char *file, long line)
{
    return (qs_json_at){v, NULL, NULL, 0, file, line};
}

qs_json_at qs_json_key(const qs_json_at *at, const char *key)
{
    const json_t *v = json_is_object(at->v) ? json_object_get(at->v, key) : NULL;
    return (qs_json_at){v, at, key, 0, at->file, at->line};
}

qs_json_at qs_json_item(const qs_json_at *at, size_t i)
{
    const json_t *v = json_is_array(at->v) ? json_array_get(at->v, i) : NULL;
    return (qs_json_at){v, at, NULL, i, at->file, at->line};
}

const char *qs_json_type_name(const json_t *v)
{
    if (!v)
        return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

static int json_key_is_plain(const char *k)
{
    if (!*k || (*k >= '0' && *k <= '9'))
        return 0;
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') ||
              *k == '_'))
            return 0;
    return 1;
}

/* appends one step (".key", "[\"k y\"]" or "[3]") at buf + *n */
static void json_path_step(char *buf, size_t buf_bytes, size_t *n, const char *key, size_t index)
{
    if (*n + 1 >= buf_bytes)
        return;
    int k;
    if (!key) {
        k = snprintf(buf + *n, buf_bytes - *n, "[%zu]", index);
    } else if (json_key_is_plain(key)) {
        k = snprintf(buf + *n, buf_bytes - *n, ".%s", key);
    } else {
        char q[QS_JSON_PATH_MAX];
        qs_json_quote(q, sizeof q, key);
        k = snprintf(buf + *n, buf_bytes - *n, "[%s]", q);
    }
    *n += k > 0 ? (size_t)k : 0;
    if (*n >= buf_bytes)
        *n = buf_bytes - 1;
}

void qs_json_path(const qs_json_at *at, char *buf, size_t buf_bytes)
{
    const qs_json_at *chain[QS_JSON_DEPTH_MAX];
    int depth = 0, skipped = 0;
    for (const qs_json_at *p = at; p && p->up; p = p->up) {
        if (depth < QS_JSON_DEPTH_MAX)
            chain[depth++] = p;
        else
            skipped = 1;   /* deeper than we print: the innermost steps are kept */
    }
    size_t n = (size_t)snprintf(buf, buf_bytes, "%s", skipped ? "$..." : "$");
    if (n >= buf_bytes)
        return;
    for (int i = depth - 1; i >= 0; i--)
        json_path_step(buf, buf_bytes, &n, chain[i]->key, chain[i]->index);
}

int qs_json_fail(const qs_json_at *at, const char *key, int code, qs_diag *d, const char *fmt,
                 ...)
{
    if (!d)
        return code;
    char path[QS_JSON_PATH_MAX], msg[QS_DIAG_MSG_MAX];
    qs_json_path(at, path, sizeof path);
    if (key) {
        size_t n = strlen(path);
        json_path_step(path, sizeof path, &n, key, 0);
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return diag_set(d, code, at->file, at->line, "%s: %s", path, msg);
}

/* ---- typed getters ------------------------------------------------------ */

/* The value a getter reads: 1 found, 0 absent (or null when null_is_absent), or
 * a negative code after reporting a container that is not an object. */
static int json_member(const qs_json_at *at, const char *key, int null_is_absent,
                       const json_t **v, qs_diag *d)
{
    if (!key) {
        *v = at->v;
    } else {
        if (!json_is_object(at->v))
            return qs_json_fail(at, NULL, QS_EFORMAT, d, "expected object, found %s",
                                qs_json_type_name(at->v));
        *v = json_object_get(at->v, key);
    }
    if (!*v || (null_is_absent && json_is_null(*v)))
        return 0;
    return 1;
}

static int json_missing(const qs_json_at *at, const char *key, qs_diag *d)
{
    if (!key)   /* an absent element or value the caller pointed at */
        return qs_json_fail(at, NULL, QS_EFORMAT, d, "expected a value, found nothing");
    return qs_json_fail(at, key, QS_EFORMAT, d, "required key is missing");
}

static int json_wrong(const qs_json_at *at, const char *key, const char *want, const json_t *v,
                      qs_diag *d)
{
    return qs_json_fail(at, key, QS_EFORMAT, d, "expected %s, found %s", want,
                        qs_json_type_name(v));
}

/* required (opt = 0) or optional (absent or null: found = 0) typed member */
static int json_typed(const qs_json_at *at, const char *key, int opt, json_type type,
                      const char *want, const json_t **v, qs_diag *d)
{
    int found = json_member(at, key, opt, v, d);
    if (found < 0)
        return found;
    if (!found)
        return opt ? 1 : json_missing(at, key, d);
    int ok = json_typeof(*v) == type || (type == JSON_REAL && json_is_integer(*v)) ||
             (type == JSON_TRUE && json_is_boolean(*v));
    return ok ? 0 : json_wrong(at, key, want, *v, d);
}

/* The scalar getters: one reader, the kind says which JSON type and C type. */
enum { JSON_KIND_STR, JSON_KIND_I64, JSON_KIND_INT, JSON_KIND_NUM, JSON_KIND_BOOL };

typedef union json_scalar {
    const char *s;
    long long i;
    double x;
} json_scalar;

/* out (a const char **, long long *, int *, double * or int * by kind) gets the
 * member, or dflt when opt and it is absent or null; integers must lie in [min, max]. */
static int json_get(const qs_json_at *at, const char *key, int opt, int kind, json_scalar dflt,
                    long long min, long long max, void *out, qs_diag *d)
{
    static const json_type type[] = {JSON_STRING, JSON_INTEGER, JSON_INTEGER, JSON_REAL, JSON_TRUE};
    static const char *const want[] = {"string", "integer", "integer", "number", "boolean"};
    const json_t *v;
    int rc = json_typed(at, key, opt, type[kind], want[kind], &v, d);
    if (rc < 0)
        return rc;
    json_scalar x = dflt;
    if (!rc && kind == JSON_KIND_STR)
        x.s = json_string_value(v);
    else if (!rc && kind == JSON_KIND_NUM)
        x.x = json_number_value(v);
    else if (!rc && kind == JSON_KIND_BOOL)
        x.i = json_is_true(v);
    else if (!rc) {
        x.i = (long long)json_integer_value(v);
        if (x.i < min || x.i > max)
            return qs_json_fail(at, key, QS_ERANGE, d,
                                "expected integer in [%lld, %lld], found %lld", min, max, x.i);
    }
    switch (kind) {
    case JSON_KIND_STR: *(const char **)out = x.s; break;
    case JSON_KIND_I64: *(long long *)out = x.i; break;
    case JSON_KIND_NUM: *(double *)out = x.x; break;
    default: *(int *)out = (int)x.i; break;   /* JSON_KIND_INT, JSON_KIND_BOOL */
    }
    return 0;
}

int qs_json_str(const qs_json_at *at, const char *key, const char **out, qs_diag *d)
{
    return json_get(at, key, 0, JSON_KIND_STR, (json_scalar){.s = NULL}, 0, 0, out, d);
}

int qs_json_str_or(const qs_json_at *at, const char *key, const char *dflt, const char **out,
                   qs_diag *d)
{
    return json_get(at, key, 1, JSON_KIND_STR, (json_scalar){.s = dflt}, 0, 0, out, d);
}

int qs_json_i64(const qs_json_at *at, const char *key, long long min, long long max,
                long long *out, qs_diag *d)
{
    return json_get(at, key, 0, JSON_KIND_I64, (json_scalar){.i = 0}, min, max, out, d);
}

int qs_json_i64_or(const qs_json_at *at, const char *key, long long min, long long max,
                   long long dflt, long long *out, qs_diag *d)
{
    return json_get(at, key, 1, JSON_KIND_I64, (json_scalar){.i = dflt}, min, max, out, d);
}

int qs_json_int(const qs_json_at *at, const char *key, long long min, long long max, int *out,
                qs_diag *d)
{
    return json_get(at, key, 0, JSON_KIND_INT, (json_scalar){.i = 0}, min, max, out, d);
}

int qs_json_int_or(const qs_json_at *at, const char *key, long long min, long long max, int dflt,
                   int *out, qs_diag *d)
{
    return json_get(at, key, 1, JSON_KIND_INT, (json_scalar){.i = dflt}, min, max, out, d);
}

int qs_json_num(const qs_json_at *at, const char *key, double *out, qs_diag *d)
{
    return json_get(at, key, 0, JSON_KIND_NUM, (json_scalar){.x = 0.0}, 0, 0, out, d);
}

int qs_json_num_or(const qs_json_at *at, const char *key, double dflt, double *out, qs_diag *d)
{
    return json_get(at, key, 1, JSON_KIND_NUM, (json_scalar){.x = dflt}, 0, 0, out, d);
}

int qs_json_bool(const qs_json_at *at, const char *key, int *out, qs_diag *d)
{
    return json_get(at, key, 0, JSON_KIND_BOOL, (json_scalar){.i = 0}, 0, 0, out, d);
}

int qs_json_bool_or(const qs_json_at *at, const char *key, int dflt, int *out, qs_diag *d)
{
    return json_get(at, key, 1, JSON_KIND_BOOL, (json_scalar){.i = dflt}, 0, 0, out, d);
}

int qs_json_arr(const qs_json_at *at, const char *key, qs_json_at *out, size_t *n, qs_diag *d)
{
    const json_t *v;
    int rc = json_typed(at, key, 0, JSON_ARRAY, "array", &v, d);
    if (rc)
        return rc;
    *out = key ? qs_json_key(at, key) : *at;
    if (n)
        *n = json_array_size(v);
    return 0;
}

int qs_json_obj(const qs_json_at *at, const char *key, qs_json_at *out, qs_diag *d)
{
    const json_t *v;
    int rc = json_typed(at, key, 0, JSON_OBJECT, "object", &v, d);
    if (rc)
        return rc;
    *out = key ? qs_json_key(at, key) : *at;
    return 0;
}

json_t *qs_json_real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* ---- JSON lines --------------------------------------------------------- */

int qs_jsonl_open(qs_jsonl *r, const char *path, int flags, qs_diag *d)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->flags = flags;
    return zlog_reader_create(&r->z, path, d);
}

int qs_jsonl_next(qs_jsonl *r, qs_json_at *rec, qs_diag *d)
{
    json_decref(r->cur);
    r->cur = NULL;
    for (;;) {
        const char *line;
        size_t len;
        int rc = zlog_next(r->z, &line, &len, &r->line, d);
        if (rc <= 0)
            return rc;
        if (len == 0)
            continue;
        if ((rc = qs_json_load_text(line, len, r->path, r->line, r->flags | QS_JSON_OBJECT,
                                    &r->cur, d)))
            return rc;
        *rec = qs_json_root(r->cur, r->path, r->line);
        return 1;
    }
}

void qs_jsonl_close(qs_jsonl *r)
{
    json_decref(r->cur);
    zlog_reader_destroy(r->z);
    r->cur = NULL;
    r->z = NULL;
}

/* ---- writing ------------------------------------------------------------ */

/* appends k bytes of the literal; once one piece does not fit, nothing more is
 * written (so a cut literal never ends inside an escape) */
static void json_quote_put(char *buf, size_t buf_bytes, size_t *n, size_t *w, const char *p,
                           size_t k)
{
    if (*w == *n && *w + k < buf_bytes) {
        memcpy(buf + *w, p, k);
        *w += k;
    }
    *n += k;
}

size_t qs_json_quote(char *buf, size_t buf_bytes, const char *s)
{
    size_t n = 0, w = 0;   /* length of the literal; bytes written */
    json_quote_put(buf, buf_bytes, &n, &w, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char esc[8] = {(char)*c};
        size_t k = 1;
        if (*c == '"' || *c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*c;
            k = 2;
        } else if (*c < 0x20) {
            k = (size_t)snprintf(esc, sizeof esc, "\\u%04x", *c);
        }
        json_quote_put(buf, buf_bytes, &n, &w, esc, k);
    }
    json_quote_put(buf, buf_bytes, &n, &w, "\"", 1);
    if (buf_bytes)
        buf[w] = 0;
    return n;
}

char *qs_json_quote_dup(const char *s)
{
    size_t n = qs_json_quote(NULL, 0, s);
    char *out = qs_malloc(n + 1);
    if (out)
        qs_json_quote(out, n + 1, s);
    return out;
}
