/* rng.h: explicit-state random numbers (no globals; the state is a plain value
 * a checkpoint can store and restore bit-exactly).
 *
 * Generator: xorshift64* (Vigna), state seeded through splitmix64 so that any
 * seed, including 0, gives a good non-zero state.  Not cryptographic.
 *   rng r; rng_seed(&r, 1234); uint32_t x = rng_u32(&r); float u = rng_uniform(&r);
 */
#ifndef QS_RNG_H
#define QS_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct rng {
    uint64_t state; /* never 0 after rng_seed */
} rng;

void rng_seed(rng *r, uint64_t seed);
uint64_t rng_u64(rng *r);
uint32_t rng_u32(rng *r);                 /* high 32 bits of rng_u64 */
uint32_t rng_below(rng *r, uint32_t n);   /* uniform in [0, n), unbiased; n > 0 */
float rng_uniform(rng *r);                /* [0, 1), 24 random bits */
float rng_normal(rng *r);                 /* N(0, 1), Box-Muller, two uniforms per call */
void rng_shuffle_u32(rng *r, uint32_t *a, size_t n); /* Fisher-Yates, n < 2^32 */
/* Independent stream for (seed, stream), e.g. one per epoch or per thread. */
void rng_seed_stream(rng *r, uint64_t seed, uint64_t stream);

/* splitmix64 (Steele, Lea, Flood): adds the golden-ratio increment to *state and
 * returns the mixed value.  Seeds rng above; also the stand-alone generator of
 * model init, sampling, bootstrap and subset draws, whose outputs tests and
 * fixtures hold (never change it). */
static inline uint64_t rng_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#endif
