/* test_matmul_bf16fma.c: the two micro-kernels behind the AVX512-BF16 formats,
 * vdpbf16ps and the FMA kernel on widened pairs with FTZ/DAZ
 * (src/kernels/matmul_impl.h, qs/matmul_test.h), give the same bits on every
 * product and path: forward (bias), dX and dW (accumulating), packed weights,
 * the shared-x multi forward and the dout row pairs, on shapes with row/column
 * tails, odd K and several K blocks, for values of every magnitude, products
 * and sums in and near the fp32 denormal range, denormal initial values,
 * infinities and NaNs (NaN payloads included).  Also: for each kernel the bits
 * depend neither on the thread count nor on how many rows are multiplied
 * together (the task split follows both).
 */
#include <string.h>

#include "qs/cpu.h"
#include "qs/matmul.h"
#include "qs/matmul_test.h"
#include "qs/mem.h"
#include "test.h"

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct fma_case {
    int N, IN, O;
} fma_case;

/* N rows, IN, O: tails of the 12 x 32 tile, odd K, K over several 128/256
 * blocks, a single row, a batch of 64 (the 1B shapes' N = 64, few rows). */
static const fma_case fma_cases[] = {
    {1, 3, 1}, {13, 301, 45}, {64, 97, 160}, {7, 520, 33}, {37, 129, 515}, {100, 64, 40},
};

enum {
    VAL_MODERATE, /* |v| in [2^-8, 2^8] */
    VAL_WIDE,     /* exponents -60 .. 60: products overflow and vanish */
    VAL_TINY,     /* |v| ~ 2^-63: products and sums around 2^-126 */
    VAL_SPECIAL,  /* moderate, with zeros, infinities and NaNs sprinkled in */
    VAL_KINDS
};

static unsigned fma_seed = 99u;

static unsigned fma_next(void)
{
    fma_seed = fma_seed * 1664525u + 1013904223u;
    return fma_seed >> 8;
}

static float fma_value(int kind)
{
    unsigned r = fma_next();
    float sign = (r & 1) ? -1.0f : 1.0f;
    float m = 1.0f + (float)((r >> 1) & 0xFFFF) / 65536.0f; /* 1 .. 2 */
    int e;
    switch (kind) {
    case VAL_WIDE:
        e = (int)(fma_next() % 121) - 60;
        break;
    case VAL_TINY:
        e = -63 + (int)(fma_next() % 9) - 4;
        break;
    default:
        e = (int)(fma_next() % 17) - 8;
        break;
    }
    if (kind == VAL_SPECIAL) {
        unsigned s = fma_next() % 64;
        if (s == 0)
            return 0.0f * sign;
        if (s == 1)
            return INFINITY * sign;
        if (s == 2)
            return NAN;
    }
    return sign * ldexpf(m, e);
}

static float *fma_buf(size_t n, int kind)
{
    float *p = qs_malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; p && i < n; i++)
        p[i] = fma_value(kind);
    return p;
}

/* Initial values of dx/dw/bias: for VAL_TINY fp32 denormals (DAZ reads them as 0). */
static float *fma_init_buf(size_t n, int kind)
{
    float *p = fma_buf(n, kind == VAL_TINY ? VAL_MODERATE : kind);
    for (size_t i = 0; p && kind == VAL_TINY && i < n; i++)
        p[i] = ldexpf(p[i], -130); /* 2^-138 .. 2^-122: mostly denormal */
    return p;
}

typedef struct fma_out {
    float *out, *outm, *dx, *dw, *dx2, *dw2;
} fma_out;

