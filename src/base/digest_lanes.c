/* digest_lanes.c: the 64-bit section checksum of train_state.bin version 3
 * (qs/digest.h: digest_lanes64).
 *
 * FNV-1a's byte chain (a multiply per byte, each waiting on the last) reads
 * ~0.8 GB/s: 12 s for a 1B run's 9.2 GB of optimizer moments on every
 * checkpoint write and every --resume.  Here eight independent chains each take
 * one little-endian 64-bit word of every 64-byte block,
 *   h_j = rotl64((h_j ^ w) * K, 31),   K = 0x9E3779B97F4A7C15 (odd),
 * so the multiplies overlap and the loop keeps up with memory.  The rotation
 * brings a word's high bits down to where the next multiply spreads them (with
 * xor-multiply alone, two flips of the same top bit in one lane cancel).  The
 * result folds, with FNV-1a, each lane's final value, the bytes after the last
 * whole block and the total length (so appending zeros changes it).
 * A checksum against damage (truncation, flipped bits, zeroed pages), not a
 * cryptographic hash. */
#include "qs/digest.h"

#include <string.h>

#define LANES_K 0x9E3779B97F4A7C15ull

static inline uint64_t lanes_rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t lanes_word(const unsigned char *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

static void lanes_blocks(uint64_t h[8], const unsigned char *p, size_t n_blocks)
{
    uint64_t a0 = h[0], a1 = h[1], a2 = h[2], a3 = h[3];
    uint64_t a4 = h[4], a5 = h[5], a6 = h[6], a7 = h[7];
    for (size_t b = 0; b < n_blocks; b++, p += 64) {
        a0 = lanes_rotl((a0 ^ lanes_word(p + 0)) * LANES_K, 31);
        a1 = lanes_rotl((a1 ^ lanes_word(p + 8)) * LANES_K, 31);
        a2 = lanes_rotl((a2 ^ lanes_word(p + 16)) * LANES_K, 31);
        a3 = lanes_rotl((a3 ^ lanes_word(p + 24)) * LANES_K, 31);
        a4 = lanes_rotl((a4 ^ lanes_word(p + 32)) * LANES_K, 31);
        a5 = lanes_rotl((a5 ^ lanes_word(p + 40)) * LANES_K, 31);
        a6 = lanes_rotl((a6 ^ lanes_word(p + 48)) * LANES_K, 31);
        a7 = lanes_rotl((a7 ^ lanes_word(p + 56)) * LANES_K, 31);
    }
    h[0] = a0, h[1] = a1, h[2] = a2, h[3] = a3;
    h[4] = a4, h[5] = a5, h[6] = a6, h[7] = a7;
}

void digest_lanes64_init(digest_lanes64 *s, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    for (int j = 0; j < 8; j++)
        s->h[j] = seed ^ (LANES_K * (uint64_t)(j + 1));
}

void digest_lanes64_update(digest_lanes64 *s, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    s->total += bytes;
    if (bytes == 0)   /* data may be NULL then */
        return;
    if (s->buf_bytes) {
        size_t take = 64 - s->buf_bytes < bytes ? 64 - s->buf_bytes : bytes;
        memcpy(s->buf + s->buf_bytes, p, take);
        s->buf_bytes += (unsigned)take;
        p += take;
        bytes -= take;
        if (s->buf_bytes < 64)
            return;
        lanes_blocks(s->h, s->buf, 1);
        s->buf_bytes = 0;
    }
    lanes_blocks(s->h, p, bytes / 64);
    p += bytes / 64 * 64;
    memcpy(s->buf, p, bytes % 64);
    s->buf_bytes = (unsigned)(bytes % 64);
}

uint64_t digest_lanes64_final(const digest_lanes64 *s)
{
    unsigned char le[8];
    uint64_t f = DIGEST_FNV1A64_SEED;
    for (int j = 0; j < 8; j++) {
        for (int k = 0; k < 8; k++)
            le[k] = (unsigned char)(s->h[j] >> (8 * k));
        f = digest_fnv1a64(f, le, 8);
    }
    f = digest_fnv1a64(f, s->buf, s->buf_bytes);
    for (int k = 0; k < 8; k++)
        le[k] = (unsigned char)(s->total >> (8 * k));
    return digest_fnv1a64(f, le, 8);
}

uint64_t digest_lanes64_once(uint64_t seed, const void *data, size_t bytes)
{
    digest_lanes64 s;
    digest_lanes64_init(&s, seed);
    digest_lanes64_update(&s, data, bytes);
    return digest_lanes64_final(&s);
}
