/* layer_attn.c: causal grouped-query attention over a KV cache
 * (see include/qs/layers.h for shapes).
 *
 * The forward computes ONE definition (layer_attn_impl.h): fixed-order dot
 * products, an exact two-pass softmax with our own exp, the weighted sum over
 * keys in order.  So every query row's output is a fixed function of its q row
 * and its keys/values, bit-identical whatever T, pos0, B, its place in a block
 * and the thread count, and the same bits on the portable and AVX-512 loops.
 *  - AVX-512: blocks of ATTN_ROWS query rows of one KV head (heads of a GQA
 *    group and positions, in that order) share each key/value load.  Prompts
 *    (T >= ATTN_TRANSPOSE_MIN_T, scratch given) first transpose the keys of
 *    each (batch, KV head) into the scratch; decode steps gather them from
 *    the cache rows instead.  One parallel region, rows never split.
 *  - portable: prompts use the transposed keys (compiler-vectorized loops),
 *    decode steps (or no scratch) one row at a time with the scores computed
 *    twice (max pass, then exp/sum/weighted-sum pass) so nothing is stored.
 * The backward's definition is the portable loop of attn_backward; the
 * AVX-512 path computes its bits in blocks of ATTN_BWD_ROWS rows of one KV head
 * (one task per (batch, KV head), values transposed once per task).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "layer_attn_impl.h"
#include "qs/cpu.h"
#include "qs/layers.h"
#include "qs/mem.h"

#define ATTN_TRANSPOSE_MIN_T 8
#define ATTN_SLOTS 16   /* per-thread score blocks in the scratch (threads beyond are not used) */
#define ATTN_LANES 16   /* the softmax sum's lanes (layer_attn_impl.h) */

static float attn_dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

float attn_exp(float x)
{
    if (x < ATTN_EXP_MIN)
        return 0.0f;
    const float t = x * ATTN_EXP_LOG2E + ATTN_EXP_ROUND, n = t - ATTN_EXP_ROUND;
    float r = x - n * ATTN_EXP_LN2_HI;
    r = r - n * ATTN_EXP_LN2_LO;
    float p = ATTN_EXP_P0;
    p = p * r + ATTN_EXP_P1;
    p = p * r + ATTN_EXP_P2;
    p = p * r + ATTN_EXP_P3;
    p = p * r + ATTN_EXP_P4;
    p = p * r + ATTN_EXP_P5;
    float y = p * (r * r);
    y = y + r + 1.0f;
    const float magic = ATTN_EXP_ROUND;
    uint32_t tb, mb;
    memcpy(&tb, &t, sizeof tb);
    memcpy(&mb, &magic, sizeof mb);
    uint32_t sb = (tb - mb + 127u) << 23;
    float s;
    memcpy(&s, &sb, sizeof s);
    return y * s;
}

