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

/* The reference's candidates: softmax at the temperature, sorted; *sum. */
static void ref_sort(const float *logits, int V, float temperature, ref_cand *cand, double *sum)
{
    int32_t best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best])
            best = v;
    *sum = 0;
    for (int v = 0; v < V; v++) {
        cand[v].p = (float)exp(((double)logits[v] - logits[best]) / temperature);
        cand[v].id = v;
        *sum += cand[v].p;
    }
    qsort(cand, (size_t)V, sizeof *cand, ref_cmp);
}

/* The reference choice for the uniform draw the sampler will make from rng,
 * over the candidates ref_sort gave. */
static int32_t ref_draw(const ref_cand *cand, int V, double sum, float top_p, uint64_t state)
{
    double r = (rng_splitmix64(&state) >> 11) * (1.0 / 9007199254740992.0);
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
            double sum;
            ref_sort(logits, V, temps[ti], cand, &sum);
            for (int i = 0; i < DRAWS; i++) {
                int32_t want = ref_draw(cand, V, sum, tops[pi], s.rng);
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

/* A near-flat distribution over a 150k vocabulary (a random-init model's):
 * the 0.9 nucleus holds most of the vocabulary; half of the logits on a grid
 * (exact ties), half continuous (probabilities that differ in their last
 * bits only). */
TEST(sampler, nucleus_of_a_flat_distribution)
{
    enum { V = 153376, DRAWS = 8 };
    float *logits = qs_malloc(V * sizeof *logits);
    ref_cand *cand = qs_malloc(V * sizeof *cand);
    ASSERT_TRUE(logits && cand);
    uint64_t st = 77;
    for (int v = 0; v < V; v++) {
        uint64_t u = rng_splitmix64(&st);
        logits[v] = v % 2 ? (float)(u >> 40) * 0x1p-25f : (float)((u >> 40) % 4096) * 0x1p-13f;
    }
    sampler s;
    qs_diag d = {0};
    ASSERT_OK(sampler_init(&s, V, 1.0f, 0.9f, 5, &d), &d);
    int mismatches = 0;
    double sum;
    ref_sort(logits, V, 1.0f, cand, &sum);
    for (int i = 0; i < DRAWS; i++) {
        int32_t want = ref_draw(cand, V, sum, 0.9f, s.rng);
        mismatches += sampler_next(&s, logits) != want;
    }
    ASSERT_EQ_INT(mismatches, 0);
    sampler_free(&s);
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
