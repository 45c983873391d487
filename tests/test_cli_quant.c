/* test_cli_quant.c: `qatscope satstat` and `qatscope replay` on a run dir made
 * by the library's quantizers + detector: outputs, --json, error paths; unknown
 * options of the hand-parsed gate, heatmap and plot. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/qlog.h"
#include "qs/satstats.h"
#include "test.h"

/* 4 quantizers, 40 steps (10 warmup), most-recent; tensor 3 spikes at steps 20 and 30 */
static const char *make_run_dir(void)
{
    static char dir[512];
    if (dir[0])
        return dir;
    snprintf(dir, sizeof dir, "%s/cli_run", test_tmp_dir());
    if (fileio_mkdir_p(dir, NULL))
        return NULL;
    const char *names[4] = {"layers.2.mlp.gate_proj.input", "layers.2.mlp.gate_proj.weight",
                            "layers.2.mlp.down_proj.input", "layers.2.mlp.down_proj.weight"};
    quant_recipe r;
    quant_recipe_default(&r);
    if (amax_estimator_parse("most-recent", &r.est, NULL))
        return NULL;
    quant_set *set;
    satstats *s;
    satstats_config c;
    satstats_config_default(&c);
    c.run_dir = dir;
    c.run_name = "cli";
    if (quant_set_create(&set, &r, names, 4, NULL))
        return NULL;
    if (satstats_create(&s, &c, set, NULL)) {
        quant_set_destroy(set);
        return NULL;
    }
    float x[128], y[128];
    int rc = 0;
    for (int t = 0; t < 40 && !rc; t++) {
        for (int q = 0; q < 4 && !rc; q++) {
            for (int i = 0; i < 128; i++)
                x[i] = (float)((i * 37 + t * 11 + q) % 101 - 50) / 50.0f;
            if (q == 2 && (t == 20 || t == 30))
                x[5] = 4.0f;
            rc = t < 10 ? quant_observe(quant_set_get(set, q), x, 128, NULL)
                        : quant_quantize(quant_set_get(set, q), x, y, 128, NULL);
        }
        if (!rc && satstats_step_end(s, t, t < 10 ? QLOG_PHASE_WARMUP : QLOG_PHASE_QAT, NULL) < 0)
            rc = -1;
    }
    if (satstats_close(s, NULL))
        rc = -1;
    quant_set_destroy(set);
    return rc ? NULL : dir;
}

#define BUF 65536

TEST(cli_quant, satstat_lists_worst_tensor_first)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *dir = make_run_dir();
    ASSERT_TRUE(dir != NULL);
    static char out[BUF], err[BUF];
    char args[700];
    snprintf(args, sizeof args, "satstat %s --top 2", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, BUF, err, BUF), 0);
    ASSERT_TRUE(strstr(out, "steps with saturation: 2 of 30 (first at step 20)") != NULL);
    const char *top = strstr(out, "top 2 worst tensors");
    ASSERT_TRUE(top != NULL);
    const char *first = strstr(top, "   1  ");
    ASSERT_TRUE(first && !strncmp(first + 6, "layers.2.mlp.down_proj.input", 28));
    ASSERT_TRUE(strstr(out, "per quantizer:") != NULL);
    ASSERT_TRUE(strstr(out, "worst true/pred (step)") != NULL);   /* replay's wording */
    ASSERT_TRUE(strstr(out, "4.0000 (20)") != NULL);   /* 4x the predicted amax at step 20 */
}

TEST(cli_quant, satstat_json_matches_the_log)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *dir = make_run_dir();
    ASSERT_TRUE(dir != NULL);
    static char out[BUF], err[BUF];
    char args[700];
    snprintf(args, sizeof args, "satstat %s --json --top 1", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, BUF, err, BUF), 0);
    json_error_t je;
    json_t *o = json_loads(out, 0, &je);
    ASSERT_TRUE(o != NULL);
    ASSERT_EQ_INT(json_integer_value(json_object_get(o, "steps_scored")), 30);
    ASSERT_EQ_INT(json_integer_value(json_object_get(o, "steps_with_saturation")), 2);
    ASSERT_EQ_INT(json_integer_value(json_object_get(o, "first_saturation_step")), 20);
    ASSERT_EQ_STR(json_string_value(json_array_get(json_object_get(o, "top"), 0)),
                  "layers.2.mlp.down_proj.input");
    json_t *q2 = json_array_get(json_object_get(o, "quantizers"), 2);
    ASSERT_EQ_INT(json_integer_value(json_object_get(q2, "sat_steps")), 2);
    ASSERT_NEAR(json_number_value(json_object_get(q2, "max_clip_rate")), 1.0 / 128.0, 1e-9);
    /* true/pred, as replay and the amax_ratio heatmap (issue 16.8; was pred/true 0.25) */
    ASSERT_NEAR(json_number_value(json_object_get(q2, "worst_true_over_pred")), 4.0, 1e-9);
    ASSERT_TRUE(json_object_get(q2, "worst_pred_over_true") == NULL);
    json_decref(o);
}

