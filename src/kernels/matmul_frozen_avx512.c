/* matmul_frozen_avx512.c: the pair-format pack of a bf16-stored weight with
 * AVX-512 (matmul_frozen.c holds the portable loop and the contract).
 *
 * A full panel (MM_NR = 32 rows of w) takes 16 pairs at a time: each row's 16
 * pairs are one 64-byte load, canonicalized on 16-bit lanes as mm_bf16_bits
 * would (subnormal -> signed zero, NaN -> 0x7FC0), and the two 16 x 16 blocks of
 * 32-bit pairs are transposed in registers (unpack 32, unpack 64, then 128-bit
 * lane shuffles) into 16 rows of the panel.  Byte-for-byte the portable loop's
 * output (tests/test_matmul_frozen.c compares the products).  Called only for
 * the AVX512-BF16 kernel's format, i.e. on AVX-512 CPUs.
 */
#include <immintrin.h>

#include "matmul_impl.h"

static inline __m512i mm_canon16(__m512i v)
{
    const __m512i em = _mm512_set1_epi16(0x7F80);
    __m512i e = _mm512_and_si512(v, em);
    __mmask32 sub = _mm512_cmpeq_epi16_mask(e, _mm512_setzero_si512());
    __mmask32 nan = _mm512_cmpeq_epi16_mask(e, em) &
                    _mm512_test_epi16_mask(v, _mm512_set1_epi16(0x007F));
    v = _mm512_mask_mov_epi16(v, sub, _mm512_and_si512(v, _mm512_set1_epi16((short)0x8000)));
    return _mm512_mask_mov_epi16(v, nan, _mm512_set1_epi16(0x7FC0));
}

/* r[i] = row i (16 words) -> r[k] = word k of every row */
static inline void mm_transpose16(__m512i r[16])
{
    __m512i a[16], b[16];
    for (int i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int q = 0; q < 16; q += 4) {
        b[q] = _mm512_unpacklo_epi64(a[q], a[q + 2]);
        b[q + 1] = _mm512_unpackhi_epi64(a[q], a[q + 2]);
        b[q + 2] = _mm512_unpacklo_epi64(a[q + 1], a[q + 3]);
        b[q + 3] = _mm512_unpackhi_epi64(a[q + 1], a[q + 3]);
    }
    /* b[4q + s], 128-bit lane L: rows 4q .. 4q+3 at word 4L + s */
    for (int s = 0; s < 4; s++) {
        __m512i c0 = _mm512_shuffle_i32x4(b[s], b[4 + s], 0x44);
        __m512i c1 = _mm512_shuffle_i32x4(b[s], b[4 + s], 0xEE);
        __m512i c2 = _mm512_shuffle_i32x4(b[8 + s], b[12 + s], 0x44);
        __m512i c3 = _mm512_shuffle_i32x4(b[8 + s], b[12 + s], 0xEE);
        r[s] = _mm512_shuffle_i32x4(c0, c2, 0x88);
        r[4 + s] = _mm512_shuffle_i32x4(c0, c2, 0xDD);
        r[8 + s] = _mm512_shuffle_i32x4(c1, c3, 0x88);
        r[12 + s] = _mm512_shuffle_i32x4(c1, c3, 0xDD);
    }
}

int mm_bpanel_bf16_bits_avx512_impl(uint32_t *dst, const uint16_t *w, int K, int j0)
{
    const int kp_vec = (K / 2) / 16 * 16;   /* blocks of 16 whole pairs */
    for (int kp0 = 0; kp0 < kp_vec; kp0 += 16)
        for (int h = 0; h < MM_NR / 16; h++) {
            __m512i r[16];
            for (int i = 0; i < 16; i++)
                r[i] = mm_canon16(_mm512_loadu_si512(w + (size_t)(j0 + 16 * h + i) * K + 2 * kp0));
            mm_transpose16(r);
            for (int k = 0; k < 16; k++)
                _mm512_storeu_si512(dst + (size_t)(kp0 + k) * MM_NR + 16 * h, r[k]);
        }
    return kp_vec;
}
