/* gate.h: baseline vs candidate results -> a verdict per task (CI regression gate).
 *
 * Rule, per compared task (all numbers in percentage points, pp = 100 x fraction):
 *   drop = 100 * (baseline - candidate) on the task's metric;
 *   drop <= threshold                         -> PASS
 *   drop >  threshold, paired test p < alpha  -> FAIL
 *   drop >  threshold, paired test p >= alpha -> INCONCLUSIVE
 *   drop >  threshold, no per-item logs       -> FAIL (no test possible: threshold rule)
 * An INCONCLUSIVE row counts as a failure unless inconclusive_passes is set.
 * The paired test is McNemar's exact test on the discordant items; with it comes a
 * paired-bootstrap interval of candidate - baseline (pp).
 *
 * Compared tasks: every top-level entry of the baseline (groups replace their
 * subtasks; see resfile.h), or every entry with include_subtasks.
 * Default metric per task: acc_norm for hellaswag and arc_* (when the baseline
 * has it), acc for everything else (mmlu, hendrycksTest-*); overridable.
 *
 * Unusable input (QS_EINVAL/QS_EFORMAT/QS_ENOTFOUND with a diag): a compared task
 * or its metric missing from the candidate, different item counts, per-item logs
 * whose item sets differ, or whose accuracy disagrees with the results file.
 */
#ifndef QS_GATE_H
#define QS_GATE_H

#include <stdint.h>

#include "qs/err.h"
#include "qs/itemlog.h"
#include "qs/resfile.h"

enum { GATE_PASS = 0, GATE_FAIL = 1, GATE_INCONCLUSIVE = 2 };
const char *gate_verdict_name(int verdict);

#define GATE_NAME_MAX 128

typedef struct gate_task_opt {
    char task[GATE_NAME_MAX];
    double max_drop_points;   /* < 0: use the global threshold */
    char metric[16];          /* "" : default rule */
} gate_task_opt;

typedef struct gate_opts {
    double max_drop_points;   /* global threshold, e.g. 0.5 */
    double alpha;             /* significance level, e.g. 0.05 */
    int inconclusive_passes;  /* policy for INCONCLUSIVE rows */
    int include_subtasks;     /* compare every entry, not just top level */
    char metric[16];          /* "" : default rule per task; "acc" or "acc_norm" for all */
    const gate_task_opt *per_task;
    int n_per_task;
    int n_resamples;          /* bootstrap resamples, e.g. 2000 */
    uint64_t seed;            /* bootstrap RNG seed */
} gate_opts;
void gate_opts_default(gate_opts *o);

typedef struct gate_row {
    char task[GATE_NAME_MAX];
    char metric[16];
    double base, cand;        /* fractions */
    double drop_points, max_drop_points;
    long n_items;             /* -1 unknown */
    int paired;               /* 1 when the per-item test ran */
    long b, c;                /* discordant pairs: base-only right, cand-only right */
    double p_value;           /* NAN unless paired */
    double ci_lo_points, ci_hi_points;   /* candidate - baseline, NAN unless paired */
    int verdict;              /* GATE_* */
    int counts_as_failure;
} gate_row;

typedef struct gate_report {
    gate_row *rows;
    int n_rows;
    int n_pass, n_fail, n_inconclusive;
    int failed;               /* any row counts as a failure -> exit 1 */
} gate_report;

/* base_items / cand_items may be NULL (no per-item logs on that side).  Fills
 * *out (free with gate_report_free) or returns a negative code with d set. */
int gate_compare(const resfile *base, const resfile *cand, const itemlog *base_items,
                 const itemlog *cand_items, const gate_opts *opts, gate_report *out, qs_diag *d);
void gate_report_free(gate_report *r);

/* JUnit XML (one testcase per row; FAIL -> <failure>, INCONCLUSIVE -> <failure> or
 * <skipped> by policy) written atomically to path. */
int gate_junit_write(const gate_report *r, const char *path, qs_diag *d);
/* JUnit XML for unusable input: one testcase "gate" with an <error> carrying `message`,
 * so CI shows why the gate could not run. */
int gate_junit_write_error(const char *message, const char *path, qs_diag *d);

#endif
