/* test_gate.c: the CI gate on crafted result pairs (library and CLI exit codes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "qs/fileio.h"
#include "qs/gate.h"
#include "qs/itemlog.h"
#include "qs/mem.h"
#include "qs/resfile.h"
#include "test.h"

/* A qatscope-style run dir: results.json + samples.jsonl for one task.
 * right[i] = 1 when item i is answered correctly (acc and acc_norm alike). */
static const char *write_side(const char *name, const char *task, const unsigned char *right,
                              int n, int doc_offset, int with_samples)
{
    static char dirs[8][512];
    static int next;
    char *dir = dirs[next++ % 8], path[600];
    snprintf(dir, 512, "%s/gate_%s", test_tmp_dir(), name);
    mkdir(dir, 0755);
    int n_right = 0;
    for (int i = 0; i < n; i++)
        n_right += right[i];
    snprintf(path, sizeof path, "%s/results.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fprintf(f, "{\"results\":{\"%s\":{\"alias\":\"%s\",\"acc,none\":%.17g,\"acc_norm,none\":%.17g}},"
               "\"n-samples\":{\"%s\":{\"original\":%d,\"effective\":%d}}}\n",
            task, task, (double)n_right / n, (double)n_right / n, task, n, n);
    fclose(f);
    snprintf(path, sizeof path, "%s/samples.jsonl", dir);
    remove(path);
    if (with_samples) {
        f = fopen(path, "w");
        if (!f)
            return NULL;
        for (int i = 0; i < n; i++)
            fprintf(f, "{\"task\":\"%s\",\"doc_id\":%d,\"pred\":%d,\"pred_norm\":%d,\"gold\":2}\n",
                    task, i + doc_offset, right[i] ? 2 : 0, right[i] ? 2 : 1);
        fclose(f);
    }
    static char out[8][600];
    snprintf(out[next % 8], 600, "%s/results.json", dir);
    return out[next % 8];
}

/* run the CLI; returns its exit code (or -1) */
static int run_gate(const char *args)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        return -1;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s gate %s > %s/gate_out.txt 2>&1", bin, args, test_tmp_dir());
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int out_contains(const char *needle)
{
    char path[600], *text = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/gate_out.txt", test_tmp_dir());
    if (fileio_read_all(path, &text, &n, NULL))
        return 0;
    int hit = strstr(text, needle) != NULL;
    if (!hit)
        fprintf(stderr, "    output was:\n%s\n", text);
    qs_free(text);
    return hit;
}

static void fill(unsigned char *v, int n, int from, int to)
{
    for (int i = 0; i < n; i++)
        v[i] = i >= from && i < to;
}

TEST(gate, small_drop_passes)
{
    unsigned char b[200], c[200];
    fill(b, 200, 0, 100);
    fill(c, 200, 0, 100);
    c[0] = 0;   /* 0.5 pp drop == threshold: pass */
    char args[2048];
    const char *pb = write_side("pass_b", "arc_easy", b, 200, 0, 1);
    const char *pc = write_side("pass_c", "arc_easy", c, 200, 0, 1);
    snprintf(args, sizeof args, "--baseline %s --candidate %s --max-drop 0.5", pb, pc);
    ASSERT_EQ_INT(run_gate(args), 0);
    ASSERT_TRUE(out_contains("gate: PASS"));
}

TEST(gate, significant_drop_fails_with_junit)
{
    unsigned char b[1000], c[1000];
    fill(b, 1000, 0, 600);
    fill(c, 1000, 60, 610);   /* b = 60 lost, c = 10 gained: -5 pp */
    char args[2048], junit[600];
    const char *pb = write_side("fail_b", "hellaswag", b, 1000, 0, 1);
    const char *pc = write_side("fail_c", "hellaswag", c, 1000, 0, 1);
    snprintf(junit, sizeof junit, "%s/gate_fail.xml", test_tmp_dir());
    snprintf(args, sizeof args, "--baseline %s --candidate %s --junit %s", pb, pc, junit);
    ASSERT_EQ_INT(run_gate(args), 1);
    ASSERT_TRUE(out_contains("FAIL"));
    ASSERT_TRUE(out_contains("acc_norm"));   /* hellaswag defaults to acc_norm */
    char *xml = NULL;
    size_t n;
    ASSERT_OK(fileio_read_all(junit, &xml, &n, NULL), NULL);
    int ok = strstr(xml, "failures=\"1\"") && strstr(xml, "<failure message=\"FAIL") &&
             strstr(xml, "name=\"hellaswag\"");
    qs_free(xml);
    ASSERT_TRUE(ok);
}

/* --junit is checked before the comparison, as eval's outputs: a missing parent
 * directory is created, a directory name is one error line (exit 2) with no
 * verdict printed first (it used to print "gate: PASS", then fail on the file) */
TEST(gate, junit_path_is_checked_before_the_verdict)
{
    unsigned char b[200];
    fill(b, 200, 0, 100);
    char args[2048], junit[600];
    const char *pb = write_side("junit_b", "arc_easy", b, 200, 0, 1);
    const char *pc = write_side("junit_c", "arc_easy", b, 200, 0, 1);
    snprintf(junit, sizeof junit, "%s/gate_junit_new/sub/gate.xml", test_tmp_dir());
    snprintf(args, sizeof args, "--baseline %s --candidate %s --junit %s", pb, pc, junit);
    ASSERT_EQ_INT(run_gate(args), 0);
    ASSERT_TRUE(fileio_exists(junit));
    snprintf(args, sizeof args, "--baseline %s --candidate %s --junit %s", pb, pc, test_tmp_dir());
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains("--junit"));
    char path[600], *text = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/gate_out.txt", test_tmp_dir());
    ASSERT_OK(fileio_read_all(path, &text, &n, NULL), NULL);
    int one_line = !strstr(text, "gate: PASS") && strchr(text, '\n') == text + n - 1;
    qs_free(text);
    ASSERT_TRUE(one_line);
}

