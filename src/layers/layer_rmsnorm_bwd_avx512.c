/* layer_rmsnorm_bwd_avx512.c: the AVX-512 kernels of rmsnorm_backward (see
 * layer_elem_impl.h), called by layer_rmsnorm.c when cpu_level() >= CPU_LEVEL_AVX512.
 *
 * Numerics, against the portable loops of layer_rmsnorm.c:
 *  - dot = sum_c g w x: every product as the portable loop forms it, in double
 *    ((double)g * w exact, then * x, one rounding), summed in 8 double lanes
 *    per 16 floats (two accumulators) and reduced in _mm512_reduce_add_pd's
 *    fixed tree, as the forward's sum of squares: dot, hence k, may differ from
 *    the portable sequential sum in their last bits;
 *  - k = (float)(dot * r * r * r / C): the portable double expression;
 *  - dx += ((g * w) * r) - (k * x) in fp32, the portable loop's operations in
 *    its order, one rounding each (separate mul/sub/add: no FMA; this file is
 *    built with -std=c11, so GCC does not contract them either): given the same
 *    k, the same bits;
 *  - dw += (g * x) * r over rows in order, 16 columns per vector: the portable
 *    loop's bits.
 * Tails use masked lanes (zeros add nothing), so an element's result does not
 * depend on its position in the row. */
#include <immintrin.h>

#include "layer_elem_impl.h"

static inline __mmask16 tail_mask(int left)
{
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}

static inline __m512d lo_pd(__m512 v)
{
    return _mm512_cvtps_pd(_mm512_castps512_ps256(v));
}

static inline __m512d hi_pd(__m512 v)
{
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* sum_c ((double)g[c] * w[c]) * x[c]: lanes 0-7 and 8-15 of every 16 floats in
 * two accumulators, then one reduction (as rmsnorm_row_avx512_impl); the
 * streams of g, x and dx prefetched for this pass and the next. */
static double bwd_dot(const float *g, const float *x, const float *w, const float *dx, int C)
{
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int c = 0; c < C; c += 16) {
        __mmask16 m = tail_mask(C - c);
        _mm_prefetch((const char *)(g + c) + LAYER_STREAM_PF, _MM_HINT_T0);
        _mm_prefetch((const char *)(x + c) + LAYER_STREAM_PF, _MM_HINT_T0);
        _mm_prefetch((const char *)(dx + c) + LAYER_STREAM_PF, _MM_HINT_T0);
        __m512 gv = _mm512_maskz_loadu_ps(m, g + c), wv = _mm512_maskz_loadu_ps(m, w + c);
        __m512 xv = _mm512_maskz_loadu_ps(m, x + c);
        s0 = _mm512_add_pd(s0, _mm512_mul_pd(_mm512_mul_pd(lo_pd(gv), lo_pd(wv)), lo_pd(xv)));
        s1 = _mm512_add_pd(s1, _mm512_mul_pd(_mm512_mul_pd(hi_pd(gv), hi_pd(wv)), hi_pd(xv)));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

void rmsnorm_bwd_row_avx512_impl(float *dx, const float *g, const float *x, const float *w,
                                 float r, int C)
{
    double dot = bwd_dot(g, x, w, dx, C);
    float k = (float)(dot * r * r * r / C);
    const __m512 rv = _mm512_set1_ps(r), kv = _mm512_set1_ps(k);
    for (int c = 0; c < C; c += 16) {
        __mmask16 m = tail_mask(C - c);
        __m512 gw = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, g + c), _mm512_maskz_loadu_ps(m, w + c));
        __m512 kx = _mm512_mul_ps(kv, _mm512_maskz_loadu_ps(m, x + c));
        __m512 d = _mm512_sub_ps(_mm512_mul_ps(gw, rv), kx);
        _mm512_mask_storeu_ps(dx + c, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, dx + c), d));
    }
}

void rmsnorm_dw_cols_avx512_impl(float *dw, const float *dout, const float *x, const float *rstd,
                                 int N, int C, int c0, int c1)
{
    for (int n = 0; n < N; n++) {
        const float *gn = dout + (size_t)n * C, *xn = x + (size_t)n * C;
        const __m512 rv = _mm512_set1_ps(rstd[n]);
        for (int c = c0; c < c1; c += 16) {
            __mmask16 m = tail_mask(c1 - c);
            __m512 gx = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, gn + c),
                                      _mm512_maskz_loadu_ps(m, xn + c));
            __m512 acc = _mm512_add_ps(_mm512_maskz_loadu_ps(m, dw + c), _mm512_mul_ps(gx, rv));
            _mm512_mask_storeu_ps(dw + c, m, acc);
        }
    }
}
