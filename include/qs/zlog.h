/* zlog.h: append-only logs of JSON lines, zstd-framed.
 *
 * Writer: records (one line each, no '\n' inside) are buffered; zlog_flush()
 * compresses everything buffered since the last flush into ONE complete zstd
 * frame and writes it.  A file is therefore a sequence of complete frames, which
 * `zstdcat` reads as one stream, and a process killed mid-write loses at most
 * the frame being written: every earlier record is intact.
 * With ZLOG_PLAIN the file is written uncompressed (for .jsonl paths).
 * With ZLOG_ATOMIC the file appears under its name only at zlog_close() (tmp + rename).
 *
 * Every frame carries a checksum of its content (frames written before it did
 * still read).
 *
 * Reader: reads plain text or zstd (detected by the frame magic), returns complete
 * lines one by one; a zstd frame's lines only once the whole frame has decoded and
 * its checksum matched, so damage is never handed on as altered records: a
 * damaged frame is QS_EFORMAT ("zstd frame at byte N is corrupt"), after the
 * records of the frames before it.  A file that ends inside a frame or inside a
 * line is reported once, after the last complete line, as QS_ETRUNC (so callers
 * can keep the data and still say the log was cut).  A .zst file that is neither
 * zstd nor text (control bytes) has a damaged magic: QS_EFORMAT.
 */
#ifndef QS_ZLOG_H
#define QS_ZLOG_H

#include <stddef.h>

#include "qs/err.h"

enum {
    ZLOG_TRUNCATE = 0,   /* create or truncate */
    ZLOG_APPEND = 1,     /* append new frames to an existing file */
    ZLOG_ATOMIC = 2,     /* write to a temp file, rename at close */
    ZLOG_PLAIN = 4,      /* no compression */
};

typedef struct zlog_writer zlog_writer;

int zlog_writer_create(zlog_writer **out, const char *path, int flags, qs_diag *d);
/* Buffer one record; '\n' is appended.  Never writes to disk by itself unless the
 * buffer passes 4 MiB (then it flushes a frame). */
int zlog_write(zlog_writer *w, const char *line, size_t len, qs_diag *d);
int zlog_flush(zlog_writer *w, qs_diag *d);    /* one frame + fflush */
int zlog_close(zlog_writer *w, qs_diag *d);    /* flush, close (rename if atomic), free */
void zlog_writer_destroy(zlog_writer *w);      /* abandon: close without flushing; NULL ok */

typedef struct zlog_reader zlog_reader;

int zlog_reader_create(zlog_reader **out, const char *path, qs_diag *d);
/* Next complete line (without '\n', NUL-terminated, valid until the next call).
 * Returns 1 and sets *line and *len, 0 at a clean end, or a negative code:
 * QS_ETRUNC after the last complete line when the file was cut, QS_EFORMAT on
 * corrupt data.  lineno (may be NULL) gets the 1-based line number. */
int zlog_next(zlog_reader *r, const char **line, size_t *len, long *lineno, qs_diag *d);
void zlog_reader_destroy(zlog_reader *r);
/* 1 when the file is zstd frames (the magic), 0 when it is read as plain text */
int zlog_reader_is_zstd(const zlog_reader *r);

/* Resume: rewrite the log at path (plain or zstd) keeping only the complete lines
 * for which keep(ctx, line, len) returns non-zero (line is not NUL-terminated),
 * in order.  Zstd frames whose lines all stay are kept byte for byte, so the
 * decompressed text is exactly what a run that never wrote the dropped lines has;
 * an incomplete last frame or line (a killed writer) is dropped; a corrupt frame
 * is QS_EFORMAT naming its byte offset.  Atomic (tmp + rename).  A missing file is
 * fine (0, nothing written).  src/base/zlog_filter.c. */
typedef int (*zlog_keep_fn)(void *ctx, const char *line, size_t len);
int zlog_filter(const char *path, zlog_keep_fn keep, void *ctx, qs_diag *d);
/* Field peeks for keep functions, without parsing the line: the first `"key":`
 * anywhere in line[0..len) followed by an integer (1 and *out) or by the JSON
 * string value (1); 0 otherwise.  Our writers put "step" and "type" on the top
 * level and never use them as names inside. */
int zlog_line_long(const char *line, size_t len, const char *key, long *out);
int zlog_line_string_is(const char *line, size_t len, const char *key, const char *value);

#endif
