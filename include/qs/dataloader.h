/* dataloader.h: token shards -> (B, T) training batches in a seeded order.
 *
 * A split (all its shards, in manifest order) is one token stream of N tokens.
 * It is cut into n_windows = (N - 1) / T windows; window w holds tokens
 * [w*T, w*T + T] (T + 1 tokens: inputs are the first T, targets the last T,
 * i.e. the inputs shifted by one).  Each epoch visits every window once, in an
 * order that is a Fisher-Yates permutation seeded by (seed, epoch) when shuffle
 * is on, or in stream order when off (validation).  A batch takes the next B
 * windows, running into the next epoch when one ends.
 * The position is (epoch, cursor): dataloader_pos_get/set save and restore it,
 * so a resumed run sees exactly the batches the uninterrupted run would have.
 */
#ifndef QS_DATALOADER_H
#define QS_DATALOADER_H

#include <stdint.h>

#include "qs/err.h"

typedef struct dataloader dataloader;

typedef struct dataloader_opts {
    int batch;          /* B >= 1 */
    int seq_len;        /* T >= 1 */
    uint64_t seed;      /* window order */
    int shuffle;        /* 1: seeded permutation per epoch; 0: stream order */
    int32_t vocab_size; /* > 0: ids >= vocab_size are refused at load; 0: no check */
} dataloader_opts;

typedef struct dataloader_pos {
    uint64_t epoch;     /* completed passes */
    uint64_t cursor;    /* next window in this epoch's order */
    uint64_t n_windows; /* identity of the data, checked on restore */
    uint64_t data_hash; /* FNV-1a of the split's tokens, checked on restore */
} dataloader_pos;

/* shard_dir: a directory written by `qatscope tokenize --input` (split "train"
 * or "val"), or one shard file (which is the "train" split; "val" is then
 * QS_ENOTFOUND).  Shards whose tokenizer hash differs from tokenizer_hash are refused. */
int dataloader_create(dataloader **out, const char *shard_dir, const char *split,
                      uint64_t tokenizer_hash, const dataloader_opts *o, qs_diag *d);
void dataloader_destroy(dataloader *dl); /* NULL ok */

/* Next batch: inputs and targets are (B, T) row-major, caller-allocated. */
void dataloader_next(dataloader *dl, int32_t *inputs, int32_t *targets);

uint64_t dataloader_n_tokens(const dataloader *dl);
uint64_t dataloader_n_windows(const dataloader *dl);
/* The split's whole token stream [dataloader_n_tokens], in shard order (valid
 * until dataloader_destroy): scoring that walks it its own way (compare). */
const int32_t *dataloader_tokens(const dataloader *dl);
void dataloader_pos_get(const dataloader *dl, dataloader_pos *pos);
/* Refuses (QS_EINVAL) a position saved over different data. */
int dataloader_pos_set(dataloader *dl, const dataloader_pos *pos, qs_diag *d);
void dataloader_rewind(dataloader *dl); /* back to epoch 0, window 0 */

/* Stable byte form of a position for checkpoints: magic "QSDP", version 1 (u32), then
 * the four fields as little-endian u64 (40 bytes). */
#define DATALOADER_POS_BYTES 40
void dataloader_pos_to_bytes(const dataloader_pos *pos, unsigned char out[DATALOADER_POS_BYTES]);
int dataloader_pos_from_bytes(dataloader_pos *pos, const void *bytes, size_t n_bytes, qs_diag *d);

#endif
