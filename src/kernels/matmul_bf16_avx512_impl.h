/* matmul_bf16_avx512_impl.h: fp32 -> bf16 rounding of 16 floats at a time with
 * mm_bf16_bits's result (round to nearest even, subnormal results to signed
 * zero, every NaN to 0x7FC0), shared by the bf16 conversions of
 * matmul_avx512bf16.c and the AMX GEMM's A conversion (matmul_amx.c).  Include
 * only from files built with AVX-512 flags. */
#ifndef QS_MATMUL_BF16_AVX512_IMPL_H
#define QS_MATMUL_BF16_AVX512_IMPL_H

#include <immintrin.h>

/* 16 floats -> 16 bf16 in the low halves of 32-bit lanes (mm_bf16_bits). */
static inline __m512i mm_bf16_lanes(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    __mmask16 tiny = _mm512_testn_epi32_mask(r, _mm512_set1_epi32(0x7F80));
    r = _mm512_mask_and_epi32(r, tiny, r, _mm512_set1_epi32(0x8000)); /* denormal -> +-0 */
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC0));
}

#endif
