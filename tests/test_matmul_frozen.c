/* test_matmul_frozen.c: frozen (inference) weight packs.  A pack made from bf16
 * bits equals, bit for bit in every output, the unpacked product on the fp32
 * values of those bits, at every CPU level that has a packed format (fp32 and
 * bf16, odd shapes, subnormal and signed-zero weights included); rows read
 * back out of a pack are the weight as the products see it; a frozen pack can
 * be re-set to a substitute weight; frozen packs join multi-Linear calls. */
#include <string.h>

#include "qs/cpu.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "test.h"

typedef struct fz_case {
    int N, IN, O;
} fz_case;

/* 1s, odd K, O not a multiple of the 32-column panel, K past the pair chunks */
static const fz_case fz_cases[] = {{1, 1, 1}, {3, 7, 5}, {13, 31, 37}, {5, 257, 65},
                                   {17, 1031, 40}};

static unsigned fz_seed = 777u;

static unsigned fz_next(void)
{
    fz_seed = fz_seed * 1664525u + 1013904223u;
    return fz_seed >> 8;
}

static float bits_value(uint16_t h)
{
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}

/* bf16 weights in [-1, 1) with some exact zeros, negative zeros and subnormals */
static void fz_weights(uint16_t *w16, float *w32, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned r = fz_next();
        float f = (float)((r % 65536) / 32768.0 - 1.0);
        union { float f; uint32_t u; } v = {f};
        uint16_t h = (uint16_t)(v.u >> 16);
        if (r % 97 == 0)
            h = 0x8000;                         /* -0 */
        else if (r % 89 == 0)
            h = (uint16_t)(0x0001 + r % 0x7F);  /* a positive subnormal */
        else if (r % 83 == 0)
            h = (uint16_t)(0x8001 + r % 0x7F);  /* a negative subnormal */
        w16[i] = h;
        w32[i] = bits_value(h);
    }
}

static void fz_check_level(int level, int precision, int *checked)
{
    int saved = cpu_level();
    cpu_limit(level);
    if (!matmul_frozen_available(precision)) {
        ASSERT_TRUE(matmul_wpack_create_frozen(NULL, 4, 4, precision) == NULL);
        float w[16] = {0};
        ASSERT_TRUE(matmul_wpack_create_frozen(w, 4, 4, precision) == NULL);
        cpu_limit(saved);
        return;
    }
    for (size_t c = 0; c < sizeof fz_cases / sizeof fz_cases[0]; c++) {
        const int N = fz_cases[c].N, IN = fz_cases[c].IN, O = fz_cases[c].O;
        uint16_t *w16 = qs_malloc((size_t)O * IN * sizeof *w16);
        float *w32 = qs_malloc((size_t)O * IN * sizeof *w32);
        float *x = qs_malloc((size_t)N * IN * sizeof *x), *bias = qs_malloc((size_t)O * 4);
        float *ref = qs_malloc((size_t)N * O * 4), *got = qs_malloc((size_t)N * O * 4);
        float *row = qs_malloc((size_t)IN * 4);
        ASSERT_TRUE(w16 && w32 && x && bias && ref && got && row);
        fz_weights(w16, w32, (size_t)O * IN);
        for (int i = 0; i < N * IN; i++)
            x[i] = (float)((fz_next() % 2000) / 1000.0 - 1.0);
        for (int o = 0; o < O; o++)
            bias[o] = (float)o * 0.01f;
        matmul_forward(ref, x, w32, bias, N, IN, O, precision);
        matmul_wpack *pb = matmul_wpack_create_frozen_bf16(w16, IN, O, precision);
        matmul_wpack *pf = matmul_wpack_create_frozen(w32, IN, O, precision);
        ASSERT_TRUE(pb && pf && matmul_wpack_frozen(pb) && matmul_wpack_frozen(pf));
        for (int k = 0; k < 2; k++) {
            memset(got, 0xff, (size_t)N * O * 4);
            matmul_forward_packed(got, x, k ? pf : pb, bias, N);
            if (memcmp(got, ref, (size_t)N * O * 4))
                TEST_FAIL_AT("%s pack, %s at %s, N=%d IN=%d O=%d: not the unpacked bits",
                             k ? "fp32" : "bf16-bits", precision == MATMUL_BF16 ? "bf16" : "fp32",
                             cpu_level_name(level), N, IN, O);
        }
        /* rows: the weight as the products see it */
        for (int o = 0; o < O; o += (O > 7 ? 7 : 1)) {
            matmul_wpack_row(pb, o, row);
            for (int i = 0; i < IN; i++) {
                float want = w32[(size_t)o * IN + i];
                uint16_t h = w16[(size_t)o * IN + i];
                if (precision == MATMUL_BF16 && (h & 0x7F80) == 0)
                    want = bits_value((uint16_t)(h & 0x8000));   /* subnormals read as zero */
                if (memcmp(&row[i], &want, 4)) {
                    TEST_FAIL_AT("row %d col %d at %s: %g, expected %g", o, i,
                                 cpu_level_name(level), row[i], want);
                    return;
                }
            }
        }
        /* a substitute weight: products follow it */
        for (size_t i = 0; i < (size_t)O * IN; i++)
            w32[i] = -0.5f * w32[i];
        ASSERT_EQ_INT(matmul_wpack_frozen_set(pb, w32), 0);
        matmul_wpack_refresh(pb);   /* no-op on a frozen pack */
        matmul_forward(ref, x, w32, bias, N, IN, O, precision);
        matmul_forward_packed(got, x, pb, bias, N);
        ASSERT_TRUE(memcmp(got, ref, (size_t)N * O * 4) == 0);
        (*checked)++;
        matmul_wpack_destroy(pb);
        matmul_wpack_destroy(pf);
        qs_free(w16);
        qs_free(w32);
        qs_free(x);
        qs_free(bias);
        qs_free(ref);
        qs_free(got);
        qs_free(row);
    }
    cpu_limit(saved);
}

