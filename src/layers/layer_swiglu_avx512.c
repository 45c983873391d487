/* layer_swiglu_avx512.c: SwiGLU forward with the vector exp the element-wise
 * AVX-512 kernels share (simd_exp_avx512_impl.h: at most 1 ulp from expf over
 * the normal range, inf / 0 where expf overflows / underflows, NaN propagates;
 * the SwiGLU backward uses the same one).  silu(g) u = g / (1 + exp(-g)) * u,
 * in that order, as the scalar code.  Call only when cpu_level() >=
 * CPU_LEVEL_AVX512.
 */
#include <immintrin.h>

#include "layer_elem_impl.h"
#include "../kernels/simd_exp_avx512_impl.h"

void swiglu_avx512_impl(float *out, const float *gate, const float *up, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        _mm_prefetch((const char *)(gate + i) + LAYER_STREAM_PF, _MM_HINT_T0);
        _mm_prefetch((const char *)(up + i) + LAYER_STREAM_PF, _MM_HINT_T0);
        __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
        __m512 e = simd_exp512_impl(_mm512_sub_ps(_mm512_setzero_ps(), g));
        __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, u));
    }
}
