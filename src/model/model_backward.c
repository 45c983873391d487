/* model_backward.c: gradients of the Llama block, bottom to top: model_forward
 * read in reverse (see include/qs/model_train.h).
 *
 *   dlogits = softmax - onehot   (in place over a->logits, or in bf16 straight
 *                                 into the lm_head's bf16 operands)
 *   d lnf   = lm_head^T dlogits;  dx_L = rmsnorm'(d lnf)
 *   for each layer, last first:
 *       MLP:  dhb = down'(dx);  dgate, dup = swiglu'(dhb);  dln2 = gate'(dgate) + up'(dup)
 *             dx_mid = dx + rmsnorm'(dln2)
 *       attn: datty = o'(dx_mid);  dq, dk, dv = attention'(datty);  unrotate dq, dk
 *             dln1 = q'(dq) + k'(dk) + v'(dv);  dx = dx_mid + rmsnorm'(dln1)
 *   dwte += embed'(dx_0)
 * Every layer backward ACCUMULATES (swiglu's overwrites), so the residual
 * pass-through is the buffer itself: dresid holds dx_next, the norm's backward
 * adds its branch into it.  The buffers the matmuls and attention accumulate
 * into are zeroed by grad_zero(): several at once, by both threads.
 * Each Linear's backward goes through model_linear_backward(): the operands
 * the forward used (quantized copies under QAT) and the optional STE mask.
 */
#include <string.h>

#include "qs/vecops.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_train.h"
#include "model_impl.h"

static void grad_take(float **field, float *base, size_t *off, size_t n_elems)
{
    if (base)
        *field = base + *off;
    *off += (n_elems + 15) / 16 * 16;
}

static size_t grad_max3(size_t a, size_t b, size_t c)
{
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

static size_t model_grad_acts_layout(llama_grad_acts *g, float *base, const llama_config *c,
                                     int B, int T)
{
    size_t N = (size_t)B * T, C = (size_t)c->dim, F = (size_t)c->hidden_dim;
    size_t QD = (size_t)c->n_heads * c->head_dim, KD = (size_t)c->n_kv_heads * c->head_dim;
    size_t off = 0;
    llama_grad_acts sizes_only;
    if (!g)
        g = &sizes_only;
    grad_take(&g->dresid, base, &off, N * C);
    grad_take(&g->dln, base, &off, N * C);
    grad_take(&g->dq, base, &off, N * QD);
    grad_take(&g->dk, base, &off, N * KD);
    grad_take(&g->dv, base, &off, N * KD);
    grad_take(&g->datty, base, &off, N * QD);
    grad_take(&g->dgate, base, &off, N * F);
    grad_take(&g->dup, base, &off, N * F);
    grad_take(&g->dhb, base, &off, N * F);
    grad_take(&g->dx_tmp, base, &off, N * grad_max3(C, QD, F));
    grad_take(&g->dw_tmp, base, &off, grad_max3(QD * C, F * C, KD * C));
    return off;
}

size_t model_grad_acts_elems(const llama_config *c, int B, int T)
{
    return model_grad_acts_layout(NULL, NULL, c, B, T);
}

int model_grad_acts_init(llama_grad_acts *g, const llama_config *c, int B, int T, qs_diag *d)
{
    memset(g, 0, sizeof *g);
    g->n_elems = model_grad_acts_elems(c, B, T);
    g->memory = qs_calloc(g->n_elems, sizeof *g->memory);
    if (!g->memory)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for gradient activations (%.1f MiB)",
                        g->n_elems * 4.0 / (1 << 20));
    g->B = B;
    g->T = T;
    model_grad_acts_layout(g, g->memory, c, B, T);
    return 0;
}

void model_grad_acts_free(llama_grad_acts *g)
{
    qs_free(g->memory);
    memset(g, 0, sizeof *g);
}

/* Zeroes bufs[i][0, n[i]) for i < count (<= GRAD_ZERO_MAX) in one parallel
 * region of fixed-size chunks, so every thread clears its share of each
 * buffer instead of the master thread doing it alone (it is memory-bound). */
enum { GRAD_ZERO_MAX = 6, GRAD_ZERO_CHUNK = 16384 };
static void grad_zero(int count, float *const *bufs, const size_t *n)
{
    long first[GRAD_ZERO_MAX + 1];
    first[0] = 0;
    for (int i = 0; i < count; i++)
        first[i + 1] = first[i] + (long)((n[i] + GRAD_ZERO_CHUNK - 1) / GRAD_ZERO_CHUNK);
    long n_chunks = first[count];
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n_chunks > 4)
#endif
    for (long ch = 0; ch < n_chunks; ch++) {
        int b = 0;
        while (ch >= first[b + 1])
            b++;
        size_t lo = (size_t)(ch - first[b]) * GRAD_ZERO_CHUNK;
        size_t len = n[b] - lo < GRAD_ZERO_CHUNK ? n[b] - lo : GRAD_ZERO_CHUNK;
        memset(bufs[b] + lo, 0, len * sizeof *bufs[b]);
    }
}

