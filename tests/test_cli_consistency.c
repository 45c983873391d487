/* test_cli_consistency.c: the rules every command follows the same way (issue 16.8):
 * --help answers on stdout with exit 0, documented flags are accepted, limits and
 * messages agree between commands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "test.h"

static char cli_out[65536], cli_err[8192];

/* Every command that `qatscope --help` lists answers `--help` with its usage on
 * stdout, nothing on stderr and exit 0 (`version --help` was an error). */
TEST(cli_consistency, every_listed_command_answers_help)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    static char list[65536];
    ASSERT_EQ_INT(test_run_cli("--help", list, sizeof list, cli_err, sizeof cli_err), 0);
    int n = 0;
    for (char *line = strstr(list, "\n  "); line; line = strstr(line + 1, "\n  ")) {
        char name[32], args[64];
        if (sscanf(line + 3, "%31s", name) != 1)
            continue;
        snprintf(args, sizeof args, "%s --help", name);
        int rc = test_run_cli(args, cli_out, sizeof cli_out, cli_err, sizeof cli_err);
        if (rc != 0 || !strstr(cli_out, "usage: qatscope") || cli_err[0])
            fprintf(stderr, "    %s --help: exit %d, stderr '%s'\n", name, rc, cli_err);
        ASSERT_EQ_INT(rc, 0);
        ASSERT_TRUE(strstr(cli_out, "usage: qatscope") != NULL);
        ASSERT_EQ_STR(cli_err, "");
        n++;
    }
    ASSERT_TRUE(n >= 15);
}

/* A failed write to stdout (`> /dev/full`) is one error line and exit 2 for every
 * command that prints its result there: main() names it, the command does not
 * add a second line of its own. */
TEST(cli_consistency, a_lost_stdout_is_one_error_line)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    if (!fileio_exists("/dev/full"))
        SKIP("no /dev/full");
    char text[600];
    snprintf(text, sizeof text, "%s/full_text.txt", test_tmp_dir());
    ASSERT_OK(fileio_write_atomic(text, "Once upon a time there was a cat.\n", 34, NULL), NULL);
    const char *const cases[] = {
        "inspect data/demo/model",
        "tokenize --model data/demo/model hello",
        "detokenize --model data/demo/model 1 2 3",
        "generate --model data/demo/model --prompt Once -n 2 --seed 1",
        "ppl --model data/demo/model --text %s",
        "ppl --model data/demo/model --text %s --json",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char args[1000], cmd[2400], err[800];
        snprintf(args, sizeof args, cases[i], text);
        snprintf(err, sizeof err, "%s/full_err.txt", test_tmp_dir());
        snprintf(cmd, sizeof cmd, "%s %s >/dev/full 2>%s", getenv("QS_BIN"), args, err);
        int st = system(cmd);
        char *out;
        size_t n;
        ASSERT_OK(fileio_read_all(err, &out, &n, NULL), NULL);
        int lines = 0;
        for (const char *p = out; (p = strstr(p, "qatscope: ")); p++)
            lines++;
        int said = strstr(out, "qatscope: stdout: write failed: No space left on device\n") != NULL;
        if (lines != 1 || !said)
            fprintf(stderr, "    %s: stderr '%s'\n", args, out);
        qs_free(out);
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 2);
        ASSERT_EQ_INT(lines, 1);
        ASSERT_TRUE(said);
    }
}

/* A command run without its required arguments says so in one line (no usage
 * text glued on with escaped newlines), exit 2, nothing on stdout. */
TEST(cli_consistency, missing_arguments_are_one_line)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    static const char *const cmds[] = {"eval", "train", "gate", "heatmap", "plot", "replay",
                                       "satstat", "inspect", "ppl", "generate", "export", "init",
                                       "tokenize", "detokenize", "compare", "hif8", "inspect a b"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        int rc = test_run_cli(cmds[i], cli_out, sizeof cli_out, cli_err, sizeof cli_err);
        size_t n = strlen(cli_err);
        int one = n > 11 && !strncmp(cli_err, "qatscope: ", 10) && strchr(cli_err, '\n') == cli_err + n - 1 &&
                  !strstr(cli_err, "\\n");
        if (rc != 2 || !one || cli_out[0])
            fprintf(stderr, "    %s: exit %d, stderr '%s'\n", cmds[i], rc, cli_err);
        ASSERT_EQ_INT(rc, 2);
        ASSERT_TRUE(one);
        ASSERT_EQ_STR(cli_out, "");
    }
}