TEST(gate, insignificant_drop_is_inconclusive_and_policy_decides)
{
    unsigned char b[100], c[100];
    fill(b, 100, 0, 50);
    fill(c, 100, 3, 51);   /* b = 3, c = 1: -2 pp, McNemar p = 2*5/16 = 0.625 */
    char args[2048];
    const char *pb = write_side("inc_b", "arc_challenge", b, 100, 0, 1);
    const char *pc = write_side("inc_c", "arc_challenge", c, 100, 0, 1);
    snprintf(args, sizeof args, "--baseline %s --candidate %s", pb, pc);
    ASSERT_EQ_INT(run_gate(args), 1);
    ASSERT_TRUE(out_contains("inconclusive"));
    ASSERT_TRUE(out_contains("0.625"));
    snprintf(args, sizeof args, "--baseline %s --candidate %s --inconclusive pass", pb, pc);
    ASSERT_EQ_INT(run_gate(args), 0);
    /* a per-task threshold above the drop turns it into a pass */
    snprintf(args, sizeof args, "--baseline %s --candidate %s --max-drop-task arc_challenge=2.5",
             pb, pc);
    ASSERT_EQ_INT(run_gate(args), 0);
}

/* The Quick tour's trap: 50 items make one item 2 pp, four times the default
 * 0.5 pp, so one changed answer without per-item logs is a REGRESSION; the gate
 * says so (a hint naming the item weight and the way out).  With samples on both
 * sides the paired test calls it INCONCLUSIVE (policy decides); with 400 items
 * one item is 0.25 pp and no hint is printed. */
TEST(gate, threshold_below_one_item_weight_prints_a_hint)
{
    unsigned char b[400], c[400];
    fill(b, 50, 0, 25);
    fill(c, 50, 1, 25);   /* one item lost: -2 pp */
    char args[2048];
    const char *pb = write_side("hint_b", "arc_easy", b, 50, 0, 0);
    const char *pc = write_side("hint_c", "arc_easy", c, 50, 0, 0);
    snprintf(args, sizeof args, "--baseline %s --candidate %s", pb, pc);
    ASSERT_EQ_INT(run_gate(args), 1);
    ASSERT_TRUE(out_contains("gate: REGRESSION"));
    ASSERT_TRUE(out_contains("hint: arc_easy: one item is 2.00 pp of 50 items, more than the "
                             "allowed drop of 0.50 pp"));
    ASSERT_TRUE(out_contains("eval --log-samples"));
    pb = write_side("hint_b", "arc_easy", b, 50, 0, 1);
    pc = write_side("hint_c", "arc_easy", c, 50, 0, 1);
    snprintf(args, sizeof args, "--baseline %s --candidate %s", pb, pc);
    ASSERT_EQ_INT(run_gate(args), 1);   /* p = 1: inconclusive, which fails by default */
    ASSERT_TRUE(out_contains("inconclusive"));
    ASSERT_TRUE(out_contains("the paired test judges it"));
    snprintf(args, sizeof args, "--baseline %s --candidate %s --inconclusive pass", pb, pc);
    ASSERT_EQ_INT(run_gate(args), 0);
    fill(b, 400, 0, 200);
    fill(c, 400, 1, 200);   /* one item of 400: 0.25 pp, within 0.5 */
    pb = write_side("hint_b", "arc_easy", b, 400, 0, 0);
    pc = write_side("hint_c", "arc_easy", c, 400, 0, 0);
    snprintf(args, sizeof args, "--baseline %s --candidate %s", pb, pc);
    ASSERT_EQ_INT(run_gate(args), 0);
    char path[600], *text = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/gate_out.txt", test_tmp_dir());
    ASSERT_OK(fileio_read_all(path, &text, &n, NULL), NULL);
    int hinted = strstr(text, "hint:") != NULL;
    qs_free(text);
    ASSERT_TRUE(!hinted);
}

