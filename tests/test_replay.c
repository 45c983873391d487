/* test_replay.c: estimator replay and the satstat summary on crafted logs with
 * hand-computed answers, and replay of a run's own estimator reproducing the
 * saturation its quantizers logged. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/qlog.h"
#include "qs/replay.h"
#include "qs/satstats.h"
#include "qs/satsummary.h"
#include "test.h"

/* Two quantizers, history 8, margin 0; steps 0-1 warmup, 2-7 qat.
 *   a: amax 1 1 1 4 1 1 4 1      b: amax 2 2 2 2 3 2 2 2              */
static const char *crafted_log(void)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/crafted.jsonl", test_tmp_dir());
    static const float a[8] = {1, 1, 1, 4, 1, 1, 4, 1}, b[8] = {2, 2, 2, 2, 3, 2, 2, 2};
    /* logged clip rates (as if most-recent had run) and predictions, for satstat */
    static const float ca[8] = {0, 0, 0, 0.5f, 0, 0, 0.25f, 0}, cb[8] = {0, 0, 0, 0, 1e-3f, 0, 0, 0};
    static const float pa[8] = {1, 1, 1, 1, 4, 1, 1, 4}, pb[8] = {2, 2, 2, 2, 2, 3, 2, 2};
    char text[8192];
    int len = snprintf(text, sizeof text,
                       "{\"v\":1,\"type\":\"header\",\"run\":\"crafted\",\"recipe\":{\"estimator\":"
                       "\"most-recent\",\"margin\":0,\"history\":8,\"saturate\":true},"
                       "\"quantizers\":[\"a\",\"b\"]}\n");
    for (int t = 0; t < 8; t++)
        len += snprintf(text + len, sizeof text - (size_t)len,
                        "{\"v\":1,\"type\":\"step\",\"step\":%d,\"phase\":\"%s\",\"q\":["
                        "{\"name\":\"a\",\"mode\":\"quant\",\"pred_amax\":%g,\"amax\":%g,\"n\":100,"
                        "\"clip\":%d,\"clip_rate\":%g,\"qsnr_db\":30},"
                        "{\"name\":\"b\",\"mode\":\"quant\",\"pred_amax\":%g,\"amax\":%g,\"n\":1000,"
                        "\"clip\":%d,\"clip_rate\":%g,\"qsnr_db\":null}]}\n",
                        t, t < 2 ? "warmup" : "qat", (double)pa[t], (double)a[t],
                        (int)(ca[t] * 100), (double)ca[t], (double)pb[t], (double)b[t],
                        (int)(cb[t] * 1000), (double)cb[t]);
    return fileio_write_atomic(path, text, (size_t)len, NULL) ? NULL : path;
}

static int replay_named(const qlog_run *run, const char *name, int select, replay_result *r)
{
    amax_estimator e;
    qs_diag d = {0};
    if (amax_estimator_parse(name, &e, &d))
        return -1;
    return replay_estimator(run, &e, -1, -1, select, r, &d);
}

TEST(replay, crafted_log_most_recent_hand_computed)
{
    const char *path = crafted_log();
    ASSERT_TRUE(path != NULL);
    qlog_run run;
    qs_diag d = {0};
    ASSERT_OK(qlog_read(path, &run, &d), &d);
    replay_result r;
    ASSERT_EQ_INT(replay_named(&run, "most-recent", QLOG_SELECT_QAT, &r), 0);
    ASSERT_EQ_INT(r.steps_scored, 6);
    ASSERT_EQ_INT(r.steps_saturated, 3);          /* steps 3, 4, 6 */
    ASSERT_EQ_INT(r.tensors_saturated, 2);
    ASSERT_EQ_INT(r.tensor_steps, 12);
    ASSERT_EQ_INT(r.tensor_steps_saturated, 3);
    ASSERT_EQ_INT(r.first_saturated_step, 3);
    ASSERT_NEAR(r.worst_true_over_pred, 4.0, 0);
    ASSERT_EQ_INT(r.worst_q, 0);
    ASSERT_EQ_INT(r.worst_step, 3);
    /* no-clip pairs: a 0,2,0,2  b 0,0,log2(1.5),0,0 */
    ASSERT_NEAR(r.mean_headroom_log2, (4.0 + log2(1.5)) / 9.0, 1e-12);
    qlog_run_free(&run);
}

