/* repro_exec.c: one training run of the study through the trainer library,
 * cached: a run directory whose repro.key matches (the study key + the run's
 * full config) and whose events.jsonl says it finished ("done" at its last
 * step, or "target": it stopped when the fact probe reached the stop accuracy)
 * is reused as it is; any
 * other content of that directory (an interrupted or older run) is removed
 * first.  A directory that does not look like a run directory (no config.json)
 * is never removed: that is an error naming it.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/trainer.h"
#include "repro_impl.h"

double repro_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void repro_log(const repro_opts *o, const char *fmt, ...)
{
    if (!o->log)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->log(o->user, line);
}

static int exec_rmtree(const char *path, qs_diag *d)
{
    struct stat st;
    if (lstat(path, &st))
        return errno == ENOENT ? 0 : diag_set(d, QS_EIO, path, -1, "stat: %s", strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DIR *dp = opendir(path);
        if (!dp)
            return diag_set(d, QS_EIO, path, -1, "opendir: %s", strerror(errno));
        struct dirent *e;
        int rc = 0;
        while (!rc && (e = readdir(dp))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[2048];
            if (fileio_join(sub, sizeof sub, path, e->d_name))
                rc = diag_set(d, QS_ERANGE, path, -1, "path too long");
            else
                rc = exec_rmtree(sub, d);
        }
        closedir(dp);
        if (rc)
            return rc;
        return rmdir(path) ? diag_set(d, QS_EIO, path, -1, "rmdir: %s", strerror(errno)) : 0;
    }
    return unlink(path) ? diag_set(d, QS_EIO, path, -1, "unlink: %s", strerror(errno)) : 0;
}

/* The step of the run's final "stop" event when it is "done" at the last step or
 * "target" (the probe reached the stop accuracy) at any step; -1 otherwise. */
static long exec_finished_step(const char *dir, long steps)
{
    char path[1100], *text = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    if (fileio_read_all(path, &text, &n, NULL))
        return -1;
    long done = -1, step;
    for (char *s = strstr(text, "\"type\":\"stop\""); s; s = strstr(s + 1, "\"type\":\"stop\"")) {
        char *line = s;
        while (line > text && line[-1] != '\n')
            line--;
        if (sscanf(line, "{\"step\":%ld,", &step) != 1)
            continue;
        if ((strstr(s, "\"reason\":\"done\"") == s + 14 && step == steps) ||
            strstr(s, "\"reason\":\"target\"") == s + 14)
            done = step;
        else
            done = -1;
    }
    qs_free(text);
    return done;
}

/* The in-loop evaluation, watched: the fact probe's accuracy of the last one. */
typedef struct exec_eval {
    train_eval_hook inner;
    long step;
    double acc;
} exec_eval;

static int exec_eval_run(void *self, struct llama_model *m, long step, int quantized, char *line,
                         size_t line_bytes, char *event, size_t event_bytes, qs_diag *d)
{
    exec_eval *e = self;
    int rc = e->inner.run(e->inner.self, m, step, quantized, line, line_bytes, event, event_bytes, d);
    const char *key = "\"" REPRO_PROBE_TASK "\":{\"acc\":", *p = strstr(line, key);
    if (rc >= 0 && p) {
        e->step = step;
        e->acc = strtod(p + strlen(key), NULL);
    }
    return rc;
}

/* The forgetting baselines travel in checkpoints as with qatscope train's hook. */
static int exec_eval_save(void *self, void **bytes, size_t *n, qs_diag *d)
{
    exec_eval *e = self;
    if (e->inner.save)
        return e->inner.save(e->inner.self, bytes, n, d);
    *bytes = NULL;
    *n = 0;
    return 0;
}

static int exec_eval_restore(void *self, const void *bytes, size_t n, qs_diag *d)
{
    exec_eval *e = self;
    return e->inner.restore ? e->inner.restore(e->inner.self, bytes, n, d) : 0;
}

int repro_key_matches(const char *path, const char *key)
{
    char *text = NULL;
    size_t n;
    if (fileio_read_all(path, &text, &n, NULL))
        return 0;
    int same = n == strlen(key) && !memcmp(text, key, n);
    qs_free(text);
    return same;
}

int repro_train(const runcfg *cfg, const char *study_key, double stop_acc, const repro_opts *o,
                long *final_step, qs_diag *d)
{
    char key_path[1100], cfg_path[1100];
    snprintf(key_path, sizeof key_path, "%s/repro.key", cfg->out_dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", cfg->out_dir);
    char *cfg_json = runcfg_to_json(cfg);
    repro_buf key = {0};
    if (!cfg_json)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    repro_buf_printf(&key, "%s\n%s", study_key, cfg_json);
    qs_free(cfg_json);
    if (key.failed) {
        repro_buf_free(&key);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    if (repro_key_matches(key_path, key.p) &&
        (*final_step = exec_finished_step(cfg->out_dir, cfg->steps)) >= 0) {
        repro_buf_free(&key);
        return 1;
    }
    int rc = 0;
    if (fileio_exists(cfg->out_dir)) {
        if (!fileio_exists(cfg_path))
            rc = diag_set(d, QS_EINVAL, cfg->out_dir, -1,
                          "exists but is not a run directory (no config.json); move it away");
        else
            rc = exec_rmtree(cfg->out_dir, d);
    }
    train_data data = {0};
    exec_eval watch = {{0}, -1, 0.0};
    train_eval_hook eval = {&watch, cfg->eval_every, exec_eval_run, exec_eval_save, exec_eval_restore,
                            NULL, 0};
    trainer *t = NULL;
    if (rc || (rc = trainer_data_open_shards(&data, cfg, d)) ||
        (cfg->eval_every > 0 && (rc = trainer_eval_create(&watch.inner, cfg, d))))
        goto done;
    eval.arena_bytes = watch.inner.arena_bytes;   /* its scoring arena, in the estimate */
    trainer_options topt = {NULL, 0, cfg->eval_every > 0 ? &eval : NULL};
    if ((rc = trainer_create(&t, cfg, &data, &topt, d)))
        goto done;
    double t0 = repro_now_s();
    long every = cfg->steps >= 10 ? cfg->steps / 10 : 1;
    train_step_info info;
    const char *reason = "done";
    while (!trainer_done(t)) {
        if ((rc = trainer_step(t, &info, d)))
            goto done;
        if (isfinite(stop_acc) && watch.step == info.step + 1 && watch.acc >= stop_acc) {
            repro_log(o, "   step %ld: probe %.2f%% >= %.0f%%: target reached", info.step + 1,
                      100 * watch.acc, 100 * stop_acc);
            reason = "target";
            break;
        }
        if ((info.step + 1) % every == 0)
            repro_log(o, "   step %ld/%ld  loss %.4f  lr %.2e  max clip %.1e  %.0f s",
                      info.step + 1, info.total_steps, info.loss, info.lr, info.max_clip_rate,
                      repro_now_s() - t0);
    }
    *final_step = trainer_next_step(t);
    rc = trainer_finish(t, reason, d);
    t = NULL;
    if (!rc)
        rc = fileio_write_atomic(key_path, key.p, key.len, d);
done:
    trainer_destroy(t);
    trainer_eval_destroy(&watch.inner);
    if (data.self)
        trainer_data_close(&data);
    repro_buf_free(&key);
    return rc;
}
