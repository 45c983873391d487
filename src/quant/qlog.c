/* qlog.c: writer and reader of RUN_DIR/quant.jsonl.zst (layout in include/qs/qlog.h).
 *
 * The writer formats JSON by hand, per quantizer (never per element): copies and
 * a 9-significant-digit float formatter (printf's %.9g cost ~60% of a step's
 * log time), so a step costs ~n_quant x 12 numbers plus one zstd frame.  Nine
 * digits read back to the identical float, so a replay over the log reproduces
 * the run's decisions bit for bit.  The reader uses
 * Jansson, one line at a time, through the per-record rules (qlog_record_kind,
 * qlog_header_parse, qlog_step_parse) that heatmap's reader shares, so satstat,
 * replay and heatmap accept and refuse the same records with the same message.
 */
#include "qs/qlog.h"

#include <jansson.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/zlog.h"

struct qlog_writer {
    zlog_writer *z;
    char *path;
    int n_quant;
    char **names;                      /* [n_quant], JSON-escaped already */
    char est[2][AMAX_NAME_MAX];        /* [0] recipe estimator, [1] "current" */
    char *buf;
    size_t len, cap;
};

void qlog_row_from_record(const quant_record *rec, qlog_row *row)
{
    row->mode = rec->mode;
    row->est_idx = rec->fallback ? 1 : 0;
    row->pred_amax = row->amax = row->scale = NAN;
    row->clip_rate = row->under_rate = row->qsnr_db = NAN;
    row->n = row->clip = row->under = -1;
    if (rec->mode == QUANT_MODE_NONE) {
        row->est_idx = -1;
        return;
    }
    row->pred_amax = rec->has_pred ? rec->pred_amax : NAN;
    row->amax = rec->amax;
    row->scale = rec->scale;
    row->n = (long long)rec->n_elems;
    row->clip = (long long)rec->n_clip;
    row->clip_rate = rec->n_elems ? (float)((double)rec->n_clip / (double)rec->n_elems) : 0.0f;
    if (rec->mode != QUANT_MODE_QUANT)
        return;
    row->under = (long long)rec->n_under;
    row->under_rate = rec->n_elems ? (float)((double)rec->n_under / (double)rec->n_elems) : 0.0f;
    if (rec->has_sq && rec->sq_err > 0.0 && rec->sq_sum > 0.0)
        row->qsnr_db = (float)(10.0 * log10(rec->sq_sum / rec->sq_err));
}

/* ---------------------------------------------------------------- writer */

static int wbuf_printf(qlog_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int wbuf_printf(qlog_writer *w, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(w->buf + w->len, w->cap - w->len, fmt, ap);
        va_end(ap);
        if (k < 0)
            return QS_EINVAL;
        if ((size_t)k < w->cap - w->len) {
            w->len += (size_t)k;
            return 0;
        }
        size_t cap = w->cap * 2 + (size_t)k + 64;
        char *nb = qs_realloc(w->buf, cap);
        if (!nb)
            return QS_ENOMEM;
        w->buf = nb;
        w->cap = cap;
    }
}

static int wbuf_reserve(qlog_writer *w, size_t extra)
{
    if (w->cap - w->len > extra)
        return 0;
    size_t cap = w->cap * 2 + extra + 64;
    char *nb = qs_realloc(w->buf, cap);
    if (!nb)
        return QS_ENOMEM;
    w->buf = nb;
    w->cap = cap;
    return 0;
}

static int wbuf_put(qlog_writer *w, const char *str)
{
    size_t n = strlen(str);
    if (wbuf_reserve(w, n + 1))
        return QS_ENOMEM;
    memcpy(w->buf + w->len, str, n);
    w->len += n;
    return 0;
}

/* ",\"key\":" then the value; at most 48 bytes per call besides the key */
static int wbuf_key(qlog_writer *w, const char *key)
{
    size_t n = strlen(key);
    if (wbuf_reserve(w, n + 64))
        return QS_ENOMEM;
    char *p = w->buf + w->len;
    *p++ = ',';
    *p++ = '"';
    memcpy(p, key, n);
    p += n;
    *p++ = '"';
    *p++ = ':';
    w->len = (size_t)(p - w->buf);
    return 0;
}

