/* test_sampler.c: greedy, temperature and nucleus (top-p) choices against a
 * reference written here: softmax in double, every candidate sorted by
 * (probability desc, id asc), the nucleus the shortest prefix with mass
 * >= top_p, the draw r * kept over it in that order. */
#include <math.h>
#include <stdlib.h>

#include "qs/mem.h"
#include "qs/rng.h"
#include "qs/sampler.h"
#include "test.h"

typedef struct {
    float p;
    int32_t id;
} ref_cand;

static int ref_cmp(const void *a, const void *b)
{
    const ref_cand *x = a, *y = b;
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The reference choice for the uniform draw the sampler will make from rng. */
static int32_t ref_sample(const float *logits, int V, float temperature, float top_p,
                          uint64_t state, ref_cand *cand)
{
    int32_t best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best])
            best = v;
    double sum = 0;
    for (int v = 0; v < V; v++) {
        cand[v].p = (float)exp(((double)logits[v] - logits[best]) / temperature);
        cand[v].id = v;
        sum += cand[v].p;
    }
    double r = (rng_splitmix64(&state) >> 11) * (1.0 / 9007199254740992.0);
    qsort(cand, (size_t)V, sizeof *cand, ref_cmp);
    double kept = 0;
    int n = 0;
    while (n < V && kept < top_p * sum)
        kept += cand[n++].p;
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += cand[i].p;
        if (acc > r * kept)
            return cand[i].id;
    }
    return cand[n - 1].id;
}

TEST(sampler, greedy_is_first_argmax)
{
    float logits[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.5f, 2.0f};
    sampler s;
    qs_diag d = {0};
    ASSERT_OK(sampler_init(&s, 6, 0.0f, 0.9f, 7, &d), &d);
    for (int i = 0; i < 3; i++)
        ASSERT_EQ_INT(sampler_next(&s, logits), 1);
    sampler_free(&s);
}

TEST(sampler, rejects_bad_parameters)
{
    sampler s;
    qs_diag d = {0};
    ASSERT_TRUE(sampler_init(&s, 10, -1.0f, 0.9f, 1, &d) != 0);
    ASSERT_TRUE(sampler_init(&s, 10, 1.0f, 0.0f, 1, &d) != 0);
    ASSERT_TRUE(sampler_init(&s, 10, 1.0f, 1.5f, 1, &d) != 0);
    ASSERT_TRUE(sampler_init(&s, 0, 1.0f, 0.9f, 1, &d) != 0);
}

/* Large vocabularies (the nucleus is a small part of them), logits with many
 * exact ties, and every top_p from a tiny nucleus to all of it: the same id
 * as the full sort on every draw. */
TEST(sampler, nucleus_matches_full_sort)
{
    enum { V = 60000, DRAWS = 60 };
    static const float temps[] = {0.3f, 0.8f, 1.0f, 1.7f};
    static const float tops[] = {0.05f, 0.5f, 0.9f, 0.95f, 0.999f};
    float *logits = qs_malloc(V * sizeof *logits);
    ref_cand *cand = qs_malloc(V * sizeof *cand);
    ASSERT_TRUE(logits && cand);
    uint64_t st = 2024;
    int mismatches = 0, draws = 0, distinct = 0;
    for (int ti = 0; ti < 4; ti++)
        for (int pi = 0; pi < 5; pi++) {
            /* a peaked head over a long flat tail; quantized so ties are common */
            for (int v = 0; v < V; v++) {
                double u = (rng_splitmix64(&st) >> 11) * (1.0 / 9007199254740992.0);
                double z = u < 0.002 ? 8.0 + 1500.0 * u : 3.0 * u;
                logits[v] = (float)(floor(z * 8.0) / 8.0);
            }
            sampler s;
            qs_diag d = {0};
            ASSERT_OK(sampler_init(&s, V, temps[ti], tops[pi], 100 + ti * 5 + pi, &d), &d);
            int32_t first = -1;
            for (int i = 0; i < DRAWS; i++) {
                int32_t want = ref_sample(logits, V, temps[ti], tops[pi], s.rng, cand);
                int32_t got = sampler_next(&s, logits);
                mismatches += got != want;
                distinct += i > 0 && got != first;
                first = i == 0 ? got : first;
                draws++;
            }
            sampler_free(&s);
        }
    ASSERT_EQ_INT(mismatches, 0);
    ASSERT_TRUE(distinct > draws / 4); /* the draws do vary */
    qs_free(logits);
    qs_free(cand);
}

/* Four tokens with probabilities 0.5, 0.25, 0.125, 0.125 (temperature 1):
 * top_p 0.7 keeps the first two (0.75 >= 0.7), drawn 2:1; top_p 1 all four. */
TEST(sampler, nucleus_frequencies)
{
    float logits[4] = {(float)log(4.0), (float)log(2.0), 0.0f, 0.0f};
    int count[2][4] = {{0}};
    enum { N = 30000 };
    for (int c = 0; c < 2; c++) {
        sampler s;
        qs_diag d = {0};
        ASSERT_OK(sampler_init(&s, 4, 1.0f, c ? 1.0f : 0.7f, 99, &d), &d);
        for (int i = 0; i < N; i++)
            count[c][sampler_next(&s, logits)]++;
        sampler_free(&s);
    }
    ASSERT_EQ_INT(count[0][2] + count[0][3], 0);
    /* 2/3 of N, sd sqrt(N 2/9) ~ 82: within 5 sd */
    ASSERT_TRUE(abs(count[0][0] - 2 * N / 3) < 410);
    static const double want[4] = {0.5, 0.25, 0.125, 0.125};
    for (int v = 0; v < 4; v++)
        ASSERT_TRUE(fabs(count[1][v] - want[v] * N) < 5.0 * sqrt(N * want[v] * (1 - want[v])));
}

/* A NaN logit (a broken model) still gives an id in range, for every mode. */
TEST(sampler, nan_logits_give_an_id_in_range)
{
    float logits[5] = {0.5f, NAN, 1.0f, -2.0f, 0.25f};
    static const float tops[] = {0.5f, 1.0f};
    for (int i = 0; i < 2; i++) {
        sampler s;
        qs_diag d = {0};
        ASSERT_OK(sampler_init(&s, 5, 1.0f, tops[i], 3, &d), &d);
        for (int k = 0; k < 20; k++) {
            int32_t id = sampler_next(&s, logits);
            ASSERT_TRUE(id >= 0 && id < 5);
        }
        sampler_free(&s);
    }
}
