/* replay.c: estimator what-if over a logged amax series (see include/qs/replay.h).
 *
 * Per quantizer: one amax_history ring, walked over the logged steps in order;
 * O(steps * quantizers * estimator cost), no tensors touched.  The decision
 * per (step, tensor) uses quant_scale_from_amax, the function the quantizers
 * use, so replaying a run's own estimator reproduces its logged saturation.
 */
#include "qs/replay.h"

#include <math.h>
#include <string.h>

#include "qs/hif8.h"
#include "qs/mem.h"
#include "qs/quant.h"

int replay_estimator(const qlog_run *run, const amax_estimator *e, int margin, int history_steps,
                     int select, replay_result *out, qs_diag *d)
{
    memset(out, 0, sizeof *out);
    amax_estimator_format(e, out->est, sizeof out->est);
    out->first_saturated_step = -1;
    out->worst_true_over_pred = NAN;
    out->mean_headroom_log2 = NAN;
    out->worst_q = -1;
    if (margin < 0)
        margin = run->margin;
    if (history_steps < 1)
        history_steps = run->history_steps;
    /* the recipe a quantizer would have run: refused here when train refuses it
     * (margin range, a max-window longer than the history, ...) */
    quant_recipe r;
    quant_recipe_default(&r);
    r.est = *e;
    r.margin = margin;
    r.history_steps = history_steps;
    int rc = quant_recipe_check(&r, d);
    if (rc)
        return rc;
    unsigned char *step_sat = qs_calloc((size_t)run->n_steps + 1, 1);
    amax_history h;
    if (!step_sat || amax_history_init(&h, history_steps)) {
        qs_free(step_sat);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory (history of %d steps)", history_steps);
    }
    double headroom_sum = 0.0;
    long headroom_n = 0;
    for (int q = 0; q < run->n_quant; q++) {
        amax_history_clear(&h);
        int tensor_sat = 0;
        for (int s = 0; s < run->n_steps; s++) {
            float a = qlog_run_row(run, s, q)->amax;
            if (!isfinite(a) || a < 0.0f)
                continue;
            float pred = 0.0f, scale;
            if (!amax_estimate(e, &h, a, &pred) || quant_scale_from_amax(pred, margin, &scale)) {
                pred = a;   /* the quantizer's fallback: current scaling */
                if (quant_scale_from_amax(a, margin, &scale))
                    scale = 1.0f;
            }
            amax_history_push(&h, a);
            if (!qlog_step_selected(run, s, select))
                continue;
            out->tensor_steps++;
            int clip = a * scale > HIF8_MAX_FINITE;
            if (clip) {
                out->tensor_steps_saturated++;
                tensor_sat = 1;
                step_sat[s] = 1;
            } else if (a > 0.0f) {
                headroom_sum += log2((double)pred / (double)a);
                headroom_n++;
            }
            double ratio = pred > 0.0f ? (double)a / (double)pred : 0.0;
            if (a > 0.0f && (out->worst_q < 0 || ratio > out->worst_true_over_pred)) {
                out->worst_true_over_pred = ratio;
                out->worst_q = q;
                out->worst_step = run->steps[s];
            }
        }
        out->tensors_saturated += tensor_sat;
    }
    for (int s = 0; s < run->n_steps; s++) {
        if (!qlog_step_selected(run, s, select))
            continue;
        out->steps_scored++;
        if (step_sat[s]) {
            out->steps_saturated++;
            if (out->first_saturated_step < 0)
                out->first_saturated_step = run->steps[s];
        }
    }
    if (headroom_n)
        out->mean_headroom_log2 = headroom_sum / (double)headroom_n;
    amax_history_free(&h);
    qs_free(step_sat);
    return 0;
}
