/* task_load.c: readers for the data layouts people have.
 *
 * - MMLU (hendrycks): per-subject CSV, no header, 6 fields: question, A, B, C,
 *   D, answer letter.  RFC 4180 quoting: "..." fields may hold commas, ""
 *   and newlines; a record's line is where it starts.
 * - HellaSwag: the official jsonl (activity_label, ctx_a, ctx_b, endings,
 *   label) with the harness's process_docs applied as the named hook; or
 *   llama.cpp's text file (6 lines a task: context, gold, 4 endings), whose
 *   contexts were pre-processed by llama.cpp's extractor and are scored as given.
 * - ARC jsonl: HF records (question string, choices {text[], label[]}) or
 *   AI2's originals (question {stem, choices [{text, label}]}), answerKey a
 *   letter or a digit, gold = its position among the labels.
 * Every bad row is an error "FILE:LINE: what was wrong"; nothing is skipped.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/prompt.h"
#include "qs/task.h"

void task_docs_free(task_doc *docs, size_t n_docs)
{
    for (size_t i = 0; docs && i < n_docs; i++) {
        qs_free(docs[i].question);
        for (int c = 0; c < docs[i].n_choices; c++)
            qs_free(docs[i].choices[c]);
        qs_free(docs[i].choices);
    }
    qs_free(docs);
}

/* Next slot of the growing doc array (zeroed), or NULL on OOM. */
static task_doc *task_doc_push(task_doc **docs, size_t *n, size_t *cap)
{
    task_doc *p = qs_grow(*docs, cap, *n + 1, sizeof *p, 256);
    if (!p)
        return NULL;
    *docs = p;
    task_doc *t = &(*docs)[(*n)++];
    memset(t, 0, sizeof *t);
    t->subject = -1;
    return t;
}

static int task_doc_choices_alloc(task_doc *t, int n)
{
    t->choices = qs_calloc((size_t)n, sizeof *t->choices);
    if (!t->choices)
        return -1;
    t->n_choices = n;
    return 0;
}

/* ---- CSV ---------------------------------------------------------------- */

#define TASK_CSV_FIELDS 6

/* Parse one record at *pos; fields are qs_malloc'd into f[] (up to max).
 * Returns number of fields (>= 1), 0 at end of input, negative on error. */
static int task_csv_record(const char *s, size_t len, size_t *pos, long *line, char **f, int max,
                           const char *path, qs_diag *d)
{
    size_t p = *pos;
    if (p >= len)
        return 0;
    long start_line = *line;
    int nf = 0;
    for (;;) {
        size_t cap = 64, n = 0;
        char *buf = qs_malloc(cap);
        if (!buf)
            return diag_set(d, QS_ENOMEM, path, start_line, "out of memory");
        int quoted = p < len && s[p] == '"';
        if (quoted)
            p++;
        for (;;) {
            if (p >= len) {
                if (quoted) {
                    qs_free(buf);
                    return diag_set(d, QS_EFORMAT, path, start_line,
                                    "quoted field not closed before end of file");
                }
                break;
            }
            char c = s[p];
            if (quoted && c == '"') {
                if (p + 1 < len && s[p + 1] == '"') {
                    p += 2;
                    c = '"';
                } else {
                    p++;
                    if (p < len && s[p] != ',' && s[p] != '\n' && s[p] != '\r') {
                        qs_free(buf);
                        return diag_set(d, QS_EFORMAT, path, *line,
                                        "field %d: unexpected '%c' after closing quote", nf + 1, s[p]);
                    }
                    break;
                }
            } else if (!quoted && (c == ',' || c == '\n' || c == '\r')) {
                break;
            } else if (c == 0) {
                qs_free(buf);
                return diag_set(d, QS_EFORMAT, path, *line, "field %d: NUL byte", nf + 1);
            } else {
                if (c == '\n')
                    (*line)++;
                p++;
            }
            if (n + 2 > cap) {
                char *nb = qs_realloc(buf, cap *= 2);
                if (!nb) {
                    qs_free(buf);
                    return diag_set(d, QS_ENOMEM, path, start_line, "out of memory");
                }
                buf = nb;
            }
            buf[n++] = c;
        }
        buf[n] = 0;
        if (nf < max)
            f[nf] = buf;
        else
            qs_free(buf);
        nf++;
        if (p < len && s[p] == ',') {
            p++;
            continue;
        }
        if (p < len && s[p] == '\r')
            p++;
        if (p < len && s[p] == '\n') {
            p++;
            (*line)++;
        }
        break;
    }
    *pos = p;
    return nf;
}

