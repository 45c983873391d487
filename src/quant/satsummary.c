/* satsummary.c: per-quantizer saturation summary of a logged run (see include/qs/satsummary.h). */
#include "qs/satsummary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qs/mem.h"

void satsummary_free(satsummary *s)
{
    qs_free(s->t);
    qs_free(s->rank);
    memset(s, 0, sizeof *s);
}

/* worst first; ties by index so the order is total and stable */
static int satsummary_worse(const satsummary_tensor *a, int ia, const satsummary_tensor *b, int ib)
{
    if (a->max_clip_rate != b->max_clip_rate)
        return a->max_clip_rate > b->max_clip_rate;
    if (a->sat_steps != b->sat_steps)
        return a->sat_steps > b->sat_steps;
    double ra = isnan(a->worst_pred_over_true) ? INFINITY : a->worst_pred_over_true;
    double rb = isnan(b->worst_pred_over_true) ? INFINITY : b->worst_pred_over_true;
    if (ra != rb)
        return ra < rb;
    return ia < ib;
}

int satsummary_compute(const qlog_run *run, int select, double threshold, satsummary *out,
                       qs_diag *d)
{
    memset(out, 0, sizeof *out);
    out->n_quant = run->n_quant;
    out->select = select;
    out->threshold = threshold;
    out->first_sat_step = -1;
    out->t = qs_calloc((size_t)run->n_quant, sizeof *out->t);
    out->rank = qs_calloc((size_t)run->n_quant, sizeof *out->rank);
    double *clip_sum = qs_calloc((size_t)run->n_quant, sizeof *clip_sum);
    double *qsnr_sum = qs_calloc((size_t)run->n_quant, sizeof *qsnr_sum);
    int *qsnr_n = qs_calloc((size_t)run->n_quant, sizeof *qsnr_n);
    if (!out->t || !out->rank || !clip_sum || !qsnr_sum || !qsnr_n) {
        satsummary_free(out);
        qs_free(clip_sum);
        qs_free(qsnr_sum);
        qs_free(qsnr_n);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory (summary of %d quantizers)",
                        run->n_quant);
    }
    for (int q = 0; q < run->n_quant; q++) {
        out->t[q].max_clip_step = -1;
        out->t[q].worst_step = -1;
        out->t[q].worst_pred_over_true = NAN;
    }
    for (int s = 0; s < run->n_steps; s++) {
        if (!qlog_step_selected(run, s, select))
            continue;
        out->steps_scored++;
        int any_sat = 0, any_alarm = 0;
        for (int q = 0; q < run->n_quant; q++) {
            const qlog_row *r = qlog_run_row(run, s, q);
            satsummary_tensor *t = &out->t[q];
            if (!isnan(r->clip_rate)) {
                t->steps++;
                clip_sum[q] += r->clip_rate;
                if (t->max_clip_step < 0 || r->clip_rate > t->max_clip_rate) {
                    t->max_clip_rate = r->clip_rate;
                    t->max_clip_step = run->steps[s];
                }
                if (r->clip > 0 || r->clip_rate > 0.0f) {
                    t->sat_steps++;
                    any_sat = 1;
                }
                if (r->clip_rate > threshold) {
                    t->alarm_steps++;
                    any_alarm = 1;
                }
            }
            if (r->pred_amax > 0.0f && r->amax > 0.0f) {
                double ratio = (double)r->pred_amax / (double)r->amax;
                if (isnan(t->worst_pred_over_true) || ratio < t->worst_pred_over_true) {
                    t->worst_pred_over_true = ratio;
                    t->worst_step = run->steps[s];
                }
            }
            if (!isnan(r->qsnr_db)) {
                qsnr_sum[q] += r->qsnr_db;
                qsnr_n[q]++;
            }
        }
        out->steps_with_sat += any_sat;
        out->steps_with_alarm += any_alarm;
        if (any_sat && out->first_sat_step < 0)
            out->first_sat_step = run->steps[s];
    }
    for (int q = 0; q < run->n_quant; q++) {
        satsummary_tensor *t = &out->t[q];
        t->mean_clip_rate = t->steps ? clip_sum[q] / t->steps : NAN;
        t->mean_qsnr_db = qsnr_n[q] ? qsnr_sum[q] / qsnr_n[q] : NAN;
        out->tensors_with_sat += t->sat_steps > 0;
        /* insertion sort into rank (n_quant is ~100s) */
        int i = q;
        while (i > 0 && satsummary_worse(t, q, &out->t[out->rank[i - 1]], out->rank[i - 1])) {
            out->rank[i] = out->rank[i - 1];
            i--;
        }
        out->rank[i] = q;
    }
    qs_free(clip_sum);
    qs_free(qsnr_sum);
    qs_free(qsnr_n);
    return 0;
}
