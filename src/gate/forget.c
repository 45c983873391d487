/* forget.c: forgetting alarm = drop above X points AND McNemar p < alpha (see qs/forget.h). */
#include "qs/forget.h"

#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qs/json.h"
#include "qs/bytes.h"
#include "qs/mem.h"
#include "qs/resfile.h"
#include "qs/stats.h"

void forget_opts_default(forget_opts *o)
{
    o->max_drop_points = 2.0;
    o->alpha = 0.05;
    o->stop_on_forgetting = 0;
}

int forget_check(const char *task, long step, const unsigned char *base_correct,
                 const unsigned char *cur_correct, size_t n_items, const forget_opts *o,
                 forget_result *out, qs_diag *d)
{
    memset(out, 0, sizeof *out);
    if (n_items == 0)
        return diag_set(d, QS_EINVAL, NULL, -1, "forgetting check for %s: no items", task);
    stats_pairs s;
    int rc = stats_pairs_count(base_correct, cur_correct, n_items, &s, d);
    if (!rc)
        rc = stats_mcnemar_exact(s.base_only, s.cand_only, &out->p_value, d);
    if (rc)
        return rc;
    snprintf(out->task, sizeof out->task, "%s", task);
    out->step = step;
    out->n_items = (long)n_items;
    out->baseline = (double)(s.both_right + s.base_only) / (double)n_items;
    out->acc = (double)(s.both_right + s.cand_only) / (double)n_items;
    out->drop_points = 100.0 * (out->baseline - out->acc);
    out->b = s.base_only;
    out->c = s.cand_only;
    out->alarm = out->drop_points > o->max_drop_points && out->p_value < o->alpha;
    out->stop = out->alarm && o->stop_on_forgetting;
    if (out->alarm) {
        snprintf(out->warning, sizeof out->warning,
                 "forgetting: %s at step %ld: %.2f%% -> %.2f%% (drop %.2f pp > %.2f), McNemar "
                 "p=%.3g < %g on %zu items",
                 out->task, step, 100 * out->baseline, 100 * out->acc, out->drop_points,
                 o->max_drop_points, out->p_value, o->alpha, n_items);
        char qtask[6 * sizeof out->task + 3];
        qs_json_quote(qtask, sizeof qtask, out->task);
        snprintf(out->event_json, sizeof out->event_json,
                 "{\"step\":%ld,\"type\":\"forgetting\",\"task\":%s,\"baseline\":%.6g,"
                 "\"acc\":%.6g,\"drop_points\":%.4g,\"p_value\":%.4g,\"n\":%zu}",
                 step, qtask, out->baseline, out->acc, out->drop_points, out->p_value,
                 n_items);
    }
    return 0;
}

int forget_series_scan(const forget_eval *evals, int n_evals, const forget_opts *o,
                       forget_result *alarms, int max_alarms, int *n_alarms, qs_diag *d)
{
    *n_alarms = 0;
    for (int i = 0; i < n_evals; i++) {
        int base = -1;
        for (int j = 0; j < i && base < 0; j++)
            if (!strcmp(evals[j].task, evals[i].task))
                base = j;
        if (base < 0)
            continue;   /* this eval is the task's baseline */
        if (evals[base].n_items != evals[i].n_items)
            return diag_set(d, QS_EINVAL, NULL, -1,
                            "task %s: baseline has %zu items, step %ld has %zu (not the same items)",
                            evals[i].task, evals[base].n_items, evals[i].step, evals[i].n_items);
        forget_result r;
        int rc = forget_check(evals[i].task, evals[i].step, evals[base].correct, evals[i].correct,
                              evals[i].n_items, o, &r, d);
        if (rc)
            return rc;
        if (!r.alarm)
            continue;
        if (*n_alarms < max_alarms)
            alarms[*n_alarms] = r;
        (*n_alarms)++;
        if (r.stop)
            break;
    }
    return 0;
}

struct forget_tracker {
    forget_opts opts;
    int n_tasks, cap_tasks;
    char **task;              /* (n_tasks) names */
    unsigned char **base;     /* (n_tasks) baseline vectors */
    size_t *n_items;
};

int forget_tracker_create(forget_tracker **out, const forget_opts *o, qs_diag *d)
{
    forget_tracker *t = qs_calloc(1, sizeof *t);
    if (!t)
        return diag_set(d, QS_ENOMEM, NULL, -1, "forgetting tracker");
    t->opts = *o;
    *out = t;
    return 0;
}

void forget_tracker_destroy(forget_tracker *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_tasks; i++) {
        qs_free(t->task[i]);
        qs_free(t->base[i]);
    }
    qs_free(t->task);
    qs_free(t->base);
    qs_free(t->n_items);
    qs_free(t);
}

