/* test_plots_scan.c: heatmap's fast step scanner (plots/heatmap_scan.c) reads exactly
 * what qlog's record rules read (the Jansson path, satstat's and replay's reader), or
 * hands the line back to them. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "qs/json.h"
#include "qs/plots.h"
#include "qs/plots_test.h"
#include "qs/qlog.h"
#include "test.h"

static int scan_line(const char *line, int metric, long *step, int *qat, float *row)
{
    static char *const names[2] = {"layers.3.mlp.up_proj.input", "layers.3.mlp.up_proj.weight"};
    return heatmap_scan_step_impl(line, strlen(line), 2, names, metric, step, qat, row);
}

TEST(plots, step_scanner_reads_valid_records)
{
    long step = -1;
    int qat = -1;
    float row[2];
    const char *std = "{\"v\":1,\"type\":\"step\",\"step\":123,\"phase\":\"qat\",\"q\":["
                      "{\"name\":\"layers.3.mlp.up_proj.input\",\"mode\":\"quant\",\"pred_amax\":2.0,"
                      "\"amax\":3.0,\"clip_rate\":1.8e-4,\"under_rate\":null,\"qsnr_db\":31.25},"
                      "{\"name\":\"layers.3.mlp.up_proj.weight\",\"pred_amax\":0,\"amax\":1,"
                      "\"clip_rate\":0,\"under_rate\":4.5E-5,\"qsnr_db\":-2}]}";
    ASSERT_EQ_INT(scan_line(std, PLOTS_METRIC_CLIP_RATE, &step, &qat, row), 1);
    ASSERT_EQ_INT(step, 123);
    ASSERT_EQ_INT(qat, 1);
    ASSERT_NEAR(row[0], 1.8e-4, 1e-10);
    ASSERT_NEAR(row[1], 0, 0);
    ASSERT_EQ_INT(scan_line(std, PLOTS_METRIC_UNDERFLOW_RATE, &step, &qat, row), 1);
    ASSERT_TRUE(isnan(row[0]));
    ASSERT_NEAR(row[1], 4.5e-5, 1e-11);
    ASSERT_EQ_INT(scan_line(std, PLOTS_METRIC_AMAX_RATIO, &step, &qat, row), 1);
    ASSERT_NEAR(row[0], 1.5, 1e-7);
    ASSERT_TRUE(isnan(row[1]));   /* pred_amax 0: no ratio */
    ASSERT_EQ_INT(scan_line(std, PLOTS_METRIC_QSNR, &step, &qat, row), 1);
    ASSERT_NEAR(row[1], -2, 0);
    /* key order, whitespace, nested unknown fields, a quantizer without figures, warmup phase */
    const char *odd = " { \"q\" : [ { \"clip_rate\" : 0.5 , \"x\" : {\"a\":[1,{\"b\":null}],\"c\":\"]}\"} ,"
                      " \"name\" : \"layers.3.mlp.up_proj.input\" } , {\"extra\":[true,false],"
                      "\"name\":\"layers.3.mlp.up_proj.weight\"} ] , \"phase\":\"warmup\", \"step\": 7 ,"
                      "\"type\":\"step\", \"v\" : 1 } ";
    ASSERT_EQ_INT(scan_line(odd, PLOTS_METRIC_CLIP_RATE, &step, &qat, row), 1);
    ASSERT_EQ_INT(step, 7);
    ASSERT_EQ_INT(qat, 0);
    ASSERT_NEAR(row[0], 0.5, 0);
    ASSERT_TRUE(isnan(row[1]));
}

#define SCAN_Q0 "{\"name\":\"layers.3.mlp.up_proj.input\"}"
#define SCAN_Q1 "{\"name\":\"layers.3.mlp.up_proj.weight\"}"
#define SCAN_QQ "[" SCAN_Q0 "," SCAN_Q1 "]"
#define SCAN_N0 "\"name\":\"layers.3.mlp.up_proj.input\""

TEST(plots, step_scanner_hands_back_unusual_lines)
{
    static const char *const back[] = {
        "{\"v\":1,\"type\":\"header\",\"quantizers\":[]}",                        /* other type */
        "{\"v\":1,\"type\":\"step\",\"step\":3.0,\"q\":" SCAN_QQ "}",             /* non-integer step */
        "{\"v\":1,\"type\":\"step\",\"step\":03,\"q\":" SCAN_QQ "}",              /* leading zero */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"clip_rate\":1.},"
        SCAN_Q1 "]}",                                                              /* bad number */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[" SCAN_Q0 "]}",              /* count */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[" SCAN_Q0 "," SCAN_Q1 "," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[" SCAN_Q1 "," SCAN_Q0 "]}",  /* order */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{\"name\":\"layers.3.mlp.up_proj.inpu\\u0074\"},"
        SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":" SCAN_QQ "} x",             /* trailing */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":" SCAN_QQ,                   /* cut */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":" SCAN_QQ ",\"q\":" SCAN_QQ "}",  /* duplicate q */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"note\":\"caf\xc3\xa9\",\"q\":" SCAN_QQ "}",  /* UTF-8 */
        "{\"v\":1,\"type\":\"step\",\"q\":" SCAN_QQ "}",                           /* no step */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[1," SCAN_Q1 "]}",            /* not an object */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"clip_rate\":nul}," SCAN_Q1 "]}",
        "",
        /* what qlog's rules refuse (satstat and replay too) */
        "{\"type\":\"step\",\"step\":3,\"q\":" SCAN_QQ "}",                        /* no version */
        "{\"v\":2,\"type\":\"step\",\"step\":3,\"q\":" SCAN_QQ "}",                /* another version */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{}," SCAN_Q1 "]}",           /* no name */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{\"name\":null}," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"amax\":-1}," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"pred_amax\":1e39}," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"under_rate\":2}," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"scale\":0}," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"n\":-1}," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"clip\":1.5}," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"mode\":3}," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"phase\":1,\"q\":" SCAN_QQ "}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"phase\":\"QAT\",\"q\":" SCAN_QQ "}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"mode\":\"quantize\"}," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"n\":4,\"clip\":5}," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"under\":9,\"n\":8}," SCAN_Q1 "]}",
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"x\":123456789012345678901,\"q\":" SCAN_QQ "}",
        "{\"v\":1,\"type\":\"step\",\"step\":-1,\"q\":" SCAN_QQ "}",               /* step < 0 */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"step\":-2,\"q\":" SCAN_QQ "}",  /* the last wins */
        "{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":[{" SCAN_N0 ",\"amax\":1,\"amax\":-1},"
        SCAN_Q1 "]}",
    };
    long step;
    int qat;
    float row[2];
    /* the same record, well-formed, is the scanner's */
    ASSERT_EQ_INT(scan_line("{\"v\":1,\"type\":\"step\",\"step\":3,\"q\":" SCAN_QQ "}",
                            PLOTS_METRIC_CLIP_RATE, &step, &qat, row), 1);
    for (size_t i = 0; i < sizeof back / sizeof *back; i++) {
        if (scan_line(back[i], PLOTS_METRIC_CLIP_RATE, &step, &qat, row) != 0) {
            TEST_FAIL_AT("line %zu was accepted: %s", i, back[i]);
            return;
        }
    }
}

