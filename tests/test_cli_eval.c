/* test_cli_eval.c: `qatscope eval` as a user meets it, on the bundled tiny model
 * and the self-made task data in tests/data/tasks/data: output paths checked
 * before any scoring (missing directories made, unusable ones refused) and
 * results + samples published together or not at all. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "test.h"

#define EVAL_ARGS "eval --model data/demo/model --tasks arc_easy --data-dir tests/data/tasks/data"

static char cli_out[65536], cli_err[8192];

/* entries of dir whose name contains ".tmp" (left-over temp files) */
static int cli_eval_stray_temps(const char *dir)
{
    DIR *dh = opendir(dir);
    if (!dh)
        return -1;
    int n = 0;
    for (struct dirent *de; (de = readdir(dh));)
        n += strstr(de->d_name, ".tmp") != NULL;
    closedir(dh);
    return n;
}

TEST(cli_eval, output_and_samples_in_missing_directories_are_created)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char args[2000], res[600], smp[600];
    snprintf(res, sizeof res, "%s/ev_new/base/results.json", test_tmp_dir());
    snprintf(smp, sizeof smp, "%s/ev_new/logs/deep/samples.jsonl.zst", test_tmp_dir());
    snprintf(args, sizeof args, EVAL_ARGS " --output %s --log-samples %s", res, smp);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    char *text;
    size_t n;
    ASSERT_OK(fileio_read_all(res, &text, &n, NULL), NULL);
    int ok = strstr(text, "\"arc_easy\"") != NULL;
    qs_free(text);
    ASSERT_TRUE(ok);
    ASSERT_OK(fileio_read_all(smp, &text, &n, NULL), NULL);   /* .zst: read back decompressed */
    ok = strncmp(text, "{\"task\":\"arc_easy\"", 18) == 0;
    qs_free(text);
    ASSERT_TRUE(ok);
    snprintf(res, sizeof res, "%s/ev_new/base", test_tmp_dir());
    snprintf(smp, sizeof smp, "%s/ev_new/logs/deep", test_tmp_dir());
    ASSERT_EQ_INT(cli_eval_stray_temps(res), 0);
    ASSERT_EQ_INT(cli_eval_stray_temps(smp), 0);
}

/* An unusable --output or --log-samples is one error line, exit 2, before the
 * model is even loaded (a missing model would be the error otherwise), and a bad
 * --log-samples leaves no results.json behind. */
TEST(cli_eval, unusable_output_paths_fail_up_front_and_write_nothing)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char dir[600], file[700], res[700], args[2400];
    snprintf(dir, sizeof dir, "%s/ev_bad", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, NULL), NULL);
    snprintf(file, sizeof file, "%s/plain_file", dir);
    ASSERT_OK(fileio_write_atomic(file, "x", 1, NULL), NULL);
    snprintf(res, sizeof res, "%s/results.json", dir);

    snprintf(args, sizeof args,
             "eval --model %s/no_such_model --tasks arc_easy --data-dir tests/data/tasks/data "
             "--output %s/results.json", dir, file);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "--output: cannot create the directory of") != NULL);
    ASSERT_TRUE(strstr(cli_err, "not a directory") != NULL);
    ASSERT_TRUE(strchr(cli_err, '\n') == cli_err + strlen(cli_err) - 1);

    snprintf(args, sizeof args, EVAL_ARGS " --output %s", dir);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "is a directory; expected a file name") != NULL);

    snprintf(args, sizeof args, EVAL_ARGS " --output %s --log-samples %s/s.jsonl.zst", res, file);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "--log-samples: cannot create the directory of") != NULL);
    ASSERT_TRUE(!fileio_exists(res));
    ASSERT_EQ_STR(cli_out, "");

    snprintf(args, sizeof args, EVAL_ARGS " --output %s --log-samples %s", res, res);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "is the --output file") != NULL);
    ASSERT_TRUE(!fileio_exists(res));
    /* the same file under another spelling, or through a link, before any scoring */
    char alias[800], link[800];
    snprintf(alias, sizeof alias, "%s/../ev_bad/results.json", dir);
    snprintf(args, sizeof args, EVAL_ARGS " --output %s --log-samples %s", res, alias);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "/../ev_bad/results.json' is the --output file '") != NULL);
    snprintf(link, sizeof link, "%s/link.json", dir);
    unlink(link);
    ASSERT_EQ_INT(symlink("results.json", link), 0);
    snprintf(args, sizeof args, EVAL_ARGS " --output %s --log-samples %s", res, link);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "link.json' is the --output file '") != NULL);
    ASSERT_TRUE(!fileio_exists(res));
    unlink(link);

    if (geteuid() != 0) {   /* root writes into a 0555 directory anyway */
        char ro[700];
        snprintf(ro, sizeof ro, "%s/read_only", dir);
        ASSERT_OK(fileio_mkdir_p(ro, NULL), NULL);
        ASSERT_EQ_INT(chmod(ro, 0555), 0);
        snprintf(args, sizeof args, EVAL_ARGS " --output %s/results.json", ro);
        int rc = test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err);
        chmod(ro, 0755);
        ASSERT_EQ_INT(rc, 2);
        ASSERT_TRUE(strstr(cli_err, "--output: cannot write in") != NULL);
    }
    ASSERT_EQ_INT(cli_eval_stray_temps(dir), 0);
}

