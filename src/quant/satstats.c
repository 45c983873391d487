/* satstats.c: saturation detector (see include/qs/satstats.h).
 *
 * Cost per step: O(n_quant) arithmetic plus, on logged steps, one JSON line of
 * n_quant objects and one zstd frame (qlog); nothing per element.  Events are
 * rare, so events.jsonl is opened, appended, flushed and closed per event: the
 * trainer appends to the same file between our writes.
 */
#include "qs/satstats.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"

struct satstats {
    satstats_config cfg;
    char *run_dir;
    quant_set *set;
    int n_quant;
    int *consec_steps;          /* [n_quant] consecutive steps above the threshold */
    qlog_row *rows;             /* [n_quant] this step */
    char (*warnings)[SATSTATS_WARNING_MAX];   /* [n_quant] this step's lines */
    int n_warnings;
    int stop_requested;
    double max_clip_rate;
    char est[AMAX_NAME_MAX];
    qlog_writer *log;
};

void satstats_config_default(satstats_config *c)
{
    memset(c, 0, sizeof *c);
    c->clip_threshold = 1e-4;
    c->alarm_steps = 1;
    c->log_interval_steps = 1;
    c->resume_step = -1;
}

void satstats_destroy(satstats *s)
{
    if (!s)
        return;
    qlog_writer_destroy(s->log);
    qs_free(s->run_dir);
    qs_free(s->consec_steps);
    qs_free(s->rows);
    qs_free(s->warnings);
    qs_free(s);
}

int satstats_create(satstats **out, const satstats_config *c, quant_set *set, qs_diag *d)
{
    *out = NULL;
    if (!(c->clip_threshold >= 0.0 && c->clip_threshold <= 1.0) || c->alarm_steps < 1 ||
        c->log_interval_steps < 0)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "detector: expected threshold in [0, 1], K >= 1, interval >= 0; got %g, %d, %d",
                        c->clip_threshold, c->alarm_steps, c->log_interval_steps);
    satstats *s = qs_calloc(1, sizeof *s);
    if (!s)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory (detector)");
    s->cfg = *c;
    s->set = set;
    s->n_quant = quant_set_count(set);
    s->consec_steps = qs_calloc((size_t)s->n_quant, sizeof *s->consec_steps);
    s->rows = qs_calloc((size_t)s->n_quant, sizeof *s->rows);
    s->warnings = qs_calloc((size_t)s->n_quant, sizeof *s->warnings);
    s->run_dir = c->run_dir ? qs_strdup(c->run_dir) : NULL;
    if (!s->consec_steps || !s->rows || !s->warnings || (c->run_dir && !s->run_dir)) {
        satstats_destroy(s);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory (detector)");
    }
    s->cfg.run_dir = s->run_dir;
    s->cfg.run_name = NULL;
    amax_estimator_format(&quant_set_recipe(set)->est, s->est, sizeof s->est);
    if (s->run_dir && c->log_interval_steps > 0) {
        char path[QS_DIAG_PATH_MAX];
        const char **names = qs_calloc((size_t)s->n_quant, sizeof *names);
        if (!names) {
            satstats_destroy(s);
            return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory (detector)");
        }
        for (int i = 0; i < s->n_quant; i++)
            names[i] = quant_name(quant_set_get(set, i));
        int rc = fileio_join(path, sizeof path, s->run_dir, QLOG_FILE);
        if (rc)
            rc = diag_set(d, rc, s->run_dir, -1, "run dir path too long");
        else
            rc = qlog_writer_create(&s->log, path, c->run_name, quant_set_recipe(set), names,
                                    s->n_quant, c->resume_step, d);
        qs_free(names);
        if (rc) {
            satstats_destroy(s);
            return rc;
        }
    }
    *out = s;
    return 0;
}

