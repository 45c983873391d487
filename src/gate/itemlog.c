/* itemlog.c: per-item correctness from qatscope or harness sample logs (see qs/itemlog.h). */
#include "qs/itemlog.h"

#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"

void itemlog_free(itemlog *il)
{
    if (!il)
        return;
    for (size_t i = 0; i < il->n_items; i++) {
        qs_free(il->items[i].task);
        qs_free(il->items[i].subtask);
        qs_free(il->items[i].key);
    }
    qs_free(il->items);
    for (size_t i = 0; i < il->n_paths; i++)
        qs_free(il->paths[i]);
    qs_free(il->paths);
    memset(il, 0, sizeof *il);
}

static int item_push(itemlog *il, const qs_json_at *at, const char *task, const char *subject,
                     long long doc_id, int acc, int acc_norm)
{
    itemlog_item *grown = qs_grow(il->items, &il->cap_items, il->n_items + 1, sizeof *grown, 1024);
    if (!grown)
        return QS_ENOMEM;
    il->items = grown;
    char key[512];
    snprintf(key, sizeof key, "%s|%s|%012lld", task, subject ? subject : "", doc_id);
    itemlog_item *it = &il->items[il->n_items];
    it->task = qs_strdup(task);
    it->key = qs_strdup(key);
    it->subtask = NULL;
    if (subject && *subject) {
        size_t n = strlen(task) + strlen(subject) + 2;
        if ((it->subtask = qs_malloc(n)))
            snprintf(it->subtask, n, "%s_%s", task, subject);
    }
    if (!it->task || !it->key || (subject && *subject && !it->subtask)) {
        qs_free(it->task);
        qs_free(it->key);
        qs_free(it->subtask);
        return QS_ENOMEM;
    }
    it->acc = (signed char)acc;
    it->acc_norm = (signed char)acc_norm;
    it->file = il->paths[il->n_paths - 1];   /* load_lines pushed the file being read */
    it->line = at->line;
    il->n_items++;
    return 0;
}

/* 0/1 from a harness per-item metric (number or bool); -1 absent; -2 malformed */
static int metric01(const json_t *v)
{
    if (!v)
        return -1;
    if (json_is_boolean(v))
        return json_is_true(v);
    if (!json_is_number(v))
        return -2;
    double x = json_number_value(v);
    return x == 0.0 ? 0 : x == 1.0 ? 1 : -2;
}

typedef int (*line_fn)(itemlog *il, const qs_json_at *obj, const char *task, qs_diag *d);

/* The number of choices: the size of the per-choice arrays eval logs (all of one
 * size, at least 1); 0 when the record has none of them. */
static int logged_choices(const qs_json_at *obj, size_t *n, const char **from, qs_diag *d)
{
    static const char *const arrays[] = {"loglikelihoods", "n_tokens", "char_lens", "is_greedy"};
    *n = 0;
    for (int i = 0; i < 4; i++) {
        qs_json_at a;
        size_t k;
        int rc;
        if (!qs_json_key(obj, arrays[i]).v)
            continue;
        if ((rc = qs_json_arr(obj, arrays[i], &a, &k, d)))
            return rc;
        if (k == 0 || (*n && k != *n))
            return qs_json_fail(obj, arrays[i], QS_EFORMAT, d, "expected one entry per choice "
                                "(%zu, as %s has), found %zu", *n ? *n : 1, *n ? *from : "at least",
                                k);
        *n = k;
        *from = arrays[i];
    }
    return 0;
}

/* gold / pred / pred_norm: a choice index, below the number of choices when logged
 * (gold 99, -1 or 2^31 and pred -5 were taken, and decided acc) */
static int choice_index(const qs_json_at *obj, const char *key, int optional, size_t n,
                        const char *from, long long *out, qs_diag *d)
{
    /* optional: absent or null leaves LLONG_MIN */
    int rc = optional ? qs_json_i64_or(obj, key, LLONG_MIN + 1, LLONG_MAX, LLONG_MIN, out, d)
                      : qs_json_i64(obj, key, LLONG_MIN, LLONG_MAX, out, d);
    if (rc || (optional && *out == LLONG_MIN))
        return rc;
    if (n && (*out < 0 || *out >= (long long)n))
        return qs_json_fail(obj, key, QS_EFORMAT, d, "expected a choice index in [0, %zu] (%s "
                            "has %zu choices), found %lld", n - 1, from, n, *out);
    if (!n && (*out < 0 || *out > INT_MAX))
        return qs_json_fail(obj, key, QS_EFORMAT, d, "expected a choice index in [0, %d], "
                            "found %lld", INT_MAX, *out);
    return 0;
}

