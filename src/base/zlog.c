/* zlog.c: zstd-framed JSON-lines writer and reader (see include/qs/zlog.h). */
#include "qs/zlog.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zstd.h>

#include "qs/fileio.h"
#include "qs/mem.h"

#define ZLOG_AUTOFLUSH_BYTES (4u << 20)
#define ZLOG_LEVEL 3

struct zlog_writer {
    FILE *f;
    afile af;           /* used when atomic */
    int flags;
    char *path;
    char *buf;          /* uncompressed records since the last flush */
    size_t len, cap;
    char *zbuf;         /* compressed frame */
    size_t zcap;
    ZSTD_CCtx *cctx;
};

int zlog_writer_create(zlog_writer **out, const char *path, int flags, qs_diag *d)
{
    *out = NULL;
    zlog_writer *w = qs_calloc(1, sizeof *w);
    if (!w)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    w->flags = flags;
    w->path = qs_strdup(path);
    if (!w->path) {
        qs_free(w);
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    }
    int rc = 0;
    if (flags & ZLOG_ATOMIC) {
        rc = afile_open(&w->af, path, d);
        w->f = w->af.f;
    } else {
        w->f = fopen(path, (flags & ZLOG_APPEND) ? "ab" : "wb");
        if (!w->f)
            rc = diag_set(d, QS_EIO, path, -1, "cannot open for writing: %s", strerror(errno));
    }
    if (!rc && !(flags & ZLOG_PLAIN)) {
        w->cctx = ZSTD_createCCtx();
        if (!w->cctx)
            rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory creating zstd context");
        /* every frame carries a checksum of its content, so a damaged file is
         * reported as a corrupt frame, never handed on as altered records */
        else if (ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, ZLOG_LEVEL)) ||
                 ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1)))
            rc = diag_set(d, QS_EIO, path, -1, "zstd: cannot set the frame parameters");
    }
    if (rc) {
        zlog_writer_destroy(w);
        return rc;
    }
    *out = w;
    return 0;
}

int zlog_write(zlog_writer *w, const char *line, size_t len, qs_diag *d)
{
    char *nb = qs_grow(w->buf, &w->cap, w->len + len + 1, 1, 65536);
    if (!nb)
        return diag_set(d, QS_ENOMEM, w->path, -1, "out of memory buffering log records");
    w->buf = nb;
    memcpy(w->buf + w->len, line, len);
    w->len += len;
    w->buf[w->len++] = '\n';
    if (w->len >= ZLOG_AUTOFLUSH_BYTES)
        return zlog_flush(w, d);
    return 0;
}

int zlog_flush(zlog_writer *w, qs_diag *d)
{
    if (w->len == 0)
        return fflush(w->f) ? diag_set(d, QS_EIO, w->path, -1, "flush failed") : 0;
    const void *out = w->buf;
    size_t out_len = w->len;
    if (!(w->flags & ZLOG_PLAIN)) {
        size_t need = ZSTD_compressBound(w->len);
        if (need > w->zcap) {
            char *nz = qs_realloc(w->zbuf, need);
            if (!nz)
                return diag_set(d, QS_ENOMEM, w->path, -1, "out of memory compressing log");
            w->zbuf = nz;
            w->zcap = need;
        }
        size_t z = ZSTD_compress2(w->cctx, w->zbuf, w->zcap, w->buf, w->len);
        if (ZSTD_isError(z))
            return diag_set(d, QS_EIO, w->path, -1, "zstd: %s", ZSTD_getErrorName(z));
        out = w->zbuf;
        out_len = z;
    }
    if (fwrite(out, 1, out_len, w->f) != out_len || fflush(w->f) != 0)
        return diag_set(d, QS_EIO, w->path, -1, "write failed: %s", strerror(errno));
    w->len = 0;
    return 0;
}

static void zlog_writer_free(zlog_writer *w)
{
    ZSTD_freeCCtx(w->cctx);
    qs_free(w->buf);
    qs_free(w->zbuf);
    qs_free(w->path);
    qs_free(w);
}

