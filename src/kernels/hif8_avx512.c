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

/* 23 - M(E) (the fraction bits dropped) by idx = max(biased exponent - 111, 0):
 * idx 0 = E <= -16 (denormal powers of two, M = 0), idx 1..31 = E -15..15. */
static const int32_t hif8_shift_by_idx[32] = {
    23,                         /* E <= -16 */
    22, 22, 22, 22, 22, 22, 22, 22, /* E -15 .. -8 */
    21, 21, 21, 21,             /* E -7 .. -4 */
    20, 20, 20, 20, 20, 20, 20, /* E -3 .. 3 */
    21, 21, 21, 21,             /* E 4 .. 7 */
    22, 22, 22, 22, 22, 22, 22, 22, /* E 8 .. 15 */
};

/* Per-call constants: half-ulp and keep-mask tables (low/high 16 entries). */
typedef struct {
    __m512i shift_lo, shift_hi, half_lo, half_hi, keep_lo, keep_hi;
} hif8_round_tabs;

static inline __attribute__((always_inline)) void hif8_round_tabs_init(hif8_round_tabs *t)
{
    const __m512i one = _mm512_set1_epi32(1);
    t->shift_lo = _mm512_loadu_si512(hif8_shift_by_idx);
    t->shift_hi = _mm512_loadu_si512(hif8_shift_by_idx + 16);
    t->half_lo = _mm512_sllv_epi32(one, _mm512_sub_epi32(t->shift_lo, one));
    t->half_hi = _mm512_sllv_epi32(one, _mm512_sub_epi32(t->shift_hi, one));
    t->keep_lo = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_sllv_epi32(one, t->shift_lo));
    t->keep_hi = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_sllv_epi32(one, t->shift_hi));
}

/* Round magnitudes a (fp32 bits, sign clear, clamped to <= 2^16) to HiF8
 * magnitude bits: add half of the last kept position, truncate; then results
 * below 2^-22 (only from E = -23, which rounds up) become 2^-22, and a < 2^-23
 * becomes 0 (*nz = a >= 2^-23).  idx (for the encoder's shift) is returned too. */
static inline __attribute__((always_inline)) __m512i
hif8_round_mag(__m512i a, const hif8_round_tabs *t, __mmask16 *nz, __m512i *idx_out)
{
    __m512i idx = _mm512_subs_epu16(_mm512_srli_epi32(a, 23), _mm512_set1_epi32(111));
    __m512i h = _mm512_permutex2var_epi32(t->half_lo, idx, t->half_hi);
    __m512i keep = _mm512_permutex2var_epi32(t->keep_lo, idx, t->keep_hi);
    __m512i r = _mm512_and_si512(_mm512_add_epi32(a, h), keep);
    *nz = _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32((int)HIF8_BITS_UNDER));
    *idx_out = idx;
    return _mm512_maskz_max_epu32(*nz, r, _mm512_set1_epi32((int)HIF8_BITS_MIN));
}

typedef struct {
    __m512 amax;
    __m512d sq0, sq1, ss0, ss1;
    __m512i clip, under;
    size_t n_nan;
} hif8_acc512;

typedef struct {
    hif8_round_tabs tabs;
    __m512 scale;
    __m512i recip; /* recip[i] = tab[i & 7]: permutexvar looks up bits 23..20 of q */
} hif8_fq_consts;

#define HIF8_SIGN_OR_MASKED 0xF8 /* ternary logic: A | (B & C) */

/* One block of 16 elements x[0..15] (masked by m), results to y.  table: use
 * the reciprocal table instead of dividing (hif8_impl.h). */
