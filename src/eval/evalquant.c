/* evalquant.c: HiF8 W8A8 fake-quant of planned Linears at evaluation time,
 * current or delayed scaling (see include/qs/evalquant.h).
 *
 * Delayed scaling reads a run checkpoint:
 *   DIR/train_state.bin   "meta" (JSON, "step") and "amax": per quantizer, in the
 *                         run's set order, u32 name bytes | name | u32 n |
 *                         f32 history[n] oldest first (written by trainer_ckpt.c)
 *   DIR/../../config.json the run config snapshot (estimator, margin, history
 *                         length, quant_modules), as `train --resume` reads it
 * Each quantizer of the eval set is found by name in the amax section and
 * restored with quant_history_restore; quant_apply then estimates from that
 * history on every call and records nothing, so the scale is the one the
 * run's next step would have used, constant for the whole evaluation.
 */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qs/evalquant.h"
#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/hif8.h"
#include "qs/model.h"
#include "qs/model_hif8.h"
#include "qs/qplan.h"
#include "qs/quant.h"
#include "qs/runcfg.h"
#include "qs/trainstate.h"

struct evalquant {
    struct llama_model *m;
    quant_set *qs;
    int n;                 /* quantized modules */
    int *slot_of;          /* [L * MODEL_LIN_COUNT] module index or -1 */
    char (*names)[QUANT_NAME_MAX];   /* [n] module names */
    int scaling;           /* EVALQUANT_CURRENT | EVALQUANT_DELAYED | EVALQUANT_STORED */
    float *w_scale;        /* [n] weight scales of the substitutes packed once (evalquant_weight) */
    float *row_scale;      /* [row_cap] the hook's factors 1 / (s_x s_w) of the last call */
    size_t row_cap;
    char scaling_name[64];
    char recipe_text[QS_DIAG_PATH_MAX + 256];
};

/* A run checkpoint's training state, as far as eval needs it. */
typedef struct evalquant_state {
    trainstate_reader r;
    char path[QS_DIAG_PATH_MAX];
    long step;
    const unsigned char *amax;   /* the amax section (unaligned) */
    size_t amax_bytes;
    int n_hist;                  /* histories in it */
} evalquant_state;

int evalquant_scaling_parse(const char *name, int *scaling, qs_diag *d)
{
    static const char *const names[] = {"current", "delayed", "auto"};
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, names[i])) {
            *scaling = i;
            return 0;
        }
    return diag_set(d, QS_EINVAL, NULL, -1, "--quant-scaling: expected current, delayed or auto, "
                    "got '%s'", name ? name : "");
}

static int evalquant_planned(void *self, int layer, int module)
{
    const evalquant *q = self;
    return q->slot_of[layer * MODEL_LIN_COUNT + module] >= 0;
}

/* The weight of module s in the code domain: wq = decode(encode_sat(w * s_w))
 * and its scale; w NULL: the pack holds wq already (evalquant_weight), only
 * the scale. */
static int evalquant_weight_codes(evalquant *q, int s, const float *w, float *wq, size_t n,
                                  float *sw)
{
    if (!w) {
        *sw = q->w_scale[s];
        return 0;
    }
    qs_diag d = {0};
    if (quant_apply_scale(quant_set_get(q->qs, 2 * s + 1), w, n, sw, &d) ||
        hif8_scaled_values(w, wq, n, *sw))
        return QS_ENAN;
    return 0;
}

/* W8A8 in the code domain (model.h, fn returning 2): the HiF8 values of input
 * and weight at the scales the quantizers give (the same codes as
 * quant_apply's fake-quant), their product accumulated by the model's matmul,
 * and one factor 1 / (s_x s_w) per output row: the arithmetic of the exported
 * checkpoint (model_hif8_forward), bit for bit. */