int zlog_close(zlog_writer *w, qs_diag *d)
{
    if (!w)
        return 0;
    int rc = zlog_flush(w, d);
    if (w->flags & ZLOG_ATOMIC) {
        if (rc)
            afile_abort(&w->af);
        else
            rc = afile_commit(&w->af, d);
    } else if (fclose(w->f) != 0 && !rc) {
        rc = diag_set(d, QS_EIO, w->path, -1, "close failed: %s", strerror(errno));
    }
    w->f = NULL;
    zlog_writer_free(w);
    return rc;
}

void zlog_writer_destroy(zlog_writer *w)
{
    if (!w)
        return;
    if (w->flags & ZLOG_ATOMIC)
        afile_abort(&w->af);
    else if (w->f)
        fclose(w->f);
    zlog_writer_free(w);
}

/* ---- reader ---- */

struct zlog_reader {
    FILE *f;
    char *path;
    int is_zstd;
    ZSTD_DStream *ds;
    unsigned long long consumed;    /* zstd input bytes decoded so far */
    unsigned long long frame_start; /* file offset of the frame being decoded */
    unsigned char *in;        /* raw input buffer */
    size_t in_len, in_pos, in_cap;
    int in_eof;
    char *text;               /* decompressed text not yet returned */
    size_t text_len, text_pos, text_cap;
    size_t text_ready;        /* zstd: text[0, text_ready) is from complete, verified frames */
    long lineno;
    int done;
};

int zlog_reader_create(zlog_reader **out, const char *path, qs_diag *d)
{
    *out = NULL;
    zlog_reader *r = qs_calloc(1, sizeof *r);
    if (!r)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    r->path = qs_strdup(path);
    r->in_cap = ZSTD_DStreamInSize();
    r->in = qs_malloc(r->in_cap);
    r->text_cap = 1 << 16;
    r->text = qs_malloc(r->text_cap + 1);
    if (!r->path || !r->in || !r->text) {
        zlog_reader_destroy(r);
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    }
    r->f = fopen(path, "rb");
    if (!r->f) {
        int e = errno;
        zlog_reader_destroy(r);
        return diag_set(d, e == ENOENT ? QS_ENOTFOUND : QS_EIO, path, -1, "cannot open: %s",
                        strerror(e));
    }
    r->in_len = fread(r->in, 1, r->in_cap, r->f);
    r->in_eof = r->in_len < r->in_cap;
    static const unsigned char magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
    r->is_zstd = r->in_len >= 4 && memcmp(r->in, magic, 4) == 0;
    /* A .zst name without the magic is read as plain JSON lines (the contract), but
     * JSON text has no raw control bytes: with one, the magic itself was damaged. */
    size_t name_len = strlen(path), ctl = 0;
    if (!r->is_zstd && name_len > 4 && !strcmp(path + name_len - 4, ".zst"))
        for (size_t i = 0; i < r->in_len && !ctl; i++)
            ctl = r->in[i] < 0x20 && r->in[i] != '\n' && r->in[i] != '\r' && r->in[i] != '\t';
    if (ctl) {
        zlog_reader_destroy(r);
        return diag_set(d, QS_EFORMAT, path, -1,
                        "neither zstd data nor JSON text: the zstd frame magic 28 b5 2f fd is "
                        "missing (the file was damaged)");
    }
    if (r->is_zstd) {
        r->ds = ZSTD_createDStream();
        if (!r->ds) {
            zlog_reader_destroy(r);
            return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
        }
    }
    *out = r;
    return 0;
}

/* A zstd frame's text is released only once the frame is complete (its checksum,
 * when it has one, verified): a frame cut short or damaged yields no records. */
#define ZLOG_FRAME_TEXT_MAX (256u << 20)

static int reader_grow(zlog_reader *r, qs_diag *d)
{
    if (r->text_cap - r->text_len >= 65536)
        return 0;
    if (r->text_len - r->text_ready > ZLOG_FRAME_TEXT_MAX)
        return diag_set(d, QS_EFORMAT, r->path, -1,
                        "zstd frame at byte %llu holds more than %u MiB of text: not a log frame",
                        r->frame_start, ZLOG_FRAME_TEXT_MAX >> 20);
    char *nt = qs_realloc(r->text, r->text_cap * 2 + 1);
    if (!nt)
        return diag_set(d, QS_ENOMEM, r->path, -1, "out of memory reading log");
    r->text = nt;
    r->text_cap *= 2;
    return 0;
}

