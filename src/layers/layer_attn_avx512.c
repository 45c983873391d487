/* layer_attn_avx512.c: AVX-512 versions of the attention loops (see
 * layer_attn_impl.h for the one definition every path computes).  The forward
 * works on blocks of ATTN_ROWS query rows sharing one KV head: each key/value
 * vector loaded is used by every row of the block; so does the backward, on
 * blocks of ATTN_BWD_ROWS (each k/dk/dv row load serves the block's rows).
 * Rows of keys and values sit kv_stride apart, which the hardware prefetchers
 * do not follow: the loops over keys prefetch them.  Separate multiply and add (no
 * FMA) in the portable order, so the bits equal the portable loops'.  Call
 * only when cpu_level() >= CPU_LEVEL_AVX512. */
#include <immintrin.h>
#include <math.h>

#include "layer_attn_impl.h"
#include "../kernels/simd_tr16_avx512_impl.h"

#define AR ATTN_ROWS
/* Keys ahead at which the weighted sum prefetches its value rows: they sit
 * kv_stride apart (3 KB on the 1B model), a stride the hardware prefetchers
 * do not follow.  The 1B layer's forward (T = 1024, 12/6 heads, hd 128):
 * 24.3 -> 22.7 ms; 4, 8 and 16 keys measured alike. */
enum { ATTN_WS_PF = 4 };

static __mmask16 attn_tail_mask(int left)
{
    return left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
}

/* attn_exp on 16 lanes: the same operations as the scalar one in layer_attn.c */
static inline __attribute__((always_inline)) __m512 attn_exp16(__m512 x)
{
    const __m512 magic = _mm512_set1_ps(ATTN_EXP_ROUND);
    __m512 t = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(ATTN_EXP_LOG2E)), magic);
    __m512 n = _mm512_sub_ps(t, magic);
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(ATTN_EXP_LN2_HI)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(ATTN_EXP_LN2_LO)));
    __m512 p = _mm512_set1_ps(ATTN_EXP_P0);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ATTN_EXP_P1));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ATTN_EXP_P2));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ATTN_EXP_P3));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ATTN_EXP_P4));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ATTN_EXP_P5));
    __m512 y = _mm512_mul_ps(p, _mm512_mul_ps(r, r));
    y = _mm512_add_ps(_mm512_add_ps(y, r), _mm512_set1_ps(1.0f));
    __m512i e = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_castps_si512(magic));
    e = _mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(127)), 23);
    y = _mm512_mul_ps(y, _mm512_castsi512_ps(e));
    /* x < ATTN_EXP_MIN -> 0 (NaN stays NaN) */
    __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(ATTN_EXP_MIN), _CMP_NLT_UQ);
    return _mm512_maskz_mov_ps(keep, y);
}

