/* bench_forward.c: prompt-processing throughput of model_forward (B=8 x T=256,
 * inference arena, random weights) for a stories15M-shaped and a 768-wide
 * config, fp32 and bf16, against in the same run:
 *  - OpenBLAS sgemm and our bf16 matmul on the model's largest shape (the
 *    lm_head, 2048 x C -> 32000): the ceiling of each path;
 *  - PyTorch eager (tools/bench_torch_forward.py via /usr/bin/python3, same
 *    shapes and thread count) when torch is importable, else a note: out of
 *    the box and tuned (tcmalloc + OMP_WAIT_POLICY=PASSIVE, bench_torch.h),
 *    the targets judged against the tuned run.
 * The five paths are interleaved: each repetition runs every path once, in an
 * order rotated by one per repetition, so a burst of load from other jobs on
 * the machine hits all paths rather than one.  Each forward is timed by wall
 * clock and by process CPU time (all threads); both medians are printed, with
 * the bf16/fp32 ratio from each and a PASS/MISS line per issue-3 target.
 * Prints medians of REPS runs, GFLOP/s (2 flops per weight per token + causal
 * attention), fraction of peak (2 Zen 5 cores: 445 fp32 / 890 bf16 GFLOP/s)
 * and of this host's own peak, measured first (bench_peak.h), and same-run
 * ratios.  usage: bench_forward [REPS] [small|large|all] [notorch]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "qs/cpu.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "bench_peak.h"
#include "bench_stats.h"
#include "bench_torch.h"

#define PEAK_FP32_GFLOPS 445.0
#define PEAK_BF16_GFLOPS 890.0
#define BENCH_B 8
#define BENCH_T 256

typedef struct bench_cfg {
    const char *name;
    int dim, layers, heads, hidden, vocab;
} bench_cfg;

static const bench_cfg cfgs[] = {
    {"stories15M", 288, 6, 6, 768, 32000},
    {"d768-L12", 768, 12, 12, 2048, 32000},
};

#define N_PATHS 5
#define TARGET_BF16_OVER_FP32 1.6

static double forward_flops(const llama_config *c, int B, int T)
{
    double C = c->dim, Fh = c->hidden_dim, QD = (double)c->n_heads * c->head_dim;
    double KD = (double)c->n_kv_heads * c->head_dim;
    double w_per_layer = C * QD * 2 + C * KD * 2 + 3 * C * Fh;
    double linear = 2.0 * B * T * (c->n_layers * w_per_layer + (double)c->vocab_size * C);
    double attn = 4.0 * B * c->n_heads * c->head_dim * (T * (T + 1.0) / 2) * c->n_layers;
    return linear + attn;
}

static double time_matmul(int N, int IN, int O, int prec, int reps)
{
    float *x = qs_malloc((size_t)N * IN * 4), *w = qs_malloc((size_t)O * IN * 4);
    float *out = qs_malloc((size_t)N * O * 4);
    double t[16], r = 0;
    if (x && w && out) {
        for (size_t i = 0; i < (size_t)N * IN; i++)
            x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        for (size_t i = 0; i < (size_t)O * IN; i++)
            w[i] = (float)((i * 40503u) % 1000) * 1e-4f - 0.05f;
        matmul_forward(out, x, w, NULL, N, IN, O, prec);
        for (int k = 0; k < reps; k++) {
            double t0 = bench_clock_s(CLOCK_MONOTONIC);
            matmul_forward(out, x, w, NULL, N, IN, O, prec);
            t[k] = bench_clock_s(CLOCK_MONOTONIC) - t0;
        }
        r = bench_median(t, reps);
    }
    qs_free(x);
    qs_free(w);
    qs_free(out);
    return r;
}

/* torch tokens/s for fp32 and bf16 (0 when unavailable), out of the box or tuned
 * (bench_torch.h) */
