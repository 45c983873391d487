/* bench_train.c: training tokens/s (forward + backward + AdamW, the trainer's
 * own step) on the dim-288 and dim-768 bench configs (random weights, B=4 x
 * T=256), fp32 and bf16 (and, on CPUs with AMX, a second session with bf16-amx:
 * the products on the tiles), with and without HiF8 QAT on the default selection;
 * peak memory against the trainer's estimate; and, when Debian's python3-torch
 * is installed, PyTorch on the same model and threads (tools/bench_torch_train.py):
 * fp32 eager and bf16 autocast, each out of the box and tuned (tcmalloc +
 * OMP_WAIT_POLICY=PASSIVE, see bench_torch.h), judged against the tuned run
 * head to head: our trainer alone and PyTorch's script in alternating turns,
 * the median of the same-round ratios (bench_h2h_run).
 * Every compared pair is timed in the same rounds, its two steps back to back,
 * and the order inside a pair flips every round (A B, then B A): the machine's
 * speed drifts by tens of percent over minutes, so each ratio is the median over
 * rounds of the same-round ratio (the PASS/MISS criterion), printed with the
 * ratio of the medians.  All four trainers live side by side when they fit in
 * BENCH_ROTATE_GIB (one round runs 1 0 2 3, the next 3 2 0 1: the pairs 0-1,
 * 0-2 and 2-3 are adjacent in both); else the pairs run one after the other with
 * two trainers alive.  Medians of wall and process CPU time per step (the first
 * step of each trainer is a warm-up).  Targets (issues 5 and 13): fp32 >= 2x
 * tuned PyTorch fp32, bf16 >= 1.5x tuned PyTorch bf16 autocast; bf16 >= 1.3x
 * our fp32; QAT overhead <= 15%; peak memory within 10% of the estimate.  Then the training-only element-wise
 * kernels (cross-entropy, SwiGLU backward, AdamW): portable
 * loop against the AVX-512 path, interleaved, same process.
 *   bench_train [STEPS [SHAPE]]   (default 3 timed steps; SHAPE dim-288 or dim-768: only that one)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "qs/cpu.h"
#include "qs/fileio.h"
#include "qs/layers.h"
#include "qs/optim.h"
#include "qs/hfconfig.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/runcfg.h"
#include "qs/safetensors.h"
#include "qs/trainer.h"
#include "bench_torch.h"

typedef struct bench_shape {
    const char *name;
    int dim, layers, heads, hidden, vocab;
} bench_shape;

static const bench_shape bench_shapes[] = {
    {"dim-288", 288, 6, 6, 768, 32000},
    {"dim-768", 768, 12, 12, 2048, 32000},
};

enum { BENCH_B = 4, BENCH_T = 256, BENCH_ROTATE_GIB = 8 };

typedef struct bench_tokens {
    unsigned long s;
    int vocab;
} bench_tokens;

static int bench_next(void *self, int32_t *tok, int32_t *tgt, int B, int T, qs_diag *d)
{
    (void)d;
    bench_tokens *b = self;
    for (int i = 0; i < B * T; i++) {
        b->s = b->s * 6364136223846793005ul + 1442695040888963407ul;
        tok[i] = (int32_t)((b->s >> 33) % (unsigned long)b->vocab);
        tgt[i] = (int32_t)((b->s >> 17) % (unsigned long)b->vocab);
    }
    return 0;
}

static int bench_save(void *self, void **bytes, size_t *n, qs_diag *d)
{
    (void)self;
    (void)bytes;
    (void)n;
    return diag_set(d, QS_EUNSUPPORTED, NULL, -1, "bench data has no position");
}

static int bench_restore(void *self, const void *bytes, size_t n, qs_diag *d)
{
    (void)self;
    (void)bytes;
    (void)n;
    return diag_set(d, QS_EUNSUPPORTED, NULL, -1, "bench data has no position");
}

/* A random HF checkpoint of the shape in dir (config.json + model.safetensors). */
static int bench_model_write(const bench_shape *s, const char *dir)
{
    char js[1024], path[700];
    qs_diag d = {0};
    int n = snprintf(js, sizeof js,
                     "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
                     "\"hidden_size\":%d,\"intermediate_size\":%d,\"num_hidden_layers\":%d,"
                     "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"vocab_size\":%d,"
                     "\"max_position_embeddings\":1024,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
                     "\"hidden_act\":\"silu\",\"tie_word_embeddings\":false}",
                     s->dim, s->hidden, s->layers, s->heads, s->heads, s->vocab);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (fileio_mkdir_p(dir, &d) || fileio_write_atomic(path, js, (size_t)n, &d))
        return -1;
    llama_config c;
    llama_model m;
    if (hfconfig_load(&c, dir, &d) || model_init(&m, &c, &d))
        return -1;
    model_params_randomize(&m, 42, 0.02f);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = model_save_safetensors(&m, path, SAFETENSORS_BF16, &d);
    model_free(&m);
    if (rc)
        fprintf(stderr, "bench_train: %s\n", d.msg);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double tmp[64];
    memcpy(tmp, v, (size_t)n * sizeof *v);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return n ? (n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2])) : -1;
}

