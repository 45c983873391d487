/* safetensors_write.c: atomic writer of HF-compatible .safetensors files.
 *
 * Tensors are laid out in the order given, back to back: Hugging Face's reader
 * refuses a gap between two tensors or bytes after the last one (its
 * InvalidOffset / MetadataIncompleteBuffer), so a tensor whose size is not a
 * multiple of 8 leaves the next one unaligned, which every reader here allows
 * for.  The header is padded with spaces so the data section starts on an 8-byte
 * boundary, as the reference writer does.  The file appears under its final name only after a
 * complete, checked write (afile_*), so a crash never leaves a checkpoint that
 * looks whole.  safetensors_stream_* writes the same bytes from values handed
 * over in any number of pieces (memory independent of the tensor sizes);
 * safetensors_write is that stream fed whole tensors.
 * A file of DIGEST_CACHE_MIN_BYTES or more is hashed (SHA-256) as it is written
 * and its hash stored in the hash cache once it is in place (qs/digest.h), so
 * evaluating a checkpoint this process wrote does not read it all again to
 * hash it: the cost moves to where the bytes pass anyway (~0.8 s per GB here).
 */
#include <jansson.h>
#include <string.h>

#include "qs/bytes.h"
#include "qs/digest.h"
#include "qs/interrupt.h"
#include "qs/mem.h"
#include "qs/safetensors.h"

static size_t sw_elems(const safetensors_entry *e)
{
    size_t n = 1;
    for (int i = 0; i < e->ndim; i++)
        n *= (size_t)e->shape[i];
    return n;
}

static char *sw_header(const safetensors_entry *entries, int n_entries, const int *dtypes,
                       const char *const *meta_kv, size_t *hdr_bytes)
{
    json_t *root = json_object();
    if (!root)
        return NULL;
    size_t off = 0;
    int bad = 0;
    if (meta_kv && meta_kv[0]) {
        json_t *m = json_object();
        for (int i = 0; m && meta_kv[i] && meta_kv[i + 1]; i += 2)
            bad |= json_object_set_new(m, meta_kv[i], json_string(meta_kv[i + 1]));
        bad |= !m || json_object_set_new(root, "__metadata__", m);
    }
    for (int i = 0; i < n_entries && !bad; i++) {
        const safetensors_entry *e = &entries[i];
        json_t *t = json_object(), *sh = json_array();
        for (int k = 0; sh && k < e->ndim; k++)
            bad |= json_array_append_new(sh, json_integer(e->shape[k]));
        size_t nb = sw_elems(e) * safetensors_dtype_bytes(dtypes[i]);
        bad |= !t || !sh;
        if (!bad) {
            bad |= json_object_set_new(t, "dtype", json_string(safetensors_dtype_name(dtypes[i])));
            bad |= json_object_set_new(t, "shape", sh);
            bad |= json_object_set_new(t, "data_offsets",
                                       json_pack("[II]", (json_int_t)off, (json_int_t)(off + nb)));
            bad |= json_object_set_new(root, e->name, t);
        }
        off += nb;
    }
    size_t n = bad ? 0 : json_dumpb(root, NULL, 0, JSON_COMPACT);
    size_t padded = (n + 7) / 8 * 8;
    char *out = n ? qs_malloc(padded + 1) : NULL;
    if (out && json_dumpb(root, out, n, JSON_COMPACT) == n) {
        memset(out + n, ' ', padded - n);
        out[padded] = 0;
        *hdr_bytes = padded;
    } else {
        qs_free(out);
        out = NULL;
    }
    json_decref(root);
    return out;
}

struct safetensors_stream {
    afile af;
    int *dtypes;          /* [n_entries] F32, BF16 or U8 */
    int n_entries;
    size_t *n_elems;      /* [n_entries] values each tensor still expects, in order */
    int cur;              /* tensor being written */
    size_t done;          /* values of tensor cur written so far */
    int hashing;          /* the file is large: sha follows every byte written */
    digest_sha256 sha;
};

