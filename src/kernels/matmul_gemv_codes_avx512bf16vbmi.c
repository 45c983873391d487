/* matmul_gemv_codes_avx512bf16vbmi.c: the products of a few rows (decode: one
 * token per sequence) straight from a HiF8 code pack, decoded in registers and
 * multiplied with vdpbf16ps (CPUs with AVX512-BF16 and AVX-512 VBMI).
 *
 * Per pair row of a micro-panel (64 codes, k pair p of 32 columns): a vpermi2b
 * looks up the high bytes of their bf16 values and, for a pack of finite codes,
 * a vpermb the low bytes (the pack's byte order makes 64 entries enough;
 * matmul_hif8.c, matmul_hif8_vbmi_impl.h; a second vpermi2b otherwise),
 * two unpacks within 128-bit lanes make the two vectors of bf16 pairs, and a
 * single row of A takes one vdpbf16ps per vector with its pair (bf16 of A[2p],
 * A[2p+1]) broadcast: no decoded panel is stored and read back, and one
 * instruction does the two products of a pair.  With several rows the pairs are
 * widened once (the odd k by an AND, the even by a shift) and each row takes
 * two FMAs per vector, the odd k first: a vdpbf16ps issues once per 2 cycles
 * on the shuffle port the lookups need, the FMAs on either vector port (2-4
 * rows 8-12% faster, a prompt's 5-8 rows, run as groups of 4, ~20%); the
 * caller sets FTZ/DAZ, which makes the FMAs vdpbf16ps's bits.  The unpacks keep
 * each column's two codes together but deal the columns out by lanes: vector 0
 * holds columns 0-3, 8-11, 16-19, 24-27 and vector 1 the others, so the
 * accumulators live in that order (C permuted into it on load and back on
 * store, once per call) instead of the codes being permuted per pair row.
 * Several micro-panels are read side by side (np) for mr x np x 2 independent
 * chains.
 * Bits: each output is init (0 or C) followed by one vdpbf16ps (or its two
 * FMAs) per k pair in k order, exactly what the blocked vdpbf16ps kernel
 * (mm_kernel_bf16_avx512bf16_impl) does on the decoded pairs and the same A
 * panel, so the bits are those of the
 * other paths for bf16 products (matmul_impl.h; tests/test_matmul_gemv.c).
 * Call only when cpu_level() >= CPU_LEVEL_AVX512BF16 and the CPU has VBMI.
 */
#include <immintrin.h>

#include "matmul_gemv_impl.h"
#include "matmul_hif8_vbmi_impl.h"

/* bytes ahead of each code stream prefetched into L1 (one line per pair row) */
enum { MM_GEMV_CODES_PF = 1024 };

