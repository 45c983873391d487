/* trainer_ckpt.c: checkpoints and resume (see include/qs/trainer.h).
 *
 * ckpt/step_<N>/ is written as ckpt/.tmp.step_<N>/ and renamed when complete,
 * so a directory named step_<N> is always whole:
 *   config.json, tokenizer files      copied from the model directory
 *   model.safetensors                 F32 (bit-exact resume; HF-loadable)
 *   train_state.bin                   trainstate sections:
 *     meta    JSON {"format":"qatscope-train-state","step":N,"adam_t":..,"n_params":..,
 *                   "seed":..,"n_quant":..}
 *     adam_m, adam_v   fp32 [n_params]
 *     data    the data source's position (opaque)
 *     amax    per quantizer, set order: u32 name bytes, name, u32 n, f32 history[n] oldest first
 *   since version 2 (the log state; little-endian):
 *     qsnr    u32 n_quant, u64 cursor[n_quant]: each quantizer's QSNR sample cursor
 *     alarm   u32 n_quant, u32 steps[n_quant]: each quantizer's saturation episode so far
 *     eval    the in-loop evaluation's state (opaque; only with an eval hook that saves)
 * The amax section checks the quantizer names; qsnr and alarm follow its order.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/safetensors.h"
#include "qs/trainstate.h"
#include "qs/zlog.h"
#include "trainer_impl.h"

static const char *const trainer_copied_files[] = {
    "config.json", "tokenizer.json", "tokenizer.model", "tokenizer_config.json",
    "special_tokens_map.json", "generation_config.json",
};

static int trainer_file_copy(const char *src, const char *dst, qs_diag *d)
{
    char *buf;
    size_t n;
    int rc = fileio_read_all(src, &buf, &n, d);
    if (rc)
        return rc;
    rc = fileio_write_atomic(dst, buf, n, d);
    qs_free(buf);
    return rc;
}

/* Removes a directory holding plain files only (a stale tmp checkpoint). */
static void trainer_dir_remove(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    struct dirent *e;
    char path[TRAINER_PATH_MAX + 256];
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(dp);
    rmdir(dir);
}

static int trainer_amax_pack(struct trainer *t, unsigned char **out, size_t *bytes)
{
    int n = t->qset ? quant_set_count(t->qset) : 0;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        quant *q = quant_set_get(t->qset, i);
        total += 8 + strlen(quant_name(q)) + 4 * (size_t)quant_history(q)->len_steps;
    }
    unsigned char *buf = qs_malloc(total ? total : 1), *p = buf;
    if (!buf)
        return QS_ENOMEM;
    for (int i = 0; i < n; i++) {
        quant *q = quant_set_get(t->qset, i);
        const amax_history *h = quant_history(q);
        uint32_t nl = (uint32_t)strlen(quant_name(q)), nv = (uint32_t)h->len_steps;
        memcpy(p, &nl, 4);
        memcpy(p + 4, quant_name(q), nl);
        p += 4 + nl;
        memcpy(p, &nv, 4);
        p += 4;
        for (int a = h->len_steps - 1; a >= 0; a--, p += 4) {
            float v = amax_history_get(h, a);
            memcpy(p, &v, 4);
        }
    }
    *out = buf;
    *bytes = total;
    return 0;
}

static int trainer_amax_unpack(struct trainer *t, const unsigned char *p, size_t bytes,
                               const char *path, qs_diag *d)
{
    int n = t->qset ? quant_set_count(t->qset) : 0;
    const unsigned char *end = p + bytes;
    for (int i = 0; i < n; i++) {
        quant *q = quant_set_get(t->qset, i);
        uint32_t nl, nv;
        if (end - p < 4 || (memcpy(&nl, p, 4), (size_t)(end - p) < 8 + (size_t)nl))
            return diag_set(d, QS_EFORMAT, path, -1, "amax section ends before quantizer %d", i);
        if (nl != strlen(quant_name(q)) || memcmp(p + 4, quant_name(q), nl))
            return diag_set(d, QS_EFORMAT, path, -1,
                            "amax history %d is for '%.*s', this run's quantizer is '%s' "
                            "(quant_modules changed?)", i, (int)nl, (const char *)p + 4,
                            quant_name(q));
        p += 4 + nl;
        memcpy(&nv, p, 4);
        p += 4;
        if ((size_t)(end - p) / 4 < nv)
            return diag_set(d, QS_EFORMAT, path, -1, "amax history of '%s' truncated", quant_name(q));
        float *vals = qs_malloc((nv ? nv : 1) * sizeof *vals);
        if (!vals)
            return QS_ENOMEM;
        memcpy(vals, p, 4 * (size_t)nv);
        quant_history_restore(q, vals, (int)nv);
        qs_free(vals);
        p += 4 * (size_t)nv;
    }
    if (p != end)
        return diag_set(d, QS_EFORMAT, path, -1,
                        "amax section holds more histories than this run's %d quantizers", n);
    return 0;
}

