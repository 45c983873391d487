/* layer_swiglu_avx512.c: SwiGLU forward with a vector exp (see layer_elem_impl.h).
 *
 * exp(x) = 2^n e^r with n = round(x log2 e) and r = x - n ln2 (ln2 split in a
 * high part exact in float and a low part, so r is exact to ~2^-32); e^r on
 * |r| <= ln2/2 by its Taylor polynomial of degree 6 (truncation < 2^-23 rel),
 * Horner with FMA; 2^n applied by vscalefps, which gives inf / 0 beyond the
 * float range exactly where expf overflows / underflows.  x is clamped to
 * [-104, 89] first so n stays small; NaN propagates.  silu(g) u = g / (1 +
 * exp(-g)) * u, in that order, as the scalar code.  Call only when cpu_level()
 * >= CPU_LEVEL_AVX512.
 */
#include <immintrin.h>

#include "layer_elem_impl.h"

static inline __m512 swiglu_exp(__m512 x)
{
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x); /* ln2 high: 9 bits */
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);    /* ln2 - high */
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

void swiglu_avx512_impl(float *out, const float *gate, const float *up, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
        __m512 e = swiglu_exp(_mm512_sub_ps(_mm512_setzero_ps(), g));
        __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, u));
    }
}
