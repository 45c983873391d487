/* test_model_lm.c: the lm_scorer of a model: log-likelihoods against the torch
 * reference logits, independence from batching, order and thread count, and
 * harness-style left truncation. */
#include <cblas.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "qs/cpu.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"
#include "qs/safetensors.h"
#include "test.h"

#define LM_FIXTURE "data/fixtures/llama_gqa_f32"

typedef struct lm_case {
    int32_t tok[24];
    int T, V;
    float *ref_logits;   /* [T, V] of sequence 0 */
} lm_case;

static int lm_case_load(lm_case *c)
{
    safetensors_file f;
    qs_diag d = {0};
    if (safetensors_open(&f, LM_FIXTURE "/ref.safetensors", &d))
        return -1;
    const safetensors_tensor *tk = safetensors_find(&f, "tokens"), *lg = safetensors_find(&f, "logits");
    int rc = -1;
    if (tk && lg && tk->shape[1] <= 24) {
        c->T = (int)tk->shape[1];
        c->V = (int)lg->shape[2];
        int32_t all[64];
        float *lgs = qs_malloc(lg->n_elems * 4);
        if (tk->n_elems <= 64 && lgs && !safetensors_tensor_to_i32(tk, all, "", &d) &&
            !safetensors_tensor_to_f32(lg, lgs, "", &d)) {
            memcpy(c->tok, all, (size_t)c->T * 4);
            c->ref_logits = lgs;
            rc = 0;
        } else {
            qs_free(lgs);
        }
    }
    safetensors_close(&f);
    return rc;
}

static double ref_logprob(const lm_case *c, int row, int tok)
{
    const float *l = c->ref_logits + (size_t)row * c->V;
    double mx = l[0], s = 0;
    for (int v = 1; v < c->V; v++)
        mx = l[v] > mx ? l[v] : mx;
    for (int v = 0; v < c->V; v++)
        s += exp(l[v] - mx);
    return l[tok] - mx - log(s);
}

/* three requests over the fixture tokens: contexts of 4, 6, 2 tokens */
static void make_requests(const lm_case *c, lm_request req[3], const int32_t *conts[3][2],
                          size_t lens[3][2])
{
    static const int ctx_len[3] = {4, 6, 2};
    for (int i = 0; i < 3; i++) {
        int k = ctx_len[i];
        conts[i][0] = c->tok + k;   /* the true continuation */
        lens[i][0] = (size_t)(c->T - k);
        conts[i][1] = c->tok + 1;   /* another one */
        lens[i][1] = 3;
        req[i] = (lm_request){c->tok, (size_t)k, 2, conts[i], lens[i]};
    }
}

static int score_all(model_lm *lm, const lm_request *req, int n, double out[3][2], qs_diag *d)
{
    lm_scorer s = model_lm_scorer(lm);
    lm_result res[3];
    for (int i = 0; i < n; i++)
        res[i] = (lm_result){out[i], NULL};
    return s.score(s.self, req, res, (size_t)n, d);
}

/* The fixture model, a scorer with a max_len-token context and make_requests'
 * three requests. */
typedef struct lm_fix {
    llama_model m;
    model_lm *lm;
    lm_case c;
    lm_request req[3];
    const int32_t *conts[3][2];
    size_t lens[3][2];
} lm_fix;

static int lm_fix_open(lm_fix *f, int max_len, qs_diag *d)
{
    memset(f, 0, sizeof *f);
    int rc = lm_case_load(&f->c) ? QS_EIO : 0;
    if (rc)
        return diag_set(d, rc, LM_FIXTURE, -1, "fixture missing");
    if ((rc = model_load_dir(&f->m, LM_FIXTURE, d)))
        return rc;
    if ((rc = model_lm_create(&f->lm, &f->m, max_len, d))) {
        model_free(&f->m);
        return rc;
    }
    make_requests(&f->c, f->req, f->conts, f->lens);
    return 0;
}

static void lm_fix_close(lm_fix *f)
{
    model_lm_destroy(f->lm);
    model_free(&f->m);
    qs_free(f->c.ref_logits);
}

