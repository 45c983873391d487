/* cmd_demo.c: qatscope demo [--out DIR] [--steps N] [--warmup N] [--estimator E] | --hif8
 *
 * The main job on bundled defaults (make demo), in four visible stages:
 *   1. tokenize data/demo/train.txt with the bundled tokenizer -> token shards
 *   2. train the bundled tiny Llama (data/demo/model, made by
 *      tools/gen_tiny_model.py): BF16 warmup steps (quantizers observe amax),
 *      then HiF8 W8A8 QAT on the published selection (MLP gate/up/down of the
 *      middle blocks) with the max-window:64 estimator, live progress
 *      and, every steps/20, val_loss / val_ppl on the held-out 10% of the
 *      documents and the KL and top-1 agreement against the step-0 weights
 *      (in-loop evaluation without benchmark data: eval_tasks empty)
 *   3. satstat: the run's saturation summary
 *   4. replay: what other amax estimators would have clipped on the same run
 *   then a saturation heatmap (quantizers x steps) and the training curves as PNGs
 * Everything lands in DIR (default build/demo/run-<time>, below the current
 * directory); the bundled model and text come from the binary's tree
 * (cli_install_path), so demo runs from any directory.  --hif8 runs the HiF8
 * codec tour instead (demo_hif8.c).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "demo.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/runcfg.h"
#include "qs/shard_build.h"
#include "qs/trainer.h"
#include "train_progress.h"

#define DEMO_MODEL "data/demo/model"
#define DEMO_TEXT "data/demo/train.txt"
/* documents held out for the in-loop val_loss / KL, and the batches scored */
#define DEMO_VAL_FRACTION 0.1
#define DEMO_VAL_BATCHES 4

