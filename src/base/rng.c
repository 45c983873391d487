/* rng.c: xorshift64* with splitmix64 seeding (see include/qs/rng.h).
 * Numerical contract: rng_uniform returns k / 2^24 for k in [0, 2^24); rng_normal
 * uses 1 - u for the log so it never sees log(0). */
#include "qs/rng.h"

#include <math.h>

void rng_seed(rng *r, uint64_t seed)
{
    uint64_t x = seed;
    r->state = rng_splitmix64(&x);
    if (r->state == 0)
        r->state = 0x9E3779B97F4A7C15ULL;
}

void rng_seed_stream(rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed;
    uint64_t a = rng_splitmix64(&x);
    rng_seed(r, a ^ (stream * 0xD1B54A32D192ED03ULL + 0x8CB92BA72F3D8DD7ULL));
}

uint64_t rng_u64(rng *r)
{
    uint64_t x = r->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

uint32_t rng_u32(rng *r)
{
    return (uint32_t)(rng_u64(r) >> 32);
}

uint32_t rng_below(rng *r, uint32_t n)
{
    /* Lemire's multiply-shift with rejection: no modulo bias */
    uint64_t m = (uint64_t)rng_u32(r) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)rng_u32(r) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

float rng_uniform(rng *r)
{
    return (float)(rng_u32(r) >> 8) * (1.0f / 16777216.0f);
}

float rng_normal(rng *r)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    return (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2));
}

void rng_shuffle_u32(rng *r, uint32_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        uint32_t j = rng_below(r, (uint32_t)i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}