static void trainer_put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t trainer_get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* "qsnr" (which = 0: u64 cursors) or "alarm" (which = 1: u32 episode steps) */
static int trainer_logstate_pack(struct trainer *t, int which, unsigned char **out, size_t *bytes)
{
    int n = t->qset ? quant_set_count(t->qset) : 0, w = which ? 4 : 8;
    unsigned char *buf = qs_malloc(4 + (size_t)n * (size_t)w);
    if (!buf)
        return QS_ENOMEM;
    trainer_put_le(buf, (uint64_t)n, 4);
    for (int i = 0; i < n; i++)
        trainer_put_le(buf + 4 + (size_t)i * w,
                       which ? (uint64_t)(t->sat ? satstats_episode_steps(t->sat, i) : 0)
                             : (uint64_t)quant_qsnr_cursor(quant_set_get(t->qset, i)),
                       w);
    *out = buf;
    *bytes = 4 + (size_t)n * (size_t)w;
    return 0;
}

static int trainer_logstate_unpack(struct trainer *t, int which, const unsigned char *p,
                                   size_t bytes, const char *path, qs_diag *d)
{
    int n = t->qset ? quant_set_count(t->qset) : 0, w = which ? 4 : 8;
    const char *tag = which ? "alarm" : "qsnr";
    if (bytes < 4 || trainer_get_le(p, 4) != (uint64_t)n || bytes != 4 + (size_t)n * (size_t)w)
        return diag_set(d, QS_EFORMAT, path, -1,
                        "%s section: expected %d quantizers in %zu bytes, found %llu in %zu bytes",
                        tag, n, 4 + (size_t)n * (size_t)w,
                        bytes < 4 ? 0ull : (unsigned long long)trainer_get_le(p, 4), bytes);
    if (!which) {
        for (int i = 0; i < n; i++)
            quant_qsnr_cursor_set(quant_set_get(t->qset, i),
                                  (unsigned long)trainer_get_le(p + 4 + (size_t)i * 8, 8));
        return 0;
    }
    /* the detector is created after the restore (trainer_open_logs applies these) */
    qs_free(t->alarm_restored);
    t->alarm_restored = qs_malloc((n ? (size_t)n : 1) * sizeof *t->alarm_restored);
    if (!t->alarm_restored)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    for (int i = 0; i < n; i++) {
        uint64_t v = trainer_get_le(p + 4 + (size_t)i * 4, 4);
        if (v > 0x7fffffff)
            return diag_set(d, QS_EFORMAT, path, -1, "alarm section: quantizer %d has %llu steps",
                            i, (unsigned long long)v);
        t->alarm_restored[i] = (int)v;
    }
    t->n_alarm_restored = n;
    return 0;
}

