/* layer_rmsnorm.c: RMSNorm (see include/qs/layers.h).
 * Numerics: the mean of squares is accumulated in double, then the row is
 * scaled in fp32 as HF does (x * rstd, then * weight). */
#include <math.h>

#include "qs/layers.h"

void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C,
                     float eps)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (N > 16)
#endif
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C;
        float *o = out + (size_t)n * C;
        double ss = 0.0;
        for (int c = 0; c < C; c++)
            ss += (double)xr[c] * xr[c];
        float r = (float)(1.0 / sqrt(ss / C + eps));
        for (int c = 0; c < C; c++)
            o[c] = (xr[c] * r) * w[c];
        if (rstd)
            rstd[n] = r;
    }
}

void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd, int N, int C)
{
    /* out = x * r * w with r = (mean x^2 + eps)^-1/2, dr/dx_c = -r^3 x_c / C */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)N * C > 65536)
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
#pragma omp parallel for schedule(static) if ((size_t)N * C > 65536)
#endif
    for (int c0 = 0; c0 < C; c0 += 64) {
        int c1 = c0 + 64 < C ? c0 + 64 : C;
        for (int n = 0; n < N; n++) {
            const float *xn = x + (size_t)n * C, *gn = dout + (size_t)n * C;
            float r = rstd[n];
            for (int c = c0; c < c1; c++)
                dw[c] += gn[c] * xn[c] * r;
        }
    }
}
