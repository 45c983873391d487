/* cmd_train.c: qatscope train --config run.json [--set key=value ...] [--resume RUN_DIR]
 *   shortcuts: --ste pass|masked, --bf16-warmup-steps N, --stop-on-saturation,
 *              --precision fp32|bf16, --steps N;  --help-config lists every key.
 * Thin wiring: config -> shard data source -> trainer loop -> progress lines.
 * Exit 0 when the run completes, 1 when it stopped on an alarm (saturation) or
 * a NaN, 2 on unusable input. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "qs/dist.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/runcfg.h"
#include "qs/schedule.h"
#include "qs/trainer.h"
#include "train_progress.h"

static volatile sig_atomic_t train_interrupted;

static void train_on_sigint(int sig)
{
    (void)sig;
    train_interrupted = 1;
}

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: qatscope train --config run.json [--set key=value ...] [--resume RUN_DIR]\n"
            "  --config FILE          run config (JSON object; keys: --help-config)\n"
            "  --set key=value        override one key (typed; repeatable)\n"
            "  --resume RUN_DIR       continue RUN_DIR from its latest checkpoint, bit-exactly\n"
            "                         (config = RUN_DIR/config.json; --set may change steps,\n"
            "                         ckpt_every, stop_on_saturation, max_memory_gb,\n"
            "                         plot_every, zero, and grad_accum when the rank count\n"
            "                         changes: ranks x grad_accum must stay the same)\n"
            "  --ste pass|masked      straight-through estimator (= --set ste=...)\n"
            "  --bf16-warmup-steps N  unquantized steps before QAT (= --set bf16_warmup_steps=N)\n"
            "  --stop-on-saturation   stop with exit 1 on a saturation alarm\n"
            "  --precision fp32|bf16  matmul precision (= --set precision=...)\n"
            "  --steps N              (= --set steps=N)\n"
            "  --plot-every N         redraw RUN_DIR/heatmap.png and curves.png every N steps\n"
            "                         and at the end (= --set plot_every=N)\n"
            "  --quiet                no progress output\n"
            "  --help-config          list every config key with its default\n"
            "Data-parallel: mpirun -np N qatscope train ... (a `make MPI=1` build): N ranks,\n"
            "each grad_accum micro-batches per step; the same bits as one process with\n"
            "grad_accum x N when grad_accum is 1.\n");
}

static void train_help_config(void)
{
    static const char *const type_names[] = {"int", "number", "bool", "string", "enum", "list"};
    for (int i = 0; i < runcfg_key_count(); i++) {
        const runcfg_key *k = runcfg_key_at(i);
        printf("%-24s %-7s default %-16s %s\n", k->name, type_names[k->type],
               k->dflt[0] ? k->dflt : "(none)", k->doc);
    }
}

static int train_resume_key_ok(const char *assignment)
{
    static const char *const ok[] = {"steps=",        "ckpt_every=", "stop_on_saturation=",
                                     "max_memory_gb=", "plot_every=", "zero=",
                                     "grad_accum="};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (!strncmp(assignment, ok[i], strlen(ok[i])))
            return 1;
    return 0;
}

static size_t train_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

/* Several ranks: the same token stream everywhere (the data position holds the
 * split's size and hash); a shard that differs on one node stops the job before
 * anything is written. */
static int train_same_data(train_data *data, qs_diag *d)
{
    void *pos = NULL;
    size_t n = 0;
    int rc = data->save(data->self, &pos, &n, d);
    uint64_t h = rc ? 0 : cli_hash64(pos, n);
    qs_free(pos);
    return dist_agree(rc, h, "the training data (token shards and position)", d);
}

