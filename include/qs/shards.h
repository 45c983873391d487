/* shards.h: token shard files (what `qatscope tokenize --input` writes).
 *
 * File layout, little-endian, version 1:
 *   offset  size  field
 *        0     8  magic "QSTOKSH1"
 *        8     4  version (1)
 *       12     4  token width in bytes: 2 (vocab <= 65536) or 4
 *       16     8  n_tokens
 *       24     8  tokenizer hash (tokenizer_hash(): FNV-1a over vocab + merges)
 *       32     8  n_docs (documents that START in this shard)
 *       40     8  payload bytes (must equal file size - 64)
 *       48    16  reserved, zero
 *       64     -  one zstd frame (content size + checksum flags set) holding
 *                 n_tokens * width bytes of token ids
 * Checklist: a new field = bump SHARD_VERSION, write it in shard_write(), read
 * and validate it in shard_read(), add a bad file to tests/test_shards.c.
 */
#ifndef QS_SHARDS_H
#define QS_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"

#define SHARD_VERSION 1
#define SHARD_HEADER_BYTES 64

typedef struct shard_header {
    uint32_t version;
    uint32_t token_bytes; /* 2 or 4 */
    uint64_t n_tokens;
    uint64_t tokenizer_hash;
    uint64_t n_docs;
    uint64_t payload_bytes;
} shard_header;

/* Token width for a vocabulary: 2 if every id fits in uint16, else 4. */
int shard_token_bytes_for(int32_t vocab_size);

/* Write tokens atomically (tmp + rename).  Every id must be in [0, 2^(8*width)). */
int shard_write(const char *path, const int32_t *tokens, uint64_t n_tokens, int token_bytes,
                uint64_t tokenizer_hash, uint64_t n_docs, qs_diag *d);

/* Header only (validated against the file size). */
int shard_header_read(const char *path, shard_header *h, qs_diag *d);

/* Whole shard: validated header, decompressed and checked payload.  When
 * expect_hash is non-NULL a different tokenizer hash is refused (QS_EINVAL).
 * *tokens is qs_malloc'd. */
int shard_read(const char *path, const uint64_t *expect_hash, shard_header *h, int32_t **tokens,
               qs_diag *d);

#endif