static double now_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum { BENCH_VARIANTS = 4, BENCH_PAIRS = 3, BENCH_MAX_STEPS = 60 };
/* the variants' precisions: fp32, and the bf16 one of the session (bf16, then
 * bf16-amx on CPUs with AMX) */
static const char *bench_prec[2] = {"fp32", "bf16"};

/* One variant (precision = i / 2, QAT = i % 2): its trainer and per-step times. */
typedef struct bench_variant {
    trainer *t;
    train_memory mem;
    double peak_ratio;                 /* peak / estimate over create + warm-up step */
    double wall_s[BENCH_MAX_STEPS];    /* wall time of each timed step */
    double cpu_s[BENCH_MAX_STEPS];     /* process CPU time of each timed step (all threads) */
} bench_variant;

static int bench_step(bench_variant *v, qs_diag *d)
{
    train_step_info info;
    return trainer_step(v->t, &info, d);
}

/* Creates variant i's trainer and runs its warm-up step, measuring its peak memory
 * (other variants' trainers stay alive: their bytes are subtracted). */
static int bench_variant_open(bench_variant *v, int i, const char *prec, int qat,
                              const char *model_dir, const char *out_dir, int total_steps,
                              bench_tokens *bt)
{
    runcfg cfg;
    qs_diag d = {0};
    char set[600];
    runcfg_defaults(&cfg);
    snprintf(cfg.model, sizeof cfg.model, "%s", model_dir);
    snprintf(cfg.train_data, sizeof cfg.train_data, "(random)");
    snprintf(cfg.out_dir, sizeof cfg.out_dir, "%s", out_dir);
    cfg.batch_size = BENCH_B;
    cfg.seq_len = BENCH_T;
    cfg.steps = total_steps;   /* the schedule's length: no end-of-run work while timed */
    cfg.qat = qat;
    cfg.bf16_warmup_steps = 0;
    cfg.lr = 1e-5;
    snprintf(set, sizeof set, "precision=%s", prec);
    if (runcfg_set(&cfg, set, &d))
        return -1;
    static train_data data[BENCH_VARIANTS];
    data[i] = (train_data){bt, bench_next, bench_save, bench_restore};
    trainer_options opt = {NULL, 0, NULL};
    qs_mem_reset_peak();
    size_t live0 = qs_mem_live_bytes();
    if (trainer_memory_estimate(&cfg, &v->mem, &d) ||
        trainer_create(&v->t, &cfg, &data[i], &opt, &d) || bench_step(v, &d)) {
        fprintf(stderr, "bench_train: %s\n", d.msg);
        return -1;
    }
    v->peak_ratio = (double)(qs_mem_peak_bytes() - live0) / (double)v->mem.total_bytes;
    return 0;
}

/* The compared pairs, as time of the first over time of the second: fp32 over
 * bf16 (the bf16 speed-up), and each precision with QAT over without. */
static const int bench_pair[BENCH_PAIRS][2] = {{0, 2}, {1, 0}, {3, 2}};

/* Round r of a session over the variants ids[0..n): ids in order on even
 * rounds, reversed on odd ones (with ids = 1 0 2 3 every pair above is adjacent
 * in both orders).  Each turn runs two steps and times the second: the first
 * step after another trainer's is slower by a roughly constant amount (~50 ms
 * at dim-288, cold caches and TLB), which a run of one trainer never pays. */
