/* test_cli_failfast.c: the commands that load a model check their other inputs
 * first.  A 1B model takes 5-30 s and gigabytes to load; a wrong data path, a
 * missing text file or an output directory that cannot be made must fail in a
 * fraction of a second, not after the load.  Each test runs the command on a
 * model directory whose config and tokenizer are the demo model's but whose
 * model.safetensors is damaged: the error must name the other input, and a
 * control run with that input fixed must fail on the safetensors (so the model
 * is really unreadable and the order is what the first run shows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "test.h"

static char ff_out[65536], ff_err[8192];

/* TMP/<name>: the demo model's config and tokenizer, a damaged safetensors. */
static int ff_damaged_model(const char *name, char *dir, size_t dir_bytes)
{
    static const char *const keep[] = {"config.json", "tokenizer.json", "tokenizer.model",
                                       "tokenizer_config.json"};
    char src[300], dst[900];
    snprintf(dir, dir_bytes, "%s/%s", test_tmp_dir(), name);
    if (fileio_mkdir_p(dir, NULL))
        return -1;
    for (int i = 0; i < 4; i++) {
        snprintf(src, sizeof src, "data/demo/model/%s", keep[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, keep[i]);
        if (fileio_copy(src, dst, NULL))
            return -1;
    }
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    return fileio_write_atomic(dst, "\x08\0\0\0\0\0\0\0{}", 10, NULL) ? -1 : 0;
}

TEST(cli_failfast, eval_reads_the_task_data_before_the_weights)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char dir[600], empty[600], args[2000], out[700];
    ASSERT_EQ_INT(ff_damaged_model("ff_eval_model", dir, sizeof dir), 0);
    snprintf(empty, sizeof empty, "%s/ff_eval_nodata", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(empty, NULL), NULL);
    snprintf(out, sizeof out, "%s/ff_eval.json", test_tmp_dir());
    snprintf(args, sizeof args, "eval --model %s --tasks arc_easy --data-dir %s --output %s", dir,
             empty, out);
    ASSERT_EQ_INT(test_run_cli(args, ff_out, sizeof ff_out, ff_err, sizeof ff_err), 2);
    ASSERT_TRUE(strstr(ff_err, "no arc_easy test data found") != NULL);
    ASSERT_TRUE(strstr(ff_err, "ff_eval_nodata") != NULL);
    snprintf(args, sizeof args, "eval --model %s --tasks arc_easy --data-dir tests/data/tasks/data "
             "--output %s", dir, out);
    ASSERT_EQ_INT(test_run_cli(args, ff_out, sizeof ff_out, ff_err, sizeof ff_err), 2);
    ASSERT_TRUE(strstr(ff_err, "model.safetensors") != NULL);
    ASSERT_TRUE(!fileio_exists(out));   /* no results file from a failed eval */
    /* the context: --max-length past the config's, a choice longer than it (both
     * came after the weights' load) */
    static const char *const lens[][2] = {
        {"100000", "--max-length: 100000 exceeds the model's context of 256 ("},
        {"2", "arc_easy doc 0: choice 0 is "}};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "eval --model %s --tasks arc_easy --data-dir "
                 "tests/data/tasks/data --max-length %s --output %s", dir, lens[i][0], out);
        ASSERT_EQ_INT(test_run_cli(args, ff_out, sizeof ff_out, ff_err, sizeof ff_err), 2);
        if (!strstr(ff_err, lens[i][1]))
            fprintf(stderr, "    case %d: %s", i, ff_err);
        ASSERT_TRUE(strstr(ff_err, lens[i][1]) != NULL && !strstr(ff_err, "safetensors"));
    }
}

