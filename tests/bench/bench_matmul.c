/* bench_matmul.c: GFLOP/s of the Linear products on the model shapes.
 *
 * For each shape (N rows, IN -> O) and product (fwd, dX, dW) it times, in the
 * same run: OpenBLAS sgemm (MATMUL_FP32_BLAS, the baseline), our fp32 path and
 * our bf16 path, each with the weight packed on the fly (the simple calls) and
 * with a matmul_wpack made once plus a matmul_ws reused across calls ("-pk";
 * for dW, which has no weight operand, only the workspace differs).
 * Prints medians of R runs, ratios against sgemm from the same run and the
 * fraction of the reference peak (2 Zen 5 cores: fp32 FMA ~445 GFLOP/s,
 * AVX512-BF16 ~890 GFLOP/s) and of this host's own peak, measured first in
 * the same run (bench_peak.h: %h32 against its FMA units, %h16 against the
 * units the bf16 products run on).  Every path is first checked against sgemm (exit 1
 * on a mismatch), as a kernel that is fast but wrong must not print a figure.
 * Usage: bench_matmul [REPS] [small|large|all|1b|NAME] [cpu1] [rounds=R]
 *   all = small + large (the 110M-class shapes, N = 2048).
 *   1b: the 1B model's Linears (hidden 1536, intermediate 6144, vocab 153376) at
 *     N = 64 and 512, packed paths only (the unpacked ones would re-pack up to
 *     0.9 GB of weight per call; they print "-"), each line ending with the
 *     issue-13 targets: fp32-pk >= 60% of the fp32 peak, bf16-pk >= 60% of the
 *     bf16 peak, PASS or MISS.  Needs ~6 GB: run it under the bigmem lock.
 *   NAME: the shapes whose name starts with it ("1b down", "d768 head").
 *   cpu1: one thread timed by its own CPU time (robust on a busy machine);
 *     percentages are then of one core's peak (half of the above).
 * rounds=R (default 3 for 1b, else 1): every shape is timed R times, one round
 *   over all the chosen shapes after another, and each line prints the median
 *   of the rounds (then the rounds of fp32-pk | bf16-pk in brackets).  The
 *   host is shared: a burst of another tenant's load lasting a few seconds
 *   used to fall on every sample of the cells it overlapped (their sgemm too);
 *   across rounds minutes apart it falls on one round of a cell.
 * amx-pk: the opt-in MATMUL_BF16_AMX products (AMX tiles; another summation
 *   order than bf16, matmul.h) on a pack made once, forward and backward, "-"
 *   without AMX; amx/b16 is its ratio to bf16-pk in the same run, and on the 1B
 *   shapes "amx PASS/MISS" judges it against 60% of the bf16 peak too.
 * QS_BF16_DOT=vdpbf16ps|fma picks the kernel for bf16 pairs (qs/matmul_test.h:
 * the same bits; by default FMA on Intel cores, where vdpbf16ps has half the
 * FMA units' flop rate, vdpbf16ps elsewhere); the header says which ran, and
 * which OpenBLAS core sgemm uses (a CPU that OpenBLAS does not know runs its
 * generic "Prescott" kernels: set OPENBLAS_CORETYPE, e.g. SkylakeX).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "qs/cpu.h"
#include "qs/matmul.h"
#include "qs/matmul_test.h"
#include "qs/mem.h"

#include "bench_peak.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define PEAK_FP32_GFLOPS 445.0
#define PEAK_BF16_GFLOPS 890.0

enum { OP_FWD, OP_DX, OP_DW };
enum { PATH_SGEMM, PATH_FP32, PATH_FP32_PK, PATH_BF16, PATH_BF16_PK, PATH_AMX_PK, PATH_COUNT };
static const char *const path_names[PATH_COUNT] = {"sgemm", "fp32", "fp32-pk", "bf16",
                                                  "bf16-pk", "amx-pk"};

/* Fraction of the peak the 1B shapes must reach (issue 13). */
#define TARGET_FRACTION 0.60

enum { GROUP_SMALL, GROUP_LARGE, GROUP_1B };

typedef struct bench_shape {
    const char *name;
    int N, IN, O, group;
} bench_shape;

