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

#endif
