/* curve_data.c: RUN_DIR/metrics.jsonl (+ events.jsonl) -> series for the curve plot.
 * "train" records give loss, lr and max_clip_rate per step; "eval" records give
 * per-task accuracy (acc_norm for hellaswag/arc when present, acc otherwise: the
 * gate's rule) and the held-out val_loss / val_ppl.  The QAT boundary is the
 * events.jsonl phase event, else the first train record in phase "qat" -- but
 * only for a run that had quantizers (the phase event, or a quant.jsonl.zst in
 * the run dir): a run without any has no QAT boundary, whatever its schedule's
 * phase names say.  A last line cut mid-write is ignored. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot_impl.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/resfile.h"
#include "qs/zlog.h"

void curve_run_free_impl(curve_run *r)
{
    if (!r)
        return;
    qs_free(r->step);
    qs_free(r->loss);
    qs_free(r->lr);
    qs_free(r->clip);
    qs_free(r->eval_step);
    qs_free(r->eval_acc);
    qs_free(r->val_loss);
    qs_free(r->val_ppl);
    memset(r, 0, sizeof *r);
}

static double num(json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int grow(void **p, long n, size_t elem_bytes)
{
    void *q = qs_realloc(*p, (size_t)n * elem_bytes);
    if (!q)
        return QS_ENOMEM;
    *p = q;
    return 0;
}

static int add_train(curve_run *r, json_t *obj, long *cap)
{
    json_t *step = json_object_get(obj, "step");
    if (!json_is_integer(step))
        return QS_EFORMAT;
    if (r->n_train == *cap) {
        long c = *cap ? 2 * *cap : 1024;
        if (grow((void **)&r->step, c, sizeof *r->step) || grow((void **)&r->loss, c, sizeof(double)) ||
            grow((void **)&r->lr, c, sizeof(double)) || grow((void **)&r->clip, c, sizeof(double)))
            return QS_ENOMEM;
        *cap = c;
    }
    long s = (long)json_integer_value(step);
    while (r->n_train > 0 && r->step[r->n_train - 1] >= s)
        r->n_train--;   /* resumed run repeats steps: keep the newest */
    long i = r->n_train++;
    r->step[i] = s;
    r->loss[i] = num(json_object_get(obj, "loss"));
    r->lr[i] = num(json_object_get(obj, "lr"));
    r->clip[i] = num(json_object_get(obj, "max_clip_rate"));
    json_t *ph = json_object_get(obj, "phase");
    if (json_is_string(ph) && !strcmp(json_string_value(ph), "qat") && r->qat_step < 0)
        r->qat_step = s;
    return 0;
}

static int task_index(curve_run *r, const char *task, json_t *tobj)
{
    for (int i = 0; i < r->n_tasks; i++)
        if (!strcmp(r->task[i], task))
            return i;
    if (r->n_tasks == CURVE_MAX_TASKS)
        return -1;
    int i = r->n_tasks++;
    snprintf(r->task[i], sizeof r->task[i], "%s", task);
    snprintf(r->metric[i], sizeof r->metric[i], "%s",
             resfile_default_metric(task, json_object_get(tobj, "acc") != NULL,
                                    json_object_get(tobj, "acc_norm") != NULL));
    return i;
}

static int add_eval(curve_run *r, json_t *obj, long *cap)
{
    json_t *step = json_object_get(obj, "step"), *tasks = json_object_get(obj, "tasks");
    if (!json_is_integer(step) || !json_is_object(tasks))
        return QS_EFORMAT;
    if (r->n_eval == *cap) {
        long c = *cap ? 2 * *cap : 64;
        if (grow((void **)&r->eval_step, c, sizeof *r->eval_step) ||
            grow((void **)&r->eval_acc, c * CURVE_MAX_TASKS, sizeof(double)) ||
            grow((void **)&r->val_loss, c, sizeof(double)) ||
            grow((void **)&r->val_ppl, c, sizeof(double)))
            return QS_ENOMEM;
        *cap = c;
    }
    long e = r->n_eval++;
    r->eval_step[e] = (long)json_integer_value(step);
    r->val_loss[e] = num(json_object_get(obj, "val_loss"));
    r->val_ppl[e] = num(json_object_get(obj, "val_ppl"));
    for (int t = 0; t < CURVE_MAX_TASKS; t++)
        r->eval_acc[e * CURVE_MAX_TASKS + t] = NAN;
    const char *name;
    json_t *tobj;
    json_object_foreach(tasks, name, tobj) {
        int t = task_index(r, name, tobj);
        if (t >= 0)
            r->eval_acc[e * CURVE_MAX_TASKS + t] = num(json_object_get(tobj, r->metric[t]));
    }
    return 0;
}

