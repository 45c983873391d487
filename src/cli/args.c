/* args.c: typed flag parsing with one-line errors (see cli.h). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Control characters from the input (a newline in a template, a label, a flag's
 * value) written as escapes, so an error stays one line and no input can print
 * a line of its own ("\nqatscope: ..."). */
static void cli_error_escape(char *line, size_t cap)
{
    char out[QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 64];
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)line; *p && k + 5 < sizeof out; p++) {
        if (*p >= 0x20 && *p != 0x7f) {
            out[k++] = (char)*p;
            continue;
        }
        const char *e = *p == '\n' ? "\\n" : *p == '\r' ? "\\r" : *p == '\t' ? "\\t" : NULL;
        k += (size_t)(e ? snprintf(out + k, sizeof out - k, "%s", e)
                        : snprintf(out + k, sizeof out - k, "\\x%02X", *p));
    }
    out[k] = 0;
    snprintf(line, cap, "%s", out);
}

int cli_error(const char *fmt, ...)
{
    char line[QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cli_error_escape(line, sizeof line);
    if (!cli_dist_keep_error(line))   /* several ranks: rank 0 prints it at the end */
        fprintf(stderr, "qatscope: %s\n", line);
    return CLI_EXIT_USAGE;
}

int cli_diag_error(const qs_diag *d)
{
    char buf[QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 32];
    diag_format(d, buf, sizeof buf);
    return cli_error("%s", buf);
}

int cli_parse_long(const char *flag, const char *val, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < min || v > max || isspace((unsigned char)*val))
        return cli_error("%s: expected an integer in [%ld, %ld], got '%s'", flag, min, max, val);
    *out = v;
    return 0;
}

int cli_parse_double(const char *flag, const char *val, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(val, &end);   /* the value as typed: no leading blanks either */
    /* decimal only: strtod read "0x10" as 16 and "0x1p-3" as 0.125 (inf and nan fall
     * outside every range) */
    if (errno || end == val || *end || !(v >= min && v <= max) || isspace((unsigned char)*val) ||
        strpbrk(val, "xXpP"))
        return cli_error("%s: expected a decimal number in [%g, %g], got '%s'", flag, min, max,
                         val);
    *out = v;
    return 0;
}

int cli_flag_is(const char *arg, const char *flag)
{
    size_t n = strlen(flag);
    return strncmp(arg, flag, n) == 0 && (arg[n] == 0 || arg[n] == '=');
}

int cli_flag_in(const char *arg, const char *const *flags)
{
    for (; *flags; flags++)
        if (cli_flag_is(arg, *flags))
            return 1;
    return 0;
}

const char *cli_flag_value(int argc, char **argv, int *i)
{
    const char *eq = strchr(argv[*i], '=');
    if (eq && argv[*i][0] == '-')
        return eq + 1;
    if (*i + 1 >= argc) {
        cli_error("%s: missing value (argument %d)", argv[*i], *i);
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

/* the table's option named by arg, or NULL */
static const cli_opt *cli_opt_find(const cli_opt *opts, size_t n_opts, const char *arg)
{
    for (size_t k = 0; k < n_opts; k++)
        if (opts[k].type == CLI_OPT_SWITCH ? !strcmp(arg, opts[k].flag)
                                           : cli_flag_is(arg, opts[k].flag))
            return &opts[k];
    return NULL;
}

static int cli_opt_store(const cli_opt *o, int argc, char **argv, int *i)
{
    if (o->type == CLI_OPT_SWITCH) {
        *(int *)o->out = 1;
        return 0;
    }
    const char *v = cli_flag_value(argc, argv, i);
    if (!v)
        return CLI_EXIT_USAGE;
    if (o->type == CLI_OPT_LONG)
        return cli_parse_long(o->flag, v, o->min, o->max, o->out);
    if (o->type == CLI_OPT_DOUBLE)
        return cli_parse_double(o->flag, v, o->dmin, o->dmax, o->out);
    *(const char **)o->out = v;
    return 0;
}

int cli_args_parse(const char *cmd, const char *usage, int argc, char **argv, const cli_opt *opts,
                   size_t n_opts, cli_arg_fn other, void *ctx)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return -1;
        }
        const cli_opt *o = cli_opt_find(opts, n_opts, a);
        int rc = o ? cli_opt_store(o, argc, argv, &i) : other ? other(ctx, argc, argv, &i) : -1;
        if (rc > 0)
            return rc;
        if (rc == 0)
            continue;
        /* "-" (stdin) and negative numbers are not options */
        int option = a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9');
        return cli_error("%s: %s '%s' (argument %d); see 'qatscope %s --help'", cmd,
                         option ? "unknown option" : "unexpected argument", a, i, cmd);
    }
    return 0;
}