/* Append more text; returns 1 if text was added (zstd: a complete frame's), 0 at
 * end of input, <0 on error. */
static int reader_fill(zlog_reader *r, qs_diag *d)
{
    /* compact */
    if (r->text_pos > 0) {
        memmove(r->text, r->text + r->text_pos, r->text_len - r->text_pos);
        r->text_len -= r->text_pos;
        r->text_ready -= r->text_ready >= r->text_pos ? r->text_pos : r->text_ready;
        r->text_pos = 0;
    }
    for (;;) {
        if (r->in_pos == r->in_len && !r->in_eof) {
            r->in_len = fread(r->in, 1, r->in_cap, r->f);
            r->in_pos = 0;
            if (r->in_len < r->in_cap)
                r->in_eof = 1;
            if (ferror(r->f))
                return diag_set(d, QS_EIO, r->path, -1, "read error");
        }
        int rc = reader_grow(r, d);
        if (rc)
            return rc;
        if (!r->is_zstd) {
            size_t n = r->in_len - r->in_pos, room = r->text_cap - r->text_len;
            if (n == 0)
                return 0;
            if (n > room)
                n = room;
            memcpy(r->text + r->text_len, r->in + r->in_pos, n);
            r->text_len += n;
            r->in_pos += n;
            return 1;
        }
        ZSTD_inBuffer ib = {r->in, r->in_len, r->in_pos};
        ZSTD_outBuffer ob = {r->text + r->text_len, r->text_cap - r->text_len, 0};
        int no_input = ib.pos == ib.size && r->in_eof;
        size_t ret = ZSTD_decompressStream(r->ds, &ob, &ib);
        if (ZSTD_isError(ret))
            return diag_set(d, QS_EFORMAT, r->path, r->lineno + 1,
                            "zstd frame at byte %llu is corrupt (%s): the file was damaged; the "
                            "%ld record%s before it %s intact",
                            r->frame_start, ZSTD_getErrorName(ret), r->lineno,
                            r->lineno == 1 ? "" : "s", r->lineno == 1 ? "is" : "are");
        r->consumed += ib.pos - r->in_pos;
        r->in_pos = ib.pos;
        r->text_len += ob.pos;
        if (ret == 0 && r->consumed > r->frame_start) {   /* a frame ended: release it */
            r->frame_start = r->consumed;
            int added = r->text_len > r->text_ready;
            r->text_ready = r->text_len;
            if (added)
                return 1;
        } else if (no_input && ob.pos == 0) {
            return 0;
        }
    }
}

int zlog_next(zlog_reader *r, const char **line, size_t *len, long *lineno, qs_diag *d)
{
    if (r->done)
        return 0;
    for (;;) {
        char *start = r->text + r->text_pos;
        size_t end = r->is_zstd ? r->text_ready : r->text_len;
        char *nl = end > r->text_pos ? memchr(start, '\n', end - r->text_pos) : NULL;
        if (nl) {
            *nl = 0;
            *line = start;
            *len = (size_t)(nl - start);
            r->text_pos += *len + 1;
            r->lineno++;
            if (lineno)
                *lineno = r->lineno;
            return 1;
        }
        int rc = reader_fill(r, d);
        if (rc < 0) {
            r->done = 1;
            return rc;
        }
        if (rc == 0)
            break;
    }
    r->done = 1;
    int cut_frame = r->is_zstd && r->consumed > r->frame_start;
    int cut_line = (r->is_zstd ? r->text_ready : r->text_len) > r->text_pos;
    if (cut_frame || cut_line)
        return diag_set(d, QS_ETRUNC, r->path, r->lineno + 1,
                        "log is truncated after %ld complete records (%s)", r->lineno,
                        cut_frame ? "file ends inside a zstd frame" : "last line has no newline");
    return 0;
}

int zlog_reader_is_zstd(const zlog_reader *r) { return r->is_zstd; }

void zlog_reader_destroy(zlog_reader *r)
{
    if (!r)
        return;
    if (r->f)
        fclose(r->f);
    ZSTD_freeDStream(r->ds);
    qs_free(r->in);
    qs_free(r->text);
    qs_free(r->path);
    qs_free(r);
}