/* A negative item count is a malformed file, not "count unknown" (issue 16.8). */
TEST(gate, negative_item_count_is_unusable)
{
    char pb[600], pc[600], args[1400];
    static const char good[] = "{\"results\":{\"arc_easy\":{\"acc,none\":0.5}},"
                               "\"n-samples\":{\"arc_easy\":{\"original\":50,\"effective\":50}}}";
    static const char bad[] = "{\"results\":{\"arc_easy\":{\"acc,none\":0.5}},"
                              "\"n-samples\":{\"arc_easy\":{\"original\":50,\"effective\":-5}}}";
    snprintf(pb, sizeof pb, "%s/gate_neg_b.json", test_tmp_dir());
    snprintf(pc, sizeof pc, "%s/gate_neg_c.json", test_tmp_dir());
    ASSERT_OK(fileio_write_atomic(pb, good, sizeof good - 1, NULL), NULL);
    ASSERT_OK(fileio_write_atomic(pc, bad, sizeof bad - 1, NULL), NULL);
    snprintf(args, sizeof args, "--baseline %s --candidate %s --no-samples", pb, pc);
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains("n-samples.arc_easy.effective: expected an item count >= 1, got -5"));
    static const char bad_n[] = "{\"results\":{\"arc_easy\":{\"acc,none\":0.5,\"n\":-1}}}";
    ASSERT_OK(fileio_write_atomic(pc, bad_n, sizeof bad_n - 1, NULL), NULL);
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains("results.arc_easy.n: expected an item count >= 1, got -1"));
    /* no items (an accuracy that decides nothing), and counts of the wrong type,
     * which once passed as "unknown" and got a verdict */
    static const struct { const char *ns, *want; } cases[] = {
        {"{\"arc_easy\":{\"original\":50,\"effective\":0}}",
         "n-samples.arc_easy.effective: expected an item count >= 1, got 0"},
        {"{\"arc_easy\":{\"original\":50,\"effective\":\"7\"}}",
         "n-samples.arc_easy.effective: expected an integer item count"},
        {"{\"arc_easy\":{\"original\":50,\"effective\":20.5}}",
         "n-samples.arc_easy.effective: expected an integer item count"},
        {"\"lots\"", "n-samples: expected an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char js[512];
        int len = snprintf(js, sizeof js, "{\"results\":{\"arc_easy\":{\"acc,none\":0.5}},"
                           "\"n-samples\":%s}", cases[i].ns);
        ASSERT_OK(fileio_write_atomic(pc, js, (size_t)len, NULL), NULL);
        ASSERT_EQ_INT(run_gate(args), 2);
        if (!out_contains(cases[i].want))
            fprintf(stderr, "    case %zu: want '%s'\n", i, cases[i].want);
        ASSERT_TRUE(out_contains(cases[i].want));
    }
}

/* --junit naming an input (any spelling of it) is refused before it is overwritten */
TEST(gate, junit_that_is_an_input_is_refused)
{
    char pb[600], pc[600], alias[700], args[2400], *text;
    size_t n;
    static const char res[] = "{\"results\":{\"arc_easy\":{\"acc,none\":0.5}},"
                              "\"n-samples\":{\"arc_easy\":{\"original\":50,\"effective\":50}}}";
    snprintf(pb, sizeof pb, "%s/gate_ju_b.json", test_tmp_dir());
    snprintf(pc, sizeof pc, "%s/gate_ju_c.json", test_tmp_dir());
    snprintf(alias, sizeof alias, "%s/./gate_ju_b.json", test_tmp_dir());
    ASSERT_OK(fileio_write_atomic(pb, res, sizeof res - 1, NULL), NULL);
    ASSERT_OK(fileio_write_atomic(pc, res, sizeof res - 1, NULL), NULL);
    snprintf(args, sizeof args, "--baseline %s --candidate %s --no-samples --junit %s", pb, pc,
             alias);
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains("--junit: '") && out_contains("' is the --baseline file '"));
    ASSERT_OK(fileio_read_all(pb, &text, &n, NULL), NULL);
    int kept = n == sizeof res - 1 && !memcmp(text, res, n);
    qs_free(text);
    ASSERT_TRUE(kept);
    snprintf(args, sizeof args, "--baseline %s --candidate %s --no-samples --junit %s", pb, pc, pc);
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains("is the --candidate file"));
}

