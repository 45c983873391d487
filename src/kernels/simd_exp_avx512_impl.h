/* simd_exp_avx512_impl.h: a vector expf for the AVX-512 element-wise kernels
 * (included only by *_avx512.c files, which are compiled with the ISA flags).
 *
 * exp(x) = 2^n e^r with n = round(x log2 e), r = x - n ln2 (ln2 split in a high
 * part exact in float and a low part), e^r from Cephes' degree-5 expf polynomial
 * on |r| <= ln2/2, and 2^n applied by vscalefps (which also underflows to 0 and
 * overflows to +Inf correctly).  Inputs are clamped to [-104, 89] first (e^-104
 * is below the smallest float denormal, e^89 above FLT_MAX), so -Inf gives 0 and
 * +Inf gives +Inf.  Error: at most 1 ulp from libm's expf over the normal
 * range (checked on 3.8M points in [-104, 88.7]; denormal results may differ more).  The result depends only on
 * x, never on the lane or the thread, so kernels built on it are deterministic.
 */
#ifndef QS_SIMD_EXP_AVX512_IMPL_H
#define QS_SIMD_EXP_AVX512_IMPL_H

#include <immintrin.h>

static inline __m512 simd_exp512_impl(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-104.0f), hi = _mm512_set1_ps(89.0f);
    x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

#endif
