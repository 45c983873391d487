/* hif8_avx512.c: AVX-512 (F, BW, DQ, VL) HiF8 fake-quant and encode.
 *
 * Code-free rounding on the fp32 bits, 16 lanes at a time (method in
 * hif8_impl.h); tails use masked loads/stores, so masked-off lanes read 0 and
 * add nothing to any statistic.  Bit-identical to hif8_fakequant_ref() and
 * hif8_encode(), including sq_err/sq_sum: element i goes to double partial
 * sum i mod 16 (lanes 0-7 in one register, 8-15 in the other).  No FMA is
 * used (contraction is off in ISO C mode), so products round as in the
 * scalar reference.  Called only after run-time dispatch (cpu_level()).
 */
#include <immintrin.h>
#include <string.h>

#include "hif8_impl.h"

#define HIF8_CHUNK_ELEMS ((size_t)1 << 20) /* int32 lane counters flushed per chunk */

/* k = 3 - M(E) for |E| = 0..15 (M = 3, 2 or 1); |E| > 15 gives k = 3 (M = 0) */
static const int32_t hif8_k_by_abs_e[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2};

/* Round magnitudes a (fp32 bits, sign clear, already clamped to <= 2^16) to
 * HiF8 magnitude bits.  *shift gets 20 + k = 23 - M: the kept mantissa of the
 * result is (r & 0x7FFFFF) >> shift (after a carry the fraction is 0 anyway). */
static inline __attribute__((always_inline)) __m512i hif8_round_mag(__m512i a, __m512i *shift)
{
    const __m512i ktab = _mm512_loadu_si512(hif8_k_by_abs_e);
    __m512i e = _mm512_sub_epi32(_mm512_srli_epi32(a, 23), _mm512_set1_epi32(127));
    __m512i ae = _mm512_abs_epi32(e);
    __m512i k = _mm512_permutexvar_epi32(ae, ktab); /* uses ae & 15 */
    k = _mm512_mask_mov_epi32(k, _mm512_cmpgt_epi32_mask(ae, _mm512_set1_epi32(15)),
                              _mm512_set1_epi32(3));
    __m512i h = _mm512_sllv_epi32(_mm512_set1_epi32(1 << 19), k);
    __m512i keep = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_add_epi32(h, h));
    __m512i r = _mm512_and_si512(_mm512_add_epi32(a, h), keep);
    __mmask16 tiny = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32((int)HIF8_BITS_MIN));
    __mmask16 nz = _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32((int)HIF8_BITS_UNDER));
    r = _mm512_mask_mov_epi32(r, tiny,
                              _mm512_maskz_mov_epi32(nz, _mm512_set1_epi32((int)HIF8_BITS_MIN)));
    *shift = _mm512_add_epi32(k, _mm512_set1_epi32(20));
    return r;
}

typedef struct {
    __m512 amax;
    __m512d sq0, sq1, ss0, ss1;
    __m512i clip, under, nan;
} hif8_acc512;

/* One block of 16 elements x[0..15] (masked by m), results to y. */
static inline __attribute__((always_inline)) void
hif8_fq_block(const float *x, float *y, __mmask16 m, int full, __m512 vscale, int want,
              hif8_acc512 *acc)
{
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
    __m512 xv = full ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(m, x);
    __m512 t = _mm512_mul_ps(xv, vscale);
    __m512i tb = _mm512_castps_si512(t);
    __m512i a = _mm512_and_si512(tb, abs_mask);
    __mmask16 clip = _mm512_cmp_ps_mask(_mm512_castsi512_ps(a), _mm512_set1_ps(HIF8_MAX_FINITE),
                                        _CMP_GT_OQ);
    a = _mm512_min_epu32(a, _mm512_set1_epi32((int)HIF8_BITS_MAX));
    __m512i shift;
    __m512i r = hif8_round_mag(a, &shift);
    __mmask16 nz = _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32((int)HIF8_BITS_UNDER));
    r = _mm512_mask_or_epi32(r, nz, r, _mm512_andnot_si512(abs_mask, tb));
    __m512 yv = _mm512_div_ps(_mm512_castsi512_ps(r), vscale);
    __mmask16 nan = _mm512_cmp_ps_mask(xv, xv, _CMP_UNORD_Q);
    yv = _mm512_mask_mov_ps(yv, nan, xv);
    if (full)
        _mm512_storeu_ps(y, yv);
    else
        _mm512_mask_storeu_ps(y, m, yv);
    __m512 ax = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(xv), abs_mask));
    acc->amax = _mm512_max_ps(ax, acc->amax); /* NaN in ax: keeps acc->amax */
    __mmask16 under = _mm512_cmp_ps_mask(yv, _mm512_setzero_ps(), _CMP_EQ_OQ) &
                      _mm512_cmp_ps_mask(xv, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    acc->clip = _mm512_mask_add_epi32(acc->clip, clip, acc->clip, one);
    acc->under = _mm512_mask_add_epi32(acc->under, under, acc->under, one);
    acc->nan = _mm512_mask_add_epi32(acc->nan, nan, acc->nan, one);
    if (want) {
        __m512 xz = _mm512_maskz_mov_ps((__mmask16)~nan, xv);
        __m512 yz = _mm512_maskz_mov_ps((__mmask16)~nan, yv);
        __m512d x0 = _mm512_cvtps_pd(_mm512_castps512_ps256(xz));
        __m512d x1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xz), 1)));
        __m512d y0 = _mm512_cvtps_pd(_mm512_castps512_ps256(yz));
        __m512d y1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(yz), 1)));
        __m512d e0 = _mm512_sub_pd(y0, x0), e1 = _mm512_sub_pd(y1, x1);
        acc->sq0 = _mm512_add_pd(acc->sq0, _mm512_mul_pd(e0, e0));
        acc->sq1 = _mm512_add_pd(acc->sq1, _mm512_mul_pd(e1, e1));
        acc->ss0 = _mm512_add_pd(acc->ss0, _mm512_mul_pd(x0, x0));
        acc->ss1 = _mm512_add_pd(acc->ss1, _mm512_mul_pd(x1, x1));
    }
}