static const bench_shape shapes[] = {
    {"s15M qkvo", 2048, 288, 288, GROUP_SMALL},     {"s15M up", 2048, 288, 768, GROUP_SMALL},
    {"s15M down", 2048, 768, 288, GROUP_SMALL},     {"s15M head", 2048, 288, 32000, GROUP_LARGE},
    {"d768 qkvo", 2048, 768, 768, GROUP_SMALL},     {"d768 up", 2048, 768, 2048, GROUP_LARGE},
    {"d768 down", 2048, 2048, 768, GROUP_LARGE},    {"d768 head", 2048, 768, 32000, GROUP_LARGE},
    {"1b qo n64", 64, 1536, 1536, GROUP_1B},        {"1b kv n64", 64, 1536, 768, GROUP_1B},
    {"1b up n64", 64, 1536, 6144, GROUP_1B},        {"1b down n64", 64, 6144, 1536, GROUP_1B},
    {"1b head n64", 64, 1536, 153376, GROUP_1B},    {"1b qo n512", 512, 1536, 1536, GROUP_1B},
    {"1b kv n512", 512, 1536, 768, GROUP_1B},       {"1b up n512", 512, 1536, 6144, GROUP_1B},
    {"1b down n512", 512, 6144, 1536, GROUP_1B},    {"1b head n512", 512, 1536, 153376, GROUP_1B},
};

/* The unpacked paths are skipped on the 1B shapes (see the usage); AMX runs
 * on CPUs with it. */
static int path_skipped(const bench_shape *s, int op, int path)
{
    (void)op;
    if (path == PATH_AMX_PK)
        return !cpu_amx_bf16();
    return s->group == GROUP_1B && (path == PATH_FP32 || path == PATH_BF16);
}


typedef struct bench_bufs {
    float *x, *w, *out, *dout, *dx, *dw;
    matmul_wpack *pk32, *pk16, *pkamx;
    matmul_ws *ws;
} bench_bufs;

/* cpu1 mode: one thread, timed by that thread's CPU time, so time the shared
 * machine's scheduler gives to others does not count (kernel efficiency). */
static int bench_cpu1;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(bench_cpu1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
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
    matmul_wpack *pk = path == PATH_FP32_PK   ? b->pk32
                       : path == PATH_BF16_PK ? b->pk16
                       : path == PATH_AMX_PK  ? b->pkamx
                                              : NULL;
    if (op == OP_FWD) {
        if (pk)
            matmul_forward_packed_ws(b->out, b->x, pk, NULL, s->N, b->ws);
        else
            matmul_forward(b->out, b->x, b->w, NULL, s->N, s->IN, s->O, prec);
    } else if (op == OP_DX) {
        if (pk)
            matmul_backward_packed_ws(b->dx, NULL, NULL, b->dout, b->x, pk, s->N, b->ws);
        else
            matmul_backward(b->dx, NULL, NULL, b->dout, b->x, b->w, s->N, s->IN, s->O, prec);
    } else {
        if (pk)
            matmul_backward_packed_ws(NULL, b->dw, NULL, b->dout, b->x, pk, s->N, b->ws);
        else
            matmul_backward(NULL, b->dw, NULL, b->dout, b->x, b->w, s->N, s->IN, s->O, prec);
    }
}

/* The output buffer of an op (dX and dW accumulate into theirs). */
static float *op_output(int op, bench_bufs *b, size_t *n, const bench_shape *s)
{
    *n = op == OP_FWD ? (size_t)s->N * s->O : op == OP_DX ? (size_t)s->N * s->IN
                                                          : (size_t)s->O * s->IN;
    return op == OP_FWD ? b->out : op == OP_DX ? b->dx : b->dw;
}

/* Check every path against sgemm before timing it: max |y - y_sgemm| / max |y_sgemm|.
 * Limits: fp32 paths differ from sgemm only in summation order (~K u relative
 * to the terms); bf16 adds the operand rounding (2^-8 per operand, ~2^-9 typical). */
