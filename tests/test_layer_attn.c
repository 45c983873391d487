/* test_layer_attn.c: attention forward against a double-precision reference
 * (GQA, KV cache offset, saved probabilities); every query row's output
 * bit-identical whatever T, pos0, B, Tcap, scratch, saved att and thread count,
 * on the portable and the AVX-512 path, and the two paths give the same bits
 * (documented tolerance: 0, see src/layers/layer_attn_impl.h); the attention exp
 * within 2 ulp of expf; the AVX-512 backward gives the portable one's bits; RoPE
 * tables follow HF's inverse frequencies and llama3 scaling. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "qs/cpu.h"
#include "qs/err.h"
#include "qs/layers.h"
#include "qs/layers_test.h"
#include "qs/mem.h"
#include "test.h"

static void fill(float *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        m = e > m || e != e ? e : m;
    }
    return m;
}

/* Attention inputs of B sequences of L positions: q [B, L, H, hd], k/v [B, L, KVH, hd]. */
typedef struct attn_case {
    int B, L, H, KVH, hd;
    float *q, *k, *v;
} attn_case;

static int case_init(attn_case *c, int B, int L, int H, int KVH, int hd, uint32_t seed)
{
    *c = (attn_case){B, L, H, KVH, hd, NULL, NULL, NULL};
    size_t nq = (size_t)B * L * H * hd, nkv = (size_t)B * L * KVH * hd;
    c->q = qs_malloc(nq * 4);
    c->k = qs_malloc(nkv * 4);
    c->v = qs_malloc(nkv * 4);
    if (!c->q || !c->k || !c->v)
        return -1;
    fill(c->q, nq, seed);
    fill(c->k, nkv, seed + 1);
    fill(c->v, nkv, seed + 2);
    for (size_t i = 0; i < nq; i++)   /* scores of a few units: softmax far from uniform */
        c->q[i] *= 3.0f;
    return 0;
}

static void case_free(attn_case *c)
{
    qs_free(c->q);
    qs_free(c->k);
    qs_free(c->v);
}

/* Positions p0 .. p0+T-1 of sequences b0 .. b0+nb-1 through attn_forward on a
 * cache of capacity Tcap (rows past p0+T poisoned), into out [nb, T, H, hd]
 * (and att [nb, H, T, Tcap] when given).  Returns 0 or -1 (no memory). */
static int case_run(const attn_case *c, int b0, int nb, int p0, int T, int Tcap, int scratch,
                    float *out, float *att)
{
    const int H = c->H, KVH = c->KVH, hd = c->hd;
    size_t qrow = (size_t)H * hd, kvrow = (size_t)KVH * hd;
    float *q = qs_malloc((size_t)nb * T * qrow * 4), *k = qs_malloc((size_t)nb * Tcap * kvrow * 4);
    float *v = qs_malloc((size_t)nb * Tcap * kvrow * 4);
    float *s = scratch ? qs_malloc(attn_scratch_elems(nb, Tcap, KVH, hd) * 4) : NULL;
    int rc = q && k && v && (s || !scratch) ? 0 : -1;
    for (int b = 0; !rc && b < nb; b++) {
        memcpy(q + (size_t)b * T * qrow, c->q + ((size_t)(b0 + b) * c->L + p0) * qrow,
               (size_t)T * qrow * 4);
        for (int j = 0; j < Tcap; j++) {
            float *kd = k + ((size_t)b * Tcap + j) * kvrow, *vd = v + ((size_t)b * Tcap + j) * kvrow;
            if (j < p0 + T) {
                memcpy(kd, c->k + ((size_t)(b0 + b) * c->L + j) * kvrow, kvrow * 4);
                memcpy(vd, c->v + ((size_t)(b0 + b) * c->L + j) * kvrow, kvrow * 4);
            } else {
                for (size_t i = 0; i < kvrow; i++)
                    kd[i] = vd[i] = NAN;   /* past the causal limit: must never be read */
            }
        }
    }
    if (!rc)
        attn_forward(out, att, q, k, v, nb, T, p0, Tcap, H, KVH, hd, s);
    qs_free(q);
    qs_free(k);
    qs_free(v);
    qs_free(s);
    return rc;
}