void attn_exp_avx512_impl(float *y, const float *x, int n)
{
    for (int j = 0; j < n; j += 16) {
        __mmask16 m = attn_tail_mask(n - j);
        _mm512_mask_storeu_ps(y + j, m, attn_exp16(_mm512_maskz_loadu_ps(m, x + j)));
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

/* t[i] lane j = src[j * stride + i] for j < nj, i < ni, zeros elsewhere (a tile
 * of at most 16 x 16): 32-bit, 64-bit, then two 128-bit-block interleaves. */
static inline __attribute__((always_inline)) void
attn_tr16_regs(__m512 t[16], const float *src, size_t stride, int nj, int ni)
{
    const __mmask16 mi = attn_tail_mask(ni);
    __m512 r[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++)
        r[j] = j < nj ? _mm512_maskz_loadu_ps(mi, src + (size_t)j * stride) : _mm512_setzero_ps();
    simd_tr16_avx512(t, r);
}

/* dst[i * ld + j] = src[j * stride + i] for j < nj, i < ni */
static void attn_tr16(float *dst, size_t ld, const float *src, size_t stride, int nj, int ni)
{
    const __mmask16 mj = attn_tail_mask(nj);
    __m512 t[16];
    attn_tr16_regs(t, src, stride, nj, ni);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        if (i < ni)
            _mm512_mask_storeu_ps(dst + (size_t)i * ld, mj, t[i]);
}

void attn_keys_transpose_avx512_impl(float *kt, size_t ld, const float *k, size_t kv_stride,
                                     int n, int hd)
{
    for (int j = 0; j < n; j += 16)
        for (int i = 0; i < hd; i += 16)
            attn_tr16(kt + (size_t)i * ld + j, ld, k + (size_t)j * kv_stride + i, kv_stride,
                      n - j < 16 ? n - j : 16, hd - i < 16 ? hd - i : 16);
}

/* e[r][j .. j+16) = a_r * scale under mask m, for the block's rows. */
static inline __attribute__((always_inline)) void
attn_scores_store16(const attn_block *b, int j, __mmask16 m, __m512 sc, __m512 a0, __m512 a1,
                    __m512 a2, __m512 a3)
{
    _mm512_mask_storeu_ps(b->e[0] + j, m, _mm512_mul_ps(a0, sc));
    if (b->rows > 1)
        _mm512_mask_storeu_ps(b->e[1] + j, m, _mm512_mul_ps(a1, sc));
    if (b->rows > 2)
        _mm512_mask_storeu_ps(b->e[2] + j, m, _mm512_mul_ps(a2, sc));
    if (b->rows > 3)
        _mm512_mask_storeu_ps(b->e[3] + j, m, _mm512_mul_ps(a3, sc));
}

/* Scores of the block's rows for keys [0, n): e[r][j] = (q_r . k_j) * scale, the
 * dot product summed over i in order.  Keys transposed (kt, ld) or, kt NULL,
 * read from their rows (k, kv_stride) and transposed 16 x 16 in registers.
 * R (a constant >= b->rows): the rows computed; a block of fewer rows (one
 * decode token's heads of a KV head: 1 for multi-head attention, 2 for the 1B's
 * groups of 2) computes no sums for the rows it does not have. */
static inline __attribute__((always_inline)) void
attn_block_scores_r(const attn_block *b, int n, const float *kt, size_t ld, const float *k,
                    size_t kv_stride, int hd, float scale, const int R)
{
    const __m512 sc = _mm512_set1_ps(scale);
    const float *q0 = b->q[0], *q1 = b->q[1], *q2 = b->q[2], *q3 = b->q[3];
    int j = 0;
    if (kt)   /* 64 keys at a time while more than 48 are left, then 16 */
        for (; j + 48 < n; j += 64) {
            const __mmask16 m0 = attn_tail_mask(n - j), m1 = attn_tail_mask(n - j - 16);
            const __mmask16 m2 = attn_tail_mask(n - j - 32), m3 = attn_tail_mask(n - j - 48);
            __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
            __m512 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
            __m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
            __m512 a30 = a00, a31 = a00, a32 = a00, a33 = a00;
            for (int i = 0; i < hd; i++) {
                const float *kr = kt + (size_t)i * ld + j;
                const __m512 k0 = _mm512_maskz_loadu_ps(m0, kr);
                const __m512 k1 = _mm512_maskz_loadu_ps(m1, kr + 16);
                const __m512 k2 = _mm512_maskz_loadu_ps(m2, kr + 32);
                const __m512 k3 = _mm512_maskz_loadu_ps(m3, kr + 48);
                __m512 x = _mm512_set1_ps(q0[i]);
                a00 = _mm512_add_ps(a00, _mm512_mul_ps(x, k0));
                a01 = _mm512_add_ps(a01, _mm512_mul_ps(x, k1));
                a02 = _mm512_add_ps(a02, _mm512_mul_ps(x, k2));
                a03 = _mm512_add_ps(a03, _mm512_mul_ps(x, k3));
                if (R > 1) {
                    x = _mm512_set1_ps(q1[i]);
                    a10 = _mm512_add_ps(a10, _mm512_mul_ps(x, k0));
                    a11 = _mm512_add_ps(a11, _mm512_mul_ps(x, k1));
                    a12 = _mm512_add_ps(a12, _mm512_mul_ps(x, k2));
                    a13 = _mm512_add_ps(a13, _mm512_mul_ps(x, k3));
                }
                if (R > 2) {
                    x = _mm512_set1_ps(q2[i]);
                    a20 = _mm512_add_ps(a20, _mm512_mul_ps(x, k0));
                    a21 = _mm512_add_ps(a21, _mm512_mul_ps(x, k1));
                    a22 = _mm512_add_ps(a22, _mm512_mul_ps(x, k2));
                    a23 = _mm512_add_ps(a23, _mm512_mul_ps(x, k3));
                    x = _mm512_set1_ps(q3[i]);
                    a30 = _mm512_add_ps(a30, _mm512_mul_ps(x, k0));
                    a31 = _mm512_add_ps(a31, _mm512_mul_ps(x, k1));
                    a32 = _mm512_add_ps(a32, _mm512_mul_ps(x, k2));
                    a33 = _mm512_add_ps(a33, _mm512_mul_ps(x, k3));
                }
            }
#define ATTN_STORE4(r, x0, x1, x2, x3)                                       \
    if (r < b->rows) {                                                       \
        _mm512_mask_storeu_ps(b->e[r] + j, m0, _mm512_mul_ps(x0, sc));       \
        _mm512_mask_storeu_ps(b->e[r] + j + 16, m1, _mm512_mul_ps(x1, sc));  \
        _mm512_mask_storeu_ps(b->e[r] + j + 32, m2, _mm512_mul_ps(x2, sc));  \
        _mm512_mask_storeu_ps(b->e[r] + j + 48, m3, _mm512_mul_ps(x3, sc));  \
    }
            ATTN_STORE4(0, a00, a01, a02, a03)
            ATTN_STORE4(1, a10, a11, a12, a13)
            ATTN_STORE4(2, a20, a21, a22, a23)
            ATTN_STORE4(3, a30, a31, a32, a33)
#undef ATTN_STORE4
        }
    for (; kt && j < n; j += 16) {
        const __mmask16 m = attn_tail_mask(n - j);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i = 0; i < hd; i++) {
            const __m512 x = _mm512_maskz_loadu_ps(m, kt + (size_t)i * ld + j);
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_set1_ps(q0[i]), x));
            if (R > 1)
                a1 = _mm512_add_ps(a1, _mm512_mul_ps(_mm512_set1_ps(q1[i]), x));
            if (R > 2) {
                a2 = _mm512_add_ps(a2, _mm512_mul_ps(_mm512_set1_ps(q2[i]), x));
                a3 = _mm512_add_ps(a3, _mm512_mul_ps(_mm512_set1_ps(q3[i]), x));
            }
        }
        attn_scores_store16(b, j, m, sc, a0, a1, a2, a3);
    }
    for (; j < n; j += 16) {   /* keys from their rows: 16 x 16 tiles transposed in registers */
        const __mmask16 m = attn_tail_mask(n - j);
        const float *kj = k + (size_t)j * kv_stride;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i0 = 0; i0 < hd; i0 += 16) {
            __m512 t[16];
            const int ni = hd - i0 < 16 ? hd - i0 : 16;
            attn_tr16_regs(t, kj + i0, kv_stride, n - j < 16 ? n - j : 16, ni);
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) {
                if (i >= ni)
                    break;
                a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_set1_ps(q0[i0 + i]), t[i]));
                if (R > 1)
                    a1 = _mm512_add_ps(a1, _mm512_mul_ps(_mm512_set1_ps(q1[i0 + i]), t[i]));
                if (R > 2) {
                    a2 = _mm512_add_ps(a2, _mm512_mul_ps(_mm512_set1_ps(q2[i0 + i]), t[i]));
                    a3 = _mm512_add_ps(a3, _mm512_mul_ps(_mm512_set1_ps(q3[i0 + i]), t[i]));
                }
            }
        }
        attn_scores_store16(b, j, m, sc, a0, a1, a2, a3);
    }
}

