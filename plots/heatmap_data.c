/* heatmap_data.c: quant.jsonl.zst -> (quantizer x step) matrix of one metric, binned.
 *
 * Rows are ordered by layer index, then module (q, k, v, o, gate, up, down), then
 * input before weight.  Columns are logged steps; beyond max_cols they are binned
 * with the WORST value inside the bin (max for clip/underflow rates and amax
 * ratios, min for QSNR), so a single clipped step in a 10,000-step run stays
 * visible.  Each cell remembers whether its value came from a BF16-warmup step
 * (observe mode: "would have clipped", nothing was quantized) so the renderer
 * can draw those apart from real QAT values.  Logs of older versions repeat
 * steps after a resume: a later record replaces every stored step >= its own.
 * The input is a run directory (its quant.jsonl.zst) or the log file itself; a
 * log cut mid-record is drawn up to its last complete record and flagged
 * (plots_heatmap.truncated) for the caller to warn about.  Records are judged by
 * qlog's per-record rules (qs/qlog.h), as satstat and replay judge them: the same
 * records are refused with the same message; heatmap_scan.c only speeds up the
 * lines those rules accept.
 */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot_impl.h"
#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/qlog.h"
#include "qs/zlog.h"

static const char *const metric_names[] = {"clip_rate", "amax_ratio", "underflow_rate", "qsnr"};

const char *plots_metric_name(int metric)
{
    return metric >= 0 && metric < 4 ? metric_names[metric] : "?";
}

int plots_metric_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, metric_names[i]))
            return i;
    return -1;
}

int plots_tensors_parse(const char *name)
{
    return !strcmp(name, "all") ? PLOTS_TENSORS_ALL : !strcmp(name, "input") ? PLOTS_TENSORS_INPUT
         : !strcmp(name, "weight") ? PLOTS_TENSORS_WEIGHT : -1;
}

void plots_heatmap_opts_default(plots_heatmap_opts *o)
{
    o->metric = PLOTS_METRIC_CLIP_RATE;
    o->tensors = PLOTS_TENSORS_ALL;
    o->log_scale = 0;
    o->max_cols = 1000;
    o->lo = o->hi = NAN;
}

void plots_heatmap_free(plots_heatmap *hm)
{
    if (!hm)
        return;
    for (int i = 0; hm->row_names && i < hm->n_rows; i++)
        qs_free(hm->row_names[i]);
    qs_free(hm->row_names);
    qs_free(hm->row_layer);
    qs_free(hm->col_first);
    qs_free(hm->col_last);
    qs_free(hm->values);
    qs_free(hm->cell_warmup);
    memset(hm, 0, sizeof *hm);
}

/* sort key of a quantizer name: layer, module rank, tensor rank */
static void name_key(const char *name, int *layer, int *module, int *tensor)
{
    static const char *const modules[] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                          "gate_proj", "up_proj", "down_proj"};
    *layer = -1;
    *module = 99;
    if (!strncmp(name, "layers.", 7))
        *layer = atoi(name + 7);
    for (int i = 0; i < 7; i++)
        if (strstr(name, modules[i]))
            *module = i;
    size_t n = strlen(name);
    *tensor = n >= 6 && !strcmp(name + n - 6, ".input") ? 0 : 1;
}

static int cmp_names(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int lx, mx, tx, ly, my, ty;
    name_key(x, &lx, &mx, &tx);
    name_key(y, &ly, &my, &ty);
    /* names without a layer go last */
    if (lx != ly)
        return lx < 0 ? 1 : ly < 0 ? -1 : lx - ly;
    if (mx != my)
        return mx - my;
    if (tx != ty)
        return tx - ty;
    return strcmp(x, y);
}

static int tensor_selected(const char *name, int tensors)
{
    size_t n = strlen(name);
    if (tensors == PLOTS_TENSORS_INPUT)
        return n >= 6 && !strcmp(name + n - 6, ".input");
    if (tensors == PLOTS_TENSORS_WEIGHT)
        return n >= 7 && !strcmp(name + n - 7, ".weight");
    return 1;
}

/* raw per-step data while reading */
typedef struct raw_log {
    qlog_run hdr;           /* the header: names (header order), recipe; no steps */
    int n_q;                /* hdr.n_quant once the header is read */
    char **names;           /* hdr.names */
    long *steps;
    unsigned char *qat;     /* (n_steps) 1: phase "qat" */
    float *vals;            /* (n_steps, n_q) */
    long n_steps, cap;
    long qat_step;
} raw_log;

static void raw_free(raw_log *r)
{
    qlog_run_free(&r->hdr);
    qs_free(r->steps);
    qs_free(r->qat);
    qs_free(r->vals);
}

/* one quantizer's value of the metric from its parsed row (a logged null: NaN) */
float heatmap_metric_value_impl(const qlog_row *q, int metric)
{
    switch (metric) {
    case PLOTS_METRIC_CLIP_RATE: return q->clip_rate;
    case PLOTS_METRIC_UNDERFLOW_RATE: return q->under_rate;
    case PLOTS_METRIC_QSNR: return q->qsnr_db;
    default: return q->pred_amax > 0 && q->amax >= 0 ? (float)((double)q->amax / q->pred_amax) : NAN;
    }
}