TEST(gate, different_item_sets_are_unusable)
{
    unsigned char b[100], c[100];
    fill(b, 100, 0, 50);
    fill(c, 100, 0, 50);
    char args[2048];
    const char *pb = write_side("items_b", "arc_easy", b, 100, 0, 1);
    const char *pc = write_side("items_c", "arc_easy", c, 100, 5, 1);   /* doc ids shifted */
    snprintf(args, sizeof args, "--baseline %s --candidate %s", pb, pc);
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains("different items"));
    /* baseline doc 0 is the first item the candidate lacks: its file and line */
    ASSERT_TRUE(out_contains("gate_items_b/samples.jsonl:1: task arc_easy: doc 0 is in the "
                             "baseline's per-item log only"));
    /* the other way round: the candidate's extra item is named with its file */
    snprintf(args, sizeof args, "--baseline %s --candidate %s", pc, pb);
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains("gate_items_b/samples.jsonl:1: task arc_easy: doc 0 is in the "
                             "candidate's per-item log only"));
}

/* A per-item log that holds none of a task's items (another run's) is unusable,
 * not "no per-item logs" (it fell back to the threshold rule); a log short of
 * items is named by its file. */
TEST(gate, per_item_logs_of_other_items_are_named)
{
    unsigned char b[20];
    fill(b, 20, 0, 10);
    char args[2048], path[700];
    const char *pb = write_side("wt_b", "arc_easy", b, 20, 0, 1);
    const char *pc = write_side("wt_c", "arc_easy", b, 20, 0, 0);
    snprintf(path, sizeof path, "%s/gate_wt_c/samples.jsonl", test_tmp_dir());
    FILE *f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    for (int i = 0; i < 20; i++)
        fprintf(f, "{\"task\":\"hellaswag\",\"doc_id\":%d,\"pred\":2,\"pred_norm\":2,\"gold\":2}\n", i);
    fclose(f);
    snprintf(args, sizeof args, "--baseline %s --candidate %s", pb, pc);
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains("gate_wt_c/samples.jsonl: task arc_easy: the candidate per-item log "
                             "holds no item of it, the baseline's 20"));
    pc = write_side("wt_c", "arc_easy", b, 20, 0, 1);   /* then cut to 19 items */
    char *text;
    size_t n;
    ASSERT_OK(fileio_read_all(path, &text, &n, NULL), NULL);
    size_t keep = n > 1 ? n - 1 : 0;   /* up to the newline before the last line's */
    while (keep > 0 && text[keep - 1] != '\n')
        keep--;
    ASSERT_TRUE(keep > 0);
    ASSERT_OK(fileio_write_atomic(path, text, keep, NULL), NULL);
    qs_free(text);
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains("gate_wt_c/samples.jsonl: task arc_easy: the per-item logs cover 20 "
                             "(baseline) and 19 (candidate) items"));
}

TEST(gate, missing_task_is_unusable)
{
    unsigned char b[10];
    fill(b, 10, 0, 5);
    char args[2048];
    const char *pb = write_side("miss_b", "arc_easy", b, 10, 0, 0);
    const char *pc = write_side("miss_c", "hellaswag", b, 10, 0, 0);
    char junit[600];
    snprintf(junit, sizeof junit, "%s/gate_missing.xml", test_tmp_dir());
    snprintf(args, sizeof args, "--baseline %s --candidate %s --junit %s", pb, pc, junit);
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains("task arc_easy is in the baseline but missing from the candidate"));
    char *xml = NULL;
    size_t n;
    ASSERT_OK(fileio_read_all(junit, &xml, &n, NULL), NULL);
    int ok = strstr(xml, "errors=\"1\"") && strstr(xml, "<error message=\"unusable input: ") &&
             strstr(xml, "missing from the candidate");
    qs_free(xml);
    ASSERT_TRUE(ok);
}

