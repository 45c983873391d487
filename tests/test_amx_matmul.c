/* test_amx_matmul.c: MATMUL_BF16_AMX (the opt-in AMX products, matmul.h).
 * Products against a double-precision sum of the bf16-rounded operands within
 * the K-derived bound, with and without bias, at M, N and K tails; a row's bits
 * do not depend on the batch around it or on the thread count; frozen packs
 * from fp32 and from bf16 bits, plain packs, the multi call and the per-tile
 * conversion (no A scratch) all give the same bits; backward (dx, dw) within
 * its bound, the same bits packed or not, on 1, 3 or 9 threads; the spelling, the
 * refusal on a CPU without AMX (cpu_limit); the fallback without AMX.
 * The AMX tests skip on CPUs without AMX. */
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "qs/cpu.h"
#include "qs/matmul.h"
#include "qs/matmul_test.h"
#include "qs/mem.h"
#include "test.h"

typedef struct amx_case {
    int N, IN, O;
} amx_case;

/* M = 1, K not a multiple of 32 (or of 2), N not a multiple of 16, several
 * k tiles, M past one 32-row block with a tail, the 1B widths; many rows over a
 * small weight (the GEMM's rows-outer tasks: forward and dx of the first, dw
 * of the second); few rows over many panels (tasks of several panels read as
 * one prefetched stream, the last panel 12 columns wide) */
static const amx_case amx_cases[] = {{1, 1, 1},       {1, 33, 17},    {3, 64, 32},   {17, 100, 50},
                                     {33, 1031, 40},  {64, 288, 96},  {5, 2048, 33}, {70, 1536, 48},
                                     {1100, 64, 40},  {64, 48, 1100}, {2, 300, 1100}};

static unsigned amx_seed = 4242u;

static float amx_rand(void)
{
    amx_seed = amx_seed * 1664525u + 1013904223u;
    return (float)((amx_seed >> 8) / 8388608.0 - 1.0);   /* [-1, 1) */
}

static void amx_fill(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = amx_rand();
}

/* the contract's operand rounding: RNE to bf16, subnormals to zero */
static double amx_bf16(float f)
{
    union { float f; uint32_t u; } v = {f};
    uint32_t h = (v.u + 0x7FFFu + ((v.u >> 16) & 1u)) >> 16;
    if ((h & 0x7F80u) == 0)
        h &= 0x8000u;
    v.u = h << 16;
    return v.f;
}

#define AMX_NEEDS_AMX()                                                                  \
    do {                                                                                 \
        if (!cpu_amx_bf16())                                                             \
            SKIP("this CPU (or its kernel) has no AMX-BF16 tiles");                      \
    } while (0)

/* |y - exact(rounded operands)| <= (K + 64) u (|init| + sum |a b|), u = 2^-24:
 * K products and K/32 tile steps add at most K + K/32 + 1 roundings of size u
 * relative to that sum, whatever order the hardware adds them in. */
static void amx_check_ref(const float *out, const float *x, const float *w, const float *b,
                          int N, int IN, int O)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            double init = b ? b[o] : 0.0, s = init, mag = fabs(init);
            for (int k = 0; k < IN; k++) {
                double p = amx_bf16(x[(size_t)n * IN + k]) * amx_bf16(w[(size_t)o * IN + k]);
                s += p;
                mag += fabs(p);
            }
            double tol = (IN + 64) * ldexp(1.0, -24) * mag;
            ASSERT_NEAR(out[(size_t)n * O + o], s, tol);
        }
}