static void attn_block_scores(const attn_block *b, int n, const float *kt, size_t ld,
                              const float *k, size_t kv_stride, int hd, float scale)
{
    if (b->rows == 1)
        attn_block_scores_r(b, n, kt, ld, k, kv_stride, hd, scale, 1);
    else if (b->rows == 2)
        attn_block_scores_r(b, n, kt, ld, k, kv_stride, hd, scale, 2);
    else
        attn_block_scores_r(b, n, kt, ld, k, kv_stride, hd, scale, AR);
}

/* Scores -> exp(s - max) in place over [0, n), lanes summed by j mod 16 then
 * the fixed tree; returns 1 / sum. */
static float attn_row_softmax(float *e, int n)
{
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < n; j += 16) {
        const __mmask16 m = attn_tail_mask(n - j);
        mx = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, e + j), mx);
    }
    const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
        const __mmask16 m = attn_tail_mask(n - j);
        const __m512 x = attn_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, e + j), vmax));
        const __m512 ex = _mm512_maskz_mov_ps(m, x);
        _mm512_mask_storeu_ps(e + j, m, ex);
        sum = _mm512_add_ps(sum, ex);
    }
    return 1.0f / attn_hsum(sum);
}

/* o_r[i0 .. i0 + 64) = (sum_{j < n_r} e_r[j] v_j[i]) * inv_r, j in order;
 * nv vectors of 16 dims (the last one masked by m_last). */
