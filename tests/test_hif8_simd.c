/* test_hif8_simd.c: every HiF8 path (AVX2, AVX-512, dispatch) against the
 * scalar reference, and the fake-quant statistics on crafted tensors.
 *
 * y, amax, the counts AND sq_err/sq_sum must be bit-identical across paths
 * (the partial-sum order is part of the contract, see qs/hif8.h).  Paths the
 * CPU lacks are skipped.  Inputs: random bit patterns over many binades, every
 * rounding threshold +-1 ulp (at several scales), specials, NaN payloads, huge
 * and tiny values, lengths that are not a multiple of the vector width, and
 * in-place operation.
 */
#include <stdint.h>

#include "qs/cpu.h"
#include "qs/hif8.h"
#include "qs/hif8_test.h"
#include "qs/mem.h"
#include "test.h"

typedef void (*fq_fn)(const float *, float *, size_t, float, int, hif8_stats *);
typedef void (*enc_fn)(const float *, uint8_t *, size_t, int);

static const struct {
    const char *name;
    int level;
    fq_fn fq;
    enc_fn enc;
} paths[] = {
    {"avx2", CPU_LEVEL_AVX2, hif8_fakequant_avx2_impl, hif8_codes_encode_avx2_impl},
    {"avx512", CPU_LEVEL_AVX512, hif8_fakequant_avx512_impl, hif8_codes_encode_avx512_impl},
    {"dispatch", CPU_LEVEL_SCALAR, hif8_fakequant, hif8_codes_encode},
};
#define N_PATHS (sizeof paths / sizeof paths[0])

/* 1e30 and 7e-31 still use the vector paths' reciprocal table; 3e35, 2e-36 and
 * 3e38 make them divide (q / scale leaves the normal range; 3e38 underflows). */
static const float scales[] = {1.0f,    0.37f,    3.0e4f,  1.0e-3f, 0x1p-10f,
                               1.0e30f, 7.0e-31f, 3.0e35f, 2.0e-36f, 3.0e38f};
#define N_SCALES (sizeof scales / sizeof scales[0])

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float float_of(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* Edge inputs: every threshold between neighbouring HiF8 magnitudes (and the
 * overflow one, 40960) +-1 ulp, every HiF8 value, specials; both signs. */
static size_t fill_edges(float *x, size_t cap)
{
    float mags[130];
    size_t nm = 0, n = 0;
    for (int c = 0; c < 0x80; c++)
        if (c != HIF8_CODE_POS_INF)
            mags[nm++] = hif8_decode((uint8_t)c);
    /* sort the 127 magnitudes (code order is not value order) */
    for (size_t i = 1; i < nm; i++)
        for (size_t j = i; j > 0 && mags[j - 1] > mags[j]; j--) {
            float t = mags[j];
            mags[j] = mags[j - 1];
            mags[j - 1] = t;
        }
    mags[nm++] = 49152.0f; /* the Inf slot */
    const uint32_t specials[] = {0x7FC00000u, 0x7FC12345u, 0x7F800001u, 0x7F800000u, 0x7F7FFFFFu,
                                 0x00000001u, 0x007FFFFFu, 0x00800000u, 0x00000000u, 0x4F000000u};
    for (int sign = 0; sign < 2; sign++) {
        float sg = sign ? -1.0f : 1.0f;
        for (size_t i = 0; i + 1 < nm && n + 4 <= cap; i++) {
            float mid = (mags[i] + mags[i + 1]) / 2; /* exact: neighbours differ by <= 1 binade */
            x[n++] = sg * mid;
            x[n++] = sg * nextafterf(mid, 0.0f);
            x[n++] = sg * nextafterf(mid, INFINITY);
            x[n++] = sg * mags[i];
        }
        for (size_t i = 0; i < sizeof specials / sizeof specials[0] && n < cap; i++)
            x[n++] = float_of(specials[i] | (sign ? 0x80000000u : 0));
    }
    return n;
}

/* Random fp32 patterns: exponent uniform over [2^-40, 2^40) plus 1/16 full-range patterns. */
static void fill_random(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_next(&seed);
        uint32_t b = (uint32_t)r;
        if ((r >> 32) & 15)
            b = (b & 0x807FFFFFu) | ((uint32_t)(127 - 40 + (r >> 40) % 80) << 23);
        x[i] = float_of(b);
    }
}

