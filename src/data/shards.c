/* shards.c: token shard files (format in include/qs/shards.h).
 *
 * The header is stored uncompressed so a reader can check magic, version, width,
 * token count and tokenizer hash before allocating anything; the payload is one
 * zstd frame written with its content size and checksum, so truncation and bit
 * flips are caught by zstd as well as by our own size checks.  Compression level
 * is fixed and single-threaded: the same tokens give the same bytes.
 */
#include "qs/shards.h"

#include <string.h>
#include <zstd.h>

#include "qs/bytes.h"
#include "qs/fileio.h"
#include "qs/mem.h"

static const char SHARD_MAGIC[8] = {'Q', 'S', 'T', 'O', 'K', 'S', 'H', '1'};
#define SHARD_ZSTD_LEVEL 6

int shard_token_bytes_for(int32_t vocab_size)
{
    return vocab_size <= 65536 ? 2 : 4;
}

int shard_write(const char *path, const int32_t *tokens, uint64_t n_tokens, int token_bytes,
                uint64_t tokenizer_hash, uint64_t n_docs, qs_diag *d)
{
    if (token_bytes != 2 && token_bytes != 4)
        return diag_set(d, QS_EINVAL, path, -1, "token width %d: expected 2 or 4", token_bytes);
    if (n_tokens > SIZE_MAX / 8)
        return diag_set(d, QS_ERANGE, path, -1, "%llu tokens do not fit in memory",
                        (unsigned long long)n_tokens);
    size_t raw_bytes = (size_t)n_tokens * (size_t)token_bytes;
    size_t bound = ZSTD_compressBound(raw_bytes);
    unsigned char *raw = qs_malloc(raw_bytes + 1);
    unsigned char *file = qs_malloc(SHARD_HEADER_BYTES + bound);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    int rc = 0;
    if (!raw || !file || !cc) {
        rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory for %zu token bytes", raw_bytes);
        goto done;
    }
    for (uint64_t i = 0; i < n_tokens; i++) {
        int32_t t = tokens[i];
        if (t < 0 || (token_bytes == 2 && t > 0xFFFF)) {
            rc = diag_set(d, QS_ERANGE, path, -1, "token %llu is %ld: expected 0..%s",
                          (unsigned long long)i, (long)t, token_bytes == 2 ? "65535" : "2^31-1");
            goto done;
        }
        if (token_bytes == 2) {
            raw[2 * i] = (unsigned char)t;
            raw[2 * i + 1] = (unsigned char)(t >> 8);
        } else {
            bytes_put_u32le(raw + 4 * i, (uint32_t)t);
        }
    }
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, SHARD_ZSTD_LEVEL);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
    size_t z = ZSTD_compress2(cc, file + SHARD_HEADER_BYTES, bound, raw, raw_bytes);
    if (ZSTD_isError(z)) {
        rc = diag_set(d, QS_EIO, path, -1, "zstd compression failed: %s", ZSTD_getErrorName(z));
        goto done;
    }
    memset(file, 0, SHARD_HEADER_BYTES);
    memcpy(file, SHARD_MAGIC, 8);
    bytes_put_u32le(file + 8, SHARD_VERSION);
    bytes_put_u32le(file + 12, (uint32_t)token_bytes);
    bytes_put_u64le(file + 16, n_tokens);
    bytes_put_u64le(file + 24, tokenizer_hash);
    bytes_put_u64le(file + 32, n_docs);
    bytes_put_u64le(file + 40, (uint64_t)z);
    rc = fileio_write_atomic(path, file, SHARD_HEADER_BYTES + z, d);
done:
    ZSTD_freeCCtx(cc);
    qs_free(raw);
    qs_free(file);
    return rc;
}

