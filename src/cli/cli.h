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
#include <sys/types.h>

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

/* A command's options as a table, for cli_args_parse:
 *   const cli_opt opts[] = {{"--model", CLI_OPT_STR, .out = &model},
 *                           {"-n", CLI_OPT_LONG, .out = &n, .min = 0, .max = 1L << 24},
 *                           {"--top-p", CLI_OPT_DOUBLE, .out = &top_p, .dmin = 1e-9, .dmax = 1},
 *                           {"--json", CLI_OPT_SWITCH, .out = &json}};
 * Values come as "--flag VALUE" or "--flag=VALUE"; a switch sets its int to 1. */
enum { CLI_OPT_STR, CLI_OPT_LONG, CLI_OPT_DOUBLE, CLI_OPT_SWITCH };
typedef struct cli_opt {
    const char *flag;
    int type;
    void *out;          /* const char **, long *, double * or int * (switch) */
    long min, max;      /* CLI_OPT_LONG range */
    double dmin, dmax;  /* CLI_OPT_DOUBLE range */
} cli_opt;
/* Called for an argument the table does not know (argv[*i]; advance *i past any
 * values it takes): 0 when it used it, -1 when it is not its, else an exit code. */
typedef int (*cli_arg_fn)(void *ctx, int argc, char **argv, int *i);
/* Parses argv[1..argc) of `cmd`: --help/-h prints usage to stdout and returns -1
 * (the command then exits 0); options by the table; other arguments to other()
 * (may be NULL).  Anything left is one error line, "CMD: unknown option '--x'
 * (argument N); see 'qatscope CMD --help'" (or "unexpected argument" for a
 * non-option), and its exit code is returned; 0 when all was used. */
int cli_args_parse(const char *cmd, const char *usage, int argc, char **argv, const cli_opt *opts,
                   size_t n_opts, cli_arg_fn other, void *ctx);

/* Value of the option at argv[*i] ("--flag VALUE" or "--flag=VALUE").  Returns
 * the value and advances *i past it, or NULL after printing a missing-value error. */
const char *cli_flag_value(int argc, char **argv, int *i);
/* 1 if argv[i] is exactly `flag` or starts with "flag=". */
int cli_flag_is(const char *arg, const char *flag);
/* 1 if arg is one of flags (NULL-terminated; cli_flag_is).  Hand-written parsers ask
 * it before cli_flag_value, so an unknown option is named as unknown (with its own
 * argument number) instead of taking the next argument or a "missing value". */
int cli_flag_in(const char *arg, const char *const *flags);

/* Load RUN_DIR/quant.jsonl.zst into run (path gets the file read), warn on a
 * truncated log ("<what> the complete steps"), apply --match.  0 or an exit code
 * (run already freed). */
struct qlog_run;
/* The arguments every run-log command takes: one RUN_DIR, --match PATTERN,
 * --phase warmup|qat|all (select starts at the command's default). */
typedef struct cli_run_args {
    const char *cmd;   /* the command, for error lines */
    const char *dir, *match;
    int select;
} cli_run_args;
/* A cli_arg_fn (ctx: cli_run_args): argv[*i] when it is one of those (advancing
 * *i past a value), or an extra argument (an error naming the command): 0 when
 * consumed, -1 when argv[*i] is not for it, else an exit code. */
int cli_run_arg(void *ctx, int argc, char **argv, int *i);
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
 * cli_outputs_discard removes the temps on any other failure.  A symbolic link
 * stays a link (its target is replaced); a device, FIFO or socket (/dev/stdout, a
 * pipe) is written in place, as a shell redirection would: cli_outputs_tmp is the
 * path itself, and a failed write is the writer's error. */
#define CLI_PATH_MAX 1024
#define CLI_OUTPUTS_MAX 4
typedef struct cli_outputs {
    int n;
    struct {
        const char *flag, *path;     /* path: the final name (a link's target) */
        char tmp[CLI_PATH_MAX + 64];
        char real[CLI_PATH_MAX];     /* the target of a symbolic link */
        int direct;                  /* a device, FIFO or socket: written in place */
        dev_t dir_dev;               /* the final name's directory and base name: */
        ino_t dir_ino;               /* two outputs naming one file are refused */
        const char *base;
    } f[CLI_OUTPUTS_MAX];
} cli_outputs;
int cli_outputs_add(cli_outputs *o, const char *flag, const char *path);
/* An output that is an existing input file (the same inode: any spelling, a
 * link) is refused, naming both flags; 0 otherwise (also when either is absent). */
int cli_output_not_input(const char *flag, const char *path, const char *in_flag,
                         const char *input);
/* The same for every file below the input directory dir (model, data, tasks
 * files; six levels deep at most, linked directories not followed): an output
 * that is one of them is refused naming it and in_flag; 0 otherwise. */
int cli_output_not_under(const char *flag, const char *path, const char *in_flag,
                         const char *dir);
/* A picture's output: refused when it names an existing, non-empty file that is
 * not a PNG (a log, a config), which a PNG would replace; 0 otherwise. */
int cli_output_png_or_new(const char *flag, const char *path);
const char *cli_outputs_tmp(const cli_outputs *o, int i);
int cli_outputs_commit(cli_outputs *o);
void cli_outputs_discard(cli_outputs *o);

/* Subcommand entry points (one cmd_<verb>.c each), listed in commands.def. */
#define QS_CMD(name, summary) int cmd_##name(int argc, char **argv);
#include "commands.def"
#undef QS_CMD

#endif
