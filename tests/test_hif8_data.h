/* test_hif8_data.h: seeded test data for the HiF8 matmul tests
 * (test_matmul_hif8.c, test_matmul_gemv.c). */
#ifndef QS_TEST_HIF8_DATA_H
#define QS_TEST_HIF8_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "qs/hif8.h"
#include "qs/rng.h"

/* random finite codes (NaN 0x80, +-Inf never written by the encoder) */
static inline void test_hif8_codes(uint8_t *c, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        uint8_t v;
        do
            v = (uint8_t)(rng_splitmix64(&s) >> 56);
        while (v == HIF8_CODE_NAN || v == HIF8_CODE_POS_INF || v == HIF8_CODE_NEG_INF);
        c[i] = v;
    }
}

/* uniform values in [-4, 4) */
static inline void test_hif8_fill(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)(rng_splitmix64(&s) >> 11) / 9007199254740992.0 * 8.0 - 4.0);
}

#endif
