/* test_scorer.c: per-item predictions and aggregation vs hand-computed values. */
#include <math.h>

#include "qs/scorer.h"
#include "test.h"

TEST(scorer, argmax_takes_first_of_ties)
{
    double v[] = {-2.0, -1.0, -1.0, -3.0};
    ASSERT_EQ_INT(scorer_argmax(v, 4), 1);
    double w[] = {-1.0, -1.0};
    ASSERT_EQ_INT(scorer_argmax(w, 2), 0);
    ASSERT_EQ_INT(scorer_argmax(w, 0), -1);
}

TEST(scorer, acc_norm_divides_by_code_points_not_bytes)
{
    /* choice 0 "30 °C" = 5 code points (6 bytes), choice 1 "thirty" = 6 */
    double ll[] = {-5.4, -6.3};
    int chars[] = {5, 6};
    int pred, pred_norm;
    scorer_item_preds(ll, chars, 2, &pred, &pred_norm);
    ASSERT_EQ_INT(pred, 0);
    ASSERT_EQ_INT(pred_norm, 1);   /* -1.08 vs -1.05; by bytes it would be -0.9 vs -1.05 -> 0 */
    int bytes[] = {6, 6};
    scorer_item_preds(ll, bytes, 2, &pred, &pred_norm);
    ASSERT_EQ_INT(pred_norm, 0);
    double tie[] = {-2.0, -4.0};
    int tl[] = {1, 2};
    scorer_item_preds(tie, tl, 2, &pred, &pred_norm);
    ASSERT_EQ_INT(pred_norm, 0);   /* -2 vs -2: first index */
}

TEST(scorer, stderr_uses_n_minus_one)
{
    unsigned char x[100];
    for (int i = 0; i < 100; i++)
        x[i] = i < 50;
    scorer_stat s = scorer_stat_mean(x, 100);
    ASSERT_NEAR(s.value, 0.5, 1e-15);
    ASSERT_NEAR(s.stderr_, sqrt(0.25 / 99), 1e-12);   /* 0.050252, not 0.05 */
    ASSERT_NEAR(s.stderr_, 0.0502519, 1e-7);
    s = scorer_stat_mean(x, 1);
    ASSERT_TRUE(isnan(s.stderr_));   /* "N/A" */
    ASSERT_NEAR(s.value, 1.0, 0);
    unsigned char y[3] = {1, 0, 0};
    s = scorer_stat_mean(y, 3);
    ASSERT_NEAR(s.stderr_, sqrt((2.0 / 3 * 1.0 / 3 * 3 / 2) / 3), 1e-15);
}

TEST(scorer, group_is_size_weighted_with_pooled_stderr)
{
    unsigned char a[4] = {1, 1, 0, 0}, b[2] = {1, 0};
    scorer_stat l[3] = {scorer_stat_mean(a, 4), scorer_stat_mean(b, 2)};
    ASSERT_NEAR(l[0].stderr_, sqrt(1.0 / 3) / 2, 1e-15);
    ASSERT_NEAR(l[1].stderr_, 0.5, 1e-15);
    scorer_stat g = scorer_stat_group(l, 2);
    ASSERT_EQ_INT(g.n, 6);
    ASSERT_NEAR(g.value, 0.5, 1e-15);
    /* (3 * 1/12 * 4 + 1 * 1/4 * 2) / (6 - 2) / 6 = 0.0625 */
    ASSERT_NEAR(g.stderr_, 0.25, 1e-15);
    unsigned char c[3] = {1, 1, 1};
    l[2] = scorer_stat_mean(c, 3);
    g = scorer_stat_group(l, 3);
    ASSERT_NEAR(g.value, 6.0 / 9, 1e-15);   /* micro, not the mean of 0.5, 0.5, 1 */
    ASSERT_NEAR(scorer_stat_macro(l, 3), 2.0 / 3, 1e-15);
    unsigned char e[1] = {1};
    l[2] = scorer_stat_mean(e, 1);
    g = scorer_stat_group(l, 3);
    ASSERT_TRUE(isnan(g.stderr_));   /* any child "N/A" -> "N/A" */
    ASSERT_NEAR(scorer_stat_macro(l, 3), (0.5 + 0.5 + 1.0) / 3, 1e-15);
}
