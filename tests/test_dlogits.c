/* test_dlogits.c: the cross-entropy backward handing dlogits over in row pairs
 * (xent_backward_pairs) gives xent_backward's bits, and so does either given the
 * forward's softmax statistics (xent_stats); the model's lm_head backward
 * on that path (bf16 packs on the AVX512-BF16 kernel: dlogits never stored in
 * fp32) gives the same gradients as the fp32-dlogits path, bit for bit, for any
 * thread count, and leaves the logits in place. */
#include <string.h>

#include "qs/cpu.h"
#include "qs/err.h"
#include "qs/layers.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_train.h"
#include "test.h"

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct pairs_sink {
    float *rows; /* [N, V] */
    int *calls;  /* [N / 2 rounded up] */
    int N, V;
} pairs_sink;

static void pairs_sink_put(void *ctx, int n0, const float *rows)
{
    pairs_sink *s = ctx;
    int count = n0 + 1 < s->N ? 2 : 1;
    memcpy(s->rows + (size_t)n0 * s->V, rows, (size_t)count * s->V * sizeof *rows);
    s->calls[n0 / 2]++;
}

static void pairs_check(int level)
{
    enum { N = 7, V = 1000 + 7 };
    float *l = qs_malloc(N * V * 4), *g = qs_malloc(N * V * 4), *p = qs_malloc(N * V * 4);
    int calls[(N + 1) / 2] = {0};
    ASSERT_TRUE(l && g && p);
    unsigned long seed = 11;
    for (size_t i = 0; i < (size_t)N * V; i++) {
        seed = seed * 6364136223846793005ul + 1442695040888963407ul;
        l[i] = -8.0f + 16.0f * (float)((seed >> 40) & 0xffffff) / 16777216.0f;
    }
    const int32_t tg[N] = {3, V - 1, -1, 5, 0, -1, 17}; /* ignored rows, a lone last row */
    memset(p, 0xff, N * V * 4);                       /* NaN: every row must be written */
    int saved = cpu_level();
    cpu_limit(level);
    xent_backward(g, NULL, l, tg, N, V, 0.125f);
    pairs_sink s = {p, calls, N, V};
    ASSERT_EQ_INT(xent_backward_pairs(NULL, l, tg, N, V, 0.125f, pairs_sink_put, &s), 0);
    cpu_limit(saved);
    ASSERT_EQ_INT(memcmp(g, p, N * V * 4), 0);
    for (int i = 0; i < (N + 1) / 2; i++)
        ASSERT_EQ_INT(calls[i], 1);
    /* given the forward's statistics (one pass per row): the same bits, in
     * place over the logits too, and through the pairs */
    float mx[N], losses[N], *q = qs_malloc(N * V * 4);
    double sum[N];
    ASSERT_TRUE(q != NULL);
    xent_stats st = {mx, sum};
    cpu_limit(level);
    xent_forward(losses, &st, l, tg, N, V);
    ASSERT_TRUE(sum[2] < 0 && sum[0] > 0);   /* ignored rows: not computed */
    memset(p, 0xff, N * V * 4);
    xent_backward(p, &st, l, tg, N, V, 0.125f);
    memcpy(q, l, N * V * 4);
    xent_backward(q, &st, q, tg, N, V, 0.125f);
    cpu_limit(saved);
    ASSERT_EQ_INT(memcmp(g, p, N * V * 4), 0);
    ASSERT_EQ_INT(memcmp(g, q, N * V * 4), 0);
    memset(p, 0xff, N * V * 4);
    memset(calls, 0, sizeof calls);
    cpu_limit(level);
    ASSERT_EQ_INT(xent_backward_pairs(&st, l, tg, N, V, 0.125f, pairs_sink_put, &s), 0);
    cpu_limit(saved);
    ASSERT_EQ_INT(memcmp(g, p, N * V * 4), 0);
    qs_free(q);
    qs_free(l);
    qs_free(g);
    qs_free(p);
}

TEST(dlogits, xent_pairs_and_kept_statistics_give_the_bits_of_xent_backward)
{
    pairs_check(CPU_LEVEL_AVX512BF16);
    pairs_check(CPU_LEVEL_SCALAR);
}

TEST(dlogits, xent_pairs_report_out_of_memory_without_calling_put)
{
    float l[4 * 5] = {0};
    int32_t tg[4] = {0, 1, 2, 3};
    int calls[2] = {0};
    pairs_sink s = {NULL, calls, 4, 5};
    qs_mem_fail_after(1);
    int rc = xent_backward_pairs(NULL, l, tg, 4, 5, 1.0f, pairs_sink_put, &s);
    qs_mem_fail_after(0);
    ASSERT_EQ_INT(rc, QS_ENOMEM);
    ASSERT_EQ_INT(calls[0] + calls[1], 0);
}

