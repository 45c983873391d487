/* bench_hif8.c: HiF8 fake-quant throughput over a 64 MiB fp32 buffer.
 *
 * Data: activation-like, seeded: mostly Gaussian, a heavy tail (Gaussian /
 * uniform, i.e. Cauchy-like) and a few outliers; scale = 16 / amax (the
 * AMCT-style choice), so most values land in the 3-bit-mantissa binades.
 * Measured in the same run, medians of several repetitions:
 *   scale-only  y = x * scale (the memory-bandwidth baseline)
 *   scalar      hif8_fakequant_ref, with sq_err
 *   avx2        hif8_fakequant_avx2_impl, with and without sq_err (if the CPU has it)
 *   vector      hif8_fakequant (dispatched), with and without sq_err
 * and the ratios vector/scalar (target >= 8) and vector/scale-only time
 * (target <= 1.5).  The machine is shared: read the ratios, not the absolutes.
 * Every vector result is checked against the scalar one before timing.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qs/cpu.h"
#include "qs/hif8.h"
#include "qs/hif8_test.h"
#include "qs/mem.h"

#define BENCH_BYTES ((size_t)64 << 20)
#define BENCH_REPS 11
#define BENCH_REPS_SCALAR 3

typedef struct {
    const float *x;
    float *y;
    size_t n;
    float scale;
} bench_buf;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s) { return ((double)(rng_next(s) >> 11) + 0.5) * 0x1p-53; }

static double rng_normal(uint64_t *s)
{
    return sqrt(-2.0 * log(rng_uniform(s))) * cos(6.283185307179586 * rng_uniform(s));
}

static void fill_activations(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        double u = rng_uniform(&seed), v = rng_normal(&seed);
        if (u < 0.9)
            x[i] = (float)(0.5 * v);
        else if (u < 0.9999)
            x[i] = (float)(0.5 * v / (0.05 + rng_uniform(&seed)));
        else
            x[i] = (float)(200.0 * v);
    }
}

/* The baseline y = x * scale, vectorised for sure: with AVX-512 when the CPU
 * has it (full-cache-line stores, like the kernel's; this is faster than
 * 16-byte stores on some CPUs, so anything narrower flatters the kernel),
 * else SSE2 (baseline x86-64).  The target attribute keeps it in this file. */
__attribute__((target("avx512f"))) static void scale_only_avx512(const float *x, float *y,
                                                                  size_t n, float scale)
{
    const __m512 s = _mm512_set1_ps(scale);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), s));
    for (; i < n; i++)
        y[i] = x[i] * scale;
}

static void scale_only_sse2(const float *x, float *y, size_t n, float scale)
{
    const __m128 s = _mm_set1_ps(scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_ps(y + i, _mm_mul_ps(_mm_loadu_ps(x + i), s));
        _mm_storeu_ps(y + i + 4, _mm_mul_ps(_mm_loadu_ps(x + i + 4), s));
    }
    for (; i < n; i++)
        y[i] = x[i] * scale;
}

static void scale_only(const float *x, float *y, size_t n, float scale)
{
    if (cpu_detected_level() >= CPU_LEVEL_AVX512)
        scale_only_avx512(x, y, n, scale);
    else
        scale_only_sse2(x, y, n, scale);
}

typedef void (*fq_fn)(const float *, float *, size_t, float, int, hif8_stats *);

static double run_once(const bench_buf *b, fq_fn fq, int want)
{
    hif8_stats st;
    double t0 = now_s();
    if (fq)
        fq(b->x, b->y, b->n, b->scale, want, &st);
    else
        scale_only(b->x, b->y, b->n, b->scale);
    return now_s() - t0;
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return t[n / 2];
}

static void report(const char *name, size_t n, double sec)
{
    printf("  %-28s %8.1f Melem/s  (%7.2f ms)\n", name, (double)n / sec * 1e-6, sec * 1e3);
}

static int same_result(const bench_buf *b, fq_fn fq, float *y_ref, const hif8_stats *s_ref)
{
    hif8_stats st;
    fq(b->x, b->y, b->n, b->scale, 1, &st);
    return !memcmp(b->y, y_ref, b->n * sizeof *y_ref) && st.n_clipped == s_ref->n_clipped &&
           st.n_underflow == s_ref->n_underflow && st.amax == s_ref->amax &&
           st.sq_err == s_ref->sq_err && st.sq_sum == s_ref->sq_sum;
}

