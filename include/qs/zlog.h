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

#endif
