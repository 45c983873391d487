/* test_cli_train.c: `qatscope train` end to end on the bundled tiny model:
 * tokenize -> train -> checkpoint; --resume equals the straight run byte for
 * byte; config errors are one line with exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "qs/cpu.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "test.h"
#include "test_run_logs.h"

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
    char path[800];
    snprintf(path, sizeof path, "%s/%s/%s", test_tmp_dir(), run, file);
    return test_log_read(path);
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
    /* steps count from 0 on the progress line too (issue 16.8; was "step 6/6") */
    ASSERT_TRUE(strstr(cli_out, "step 5/5") != NULL);
    ASSERT_TRUE(strstr(cli_out, "step 0/5") != NULL);
    ASSERT_TRUE(strstr(cli_out, "step 6/") == NULL);
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

/* precision bf16-amx (the products on the AMX tiles, backward included): a QAT
 * run resumed half-way ends with the straight run's weights, and they are not
 * bf16's (another summation order inside each product) */
TEST(cli_train, bf16_amx_run_resumes_bit_exact_and_is_not_bf16)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    if (!cpu_amx_bf16())
        SKIP("this CPU (or its kernel) has no AMX-BF16 tiles");
    static const char *const runs[] = {"amx_straight", "amx_halves", "amx_bf16"};
    static const char *const extra[] = {",\"precision\":\"bf16-amx\"",
                                        ",\"precision\":\"bf16-amx\"", ",\"precision\":\"bf16\""};
    char args[1400];
    for (int r = 0; r < 3; r++) {
        const char *cfg = write_config(runs[r], extra[r]);
        ASSERT_TRUE(cfg != NULL);
        snprintf(args, sizeof args, "train --config %s --quiet%s", cfg, r == 1 ? " --steps 4" : "");
        ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    }
    snprintf(args, sizeof args, "train --resume %s/amx_halves --set steps=6 --quiet", test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    char a[900], b[900], c[900];
    snprintf(a, sizeof a, "%s/amx_straight/ckpt/step_6/model.safetensors", test_tmp_dir());
    snprintf(b, sizeof b, "%s/amx_halves/ckpt/step_6/model.safetensors", test_tmp_dir());
    snprintf(c, sizeof c, "%s/amx_bf16/ckpt/step_6/model.safetensors", test_tmp_dir());
    ASSERT_TRUE(files_equal(a, b));
    ASSERT_TRUE(!files_equal(a, c));
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
    /* a held-out split, and the in-loop val loss and KL without benchmark data */
    ASSERT_TRUE(strstr(cli_out, "40 held out for validation") != NULL);
    /* the ETA waits for a second step (the first carries the loads and the baseline eval) */
    const char *s0 = strstr(cli_out, "step 0/11 "), *s1 = strstr(cli_out, "step 1/11 ");
    ASSERT_TRUE(s0 && s1 && s1 > s0);
    ASSERT_TRUE(strstr(s0, " ETA - ") && strstr(s0, " ETA - ") < s1);
    ASSERT_TRUE(strstr(s1, " ETA 0m") != NULL);
    char path[800], *text;
    size_t n;
    snprintf(path, sizeof path, "%s/demo/run/metrics.jsonl", test_tmp_dir());
    ASSERT_OK(fileio_read_all(path, &text, &n, NULL), NULL);
    int n_eval = 0;
    for (const char *e = text; (e = strstr(e, "{\"type\":\"eval\"")); e++)
        n_eval++;
    ASSERT_EQ_INT(n_eval, 13);   /* eval_every 1: the baseline and after each of 12 steps */
    const char *last = strstr(text, "{\"type\":\"eval\",\"step\":12,\"quantized\":true,\"val_loss\":");
    ASSERT_TRUE(last && strstr(last, "\"val_kl_ref\":") && strstr(last, "\"tasks\":{}}"));
    qs_free(text);
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

/* recompute may change on --resume (same bits either way): a run checkpointed at
 * step 4 and resumed with recompute on ends with the straight run's weights */
TEST(cli_train, resume_with_recompute_on_equals_straight_run)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = write_config("rc_straight", ",\"grad_accum\":2");
    ASSERT_TRUE(cfg != NULL);
    char args[1400];
    snprintf(args, sizeof args, "train --config %s --quiet", cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    cfg = write_config("rc_halves", ",\"grad_accum\":2");
    snprintf(args, sizeof args, "train --config %s --steps 4 --quiet", cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    snprintf(args, sizeof args, "train --resume %s/rc_halves --set steps=6 --set recompute=true "
             "--quiet", test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    char a[900], b[900];
    snprintf(a, sizeof a, "%s/rc_straight/ckpt/step_6/model.safetensors", test_tmp_dir());
    snprintf(b, sizeof b, "%s/rc_halves/ckpt/step_6/model.safetensors", test_tmp_dir());
    ASSERT_TRUE(files_equal(a, b));
    snprintf(a, sizeof a, "%s/rc_straight/ckpt/step_6/train_state.bin", test_tmp_dir());
    snprintf(b, sizeof b, "%s/rc_halves/ckpt/step_6/train_state.bin", test_tmp_dir());
    ASSERT_TRUE(files_equal(a, b));
}

/* run_name defaults to the last component of out_dir, also when out_dir ends in
 * a slash (it was the whole "DIR/" then, in config.json and the log headers) */
TEST(cli_train, run_name_is_the_last_component_of_out_dir_with_a_slash)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = write_config("rn_slash", "");
    ASSERT_TRUE(cfg != NULL);
    char args[1400], path[900];
    snprintf(args, sizeof args, "train --config %s --set out_dir=%s/rn_slash/ --steps 4 --quiet",
             cfg, test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    snprintf(path, sizeof path, "%s/rn_slash/config.json", test_tmp_dir());
    char *text;
    size_t n;
    ASSERT_OK(fileio_read_all(path, &text, &n, NULL), NULL);
    int named = strstr(text, "\"run_name\": \"rn_slash\"") != NULL;
    if (!named)
        fprintf(stderr, "    %s", text);
    qs_free(text);
    ASSERT_TRUE(named);
}

/* Every shortcut flag and every --set takes effect, however many there are, in
 * argument order (the last assignment of a key wins): 12 shortcuts and 70 --set
 * (the parser once dropped shortcuts past 8 and refused more than 60 --set). */
TEST(cli_train, many_set_and_shortcut_flags_all_take_effect)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = write_config("manyflags", "");
    ASSERT_TRUE(cfg != NULL);
    char args[8192];
    int n = snprintf(args, sizeof args, "train --config %s --quiet", cfg);
    for (int i = 0; i < 70; i++)   /* lr = 0.001 + i * 1e-5; the last is 0.00169 */
        n += snprintf(args + n, sizeof args - (size_t)n, " --set lr=%g", 0.001 + i * 1e-5);
    n += snprintf(args + n, sizeof args - (size_t)n,
                  " --steps 9 --ste pass --precision fp32 --plot-every 5 --bf16-warmup-steps 3"
                  " --steps 8 --precision=bf16 --plot-every=0 --ste masked"
                  " --bf16-warmup-steps=1 --set seed=7 --steps 2");
    ASSERT_TRUE(n < (int)sizeof args);
    int rc = test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err);
    if (rc)
        fprintf(stderr, "    %s", cli_err);
    ASSERT_EQ_INT(rc, 0);
    char path[700], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/manyflags/config.json", test_tmp_dir());
    ASSERT_OK(fileio_read_all(path, &text, &len, NULL), NULL);
    /* the snapshot is one key per line, "key": value */
    const char *want[] = {"\"steps\": 2,", "\"ste\": \"masked\"", "\"precision\": \"bf16\"",
                          "\"plot_every\": 0,", "\"bf16_warmup_steps\": 1,", "\"seed\": 7,",
                          "\"lr\": 0.00169,"};
    int missing = -1;
    for (int i = 0; i < 7 && missing < 0; i++)
        if (!strstr(text, want[i]))
            missing = i;
    if (missing >= 0)
        fprintf(stderr, "    config.json lacks %s:\n%s\n", want[missing], text);
    qs_free(text);
    ASSERT_EQ_INT(missing, -1);
    snprintf(path, sizeof path, "%s/manyflags/ckpt/step_2/train_state.bin", test_tmp_dir());
    ASSERT_TRUE(fileio_exists(path));   /* and the run did stop after 2 steps */
}

/* qat true but nothing would ever be quantized is refused before the run dir
 * exists: a selection with no Linear in it, and a bf16 warmup that outlasts the
 * run (issue 16: such runs used to exit 0 without a quantizer log). */
TEST(cli_train, a_run_that_would_never_quantize_is_refused)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = write_config("noqat", "");
    ASSERT_TRUE(cfg != NULL);
    char args[1400], dir[700];
    snprintf(dir, sizeof dir, "%s/noqat", test_tmp_dir());
    snprintf(args, sizeof args, "train --config %s --set 'quant_modules=default,!layers.3-5.mlp.*'",
             cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "selects no Linear of this 8-block model") != NULL);
    ASSERT_TRUE(strstr(cli_err, "qat=false") != NULL);
    ASSERT_TRUE(!fileio_exists(dir));
    snprintf(args, sizeof args, "train --config %s --bf16-warmup-steps 6", cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "bf16_warmup_steps 6 >= steps 6 with qat true") != NULL);
    ASSERT_TRUE(!fileio_exists(dir));
    /* the same settings without QAT are a valid baseline run */
    snprintf(args, sizeof args, "train --config %s --bf16-warmup-steps 6 --set qat=false --steps 1 "
             "--quiet", cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
}

