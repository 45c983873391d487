/* bench_quant.c: cost of the saturation detector against the fused quantize pass.
 *
 *   bin/bench_quant [--bt N] [--reps N]          timing (make bench)
 *   bin/bench_quant --run-dir DIR [--steps N] [--warmup N] [--estimator E] [--bt N]
 *                                                 write a realistic run dir instead
 *
 * Model: 126 quantizers = 21 middle blocks x {gate,up,down}_proj x {input, weight}
 * (the paper's plan), every tensor B*T x 768 (gate/up) or B*T x 3072 (down).
 * Activations are heavy-tailed with one outlier channel per tensor (as in LLM
 * MLP inputs), a slow drift, per-step jitter and rare outlier spikes; weights
 * are smooth and almost static.
 *
 * Timing, medians over interleaved repetitions, same run:
 *   A  fused pass alone: hif8_fakequant(x, y, n, scale, no sq_err) per tensor;
 *   B  what a QAT step does with the detector on: quant_quantize (estimate ->
 *      scale -> fused pass WITH squared error for QSNR -> stats) per tensor, then
 *      satstats_step_end (rows, alarms, one JSON line + zstd frame + fflush).
 * Overhead = B / A - 1; target <= 5% (PASS/MISS).  Also printed: the fused pass
 * with sq_err (A2), which isolates what QSNR costs inside the fused kernel.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "qs/fileio.h"
#include "qs/hif8.h"
#include "qs/mem.h"
#include "qs/quant.h"
#include "qs/satstats.h"

#define N_LAYERS 21
#define FIRST_LAYER 3
#define N_Q (N_LAYERS * 6)
#define DIM 768
#define HIDDEN 3072

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;
static double rng_uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double rng_normal(void)
{
    return sqrt(-2.0 * log(rng_uniform())) * cos(6.283185307179586 * rng_uniform());
}

typedef struct model_q {
    char name[96];
    int is_weight, cols;     /* cols: 768 or 3072 */
    size_t n;                /* elements */
    float *base;             /* [n] fixed pattern */
    int outlier_col;
    double level;            /* amax scale of the tensor */
} model_q;

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

/* names and shapes of the 126 quantizers; base tensors in one block */
static float *model_build(model_q *m, int bt)
{
    static const char *proj[3] = {"gate_proj", "up_proj", "down_proj"};
    size_t total = 0;
    for (int l = 0; l < N_LAYERS; l++)
        for (int p = 0; p < 3; p++)
            for (int w = 0; w < 2; w++) {
                model_q *q = &m[(l * 3 + p) * 2 + w];
                snprintf(q->name, sizeof q->name, "layers.%d.mlp.%s.%s", FIRST_LAYER + l, proj[p],
                         w ? "weight" : "input");
                q->is_weight = w;
                q->cols = p == 2 ? HIDDEN : DIM;
                q->n = (size_t)bt * (size_t)q->cols;
                total += q->n;
            }
    float *block = qs_malloc(total * sizeof(float));
    if (!block)
        return NULL;
    size_t off = 0;
    for (int i = 0; i < N_Q; i++) {
        model_q *q = &m[i];
        q->base = block + off;
        off += q->n;
        q->outlier_col = (int)(rng_uniform() * q->cols);
        q->level = q->is_weight ? 0.05 + 0.02 * rng_uniform() : (q->cols == HIDDEN ? 1.0 : 0.5);
        for (size_t k = 0; k < q->n; k++) {
            double g = rng_normal();
            double v = q->is_weight ? 0.02 * g : g * (1.0 + 0.5 * g * g) * 0.15; /* heavy tail */
            if (!q->is_weight && (int)(k % (size_t)q->cols) == q->outlier_col)
                v = (q->cols == HIDDEN ? 60.0 : 30.0) * 0.15 * (1.0 + 0.2 * fabs(g));
            q->base[k] = (float)(v * q->level);
        }
    }
    return block;
}

/* x = base * drift(t) * jitter, outlier channel * spike(t) */
static void model_tensor(const model_q *q, int t, float *x)
{
    double drift = q->is_weight ? 1.0 : 1.0 + 0.0005 * t + 0.05 * sin(0.07 * t);
    double jitter = exp((q->is_weight ? 1e-4 : 0.03) * rng_normal());
    double spike = (!q->is_weight && rng_uniform() < 0.03) ? 1.3 + 1.5 * rng_uniform() : 1.0;
    float f = (float)(drift * jitter), fs = (float)(drift * jitter * spike);
    for (size_t k = 0; k < q->n; k++)
        x[k] = q->base[k] * ((int)(k % (size_t)q->cols) == q->outlier_col ? fs : f);
}

