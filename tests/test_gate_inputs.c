/* test_gate_inputs.c: gate on inputs it must refuse or must not touch (the CLI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "qs/fileio.h"
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