/* The case a new user hit: stories260K has 5 blocks, the default selection skips
 * the first 3 and the last 2, so nothing is left; train names the count and a fix. */
TEST(cli_train, default_selection_on_a_5_block_model_is_refused_with_a_hint)
{
    char model[512];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    if (!test_shared_path(model, sizeof model, "models/stories260K"))
        SKIP("../shared/models/stories260K not present");
    char args[1600], path[700], js[1600];
    snprintf(args, sizeof args,
             "tokenize --model %s --input data/demo/train.txt --out %s/s260_shards", model,
             test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    snprintf(path, sizeof path, "%s/s260.json", test_tmp_dir());
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"%s\",\"train_data\":\"%s/s260_shards\",\"out_dir\":\"%s/s260\","
                     "\"batch_size\":2,\"seq_len\":16,\"steps\":4,\"bf16_warmup_steps\":2}",
                     model, test_tmp_dir(), test_tmp_dir());
    ASSERT_OK(fileio_write_atomic(path, js, (size_t)n, NULL), NULL);
    snprintf(args, sizeof args, "train --config %s", path);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "quant_modules 'default' selects no Linear of this 5-block model") !=
                NULL);
    ASSERT_TRUE(strstr(cli_err, "quant_modules=layers.*.mlp.*") != NULL);
    snprintf(args, sizeof args, "train --config %s --set 'quant_modules=layers.*.mlp.*' --quiet",
             path);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    snprintf(path, sizeof path, "%s/s260/quant.jsonl.zst", test_tmp_dir());
    ASSERT_TRUE(fileio_exists(path));
}

