/* hfinit_config.c: the config.json an initialised checkpoint carries: the
 * input text with its top-level "torch_dtype" set (see include/qs/hfinit.h).
 *
 * The text is edited, not re-serialised, so every other byte stays as the user
 * wrote it (a JSON round trip would print 1e-05 as 1.0000000000000001e-05 and
 * reorder nothing useful).  The scanner only walks text jansson has already
 * accepted, and the result is parsed again and compared, so an edit that went
 * wrong is an error, never a silently different config.
 */
#include <jansson.h>
#include <string.h>

#include "qs/hfinit.h"
#include "qs/json.h"
#include "qs/mem.h"

static size_t hfic_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* s[i] == '"': index just past the closing quote */
static size_t hfic_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return n;
}

/* 1 when the string literal s[0..n) (quotes included) is `want` once unescaped, as
 * jansson compares keys: "torch\u005fdtype" is the key torch_dtype */
static int hfic_key_is(const char *s, size_t n, const char *want)
{
    size_t wn = strlen(want);
    if (n == wn + 2 && !memcmp(s + 1, want, wn))
        return 1;
    if (!memchr(s, '\\', n))
        return 0;
    json_t *k = json_loadb(s, n, JSON_DECODE_ANY, NULL);
    int same = json_is_string(k) && json_string_length(k) == wn &&
               !memcmp(json_string_value(k), want, wn);
    json_decref(k);
    return same;
}

/* index just past the JSON value starting at s[i] */
static size_t hfic_value(const char *s, size_t n, size_t i)
{
    if (i >= n)
        return n;
    if (s[i] == '"')
        return hfic_string(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        for (; i < n; i++) {
            if (s[i] == '"')
                i = hfic_string(s, n, i) - 1;
            else if (s[i] == '{' || s[i] == '[')
                depth++;
            else if ((s[i] == '}' || s[i] == ']') && --depth == 0)
                return i + 1;
        }
        return n;
    }
    while (i < n && !strchr(",}] \t\r\n", s[i]))
        i++;
    return i;
}

/* Parses text (duplicate keys refused) into c and checks its torch_dtype. */
static int hfic_check(const char *text, size_t n, const char *torch_dtype, llama_config *c,
                      const char *path, qs_diag *d)
{
    json_t *root;
    int rc = qs_json_load_text(text, n, path, 1, QS_JSON_NO_DUPLICATES | QS_JSON_OBJECT, &root, d);
    if (rc)
        return rc;
    const char *td = json_string_value(json_object_get(root, "torch_dtype"));
    int same = td && !strcmp(td, torch_dtype);
    json_decref(root);
    if (!same)
        return diag_set(d, QS_EFORMAT, path, -1, "cannot set 'torch_dtype' to '%s' in this file",
                        torch_dtype);
    return hfconfig_parse(c, text, n, path, d);
}

int hfinit_config_text(const char *text, size_t n, const char *torch_dtype, char **out,
                       size_t *out_n, const char *path, qs_diag *d)
{
    *out = NULL;
    *out_n = 0;
    llama_config before, after;
    int rc = hfconfig_parse(&before, text, n, path, d);
    if (rc)
        return rc;
    char value[64];
    snprintf(value, sizeof value, "\"%s\"", torch_dtype);
    size_t vn = strlen(value), cap = n + (n / 13 + 2) * (vn + 32) + 64, w = 0;
    char *o = qs_malloc(cap);
    if (!o)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    size_t i = hfic_ws(text, n, 0), copied = 0, last_end = 0;
    int found = 0;
    if (i < n && text[i] == '{') {
        i = hfic_ws(text, n, i + 1);
        while (i < n && text[i] == '"') {
            size_t k_end = hfic_string(text, n, i);
            int is_dtype = hfic_key_is(text + i, k_end - i, "torch_dtype");
            size_t v = hfic_ws(text, n, k_end);
            v = hfic_ws(text, n, v + 1);   /* past ':' */
            size_t v_end = hfic_value(text, n, v);
            if (is_dtype) {   /* copy up to the value, then the new value */
                memcpy(o + w, text + copied, v - copied);
                w += v - copied;
                memcpy(o + w, value, vn);
                w += vn;
                copied = v_end;
                found = 1;
            }
            last_end = v_end;
            i = hfic_ws(text, n, v_end);
            if (i < n && text[i] == ',')
                i = hfic_ws(text, n, i + 1);
        }
    }
    if (!found && last_end) {   /* a new last member */
        memcpy(o + w, text + copied, last_end - copied);
        w += last_end - copied;
        w += (size_t)snprintf(o + w, cap - w, ",\n  \"torch_dtype\": %s", value);
        copied = last_end;
    }
    memcpy(o + w, text + copied, n - copied);
    w += n - copied;
    o[w] = 0;
    rc = hfic_check(o, w, torch_dtype, &after, path, d);
    if (!rc) {
        memcpy(after.torch_dtype, before.torch_dtype, sizeof after.torch_dtype);
        if (memcmp(&before, &after, sizeof before))
            rc = diag_set(d, QS_EFORMAT, path, -1,
                          "setting 'torch_dtype' changed how the config parses");
    }
    if (rc) {
        qs_free(o);
        return rc;
    }
    *out = o;
    *out_n = w;
    return 0;
}
