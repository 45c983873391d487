/* safetensors.c: map a .safetensors file and validate it before trusting it
 * (see include/qs/safetensors.h for the format and the contract).
 *
 * Order of checks: file size >= 8; header length within the file and below
 * SAFETENSORS_MAX_HEADER_BYTES; header is a JSON object (duplicate keys
 * rejected); each entry has a known dtype, a shape of non-negative integers,
 * data_offsets [begin <= end] inside the data section, and end - begin equal
 * to product(shape) * dtype size (all in overflow-checked uint64); finally the
 * entries, sorted by offset, must not overlap.
 */
#include "qs/safetensors.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qs/bytes.h"
#include "qs/json.h"
#include "qs/mem.h"

static const struct {
    const char *name;
    size_t bytes;
} st_dtypes[SAFETENSORS_DTYPE_COUNT] = {
    [SAFETENSORS_F32] = {"F32", 4},        [SAFETENSORS_BF16] = {"BF16", 2},
    [SAFETENSORS_F16] = {"F16", 2},        [SAFETENSORS_F64] = {"F64", 8},
    [SAFETENSORS_I64] = {"I64", 8},        [SAFETENSORS_I32] = {"I32", 4},
    [SAFETENSORS_I16] = {"I16", 2},        [SAFETENSORS_I8] = {"I8", 1},
    [SAFETENSORS_U8] = {"U8", 1},          [SAFETENSORS_BOOL] = {"BOOL", 1},
    [SAFETENSORS_F8_E4M3] = {"F8_E4M3", 1}, [SAFETENSORS_F8_E5M2] = {"F8_E5M2", 1},
};

const char *safetensors_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < SAFETENSORS_DTYPE_COUNT ? st_dtypes[dtype].name : "?";
}

size_t safetensors_dtype_bytes(int dtype)
{
    return dtype >= 0 && dtype < SAFETENSORS_DTYPE_COUNT ? st_dtypes[dtype].bytes : 0;
}

static int st_dtype_parse(const char *s)
{
    for (int i = 0; i < SAFETENSORS_DTYPE_COUNT; i++)
        if (!strcmp(s, st_dtypes[i].name))
            return i;
    return -1;
}

