/* test_backward_simd.c: the AVX-512 paths of the training-only element-wise
 * layers (cross-entropy loss and backward, SwiGLU backward) and the optimizer
 * against their portable reference loops (cpu_limit). */
#include <math.h>
#include <string.h>

#include "qs/cpu.h"
#include "qs/layers.h"
#include "qs/mem.h"
#include "qs/optim.h"
#include "test.h"

static void simd_fill(float *x, size_t n, unsigned long seed, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ul + 1442695040888963407ul;
        x[i] = lo + (hi - lo) * (float)((seed >> 40) & 0xffffff) / 16777216.0f;
    }
}

static double simd_max_rel(const float *a, const float *b, size_t n, double floor_abs)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs((double)a[i]) + floor_abs);
        m = d > m ? d : m;
    }
    return m;
}

TEST(backward_simd, xent_backward_matches_portable_within_tolerance)
{
    if (cpu_detected_level() < CPU_LEVEL_AVX512)
        SKIP("no AVX-512 on this CPU");
    enum { N = 5, V = 1000 + 7 };
    float *l = qs_malloc(N * V * 4), *g1 = qs_malloc(N * V * 4), *g2 = qs_malloc(N * V * 4);
    ASSERT_TRUE(l && g1 && g2);
    simd_fill(l, N * V, 3, -12.0f, 9.0f);
    l[2 * V + 5] = 80.0f;                  /* one dominant logit: others underflow */
    l[3 * V + 1] = -300.0f;                /* far below the max */
    const int32_t tg[N] = {3, V - 1, 5, -1, 0};
    int saved = cpu_level();
    cpu_limit(CPU_LEVEL_AVX2);
    xent_backward(g1, NULL, l, tg, N, V, 0.25f);
    cpu_limit(saved);
    xent_backward(g2, NULL, l, tg, N, V, 0.25f);
    double worst = 0.0;
    for (size_t i = 0; i < (size_t)N * V; i++) {
        double d = fabs((double)g1[i] - g2[i]);
        worst = d > worst ? d : worst;
    }
    ASSERT_NEAR(worst / 0.25, 0.0, 2e-6);
    for (int v = 0; v < V; v++)
        ASSERT_TRUE(g2[3 * V + v] == 0.0f);  /* ignored row */
    double row = 0.0;                        /* a softmax row minus one-hot sums to 0 */
    for (int v = 0; v < V; v++)
        row += g2[v];
    ASSERT_NEAR(row, 0.0, 1e-6);
    qs_free(l);
    qs_free(g1);
    qs_free(g2);
}

TEST(backward_simd, xent_forward_matches_portable_within_tolerance)
{
    if (cpu_detected_level() < CPU_LEVEL_AVX512)
        SKIP("no AVX-512 on this CPU");
    enum { N = 6, V = 32000 + 9 };
    float *l = qs_malloc((size_t)N * V * 4), loss1[N], loss2[N];
    ASSERT_TRUE(l);
    simd_fill(l, (size_t)N * V, 4, -15.0f, 15.0f);
    l[V + 3] = 90.0f;   /* dominant logit */
    const int32_t tg[N] = {1, 3, V - 1, -1, 0, 17};
    int saved = cpu_level();
    cpu_limit(CPU_LEVEL_AVX2);
    double m1 = xent_forward(loss1, NULL, l, tg, N, V);
    cpu_limit(saved);
    double m2 = xent_forward(loss2, NULL, l, tg, N, V);
    for (int n = 0; n < N; n++)
        ASSERT_NEAR(loss2[n], loss1[n], 1e-6 * (1.0 + fabs(loss1[n])));
    ASSERT_TRUE(loss2[3] == 0.0f);
    ASSERT_NEAR(loss2[1], 0.0, 1e-6);      /* the dominant logit is the target */
    ASSERT_NEAR(m2, m1, 1e-6 * (1.0 + fabs(m1)));
    qs_free(l);
}

TEST(backward_simd, swiglu_backward_matches_portable_within_tolerance)
{
    if (cpu_detected_level() < CPU_LEVEL_AVX512)
        SKIP("no AVX-512 on this CPU");
    const size_t n = 70000 + 5;   /* several chunks, threaded, and a tail */
    float *gt = qs_malloc(n * 4), *up = qs_malloc(n * 4), *d = qs_malloc(n * 4);
    float *a = qs_malloc(4 * n * 4);
    ASSERT_TRUE(gt && up && d && a);
    simd_fill(gt, n, 5, -30.0f, 30.0f);
    simd_fill(up, n, 6, -2.0f, 2.0f);
    simd_fill(d, n, 7, -1.0f, 1.0f);
    simd_fill(a, 4 * n, 8, -0.5f, 0.5f);   /* old values, overwritten */
    memcpy(a + 2 * n, a, 2 * n * 4);
    int saved = cpu_level();
    cpu_limit(CPU_LEVEL_AVX2);
    swiglu_backward(a, a + n, d, gt, up, n);
    cpu_limit(saved);
    swiglu_backward(a + 2 * n, a + 3 * n, d, gt, up, n);
    ASSERT_NEAR(simd_max_rel(a, a + 2 * n, 2 * n, 1e-1), 0.0, 1e-6);
    qs_free(gt);
    qs_free(up);
    qs_free(d);
    qs_free(a);
}

TEST(backward_simd, adamw_steps_are_bit_identical_to_portable)
{
    if (cpu_detected_level() < CPU_LEVEL_AVX512)
        SKIP("no AVX-512 on this CPU");
    const size_t n = 2 * 65536 + 37;
    float *p1 = qs_malloc(n * 4), *p2 = qs_malloc(n * 4), *g = qs_malloc(n * 4);
    ASSERT_TRUE(p1 && p2 && g);
    simd_fill(p1, n, 11, -1.0f, 1.0f);
    memcpy(p2, p1, n * 4);
    adamw_state s1, s2;
    ASSERT_EQ_INT(adamw_init(&s1, n), 0);
    ASSERT_EQ_INT(adamw_init(&s2, n), 0);
    adamw_hparams h = {0.9, 0.95, 1e-8, 0.1};
    int saved = cpu_level();
    for (int t = 0; t < 3; t++) {
        simd_fill(g, n, 20 + (unsigned long)t, -1e-2f, 1e-2f);
        g[t] = 0.0f;
        cpu_limit(CPU_LEVEL_AVX2);
        adamw_step(&s1, p1, g, 1e-3, &h);
        cpu_limit(saved);
        adamw_step(&s2, p2, g, 1e-3, &h);
    }
    ASSERT_TRUE(memcmp(p1, p2, n * 4) == 0);
    ASSERT_TRUE(memcmp(s1.m, s2.m, n * 4) == 0);
    ASSERT_TRUE(memcmp(s1.v, s2.v, n * 4) == 0);
    adamw_free(&s1);
    adamw_free(&s2);
    qs_free(p1);
    qs_free(p2);
    qs_free(g);
}
