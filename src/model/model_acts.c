/* model_acts.c: the activation arena, sized once from (B, T, Tcap, config,
 * training) (see include/qs/model_acts.h).
 *
 * model_acts_layout() is the single formula: it walks the tensors in order,
 * adding their sizes, and (when given an arena) points each field into it.
 * model_acts_elems() and inspect's memory estimate call the same walk, so the
 * estimate cannot drift from what is allocated.
 *
 * Checklist: a new activation = a field in llama_acts (with its shape) + one
 * line here + its use in model_forward.c.
 */
#include <stdint.h>
#include <string.h>

#include "qs/mem.h"
#include "qs/model_acts.h"

/* a * b * c * d, SIZE_MAX when it does not fit: the sizes-only walk behind inspect's
 * estimate meets any --batch x --seq (an arena is only laid out once
 * model_acts_init_any's bound has passed, where nothing saturates) */
static size_t acts_prod(size_t a, size_t b, size_t c, size_t d)
{
    const size_t f[3] = {b, c, d};
    size_t p = a;
    for (int i = 0; i < 3; i++) {
        if (f[i] && p > SIZE_MAX / f[i])
            return SIZE_MAX;
        p *= f[i];
    }
    return p;
}

static void acts_take(float **field, float *base, size_t *off, size_t n_elems)
{
    if (base)
        *field = n_elems ? base + *off : NULL;
    size_t n = n_elems > SIZE_MAX - 15 ? SIZE_MAX : (n_elems + 15) / 16 * 16;   /* 64-byte aligned */
    *off = n > SIZE_MAX - *off ? SIZE_MAX : *off + n;
}

/* n doubles from the float arena (64-byte aligned as every field) */
static void acts_take_f64(double **field, float *base, size_t *off, size_t n_elems)
{
    float *f = NULL;
    acts_take(&f, base, off, 2 * n_elems);
    if (base)
        *field = (double *)(void *)f;
}

