/* layer_rmsnorm.c: RMSNorm (see include/qs/layers.h).
 * Numerics: the mean of squares is accumulated in double, then the row is
 * scaled in fp32 as HF does (x * rstd, then * weight).  With AVX-512 the rows
 * go through rmsnorm_row_avx512_impl (8 double lanes); the forward can take the
 * residual add that precedes it (one pass, one parallel region less). */
#include <math.h>

#include "layer_elem_impl.h"
#include "qs/cpu.h"
#include "qs/layers.h"

/* Portable row: as rmsnorm_row_avx512_impl, squares summed in order. */
static float rmsnorm_row(float *out, float *sum, const float *a, const float *b, const float *w,
                         int C, float eps)
{
    double ss = 0.0;
    for (int c = 0; c < C; c++) {
        float v = b ? a[c] + b[c] : a[c];
        if (b)
            sum[c] = v;
        ss += (double)v * v;
    }
    const float *x = b ? sum : a;
    float r = (float)(1.0 / sqrt(ss / C + eps));
    for (int c = 0; c < C; c++)
        out[c] = (x[c] * r) * w[c];
    return r;
}

void rmsnorm_residual_forward(float *sum, float *out, float *rstd, const float *a, const float *b,
                              const float *w, int N, int C, float eps)
{
    const int simd = cpu_level() >= CPU_LEVEL_AVX512;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (N > 16)
#endif
    for (int n = 0; n < N; n++) {
        size_t o = (size_t)n * C;
        float *s = b ? sum + o : NULL;
        const float *bn = b ? b + o : NULL;
        float r = simd ? rmsnorm_row_avx512_impl(out + o, s, a + o, bn, w, C, eps)
                       : rmsnorm_row(out + o, s, a + o, bn, w, C, eps);
        if (rstd)
            rstd[n] = r;
    }
}

void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C,
                     float eps)
{
    rmsnorm_residual_forward(NULL, out, rstd, x, NULL, w, N, C, eps);
}

void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd, int N, int C)
{
    /* out = x * r * w with r = (mean x^2 + eps)^-1/2, dr/dx_c = -r^3 x_c / C.
     * One parallel region: rows of dx, then (after the loop's barrier) dw in
     * blocks of 16 columns (a cache line; C = 288 gives 18 blocks, balanced
     * over 2 threads), each dw[c] summed over n in order. */
    enum { RMSNORM_DW_COLS = 16 };
#ifdef _OPENMP
#pragma omp parallel if ((size_t)N * C > 65536)
#endif
    {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int n = 0; n < N; n++) {
            const float *xn = x + (size_t)n * C, *gn = dout + (size_t)n * C;
            float *dxn = dx + (size_t)n * C;
            float r = rstd[n];
            double dot = 0.0;
            for (int c = 0; c < C; c++)
                dot += (double)gn[c] * w[c] * xn[c];
            float k = (float)(dot * r * r * r / C);
            for (int c = 0; c < C; c++)
                dxn[c] += gn[c] * w[c] * r - k * xn[c];
        }
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int c0 = 0; c0 < C; c0 += RMSNORM_DW_COLS) {
            int c1 = c0 + RMSNORM_DW_COLS < C ? c0 + RMSNORM_DW_COLS : C;
            for (int n = 0; n < N; n++) {
                const float *xn = x + (size_t)n * C, *gn = dout + (size_t)n * C;
                float r = rstd[n];
                for (int c = c0; c < c1; c++)
                    dw[c] += gn[c] * xn[c] * r;
            }
        }
    }
}