/* row (b, t) of a [nb, T, H, hd] output vs row (b0 + b, p0 + t) of the full one */
static int rows_equal(const attn_case *c, const float *full, const float *part, int b0, int nb,
                      int p0, int T)
{
    size_t qrow = (size_t)c->H * c->hd;
    for (int b = 0; b < nb; b++)
        if (memcmp(part + (size_t)b * T * qrow, full + ((size_t)(b0 + b) * c->L + p0) * qrow,
                   (size_t)T * qrow * 4))
            return 0;
    return 1;
}

/* softmax(q k / sqrt(hd)) v in double, row (b, t, h); probabilities into p[t + 1] */
static void ref_row(const attn_case *c, int b, int t, int h, double *o, double *p)
{
    const int hd = c->hd, g = h / (c->H / c->KVH);
    const float *qr = c->q + (((size_t)b * c->L + t) * c->H + h) * hd;
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j <= t; j++) {
        const float *kr = c->k + (((size_t)b * c->L + j) * c->KVH + g) * hd;
        double s = 0;
        for (int i = 0; i < hd; i++)
            s += (double)qr[i] * kr[i];
        p[j] = s / sqrt((double)hd);
        mx = p[j] > mx ? p[j] : mx;
    }
    for (int j = 0; j <= t; j++)
        sum += p[j] = exp(p[j] - mx);
    for (int i = 0; i < hd; i++)
        o[i] = 0;
    for (int j = 0; j <= t; j++) {
        p[j] /= sum;
        const float *vr = c->v + (((size_t)b * c->L + j) * c->KVH + g) * hd;
        for (int i = 0; i < hd; i++)
            o[i] += p[j] * vr[i];
    }
}

static const int levels[2] = {CPU_LEVEL_AVX2, CPU_LEVEL_AVX512};   /* portable, AVX-512 */

/* out and saved att against the double reference, cache offset and GQA, on
 * both paths; probabilities zero past the query's position. */
TEST(layer_attn, forward_matches_double_reference_with_gqa_and_cache_offset)
{
    const int B = 2, L = 23, H = 6, KVH = 2, hd = 20, p0 = 5, T = L - p0, Tcap = L + 4;
    attn_case c;
    ASSERT_EQ_INT(case_init(&c, B, L, H, KVH, hd, 11), 0);
    size_t nq = (size_t)B * T * H * hd, na = (size_t)B * H * T * Tcap;
    float *out = qs_malloc(nq * 4), *att = qs_malloc(na * 4);
    ASSERT_TRUE(out && att);
    const int saved = cpu_level();
    for (int li = 0; li < 2; li++) {
        if (levels[li] > cpu_detected_level())
            continue;
        cpu_limit(levels[li]);
        for (int with_att = 0; with_att < 2; with_att++) {
            ASSERT_EQ_INT(case_run(&c, 0, B, p0, T, Tcap, 1, out, with_att ? att : NULL), 0);
            double worst = 0, worst_p = 0, o[64], p[64];
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++)
                    for (int h = 0; h < H; h++) {
                        ref_row(&c, b, p0 + t, h, o, p);
                        const float *got = out + (((size_t)b * T + t) * H + h) * hd;
                        for (int i = 0; i < hd; i++)
                            worst = fmax(worst, fabs(got[i] - o[i]));
                        if (!with_att)
                            continue;
                        const float *a = att + (((size_t)b * H + h) * T + t) * Tcap;
                        for (int j = 0; j < Tcap; j++)
                            worst_p = fmax(worst_p, fabs(a[j] - (j <= p0 + t ? p[j] : 0.0)));
                    }
            ASSERT_TRUE(worst < 2e-6);
            ASSERT_TRUE(worst_p < 1e-6);
        }
    }
    cpu_limit(saved);
    qs_free(out);
    qs_free(att);
    case_free(&c);
}

/* The row-invariance contract (layer_attn_impl.h), bit for bit on each path:
 * a row's output does not move with T, pos0 (prompt in pieces, decode one
 * token at a time), B, Tcap, scratch or not, saved att or not, threads. */