/* Files that ship with qatscope are found next to the binary, not in the current
 * directory (issue 16.4): from an empty directory elsewhere, demo finds the bundled
 * model and text, train's in-loop eval finds tasks/arc_easy.json without
 * eval_tasks_dir, and eval finds it without --tasks-dir. */
TEST(cli_train, demo_in_loop_eval_and_eval_work_from_any_directory)
{
    char bin[4096], root[4096];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    ASSERT_TRUE(realpath(getenv("QS_BIN"), bin) != NULL);
    ASSERT_TRUE(realpath(".", root) != NULL);
    const char *shards = train_shards();
    ASSERT_TRUE(shards != NULL);
    char away[700], cmd[16384], path[800], js[16384];
    snprintf(away, sizeof away, "%s/elsewhere", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(away, NULL), NULL);
    snprintf(cmd, sizeof cmd, "cd %s && %s demo --out d --steps 4 --warmup 2 >out_demo.txt 2>&1",
             away, bin);
    ASSERT_EQ_INT(WEXITSTATUS(system(cmd)), 0);
    snprintf(path, sizeof path, "%s/d/run/ckpt/step_4/train_state.bin", away);
    ASSERT_TRUE(fileio_exists(path));

    char shards_abs[4096];
    ASSERT_TRUE(realpath(shards, shards_abs) != NULL);
    snprintf(path, sizeof path, "%s/loop.json", away);
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"%s/data/demo/model\",\"train_data\":\"%s\",\"out_dir\":\"run\","
                     "\"batch_size\":2,\"seq_len\":16,\"steps\":2,\"bf16_warmup_steps\":1,"
                     "\"eval_every\":2,\"eval_tasks\":[\"arc_easy\"],"
                     "\"eval_data_dir\":\"%s/tests/data/tasks/data\",\"eval_subset\":0,"
                     "\"eval_val_batches\":0}",
                     root, shards_abs, root);
    ASSERT_OK(fileio_write_atomic(path, js, (size_t)n, NULL), NULL);
    snprintf(cmd, sizeof cmd, "cd %s && %s train --config loop.json --quiet >out_train.txt 2>&1",
             away, bin);
    ASSERT_EQ_INT(WEXITSTATUS(system(cmd)), 0);
    char *text;
    size_t len;
    snprintf(path, sizeof path, "%s/run/metrics.jsonl", away);
    ASSERT_OK(fileio_read_all(path, &text, &len, NULL), NULL);
    int evaluated = strstr(text, "{\"type\":\"eval\",\"step\":2,") != NULL &&
                    strstr(text, "\"arc_easy\":{\"acc\":") != NULL;
    qs_free(text);
    ASSERT_TRUE(evaluated);
    snprintf(path, sizeof path, "%s/run/config.json", away);   /* the snapshot names the dir */
    ASSERT_OK(fileio_read_all(path, &text, &len, NULL), NULL);
    char want[4200];
    snprintf(want, sizeof want, "\"eval_tasks_dir\": \"%s/tasks\"", root);
    int named = strstr(text, want) != NULL;
    qs_free(text);
    ASSERT_TRUE(named);

    snprintf(cmd, sizeof cmd, "cd %s && %s eval --model %s/data/demo/model --tasks arc_easy "
             "--data-dir %s/tests/data/tasks/data --output r.json >out_eval.txt 2>&1",
             away, bin, root, root);
    ASSERT_EQ_INT(WEXITSTATUS(system(cmd)), 0);

    /* started inside the tree (where tasks/ would show as a relative path), resumed from
     * elsewhere: the snapshot's eval_tasks_dir is absolute */
    snprintf(cmd, sizeof cmd, "cd %s && %s train --config %s/loop.json --set out_dir=%s/run2 "
             "--quiet >%s/out_train2.txt 2>&1", root, bin, away, away, away);
    ASSERT_EQ_INT(WEXITSTATUS(system(cmd)), 0);
    snprintf(cmd, sizeof cmd, "cd %s && %s train --resume run2 --set steps=4 --quiet "
             ">out_resume2.txt 2>&1", away, bin);
    ASSERT_EQ_INT(WEXITSTATUS(system(cmd)), 0);
    snprintf(path, sizeof path, "%s/run2/metrics.jsonl", away);
    ASSERT_OK(fileio_read_all(path, &text, &len, NULL), NULL);
    evaluated = strstr(text, "{\"type\":\"eval\",\"step\":4,") != NULL;
    qs_free(text);
    ASSERT_TRUE(evaluated);
}

