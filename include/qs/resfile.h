/* resfile.h: read benchmark results files for comparison (the gate's input side).
 *
 * Accepted layouts (detected per file):
 *  - lm-evaluation-harness 0.4 (and `qatscope eval`, which writes the same layout):
 *    results.<task>["acc,none"], ["acc_norm,none"], groups, group_subtasks,
 *    n-samples.<task>.effective.  Metric keys with another filter than "none" are
 *    ignored; "N/A" stderr strings are accepted.
 *  - harness v0.3 / leaderboard b281b09: results.<task>.acc / .acc_norm, no groups
 *    (MMLU appears as 57 hendrycksTest-<subject> tasks).
 * Values are fractions in [0, 1]; anything else in a metric field is QS_EFORMAT
 * naming the file, task and key.
 *
 * "Top level" entries: groups, and tasks that belong to no group.  The tag-like
 * aggregate "ai2_arc" (see spec/tasks.md §3) is not treated as a group: its
 * children stay top level and the row itself is skipped.
 */
#ifndef QS_RESFILE_H
#define QS_RESFILE_H

#include "qs/err.h"

enum { RESFILE_LAYOUT_V04 = 1, RESFILE_LAYOUT_V03 = 2 };

typedef struct resfile_task {
    char *name;
    double acc, acc_norm;   /* fractions; NAN when the file has no such metric */
    long n_items;           /* n-samples effective (groups: sum over leaves); -1 unknown */
    int is_group;
    int top_level;          /* 1 unless the task is a child of a (non-ignored) group */
    char **leaves;          /* leaf tasks under a group (recursive); NULL for a leaf */
    int n_leaves;
} resfile_task;

typedef struct resfile {
    char *path;
    int layout;             /* RESFILE_LAYOUT_* */
    resfile_task *tasks;    /* in file order */
    int n_tasks;
} resfile;

/* Zero-initialise rf; resfile_free is safe on a zeroed or failed rf. */
int resfile_load(resfile *rf, const char *path, qs_diag *d);
void resfile_free(resfile *rf);
const resfile_task *resfile_task_find(const resfile *rf, const char *name);
/* Value of metric "acc" or "acc_norm" for a task, NAN when absent. */
double resfile_task_metric(const resfile_task *t, const char *metric);
/* The metric compared by default: "acc_norm" for hellaswag and arc_* when available
 * (the harness's headline convention), "acc" for everything else (mmlu, ...). */
const char *resfile_default_metric(const char *task, int has_acc, int has_acc_norm);

#endif