float safetensors_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t safetensors_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu))
        return (uint16_t)((u >> 16) | 0x40);   /* quiet NaN, keep sign */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float safetensors_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else {   /* subnormal: value = man * 2^-24, exact in fp32 */
            float v = ldexpf((float)man, -24);
            memcpy(&u, &v, 4);
            u |= sign;
        }
    } else {
        u = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* by [begin, end): an empty tensor sorts before one that starts where it does */
static int st_cmp_offset(const void *a, const void *b)
{
    const safetensors_tensor *x = a, *y = b;
    if (x->data != y->data)
        return x->data < y->data ? -1 : 1;
    if (x->n_bytes != y->n_bytes)
        return x->n_bytes < y->n_bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

void safetensors_shape_str(const safetensors_tensor *t, char *buf, size_t n)
{
    size_t w = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && w < n; i++)
        w += (size_t)snprintf(buf + w, n - w, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (w < n)
        snprintf(buf + w, n - w, "]");
}

/* One header entry (at $[name]) -> t.  data_base: start of the data section;
 * data_bytes: its size. */
static int st_entry_parse(safetensors_tensor *t, const qs_json_at *hdr, const char *name,
                          const unsigned char *data_base, uint64_t data_bytes, const char *path,
                          qs_diag *d)
{
    qs_json_at ent, js, jo;
    const char *dtype;
    size_t nd, no;
    long long x;
    int rc;
    if ((rc = qs_json_obj(hdr, name, &ent, d)) || (rc = qs_json_str(&ent, "dtype", &dtype, d)) ||
        (rc = qs_json_arr(&ent, "shape", &js, &nd, d)) ||
        (rc = qs_json_arr(&ent, "data_offsets", &jo, &no, d)))
        return rc;
    t->dtype = st_dtype_parse(dtype);
    if (t->dtype < 0)
        return diag_set(d, QS_EFORMAT, path, -1, "tensor '%s': unknown dtype '%s'", name, dtype);
    if (nd > SAFETENSORS_MAX_DIMS)
        return diag_set(d, QS_EFORMAT, path, -1, "tensor '%s': %zu dimensions (at most %d)",
                        name, nd, SAFETENSORS_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t n_elems = 1;
    for (size_t i = 0; i < nd; i++) {
        qs_json_at e = qs_json_item(&js, i);
        if ((rc = qs_json_i64(&e, NULL, 0, INT64_MAX, &x, d)))
            return rc;
        uint64_t s = (uint64_t)x;
        t->shape[i] = (int64_t)s;
        if (s && n_elems > UINT64_MAX / s)
            return diag_set(d, QS_EFORMAT, path, -1, "tensor '%s': shape overflows", name);
        n_elems *= s;
    }
    uint64_t esz = st_dtypes[t->dtype].bytes;
    if (n_elems > UINT64_MAX / esz || n_elems > SIZE_MAX)
        return diag_set(d, QS_EFORMAT, path, -1, "tensor '%s': byte size overflows", name);
    long long off[2];
    if (no != 2)
        return qs_json_fail(&ent, "data_offsets", QS_EFORMAT, d,
                            "expected [begin, end], found %zu elements", no);
    for (size_t i = 0; i < 2; i++) {
        qs_json_at e = qs_json_item(&jo, i);
        if ((rc = qs_json_i64(&e, NULL, 0, INT64_MAX, &off[i], d)))
            return rc;
    }
    uint64_t b = (uint64_t)off[0], e = (uint64_t)off[1];
    if (b > e || e > data_bytes)
        return diag_set(d, QS_EFORMAT, path, -1,
                        "tensor '%s': data_offsets [%llu, %llu] outside the data section of "
                        "%llu bytes",
                        name, (unsigned long long)b, (unsigned long long)e,
                        (unsigned long long)data_bytes);
    if (e - b != n_elems * esz) {
        char sh[160];
        safetensors_shape_str(t, sh, sizeof sh);
        return diag_set(d, QS_EFORMAT, path, -1,
                        "tensor '%s': %s %s needs %llu bytes, data_offsets give %llu", name,
                        st_dtypes[t->dtype].name, sh, (unsigned long long)(n_elems * esz),
                        (unsigned long long)(e - b));
    }
    t->n_elems = (size_t)n_elems;
    t->n_bytes = (size_t)(e - b);
    t->data = data_base + b;
    t->name = qs_strdup(name);
    return t->name ? 0 : diag_set(d, QS_ENOMEM, path, -1, "out of memory");
}

static int st_header_parse(safetensors_file *f, const char *hdr, size_t hdr_bytes,
                           const unsigned char *data_base, uint64_t data_bytes, qs_diag *d)
{
    json_t *root;
    int rc = qs_json_load_text(hdr, hdr_bytes, f->path, 0, QS_JSON_NO_DUPLICATES | QS_JSON_OBJECT,
                               &root, d);
    if (rc) {
        if (rc == QS_EFORMAT && d) {   /* the JSON is the header, after the 8 length bytes */
            char msg[QS_DIAG_MSG_MAX];
            snprintf(msg, sizeof msg, "%s", d->msg);
            snprintf(d->msg, sizeof d->msg, "header: %.500s", msg);
        }
        return rc;
    }
    qs_json_at r = qs_json_root(root, f->path, -1);
    size_t n = json_object_size(root);
    f->tensors = qs_calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->tensors) {
        rc = diag_set(d, QS_ENOMEM, f->path, -1, "out of memory");
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (!strcmp(key, "__metadata__")) {   /* a map of strings to strings */
            qs_json_at meta;
            if ((rc = qs_json_obj(&r, key, &meta, d)))
                goto done;
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv)
            {
                const char *str;
                if ((rc = qs_json_str(&meta, mk, &str, d)))
                    goto done;
            }
            continue;
        }
        rc = st_entry_parse(&f->tensors[f->n_tensors], &r, key, data_base, data_bytes, f->path, d);
        if (rc)
            goto done;
        f->n_tensors++;
    }
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, st_cmp_offset);
    /* back to back from the start of the data to its end, as Hugging Face's
     * reader requires, but for the up to 7 bytes of padding to an 8-byte
     * boundary that qatscope wrote after a tensor until 2026-12-04 */
    uint64_t pos = 0;
    for (int i = 0; i < f->n_tensors; i++) {
        const safetensors_tensor *a = i ? &f->tensors[i - 1] : NULL, *b = &f->tensors[i];
        uint64_t at = (uint64_t)(b->data - data_base);
        if (at < pos) {
            rc = diag_set(d, QS_EFORMAT, f->path, -1, "tensors '%s' and '%s' overlap in the data",
                          a->name, b->name);
            goto done;
        }
        if (at != pos && !(at - pos < 8 && at % 8 == 0)) {
            rc = diag_set(d, QS_EFORMAT, f->path, -1,
                          "tensor '%s': data_offsets begin at %llu, expected %llu (%s): a gap of "
                          "%llu bytes", b->name, (unsigned long long)at, (unsigned long long)pos,
                          a ? "where the previous tensor ends" : "the start of the data",
                          (unsigned long long)(at - pos));
            goto done;
        }
        pos = at + b->n_bytes;
    }
    if (data_bytes != pos && !(data_bytes - pos < 8 && data_bytes % 8 == 0)) {
        rc = diag_set(d, QS_EFORMAT, f->path, -1,
                      "%llu bytes after the end of the last tensor's data (byte %llu of the data "
                      "section); expected the file to end there",
                      (unsigned long long)(data_bytes - pos), (unsigned long long)pos);
        goto done;
    }
done:
    json_decref(root);
    return rc;
}

