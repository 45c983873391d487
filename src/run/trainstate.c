/* trainstate.c: sectioned, checksummed train_state.bin (see include/qs/trainstate.h). */
#include "qs/trainstate.h"

#include <stdio.h>
#include <string.h>

static const char trainstate_magic[8] = {'Q', 'S', 'T', 'R', 'A', 'I', 'N', '1'};

/* FNV-1a 64 */
static uint64_t trainstate_hash(const void *data, size_t bytes)
{
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < bytes; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static void trainstate_put_u32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static void trainstate_put_u64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t trainstate_get_u32(const unsigned char *b)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static uint64_t trainstate_get_u64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static int trainstate_fwrite(trainstate_writer *w, const void *p, size_t n, qs_diag *d)
{
    if (n && fwrite(p, 1, n, w->af.f) != n)
        return diag_set(d, QS_EIO, w->af.final_path, -1, "write failed");
    return 0;
}

int trainstate_write_begin(trainstate_writer *w, const char *path, int n_sections, qs_diag *d)
{
    memset(w, 0, sizeof *w);
    int rc = afile_open(&w->af, path, d);
    if (rc)
        return rc;
    unsigned char hdr[16];
    memcpy(hdr, trainstate_magic, 8);
    trainstate_put_u32(hdr + 8, TRAINSTATE_VERSION);
    trainstate_put_u32(hdr + 12, (uint32_t)n_sections);
    if ((rc = trainstate_fwrite(w, hdr, sizeof hdr, d)))
        afile_abort(&w->af);
    return rc;
}

int trainstate_write_section(trainstate_writer *w, const char *tag, const void *data,
                             size_t bytes, qs_diag *d)
{
    unsigned char hdr[TRAINSTATE_TAG_BYTES + 16] = {0};
    size_t n = strlen(tag);
    if (n >= TRAINSTATE_TAG_BYTES)
        return diag_set(d, QS_EINVAL, NULL, -1, "section tag '%s' too long", tag);
    memcpy(hdr, tag, n);
    trainstate_put_u64(hdr + TRAINSTATE_TAG_BYTES, bytes);
    trainstate_put_u64(hdr + TRAINSTATE_TAG_BYTES + 8, trainstate_hash(data, bytes));
    int rc = trainstate_fwrite(w, hdr, sizeof hdr, d);
    return rc ? rc : trainstate_fwrite(w, data, bytes, d);
}

int trainstate_write_commit(trainstate_writer *w, qs_diag *d)
{
    return afile_commit(&w->af, d);
}

void trainstate_write_abort(trainstate_writer *w)
{
    afile_abort(&w->af);
}

int trainstate_open(trainstate_reader *r, const char *path, qs_diag *d)
{
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path);
    int rc = fileio_map_open(&r->map, path, d);
    if (rc)
        return rc;
    const unsigned char *b = r->map.data;
    size_t size = r->map.bytes;
    if (size < 16 || memcmp(b, trainstate_magic, 8) != 0) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "not a qatscope training state (magic 'QSTRAIN1' missing)");
        goto fail;
    }
    uint32_t version = trainstate_get_u32(b + 8);
    if (version != TRAINSTATE_VERSION) {
        rc = diag_set(d, QS_EUNSUPPORTED, path, -1, "training state version %u, this build reads %d",
                      version, TRAINSTATE_VERSION);
        goto fail;
    }
    uint32_t n = trainstate_get_u32(b + 12);
    size_t off = 16;
    for (uint32_t i = 0; i < n; i++) {
        if (size - off < TRAINSTATE_TAG_BYTES + 16) {
            rc = diag_set(d, QS_ETRUNC, path, -1, "section %u header: file ends at byte %zu", i, size);
            goto fail;
        }
        uint64_t bytes = trainstate_get_u64(b + off + TRAINSTATE_TAG_BYTES);
        uint64_t hash = trainstate_get_u64(b + off + TRAINSTATE_TAG_BYTES + 8);
        off += TRAINSTATE_TAG_BYTES + 16;
        if (bytes > size - off) {
            rc = diag_set(d, QS_ETRUNC, path, -1, "section '%.16s' claims %llu bytes, %zu remain",
                          (const char *)b + off - TRAINSTATE_TAG_BYTES - 16,
                          (unsigned long long)bytes, size - off);
            goto fail;
        }
        if (trainstate_hash(b + off, (size_t)bytes) != hash) {
            rc = diag_set(d, QS_EFORMAT, path, -1, "section '%.16s': checksum mismatch (corrupt file)",
                          (const char *)b + off - TRAINSTATE_TAG_BYTES - 16);
            goto fail;
        }
        off += (size_t)bytes;
    }
    if (off != size) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "%zu trailing bytes after %u sections", size - off, n);
        goto fail;
    }
    r->n_sections = (int)n;
    return 0;
fail:
    fileio_unmap(&r->map);
    return rc;
}

int trainstate_section(const trainstate_reader *r, const char *tag, const void **data,
                       size_t *bytes, qs_diag *d)
{
    const unsigned char *b = r->map.data;
    size_t off = 16;
    for (int i = 0; i < r->n_sections; i++) {
        uint64_t n = trainstate_get_u64(b + off + TRAINSTATE_TAG_BYTES);
        if (strncmp((const char *)b + off, tag, TRAINSTATE_TAG_BYTES) == 0) {
            *data = b + off + TRAINSTATE_TAG_BYTES + 16;
            *bytes = (size_t)n;
            return 0;
        }
        off += TRAINSTATE_TAG_BYTES + 16 + (size_t)n;
    }
    return diag_set(d, QS_ENOTFOUND, r->path, -1, "section '%s' missing", tag);
}

void trainstate_close(trainstate_reader *r)
{
    fileio_unmap(&r->map);
    memset(r, 0, sizeof *r);
}
