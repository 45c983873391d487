/* test_quant.c: quantizers: scale rule at its boundaries, exact clip/underflow
 * counts and amax on crafted tensors, fallbacks, NaN errors, observe mode,
 * micro-batch accumulation, the straight-through helpers. */
#include <math.h>
#include <string.h>

#include "qs/hif8.h"
#include "qs/mem.h"
#include "qs/quant.h"
#include "test.h"

static quant_set *make_set(const char *est, int margin, int saturate)
{
    quant_recipe r;
    quant_recipe_default(&r);
    if (amax_estimator_parse(est, &r.est, NULL))
        return NULL;
    r.margin = margin;
    r.saturate = saturate;
    const char *names[] = {"layers.0.mlp.down_proj.input", "layers.0.mlp.down_proj.weight"};
    quant_set *s;
    qs_diag d = {0};
    return quant_set_create(&s, &r, names, 2, &d) ? NULL : s;
}

TEST(quant, scale_boundary_amax_at_prediction_clips_nothing)
{
    /* awkward values whose reciprocal rounds either way */
    const float ests[] = {1.0f, 3.0f, 0.1f, 0.7f, 1.1f, 3.3e-5f, 12345.678f, 6.02e7f, 1e-30f};
    for (int i = 0; i < 9; i++) {
        for (int margin = 0; margin <= 3; margin++) {
            float s;
            ASSERT_EQ_INT(quant_scale_from_amax(ests[i], margin, &s), 0);
            ASSERT_TRUE(ests[i] * s <= ldexpf(32768.0f, -margin));
            ASSERT_TRUE(nextafterf(ests[i], INFINITY) * s * (float)(1 << margin) >= 32768.0f);
            float x[2] = {ests[i], -ests[i]}, y[2];
            hif8_stats st;
            hif8_fakequant(x, y, 2, s, 0, &st);
            ASSERT_EQ_INT(st.n_clipped, 0);
        }
    }
    float s = 7.0f;
    ASSERT_EQ_INT(quant_scale_from_amax(0.0f, 0, &s), QS_ERANGE);
    ASSERT_EQ_INT(quant_scale_from_amax(NAN, 0, &s), QS_ERANGE);
    ASSERT_EQ_INT(quant_scale_from_amax(INFINITY, 0, &s), QS_ERANGE);
    ASSERT_EQ_INT(quant_scale_from_amax(1e-40f, 0, &s), QS_ERANGE); /* scale overflows */
    ASSERT_NEAR(s, 7.0, 0);
    ASSERT_EQ_INT(quant_scale_from_amax(2.0f, 0, &s), 0);
    ASSERT_NEAR(s, 16384.0, 0);
    ASSERT_EQ_INT(quant_scale_from_amax(2.0f, 2, &s), 0);
    ASSERT_NEAR(s, 4096.0, 0);
}

TEST(quant, crafted_tensor_exact_clip_underflow_amax)
{
    quant_set *s = make_set("max-window:64", 0, 1);
    ASSERT_TRUE(s != NULL);
    quant *q = quant_set_get(s, 0);
    qs_diag d = {0};
    const float warm[3] = {0.5f, -2.0f, 1.0f};
    ASSERT_OK(quant_observe(q, warm, 3, &d), &d);
    const quant_record *rec;
    quant_set_step_end(s, &rec);
    ASSERT_EQ_INT(rec[0].has_pred, 0);      /* empty history: nothing predicted */
    ASSERT_EQ_INT(rec[1].mode, QUANT_MODE_NONE);
    /* prediction 2.0 -> scale 16384 */
    float x[7] = {2.0f, -2.0f, 2.5f, -3.0f, 1e-12f, 0.0f, 1.0f}, y[7];
    ASSERT_OK(quant_quantize(q, x, y, 7, &d), &d);
    ASSERT_NEAR(quant_last_scale(q), 16384.0, 0);
    ASSERT_NEAR(y[0], 2.0, 0);
    ASSERT_NEAR(y[3], -2.0, 0);              /* saturated to -32768 / scale */
    ASSERT_NEAR(y[4], 0.0, 0);
    quant_set_step_end(s, &rec);
    ASSERT_EQ_INT(rec[0].mode, QUANT_MODE_QUANT);
    ASSERT_EQ_INT(rec[0].fallback, 0);
    ASSERT_NEAR(rec[0].pred_amax, 2.0, 0);
    ASSERT_NEAR(rec[0].amax, 3.0, 0);
    ASSERT_EQ_INT(rec[0].n_elems, 7);
    ASSERT_EQ_INT(rec[0].n_clip, 2);         /* 2.5 and -3.0; 2.0 sits on the boundary */
    ASSERT_EQ_INT(rec[0].n_under, 1);        /* 1e-12 (0 itself is not an underflow) */
    ASSERT_TRUE(rec[0].has_sq && rec[0].sq_err > 0.0 && rec[0].sq_sum > 0.0);
    ASSERT_EQ_INT(quant_history(q)->len_steps, 2);
    ASSERT_NEAR(amax_history_get(quant_history(q), 0), 3.0, 0);
    quant_set_destroy(s);
}

