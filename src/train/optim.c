/* optim.c: AdamW and global-norm clipping (see include/qs/optim.h).
 * The loops here are the reference; with AVX-512, threads run optim_avx512.c's
 * AdamW over fixed chunks (the same bits).  The clip factor and the zeroing
 * of consumed gradients ride on AdamW's pass (adamw_step_scaled).  The
 * gradient norm keeps its summation order (a double sum per 64K chunk, chunks
 * added in order); a vector form would change it, so instead each thread runs
 * 8 chunks' independent sums interleaved (about 2x faster, same bits). */
#include "qs/optim.h"

#include <math.h>
#include <string.h>

#include "optim_impl.h"
#include "qs/cpu.h"
#include "qs/mem.h"

#define OPTIM_CHUNK_ELEMS 65536

int adamw_init(adamw_state *s, size_t n_params)
{
    memset(s, 0, sizeof *s);
    s->m = qs_calloc(n_params ? n_params : 1, sizeof(float));
    s->v = qs_calloc(n_params ? n_params : 1, sizeof(float));
    if (!s->m || !s->v) {
        adamw_free(s);
        return QS_ENOMEM;
    }
    s->n_params = n_params;
    return 0;
}

void adamw_free(adamw_state *s)
{
    qs_free(s->m);
    qs_free(s->v);
    memset(s, 0, sizeof *s);
}

/* One AdamW step's constants and what it runs on. */
typedef struct adamw_run {
    adamw_state *s;
    float *params, *g_zero;
    const float *grads;
    optim_adamw_consts k;
} adamw_run;

/* Starts a step: t advances once; the constants as the loops use them. */
static adamw_run adamw_run_begin(adamw_state *s, float *params, const float *grads,
                                 float *g_zero, float grad_scale, double lr,
                                 const adamw_hparams *h)
{
    s->t++;
    adamw_run r;
    memset(&r, 0, sizeof r);
    r.s = s;
    r.params = params;
    r.g_zero = g_zero;
    r.grads = grads;
    r.k.b1 = (float)h->beta1;
    r.k.b2 = (float)h->beta2;
    r.k.one_minus_b1 = 1.0f - r.k.b1;
    r.k.one_minus_b2 = 1.0f - r.k.b2;
    r.k.step = (float)lr / (float)(1.0 - pow(h->beta1, (double)s->t));
    r.k.decay = (float)(1.0 - lr * h->weight_decay);
    r.k.eps = (float)h->eps;
    r.k.bc2_sqrt = (float)sqrt(1.0 - pow(h->beta2, (double)s->t));
    r.k.grad_scale = grad_scale;
    return r;
}

/* Elements [lo, hi) of the step.  Each element's update depends on that
 * element alone, so any split into ranges and chunks gives the same bits.
 * Chunks of OPTIM_CHUNK_ELEMS, or for a range of fewer than 16 such chunks
 * (one weight of a segmented step) 16 equal ones, so that 2 threads get even
 * halves (9 chunks of a 768 x 768 weight went 5 and 4). */
static void adamw_run_range(const adamw_run *r, size_t lo, size_t hi)
{
    float *params = r->params, *m = r->s->m, *v = r->s->v, *g_zero = r->g_zero;
    const float *grads = r->grads;
    const optim_adamw_consts *k = &r->k;
    if (hi <= lo)
        return;
    if (cpu_level() >= CPU_LEVEL_AVX512) {
        size_t len = hi - lo, chunk = OPTIM_CHUNK_ELEMS;
        if (len < 16 * (size_t)OPTIM_CHUNK_ELEMS)
            chunk = (len / 16 + 15) / 16 * 16 > 4096 ? (len / 16 + 15) / 16 * 16 : 4096;
        long n_chunks = (long)((len + chunk - 1) / chunk);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n_chunks > 1)
#endif
        for (long c = 0; c < n_chunks; c++) {
            size_t a = lo + (size_t)c * chunk;
            size_t n = hi - a < chunk ? hi - a : chunk;
            optim_adamw_avx512_impl(params + a, m + a, v + a, grads + a,
                                    g_zero ? g_zero + a : NULL, n, k);
        }
        return;
    }
    const float b1 = k->b1, b2 = k->b2, step = k->step, decay = k->decay, eps = k->eps;
    const float bc2_sqrt = k->bc2_sqrt, grad_scale = k->grad_scale;
    long n = (long)(hi - lo);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n > 65536)
