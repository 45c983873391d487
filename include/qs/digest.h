/* digest.h: SHA-256 (FIPS 180-4) of buffers and files, for the provenance
 * recorded in results files (data file and model hashes, same values as
 * `sha256sum`).  Uses the x86 SHA extensions when the CPU has them (same
 * bits as the portable code; QS_CPU=scalar forces the portable code). */
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
/* 1 when updates run on the SHA extensions (for reports; results are the same). */
int digest_sha256_accelerated(void);

/* Files hashed in order on a background thread while the caller does other
 * work (eval starts it before loading the weights and collects the hashes when
 * it writes results.json: the hashing is off the critical path).  _start
 * copies the list; 0, or QS_ENOMEM with nothing started.  _finish waits for
 * the thread, writes hex[i] for paths[i] (hex may be NULL: results dropped),
 * frees the job and returns 0 or the first file's error (its diag in d).  Every
 * started job must be finished, also on error paths; NULL is accepted. */
typedef struct digest_files_job digest_files_job;
int digest_sha256_files_start(digest_files_job **out, const char *const *paths, int n,
                              qs_diag *d);
int digest_sha256_files_finish(digest_files_job *j, char (*hex)[65], qs_diag *d);

#endif
