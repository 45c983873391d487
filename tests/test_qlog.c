/* test_qlog.c: detector rows -> quant.jsonl.zst -> reader round trip, alarms
 * (warning line, events.jsonl, stop flag, K consecutive steps), log interval,
 * truncation mid-frame, resume, malformed logs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/qlog.h"
#include "qs/satstats.h"
#include "qs/zlog.h"
#include "test.h"

#define NQ 3
static const char *qnames[NQ] = {"layers.1.mlp.up_proj.input", "layers.1.mlp.up_proj.weight",
                                 "layers.1.mlp.down_proj.input"};

static void make_dir(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", test_tmp_dir(), name);
    fileio_mkdir_p(buf, NULL);
}

/* tensor for quantizer q at step t: ramp in [-1, 1] times amax(q, t) */
static float step_amax(int q, int t, int spike_step)
{
    return (q == 2 && t == spike_step) ? 3.0f : 1.0f + 0.125f * (float)q;
}

static void fill(float *x, int n, float amax)
{
    for (int i = 0; i < n; i++)
        x[i] = amax * ((float)(2 * i - (n - 1)) / (float)(n - 1));
}

static int count_lines(const char *path, const char *needle)
{
    char *data;
    size_t bytes;
    if (fileio_read_all(path, &data, &bytes, NULL))
        return -1;
    int n = 0;
    for (char *p = data; (p = strstr(p, needle)) != NULL; p++)
        n++;
    qs_free(data);
    return n;
}

static void warn_cb(void *ctx, const char *line)
{
    (void)line;
    (*(int *)ctx)++;
}

/* warmup steps [0, warm) observe, then quantize until n_steps; quantizer 2 spikes at spike_step.
 * Keeps a copy of every step's rows in rows_out (n_steps * NQ) if given. */
static int run_steps(const char *dir, int n_steps, int warm, int spike_step, int interval,
                     int alarm_steps, qlog_row *rows_out, int *n_warn, int *stop)
{
    quant_recipe r;
    quant_recipe_default(&r);
    quant_set *set;
    qs_diag d = {0};
    if (quant_set_create(&set, &r, qnames, NQ, &d))
        return -1;
    satstats_config c;
    satstats_config_default(&c);
    c.run_dir = dir;
    c.run_name = "test \"run\"";
    c.log_interval_steps = interval;
    c.alarm_steps = alarm_steps;
    int cb_count = 0;
    c.on_warning = warn_cb;
    c.warning_ctx = &cb_count;
    satstats *s;
    if (satstats_create(&s, &c, set, &d)) {
        quant_set_destroy(set);
        return -1;
    }
    float x[64], y[64];
    int total_warn = 0, rc = 0;
    for (int t = 0; t < n_steps && !rc; t++) {
        for (int q = 0; q < NQ && !rc; q++) {
            fill(x, 64, step_amax(q, t, spike_step));
            rc = t < warm ? quant_observe(quant_set_get(set, q), x, 64, &d)
                          : quant_quantize(quant_set_get(set, q), x, y, 64, &d);
        }
        int a = rc ? rc : satstats_step_end(s, t, t < warm ? QLOG_PHASE_WARMUP : QLOG_PHASE_QAT, &d);
        if (a < 0)
            rc = a;
        else
            total_warn += satstats_warning_count(s);
        if (rows_out && !rc)
            memcpy(rows_out + (size_t)t * NQ, satstats_rows(s), NQ * sizeof(qlog_row));
    }
    if (stop)
        *stop = satstats_stop_requested(s);
    if (n_warn)
        *n_warn = total_warn == cb_count ? total_warn : -1;
    if (satstats_close(s, &d))
        rc = -1;
    quant_set_destroy(set);
    return rc;
}

static int same_float(float a, float b) { return (isnan(a) && isnan(b)) || a == b; }

