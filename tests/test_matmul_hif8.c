/* test_matmul_hif8.c: HiF8 code packs (matmul_wpack_create_hif8) give the
 * bits of packing the decoded weight, on every kernel that can run here
 * (fp32 FMA, vdpbf16ps, the FMA kernel on bf16 values, the portable and
 * AVX-512 bf16 fallbacks, sgemm, AMX), over shapes that exercise the odd-K pad,
 * narrow last panels, partial row panels and both K blockings. */
#include <stdint.h>
#include <string.h>

#include "qs/cpu.h"
#include "qs/hif8.h"
#include "qs/matmul.h"
#include "qs/matmul_test.h"
#include "qs/mem.h"
#include "qs/rng.h"
#include "test.h"
#include "test_hif8_data.h"

/* out of the code pack == out of a plain pack of decode(codes), bit for bit */
static int h8_case(int N, int IN, int O, int precision, int with_bias, uint64_t seed)
{
    size_t nw = (size_t)O * IN;
    uint8_t *codes = qs_malloc(nw);
    float *w = qs_malloc(nw * sizeof *w), *x = qs_malloc((size_t)N * IN * sizeof *x);
    float *bias = qs_malloc((size_t)O * sizeof *bias);
    float *y0 = qs_malloc((size_t)N * O * sizeof *y0), *y1 = qs_malloc((size_t)N * O * sizeof *y1);
    float *back = qs_malloc(nw * sizeof *back);
    uint8_t *cback = qs_malloc(nw);
    int bad = !codes || !w || !x || !bias || !y0 || !y1 || !back || !cback;
    if (!bad) {
        test_hif8_codes(codes, nw, seed);
        hif8_codes_decode(codes, w, nw);
        test_hif8_fill(x, (size_t)N * IN, seed + 1);
        test_hif8_fill(bias, (size_t)O, seed + 2);
        matmul_wpack *ref = matmul_wpack_create(w, IN, O, precision);
        matmul_wpack *pk = matmul_wpack_create_hif8(codes, IN, O, precision);
        matmul_ws *ws = matmul_ws_create();
        bad = !ref || !pk || !ws || !matmul_wpack_hif8(pk) || matmul_wpack_hif8(ref);
        if (!bad) {
            matmul_forward_packed_ws(y0, x, ref, with_bias ? bias : NULL, N, ws);
            matmul_forward_packed_ws(y1, x, pk, with_bias ? bias : NULL, N, ws);
            bad = memcmp(y0, y1, (size_t)N * O * sizeof *y0) != 0;
            if (bad)
                fprintf(stderr, "    N=%d IN=%d O=%d precision %d: products differ\n", N, IN, O,
                        precision);
            matmul_wpack_hif8_read(pk, cback, back);
            bad |= memcmp(cback, codes, nw) != 0 || memcmp(back, w, nw * sizeof *w) != 0;
            /* 1 byte per weight (+ panel padding) */
            bad |= matmul_wpack_bytes(pk) > sizeof(float) * 64 + (size_t)(IN + 1) * (O + 31);
        }
        matmul_wpack_destroy(ref);
        matmul_wpack_destroy(pk);
        matmul_ws_destroy(ws);
    }
    qs_free(codes);
    qs_free(w);
    qs_free(x);
    qs_free(bias);
    qs_free(y0);
    qs_free(y1);
    qs_free(back);
    qs_free(cback);
    return bad;
}

/* shapes: odd K, K over one K block (256 fp32 / 512 bf16 values), short K
 * (rows-outer tasks), N = 1 (decode), partial 12-row panels, O not a multiple of 32 */