static int wbuf_float(qlog_writer *w, const char *key, float v)
{
    if (wbuf_key(w, key))
        return QS_ENOMEM;
    if (!isfinite(v))
        return wbuf_put(w, "null");
    w->len += (size_t)qlog_float_format(w->buf + w->len, v);
    return 0;
}

static int wbuf_count(qlog_writer *w, const char *key, long long v)
{
    if (wbuf_key(w, key))
        return QS_ENOMEM;
    if (v < 0)
        return wbuf_put(w, "null");
    char tmp[24];
    int k = 0;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        w->buf[w->len++] = tmp[--k];
    return 0;
}

void qlog_writer_destroy(qlog_writer *w)
{
    if (!w)
        return;
    zlog_writer_destroy(w->z);
    for (int i = 0; w->names && i < w->n_quant; i++)
        qs_free(w->names[i]);
    qs_free(w->names);
    qs_free(w->path);
    qs_free(w->buf);
    qs_free(w);
}

/* Resume: which lines of the existing log stay (qlog_writer_create). */
typedef struct qlog_cut {
    long step;                /* records of steps >= this go */
    const char *header;       /* the header this writer would write */
    size_t header_len;
    int n_kept;
    int header_same;          /* the first kept line is exactly that header */
} qlog_cut;

static int qlog_cut_keep(void *ctx, const char *line, size_t len)
{
    qlog_cut *c = ctx;
    long step;
    int keep = zlog_line_string_is(line, len, "type", "header") ||
               (zlog_line_long(line, len, "step", &step) && step < c->step);
    if (keep && c->n_kept++ == 0)
        c->header_same = len == c->header_len && !memcmp(line, c->header, len);
    return keep;
}

/* Before a resume appends to it (and before its tail is cut), the log must read
 * as one: zstd frames as train writes them (a plain-text log took frames and
 * became unreadable), a header first; a last frame cut by a crash is fine. */
static int qlog_resume_check(const char *path, qs_diag *d)
{
    /* the first record only: the whole log of a long run is large, and the cut
     * that follows reads every line anyway */
    zlog_reader *zr = NULL;
    const char *line;
    size_t len;
    long lineno;
    int rc = zlog_reader_create(&zr, path, d);
    if (!rc) {
        int more = zlog_next(zr, &line, &len, &lineno, d);
        if (more < 0 && more != QS_ETRUNC)
            rc = more;
        else if (more == 1 && !zlog_reader_is_zstd(zr))
            rc = diag_set(d, QS_EFORMAT, path, -1, "not zstd frames as train writes them");
        else if (more == 1 && !zlog_line_string_is(line, len, "type", "header"))
            rc = diag_set(d, QS_EFORMAT, path, lineno, "the first record is not the header");
    }
    zlog_reader_destroy(zr);
    if (rc && d && d->msg[0]) {
        char why[QS_DIAG_MSG_MAX];
        snprintf(why, sizeof why, "%s", d->msg);
        snprintf(d->msg, sizeof d->msg, "cannot resume onto this quantizer log: %.400s", why);
    }
    return rc;
}