TEST(qlog, round_trip_same_numbers)
{
    char dir[512], path[600];
    make_dir(dir, sizeof dir, "qlog_rt");
    qlog_row rows[8 * NQ];
    int n_warn, stop;
    ASSERT_EQ_INT(run_steps(dir, 8, 3, 6, 1, 1, rows, &n_warn, &stop), 0);
    ASSERT_EQ_INT(n_warn, 1);
    ASSERT_EQ_INT(stop, 1);
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    qlog_run run;
    qs_diag d = {0};
    ASSERT_OK(qlog_read(path, &run, &d), &d);
    ASSERT_EQ_INT(run.n_steps, 8);
    ASSERT_EQ_INT(run.n_quant, NQ);
    ASSERT_EQ_STR(run.run, "test \"run\"");
    ASSERT_EQ_STR(run.recipe_est, "max-window:64");
    ASSERT_EQ_INT(run.history_steps, 1024);
    ASSERT_EQ_STR(run.names[2], qnames[2]);
    for (int t = 0; t < 8; t++) {
        ASSERT_EQ_INT(run.steps[t], t);
        ASSERT_EQ_INT(run.phases[t], t < 3 ? QLOG_PHASE_WARMUP : QLOG_PHASE_QAT);
        for (int q = 0; q < NQ; q++) {
            const qlog_row *a = &rows[t * NQ + q], *b = qlog_run_row(&run, t, q);
            ASSERT_EQ_INT(a->mode, b->mode);
            ASSERT_TRUE(same_float(a->pred_amax, b->pred_amax));
            ASSERT_TRUE(same_float(a->amax, b->amax));
            ASSERT_TRUE(same_float(a->scale, b->scale));
            ASSERT_TRUE(same_float(a->clip_rate, b->clip_rate));
            ASSERT_TRUE(same_float(a->under_rate, b->under_rate));
            ASSERT_TRUE(same_float(a->qsnr_db, b->qsnr_db));
            ASSERT_EQ_INT(a->n, b->n);
            ASSERT_EQ_INT(a->clip, b->clip);
            ASSERT_EQ_INT(a->under, b->under);
        }
    }
    /* step 0: observe with an empty history: nothing predicted, no QSNR */
    ASSERT_TRUE(isnan(qlog_run_row(&run, 0, 0)->pred_amax));
    ASSERT_TRUE(isnan(qlog_run_row(&run, 0, 0)->qsnr_db));
    /* the spike at step 6: 64-element ramp to 3.0 with predicted 1.25 */
    const qlog_row *sp = qlog_run_row(&run, 6, 2);
    ASSERT_NEAR(sp->pred_amax, 1.25, 0);
    ASSERT_NEAR(sp->amax, 3.0, 0);
    ASSERT_TRUE(sp->clip > 0 && sp->clip < 64);
    ASSERT_TRUE(qlog_run_row(&run, 5, 2)->qsnr_db > 10.0f);
    ASSERT_EQ_STR(run.est_names[qlog_run_row(&run, 5, 2)->est_idx], "max-window:64");
    qlog_run_free(&run);
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    ASSERT_EQ_INT(count_lines(path, "\"type\":\"saturation\""), 1);
    ASSERT_EQ_INT(count_lines(path, "\"step\":6,"), 1);
}

TEST(qlog, warning_line_names_tensor_step_rate_and_amax)
{
    quant_recipe r;
    quant_recipe_default(&r);
    ASSERT_OK(amax_estimator_parse("most-recent", &r.est, NULL), NULL);
    quant_set *set;
    qs_diag d = {0};
    ASSERT_OK(quant_set_create(&set, &r, qnames, 1, &d), &d);
    satstats_config c;
    satstats_config_default(&c);
    satstats *s;
    ASSERT_OK(satstats_create(&s, &c, set, &d), &d);
    float x[64], y[64];
    fill(x, 64, 1.0f);
    ASSERT_OK(quant_quantize(quant_set_get(set, 0), x, y, 64, &d), &d);
    ASSERT_EQ_INT(satstats_step_end(s, 41, QLOG_PHASE_QAT, &d), 0);
    fill(x, 64, 2.0f);
    ASSERT_OK(quant_quantize(quant_set_get(set, 0), x, y, 64, &d), &d);
    ASSERT_EQ_INT(satstats_step_end(s, 42, QLOG_PHASE_QAT, &d), 1);
    const char *w = satstats_warning(s, 0);
    ASSERT_TRUE(w != NULL);
    ASSERT_TRUE(strstr(w, "step 42") && strstr(w, qnames[0]) && strstr(w, "clip rate 0.5 ") &&
                strstr(w, "predicted amax 1 < true amax 2"));
    ASSERT_NEAR(satstats_max_clip_rate(s), 0.5, 0);
    satstats_destroy(s);
    quant_set_destroy(set);
}

