/* bench_attn.c: attention forward alone on the d768-L12 bench layer shape
 * (B=8 x T=256, 12 heads, head_dim 64; inference and with saved probabilities)
 * and a decode step (B=8, T=1 on 1023 cached positions), for the CPU's level
 * and, in the same run, the portable path (cpu_limit(CPU_LEVEL_AVX2)).
 * Then the training backward (attn_backward) on the bench_train layer shapes
 * (B=4 x T=256: dim-288 6 heads x 48, dim-768 12 heads x 64), the portable and
 * the CPU's path alternating call by call.
 * Prints medians of REPS calls of wall time and process CPU time (the machine
 * is shared: CPU time is what load distorts least), GFLOP/s per CPU-second
 * (forward: 4 flops per causal (query, key, dim); backward: 8) and the
 * same-run ratio.
 * usage: bench_attn [REPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "qs/cpu.h"
#include "qs/layers.h"
#include "qs/mem.h"
#include "bench_stats.h"

static void fill(float *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

typedef struct shape {
    const char *name;
    int B, T, pos0, Tcap, H, KVH, hd, save_att;
} shape;

/* median CPU seconds of reps calls; *wall gets the median wall seconds */
static double run(const shape *s, int reps, double *wall)
{
    size_t nq = (size_t)s->B * s->T * s->H * s->hd, nkv = (size_t)s->B * s->Tcap * s->KVH * s->hd;
    size_t na = s->save_att ? (size_t)s->B * s->H * s->T * s->Tcap : 1;
    float *q = qs_malloc(nq * 4), *k = qs_malloc(nkv * 4), *v = qs_malloc(nkv * 4);
    float *o = qs_malloc(nq * 4), *att = qs_malloc(na * 4);
    float *scratch = qs_malloc(attn_scratch_elems(s->B, s->Tcap, s->KVH, s->hd) * 4);
    double cpu[64], w[64];
    if (!q || !k || !v || !o || !att || !scratch) {
        fprintf(stderr, "bench_attn: out of memory\n");
        exit(1);
    }
    fill(q, nq, 1);
    fill(k, nkv, 2);
    fill(v, nkv, 3);
    attn_forward(o, s->save_att ? att : NULL, q, k, v, s->B, s->T, s->pos0, s->Tcap, s->H, s->KVH,
                 s->hd, scratch);   /* warm-up */
    for (int r = 0; r < reps; r++) {
        double c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
        double w0 = bench_clock_s(CLOCK_MONOTONIC);
        attn_forward(o, s->save_att ? att : NULL, q, k, v, s->B, s->T, s->pos0, s->Tcap, s->H,
                     s->KVH, s->hd, scratch);
        cpu[r] = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        w[r] = bench_clock_s(CLOCK_MONOTONIC) - w0;
    }
    qs_free(q);
    qs_free(k);
    qs_free(v);
    qs_free(o);
    qs_free(att);
    qs_free(scratch);
    *wall = bench_median(w, reps);
    return bench_median(cpu, reps);
}

static double flops(const shape *s)
{
    double keys = 0;
    for (int t = 0; t < s->T; t++)
        keys += s->pos0 + t + 1;
    return 4.0 * s->B * s->H * keys * s->hd;
}

/* Backward of one layer: the portable path and the CPU's level alternate call
 * by call (gradients zeroed outside the timing); medians into cpu[2], wall[2]. */
