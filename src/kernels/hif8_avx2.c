/* hif8_avx2.c: AVX2 HiF8 fake-quant and encode.
 *
 * Code-free rounding on the fp32 bits, 8 lanes at a time (method in
 * hif8_impl.h).  Elements are taken in blocks of 16 (two registers) so that
 * element i goes to double partial sum i mod 16, as in the scalar reference;
 * tails use maskload/maskstore (masked-off lanes read 0 and add nothing).
 * Bit-identical to hif8_fakequant_ref() and hif8_encode(), sq_err/sq_sum
 * included (no FMA: contraction is off in ISO C mode).  Called only after
 * run-time dispatch (cpu_level()).
 */
#include <immintrin.h>
#include <string.h>

#include "hif8_impl.h"

#define HIF8_CHUNK_ELEMS ((size_t)1 << 20) /* int32 lane counters flushed per chunk */

/* By sel = |E| / 4: the fraction bits dropped, 23 - M(E) (|E| 0..3: M = 3,
 * 4..7: 2, 8..15: 1, 16..23: 0), half of the last kept position, and the mask
 * that keeps the rest. */
static const int32_t hif8_shift_by_sel[8] = {20, 21, 22, 22, 23, 23, 23, 23};
static const int32_t hif8_half_by_sel[8] = {1 << 19, 1 << 20, 1 << 21, 1 << 21,
                                            1 << 22, 1 << 22, 1 << 22, 1 << 22};
static const int32_t hif8_keep_by_sel[8] = {-(1 << 20), -(1 << 21), -(1 << 22), -(1 << 22),
                                            -(1 << 23), -(1 << 23), -(1 << 23), -(1 << 23)};

/* Round magnitudes a (fp32 bits, sign clear, clamped to <= 2^16) to HiF8
 * magnitude bits; *nz = (a >= 2^-23) lanes (r != 0); *shift = 23 - M, the kept
 * mantissa is (r & 0x7FFFFF) >> shift. */
static inline __attribute__((always_inline)) __m256i hif8_round_mag(__m256i a, __m256i *nz,
                                                                    __m256i *shift)
{
    __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(a, 23), _mm256_set1_epi32(127));
    /* |E| / 4 picks the row (permutevar8x32 reads its low 3 bits; |E| >= 32
     * only occurs for a < 2^-23, which becomes 0 below anyway) */
    __m256i sel = _mm256_srli_epi32(_mm256_abs_epi32(e), 2);
    __m256i h = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)hif8_half_by_sel), sel);
    __m256i keep = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)hif8_keep_by_sel), sel);
    __m256i r = _mm256_and_si256(_mm256_add_epi32(a, h), keep);
    /* E = -23 rounds up to 2^-22 (the rule above may leave 2^-23: raise it);
     * a < 2^-23 gives 0.  a <= 0x7FFFFFFF, so signed compares are fine. */
    *nz = _mm256_cmpgt_epi32(a, _mm256_set1_epi32((int)HIF8_BITS_UNDER - 1));
    r = _mm256_and_si256(_mm256_max_epi32(r, _mm256_set1_epi32((int)HIF8_BITS_MIN)), *nz);
    *shift = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)hif8_shift_by_sel), sel);
    return r;
}

typedef struct {
    __m256 amax;
    __m256d sq[4], ss[4]; /* partial sums of lanes 0-3, 4-7, 8-11, 12-15 */
    __m256i clip, under;
    size_t n_nan;
} hif8_acc256;

/* 8 elements x[0..7] (lanes set in m when !full); half = 0 or 1 picks the
 * partial sums of lanes 0-7 or 8-15; table: reciprocal table instead of a
 * division (recip[j] from hif8_recip_table_impl). */
