/* test_tok_cli.c: qatscope tokenize / detokenize end to end (binary via QS_BIN). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "qs/mem.h"
#include "qs/tokenizer.h"
#include "test.h"

/* Run a shell command, capture up to cap-1 bytes of stdout; returns the exit status. */
static int run(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(tok_cli, ids_match_library_with_default_bos)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        SKIP("QS_BIN not set (run through make test)");
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd,
             "%s tokenize --tokenizer tests/data/tok/tiny_spm.json --ids 'The quick  fox'", bin);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 0);
    qs_diag d = {0};
    tokenizer *t;
    ASSERT_OK(tokenizer_create(&t, "tests/data/tok/tiny_spm.json", &d), &d);
    int32_t *ids;
    size_t n;
    ASSERT_OK(tokenizer_encode(t, "The quick  fox", 14, TOKENIZER_BOS_DEFAULT, &ids, &n, &d), &d);
    char want[4096];
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(want + o, sizeof want - o, i ? " %d" : "%d", (int)ids[i]);
    snprintf(want + o, sizeof want - o, "\n");
    qs_free(ids);
    tokenizer_destroy(t);
    ASSERT_EQ_STR(out, want);
    ASSERT_TRUE(out[0] == '1' && out[1] == ' '); /* BOS <s> = 1 first */
}

TEST(tok_cli, detokenize_of_tokenize_gives_text_back_via_stdin)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        SKIP("QS_BIN not set (run through make test)");
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd,
             "printf 'caf\\303\\251 \\t  tabs\\nnew line' | %s tokenize --tokenizer "
             "tests/data/tok/tiny_bytelevel.json --ids - | %s detokenize --tokenizer "
             "tests/data/tok/tiny_bytelevel.json -",
             bin, bin);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 0);
    ASSERT_EQ_STR(out, "caf\xc3\xa9 \t  tabs\nnew line\n");
}

TEST(tok_cli, pieces_mode_prints_id_and_escaped_piece)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        SKIP("QS_BIN not set (run through make test)");
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd,
             "%s tokenize --tokenizer tests/data/tok/tiny_spm.json --no-bos 'a\tb'", bin);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 0);
    ASSERT_TRUE(strstr(out, "\t<0x09>\n") != NULL);
    ASSERT_TRUE(strstr(out, "\t\xE2\x96\x81" "a\n") != NULL);
}

TEST(tok_cli, bad_tokenizer_and_bad_id_exit_2_with_one_line)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        SKIP("QS_BIN not set (run through make test)");
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd,
             "%s tokenize --tokenizer tests/data/tok/bad/unigram.json x 2>&1", bin);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 2);
    ASSERT_TRUE(strstr(out, "unigram.json: $.model.type: 'Unigram' is not supported") != NULL);
    ASSERT_TRUE(strchr(out, '\n') == out + strlen(out) - 1);
    snprintf(cmd, sizeof cmd,
             "%s detokenize --tokenizer tests/data/tok/tiny_spm.json 5 x7 2>&1", bin);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 2);
    ASSERT_TRUE(strstr(out, "expected a token id") != NULL);
    snprintf(cmd, sizeof cmd,
             "%s detokenize --tokenizer tests/data/tok/tiny_spm.json 5 99999 2>&1", bin);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 2);
    ASSERT_TRUE(strstr(out, "outside the vocabulary") != NULL);
}

TEST(tok_cli, tokenize_input_writes_shards_and_manifest)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        SKIP("QS_BIN not set (run through make test)");
    char cmd[8192], out[4096], dir[256];
    snprintf(dir, sizeof dir, "%.200s/cli_shards", test_tmp_dir());
    snprintf(cmd, sizeof cmd,
             "printf 'first doc\\n\\nsecond doc\\n\\nthird doc\\n' > %s.txt && "
             "printf '{\"text\": \"json doc\"}\\n' | zstd -q -f -o %s.jsonl.zst && "
             "%s tokenize --tokenizer tests/data/tok/tiny_spm.json --input %s.txt %s.jsonl.zst "
             "--out %s --val-fraction 0.25 --seed 1",
             dir, dir, bin, dir, dir, dir);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 0);
    ASSERT_TRUE(strstr(out, "4 documents") != NULL);
    snprintf(cmd, sizeof cmd, "ls %s", dir);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 0);
    ASSERT_EQ_STR(out, "manifest.json\ntrain_000000.qst\nval_000000.qst\n");
    snprintf(cmd, sizeof cmd,
             "%s tokenize --tokenizer tests/data/tok/tiny_spm.json --input %s/manifest.json "
             "--out %s/x 2>&1",
             bin, dir, dir);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 2);
    ASSERT_TRUE(strstr(out, "expected .txt, .jsonl") != NULL);
}

/* A directory or a missing path given as --input names the path and the real
 * reason, not "unknown input type"; OUT is left as it was (not created). */
TEST(tok_cli, tokenize_input_dir_or_missing_names_the_reason)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        SKIP("QS_BIN not set (run through make test)");
    char cmd[4096], out[4096], dir[256];
    snprintf(dir, sizeof dir, "%.200s/cli_in_kinds", test_tmp_dir());
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s/emptydir && %s tokenize --tokenizer "
             "tests/data/tok/tiny_spm.json --input %s/emptydir --out %s/o 2>&1",
             dir, dir, bin, dir, dir);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 2);
    ASSERT_TRUE(strstr(out, "cli_in_kinds/emptydir: is a directory (expected a .txt, .jsonl")
                != NULL);
    ASSERT_TRUE(strchr(out, '\n') == out + strlen(out) - 1);
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer tests/data/tok/tiny_spm.json --input "
             "%s/nonexist --out %s/o 2>&1; test ! -e %s/o",
             bin, dir, dir, dir);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 0);
    ASSERT_TRUE(strstr(out, "cli_in_kinds/nonexist: No such file or directory (expected a .txt")
                != NULL);
}

/* The same file twice (another spelling, a symbolic link) would put its
 * documents in the shards twice: refused naming both spellings. */
TEST(tok_cli, tokenize_input_same_file_twice_is_refused)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        SKIP("QS_BIN not set (run through make test)");
    char cmd[4096], out[4096], dir[256];
    snprintf(dir, sizeof dir, "%.200s/cli_in_twice", test_tmp_dir());
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s/a && printf 'one doc\\n' > %s/a/a.txt "
             "&& ln -s a/a.txt %s/link.txt", dir, dir, dir, dir);
    ASSERT_EQ_INT(run(cmd, out, sizeof out), 0);
    static const char *const second[] = {"a/./a.txt", "link.txt", "a/a.txt"};
    for (int k = 0; k < 3; k++) {
        snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer tests/data/tok/tiny_spm.json --input "
                 "%s/a/a.txt %s/%s --out %s/o 2>&1; test ! -e %s/o",
                 bin, dir, dir, second[k], dir, dir);
        ASSERT_EQ_INT(run(cmd, out, sizeof out), 0);
        char want[1024];
        snprintf(want, sizeof want, "%s/%s: is the same file as input 1 '%s/a/a.txt' (expected "
                 "each input file once)\n", dir, second[k], dir);
        ASSERT_TRUE(strstr(out, want) != NULL);
    }
}
