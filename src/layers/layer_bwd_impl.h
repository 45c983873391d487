/* layer_bwd_impl.h: AVX-512 kernels of the training-only element-wise layers
 * (cross-entropy loss and its backward, SwiGLU backward), called by layer_xent.c
 * and layer_swiglu.c when cpu_level() >= CPU_LEVEL_AVX512 (the portable loops
 * there are the reference).  Not API.
 *
 * Both use simd_exp512_impl (<= 2 ulp from libm's expf) instead of libm, so
 * they match the portable loops within a documented tolerance, not bit for bit;
 * each output element depends only on its own row / element, so results do not
 * depend on the thread count. */
#ifndef QS_LAYER_BWD_IMPL_H
#define QS_LAYER_BWD_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* One row of xent_forward: log(sum_v exp(l[v] - mx)) + mx - l[tg], the sum in
 * double over 16 lanes of vector exps; |loss - portable| <= 1e-6 (tests).
 * *mx and *sum receive the row's max and sum. */
float xent_forward_row_avx512_impl(const float *l, int V, int32_t tg, float *mx, double *sum);

/* One row of xent_backward: g[v] = softmax(l)[v] * scale, g[tg] -= scale.
 * exp is evaluated once per element (the portable loop evaluates it twice: in
 * double for the sum, in float for g), the sum accumulated in double over 16
 * lanes.  |g - portable| <= 1e-6 * scale per element (tests: 2e-6).  sum >= 0:
 * mx and sum are the forward's (xent_forward_row_avx512_impl's) for l: one
 * pass, the same bits; sum < 0: computed here. */
void xent_backward_row_avx512_impl(float *g, const float *l, int V, int32_t tg, float scale,
                                    float mx, double sum);

/* swiglu_backward over elements [0, n): dgate = dout up sig (1 + g (1 - sig)),
 * dup = dout g sig (both overwritten), sig = 1 / (1 + exp(-g)); relative difference to the
 * portable loop a few float ulp (tests: 1e-6 relative + 1e-7 absolute). */
void swiglu_backward_avx512_impl(float *dgate, float *dup, const float *dout, const float *gate,
                                 const float *up, size_t n);

#endif
