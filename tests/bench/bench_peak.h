/* bench_peak.h: this host's arithmetic peak, measured in the same run.
 *
 * The issue targets are fractions of a reference peak (2 Zen 5 cores: fp32
 * FMA ~445 GFLOP/s, vdpbf16ps ~890).  Other hosts differ by 2x either way (a
 * Zen 4 runs 512-bit FMAs as two 256-bit halves: ~233 and ~468 on 2 cores),
 * so the benches also say what fraction of the host's own peak they reach:
 * register-only loops of 12 independent accumulator chains (enough to cover
 * the FMA latency on both pipes), one per thread of the team the products
 * use, one untimed run (an idle core takes tens of ms to reach its clock:
 * timed cold, the first kind measured read 96 of 233 GFLOP/s), then 3 runs
 * of ~50-100 ms, the median.  fp32 is the widest FMA the CPU has (512 or
 * 256 bits); bf16 is vdpbf16ps where there is AVX512-BF16 (64 flops a
 * vector), else 0 (bf16 pairs then run on the fp32 path).
 * bench_peak_bf16_path: the peak of the units the bf16 products run on: the
 * FMA units where the kernel widens pairs to fp32 (mm_bf16_fma_impl: Intel
 * cores, where vdpbf16ps issues at half their rate), vdpbf16ps otherwise. */
#ifndef QS_BENCH_PEAK_H
#define QS_BENCH_PEAK_H

#include <stdio.h>

#include "bench_stats.h"
#include "qs/cpu.h"
#include "qs/matmul_test.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BENCH_PEAK_X86 1
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

/* ~50 ms a run at 233 GFLOP/s of fp32 (a Zen 4's 2 cores) */
enum { BENCH_PEAK_ITERS = 16000000, BENCH_PEAK_RUNS = 3 };

#define BENCH_PEAK_12(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)

#ifdef BENCH_PEAK_X86
/* kind: 0 = 512-bit FMA, 1 = 256-bit FMA, 2 = vdpbf16ps; returns the flops
 * one thread did (the sum is checked so the chains are not dropped) */
__attribute__((target("avx512f"))) static double bench_peak_loop512(long iters, float *sink)
{
#define BENCH_PEAK_D(i) __m512 a##i = _mm512_set1_ps(0.001f * (float)(i));
#define BENCH_PEAK_F(i) a##i = _mm512_fmadd_ps(a##i, x, y);
#define BENCH_PEAK_S(i) s = _mm512_add_ps(s, a##i);
    BENCH_PEAK_12(BENCH_PEAK_D)
    __m512 x = _mm512_set1_ps(0.9999f), y = _mm512_set1_ps(1e-4f), s = _mm512_setzero_ps();
    for (long it = 0; it < iters; it++) {
        BENCH_PEAK_12(BENCH_PEAK_F)
    }
    BENCH_PEAK_12(BENCH_PEAK_S)
    *sink += _mm512_reduce_add_ps(s);
    return (double)iters * 12 * 32;
}

__attribute__((target("avx512f,avx512bf16"))) static double bench_peak_loopbf(long iters,
                                                                              float *sink)
{
#define BENCH_PEAK_B(i) a##i = _mm512_dpbf16_ps(a##i, x, x);
    BENCH_PEAK_12(BENCH_PEAK_D)
    __m512bh x = (__m512bh)_mm512_set1_epi16(0x3a83); /* bf16 ~0.001 */
    __m512 s = _mm512_setzero_ps();
    for (long it = 0; it < iters; it++) {
        BENCH_PEAK_12(BENCH_PEAK_B)
    }
    BENCH_PEAK_12(BENCH_PEAK_S)
    *sink += _mm512_reduce_add_ps(s);
    return (double)iters * 12 * 64;
}

