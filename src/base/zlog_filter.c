/* zlog_filter.c: cut a log back to chosen lines, for --resume (see include/qs/zlog.h).
 *
 * A zstd log is a sequence of frames, one per flush.  The filter walks them with
 * ZSTD_findFrameCompressedSize: a frame whose lines are all kept is copied byte for
 * byte, one that loses some lines is re-compressed with the lines it keeps, one
 * that keeps none is dropped.  An incomplete last frame (a process killed while it
 * wrote) is dropped; any other damage is an error naming the byte offset, because
 * silently dropping data in the middle of a log is worse than refusing to resume.
 * A plain log is filtered line by line; an incomplete last line is dropped.
 * The result replaces the file atomically (tmp + rename).
 *
 * Memory: the whole file plus one decompressed frame; a frame that would
 * decompress to more than ZLOG_FILTER_FRAME_MAX bytes is refused (the writer
 * flushes every 4 MiB, so a real log never comes near it).
 */
#include <limits.h>
#include <string.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/zlog.h"

#define ZLOG_FILTER_FRAME_MAX ((size_t)256 << 20)
#define ZLOG_FILTER_LEVEL 3   /* zlog.c's ZLOG_LEVEL */

typedef struct zbuf {
    char *p;
    size_t len, cap;
} zbuf;

static int zbuf_reserve(zbuf *b, size_t more)
{
    if (b->cap - b->len >= more)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more)
        cap *= 2;
    char *np = qs_realloc(b->p, cap);
    if (!np)
        return QS_ENOMEM;
    b->p = np;
    b->cap = cap;
    return 0;
}

static int zbuf_put(zbuf *b, const void *p, size_t n)
{
    if (zbuf_reserve(b, n + 1))
        return QS_ENOMEM;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

/* Kept complete lines of text[0..n) appended to out; *all = every line kept and
 * the text ends with a newline (or is empty). */
static int filter_lines(const char *text, size_t n, zlog_keep_fn keep, void *ctx, zbuf *out,
                        int *all)
{
    *all = 1;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(text + i, '\n', n - i);
        if (!nl) {
            *all = 0;   /* cut last line: dropped */
            break;
        }
        size_t len = (size_t)(nl - (text + i));
        if (keep(ctx, text + i, len)) {
            if (zbuf_put(out, text + i, len + 1))
                return QS_ENOMEM;
        } else {
            *all = 0;
        }
        i += len + 1;
    }
    return 0;
}

/* One frame's text into *text (reused); QS_EFORMAT when it does not decode. */
static int frame_decode(ZSTD_DCtx *dc, const char *src, size_t n, zbuf *text, const char *path,
                        size_t at, qs_diag *d)
{
    text->len = 0;
    ZSTD_DCtx_reset(dc, ZSTD_reset_session_only);
    ZSTD_inBuffer ib = {src, n, 0};
    for (;;) {
        if (zbuf_reserve(text, 65536))
            return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
        ZSTD_outBuffer ob = {text->p + text->len, text->cap - text->len, 0};
        size_t ret = ZSTD_decompressStream(dc, &ob, &ib);
        if (ZSTD_isError(ret))
            return diag_set(d, QS_EFORMAT, path, -1, "the zstd frame at byte %zu is corrupt: %s",
                            at, ZSTD_getErrorName(ret));
        text->len += ob.pos;
        if (text->len > ZLOG_FILTER_FRAME_MAX)
            return diag_set(d, QS_EFORMAT, path, -1,
                            "the zstd frame at byte %zu holds more than %zu MiB of text", at,
                            ZLOG_FILTER_FRAME_MAX >> 20);
        if (ret == 0)
            return 0;   /* the frame ended (findFrameCompressedSize sized it) */
        if (ib.pos == ib.size && ob.pos < ob.size)
            return diag_set(d, QS_EFORMAT, path, -1, "the zstd frame at byte %zu is incomplete", at);
    }
}