/* append one step's row (values for every header quantizer) */
static int store_step(raw_log *r, long s, int is_qat, const float *vals, const char *path,
                      long line, qs_diag *d)
{
    while (r->n_steps > 0 && r->steps[r->n_steps - 1] >= s)
        r->n_steps--;   /* resumed run: the new record replaces the old tail */
    if (r->n_steps == r->cap) {
        long cap = r->cap ? 2 * r->cap : 256;
        long *st = qs_realloc(r->steps, (size_t)cap * sizeof *st);
        if (st)
            r->steps = st;
        unsigned char *q = st ? qs_realloc(r->qat, (size_t)cap) : NULL;
        if (q)
            r->qat = q;
        float *v = q ? qs_realloc(r->vals, (size_t)cap * (size_t)r->n_q * sizeof *v) : NULL;
        if (!v)
            return diag_set(d, QS_ENOMEM, path, line, "%ld steps", cap);
        r->vals = v;
        r->cap = cap;
    }
    memcpy(r->vals + (size_t)r->n_steps * (size_t)r->n_q, vals, (size_t)r->n_q * sizeof *vals);
    r->qat[r->n_steps] = (unsigned char)(is_qat != 0);
    r->steps[r->n_steps++] = s;
    if (is_qat && (r->qat_step < 0 || s < r->qat_step))
        r->qat_step = s;
    return 0;
}

/* a line the fast scanner handed back: parsed by qlog's rules */
static int read_record(raw_log *r, plots_heatmap *hm, const qs_json_at *o, int metric,
                       qlog_row **rows, float **row, qs_diag *d)
{
    int kind, rc = qlog_record_kind(o, &kind, d);
    if (rc || kind == QLOG_REC_OTHER)
        return rc;
    if (kind == QLOG_REC_HEADER) {
        if ((rc = qlog_header_parse(&r->hdr, o, d)))
            return rc;
        r->n_q = r->hdr.n_quant;
        r->names = r->hdr.names;
        snprintf(hm->run, sizeof hm->run, "%s", r->hdr.run[0] ? r->hdr.run : "run");
        snprintf(hm->estimator, sizeof hm->estimator, "%s",
                 r->hdr.recipe_est[0] ? r->hdr.recipe_est : "?");
        if (!*rows && (!(*rows = qs_malloc((size_t)r->n_q * sizeof **rows)) ||
                       !(*row = qs_malloc((size_t)r->n_q * sizeof **row))))
            return diag_set(d, QS_ENOMEM, o->file, o->line, "%d quantizers", r->n_q);
        return 0;
    }
    long step;
    int phase;
    if ((rc = qlog_step_parse(&r->hdr, o, &step, &phase, *rows, d)))
        return rc;
    for (int i = 0; i < r->n_q; i++)
        (*row)[i] = heatmap_metric_value_impl(&(*rows)[i], metric);
    return store_step(r, step, phase == QLOG_PHASE_QAT, *row, o->file, o->line, d);
}

static int read_log(raw_log *r, plots_heatmap *hm, const char *path, int metric, qs_diag *d)
{
    zlog_reader *z;
    int rc = zlog_reader_create(&z, path, d);
    if (rc)
        return rc;
    const char *line;
    size_t len;
    long lineno = 0, step;
    float *row = NULL;
    qlog_row *rows = NULL;
    int is_qat;
    while ((rc = zlog_next(z, &line, &len, &lineno, d)) == 1) {
        rc = 0;
        if (len == 0)
            continue;   /* as qs_jsonl (qlog_read) */
        /* fast path for the common record; every other line goes through Jansson */
        if (row && heatmap_scan_step_impl(line, len, r->n_q, r->names, metric, &step, &is_qat, row)) {
            if ((rc = store_step(r, step, is_qat, row, path, lineno, d)))
                break;
            continue;
        }
        json_t *obj;
        if ((rc = qs_json_load_text(line, len, path, lineno, QS_JSON_OBJECT, &obj, d)))
            break;
        qs_json_at o = qs_json_root(obj, path, lineno);
        rc = read_record(r, hm, &o, metric, &rows, &row, d);
        json_decref(obj);
        if (rc)
            break;
    }
    qs_free(row);
    qs_free(rows);
    zlog_reader_destroy(z);
    if (rc == QS_ETRUNC) {   /* cut mid-record (still being written, or killed): plot the
                                complete records, and say so */
        hm->truncated = 1;
        if (d)
            diag_format(d, hm->truncated_msg, sizeof hm->truncated_msg);
        else
            snprintf(hm->truncated_msg, sizeof hm->truncated_msg, "%s: truncated", path);
        rc = 0;
    }
    if (!rc && !r->names)
        rc = qlog_header_missing(path, hm->truncated, d);
    if (!rc && r->n_steps == 0)
        rc = diag_set(d, QS_EFORMAT, path, -1, "no step records (expected a header then one record per logged step)");
    return rc;
}