TEST(matmul_amx, forward_within_k_bound_of_double_reference)
{
    AMX_NEEDS_AMX();
    for (size_t ci = 0; ci < sizeof amx_cases / sizeof amx_cases[0]; ci++) {
        amx_case c = amx_cases[ci];
        float *x = qs_malloc((size_t)c.N * c.IN * sizeof *x);
        float *w = qs_malloc((size_t)c.O * c.IN * sizeof *w);
        float *b = qs_malloc((size_t)c.O * sizeof *b);
        float *o1 = qs_malloc((size_t)c.N * c.O * sizeof *o1);
        float *o2 = qs_malloc((size_t)c.N * c.O * sizeof *o2);
        uint16_t *w16 = qs_malloc((size_t)c.O * c.IN * sizeof *w16);
        ASSERT_TRUE(x && w && b && o1 && o2 && w16);
        amx_fill(x, (size_t)c.N * c.IN);
        amx_fill(w, (size_t)c.O * c.IN);
        amx_fill(b, (size_t)c.O);
        for (size_t i = 0; i < (size_t)c.O * c.IN; i++) {   /* w exactly bf16 */
            union { float f; uint32_t u; } v = {(float)amx_bf16(w[i])};
            w16[i] = (uint16_t)(v.u >> 16);
            w[i] = v.f;
        }
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *bias = with_bias ? b : NULL;
            matmul_forward(o1, x, w, bias, c.N, c.IN, c.O, MATMUL_BF16_AMX);
            amx_check_ref(o1, x, w, bias, c.N, c.IN, c.O);
            /* frozen packs from fp32 and from bf16 bits, a plain pack: the same bits */
            matmul_wpack *pk[3] = {matmul_wpack_create_frozen(w, c.IN, c.O, MATMUL_BF16_AMX),
                                   matmul_wpack_create_frozen_bf16(w16, c.IN, c.O,
                                                                   MATMUL_BF16_AMX),
                                   matmul_wpack_create(w, c.IN, c.O, MATMUL_BF16_AMX)};
            for (int p = 0; p < 3; p++) {
                ASSERT_TRUE(pk[p] != NULL);
                matmul_forward_packed(o2, x, pk[p], bias, c.N);
                ASSERT_EQ_INT(memcmp(o1, o2, (size_t)c.N * c.O * sizeof *o1), 0);
                matmul_wpack_destroy(pk[p]);
            }
        }
        qs_free(x);
        qs_free(w);
        qs_free(b);
        qs_free(o1);
        qs_free(o2);
        qs_free(w16);
    }
}

/* init + sum_k bf16(a(k)) bf16(b(k)) within (K + 64) u (|init| + sum|a b|), a and
 * b strided (element k at a[k * as], b[k * bs]) */
static void amx_check_dot(float got, float init, const float *a, ptrdiff_t as, const float *b,
                          ptrdiff_t bs, int K)
{
    double s = init, mag = fabs(init);
    for (int k = 0; k < K; k++) {
        double p = amx_bf16(a[k * as]) * amx_bf16(b[k * bs]);
        s += p;
        mag += fabs(p);
    }
    ASSERT_NEAR(got, s, (K + 64) * ldexp(1.0, -24) * mag);
}

/* backward on the tiles: dx += dout w (K = O), dw += dout^T x (K = N, A read
 * transposed), each within its K bound; the packed call with a workspace, on 1,
 * 3 and 9 threads (task shapes with and without rows outer): the same bits; db
 * is the plain column sum */
