/* matmul_avx512bf16.c: AVX512-BF16 micro-kernel (12 x 32) and bf16 conversion
 * (rows, pairs, and the B panels of w^T: 16 rows converted, then transposed).
 *
 * Operands are bf16 pairs (k even in the low half, k odd in the high half of
 * each 32-bit word).  Per k pair: two vector loads of packed B, 12 broadcast A
 * pairs, 24 vdpbf16ps, each doing acc = (acc + a[2p+1]*b[2p+1]) + a[2p]*b[2p]
 * with exact products, fp32 round-to-nearest-even after each addition, bf16
 * denormal inputs as zero and denormal results flushed (measured on this Zen 5:
 * 200000 of 200000 random cases equal that order; Intel's SDM documents it).
 * The fallbacks use the same order, so all bf16 paths agree bit for bit.  A is a k-major panel or a
 * row-major one (rows of pairs), the body inlined once per layout and row count
 * (mr <= 12), B's next micro-panel prefetched into L2 as in matmul_avx512.c.
 * The widening helpers feed the FMA kernel on bf16 pairs (mm_bf16_fma_impl):
 * a bf16 value is the high half of its fp32, so widening is a mask or a shift.
 * The conversions implement mm_bf16_bits (torch's rounding) in integer vector
 * arithmetic, so they give the same bits as the scalar code, NaN included.
 * Call only when cpu_level() >= CPU_LEVEL_AVX512BF16.
 */
#include <immintrin.h>

#include "matmul_bf16_avx512_impl.h"
#include "matmul_tile_avx512_impl.h"
#include "simd_tr16_avx512_impl.h"

static inline __attribute__((always_inline)) void
mm_bf16_body(int kp, const uint32_t *a, ptrdiff_t rs, ptrdiff_t ks, const uint32_t *b, float *c,
             ptrdiff_t ldc, int load_c, const char *pf, const int mr)
{
    __m512 acc[MM_MR][2];
    mm_tile_load_avx512(acc, c, ldc, load_c, mr);
    for (int p = 0; p < kp; p++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512(b + (size_t)p * MM_NR);
        __m512bh b1 = (__m512bh)_mm512_load_si512(b + (size_t)p * MM_NR + 16);
        _mm_prefetch(pf + (size_t)p * 128, _MM_HINT_T1);
        _mm_prefetch(pf + (size_t)p * 128 + 64, _MM_HINT_T1);
        const uint32_t *ap = a + p * ks;
#pragma GCC unroll 12
        for (int r = 0; r < mr; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[r * rs]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
    }
    mm_tile_store_avx512(acc, c, ldc, mr);
}

#define MM_BF16_ROWS(R)                                                                  \
    case R:                                                                              \
        if (a.ks == 1)                                                                   \
            mm_bf16_body(kp, a.p, a.rs, 1, b, c, ldc, load_c, pf, R);                    \
        else                                                                             \
            mm_bf16_body(kp, a.p, 1, a.ks, b, c, ldc, load_c, pf, R);                    \
        break

void mm_kernel_bf16_avx512bf16_impl(int kp, mm_apanel a, const uint32_t *b, float *c,
                                    ptrdiff_t ldc, int load_c, int mr, const void *pf)
{
    switch (mr) {
        MM_BF16_ROWS(1);
        MM_BF16_ROWS(2);
        MM_BF16_ROWS(3);
        MM_BF16_ROWS(4);
        MM_BF16_ROWS(5);
        MM_BF16_ROWS(6);
        MM_BF16_ROWS(7);
        MM_BF16_ROWS(8);
        MM_BF16_ROWS(9);
        MM_BF16_ROWS(10);
        MM_BF16_ROWS(11);
    default:
        MM_BF16_ROWS(12);
    }
}

void mm_bf16_pairs_avx512bf16_impl(uint32_t *dst, const float *lo, const float *hi, int n)
{
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512i l = mm_bf16_lanes(_mm512_maskz_loadu_ps(m, lo + i));
        __m512i h = hi ? mm_bf16_lanes(_mm512_maskz_loadu_ps(m, hi + i)) : _mm512_setzero_si512();
        _mm512_mask_storeu_epi32(dst + i, m, _mm512_or_si512(l, _mm512_slli_epi32(h, 16)));
    }
}

void mm_bf16_row_avx512bf16_impl(uint16_t *dst, const float *src, int n)
{
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512i l = mm_bf16_lanes(_mm512_maskz_loadu_ps(m, src + i));
        _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtepi32_epi16(l));
    }
}