static int header_parse(const char *path, const unsigned char *p, size_t file_bytes,
                        shard_header *h, qs_diag *d)
{
    if (file_bytes < SHARD_HEADER_BYTES)
        return diag_set(d, QS_ETRUNC, path, -1,
                        "file has %zu bytes: expected a %d-byte token shard header", file_bytes,
                        SHARD_HEADER_BYTES);
    if (memcmp(p, SHARD_MAGIC, 8))
        return diag_set(d, QS_EFORMAT, path, -1,
                        "bad magic: expected \"QSTOKSH1\" (a qatscope token shard)");
    h->version = bytes_get_u32le(p + 8);
    h->token_bytes = bytes_get_u32le(p + 12);
    h->n_tokens = bytes_get_u64le(p + 16);
    h->tokenizer_hash = bytes_get_u64le(p + 24);
    h->n_docs = bytes_get_u64le(p + 32);
    h->payload_bytes = bytes_get_u64le(p + 40);
    if (h->version != SHARD_VERSION)
        return diag_set(d, QS_EUNSUPPORTED, path, -1, "shard version %u: expected %d",
                        h->version, SHARD_VERSION);
    if (h->token_bytes != 2 && h->token_bytes != 4)
        return diag_set(d, QS_EFORMAT, path, -1, "token width %u: expected 2 or 4",
                        h->token_bytes);
    if (h->n_tokens > (uint64_t)(SIZE_MAX / 8))
        return diag_set(d, QS_EFORMAT, path, -1, "token count %llu is implausible",
                        (unsigned long long)h->n_tokens);
    if (h->payload_bytes != file_bytes - SHARD_HEADER_BYTES)
        return diag_set(d, h->payload_bytes > file_bytes - SHARD_HEADER_BYTES ? QS_ETRUNC
                                                                               : QS_EFORMAT,
                        path, -1, "header says %llu payload bytes, file has %zu",
                        (unsigned long long)h->payload_bytes, file_bytes - SHARD_HEADER_BYTES);
    return 0;
}

int shard_header_read(const char *path, shard_header *h, qs_diag *d)
{
    fileio_map m = {0};
    int rc = fileio_map_open(&m, path, d);
    if (rc)
        return rc;
    rc = header_parse(path, m.data, m.bytes, h, d);
    fileio_unmap(&m);
    return rc;
}

int shard_read(const char *path, const uint64_t *expect_hash, shard_header *h, int32_t **tokens,
               qs_diag *d)
{
    *tokens = NULL;
    fileio_map m = {0};
    int rc = fileio_map_open(&m, path, d);
    if (rc)
        return rc;
    if ((rc = header_parse(path, m.data, m.bytes, h, d)) != 0)
        goto done;
    if (expect_hash && h->tokenizer_hash != *expect_hash) {
        rc = diag_set(d, QS_EINVAL, path, -1,
                      "tokenizer hash %016llx differs from the model's %016llx: expected shards "
                      "made with this model's tokenizer (re-run qatscope tokenize --model DIR)",
                      (unsigned long long)h->tokenizer_hash, (unsigned long long)*expect_hash);
        goto done;
    }
    size_t raw_bytes = (size_t)h->n_tokens * h->token_bytes;
    const unsigned char *payload = m.data + SHARD_HEADER_BYTES;
    unsigned long long content = ZSTD_getFrameContentSize(payload, (size_t)h->payload_bytes);
    if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN ||
        content != raw_bytes) {
        rc = diag_set(d, QS_EFORMAT, path, -1,
                      "payload is not a zstd frame of %zu bytes (%llu tokens x %u)", raw_bytes,
                      (unsigned long long)h->n_tokens, h->token_bytes);
        goto done;
    }
    unsigned char *raw = qs_malloc(raw_bytes + 1);
    int32_t *out = qs_malloc((size_t)h->n_tokens * sizeof *out + 1);
    if (!raw || !out) {
        qs_free(raw);
        qs_free(out);
        rc = diag_set(d, QS_ENOMEM, path, -1, "out of memory for %llu tokens",
                      (unsigned long long)h->n_tokens);
        goto done;
    }
    size_t got = ZSTD_decompress(raw, raw_bytes, payload, (size_t)h->payload_bytes);
    if (ZSTD_isError(got) || got != raw_bytes) {
        qs_free(raw);
        qs_free(out);
        rc = diag_set(d, QS_EFORMAT, path, -1, "corrupt payload: %s (expected %zu bytes)",
                      ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short frame", raw_bytes);
        goto done;
    }
    for (uint64_t i = 0; i < h->n_tokens; i++)
        out[i] = h->token_bytes == 2 ? (int32_t)(raw[2 * i] | raw[2 * i + 1] << 8)
                                     : (int32_t)bytes_get_u32le(raw + 4 * i);
    for (uint64_t i = 0; i < h->n_tokens && h->token_bytes == 4; i++)
        if (out[i] < 0) {
            rc = diag_set(d, QS_EFORMAT, path, -1, "token %llu is negative",
                          (unsigned long long)i);
            break;
        }
    qs_free(raw);
    if (rc)
        qs_free(out);
    else
        *tokens = out;
done:
    fileio_unmap(&m);
    return rc;
}
