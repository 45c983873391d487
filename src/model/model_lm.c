/* model_lm.c: the lm.h scoring interface on a llama_model.
 *
 * One score call (eval's batch of requests) runs in two kinds of forwards:
 *  1. contexts: the requests, sorted by context length, in groups of up to
 *     LM_CTX_ROWS tokens (B sequences right-padded to the longest; the groups
 *     that feed the fewest padding rows, lm_batches); the lm_head
 *     runs only on each context's last row (logits_first / logits_rows), which
 *     scores the first token of every continuation;
 *  2. continuations: each continuation of >= 2 tokens that fits on its context
 *     (n_ctx + n_cont - 1 <= max_len) is a sequence of its n_cont - 1 leading
 *     tokens at positions n_ctx .. (seq_pos0), reading its context's keys and
 *     values from the context arena (kv_prefix: the continuation arena holds one
 *     layer of cache), up to LM_CONT_ROWS tokens per forward, split into
 *     forwards that feed the fewest padding rows (lm_batches); the lm_head
 *     runs on every sequence's own rows.
 * Contexts that start with the same tokens (few-shot MMLU: a subject's
 * description and dev examples, the same for every item) compute them once when
 * that feeds fewer rows (model_lm_prefix.h plans it): one forward of the
 * prefix, its keys and values kept aside (lm->pre_kv), then each context's own
 * tail at positions P.. reading them through kv_prefix, in forwards of similar
 * tails; the continuations then read the whole context from the context arena
 * as before.
 * A continuation that does not fit is scored alone, left-truncated as the
 * harness does: input = (ctx + cont)[-(max_len + 1):][:-1].  Padding (a
 * sequence repeats its last token) comes after the real rows, where causal
 * attention keeps it out of them.
 * Requests share forwards only when every row's result is independent of the
 * other rows of its forward: our GEMM kernels (matmul_rows_independent), the
 * attention and the element-wise layers (layers.h), and a quantization hook
 * that says so (model_linear_hook.rows_independent).  Otherwise each request
 * is a group of its own.  Either way a request's result never depends on the
 * other requests, and with row-independent layers it is the same bits however
 * it is batched (test_eval_model.c, test_model_lm.c).
 * Log-likelihoods: log-softmax in double per row (rows in parallel, each
 * summed in order), a continuation's sum = first token + (sum of the rest, in
 * order).
 * Memory: three arenas (contexts, continuations, truncated) sized by capacity
 * from the requests seen (a forward's shape is a view, model_acts_view), grown
 * only when a request needs more; never from the config's context, of which
 * max_len is only the cap.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"
#include "qs/vecops.h"
#include "model_lm_prefix.h"

enum {
    LM_CTX_ROWS = 512,   /* context tokens per batched forward (padding included) */
    LM_CONT_ROWS = 512,  /* continuation tokens fed per batched forward */
    LM_SEQS_MAX = 64,    /* sequences per batched forward */
    LM_FWD_ROWS = 16,    /* what one more forward costs, in rows (lm_batches) */
};
#define LM_LOGITS_BYTES ((size_t)128 << 20) /* logits of one continuation forward */
#define LM_PREFIX_KV_BYTES ((size_t)256 << 20) /* context cache when tails share a prefix */
#define LM_PREFIX_KV_MAX 4096                  /* ... and at most these positions */
#define LM_KV_BYTES ((size_t)64 << 20)      /* one-layer cache of one continuation forward */

typedef struct lm_key {
    size_t n_ctx;
    int req;
} lm_key;

typedef struct lm_cont_seq {
    int req, c;     /* request (index into the call) and continuation */
    int n;          /* tokens fed: n_cont - 1 */
    int p0;         /* n_ctx */
    int src;        /* sequence of its context in the context forward */
} lm_cont_seq;

struct model_lm {
    llama_model *m;
    int max_len;
    llama_acts ctx;     /* contexts: every layer's cache kept for the continuations */
    llama_acts cont;    /* continuations: one layer of cache, prefixes from ctx */
    llama_acts solo;    /* truncated continuations: one sequence, one layer of cache */
    int32_t *tok;       /* [tok_cap] tokens of one forward */
    size_t tok_cap;
    int *ibuf;          /* [4 * ibuf_cap]: positions, logits rows, first rows, source seqs */
    size_t ibuf_cap;
    int *best;          /* [rows_cap] argmax of each scored logits row */
    double *ls;         /* [rows_cap] log sum exp(row - row[best]) of each scored row */
    size_t rows_cap;
    lm_cont_seq *seqs;  /* [seq_cap] */
    size_t seq_cap;
    long *part;         /* [part_cap]: lm_batches' arrays for the continuations */
    size_t part_cap;
    long *cpart;        /* [cpart_cap]: the same for the contexts */
    size_t cpart_cap;
    long cont_rows;     /* rows fed through continuation forwards, padding included */
    lm_key *keys;       /* [keys_cap] requests of a call, in context order */
    int *order;         /* [keys_cap] */
    size_t keys_cap;
    lm_prefix_key *pkeys;     /* lm_prefix_plan's keys, groups and scratch */
    lm_prefix_group *groups;
    long *pscratch;
    size_t pkeys_cap, groups_cap, pscratch_cap;
    float *pre_kv;      /* [2, L, P, KVH*hd] a shared prefix's keys, then values */
    size_t pre_kv_cap;
    long arena_allocs;  /* arena (re)allocations so far */
    long ctx_rows;      /* rows fed through context and prefix forwards, padding included */
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
    *out = lm;
    return 0;
}