TEST(replay, crafted_log_max_window_and_current_hand_computed)
{
    const char *path = crafted_log();
    ASSERT_TRUE(path != NULL);
    qlog_run run;
    qs_diag d = {0};
    ASSERT_OK(qlog_read(path, &run, &d), &d);
    replay_result r;
    ASSERT_EQ_INT(replay_named(&run, "max-window:4", QLOG_SELECT_QAT, &r), 0);
    ASSERT_EQ_INT(r.steps_saturated, 2);          /* 3 (a) and 4 (b); a's step-6 spike is covered */
    ASSERT_EQ_INT(r.tensor_steps_saturated, 2);
    ASSERT_NEAR(r.mean_headroom_log2, (6.0 + 3.0 * log2(1.5)) / 10.0, 1e-12);
    ASSERT_EQ_INT(replay_named(&run, "max-window:2", QLOG_SELECT_QAT, &r), 0);
    ASSERT_EQ_INT(r.steps_saturated, 3);          /* the step-6 spike is outside a 2-step window */
    ASSERT_EQ_INT(replay_named(&run, "exp-smoothing:0.5", QLOG_SELECT_QAT, &r), 0);
    ASSERT_EQ_INT(r.steps_saturated, 3);
    ASSERT_EQ_INT(replay_named(&run, "current", QLOG_SELECT_QAT, &r), 0);
    ASSERT_EQ_INT(r.steps_saturated, 0);
    ASSERT_EQ_INT(r.tensors_saturated, 0);
    ASSERT_NEAR(r.worst_true_over_pred, 1.0, 0);
    ASSERT_NEAR(r.mean_headroom_log2, 0.0, 0);
    /* scoring every step: the warmup steps add 2 scored steps, no saturation */
    ASSERT_EQ_INT(replay_named(&run, "most-recent", QLOG_SELECT_ALL, &r), 0);
    ASSERT_EQ_INT(r.steps_scored, 8);
    ASSERT_EQ_INT(r.steps_saturated, 3);
    /* margin 2 absorbs a 4x spike */
    amax_estimator e;
    ASSERT_OK(amax_estimator_parse("most-recent", &e, NULL), NULL);
    ASSERT_OK(replay_estimator(&run, &e, 2, -1, QLOG_SELECT_QAT, &r, &d), &d);
    ASSERT_EQ_INT(r.steps_saturated, 0);
    qlog_run_free(&run);
}

TEST(replay, satsummary_crafted_log_hand_computed)
{
    const char *path = crafted_log();
    ASSERT_TRUE(path != NULL);
    qlog_run run;
    qs_diag d = {0};
    ASSERT_OK(qlog_read(path, &run, &d), &d);
    satsummary s;
    ASSERT_OK(satsummary_compute(&run, QLOG_SELECT_QAT, 1e-4, &s, &d), &d);
    ASSERT_EQ_INT(s.steps_scored, 6);
    ASSERT_EQ_INT(s.steps_with_sat, 3);
    ASSERT_EQ_INT(s.steps_with_alarm, 3);
    ASSERT_EQ_INT(s.tensors_with_sat, 2);
    ASSERT_EQ_INT(s.first_sat_step, 3);
    ASSERT_EQ_INT(s.t[0].sat_steps, 2);
    ASSERT_NEAR(s.t[0].max_clip_rate, 0.5, 1e-7);
    ASSERT_EQ_INT(s.t[0].max_clip_step, 3);
    ASSERT_NEAR(s.t[0].mean_clip_rate, 0.75 / 6.0, 1e-7);
    ASSERT_NEAR(s.t[0].worst_pred_over_true, 0.25, 0);
    ASSERT_EQ_INT(s.t[0].worst_step, 3);
    ASSERT_NEAR(s.t[0].mean_qsnr_db, 30.0, 0);
    ASSERT_NEAR(s.t[1].worst_pred_over_true, 2.0 / 3.0, 1e-12);
    ASSERT_TRUE(isnan(s.t[1].mean_qsnr_db));
    ASSERT_EQ_INT(s.rank[0], 0);
    ASSERT_EQ_INT(s.rank[1], 1);
    satsummary_free(&s);
    ASSERT_OK(satsummary_compute(&run, QLOG_SELECT_QAT, 0.3, &s, &d), &d);
    ASSERT_EQ_INT(s.steps_with_alarm, 1);
    satsummary_free(&s);
    qlog_run_free(&run);
}

