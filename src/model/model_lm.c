/* model_lm.c: the lm.h scoring interface on a llama_model.
 *
 * Per request: the context goes through the model once (its KV cache kept) and
 * every continuation is scored on top of it from position n_ctx, overwriting
 * only the cache rows past the context.  A continuation for which context +
 * continuation does not fit max_len is scored on its own, left-truncated as
 * the harness does: input = (ctx + cont)[-(max_len + 1):][:-1].
 * Continuations of >= 2 tokens are scored LM_BATCH at a time in ONE forward
 * (B rows, each on a copy of the context KV).
 * Requests are processed one at a time in order, so a request's result never
 * depends on what else is in the batch; layers are deterministic per thread
 * count (see layers.h) and log-softmax is computed in double.
 * The lm_head (V x C, the largest matmul at V = 32000) runs only on rows whose
 * logits are scored (acts.logits_tail): the context's last row, and for a
 * truncated continuation its last n_cont rows.
 */
#include <math.h>
#include <string.h>

#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"

#define LM_BATCH 4      /* continuations per batched forward */
#define LM_BATCH_T 128  /* longest continuation (tokens fed) scored in a batch */

struct model_lm {
    llama_model *m;
    llama_acts a;       /* B = 1, T = Tcap = max_len, inference */
    llama_acts ab;      /* B = LM_BATCH continuations on copies of the context KV (lazy) */
    int ab_ready;
    int max_len;
    int32_t *seq;       /* [max_len + 1] scratch for truncated sequences */
    int32_t *bt;        /* [LM_BATCH * LM_BATCH_T] batched continuation tokens */
    float *ctx_logits;  /* [V] logits after the last context token */
};

int model_lm_create(model_lm **out, llama_model *m, int max_len, qs_diag *d)
{
    *out = NULL;
    if (max_len < 2 || max_len > hfconfig_max_context(&m->cfg))
        return diag_set(d, QS_ERANGE, NULL, -1, "scorer: max_len %d outside [2, %d]", max_len,
                        hfconfig_max_context(&m->cfg));
    model_lm *lm = qs_calloc(1, sizeof *lm);
    if (!lm)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    lm->m = m;
    lm->max_len = max_len;
    int rc = model_acts_init(&lm->a, &m->cfg, 1, max_len, max_len, 0, d);
    lm->seq = qs_malloc(((size_t)max_len + 1) * sizeof *lm->seq);
    lm->ctx_logits = qs_malloc((size_t)m->cfg.vocab_size * sizeof *lm->ctx_logits);
    lm->bt = qs_malloc((size_t)LM_BATCH * LM_BATCH_T * sizeof *lm->bt);
    if (!rc && (!lm->seq || !lm->ctx_logits || !lm->bt))
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    if (rc) {
        model_lm_destroy(lm);
        return rc;
    }
    *out = lm;
    return 0;
}

void model_lm_destroy(model_lm *lm)
{
    if (!lm)
        return;
    model_acts_free(&lm->a);
    if (lm->ab_ready)
        model_acts_free(&lm->ab);
    qs_free(lm->bt);
    qs_free(lm->seq);
    qs_free(lm->ctx_logits);
    qs_free(lm);
}

/* log p(tok | row) in double; *is_max: tok is the argmax (lowest id on ties). */
static double lm_logprob(const float *row, int V, int32_t tok, int *is_max)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (row[v] > row[best])
            best = v;
    double s = 0;
    for (int v = 0; v < V; v++)
        s += exp((double)row[v] - row[best]);
    *is_max = best == tok;
    return (double)row[tok] - row[best] - log(s);
}

/* Scores cont[0..n) where row i of logits (first_row + i) predicts cont[i]. */
static void lm_sum(const float *logits, int V, const int32_t *cont, size_t n, double *ll, int *gr)
{
    *ll = 0;
    *gr = 1;
    for (size_t i = 0; i < n; i++) {
        int is_max;
        *ll += lm_logprob(logits + i * (size_t)V, V, cont[i], &is_max);
        *gr &= is_max;
    }
}