TEST(lm, loglik_matches_torch_reference)
{
    lm_fix f;
    qs_diag d = {0};
    ASSERT_OK(lm_fix_open(&f, 32, &d), &d);
    lm_scorer s = model_lm_scorer(f.lm);
    double ll[2];
    int gr[2];
    lm_result res = {ll, gr};
    ASSERT_OK(s.score(s.self, &f.req[0], &res, 1, &d), &d);
    double want = 0;
    for (int t = 4; t < f.c.T; t++)
        want += ref_logprob(&f.c, t - 1, f.c.tok[t]);
    ASSERT_NEAR(ll[0], want, 1e-3);
    ASSERT_TRUE(ll[0] < 0 && ll[1] < 0);
    lm_fix_close(&f);
}

TEST(lm, results_independent_of_batching_order_and_threads)
{
    lm_fix f;
    qs_diag d = {0};
    ASSERT_OK(lm_fix_open(&f, 32, &d), &d);
    lm_request rev[3];
    double batch[3][2], single[3][2], reversed[3][2], one_thread[3][2];
    ASSERT_OK(score_all(f.lm, f.req, 3, batch, &d), &d);
    for (int i = 0; i < 3; i++)
        ASSERT_OK(score_all(f.lm, &f.req[i], 1, &single[i], &d), &d);
    for (int i = 0; i < 3; i++)
        rev[i] = f.req[2 - i];
    ASSERT_OK(score_all(f.lm, rev, 3, reversed, &d), &d);
#ifdef _OPENMP
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    int bt = openblas_get_num_threads();
    openblas_set_num_threads(1);
    ASSERT_OK(score_all(f.lm, f.req, 3, one_thread, &d), &d);
    openblas_set_num_threads(bt);
#ifdef _OPENMP
    omp_set_num_threads(nt);
#endif
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) {
            ASSERT_TRUE(batch[i][k] == single[i][k]);
            ASSERT_TRUE(batch[i][k] == reversed[2 - i][k]);
            ASSERT_TRUE(batch[i][k] == one_thread[i][k]);
        }
    lm_fix_close(&f);
}

TEST(lm, repeated_calls_reuse_the_arenas)
{
    lm_fix f;
    qs_diag d = {0};
    ASSERT_OK(lm_fix_open(&f, 32, &d), &d);
    double first[3][2], again[3][2];
    ASSERT_OK(score_all(f.lm, f.req, 3, first, &d), &d);
    long n = model_lm_arena_allocs(f.lm);
    ASSERT_TRUE(n >= 1);
    for (int rep = 0; rep < 3; rep++)
        ASSERT_OK(score_all(f.lm, f.req, 3, again, &d), &d);
    /* the same requests fit the arenas made by the first call: no re-allocation
     * (a re-allocation zeroes the whole arena: it made in-loop evals 30x slower) */
    ASSERT_EQ_INT((int)model_lm_arena_allocs(f.lm), (int)n);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++)
            ASSERT_TRUE(first[i][k] == again[i][k]);
    lm_fix_close(&f);
}

/* Six 2-token continuations and one of 9 on one context: one forward would feed
 * 7 x 8 rows (each sequence padded to the longest), two forwards 6 x 1 + 8; the
 * scorer picks the split with the fewest rows (plus a fixed cost per forward),
 * and each continuation keeps the bits it has scored alone. */
TEST(lm, continuations_are_split_into_forwards_with_little_padding)
{
    lm_fix f;
    qs_diag d = {0};
    ASSERT_OK(lm_fix_open(&f, 32, &d), &d);
    enum { NC = 7 };
    const int32_t *conts[NC];
    size_t lens[NC];
    for (int c = 0; c < NC; c++) {
        conts[c] = f.c.tok + 4 + (c == NC - 1 ? 0 : c);
        lens[c] = c == NC - 1 ? 9 : 2;
    }
    lm_request all = {f.c.tok, 4, NC, conts, lens};
    double ll[NC], alone[NC];
    lm_result res = {ll, NULL};
    lm_scorer s = model_lm_scorer(f.lm);
    long before = model_lm_cont_rows(f.lm);
    ASSERT_OK(s.score(s.self, &all, &res, 1, &d), &d);
    ASSERT_EQ_INT((int)(model_lm_cont_rows(f.lm) - before), 6 * 1 + 8);
    for (int c = 0; c < NC; c++) {
        lm_request one = {f.c.tok, 4, 1, &conts[c], &lens[c]};
        lm_result r1 = {&alone[c], NULL};
        ASSERT_OK(s.score(s.self, &one, &r1, 1, &d), &d);
        ASSERT_TRUE(ll[c] == alone[c]);
    }
    lm_fix_close(&f);
}

