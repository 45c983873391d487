/* bench_scale_train.h: bench_scale's `train` section (issue 13, items 5 and 6),
 * in its own file to keep bench_scale.c readable.  Not a standalone header:
 * bench_scale.c includes it after its helpers (now_s, loadavg_print,
 * child_run / child_run_argv, SCALE_DIR, PEAK_BF16_GFLOPS, scale_host_bf16).
 *   train  one `qatscope train` child on the 1B-shaped checkpoint: B=1 x
 *          T=1024, bf16, HiF8 QAT on the default selection from the first step,
 *          recompute on, TRAIN_STEPS (2) steps on the TinyStories train head
 *          (tokenized once into build/scale/train_shards); peak RSS (wait4)
 *          against the trainer's own estimate (its header line); the median
 *          step time after the first (metrics.jsonl; the first is a warm-up) and the
 *          model FLOP/s 6 x params x tokens / step time against the bf16
 *          peak; then the matmuls of such a step alone (forward, dX and dW of
 *          every Linear shape and the lm_head on 1024 rows, the recomputed
 *          forwards included, unpacked weights as the recompute mode runs
 *          them): the step's share outside the GEMM.
 */
#ifndef QS_BENCH_SCALE_TRAIN_H
#define QS_BENCH_SCALE_TRAIN_H

#include "qs/hfconfig.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"

/* time-boxed: a 1B QAT step takes 15-40 s on 2 cores (the first ~13 s more:
 * page faults of the Adam moments, workspace growth) and the run ends with a
 * 14 GB checkpoint, so the fewest steps that time one: the first and one more */
#define TRAIN_STEPS 2
#define TRAIN_T 1024
#define TRAIN_MEM_GIB 23.4   /* what this 24 GiB machine leaves a process */

typedef struct scale_train {
    double est_mib, peak_mib;   /* the trainer's estimate, the child's peak RSS */
    double step_s;              /* median step time after the first */
    double model_gflops;        /* 6 x params x tokens / step_s */
    double gemm_s;              /* the step's matmuls alone */
    int ok;
} scale_train;

/* Tokens for the run: the TinyStories train head through the model's tokenizer. */
static int scale_train_shards(const char *bin, const char *shared, char *out, size_t out_bytes)
{
    snprintf(out, out_bytes, "build/scale/train_shards");
    if (fileio_is_dir(out))
        return 0;
    char input[600];
    snprintf(input, sizeof input, "%s/corpora/tinystories-sample/tinystories_train_head.txt",
             shared);
    char *argv[] = {(char *)bin, "tokenize", "--model", SCALE_DIR, "--input", input, "--out",
                    out, NULL};
    child_run r;
    return child_run_argv(argv, &r);
}

/* Seconds of forward + dX + dW of one Linear [O, IN] on N rows (unpacked
 * weight through a workspace, as recompute trains), and of the forward alone. */
static int scale_train_linear(int N, int IN, int O, double *fwd_s, double *bwd_s)
{
    size_t nx = (size_t)N * IN, nw = (size_t)O * IN, no = (size_t)N * O;
    float *x = qs_malloc(nx * 4), *w = qs_malloc(nw * 4), *out = qs_malloc(no * 4);
    float *dx = qs_calloc(nx, 4), *dw = qs_calloc(nw, 4);
    matmul_ws *ws = matmul_ws_create();
    int rc = -1;
    if (x && w && out && dx && dw && ws) {
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        for (size_t i = 0; i < nw; i++)
            w[i] = (float)((i * 40503u) % 1000) * 1e-4f - 0.05f;
        double best_f = 1e30, best_b = 1e30;
        for (int rep = 0; rep < 2; rep++) {   /* the first fills the workspace */
            double t0 = now_s();
            matmul_forward_ws(out, x, w, NULL, N, IN, O, MATMUL_BF16, ws);
            double t1 = now_s();
            matmul_backward_ws(dx, dw, NULL, out, x, w, N, IN, O, MATMUL_BF16, ws);
            double t2 = now_s();
            best_f = t1 - t0 < best_f ? t1 - t0 : best_f;
            best_b = t2 - t1 < best_b ? t2 - t1 : best_b;
        }
        *fwd_s = best_f;
        *bwd_s = best_b;
        rc = 0;
    }
    matmul_ws_destroy(ws);
    qs_free(x);
    qs_free(w);
    qs_free(out);
    qs_free(dx);
    qs_free(dw);
    return rc;
}

/* The matmuls of one recompute step: every Linear forward once and again in the
 * recomputation (all blocks but the last, down_proj not rerun), backward once;
 * the lm_head forward and backward once. */
static double scale_train_gemm_s(const llama_config *c)
{
    int QD = c->n_heads * c->head_dim, KD = c->n_kv_heads * c->head_dim;
    const int in_dim[MODEL_LIN_COUNT + 1] = {c->dim, c->dim, c->dim, QD, c->dim, c->dim,
                                             c->hidden_dim, c->dim};
    const int out_dim[MODEL_LIN_COUNT + 1] = {QD, KD, KD, c->dim, c->hidden_dim, c->hidden_dim,
                                              c->dim, c->vocab_size};
    double total = 0;
    for (int k = 0; k <= MODEL_LIN_COUNT; k++) {
        double f, b;
        if (scale_train_linear(TRAIN_T, in_dim[k], out_dim[k], &f, &b))
            return -1;
        if (k == MODEL_LIN_COUNT) {
            total += f + b;
            continue;
        }
        int reruns = k == MODEL_LIN_DOWN ? 0 : c->n_layers - 1;
        total += (double)c->n_layers * (f + b) + (double)reruns * f;
    }
    return total;
}

