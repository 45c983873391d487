/* layer_attn_impl.h: attention inner loops shared by layer_attn.c (portable)
 * and layer_attn_avx512.c (AVX-512, chosen at run time by cpu_level()).
 * Both add the terms of each output element in the same order with separate
 * multiply and add (no FMA), so they give the same bits. */
#ifndef QS_LAYER_ATTN_IMPL_H
#define QS_LAYER_ATTN_IMPL_H

#include <stddef.h>

/* p[j] = (sum_i q[i] kt[i * ld + j]) * scale, j < n (keys transposed) */
void attn_scores_t_avx512_impl(float *p, const float *qr, const float *kt, int n, size_t ld,
                               int hd, float scale);
/* o[i] = sum_j p[j] vb[j * kv_stride + i], i < hd */
void attn_weighted_sum_avx512_impl(float *o, const float *p, const float *vb, int n,
                                   size_t kv_stride, int hd);

/* One query row of attention backward (see attn_backward): datt[j] = gt . v_j
 * (16 lanes, then a fixed tree: differs from the portable sequential dot by
 * rounding only), sum = sum_j a_j datt_j in j order, then per element in j
 * order, mul then add: dq += ds_j k_j, dk_j += ds_j q, dv_j += a_j g, with
 * ds_j = a_j (datt_j - sum) scale.  k, v, dk, dv point at key 0 of this
 * (b, kv head); datt is scratch of n_keys floats. */
void attn_bwd_row_avx512_impl(float *dqt, float *dk, float *dv, const float *qt, const float *gt,
                              const float *a, const float *k, const float *v, int n_keys,
                              size_t kv_stride, int hd, float scale, float *datt);

#endif
