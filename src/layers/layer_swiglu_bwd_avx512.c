/* layer_swiglu_bwd_avx512.c: AVX-512 kernel of swiglu_backward (see layer_bwd_impl.h).
 * Same operation order as the portable loop, only exp differs. */
#include <immintrin.h>

#include "layer_bwd_impl.h"
#include "layer_elem_impl.h"
#include "../kernels/simd_exp_avx512_impl.h"

void swiglu_backward_avx512_impl(float *dgate, float *dup, const float *dout, const float *gate,
                                 const float *up, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        _mm_prefetch((const char *)(gate + i) + LAYER_STREAM_PF, _MM_HINT_T0);
        _mm_prefetch((const char *)(up + i) + LAYER_STREAM_PF, _MM_HINT_T0);
        _mm_prefetch((const char *)(dout + i) + LAYER_STREAM_PF, _MM_HINT_T0);
        __m512 g = _mm512_maskz_loadu_ps(k, gate + i), u = _mm512_maskz_loadu_ps(k, up + i);
        __m512 d = _mm512_maskz_loadu_ps(k, dout + i);
        __m512 sig = _mm512_div_ps(one, _mm512_add_ps(one, simd_exp512_impl(
                                                               _mm512_sub_ps(_mm512_setzero_ps(), g))));
        __m512 silu = _mm512_mul_ps(g, sig);
        /* dout * up * sig * (1 + g * (1 - sig)), left to right */
        __m512 t = _mm512_mul_ps(_mm512_mul_ps(d, u), sig);
        t = _mm512_mul_ps(t, _mm512_add_ps(one, _mm512_mul_ps(g, _mm512_sub_ps(one, sig))));
        _mm512_mask_storeu_ps(dgate + i, k, t);
        _mm512_mask_storeu_ps(dup + i, k, _mm512_mul_ps(d, silu));
    }
}
