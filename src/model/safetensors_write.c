/* safetensors_write.c: atomic writer of HF-compatible .safetensors files.
 *
 * Tensors are laid out in the order given, each starting on an 8-byte boundary
 * (the header is padded with spaces so the data section starts aligned, as the
 * reference writer does).  The file appears under its final name only after a
 * complete, checked write (afile_*), so a crash never leaves a checkpoint that
 * looks whole.
 */
#include <jansson.h>
#include <string.h>

#include "qs/bytes.h"
#include "qs/mem.h"
#include "qs/safetensors.h"

static size_t sw_elems(const safetensors_entry *e)
{
    size_t n = 1;
    for (int i = 0; i < e->ndim; i++)
        n *= (size_t)e->shape[i];
    return n;
}

static char *sw_header(const safetensors_entry *entries, int n_entries, int dtype,
                       const char *const *meta_kv, size_t *hdr_bytes)
{
    json_t *root = json_object();
    if (!root)
        return NULL;
    size_t off = 0, esz = safetensors_dtype_bytes(dtype);
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
        size_t nb = sw_elems(e) * esz;
        bad |= !t || !sh;
        if (!bad) {
            bad |= json_object_set_new(t, "dtype", json_string(safetensors_dtype_name(dtype)));
            bad |= json_object_set_new(t, "shape", sh);
            bad |= json_object_set_new(t, "data_offsets",
                                       json_pack("[II]", (json_int_t)off, (json_int_t)(off + nb)));
            bad |= json_object_set_new(root, e->name, t);
        }
        off += (nb + 7) / 8 * 8;
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

int safetensors_write(const char *path, const safetensors_entry *entries, int n_entries,
                      int dtype, const char *const *meta_kv, qs_diag *d)
{
    if (dtype != SAFETENSORS_F32 && dtype != SAFETENSORS_BF16)
        return diag_set(d, QS_EUNSUPPORTED, path, -1, "writer stores F32 or BF16, not %s",
                        safetensors_dtype_name(dtype));
    size_t hdr_bytes = 0;
    char *hdr = sw_header(entries, n_entries, dtype, meta_kv, &hdr_bytes);
    if (!hdr)
        return diag_set(d, QS_ENOMEM, path, -1, "cannot build the header (out of memory or "
                        "duplicate tensor name)");
    afile af;
    int rc = afile_open(&af, path, d);
    if (rc) {
        qs_free(hdr);
        return rc;
    }
    unsigned char len8[8];
    bytes_put_u64le(len8, (uint64_t)hdr_bytes);
    int ok = fwrite(len8, 1, 8, af.f) == 8 && fwrite(hdr, 1, hdr_bytes, af.f) == hdr_bytes;
    qs_free(hdr);
    static const unsigned char zeros[8];
    unsigned char buf[4096];
    for (int i = 0; i < n_entries && ok; i++) {
        const float *x = entries[i].data;
        size_t n = sw_elems(&entries[i]), nb = 0;
        if (dtype == SAFETENSORS_F32) {
            nb = n * 4;
            ok = fwrite(x, 4, n, af.f) == n;
        } else {
            for (size_t j = 0; j < n && ok; j += sizeof buf / 2) {
                size_t m = n - j < sizeof buf / 2 ? n - j : sizeof buf / 2;
                for (size_t k = 0; k < m; k++) {
                    uint16_t h = safetensors_f32_to_bf16(x[j + k]);
                    buf[2 * k] = (unsigned char)h;
                    buf[2 * k + 1] = (unsigned char)(h >> 8);
                }
                ok = fwrite(buf, 2, m, af.f) == m;
            }
            nb = n * 2;
        }
        size_t pad = (nb + 7) / 8 * 8 - nb;
        if (ok && pad)
            ok = fwrite(zeros, 1, pad, af.f) == pad;
    }
    if (!ok) {
        afile_abort(&af);
        return diag_set(d, QS_EIO, path, -1, "write failed");
    }
    return afile_commit(&af, d);
}
