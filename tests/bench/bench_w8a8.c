/* bench_w8a8.c: HiF8 W8A8 inference (issue 17, item 4): memory and decode
 * speed of a HiF8 checkpoint against the same model in bf16, in the same run.
 *
 * 1. Always: the decode-shaped products (one token, M = 1) of the 1B model's
 *    MLP Linears (1536 -> 6144, 6144 -> 1536) on a HiF8 code pack against a
 *    bf16 pack of the same (decoded) weight, MATMUL_BF16: the bits must agree;
 *    prints the time per product (wall clock, and process CPU time: with
 *    OMP_NUM_THREADS=1 the latter is what a loaded machine still measures) and
 *    the ratio (weights streamed: 1 byte vs 2); on CPUs with AVX512-BF16 and
 *    VBMI also the code pack on the decode-then-FMA path (mode 0 of
 *    mm_codes_gemv_force_impl, the kernel before the in-register one), timed
 *    in the same run, and the rate in G codes/s of both.
 * 2. With a model (argv[1] or $QS_BENCH_W8A8_MODEL, e.g. build/scale/pangu1b):
 *    exports a HiF8 copy with the default (published) selection into
 *    build/bench_w8a8/<name>-hif8 unless it is there, then runs, as child
 *    processes of $QS_BIN (bin/qatscope), `generate --precision bf16` greedy on
 *    both checkpoints, BENCH_W8A8_REPS rounds of one run each in alternating
 *    order (then again at bf16-amx on AMX CPUs, where code packs run on the
 *    tiles), and prints
 *    peak RSS (ru_maxrss of the child: load + generation), the decode rate
 *    (tokens/s as generate prints it) and the ratios, with the target:
 *    resident weights = 1 byte per quantized parameter + 2 per other; tokens/s
 *    >= 1.3 x bf16, judged on the median of the rounds' own ratios.  A 1B model needs ~8 GB in the export step: run it under
 *    a flock shared by the memory-hungry jobs, and print /proc/loadavg around it (the
 *    bench does): timings on a loaded machine are provisional.
 * Usage: bench_w8a8 [MODEL_DIR [NEW_TOKENS (default 64)]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qs/cpu.h"
#include "qs/fileio.h"
#include "qs/hfconfig.h"
#include "qs/hif8.h"
#include "qs/matmul.h"
#include "qs/matmul_test.h"
#include "qs/mem.h"
#include "qs/qplan.h"
#include "qs/rng.h"

#define BENCH_W8A8_REPS 5

static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(bench_clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void loadavg(const char *when)
{
    char buf[128] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f))
            snprintf(buf, sizeof buf, "?\n");
        fclose(f);
    }
    printf("loadavg %s: %s", when, buf);
}

/* seconds per call of the product, the median of 5 batches of ~0.2 s */
static double time_product(float *y, const float *x, matmul_wpack *pk, matmul_ws *ws)
{
    double t[5];
    int reps = 1;
    for (;;) {   /* calibrate */
        double t0 = now_s();
        for (int r = 0; r < reps; r++)
            matmul_forward_packed_ws(y, x, pk, NULL, 1, ws);
        if (now_s() - t0 > 0.05 || reps > (1 << 20))
            break;
        reps *= 2;
    }
    reps *= 4;
    for (int b = 0; b < 5; b++) {
        double t0 = now_s();
        for (int r = 0; r < reps; r++)
            matmul_forward_packed_ws(y, x, pk, NULL, 1, ws);
        t[b] = (now_s() - t0) / reps;
    }
    for (int i = 1; i < 5; i++)   /* sort for the median */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double s = t[j];
            t[j] = t[j - 1];
            t[j - 1] = s;
        }
    return t[2];
}

