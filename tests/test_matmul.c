/* test_matmul.c: every matmul path against double-precision references.
 *
 * References are computed here in double from the formulas (out = x w^T + b,
 * dx = dout w, dw = dout^T x, db = colsum dout), optionally with the operands
 * rounded to bf16 by an implementation independent of the library's (frexp +
 * nearbyint).  Each output element y = init + sum_k a_k b_k is checked against
 *   |y - ref| <= tol * (K + 1) * 2^-24 * (|init| + sum_k |a_k b_k|)
 * i.e. the classic fp32 summation bound gamma_K scaled by a named factor.
 * Shapes are odd on purpose: 1, primes, and sizes that are not multiples of
 * the 12 x 32 micro-tile, the 256-wide K block or the 96-row task block.
 */
#include <math.h>
#include <stdlib.h>

#include <cblas.h>

#include "qs/cpu.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "test.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* fp32 accumulation (our FMA chain, OpenBLAS's blocked order): each of the K
 * additions rounds once, so gamma_K bounds the error; no slack needed. */
#define TOL_FP32_ACCUM 1.0
/* bf16 paths: products of bf16 values are exact in fp32 and each term is added
 * with one rounding (vdpbf16ps's pair order; K + 1 terms when K is odd), so the
 * same gamma bound as fp32 applies to the exact sum of the ROUNDED operands. */
#define TOL_BF16_ACCUM 1.0
/* bf16 vs fp32 math: each operand is off by at most 2^-8 relative (8-bit
 * significand, round to nearest), a product by (1 + 2^-8)^2 - 1 < 2^-6.99;
 * expressed in units of 2^-24 per term, independent of K. */
#define TOL_BF16_OPERAND_UNITS (65536.0 * 2.02)

typedef struct mm_case {
    int N, IN, O;
} mm_case;

/* N rows, IN, O: 1s, primes, tile/block edges, a K (IN or O or N) > 2 K blocks. */
static const mm_case odd_cases[] = {
    {1, 1, 1},    {1, 7, 5},     {2, 3, 33},   {13, 31, 37}, {5, 1, 97},
    {97, 29, 65}, {37, 257, 11}, {11, 19, 515}, {131, 64, 31}, {3, 515, 2},
    {3, 1031, 1037}, /* wider than the packing chunks (768 columns) */
    {401, 23, 515},  /* dw over more rows than one K block: dout^T's panels swept per task */
};

static unsigned test_seed = 12345u;

static float *rand_buf(size_t n)
{
    float *p = qs_malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; p && i < n; i++) {
        test_seed = test_seed * 1664525u + 1013904223u;
        p[i] = (float)((test_seed >> 8) * (2.0 / 16777216.0) - 1.0);
    }
    return p;
}

static float *copy_buf(const float *src, size_t n)
{
    float *p = qs_malloc((n ? n : 1) * sizeof *p);
    if (p && n)
        memcpy(p, src, n * sizeof *p);
    return p;
}

/* bf16 round to nearest even, independent of the library: keep 8 significant
 * bits; results below the normal range are zero (the contract, as vdpbf16ps). */
static double emu_bf16(float f)
{
    if (f == 0.0f || !isfinite(f))
        return f;
    int e;
    double m = frexp(f, &e); /* f = m 2^e, 0.5 <= |m| < 1 */
    double r = ldexp(nearbyint(ldexp(m, 8)), e - 8);
    return fabs(r) < 0x1p-126 ? copysign(0.0, f) : r;
}

/* Strided operand: element (r, c) = p[r * rs + c * cs]. */
typedef struct view {
    const float *p;
    long rs, cs;
} view;

/* ref[m, j] = init + sum_k A(m, k) B(k, j) in double; mag = |init| + sum |A B|. */
static void ref_gemm(double *ref, double *mag, int M, int Nc, int K, view a, view b,
                     const float *init_c, const float *init_row, int bf16)
{
    for (int m = 0; m < M; m++)
        for (int j = 0; j < Nc; j++) {
            double s = init_c ? init_c[(size_t)m * Nc + j] : init_row ? init_row[j] : 0.0;
            double g = fabs(s);
            for (int k = 0; k < K; k++) {
                float av = a.p[m * a.rs + k * a.cs], bv = b.p[k * b.rs + j * b.cs];
                double p = bf16 ? emu_bf16(av) * emu_bf16(bv) : (double)av * bv;
                s += p;
                g += fabs(p);
            }
            ref[(size_t)m * Nc + j] = s;
            mag[(size_t)m * Nc + j] = g;
        }
}

/* Largest |got - ref| / bound over the matrix; > 1 means out of tolerance.
 * extra_units adds a K-independent allowance (in 2^-24 per unit of mag). */
static double worst_ratio(const float *got, const double *ref, const double *mag, size_t n, int K,
                          double tol, double extra_units, size_t *where)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double bound = (tol * (K + 1) + extra_units) * 0x1p-24 * mag[i] + 1e-30;
        double r = fabs((double)got[i] - ref[i]) / bound;
        if (!(r <= worst)) {
            worst = isnan(r) ? INFINITY : r;
            *where = i;
        }
    }
    return worst;
}

