/* fuzz_shard.c: a token shard -> shard_header_read, then shard_read (header
 * validation, payload decompression and checks). */
#include "fuzz.h"
#include "qs/mem.h"
#include "qs/shards.h"

int fuzz_shard(const uint8_t *data, size_t size)
{
    char path[512];
    if (fuzz_path(path, sizeof path, "fuzz.shard") || fuzz_file_write(path, data, size))
        return 0;
    shard_header h;
    qs_diag d = {0};
    if (shard_header_read(path, &h, &d) == 0) {
        int32_t *tokens = NULL;
        if (shard_read(path, NULL, &h, &tokens, &d) == 0)
            qs_free(tokens);
    }
    remove(path);
    return 0;
}