static int lm_score_truncated(model_lm *lm, const lm_request *r, int c, double *ll, int *gr,
                              qs_diag *d)
{
    size_t nc = r->n_cont_tok[c], total = r->n_ctx + nc, keep = (size_t)lm->max_len + 1;
    if (nc > (size_t)lm->max_len)
        return diag_set(d, QS_ERANGE, NULL, -1,
                        "continuation of %zu tokens exceeds the context of %d", nc, lm->max_len);
    size_t start = total > keep ? total - keep : 0, n = total - start;
    for (size_t i = 0; i < n; i++) {
        size_t j = start + i;
        lm->seq[i] = j < r->n_ctx ? r->ctx[j] : r->cont[c][j - r->n_ctx];
    }
    lm->a.logits_tail = (int)nc;   /* lm_head only on the rows that predict cont */
    int rc = model_forward(lm->m, &lm->a, lm->seq, NULL, 1, (int)(n - 1), 0, d);
    lm->a.logits_tail = 0;
    if (rc)
        return rc;
    lm_sum(lm->a.logits, lm->m->cfg.vocab_size, r->cont[c], nc, ll, gr);
    return 0;
}

/* The batch arena holds T fed tokens per row at positions up to Tcap. */
static int lm_batch_reserve(model_lm *lm, int T, int Tcap, qs_diag *d)
{
    if (lm->ab_ready && lm->ab.T >= T && lm->ab.Tcap >= Tcap)
        return 0;
    int nt = lm->ab_ready && lm->ab.T > T ? lm->ab.T : T;
    int ncap = lm->ab_ready && lm->ab.Tcap > Tcap ? lm->ab.Tcap : Tcap;
    nt = nt < 32 ? 32 : nt;
    ncap = (ncap + 255) / 256 * 256;
    ncap = ncap > lm->max_len ? lm->max_len : ncap;
    nt = nt > ncap ? ncap : nt;
    if (lm->ab_ready)
        model_acts_free(&lm->ab);
    lm->ab_ready = 0;
    int rc = model_acts_init(&lm->ab, &lm->m->cfg, LM_BATCH, nt, ncap, 0, d);
    lm->ab_ready = rc == 0;
    return rc;
}

/* Scores continuations idx[0..nb) (each fits on the context, >= 2 tokens) in ONE
 * forward of nb rows at positions n_ctx.., every row attending to its own copy of
 * the context KV computed in lm->a.  Rows are right-padded with their last token:
 * causal attention keeps padding out of the scored rows. */
static int lm_score_batch(model_lm *lm, const lm_request *r, const int *idx, int nb, double *ll,
                          int *gr, qs_diag *d)
{
    const llama_config *c = &lm->m->cfg;
    int Tm = 0, V = c->vocab_size;
    for (int b = 0; b < nb; b++) {
        int t = (int)r->n_cont_tok[idx[b]] - 1;
        Tm = t > Tm ? t : Tm;
    }
    int rc = lm_batch_reserve(lm, Tm, (int)r->n_ctx + Tm, d);
    if (rc)
        return rc;
    const size_t KD = (size_t)c->n_kv_heads * c->head_dim, n_ctx = r->n_ctx;
    const size_t sa = (size_t)lm->a.Tcap * KD, sb = (size_t)LM_BATCH * lm->ab.Tcap * KD;
    for (int l = 0; l < c->n_layers; l++)
        for (int b = 0; b < nb; b++) {
            size_t dst = (size_t)l * sb + (size_t)b * lm->ab.Tcap * KD;
            memcpy(lm->ab.kcache + dst, lm->a.kcache + (size_t)l * sa, n_ctx * KD * sizeof(float));
            memcpy(lm->ab.vcache + dst, lm->a.vcache + (size_t)l * sa, n_ctx * KD * sizeof(float));
        }
    for (int b = 0; b < nb; b++) {
        const int32_t *ct = r->cont[idx[b]];
        int n = (int)r->n_cont_tok[idx[b]] - 1;
        for (int t = 0; t < Tm; t++)
            lm->bt[b * Tm + t] = ct[t < n ? t : n - 1];
    }
    /* the lm_head only on each row's own (unpadded) positions, logits packed */
    int rows[LM_BATCH];
    for (int b = 0; b < nb; b++)
        rows[b] = (int)r->n_cont_tok[idx[b]] - 1;
    lm->ab.logits_rows = rows;
    rc = model_forward(lm->m, &lm->ab, lm->bt, NULL, nb, Tm, (int)n_ctx, d);
    lm->ab.logits_rows = NULL;
    if (rc)
        return rc;
    size_t first = 0;
    for (int b = 0; b < nb; b++) {
        const int32_t *ct = r->cont[idx[b]];
        double rest;
        int gr_rest;
        lm_sum(lm->ab.logits + first * V, V, ct + 1, (size_t)rows[b], &rest, &gr_rest);
        first += (size_t)rows[b];
        ll[b] += rest;
        gr[b] &= gr_rest;
    }
    return 0;
}

