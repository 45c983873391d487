/* test_amax.c: amax history ring, estimator names, and the published failure
 * analysis on synthetic amax series (most-recent: 1-step delay saturation;
 * exp-smoothing: lags under non-monotone dynamics; max-window: covers spikes
 * inside its window; current: never saturates). */
#include "qs/amax.h"
#include "qs/quant.h"
#include "test.h"

/* Run estimator e over series a[0..n) the way a quantizer does (estimate from the
 * past, current scaling on an empty history, then push); returns the number of
 * saturated steps (amax * scale > 32768) and writes them to sat[] if given. */
static int simulate(const char *est_name, const float *a, int n, int margin, int *sat)
{
    amax_estimator e;
    qs_diag d = {0};
    if (amax_estimator_parse(est_name, &e, &d))
        return -1;
    amax_history h;
    if (amax_history_init(&h, 1024))
        return -1;
    int n_sat = 0;
    for (int t = 0; t < n; t++) {
        float pred, scale;
        if (!amax_estimate(&e, &h, a[t], &pred))
            pred = a[t];
        if (quant_scale_from_amax(pred, margin, &scale))
            return -1;
        int s = a[t] * scale > 32768.0f;
        if (sat)
            sat[t] = s;
        n_sat += s;
        amax_history_push(&h, a[t]);
    }
    amax_history_free(&h);
    return n_sat;
}

TEST(amax, history_ring_wraps_and_keeps_newest)
{
    amax_history h;
    ASSERT_EQ_INT(amax_history_init(&h, 4), 0);
    for (int i = 1; i <= 6; i++)
        amax_history_push(&h, (float)i);
    ASSERT_EQ_INT(h.len_steps, 4);
    ASSERT_NEAR(amax_history_get(&h, 0), 6.0, 0);
    ASSERT_NEAR(amax_history_get(&h, 3), 3.0, 0);
    amax_history_free(&h);
    amax_history_free(&h); /* safe twice: zeroed */
}

TEST(amax, estimator_names_round_trip)
{
    const char *names[] = {"most-recent", "exp-smoothing:0.9", "max-window:64", "max-window:16",
                           "current"};
    for (int i = 0; i < 5; i++) {
        amax_estimator e;
        qs_diag d = {0};
        ASSERT_OK(amax_estimator_parse(names[i], &e, &d), &d);
        char buf[AMAX_NAME_MAX];
        amax_estimator_format(&e, buf, sizeof buf);
        ASSERT_EQ_STR(buf, names[i]);
    }
    amax_estimator e;
    qs_diag d = {0};
    ASSERT_OK(amax_estimator_parse("max-window", &e, &d), &d);
    ASSERT_EQ_INT(e.window_steps, 64);
}

TEST(amax, bad_estimator_names_rejected)
{
    const char *bad[] = {"max", "max-window:0", "max-window:x", "exp-smoothing", "exp-smoothing:0",
                         "exp-smoothing:1.5", "most-recent:3", "", "current:"};
    for (int i = 0; i < 9; i++) {
        amax_estimator e;
        qs_diag d = {0};
        ASSERT_EQ_INT(amax_estimator_parse(bad[i], &e, &d), QS_EINVAL);
        ASSERT_TRUE(d.msg[0] != 0);
    }
    amax_estimator list[8];
    int n;
    qs_diag d = {0};
    ASSERT_OK(amax_estimator_parse_list("most-recent,max-window:16,current", list, 8, &n, &d), &d);
    ASSERT_EQ_INT(n, 3);
    ASSERT_EQ_INT(list[1].window_steps, 16);
    ASSERT_EQ_INT(amax_estimator_parse_list("most-recent,,current", list, 8, &n, &d), QS_EINVAL);
    ASSERT_EQ_INT(amax_estimator_parse_list("a,b,c", list, 2, &n, &d), QS_EINVAL);
}

TEST(amax, empty_history_gives_no_estimate)
{
    amax_history h;
    ASSERT_EQ_INT(amax_history_init(&h, 8), 0);
    const char *names[] = {"most-recent", "exp-smoothing:0.5", "max-window:4"};
    for (int i = 0; i < 3; i++) {
        amax_estimator e;
        float v = -1;
        ASSERT_OK(amax_estimator_parse(names[i], &e, NULL), NULL);
        ASSERT_EQ_INT(amax_estimate(&e, &h, 3.0f, &v), 0);
    }
    amax_estimator c;
    float v;
    ASSERT_OK(amax_estimator_parse("current", &c, NULL), NULL);
    ASSERT_EQ_INT(amax_estimate(&c, &h, 3.0f, &v), 1);
    ASSERT_NEAR(v, 3.0, 0);
    amax_history_free(&h);
}

TEST(amax, exp_smoothing_hand_computed)
{
    amax_history h;
    ASSERT_EQ_INT(amax_history_init(&h, 8), 0);
    amax_history_push(&h, 1.0f);
    amax_history_push(&h, 3.0f);
    amax_history_push(&h, 2.0f);
    amax_estimator e;
    ASSERT_OK(amax_estimator_parse("exp-smoothing:0.5", &e, NULL), NULL);
    float v;
    ASSERT_EQ_INT(amax_estimate(&e, &h, 0.0f, &v), 1);
    /* s=1; s=0.5*3+0.5*1=2; s=0.5*2+0.5*2=2 */
    ASSERT_NEAR(v, 2.0, 1e-6);
    ASSERT_OK(amax_estimator_parse("exp-smoothing:1", &e, NULL), NULL);
    ASSERT_EQ_INT(amax_estimate(&e, &h, 0.0f, &v), 1);
    ASSERT_NEAR(v, 2.0, 0); /* alpha 1 == most-recent */
    amax_history_free(&h);
}