TEST(quant, first_step_uses_current_scaling)
{
    quant_set *s = make_set("most-recent", 0, 1);
    ASSERT_TRUE(s != NULL);
    quant *q = quant_set_find(s, "layers.0.mlp.down_proj.weight");
    ASSERT_TRUE(q != NULL);
    float x[3] = {0.25f, -5.0f, 1.0f}, y[3];
    qs_diag d = {0};
    ASSERT_OK(quant_quantize(q, x, y, 3, &d), &d);
    const quant_record *rec;
    quant_set_step_end(s, &rec);
    ASSERT_EQ_INT(rec[1].fallback, 1);
    ASSERT_NEAR(rec[1].pred_amax, 5.0, 0);
    ASSERT_EQ_INT(rec[1].n_clip, 0);
    ASSERT_NEAR(y[1], -5.0, 0);
    quant_set_destroy(s);
}

TEST(quant, zero_history_falls_back_and_zero_tensor_uses_scale_one)
{
    quant_set *s = make_set("max-window:4", 0, 1);
    ASSERT_TRUE(s != NULL);
    quant *q = quant_set_get(s, 0);
    float z[4] = {0}, y[4];
    qs_diag d = {0};
    ASSERT_OK(quant_quantize(q, z, y, 4, &d), &d);
    ASSERT_NEAR(quant_last_scale(q), 1.0, 0);
    const quant_record *rec;
    quant_set_step_end(s, &rec);
    /* the history now holds 0: the estimate is unusable, current scaling again */
    float x[2] = {3.0f, -1.0f};
    ASSERT_OK(quant_quantize(q, x, y, 2, &d), &d);
    quant_set_step_end(s, &rec);
    ASSERT_EQ_INT(rec[0].fallback, 1);
    ASSERT_EQ_INT(rec[0].n_clip, 0);
    ASSERT_NEAR(y[0], 3.0, 0);
    quant_set_destroy(s);
}

TEST(quant, nan_and_inf_are_errors_naming_the_tensor)
{
    quant_set *s = make_set("max-window:64", 0, 1);
    ASSERT_TRUE(s != NULL);
    quant *q = quant_set_get(s, 0);
    float x[3] = {1.0f, NAN, 2.0f}, y[3];
    qs_diag d = {0};
    ASSERT_EQ_INT(quant_quantize(q, x, y, 3, &d), QS_ENAN);
    ASSERT_TRUE(strstr(d.msg, "layers.0.mlp.down_proj.input") != NULL);
    ASSERT_EQ_INT(quant_observe(q, x, 3, &d), QS_ENAN);
    x[1] = -INFINITY;
    ASSERT_EQ_INT(quant_observe(q, x, 3, &d), QS_ENAN);
    ASSERT_TRUE(strstr(d.msg, "Inf") != NULL);
    const quant_record *rec;
    quant_set_step_end(s, &rec);
    ASSERT_EQ_INT(rec[0].mode, QUANT_MODE_NONE);
    ASSERT_EQ_INT(quant_history(q)->len_steps, 0);   /* a bad tensor never enters the history */
    /* with a history, the fused pass finds the NaN */
    float ok[2] = {1.0f, 2.0f};
    ASSERT_OK(quant_observe(q, ok, 2, &d), &d);
    quant_set_step_end(s, &rec);
    x[1] = NAN;
    ASSERT_EQ_INT(quant_quantize(q, x, y, 3, &d), QS_ENAN);
    quant_set_destroy(s);
}

