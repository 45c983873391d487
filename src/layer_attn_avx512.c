/* layer_attn_avx512.c: AVX-512 versions of the attention inner loops (see
 * layer_attn_impl.h).  Scores keep 64 keys in 4 registers across the head
 * dimension; the weighted sum keeps 64 output lanes in registers across keys.
 * Same summation order as the portable loops, mul then add (no FMA).  Call
 * only when cpu_level() >= CPU_LEVEL_AVX512. */
#include <immintrin.h>

#include "layer_attn_impl.h"

static __mmask16 attn_tail_mask(int left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

void attn_scores_t_avx512_impl(float *p, const float *qr, const float *kt, int n, size_t ld,
                               int hd, float scale)
{
    const __m512 sc = _mm512_set1_ps(scale);
    int j = 0;
    for (; j + 64 <= n; j += 64) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i = 0; i < hd; i++) {
            const __m512 qi = _mm512_set1_ps(qr[i]);
            const float *kr = kt + (size_t)i * ld + j;
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(qi, _mm512_loadu_ps(kr)));
            a1 = _mm512_add_ps(a1, _mm512_mul_ps(qi, _mm512_loadu_ps(kr + 16)));
            a2 = _mm512_add_ps(a2, _mm512_mul_ps(qi, _mm512_loadu_ps(kr + 32)));
            a3 = _mm512_add_ps(a3, _mm512_mul_ps(qi, _mm512_loadu_ps(kr + 48)));
        }
        _mm512_storeu_ps(p + j, _mm512_mul_ps(a0, sc));
        _mm512_storeu_ps(p + j + 16, _mm512_mul_ps(a1, sc));
        _mm512_storeu_ps(p + j + 32, _mm512_mul_ps(a2, sc));
        _mm512_storeu_ps(p + j + 48, _mm512_mul_ps(a3, sc));
    }
    for (; j < n; j += 16) {
        const __mmask16 m = attn_tail_mask(n - j);
        __m512 a = _mm512_setzero_ps();
        for (int i = 0; i < hd; i++)
            a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_set1_ps(qr[i]),
                                               _mm512_maskz_loadu_ps(m, kt + (size_t)i * ld + j)));
        _mm512_mask_storeu_ps(p + j, m, _mm512_mul_ps(a, sc));
    }
}

void attn_weighted_sum_avx512_impl(float *o, const float *p, const float *vb, int n,
                                   size_t kv_stride, int hd)
{
    int i = 0;
    for (; i + 64 <= hd; i += 64) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int j = 0; j < n; j++) {
            const __m512 pj = _mm512_set1_ps(p[j]);
            const float *vr = vb + (size_t)j * kv_stride + i;
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(pj, _mm512_loadu_ps(vr)));
            a1 = _mm512_add_ps(a1, _mm512_mul_ps(pj, _mm512_loadu_ps(vr + 16)));
            a2 = _mm512_add_ps(a2, _mm512_mul_ps(pj, _mm512_loadu_ps(vr + 32)));
            a3 = _mm512_add_ps(a3, _mm512_mul_ps(pj, _mm512_loadu_ps(vr + 48)));
        }
        _mm512_storeu_ps(o + i, a0);
        _mm512_storeu_ps(o + i + 16, a1);
        _mm512_storeu_ps(o + i + 32, a2);
        _mm512_storeu_ps(o + i + 48, a3);
    }
    for (; i < hd; i += 16) {
        const __mmask16 m = attn_tail_mask(hd - i);
        __m512 a = _mm512_setzero_ps();
        for (int j = 0; j < n; j++)
            a = _mm512_add_ps(a, _mm512_mul_ps(_mm512_set1_ps(p[j]),
                                               _mm512_maskz_loadu_ps(m, vb + (size_t)j * kv_stride + i)));
        _mm512_mask_storeu_ps(o + i, m, a);
    }
}

/* Sum of 16 lanes in a fixed tree: (l + l^8) then ^4, ^2, ^1. */
static float attn_hsum(__m512 v)
{
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
    return _mm_cvtss_f32(x);
}

static float attn_dot16(const float *a, const float *b, int hd)
{
    __m512 s = _mm512_setzero_ps();
    for (int i = 0; i < hd; i += 16) {
        const __mmask16 m = attn_tail_mask(hd - i);
        s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i),
                                           _mm512_maskz_loadu_ps(m, b + i)));
    }
    return attn_hsum(s);
}

void attn_bwd_row_avx512_impl(float *dqt, float *dk, float *dv, const float *qt, const float *gt,
                              const float *a, const float *k, const float *v, int n_keys,
                              size_t kv_stride, int hd, float scale, float *datt)
{
    float sum = 0.0f;
    for (int j = 0; j < n_keys; j++) {
        datt[j] = attn_dot16(gt, v + (size_t)j * kv_stride, hd);
        sum += a[j] * datt[j];
    }
    for (int i = 0; i < hd; i += 16) {
        const __mmask16 m = attn_tail_mask(hd - i);
        const __m512 qi = _mm512_maskz_loadu_ps(m, qt + i), gi = _mm512_maskz_loadu_ps(m, gt + i);
        __m512 dq = _mm512_maskz_loadu_ps(m, dqt + i);
        for (int j = 0; j < n_keys; j++) {
            size_t ko = (size_t)j * kv_stride + i;
            const __m512 ds = _mm512_set1_ps(a[j] * (datt[j] - sum) * scale);
            const __m512 aj = _mm512_set1_ps(a[j]);
            dq = _mm512_add_ps(dq, _mm512_mul_ps(ds, _mm512_maskz_loadu_ps(m, k + ko)));
            _mm512_mask_storeu_ps(dk + ko, m,
                                  _mm512_add_ps(_mm512_maskz_loadu_ps(m, dk + ko),
                                                _mm512_mul_ps(ds, qi)));
            _mm512_mask_storeu_ps(dv + ko, m,
                                  _mm512_add_ps(_mm512_maskz_loadu_ps(m, dv + ko),
                                                _mm512_mul_ps(aj, gi)));
        }
        _mm512_mask_storeu_ps(dqt + i, m, dq);
    }
}
