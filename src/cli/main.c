/* main.c: subcommand dispatch.  The only place the program exits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "qs/cpu.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/version.h"

static const struct {
    const char *name, *summary;
    int (*fn)(int, char **);
} commands[] = {
#define QS_CMD(name, summary) {#name, summary, cmd_##name},
#include "commands.def"
#undef QS_CMD
};

static void usage(FILE *f)
{
    fprintf(f, "qatscope %s: HiF8 W8A8 QAT toolkit\n\nusage: qatscope COMMAND [ARGS...]\n\n",
            QS_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'qatscope COMMAND --help' describes a command.\n");
}

/* What a command printed must have reached stdout: a full disk or a closed pipe
 * (`satstat --json > /dev/full`) is an error, not a silent success. */
static int main_stdout_flushed(int rc)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return rc;
    int e = errno;
    cli_error("stdout: write failed: %s", strerror(e ? e : EIO));
    return rc ? rc : CLI_EXIT_USAGE;
}

static int main_dispatch(int argc, char **argv);

int main(int argc, char **argv)
{
    return main_stdout_flushed(main_dispatch(argc, argv));
}

static int main_dispatch(int argc, char **argv)
{
    matmul_blas_threads();   /* one pool of threads: OpenMP's (qs/matmul.h) */
    const char *cpu = getenv("QS_CPU");
    if (cpu && *cpu) {
        int level = cpu_level_parse(cpu);
        if (level < 0)
            return cli_error("QS_CPU: expected scalar|avx2|avx512|avx512bf16, got '%s'", cpu);
        cpu_limit(level);
    }
    const char *huge = getenv("QS_HUGEPAGES");
    if (huge && *huge) {
        if (strcmp(huge, "0") && strcmp(huge, "1"))
            return cli_error("QS_HUGEPAGES: expected 0 or 1, got '%s'", huge);
        qs_mem_set_hugepages(huge[0] == '1');
    }
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version"))
        return cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name))
            continue;
        /* train and eval run as one job under mpirun (cli_dist.c); the others
         * stay single-process programs */
        if (strcmp(argv[1], "train") && strcmp(argv[1], "eval")) {
            /* several ranks of a one-process command: the job's train/eval ranks
             * would wait for this one in their collectives forever */
            const char *ranks = getenv("OMPI_COMM_WORLD_SIZE"),
                       *rank = getenv("OMPI_COMM_WORLD_RANK");
            if (ranks && atoi(ranks) > 1 && rank && strcmp(rank, "0"))
                return CLI_EXIT_USAGE;   /* one line, rank 0's */
            if (ranks && atoi(ranks) > 1)
                return cli_error("%s: a one-process command, run here as one of %s mpirun ranks "
                                 "(only train and eval run as one job); run it without mpirun",
                                 argv[1], ranks);
            return commands[i].fn(argc - 1, argv + 1);
        }
        int rc = cli_dist_begin(&argc, &argv);
        if (!rc)
            rc = commands[i].fn(argc - 1, argv + 1);
        return cli_dist_end(rc);
    }
    return cli_error("unknown command '%s' (argument 1); run 'qatscope --help'", argv[1]);
}
