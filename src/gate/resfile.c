/* resfile.c: harness / qatscope results files -> per-task accuracies (see qs/resfile.h). */
#include "qs/resfile.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "qs/json.h"
#include "qs/mem.h"

/* aggregates that are tags, not groups (spec/tasks.md §3: ignore when comparing) */
static const char *const resfile_ignored_groups[] = {"ai2_arc"};

static int is_ignored_group(const char *name)
{
    for (size_t i = 0; i < sizeof resfile_ignored_groups / sizeof *resfile_ignored_groups; i++)
        if (!strcmp(name, resfile_ignored_groups[i]))
            return 1;
    return 0;
}

void resfile_free(resfile *rf)
{
    if (!rf)
        return;
    for (int i = 0; i < rf->n_tasks; i++) {
        qs_free(rf->tasks[i].name);
        for (int j = 0; j < rf->tasks[i].n_leaves; j++)
            qs_free(rf->tasks[i].leaves[j]);
        qs_free(rf->tasks[i].leaves);
    }
    qs_free(rf->tasks);
    qs_free(rf->path);
    memset(rf, 0, sizeof *rf);
}

const resfile_task *resfile_task_find(const resfile *rf, const char *name)
{
    for (int i = 0; i < rf->n_tasks; i++)
        if (!strcmp(rf->tasks[i].name, name))
            return &rf->tasks[i];
    return NULL;
}

double resfile_task_metric(const resfile_task *t, const char *metric)
{
    if (!strcmp(metric, "acc"))
        return t->acc;
    if (!strcmp(metric, "acc_norm"))
        return t->acc_norm;
    return NAN;
}

const char *resfile_default_metric(const char *task, int has_acc, int has_acc_norm)
{
    static const char *const norm_prefixes[] = {"hellaswag", "arc_", "arc-"};
    if (!has_acc_norm)
        return "acc";
    for (size_t i = 0; i < sizeof norm_prefixes / sizeof *norm_prefixes; i++)
        if (!strncmp(task, norm_prefixes[i], strlen(norm_prefixes[i])))
            return "acc_norm";
    return has_acc ? "acc" : "acc_norm";
}

/* metric value of one results entry: "<m>,none" (0.4) or "<m>" (0.3); NAN when absent */
static int read_metric(const qs_json_at *entry, const char *metric, double *out, int *layout,
                       qs_diag *d)
{
    char key[64];
    snprintf(key, sizeof key, "%s,none", metric);
    const json_t *v = qs_json_key(entry, key).v;
    int lay = RESFILE_LAYOUT_V04;
    if (!v) {
        v = qs_json_key(entry, metric).v;
        lay = RESFILE_LAYOUT_V03;
        snprintf(key, sizeof key, "%s", metric);
    }
    *out = NAN;
    if (!v || (json_is_string(v) && !strcmp(json_string_value(v), "N/A")))
        return 0;   /* absent, or not computed (a group without items) */
    double x;
    int rc = qs_json_num(entry, key, &x, d);
    if (rc)
        return rc;
    if (!(x >= 0.0 && x <= 1.0))
        return qs_json_fail(entry, key, QS_EFORMAT, d, "expected a fraction in [0, 1], found %g",
                            x);
    *out = x;
    if (!*layout)
        *layout = lay;
    return 0;
}

/* n-samples.<task>.effective, else results.<task>.n, else -1 (unknown); a
 * negative count is malformed, not "unknown" */
static int read_n_items(json_t *root, json_t *entry, const char *task, const char *path,
                        long *out, qs_diag *d)
{
    json_t *all = json_object_get(root, "n-samples"), *ns = json_object_get(all, task);
    json_t *eff = json_object_get(ns, "effective"), *n = json_object_get(entry, "n");
    *out = -1;
    /* present but not a count: a wrong type must not pass as "unknown" */
    if ((all && !json_is_object(all)) || (ns && !json_is_object(ns)) ||
        (eff && !json_is_integer(eff)))
        return diag_set(d, QS_EFORMAT, path, -1, "n-samples%s%s%s: expected %s", all && ns ? "." : "",
                        all && ns ? task : "", eff ? ".effective" : "",
                        eff ? "an integer item count" : "an object");
    int from_ns = eff != NULL;
    json_t *v = from_ns ? eff : n;
    if (!json_is_integer(v))
        return 0;
    if (json_integer_value(v) < 1)   /* an accuracy over no items decides nothing */
        return diag_set(d, QS_EFORMAT, path, -1, "%s.%s%s: expected an item count >= 1, got %lld",
                        from_ns ? "n-samples" : "results", task, from_ns ? ".effective" : ".n",
                        (long long)json_integer_value(v));
    *out = (long)json_integer_value(v);
    return 0;
}