/* fwrite of count items of size bytes, hashed when the stream hashes. */
static int sw_put(safetensors_stream *s, const void *p, size_t size, size_t count)
{
    if (fwrite(p, size, count, s->af.f) != count)
        return 0;
    if (s->hashing)
        digest_sha256_update(&s->sha, p, size * count);
    return 1;
}

/* Moves past tensors that are complete, so cur is the next one expecting
 * values, or n_entries. */
static void sw_advance(safetensors_stream *s)
{
    while (s->cur < s->n_entries && s->done == s->n_elems[s->cur]) {
        s->cur++;
        s->done = 0;
    }
}

static void sw_free(safetensors_stream *s)
{
    if (!s)
        return;
    qs_free(s->n_elems);
    qs_free(s->dtypes);
    qs_free(s);
}

int safetensors_stream_create_mixed(safetensors_stream **out, const char *path,
                                    const safetensors_entry *entries, const int *dtypes,
                                    int n_entries, const char *const *meta_kv, qs_diag *d)
{
    *out = NULL;
    for (int i = 0; i < n_entries; i++)
        if (dtypes[i] != SAFETENSORS_F32 && dtypes[i] != SAFETENSORS_BF16 &&
            dtypes[i] != SAFETENSORS_U8)
            return diag_set(d, QS_EUNSUPPORTED, path, -1, "writer stores F32, BF16 or U8, not %s",
                            safetensors_dtype_name(dtypes[i]));
    size_t hdr_bytes = 0;
    char *hdr = sw_header(entries, n_entries, dtypes, meta_kv, &hdr_bytes);
    safetensors_stream *s = qs_calloc(1, sizeof *s);
    if (s) {
        s->n_elems = qs_calloc((size_t)n_entries + 1, sizeof *s->n_elems);
        s->dtypes = qs_calloc((size_t)n_entries + 1, sizeof *s->dtypes);
    }
    if (!hdr || !s || !s->n_elems || !s->dtypes) {
        qs_free(hdr);
        sw_free(s);
        return diag_set(d, QS_ENOMEM, path, -1, "cannot build the header (out of memory or "
                        "duplicate tensor name)");
    }
    s->n_entries = n_entries;
    size_t file_bytes = 8 + hdr_bytes;
    for (int i = 0; i < n_entries; i++) {
        s->n_elems[i] = sw_elems(&entries[i]);
        s->dtypes[i] = dtypes[i];
        file_bytes += s->n_elems[i] * safetensors_dtype_bytes(dtypes[i]);
    }
    s->hashing = file_bytes >= DIGEST_CACHE_MIN_BYTES && digest_cache_enabled();
    if (s->hashing)
        digest_sha256_init(&s->sha);
    int rc = afile_open(&s->af, path, d);
    if (rc) {
        qs_free(hdr);
        sw_free(s);
        return rc;
    }
    unsigned char len8[8];
    bytes_put_u64le(len8, (uint64_t)hdr_bytes);
    int ok = sw_put(s, len8, 1, 8) && sw_put(s, hdr, 1, hdr_bytes);
    qs_free(hdr);
    sw_advance(s);   /* past tensors of no elements */
    if (!ok) {
        safetensors_stream_abort(s);
        return diag_set(d, QS_EIO, path, -1, "write failed");
    }
    *out = s;
    return 0;
}

int safetensors_stream_create(safetensors_stream **out, const char *path,
                              const safetensors_entry *entries, int n_entries, int dtype,
                              const char *const *meta_kv, qs_diag *d)
{
    *out = NULL;
    if (dtype != SAFETENSORS_F32 && dtype != SAFETENSORS_BF16)
        return diag_set(d, QS_EUNSUPPORTED, path, -1, "writer stores F32 or BF16, not %s",
                        safetensors_dtype_name(dtype));
    int *dtypes = qs_malloc(((size_t)n_entries + 1) * sizeof *dtypes);
    if (!dtypes)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    for (int i = 0; i < n_entries; i++)
        dtypes[i] = dtype;
    int rc = safetensors_stream_create_mixed(out, path, entries, dtypes, n_entries, meta_kv, d);
    qs_free(dtypes);
    return rc;
}