/* Every bf16 path of one case, results into o (dx/dw accumulate onto init). */
static int fma_run_all(fma_case c, const float *x, const float *w, const float *b,
                       const float *dout, const float *dx0, const float *dw0, fma_out *o)
{
    size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN, no = (size_t)c.N * c.O;
    memcpy(o->dx, dx0, nx * sizeof *o->dx);
    memcpy(o->dw, dw0, nw * sizeof *o->dw);
    memcpy(o->dx2, dx0, nx * sizeof *o->dx2);
    memcpy(o->dw2, dw0, nw * sizeof *o->dw2);
    matmul_ws *ws = matmul_ws_create();
    matmul_wpack *pk = matmul_wpack_create(w, c.IN, c.O, MATMUL_BF16);
    matmul_wpack *pk2 = matmul_wpack_create(w, c.IN, c.O, MATMUL_BF16);
    if (!ws || !pk || !pk2)
        return -1;
    matmul_forward(o->out, x, w, b, c.N, c.IN, c.O, MATMUL_BF16);
    matmul_backward(o->dx, o->dw, NULL, dout, x, w, c.N, c.IN, c.O, MATMUL_BF16);
    /* packed weights, shared x (two Linears in one region), dout in row pairs */
    float *outs[2] = {o->outm, o->outm + no};
    matmul_wpack *pks[2] = {pk, pk2};
    const float *biases[2] = {b, NULL};
    matmul_forward_packed_multi_ws(outs, x, pks, biases, 2, c.N, ws, NULL);
    if (matmul_dout_begin(ws, pk, x, c.N) != 1)
        return -1;
    for (int n0 = 0; n0 < c.N; n0 += 2)
        matmul_dout_store(ws, n0, dout + (size_t)n0 * c.O);
    matmul_dout_backward(o->dx2, o->dw2, pk, c.N, ws);
    matmul_wpack_destroy(pk);
    matmul_wpack_destroy(pk2);
    matmul_ws_destroy(ws);
    return 0;
}

static int fma_out_alloc(fma_out *o, fma_case c)
{
    size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN, no = (size_t)c.N * c.O;
    o->out = qs_malloc(no * sizeof(float));
    o->outm = qs_malloc(2 * no * sizeof(float));
    o->dx = qs_malloc(nx * sizeof(float));
    o->dx2 = qs_malloc(nx * sizeof(float));
    o->dw = qs_malloc(nw * sizeof(float));
    o->dw2 = qs_malloc(nw * sizeof(float));
    return o->out && o->outm && o->dx && o->dx2 && o->dw && o->dw2;
}