/* Numbers and id lists are taken as typed: a leading blank, hex, an empty item or a
 * trailing comma is an error naming the flag, not silently read; `--stop-ids ""`
 * is the empty set (generate runs to -n). */
TEST(cli_consistency, numbers_and_id_lists_as_typed)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    static const char *const bad[][2] = {
        {"generate --model data/demo/model --prompt Once -n ' 5'", "-n: expected an integer"},
        {"generate --model data/demo/model --prompt Once -n 2 --temperature ' 1'",
         "--temperature: expected a decimal number"},
        /* decimal only: strtod read hex, so --max-drop 0x10 was 16 pp */
        {"gate --baseline b.json --candidate c.json --max-drop 0x10",
         "--max-drop: expected a decimal number in [0, 100], got '0x10'"},
        {"gate --baseline b.json --candidate c.json --max-drop-task arc_easy=0X1",
         "--max-drop-task: expected a decimal number"},
        {"generate --model data/demo/model --prompt Once -n 2 --top-p 0x1p-1",
         "--top-p: expected a decimal number in [1e-09, 1], got '0x1p-1'"},
        {"generate --model data/demo/model --prompt Once -n 2 --stop-ids 1,", "--stop-ids: expected"},
        {"generate --model data/demo/model --prompt Once -n 2 --stop-ids 1,,2", "--stop-ids: expected"},
        {"generate --model data/demo/model --prompt Once -n 2 --stop-ids ' 1'", "--stop-ids: expected"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = test_run_cli(bad[i][0], cli_out, sizeof cli_out, cli_err, sizeof cli_err);
        if (rc != 2 || !strstr(cli_err, bad[i][1]))
            fprintf(stderr, "    %s: exit %d, stderr '%s'\n", bad[i][0], rc, cli_err);
        ASSERT_EQ_INT(rc, 2);
        ASSERT_TRUE(strstr(cli_err, bad[i][1]) != NULL);
    }
    ASSERT_EQ_INT(test_run_cli("generate --model data/demo/model --prompt Once -n 3 --stop-ids '' "
                               "--temperature 0", cli_out, sizeof cli_out, cli_err, sizeof cli_err), 0);
    ASSERT_TRUE(strstr(cli_err, "3 new tokens") != NULL);
}

/* List flags have no empty items, and exclusive flags are not both taken (the
 * last one used to win): one error line each, before anything is loaded. */
TEST(cli_consistency, eval_task_lists_and_exclusive_flags)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    static const char *const bad[][2] = {
        {"eval --model no_model --tasks arc_easy, --data-dir tests/data/tasks/data --output x.json",
         "--tasks: expected a comma-separated list of task names, got 'arc_easy,' (an empty item)"},
        {"eval --model no_model --tasks ,arc_easy --data-dir tests/data/tasks/data --output x.json",
         "(an empty item)"},
        {"eval --model no_model --tasks arc_easy,,mmlu --data-dir tests/data/tasks/data --output x.json",
         "(an empty item)"},
        {"eval --model no_model --tasks arc_easy --bos --no-bos --data-dir tests/data/tasks/data "
         "--output x.json", "--bos and --no-bos exclude each other"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = test_run_cli(bad[i][0], cli_out, sizeof cli_out, cli_err, sizeof cli_err);
        if (rc != 2 || !strstr(cli_err, bad[i][1]))
            fprintf(stderr, "    %s: exit %d, stderr '%s'\n", bad[i][0], rc, cli_err);
        ASSERT_EQ_INT(rc, 2);
        ASSERT_TRUE(strstr(cli_err, bad[i][1]) != NULL);
    }
}