TEST(cli_quant, replay_json_per_estimator)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *dir = make_run_dir();
    ASSERT_TRUE(dir != NULL);
    static char out[BUF], err[BUF];
    char args[700];
    snprintf(args, sizeof args, "replay %s --estimators most-recent,max-window:16,current --json", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, BUF, err, BUF), 0);
    json_error_t je;
    json_t *o = json_loads(out, 0, &je);
    ASSERT_TRUE(o != NULL);
    json_t *e = json_object_get(o, "estimators");
    ASSERT_EQ_INT(json_array_size(e), 3);
    /* most-recent: the two logged spikes; max-window:16: the second (step 30) is covered */
    ASSERT_EQ_INT(json_integer_value(json_object_get(json_array_get(e, 0), "steps_saturated")), 2);
    ASSERT_EQ_INT(json_integer_value(json_object_get(json_array_get(e, 1), "steps_saturated")), 1);
    ASSERT_EQ_INT(json_integer_value(json_object_get(json_array_get(e, 2), "steps_saturated")), 0);
    ASSERT_EQ_STR(json_string_value(json_object_get(json_array_get(e, 0), "worst_tensor")),
                  "layers.2.mlp.down_proj.input");
    json_decref(o);
    snprintf(args, sizeof args, "replay %s", dir);   /* the default five estimators, as a table */
    ASSERT_EQ_INT(test_run_cli(args, out, BUF, err, BUF), 0);
    ASSERT_TRUE(strstr(out, "exp-smoothing:0.9") && strstr(out, "max-window:64") &&
                strstr(out, "current"));
}

TEST(cli_quant, errors_exit_2_with_one_line)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *dir = make_run_dir();
    ASSERT_TRUE(dir != NULL);
    static char out[BUF], err[BUF];
    char args[700];
    struct {
        const char *fmt, *want;
    } cases[] = {
        {"satstat %s/nope", "no such run dir"},
        {"satstat %s/..", "no quantizer log"},
        {"satstat", "missing RUN_DIR"},
        {"satstat %s --top x", "--top: expected an integer"},
        {"satstat %s --phase later", "unknown phase 'later'"},
        {"satstat %s --frobnicate", "unknown option '--frobnicate'"},
        {"replay %s --estimators most-recent,max", "unknown estimator 'max'"},
        {"replay %s --estimators max-window:0", "expected window N"},
        {"replay %s --margin 99", "--margin: expected an integer in [0, 24]"},
        {"replay %s extra", "unexpected argument 'extra'"},
        /* an unknown option of gate, heatmap or plot is named as unknown with its
         * own argument number: last on the line it was "--x: missing value", and
         * followed by a word it took that word as its value and counted it */
        {"gate --frobnicate%.0s", "gate: unknown option '--frobnicate' (argument 1)"},
        {"gate --baseline x.json --frobnicate y%.0s", "unknown option '--frobnicate' (argument 3)"},
        {"heatmap %s --frobnicate", "heatmap: unknown option '--frobnicate' (argument 2)"},
        {"heatmap %s --frobnicate 3", "unknown option '--frobnicate' (argument 2)"},
        {"plot %s --frobnicate", "plot: unknown option '--frobnicate' (argument 2)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, cases[i].fmt, dir);
        int rc = test_run_cli(args, out, BUF, err, BUF);
        if (rc != 2 || !strstr(err, cases[i].want) || strncmp(err, "qatscope: ", 10) ||
            strchr(err, '\n') != err + strlen(err) - 1)
            TEST_FAIL_AT("'%s': exit %d, stderr '%s', want '%s'", args, rc, err, cases[i].want);
    }
}

/* replay scores a recipe only if a quantizer (train) would accept it: a max-window
 * longer than the history is refused with train's message (issue 16.8). */