static size_t acts_max3(size_t a, size_t b, size_t c)
{
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* Floats of the key (or the value) cache: n_layers layers of `positions`
 * positions (sequences x capacity) of KVH*hd. */
static size_t acts_kv_half(const llama_config *c, size_t n_layers, size_t positions)
{
    return acts_prod(n_layers, positions, (size_t)c->n_kv_heads * c->head_dim, 1);
}

/* a may be NULL (only sizes).  Returns the arena size in floats, SIZE_MAX when
 * it does not fit in size_t. */
static size_t model_acts_layout(llama_acts *a, float *base, const llama_config *c, int B, int T,
                                int Tcap, int training, int logits_rows, int kv_shared)
{
    size_t N = (size_t)B * T, C = (size_t)c->dim, F = (size_t)c->hidden_dim;
    size_t QD = (size_t)c->n_heads * c->head_dim, KD = (size_t)c->n_kv_heads * c->head_dim;
    /* per-layer copies: every layer's when training without recompute, else one
     * (shared); the KV cache is per layer except under recompute or kv_shared */
    size_t L = (size_t)c->n_layers, V = (size_t)c->vocab_size;
    size_t Lk = training == MODEL_ACTS_TRAIN ? L : 1;
    size_t Lkv = kv_shared || training == MODEL_ACTS_RECOMPUTE ? 1 : L;
    size_t NV = acts_prod(logits_rows > 0 ? (size_t)logits_rows : N, V, 1, 1);
    size_t off = 0;
    size_t max_w = acts_max3(QD * C, F * C, KD * C);
    /* attn_scratch_elems's B KVH hd Tcap, checked before it multiplies them */
    size_t scratch = acts_prod((size_t)B, KD, (size_t)Tcap, 2) == SIZE_MAX
                         ? SIZE_MAX
                         : attn_scratch_elems(B, Tcap, c->n_kv_heads, c->head_dim);
    llama_acts sizes_only;   /* fields are only written when base is set */
    if (!a)
        a = &sizes_only;
    acts_take(&a->resid, base, &off, acts_prod(training ? L + 1 : 1, N, C, 1));
    acts_take(&a->ln1, base, &off, acts_prod(Lk, N, C, 1));
    acts_take(&a->ln1_rstd, base, &off, acts_prod(Lk, N, 1, 1));
    acts_take(&a->q, base, &off, acts_prod(Lk, N, QD, 1));
    size_t kv_pos = acts_prod((size_t)B, (size_t)Tcap, 1, 1);   /* model_acts_kv_elems */
    acts_take(&a->kcache, base, &off, acts_kv_half(c, Lkv, kv_pos));
    acts_take(&a->vcache, base, &off, acts_kv_half(c, Lkv, kv_pos));
    acts_take(&a->att, base, &off,
              training ? acts_prod(acts_prod(Lk, (size_t)B, (size_t)c->n_heads, 1), (size_t)T,
                                   (size_t)Tcap, 1)
                       : 0);
    acts_take(&a->atty, base, &off, acts_prod(Lk, N, QD, 1));
    acts_take(&a->resid_mid, base, &off, acts_prod(Lk, N, C, 1));
    acts_take(&a->ln2, base, &off, acts_prod(Lk, N, C, 1));
    acts_take(&a->ln2_rstd, base, &off, acts_prod(Lk, N, 1, 1));
    acts_take(&a->gate, base, &off, acts_prod(Lk, N, F, 1));
    acts_take(&a->up, base, &off, acts_prod(Lk, N, F, 1));
    acts_take(&a->hb, base, &off, acts_prod(Lk, N, F, 1));
    acts_take(&a->lnf, base, &off, acts_prod(N, C, 1, 1));
    acts_take(&a->lnf_rstd, base, &off, N);
    acts_take(&a->logits, base, &off, NV);
    acts_take(&a->losses, base, &off, N);
    acts_take(&a->xent_max, base, &off, training ? N : 0);
    acts_take_f64(&a->xent_sum, base, &off, training ? N : 0);
    acts_take(&a->kv_new, base, &off, acts_prod(2, N, KD, 1));
    acts_take(&a->proj, base, &off, acts_prod(N, C, 1, 1));
    acts_take(&a->xq, base, &off, acts_prod(N, acts_max3(C, QD, F), 1, 1));
    acts_take(&a->wq, base, &off, max_w);
    acts_take(&a->attn_scratch, base, &off, scratch);
    return off;
}

size_t model_acts_elems(const llama_config *c, int B, int T, int Tcap, int training)
{
    return model_acts_layout(NULL, NULL, c, B, T, Tcap, training, 0, 0);
}

size_t model_acts_infer_elems(const llama_config *c, int rows, int kv_positions, int logits_rows,
                              int kv_shared)
{
    /* laid out as model_acts_init_infer lays it out: a cache of at least `rows` */
    return model_acts_layout(NULL, NULL, c, 1, rows, kv_positions > rows ? kv_positions : rows, 0,
                             logits_rows, kv_shared);
}

size_t model_acts_kv_elems(const llama_config *c, size_t positions, int kv_shared)
{
    size_t half = acts_kv_half(c, kv_shared ? 1 : (size_t)c->n_layers, positions);
    return half > SIZE_MAX / 2 ? SIZE_MAX : 2 * half;
}

static int model_acts_init_any(llama_acts *a, const llama_config *c, int B, int T, int Tcap,
                               int training, int logits_rows, int kv_shared, int by_capacity,
                               qs_diag *d)
{
    memset(a, 0, sizeof *a);
    if (training < MODEL_ACTS_INFER || training > MODEL_ACTS_RECOMPUTE)
        return diag_set(d, QS_EINVAL, NULL, -1, "activations: unknown mode %d", training);
    if (B < 1 || T < 1 || Tcap < T)
        return diag_set(d, QS_EINVAL, NULL, -1, "activations: need B >= 1, T >= 1, Tcap >= T "
                        "(got B=%d T=%d Tcap=%d)", B, T, Tcap);
    if (training && Tcap != T)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "training activations need Tcap = T (got T=%d Tcap=%d)", T, Tcap);
    if (Tcap > hfconfig_max_context(c) && !by_capacity)
        return diag_set(d, QS_ERANGE, NULL, -1,
                        "context of %d tokens exceeds the model's limit of %d%s", Tcap,
                        hfconfig_max_context(c),
                        c->sliding_window ? " (sliding_window: not supported beyond it)" : "");
    double approx = (double)B * T *
                    ((double)c->vocab_size + (double)c->n_layers * 16.0 * (c->dim + c->hidden_dim)) +
                    (double)c->n_layers * 2.0 * B * Tcap * c->n_kv_heads * c->head_dim +
                    (training ? (double)c->n_layers * B * c->n_heads * (double)T * Tcap : 0.0);
    if (approx > 274877906944.0)   /* 2^38 floats: refuse before size_t arithmetic */
        return diag_set(d, QS_ERANGE, NULL, -1, "activations for B=%d T=%d are too large", B, T);
    a->B = B;
    a->T = T;
    a->Tcap = Tcap;
    a->training = training != MODEL_ACTS_INFER;
    a->recompute = training == MODEL_ACTS_RECOMPUTE;
    a->kv_shared = kv_shared;
    a->logits_cap = logits_rows;
    a->n_elems = model_acts_layout(NULL, NULL, c, B, T, Tcap, training, logits_rows, kv_shared);
    /* zeroed without being written (qs_calloc maps it): an inference arena is
     * sized for the longest input, and most batches use a fraction of it */
    a->memory = qs_calloc(a->n_elems, sizeof *a->memory);
    a->pos = qs_malloc((size_t)B * T * sizeof *a->pos);
    if (!a->memory || !a->pos) {
        size_t n = a->n_elems;
        model_acts_free(a);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for activations (%.1f MiB)",
                        n * 4.0 / (1 << 20));
    }
    model_acts_layout(a, a->memory, c, B, T, Tcap, training, logits_rows, kv_shared);
    a->loss = -1.0;
    return 0;
}

