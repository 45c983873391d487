/* bench_attn.c: attention forward alone on the d768-L12 bench layer shape
 * (B=8 x T=256, 12 heads, head_dim 64; inference and with saved probabilities)
 * and a decode step (B=8, T=1 on 1023 cached positions), for the CPU's level
 * and, in the same run, the portable path (cpu_limit(CPU_LEVEL_AVX2)).
 * Prints medians of REPS calls of wall time and process CPU time (the machine
 * is shared: CPU time is what load distorts least), GFLOP/s per CPU-second
 * (4 flops per causal (query, key, dim)) and the same-run ratio.
 * usage: bench_attn [REPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "qs/cpu.h"
#include "qs/layers.h"
#include "qs/mem.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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
        double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        attn_forward(o, s->save_att ? att : NULL, q, k, v, s->B, s->T, s->pos0, s->Tcap, s->H,
                     s->KVH, s->hd, scratch);
        cpu[r] = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        w[r] = clock_s(CLOCK_MONOTONIC) - w0;
    }
    qs_free(q);
    qs_free(k);
    qs_free(v);
    qs_free(o);
    qs_free(att);
    qs_free(scratch);
    *wall = median(w, reps);
    return median(cpu, reps);
}

static double flops(const shape *s)
{
    double keys = 0;
    for (int t = 0; t < s->T; t++)
        keys += s->pos0 + t + 1;
    return 4.0 * s->B * s->H * keys * s->hd;
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
    return 0;
}
