/* test_vecops.c: vecops_argmax_f32 against the loop it replaces (the sampler's,
 * the scorer's rows, compare's top-1), on the inputs where a lane-wise max
 * could differ from it: ties, NaN anywhere (index 0 too), -0.0 and +0.0,
 * infinities, every length around the lane count, and a 153k logits row. */
#include <math.h>
#include <stdlib.h>

#include "qs/mem.h"
#include "qs/rng.h"
#include "qs/vecops.h"
#include "test.h"

static int loop_argmax(const float *x, int n)
{
    int best = 0;
    for (int v = 1; v < n; v++)
        if (x[v] > x[best])
            best = v;
    return best;
}

/* values from a small set, so that ties and the specials meet often */
static float pick(rng *r)
{
    static const float vals[] = {-1.0f, 0.0f, -0.0f, 0.5f, 2.0f, 2.0f, 3.0f, -3.0f};
    uint32_t k = rng_below(r, 100);
    if (k < 3)
        return NAN;
    if (k < 5)
        return k == 3 ? INFINITY : -INFINITY;
    return vals[rng_below(r, 8)];
}

TEST(vecops, argmax_equals_the_first_index_loop_on_ties_nan_zeros_and_inf)
{
    rng r;
    rng_seed(&r, 7);
    float x[80];
    int checked = 0, nan_first = 0;
    for (int n = 1; n <= 80; n++)
        for (int rep = 0; rep < 300; rep++) {
            for (int i = 0; i < n; i++)
                x[i] = pick(&r);
            if (rep % 3 == 0)   /* without the specials: plain ties */
                for (int i = 0; i < n; i++)
                    x[i] = isfinite(x[i]) ? x[i] : 1.0f;
            if (rep == 7)
                x[0] = NAN;
            nan_first += isnan(x[0]);
            ASSERT_EQ_INT(vecops_argmax_f32(x, n), loop_argmax(x, n));
            checked++;
        }
    ASSERT_TRUE(checked == 80 * 300);
    ASSERT_TRUE(nan_first > 80);
    ASSERT_EQ_INT(vecops_argmax_f32(x, 0), 0);
}

TEST(vecops, argmax_of_a_vocabulary_row_with_the_maximum_in_each_lane_and_the_tail)
{
    enum { V = 153376 };
    float *x = qs_malloc(V * sizeof *x);
    ASSERT_TRUE(x != NULL);
    rng r;
    rng_seed(&r, 11);
    for (int i = 0; i < V; i++)
        x[i] = rng_normal(&r);
    ASSERT_EQ_INT(vecops_argmax_f32(x, V), loop_argmax(x, V));
    /* the maximum planted at each lane of a block, at the tail, twice (the
     * first wins), and under a NaN and an -inf elsewhere */
    const int at[] = {0, 1, 15, 16, 17, 4097, V - 17, V - 16, V - 1};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        float keep = x[at[k]];
        x[at[k]] = 100.0f;
        ASSERT_EQ_INT(vecops_argmax_f32(x, V), at[k]);
        x[V - 1 - at[k] / 2] = 100.0f;   /* a later copy of the maximum */
        x[(at[k] + 5) % V] = NAN;
        x[(at[k] + 9) % V] = -INFINITY;
        ASSERT_EQ_INT(vecops_argmax_f32(x, V), loop_argmax(x, V));
        x[at[k]] = keep;
        x[V - 1 - at[k] / 2] = 0.0f;
        x[(at[k] + 5) % V] = 0.0f;
        x[(at[k] + 9) % V] = 0.0f;
    }
    qs_free(x);
}
