/* fuzz_safetensors_index.c: a sharded model directory -> safetensors_dir_open.
 * The input is model.safetensors.index.json; the directory also holds two small
 * valid shards (a.safetensors with "x", b.safetensors with "y"), so weight maps
 * naming them reach the per-entry checks. */
#include "fuzz.h"
#include "qs/safetensors.h"

/* header {"x":{"dtype":"F32","shape":[N],"data_offsets":[0,4N]}} + N floats */
static int shard_make(const char *path, const char *tensor, int n)
{
    char hdr[128];
    int len = snprintf(hdr, sizeof hdr,
                       "{\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[0,%d]}}",
                       tensor, n, 4 * n);
    unsigned char buf[256];
    size_t off = 0;
    for (int i = 0; i < 8; i++)
        buf[off++] = (unsigned char)((uint64_t)len >> (8 * i));
    memcpy(buf + off, hdr, (size_t)len);
    off += (size_t)len;
    for (int i = 0; i < n; i++) {
        const unsigned char one[4] = {0x00, 0x00, 0x80, 0x3f};   /* 1.0f */
        memcpy(buf + off, one, 4);
        off += 4;
    }
    return fuzz_file_write(path, buf, off);
}

int fuzz_safetensors_index(const uint8_t *data, size_t size)
{
    char dir[512], index[600], a[600], b[600];
    if (fuzz_subdir(dir, sizeof dir, "sdir"))
        return 0;
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    snprintf(a, sizeof a, "%s/a.safetensors", dir);
    snprintf(b, sizeof b, "%s/b.safetensors", dir);
    if (!shard_make(a, "x", 1) && !shard_make(b, "y", 2) && !fuzz_file_write(index, data, size)) {
        safetensors_dir sd;
        qs_diag d = {0};
        if (safetensors_dir_open(&sd, dir, &d) == 0) {
            const char *file = NULL;
            safetensors_dir_find(&sd, "x", &file);
            safetensors_dir_find(&sd, "y", &file);
            safetensors_dir_close(&sd);
        }
    }
    remove(index);
    remove(a);
    remove(b);
    rmdir(dir);
    return 0;
}