int model_acts_init(llama_acts *a, const llama_config *c, int B, int T, int Tcap, int training,
                    qs_diag *d)
{
    return model_acts_init_any(a, c, B, T, Tcap, training, 0, 0, 0, d);
}

int model_acts_init_infer(llama_acts *a, const llama_config *c, int rows, int kv_positions,
                          int logits_rows, int kv_shared, qs_diag *d)
{
    if (rows < 1 || kv_positions < 1 || logits_rows < 0 || logits_rows > rows)
        return diag_set(d, QS_EINVAL, NULL, -1, "activations: need rows >= 1, kv positions >= 1, "
                        "0 <= logits rows <= rows (got %d, %d, %d)", rows, kv_positions,
                        logits_rows);
    /* laid out as one sequence of `rows` tokens on a cache of kv_positions: every
     * view (B, T, Tcap) with B*T <= rows and B*Tcap <= kv_positions fits it (the
     * attention scratch grows with B*Tcap and Tcap) */
    int rc = model_acts_init_any(a, c, 1, rows, kv_positions > rows ? kv_positions : rows, 0,
                                 logits_rows, kv_shared, 1, d);
    if (rc)
        return rc;
    a->rows_cap = (size_t)rows;
    a->kv_cap = (size_t)(kv_positions > rows ? kv_positions : rows);
    int ctx = hfconfig_max_context(c);
    return model_acts_view(a, c, 1, rows < ctx ? rows : ctx, a->kv_cap < (size_t)ctx ? (int)a->kv_cap : ctx,
                           d);
}

int model_acts_view(llama_acts *a, const llama_config *c, int B, int T, int Tcap, qs_diag *d)
{
    if (!a->rows_cap || B < 1 || T < 1 || Tcap < T || (size_t)B * T > a->rows_cap ||
        (size_t)B * Tcap > a->kv_cap || Tcap > hfconfig_max_context(c))
        return diag_set(d, QS_ERANGE, NULL, -1, "activations: B=%d x T=%d on %d cache positions "
                        "do not fit the arena (%zu rows, %zu cache positions, context %d)", B, T,
                        Tcap, a->rows_cap, a->kv_cap, hfconfig_max_context(c));
    a->B = B;
    a->T = T;
    a->Tcap = Tcap;
    return 0;
}

void model_acts_free(llama_acts *a)
{
    qs_free(a->memory);
    qs_free(a->pos);
    memset(a, 0, sizeof *a);
}
