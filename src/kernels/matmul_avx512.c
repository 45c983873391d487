/* matmul_avx512.c: AVX-512 fp32 micro-kernel, MM_MR x MM_NR = 12 x 32.
 *
 * 24 zmm accumulators (12 rows x 2 vectors of 16 columns); per k step two
 * vector loads of the packed B row and 12 broadcasts of A: 24 FMAs against 14
 * loads, which keeps both FMA pipes of a Zen 5 core busy.  A is either a packed
 * k-major panel or rows read in place (x itself, row stride = IN); the body is
 * inlined once per layout so each gets constant strides where it can.
 * Each accumulator is one FMA chain in k order (see matmul_impl.h).
 * Call only when cpu_level() >= CPU_LEVEL_AVX512.
 */
#include <immintrin.h>

#include "matmul_tile_avx512_impl.h"

static inline __attribute__((always_inline)) void
mm_f32_body(int kc, const float *a, ptrdiff_t rs, ptrdiff_t ks, const float *b, float *c,
            ptrdiff_t ldc, int load_c)
{
    __m512 acc[MM_MR][2];
    mm_tile_load_avx512(acc, c, ldc, load_c);
    for (int k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(b + (size_t)k * MM_NR);
        __m512 b1 = _mm512_load_ps(b + (size_t)k * MM_NR + 16);
        const float *ak = a + k * ks;
#pragma GCC unroll 12
        for (int r = 0; r < MM_MR; r++) {
            __m512 av = _mm512_set1_ps(ak[r * rs]);
            acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
        }
    }
    mm_tile_store_avx512(acc, c, ldc);
}

void mm_kernel_f32_avx512_impl(int kc, mm_apanel a, const float *b, float *c, ptrdiff_t ldc,
                               int load_c)
{
    if (a.ks == 1)
        mm_f32_body(kc, a.p, a.rs, 1, b, c, ldc, load_c);
    else
        mm_f32_body(kc, a.p, 1, a.ks, b, c, ldc, load_c);
}
