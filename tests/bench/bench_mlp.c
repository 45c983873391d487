/* bench_mlp.c: a 1B-shaped MLP block at --precision bf16-amx (dim 1536,
 * hidden 6144; random weights, so no checkpoint is needed), the two ways
 * model_forward can run it in inference, alternating round by round:
 *   stored  ln2 = rmsnorm(x + a) in fp32; gate, up = ln2 W^T stored with
 *           h = silu(gate) * up as their epilogue (h in fp32); down(h), each
 *           product converting its input to bf16 rows itself
 *   rows    rmsnorm writes each row of ln2 into the gate/up GEMM's bf16 rows;
 *           gate/up hand their 32 x 32 blocks to SwiGLU in a per-thread scratch,
 *           which writes h into the down projection's bf16 rows
 *           (matmul_forward_packed_blocks_ws, matmul_xrows_*)
 * at 64, 512 and 2,048 rows.  Prints the median time of each and the median of
 * the same-round ratios (the machine drifts between rounds), and checks that
 * both give the same bits.  Skips on CPUs without AMX.
 * usage: bench_mlp [ROUNDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qs/cpu.h"
#include "qs/layers.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "bench_stats.h"

enum { MLP_C = 1536, MLP_F = 6144 };

static void fill(float *x, size_t n, uint32_t seed, float scale)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = ((float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f) * scale;
    }
}

typedef struct mlp {
    int N;
    float *x, *a, *sum, *ln, *gate, *up, *h, *out, *norm_w;
    matmul_wpack *pk[3];   /* gate, up, down */
    matmul_ws *ws;
} mlp;

/* the stored path's epilogue: h = silu(gate) * up on one block */
static void mlp_swiglu_stored(void *ctx, int row0, int rows, int col0, int cols)
{
    const mlp *m = ctx;
    size_t off = (size_t)row0 * MLP_F + col0;
    swiglu_forward_block(m->h + off, m->gate + off, m->up + off, rows, cols, MLP_F);
}

static void mlp_stored(mlp *m)
{
    rmsnorm_residual_forward(m->sum, m->ln, NULL, m->x, m->a, m->norm_w, m->N, MLP_C, 1e-6f);
    float *gu[2] = {m->gate, m->up};
    const matmul_epilogue ep = {mlp_swiglu_stored, m};
    matmul_forward_packed_multi_ws(gu, m->ln, m->pk, NULL, 2, m->N, m->ws, &ep);
    matmul_forward_packed_ws(m->out, m->h, m->pk[2], NULL, m->N, m->ws);
}

static void mlp_norm_row(void *ctx, int n, const float *row)
{
    matmul_xrows_store(ctx, MATMUL_XROWS_NEXT, n, 1, 0, MLP_C, row, MLP_C);
}

/* as model_forward's SwiGLU block fn: h into the down projection's rows */
static void mlp_swiglu_rows(void *ctx, int row0, int rows, int col0, int cols,
                            const float *const *blk, int ld)
{
    float h[32 * 32];
    if ((size_t)rows * ld > sizeof h / sizeof h[0])
        abort();   /* the AMX GEMM's blocks are 32 x 32 */
    swiglu_forward_block(h, blk[0], blk[1], rows, cols, (size_t)ld);
    matmul_xrows_store(ctx, MATMUL_XROWS_LATER, row0, rows, col0, cols, h, ld);
}

static int mlp_rows(mlp *m)
{
    if (!matmul_xrows_begin(m->ws, MATMUL_XROWS_NEXT, m->pk[0], m->N) ||
        !matmul_xrows_begin(m->ws, MATMUL_XROWS_LATER, m->pk[2], m->N))
        return -1;
    rmsnorm_residual_forward_rows(m->sum, m->ln, NULL, m->x, m->a, m->norm_w, m->N, MLP_C, 1e-6f,
                                  mlp_norm_row, m->ws);
    if (matmul_forward_packed_blocks_ws(NULL, m->pk, NULL, 2, m->N, m->ws, mlp_swiglu_rows,
                                        m->ws))
        return -1;
    matmul_xrows_forward(&m->out, &m->pk[2], NULL, 1, m->N, m->ws, MATMUL_XROWS_LATER);
    return 0;
}