TEST(lm, long_request_is_left_truncated_like_the_harness)
{
    lm_fix f;
    llama_acts a;
    qs_diag d = {0};
    const int max_len = 6;
    ASSERT_OK(lm_fix_open(&f, max_len, &d), &d);
    const lm_case c = f.c;
    /* ctx = tok[0..9), cont = tok[9..12): input = (ctx+cont)[-7:][:-1] = tok[5..11) */
    const int32_t *cont[1] = {c.tok + 9};
    size_t nc[1] = {3};
    lm_request r = {c.tok, 9, 1, cont, nc};
    double ll;
    lm_result res = {&ll, NULL};
    lm_scorer s = model_lm_scorer(f.lm);
    ASSERT_OK(s.score(s.self, &r, &res, 1, &d), &d);
    ASSERT_OK(model_acts_init(&a, &f.m.cfg, 1, max_len, max_len, 0, &d), &d);
    ASSERT_OK(model_forward(&f.m, &a, c.tok + 5, NULL, 1, 6, 0, &d), &d);
    double want = 0;
    for (int i = 0; i < 3; i++) {   /* rows of tok 8, 9, 10 predict tok 9, 10, 11 */
        const float *l = a.logits + (size_t)(3 + i) * c.V;
        double mx = l[0], sum = 0;
        for (int v = 1; v < c.V; v++)
            mx = l[v] > mx ? l[v] : mx;
        for (int v = 0; v < c.V; v++)
            sum += exp(l[v] - mx);
        want += l[c.tok[9 + i]] - mx - log(sum);
    }
    ASSERT_NEAR(ll, want, 1e-9);
    /* an empty context is refused, not scored from nothing */
    r.n_ctx = 0;
    ASSERT_EQ_INT(s.score(s.self, &r, &res, 1, &d), QS_EINVAL);
    model_acts_free(&a);
    lm_fix_close(&f);
}

TEST(lm, a_long_sibling_does_not_change_a_short_continuation)
{
    lm_fix f;
    qs_diag d = {0};
    ASSERT_OK(lm_fix_open(&f, 8, &d), &d);
    const lm_case c = f.c;
    lm_scorer s = model_lm_scorer(f.lm);
    /* ctx 5 tokens; cont A = 2 tokens (fits: shared), cont B = 6 tokens (truncated) */
    const int32_t *conts[2] = {c.tok + 5, c.tok + 5};
    size_t lens[2] = {2, 6};
    lm_request both = {c.tok, 5, 2, conts, lens}, alone = {c.tok, 5, 1, conts, lens};
    double ll2[2], ll1[1];
    lm_result r2 = {ll2, NULL}, r1 = {ll1, NULL};
    ASSERT_OK(s.score(s.self, &both, &r2, 1, &d), &d);
    ASSERT_OK(s.score(s.self, &alone, &r1, 1, &d), &d);
    ASSERT_TRUE(ll2[0] == ll1[0]);
    ASSERT_TRUE(ll2[1] < ll2[0]);
    lm_fix_close(&f);
}

/* The fixture model, acts for 2 sequences (the case's tokens and their
 * reverse) and the logits of their full forward: the reference of the
 * partial-head tests below. */
typedef struct rows_case {
    llama_model m;
    llama_acts a;
    lm_case c;
    int32_t tok[48];
    float *full;   /* [2 * T, V] */
} rows_case;

static int rows_case_open(rows_case *rc)
{
    qs_diag d = {0};
    memset(rc, 0, sizeof *rc);
    if (lm_case_load(&rc->c) || 2 * rc->c.T > 48 || model_load_dir(&rc->m, LM_FIXTURE, &d))
        return -1;
    if (model_acts_init(&rc->a, &rc->m.cfg, 2, rc->c.T, rc->c.T, 0, &d))
        return -1;
    for (int t = 0; t < rc->c.T; t++) {
        rc->tok[t] = rc->c.tok[t];
        rc->tok[rc->c.T + t] = rc->c.tok[rc->c.T - 1 - t];
    }
    size_t n = 2 * (size_t)rc->c.T * (size_t)rc->c.V;
    rc->full = qs_malloc(n * sizeof *rc->full);
    if (!rc->full || model_forward(&rc->m, &rc->a, rc->tok, NULL, 2, rc->c.T, 0, &d))
        return -1;
    memcpy(rc->full, rc->a.logits, n * sizeof *rc->full);
    return 0;
}