/* The lane sum of layer_attn_impl.h: 16 lanes by j mod 16, then the tree. */
static float attn_lanes_sum(float *lane)
{
    for (int w = ATTN_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            lane[l] = lane[l] + lane[l + w];
    return lane[0];
}

/* A saved attention row: the n exp values times inv (the probabilities), zeros up to width. */
static void attn_probs_store(float *p, int n, int width, float inv)
{
    for (int j = 0; j < n; j++)
        p[j] *= inv;
    for (int j = n; j < width; j++)
        p[j] = 0.0f;
}

/* Portable, one row, nothing stored but o (and p when saving att): scores are
 * computed in a max pass and again in the exp/sum/weighted-sum pass. */
static void attn_row_ref(float *o, float *p, int width, const float *qr, const float *kb,
                         const float *vb, int n, size_t kv_stride, int hd, float scale)
{
    float mx = -INFINITY, lane[ATTN_LANES] = {0};
    for (int j = 0; j < n; j++) {
        float s = attn_dot(qr, kb + (size_t)j * kv_stride, hd) * scale;
        mx = s > mx ? s : mx;
    }
    memset(o, 0, (size_t)hd * sizeof *o);
    for (int j = 0; j < n; j++) {
        float e = attn_exp(attn_dot(qr, kb + (size_t)j * kv_stride, hd) * scale - mx);
        const float *vr = vb + (size_t)j * kv_stride;
        lane[j % ATTN_LANES] += e;
        if (p)
            p[j] = e;
        for (int i = 0; i < hd; i++)
            o[i] += e * vr[i];
    }
    const float inv = 1.0f / attn_lanes_sum(lane);
    for (int i = 0; i < hd; i++)
        o[i] *= inv;
    if (p)
        attn_probs_store(p, n, width, inv);
}

size_t attn_scratch_elems(int B, int Tcap, int KVH, int hd)
{
    /* transposed keys [B, KVH, hd, Tcap] + ATTN_SLOTS blocks of ATTN_ROWS score rows [Tcap] */
    return (size_t)B * KVH * hd * Tcap + (size_t)ATTN_SLOTS * ATTN_ROWS * Tcap;
}

/* y[0..m) = s * sum_{r < rows} a[r] * x[r * ld + (0..m)], accumulated row by row:
 * the scores q . k_j over transposed keys (rows = hd) and the weighted sum of
 * values (rows = n) are both this loop. */
static void attn_rows_axpy(float *restrict y, const float *restrict a, const float *restrict x,
                           int rows, size_t ld, int m, float s)
{
    for (int j = 0; j < m; j++)
        y[j] = 0.0f;
    for (int r = 0; r < rows; r++) {
        const float ar = a[r], *restrict xr = x + (size_t)r * ld;
#ifdef _OPENMP
#pragma omp simd
#endif
        for (int j = 0; j < m; j++)
            y[j] += ar * xr[j];
    }
    for (int j = 0; j < m; j++)
        y[j] *= s;
}

/* p[j] = (q . k_j) * scale for j < n, keys transposed: kt[i * ld + j] */
static void attn_scores_t(float *restrict p, const float *restrict qr, const float *restrict kt,
                          int n, size_t ld, int hd, float scale)
{
    attn_rows_axpy(p, qr, kt, hd, ld, n, scale);
}

/* p[0..n) scores -> exp(s - max) in place; returns 1 / (lane-tree sum) */
static float attn_softmax_ref(float *p, int n)
{
    float mx = -INFINITY, lane[ATTN_LANES] = {0};
    for (int j = 0; j < n; j++)
        mx = p[j] > mx ? p[j] : mx;
    for (int j = 0; j < n; j++) {
        p[j] = attn_exp(p[j] - mx);
        lane[j % ATTN_LANES] += p[j];
    }
    return 1.0f / attn_lanes_sum(lane);
}

/* o[hd] = (sum_j e[j] v_j) * inv */
static void attn_weighted_sum(float *restrict o, const float *restrict e, float inv,
                              const float *restrict vb, int n, size_t kv_stride, int hd)
{
    attn_rows_axpy(o, e, vb, n, kv_stride, hd, inv);
}

static int attn_threads(double work)
{
    int n = 1;
#ifdef _OPENMP
    /* threads only pay off beyond ~64k multiply-adds (decode steps of tiny models stay serial) */
    n = work > 65536.0 ? omp_get_max_threads() : 1;
#endif
    (void)work;
    return n < ATTN_SLOTS ? n : ATTN_SLOTS;
}

static int attn_slot(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Start position of sequence b: p0s[b], or pos0 for every sequence. */
static inline int attn_p0(const int *p0s, int pos0, int b) { return p0s ? p0s[b] : pos0; }

/* The largest start position (the keys the longest row sees, minus T). */
static int attn_p0_max(const int *p0s, int pos0, int B)
{
    int m = pos0;
    for (int b = 0; p0s && b < B; b++)
        m = b == 0 || p0s[b] > m ? p0s[b] : m;
    return m;
}

/* keys of (b, KV head g) transposed into kt [B, KVH, hd, Tcap], keys 0 .. Tk-1 */
static void attn_transpose_one(float *kt, const float *k, int bg, int Tk, int Tcap, int KVH, int hd,
                               int simd512)
{
    const int b = bg / KVH, g = bg % KVH;
    const size_t kv_stride = (size_t)KVH * hd;
    const float *kb = k + (size_t)b * Tcap * kv_stride + (size_t)g * hd;
    float *dst = kt + (size_t)bg * hd * Tcap;
    if (simd512) {
        attn_keys_transpose_avx512_impl(dst, (size_t)Tcap, kb, kv_stride, Tk, hd);
        return;
    }
    for (int j = 0; j < Tk; j++)
        for (int i = 0; i < hd; i++)
            dst[(size_t)i * Tcap + j] = kb[(size_t)j * kv_stride + i];
}

/* Portable prompt path: one row at a time on the transposed keys. */
static void attn_forward_tiled(float *out, float *att, const float *q, const float *k,
                               const float *v, int B, int T, const int *p0s, int pos0, int Tcap,
                               int H, int KVH, int hd, float *scratch)
{
    const int group = H / KVH, Tk = attn_p0_max(p0s, pos0, B) + T;
    const size_t kv_stride = (size_t)KVH * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    float *kt = scratch, *rows = scratch + (size_t)B * KVH * hd * Tcap;
    const int n_thr = attn_threads((double)B * H * T * Tk * hd);
#ifdef _OPENMP
#pragma omp parallel num_threads(n_thr)
#endif
    {
        const int slot = attn_slot();
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int bg = 0; bg < B * KVH; bg++)
            attn_transpose_one(kt, k, bg, attn_p0(p0s, pos0, bg / KVH) + T, Tcap, KVH, hd, 0);
#ifdef _OPENMP
#pragma omp for collapse(3) schedule(static)
#endif
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    int g = h / group, n_keys = attn_p0(p0s, pos0, b) + t + 1;
                    float *p = att ? att + (((size_t)b * H + h) * T + t) * Tcap
                                   : rows + (size_t)slot * ATTN_ROWS * Tcap;
                    const float *qr = q + (((size_t)b * T + t) * H + h) * hd;
                    const float *ktb = kt + ((size_t)b * KVH + g) * hd * Tcap;
                    const float *vb = v + (size_t)b * Tcap * kv_stride + (size_t)g * hd;
                    float *o = out + (((size_t)b * T + t) * H + h) * hd;
                    attn_scores_t(p, qr, ktb, n_keys, (size_t)Tcap, hd, scale);
                    const float inv = attn_softmax_ref(p, n_keys);
                    attn_weighted_sum(o, p, inv, vb, n_keys, kv_stride, hd);
                    if (att)
                        attn_probs_store(p, n_keys, Tcap, inv);
                }
    }
    (void)n_thr;
}

