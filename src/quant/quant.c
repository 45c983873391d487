/* quant.c: quantizers and quantizer sets (see include/qs/quant.h for the scale rule).
 *
 * Passes over a tensor per call:
 *   quantize, history-based estimator with a usable estimate: ONE (the fused
 *     hif8_fakequant pass returns amax, clips, underflows, NaNs, squared error);
 *   quantize with `current` or the current-scaling fallback: two (amax scan, then
 *     the fused pass), which is the cost the paper holds against CTS;
 *   observe: one scan (amax, NaN/Inf, would-be clips).
 * The scan is serial: it runs once per tensor per step and memory-bound; the
 * fused pass is the place for SIMD (hif8 module).
 */
#include "qs/quant.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "qs/hif8.h"
#include "qs/mem.h"

struct quant {
    const char *name;         /* points into the set's name block */
    amax_history hist;        /* view into the set's history block */
    float last_scale;
    unsigned long n_calls;    /* quantize calls so far: moves the QSNR sample */
    quant_record acc;         /* accumulated since the last step end */
    const quant_recipe *r;    /* the set's recipe */
    /* the last quantize() call of this step, for quant_quantize_repeat() */
    int last_ok;              /* 1: valid (reset by observe, step end, history restore) */
    int last_fallback;
    float last_pred;
    size_t last_n;
    hif8_stats last_st;       /* amax and counts over the whole tensor */
};

struct quant_set {
    quant_recipe recipe;
    int n_quant;
    quant *q;                 /* [n_quant] */
    float *hist_block;        /* [n_quant * history_steps] all histories */
    char *name_block;         /* all names, NUL-separated */
    quant_record *records;    /* [n_quant] the last ended step */
};

void quant_recipe_default(quant_recipe *r)
{
    memset(r, 0, sizeof *r);
    r->est = amax_estimator_default();
    r->margin = 0;
    r->history_steps = AMAX_HISTORY_DEFAULT_STEPS;
    r->saturate = 1;
    r->want_qsnr = 1;
    r->qsnr_sample_div = QUANT_QSNR_SAMPLE_DIV_DEFAULT;
}

int quant_recipe_check(const quant_recipe *r, qs_diag *d)
{
    char est[AMAX_NAME_MAX];
    amax_estimator_format(&r->est, est, sizeof est);
    if (!strcmp(est, "unknown"))
        return diag_set(d, QS_EINVAL, NULL, -1, "recipe: unknown estimator id %d", r->est.algo);
    if (r->margin < 0 || r->margin > QUANT_MARGIN_MAX)
        return diag_set(d, QS_EINVAL, NULL, -1, "recipe: margin must be in [0, %d], got %d",
                        QUANT_MARGIN_MAX, r->margin);
    if (r->history_steps < 1 || r->history_steps > 1 << 20)
        return diag_set(d, QS_EINVAL, NULL, -1, "recipe: history must be in [1, %d] steps, got %d",
                        1 << 20, r->history_steps);
    if (r->want_qsnr && r->qsnr_sample_div < 1)
        return diag_set(d, QS_EINVAL, NULL, -1, "recipe: qsnr_sample_div must be >= 1, got %d",
                        r->qsnr_sample_div);
    if (r->est.algo == AMAX_ALGO_MAX_WINDOW && r->est.window_steps > r->history_steps)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "recipe: max-window:%d needs a history of at least %d steps, got %d",
                        r->est.window_steps, r->est.window_steps, r->history_steps);
    return 0;
}

int quant_scale_from_amax(float est_amax, int margin, float *scale)
{
    return hif8_scale_for_amax(est_amax, margin, scale);   /* the rule lives with the codec */
}

