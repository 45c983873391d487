/* test_matmul_fused.c: outputs handed over as blocks and inputs written in the
 * GEMM's own rows (matmul.h: matmul_forward_packed_blocks_ws, matmul_xrows_*;
 * matmul_fused.c), and the inference MLP built on them (model_forward.c).
 *  - blocks: every element handed over exactly once, with the bits
 *    matmul_forward_packed_ws stores, at M, N and K tails, with bias, in row
 *    groups (the blocks leave in one K pass where the stored call takes several);
 *    refused (-1, nothing called) for packs of other kernels, code packs,
 *    mixed shapes;
 *  - xrows: an input stored in blocks, in any order, from several threads, with
 *    other products using the workspace in between, gives the bits of the fp32
 *    input's product; begin says 0 where the path does not apply;
 *  - the model: inference logits at bf16-amx (the MLP fused) equal those of a
 *    training arena (the stored MLP) on fixture architectures (biases, GQA,
 *    tied, BF16 storage; F 40 and 48: a panel's tail), at M tails and at the
 *    fewest rows that take this path (decode keeps the stored one); the 1B
 *    shape's row groups are the matmul test's.
 * Skips without AMX, except the refusals, which hold everywhere. */
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "qs/cpu.h"
#include "qs/matmul.h"
#include "qs/matmul_test.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "test.h"

#define FUSED_NEEDS_AMX()                                                                \
    do {                                                                                 \
        if (!cpu_amx_bf16())                                                             \
            SKIP("this CPU (or its kernel) has no AMX-BF16 tiles");                      \
    } while (0)

static unsigned fused_seed = 777u;

static void fused_fill(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fused_seed = fused_seed * 1664525u + 1013904223u;
        v[i] = (float)((fused_seed >> 8) / 8388608.0 - 1.0);
    }
}

/* The blocks of n outputs copied into got[i] (N x O), each element counted. */
typedef struct fused_sink {
    int n, N, O, bad_shape;
    float *got[3];
    int *seen;
} fused_sink;

static void fused_sink_block(void *ctx, int row0, int rows, int col0, int cols,
                             const float *const *blk, int ld)
{
    fused_sink *s = ctx;
    if (rows < 1 || cols < 1 || cols > ld || row0 + rows > s->N || col0 + cols > s->O) {
        s->bad_shape = 1;   /* a race on this flag only ever writes 1 */
        return;
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            size_t e = (size_t)(row0 + r) * s->O + col0 + c;
            for (int i = 0; i < s->n; i++)
                s->got[i][e] = blk[i][(size_t)r * ld + c];
            s->seen[e]++;   /* blocks are disjoint: no two threads share e */
        }
}

TEST(matmul_fused, blocks_hand_over_the_bits_the_outputs_would_hold)
{
    FUSED_NEEDS_AMX();
    static const int cases[][5] = {
        /* N, IN, O, forced A bytes per pass (0: the default), packs */
        {1, 33, 17, 0, 2},   {45, 200, 96, 0, 3},     {70, 1031, 50, 0, 2},
        {300, 600, 100, 320 * 64 * 8, 2},   /* 3 passes stored: groups of 128 rows here */
        {1100, 64, 40, 0, 2},                /* rows-outer tasks (a small weight) */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int N = cases[c][0], IN = cases[c][1], O = cases[c][2], n = cases[c][4];
        const size_t no = (size_t)N * O;
        float *x = qs_malloc((size_t)N * IN * sizeof *x), *w = qs_malloc((size_t)n * O * IN * 4);
        float *b = qs_malloc((size_t)O * sizeof *b), *ref = qs_malloc(n * no * sizeof *ref);
        float *got = qs_malloc(n * no * sizeof *got);
        int *seen = qs_calloc(no, sizeof *seen);
        matmul_ws *ws = matmul_ws_create();
        ASSERT_TRUE(x && w && b && ref && got && seen && ws);
        fused_fill(x, (size_t)N * IN);
        fused_fill(w, (size_t)n * O * IN);
        fused_fill(b, (size_t)O);
        matmul_wpack *pk[3];
        const float *bias[3];
        fused_sink s = {n, N, O, 0, {NULL, NULL, NULL}, seen};
        for (int i = 0; i < n; i++) {
            pk[i] = matmul_wpack_create(w + (size_t)i * O * IN, IN, O, MATMUL_BF16_AMX);
            ASSERT_TRUE(pk[i] != NULL);
            bias[i] = i == 1 ? b : NULL;
            s.got[i] = got + i * no;
        }
        mm_amx_pass_bytes_force_impl((size_t)cases[c][3]);
        for (int i = 0; i < n; i++)
            matmul_forward_packed_ws(ref + i * no, x, pk[i], bias[i], N, ws);
        int rc = matmul_forward_packed_blocks_ws(x, pk, bias, n, N, ws, fused_sink_block, &s);
        mm_amx_pass_bytes_force_impl(0);
        ASSERT_EQ_INT(rc, 0);
        ASSERT_EQ_INT(s.bad_shape, 0);
        for (size_t e = 0; e < no; e++)
            if (seen[e] != 1)
                TEST_FAIL_AT("case %zu: element %zu handed over %d times", c, e, seen[e]);
        if (memcmp(ref, got, n * no * sizeof *got))
            TEST_FAIL_AT("case %zu (N %d, IN %d, O %d): blocks differ from the stored outputs",
                         c, N, IN, O);
        for (int i = 0; i < n; i++)
            matmul_wpack_destroy(pk[i]);
        matmul_ws_destroy(ws);
        qs_free(x), qs_free(w), qs_free(b), qs_free(ref), qs_free(got), qs_free(seen);
    }
}