static void rows_case_close(rows_case *rc)
{
    model_acts_free(&rc->a);
    model_free(&rc->m);
    qs_free(rc->full);
    qs_free(rc->c.ref_logits);
}

/* acts.logits_tail = k: lm_head only on the last k rows of every sequence,
 * equal to those rows of a full forward; targets are refused. */
TEST(lm, logits_tail_rows_equal_the_full_forward_rows)
{
    rows_case rc;
    qs_diag d = {0};
    ASSERT_EQ_INT(rows_case_open(&rc), 0);
    const size_t V = (size_t)rc.c.V, T = (size_t)rc.c.T, k = 3;
    rc.a.logits_tail = (int)k;
    ASSERT_OK(model_forward(&rc.m, &rc.a, rc.tok, NULL, 2, rc.c.T, 0, &d), &d);
    double worst = 0;
    for (size_t b = 0; b < 2; b++)
        for (size_t r = 0; r < k; r++)
            for (size_t v = 0; v < V; v++) {
                float want = rc.full[(b * T + T - k + r) * V + v];
                double diff = fabs((double)rc.a.logits[(b * k + r) * V + v] - want);
                worst = diff > worst ? diff : worst;
            }
    ASSERT_TRUE(worst <= 1e-5);
    ASSERT_TRUE(model_forward(&rc.m, &rc.a, rc.tok, rc.tok, 2, rc.c.T, 0, &d) == QS_EINVAL);
    rows_case_close(&rc);
}

/* acts.logits_rows: lm_head only on the first rows[b] rows of each sequence,
 * packed; equal to those rows of a full forward (bit for bit where our GEMM is
 * row-invariant, i.e. with AVX-512; 1e-5 otherwise); bad counts and targets
 * are refused. */
TEST(lm, logits_rows_are_the_full_forward_rows_packed)
{
    rows_case rc;
    qs_diag d = {0};
    ASSERT_EQ_INT(rows_case_open(&rc), 0);
    const size_t V = (size_t)rc.c.V, T = (size_t)rc.c.T;
    int rows[2] = {2, rc.c.T - 1};
    rc.a.logits_rows = rows;
    ASSERT_OK(model_forward(&rc.m, &rc.a, rc.tok, NULL, 2, rc.c.T, 0, &d), &d);
    double worst = 0;
    size_t packed = 0;
    for (size_t b = 0; b < 2; b++)
        for (size_t r = 0; r < (size_t)rows[b]; r++, packed++)
            for (size_t v = 0; v < V; v++) {
                double diff = fabs((double)rc.a.logits[packed * V + v] - rc.full[(b * T + r) * V + v]);
                worst = diff > worst ? diff : worst;
            }
    ASSERT_TRUE(worst <= (cpu_level() >= CPU_LEVEL_AVX512 ? 0.0 : 1e-5));
    ASSERT_TRUE(model_forward(&rc.m, &rc.a, rc.tok, rc.tok, 2, rc.c.T, 0, &d) == QS_EINVAL);
    rows[1] = rc.c.T + 1;
    ASSERT_TRUE(model_forward(&rc.m, &rc.a, rc.tok, NULL, 2, rc.c.T, 0, &d) == QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "logits_rows[1]") != NULL);
    rc.a.logits_rows = NULL;
    rows_case_close(&rc);
}

/* The scorer's two forwards by hand: contexts of 4 and 6 tokens in a capacity
 * arena (right-padded), then their next 3 tokens in a one-layer arena at
 * positions 4.. and 6.. (seq_pos0) on the contexts' caches (kv_prefix): the
 * continuation rows are the full forward's rows (bit for bit where the GEMM is
 * row-invariant); a one-layer arena refuses later positions without a prefix,
 * and views beyond the capacities are refused. */
