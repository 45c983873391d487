/* demo_hif8.c: qatscope demo --hif8 — the HiF8 showcase (moved here from
 * cmd_demo.c when `demo` became the training demo; see cmd_demo.c): (1) a few values
 * through the codec, (2) the tapered-precision summary computed from the code
 * table, (3) one synthetic activation tensor (seeded, heavy-tailed, with an
 * outlier spike) fake-quantized under a well-predicted and a stale delayed
 * scale: the amax-saturation failure in miniature.  Output is deterministic
 * (fixed seed; every fake-quant path gives the same bits).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "demo.h"
#include "qs/hif8.h"
#include "qs/mem.h"
#include "qs/rng.h"

#define DEMO_SEED 20240917u
#define DEMO_ELEMS ((size_t)1 << 18)
#define DEMO_SPIKE_ELEMS 24
#define DEMO_SPIKE_GAIN 8.0 /* spike amplitude / previous step's amax */

static double demo_rng_uniform(uint64_t *s)
{
    return ((double)(rng_splitmix64(s) >> 11) + 0.5) * 0x1p-53;
}

static double demo_rng_normal(uint64_t *s)
{
    return sqrt(-2.0 * log(demo_rng_uniform(s))) * cos(6.283185307179586 * demo_rng_uniform(s));
}

/* Activation-like values: Gaussian bulk with a Cauchy-like tail (5 %). */
static void demo_activations_fill(float *x, size_t n, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        double v = 0.5 * demo_rng_normal(state);
        if (demo_rng_uniform(state) < 0.05)
            v /= 0.1 + demo_rng_uniform(state);
        x[i] = (float)v;
    }
}

static void demo_tour(void)
{
    static const float values[] = {1.0f, 1.0625f, 0.3f, 18.0f, 300.0f, 1e-6f, 40000.0f, 1e-8f};
    printf("1. A few values (round to nearest, ties away from zero; saturating mode)\n");
    printf("   %-10s %-5s %-14s %-14s %s\n", "input", "code", "S_DOT_EXP_MAN", "value", "rel_err");
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        uint8_t c = hif8_encode(values[i], HIF8_SAT);
        float v = hif8_decode(c);
        char bits[16];
        printf("   %-10g 0x%02X  %-14s %-14.9g %+.2f%%\n", (double)values[i], c,
               hif8_fields_format(c, bits, sizeof bits), (double)v,
               100.0 * ((double)v - (double)values[i]) / (double)values[i]);
    }
    printf("\n");
}

/* Per stored-mantissa width: binades, positive values, smallest/largest, worst error. */
static void demo_precision(void)
{
    printf("2. Tapered precision (positive values, from the 256-code table)\n");
    printf("   %-9s %-14s %-7s %-14s %-14s %s\n", "mant_bits", "exponents", "values", "smallest",
           "largest", "worst rounding error");
    for (int m = 3; m >= 0; m--) {
        int n = 0, emin = 99, emax = -99, aemin = 99, aemax = 0;
        float lo = INFINITY, hi = 0.0f;
        for (int c = 1; c < 0x80; c++) {
            hif8_fields f;
            hif8_fields_get((uint8_t)c, &f);
            if (f.cls == HIF8_CLASS_INF || f.mant_bits != m ||
                (m == 0 && f.cls != HIF8_CLASS_DENORMAL))
                continue;
            float v = hif8_decode((uint8_t)c);
            n++;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            emin = f.exponent < emin ? f.exponent : emin;
            emax = f.exponent > emax ? f.exponent : emax;
            int ae = abs(f.exponent);
            aemin = ae < aemin ? ae : aemin;
            aemax = ae > aemax ? ae : aemax;
        }
        /* half a spacing at the bottom of a binade; powers of two: midpoint 1.5 * 2^E */
        double worst = m ? ldexp(1.0, -(m + 1)) : 0.5 / 1.5;
        char ex[32];
        if (m == 1 || m == 2) /* both signs of the exponent */
            snprintf(ex, sizeof ex, "|E| %d..%d", aemin, aemax);
        else
            snprintf(ex, sizeof ex, "E %d..%d", emin, emax);
        printf("   %-9d %-14s %-7d %-14.6g %-14.6g %.2f%%\n", m, ex, n, (double)lo, (double)hi,
               100.0 * worst);
    }
    printf("   (mant_bits 0 = the denormal powers of two; largest finite 32768, above it Inf or\n"
           "    saturation; below 2^-23 everything is 0)\n\n");
}

