/* test_stats.c: McNemar exact p-values against hand-computed binomial sums; bootstrap. */
#include "qs/stats.h"
#include "test.h"

TEST(stats, mcnemar_no_discordant_pairs_is_one)
{
    double p = 0;
    ASSERT_OK(stats_mcnemar_exact(0, 0, &p, NULL), NULL);
    ASSERT_NEAR(p, 1.0, 0);
}

TEST(stats, mcnemar_matches_hand_computed_small_cases)
{
    double p;
    /* b=5, c=0: 2 * 1/2^5 */
    ASSERT_OK(stats_mcnemar_exact(5, 0, &p, NULL), NULL);
    ASSERT_NEAR(p, 2.0 / 32.0, 1e-15);
    /* b=10, c=2: 2 * (C(12,0)+C(12,1)+C(12,2)) / 2^12 = 2*79/4096 */
    ASSERT_OK(stats_mcnemar_exact(10, 2, &p, NULL), NULL);
    ASSERT_NEAR(p, 158.0 / 4096.0, 1e-15);
    /* symmetric in b and c */
    double q;
    ASSERT_OK(stats_mcnemar_exact(2, 10, &q, NULL), NULL);
    ASSERT_NEAR(p, q, 0);
    /* b=7, c=1: 2 * (1+8)/256 */
    ASSERT_OK(stats_mcnemar_exact(7, 1, &p, NULL), NULL);
    ASSERT_NEAR(p, 18.0 / 256.0, 1e-15);
    /* b=1, c=0: 2 * 1/2 = 1 (capped) and b=c=3: 2*42/64 > 1 -> 1 */
    ASSERT_OK(stats_mcnemar_exact(1, 0, &p, NULL), NULL);
    ASSERT_NEAR(p, 1.0, 0);
    ASSERT_OK(stats_mcnemar_exact(3, 3, &p, NULL), NULL);
    ASSERT_NEAR(p, 1.0, 0);
}

TEST(stats, mcnemar_matches_exact_sums_for_larger_counts)
{
    double p;
    /* b=20, c=10: 2 * 53009102 / 2^30 (exact integer sum) */
    ASSERT_OK(stats_mcnemar_exact(20, 10, &p, NULL), NULL);
    ASSERT_NEAR(p, 2.0 * 53009102.0 / 1073741824.0, 1e-13);
    /* b=600, c=500: exact rational value 0.0028195449914364275 */
    ASSERT_OK(stats_mcnemar_exact(600, 500, &p, NULL), NULL);
    ASSERT_NEAR(p / 0.0028195449914364275, 1.0, 1e-9);
}

TEST(stats, mcnemar_rejects_negative_counts)
{
    double p;
    ASSERT_EQ_INT(stats_mcnemar_exact(-1, 2, &p, NULL), QS_EINVAL);
}

TEST(stats, pairs_count_discordant_items)
{
    const unsigned char b[] = {1, 1, 0, 0, 1, 0}, c[] = {1, 0, 1, 0, 0, 0};
    stats_pairs s;
    ASSERT_OK(stats_pairs_count(b, c, 6, &s, NULL), NULL);
    ASSERT_EQ_INT(s.both_right, 1);
    ASSERT_EQ_INT(s.base_only, 2);
    ASSERT_EQ_INT(s.cand_only, 1);
    ASSERT_EQ_INT(s.both_wrong, 2);
    const unsigned char bad[] = {1, 2};
    ASSERT_EQ_INT(stats_pairs_count(bad, c, 2, &s, NULL), QS_EINVAL);
}

TEST(stats, bootstrap_is_seeded_and_brackets_the_difference)
{
    enum { N = 400 };
    unsigned char b[N], c[N];
    /* base right on 240, cand loses 40 of those and gains 8: diff = -32/400 = -8 pp */
    for (int i = 0; i < N; i++) {
        b[i] = i < 240;
        c[i] = (i < 200) || (i >= 240 && i < 248);
    }
    stats_bootstrap_opts o = {2000, 0.95, 7};
    double lo, hi, lo2, hi2;
    ASSERT_OK(stats_paired_bootstrap(b, c, N, &o, &lo, &hi, NULL), NULL);
    ASSERT_OK(stats_paired_bootstrap(b, c, N, &o, &lo2, &hi2, NULL), NULL);
    ASSERT_NEAR(lo, lo2, 0);
    ASSERT_NEAR(hi, hi2, 0);
    ASSERT_TRUE(lo < -0.08 && hi > -0.08);
    ASSERT_TRUE(hi < 0.0);   /* the loss is clearly significant */
    /* normal-approximation half width: 1.96*sqrt((b+c)/n^2 - diff^2/n) = ~2.5 pp */
    ASSERT_NEAR(hi - lo, 2 * 1.96 * sqrt((48.0 / N - 0.0064) / N), 0.01);
    /* identical systems: the interval collapses to 0 */
    ASSERT_OK(stats_paired_bootstrap(b, b, N, &o, &lo, &hi, NULL), NULL);
    ASSERT_NEAR(lo, 0, 0);
    ASSERT_NEAR(hi, 0, 0);
}