/* 1 if b is worse than a for this metric; NAN loses to any number */
static int is_worse(float a, float b, int metric)
{
    if (isnan(b))
        return 0;
    if (isnan(a))
        return 1;
    return metric == PLOTS_METRIC_QSNR ? b < a : b > a;
}

static int bin_matrix(plots_heatmap *hm, const raw_log *r, const plots_heatmap_opts *o,
                      qs_diag *d)
{
    int *src = qs_malloc((size_t)r->n_q * sizeof *src);
    char **sorted = qs_malloc((size_t)r->n_q * sizeof *sorted);
    int n = 0;
    for (int i = 0; src && sorted && i < r->n_q; i++)
        if (tensor_selected(r->names[i], o->tensors))
            sorted[n++] = r->names[i];
    if (src && sorted)
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_names);
    long max_cols = o->max_cols > 0 ? o->max_cols : 1000;
    hm->n_cols = (int)(r->n_steps <= max_cols ? r->n_steps : max_cols);
    hm->n_rows = n;
    hm->n_steps = r->n_steps;
    hm->qat_step = r->qat_step;
    hm->row_names = qs_calloc(n ? (size_t)n : 1, sizeof *hm->row_names);
    hm->row_layer = qs_malloc((n ? (size_t)n : 1) * sizeof *hm->row_layer);
    hm->col_first = qs_malloc((size_t)hm->n_cols * sizeof *hm->col_first);
    hm->col_last = qs_malloc((size_t)hm->n_cols * sizeof *hm->col_last);
    hm->values = qs_malloc((n ? (size_t)n : 1) * (size_t)hm->n_cols * sizeof *hm->values);
    hm->cell_warmup = qs_calloc((n ? (size_t)n : 1) * (size_t)hm->n_cols, 1);
    int rc = 0;
    if (!src || !sorted || !hm->row_names || !hm->row_layer || !hm->col_first || !hm->col_last ||
        !hm->values || !hm->cell_warmup)
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "heatmap %d x %d", n, hm->n_cols);
    for (int i = 0; !rc && i < n; i++) {
        int mod, ten;
        for (int j = 0; j < r->n_q; j++)
            if (r->names[j] == sorted[i])
                src[i] = j;
        name_key(sorted[i], &hm->row_layer[i], &mod, &ten);
        if (!(hm->row_names[i] = qs_strdup(sorted[i])))
            rc = diag_set(d, QS_ENOMEM, NULL, -1, "names");
    }
    for (int c = 0; !rc && c < hm->n_cols; c++) {
        long a = (long)((double)c * r->n_steps / hm->n_cols);
        long b = (long)((double)(c + 1) * r->n_steps / hm->n_cols);
        hm->col_first[c] = r->steps[a];
        hm->col_last[c] = r->steps[b - 1];
        for (int i = 0; i < n; i++) {
            float v = NAN;
            unsigned char warm = 0;
            for (long s = a; s < b; s++) {
                float x = r->vals[(size_t)s * (size_t)r->n_q + (size_t)src[i]];
                if (is_worse(v, x, o->metric)) {
                    v = x;
                    warm = !r->qat[s];
                }
            }
            hm->values[(size_t)i * (size_t)hm->n_cols + (size_t)c] = v;
            hm->cell_warmup[(size_t)i * (size_t)hm->n_cols + (size_t)c] = warm;
        }
    }
    qs_free(src);
    qs_free(sorted);
    return rc;
}

int plots_heatmap_load(plots_heatmap *hm, const char *run_dir, const plots_heatmap_opts *o,
                       qs_diag *d)
{
    memset(hm, 0, sizeof *hm);
    char path[1024];
    if (!fileio_is_dir(run_dir) && fileio_exists(run_dir)) {   /* the log file itself */
        if (strlen(run_dir) >= sizeof path)
            return diag_set(d, QS_ERANGE, run_dir, -1, "path too long");
        snprintf(path, sizeof path, "%s", run_dir);
    } else if (fileio_join(path, sizeof path, run_dir, "quant.jsonl.zst")) {
        return diag_set(d, QS_ERANGE, run_dir, -1, "path too long");
    }
    if (!fileio_exists(path))
        return diag_set(d, QS_ENOTFOUND, path, -1,
                        "not found (the saturation detector log that `qatscope train` writes)");
    raw_log r = {0};
    r.qat_step = -1;
    int rc = read_log(&r, hm, path, o->metric, d);
    if (!rc)
        rc = bin_matrix(hm, &r, o, d);
    if (!rc && hm->n_rows == 0)
        rc = diag_set(d, QS_ENOTFOUND, path, -1, "no %s quantizers in the log",
                      o->tensors == PLOTS_TENSORS_INPUT ? "input" : "weight");
    raw_free(&r);
    if (rc)
        plots_heatmap_free(hm);
    return rc;
}