/* Shapes of one attn_forward call, for the AVX-512 blocks. */
typedef struct attn_call {
    float *out, *att, *kt, *rows;
    const float *q, *k, *v;
    const int *p0s;   /* [B] start positions, or NULL: pos0 for all */
    int B, T, pos0, Tcap, H, KVH, hd, group, nblk;
    float scale;
} attn_call;

/* Block blk of (batch, KV head) bg: rows r0 .. r0+3 of that head group, row r
 * being head g*group + r / T at position r % T. */
static void attn_run_block(const attn_call *c, int bg, int blk_i, int slot, int transposed)
{
    const int b = bg / c->KVH, g = bg % c->KVH, T = c->T, H = c->H, hd = c->hd;
    const int per_bg = c->group * T, r0 = blk_i * ATTN_ROWS;
    const size_t kv_stride = (size_t)c->KVH * hd, Tcap = (size_t)c->Tcap;
    attn_block blk;
    blk.rows = per_bg - r0 < ATTN_ROWS ? per_bg - r0 : ATTN_ROWS;
    for (int r = 0; r < ATTN_ROWS; r++) {
        const int rl = r < blk.rows ? r : blk.rows - 1, rr = r0 + rl;
        const int h = g * c->group + rr / T, t = rr % T;
        const size_t row = ((size_t)b * T + t) * H + h;
        blk.q[r] = c->q + row * hd;
        blk.o[r] = c->out + row * hd;
        blk.n[r] = attn_p0(c->p0s, c->pos0, b) + t + 1;
        blk.e[r] = c->att ? c->att + (((size_t)b * H + h) * T + t) * Tcap
                          : c->rows + ((size_t)slot * ATTN_ROWS + rl) * Tcap;
    }
    const float *kb = c->k + (size_t)b * Tcap * kv_stride + (size_t)g * hd;
    const float *vb = c->v + (size_t)b * Tcap * kv_stride + (size_t)g * hd;
    attn_block_avx512_impl(&blk, transposed ? c->kt + (size_t)bg * hd * Tcap : NULL, Tcap, kb, vb,
                           kv_stride, hd, c->scale, c->att ? c->Tcap : 0);
}

/* AVX-512: blocks of ATTN_ROWS query rows of one (batch, KV head).  With many
 * (batch, KV head) pairs each is one task (its keys transposed, then its
 * blocks: no barrier); with few, the transposes then the blocks are shared out. */
