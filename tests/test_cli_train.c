/* test_cli_train.c: `qatscope train` end to end on the bundled tiny model:
 * tokenize -> train -> checkpoint; --resume equals the straight run byte for
 * byte; config errors are one line with exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "test.h"

static char cli_out[65536], cli_err[8192];

/* shards of data/demo/train.txt, made once */
static const char *train_shards(void)
{
    static char dir[512];
    if (dir[0])
        return dir;
    char args[1200];
    snprintf(dir, sizeof dir, "%s/cli_shards", test_tmp_dir());
    snprintf(args, sizeof args, "tokenize --model data/demo/model --input data/demo/train.txt --out %s",
             dir);
    if (test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err) != 0) {
        fprintf(stderr, "    tokenize: %s\n", cli_err);
        dir[0] = 0;
        return NULL;
    }
    return dir;
}

static const char *write_config(const char *name, const char *extra)
{
    static char path[600];
    const char *shards = train_shards();
    if (!shards)
        return NULL;
    snprintf(path, sizeof path, "%s/%s.json", test_tmp_dir(), name);
    char js[2048];
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"data/demo/model\",\"train_data\":\"%s\",\"out_dir\":\"%s/%s\","
                     "\"batch_size\":2,\"seq_len\":16,\"steps\":6,\"lr\":1e-3,"
                     "\"bf16_warmup_steps\":3%s}",
                     shards, test_tmp_dir(), name, extra);
    return fileio_write_atomic(path, js, (size_t)n, NULL) ? NULL : path;
}

static int files_equal(const char *a, const char *b)
{
    char *x, *y;
    size_t nx, ny;
    if (fileio_read_all(a, &x, &nx, NULL))
        return 0;
    if (fileio_read_all(b, &y, &ny, NULL)) {
        qs_free(x);
        return 0;
    }
    int eq = nx == ny && !memcmp(x, y, nx);
    qs_free(x);
    qs_free(y);
    return eq;
}

/* a run's log for comparison: quant.jsonl.zst decompressed (fileio_read_all),
 * metrics.jsonl without its timing fields */
static char *cli_log(const char *run, const char *file)
{
    char path[800], *text;
    size_t n;
    snprintf(path, sizeof path, "%s/%s/%s", test_tmp_dir(), run, file);
    if (fileio_read_all(path, &text, &n, NULL))
        return NULL;
    static const char *const timing[] = {",\"tok_per_s\":", ",\"elapsed_s\":"};
    for (int k = 0; k < 2; k++)
        for (char *p; (p = strstr(text, timing[k]));) {
            char *e = p + strlen(timing[k]);
            while (*e && *e != ',' && *e != '}')
                e++;
            memmove(p, e, strlen(e) + 1);
        }
    return text;
}

/* saturation alarms every few steps (growing weights clip under most-recent),
 * episodes of 2 steps; one run name so the log headers compare */
static const char CLI_EPISODES[] = ",\"run_name\":\"cmp\",\"amax_estimator\":"
                                   "\"most-recent\",\"saturation_clip_rate\":0,"
                                   "\"saturation_alarm_steps\":2";