static int bench_rounds(bench_variant *v, const int *ids, int n, int steps)
{
    qs_diag d = {0};
    for (int r = 0; r < steps; r++)
        for (int j = 0; j < n; j++) {
            bench_variant *x = &v[ids[r % 2 ? n - 1 - j : j]];
            if (bench_step(x, &d)) {   /* the switch step: not timed */
                fprintf(stderr, "bench_train: %s\n", d.msg);
                return -1;
            }
            double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
            if (bench_step(x, &d)) {
                fprintf(stderr, "bench_train: %s\n", d.msg);
                return -1;
            }
            x->cpu_s[r] = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            x->wall_s[r] = now_s(CLOCK_MONOTONIC) - w0;
        }
    return 0;
}

/* median over rounds of a[r] / b[r] (same-round ratio: both saw the same load) */
static double paired_ratio(const double *a, const double *b, int n)
{
    double q[BENCH_MAX_STEPS];
    for (int r = 0; r < n; r++)
        q[r] = a[r] / b[r];
    return median(q, n);
}

/* Ratio of pair p (time of the first variant over the second's: bf16/fp32 speed,
 * QAT over no QAT) from the variants' step times of one session. */
typedef struct bench_ratio {
    double paired;   /* median over rounds of the same-round ratio (the criterion) */
    double wall;     /* ratio of the wall medians */
    double cpu;      /* ratio of the process-CPU medians */
} bench_ratio;

typedef struct bench_result {
    double wall[BENCH_VARIANTS], cpu[BENCH_VARIANTS];   /* medians, first session of each */
    bench_ratio pair[BENCH_PAIRS];
} bench_result;

static void bench_measure(const bench_variant *v, const int *ids, int n, int steps,
                          bench_result *res, int *seen)
{
    for (int j = 0; j < n; j++)
        if (!seen[ids[j]]) {
            seen[ids[j]] = 1;
            res->wall[ids[j]] = median(v[ids[j]].wall_s, steps);
            res->cpu[ids[j]] = median(v[ids[j]].cpu_s, steps);
        }
    for (int p = 0; p < BENCH_PAIRS; p++) {
        const bench_variant *a = &v[bench_pair[p][0]], *b = &v[bench_pair[p][1]];
        int in = 0;
        for (int j = 0; j < n; j++)
            in += ids[j] == bench_pair[p][0] || ids[j] == bench_pair[p][1];
        if (in < 2)
            continue;
        bench_ratio *r = &res->pair[p];
        r->paired = paired_ratio(a->wall_s, b->wall_s, steps);
        r->wall = median(a->wall_s, steps) / median(b->wall_s, steps);
        r->cpu = median(a->cpu_s, steps) / median(b->cpu_s, steps);
    }
}

static void bench_close(bench_variant *v, int i)
{
    trainer_destroy(v[i].t);
    v[i].t = NULL;
}

/* One shape's run: its checkpoint, scratch directory, timed steps, and each
 * variant's token stream (all the same sequence). */
typedef struct bench_ctx {
    const bench_shape *s;
    const char *mdir, *tmp;
    int steps;
    bench_tokens bt[BENCH_VARIANTS];
} bench_ctx;

static int bench_open(bench_ctx *c, bench_variant *v, int i)
{
    char odir[500];
    snprintf(odir, sizeof odir, "%s/run_%s_%s_%d", c->tmp, c->s->name, bench_prec[1], i);
    c->bt[i] = (bench_tokens){7, c->s->vocab};
    return bench_variant_open(&v[i], i, bench_prec[i / 2], i % 2, c->mdir, odir, 2 * c->steps + 1,
                              &c->bt[i]);
}

/* Opens the variants, runs the sessions and fills res.  With all four trainers alive: one session,
 * rounds 1 0 2 3 / 3 2 0 1.  Else the pairs (1 0), (0 2), (2 3) one after the
 * other, two trainers alive at a time. */