static int bench_products(void)
{
    static const int shapes[][2] = {{1536, 6144}, {6144, 1536}};
    int bad = 0;
    printf("decode-shaped products (M = 1), bf16 matmuls: code pack vs bf16 pack\n");
    for (int s = 0; s < 2; s++) {
        int IN = shapes[s][0], O = shapes[s][1];
        size_t n = (size_t)IN * O;
        uint8_t *c = qs_malloc(n);
        float *w = qs_malloc(n * sizeof *w), *x = qs_malloc((size_t)IN * sizeof *x);
        float *y0 = qs_malloc((size_t)O * sizeof *y0), *y1 = qs_malloc((size_t)O * sizeof *y1);
        if (!c || !w || !x || !y0 || !y1)
            return 1;
        uint64_t st = 7 + (uint64_t)s;
        for (size_t i = 0; i < n; i++) {   /* codes of a Gaussian-ish weight: finite ones */
            uint8_t v = (uint8_t)(rng_splitmix64(&st) >> 56);
            c[i] = v == HIF8_CODE_NAN || v == HIF8_CODE_POS_INF || v == HIF8_CODE_NEG_INF ? 0 : v;
        }
        hif8_codes_decode(c, w, n);
        for (int i = 0; i < IN; i++)
            x[i] = (float)(i % 17) * 0.125f - 1.0f;
        matmul_wpack *pb = matmul_wpack_create(w, IN, O, MATMUL_BF16);
        matmul_wpack *pc = matmul_wpack_create_hif8(c, IN, O, MATMUL_BF16);
        matmul_ws *ws = matmul_ws_create();
        if (!pb || !pc || !ws)
            return 1;
        matmul_forward_packed_ws(y0, x, pb, NULL, 1, ws);
        matmul_forward_packed_ws(y1, x, pc, NULL, 1, ws);
        int same = !memcmp(y0, y1, (size_t)O * sizeof *y0);
        int two_paths = mm_codes_gemv_dp_impl();
        for (int k = 0; k < 2; k++) {   /* wall clock, then process CPU time */
            bench_clock = k ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
            double tb = time_product(y0, x, pb, ws), tc = time_product(y1, x, pc, ws);
            printf("  %4d -> %4d %s: bf16 pack %8.1f us (%5.1f GB/s), code pack %8.1f us "
                   "(%5.1f G codes/s): %.2fx, bits %s\n", IN, O, k ? "cpu " : "wall", tb * 1e6,
                   2.0 * n / tb * 1e-9, tc * 1e6, 1.0 * n / tc * 1e-9, tb / tc,
                   same ? "equal" : "DIFFER");
            if (!two_paths)
                continue;
            mm_codes_gemv_force_impl(0);
            double t0 = time_product(y1, x, pc, ws);
            int same0 = !memcmp(y0, y1, (size_t)O * sizeof *y0);
            mm_codes_gemv_force_impl(-1);
            printf("  %4d -> %4d %s: code pack, decode-then-FMA path %8.1f us (%5.1f G codes/s): "
                   "in-register kernel %.2fx faster, bits %s\n", IN, O, k ? "cpu " : "wall",
                   t0 * 1e6, 1.0 * n / t0 * 1e-9, t0 / tc, same0 ? "equal" : "DIFFER");
            same &= same0;
        }
        bad |= !same;
        matmul_wpack_destroy(pb);
        matmul_wpack_destroy(pc);
        matmul_ws_destroy(ws);
        qs_free(c);
        qs_free(w);
        qs_free(x);
        qs_free(y0);
        qs_free(y1);
    }
    return bad;
}

/* Runs argv (QS_BIN first) with stderr into err (the last bytes); exit status
 * or -1; peak RSS of the child in KiB. */
