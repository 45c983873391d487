/* bench_quant.c: cost of the saturation detector against the fused quantize pass.
 *
 *   bin/bench_quant [--bt N] [--reps N]          timing (make bench)
 *   bin/bench_quant --run-dir DIR [--steps N] [--warmup N] [--estimator E] [--bt N]
 *                                                 write a synthetic but realistic run dir instead
 *   tools/gen_real_acts.py | bin/bench_quant --acts - --run-dir DIR [--warmup N] [--estimator E]
 *                                                 the same over REAL tensors of a training model
 *
 * Model: 126 quantizers = 21 middle blocks x {gate,up,down}_proj x {input, weight}
 * (the paper's plan), every tensor B*T x 768 (gate/up) or B*T x 3072 (down);
 * default B*T = 1024, the trainer's default batch (B 4 x T 256): 198 M elements,
 * 0.8 GB of distinct inputs.  With the scalar reference kernel this takes a few
 * minutes; --bt 128 for a quick look.
 * Activations are heavy-tailed with one outlier channel per tensor (as in LLM
 * MLP inputs), a slow drift, per-step jitter and rare outlier spikes; weights
 * are smooth and almost static.
 *
 * Timing (thread CPU time), same run: per tensor the variants run back to back in rotating order
 * (the 2-core machine is shared; this cancels drift and cache warmth); per
 * tensor the median over repetitions, summed over tensors:
 *   A  fused pass alone: hif8_fakequant(x, y, n, scale, no sq_err) per tensor;
 *   B  what a QAT step does with the detector on: quant_quantize (estimate ->
 *      scale -> fused pass WITH squared error for QSNR -> stats) per tensor, then
 *      satstats_step_end (rows, alarms, one JSON line + zstd frame + fflush).
 * Overhead = B / A - 1; target <= 5% (PASS/MISS).  Also printed: the fused
 * pass with sq_err over every element (A2), which is why QSNR is sampled.
 */
#include <math.h>
#include <stdint.h>
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
#include "bench_stats.h"

#define N_LAYERS 21
#define FIRST_LAYER 3
#define N_Q (N_LAYERS * 6)
#define DIM 768
#define HIDDEN 3072

/* CPU time of this thread: the 2 cores are shared with other jobs, and wall time
 * would charge their time slices to whichever variant was running. */
static double now_s(void) { return bench_clock_s(CLOCK_THREAD_CPUTIME_ID); }

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
    /* a pool of normals, read from a random offset per tensor: building ~200 M
     * elements with one log + cos each would take longer than the benchmark */
    enum { POOL = 1 << 20 };
    float *pool = qs_malloc(POOL * sizeof(float));
    if (!block || !pool) {
        qs_free(block);
        qs_free(pool);
        return NULL;
    }
    for (int k = 0; k < POOL; k++)
        pool[k] = (float)rng_normal();
    size_t off = 0;
    for (int i = 0; i < N_Q; i++) {
        model_q *q = &m[i];
        q->base = block + off;
        off += q->n;
        q->outlier_col = (int)(rng_uniform() * q->cols);
        q->level = q->is_weight ? 0.05 + 0.02 * rng_uniform() : (q->cols == HIDDEN ? 1.0 : 0.5);
        size_t start = (size_t)(rng_uniform() * POOL);
        for (size_t k = 0; k < q->n; k++) {
            double g = pool[(start + k * 7) & (POOL - 1)];
            double v = q->is_weight ? 0.02 * g : g * (1.0 + 0.5 * g * g) * 0.15; /* heavy tail */
            if (!q->is_weight && (int)(k % (size_t)q->cols) == q->outlier_col)
                v = (q->cols == HIDDEN ? 60.0 : 30.0) * 0.15 * (1.0 + 0.2 * fabs(g));
            q->base[k] = (float)(v * q->level);
        }
    }
    qs_free(pool);
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

static int gen_run_dir(const char *dir, int steps, int warmup, const char *est, int margin, int bt)
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
    r.margin = margin;
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

/* --acts: real tensors streamed by tools/gen_real_acts.py (format in its docstring) */
static int read_exact(FILE *f, void *buf, size_t bytes)
{
    return fread(buf, 1, bytes, f) == bytes ? 0 : -1;
}