static int tracker_add(forget_tracker *t, const char *task, const unsigned char *correct,
                       size_t n_items, qs_diag *d)
{
    if (t->n_tasks == t->cap_tasks) {
        int cap = t->cap_tasks ? 2 * t->cap_tasks : 8;
        char **tn = qs_realloc(t->task, (size_t)cap * sizeof *tn);
        if (tn)
            t->task = tn;
        unsigned char **bv = tn ? qs_realloc(t->base, (size_t)cap * sizeof *bv) : NULL;
        if (bv)
            t->base = bv;
        size_t *ni = bv ? qs_realloc(t->n_items, (size_t)cap * sizeof *ni) : NULL;
        if (!ni)
            return diag_set(d, QS_ENOMEM, NULL, -1, "forgetting tracker: %d tasks", cap);
        t->n_items = ni;
        t->cap_tasks = cap;
    }
    char *name = qs_strdup(task);
    unsigned char *copy = qs_malloc(n_items);
    if (!name || !copy) {
        qs_free(name);
        qs_free(copy);
        return diag_set(d, QS_ENOMEM, NULL, -1, "forgetting baseline of %s", task);
    }
    memcpy(copy, correct, n_items);
    t->task[t->n_tasks] = name;
    t->base[t->n_tasks] = copy;
    t->n_items[t->n_tasks] = n_items;
    t->n_tasks++;
    return 0;
}

int forget_tracker_observe(forget_tracker *t, const char *task, long step,
                           const unsigned char *correct, size_t n_items, forget_result *out,
                           qs_diag *d)
{
    for (int i = 0; i < t->n_tasks; i++) {
        if (strcmp(t->task[i], task))
            continue;
        if (t->n_items[i] != n_items)
            return diag_set(d, QS_EINVAL, NULL, -1,
                            "task %s: baseline has %zu items, step %ld has %zu (the in-loop "
                            "subset must stay fixed)",
                            task, t->n_items[i], step, n_items);
        return forget_check(task, step, t->base[i], correct, n_items, &t->opts, out, d);
    }
    /* first observation: it is the baseline (checked for 0/1 like any other) */
    int rc = forget_check(task, step, correct, correct, n_items, &t->opts, out, d);
    if (!rc)
        rc = tracker_add(t, task, correct, n_items, d);
    if (!rc)
        out->is_baseline = 1;
    return rc;
}

int forget_tracker_save(const forget_tracker *t, void **bytes, size_t *n, qs_diag *d)
{
    size_t total = 4;
    for (int i = 0; i < t->n_tasks; i++)
        total += 12 + strlen(t->task[i]) + t->n_items[i];
    unsigned char *buf = qs_malloc(total), *p = buf;
    if (!buf)
        return diag_set(d, QS_ENOMEM, NULL, -1, "forgetting baselines: out of memory");
    bytes_put_u32le(p, (uint32_t)t->n_tasks);
    p += 4;
    for (int i = 0; i < t->n_tasks; i++) {
        size_t nl = strlen(t->task[i]);
        bytes_put_u32le(p, (uint32_t)nl);
        memcpy(p + 4, t->task[i], nl);
        p += 4 + nl;
        bytes_put_u64le(p, t->n_items[i]);
        memcpy(p + 8, t->base[i], t->n_items[i]);
        p += 8 + t->n_items[i];
    }
    *bytes = buf;
    *n = total;
    return 0;
}

static void tracker_clear(forget_tracker *t)
{
    for (int i = 0; i < t->n_tasks; i++) {
        qs_free(t->task[i]);
        qs_free(t->base[i]);
    }
    t->n_tasks = 0;
}

int forget_tracker_restore(forget_tracker *t, const void *bytes, size_t n, qs_diag *d)
{
    const unsigned char *p = bytes, *end = p + n;
    char name[FORGET_TASK_MAX];
    tracker_clear(t);
    if (n < 4)
        return diag_set(d, QS_EFORMAT, NULL, -1, "forgetting baselines: %zu bytes, expected a count", n);
    uint64_t n_tasks = bytes_get_u32le(p);
    p += 4;
    int rc = 0;
    for (uint64_t k = 0; !rc && k < n_tasks; k++) {
        uint64_t nl = (size_t)(end - p) >= 4 ? bytes_get_u32le(p) : UINT64_MAX;
        if (nl == UINT64_MAX || nl == 0 || nl >= sizeof name || (size_t)(end - p) - 4 < nl + 8) {
            rc = diag_set(d, QS_EFORMAT, NULL, -1,
                          "forgetting baselines: task %llu: expected a name of 1..%zu bytes and "
                          "an item count", (unsigned long long)k, sizeof name - 1);
            break;
        }
        memcpy(name, p + 4, (size_t)nl);
        name[nl] = 0;
        p += 4 + nl;
        uint64_t ni = bytes_get_u64le(p);
        p += 8;
        if (ni == 0 || ni > (uint64_t)(end - p) || memchr(name, 0, (size_t)nl)) {
            rc = diag_set(d, QS_EFORMAT, NULL, -1,
                          "forgetting baselines: task %llu: %llu items, %zu bytes left",
                          (unsigned long long)k, (unsigned long long)ni, (size_t)(end - p));
            break;
        }
        for (int i = 0; !rc && i < t->n_tasks; i++)
            if (!strcmp(t->task[i], name))
                rc = diag_set(d, QS_EFORMAT, NULL, -1, "forgetting baselines: task '%s' twice", name);
        for (uint64_t i = 0; !rc && i < ni; i++)
            if (p[i] > 1)
                rc = diag_set(d, QS_EFORMAT, NULL, -1,
                              "forgetting baselines: task '%s' item %llu is %u, expected 0 or 1",
                              name, (unsigned long long)i, p[i]);
        if (!rc)
            rc = tracker_add(t, name, p, (size_t)ni, d);
        p += ni;
    }
    if (!rc && p != end)
        rc = diag_set(d, QS_EFORMAT, NULL, -1, "forgetting baselines: %zu trailing bytes",
                      (size_t)(end - p));
    if (rc)
        tracker_clear(t);
    return rc;
}