static inline __attribute__((always_inline)) void
mm_gemv_codes_body(int kp, const uint32_t *a, ptrdiff_t rs, ptrdiff_t ks, const uint16_t *b,
                   size_t bstride, float *c, ptrdiff_t ldc, int nj_last, int load_c, const int mr,
                   const int np, const int lut)
{
    const mm_codes_vtab *t = mm_codes_vtab_avx512vbmi_impl();
    __m512 acc[MM_GEMV_ROWS][4][2];
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int q = 0; q < np; q++) {
            __m512 c0, c1;
            mm_gemv_cload(c + r * ldc, q, np, nj_last, load_c, &c0, &c1);
            acc[r][q][0] = _mm512_shuffle_f32x4(c0, c1, _MM_SHUFFLE(2, 0, 2, 0));
            acc[r][q][1] = _mm512_shuffle_f32x4(c0, c1, _MM_SHUFFLE(3, 1, 3, 1));
        }
    for (int p = 0; p < kp; p++) {
        __m512bh av[MM_GEMV_ROWS];
        __m512 ah[MM_GEMV_ROWS], al[MM_GEMV_ROWS];   /* A[2p+1], A[2p] as fp32 */
#pragma GCC unroll 4
        for (int r = 0; r < mr; r++) {
            __m512i u = _mm512_set1_epi32((int)a[r * rs + p * ks]);
            av[r] = (__m512bh)u;
            ah[r] = _mm512_castsi512_ps(_mm512_and_si512(u, _mm512_set1_epi32((int)0xFFFF0000u)));
            al[r] = _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
        }
#pragma GCC unroll 4
        for (int q = 0; q < np; q++) {
            const uint16_t *row = b + q * bstride + (size_t)p * MM_NR;
            _mm_prefetch((const char *)row + MM_GEMV_CODES_PF, _MM_HINT_T0);
            __m512i hi, lo;
            mm_codes_lookup(t, _mm512_loadu_si512(row), lut, &hi, &lo);
            __m512bh w0 = (__m512bh)_mm512_unpacklo_epi8(lo, hi);
            __m512bh w1 = (__m512bh)_mm512_unpackhi_epi8(lo, hi);
            if (mr == 1) {
                acc[0][q][0] = _mm512_dpbf16_ps(acc[0][q][0], av[0], w0);
                acc[0][q][1] = _mm512_dpbf16_ps(acc[0][q][1], av[0], w1);
                continue;
            }
            /* several rows: the pairs widened once, then FMAs, odd k first
             * (vdpbf16ps's order and, under FTZ/DAZ, its bits) */
            const __m512i himask = _mm512_set1_epi32((int)0xFFFF0000u);
            __m512 h0 = _mm512_castsi512_ps(_mm512_and_si512((__m512i)w0, himask));
            __m512 h1 = _mm512_castsi512_ps(_mm512_and_si512((__m512i)w1, himask));
            __m512 l0 = _mm512_castsi512_ps(_mm512_slli_epi32((__m512i)w0, 16));
            __m512 l1 = _mm512_castsi512_ps(_mm512_slli_epi32((__m512i)w1, 16));
#pragma GCC unroll 4
            for (int r = 0; r < mr; r++) {
                acc[r][q][0] = _mm512_fmadd_ps(ah[r], h0, acc[r][q][0]);
                acc[r][q][1] = _mm512_fmadd_ps(ah[r], h1, acc[r][q][1]);
                acc[r][q][0] = _mm512_fmadd_ps(al[r], l0, acc[r][q][0]);
                acc[r][q][1] = _mm512_fmadd_ps(al[r], l1, acc[r][q][1]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int q = 0; q < np; q++) {
            __m512 t0 = _mm512_shuffle_f32x4(acc[r][q][0], acc[r][q][1], _MM_SHUFFLE(1, 0, 1, 0));
            __m512 t1 = _mm512_shuffle_f32x4(acc[r][q][0], acc[r][q][1], _MM_SHUFFLE(3, 2, 3, 2));
            mm_gemv_cstore(c + r * ldc, q, np, nj_last,
                           _mm512_shuffle_f32x4(t0, t0, _MM_SHUFFLE(3, 1, 2, 0)),
                           _mm512_shuffle_f32x4(t1, t1, _MM_SHUFFLE(3, 1, 2, 0)));
        }
}

/* One layout of A (row-major: ks 1, or k-major: rs 1) and one lookup per body,
 * so the compiler sees constants where it can. */
#define MM_GEMV_CODES_LUT(R, NP, L)                                                             \
    if (a.ks == 1)                                                                              \
        mm_gemv_codes_body(kp, a.p, a.rs, 1, b, bstride, c, ldc, nj_last, load_c, R, NP, L);    \
    else                                                                                        \
        mm_gemv_codes_body(kp, a.p, 1, a.ks, b, bstride, c, ldc, nj_last, load_c, R, NP, L)
#define MM_GEMV_CODES_CASE(R, NP)                                                               \
    case (R) * 8 + (NP):                                                                        \
        if (lut == 2) {                                                                         \
            MM_GEMV_CODES_LUT(R, NP, 2);                                                        \
        } else if (lut == 1) {                                                                  \
            MM_GEMV_CODES_LUT(R, NP, 1);                                                        \
        } else {                                                                                \
            MM_GEMV_CODES_LUT(R, NP, 0);                                                        \
        }                                                                                       \
        break

void mm_gemv_codes_avx512bf16vbmi_impl(int kp, mm_apanel a, int mr, const uint16_t *b,
                                       size_t bstride, int np, float *c, ptrdiff_t ldc,
                                       int nj_last, int load_c, int flags)
{
    const int lut = flags & MM_DECODE_FINITE ? 2 : flags & MM_DECODE_NO_NAN ? 1 : 0;
    switch (mr * 8 + np) {
        MM_GEMV_SHAPES(MM_GEMV_CODES_CASE);
    }
}