TEST(gate, malformed_files_are_unusable)
{
    static const char *const bad[][2] = {
        {"tests/data/gate/truncated.json", "invalid JSON"},
        {"tests/data/gate/metric_string.json", "expected number, found string"},
        {"tests/data/gate/metric_percent.json", "expected a fraction in [0, 1], found 30.5"},
        {"tests/data/gate/no_results.json", "\"results\" object"},
        {"tests/data/gate/does_not_exist.json", "does_not_exist.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[2048];
        snprintf(args, sizeof args, "--baseline tests/data/gate/harness04_base.json --candidate %s",
                 bad[i][0]);
        ASSERT_EQ_INT(run_gate(args), 2);
        ASSERT_TRUE(out_contains(bad[i][1]));
    }
    ASSERT_EQ_INT(run_gate("--baseline tests/data/gate/harness04_base.json"), 2);
    ASSERT_EQ_INT(run_gate("--baseline a --candidate b --max-drop -3"), 2);
}

TEST(gate, harness04_groups_replace_subtasks)
{
    resfile rf = {0};
    qs_diag d = {0};
    ASSERT_OK(resfile_load(&rf, "tests/data/gate/harness04_base.json", &d), &d);
    ASSERT_EQ_INT(rf.layout, RESFILE_LAYOUT_V04);
    const resfile_task *m = resfile_task_find(&rf, "mmlu");
    ASSERT_TRUE(m && m->is_group && m->top_level);
    ASSERT_EQ_INT(m->n_leaves, 2);
    ASSERT_EQ_INT(m->n_items, 235);
    ASSERT_TRUE(!resfile_task_find(&rf, "mmlu_anatomy")->top_level);
    ASSERT_TRUE(!resfile_task_find(&rf, "mmlu_stem")->top_level);
    ASSERT_TRUE(resfile_task_find(&rf, "arc_easy")->top_level);
    ASSERT_TRUE(isnan(m->acc_norm));
    resfile_free(&rf);
    ASSERT_EQ_INT(run_gate("--baseline tests/data/gate/harness04_base.json "
                           "--candidate tests/data/gate/harness04_cand_hellaswag_drop.json"),
                  1);
    ASSERT_TRUE(out_contains("hellaswag                    acc_norm     35.00     33.40      1.60"));
    ASSERT_TRUE(out_contains("\nmmlu                         acc"));
    ASSERT_TRUE(out_contains("(2 pass, 1 fail, 0 inconclusive"));   /* no subtask rows */
}

TEST(gate, harness04_default_metrics_and_thresholds)
{
    resfile a = {0}, b = {0};
    qs_diag d = {0};
    ASSERT_OK(resfile_load(&a, "tests/data/gate/harness04_base.json", &d), &d);
    ASSERT_OK(resfile_load(&b, "tests/data/gate/harness04_cand_hellaswag_drop.json", &d), &d);
    gate_opts o;
    gate_opts_default(&o);
    gate_task_opt t = {"hellaswag", 2.0, ""};
    o.per_task = &t;
    o.n_per_task = 1;
    gate_report r;
    ASSERT_OK(gate_compare(&a, &b, NULL, NULL, &o, &r, &d), &d);
    ASSERT_EQ_INT(r.n_rows, 3);   /* arc_easy, hellaswag, mmlu */
    ASSERT_EQ_STR(r.rows[0].metric, "acc_norm");
    ASSERT_EQ_STR(r.rows[1].metric, "acc_norm");
    ASSERT_EQ_STR(r.rows[2].task, "mmlu");
    ASSERT_EQ_STR(r.rows[2].metric, "acc");
    ASSERT_NEAR(r.rows[1].drop_points, 1.6, 1e-9);
    ASSERT_EQ_INT(r.rows[1].verdict, GATE_PASS);   /* per-task threshold 2.0 pp */
    ASSERT_EQ_INT(r.failed, 0);
    gate_report_free(&r);
    o.include_subtasks = 1;
    o.n_per_task = 0;
    ASSERT_OK(gate_compare(&a, &b, NULL, NULL, &o, &r, &d), &d);
    ASSERT_EQ_INT(r.n_rows, 6);
    ASSERT_EQ_INT(r.rows[1].verdict, GATE_FAIL);   /* no per-item logs: threshold rule */
    ASSERT_EQ_INT(r.failed, 1);
    gate_report_free(&r);
    resfile_free(&a);
    resfile_free(&b);
}

TEST(gate, harness03_layout_is_read)
{
    resfile rf = {0};
    qs_diag d = {0};
    ASSERT_OK(resfile_load(&rf, "tests/data/gate/harness03_base.json", &d), &d);
    ASSERT_EQ_INT(rf.layout, RESFILE_LAYOUT_V03);
    ASSERT_EQ_INT(rf.n_tasks, 5);   /* + the synthesized hendrycksTest mean */
    const resfile_task *g = resfile_task_find(&rf, "hendrycksTest");
    ASSERT_TRUE(g && g->is_group && g->top_level && g->n_leaves == 2);
    ASSERT_NEAR(g->acc, (0.24 + 0.30) / 2, 1e-12);   /* unweighted mean of the subjects */
    ASSERT_TRUE(!resfile_task_find(&rf, "hendrycksTest-anatomy")->top_level);
    const resfile_task *t = resfile_task_find(&rf, "hendrycksTest-abstract_algebra");
    ASSERT_TRUE(t != NULL);
    ASSERT_NEAR(t->acc, 0.24, 1e-12);
    ASSERT_EQ_INT(t->n_items, -1);
    resfile_free(&rf);
    ASSERT_EQ_INT(run_gate("--baseline tests/data/gate/harness03_base.json "
                           "--candidate tests/data/gate/harness03_cand_small_drop.json"),
                  0);
    ASSERT_TRUE(out_contains("acc_norm     29.00     28.80      0.20"));   /* arc_challenge */
    ASSERT_TRUE(out_contains("hendrycksTest "));
    ASSERT_TRUE(out_contains("(3 pass, 0 fail"));   /* arc, hellaswag, MMLU mean; no subjects */
    /* a candidate without one of the subjects is unusable, not a silent smaller mean */
    ASSERT_EQ_INT(run_gate("--baseline tests/data/gate/harness03_base.json "
                           "--candidate tests/data/gate/harness03_cand_missing_subject.json"),
                  2);
    ASSERT_TRUE(out_contains("subtask hendrycksTest-anatomy of the baseline is missing"));
}

/* harness per-item logs: samples_<task>_<ts>.jsonl next to results_<ts>.json */
static void write_harness_side(const char *dir, const unsigned char *right, int n)
{
    char path[700];
    mkdir(dir, 0755);
    int k = 0;
    for (int i = 0; i < n; i++)
        k += right[i];
    snprintf(path, sizeof path, "%s/results_2026-01-02T03-04-05.678.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "{\"results\":{\"arc_easy\":{\"acc,none\":%.17g,\"acc_norm,none\":%.17g}},"
               "\"group_subtasks\":{\"arc_easy\":[]},"
               "\"n-samples\":{\"arc_easy\":{\"original\":%d,\"effective\":%d}}}\n",
            (double)k / n, (double)k / n, n, n);
    fclose(f);
    snprintf(path, sizeof path, "%s/samples_arc_easy_2026-01-02T03-04-05.678.jsonl", dir);
    f = fopen(path, "w");
    if (!f)
        return;
    for (int i = 0; i < n; i++)
        fprintf(f, "{\"doc_id\": %d, \"filter\": \"none\", \"metrics\": [\"acc\", \"acc_norm\"], "
                   "\"acc\": %d.0, \"acc_norm\": %d.0}\n", i, right[i], right[i]);
    fclose(f);
}

TEST(gate, harness_samples_are_discovered_and_paired)
{
    unsigned char b[300], c[300];
    fill(b, 300, 0, 150);
    fill(c, 300, 20, 150);   /* b = 20, c = 0: -6.67 pp, p = 2 * 2^-20 */
    char db[600], dc[600], args[2048];
    snprintf(db, sizeof db, "%s/gate_h_b", test_tmp_dir());
    snprintf(dc, sizeof dc, "%s/gate_h_c", test_tmp_dir());
    write_harness_side(db, b, 300);
    write_harness_side(dc, c, 300);
    snprintf(args, sizeof args,
             "--baseline %s/results_2026-01-02T03-04-05.678.json "
             "--candidate %s/results_2026-01-02T03-04-05.678.json",
             db, dc);
    ASSERT_EQ_INT(run_gate(args), 1);
    ASSERT_TRUE(out_contains("1.91e-06"));   /* 2 * 2^-20 */
    /* a log that covers fewer items than the results file is refused */
    char path[700];
    snprintf(path, sizeof path, "%s/samples_arc_easy_2026-01-02T03-04-05.678.jsonl", dc);
    FILE *f = fopen(path, "a");
    ASSERT_TRUE(f != NULL);
    fprintf(f, "{\"doc_id\": 300, \"acc\": 1.0, \"acc_norm\": 1.0}\n");
    fclose(f);
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains("cover 300 (baseline) and 301 (candidate) items, the results files say 300"));
    write_harness_side(dc, c, 300);
    /* without the logs the same drop fails on the threshold rule alone */
    strcat(args, " --no-samples");
    ASSERT_EQ_INT(run_gate(args), 1);
    ASSERT_TRUE(out_contains("not run"));
}

TEST(gate, samples_that_disagree_with_results_are_rejected)
{
    unsigned char b[50];
    fill(b, 50, 0, 25);
    const char *pb = write_side("dis_b", "arc_easy", b, 50, 0, 1);
    char samples[600];
    snprintf(samples, sizeof samples, "%.*s/samples.jsonl", (int)(strlen(pb) - 13), pb);
    resfile rf = {0};
    itemlog il = {0};
    qs_diag d = {0};
    ASSERT_OK(resfile_load(&rf, pb, &d), &d);
    ASSERT_OK(itemlog_load_qatscope(&il, samples, &d), &d);
    il.items[0].acc = (signed char)!il.items[0].acc;   /* one item flipped */
    il.items[0].acc_norm = il.items[0].acc;
    gate_opts o;
    gate_opts_default(&o);
    gate_report r;
    ASSERT_EQ_INT(gate_compare(&rf, &rf, &il, &il, &o, &r, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "samples from another run") != NULL);
    itemlog_free(&il);
    resfile_free(&rf);
}

/* logs merged from several files: an error about an item names its file and line */
static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

TEST(gate, merged_log_errors_name_the_file_and_line)
{
    unsigned char b[2] = {1, 0};
    const char *pr = write_side("merged", "arc_easy", b, 2, 0, 0);
    char s1[600], s2[600], s3[600], args[4096], want[1400];
    snprintf(s1, sizeof s1, "%s/gate_merged/part1.jsonl", test_tmp_dir());
    snprintf(s2, sizeof s2, "%s/gate_merged/part2.jsonl", test_tmp_dir());
    snprintf(s3, sizeof s3, "%s/gate_merged/part3.jsonl", test_tmp_dir());
    write_text(s1, "{\"task\":\"arc_easy\",\"doc_id\":0,\"pred\":1,\"pred_norm\":1,\"gold\":1}\n");
    write_text(s2, "{\"task\":\"arc_easy\",\"doc_id\":1,\"pred\":0,\"pred_norm\":0,\"gold\":1}\n"
                   "{\"task\":\"arc_easy\",\"doc_id\":0,\"pred\":1,\"pred_norm\":1,\"gold\":1}\n");
    write_text(s3, "{\"task\":\"arc_easy\",\"doc_id\":1,\"pred\":0,\"gold\":1}\n");
    /* doc 0 in part1 line 1 and again in part2 line 2 */
    snprintf(args, sizeof args,
             "--baseline %s --candidate %s --samples-baseline %s --samples-baseline %s "
             "--samples-candidate %s --samples-candidate %s", pr, pr, s1, s2, s1, s3);
    ASSERT_EQ_INT(run_gate(args), 2);
    snprintf(want, sizeof want, "%s:2: item arc_easy||000000000000 appears twice in the sample "
             "logs (first at %s:1)", s2, s1);
    ASSERT_TRUE(out_contains(want));
    /* part3's item has no pred_norm: acc_norm is missing there */
    snprintf(args, sizeof args,
             "--baseline %s --candidate %s --metric acc_norm --samples-baseline %s "
             "--samples-baseline %s --samples-candidate %s --samples-candidate %s",
             pr, pr, s1, s3, s1, s3);
    ASSERT_EQ_INT(run_gate(args), 2);
    snprintf(want, sizeof want, "%s:1: baseline per-item log for task arc_easy has no per-item "
             "acc_norm", s3);
    ASSERT_TRUE(out_contains(want));
}

/* a 0-byte samples log, discovered or named, is an error naming it, not "no per-item logs" */
TEST(gate, empty_samples_log_is_unusable)
{
    unsigned char b[2] = {1, 0};
    const char *pr = write_side("empty", "arc_easy", b, 2, 0, 0);
    char sp[600], args[2048], want[800];
    snprintf(sp, sizeof sp, "%s/gate_empty/samples.jsonl", test_tmp_dir());
    write_text(sp, "");
    snprintf(args, sizeof args, "--baseline %s --candidate %s", pr, pr);
    ASSERT_EQ_INT(run_gate(args), 2);
    snprintf(want, sizeof want, "%s: empty log: expected per-item records", sp);
    ASSERT_TRUE(out_contains(want));
    snprintf(args, sizeof args, "--baseline %s --candidate %s --no-samples --samples-baseline %s "
             "--samples-candidate %s", pr, pr, sp, sp);
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains(want));
    write_text(sp, "\n\n");   /* blank lines only: no records either */
    ASSERT_EQ_INT(run_gate(args), 2);
    ASSERT_TRUE(out_contains(want));
    remove(sp);
    snprintf(args, sizeof args, "--baseline %s --candidate %s", pr, pr);
    ASSERT_EQ_INT(run_gate(args), 0);   /* no log at all: the threshold rule, as before */
}