TEST(quant, current_estimator_never_clips)
{
    quant_set *s = make_set("current", 0, 1);
    ASSERT_TRUE(s != NULL);
    quant *q = quant_set_get(s, 0);
    qs_diag d = {0};
    const quant_record *rec;
    for (int step = 0; step < 5; step++) {
        float x[4] = {0.1f, -0.3f * (float)(step + 1) * (float)(step + 1), 7e-3f, 1.0f}, y[4];
        ASSERT_OK(quant_quantize(q, x, y, 4, &d), &d);
        quant_set_step_end(s, &rec);
        ASSERT_EQ_INT(rec[0].n_clip, 0);
        ASSERT_EQ_INT(rec[0].fallback, 0);
        ASSERT_NEAR(rec[0].pred_amax, rec[0].amax, 0);
    }
    quant_set_destroy(s);
}

TEST(quant, observe_counts_would_be_clips_without_quantizing)
{
    quant_set *s = make_set("max-window:64", 0, 1);
    ASSERT_TRUE(s != NULL);
    quant *q = quant_set_get(s, 0);
    qs_diag d = {0};
    const quant_record *rec;
    float a[1] = {1.0f};
    ASSERT_OK(quant_observe(q, a, 1, &d), &d);
    quant_set_step_end(s, &rec);
    float x[4] = {0.5f, 1.5f, -2.0f, 1.0f};
    ASSERT_OK(quant_observe(q, x, 4, &d), &d);
    ASSERT_NEAR(x[1], 1.5, 0);  /* untouched */
    quant_set_step_end(s, &rec);
    ASSERT_EQ_INT(rec[0].mode, QUANT_MODE_OBSERVE);
    ASSERT_EQ_INT(rec[0].has_pred, 1);
    ASSERT_NEAR(rec[0].pred_amax, 1.0, 0);
    ASSERT_NEAR(rec[0].amax, 2.0, 0);
    ASSERT_EQ_INT(rec[0].n_clip, 2);
    ASSERT_EQ_INT(rec[0].has_sq, 0);
    quant_set_destroy(s);
}

TEST(quant, micro_batches_accumulate_into_one_step)
{
    quant_set *s = make_set("most-recent", 0, 1);
    ASSERT_TRUE(s != NULL);
    quant *q = quant_set_get(s, 0);
    qs_diag d = {0};
    const quant_record *rec;
    float h[1] = {1.0f};
    quant_history_restore(q, h, 1);
    float x1[2] = {0.5f, 3.0f}, x2[3] = {2.0f, 0.1f, -1.0f}, y[3];
    ASSERT_OK(quant_quantize(q, x1, y, 2, &d), &d);
    ASSERT_OK(quant_quantize(q, x2, y, 3, &d), &d);
    quant_set_step_end(s, &rec);
    ASSERT_EQ_INT(rec[0].n_elems, 5);
    ASSERT_EQ_INT(rec[0].n_clip, 2);
    ASSERT_NEAR(rec[0].amax, 3.0, 0);
    ASSERT_EQ_INT(quant_history(q)->len_steps, 2);   /* one push per step */
    ASSERT_NEAR(amax_history_get(quant_history(q), 0), 3.0, 0);
    quant_set_destroy(s);
}