static int read_metrics(curve_run *r, const char *path, qs_diag *d)
{
    zlog_reader *z;
    int rc = zlog_reader_create(&z, path, d);
    if (rc)
        return rc;
    const char *line;
    size_t len;
    long lineno = 0, cap_train = 0, cap_eval = 0;
    while ((rc = zlog_next(z, &line, &len, &lineno, d)) == 1) {
        json_t *obj = json_loadb(line, len, 0, NULL);
        json_t *type = json_object_get(obj, "type");
        const char *ty = json_is_string(type) ? json_string_value(type) : NULL;
        rc = !ty ? QS_EFORMAT : !strcmp(ty, "train") ? add_train(r, obj, &cap_train)
           : !strcmp(ty, "eval") ? add_eval(r, obj, &cap_eval) : 0;
        json_decref(obj);
        if (rc == QS_ENOMEM)
            rc = diag_set(d, rc, path, lineno, "out of memory");
        else if (rc)
            rc = diag_set(d, rc, path, lineno,
                          "expected a JSON object with \"type\" and an integer \"step\" "
                          "(train/eval record, formats.md)");
        if (rc)
            break;
    }
    zlog_reader_destroy(z);
    return rc == QS_ETRUNC ? 0 : rc;
}

/* events.jsonl is optional; a malformed line there is an error like any other */
static int read_events(curve_run *r, const char *path, qs_diag *d)
{
    if (!fileio_exists(path))
        return 0;
    zlog_reader *z;
    int rc = zlog_reader_create(&z, path, d);
    if (rc)
        return rc;
    const char *line;
    size_t len;
    long lineno = 0;
    while ((rc = zlog_next(z, &line, &len, &lineno, d)) == 1) {
        rc = 0;
        json_t *obj = json_loadb(line, len, 0, NULL);
        json_t *type = json_object_get(obj, "type"), *step = json_object_get(obj, "step");
        if (!json_is_string(type) || !json_is_integer(step)) {
            json_decref(obj);
            rc = diag_set(d, QS_EFORMAT, path, lineno, "expected an event with \"type\" and integer \"step\"");
            break;
        }
        const char *ty = json_string_value(type);
        long s = (long)json_integer_value(step);
        json_t *ph = json_object_get(obj, "phase"), *task = json_object_get(obj, "task");
        if (!strcmp(ty, "phase") && json_is_string(ph) && !strcmp(json_string_value(ph), "qat")) {
            r->qat_step = s;
            r->has_quant = 1;
        }
        if (!strcmp(ty, "forgetting") && r->n_forget < 64) {
            r->forget_step[r->n_forget] = s;
            snprintf(r->forget_task[r->n_forget], sizeof r->forget_task[0], "%s",
                     json_is_string(task) ? json_string_value(task) : "?");
            r->n_forget++;
        }
        json_decref(obj);
    }
    zlog_reader_destroy(z);
    return rc == QS_ETRUNC ? 0 : rc;
}

int curve_run_load_impl(curve_run *r, const char *run_dir, qs_diag *d)
{
    memset(r, 0, sizeof *r);
    r->qat_step = -1;
    char path[1024];
    /* run name = last path component, trailing slashes ignored */
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", run_dir);
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/')
        tmp[--n] = 0;
    const char *slash = strrchr(tmp, '/');
    snprintf(r->name, sizeof r->name, "%s", slash && slash[1] ? slash + 1 : tmp);
    if (fileio_join(path, sizeof path, run_dir, "metrics.jsonl"))
        return diag_set(d, QS_ERANGE, run_dir, -1, "path too long");
    if (!fileio_exists(path))
        return diag_set(d, QS_ENOTFOUND, path, -1, "not found (the per-step log `qatscope train` writes)");
    int rc = read_metrics(r, path, d);
    if (!rc && r->n_train == 0 && r->n_eval == 0)
        rc = diag_set(d, QS_EFORMAT, path, -1, "no train or eval records");
    if (!rc && fileio_join(path, sizeof path, run_dir, "events.jsonl") == 0)
        rc = read_events(r, path, d);
    if (!rc && !r->has_quant)
        r->has_quant = fileio_join(path, sizeof path, run_dir, "quant.jsonl.zst") == 0 &&
                       fileio_exists(path);
    if (!rc && !r->has_quant)
        r->qat_step = -1;   /* a schedule phase without quantizers is no QAT */
    if (rc)
        curve_run_free_impl(r);
    return rc;
}
