/* bench_dist.c: data-parallel training on this machine (issue 14).
 *
 * The same optimizer step (global batch 2 micro-batches of B=4 x T=256 tokens,
 * HiF8 QAT on the default selection, fp32) two ways, on the dim-288 and dim-768
 * bench shapes (random weights, random tokens):
 *   one process, grad_accum 2, OMP_NUM_THREADS=2         bench_dist [STEPS [SHAPE]]
 *   mpirun -np 2, grad_accum 1, OMP_NUM_THREADS=1 each   (the `make MPI=1` build)
 * Printed by rank 0: the median wall time of a step (first step excluded) and
 * tokens/s of the global batch; with 2 ranks also the gradient all-reduce alone
 * (dist_allreduce_sum_f32 over the n_params gradient block, median of 5): the
 * bytes each rank holds and sends (2 (N-1)/N of the block) and its time.
 * `make bench-dist` builds the MPI binary and runs both (tools/bench_dist.sh);
 * in the default build this program measures the one-process side only.
 * Figures are provisional on a shared machine: run it under the bigmem lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "qs/dist.h"
#include "qs/fileio.h"
#include "qs/hfconfig.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/runcfg.h"
#include "qs/safetensors.h"
#include "qs/trainer.h"

typedef struct bench_shape {
    const char *name;
    int dim, layers, heads, hidden, vocab;
} bench_shape;

static const bench_shape bench_shapes[] = {
    {"dim-288", 288, 6, 6, 768, 32000},
    {"dim-768", 768, 12, 12, 2048, 32000},
};

enum { BENCH_B = 4, BENCH_T = 256, BENCH_GLOBAL_MB = 2, BENCH_REPS = 5 };

typedef struct bench_tokens {
    unsigned long s;
    int vocab;
} bench_tokens;

/* the same stream on every rank: each skips the other ranks' micro-batches */
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

static int bench_nopos(void *self, void **bytes, size_t *n, qs_diag *d)
{
    (void)self, (void)bytes, (void)n;
    return diag_set(d, QS_EUNSUPPORTED, NULL, -1, "bench data has no position");
}

static int bench_norestore(void *self, const void *bytes, size_t n, qs_diag *d)
{
    (void)self, (void)bytes, (void)n;
    return diag_set(d, QS_EUNSUPPORTED, NULL, -1, "bench data has no position");
}

static int bench_model_write(const bench_shape *s, const char *dir, qs_diag *d)
{
    char js[1024], path[700];
    int n = snprintf(js, sizeof js,
                     "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
                     "\"hidden_size\":%d,\"intermediate_size\":%d,\"num_hidden_layers\":%d,"
                     "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"vocab_size\":%d,"
                     "\"max_position_embeddings\":1024,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
                     "\"hidden_act\":\"silu\",\"tie_word_embeddings\":false}",
                     s->dim, s->hidden, s->layers, s->heads, s->heads, s->vocab);
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc;
    if ((rc = fileio_mkdir_p(dir, d)) || (rc = fileio_write_atomic(path, js, (size_t)n, d)))
        return rc;
    llama_config c;
    llama_model m;
    if ((rc = hfconfig_load(&c, dir, d)) || (rc = model_init(&m, &c, d)))
        return rc;
    model_params_randomize(&m, 42, 0.02f);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    rc = model_save_safetensors(&m, path, SAFETENSORS_BF16, d);
    model_free(&m);
    return rc;
}