/* An output that is one of the inputs (a model file, a task data file, a task
 * definition; any spelling, a link) is refused before any work, naming the
 * file and the flag, and the file is left as it was; a new file beside the
 * model's (results.json in the model directory) is fine. */
TEST(cli_eval, outputs_never_overwrite_inputs)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    static const char *const model_files[] = {"config.json", "model.safetensors", "tokenizer.json",
                                              "tokenizer.model", "tokenizer_config.json"};
    char dir[600], m[700], tk[700], src[800], dst[800], args[3000];
    snprintf(dir, sizeof dir, "%s/ev_inputs", test_tmp_dir());
    snprintf(m, sizeof m, "%s/model", dir);
    snprintf(tk, sizeof tk, "%s/tasks", dir);
    ASSERT_OK(fileio_mkdir_p(m, NULL), NULL);
    ASSERT_OK(fileio_mkdir_p(tk, NULL), NULL);
    for (size_t i = 0; i < sizeof model_files / sizeof *model_files; i++) {
        snprintf(src, sizeof src, "data/demo/model/%s", model_files[i]);
        snprintf(dst, sizeof dst, "%s/%s", m, model_files[i]);
        ASSERT_OK(fileio_copy(src, dst, NULL), NULL);
    }
    snprintf(dst, sizeof dst, "%s/arc_easy.json", tk);
    ASSERT_OK(fileio_copy("tasks/arc_easy.json", dst, NULL), NULL);
    char link[800];
    snprintf(link, sizeof link, "%s/link.json", dir);
    unlink(link);
    ASSERT_EQ_INT(symlink("model/config.json", link), 0);

    char *before;
    size_t n_before;
    snprintf(src, sizeof src, "%s/config.json", m);
    ASSERT_OK(fileio_read_all(src, &before, &n_before, NULL), NULL);
    const struct { const char *flag, *out, *in_flag, *named; } cases[] = {
        {"--output", "%s/model/config.json", "--model", "config.json"},
        {"--output", "%s/model/../model/model.safetensors", "--model", "model.safetensors"},
        {"--output", "%s/link.json", "--model", "config.json"},
        {"--log-samples", "%s/model/tokenizer.json", "--model", "tokenizer.json"},
        {"--output", "%s/tasks/arc_easy.json", "--tasks-dir", "arc_easy.json"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[800];
        snprintf(out, sizeof out, cases[i].out, dir);
        if (!strcmp(cases[i].flag, "--output"))
            snprintf(args, sizeof args, "eval --model %s --tasks arc_easy --data-dir tests/data/tasks/data "
                     "--tasks-dir %s --output %s", m, tk, out);
        else
            snprintf(args, sizeof args, "eval --model %s --tasks arc_easy --data-dir tests/data/tasks/data "
                     "--tasks-dir %s --output %s/r.json --log-samples %s", m, tk, dir, out);
        ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
        char want[1000];
        snprintf(want, sizeof want, "%s: '%s' is the file", cases[i].flag, out);
        ASSERT_TRUE(strstr(cli_err, want) != NULL);
        snprintf(want, sizeof want, "%s' of %s; expected another name", cases[i].named, cases[i].in_flag);
        ASSERT_TRUE(strstr(cli_err, want) != NULL);
        ASSERT_TRUE(strchr(cli_err, '\n') == cli_err + strlen(cli_err) - 1);
        ASSERT_EQ_STR(cli_out, "");
    }
    char *after;
    size_t n_after;
    ASSERT_OK(fileio_read_all(src, &after, &n_after, NULL), NULL);
    int same = n_after == n_before && !memcmp(after, before, n_before);
    qs_free(after);
    qs_free(before);
    ASSERT_TRUE(same);
    snprintf(dst, sizeof dst, "%s/model/model.safetensors", dir);
    struct stat st;
    ASSERT_TRUE(stat(dst, &st) == 0 && st.st_size > 100000);

    /* a task data file below --data-dir */
    char data[700], f[800];
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(args, sizeof args, "cp -r tests/data/tasks/data %s", dir);
    ASSERT_EQ_INT(system(args), 0);
    snprintf(f, sizeof f, "%s/arc/hf_layout/ARC-Easy-test.jsonl", data);
    ASSERT_TRUE(fileio_exists(f));
    snprintf(args, sizeof args, "eval --model %s --tasks arc_easy --data-dir %s --tasks-dir %s --output %s",
             m, data, tk, f);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "of --data-dir; expected another name") != NULL);

    /* a new file in the model's directory is an output like any other */
    snprintf(args, sizeof args, "eval --model %s --tasks arc_easy --data-dir tests/data/tasks/data "
             "--tasks-dir %s --limit 2 --output %s/results.json", m, tk, m);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    snprintf(dst, sizeof dst, "%s/results.json", m);
    ASSERT_TRUE(fileio_exists(dst));
}

