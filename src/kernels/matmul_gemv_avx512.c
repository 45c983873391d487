/* matmul_gemv_avx512.c: the products of a few rows (decode: one token per
 * sequence) on the FMA units, straight from the B pack.
 *
 * With M <= MM_GEMV_ROWS the blocked kernel's widening of each B micro-panel
 * into scratch (and the 2 FMA chains per row it then runs) costs more than
 * streaming B: here several micro-panels (np, MM_NR columns each) are read
 * side by side along k, bf16 pairs widened in registers (the odd k first for
 * an A in mm_bf16_order, as mm_bf16_widen_kmajor_avx512bf16_impl lays them
 * out; HiF8 codes decoded to such pairs a few rows ahead) or fp32 rows, so mr x np x 2 independent FMA chains hide the FMA latency and B
 * is read once, from memory, 1 or 2 bytes per weight.  Each accumulator is
 * still one FMA chain in k order, k = 0..kk-1: the bits of the blocked kernel
 * on the widened panels (tests/test_matmul_gemv.c).
 * Call only when cpu_level() >= CPU_LEVEL_AVX512.
 */
#include <immintrin.h>

#include "matmul_gemv_impl.h"

/* bytes ahead of each B stream prefetched into L1 (two lines per pair row) */
enum { MM_GEMV_PF = 2048 };

static inline __attribute__((always_inline)) void
mm_gemv_body(int kk, const float *a, ptrdiff_t rs, ptrdiff_t ks, const void *b, size_t bstride,
             int pairs, int odd_first, float *c, ptrdiff_t ldc, int nj_last, int load_c,
             const int mr, const int np)
{
    __m512 acc[MM_GEMV_ROWS][4][2];
    MM_GEMV_ACC_LOAD(acc, c, ldc, mr, np, nj_last, load_c);
    if (pairs) {
        /* pair u = lo (k even) | hi (k odd) << 16; the first term of each pair
         * is hi when odd_first (A swapped, as mm_bf16_order), else lo */
        const uint32_t *bp = b;
        const __m512i himask = _mm512_set1_epi32((int)0xFFFF0000u);
        int kp = (kk + 1) / 2;
        for (int p = 0; p < kp; p++) {
            const float *ak = a + (ptrdiff_t)(2 * p) * ks;
            const int second = 2 * p + 1 < kk; /* an odd kk ends on a first half */
#pragma GCC unroll 4
            for (int q = 0; q < np; q++) {
                const uint32_t *row = bp + q * bstride + (size_t)p * MM_NR;
                _mm_prefetch((const char *)row + MM_GEMV_PF, _MM_HINT_T0);
                _mm_prefetch((const char *)row + MM_GEMV_PF + 64, _MM_HINT_T0);
                __m512i u0 = _mm512_load_si512(row), u1 = _mm512_load_si512(row + 16);
                __m512 h0 = _mm512_castsi512_ps(_mm512_and_si512(u0, himask));
                __m512 h1 = _mm512_castsi512_ps(_mm512_and_si512(u1, himask));
                __m512 l0 = _mm512_castsi512_ps(_mm512_slli_epi32(u0, 16));
                __m512 l1 = _mm512_castsi512_ps(_mm512_slli_epi32(u1, 16));
                __m512 f0 = odd_first ? h0 : l0, f1 = odd_first ? h1 : l1;
                __m512 s0 = odd_first ? l0 : h0, s1 = odd_first ? l1 : h1;
#pragma GCC unroll 4
                for (int r = 0; r < mr; r++) {
                    __m512 av = _mm512_set1_ps(ak[r * rs]);
                    acc[r][q][0] = _mm512_fmadd_ps(av, f0, acc[r][q][0]);
                    acc[r][q][1] = _mm512_fmadd_ps(av, f1, acc[r][q][1]);
                }
                if (second)
#pragma GCC unroll 4
                    for (int r = 0; r < mr; r++) {
                        __m512 av = _mm512_set1_ps(ak[r * rs + ks]);
                        acc[r][q][0] = _mm512_fmadd_ps(av, s0, acc[r][q][0]);
                        acc[r][q][1] = _mm512_fmadd_ps(av, s1, acc[r][q][1]);
                    }
            }
        }
    } else {
        const float *bf = b;
        for (int k = 0; k < kk; k++) {
            const float *ak = a + (ptrdiff_t)k * ks;
#pragma GCC unroll 4
            for (int q = 0; q < np; q++) {
                const float *row = bf + q * bstride + (size_t)k * MM_NR;
                __m512 b0 = _mm512_load_ps(row), b1 = _mm512_load_ps(row + 16);
#pragma GCC unroll 4
                for (int r = 0; r < mr; r++) {
                    __m512 av = _mm512_set1_ps(ak[r * rs]);
                    acc[r][q][0] = _mm512_fmadd_ps(av, b0, acc[r][q][0]);
                    acc[r][q][1] = _mm512_fmadd_ps(av, b1, acc[r][q][1]);
                }
            }
        }
    }
    MM_GEMV_ACC_STORE(acc, c, ldc, mr, np, nj_last);
}

/* One layout of A (row-major: ks 1, or k-major: rs 1) per body, so the
 * compiler sees a constant stride where it can. */
#define MM_GEMV_CASE(R, NP)                                                                   \
    case (R) * 8 + (NP):                                                                      \
        if (a.ks == 1)                                                                        \
            mm_gemv_body(kk, a.p, a.rs, 1, b, bstride, pairs, odd_first, c, ldc, nj_last, load_c, R, NP); \
        else                                                                                  \
            mm_gemv_body(kk, a.p, 1, a.ks, b, bstride, pairs, odd_first, c, ldc, nj_last, load_c, R, NP); \
        break

void mm_gemv_avx512_impl(int kk, mm_apanel a, int mr, const void *b, size_t bstride, int pairs,
                         int odd_first, int np, float *c, ptrdiff_t ldc, int nj_last, int load_c)
{
    switch (mr * 8 + np) {
        MM_GEMV_SHAPES(MM_GEMV_CASE);
    }
}