long model_lm_arena_allocs(const model_lm *lm) { return lm->arena_allocs; }

long model_lm_cont_rows(const model_lm *lm) { return lm->cont_rows; }

long model_lm_ctx_rows(const model_lm *lm) { return lm->ctx_rows; }

void model_lm_destroy(model_lm *lm)
{
    if (!lm)
        return;
    model_acts_free(&lm->ctx);
    model_acts_free(&lm->cont);
    model_acts_free(&lm->solo);
    qs_free(lm->tok);
    qs_free(lm->ibuf);
    qs_free(lm->best);
    qs_free(lm->ls);
    qs_free(lm->seqs);
    qs_free(lm->part);
    qs_free(lm->cpart);
    qs_free(lm->keys);
    qs_free(lm->order);
    qs_free(lm->pkeys);
    qs_free(lm->groups);
    qs_free(lm->pscratch);
    qs_free(lm->pre_kv);
    qs_free(lm);
}

/* Grows *p (elements of `elem` bytes, capacity *cap) to hold n. */
static int lm_grow(void **p, size_t *cap, size_t n, size_t elem, qs_diag *d)
{
    if (n <= *cap)
        return 0;
    size_t nc = n > 2 * *cap ? n : 2 * *cap;
    void *q = qs_malloc(nc * elem);
    if (!q)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    qs_free(*p);
    *p = q;
    *cap = nc;
    return 0;
}

static int lm_rows_grow(model_lm *lm, size_t rows, qs_diag *d)
{
    size_t bc = lm->rows_cap, lc = lm->rows_cap;
    int rc = lm_grow((void **)&lm->best, &bc, rows, sizeof *lm->best, d);
    if (!rc)
        rc = lm_grow((void **)&lm->ls, &lc, rows, sizeof *lm->ls, d);
    lm->rows_cap = bc < lc ? bc : lc;
    return rc;
}

/* What a forward asks of its arena: rows, cache positions, logits rows. */
typedef struct lm_caps {
    int rows, kv, logits;
} lm_caps;

/* The context forward of g sequences, rows tokens in all (every layer's cache kept). */
static lm_caps lm_ctx_caps(int rows, int g)
{
    int r = rows > LM_CTX_ROWS ? rows : LM_CTX_ROWS;
    return (lm_caps){r, r, LM_SEQS_MAX > g ? LM_SEQS_MAX : g};
}

/* The context arena's cache positions once contexts ran on a shared prefix:
 * each tail's sequence holds a copy of its prefix, so forwards of several
 * tails need room for several prefixes (on the 1B model: 1,638 positions, 2 or 3
 * tails of 5-shot MMLU per forward).  The arena is grown to it whenever a
 * prefix is shared, so that its size does not depend on the plan. */
static int lm_prefix_kv(const llama_config *c)
{
    size_t per_position = model_acts_kv_elems(c, 1, 0) * sizeof(float);
    size_t n = LM_PREFIX_KV_BYTES / (per_position ? per_position : 1);
    return n < LM_PREFIX_KV_MAX ? (int)n : LM_PREFIX_KV_MAX;
}

/* A continuation forward's budgets: cache positions (one layer), logits rows. */
static int lm_kv_budget(const llama_config *c)
{
    return (int)(LM_KV_BYTES / (2 * (size_t)c->n_kv_heads * c->head_dim * sizeof(float)));
}

static int lm_logit_budget(const llama_config *c)
{
    return (int)(LM_LOGITS_BYTES / ((size_t)c->vocab_size * sizeof(float)));
}

/* A continuation forward of rows tokens on kv cache positions, n_logits rows scored. */
static lm_caps lm_cont_caps(const llama_config *c, int rows, int kv, int n_logits)
{
    int kb = lm_kv_budget(c), lb = lm_logit_budget(c);
    return (lm_caps){rows > LM_CONT_ROWS ? rows : LM_CONT_ROWS, kv > kb ? kv : kb,
                     n_logits > lb ? n_logits : lb};
}