static void torch_bench(const bench_cfg *b, int reps, int threads, int tuned, double tps[2])
{
    tps[0] = tps[1] = 0;
    char cmd[700];
    snprintf(cmd, sizeof cmd,
             "%s/usr/bin/python3 tools/bench_torch_forward.py %d %d %d %d %d %d %d %d %d "
             "2>/dev/null",
             bench_torch_env(tuned), b->dim, b->layers, b->heads, b->hidden, b->vocab, BENCH_B,
             BENCH_T, reps, threads);
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    char line[256], prec[16];
    double sec, tp;
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "torch %15s %lf %lf", prec, &sec, &tp) == 3)
            tps[!strcmp(prec, "bf16")] = tp;
    pclose(p);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 3;
    const char *which = argc > 2 ? argv[2] : "all";
    if (reps < 1 || reps > 16)
        reps = 3;
    int threads = bench_peak_threads();
    int no_torch = argc > 3 && !strcmp(argv[3], "notorch");
    int have_torch = !no_torch &&
                     system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
    printf("bench_forward: B=%d x T=%d, %d threads, cpu %s, median of %d runs\n", BENCH_B,
           BENCH_T, threads, cpu_describe(), reps);
    bench_peak host;
    double host_pk[2] = {0.0, bench_peak_report("bench_forward", &host, threads)};
    host_pk[0] = host.fp32;
    if (no_torch)
        printf("note: notorch given: PyTorch columns skipped\n");
    else if (!have_torch)
        printf("note: /usr/bin/python3 cannot import torch: PyTorch columns skipped\n");
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        const bench_cfg *b = &cfgs[ci];
        if (strcmp(which, "all") && strcmp(which, ci ? "large" : "small"))
            continue;
        llama_config c = {0};
        c.arch = LLAMA_ARCH_LLAMA;
        snprintf(c.arch_name, sizeof c.arch_name, "bench");
        c.dim = b->dim;
        c.hidden_dim = b->hidden;
        c.n_layers = b->layers;
        c.n_heads = c.n_kv_heads = b->heads;
        c.head_dim = b->dim / b->heads;
        c.vocab_size = b->vocab;
        c.max_pos = BENCH_T;
        c.norm_eps = 1e-5f;
        c.rope_theta = 10000.0;
        llama_model m;
        llama_acts a;
        qs_diag d = {0};
        if (model_init(&m, &c, &d) || model_acts_init(&a, &c, BENCH_B, BENCH_T, BENCH_T, 0, &d)) {
            fprintf(stderr, "bench_forward: %s\n", d.msg);
            return 1;
        }
        model_params_randomize(&m, 1, 0.02f);
        int32_t *tok = qs_malloc((size_t)BENCH_B * BENCH_T * sizeof *tok);
        for (int i = 0; i < BENCH_B * BENCH_T; i++)
            tok[i] = (int32_t)((i * 7919u) % (unsigned)b->vocab);
        double flops = forward_flops(&c, BENCH_B, BENCH_T), tps[2] = {0, 0}, torch_tps[2];
        printf("\n%s (dim %d, %d layers, %d heads, hidden %d, vocab %d): %.1f GFLOP per forward\n",
               b->name, b->dim, b->layers, b->heads, b->hidden, b->vocab, flops * 1e-9);
        printf("  %-22s %10s %12s %9s %8s %8s %11s\n", "path", "median ms", "tokens/s",
               "GFLOP/s", "of peak", "of host", "cpu ms");
        /* paths: fp32 via sgemm, our fp32 and bf16 kernels, each also with packed weights */
        const int precs[N_PATHS] = {MATMUL_FP32_BLAS, MATMUL_FP32, MATMUL_FP32, MATMUL_BF16,
                                    MATMUL_BF16};
        const int packed[N_PATHS] = {0, 0, 1, 0, 1};
        const char *names[N_PATHS] = {"ours fp32 (sgemm)", "ours fp32", "ours fp32 packed",
                                      "ours bf16", "ours bf16 packed"};
        /* one set of packs (and workspace) per precision, swapped into m per path */
        struct matmul_wpack **packs[2] = {NULL, NULL};
        struct matmul_ws *ws[2] = {NULL, NULL};
        for (int pr = 0; pr < 2; pr++) {
            m.precision = pr ? MATMUL_BF16 : MATMUL_FP32;
            if (model_packs_create(&m, &d)) {
                fprintf(stderr, "bench_forward: %s\n", d.msg);
                return 1;
            }
            packs[pr] = m.packs;
            ws[pr] = m.ws;
            m.packs = NULL;
            m.ws = NULL;
        }
        double wall[N_PATHS][16], cpu[N_PATHS][16];
        for (int k = -1; k < reps; k++) {   /* k = -1: warm-up of every path */
            for (int i = 0; i < N_PATHS; i++) {
                int p = (i + (k < 0 ? 0 : k)) % N_PATHS;
                int pr = precs[p] == MATMUL_BF16;
                m.precision = precs[p];
                m.packs = packed[p] ? packs[pr] : NULL;
                m.ws = packed[p] ? ws[pr] : NULL;
                m.packs_precision = precs[p];
                double w0 = bench_clock_s(CLOCK_MONOTONIC);
                double c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
                model_forward(&m, &a, tok, NULL, BENCH_B, BENCH_T, 0, &d);
                if (k >= 0) {
                    wall[p][k] = bench_clock_s(CLOCK_MONOTONIC) - w0;
                    cpu[p][k] = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
                }
            }
        }
        double tps_all[N_PATHS], cpu_med[N_PATHS];
        for (int p = 0; p < N_PATHS; p++) {
            double med = bench_median(wall[p], reps);
            double peak = p >= 3 ? PEAK_BF16_GFLOPS : PEAK_FP32_GFLOPS;
            cpu_med[p] = bench_median(cpu[p], reps);
            tps_all[p] = BENCH_B * BENCH_T / med;
            double hpk = host_pk[p >= 3];
            printf("  %-22s %10.1f %12.0f %9.1f %7.1f%% %7.1f%% %11.1f\n", names[p], med * 1e3,
                   tps_all[p], flops / med * 1e-9, 100.0 * flops / med * 1e-9 / peak,
                   hpk > 0.0 ? 100.0 * flops / med * 1e-9 / hpk : 0.0, cpu_med[p] * 1e3);
        }
        for (int pr = 0; pr < 2; pr++) {
            m.packs = packs[pr];
            m.ws = ws[pr];
            model_packs_destroy(&m);
        }
        m.precision = MATMUL_FP32;
        tps[0] = tps_all[1] > tps_all[2] ? tps_all[1] : tps_all[2];   /* best fp32 / bf16 */
        tps[1] = tps_all[3] > tps_all[4] ? tps_all[3] : tps_all[4];
        double cpu_fp32 = cpu_med[1] < cpu_med[2] ? cpu_med[1] : cpu_med[2];
        double cpu_bf16 = cpu_med[3] < cpu_med[4] ? cpu_med[3] : cpu_med[4];
        int N = BENCH_B * BENCH_T;
        double ts = time_matmul(N, b->dim, b->vocab, MATMUL_FP32_BLAS, reps);
        double tb = time_matmul(N, b->dim, b->vocab, MATMUL_BF16, reps);
        double mf = 2.0 * N * b->dim * b->vocab * 1e-9;
        printf("  ceiling: sgemm %dx%d->%d %.1f GFLOP/s (%.1f%% of fp32 peak); bf16 matmul "
               "%.1f GFLOP/s (%.1f%% of bf16 peak)\n",
               N, b->dim, b->vocab, mf / ts, 100.0 * mf / ts / PEAK_FP32_GFLOPS, mf / tb,
               100.0 * mf / tb / PEAK_BF16_GFLOPS);
        double ratio_wall = tps[1] / tps[0], ratio_cpu = cpu_fp32 / cpu_bf16;
        printf("  ratios (best of plain/packed): bf16/fp32 %.2fx, fp32/fp32-sgemm %.2fx; "
               "bf16/fp32 by cpu time %.2fx\n",
               ratio_wall, tps[0] / tps_all[0], ratio_cpu);
        printf("  target bf16 >= %.1fx our fp32: %s (wall %.2fx), %s (cpu time %.2fx)\n",
               TARGET_BF16_OVER_FP32, ratio_wall >= TARGET_BF16_OVER_FP32 ? "PASS" : "MISS",
               ratio_wall, ratio_cpu >= TARGET_BF16_OVER_FP32 ? "PASS" : "MISS", ratio_cpu);
        if (have_torch) {
            double plain_tps[2], load[2];
            printf("  load average %.1f after our runs\n", bench_loadavg());
            load[0] = bench_loadavg();
            torch_bench(b, reps, threads, 0, plain_tps);
            load[1] = bench_loadavg();
            torch_bench(b, reps, threads, 1, torch_tps);
            printf("  torch eager out of the box (load %.1f): fp32 %.0f tokens/s, bf16 %.0f "
                   "tokens/s; ours/torch: fp32 %.2fx, bf16 %.2fx\n",
                   load[0], plain_tps[0], plain_tps[1],
                   plain_tps[0] > 0 ? tps[0] / plain_tps[0] : 0.0,
                   plain_tps[1] > 0 ? tps[1] / plain_tps[1] : 0.0);
            printf("  torch eager tuned (load %.1f; %s): fp32 %.0f tokens/s, bf16 %.0f "
                   "tokens/s; ours/torch: fp32 %.2fx, bf16 %.2fx\n",
                   load[1], bench_torch_tuning(), torch_tps[0], torch_tps[1],
                   torch_tps[0] > 0 ? tps[0] / torch_tps[0] : 0.0,
                   torch_tps[1] > 0 ? tps[1] / torch_tps[1] : 0.0);
            printf("  target fp32 >= tuned torch fp32: %s (%.2fx)\n",
                   torch_tps[0] > 0 && tps[0] >= torch_tps[0] ? "PASS" : "MISS",
                   torch_tps[0] > 0 ? tps[0] / torch_tps[0] : 0.0);
            printf("  target bf16 >= tuned torch bf16: %s (%.2fx)\n",
                   torch_tps[1] > 0 && tps[1] >= torch_tps[1] ? "PASS" : "MISS",
                   torch_tps[1] > 0 ? tps[1] / torch_tps[1] : 0.0);
        } else {
            printf("  targets against torch: skipped (no torch)\n");
        }
        qs_free(tok);
        model_acts_free(&a);
        model_free(&m);
    }
    return 0;
}