TEST(qlog, alarm_needs_k_consecutive_steps)
{
    char dir[512];
    make_dir(dir, sizeof dir, "qlog_k");
    int n_warn, stop;
    /* a single spike: K=1 alarms once, K=2 never */
    ASSERT_EQ_INT(run_steps(dir, 8, 0, 6, 1, 1, NULL, &n_warn, &stop), 0);
    ASSERT_EQ_INT(n_warn, 1);
    ASSERT_EQ_INT(run_steps(dir, 8, 0, 6, 1, 2, NULL, &n_warn, &stop), 0);
    ASSERT_EQ_INT(n_warn, 0);
    ASSERT_EQ_INT(stop, 0);
    /* warmup (observe) spikes never alarm */
    ASSERT_EQ_INT(run_steps(dir, 8, 7, 6, 1, 1, NULL, &n_warn, &stop), 0);
    ASSERT_EQ_INT(n_warn, 0);
}

TEST(qlog, interval_logs_every_nth_step_and_alarm_steps)
{
    char dir[512], path[600];
    make_dir(dir, sizeof dir, "qlog_iv");
    ASSERT_EQ_INT(run_steps(dir, 10, 0, 7, 3, 1, NULL, NULL, NULL), 0);
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    qlog_run run;
    qs_diag d = {0};
    ASSERT_OK(qlog_read(path, &run, &d), &d);
    ASSERT_EQ_INT(run.n_steps, 5);     /* 0, 3, 6, 9 and the alarm at 7 */
    ASSERT_EQ_INT(run.steps[3], 7);
    ASSERT_EQ_INT(run.steps[4], 9);
    qlog_run_free(&run);
}

TEST(qlog, truncated_mid_frame_keeps_complete_records)
{
    char dir[512], path[600], cut[600];
    make_dir(dir, sizeof dir, "qlog_tr");
    ASSERT_EQ_INT(run_steps(dir, 6, 2, 99, 1, 1, NULL, NULL, NULL), 0);
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    snprintf(cut, sizeof cut, "%s/cut.jsonl.zst", dir);
    /* raw bytes (fileio_read_all would decompress .zst): map the file */
    fileio_map m = {0};
    ASSERT_OK(fileio_map_open(&m, path, NULL), NULL);
    ASSERT_OK(fileio_write_atomic(cut, m.data, m.bytes - 7, NULL), NULL);  /* inside the last frame */
    fileio_unmap(&m);
    qlog_run run;
    qs_diag d = {0};
    ASSERT_EQ_INT(qlog_read(cut, &run, &d), QS_ETRUNC);
    ASSERT_EQ_INT(run.truncated, 1);
    ASSERT_EQ_INT(run.n_steps, 5);
    ASSERT_EQ_INT(run.steps[4], 4);
    ASSERT_TRUE(strstr(d.msg, "truncated") != NULL);
    ASSERT_TRUE(strstr(d.path, "cut.jsonl.zst") != NULL);
    /* the line it stopped at: the header and 5 steps read, the 7th record cut */
    ASSERT_EQ_INT(d.line, 7);
    ASSERT_EQ_STR(d.msg, "log is truncated after 6 complete records (file ends inside a zstd frame)");
    qlog_run_free(&run);
}

static int write_plain(const char *path, const char *text)
{
    return fileio_write_atomic(path, text, strlen(text), NULL);
}

#define HDR "{\"v\":1,\"type\":\"header\",\"run\":\"r\",\"recipe\":{\"estimator\":\"most-recent\"," \
            "\"margin\":0,\"history\":8,\"saturate\":true},\"quantizers\":[\"a\",\"b\"]}\n"
#define STEP(n, amax) "{\"v\":1,\"type\":\"step\",\"step\":" #n ",\"phase\":\"qat\",\"q\":[" \
            "{\"name\":\"a\",\"mode\":\"quant\",\"amax\":" #amax "},{\"name\":\"b\",\"mode\":null}]}\n"

