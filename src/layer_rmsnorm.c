/* layer_rmsnorm.c: RMSNorm (see include/qs/layers.h).
 * Numerics: the mean of squares is accumulated in double, then the row is
 * scaled in fp32 as HF does (x * rstd, then * weight). */
#include <math.h>

#include "qs/layers.h"

void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C,
                     float eps)
{
#pragma omp parallel for schedule(static) if (N > 16)
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
