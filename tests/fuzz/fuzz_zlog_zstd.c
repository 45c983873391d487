/* fuzz_zlog_zstd.c: zstd frames -> zlog_reader, every line read.  Inputs that do
 * not start with the zstd magic get it prepended, so mutations stay on the zstd
 * path (fuzz_zlog_plain covers the rest). */
#include "fuzz.h"
#include "qs/mem.h"

int fuzz_zlog_read_all(const char *path);

int fuzz_zlog_zstd(const uint8_t *data, size_t size)
{
    static const uint8_t magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
    char path[512];
    if (fuzz_path(path, sizeof path, "fuzz.jsonl.zst"))
        return 0;
    int has_magic = size >= 4 && memcmp(data, magic, 4) == 0;
    uint8_t *buf = qs_malloc(size + 4);
    if (!buf)
        return 0;
    size_t n = 0;
    if (!has_magic) {
        memcpy(buf, magic, 4);
        n = 4;
    }
    if (size)
        memcpy(buf + n, data, size);
    n += size;
    if (fuzz_file_write(path, buf, n) == 0)
        fuzz_zlog_read_all(path);
    qs_free(buf);
    remove(path);
    return 0;
}