static int same_stats(const hif8_stats *a, const hif8_stats *b)
{
    return !memcmp(&a->amax, &b->amax, sizeof a->amax) && a->n_clipped == b->n_clipped &&
           a->n_underflow == b->n_underflow && a->n_nan == b->n_nan &&
           !memcmp(&a->sq_err, &b->sq_err, sizeof(double)) &&
           !memcmp(&a->sq_sum, &b->sq_sum, sizeof(double));
}

/* Compare path p with the reference on x[0..n): outputs, in place, stats. */
static int compare_path(size_t p, const float *x, size_t n, float scale, float *y_ref,
                        float *y, int want)
{
    hif8_stats s_ref, s;
    hif8_fakequant_ref(x, y_ref, n, scale, want, &s_ref);
    paths[p].fq(x, y, n, scale, want, &s);
    int ok = !memcmp(y, y_ref, n * sizeof *y) && same_stats(&s, &s_ref);
    memcpy(y, x, n * sizeof *y); /* in place */
    paths[p].fq(y, y, n, scale, want, &s);
    ok = ok && !memcmp(y, y_ref, n * sizeof *y) && same_stats(&s, &s_ref);
    if (!ok) {
        for (size_t i = 0; i < n; i++)
            if (memcmp(&y[i], &y_ref[i], sizeof *y)) {
                fprintf(stderr, "    %s scale %a: x[%zu]=%a -> %a, reference %a\n", paths[p].name,
                        scale, i, x[i], y[i], y_ref[i]);
                break;
            }
        fprintf(stderr, "    %s scale %a n %zu: amax %a/%a clip %zu/%zu under %zu/%zu nan %zu/%zu "
                        "sq %a/%a ss %a/%a\n",
                paths[p].name, scale, n, s.amax, s_ref.amax, s.n_clipped, s_ref.n_clipped,
                s.n_underflow, s_ref.n_underflow, s.n_nan, s_ref.n_nan, s.sq_err, s_ref.sq_err,
                s.sq_sum, s_ref.sq_sum);
    }
    return ok;
}

static int path_available(size_t p) { return cpu_detected_level() >= paths[p].level; }

TEST(hif8_simd, fakequant_paths_match_reference_on_edges)
{
    const size_t cap = 2048;
    float *x = qs_malloc(cap * sizeof *x), *yr = qs_malloc(cap * sizeof *x),
          *y = qs_malloc(cap * sizeof *x);
    ASSERT_TRUE(x && yr && y);
    size_t n = fill_edges(x, cap);
    int tested = 0, bad = 0;
    for (size_t p = 0; p < N_PATHS; p++) {
        if (!path_available(p))
            continue;
        tested++;
        /* scales that are powers of two put the thresholds of x*scale exactly on the edges */
        const float edge_scales[] = {1.0f, 0.5f, 0x1p-7f, 1024.0f};
        for (size_t s = 0; s < 4; s++)
            for (int want = 0; want < 2; want++)
                bad += !compare_path(p, x, n, edge_scales[s], yr, y, want);
        for (size_t s = 0; s < N_SCALES; s++)
            bad += !compare_path(p, x, n, scales[s], yr, y, 1);
    }
    qs_free(x);
    qs_free(yr);
    qs_free(y);
    ASSERT_EQ_INT(bad, 0);
    ASSERT_TRUE(tested > 0);
}

TEST(hif8_simd, fakequant_paths_match_reference_on_random_lengths)
{
    const size_t cap = 4099;
    float *x = qs_malloc(cap * sizeof *x), *yr = qs_malloc(cap * sizeof *x),
          *y = qs_malloc(cap * sizeof *x);
    ASSERT_TRUE(x && yr && y);
    int bad = 0;
    for (size_t p = 0; p < N_PATHS; p++) {
        if (!path_available(p))
            continue;
        for (size_t n = 0; n <= 40; n++) { /* every tail length of both vector widths */
            fill_random(x, n, 1000 + n);
            bad += !compare_path(p, x, n, scales[n % N_SCALES], yr, y, (int)(n & 1));
        }
        for (size_t s = 0; s < N_SCALES; s++) {
            fill_random(x, cap, 77 + s);
            bad += !compare_path(p, x, cap, scales[s], yr, y, 1);
            bad += !compare_path(p, x + 3, cap - 3, scales[s], yr, y, 1); /* unaligned start */
        }
    }
    qs_free(x);
    qs_free(yr);
    qs_free(y);
    ASSERT_EQ_INT(bad, 0);
}