static int bench_shape_run(bench_ctx *c, bench_variant *v, bench_result *res)
{
    const int steps = c->steps;
    int seen[BENCH_VARIANTS] = {0};
    memset(v, 0, BENCH_VARIANTS * sizeof *v);
    memset(res, 0, sizeof *res);
    if (bench_open(c, v, 0))
        return -1;
    double est_gib = 4.0 * (double)v[0].mem.total_bytes / (1 << 30);
    if (est_gib <= BENCH_ROTATE_GIB) {
        static const int all[BENCH_VARIANTS] = {1, 0, 2, 3};
        if (bench_open(c, v, 1) || bench_open(c, v, 2) || bench_open(c, v, 3) ||
            bench_rounds(v, all, BENCH_VARIANTS, steps))
            return -1;
        bench_measure(v, all, BENCH_VARIANTS, steps, res, seen);
        for (int i = 0; i < BENCH_VARIANTS; i++)
            bench_close(v, i);
        return 0;
    }
    printf("%-8s four trainers need ~%.1f GiB > %d: the pairs fp32 QAT/fp32, fp32/bf16 and "
           "bf16 QAT/bf16 run one after the other\n", c->s->name, est_gib, BENCH_ROTATE_GIB);
    static const int p1[2] = {1, 0}, p0[2] = {0, 2}, p2[2] = {2, 3};
    if (bench_open(c, v, 1) || bench_rounds(v, p1, 2, steps))
        return -1;
    bench_measure(v, p1, 2, steps, res, seen);
    bench_close(v, 1);
    if (bench_open(c, v, 2) || bench_rounds(v, p0, 2, steps))
        return -1;
    bench_measure(v, p0, 2, steps, res, seen);
    bench_close(v, 0);
    if (bench_open(c, v, 3) || bench_rounds(v, p2, 2, steps))
        return -1;
    bench_measure(v, p2, 2, steps, res, seen);
    bench_close(v, 2);
    bench_close(v, 3);
    return 0;
}

/* PyTorch eager training tok/s on this shape (fp32, or bf16 autocast), out of the
 * box or tuned (bench_torch.h); *load = the load average before the run; -1 when
 * the script gives no figure (no torch, or it failed). */
static double bench_torch(const bench_shape *s, int threads, int steps, int bf16, int tuned,
                          double *load)
{
    *load = bench_loadavg();
    if (access("/usr/bin/python3", X_OK) != 0)
        return -1;
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "%s/usr/bin/python3 tools/bench_torch_train.py --dim %d --layers %d --heads %d "
             "--kv-heads %d --hidden %d --vocab %d --batch %d --seq %d --steps %d --threads %d "
             "--precision %s 2>/dev/null",
             bench_torch_env(tuned), s->dim, s->layers, s->heads, s->heads, s->hidden, s->vocab,
             BENCH_B, BENCH_T, steps, threads, bf16 ? "bf16" : "fp32");
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[4096] = "";
    double v = -1;
    if (fgets(line, sizeof line, p)) {
        const char *k = strstr(line, "\"tok_per_s\":");
        if (k)
            v = strtod(k + 12, NULL);
    }
    pclose(p);
    return v;
}

/* Head to head with tuned PyTorch: our trainer at one precision (no QAT) alone in
 * the process, as PyTorch's script is in its own, against the script, in
 * alternating turns (ours first on even rounds, PyTorch first on odd ones).  Each
 * turn runs steps + 1 consecutive steps and takes the median of the last steps
 * (PyTorch's script does the same with its first step); the figure judged is the
 * median over rounds of the same-round ratio, so a drift of the machine's speed
 * between turns cancels.  The sessions above time each trainer's second step
 * after another trainer's (up to four alive, caches and TLB shared), which
 * PyTorch's runs never see: their figures are printed next to these. */
enum { BENCH_H2H_ROUNDS = 3 };

typedef struct bench_h2h {
    double ours, torch, ratio;   /* medians: tok/s, tok/s, same-round ours / PyTorch */
    double load;                 /* load average before the first turn */
    double r[BENCH_H2H_ROUNDS];  /* the same-round ratios */
    int rounds;
} bench_h2h;

