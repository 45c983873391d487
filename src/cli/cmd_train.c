/* cmd_train.c: qatscope train --config run.json [--set key=value ...] [--resume RUN_DIR]
 *   shortcuts: --ste pass|masked, --bf16-warmup-steps N, --stop-on-saturation,
 *              --stop-on-forgetting, --precision fp32|bf16|bf16-amx, --steps N,
 *              --plot-every N (each one more --set, any number of times);
 *              --help-config lists every key.
 * Thin wiring: config -> shard data source -> trainer loop -> progress lines.
 * Exit 0 when the run completes, 1 when it stopped on an alarm (saturation,
 * forgetting) or a NaN, 2 on unusable input, 130 / 143 when SIGINT / SIGTERM
 * stopped it (after the current step, with a checkpoint; a second signal ends
 * the process at once). */
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_model.h"
#include "qs/dist.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/runcfg.h"
#include "qs/schedule.h"
#include "qs/trainer.h"
#include "train_progress.h"

/* SIGINT and SIGTERM (what `timeout` and batch schedulers send) alike: the first
 * asks the loop to stop after the current step with a checkpoint and a "stop"
 * event (exit 128 + signal: 130 / 143); a second one ends the process at once, by
 * that signal.  Any thread may take a signal (OpenMP, OpenBLAS workers), so two can
 * be handled at the same time: an atomic count, not the disposition, tells the
 * second from the first. */
static volatile sig_atomic_t train_stop_signal;
static atomic_int train_signal_count;

static void train_signals_set(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;   /* no EINTR inside the library's reads and writes */
    sigemptyset(&sa.sa_mask);   /* both blocked in the handler's thread */
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void train_on_signal(int sig)
{
    /* sigaction, raise and lock-free atomics are async-signal-safe */
    train_signals_set(SIG_DFL);
    if (atomic_fetch_add(&train_signal_count, 1) > 0) {
        raise(sig);   /* pending while blocked here, then the default action: the end */
        return;
    }
    train_stop_signal = sig;
}

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: qatscope train --config run.json [--set key=value ...] [--resume RUN_DIR]\n"
            "  --config FILE          run config (JSON object; keys: --help-config)\n"
            "  --set key=value        override one key (typed; repeatable)\n"
            "  --resume RUN_DIR       continue RUN_DIR from its latest checkpoint, bit-exactly\n"
            "                         (config = RUN_DIR/config.json; --set may change steps,\n"
            "                         ckpt_every, stop_on_saturation, stop_on_forgetting,\n"
            "                         max_memory_gb, plot_every, recompute, zero, and\n"
            "                         grad_accum when the rank count changes: ranks x\n"
            "                         grad_accum must stay the same)\n"
            "  --ste pass|masked      straight-through estimator (= --set ste=...)\n"
            "  --bf16-warmup-steps N  unquantized steps before QAT (= --set bf16_warmup_steps=N)\n"
            "  --stop-on-saturation   stop with exit 1 on a saturation alarm\n"
            "  --stop-on-forgetting   stop with exit 1 on a forgetting alarm (in-loop eval)\n"
            "  --precision P          matmul precision fp32, bf16 or bf16-amx (AMX CPUs)\n"
            "                         (= --set precision=P)\n"
            "  --steps N              (= --set steps=N)\n"
            "  --plot-every N         redraw RUN_DIR/heatmap.png and curves.png every N steps\n"
            "                         and at the end (= --set plot_every=N)\n"
            "  --quiet                no progress output\n"
            "  --help-config          list every config key with its default\n"
            "Data-parallel: mpirun -np N qatscope train ... (a `make MPI=1` build): N ranks,\n"
            "each grad_accum micro-batches per step; the same bits as one process with\n"
            "grad_accum x N when grad_accum is 1.\n"
            "exit: 0 done; 1 stopped by an alarm or a NaN; 2 unusable input; 130 / 143 stopped\n"
            "by SIGINT / SIGTERM after the current step, with a checkpoint (a second signal\n"
            "ends it at once)\n");
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
    char key[64];
    size_t n = strcspn(assignment, "=");
    snprintf(key, sizeof key, "%.*s", (int)(n < sizeof key ? n : sizeof key - 1), assignment);
    return runcfg_key_resumable(key);
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

/* The shortcut flags: each is one more `--set key=value`, applied in argument order
 * together with the --set options (the last assignment of a key wins). */
static const struct {
    const char *flag, *key;
} train_shortcuts[] = {
    {"--ste", "ste"},
    {"--bf16-warmup-steps", "bf16_warmup_steps"},
    {"--precision", "precision"},
    {"--steps", "steps"},
    {"--plot-every", "plot_every"},
};

/* Parsed arguments.  sets[] holds every assignment in argument order: --set values
 * point into argv, shortcut assignments are built ("key=value") and owned here. */
typedef struct train_args {
    const char *config, *resume;
    const char **sets;
    char **owned;
    int n_sets, n_owned, quiet;
} train_args;