static int evalquant_hook(void *self, int layer, int module, const float *x, float *xq, int N,
                          int IN, const float *w, float *wq, int O)
{
    evalquant *q = self;
    int s = q->slot_of[layer * MODEL_LIN_COUNT + module];
    if (s < 0)
        return 0;
    if ((size_t)N > q->row_cap) {
        float *rs = qs_realloc(q->row_scale, (size_t)N * sizeof *rs);
        if (!rs)
            return QS_ENOMEM;
        q->row_scale = rs;
        q->row_cap = (size_t)N;
    }
    float sw, sx = 0.0f;
    int rc = evalquant_weight_codes(q, s, w, wq, (size_t)O * IN, &sw);
    if (rc)
        return rc;
    qs_diag d = {0};
    quant *qi = quant_set_get(q->qs, 2 * s);
    /* one scale for the call (delayed), else per token: a row's scale from that
     * row alone, so a choice's score does not depend on which rows (siblings,
     * padding, batch) share the forward */
    int per_row = q->scaling == EVALQUANT_CURRENT;
    if (!per_row && quant_apply_scale(qi, x, (size_t)N * IN, &sx, &d))
        return QS_ENAN;
    size_t bad = 0;
    for (int r = 0; r < N; r++) {
        const float *xr = x + (size_t)r * IN;
        if (per_row && quant_apply_scale(qi, xr, (size_t)IN, &sx, &d))
            return QS_ENAN;
        bad += hif8_scaled_values(xr, xq + (size_t)r * IN, (size_t)IN, sx);
        q->row_scale[r] = hif8_dequant_factor(sx, sw);
    }
    return bad ? QS_ENAN : 2;
}

static const float *evalquant_row_scale(void *self)
{
    return ((const evalquant *)self)->row_scale;
}

/* The weight in the code domain, with its scale kept for the hook: constant
 * during an evaluation (frozen scale, fixed weight), so model_packs_substitute
 * packs it once (the HiF8 values are exact in either pack precision). */
static int evalquant_weight(void *self, int layer, int module, const float *w, float *wq, int O,
                            int IN)
{
    evalquant *q = self;
    int s = q->slot_of[layer * MODEL_LIN_COUNT + module];
    if (s < 0)
        return QS_EINVAL;
    return evalquant_weight_codes(q, s, w, wq, (size_t)O * IN, &q->w_scale[s]);
}

static int evalquant_plan(qplan *p, const char *patterns, qs_diag *d)
{
    if (!patterns || !patterns[0]) {
        qplan_set_default(p);
        return 0;
    }
    size_t len = strlen(patterns);
    char *buf = qs_malloc(len + 1);
    if (!buf)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    memcpy(buf, patterns, len + 1);
    int rc = 0;
    for (char *save, *pat = strtok_r(buf, ",", &save); pat && !rc; pat = strtok_r(NULL, ",", &save))
        rc = qplan_apply(p, pat, d);
    qs_free(buf);
    return rc;
}

/* The plan, module names and quantizer set (recipe r); no hook yet. */
static int evalquant_build(evalquant *q, struct llama_model *m, const char *patterns,
                           const quant_recipe *r, qs_diag *d)
{
    const int L = m->cfg.n_layers;
    qplan p;
    int rc = qplan_init(&p, L);
    if (rc)
        return diag_set(d, rc, NULL, -1, "out of memory");
    if ((rc = evalquant_plan(&p, patterns, d))) {
        qplan_free(&p);
        return rc;
    }
    int n = qplan_count(&p);
    if (n == 0) {
        qplan_free(&p);
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "quant modules '%s': no Linear selected for a %d-block model (the "
                        "default skips the first 3 and last 2 blocks); choose Linears with "
                        "--quant-modules, e.g. '*.mlp.*'",
                        patterns && patterns[0] ? patterns : "default", L);
    }
    char **qnames = qs_malloc(2 * (size_t)n * sizeof *qnames);
    char (*qbuf)[QUANT_NAME_MAX] = qs_malloc(2 * (size_t)n * sizeof *qbuf);
    q->slot_of = qs_malloc((size_t)L * MODEL_LIN_COUNT * sizeof *q->slot_of);
    q->names = qs_malloc((size_t)n * sizeof *q->names);
    if (!qnames || !qbuf || !q->slot_of || !q->names) {
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        goto done;
    }
    q->m = m;
    for (int l = 0, s = 0; l < L; l++)
        for (int k = 0; k < MODEL_LIN_COUNT; k++) {
            /* MODEL_LIN_* and QPLAN_* share the q, k, v, o, gate, up, down order */
            int on = qplan_is_on(&p, l, k);
            q->slot_of[l * MODEL_LIN_COUNT + k] = on ? s : -1;
            if (!on)
                continue;
            qplan_module_name(q->names[s], QUANT_NAME_MAX, l, k);
            snprintf(qbuf[2 * s], QUANT_NAME_MAX, "%.100s.input", q->names[s]);
            snprintf(qbuf[2 * s + 1], QUANT_NAME_MAX, "%.100s.weight", q->names[s]);
            qnames[2 * s] = qbuf[2 * s];
            qnames[2 * s + 1] = qbuf[2 * s + 1];
            s++;
        }
    q->n = n;
    rc = quant_set_create(&q->qs, r, (const char *const *)qnames, 2 * n, d);