static int check_paths(const bench_shape *s, int op, bench_bufs *b, float *ref)
{
    size_t n;
    float *y = op_output(op, b, &n, s);
    memset(y, 0, n * sizeof *y);
    run_once(s, op, PATH_SGEMM, b);
    memcpy(ref, y, n * sizeof *y);
    double scale = 0.0;
    for (size_t i = 0; i < n; i++)
        scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
    for (int p = 1; p < PATH_COUNT; p++) {
        if (path_skipped(s, op, p))
            continue;
        memset(y, 0, n * sizeof *y);
        run_once(s, op, p, b);
        double err = 0.0;
        for (size_t i = 0; i < n; i++)
            err = fabs((double)y[i] - ref[i]) > err ? fabs((double)y[i] - ref[i]) : err;
        double limit = p == PATH_BF16 || p == PATH_BF16_PK || p == PATH_AMX_PK ? 3e-2 : 1e-4;
        if (!(err <= limit * scale)) {
            fprintf(stderr,
                    "bench_matmul: %s op %d path %s differs from sgemm: %.3g (scale %.3g)\n",
                    s->name, op, path_names[p], err, scale);
            return -1;
        }
    }
    return 0;
}

/* Let the other library's threads park before a path is timed.  OpenBLAS's
 * workers spin for ~2^28 cycles (~0.1 s here) after each sgemm, and libgomp's
 * for a few ms after each of our parallel regions: timed while they spin, the
 * next path shares the 2 cores with them (our 1 ms products took 12-16 ms,
 * scheduler ticks, on the first calls after an sgemm).  Called before sgemm,
 * after it (before fp32) and before fp32-pk (fp32 may be skipped). */