static int demo_train(const char *dir, const char *model, const char *text, long steps,
                      long warmup, const char *estimator)
{
    char shards[RUNCFG_STR_MAX - 16], run[RUNCFG_STR_MAX - 16];
    qs_diag d = {0};
    snprintf(shards, sizeof shards, "%s/shards", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    printf("== 1/4 tokenize %s -> %s\n", text, shards);
    shard_build_opts so;
    shard_build_opts_default(&so);
    so.val_fraction = DEMO_VAL_FRACTION;
    shard_build_summary sum;
    const char *inputs[1] = {text};
    if (shard_build_run(model, inputs, 1, shards, &so, &sum, &d))
        return cli_diag_error(&d);
    printf("   %llu documents: %llu for training (%llu tokens), %llu held out for validation "
           "(%llu tokens)\n\n", (unsigned long long)sum.n_docs,
           (unsigned long long)sum.train_docs, (unsigned long long)sum.train_tokens,
           (unsigned long long)sum.val_docs, (unsigned long long)sum.val_tokens);

    runcfg cfg;
    runcfg_defaults(&cfg);
    snprintf(cfg.model, sizeof cfg.model, "%s", model);
    snprintf(cfg.train_data, sizeof cfg.train_data, "%s", shards);
    snprintf(cfg.out_dir, sizeof cfg.out_dir, "%s", run);
    snprintf(cfg.run_name, sizeof cfg.run_name, "demo");
    snprintf(cfg.amax_estimator, sizeof cfg.amax_estimator, "%s", estimator);
    cfg.batch_size = 8;
    cfg.seq_len = 64;
    cfg.steps = steps;
    cfg.bf16_warmup_steps = warmup;
    cfg.lr = 1e-3; /* 100x the paper's 1e-5: a few hundred steps must move the weights */
    cfg.lr_warmup_steps = 10;
    cfg.lr_decay[0] = 0;
    snprintf(cfg.lr_decay, sizeof cfg.lr_decay, "cosine");
    cfg.lr_min = 1e-4;
    cfg.ckpt_every = steps / 2;
    /* in-loop evaluation on the held-out documents alone (no benchmark data
     * ships with the demo): val_loss / val_ppl and, with QAT, the KL and top-1
     * agreement against the step-0 weights in bf16 */
    cfg.eval_every = steps >= 20 ? steps / 20 : 1;
    cfg.eval_tasks[0] = 0;
    cfg.eval_val_batches = DEMO_VAL_BATCHES;
    if (runcfg_validate(&cfg, &d))
        return cli_diag_error(&d);
    printf("== 2/4 train %s: %ld steps, bf16 warmup %ld steps, then HiF8 W8A8 QAT "
           "(estimator %s, lr %g); every %ld steps val loss and the KL from the step-0 "
           "weights\n", model, steps, warmup, estimator, cfg.lr, cfg.eval_every);
    train_data data;
    if (trainer_data_open_shards(&data, &cfg, &d))
        return cli_diag_error(&d);
    train_eval_hook eval = {0};
    train_memory mem;
    trainer *t;
    trainer_options opt = {NULL, 0, &eval};
    qs_mem_reset_peak(); /* the peak reported at the end is the training's */
    int rc = trainer_eval_create(&eval, &cfg, &d);
    if (!rc && !(rc = trainer_memory_estimate(&cfg, &mem, &d)))
        trainer_memory_add_eval(&mem, &eval);
    if (rc || trainer_create(&t, &cfg, &data, &opt, &d)) {
        trainer_eval_destroy(&eval);
        trainer_data_close(&data);
        return cli_diag_error(&d);
    }
    train_progress pr;
    train_progress_init(&pr, stdout, isatty(STDOUT_FILENO), &cfg);
    pr.every = steps >= 10 ? steps / 10 : 1;
    train_progress_start(&pr, t, &mem);
    train_step_info info;
    while (!trainer_done(t) && !rc) {
        rc = trainer_step(t, &info, &d);
        train_progress_step(&pr, &info);
    }
    train_progress_end_line(&pr);
    if (rc) {
        trainer_destroy(t);
        trainer_eval_destroy(&eval);
        trainer_data_close(&data);
        return cli_diag_error(&d);
    }
    rc = trainer_finish(t, "done", &d);
    trainer_eval_destroy(&eval);
    trainer_data_close(&data);
    if (rc)
        return cli_diag_error(&d);
    train_progress_finish(&pr, run, steps, &mem);

    printf("\n== 3/4 satstat %s (QAT steps)\n", run);
    fflush(stdout);
    char *sat_argv[] = {"satstat", run, "--top", "6", NULL};
    if ((rc = cmd_satstat(4, sat_argv)))
        return rc;
    printf("\n== 4/4 replay: other amax estimators on the same amax series (no retraining)\n");
    fflush(stdout);
    char *rep_argv[] = {"replay", run, "--estimators",
                        "most-recent,exp-smoothing:0.9,max-window:16,max-window:64,current", NULL};
    if ((rc = cmd_replay(4, rep_argv)))
        return rc;
    printf("\n== pictures: saturation heatmap and training curves\n");
    fflush(stdout);
    char *heat_argv[] = {"heatmap", run, "--metric", "clip_rate", "--log", NULL};
    if ((rc = cmd_heatmap(5, heat_argv)))
        return rc;
    char *plot_argv[] = {"plot", run, NULL};
    if ((rc = cmd_plot(2, plot_argv)))
        return rc;
    printf("\nrun directory: %s (metrics.jsonl, events.jsonl, quant.jsonl.zst, ckpt/, "
           "heatmap_clip_rate.png, curves.png)\n", run);
    return 0;
}

static const char DEMO_USAGE[] =
    "usage: qatscope demo [--out DIR] [--steps N] [--warmup N] [--estimator E]\n"
    "       qatscope demo --hif8     (the HiF8 codec tour)\n";

int cmd_demo(int argc, char **argv)
{
    const char *out = NULL, *estimator = "max-window:64";
    long steps = 300, warmup = 100;
    if (argc > 1 && !strcmp(argv[1], "--hif8"))
        return demo_hif8_run(argc - 1, argv + 1);
    const cli_opt opts[] = {
        {"--out", CLI_OPT_STR, .out = &out},
        {"--estimator", CLI_OPT_STR, .out = &estimator},
        {"--steps", CLI_OPT_LONG, .out = &steps, .min = 2, .max = 1000000},
        {"--warmup", CLI_OPT_LONG, .out = &warmup, .min = 0, .max = 1000000},
    };
    int rc = cli_args_parse("demo", DEMO_USAGE, argc, argv, opts, sizeof opts / sizeof *opts, NULL,
                            NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (warmup >= steps)
        return cli_error("demo: --warmup %ld must be below --steps %ld", warmup, steps);
    /* the bundled model and text of the binary's tree, from any current directory */
    char model[RUNCFG_STR_MAX], text[RUNCFG_STR_MAX], probe[RUNCFG_STR_MAX + 16];
    cli_install_path(DEMO_MODEL, model, sizeof model);
    cli_install_path(DEMO_TEXT, text, sizeof text);
    snprintf(probe, sizeof probe, "%s/config.json", model);
    if (!fileio_exists(probe) || !fileio_exists(text))
        return cli_error("demo: %s or %s not found in the qatscope tree of this binary nor in "
                         "the current directory", DEMO_MODEL, DEMO_TEXT);
    char dir[RUNCFG_STR_MAX - 32];
    if (out) {
        snprintf(dir, sizeof dir, "%s", out);
    } else {
        time_t now = time(NULL);
        struct tm tmv;
        char stamp[32];
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", gmtime_r(&now, &tmv));
        snprintf(dir, sizeof dir, "build/demo/run-%s", stamp);
    }
    printf("qatscope demo: continued pretraining of a tiny Llama with BF16 warmup, then HiF8 W8A8 "
           "QAT,\nwatching amax saturation per step (`qatscope demo --hif8`: the HiF8 codec tour)\n\n");
    return demo_train(dir, model, text, steps, warmup, estimator);
}