done:
    qs_free(qnames);
    qs_free(qbuf);
    qplan_free(&p);
    return rc;
}

static uint32_t evalquant_u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Walks the amax section checking every entry's bounds; returns the number of
 * histories, or a negative code.  Without a name every value is checked too
 * (finite, >= 0: done once, at open); with a name, *vals / *nv receive that
 * quantizer's history (NULL / 0 when absent). */
static int evalquant_amax_walk(const evalquant_state *st, const char *name,
                               const unsigned char **vals, uint32_t *nv, qs_diag *d)
{
    const unsigned char *p = st->amax, *end = st->amax + st->amax_bytes;
    int count = 0;
    if (vals) {
        *vals = NULL;
        *nv = 0;
    }
    while (p < end) {
        uint32_t nl, n;
        if (end - p < 4 || (nl = evalquant_u32(p), (size_t)(end - p) - 4 < (size_t)nl + 4))
            return diag_set(d, QS_EFORMAT, st->path, -1,
                            "amax section: history %d ends early", count);
        const char *nm = (const char *)p + 4;
        p += 4 + nl;
        n = evalquant_u32(p);
        p += 4;
        if ((size_t)(end - p) / 4 < n)
            return diag_set(d, QS_EFORMAT, st->path, -1, "amax history of '%.*s' truncated",
                            (int)(nl < 200 ? nl : 200), nm);
        for (uint32_t i = 0; !name && i < n; i++) {
            float v;
            memcpy(&v, p + 4 * (size_t)i, 4);
            if (!isfinite(v) || v < 0.0f)
                return diag_set(d, QS_EFORMAT, st->path, -1,
                                "amax history of '%.*s': entry %u is %g, expected a finite "
                                "amax >= 0", (int)(nl < 200 ? nl : 200), nm, i, (double)v);
        }
        if (name && strlen(name) == nl && !memcmp(nm, name, nl)) {
            *vals = p;
            *nv = n;
        }
        p += 4 * (size_t)n;
        count++;
    }
    return count;
}

static int evalquant_state_open(evalquant_state *st, const char *path, qs_diag *d)
{
    memset(st, 0, sizeof *st);
    snprintf(st->path, sizeof st->path, "%s", path);
    static const char *const used[] = {"meta", "amax", NULL};   /* the optimizer's: unread */
    int rc = trainstate_open_only(&st->r, path, used, d);
    if (rc)
        return rc;
    const void *p;
    size_t n;
    if ((rc = trainstate_section(&st->r, "meta", &p, &n, d)))
        goto fail;
    json_t *meta;
    long long step;
    if ((rc = qs_json_load_text(p, n, path, 0, QS_JSON_OBJECT, &meta, d)))
        goto fail;
    qs_json_at m = qs_json_root(meta, path, -1);
    rc = qs_json_i64(&m, "step", 0, LONG_MAX, &step, d);
    json_decref(meta);
    if (rc)
        goto fail;
    st->step = (long)step;
    if ((rc = trainstate_section(&st->r, "amax", &p, &n, d)))
        goto fail;
    st->amax = p;
    st->amax_bytes = n;
    if ((rc = evalquant_amax_walk(st, NULL, NULL, NULL, d)) < 0)
        goto fail;
    st->n_hist = rc;
    return 0;
fail:
    trainstate_close(&st->r);
    return rc;
}