TEST(hif8_simd, encode_paths_match_reference_both_modes)
{
    const size_t cap = 4096 + 13;
    float *x = qs_malloc(cap * sizeof *x);
    uint8_t *cr = qs_malloc(cap), *c = qs_malloc(cap);
    ASSERT_TRUE(x && cr && c);
    size_t ne = fill_edges(x, 2048);
    fill_random(x + ne, cap - ne, 5);
    for (size_t p = 0; p < N_PATHS; p++) {
        if (!path_available(p))
            continue;
        for (int mode = 0; mode < 2; mode++)
            for (size_t n = cap - 17; n <= cap; n++) {
                hif8_codes_encode_ref_impl(x, cr, n, mode);
                memset(c, 0xAA, cap);
                paths[p].enc(x, c, n, mode);
                for (size_t i = 0; i < n; i++)
                    if (c[i] != cr[i]) {
                        TEST_FAIL_AT("%s mode %d: x=%a -> 0x%02X, reference 0x%02X", paths[p].name,
                                     mode, x[i], c[i], cr[i]);
                        goto out;
                    }
                if (n < cap && c[n] != 0xAA) {
                    TEST_FAIL_AT("%s wrote past n=%zu", paths[p].name, n);
                    goto out;
                }
            }
    }
out:
    qs_free(x);
    qs_free(cr);
    qs_free(c);
}

/* The statistics on a tensor whose answer is known by hand, for every path. */
TEST(hif8_simd, fakequant_stats_exact_on_crafted_tensor)
{
    /* scale 2: t = 2x.  1.0625*2 = 2.125 (tie, spacing 0.25 -> 2.25 -> y 1.125);
     * 20000*2 = 40000 and Inf clip to 32768 -> y 16384; 1e-8*2 underflows to 0;
     * 0x1p-24 * 2 = 2^-23 is the underflow tie -> 2^-22 -> y 2^-23; -3 exact; NaN passes. */
    float x[19] = {1.0625f, 20000.0f, 1e-8f, 0x1p-24f, -3.0f, NAN, INFINITY, 0.0f, -0.0f,
                   -20000.0f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f};
    const float want_y[19] = {1.125f, 16384.0f, 0.0f, 0x1p-23f, -3.0f, NAN, 16384.0f, 0.0f, 0.0f,
                              -16384.0f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f};
    double sq = 0, ss = 0;
    for (int i = 0; i < 19; i++)
        if (i != 5 && i != 6) {
            double e = (double)want_y[i] - (double)x[i];
            sq += e * e;
            ss += (double)x[i] * x[i];
        }
    for (int level = CPU_LEVEL_SCALAR; level <= CPU_LEVEL_AVX512; level++) {
        if (cpu_detected_level() < level)
            continue;
        float y[19];
        hif8_stats st;
        cpu_limit(level);
        hif8_fakequant(x, y, 19, 2.0f, 1, &st);
        cpu_limit(CPU_LEVEL_AVX512BF16);
        for (int i = 0; i < 19; i++) {
            if (i == 5) {
                ASSERT_TRUE(y[i] != y[i]);
                continue;
            }
            ASSERT_EQ_INT(memcmp(&y[i], &want_y[i], sizeof y[i]), 0); /* +0, never -0 */
        }
        ASSERT_TRUE(isinf(st.amax));
        ASSERT_EQ_INT(st.n_clipped, 3);
        ASSERT_EQ_INT(st.n_underflow, 1);
        ASSERT_EQ_INT(st.n_nan, 1);
        ASSERT_TRUE(isinf(st.sq_err) && isinf(st.sq_sum)); /* the Inf input */
        x[6] = 1.0f; /* without the Inf: finite sums */
        cpu_limit(level);
        hif8_fakequant(x, y, 19, 2.0f, 1, &st);
        cpu_limit(CPU_LEVEL_AVX512BF16);
        x[6] = INFINITY;
        ASSERT_EQ_INT(st.n_clipped, 2);
        ASSERT_NEAR(st.amax, 20000.0, 0);
        ASSERT_NEAR(st.sq_err, sq, 1e-9 * sq);
        ASSERT_NEAR(st.sq_sum, ss + 1.0, 1e-9 * ss);
    }
}

