/* layer_attn.c: causal grouped-query attention over a KV cache
 * (see include/qs/layers.h for shapes).
 *
 * Two paths, both fp32 with the row max subtracted, as HF's eager path:
 *  - prompts (T >= ATTN_TILED_MIN_T, scratch given): the keys of each (batch,
 *    KV head) are first transposed to [hd, keys], so a query's scores are hd
 *    contiguous multiply-adds over the keys (SIMD-friendly); probabilities go to
 *    att (training) or to a per-thread scratch row, then O = P V row by row.
 *    Two parallel regions per call, no matmul: cheap under thread contention.
 *  - decoding (few queries, or no scratch): one pass over the keys per query
 *    with an online softmax (running max and rescaled sum), or the
 *    probabilities stored in att.
 * Every (batch, head, query) row is computed by one thread in a fixed order, so
 * the result does not depend on the thread count.
 */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "layer_attn_impl.h"
#include "qs/cpu.h"
#include "qs/layers.h"

#define ATTN_TILED_MIN_T 8
#define ATTN_SLOTS 16   /* per-thread score rows in the scratch (threads beyond are not used) */

static float attn_dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void attn_row_saved(float *o, float *p, const float *qr, const float *kb, const float *vb,
                           int n_keys, int Tcap, size_t kv_stride, int hd, float scale)
{
    float mx = -INFINITY;
    for (int j = 0; j < n_keys; j++) {
        p[j] = attn_dot(qr, kb + (size_t)j * kv_stride, hd) * scale;
        mx = p[j] > mx ? p[j] : mx;
    }
    float sum = 0.0f;
    for (int j = 0; j < n_keys; j++) {
        p[j] = expf(p[j] - mx);
        sum += p[j];
    }
    float inv = 1.0f / sum;
    memset(o, 0, (size_t)hd * sizeof *o);
    for (int j = 0; j < n_keys; j++) {
        p[j] *= inv;
        const float *vr = vb + (size_t)j * kv_stride;
        for (int i = 0; i < hd; i++)
            o[i] += p[j] * vr[i];
    }
    for (int j = n_keys; j < Tcap; j++)
        p[j] = 0.0f;
}

static void attn_row_online(float *o, const float *qr, const float *kb, const float *vb,
                            int n_keys, size_t kv_stride, int hd, float scale)
{
    float mx = -INFINITY, sum = 0.0f;
    memset(o, 0, (size_t)hd * sizeof *o);
    for (int j = 0; j < n_keys; j++) {
        float s = attn_dot(qr, kb + (size_t)j * kv_stride, hd) * scale;
        const float *vr = vb + (size_t)j * kv_stride;
        if (s > mx) {
            float r = expf(mx - s);   /* 0 on the first key (mx = -inf) */
            sum *= r;
            for (int i = 0; i < hd; i++)
                o[i] *= r;
            mx = s;
        }
        float e = expf(s - mx);
        sum += e;
        for (int i = 0; i < hd; i++)
            o[i] += e * vr[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < hd; i++)
        o[i] *= inv;
}

size_t attn_scratch_elems(int B, int Tcap, int KVH, int hd)
{
    /* transposed keys [B, KVH, hd, Tcap] + ATTN_SLOTS score rows [Tcap] */
    return (size_t)B * KVH * hd * Tcap + (size_t)ATTN_SLOTS * Tcap;
}

/* p[j] = (q . k_j) * scale for j < n, keys transposed: kt[i * ld + j] */
static void attn_scores_t(float *restrict p, const float *restrict qr, const float *restrict kt,
                          int n, size_t ld, int hd, float scale)
{
    for (int j = 0; j < n; j++)
        p[j] = 0.0f;
    for (int i = 0; i < hd; i++) {
        const float qi = qr[i], *restrict kr = kt + (size_t)i * ld;
#ifdef _OPENMP
#pragma omp simd
#endif
        for (int j = 0; j < n; j++)
            p[j] += qi * kr[j];
    }
    for (int j = 0; j < n; j++)
        p[j] *= scale;
}

/* softmax over p[0..n) in place, zeros in p[n..width) */
static void attn_softmax(float *p, int n, int width)
{
    float mx = -INFINITY;
    for (int j = 0; j < n; j++)
        mx = p[j] > mx ? p[j] : mx;
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        p[j] = expf(p[j] - mx);
        sum += p[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < n; j++)
        p[j] *= inv;
    for (int j = n; j < width; j++)
        p[j] = 0.0f;
}

/* o[hd] = sum_j p[j] v_j */
static void attn_weighted_sum(float *restrict o, const float *restrict p,
                              const float *restrict vb, int n, size_t kv_stride, int hd)
{
    memset(o, 0, (size_t)hd * sizeof *o);
    for (int j = 0; j < n; j++) {
        const float pj = p[j], *restrict vr = vb + (size_t)j * kv_stride;
#ifdef _OPENMP
#pragma omp simd
#endif
        for (int i = 0; i < hd; i++)
            o[i] += pj * vr[i];
    }
}

static void attn_forward_tiled(float *out, float *att, const float *q, const float *k,
                               const float *v, int B, int T, int pos0, int Tcap, int H, int KVH,
                               int hd, float *scratch)
{
    const int group = H / KVH, Tk = pos0 + T;
    const size_t kv_stride = (size_t)KVH * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    float *kt = scratch, *rows = scratch + (size_t)B * KVH * hd * Tcap;
#ifdef _OPENMP
#pragma omp parallel for collapse(2) schedule(static)
#endif
    for (int bg = 0; bg < B * KVH; bg++)
        for (int j = 0; j < Tk; j++) {
            int b = bg / KVH, g = bg % KVH;
            const float *kr = k + ((size_t)b * Tcap + j) * kv_stride + (size_t)g * hd;
            for (int i = 0; i < hd; i++)
                kt[((size_t)bg * hd + i) * Tcap + j] = kr[i];
        }
    const int simd512 = cpu_level() >= CPU_LEVEL_AVX512;
#ifdef _OPENMP
    int n_thr = omp_get_max_threads() < ATTN_SLOTS ? omp_get_max_threads() : ATTN_SLOTS;
#pragma omp parallel num_threads(n_thr)
#endif
    {
        int slot = 0;
#ifdef _OPENMP
        slot = omp_get_thread_num();
#endif
#ifdef _OPENMP
#pragma omp for collapse(3) schedule(static)
#endif
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    int g = h / group, n_keys = pos0 + t + 1;
                    float *p = att ? att + (((size_t)b * H + h) * T + t) * Tcap
                                   : rows + (size_t)slot * Tcap;
                    const float *qr = q + (((size_t)b * T + t) * H + h) * hd;
                    const float *ktb = kt + ((size_t)b * KVH + g) * hd * Tcap;
                    const float *vb = v + (size_t)b * Tcap * kv_stride + (size_t)g * hd;
                    float *o = out + (((size_t)b * T + t) * H + h) * hd;
                    if (simd512)
                        attn_scores_t_avx512_impl(p, qr, ktb, n_keys, (size_t)Tcap, hd, scale);
                    else
                        attn_scores_t(p, qr, ktb, n_keys, (size_t)Tcap, hd, scale);
                    attn_softmax(p, n_keys, att ? Tcap : n_keys);
                    if (simd512)
                        attn_weighted_sum_avx512_impl(o, p, vb, n_keys, kv_stride, hd);
                    else
                        attn_weighted_sum(o, p, vb, n_keys, kv_stride, hd);
                }
    }
    (void)Tk;
}

