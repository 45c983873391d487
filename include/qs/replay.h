/* replay.h: which estimator would have saved this run?  (what-if without retraining)
 *
 * Re-runs an amax estimator over the logged true-amax series of every quantizer
 * of a quant.jsonl.zst log, exactly as a quantizer would have (same history
 * capacity, same scale rule and margin, current scaling when there is no usable
 * estimate), and counts where the tensor's amax would have clipped:
 * fl(amax * scale) > 32768 -- the element at amax is the first to clip.
 * Every logged step feeds the history (warmup included, as in training); only
 * the selected phase (QLOG_SELECT_*, default qat) is scored.  Steps where a
 * quantizer has no amax (null / "none") neither score nor enter its history.
 * With a log interval > 1 the series is subsampled and the replay approximate.
 */
#ifndef QS_REPLAY_H
#define QS_REPLAY_H

#include "qs/amax.h"
#include "qs/err.h"
#include "qs/qlog.h"

typedef struct replay_result {
    char est[AMAX_NAME_MAX];        /* estimator name */
    int steps_scored;               /* logged steps in the selected phase */
    int steps_saturated;            /* scored steps where >= 1 tensor would clip */
    int tensors_saturated;          /* tensors that would clip on >= 1 scored step */
    long tensor_steps;              /* scored (step, tensor) pairs with an amax */
    long tensor_steps_saturated;    /* ... of which would clip */
    long first_saturated_step;      /* step number, -1 if none */
    double worst_true_over_pred;    /* max amax / predicted amax (> 1 clips); NaN if none */
    int worst_q;                    /* quantizer index of the worst ratio, -1 if none */
    long worst_step;                /* its step number */
    double mean_headroom_log2;      /* mean log2(pred / amax) over non-clipping pairs with
                                       amax > 0: range wasted; NaN if none */
} replay_result;

/* margin < 0: the log's margin.  history_steps < 1: the log's capacity. */
int replay_estimator(const qlog_run *run, const amax_estimator *e, int margin, int history_steps,
                     int select, replay_result *out, qs_diag *d);

#endif
