/* cmd_replay.c: qatscope replay RUN_DIR [--estimators LIST] [--json] [--phase P] [--margin M] [--history N]
 * Re-runs amax estimators over the logged true-amax series (no retraining) and
 * prints, per estimator, the steps and tensors that would have saturated, the
 * worst true/predicted ratio and the mean headroom wasted. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qs/json.h"
#include "qs/qlog.h"
#include "qs/replay.h"

#define REPLAY_DEFAULT_ESTIMATORS "most-recent,exp-smoothing:0.9,max-window:64,max-window:16,current"
#define REPLAY_MAX_ESTIMATORS 32

static const char replay_usage[] =
    "usage: qatscope replay RUN_DIR [--estimators LIST] [--json] [--phase qat|warmup|all]\n"
    "                       [--margin M] [--history N] [--match SUBSTR]\n"
    "  Re-run amax estimators over RUN_DIR/quant.jsonl.zst's true-amax series.\n"
    "  --estimators LIST  comma-separated, default " REPLAY_DEFAULT_ESTIMATORS "\n"
    "                     (most-recent, exp-smoothing:ALPHA, max-window[:N], current)\n"
    "  --phase P          steps to score (all steps feed the history): qat (default), warmup, all\n"
    "  --margin M         power-of-two headroom (default: the run's)\n"
    "  --history N        amax history capacity (default: the run's)\n"
    "  --match S          only quantizers whose name contains S (e.g. .input, layers.7.)\n"
    "  --json             one JSON object on stdout, for scripts\n";

static int replay_print_json(const char *path, const qlog_run *run, const replay_result *r, int n,
                             int select, int margin, int history)
{
    json_t *o = json_object();
    json_object_set_new(o, "log", json_string(path));
    json_object_set_new(o, "run", json_string(run->run));
    json_object_set_new(o, "truncated", json_boolean(run->truncated));
    json_object_set_new(o, "logged_estimator", json_string(run->recipe_est));
    json_object_set_new(o, "phase", json_string(qlog_select_name(select)));
    json_object_set_new(o, "margin", json_integer(margin));
    json_object_set_new(o, "history", json_integer(history));
    json_object_set_new(o, "quantizers", json_integer(run->n_quant));
    json_object_set_new(o, "steps_logged", json_integer(run->n_steps));
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "estimator", json_string(r[i].est));
        json_object_set_new(e, "steps_scored", json_integer(r[i].steps_scored));
        json_object_set_new(e, "steps_saturated", json_integer(r[i].steps_saturated));
        json_object_set_new(e, "first_saturated_step", r[i].first_saturated_step >= 0
                                                             ? json_integer(r[i].first_saturated_step)
                                                             : json_null());
        json_object_set_new(e, "tensors_saturated", json_integer(r[i].tensors_saturated));
        json_object_set_new(e, "tensor_steps", json_integer(r[i].tensor_steps));
        json_object_set_new(e, "tensor_steps_saturated", json_integer(r[i].tensor_steps_saturated));
        json_object_set_new(e, "worst_true_over_pred", qs_json_real_or_null(r[i].worst_true_over_pred));
        json_object_set_new(e, "worst_tensor",
                            r[i].worst_q >= 0 ? json_string(run->names[r[i].worst_q]) : json_null());
        json_object_set_new(e, "worst_step", r[i].worst_q >= 0 ? json_integer(r[i].worst_step) : json_null());
        json_object_set_new(e, "mean_headroom_log2", qs_json_real_or_null(r[i].mean_headroom_log2));
        json_array_append_new(arr, e);
    }
    json_object_set_new(o, "estimators", arr);
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!text)
        return cli_error("replay: out of memory formatting JSON");
    printf("%s\n", text);
    free(text);
    return 0;
}

static void replay_print_text(const char *path, const qlog_run *run, const replay_result *r, int n,
                              int select, int margin, int history)
{
    printf("replay of %s%s: %d quantizers, %d %s steps scored of %d logged; history %d, margin %d\n",
           path, run->truncated ? " (TRUNCATED)" : "", run->n_quant, n ? r[0].steps_scored : 0,
           qlog_select_name(select), run->n_steps, history, margin);
    printf("logged run used: %s (saturated = the tensor's amax would exceed the predicted range)\n\n",
           run->recipe_est);
    printf("%-20s  %-14s  %-6s  %-13s  %-18s  %-46s  %s\n", "estimator", "sat steps", "first",
           "sat tensors", "sat tensor-steps", "worst true/pred (tensor @ step)",
           "mean headroom wasted (log2)");
    for (int i = 0; i < n; i++) {
        char a[32], b[32], c[48], worst[256], first[24], head[32];
        snprintf(a, sizeof a, "%d of %d", r[i].steps_saturated, r[i].steps_scored);
        snprintf(b, sizeof b, "%d of %d", r[i].tensors_saturated, run->n_quant);
        snprintf(c, sizeof c, "%ld of %ld", r[i].tensor_steps_saturated, r[i].tensor_steps);
        if (r[i].first_saturated_step >= 0)
            snprintf(first, sizeof first, "%ld", r[i].first_saturated_step);
        else
            snprintf(first, sizeof first, "-");
        if (r[i].worst_q >= 0)
            snprintf(worst, sizeof worst, "%.4f (%s @ %ld)", r[i].worst_true_over_pred,
                     run->names[r[i].worst_q], r[i].worst_step);
        else
            snprintf(worst, sizeof worst, "-");
        if (isfinite(r[i].mean_headroom_log2))
            snprintf(head, sizeof head, "%.3f", r[i].mean_headroom_log2);
        else
            snprintf(head, sizeof head, "-");
        printf("%-20s  %-14s  %-6s  %-13s  %-18s  %-46s  %s\n", r[i].est, a, first, b, c, worst, head);
    }
}

int cmd_replay(int argc, char **argv)
{
    const char *list = REPLAY_DEFAULT_ESTIMATORS;
    cli_run_args ra = {"replay", NULL, NULL, QLOG_SELECT_QAT};
    int json = 0;
    long margin = -1, history = -1;
    const cli_opt opts[] = {
        {"--estimators", CLI_OPT_STR, .out = &list},
        {"--margin", CLI_OPT_LONG, .out = &margin, .min = 0, .max = QUANT_MARGIN_MAX},
        {"--history", CLI_OPT_LONG, .out = &history, .min = 1, .max = 1 << 20},
        {"--json", CLI_OPT_SWITCH, .out = &json},
    };
    int rc = cli_args_parse("replay", replay_usage, argc, argv, opts, sizeof opts / sizeof *opts,
                            cli_run_arg, &ra);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!ra.dir)
        return cli_error("replay: missing RUN_DIR; usage: qatscope replay RUN_DIR --estimators LIST");
    amax_estimator est[REPLAY_MAX_ESTIMATORS];
    int n_est;
    qs_diag d = {0};
    if (amax_estimator_parse_list(list, est, REPLAY_MAX_ESTIMATORS, &n_est, &d))
        return cli_error("--estimators: %s", d.msg);
    qlog_run run;
    char path[QS_DIAG_PATH_MAX];
    rc = cli_run_load(ra.dir, ra.match, "replaying", &run, path, sizeof path);
    if (rc)
        return rc;
    replay_result res[REPLAY_MAX_ESTIMATORS];
    for (int i = 0; i < n_est; i++) {
        rc = replay_estimator(&run, &est[i], (int)margin, (int)history, ra.select, &res[i], &d);
        if (rc) {
            qlog_run_free(&run);
            return cli_diag_error(&d);
        }
    }
    int m = margin >= 0 ? (int)margin : run.margin;
    int h = history >= 1 ? (int)history : run.history_steps;
    if (json)
        rc = replay_print_json(path, &run, res, n_est, ra.select, m, h);
    else
        replay_print_text(path, &run, res, n_est, ra.select, m, h);
    qlog_run_free(&run);
    return rc;
}
