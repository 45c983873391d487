/* model_ppl.c: sliding-window scoring of a token sequence: perplexity of one
 * model, and the comparison of a model with a reference on the same windows
 * (see include/qs/model_infer.h).  One window walker serves both: it runs each
 * window through the model(s) in chunks on the KV cache and hands the rows of
 * the tokens the window scores to a per-chunk function, in position order. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "qs/layers.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"
#include "qs/vecops.h"

#define PPL_CHUNK_MAX 256

/* rows consecutive scored positions: logits[rows, V] (and the reference's),
 * targets[rows] the tokens they predict */
typedef int (*ppl_rows_fn)(void *ctx, const float *logits, const float *logits_ref,
                           const int32_t *targets, int rows, qs_diag *d);

int model_ppl_window_default(const llama_config *c)
{
    int ctx = hfconfig_max_context(c);
    return ctx < 1024 ? ctx : 1024;
}

/* The arena's shape: windows of *win tokens (the text may be shorter), fed in
 * chunks of *chunk on a cache of *win positions. */
static void ppl_shape(int window, size_t n_ids, int *win, int *chunk)
{
    *win = (size_t)window < n_ids ? window : (int)n_ids;
    *chunk = *win < PPL_CHUNK_MAX ? *win : PPL_CHUNK_MAX;
}

size_t model_ppl_acts_elems(const llama_config *c, int window)
{
    int win, chunk;
    ppl_shape(window, (size_t)window, &win, &chunk);
    return model_acts_elems(c, 1, chunk, win, MODEL_ACTS_INFER);
}

/* The lm_head runs only on the rows a chunk scores (*n from row *first: none
 * in the first half of a window that overlaps the previous one) when its rows
 * are independent of each other (matmul_rows_independent: the same bits as on
 * every row); otherwise on every row. */
static void ppl_head_rows(llama_acts *a, const llama_model *m, const int *first, const int *n)
{
    int sel = matmul_rows_independent(m->precision);
    a->logits_first = sel ? first : NULL;
    a->logits_rows = sel ? n : NULL;
}

/* The logits of chunk row lo: the first row of a->logits when the head ran on
 * the scored rows only. */
static const float *ppl_logits(const llama_acts *a, long lo, int V)
{
    return a->logits_rows ? a->logits : a->logits + (size_t)lo * V;
}

/* compare: which of the two models an error of a forward came from */
static void ppl_side_error(qs_diag *d, const char *side)
{
    if (!d)
        return;
    char why[QS_DIAG_MSG_MAX];
    snprintf(why, sizeof why, "%s", d->msg);
    snprintf(d->msg, sizeof d->msg, "compare: the %s: %.400s", side, why);
}

static int ppl_windows(llama_model *m, llama_model *ref, const int32_t *ids, size_t n_ids,
                       int window, int stride, ppl_rows_fn fn, void *ctx, size_t *n_windows,
                       qs_diag *d)
{
    *n_windows = 0;
    if (window < 2 || stride < 1 || stride > window)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "ppl: need window >= 2 and 1 <= stride <= window (got %d, %d)", window,
                        stride);
    if (n_ids < 2)
        return diag_set(d, QS_EINVAL, NULL, -1, "ppl: need at least 2 tokens, got %zu", n_ids);
    const int V = m->cfg.vocab_size;
    if (ref && ref->cfg.vocab_size != V)
        return diag_set(d, QS_ESHAPE, NULL, -1,
                        "compare: the model has %d vocabulary entries, the reference %d", V,
                        ref->cfg.vocab_size);
    int win, chunk;
    ppl_shape(window, n_ids, &win, &chunk);
    llama_acts a, ra;
    memset(&ra, 0, sizeof ra);
    int rc = model_acts_init(&a, &m->cfg, 1, chunk, win, MODEL_ACTS_INFER, d);
    if (rc)
        return rc;
    if (ref && (rc = model_acts_init(&ra, &ref->cfg, 1, chunk, win, MODEL_ACTS_INFER, d))) {
        model_acts_free(&a);
        return rc;
    }
    size_t prev_end = 0;
    for (size_t begin = 0; prev_end < n_ids; begin += (size_t)stride) {
        size_t end = begin + (size_t)win < n_ids ? begin + (size_t)win : n_ids;
        size_t first = prev_end > begin + 1 ? prev_end : begin + 1;   /* first scored token */
        for (size_t c0 = begin; c0 < end && !rc; c0 += (size_t)chunk) {
            int rows = (int)(end - c0 < (size_t)chunk ? end - c0 : (size_t)chunk);
            /* row j predicts ids[c0 + j + 1], scored when that is in [first, end) */
            long lo = (long)first - (long)c0 - 1, hi = (long)end - (long)c0 - 1;
            lo = lo > 0 ? lo : 0;
            hi = hi < rows ? hi : rows;
            /* a chunk before the first scored row (windows of 3+ chunks) runs no head */
            int head_first = hi > lo ? (int)lo : 0, head_rows = hi > lo ? (int)(hi - lo) : 0;
            ppl_head_rows(&a, m, &head_first, &head_rows);
            if (ref)
                ppl_head_rows(&ra, ref, &head_first, &head_rows);
            if ((rc = model_forward(m, &a, ids + c0, NULL, 1, rows, (int)(c0 - begin), d))) {
                if (ref)
                    ppl_side_error(d, "model (--model)");
                break;
            }
            if (ref && (rc = model_forward(ref, &ra, ids + c0, NULL, 1, rows, (int)(c0 - begin),
                                           d))) {
                ppl_side_error(d, "reference (--reference)");
                break;
            }
            if (hi > lo)
                rc = fn(ctx, ppl_logits(&a, lo, V), ref ? ppl_logits(&ra, lo, V) : NULL,
                        ids + c0 + (size_t)lo + 1, (int)(hi - lo), d);
        }
        if (rc)
            break;
        (*n_windows)++;
        prev_end = end;
    }
    model_acts_free(&a);
    if (ref)
        model_acts_free(&ra);
    return rc;
}

