/* test_matmul_gemv.c: products of 1-4 rows (decode) run on their own kernel
 * (src/kernels/matmul_gemv_avx512.c, for bf16 pairs on the FMA units and for
 * HiF8 code packs); each of those rows must have the bits it has inside a
 * batch of 16 (the blocked kernel), and bf16 the bits of vdpbf16ps: plain and
 * code-packed weights, with and without bias, odd K, K over several blocks of
 * the small-row path (2048), column tails, rows at every offset of the batch.
 * On CPUs with AVX512-BF16 and VBMI, code packs of the bf16 formats run on
 * src/kernels/matmul_gemv_codes_avx512bf16vbmi.c instead (decoded in
 * registers, vdpbf16ps): the same bits as the decode-then-FMA path, compared
 * directly, NaN / infinity codes and products in the denormal range included;
 * bf16 pair packs on vdpbf16ps run 1-4 rows on
 * src/kernels/matmul_gemv_pairs_avx512bf16.c: the blocked kernel's bits.
 */
#include <math.h>
#include <string.h>

#include "qs/cpu.h"
#include "qs/hif8.h"
#include "qs/matmul.h"
#include "qs/matmul_test.h"
#include "qs/mem.h"
#include "qs/rng.h"
#include "test.h"
#include "test_hif8_data.h"

enum { GV_BATCH = 16 };

/* The product of rows [r0, r0 + m) of x alone, through a code pack (codes) or
 * the plain weight. */
static void gv_rows(float *y, const float *x, int m, const float *w, matmul_wpack *pk,
                    const float *bias, int IN, int O, int precision, matmul_ws *ws)
{
    if (pk)
        matmul_forward_packed_ws(y, x, pk, bias, m, ws);
    else
        matmul_forward(y, x, w, bias, m, IN, O, precision);
}

/* Every run of 1..8 consecutive rows (the few-row kernels' sizes, and a short
 * prompt's) equals the same rows of the batch of 16. */
static int gv_case(int IN, int O, int precision, int codes, int with_bias, uint64_t seed)
{
    size_t nw = (size_t)O * IN;
    float *w = qs_malloc(nw * sizeof *w), *x = qs_malloc((size_t)GV_BATCH * IN * sizeof *x);
    float *bias = qs_malloc((size_t)O * sizeof *bias);
    float *yb = qs_malloc((size_t)GV_BATCH * O * sizeof *yb), *ys = qs_malloc(8 * (size_t)O * sizeof *ys);
    uint8_t *cw = qs_malloc(nw);
    matmul_ws *ws = matmul_ws_create();
    int bad = !w || !x || !bias || !yb || !ys || !cw || !ws;
    matmul_wpack *pk = NULL;
    if (!bad) {
        test_hif8_codes(cw, nw, seed);
        if (codes)
            hif8_codes_decode(cw, w, nw);
        else
            test_hif8_fill(w, nw, seed + 3);
        test_hif8_fill(x, (size_t)GV_BATCH * IN, seed + 1);
        test_hif8_fill(bias, (size_t)O, seed + 2);
        pk = codes ? matmul_wpack_create_hif8(cw, IN, O, precision) : NULL;
        bad = codes && !pk;
    }
    const float *b = with_bias ? bias : NULL;
    if (!bad)
        gv_rows(yb, x, GV_BATCH, w, pk, b, IN, O, precision, ws);
    for (int m = 1; m <= 8 && !bad; m++)
        for (int r0 = 0; r0 + m <= GV_BATCH && !bad; r0 += 3) {
            gv_rows(ys, x + (size_t)r0 * IN, m, w, pk, b, IN, O, precision, ws);
            if (memcmp(ys, yb + (size_t)r0 * O, (size_t)m * O * sizeof *ys)) {
                fprintf(stderr, "    IN=%d O=%d precision %d codes %d bias %d: rows %d..%d differ\n",
                        IN, O, precision, codes, with_bias, r0, r0 + m - 1);
                bad = 1;
            }
        }
    matmul_wpack_destroy(pk);
    matmul_ws_destroy(ws);
    qs_free(w);
    qs_free(x);
    qs_free(bias);
    qs_free(yb);
    qs_free(ys);
    qs_free(cw);
    return bad;
}