/* Bytes ahead of each row of w that mm_bpanel_bf16_t16 prefetches: 32 rows
 * are read side by side, more streams than the hardware prefetcher follows.
 * The whole w^T pack from memory on 2 Zen 5 cores, alternating: 32000 x 768
 * 6.2-6.9 ms -> 3.1-3.4 (512 bytes: 3.9-5.3), 32000 x 288 3.5-3.7 -> 1.3-2.1. */
enum { MM_BPANEL_T_PF = 256 };

/* 16 columns of a bf16 B panel from 16 rows of w (B = w^T), pairs p0 ..
 * p0 + np - 1: each row's 32 floats become 16 pairs in one vector (the bf16
 * of k even in the low half), then a 16 x 16 transpose puts pair p of the 16
 * columns in one vector.  Rows at or past nj are zero. */
static inline __attribute__((always_inline)) void
mm_bpanel_bf16_t16(uint32_t *dst, const float *w, ptrdiff_t ld, int nj, int p0, int np,
                   __mmask16 m0, __mmask16 m1)
{
    __m512 r[16], t[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) {
        if (j >= nj) {
            r[j] = _mm512_setzero_ps();
            continue;
        }
        const float *s = w + (ptrdiff_t)j * ld + 2 * p0;
        /* this row's 32 k two steps ahead (two lines; past the row's end they
         * land in the next row, which a later panel reads) */
        _mm_prefetch((const char *)s + MM_BPANEL_T_PF, _MM_HINT_T0);
        _mm_prefetch((const char *)s + MM_BPANEL_T_PF + 64, _MM_HINT_T0);
        __m256i lo = _mm512_cvtepi32_epi16(mm_bf16_lanes(_mm512_maskz_loadu_ps(m0, s)));
        __m256i hi = _mm512_cvtepi32_epi16(mm_bf16_lanes(_mm512_maskz_loadu_ps(m1, s + 16)));
        r[j] = _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
    }
    simd_tr16_avx512(t, r);
    for (int i = 0; i < np; i++)
        _mm512_storeu_ps(dst + (size_t)(p0 + i) * MM_NR, t[i]);
}

void mm_bpanel_bf16_t_avx512bf16_impl(uint32_t *dst, const float *w, ptrdiff_t ld, int nj, int K)
{
    const int kp_n = (K + 1) / 2;
    for (int p0 = 0; p0 < kp_n; p0 += 16) { /* 16 pairs: 32 k */
        const int np = kp_n - p0 < 16 ? kp_n - p0 : 16, nk = K - 2 * p0 < 32 ? K - 2 * p0 : 32;
        const __mmask16 m0 = nk >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nk) - 1u);
        const __mmask16 m1 = nk >= 32   ? (__mmask16)0xFFFF
                             : nk > 16 ? (__mmask16)((1u << (nk - 16)) - 1u)
                                       : (__mmask16)0;
        mm_bpanel_bf16_t16(dst, w, ld, nj, p0, np, m0, m1);
        mm_bpanel_bf16_t16(dst + 16, nj > 16 ? w + 16 * ld : w, ld, nj - 16, p0, np, m0, m1);
    }
}

/* The pairs of columns c .. c + 15 (mask m: those < N) of the two rows, and
 * the rows' bf16 into d0 / d1 when d0; next (floats, 0: none): the same
 * columns of the rows that many floats on are prefetched (the next pair's, for
 * a pack sweeping the rows: a whole pair of rows of lead). */
static inline __attribute__((always_inline)) __m512i
mm_pairs_vec(const float *r0, const float *r1, int c, __mmask16 m, ptrdiff_t next, uint16_t *d0,
             uint16_t *d1)
{
    if (next) {
        _mm_prefetch((const char *)(r0 + next + c), _MM_HINT_T0);
        if (r1)
            _mm_prefetch((const char *)(r1 + next + c), _MM_HINT_T0);
    }
    __m512i l = mm_bf16_lanes(_mm512_maskz_loadu_ps(m, r0 + c));
    __m512i h = _mm512_setzero_si512();
    if (r1)
        h = mm_bf16_lanes(_mm512_maskz_loadu_ps(m, r1 + c));
    if (d0) {
        _mm256_mask_storeu_epi16(d0 + c, m, _mm512_cvtepi32_epi16(l));
        if (r1)
            _mm256_mask_storeu_epi16(d1 + c, m, _mm512_cvtepi32_epi16(h));
    }
    return _mm512_or_si512(l, _mm512_slli_epi32(h, 16));
}