void attn_forward(float *out, float *att, const float *q, const float *k, const float *v, int B,
                  int T, int pos0, int Tcap, int H, int KVH, int hd, float *scratch)
{
    if (scratch && T >= ATTN_TILED_MIN_T) {
        attn_forward_tiled(out, att, q, k, v, B, T, pos0, Tcap, H, KVH, hd, scratch);
        return;
    }
    const float scale = 1.0f / sqrtf((float)hd);
    const int group = H / KVH;
    const size_t kv_stride = (size_t)KVH * hd;
#ifdef _OPENMP
    /* threads only pay off beyond ~64k multiply-adds (decode steps of tiny models stay serial) */
    const double work = (double)B * H * T * (pos0 + T) * hd;
#pragma omp parallel for collapse(3) schedule(static) if (work > 65536.0)
#endif
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *qr = q + (((size_t)b * T + t) * H + h) * hd;
                float *o = out + (((size_t)b * T + t) * H + h) * hd;
                size_t kv_off = (size_t)b * Tcap * kv_stride + (size_t)(h / group) * hd;
                int n_keys = pos0 + t + 1;
                if (att)
                    attn_row_saved(o, att + (((size_t)b * H + h) * T + t) * Tcap, qr, k + kv_off,
                                   v + kv_off, n_keys, Tcap, kv_stride, hd, scale);
                else
                    attn_row_online(o, qr, k + kv_off, v + kv_off, n_keys, kv_stride, hd, scale);
            }
}

/* Longest sequence for the AVX-512 backward (its per-row scratch is on the stack). */
enum { ATTN_BWD_SIMD_MAX_T = 2048 };

void attn_backward(float *dq, float *dk, float *dv, const float *dout, const float *att,
                   const float *q, const float *k, const float *v, int B, int T, int H, int KVH,
                   int hd)
{
    /* per query: datt_j = dout . v_j;  ds_j = att_j (datt_j - sum_i att_i datt_i);
     * dq += scale ds_j k_j;  dk_j += scale ds_j q;  dv_j += att_j dout.
     * One task per (b, kv head) owns that kv head's dk/dv and its heads' dq. */
    int group = H / KVH;
    float scale = 1.0f / sqrtf((float)hd);
    const int simd512 = cpu_level() >= CPU_LEVEL_AVX512 && T <= ATTN_BWD_SIMD_MAX_T;
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
                    if (simd512) {
                        float datt[ATTN_BWD_SIMD_MAX_T];
                        size_t k0 = ((size_t)b * T * KVH + kh) * hd;
                        attn_bwd_row_avx512_impl(dqt, dk + k0, dv + k0, qt, gt, a, k + k0, v + k0,
                                                 t + 1, (size_t)KVH * hd, hd, scale, datt);
                        continue;
                    }
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