static void attn_forward_blocks(float *out, float *att, const float *q, const float *k,
                                const float *v, int B, int T, const int *p0s, int pos0, int Tcap,
                                int H, int KVH, int hd, float *scratch)
{
    const int group = H / KVH, Tk = attn_p0_max(p0s, pos0, B) + T, nbg = B * KVH;
    const int nblk = (group * T + ATTN_ROWS - 1) / ATTN_ROWS;
    const int transpose = scratch && T >= ATTN_TRANSPOSE_MIN_T;
    attn_call c = {out, att, scratch, scratch ? scratch + (size_t)nbg * hd * Tcap : NULL,
                   q, k, v, p0s, B, T, pos0, Tcap, H, KVH, hd, group, nblk,
                   1.0f / sqrtf((float)hd)};
    const int n_thr = attn_threads((double)B * H * T * Tk * hd);
    const int per_pair = nbg >= 4 * n_thr;
#ifdef _OPENMP
#pragma omp parallel num_threads(n_thr)
#endif
    {
        const int slot = attn_slot();
        if (per_pair) {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
            for (int bg = 0; bg < nbg; bg++) {
                if (transpose)
                    attn_transpose_one(c.kt, k, bg, attn_p0(p0s, pos0, bg / KVH) + T, Tcap, KVH,
                                       hd, 1);
                for (int i = 0; i < nblk; i++)
                    attn_run_block(&c, bg, i, slot, transpose);
            }
        } else {
            if (transpose) {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
                for (int bg = 0; bg < nbg; bg++)
                    attn_transpose_one(c.kt, k, bg, attn_p0(p0s, pos0, bg / KVH) + T, Tcap, KVH,
                                       hd, 1);
            }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
            for (long task = 0; task < (long)nbg * nblk; task++)
                attn_run_block(&c, (int)(task / nblk), (int)(task % nblk), slot, transpose);
        }
    }
    (void)n_thr;
}

static void attn_forward_any(float *out, float *att, const float *q, const float *k,
                             const float *v, int B, int T, const int *p0s, int pos0, int Tcap,
                             int H, int KVH, int hd, float *scratch)
{
    if (cpu_level() >= CPU_LEVEL_AVX512 && (scratch || att)) {
        attn_forward_blocks(out, att, q, k, v, B, T, p0s, pos0, Tcap, H, KVH, hd, scratch);
        return;
    }
    if (scratch && T >= ATTN_TRANSPOSE_MIN_T) {
        attn_forward_tiled(out, att, q, k, v, B, T, p0s, pos0, Tcap, H, KVH, hd, scratch);
        return;
    }
    const float scale = 1.0f / sqrtf((float)hd);
    const int group = H / KVH,
              n_thr = attn_threads((double)B * H * T * (attn_p0_max(p0s, pos0, B) + T) * hd);
    const size_t kv_stride = (size_t)KVH * hd;
#ifdef _OPENMP
#pragma omp parallel for collapse(3) schedule(static) num_threads(n_thr)
#endif
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *qr = q + (((size_t)b * T + t) * H + h) * hd;
                float *o = out + (((size_t)b * T + t) * H + h) * hd;
                size_t kv_off = (size_t)b * Tcap * kv_stride + (size_t)(h / group) * hd;
                float *p = att ? att + (((size_t)b * H + h) * T + t) * Tcap : NULL;
                attn_row_ref(o, p, Tcap, qr, k + kv_off, v + kv_off, attn_p0(p0s, pos0, b) + t + 1,
                             kv_stride, hd, scale);
            }
    (void)n_thr;
}

void attn_forward(float *out, float *att, const float *q, const float *k, const float *v, int B,
                  int T, int pos0, int Tcap, int H, int KVH, int hd, float *scratch)
{
    attn_forward_any(out, att, q, k, v, B, T, NULL, pos0, Tcap, H, KVH, hd, scratch);
}

void attn_forward_seq(float *out, const float *q, const float *k, const float *v, int B, int T,
                      const int *pos0, int Tcap, int H, int KVH, int hd, float *scratch)
{
    attn_forward_any(out, NULL, q, k, v, B, T, pos0, 0, Tcap, H, KVH, hd, scratch);
}

/* AVX-512 backward: one task per (batch, KV head), which owns that head's
 * dk/dv and its query heads' dq: its values transposed into the thread's
 * scratch, then its rows (heads of the group, then positions, the portable
 * order) in blocks of ATTN_BWD_ROWS sharing each k/v/dk/dv load.  Tasks never
 * share outputs, so the bits do not depend on the thread count.  Returns -1
 * (nothing done) when the scratch cannot be allocated. */
static int attn_backward_blocks(float *dq, float *dk, float *dv, const float *dout,
                                const float *att, const float *q, const float *k, const float *v,
                                int B, int T, int H, int KVH, int hd)
{
    const int group = H / KVH, nbg = B * KVH, per_bg = group * T;
    const int nblk = (per_bg + ATTN_BWD_ROWS - 1) / ATTN_BWD_ROWS;
    const size_t ld = ((size_t)T + 15) & ~(size_t)15, kv_stride = (size_t)KVH * hd;
    const size_t per_thr = ld * hd + ATTN_BWD_WORK(ld, hd);   /* transposed values + work */
    const float scale = 1.0f / sqrtf((float)hd);
    const int n_thr = attn_threads((double)B * H * T * T * hd / 4);
    float *buf = qs_malloc((size_t)n_thr * per_thr * sizeof *buf);
    if (!buf)
        return -1;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_thr)
