/* prompt.c: harness prompt strings (spec/tasks.md 0.1, 0.2, 1-3).
 *
 * Template fields: {question} the doc's question as stored, {question|strip}
 * the same with Python str.strip() applied, {choices[i]} choice i verbatim,
 * {subject} the MMLU subject id, {subject_words} the id with '_' -> ' ',
 * "{{" and "}}" literal braces.  Nothing else is accepted.
 */
#include <stdio.h>
#include <string.h>

#include "qs/mem.h"
#include "qs/prompt.h"

/* ---- UTF-8 helpers ---------------------------------------------------- */

/* Decode one code point at s (n bytes left); *len gets its byte length.
 * Invalid bytes decode as themselves, one byte long. */
static unsigned prompt_utf8_decode(const unsigned char *s, size_t n, int *len)
{
    unsigned c = s[0];
    int need = c >= 0xf0 && c < 0xf8 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
    if (c < 0x80 || (size_t)need >= n || c >= 0xf8) {
        *len = 1;
        return c;
    }
    unsigned v = c & (0x3fu >> need);
    for (int i = 1; i <= need; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            *len = 1;
            return c;
        }
        v = (v << 6) | (s[i] & 0x3fu);
    }
    *len = need + 1;
    return v;
}

static int prompt_utf8_encode(unsigned v, char *out)
{
    if (v < 0x80) {
        out[0] = (char)v;
        return 1;
    }
    if (v < 0x800) {
        out[0] = (char)(0xc0 | (v >> 6));
        out[1] = (char)(0x80 | (v & 0x3f));
        return 2;
    }
    if (v < 0x10000) {
        out[0] = (char)(0xe0 | (v >> 12));
        out[1] = (char)(0x80 | ((v >> 6) & 0x3f));
        out[2] = (char)(0x80 | (v & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (v >> 18));
    out[1] = (char)(0x80 | ((v >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((v >> 6) & 0x3f));
    out[3] = (char)(0x80 | (v & 0x3f));
    return 4;
}

size_t prompt_utf8_len(const char *s)
{
    size_t n = 0, len = strlen(s);
    for (size_t i = 0; i < len; n++) {
        int l;
        prompt_utf8_decode((const unsigned char *)s + i, len - i, &l);
        i += (size_t)l;
    }
    return n;
}

/* Python str.isspace() */
static int prompt_is_space(unsigned c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Byte range [*b, *e) of s without leading/trailing whitespace. */
static void prompt_strip_range(const char *s, size_t *b, size_t *e)
{
    size_t n = strlen(s), i = 0;
    const unsigned char *u = (const unsigned char *)s;
    while (i < n) {
        int l;
        if (!prompt_is_space(prompt_utf8_decode(u + i, n - i, &l)))
            break;
        i += (size_t)l;
    }
    size_t end = i, j = i;
    while (j < n) {
        int l;
        unsigned c = prompt_utf8_decode(u + j, n - j, &l);
        j += (size_t)l;
        if (!prompt_is_space(c))
            end = j;
    }
    *b = i;
    *e = end;
}

/* Simple case mapping: ASCII, Latin-1, Greek and Cyrillic basic letters. */
static unsigned prompt_case(unsigned c, int upper)
{
    if (upper) {
        if ((c >= 'a' && c <= 'z') || (c >= 0xe0 && c <= 0xfe && c != 0xf7) ||
            (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) || (c >= 0x430 && c <= 0x44f))
            return c - 0x20;
        if (c >= 0x450 && c <= 0x45f)
            return c - 0x50;
        return c;
    }
    if ((c >= 'A' && c <= 'Z') || (c >= 0xc0 && c <= 0xde && c != 0xd7) ||
        (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) || (c >= 0x410 && c <= 0x42f))
        return c + 0x20;
    if (c >= 0x400 && c <= 0x40f)
        return c + 0x50;
    return c;
}

char *prompt_capitalize(const char *text)
{
    size_t n = strlen(text), o = 0;
    char *out = qs_malloc(n + 1);
    if (!out)
        return NULL;
    const unsigned char *u = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        int l;
        unsigned c = prompt_utf8_decode(u + i, n - i, &l);
        if (l == 1 && c >= 0x80)   /* invalid byte: copied as is */
            out[o++] = text[i];
        else   /* every mapped pair has the same UTF-8 length */
            o += (size_t)prompt_utf8_encode(prompt_case(c, i == 0), out + o);
        i += (size_t)l;
    }
    out[o] = 0;
    return out;
}

char *prompt_hellaswag_preprocess(const char *text)
{
    size_t b, e;
    prompt_strip_range(text, &b, &e);
    size_t n = e - b;
    /* " [title]" -> ". " never grows the string */
    char *s1 = qs_malloc(n + 1), *s2 = qs_malloc(n + 1), *s3 = qs_malloc(n + 1);
    if (!s1 || !s2 || !s3) {
        qs_free(s1);
        qs_free(s2);
        qs_free(s3);
        return NULL;
    }
    size_t o = 0;
    for (size_t i = b; i < e;) {
        if (e - i >= 8 && !memcmp(text + i, " [title]", 8)) {
            s1[o++] = '.';
            s1[o++] = ' ';
            i += 8;
        } else
            s1[o++] = text[i++];
    }
    s1[o] = 0;
    /* re.sub(r"\[.*?\]", "", s): '.' does not match a newline */
    size_t m = 0;
    for (size_t i = 0; i < o;) {
        if (s1[i] == '[') {
            size_t j = i + 1;
            while (j < o && s1[j] != ']' && s1[j] != '\n')
                j++;
            if (j < o && s1[j] == ']') {
                i = j + 1;
                continue;
            }
        }
        s2[m++] = s1[i++];
    }
    s2[m] = 0;
    /* "  " -> " ", one left-to-right non-overlapping pass */
    size_t k = 0;
    for (size_t i = 0; i < m;) {
        if (i + 1 < m && s2[i] == ' ' && s2[i + 1] == ' ') {
            s3[k++] = ' ';
            i += 2;
        } else
            s3[k++] = s2[i++];
    }
    s3[k] = 0;
    qs_free(s1);
    qs_free(s2);
    return s3;
}

/* ---- templates ----------------------------------------------------------- */

typedef struct prompt_buf {
    char *s;
    size_t n, cap;
    int oom;
} prompt_buf;

static void prompt_buf_add(prompt_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    char *p = qs_grow(b->s, &b->cap, b->n + n + 1, 1, 256);
    if (!p) {
        b->oom = 1;
        return;
    }
    b->s = p;
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void prompt_buf_str(prompt_buf *b, const char *s)
{
    prompt_buf_add(b, s, strlen(s));
}

/* Parse the field at tmpl (just after '{'); *end -> after '}'.  kind: 1 question,
 * 2 question|strip, 3 choices[idx], 4 subject, 5 subject_words; 0 unknown. */
static int prompt_field(const char *tmpl, const char **end, int *idx)
{
    const char *close = strchr(tmpl, '}');
    if (!close)
        return -1;
    size_t n = (size_t)(close - tmpl);
    *end = close + 1;
    *idx = 0;
    if (n == 8 && !memcmp(tmpl, "question", 8))
        return 1;
    if (n == 14 && !memcmp(tmpl, "question|strip", 14))
        return 2;
    if (n == 7 && !memcmp(tmpl, "subject", 7))
        return 4;
    if (n == 13 && !memcmp(tmpl, "subject_words", 13))
        return 5;
    if (n >= 10 && !memcmp(tmpl, "choices[", 8) && tmpl[n - 1] == ']') {
        int v = 0;
        for (const char *p = tmpl + 8; p < tmpl + n - 1; p++) {
            if (*p < '0' || *p > '9' || v > 1000)
                return 0;
            v = v * 10 + (*p - '0');
        }
        *idx = v;
        return 3;
    }
    return 0;
}

static int prompt_template_walk(const char *tmpl, const task_def *def, const task_doc *doc,
                                prompt_buf *b, const char *path, qs_diag *d)
{
    for (const char *p = tmpl; *p;) {
        if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
            if (b)
                prompt_buf_add(b, p, 1);
            p += 2;
            continue;
        }
        if (*p == '}')
            return diag_set(d, QS_EFORMAT, path, -1, "template \"%.60s\": lone '}' (write '}}')",
                            tmpl);
        if (*p != '{') {
            const char *q = p;
            while (*q && *q != '{' && *q != '}')
                q++;
            if (b)
                prompt_buf_add(b, p, (size_t)(q - p));
            p = q;
            continue;
        }
        const char *end;
        int idx, kind = prompt_field(p + 1, &end, &idx);
        if (kind <= 0)
            return diag_set(d, QS_EFORMAT, path, -1,
                            "template field '%.*s' unknown: expected {question}, {question|strip}, "
                            "{choices[i]}, {subject} or {subject_words}",
                            kind < 0 ? (int)strlen(p) : (int)(end - p), p);
        p = end;
        if (!b)
            continue;
        const char *subj = doc && def && doc->subject >= 0 && doc->subject < def->n_subjects
                               ? def->subjects[doc->subject] : "";
        if (kind == 1)
            prompt_buf_str(b, doc->question);
        else if (kind == 2) {
            size_t s, e;
            prompt_strip_range(doc->question, &s, &e);
            prompt_buf_add(b, doc->question + s, e - s);
        } else if (kind == 3) {
            if (idx >= doc->n_choices)
                return diag_set(d, QS_EFORMAT, path, doc->line,
                                "template needs choice %d, the document has %d", idx, doc->n_choices);
            prompt_buf_str(b, doc->choices[idx]);
        } else if (kind == 4)
            prompt_buf_str(b, subj);
        else
            for (const char *c = subj; *c; c++)
                prompt_buf_add(b, *c == '_' ? " " : c, 1);
    }
    return 0;
}

/* Hands the built string to *out when rc is 0 and nothing failed to fit, else frees it. */
static int prompt_buf_finish(prompt_buf *b, int rc, char **out, qs_diag *d)
{
    if (!rc && b->oom)
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory building a prompt");
    if (rc) {
        qs_free(b->s);
        return rc;
    }
    *out = b->s;
    return 0;
}

int prompt_template_uses_subject(const char *tmpl)
{
    for (const char *p = tmpl; p && *p; p++) {
        if (p[0] == '{' && p[1] == '{') {
            p++;
            continue;
        }
        const char *end;
        int idx;
        if (*p == '{') {
            int kind = prompt_field(p + 1, &end, &idx);
            if (kind == 4 || kind == 5)
                return 1;
        }
    }
    return 0;
}

int prompt_template_check(const char *tmpl, const char *path, qs_diag *d)
{
    return prompt_template_walk(tmpl, NULL, NULL, NULL, path, d);
}

/* Expand a template for `doc` into a qs_malloc'd string. */
static int prompt_template_expand(const char *tmpl, const task_def *def, const task_doc *doc,
                                  char **out, qs_diag *d)
{
    prompt_buf b = {0};
    prompt_buf_add(&b, "", 0);
    int rc = prompt_template_walk(tmpl, def, doc, &b, def ? def->path : NULL, d);
    return prompt_buf_finish(&b, rc, out, d);
}

const char *prompt_choice(const task_def *def, const task_doc *doc, int i)
{
    return def->n_fixed_choices ? def->fixed_choices[i] : doc->choices[i];
}

int prompt_n_choices(const task_def *def, const task_doc *doc)
{
    return def->n_fixed_choices ? def->n_fixed_choices : doc->n_choices;
}

/* The file the few-shot rows came from, for messages: the data file whose name
 * holds the few-shot split (and the subject's name, MMLU's <subject>_dev.csv);
 * NULL when none does. */
static const char *prompt_shot_file(const task_def *def, const task_data *td, int subject)
{
    const char *subj = subject >= 0 && subject < def->n_subjects ? def->subjects[subject] : NULL;
    for (int i = 0; i < td->n_files; i++) {
        const char *base = strrchr(td->files[i].path, '/');
        base = base ? base + 1 : td->files[i].path;
        if (strstr(base, def->fewshot_split) && (!subj || strstr(base, subj)))
            return td->files[i].path;
    }
    return NULL;
}

int prompt_shots_pick(const task_def *def, const task_data *td, const task_doc *doc, int k,
                      pyrand *rng, size_t *out, qs_diag *d)
{
    if (k <= 0)
        return 0;
    if (def->sampler == TASK_SAMPLER_FIRST_N) {
        int got = 0;
        for (size_t i = 0; i < td->n_shots && got < k; i++)
            if (td->shots[i].subject == doc->subject)
                out[got++] = i;
        if (got < k)   /* per subject: name it (its dev file is <subject>_dev.csv) */
            return diag_set(d, QS_EINVAL, prompt_shot_file(def, td, doc->subject), -1,
                            "%s%s%s: %d-shot needs %d %s rows, found %d",
                            def->name, doc->subject >= 0 ? " subject " : "",
                            doc->subject >= 0 && doc->subject < def->n_subjects
                                ? def->subjects[doc->subject]
                                : "",
                            k, k, def->fewshot_split, got);
        return 0;
    }
    if ((size_t)k > td->n_shots)
        return diag_set(d, QS_EINVAL, prompt_shot_file(def, td, -1), -1,
                        "%s: %d-shot needs %d %s rows, found %zu", def->name,
                        k, k, def->fewshot_split, td->n_shots);
    return pyrand_sample(rng, td->n_shots, (size_t)k, out, d);
}

int prompt_context_build(const task_def *def, const task_data *td, const task_doc *doc,
                         const size_t *shots, int k, char **out, qs_diag *d)
{
    prompt_buf b = {0};
    char *part = NULL;
    int rc = prompt_template_expand(def->description, def, doc, &part, d);
    if (rc)
        return rc;
    prompt_buf_str(&b, part);
    qs_free(part);
    for (int i = 0; i < k && !rc; i++) {
        const task_doc *s = &td->shots[shots[i]];
        rc = prompt_template_expand(def->doc_to_text, def, s, &part, d);
        if (rc)
            break;
        prompt_buf_str(&b, part);
        qs_free(part);
        prompt_buf_str(&b, def->target_delimiter);
        prompt_buf_str(&b, prompt_choice(def, s, s->gold));
        prompt_buf_str(&b, def->fewshot_delimiter);
    }
    if (!rc && !(rc = prompt_template_expand(def->doc_to_text, def, doc, &part, d))) {
        prompt_buf_str(&b, part);
        qs_free(part);
    }
    return prompt_buf_finish(&b, rc, out, d);
}