/* An output that is a device is written in place (`--output /dev/stdout` works;
 * /dev/full reports its error, exit 2) and stays a device; a symbolic link
 * stays a link whose target gets the results. */
TEST(cli_eval, device_outputs_written_in_place_and_links_kept)
{
    struct stat st;
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode))
        SKIP("no /dev/full character device");
    ASSERT_EQ_INT(test_run_cli(EVAL_ARGS " --limit 2 --output /dev/full", cli_out, sizeof cli_out,
                               cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strstr(cli_err, "/dev/full: write failed: No space left on device") != NULL);
    ASSERT_TRUE(stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode));
    ASSERT_EQ_INT(test_run_cli(EVAL_ARGS " --limit 2 --output /dev/stdout", cli_out,
                               sizeof cli_out, cli_err, sizeof cli_err), 0);
    ASSERT_TRUE(strstr(cli_out, "\"results\": {") != NULL);

    char target[600], link[600], args[1400];
    snprintf(target, sizeof target, "%s/res_target.json", test_tmp_dir());
    snprintf(link, sizeof link, "%s/res_link.json", test_tmp_dir());
    unlink(link);
    ASSERT_EQ_INT(symlink("res_target.json", link), 0);
    snprintf(args, sizeof args, EVAL_ARGS " --limit 2 --output %s", link);
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    ASSERT_TRUE(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    ASSERT_TRUE(stat(target, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 100);
    ASSERT_EQ_INT(cli_eval_stray_temps(test_tmp_dir()), 0);
}

/* A scoring error names the item (here a context too short for any answer). */
TEST(cli_eval, scoring_error_names_the_item)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char args[1200];
    snprintf(args, sizeof args, EVAL_ARGS " --max-length 2 --output %s/ml2.json", test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strncmp(cli_err, "qatscope: tests/data/tasks/data/arc/hf_layout/ARC-Easy-test.jsonl:",
                        66) == 0);   /* the item's file and line */
    ASSERT_TRUE(strstr(cli_err, ": arc_easy doc ") != NULL);
    ASSERT_TRUE(strstr(cli_err, ", more than the context of 2 (--max-length)\n") != NULL);
    snprintf(args, sizeof args, "eval --model data/demo/model --tasks hellaswag --data-dir "
             "tests/data/tasks/data --max-length 2 --output %s/ml2.json", test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    ASSERT_TRUE(strncmp(cli_err, "qatscope: tests/data/tasks/data/hellaswag/hellaswag_val.jsonl:",
                        62) == 0);
    ASSERT_EQ_INT(test_run_cli("compare --model data/demo/model --reference data/demo/model "
                               "--text a.txt --shards b", cli_out, sizeof cli_out, cli_err,
                               sizeof cli_err), 2);
    ASSERT_EQ_STR(cli_err, "qatscope: compare: --text and --shards exclude each other: give one\n");
}

/* Too few dev rows for --shots in one MMLU subject: the subject and its file are named. */
TEST(cli_eval, short_mmlu_dev_split_names_the_subject)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    static const char *const files[] = {"dev/abstract_algebra_dev.csv", "dev/anatomy_dev.csv",
                                        "dev/formal_logic_dev.csv", "test/abstract_algebra_test.csv",
                                        "test/anatomy_test.csv", "test/formal_logic_test.csv"};
    char root[600], dst[800], src[300], args[1600];
    snprintf(root, sizeof root, "%s/mmlu_short", test_tmp_dir());
    for (int i = 0; i < 6; i++) {
        snprintf(src, sizeof src, "tests/data/tasks/data/mmlu/%s", files[i]);
        snprintf(dst, sizeof dst, "%s/mmlu/%s", root, files[i]);
        char *slash = strrchr(dst, '/');
        *slash = 0;
        ASSERT_OK(fileio_mkdir_p(dst, NULL), NULL);
        *slash = '/';
        char *text;
        size_t n;
        ASSERT_OK(fileio_read_all(src, &text, &n, NULL), NULL);
        if (strstr(files[i], "anatomy_dev")) {   /* its first row only */
            char *nl = strchr(text, '\n');
            n = nl ? (size_t)(nl - text) + 1 : n;
        }
        ASSERT_OK(fileio_write_atomic(dst, text, n, NULL), NULL);
        qs_free(text);
    }
    snprintf(args, sizeof args, "eval --model data/demo/model --tasks mmlu --tasks-dir tests/data/tasks/defs "
             "--data-dir %s --shots 2 "
             "--output %s/mmlu_short.json", root, test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err), 2);
    char want[1200];   /* and the file the rows come from */
    snprintf(want, sizeof want, "qatscope: %s/mmlu/dev/anatomy_dev.csv: mmlu subject anatomy: "
             "2-shot needs 2 dev rows, found 1\n", root);
    ASSERT_EQ_STR(cli_err, want);
}

