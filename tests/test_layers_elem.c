/* test_layers_elem.c: the vectorized element-wise forward layers (SwiGLU with a
 * vector exp, RMSNorm with the fused residual add) against their scalar
 * definitions, and the properties the eval relies on (a row's or an element's
 * result does not depend on how many others are computed with it).
 *
 * Tolerances:
 *   SwiGLU: |simd - scalar| <= SWIGLU_SIMD_TOL_ULP (8) ulp of |silu(g) u|: the
 *     vector exp is within ~2 ulp (degree-6 Taylor on |r| <= ln2/2, error
 *     < 2^-23 relative, plus the Horner roundings), then the same divide and
 *     multiply as the scalar form; inf/0 where expf overflows/underflows.
 *   RMSNorm: the double sum of squares may differ in its last bits with the
 *     summation order, so rstd and every output may move by one float
 *     rounding: 2 ulp relative.
 */
#include <math.h>
#include <string.h>

#include "qs/cpu.h"
#include "qs/layers.h"
#include "qs/mem.h"
#include "test.h"

static unsigned elem_seed = 4242u;

static float elem_rand(float scale)
{
    elem_seed = elem_seed * 1664525u + 1013904223u;
    return ((float)(elem_seed >> 8) * (2.0f / 16777216.0f) - 1.0f) * scale;
}

static double ulp_of(double v)
{
    v = fabs(v);
    return v < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(v) - 23);
}

TEST(layers_elem, swiglu_simd_within_8_ulp_of_the_expf_definition)
{
    if (cpu_detected_level() < CPU_LEVEL_AVX512)
        SKIP("CPU without AVX-512: the scalar form is the only one");
    enum { N = 20011 };
    float *g = qs_malloc(N * sizeof *g), *u = qs_malloc(N * sizeof *u);
    float *vec = qs_malloc(N * sizeof *vec), *ref = qs_malloc(N * sizeof *ref);
    ASSERT_TRUE(g && u && vec && ref);
    const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, 88.8f, 89.5f, -87.0f,
                             -88.7f, -89.5f, -103.0f, -110.0f, 200.0f, -200.0f, 15.9f, -15.9f};
    for (int i = 0; i < N; i++) {
        int s = i % 5;
        g[i] = s == 0 ? elem_rand(1.0f) : s == 1 ? elem_rand(8.0f) : s == 2 ? elem_rand(40.0f)
                                                   : s == 3 ? elem_rand(120.0f)
                                                            : elem_rand(1e-3f);
        u[i] = elem_rand(3.0f);
    }
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        g[i] = special[i];
        u[i] = 1.0f;
    }
    cpu_limit(CPU_LEVEL_SCALAR);
    swiglu_forward(ref, g, u, N);
    cpu_limit(CPU_LEVEL_AVX512BF16);
    swiglu_forward(vec, g, u, N);
    double worst = 0.0;
    int at = 0;
    for (int i = 0; i < N; i++) {
        if (isnan(ref[i]) || isinf(ref[i])) {
            ASSERT_TRUE(memcmp(&ref[i], &vec[i], sizeof(float)) == 0);
            continue;
        }
        double e = fabs((double)vec[i] - ref[i]) / ulp_of(ref[i]);
        if (e > worst) {
            worst = e;
            at = i;
        }
    }
    if (worst > SWIGLU_SIMD_TOL_ULP)
        TEST_FAIL_AT("g=%.9g u=%.9g: simd %.9g vs expf %.9g (%.1f ulp)", (double)g[at],
                     (double)u[at], (double)vec[at], (double)ref[at], worst);
    /* NaN stays NaN */
    float gn = NAN, un = 1.0f, on = 0.0f;
    swiglu_forward(&on, &gn, &un, 1);
    ASSERT_TRUE(isnan(on));
    qs_free(g);
    qs_free(u);
    qs_free(vec);
    qs_free(ref);
}

