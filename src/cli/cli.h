/* cli.h: shared helpers for the subcommands (src/cli only).
 *
 * Exit codes: 0 success; 1 a verdict that failed (gate regression, alarm stop);
 * 2 unusable input (bad flag, bad file, missing data); 128 + signal (130 SIGINT,
 * 143 SIGTERM) a train run stopped by that signal.  Errors are ONE line on
 * stderr, "qatscope: ...", naming the offending token, file or position.
 */
#ifndef QS_CLI_H
#define QS_CLI_H

#include <stddef.h>

#include "qs/err.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* Print "qatscope: <msg>" to stderr; returns CLI_EXIT_USAGE. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print a library diag as one line; returns CLI_EXIT_USAGE. */
int cli_diag_error(const qs_diag *d);

/* Typed flag values; on failure print "qatscope: FLAG: expected ..., got 'VAL'"
 * and return CLI_EXIT_USAGE, else 0. */
int cli_parse_long(const char *flag, const char *val, long min, long max, long *out);
int cli_parse_double(const char *flag, const char *val, double min, double max, double *out);

/* Value of the option at argv[*i] ("--flag VALUE" or "--flag=VALUE").  Returns
 * the value and advances *i past it, or NULL after printing a missing-value error. */
const char *cli_flag_value(int argc, char **argv, int *i);
/* 1 if argv[i] is exactly `flag` or starts with "flag=". */
int cli_flag_is(const char *arg, const char *flag);

/* Load RUN_DIR/quant.jsonl.zst into run (path gets the file read), warn on a
 * truncated log ("<what> the complete steps"), apply --match.  0 or an exit code
 * (run already freed). */
struct qlog_run;
/* The arguments every run-log command takes: one RUN_DIR, --match PATTERN,
 * --phase warmup|qat|all (select starts at the command's default). */
typedef struct cli_run_args {
    const char *dir, *match;
    int select;
} cli_run_args;
/* Parses argv[*i] when it is one of those (advancing *i past a value) or an
 * unknown option / extra argument (an error naming `cmd`): 0 when consumed,
 * -1 when argv[*i] is not for it, else an exit code. */
int cli_run_arg(const char *cmd, int argc, char **argv, int *i, cli_run_args *a);
int cli_run_load(const char *dir, const char *match, const char *what, struct qlog_run *run,
                 char *path, size_t path_bytes);

/* A file or folder that ships with qatscope ("tasks", "data/demo/model"): REL in the
 * tree the binary lives in (the nearest of the three directories above the
 * binary's own that holds REL: bin/ and build/<kind>/bin/ both work), written to out
 * relative to the current directory when below it, else absolute.  0 when found;
 * 1 when the binary's tree lacks it and out is REL itself (the current directory). */
int cli_install_path(const char *rel, char *out, size_t n);

/* Output files published together (outfile.c).  cli_outputs_add, before any
 * work: creates missing parent directories, refuses a directory name and proves
 * the directory writable (one error line naming FLAG, exit code returned).  The
 * command then writes output i to cli_outputs_tmp(o, i) (a hidden name beside the
 * final one, same ending) and calls cli_outputs_commit, which renames every
 * output into place only when all were written (else none; temps removed);
 * cli_outputs_discard removes the temps on any other failure. */
#define CLI_PATH_MAX 1024
#define CLI_OUTPUTS_MAX 4
typedef struct cli_outputs {
    int n;
    struct {
        const char *flag, *path;
        char tmp[CLI_PATH_MAX + 64];
    } f[CLI_OUTPUTS_MAX];
} cli_outputs;
int cli_outputs_add(cli_outputs *o, const char *flag, const char *path);
const char *cli_outputs_tmp(const cli_outputs *o, int i);
int cli_outputs_commit(cli_outputs *o);
void cli_outputs_discard(cli_outputs *o);

/* Subcommand entry points (one cmd_<verb>.c each), listed in commands.def. */
#define QS_CMD(name, summary) int cmd_##name(int argc, char **argv);
#include "commands.def"
#undef QS_CMD

#endif