static int bits_equal(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

#define ASSERT_WITHIN(got, ref, mag, n, K, tol, extra)                                      \
    do {                                                                                    \
        size_t at_ = 0;                                                                     \
        double w_ = worst_ratio(got, ref, mag, n, K, tol, extra, &at_);                     \
        if (!(w_ <= 1.0)) {                                                                 \
            TEST_FAIL_AT("%s: element %zu = %.9g vs ref %.9g: %.3g x the tolerance", #got,  \
                         at_, (double)(got)[at_], (ref)[at_], w_);                          \
            return;                                                                         \
        }                                                                                   \
    } while (0)

/* One case through one precision: forward (with bias), dx and dw (accumulating
 * onto non-zero values) and db, each against its double reference. */
static void check_case(mm_case c, int precision, double tol, double extra)
{
    size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN, no = (size_t)c.N * c.O;
    float *x = rand_buf(nx), *w = rand_buf(nw), *bias = rand_buf(c.O), *dout = rand_buf(no);
    float *out = rand_buf(no), *dx = rand_buf(nx), *dw = rand_buf(nw), *db = rand_buf(c.O);
    float *dx0 = copy_buf(dx, nx), *dw0 = copy_buf(dw, nw), *db0 = copy_buf(db, c.O);
    size_t nmax = nx > nw ? nx : nw;
    nmax = nmax > no ? nmax : no;
    double *ref = qs_malloc(nmax * sizeof *ref), *mag = qs_malloc(nmax * sizeof *mag);
    ASSERT_TRUE(x && w && bias && dout && out && dx && dw && db && dx0 && dw0 && db0 && ref &&
                mag);
    int bf = precision == MATMUL_BF16;

    matmul_forward(out, x, w, bias, c.N, c.IN, c.O, precision);
    ref_gemm(ref, mag, c.N, c.O, c.IN, (view){x, c.IN, 1}, (view){w, 1, c.IN}, NULL, bias, bf);
    ASSERT_WITHIN(out, ref, mag, no, c.IN, tol, extra);

    matmul_backward(dx, dw, db, dout, x, w, c.N, c.IN, c.O, precision);
    ref_gemm(ref, mag, c.N, c.IN, c.O, (view){dout, c.O, 1}, (view){w, c.IN, 1}, dx0, NULL, bf);
    ASSERT_WITHIN(dx, ref, mag, nx, c.O, tol, extra);
    ref_gemm(ref, mag, c.O, c.IN, c.N, (view){dout, 1, c.O}, (view){x, c.IN, 1}, dw0, NULL, bf);
    ASSERT_WITHIN(dw, ref, mag, nw, c.N, tol, extra);
    for (int o = 0; o < c.O; o++) {
        double s = db0[o], g = fabs(s);
        for (int n = 0; n < c.N; n++) {
            s += dout[(size_t)n * c.O + o];
            g += fabs(dout[(size_t)n * c.O + o]);
        }
        ref[o] = s;
        mag[o] = g;
    }
    /* db is a plain fp32 sum of dout in every precision (not a matmul operand) */
    ASSERT_WITHIN(db, ref, mag, (size_t)c.O, c.N, TOL_FP32_ACCUM, 0.0);

    float *bufs[] = {x, w, bias, dout, out, dx, dw, db, dx0, dw0, db0};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        qs_free(bufs[i]);
    qs_free(ref);
    qs_free(mag);
}

static void check_all_cases(int precision, double tol, double extra)
{
    for (size_t i = 0; i < sizeof odd_cases / sizeof odd_cases[0]; i++) {
        check_case(odd_cases[i], precision, tol, extra);
        if (test_failed_flag) {
            fprintf(stderr, "    (case N=%d IN=%d O=%d, %s)\n", odd_cases[i].N, odd_cases[i].IN,
                    odd_cases[i].O, cpu_describe());
            return;
        }
    }
}

TEST(matmul, sgemm_reference_path_within_fp32_bound)
{
    check_all_cases(MATMUL_FP32_BLAS, TOL_FP32_ACCUM, 0.0);
}

TEST(matmul, fp32_path_within_fp32_bound)
{
    check_all_cases(MATMUL_FP32, TOL_FP32_ACCUM, 0.0);
}

TEST(matmul, fp32_path_without_avx512_within_fp32_bound)
{
    cpu_limit(CPU_LEVEL_AVX2);
    check_all_cases(MATMUL_FP32, TOL_FP32_ACCUM, 0.0);
    cpu_limit(CPU_LEVEL_AVX512BF16);
}

TEST(matmul, bf16_path_matches_exact_bf16_emulation)
{
    if (cpu_level() < CPU_LEVEL_AVX512BF16)
        SKIP("CPU has no AVX512-BF16 (the fallback tests cover the emulation)");
    check_all_cases(MATMUL_BF16, TOL_BF16_ACCUM, 0.0);
}

TEST(matmul, bf16_avx512_fallback_matches_exact_bf16_emulation)
{
    if (cpu_detected_level() < CPU_LEVEL_AVX512)
        SKIP("CPU has no AVX-512");
    cpu_limit(CPU_LEVEL_AVX512);
    check_all_cases(MATMUL_BF16, TOL_BF16_ACCUM, 0.0);
    cpu_limit(CPU_LEVEL_AVX512BF16);
}

TEST(matmul, bf16_portable_fallback_matches_exact_bf16_emulation)
{
    cpu_limit(CPU_LEVEL_SCALAR);
    check_all_cases(MATMUL_BF16, TOL_BF16_ACCUM, 0.0);
    cpu_limit(CPU_LEVEL_AVX512BF16);
}

/* The bf16 path is a bf16 matmul, not an fp32 one: close to fp32 math within the
 * operand-rounding bound, and measurably different from it. */
TEST(matmul, bf16_path_is_fp32_math_up_to_operand_rounding)
{
    mm_case c = {37, 257, 11};
    size_t no = (size_t)c.N * c.O;
    float *x = rand_buf((size_t)c.N * c.IN), *w = rand_buf((size_t)c.O * c.IN);
    float *o16 = rand_buf(no), *o32 = rand_buf(no);
    double *ref = qs_malloc(no * sizeof *ref), *mag = qs_malloc(no * sizeof *mag);
    ASSERT_TRUE(x && w && o16 && o32 && ref && mag);
    matmul_forward(o16, x, w, NULL, c.N, c.IN, c.O, MATMUL_BF16);
    matmul_forward(o32, x, w, NULL, c.N, c.IN, c.O, MATMUL_FP32);
    ref_gemm(ref, mag, c.N, c.O, c.IN, (view){x, c.IN, 1}, (view){w, 1, c.IN}, NULL, NULL, 0);
    ASSERT_WITHIN(o16, ref, mag, no, c.IN, TOL_BF16_ACCUM, TOL_BF16_OPERAND_UNITS);
    double diff = 0.0;
    for (size_t i = 0; i < no; i++)
        diff += fabs((double)o16[i] - o32[i]);
    ASSERT_TRUE(diff / no > 1e-4); /* rounding 257 x 2 operands to 8 bits must show */
    qs_free(x);
    qs_free(w);
    qs_free(o16);
    qs_free(o32);
    qs_free(ref);
    qs_free(mag);
}

TEST(matmul, bf16_rounds_to_nearest_even_like_torch_denormals_to_zero)
{
    /* IN = 1, w = 1: out = bf16(x) exactly.  bf16 keeps 7 fraction bits. */
    float x[8] = {1.0f + 0x1p-8f,            /* tie -> even: 1 */
                  1.0f + 0x1p-7f + 0x1p-8f,  /* tie -> even: 1 + 2^-6 */
                  1.0f + 0x1p-8f + 0x1p-20f, /* above the tie: 1 + 2^-7 */
                  -3.0f - 0x1p-7f,           /* tie at 2..4 (ulp 2^-6) -> even: -3 */
                  65504.0f,                  /* 0x477FE000 -> 65536 (rounds up, carries) */
                  1e-39f,                    /* bf16 denormal: flushed, as vdpbf16ps reads it */
                  0x1p-126f,                 /* smallest normal stays */
                  NAN};
    float w[1] = {1.0f}, out[8];
    float want[7] = {1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -3.0f, 65536.0f, 0.0f, 0x1p-126f};
    int levels[] = {CPU_LEVEL_SCALAR, CPU_LEVEL_AVX512, CPU_LEVEL_AVX512BF16};
    for (int li = 0; li < 3; li++) {
        if (cpu_detected_level() < levels[li])
            continue;
        cpu_limit(levels[li]);
        matmul_forward(out, x, w, NULL, 8, 1, 1, MATMUL_BF16);
        cpu_limit(CPU_LEVEL_AVX512BF16);
        for (int i = 0; i < 7; i++)
            ASSERT_EQ_INT(out[i] == want[i], 1);
        ASSERT_TRUE(isnan(out[7]));
    }
}

/* Every bf16 implementation sums in vdpbf16ps's order (odd term of each pair
 * first, one fp32 rounding per term), so the AVX512-BF16 kernel, the AVX-512 and
 * portable fallbacks and the scratch-free loop (taken when memory runs out)
 * agree bit for bit, on odd K too (padded pair). */
TEST(matmul, bf16_all_implementations_agree_bitwise)
{
    enum { VARIANTS = 4 };
    int levels[VARIANTS] = {CPU_LEVEL_SCALAR, CPU_LEVEL_AVX512, CPU_LEVEL_AVX512,
                            CPU_LEVEL_AVX512BF16};
    /* K = 91: a last k block of 27 (w^T's panels convert 32 k at a time), 20
     * columns (one panel, half of it zero); 128 rows x K = 1529 (765 pairs):
     * forward on vdpbf16ps rows outer in tasks of at most 416 columns */
    mm_case cases[] = {{131, 301, 45}, {7, 520, 33}, {5, 91, 20}, {128, 1529, 450}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        mm_case c = cases[ci];
        size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN, no = (size_t)c.N * c.O;
        float *x = rand_buf(nx), *w = rand_buf(nw), *b = rand_buf(c.O), *dout = rand_buf(no);
        float *dx_init = rand_buf(nx), *dw_init = rand_buf(nw);
        float *o[VARIANTS] = {0}, *dx[VARIANTS] = {0}, *dw[VARIANTS] = {0};
        ASSERT_TRUE(x && w && b && dout && dx_init && dw_init);
        int ran = 0;
        for (int v = 0; v < VARIANTS; v++) {
            if (cpu_detected_level() < levels[v])
                continue;
            o[v] = rand_buf(no);
            dx[v] = copy_buf(dx_init, nx);
            dw[v] = copy_buf(dw_init, nw);
            ASSERT_TRUE(o[v] && dx[v] && dw[v]);
            cpu_limit(levels[v]);
            for (int op = 0; op < 3; op++) {
                if (v == 2)
                    qs_mem_fail_after(1); /* first scratch allocation fails */
                if (op == 0)
                    matmul_forward(o[v], x, w, b, c.N, c.IN, c.O, MATMUL_BF16);
                else
                    matmul_backward(op == 1 ? dx[v] : NULL, op == 2 ? dw[v] : NULL, NULL, dout,
                                    x, w, c.N, c.IN, c.O, MATMUL_BF16);
                qs_mem_fail_after(0);
            }
            cpu_limit(CPU_LEVEL_AVX512BF16);
            if (ran) {
                ASSERT_TRUE(bits_equal(o[0], o[v], no));
                ASSERT_TRUE(bits_equal(dx[0], dx[v], nx));
                ASSERT_TRUE(bits_equal(dw[0], dw[v], nw));
            }
            ran++;
        }
        for (int v = 0; v < VARIANTS; v++) {
            qs_free(o[v]);
            qs_free(dx[v]);
            qs_free(dw[v]);
        }
        float *bufs[] = {x, w, b, dout, dx_init, dw_init};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            qs_free(bufs[i]);
    }
}

/* Run forward + full backward of one case; results into out/dx/dw/db. */
static void run_linear(mm_case c, int precision, const float *x, const float *w, const float *b,
                       const float *dout, float *out, float *dx, float *dw, float *db,
                       matmul_wpack *pk, matmul_ws *ws)
{
    if (pk && !ws) {
        matmul_forward_packed(out, x, pk, b, c.N);
        matmul_backward_packed(dx, dw, db, dout, x, pk, c.N);
    } else if (pk) {
        matmul_forward_packed_ws(out, x, pk, b, c.N, ws);
        matmul_backward_packed_ws(dx, dw, db, dout, x, pk, c.N, ws);
    } else {
        matmul_forward(out, x, w, b, c.N, c.IN, c.O, precision);
        matmul_backward(dx, dw, db, dout, x, w, c.N, c.IN, c.O, precision);
    }
}

typedef struct linear_bufs {
    float *x, *w, *b, *dout, *out, *dx, *dw, *db;
} linear_bufs;

static int linear_bufs_init(linear_bufs *lb, mm_case c)
{
    size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN, no = (size_t)c.N * c.O;
    lb->x = rand_buf(nx);
    lb->w = rand_buf(nw);
    lb->b = rand_buf(c.O);
    lb->dout = rand_buf(no);
    lb->out = qs_calloc(no, sizeof(float));
    lb->dx = qs_calloc(nx, sizeof(float));
    lb->dw = qs_calloc(nw, sizeof(float));
    lb->db = qs_calloc(c.O, sizeof(float));
    return lb->x && lb->w && lb->b && lb->dout && lb->out && lb->dx && lb->dw && lb->db;
}

static void linear_bufs_free(linear_bufs *lb)
{
    float *bufs[] = {lb->x, lb->w, lb->b, lb->dout, lb->out, lb->dx, lb->dw, lb->db};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        qs_free(bufs[i]);
}

static int linear_bufs_same(const linear_bufs *a, const linear_bufs *b, mm_case c)
{
    return bits_equal(a->out, b->out, (size_t)c.N * c.O) &&
           bits_equal(a->dx, b->dx, (size_t)c.N * c.IN) &&
           bits_equal(a->dw, b->dw, (size_t)c.O * c.IN) && bits_equal(a->db, b->db, c.O);
}

TEST(matmul, results_independent_of_thread_count)
{
#ifndef _OPENMP
    SKIP("built without OpenMP");
#else
    /* many tasks, partial tiles, 2 K blocks on dw/dx; then one row block whose
     * dout (96 x 11000, 4.2 MB) is past MM_A_BIG_BYTES: dx in fewer, wider
     * column tasks (matmul_gemm.c) */
    const mm_case cases[2] = {{301, 203, 517}, {96, 390, 11000}};
    int precisions[] = {MATMUL_FP32, MATMUL_BF16};
    int saved = omp_get_max_threads();
    for (int cp = 0; cp < 4; cp++) {
        const mm_case c = cases[cp / 2];
        const int pi = cp % 2;
        linear_bufs r[3];
        for (int t = 0; t < 3; t++) {
            test_seed = 777u; /* same inputs for every thread count */
            ASSERT_TRUE(linear_bufs_init(&r[t], c));
            omp_set_num_threads(t + 1);
            run_linear(c, precisions[pi], r[t].x, r[t].w, r[t].b, r[t].dout, r[t].out, r[t].dx,
                       r[t].dw, r[t].db, NULL, NULL);
        }
        omp_set_num_threads(saved);
        ASSERT_TRUE(linear_bufs_same(&r[0], &r[1], c));
        ASSERT_TRUE(linear_bufs_same(&r[0], &r[2], c));
        for (int t = 0; t < 3; t++)
            linear_bufs_free(&r[t]);
    }
#endif
}

/* OpenBLAS at one thread (matmul_blas_threads, as every command runs): the
 * products shared out over OpenMP threads in blocks (rows, or columns when
 * there are few rows) stay in bound and give the same bits with 1, 2 and 3
 * threads; OpenBLAS set back to its own threads works again. */
TEST(matmul, sgemm_blocks_over_openmp_threads)
{
    if (openblas_get_parallel() != OPENBLAS_THREAD)
        SKIP("OpenBLAS is not its pthreads build (matmul_blas_threads leaves it as it is)");
    int saved = openblas_get_num_threads();
    matmul_blas_threads();
    ASSERT_EQ_INT(openblas_get_num_threads(), 1);
    check_all_cases(MATMUL_FP32_BLAS, TOL_FP32_ACCUM, 0.0);
#ifdef _OPENMP
    /* rows >= 2 blocks (fwd, dx: N; dw: O) and few rows with wide columns */
    mm_case cases[] = {{301, 203, 517}, {7, 613, 1031}, {3, 1031, 7}};
    int omp_saved = omp_get_max_threads();
    for (int ci = 0; ci < 3; ci++) {
        linear_bufs r[3];
        for (int t = 0; t < 3; t++) {
            test_seed = 4242u + (unsigned)ci;
            ASSERT_TRUE(linear_bufs_init(&r[t], cases[ci]));
            omp_set_num_threads(t + 1);
            run_linear(cases[ci], MATMUL_FP32_BLAS, r[t].x, r[t].w, r[t].b, r[t].dout, r[t].out,
                       r[t].dx, r[t].dw, r[t].db, NULL, NULL);
        }
        omp_set_num_threads(omp_saved);
        ASSERT_TRUE(linear_bufs_same(&r[0], &r[1], cases[ci]));
        ASSERT_TRUE(linear_bufs_same(&r[0], &r[2], cases[ci]));
        for (int t = 0; t < 3; t++)
            linear_bufs_free(&r[t]);
    }
#endif
    openblas_set_num_threads(saved > 1 ? saved : 2);
    check_all_cases(MATMUL_FP32_BLAS, TOL_FP32_ACCUM, 0.0);
    matmul_blas_threads();
    openblas_set_num_threads(saved);
}

TEST(matmul, packed_weight_equals_unpacked_and_follows_refresh_and_repack)
{
    mm_case c = {29, 70, 45};
    int precisions[] = {MATMUL_FP32, MATMUL_BF16, MATMUL_FP32_BLAS};
    matmul_ws *ws = matmul_ws_create(); /* shared by all cases, as a model would */
    ASSERT_TRUE(ws != NULL);
    for (int pi = 0; pi < 3; pi++) {
        linear_bufs a, p;
        test_seed = 99u;
        ASSERT_TRUE(linear_bufs_init(&a, c));
        test_seed = 99u;
        ASSERT_TRUE(linear_bufs_init(&p, c));
        matmul_wpack *pk = matmul_wpack_create(p.w, c.IN, c.O, precisions[pi]);
        ASSERT_TRUE(pk != NULL);
        run_linear(c, precisions[pi], a.x, a.w, a.b, a.dout, a.out, a.dx, a.dw, a.db, NULL, NULL);
        run_linear(c, precisions[pi], p.x, p.w, p.b, p.dout, p.out, p.dx, p.dw, p.db, pk,
                   pi == 1 ? NULL : ws); /* with and without a workspace */
        ASSERT_TRUE(linear_bufs_same(&a, &p, c));
        /* an optimizer step changes w in place: refresh must pick it up */
        for (size_t i = 0; i < (size_t)c.O * c.IN; i++)
            a.w[i] = p.w[i] = p.w[i] * 0.5f + 0.25f;
        matmul_wpack_refresh(pk);
        run_linear(c, precisions[pi], a.x, a.w, a.b, a.dout, a.out, a.dx, a.dw, a.db, NULL, NULL);
        run_linear(c, precisions[pi], p.x, p.w, p.b, p.dout, p.out, p.dx, p.dw, p.db, pk,
                   pi == 1 ? NULL : ws); /* with and without a workspace */
        ASSERT_TRUE(linear_bufs_same(&a, &p, c));
        /* ... and so must repack, which re-makes the forms just used at once
         * (then the forward alone: the next repack leaves dx's form stale) */
        for (int r = 0; r < 2; r++) {
            for (size_t i = 0; i < (size_t)c.O * c.IN; i++)
                a.w[i] = p.w[i] = p.w[i] * -0.75f + 0.125f;
            matmul_wpack_repack(pk);
            if (r == 0) {
                run_linear(c, precisions[pi], a.x, a.w, a.b, a.dout, a.out, a.dx, a.dw, a.db,
                           NULL, NULL);
                run_linear(c, precisions[pi], p.x, p.w, p.b, p.dout, p.out, p.dx, p.dw, p.db,
                           pk, ws);
                ASSERT_TRUE(linear_bufs_same(&a, &p, c));
            } else {
                matmul_forward(a.out, a.x, a.w, a.b, c.N, c.IN, c.O, precisions[pi]);
                matmul_forward_packed_ws(p.out, p.x, pk, p.b, c.N, ws);
                ASSERT_TRUE(memcmp(a.out, p.out, (size_t)c.N * c.O * sizeof *a.out) == 0);
            }
        }
        for (size_t i = 0; i < (size_t)c.O * c.IN; i++)   /* dx's stale form re-made on use */
            a.w[i] = p.w[i] = p.w[i] * 1.5f - 0.0625f;
        matmul_wpack_repack(pk);
        run_linear(c, precisions[pi], a.x, a.w, a.b, a.dout, a.out, a.dx, a.dw, a.db, NULL, NULL);
        run_linear(c, precisions[pi], p.x, p.w, p.b, p.dout, p.out, p.dx, p.dw, p.db, pk, ws);
        ASSERT_TRUE(linear_bufs_same(&a, &p, c));
        /* both forms packed (bf16 always; fp32 when our kernel, not sgemm, runs) */
        int packs = precisions[pi] == MATMUL_BF16 ||
                    (precisions[pi] == MATMUL_FP32 && cpu_level() >= CPU_LEVEL_AVX512);
        ASSERT_TRUE(!packs || matmul_wpack_bytes(pk) >= 2 * (size_t)c.O * c.IN * 2);
        matmul_wpack_destroy(pk);
        linear_bufs_free(&a);
        linear_bufs_free(&p);
    }
    ASSERT_TRUE(matmul_ws_bytes(ws) > 0);
    matmul_ws_destroy(ws);
    ASSERT_TRUE(matmul_wpack_create(NULL, 3, 3, MATMUL_FP32) == NULL);
    matmul_wpack_destroy(NULL);
    matmul_ws_destroy(NULL);
}

/* Linears sharing an input (q/k/v, gate/up) in one call, x converted once:
 * the same bits as one call each, with and without a workspace, for shapes
 * off the tile/task grid and packs of another input width (run one by one). */
TEST(matmul, packed_multi_forward_equals_separate_calls_bitwise)
{
    enum { NL = 3 };
    const int N = 131, IN = 301, O[NL] = {45, 517, 33};
    int precisions[] = {MATMUL_FP32, MATMUL_BF16, MATMUL_FP32_BLAS};
    matmul_ws *ws = matmul_ws_create();
    ASSERT_TRUE(ws != NULL);
    for (int pi = 0; pi < 3; pi++) {
        for (int wide = 0; wide < 2; wide++) { /* wide: pk[2] reads IN + 8 columns */
            float *x = rand_buf((size_t)N * (IN + 8)), *w[NL], *b[NL], *sep[NL], *one[NL];
            matmul_wpack *pk[NL];
            ASSERT_TRUE(x != NULL);
            for (int i = 0; i < NL; i++) {
                int in = wide && i == 2 ? IN + 8 : IN;
                w[i] = rand_buf((size_t)O[i] * in);
                b[i] = i == 1 ? NULL : rand_buf((size_t)O[i]);
                sep[i] = rand_buf((size_t)N * O[i]);
                one[i] = rand_buf((size_t)N * O[i]);
                pk[i] = w[i] ? matmul_wpack_create(w[i], in, O[i], precisions[pi]) : NULL;
                ASSERT_TRUE(w[i] && sep[i] && one[i] && pk[i]);
                matmul_forward_packed_ws(sep[i], x, pk[i], b[i], N, NULL);
            }
            for (int use_ws = 0; use_ws < 2; use_ws++) {
                matmul_forward_packed_multi_ws(one, x, pk, (const float *const *)b, NL, N,
                                               use_ws ? ws : NULL, NULL);
                for (int i = 0; i < NL; i++)
                    ASSERT_TRUE(bits_equal(sep[i], one[i], (size_t)N * O[i]));
            }
            for (int i = 0; i < NL; i++) {
                matmul_wpack_destroy(pk[i]);
                qs_free(w[i]);
                qs_free(b[i]);
                qs_free(sep[i]);
                qs_free(one[i]);
            }
            qs_free(x);
        }
    }
    matmul_ws_destroy(ws);
}

typedef struct epi_sum {
    const float *a, *b;
    float *sum;
    int *visits, O;
} epi_sum;

static void epi_sum_block(void *ctx, int row0, int rows, int col0, int cols)
{
    epi_sum *e = ctx;
    for (int r = row0; r < row0 + rows; r++)
        for (int c = col0; c < col0 + cols; c++) {
            size_t i = (size_t)r * e->O + c;
            e->sum[i] = e->a[i] + e->b[i];
            e->visits[i]++;
        }
}

/* The epilogue sees every output element once, after all outputs are final. */
TEST(matmul, multi_forward_epilogue_visits_each_final_element_once)
{
    const int N = 203, IN = 97, O = 1100;
    int precisions[] = {MATMUL_FP32, MATMUL_BF16, MATMUL_FP32_BLAS};
    size_t no = (size_t)N * O;
    float *x = rand_buf((size_t)N * IN), *w0 = rand_buf((size_t)O * IN);
    float *w1 = rand_buf((size_t)O * IN), *o0 = rand_buf(no), *o1 = rand_buf(no);
    float *s0 = rand_buf(no), *s1 = rand_buf(no), *sum = rand_buf(no);
    int *visits = qs_calloc(no, sizeof *visits);
    ASSERT_TRUE(x && w0 && w1 && o0 && o1 && s0 && s1 && sum && visits);
    for (int pi = 0; pi < 3; pi++) {
        matmul_wpack *pk[2] = {matmul_wpack_create(w0, IN, O, precisions[pi]),
                               matmul_wpack_create(w1, IN, O, precisions[pi])};
        ASSERT_TRUE(pk[0] && pk[1]);
        matmul_forward_packed_ws(s0, x, pk[0], NULL, N, NULL);
        matmul_forward_packed_ws(s1, x, pk[1], NULL, N, NULL);
        memset(visits, 0, no * sizeof *visits);
        epi_sum e = {o0, o1, sum, visits, O};
        matmul_epilogue ep = {epi_sum_block, &e};
        float *outs[2] = {o0, o1};
        matmul_forward_packed_multi_ws(outs, x, pk, NULL, 2, N, NULL, &ep);
        ASSERT_TRUE(bits_equal(o0, s0, no) && bits_equal(o1, s1, no));
        for (size_t i = 0; i < no; i++) {
            ASSERT_EQ_INT(visits[i], 1);
            ASSERT_TRUE(sum[i] == s0[i] + s1[i]);
        }
        matmul_wpack_destroy(pk[0]);
        matmul_wpack_destroy(pk[1]);
    }
    float *bufs[] = {x, w0, w1, o0, o1, s0, s1, sum};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        qs_free(bufs[i]);
    qs_free(visits);
}

/* NULL gradients are skipped; the others accumulate: two calls add twice. */
TEST(matmul, backward_null_outputs_skipped_and_gradients_accumulate)
{
    mm_case c = {17, 23, 19};
    int precisions[] = {MATMUL_FP32, MATMUL_BF16, MATMUL_FP32_BLAS};
    for (int pi = 0; pi < 3; pi++) {
        linear_bufs once, twice;
        test_seed = 5u;
        ASSERT_TRUE(linear_bufs_init(&once, c));
        test_seed = 5u;
        ASSERT_TRUE(linear_bufs_init(&twice, c));
        int p = precisions[pi];
        matmul_backward(once.dx, NULL, NULL, once.dout, once.x, once.w, c.N, c.IN, c.O, p);
        matmul_backward(NULL, once.dw, NULL, once.dout, once.x, once.w, c.N, c.IN, c.O, p);
        matmul_backward(NULL, NULL, once.db, once.dout, once.x, once.w, c.N, c.IN, c.O, p);
        matmul_backward(NULL, NULL, NULL, once.dout, once.x, once.w, c.N, c.IN, c.O, p);
        for (int k = 0; k < 2; k++)
            matmul_backward(twice.dx, twice.dw, twice.db, twice.dout, twice.x, twice.w, c.N,
                            c.IN, c.O, p);
        /* from zero one call gives g; a second call adds g onto it */
        size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN;
        double *ref = qs_malloc(nw * sizeof *ref), *mag = qs_malloc(nw * sizeof *mag);
        ASSERT_TRUE(ref && mag && nw >= nx);
        int bf = p == MATMUL_BF16;
        double tol = bf ? TOL_BF16_ACCUM : TOL_FP32_ACCUM;
        ref_gemm(ref, mag, c.N, c.IN, c.O, (view){once.dout, c.O, 1}, (view){once.w, c.IN, 1},
                 once.dx, NULL, bf);
        ASSERT_WITHIN(twice.dx, ref, mag, nx, c.O, tol, 0.0);
        ref_gemm(ref, mag, c.O, c.IN, c.N, (view){once.dout, 1, c.O}, (view){once.x, c.IN, 1},
                 once.dw, NULL, bf);
        ASSERT_WITHIN(twice.dw, ref, mag, nw, c.N, tol, 0.0);
        for (int o = 0; o < c.O; o++) {
            ref[o] = 2.0 * once.db[o];
            ASSERT_NEAR(twice.db[o], ref[o], 1e-5);
            ASSERT_TRUE(once.db[o] != 0.0f);
        }
        for (size_t i = 0; i < nx; i++)
            ASSERT_TRUE(once.dx[i] != 0.0f);
        qs_free(ref);
        qs_free(mag);
        linear_bufs_free(&once);
        linear_bufs_free(&twice);
    }
}

/* L = sum(g * (x w^T + b)): central differences of L in double against the
 * fp32 gradients dx = g w, dw = g^T x, db = colsum g. */
TEST(matmul, backward_matches_finite_differences)
{
    mm_case c = {3, 5, 4};
    linear_bufs lb;
    ASSERT_TRUE(linear_bufs_init(&lb, c));
    matmul_backward(lb.dx, lb.dw, lb.db, lb.dout, lb.x, lb.w, c.N, c.IN, c.O, MATMUL_FP32);
    const double h = 1e-3;
    float *params[3] = {lb.x, lb.w, lb.b};
    float *grads[3] = {lb.dx, lb.dw, lb.db};
    int sizes[3] = {c.N * c.IN, c.O * c.IN, c.O};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < sizes[t]; i++) {
            double lp[2];
            float keep = params[t][i];
            for (int s = 0; s < 2; s++) {
                params[t][i] = (float)(keep + (s ? -h : h));
                double loss = 0.0;
                for (int n = 0; n < c.N; n++)
                    for (int o = 0; o < c.O; o++) {
                        double y = lb.b[o];
                        for (int k = 0; k < c.IN; k++)
                            y += (double)lb.x[n * c.IN + k] * lb.w[o * c.IN + k];
                        loss += lb.dout[n * c.O + o] * y;
                    }
                lp[s] = loss;
            }
            double step = (double)(float)(keep + h) - (double)(float)(keep - h);
            params[t][i] = keep;
            ASSERT_NEAR(grads[t][i], (lp[0] - lp[1]) / step, 1e-3);
        }
    linear_bufs_free(&lb);
}

