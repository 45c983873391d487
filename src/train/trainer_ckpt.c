/* trainer_ckpt.c: checkpoints and resume (see include/qs/trainer.h).
 *
 * ckpt/step_<N>/ is written as ckpt/.tmp.step_<N>/ and renamed when complete,
 * so a directory named step_<N> is always whole:
 *   config.json, tokenizer files      copied from the model directory
 *   model.safetensors                 F32 (bit-exact resume; HF-loadable)
 *   train_state.bin                   trainstate sections:
 *     meta    JSON {"format":"qatscope-train-state","step":N,"adam_t":..,"n_params":..,
 *                   "seed":..,"n_quant":..,"micro_batches":..}  (micro-batches per
 *                   optimizer step over all ranks; a resume must keep it)
 *     adam_m, adam_v   fp32 [n_params]
 *     data    the data source's position (opaque)
 *     amax    per quantizer, set order: u32 name bytes, name, u32 n, f32 history[n] oldest first
 *   since version 2 (the log state; little-endian):
 *     qsnr    u32 n_quant, u64 cursor[n_quant]: each quantizer's QSNR sample cursor
 *             (version 1: rebuilt from the step count, one call per micro-batch of
 *             every QAT step)
 *     alarm   u32 n_quant, u32 steps[n_quant]: each quantizer's saturation episode so far
 *     eval    the in-loop evaluation's state (opaque; only with an eval hook that saves)
 *   version 3: the same sections, checksummed with digest_lanes64 (was FNV-1a)
 * The amax section checks the quantizer names; qsnr and alarm follow its order.
 * Several ranks: rank 0 writes everything; with ZeRO-1 the other ranks' parts
 * of adam_m / adam_v are streamed to it as it writes (trainer_dist.c), so the
 * file is the one-process file and every rank reads its own part on resume.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qs/bytes.h"
#include "qs/dist.h"
#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/safetensors.h"
#include "qs/trainstate.h"
#include "qs/zlog.h"
#include "trainer_impl.h"

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

/* "qsnr" (which = 0: u64 cursors) or "alarm" (which = 1: u32 episode steps) */
static int trainer_logstate_pack(struct trainer *t, int which, unsigned char **out, size_t *bytes)
{
    int n = t->qset ? quant_set_count(t->qset) : 0, w = which ? 4 : 8;
    unsigned char *buf = qs_malloc(4 + (size_t)n * (size_t)w);
    if (!buf)
        return QS_ENOMEM;
    bytes_put_u32le(buf, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        unsigned char *p = buf + 4 + (size_t)i * (size_t)w;
        if (which)
            bytes_put_u32le(p, (uint32_t)(t->sat ? satstats_episode_steps(t->sat, i) : 0));
        else
            bytes_put_u64le(p, (uint64_t)quant_qsnr_cursor(quant_set_get(t->qset, i)));
    }
    *out = buf;
    *bytes = 4 + (size_t)n * (size_t)w;
    return 0;
}

static int trainer_logstate_unpack(struct trainer *t, int which, const unsigned char *p,
                                   size_t bytes, const char *path, qs_diag *d)
{
    int n = t->qset ? quant_set_count(t->qset) : 0, w = which ? 4 : 8;
    const char *tag = which ? "alarm" : "qsnr";
    if (bytes < 4 || bytes_get_u32le(p) != (uint32_t)n || bytes != 4 + (size_t)n * (size_t)w)
        return diag_set(d, QS_EFORMAT, path, -1,
                        "%s section: expected %d quantizers in %zu bytes, found %llu in %zu bytes",
                        tag, n, 4 + (size_t)n * (size_t)w,
                        bytes < 4 ? 0ull : (unsigned long long)bytes_get_u32le(p), bytes);
    if (!which) {
        for (int i = 0; i < n; i++)
            quant_qsnr_cursor_set(quant_set_get(t->qset, i),
                                  (unsigned long)bytes_get_u64le(p + 4 + (size_t)i * 8));
        return 0;
    }
    /* the detector is created after the restore (trainer_open_logs applies these) */
    qs_free(t->alarm_restored);
    t->alarm_restored = qs_malloc((n ? (size_t)n : 1) * sizeof *t->alarm_restored);
    if (!t->alarm_restored)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    for (int i = 0; i < n; i++) {
        uint32_t v = bytes_get_u32le(p + 4 + (size_t)i * 4);
        if (v > 0x7fffffff)
            return diag_set(d, QS_EFORMAT, path, -1, "alarm section: quantizer %d has %u steps", i,
                            v);
        t->alarm_restored[i] = (int)v;
    }
    t->n_alarm_restored = n;
    return 0;
}

