/* matmul.c: Linear forward/backward through OpenBLAS sgemm (fp32 reference path).
 * See include/qs/matmul.h for the contract.  BLAS threads internally; never call
 * these from inside an OpenMP parallel region. */
#include "qs/matmul.h"

#include <cblas.h>

void matmul_forward(float *out, const float *x, const float *w, const float *bias, int N, int IN,
                    int O, int precision)
{
    (void)precision; /* TODO(kernel): bf16 path */
    if (bias) {
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++)
                out[(size_t)n * O + o] = bias[o];
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, O, IN, 1.0f, x, IN, w, IN,
                bias ? 1.0f : 0.0f, out, O);
}

void matmul_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                     const float *w, int N, int IN, int O, int precision)
{
    (void)precision;
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IN, O, 1.0f, dout, O, w, IN, 1.0f,
                    dx, IN);
    if (dw)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, IN, N, 1.0f, dout, O, x, IN, 1.0f,
                    dw, IN);
    if (db)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++)
                db[o] += dout[(size_t)n * O + o];
}

void matmul_forward_ref(float *out, const float *x, const float *w, const float *bias, int N,
                        int IN, int O)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            double acc = bias ? bias[o] : 0.0;
            for (int i = 0; i < IN; i++)
                acc += (double)x[(size_t)n * IN + i] * w[(size_t)o * IN + i];
            out[(size_t)n * O + o] = (float)acc;
        }
}
