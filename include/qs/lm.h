/* lm.h: the scoring interface between the evaluator and a language model.
 *
 * The evaluator knows no model internals: it asks an lm_scorer for the
 * log-likelihood of several continuations that share one context.  A model
 * implementation computes the context once (keeping its KV cache) and scores
 * every continuation on top of it.  Results must not depend on how requests
 * are batched or on the thread count.
 */
#ifndef QS_LM_H
#define QS_LM_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"

/* One context with n_cont continuations (token ids; the context already holds
 * BOS when one is wanted).  Sequences longer than the model's context are
 * left-truncated as the harness does: (ctx + cont)[-(max_len+1):][:-1]. */
typedef struct lm_request {
    const int32_t *ctx;
    size_t n_ctx;
    int n_cont;
    const int32_t *const *cont;   /* [n_cont] token arrays */
    const size_t *n_cont_tok;     /* [n_cont] lengths (>= 1) */
} lm_request;

typedef struct lm_result {
    double *loglik;   /* [n_cont] sum of natural-log probs of the continuation tokens */
    int *greedy;      /* [n_cont] 1 if every continuation token is the argmax (may be NULL) */
} lm_result;

typedef struct lm_scorer {
    void *self;
    int n_vocab;
    int max_len;      /* context length of the model */
    /* Score n_req requests (may be processed in any order / in parallel). */
    int (*score)(void *self, const lm_request *req, lm_result *res, size_t n_req, qs_diag *d);
} lm_scorer;

#endif