static int bench_h2h_run(bench_ctx *c, const char *prec, int bf16, int rounds, int threads,
                         bench_h2h *h)
{
    const int steps = c->steps;
    const double tokens = (double)BENCH_B * BENCH_T;
    bench_variant v;
    memset(&v, 0, sizeof v);
    memset(h, 0, sizeof *h);
    char odir[500];
    snprintf(odir, sizeof odir, "%s/run_%s_h2h_%s", c->tmp, c->s->name, prec);
    c->bt[0] = (bench_tokens){7, c->s->vocab};
    h->load = bench_loadavg();
    if (bench_variant_open(&v, 0, prec, 0, c->mdir, odir, rounds * (steps + 1) + 2, &c->bt[0]))
        return -1;
    double ours[BENCH_H2H_ROUNDS], torch[BENCH_H2H_ROUNDS];
    qs_diag d = {0};
    for (int r = 0; r < rounds; r++)
        for (int turn = 0; turn < 2; turn++) {
            if ((turn ^ (r & 1)) == 1) {   /* PyTorch's turn */
                double load;
                torch[r] = bench_torch(c->s, threads, steps, bf16, 1, &load);
                if (torch[r] <= 0) {
                    trainer_destroy(v.t);
                    return 1;
                }
                continue;
            }
            for (int k = 0; k <= steps; k++) {
                double w0 = now_s(CLOCK_MONOTONIC);
                if (bench_step(&v, &d)) {
                    fprintf(stderr, "bench_train: %s\n", d.msg);
                    trainer_destroy(v.t);
                    return -1;
                }
                if (k)
                    v.wall_s[k - 1] = now_s(CLOCK_MONOTONIC) - w0;
            }
            ours[r] = tokens / median(v.wall_s, steps);
        }
    trainer_destroy(v.t);
    for (int r = 0; r < rounds; r++)
        h->r[r] = ours[r] / torch[r];
    h->rounds = rounds;
    h->ours = median(ours, rounds);
    h->torch = median(torch, rounds);
    h->ratio = median(h->r, rounds);
    return 0;
}

/* The baselines of one shape against ours: PyTorch out of the box once, then
 * head to head with the tuned one, BENCH_H2H_ROUNDS rounds each, for fp32 and
 * for each of our bf16 precisions against bf16 autocast (fp32 ran one round
 * while our lead was several times the 2x target; on the AMX Xeon it is
 * 1.3-1.9x, and one round's ratio moved by 0.1 between runs); issue 13's
 * targets are judged on the head-to-head ratios.  sess[] holds the sessions'
 * tok/s of fp32 and of each bf16 precision, for comparison. */
static int bench_torch_report(bench_ctx *c, int threads, const char *const *bf_name, int n_bf,
                              const double *sess)
{
    static const char *const what[2] = {"fp32 eager", "bf16 autocast"};
    static const double target[2] = {2.0, 1.5};
    const bench_shape *s = c->s;
    double ootb[2], load[2];
    for (int bf = 0; bf < 2; bf++)
        ootb[bf] = bench_torch(s, threads, c->steps, bf, 0, &load[bf]);
    if (ootb[0] <= 0 || ootb[1] <= 0) {
        printf("%-8s PyTorch baseline skipped: tools/bench_torch_train.py under /usr/bin/python3 "
               "printed no tok_per_s (torch missing, or the script failed: run it by hand)\n",
               s->name);
        return 0;
    }
    printf("%-8s PyTorch out of the box: fp32 eager %.0f tok/s (load %.1f), bf16 autocast %.0f "
           "tok/s (load %.1f)\n", s->name, ootb[0], load[0], ootb[1], load[1]);
    printf("%-8s head to head with tuned PyTorch (%s): ours alone in the process, turns "
           "alternating, %d steps per turn after one untimed\n", s->name, bench_torch_tuning(),
           c->steps);
    for (int i = 0; i <= n_bf; i++) {
        const int bf = i > 0;
        const char *prec = bf ? bf_name[i - 1] : "fp32";
        bench_h2h h;
        int rc = bench_h2h_run(c, prec, bf, BENCH_H2H_ROUNDS, threads, &h);
        if (rc < 0)
            return -1;
        if (rc > 0) {
            printf("%-8s PyTorch baseline skipped: tools/bench_torch_train.py failed in a turn\n",
                   s->name);
            return 0;
        }
        char rounds[120] = "";
        for (int r = 0, n = 0; r < h.rounds && n < (int)sizeof rounds; r++)
            n += snprintf(rounds + n, sizeof rounds - (size_t)n, "%s%.2f", r ? " " : "", h.r[r]);
        printf("%-8s ours %s %.0f tok/s, tuned PyTorch %s %.0f tok/s (medians of %d round%s, "
               "load %.1f): %.2fx same-round median [%s] (target >= %.1f: %s); %.2fx out of "
               "the box; the session's %.0f tok/s = %.2fx\n",
               s->name, prec, h.ours, what[bf], h.torch, h.rounds, h.rounds > 1 ? "s" : "",
               h.load, h.ratio, rounds, target[bf], h.ratio >= target[bf] ? "PASS" : "MISS",
               h.ours / ootb[bf], sess[i], sess[i] / h.torch);
        fflush(stdout);
    }
    return 0;
}