int cmd_train(int argc, char **argv)
{
    const char *config = NULL, *resume = NULL;
    const char *sets[64];
    int n_sets = 0, quiet = 0;
    static char flag_sets[8][96];
    int n_flag = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            train_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--help-config")) {
            train_help_config();
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--stop-on-saturation")) {
            sets[n_sets++] = "stop_on_saturation=true";
        } else if (cli_flag_is(a, "--config") || cli_flag_is(a, "--resume") ||
                   cli_flag_is(a, "--set") || cli_flag_is(a, "--ste") ||
                   cli_flag_is(a, "--bf16-warmup-steps") || cli_flag_is(a, "--precision") ||
                   cli_flag_is(a, "--steps") || cli_flag_is(a, "--plot-every")) {
            if (!(v = cli_flag_value(argc, argv, &i)))
                return CLI_EXIT_USAGE;
            if (cli_flag_is(a, "--config"))
                config = v;
            else if (cli_flag_is(a, "--resume"))
                resume = v;
            else if (cli_flag_is(a, "--set"))
                sets[n_sets++] = v;
            else if (n_flag < 8) {
                const char *key = cli_flag_is(a, "--ste")                 ? "ste"
                                  : cli_flag_is(a, "--bf16-warmup-steps") ? "bf16_warmup_steps"
                                  : cli_flag_is(a, "--precision")         ? "precision"
                                  : cli_flag_is(a, "--plot-every")        ? "plot_every"
                                                                          : "steps";
                snprintf(flag_sets[n_flag], sizeof flag_sets[n_flag], "%s=%s", key, v);
                sets[n_sets++] = flag_sets[n_flag++];
            }
        } else {
            return cli_error("train: unexpected argument '%s' (argument %d); see --help", a, i);
        }
        if (n_sets >= 60)
            return cli_error("train: too many --set options");
    }
    if (!config && !resume)
        return cli_error("train: --config FILE or --resume RUN_DIR is required; see --help");

    runcfg cfg;
    qs_diag d = {0};
    char snap[2048];
    if (resume) {
        snprintf(snap, sizeof snap, "%s/config.json", resume);
        if (runcfg_load(&cfg, snap, &d))
            return cli_diag_error(&d);
        for (int i = 0; i < n_sets; i++)
            if (!train_resume_key_ok(sets[i]))
                return cli_error("train: --resume: '%s' cannot change in a resumed run (it would "
                                 "not continue the same run); allowed: steps, ckpt_every, "
                                 "stop_on_saturation, max_memory_gb, plot_every, zero, "
                                 "grad_accum", sets[i]);
    } else if (runcfg_load(&cfg, config, &d)) {
        return cli_diag_error(&d);
    }
    for (int i = 0; i < n_sets; i++)
        if (runcfg_set(&cfg, sets[i], &d))
            return cli_diag_error(&d);
    if (runcfg_validate(&cfg, &d))
        return cli_error("%s: %s", resume ? snap : config, d.msg);
    /* several ranks: the same run config everywhere (a file may differ per node) */
    char *cfg_json = runcfg_to_json(&cfg);
    uint64_t cfg_hash = cfg_json ? cli_hash64(cfg_json, strlen(cfg_json)) : 0;
    qs_free(cfg_json);
    if (dist_agree(0, cfg_hash, "the run config", &d))
        return cli_diag_error(&d);
    if (dist_rank() != 0)   /* progress and the summary come from rank 0 */
        quiet = 1;

    train_data data;
    if (trainer_data_open_shards(&data, &cfg, &d))
        return cli_diag_error(&d);
    if (train_same_data(&data, &d)) {   /* before rank 0 makes the run directory */
        trainer_data_close(&data);
        return cli_diag_error(&d);
    }
    train_eval_hook eval_hook = {0};
    if (cfg.eval_every > 0 && trainer_eval_create(&eval_hook, &cfg, &d)) {
        trainer_data_close(&data);
        return cli_diag_error(&d);
    }
    trainer_options opt = {resume, 0, cfg.eval_every > 0 ? &eval_hook : NULL};
    opt.mem_limit_bytes = cfg.max_memory_gb > 0 ? (size_t)(cfg.max_memory_gb * 1073741824.0)
                                                : train_mem_available();
    train_memory mem;
    if (trainer_memory_estimate(&cfg, &mem, &d)) {
        trainer_data_close(&data);
        trainer_eval_destroy(&eval_hook);
        return cli_diag_error(&d);
    }
    trainer *t;
    if (trainer_create(&t, &cfg, &data, &opt, &d)) {
        trainer_destroy(t);
        trainer_data_close(&data);
        trainer_eval_destroy(&eval_hook);
        return cli_diag_error(&d);
    }
    train_progress pr;
    train_progress_init(&pr, quiet ? NULL : stdout, isatty(STDOUT_FILENO), trainer_config(t));
    train_progress_start(&pr, t, &mem);
    signal(SIGINT, train_on_sigint);

    int rc = 0;
    const char *reason = "done";
    train_step_info info;
    while (!trainer_done(t)) {
        /* an interrupt on any rank stops every rank before the same step */
        int agreed = dist_agree(train_interrupted ? 1 : 0, 0, NULL, &d);
        if (agreed < 0) {   /* another rank failed since the last step */
            rc = agreed;
            break;
        }
        if (agreed > 0) {
            reason = "interrupted";
            break;
        }
        rc = trainer_step(t, &info, &d);
        if (rc)
            break;
        train_progress_step(&pr, &info);
    }
    train_progress_end_line(&pr);
    signal(SIGINT, SIG_DFL);
    if (rc == QS_ENAN) {
        cli_diag_error(&d);
        trainer_destroy(t);
        trainer_data_close(&data);
        trainer_eval_destroy(&eval_hook);
        return CLI_EXIT_FAIL;
    }
    if (rc == QS_ESTOP) {
        cli_diag_error(&d);
        trainer_destroy(t);
        trainer_data_close(&data);
        trainer_eval_destroy(&eval_hook);
        return CLI_EXIT_FAIL;
    }
    if (rc) {
        trainer_destroy(t);
        trainer_data_close(&data);
        trainer_eval_destroy(&eval_hook);
        return cli_diag_error(&d);
    }
    char run_dir[1100];
    snprintf(run_dir, sizeof run_dir, "%s", trainer_run_dir(t));
    long step = trainer_next_step(t);
    if (trainer_finish(t, reason, &d)) {
        trainer_data_close(&data);
        trainer_eval_destroy(&eval_hook);
        return cli_diag_error(&d);
    }
    trainer_data_close(&data);
    trainer_eval_destroy(&eval_hook);
    train_progress_finish(&pr, run_dir, step, &mem);
    return 0;
}
