/* cmd_gate.c: qatscope gate — baseline vs candidate results -> table, JUnit, exit code.
 * Exit 0 all pass, 1 regression, 2 unusable input.  Rules live in qs/gate.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "qs/gate.h"
#include "qs/itemlog.h"
#include "qs/mem.h"
#include "qs/resfile.h"

#define GATE_MAX_FILES 256

static const char gate_help[] =
    "usage: qatscope gate --baseline A.json --candidate B.json [options]\n"
    "\n"
    "Compares every top-level task of the baseline (groups such as mmlu replace their\n"
    "subtasks) on one metric each; drops are in percentage points (pp).\n"
    "  --max-drop PP            allowed drop for every task (default 0.5)\n"
    "  --max-drop-task T=PP     allowed drop for task T (repeatable)\n"
    "  --metric acc|acc_norm    metric for every task (default: acc_norm for hellaswag and\n"
    "                           arc_* when present, acc otherwise)\n"
    "  --metric-task T=M        metric for task T (repeatable)\n"
    "  --alpha A                significance level of the paired test (default 0.05)\n"
    "  --inconclusive pass|fail policy when the drop exceeds the threshold but is not\n"
    "                           significant (default fail)\n"
    "  --junit FILE             also write JUnit XML (atomically)\n"
    "  --samples-baseline F     per-item log of the baseline (repeatable; qatscope\n"
    "  --samples-candidate F    samples.jsonl[.zst] or harness samples_<task>_*.jsonl)\n"
    "  --no-samples             do not look for per-item logs next to the results files\n"
    "  --subtasks               compare every entry, subtasks included\n"
    "  --bootstrap N            paired bootstrap resamples (default 2000)\n"
    "  --seed S                 bootstrap seed (default 20240607)\n"
    "Without --samples-*, per-item logs are discovered next to each results file:\n"
    "samples.jsonl.zst / samples.jsonl (qatscope eval), else samples_<task>_<ts>.jsonl\n"
    "(lm-evaluation-harness, same timestamp as results_<ts>.json when present).\n"
    "With n items one item weighs 100/n pp: an allowed drop below that lets one changed\n"
    "answer decide (a hint says so); log samples on both sides and use enough items.\n"
    "Exit: 0 pass, 1 regression, 2 unusable input.\n";

typedef struct gate_args {
    const char *baseline, *candidate, *junit;
    const char *samples[2][GATE_MAX_FILES];
    int n_samples[2];
    int no_discover;
    gate_opts opts;
    gate_task_opt per_task[GATE_MAX_FILES];
} gate_args;

static gate_task_opt *per_task_slot(gate_args *a, const char *task, size_t len)
{
    for (int i = 0; i < a->opts.n_per_task; i++)
        if (strlen(a->per_task[i].task) == len && !strncmp(a->per_task[i].task, task, len))
            return &a->per_task[i];
    if (a->opts.n_per_task >= GATE_MAX_FILES || len == 0 || len >= GATE_NAME_MAX)
        return NULL;
    gate_task_opt *t = &a->per_task[a->opts.n_per_task++];
    memset(t, 0, sizeof *t);
    memcpy(t->task, task, len);
    t->max_drop_points = -1;
    return t;
}

static int parse_metric(const char *flag, const char *val, char *out)
{
    if (strcmp(val, "acc") && strcmp(val, "acc_norm"))
        return cli_error("%s: expected acc or acc_norm, got '%s'", flag, val);
    snprintf(out, 16, "%s", val);
    return 0;
}

/* "--max-drop-task T=PP" / "--metric-task T=M" */
static int parse_task_pair(gate_args *a, const char *flag, const char *val)
{
    const char *eq = strchr(val, '=');
    gate_task_opt *t = eq ? per_task_slot(a, val, (size_t)(eq - val)) : NULL;
    if (!t)
        return cli_error("%s: expected TASK=VALUE, got '%s'", flag, val);
    if (!strcmp(flag, "--metric-task"))
        return parse_metric(flag, eq + 1, t->metric);
    return cli_parse_double(flag, eq + 1, 0, 100, &t->max_drop_points);
}