TEST(gate, mmlu_items_pair_by_subject_for_subtasks)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/gate_mmlu", test_tmp_dir());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/samples.jsonl", dir);
    FILE *f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    for (int i = 0; i < 6; i++)
        fprintf(f, "{\"task\":\"mmlu\",\"subject\":\"%s\",\"doc_id\":%d,\"pred\":%d,\"pred_norm\":null,\"gold\":1}\n",
                i < 4 ? "anatomy" : "virology", i % 4, i == 0 ? 1 : 0);
    fclose(f);
    itemlog il = {0};
    qs_diag d = {0};
    ASSERT_OK(itemlog_load_qatscope(&il, path, &d), &d);
    const itemlog_item **sel;
    size_t n;
    const char *anatomy[] = {"mmlu_anatomy"}, *group[] = {"mmlu", "mmlu_anatomy"};
    ASSERT_OK(itemlog_select(&il, anatomy, 1, &sel, &n, &d), &d);
    ASSERT_EQ_INT(n, 4);
    ASSERT_EQ_INT(sel[0]->acc, 1);
    ASSERT_EQ_INT(sel[0]->acc_norm, -1);
    qs_free(sel);
    ASSERT_OK(itemlog_select(&il, group, 2, &sel, &n, &d), &d);
    ASSERT_EQ_INT(n, 6);   /* each item once, though it matches two names */
    qs_free(sel);
    itemlog_free(&il);
}