static int trainer_state_write(struct trainer *t, const char *path, qs_diag *d)
{
    char meta[512];
    int nm = snprintf(meta, sizeof meta,
                      "{\"format\":\"qatscope-train-state\",\"step\":%ld,\"adam_t\":%ld,"
                      "\"n_params\":%zu,\"seed\":%ld,\"n_quant\":%d}",
                      t->step, t->opt.t, t->m.n_params, t->cfg.seed,
                      t->qset ? quant_set_count(t->qset) : 0);
    void *dpos = NULL, *ev = NULL;
    size_t dpos_bytes = 0, ev_bytes = 0, amax_bytes = 0, qsnr_bytes = 0, alarm_bytes = 0;
    unsigned char *amax = NULL, *qsnr = NULL, *alarm = NULL;
    int rc = t->data->save(t->data->self, &dpos, &dpos_bytes, d);
    if (!rc && t->eval.save)
        rc = t->eval.save(t->eval.self, &ev, &ev_bytes, d);
    if (!rc && ((rc = trainer_amax_pack(t, &amax, &amax_bytes)) ||
                (rc = trainer_logstate_pack(t, 0, &qsnr, &qsnr_bytes)) ||
                (rc = trainer_logstate_pack(t, 1, &alarm, &alarm_bytes))))
        diag_set(d, rc, path, -1, "out of memory");
    trainstate_writer w;
    if (!rc && !(rc = trainstate_write_begin(&w, path, t->eval.save ? 8 : 7, d))) {
        size_t pb = t->m.n_params * sizeof(float);
        if ((rc = trainstate_write_section(&w, "meta", meta, (size_t)nm, d)) ||
            (rc = trainstate_write_section(&w, "adam_m", t->opt.m, pb, d)) ||
            (rc = trainstate_write_section(&w, "adam_v", t->opt.v, pb, d)) ||
            (rc = trainstate_write_section(&w, "data", dpos, dpos_bytes, d)) ||
            (rc = trainstate_write_section(&w, "amax", amax, amax_bytes, d)) ||
            (rc = trainstate_write_section(&w, "qsnr", qsnr, qsnr_bytes, d)) ||
            (rc = trainstate_write_section(&w, "alarm", alarm, alarm_bytes, d)) ||
            (t->eval.save && (rc = trainstate_write_section(&w, "eval", ev, ev_bytes, d))))
            trainstate_write_abort(&w);
        else
            rc = trainstate_write_commit(&w, d);
    }
    qs_free(dpos);
    qs_free(ev);
    qs_free(amax);
    qs_free(qsnr);
    qs_free(alarm);
    return rc;
}