static void train_args_free(train_args *a)
{
    for (int i = 0; i < a->n_owned; i++)
        qs_free(a->owned[i]);
    qs_free(a->owned);
    qs_free(a->sets);
    memset(a, 0, sizeof *a);
}

/* 0 ok, -1 when --help/--help-config was answered, else an exit code (printed). */
static int train_args_parse(int argc, char **argv, train_args *a)
{
    memset(a, 0, sizeof *a);
    /* each argument adds at most one assignment: no fixed limit, nothing dropped */
    a->sets = qs_calloc((size_t)argc, sizeof *a->sets);
    a->owned = qs_calloc((size_t)argc, sizeof *a->owned);
    if (!a->sets || !a->owned)
        return cli_error("train: out of memory parsing %d arguments", argc);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            train_usage(stdout);
            return -1;
        }
        if (!strcmp(f, "--help-config")) {
            train_help_config();
            return -1;
        }
        if (!strcmp(f, "--quiet")) {
            a->quiet = 1;
            continue;
        }
        if (!strcmp(f, "--stop-on-saturation") || !strcmp(f, "--stop-on-forgetting")) {
            a->sets[a->n_sets++] = !strcmp(f, "--stop-on-saturation") ? "stop_on_saturation=true"
                                                                      : "stop_on_forgetting=true";
            continue;
        }
        size_t k = 0, n_short = sizeof train_shortcuts / sizeof *train_shortcuts;
        while (k < n_short && !cli_flag_is(f, train_shortcuts[k].flag))
            k++;
        if (k == n_short && !cli_flag_is(f, "--config") && !cli_flag_is(f, "--resume") &&
            !cli_flag_is(f, "--set"))
            return cli_error("train: unexpected argument '%s' (argument %d); see --help", f, i);
        if (!(v = cli_flag_value(argc, argv, &i)))
            return CLI_EXIT_USAGE;
        if (k < n_short) {
            size_t n = strlen(train_shortcuts[k].key) + 1 + strlen(v) + 1;
            char *as = qs_malloc(n);
            if (!as)
                return cli_error("train: out of memory");
            snprintf(as, n, "%s=%s", train_shortcuts[k].key, v);
            a->owned[a->n_owned++] = as;
            a->sets[a->n_sets++] = as;
        } else if (cli_flag_is(f, "--config")) {
            a->config = v;
        } else if (cli_flag_is(f, "--resume")) {
            a->resume = v;
        } else {
            a->sets[a->n_sets++] = v;
        }
    }
    if (!a->config && !a->resume)
        return cli_error("train: --config FILE or --resume RUN_DIR is required; see --help");
    if (a->config && a->resume)   /* the config of a resumed run is its snapshot */
        return cli_error("train: --config and --resume together: a resumed run reads "
                         "%s/config.json; change what may change with --set", a->resume);
    return 0;
}