int qlog_writer_create(qlog_writer **out, const char *path, const char *run_name,
                       const quant_recipe *r, const char *const *names, int n_quant,
                       long resume_step, qs_diag *d)
{
    *out = NULL;
    qlog_writer *w = qs_calloc(1, sizeof *w);
    if (!w)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    w->n_quant = n_quant;
    w->path = qs_strdup(path);
    w->names = qs_calloc((size_t)n_quant, sizeof *w->names);
    w->cap = 4096;
    w->buf = qs_malloc(w->cap);
    int rc = (!w->path || !w->names || !w->buf) ? QS_ENOMEM : 0;
    for (int i = 0; !rc && i < n_quant; i++)
        if (!(w->names[i] = qs_json_quote_dup(names[i])))
            rc = QS_ENOMEM;
    char *run_q = rc ? NULL : qs_json_quote_dup(run_name ? run_name : "");
    if (!rc && !run_q)
        rc = QS_ENOMEM;
    if (rc) {
        qlog_writer_destroy(w);
        return diag_set(d, rc, path, -1, "out of memory");
    }
    amax_estimator_format(&r->est, w->est[0], sizeof w->est[0]);
    snprintf(w->est[1], sizeof w->est[1], "current");
    rc = wbuf_printf(w, "{\"v\":%d,\"type\":\"header\",\"run\":%s,\"recipe\":{\"estimator\":\"%s\","
                        "\"margin\":%d,\"history\":%d,\"saturate\":%s},\"quantizers\":[",
                     QLOG_VERSION, run_q, w->est[0], r->margin, r->history_steps,
                     r->saturate ? "true" : "false");
    qs_free(run_q);
    for (int i = 0; !rc && i < n_quant; i++)
        rc = wbuf_printf(w, "%s%s", i ? "," : "", w->names[i]);
    if (!rc)
        rc = wbuf_printf(w, "]}");
    if (rc) {
        qlog_writer_destroy(w);
        return diag_set(d, rc, path, -1, "out of memory");
    }
    qlog_cut cut = {resume_step, w->buf, w->len, 0, 0};
    if (resume_step >= 0 && fileio_exists(path) && (rc = qlog_resume_check(path, d))) {
        qlog_writer_destroy(w);
        return rc;
    }
    if (resume_step >= 0)
        rc = zlog_filter(path, qlog_cut_keep, &cut, d);
    if (!rc)
        rc = zlog_writer_create(&w->z, path, resume_step >= 0 ? ZLOG_APPEND : ZLOG_TRUNCATE, d);
    if (!rc && !cut.header_same)
        rc = zlog_write(w->z, w->buf, w->len, d);
    if (!rc)
        rc = zlog_flush(w->z, d);
    if (rc) {
        qlog_writer_destroy(w);
        return rc;
    }
    *out = w;
    return 0;
}

static const char *mode_name(int mode)
{
    return mode == QUANT_MODE_QUANT ? "quant" : mode == QUANT_MODE_OBSERVE ? "observe" : "none";
}

int qlog_write_step(qlog_writer *w, long step, int phase, const qlog_row *rows, qs_diag *d)
{
    w->len = 0;
    int rc = wbuf_printf(w, "{\"v\":%d,\"type\":\"step\",\"step\":%ld,\"phase\":\"%s\",\"q\":[",
                         QLOG_VERSION, step, phase == QLOG_PHASE_QAT ? "qat" : "warmup");
    for (int i = 0; !rc && i < w->n_quant; i++) {
        const qlog_row *r = &rows[i];
        rc = wbuf_put(w, i ? ",{\"name\":" : "{\"name\":");
        rc = rc ? rc : wbuf_put(w, w->names[i]);
        rc = rc ? rc : wbuf_put(w, ",\"mode\":\"");
        rc = rc ? rc : wbuf_put(w, mode_name(r->mode));
        if (r->est_idx >= 0 && r->est_idx < 2) {
            rc = rc ? rc : wbuf_put(w, "\",\"est\":\"");
            rc = rc ? rc : wbuf_put(w, w->est[r->est_idx]);
            rc = rc ? rc : wbuf_put(w, "\"");
        } else {
            rc = rc ? rc : wbuf_put(w, "\",\"est\":null");
        }
        rc = rc ? rc : wbuf_float(w, "pred_amax", r->pred_amax);
        rc = rc ? rc : wbuf_float(w, "amax", r->amax);
        rc = rc ? rc : wbuf_float(w, "scale", r->scale);
        rc = rc ? rc : wbuf_count(w, "n", r->n);
        rc = rc ? rc : wbuf_count(w, "clip", r->clip);
        rc = rc ? rc : wbuf_float(w, "clip_rate", r->clip_rate);
        rc = rc ? rc : wbuf_count(w, "under", r->under);
        rc = rc ? rc : wbuf_float(w, "under_rate", r->under_rate);
        rc = rc ? rc : wbuf_float(w, "qsnr_db", r->qsnr_db);
        rc = rc ? rc : wbuf_put(w, "}");
    }
    rc = rc ? rc : wbuf_put(w, "]}");
    if (rc)
        return diag_set(d, rc, w->path, -1, "out of memory formatting step %ld", step);
    rc = zlog_write(w->z, w->buf, w->len, d);
    return rc ? rc : zlog_flush(w->z, d);
}