static int scale_train_median_step(const char *metrics, double *step_s)
{
    char *text;
    size_t n;
    if (fileio_read_all(metrics, &text, &n, NULL))
        return -1;
    double tps[64];
    int k = 0;
    for (const char *p = strstr(text, "\"tok_per_s\":"); p && k < 64;
         p = strstr(p + 1, "\"tok_per_s\":"))
        tps[k++] = strtod(p + 12, NULL);
    qs_free(text);
    if (k < 1)
        return -1;
    int first = k > 1 ? 1 : 0;   /* the first step is a warm-up */
    qsort(tps + first, (size_t)(k - first), sizeof *tps, cmp_double);
    double mid = tps[first + (k - first) / 2];
    *step_s = TRAIN_T / mid;
    return 0;
}

static void scale_train_section(const char *bin, const char *shared, scale_train *r)
{
    memset(r, 0, sizeof *r);
    printf("\n== train (qatscope train: B=1 x T=%d, bf16, HiF8 QAT from step 0, recompute; "
           "time-boxed to %d steps, the first a warm-up: a 1B QAT step takes 15-40 s on 2 cores, "
           "and the run ends with a 14 GB checkpoint)\n", TRAIN_T, TRAIN_STEPS);
    loadavg_print("before");
    char shards[300];
    if (scale_train_shards(bin, shared, shards, sizeof shards)) {
        printf("  no training tokens (tokenize failed)\n");
        return;
    }
    const char *run = "build/scale/train_run", *cfg_path = "build/scale/train_run.json";
    char js[1024], cmd[400];
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"%s\",\"train_data\":\"%s\",\"out_dir\":\"%s\",\"batch_size\":1,"
                     "\"seq_len\":%d,\"steps\":%d,\"precision\":\"bf16\",\"qat\":true,"
                     "\"bf16_warmup_steps\":0,\"recompute\":true,\"lr\":1e-5}",
                     SCALE_DIR, shards, run, TRAIN_T, TRAIN_STEPS);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", run);
    if (system(cmd) != 0 || fileio_write_atomic(cfg_path, js, (size_t)n, NULL)) {
        printf("  cannot prepare %s\n", run);
        return;
    }
    char *argv[] = {(char *)bin, "train", "--config", (char *)cfg_path, NULL};
    child_run c;
    int rc = child_run_argv(argv, &c);
    const char *e = strstr(c.out, "memory estimate ");
    if (rc || !e || sscanf(e, "memory estimate %lf MiB", &r->est_mib) != 1) {
        printf("  train child failed\n");
        return;
    }
    r->peak_mib = c.maxrss_kb / 1024.0;
    char metrics[400];
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", run);
    llama_config lc;
    model_param_groups g;
    if (scale_train_median_step(metrics, &r->step_s) || hfconfig_load(&lc, SCALE_DIR, NULL) ||
        model_param_groups_count(&lc, &g)) {
        printf("  no step times in %s\n", metrics);
        return;
    }
    r->model_gflops = 6.0 * (double)g.total * TRAIN_T / r->step_s * 1e-9;
    printf("  peak RSS %.0f MiB, the trainer's estimate %.0f MiB (peak / estimate %.3f); %.1f s "
           "wall for the run (load, %d steps, checkpoint)\n", r->peak_mib, r->est_mib,
           r->peak_mib / r->est_mib, c.wall_s, TRAIN_STEPS);
    printf("  step %.1f s (median after the first): %.1f tokens/s, %.0f model GFLOP/s "
           "(6 x %.3g params x %d tokens) = %.1f%% of the %.0f GFLOP/s bf16 peak, %.1f%% of this "
           "host's %.0f\n", r->step_s, TRAIN_T / r->step_s, r->model_gflops, (double)g.total,
           TRAIN_T, 100.0 * r->model_gflops / PEAK_BF16_GFLOPS, PEAK_BF16_GFLOPS,
           100.0 * r->model_gflops / scale_host_bf16, scale_host_bf16);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", run);   /* 14 GB of checkpoint */
    if (system(cmd) != 0)
        printf("  could not remove %s\n", run);
    r->gemm_s = scale_train_gemm_s(&lc);
    if (r->gemm_s > 0)
        printf("  the step's matmuls alone (bf16, unpacked weights, recomputed forwards "
               "included): %.1f s = %.0f%% of the step\n", r->gemm_s,
               100.0 * r->gemm_s / r->step_s);
    r->ok = 1;
    loadavg_print("after");
}

static void scale_train_targets(const scale_train *r)
{
    if (!r->ok) {
        printf("  1B QAT training (B=1 x T=%d) in %.1f GiB: not measured\n", TRAIN_T,
               TRAIN_MEM_GIB);
        return;
    }
    printf("  1B QAT training (B=1 x T=%d, recompute) in %.1f GiB: %s (peak %.2f GiB)\n", TRAIN_T,
           TRAIN_MEM_GIB, r->peak_mib <= TRAIN_MEM_GIB * 1024 ? "PASS" : "MISS",
           r->peak_mib / 1024);
    double q = r->peak_mib / r->est_mib;
    printf("  training memory estimate within 10%% of the peak: %s (peak / estimate %.3f)\n",
           q >= 0.9 && q <= 1.1 ? "PASS" : "MISS", q);
}

#endif
