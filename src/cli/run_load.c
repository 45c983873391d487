/* run_load.c: load a run's quant.jsonl.zst for the CLI commands that read it
 * (satstat, replay): a truncated log is a warning (the complete steps are used),
 * anything else one error line; --match narrows the quantizers. */
#include <stdio.h>

#include "cli.h"
#include "qs/qlog.h"

int cli_run_arg(void *ctx, int argc, char **argv, int *i)
{
    cli_run_args *a = ctx;
    const char *arg = argv[*i];
    if (cli_flag_is(arg, "--match"))
        return (a->match = cli_flag_value(argc, argv, i)) ? 0 : CLI_EXIT_USAGE;
    if (cli_flag_is(arg, "--phase")) {
        qs_diag d = {0};
        const char *v = cli_flag_value(argc, argv, i);
        if (!v)
            return CLI_EXIT_USAGE;
        return qlog_select_parse(v, &a->select, &d) ? cli_error("--phase: %s", d.msg) : 0;
    }
    if (arg[0] == '-')
        return -1;
    if (a->dir)
        return cli_error("%s: unexpected argument '%s' (argument %d), expected one RUN_DIR",
                         a->cmd, arg, *i);
    a->dir = arg;
    return 0;
}

int cli_run_load(const char *dir, const char *match, const char *what, qlog_run *run, char *path,
                 size_t path_bytes)
{
    qs_diag d = {0};
    int rc = qlog_read_run(dir, run, path, path_bytes, &d);
    if (rc == QS_ETRUNC) {
        char line[QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 32];
        diag_format(&d, line, sizeof line);
        fprintf(stderr, "qatscope: warning: %s (%s the complete steps)\n", line, what);
    } else if (rc) {
        qlog_run_free(run);
        return cli_diag_error(&d);
    }
    if (match && qlog_run_filter(run, match, &d)) {
        qlog_run_free(run);
        return cli_error("--match: %s: %s", path, d.msg);
    }
    return 0;
}
