/* cmd_satstat.c: qatscope satstat RUN_DIR [--json] [--top N] [--phase P] [--threshold X]
 * Summarises a run's quant.jsonl.zst: per quantizer max/mean clip rate, steps
 * with saturation, worst true/predicted amax ratio (> 1: the step clipped; the
 * same ratio replay and `heatmap --metric amax_ratio` show); the N worst tensors. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qs/json.h"
#include "qs/qlog.h"
#include "qs/satsummary.h"

static const char satstat_usage[] =
    "usage: qatscope satstat RUN_DIR [--json] [--top N] [--phase qat|warmup|all] [--threshold X]\n"
    "                        [--match SUBSTR]\n"
    "  Summarise amax saturation from RUN_DIR/quant.jsonl.zst (or a log file).\n"
    "  --top N        worst tensors to list (default 10)\n"
    "  --phase P      steps to score: qat (default), warmup (would-be clips), all\n"
    "  --threshold X  clip rate counted as an alarm step (default 1e-4)\n"
    "  --match S      only quantizers whose name contains S (e.g. .input, layers.7.)\n"
    "  --json         one JSON object on stdout, for scripts\n";

/* the summary keeps pred/true (smaller = worse); every command shows true/pred */
static double satstat_true_over_pred(double pred_over_true)
{
    return pred_over_true > 0 ? 1.0 / pred_over_true : NAN;
}

static json_t *satstat_tensor_json(const qlog_run *run, const satsummary *s, int q)
{
    const satsummary_tensor *t = &s->t[q];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(run->names[q]));
    json_object_set_new(o, "steps", json_integer(t->steps));
    json_object_set_new(o, "sat_steps", json_integer(t->sat_steps));
    json_object_set_new(o, "alarm_steps", json_integer(t->alarm_steps));
    json_object_set_new(o, "max_clip_rate", qs_json_real_or_null(t->max_clip_rate));
    json_object_set_new(o, "max_clip_step",
                        t->max_clip_step >= 0 ? json_integer(t->max_clip_step) : json_null());
    json_object_set_new(o, "mean_clip_rate", qs_json_real_or_null(t->mean_clip_rate));
    json_object_set_new(o, "worst_true_over_pred",
                        qs_json_real_or_null(satstat_true_over_pred(t->worst_pred_over_true)));
    json_object_set_new(o, "worst_step", t->worst_step >= 0 ? json_integer(t->worst_step) : json_null());
    json_object_set_new(o, "mean_qsnr_db", qs_json_real_or_null(t->mean_qsnr_db));
    return o;
}

static int satstat_print_json(const char *path, const qlog_run *run, const satsummary *s, int top)
{
    json_t *o = json_object();
    json_object_set_new(o, "log", json_string(path));
    json_object_set_new(o, "run", json_string(run->run));
    json_object_set_new(o, "version", json_integer(run->version));
    json_object_set_new(o, "truncated", json_boolean(run->truncated));
    json_object_set_new(o, "estimator", json_string(run->recipe_est));
    json_object_set_new(o, "margin", json_integer(run->margin));
    json_object_set_new(o, "phase", json_string(qlog_select_name(s->select)));
    json_object_set_new(o, "threshold", json_real(s->threshold));
    json_object_set_new(o, "steps_logged", json_integer(run->n_steps));
    json_object_set_new(o, "steps_scored", json_integer(s->steps_scored));
    json_object_set_new(o, "steps_with_saturation", json_integer(s->steps_with_sat));
    json_object_set_new(o, "steps_with_alarm", json_integer(s->steps_with_alarm));
    json_object_set_new(o, "tensors_with_saturation", json_integer(s->tensors_with_sat));
    json_object_set_new(o, "first_saturation_step",
                        s->first_sat_step >= 0 ? json_integer(s->first_sat_step) : json_null());
    json_t *qs = json_array(), *worst = json_array();
    for (int q = 0; q < run->n_quant; q++)
        json_array_append_new(qs, satstat_tensor_json(run, s, q));
    for (int i = 0; i < top && i < run->n_quant; i++)
        json_array_append_new(worst, json_string(run->names[s->rank[i]]));
    json_object_set_new(o, "quantizers", qs);
    json_object_set_new(o, "top", worst);
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!text)
        return cli_error("satstat: out of memory formatting JSON");
    printf("%s\n", text);
    free(text);
    return 0;
}

static void satstat_fmt(char *buf, size_t n, double v, const char *fmt)
{
    if (isfinite(v))
        snprintf(buf, n, fmt, v);
    else
        snprintf(buf, n, "-");
}