/* The text formats (CSV, llama.cpp's HellaSwag text) hold UTF-8, as the JSON
 * ones must: the first ill-formed sequence (a stray continuation byte, a
 * truncated, overlong or surrogate sequence, a code point past U+10FFFF) is an
 * error naming its line and byte. */
static int task_utf8_check(const char *text, size_t len, const char *path, qs_diag *d)
{
    const unsigned char *s = (const unsigned char *)text;
    long line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        if (c < 0x80) {
            if (c == '\n') {
                line++;
                line_start = i + 1;
            }
            i++;
            continue;
        }
        int n = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
        int ok = n > 0 && i + (size_t)n < len;   /* its continuation bytes are in the file */
        for (int k = 1; ok && k <= n; k++)
            ok = (s[i + k] & 0xc0) == 0x80;
        if (ok && n == 2)   /* overlong, surrogates */
            ok = !(c == 0xe0 && s[i + 1] < 0xa0) && !(c == 0xed && s[i + 1] >= 0xa0);
        if (ok && n == 3)   /* overlong, past U+10FFFF */
            ok = !(c == 0xf0 && s[i + 1] < 0x90) && !(c == 0xf4 && s[i + 1] >= 0x90);
        if (!ok)
            return diag_set(d, QS_EFORMAT, path, line, "invalid UTF-8 at byte %zu of the line "
                            "(0x%02X): expected UTF-8 text", i - line_start + 1, c);
        i += (size_t)n + 1;
    }
    return 0;
}

int task_load_mmlu_csv(const char *path, int subject, task_doc **docs, size_t *n_docs,
                       size_t *cap, qs_diag *d)
{
    char *text = NULL;
    size_t len = 0, pos = 0;
    int rc = fileio_read_all(path, &text, &len, d);
    if (rc)
        return rc;
    if ((rc = task_utf8_check(text, len, path, d))) {
        qs_free(text);
        return rc;
    }
    long line = 1, doc_id = 0;
    for (;;) {
        char *f[TASK_CSV_FIELDS] = {0};
        long rec_line = line;
        if (pos < len && (text[pos] == '\n' || text[pos] == '\r')) {
            rc = diag_set(d, QS_EFORMAT, path, rec_line, "empty row (expected %d fields)",
                          TASK_CSV_FIELDS);
            break;
        }
        int nf = task_csv_record(text, len, &pos, &line, f, TASK_CSV_FIELDS, path, d);
        if (nf <= 0) {   /* end, or an error after some fields were stored */
            for (int i = 0; i < TASK_CSV_FIELDS; i++)
                qs_free(f[i]);
            rc = nf;
            break;
        }
        int bad = 0;
        if (nf != TASK_CSV_FIELDS) {
            rc = diag_set(d, QS_EFORMAT, path, rec_line,
                          "expected %d fields (question, A, B, C, D, answer), found %d",
                          TASK_CSV_FIELDS, nf);
            bad = 1;
        } else if (strlen(f[5]) != 1 || f[5][0] < 'A' || f[5][0] > 'D') {
            rc = diag_set(d, QS_EFORMAT, path, rec_line,
                          "answer (field 6): expected A, B, C or D, found '%.40s'", f[5]);
            bad = 1;
        }
        task_doc *t = bad ? NULL : task_doc_push(docs, n_docs, cap);
        if (!bad && (!t || task_doc_choices_alloc(t, 4))) {
            rc = diag_set(d, QS_ENOMEM, path, rec_line, "out of memory");
            bad = 1;
        }
        if (bad) {
            for (int i = 0; i < TASK_CSV_FIELDS && i < nf; i++)
                qs_free(f[i]);
            break;
        }
        t->question = f[0];
        for (int i = 0; i < 4; i++)
            t->choices[i] = f[1 + i];
        t->gold = f[5][0] - 'A';
        qs_free(f[5]);
        t->subject = subject;
        t->doc_id = doc_id++;
        t->line = rec_line;
    }
    qs_free(text);
    return rc;
}