static int mlp_init(mlp *m, int N, const float *w)
{
    memset(m, 0, sizeof *m);
    m->N = N;
    const size_t nc = (size_t)N * MLP_C, nf = (size_t)N * MLP_F;
    m->x = qs_malloc(nc * 4), m->a = qs_malloc(nc * 4), m->sum = qs_malloc(nc * 4);
    m->ln = qs_malloc(nc * 4), m->out = qs_malloc(nc * 4), m->norm_w = qs_malloc(MLP_C * 4);
    m->gate = qs_malloc(nf * 4), m->up = qs_malloc(nf * 4), m->h = qs_malloc(nf * 4);
    m->ws = matmul_ws_create();
    if (!m->x || !m->a || !m->sum || !m->ln || !m->out || !m->norm_w || !m->gate || !m->up ||
        !m->h || !m->ws)
        return -1;
    fill(m->x, nc, 11u, 1.0f);
    fill(m->a, nc, 12u, 0.5f);
    fill(m->norm_w, MLP_C, 13u, 1.0f);
    const size_t wg = (size_t)MLP_F * MLP_C;
    m->pk[0] = matmul_wpack_create(w, MLP_C, MLP_F, MATMUL_BF16_AMX);
    m->pk[1] = matmul_wpack_create(w + wg, MLP_C, MLP_F, MATMUL_BF16_AMX);
    m->pk[2] = matmul_wpack_create(w + 2 * wg, MLP_F, MLP_C, MATMUL_BF16_AMX);
    return m->pk[0] && m->pk[1] && m->pk[2] ? 0 : -1;
}

static void mlp_free(mlp *m)
{
    for (int i = 0; i < 3; i++)
        matmul_wpack_destroy(m->pk[i]);
    matmul_ws_destroy(m->ws);
    qs_free(m->x), qs_free(m->a), qs_free(m->sum), qs_free(m->ln), qs_free(m->out);
    qs_free(m->norm_w), qs_free(m->gate), qs_free(m->up), qs_free(m->h);
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 7;
    if (!cpu_amx_bf16()) {
        printf("bench_mlp: skipped (this CPU has no AMX-BF16 tiles; the rows and blocks are "
               "bf16-amx's)\n");
        return 0;
    }
    const size_t wg = (size_t)MLP_F * MLP_C;
    float *w = qs_malloc(3 * wg * sizeof *w);
    if (!w)
        return 1;
    fill(w, 3 * wg, 7u, 0.03f);
    printf("bench_mlp: a 1B MLP block (rmsnorm, gate/up %d -> %d, SwiGLU, down) at bf16-amx, "
           "%d alternating rounds\n", MLP_C, MLP_F, rounds);
    printf("%6s %12s %12s %10s %14s  %s\n", "rows", "stored ms", "rows ms", "rows/stored",
           "rows GFLOP/s", "bits");
    static const int sizes[] = {64, 512, 2048};
    int fail = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        mlp m;
        const int N = sizes[s];
        if (mlp_init(&m, N, w)) {
            printf("%6d out of memory\n", N);
            mlp_free(&m);
            fail = 1;
            continue;
        }
        float *ref = qs_malloc((size_t)N * MLP_C * sizeof *ref);
        double *ts = malloc((size_t)rounds * sizeof *ts), *tr = malloc((size_t)rounds * sizeof *tr);
        double *ratio = malloc((size_t)rounds * sizeof *ratio);
        if (!ref || !ts || !tr || !ratio) {
            fail = 1;
            goto next;
        }
        mlp_stored(&m);   /* warm: packs made, workspace grown */
        memcpy(ref, m.out, (size_t)N * MLP_C * sizeof *ref);
        if (mlp_rows(&m)) {
            printf("%6d the rows path refused\n", N);
            fail = 1;
            goto next;
        }
        const int same = memcmp(ref, m.out, (size_t)N * MLP_C * sizeof *ref) == 0;
        fail |= !same;
        for (int r = 0; r < rounds; r++) {
            const int rows_first = r % 2;   /* alternate which goes first */
            for (int k = 0; k < 2; k++) {
                double t0 = bench_clock_s(CLOCK_MONOTONIC);
                if (k == rows_first)
                    mlp_rows(&m);
                else
                    mlp_stored(&m);
                (k == rows_first ? tr : ts)[r] = bench_clock_s(CLOCK_MONOTONIC) - t0;
            }
            ratio[r] = ts[r] / tr[r];
        }
        const double flops = 2.0 * N * MLP_C * MLP_F * 3.0;
        const double mr = bench_median(tr, rounds);
        const double ms = bench_median(ts, rounds);
        printf("%6d %12.2f %12.2f %9.3fx %14.0f  %s\n", N, 1e3 * ms, 1e3 * mr,
               bench_median(ratio, rounds), flops / mr * 1e-9, same ? "equal" : "DIFFER");
    next:
        qs_free(ref);
        free(ts), free(tr), free(ratio);
        mlp_free(&m);
    }
    qs_free(w);
    printf("rows/stored: the median of the same-round ratios (> 1: the rows path is faster)\n");
    return fail;
}
