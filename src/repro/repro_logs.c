/* repro_logs.c: one grid run as its own logs tell it (include/qs/repro.h).
 *
 * Nothing here is recomputed from weights: the probe accuracies are the in-loop
 * evaluations the run wrote to metrics.jsonl, the alarms are the events it
 * raised while running, the saturation counts are its quant.jsonl.zst records.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/qlog.h"
#include "qs/runcfg.h"
#include "qs/satsummary.h"
#include "repro_impl.h"

void repro_run_result_free(repro_run_result *r)
{
    qs_free(r->loss);
    qs_free(r->eval_step);
    qs_free(r->eval_acc);
    qs_free(r->eval_val_loss);
    memset(r, 0, sizeof *r);
}

/* Calls fn on every line of a JSON-lines file (an object each). */
static int logs_each_line(const char *path,
                          int (*fn)(repro_run_result *, const qs_json_at *, qs_diag *),
                          repro_run_result *r, qs_diag *d)
{
    qs_jsonl in;
    int rc = qs_jsonl_open(&in, path, 0, d);
    qs_json_at rec;
    while (!rc && (rc = qs_jsonl_next(&in, &rec, d)) == 1)
        rc = fn(r, &rec, d);
    qs_jsonl_close(&in);
    return rc;
}

static int logs_grow(void **p, long n, size_t elem)
{
    if (n & (n - 1))   /* capacity doubles at powers of two */
        return 0;
    void *q = qs_realloc(*p, (size_t)(n ? 2 * n : 1) * elem);
    if (!q)
        return QS_ENOMEM;
    *p = q;
    return 0;
}

static int logs_metric_line(repro_run_result *r, const qs_json_at *rec, qs_diag *d)
{
    const char *type;
    long long step;
    int rc;
    if ((rc = qs_json_str_or(rec, "type", "", &type, d)) ||
        (rc = qs_json_i64_or(rec, "step", 0, 1000000000000LL, 0, &step, d)))
        return rc;
    if (!strcmp(type, "train")) {
        double loss;
        if (step != r->n_loss)
            return qs_json_fail(rec, "step", QS_EFORMAT, d, "train step %lld, expected %ld", step,
                                r->n_loss);
        if ((rc = qs_json_num_or(rec, "loss", NAN, &loss, d)))
            return rc;
        if (logs_grow((void **)&r->loss, r->n_loss, sizeof *r->loss))
            return diag_set(d, QS_ENOMEM, rec->file, rec->line, "out of memory");
        r->loss[r->n_loss++] = loss;
    } else if (!strcmp(type, "eval")) {
        qs_json_at tasks = qs_json_key(rec, "tasks"), t = qs_json_key(&tasks, REPRO_PROBE_TASK);
        long long items;
        double acc, val;
        if (!t.v)
            return 0;   /* another task's evaluation */
        if ((rc = qs_json_num(&t, "acc", &acc, d)) ||
            (rc = qs_json_i64_or(&t, "n", 0, 1000000000, 0, &items, d)) ||
            (rc = qs_json_num_or(rec, "val_loss", NAN, &val, d)))
            return rc;
        long k = r->n_evals;
        if (logs_grow((void **)&r->eval_step, k, sizeof *r->eval_step) ||
            logs_grow((void **)&r->eval_acc, k, sizeof *r->eval_acc) ||
            logs_grow((void **)&r->eval_val_loss, k, sizeof *r->eval_val_loss))
            return diag_set(d, QS_ENOMEM, rec->file, rec->line, "out of memory");
        r->eval_step[k] = (long)step;
        r->eval_acc[k] = acc;
        r->eval_val_loss[k] = val;
        r->probe_items = (long)items;
        r->n_evals = k + 1;
    }
    return 0;
}

