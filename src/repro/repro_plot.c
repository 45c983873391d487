/* repro_plot.c: OUT/summary.png of the study: final probe accuracy per run
 * (the base model as a dashed line), saturated tensor-steps per run (BF16 runs
 * have no quantizers: "-"), and every run's training loss overlaid (EMA over
 * ~20 steps, so the curves can be told apart; the report's APE uses the raw
 * per-step losses). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qs/mem.h"
#include "qs/plots.h"
#include "repro_impl.h"

/* "4-max-window-high" + estimator -> "4 max-w\nhigh lr" */
static void plot_label(const repro_run_result *r, char *buf, size_t n)
{
    const char *dash = strchr(r->name, '-');
    int k = dash ? (int)(dash - r->name) : (int)strlen(r->name);
    const char *est = !r->qat                               ? "bf16"
                      : !strncmp(r->estimator, "most", 4)   ? "most-r"
                      : !strncmp(r->estimator, "exp", 3)    ? "exp-sm"
                      : !strncmp(r->estimator, "max", 3)    ? "max-w"
                      : !strncmp(r->estimator, "current", 7) ? "current"
                                                            : r->estimator;
    snprintf(buf, n, "%.*s %s\n%s%s", k, r->name, est, strstr(r->name, "high") ? "high" : "low",
             r->spike_rate > 0 ? "+spk" : "");
}

int repro_summary_png(const repro_run_result *runs, int n, double base_acc, const char *path,
                      qs_diag *d)
{
    char (*labels)[48] = qs_calloc((size_t)(n ? n : 1), sizeof *labels);
    char (*legend)[48] = qs_calloc((size_t)(n ? n : 1), sizeof *legend);
    const char **lab = qs_calloc((size_t)(n ? n : 1), sizeof *lab);
    double *acc = qs_calloc((size_t)(n ? n : 1), sizeof *acc);
    double *sat = qs_calloc((size_t)(n ? n : 1), sizeof *sat);
    plots_series *series = qs_calloc((size_t)(n ? n : 1), sizeof *series);
    double **xy = qs_calloc((size_t)(n ? 2 * n : 1), sizeof *xy);
    int rc = 0;
    if (!labels || !legend || !lab || !acc || !sat || !series || !xy)
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    for (int i = 0; i < n && !rc; i++) {
        const repro_run_result *r = &runs[i];
        plot_label(r, labels[i], sizeof labels[i]);
        lab[i] = labels[i];
        snprintf(legend[i], sizeof legend[i], "%s", labels[i]);
        char *nl = strchr(legend[i], '\n');
        if (nl)
            *nl = ' ';
        acc[i] = 100 * r->probe_final;
        sat[i] = r->qat ? (double)r->sat_tensor_steps : NAN;
        long m = r->n_loss;
        xy[2 * i] = qs_malloc((size_t)(m ? m : 1) * sizeof(double));
        xy[2 * i + 1] = qs_malloc((size_t)(m ? m : 1) * sizeof(double));
        if (!xy[2 * i] || !xy[2 * i + 1]) {
            rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
            break;
        }
        double ema = m ? r->loss[0] : 0;
        for (long s = 0; s < m; s++) {
            ema = isfinite(r->loss[s]) ? 0.95 * ema + 0.05 * r->loss[s] : ema;
            xy[2 * i][s] = (double)s;
            xy[2 * i + 1][s] = ema;
        }
        series[i] = (plots_series){legend[i], (int)m, xy[2 * i], xy[2 * i + 1]};
    }
    if (!rc) {
        plots_summary s = {
            "qatscope reproduce: the paper's grid at small scale",
            {{"final fact-probe accuracy (%)", n, lab, acc, "%.1f", 100 * base_acc, "base"},
             {"saturated tensor-steps", n, lab, sat, "%.0f", NAN, NULL}},
            "training loss (EMA)",
            series,
            n};
        rc = plots_summary_write(&s, path, d);
    }
    for (int i = 0; xy && i < 2 * n; i++)
        qs_free(xy[i]);
    qs_free(xy);
    qs_free(series);
    qs_free(sat);
    qs_free(acc);
    qs_free(lab);
    qs_free(labels);
    qs_free(legend);
    return rc;
}
