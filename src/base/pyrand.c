/* pyrand.c: CPython's random.Random reproduced for few-shot sampling.
 *
 * Seeding an int follows CPython's random_seed(): the absolute value is split
 * into 32-bit words, least significant first, and fed to MT19937's
 * init_by_array (seed 0 gives the key [0]).  sample() follows Lib/random.py:
 * the pool method when n <= setsize (21, + 4**ceil(log(3k, 4)) when k > 5),
 * else rejection with a "selected" set.  _randbelow(n) draws getrandbits(
 * n.bit_length()) until the value is below n.
 */
#include <math.h>
#include <string.h>

#include "qs/mem.h"
#include "qs/pyrand.h"

#define PYRAND_N 624
#define PYRAND_M 397

static void pyrand_init_genrand(pyrand *r, uint32_t s)
{
    r->mt[0] = s;
    for (int i = 1; i < PYRAND_N; i++)
        r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
    r->mti = PYRAND_N;
}

static void pyrand_init_by_array(pyrand *r, const uint32_t *key, int key_len)
{
    pyrand_init_genrand(r, 19650218u);
    int i = 1, j = 0;
    for (int k = PYRAND_N > key_len ? PYRAND_N : key_len; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1664525u)) + key[j] +
                   (uint32_t)j;
        i++;
        j++;
        if (i >= PYRAND_N) {
            r->mt[0] = r->mt[PYRAND_N - 1];
            i = 1;
        }
        if (j >= key_len)
            j = 0;
    }
    for (int k = PYRAND_N - 1; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= PYRAND_N) {
            r->mt[0] = r->mt[PYRAND_N - 1];
            i = 1;
        }
    }
    r->mt[0] = 0x80000000u;
}

void pyrand_seed(pyrand *r, uint64_t seed)
{
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    pyrand_init_by_array(r, key, key[1] ? 2 : 1);
}

uint32_t pyrand_u32(pyrand *r)
{
    static const uint32_t mag01[2] = {0u, 0x9908b0dfu};
    uint32_t y;
    if (r->mti >= PYRAND_N) {
        int kk;
        for (kk = 0; kk < PYRAND_N - PYRAND_M; kk++) {
            y = (r->mt[kk] & 0x80000000u) | (r->mt[kk + 1] & 0x7fffffffu);
            r->mt[kk] = r->mt[kk + PYRAND_M] ^ (y >> 1) ^ mag01[y & 1u];
        }
        for (; kk < PYRAND_N - 1; kk++) {
            y = (r->mt[kk] & 0x80000000u) | (r->mt[kk + 1] & 0x7fffffffu);
            r->mt[kk] = r->mt[kk + (PYRAND_M - PYRAND_N)] ^ (y >> 1) ^ mag01[y & 1u];
        }
        y = (r->mt[PYRAND_N - 1] & 0x80000000u) | (r->mt[0] & 0x7fffffffu);
        r->mt[PYRAND_N - 1] = r->mt[PYRAND_M - 1] ^ (y >> 1) ^ mag01[y & 1u];
        r->mti = 0;
    }
    y = r->mt[r->mti++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
}

/* getrandbits(k), 0 <= k <= 32 */
static uint32_t pyrand_getrandbits(pyrand *r, int k)
{
    if (k <= 0)
        return 0;
    return pyrand_u32(r) >> (32 - k);
}

/* _randbelow(n), n < 2^32; 0 when n == 0 */
static uint64_t pyrand_randbelow(pyrand *r, uint64_t n)
{
    if (n == 0)
        return 0;
    int k = 0;
    for (uint64_t v = n; v; v >>= 1)
        k++;
    uint64_t x = pyrand_getrandbits(r, k);
    while (x >= n)
        x = pyrand_getrandbits(r, k);
    return x;
}

int pyrand_sample(pyrand *r, size_t n, size_t k, size_t *out, qs_diag *d)
{
    if (k > n)
        return diag_set(d, QS_EINVAL, NULL, -1, "sample of %zu from a population of %zu", k, n);
    if (n >= ((size_t)1 << 32))
        return diag_set(d, QS_ERANGE, NULL, -1, "population of %zu is too large", n);
    size_t setsize = 21;
    if (k > 5)
        setsize += (size_t)pow(4.0, ceil(log((double)(k * 3)) / log(4.0)));
    if (n <= setsize) {
        size_t *pool = qs_malloc((n ? n : 1) * sizeof *pool);
        if (!pool)
            return diag_set(d, QS_ENOMEM, NULL, -1, "sample pool of %zu", n);
        for (size_t i = 0; i < n; i++)
            pool[i] = i;
        for (size_t i = 0; i < k; i++) {
            size_t j = (size_t)pyrand_randbelow(r, n - i);
            out[i] = pool[j];
            pool[j] = pool[n - i - 1];
        }
        qs_free(pool);
        return 0;
    }
    for (size_t i = 0; i < k; i++) {
        size_t j;
        int again;
        do {
            j = (size_t)pyrand_randbelow(r, n);
            again = 0;
            for (size_t t = 0; t < i; t++)   /* k is small (shots): a linear set is enough */
                if (out[t] == j)
                    again = 1;
        } while (again);
        out[i] = j;
    }
    return 0;
}
