/* test_matmul_dout.c: a Linear's backward with dout handed over two rows at a
 * time (matmul_dout_*, the lm_head's dlogits) gives the same bits as the same
 * dout as an fp32 matrix through matmul_backward_packed_ws; the path is on only
 * in bf16 on the AVX512-BF16 kernel, and the workspace stays within its estimate.
 * Also the store of one pair row into panels (mm_pairs_scatter_avx512bf16_impl,
 * behind these packs and the dW packs of x) against a scalar reference. */
#include <string.h>

#include "qs/cpu.h"
#include "qs/matmul.h"
#include "qs/matmul_test.h"
#include "qs/mem.h"
#include "test.h"

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct dout_case {
    int N, IN, O;
} dout_case;

static float *dout_rand(size_t n, unsigned *seed)
{
    float *p = qs_malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; p && i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = (float)((*seed >> 8) * (2.0 / 16777216.0) - 1.0);
    }
    return p;
}

/* Pairs are stored last first, from an OpenMP loop, so neither order nor
 * thread matters; the shared ws carries NaNs from before (see below). */
static void dout_case_check(dout_case c, matmul_ws *ws)
{
    unsigned seed = 4242u + (unsigned)c.N;
    size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN, no = (size_t)c.N * c.O;
    float *x = dout_rand(nx, &seed), *w = dout_rand(nw, &seed), *dout = dout_rand(no, &seed);
    float *dx_a = dout_rand(nx, &seed), *dw_a = dout_rand(nw, &seed);
    float *dx_b = qs_malloc(nx * sizeof *dx_b), *dw_b = qs_malloc(nw * sizeof *dw_b);
    ASSERT_TRUE(x && w && dout && dx_a && dw_a && dx_b && dw_b);
    memcpy(dx_b, dx_a, nx * sizeof *dx_b);
    memcpy(dw_b, dw_a, nw * sizeof *dw_b);
    matmul_wpack *pk = matmul_wpack_create(w, c.IN, c.O, MATMUL_BF16);
    ASSERT_TRUE(pk != NULL);
    matmul_backward_packed_ws(dx_a, dw_a, NULL, dout, x, pk, c.N, ws);

    ASSERT_EQ_INT(matmul_dout_begin(ws, pk, x, c.N), 1);
    int n_pairs = (c.N + 1) / 2;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
    for (int i = 0; i < n_pairs; i++) {
        int n0 = 2 * (n_pairs - 1 - i);
        matmul_dout_store(ws, n0, dout + (size_t)n0 * c.O);
    }
    matmul_dout_backward(dx_b, dw_b, pk, c.N, ws);
    ASSERT_EQ_INT(memcmp(dx_a, dx_b, nx * sizeof *dx_a), 0);
    ASSERT_EQ_INT(memcmp(dw_a, dw_b, nw * sizeof *dw_a), 0);

    /* dx only, then dw only: each the same bits again */
    memcpy(dx_b, dx_a, nx * sizeof *dx_b);
    ASSERT_EQ_INT(matmul_dout_begin(ws, pk, x, c.N), 1);
    for (int n0 = 0; n0 < c.N; n0 += 2)
        matmul_dout_store(ws, n0, dout + (size_t)n0 * c.O);
    matmul_backward_packed_ws(dx_a, NULL, NULL, dout, x, pk, c.N, NULL);
    matmul_dout_backward(dx_b, NULL, pk, c.N, ws);
    ASSERT_EQ_INT(memcmp(dx_a, dx_b, nx * sizeof *dx_a), 0);
    ASSERT_EQ_INT(memcmp(dw_a, dw_b, nw * sizeof *dw_a), 0); /* dw untouched */

    matmul_wpack_destroy(pk);
    float *bufs[] = {x, w, dout, dx_a, dw_a, dx_b, dw_b};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        qs_free(bufs[i]);
}