int qlog_writer_close(qlog_writer *w, qs_diag *d)
{
    if (!w)
        return 0;
    int rc = zlog_close(w->z, d);
    w->z = NULL;
    qlog_writer_destroy(w);
    return rc;
}

/* ---------------------------------------------------------------- reader */

void qlog_run_free(qlog_run *run)
{
    for (int i = 0; run->names && i < run->n_quant; i++)
        qs_free(run->names[i]);
    qs_free(run->names);
    qs_free(run->steps);
    qs_free(run->phases);
    qs_free(run->rows);
    qs_free(run->seen);
    memset(run, 0, sizeof *run);
}

int qlog_header_parse(qlog_run *run, const qs_json_at *o, qs_diag *d)
{
    qs_json_at rec, qs;
    size_t nq;
    const char *run_name, *est;
    int rc, saturate;
    if ((rc = qs_json_obj(o, "recipe", &rec, d)) || (rc = qs_json_arr(o, "quantizers", &qs, &nq, d)) ||
        (rc = qs_json_str_or(o, "run", "", &run_name, d)) ||
        (rc = qs_json_str_or(&rec, "estimator", "", &est, d)))
        return rc;
    if (nq == 0 || nq > INT32_MAX)
        return qs_json_fail(o, "quantizers", QS_EFORMAT, d, "expected a non-empty array of names");
    int n = (int)nq;
    if (run->names) {   /* repeated after a resume: must describe the same quantizers */
        int same = n == run->n_quant;
        for (int i = 0; same && i < n; i++) {
            const char *s = json_string_value(json_array_get(qs.v, (size_t)i));
            same = s && !strcmp(s, run->names[i]);
        }
        if (!same)
            return diag_set(d, QS_EFORMAT, o->file, o->line,
                            "header repeated with a different quantizer list (expected %d names as in "
                            "the first header)", run->n_quant);
        return 0;
    }
    snprintf(run->run, sizeof run->run, "%s", run_name);
    snprintf(run->recipe_est, sizeof run->recipe_est, "%s", est);
    amax_estimator parsed;
    if (*est && amax_estimator_parse(est, &parsed, NULL))
        return qs_json_fail(&rec, "estimator", QS_EFORMAT, d, "unknown amax estimator '%.60s'", est);
    /* the margin range a quantizer accepts (quant_recipe_check), refused here by
     * name: replay would refuse it later without the file; a history of at
     * least one step (absent: the default) */
    if ((rc = qs_json_int_or(&rec, "margin", 0, QUANT_MARGIN_MAX, 0, &run->margin, d)) ||
        (json_object_get(rec.v, "history") &&
         (rc = qs_json_int_or(&rec, "history", 1, INT32_MAX, 0, &run->history_steps, d))) ||
        (rc = qs_json_bool_or(&rec, "saturate", 1, &saturate, d)))
        return rc;
    if (run->history_steps < 1)
        run->history_steps = AMAX_HISTORY_DEFAULT_STEPS;
    run->saturate = saturate;
    run->names = qs_calloc((size_t)n, sizeof *run->names);
    if (!run->names)
        return diag_set(d, QS_ENOMEM, o->file, o->line, "out of memory");
    run->n_quant = n;
    for (int i = 0; i < n; i++) {
        qs_json_at e = qs_json_item(&qs, (size_t)i);
        const char *s;
        if ((rc = qs_json_str(&e, NULL, &s, d)))
            return rc;
        for (int j = 0; j < i; j++)   /* records are matched by name: each once */
            if (!strcmp(run->names[j], s))
                return qs_json_fail(&e, NULL, QS_EFORMAT, d,
                                    "quantizer '%s' is listed twice in the header (entries %d "
                                    "and %d)", s, j, i);
        if (!(run->names[i] = qs_strdup(s)))
            return diag_set(d, QS_ENOMEM, o->file, o->line, "out of memory");
    }
    return 0;
}

/* The range of every logged float (not null).  Amax values are max |x| of finite
 * tensors, scales 32768 / 2^margin / amax or 1, rates counts over n, QSNR a dB
 * figure; anything else (a negative amax, a rate above 1, a value no float holds)
 * is a damaged log that every reader refuses alike. */
