/* trainer_resume.c: before a resume changes any file of the run directory,
 * every log must read as one and hold every record the checkpoint's step needs
 * (a log with a gap would make the resumed logs differ from the uninterrupted
 * run's, which the resume promises). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/qlog.h"
#include "qs/zlog.h"
#include "trainer_impl.h"

/* The records of kind `type` of steps [0, n) a log must hold: those of steps
 * that are multiples of `every` (1: every step). */
typedef struct log_need {
    const char *type;     /* "train", "eval", "phase", "step" */
    long n, every, only;  /* only >= 0: just that one step */
    unsigned char *seen;  /* [n / every + 1] */
    int header;           /* quant log: the first record was its header */
    long records;
} log_need;

static int need_scan(const char *path, log_need *k, int qlog, qs_diag *d)
{
    zlog_reader *zr = NULL;
    const char *line;
    size_t len;
    long lineno = 0, step;
    int rc = zlog_reader_create(&zr, path, d), more = 0;
    if (!rc && qlog && (more = zlog_next(zr, &line, &len, &lineno, d)) == 1) {
        if (!zlog_reader_is_zstd(zr))
            rc = diag_set(d, QS_EFORMAT, path, -1, "not zstd frames as train writes them");
        else if (!zlog_line_string_is(line, len, "type", "header"))
            rc = diag_set(d, QS_EFORMAT, path, lineno, "the first record is not the header");
        k->header = 1;
    }
    while (!rc && more >= 0 && (more = zlog_next(zr, &line, &len, &lineno, d)) == 1)
        if (zlog_line_string_is(line, len, "type", k->type) &&
            zlog_line_long(line, len, "step", &step) && step >= 0 && step < k->n &&
            step % k->every == 0 && (k->only < 0 || step == k->only))
            k->seen[step / k->every] = 1;
    if (!rc && more < 0 && more != QS_ETRUNC)   /* a last frame cut by a kill: fine */
        rc = more;
    zlog_reader_destroy(zr);
    return rc;
}

/* 0 when the log at path holds what k needs, else one line naming the file, how
 * far it reaches and what the checkpoint at step ck needs. */
static int need_check(const char *path, log_need *k, int qlog, long ck, qs_diag *d)
{
    long slots = k->n > 0 ? (k->n - 1) / k->every + 1 : 0;
    if (k->only >= 0)
        slots = k->only < k->n ? 1 : 0;
    if (!slots && !qlog)
        return 0;
    if (!fileio_exists(path))
        return diag_set(d, QS_ENOTFOUND, path, -1,
                        "missing: the checkpoint ckpt/step_%ld needs its records before step "
                        "%ld; cannot resume without it (restore it or start a new run)",
                        ck, ck);
    k->seen = qs_calloc((size_t)(k->n / k->every + 1), 1);
    if (!k->seen)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    int rc = need_scan(path, k, qlog, d);
    if (rc && qlog && d) {   /* what was wrong with it, and what that means */
        char why[QS_DIAG_MSG_MAX];
        snprintf(why, sizeof why, "%s", d->msg);
        snprintf(d->msg, sizeof d->msg, "cannot resume onto this quantizer log: %.400s", why);
    }
    long miss = -1;
    for (long i = 0; !rc && i < (k->n - 1) / k->every + 1 && k->n > 0 && miss < 0; i++)
        if ((k->only < 0 || i * k->every == k->only) && !k->seen[i])
            miss = i * k->every;
    qs_free(k->seen);
    k->seen = NULL;
    if (rc)
        return rc;
    if (qlog && !k->header)
        return diag_set(d, QS_EFORMAT, path, -1,
                        "no header record (the log is empty or cut): the checkpoint "
                        "ckpt/step_%ld needs the header and the %s records before step %ld; "
                        "cannot resume onto it (restore it or start a new run)", ck, k->type, ck);
    if (miss < 0)
        return 0;
    if (k->only >= 0)
        return diag_set(d, QS_EFORMAT, path, -1,
                        "no \"%s\" record of step %ld: the checkpoint ckpt/step_%ld needs it; "
                        "cannot resume onto an incomplete log (restore it or start a new run)",
                        k->type, miss, ck);
    char reach[64] = "none", every[48];
    snprintf(every, sizeof every, "%ld steps", k->every);
    if (miss > 0)
        snprintf(reach, sizeof reach, "steps 0..%ld", miss - k->every);
    return diag_set(d, QS_EFORMAT, path, -1,
                    "its \"%s\" records reach %s (step %ld missing), the checkpoint "
                    "ckpt/step_%ld needs those of every %s before step %ld; cannot resume onto "
                    "an incomplete log (restore it or start a new run)",
                    k->type, reach, miss, ck, k->every > 1 ? every : "step", ck);
}