static void run_backward(const shape *s, int reps, int level, double cpu[2], double wall[2])
{
    size_t nq = (size_t)s->B * s->T * s->H * s->hd, nkv = (size_t)s->B * s->T * s->KVH * s->hd;
    size_t na = (size_t)s->B * s->H * s->T * s->T;
    float *q = qs_malloc(nq * 4), *k = qs_malloc(nkv * 4), *v = qs_malloc(nkv * 4);
    float *o = qs_malloc(nq * 4), *g = qs_malloc(nq * 4), *att = qs_malloc(na * 4);
    float *d = qs_malloc((nq + 2 * nkv) * 4);
    double c[2][64], w[2][64];
    if (!q || !k || !v || !o || !g || !att || !d) {
        fprintf(stderr, "bench_attn: out of memory\n");
        exit(1);
    }
    fill(q, nq, 1);
    fill(k, nkv, 2);
    fill(v, nkv, 3);
    fill(g, nq, 4);
    attn_forward(o, att, q, k, v, s->B, s->T, 0, s->T, s->H, s->KVH, s->hd, NULL);
    for (int r = -1; r < reps; r++)   /* r = -1: warm-up */
        for (int path = 0; path < 2; path++) {
            cpu_limit(path ? level : CPU_LEVEL_AVX2);
            memset(d, 0, (nq + 2 * nkv) * 4);
            double c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
        double w0 = bench_clock_s(CLOCK_MONOTONIC);
            attn_backward(d, d + nq, d + nq + nkv, g, att, q, k, v, s->B, s->T, s->H, s->KVH,
                          s->hd);
            if (r >= 0) {
                c[path][r] = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
                w[path][r] = bench_clock_s(CLOCK_MONOTONIC) - w0;
            }
        }
    cpu_limit(level);
    for (int path = 0; path < 2; path++) {
        cpu[path] = bench_median(c[path], reps);
        wall[path] = bench_median(w[path], reps);
    }
    qs_free(q);
    qs_free(k);
    qs_free(v);
    qs_free(o);
    qs_free(g);
    qs_free(att);
    qs_free(d);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
    static const shape shapes[] = {
        {"prompt B8xT256 h12x64", 8, 256, 0, 256, 12, 12, 64, 0},
        {"prompt + saved att", 8, 256, 0, 256, 12, 12, 64, 1},
        {"decode B8 T1 @1023", 8, 1, 1023, 1024, 12, 12, 64, 0},
    };
    int level = cpu_level(), threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("attention forward, %s, %d threads, median of %d calls\n", cpu_describe(), threads,
           reps);
    printf("%-24s %-10s %10s %10s %12s\n", "shape", "path", "wall ms", "cpu ms", "GFLOP/cpu-s");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        double wp, wf, cp, cf;
        cpu_limit(CPU_LEVEL_AVX2);
        cp = run(s, reps, &wp);
        cpu_limit(level);
        cf = run(s, reps, &wf);
        printf("%-24s %-10s %10.3f %10.3f %12.1f\n", s->name, "portable", wp * 1e3, cp * 1e3,
               flops(s) / cp * 1e-9);
        printf("%-24s %-10s %10.3f %10.3f %12.1f   cpu ratio %.2fx\n", "", cpu_level_name(level),
               wf * 1e3, cf * 1e3, flops(s) / cf * 1e-9, cp / cf);
    }
    static const shape bwd[] = {
        {"bwd dim-288 B4xT256 6x48", 4, 256, 0, 256, 6, 6, 48, 1},
        {"bwd dim-768 B4xT256 12x64", 4, 256, 0, 256, 12, 12, 64, 1},
    };
    printf("attention backward (training), portable and %s alternating\n", cpu_level_name(level));
    for (size_t i = 0; i < sizeof bwd / sizeof bwd[0]; i++) {
        const shape *s = &bwd[i];
        double c[2], w[2];
        run_backward(s, reps, level, c, w);
        printf("%-26s %-8s %10.3f %10.3f %12.1f\n", s->name, "portable", w[0] * 1e3, c[0] * 1e3,
               2 * flops(s) / c[0] * 1e-9);
        printf("%-26s %-8s %10.3f %10.3f %12.1f   cpu ratio %.2fx\n", "", cpu_level_name(level),
               w[1] * 1e3, c[1] * 1e3, 2 * flops(s) / c[1] * 1e-9, c[0] / c[1]);
    }
    return 0;
}