/* append the leaves under `name` (recursively through group_subtasks) to t */
static int collect_leaves(json_t *gs, const char *name, resfile_task *t, int depth)
{
    json_t *kids = json_object_get(gs, name);
    if (!json_is_array(kids) || depth > 16) {
        if (depth == 0)
            return 0;
        char **grown = qs_realloc(t->leaves, (size_t)(t->n_leaves + 1) * sizeof *grown);
        if (!grown)
            return QS_ENOMEM;
        t->leaves = grown;
        if (!(t->leaves[t->n_leaves] = qs_strdup(name)))
            return QS_ENOMEM;
        t->n_leaves++;
        return 0;
    }
    size_t i;
    json_t *k;
    json_array_foreach(kids, i, k) {
        if (!json_is_string(k))
            continue;
        int rc = collect_leaves(gs, json_string_value(k), t, depth + 1);
        if (rc)
            return rc;
    }
    return 0;
}

/* v0.3 files list MMLU as hendrycksTest-<subject> rows only.  Add the leaderboard's
 * headline row: "hendrycksTest" = unweighted mean over the subjects (spec/tasks.md §1),
 * with the subjects as its children, so the gate compares one MMLU number. */
#define RESFILE_V03_MMLU_PREFIX "hendrycksTest-"

static int add_v03_mmlu_group(resfile *rf, const char *path, qs_diag *d)
{
    size_t plen = strlen(RESFILE_V03_MMLU_PREFIX);
    int n = 0, n_norm = 0;
    double sum = 0, sum_norm = 0;
    for (int i = 0; i < rf->n_tasks; i++)
        if (!strncmp(rf->tasks[i].name, RESFILE_V03_MMLU_PREFIX, plen)) {
            n++;
            sum += rf->tasks[i].acc;
            if (!isnan(rf->tasks[i].acc_norm)) {
                n_norm++;
                sum_norm += rf->tasks[i].acc_norm;
            }
        }
    if (n == 0 || resfile_task_find(rf, "hendrycksTest"))
        return 0;
    resfile_task *grown = qs_realloc(rf->tasks, (size_t)(rf->n_tasks + 1) * sizeof *grown);
    if (!grown)
        return diag_set(d, QS_ENOMEM, path, -1, "tasks");
    rf->tasks = grown;
    resfile_task *g = &rf->tasks[rf->n_tasks];
    memset(g, 0, sizeof *g);
    g->leaves = qs_calloc((size_t)n, sizeof *g->leaves);
    g->name = qs_strdup("hendrycksTest");
    if (!g->leaves || !g->name) {
        qs_free(g->leaves);
        qs_free(g->name);
        return diag_set(d, QS_ENOMEM, path, -1, "tasks");
    }
    rf->n_tasks++;
    g->is_group = g->top_level = 1;
    g->n_items = -1;
    g->acc = sum / n;   /* NAN if a subject lacks acc: then the gate reports it missing */
    g->acc_norm = n_norm == n ? sum_norm / n : NAN;
    for (int i = 0; i < rf->n_tasks - 1; i++)
        if (!strncmp(rf->tasks[i].name, RESFILE_V03_MMLU_PREFIX, plen)) {
            rf->tasks[i].top_level = 0;
            if (!(g->leaves[g->n_leaves++] = qs_strdup(rf->tasks[i].name)))
                return diag_set(d, QS_ENOMEM, path, -1, "tasks");
        }
    return 0;
}