TEST(cli_quant, replay_refuses_a_recipe_train_refuses)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *dir = make_run_dir();
    ASSERT_TRUE(dir != NULL);
    static char out[BUF], err[BUF];
    char args[700];
    snprintf(args, sizeof args, "replay %s --history 10 --estimators max-window:64", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, BUF, err, BUF), 2);
    ASSERT_TRUE(strstr(err, "max-window:64 needs a history of at least 64 steps, got 10") != NULL);
    snprintf(args, sizeof args, "replay %s --estimators max-window:2048", dir);   /* log: 1024 */
    ASSERT_EQ_INT(test_run_cli(args, out, BUF, err, BUF), 2);
    ASSERT_TRUE(strstr(err, "needs a history of at least 2048 steps, got 1024") != NULL);
    snprintf(args, sizeof args, "replay %s --history 64 --estimators max-window:64", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, BUF, err, BUF), 0);
}

/* A bit flipped inside the log is a corrupt zstd frame, not a JSON error about
 * records it altered (issue 16.8). */
TEST(cli_quant, flipped_bit_in_the_log_is_a_corrupt_zstd_frame)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *dir = make_run_dir();
    ASSERT_TRUE(dir != NULL);
    char src[700], bad[700];
    snprintf(src, sizeof src, "%s/quant.jsonl.zst", dir);
    snprintf(bad, sizeof bad, "%s/flipped.jsonl.zst", test_tmp_dir());
    fileio_map m;
    qs_diag d = {0};
    ASSERT_OK(fileio_map_open(&m, src, &d), &d);
    unsigned char *copy = qs_malloc(m.bytes);
    ASSERT_TRUE(copy != NULL);
    memcpy(copy, m.data, m.bytes);
    copy[m.bytes / 2] ^= 0x04;   /* inside some frame's compressed records */
    int rc = fileio_write_atomic(bad, copy, m.bytes, &d);
    fileio_unmap(&m);
    qs_free(copy);
    ASSERT_OK(rc, &d);
    static char out[BUF], err[BUF];
    char args[800];
    snprintf(args, sizeof args, "satstat %s", bad);
    ASSERT_EQ_INT(test_run_cli(args, out, BUF, err, BUF), 2);
    ASSERT_TRUE(strstr(err, "zstd frame at byte") != NULL && strstr(err, "is corrupt") != NULL);
    ASSERT_TRUE(strstr(err, "JSON") == NULL && strstr(err, "expected") == NULL);
}

TEST(cli_quant, truncated_log_is_summarised_with_a_warning)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *dir = make_run_dir();
    ASSERT_TRUE(dir != NULL);
    char src[700], cut[700];
    snprintf(src, sizeof src, "%s/quant.jsonl.zst", dir);
    snprintf(cut, sizeof cut, "%s/cut", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(cut, NULL), NULL);
    fileio_map m = {0};
    ASSERT_OK(fileio_map_open(&m, src, NULL), NULL);
    strncat(cut, "/quant.jsonl.zst", sizeof cut - strlen(cut) - 1);
    ASSERT_OK(fileio_write_atomic(cut, m.data, m.bytes - 5, NULL), NULL);
    fileio_unmap(&m);
    static char out[BUF], err[BUF];
    char args[1600];
    snprintf(args, sizeof args, "satstat %s --json", cut);
    ASSERT_EQ_INT(test_run_cli(args, out, BUF, err, BUF), 0);
    ASSERT_TRUE(strstr(err, "warning") && strstr(err, "truncated"));
    json_error_t je;
    json_t *o = json_loads(out, 0, &je);
    ASSERT_TRUE(o != NULL);
    ASSERT_TRUE(json_is_true(json_object_get(o, "truncated")));
    ASSERT_EQ_INT(json_integer_value(json_object_get(o, "steps_logged")), 39);
    json_decref(o);
    /* one warning line naming the file and the line it stopped at, the same in
     * satstat, replay and heatmap but for what each does with the complete steps
     * (satstat and replay said "read 39 complete step record(s)" without the line) */
    static char warn[3][BUF];
    static const char *const cmds[3] = {"satstat %s", "replay %s", "heatmap %s --out %s.png"};
    for (int c = 0; c < 3; c++) {
        snprintf(args, sizeof args, cmds[c], cut, cut);
        ASSERT_EQ_INT(test_run_cli(args, out, BUF, warn[c], BUF), 0);
        ASSERT_TRUE(strstr(warn[c], "qatscope: warning: ") == warn[c] &&
                    strstr(warn[c], "quant.jsonl.zst:41: log is truncated after 40 complete records "
                                    "(file ends inside a zstd frame) (") &&
                    strchr(warn[c], '\n') == warn[c] + strlen(warn[c]) - 1);
    }
}