static inline __attribute__((always_inline)) void
hif8_fq_run(const float *x, float *y, size_t n, float scale, int want, hif8_stats *st)
{
    const __m512 vscale = _mm512_set1_ps(scale);
    hif8_acc512 acc;
    acc.amax = _mm512_setzero_ps();
    acc.sq0 = acc.sq1 = acc.ss0 = acc.ss1 = _mm512_setzero_pd();
    size_t n_clip = 0, n_under = 0, n_nan = 0;
    for (size_t base = 0; base < n; base += HIF8_CHUNK_ELEMS) {
        size_t end = n - base < HIF8_CHUNK_ELEMS ? n : base + HIF8_CHUNK_ELEMS;
        acc.clip = acc.under = acc.nan = _mm512_setzero_si512();
        size_t i = base;
        for (; i + 16 <= end; i += 16)
            hif8_fq_block(x + i, y + i, 0xFFFF, 1, vscale, want, &acc);
        if (i < end)
            hif8_fq_block(x + i, y + i, (__mmask16)((1u << (end - i)) - 1), 0, vscale, want,
                          &acc);
        n_clip += (size_t)(uint32_t)_mm512_reduce_add_epi32(acc.clip);
        n_under += (size_t)(uint32_t)_mm512_reduce_add_epi32(acc.under);
        n_nan += (size_t)(uint32_t)_mm512_reduce_add_epi32(acc.nan);
    }
    st->amax = _mm512_reduce_max_ps(acc.amax);
    st->n_clipped = n_clip;
    st->n_underflow = n_under;
    st->n_nan = n_nan;
    st->sq_err = st->sq_sum = 0.0;
    if (want) {
        double s[HIF8_SQ_LANES];
        _mm512_storeu_pd(s, acc.sq0);
        _mm512_storeu_pd(s + 8, acc.sq1);
        st->sq_err = hif8_lanes_fold_impl(s);
        _mm512_storeu_pd(s, acc.ss0);
        _mm512_storeu_pd(s + 8, acc.ss1);
        st->sq_sum = hif8_lanes_fold_impl(s);
    }
}

void hif8_fakequant_avx512_impl(const float *x, float *y, size_t n, float scale,
                                int want_sq_err, hif8_stats *st)
{
    if (want_sq_err)
        hif8_fq_run(x, y, n, scale, 1, st);
    else
        hif8_fq_run(x, y, n, scale, 0, st);
}

/* Codes for 16 values; the rounding is the fake-quant one with the clamp of the mode. */
static inline __attribute__((always_inline)) __m512i hif8_encode_block(__m512 xv, int mode)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
    __m512i b = _mm512_castps_si512(xv);
    __m512i a = _mm512_and_si512(b, abs_mask);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7F800000));
    __mmask16 neg = _mm512_cmplt_epi32_mask(b, _mm512_setzero_si512());
    uint32_t clamp = mode == HIF8_SAT ? HIF8_BITS_MAX : HIF8_BITS_2P16;
    a = _mm512_min_epu32(a, _mm512_set1_epi32((int)clamp));
    __m512i shift;
    __m512i r = hif8_round_mag(a, &shift);
    __m512i idx = _mm512_max_epi32(_mm512_sub_epi32(_mm512_srli_epi32(r, 23), _mm512_set1_epi32(104)),
                                   _mm512_setzero_si512());
    __m512i code = _mm512_i32gather_epi32(idx, hif8_code_base_impl, 4);
    __m512i man = _mm512_srlv_epi32(_mm512_and_si512(r, _mm512_set1_epi32(0x7FFFFF)), shift);
    code = _mm512_or_si512(code, man);
    __mmask16 nz = _mm512_cmpneq_epi32_mask(r, _mm512_setzero_si512());
    code = _mm512_mask_or_epi32(code, nz & neg, code, _mm512_set1_epi32(0x80));
    return _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(HIF8_CODE_NAN));
}

void hif8_codes_encode_avx512_impl(const float *x, uint8_t *codes, size_t n, int mode)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_mask_cvtepi32_storeu_epi8(codes + i, 0xFFFF,
                                         hif8_encode_block(_mm512_loadu_ps(x + i), mode));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_cvtepi32_storeu_epi8(codes + i, m,
                                         hif8_encode_block(_mm512_maskz_loadu_ps(m, x + i), mode));
    }
}