static int run_child(char *const *argv, char *err, size_t err_bytes, long *maxrss_kib)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fd[1], 2);
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        close(fd[0]);
        close(fd[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    size_t used = 0;
    char buf[4096];
    ssize_t k;
    while ((k = read(fd[0], buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < k; i++) {
            if (used + 1 >= err_bytes) {   /* keep the tail */
                memmove(err, err + err_bytes / 2, used - err_bytes / 2);
                used -= err_bytes / 2;
            }
            err[used++] = buf[i];
        }
    err[used] = 0;
    close(fd[0]);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid)
        return -1;
    *maxrss_kib = ru.ru_maxrss;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* parameters of the default selection's Linears and of everything else */
static int count_params(const char *dir, double *quantized, double *other)
{
    llama_config c;
    qplan p = {0};
    qs_diag d = {0};
    if (hfconfig_load(&c, dir, &d) || qplan_init(&p, c.n_layers)) {
        fprintf(stderr, "bench_w8a8: %s\n", d.msg);
        return 1;
    }
    qplan_set_default(&p);
    double q = 0, total = 0;
    const double C = c.dim, F = c.hidden_dim, QD = (double)c.n_heads * c.head_dim,
                 KD = (double)c.n_kv_heads * c.head_dim;
    const double sz[QPLAN_N_KINDS] = {C * QD, C * KD, C * KD, QD * C, C * F, C * F, F * C};
    for (int l = 0; l < c.n_layers; l++)
        for (int k = 0; k < QPLAN_N_KINDS; k++) {
            total += sz[k];
            if (qplan_is_on(&p, l, k))
                q += sz[k];
        }
    total += (double)c.vocab_size * C * (c.tied ? 1 : 2) + C * (2.0 * c.n_layers + 1);
    qplan_free(&p);
    *quantized = q;
    *other = total - q;
    return 0;
}

static void sort_doubles(double *t, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double sw = t[j];
            t[j] = t[j - 1];
            t[j - 1] = sw;
        }
}

/* generate -n N greedy on the bf16 checkpoint and its HiF8 export at one
 * precision, BENCH_W8A8_REPS rounds of one run each, the order alternating
 * from round to round (bf16 first in even rounds): peak RSS, median tokens/s
 * of each and their ratio, and the median of the rounds' own ratios.  This
 * host's memory bandwidth moves by up to 2x between minutes (38-70 GB/s): a
 * round's two runs are seconds apart, so its ratio sees one speed, where the
 * medians of separate runs can pair a fast minute with a slow one. */
static int gen_compare(const char *bin, const char *const dirs[2], char *n_arg, char *stop,
                       int n_new, const char *prec)
{
    const char *label[2] = {"bf16", "hif8"};
    double tps[2][BENCH_W8A8_REPS], dec[2][BENCH_W8A8_REPS];
    double rr[BENCH_W8A8_REPS], rd[BENCH_W8A8_REPS];
    long peak[2] = {0, 0}, rss = 0;
    char err[8192];
    printf("generate --precision %s:\n", prec);
    loadavg("before");
    for (int r = 0; r < BENCH_W8A8_REPS; r++)
        for (int k = 0; k < 2; k++) {
            int m = (r & 1) ? 1 - k : k;
            char *ge[] = {(char *)bin, "generate", "--model", (char *)dirs[m], "--prompt",
                          "Once upon a time", "-n", n_arg, "--temperature", "0", "--stop-ids",
                          stop, "--precision", (char *)prec, NULL};
            if (run_child(ge, err, sizeof err, &rss)) {
                fprintf(stderr, "bench_w8a8: generate on %s failed: %s", dirs[m], err);
                return 1;
            }
            const char *p = strstr(err, "generate: ");
            double sec = 0, rate = 0;
            int n_prompt = 0, n_gen = 0;
            if (!p || sscanf(p, "generate: %d prompt + %d new tokens in %lf s", &n_prompt, &n_gen,
                             &sec) != 3 || sec <= 0) {
                fprintf(stderr, "bench_w8a8: no rate in generate's output: %s", err);
                return 1;
            }
            rate = (n_prompt + n_gen) / sec;   /* generate's tokens/s, unrounded */
            tps[m][r] = rate;
            /* the tokens after the first, one forward each (generate's second figure) */
            const char *q = strstr(p, "; prompt ");
            double prompt_s = 0;
            int n_after = 0;
            dec[m][r] = 0;
            if (q && sscanf(q, "; prompt %lf s, then %d tokens at %lf", &prompt_s, &n_after,
                            &dec[m][r]) != 3)
                dec[m][r] = 0;
            peak[m] = rss > peak[m] ? rss : peak[m];
            printf("  round %d %s: %.2f tokens/s (after the prompt: %.2f tokens/s), peak RSS "
                   "%.2f GiB\n", r + 1, label[m], rate, dec[m][r], rss / 1048576.0);
        }
    loadavg("after");
    for (int r = 0; r < BENCH_W8A8_REPS; r++) {
        rr[r] = tps[1][r] / tps[0][r];
        rd[r] = dec[0][r] > 0 ? dec[1][r] / dec[0][r] : 0;
    }
    printf("  the rounds' own ratios (hif8 / bf16):");
    for (int r = 0; r < BENCH_W8A8_REPS; r++)
        printf(" %.2f", rr[r]);
    printf("\n");
    double med[2], med_dec[2];
    for (int m = 0; m < 2; m++) {
        sort_doubles(tps[m], BENCH_W8A8_REPS);
        sort_doubles(dec[m], BENCH_W8A8_REPS);
        med[m] = tps[m][BENCH_W8A8_REPS / 2];
        med_dec[m] = dec[m][BENCH_W8A8_REPS / 2];
    }
    sort_doubles(rr, BENCH_W8A8_REPS);
    sort_doubles(rd, BENCH_W8A8_REPS);
    printf("peak RSS (load + generate -n %d, %s): bf16 %.2f GiB, hif8 %.2f GiB: ratio %.2f\n",
           n_new, prec, peak[0] / 1048576.0, peak[1] / 1048576.0,
           (double)peak[1] / (double)peak[0]);
    printf("generate --precision %s: median of the %d rounds' ratios %.3fx (target >= 1.3x: "
           "%s); medians bf16 %.2f tokens/s, hif8 %.2f tokens/s: %.2fx\n", prec,
           BENCH_W8A8_REPS, rr[BENCH_W8A8_REPS / 2],
           rr[BENCH_W8A8_REPS / 2] >= 1.3 ? "PASS" : "MISS", med[0], med[1], med[1] / med[0]);
    if (med_dec[0] > 0 && med_dec[1] > 0)
        printf("  the decode phase alone (tokens after the first, one forward each): median of the "
               "rounds' ratios %.2fx; medians bf16 %.2f tokens/s, hif8 %.2f tokens/s: %.2fx\n",
               rd[BENCH_W8A8_REPS / 2], med_dec[0], med_dec[1], med_dec[1] / med_dec[0]);
    return 0;
}

static int bench_model(const char *bin, const char *src, int n_new)
{
    char out[1024], name[256];
    const char *base = strrchr(src, '/');
    snprintf(name, sizeof name, "%s", base && base[1] ? base + 1 : src);
    snprintf(out, sizeof out, "build/bench_w8a8/%s-hif8", name);
    mkdir("build", 0755);
    mkdir("build/bench_w8a8", 0755);
    char err[8192];
    long rss;
    if (!fileio_is_dir(out)) {
        char *ex[] = {(char *)bin, "export", "--format", "hif8", "--model", (char *)src, "--out",
                      out, NULL};
        printf("exporting %s -> %s (default selection)\n", src, out);
        if (run_child(ex, err, sizeof err, &rss)) {
            fprintf(stderr, "bench_w8a8: export failed: %s", err);
            return 1;
        }
        printf("  export peak RSS %.2f GiB\n", rss / 1048576.0);
    }
    double nq, no;
    if (count_params(src, &nq, &no))
        return 1;
    char n_arg[32], stop[32];
    llama_config c;
    qs_diag d = {0};
    if (hfconfig_load(&c, src, &d))
        return 1;
    snprintf(n_arg, sizeof n_arg, "%d", n_new);
    snprintf(stop, sizeof stop, "%d", c.vocab_size - 1);   /* never stop early */
    const char *dirs[2] = {src, out};
    const double gib = 1073741824.0;
    printf("model %s: %.0f M parameters quantized (default selection), %.0f M other\n", src,
           nq / 1e6, no / 1e6);
    printf("weights at 1 B / quantized + 2 B / other: %.2f GiB (bf16: %.2f GiB, ratio %.2f)\n",
           (nq + 2 * no) / gib, 2 * (nq + no) / gib, (nq + 2 * no) / (2 * (nq + no)));
    /* --precision bf16, then bf16-amx on AMX CPUs (code packs on the AMX tiles) */
    const char *precs[2] = {"bf16", "bf16-amx"};
    for (int pi = 0; pi < (cpu_amx_bf16() ? 2 : 1); pi++)
        if (gen_compare(bin, dirs, n_arg, stop, n_new, precs[pi]))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);   /* progress lines while the children run */
    int rc = bench_products();
    const char *model = argc > 1 ? argv[1] : getenv("QS_BENCH_W8A8_MODEL");
    const char *bin = getenv("QS_BIN") ? getenv("QS_BIN") : "bin/qatscope";
    if (!model || !model[0]) {
        printf("(no model: set QS_BENCH_W8A8_MODEL or pass MODEL_DIR for the memory and "
               "generate comparison)\n");
        return rc;
    }
    return rc | bench_model(bin, model, argc > 2 ? atoi(argv[2]) : 64);
}