int trainer_resume_logs_check(const struct trainer *t, qs_diag *d)
{
    if (t->rank != 0)   /* only rank 0 reads and writes the run directory */
        return 0;
    char met[TRAINER_PATH_MAX + 32], ev[TRAINER_PATH_MAX + 32], ql[TRAINER_PATH_MAX + 32];
    snprintf(met, sizeof met, "%s/metrics.jsonl", t->run_dir);
    snprintf(ev, sizeof ev, "%s/events.jsonl", t->run_dir);
    snprintf(ql, sizeof ql, "%s/%s", t->run_dir, QLOG_FILE);
    long n = t->step;
    int rc;
    if ((rc = trainer_log_check(met, d)) || (rc = trainer_log_check(ev, d)))
        return rc;
    log_need train = {"train", n, 1, -1, NULL, 0, 0};
    if ((rc = need_check(met, &train, 0, n, d)))
        return rc;
    if (t->cfg.eval_every > 0) {   /* the baseline and every eval_every steps */
        log_need ev_lines = {"eval", n, t->cfg.eval_every, -1, NULL, 0, 0};
        if ((rc = need_check(met, &ev_lines, 0, n, d)))
            return rc;
    }
    if (!t->qset)   /* nothing quantized: no phase event, no quantizer log */
        return 0;
    log_need phase = {"phase", n, 1, t->cfg.bf16_warmup_steps, NULL, 0, 0};
    if ((rc = need_check(ev, &phase, 0, n, d)))
        return rc;
    log_need q = {"step", n, t->cfg.log_every, -1, NULL, 0, 0};
    return t->cfg.log_every > 0 ? need_check(ql, &q, 1, n, d) : 0;
}

int trainer_ckpt_config_write(const struct trainer *t, const char *dir, qs_diag *d)
{
    char path[TRAINER_PATH_MAX + 128];
    char *js = runcfg_to_json(&t->cfg);
    if (!js)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    snprintf(path, sizeof path, "%s/%s", dir, TRAINER_CKPT_CONFIG);
    int rc = fileio_write_atomic(path, js, strlen(js), d);
    qs_free(js);
    return rc;
}

/* Keys that may differ between a checkpoint and the config resuming it: the
 * ones --resume --set may change, and paths (a moved run, data or model; the
 * data position and the KL record check what they hold). */
static int config_key_free(const char *key)
{
    static const char *const paths[] = {"model", "train_data", "out_dir", "run_name",
                                        "eval_data_dir", "eval_tasks_dir"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        if (!strcmp(key, paths[i]))
            return 1;
    return runcfg_key_resumable(key);
}

static void config_value_text(const json_t *v, char *buf, size_t n)
{
    if (json_is_string(v))
        snprintf(buf, n, "'%s'", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%.17g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, n, "%s", json_is_true(v) ? "true" : "false");
    else if (json_is_array(v)) {
        size_t k = (size_t)snprintf(buf, n, "[");
        for (size_t i = 0; i < json_array_size(v) && k < n; i++)
            k += (size_t)snprintf(buf + k, n - k, "%s'%s'", i ? "," : "",
                                  json_string_value(json_array_get(v, i)) ? 
                                  json_string_value(json_array_get(v, i)) : "?");
        if (k < n)
            snprintf(buf + k, n - k, "]");
    } else
        snprintf(buf, n, "%s", v ? "null" : "(none)");
}

int trainer_resume_config_check(const runcfg *cfg, const char *cfg_path, const char *ck_dir,
                                qs_diag *d)
{
    char path[TRAINER_PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s", ck_dir, TRAINER_CKPT_CONFIG);
    if (!fileio_exists(path))   /* a checkpoint from before the record: as before */
        return 0;
    char *now_js = runcfg_to_json(cfg);
    if (!now_js)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    json_error_t err;
    json_t *was = json_load_file(path, 0, &err), *now = json_loads(now_js, 0, NULL);
    qs_free(now_js);
    int rc = 0;
    if (!json_is_object(was) || !json_is_object(now))
        rc = diag_set(d, QS_EFORMAT, path, err.line > 0 ? err.line : -1,
                      "not the run config the checkpoint was made with (a JSON object): %s",
                      was ? "not an object" : err.text);
    const char *key;
    json_t *v;
    if (!rc)
        json_object_foreach(now, key, v) {
            json_t *w = json_object_get(was, key);
            if (config_key_free(key) || !w || json_equal(v, w))
                continue;   /* a key the checkpoint does not know: its default then */
            char a[256], b[256];
            config_value_text(w, a, sizeof a);
            config_value_text(v, b, sizeof b);
            rc = diag_set(d, QS_EINVAL, cfg_path, -1,
                          "%s: %s, but the checkpoint %s was made with %s (%s): a resume "
                          "continues the same run; restore %s (only %s and the paths may "
                          "change)", key, b, ck_dir, a, TRAINER_CKPT_CONFIG, a,
                          runcfg_resumable_list());
            break;
        }
    json_decref(was);
    json_decref(now);
    return rc;
}