/* ---- line splitting for the text / jsonl formats ------------------------ */

typedef struct task_lines {
    char *text;
    size_t len, pos;
    long line;
} task_lines;

/* Next line (NUL-terminated in place, without "\r\n"); 0 at end. */
static int task_lines_next(task_lines *tl, char **out, size_t *out_len)
{
    if (tl->pos >= tl->len)
        return 0;
    char *s = tl->text + tl->pos;
    char *nl = memchr(s, '\n', tl->len - tl->pos);
    size_t n = nl ? (size_t)(nl - s) : tl->len - tl->pos;
    tl->pos += n + (nl ? 1 : 0);
    tl->line++;
    if (n && s[n - 1] == '\r')
        n--;
    s[n] = 0;
    *out = s;
    *out_len = n;
    return 1;
}

static int task_strdup_into(char **dst, const char *s, const char *path, long line, qs_diag *d)
{
    *dst = qs_strdup(s);
    return *dst ? 0 : diag_set(d, QS_ENOMEM, path, line, "out of memory");
}

static int task_path_ends(const char *path, const char *suffix)
{
    size_t n = strlen(path), m = strlen(suffix);
    return n >= m && !strcmp(path + n - m, suffix);
}

/* ---- HellaSwag ---------------------------------------------------------- */

static int task_hellaswag_text(task_lines *tl, const char *path, task_doc **docs, size_t *n_docs,
                               size_t *cap, qs_diag *d)
{
    char *l[6];
    size_t ln;
    long doc_id = 0;
    for (;;) {
        long start = tl->line + 1;
        int got = 0;
        while (got < 6 && task_lines_next(tl, &l[got], &ln)) {
            if (strlen(l[got]) != ln)
                return diag_set(d, QS_EFORMAT, path, tl->line, "NUL byte inside the line");
            got++;
        }
        if (got == 0)
            return 0;
        if (got < 6)
            return diag_set(d, QS_ETRUNC, path, start,
                            "task %ld: expected 6 lines (context, gold, 4 endings), found %d",
                            doc_id, got);
        char *end;
        long gold = strtol(l[1], &end, 10);
        if (end == l[1] || *end || gold < 0 || gold > 3)
            return diag_set(d, QS_EFORMAT, path, start + 1,
                            "gold label: expected 0, 1, 2 or 3, found '%.40s'", l[1]);
        for (int i = 0; i < 6; i++)
            if (i != 1 && !l[i][0])
                return diag_set(d, QS_EFORMAT, path, start + i, "empty %s",
                                i ? "ending" : "context");
        task_doc *t = task_doc_push(docs, n_docs, cap);
        if (!t || task_doc_choices_alloc(t, 4))
            return diag_set(d, QS_ENOMEM, path, start, "out of memory");
        t->gold = (int)gold;
        t->doc_id = doc_id++;
        t->line = start;
        int rc = task_strdup_into(&t->question, l[0], path, start, d);
        for (int i = 0; i < 4 && !rc; i++)
            rc = task_strdup_into(&t->choices[i], l[2 + i], path, start, d);
        if (rc)
            return rc;
    }
}