TEST(layer_attn, rows_are_bit_identical_whatever_T_pos0_batch_and_threads)
{
    const int B = 3, L = 29, H = 6, KVH = 2, hd = 24, Tcap = L + 3;
    attn_case c;
    ASSERT_EQ_INT(case_init(&c, B, L, H, KVH, hd, 21), 0);
    size_t qrow = (size_t)H * hd, nq = (size_t)B * L * qrow;
    float *full = qs_malloc(nq * 4), *part = qs_malloc(nq * 4);
    float *att = qs_malloc((size_t)B * H * L * (Tcap + 40) * 4);
    ASSERT_TRUE(full && part && att);
    const int saved = cpu_level();
#ifdef _OPENMP
    const int nt = omp_get_max_threads();
#endif
    for (int li = 0; li < 2; li++) {
        if (levels[li] > cpu_detected_level())
            continue;
        cpu_limit(levels[li]);
        ASSERT_EQ_INT(case_run(&c, 0, B, 0, L, Tcap, 1, full, NULL), 0);
        /* the prompt in pieces of 9, 1, 5, 14 positions on the cache */
        static const int cuts[] = {0, 9, 10, 15, 29};
        for (int s = 0; s < 4; s++) {
            int p0 = cuts[s], T = cuts[s + 1] - p0;
            ASSERT_EQ_INT(case_run(&c, 0, B, p0, T, Tcap, 1, part, NULL), 0);
            ASSERT_TRUE(rows_equal(&c, full, part, 0, B, p0, T));
        }
        /* decode: every position alone, with and without scratch */
        for (int t = 0; t < L; t++)
            for (int sc = 0; sc < 2; sc++) {
                ASSERT_EQ_INT(case_run(&c, 0, B, t, 1, Tcap, sc, part, NULL), 0);
                ASSERT_TRUE(rows_equal(&c, full, part, 0, B, t, 1));
            }
        /* one sequence alone, in a bigger cache, saved att, no scratch */
        ASSERT_EQ_INT(case_run(&c, 1, 1, 0, L, Tcap + 40, 1, part, NULL), 0);
        ASSERT_TRUE(rows_equal(&c, full, part, 1, 1, 0, L));
        ASSERT_EQ_INT(case_run(&c, 0, B, 0, L, Tcap, 1, part, att), 0);
        ASSERT_TRUE(rows_equal(&c, full, part, 0, B, 0, L));
        ASSERT_EQ_INT(case_run(&c, 0, B, 0, L, Tcap, 0, part, NULL), 0);
        ASSERT_TRUE(rows_equal(&c, full, part, 0, B, 0, L));
        ASSERT_EQ_INT(case_run(&c, 2, 1, 4, L - 4, Tcap, 0, part, att), 0);
        ASSERT_TRUE(rows_equal(&c, full, part, 2, 1, 4, L - 4));
#ifdef _OPENMP
        for (int th = 1; th <= 3; th += 2) {
            omp_set_num_threads(th);
            ASSERT_EQ_INT(case_run(&c, 0, B, 3, L - 3, Tcap, 1, part, NULL), 0);
            omp_set_num_threads(nt);
            ASSERT_TRUE(rows_equal(&c, full, part, 0, B, 3, L - 3));
        }
#endif
    }
    cpu_limit(saved);
    qs_free(full);
    qs_free(part);
    qs_free(att);
    case_free(&c);
}

/* attn_forward_seq: sequence b at positions p0[b] .. p0[b]+T-1 (its cache filled
 * up to there, NaN after), rows into out [B, T, H, hd]. */
static int case_run_seq(const attn_case *c, const int *p0, int T, int Tcap, int scratch,
                        float *out)
{
    const int B = c->B, H = c->H, KVH = c->KVH, hd = c->hd;
    size_t qrow = (size_t)H * hd, kvrow = (size_t)KVH * hd;
    float *q = qs_malloc((size_t)B * T * qrow * 4), *k = qs_malloc((size_t)B * Tcap * kvrow * 4);
    float *v = qs_malloc((size_t)B * Tcap * kvrow * 4);
    float *s = scratch ? qs_malloc(attn_scratch_elems(B, Tcap, KVH, hd) * 4) : NULL;
    int rc = q && k && v && (s || !scratch) ? 0 : -1;
    for (int b = 0; !rc && b < B; b++) {
        memcpy(q + (size_t)b * T * qrow, c->q + ((size_t)b * c->L + p0[b]) * qrow,
               (size_t)T * qrow * 4);
        for (int j = 0; j < Tcap; j++) {
            float *kd = k + ((size_t)b * Tcap + j) * kvrow, *vd = v + ((size_t)b * Tcap + j) * kvrow;
            for (size_t i = 0; i < kvrow; i++) {
                kd[i] = j < p0[b] + T ? c->k[((size_t)b * c->L + j) * kvrow + i] : NAN;
                vd[i] = j < p0[b] + T ? c->v[((size_t)b * c->L + j) * kvrow + i] : NAN;
            }
        }
    }
    if (!rc)
        attn_forward_seq(out, q, k, v, B, T, p0, Tcap, H, KVH, hd, s);
    qs_free(q);
    qs_free(k);
    qs_free(v);
    qs_free(s);
    return rc;
}