#endif
    for (int bg = 0; bg < nbg; bg++) {
        const int b = bg / KVH, g = bg % KVH;
        float *vt = buf + (size_t)attn_slot() * per_thr, *work = vt + ld * hd;
        const size_t k0 = (size_t)b * T * kv_stride + (size_t)g * hd;
        attn_keys_transpose_avx512_impl(vt, ld, v + k0, kv_stride, T, hd);
        for (int blk_i = 0; blk_i < nblk; blk_i++) {
            const int r0 = blk_i * ATTN_BWD_ROWS;
            attn_bwd_block blk;
            blk.rows = per_bg - r0 < ATTN_BWD_ROWS ? per_bg - r0 : ATTN_BWD_ROWS;
            for (int r = 0; r < ATTN_BWD_ROWS; r++) {
                const int rr = r0 + (r < blk.rows ? r : blk.rows - 1);
                const int h = g * group + rr / T, t = rr % T;
                const size_t row = ((size_t)b * T + t) * H + h;
                blk.q[r] = q + row * hd;
                blk.g[r] = dout + row * hd;
                blk.dq[r] = dq + row * hd;
                blk.a[r] = att + (((size_t)b * H + h) * T + t) * T;
                blk.n[r] = t + 1;
                const int rn = r0 + ATTN_BWD_ROWS + r;   /* the next block's rows: prefetched */
                if (rn < per_bg) {
                    const size_t nrow = ((size_t)b * T + rn % T) * H + g * group + rn / T;
                    for (int i = 0; i < hd; i += 16) {
                        __builtin_prefetch(q + nrow * hd + i);
                        __builtin_prefetch(dout + nrow * hd + i);
                        __builtin_prefetch(dq + nrow * hd + i);
                    }
                }
            }
            attn_bwd_block_avx512_impl(&blk, vt, ld, k + k0, dk + k0, dv + k0, kv_stride, hd,
                                       scale, work);
        }
    }
    qs_free(buf);
    (void)n_thr;
    return 0;
}

void attn_backward(float *dq, float *dk, float *dv, const float *dout, const float *att,
                   const float *q, const float *k, const float *v, int B, int T, int H, int KVH,
                   int hd)
{
    /* per query: datt_j = dout . v_j;  ds_j = att_j (datt_j - sum_i att_i datt_i);
     * dq += scale ds_j k_j;  dk_j += scale ds_j q;  dv_j += att_j dout.
     * One task per (b, kv head) owns that kv head's dk/dv and its heads' dq.
     * This loop is the definition; the AVX-512 blocks compute the same bits. */
    if (cpu_level() >= CPU_LEVEL_AVX512 &&
        attn_backward_blocks(dq, dk, dv, dout, att, q, k, v, B, T, H, KVH, hd) == 0)
        return;
    int group = H / KVH;
    float scale = 1.0f / sqrtf((float)hd);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) collapse(2) if ((size_t)B * H * T * T * hd > 262144)
#endif
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < KVH; kh++)
            for (int h = kh * group; h < (kh + 1) * group; h++)
                for (int t = 0; t < T; t++) {
                    size_t qo = (((size_t)b * T + t) * H + h) * hd;
                    const float *qt = q + qo, *gt = dout + qo;
                    float *dqt = dq + qo;
                    const float *a = att + (((size_t)b * H + h) * T + t) * T;
                    float sum = 0.0f;
                    for (int j = 0; j <= t; j++) {
                        size_t ko = (((size_t)b * T + j) * KVH + kh) * hd;
                        sum += a[j] * attn_dot(gt, v + ko, hd);
                    }
                    for (int j = 0; j <= t; j++) {
                        size_t ko = (((size_t)b * T + j) * KVH + kh) * hd;
                        float ds = a[j] * (attn_dot(gt, v + ko, hd) - sum) * scale;
                        const float *kj = k + ko;
                        float *dkj = dk + ko, *dvj = dv + ko;
                        for (int i = 0; i < hd; i++) {
                            dqt[i] += ds * kj[i];
                            dkj[i] += ds * qt[i];
                            dvj[i] += a[j] * gt[i];
                        }
                    }
                }
}