static void fused_never(void *ctx, int row0, int rows, int col0, int cols,
                        const float *const *blk, int ld)
{
    (void)row0, (void)rows, (void)col0, (void)cols, (void)blk, (void)ld;
    *(int *)ctx = 1;
}

/* Where blocks cannot be had: -1 and nothing handed over; xrows_begin says 0. */
TEST(matmul_fused, refused_for_other_kernels_code_packs_and_mixed_shapes)
{
    enum { N = 5, IN = 40, O = 24 };
    float x[N * IN], w[2 * O * IN];
    uint8_t codes[O * IN];
    fused_fill(x, N * IN);
    fused_fill(w, 2 * O * IN);
    for (int i = 0; i < O * IN; i++)
        codes[i] = (uint8_t)(i * 37 % 120);
    matmul_ws *ws = matmul_ws_create();
    matmul_wpack *bf16 = matmul_wpack_create(w, IN, O, MATMUL_BF16);
    matmul_wpack *code = matmul_wpack_create_hif8(codes, IN, O, MATMUL_BF16_AMX);
    matmul_wpack *amx = matmul_wpack_create(w, IN, O, MATMUL_BF16_AMX);
    matmul_wpack *amx_narrow = matmul_wpack_create(w + O * IN, IN, O - 8, MATMUL_BF16_AMX);
    ASSERT_TRUE(ws && bf16 && code && amx && amx_narrow);
    int called = 0;
    matmul_wpack *one_bf16[1] = {bf16}, *one_code[1] = {code}, *mixed[2] = {amx, amx_narrow};
    ASSERT_EQ_INT(matmul_forward_packed_blocks_ws(x, one_bf16, NULL, 1, N, ws, fused_never,
                                                  &called), -1);
    ASSERT_EQ_INT(matmul_forward_packed_blocks_ws(x, one_code, NULL, 1, N, ws, fused_never,
                                                  &called), -1);
    ASSERT_EQ_INT(matmul_forward_packed_blocks_ws(x, mixed, NULL, 2, N, ws, fused_never, &called),
                  -1);
    ASSERT_EQ_INT(called, 0);
    for (int slot = MATMUL_XROWS_NEXT; slot <= MATMUL_XROWS_LATER; slot++) {
        ASSERT_EQ_INT(matmul_xrows_begin(ws, slot, bf16, N), 0);
        ASSERT_EQ_INT(matmul_xrows_begin(ws, slot, code, N), 0);
        ASSERT_EQ_INT(matmul_xrows_begin(NULL, slot, amx, N), 0);
        ASSERT_EQ_INT(matmul_xrows_begin(ws, slot, amx, N), cpu_amx_bf16() ? 1 : 0);
    }
    matmul_wpack_destroy(bf16);
    matmul_wpack_destroy(code);
    matmul_wpack_destroy(amx);
    matmul_wpack_destroy(amx_narrow);
    matmul_ws_destroy(ws);
}