static const struct {
    const char *key, *want;
    double lo, hi;
    int lo_open;
} qlog_floats[QLOG_F_COUNT] = {
    [QLOG_F_PRED_AMAX] = {"pred_amax", "a finite number >= 0", 0.0, FLT_MAX, 0},
    [QLOG_F_AMAX] = {"amax", "a finite number >= 0", 0.0, FLT_MAX, 0},
    [QLOG_F_SCALE] = {"scale", "a finite number > 0", 0.0, FLT_MAX, 1},
    [QLOG_F_CLIP_RATE] = {"clip_rate", "a rate in [0, 1]", 0.0, 1.0, 0},
    [QLOG_F_UNDER_RATE] = {"under_rate", "a rate in [0, 1]", 0.0, 1.0, 0},
    [QLOG_F_QSNR_DB] = {"qsnr_db", "a finite number", -FLT_MAX, FLT_MAX, 0},
};
static const char *const qlog_counts[QLOG_C_COUNT] = {"n", "clip", "under"};

static int qlog_key_index(const char *key, size_t len, const char *const *keys, int n)
{
    for (int i = 0; i < n; i++)
        if (strlen(keys[i]) == len && !memcmp(keys[i], key, len))
            return i;
    return -1;
}

/* s[0..len) is exactly the NUL-terminated word w */
static int key_eq(const char *s, size_t len, const char *w)
{
    return strlen(w) == len && !memcmp(s, w, len);
}

int qlog_float_field(const char *key, size_t len)
{
    const char *keys[QLOG_F_COUNT];
    for (int i = 0; i < QLOG_F_COUNT; i++)
        keys[i] = qlog_floats[i].key;
    return qlog_key_index(key, len, keys, QLOG_F_COUNT);
}

int qlog_count_field(const char *key, size_t len)
{
    return qlog_key_index(key, len, qlog_counts, QLOG_C_COUNT);
}

int qlog_float_ok(int field, double x)
{
    const double lo = qlog_floats[field].lo, hi = qlog_floats[field].hi;
    return (qlog_floats[field].lo_open ? x > lo : x >= lo) && x <= hi && isfinite((float)x);
}

static int est_index(qlog_run *run, const char *est)
{
    if (!est)
        return -1;
    for (int i = 0; i < run->n_est; i++)
        if (!strcmp(run->est_names[i], est))
            return i;
    if (run->n_est >= QLOG_EST_MAX)
        return -1;
    snprintf(run->est_names[run->n_est], AMAX_NAME_MAX, "%s", est);
    return run->n_est++;
}