/* an arena holds at most one logits row per row: asking for more would
 * re-allocate (and re-zero) it on every call */
static lm_caps lm_caps_fit(lm_caps k)
{
    k.logits = k.logits < k.rows ? k.logits : k.rows;
    return k;
}

size_t model_lm_acts_elems(const llama_config *c, int longest, int longest_cont,
                           int longest_prefix)
{
    /* contexts: batched within LM_CTX_ROWS, alone beyond it (up to longest - 1
     * tokens); continuations: batched within LM_CONT_ROWS and the budgets, alone
     * beyond them (longest_cont - 1 rows on up to longest - 1 cache positions) */
    lm_caps x = lm_caps_fit(lm_ctx_caps(longest - 1, LM_SEQS_MAX));
    if (longest_prefix >= LM_PREFIX_MIN)   /* tails on shared prefixes */
        x.kv = lm_prefix_kv(c) > x.kv ? lm_prefix_kv(c) : x.kv;
    size_t n = model_acts_infer_elems(c, x.rows, x.kv, x.logits, 0);
    if (longest_prefix >= LM_PREFIX_MIN) {   /* a shared prefix's keys and values (pre_kv) */
        size_t p = model_acts_kv_elems(c, (size_t)longest_prefix, 0);
        n = n == SIZE_MAX || p > SIZE_MAX - n ? SIZE_MAX : n + p;
    }
    if (longest_cont < 2)   /* no continuation forward */
        return n;
    lm_caps k = lm_caps_fit(lm_cont_caps(c, longest_cont - 1, longest - 1, longest_cont - 1));
    size_t m = model_acts_infer_elems(c, k.rows, k.kv, k.logits, 1);
    return n == SIZE_MAX || m > SIZE_MAX - n ? SIZE_MAX : n + m;
}

int model_lm_shared_prefix(const lm_request *req, size_t n, size_t *out, qs_diag *d)
{
    *out = 0;
    if (n < 2)
        return 0;
    lm_prefix_key *keys = qs_malloc(n * sizeof *keys);
    if (!keys)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    *out = lm_prefix_longest(req, n, keys);
    qs_free(keys);
    return 0;
}

/* The arena a with capacities of at least k, then viewed as B x T on Tcap
 * cache positions. */
static int lm_arena(model_lm *lm, llama_acts *a, lm_caps k, int kv_shared, int B, int T, int Tcap,
                    qs_diag *d)
{
    const llama_config *c = &lm->m->cfg;
    k = lm_caps_fit(k);
    if (!a->memory || a->rows_cap < (size_t)k.rows || a->kv_cap < (size_t)k.kv ||
        a->logits_cap < k.logits) {
        int nr = a->rows_cap > (size_t)k.rows ? (int)a->rows_cap : k.rows;
        int nk = a->kv_cap > (size_t)k.kv ? (int)a->kv_cap : k.kv;
        int nl = a->logits_cap > k.logits ? a->logits_cap : k.logits;
        model_acts_free(a);
        int rc = model_acts_init_infer(a, c, nr, nk, nl < nr ? nl : nr, kv_shared, d);
        if (rc)
            return rc;
        lm->arena_allocs++;
    }
    a->logits_tail = 0;
    a->logits_rows = a->logits_first = a->seq_pos0 = NULL;
    a->kv_prefix = NULL;
    return model_acts_view(a, c, B, T, Tcap, d);
}

/* log p(tok | row) = row[tok] - row[best] - log(sum_v exp(row[v] - row[best])) in
 * double, the argmax `best` (lowest id on ties) and the log-sum ls computed once
 * per row by lm_rows_stats for all the tokens it scores. */
static double lm_logprob(const float *row, int best, double ls, int32_t tok, int *is_max)
{
    *is_max = best == tok;
    return (double)row[tok] - row[best] - ls;
}

/* lm->best[i], lm->ls[i] of logits rows i < n: rows in parallel (each row's sum
 * in order, so the same bits on any thread count). */
static void lm_rows_stats(model_lm *lm, const float *logits, int n)
{
    const int V = lm->m->cfg.vocab_size;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if ((size_t)n * V >= ((size_t)1 << 18))
#endif
    for (int i = 0; i < n; i++) {
        const float *row = logits + (size_t)i * V;
        int best = vecops_argmax_f32(row, V);
        double s = 0;
        for (int v = 0; v < V; v++)
            s += exp((double)row[v] - row[best]);
        lm->best[i] = best;
        lm->ls[i] = log(s);
    }
}