static void print_warning(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "qatscope: %s\n", line);
}

static int gen_run_dir(const char *dir, int steps, int warmup, const char *est, int bt)
{
    model_q m[N_Q];
    float *block = model_build(m, bt);
    float *x = qs_malloc((size_t)bt * HIDDEN * sizeof(float));
    float *y = qs_malloc((size_t)bt * HIDDEN * sizeof(float));
    if (!block || !x || !y || fileio_mkdir_p(dir, NULL))
        return 1;
    const char *names[N_Q];
    for (int i = 0; i < N_Q; i++)
        names[i] = m[i].name;
    quant_recipe r;
    quant_recipe_default(&r);
    qs_diag d = {0};
    quant_set *set;
    satstats *s;
    satstats_config c;
    satstats_config_default(&c);
    c.run_dir = dir;
    c.run_name = "bench_quant synthetic";
    c.on_warning = print_warning;
    if (amax_estimator_parse(est, &r.est, &d) || quant_set_create(&set, &r, names, N_Q, &d) ||
        satstats_create(&s, &c, set, &d)) {
        fprintf(stderr, "bench_quant: %s\n", d.msg);
        return 1;
    }
    int alarms = 0;
    for (int t = 0; t < steps; t++) {
        for (int i = 0; i < N_Q; i++) {
            model_tensor(&m[i], t, x);
            quant *q = quant_set_get(set, i);
            int rc = t < warmup ? quant_observe(q, x, m[i].n, &d) : quant_quantize(q, x, y, m[i].n, &d);
            if (rc) {
                fprintf(stderr, "bench_quant: %s\n", d.msg);
                return 1;
            }
        }
        int a = satstats_step_end(s, t, t < warmup ? QLOG_PHASE_WARMUP : QLOG_PHASE_QAT, &d);
        if (a < 0) {
            fprintf(stderr, "bench_quant: %s: %s\n", d.path, d.msg);
            return 1;
        }
        alarms += a;
    }
    if (satstats_close(s, &d)) {
        fprintf(stderr, "bench_quant: %s\n", d.msg);
        return 1;
    }
    quant_set_destroy(set);
    printf("wrote %s/quant.jsonl.zst: %d steps (%d warmup), %d quantizers, estimator %s, %d alarms\n",
           dir, steps, warmup, N_Q, est, alarms);
    qs_free(x);
    qs_free(y);
    qs_free(block);
    return 0;
}

