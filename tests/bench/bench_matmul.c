/* bench_matmul.c: GFLOP/s of the Linear products on the model shapes.
 *
 * For each shape (N rows, IN -> O) and product (fwd, dX, dW) it times, in the
 * same run: OpenBLAS sgemm (MATMUL_FP32_BLAS, the baseline), our fp32 path and
 * our bf16 path, each with the weight packed on the fly (the simple calls) and
 * with a matmul_wpack made once (dW has no weight operand, so one column).
 * Prints medians of R runs, ratios against sgemm from the same run and the
 * fraction of this machine's peak (2 Zen 5 cores: fp32 FMA ~445 GFLOP/s,
 * AVX512-BF16 ~890 GFLOP/s).  Usage: bench_matmul [REPS] [small|large|all]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qs/cpu.h"
#include "qs/matmul.h"
#include "qs/mem.h"

#define PEAK_FP32_GFLOPS 445.0
#define PEAK_BF16_GFLOPS 890.0

typedef struct bench_shape {
    const char *name;
    int N, IN, O;
} bench_shape;

static const bench_shape shapes[] = {
    {"s15M qkvo", 2048, 288, 288},     {"s15M up", 2048, 288, 768},
    {"s15M down", 2048, 768, 288},     {"s15M head", 2048, 288, 32000},
    {"d768 qkvo", 2048, 768, 768},     {"d768 up", 2048, 768, 2048},
    {"d768 down", 2048, 2048, 768},    {"d768 head", 2048, 768, 32000},
};

enum { OP_FWD, OP_DX, OP_DW };
enum { PATH_SGEMM, PATH_FP32, PATH_FP32_PK, PATH_BF16, PATH_BF16_PK, PATH_COUNT };
static const char *const path_names[PATH_COUNT] = {"sgemm", "fp32", "fp32-pk", "bf16",
                                                  "bf16-pk"};

typedef struct bench_bufs {
    float *x, *w, *out, *dout, *dx, *dw;
    matmul_wpack *pk32, *pk16;
} bench_bufs;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run_once(const bench_shape *s, int op, int path, bench_bufs *b)
{
    int prec = path == PATH_SGEMM                         ? MATMUL_FP32_BLAS
               : path == PATH_FP32 || path == PATH_FP32_PK ? MATMUL_FP32
                                                          : MATMUL_BF16;
    matmul_wpack *pk = path == PATH_FP32_PK ? b->pk32 : path == PATH_BF16_PK ? b->pk16 : NULL;
    if (op == OP_FWD) {
        if (pk)
            matmul_forward_packed(b->out, b->x, pk, NULL, s->N);
        else
            matmul_forward(b->out, b->x, b->w, NULL, s->N, s->IN, s->O, prec);
    } else if (op == OP_DX) {
        if (pk)
            matmul_backward_packed(b->dx, NULL, NULL, b->dout, b->x, pk, s->N);
        else
            matmul_backward(b->dx, NULL, NULL, b->dout, b->x, b->w, s->N, s->IN, s->O, prec);
    } else {
        matmul_backward(NULL, b->dw, NULL, b->dout, b->x, b->w, s->N, s->IN, s->O, prec);
    }
}

static double median_gflops(const bench_shape *s, int op, int path, bench_bufs *b, int reps)
{
    double flops = 2.0 * s->N * s->IN * s->O, t[64];
    run_once(s, op, path, b); /* warm-up; packs the wpack once */
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        run_once(s, op, path, b);
        t[r] = now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return flops / t[reps / 2] * 1e-9;
}

static float *rand_buf(size_t n, unsigned *seed)
{
    float *p = qs_malloc(n * sizeof *p);
    if (!p)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = (float)((*seed >> 8) * (1.0 / 16777216.0) - 0.5);
    }
    return p;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    const char *which = argc > 2 ? argv[2] : "all";
    if (reps < 1 || reps > 63)
        reps = 5;
    printf("bench_matmul: cpu %s, %d reps, medians in GFLOP/s; ratios vs sgemm of the same run\n",
           cpu_describe(), reps);
    printf("%-10s %-3s %7s %7s %7s %7s %7s  %8s %8s %6s %6s\n", "shape", "op", path_names[0],
           path_names[1], path_names[2], path_names[3], path_names[4], "fp32/sg", "bf16/sg",
           "%pk32", "%pk16");
    int n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
    for (int si = 0; si < n_shapes; si++) {
        const bench_shape *s = &shapes[si];
        int large = s->O == 32000 || s->IN == 2048 || s->O == 2048;
        if ((!strcmp(which, "small") && large) || (!strcmp(which, "large") && !large))
            continue;
        unsigned seed = 1234u + (unsigned)si;
        bench_bufs b = {0};
        size_t nx = (size_t)s->N * s->IN, nw = (size_t)s->O * s->IN, no = (size_t)s->N * s->O;
        b.x = rand_buf(nx, &seed);
        b.w = rand_buf(nw, &seed);
        b.dout = rand_buf(no, &seed);
        b.out = rand_buf(no, &seed);
        b.dx = rand_buf(nx, &seed);
        b.dw = rand_buf(nw, &seed);
        b.pk32 = matmul_wpack_create(b.w, s->IN, s->O, MATMUL_FP32);
        b.pk16 = matmul_wpack_create(b.w, s->IN, s->O, MATMUL_BF16);
        if (!b.x || !b.w || !b.dout || !b.out || !b.dx || !b.dw || !b.pk32 || !b.pk16) {
            fprintf(stderr, "bench_matmul: out of memory for %s\n", s->name);
            return 2;
        }
        static const char *const op_names[] = {"fwd", "dX", "dW"};
        for (int op = OP_FWD; op <= OP_DW; op++) {
            double g[PATH_COUNT] = {0};
            for (int p = 0; p < PATH_COUNT; p++) {
                if (op == OP_DW && (p == PATH_FP32_PK || p == PATH_BF16_PK))
                    continue;
                g[p] = median_gflops(s, op, p, &b, reps);
            }
            double best32 = g[PATH_FP32_PK] > g[PATH_FP32] ? g[PATH_FP32_PK] : g[PATH_FP32];
            double best16 = g[PATH_BF16_PK] > g[PATH_BF16] ? g[PATH_BF16_PK] : g[PATH_BF16];
            printf("%-10s %-3s %7.1f %7.1f %7.1f %7.1f %7.1f  %7.2fx %7.2fx %5.0f%% %5.0f%%\n",
                   s->name, op_names[op], g[0], g[1], g[2], g[3], g[4], best32 / g[0],
                   best16 / g[0], 100.0 * best32 / PEAK_FP32_GFLOPS,
                   100.0 * best16 / PEAK_BF16_GFLOPS);
            fflush(stdout);
        }
        matmul_wpack_destroy(b.pk32);
        matmul_wpack_destroy(b.pk16);
        qs_free(b.x);
        qs_free(b.w);
        qs_free(b.dout);
        qs_free(b.out);
        qs_free(b.dx);
        qs_free(b.dw);
    }
    return 0;
}