static inline __attribute__((always_inline)) void
hif8_fq_half(const float *x, float *y, __m256i m, int full, __m256 vscale, __m256i recip,
             int want, int table, int half, hif8_acc256 *acc)
{
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    __m256 xv = full ? _mm256_loadu_ps(x) : _mm256_maskload_ps(x, m);
    __m256 t = _mm256_mul_ps(xv, vscale);
    __m256i tb = _mm256_castps_si256(t);
    __m256i a = _mm256_and_si256(tb, abs_mask);
    __m256 clip = _mm256_cmp_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(HIF8_MAX_FINITE), _CMP_GT_OQ);
    a = _mm256_min_epi32(a, _mm256_set1_epi32((int)HIF8_BITS_MAX));
    __m256i shift, nz;
    __m256i r = hif8_round_mag(a, &nz, &shift);
    __m256i sign = _mm256_and_si256(nz, _mm256_andnot_si256(abs_mask, tb)); /* no -0 */
    __m256 yv, under;
    if (table) {
        /* q = 2^E * (1 + j/8): bits 22..20 of r are j (permutevar uses the low 3
         * index bits), r's exponent field adds E; see hif8_impl.h. */
        __m256i yb = _mm256_add_epi32(_mm256_permutevar8x32_epi32(recip, _mm256_srli_epi32(r, 20)),
                                      _mm256_and_si256(r, _mm256_set1_epi32(0x7F800000)));
        yv = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(yb, nz), sign));
        under = _mm256_andnot_ps(_mm256_castsi256_ps(nz),
                                 _mm256_cmp_ps(xv, _mm256_setzero_ps(), _CMP_NEQ_OQ));
    } else {
        yv = _mm256_div_ps(_mm256_castsi256_ps(_mm256_or_si256(r, sign)), vscale);
        under = _mm256_and_ps(_mm256_cmp_ps(yv, _mm256_setzero_ps(), _CMP_EQ_OQ),
                              _mm256_cmp_ps(xv, _mm256_setzero_ps(), _CMP_NEQ_OQ));
    }
    __m256 nan = _mm256_cmp_ps(xv, xv, _CMP_UNORD_Q);
    int nan_bits = _mm256_movemask_ps(nan);
    __m256 xs = xv;
    if (nan_bits) { /* rare: NaN passes through, counted, kept out of the sums */
        yv = _mm256_blendv_ps(yv, xv, nan);
        acc->n_nan += (size_t)__builtin_popcount((unsigned)nan_bits);
        xs = _mm256_andnot_ps(nan, xv);
    }
    if (full)
        _mm256_storeu_ps(y, yv);
    else
        _mm256_maskstore_ps(y, m, yv);
    __m256 ax = _mm256_and_ps(xv, _mm256_castsi256_ps(abs_mask));
    acc->amax = _mm256_max_ps(ax, acc->amax); /* NaN in ax: keeps acc->amax */
    acc->clip = _mm256_sub_epi32(acc->clip, _mm256_castps_si256(clip));
    acc->under = _mm256_sub_epi32(acc->under, _mm256_castps_si256(under));
    if (want) {
        __m256 xz = xs, yz = nan_bits ? _mm256_andnot_ps(nan, yv) : yv;
        __m256d x0 = _mm256_cvtps_pd(_mm256_castps256_ps128(xz));
        __m256d x1 = _mm256_cvtps_pd(_mm256_extractf128_ps(xz, 1));
        __m256d y0 = _mm256_cvtps_pd(_mm256_castps256_ps128(yz));
        __m256d y1 = _mm256_cvtps_pd(_mm256_extractf128_ps(yz, 1));
        __m256d e0 = _mm256_sub_pd(y0, x0), e1 = _mm256_sub_pd(y1, x1);
        int j = 2 * half;
        acc->sq[j] = _mm256_add_pd(acc->sq[j], _mm256_mul_pd(e0, e0));
        acc->sq[j + 1] = _mm256_add_pd(acc->sq[j + 1], _mm256_mul_pd(e1, e1));
        acc->ss[j] = _mm256_add_pd(acc->ss[j], _mm256_mul_pd(x0, x0));
        acc->ss[j + 1] = _mm256_add_pd(acc->ss[j + 1], _mm256_mul_pd(x1, x1));
    }
}

/* lanes j < count set (count in 0..8) */
static inline __m256i hif8_lane_mask(size_t count)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count), idx);
}

static inline size_t hif8_hsum_epi32(__m256i v)
{
    int32_t l[8];
    _mm256_storeu_si256((__m256i *)l, v);
    size_t s = 0;
    for (int j = 0; j < 8; j++)
        s += (uint32_t)l[j];
    return s;
}