TEST(qlog, resume_repeats_header_and_replaces_steps)
{
    char path[600];
    snprintf(path, sizeof path, "%s/resume.jsonl", test_tmp_dir());
    ASSERT_OK(write_plain(path, HDR STEP(0, 1) STEP(1, 2) STEP(2, 3) HDR STEP(1, 5) STEP(2, 6)), NULL);
    qlog_run run;
    qs_diag d = {0};
    ASSERT_OK(qlog_read(path, &run, &d), &d);
    ASSERT_EQ_INT(run.n_steps, 3);
    ASSERT_NEAR(qlog_run_row(&run, 1, 0)->amax, 5.0, 0);
    ASSERT_NEAR(qlog_run_row(&run, 2, 0)->amax, 6.0, 0);
    ASSERT_EQ_INT(qlog_run_row(&run, 2, 1)->mode, QUANT_MODE_NONE);
    ASSERT_TRUE(isnan(qlog_run_row(&run, 2, 0)->pred_amax));   /* absent -> null */
    ASSERT_EQ_INT(run.history_steps, 8);
    qlog_run_free(&run);
}

TEST(qlog, malformed_logs_name_file_and_line)
{
    char path[600];
    snprintf(path, sizeof path, "%s/bad.jsonl", test_tmp_dir());
    struct {
        const char *text, *want;
        long line;
    } cases[] = {
        {STEP(0, 1), "before the header", 1},
        {"{\"v\":2,\"type\":\"header\"}\n", "$.v: expected version 1, found 2", 1},
        {HDR "{\"v\":1,\"type\":\"step\",\"step\":0,\"q\":[{\"name\":\"zz\"}]}\n", "'zz'", 2},
        {HDR "not json\n", "invalid JSON at column", 2},
        {HDR "{\"v\":1,\"type\":\"header\",\"recipe\":{},\"quantizers\":[\"a\"]}\n", "different", 2},
        {"", "no header", -1},
        /* records that contradict themselves: satstat, replay and heatmap refuse them
         * alike (they were read as warmup steps, mode none, or a clip past n) */
        {HDR "{\"v\":1,\"type\":\"step\",\"step\":0,\"phase\":\"QAT\",\"q\":[]}\n",
         "step 0: phase 'QAT', expected \"warmup\" or \"qat\"", 2},
        {HDR "{\"v\":1,\"type\":\"step\",\"step\":4,\"q\":[{\"name\":\"b\",\"mode\":\"on\"}]}\n",
         "step 4: quantizer 'b': mode 'on', expected \"quant\", \"observe\" or \"none\"", 2},
        {HDR STEP(0, 1) "{\"v\":1,\"type\":\"step\",\"step\":1,\"q\":[{\"name\":\"a\",\"n\":8,"
         "\"clip\":9}]}\n", "step 1: quantizer 'a': clip 9 exceeds n 8", 3},
        {HDR "{\"v\":1,\"type\":\"step\",\"step\":2,\"q\":[{\"name\":\"a\",\"under\":3,\"n\":2}]}\n",
         "under 3 exceeds n 2", 2},
        /* a quantizer twice in one step (the second record replaced the first), an
         * estimator no run has (it was printed as the recipe) */
        {HDR STEP(0, 1) "{\"v\":1,\"type\":\"step\",\"step\":1,\"q\":[{\"name\":\"a\"},"
         "{\"name\":\"a\",\"amax\":9}]}\n", "step 1: quantizer 'a' listed twice", 3},
        {"{\"v\":1,\"type\":\"header\",\"recipe\":{\"estimator\":\"bogus\"},\"quantizers\":[\"a\"]}\n",
         "$.recipe.estimator: unknown amax estimator 'bogus'", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ASSERT_OK(write_plain(path, cases[i].text), NULL);
        qlog_run run;
        qs_diag d = {0};
        ASSERT_EQ_INT(qlog_read(path, &run, &d), QS_EFORMAT);
        if (!strstr(d.msg, cases[i].want))
            TEST_FAIL_AT("case %zu: '%s' not in '%s'", i, cases[i].want, d.msg);
        ASSERT_EQ_INT(d.line, cases[i].line);
        ASSERT_EQ_INT(run.n_quant, 0);   /* freed on error */
        qlog_run_free(&run);
    }
    qlog_run run;
    qs_diag d = {0};
    /* a recipe margin no run can have (replay said "recipe: margin must be in
     * [0, 24], got -5" without the file) */
    ASSERT_OK(write_plain(path, "{\"v\":1,\"type\":\"header\",\"recipe\":{\"margin\":-5},"
                                "\"quantizers\":[\"a\"]}\n" STEP(0, 1)), NULL);
    ASSERT_EQ_INT(qlog_read(path, &run, &d), QS_ERANGE);
    ASSERT_TRUE(strstr(d.path, "bad.jsonl") != NULL && d.line == 1);
    ASSERT_EQ_STR(d.msg, "$.recipe.margin: expected integer in [0, 24], found -5");
    qlog_run_free(&run);
    /* a history of no steps (it was used as the default 1024), a negative step
     * (read as "the steps went back": the earlier ones dropped) */
    ASSERT_OK(write_plain(path, "{\"v\":1,\"type\":\"header\",\"recipe\":{\"history\":0},"
                                "\"quantizers\":[\"a\"]}\n" STEP(0, 1)), NULL);
    ASSERT_TRUE(qlog_read(path, &run, &d) < 0 && d.line == 1);
    ASSERT_EQ_STR(d.msg, "$.recipe.history: expected integer in [1, 2147483647], found 0");
    qlog_run_free(&run);
    ASSERT_OK(write_plain(path, HDR STEP(0, 1) STEP(1, 1) STEP(-6, 1)), NULL);
    ASSERT_TRUE(qlog_read(path, &run, &d) < 0 && d.line == 4);
    ASSERT_TRUE(strstr(d.msg, "$.step: expected integer in [0, ") != NULL);
    qlog_run_free(&run);
    snprintf(path, sizeof path, "%s/missing/quant.jsonl.zst", test_tmp_dir());
    ASSERT_TRUE(qlog_read(path, &run, &d) < 0);
    qlog_run_free(&run);
}

TEST(qlog, filter_keeps_matching_quantizers_in_order)
{
    char path[600];
    snprintf(path, sizeof path, "%s/filter.jsonl", test_tmp_dir());
    ASSERT_OK(write_plain(path, HDR STEP(0, 1) STEP(1, 2)), NULL);
    qlog_run run;
    qs_diag d = {0};
    ASSERT_OK(qlog_read(path, &run, &d), &d);
    ASSERT_EQ_INT(qlog_run_filter(&run, "zz", &d), QS_ENOTFOUND);
    ASSERT_EQ_INT(run.n_quant, 2);
    ASSERT_OK(qlog_run_filter(&run, "b", &d), &d);
    ASSERT_EQ_INT(run.n_quant, 1);
    ASSERT_EQ_STR(run.names[0], "b");
    ASSERT_EQ_INT(qlog_run_row(&run, 1, 0)->mode, QUANT_MODE_NONE);
    qlog_run_free(&run);
    ASSERT_OK(qlog_read(path, &run, &d), &d);
    ASSERT_OK(qlog_run_filter(&run, "a", &d), &d);
    ASSERT_NEAR(qlog_run_row(&run, 1, 0)->amax, 2.0, 0);
    qlog_run_free(&run);
}

/* Mutated logs (bytes flipped, JSON retyped) never crash the reader: each read
 * ends in 0 or a clean error with a message (run under ASan by make check). */
TEST(qlog, mutated_logs_fail_cleanly)
{
    static const char base[] = HDR STEP(0, 1) STEP(1, 2.5) STEP(2, 3);
    static const char *swaps[] = {"[", "{", "\"", "null", "-1", "1e999", "\"q\"", ",", ":", "}"};
    char path[600], buf[sizeof base + 16];
    snprintf(path, sizeof path, "%s/mutated.jsonl", test_tmp_dir());
    unsigned lcg = 99u;
    int n_ok = 0, n_err = 0;
    for (int it = 0; it < 400; it++) {
        memcpy(buf, base, sizeof base);
        lcg = lcg * 1103515245u + 12345u;
        size_t pos = (lcg >> 8) % (sizeof base - 1);
        lcg = lcg * 1103515245u + 12345u;
        const char *sw = swaps[(lcg >> 8) % 10];
        size_t k = strlen(sw);
        if (pos + k < sizeof base - 1)
            memcpy(buf + pos, sw, k);
        if (it % 3 == 0)
            buf[pos] = (char)((lcg >> 16) & 0xff);   /* raw byte, possibly '\n' or 0 */
        size_t len = strlen(buf);
        ASSERT_OK(fileio_write_atomic(path, buf, len, NULL), NULL);
        qlog_run run;
        qs_diag d = {0};
        int rc = qlog_read(path, &run, &d);
        if (rc == 0) {
            n_ok++;
            ASSERT_TRUE(run.n_quant >= 1 && run.n_steps >= 0);
        } else {
            n_err++;
            ASSERT_TRUE(d.msg[0] != 0);
        }
        qlog_run_free(&run);
    }
    ASSERT_TRUE(n_ok > 0 && n_err > 0);
}

static int float_text_round_trips(float f, char *why, size_t why_bytes)
{
    char buf[32];
    int len = qlog_float_format(buf, f);
    if (len != (int)strlen(buf)) {
        snprintf(why, why_bytes, "%.9g: length %d vs '%s'", (double)f, len, buf);
        return 0;
    }
    char *end;
    float back = strtof(buf, &end);
    if (*end || back != f || (signbit(back) != signbit(f) && f != 0.0f)) {
        snprintf(why, why_bytes, "%.9g -> '%s' -> %.9g", (double)f, buf, (double)back);
        return 0;
    }
    json_error_t je;   /* valid JSON number */
    json_t *j = json_loads(buf, JSON_DECODE_ANY, &je);
    int ok = json_is_number(j);
    json_decref(j);
    if (!ok)
        snprintf(why, why_bytes, "'%s' is not a JSON number", buf);
    return ok;
}

TEST(qlog, float_text_reads_back_to_the_same_float)
{
    const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 1e8f, 99999999.0f, 999999999.0f,
                             1e9f, 123456789.0f, 1e-5f, 9.99999e-6f, 32768.0f, 3.40282347e38f,
                             1.17549435e-38f, 1.4e-45f, 2.3841858e-07f, 0.000162760422f,
                             6397711.0f, 21845.334f};
    char why[128];
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        if (!float_text_round_trips(special[i], why, sizeof why))
            TEST_FAIL_AT("%s", why);
    unsigned long long x = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned u = (unsigned)(x >> 32);
        float f;
        memcpy(&f, &u, sizeof f);
        if (!isfinite(f))
            continue;
        if (!float_text_round_trips(f, why, sizeof why)) {
            TEST_FAIL_AT("%s", why);
            return;
        }
    }
    char buf[32];
    ASSERT_EQ_INT(qlog_float_format(buf, NAN), 4);
    ASSERT_EQ_STR(buf, "null");
    qlog_float_format(buf, 0.5f);
    ASSERT_EQ_STR(buf, "0.5");
    qlog_float_format(buf, 1.8e-4f);
    ASSERT_EQ_STR(buf, "0.000180000003");
    qlog_float_format(buf, 32768.0f);
    ASSERT_EQ_STR(buf, "32768");
    qlog_float_format(buf, 3e20f);
    ASSERT_EQ_STR(buf, "3.00000006e+20");   /* 300000005792615858176 */
}

