/* curve_data.c: RUN_DIR/metrics.jsonl (+ events.jsonl) -> series for the curve plot.
 * "train" records give loss, lr and max_clip_rate per step; "eval" records give
 * per-task accuracy (acc_norm for hellaswag/arc when present, acc otherwise: the
 * gate's rule), the held-out val_loss / val_ppl, and the KL / top-1 agreement
 * against the step-0 reference (val_kl_ref, val_top1_ref; eval_kl_reference).
 * The QAT boundary is the events.jsonl phase event, else the first train
 * record in phase "qat" -- but only for a run that had quantizers (the phase event, or a quant.jsonl.zst in
 * the run dir): a run without any has no QAT boundary, whatever its schedule's
 * phase names say.  A last line cut mid-write (a run still writing it, or killed) is
 * left out as the quant-log readers leave it out, and the cut is noted in cut_msg
 * (file and line) for the caller to warn about. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot_impl.h"
#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/resfile.h"

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
    qs_free(r->eval_kl);
    qs_free(r->eval_top1);
    qs_free(r->val_loss);
    qs_free(r->val_ppl);
    memset(r, 0, sizeof *r);
}

static int grow(void **p, long n, size_t elem_bytes)
{
    void *q = qs_realloc(*p, (size_t)n * elem_bytes);
    if (!q)
        return QS_ENOMEM;
    *p = q;
    return 0;
}

/* a logged number (null or absent: NaN) */
static int num(const qs_json_at *o, const char *key, double *out, qs_diag *d)
{
    return qs_json_num_or(o, key, NAN, out, d);
}

static int add_train(curve_run *r, const qs_json_at *obj, long *cap, qs_diag *d)
{
    long long s;
    const char *ph;
    int rc;
    if ((rc = qs_json_i64(obj, "step", LONG_MIN, LONG_MAX, &s, d)) ||
        (rc = qs_json_str_or(obj, "phase", "", &ph, d)))
        return rc;
    if (r->n_train == *cap) {
        long c = *cap ? 2 * *cap : 1024;
        if (grow((void **)&r->step, c, sizeof *r->step) || grow((void **)&r->loss, c, sizeof(double)) ||
            grow((void **)&r->lr, c, sizeof(double)) || grow((void **)&r->clip, c, sizeof(double)))
            return diag_set(d, QS_ENOMEM, obj->file, obj->line, "out of memory");
        *cap = c;
    }
    while (r->n_train > 0 && r->step[r->n_train - 1] >= s)
        r->n_train--;   /* resumed run repeats steps: keep the newest */
    long i = r->n_train++;
    r->step[i] = (long)s;
    if ((rc = num(obj, "loss", &r->loss[i], d)) || (rc = num(obj, "lr", &r->lr[i], d)) ||
        (rc = num(obj, "max_clip_rate", &r->clip[i], d)))
        return rc;
    if (!strcmp(ph, "qat") && r->qat_step < 0)
        r->qat_step = (long)s;
    return 0;
}

static int task_index(curve_run *r, const char *task, const json_t *tobj)
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

static int add_eval(curve_run *r, const qs_json_at *obj, long *cap, qs_diag *d)
{
    qs_json_at tasks;
    long long step;
    int rc;
    if ((rc = qs_json_i64(obj, "step", LONG_MIN, LONG_MAX, &step, d)) ||
        (rc = qs_json_obj(obj, "tasks", &tasks, d)))
        return rc;
    if (r->n_eval == *cap) {
        long c = *cap ? 2 * *cap : 64;
        if (grow((void **)&r->eval_step, c, sizeof *r->eval_step) ||
            grow((void **)&r->eval_acc, c * CURVE_MAX_TASKS, sizeof(double)) ||
            grow((void **)&r->eval_kl, c, sizeof(double)) ||
            grow((void **)&r->eval_top1, c, sizeof(double)) ||
            grow((void **)&r->val_loss, c, sizeof(double)) ||
            grow((void **)&r->val_ppl, c, sizeof(double)))
            return diag_set(d, QS_ENOMEM, obj->file, obj->line, "out of memory");
        *cap = c;
    }
    long e = r->n_eval++;
    r->eval_step[e] = (long)step;
    if ((rc = num(obj, "val_loss", &r->val_loss[e], d)) ||
        (rc = num(obj, "val_ppl", &r->val_ppl[e], d)))
        return rc;
    for (int t = 0; t < CURVE_MAX_TASKS; t++)
        r->eval_acc[e * CURVE_MAX_TASKS + t] = NAN;
    if ((rc = num(obj, "val_kl_ref", &r->eval_kl[e], d)) ||
        (rc = num(obj, "val_top1_ref", &r->eval_top1[e], d)))
        return rc;
    if (r->eval_kl[e] < 0)   /* NaN (absent) passes: no point drawn */
        return qs_json_fail(obj, "val_kl_ref", QS_ERANGE, d, "expected a KL >= 0, found %g",
                            r->eval_kl[e]);
    if (r->eval_top1[e] < 0 || r->eval_top1[e] > 1)
        return qs_json_fail(obj, "val_top1_ref", QS_ERANGE, d, "expected a fraction in [0, 1], "
                            "found %g", r->eval_top1[e]);
    const char *name;
    json_t *tobj;
    json_object_foreach((json_t *)tasks.v, name, tobj) {
        qs_json_at ta = qs_json_key(&tasks, name);
        int t = task_index(r, name, tobj);
        double *acc = t >= 0 ? &r->eval_acc[e * CURVE_MAX_TASKS + t] : NULL;
        if (t >= 0 && (rc = num(&ta, r->metric[t], acc, d)))
            return rc;
        if (acc && (*acc < 0 || *acc > 1))   /* a percent scale would draw 170% */
            return qs_json_fail(&ta, r->metric[t], QS_ERANGE, d, "expected an accuracy in "
                                "[0, 1], found %g", *acc);
    }
    return 0;
}