/* odd K, K over 2 and 3 blocks of 2048, O from one partial tile to 5 tiles and a tail */
static const int gv_shapes[][2] = {{37, 100}, {2500, 70}, {1536, 129}, {64, 32}, {4097, 33}, {5, 1}};

static int gv_all(int precision, int codes)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof gv_shapes / sizeof gv_shapes[0]; i++)
        bad |= gv_case(gv_shapes[i][0], gv_shapes[i][1], precision, codes, (int)(i & 1), 40 + i);
    return bad;
}

TEST(matmul_gemv, few_rows_equal_their_rows_in_a_batch_bf16_fma)
{
    mm_bf16_fma_force_impl(1);
    int bad = cpu_level() >= CPU_LEVEL_AVX512BF16 ? gv_all(MATMUL_BF16, 0) | gv_all(MATMUL_BF16, 1)
                                                   : 0;
    mm_bf16_fma_force_impl(-1);
    ASSERT_EQ_INT(bad, 0);
}

/* vdpbf16ps on bf16 pairs: 1-4 rows on the few-row kernel straight from the
 * pack (matmul_gemv_pairs_avx512bf16.c), 5-8 on the blocked kernel */
TEST(matmul_gemv, few_rows_equal_their_rows_in_a_batch_bf16_vdpbf16ps)
{
    if (cpu_level() < CPU_LEVEL_AVX512BF16)
        SKIP("no AVX512-BF16");
    mm_bf16_fma_force_impl(0);
    int bad = gv_all(MATMUL_BF16, 0);
    mm_bf16_fma_force_impl(-1);
    ASSERT_EQ_INT(bad, 0);
}

/* ... and the few-row kernel gives the blocked kernel's bits on the same rows */
TEST(matmul_gemv, few_rows_on_the_pairs_kernel_equal_the_blocked_kernel)
{
    if (cpu_level() < CPU_LEVEL_AVX512BF16)
        SKIP("no AVX512-BF16");
    mm_bf16_fma_force_impl(0);
    for (size_t i = 0; i < sizeof gv_shapes / sizeof gv_shapes[0]; i++) {
        int IN = gv_shapes[i][0], O = gv_shapes[i][1];
        float *w = qs_malloc((size_t)O * IN * sizeof *w), *x = qs_malloc(4 * (size_t)IN * sizeof *x);
        float *bias = qs_malloc((size_t)O * sizeof *bias);
        float *y0 = qs_malloc(4 * (size_t)O * sizeof *y0), *y1 = qs_malloc(4 * (size_t)O * sizeof *y1);
        ASSERT_TRUE(w && x && bias && y0 && y1);
        test_hif8_fill(w, (size_t)O * IN, 17 + i);
        test_hif8_fill(x, 4 * (size_t)IN, 18 + i);
        test_hif8_fill(bias, (size_t)O, 19 + i);
        matmul_wpack *pk = matmul_wpack_create(w, IN, O, MATMUL_BF16);
        ASSERT_TRUE(pk != NULL);
        for (int m = 1; m <= 4; m++) {
            const float *b = m & 1 ? bias : NULL;
            mm_gemv_pairs_force_impl(0);
            matmul_forward_packed(y0, x, pk, b, m);
            mm_gemv_pairs_force_impl(1);
            matmul_forward_packed(y1, x, pk, b, m);
            if (memcmp(y0, y1, (size_t)m * O * sizeof *y0))
                fprintf(stderr, "    IN=%d O=%d rows %d: the kernels differ\n", IN, O, m);
            ASSERT_TRUE(memcmp(y0, y1, (size_t)m * O * sizeof *y0) == 0);
        }
        matmul_wpack_destroy(pk);
        qs_free(w);
        qs_free(x);
        qs_free(bias);
        qs_free(y0);
        qs_free(y1);
    }
    mm_bf16_fma_force_impl(-1);
}

TEST(matmul_gemv, few_rows_equal_their_rows_in_a_batch_fp32_codes)
{
    ASSERT_EQ_INT(gv_all(MATMUL_FP32, 1), 0);
    ASSERT_EQ_INT(gv_all(MATMUL_FP32, 0), 0);
}