int evalquant_state_info(const char *dir, long *step, int *n_hist, qs_diag *d)
{
    char path[QS_DIAG_PATH_MAX];
    snprintf(path, sizeof path, "%.480s/train_state.bin", dir);
    if (!fileio_exists(path))
        return 0;
    evalquant_state st;
    int rc = evalquant_state_open(&st, path, d);
    if (rc)
        return rc;
    *step = st.step;
    *n_hist = st.n_hist;
    trainstate_close(&st.r);
    return 1;
}

/* The run's recipe from its config snapshot, as trainer_quant.c builds it. */
static int evalquant_run_recipe(const char *snap, runcfg *cfg, quant_recipe *r, qs_diag *d)
{
    if (!fileio_exists(snap))
        return diag_set(d, QS_ENOTFOUND, snap, -1,
                        "run config snapshot not found (delayed scaling needs the run's estimator "
                        "and margin: evaluate RUN/ckpt/step_N inside its run directory, or use "
                        "--quant-scaling current)");
    int rc = runcfg_load(cfg, snap, d);
    if (rc)
        return rc;
    quant_recipe_default(r);
    r->margin = (int)cfg->amax_margin;
    r->history_steps = (int)cfg->amax_history;
    r->saturate = 1;
    r->want_qsnr = 0;
    if ((rc = amax_estimator_parse(cfg->amax_estimator, &r->est, d)) ||
        (rc = quant_recipe_check(r, d))) {
        char msg[QS_DIAG_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", d->msg);
        return diag_set(d, rc, snap, -1, "%.400s", msg);
    }
    return 0;
}

/* Every quantizer of the set gets its stored history; when the run's own
 * selection is used, the state must hold exactly the set's histories. */
static int evalquant_restore(evalquant *q, const evalquant_state *st, int run_selection,
                             qs_diag *d)
{
    int n = quant_set_count(q->qs);
    if (run_selection && st->n_hist != n)
        return diag_set(d, QS_EFORMAT, st->path, -1,
                        "holds %d amax histories, the run config's quant_modules select %d "
                        "quantizers (config snapshot changed?)", st->n_hist, n);
    float *vals = NULL;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        quant *qu = quant_set_get(q->qs, i);
        const unsigned char *raw;
        uint32_t nv;
        evalquant_amax_walk(st, quant_name(qu), &raw, &nv, d);
        if (!raw) {
            rc = diag_set(d, QS_ENOTFOUND, st->path, -1,
                          "no amax history for '%s': the run did not quantize it (drop it from "
                          "--quant-modules or use --quant-scaling current)", quant_name(qu));
        } else if (nv == 0) {
            rc = diag_set(d, QS_EFORMAT, st->path, -1,
                          "amax history of '%s' is empty (checkpoint before the first step?); "
                          "use --quant-scaling current", quant_name(qu));
        } else if (!(vals = qs_malloc((size_t)nv * sizeof *vals))) {
            rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        } else {
            memcpy(vals, raw, 4 * (size_t)nv);
            quant_history_restore(qu, vals, (int)nv);
            qs_free(vals);
            vals = NULL;
        }
    }
    return rc;
}

static int evalquant_create_delayed(evalquant *q, struct llama_model *m, const evalquant_options *o,
                                    evalquant_state *st, qs_diag *d)
{
    char snap[QS_DIAG_PATH_MAX];
    snprintf(snap, sizeof snap, "%.480s/../../config.json", o->model_dir);
    runcfg cfg;
    quant_recipe r;
    int rc = evalquant_run_recipe(snap, &cfg, &r, d);
    if (rc)
        return rc;
    int run_selection = !o->patterns || !o->patterns[0];
    if ((rc = evalquant_build(q, m, run_selection ? cfg.quant_modules : o->patterns, &r, d)) ||
        (rc = evalquant_restore(q, st, run_selection, d)))
        return rc;
    char est[AMAX_NAME_MAX];
    amax_estimator_format(&r.est, est, sizeof est);
    q->scaling = EVALQUANT_DELAYED;
    snprintf(q->scaling_name, sizeof q->scaling_name, "delayed (train_state step %ld)", st->step);
    snprintf(q->recipe_text, sizeof q->recipe_text,
             "%s over the stored amax histories of %.400s (step %ld), margin %d, saturating, "
             "frozen (no history updates)", est, st->path, st->step, r.margin);
    return 0;
}

