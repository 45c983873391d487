/* layer_attn.c: causal grouped-query attention (see include/qs/layers.h). */
#include "qs/layers.h"

#include <math.h>

static inline float attn_dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void attn_backward(float *dq, float *dk, float *dv, const float *dout, const float *att,
                   const float *q, const float *k, const float *v, int B, int T, int H, int KVH,
                   int hd)
{
    /* per query: datt_j = dout . v_j;  ds_j = att_j (datt_j - sum_i att_i datt_i);
     * dq += scale ds_j k_j;  dk_j += scale ds_j q;  dv_j += att_j dout.
     * One task per (b, kv head) owns that kv head's dk/dv and its heads' dq. */
    int group = H / KVH;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for schedule(static) collapse(2)
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