/* a log ending inside a record: its complete records stand, the cut is noted */
static int note_cut(curve_run *r, int rc, const qs_diag *d)
{
    if (rc != QS_ETRUNC)
        return rc;
    if (r->n_cut < 2) {
        if (d)
            diag_format(d, r->cut_msg[r->n_cut], sizeof r->cut_msg[0]);
        else
            snprintf(r->cut_msg[r->n_cut], sizeof r->cut_msg[0], "log is truncated");
        r->n_cut++;
    }
    return 0;
}

static int read_metrics(curve_run *r, const char *path, qs_diag *d)
{
    qs_jsonl jr;
    qs_json_at o;
    long cap_train = 0, cap_eval = 0;
    int rc = qs_jsonl_open(&jr, path, 0, d);
    while (!rc && (rc = qs_jsonl_next(&jr, &o, d)) == 1) {
        const char *ty;
        if (!(rc = qs_json_str(&o, "type", &ty, d)))
            rc = !strcmp(ty, "train") ? add_train(r, &o, &cap_train, d)
               : !strcmp(ty, "eval")  ? add_eval(r, &o, &cap_eval, d)
                                      : 0;
    }
    qs_jsonl_close(&jr);
    if (rc == QS_EFORMAT) {   /* say what a record looks like and where it is documented */
        char msg[QS_DIAG_MSG_MAX], where[QS_DIAG_PATH_MAX];   /* copies: diag_set writes d */
        snprintf(msg, sizeof msg, "%s", d->msg);
        snprintf(where, sizeof where, "%s", d->path);
        diag_set(d, rc, where, d->line, "%s (a train/eval record: README '### run directory')",
                 msg);
    }
    return note_cut(r, rc, d);
}

/* events.jsonl is optional; a malformed line there is an error like any other */
static int read_events(curve_run *r, const char *path, qs_diag *d)
{
    if (!fileio_exists(path))
        return 0;
    qs_jsonl jr;
    qs_json_at o;
    int rc = qs_jsonl_open(&jr, path, 0, d);
    while (!rc && (rc = qs_jsonl_next(&jr, &o, d)) == 1) {
        const char *ty, *ph, *task;
        long long s;
        if ((rc = qs_json_str(&o, "type", &ty, d)) ||
            (rc = qs_json_i64(&o, "step", LONG_MIN, LONG_MAX, &s, d)) ||
            (rc = qs_json_str_or(&o, "phase", "", &ph, d)) ||
            (rc = qs_json_str_or(&o, "task", "?", &task, d)))
            break;
        if (!strcmp(ty, "phase") && !strcmp(ph, "qat")) {
            r->qat_step = (long)s;
            r->has_quant = 1;
        }
        if (!strcmp(ty, "forgetting") && r->n_forget < 64) {
            r->forget_step[r->n_forget] = (long)s;
            snprintf(r->forget_task[r->n_forget], sizeof r->forget_task[0], "%s", task);
            r->n_forget++;
        }
    }
    qs_jsonl_close(&jr);
    return note_cut(r, rc, d);
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
        rc = diag_set(d, QS_EFORMAT, path, -1, "no train or eval records%s",
                      r->n_cut ? " (the file ends inside its first record)" : "");
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
