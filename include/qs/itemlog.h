/* itemlog.h: per-item correctness logs, for paired tests on the same items.
 *
 * Two sources:
 *  - qatscope eval --log-samples: samples.jsonl(.zst), one object per item with
 *    task, doc_id, (MMLU: subject), pred, pred_norm, gold.  acc = pred == gold,
 *    acc_norm = pred_norm == gold.
 *  - lm-evaluation-harness --log_samples: samples_<task>_<timestamp>.jsonl, one
 *    object per item with doc_id and per-item metric values "acc", "acc_norm"
 *    (0/1 numbers); the task comes from the file name.
 * Items are identified by (task, subject, doc_id).  Duplicate ids are an error.
 * Every item remembers its file and line, so errors about an item name them.
 * A log without a single record (0 bytes, or blank lines only) is QS_EFORMAT.
 * An item with a subject also belongs to the subtask "<task>_<subject>" (the row
 * name results.json uses for an MMLU subject).
 *
 * Discovery next to a results file R (itemlog_discover):
 *   1. R's directory holds samples.jsonl.zst or samples.jsonl -> qatscope log;
 *   2. else for each leaf task T, samples_T_<ts>.jsonl where R is results_<ts>.json,
 *      or, failing that, the lexicographically last samples_T_*.jsonl (timestamps
 *      sort in time order).
 */
#ifndef QS_ITEMLOG_H
#define QS_ITEMLOG_H

#include <stddef.h>

#include "qs/err.h"

typedef struct itemlog_item {
    char *task;
    char *subtask;               /* "task_subject" when the item has a subject (qatscope MMLU
                                  * items belong to the harness-style subtask mmlu_<subject>) */
    char *key;                   /* "task|subject|doc_id": unique, sortable */
    signed char acc, acc_norm;   /* 0/1, -1 when the log lacks the metric */
    const char *file;            /* the log it came from (owned by the itemlog) */
    long line;                   /* its line in that log */
} itemlog_item;

typedef struct itemlog {
    itemlog_item *items;
    size_t n_items, cap_items;
    int n_files;                 /* files read */
    char **paths;                /* every file opened, for diags: items point into these */
    size_t n_paths, cap_paths;
} itemlog;

/* Append a qatscope samples log (plain or .zst). */
int itemlog_load_qatscope(itemlog *il, const char *path, qs_diag *d);
/* Load from a file of either kind: a name samples_<task>_*.jsonl is read as the
 * harness layout for <task> (the task is the longest name in `tasks` matching), anything
 * else as qatscope's. */
int itemlog_load_any(itemlog *il, const char *path, const char *const *tasks, int n_tasks,
                     qs_diag *d);
/* Discovery as described above; *found = number of files read (0: none there). */
int itemlog_discover(itemlog *il, const char *results_path, const char *const *tasks,
                     int n_tasks, int *found, qs_diag *d);
/* Every file discovery next to results_path could read, whatever the tasks (the
 * qatscope log when there is one, else every samples_<task>_<ts>.jsonl there): fn(path,
 * ctx) for each, stopping at the first nonzero return, which is returned.  Nothing is
 * read: for checking an output against the inputs before any work. */
int itemlog_discover_each(const char *results_path, int (*fn)(const char *path, void *ctx),
                          void *ctx);
void itemlog_free(itemlog *il);   /* safe on a zeroed il */

/* Items whose task (or subtask) is one of `tasks`, sorted by key: fills *out (qs_malloc'd array of
 * pointers into il, caller frees with qs_free) and *n.  Duplicate keys: QS_EFORMAT. */
int itemlog_select(const itemlog *il, const char *const *tasks, int n_tasks,
                   const itemlog_item ***out, size_t *n, qs_diag *d);

#endif