/* Errors that come from deep inside name the config key (issue 16.8): the
 * estimator, a recipe a quantizer refuses, a seq_len above the model's context;
 * each before the run directory exists. */
TEST(cli_train, recipe_and_seq_len_errors_name_the_key)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = write_config("keyerr", "");
    ASSERT_TRUE(cfg != NULL);
    struct {
        const char *set, *want;
    } cases[] = {
        {"amax_estimator=bogus", "amax_estimator: unknown estimator 'bogus'"},
        {"amax_history=10", "amax_estimator 'max-window:64', amax_history 10, amax_margin 0: "
                            "recipe: max-window:64 needs a history of at least 64 steps"},
        {"seq_len=300", "data/demo/model: seq_len 300 exceeds the model's context of 256 tokens "
                        "(max_position_embeddings in config.json); lower seq_len"},
    };
    char args[1400], dir[700];
    snprintf(dir, sizeof dir, "%s/keyerr", test_tmp_dir());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "train --config %s --set %s", cfg, cases[i].set);
        int rc = test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err);
        if (rc != 2 || !strstr(cli_err, cases[i].want))
            TEST_FAIL_AT("--set %s: exit %d, stderr '%s'", cases[i].set, rc, cli_err);
        ASSERT_TRUE(!fileio_exists(dir));
    }
}

