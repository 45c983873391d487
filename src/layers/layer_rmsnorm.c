/* layer_rmsnorm.c: RMSNorm (see include/qs/layers.h).
 * Numerics: the mean of squares is accumulated in double, then the row is
 * scaled in fp32 as HF does (x * rstd, then * weight).  With AVX-512 the rows
 * go through rmsnorm_row_avx512_impl (8 double lanes); the forward can take the
 * residual add that precedes it (one pass, one parallel region less).  The
 * backward's rows and dw columns go through layer_rmsnorm_bwd_avx512.c (numerics
 * there and at rmsnorm_backward). */
#include <math.h>

#include "layer_elem_impl.h"
#include "qs/cpu.h"
#include "qs/layers.h"

#ifdef _OPENMP
#include <omp.h>
#endif

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

static void rmsnorm_residual_row(float *sum, float *out, float *rstd, const float *a,
                                 const float *b, const float *w, int n, int C, float eps, int simd,
                                 void (*row_fn)(void *, int, const float *), void *ctx)
{
    size_t o = (size_t)n * C;
    float *s = b ? sum + o : NULL;
    const float *bn = b ? b + o : NULL;
    float r = simd ? rmsnorm_row_avx512_impl(out + o, s, a + o, bn, w, C, eps)
                   : rmsnorm_row(out + o, s, a + o, bn, w, C, eps);
    if (rstd)
        rstd[n] = r;
    if (row_fn)
        row_fn(ctx, n, out + o);
}

void rmsnorm_residual_forward_rows(float *sum, float *out, float *rstd, const float *a,
                                   const float *b, const float *w, int N, int C, float eps,
                                   void (*row_fn)(void *ctx, int n, const float *row), void *ctx)
{
    const int simd = cpu_level() >= CPU_LEVEL_AVX512;
    /* a serial call enters no OpenMP region: an if(0) region still costs 1-3 us,
     * and a 1B decode makes hundreds of such calls a token (README, ### models) */
    if (N > 16) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
        for (int n = 0; n < N; n++)
            rmsnorm_residual_row(sum, out, rstd, a, b, w, n, C, eps, simd, row_fn, ctx);
    } else {
        for (int n = 0; n < N; n++)
            rmsnorm_residual_row(sum, out, rstd, a, b, w, n, C, eps, simd, row_fn, ctx);
    }
}

void rmsnorm_residual_forward(float *sum, float *out, float *rstd, const float *a, const float *b,
                              const float *w, int N, int C, float eps)
{
    rmsnorm_residual_forward_rows(sum, out, rstd, a, b, w, N, C, eps, NULL, NULL);
}

void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C,
                     float eps)
{
    rmsnorm_residual_forward(NULL, out, rstd, x, NULL, w, N, C, eps);
}

/* rmsnorm_backward's row n of dx, portable: the dot summed in order in double. */
static void rmsnorm_bwd_row(float *dxn, const float *gn, const float *xn, const float *w, float r,
                            int C)
{
    double dot = 0.0;
    for (int c = 0; c < C; c++)
        dot += (double)gn[c] * w[c] * xn[c];
    float k = (float)(dot * r * r * r / C);
    for (int c = 0; c < C; c++)
        dxn[c] += gn[c] * w[c] * r - k * xn[c];
}

/* rmsnorm_backward's dw for columns [c0, c1), portable: rows in order. */
static void rmsnorm_dw_cols(float *dw, const float *dout, const float *x, const float *rstd, int N,
                            int C, int c0, int c1)
{
    for (int n = 0; n < N; n++) {
        const float *xn = x + (size_t)n * C, *gn = dout + (size_t)n * C;
        float r = rstd[n];
        for (int c = c0; c < c1; c++)
            dw[c] += gn[c] * xn[c] * r;
    }
}

void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd, int N, int C)
{
    /* out = x * r * w with r = (mean x^2 + eps)^-1/2, dr/dx_c = -r^3 x_c / C.
     * One parallel region: rows of dx, then dw in one block of columns per
     * thread (whole 16-column units, cache lines of dw: balanced within 16
     * columns for any team; C = 288 over 2 threads: 144 each), each thread
     * streaming its part of every row (rows outer, its dw block in L1).  Each
     * dw[c] is summed over n in order whoever owns it, so the split changes no
     * bits.  With AVX-512 (layer_rmsnorm_bwd_avx512.c) dx's dot is summed in 8
     * double lanes, as the forward's sum of squares, so dx may differ from the
     * portable loops in the last bits of k (the fp32 part rounds as they do);
     * dw has the portable bits.  Both are independent of the thread count. */
    enum { RMSNORM_DW_UNIT = 16 };
    const int simd = cpu_level() >= CPU_LEVEL_AVX512;
#ifdef _OPENMP
#pragma omp parallel if ((size_t)N * C > 65536)
#endif
    {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int n = 0; n < N; n++) {
            size_t o = (size_t)n * C;
            if (simd)
                rmsnorm_bwd_row_avx512_impl(dx + o, dout + o, x + o, w, rstd[n], C);
            else
                rmsnorm_bwd_row(dx + o, dout + o, x + o, w, rstd[n], C);
        }
        int blocks = 1;
#ifdef _OPENMP
        blocks = omp_get_num_threads();
#endif
        const long units = (C + RMSNORM_DW_UNIT - 1) / RMSNORM_DW_UNIT;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int b = 0; b < blocks; b++) {
            int c0 = (int)(units * b / blocks) * RMSNORM_DW_UNIT;
            int c1 = (int)(units * (b + 1) / blocks) * RMSNORM_DW_UNIT;
            c1 = c1 < C ? c1 : C;
            if (c0 >= c1)
                continue;
            if (simd)
                rmsnorm_dw_cols_avx512_impl(dw, dout, x, rstd, N, C, c0, c1);
            else
                rmsnorm_dw_cols(dw, dout, x, rstd, N, C, c0, c1);
        }
    }
}