TEST(replay, own_estimator_reproduces_logged_saturation)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/replay_own", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, NULL), NULL);
    const char *names[2] = {"x.input", "x.weight"};
    quant_recipe r;
    quant_recipe_default(&r);
    ASSERT_OK(amax_estimator_parse("max-window:8", &r.est, NULL), NULL);
    r.history_steps = 16;
    quant_set *set;
    qs_diag d = {0};
    ASSERT_OK(quant_set_create(&set, &r, names, 2, &d), &d);
    satstats_config c;
    satstats_config_default(&c);
    c.run_dir = dir;
    satstats *s;
    ASSERT_OK(satstats_create(&s, &c, set, &d), &d);
    unsigned lcg = 7u;
    float x[256], y[256];
    for (int t = 0; t < 60; t++) {
        for (int q = 0; q < 2; q++) {
            for (int i = 0; i < 256; i++) {
                lcg = lcg * 1103515245u + 12345u;
                x[i] = ((float)((lcg >> 9) & 0xffff) / 32768.0f - 1.0f) * (1.0f + 0.02f * (float)t);
            }
            if (t % 11 == 5)
                x[17] *= 6.0f;                      /* occasional outlier */
            int rc = t < 10 ? quant_observe(quant_set_get(set, q), x, 256, &d)
                            : quant_quantize(quant_set_get(set, q), x, y, 256, &d);
            ASSERT_OK(rc, &d);
        }
        ASSERT_TRUE(satstats_step_end(s, t, t < 10 ? QLOG_PHASE_WARMUP : QLOG_PHASE_QAT, &d) >= 0);
    }
    ASSERT_OK(satstats_close(s, &d), &d);
    quant_set_destroy(set);
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    qlog_run run;
    ASSERT_OK(qlog_read(path, &run, &d), &d);
    satsummary sum;
    ASSERT_OK(satsummary_compute(&run, QLOG_SELECT_QAT, 1e-4, &sum, &d), &d);
    replay_result rr;
    ASSERT_EQ_INT(replay_named(&run, "max-window:8", QLOG_SELECT_QAT, &rr), 0);
    ASSERT_TRUE(sum.steps_with_sat > 0);
    ASSERT_EQ_INT(rr.steps_saturated, sum.steps_with_sat);
    ASSERT_EQ_INT(rr.tensors_saturated, sum.tensors_with_sat);
    ASSERT_EQ_INT(rr.first_saturated_step, sum.first_sat_step);
    /* observe steps: would-be clips are logged too, and replay agrees */
    satsummary_free(&sum);
    ASSERT_OK(satsummary_compute(&run, QLOG_SELECT_WARMUP, 1e-4, &sum, &d), &d);
    ASSERT_EQ_INT(replay_named(&run, "max-window:8", QLOG_SELECT_WARMUP, &rr), 0);
    ASSERT_EQ_INT(rr.steps_saturated, sum.steps_with_sat);
    satsummary_free(&sum);
    ASSERT_EQ_INT(replay_named(&run, "current", QLOG_SELECT_QAT, &rr), 0);
    ASSERT_EQ_INT(rr.steps_saturated, 0);
    qlog_run_free(&run);
}