TEST(matmul_amx, backward_within_k_bound_and_the_same_bits_every_way)
{
    AMX_NEEDS_AMX();
    for (size_t ci = 0; ci < sizeof amx_cases / sizeof amx_cases[0]; ci++) {
        amx_case c = amx_cases[ci];
        const size_t nx = (size_t)c.N * c.IN, nw = (size_t)c.O * c.IN, no = (size_t)c.N * c.O;
        float *x = qs_malloc(nx * sizeof *x), *w = qs_malloc(nw * sizeof *w);
        float *dout = qs_malloc(no * sizeof *dout), *dx0 = qs_malloc(nx * sizeof *dx0);
        float *dw0 = qs_malloc(nw * sizeof *dw0), *dx = qs_malloc(nx * sizeof *dx);
        float *dw = qs_malloc(nw * sizeof *dw), *dx2 = qs_malloc(nx * sizeof *dx2);
        float *dw2 = qs_malloc(nw * sizeof *dw2), *db = qs_malloc((size_t)c.O * sizeof *db);
        ASSERT_TRUE(x && w && dout && dx0 && dw0 && dx && dw && dx2 && dw2 && db);
        amx_fill(x, nx);
        amx_fill(w, nw);
        amx_fill(dout, no);
        amx_fill(dx0, nx);
        amx_fill(dw0, nw);
        memcpy(dx, dx0, nx * sizeof *dx);
        memcpy(dw, dw0, nw * sizeof *dw);
        memset(db, 0, (size_t)c.O * sizeof *db);
        matmul_backward(dx, dw, db, dout, x, w, c.N, c.IN, c.O, MATMUL_BF16_AMX);
        for (int n = 0; n < c.N; n++)
            for (int i = 0; i < c.IN; i++)
                amx_check_dot(dx[(size_t)n * c.IN + i], dx0[(size_t)n * c.IN + i],
                              dout + (size_t)n * c.O, 1, w + i, c.IN, c.O);
        for (int o = 0; o < c.O; o++) {
            for (int i = 0; i < c.IN; i++)
                amx_check_dot(dw[(size_t)o * c.IN + i], dw0[(size_t)o * c.IN + i], dout + o, c.O,
                              x + i, c.IN, c.N);
            float s = 0.0f;
            for (int n = 0; n < c.N; n++)
                s += dout[(size_t)n * c.O + o];
            ASSERT_TRUE(db[o] == s);
        }
        matmul_wpack *pk = matmul_wpack_create(w, c.IN, c.O, MATMUL_BF16_AMX);
        matmul_ws *ws = matmul_ws_create();
        ASSERT_TRUE(pk && ws);
        int saved = 1;
#ifdef _OPENMP
        saved = omp_get_max_threads();
#endif
        for (int th = 1; th <= 9; th += th == 1 ? 2 : 6) {   /* 1, 3, 9: rows-outer or not */
#ifdef _OPENMP
            omp_set_num_threads(th);
#endif
            memcpy(dx2, dx0, nx * sizeof *dx2);
            memcpy(dw2, dw0, nw * sizeof *dw2);
            matmul_backward_packed_ws(dx2, dw2, NULL, dout, x, pk, c.N, ws);
            ASSERT_EQ_INT(memcmp(dx, dx2, nx * sizeof *dx), 0);
            ASSERT_EQ_INT(memcmp(dw, dw2, nw * sizeof *dw), 0);
        }
#ifdef _OPENMP
        omp_set_num_threads(saved);
#endif
        (void)saved;
        matmul_wpack_destroy(pk);
        matmul_ws_destroy(ws);
        qs_free(x);
        qs_free(w);
        qs_free(dout);
        qs_free(dx0);
        qs_free(dw0);
        qs_free(dx);
        qs_free(dw);
        qs_free(dx2);
        qs_free(dw2);
        qs_free(db);
    }
}

TEST(matmul_amx, differs_from_bf16_but_stays_close)
{
    AMX_NEEDS_AMX();
    enum { N = 16, IN = 1024, O = 64 };
    float *x = qs_malloc(N * IN * sizeof *x), *w = qs_malloc(O * IN * sizeof *w);
    float *oa = qs_malloc(N * O * sizeof *oa), *ob = qs_malloc(N * O * sizeof *ob);
    ASSERT_TRUE(x && w && oa && ob);
    amx_fill(x, N * IN);
    amx_fill(w, O * IN);
    matmul_forward(oa, x, w, NULL, N, IN, O, MATMUL_BF16_AMX);
    matmul_forward(ob, x, w, NULL, N, IN, O, MATMUL_BF16);
    int same = 0;
    for (int i = 0; i < N * O; i++) {
        same += oa[i] == ob[i];
        ASSERT_NEAR(oa[i], ob[i], 1e-4 * sqrt((double)IN));
    }
    ASSERT_TRUE(same < N * O);   /* another summation order: not bf16's bits */
    qs_free(x);
    qs_free(w);
    qs_free(oa);
    qs_free(ob);
}