__attribute__((target("avx2,fma"))) static double bench_peak_loop256(long iters, float *sink)
{
#define BENCH_PEAK_D8(i) __m256 a##i = _mm256_set1_ps(0.001f * (float)(i));
#define BENCH_PEAK_F8(i) a##i = _mm256_fmadd_ps(a##i, x, y);
#define BENCH_PEAK_S8(i) s = _mm256_add_ps(s, a##i);
    BENCH_PEAK_12(BENCH_PEAK_D8)
    __m256 x = _mm256_set1_ps(0.9999f), y = _mm256_set1_ps(1e-4f), s = _mm256_setzero_ps();
    for (long it = 0; it < iters; it++) {
        BENCH_PEAK_12(BENCH_PEAK_F8)
    }
    BENCH_PEAK_12(BENCH_PEAK_S8)
    float v[8];
    _mm256_storeu_ps(v, s);
    *sink += v[0] + v[7];
    return (double)iters * 12 * 16;
}
#endif

/* GFLOP/s of one kind over the whole thread team (wall clock), median of
 * BENCH_PEAK_RUNS; 0 where the CPU lacks the instructions. */
static double bench_peak_gflops(int kind)
{
#ifdef BENCH_PEAK_X86
    int lvl = cpu_level();
    if ((kind == 0 && lvl < CPU_LEVEL_AVX512) || (kind == 1 && lvl < CPU_LEVEL_AVX2) ||
        (kind == 2 && lvl < CPU_LEVEL_AVX512BF16))
        return 0.0;
    double runs[BENCH_PEAK_RUNS];
    float sink = 0.0f;
    for (int r = -1; r < BENCH_PEAK_RUNS; r++) {   /* r = -1: untimed */
        double flops = 0.0, t0 = bench_clock_s(CLOCK_MONOTONIC);
#ifdef _OPENMP
#pragma omp parallel reduction(+ : flops, sink)
#endif
        {
            long iters = kind == 2 ? BENCH_PEAK_ITERS / 2 : BENCH_PEAK_ITERS;
            flops += kind == 0   ? bench_peak_loop512(iters, &sink)
                     : kind == 1 ? bench_peak_loop256(iters, &sink)
                                 : bench_peak_loopbf(iters, &sink);
        }
        if (r >= 0)
            runs[r] = flops / (bench_clock_s(CLOCK_MONOTONIC) - t0) * 1e-9;
    }
    if (sink == 12345.0f) /* keeps the loops; never true in practice */
        printf("bench_peak: %g\n", (double)sink);
    return bench_median(runs, BENCH_PEAK_RUNS);
#else
    (void)kind;
    return 0.0;
#endif
}

typedef struct bench_peak {
    double fp32;      /* widest FMA, GFLOP/s */
    double vdpbf16ps; /* 0 without AVX512-BF16 */
} bench_peak;

static bench_peak bench_peak_measure(void)
{
    bench_peak p;
    p.fp32 = bench_peak_gflops(0);
    if (p.fp32 <= 0.0)
        p.fp32 = bench_peak_gflops(1);
    p.vdpbf16ps = bench_peak_gflops(2);
    return p;
}

/* The peak of the units the bf16 products use (fma_impl: the kernel widens
 * pairs to fp32 on the FMA units). */
static double bench_peak_bf16_path(const bench_peak *p, int fma_impl)
{
    return fma_impl || p->vdpbf16ps <= 0.0 ? p->fp32 : p->vdpbf16ps;
}

static void bench_peak_print(const char *bench, const bench_peak *p, int threads)
{
    printf("%s: this host's peak (register-only loops, %d thread%s, measured now): fp32 FMA "
           "%.0f GFLOP/s, vdpbf16ps %.0f GFLOP/s (the targets' reference: 445 and 890 on 2 Zen 5 "
           "cores)\n",
           bench, threads, threads == 1 ? "" : "s", p->fp32, p->vdpbf16ps);
}

/* The thread team the products use (1 without OpenMP). */
static int bench_peak_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Measures, prints (bench_peak_print) and returns the peak of the units the
 * bf16 products run on. */
static double bench_peak_report(const char *bench, bench_peak *p, int threads)
{
    *p = bench_peak_measure();
    bench_peak_print(bench, p, threads);
    return bench_peak_bf16_path(p, mm_bf16_fma_impl());
}

#endif