static int qatscope_line(itemlog *il, const qs_json_at *obj, const char *unused, qs_diag *d)
{
    (void)unused;
    const char *task, *subj, *from = NULL;
    long long doc, gold, pred, pred_norm;
    size_t n_choices;
    int rc;
    if ((rc = qs_json_str(obj, "task", &task, d)) ||
        (rc = qs_json_i64(obj, "doc_id", LLONG_MIN, LLONG_MAX, &doc, d)) ||
        (rc = logged_choices(obj, &n_choices, &from, d)) ||
        (rc = choice_index(obj, "gold", 0, n_choices, from, &gold, d)) ||
        (rc = choice_index(obj, "pred", 0, n_choices, from, &pred, d)) ||
        (rc = choice_index(obj, "pred_norm", 1, n_choices, from, &pred_norm, d)) ||
        (rc = qs_json_str_or(obj, "subject", NULL, &subj, d)))
        return rc;
    int acc_norm = pred_norm == LLONG_MIN ? -1 : pred_norm == gold;
    rc = item_push(il, obj, task, subj, doc, pred == gold, acc_norm);
    return rc ? diag_set(d, rc, obj->file, obj->line, "out of memory") : 0;
}

static int harness_line(itemlog *il, const qs_json_at *obj, const char *task, qs_diag *d)
{
    long long doc;
    int rc = qs_json_i64(obj, "doc_id", LLONG_MIN, LLONG_MAX, &doc, d);
    if (rc)
        return rc;
    int acc = metric01(qs_json_key(obj, "acc").v);
    int acc_norm = metric01(qs_json_key(obj, "acc_norm").v);
    if (acc == -2 || acc_norm == -2)
        return diag_set(d, QS_EFORMAT, obj->file, obj->line,
                        "expected per-item \"acc\"/\"acc_norm\" of 0 or 1");
    if (acc < 0 && acc_norm < 0)
        return diag_set(d, QS_EFORMAT, obj->file, obj->line,
                        "sample has neither \"acc\" nor \"acc_norm\" (not a multiple-choice log?)");
    rc = item_push(il, obj, task, NULL, doc, acc, acc_norm);
    return rc ? diag_set(d, rc, obj->file, obj->line, "out of memory") : 0;
}

/* the path's own copy, so items can name their file after the caller's string is gone */
static int path_push(itemlog *il, const char *path, qs_diag *d)
{
    char **grown = qs_grow(il->paths, &il->cap_paths, il->n_paths + 1, sizeof *grown, 8);
    char *copy = grown ? qs_strdup(path) : NULL;
    if (grown)
        il->paths = grown;
    if (!copy)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    il->paths[il->n_paths++] = copy;
    return 0;
}

static int load_lines(itemlog *il, const char *path, const char *task, line_fn fn, qs_diag *d)
{
    qs_jsonl r;
    qs_json_at obj;
    int rc = path_push(il, path, d);
    if (rc)
        return rc;
    size_t n_before = il->n_items;
    if (fileio_is_dir(path))   /* it read as an "empty log" */
        return diag_set(d, QS_EFORMAT, path, -1,
                        "is a directory; expected a per-item log file (one JSON object per line)");
    rc = qs_jsonl_open(&r, path, 0, d);
    while (!rc && (rc = qs_jsonl_next(&r, &obj, d)) == 1)
        rc = fn(il, &obj, task, d);
    qs_jsonl_close(&r);
    /* an empty log (a crashed or cut-short writer) is not "no per-item logs": saying
     * nothing would let the gate fall back to the threshold rule unseen */
    if (rc == 0 && il->n_items == n_before)
        rc = diag_set(d, QS_EFORMAT, path, -1,
                      "empty log: expected per-item records, one JSON object per line");
    if (rc == 0)
        il->n_files++;
    return rc;
}

int itemlog_load_qatscope(itemlog *il, const char *path, qs_diag *d)
{
    return load_lines(il, path, NULL, qatscope_line, d);
}