int trainer_ckpt_write(struct trainer *t, qs_diag *d)
{
    char ckdir[TRAINER_PATH_MAX + 16], tmp[TRAINER_PATH_MAX + 64], fin[TRAINER_PATH_MAX + 64];
    char path[TRAINER_PATH_MAX + 128], src[TRAINER_PATH_MAX + 256];
    snprintf(ckdir, sizeof ckdir, "%s/ckpt", t->run_dir);
    snprintf(tmp, sizeof tmp, "%s/.tmp.step_%ld", ckdir, t->step);
    snprintf(fin, sizeof fin, "%s/step_%ld", ckdir, t->step);
    trainer_dir_remove(tmp);
    int rc = fileio_mkdir_p(tmp, d);
    if (rc)
        return rc;
    for (size_t i = 0; i < sizeof trainer_copied_files / sizeof *trainer_copied_files; i++) {
        snprintf(src, sizeof src, "%s/%s", t->model_dir, trainer_copied_files[i]);
        snprintf(path, sizeof path, "%s/%s", tmp, trainer_copied_files[i]);
        if (fileio_exists(src) && (rc = trainer_file_copy(src, path, d)))
            goto fail;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", tmp);
    if ((rc = model_save_safetensors(&t->m, path, SAFETENSORS_F32, d)))
        goto fail;
    snprintf(path, sizeof path, "%s/train_state.bin", tmp);
    if ((rc = trainer_state_write(t, path, d)))
        goto fail;
    trainer_dir_remove(fin);
    if (rename(tmp, fin) != 0) {
        rc = diag_set(d, QS_EIO, fin, -1, "rename of the finished checkpoint failed: %s",
                      strerror(errno));
        goto fail;
    }
    t->last_ckpt_step = t->step;
    return 0;
fail:
    trainer_dir_remove(tmp);
    return rc;
}

int trainer_ckpt_latest(const char *run_dir, char *path, size_t path_bytes, long *step)
{
    char ckdir[TRAINER_PATH_MAX + 16];
    snprintf(ckdir, sizeof ckdir, "%s/ckpt", run_dir);
    DIR *dp = opendir(ckdir);
    if (!dp)
        return 0;
    long best = -1;
    struct dirent *e;
    while ((e = readdir(dp))) {
        char *end;
        if (strncmp(e->d_name, "step_", 5))
            continue;
        long s = strtol(e->d_name + 5, &end, 10);
        char st[TRAINER_PATH_MAX + 300];
        snprintf(st, sizeof st, "%s/%s/train_state.bin", ckdir, e->d_name);
        if (*end == 0 && s > best && fileio_exists(st))
            best = s;
    }
    closedir(dp);
    if (best < 0)
        return 0;
    snprintf(path, path_bytes, "%s/step_%ld", ckdir, best);
    *step = best;
    return 1;
}

int trainer_ckpt_restore(struct trainer *t, const char *ckpt_dir, qs_diag *d)
{
    char path[TRAINER_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/train_state.bin", ckpt_dir);
    return trainer_state_read(t, path, d);
}

int trainer_state_read(struct trainer *t, const char *path, qs_diag *d)
{
    trainstate_reader r;
    int rc = trainstate_open(&r, path, d);
    if (rc)
        return rc;
    const void *p;
    size_t n;
    json_t *meta = NULL;
    if ((rc = trainstate_section(&r, "meta", &p, &n, d)))
        goto out;
    json_error_t je;
    meta = json_loadb(p, n, 0, &je);
    json_int_t step = -1, adam_t = -1, n_params = -1;
    if (!meta || json_unpack(meta, "{s:I, s:I, s:I}", "step", &step, "adam_t", &adam_t,
                             "n_params", &n_params) || step < 0 || adam_t < 0) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "meta section: expected step, adam_t, n_params");
        goto out;
    }
    if ((size_t)n_params != t->m.n_params) {
        rc = diag_set(d, QS_ESHAPE, path, -1, "state is for %lld parameters, the model has %zu",
                      (long long)n_params, t->m.n_params);
        goto out;
    }
    size_t pb = t->m.n_params * sizeof(float);
    if ((rc = trainstate_section(&r, "adam_m", &p, &n, d)))
        goto out;
    if (n != pb) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "adam_m: expected %zu bytes, found %zu", pb, n);
        goto out;
    }
    memcpy(t->opt.m, p, pb);
    if ((rc = trainstate_section(&r, "adam_v", &p, &n, d)))
        goto out;
    if (n != pb) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "adam_v: expected %zu bytes, found %zu", pb, n);
        goto out;
    }
    memcpy(t->opt.v, p, pb);
    t->opt.t = (long)adam_t;
    if ((rc = trainstate_section(&r, "data", &p, &n, d)) ||
        (rc = t->data->restore(t->data->self, p, n, d)))
        goto out;
    if ((rc = trainstate_section(&r, "amax", &p, &n, d)) ||
        (rc = trainer_amax_unpack(t, p, n, path, d)))
        goto out;
    if (r.version >= 2) {   /* the log state (version 1: starts from zero) */
        if ((rc = trainstate_section(&r, "qsnr", &p, &n, d)) ||
            (rc = trainer_logstate_unpack(t, 0, p, n, path, d)) ||
            (rc = trainstate_section(&r, "alarm", &p, &n, d)) ||
            (rc = trainer_logstate_unpack(t, 1, p, n, path, d)))
            goto out;
        if (t->eval.restore && trainstate_section(&r, "eval", &p, &n, NULL) == 0 &&
            (rc = t->eval.restore(t->eval.self, p, n, d))) {
            if (d && rc != QS_ENOMEM) {
                char why[QS_DIAG_MSG_MAX];
                snprintf(why, sizeof why, "%s", d->msg);
                diag_set(d, rc, path, -1, "eval section: %.400s", why);
            }
            goto out;
        }
    }
    t->step = (long)step;
    t->last_ckpt_step = (long)step;
out:
    json_decref(meta);
    trainstate_close(&r);
    return rc;
}

/* Resume at `step`: lines of earlier steps stay, and so do the lines written at
 * `step` before its checkpoint: the eval taken with exactly the checkpointed
 * weights and its forgetting alarms (trainer_step runs them before the
 * checkpoint).  Lines without a step stay; everything else goes. */
static int trainer_log_keep(void *ctx, const char *line, size_t len)
{
    long step = *(const long *)ctx, st;
    if (!zlog_line_long(line, len, "step", &st) || st < step)
        return 1;
    return st == step && (zlog_line_string_is(line, len, "type", "eval") ||
                          zlog_line_string_is(line, len, "type", "forgetting"));
}

int trainer_log_truncate(const char *path, long step, qs_diag *d)
{
    return zlog_filter(path, trainer_log_keep, &step, d);
}

int trainer_event_append(const char *run_dir, const char *line, qs_diag *d)
{
    char path[TRAINER_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/events.jsonl", run_dir);
    FILE *f = fopen(path, "a");
    if (!f)
        return diag_set(d, QS_EIO, path, -1, "cannot append: %s", strerror(errno));
    int ok = fprintf(f, "%s\n", line) > 0;
    ok &= fclose(f) == 0;
    return ok ? 0 : diag_set(d, QS_EIO, path, -1, "write failed");
}
