/* trainstate.c: sectioned, checksummed train_state.bin (see include/qs/trainstate.h). */
#include "qs/trainstate.h"

#include <stdio.h>
#include <string.h>

#include "qs/bytes.h"
#include "qs/digest.h"

static const char trainstate_magic[8] = {'Q', 'S', 'T', 'R', 'A', 'I', 'N', '1'};

/* The section checksum's seed: FNV-1a's standard offset basis short of its last
 * digit (a slip of version 1, kept: files hold checksums from it).  Version 3
 * checksums with digest_lanes64, versions 1 and 2 with FNV-1a (qs/digest.h). */
#define TRAINSTATE_HASH_SEED 1469598103934665603ull

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
    bytes_put_u32le(hdr + 8, TRAINSTATE_VERSION);
    bytes_put_u32le(hdr + 12, (uint32_t)n_sections);
    if ((rc = trainstate_fwrite(w, hdr, sizeof hdr, d)))
        afile_abort(&w->af);
    return rc;
}

/* A section header: tag (zero-padded), byte count, checksum (filled by the caller). */
static int trainstate_section_header(unsigned char hdr[TRAINSTATE_TAG_BYTES + 16],
                                     const char *tag, size_t bytes, qs_diag *d)
{
    size_t n = strlen(tag);
    if (n >= TRAINSTATE_TAG_BYTES)
        return diag_set(d, QS_EINVAL, NULL, -1, "section tag '%s' too long", tag);
    memset(hdr, 0, TRAINSTATE_TAG_BYTES + 16);
    memcpy(hdr, tag, n);
    bytes_put_u64le(hdr + TRAINSTATE_TAG_BYTES, bytes);
    return 0;
}

int trainstate_write_section(trainstate_writer *w, const char *tag, const void *data,
                             size_t bytes, qs_diag *d)
{
    unsigned char hdr[TRAINSTATE_TAG_BYTES + 16];
    int rc = trainstate_section_header(hdr, tag, bytes, d);
    if (rc)
        return rc;
    bytes_put_u64le(hdr + TRAINSTATE_TAG_BYTES + 8,
                    digest_lanes64_once(TRAINSTATE_HASH_SEED, data, bytes));
    rc = trainstate_fwrite(w, hdr, sizeof hdr, d);
    return rc ? rc : trainstate_fwrite(w, data, bytes, d);
}

int trainstate_write_section_begin(trainstate_writer *w, const char *tag, size_t bytes, qs_diag *d)
{
    unsigned char hdr[TRAINSTATE_TAG_BYTES + 16];
    int rc = trainstate_section_header(hdr, tag, bytes, d);
    if (rc)
        return rc;
    w->part_pos = ftell(w->af.f);
    digest_lanes64_init(&w->part_hash, TRAINSTATE_HASH_SEED);
    w->part_left = bytes;
    if (w->part_pos < 0)
        return diag_set(d, QS_EIO, w->af.final_path, -1, "cannot tell the write position");
    return trainstate_fwrite(w, hdr, sizeof hdr, d);
}

int trainstate_write_section_part(trainstate_writer *w, const void *data, size_t bytes, qs_diag *d)
{
    if (bytes > w->part_left)
        return diag_set(d, QS_EINVAL, w->af.final_path, -1,
                        "section part of %zu bytes, only %zu declared bytes left", bytes, w->part_left);
    w->part_left -= bytes;
    digest_lanes64_update(&w->part_hash, data, bytes);
    return trainstate_fwrite(w, data, bytes, d);
}

int trainstate_write_section_end(trainstate_writer *w, qs_diag *d)
{
    if (w->part_left)
        return diag_set(d, QS_ETRUNC, w->af.final_path, -1, "section ended %zu bytes short",
                        w->part_left);
    unsigned char h[8];
    bytes_put_u64le(h, digest_lanes64_final(&w->part_hash));
    long end = ftell(w->af.f);
    if (end < 0 || fseek(w->af.f, w->part_pos + TRAINSTATE_TAG_BYTES + 8, SEEK_SET) ||
        fwrite(h, 1, 8, w->af.f) != 8 || fseek(w->af.f, end, SEEK_SET))
        return diag_set(d, QS_EIO, w->af.final_path, -1, "write failed (section checksum)");
    return 0;
}

int trainstate_write_commit(trainstate_writer *w, qs_diag *d)
{
    return afile_commit(&w->af, d);
}

void trainstate_write_abort(trainstate_writer *w)
{
    afile_abort(&w->af);
}

/* The checksum of the payload at off (the file's version says which), read in
 * pieces whose pages then leave the resident set (the optimizer moments are
 * twice the weights: reading them whole would keep them all resident next to
 * the copies being made). */
static uint64_t trainstate_hash_released(const trainstate_reader *r, size_t off, size_t bytes,
                                         uint32_t version)
{
    enum { TRAINSTATE_PIECE = 64 << 20 };
    uint64_t h = TRAINSTATE_HASH_SEED;
    digest_lanes64 s;
    digest_lanes64_init(&s, TRAINSTATE_HASH_SEED);
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < TRAINSTATE_PIECE ? bytes - done : TRAINSTATE_PIECE;
        if (version >= 3)
            digest_lanes64_update(&s, r->map.data + off + done, n);
        else
            h = digest_fnv1a64(h, r->map.data + off + done, n);
        fileio_map_release(&r->map, r->map.data + off + done, n);
        done += n;
    }
    return version >= 3 ? digest_lanes64_final(&s) : h;
}