static void fma_out_free(fma_out *o)
{
    float *bufs[] = {o->out, o->outm, o->dx, o->dx2, o->dw, o->dw2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        qs_free(bufs[i]);
}

/* Bit for bit, NaN payloads and signed zeros included. */
static int fma_same(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

TEST(matmul_bf16fma, fma_kernel_equals_vdpbf16ps_bitwise_on_every_path)
{
    if (cpu_level() < CPU_LEVEL_AVX512BF16)
        SKIP("CPU has no AVX512-BF16");
    long checked = 0;
    for (int kind = 0; kind < VAL_KINDS; kind++)
        for (size_t ci = 0; ci < sizeof fma_cases / sizeof fma_cases[0]; ci++) {
            fma_case c = fma_cases[ci];
            size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN, no = (size_t)c.N * c.O;
            float *x = fma_buf(nx, kind), *w = fma_buf(nw, kind), *dout = fma_buf(no, kind);
            float *b = fma_init_buf(c.O, kind), *dx0 = fma_init_buf(nx, kind);
            float *dw0 = fma_init_buf(nw, kind);
            fma_out o[2];
            ASSERT_TRUE(x && w && dout && b && dx0 && dw0);
            ASSERT_TRUE(fma_out_alloc(&o[0], c) && fma_out_alloc(&o[1], c));
            for (int v = 0; v < 2; v++) {
                mm_bf16_fma_force_impl(v);
                int rc = fma_run_all(c, x, w, b, dout, dx0, dw0, &o[v]);
                mm_bf16_fma_force_impl(-1);
                ASSERT_EQ_INT(rc, 0);
            }
            if (!fma_same(o[0].out, o[1].out, no) || !fma_same(o[0].outm, o[1].outm, 2 * no) ||
                !fma_same(o[0].dx, o[1].dx, nx) || !fma_same(o[0].dw, o[1].dw, nw) ||
                !fma_same(o[0].dx2, o[1].dx2, nx) || !fma_same(o[0].dw2, o[1].dw2, nw)) {
                TEST_FAIL_AT("kernels differ: values %d, N=%d IN=%d O=%d", kind, c.N, c.IN, c.O);
                return;
            }
            /* the paths agree with each other too (same bits whatever the route) */
            ASSERT_TRUE(fma_same(o[1].out, o[1].outm, no));
            ASSERT_TRUE(fma_same(o[1].dx, o[1].dx2, nx) && fma_same(o[1].dw, o[1].dw2, nw));
            checked += (long)(3 * no + 2 * nx + 2 * nw);
            for (int v = 0; v < 2; v++)
                fma_out_free(&o[v]);
            float *bufs[] = {x, w, dout, b, dx0, dw0};
            for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
                qs_free(bufs[i]);
        }
    ASSERT_TRUE(checked > 100000);
}

/* The tiny values must really reach the denormal range, else the test above
 * proves nothing there: some results are flushed (0 with FTZ, and also with
 * vdpbf16ps) where exact math gives a nonzero below 2^-126. */
TEST(matmul_bf16fma, tiny_values_reach_the_denormal_range)
{
    if (cpu_level() < CPU_LEVEL_AVX512BF16)
        SKIP("CPU has no AVX512-BF16");
    fma_case c = {64, 97, 160};
    size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN, no = (size_t)c.N * c.O;
    float *x = fma_buf(nx, VAL_TINY), *w = fma_buf(nw, VAL_TINY);
    float *out = qs_malloc(no * sizeof *out);
    ASSERT_TRUE(x && w && out);
    int near = 0;
    for (int v = 0; v < 2; v++) {
        mm_bf16_fma_force_impl(v);
        matmul_forward(out, x, w, NULL, c.N, c.IN, c.O, MATMUL_BF16);
        mm_bf16_fma_force_impl(-1);
        near = 0;
        for (size_t i = 0; i < no; i++) {
            ASSERT_TRUE(out[i] == 0.0f || fabsf(out[i]) >= 0x1p-126f); /* flushed, never denormal */
            near += out[i] != 0.0f && fabsf(out[i]) < 0x1p-118f;
        }
        ASSERT_TRUE(near > 10);
    }
    qs_free(x);
    qs_free(w);
    qs_free(out);
}

#ifdef _OPENMP
/* Forward, dX and dW of one case with t threads, for one precision and kernel. */
static void fma_threads_run(fma_case c, int precision, int t, const float *x, const float *w,
                            const float *dout, float *out, float *dx, float *dw)
{
    int saved = omp_get_max_threads();
    omp_set_num_threads(t);
    matmul_forward(out, x, w, NULL, c.N, c.IN, c.O, precision);
    memset(dx, 0, (size_t)c.N * c.IN * sizeof *dx);
    memset(dw, 0, (size_t)c.O * c.IN * sizeof *dw);
    matmul_backward(dx, dw, NULL, dout, x, w, c.N, c.IN, c.O, precision);
    omp_set_num_threads(saved);
}
#endif

/* The task split follows the thread count and the shape (few rows: columns
 * only); the bits follow neither.  1 to 4 threads, shapes where the split
 * changes: 64 rows x many columns, many rows x few columns, both wide. */
TEST(matmul_bf16fma, bits_do_not_depend_on_thread_count_for_either_kernel)
{
#ifndef _OPENMP
    SKIP("built without OpenMP");
#else
    fma_case cases[] = {{64, 160, 1100}, {400, 70, 40}, {200, 300, 700}};
    int variants = cpu_level() >= CPU_LEVEL_AVX512BF16 ? 4 : 2; /* fp32, bf16 (x2 kernels) */
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        fma_case c = cases[ci];
        size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN, no = (size_t)c.N * c.O;
        float *x = fma_buf(nx, VAL_MODERATE), *w = fma_buf(nw, VAL_MODERATE);
        float *dout = fma_buf(no, VAL_MODERATE);
        float *out[2], *dx[2], *dw[2];
        for (int i = 0; i < 2; i++) {
            out[i] = qs_malloc(no * sizeof(float));
            dx[i] = qs_malloc(nx * sizeof(float));
            dw[i] = qs_malloc(nw * sizeof(float));
            ASSERT_TRUE(out[i] && dx[i] && dw[i]);
        }
        ASSERT_TRUE(x && w && dout);
        for (int v = 0; v < variants; v++) {
            int precision = v == 0 ? MATMUL_FP32 : MATMUL_BF16;
            mm_bf16_fma_force_impl(v >= 2 ? v - 2 : -1);
            fma_threads_run(c, precision, 1, x, w, dout, out[0], dx[0], dw[0]);
            for (int t = 2; t <= 4; t++) {
                fma_threads_run(c, precision, t, x, w, dout, out[1], dx[1], dw[1]);
                if (memcmp(out[0], out[1], no * sizeof(float)) ||
                    memcmp(dx[0], dx[1], nx * sizeof(float)) ||
                    memcmp(dw[0], dw[1], nw * sizeof(float))) {
                    mm_bf16_fma_force_impl(-1);
                    TEST_FAIL_AT("variant %d, %d threads, N=%d IN=%d O=%d", v, t, c.N, c.IN, c.O);
                    return;
                }
            }
            mm_bf16_fma_force_impl(-1);
        }
        for (int i = 0; i < 2; i++) {
            qs_free(out[i]);
            qs_free(dx[i]);
            qs_free(dw[i]);
        }
        qs_free(x);
        qs_free(w);
        qs_free(dout);
    }
#endif
}

/* A row's result does not depend on the rows multiplied with it (partial row
 * tiles, the task split, A read in place or packed): forward of 64 rows equals
 * forward of each row alone and of rows 5..11 alone, bit for bit.  Eval batches
 * several items into one forward on this promise.  IN = 1536 and 6144-like
 * strides (multiples of 4 KB) take the packed-A route, 97 the in-place one. */
TEST(matmul_bf16fma, rows_do_not_depend_on_the_rest_of_the_batch)
{
    int ins[] = {97, 1024};
    int variants = cpu_level() >= CPU_LEVEL_AVX512BF16 ? 4 : 2;
    for (int ii = 0; ii < 2; ii++) {
        fma_case c = {64, ins[ii], 70};
        size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN, no = (size_t)c.N * c.O;
        float *x = fma_buf(nx, VAL_MODERATE), *w = fma_buf(nw, VAL_MODERATE);
        float *all = qs_malloc(no * sizeof *all), *part = qs_malloc(no * sizeof *part);
        ASSERT_TRUE(x && w && all && part);
        for (int v = 0; v < variants; v++) {
            int precision = v == 0 ? MATMUL_FP32 : MATMUL_BF16;
            mm_bf16_fma_force_impl(v >= 2 ? v - 2 : -1);
            matmul_forward(all, x, w, NULL, c.N, c.IN, c.O, precision);
            int same = 1;
            for (int n = 0; n < c.N; n++) {
                matmul_forward(part, x + (size_t)n * c.IN, w, NULL, 1, c.IN, c.O, precision);
                same &= !memcmp(part, all + (size_t)n * c.O, (size_t)c.O * sizeof *part);
            }
            matmul_forward(part, x + (size_t)5 * c.IN, w, NULL, 7, c.IN, c.O, precision);
            same &= !memcmp(part, all + (size_t)5 * c.O, (size_t)7 * c.O * sizeof *part);
            mm_bf16_fma_force_impl(-1);
            if (!same) {
                TEST_FAIL_AT("variant %d, IN=%d: a row changed with its batch", v, c.IN);
                return;
            }
        }
        qs_free(x);
        qs_free(w);
        qs_free(all);
        qs_free(part);
    }
}
