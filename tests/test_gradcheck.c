/* test_gradcheck.c: every layer's backward against central finite differences of a
 * double-precision forward, on tiny shapes.  The forwards here are independent
 * reference implementations (not the library's), so these tests check the
 * backward math against the definition in include/qs/layers.h. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "qs/cpu.h"
#include "qs/layers.h"
#include "test.h"

#define GC_MAX 4096

/* deterministic pseudo-random values in [-1, 1) */
static double gc_rand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / (double)(1u << 23) - 1.0;
}

static void gc_fill(double *x, int n, unsigned seed, double amp)
{
    for (int i = 0; i < n; i++)
        x[i] = amp * gc_rand(&seed);
}

static void gc_to_float(float *y, const double *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = (float)x[i];
}

/* L = sum_i r[i] * out[i]; out computed by fwd(ctx, out) in double */
typedef void (*gc_forward)(void *ctx, double *out);

static double gc_loss(gc_forward fwd, void *ctx, const double *r, int n_out)
{
    static double out[GC_MAX];
    fwd(ctx, out);
    double l = 0.0;
    for (int i = 0; i < n_out; i++)
        l += r[i] * out[i];
    return l;
}

/* max |analytic - numeric| / max |numeric| over the n entries of x */
static double gc_rel_err(gc_forward fwd, void *ctx, const double *r, int n_out, double *x, int n,
                         const float *analytic)
{
    double max_diff = 0.0, max_ref = 1e-12;
    for (int i = 0; i < n; i++) {
        double save = x[i], h = 1e-6 * (fabs(save) > 1.0 ? fabs(save) : 1.0);
        x[i] = save + h;
        double lp = gc_loss(fwd, ctx, r, n_out);
        x[i] = save - h;
        double lm = gc_loss(fwd, ctx, r, n_out);
        x[i] = save;
        double num = (lp - lm) / (2.0 * h);
        max_diff = fmax(max_diff, fabs(num - analytic[i]));
        max_ref = fmax(max_ref, fabs(num));
    }
    return max_diff / max_ref;
}

/* ---- RMSNorm ---- */
enum { RN_N = 3, RN_C = 8 };
typedef struct { double x[RN_N * RN_C], w[RN_C]; } rn_ctx;

static void rn_forward(void *p, double *out)
{
    rn_ctx *c = p;
    for (int n = 0; n < RN_N; n++) {
        double ss = 0.0;
        for (int i = 0; i < RN_C; i++)
            ss += c->x[n * RN_C + i] * c->x[n * RN_C + i];
        double r = 1.0 / sqrt(ss / RN_C + 1e-5);
        for (int i = 0; i < RN_C; i++)
            out[n * RN_C + i] = c->x[n * RN_C + i] * r * c->w[i];
    }
}

TEST(gradcheck, rmsnorm_dx_dw)
{
    rn_ctx c;
    double r[RN_N * RN_C];
    gc_fill(c.x, RN_N * RN_C, 1, 2.0);
    gc_fill(c.w, RN_C, 2, 1.5);
    gc_fill(r, RN_N * RN_C, 3, 1.0);
    float x[RN_N * RN_C], w[RN_C], g[RN_N * RN_C], rstd[RN_N];
    float dx[RN_N * RN_C] = {0}, dw[RN_C] = {0};
    gc_to_float(x, c.x, RN_N * RN_C);
    gc_to_float(w, c.w, RN_C);
    gc_to_float(g, r, RN_N * RN_C);
    for (int n = 0; n < RN_N; n++) {
        double ss = 0.0;
        for (int i = 0; i < RN_C; i++)
            ss += c.x[n * RN_C + i] * c.x[n * RN_C + i];
        rstd[n] = (float)(1.0 / sqrt(ss / RN_C + 1e-5));
    }
    rmsnorm_backward(dx, dw, g, x, w, rstd, RN_N, RN_C);
    ASSERT_TRUE(gc_rel_err(rn_forward, &c, r, RN_N * RN_C, c.x, RN_N * RN_C, dx) < 1e-5);
    ASSERT_TRUE(gc_rel_err(rn_forward, &c, r, RN_N * RN_C, c.w, RN_C, dw) < 1e-5);
}

