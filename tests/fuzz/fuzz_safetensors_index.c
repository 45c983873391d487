/* fuzz_safetensors_index.c: a sharded model directory -> safetensors_dir_open.
 * The input is model.safetensors.index.json; the directory also holds three
 * small valid shards the weight map may name: a.safetensors ("x", F32),
 * b.safetensors ("y", F32) and c.safetensors ("z" BF16, "h" F16 2x2, "ids" I32,
 * "nan" F32 holding a NaN, "raw" U8), so weight maps naming them reach the
 * per-entry checks.  A directory that opens is then read as a loader reads it:
 * each tensor the weight map names is looked up and converted (fp32, or int32
 * for I32), which covers every dtype path and the conversions' refusals. */
#include "fuzz.h"
#include "qs/mem.h"
#include "qs/safetensors.h"

/* 8-byte little-endian header length, the JSON header, then the data */
static int shard_raw(const char *path, const char *hdr, const void *blob, size_t blob_bytes)
{
    unsigned char buf[1024];
    size_t len = strlen(hdr), off = 0;
    if (8 + len + blob_bytes > sizeof buf)
        return -1;
    for (int i = 0; i < 8; i++)
        buf[off++] = (unsigned char)((uint64_t)len >> (8 * i));
    memcpy(buf + off, hdr, len);
    memcpy(buf + off + len, blob, blob_bytes);
    return fuzz_file_write(path, buf, off + len + blob_bytes);
}

/* header {"x":{"dtype":"F32","shape":[N],"data_offsets":[0,4N]}} + N floats 1.0 */
static int shard_make(const char *path, const char *tensor, int n)
{
    char hdr[128];
    snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[0,%d]}}",
             tensor, n, 4 * n);
    static const unsigned char one[4] = {0x00, 0x00, 0x80, 0x3f};   /* 1.0f */
    unsigned char blob[64];
    for (int i = 0; i < n; i++)
        memcpy(blob + 4 * i, one, 4);
    return shard_raw(path, hdr, blob, 4 * (size_t)n);
}

static int shard_mixed(const char *path)
{
    static const char hdr[] =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"z\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]},"
        "\"h\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[6,14]},"
        "\"ids\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[14,22]},"
        "\"nan\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[22,26]},"
        "\"raw\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[26,30]}}";
    static const unsigned char blob[30] = {
        0x80, 0x3f, 0x00, 0xc0, 0x00, 0x00,                           /* bf16 1, -2, 0 */
        0x00, 0x3c, 0x00, 0x40, 0x00, 0xbc, 0xff, 0x7b,               /* f16 1, 2, -1, 65504 */
        0x07, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0x7f,               /* i32 7, 2^31-1 */
        0x00, 0x00, 0xc0, 0x7f,                                       /* f32 NaN */
        1, 2, 3, 4};
    return shard_raw(path, hdr, blob, sizeof blob);
}

static void fuzz_index_read(const safetensors_dir *sd)
{
    qs_diag d = {0};
    for (int f = 0; f < sd->n_files; f++)
        for (int i = 0; i < sd->files[f].n_tensors; i++) {
            const char *file = NULL;
            const safetensors_tensor *t = safetensors_dir_find(sd, sd->files[f].tensors[i].name, &file);
            if (!t)
                continue;
            void *out = qs_malloc(t->n_elems * 4 + 4);
            if (!out)
                continue;
            if (t->dtype == SAFETENSORS_I32)
                safetensors_tensor_to_i32(t, out, file, &d);
            else
                safetensors_tensor_to_f32(t, out, file, &d);
            qs_free(out);
        }
}

int fuzz_safetensors_index(const uint8_t *data, size_t size)
{
    char dir[512], index[600], a[600], b[600], c[600];
    if (fuzz_subdir(dir, sizeof dir, "sdir"))
        return 0;
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    snprintf(a, sizeof a, "%s/a.safetensors", dir);
    snprintf(b, sizeof b, "%s/b.safetensors", dir);
    snprintf(c, sizeof c, "%s/c.safetensors", dir);
    if (!shard_make(a, "x", 1) && !shard_make(b, "y", 2) && !shard_mixed(c) &&
        !fuzz_file_write(index, data, size)) {
        safetensors_dir sd;
        qs_diag d = {0};
        if (safetensors_dir_open(&sd, dir, &d) == 0) {
            const char *file = NULL;
            safetensors_dir_find(&sd, "x", &file);
            safetensors_dir_find(&sd, "y", &file);
            fuzz_index_read(&sd);
            safetensors_dir_close(&sd);
        }
    }
    fuzz_dir_remove(dir);
    return 0;
}