/* The 12 pairs in lanes 0-11 of v to a panel row: 48 bytes, two plain stores */
static inline __attribute__((always_inline)) void mm_store12(uint32_t *dst, __m512i v)
{
    _mm256_storeu_si256((__m256i *)dst, _mm512_castsi512_si256(v));
    _mm_storeu_si128((__m128i *)(dst + 8), _mm512_extracti32x4_epi32(v, 2));
}

void mm_pairs_scatter_avx512bf16_impl(uint32_t *dst, size_t panel_elems, int W, int kp,
                                      const float *r0, const float *r1, int N, ptrdiff_t next,
                                      uint16_t *d0, uint16_t *d1)
{
    int c = 0, p = 0, off = 0;   /* column c = p W + off */
    uint32_t *row = dst + (size_t)kp * W;
    if (W == 12)   /* MM_MR: 48 columns are 4 whole panels, re-dealt in registers */
        for (; c + 48 <= N; c += 48, p += 4) {
            __m512i v0 = mm_pairs_vec(r0, r1, c, 0xFFFF, next, d0, d1);
            __m512i v1 = mm_pairs_vec(r0, r1, c + 16, 0xFFFF, next, d0, d1);
            __m512i v2 = mm_pairs_vec(r0, r1, c + 32, 0xFFFF, next, d0, d1);
            const __m512i i1 = _mm512_setr_epi32(12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
                                                 0, 0, 0, 0);
            const __m512i i2 = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0,
                                                 0, 0, 0);
            mm_store12(row + (size_t)p * panel_elems, v0);
            mm_store12(row + (size_t)(p + 1) * panel_elems, _mm512_permutex2var_epi32(v0, i1, v1));
            mm_store12(row + (size_t)(p + 2) * panel_elems, _mm512_permutex2var_epi32(v1, i2, v2));
            mm_store12(row + (size_t)(p + 3) * panel_elems, _mm512_alignr_epi32(v2, v2, 4));
        }
    for (; c < N; c += 16) {
        __mmask16 m = N - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (N - c)) - 1);
        __m512i v = mm_pairs_vec(r0, r1, c, m, next, d0, d1);
        /* the destination two pair rows on, where this panel's stores go next:
         * a pack's panels are as many write streams (64 at 2048 columns; the
         * pack of 768 x 2048 went from 330 to 220 us with it) */
        _mm_prefetch((const char *)(row + (size_t)p * panel_elems + off + 2 * W), _MM_HINT_T0);
        /* the panels these 16 columns fall in (one when W is a multiple of
         * 16, up to three at MM_MR), from column c = p W + off on: lane i
         * (column c + i) goes to offset off + i - lane0 of panel p + (the
         * panels passed), so each store's lane 0 address is that panel's
         * row + its first offset - its first lane (lanes before it are
         * masked off, and masked lanes are not accessed) */
        int lane0 = 0, pp = p, o = off, n = N - c < 16 ? N - c : 16;
        while (lane0 < n) {
            int k = W - o < n - lane0 ? W - o : n - lane0;
            __mmask16 in = (__mmask16)(((1u << k) - 1u) << lane0);
            _mm512_mask_storeu_epi32(row + (size_t)pp * panel_elems + o - lane0, in, v);
            lane0 += k;
            pp++;
            o = 0;
        }
        for (off += 16; off >= W; off -= W)
            p++;
    }
}

/* ---- widening for the FMA kernel on bf16 pairs ---- */

static inline __m512 mm_pair_hi(__m512i u)
{
    return _mm512_castsi512_ps(_mm512_and_si512(u, _mm512_set1_epi32((int)0xFFFF0000u)));
}

static inline __m512 mm_pair_lo(__m512i u)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}

void mm_bf16_widen_kmajor_avx512bf16_impl(float *dst, const uint32_t *src, int kp, int w,
                                          const void *pf)
{
    const char *pfc = pf;
    for (int p = 0; p < kp; p++) {
        const uint32_t *s = src + (size_t)p * w;
        float *d = dst + (size_t)2 * p * w;
        _mm_prefetch(pfc + (size_t)p * w * 4, _MM_HINT_T1);
        _mm_prefetch(pfc + (size_t)p * w * 4 + 64, _MM_HINT_T1);
        for (int j = 0; j < w; j += 16) {
            __mmask16 m = w - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (w - j)) - 1);
            __m512i u = _mm512_maskz_loadu_epi32(m, s + j);
            _mm512_mask_storeu_ps(d + j, m, mm_pair_hi(u));
            _mm512_mask_storeu_ps(d + w + j, m, mm_pair_lo(u));
        }
    }
}