TEST(amax, max_window_only_sees_last_n)
{
    amax_history h;
    ASSERT_EQ_INT(amax_history_init(&h, 16), 0);
    amax_history_push(&h, 9.0f);
    for (int i = 0; i < 3; i++)
        amax_history_push(&h, 1.0f);
    amax_estimator e;
    float v;
    ASSERT_OK(amax_estimator_parse("max-window:3", &e, NULL), NULL);
    ASSERT_EQ_INT(amax_estimate(&e, &h, 0.0f, &v), 1);
    ASSERT_NEAR(v, 1.0, 0);
    ASSERT_OK(amax_estimator_parse("max-window:4", &e, NULL), NULL);
    ASSERT_EQ_INT(amax_estimate(&e, &h, 0.0f, &v), 1);
    ASSERT_NEAR(v, 9.0, 0);
    ASSERT_OK(amax_estimator_parse("max-window:64", &e, NULL), NULL); /* longer than history */
    ASSERT_EQ_INT(amax_estimate(&e, &h, 0.0f, &v), 1);
    ASSERT_NEAR(v, 9.0, 0);
    amax_history_free(&h);
}

/* base 1.0 with a one-step spike of 4.0 every `period` steps from step 100 */
static void spike_series(float *a, int n, int period)
{
    for (int t = 0; t < n; t++)
        a[t] = (t >= 100 && (t - 100) % period == 0) ? 4.0f : 1.0f;
}

TEST(amax, one_step_spike_saturates_most_recent_every_time)
{
    float a[300];
    int sat[300];
    spike_series(a, 300, 20);                /* spikes at 100, 120, ..., 280: 10 spikes */
    ASSERT_EQ_INT(simulate("most-recent", a, 300, 0, sat), 10);
    ASSERT_TRUE(sat[100] && sat[120] && !sat[101]);
}

TEST(amax, max_window_covers_spike_inside_window)
{
    float a[300];
    int sat[300];
    spike_series(a, 300, 20);
    /* only the first spike (nothing in the window yet) saturates */
    ASSERT_EQ_INT(simulate("max-window:64", a, 300, 0, sat), 1);
    ASSERT_TRUE(sat[100]);
    spike_series(a, 300, 70);                /* spikes at 100, 170, 240: outside a 64 window */
    ASSERT_EQ_INT(simulate("max-window:64", a, 300, 0, sat), 3);
    ASSERT_EQ_INT(simulate("max-window:128", a, 300, 0, sat), 1);
}

TEST(amax, exp_smoothing_lags_non_monotone_oscillation)
{
    static const float pattern[10] = {1.0f, 1.3f, 1.5f, 1.2f, 0.9f, 0.7f, 0.8f, 1.1f, 1.4f, 1.0f};
    float a[200];
    for (int t = 0; t < 200; t++)
        a[t] = pattern[t % 10];
    int sat[200];
    int n_ema = simulate("exp-smoothing:0.1", a, 200, 0, sat);
    /* the smoothed value sits near the mean (~1.09): every step above it clips */
    ASSERT_TRUE(n_ema >= 5 * 19);
    ASSERT_TRUE(sat[192] && sat[198]);       /* the 1.5 and 1.4 peaks, late in the run */
    ASSERT_TRUE(simulate("most-recent", a, 200, 0, NULL) >= 4 * 19); /* every rise */
    /* max-window: only steps of the first period that exceed everything before */
    ASSERT_EQ_INT(simulate("max-window:64", a, 200, 0, NULL), 2);
    ASSERT_EQ_INT(simulate("current", a, 200, 0, NULL), 0);
}

TEST(amax, steady_growth_saturates_delayed_estimators_unless_margin)
{
    float a[100];
    for (int t = 0; t < 100; t++)
        a[t] = 1.0f + 0.01f * (float)t;
    ASSERT_EQ_INT(simulate("most-recent", a, 100, 0, NULL), 99);
    ASSERT_EQ_INT(simulate("max-window:64", a, 100, 0, NULL), 99);
    ASSERT_EQ_INT(simulate("exp-smoothing:0.5", a, 100, 0, NULL), 99);
    /* one power of two of headroom absorbs a 1%/step growth */
    ASSERT_EQ_INT(simulate("max-window:64", a, 100, 1, NULL), 0);
    ASSERT_EQ_INT(simulate("current", a, 100, 0, NULL), 0);
}

TEST(amax, current_never_saturates_on_any_series)
{
    float a[300];
    spike_series(a, 300, 7);
    ASSERT_EQ_INT(simulate("current", a, 300, 0, NULL), 0);
    unsigned lcg = 12345u;
    for (int t = 0; t < 300; t++) {                       /* erratic: LCG values in (0, 1] */
        lcg = lcg * 1103515245u + 12345u;
        a[t] = (float)((lcg >> 8) % 1000 + 1) * 1e-3f;
    }
    ASSERT_EQ_INT(simulate("current", a, 300, 0, NULL), 0);
    ASSERT_TRUE(simulate("most-recent", a, 300, 0, NULL) > 50);
}