typedef struct ppl_walk {
    model_ppl_result *r;
    int V;
} ppl_walk;

static int ppl_rows_nll(void *ctx, const float *logits, const float *logits_ref,
                        const int32_t *targets, int rows, qs_diag *d)
{
    (void)logits_ref;
    ppl_walk *w = ctx;
    double *nll = qs_malloc((size_t)(rows > 0 ? rows : 1) * sizeof *nll);
    if (!nll)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    /* rows in parallel (each row's sum in order), summed in row order: the
     * bits of a serial loop on any thread count */
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)rows * w->V >= ((size_t)1 << 18))
#endif
    for (int j = 0; j < rows; j++)
        nll[j] = xent_row_nll(logits + (size_t)j * w->V, w->V, targets[j]);
    int rc = 0;
    for (int j = 0; j < rows && !rc; j++) {
        if (!isfinite(nll[j])) {   /* as compare and eval: no "nll/token nan" */
            rc = diag_set(d, QS_ENAN, NULL, -1, "ppl: non-finite logits at scored position %zu",
                          w->r->n_scored);
            break;
        }
        w->r->nll_sum += nll[j];
        w->r->n_scored++;
    }
    qs_free(nll);
    return rc;
}

int model_ppl_compute(llama_model *m, const int32_t *ids, size_t n_ids, int window, int stride,
                      model_ppl_result *r, qs_diag *d)
{
    r->nll_sum = 0;
    r->n_scored = 0;
    ppl_walk w = {r, m->cfg.vocab_size};
    return ppl_windows(m, NULL, ids, n_ids, window, stride, ppl_rows_nll, &w, &r->n_windows, d);
}

int model_compare_row_stats(const float *logits, const float *logits_ref, int V, int32_t target,
                            model_compare_row *r)
{
    int top = vecops_argmax_f32(logits, V), top_ref = vecops_argmax_f32(logits_ref, V);
    const double mx = logits[top], mx_ref = logits_ref[top_ref];
    if (!isfinite(mx) || !isfinite(mx_ref))
        return QS_ENAN;
    double s = 0.0, s_ref = 0.0, acc = 0.0;
    for (int v = 0; v < V; v++) {
        double x = logits[v], x_ref = logits_ref[v], e_ref = exp(x_ref - mx_ref);
        s += exp(x - mx);
        s_ref += e_ref;
        acc += e_ref * (x_ref - x);
    }
    const double lse = mx + log(s), lse_ref = mx_ref + log(s_ref);
    r->kl = acc / s_ref - (lse_ref - lse);
    if (!isfinite(r->kl))   /* a NaN or an infinite logit below the maximum */
        return QS_ENAN;
    r->dlogp = fabs(((double)logits_ref[top_ref] - lse_ref) - ((double)logits[top_ref] - lse));
    r->top = top;
    r->top_ref = top_ref;
    /* xent_row_nll's value from the sums above: the same max, the same terms
     * in the same order, log(s) + max - x (IEEE addition commutes) */
    r->nll = target >= 0 ? lse - logits[target] : 0.0;
    r->nll_ref = target >= 0 ? lse_ref - logits_ref[target] : 0.0;
    return 0;
}