static int logs_event_line(repro_run_result *r, const qs_json_at *rec, qs_diag *d)
{
    const char *type, *why;
    long long step;
    int rc;
    if ((rc = qs_json_str_or(rec, "type", "", &type, d)) ||
        (rc = qs_json_i64_or(rec, "step", 0, 1000000000000LL, 0, &step, d)))
        return rc;
    if (!strcmp(type, "saturation")) {
        if (!r->n_sat_alarms++)
            r->first_sat_alarm = (long)step;
    } else if (!strcmp(type, "forgetting")) {
        if (!r->n_forget_alarms++)
            r->first_forget_alarm = (long)step;
    } else if (!strcmp(type, "spike")) {
        r->n_spikes++;
    } else if (!strcmp(type, "stop")) {
        if ((rc = qs_json_str_or(rec, "reason", "", &why, d)))
            return rc;
        r->complete = (!strcmp(why, "done") && step == r->steps) || !strcmp(why, "target");
    }
    return 0;
}

static int logs_quant(repro_run_result *r, const char *run_dir, double threshold, qs_diag *d)
{
    qlog_run q = {0};
    satsummary s = {0};
    int rc = qlog_read_run(run_dir, &q, NULL, 0, d);
    if (!rc)
        rc = satsummary_compute(&q, QLOG_SELECT_QAT, threshold, &s, d);
    if (!rc) {
        r->tensor_steps = (long)s.steps_scored * s.n_quant;
        for (int i = 0; i < s.n_quant; i++) {
            r->sat_tensor_steps += s.t[i].sat_steps;
            r->alarm_tensor_steps += s.t[i].alarm_steps;
        }
    }
    satsummary_free(&s);
    qlog_run_free(&q);
    return rc;
}

int repro_run_read(const char *run_dir, repro_run_result *r, qs_diag *d)
{
    memset(r, 0, sizeof *r);
    r->first_sat_alarm = r->first_forget_alarm = -1;
    r->probe_start = r->probe_final = r->bench_acc = NAN;
    r->gate_verdict = -1;
    r->gate_drop_points = r->gate_p = NAN;
    const char *slash = strrchr(run_dir, '/');
    snprintf(r->name, sizeof r->name, "%s", slash ? slash + 1 : run_dir);
    char path[1100];
    runcfg cfg;
    snprintf(path, sizeof path, "%s/config.json", run_dir);
    int rc = runcfg_load(&cfg, path, d);
    if (rc)
        return rc;
    r->qat = cfg.qat;
    snprintf(r->estimator, sizeof r->estimator, "%s", cfg.qat ? cfg.amax_estimator : "");
    r->lr = cfg.lr;
    r->steps = cfg.steps;
    r->bf16_warmup_steps = cfg.qat ? cfg.bf16_warmup_steps : 0;
    r->spike_rate = cfg.spike_rate;
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    if ((rc = logs_each_line(path, logs_metric_line, r, d)))
        goto fail;
    snprintf(path, sizeof path, "%s/events.jsonl", run_dir);
    if (fileio_exists(path) && (rc = logs_each_line(path, logs_event_line, r, d)))
        goto fail;
    if (r->n_evals) {
        r->probe_start = r->eval_acc[0];
        r->probe_final = r->eval_acc[r->n_evals - 1];
    }
    if (r->qat && (rc = logs_quant(r, run_dir, cfg.saturation_clip_rate, d)))
        goto fail;
    return 0;
fail:
    repro_run_result_free(r);
    return rc;
}

double repro_loss_ape(const repro_run_result *a, const repro_run_result *b)
{
    long n = a->n_loss < b->n_loss ? a->n_loss : b->n_loss, used = 0;
    double sum = 0.0;
    for (long i = 0; i < n; i++)
        if (isfinite(a->loss[i]) && isfinite(b->loss[i]) && b->loss[i] > 0) {
            sum += fabs(a->loss[i] - b->loss[i]) / b->loss[i];
            used++;
        }
    return used ? 100.0 * sum / (double)used : NAN;
}