TEST(lm, continuations_on_kv_prefixes_equal_the_full_forward_rows)
{
    rows_case rc;
    qs_diag d = {0};
    ASSERT_EQ_INT(rows_case_open(&rc), 0);
    const int T = rc.c.T, V = rc.c.V, n = 3;
    const llama_config *cfg = &rc.m.cfg;
    static const int ctx_len[2] = {4, 6};
    ASSERT_TRUE(T >= 6 + n);
    llama_acts ca, cb;
    ASSERT_OK(model_acts_init_infer(&ca, cfg, 16, 16, 2, 0, &d), &d);
    ASSERT_OK(model_acts_init_infer(&cb, cfg, 8, 24, 6, 1, &d), &d);
    int32_t tok[16];
    int first[2], ones[2] = {1, 1};
    for (int b = 0; b < 2; b++) {
        for (int t = 0; t < 6; t++)
            tok[b * 6 + t] = rc.tok[b * T + (t < ctx_len[b] ? t : ctx_len[b] - 1)];
        first[b] = ctx_len[b] - 1;
    }
    ASSERT_OK(model_acts_view(&ca, cfg, 2, 6, 6, &d), &d);
    ca.logits_first = first;
    ca.logits_rows = ones;
    ASSERT_OK(model_forward(&rc.m, &ca, tok, NULL, 2, 6, 0, &d), &d);
    const double tol = cpu_level() >= CPU_LEVEL_AVX512 ? 0.0 : 1e-5;
    for (int b = 0; b < 2; b++)
        for (int v = 0; v < V; v++)
            ASSERT_TRUE(fabs((double)ca.logits[b * V + v] -
                             rc.full[((size_t)b * T + ctx_len[b] - 1) * V + v]) <= tol);
    int p0[2] = {4, 6}, src[2] = {0, 1}, rows[2] = {n, n};
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < n; t++)
            tok[b * n + t] = rc.tok[b * T + p0[b] + t];
    model_kv_prefix pre = {&ca, src};
    ASSERT_TRUE(model_acts_view(&cb, cfg, 2, 5, 9, &d) == QS_ERANGE);   /* 10 rows > 8 */
    ASSERT_OK(model_acts_view(&cb, cfg, 2, n, 6 + n, &d), &d);
    cb.seq_pos0 = p0;
    ASSERT_TRUE(model_forward(&rc.m, &cb, tok, NULL, 2, n, 0, &d) == QS_EINVAL);   /* no prefix */
    cb.kv_prefix = &pre;
    cb.logits_rows = rows;
    ASSERT_OK(model_forward(&rc.m, &cb, tok, NULL, 2, n, 0, &d), &d);
    for (int b = 0, k = 0; b < 2; b++)
        for (int t = 0; t < n; t++, k++)
            for (int v = 0; v < V; v++)
                ASSERT_TRUE(fabs((double)cb.logits[(size_t)k * V + v] -
                                 rc.full[((size_t)b * T + p0[b] + t) * V + v]) <= tol);
    model_acts_free(&ca);
    model_acts_free(&cb);
    rows_case_close(&rc);
}

/* The fixture's shape (base) with a context of max_pos, random weights (seed),
 * and a scorer on it: *c, *m, *lm. */
static int lm_random_open(const llama_config *base, int max_pos, uint64_t seed,
                          llama_config *c, llama_model *m, model_lm **lm, qs_diag *d)
{
    *c = *base;
    c->max_pos = max_pos;
    int rc = model_init(m, c, d);
    if (rc)
        return rc;
    model_params_randomize(m, seed, 0.05f);
    if ((rc = model_lm_create(lm, m, max_pos, d)))
        model_free(m);
    return rc;
}

/* Contexts that start with the same tokens (a few-shot prompt's examples)
 * compute them once: every log-likelihood and greedy flag keeps the bits of its
 * request scored alone (computed whole), in any order, and the context forwards
 * feed fewer rows.  Two contexts sharing too little to pay for the prefix's own
 * forward are computed whole. */
