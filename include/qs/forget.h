/* forget.h: the forgetting alarm — is a task's accuracy dropping below its baseline?
 *
 * Rule (per task, per evaluation step, on the SAME items as the baseline):
 *   drop = 100 * (baseline accuracy - current accuracy)          [percentage points]
 *   p    = McNemar exact two-sided p-value on the discordant items (stats.h)
 *   alarm  <=>  drop > max_drop_points  AND  p < alpha
 * The baseline is the first evaluation of the task (the trainer's step-0 eval).
 * With stop_on_forgetting an alarm also sets `stop`: the trainer checkpoints and
 * ends the run cleanly (events.jsonl gets {"type":"stop","reason":"forgetting"}).
 *
 * The library never prints: an alarm fills `warning` (one line for the console)
 * and `event_json` (one events.jsonl record, README "### run directory") for the caller to emit.
 *
 * metrics.jsonl carries per-item correctness for the scanner as optional fields of
 * each eval task object: "items_acc" / "items_acc_norm", a string of '0'/'1', one
 * character per item in the fixed subset order (the same order at every step).
 */
#ifndef QS_FORGET_H
#define QS_FORGET_H

#include <stddef.h>

#include "qs/err.h"

typedef struct forget_opts {
    double max_drop_points;   /* X: e.g. 2.0 */
    double alpha;             /* e.g. 0.05 */
    int stop_on_forgetting;   /* alarm -> stop flag */
} forget_opts;
void forget_opts_default(forget_opts *o);   /* 2.0 pp, 0.05, no stop */

typedef struct forget_result {
    char task[64];
    long step;
    long n_items;
    double baseline, acc;     /* fractions */
    double drop_points;
    long b, c;                /* baseline-only right, current-only right */
    double p_value;
    int alarm, stop;
    int is_baseline;          /* tracker: this observation became the baseline */
    char warning[256];        /* set when alarm */
    char event_json[768];     /* set when alarm; no trailing newline */
} forget_result;

/* One check of current vs baseline correctness (0/1 per item, same item order). */
int forget_check(const char *task, long step, const unsigned char *base_correct,
                 const unsigned char *cur_correct, size_t n_items, const forget_opts *o,
                 forget_result *out, qs_diag *d);

/* Tracker for the trainer: keeps each task's first correctness vector as its
 * baseline and checks every later one against it.  The first observation of a task
 * sets out->is_baseline and never alarms; a later one with a different item count
 * is QS_EINVAL (the in-loop subset must be fixed). */
typedef struct forget_tracker forget_tracker;
int forget_tracker_create(forget_tracker **out, const forget_opts *o, qs_diag *d);
int forget_tracker_observe(forget_tracker *t, const char *task, long step,
                           const unsigned char *correct, size_t n_items, forget_result *out,
                           qs_diag *d);
void forget_tracker_destroy(forget_tracker *t);   /* accepts NULL */
/* The baselines as bytes, for a checkpoint (train_state.bin "eval"), little-endian:
 *   u32 n_tasks, then per task: u32 name_bytes (1..FORGET_TASK_MAX-1), name,
 *   u64 n_items (>= 1), n_items bytes of 0/1, in first-seen order.
 * save hands out qs_malloc'd bytes; restore replaces every baseline, validating
 * each length and value (QS_EFORMAT, then the tracker is empty). */
#define FORGET_TASK_MAX 64
int forget_tracker_save(const forget_tracker *t, void **bytes, size_t *n, qs_diag *d);
int forget_tracker_restore(forget_tracker *t, const void *bytes, size_t n, qs_diag *d);

/* One evaluation of one task in a series. */
typedef struct forget_eval {
    long step;
    const char *task;
    const unsigned char *correct;   /* n_items 0/1 values */
    size_t n_items;
} forget_eval;

/* Scan a series in order: the first eval of each task is its baseline, every later
 * eval is checked.  Alarms go to alarms[0..max_alarms) (*n_alarms counts all);
 * with stop_on_forgetting the scan ends at the first alarm. */
int forget_series_scan(const forget_eval *evals, int n_evals, const forget_opts *o,
                       forget_result *alarms, int max_alarms, int *n_alarms, qs_diag *d);

/* The same over a metrics.jsonl file (type "eval" records with items_<metric>
 * strings; metric "" = the gate's default per task).  Tasks without per-item data
 * are skipped (no paired test possible).  Malformed lines: QS_EFORMAT with line. */
int forget_metrics_scan(const char *metrics_path, const char *metric, const forget_opts *o,
                        forget_result *alarms, int max_alarms, int *n_alarms, qs_diag *d);

#endif