/* A continuation is scored on the shared context when context + continuation fits. */
static int lm_shared(const model_lm *lm, const lm_request *r, int c)
{
    return r->n_ctx + r->n_cont_tok[c] - 1 <= (size_t)lm->max_len;
}

static int lm_score_truncated(model_lm *lm, const lm_request *r, int c, lm_result *res,
                              qs_diag *d)
{
    size_t nc = r->n_cont_tok[c], total = r->n_ctx + nc, keep = (size_t)lm->max_len + 1;
    if (nc > (size_t)lm->max_len)
        return diag_set(d, QS_ERANGE, NULL, -1,
                        "continuation of %zu tokens exceeds the context of %d", nc, lm->max_len);
    size_t start = total > keep ? total - keep : 0, n = total - start;
    int T = (int)(n - 1);
    int rc = lm_arena(lm, &lm->solo, (lm_caps){T, T, (int)nc}, 1, 1, T, T, d);
    if (!rc)
        rc = lm_grow((void **)&lm->tok, &lm->tok_cap, n, sizeof *lm->tok, d);
    if (!rc)
        rc = lm_rows_grow(lm, nc, d);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        size_t j = start + i;
        lm->tok[i] = j < r->n_ctx ? r->ctx[j] : r->cont[c][j - r->n_ctx];
    }
    lm->solo.logits_tail = (int)nc;   /* lm_head only on the rows that predict cont */
    rc = model_forward(lm->m, &lm->solo, lm->tok, NULL, 1, T, 0, d);
    lm->solo.logits_tail = 0;
    if (rc)
        return rc;
    const int V = lm->m->cfg.vocab_size;
    lm_rows_stats(lm, lm->solo.logits, (int)nc);
    double ll = 0;
    int gr = 1;
    for (size_t i = 0; i < nc; i++) {
        int is_max;
        ll += lm_logprob(lm->solo.logits + i * V, lm->best[i], lm->ls[i], r->cont[c][i], &is_max);
        gr &= is_max;
    }
    res->loglik[c] = ll;
    if (res->greedy)
        res->greedy[c] = gr;
    return 0;
}

/* Contexts of requests grp[0..g) (each has a shared continuation) in one forward
 * of g sequences padded to the longest; scores every shared continuation's
 * first token into res.  P > 0: every context starts with the P tokens whose
 * keys and values pre holds (lm_prefix_forward); the forward feeds only the
 * tails, at positions P.., and the arena's caches hold the whole contexts. */
static int lm_contexts(model_lm *lm, const lm_request *req, lm_result *res, const int *grp, int g,
                       int P, const llama_acts *pre, qs_diag *d)
{
    int Tg = 0;
    for (int b = 0; b < g; b++)
        Tg = (int)req[grp[b]].n_ctx - P > Tg ? (int)req[grp[b]].n_ctx - P : Tg;
    int rows = g * Tg;
    /* at least the rows of the longest context computed whole: the arena's size
     * does not depend on which contexts shared a prefix (model_lm_acts_elems) */
    lm_caps k = lm_ctx_caps(rows > P + Tg ? rows : P + Tg, g);
    if (P) {
        const int kp = lm_prefix_kv(&lm->m->cfg);
        k.kv = g * (P + Tg) > k.kv ? g * (P + Tg) : k.kv;
        k.kv = kp > k.kv ? kp : k.kv;
    }
    int rc = lm_arena(lm, &lm->ctx, k, 0, g, Tg, P + Tg, d);
    if (!rc)
        rc = lm_grow((void **)&lm->tok, &lm->tok_cap, (size_t)rows, sizeof *lm->tok, d);
    if (!rc)
        rc = lm_grow((void **)&lm->ibuf, &lm->ibuf_cap, 4 * (size_t)g, sizeof *lm->ibuf, d);
    if (!rc)
        rc = lm_rows_grow(lm, (size_t)g, d);
    if (rc)
        return rc;
    int *first = lm->ibuf, *nrows = lm->ibuf + g, *p0 = lm->ibuf + 2 * (size_t)g,
        *src = lm->ibuf + 3 * (size_t)g;
    for (int b = 0; b < g; b++) {
        const lm_request *r = &req[grp[b]];
        int n = (int)r->n_ctx - P;
        for (int t = 0; t < Tg; t++)
            lm->tok[(size_t)b * Tg + t] = r->ctx[P + (t < n ? t : n - 1)];
        first[b] = n - 1;
        nrows[b] = 1;
        p0[b] = P;
        src[b] = 0;
    }
    model_kv_prefix kvp = {pre, src};
    lm->ctx.logits_first = first;
    lm->ctx.logits_rows = nrows;
    if (P) {
        lm->ctx.seq_pos0 = p0;
        lm->ctx.kv_prefix = &kvp;
    }
    lm->ctx_rows += (long)rows;
    rc = model_forward(lm->m, &lm->ctx, lm->tok, NULL, g, Tg, 0, d);
    lm->ctx.logits_first = lm->ctx.logits_rows = lm->ctx.seq_pos0 = NULL;
    lm->ctx.kv_prefix = NULL;
    if (rc)
        return rc;
    /* each shared continuation's first token, from its context's row */
    const int V = lm->m->cfg.vocab_size;
    lm_rows_stats(lm, lm->ctx.logits, g);
    for (int b = 0; b < g; b++) {
        const lm_request *r = &req[grp[b]];
        lm_result *o = &res[grp[b]];
        for (int c = 0; c < r->n_cont; c++) {
            if (!lm_shared(lm, r, c))
                continue;
            int is_max;
            double ll = 0;
            ll += lm_logprob(lm->ctx.logits + (size_t)b * V, lm->best[b], lm->ls[b], r->cont[c][0],
                             &is_max);
            o->loglik[c] = ll;
            if (o->greedy)
                o->greedy[c] = is_max;
        }
    }
    return 0;
}