/* the series read from metrics.jsonl: owned strings + 0/1 vectors */
typedef struct series {
    forget_eval *evals;
    char **owned;          /* task names and vectors, freed together */
    int n, cap, n_owned, cap_owned;
} series;

static void *series_own(series *s, void *p)
{
    if (!p)
        return NULL;
    if (s->n_owned == s->cap_owned) {
        int cap = s->cap_owned ? 2 * s->cap_owned : 64;
        char **grown = qs_realloc(s->owned, (size_t)cap * sizeof *grown);
        if (!grown) {
            qs_free(p);
            return NULL;
        }
        s->owned = grown;
        s->cap_owned = cap;
    }
    s->owned[s->n_owned++] = p;
    return p;
}

static void series_free(series *s)
{
    for (int i = 0; i < s->n_owned; i++)
        qs_free(s->owned[i]);
    qs_free(s->owned);
    qs_free(s->evals);
}

static int series_add_task(series *s, long step, const char *task, const qs_json_at *tobj,
                           const char *metric, qs_diag *d)
{
    const char *path = tobj->file;
    long lineno = tobj->line;
    const char *m = metric[0] ? metric
                              : resfile_default_metric(task, qs_json_key(tobj, "acc").v != NULL,
                                                       qs_json_key(tobj, "acc_norm").v != NULL);
    char key[32];
    snprintf(key, sizeof key, "items_%s", m);
    const char *txt;
    int rc = qs_json_str_or(tobj, key, NULL, &txt, d);
    if (rc || !txt)
        return rc;
    size_t n = strlen(txt);
    unsigned char *v = series_own(s, qs_malloc(n ? n : 1));
    char *name = series_own(s, qs_strdup(task));
    if (!v || !name)
        return diag_set(d, QS_ENOMEM, path, lineno, "%zu items", n);
    for (size_t i = 0; i < n; i++) {
        if (txt[i] != '0' && txt[i] != '1')
            return qs_json_fail(tobj, key, QS_EFORMAT, d,
                                "character %zu is '%c', expected '0' or '1'", i, txt[i]);
        v[i] = (unsigned char)(txt[i] - '0');
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        forget_eval *grown = qs_realloc(s->evals, (size_t)cap * sizeof *grown);
        if (!grown)
            return diag_set(d, QS_ENOMEM, path, lineno, "eval records");
        s->evals = grown;
        s->cap = cap;
    }
    s->evals[s->n++] = (forget_eval){step, name, v, n};
    return 0;
}

static int series_read(series *s, const char *path, const char *metric, qs_diag *d)
{
    qs_jsonl r;
    qs_json_at obj;
    int rc = qs_jsonl_open(&r, path, 0, d);
    while (!rc && (rc = qs_jsonl_next(&r, &obj, d)) == 1) {
        const char *type;
        qs_json_at tasks;
        long long step;
        if ((rc = qs_json_str_or(&obj, "type", "", &type, d)) || strcmp(type, "eval"))
            continue;
        if ((rc = qs_json_i64(&obj, "step", LONG_MIN, LONG_MAX, &step, d)) ||
            (rc = qs_json_obj(&obj, "tasks", &tasks, d)))
            break;
        const char *task;
        json_t *tv;
        json_object_foreach((json_t *)tasks.v, task, tv) {
            qs_json_at tobj = qs_json_key(&tasks, task);
            if (json_is_object(tv) &&
                (rc = series_add_task(s, (long)step, task, &tobj, metric, d)))
                break;
        }
    }
    qs_jsonl_close(&r);
    return rc == QS_ETRUNC ? 0 : rc;   /* a run still being written ends mid-line */
}

int forget_metrics_scan(const char *metrics_path, const char *metric, const forget_opts *o,
                        forget_result *alarms, int max_alarms, int *n_alarms, qs_diag *d)
{
    series s = {0};
    *n_alarms = 0;
    int rc = series_read(&s, metrics_path, metric ? metric : "", d);
    if (!rc)
        rc = forget_series_scan(s.evals, s.n, o, alarms, max_alarms, n_alarms, d);
    if (rc && d && !d->path[0]) {
        char msg[QS_DIAG_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", d->msg);
        diag_set(d, rc, metrics_path, -1, "%s", msg);
    }
    series_free(&s);
    return rc;
}