static int acts_run_dir(const char *acts, const char *dir, int warmup, const char *est, int margin)
{
    FILE *f = strcmp(acts, "-") ? fopen(acts, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "bench_quant: %s: cannot open\n", acts);
        return 2;
    }
    char magic[8];
    uint32_t n_quant, n_steps;
    if (read_exact(f, magic, 8) || memcmp(magic, "QSACT1\0\0", 8) || read_exact(f, &n_quant, 4) ||
        read_exact(f, &n_steps, 4) || n_quant < 1 || n_quant > 4096) {
        fprintf(stderr, "bench_quant: %s: expected a QSACT1 stream header\n", acts);
        return 2;
    }
    char **names = qs_calloc(n_quant, sizeof *names);
    uint64_t *n_elems = qs_calloc(n_quant, sizeof *n_elems);
    uint64_t max_n = 0;
    for (uint32_t i = 0; names && n_elems && i < n_quant; i++) {
        uint32_t len;
        if (read_exact(f, &len, 4) || len < 1 || len > 255 || !(names[i] = qs_calloc(len + 1, 1)) ||
            read_exact(f, names[i], len) || read_exact(f, &n_elems[i], 8) || n_elems[i] < 1 ||
            n_elems[i] > (1ull << 28)) {
            fprintf(stderr, "bench_quant: %s: bad quantizer entry %u in the header\n", acts, i);
            return 2;
        }
        max_n = n_elems[i] > max_n ? n_elems[i] : max_n;
    }
    float *x = qs_malloc((size_t)max_n * sizeof(float)), *y = qs_malloc((size_t)max_n * sizeof(float));
    quant_recipe r;
    quant_recipe_default(&r);
    r.margin = margin;
    qs_diag d = {0};
    quant_set *set;
    satstats *s;
    satstats_config c;
    satstats_config_default(&c);
    c.run_dir = dir;
    c.run_name = "stories260K fine-tune (tools/gen_real_acts.py)";
    c.on_warning = print_warning;
    if (!names || !n_elems || !x || !y || fileio_mkdir_p(dir, &d) ||
        amax_estimator_parse(est, &r.est, &d) ||
        quant_set_create(&set, &r, (const char *const *)names, (int)n_quant, &d) ||
        satstats_create(&s, &c, set, &d)) {
        fprintf(stderr, "bench_quant: %s\n", d.msg[0] ? d.msg : "out of memory");
        return 1;
    }
    int alarms = 0;
    uint32_t t = 0;
    for (; t < n_steps; t++) {
        for (uint32_t i = 0; i < n_quant; i++) {
            if (read_exact(f, x, (size_t)n_elems[i] * sizeof(float))) {
                fprintf(stderr, "bench_quant: %s: stream ends inside step %u (kept %u steps)\n", acts,
                        t, t);
                goto done;
            }
            quant *q = quant_set_get(set, (int)i);
            int rc = (int)t < warmup ? quant_observe(q, x, (size_t)n_elems[i], &d)
                                     : quant_quantize(q, x, y, (size_t)n_elems[i], &d);
            if (rc) {
                fprintf(stderr, "bench_quant: step %u: %s\n", t, d.msg);
                return 1;
            }
        }
        int a = satstats_step_end(s, t, (int)t < warmup ? QLOG_PHASE_WARMUP : QLOG_PHASE_QAT, &d);
        if (a < 0) {
            fprintf(stderr, "bench_quant: %s: %s\n", d.path, d.msg);
            return 1;
        }
        alarms += a;
    }
done:
    if (satstats_close(s, &d)) {
        fprintf(stderr, "bench_quant: %s\n", d.msg);
        return 1;
    }
    quant_set_destroy(set);
    printf("wrote %s/quant.jsonl.zst: %u steps (%d warmup), %u quantizers, estimator %s, %d alarms\n",
           dir, t, warmup, n_quant, est, alarms);
    if (f != stdin)
        fclose(f);
    for (uint32_t i = 0; i < n_quant; i++)
        qs_free(names[i]);
    qs_free(names);
    qs_free(n_elems);
    qs_free(x);
    qs_free(y);
    return 0;
}

