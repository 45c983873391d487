/* cli.h: shared helpers for the subcommands (src/cli only).
 *
 * Exit codes: 0 success; 1 a verdict that failed (gate regression, alarm stop);
 * 2 unusable input (bad flag, bad file, missing data).  Errors are ONE line on
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

/* Several ranks (cli_dist.c): train and eval run as one job under mpirun.
 * cli_dist_begin: dist_init + the same-build / same-command-line agreement (an
 * exit status, or 0).  cli_dist_end: the closing agreement, rank 0 prints the
 * job's one error line, dist_finalize; returns the exit status for every rank.
 * cli_dist_keep_error: 1 when the line was kept for that (several ranks). */
#include <stdint.h>
int cli_dist_begin(int *argc, char ***argv);
int cli_dist_end(int exit_status);
int cli_dist_keep_error(const char *line);
uint64_t cli_hash64(const void *data, size_t bytes);   /* first 64 bits of SHA-256 */

/* Subcommand entry points (one cmd_<verb>.c each), listed in commands.def. */
#define QS_CMD(name, summary) int cmd_##name(int argc, char **argv);
#include "commands.def"
#undef QS_CMD

#endif