/* the small-row kernel on widened pairs gives vdpbf16ps's bits */
TEST(matmul_gemv, few_rows_on_the_fma_units_equal_vdpbf16ps)
{
    if (cpu_level() < CPU_LEVEL_AVX512BF16)
        SKIP("no AVX512-BF16");
    for (size_t i = 0; i < sizeof gv_shapes / sizeof gv_shapes[0]; i++) {
        int IN = gv_shapes[i][0], O = gv_shapes[i][1];
        float *w = qs_malloc((size_t)O * IN * sizeof *w), *x = qs_malloc(3 * (size_t)IN * sizeof *x);
        float *y0 = qs_malloc(3 * (size_t)O * sizeof *y0), *y1 = qs_malloc(3 * (size_t)O * sizeof *y1);
        ASSERT_TRUE(w && x && y0 && y1);
        test_hif8_fill(w, (size_t)O * IN, 7 + i);
        test_hif8_fill(x, 3 * (size_t)IN, 8 + i);
        for (int m = 1; m <= 3; m++) {
            mm_bf16_fma_force_impl(0);
            matmul_forward(y0, x, w, NULL, m, IN, O, MATMUL_BF16);
            mm_bf16_fma_force_impl(1);
            matmul_forward(y1, x, w, NULL, m, IN, O, MATMUL_BF16);
            mm_bf16_fma_force_impl(-1);
            ASSERT_TRUE(memcmp(y0, y1, (size_t)m * O * sizeof *y0) == 0);
        }
        qs_free(w);
        qs_free(x);
        qs_free(y0);
        qs_free(y1);
    }
}

/* a code pack holding NaN (0x80) and infinity codes: the rows that meet them
 * are NaN / infinite exactly where the batch's rows are, with the same bits */
TEST(matmul_gemv, nan_and_infinity_codes_in_few_rows_as_in_a_batch)
{
    enum { IN = 300, O = 70 };
    uint8_t *cw = qs_malloc((size_t)IN * O);
    float *x = qs_malloc((size_t)GV_BATCH * IN * sizeof *x);
    float *yb = qs_malloc((size_t)GV_BATCH * O * sizeof *yb), *ys = qs_malloc((size_t)O * sizeof *ys);
    ASSERT_TRUE(cw && x && yb && ys);
    test_hif8_codes(cw, (size_t)IN * O, 5);
    cw[3 * IN + 17] = HIF8_CODE_NAN;
    cw[10 * IN + 200] = HIF8_CODE_POS_INF;
    cw[11 * IN + 1] = HIF8_CODE_NEG_INF;
    test_hif8_fill(x, (size_t)GV_BATCH * IN, 6);
    int precisions[2] = {MATMUL_FP32, MATMUL_BF16};
    for (int i = 0; i < 2; i++) {
        matmul_wpack *pk = matmul_wpack_create_hif8(cw, IN, O, precisions[i]);
        ASSERT_TRUE(pk != NULL);
        matmul_forward_packed(yb, x, pk, NULL, GV_BATCH);
        for (int r = 0; r < GV_BATCH; r++) {
            matmul_forward_packed(ys, x + (size_t)r * IN, pk, NULL, 1);
            ASSERT_TRUE(memcmp(ys, yb + (size_t)r * O, (size_t)O * sizeof *ys) == 0);
            ASSERT_TRUE(ys[3] != ys[3] && isinf(ys[10]) && isinf(ys[11]));
        }
        matmul_wpack_destroy(pk);
    }
    qs_free(cw);
    qs_free(x);
    qs_free(yb);
    qs_free(ys);
}

/* Rows [r0, r0 + m) of x (IN wide) for every m <= 4 and every offset r0 in a
 * batch of GV_BATCH rows, through the code pack pk: the in-register kernel
 * (vdpbf16ps) against the codes decoded into L1 and the FMA kernel.  1 on a
 * difference. */