TEST(matmul_dout, row_pairs_give_the_same_bits_as_the_fp32_dout)
{
    if (cpu_level() < CPU_LEVEL_AVX512BF16)
        SKIP("CPU has no AVX512-BF16 (the path is off: see the next test)");
    /* largest first; odd N (a lone last row), O odd, O past the 768-column
     * conversion chunk, O off the 12-column panel grid, N = 1 */
    static const dout_case cases[] = {
        {5, 33, 1037}, {131, 64, 31}, {96, 29, 65}, {13, 31, 37}, {11, 19, 515}, {1, 7, 5},
    };
    matmul_ws *ws = matmul_ws_create();
    ASSERT_TRUE(ws != NULL);
    /* fill both dout forms with NaN, larger than any case: padding a case
     * reads but does not write (an odd O's last pair) would show as NaN */
    enum { PN = 132, PIN = 8, PO = 1100 };
    float *pw = qs_calloc((size_t)PO * PIN, sizeof *pw), *px = qs_calloc((size_t)PN * PIN, 4);
    float *nan_rows = qs_malloc(2 * PO * sizeof *nan_rows);
    ASSERT_TRUE(pw && px && nan_rows);
    memset(nan_rows, 0xff, 2 * PO * sizeof *nan_rows);
    matmul_wpack *ppk = matmul_wpack_create(pw, PIN, PO, MATMUL_BF16);
    ASSERT_TRUE(ppk && matmul_dout_begin(ws, ppk, px, PN) == 1);
    for (int n0 = 0; n0 < PN; n0 += 2)
        matmul_dout_store(ws, n0, nan_rows);
    matmul_wpack_destroy(ppk);
    qs_free(pw);
    qs_free(px);
    qs_free(nan_rows);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !test_failed_flag; i++) {
        dout_case_check(cases[i], ws);
        if (test_failed_flag)
            fprintf(stderr, "    (case N=%d IN=%d O=%d)\n", cases[i].N, cases[i].IN, cases[i].O);
    }
    matmul_ws_destroy(ws);
}

TEST(matmul_dout, off_without_the_bf16_kernel_or_in_fp32)
{
    float w[6 * 4] = {0}, x[3 * 4] = {0};
    matmul_ws *ws = matmul_ws_create();
    matmul_wpack *p32 = matmul_wpack_create(w, 4, 6, MATMUL_FP32);
    matmul_wpack *p16 = matmul_wpack_create(w, 4, 6, MATMUL_BF16);
    ASSERT_TRUE(ws && p32 && p16);
    ASSERT_EQ_INT(matmul_dout_begin(ws, p32, x, 3), 0);
    ASSERT_EQ_INT(matmul_dout_begin(NULL, p16, x, 3), 0);
    ASSERT_EQ_INT(matmul_dout_begin(ws, p16, x, 0), 0);
    int saved = cpu_level();
    cpu_limit(CPU_LEVEL_AVX512);
    ASSERT_EQ_INT(matmul_dout_begin(ws, p16, x, 3), 0);
    cpu_limit(CPU_LEVEL_SCALAR);
    ASSERT_EQ_INT(matmul_dout_begin(ws, p16, x, 3), 0);
    cpu_limit(saved);
    ASSERT_EQ_INT(matmul_dout_begin(ws, p16, x, 3), saved >= CPU_LEVEL_AVX512BF16);
    matmul_wpack_destroy(p32);
    matmul_wpack_destroy(p16);
    matmul_ws_destroy(ws);
}

/* The lm_head's shape in miniature: a fresh workspace after the dout path
 * holds no more than matmul_ws_bytes_estimate says (the trainer's memory
 * guard and the bench's peak check rely on it), and most of it. */
