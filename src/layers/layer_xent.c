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
#include "qs/err.h"
#include "qs/layers.h"
#include "qs/mem.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* The reference row: *mx = max of l[0, V), returns sum exp(l[v] - mx) in double. */
static double xent_row_sumexp_ref(const float *l, int V, float *mx)
{
    float m = l[0];
    for (int v = 1; v < V; v++)
        m = l[v] > m ? l[v] : m;
    double s = 0.0;
    for (int v = 0; v < V; v++)
        s += exp((double)l[v] - m);
    *mx = m;
    return s;
}

double xent_row_nll(const float *l, int V, int32_t target)
{
    float mx;
    double s = xent_row_sumexp_ref(l, V, &mx);
    return log(s) + mx - l[target];
}

double xent_forward(float *losses, const xent_stats *st, const float *logits,
                    const int32_t *targets, int N, int V)
{
    const int simd512 = cpu_level() >= CPU_LEVEL_AVX512;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)N * V > 65536)
#endif
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        int32_t tg = targets[n];
        float mx = 0.0f;
        double s = -1.0;
        if (tg < 0 || tg >= V)
            losses[n] = 0.0f;
        else if (simd512)
            losses[n] = xent_forward_row_avx512_impl(l, V, tg, &mx, &s);
        else {
            s = xent_row_sumexp_ref(l, V, &mx);
            losses[n] = (float)(log(s) + mx - l[tg]);
        }
        if (st) {
            st->max[n] = mx;
            st->sum[n] = s;
        }
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

/* One row of xent_backward (g may alias l); sum >= 0: mx and sum are the
 * forward's for l (the same values this row would compute). */
static void xent_backward_row(float *g, const float *l, int V, int32_t tg, float scale,
                              int simd512, float mx, double sum)
{
    if (tg < 0) {
        memset(g, 0, (size_t)V * sizeof *g);
        return;
    }
    if (simd512) {
        xent_backward_row_avx512_impl(g, l, V, tg, scale, mx, sum);
        return;
    }
    if (sum < 0)
        sum = xent_row_sumexp_ref(l, V, &mx);
    float inv = (float)(1.0 / sum);
    for (int v = 0; v < V; v++)
        g[v] = expf(l[v] - mx) * inv * scale;
    g[tg] -= scale;
}

/* Row n's statistics from st, or "compute them" (sum -1). */
static void xent_stats_row(const xent_stats *st, int n, float *mx, double *sum)
{
    *mx = st ? st->max[n] : 0.0f;
    *sum = st ? st->sum[n] : -1.0;
}

void xent_backward(float *dlogits, const xent_stats *st, const float *logits,
                   const int32_t *targets, int N, int V, float scale)
{
    const int simd512 = cpu_level() >= CPU_LEVEL_AVX512;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)N * V > 65536)
#endif
    for (int n = 0; n < N; n++) {
        float mx;
        double sum;
        xent_stats_row(st, n, &mx, &sum);
        xent_backward_row(dlogits + (size_t)n * V, logits + (size_t)n * V, V, targets[n], scale,
                          simd512, mx, sum);
    }
}

int xent_backward_pairs(const xent_stats *st, const float *logits, const int32_t *targets, int N,
                        int V, float scale, xent_rows_fn put, void *ctx)
{
    const int simd512 = cpu_level() >= CPU_LEVEL_AVX512;
    int n_threads = 1;
#ifdef _OPENMP
    n_threads = (size_t)N * V > 65536 ? omp_get_max_threads() : 1;
#endif
    /* two rows per thread: small enough to stay in L2 between compute and put */
    float *scratch = qs_malloc((size_t)n_threads * 2 * V * sizeof *scratch);
    if (!scratch)
        return QS_ENOMEM;
    const int n_pairs = (N + 1) / 2;
#ifdef _OPENMP
#pragma omp parallel num_threads(n_threads)
#endif
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *g = scratch + (size_t)tid * 2 * V;
        /* dynamic (the machine is shared), in runs of 16 pairs so that a consumer
         * filling k-pair panels (matmul_dout_store) writes whole cache lines */
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 16)
#endif
        for (int kp = 0; kp < n_pairs; kp++) {
            for (int i = 0; i < 2 && 2 * kp + i < N; i++) {
                int n = 2 * kp + i;
                float mx;
                double sum;
                xent_stats_row(st, n, &mx, &sum);
                xent_backward_row(g + (size_t)i * V, logits + (size_t)n * V, V, targets[n], scale,
                                  simd512, mx, sum);
            }
            put(ctx, 2 * kp, g);
        }
    }
    qs_free(scratch);
    return 0;
}