static int gv_codes_both_paths(const float *x, matmul_wpack *pk, const float *bias, int IN, int O,
                               float *y0, float *y1, matmul_ws *ws)
{
    for (int m = 1; m <= 4; m++)
        for (int r0 = 0; r0 + m <= GV_BATCH; r0++) {
            const float *xr = x + (size_t)r0 * IN;
            mm_codes_gemv_force_impl(0);
            matmul_forward_packed_ws(y0, xr, pk, bias, m, ws);
            mm_codes_gemv_force_impl(-1);
            matmul_forward_packed_ws(y1, xr, pk, bias, m, ws);
            if (memcmp(y0, y1, (size_t)m * O * sizeof *y0)) {
                fprintf(stderr, "    IN=%d O=%d: rows %d..%d differ\n", IN, O, r0, r0 + m - 1);
                return 1;
            }
        }
    return 0;
}

/* One shape: seeded codes (extra 1: a NaN and both infinities, 2: only the
 * infinities; each takes its own lookup in the kernel), x uniform with
 * tiny_rows of its rows scaled by 2^-110 (products and sums through the
 * denormal range, flushed by both kernels), with and without bias. */
static int gv_codes_case(int IN, int O, int extra, int tiny_rows, uint64_t seed)
{
    size_t nw = (size_t)O * IN, nx = (size_t)GV_BATCH * IN;
    uint8_t *cw = qs_malloc(nw);
    float *x = qs_malloc(nx * sizeof *x), *bias = qs_malloc((size_t)O * sizeof *bias);
    float *y0 = qs_malloc(4 * (size_t)O * sizeof *y0), *y1 = qs_malloc(4 * (size_t)O * sizeof *y1);
    matmul_ws *ws = matmul_ws_create();
    matmul_wpack *pk = NULL;
    int bad = !cw || !x || !bias || !y0 || !y1 || !ws;
    if (!bad) {
        test_hif8_codes(cw, nw, seed);
        if (extra == 1)
            cw[nw / 3] = HIF8_CODE_NAN;
        if (extra) {
            cw[nw / 2] = HIF8_CODE_POS_INF;
            cw[nw - 1] = HIF8_CODE_NEG_INF;
        }
        test_hif8_fill(x, nx, seed + 1);
        test_hif8_fill(bias, (size_t)O, seed + 2);
        for (size_t i = 0; i < (size_t)tiny_rows * IN; i++)
            x[i] = ldexpf(x[i], -110);
        pk = matmul_wpack_create_hif8(cw, IN, O, MATMUL_BF16);
        bad = !pk;
    }
    if (!bad && !mm_codes_gemv_dp_impl())   /* this CPU has no in-register kernel */
        bad = -1;
    for (int b = 0; b < 2 && !bad; b++)
        bad = gv_codes_both_paths(x, pk, b ? bias : NULL, IN, O, y0, y1, ws);
    matmul_wpack_destroy(pk);
    matmul_ws_destroy(ws);
    qs_free(cw);
    qs_free(x);
    qs_free(bias);
    qs_free(y0);
    qs_free(y1);
    return bad;
}

/* codes decoded in registers and multiplied with vdpbf16ps give the bits of
 * the decode-then-FMA path: odd K, K over 2 and 3 blocks, column tails */
TEST(matmul_gemv, codes_in_registers_equal_decode_then_fma)
{
    for (size_t i = 0; i < sizeof gv_shapes / sizeof gv_shapes[0]; i++) {
        int bad = gv_codes_case(gv_shapes[i][0], gv_shapes[i][1], 0, 0, 60 + i);
        if (bad < 0)
            SKIP("no AVX512-BF16 + VBMI");
        ASSERT_EQ_INT(bad, 0);
    }
}

/* ... also with NaN and infinity codes in the pack (the longer lookups) and
 * rows of tiny activations whose products and sums fall into the denormal range */
TEST(matmul_gemv, codes_in_registers_equal_decode_then_fma_nan_inf_tiny)
{
    static const int shapes[][2] = {{301, 70}, {2049, 33}};
    for (int i = 0; i < 2; i++)
        for (int extra = 0; extra < 3; extra++) {
            int bad = gv_codes_case(shapes[i][0], shapes[i][1], extra, GV_BATCH / 2, 80 + i);
            if (bad < 0)
                SKIP("no AVX512-BF16 + VBMI");
            ASSERT_EQ_INT(bad, 0);
        }
}