static int task_hellaswag_doc(const qs_json_at *o, int apply_hook, task_doc *t, qs_diag *d)
{
    const char *path = o->file, *act, *a, *b;
    long line = o->line;
    qs_json_at endings;
    size_t n_endings;
    int rc;
    if ((rc = qs_json_str(o, "activity_label", &act, d)) || (rc = qs_json_str(o, "ctx_a", &a, d)) ||
        (rc = qs_json_str(o, "ctx_b", &b, d)) ||
        (rc = qs_json_arr(o, "endings", &endings, &n_endings, d)))
        return rc;
    if (n_endings < 2)
        return qs_json_fail(o, "endings", QS_EFORMAT, d, "expected >= 2 strings, found %zu",
                            n_endings);
    const json_t *label = qs_json_key(o, "label").v;
    long gold = -1;
    if (json_is_integer(label))
        gold = (long)json_integer_value(label);
    else if (json_is_string(label) && json_string_length(label)) {
        char *end;
        gold = strtol(json_string_value(label), &end, 10);
        if (*end)
            gold = -1;
    }
    int n = (int)n_endings;
    if (gold < 0 || gold >= n)
        return json_is_string(label)
                   ? qs_json_fail(o, "label", QS_EFORMAT, d, "expected an index 0..%d, found \"%s\"",
                                  n - 1, json_string_value(label))
                   : qs_json_fail(o, "label", QS_EFORMAT, d, "expected an index 0..%d, found %s",
                                  n - 1, qs_json_type_name(label));
    if (task_doc_choices_alloc(t, n))
        return diag_set(d, QS_ENOMEM, path, line, "out of memory");
    t->gold = (int)gold;
    /* process_docs: ctx = ctx_a + " " + ctx_b.capitalize(); query = preprocess(
     * activity_label + ": " + ctx); choices = preprocess(ending) */
    char *cap_b = prompt_capitalize(b);
    size_t qn = strlen(act) + strlen(a) + (cap_b ? strlen(cap_b) : 0) + 4;
    char *q = qs_malloc(qn);
    if (!cap_b || !q) {
        qs_free(cap_b);
        qs_free(q);
        return diag_set(d, QS_ENOMEM, path, line, "out of memory");
    }
    snprintf(q, qn, "%s: %s %s", act, a, cap_b);
    qs_free(cap_b);
    t->question = apply_hook ? prompt_hellaswag_preprocess(q) : qs_strdup(q);
    qs_free(q);
    if (!t->question)
        return diag_set(d, QS_ENOMEM, path, line, "out of memory");
    for (int i = 0; i < n; i++) {
        qs_json_at ei = qs_json_item(&endings, (size_t)i);
        const char *e;
        if ((rc = qs_json_str(&ei, NULL, &e, d)))
            return rc;
        t->choices[i] = apply_hook ? prompt_hellaswag_preprocess(e) : qs_strdup(e);
        if (!t->choices[i])
            return diag_set(d, QS_ENOMEM, path, line, "out of memory");
    }
    return 0;
}

/* ---- ARC ---------------------------------------------------------------- */

static int task_arc_doc(const qs_json_at *o, task_doc *t, qs_diag *d)
{
    const char *path = o->file, *stem, *key;
    long line = o->line;
    qs_json_at q = qs_json_key(o, "question"), texts, labels, list, ch;
    size_t n, n_labels;
    int rc, ai2 = json_is_object(q.v);
    if (json_is_string(q.v)) {   /* HF: question, choices {text: [], label: []} */
        stem = json_string_value(q.v);
        if ((rc = qs_json_obj(o, "choices", &ch, d)) ||
            (rc = qs_json_arr(&ch, "text", &texts, &n, d)) ||
            (rc = qs_json_arr(&ch, "label", &labels, &n_labels, d)))
            return rc;
        if (n != n_labels)
            return qs_json_fail(&ch, NULL, QS_EFORMAT, d,
                                "expected \"text\" and \"label\" of equal length, found %zu and %zu",
                                n, n_labels);
    } else if (ai2) {   /* AI2: question {stem, choices: [{text, label}]} */
        if ((rc = qs_json_str(&q, "stem", &stem, d)) ||
            (rc = qs_json_arr(&q, "choices", &list, &n, d)))
            return rc;
    } else
        return qs_json_fail(o, "question", QS_EFORMAT, d,
                            "expected string (HF layout) or object (AI2 layout), found %s",
                            qs_json_type_name(q.v));
    if ((rc = qs_json_str(o, "answerKey", &key, d)))
        return rc;
    if (!*key)
        return qs_json_fail(o, "answerKey", QS_EFORMAT, d, "expected a label, found \"\"");
    if (n < 2 || n > 16)
        return diag_set(d, QS_EFORMAT, path, line, "expected 2 to 16 choices, found %zu", n);
    if (task_doc_choices_alloc(t, (int)n))
        return diag_set(d, QS_ENOMEM, path, line, "out of memory");
    if (!(t->question = qs_strdup(stem)))
        return diag_set(d, QS_ENOMEM, path, line, "out of memory");
    t->gold = -1;
    const char *seen[16];
    for (size_t i = 0; i < n; i++) {
        const char *text, *lab;
        if (ai2) {
            qs_json_at c = qs_json_item(&list, i);
            if ((rc = qs_json_str(&c, "text", &text, d)) || (rc = qs_json_str(&c, "label", &lab, d)))
                return rc;
        } else {
            qs_json_at ti = qs_json_item(&texts, i), li = qs_json_item(&labels, i);
            if ((rc = qs_json_str(&ti, NULL, &text, d)) || (rc = qs_json_str(&li, NULL, &lab, d)))
                return rc;
        }
        for (size_t j = 0; j < i; j++)   /* the answer must name one choice */
            if (!strcmp(seen[j], lab))
                return diag_set(d, QS_EFORMAT, path, line, "label '%.20s' appears twice (choices %zu "
                                "and %zu); expected distinct labels", lab, j, i);
        seen[i] = lab;
        if (!strcmp(lab, key))
            t->gold = (int)i;
        if (!(t->choices[i] = qs_strdup(text)))
            return diag_set(d, QS_ENOMEM, path, line, "out of memory");
    }
    if (t->gold < 0)
        return diag_set(d, QS_EFORMAT, path, line, "answerKey '%.20s' is not one of the choice labels",
                        key);
    return 0;
}