static double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int bench_shape_run(const bench_shape *s, int steps, const char *tmp, qs_diag *d)
{
    int N = dist_size(), me = dist_rank(), threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    char model_dir[400], out_dir[480];
    snprintf(model_dir, sizeof model_dir, "%s/%s", tmp, s->name);
    snprintf(out_dir, sizeof out_dir, "%s/%s-run-%d", tmp, s->name, N);
    int rc = me == 0 ? bench_model_write(s, model_dir, d) : 0;
    if ((rc = dist_agree(rc, 0, NULL, d)))   /* the model exists before anyone loads it */
        return rc;
    runcfg cfg;
    runcfg_defaults(&cfg);
    snprintf(cfg.model, sizeof cfg.model, "%s", model_dir);
    snprintf(cfg.train_data, sizeof cfg.train_data, "in-memory");
    snprintf(cfg.out_dir, sizeof cfg.out_dir, "%s", out_dir);
    cfg.batch_size = BENCH_B;
    cfg.seq_len = BENCH_T;
    cfg.grad_accum = BENCH_GLOBAL_MB / N;
    cfg.steps = steps + 1;
    cfg.bf16_warmup_steps = 0;
    bench_tokens tok = {12345, s->vocab};
    train_data data = {&tok, bench_next, bench_nopos, bench_norestore};
    trainer_options opt = {NULL, 0, NULL};
    trainer *t = NULL;
    rc = trainer_create(&t, &cfg, &data, &opt, d);
    if ((rc = dist_agree(rc, 0, NULL, d)))
        return rc;
    double *dt = qs_calloc((size_t)steps + BENCH_REPS, sizeof *dt);
    size_t n_params;
    trainer_params(t, &n_params);
    train_step_info info;
    for (int i = 0; i <= steps && !rc; i++) {
        double t0 = bench_now();
        rc = trainer_step(t, &info, d);
        if (i > 0)
            dt[i - 1] = bench_now() - t0;
    }
    double step_s = rc ? 0 : bench_median(dt, steps);
    double ar_s = 0;
    if (!rc && N > 1) {   /* the gradient all-reduce alone, on a block of the same size */
        float *g = qs_calloc(n_params, sizeof *g);
        for (int i = 0; i < BENCH_REPS && g && !rc; i++) {
            double t0 = bench_now();
            rc = dist_allreduce_sum_f32(g, n_params, d);
            dt[i] = bench_now() - t0;
        }
        ar_s = bench_median(dt, BENCH_REPS);
        qs_free(g);
    }
    qs_free(dt);
    trainer_destroy(t);
    if ((rc = dist_agree(rc, 0, NULL, d)))
        return rc;
    if (me == 0) {
        double tokens = (double)BENCH_GLOBAL_MB * BENCH_B * BENCH_T;
        printf("%s %zu params: %d rank(s) x %d thread(s), grad_accum %d: step %.3f s median of %d, "
               "%.0f tok/s", s->name, n_params, N, threads, BENCH_GLOBAL_MB / N, step_s, steps,
               tokens / step_s);
        if (N > 1) {
            double mb = n_params * 4.0 / 1048576.0;
            printf("; gradient all-reduce %.1f MiB per rank (sends %.1f MiB), %.3f s = %.0f%% of "
                   "the step", mb, mb * 2.0 * (N - 1) / N, ar_s, 100.0 * ar_s / step_s);
        }
        printf("\n");
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    qs_diag d = {0};
    if (dist_init(&argc, &argv, &d)) {
        fprintf(stderr, "bench_dist: %s\n", d.msg);
        return 1;
    }
    int steps = argc > 1 ? atoi(argv[1]) : 3;
    const char *only = argc > 2 ? argv[2] : NULL;
    if (steps < 1 || BENCH_GLOBAL_MB % dist_size()) {
        if (dist_rank() == 0)
            fprintf(stderr, "usage: [mpirun -np 1|2] bench_dist [STEPS>=1 [dim-288|dim-768]]\n");
        dist_finalize();
        return 2;
    }
    const char *base = getenv("TMPDIR");
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s/qatscope-bench-dist", base && *base ? base : "/tmp");
    if (dist_rank() == 0 && dist_size() == 1 && !strcmp(dist_impl_name(), "single"))
        printf("bench_dist: default build, one process only (make bench-dist adds mpirun -np 2)\n");
    int rc = 0;
    for (size_t i = 0; i < sizeof bench_shapes / sizeof *bench_shapes && !rc; i++)
        if (!only || !strcmp(only, bench_shapes[i].name))
            rc = bench_shape_run(&bench_shapes[i], steps, tmp, &d);
    if (rc && dist_rank() == 0)
        fprintf(stderr, "bench_dist: %s\n", d.msg);
    if (dist_rank() == 0) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_dist: could not remove %s\n", tmp);
    }
    dist_finalize();
    return rc ? 1 : 0;
}