static int lm_seq_cmp(const void *a, const void *b)
{
    const lm_cont_seq *x = a, *y = b;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return x->c < y->c ? -1 : x->c > y->c;
}

/* Sequences s[0..S) in one forward on the context arena's caches; adds the rest
 * of each continuation to res. */
static int lm_cont_forward(model_lm *lm, const lm_request *req, lm_result *res,
                           const lm_cont_seq *s, int S, int Tm, int Tcap, int n_logits,
                           qs_diag *d)
{
    const llama_config *c = &lm->m->cfg;
    int rows = S * Tm;
    int rc = lm_arena(lm, &lm->cont, lm_cont_caps(c, rows, S * Tcap, n_logits), 1, S, Tm, Tcap,
                      d);
    if (!rc)
        rc = lm_grow((void **)&lm->tok, &lm->tok_cap, (size_t)rows, sizeof *lm->tok, d);
    if (!rc)
        rc = lm_grow((void **)&lm->ibuf, &lm->ibuf_cap, 4 * (size_t)(S > n_logits ? S : n_logits),
                     sizeof *lm->ibuf, d);
    if (!rc)
        rc = lm_rows_grow(lm, (size_t)n_logits, d);
    if (rc)
        return rc;
    int *p0 = lm->ibuf, *nrows = lm->ibuf + S, *src = lm->ibuf + 2 * (size_t)S;
    for (int b = 0; b < S; b++) {
        const int32_t *ct = req[s[b].req].cont[s[b].c];
        for (int t = 0; t < Tm; t++)
            lm->tok[(size_t)b * Tm + t] = ct[t < s[b].n ? t : s[b].n - 1];
        p0[b] = s[b].p0;
        nrows[b] = s[b].n;
        src[b] = s[b].src;
    }
    model_kv_prefix pre = {&lm->ctx, src};
    lm->cont.seq_pos0 = p0;
    lm->cont.logits_rows = nrows;
    lm->cont.kv_prefix = &pre;
    lm->cont_rows += (long)rows;
    rc = model_forward(lm->m, &lm->cont, lm->tok, NULL, S, Tm, 0, d);
    lm->cont.seq_pos0 = lm->cont.logits_rows = NULL;
    lm->cont.kv_prefix = NULL;
    if (rc)
        return rc;
    /* row t of sequence b predicts token t + 1 of its continuation */
    const int V = c->vocab_size;
    lm_rows_stats(lm, lm->cont.logits, n_logits);
    for (int b = 0, k = 0; b < S; b++) {
        const int32_t *ct = req[s[b].req].cont[s[b].c];
        double rest = 0;
        int gr = 1;
        for (int t = 0; t < s[b].n; t++, k++) {
            int is_max;
            rest += lm_logprob(lm->cont.logits + (size_t)k * V, lm->best[k], lm->ls[k], ct[t + 1],
                               &is_max);
            gr &= is_max;
        }
        lm_result *o = &res[s[b].req];
        o->loglik[s[b].c] += rest;
        if (o->greedy)
            o->greedy[s[b].c] &= gr;
    }
    return 0;
}

/* Batches of n sorted sequences (len[] ascending; p0[] their start positions,
 * or NULL for 0) with the fewest rows fed, padding included, plus LM_FWD_ROWS
 * per forward: a forward of S sequences feeds S x (its longest) rows, and
 * filling each forward up to its row budget as they come fed ARC-Easy's
 * continuations (1 to ~15 tokens) with ~55% padding.  Exact over every split
 * of the sorted order (each batch a run of it within the budgets: rows,
 * LM_SEQS_MAX sequences, S x (p0 + longest) cache rows, logits rows (the sum
 * of len), p0 + longest <= max_len; one sequence always fits): cut[j] = start
 * of the last batch of the first j; on return cost[] holds the batch ends in
 * order, then 0 (cost and cut: n + 1 elements each).  Which rows share a
 * forward never changes a result (row-independent layers: lm_batch_ok). */
