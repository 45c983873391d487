/* layer_elem_impl.h: AVX-512 forms of the element-wise forward layers (RMSNorm
 * with an optional fused residual add, SwiGLU) and of RMSNorm's backward, chosen
 * at run time by cpu_level() >= CPU_LEVEL_AVX512 in layer_rmsnorm.c / layer_swiglu.c.
 * Every element is computed by the same vector code whatever its position
 * (tails use masked lanes), so results do not depend on N or on threads. */
#ifndef QS_LAYER_ELEM_IMPL_H
#define QS_LAYER_ELEM_IMPL_H

#include <stddef.h>

/* Bytes ahead that the element-wise passes prefetch each of their input
 * streams: their [N, C] activations come from memory (a training step's
 * backward reads what the forward wrote long before).  On the Zen 5 VMs they
 * were measured on, the hardware prefetcher alone kept a plain 2 GB read at
 * 22-56 GB/s, against 65 with software prefetch 2 KB ahead.  Rows follow each
 * other, so near a row's end this reaches into the next one (the logits rows
 * of layer_xent_avx512.c too). */
enum { LAYER_STREAM_PF = 2048 };

/* One row of C: with b != NULL first sum[c] = a[c] + b[c] (sum may alias a),
 * then out = sum * r * w with r = 1 / sqrt(mean sum^2 + eps) (squares
 * accumulated in double, 8 lanes + a fixed tree: may differ from the scalar
 * sequential sum in the last bit of r); returns r.  b == NULL: sum is a. */
float rmsnorm_row_avx512_impl(float *out, float *sum, const float *a, const float *b,
                              const float *w, int C, float eps);

/* One row of rmsnorm_backward's dx (layer_rmsnorm_bwd_avx512.c): dot = sum_c
 * ((double)g[c] * w[c]) * x[c] in 8 double lanes + a fixed tree (may differ from
 * the portable sequential sum in its last bits), k = (float)(dot * r * r * r / C),
 * then dx[c] += ((g[c] * w[c]) * r) - (k * x[c]) with the portable loop's fp32
 * roundings (the same bits for the same k). */
void rmsnorm_bwd_row_avx512_impl(float *dx, const float *g, const float *x, const float *w,
                                 float r, int C);

/* rmsnorm_backward's dw for columns [c0, c1) of rows [N, C]:
 * dw[c] += (dout[n,c] * x[n,c]) * rstd[n] for n = 0 .. N-1 in order, 16 columns
 * per vector: the portable loop's bits. */
void rmsnorm_dw_cols_avx512_impl(float *dw, const float *dout, const float *x, const float *rstd,
                                 int N, int C, int c0, int c1);

/* out[i] = silu(gate[i]) * up[i] with the shared vector exp
 * (simd_exp_avx512_impl.h, as the backward): within SWIGLU_SIMD_TOL_ULP
 * (qs/layers.h) ulp of |silu(g) u| of the scalar expf form (tests/test_layers_elem.c). */
void swiglu_avx512_impl(float *out, const float *gate, const float *up, size_t n);

#endif