static int satstats_event_append(satstats *s, long step, const char *name, const qlog_row *r,
                                 qs_diag *d)
{
    char path[QS_DIAG_PATH_MAX];
    if (fileio_join(path, sizeof path, s->run_dir, SATSTATS_EVENTS_FILE))
        return diag_set(d, QS_ERANGE, s->run_dir, -1, "run dir path too long");
    char qname[600], line[1024];
    if (qs_json_quote(qname, sizeof qname, name) >= sizeof qname)
        return diag_set(d, QS_ERANGE, path, -1, "tensor name '%.60s...' too long to log", name);
    int len = snprintf(line, sizeof line,
                       "{\"step\":%ld,\"type\":\"saturation\",\"tensor\":%s,\"clip_rate\":%.6g,"
                       "\"pred_amax\":%.9g,\"amax\":%.9g,\"clip\":%lld,\"n\":%lld,"
                       "\"consecutive_steps\":%d}\n",
                       step, qname, (double)r->clip_rate, (double)r->pred_amax, (double)r->amax,
                       r->clip, r->n, s->cfg.alarm_steps);
    FILE *f = fopen(path, "ab");
    if (!f)
        return diag_set(d, QS_EIO, path, -1, "cannot append: %s", strerror(errno));
    size_t want = (size_t)len < sizeof line ? (size_t)len : sizeof line - 1;
    int bad = fwrite(line, 1, want, f) != want;
    bad |= fclose(f) != 0;
    if (bad)
        return diag_set(d, QS_EIO, path, -1, "write failed: %s", strerror(errno));
    return 0;
}

static void satstats_warning_format(satstats *s, long step, const char *name, const qlog_row *r,
                                    char *buf)
{
    const char *est = r->est_idx == 1 ? "current" : s->est;
    snprintf(buf, SATSTATS_WARNING_MAX,
             "warning: step %ld: saturation in %s: clip rate %.3g > %.3g for %d step%s "
             "(%lld of %lld clipped), predicted amax %.6g < true amax %.6g (estimator %s)",
             step, name, (double)r->clip_rate, s->cfg.clip_threshold, s->cfg.alarm_steps,
             s->cfg.alarm_steps == 1 ? "" : "s", r->clip, r->n, (double)r->pred_amax,
             (double)r->amax, est);
}

int satstats_step_end(satstats *s, long step, int phase, qs_diag *d)
{
    const quant_record *rec;
    quant_set_step_end(s->set, &rec);
    s->n_warnings = 0;
    s->max_clip_rate = 0.0;
    int n_alarms = 0, rc = 0;
    for (int i = 0; i < s->n_quant; i++) {
        qlog_row *r = &s->rows[i];
        qlog_row_from_record(&rec[i], r);
        if (r->mode == QUANT_MODE_NONE)
            continue;    /* not run this step: the count carries over */
        if (r->mode != QUANT_MODE_QUANT) {
            s->consec_steps[i] = 0;
            continue;
        }
        if (r->clip_rate > s->max_clip_rate)
            s->max_clip_rate = r->clip_rate;
        if (!(r->clip_rate > s->cfg.clip_threshold)) {
            s->consec_steps[i] = 0;
            continue;
        }
        if (++s->consec_steps[i] != s->cfg.alarm_steps)
            continue;
        const char *name = quant_name(quant_set_get(s->set, i));
        char *line = s->warnings[s->n_warnings++];
        satstats_warning_format(s, step, name, r, line);
        if (s->cfg.on_warning)
            s->cfg.on_warning(s->cfg.warning_ctx, line);
        s->stop_requested = 1;
        n_alarms++;
        if (s->run_dir && !rc)
            rc = satstats_event_append(s, step, name, r, d);
    }
    if (rc)
        return rc;
    if (s->log && (n_alarms > 0 || step % s->cfg.log_interval_steps == 0))
        rc = qlog_write_step(s->log, step, phase, s->rows, d);
    return rc ? rc : n_alarms;
}

const qlog_row *satstats_rows(const satstats *s) { return s->rows; }
double satstats_max_clip_rate(const satstats *s) { return s->max_clip_rate; }
int satstats_warning_count(const satstats *s) { return s->n_warnings; }
const char *satstats_warning(const satstats *s, int i)
{
    return i >= 0 && i < s->n_warnings ? s->warnings[i] : NULL;
}
int satstats_stop_requested(const satstats *s) { return s->stop_requested; }

int satstats_episode_steps(const satstats *s, int i)
{
    return i >= 0 && i < s->n_quant ? s->consec_steps[i] : 0;
}

void satstats_episode_restore(satstats *s, const int *steps, int n)
{
    for (int i = 0; i < s->n_quant; i++)
        s->consec_steps[i] = i < n && steps[i] > 0 ? steps[i] : 0;
}

int satstats_close(satstats *s, qs_diag *d)
{
    if (!s)
        return 0;
    int rc = qlog_writer_close(s->log, d);
    s->log = NULL;
    satstats_destroy(s);
    return rc;
}