TEST(quant, non_saturating_overflows_to_inf)
{
    quant_set *s = make_set("most-recent", 0, 0);
    ASSERT_TRUE(s != NULL);
    quant *q = quant_set_get(s, 0);
    float h[1] = {2.0f};
    quant_history_restore(q, h, 1);                  /* scale 16384 */
    float x[3] = {3.0f, 2.4f, -2.6f}, y[3];
    qs_diag d = {0};
    ASSERT_OK(quant_quantize(q, x, y, 3, &d), &d);
    ASSERT_TRUE(isinf(y[0]) && y[0] > 0);            /* 49152 >= 40960 */
    ASSERT_NEAR(y[1], 2.0, 0);                       /* 39322 < 40960: rounds to 32768 */
    ASSERT_TRUE(isinf(y[2]) && y[2] < 0);
    ASSERT_EQ_INT(quant_quantize(q, x, x, 3, &d), QS_EINVAL);
    quant_set_destroy(s);
}

TEST(quant, masked_ste_zeroes_exactly_the_clipped_gradients)
{
    float x[5] = {1.0f, 2.0f, 2.0001f, -3.0f, -1.0f}, g[5] = {1, 1, 1, 1, 1};
    quant_ste_backward(QUANT_STE_PASS, x, 16384.0f, g, 5);
    for (int i = 0; i < 5; i++)
        ASSERT_NEAR(g[i], 1.0, 0);
    quant_ste_backward(QUANT_STE_MASKED, x, 16384.0f, g, 5);
    ASSERT_NEAR(g[0] + g[1] + g[4], 3.0, 0);
    ASSERT_NEAR(g[2] + g[3], 0.0, 0);
    int m;
    ASSERT_OK(quant_ste_parse("masked", &m, NULL), NULL);
    ASSERT_EQ_INT(m, QUANT_STE_MASKED);
    qs_diag d = {0};
    ASSERT_EQ_INT(quant_ste_parse("mask", &m, &d), QS_EINVAL);
}

TEST(quant, set_rejects_bad_recipes_and_names)
{
    quant_recipe r;
    quant_recipe_default(&r);
    const char *dup[] = {"a", "b", "a"};
    quant_set *s;
    qs_diag d = {0};
    ASSERT_EQ_INT(quant_set_create(&s, &r, dup, 3, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "'a'") != NULL);
    const char *one[] = {"a"};
    r.history_steps = 16;                              /* max-window:64 needs >= 64 */
    ASSERT_EQ_INT(quant_set_create(&s, &r, one, 1, &d), QS_EINVAL);
    quant_recipe_default(&r);
    r.margin = -1;
    ASSERT_EQ_INT(quant_set_create(&s, &r, one, 1, &d), QS_EINVAL);
    quant_recipe_default(&r);
    ASSERT_OK(quant_set_create(&s, &r, one, 1, &d), &d);
    ASSERT_TRUE(quant_set_find(s, "b") == NULL);
    quant_set_destroy(s);
}

TEST(quant, qsnr_sample_keeps_outputs_and_counts_exact)
{
    enum { N = 40000 };
    static float x[N], y_full[N], y_samp[N];
    unsigned lcg = 3u;
    for (int i = 0; i < N; i++) {
        lcg = lcg * 1103515245u + 12345u;
        x[i] = ((float)((lcg >> 8) & 0xffff) / 32768.0f - 1.0f) * ((i % 97) ? 1.0f : 9.0f);
        if (i % 1001 == 0)
            x[i] = 1e-12f;                                   /* underflows */
    }
    const char *names[1] = {"t"};
    quant_recipe r;
    quant_recipe_default(&r);
    ASSERT_OK(amax_estimator_parse("most-recent", &r.est, NULL), NULL);
    quant_set *full, *samp;
    qs_diag d = {0};
    r.qsnr_sample_div = 1;
    ASSERT_OK(quant_set_create(&full, &r, names, 1, &d), &d);
    r.qsnr_sample_div = QUANT_QSNR_SAMPLE_DIV_DEFAULT;
    ASSERT_OK(quant_set_create(&samp, &r, names, 1, &d), &d);
    float h[1] = {5.0f};                                     /* the 9x elements clip */
    quant_history_restore(quant_set_get(full, 0), h, 1);
    quant_history_restore(quant_set_get(samp, 0), h, 1);
    const quant_record *rf, *rs;
    double qsnr_full = 0.0, qsnr_samp[3];
    for (int call = 0; call < 3; call++) {
        ASSERT_OK(quant_quantize(quant_set_get(full, 0), x, y_full, N, &d), &d);
        ASSERT_OK(quant_quantize(quant_set_get(samp, 0), x, y_samp, N, &d), &d);
        ASSERT_TRUE(memcmp(y_full, y_samp, sizeof y_full) == 0);
        quant_set_step_end(full, &rf);
        quant_set_step_end(samp, &rs);
        ASSERT_EQ_INT(rf[0].n_clip, rs[0].n_clip);
        ASSERT_EQ_INT(rf[0].n_under, rs[0].n_under);
        ASSERT_TRUE(rf[0].n_clip > 0 && rf[0].n_under >= 40);
        ASSERT_NEAR(rf[0].amax, rs[0].amax, 0);
        qsnr_full = 10.0 * log10(rf[0].sq_sum / rf[0].sq_err);
        qsnr_samp[call] = 10.0 * log10(rs[0].sq_sum / rs[0].sq_err);
        ASSERT_NEAR(qsnr_samp[call], qsnr_full, 3.0);        /* a 1024-element sample */
        quant_history_restore(quant_set_get(full, 0), h, 1);
        quant_history_restore(quant_set_get(samp, 0), h, 1);
    }
    ASSERT_TRUE(qsnr_samp[0] != qsnr_samp[1]);               /* the sample moves */
    quant_set_destroy(full);
    quant_set_destroy(samp);
}

