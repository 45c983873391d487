/* test_gate_inputs.c: gate on inputs it must refuse or must not touch (the CLI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qs/err.h"
#include "qs/fileio.h"
#include "qs/itemlog.h"
#include "qs/mem.h"
#include "test.h"

static const char two_items[] =
    "{\"results\":{\"arc_easy\":{\"acc,none\":0.5}},"
    "\"n-samples\":{\"arc_easy\":{\"original\":2,\"effective\":2}}}\n";

/* DIR/NAME in buf (under the test's scratch dir), DIR created */
static char *gi_path(char *buf, size_t n, const char *dir, const char *name)
{
    char d[600];
    snprintf(d, sizeof d, "%s/%s", test_tmp_dir(), dir);
    mkdir(d, 0755);
    snprintf(buf, n, "%s/%s", d, name);
    return buf;
}

static int gi_write(const char *path, const char *text)
{
    return fileio_write_atomic(path, text, strlen(text), NULL);
}

/* the file still holds exactly text */
static int gi_kept(const char *path, const char *text)
{
    char *got = NULL;
    size_t n;
    if (fileio_read_all(path, &got, &n, NULL))
        return 0;
    int same = n == strlen(text) && !memcmp(got, text, n);
    qs_free(got);
    return same;
}

static int gi_gate(const char *args, char *err, size_t err_bytes)
{
    char cmd[4096], out[8192];
    snprintf(cmd, sizeof cmd, "gate %s", args);
    return test_run_cli(cmd, out, sizeof out, err, err_bytes);
}

/* --junit naming a samples log gate finds by itself (beside a results file) is refused
 * before any work, as a --samples-* log is: it used to become JUnit XML */
TEST(gate, junit_over_a_discovered_samples_log_is_refused)
{
    static const char qlog[] = "{\"task\":\"arc_easy\",\"doc_id\":0,\"pred\":1,\"gold\":1}\n"
                               "{\"task\":\"arc_easy\",\"doc_id\":1,\"pred\":0,\"gold\":1}\n";
    static const char hlog[] = "{\"doc_id\":0,\"acc\":1}\n{\"doc_id\":1,\"acc\":0}\n";
    char ra[700], rb[700], rh[700], sa[700], sh[700], args[3000], err[2048];
    gi_path(ra, sizeof ra, "gi_ju_a", "results.json");
    gi_path(rb, sizeof rb, "gi_ju_b", "results.json");
    gi_path(rh, sizeof rh, "gi_ju_h", "results_2026-01-02T03-04-05.json");
    gi_path(sa, sizeof sa, "gi_ju_a", "samples.jsonl");
    gi_path(sh, sizeof sh, "gi_ju_h", "samples_arc_easy_2026-01-02T03-04-05.jsonl");
    ASSERT_TRUE(!gi_write(ra, two_items) && !gi_write(rb, two_items) && !gi_write(rh, two_items));
    ASSERT_TRUE(!gi_write(sa, qlog) && !gi_write(sh, hlog));
    /* qatscope layout: DIR/samples.jsonl beside the baseline */
    snprintf(args, sizeof args, "--baseline %s --candidate %s --junit %s", ra, rb, sa);
    ASSERT_EQ_INT(gi_gate(args, err, sizeof err), 2);
    ASSERT_TRUE(strstr(err, "--junit: '") && strstr(err, "' is the baseline's samples file '"));
    ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1);
    ASSERT_TRUE(gi_kept(sa, qlog));
    /* harness layout, candidate side, another spelling of the same file */
    snprintf(args, sizeof args, "--baseline %s --candidate %s --junit %s/gi_ju_h/../gi_ju_h/%s",
             rb, rh, test_tmp_dir(), "samples_arc_easy_2026-01-02T03-04-05.jsonl");
    ASSERT_EQ_INT(gi_gate(args, err, sizeof err), 2);
    ASSERT_TRUE(strstr(err, "is the candidate's samples file '") != NULL);
    ASSERT_TRUE(gi_kept(sh, hlog));
    /* with --no-samples nothing is read beside the results: a new name is fine */
    char xml[700];
    gi_path(xml, sizeof xml, "gi_ju_a", "gate.xml");
    snprintf(args, sizeof args, "--baseline %s --candidate %s --junit %s", ra, rb, xml);
    ASSERT_EQ_INT(gi_gate(args, err, sizeof err), 0);
    ASSERT_TRUE(gi_kept(sa, qlog));
}

/* a task key twice in a results file is refused by file, line and key: the last
 * object used to win, so a second "arc_easy" turned a failing row into a pass */
TEST(gate, duplicate_keys_in_results_are_refused)
{
    char ra[700], rb[700], args[3000], err[2048];
    gi_path(ra, sizeof ra, "gi_dup", "base.json");
    gi_path(rb, sizeof rb, "gi_dup", "cand.json");
    ASSERT_TRUE(!gi_write(ra, two_items));
    ASSERT_TRUE(!gi_write(rb, "{\"results\":{\"arc_easy\":{\"acc,none\":0.0},\n"
                              "\"arc_easy\":{\"acc,none\":0.5}},\n"
                              "\"n-samples\":{\"arc_easy\":{\"original\":2,\"effective\":2}}}\n"));
    snprintf(args, sizeof args, "--baseline %s --candidate %s --no-samples", ra, rb);
    ASSERT_EQ_INT(gi_gate(args, err, sizeof err), 2);
    ASSERT_TRUE(strstr(err, "cand.json:2: ") && strstr(err, "duplicate object key near '\"arc_easy\"'"));
    ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1);
}

