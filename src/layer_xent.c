/* layer_xent.c: softmax cross-entropy over the vocabulary (see include/qs/layers.h).
 * Numerics: logsumexp with the row max subtracted, sums in double, so a
 * 150k-entry vocabulary loses no precision.  The row loops below are the
 * reference; with AVX-512 vector kernels (layer_xent_avx512.c: one vector exp
 * per logit instead of libm's double exp, plus a float one in the backward)
 * replace them within the tolerances documented in layer_bwd_impl.h. */
#include <math.h>
#include <string.h>

#include "layer_bwd_impl.h"
#include "qs/cpu.h"
#include "qs/layers.h"

double xent_forward(float *losses, const float *logits, const int32_t *targets, int N, int V)
{
    const int simd512 = cpu_level() >= CPU_LEVEL_AVX512;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)N * V > 65536)
#endif
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        int32_t tg = targets[n];
        if (tg < 0 || tg >= V) {
            losses[n] = 0.0f;
            continue;
        }
        if (simd512) {
            losses[n] = xent_forward_row_avx512_impl(l, V, tg);
            continue;
        }
        float mx = l[0];
        for (int v = 1; v < V; v++)
            mx = l[v] > mx ? l[v] : mx;
        double s = 0.0;
        for (int v = 0; v < V; v++)
            s += exp((double)l[v] - mx);
        losses[n] = (float)(log(s) + mx - l[tg]);
    }
    double sum = 0.0;   /* serial, in row order: the same bits for any thread count */
    long cnt = 0;
    for (int n = 0; n < N; n++)
        if (targets[n] >= 0 && targets[n] < V) {
            sum += losses[n];
            cnt++;
        }
    return cnt ? sum / cnt : 0.0;
}

void xent_backward(float *dlogits, const float *logits, const int32_t *targets, int N, int V,
                   float scale)
{
    const int simd512 = cpu_level() >= CPU_LEVEL_AVX512;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)N * V > 65536)
#endif
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        float *g = dlogits + (size_t)n * V;
        if (targets[n] < 0) {
            memset(g, 0, (size_t)V * sizeof *g);
            continue;
        }
        if (simd512) {
            xent_backward_row_avx512_impl(g, l, V, targets[n], scale);
            continue;
        }
        float mx = l[0];
        for (int v = 1; v < V; v++)
            mx = l[v] > mx ? l[v] : mx;
        double sum = 0.0;
        for (int v = 0; v < V; v++)
            sum += exp((double)l[v] - mx);
        float inv = (float)(1.0 / sum);
        for (int v = 0; v < V; v++)
            g[v] = expf(l[v] - mx) * inv * scale;
        g[targets[n]] -= scale;
    }
}