/* Every rank calls it (path NULL on the others): the moment sections are
 * collective under ZeRO-1, and rank 0 takes them even after a failure. */
static int trainer_state_write(struct trainer *t, const char *path, qs_diag *d)
{
    if (t->rank != 0) {
        int rc = trainer_dist_moment_write(t, NULL, "adam_m", t->opt.m, d);
        return rc ? rc : trainer_dist_moment_write(t, NULL, "adam_v", t->opt.v, d);
    }
    char meta[512];
    int nm = snprintf(meta, sizeof meta,
                      "{\"format\":\"qatscope-train-state\",\"step\":%ld,\"adam_t\":%ld,"
                      "\"n_params\":%zu,\"seed\":%ld,\"n_quant\":%d,\"micro_batches\":%ld}",
                      t->step, t->opt.t, t->m.n_params, t->cfg.seed,
                      t->qset ? quant_set_count(t->qset) : 0, t->cfg.grad_accum * t->n_ranks);
    void *dpos = NULL, *ev = NULL;
    size_t dpos_bytes = 0, ev_bytes = 0, amax_bytes = 0, qsnr_bytes = 0, alarm_bytes = 0;
    unsigned char *amax = NULL, *qsnr = NULL, *alarm = NULL;
    int rc = path ? t->data->save(t->data->self, &dpos, &dpos_bytes, d)
                  : diag_set(d, QS_EINVAL, NULL, -1, "no checkpoint path");
    if (!rc && t->eval.save)
        rc = t->eval.save(t->eval.self, &ev, &ev_bytes, d);
    if (!rc && ((rc = trainer_amax_pack(t, &amax, &amax_bytes)) ||
                (rc = trainer_logstate_pack(t, 0, &qsnr, &qsnr_bytes)) ||
                (rc = trainer_logstate_pack(t, 1, &alarm, &alarm_bytes))))
        diag_set(d, rc, path, -1, "out of memory");
    trainstate_writer w;
    int open = !rc && !(rc = trainstate_write_begin(&w, path, t->eval.save ? 8 : 7, d));
    if (!rc)
        rc = trainstate_write_section(&w, "meta", meta, (size_t)nm, d);
    /* after a failure rank 0 still takes (and drops) the other ranks' moments */
    int mrc = trainer_dist_moment_write(t, rc ? NULL : &w, "adam_m", t->opt.m, d);
    rc = rc ? rc : mrc;
    mrc = trainer_dist_moment_write(t, rc ? NULL : &w, "adam_v", t->opt.v, d);
    rc = rc ? rc : mrc;
    if (!rc && !(rc = trainstate_write_section(&w, "data", dpos, dpos_bytes, d)) &&
        !(rc = trainstate_write_section(&w, "amax", amax, amax_bytes, d)) &&
        !(rc = trainstate_write_section(&w, "qsnr", qsnr, qsnr_bytes, d)) &&
        !(rc = trainstate_write_section(&w, "alarm", alarm, alarm_bytes, d)) && t->eval.save)
        rc = trainstate_write_section(&w, "eval", ev, ev_bytes, d);
    if (open)
        rc = rc ? (trainstate_write_abort(&w), rc) : trainstate_write_commit(&w, d);
    qs_free(dpos);
    qs_free(ev);
    qs_free(amax);
    qs_free(qsnr);
    qs_free(alarm);
    return rc;
}

