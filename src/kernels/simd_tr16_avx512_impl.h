/* simd_tr16_avx512_impl.h: a 16 x 16 fp32 transpose in registers, for the
 * k-major A panels of the AVX-512 GEMM kernels (matmul_avx512.c,
 * matmul_avx512bf16.c) and attention's key/value tiles (layer_attn_avx512.c).
 * Include only from files built with AVX-512 flags. */
#ifndef QS_SIMD_TR16_AVX512_IMPL_H
#define QS_SIMD_TR16_AVX512_IMPL_H

#include <immintrin.h>

/* t[i] lane j = r[j] lane i (r is clobbered). */
static inline __attribute__((always_inline)) void simd_tr16_avx512(__m512 t[16], __m512 r[16])
{
#pragma GCC unroll 8
    for (int j = 0; j < 16; j += 2) {
        t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
        t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
    }
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) { /* r[4m + d]: rows 4m .. 4m+3, dims 4q + d in block q */
        const __m512d t0 = _mm512_castps_pd(t[4 * m]), t1 = _mm512_castps_pd(t[4 * m + 1]);
        const __m512d t2 = _mm512_castps_pd(t[4 * m + 2]), t3 = _mm512_castps_pd(t[4 * m + 3]);
        r[4 * m] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        r[4 * m + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        r[4 * m + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        r[4 * m + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
#pragma GCC unroll 4
    for (int d = 0; d < 4; d++) {
        const __m512 x01 = _mm512_shuffle_f32x4(r[d], r[4 + d], 0x44);
        const __m512 y01 = _mm512_shuffle_f32x4(r[8 + d], r[12 + d], 0x44);
        const __m512 x23 = _mm512_shuffle_f32x4(r[d], r[4 + d], 0xee);
        const __m512 y23 = _mm512_shuffle_f32x4(r[8 + d], r[12 + d], 0xee);
        t[d] = _mm512_shuffle_f32x4(x01, y01, 0x88);
        t[4 + d] = _mm512_shuffle_f32x4(x01, y01, 0xdd);
        t[8 + d] = _mm512_shuffle_f32x4(x23, y23, 0x88);
        t[12 + d] = _mm512_shuffle_f32x4(x23, y23, 0xdd);
    }
}

/* dst[(k0 + i) * 12 + r] = t[i] lane r for i < n, r < 12: rows of a transposed
 * 16 x 16 block into a k-major panel of 12 rows (the GEMM's MM_MR). */
static inline __attribute__((always_inline)) void
simd_tr16_store12_avx512(float *dst, int k0, const __m512 t[16], int n)
{
    for (int i = 0; i < n; i++)
        _mm512_mask_storeu_ps(dst + (size_t)(k0 + i) * 12, 0x0FFF, t[i]);
}

#endif