TEST(gradcheck, backward_accumulates_into_existing_gradients)
{
    float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, g[4] = {1, 0, 0, 0}, rstd[1] = {0.5f};
    float dx1[4] = {0}, dw1[4] = {0}, dx2[4] = {10, 10, 10, 10}, dw2[4] = {-1, -1, -1, -1};
    rmsnorm_backward(dx1, dw1, g, x, w, rstd, 1, 4);
    rmsnorm_backward(dx2, dw2, g, x, w, rstd, 1, 4);
    for (int i = 0; i < 4; i++) {
        ASSERT_NEAR(dx2[i], dx1[i] + 10.0f, 1e-6);
        ASSERT_NEAR(dw2[i], dw1[i] - 1.0f, 1e-6);
    }
}

TEST(gradcheck, swiglu_backward_overwrites_instead_of_accumulating)
{
    /* dgate/dup have no other writer: old contents (even NaN) must not leak in */
    enum { N = 37 };   /* a vector body and a masked tail */
    float gate[N], up[N], d[N], dg0[N] = {0}, du0[N] = {0}, dg[N], du[N];
    for (int i = 0; i < N; i++) {
        gate[i] = 0.37f * (float)(i - 18);
        up[i] = 0.11f * (float)(i % 7) - 0.3f;
        d[i] = 0.05f * (float)(i % 5) - 0.1f;
    }
    int saved = cpu_level();
    for (int portable = 0; portable < 2; portable++) {   /* dispatched, then portable loop */
        if (portable)
            cpu_limit(CPU_LEVEL_AVX2);
        for (int i = 0; i < N; i++) {
            dg0[i] = du0[i] = 0.0f;
            dg[i] = i % 3 ? 5.0f : NAN;
            du[i] = i % 3 ? -7.0f : NAN;
        }
        swiglu_backward(dg0, du0, d, gate, up, N);
        swiglu_backward(dg, du, d, gate, up, N);
        cpu_limit(saved);
        for (int i = 0; i < N; i++) {
            ASSERT_TRUE(dg[i] == dg0[i] && du[i] == du0[i]);
            ASSERT_TRUE(fabsf(dg[i]) < 1.0f && fabsf(du[i]) < 1.0f);
        }
    }
}

/* ---- Embedding (a token repeated: gradients add up) ---- */
enum { EM_V = 5, EM_C = 4, EM_N = 4 };
typedef struct { double wte[EM_V * EM_C]; int32_t tok[EM_N]; } em_ctx;

static void em_forward(void *p, double *out)
{
    em_ctx *c = p;
    for (int n = 0; n < EM_N; n++)
        for (int i = 0; i < EM_C; i++)
            out[n * EM_C + i] = c->wte[c->tok[n] * EM_C + i];
}

TEST(gradcheck, embedding_repeated_tokens_add)
{
    em_ctx c = {.tok = {3, 1, 3, 0}};
    double r[EM_N * EM_C];
    gc_fill(c.wte, EM_V * EM_C, 4, 1.0);
    gc_fill(r, EM_N * EM_C, 5, 1.0);
    float g[EM_N * EM_C], dwte[EM_V * EM_C] = {0};
    gc_to_float(g, r, EM_N * EM_C);
    embed_backward(dwte, g, c.tok, EM_N, EM_C);
    ASSERT_TRUE(gc_rel_err(em_forward, &c, r, EM_N * EM_C, c.wte, EM_V * EM_C, dwte) < 1e-6);
    ASSERT_NEAR(dwte[2 * EM_C], 0.0, 0);
}

/* ---- RoPE ---- */
enum { RP_N = 3, RP_H = 2, RP_HD = 8, RP_MAXPOS = 6 };
typedef struct { double x[RP_N * RP_H * RP_HD]; double cs[RP_MAXPOS * RP_HD / 2], sn[RP_MAXPOS * RP_HD / 2]; int32_t pos[RP_N]; } rp_ctx;