static int h8_shapes(int precision)
{
    static const int shapes[][3] = {
        {1, 64, 96},   {1, 577, 70},  {5, 33, 31},  {13, 256, 64}, {7, 1031, 45},
        {40, 128, 200}, {100, 300, 33}, {3, 1, 5},   {2, 2, 1},     {25, 96, 1100},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        bad |= h8_case(shapes[i][0], shapes[i][1], shapes[i][2], precision, (int)(i & 1),
                       100 + i);
    return bad;
}

TEST(matmul_hif8, code_pack_products_equal_the_decoded_weight_fp32)
{
    ASSERT_EQ_INT(h8_shapes(MATMUL_FP32), 0);
    ASSERT_EQ_INT(h8_shapes(MATMUL_FP32_BLAS), 0);   /* decoded per call, sgemm */
}

TEST(matmul_hif8, code_pack_products_equal_the_decoded_weight_bf16_both_kernels)
{
    /* vdpbf16ps (pairs decoded as bf16) and the FMA kernel (decoded as fp32,
     * odd term first); on CPUs without AVX512-BF16 both are the fallback */
    mm_bf16_fma_force_impl(0);
    int bad = h8_shapes(MATMUL_BF16);
    mm_bf16_fma_force_impl(1);
    if (cpu_level() >= CPU_LEVEL_AVX512BF16)
        bad |= h8_shapes(MATMUL_BF16);
    mm_bf16_fma_force_impl(-1);
    ASSERT_EQ_INT(bad, 0);
}

TEST(matmul_hif8, code_pack_products_equal_the_decoded_weight_on_fallbacks)
{
    int level = cpu_level(), bad = 0;
    cpu_limit(CPU_LEVEL_AVX512);   /* bf16 on the AVX-512 FMA kernel, rounded operands */
    bad |= h8_shapes(MATMUL_BF16);
    cpu_limit(CPU_LEVEL_SCALAR);   /* portable kernel; fp32 goes to sgemm */
    bad |= h8_shapes(MATMUL_BF16);
    bad |= h8_shapes(MATMUL_FP32);
    cpu_limit(level);
    ASSERT_EQ_INT(bad, 0);
}

/* MATMUL_BF16_AMX: code panels decoded into the AMX B tiles, as they go (tasks
 * of one 32-row block: 1-13 rows) or once per task (40, 100 rows), in K passes
 * too (forced small): the bits of the bf16-amx pack of the decoded weight */
TEST(matmul_hif8, code_pack_products_equal_the_decoded_weight_amx)
{
    if (!cpu_amx_bf16())
        SKIP("this CPU (or its kernel) has no AMX-BF16 tiles");
    int bad = h8_shapes(MATMUL_BF16_AMX);
    bad |= h8_case(77, 1000, 100, MATMUL_BF16_AMX, 1, 200);
    mm_amx_pass_bytes_force_impl(96 * 64 * 2);   /* 32 k tiles in 4 passes */
    bad |= h8_case(77, 1000, 100, MATMUL_BF16_AMX, 1, 201);
    bad |= h8_case(70, 1031, 64, MATMUL_BF16_AMX, 0, 202);
    /* row groups (mm_amx_plan_impl): 3 of 128 rows; 2 of 160 rows, 2 passes each */
    mm_amx_pass_bytes_force_impl(320 * 64 * 8);
    bad |= h8_case(300, 600, 100, MATMUL_BF16_AMX, 1, 203);
    bad |= h8_case(300, 1000, 100, MATMUL_BF16_AMX, 0, 204);
    mm_amx_pass_bytes_force_impl(0);
    ASSERT_EQ_INT(bad, 0);
}

TEST(matmul_hif8, bad_shapes_give_no_pack)
{
    uint8_t c[4] = {0};
    ASSERT_TRUE(matmul_wpack_create_hif8(NULL, 2, 2, MATMUL_BF16) == NULL);
    ASSERT_TRUE(matmul_wpack_create_hif8(c, 0, 2, MATMUL_BF16) == NULL);
    ASSERT_TRUE(matmul_wpack_create_hif8(c, 2, 0, MATMUL_FP32) == NULL);
}

/* the pack stores its own byte per code (matmul_hif8.c renumbers the
 * magnitudes): every one of the 256 codes reads back as itself and as its
 * value (NaN as NaN), at every k parity, in both precisions */
TEST(matmul_hif8, every_code_reads_back_from_a_pack)
{
    enum { IN = 257, O = 2 };
    uint8_t codes[IN * O], back[IN * O];
    float want[IN * O], got[IN * O];
    for (int o = 0; o < O; o++)
        for (int k = 0; k < IN; k++)
            codes[o * IN + k] = (uint8_t)(k + o);   /* row 1: each code at the other parity */
    hif8_codes_decode(codes, want, IN * O);
    int precisions[2] = {MATMUL_FP32, MATMUL_BF16};
    for (int i = 0; i < 2; i++) {
        matmul_wpack *pk = matmul_wpack_create_hif8(codes, IN, O, precisions[i]);
        ASSERT_TRUE(pk != NULL);
        matmul_wpack_hif8_read(pk, back, got);
        matmul_wpack_destroy(pk);
        ASSERT_TRUE(memcmp(back, codes, sizeof codes) == 0);
        for (int j = 0; j < IN * O; j++)
            ASSERT_TRUE(got[j] == want[j] || (got[j] != got[j] && want[j] != want[j]));
    }
}