static inline __attribute__((always_inline)) void
hif8_fq_block(const float *x, float *y, __mmask16 m, int full, const hif8_fq_consts *c, int want,
              int table, hif8_acc512 *acc)
{
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i sign_mask = _mm512_set1_epi32((int)0x80000000u);
    __m512 xv = full ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(m, x);
    __m512 t = _mm512_mul_ps(xv, c->scale);
    __m512i tb = _mm512_castps_si512(t);
    __m512i a = _mm512_and_si512(tb, abs_mask);
    __mmask16 clip = _mm512_cmp_ps_mask(_mm512_castsi512_ps(a), _mm512_set1_ps(HIF8_MAX_FINITE),
                                        _CMP_GT_OQ);
    a = _mm512_min_epu32(a, _mm512_set1_epi32((int)HIF8_BITS_MAX));
    __mmask16 nz, under;
    __m512i idx;
    __m512i r = hif8_round_mag(a, &c->tabs, &nz, &idx);
    __m512 yv;
    if (table) {
        /* q = 2^E * (1 + j/8): bits 22..20 of r are j, bit 23 is the exponent's
         * low bit (recip repeats the 8 entries), r's exponent field adds E. */
        __m512i yb = _mm512_add_epi32(_mm512_permutexvar_epi32(_mm512_srli_epi32(r, 20), c->recip),
                                      _mm512_and_si512(r, _mm512_set1_epi32(0x7F800000)));
        yb = _mm512_maskz_ternarylogic_epi32(nz, yb, tb, sign_mask, HIF8_SIGN_OR_MASKED);
        yv = _mm512_castsi512_ps(yb);
        /* y == 0 exactly when r == 0 here (no fp32 underflow in the table range) */
        under = _mm512_mask_test_epi32_mask((__mmask16)~nz, _mm512_castps_si512(xv), abs_mask);
    } else {
        __m512i qb = _mm512_maskz_ternarylogic_epi32(nz, r, tb, sign_mask, HIF8_SIGN_OR_MASKED);
        yv = _mm512_div_ps(_mm512_castsi512_ps(qb), c->scale);
        under = _mm512_cmp_ps_mask(yv, _mm512_setzero_ps(), _CMP_EQ_OQ) &
                _mm512_cmp_ps_mask(xv, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    }
    __mmask16 nan = _mm512_cmp_ps_mask(xv, xv, _CMP_UNORD_Q);
    __m512 xs = xv;
    if (nan) { /* rare: NaN passes through, counted, kept out of the sums */
        yv = _mm512_mask_mov_ps(yv, nan, xv);
        acc->n_nan += (size_t)__builtin_popcount(nan);
        xs = _mm512_maskz_mov_ps((__mmask16)~nan, xv);
    }
    if (full)
        _mm512_storeu_ps(y, yv);
    else
        _mm512_mask_storeu_ps(y, m, yv);
    __m512 ax = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(xv), abs_mask));
    acc->amax = _mm512_max_ps(ax, acc->amax); /* NaN in ax: keeps acc->amax */
    acc->clip = _mm512_mask_add_epi32(acc->clip, clip, acc->clip, one);
    acc->under = _mm512_mask_add_epi32(acc->under, under, acc->under, one);
    if (want) {
        __m512 ys = nan ? _mm512_maskz_mov_ps((__mmask16)~nan, yv) : yv;
        __m512d x0 = _mm512_cvtps_pd(_mm512_castps512_ps256(xs));
        __m512d x1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(xs, 1));
        __m512d y0 = _mm512_cvtps_pd(_mm512_castps512_ps256(ys));
        __m512d y1 = _mm512_cvtps_pd(_mm512_extractf32x8_ps(ys, 1));
        __m512d e0 = _mm512_sub_pd(y0, x0), e1 = _mm512_sub_pd(y1, x1);
        acc->sq0 = _mm512_add_pd(acc->sq0, _mm512_mul_pd(e0, e0));
        acc->sq1 = _mm512_add_pd(acc->sq1, _mm512_mul_pd(e1, e1));
        acc->ss0 = _mm512_add_pd(acc->ss0, _mm512_mul_pd(x0, x0));
        acc->ss1 = _mm512_add_pd(acc->ss1, _mm512_mul_pd(x1, x1));
    }
}

static inline __attribute__((always_inline)) void
hif8_fq_run(const float *x, float *y, size_t n, const hif8_fq_consts *c, int want, int table,
            hif8_stats *st)
{
    hif8_acc512 acc;
    acc.amax = _mm512_setzero_ps();
    acc.sq0 = acc.sq1 = acc.ss0 = acc.ss1 = _mm512_setzero_pd();
    acc.n_nan = 0;
    size_t n_clip = 0, n_under = 0;
    for (size_t base = 0; base < n; base += HIF8_CHUNK_ELEMS) {
        size_t end = n - base < HIF8_CHUNK_ELEMS ? n : base + HIF8_CHUNK_ELEMS;
        acc.clip = acc.under = _mm512_setzero_si512();
        size_t i = base;
        for (; i + 16 <= end; i += 16)
            hif8_fq_block(x + i, y + i, 0xFFFF, 1, c, want, table, &acc);
        if (i < end)
            hif8_fq_block(x + i, y + i, (__mmask16)((1u << (end - i)) - 1), 0, c, want, table,
                          &acc);
        n_clip += (size_t)(uint32_t)_mm512_reduce_add_epi32(acc.clip);
        n_under += (size_t)(uint32_t)_mm512_reduce_add_epi32(acc.under);
    }
    st->amax = _mm512_reduce_max_ps(acc.amax);
    st->n_clipped = n_clip;
    st->n_underflow = n_under;
    st->n_nan = acc.n_nan;
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
    hif8_fq_consts c;
    int32_t tab[16];
    int table = hif8_recip_table_impl(scale, tab);
    memcpy(tab + 8, tab, 8 * sizeof tab[0]);
    hif8_round_tabs_init(&c.tabs);
    c.scale = _mm512_set1_ps(scale);
    c.recip = _mm512_loadu_si512(tab);
    if (table && want_sq_err)
        hif8_fq_run(x, y, n, &c, 1, 1, st);
    else if (table)
        hif8_fq_run(x, y, n, &c, 0, 1, st);
    else if (want_sq_err)
        hif8_fq_run(x, y, n, &c, 1, 0, st);
    else
        hif8_fq_run(x, y, n, &c, 0, 0, st);
}