static void rp_forward(void *p, double *out)
{
    rp_ctx *c = p;
    int half = RP_HD / 2;
    for (int n = 0; n < RP_N; n++)
        for (int h = 0; h < RP_H; h++)
            for (int i = 0; i < half; i++) {
                int o = (n * RP_H + h) * RP_HD;
                double cs = c->cs[c->pos[n] * half + i], sn = c->sn[c->pos[n] * half + i];
                double x1 = c->x[o + i], x2 = c->x[o + i + half];
                out[o + i] = x1 * cs - x2 * sn;
                out[o + i + half] = x2 * cs + x1 * sn;
            }
}

TEST(gradcheck, rope_backward_is_the_transposed_rotation)
{
    rp_ctx c = {.pos = {0, 5, 2}};
    int half = RP_HD / 2;
    float cs[RP_MAXPOS * RP_HD / 2], sn[RP_MAXPOS * RP_HD / 2];
    for (int p = 0; p < RP_MAXPOS; p++)
        for (int i = 0; i < half; i++) {
            double ang = p * pow(10000.0, -2.0 * i / RP_HD);
            cs[p * half + i] = (float)cos(ang);
            sn[p * half + i] = (float)sin(ang);
            c.cs[p * half + i] = cs[p * half + i];
            c.sn[p * half + i] = sn[p * half + i];
        }
    rope_table t = {cs, sn, RP_MAXPOS, RP_HD};
    enum { NX = RP_N * RP_H * RP_HD };
    double r[NX];
    gc_fill(c.x, NX, 6, 1.0);
    gc_fill(r, NX, 7, 1.0);
    float g[NX];
    gc_to_float(g, r, NX);
    rope_backward(g, c.pos, &t, RP_N, RP_H);
    ASSERT_TRUE(gc_rel_err(rp_forward, &c, r, NX, c.x, NX, g) < 1e-6);
}

/* ---- Attention (GQA: 4 query heads over 2 kv heads) ---- */
enum { AT_B = 2, AT_T = 4, AT_H = 4, AT_KVH = 2, AT_HD = 4 };
enum { AT_NQ = AT_B * AT_T * AT_H * AT_HD, AT_NKV = AT_B * AT_T * AT_KVH * AT_HD };
typedef struct { double q[AT_NQ], k[AT_NKV], v[AT_NKV]; double att[AT_B * AT_H * AT_T * AT_T]; } at_ctx;

static void at_forward(void *p, double *out)
{
    at_ctx *c = p;
    int group = AT_H / AT_KVH;
    for (int b = 0; b < AT_B; b++)
        for (int h = 0; h < AT_H; h++)
            for (int t = 0; t < AT_T; t++) {
                const double *q = c->q + ((b * AT_T + t) * AT_H + h) * AT_HD;
                double *a = c->att + ((b * AT_H + h) * AT_T + t) * AT_T;
                double mx = -1e300, sum = 0.0;
                for (int j = 0; j < AT_T; j++) {
                    a[j] = 0.0;
                    if (j > t)
                        continue;
                    const double *k = c->k + ((b * AT_T + j) * AT_KVH + h / group) * AT_HD;
                    double s = 0.0;
                    for (int i = 0; i < AT_HD; i++)
                        s += q[i] * k[i];
                    a[j] = s / sqrt((double)AT_HD);
                    mx = fmax(mx, a[j]);
                }
                for (int j = 0; j <= t; j++)
                    sum += (a[j] = exp(a[j] - mx));
                double *o = out + ((b * AT_T + t) * AT_H + h) * AT_HD;
                for (int i = 0; i < AT_HD; i++)
                    o[i] = 0.0;
                for (int j = 0; j <= t; j++) {
                    a[j] /= sum;
                    const double *v = c->v + ((b * AT_T + j) * AT_KVH + h / group) * AT_HD;
                    for (int i = 0; i < AT_HD; i++)
                        o[i] += a[j] * v[i];
                }
            }
}

