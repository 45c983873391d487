/* digest_impl.h: internals of digest.c shared with its SHA-extension path and
 * with digest_cache.c (not API).
 *
 * Both paths compress whole 64-byte blocks into the state h[0..7] (FIPS 180-4
 * section 6.2.2); digest.c picks one at run time (digest_sha256_blocks_impl)
 * and does the buffering and padding, so they agree bit for bit by
 * construction of the interface and are compared in tests/test_digest.c. */
#ifndef QS_DIGEST_IMPL_H
#define QS_DIGEST_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* digest_cache.c, shared with the background files job of digest.c: for a
 * file of >= min_bytes, known: 1 and hex when huggingface_hub recorded it or
 * the cache has it; remember: store a hash just made by reading it. */
int digest_known_impl(const char *path, size_t min_bytes, char hex[65]);
void digest_remember_impl(const char *path, size_t min_bytes, const char hex[65]);

/* The round constants K[0..63] (FIPS 180-4 section 4.2.2). */
extern const uint32_t digest_k_impl[64];

/* n_blocks blocks of p with the SHA-NI instructions (x86 SHA extensions; call
 * only when the CPU has them: digest.c checks CPUID). */
void digest_sha256_blocks_shani_impl(uint32_t h[8], const unsigned char *p, size_t n_blocks);

#endif