/* A resume that would silently do something else is refused (issue 16.8):
 * --config beside --resume (the snapshot is the config), and a step count that is
 * not above the steps already done (it printed "steps 6..3" and did nothing);
 * the run directory is left as it was. */
TEST(cli_train, resume_refuses_a_config_file_and_steps_not_above_those_done)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = write_config("resumeerr", "");
    ASSERT_TRUE(cfg != NULL);
    char args[1400], dir[700], ev[800];
    snprintf(args, sizeof args, "train --config %s --steps 4 --quiet", cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    snprintf(dir, sizeof dir, "%s/resumeerr", test_tmp_dir());
    snprintf(ev, sizeof ev, "%s/events.jsonl", dir);
    char *before, *after;
    size_t nb, na;
    ASSERT_OK(fileio_read_all(ev, &before, &nb, NULL), NULL);
    snprintf(args, sizeof args, "train --resume %s --config %s", dir, cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "--config and --resume together") != NULL);
    snprintf(args, sizeof args, "train --resume %s --set steps=3", dir);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "steps 3: the latest checkpoint ckpt/step_4 has 4 steps done; "
                                "to continue, resume with --set steps=N above 4") != NULL);
    snprintf(args, sizeof args, "train --resume %s", dir);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "(the run is complete)") != NULL);
    ASSERT_OK(fileio_read_all(ev, &after, &na, NULL), NULL);
    int same = na == nb && !memcmp(before, after, na);
    qs_free(before);
    qs_free(after);
    ASSERT_TRUE(same);
    snprintf(args, sizeof args, "train --resume %s --set steps=5 --quiet", dir);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
}

/* A damaged line in the middle of metrics.jsonl or events.jsonl refuses the
 * resume by file and line, both logs untouched (it was carried into the resumed
 * run); a cut last line, a killed writer's, is dropped and the resume goes on. */