TEST(gradcheck, attention_gqa_dq_dk_dv)
{
    static at_ctx c;
    static double r[AT_NQ], out[AT_NQ];
    gc_fill(c.q, AT_NQ, 8, 1.5);
    gc_fill(c.k, AT_NKV, 9, 1.5);
    gc_fill(c.v, AT_NKV, 10, 1.0);
    gc_fill(r, AT_NQ, 11, 1.0);
    at_forward(&c, out);
    static float q[AT_NQ], k[AT_NKV], v[AT_NKV], g[AT_NQ], att[AT_B * AT_H * AT_T * AT_T];
    static float dq[AT_NQ], dk[AT_NKV], dv[AT_NKV];
    gc_to_float(q, c.q, AT_NQ);
    gc_to_float(k, c.k, AT_NKV);
    gc_to_float(v, c.v, AT_NKV);
    gc_to_float(g, r, AT_NQ);
    gc_to_float(att, c.att, AT_B * AT_H * AT_T * AT_T);
    attn_backward(dq, dk, dv, g, att, q, k, v, AT_B, AT_T, AT_H, AT_KVH, AT_HD);
    ASSERT_TRUE(gc_rel_err(at_forward, &c, r, AT_NQ, c.q, AT_NQ, dq) < 1e-5);
    ASSERT_TRUE(gc_rel_err(at_forward, &c, r, AT_NQ, c.k, AT_NKV, dk) < 1e-5);
    ASSERT_TRUE(gc_rel_err(at_forward, &c, r, AT_NQ, c.v, AT_NKV, dv) < 1e-5);
}

/* ---- SwiGLU ---- */
enum { SW_N = 16 };
typedef struct { double gate[SW_N], up[SW_N]; } sw_ctx;

static void sw_forward(void *p, double *out)
{
    sw_ctx *c = p;
    for (int i = 0; i < SW_N; i++)
        out[i] = c->gate[i] / (1.0 + exp(-c->gate[i])) * c->up[i];
}

TEST(gradcheck, swiglu_dgate_dup)
{
    sw_ctx c;
    double r[SW_N];
    gc_fill(c.gate, SW_N, 12, 4.0);
    gc_fill(c.up, SW_N, 13, 2.0);
    gc_fill(r, SW_N, 14, 1.0);
    float gate[SW_N], up[SW_N], g[SW_N], dg[SW_N] = {0}, du[SW_N] = {0};
    gc_to_float(gate, c.gate, SW_N);
    gc_to_float(up, c.up, SW_N);
    gc_to_float(g, r, SW_N);
    swiglu_backward(dg, du, g, gate, up, SW_N);
    ASSERT_TRUE(gc_rel_err(sw_forward, &c, r, SW_N, c.gate, SW_N, dg) < 1e-5);
    ASSERT_TRUE(gc_rel_err(sw_forward, &c, r, SW_N, c.up, SW_N, du) < 1e-5);
}

/* ---- Cross-entropy (mean over non-ignored rows) ---- */
enum { XE_N = 4, XE_V = 7 };
typedef struct { double logits[XE_N * XE_V]; int32_t tgt[XE_N]; } xe_ctx;

static void xe_forward(void *p, double *out)
{
    xe_ctx *c = p;
    double total = 0.0;
    int cnt = 0;
    for (int n = 0; n < XE_N; n++) {
        if (c->tgt[n] < 0)
            continue;
        const double *l = c->logits + n * XE_V;
        double mx = l[0], s = 0.0;
        for (int v = 1; v < XE_V; v++)
            mx = fmax(mx, l[v]);
        for (int v = 0; v < XE_V; v++)
            s += exp(l[v] - mx);
        total += log(s) + mx - l[c->tgt[n]];
        cnt++;
    }
    out[0] = total / cnt;
}

TEST(gradcheck, cross_entropy_mean_with_ignored_row)
{
    xe_ctx c = {.tgt = {2, -1, 6, 0}};
    double r[1] = {1.0};
    gc_fill(c.logits, XE_N * XE_V, 15, 3.0);
    float logits[XE_N * XE_V], dl[XE_N * XE_V];
    gc_to_float(logits, c.logits, XE_N * XE_V);
    for (int i = 0; i < XE_N * XE_V; i++)
        dl[i] = 123.0f; /* overwritten, not accumulated */
    xent_backward(dl, NULL, logits, c.tgt, XE_N, XE_V, 1.0f / 3.0f);
    ASSERT_TRUE(gc_rel_err(xe_forward, &c, r, 1, c.logits, XE_N * XE_V, dl) < 1e-5);
    ASSERT_NEAR(dl[XE_V + 3], 0.0, 0);
}
