/* satstats.h: the saturation detector.
 *
 * Once per training step the trainer calls satstats_step_end(), which ends the
 * step of the quantizer set (pushes amax histories) and turns each quantizer's
 * record into a row: predicted amax, true amax, clip count/rate, underflow
 * rate, QSNR dB, scale, estimator.  Rows go to RUN_DIR/quant.jsonl.zst every
 * log_interval_steps (default 1; a step with an alarm is always logged).
 *
 * Alarm: a quantizer in quant mode whose clip rate is above clip_threshold
 * (default 1e-4) for alarm_steps consecutive steps (default 1) raises ONE alarm
 * when the run reaches K (again only after a step at or below the threshold):
 *   - a warning line (no prefix, no newline) kept for the caller
 *     (satstats_warning) and passed to the on_warning callback if set,
 *   - a {"type":"saturation",...} event appended to RUN_DIR/events.jsonl,
 *   - the stop-requested flag, which the trainer honours for --stop-on-saturation.
 * Observe-mode steps (BF16 warmup) are logged but never alarm: nothing was clipped.
 * The library never prints; the quantizer set must outlive the detector.
 * Threads: call satstats_step_end from one thread, after every quantize/observe
 * call of the step has returned.
 */
#ifndef QS_SATSTATS_H
#define QS_SATSTATS_H

#include "qs/err.h"
#include "qs/qlog.h"
#include "qs/quant.h"

#define SATSTATS_EVENTS_FILE "events.jsonl"
#define SATSTATS_WARNING_MAX 512   /* bytes of one warning line */

typedef void (*satstats_warning_fn)(void *ctx, const char *line);

typedef struct satstats_config {
    double clip_threshold;        /* alarm when clip_rate > this (default 1e-4) */
    int alarm_steps;              /* K consecutive steps (default 1) */
    int log_interval_steps;       /* quant.jsonl.zst every N steps (default 1), 0 = no log */
    const char *run_dir;          /* NULL: no files, detector only */
    const char *run_name;         /* header "run" */
    long resume_step;             /* -1 (default): a new log; >= 0: resuming at this step:
                                     the existing log is cut back to its earlier steps
                                     (qlog_writer_create) and appended to */
    satstats_warning_fn on_warning;   /* optional */
    void *warning_ctx;
} satstats_config;

void satstats_config_default(satstats_config *c);

typedef struct satstats satstats;

/* Opens RUN_DIR/quant.jsonl.zst (header written and flushed) when run_dir and
 * log_interval_steps are set. */
int satstats_create(satstats **out, const satstats_config *c, quant_set *set, qs_diag *d);
/* End the step: returns the number of alarms raised this step (>= 0) or an error. */
int satstats_step_end(satstats *s, long step, int phase, qs_diag *d);
/* This step's rows, header (set) order. */
const qlog_row *satstats_rows(const satstats *s);
/* Largest clip rate among quant-mode rows this step (0 if none): metrics.jsonl's max_clip_rate. */
double satstats_max_clip_rate(const satstats *s);
int satstats_warning_count(const satstats *s);        /* warnings raised this step */
const char *satstats_warning(const satstats *s, int i);
int satstats_stop_requested(const satstats *s);       /* sticky once an alarm fired */
/* Alarm episodes: the consecutive saturating steps counted so far per quantizer
 * (set order).  A checkpoint saves them (train_state.bin "alarm") and a resumed
 * run restores them, so an episode in progress at the checkpoint neither raises
 * its alarm again nor loses the steps it already counted.  The stop-requested
 * flag is not part of it: a run resumed after a saturation stop goes on. */
int satstats_episode_steps(const satstats *s, int i);
void satstats_episode_restore(satstats *s, const int *steps, int n);
int satstats_close(satstats *s, qs_diag *d);          /* flush the log, free */
void satstats_destroy(satstats *s);                   /* abandon; NULL ok */

#endif