TEST(cli_failfast, ppl_reads_and_checks_the_text_before_the_weights)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char dir[600], args[2000];
    ASSERT_EQ_INT(ff_damaged_model("ff_ppl_model", dir, sizeof dir), 0);
    snprintf(args, sizeof args, "ppl --model %s --text %s/ff_no_such_text.txt", dir,
             test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, ff_out, sizeof ff_out, ff_err, sizeof ff_err), 2);
    ASSERT_TRUE(strstr(ff_err, "ff_no_such_text.txt: cannot open") != NULL);
    /* the window against the config's context, before the load too */
    snprintf(args, sizeof args, "ppl --model %s --text README.md --window 1000000", dir);
    ASSERT_EQ_INT(test_run_cli(args, ff_out, sizeof ff_out, ff_err, sizeof ff_err), 2);
    ASSERT_TRUE(strstr(ff_err, "--window: 1000000 exceeds the model's context") != NULL);
    snprintf(args, sizeof args, "ppl --model %s --text README.md", dir);
    ASSERT_EQ_INT(test_run_cli(args, ff_out, sizeof ff_out, ff_err, sizeof ff_err), 2);
    ASSERT_TRUE(strstr(ff_err, "model.safetensors") != NULL);
}

TEST(cli_failfast, export_probes_its_output_directory_before_the_weights)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char dir[600], args[2000], blocker[700], out[800];
    ASSERT_EQ_INT(ff_damaged_model("ff_export_model", dir, sizeof dir), 0);
    /* --out under a regular file: no directory can be made there */
    snprintf(blocker, sizeof blocker, "%s/ff_export_blocker", test_tmp_dir());
    ASSERT_OK(fileio_write_atomic(blocker, "x", 1, NULL), NULL);
    snprintf(args, sizeof args, "export --format hif8 --model %s --out %s/out", dir, blocker);
    ASSERT_EQ_INT(test_run_cli(args, ff_out, sizeof ff_out, ff_err, sizeof ff_err), 2);
    ASSERT_TRUE(strstr(ff_err, "ff_export_blocker") != NULL);
    ASSERT_TRUE(strstr(ff_err, "safetensors") == NULL);
    snprintf(out, sizeof out, "%s/ff_export_out", test_tmp_dir());
    snprintf(args, sizeof args, "export --format hif8 --model %s --out %s", dir, out);
    ASSERT_EQ_INT(test_run_cli(args, ff_out, sizeof ff_out, ff_err, sizeof ff_err), 2);
    ASSERT_TRUE(strstr(ff_err, "model.safetensors") != NULL);
    ASSERT_TRUE(!fileio_exists(out));   /* and no directory left behind by the probe */
}

/* An error stays one line whatever the input holds: control characters from a
 * flag value (or a template, a label) are printed as escapes, so no input can
 * start a line of its own ("\nqatscope: ..." once printed a fake second error). */
TEST(cli_failfast, control_characters_in_inputs_stay_on_one_line)
{
    char out[4096], err[2048];
    static const char *const cases[][2] = {
        {"ppl --model data/demo/model --text x --window \"$(printf '8\\nqatscope: fake')\"",
         "got '8\\nqatscope: fake'"},
        {"generate --model data/demo/model --prompt a -n \"$(printf '1\\t2\\033')\"",
         "got '1\\t2\\x1B'"},
    };
    for (int i = 0; i < 2; i++) {
        int rc = test_run_cli(cases[i][0], out, sizeof out, err, sizeof err);
        if (rc == -100)
            SKIP("QS_BIN not set");
        ASSERT_EQ_INT(rc, 2);
        if (!strstr(err, cases[i][1]))
            fprintf(stderr, "    case %d: %s", i, err);
        ASSERT_TRUE(strstr(err, cases[i][1]) != NULL);
        ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1);
    }
}

/* A config.json that says fewer blocks than the checkpoint holds is refused (the
 * last blocks were dropped silently), by the plain and the packed loader alike. */