/* Continuations after contexts of different lengths in one call: each row is the
 * bits of the full-sequence forward at that position (portable and AVX-512, with
 * and without scratch, short and long T). */
TEST(layer_attn, per_sequence_start_positions_give_the_full_forward_rows)
{
    const int B = 3, L = 29, H = 6, KVH = 2, hd = 24, Tcap = L + 3;
    attn_case c;
    ASSERT_EQ_INT(case_init(&c, B, L, H, KVH, hd, 33), 0);
    size_t qrow = (size_t)H * hd, nq = (size_t)B * L * qrow;
    float *full = qs_malloc(nq * 4), *part = qs_malloc(nq * 4);
    ASSERT_TRUE(full && part);
    const int saved = cpu_level();
    static const int p0[3] = {3, 11, 0};
    for (int li = 0; li < 2; li++) {
        if (levels[li] > cpu_detected_level())
            continue;
        cpu_limit(levels[li]);
        ASSERT_EQ_INT(case_run(&c, 0, B, 0, L, Tcap, 1, full, NULL), 0);
        for (int T = 1; T <= 17; T += 8)
            for (int sc = 0; sc < 2; sc++) {
                ASSERT_EQ_INT(case_run_seq(&c, p0, T, Tcap, sc, part), 0);
                for (int b = 0; b < B; b++)
                    if (memcmp(part + (size_t)b * T * qrow, full + ((size_t)b * L + p0[b]) * qrow,
                               (size_t)T * qrow * 4))
                        TEST_FAIL_AT("%s, T=%d, scratch %d, sequence %d: rows differ",
                                     cpu_level_name(levels[li]), T, sc, b);
            }
    }
    cpu_limit(saved);
    qs_free(full);
    qs_free(part);
    case_free(&c);
}

/* Documented tolerance between the paths: none.  Same operations in the same
 * order, so the same bits: prompt and decode, saved att, head dims with tails. */
TEST(layer_attn, avx512_and_portable_forward_give_the_same_bits)
{
    if (cpu_detected_level() < CPU_LEVEL_AVX512)
        SKIP("CPU without AVX-512");
    /* the last three are decode steps (T = 1) with 1, 2 and 3 query heads per KV
     * head: blocks of that many rows (the AVX-512 blocks compute no others) */
    static const int shapes[][5] = {   /* L, H, KVH, hd, prompt start */
        {70, 2, 1, 80, 3}, {37, 8, 2, 8, 0}, {131, 3, 3, 33, 60}, {20, 4, 4, 64, 19},
        {70, 4, 2, 64, 69}, {41, 6, 2, 40, 40}};
    const int saved = cpu_level();
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int L = shapes[si][0], H = shapes[si][1], KVH = shapes[si][2], hd = shapes[si][3];
        const int p0 = shapes[si][4], T = L - p0, B = 2;
        attn_case c;
        ASSERT_EQ_INT(case_init(&c, B, L, H, KVH, hd, 31 + (uint32_t)si), 0);
        size_t nq = (size_t)B * T * H * hd, na = (size_t)B * H * T * L;
        float *o1 = qs_malloc(nq * 4), *o2 = qs_malloc(nq * 4);
        float *a1 = qs_malloc(na * 4), *a2 = qs_malloc(na * 4);
        ASSERT_TRUE(o1 && o2 && a1 && a2);
        for (int with_att = 0; with_att < 2; with_att++) {
            cpu_limit(CPU_LEVEL_AVX2);
            ASSERT_EQ_INT(case_run(&c, 0, B, p0, T, L, 1, o1, with_att ? a1 : NULL), 0);
            cpu_limit(saved);
            ASSERT_EQ_INT(case_run(&c, 0, B, p0, T, L, 1, o2, with_att ? a2 : NULL), 0);
            ASSERT_TRUE(memcmp(o1, o2, nq * 4) == 0);
            ASSERT_TRUE(!with_att || memcmp(a1, a2, na * 4) == 0);
        }
        qs_free(o1);
        qs_free(o2);
        qs_free(a1);
        qs_free(a2);
        case_free(&c);
    }
}

