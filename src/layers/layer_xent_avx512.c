/* layer_xent_avx512.c: AVX-512 row kernels of xent_forward / xent_backward
 * (see layer_bwd_impl.h). */
#include <immintrin.h>
#include <math.h>

#include "layer_bwd_impl.h"
#include "layer_elem_impl.h"
#include "../kernels/simd_exp_avx512_impl.h"

/* The passes over rows of logits from memory prefetch LAYER_STREAM_PF bytes
 * ahead (layer_elem_impl.h).  The rows ([N, V] fp32: 131 MB at 1024 x 32000)
 * come from DRAM; the hardware prefetcher alone kept the backward's one-pass
 * exp loop at ~12 GB/s.  With it, xent_backward_pairs with the forward's
 * statistics went from 9.0-12.4 ms to 3.2-4.0 ms at 1024 x 32000 on 2 Zen 5
 * cores (1024 and 4096 bytes: the same); the max pass from 2.8 to 2.5 ms.  The
 * values are untouched. */

static float xent_row_max(const float *l, int V)
{
    int v = 0;
    __m512 vmx = _mm512_set1_ps(l[0]);
    for (; v + 16 <= V; v += 16) {
        _mm_prefetch((const char *)(l + v) + LAYER_STREAM_PF, _MM_HINT_T0);
        vmx = _mm512_max_ps(vmx, _mm512_loadu_ps(l + v));
    }
    float mx = _mm512_reduce_max_ps(vmx);
    for (; v < V; v++)
        mx = l[v] > mx ? l[v] : mx;
    return mx;
}

/* sum_v exp(l[v] - mx) in double (lanes 0-7 and 8-15 apart, then a fixed tree);
 * g != NULL: also stores each exp in g[v] */
static double xent_row_sumexp(float *g, const float *l, int V, float mx)
{
    __m512 bmx = _mm512_set1_ps(mx);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int v = 0; v < V; v += 16) {
        __mmask16 k = V - v >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (V - v)) - 1u);
        __m512 e = simd_exp512_impl(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, l + v), bmx));
        e = _mm512_maskz_mov_ps(k, e);
        if (g)
            _mm512_mask_storeu_ps(g + v, k, e);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(
                                   _mm512_castps_pd(e), 1))));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

float xent_forward_row_avx512_impl(const float *l, int V, int32_t tg, float *mx, double *sum)
{
    *mx = xent_row_max(l, V);
    *sum = xent_row_sumexp(NULL, l, V, *mx);
    return (float)(log(*sum) + *mx - l[tg]);
}

void xent_backward_row_avx512_impl(float *g, const float *l, int V, int32_t tg, float scale,
                                   float mx, double sum)
{
    __m512 bsc = _mm512_set1_ps(scale);
    if (sum >= 0) {   /* the forward's statistics: exp, 1 / sum and scale in one pass */
        __m512 bmx = _mm512_set1_ps(mx), binv = _mm512_set1_ps((float)(1.0 / sum));
        for (int v = 0; v < V; v += 16) {
            __mmask16 k = V - v >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (V - v)) - 1u);
            _mm_prefetch((const char *)(l + v) + LAYER_STREAM_PF, _MM_HINT_T0);
            __m512 e = simd_exp512_impl(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, l + v), bmx));
            _mm512_mask_storeu_ps(g + v, k, _mm512_mul_ps(_mm512_mul_ps(e, binv), bsc));
        }
        g[tg] -= scale;
        return;
    }
    mx = xent_row_max(l, V);
    sum = xent_row_sumexp(g, l, V, mx);
    int v;
    float inv = (float)(1.0 / sum);
    __m512 binv = _mm512_set1_ps(inv);
    for (v = 0; v + 16 <= V; v += 16)
        _mm512_storeu_ps(g + v, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(g + v), binv), bsc));
    for (; v < V; v++)
        g[v] = g[v] * inv * scale;
    g[tg] -= scale;
}