/* gold / pred / pred_norm of a qatscope samples record are choice indices: below the
 * number of choices the record logs, else in [0, INT_MAX] (gold 99, -1 or 2^31 and
 * pred -5 were taken, and decided acc) */
TEST(gate, samples_choice_indices_are_range_checked)
{
    static const char *const bad[][2] = {
        {"\"loglikelihoods\":[-1,-2,-3,-4],\"pred\":0,\"gold\":99",
         "$.gold: expected a choice index in [0, 3] (loglikelihoods has 4 choices), found 99"},
        {"\"pred\":0,\"gold\":-1", "$.gold: expected a choice index in [0, 2147483647], found -1"},
        {"\"pred\":0,\"gold\":2147483648", "found 2147483648"},
        {"\"pred\":-5,\"gold\":1", "$.pred: expected a choice index in [0, 2147483647], found -5"},
        {"\"n_tokens\":[1,2],\"pred\":0,\"pred_norm\":2,\"gold\":1",
         "$.pred_norm: expected a choice index in [0, 1] (n_tokens has 2 choices), found 2"},
        {"\"loglikelihoods\":[-1,-2],\"char_lens\":[3],\"pred\":0,\"gold\":1",
         "$.char_lens: expected one entry per choice (2, as loglikelihoods has), found 1"},
    };
    char path[700], rec[600], want[900];
    gi_path(path, sizeof path, "gi_rng", "samples.jsonl");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(rec, sizeof rec, "{\"task\":\"arc_easy\",\"doc_id\":0,%s}\n"
                 "{\"task\":\"arc_easy\",\"doc_id\":1,\"pred\":0,\"gold\":1}\n", bad[i][0]);
        ASSERT_TRUE(!gi_write(path, rec));
        itemlog il = {0};
        qs_diag d = {0};
        int rc = itemlog_load_qatscope(&il, path, &d);
        itemlog_free(&il);
        snprintf(want, sizeof want, "%s", bad[i][1]);
        if (rc != QS_EFORMAT || strcmp(d.path, path) || d.line != 1 || !strstr(d.msg, want))
            TEST_FAIL_AT("%s: rc %d, %s:%ld: %s", bad[i][0], rc, d.path, d.line, d.msg);
    }
    /* in range, with and without the arrays */
    ASSERT_TRUE(!gi_write(path, "{\"task\":\"arc_easy\",\"doc_id\":0,\"loglikelihoods\":[-1,-2],"
                                "\"n_tokens\":[1,1],\"pred\":1,\"pred_norm\":0,\"gold\":1}\n"
                                "{\"task\":\"arc_easy\",\"doc_id\":1,\"pred\":7,\"gold\":7}\n"));
    itemlog il = {0};
    qs_diag d = {0};
    ASSERT_OK(itemlog_load_qatscope(&il, path, &d), &d);
    ASSERT_EQ_INT(il.n_items, 2);
    ASSERT_EQ_INT(il.items[0].acc, 1);
    ASSERT_EQ_INT(il.items[0].acc_norm, 0);
    itemlog_free(&il);
}

/* a samples path that is a directory says so (it was "empty log") */
TEST(gate, samples_path_that_is_a_directory_is_named)
{
    char ra[700], dir[700], args[3000], err[2048];
    gi_path(ra, sizeof ra, "gi_sdir", "results.json");
    gi_path(dir, sizeof dir, "gi_sdir", "logs");
    ASSERT_TRUE(!gi_write(ra, two_items));
    mkdir(dir, 0755);
    snprintf(args, sizeof args, "--baseline %s --candidate %s --samples-baseline %s "
             "--samples-candidate %s", ra, ra, dir, dir);
    ASSERT_EQ_INT(gi_gate(args, err, sizeof err), 2);
    ASSERT_TRUE(strstr(err, "logs: is a directory; expected a per-item log file") != NULL);
}

/* a group whose group_subtasks names a task results lacks is refused, naming both:
 * ["nosuch"] passed, the group's row standing on its own number */
TEST(gate, group_with_a_missing_subtask_is_refused)
{
    char ra[700], args[3000], err[2048];
    gi_path(ra, sizeof ra, "gi_grp", "results.json");
    ASSERT_TRUE(!gi_write(ra, "{\"results\":{\"mmlu\":{\"acc,none\":0.5},"
                              "\"mmlu_anatomy\":{\"acc,none\":0.5}},"
                              "\"group_subtasks\":{\"mmlu\":[\"mmlu_anatomy\",\"nosuch\"]},"
                              "\"n-samples\":{\"mmlu_anatomy\":{\"original\":4,\"effective\":4}}}\n"));
    snprintf(args, sizeof args, "--baseline %s --candidate %s --no-samples", ra, ra);
    ASSERT_EQ_INT(gi_gate(args, err, sizeof err), 2);
    ASSERT_TRUE(strstr(err, "results.json: group_subtasks.mmlu: subtask 'nosuch' has no entry in "
                            "results") != NULL);
    ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1);
}
