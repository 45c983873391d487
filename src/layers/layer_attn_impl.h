/* layer_attn_impl.h: attention internals shared by layer_attn.c (portable) and
 * layer_attn_avx512.c (AVX-512, chosen at run time by cpu_level()).
 *
 * THE forward definition, computed bit for bit by every path (prompt, decode,
 * training with saved att, portable and AVX-512), for a query row q that sees
 * keys 0 .. n-1 (n = pos0 + t + 1):
 *   s_j   = (sum over i = 0 .. hd-1, in order, of q_i k_j,i) * scale
 *   m     = max_j s_j
 *   e_j   = attn_exp(s_j - m)
 *   sum   = L_0 + ... + L_15 by the tree (l + l^8), (l + l^4), (l + l^2), (l + l^1),
 *           where lane L_l = sum of e_j over j = l mod 16, in j order
 *   o_i   = (sum over j = 0 .. n-1, in order, of e_j v_j,i) * (1 / sum)
 *   att_j = e_j * (1 / sum) for j < n, 0 after
 * every product and sum rounded to fp32 on its own (no FMA).  So a row's output
 * depends only on its q row and its keys/values 0 .. n-1: not on T, pos0, B,
 * the other rows of its block or the thread count. */
#ifndef QS_LAYER_ATTN_IMPL_H
#define QS_LAYER_ATTN_IMPL_H

#include <stddef.h>

#include "qs/layers_test.h"

/* attn_exp(x): round n = x log2(e) to nearest (the 1.5 * 2^23 trick), r = x - n ln2
 * (ln2 in two parts), e^r by Cephes' degree-7 polynomial 1 + r + r^2 P(r), times 2^n.
 * Within 2 ulp of expf for -87 <= x <= 0 (tested), exactly 1 at 0, 0 below -87
 * (where expf is < 1.7e-38), NaN for NaN. */
#define ATTN_EXP_LOG2E 1.44269504088896341f
#define ATTN_EXP_ROUND 12582912.0f
#define ATTN_EXP_LN2_HI 0.693359375f
#define ATTN_EXP_LN2_LO -2.12194440e-4f
#define ATTN_EXP_P0 1.9875691500e-4f
#define ATTN_EXP_P1 1.3981999507e-3f
#define ATTN_EXP_P2 8.3334519073e-3f
#define ATTN_EXP_P3 4.1665795894e-2f
#define ATTN_EXP_P4 1.6666665459e-1f
#define ATTN_EXP_P5 5.0000001201e-1f
#define ATTN_EXP_MIN -87.0f
/* attn_exp and its AVX-512 form attn_exp_avx512_impl are declared in
 * qs/layers_test.h (the test checks them directly). */

/* A block of query rows sharing one KV head.  Rows past `rows` must repeat the
 * last row's q, e and n (computed, never stored). */
enum { ATTN_ROWS = 4 };
typedef struct attn_block {
    const float *q[ATTN_ROWS];   /* query rows [hd] */
    float *e[ATTN_ROWS];         /* score rows (>= max n floats, or the att rows) */
    float *o[ATTN_ROWS];         /* output rows [hd] */
    int n[ATTN_ROWS];            /* keys each row sees */
    int rows;                    /* 1 .. ATTN_ROWS */
} attn_block;

/* Forward of one block.  Keys transposed (kt[i * ld + j]) or, kt NULL, read from
 * their rows k[j * kv_stride + i]; v[j * kv_stride + i].  att_width > 0: the e
 * rows are saved probabilities, normalized and zeroed up to att_width. */
void attn_block_avx512_impl(const attn_block *b, const float *kt, size_t ld, const float *k,
                            const float *v, size_t kv_stride, int hd, float scale, int att_width);
/* kt[i * ld + j] = k[j * kv_stride + i], j < n, i < hd */
void attn_keys_transpose_avx512_impl(float *kt, size_t ld, const float *k, size_t kv_stride,
                                     int n, int hd);

/* Attention backward of a block of ATTN_BWD_ROWS query rows sharing one KV
 * head (two forward-sized blocks: their datt rows as the forward's score loop
 * computes them, then one pass over the keys for all eight rows, so that each
 * k/dk/dv row read from L2 serves twice the products): the
 * portable definition (attn_backward in layer_attn.c), bit for bit.  Row r
 * (r < rows, in the portable row order) sees keys 0 .. n[r]-1:
 *   datt_j = g . v_j            (summed over i in order, as the portable dot)
 *   sum    = sum_j a_j datt_j   (j in order)
 *   ds_j   = a_j (datt_j - sum) scale
 *   dq    += ds_j k_j  (j in order);  dk_j += ds_j q;  dv_j += a_j g
 * and for each key the rows' dk_j/dv_j terms are added in row order.  Rows past
 * `rows` must repeat the last row's pointers (never used). */
enum { ATTN_BWD_ROWS = 2 * ATTN_ROWS };
typedef struct attn_bwd_block {
    const float *q[ATTN_BWD_ROWS];   /* query rows [hd] */
    const float *g[ATTN_BWD_ROWS];   /* upstream gradient rows [hd] */
    const float *a[ATTN_BWD_ROWS];   /* saved probabilities (>= n floats) */
    float *dq[ATTN_BWD_ROWS];        /* dq rows [hd], accumulated */
    int n[ATTN_BWD_ROWS];            /* keys each row sees */
    int rows;                        /* 1 .. ATTN_BWD_ROWS */
} attn_bwd_block;

/* Values transposed vt[i * ld + j] (ld >= max n, a multiple of 16); k, dk, dv
 * rows at kv_stride from key 0 of this (batch, KV head); work: ATTN_BWD_WORK
 * floats. */
#define ATTN_BWD_WORK(ld, hd)                                                                  \
    (4 * ATTN_BWD_ROWS * (size_t)(ld) + 2 * ATTN_BWD_ROWS * (((size_t)(hd) + 15) & ~(size_t)15))
void attn_bwd_block_avx512_impl(const attn_bwd_block *b, const float *vt, size_t ld,
                                const float *k, float *dk, float *dv, size_t kv_stride, int hd,
                                float scale, float *work);

#endif