int trainer_ckpt_write(struct trainer *t, qs_diag *d)
{
    int rc;
    /* ZeRO-1: the gather below is collective; a rank that failed since the
     * last agreement must stop everyone here instead */
    if (t->shard_lo && (rc = dist_agree(0, 0, NULL, d)))
        return rc;
    if (t->rank != 0) {
        if (!(rc = trainer_state_write(t, NULL, d)))
            t->last_ckpt_step = t->step;
        return rc;
    }
    char ckdir[TRAINER_PATH_MAX + 16], tmp[TRAINER_PATH_MAX + 64], fin[TRAINER_PATH_MAX + 64];
    char path[TRAINER_PATH_MAX + 128];
    snprintf(ckdir, sizeof ckdir, "%s/ckpt", t->run_dir);
    snprintf(tmp, sizeof tmp, "%s/.tmp.step_%ld", ckdir, t->step);
    snprintf(fin, sizeof fin, "%s/step_%ld", ckdir, t->step);
    fileio_dir_remove_flat(tmp);
    rc = fileio_mkdir_p(tmp, d);
    snprintf(path, sizeof path, "%s/train_state.bin", tmp);
    /* the state first: it is the part other ranks take part in (after a failed
     * mkdir rank 0 only drains their moments, keeping the mkdir's diag) */
    qs_diag drain = {0};
    int rc_state = trainer_state_write(t, rc ? NULL : path, rc ? &drain : d);
    if (rc || (rc = rc_state))
        goto fail;
    if ((rc = trainer_ckpt_config_write(t, tmp, d)) ||
        (rc = model_hf_files_copy(t->model_dir, tmp, 1, d)))
        goto fail;
    snprintf(path, sizeof path, "%s/model.safetensors", tmp);
    if ((rc = model_save_safetensors(&t->m, path, SAFETENSORS_F32, d)))
        goto fail;
    fileio_dir_remove_flat(fin);
    if (rename(tmp, fin) != 0) {
        rc = diag_set(d, QS_EIO, fin, -1, "rename of the finished checkpoint failed: %s",
                      strerror(errno));
        goto fail;
    }
    t->last_ckpt_step = t->step;
    return 0;
fail:
    fileio_dir_remove_flat(tmp);
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

/* Copies bytes of section `name`, from byte `first` on, to dst, checking the
 * section's checksum in the same pass (trainstate_read_checked); the section
 * must hold exactly `total` bytes.  Its pages leave the resident set as they
 * are copied (the moments are twice the weights). */
static int ckpt_section_copy(const trainstate_reader *r, const char *name, void *dst, size_t first,
                             size_t bytes, size_t total, const char *path, qs_diag *d)
{
    const void *p;
    size_t n;
    int rc = trainstate_section(r, name, &p, &n, d);
    if (rc)
        return rc;
    if (n != total)
        return diag_set(d, QS_EFORMAT, path, -1, "%s: expected %zu bytes, found %zu", name, total,
                        n);
    return trainstate_read_checked(r, name, first, dst, bytes, d);
}

/* The sections trainstate_open_only checks up front; the moments are checked
 * as they are copied (one pass over the file's largest part). */
static const char *const ckpt_checked_up_front[] = {"meta", "data", "amax", "qsnr", "alarm",
                                                    "eval", NULL};

int trainer_ckpt_restore(struct trainer *t, const char *ckpt_dir, qs_diag *d)
{
    char path[TRAINER_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/train_state.bin", ckpt_dir);
    return trainer_state_read(t, path, d);
}

int trainer_state_read(struct trainer *t, const char *path, qs_diag *d)
{
    trainstate_reader r;
    int rc = trainstate_open_only(&r, path, ckpt_checked_up_front, d);
    if (rc)
        return rc;
    const void *p;
    size_t n;
    json_t *meta = NULL;
    if ((rc = trainstate_section(&r, "meta", &p, &n, d)))
        goto out;
    long long step, adam_t, n_params, mbs;
    if ((rc = qs_json_load_text(p, n, path, 0, QS_JSON_OBJECT, &meta, d)))
        goto out;
    qs_json_at m = qs_json_root(meta, path, -1);
    if ((rc = qs_json_i64(&m, "step", 0, LONG_MAX, &step, d)) ||
        (rc = qs_json_i64(&m, "adam_t", 0, LONG_MAX, &adam_t, d)) ||
        (rc = qs_json_i64(&m, "n_params", 0, LLONG_MAX, &n_params, d)) ||
        (rc = qs_json_i64_or(&m, "micro_batches", 0, LLONG_MAX, 0, &mbs, d)))
        goto out;
    long mb_now = t->cfg.grad_accum * t->n_ranks;
    if (mbs > 0 && mbs != mb_now) {
        char how[96];   /* the setting that keeps it, or the rank counts that can */
        if (mbs % t->n_ranks == 0)
            snprintf(how, sizeof how, "with %d rank(s): --set grad_accum=%lld", t->n_ranks,
                     mbs / t->n_ranks);
        else
            snprintf(how, sizeof how, "launch a number of ranks that divides %lld", mbs);
        rc = diag_set(d, QS_EINVAL, path, -1,
                      "the run's optimizer steps are %lld micro-batches, this launch makes %ld "
                      "(%d rank(s) x grad_accum %ld); ranks x grad_accum must stay %lld (%s)",
                      mbs, mb_now, t->n_ranks, t->cfg.grad_accum, mbs, how);
        goto out;
    }
    if ((size_t)n_params != t->m.n_params) {
        rc = diag_set(d, QS_ESHAPE, path, -1, "state is for %lld parameters, the model has %zu",
                      (long long)n_params, t->m.n_params);
        goto out;
    }
    size_t pb = t->m.n_params * sizeof(float);
    /* this rank's part of the moments (all of them without ZeRO-1) */
    size_t first = trainer_dist_opt_first(t) * sizeof(float);
    size_t mine = trainer_dist_opt_elems(t) * sizeof(float);
    if ((rc = ckpt_section_copy(&r, "adam_m", t->opt.m, first, mine, pb, path, d)) ||
        (rc = ckpt_section_copy(&r, "adam_v", t->opt.v, first, mine, pb, path, d)))
        goto out;
    t->opt.t = (long)adam_t;
    if ((rc = trainstate_section(&r, "data", &p, &n, d)))
        goto out;
    if ((rc = t->data->restore(t->data->self, p, n, d))) {
        if (d && !d->path[0])   /* the saved position's file */
            snprintf(d->path, sizeof d->path, "%s", path);
        goto out;
    }
    if ((rc = trainstate_section(&r, "amax", &p, &n, d)) ||
        (rc = trainer_amax_unpack(t, p, n, path, d)))
        goto out;
    t->step = (long)step;
    t->last_ckpt_step = (long)step;
    if (r.version >= 2) {   /* the log state */
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
    } else if (t->qset && t->cfg.qat && t->step > t->sched.bf16_warmup_steps) {
        /* version 1: each quantizer's call count as the straight run has it: one
         * call per micro-batch of every QAT step so far (where its QSNR sample
         * sits); alarm episodes start from zero */
        quant_set_skip_calls(t->qset, (unsigned long)(t->step - t->sched.bf16_warmup_steps) *
                                          (unsigned long)mb_now);
    }
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

/* Every complete line of a log the trainer wrote is a JSON object with an
 * integer "step".  A line that is not (damage in the middle of the file, or
 * another program's output) refuses the resume by file and line, the file
 * untouched: carrying it into the resumed run would hand it to every reader of
 * the logs.  A cut last line is a killed writer's, which the cut drops. */
int trainer_log_check(const char *path, qs_diag *d)
{
    if (!fileio_exists(path))
        return 0;
    zlog_reader *zr = NULL;
    int rc = zlog_reader_create(&zr, path, d), more = 0;
    const char *line;
    size_t len;
    long lineno = 0;
    while (!rc && (more = zlog_next(zr, &line, &len, &lineno, d)) == 1) {
        json_t *j = json_loadb(line, len, 0, NULL);
        int ok = json_is_object(j) && json_is_integer(json_object_get(j, "step"));
        json_decref(j);
        if (!ok)
            rc = diag_set(d, QS_EFORMAT, path, lineno,
                          "not a record train writes (a JSON object with an integer \"step\"): "
                          "cannot resume onto a damaged log; remove the line or start a new run");
    }
    if (!rc && more < 0 && more != QS_ETRUNC)
        rc = more;
    zlog_reader_destroy(zr);
    return rc;
}

int trainer_log_cut(const char *path, long step, qs_diag *d)
{
    return zlog_filter(path, trainer_log_keep, &step, d);
}

int trainer_log_truncate(const char *path, long step, qs_diag *d)
{
    int rc = trainer_log_check(path, d);
    return rc ? rc : trainer_log_cut(path, step, d);
}

int trainer_event_append(const char *run_dir, const char *line, qs_diag *d)
{
    if (dist_rank() != 0)   /* only rank 0 writes the run directory */
        return 0;
    char path[TRAINER_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/events.jsonl", run_dir);
    FILE *f = fopen(path, "a");
    if (!f)
        return diag_set(d, QS_EIO, path, -1, "cannot append: %s", strerror(errno));
    int ok = fprintf(f, "%s\n", line) > 0;
    ok &= fclose(f) == 0;
    return ok ? 0 : diag_set(d, QS_EIO, path, -1, "write failed");
}

int trainer_event(const char *run_dir, long step, const char *type, qs_diag *d, ...)
{
    char line[2048];
    size_t n = (size_t)snprintf(line, sizeof line, "{\"step\":%ld,\"type\":", step);
    n += qs_json_quote(line + n, sizeof line - n, type);
    va_list ap;
    va_start(ap, d);
    for (const char *key; n < sizeof line && (key = va_arg(ap, const char *));) {
        const char *value = va_arg(ap, const char *);
        n += (size_t)snprintf(line + n, sizeof line - n, ",\"%s\":", key);
        if (n < sizeof line)
            n += qs_json_quote(line + n, sizeof line - n, value);
    }
    va_end(ap);
    if (n + 1 >= sizeof line)
        return diag_set(d, QS_ERANGE, run_dir, -1, "%s event longer than %zu bytes", type,
                        sizeof line - 2);
    memcpy(line + n, "}", 2);
    return trainer_event_append(run_dir, line, d);
}