typedef struct lm_budget {
    long rows, kv, logits, max_len;
} lm_budget;

static void lm_batches(long *cost, long *cut, const long *len, const long *p0, size_t n,
                       lm_budget b)
{
    cost[0] = 0;
    for (size_t j = 1; j <= n; j++) {
        const long tm = len[j - 1];   /* the batch's longest: sorted */
        long p0_max = 0, n_logits = 0;
        cost[j] = -1;
        for (size_t i = j; i-- > 0 && j - i <= LM_SEQS_MAX;) {
            const long S = (long)(j - i);
            p0_max = p0 && p0[i] > p0_max ? p0[i] : p0_max;
            n_logits += len[i];
            if (S > 1 && (S * tm > b.rows || S * (p0_max + tm) > b.kv || n_logits > b.logits ||
                          p0_max + tm > b.max_len))
                break;   /* every budget only grows with more sequences */
            long c = cost[i] + LM_FWD_ROWS + S * tm;
            if (cost[j] < 0 || c < cost[j]) {
                cost[j] = c;
                cut[j] = (long)i;
            }
        }
    }
    /* the batch ends in order, in cost[0..): cost[] is not needed any more */
    size_t nb = 0;
    for (long j = (long)n; j > 0; j = cut[j])
        nb++;
    cost[nb] = 0;   /* end marker */
    for (long j = (long)n, k = (long)nb; j > 0; j = cut[j])
        cost[--k] = j;
}

/* Every shared continuation of >= 2 tokens of the group, batched (see top). */
static int lm_continuations(model_lm *lm, const lm_request *req, lm_result *res, const int *grp,
                            int g, qs_diag *d)
{
    const llama_config *c = &lm->m->cfg;
    size_t n_seq = 0;
    for (int b = 0; b < g; b++)
        for (int k = 0; k < req[grp[b]].n_cont; k++)
            n_seq += req[grp[b]].n_cont_tok[k] >= 2 && lm_shared(lm, &req[grp[b]], k);
    if (!n_seq)
        return 0;
    int rc = lm_grow((void **)&lm->seqs, &lm->seq_cap, n_seq, sizeof *lm->seqs, d);
    if (rc)
        return rc;
    size_t ns = 0;
    for (int b = 0; b < g; b++) {
        const lm_request *r = &req[grp[b]];
        for (int k = 0; k < r->n_cont; k++)
            if (r->n_cont_tok[k] >= 2 && lm_shared(lm, r, k))
                lm->seqs[ns++] = (lm_cont_seq){grp[b], k, (int)r->n_cont_tok[k] - 1,
                                               (int)r->n_ctx, b};
    }
    qsort(lm->seqs, ns, sizeof *lm->seqs, lm_seq_cmp);   /* similar lengths share a forward */
    long kv_budget = lm_kv_budget(c), logit_budget = lm_logit_budget(c);
    if ((rc = lm_grow((void **)&lm->part, &lm->part_cap, 4 * (ns + 1), sizeof *lm->part, d)))
        return rc;
    long *ends = lm->part, *cut = ends + ns + 1, *len = cut + ns + 1, *p0 = len + ns + 1;
    for (size_t k = 0; k < ns; k++) {
        len[k] = lm->seqs[k].n;
        p0[k] = lm->seqs[k].p0;
    }
    lm_batches(ends, cut, len, p0, ns,
               (lm_budget){LM_CONT_ROWS, kv_budget, logit_budget, lm->max_len});
    for (size_t b = 0, i = 0; ends[b] > 0; b++) {
        size_t j = (size_t)ends[b];
        /* padding rows sit at positions up to max p0 + Tm - 1: within max_len */
        int S = (int)(j - i), Tm = lm->seqs[j - 1].n, p0_max = 0, n_logits = 0;
        for (size_t k = i; k < j; k++) {
            p0_max = lm->seqs[k].p0 > p0_max ? lm->seqs[k].p0 : p0_max;
            n_logits += lm->seqs[k].n;
        }
        if ((rc = lm_cont_forward(lm, req, res, lm->seqs + i, S, Tm, p0_max + Tm, n_logits, d)))
            return rc;
        i = j;
    }
    return 0;
}