void trainstate_copy_out(const trainstate_reader *r, void *dst, const void *src, size_t bytes)
{
    enum { TRAINSTATE_PIECE = 64 << 20 };
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < TRAINSTATE_PIECE ? bytes - done : TRAINSTATE_PIECE;
        memcpy((unsigned char *)dst + done, (const unsigned char *)src + done, n);
        fileio_map_release(&r->map, (const unsigned char *)src + done, n);
        done += n;
    }
}

int trainstate_read_checked(const trainstate_reader *r, const char *tag, size_t first, void *dst,
                            size_t bytes, qs_diag *d)
{
    /* pieces of 64 MiB between the release calls, hashed and copied 1 MiB at a
     * time (the copy reads what the hash brought to cache); the kernel's own
     * read-ahead of the faulting pass reads the file (a MADV_WILLNEED of the next
     * piece made a 1B resume slower: 28.7-40.3 s to its first line against
     * 18.8-22.4) */
    enum { PIECE = 64 << 20, SUB = 1 << 20 };
    const void *pv;
    size_t n;
    int rc = trainstate_section(r, tag, &pv, &n, d);
    if (rc)
        return rc;
    if (first > n || bytes > n - first)
        return diag_set(d, QS_ERANGE, r->path, -1,
                        "section '%s': %zu bytes from byte %zu asked of its %zu", tag, bytes,
                        first, n);
    const unsigned char *p = pv;
    const uint64_t want = bytes_get_u64le(p - 8);   /* the header's checksum */
    uint64_t h = TRAINSTATE_HASH_SEED;
    digest_lanes64 s;
    digest_lanes64_init(&s, TRAINSTATE_HASH_SEED);
    for (size_t done = 0; done < n;) {
        size_t piece = n - done < PIECE ? n - done : PIECE;
        for (size_t o = done; o < done + piece; o += SUB) {
            size_t k = done + piece - o < SUB ? done + piece - o : SUB;
            if (r->version >= 3)
                digest_lanes64_update(&s, p + o, k);
            else
                h = digest_fnv1a64(h, p + o, k);
            size_t lo = o > first ? o : first, hi = o + k < first + bytes ? o + k : first + bytes;
            if (lo < hi)
                memcpy((unsigned char *)dst + (lo - first), p + lo, hi - lo);
        }
        fileio_map_release(&r->map, p + done, piece);
        done += piece;
    }
    if ((r->version >= 3 ? digest_lanes64_final(&s) : h) != want)
        return diag_set(d, QS_EFORMAT, r->path, -1, "section '%s': checksum mismatch (corrupt file)",
                        tag);
    return 0;
}

/* 1 when tags is NULL (every section) or names tag. */
static int trainstate_wanted(const char *const *tags, const unsigned char *tag)
{
    for (int i = 0; tags && tags[i]; i++)
        if (strncmp((const char *)tag, tags[i], TRAINSTATE_TAG_BYTES) == 0)
            return 1;
    return !tags;
}

int trainstate_open(trainstate_reader *r, const char *path, qs_diag *d)
{
    return trainstate_open_only(r, path, NULL, d);
}

int trainstate_open_only(trainstate_reader *r, const char *path, const char *const *tags,
                         qs_diag *d)
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
    uint32_t version = bytes_get_u32le(b + 8);
    if (version < TRAINSTATE_VERSION_MIN || version > TRAINSTATE_VERSION) {
        rc = diag_set(d, QS_EUNSUPPORTED, path, -1,
                      "training state version %u, this build reads versions %d to %d%s", version,
                      TRAINSTATE_VERSION_MIN, TRAINSTATE_VERSION,
                      version > TRAINSTATE_VERSION ? " (written by a newer qatscope)" : "");
        goto fail;
    }
    uint32_t n = bytes_get_u32le(b + 12);
    size_t off = 16;
    for (uint32_t i = 0; i < n; i++) {
        if (size - off < TRAINSTATE_TAG_BYTES + 16) {
            rc = diag_set(d, QS_ETRUNC, path, -1, "section %u header: file ends at byte %zu", i, size);
            goto fail;
        }
        uint64_t bytes = bytes_get_u64le(b + off + TRAINSTATE_TAG_BYTES);
        uint64_t hash = bytes_get_u64le(b + off + TRAINSTATE_TAG_BYTES + 8);
        off += TRAINSTATE_TAG_BYTES + 16;
        if (bytes > size - off) {
            rc = diag_set(d, QS_ETRUNC, path, -1, "section '%.16s' claims %llu bytes, %zu remain",
                          (const char *)b + off - TRAINSTATE_TAG_BYTES - 16,
                          (unsigned long long)bytes, size - off);
            goto fail;
        }
        if (trainstate_wanted(tags, b + off - TRAINSTATE_TAG_BYTES - 16) &&
            trainstate_hash_released(r, off, (size_t)bytes, version) != hash) {
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
    r->version = (int)version;
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
        uint64_t n = bytes_get_u64le(b + off + TRAINSTATE_TAG_BYTES);
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
