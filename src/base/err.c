/* err.c: error strings and qs_diag helpers (see include/qs/err.h). */
#include "qs/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *qs_strerror(int code)
{
    switch (code) {
    case QS_OK: return "success";
    case QS_ENOMEM: return "out of memory";
    case QS_EIO: return "input/output error";
    case QS_EFORMAT: return "malformed input";
    case QS_EINVAL: return "invalid argument";
    case QS_ERANGE: return "value out of range";
    case QS_ESHAPE: return "shape mismatch";
    case QS_EUNSUPPORTED: return "unsupported";
    case QS_ENOTFOUND: return "not found";
    case QS_ENAN: return "NaN or Inf value";
    case QS_ETRUNC: return "truncated input";
    case QS_ESTOP: return "stopped";
    default: return "unknown error";
    }
}

int diag_set(qs_diag *d, int code, const char *path, long line, const char *fmt, ...)
{
    if (!d)
        return code;
    d->code = code;
    d->line = line;
    snprintf(d->path, sizeof d->path, "%s", path ? path : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    return code;
}

void diag_format(const qs_diag *d, char *buf, size_t buf_bytes)
{
    if (!buf_bytes)
        return;
    const char *msg = d->msg[0] ? d->msg : qs_strerror(d->code);
    if (d->path[0] && d->line >= 0)
        snprintf(buf, buf_bytes, "%s:%ld: %s", d->path, d->line, msg);
    else if (d->path[0])
        snprintf(buf, buf_bytes, "%s: %s", d->path, msg);
    else
        snprintf(buf, buf_bytes, "%s", msg);
}

void diag_rebase(qs_diag *d, const char *from, const char *to)
{
    size_t n = strlen(from);
    if (!d || !n || strncmp(d->path, from, n) || (d->path[n] && d->path[n] != '/'))
        return;
    char buf[QS_DIAG_PATH_MAX];
    int w = snprintf(buf, sizeof buf, "%s%s", to, d->path + n);
    if (w > 0 && (size_t)w < sizeof buf)
        memcpy(d->path, buf, (size_t)w + 1);
}
