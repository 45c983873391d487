/* fuzz_manifest.c: a token-shard directory's manifest.json -> dataloader_create
 * (splits "train" and "val"), beside two valid shards it may name
 * (train_000000.qst: 40 tokens, val_000000.qst: 12 tokens, tokenizer hash
 * FUZZ_MANIFEST_HASH); a loader that opens also serves a few batches and a
 * position round trip. */
#include "fuzz.h"
#include "qs/dataloader.h"
#include "qs/shards.h"

#define FUZZ_MANIFEST_HASH 0x1234u

int fuzz_manifest(const uint8_t *data, size_t size)
{
    char dir[512], path[600];
    if (fuzz_subdir(dir, sizeof dir, "shdir"))
        return 0;
    int32_t tokens[40];
    for (int i = 0; i < 40; i++)
        tokens[i] = (i * 7) % 50;
    qs_diag d = {0};
    snprintf(path, sizeof path, "%s/train_000000.qst", dir);
    int ok = shard_write(path, tokens, 40, 2, FUZZ_MANIFEST_HASH, 3, &d) == 0;
    snprintf(path, sizeof path, "%s/val_000000.qst", dir);
    ok = ok && shard_write(path, tokens, 12, 2, FUZZ_MANIFEST_HASH, 1, &d) == 0;
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    ok = ok && fuzz_file_write(path, data, size) == 0;
    static const char *const splits[2] = {"train", "val"};
    for (int s = 0; ok && s < 2; s++) {
        dataloader_opts o = {2, 4, 7, s == 0, 64};
        dataloader *dl = NULL;
        if (dataloader_create(&dl, dir, splits[s], FUZZ_MANIFEST_HASH, &o, &d) != 0)
            continue;
        int32_t in[8], tgt[8];
        for (int b = 0; b < 3; b++)
            dataloader_next(dl, in, tgt);
        dataloader_pos pos;
        dataloader_pos_get(dl, &pos);
        dataloader_pos_set(dl, &pos, &d);
        dataloader_destroy(dl);
    }
    fuzz_dir_remove(dir);
    return 0;
}
