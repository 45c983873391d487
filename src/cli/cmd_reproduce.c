/* cmd_reproduce.c: qatscope reproduce [--out DIR] [--quick] [--runs LIST] [--lr-sweep LRS]
 *                                     [--threads N] [--seed S] [--tasks-dir DIR]
 *
 * The paper's eight-run study at small scale, end to end (src/repro/): fact
 * world -> base model with knowledge (cached) -> the grid of continued-
 * pretraining runs with in-loop alarms (each cached) -> end-of-run benchmark
 * and gate -> DIR/REPORT.md, report.json, summary.png.  Thin wiring: options,
 * threads, progress lines, and the shipped files it reads (tasks/fact_probe.json,
 * the bundled tokenizer data/demo/model) found in the binary's tree as demo and
 * eval find theirs, so it runs from any directory.  Exit 0 when the report is
 * written (whatever its verdicts), 2 on unusable input or a failed step.
 */
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "qs/matmul.h"
#include "qs/repro.h"

static void reproduce_usage(FILE *f)
{
    fprintf(f,
            "usage: qatscope reproduce [--out DIR] [--quick] [--runs LIST] [--lr-sweep LRS]\n"
            "                          [--threads N] [--seed S] [--tasks-dir DIR]\n"
            "  --out DIR      where everything goes (default build/reproduce; build/reproduce-quick\n"
            "                 with --quick); the base model and finished runs are reused\n"
            "  --quick        smaller world, shorter runs (the full scale's model): the same\n"
            "                 pipeline and checklist in a few minutes (CI)\n"
            "  --runs LIST    comma-separated grid runs by number (1..8, 7s, 8s) or name;\n"
            "                 default all; claims whose runs are missing are 'not assessed'\n"
            "  --lr-sweep LRS also BF16 runs at these lrs (comma-separated), reported as the\n"
            "                 sweep that picks the high lr (the lr at which BF16 forgets)\n"
            "  --threads N    OpenMP and OpenBLAS threads (default: all)\n"
            "  --seed S       world, init, data order and spikes (default 1)\n"
            "  --tasks-dir D  directory of fact_probe.json (default: the tasks/ of the\n"
            "                 qatscope tree this binary is in, else ./tasks)\n"
            "Writes DIR/REPORT.md, DIR/report.json, DIR/summary.png (and DIR/timing.json).\n");
}

static void reproduce_log(void *user, const char *line)
{
    (void)user;
    printf("%s\n", line);
    fflush(stdout);
}

int cmd_reproduce(int argc, char **argv)
{
    repro_opts o;
    repro_opts_default(&o);
    o.log = reproduce_log;
    const char *out = NULL;
    long threads = 0, seed = 1;
    int tasks_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            reproduce_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--quick")) {
            o.quick = 1;
            continue;
        }
        if (!cli_flag_is(a, "--out") && !cli_flag_is(a, "--runs") && !cli_flag_is(a, "--threads") &&
            !cli_flag_is(a, "--lr-sweep") &&
            !cli_flag_is(a, "--seed") && !cli_flag_is(a, "--tasks-dir"))
            return cli_error("reproduce: unexpected argument '%s' (argument %d); see --help", a, i);
        if (!(v = cli_flag_value(argc, argv, &i)))
            return CLI_EXIT_USAGE;
        if (cli_flag_is(a, "--out"))
            out = v;
        else if (cli_flag_is(a, "--runs"))
            o.runs = v;
        else if (cli_flag_is(a, "--lr-sweep"))
            o.lr_sweep = v;
        else if (cli_flag_is(a, "--tasks-dir")) {
            o.tasks_dir = v;
            tasks_given = 1;
        } else if (cli_parse_long(a, v, cli_flag_is(a, "--seed") ? 0 : 1,
                                cli_flag_is(a, "--seed") ? 2147483647L : 1024,
                                cli_flag_is(a, "--seed") ? &seed : &threads))
            return CLI_EXIT_USAGE;
    }
    qs_diag d = {0};
    if (repro_opts_check(&o, &d))   /* before anything is built: it used to be minutes later */
        return cli_diag_error(&d);
    o.out_dir = out ? out : o.quick ? "build/reproduce-quick" : "build/reproduce";
    /* shipped files from the binary's tree, not the current directory (README
     * '### layout'); from the repository root the paths stay "tasks" and
     * "data/demo/model", so the cache keys of earlier studies still match */
    char tasks_dir[CLI_PATH_MAX], tok_dir[CLI_PATH_MAX];
    if (!tasks_given) {   /* a --tasks-dir given is taken as given */
        cli_install_path(o.tasks_dir, tasks_dir, sizeof tasks_dir);
        o.tasks_dir = tasks_dir;
    }
    cli_install_path(o.tokenizer_dir, tok_dir, sizeof tok_dir);
    o.tokenizer_dir = tok_dir;
    o.seed = (uint64_t)seed;
    if (threads) {
#ifdef _OPENMP
        omp_set_num_threads((int)threads);
#endif
    }
    if (repro_study_run(&o, &d))
        return cli_diag_error(&d);
    printf("report: %s/REPORT.md (report.json, summary.png)\n", o.out_dir);
    return 0;
}