TEST(matmul_amx, a_row_does_not_depend_on_its_batch_or_threads)
{
    AMX_NEEDS_AMX();
    enum { B = 64, IN = 300, O = 70, ROW = 37 };
    float *x = qs_malloc(B * IN * sizeof *x), *w = qs_malloc(O * IN * sizeof *w);
    float *b = qs_malloc(O * sizeof *b), *ob = qs_malloc(B * O * sizeof *ob);
    float *one = qs_malloc(O * sizeof *one), *x2 = qs_malloc(B * IN * sizeof *x2);
    ASSERT_TRUE(x && w && b && ob && one && x2);
    amx_fill(x, B * IN);
    amx_fill(w, O * IN);
    amx_fill(b, O);
    matmul_wpack *pk = matmul_wpack_create_frozen(w, IN, O, MATMUL_BF16_AMX);
    ASSERT_TRUE(pk != NULL);
    matmul_forward_packed(ob, x, pk, b, B);
    /* alone (M = 1) */
    matmul_forward_packed(one, x + ROW * IN, pk, b, 1);
    ASSERT_EQ_INT(memcmp(one, ob + ROW * O, O * sizeof *one), 0);
    /* at position 0 of a batch of 5, and at position 63 of other rows */
    amx_fill(x2, B * IN);
    memcpy(x2, x + ROW * IN, IN * sizeof *x2);
    float *o5 = qs_malloc(B * O * sizeof *o5);
    ASSERT_TRUE(o5 != NULL);
    matmul_forward_packed(o5, x2, pk, b, 5);
    ASSERT_EQ_INT(memcmp(o5, ob + ROW * O, O * sizeof *o5), 0);
    memcpy(x2 + (B - 1) * IN, x + ROW * IN, IN * sizeof *x2);
    matmul_forward_packed(o5, x2, pk, b, B);
    ASSERT_EQ_INT(memcmp(o5 + (B - 1) * O, ob + ROW * O, O * sizeof *o5), 0);
#ifdef _OPENMP
    /* one thread, three threads: the same bits */
    int saved = omp_get_max_threads();
    for (int th = 1; th <= 3; th += 2) {
        omp_set_num_threads(th);
        matmul_forward_packed(o5, x, pk, b, B);
        ASSERT_EQ_INT(memcmp(o5, ob, B * O * sizeof *o5), 0);
    }
    omp_set_num_threads(saved);
#endif
    matmul_wpack_destroy(pk);
    qs_free(x);
    qs_free(w);
    qs_free(b);
    qs_free(ob);
    qs_free(one);
    qs_free(x2);
    qs_free(o5);
}

static int amx_ep_calls;

static void amx_ep(void *ctx, int row0, int rows, int col0, int cols)
{
    (void)ctx;
    (void)row0;
    (void)col0;
#ifdef _OPENMP
#pragma omp atomic
#endif
    amx_ep_calls += rows * cols;
}

/* n (<= 3) frozen bf16-amx packs of random O x IN weights and a random N x IN
 * x (filled x, w, b in that order), bias b on the even packs; ref holds each
 * pack's single product, outs[i] points at pack i's N x O block of got. */
typedef struct amx_multi {
    int n, N, IN, O;
    float *x, *w, *ref, *got, *b;
    matmul_wpack *pk[3];
    float *outs[3];
    const float *bias[3];
} amx_multi;

static int amx_multi_init(amx_multi *m, int n, int N, int IN, int O)
{
    *m = (amx_multi){.n = n, .N = N, .IN = IN, .O = O};
    size_t no = (size_t)N * O;
    m->x = qs_malloc((size_t)N * IN * sizeof *m->x);
    m->w = qs_malloc((size_t)n * O * IN * sizeof *m->w);
    m->ref = qs_malloc(n * no * sizeof *m->ref);
    m->got = qs_malloc(n * no * sizeof *m->got);
    m->b = qs_malloc((size_t)O * sizeof *m->b);
    if (!m->x || !m->w || !m->ref || !m->got || !m->b)
        return -1;
    amx_fill(m->x, (size_t)N * IN);
    amx_fill(m->w, (size_t)n * O * IN);
    amx_fill(m->b, (size_t)O);
    for (int i = 0; i < n; i++) {
        m->bias[i] = i % 2 ? NULL : m->b;
        m->outs[i] = m->got + (size_t)i * no;
        m->pk[i] = matmul_wpack_create_frozen(m->w + (size_t)i * O * IN, IN, O, MATMUL_BF16_AMX);
        if (!m->pk[i])
            return -1;
        matmul_forward_packed(m->ref + (size_t)i * no, m->x, m->pk[i], m->bias[i], N);
    }
    return 0;
}