void mm_bf16_widen_row_avx512bf16_impl(float *dst, const uint32_t *src, int kp)
{
    /* 16 pairs -> hi and lo vectors -> interleaved (hi first) into 32 floats */
    const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7,
                                             23);
    const __m512i hi_idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14,
                                             30, 15, 31);
    for (int p = 0; p < kp; p += 16) {
        int n = kp - p < 16 ? kp - p : 16;
        __m512i u = _mm512_maskz_loadu_epi32((__mmask16)((1u << n) - 1), src + p);
        __m512 h = mm_pair_hi(u), l = mm_pair_lo(u);
        __m512 d0 = _mm512_permutex2var_ps(h, lo_idx, l), d1 = _mm512_permutex2var_ps(h, hi_idx, l);
        int n2 = 2 * n; /* floats to store */
        _mm512_mask_storeu_ps(dst + 2 * p, (__mmask16)(n2 >= 16 ? 0xFFFFu : (1u << n2) - 1), d0);
        if (n2 > 16)
            _mm512_mask_storeu_ps(dst + 2 * p + 16,
                                  (__mmask16)(n2 >= 32 ? 0xFFFFu : (1u << (n2 - 16)) - 1), d1);
    }
}

void mm_bf16_round_swap_avx512bf16_impl(float *dst, const float *src, int n)
{
    int n_out = n + (n & 1);
    for (int i = 0; i < n_out; i += 16) {
        int nl = n - i < 16 ? n - i : 16, ns = n_out - i < 16 ? n_out - i : 16;
        __m512 v = _mm512_maskz_loadu_ps((__mmask16)((1u << nl) - 1), src + i);
        __m512 r = _mm512_castsi512_ps(_mm512_slli_epi32(mm_bf16_lanes(v), 16));
        /* swap within pairs: position k gets src[k ^ 1] */
        _mm512_mask_storeu_ps(dst + i, (__mmask16)((1u << ns) - 1), _mm512_permute_ps(r, 0xB1));
    }
}

void mm_apanel_kmajor_widen_avx512bf16_impl(float *dst, const uint32_t *src, ptrdiff_t rs, int mi,
                                            int kp)
{
    const __m512i hi_half = _mm512_set1_epi64(0xFFFF0000);
    for (int p0 = 0; p0 < kp; p0 += 8) { /* 8 pairs: 16 k */
        const int np = kp - p0 < 8 ? kp - p0 : 8;
        const __mmask8 mp = (__mmask8)((1u << np) - 1u);
        __m512 r[16], t[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) {
            if (j >= MM_MR || j >= mi) {
                r[j] = _mm512_setzero_ps();
                continue;
            }
            /* pair q in 64-bit lane q: k = 2q + 1 (the hi half) first, then 2q */
            __m512i u = _mm512_cvtepu32_epi64(
                _mm256_maskz_loadu_epi32(mp, src + (ptrdiff_t)j * rs + p0));
            r[j] = _mm512_castsi512_ps(
                _mm512_or_si512(_mm512_and_si512(u, hi_half), _mm512_slli_epi64(u, 48)));
        }
        simd_tr16_avx512(t, r);
        simd_tr16_store12_avx512(dst, 2 * p0, t, 2 * np);
    }
}

void mm_apanel_kmajor_round_swap_avx512bf16_impl(float *dst, const float *src, ptrdiff_t rs,
                                                 int mi, int kc)
{
    const int n_out = kc + (kc & 1);
    for (int k0 = 0; k0 < n_out; k0 += 16) {
        const int nl = kc - k0 < 16 ? kc - k0 : 16, ns = n_out - k0 < 16 ? n_out - k0 : 16;
        const __mmask16 ml = (__mmask16)((1u << nl) - 1u);
        __m512 r[16], t[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) {
            if (j >= MM_MR || j >= mi) {
                r[j] = _mm512_setzero_ps();
                continue;
            }
            __m512 v = _mm512_maskz_loadu_ps(ml, src + (ptrdiff_t)j * rs + k0);
            v = _mm512_castsi512_ps(_mm512_slli_epi32(mm_bf16_lanes(v), 16));
            r[j] = _mm512_permute_ps(v, 0xB1); /* position k gets k ^ 1 */
        }
        simd_tr16_avx512(t, r);
        simd_tr16_store12_avx512(dst, k0, t, ns);
    }
}