TEST(lm, contexts_sharing_a_prefix_compute_it_once)
{
    lm_fix f;
    qs_diag d = {0};
    ASSERT_OK(lm_fix_open(&f, 32, &d), &d);
    llama_config c;
    llama_model m;
    model_lm *lm;
    ASSERT_OK(lm_random_open(&f.m.cfg, 512, 11, &c, &m, &lm, &d), &d);
    const int sharing = matmul_rows_independent(m.precision);
    enum { NR = 7, PRE = 60 };
    /* r0-r3: the 60-token prefix, then tails of 5, 17, 1 and 30 tokens; r4: 50
     * unrelated tokens; r5: the prefix alone (caps the shared part at 59); r6: the
     * first 40 tokens of the prefix and 3 of its own */
    static const int tail[NR] = {5, 17, 1, 30, 0, 0, 3};
    int32_t ctx[NR][128], cont[NR][2][4];
    size_t n_ctx[NR], n_cont[NR][2] = {{0}};
    const int32_t *conts[NR][2];
    unsigned long st = 5;
    int32_t pre[PRE];
    for (int t = 0; t < PRE; t++)
        pre[t] = (int32_t)(3 + (t * 7919) % (c.vocab_size - 3));
    for (int i = 0; i < NR; i++) {
        int keep = i <= 3 || i == 5 ? PRE : i == 6 ? 40 : 0;
        for (int t = 0; t < 128; t++) {
            st = st * 6364136223846793005ul + 1442695040888963407ul;
            ctx[i][t] = t < keep ? pre[t]
                                 : (int32_t)(3 + (st >> 33) % (unsigned long)(c.vocab_size - 3));
        }
        n_ctx[i] = (size_t)(i == 4 ? 50 : keep + tail[i]);
        for (int k = 0; k < 2; k++) {
            n_cont[i][k] = k ? 4 : 1;
            for (int t = 0; t < 4; t++)
                cont[i][k][t] = (int32_t)(3 + (i * 31 + k * 17 + t * 5) % (c.vocab_size - 3));
            conts[i][k] = cont[i][k];
        }
    }
    ASSERT_TRUE(ctx[1][PRE - 1] == ctx[0][PRE - 1] && ctx[1][PRE] != ctx[0][PRE]);
    lm_request req[NR], rev[NR];
    for (int i = 0; i < NR; i++) {
        req[i] = (lm_request){ctx[i], n_ctx[i], 2, conts[i], n_cont[i]};
        rev[NR - 1 - i] = req[i];
    }
    lm_scorer s = model_lm_scorer(lm);
    double all[NR][2], back[NR][2], alone[NR][2];
    int g_all[NR][2], g_back[NR][2], g_alone[NR][2];
    lm_result res[NR], res_rev[NR];
    for (int i = 0; i < NR; i++) {
        res[i] = (lm_result){all[i], g_all[i]};
        res_rev[NR - 1 - i] = (lm_result){back[i], g_back[i]};
    }
    long r0 = model_lm_ctx_rows(lm);
    ASSERT_OK(s.score(s.self, req, res, NR, &d), &d);
    long rows_shared = model_lm_ctx_rows(lm) - r0, whole = 0;
    ASSERT_OK(s.score(s.self, rev, res_rev, NR, &d), &d);
    r0 = model_lm_ctx_rows(lm);
    for (int i = 0; i < NR; i++) {
        lm_result one = {alone[i], g_alone[i]};
        ASSERT_OK(s.score(s.self, &req[i], &one, 1, &d), &d);
        whole += (long)n_ctx[i];
    }
    ASSERT_EQ_INT((int)(model_lm_ctx_rows(lm) - r0), (int)whole);   /* alone: each whole */
    for (int i = 0; i < NR; i++)
        for (int k = 0; k < 2; k++) {
            if (memcmp(&all[i][k], &alone[i][k], sizeof(double)) ||
                memcmp(&back[i][k], &alone[i][k], sizeof(double)))
                TEST_FAIL_AT("request %d answer %d: batched %.17g, reversed %.17g, alone %.17g",
                             i, k, all[i][k], back[i][k], alone[i][k]);
            ASSERT_EQ_INT(g_all[i][k], g_alone[i][k]);
            ASSERT_EQ_INT(g_back[i][k], g_alone[i][k]);
        }
    /* r0-r3 and r5 on a 59-token prefix computed once: 4 x 59 rows fewer, less
     * what the padding of their tails' forwards adds back */
    if (getenv("QS_EVAL_VERBOSE"))
        fprintf(stderr, "    context rows: %ld shared, %ld whole\n", rows_shared, whole);
    if (sharing)
        ASSERT_TRUE(rows_shared <= whole - 150);
    else
        ASSERT_TRUE(rows_shared >= whole);
    /* two 50-token contexts sharing 40: 40 rows saved < what the prefix's forward
     * costs (LM_PREFIX_FWD); 50 sharing 20: shorter than LM_PREFIX_MIN */
    for (int share = 40; share >= 20; share -= 20) {
        memcpy(ctx[5], ctx[6], share * sizeof **ctx);
        for (int t = share; t < 50; t++)
            ctx[5][t] = ctx[6][t] + 1 < c.vocab_size ? ctx[6][t] + 1 : 3;
        req[5] = (lm_request){ctx[5], 50, 2, conts[6], n_cont[6]};
        req[6] = (lm_request){ctx[6], 50, 2, conts[5], n_cont[5]};
        r0 = model_lm_ctx_rows(lm);
        ASSERT_OK(s.score(s.self, req + 5, res + 5, 2, &d), &d);
        ASSERT_EQ_INT((int)(model_lm_ctx_rows(lm) - r0), 100);   /* one forward of 2 x 50 */
    }
    model_lm_destroy(lm);
    model_free(&m);
    lm_fix_close(&f);
}

