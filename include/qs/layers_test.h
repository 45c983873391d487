/* layers_test.h: NOT API.  Layer internals declared for tests/test_layer_attn.c,
 * which checks the attention exp against exact values and its AVX-512 lanes
 * against the scalar one.  Library code never calls these outside src/layers;
 * only tests and src/layers may include this header (make lint); names and
 * signatures may change without notice.
 */
#ifndef QS_LAYERS_TEST_H
#define QS_LAYERS_TEST_H

/* The exp of the attention softmax (definition in src/layers/layer_attn_impl.h):
 * within 2 ulp of exp for -87 <= x <= 0, exactly 1 at 0, 0 below -87, NaN for NaN. */
float attn_exp(float x);
/* y[i] = attn_exp(x[i]) bit for bit, i < n, on 16 AVX-512 lanes (masked tail);
 * call only when cpu_detected_level() >= CPU_LEVEL_AVX512. */
void attn_exp_avx512_impl(float *y, const float *x, int n);

#endif
