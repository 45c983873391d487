/* eval_fake.h: a toy tokenizer and a toy LM for evaluator tests (header-only,
 * static functions; included by test files).
 *
 * Tokenizer: one token per byte (ids 0..255), except a space followed by a
 * non-space byte x, which is one token 256 + x (like "Ġx"), and "::", which
 * is one token FAKE_COLON2 (so a context ending in ':' can merge with the
 * continuation).  BOS = FAKE_BOS, added by default.
 * LM: a fixed bigram table, log p(next | prev) = logit(prev, next) -
 * logsumexp_v logit(prev, v), summed over the continuation tokens.
 */
#ifndef QS_EVAL_FAKE_H
#define QS_EVAL_FAKE_H

#include <math.h>
#include <string.h>

#include "qs/eval.h"
#include "qs/mem.h"

#define FAKE_COLON2 512
#define FAKE_BOS 513
#define FAKE_VOCAB 514

static int fake_encode(void *self, const char *text, size_t len, int add_bos, int32_t **ids,
                       size_t *n_ids, qs_diag *d)
{
    (void)self;
    int32_t *o = qs_malloc((len + 2) * sizeof *o);
    if (!o)
        return diag_set(d, QS_ENOMEM, NULL, -1, "fake_encode: out of memory");
    size_t n = 0;
    if (add_bos != 0)   /* default and yes */
        o[n++] = FAKE_BOS;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        if (s[i] == ' ' && i + 1 < len && s[i + 1] != ' ') {
            o[n++] = 256 + s[i + 1];
            i += 2;
        } else if (s[i] == ':' && i + 1 < len && s[i + 1] == ':') {
            o[n++] = FAKE_COLON2;
            i += 2;
        } else
            o[n++] = s[i++];
    }
    *ids = o;
    *n_ids = n;
    return 0;
}

static double fake_logit(int32_t prev, int32_t next)
{
    return (double)((prev * 31 + next * 17 + (prev ^ next) * 7) % 101) / 13.0;
}

static double fake_logp(int32_t prev, int32_t next)
{
    double m = -1e300, s = 0;
    for (int v = 0; v < FAKE_VOCAB; v++)
        m = fmax(m, fake_logit(prev, v));
    for (int v = 0; v < FAKE_VOCAB; v++)
        s += exp(fake_logit(prev, v) - m);
    return fake_logit(prev, next) - m - log(s);
}

static int fake_argmax(int32_t prev)
{
    int best = 0;
    for (int v = 1; v < FAKE_VOCAB; v++)
        if (fake_logit(prev, v) > fake_logit(prev, best))
            best = v;
    return best;
}

/* log-likelihood of toks[0..n) after `prev` */
static double fake_seq_logp(int32_t prev, const int32_t *toks, size_t n, int *greedy)
{
    double ll = 0;
    int g = 1;
    for (size_t i = 0; i < n; i++) {
        ll += fake_logp(prev, toks[i]);
        g &= fake_argmax(prev) == toks[i];
        prev = toks[i];
    }
    if (greedy)
        *greedy = g;
    return ll;
}

typedef struct fake_lm {
    long calls, requests;
} fake_lm;

static int fake_score(void *self, const lm_request *req, lm_result *res, size_t n_req, qs_diag *d)
{
    (void)d;
    fake_lm *f = self;
    f->calls++;
    for (size_t r = 0; r < n_req; r++) {
        f->requests++;
        int32_t last = req[r].n_ctx ? req[r].ctx[req[r].n_ctx - 1] : FAKE_BOS;
        for (int c = 0; c < req[r].n_cont; c++) {
            int g;
            res[r].loglik[c] = fake_seq_logp(last, req[r].cont[c], req[r].n_cont_tok[c], &g);
            if (res[r].greedy)
                res[r].greedy[c] = g;
        }
    }
    return 0;
}

static lm_scorer fake_scorer(fake_lm *f)
{
    lm_scorer s = {f, FAKE_VOCAB, 4096, fake_score};
    return s;
}

static eval_encoder fake_encoder(void)
{
    eval_encoder e = {NULL, fake_encode, FAKE_BOS};
    return e;
}

#endif