/* Steps of three "micro-batches" over the same weight: quantize x3 on one set,
 * quantize + repeat x2 on another; outputs and every step record are equal. */
static int repeat_matches(const char *est, int saturate)
{
    const size_t n = 300000 + 3;   /* > 256 x 1024: QSNR on a moving sample */
    float *x = qs_malloc(n * 4), *y1 = qs_malloc(n * 4), *y2 = qs_malloc(n * 4);
    quant_set *a = make_set(est, 0, saturate), *b = make_set(est, 0, saturate);
    int ok = x && y1 && y2 && a && b;
    unsigned long s = 99;
    for (size_t i = 0; ok && i < n; i++) {
        s = s * 6364136223846793005ul + 1442695040888963407ul;
        x[i] = ((float)((s >> 40) & 0xffff) - 32768.0f) * 1e-4f;
    }
    qs_diag d = {0};
    for (int step = 0; ok && step < 4; step++) {
        if (step == 2)
            x[7] = 9.0f;   /* amax jumps above the history: clips at step 2 */
        for (int mb = 0; ok && mb < 3; mb++) {
            ok = !quant_quantize(quant_set_get(a, 1), x, y1, n, &d);
            ok = ok && !(mb ? quant_quantize_repeat(quant_set_get(b, 1), x, y2, n, &d)
                            : quant_quantize(quant_set_get(b, 1), x, y2, n, &d));
            ok = ok && !memcmp(y1, y2, n * 4);
        }
        const quant_record *ra, *rb;
        quant_set_step_end(a, &ra);
        quant_set_step_end(b, &rb);
        const quant_record *p = &ra[1], *q = &rb[1];
        ok = ok && p->mode == q->mode && p->fallback == q->fallback && p->amax == q->amax &&
             p->pred_amax == q->pred_amax && p->scale == q->scale && p->n_elems == q->n_elems &&
             p->n_clip == q->n_clip && p->n_under == q->n_under && p->has_sq == q->has_sq &&
             p->sq_err == q->sq_err && p->sq_sum == q->sq_sum && p->n_elems == 3 * n;
        ok = ok && (step != 2 || p->n_clip > 0 || !strcmp(est, "current"));
    }
    quant_set_destroy(a);
    quant_set_destroy(b);
    qs_free(x);
    qs_free(y1);
    qs_free(y2);
    return ok;
}

TEST(quant, repeat_on_the_same_weight_records_what_quantize_records)
{
    ASSERT_TRUE(repeat_matches("max-window:4", 1));
    ASSERT_TRUE(repeat_matches("max-window:4", 0));
    ASSERT_TRUE(repeat_matches("current", 1));
}
