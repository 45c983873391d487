/* fuzz_shard.c: a token shard -> shard_header_read, then shard_read (header
 * validation, payload decompression and checks); a shard that reads is then
 * what `train` does with a single shard file: the train split of a dataloader
 * (window count, data hash, vocabulary check, seeded order, batches, a position
 * round trip through its byte form), and written back (shard_write) and read
 * again. */
#include "fuzz.h"
#include "qs/dataloader.h"
#include "qs/mem.h"
#include "qs/shards.h"

static void fuzz_shard_use(const char *path, const shard_header *h, const int32_t *tokens)
{
    qs_diag d = {0};
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        dataloader_opts o = {2, 3, 11, shuffle, shuffle ? 70000 : 0};
        dataloader *dl = NULL;
        if (dataloader_create(&dl, path, "train", h->tokenizer_hash, &o, &d) != 0)
            continue;
        int32_t in[6], tgt[6];
        for (int b = 0; b < 4; b++)
            dataloader_next(dl, in, tgt);
        dataloader_pos pos, back;
        unsigned char bytes[DATALOADER_POS_BYTES];
        dataloader_pos_get(dl, &pos);
        dataloader_pos_to_bytes(&pos, bytes);
        if (dataloader_pos_from_bytes(&back, bytes, sizeof bytes, &d) == 0)
            dataloader_pos_set(dl, &back, &d);
        dataloader_destroy(dl);
    }
    char again[600];
    snprintf(again, sizeof again, "%s.again", path);
    if (shard_write(again, tokens, h->n_tokens, (int)h->token_bytes, h->tokenizer_hash, h->n_docs,
                    &d) == 0) {
        shard_header h2;
        int32_t *t2 = NULL;
        if (shard_read(again, &h->tokenizer_hash, &h2, &t2, &d) == 0)
            qs_free(t2);
    }
    remove(again);
}

int fuzz_shard(const uint8_t *data, size_t size)
{
    char path[512];
    if (fuzz_path(path, sizeof path, "fuzz.shard") || fuzz_file_write(path, data, size))
        return 0;
    shard_header h;
    qs_diag d = {0};
    if (shard_header_read(path, &h, &d) == 0) {
        int32_t *tokens = NULL;
        if (shard_read(path, NULL, &h, &tokens, &d) == 0) {
            fuzz_shard_use(path, &h, tokens);
            qs_free(tokens);
        }
    }
    remove(path);
    return 0;
}