TEST(matmul, empty_inner_dimension_gives_bias_or_zero)
{
    float out[6] = {9, 9, 9, 9, 9, 9}, bias[3] = {1, 2, 3}, dummy[1] = {0};
    int precisions[] = {MATMUL_FP32, MATMUL_BF16, MATMUL_FP32_BLAS};
    for (int pi = 0; pi < 3; pi++) {
        matmul_forward(out, dummy, dummy, bias, 2, 0, 3, precisions[pi]);
        ASSERT_TRUE(out[0] == 1 && out[4] == 2 && out[5] == 3);
        matmul_forward(out, dummy, dummy, NULL, 2, 0, 3, precisions[pi]);
        ASSERT_TRUE(out[0] == 0 && out[5] == 0);
    }
}

TEST(matmul, fp32_survives_scratch_allocation_failure)
{
    mm_case c = {40, 33, 50};
    check_case(c, MATMUL_FP32, TOL_FP32_ACCUM, 0.0); /* warm: same path without failure */
    qs_mem_fail_after(1);
    linear_bufs lb;
    qs_mem_fail_after(0);
    ASSERT_TRUE(linear_bufs_init(&lb, c));
    size_t no = (size_t)c.N * c.O;
    double *ref = qs_malloc(no * sizeof *ref), *mag = qs_malloc(no * sizeof *mag);
    ASSERT_TRUE(ref && mag);
    qs_mem_fail_after(1);
    matmul_forward(lb.out, lb.x, lb.w, lb.b, c.N, c.IN, c.O, MATMUL_FP32);
    qs_mem_fail_after(0);
    ref_gemm(ref, mag, c.N, c.O, c.IN, (view){lb.x, c.IN, 1}, (view){lb.w, 1, c.IN}, NULL, lb.b,
             0);
    ASSERT_WITHIN(lb.out, ref, mag, no, c.IN, TOL_FP32_ACCUM, 0.0);
    qs_free(ref);
    qs_free(mag);
    linear_bufs_free(&lb);
}