int quant_set_create(quant_set **out, const quant_recipe *r, const char *const *names, int n,
                     qs_diag *d)
{
    *out = NULL;
    int rc = quant_recipe_check(r, d);
    if (rc)
        return rc;
    if (n < 1)
        return diag_set(d, QS_EINVAL, NULL, -1, "quantizer set: need at least one name, got %d", n);
    size_t name_bytes = 0;
    for (int i = 0; i < n; i++) {
        size_t len = names[i] ? strlen(names[i]) : 0;
        if (len == 0 || len >= QUANT_NAME_MAX)
            return diag_set(d, QS_EINVAL, NULL, -1,
                            "quantizer %d: name must be 1..%d bytes, got %zu", i, QUANT_NAME_MAX - 1,
                            len);
        for (int j = 0; j < i; j++)
            if (!strcmp(names[i], names[j]))
                return diag_set(d, QS_EINVAL, NULL, -1, "quantizer name '%s' given twice (%d and %d)",
                                names[i], j, i);
        name_bytes += len + 1;
    }
    quant_set *s = qs_calloc(1, sizeof *s);
    if (!s)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory (quantizer set)");
    s->recipe = *r;
    s->n_quant = n;
    s->q = qs_calloc((size_t)n, sizeof *s->q);
    s->records = qs_calloc((size_t)n, sizeof *s->records);
    s->hist_block = qs_calloc((size_t)n * (size_t)r->history_steps, sizeof *s->hist_block);
    s->name_block = qs_malloc(name_bytes);
    if (!s->q || !s->records || !s->hist_block || !s->name_block) {
        quant_set_destroy(s);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory (%d quantizers x %d history steps)",
                        n, r->history_steps);
    }
    char *p = s->name_block;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]) + 1;
        memcpy(p, names[i], len);
        s->q[i].name = p;
        p += len;
        amax_history_init_view(&s->q[i].hist, s->hist_block + (size_t)i * (size_t)r->history_steps,
                               r->history_steps);
        s->q[i].r = &s->recipe;
    }
    *out = s;
    return 0;
}

void quant_set_destroy(quant_set *s)
{
    if (!s)
        return;
    qs_free(s->q);
    qs_free(s->records);
    qs_free(s->hist_block);
    qs_free(s->name_block);
    qs_free(s);
}

int quant_set_count(const quant_set *s) { return s->n_quant; }
const quant_recipe *quant_set_recipe(const quant_set *s) { return &s->recipe; }
quant *quant_set_get(quant_set *s, int i) { return i >= 0 && i < s->n_quant ? &s->q[i] : NULL; }

quant *quant_set_find(quant_set *s, const char *name)
{
    for (int i = 0; i < s->n_quant; i++)
        if (!strcmp(s->q[i].name, name))
            return &s->q[i];
    return NULL;
}

void quant_set_step_end(quant_set *s, const quant_record **records)
{
    for (int i = 0; i < s->n_quant; i++) {
        quant *q = &s->q[i];
        if (q->acc.mode != QUANT_MODE_NONE)
            amax_history_push(&q->hist, q->acc.amax);
        s->records[i] = q->acc;
        memset(&q->acc, 0, sizeof q->acc);
        q->last_ok = 0;
    }
    *records = s->records;
}

void quant_step_record_get(const quant *q, quant_record *rec) { *rec = q->acc; }
void quant_step_record_set(quant *q, const quant_record *rec) { q->acc = *rec; }

void quant_set_skip_calls(quant_set *s, unsigned long n)
{
    for (int i = 0; i < s->n_quant; i++)
        s->q[i].n_calls += n;
}

const char *quant_name(const quant *q) { return q->name; }
const amax_history *quant_history(const quant *q) { return &q->hist; }
float quant_last_scale(const quant *q) { return q->last_scale; }

void quant_history_restore(quant *q, const float *vals_oldest_first, int n)
{
    amax_history_clear(&q->hist);
    q->last_ok = 0;
    for (int i = 0; i < n; i++)
        amax_history_push(&q->hist, vals_oldest_first[i]);
}

unsigned long quant_qsnr_cursor(const quant *q) { return q->n_calls; }

void quant_qsnr_cursor_set(quant *q, unsigned long calls)
{
    q->n_calls = calls;
    q->last_ok = 0;
}

/* One read of x: amax over non-NaN values, NaN count, count of |x*scale| > 32768
 * (scale 0: not counted).  Inf makes amax Inf, which callers reject. */
static void quant_scan(const float *x, size_t n, float scale, float *amax, size_t *n_nan,
                       size_t *n_over)
{
    float m = 0.0f;
    size_t nn = 0, no = 0;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        nn += a != a;
        m = a > m ? a : m;
        no += fabsf(x[i] * scale) > HIF8_MAX_FINITE;
    }
    *amax = m;
    *n_nan = nn;
    *n_over = no;
}