static void amx_multi_free(amx_multi *m)
{
    for (int i = 0; i < m->n; i++)
        matmul_wpack_destroy(m->pk[i]);
    qs_free(m->x);
    qs_free(m->w);
    qs_free(m->ref);
    qs_free(m->got);
    qs_free(m->b);
}

TEST(matmul_amx, multi_and_tile_conversion_give_the_same_bits)
{
    AMX_NEEDS_AMX();
    enum { N = 45, IN = 200, O = 96 };
    amx_multi m;
    ASSERT_EQ_INT(amx_multi_init(&m, 3, N, IN, O), 0);
    matmul_ws *ws = matmul_ws_create();
    ASSERT_TRUE(ws != NULL);
    matmul_epilogue ep = {amx_ep, NULL};
    amx_ep_calls = 0;
    matmul_forward_packed_multi_ws(m.outs, m.x, m.pk, m.bias, 3, N, ws, &ep);
    ASSERT_EQ_INT(memcmp(m.ref, m.got, 3 * N * O * sizeof *m.got), 0);
    ASSERT_EQ_INT(amx_ep_calls, N * O);   /* every element once */
    ASSERT_TRUE(matmul_ws_bytes(ws) <= matmul_ws_bytes_estimate(N, IN, O, MATMUL_BF16_AMX, 0));
    /* no memory for A's bf16 rows: each tile converted as it is loaded */
    memset(m.got, 0, N * O * sizeof *m.got);
    qs_mem_fail_after(1);
    matmul_forward_packed(m.got, m.x, m.pk[0], m.b, N);
    qs_mem_fail_after(0);
    ASSERT_EQ_INT(memcmp(m.ref, m.got, N * O * sizeof *m.got), 0);
    matmul_ws_destroy(ws);
    amx_multi_free(&m);
}

/* The plan for A beyond L2: K passes when C would move fewer bytes than B read
 * once more per row group, row groups otherwise, or both (a 1B model at 504
 * rows: the down projection in 4 passes; at 1,024 rows the 1536-wide inputs in
 * groups of 512 rows, the down projection in groups of 512 rows of 4 passes).
 * K passes alone (forced small: 4 passes of 8 k tiles, a 1B down projection's
 * in miniature), row groups alone (3 groups of 128 rows where 3 passes would
 * be) and both (2 groups of 160 rows, 2 passes each, where 4 passes would be)
 * give the bits of one pass: single and multi products, bias, the epilogue
 * once per element, M, N and K tails (K not a multiple of 32). */