static int bench(int bt, int reps)
{
    model_q m[N_Q];
    float *block = model_build(m, bt);
    size_t total = 0;
    for (int i = 0; i < N_Q; i++)
        total += m[i].n;
    float *ys = qs_malloc(total * sizeof(float));
    if (!block || !ys)
        return 1;
    char dir[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/bench_quant.%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    const char *names[N_Q];
    for (int i = 0; i < N_Q; i++)
        names[i] = m[i].name;
    quant_recipe r;
    quant_recipe_default(&r);
    qs_diag d = {0};
    quant_set *set;
    satstats *s;
    satstats_config c;
    satstats_config_default(&c);
    c.run_dir = dir;
    if (fileio_mkdir_p(dir, &d) || quant_set_create(&set, &r, names, N_Q, &d) ||
        satstats_create(&s, &c, set, &d)) {
        fprintf(stderr, "bench_quant: %s\n", d.msg);
        return 1;
    }
    /* two untimed steps fill the histories */
    long step = 0;
    for (; step < 2; step++) {
        size_t off = 0;
        for (int i = 0; i < N_Q; i++, off += m[i - 1].n)
            quant_quantize(quant_set_get(set, i), m[i].base, ys + off, m[i].n, &d);
        satstats_step_end(s, step, QLOG_PHASE_QAT, &d);
    }
    double *ta = qs_calloc((size_t)reps, sizeof(double)), *ta2 = qs_calloc((size_t)reps, sizeof(double));
    double *tb = qs_calloc((size_t)reps, sizeof(double)), *tc = qs_calloc((size_t)reps, sizeof(double));
    volatile size_t sink = 0;
    double *ratio = qs_calloc((size_t)reps, sizeof(double));
    for (int rep = 0; rep < reps; rep++) {
        for (int k = 0; k < 3; k++) {   /* rotate the order: no variant always runs first */
            int which = (rep + k) % 3;
            hif8_stats st;
            size_t off = 0;
            double t0 = now_s(), t1 = 0.0;
            for (int i = 0; i < N_Q; i++) {
                quant *q = quant_set_get(set, i);
                if (which < 2) {
                    hif8_fakequant(m[i].base, ys + off, m[i].n, quant_last_scale(q), which, &st);
                    sink += st.n_clipped;
                } else if (quant_quantize(q, m[i].base, ys + off, m[i].n, &d)) {
                    fprintf(stderr, "bench_quant: %s\n", d.msg);
                    return 1;
                }
                off += m[i].n;
            }
            if (which == 2) {
                t1 = now_s();
                if (satstats_step_end(s, step++, QLOG_PHASE_QAT, &d) < 0) {
                    fprintf(stderr, "bench_quant: %s\n", d.msg);
                    return 1;
                }
                tc[rep] = now_s() - t1;
            }
            double dt = now_s() - t0;
            (which == 0 ? ta : which == 1 ? ta2 : tb)[rep] = dt;
        }
        ratio[rep] = tb[rep] / ta[rep];
    }
    (void)sink;
    double a = median(ta, reps), a2 = median(ta2, reps), b = median(tb, reps), sc = median(tc, reps);
    double over = median(ratio, reps) - 1.0;
    printf("bench_quant: %d quantizers, B*T=%d, %.1f M elements/step, %d reps (medians)\n", N_Q, bt,
           (double)total / 1e6, reps);
    printf("  A  fused pass alone (no sq_err)        %9.3f ms   %.2f ns/elem\n", a * 1e3,
           a * 1e9 / (double)total);
    printf("  A2 fused pass with sq_err (QSNR)       %9.3f ms   ratio A2/A %.3f\n", a2 * 1e3, a2 / a);
    printf("  B  quantize + detector + log write     %9.3f ms   ratio B/A  %.3f\n", b * 1e3, b / a);
    printf("     of which satstats_step_end         %9.3f ms   (%.2f%% of A; fixed per step, not per element)\n",
           sc * 1e3, 100.0 * sc / a);
    printf("  detector overhead, median of per-rep B/A - 1 = %+.1f%% (target <= 5%%): %s\n", 100.0 * over,
           over <= 0.05 ? "PASS" : "MISS");
    satstats_close(s, &d);
    quant_set_destroy(set);
    char path[512];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    remove(path);
    remove(dir);
    qs_free(ta);
    qs_free(ta2);
    qs_free(tb);
    qs_free(tc);
    qs_free(ratio);
    qs_free(ys);
    qs_free(block);
    return 0;
}

int main(int argc, char **argv)
{
    int bt = 128, reps = 7, steps = 200, warmup = 64, gen_bt = 8;
    const char *dir = NULL, *est = "most-recent";
    int bt_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--bt") && v) {
            bt = atoi(v);
            bt_set = 1;
        } else if (!strcmp(argv[i], "--reps") && v) {
            reps = atoi(v);
        } else if (!strcmp(argv[i], "--run-dir") && v) {
            dir = v;
        } else if (!strcmp(argv[i], "--steps") && v) {
            steps = atoi(v);
        } else if (!strcmp(argv[i], "--warmup") && v) {
            warmup = atoi(v);
        } else if (!strcmp(argv[i], "--estimator") && v) {
            est = v;
        } else {
            fprintf(stderr, "usage: bench_quant [--bt N] [--reps N] | --run-dir DIR [--steps N] "
                            "[--warmup N] [--estimator E] [--bt N]\n");
            return 2;
        }
        i++;
    }
    if (bt < 1 || reps < 1 || steps < 1 || warmup < 0) {
        fprintf(stderr, "bench_quant: --bt, --reps, --steps must be >= 1, --warmup >= 0\n");
        return 2;
    }
    if (dir)
        return gen_run_dir(dir, steps, warmup, est, bt_set ? bt : gen_bt);
    return bench(bt, reps);
}
