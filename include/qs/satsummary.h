/* satsummary.h: offline summary of a run's saturation (behind `qatscope satstat`).
 *
 * From a parsed quant.jsonl.zst: per quantizer, over the selected phase
 * (QLOG_SELECT_*, default qat): max and mean clip rate, steps with saturation
 * (clip > 0), steps above the alarm threshold, worst predicted/true amax ratio
 * (smallest; < 1 means the scale was built for less than the tensor held) and
 * mean QSNR; plus the quantizers ranked worst first (max clip rate, then
 * saturated steps, then worst ratio).
 */
#ifndef QS_SATSUMMARY_H
#define QS_SATSUMMARY_H

#include "qs/err.h"
#include "qs/qlog.h"

typedef struct satsummary_tensor {
    int steps;                  /* scored steps with a clip rate */
    int sat_steps;              /* ... with clip > 0 */
    int alarm_steps;            /* ... with clip_rate > threshold */
    double max_clip_rate;
    long max_clip_step;         /* step of the max (first), -1 if none */
    double mean_clip_rate;      /* NaN if no steps */
    double worst_pred_over_true;   /* min pred_amax / amax, NaN if never both */
    long worst_step;
    double mean_qsnr_db;        /* NaN if never logged */
} satsummary_tensor;

typedef struct satsummary {
    int n_quant;
    int select;
    double threshold;
    int steps_scored;
    int steps_with_sat;         /* scored steps where any quantizer clipped */
    int steps_with_alarm;       /* ... where any clip rate > threshold */
    int tensors_with_sat;
    long first_sat_step;        /* -1 if none */
    satsummary_tensor *t;       /* [n_quant], header order */
    int *rank;                  /* [n_quant] quantizer indices, worst first */
} satsummary;

int satsummary_compute(const qlog_run *run, int select, double threshold, satsummary *out,
                       qs_diag *d);
void satsummary_free(satsummary *s);          /* safe on a zeroed s */

#endif