static int parse_args(int argc, char **argv, gate_args *a)
{
    gate_opts_default(&a->opts);
    a->opts.per_task = a->per_task;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        long lv;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(gate_help, stdout);
            return -1;
        }
        if (!strcmp(arg, "--no-samples")) {
            a->no_discover = 1;
            continue;
        }
        if (!strcmp(arg, "--subtasks")) {
            a->opts.include_subtasks = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0)
            return cli_error("gate: unexpected argument '%s' (argument %d); see --help", arg, i);
        static const char *const valued[] = {
            "--baseline", "--candidate", "--junit", "--max-drop", "--max-drop-task",
            "--metric-task", "--metric", "--alpha", "--inconclusive", "--bootstrap", "--seed",
            "--samples-baseline", "--samples-candidate", NULL};
        if (!cli_flag_in(arg, valued))
            return cli_error("gate: unknown option '%s' (argument %d); see --help", arg, i);
        if (!(v = cli_flag_value(argc, argv, &i)))
            return CLI_EXIT_USAGE;
        int rc = 0;
        if (cli_flag_is(arg, "--baseline"))
            a->baseline = v;
        else if (cli_flag_is(arg, "--candidate"))
            a->candidate = v;
        else if (cli_flag_is(arg, "--junit"))
            a->junit = v;
        else if (cli_flag_is(arg, "--max-drop"))
            rc = cli_parse_double(arg, v, 0, 100, &a->opts.max_drop_points);
        else if (cli_flag_is(arg, "--max-drop-task") || cli_flag_is(arg, "--metric-task"))
            rc = parse_task_pair(a, cli_flag_is(arg, "--metric-task") ? "--metric-task"
                                                                      : "--max-drop-task", v);
        else if (cli_flag_is(arg, "--metric"))
            rc = parse_metric(arg, v, a->opts.metric);
        else if (cli_flag_is(arg, "--alpha"))
            rc = cli_parse_double(arg, v, 1e-12, 0.5, &a->opts.alpha);
        else if (cli_flag_is(arg, "--inconclusive")) {
            if (strcmp(v, "pass") && strcmp(v, "fail"))
                return cli_error("--inconclusive: expected pass or fail, got '%s'", v);
            a->opts.inconclusive_passes = !strcmp(v, "pass");
        } else if (cli_flag_is(arg, "--bootstrap")) {
            rc = cli_parse_long(arg, v, 100, 1000000, &lv);
            a->opts.n_resamples = (int)lv;
        } else if (cli_flag_is(arg, "--seed")) {
            rc = cli_parse_long(arg, v, 0, 0x7fffffffL, &lv);
            a->opts.seed = (uint64_t)lv;
        } else {   /* --samples-baseline, --samples-candidate */
            int side = cli_flag_is(arg, "--samples-candidate");
            if (a->n_samples[side] >= GATE_MAX_FILES)
                return cli_error("%s: at most %d files", arg, GATE_MAX_FILES);
            a->samples[side][a->n_samples[side]++] = v;
        }
        if (rc)
            return rc;
    }
    if (!a->baseline || !a->candidate)
        return cli_error("gate: --baseline and --candidate are required; see --help");
    return 0;
}

/* every task and leaf name in rf (for harness samples file names) */
static int all_task_names(const resfile *rf, const char **names, int max)
{
    int n = 0;
    for (int i = 0; i < rf->n_tasks && n < max; i++) {
        names[n++] = rf->tasks[i].name;
        for (int j = 0; j < rf->tasks[i].n_leaves && n < max; j++)
            names[n++] = rf->tasks[i].leaves[j];
    }
    return n;
}

static int load_side_items(const gate_args *a, int side, const resfile *rf, itemlog *il,
                           int *have, qs_diag *d)
{
    const char *names[4096];
    int n_names = all_task_names(rf, names, 4096);
    *have = 0;
    for (int i = 0; i < a->n_samples[side]; i++) {
        int rc = itemlog_load_any(il, a->samples[side][i], names, n_names, d);
        if (rc)
            return rc;
        *have = 1;
    }
    if (a->n_samples[side] == 0 && !a->no_discover) {
        int found = 0;
        int rc = itemlog_discover(il, rf->path, names, n_names, &found, d);
        if (rc)
            return rc;
        *have = found > 0;
    }
    return 0;
}

static void print_table(const gate_report *r, const gate_args *a, int paired_any)
{
    int w = 28;   /* task column: the longest name (MMLU subjects reach 40 characters) */
    for (int i = 0; i < r->n_rows; i++)
        w = (int)strlen(r->rows[i].task) > w ? (int)strlen(r->rows[i].task) : w;
    printf("%-*s %-8s %9s %9s %9s %7s %7s %9s %-19s %s\n", w, "task", "metric", "baseline",
           "candidate", "drop(pp)", "max", "n", "p", "95% CI cand-base", "verdict");
    for (int i = 0; i < r->n_rows; i++) {
        const gate_row *row = &r->rows[i];
        char n[24] = "-", p[24] = "-", ci[40] = "-";
        if (row->n_items >= 0)
            snprintf(n, sizeof n, "%ld", row->n_items);
        if (row->paired) {
            snprintf(p, sizeof p, "%.3g", row->p_value);
            snprintf(ci, sizeof ci, "[%+.2f, %+.2f]", row->ci_lo_points, row->ci_hi_points);
        }
        printf("%-*s %-8s %9.2f %9.2f %9.2f %7.2f %7s %9s %-19s %s\n", w, row->task, row->metric,
               100 * row->base, 100 * row->cand, row->drop_points, row->max_drop_points, n, p, ci,
               gate_verdict_name(row->verdict));
    }
    printf("\nvalues in percent; drop = baseline - candidate in percentage points; ");
    printf("paired test: McNemar exact, alpha %g%s\n", a->opts.alpha,
           paired_any ? "" : " (not run: no per-item logs on both sides)");
    printf("gate: %s (%d pass, %d fail, %d inconclusive; inconclusive counts as %s)\n",
           r->failed ? "REGRESSION" : "PASS", r->n_pass, r->n_fail, r->n_inconclusive,
           a->opts.inconclusive_passes ? "pass" : "fail");
}

