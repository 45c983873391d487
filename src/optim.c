/* optim.c: AdamW and global-norm clipping (see include/qs/optim.h).
 * The loops here are the reference; with AVX-512, threads run optim_avx512.c's
 * AdamW over fixed chunks (the same bits).  The clip factor and the zeroing
 * of consumed gradients ride on AdamW's pass (adamw_step_scaled).  The
 * gradient norm stays the portable double loop: it is memory-bound, an AVX-512 form measured no faster
 * (bench_train's kernel lines) and would change its summation order. */
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

/* One AdamW step on grads[i] * grad_scale; g_zero (NULL or grads) zeroed once read. */
static void adamw_step_run(adamw_state *s, float *params, const float *grads, float *g_zero,
                           float grad_scale, double lr, const adamw_hparams *h)
{
    s->t++;
    const float b1 = (float)h->beta1, b2 = (float)h->beta2;
    const float bc1 = (float)(1.0 - pow(h->beta1, (double)s->t));
    const float bc2_sqrt = (float)sqrt(1.0 - pow(h->beta2, (double)s->t));
    const float step = (float)lr / bc1;
    const float decay = (float)(1.0 - lr * h->weight_decay);
    const float eps = (float)h->eps;
    float *m = s->m, *v = s->v;
    long n = (long)s->n_params;
    if (cpu_level() >= CPU_LEVEL_AVX512) {
        const optim_adamw_consts k = {b1,   b2,    1.0f - b1, 1.0f - b2, step,
                                      decay, eps, bc2_sqrt,  grad_scale};
        long n_chunks = (n + OPTIM_CHUNK_ELEMS - 1) / OPTIM_CHUNK_ELEMS;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n_chunks > 1)
#endif
        for (long c = 0; c < n_chunks; c++) {
            size_t lo = (size_t)c * OPTIM_CHUNK_ELEMS;
            size_t len = (size_t)n - lo < OPTIM_CHUNK_ELEMS ? (size_t)n - lo : OPTIM_CHUNK_ELEMS;
            optim_adamw_avx512_impl(params + lo, m + lo, v + lo, grads + lo,
                                    g_zero ? g_zero + lo : NULL, len, &k);
        }
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n > 65536)
#endif
    for (long i = 0; i < n; i++) {
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
    adamw_step_run(s, params, grads, NULL, 1.0f, lr, h);
}

void adamw_step_scaled(adamw_state *s, float *params, float *grads, float grad_scale,
                       int zero_grads, double lr, const adamw_hparams *h)
{
    adamw_step_run(s, params, grads, zero_grads ? grads : NULL, grad_scale, lr, h);
}

double optim_grad_norm(const float *g, size_t n)
{
    long n_chunks = (long)((n + OPTIM_CHUNK_ELEMS - 1) / OPTIM_CHUNK_ELEMS);
    double total = 0.0;
    double partial[64];
    /* chunks are summed in groups of 64 so the order is fixed for any thread count */
    for (long c0 = 0; c0 < n_chunks; c0 += 64) {
        long nc = n_chunks - c0 < 64 ? n_chunks - c0 : 64;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nc > 1)
#endif
        for (long c = 0; c < nc; c++) {
            size_t lo = (size_t)(c0 + c) * OPTIM_CHUNK_ELEMS;
            size_t hi = lo + OPTIM_CHUNK_ELEMS < n ? lo + OPTIM_CHUNK_ELEMS : n;
            double acc = 0.0;
            for (size_t i = lo; i < hi; i++)
                acc += (double)g[i] * g[i];
            partial[c] = acc;
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
