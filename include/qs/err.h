/* err.h: error codes and diagnostics shared by every module.
 *
 * Convention (libuv style): functions return int, 0 on success and a negative
 * QS_E* code on failure.  The code says WHAT went wrong; a qs_diag filled by
 * the failing function says WHERE (file, line or byte offset) and gives one
 * human-readable sentence.  The library never prints and never exits; the CLI
 * turns a diag into one line on stderr:  "qatscope: PATH:LINE: message".
 *
 * Checklist: a new code goes at the END of the enum (values reach scripts via
 * exit paths and logs) and gets a row in err.c's table.
 */
#ifndef QS_ERR_H
#define QS_ERR_H

#include <stddef.h>

enum {
    QS_OK = 0,
    QS_ENOMEM = -1,     /* allocation failed */
    QS_EIO = -2,        /* read/write/open failed (errno in the diag text) */
    QS_EFORMAT = -3,    /* malformed input file */
    QS_EINVAL = -4,     /* invalid argument or option value */
    QS_ERANGE = -5,     /* value out of the supported range */
    QS_ESHAPE = -6,     /* tensor shape mismatch */
    QS_EUNSUPPORTED = -7, /* recognised but not supported (architecture, dtype) */
    QS_ENOTFOUND = -8,  /* missing file, tensor or key */
    QS_ENAN = -9,       /* NaN or Inf where a finite value is required */
    QS_ETRUNC = -10,    /* input ends before a complete record */
    QS_ESTOP = -11,     /* run stopped on request (alarm, signal) */
};

#define QS_DIAG_PATH_MAX 512
#define QS_DIAG_MSG_MAX 512

/* Where an error happened.  Zero-initialise; diag_set() fills it. */
typedef struct qs_diag {
    int code;                         /* the QS_E* code last set */
    char path[QS_DIAG_PATH_MAX];      /* file the error is about, or "" */
    long line;                        /* 1-based line (or record) number, -1 if none */
    char msg[QS_DIAG_MSG_MAX];        /* one sentence, no trailing newline */
} qs_diag;

/* Static string for a code; never allocates, unknown codes give "unknown error". */
const char *qs_strerror(int code);

/* Fill d (may be NULL) and return code, so callers write
 *   return diag_set(d, QS_EFORMAT, path, lineno, "expected %d fields, found %d", a, b);
 * path may be NULL; line < 0 means "no line". */
int diag_set(qs_diag *d, int code, const char *path, long line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Format a diag as one line "PATH:LINE: msg" (parts omitted when absent) into buf. */
void diag_format(const qs_diag *d, char *buf, size_t buf_bytes);

/* A diag about a file under a temporary name (OUT.tmp.<pid>/x, .tmp.<pid>.results.json)
 * names the final one instead: d->path equal to `from`, or below it as a
 * directory, gets `to` in its place (unchanged if the result would not fit). */
void diag_rebase(qs_diag *d, const char *from, const char *to);

#endif