static void bench_settle(void)
{
    struct timespec ts = {0, 250 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static double median_gflops(const bench_shape *s, int op, int path, bench_bufs *b, int reps)
{
    double flops = 2.0 * s->N * s->IN * s->O, t[64];
    if (path_skipped(s, op, path))
        return 0.0;
    if (flops > 2e10 && reps > 3)
        reps = 3; /* the 32000-wide heads: ~0.5 s per call even at full speed */
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

/* Rounds over all the chosen shapes (argument "rounds=R"; default 3 for the
 * 1B group, whose lines judge targets, else 1). */
enum { MAX_ROUNDS = 9 };

static double median_of(const double *v, int n)
{
    double t[MAX_ROUNDS];
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int shape_wanted(const bench_shape *s, const char *which)
{
    return !strcmp(which, "1b")      ? s->group == GROUP_1B
           : !strcmp(which, "small") ? s->group == GROUP_SMALL
           : !strcmp(which, "large") ? s->group == GROUP_LARGE
           : !strcmp(which, "all")   ? s->group != GROUP_1B
                                     : !strncmp(s->name, which, strlen(which));
}

static void bufs_free(bench_bufs *b)
{
    matmul_wpack_destroy(b->pk32);
    matmul_wpack_destroy(b->pk16);
    matmul_wpack_destroy(b->pkamx);
    matmul_ws_destroy(b->ws);
    qs_free(b->x);
    qs_free(b->w);
    qs_free(b->dout);
    qs_free(b->out);
    qs_free(b->dx);
    qs_free(b->dw);
}

/* One round of a shape: its operands made and packed, every path of every op
 * checked against sgemm (check: the first round) and timed into
 * g[op][path][round].  0, or 1 after a message. */
static int time_shape(const bench_shape *s, int si, int reps, int round, int check,
                      double g[3][PATH_COUNT][MAX_ROUNDS])
{
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
    if (cpu_amx_bf16())   /* a training pack: forward and backward forms */
        b.pkamx = matmul_wpack_create(b.w, s->IN, s->O, MATMUL_BF16_AMX);
    b.ws = matmul_ws_create();
    size_t nmax = nx > nw ? nx : nw;
    float *ref = check ? qs_malloc((nmax > no ? nmax : no) * sizeof *ref) : NULL;
    if (!b.ws || !b.x || !b.w || !b.dout || !b.out || !b.dx || !b.dw || !b.pk32 || !b.pk16 ||
        (cpu_amx_bf16() && !b.pkamx) || (check && !ref)) {
        fprintf(stderr, "bench_matmul: out of memory for %s\n", s->name);
        qs_free(ref);
        bufs_free(&b);
        return 1;
    }
    int rc = 0;
    for (int op = OP_FWD; op <= OP_DW && !rc; op++) {
        if (check && check_paths(s, op, &b, ref) != 0) {
            rc = 1;
            break;
        }
        for (int p = 0; p < PATH_COUNT; p++) {
            if (p <= PATH_FP32_PK)
                bench_settle();
            g[op][p][round] = median_gflops(s, op, p, &b, reps);
        }
    }
    qs_free(ref);
    bufs_free(&b);
    return rc;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    const char *which = argc > 2 ? argv[2] : "all";
    if (reps < 1 || reps > 63)
        reps = 5;
    int n_shapes = (int)(sizeof shapes / sizeof shapes[0]), named = 0;
    for (int si = 0; si < n_shapes; si++)
        named += !strncmp(shapes[si].name, which, strlen(which));
    if (strcmp(which, "small") && strcmp(which, "large") && strcmp(which, "all") &&
        strcmp(which, "1b") && !named) {
        fprintf(stderr, "bench_matmul: shapes: expected small|large|all|1b or the start of a "
                        "shape name, got '%s'\n", which);
        return 2;
    }
    const char *dot = getenv("QS_BF16_DOT");
    if (dot && strcmp(dot, "vdpbf16ps") && strcmp(dot, "fma")) {
        fprintf(stderr, "bench_matmul: QS_BF16_DOT: expected vdpbf16ps|fma, got '%s'\n", dot);
        return 2;
    }
    if (dot)
        mm_bf16_fma_force_impl(!strcmp(dot, "fma"));
    double peak32 = PEAK_FP32_GFLOPS, peak16 = PEAK_BF16_GFLOPS;
    int cpu1 = 0, rounds = !strcmp(which, "1b") ? 3 : 1;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "cpu1"))
            cpu1 = 1;
        else if (!strncmp(argv[i], "rounds=", 7) && atoi(argv[i] + 7) >= 1 &&
                 atoi(argv[i] + 7) <= MAX_ROUNDS)
            rounds = atoi(argv[i] + 7);
        else {
            fprintf(stderr, "bench_matmul: expected cpu1 or rounds=1..%d, got '%s'\n", MAX_ROUNDS,
                    argv[i]);
            return 2;
        }
    }
    if (cpu1) {
        bench_cpu1 = 1;
        openblas_set_num_threads(1);
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
        peak32 /= 2; /* one of the two cores */
        peak16 /= 2;
        printf("bench_matmul: cpu1 mode: 1 thread, thread CPU time, %% of one core's peak\n");
    }
    double load[1] = {-1.0};
    getloadavg(load, 1); /* the machine is shared: say how busy it was */
    printf("bench_matmul: cpu %s, %d reps, medians in GFLOP/s (of %d round%s over the shapes; "
           "each round takes the median of its reps); ratios vs sgemm of the same run; "
           "load average %.1f\n",
           cpu_describe(), reps, rounds, rounds > 1 ? "s" : "", load[0]);
    printf("bench_matmul: bf16 pairs on %s; sgemm on OpenBLAS core %s\n",
           cpu_level() < CPU_LEVEL_AVX512BF16 ? "the fp32 fallback (no AVX512-BF16)"
           : mm_bf16_fma_impl()               ? "the FMA kernel (widened, FTZ/DAZ)"
                                              : "vdpbf16ps",
           openblas_get_corename());
    bench_peak host;
    double host16 = bench_peak_report("bench_matmul", &host, bench_peak_threads());
    double host32 = host.fp32;
    printf("%-12s %-3s %7s %7s %7s %7s %7s %7s  %8s %8s %6s %6s %5s %5s %8s\n", "shape", "op",
           path_names[0], path_names[1], path_names[2], path_names[3], path_names[4],
           path_names[5], "fp32/sg", "bf16/sg", "%pk32", "%pk16", "%h32", "%h16", "amx/b16");
    /* g[shape][op][path][round]: every round times each cell once (REPS calls,
     * their median), so a burst of the shared host's load lands in one round
     * of a cell, not in all its samples; the line is the median over rounds. */
    static double g_all[sizeof shapes / sizeof shapes[0]][3][PATH_COUNT][MAX_ROUNDS];
    for (int round = 0; round < rounds; round++) {
        for (int si = 0; si < n_shapes; si++) {
            const bench_shape *s = &shapes[si];
            if (!shape_wanted(s, which))
                continue;
            if (time_shape(s, si, reps, round, round == 0, g_all[si]) != 0)
                return 1;
        }
        if (rounds > 1) {
            printf("bench_matmul: round %d of %d done\n", round + 1, rounds);
            fflush(stdout);
        }
    }
    static const char *const op_names[] = {"fwd", "dX", "dW"};
    int n_pass = 0, n_miss = 0, n_pass_amx = 0, n_miss_amx = 0, n_pass_host = 0, n_miss_host = 0;
    for (int si = 0; si < n_shapes; si++) {
        const bench_shape *s = &shapes[si];
        if (!shape_wanted(s, which))
            continue;
        for (int op = OP_FWD; op <= OP_DW; op++) {
            double g[PATH_COUNT] = {0};
            for (int p = 0; p < PATH_COUNT; p++)
                g[p] = median_of(g_all[si][op][p], rounds);
            double best32 = g[PATH_FP32_PK] > g[PATH_FP32] ? g[PATH_FP32_PK] : g[PATH_FP32];
            double best16 = g[PATH_BF16_PK] > g[PATH_BF16] ? g[PATH_BF16_PK] : g[PATH_BF16];
            printf("%-12s %-3s %7.1f", s->name, op_names[op], g[0]);
            for (int p = 1; p < PATH_COUNT; p++)
                if (path_skipped(s, op, p))
                    printf(" %7s", "-");
                else
                    printf(" %7.1f", g[p]);
            printf("  %7.2fx %7.2fx %5.0f%% %5.0f%% %4.0f%% %4.0f%%", best32 / g[0], best16 / g[0],
                   100.0 * best32 / peak32, 100.0 * best16 / peak16,
                   host32 > 0.0 ? 100.0 * best32 / host32 : 0.0,
                   host16 > 0.0 ? 100.0 * best16 / host16 : 0.0);
            if (g[PATH_AMX_PK] > 0.0)
                printf(" %7.2fx", g[PATH_AMX_PK] / g[PATH_BF16_PK]);
            else
                printf(" %8s", "-");
            if (s->group == GROUP_1B) {
                int ok32 = g[PATH_FP32_PK] >= TARGET_FRACTION * peak32;
                int ok16 = g[PATH_BF16_PK] >= TARGET_FRACTION * peak16;
                printf("  fp32 %s bf16 %s", ok32 ? "PASS" : "MISS", ok16 ? "PASS" : "MISS");
                n_pass += ok32 + ok16;
                n_miss += !ok32 + !ok16;
                int h32 = g[PATH_FP32_PK] >= TARGET_FRACTION * host32;
                int h16 = g[PATH_BF16_PK] >= TARGET_FRACTION * host16;
                n_pass_host += h32 + h16;
                n_miss_host += !h32 + !h16;
                if (g[PATH_AMX_PK] > 0.0) {
                    int okamx = g[PATH_AMX_PK] >= TARGET_FRACTION * peak16;
                    printf(" amx %s", okamx ? "PASS" : "MISS");
                    n_pass_amx += okamx;
                    n_miss_amx += !okamx;
                }
            }
            if (rounds > 1) {   /* the rounds of the judged (packed) paths */
                printf("  [");
                for (int r = 0; r < rounds; r++)
                    printf("%s%.0f", r ? " " : "", g_all[si][op][PATH_FP32_PK][r]);
                printf(" | ");
                for (int r = 0; r < rounds; r++)
                    printf("%s%.0f", r ? " " : "", g_all[si][op][PATH_BF16_PK][r]);
                printf("]");
            }
            printf("\n");
        }
    }
    if (n_pass + n_miss)
        printf("bench_matmul: 1B targets (>= %.0f%% of peak): %d PASS, %d MISS (fp32-pk, bf16-pk)"
               "; amx-pk against the bf16 peak: %d PASS, %d MISS\n",
               100.0 * TARGET_FRACTION, n_pass, n_miss, n_pass_amx, n_miss_amx);
    if (n_pass + n_miss && host32 > 0.0)
        printf("bench_matmul: the same cells against this host's measured peak (fp32 %.0f, bf16 "
               "products %.0f GFLOP/s): %d at >= %.0f%%, %d under\n", host32, host16, n_pass_host,
               100.0 * TARGET_FRACTION, n_miss_host);
    if (n_pass + n_miss && cpu_level() >= CPU_LEVEL_AVX512BF16 && mm_bf16_fma_impl())
        printf("bench_matmul: note: bf16-pk runs on the FMA units here (their %.0f GFLOP/s peak is "
               "%.0f%% of the bf16 peak; vdpbf16ps issues at half their rate on this CPU), so it "
               "cannot reach %.0f%% of the bf16 peak; amx-pk (bf16-amx) is the bf16 path that can\n",
               peak32, 100.0 * peak32 / peak16, 100.0 * TARGET_FRACTION);
    return 0;
}