TEST(cli_train, run_then_resume_equals_straight_run)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = write_config("straight", CLI_EPISODES);
    ASSERT_TRUE(cfg != NULL);
    char args[1400];
    snprintf(args, sizeof args, "train --config %s", cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    ASSERT_TRUE(strstr(cli_out, "HiF8 QAT on") != NULL);
    ASSERT_TRUE(strstr(cli_out, "step 6/6") != NULL);
    ASSERT_TRUE(strstr(cli_out, "ckpt/step_6") != NULL);

    cfg = write_config("halves", CLI_EPISODES);
    snprintf(args, sizeof args, "train --config %s --steps 4 --quiet", cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    ASSERT_EQ_STR(cli_out, "");
    char dir[700];
    snprintf(dir, sizeof dir, "%s/halves", test_tmp_dir());
    snprintf(args, sizeof args, "train --resume %s --set steps=6", dir);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    ASSERT_TRUE(strstr(cli_out, "steps 4..5") != NULL);
    char a[900], b[900];
    snprintf(a, sizeof a, "%s/straight/ckpt/step_6/model.safetensors", test_tmp_dir());
    snprintf(b, sizeof b, "%s/halves/ckpt/step_6/model.safetensors", test_tmp_dir());
    ASSERT_TRUE(files_equal(a, b));
    /* and the logs, byte for byte: no repeated or lost alarm, the same QSNR samples */
    static const char *const logs[] = {"metrics.jsonl", "events.jsonl", "quant.jsonl.zst"};
    for (int i = 0; i < 3; i++) {
        char *x = cli_log("straight", logs[i]), *y = cli_log("halves", logs[i]);
        if (!(x && y && !strcmp(x, y)))
            fprintf(stderr, "    %s differs\n", logs[i]);
        ASSERT_TRUE(x && y && !strcmp(x, y));
        if (i == 1)
            ASSERT_TRUE(strstr(x, "\"type\":\"saturation\"") != NULL);
        qs_free(x);
        qs_free(y);
    }
}

TEST(cli_train, config_errors_are_one_line_exit_2)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = write_config("bad", ",\"bogus_key\":1");
    ASSERT_TRUE(cfg != NULL);
    char args[1400];
    snprintf(args, sizeof args, "train --config %s", cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "unknown key 'bogus_key'") != NULL);
    ASSERT_TRUE(strchr(cli_err, '\n') == cli_err + strlen(cli_err) - 1);
    cfg = write_config("bad2", "");
    snprintf(args, sizeof args, "train --config %s --set seq_len=abc", cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "seq_len: expected an integer") != NULL);
    snprintf(args, sizeof args, "train --config %s --set quant_modules=layers.99.mlp.*", cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "matches no Linear module") != NULL);
    snprintf(args, sizeof args, "train --config %s/nonexistent.json", test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    snprintf(args, sizeof args, "train --resume %s/straight --set lr=1", test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
}

TEST(cli_train, help_config_lists_every_key)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    ASSERT_EQ_INT(test_run_cli("train --help-config", cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    ASSERT_TRUE(strstr(cli_out, "bf16_warmup_steps") != NULL);
    ASSERT_TRUE(strstr(cli_out, "stop_on_saturation") != NULL);
}

TEST(cli_train, demo_runs_all_four_stages)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char args[800];
    snprintf(args, sizeof args, "demo --out %s/demo --steps 12 --warmup 4", test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    ASSERT_TRUE(strstr(cli_out, "== 2/4 train") != NULL);
    ASSERT_TRUE(strstr(cli_out, "step 4: bf16 warmup done, HiF8 QAT on") != NULL);
    ASSERT_TRUE(strstr(cli_out, "== 3/4 satstat") != NULL);
    ASSERT_TRUE(strstr(cli_out, "most-recent") != NULL);
    ASSERT_EQ_INT(test_run_cli("demo --warmup 5 --steps 5", cli_out, sizeof cli_out, cli_err,
                            sizeof cli_err), 2);
}

TEST(cli_train, in_loop_eval_writes_baseline_and_periodic_eval_lines)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char data[512];
    if (!test_shared_path(data, sizeof data, "bench/arc"))
        SKIP("../shared/bench/arc not present");
    data[strlen(data) - 4] = 0; /* the bench root */
    char extra[800];
    snprintf(extra, sizeof extra,
             ",\"eval_every\":2,\"eval_tasks\":[\"arc_easy\"],\"eval_data_dir\":\"%s\","
             "\"eval_subset\":6,\"eval_val_batches\":0",
             data);
    const char *cfg = write_config("evalrun", extra);
    ASSERT_TRUE(cfg != NULL);
    char args[1400];
    snprintf(args, sizeof args, "train --config %s --steps 4 --quiet", cfg);
    int rc = test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err);
    if (rc)
        fprintf(stderr, "    %s", cli_err);
    ASSERT_EQ_INT(rc, 0);
    char path[700], *text;
    size_t n;
    qs_diag d = {0};
    snprintf(path, sizeof path, "%s/evalrun/metrics.jsonl", test_tmp_dir());
    ASSERT_OK(fileio_read_all(path, &text, &n, &d), &d);
    ASSERT_TRUE(strncmp(text, "{\"type\":\"eval\",\"step\":0,\"quantized\":false,\"tasks\":{\"arc_easy\":{", 63) == 0);
    ASSERT_TRUE(strstr(text, "{\"type\":\"eval\",\"step\":2,") != NULL);
    ASSERT_TRUE(strstr(text, "{\"type\":\"eval\",\"step\":4,") != NULL);
    ASSERT_TRUE(strstr(text, "\"n\":6,\"items_acc\":\"") != NULL);
    qs_free(text);
}
