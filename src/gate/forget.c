/* forget.c: forgetting alarm = drop above X points AND McNemar p < alpha (see qs/forget.h). */
#include "qs/forget.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qs/mem.h"
#include "qs/resfile.h"
#include "qs/stats.h"
#include "qs/zlog.h"

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
        snprintf(out->event_json, sizeof out->event_json,
                 "{\"step\":%ld,\"type\":\"forgetting\",\"task\":\"%s\",\"baseline\":%.6g,"
                 "\"acc\":%.6g,\"drop_points\":%.4g,\"p_value\":%.4g,\"n\":%zu}",
                 step, out->task, out->baseline, out->acc, out->drop_points, out->p_value,
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

static void forget_put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t forget_get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int forget_tracker_save(const forget_tracker *t, void **bytes, size_t *n, qs_diag *d)
{
    size_t total = 4;
    for (int i = 0; i < t->n_tasks; i++)
        total += 12 + strlen(t->task[i]) + t->n_items[i];
    unsigned char *buf = qs_malloc(total), *p = buf;
    if (!buf)
        return diag_set(d, QS_ENOMEM, NULL, -1, "forgetting baselines: out of memory");
    forget_put_le(p, (uint64_t)t->n_tasks, 4);
    p += 4;
    for (int i = 0; i < t->n_tasks; i++) {
        size_t nl = strlen(t->task[i]);
        forget_put_le(p, nl, 4);
        memcpy(p + 4, t->task[i], nl);
        p += 4 + nl;
        forget_put_le(p, t->n_items[i], 8);
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
    uint64_t n_tasks = forget_get_le(p, 4);
    p += 4;
    int rc = 0;
    for (uint64_t k = 0; !rc && k < n_tasks; k++) {
        uint64_t nl = (size_t)(end - p) >= 4 ? forget_get_le(p, 4) : UINT64_MAX;
        if (nl == UINT64_MAX || nl == 0 || nl >= sizeof name || (size_t)(end - p) - 4 < nl + 8) {
            rc = diag_set(d, QS_EFORMAT, NULL, -1,
                          "forgetting baselines: task %llu: expected a name of 1..%zu bytes and "
                          "an item count", (unsigned long long)k, sizeof name - 1);
            break;
        }
        memcpy(name, p + 4, (size_t)nl);
        name[nl] = 0;
        p += 4 + nl;
        uint64_t ni = forget_get_le(p, 8);
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

static int series_add_task(series *s, long step, const char *task, json_t *tobj,
                           const char *metric, const char *path, long lineno, qs_diag *d)
{
    const char *m = metric[0] ? metric
                              : resfile_default_metric(task, json_object_get(tobj, "acc") != NULL,
                                                       json_object_get(tobj, "acc_norm") != NULL);
    char key[32];
    snprintf(key, sizeof key, "items_%s", m);
    json_t *items = json_object_get(tobj, key);
    if (!items)
        return 0;
    if (!json_is_string(items))
        return diag_set(d, QS_EFORMAT, path, lineno, "tasks.%s.%s: expected a string of 0/1",
                        task, key);
    size_t n = json_string_length(items);
    const char *txt = json_string_value(items);
    unsigned char *v = series_own(s, qs_malloc(n ? n : 1));
    char *name = series_own(s, qs_strdup(task));
    if (!v || !name)
        return diag_set(d, QS_ENOMEM, path, lineno, "%zu items", n);
    for (size_t i = 0; i < n; i++) {
        if (txt[i] != '0' && txt[i] != '1')
            return diag_set(d, QS_EFORMAT, path, lineno,
                            "tasks.%s.%s: character %zu is '%c', expected '0' or '1'", task, key,
                            i, txt[i]);
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
    zlog_reader *r;
    int rc = zlog_reader_create(&r, path, d);
    if (rc)
        return rc;
    const char *line;
    size_t len;
    long lineno = 0;
    while ((rc = zlog_next(r, &line, &len, &lineno, d)) == 1) {
        rc = 0;
        json_error_t jerr;
        json_t *obj = json_loadb(line, len, 0, &jerr);
        json_t *type = json_object_get(obj, "type");
        if (!json_is_object(obj)) {
            json_decref(obj);
            rc = diag_set(d, QS_EFORMAT, path, lineno, "expected one JSON object per line");
            break;
        }
        if (json_is_string(type) && !strcmp(json_string_value(type), "eval")) {
            json_t *step = json_object_get(obj, "step"), *tasks = json_object_get(obj, "tasks");
            if (!json_is_integer(step) || !json_is_object(tasks)) {
                json_decref(obj);
                rc = diag_set(d, QS_EFORMAT, path, lineno,
                              "eval record: expected integer \"step\" and object \"tasks\"");
                break;
            }
            const char *task;
            json_t *tobj;
            json_object_foreach(tasks, task, tobj) {
                if (json_is_object(tobj) &&
                    (rc = series_add_task(s, (long)json_integer_value(step), task, tobj, metric,
                                          path, lineno, d)))
                    break;
            }
        }
        json_decref(obj);
        if (rc)
            break;
    }
    zlog_reader_destroy(r);
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
