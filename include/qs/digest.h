/* digest.h: SHA-256 (FIPS 180-4) of buffers and files, for the provenance
 * recorded in results files (data file and model hashes, same values as
 * `sha256sum`). */
#ifndef QS_DIGEST_H
#define QS_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"

typedef struct digest_sha256 {
    uint32_t h[8];
    uint64_t total_bytes;
    unsigned char buf[64];
    size_t buf_bytes;
} digest_sha256;

void digest_sha256_init(digest_sha256 *s);
void digest_sha256_update(digest_sha256 *s, const void *data, size_t bytes);
void digest_sha256_final(digest_sha256 *s, char hex[65]);   /* lower-case hex + NUL */
/* Hash of the file's bytes as stored (a .zst file is hashed compressed). */
int digest_sha256_file(const char *path, char hex[65], qs_diag *d);

#endif