/* A resume appends zstd frames to the log: one that is plain text, or whose first
 * record is not the header, would become unreadable, so it is refused untouched. */
TEST(qlog, resume_refuses_a_log_it_would_make_unreadable)
{
    char path[600], *before, *after;
    size_t nb, na;
    quant_recipe r;
    quant_recipe_default(&r);
    const char *const names[2] = {"a", "b"};
    qlog_writer *w = NULL;
    qs_diag d = {0};
    snprintf(path, sizeof path, "%s/resume_plain.jsonl.zst", test_tmp_dir());
    ASSERT_OK(write_plain(path, HDR STEP(0, 1) STEP(1, 2)), NULL);
    ASSERT_EQ_INT(qlog_writer_create(&w, path, "r", &r, names, 2, 1, &d), QS_EFORMAT);
    ASSERT_TRUE(w == NULL && strstr(d.msg, "cannot resume onto this quantizer log: not zstd "
                                           "frames as train writes them"));
    snprintf(path, sizeof path, "%s/resume_nohdr.jsonl.zst", test_tmp_dir());
    zlog_writer *z = NULL;
    ASSERT_OK(zlog_writer_create(&z, path, ZLOG_TRUNCATE, &d), &d);
    const char *step = STEP(0, 1);
    ASSERT_OK(zlog_write(z, step, strlen(step) - 1, &d), &d);
    ASSERT_OK(zlog_close(z, &d), &d);
    ASSERT_OK(fileio_read_all(path, &before, &nb, NULL), NULL);
    ASSERT_EQ_INT(qlog_writer_create(&w, path, "r", &r, names, 2, 1, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "the first record is not the header") != NULL && d.line == 1);
    ASSERT_OK(fileio_read_all(path, &after, &na, NULL), NULL);
    int kept = na == nb && !memcmp(before, after, nb);
    qs_free(before);
    qs_free(after);
    ASSERT_TRUE(kept);
}
