/* matmul_hif8_vbmi_impl.h: the AVX-512 VBMI lookup of HiF8 codes (bf16 high
 * and low bytes of decode(c), 64 codes per vector), shared by the code-pack
 * decode (matmul_hif8_avx512vbmi.c) and the few-row kernel that multiplies
 * code packs in registers (matmul_gemv_codes_avx512bf16vbmi.c).  Include only
 * from files built with AVX-512 VBMI flags. */
#ifndef QS_MATMUL_HIF8_VBMI_IMPL_H
#define QS_MATMUL_HIF8_VBMI_IMPL_H

#include <immintrin.h>

#include "matmul_impl.h"

typedef struct mm_codes_vtab {
    __m512i hi[4], lo[4];   /* bf16 bytes of decode(c), c = 64 i + lane */
    __m512i perm_f32[2];    /* [0]: even codes first (F32), [1]: odd first (F32_SWAP) */
    __m512i perm_pairs;     /* codes of a pair row -> the order unpack(lo, hi) undoes */
    __m512i lo6;            /* low bf16 byte of finite t: lo6[t & 63] & ~(0x40 & ~t) */
} mm_codes_vtab;

/* The tables (after mm_codes_vtab_init_avx512vbmi_impl). */
const mm_codes_vtab *mm_codes_vtab_avx512vbmi_impl(void);

/* bf16 high / low bytes of the 64 pack bytes in c (lut: 0 any, 1 no NaN,
 * 2 finite).  Every byte but 0x80 (NaN) is sign | magnitude with
 * decode(c | 0x80) = -decode(c): when the pack holds no 0x80, the magnitude
 * is looked up (vpermi2b reads 7 index bits) and the sign copied into the
 * high byte, half the shuffles of the full lookup; when it holds no infinity
 * either, the low byte is one vpermb (6 index bits) and bit 6 of c. */
static inline __attribute__((always_inline)) void
mm_codes_lookup(const mm_codes_vtab *t, __m512i c, int lut, __m512i *hi, __m512i *lo)
{
    if (lut) {
        *hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(t->hi[0], c, t->hi[1]), c,
                                        _mm512_set1_epi8((char)0x80), 0xF8); /* a | (c & sign) */
        if (lut == 2)   /* a & ~(0x40 & ~c) */
            *lo = _mm512_ternarylogic_epi32(_mm512_permutexvar_epi8(c, t->lo6), c,
                                            _mm512_set1_epi8(0x40), 0xD0);
        else
            *lo = _mm512_permutex2var_epi8(t->lo[0], c, t->lo[1]);
        return;
    }
    __mmask64 top = _mm512_movepi8_mask(c);
    *hi = _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(t->hi[0], c, t->hi[1]),
                                 _mm512_permutex2var_epi8(t->hi[2], c, t->hi[3]));
    *lo = _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(t->lo[0], c, t->lo[1]),
                                 _mm512_permutex2var_epi8(t->lo[2], c, t->lo[3]));
}

#endif
