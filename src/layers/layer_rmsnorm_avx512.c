/* layer_rmsnorm_avx512.c: one RMSNorm row, optionally after a residual add (see
 * layer_elem_impl.h).  Squares are exact in double (24-bit significands) and
 * summed in 8 double lanes per 16 floats (two accumulators), then reduced in a
 * fixed tree; the row is scaled in fp32 as the scalar code does ((x * r) * w,
 * two roundings).  Call only when cpu_level() >= CPU_LEVEL_AVX512. */
#include <immintrin.h>
#include <math.h>

#include "layer_elem_impl.h"

float rmsnorm_row_avx512_impl(float *out, float *sum, const float *a, const float *b,
                              const float *w, int C, float eps)
{
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int c = 0; c < C; c += 16) {
        __mmask16 m = C - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1);
        _mm_prefetch((const char *)(a + c) + LAYER_STREAM_PF, _MM_HINT_T0);
        if (b)
            _mm_prefetch((const char *)(b + c) + LAYER_STREAM_PF, _MM_HINT_T0);
        __m512 x = _mm512_maskz_loadu_ps(m, a + c);
        if (b) {
            x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, b + c));
            _mm512_mask_storeu_ps(sum + c, m, x);
        }
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
        __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
        s0 = _mm512_fmadd_pd(lo, lo, s0);
        s1 = _mm512_fmadd_pd(hi, hi, s1);
    }
    double ss = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    float r = (float)(1.0 / sqrt(ss / C + eps));
    const float *x = b ? sum : a;
    const __m512 rv = _mm512_set1_ps(r);
    for (int c = 0; c < C; c += 16) {
        __mmask16 m = C - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + c), rv);
        _mm512_mask_storeu_ps(out + c, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + c)));
    }
    return r;
}
