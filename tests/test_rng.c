/* test_rng.c: explicit-state RNG: reproducible, restorable, sane distributions. */
#include "qs/rng.h"
#include "test.h"

TEST(rng, same_seed_same_stream_and_state_restores)
{
    rng a, b;
    rng_seed(&a, 42);
    rng_seed(&b, 42);
    for (int i = 0; i < 100; i++)
        ASSERT_EQ_INT(rng_u32(&a), rng_u32(&b));
    rng saved = a; /* the state is a plain value */
    uint32_t x = rng_u32(&a);
    ASSERT_EQ_INT(rng_u32(&saved), x);
    rng c;
    rng_seed(&c, 43);
    ASSERT_TRUE(rng_u64(&c) != rng_u64(&b));
}

TEST(rng, seed_zero_is_usable_and_streams_differ)
{
    rng a, s1, s2;
    rng_seed(&a, 0);
    ASSERT_TRUE(a.state != 0);
    ASSERT_TRUE(rng_u64(&a) != 0);
    rng_seed_stream(&s1, 7, 0);
    rng_seed_stream(&s2, 7, 1);
    ASSERT_TRUE(rng_u64(&s1) != rng_u64(&s2));
}

TEST(rng, uniform_and_normal_moments)
{
    rng r;
    rng_seed(&r, 1);
    double su = 0, sn = 0, sn2 = 0;
    int n = 20000;
    for (int i = 0; i < n; i++) {
        float u = rng_uniform(&r);
        ASSERT_TRUE(u >= 0.0f && u < 1.0f);
        su += u;
        float z = rng_normal(&r);
        sn += z;
        sn2 += (double)z * z;
    }
    ASSERT_NEAR(su / n, 0.5, 0.01);  /* sd of the mean ~0.002 */
    ASSERT_NEAR(sn / n, 0.0, 0.03);  /* sd ~0.007 */
    ASSERT_NEAR(sn2 / n, 1.0, 0.05);
}

TEST(rng, shuffle_is_a_permutation_and_below_in_range)
{
    rng r;
    rng_seed(&r, 5);
    uint32_t a[257], seen[257] = {0};
    for (uint32_t i = 0; i < 257; i++)
        a[i] = i;
    rng_shuffle_u32(&r, a, 257);
    int moved = 0;
    for (uint32_t i = 0; i < 257; i++) {
        ASSERT_TRUE(a[i] < 257);
        seen[a[i]]++;
        moved += a[i] != i;
    }
    for (int i = 0; i < 257; i++)
        ASSERT_EQ_INT(seen[i], 1);
    ASSERT_TRUE(moved > 200);
    for (int i = 0; i < 1000; i++)
        ASSERT_TRUE(rng_below(&r, 3) < 3);
}