static inline __attribute__((always_inline)) void
attn_block_wsum(const attn_block *b, const float *inv, const float *v, size_t kv_stride, int i0,
                int nv, __mmask16 m_last, int n_min, int n_max, const int R)
{
    __m512 acc[AR][4];
#pragma GCC unroll 4
    for (int r = 0; r < AR; r++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            acc[r][c] = _mm512_setzero_ps();
    const float *e0 = b->e[0], *e1 = b->e[1], *e2 = b->e[2], *e3 = b->e[3];
    for (int j = 0; j < n_min; j++) {
        const float *vr = v + (size_t)j * kv_stride + i0;
#pragma GCC unroll 4
        for (int c = 0; c < nv; c++)
            _mm_prefetch((const char *)(vr + ATTN_WS_PF * kv_stride + 16 * c), _MM_HINT_T0);
        const __m512 w0 = _mm512_set1_ps(e0[j]), w1 = _mm512_set1_ps(e1[j]);
        const __m512 w2 = _mm512_set1_ps(e2[j]), w3 = _mm512_set1_ps(e3[j]);
#pragma GCC unroll 4
        for (int c = 0; c < nv; c++) {
            const __m512 x = c == nv - 1 ? _mm512_maskz_loadu_ps(m_last, vr + 16 * c)
                                         : _mm512_loadu_ps(vr + 16 * c);
            acc[0][c] = _mm512_add_ps(acc[0][c], _mm512_mul_ps(w0, x));
            if (R > 1)
                acc[1][c] = _mm512_add_ps(acc[1][c], _mm512_mul_ps(w1, x));
            if (R > 2) {
                acc[2][c] = _mm512_add_ps(acc[2][c], _mm512_mul_ps(w2, x));
                acc[3][c] = _mm512_add_ps(acc[3][c], _mm512_mul_ps(w3, x));
            }
        }
    }
    /* the causal triangle: key j only for the rows that see it */
    for (int j = n_min; j < n_max; j++) {
        const float *vr = v + (size_t)j * kv_stride + i0;
#pragma GCC unroll 4
        for (int r = 0; r < AR; r++) {
            if (r >= R || j >= b->n[r])
                continue;
            const __m512 w = _mm512_set1_ps(b->e[r][j]);
#pragma GCC unroll 4
            for (int c = 0; c < nv; c++) {
                const __m512 x = c == nv - 1 ? _mm512_maskz_loadu_ps(m_last, vr + 16 * c)
                                             : _mm512_loadu_ps(vr + 16 * c);
                acc[r][c] = _mm512_add_ps(acc[r][c], _mm512_mul_ps(w, x));
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < AR; r++) {
        if (r >= b->rows)
            break;
        const __m512 s = _mm512_set1_ps(inv[r]);
#pragma GCC unroll 4
        for (int c = 0; c < nv; c++)
            _mm512_mask_storeu_ps(b->o[r] + i0 + 16 * c, c == nv - 1 ? m_last : 0xffff,
                                  _mm512_mul_ps(acc[r][c], s));
    }
}

/* The weighted sums of every 64 dims, R rows (a constant >= b->rows). */
static inline __attribute__((always_inline)) void
attn_block_wsums(const attn_block *b, const float *inv, const float *v, size_t kv_stride, int hd,
                 int n_min, int n_max, const int R)
{
    for (int i0 = 0; i0 < hd; i0 += 64) {
        const int left = hd - i0, nv = left >= 64 ? 4 : (left + 15) / 16;
        const __mmask16 ml = attn_tail_mask(left - 16 * (nv - 1));
        if (nv == 4 && ml == 0xffff)
            attn_block_wsum(b, inv, v, kv_stride, i0, 4, 0xffff, n_min, n_max, R);
        else if (nv == 4)
            attn_block_wsum(b, inv, v, kv_stride, i0, 4, ml, n_min, n_max, R);
        else if (nv == 3)
            attn_block_wsum(b, inv, v, kv_stride, i0, 3, ml, n_min, n_max, R);
        else if (nv == 2)
            attn_block_wsum(b, inv, v, kv_stride, i0, 2, ml, n_min, n_max, R);
        else
            attn_block_wsum(b, inv, v, kv_stride, i0, 1, ml, n_min, n_max, R);
    }
}

void attn_block_avx512_impl(const attn_block *b, const float *kt, size_t ld, const float *k,
                            const float *v, size_t kv_stride, int hd, float scale, int att_width)
{
    int n_min = b->n[0], n_max = b->n[0];
    for (int r = 1; r < AR; r++) {
        n_min = b->n[r] < n_min ? b->n[r] : n_min;
        n_max = b->n[r] > n_max ? b->n[r] : n_max;
    }
    attn_block_scores(b, n_max, kt, ld, k, kv_stride, hd, scale);
    float inv[AR];
    for (int r = 0; r < b->rows; r++)
        inv[r] = attn_row_softmax(b->e[r], b->n[r]);
    for (int r = b->rows; r < AR; r++)
        inv[r] = inv[b->rows - 1];
    if (b->rows == 1)
        attn_block_wsums(b, inv, v, kv_stride, hd, n_min, n_max, 1);
    else if (b->rows == 2)
        attn_block_wsums(b, inv, v, kv_stride, hd, n_min, n_max, 2);
    else
        attn_block_wsums(b, inv, v, kv_stride, hd, n_min, n_max, AR);
    if (att_width <= 0)
        return;
    for (int r = 0; r < b->rows; r++) {   /* saved probabilities: e * inv, zeros after n */
        const __m512 s = _mm512_set1_ps(inv[r]);
        float *e = b->e[r];
        for (int j = 0; j < att_width; j += 16) {
            const __mmask16 m = attn_tail_mask(att_width - j), mn = attn_tail_mask(b->n[r] - j);
            _mm512_mask_storeu_ps(e + j, m, _mm512_maskz_mul_ps(mn, _mm512_maskz_loadu_ps(mn, e + j), s));
        }
    }
}

#define BR ATTN_BWD_ROWS
/* Keys ahead at which the backward's update prefetches the k, dk and dv rows
 * (as ATTN_WS_PF): on the 1B layer 4, 8, 16 and 32 keys gave 57, 61, 57 and
 * 53 GFLOP per CPU-second, none 46. */
enum { ATTN_BWD_PF = 8 };

/* Backward updates over the 16 dims [i0, i0 + 16) (masked by m) for the
 * block's BR rows: dq_r += ds_r[j] k_j for j in order; dk_j += ds_r[j] q_r and
 * dv_j += a_r[j] g_r, rows in order, each key's rows before the next key.
 * wa[2 BR j + r] = ds_r[j], wa[2 BR j + BR + r] = a_r[j]; qg: the rows' q then
 * g slices of these dims, qg[16 r + l] = q_r[i0 + l] (g at BR + r).  One
 * vector of dims per pass keeps the 8 dq sums and the 16 q/g slices in
 * registers: each k, dk and dv line read serves 8 rows' products (4 rows'
 * before: the pass was bound by those reads, from L2 at T = 1024). */
static inline __attribute__((always_inline)) void
attn_bwd_block_upd(const attn_bwd_block *b, const float *wa, const float *qg, const int n[BR],
                   const float *k, float *dk, float *dv, size_t kv_stride, int i0, __mmask16 m,
                   int n_min, int n_max)
{
    __m512 acc[BR], qv[BR], gv[BR];
#pragma GCC unroll 8
    for (int r = 0; r < BR; r++) {
        acc[r] = _mm512_maskz_loadu_ps(m, b->dq[r] + i0);
        qv[r] = _mm512_loadu_ps(qg + 16 * r);
        gv[r] = _mm512_loadu_ps(qg + 16 * (BR + r));
    }
    const float *kr = k + i0, *p = wa;
    float *dkr = dk + i0, *dvr = dv + i0;
    const size_t pf = ATTN_BWD_PF * kv_stride;
    for (int j = 0; j < n_min; j++, p += 2 * BR, kr += kv_stride, dkr += kv_stride, dvr += kv_stride) {
        _mm_prefetch((const char *)(kr + pf), _MM_HINT_T0);
        _mm_prefetch((const char *)(dkr + pf), _MM_HINT_T0);
        _mm_prefetch((const char *)(dvr + pf), _MM_HINT_T0);
        const __m512 kx = _mm512_maskz_loadu_ps(m, kr);
        __m512 x = _mm512_maskz_loadu_ps(m, dkr), y = _mm512_maskz_loadu_ps(m, dvr);
#pragma GCC unroll 8
        for (int r = 0; r < BR; r++) {
            const __m512 w = _mm512_set1_ps(p[r]);
            acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(w, kx));
            x = _mm512_add_ps(x, _mm512_mul_ps(w, qv[r]));
        }
#pragma GCC unroll 8
        for (int r = 0; r < BR; r++)
            y = _mm512_add_ps(y, _mm512_mul_ps(_mm512_set1_ps(p[BR + r]), gv[r]));
        _mm512_mask_storeu_ps(dkr, m, x);
        _mm512_mask_storeu_ps(dvr, m, y);
    }
    /* the causal triangle (and padding rows, n = 0): key j only for the rows that see it */
    for (int j = n_min; j < n_max; j++, p += 2 * BR, kr += kv_stride, dkr += kv_stride, dvr += kv_stride) {
        const __m512 kx = _mm512_maskz_loadu_ps(m, kr);
        __m512 x = _mm512_maskz_loadu_ps(m, dkr), y = _mm512_maskz_loadu_ps(m, dvr);
#pragma GCC unroll 8
        for (int r = 0; r < BR; r++) {
            if (j >= n[r])
                continue;
            const __m512 w = _mm512_set1_ps(p[r]), pa = _mm512_set1_ps(p[BR + r]);
            acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(w, kx));
            x = _mm512_add_ps(x, _mm512_mul_ps(w, qv[r]));
            y = _mm512_add_ps(y, _mm512_mul_ps(pa, gv[r]));
        }
        _mm512_mask_storeu_ps(dkr, m, x);
        _mm512_mask_storeu_ps(dvr, m, y);
    }
#pragma GCC unroll 8
    for (int r = 0; r < BR; r++)
        if (r < b->rows)
            _mm512_mask_storeu_ps(b->dq[r] + i0, m, acc[r]);
}

/* Rows [h0, h0 + AR) of the block: datt_r (the forward's score loop on the
 * transposed values), sum_r and ds_r into rows[r] and a_r copied into
 * rows[BR + r], over keys [0, n_max) (zero past each row's n; n_max: the
 * block's, so that every key the update reads is written).  Rows of the half
 * past b->rows are padding (n = 0): zeros. */
static void attn_bwd_half(const attn_bwd_block *b, int h0, const int n[BR], const float *vt,
                          size_t ld, int hd, float scale, float *rows, int n_max)
{
    attn_block sb;
    float *ds[AR];
    int hn_min = n[h0], hn_max = 0;
    sb.rows = b->rows - h0 < AR ? b->rows - h0 : AR;
    for (int r = 0; r < AR; r++) {
        ds[r] = rows + (size_t)(h0 + r) * ld;
        sb.q[r] = b->g[h0 + r];
        sb.e[r] = ds[r];
        sb.o[r] = NULL;
        sb.n[r] = b->n[h0 + r];
        hn_min = n[h0 + r] < hn_min ? n[h0 + r] : hn_min;
        hn_max = n[h0 + r] > hn_max ? n[h0 + r] : hn_max;
    }
    /* datt rows: the forward's score loop on the transposed values (times 1: exact) */
    if (sb.rows > 0)
        attn_block_scores(&sb, hn_max, vt, ld, NULL, 0, hd, 1.0f);
    /* sum_r = sum_j a_j datt_j in j order: a latency chain per row, the rows' interleaved */
    float sum[AR];
    {
        const float *a0 = b->a[h0], *a1 = b->a[h0 + 1], *a2 = b->a[h0 + 2], *a3 = b->a[h0 + 3];
        const float *d0 = ds[0], *d1 = ds[1], *d2 = ds[2], *d3 = ds[3];
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (int j = 0; j < hn_min; j++) {
            s0 += a0[j] * d0[j];
            s1 += a1[j] * d1[j];
            s2 += a2[j] * d2[j];
            s3 += a3[j] * d3[j];
        }
        sum[0] = s0;
        sum[1] = s1;
        sum[2] = s2;
        sum[3] = s3;
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int r = 0; r < AR; r++) {
        const float *a = b->a[h0 + r];
        float *d = ds[r], *ac = rows + (size_t)(BR + h0 + r) * ld;
        const int nr = n[h0 + r];
        for (int j = hn_min; j < nr; j++)
            sum[r] += a[j] * d[j];
        const __m512 vs = _mm512_set1_ps(sum[r]);
        for (int j = 0; j < n_max; j += 16) {   /* ds_j = a_j (datt_j - sum) scale; a copied */
            const __mmask16 mk = attn_tail_mask(nr - j);
            const __m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(mk, d + j), vs);
            const __m512 av = _mm512_maskz_loadu_ps(mk, a + j);
            _mm512_storeu_ps(d + j, _mm512_mul_ps(_mm512_mul_ps(av, x), sc));
            _mm512_storeu_ps(ac + j, av);
        }
    }
}