static int evalquant_create_current(evalquant *q, struct llama_model *m, const char *patterns,
                                    qs_diag *d)
{
    quant_recipe r;
    quant_recipe_default(&r);   /* histories stay empty: every call falls back to current */
    r.margin = 0;
    r.saturate = 1;
    r.want_qsnr = 0;
    int rc = evalquant_build(q, m, patterns, &r, d);
    if (rc)
        return rc;
    q->scaling = EVALQUANT_CURRENT;
    snprintf(q->scaling_name, sizeof q->scaling_name, "current");
    snprintf(q->recipe_text, sizeof q->recipe_text,
             "current (exact amax: per token for inputs, per tensor for weights), margin 0, saturating");
    return 0;
}

/* A HiF8 checkpoint (m->hif8): its modules, described only.  Its quantized
 * Linears run on their code packs (model_hif8_forward) already, so no hook is
 * installed: --precision hif8 on it is bf16 (hif8-fp32: fp32). */
static int evalquant_create_stored(evalquant *q, struct llama_model *m, const evalquant_options *o,
                                   qs_diag *d)
{
    const model_hif8 *h = m->hif8;
    if ((o->patterns && o->patterns[0]) || o->scaling != EVALQUANT_AUTO)
        return diag_set(d, QS_EINVAL, o->model_dir, -1, "a HiF8 checkpoint: its quantized "
                        "modules and scales are stored (no --quant-modules, --quant-scaling)");
    size_t cap = (size_t)h->n * 40 + 1;
    char *pat = qs_malloc(cap);
    if (!pat)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    pat[0] = 0;
    for (int i = 0, used = 0; i < h->n; i++) {
        char name[QUANT_NAME_MAX];
        qplan_module_name(name, sizeof name, h->lin[i].layer, h->lin[i].module);
        used += snprintf(pat + used, cap - (size_t)used, "%s%s", i ? "," : "", name);
    }
    quant_recipe r;
    quant_recipe_default(&r);
    r.margin = 0;
    r.saturate = 1;
    r.want_qsnr = 0;
    int rc = evalquant_build(q, m, pat, &r, d);
    qs_free(pat);
    if (rc)
        return rc;
    q->scaling = EVALQUANT_STORED;
    snprintf(q->scaling_name, sizeof q->scaling_name, "stored (%s)",
             h->dynamic ? "dynamic per token" : "static");
    snprintf(q->recipe_text, sizeof q->recipe_text,
             "the HiF8 checkpoint's codes and scales (W8A8 on its code packs), inputs %s",
             h->dynamic ? "per token at their own amax (current, margin 0)"
                        : "at the stored input_scales");
    return 0;
}