/* x[N, IN] into a slot in 7 x 13 blocks, taken in a scrambled order by the
 * threads (each block once) */
static void fused_store_scrambled(matmul_ws *ws, int slot, const float *x, int N, int IN)
{
    const int rb = (N + 6) / 7, cb = (IN + 12) / 13, nblk = rb * cb;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
    for (int t = 0; t < nblk; t++) {
        int k = (int)((t * 7919L) % nblk);   /* a permutation: 7919 is a prime above nblk */
        int r0 = k / cb * 7, c0 = k % cb * 13;
        int rows = N - r0 < 7 ? N - r0 : 7, cols = IN - c0 < 13 ? IN - c0 : 13;
        matmul_xrows_store(ws, slot, r0, rows, c0, cols, x + (size_t)r0 * IN + c0, IN);
    }
}

/* Both slots, as the inference MLP uses them: x into NEXT and y into LATER,
 * then 3 products of x from NEXT (two with bias; one of another width), then
 * y's product from LATER with a forward call of another input on the same
 * workspace in between; and a pair's blocks from NEXT (x == NULL).  Each
 * equals the product of the fp32 input, bit for bit, and the workspace stays
 * within matmul_ws_bytes_estimate. */
TEST(matmul_fused, xrows_in_either_slot_give_the_bits_of_the_fp32_input)
{
    FUSED_NEEDS_AMX();
    static const int cases[][3] = {{1, 33, 17}, {33, 1031, 40}, {300, 64, 100}, {77, 6, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int N = cases[c][0], IN = cases[c][1], O = cases[c][2], O2 = O + 5;
        const size_t nx = (size_t)N * IN, no = (size_t)N * O2;
        float *x = qs_malloc(nx * 4), *y = qs_malloc(nx * 4);
        float *w = qs_malloc(3 * (size_t)O2 * IN * 4);
        float *b = qs_malloc((size_t)O2 * 4), *ref = qs_malloc(4 * no * 4);
        float *got = qs_malloc(4 * no * 4), *other = qs_malloc(no * 4);
        int *seen = qs_calloc((size_t)N * O, sizeof *seen);
        matmul_ws *ws = matmul_ws_create();
        ASSERT_TRUE(x && y && w && b && ref && got && other && seen && ws);
        fused_fill(x, nx);
        fused_fill(y, nx);
        fused_fill(w, 3 * (size_t)O2 * IN);
        fused_fill(b, (size_t)O2);
        matmul_wpack *pk[3];
        for (int i = 0; i < 3; i++)
            pk[i] = matmul_wpack_create(w + (size_t)i * O2 * IN, IN, i == 2 ? O2 : O,
                                        MATMUL_BF16_AMX);
        ASSERT_TRUE(pk[0] && pk[1] && pk[2]);
        float *out[3] = {got, got + no, got + 2 * no}, *want[3] = {ref, ref + no, ref + 2 * no};
        const float *bias[3] = {b, NULL, b};
        for (int i = 0; i < 3; i++)
            matmul_forward_packed_ws(want[i], x, pk[i], bias[i], N, ws);
        matmul_forward_packed_ws(ref + 3 * no, y, pk[0], NULL, N, ws);
        ASSERT_EQ_INT(matmul_xrows_begin(ws, MATMUL_XROWS_NEXT, pk[0], N), 1);
        ASSERT_EQ_INT(matmul_xrows_begin(ws, MATMUL_XROWS_LATER, pk[0], N), 1);
        fused_store_scrambled(ws, MATMUL_XROWS_NEXT, x, N, IN);
        fused_store_scrambled(ws, MATMUL_XROWS_LATER, y, N, IN);
        matmul_xrows_forward(out, pk, bias, 3, N, ws, MATMUL_XROWS_NEXT);
        matmul_forward_packed_ws(other, y, pk[1], NULL, N, ws);   /* ws's NEXT memory reused */
        matmul_xrows_forward(out, pk, NULL, 1, N, ws, MATMUL_XROWS_LATER);
        for (int i = 1; i < 3; i++)
            if (memcmp(want[i], out[i], (size_t)N * (i == 2 ? O2 : O) * 4))
                TEST_FAIL_AT("case %zu (N %d, IN %d): product %d from NEXT differs", c, N, IN, i);
        if (memcmp(ref + 3 * no, out[0], (size_t)N * O * 4))
            TEST_FAIL_AT("case %zu (N %d, IN %d): the product from LATER differs", c, N, IN);
        /* blocks of pk[0], pk[1] from NEXT */
        fused_sink s = {2, N, O, 0, {got, got + no, NULL}, seen};
        ASSERT_EQ_INT(matmul_xrows_begin(ws, MATMUL_XROWS_NEXT, pk[0], N), 1);
        fused_store_scrambled(ws, MATMUL_XROWS_NEXT, x, N, IN);
        ASSERT_EQ_INT(matmul_forward_packed_blocks_ws(NULL, pk, bias, 2, N, ws,
                                                      fused_sink_block, &s), 0);
        ASSERT_EQ_INT(s.bad_shape, 0);
        if (memcmp(want[0], got, (size_t)N * O * 4) || memcmp(want[1], got + no, (size_t)N * O * 4))
            TEST_FAIL_AT("case %zu (N %d, IN %d): blocks from NEXT differ", c, N, IN);
        /* both slots held: within what the workspace estimate promises */
        ASSERT_TRUE(matmul_ws_bytes(ws) <= matmul_ws_bytes_estimate(N, IN, O2, MATMUL_BF16_AMX, 0));
        for (int i = 0; i < 3; i++)
            matmul_wpack_destroy(pk[i]);
        matmul_ws_destroy(ws);
        qs_free(x), qs_free(y), qs_free(w), qs_free(b), qs_free(ref), qs_free(got);
        qs_free(other), qs_free(seen);
    }
}

/* logits of tokens [B, T] on a fresh arena of the given mode */
static int fused_logits(llama_model *m, int B, int T, int mode, float *out, qs_diag *d)
{
    llama_acts a;
    const int V = m->cfg.vocab_size;
    int32_t *tok = qs_malloc((size_t)B * T * sizeof *tok);
    if (!tok)
        return QS_ENOMEM;
    for (int i = 0; i < B * T; i++)
        tok[i] = (int32_t)((i * 13 + 5) % V);
    int rc = model_acts_init(&a, &m->cfg, B, T, T, mode, d);
    if (rc) {
        qs_free(tok);
        return rc;
    }
    rc = model_forward(m, &a, tok, NULL, B, T, 0, d);
    if (!rc)
        memcpy(out, a.logits, (size_t)B * T * V * sizeof *out);
    model_acts_free(&a);
    qs_free(tok);
    return rc;
}

TEST(model_fused, inference_mlp_gives_the_logits_of_the_stored_mlp)
{
    FUSED_NEEDS_AMX();
    static const char *dirs[] = {"data/fixtures/llama3_bias_tied_bf16",
                                 "data/fixtures/llama_gqa_f32",
                                 "data/fixtures/pangu_bias_sharded_f32"};
    /* B x T: M tails (111 and 34 rows), 32 rows (the fewest that take the rows), 360 rows */
    static const int shapes[][2] = {{3, 37}, {2, 17}, {1, 32}, {6, 60}};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        llama_model m;
        qs_diag d = {0};
        ASSERT_OK(model_load_dir(&m, dirs[i], &d), &d);
        m.precision = MATMUL_BF16_AMX;
        ASSERT_OK(model_packs_create(&m, &d), &d);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int B = shapes[s][0], T = shapes[s][1];
            const size_t n = (size_t)B * T * m.cfg.vocab_size;
            float *fused = qs_malloc(n * 4), *stored = qs_malloc(n * 4);
            ASSERT_TRUE(fused && stored);
            int rc = fused_logits(&m, B, T, MODEL_ACTS_INFER, fused, &d);
            if (!rc)
                rc = fused_logits(&m, B, T, MODEL_ACTS_TRAIN, stored, &d);
            ASSERT_OK(rc, &d);
            if (memcmp(fused, stored, n * 4))
                TEST_FAIL_AT("%s, B %d x T %d: inference logits differ from the stored MLP's",
                             dirs[i], B, T);
            qs_free(fused);
            qs_free(stored);
        }
        model_free(&m);
    }
}