static double ulp_diff(float got, double want)
{
    float w = (float)want;
    double ulp = nextafterf(w, INFINITY) - w;
    return fabs((double)got - want) / ulp;
}

/* attn_exp: within 2 ulp of the exact value on [-87, 0] (expf itself is within
 * 1), exactly 1 at 0, 0 below -87, NaN kept; the AVX-512 lanes equal it. */
TEST(layer_attn, exp_is_within_two_ulp_and_the_same_on_every_path)
{
    enum { N = 1 << 16 };
    float *x = qs_malloc(N * 4), *y = qs_malloc(N * 4);
    ASSERT_TRUE(x && y);
    double worst = 0, worst_expf = 0;
    uint32_t seed = 5;
    for (int rep = 0; rep < 16; rep++) {
        for (int i = 0; i < N; i++) {
            seed = seed * 1664525u + 1013904223u;
            x[i] = rep == 0 ? -87.0f * (float)i / (N - 1)   /* a grid, then random points */
                            : -87.0f * (float)(seed >> 8) / 16777216.0f;
            if (rep == 1 && i < 64)
                x[i] = -ldexpf(1.0f, -i);   /* tiny arguments */
        }
        for (int i = 0; i < N; i++) {
            worst = fmax(worst, ulp_diff(attn_exp(x[i]), exp((double)x[i])));
            worst_expf = fmax(worst_expf, ulp_diff(expf(x[i]), exp((double)x[i])));
        }
        if (cpu_detected_level() >= CPU_LEVEL_AVX512) {
            attn_exp_avx512_impl(y, x, N - rep);   /* tails of the 16 lanes */
            for (int i = 0; i < N - rep; i++)
                if (memcmp(&y[i], &(float){attn_exp(x[i])}, 4))
                    TEST_FAIL_AT("x = %.9g: avx512 %.9g, scalar %.9g", x[i], y[i], attn_exp(x[i]));
        }
    }
    if (getenv("QS_ATTN_VERBOSE"))
        fprintf(stderr, "    worst ulp: attn_exp %.2f, expf %.2f\n", worst, worst_expf);
    ASSERT_TRUE(worst <= 2.0);
    ASSERT_TRUE(attn_exp(0.0f) == 1.0f && attn_exp(-0.0f) == 1.0f);
    ASSERT_TRUE(attn_exp(-87.5f) == 0.0f && attn_exp(-INFINITY) == 0.0f);
    ASSERT_TRUE(isnan(attn_exp(NAN)));
    qs_free(x);
    qs_free(y);
}

/* attn_backward of case c (pos0 = 0, T = L) at CPU level `level` with `threads`
 * threads (0: the default) into d = dq | dk | dv, which start from `init`
 * (the backward accumulates).  att: the forward's saved probabilities. */
static void case_backward(const attn_case *c, const float *att, const float *g, const float *init,
                          float *d, int level, int threads)
{
    const size_t nq = (size_t)c->B * c->L * c->H * c->hd, nkv = (size_t)c->B * c->L * c->KVH * c->hd;
    const int saved = cpu_level();
    memcpy(d, init, (nq + 2 * nkv) * 4);
    cpu_limit(level);
#ifdef _OPENMP
    const int nt = omp_get_max_threads();
    if (threads > 0)
        omp_set_num_threads(threads);
#endif
    (void)threads;
    attn_backward(d, d + nq, d + nq + nkv, g, att, c->q, c->k, c->v, c->B, c->L, c->H, c->KVH,
                  c->hd);
#ifdef _OPENMP
    omp_set_num_threads(nt);
#endif
    cpu_limit(saved);
}

/* Documented tolerance between the backward paths: none (same operations in the
 * portable order, src/layers/layer_attn_impl.h).  GQA groups whose row blocks straddle
 * two heads and end short of ATTN_BWD_ROWS rows (or of one of its halves), head dims with tails, more than 64
 * keys; gradients accumulated onto non-zero values; 1 and 3 threads; and with
 * no memory for the blocks' scratch (the portable loop runs instead). */