TEST(layers_elem, swiglu_element_does_not_depend_on_array_length_or_offset)
{
    enum { N = 70001 }; /* above the threading threshold, not a multiple of 16 */
    float *g = qs_malloc(N * sizeof *g), *u = qs_malloc(N * sizeof *u);
    float *all = qs_malloc(N * sizeof *all), *one = qs_malloc(N * sizeof *one);
    ASSERT_TRUE(g && u && all && one);
    for (int i = 0; i < N; i++) {
        g[i] = elem_rand(6.0f);
        u[i] = elem_rand(2.0f);
    }
    swiglu_forward(all, g, u, N);
    for (int i = 0; i < N; i += 997)
        swiglu_forward(one + i, g + i, u + i, (size_t)(N - i < 3 ? N - i : 3));
    for (int i = 0; i < N; i += 997)
        ASSERT_TRUE(memcmp(all + i, one + i, sizeof(float)) == 0);
    qs_free(g);
    qs_free(u);
    qs_free(all);
    qs_free(one);
}

/* Fused residual + RMSNorm: the same bits as the two steps; a row's result
 * does not depend on N; SIMD and scalar rows agree within 2 ulp. */
TEST(layers_elem, rmsnorm_residual_equals_add_then_norm_and_is_row_invariant)
{
    enum { NR = 37, C = 301 };
    size_t n = (size_t)NR * C;
    float *a = qs_malloc(n * sizeof *a), *b = qs_malloc(n * sizeof *b);
    float *w = qs_malloc(C * sizeof *w), *sum = qs_malloc(n * sizeof *sum);
    float *out = qs_malloc(n * sizeof *out), *sum2 = qs_malloc(n * sizeof *sum2);
    float *out2 = qs_malloc(n * sizeof *out2), *ref = qs_malloc(n * sizeof *ref);
    float rstd[NR], rstd2[NR];
    ASSERT_TRUE(a && b && w && sum && out && sum2 && out2 && ref);
    for (size_t i = 0; i < n; i++) {
        a[i] = elem_rand(3.0f);
        b[i] = elem_rand(1.0f);
    }
    for (int c = 0; c < C; c++)
        w[c] = 1.0f + elem_rand(0.5f);
    rmsnorm_residual_forward(sum, out, rstd, a, b, w, NR, C, 1e-5f);
    for (size_t i = 0; i < n; i++)
        sum2[i] = a[i] + b[i];
    rmsnorm_forward(out2, rstd2, sum2, w, NR, C, 1e-5f);
    ASSERT_TRUE(memcmp(sum, sum2, n * sizeof *sum) == 0);
    ASSERT_TRUE(memcmp(out, out2, n * sizeof *out) == 0);
    ASSERT_TRUE(memcmp(rstd, rstd2, sizeof rstd) == 0);
    /* in place (sum aliases a), one row at a time */
    memcpy(sum2, a, n * sizeof *a);
    for (int r = 0; r < NR; r++)
        rmsnorm_residual_forward(sum2 + (size_t)r * C, out2 + (size_t)r * C, NULL,
                                 sum2 + (size_t)r * C, b + (size_t)r * C, w, 1, C, 1e-5f);
    ASSERT_TRUE(memcmp(sum, sum2, n * sizeof *sum) == 0);
    ASSERT_TRUE(memcmp(out, out2, n * sizeof *out) == 0);
    /* scalar rows: sequential double sum */
    cpu_limit(CPU_LEVEL_SCALAR);
    rmsnorm_forward(ref, NULL, sum2, w, NR, C, 1e-5f);
    cpu_limit(CPU_LEVEL_AVX512BF16);
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)out[i] - ref[i]) <= 2.0 * ulp_of(ref[i]))) {
            TEST_FAIL_AT("element %zu: %.9g vs scalar %.9g", i, (double)out[i], (double)ref[i]);
            break;
        }
    float *bufs[] = {a, b, w, sum, out, sum2, out2, ref};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        qs_free(bufs[i]);
}