int evalquant_create_opts(evalquant **out, struct llama_model *m, const evalquant_options *o,
                          qs_diag *d)
{
    *out = NULL;
    evalquant *q = qs_calloc(1, sizeof *q);
    if (!q)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    evalquant_state st;
    memset(&st, 0, sizeof st);
    int have_state = 0, rc = 0, scaling = o->scaling;
    char path[QS_DIAG_PATH_MAX];
    if (m->hif8) {
        rc = evalquant_create_stored(q, m, o, d);
        goto done;
    }
    if (scaling != EVALQUANT_CURRENT) {
        snprintf(path, sizeof path, "%.480s/train_state.bin", o->model_dir ? o->model_dir : ".");
        if (fileio_exists(path)) {
            if ((rc = evalquant_state_open(&st, path, d)))
                goto done;
            have_state = 1;
        }
        if (scaling == EVALQUANT_DELAYED && !have_state)
            rc = diag_set(d, QS_ENOTFOUND, path, -1,
                          "--quant-scaling delayed: no training state (a run checkpoint "
                          "RUN/ckpt/step_N holds train_state.bin with the amax histories)");
        else if (scaling == EVALQUANT_DELAYED && st.n_hist == 0)
            rc = diag_set(d, QS_ENOTFOUND, path, -1,
                          "--quant-scaling delayed: the training state holds no amax histories "
                          "(run trained with qat=false?)");
        if (rc)
            goto done;
        scaling = have_state && st.n_hist > 0 ? EVALQUANT_DELAYED : EVALQUANT_CURRENT;
    }
    rc = scaling == EVALQUANT_DELAYED ? evalquant_create_delayed(q, m, o, &st, d)
                                      : evalquant_create_current(q, m, o->patterns, d);
done:
    if (have_state)
        trainstate_close(&st.r);
    if (!rc && !(q->w_scale = qs_calloc((size_t)q->n, sizeof *q->w_scale)))
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    if (rc) {
        evalquant_destroy(q);
        return rc;
    }
    *out = q;
    if (q->scaling == EVALQUANT_STORED)   /* its code packs are the quantized Linears */
        return 0;
    m->hook.self = q;
    m->hook.fn = evalquant_hook;
    m->hook.planned = evalquant_planned;
    m->hook.row_scale = evalquant_row_scale;
    m->hook.weight = evalquant_weight;
    m->hook.rows_independent = 1;   /* per-row scales (current) or frozen ones (delayed) */
    /* with packs: the planned weights are fake-quantized and packed once, here */
    if (m->packs && (rc = model_packs_substitute(m, d))) {
        evalquant_destroy(q);
        *out = NULL;
        return rc;
    }
    return 0;
}

int evalquant_create(evalquant **out, struct llama_model *m, const char *patterns, qs_diag *d)
{
    evalquant_options o = {patterns, EVALQUANT_CURRENT, NULL};
    return evalquant_create_opts(out, m, &o, d);
}

void evalquant_destroy(evalquant *q)
{
    if (!q)
        return;
    if (q->m && q->m->hook.self == q) {
        q->m->hook.self = NULL;
        q->m->hook.fn = NULL;
        q->m->hook.planned = NULL;
        q->m->hook.row_scale = NULL;
        q->m->hook.weight = NULL;
        q->m->hook.rows_independent = 0;
    }
    quant_set_destroy(q->qs);
    qs_free(q->w_scale);
    qs_free(q->row_scale);
    qs_free(q->slot_of);
    qs_free(q->names);
    qs_free(q);
}

int evalquant_count(const evalquant *q)
{
    return q ? q->n : 0;
}

const char *evalquant_module(const evalquant *q, int i)
{
    return q && i >= 0 && i < q->n ? q->names[i] : NULL;
}

int evalquant_scaling(const evalquant *q)
{
    return q ? q->scaling : EVALQUANT_CURRENT;
}

const char *evalquant_scaling_name(const evalquant *q)
{
    return q ? q->scaling_name : "current";
}

const char *evalquant_recipe_text(const evalquant *q)
{
    return q ? q->recipe_text : "";
}

void evalquant_module_at(const evalquant *q, int i, int *layer, int *module)
{
    *layer = *module = -1;
    for (int k = 0; q && i >= 0 && i < q->n && k < q->m->cfg.n_layers * MODEL_LIN_COUNT; k++)
        if (q->slot_of[k] == i) {
            *layer = k / MODEL_LIN_COUNT;
            *module = k % MODEL_LIN_COUNT;
            return;
        }
}

int evalquant_weight_scale(evalquant *q, int i, const float *w, size_t n, float *scale,
                           qs_diag *d)
{
    return quant_apply_scale(quant_set_get(q->qs, 2 * i + 1), w, n, scale, d);
}

int evalquant_input_scale(const evalquant *q, int i, float *scale)
{
    /* current scaling is per token: never one scale, whatever the history holds */
    return q->scaling == EVALQUANT_DELAYED &&
           quant_static_scale(quant_set_get(q->qs, 2 * i), scale);
}