TEST(layer_attn, backward_avx512_and_portable_give_the_same_bits_whatever_threads)
{
    if (cpu_detected_level() < CPU_LEVEL_AVX512)
        SKIP("CPU without AVX-512");
    static const int shapes[][5] = {   /* B, T, H, KVH, hd */
        {2, 37, 4, 2, 40}, {1, 70, 3, 3, 80}, {2, 19, 8, 2, 8}, {1, 131, 2, 1, 33}, {3, 20, 4, 4, 64},
        {1, 45, 4, 2, 128}};   /* 1B-like head dim; 8-row blocks straddling heads, 2 rows last */
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int B = shapes[si][0], T = shapes[si][1], H = shapes[si][2], KVH = shapes[si][3];
        const int hd = shapes[si][4];
        attn_case c;
        ASSERT_EQ_INT(case_init(&c, B, T, H, KVH, hd, 41 + (uint32_t)si), 0);
        const size_t nq = (size_t)B * T * H * hd, nkv = (size_t)B * T * KVH * hd;
        const size_t nd = nq + 2 * nkv, na = (size_t)B * H * T * T;
        float *o = qs_malloc(nq * 4), *g = qs_malloc(nq * 4), *att = qs_malloc(na * 4);
        float *init = qs_malloc(nd * 4), *d1 = qs_malloc(nd * 4), *d2 = qs_malloc(nd * 4);
        ASSERT_TRUE(o && g && att && init && d1 && d2);
        fill(g, nq, 50 + (uint32_t)si);
        fill(init, nd, 60 + (uint32_t)si);
        attn_forward(o, att, c.q, c.k, c.v, B, T, 0, T, H, KVH, hd, NULL);
        case_backward(&c, att, g, init, d1, CPU_LEVEL_AVX2, 0);
        double moved = max_diff(d1, init, nd);
        ASSERT_TRUE(moved > 1e-3);   /* the gradients did change */
        for (int th = 1; th <= 3; th += 2) {
            case_backward(&c, att, g, init, d2, cpu_detected_level(), th);
            if (memcmp(d1, d2, nd * 4))
                TEST_FAIL_AT("shape %zu, %d threads: max |avx512 - portable| %.3g", si, th,
                             max_diff(d1, d2, nd));
        }
        qs_mem_fail_after(1);   /* no scratch for the blocks: the portable loop, same bits */
        case_backward(&c, att, g, init, d2, cpu_detected_level(), 0);
        qs_mem_fail_after(0);
        ASSERT_TRUE(memcmp(d1, d2, nd * 4) == 0);
        qs_free(o);
        qs_free(g);
        qs_free(att);
        qs_free(init);
        qs_free(d1);
        qs_free(d2);
        case_free(&c);
    }
}

TEST(layer_rope, tables_follow_hf_frequencies_and_llama3_scaling)
{
    rope_table t;
    rope_scaling s = {ROPE_SCALING_LLAMA3, 8.0, 1.0, 4.0, 16};
    ASSERT_OK(rope_table_init(&t, 4, 16, 500000.0, &s), NULL);
    /* i = 0: wavelength 2*pi lies between 16/4 and 16/1 -> blended:
     * smooth = (16 / 2pi - 1) / (4 - 1), f = (1 - smooth) / 8 + smooth */
    double sm = (16.0 / (2 * M_PI) - 1.0) / 3.0, f0 = (1 - sm) / 8.0 + sm;
    ASSERT_NEAR(t.sin[3 * 8 + 0], sin(3 * f0), 1e-7);
    /* i = 1: wavelength 2*pi*500000^(1/8) ~ 32.9 > 16 -> divided by 8 */
    ASSERT_NEAR(t.cos[3 * 8 + 1], cos(3 * pow(500000.0, -2.0 / 16) / 8.0), 1e-7);
    /* i = 7: wavelength 2*pi*500000^(7/8) > 16 -> divided by 8 */
    double f7 = pow(500000.0, -14.0 / 16) / 8.0;
    ASSERT_NEAR(t.cos[2 * 8 + 7], cos(2 * f7), 1e-7);
    rope_table_free(&t);
    /* rotate_half: x = (1, 0 | 0, 0) at position p -> (cos, 0 | sin, 0) */
    ASSERT_OK(rope_table_init(&t, 8, 4, 10000.0, NULL), NULL);
    float x[4] = {1, 0, 0, 0};
    int32_t pos = 7;
    rope_forward(x, &pos, &t, 1, 1);
    ASSERT_NEAR(x[0], cos(7.0), 1e-6);
    ASSERT_NEAR(x[2], sin(7.0), 1e-6);
    ASSERT_NEAR(x[1], 0.0, 0);
    rope_table_free(&t);
}