/* matmul_ws_reuse_x: dW of a second Linear on the same x takes the first one's
 * pack (the bits of a fresh pack); changed values under the promise would show
 * the stale pack, which proves the reuse; any other use of the workspace's B
 * pack in between (an unpacked dx) or reuse off packs again. */
TEST(matmul, ws_reuse_x_takes_the_previous_dw_pack_of_the_same_x)
{
    const int N = 70, IN = 45, O1 = 29, O2 = 33;
    const int precisions[] = {MATMUL_FP32, MATMUL_BF16};
    for (int pi = 0; pi < 2; pi++) {
        int prec = precisions[pi];
        test_seed = 4242u;
        float *x = rand_buf((size_t)N * IN), *w1 = rand_buf((size_t)O1 * IN);
        float *w2 = rand_buf((size_t)O2 * IN), *d1 = rand_buf((size_t)N * O1);
        float *d2 = rand_buf((size_t)N * O2), *x0 = copy_buf(x, (size_t)N * IN);
        float *dw1 = qs_calloc((size_t)O1 * IN, sizeof *dw1);
        float *dw2 = qs_calloc((size_t)O2 * IN, sizeof *dw2);
        float *ref = qs_calloc((size_t)O2 * IN, sizeof *ref);
        float *dx = qs_calloc((size_t)N * IN, sizeof *dx);
        matmul_wpack *p1 = matmul_wpack_create(w1, IN, O1, prec);
        matmul_wpack *p2 = matmul_wpack_create(w2, IN, O2, prec);
        matmul_ws *ws = matmul_ws_create();
        ASSERT_TRUE(x && w1 && w2 && d1 && d2 && x0 && dw1 && dw2 && ref && dx && p1 && p2 && ws);
        matmul_backward(NULL, ref, NULL, d2, x, w2, N, IN, O2, prec);
        /* the same x: the reused pack gives the fresh pack's bits */
        matmul_backward_packed_ws(dx, dw1, NULL, d1, x, p1, N, ws);
        matmul_ws_reuse_x(ws, 1);
        matmul_backward_packed_ws(dx, dw2, NULL, d2, x, p2, N, ws);
        ASSERT_TRUE(bits_equal(dw2, ref, (size_t)O2 * IN));
        /* x changed against the promise: still the first x's pack (where the
         * product packs at all: fp32 runs on sgemm without AVX-512) */
        for (size_t i = 0; i < (size_t)N * IN; i++)
            x[i] = -x[i] * 0.5f;
        memset(dw2, 0, (size_t)O2 * IN * sizeof *dw2);
        matmul_backward_packed_ws(dx, dw2, NULL, d2, x, p2, N, ws);
        ASSERT_TRUE(bits_equal(dw2, ref, (size_t)O2 * IN) ==
                    (prec == MATMUL_BF16 || cpu_level() >= CPU_LEVEL_AVX512));
        /* reuse off: packed again from the new values */
        matmul_ws_reuse_x(ws, 0);
        memset(dw2, 0, (size_t)O2 * IN * sizeof *dw2);
        memset(ref, 0, (size_t)O2 * IN * sizeof *ref);
        matmul_backward(NULL, ref, NULL, d2, x, w2, N, IN, O2, prec);
        matmul_backward_packed_ws(dx, dw2, NULL, d2, x, p2, N, ws);
        ASSERT_TRUE(bits_equal(dw2, ref, (size_t)O2 * IN));
        /* a backward call in between without dW (here an unpacked dx, which
         * also takes the B pack): packed again */
        matmul_ws_reuse_x(ws, 1);
        memcpy(x, x0, (size_t)N * IN * sizeof *x);
        matmul_backward_ws(dx, NULL, NULL, d1, x, w1, N, IN, O1, prec, ws);
        memset(dw2, 0, (size_t)O2 * IN * sizeof *dw2);
        memset(ref, 0, (size_t)O2 * IN * sizeof *ref);
        matmul_backward(NULL, ref, NULL, d2, x, w2, N, IN, O2, prec);
        matmul_backward_packed_ws(dx, dw2, NULL, d2, x, p2, N, ws);
        ASSERT_TRUE(bits_equal(dw2, ref, (size_t)O2 * IN));
        matmul_ws_destroy(ws);
        matmul_wpack_destroy(p1);
        matmul_wpack_destroy(p2);
        float *bufs[] = {x, w1, w2, d1, d2, x0, dw1, dw2, ref, dx};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            qs_free(bufs[i]);
    }
}
