/* args.c: typed flag parsing with one-line errors (see cli.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_error(const char *fmt, ...)
{
    char line[QS_DIAG_PATH_MAX + QS_DIAG_MSG_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
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
    if (errno || end == val || *end || v < min || v > max)
        return cli_error("%s: expected an integer in [%ld, %ld], got '%s'", flag, min, max, val);
    *out = v;
    return 0;
}

int cli_parse_double(const char *flag, const char *val, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || !(v >= min && v <= max))
        return cli_error("%s: expected a number in [%g, %g], got '%s'", flag, min, max, val);
    *out = v;
    return 0;
}

int cli_flag_is(const char *arg, const char *flag)
{
    size_t n = strlen(flag);
    return strncmp(arg, flag, n) == 0 && (arg[n] == 0 || arg[n] == '=');
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