static int lm_batch_flush(model_lm *lm, const lm_request *r, lm_result *res, const int *idx,
                          int nb, double *lb, int *gb, qs_diag *d)
{
    int rc = lm_score_batch(lm, r, idx, nb, lb, gb, d);
    for (int b = 0; !rc && b < nb; b++) {
        res->loglik[idx[b]] = lb[b];
        if (res->greedy)
            res->greedy[idx[b]] = gb[b];
    }
    return rc;
}

/* A continuation is scored on the shared context when context + continuation
 * fits max_len, else on its own (truncated).  The choice depends only on that
 * continuation, and shared ones are all scored before any truncated one
 * overwrites the cache, so each result depends on the request alone.  With
 * AVX-512 every layer is row-invariant (our GEMM, attention: layer_attn_impl.h),
 * so the batch padding to the longest sibling does not change a bit; without
 * it the sgemm calls see a different row count: last-bit differences (~1e-6). */
static int lm_score_one(model_lm *lm, const lm_request *r, lm_result *res, qs_diag *d)
{
    int V = lm->m->cfg.vocab_size, rc, ctx_ready = 0;
    for (int c = 0; c < r->n_cont; c++)
        if (r->n_cont_tok[c] < 1)
            return diag_set(d, QS_EINVAL, NULL, -1, "continuation %d is empty", c);
    if (r->n_ctx < 1)
        return diag_set(d, QS_EINVAL, NULL, -1, "empty context: prepend BOS");
    int idx[LM_BATCH], gb[LM_BATCH], nb = 0;
    double lb[LM_BATCH];
    for (int pass = 0; pass < 2; pass++) {
        for (int c = 0; c < r->n_cont; c++) {
            size_t nc = r->n_cont_tok[c];
            int shared = r->n_ctx + nc - 1 <= (size_t)lm->max_len;
            if (shared != (pass == 0))
                continue;
            double ll = 0;
            int gr = 1;
            if (!shared) {
                if ((rc = lm_score_truncated(lm, r, c, &ll, &gr, d)))
                    return rc;
            } else {
                if (!ctx_ready) {
                    lm->a.logits_tail = 1;   /* only the last context row is scored */
                    rc = model_forward(lm->m, &lm->a, r->ctx, NULL, 1, (int)r->n_ctx, 0, d);
                    lm->a.logits_tail = 0;
                    if (rc)
                        return rc;
                    memcpy(lm->ctx_logits, lm->a.logits, (size_t)V * sizeof *lm->ctx_logits);
                    ctx_ready = 1;
                }
                lm_sum(lm->ctx_logits, V, r->cont[c], 1, &ll, &gr);
                if (nc > 1 && nc - 1 <= LM_BATCH_T) {
                    /* the rest in a batch with its siblings (flushed below) */
                    idx[nb] = c;
                    lb[nb] = ll;
                    gb[nb++] = gr;
                    if (nb == LM_BATCH) {
                        if ((rc = lm_batch_flush(lm, r, res, idx, nb, lb, gb, d)))
                            return rc;
                        nb = 0;
                    }
                    continue;
                }
                if (nc > 1) {   /* too long for the batch arena: on its own */
                    double ll_rest = 0;
                    int gr_rest = 1;
                    rc = model_forward(lm->m, &lm->a, r->cont[c], NULL, 1, (int)nc - 1,
                                       (int)r->n_ctx, d);
                    if (rc)
                        return rc;
                    lm_sum(lm->a.logits, V, r->cont[c] + 1, nc - 1, &ll_rest, &gr_rest);
                    ll += ll_rest;
                    gr &= gr_rest;
                }
            }
            res->loglik[c] = ll;
            if (res->greedy)
                res->greedy[c] = gr;
        }
        /* the last partial batch, before a truncated continuation overwrites the context KV */
        if (pass == 0 && nb > 0 && (rc = lm_batch_flush(lm, r, res, idx, nb, lb, gb, d)))
            return rc;
        nb = 0;
    }
    return 0;
}

static int lm_score(void *self, const lm_request *req, lm_result *res, size_t n_req, qs_diag *d)
{
    for (size_t i = 0; i < n_req; i++) {
        int rc = lm_score_one(self, &req[i], &res[i], d);
        if (rc)
            return rc;
    }
    return 0;
}

lm_scorer model_lm_scorer(model_lm *lm)
{
    lm_scorer s = {lm, lm->m->cfg.vocab_size, lm->max_len, lm_score};
    return s;
}