static int quant_bad_values(const quant *q, size_t n_nan, float amax, qs_diag *d)
{
    if (n_nan)
        return diag_set(d, QS_ENAN, NULL, -1, "tensor '%s': %zu NaN value(s)", q->name, n_nan);
    if (!isfinite(amax))
        return diag_set(d, QS_ENAN, NULL, -1, "tensor '%s': Inf value(s)", q->name);
    return 0;
}

/* The scale for this call from the history, or current scaling when there is no
 * usable estimate.  *amax_now is set when a first pass was needed, else -1. */
static int quant_pick_scale(quant *q, const float *x, size_t n, float *scale, float *pred,
                            int *fallback, float *amax_now, qs_diag *d)
{
    const quant_recipe *r = q->r;
    *amax_now = -1.0f;
    *fallback = 0;
    float est = 0.0f;
    if (amax_estimator_needs_current(&r->est)) {
        size_t nn, no;
        quant_scan(x, n, 0.0f, amax_now, &nn, &no);
        int rc = quant_bad_values(q, nn, *amax_now, d);
        if (rc)
            return rc;
    }
    if (amax_estimate(&r->est, &q->hist, *amax_now, &est) &&
        quant_scale_from_amax(est, r->margin, scale) == 0) {
        *pred = est;
        return 0;
    }
    *fallback = 1;
    if (*amax_now < 0.0f) {
        size_t nn, no;
        quant_scan(x, n, 0.0f, amax_now, &nn, &no);
        int rc = quant_bad_values(q, nn, *amax_now, d);
        if (rc)
            return rc;
    }
    *pred = *amax_now;
    if (quant_scale_from_amax(*amax_now, r->margin, scale))
        *scale = 1.0f;
    return 0;
}

static void quant_acc_add(quant_record *a, int mode, int has_pred, int fallback, float pred,
                          float amax, float scale, size_t n, size_t n_clip)
{
    if (a->mode == QUANT_MODE_NONE) {
        a->pred_amax = pred;
        a->amax = amax;
    }
    a->mode = mode > a->mode ? mode : a->mode;
    a->has_pred |= has_pred;
    a->fallback |= fallback;
    a->pred_amax = pred > a->pred_amax ? pred : a->pred_amax;
    a->amax = amax > a->amax ? amax : a->amax;
    a->scale = scale;
    a->n_elems += n;
    a->n_clip += n_clip;
}

int quant_observe(quant *q, const float *x, size_t n, qs_diag *d)
{
    const quant_recipe *r = q->r;
    float est = 0.0f, scale = 0.0f, amax;
    int has_pred = 0;
    if (!amax_estimator_needs_current(&r->est) && amax_estimate(&r->est, &q->hist, 0.0f, &est) &&
        quant_scale_from_amax(est, r->margin, &scale) == 0)
        has_pred = 1;
    size_t nn, n_over;
    quant_scan(x, n, has_pred ? scale : 0.0f, &amax, &nn, &n_over);
    int rc = quant_bad_values(q, nn, amax, d);
    if (rc)
        return rc;
    int fallback = 0;
    if (!has_pred) {   /* `current`, or no usable history: the prediction is this amax */
        n_over = 0;
        if (amax_estimator_needs_current(&r->est) || q->hist.len_steps > 0) {
            fallback = !amax_estimator_needs_current(&r->est);
            has_pred = 1;
            est = amax;
        }
        if (quant_scale_from_amax(amax, r->margin, &scale))
            scale = 1.0f;
    }
    q->last_scale = scale;
    q->last_ok = 0;
    quant_acc_add(&q->acc, QUANT_MODE_OBSERVE, has_pred, fallback, has_pred ? est : 0.0f, amax,
                  scale, n, n_over);
    return 0;
}

/* Non-saturating HiF8: values at or beyond 1.25 * 2^15 after scaling become +-Inf. */
/* One quantize call into the step's accumulator: amax, scale, clipped and
 * underflow counts, and the QSNR sums when the recipe wants them. */