int safetensors_open(safetensors_file *f, const char *path, qs_diag *d)
{
    memset(f, 0, sizeof *f);
    f->path = qs_strdup(path);
    if (!f->path)
        return diag_set(d, QS_ENOMEM, path, -1, "out of memory");
    int rc = fileio_map_open(&f->map, path, d);
    if (rc)
        goto fail;
    uint64_t file_bytes = f->map.bytes;
    if (file_bytes < 8) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "file has %llu bytes, a safetensors file has >= 8",
                      (unsigned long long)file_bytes);
        goto fail;
    }
    uint64_t hdr_bytes = bytes_get_u64le(f->map.data);
    if (hdr_bytes > file_bytes - 8 || hdr_bytes > SAFETENSORS_MAX_HEADER_BYTES) {
        rc = diag_set(d, QS_EFORMAT, path, -1, "header claims %llu bytes, file has %llu after the "
                      "length field",
                      (unsigned long long)hdr_bytes, (unsigned long long)(file_bytes - 8));
        goto fail;
    }
    rc = st_header_parse(f, (const char *)f->map.data + 8, (size_t)hdr_bytes,
                         f->map.data + 8 + hdr_bytes, file_bytes - 8 - hdr_bytes, d);
    if (rc)
        goto fail;
    return 0;
fail:
    safetensors_close(f);
    return rc;
}

void safetensors_close(safetensors_file *f)
{
    for (int i = 0; i < f->n_tensors; i++)
        qs_free(f->tensors[i].name);
    qs_free(f->tensors);
    fileio_unmap(&f->map);
    qs_free(f->path);
    memset(f, 0, sizeof *f);
}

const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name)
{
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

int safetensors_tensor_to_f32(const safetensors_tensor *t, float *out, const char *path,
                              qs_diag *d)
{
    const unsigned char *p = t->data;
    size_t n = t->n_elems;
    switch (t->dtype) {
    case SAFETENSORS_F32:
        memcpy(out, p, n * 4);   /* little-endian host (x86-64) */
        break;
    case SAFETENSORS_BF16:
    case SAFETENSORS_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = bytes_get_u16le(p + 2 * i);
            out[i] = t->dtype == SAFETENSORS_BF16 ? safetensors_bf16_to_f32(h)
                                                  : safetensors_f16_to_f32(h);
        }
        break;
    default:
        return diag_set(d, QS_EUNSUPPORTED, path, -1,
                        "tensor '%s': dtype %s, expected F32, BF16 or F16", t->name,
                        st_dtypes[t->dtype].name);
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(out[i]))
            return diag_set(d, QS_ENAN, path, -1, "tensor '%s': element %zu is %s", t->name, i,
                            isnan(out[i]) ? "NaN" : "Inf");
    return 0;
}

int safetensors_tensor_to_i32(const safetensors_tensor *t, int32_t *out, const char *path,
                              qs_diag *d)
{
    if (t->dtype != SAFETENSORS_I32)
        return diag_set(d, QS_EUNSUPPORTED, path, -1, "tensor '%s': dtype %s, expected I32",
                        t->name, st_dtypes[t->dtype].name);
    memcpy(out, t->data, t->n_elems * 4);
    return 0;
}
