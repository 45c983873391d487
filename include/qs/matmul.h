/* matmul.h: the one matmul path (Linear layers), forward and backward.
 *
 * Shapes follow Hugging Face's Linear: weight w is [O, IN] row-major, so
 *   forward:  out[N, O] = x[N, IN] @ w^T (+ bias[O])
 *   backward: dx[N, IN] += dout[N, O] @ w;  dw[O, IN] += dout^T @ x;  db[O] += sum_n dout[n, :]
 * Precision MATMUL_FP32 is exact fp32 math (OpenBLAS sgemm, the reference path);
 * MATMUL_BF16 rounds both operands to bf16 (round to nearest even) and
 * accumulates in fp32 (AVX512-BF16 dot products when the CPU has them, an exact
 * emulation otherwise).  Called from serial code: threading happens inside.
 */
#ifndef QS_MATMUL_H
#define QS_MATMUL_H

#include <stddef.h>
#include <stdint.h>

enum { MATMUL_FP32 = 0, MATMUL_BF16 = 1 };

void matmul_forward(float *out, const float *x, const float *w, const float *bias, int N, int IN,
                    int O, int precision);
/* Any of dx, dw, db may be NULL (not wanted).  Gradients ACCUMULATE (+=). */
void matmul_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                     const float *w, int N, int IN, int O, int precision);

/* Naive double-accumulating reference for tests (fp32 semantics). */
void matmul_forward_ref(float *out, const float *x, const float *w, const float *bias, int N,
                        int IN, int O);

#endif