TEST(matmul_frozen, bf16_bits_pack_equals_unpacked_product_at_every_level)
{
    int checked = 0, top = cpu_detected_level();
    for (int level = CPU_LEVEL_SCALAR; level <= top; level++) {
        fz_check_level(level, MATMUL_BF16, &checked);
        fz_check_level(level, MATMUL_FP32, &checked);
    }
    ASSERT_TRUE(checked >= 5);
    ASSERT_EQ_INT(matmul_frozen_available(MATMUL_FP32_BLAS), 0);
    ASSERT_EQ_INT(matmul_rows_independent(MATMUL_FP32_BLAS), 0);
    ASSERT_EQ_INT(matmul_rows_independent(MATMUL_BF16), 1);
}

/* q/k/v-style: frozen packs of one input through the multi call equal separate calls */
TEST(matmul_frozen, frozen_packs_in_a_multi_call_equal_separate_calls)
{
    const int N = 29, IN = 96, O[3] = {64, 32, 32};
    float *x = qs_malloc((size_t)N * IN * 4), *out[3], *ref = qs_malloc((size_t)N * 64 * 4);
    matmul_wpack *pk[3];
    ASSERT_TRUE(x && ref);
    for (int i = 0; i < N * IN; i++)
        x[i] = (float)((fz_next() % 2000) / 1000.0 - 1.0);
    for (int p = 0; p < 2; p++) {
        int precision = p ? MATMUL_FP32 : MATMUL_BF16;
        if (!matmul_frozen_available(precision))
            continue;
        matmul_ws *ws = matmul_ws_create();
        uint16_t *w16[3];
        for (int i = 0; i < 3; i++) {
            w16[i] = qs_malloc((size_t)O[i] * IN * 2);
            float *w32 = qs_malloc((size_t)O[i] * IN * 4);
            fz_weights(w16[i], w32, (size_t)O[i] * IN);
            pk[i] = matmul_wpack_create_frozen_bf16(w16[i], IN, O[i], precision);
            out[i] = qs_malloc((size_t)N * O[i] * 4);
            qs_free(w32);
        }
        matmul_forward_packed_multi_ws(out, x, pk, NULL, 3, N, ws, NULL);
        for (int i = 0; i < 3; i++) {
            matmul_forward_packed_ws(ref, x, pk[i], NULL, N, ws);
            ASSERT_TRUE(memcmp(ref, out[i], (size_t)N * O[i] * 4) == 0);
            matmul_wpack_destroy(pk[i]);
            qs_free(out[i]);
            qs_free(w16[i]);
        }
        matmul_ws_destroy(ws);
    }
    qs_free(x);
    qs_free(ref);
}