/* requests by context length, then index */
static int lm_key_cmp(const void *a, const void *b)
{
    const lm_key *x = a, *y = b;
    if (x->n_ctx != y->n_ctx)
        return x->n_ctx < y->n_ctx ? -1 : 1;
    return x->req < y->req ? -1 : x->req > y->req;
}

static int lm_batch_ok(const model_lm *lm)
{
    const llama_model *m = lm->m;
    return matmul_rows_independent(m->precision) && (!m->hook.fn || m->hook.rows_independent);
}

/* The first P tokens of ctx in one forward (no lm_head), their keys and values
 * copied to lm->pre_kv, which *pre then views as a one-sequence cache. */
static int lm_prefix_forward(model_lm *lm, const int32_t *ctx, int P, llama_acts *pre, qs_diag *d)
{
    const llama_config *c = &lm->m->cfg;
    lm_caps k = lm_ctx_caps(P, 1);   /* the tails' forwards will ask for lm_prefix_kv */
    k.kv = lm_prefix_kv(c) > k.kv ? lm_prefix_kv(c) : k.kv;
    int rc = lm_arena(lm, &lm->ctx, k, 0, 1, P, P, d);
    if (rc)
        return rc;
    const size_t half = model_acts_kv_elems(c, (size_t)P, 0) / 2;   /* [L, P, KVH*hd] */
    if (2 * half > lm->pre_kv_cap) {   /* exactly what it holds: model_lm_acts_elems */
        qs_free(lm->pre_kv);
        lm->pre_kv_cap = 0;
        if (!(lm->pre_kv = qs_malloc(2 * half * sizeof *lm->pre_kv)))
            return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        lm->pre_kv_cap = 2 * half;
    }
    const int none = 0;
    lm->ctx.logits_rows = &none;
    lm->ctx_rows += P;
    rc = model_forward(lm->m, &lm->ctx, ctx, NULL, 1, P, 0, d);
    lm->ctx.logits_rows = NULL;
    if (rc)
        return rc;
    /* one sequence of P positions: each layer's cache is contiguous, layer after layer */
    memcpy(lm->pre_kv, lm->ctx.kcache, half * sizeof *lm->pre_kv);
    memcpy(lm->pre_kv + half, lm->ctx.vcache, half * sizeof *lm->pre_kv);
    memset(pre, 0, sizeof *pre);
    pre->B = 1;
    pre->T = pre->Tcap = P;
    pre->kcache = lm->pre_kv;
    pre->vcache = lm->pre_kv + half;
    return 0;
}

/* The g requests mem[0..g) whose contexts share their first P tokens: the
 * prefix once, then the tails in forwards of similar lengths (lm_batches, within
 * the context arena's rows and cache positions: lm_prefix_kv, or the longest
 * context), each followed by its continuations.  Reorders mem by tail length. */
static int lm_prefix_run(model_lm *lm, const lm_request *req, lm_result *res, int *mem, int g,
                         int P, qs_diag *d)
{
    llama_acts pre;
    int rc = lm_prefix_forward(lm, req[mem[0]].ctx, P, &pre, d);
    if (rc)
        return rc;
    long longest = 0;
    for (int b = 0; b < g; b++) {
        lm->keys[b] = (lm_key){req[mem[b]].n_ctx, mem[b]};
        longest = (long)req[mem[b]].n_ctx > longest ? (long)req[mem[b]].n_ctx : longest;
    }
    qsort(lm->keys, (size_t)g, sizeof *lm->keys, lm_key_cmp);
    const size_t n = (size_t)g;
    if ((rc = lm_grow((void **)&lm->cpart, &lm->cpart_cap, 4 * (n + 1), sizeof *lm->cpart, d)))
        return rc;
    long *ends = lm->cpart, *cut = ends + n + 1, *len = cut + n + 1, *p0 = len + n + 1;
    for (size_t k = 0; k < n; k++) {
        mem[k] = lm->keys[k].req;
        len[k] = (long)lm->keys[k].n_ctx - P;
        p0[k] = P;
    }
    long kv = longest > LM_CTX_ROWS ? longest : LM_CTX_ROWS;
    kv = lm_prefix_kv(&lm->m->cfg) > kv ? lm_prefix_kv(&lm->m->cfg) : kv;
    lm_batches(ends, cut, len, p0, n, (lm_budget){LM_CTX_ROWS, kv, LONG_MAX, LONG_MAX});
    for (int b = 0, i = 0; ends[b] > 0; b++) {
        int s = (int)ends[b] - i;
        if ((rc = lm_contexts(lm, req, res, mem + i, s, P, &pre, d)) ||
            (rc = lm_continuations(lm, req, res, mem + i, s, d)))
            return rc;
        i += s;
    }
    return 0;
}