/* The scorer's arenas are what model_lm_acts_elems says (inspect's eval
 * figure): at their floors (short requests), and grown by a context longer
 * than LM_CTX_ROWS and a continuation longer than LM_CONT_ROWS.  Measured as
 * the counted heap the scoring adds (its token, index and position buffers: a few KiB per thousand rows). */
TEST(lm, arenas_are_model_lm_acts_elems)
{
    lm_fix f;
    qs_diag d = {0};
    ASSERT_OK(lm_fix_open(&f, 64, &d), &d);
    double out[3][2];
    size_t live0 = qs_mem_live_bytes();
    ASSERT_OK(score_all(f.lm, f.req, 3, out, &d), &d);
    /* make_requests: context + continuation up to T tokens, continuations up to T - 2 */
    size_t est = model_lm_acts_elems(&f.m.cfg, f.c.T, f.c.T - 2, 0) * sizeof(float),
           live = qs_mem_live_bytes() - live0;
    if (live < est || live > est + (64 << 10))
        fprintf(stderr, "    short requests: heap %zu, estimate %zu\n", live, est);
    ASSERT_TRUE(live >= est && live <= est + (64 << 10));
    /* the same shape with a 2048-token context, random weights */
    llama_config c;
    llama_model m;
    model_lm *lm;
    ASSERT_OK(lm_random_open(&f.m.cfg, 2048, 7, &c, &m, &lm, &d), &d);
    enum { CTX_LONG = 1019, CTX_SHORT = 300, CONT_LONG = 600 };
    int32_t *tok = qs_malloc(CTX_LONG * sizeof *tok);
    ASSERT_TRUE(tok != NULL);
    for (int i = 0; i < CTX_LONG; i++)
        tok[i] = (int32_t)(3 + i % (c.vocab_size - 3));
    /* a context of 1019 tokens with a 1-token answer; one of 300 (its first 300)
     * with answers of 5 and 600 tokens: at most 1020 tokens per request, answers
     * up to 600, and 299 tokens computed once for both */
    const int32_t *ca[1] = {tok}, *cb[2] = {tok + 7, tok + 11};
    size_t na[1] = {1}, nb[2] = {5, CONT_LONG};
    lm_request req[2] = {{tok, CTX_LONG, 1, ca, na}, {tok, CTX_SHORT, 2, cb, nb}};
    double la[1], lb[2];
    lm_result res[2] = {{la, NULL}, {lb, NULL}};
    lm_scorer s = model_lm_scorer(lm);
    live0 = qs_mem_live_bytes();
    ASSERT_OK(s.score(s.self, req, res, 2, &d), &d);
    live = qs_mem_live_bytes() - live0;
    size_t prefix;   /* the two contexts share their first 300 tokens: 299 computed once */
    ASSERT_OK(model_lm_shared_prefix(req, 2, &prefix, &d), &d);
    ASSERT_EQ_INT((int)prefix, CTX_SHORT - 1);
    est = model_lm_acts_elems(&c, CTX_LONG + 1, CONT_LONG, (int)prefix) * sizeof(float);
    if (live < est || live > est + (64 << 10))
        fprintf(stderr, "    long requests: heap %zu, estimate %zu\n", live, est);
    ASSERT_TRUE(live >= est && live <= est + (64 << 10));
    ASSERT_TRUE(est > model_lm_acts_elems(&c, 512, 32, 0) * sizeof(float));   /* they grew */
    qs_free(tok);
    model_lm_destroy(lm);
    model_free(&m);
    lm_fix_close(&f);
}