TEST(hif8_simd, fakequant_without_sq_err_reports_zero_sums)
{
    float x[5] = {1.1f, -2.3f, 5.0f, 0.01f, 40000.0f}, y[5];
    hif8_stats st;
    hif8_fakequant(x, y, 5, 1.0f, 0, &st);
    ASSERT_TRUE(st.sq_err == 0.0 && st.sq_sum == 0.0);
    ASSERT_EQ_INT(st.n_clipped, 1);
    ASSERT_NEAR(st.amax, 40000.0, 0);
    hif8_fakequant(x, y, 0, 1.0f, 1, &st); /* empty tensor */
    ASSERT_TRUE(st.amax == 0.0f && st.n_clipped == 0 && st.sq_err == 0.0);
}

/* The W8A8 operands: hif8_scaled_values (dispatched and AVX-512) give
 * decode(encode_sat(fl(x * scale))) bit for bit, NaN as decode gives it, and
 * count the non-finite x; hif8_row_scale's max |x| ignores NaN. */
TEST(hif8_simd, w8a8_scaled_values_and_absmax_match_the_scalar_definition)
{
    const size_t cap = 4096 + 13;
    float *x = qs_malloc(cap * sizeof *x), *y = qs_malloc((cap + 1) * sizeof *y);
    float *yr = qs_malloc(cap * sizeof *yr);
    ASSERT_TRUE(x && y && yr);
    size_t ne = fill_edges(x, 2048);
    fill_random(x + ne, cap - ne, 9);
    for (size_t k = 0; k < N_SCALES; k++) {
        const float s = scales[k];
        size_t bad_ref = 0;
        for (size_t i = 0; i < cap; i++) {
            yr[i] = hif8_decode(hif8_encode(x[i] * s, HIF8_SAT));
            bad_ref += !isfinite(x[i]);
        }
        for (size_t n = cap - 17; n <= cap; n++) {
            size_t nb_ref = 0;
            for (size_t i = 0; i < n; i++)
                nb_ref += !isfinite(x[i]);
            for (int v = 0; v < 3; v++) {
                if (v == 2 && cpu_detected_level() < CPU_LEVEL_AVX512)
                    continue;
                y[n] = 12345.0f;
                size_t nb = v == 0   ? hif8_scaled_values(x, y, n, s)
                            : v == 1 ? hif8_scaled_values_ref_impl(x, y, n, s)
                                     : hif8_scaled_values_avx512_impl(x, y, n, s);
                for (size_t i = 0; i < n; i++)
                    if (memcmp(&y[i], &yr[i], sizeof *y)) {
                        TEST_FAIL_AT("path %d scale %a: x=%a -> %a, expected %a", v, s, x[i],
                                     y[i], yr[i]);
                        goto out;
                    }
                ASSERT_EQ_INT(nb, nb_ref);
                ASSERT_TRUE(y[n] == 12345.0f); /* nothing written past n */
            }
        }
        ASSERT_TRUE(bad_ref > 0);
    }
    /* max |x| over the non-NaN values, for every length and start */
    for (size_t n = 0; n <= 70; n++)
        for (size_t off = 0; off < 3; off++) {
            float *z = x + 100 * off + n; /* edge values: NaN, Inf, denormals on the way */
            float want = hif8_absmax_ref_impl(z, n);
            float got = cpu_detected_level() >= CPU_LEVEL_AVX512 ? hif8_absmax_avx512_impl(z, n)
                                                                   : want;
            if (memcmp(&got, &want, sizeof got)) {
                TEST_FAIL_AT("absmax n %zu: %a, expected %a", n, got, want);
                goto out;
            }
        }
    {
        float v[5] = {NAN, -3.0f, NAN, 2.0f, -0.0f};
        ASSERT_TRUE(hif8_absmax_ref_impl(v, 5) == 3.0f);
        if (cpu_detected_level() >= CPU_LEVEL_AVX512)
            ASSERT_TRUE(hif8_absmax_avx512_impl(v, 5) == 3.0f);
    }
out:
    qs_free(x);
    qs_free(y);
    qs_free(yr);
}