static inline __attribute__((always_inline)) void
hif8_fq_run(const float *x, float *y, size_t n, float scale, __m256i recip, int want, int table,
            hif8_stats *st)
{
    const __m256 vscale = _mm256_set1_ps(scale);
    const __m256i all = _mm256_set1_epi32(-1);
    hif8_acc256 acc;
    acc.amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; j++)
        acc.sq[j] = acc.ss[j] = _mm256_setzero_pd();
    size_t n_clip = 0, n_under = 0;
    acc.n_nan = 0;
    for (size_t base = 0; base < n; base += HIF8_CHUNK_ELEMS) {
        size_t end = n - base < HIF8_CHUNK_ELEMS ? n : base + HIF8_CHUNK_ELEMS;
        acc.clip = acc.under = _mm256_setzero_si256();
        size_t i = base;
        for (; i + 16 <= end; i += 16) {
            hif8_fq_half(x + i, y + i, all, 1, vscale, recip, want, table, 0, &acc);
            hif8_fq_half(x + i + 8, y + i + 8, all, 1, vscale, recip, want, table, 1, &acc);
        }
        if (i < end) {
            size_t rest = end - i;
            hif8_fq_half(x + i, y + i, hif8_lane_mask(rest < 8 ? rest : 8), 0, vscale, recip, want,
                         table, 0, &acc);
            if (rest > 8)
                hif8_fq_half(x + i + 8, y + i + 8, hif8_lane_mask(rest - 8), 0, vscale, recip,
                             want, table, 1, &acc);
        }
        n_clip += hif8_hsum_epi32(acc.clip);
        n_under += hif8_hsum_epi32(acc.under);
    }
    float m[8];
    _mm256_storeu_ps(m, acc.amax);
    float amax = 0.0f;
    for (int j = 0; j < 8; j++)
        amax = m[j] > amax ? m[j] : amax;
    st->amax = amax;
    st->n_clipped = n_clip;
    st->n_underflow = n_under;
    st->n_nan = acc.n_nan;
    st->sq_err = st->sq_sum = 0.0;
    if (want) {
        double s[HIF8_SQ_LANES], u[HIF8_SQ_LANES];
        for (int j = 0; j < 4; j++) {
            _mm256_storeu_pd(s + 4 * j, acc.sq[j]);
            _mm256_storeu_pd(u + 4 * j, acc.ss[j]);
        }
        st->sq_err = hif8_lanes_fold_impl(s);
        st->sq_sum = hif8_lanes_fold_impl(u);
    }
}

void hif8_fakequant_avx2_impl(const float *x, float *y, size_t n, float scale, int want_sq_err,
                              hif8_stats *st)
{
    int32_t tab[8];
    int table = hif8_recip_table_impl(scale, tab);
    __m256i recip = _mm256_loadu_si256((const __m256i *)tab);
    if (table && want_sq_err)
        hif8_fq_run(x, y, n, scale, recip, 1, 1, st);
    else if (table)
        hif8_fq_run(x, y, n, scale, recip, 0, 1, st);
    else if (want_sq_err)
        hif8_fq_run(x, y, n, scale, recip, 1, 0, st);
    else
        hif8_fq_run(x, y, n, scale, recip, 0, 0, st);
}

/* Codes of 8 values, one per int32 lane. */
static inline __attribute__((always_inline)) __m256i hif8_encode_8(__m256 xv, int mode)
{
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    __m256i b = _mm256_castps_si256(xv);
    __m256i a = _mm256_and_si256(b, abs_mask);
    __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F800000));
    __m256i neg = _mm256_cmpgt_epi32(_mm256_setzero_si256(), b);
    uint32_t clamp = mode == HIF8_SAT ? HIF8_BITS_MAX : HIF8_BITS_2P16;
    a = _mm256_min_epi32(a, _mm256_set1_epi32((int)clamp));
    __m256i shift, nz;
    __m256i r = hif8_round_mag(a, &nz, &shift);
    __m256i idx = _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(r, 23), _mm256_set1_epi32(104)),
                                   _mm256_setzero_si256());
    __m256i code = _mm256_i32gather_epi32((const int *)hif8_code_base_impl, idx, 4);
    code = _mm256_or_si256(code, _mm256_srlv_epi32(_mm256_and_si256(r, _mm256_set1_epi32(0x7FFFFF)),
                                                   shift));
    code = _mm256_or_si256(code, _mm256_and_si256(_mm256_and_si256(nz, neg), _mm256_set1_epi32(0x80)));
    return _mm256_blendv_epi8(code, _mm256_set1_epi32(HIF8_CODE_NAN), nan);
}

/* low byte of each int32 lane -> 8 bytes */
static inline __m128i hif8_pack_bytes(__m256i c)
{
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                          0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i p = _mm256_shuffle_epi8(c, pick);
    return _mm_unpacklo_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

void hif8_codes_encode_avx2_impl(const float *x, uint8_t *codes, size_t n, int mode)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storel_epi64((__m128i *)(codes + i), hif8_pack_bytes(hif8_encode_8(_mm256_loadu_ps(x + i), mode)));
    if (i < n) {
        uint8_t tmp[16];
        __m256 xv = _mm256_maskload_ps(x + i, hif8_lane_mask(n - i));
        _mm_storeu_si128((__m128i *)tmp, hif8_pack_bytes(hif8_encode_8(xv, mode)));
        memcpy(codes + i, tmp, n - i);
    }
}