TEST(gate, not_computed_metric_is_absent)
{
    char path[600];
    snprintf(path, sizeof path, "%s/gate_na.json", test_tmp_dir());
    const char *text = "{\"results\":{\"mmlu\":{\"acc,none\":\"N/A\"},\"arc_easy\":{\"acc,none\":0.5}}}";
    ASSERT_OK(fileio_write_atomic(path, text, strlen(text), NULL), NULL);
    resfile rf = {0};
    qs_diag d = {0};
    ASSERT_OK(resfile_load(&rf, path, &d), &d);
    ASSERT_TRUE(isnan(resfile_task_find(&rf, "mmlu")->acc));
    gate_opts o;
    gate_opts_default(&o);
    gate_report r;
    ASSERT_EQ_INT(gate_compare(&rf, &rf, NULL, NULL, &o, &r, &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.msg, "task mmlu has no metric acc") != NULL);
    resfile_free(&rf);
}

/* byte-level mutants of a valid harness file and samples log: every load ends in 0 or
 * a negative code with a message, never a crash (the sanitizer build checks memory) */
TEST(gate, mutated_inputs_fail_cleanly)
{
    char *orig = NULL;
    size_t n;
    ASSERT_OK(fileio_read_all("tests/data/gate/harness04_base.json", &orig, &n, NULL), NULL);
    char path[600], spath[600];
    snprintf(path, sizeof path, "%s/gate_mut.json", test_tmp_dir());
    snprintf(spath, sizeof spath, "%s/gate_mut_samples.jsonl", test_tmp_dir());
    const char *samples = "{\"task\":\"arc_easy\",\"doc_id\":0,\"pred\":1,\"pred_norm\":1,\"gold\":1}\n"
                          "{\"task\":\"mmlu\",\"subject\":\"anatomy\",\"doc_id\":3,\"pred\":0,\"gold\":2}\n";
    size_t sn = strlen(samples);
    char *buf = qs_malloc(n + 1), sbuf[256];
    ASSERT_TRUE(buf != NULL);
    unsigned long long rng = 88172645463325252ull;
    int loaded = 0, rejected = 0;
    for (int iter = 0; iter < 300; iter++) {
        memcpy(buf, orig, n);
        memcpy(sbuf, samples, sn);
        for (int e = 0; e < 1 + iter % 4; e++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            buf[rng % n] = "{}[]\":,0.5-eNA\\x"[(rng >> 32) % 16];
            sbuf[(rng >> 16) % sn] = "{}[]\":,01-n"[(rng >> 40) % 11];
        }
        size_t cut = iter % 7 == 6 ? n / 2 : n;
        ASSERT_OK(fileio_write_atomic(path, buf, cut, NULL), NULL);
        ASSERT_OK(fileio_write_atomic(spath, sbuf, sn, NULL), NULL);
        resfile rf = {0};
        itemlog il = {0};
        qs_diag d = {0};
        int rc = resfile_load(&rf, path, &d);
        if (rc == 0) {
            loaded++;
            int rc2 = itemlog_load_qatscope(&il, spath, &d);
            gate_opts o;
            gate_opts_default(&o);
            o.n_resamples = 100;
            gate_report rep;
            int rc3 = gate_compare(&rf, &rf, rc2 ? NULL : &il, rc2 ? NULL : &il, &o, &rep, &d);
            if (rc3 == 0)
                gate_report_free(&rep);
            else
                ASSERT_TRUE(rc3 < 0 && d.msg[0]);
        } else {
            rejected++;
            ASSERT_TRUE(rc < 0 && d.msg[0]);
        }
        itemlog_free(&il);
        resfile_free(&rf);
    }
    qs_free(buf);
    qs_free(orig);
    ASSERT_TRUE(loaded > 0 && rejected > 0);
}