static int filter_frames(const char *buf, size_t n, zlog_keep_fn keep, void *ctx, zbuf *out,
                         const char *path, qs_diag *d)
{
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    /* a re-compressed frame is made as zlog.c makes one: same level, content checksum */
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    if (cc && (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, ZLOG_FILTER_LEVEL)) ||
               ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1)))) {
        ZSTD_freeCCtx(cc);
        cc = NULL;
    }
    zbuf text = {0}, kept = {0}, z = {0};
    int rc = dc ? 0 : diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    for (size_t off = 0; !rc && off < n;) {
        size_t fsz = ZSTD_findFrameCompressedSize(buf + off, n - off);
        if (ZSTD_isError(fsz)) {
            if (ZSTD_getErrorCode(fsz) == ZSTD_error_srcSize_wrong)
                break;   /* the frame a killed writer did not finish */
            rc = diag_set(d, QS_EFORMAT, path, -1, "the zstd frame at byte %zu is corrupt: %s",
                          off, ZSTD_getErrorName(fsz));
            break;
        }
        int all;
        kept.len = 0;
        if ((rc = frame_decode(dc, buf + off, fsz, &text, path, off, d)))
            break;
        if (filter_lines(text.p, text.len, keep, ctx, &kept, &all)) {
            rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory");
        } else if (all) {
            rc = zbuf_put(out, buf + off, fsz);
        } else if (kept.len) {
            size_t bound = ZSTD_compressBound(kept.len), zn;
            if (!(rc = zbuf_reserve(&z, bound))) {
                zn = cc ? ZSTD_compress2(cc, z.p, bound, kept.p, kept.len) : 0;
                rc = !cc || ZSTD_isError(zn)
                         ? diag_set(d, QS_EIO, path, -1, "zstd: %s",
                                    cc ? ZSTD_getErrorName(zn) : "no compression context")
                         : zbuf_put(out, z.p, zn);
            }
        }
        if (rc == QS_ENOMEM)
            rc = diag_set(d, rc, path, -1, "out of memory");
        off += fsz;
    }
    ZSTD_freeDCtx(dc);
    ZSTD_freeCCtx(cc);
    qs_free(text.p);
    qs_free(kept.p);
    qs_free(z.p);
    return rc;
}

int zlog_filter(const char *path, zlog_keep_fn keep, void *ctx, qs_diag *d)
{
    if (!fileio_exists(path))
        return 0;
    fileio_map m = {0};   /* raw bytes: fileio_read_all would decompress a .zst */
    int rc = fileio_map_open(&m, path, d);
    if (rc)
        return rc;
    const char *buf = (const char *)m.data;
    size_t n = m.bytes;
    static const unsigned char magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
    zbuf out = {0};
    int all;
    if (n >= 4 && memcmp(m.data, magic, 4) == 0)
        rc = filter_frames(buf, n, keep, ctx, &out, path, d);
    else if (filter_lines(buf, n, keep, ctx, &out, &all))
        rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    if (!rc)
        rc = fileio_write_atomic(path, out.p ? out.p : "", out.len, d);
    fileio_unmap(&m);
    qs_free(out.p);
    return rc;
}

/* The first `"key":` of the line, at any depth; NULL if absent. */
static const char *line_key(const char *line, size_t len, const char *key)
{
    size_t k = strlen(key);
    for (size_t i = 0; i + k + 3 <= len; i++)
        if (line[i] == '"' && !memcmp(line + i + 1, key, k) && line[i + 1 + k] == '"' &&
            line[i + 2 + k] == ':')
            return line + i + 3 + k;
    return NULL;
}

int zlog_line_long(const char *line, size_t len, const char *key, long *out)
{
    const char *p = line_key(line, len, key), *end = line + len;
    if (!p)
        return 0;
    int neg = p < end && *p == '-';
    p += neg;
    if (p >= end || *p < '0' || *p > '9')
        return 0;
    long v = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (v > (LONG_MAX - (*p - '0')) / 10)
            return 0;   /* does not fit: not a step we wrote */
        v = v * 10 + (*p - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

int zlog_line_string_is(const char *line, size_t len, const char *key, const char *value)
{
    const char *p = line_key(line, len, key);
    size_t v = strlen(value);
    return p && (size_t)(line + len - p) >= v + 2 && p[0] == '"' && !memcmp(p + 1, value, v) &&
           p[1 + v] == '"';
}