/* One Linear's matmul backward: through the persistent pack of the master
 * weight when the forward used it (packs of m->precision, weight not
 * substituted), through the hook's pack of the substituted weight if it has
 * one, else packing w_use on the fly into the model's workspace. */
static void model_matmul_backward(const llama_model *m, int pack_index, float *dx, float *dw,
                                  float *db, const float *dout, const float *x_use,
                                  const float *w_use, struct matmul_wpack *w_pack, const float *w,
                                  int N, int IN, int O)
{
    if (w_pack && w_use != w)
        matmul_backward_packed_ws(dx, dw, db, dout, x_use, w_pack, N, m->ws);
    else if (m->packs && m->packs_precision == m->precision && w_use == w)
        matmul_backward_packed_ws(dx, dw, db, dout, x_use, m->packs[pack_index], N, m->ws);
    else
        matmul_backward_ws(dx, dw, db, dout, x_use, w_use, N, IN, O, m->precision, m->ws);
}

/* dx[N, IN] += dout @ w;  dw[O, IN] += dout^T x;  db[O] += sum dout, with the
 * forward's operands; masked STE works on this linear's own contributions. */
static void model_linear_backward(const llama_model *m, llama_grad_acts *g,
                                  const model_linear_bwd_hook *hook, int layer, int module,
                                  float *dx, float *dw, float *db, const float *dout,
                                  const float *x, const float *w, int N, int IN, int O)
{
    const float *x_use = x, *w_use = w;
    struct matmul_wpack *w_pack = NULL;
    int masked = hook ? hook->operands(hook->self, layer, module, &x_use, &w_use, &w_pack) : 0;
    /* k and v take q's input, up gate's, and run right after them: their dW
     * reuses the pack of that input (the activation itself, not a substitute) */
    int reuse = x_use == x &&
                (module == MODEL_LIN_K || module == MODEL_LIN_V || module == MODEL_LIN_UP);
    matmul_ws_reuse_x(m->ws, reuse);
    if (!masked) {
        model_matmul_backward(m, layer * MODEL_LIN_COUNT + module, dx, dw, db, dout, x_use,
                              w_use, w_pack, w, N, IN, O);
        matmul_ws_reuse_x(m->ws, 0);
        return;
    }
    size_t nx = (size_t)N * IN, nw = (size_t)O * IN;
    grad_zero(2, (float *const[]){g->dx_tmp, g->dw_tmp}, (const size_t[]){nx, nw});
    model_matmul_backward(m, layer * MODEL_LIN_COUNT + module, g->dx_tmp, g->dw_tmp, db, dout,
                          x_use, w_use, w_pack, w, N, IN, O);
    matmul_ws_reuse_x(m->ws, 0);
    hook->mask(hook->self, layer, module, g->dx_tmp, nx, g->dw_tmp, nw);
    vecops_add_f32(dx, g->dx_tmp, nx);
    vecops_add_f32(dw, g->dw_tmp, nw);
}

static void model_dlogits_put(void *ws, int n0, const float *rows)
{
    matmul_dout_store(ws, n0, rows);
}

/* dlogits = softmax - onehot, then dln += dlogits lm_head, dw += dlogits^T lnf.
 * When the packed lm_head runs on the bf16 kernel, dlogits go from the
 * cross-entropy straight into the bf16 operands of both products (never
 * stored in fp32: a->logits keeps the logits); else they overwrite a->logits. */
static void model_head_backward(llama_model *m, llama_acts *a, float *dln, float *dw,
                                const int32_t *targets, int N, float scale)
{
    const int C = m->cfg.dim, V = m->cfg.vocab_size, head = m->cfg.n_layers * MODEL_LIN_COUNT;
    matmul_wpack *pk = m->packs && m->packs_precision == m->precision ? m->packs[head] : NULL;
    const xent_stats st = {a->xent_max, a->xent_sum};
    const xent_stats *kept = a->xent_kept ? &st : NULL;   /* the forward's, of these logits */
    if (pk && matmul_dout_begin(m->ws, pk, a->lnf, N) &&
        xent_backward_pairs(kept, a->logits, targets, N, V, scale, model_dlogits_put, m->ws) == 0) {
        matmul_dout_backward(dln, dw, pk, N, m->ws);
        return;
    }
    xent_backward(a->logits, kept, a->logits, targets, N, V, scale);
    a->xent_kept = 0;   /* a->logits now holds the gradient */
    model_matmul_backward(m, head, dln, dw, NULL, a->logits, a->lnf, m->w.lm_head, NULL,
                          m->w.lm_head, N, C, V);
}