static int bench(int bt, int reps)
{
    model_q m[N_Q];
    float *block = model_build(m, bt);
    size_t total = 0;
    for (int i = 0; i < N_Q; i++)
        total += m[i].n;
    /* one output buffer, as in training where the fake-quantized copy is consumed
     * by the next matmul; inputs are distinct so they stream from memory */
    float *ys = qs_malloc((size_t)bt * HIDDEN * sizeof(float));
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
        for (int i = 0; i < N_Q; i++)
            quant_quantize(quant_set_get(set, i), m[i].base, ys, m[i].n, &d);
        satstats_step_end(s, step, QLOG_PHASE_QAT, &d);
    }
    /* t[(v * reps + rep) * N_Q + i]: variant v (0 = A, 1 = A2, 2 = B) on tensor i */
    double *t = qs_calloc((size_t)3 * (size_t)reps * N_Q, sizeof(double));
    double *tc = qs_calloc((size_t)reps, sizeof(double)), *col = qs_calloc((size_t)reps, sizeof(double));
    volatile size_t sink = 0;
    if (!t || !tc || !col)
        return 1;
    for (int rep = 0; rep < reps; rep++) {
        /* The machine is shared and noisy: time the three variants back to back on
         * the same tensor, rotating their order per tensor and rep (so cache warmth
         * and drift fall on each equally). */
        for (int i = 0; i < N_Q; i++) {
            quant *q = quant_set_get(set, i);
            for (int k = 0; k < 3; k++) {
                int which = (rep + i + k) % 3;
                hif8_stats st;
                double t0 = now_s();
                if (which < 2) {
                    hif8_fakequant(m[i].base, ys, m[i].n, quant_last_scale(q), which, &st);
                    sink += st.n_clipped;
                } else if (quant_quantize(q, m[i].base, ys, m[i].n, &d)) {
                    fprintf(stderr, "bench_quant: %s\n", d.msg);
                    return 1;
                }
                t[((size_t)which * (size_t)reps + (size_t)rep) * N_Q + (size_t)i] = now_s() - t0;
            }
        }
        double t1 = now_s();
        if (satstats_step_end(s, step++, QLOG_PHASE_QAT, &d) < 0) {
            fprintf(stderr, "bench_quant: %s\n", d.msg);
            return 1;
        }
        tc[rep] = now_s() - t1;
    }
    (void)sink;
    /* per tensor: median over repetitions (robust to a preempted call); then sums */
    double sum[3] = {0.0, 0.0, 0.0};
    for (int v = 0; v < 3; v++)
        for (int i = 0; i < N_Q; i++) {
            for (int rep = 0; rep < reps; rep++)
                col[rep] = t[((size_t)v * (size_t)reps + (size_t)rep) * N_Q + (size_t)i];
            sum[v] += bench_median(col, reps);
        }
    double a = sum[0], a2 = sum[1], sc = bench_median(tc, reps), b = sum[2] + sc;
    double over = b / a - 1.0;
    printf("bench_quant: %d quantizers, B*T=%d, %.1f M elements/step, %d reps "
           "(thread CPU time, per-tensor medians, summed)\n", N_Q, bt, (double)total / 1e6, reps);
    printf("  A  fused pass alone (no sq_err)        %9.3f ms   %.2f ns/elem\n", a * 1e3,
           a * 1e9 / (double)total);
    printf("  A2 fused pass with sq_err on all       %9.3f ms   ratio A2/A %.3f (why QSNR is sampled)\n",
           a2 * 1e3, a2 / a);
    printf("  B  quantize + detector + log write     %9.3f ms   ratio B/A  %.3f\n", b * 1e3, b / a);
    printf("     of which satstats_step_end         %9.3f ms   (%.2f%% of A; fixed per step, not per element)\n",
           sc * 1e3, 100.0 * sc / a);
    printf("  detector overhead B/A - 1 = %+.1f%% (target <= 5%%): %s\n", 100.0 * over,
           over <= 0.05 ? "PASS" : "MISS");
    satstats_close(s, &d);
    quant_set_destroy(set);
    char path[512];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    remove(path);
    remove(dir);
    qs_free(t);
    qs_free(tc);
    qs_free(col);
    qs_free(ys);
    qs_free(block);
    return 0;
}

int main(int argc, char **argv)
{
    int bt = 1024, reps = 6, steps = 200, warmup = 64, gen_bt = 8, margin = 0;
    const char *dir = NULL, *est = "most-recent", *acts = NULL;
    int bt_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--bt") && v) {
            bt = atoi(v);
            bt_set = 1;
        } else if (!strcmp(argv[i], "--reps") && v) {
            reps = atoi(v);
        } else if (!strcmp(argv[i], "--acts") && v) {
            acts = v;
        } else if (!strcmp(argv[i], "--run-dir") && v) {
            dir = v;
        } else if (!strcmp(argv[i], "--steps") && v) {
            steps = atoi(v);
        } else if (!strcmp(argv[i], "--warmup") && v) {
            warmup = atoi(v);
        } else if (!strcmp(argv[i], "--margin") && v) {
            margin = atoi(v);
        } else if (!strcmp(argv[i], "--estimator") && v) {
            est = v;
        } else {
            fprintf(stderr, "usage: bench_quant [--bt N] [--reps N] | --run-dir DIR [--steps N] "
                            "[--warmup N] [--estimator E] [--margin M] [--bt N] [--acts FILE|-]\n");
            return 2;
        }
        i++;
    }
    if (bt < 1 || reps < 1 || steps < 1 || warmup < 0) {
        fprintf(stderr, "bench_quant: --bt, --reps, --steps must be >= 1, --warmup >= 0\n");
        return 2;
    }
    if (acts && !dir) {
        fprintf(stderr, "bench_quant: --acts needs --run-dir\n");
        return 2;
    }
    if (acts)
        return acts_run_dir(acts, dir, warmup, est, margin);
    if (dir)
        return gen_run_dir(dir, steps, warmup, est, margin, bt_set ? bt : gen_bt);
    return bench(bt, reps);
}
