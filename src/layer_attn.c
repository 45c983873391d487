/* layer_attn.c: causal grouped-query attention over a KV cache
 * (see include/qs/layers.h for shapes).
 *
 * One (batch, head, query) row per iteration, so OpenMP threads own disjoint
 * outputs and results do not depend on the thread count.  With att == NULL
 * (inference) the softmax is computed online in one pass over the keys
 * (running max and rescaled sum), so no scratch is needed; with att the
 * probabilities are written there (zeros past the causal limit) for backward.
 * Scores and sums are fp32 with the row max subtracted, as HF's eager path.
 */
#include <math.h>
#include <string.h>

#include "qs/layers.h"

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

void attn_forward(float *out, float *att, const float *q, const float *k, const float *v, int B,
                  int T, int pos0, int Tcap, int H, int KVH, int hd)
{
    const float scale = 1.0f / sqrtf((float)hd);
    const int group = H / KVH;
    const size_t kv_stride = (size_t)KVH * hd;
#pragma omp parallel for collapse(3) schedule(static)
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