/* One forward + backward of the demo model (B = 1, T = 15: an odd row count). */
enum { DL_T = 15 };

typedef struct dl_run {
    llama_model m;
    llama_acts a;
    llama_grad_acts g;
    llama_weights gw;
    float *grads;
} dl_run;

static int dl_open(dl_run *r, int packed)
{
    qs_diag d = {0};
    memset(r, 0, sizeof *r);
    if (model_load_dir(&r->m, "data/demo/model", &d))
        return -1;
    r->m.precision = MATMUL_BF16;
    if (model_acts_init(&r->a, &r->m.cfg, 1, DL_T, DL_T, 1, &d) ||
        model_grad_acts_init(&r->g, &r->m.cfg, 1, DL_T, &d))
        return -1;
    r->grads = qs_calloc(r->m.n_params, sizeof *r->grads);
    r->gw.layer = qs_calloc((size_t)r->m.cfg.n_layers, sizeof *r->gw.layer);
    if (!r->grads || !r->gw.layer || model_weights_point(&r->gw, &r->m, r->grads))
        return -1;
    return packed ? model_packs_create(&r->m, &d) : 0;
}

static void dl_close(dl_run *r)
{
    model_acts_free(&r->a);
    model_grad_acts_free(&r->g);
    qs_free(r->grads);
    qs_free(r->gw.layer);
    model_free(&r->m);
}

/* forward, keep the logits in *logits (qs_malloc'd), backward */
static int dl_step(dl_run *r, float **logits)
{
    qs_diag d = {0};
    int32_t tok[DL_T], tgt[DL_T];
    for (int i = 0; i < DL_T; i++) {
        tok[i] = (int32_t)((i * 37 + 3) % r->m.cfg.vocab_size);
        tgt[i] = i == 4 ? -1 : (int32_t)((i * 53 + 1) % r->m.cfg.vocab_size);
    }
    memset(r->grads, 0, r->m.n_params * sizeof *r->grads);
    if (model_forward(&r->m, &r->a, tok, tgt, 1, DL_T, 0, &d))
        return -1;
    size_t nl = (size_t)DL_T * r->m.cfg.vocab_size;
    *logits = qs_malloc(nl * sizeof **logits);
    if (!*logits)
        return -1;
    memcpy(*logits, r->a.logits, nl * sizeof **logits);
    return model_backward(&r->m, &r->a, &r->g, &r->gw, tok, tgt, 1, DL_T, 1.0f, NULL, &d);
}

TEST(dlogits, bf16_head_backward_without_fp32_dlogits_gives_the_same_gradients)
{
    if (cpu_level() < CPU_LEVEL_AVX512BF16)
        SKIP("CPU has no AVX512-BF16 (the bf16 path keeps fp32 dlogits)");
    dl_run plain, packed;
    float *lp = NULL, *lk = NULL;
    ASSERT_EQ_INT(dl_open(&plain, 0), 0); /* unpacked: dlogits in fp32 over a->logits */
    ASSERT_EQ_INT(dl_open(&packed, 1), 0);
    ASSERT_EQ_INT(dl_step(&plain, &lp), 0);
    ASSERT_EQ_INT(dl_step(&packed, &lk), 0);
    size_t nl = (size_t)DL_T * plain.m.cfg.vocab_size, np = plain.m.n_params;
    ASSERT_EQ_INT(memcmp(lp, lk, nl * sizeof *lp), 0);
    ASSERT_EQ_INT(memcmp(plain.grads, packed.grads, np * sizeof *plain.grads), 0);
    /* the fused path really ran: the logits are still there, not dlogits */
    ASSERT_EQ_INT(memcmp(packed.a.logits, lk, nl * sizeof *lk), 0);
    ASSERT_TRUE(memcmp(plain.a.logits, lp, nl * sizeof *lp) != 0);
#ifdef _OPENMP
    /* one thread: the same bits */
    float *g2 = qs_malloc(np * sizeof *g2), *l1 = NULL;
    ASSERT_TRUE(g2 != NULL);
    memcpy(g2, packed.grads, np * sizeof *g2);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc = dl_step(&packed, &l1);
    omp_set_num_threads(saved);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_EQ_INT(memcmp(g2, packed.grads, np * sizeof *g2), 0);
    qs_free(g2);
    qs_free(l1);
#endif
    qs_free(lp);
    qs_free(lk);
    dl_close(&plain);
    dl_close(&packed);
}