#endif
    for (long j = 0; j < n; j++) {
        size_t i = lo + (size_t)j;
        float g = grads[i] * grad_scale;
        if (g_zero)
            g_zero[i] = 0.0f;
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = params[i] * decay;
        params[i] = p - step * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

void adamw_step(adamw_state *s, float *params, const float *grads, double lr,
                const adamw_hparams *h)
{
    adamw_run r = adamw_run_begin(s, params, grads, NULL, 1.0f, lr, h);
    adamw_run_range(&r, 0, s->n_params);
}

void adamw_step_scaled(adamw_state *s, float *params, float *grads, float grad_scale,
                       int zero_grads, double lr, const adamw_hparams *h)
{
    adamw_run r = adamw_run_begin(s, params, grads, zero_grads ? grads : NULL, grad_scale, lr, h);
    adamw_run_range(&r, 0, s->n_params);
}

void adamw_step_scaled_segments(adamw_state *s, float *params, float *grads, float grad_scale,
                                int zero_grads, double lr, const adamw_hparams *h,
                                const size_t *ends, int n_ends, adamw_segment_done done,
                                void *ctx)
{
    adamw_run r = adamw_run_begin(s, params, grads, zero_grads ? grads : NULL, grad_scale, lr, h);
    size_t lo = 0;
    for (int i = 0; i <= n_ends; i++) {
        size_t hi = i < n_ends && ends[i] < s->n_params ? ends[i] : s->n_params;
        if (hi < lo)   /* not ascending: the rest in one piece */
            hi = s->n_params;
        adamw_run_range(&r, lo, hi);
        if (done && hi > lo)
            done(ctx, lo, hi);
        lo = hi;
    }
}

/* Sum of squares of chunk [lo, hi), in double, in index order. */
static double optim_chunk_sumsq(const float *g, size_t lo, size_t hi)
{
    double acc = 0.0;
    for (size_t i = lo; i < hi; i++)
        acc += (double)g[i] * g[i];
    return acc;
}

/* optim_chunk_sumsq of OPTIM_NORM_ILP full chunks starting at lo, interleaved:
 * each chunk keeps its own sequential sum (the same bits), but the independent
 * chains hide the latency of the double adds that bound a single chain.  Eight
 * named accumulators, so they stay in registers at -O2. */
enum { OPTIM_NORM_ILP = 8 };
static void optim_chunks_sumsq(const float *g, size_t lo, double *out)
{
    const size_t C = OPTIM_CHUNK_ELEMS;
    const float *p0 = g + lo, *p1 = p0 + C, *p2 = p1 + C, *p3 = p2 + C;
    const float *p4 = p3 + C, *p5 = p4 + C, *p6 = p5 + C, *p7 = p6 + C;
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0, a4 = 0.0, a5 = 0.0, a6 = 0.0, a7 = 0.0;
    for (size_t i = 0; i < C; i++) {
        a0 += (double)p0[i] * p0[i];
        a1 += (double)p1[i] * p1[i];
        a2 += (double)p2[i] * p2[i];
        a3 += (double)p3[i] * p3[i];
        a4 += (double)p4[i] * p4[i];
        a5 += (double)p5[i] * p5[i];
        a6 += (double)p6[i] * p6[i];
        a7 += (double)p7[i] * p7[i];
    }
    out[0] = a0;
    out[1] = a1;
    out[2] = a2;
    out[3] = a3;
    out[4] = a4;
    out[5] = a5;
    out[6] = a6;
    out[7] = a7;
}

double optim_grad_norm(const float *g, size_t n)
{
    long n_chunks = (long)((n + OPTIM_CHUNK_ELEMS - 1) / OPTIM_CHUNK_ELEMS);
    double total = 0.0;
    double partial[64];
    /* chunk sums are added in chunk order, so the value is fixed for any thread
     * count; a task is a block of OPTIM_NORM_ILP chunks of a group of 64 */
    for (long c0 = 0; c0 < n_chunks; c0 += 64) {
        long nc = n_chunks - c0 < 64 ? n_chunks - c0 : 64;
        long n_blocks = (nc + OPTIM_NORM_ILP - 1) / OPTIM_NORM_ILP;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n_blocks > 1)
#endif
        for (long b = 0; b < n_blocks; b++) {
            long first = b * OPTIM_NORM_ILP;
            long cnt = nc - first < OPTIM_NORM_ILP ? nc - first : OPTIM_NORM_ILP;
            size_t lo = (size_t)(c0 + first) * OPTIM_CHUNK_ELEMS;
            if (cnt == OPTIM_NORM_ILP && lo + OPTIM_NORM_ILP * (size_t)OPTIM_CHUNK_ELEMS <= n) {
                optim_chunks_sumsq(g, lo, partial + first);
                continue;
            }
            for (long j = 0; j < cnt; j++) {
                size_t l = lo + (size_t)j * OPTIM_CHUNK_ELEMS;
                partial[first + j] = optim_chunk_sumsq(g, l, l + OPTIM_CHUNK_ELEMS < n
                                                                 ? l + OPTIM_CHUNK_ELEMS : n);
            }
        }
        for (long c = 0; c < nc; c++)
            total += partial[c];
    }
    return sqrt(total);
}

float optim_grad_clip_factor(double norm, double max_norm)
{
    if (max_norm <= 0.0 || !(norm > max_norm))
        return 1.0f;
    return (float)(max_norm / (norm + 1e-6));
}

double optim_grad_clip(float *g, size_t n, double norm, double max_norm)
{
    float f = optim_grad_clip_factor(norm, max_norm);
    if (f == 1.0f)
        return 1.0;
    long ln = (long)n;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (ln > 65536)
#endif
    for (long i = 0; i < ln; i++)
        g[i] *= f;
    return f;
}