static int grow_steps(qlog_run *run, int *cap)
{
    if (run->n_steps < *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 64;
    long *s = qs_realloc(run->steps, (size_t)nc * sizeof *s);
    if (!s)
        return QS_ENOMEM;
    run->steps = s;
    int *p = qs_realloc(run->phases, (size_t)nc * sizeof *p);
    if (!p)
        return QS_ENOMEM;
    run->phases = p;
    qlog_row *r = qs_realloc(run->rows, (size_t)nc * (size_t)run->n_quant * sizeof *r);
    if (!r)
        return QS_ENOMEM;
    run->rows = r;
    *cap = nc;
    return 0;
}

int qlog_record_kind(const qs_json_at *o, int *kind, qs_diag *d)
{
    const char *type;
    int v, rc;
    *kind = QLOG_REC_OTHER;
    if ((rc = qs_json_int(o, "v", INT32_MIN, INT32_MAX, &v, d)) ||
        (rc = qs_json_str(o, "type", &type, d)))
        return rc;
    if (v != QLOG_VERSION)
        return qs_json_fail(o, "v", QS_EFORMAT, d, "expected version %d, found %d", QLOG_VERSION, v);
    *kind = !strcmp(type, "header") ? QLOG_REC_HEADER
            : !strcmp(type, "step") ? QLOG_REC_STEP : QLOG_REC_OTHER;
    return 0;
}

int qlog_step_check(const qs_json_at *at, long long step, const char *phase, size_t phase_len,
                    int *phase_out, qs_diag *d)
{
    if (step < 0 || step > LONG_MAX)
        return d ? qs_json_fail(at, "step", QS_ERANGE, d, "expected integer in [0, %ld], found %lld",
                                LONG_MAX, step)
                 : QS_ERANGE;
    if (phase && !key_eq(phase, phase_len, "qat") && !key_eq(phase, phase_len, "warmup"))
        return d ? diag_set(d, QS_EFORMAT, at->file, at->line,
                            "step %lld: phase '%.*s', expected \"warmup\" or \"qat\"", step,
                            (int)(phase_len < 40 ? phase_len : 40), phase)
                 : QS_EFORMAT;
    *phase_out = phase && key_eq(phase, phase_len, "qat") ? QLOG_PHASE_QAT : QLOG_PHASE_WARMUP;
    return 0;
}

void qlog_entry_in_init(qlog_entry_in *in)
{
    memset(in, 0, sizeof *in);
    for (int i = 0; i < QLOG_F_COUNT; i++)
        in->f[i] = NAN;
}

int qlog_entry_check(const qs_json_at *at, long long step, const char *name,
                     const qlog_entry_in *in, qlog_row *row, qs_diag *d)
{
    const char *m = in->mode;
    size_t ml = in->mode_len;
    if (m && !key_eq(m, ml, "quant") && !key_eq(m, ml, "observe") && !key_eq(m, ml, "none"))
        return d ? diag_set(d, QS_EFORMAT, at->file, at->line,
                            "step %lld: quantizer '%s': mode '%.*s', expected \"quant\", "
                            "\"observe\" or \"none\"", step, name, (int)(ml < 40 ? ml : 40), m)
                 : QS_EFORMAT;
    row->mode = !m ? QUANT_MODE_NONE
                : key_eq(m, ml, "quant") ? QUANT_MODE_QUANT
                : key_eq(m, ml, "observe") ? QUANT_MODE_OBSERVE : QUANT_MODE_NONE;
    row->est_idx = -1;
    float *const fl[QLOG_F_COUNT] = {&row->pred_amax, &row->amax, &row->scale,
                                     &row->clip_rate, &row->under_rate, &row->qsnr_db};
    for (int f = 0; f < QLOG_F_COUNT; f++) {
        double x = in->f[f];
        if (!isnan(x) && !qlog_float_ok(f, x))
            return d ? qs_json_fail(at, qlog_floats[f].key, QS_ERANGE, d,
                                    "expected null or %s, found %.9g", qlog_floats[f].want, x)
                     : QS_ERANGE;
        *fl[f] = (float)x;
    }
    long long *const counts[QLOG_C_COUNT] = {&row->n, &row->clip, &row->under};
    for (int c = 0; c < QLOG_C_COUNT; c++) {
        if (in->c_given[c] && in->c[c] < 0)
            return d ? qs_json_fail(at, qlog_counts[c], QS_ERANGE, d,
                                    "expected integer in [0, %lld], found %lld", LLONG_MAX, in->c[c])
                     : QS_ERANGE;
        *counts[c] = in->c_given[c] ? in->c[c] : -1;
    }
    if (row->n >= 0 && (row->clip > row->n || row->under > row->n))
        return d ? diag_set(d, QS_EFORMAT, at->file, at->line,
                            "step %lld: quantizer '%s': %s %lld exceeds n %lld (the elements it "
                            "counts)", step, name, row->clip > row->n ? "clip" : "under",
                            row->clip > row->n ? row->clip : row->under, row->n)
                 : QS_EFORMAT;
    return 0;
}

/* an optional string member (null or absent: NULL) with its length */
static int str_member(const qs_json_at *o, const char *key, const char **s, size_t *len, qs_diag *d)
{
    int rc = qs_json_str_or(o, key, NULL, s, d);
    *len = !rc && *s ? strlen(*s) : 0;
    return rc;
}

int qlog_step_parse(qlog_run *run, const qs_json_at *o, long *step_out, int *phase, qlog_row *rows,
                    qs_diag *d)
{
    const char *path = o->file, *ph;
    long ln = o->line;
    if (!run->names)
        return diag_set(d, QS_EFORMAT, path, ln, "step record before the header line");
    qs_json_at q;
    size_t nq, ph_len;
    long long step;
    int rc;
    /* the JSON types here; the values' rules in qlog_step_check / qlog_entry_check */
    if ((rc = qs_json_i64(o, "step", LLONG_MIN, LLONG_MAX, &step, d)) ||
        (rc = qs_json_arr(o, "q", &q, &nq, d)) || (rc = str_member(o, "phase", &ph, &ph_len, d)) ||
        (rc = qlog_step_check(o, step, ph, ph_len, phase, d)))
        return rc;
    *step_out = (long)step;
    for (int i = 0; i < run->n_quant; i++)
        rows[i] = (qlog_row){QUANT_MODE_NONE, -1, NAN, NAN, NAN, NAN, NAN, NAN, -1, -1, -1};
    if (!run->seen && !(run->seen = qs_malloc((size_t)run->n_quant)))
        return diag_set(d, QS_ENOMEM, path, ln, "out of memory");
    memset(run->seen, 0, (size_t)run->n_quant);
    for (size_t k = 0; k < nq; k++) {
        qs_json_at e = qs_json_item(&q, k);
        const char *name, *est;
        qlog_entry_in in;
        qlog_entry_in_init(&in);
        if ((rc = qs_json_obj(&e, NULL, &e, d)) || (rc = qs_json_str(&e, "name", &name, d)) ||
            (rc = str_member(&e, "mode", &in.mode, &in.mode_len, d)) ||
            (rc = qs_json_str_or(&e, "est", NULL, &est, d)))
            return rc;
        int i = (k < (size_t)run->n_quant && !strcmp(run->names[k], name)) ? (int)k : -1;
        for (int j = 0; i < 0 && j < run->n_quant; j++)
            if (!strcmp(run->names[j], name))
                i = j;
        if (i < 0)
            return diag_set(d, QS_EFORMAT, path, ln,
                            "step %lld: quantizer '%s' is not in the header's list", step, name);
        if (run->seen[i]++)   /* the second record would silently replace the first */
            return diag_set(d, QS_EFORMAT, path, ln, "step %lld: quantizer '%s' listed twice",
                            step, name);
        for (int f = 0; f < QLOG_F_COUNT; f++)
            if ((rc = qs_json_num_or(&e, qlog_floats[f].key, NAN, &in.f[f], d)))
                return rc;
        for (int c = 0; c < QLOG_C_COUNT; c++) {
            const json_t *v = json_object_get(e.v, qlog_counts[c]);
            in.c_given[c] = v && !json_is_null(v);
            if (in.c_given[c] && (rc = qs_json_i64(&e, qlog_counts[c], LLONG_MIN, LLONG_MAX,
                                                   &in.c[c], d)))
                return rc;
        }
        if ((rc = qlog_entry_check(&e, step, name, &in, &rows[i], d)))
            return rc;
        rows[i].est_idx = est_index(run, est);
    }
    return 0;
}

/* a step record appended to run (a step number that goes back replaces the tail) */
static int read_step(qlog_run *run, const qs_json_at *o, int *cap, qlog_row **scratch, qs_diag *d)
{
    if (run->names && !*scratch &&
        !(*scratch = qs_malloc((size_t)run->n_quant * sizeof **scratch)))
        return diag_set(d, QS_ENOMEM, o->file, o->line, "out of memory");
    long step;
    int phase, rc = qlog_step_parse(run, o, &step, &phase, *scratch, d);
    if (rc)
        return rc;
    while (run->n_steps > 0 && run->steps[run->n_steps - 1] >= step)
        run->n_steps--;   /* resumed from an earlier checkpoint: the newer records win */
    if (grow_steps(run, cap))
        return diag_set(d, QS_ENOMEM, o->file, o->line, "out of memory");
    int s = run->n_steps++;
    run->steps[s] = step;
    run->phases[s] = phase;
    memcpy(&run->rows[(size_t)s * (size_t)run->n_quant], *scratch,
           (size_t)run->n_quant * sizeof **scratch);
    return 0;
}

int qlog_header_missing(const char *path, int truncated, qs_diag *d)
{
    if (truncated)
        return diag_set(d, QS_EFORMAT, path, -1, "file cut before the header line was complete");
    return diag_set(d, QS_EFORMAT, path, -1,
                    "no header line (expected {\"v\":%d,\"type\":\"header\",...})", QLOG_VERSION);
}

int qlog_read(const char *path, qlog_run *run, qs_diag *d)
{
    memset(run, 0, sizeof *run);
    qs_jsonl r;
    int rc = qs_jsonl_open(&r, path, 0, d);
    if (rc)
        return rc;
    int cap = 0, kind;
    qlog_row *scratch = NULL;
    qs_json_at o;
    while ((rc = qs_jsonl_next(&r, &o, d)) == 1) {
        if ((rc = qlog_record_kind(&o, &kind, d)))
            break;
        if (kind == QLOG_REC_HEADER) {
            rc = qlog_header_parse(run, &o, d);
            run->version = QLOG_VERSION;
        } else if (kind == QLOG_REC_STEP) {
            rc = read_step(run, &o, &cap, &scratch, d);
        } /* other record types: ignored (forward compatible) */
        if (rc)
            break;
    }
    qs_jsonl_close(&r);
    qs_free(scratch);
    if (rc == QS_ETRUNC) {
        run->truncated = 1;
        if (!run->names) {
            qlog_run_free(run);
            return qlog_header_missing(path, 1, d);
        }
        return QS_ETRUNC;   /* d: the reader's "PATH:LINE: log is truncated after N complete
                               records (...)", the line heatmap and plot warn with too */
    }
    if (rc < 0) {
        qlog_run_free(run);
        return rc;
    }
    if (!run->names) {
        qlog_run_free(run);
        return qlog_header_missing(path, 0, d);
    }
    return 0;
}

int qlog_select_parse(const char *name, int *select, qs_diag *d)
{
    for (int i = QLOG_SELECT_QAT; i <= QLOG_SELECT_ALL; i++)
        if (!strcmp(name, qlog_select_name(i))) {
            *select = i;
            return 0;
        }
    return diag_set(d, QS_EINVAL, NULL, -1, "unknown phase '%s', expected qat, warmup or all", name);
}

const char *qlog_select_name(int select)
{
    return select == QLOG_SELECT_ALL ? "all" : select == QLOG_SELECT_WARMUP ? "warmup" : "qat";
}

int qlog_read_run(const char *run_dir_or_file, qlog_run *run, char *path_out, size_t path_bytes,
                  qs_diag *d)
{
    char path[QS_DIAG_PATH_MAX];
    memset(run, 0, sizeof *run);
    if (fileio_is_dir(run_dir_or_file)) {
        if (fileio_join(path, sizeof path, run_dir_or_file, QLOG_FILE))
            return diag_set(d, QS_ERANGE, run_dir_or_file, -1, "path too long");
        if (!fileio_exists(path))
            return diag_set(d, QS_ENOTFOUND, path, -1,
                            "no quantizer log in this run dir (expected %s written by a QAT run)",
                            QLOG_FILE);
    } else if (!fileio_exists(run_dir_or_file)) {
        return diag_set(d, QS_ENOTFOUND, run_dir_or_file, -1,
                        "no such run dir or file (expected RUN_DIR or RUN_DIR/%s)", QLOG_FILE);
    } else {
        snprintf(path, sizeof path, "%s", run_dir_or_file);
    }
    if (path_out && path_bytes)
        snprintf(path_out, path_bytes, "%s", path);
    return qlog_read(path, run, d);
}

int qlog_run_filter(qlog_run *run, const char *substr, qs_diag *d)
{
    int *keep = qs_calloc((size_t)run->n_quant + 1, sizeof *keep);
    if (!keep)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    int n = 0;
    for (int q = 0; q < run->n_quant; q++)
        if (strstr(run->names[q], substr))
            keep[n++] = q;
    if (n == 0) {
        qs_free(keep);
        return diag_set(d, QS_ENOTFOUND, NULL, -1, "no quantizer name contains '%s' (%d in the log, e.g. '%s')",
                        substr, run->n_quant, run->n_quant ? run->names[0] : "");
    }
    /* rows are step-major: compact each step's row block in place, front to back */
    for (int s = 0; s < run->n_steps; s++)
        for (int k = 0; k < n; k++)
            run->rows[(size_t)s * (size_t)n + (size_t)k] =
                run->rows[(size_t)s * (size_t)run->n_quant + (size_t)keep[k]];
    int j = 0;
    for (int q = 0; q < run->n_quant; q++) {
        if (j < n && keep[j] == q)
            run->names[j++] = run->names[q];
        else
            qs_free(run->names[q]);
    }
    run->n_quant = n;
    qs_free(keep);
    return 0;
}