/* Append a harness samples file for `task`. */
static int itemlog_load_harness(itemlog *il, const char *path, const char *task, qs_diag *d)
{
    return load_lines(il, path, task, harness_line, d);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* the task T for a harness name "samples_T_<ts>.jsonl": longest T in tasks that fits */
static const char *harness_task_of(const char *name, const char *const *tasks, int n_tasks)
{
    const char *best = NULL;
    if (strncmp(name, "samples_", 8) != 0)
        return NULL;
    for (int i = 0; i < n_tasks; i++) {
        size_t n = strlen(tasks[i]);
        if (!strncmp(name + 8, tasks[i], n) && name[8 + n] == '_' &&
            (!best || n > strlen(best)))
            best = tasks[i];
    }
    return best;
}

int itemlog_load_any(itemlog *il, const char *path, const char *const *tasks, int n_tasks,
                     qs_diag *d)
{
    const char *name = base_name(path);
    const char *task = harness_task_of(name, tasks, n_tasks);
    if (task)
        return itemlog_load_harness(il, path, task, d);
    return itemlog_load_qatscope(il, path, d);
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* harness file for task in dir: same timestamp as the results file, else the last by name */
static int find_harness_file(const char *dir, const char *results_name, const char *task,
                             char *out, size_t out_bytes)
{
    char prefix[300], want[600] = "";
    snprintf(prefix, sizeof prefix, "samples_%s_", task);
    if (!strncmp(results_name, "results_", 8) && has_suffix(results_name, ".json"))
        snprintf(want, sizeof want, "%s%.*s.jsonl", prefix, (int)(strlen(results_name) - 13),
                 results_name + 8);
    DIR *dp = opendir(dir);
    if (!dp)
        return 0;
    char best[600] = "";
    struct dirent *e;
    while ((e = readdir(dp))) {
        const char *n = e->d_name;
        if (strncmp(n, prefix, strlen(prefix)) || !has_suffix(n, ".jsonl"))
            continue;
        /* "samples_mmlu_<ts>" must not pick up "samples_mmlu_anatomy_<ts>": the rest is a timestamp */
        const char *ts = n + strlen(prefix);
        if (!(ts[0] >= '0' && ts[0] <= '9'))
            continue;
        if (want[0] && !strcmp(n, want)) {
            snprintf(best, sizeof best, "%s", n);
            break;
        }
        if (strcmp(n, best) > 0)
            snprintf(best, sizeof best, "%s", n);
    }
    closedir(dp);
    if (!best[0])
        return 0;
    return fileio_join(out, out_bytes, dir, best) == 0;
}

/* The directory of a results file, and its qatscope samples log when it has one
 * (samples.jsonl.zst, else samples.jsonl): 1 with its path, else 0. */
static int own_log(const char *results_path, char *dir, size_t dir_bytes, char *path,
                   size_t path_bytes)
{
    const char *name = base_name(results_path);
    snprintf(dir, dir_bytes, "%.*s", (int)(name - results_path), results_path);
    if (!dir[0])
        snprintf(dir, dir_bytes, ".");
    static const char *const own[] = {"samples.jsonl.zst", "samples.jsonl"};
    for (int i = 0; i < 2; i++)
        if (fileio_join(path, path_bytes, dir, own[i]) == 0 && fileio_exists(path))
            return 1;
    return 0;
}

int itemlog_discover(itemlog *il, const char *results_path, const char *const *tasks,
                     int n_tasks, int *found, qs_diag *d)
{
    char dir[1024], path[2048];
    const char *name = base_name(results_path);
    *found = 0;
    if (own_log(results_path, dir, sizeof dir, path, sizeof path)) {
        int rc = itemlog_load_qatscope(il, path, d);
        *found = rc ? 0 : 1;
        return rc;
    }
    for (int t = 0; t < n_tasks; t++) {
        if (!find_harness_file(dir, name, tasks[t], path, sizeof path))
            continue;
        int rc = itemlog_load_harness(il, path, tasks[t], d);
        if (rc)
            return rc;
        (*found)++;
    }
    return 0;
}

/* a name discovery could take for some task: "samples_<task>_<digit>...jsonl" */
static int harness_name_any(const char *n)
{
    if (strncmp(n, "samples_", 8) || !has_suffix(n, ".jsonl"))
        return 0;
    for (const char *u = strchr(n + 8, '_'); u; u = strchr(u + 1, '_'))
        if (u[1] >= '0' && u[1] <= '9')
            return 1;
    return 0;
}

int itemlog_discover_each(const char *results_path, int (*fn)(const char *path, void *ctx),
                          void *ctx)
{
    char dir[1024], path[2048];
    if (own_log(results_path, dir, sizeof dir, path, sizeof path))
        return fn(path, ctx);
    DIR *dp = opendir(dir);
    if (!dp)
        return 0;
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(dp));)
        if (harness_name_any(e->d_name) && fileio_join(path, sizeof path, dir, e->d_name) == 0)
            rc = fn(path, ctx);
    closedir(dp);
    return rc;
}

static int cmp_item_ptr(const void *a, const void *b)
{
    const itemlog_item *x = *(const itemlog_item *const *)a, *y = *(const itemlog_item *const *)b;
    return strcmp(x->key, y->key);
}

int itemlog_select(const itemlog *il, const char *const *tasks, int n_tasks,
                   const itemlog_item ***out, size_t *n, qs_diag *d)
{
    const itemlog_item **sel = qs_malloc((il->n_items ? il->n_items : 1) * sizeof *sel);
    if (!sel)
        return diag_set(d, QS_ENOMEM, NULL, -1, "%zu items", il->n_items);
    size_t k = 0;
    for (size_t i = 0; i < il->n_items; i++)
        for (int t = 0; t < n_tasks; t++)
            if (!strcmp(il->items[i].task, tasks[t]) ||
                (il->items[i].subtask && !strcmp(il->items[i].subtask, tasks[t]))) {
                sel[k++] = &il->items[i];
                break;
            }
    qsort(sel, k, sizeof *sel, cmp_item_ptr);
    for (size_t i = 1; i < k; i++)
        if (!strcmp(sel[i - 1]->key, sel[i]->key)) {
            const itemlog_item *a = sel[i - 1], *b = sel[i];
            if (b < a) {   /* items sit in load order: name the later record, the repeat */
                a = sel[i];
                b = sel[i - 1];
            }
            int rc = diag_set(d, QS_EFORMAT, b->file, b->line,
                              "item %s appears twice in the sample logs (first at %s:%ld)",
                              b->key, a->file, a->line);
            qs_free(sel);
            return rc;
        }
    *out = sel;
    *n = k;
    return 0;
}