/* satstat, replay and heatmap read the quant log through the same record rules:
 * a damaged value (a negative or non-fp32 amax, a rate above 1, a negative count,
 * a q entry without its name, a record without "v") is refused by all three with
 * the same one line, naming the file, the line and the JSON path; the valid
 * variants (nulls, a quantizer left out) are read by all three.  heatmap read
 * some of these (a negative amax, no name) while satstat and replay refused them
 * or read them differently. */
TEST(cli_quant, the_three_log_readers_refuse_the_same_records_alike)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    static char out[BUF], err[3][BUF];
    static const char hdr[] = "{\"v\":1,\"type\":\"header\",\"run\":\"r\",\"recipe\":{\"estimator\":"
                              "\"most-recent\"},\"quantizers\":[\"layers.1.mlp.up_proj.input\","
                              "\"layers.1.mlp.up_proj.weight\"]}\n"
                              "{\"v\":1,\"type\":\"step\",\"step\":0,\"phase\":\"qat\",\"q\":["
                              "{\"name\":\"layers.1.mlp.up_proj.input\",\"pred_amax\":2,\"amax\":1,"
                              "\"clip_rate\":0},{\"name\":\"layers.1.mlp.up_proj.weight\",\"amax\":1}]}\n";
    static const struct {
        const char *q, *want;   /* want NULL: all three read it */
    } cases[] = {
        {"{\"name\":\"layers.1.mlp.up_proj.input\",\"pred_amax\":2,\"amax\":-1,\"clip_rate\":0}",
         ":3: $.q[0].amax: expected null or a finite number >= 0, found -1"},
        {"{\"name\":\"layers.1.mlp.up_proj.input\",\"pred_amax\":2,\"amax\":1e39,\"clip_rate\":0}",
         ":3: $.q[0].amax: expected null or a finite number >= 0, found 1e+39"},
        {"{\"name\":\"layers.1.mlp.up_proj.input\",\"pred_amax\":2,\"amax\":1,\"clip_rate\":1.5}",
         ":3: $.q[0].clip_rate: expected null or a rate in [0, 1], found 1.5"},
        {"{\"name\":\"layers.1.mlp.up_proj.input\",\"scale\":0,\"amax\":1}",
         ":3: $.q[0].scale: expected null or a finite number > 0, found 0"},
        {"{\"name\":\"layers.1.mlp.up_proj.input\",\"amax\":1,\"clip\":-3}",
         ":3: $.q[0].clip: expected integer in [0, 9223372036854775807], found -3"},
        {"{\"pred_amax\":2,\"amax\":1,\"clip_rate\":0}", ":3: $.q[0].name: required key is missing"},
        {"{\"name\":\"layers.1.mlp.up_proj.input\",\"mode\":7}",
         ":3: $.q[0].mode: expected string, found integer"},
        {"{\"name\":\"layers.1.mlp.up_proj.input\",\"amax\":null,\"qsnr_db\":-3.5,\"n\":null}", NULL},
        {NULL, NULL},   /* the weight's entry alone: the input left out (mode none, nulls) */
    };
    char dir[600], path[700], args[900], text[2048];
    snprintf(dir, sizeof dir, "%s/cli_qlog_rules", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, NULL), NULL);
    snprintf(path, sizeof path, "%s/quant.jsonl", dir);
    for (size_t i = 0; i <= sizeof cases / sizeof *cases; i++) {
        const char *want = i < sizeof cases / sizeof *cases ? cases[i].want
                                                            : ":3: $.v: required key is missing";
        if (i < sizeof cases / sizeof *cases)
            snprintf(text, sizeof text, "%s{\"v\":1,\"type\":\"step\",\"step\":1,\"phase\":\"qat\","
                     "\"q\":[%s%s{\"name\":\"layers.1.mlp.up_proj.weight\",\"amax\":1}]}\n", hdr,
                     cases[i].q ? cases[i].q : "", cases[i].q ? "," : "");
        else   /* a record without its version */
            snprintf(text, sizeof text, "%s{\"type\":\"step\",\"step\":1,\"phase\":\"qat\",\"q\":[]}\n",
                     hdr);
        ASSERT_OK(fileio_write_atomic(path, text, strlen(text), NULL), NULL);
        static const char *const cmds[3] = {"satstat %s --phase all", "replay %s --phase all",
                                            "heatmap %s --out %s.png"};
        for (int c = 0; c < 3; c++) {
            snprintf(args, sizeof args, cmds[c], path, path);
            int rc = test_run_cli(args, out, BUF, err[c], BUF);
            if (want ? rc != 2 || !strstr(err[c], want) || strchr(err[c], '\n') != err[c] + strlen(err[c]) - 1
                     : rc != 0)
                TEST_FAIL_AT("case %zu, '%s': exit %d, stderr '%s', want '%s'", i, args, rc, err[c],
                             want ? want : "(exit 0)");
        }
        if (want && (strcmp(err[0], err[1]) || strcmp(err[0], err[2])))
            TEST_FAIL_AT("case %zu: the readers differ:\n  %s  %s  %s", i, err[0], err[1], err[2]);
    }
}