/* The current tensor takes values of kind u8 (1) or floats (0)? */
static int sw_kind_ok(safetensors_stream *s, int u8, size_t n, qs_diag *d)
{
    if (interrupt_pending()) /* a command that catches signals stops here (qs/interrupt.h) */
        return diag_set(d, QS_ESTOP, s->af.final_path, -1, "interrupted by signal %d",
                        interrupt_pending());
    if (s->cur >= s->n_entries)
        return diag_set(d, QS_EINVAL, s->af.final_path, -1,
                        "%zu values more than the header declares", n);
    if ((s->dtypes[s->cur] == SAFETENSORS_U8) != u8)
        return diag_set(d, QS_EINVAL, s->af.final_path, -1, "tensor %d is %s: it takes %s",
                        s->cur + 1, safetensors_dtype_name(s->dtypes[s->cur]),
                        u8 ? "float values" : "bytes");
    return 0;
}

int safetensors_stream_append_u8(safetensors_stream *s, const uint8_t *x, size_t n, qs_diag *d)
{
    int ok = 1, rc;
    while (n && ok) {
        if ((rc = sw_kind_ok(s, 1, n, d)))
            return rc;
        size_t m = s->n_elems[s->cur] - s->done;
        m = n < m ? n : m;
        ok = sw_put(s, x, 1, m);
        s->done += m;
        x += m;
        n -= m;
        sw_advance(s);
    }
    return ok ? 0 : diag_set(d, QS_EIO, s->af.final_path, -1, "write failed");
}

int safetensors_stream_append(safetensors_stream *s, const float *x, size_t n, qs_diag *d)
{
    unsigned char buf[4096];
    int ok = 1, rc;
    while (n && ok) {
        if ((rc = sw_kind_ok(s, 0, n, d)))
            return rc;
        size_t m = s->n_elems[s->cur] - s->done;
        m = n < m ? n : m;
        if (s->dtypes[s->cur] == SAFETENSORS_F32) {
            ok = sw_put(s, x, 4, m);
        } else {
            for (size_t j = 0; j < m && ok; j += sizeof buf / 2) {
                size_t k = m - j < sizeof buf / 2 ? m - j : sizeof buf / 2;
                for (size_t i = 0; i < k; i++) {
                    uint16_t h = safetensors_f32_to_bf16(x[j + i]);
                    buf[2 * i] = (unsigned char)h;
                    buf[2 * i + 1] = (unsigned char)(h >> 8);
                }
                ok = sw_put(s, buf, 2, k);
            }
        }
        s->done += m;
        x += m;
        n -= m;
        sw_advance(s);
    }
    return ok ? 0 : diag_set(d, QS_EIO, s->af.final_path, -1, "write failed");
}

int safetensors_stream_commit(safetensors_stream *s, qs_diag *d)
{
    int rc = 0;
    if (s->cur < s->n_entries) {
        rc = diag_set(d, QS_EINVAL, s->af.final_path, -1,
                      "incomplete: tensor %d of %d has %zu of %zu values", s->cur + 1,
                      s->n_entries, s->done, s->n_elems[s->cur]);
        afile_abort(&s->af);
    } else {
        char *final_path = s->hashing ? qs_strdup(s->af.final_path) : NULL;
        rc = afile_commit(&s->af, d);
        if (!rc && final_path) { /* after the rename: the key is the file in place */
            char hex[65];
            digest_sha256_final(&s->sha, hex);
            digest_cache_store_written(final_path, hex);
        }
        qs_free(final_path);
    }
    sw_free(s);
    return rc;
}

void safetensors_stream_abort(safetensors_stream *s)
{
    if (!s)
        return;
    afile_abort(&s->af);
    sw_free(s);
}

int safetensors_write(const char *path, const safetensors_entry *entries, int n_entries,
                      int dtype, const char *const *meta_kv, qs_diag *d)
{
    safetensors_stream *s;
    int rc = safetensors_stream_create(&s, path, entries, n_entries, dtype, meta_kv, d);
    for (int i = 0; i < n_entries && !rc; i++)
        rc = safetensors_stream_append(s, entries[i].data, sw_elems(&entries[i]), d);
    if (rc) {
        safetensors_stream_abort(s);
        return rc;
    }
    return safetensors_stream_commit(s, d);
}