/* ---- jsonl driver ------------------------------------------------------- */

enum { TASK_JSONL_HELLASWAG, TASK_JSONL_ARC };

static int task_jsonl_load(task_lines *tl, int kind, int apply_hook, const char *path,
                           task_doc **docs, size_t *n_docs, size_t *cap, qs_diag *d)
{
    char *l;
    size_t ln;
    long doc_id = 0;
    while (task_lines_next(tl, &l, &ln)) {
        if (!ln)
            return diag_set(d, QS_EFORMAT, path, tl->line, "empty line (expected one JSON object)");
        if (strlen(l) != ln)
            return diag_set(d, QS_EFORMAT, path, tl->line, "NUL byte inside the line");
        json_t *o;
        int rc = qs_json_load_text(l, ln, path, tl->line, QS_JSON_OBJECT, &o, d);
        if (rc)
            return rc;
        qs_json_at rec = qs_json_root(o, path, tl->line);
        task_doc *t = task_doc_push(docs, n_docs, cap);
        if (!t)
            rc = diag_set(d, QS_ENOMEM, path, tl->line, "out of memory");
        else {
            t->doc_id = doc_id++;
            t->line = tl->line;
            rc = kind == TASK_JSONL_ARC ? task_arc_doc(&rec, t, d)
                                        : task_hellaswag_doc(&rec, apply_hook, t, d);
        }
        json_decref(o);
        if (rc)
            return rc;
    }
    return 0;
}

int task_load_hellaswag(const char *path, int apply_hook, task_doc **docs, size_t *n_docs,
                        size_t *cap, int *as_given, qs_diag *d)
{
    task_lines tl = {0};
    int rc = fileio_read_all(path, &tl.text, &tl.len, d);
    if (rc)
        return rc;
    int text = task_path_ends(path, ".txt") || task_path_ends(path, ".txt.zst");
    *as_given = text;
    if (!text)
        rc = task_jsonl_load(&tl, TASK_JSONL_HELLASWAG, apply_hook, path, docs, n_docs, cap, d);
    else if (!(rc = task_utf8_check(tl.text, tl.len, path, d)))
        rc = task_hellaswag_text(&tl, path, docs, n_docs, cap, d);
    qs_free(tl.text);
    return rc;
}

int task_load_arc(const char *path, task_doc **docs, size_t *n_docs, size_t *cap, qs_diag *d)
{
    task_lines tl = {0};
    int rc = fileio_read_all(path, &tl.text, &tl.len, d);
    if (rc)
        return rc;
    rc = task_jsonl_load(&tl, TASK_JSONL_ARC, 0, path, docs, n_docs, cap, d);
    qs_free(tl.text);
    return rc;
}