/* Codes for 16 values; the rounding is the fake-quant one with the clamp of the mode. */
static inline __attribute__((always_inline)) __m512i
hif8_encode_block(__m512 xv, const hif8_round_tabs *tabs, int mode)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
    __m512i b = _mm512_castps_si512(xv);
    __m512i a = _mm512_and_si512(b, abs_mask);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7F800000));
    __mmask16 neg = _mm512_movepi32_mask(b);
    uint32_t clamp = mode == HIF8_SAT ? HIF8_BITS_MAX : HIF8_BITS_2P16;
    a = _mm512_min_epu32(a, _mm512_set1_epi32((int)clamp));
    __mmask16 nz;
    __m512i idx;
    __m512i r = hif8_round_mag(a, tabs, &nz, &idx);
    __m512i cidx = _mm512_subs_epu16(_mm512_srli_epi32(r, 23), _mm512_set1_epi32(104));
    __m512i code = _mm512_i32gather_epi32(cidx, hif8_code_base_impl, 4);
    __m512i shift = _mm512_permutex2var_epi32(tabs->shift_lo, idx, tabs->shift_hi);
    code = _mm512_or_si512(code, _mm512_srlv_epi32(_mm512_and_si512(r, _mm512_set1_epi32(0x7FFFFF)),
                                                   shift));
    code = _mm512_mask_or_epi32(code, nz & neg, code, _mm512_set1_epi32(0x80));
    return _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(HIF8_CODE_NAN));
}

void hif8_codes_encode_avx512_impl(const float *x, uint8_t *codes, size_t n, int mode)
{
    hif8_round_tabs tabs;
    hif8_round_tabs_init(&tabs);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_mask_cvtepi32_storeu_epi8(codes + i, 0xFFFF,
                                         hif8_encode_block(_mm512_loadu_ps(x + i), &tabs, mode));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_cvtepi32_storeu_epi8(
            codes + i, m, hif8_encode_block(_mm512_maskz_loadu_ps(m, x + i), &tabs, mode));
    }
}

/* W8A8 operands (hif8_w8a8.c): v = decode(encode_sat(fl(x * scale))) without
 * the codes, the fake-quant's rounding before its division: the saturating
 * clamp, the magnitude rounded in place, the sign put back on non-zero results
 * (decode never gives -0).  NaN x gives decode's NaN, +-Inf the saturated
 * +-32768; both are counted as hif8_scaled_values counts them. */
size_t hif8_scaled_values_avx512_impl(const float *x, float *y, size_t n, float scale)
{
    hif8_round_tabs tabs;
    hif8_round_tabs_init(&tabs);
    const __m512 s = _mm512_set1_ps(scale);
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i sign_mask = _mm512_set1_epi32((int)0x80000000u);
    const float qnan = hif8_decode(HIF8_CODE_NAN); /* the NaN decode gives */
    const __m512i nan_bits = _mm512_castps_si512(_mm512_set1_ps(qnan));
    size_t n_bad = 0;
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
        const __m512 t = _mm512_mul_ps(xv, s);
        const __m512i tb = _mm512_castps_si512(t);
        __m512i a = _mm512_and_si512(tb, abs_mask);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7F800000));
        a = _mm512_min_epu32(a, _mm512_set1_epi32((int)HIF8_BITS_MAX));
        __mmask16 nz;
        __m512i idx;
        const __m512i r = hif8_round_mag(a, &tabs, &nz, &idx);
        __m512i v = _mm512_maskz_ternarylogic_epi32(nz, r, tb, sign_mask, HIF8_SIGN_OR_MASKED);
        v = _mm512_mask_mov_epi32(v, nan, nan_bits);
        _mm512_mask_storeu_ps(y + i, m, _mm512_castsi512_ps(v));
        /* x not finite (a finite x whose product overflows is not counted) */
        const __mmask16 bad = _mm512_mask_cmpge_epu32_mask(
            m, _mm512_and_si512(_mm512_castps_si512(xv), abs_mask), _mm512_set1_epi32(0x7F800000));
        n_bad += (size_t)__builtin_popcount(bad);
    }
    return n_bad;
}

/* max |x[i]| over the non-NaN x[i] (0 for none) */
float hif8_absmax_avx512_impl(const float *x, size_t n)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) { /* max_ps(a, acc): a NaN lane keeps acc */
        acc0 = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(
                                 _mm512_castps_si512(_mm512_loadu_ps(x + i)), abs_mask)),
                             acc0);
        acc1 = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(
                                 _mm512_castps_si512(_mm512_loadu_ps(x + i + 16)), abs_mask)),
                             acc1);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        acc0 = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(
                                 _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i)), abs_mask)),
                             acc0);
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(acc0, acc1));
}