static int parse_root(resfile *rf, const qs_json_at *r, qs_diag *d)
{
    const char *path = r->file;
    json_t *root = (json_t *)r->v;
    qs_json_at res = qs_json_key(r, "results");
    json_t *results = (json_t *)res.v;
    if (!json_is_object(results))
        return diag_set(d, QS_EFORMAT, path, -1,
                        "expected a results file with a \"results\" object (lm-evaluation-harness "
                        "or qatscope eval layout), found none");
    json_t *gs = json_object_get(root, "group_subtasks");
    json_t *groups = json_object_get(root, "groups");
    size_t n = json_object_size(results);
    rf->tasks = qs_calloc(n ? n : 1, sizeof *rf->tasks);
    if (!rf->tasks)
        return diag_set(d, QS_ENOMEM, path, -1, "%zu tasks", n);
    const char *name;
    json_t *entry;
    json_object_foreach(results, name, entry) {
        qs_json_at e;
        int rc = qs_json_obj(&res, name, &e, d);
        if (rc)
            return rc;
        if (is_ignored_group(name))
            continue;
        resfile_task *t = &rf->tasks[rf->n_tasks];
        if (!(t->name = qs_strdup(name)))
            return diag_set(d, QS_ENOMEM, path, -1, "task name");
        rf->n_tasks++;
        rc = read_metric(&e, "acc", &t->acc, &rf->layout, d);
        if (!rc)
            rc = read_metric(&e, "acc_norm", &t->acc_norm, &rf->layout, d);
        if (rc)
            return rc;
        if ((rc = read_n_items(root, entry, name, path, &t->n_items, d)))
            return rc;
        t->top_level = 1;
        json_t *kids = json_object_get(gs, name);
        t->is_group = (json_is_array(kids) && json_array_size(kids) > 0) ||
                      json_object_get(groups, name) != NULL;
        if (t->is_group && collect_leaves(gs, name, t, 0))
            return diag_set(d, QS_ENOMEM, path, -1, "group %s", name);
    }
    /* children of a group are not top level; a group without n gets the sum of its leaves */
    for (int i = 0; i < rf->n_tasks; i++) {
        resfile_task *g = &rf->tasks[i];
        if (!g->is_group)
            continue;
        json_t *kids = json_object_get(gs, g->name);
        size_t k;
        json_t *kid;
        json_array_foreach(kids, k, kid) {
            for (int j = 0; j < rf->n_tasks; j++)
                if (json_is_string(kid) && !strcmp(rf->tasks[j].name, json_string_value(kid)))
                    rf->tasks[j].top_level = 0;
        }
        /* a subtask the group names but results lacks: the group's row stood on the
         * others alone (group_subtasks "mmlu": ["nosuch"] passed) */
        for (int l = 0; l < g->n_leaves; l++)
            if (!resfile_task_find(rf, g->leaves[l]))
                return diag_set(d, QS_EFORMAT, path, -1, "group_subtasks.%s: subtask '%s' has no "
                                "entry in results (expected every subtask of a group there)",
                                g->name, g->leaves[l]);
        if (g->n_items < 0 && g->n_leaves > 0) {
            long sum = 0;
            for (int l = 0; l < g->n_leaves && sum >= 0; l++) {
                const resfile_task *leaf = resfile_task_find(rf, g->leaves[l]);
                sum = leaf && leaf->n_items >= 0 ? sum + leaf->n_items : -1;
            }
            g->n_items = sum;
        }
    }
    if (!rf->layout)
        rf->layout = RESFILE_LAYOUT_V04;
    return rf->layout == RESFILE_LAYOUT_V03 ? add_v03_mmlu_group(rf, path, d) : 0;
}

int resfile_load(resfile *rf, const char *path, qs_diag *d)
{
    memset(rf, 0, sizeof *rf);
    json_t *root;
    int rc = qs_json_load_file(path, QS_JSON_NO_DUPLICATES | QS_JSON_OBJECT, &root, d);
    if (rc)
        return rc;
    qs_json_at r = qs_json_root(root, path, -1);
    if (!(rf->path = qs_strdup(path)))
        rc = diag_set(d, QS_ENOMEM, path, -1, "path");
    else
        rc = parse_root(rf, &r, d);
    json_decref(root);
    if (rc)
        resfile_free(rf);
    return rc;
}