int main(void)
{
    size_t n = BENCH_BYTES / sizeof(float);
    float *x = qs_malloc(BENCH_BYTES), *y = qs_malloc(BENCH_BYTES), *y_ref = qs_malloc(BENCH_BYTES);
    if (!x || !y || !y_ref) {
        fprintf(stderr, "bench_hif8: cannot allocate 3 x 64 MiB\n");
        return 2;
    }
    fill_activations(x, n, 42);
    bench_buf b = {x, y, n, 1.0f};
    hif8_stats s_ref;
    hif8_fakequant_ref(x, y_ref, n, 1.0f, 1, &s_ref);
    b.scale = 16.0f / s_ref.amax;
    hif8_fakequant_ref(x, y_ref, n, b.scale, 1, &s_ref);
    printf("bench_hif8: %zu fp32 elements (64 MiB), scale %.4g, cpu %s, single thread\n", n,
           (double)b.scale, cpu_describe());
    printf("  data: amax %.4g, clipped %zu, underflow %zu, QSNR %.2f dB\n", (double)s_ref.amax,
           s_ref.n_clipped, s_ref.n_underflow, 10.0 * log10(s_ref.sq_sum / s_ref.sq_err));
    if (!same_result(&b, hif8_fakequant, y_ref, &s_ref)) {
        fprintf(stderr, "bench_hif8: vector result differs from the scalar reference\n");
        return 1;
    }
    int have_avx2 = cpu_detected_level() >= CPU_LEVEL_AVX2;
    if (have_avx2 && !same_result(&b, hif8_fakequant_avx2_impl, y_ref, &s_ref)) {
        fprintf(stderr, "bench_hif8: avx2 result differs from the scalar reference\n");
        return 1;
    }

    /* round-robin: every repetition runs each variant once, so load changes on
     * a shared machine hit all of them alike; then medians */
    enum { V_BASE, V_VEC_SQ, V_VEC, V_AVX2, V_N };
    double t[V_N][BENCH_REPS], ts[BENCH_REPS_SCALAR];
    for (int r = 0; r < BENCH_REPS; r++) {
        t[V_BASE][r] = run_once(&b, NULL, 0);
        t[V_VEC_SQ][r] = run_once(&b, hif8_fakequant, 1);
        t[V_VEC][r] = run_once(&b, hif8_fakequant, 0);
        t[V_AVX2][r] = have_avx2 ? run_once(&b, hif8_fakequant_avx2_impl, 1) : 0;
    }
    for (int r = 0; r < BENCH_REPS_SCALAR; r++)
        ts[r] = run_once(&b, hif8_fakequant_ref, 1);
    double t_base = median(t[V_BASE], BENCH_REPS), t_vec_sq = median(t[V_VEC_SQ], BENCH_REPS);
    double t_vec = median(t[V_VEC], BENCH_REPS), t_avx2 = median(t[V_AVX2], BENCH_REPS);
    double t_scalar = median(ts, BENCH_REPS_SCALAR);

    report(cpu_detected_level() >= CPU_LEVEL_AVX512 ? "scale-only y = x*scale (avx512)"
                                                    : "scale-only y = x*scale (sse2)",
           n, t_base);
    report("scalar fake-quant+stats", n, t_scalar);
    if (have_avx2)
        report("avx2 fake-quant+stats", n, t_avx2);
    char name[64];
    snprintf(name, sizeof name, "%s fake-quant+stats", cpu_level_name(cpu_level()));
    report(name, n, t_vec_sq);
    snprintf(name, sizeof name, "%s fake-quant, no sq_err", cpu_level_name(cpu_level()));
    report(name, n, t_vec);

    double speedup = t_scalar / t_vec_sq;
    printf("  vector/scalar speed-up (both with sq_err)   %6.2fx  target >= 8    %s\n", speedup,
           speedup >= 8.0 ? "PASS" : "MISS");
    printf("  vector time / scale-only time, stats        %6.2fx  target <= 1.5  %s\n",
           t_vec / t_base, t_vec / t_base <= 1.5 ? "PASS" : "MISS");
    printf("  vector time / scale-only time, + sq_err     %6.2fx  target <= 1.5  %s\n",
           t_vec_sq / t_base, t_vec_sq / t_base <= 1.5 ? "PASS" : "MISS");
    if (have_avx2)
        printf("  avx2: %.2fx scalar, %.2fx scale-only time\n", t_scalar / t_avx2, t_avx2 / t_base);
    qs_free(x);
    qs_free(y);
    qs_free(y_ref);
    return 0;
}