int model_backward(llama_model *m, llama_acts *a, llama_grad_acts *g, const llama_weights *gw,
                   const int32_t *tokens, const int32_t *targets, int B, int T, float loss_scale,
                   const model_linear_bwd_hook *hook, qs_diag *d)
{
    const llama_config *c = &m->cfg;
    if (!a->training || T != a->T || T != a->Tcap || B > a->B || B > g->B || T != g->T)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "backward needs a training arena with T = Tcap = %d and B <= %d "
                        "(got B=%d T=%d; arena T=%d Tcap=%d training=%d)",
                        g->T, g->B, B, T, a->T, a->Tcap, a->training);
    const int N = B * T, C = c->dim, F = c->hidden_dim, H = c->n_heads, KVH = c->n_kv_heads;
    const int hd = c->head_dim, QD = H * hd, KD = KVH * hd;
    const model_strides st = model_strides_impl(m, a);
    const size_t sC = st.C, sN = st.N, sQ = st.Q, sF = st.F, sKV = st.KV, sAtt = st.att;

    size_t n_valid = 0;
    for (int i = 0; i < N; i++)
        n_valid += targets[i] >= 0;
    float scale = n_valid ? loss_scale / (float)n_valid : 0.0f;

    /* logits = lm_head(rmsnorm(x_L)) */
    memset(g->dln, 0, (size_t)N * C * sizeof *g->dln);
    model_head_backward(m, a, g->dln, gw->lm_head, targets, N, scale);
    memset(g->dresid, 0, (size_t)N * C * sizeof *g->dresid);
    rmsnorm_backward(g->dresid, gw->norm, g->dln, a->resid + c->n_layers * st.resid, m->w.norm,
                     a->lnf_rstd, N, C);

    for (int l = c->n_layers - 1; l >= 0; l--) {
        const llama_layer_weights *lw = &m->w.layer[l];
        const llama_layer_weights *lg = &gw->layer[l];
        /* recompute: the arena holds the last block's tensors from the forward */
        int rc;
        if (a->recompute && l + 1 < c->n_layers &&
            (rc = model_block_recompute_impl(m, a, l, B, T, d)))
            return rc;
        const float *x = a->resid + l * st.resid, *x_mid = a->resid_mid + l * sC;
        const float *ln1 = a->ln1 + l * sC, *ln2 = a->ln2 + l * sC;
        const float *q = a->q + l * sQ, *atty = a->atty + l * sQ;
        const float *kc = a->kcache + l * sKV, *vc = a->vcache + l * sKV;
        const float *gate = a->gate + l * sF, *up = a->up + l * sF, *hb = a->hb + l * sF;

        /* MLP, in reverse: x_next = x_mid + down(swiglu(gate(ln2), up(ln2))) */
        grad_zero(2, (float *const[]){g->dhb, g->dln},
                  (const size_t[]){(size_t)N * F, (size_t)N * C});
        model_linear_backward(m, g, hook, l, MODEL_LIN_DOWN, g->dhb, lg->w_down, NULL, g->dresid,
                              hb, lw->w_down, N, F, C);
        swiglu_backward(g->dgate, g->dup, g->dhb, gate, up, (size_t)N * F);   /* overwrites */
        model_linear_backward(m, g, hook, l, MODEL_LIN_GATE, g->dln, lg->w_gate, NULL, g->dgate,
                              ln2, lw->w_gate, N, C, F);
        model_linear_backward(m, g, hook, l, MODEL_LIN_UP, g->dln, lg->w_up, NULL, g->dup, ln2,
                              lw->w_up, N, C, F);
        rmsnorm_backward(g->dresid, lg->mlp_norm, g->dln, x_mid, lw->mlp_norm,
                         a->ln2_rstd + l * sN, N, C);

        /* attention, in reverse: x_mid = x + o(attention(rope(q(ln1)), rope(k(ln1)), v(ln1))) */
        grad_zero(5, (float *const[]){g->datty, g->dq, g->dk, g->dv, g->dln},
                  (const size_t[]){(size_t)N * QD, (size_t)N * QD, (size_t)N * KD, (size_t)N * KD,
                                   (size_t)N * C});
        model_linear_backward(m, g, hook, l, MODEL_LIN_O, g->datty, lg->wo, lg->bo, g->dresid,
                              atty, lw->wo, N, QD, C);
        attn_backward(g->dq, g->dk, g->dv, g->datty, a->att + l * sAtt, q, kc, vc, B, T, H, KVH,
                      hd);
        rope_backward(g->dq, a->pos, &m->rope, N, H);
        rope_backward(g->dk, a->pos, &m->rope, N, KVH);
        model_linear_backward(m, g, hook, l, MODEL_LIN_Q, g->dln, lg->wq, lg->bq, g->dq, ln1,
                              lw->wq, N, C, QD);
        model_linear_backward(m, g, hook, l, MODEL_LIN_K, g->dln, lg->wk, lg->bk, g->dk, ln1,
                              lw->wk, N, C, KD);
        model_linear_backward(m, g, hook, l, MODEL_LIN_V, g->dln, lg->wv, lg->bv, g->dv, ln1,
                              lw->wv, N, C, KD);
        rmsnorm_backward(g->dresid, lg->attn_norm, g->dln, x, lw->attn_norm,
                         a->ln1_rstd + l * sN, N, C);
    }
    embed_backward(gw->wte, g->dresid, tokens, N, C);
    return 0;
}