int cmd_train(int argc, char **argv)
{
    train_args a;
    runcfg cfg;
    qs_diag d = {0};
    char snap[2048] = "";
    train_data data = {0};
    train_eval_hook eval_hook = {0};
    trainer *t = NULL;
    int exit_code = train_args_parse(argc, argv, &a);
    if (exit_code) {
        exit_code = exit_code < 0 ? CLI_EXIT_OK : exit_code;
        goto done;
    }

    if (a.resume) {
        snprintf(snap, sizeof snap, "%s/config.json", a.resume);
        if (runcfg_load(&cfg, snap, &d)) {
            exit_code = cli_diag_error(&d);
            goto done;
        }
        for (int i = 0; i < a.n_sets; i++)
            if (!train_resume_key_ok(a.sets[i])) {
                exit_code = cli_error("train: --resume: '%s' cannot change in a resumed run (it "
                                      "would not continue the same run); allowed: %s",
                                      a.sets[i], runcfg_resumable_list());
                goto done;
            }
    } else if (runcfg_load(&cfg, a.config, &d)) {
        exit_code = cli_diag_error(&d);
        goto done;
    }
    for (int i = 0; i < a.n_sets; i++)
        if (runcfg_set(&cfg, a.sets[i], &d)) {
            exit_code = cli_diag_error(&d);
            goto done;
        }
    if (runcfg_validate(&cfg, &d) ||   /* and before any work: no out_dir over an input */
        trainer_run_dir_check(&cfg, a.resume ? a.resume : cfg.out_dir, &d)) {
        exit_code = cli_error("%s: %s", a.resume ? snap : a.config, d.msg);
        goto done;
    }
    long steps_done = 0;   /* a resume with nothing left to run is refused first */
    if (a.resume && trainer_resume_check(&cfg, a.resume, &steps_done, &d)) {
        exit_code = cli_diag_error(&d);
        goto done;
    }

    /* several ranks: the same run config everywhere (a file may differ per node) */
    char *cfg_json = runcfg_to_json(&cfg);
    uint64_t cfg_hash = cfg_json ? cli_hash64(cfg_json, strlen(cfg_json)) : 0;
    qs_free(cfg_json);
    if (dist_agree(0, cfg_hash, "the run config", &d)) {
        exit_code = cli_diag_error(&d);
        goto done;
    }
    if (dist_rank() != 0)   /* progress and the summary come from rank 0 */
        a.quiet = 1;

    if (!cfg.eval_tasks_dir[0]) {   /* the tasks/ that ships with the binary, not ./tasks */
        char rel[sizeof cfg.eval_tasks_dir], abs[PATH_MAX];
        cli_install_path("tasks", rel, sizeof rel);
        /* recorded in the run's config.json: absolute, so --resume works from anywhere */
        snprintf(cfg.eval_tasks_dir, sizeof cfg.eval_tasks_dir, "%s",
                 realpath(rel, abs) && strlen(abs) < sizeof cfg.eval_tasks_dir ? abs : rel);
    }

    train_memory mem;
    if (trainer_data_open_shards(&data, &cfg, &d) ||
        (cfg.eval_every > 0 && trainer_eval_create(&eval_hook, &cfg, &d)) ||
        trainer_memory_estimate(&cfg, &mem, &d)) {
        exit_code = cli_diag_error(&d);
        goto done;
    }
    trainer_memory_add_eval(&mem, cfg.eval_every > 0 ? &eval_hook : NULL);
    if (train_same_data(&data, &d) ||   /* before rank 0 makes the run directory */
        (!a.resume && cli_dist_same_model(cfg.model, &d))) {
        exit_code = cli_diag_error(&d);
        goto done;
    }
    if (cfg.qat && cfg.bf16_warmup_steps >= cfg.steps) {   /* it would never quantize */
        exit_code = cli_error("%s: bf16_warmup_steps %ld >= steps %ld with qat true: the run "
                              "would end before QAT starts; lower bf16_warmup_steps (e.g. "
                              "--bf16-warmup-steps %ld), raise steps, or set qat=false",
                              a.resume ? snap : a.config, cfg.bf16_warmup_steps, cfg.steps,
                              cfg.steps / 2);
        goto done;
    }
    trainer_options opt = {a.resume, 0, cfg.eval_every > 0 ? &eval_hook : NULL};
    opt.mem_limit_bytes = cfg.max_memory_gb > 0 ? (size_t)(cfg.max_memory_gb * 1073741824.0)
                                                : train_mem_available();
    if (trainer_create(&t, &cfg, &data, &opt, &d)) {
        exit_code = cli_diag_error(&d);
        goto done;
    }
    train_progress pr;
    train_progress_init(&pr, a.quiet ? NULL : stdout, isatty(STDOUT_FILENO), trainer_config(t));
    train_progress_start(&pr, t, &mem);
    train_signals_set(train_on_signal);

    int rc = 0, stop_sig = 0;
    const char *reason = "done";
    train_step_info info;
    while (!trainer_done(t)) {
        /* an interrupt on any rank stops every rank before the same step; the
         * agreed request is the signal (of the lowest rank that took one) */
        int agreed = dist_agree(train_stop_signal, 0, NULL, &d);
        if (agreed < 0) {   /* another rank failed since the last step */
            rc = agreed;
            break;
        }
        if (agreed > 0) {
            reason = "interrupted";
            stop_sig = agreed;
            break;
        }
        rc = trainer_step(t, &info, &d);
        train_progress_step(&pr, &info);
        if (rc)
            break;
    }
    train_progress_end_line(&pr);
    train_signals_set(SIG_DFL);
    if (rc) {
        /* a NaN or an alarm stop is a failed verdict (1), anything else unusable input (2) */
        cli_diag_error(&d);
        exit_code = rc == QS_ENAN || rc == QS_ESTOP ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
        goto done;
    }
    char run_dir[1100];
    snprintf(run_dir, sizeof run_dir, "%s", trainer_run_dir(t));
    long step = trainer_next_step(t);
    rc = trainer_finish(t, reason, &d);
    t = NULL;   /* trainer_finish destroyed it */
    if (rc) {
        exit_code = cli_diag_error(&d);
        goto done;
    }
    train_progress_finish(&pr, run_dir, step, &mem);
    if (!strcmp(reason, "interrupted")) {   /* not a finished run: say so, and in the status */
        int sig = stop_sig == SIGTERM ? SIGTERM : SIGINT;   /* this rank's or another's */
        cli_error("train: %s: stopped after %ld steps with a checkpoint (ckpt/step_%ld); "
                  "continue with --resume %s", sig == SIGTERM ? "SIGTERM" : "SIGINT", step, step,
                  run_dir);
        exit_code = 128 + sig;
    }

done:
    trainer_destroy(t);
    trainer_eval_destroy(&eval_hook);
    trainer_data_close(&data);
    train_args_free(&a);
    return exit_code;
}