static void quant_record_quantize(quant *q, int fallback, float pred, float scale, size_t n,
                                  const hif8_stats *st)
{
    quant_acc_add(&q->acc, QUANT_MODE_QUANT, 1, fallback, pred, st->amax, scale, n,
                  st->n_clipped);
    q->acc.n_under += st->n_underflow;
    if (q->r->want_qsnr) {
        q->acc.has_sq = 1;
        q->acc.sq_err += st->sq_err;
        q->acc.sq_sum += st->sq_sum;
    }
}

static void quant_apply_nonsat(const float *x, float *y, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i] * scale) >= HIF8_OVERFLOW_THRESHOLD)
            y[i] = x[i] > 0.0f ? INFINITY : -INFINITY;
}

/* The fused pass over x in up to three ranges, squared error only on the QSNR
 * sample in the middle one.  Elements are independent, so y, amax and the
 * counts equal one call over all of x. */
/* The QSNR sample of this call: 1 and [*start, *start + *len) when sampling,
 * 0 when the squared errors run over the whole tensor (or are not wanted). */
static int quant_sample_range(const quant *q, size_t n, size_t *start, size_t *len)
{
    const quant_recipe *r = q->r;
    size_t l = n;
    if (r->want_qsnr && r->qsnr_sample_div > 1) {
        l = n / (size_t)r->qsnr_sample_div;
        if (l < QUANT_QSNR_MIN_ELEMS)
            l = QUANT_QSNR_MIN_ELEMS;
        l = (l + 15) & ~(size_t)15;
    }
    if (!r->want_qsnr || l >= n)
        return 0;
    /* Knuth multiplicative hash of the call count: the sample wanders over the tensor */
    *start = (size_t)((q->n_calls * 2654435761ul) % (n - l + 1)) & ~(size_t)15;
    *len = l;
    return 1;
}

static void quant_fused_pass(quant *q, const float *x, float *y, size_t n, float scale,
                             hif8_stats *st)
{
    const quant_recipe *r = q->r;
    size_t start, len;
    if (!quant_sample_range(q, n, &start, &len)) {
        hif8_fakequant(x, y, n, scale, r->want_qsnr, st);
        return;
    }
    hif8_stats a, b;
    hif8_fakequant(x, y, start, scale, 0, &a);
    hif8_fakequant(x + start, y + start, len, scale, 1, st);
    hif8_fakequant(x + start + len, y + start + len, n - start - len, scale, 0, &b);
    st->amax = fmaxf(st->amax, fmaxf(a.amax, b.amax));
    st->n_clipped += a.n_clipped + b.n_clipped;
    st->n_underflow += a.n_underflow + b.n_underflow;
    st->n_nan += a.n_nan + b.n_nan;
}

/* What every fake-quant call does: refuse non-saturating in place, pick the scale
 * from the history, y = Q(x) (the fused pass with its QSNR sample when `record`,
 * which also counts the call), check for NaN/Inf, fix up clipped elements when
 * not saturating. */
static int quant_fake(quant *q, const float *x, float *y, size_t n, int record, float *scale,
                      float *pred, int *fallback, hif8_stats *st, qs_diag *d)
{
    const quant_recipe *r = q->r;
    if (!r->saturate && x == y)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "tensor '%s': non-saturating fake-quant cannot run in place", q->name);
    float amax_now;
    int rc = quant_pick_scale(q, x, n, scale, pred, fallback, &amax_now, d);
    if (rc)
        return rc;
    if (record) {
        quant_fused_pass(q, x, y, n, *scale, st);
        q->n_calls++;
    } else {
        hif8_fakequant(x, y, n, *scale, 0, st);
    }
    if ((rc = quant_bad_values(q, st->n_nan, st->amax, d)))
        return rc;
    if (!r->saturate && st->n_clipped)
        quant_apply_nonsat(x, y, n, *scale);
    return 0;
}

int quant_quantize(quant *q, const float *x, float *y, size_t n, qs_diag *d)
{
    float scale, pred;
    int fallback;
    hif8_stats st;
    int rc = quant_fake(q, x, y, n, 1, &scale, &pred, &fallback, &st, d);
    if (rc)
        return rc;
    q->last_scale = scale;
    q->last_ok = 1;
    q->last_fallback = fallback;
    q->last_pred = pred;
    q->last_n = n;
    q->last_st = st;
    quant_record_quantize(q, fallback, pred, scale, n, &st);
    return 0;
}

