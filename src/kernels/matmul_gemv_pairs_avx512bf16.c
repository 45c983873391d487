/* matmul_gemv_pairs_avx512bf16.c: the products of a few rows (decode: one
 * token per sequence) straight from a bf16 pair pack, with vdpbf16ps (CPUs
 * with AVX512-BF16).
 *
 * The blocked kernel (mm_kernel_bf16_avx512bf16_impl) on one row runs two
 * vdpbf16ps chains over one B micro-panel at a time and prefetches the next
 * whole panel into L2 while it works: at one token the product is a stream of
 * the weights from memory, and two chains with a panel-sized prefetch leave the
 * memory system idle part of the time (on a Zen 5, `generate` on a 1B bf16
 * checkpoint decoded 16-17 tokens/s that way and 20-22 with this kernel).
 * Here np micro-panels (up to 4) are read side by side along k, each stream
 * prefetched into L1 a fixed distance ahead, for mr x np x 2 independent
 * chains.
 * Bits: each output is its init (0, C or the bias already in C) followed by
 * one vdpbf16ps per k pair in k order, exactly what the blocked kernel does
 * with the same A pairs: the same bits (tests/test_matmul_gemv.c).
 * Call only when cpu_level() >= CPU_LEVEL_AVX512BF16.
 */
#include <immintrin.h>

#include "matmul_gemv_impl.h"

/* bytes ahead of each B stream prefetched into L1 (two lines per pair row) */
enum { MM_GEMV_PAIRS_PF = 2048 };

static inline __attribute__((always_inline)) void
mm_gemv_pairs_body(int kp, const uint32_t *a, ptrdiff_t rs, ptrdiff_t ks, const uint32_t *b,
                   size_t bstride, float *c, ptrdiff_t ldc, int nj_last, int load_c, const int mr,
                   const int np)
{
    __m512 acc[MM_GEMV_ROWS][4][2];
    MM_GEMV_ACC_LOAD(acc, c, ldc, mr, np, nj_last, load_c);
    for (int p = 0; p < kp; p++) {
        __m512bh av[MM_GEMV_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < mr; r++)
            av[r] = (__m512bh)_mm512_set1_epi32((int)a[r * rs + p * ks]);
#pragma GCC unroll 4
        for (int q = 0; q < np; q++) {
            const uint32_t *row = b + q * bstride + (size_t)p * MM_NR;
            _mm_prefetch((const char *)row + MM_GEMV_PAIRS_PF, _MM_HINT_T0);
            _mm_prefetch((const char *)row + MM_GEMV_PAIRS_PF + 64, _MM_HINT_T0);
            __m512bh w0 = (__m512bh)_mm512_load_si512(row);
            __m512bh w1 = (__m512bh)_mm512_load_si512(row + 16);
#pragma GCC unroll 4
            for (int r = 0; r < mr; r++) {
                acc[r][q][0] = _mm512_dpbf16_ps(acc[r][q][0], av[r], w0);
                acc[r][q][1] = _mm512_dpbf16_ps(acc[r][q][1], av[r], w1);
            }
        }
    }
    MM_GEMV_ACC_STORE(acc, c, ldc, mr, np, nj_last);
}

/* One layout of A (row-major: ks 1, or k-major: rs 1) per body. */
#define MM_GEMV_PAIRS_CASE(R, NP)                                                               \
    case (R) * 8 + (NP):                                                                        \
        if (a.ks == 1)                                                                          \
            mm_gemv_pairs_body(kp, a.p, a.rs, 1, b, bstride, c, ldc, nj_last, load_c, R, NP);   \
        else                                                                                    \
            mm_gemv_pairs_body(kp, a.p, 1, a.ks, b, bstride, c, ldc, nj_last, load_c, R, NP);   \
        break

void mm_gemv_pairs_avx512bf16_impl(int kp, mm_apanel a, int mr, const uint32_t *b,
                                   size_t bstride, int np, float *c, ptrdiff_t ldc, int nj_last,
                                   int load_c)
{
    switch (mr * 8 + np) {
        MM_GEMV_SHAPES(MM_GEMV_PAIRS_CASE);
    }
}
