/* matmul_avx512bf16.c: AVX512-BF16 micro-kernel, MM_MR x MM_NR = 12 x 32.
 *
 * Operands are packed as bf16 pairs (k even in the low half, k odd in the high
 * half of each 32-bit word).  Per k pair: two vector loads of packed B, 12
 * broadcast A pairs, 24 vdpbf16ps, each adding a[2p]*b[2p] + a[2p+1]*b[2p+1]
 * into an fp32 accumulator (the instruction flushes bf16 denormals and rounds
 * to nearest even; the two products are exact, so the result differs from the
 * strict k-order fp32 sum only by the rounding of the pair's sum).  Call only
 * when cpu_level() >= CPU_LEVEL_AVX512BF16.
 */
#include <immintrin.h>

#include "matmul_impl.h"

void mm_kernel_bf16_avx512bf16_impl(int kp, const uint32_t *a, const uint32_t *b, float *c,
                                    ptrdiff_t ldc, int load_c)
{
    __m512 acc[MM_MR][2];
#pragma GCC unroll 12
    for (int r = 0; r < MM_MR; r++) {
        acc[r][0] = load_c ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();
        acc[r][1] = load_c ? _mm512_loadu_ps(c + r * ldc + 16) : _mm512_setzero_ps();
    }
    for (int p = 0; p < kp; p++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512(b + (size_t)p * MM_NR);
        __m512bh b1 = (__m512bh)_mm512_load_si512(b + (size_t)p * MM_NR + 16);
        const uint32_t *ap = a + (size_t)p * MM_MR;
#pragma GCC unroll 12
        for (int r = 0; r < MM_MR; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[r]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < MM_MR; r++) {
        _mm512_storeu_ps(c + r * ldc, acc[r][0]);
        _mm512_storeu_ps(c + r * ldc + 16, acc[r][1]);
    }
}
