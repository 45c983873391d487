/* digest.h: SHA-256 (FIPS 180-4) of buffers and files, for the provenance
 * recorded in results files (data file and model hashes, same values as
 * `sha256sum`); FNV-1a for fast non-cryptographic checksums and hash keys.
 * SHA-256 uses the x86 SHA extensions when the CPU has them (same bits as the
 * portable code; QS_CPU=scalar forces the portable code). */
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
 * work (eval starts it after loading the weights and collects the hashes when
 * it writes results.json); files of DIGEST_CACHE_MIN_BYTES or more go through
 * the hash cache below, so a checkpoint evaluated again is not re-hashed.  _start
 * copies the list; 0, or QS_ENOMEM with nothing started.  _finish waits for
 * the thread, writes hex[i] for paths[i] (hex may be NULL: results dropped),
 * frees the job and returns 0 or the first file's error (its diag in d).  Every
 * started job must be finished, also on error paths; NULL is accepted. */
typedef struct digest_files_job digest_files_job;
int digest_sha256_files_start(digest_files_job **out, const char *const *paths, int n,
                              qs_diag *d);
int digest_sha256_files_finish(digest_files_job *j, char (*hex)[65], qs_diag *d);

/* The hash of a large file remembered between runs (src/base/digest_cache.c:
 * keyed by device, inode, size, mtime and ctime to the nanosecond, not by the
 * path, so a checkpoint directory renamed into place still hits; at
 * $QS_HASH_CACHE, else $XDG_CACHE_HOME/qatscope/sha256.tsv, else
 * ~/.cache/qatscope/sha256.tsv; QS_HASH_CACHE=off disables it).
 * digest_sha256_file_cached: a file of >= min_bytes is taken from its
 * huggingface_hub record (digest_hf_sha256) or looked up, else (or on a
 * miss) hashed, and stored when >= min_bytes; the same hex as
 * digest_sha256_file.  lookup: 1 and hex on a hit; store: best effort (no
 * error: a cache that cannot be written is a miss next time), not for a file
 * changed in the last 2 s; store_written: for the writer of the file, which
 * hashed the bytes it wrote and has closed (and renamed) it: stored at once.
 * enabled: 1 unless QS_HASH_CACHE=off (or no cache path can be formed). */
#define DIGEST_CACHE_MIN_BYTES ((size_t)64 << 20)
int digest_sha256_file_cached(const char *path, char hex[65], size_t min_bytes, qs_diag *d);
int digest_cache_lookup(const char *path, char hex[65]);
void digest_cache_store(const char *path, const char hex[65]);
void digest_cache_store_written(const char *path, const char hex[65]);
int digest_cache_enabled(void);
/* The SHA-256 huggingface_hub recorded for a file it downloaded: 1 and hex
 * when path is a symbolic link to [...]/blobs/<64 lower-case hex> (a regular
 * file: its cache names each large (LFS) file by its SHA-256), or a regular
 * file DIR/NAME with DIR/.cache/huggingface/download/NAME.metadata (a
 * --local-dir download: commit, etag, time) whose etag is 64 lower-case hex
 * and whose time is not before the file's mtime; 0 otherwise or when the
 * cache is off. */
int digest_hf_sha256(const char *path, char hex[65]);

/* FNV-1a, 64 bits: per byte h = (h ^ byte) * 1099511628211.  Start from
 * DIGEST_FNV1A64_SEED (the standard offset basis), or from an earlier h to hash
 * a sequence piece by piece.  Not cryptographic: the checksums of train_state.bin
 * sections, the data hash of a token stream, the tokenizer's hash tables and
 * fingerprint (files and tests hold these values: never change the function). */
#define DIGEST_FNV1A64_SEED 14695981039346656037ull

static inline uint64_t digest_fnv1a64(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < bytes; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* The section checksum of train_state.bin from version 3 (src/base/digest_lanes.c
 * has the definition): eight xor-multiply-rotate chains over the little-endian
 * 64-bit words of each 64-byte block, folded with FNV-1a together with the tail
 * bytes and the length.  The same value whatever pieces the data comes in; ~10x
 * FNV-1a's speed (which is a chain of one multiply per byte).  Not
 * cryptographic; files hold these values: never change the function. */
typedef struct digest_lanes64 {
    uint64_t h[8];
    uint64_t total;
    unsigned char buf[64];
    unsigned buf_bytes;
} digest_lanes64;

void digest_lanes64_init(digest_lanes64 *s, uint64_t seed);
void digest_lanes64_update(digest_lanes64 *s, const void *data, size_t bytes);
uint64_t digest_lanes64_final(const digest_lanes64 *s);
uint64_t digest_lanes64_once(uint64_t seed, const void *data, size_t bytes);   /* one piece */

#endif