TEST(cli_train, resume_refuses_a_damaged_log_line_and_drops_a_cut_last_line)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    const char *cfg = write_config("damaged", "");
    ASSERT_TRUE(cfg != NULL);
    char args[1400], dir[700], met[800], ev[800];
    snprintf(args, sizeof args, "train --config %s --steps 4 --quiet", cfg);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    snprintf(dir, sizeof dir, "%s/damaged", test_tmp_dir());
    snprintf(met, sizeof met, "%s/metrics.jsonl", dir);
    snprintf(ev, sizeof ev, "%s/events.jsonl", dir);
    char *m0, *e0, *m1, *e1;
    size_t nm0, ne0, nm1, ne1;
    ASSERT_OK(fileio_read_all(met, &m0, &nm0, NULL), NULL);
    ASSERT_OK(fileio_read_all(ev, &e0, &ne0, NULL), NULL);
    const char *nl = memchr(m0, '\n', nm0);
    ASSERT_TRUE(nl != NULL && (size_t)(nl - m0) + 1 < nm0);   /* a line after the first */
    size_t cut = (size_t)(nl - m0) + 1;
    static const char *bad[] = {"{\"loss\":2.5}\n", "garbage\n", "{\"step\":\"2\"}\n", "[1,2]\n"};
    for (int i = 0; i < 4; i++) {
        /* the damage in metrics.jsonl as its second line, or in events.jsonl last */
        char *buf = qs_malloc(nm0 + ne0 + 64);
        ASSERT_TRUE(buf != NULL);
        const char *file = i % 2 ? ev : met;
        size_t n;
        if (i % 2) {
            memcpy(buf, e0, ne0);
            n = ne0 + (size_t)sprintf(buf + ne0, "%s", bad[i]);
        } else {
            memcpy(buf, m0, cut);
            n = cut + (size_t)sprintf(buf + cut, "%s", bad[i]);
            memcpy(buf + n, m0 + cut, nm0 - cut);
            n += nm0 - cut;
        }
        ASSERT_OK(fileio_write_atomic(file, buf, n, NULL), NULL);
        snprintf(args, sizeof args, "train --resume %s --set steps=6 --quiet", dir);
        int rc = test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err);
        ASSERT_TRUE(rc != 0);
        ASSERT_TRUE(strstr(cli_err, i % 2 ? "events.jsonl" : "metrics.jsonl") != NULL);
        ASSERT_TRUE(strstr(cli_err, "not a record train writes") != NULL);
        ASSERT_TRUE(strchr(cli_err, '\n') == cli_err + strlen(cli_err) - 1);   /* one line */
        ASSERT_OK(fileio_read_all(met, &m1, &nm1, NULL), NULL);
        ASSERT_OK(fileio_read_all(ev, &e1, &ne1, NULL), NULL);
        int same = (i % 2 ? nm1 == nm0 && !memcmp(m1, m0, nm0) && ne1 == n && !memcmp(e1, buf, n)
                          : nm1 == n && !memcmp(m1, buf, n) && ne1 == ne0 && !memcmp(e1, e0, ne0));
        qs_free(m1);
        qs_free(e1);
        qs_free(buf);
        ASSERT_TRUE(same);
        ASSERT_OK(fileio_write_atomic(file, i % 2 ? e0 : m0, i % 2 ? ne0 : nm0, NULL), NULL);
    }
    /* a cut last line: dropped, the resumed logs hold whole JSON lines only */
    char *buf = qs_malloc(nm0 + 32);
    ASSERT_TRUE(buf != NULL);
    memcpy(buf, m0, nm0);
    size_t n = nm0 + (size_t)sprintf(buf + nm0, "{\"step\":9,\"lo");
    ASSERT_OK(fileio_write_atomic(met, buf, n, NULL), NULL);
    qs_free(buf);
    snprintf(args, sizeof args, "train --resume %s --set steps=6 --quiet", dir);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    ASSERT_OK(fileio_read_all(met, &m1, &nm1, NULL), NULL);
    int whole = nm1 > nm0 && !memcmp(m1, m0, nm0) && m1[nm1 - 1] == '\n' &&
                strstr(m1, "\"lo\n") == NULL && strstr(m1, "\"step\":9") == NULL;
    qs_free(m1);
    qs_free(m0);
    qs_free(e0);
    ASSERT_TRUE(whole);
}