TEST(matmul_dout, workspace_within_its_estimate)
{
    if (cpu_level() < CPU_LEVEL_AVX512BF16)
        SKIP("CPU has no AVX512-BF16 (the path is off)");
    enum { N = 64, IN = 24, O = 1000 };
    unsigned seed = 7u;
    float *x = dout_rand((size_t)N * IN, &seed), *w = dout_rand((size_t)O * IN, &seed);
    float *dout = dout_rand((size_t)N * O, &seed), *dx = dout_rand((size_t)N * IN, &seed);
    float *dw = dout_rand((size_t)O * IN, &seed);
    matmul_ws *ws = matmul_ws_create();
    matmul_wpack *pk = matmul_wpack_create(w, IN, O, MATMUL_BF16);
    ASSERT_TRUE(x && w && dout && dx && dw && ws && pk);
    matmul_forward_packed_ws(dout, x, pk, NULL, N, ws); /* forward first, as in training */
    ASSERT_EQ_INT(matmul_dout_begin(ws, pk, x, N), 1);
    for (int n0 = 0; n0 < N; n0 += 2)
        matmul_dout_store(ws, n0, dout + (size_t)n0 * O);
    matmul_dout_backward(dx, dw, pk, N, ws);
    size_t used = matmul_ws_bytes(ws), est = matmul_ws_bytes_estimate(N, IN, O, MATMUL_BF16, 0);
    ASSERT_TRUE(used <= est);
    ASSERT_TRUE((double)used >= 0.9 * (double)est);
    matmul_wpack_destroy(pk);
    matmul_ws_destroy(ws);
    float *bufs[] = {x, w, dout, dx, dw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        qs_free(bufs[i]);
}

/* bf16 of a finite float, round to nearest even (the scalar reference) */
static uint16_t ref_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

TEST(matmul_dout, pair_rows_land_in_their_panels_and_nowhere_else)
{
    if (cpu_level() < CPU_LEVEL_AVX512BF16)
        SKIP("CPU has no AVX512-BF16");
    /* widths: MM_MR (12: vectors straddle two or three panels) and MM_NR (32);
     * N on and off both grids and the 16-lane vectors */
    static const int widths[] = {12, 32}, ns[] = {1, 5, 12, 13, 16, 17, 31, 33, 47, 100};
    enum { MAXN = 100, KP = 3, SENT = 0x5A5A5A5A };
    float r0[MAXN], r1[MAXN];
    unsigned seed = 99;
    for (int c = 0; c < MAXN; c++) {
        seed = seed * 1664525u + 1013904223u;
        r0[c] = (float)((int)(seed >> 9) - (1 << 22)) * 1e-5f;
        seed = seed * 1664525u + 1013904223u;
        r1[c] = (float)((int)(seed >> 9) - (1 << 22)) * 3e-3f;
    }
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            for (int mode = 0; mode < 3; mode++) {   /* r1 and rows; r1 only; no r1 */
                const int W = widths[wi], N = ns[ni], panels = (N + W - 1) / W;
                const size_t pe = (size_t)(KP + 2) * W;   /* rows past KP stay sentinels */
                uint32_t dst[(MAXN / 12 + 1) * (KP + 2) * 12 + 64];
                uint16_t d0[MAXN + 8], d1[MAXN + 8];
                for (size_t i = 0; i < sizeof dst / sizeof *dst; i++)
                    dst[i] = SENT;
                memset(d0, 0x5A, sizeof d0);
                memset(d1, 0x5A, sizeof d1);
                const float *hi = mode < 2 ? r1 : NULL;
                mm_pairs_scatter_avx512bf16_impl(dst, pe, W, KP, r0, hi, N, 0,
                                                 mode == 0 ? d0 : NULL, mode == 0 ? d1 : NULL);
                for (size_t i = 0; i < sizeof dst / sizeof *dst; i++) {
                    size_t p = i / pe, row = i % pe / (size_t)W, col = i % (size_t)W;
                    size_t c = p * (size_t)W + col;
                    uint32_t want = SENT;
                    if ((int)p < panels && row == KP && c < (size_t)N)
                        want = ref_bf16(r0[c]) | (uint32_t)(hi ? ref_bf16(hi[c]) : 0) << 16;
                    if (dst[i] != want) {
                        fprintf(stderr, "    W=%d N=%d mode %d: panel %zu row %zu col %zu: %08x, "
                                "expected %08x\n", W, N, mode, p, row, col, dst[i], want);
                        ASSERT_TRUE(0);
                    }
                }
                for (int c = 0; c < MAXN + 8; c++) {
                    uint16_t w0 = mode == 0 && c < N ? ref_bf16(r0[c]) : 0x5A5A;
                    uint16_t w1 = mode == 0 && c < N ? ref_bf16(r1[c]) : 0x5A5A;
                    ASSERT_EQ_INT(d0[c], w0);
                    ASSERT_EQ_INT(d1[c], w1);
                }
            }
}