/* The training-only element-wise kernels on this shape's sizes, portable loop
 * (cpu_limit AVX2) against the dispatched AVX-512 path, interleaved per rep;
 * medians of wall time per call. */
enum { BENCH_KERNELS = 4, BENCH_KERNEL_REPS = 7 };

static void bench_kernel_call(int k, float *a, float *b, float *c, float *e, const int32_t *tg,
                              int N, int V, size_t nf, adamw_state *st)
{
    static const adamw_hparams h = {0.9, 0.95, 1e-8, 0.1};
    switch (k) {
    case 0: xent_forward(e, NULL, a, tg, N, V); break;
    case 1: xent_backward(b, NULL, a, tg, N, V, 1e-3f); break;
    case 2: swiglu_backward(b, b + nf, c, a, a + nf, nf); break;
    default: adamw_step(st, a, c, 1e-5, &h); break;
    }
}

static void bench_kernel_buffers_free(float *a, float *b, float *c, float *e, int32_t *tg)
{
    qs_free(a);
    qs_free(b);
    qs_free(c);
    qs_free(e);
    qs_free(tg);
}

static void bench_kernels(const bench_shape *s)
{
    if (cpu_level() < CPU_LEVEL_AVX512) {
        printf("%-8s kernels: no AVX-512 on this CPU, portable loops only\n", s->name);
        return;
    }
    static const char *const names[BENCH_KERNELS] = {"xent_forward", "xent_backward",
                                                     "swiglu_backward", "adamw_step"};
    const int N = BENCH_B * BENCH_T, V = s->vocab;
    size_t nf = (size_t)N * s->hidden, nl = (size_t)N * V, np = 16u << 20;   /* 16M params */
    size_t big = nl > 2 * nf ? nl : 2 * nf;
    big = big > np ? big : np;
    float *a = qs_malloc(big * 4), *b = qs_malloc(big * 4), *c = qs_malloc(big * 4);
    float *e = qs_malloc((size_t)N * 4);
    int32_t *tg = qs_malloc((size_t)N * sizeof *tg);
    adamw_state st;
    if (!a || !b || !c || !e || !tg || adamw_init(&st, np)) {
        printf("%-8s kernels: out of memory\n", s->name);
        adamw_free(&st);
        bench_kernel_buffers_free(a, b, c, e, tg);
        return;
    }
    unsigned long r = 5;
    for (size_t i = 0; i < big; i++) {
        r = r * 6364136223846793005ul + 1442695040888963407ul;
        a[i] = (float)((r >> 40) & 0xffff) / 8192.0f - 4.0f;
        b[i] = 0.0f;
        c[i] = a[i] * 1e-3f;
    }
    for (int n = 0; n < N; n++)
        tg[n] = (int32_t)((unsigned)n * 7919u % (unsigned)V);
    double t[BENCH_KERNELS][2][BENCH_KERNEL_REPS];
    int level = cpu_level();
    for (int rep = 0; rep < BENCH_KERNEL_REPS; rep++)
        for (int k = 0; k < BENCH_KERNELS; k++)
            for (int simd = 0; simd < 2; simd++) {
                int path = (rep + simd) % 2;   /* alternate which path runs first */
                cpu_limit(path ? level : CPU_LEVEL_AVX2);
                double w0 = now_s(CLOCK_MONOTONIC);
                bench_kernel_call(k, a, b, c, e, tg, N, V, nf, &st);
                t[k][path][rep] = now_s(CLOCK_MONOTONIC) - w0;
            }
    cpu_limit(level);
    for (int k = 0; k < BENCH_KERNELS; k++) {
        double p = median(t[k][0], BENCH_KERNEL_REPS), v = median(t[k][1], BENCH_KERNEL_REPS);
        printf("%-8s kernel %-16s portable %8.2f ms  avx512 %8.2f ms  %5.1fx%s\n", s->name,
               names[k], 1e3 * p, 1e3 * v, p / v, k == 3 ? "  (16M params)" : "");
    }
    adamw_free(&st);
    bench_kernel_buffers_free(a, b, c, e, tg);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 3;
    if (steps < 1 || steps > BENCH_MAX_STEPS)
        steps = 3;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    char tmp[256];
    snprintf(tmp, sizeof tmp, "/tmp/qatscope-bench-train.%ld", (long)getpid());
    printf("bench_train: B=%d T=%d, %d timed steps per variant (medians), %d threads; a full "
           "training step (forward + backward + AdamW); compared pairs run back to back in every round, "
           "order flipped each round; cpu = process CPU time of all threads per step\n",
           BENCH_B, BENCH_T, steps, threads);
    double tokens = (double)BENCH_B * BENCH_T;
    for (size_t k = 0; k < sizeof bench_shapes / sizeof *bench_shapes; k++) {
        const bench_shape *s = &bench_shapes[k];
        if (argc > 2 && strcmp(argv[2], s->name))
            continue;
        char mdir[400];
        snprintf(mdir, sizeof mdir, "%s/%s", tmp, s->name);
        if (bench_model_write(s, mdir))
            return 1;
        static bench_variant v[BENCH_VARIANTS];
        static bench_ctx ctx;
        static const char *const bf_name[2] = {"bf16", "bf16-amx"};
        const int n_bf = cpu_amx_bf16() ? 2 : 1;   /* a second session with bf16-amx */
        double sess[3] = {0, 0, 0};   /* the sessions' tok/s: fp32, then each bf16 */
        for (int sb = 0; sb < n_bf; sb++) {
            bench_prec[1] = bf_name[sb];
            ctx = (bench_ctx){s, mdir, tmp, steps, {{0, 0}}};
            bench_result res;
            if (bench_shape_run(&ctx, v, &res))
                return 1;
            for (int i = 0; i < BENCH_VARIANTS; i++)
                printf("%-8s %-8s %-7s %9.0f tok/s   wall %7.1f ms/step  cpu %7.1f ms/step   "
                       "peak memory %.2fx of estimate %s\n",
                       s->name, bench_prec[i / 2], i % 2 ? "HiF8QAT" : "noquant",
                       tokens / res.wall[i], 1e3 * res.wall[i], 1e3 * res.cpu[i], v[i].peak_ratio,
                       v[i].peak_ratio <= 1.10 && v[i].peak_ratio >= 0.90 ? "(PASS <=10%)"
                                                                          : "(MISS >10%)");
            const bench_ratio *bf = &res.pair[0];
            printf("%-8s %s/fp32 speed %.2fx same-round median (target >= 1.3: %s); %.2fx wall "
                   "medians, %.2fx cpu\n",
                   s->name, bench_prec[1], bf->paired, bf->paired >= 1.3 ? "PASS" : "MISS",
                   bf->wall, bf->cpu);
            for (int p = 1; p < BENCH_PAIRS; p++) {
                const bench_ratio *q = &res.pair[p];
                printf("%-8s QAT overhead %s %+.1f%% same-round median (target <= 15%%: %s); "
                       "%+.1f%% wall medians, %+.1f%% cpu\n",
                       s->name, bench_prec[p - 1], 100.0 * (q->paired - 1.0),
                       q->paired <= 1.15 ? "PASS" : "MISS", 100.0 * (q->wall - 1.0),
                       100.0 * (q->cpu - 1.0));
            }
            if (sb == 0)
                sess[0] = tokens / res.wall[0];
            sess[1 + sb] = tokens / res.wall[2];
        }
        bench_kernels(s);
        printf("%-8s load average %.1f after our runs\n", s->name, bench_loadavg());
        ctx = (bench_ctx){s, mdir, tmp, steps, {{0, 0}}};
        if (bench_torch_report(&ctx, threads, bf_name, n_bf, sess))
            return 1;
        fflush(stdout);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_train: could not remove %s\n", tmp);
    return 0;
}