TEST(matmul_amx, k_passes_and_row_groups_give_the_bits_of_one_pass)
{
    static const int plans[][5] = {
        /* M, K, columns: passes, group rows (0: all rows) */
        {504, 1536, 6144 * 2, 1, 0},  {504, 6144, 1536, 4, 0},    {1024, 1536, 6144 * 2, 1, 512},
        {1024, 6144, 1536, 4, 512},   {4096, 6144, 1536, 4, 512},
    };
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
        int n_pass, rows;
        mm_amx_plan_impl(plans[i][0], plans[i][1], plans[i][2], &n_pass, &rows);
        ASSERT_EQ_INT(n_pass, plans[i][3]);
        ASSERT_EQ_INT(rows, plans[i][4]);
    }
    AMX_NEEDS_AMX();
    static const int cases[][5] = {
        /* N, IN, forced bytes: passes, group rows */
        {77, 1000, 96 * 64 * 2, 4, 0},
        {300, 600, 320 * 64 * 8, 1, 128},
        {300, 1000, 320 * 64 * 8, 2, 160},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int N = cases[c][0], IN = cases[c][1], O = 100;
        amx_multi m;
        ASSERT_EQ_INT(amx_multi_init(&m, 2, N, IN, O), 0);
        matmul_ws *ws = matmul_ws_create();
        ASSERT_TRUE(ws != NULL);
        mm_amx_pass_bytes_force_impl((size_t)cases[c][2]);
        int n_pass, rows, plan_ok = 1;
        for (int k = 1; k <= 2; k++) {
            mm_amx_plan_impl(N, IN, (long)k * O, &n_pass, &rows);
            plan_ok &= n_pass == cases[c][3] && rows == cases[c][4];
        }
        for (int i = 0; i < 2; i++)
            matmul_forward_packed_ws(m.outs[i], m.x, m.pk[i], m.bias[i], N, ws);
        int single = memcmp(m.ref, m.got, 2 * (size_t)N * O * sizeof *m.got);
        memset(m.got, 0, 2 * (size_t)N * O * sizeof *m.got);
        matmul_epilogue ep = {amx_ep, NULL};
        amx_ep_calls = 0;
        matmul_forward_packed_multi_ws(m.outs, m.x, m.pk, m.bias, 2, N, ws, &ep);
        mm_amx_pass_bytes_force_impl(0);
        ASSERT_TRUE(plan_ok);
        ASSERT_EQ_INT(single, 0);
        ASSERT_EQ_INT(memcmp(m.ref, m.got, 2 * (size_t)N * O * sizeof *m.got), 0);
        ASSERT_EQ_INT(amx_ep_calls, N * O);
        matmul_ws_destroy(ws);
        amx_multi_free(&m);
    }
}

TEST(matmul_amx, spelled_bf16_amx_and_refused_without_amx)
{
    int p = -1, saved = cpu_level();
    qs_diag d = {0};
    ASSERT_EQ_STR(matmul_precision_name(MATMUL_BF16_AMX), "bf16-amx");
    ASSERT_EQ_INT(matmul_precision_parse("bf16-amx", "--precision", &p, &d),
                  cpu_amx_bf16() ? 0 : QS_EINVAL);
    if (cpu_amx_bf16())
        ASSERT_EQ_INT(p, MATMUL_BF16_AMX);
    /* a CPU without AMX (capped below avx512bf16): one line, the precision named */
    cpu_limit(CPU_LEVEL_AVX512);
    ASSERT_EQ_INT(matmul_precision_parse("bf16-amx", "--precision", &p, &d), QS_EINVAL);
    ASSERT_EQ_STR(d.msg, "--precision bf16-amx: this CPU has no AMX (needs AMX-BF16 and AMX-TILE)");
    cpu_limit(saved);
    ASSERT_EQ_INT(matmul_precision_parse("amx", "precision", &p, &d), QS_EINVAL);
    ASSERT_EQ_STR(d.msg, "precision: expected fp32, bf16 or bf16-amx, got 'amx'");
}

TEST(matmul_amx, without_amx_library_calls_are_bf16)
{
    enum { N = 7, IN = 45, O = 19 };
    float x[N * IN], w[O * IN], oa[N * O], ob[N * O];
    amx_fill(x, N * IN);
    amx_fill(w, O * IN);
    int saved = cpu_level();
    cpu_limit(CPU_LEVEL_AVX512);
    ASSERT_EQ_INT(matmul_frozen_available(MATMUL_BF16_AMX), 0);
    ASSERT_TRUE(matmul_wpack_create_frozen(w, IN, O, MATMUL_BF16_AMX) == NULL);
    matmul_forward(oa, x, w, NULL, N, IN, O, MATMUL_BF16_AMX);
    matmul_forward(ob, x, w, NULL, N, IN, O, MATMUL_BF16);
    cpu_limit(saved);
    ASSERT_EQ_INT(memcmp(oa, ob, sizeof oa), 0);
}