static void satstat_row(const qlog_run *run, const satsummary *s, int q, int rank, int w)
{
    const satsummary_tensor *t = &s->t[q];
    char maxc[48], meanc[32], ratio[48], qsnr[32], step[24];
    satstat_fmt(maxc, sizeof maxc, t->max_clip_rate, "%.3e");
    if (t->max_clip_step >= 0 && t->max_clip_rate > 0) {
        snprintf(step, sizeof step, " (%ld)", t->max_clip_step);
        strncat(maxc, step, sizeof maxc - strlen(maxc) - 1);
    }
    satstat_fmt(meanc, sizeof meanc, t->mean_clip_rate, "%.3e");
    satstat_fmt(ratio, sizeof ratio, satstat_true_over_pred(t->worst_pred_over_true), "%.4f");
    if (t->worst_step >= 0) {
        snprintf(step, sizeof step, " (%ld)", t->worst_step);
        strncat(ratio, step, sizeof ratio - strlen(ratio) - 1);
    }
    satstat_fmt(qsnr, sizeof qsnr, t->mean_qsnr_db, "%.1f");
    if (rank > 0)
        printf("%4d  ", rank);
    else
        printf("  ");
    printf("%-*s  %-22s  %-10s  %9d  %11d  %-22s  %9s\n", w, run->names[q], maxc, meanc,
           t->sat_steps, t->alarm_steps, ratio, qsnr);
}

static void satstat_header(int w, int ranked)
{
    printf(ranked ? "   #  " : "  ");
    printf("%-*s  %-22s  %-10s  %9s  %11s  %-22s  %9s\n", w, "tensor", "max clip rate (step)",
           "mean clip", "sat steps", "alarm steps", "worst true/pred (step)", "mean QSNR");
}

static void satstat_print_text(const char *path, const qlog_run *run, const satsummary *s, int top)
{
    int n_warm = 0;
    for (int i = 0; i < run->n_steps; i++)
        n_warm += run->phases[i] == QLOG_PHASE_WARMUP;
    printf("run '%s': %s (v%d), %d quantizers, %d steps logged (%d warmup, %d qat)%s\n", run->run,
           path, run->version, run->n_quant, run->n_steps, n_warm, run->n_steps - n_warm,
           run->truncated ? ", TRUNCATED" : "");
    printf("recipe: %s, margin %d, history %d, %s\n", run->recipe_est, run->margin,
           run->history_steps, run->saturate ? "saturating" : "non-saturating");
    printf("scored: %s steps (%d); alarm threshold %.3g\n", qlog_select_name(s->select),
           s->steps_scored, s->threshold);
    if (s->steps_scored == 0) {
        printf("no %s steps in the log: nothing to summarise (try --phase all)\n",
               qlog_select_name(s->select));
        return;
    }
    printf("steps with saturation: %d of %d", s->steps_with_sat, s->steps_scored);
    if (s->first_sat_step >= 0)
        printf(" (first at step %ld)", s->first_sat_step);
    printf("; steps above threshold: %d; tensors with saturation: %d of %d\n", s->steps_with_alarm,
           s->tensors_with_sat, run->n_quant);
    int w = 6;
    for (int q = 0; q < run->n_quant; q++)
        if ((int)strlen(run->names[q]) > w)
            w = (int)strlen(run->names[q]);
    int n_top = top < run->n_quant ? top : run->n_quant;
    if (n_top > 0) {
        printf("\ntop %d worst tensors:\n", n_top);
        satstat_header(w, 1);
        for (int i = 0; i < n_top; i++)
            satstat_row(run, s, s->rank[i], i + 1, w);
    }
    printf("\nper quantizer:\n");
    satstat_header(w, 0);
    for (int q = 0; q < run->n_quant; q++)
        satstat_row(run, s, q, 0, w);
}

int cmd_satstat(int argc, char **argv)
{
    cli_run_args ra = {"satstat", NULL, NULL, QLOG_SELECT_QAT};
    int json = 0;
    long top = 10;
    double threshold = 1e-4;
    const cli_opt opts[] = {
        {"--top", CLI_OPT_LONG, .out = &top, .min = 0, .max = 1000000},
        {"--threshold", CLI_OPT_DOUBLE, .out = &threshold, .dmin = 0.0, .dmax = 1.0},
        {"--json", CLI_OPT_SWITCH, .out = &json},
    };
    int rc = cli_args_parse("satstat", satstat_usage, argc, argv, opts, sizeof opts / sizeof *opts,
                            cli_run_arg, &ra);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!ra.dir)
        return cli_error("satstat: missing RUN_DIR; usage: qatscope satstat RUN_DIR [--json] [--top N]");
    qlog_run run;
    qs_diag d = {0};
    char path[QS_DIAG_PATH_MAX];
    rc = cli_run_load(ra.dir, ra.match, "summarising", &run, path, sizeof path);
    if (rc)
        return rc;
    satsummary s;
    rc = satsummary_compute(&run, ra.select, threshold, &s, &d);
    if (rc) {
        qlog_run_free(&run);
        return cli_diag_error(&d);
    }
    int exit_code = 0;
    if (json)
        exit_code = satstat_print_json(path, &run, &s, (int)top);
    else
        satstat_print_text(path, &run, &s, (int)top);
    satsummary_free(&s);
    qlog_run_free(&run);
    return exit_code;
}