static void demo_fakequant_row(const char *name, const float *x, float *y, size_t n, float scale)
{
    hif8_stats st;
    hif8_fakequant(x, y, n, scale, 1, &st);
    double qsnr = st.sq_err > 0 ? 10.0 * log10(st.sq_sum / st.sq_err) : INFINITY;
    float ymax = 0.0f;
    for (size_t i = 0; i < n; i++)
        ymax = fabsf(y[i]) > ymax ? fabsf(y[i]) : ymax;
    printf("   %-26s %-10.4g %-8.4g %-8zu %7.4f%%  %-9zu %-8.4g %.2f dB\n", name, (double)scale,
           (double)ymax, st.n_clipped, 100.0 * (double)st.n_clipped / (double)n, st.n_underflow,
           (double)st.amax, qsnr);
}

static int demo_saturation(void)
{
    float *prev = qs_malloc(DEMO_ELEMS * sizeof(float)), *cur = qs_malloc(DEMO_ELEMS * sizeof(float)),
          *y = qs_malloc(DEMO_ELEMS * sizeof(float));
    if (!prev || !cur || !y) {
        qs_free(prev);
        qs_free(cur);
        qs_free(y);
        return cli_error("demo: out of memory for 3 x %zu floats", DEMO_ELEMS);
    }
    uint64_t state = DEMO_SEED;
    demo_activations_fill(prev, DEMO_ELEMS, &state);
    demo_activations_fill(cur, DEMO_ELEMS, &state);
    hif8_stats st_prev;
    hif8_fakequant(prev, y, DEMO_ELEMS, 1.0f, 0, &st_prev);
    /* this step: an outlier spike the previous step did not have */
    for (int k = 0; k < DEMO_SPIKE_ELEMS; k++) {
        size_t i = (size_t)(rng_splitmix64(&state) % DEMO_ELEMS);
        double mag = DEMO_SPIKE_GAIN * st_prev.amax * (0.25 + 0.75 * demo_rng_uniform(&state));
        cur[i] = (float)(k & 1 ? -mag : mag);
    }
    hif8_stats st_cur;
    hif8_fakequant(cur, y, DEMO_ELEMS, 1.0f, 0, &st_cur);
    printf("3. Delayed scaling and amax saturation (%zu activations, seed %u)\n", DEMO_ELEMS,
           DEMO_SEED);
    printf("   previous step amax %.4g; this step has %d outliers up to %.0fx that: amax %.4g\n",
           (double)st_prev.amax, DEMO_SPIKE_ELEMS, DEMO_SPIKE_GAIN, (double)st_cur.amax);
    printf("   scale maps the predicted amax to 32768 (HiF8 max); y = q(x * scale) / scale\n");
    printf("   %-26s %-10s %-8s %-8s %-9s %-9s %-8s %s\n", "scale from", "scale", "max|y|",
           "clipped", "rate", "underflow", "amax", "QSNR");
    demo_fakequant_row("this step's amax (good)", cur, y, DEMO_ELEMS,
                       HIF8_MAX_FINITE / st_cur.amax);
    demo_fakequant_row("previous amax (stale)", cur, y, DEMO_ELEMS,
                       HIF8_MAX_FINITE / st_prev.amax);
    demo_fakequant_row("previous amax, 16/amax", cur, y, DEMO_ELEMS, 16.0f / st_prev.amax);
    printf("   The stale scale clips every outlier to the previous amax (max|y|), and the\n"
           "   straight-through estimator passes gradients as if nothing was clipped.  The\n"
           "   16/amax choice (AMCT-style: bulk in the 3-bit binades) keeps 2^11 of headroom.\n");
    qs_free(prev);
    qs_free(cur);
    qs_free(y);
    return 0;
}

int demo_hif8_run(int argc, char **argv)
{
    if (argc > 1)
        return cli_error("demo --hif8: unexpected argument '%s' (argument 2); it takes none",
                         argv[1]);
    printf("qatscope demo --hif8: HiF8 showcase\n\n");
    demo_tour();
    demo_precision();
    return demo_saturation();
}