void attn_bwd_block_avx512_impl(const attn_bwd_block *b, const float *vt, size_t ld,
                                const float *k, float *dk, float *dv, size_t kv_stride, int hd,
                                float scale, float *work)
{
    /* work: rows [2 BR][ld] (ds, then a), wa [ld][2 BR], qg [hd / 16][2 BR][16] */
    float *rows = work, *wa = work + 2 * BR * ld, *qg = wa + 2 * BR * ld;
    int n[BR], n_min = b->n[0], n_max = 0;
    for (int r = 0; r < BR; r++) {
        n[r] = r < b->rows ? b->n[r] : 0;   /* padding rows: no keys */
        n_min = n[r] < n_min ? n[r] : n_min;
        n_max = n[r] > n_max ? n[r] : n_max;
    }
    attn_bwd_half(b, 0, n, vt, ld, hd, scale, rows, n_max);
    attn_bwd_half(b, AR, n, vt, ld, hd, scale, rows, n_max);
    for (int j = 0; j < n_max; j += 16)   /* rows -> wa, key by key */
        attn_tr16(wa + (size_t)j * 2 * BR, 2 * BR, rows + j, ld, 2 * BR,
                  n_max - j < 16 ? n_max - j : 16);
    const int hdv = (hd + 15) / 16;
    for (int c = 0; c < hdv; c++) {
        const __mmask16 m = attn_tail_mask(hd - 16 * c);
        for (int r = 0; r < BR; r++) {
            _mm512_storeu_ps(qg + (size_t)(2 * BR * c + r) * 16, _mm512_maskz_loadu_ps(m, b->q[r] + 16 * c));
            _mm512_storeu_ps(qg + (size_t)(2 * BR * c + BR + r) * 16,
                             _mm512_maskz_loadu_ps(m, b->g[r] + 16 * c));
        }
    }
    for (int c = 0; c < hdv; c++)
        attn_bwd_block_upd(b, wa, qg + (size_t)c * 2 * BR * 16, n, k, dk, dv, kv_stride, 16 * c,
                           attn_tail_mask(hd - 16 * c), n_min, n_max);
}