int quant_quantize_repeat(quant *q, const float *x, float *y, size_t n, qs_diag *d)
{
    const quant_recipe *r = q->r;
    size_t start = 0, len = 0;
    if (!q->last_ok || q->last_n != n || (r->want_qsnr && !quant_sample_range(q, n, &start, &len)))
        return quant_quantize(q, x, y, n, d);   /* no earlier call, or QSNR over all of x */
    /* same x, same history -> same scale, y, amax and counts; only the QSNR
     * sample moves: re-run the fused pass over it (y's values there are rewritten
     * with the same bits) for this call's squared errors */
    float scale = q->last_scale;
    hif8_stats st = q->last_st;
    st.sq_err = st.sq_sum = 0.0;
    if (r->want_qsnr) {
        hif8_stats smp;
        hif8_fakequant(x + start, y + start, len, scale, 1, &smp);
        if (!r->saturate && smp.n_clipped)
            quant_apply_nonsat(x + start, y + start, len, scale);
        st.sq_err = smp.sq_err;
        st.sq_sum = smp.sq_sum;
    }
    q->n_calls++;
    quant_record_quantize(q, q->last_fallback, q->last_pred, scale, n, &st);
    return 0;
}

int quant_ste_parse(const char *name, int *mode, qs_diag *d)
{
    if (!strcmp(name, "pass"))
        *mode = QUANT_STE_PASS;
    else if (!strcmp(name, "masked"))
        *mode = QUANT_STE_MASKED;
    else
        return diag_set(d, QS_EINVAL, NULL, -1, "unknown straight-through mode '%s', expected pass or masked",
                        name);
    return 0;
}

void quant_ste_backward(int mode, const float *x, float scale, float *grad, size_t n)
{
    if (mode != QUANT_STE_MASKED)
        return;
    long ln = (long)n;
    /* a select, not a branch, so the loop vectorizes; elements are independent */
#ifdef _OPENMP
#pragma omp parallel for simd schedule(static) if (ln > 65536)
#endif
    for (long i = 0; i < ln; i++)
        grad[i] = fabsf(x[i] * scale) > HIF8_MAX_FINITE ? 0.0f : grad[i];
}

int quant_apply(quant *q, const float *x, float *y, size_t n, qs_diag *d)
{
    float scale, pred;
    int fallback;
    hif8_stats st;
    return quant_fake(q, x, y, n, 0, &scale, &pred, &fallback, &st, d);
}

int quant_apply_scale(quant *q, const float *x, size_t n, float *scale, qs_diag *d)
{
    float pred, amax_now;
    int fallback;
    return quant_pick_scale(q, x, n, scale, &pred, &fallback, &amax_now, d);
}

int quant_static_scale(const quant *q, float *scale)
{
    const quant_recipe *r = q->r;
    float est = 0.0f;
    return !amax_estimator_needs_current(&r->est) && amax_estimate(&r->est, &q->hist, -1.0f, &est) &&
           quant_scale_from_amax(est, r->margin, scale) == 0;
}

void quant_replay(const quant *q, const float *x, float *y, size_t n, float scale)
{
    enum { QUANT_REPLAY_CHUNK = 1 << 16 };
    const int saturate = q->r->saturate;
    long n_chunks = (long)((n + QUANT_REPLAY_CHUNK - 1) / QUANT_REPLAY_CHUNK);
    /* elements are independent: any split gives the bits of one call */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n_chunks > 1)
#endif
    for (long ch = 0; ch < n_chunks; ch++) {
        size_t lo = (size_t)ch * QUANT_REPLAY_CHUNK;
        size_t len = n - lo < QUANT_REPLAY_CHUNK ? n - lo : QUANT_REPLAY_CHUNK;
        hif8_stats st;
        hif8_fakequant(x + lo, y + lo, len, scale, 0, &st);
        if (!saturate && st.n_clipped)
            quant_apply_nonsat(x + lo, y + lo, len, scale);
    }
}