static int lm_score(void *self, const lm_request *req, lm_result *res, size_t n_req, qs_diag *d)
{
    model_lm *lm = self;
    for (size_t i = 0; i < n_req; i++) {
        for (int c = 0; c < req[i].n_cont; c++)
            if (req[i].n_cont_tok[c] < 1)
                return diag_set(d, QS_EINVAL, NULL, -1, "continuation %d is empty", c);
        if (req[i].n_ctx < 1)
            return diag_set(d, QS_EINVAL, NULL, -1, "empty context: prepend BOS");
    }
    size_t kc = lm->keys_cap, oc = lm->keys_cap;
    int rc = lm_grow((void **)&lm->keys, &kc, n_req ? n_req : 1, sizeof *lm->keys, d);
    if (!rc)
        rc = lm_grow((void **)&lm->order, &oc, n_req ? n_req : 1, sizeof *lm->order, d);
    lm->keys_cap = kc < oc ? kc : oc;
    if (rc)
        return rc;
    int n_sh = 0;
    for (size_t i = 0; i < n_req; i++) {
        int any = 0;
        for (int c = 0; c < req[i].n_cont; c++)
            any |= lm_shared(lm, &req[i], c);
        if (any)
            lm->keys[n_sh++] = (lm_key){req[i].n_ctx, (int)i};
    }
    const int batch = lm_batch_ok(lm);
    /* contexts that share a prefix compute it once (model_lm_prefix.h), group by group */
    int n_groups = 0;
    if (batch && n_sh >= 2) {
        const size_t n = (size_t)n_sh;
        if ((rc = lm_grow((void **)&lm->pkeys, &lm->pkeys_cap, n, sizeof *lm->pkeys, d)) ||
            (rc = lm_grow((void **)&lm->groups, &lm->groups_cap, n, sizeof *lm->groups, d)) ||
            (rc = lm_grow((void **)&lm->pscratch, &lm->pscratch_cap, 4 * (n + 1),
                          sizeof *lm->pscratch, d)))
            return rc;
        for (int i = 0; i < n_sh; i++)
            lm->order[i] = lm->keys[i].req;
        lm_prefix_plan(req, lm->order, n_sh, lm->groups, &n_groups, lm->pscratch, lm->pkeys);
        for (int k = 0; k < n_groups; k++) {
            const lm_prefix_group *G = &lm->groups[k];
            if ((rc = lm_prefix_run(lm, req, res, lm->order + G->first, G->n, G->P, d)))
                return rc;
        }
        /* the others, computed whole below */
        int m = 0;
        for (int i = 0, k = 0; i < n_sh; i++) {
            if (k < n_groups && i == lm->groups[k].first) {
                i += lm->groups[k++].n - 1;
                continue;
            }
            lm->keys[m++] = (lm_key){req[lm->order[i]].n_ctx, lm->order[i]};
        }
        n_sh = m;
    }
    if (batch)   /* similar lengths share a forward: little padding */
        qsort(lm->keys, (size_t)n_sh, sizeof *lm->keys, lm_key_cmp);
    for (int i = 0; i < n_sh; i++)
        lm->order[i] = lm->keys[i].req;
    /* contexts in forwards of similar lengths (lm_batches), or one by one */
    size_t n = (size_t)n_sh;
    if ((rc = lm_grow((void **)&lm->cpart, &lm->cpart_cap, 3 * (n + 1), sizeof *lm->cpart, d)))
        return rc;
    long *ends = lm->cpart, *cut = ends + n + 1, *len = cut + n + 1;
    for (size_t k = 0; k < n; k++) {
        len[k] = (long)req[lm->order[k]].n_ctx;
        ends[k] = (long)k + 1;   /* one by one, unless batched below */
    }
    ends[n] = 0;
    if (batch)
        lm_batches(ends, cut, len, NULL, n, (lm_budget){LM_CTX_ROWS, LONG_MAX, LONG_MAX, LONG_MAX});
    for (int b = 0, i = 0; ends[b] > 0; b++) {
        int g = (int)ends[b] - i;
        if ((rc = lm_contexts(lm, req, res, lm->order + i, g, 0, NULL, d)) ||
            (rc = lm_continuations(lm, req, res, lm->order + i, g, d)))
            return rc;
        i += g;
    }
    /* continuations too long for their context, each on its own */
    for (size_t i = 0; i < n_req; i++)
        for (int c = 0; c < req[i].n_cont; c++)
            if (!lm_shared(lm, &req[i], c) && (rc = lm_score_truncated(lm, &req[i], c, &res[i], d)))
                return rc;
    return 0;
}

lm_scorer model_lm_scorer(model_lm *lm)
{
    lm_scorer s = {lm, lm->m->cfg.vocab_size, lm->max_len, lm_score};
    return s;
}