/* deterministic mutations of a valid record: whenever the fast scanner accepts a
 * mutant, qlog's record rules (the Jansson path, and satstat's and replay's reader)
 * must accept it too and yield the same step, phase and values */
static uint64_t mut_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int rules_agree(const char *line, int metric, long step, int qat, const float *row)
{
    static const char hdr[] = "{\"v\":1,\"type\":\"header\",\"recipe\":{},\"quantizers\":"
                              "[\"layers.3.mlp.up_proj.input\",\"layers.3.mlp.up_proj.weight\"]}";
    qlog_run run;
    memset(&run, 0, sizeof run);
    json_t *h = json_loads(hdr, 0, NULL), *o = json_loads(line, 0, NULL);
    qs_json_at ha = qs_json_root(h, "hdr", 1), oa = qs_json_root(o, "line", 2);
    qlog_row rows[2];
    long st;
    int kind, phase, ok = o && !qlog_header_parse(&run, &ha, NULL) &&
                          !qlog_record_kind(&oa, &kind, NULL) && kind == QLOG_REC_STEP &&
                          !qlog_step_parse(&run, &oa, &st, &phase, rows, NULL) && st == step &&
                          qat == (phase == QLOG_PHASE_QAT);
    for (int i = 0; ok && i < 2; i++) {
        float want = metric == PLOTS_METRIC_CLIP_RATE ? rows[i].clip_rate
                     : rows[i].pred_amax > 0 && rows[i].amax >= 0
                         ? (float)((double)rows[i].amax / rows[i].pred_amax)
                         : NAN;
        ok = isnan(want) ? isnan(row[i]) : want == row[i];
    }
    qlog_run_free(&run);
    json_decref(h);
    json_decref(o);
    return ok;
}

TEST(plots, step_scanner_mutants_agree_with_jansson)
{
    const char *seed_line = "{\"v\":1,\"type\":\"step\",\"step\":42,\"phase\":\"qat\",\"q\":["
                            "{\"name\":\"layers.3.mlp.up_proj.input\",\"clip_rate\":1.5e-3,\"x\":[1,2],"
                            "\"amax\":3.5,\"pred_amax\":2,\"n\":64,\"mode\":\"quant\"},"
                            "{\"name\":\"layers.3.mlp.up_proj.weight\",\"clip_rate\":null,\"amax\":0.25,"
                            "\"pred_amax\":0.5,\"clip\":0}]}";
    static const char alphabet[] = "{}[]\",:0123456789.eE+-ntrufalsq \\x";
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    char buf[512];
    int accepted = 0;
    for (int iter = 0; iter < 6000; iter++) {
        size_t n = strlen(seed_line);
        memcpy(buf, seed_line, n + 1);
        int edits = 1 + (int)(mut_next(&rng) % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(mut_next(&rng) % n);
            int kind = (int)(mut_next(&rng) % 3);
            char c = alphabet[mut_next(&rng) % (sizeof alphabet - 1)];
            if (kind == 0) {
                buf[at] = c;                                   /* replace */
            } else if (kind == 1 && n > 1) {
                memmove(buf + at, buf + at + 1, n - at);       /* delete */
                n--;
            } else if (n + 2 < sizeof buf) {
                memmove(buf + at + 1, buf + at, n - at + 1);   /* insert */
                buf[at] = c;
                n++;
            }
        }
        long step;
        int qat;
        float row[2];
        for (int m = 0; m < 2; m++) {
            int metric = m ? PLOTS_METRIC_AMAX_RATIO : PLOTS_METRIC_CLIP_RATE;
            if (scan_line(buf, metric, &step, &qat, row)) {
                accepted++;
                if (!rules_agree(buf, metric, step, qat, row)) {
                    TEST_FAIL_AT("scanner and qlog's rules disagree on: %s", buf);
                    return;
                }
            }
        }
    }
    ASSERT_TRUE(accepted > 100);   /* the mutants exercised the accepting path too */
}