/* The same, record by record: whole step records (the step number, its phase, its
 * q list, the values' JSON types) in logs that satstat, replay and heatmap read
 * alike: each exits with the same code and, when it refuses the log, the same one
 * line.  heatmap's fast scanner drew a log whose first step was -1 that the other
 * two refused (it judged the step number itself; it now hands every value to
 * qlog's rule functions).  Steps that go back or repeat (a resumed log of an older
 * version), a step past 2^53, a zero amax and a quantizer left out are read. */
TEST(cli_quant, the_three_log_readers_agree_on_every_malformed_record)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    static char out[BUF], err[3][BUF];
#define CQ_HDR "{\"v\":1,\"type\":\"header\",\"run\":\"r\",\"recipe\":{\"estimator\":\"most-recent\"}," \
               "\"quantizers\":[\"layers.1.mlp.up_proj.input\",\"layers.1.mlp.up_proj.weight\"]}\n"
#define CQ_Q0 "{\"name\":\"layers.1.mlp.up_proj.input\",\"mode\":\"quant\",\"pred_amax\":2,\"amax\":1," \
              "\"n\":64,\"clip\":0,\"clip_rate\":0}"
#define CQ_Q1 "{\"name\":\"layers.1.mlp.up_proj.weight\",\"amax\":1}"
#define CQ_STEP(s) "{\"v\":1,\"type\":\"step\",\"step\":" s ",\"phase\":\"qat\",\"q\":[" CQ_Q0 "," CQ_Q1 "]}\n"
    static const struct {
        const char *recs, *want;   /* records after the header; want NULL: all three read it */
    } cases[] = {
        {CQ_STEP("-1") CQ_STEP("0"), ":2: $.step: expected integer in [0, 9223372036854775807], found -1"},
        {CQ_STEP("0") CQ_STEP("-7"), ":3: $.step: expected integer in [0, 9223372036854775807], found -7"},
        {CQ_STEP("0") CQ_STEP("\"1\""), ":3: $.step: expected integer, found string"},
        {CQ_STEP("0") CQ_STEP("1.5"), ":3: $.step: expected integer, found number"},
        {CQ_STEP("0") CQ_STEP("null"), ":3: $.step: expected integer, found null"},
        {CQ_STEP("0") CQ_STEP("99999999999999999999"), ":3: "},   /* Jansson's words */
        {CQ_STEP("0") "{\"v\":1,\"type\":\"step\",\"step\":1,\"phase\":\"QAT\",\"q\":[" CQ_Q1 "]}\n",
         ":3: step 1: phase 'QAT', expected \"warmup\" or \"qat\""},
        {CQ_STEP("0") "{\"v\":1,\"type\":\"step\",\"step\":1,\"phase\":2,\"q\":[" CQ_Q1 "]}\n",
         ":3: $.phase: expected string, found integer"},
        {CQ_STEP("0") "{\"v\":1,\"type\":\"step\",\"step\":1,\"q\":{}}\n",
         ":3: $.q: expected array, found object"},
        {CQ_STEP("0") "{\"v\":1,\"type\":\"step\",\"step\":1,\"q\":[{\"name\":\"layers.1.mlp.up_proj."
         "input\",\"amax\":\"3\"}," CQ_Q1 "]}\n", ":3: $.q[0].amax: expected number, found string"},
        {CQ_STEP("0") "{\"v\":1,\"type\":\"step\",\"step\":1,\"q\":[{\"name\":\"layers.1.mlp.up_proj."
         "input\",\"n\":6.5}," CQ_Q1 "]}\n", ":3: $.q[0].n: expected integer, found number"},
        {CQ_STEP("0") "{\"v\":1,\"type\":\"step\",\"step\":1,\"q\":[{\"name\":\"layers.1.mlp.up_proj."
         "input\",\"amax\":-0.5}," CQ_Q1 "]}\n",
         ":3: $.q[0].amax: expected null or a finite number >= 0, found -0.5"},
        {CQ_STEP("0") "{\"v\":1,\"type\":\"step\",\"step\":1,\"q\":[{\"name\":\"layers.1.mlp.up_proj."
         "input\",\"mode\":\"quantize\"}," CQ_Q1 "]}\n",
         ":3: step 1: quantizer 'layers.1.mlp.up_proj.input': mode 'quantize', expected \"quant\", "
         "\"observe\" or \"none\""},
        {CQ_STEP("0") "{\"v\":1,\"type\":\"step\",\"step\":1,\"q\":[{\"name\":\"layers.1.mlp.up_proj."
         "input\",\"n\":4,\"clip\":5}," CQ_Q1 "]}\n",
         ":3: step 1: quantizer 'layers.1.mlp.up_proj.input': clip 5 exceeds n 4"},
        {CQ_STEP("0") "{\"v\":1,\"type\":\"step\",\"step\":1,\"q\":[" CQ_Q1 "," CQ_Q0 "," CQ_Q1 "]}\n",
         ":3: step 1: quantizer 'layers.1.mlp.up_proj.weight' listed twice"},
        {CQ_STEP("0") CQ_STEP("1") CQ_STEP("0"), NULL},                 /* a step that goes back */
        {CQ_STEP("0") CQ_STEP("1") CQ_STEP("1"), NULL},                 /* a repeated step */
        {CQ_STEP("0") CQ_STEP("4611686018427387904"), NULL},            /* past 2^53 */
        {CQ_STEP("0") "{\"v\":1,\"type\":\"step\",\"step\":1,\"phase\":\"qat\",\"q\":[{\"name\":"
         "\"layers.1.mlp.up_proj.input\",\"pred_amax\":0,\"amax\":0}," CQ_Q1 "]}\n", NULL},
        {CQ_STEP("0") "{\"v\":1,\"type\":\"step\",\"step\":1,\"phase\":\"qat\",\"q\":[" CQ_Q1 "]}\n",
         NULL},                                                         /* a quantizer left out */
        {CQ_STEP("-0") CQ_STEP("1"), NULL},                             /* -0 is 0 */
    };
    char dir[600], path[700], args[900], text[4096];
    snprintf(dir, sizeof dir, "%s/cli_qlog_records", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, NULL), NULL);
    snprintf(path, sizeof path, "%s/quant.jsonl", dir);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(text, sizeof text, CQ_HDR "%s", cases[i].recs);
        ASSERT_OK(fileio_write_atomic(path, text, strlen(text), NULL), NULL);
        static const char *const cmds[3] = {"satstat %s --phase all", "replay %s --phase all",
                                            "heatmap %s --out %s.png"};
        int rcs[3];
        for (int c = 0; c < 3; c++) {
            snprintf(args, sizeof args, cmds[c], path, path);
            rcs[c] = test_run_cli(args, out, BUF, err[c], BUF);
            const char *want = cases[i].want;
            if (want ? rcs[c] != 2 || !strstr(err[c], want) ||
                           strchr(err[c], '\n') != err[c] + strlen(err[c]) - 1
                     : rcs[c] != 0 || err[c][0])
                TEST_FAIL_AT("case %zu, '%s': exit %d, stderr '%s', want '%s'", i, args, rcs[c],
                             err[c], want ? want : "(exit 0, nothing on stderr)");
        }
        if (rcs[0] != rcs[1] || rcs[0] != rcs[2] || strcmp(err[0], err[1]) || strcmp(err[0], err[2]))
            TEST_FAIL_AT("case %zu: the readers differ: exit %d %d %d\n  %s  %s  %s", i, rcs[0],
                         rcs[1], rcs[2], err[0], err[1], err[2]);
    }
#undef CQ_HDR
#undef CQ_Q0
#undef CQ_Q1
#undef CQ_STEP
}
