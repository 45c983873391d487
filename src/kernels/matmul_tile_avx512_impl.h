/* matmul_tile_avx512_impl.h: the mr x 32 C tile (mr <= 12) of the AVX-512
 * micro-kernels (fp32 in matmul_avx512.c, bf16 pairs in matmul_avx512bf16.c):
 * up to 24 zmm accumulators, mr rows x 2 vectors of 16 columns, loaded from C
 * (or zeroed) before the k loop and stored back after it.  Include only from
 * files built with AVX-512 flags; always_inline with a constant mr, so acc
 * stays in registers and the row loops unroll. */
#ifndef QS_MATMUL_TILE_AVX512_IMPL_H
#define QS_MATMUL_TILE_AVX512_IMPL_H

#include <immintrin.h>

#include "matmul_impl.h"

static inline __attribute__((always_inline)) void
mm_tile_load_avx512(__m512 acc[MM_MR][2], const float *c, ptrdiff_t ldc, int load_c,
                    const int mr)
{
#pragma GCC unroll 12
    for (int r = 0; r < mr; r++) {
        acc[r][0] = load_c ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();
        acc[r][1] = load_c ? _mm512_loadu_ps(c + r * ldc + 16) : _mm512_setzero_ps();
    }
}

static inline __attribute__((always_inline)) void
mm_tile_store_avx512(__m512 acc[MM_MR][2], float *c, ptrdiff_t ldc, const int mr)
{
#pragma GCC unroll 12
    for (int r = 0; r < mr; r++) {
        _mm512_storeu_ps(c + r * ldc, acc[r][0]);
        _mm512_storeu_ps(c + r * ldc + 16, acc[r][1]);
    }
}

#endif