TEST(cli_failfast, checkpoint_with_more_blocks_than_the_config_is_refused)
{
    char dir[600], src[900], dst[900], *cfg;
    size_t n;
    ASSERT_EQ_INT(ff_damaged_model("ff_layers", dir, sizeof dir), 0);
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    ASSERT_OK(fileio_copy("data/demo/model/model.safetensors", dst, NULL), NULL);
    snprintf(src, sizeof src, "%s/config.json", dir);
    ASSERT_OK(fileio_read_all(src, &cfg, &n, NULL), NULL);
    char *at = strstr(cfg, "\"num_hidden_layers\": 8");
    ASSERT_TRUE(at != NULL);
    at[strlen("\"num_hidden_layers\": ")] = '7';
    ASSERT_OK(fileio_write_atomic(src, cfg, n, NULL), NULL);
    qs_free(cfg);
    static const char *const precs[] = {"fp32", "bf16"};
    for (int i = 0; i < 2; i++) {
        char args[1400];
        snprintf(args, sizeof args, "ppl --model %s --text data/demo/train.txt --precision %s",
                 dir, precs[i]);
        int rc = test_run_cli(args, ff_out, sizeof ff_out, ff_err, sizeof ff_err);
        if (rc == -100)
            SKIP("QS_BIN not set");
        ASSERT_EQ_INT(rc, 2);
        if (!strstr(ff_err, "model.safetensors: tensor 'model.layers.7."))
            fprintf(stderr, "    %s: %s", precs[i], ff_err);
        ASSERT_TRUE(strstr(ff_err, "model.safetensors: tensor 'model.layers.7.") &&
                    strstr(ff_err, "of block 7, but config.json's num_hidden_layers is 7"));
    }
}

/* reproduce checks --runs and --lr-sweep before anything is built: a bad lr used to
 * be found after the world and the base model (minutes), and "", "," or "1," ran
 * every run or none.  A --tasks-dir that does not exist would be the next error,
 * so the order shows without a study being run. */
TEST(cli_failfast, reproduce_checks_runs_and_lr_sweep_first)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    static const char *const cases[][2] = {
        {"--lr-sweep abc", "--lr-sweep: expected learning rates in (0, 1] separated by commas, got 'abc'"},
        {"--lr-sweep -1", "got '-1'"},
        {"--lr-sweep 0", "got '0'"},
        {"--lr-sweep nan", "got 'nan'"},
        {"--lr-sweep 0x1p-10", "got '0x1p-10'"},
        {"--lr-sweep 1e-3,", "--lr-sweep: an empty item in '1e-3,'"},
        {"--runs ''", "--runs: empty list; expected grid runs by name or number"},
        {"--runs ,", "--runs: an empty item in ','"},
        {"--runs 1,", "--runs: an empty item in '1,'"},
        {"--runs 1,,5", "--runs: an empty item in '1,,5'"},
    };
    char out[600], args[1200];
    snprintf(out, sizeof out, "%s/ff_repro", test_tmp_dir());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "reproduce --quick --out %s --tasks-dir %s/ff_no_tasks %s", out,
                 test_tmp_dir(), cases[i][0]);
        ASSERT_EQ_INT(test_run_cli(args, ff_out, sizeof ff_out, ff_err, sizeof ff_err), 2);
        if (!strstr(ff_err, cases[i][1]) || strchr(ff_err, '\n') != ff_err + strlen(ff_err) - 1)
            TEST_FAIL_AT("%s: stderr was: %s", cases[i][0], ff_err);
        ASSERT_TRUE(!fileio_exists(out));   /* nothing made */
    }
    /* the control: good lists get as far as the missing task definition */
    snprintf(args, sizeof args, "reproduce --quick --out %s --tasks-dir %s/ff_no_tasks --runs 1,8s "
             "--lr-sweep 3e-3,1", out, test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, ff_out, sizeof ff_out, ff_err, sizeof ff_err), 2);
    ASSERT_TRUE(strstr(ff_err, "fact probe's task definition is missing") != NULL);
}