typedef struct compare_walk {
    model_compare_row *rows;   /* [n_ids - 1] */
    size_t n;                  /* positions done */
    int V;
} compare_walk;

int model_compare_rows(const float *logits, const float *logits_ref, int V,
                       const int32_t *targets, int rows, model_compare_row *out, int *bad_row)
{
    int bad = -1;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)rows * V > 65536)
#endif
    for (int j = 0; j < rows; j++) {
        const size_t off = (size_t)j * V;
        if (model_compare_row_stats(logits + off, logits_ref + off, V, targets ? targets[j] : -1,
                                    &out[j])) {
#ifdef _OPENMP
#pragma omp critical(compare_bad)
#endif
            bad = bad < 0 || j < bad ? j : bad;
        }
    }
    *bad_row = bad;
    return bad >= 0 ? QS_ENAN : 0;
}

static int compare_rows(void *ctx, const float *logits, const float *logits_ref,
                        const int32_t *targets, int rows, qs_diag *d)
{
    compare_walk *w = ctx;
    int bad;
    if (model_compare_rows(logits, logits_ref, w->V, targets, rows, w->rows + w->n, &bad)) {
        const float *row = logits + (size_t)bad * (size_t)w->V;
        int of_model = 0;
        for (int v = 0; v < w->V && !of_model; v++)
            of_model = !isfinite(row[v]);
        return diag_set(d, QS_ENAN, NULL, -1,
                        "compare: non-finite logits of the %s at scored position %zu",
                        of_model ? "model (--model)" : "reference (--reference)",
                        w->n + (size_t)bad + 1);
    }
    w->n += (size_t)rows;
    return 0;
}

static int compare_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* nearest rank: the ceil(q n)-th smallest of sorted[n] */
static double compare_rank(const double *sorted, size_t n, double q)
{
    size_t k = (size_t)ceil(q * (double)n);
    return sorted[k > 0 ? k - 1 : 0];
}

int model_compare_compute(llama_model *m, llama_model *ref, const int32_t *ids, size_t n_ids,
                          int window, int stride, model_compare_row *rows,
                          model_compare_result *r, qs_diag *d)
{
    memset(r, 0, sizeof *r);
    compare_walk w = {rows, 0, m->cfg.vocab_size};
    model_compare_row *own = NULL;
    if (!rows && n_ids > 1 &&
        !(w.rows = own = qs_malloc((n_ids - 1) * sizeof *own)))
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for %zu positions", n_ids - 1);
    int rc = ppl_windows(m, ref, ids, n_ids, window, stride, compare_rows, &w, &r->n_windows, d);
    double *kl = rc || !w.n ? NULL : qs_malloc(w.n * sizeof *kl);
    if (!rc && !kl)
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for %zu positions", w.n);
    if (!rc) {
        const size_t n = w.n;
        double kl_sum = 0.0, kl_sq = 0.0, dlogp = 0.0, nll = 0.0, nll_ref = 0.0;
        size_t same = 0;
        for (size_t i = 0; i < n; i++) {
            const model_compare_row *x = &w.rows[i];
            kl_sum += x->kl;
            kl_sq += x->kl * x->kl;
            dlogp += x->dlogp;
            nll += x->nll;
            nll_ref += x->nll_ref;
            same += x->top == x->top_ref;
            kl[i] = x->kl;
        }
        r->n_scored = n;
        r->kl_mean = kl_sum / (double)n;
        r->kl_stderr = n > 1 ? sqrt(fmax(kl_sq / (double)n - r->kl_mean * r->kl_mean, 0.0) /
                                    (double)(n - 1))
                             : NAN;
        r->top1_agree = (double)same / (double)n;
        r->top1_stderr = n > 1 ? sqrt(r->top1_agree * (1.0 - r->top1_agree) / (double)(n - 1))
                               : NAN;
        r->dlogp_mean = dlogp / (double)n;
        r->nll = nll / (double)n;
        r->nll_ref = nll_ref / (double)n;
        qsort(kl, n, sizeof *kl, compare_cmp_double);
        r->kl_median = compare_rank(kl, n, 0.5);
        r->kl_p99 = compare_rank(kl, n, 0.99);
        r->kl_max = kl[n - 1];
    }
    qs_free(kl);
    qs_free(own);
    return rc;
}