/* A threshold below one item's weight (100 / n pp) lets a single changed answer
 * decide the verdict: say so (stderr), per task, and what makes the gate meaningful. */
static void print_small_n_hint(const gate_report *r)
{
    int shown = 0, more = 0;
    for (int i = 0; i < r->n_rows; i++) {
        const gate_row *row = &r->rows[i];
        if (row->n_items <= 0 || row->max_drop_points >= 100.0 / (double)row->n_items)
            continue;
        if (shown == 3) {
            more++;
            continue;
        }
        shown++;
        fprintf(stderr,
                "hint: %s: one item is %.2f pp of %ld items, more than the allowed drop of "
                "%.2f pp, so one changed answer decides; %s\n",
                row->task, 100.0 / (double)row->n_items, row->n_items, row->max_drop_points,
                row->paired ? "the paired test judges it (INCONCLUSIVE unless significant; "
                              "--inconclusive sets the policy): evaluate more items or raise "
                              "the allowed drop"
                            : "log per-item samples on both sides (eval --log-samples) so the "
                              "paired test can judge, evaluate more items, or raise the "
                              "allowed drop");
    }
    if (more)
        fprintf(stderr, "hint: the same holds for %d more task(s)\n", more);
}

typedef struct junit_check {
    const char *junit, *what;
} junit_check;

static int junit_not_discovered(const char *path, void *ctx)
{
    const junit_check *c = ctx;
    return cli_output_not_input("--junit", c->junit, c->what, path);
}

int cmd_gate(int argc, char **argv)
{
    gate_args a;   /* ~45 KB: per-task options and sample paths */
    memset(&a, 0, sizeof a);
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    /* --junit checked before any work, as eval's outputs are (missing parents
     * created, a directory name or an unwritable place refused): found only at
     * the end, it printed the verdict and then exited 2 */
    cli_outputs junit_out = {0};
    if (a.junit) {   /* never one of the inputs, whatever its spelling */
        if ((rc = cli_output_not_input("--junit", a.junit, "--baseline", a.baseline)) ||
            (rc = cli_output_not_input("--junit", a.junit, "--candidate", a.candidate)))
            return rc;
        for (int side = 0; side < 2; side++)
            for (int i = 0; i < a.n_samples[side]; i++)
                if ((rc = cli_output_not_input("--junit", a.junit,
                                               side ? "--samples-candidate" : "--samples-baseline",
                                               a.samples[side][i])))
                    return rc;
        /* and the logs gate finds by itself: harness samples_<task>_<ts>.jsonl of any task */
        for (int side = 0; side < 2; side++) {
            junit_check c = {a.junit, side ? "candidate's samples" : "baseline's samples"};
            if (a.n_samples[side] == 0 && !a.no_discover &&
                (rc = itemlog_discover_each(side ? a.candidate : a.baseline, junit_not_discovered,
                                            &c)))
                return rc;
        }
        if ((rc = cli_outputs_add(&junit_out, "--junit", a.junit)))
            return rc;
    }
    qs_diag d = {0};
    resfile base = {0}, cand = {0};
    itemlog bi = {0}, ci = {0};
    gate_report rep = {0};
    int have_b = 0, have_c = 0, exit_code = CLI_EXIT_USAGE;
    if (resfile_load(&base, a.baseline, &d) || resfile_load(&cand, a.candidate, &d) ||
        load_side_items(&a, 0, &base, &bi, &have_b, &d) ||
        load_side_items(&a, 1, &cand, &ci, &have_c, &d) ||
        gate_compare(&base, &cand, have_b ? &bi : NULL, have_c ? &ci : NULL, &a.opts, &rep,
                     &d)) {
        cli_diag_error(&d);
        if (a.junit) {   /* CI still gets a report saying why */
            char msg[QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 32];
            qs_diag d2 = {0};
            diag_format(&d, msg, sizeof msg);
            if (gate_junit_write_error(msg, a.junit, &d2))
                cli_diag_error(&d2);
        }
        goto done;
    }
    int paired_any = 0;
    for (int i = 0; i < rep.n_rows; i++)
        paired_any |= rep.rows[i].paired;
    print_table(&rep, &a, paired_any);
    fflush(stdout);
    print_small_n_hint(&rep);
    if (a.junit && gate_junit_write(&rep, a.junit, &d)) {
        cli_diag_error(&d);
        goto done;
    }
    exit_code = rep.failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
done:
    gate_report_free(&rep);
    itemlog_free(&bi);
    itemlog_free(&ci);
    resfile_free(&base);
    resfile_free(&cand);
    return exit_code;
}
