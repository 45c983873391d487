/* test_layers_elem.c: the vectorized element-wise forward layers (SwiGLU with a
 * vector exp, RMSNorm with the fused residual add) against their scalar
 * definitions, and the properties the eval relies on (a row's or an element's
 * result does not depend on how many others are computed with it); RMSNorm's
 * backward (AVX-512 rows and dw columns) against a double reference, the
 * scalar dw loop and itself over thread counts.
 *
 * Tolerances:
 *   SwiGLU: |simd - scalar| <= SWIGLU_SIMD_TOL_ULP (8) ulp of |silu(g) u|: the
 *     vector exp is within ~2 ulp (degree-6 Taylor on |r| <= ln2/2, error
 *     < 2^-23 relative, plus the Horner roundings), then the same divide and
 *     multiply as the scalar form; inf/0 where expf overflows/underflows.
 *   RMSNorm: the double sum of squares may differ in its last bits with the
 *     summation order, so rstd and every output may move by one float
 *     rounding: 2 ulp relative.
 *   RMSNorm backward: dx within 5 float roundings of its terms' magnitude of
 *     a double reference (derivation at rnb_case); dw bit for bit.
 */
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

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

/* an integer in [lo, lo + m) */
static int elem_int(int lo, int m)
{
    elem_seed = elem_seed * 1664525u + 1013904223u;
    return lo + (int)((elem_seed >> 8) % (unsigned)m);
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

/* ---- rmsnorm_backward: dx = dx0 + g w r - k x with k = (float)(dot r^3 / C),
 * dot = sum_c g w x in double; dw = dw0 + sum_n (g x) r in fp32, rows in order.
 *
 * dx tolerance against a double reference from the same float inputs, with
 * u = 2^-24, a = g w r, b = k x (reference values), S = |dx0| + |a| + |b|:
 * the kernel rounds g w, then * r (2u |a|), k to float and k x (2u |b|), the
 * difference (u (|a| + |b|)) and the sum with dx0 (u S): 4u S to first order;
 * a fifth u S covers the second-order terms and the reference's own double
 * roundings.  Besides, k inherits the double dot's summation error: both
 * sums (kernel, reference) are within (C + 1) 2^-53 sum|g w x| of the exact
 * dot, so |x| r^3 / C * 2 (C + 2) 2^-53 sum|g w x| more.  S, not |dx|, is the
 * scale because g w r and k x may cancel.  This bound holds for the portable
 * loops (sequential dot) and for the AVX-512 rows (8 lanes + tree) alike. */
typedef struct {
    int N, C;
    float *g, *x, *w, *rstd, *dx0, *dw0, *dx, *dw;
} rnb_case;

static void rnb_free(rnb_case *k)
{
    float *bufs[] = {k->g, k->x, k->w, k->rstd, k->dx0, k->dw0, k->dx, k->dw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        qs_free(bufs[i]);
}

/* exact: g, w, x small multiples of 2^-3, 2^-2, 2^-4, so every product g w x
 * and every partial sum of a row is exact in double, in any order. */
static int rnb_init(rnb_case *k, int N, int C, int exact)
{
    size_t n = (size_t)N * C;
    k->N = N;
    k->C = C;
    k->g = qs_malloc(n * sizeof(float));
    k->x = qs_malloc(n * sizeof(float));
    k->dx0 = qs_malloc(n * sizeof(float));
    k->dx = qs_malloc(n * sizeof(float));
    k->w = qs_malloc((size_t)C * sizeof(float));
    k->dw0 = qs_malloc((size_t)C * sizeof(float));
    k->dw = qs_malloc((size_t)C * sizeof(float));
    k->rstd = qs_malloc((size_t)N * sizeof(float));
    if (!k->g || !k->x || !k->dx0 || !k->dx || !k->w || !k->dw0 || !k->dw || !k->rstd)
        return 0;
    for (size_t i = 0; i < n; i++) {
        k->g[i] = exact ? (float)elem_int(-8, 17) * 0.125f : elem_rand(1e-2f);
        k->x[i] = exact ? (float)elem_int(-16, 33) * 0.0625f : elem_rand(2.0f);
        k->dx0[i] = elem_rand(1e-3f);
    }
    for (int c = 0; c < C; c++) {
        k->w[c] = exact ? (float)elem_int(1, 9) * 0.25f : 1.0f + elem_rand(0.5f);
        k->dw0[c] = elem_rand(0.1f);
    }
    rmsnorm_forward(k->dx, k->rstd, k->x, k->w, N, C, 1e-5f);   /* dx: scratch */
    return 1;
}

/* rmsnorm_backward at cpu level `level` into k->dx, k->dw (from dx0, dw0) */
static void rnb_run(rnb_case *k, int level)
{
    size_t n = (size_t)k->N * k->C;
    memcpy(k->dx, k->dx0, n * sizeof(float));
    memcpy(k->dw, k->dw0, (size_t)k->C * sizeof(float));
    int saved = cpu_level();
    cpu_limit(level);
    rmsnorm_backward(k->dx, k->dw, k->g, k->x, k->w, k->rstd, k->N, k->C);
    cpu_limit(saved);
}

/* 1 when every dx is within the bound above; else prints the worst element */
static int rnb_dx_within_bound(const rnb_case *k, const char *what)
{
    const int C = k->C;
    for (int n = 0; n < k->N; n++) {
        const float *g = k->g + (size_t)n * C, *x = k->x + (size_t)n * C;
        const float *dx = k->dx + (size_t)n * C, *dx0 = k->dx0 + (size_t)n * C;
        double r = k->rstd[n], dot = 0.0, sabs = 0.0;
        for (int c = 0; c < C; c++) {
            double p = (double)g[c] * k->w[c] * x[c];
            dot += p;
            sabs += fabs(p);
        }
        double kr = dot * r * r * r / C;
        double dot_err = 2.0 * (C + 2) * 0x1p-53 * sabs * r * r * r / C;
        for (int c = 0; c < C; c++) {
            double a = (double)g[c] * k->w[c] * r, b = kr * x[c];
            double ref = dx0[c] + a - b;
            double S = fabs(dx0[c]) + fabs(a) + fabs(b);
            double tol = 5.0 * 0x1p-24 * S + fabs(x[c]) * dot_err;
            if (!(fabs(dx[c] - ref) <= tol)) {
                TEST_FAIL_AT("%s N=%d C=%d dx[%d,%d] = %.9g, reference %.12g, tolerance %.3g",
                             what, k->N, C, n, c, (double)dx[c], ref, tol);
                return 0;
            }
        }
    }
    return 1;
}

static const int rnb_cols[] = {7, 16, 33, 288, 768};
static const int rnb_rows[] = {1, 5, 240};   /* 240 x 288 and 240 x 768 run threaded */

TEST(layers_elem, rmsnorm_backward_dx_within_5_ulp_of_double_reference)
{
    if (cpu_level() < CPU_LEVEL_AVX512)
        SKIP("CPU without AVX-512: the portable rows are the only ones");
    for (size_t i = 0; i < sizeof rnb_cols / sizeof rnb_cols[0]; i++)
        for (size_t j = 0; j < sizeof rnb_rows / sizeof rnb_rows[0]; j++) {
            rnb_case k = {0};
            int ok = rnb_init(&k, rnb_rows[j], rnb_cols[i], 0);
            if (ok) {
                rnb_run(&k, CPU_LEVEL_AVX512);
                ok = rnb_dx_within_bound(&k, "avx512");
            }
            if (ok) {   /* the bound is the portable loops' too */
                rnb_run(&k, CPU_LEVEL_SCALAR);
                ok = rnb_dx_within_bound(&k, "portable");
            }
            rnb_free(&k);
            ASSERT_TRUE(ok);
        }
}

/* When the dot is exact in any order, k is the same, and the fp32 part must
 * round as the portable loop does (no FMA): the same bits. */
TEST(layers_elem, rmsnorm_backward_simd_dx_bits_equal_portable_when_dot_is_exact)
{
    if (cpu_level() < CPU_LEVEL_AVX512)
        SKIP("CPU without AVX-512: the portable rows are the only ones");
    for (size_t i = 0; i < sizeof rnb_cols / sizeof rnb_cols[0]; i++) {
        rnb_case k = {0};
        size_t n = (size_t)97 * rnb_cols[i];
        float *ref = qs_malloc(n * sizeof *ref);
        int ok = ref && rnb_init(&k, 97, rnb_cols[i], 1);
        if (ok) {
            rnb_run(&k, CPU_LEVEL_SCALAR);
            memcpy(ref, k.dx, n * sizeof *ref);
            rnb_run(&k, CPU_LEVEL_AVX512);
            ok = memcmp(ref, k.dx, n * sizeof *ref) == 0;
            if (!ok)
                TEST_FAIL_AT("C=%d: AVX-512 dx differs from the portable loop", rnb_cols[i]);
        }
        rnb_free(&k);
        qs_free(ref);
        ASSERT_TRUE(ok);
    }
}

/* dw on every path: the bits of the plain loop below (rows in order). */
TEST(layers_elem, rmsnorm_backward_dw_bit_identical_to_scalar_loop)
{
    const int simd = cpu_level() >= CPU_LEVEL_AVX512;
    for (size_t i = 0; i < sizeof rnb_cols / sizeof rnb_cols[0]; i++)
        for (size_t j = 0; j < sizeof rnb_rows / sizeof rnb_rows[0]; j++) {
            const int N = rnb_rows[j], C = rnb_cols[i];
            rnb_case k = {0};
            float *ref = qs_malloc((size_t)C * sizeof *ref);
            int ok = ref && rnb_init(&k, N, C, 0);
            if (ok) {
                memcpy(ref, k.dw0, (size_t)C * sizeof *ref);
                for (int n = 0; n < N; n++)
                    for (int c = 0; c < C; c++)
                        ref[c] += k.g[(size_t)n * C + c] * k.x[(size_t)n * C + c] * k.rstd[n];
            }
            for (int level = CPU_LEVEL_SCALAR; ok && level <= CPU_LEVEL_AVX512; level++) {
                if (level == CPU_LEVEL_AVX2 || (level == CPU_LEVEL_AVX512 && !simd))
                    continue;
                rnb_run(&k, level);
                ok = memcmp(ref, k.dw, (size_t)C * sizeof *ref) == 0;
                if (!ok)
                    TEST_FAIL_AT("N=%d C=%d level %s: dw differs from the scalar loop", N, C,
                                 cpu_level_name(level));
            }
            rnb_free(&k);
            qs_free(ref);
            ASSERT_TRUE(ok);
        }
}

TEST(layers_elem, rmsnorm_backward_bits_do_not_depend_on_thread_count)
{
#ifdef _OPENMP
    /* all above the threading threshold (N C > 65536); C = 33: 3 dw units */
    static const int shapes[][2] = {{240, 288}, {128, 768}, {2000, 33}, {100, 1536}};
    const int simd = cpu_level() >= CPU_LEVEL_AVX512, saved = omp_get_max_threads();
    int ok = 1;
    for (size_t s = 0; ok && s < sizeof shapes / sizeof shapes[0]; s++) {
        const int N = shapes[s][0], C = shapes[s][1];
        const size_t n = (size_t)N * C;
        rnb_case k = {0};
        float *dx1 = qs_malloc(n * sizeof *dx1), *dw1 = qs_malloc((size_t)C * sizeof *dw1);
        ok = dx1 && dw1 && rnb_init(&k, N, C, 0);
        for (int level = CPU_LEVEL_SCALAR; ok && level <= CPU_LEVEL_AVX512; level++) {
            if (level == CPU_LEVEL_AVX2 || (level == CPU_LEVEL_AVX512 && !simd))
                continue;
            for (int th = 1; ok && th <= 3; th++) {
                omp_set_num_threads(th);
                rnb_run(&k, level);
                if (th == 1) {
                    memcpy(dx1, k.dx, n * sizeof *dx1);
                    memcpy(dw1, k.dw, (size_t)C * sizeof *dw1);
                    continue;
                }
                ok = memcmp(dx1, k.dx, n * sizeof *dx1) == 0 &&
                     memcmp(dw1, k.dw, (size_t)C * sizeof *dw1) == 0;
                if (!ok)
                    TEST_FAIL_AT("N=%d C=%d level %s: %d threads differ from 1", N, C,
                                 cpu_level_name(level), th);
            }
        }
        omp_set_num_threads(saved);
        rnb_free(&k);
        qs_free(dx1);
        qs_free(dw1);
    }
    ASSERT_TRUE(ok);
#else
    SKIP("built without OpenMP");
#endif
}
