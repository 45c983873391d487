/* model_forward.c: the Llama block, top to bottom (see include/qs/model_acts.h).
 *
 *   x = embed(tokens)
 *   for each layer:  h = rmsnorm(x);  q, k, v = linear(h);  rope(q, k);  kv cache <- k, v
 *                    x = x + o_proj(attention(q, K, V))
 *                    h = rmsnorm(x);  x = x + down_proj(silu(gate_proj(h)) * up_proj(h))
 *   logits = lm_head(rmsnorm(x))
 * Each residual add runs in one pass with the RMSNorm that follows it
 * (rmsnorm_residual_forward), so a layer's ln1 is computed at the end of the
 * layer before (or after the embedding); q/k/v and gate/up each convert their
 * shared input once (model_linear_group).
 *
 * Every Linear of a block goes through model_linear(): the one visible seam
 * where the quantization hook may replace input and weight by fake-quantized
 * copies.  Matmuls are called from serial code (BLAS threads inside); the
 * element-wise layers thread their own outer loops (OpenMP), never nested.
 */
#include <string.h>

#include "qs/matmul.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_hif8.h"
#include "model_impl.h"

/* replay: a recomputation (model_block_recompute_impl): the hook's replay
 * callback stands in for fn when it has one. */
static int model_linear(llama_model *m, llama_acts *a, int layer, int module, float *out,
                        const float *x, const float *w, const float *bias, int N, int IN, int O,
                        int replay)
{
    if (m->hook.fn && (!m->hook.planned || m->hook.planned(m->hook.self, layer, module))) {
        /* substituted packs already hold the hook's weight: it substitutes x only */
        const int sub = m->packs_substituted;
        int (*fn)(void *, int, int, const float *, float *, int, int, const float *, float *,
                  int) = replay && m->hook.replay ? m->hook.replay : m->hook.fn;
        int r = fn(m->hook.self, layer, module, x, a->xq, N, IN, sub ? NULL : w,
                   sub ? NULL : a->wq, O);
        if (r < 0)
            return r;
        /* r == 2: code-domain operands, the bias after the scales (once per row) */
        const float *b = r == 2 ? NULL : bias, *xq = a->xq, *wq = a->wq;
        if (r >= 1 && m->hook.where)
            m->hook.where(m->hook.self, &xq, &wq);
        if (r >= 1 && sub)
            matmul_forward_packed_ws(out, xq, m->packs[layer * MODEL_LIN_COUNT + module], b, N,
                                     m->ws);
        else if (r >= 1)
            matmul_forward_ws(out, xq, wq, b, N, IN, O, m->precision, m->ws);
        if (r == 2)
            model_linear_rows_finish(out, m->hook.row_scale(m->hook.self), bias, N, O);
        if (r >= 1)
            return 0;
    }
    if (model_hif8_planned(m, layer, module))   /* a HiF8 checkpoint's W8A8 Linear */
        return model_hif8_forward(m, layer, module, out, x, bias, N, IN, O, a->xq);
    if (m->packs && m->packs_precision == m->precision)
        matmul_forward_packed_ws(out, x, m->packs[layer * MODEL_LIN_COUNT + module], bias, N,
                                 m->ws);
    else
        matmul_forward_ws(out, x, w, bias, N, IN, O, m->precision, m->ws);
    return 0;
}

/* The Linears modules[0..n) of a layer, all reading x[N, IN] (q/k/v, gate/up):
 * with packed weights and no hook planned on them, one call converts x once for all of them and
 * runs ep (may be NULL) on each output block while it is in cache; otherwise
 * one model_linear each (the hook may substitute x per module), then ep on
 * the whole output. */
static int model_linear_group(llama_model *m, llama_acts *a, int layer, int n, const int *modules,
                              float *const *out, const float *x, const float *const *w,
                              const float *const *bias, int N, int IN, const int *O,
                              const matmul_epilogue *ep, int replay)
{
    int hooked = 0, coded = 0;
    for (int i = 0; m->hook.fn && i < n; i++)
        hooked |= !m->hook.planned || m->hook.planned(m->hook.self, layer, modules[i]);
    for (int i = 0; i < n; i++)
        coded += model_hif8_planned(m, layer, modules[i]);
    if (!hooked && coded == n) {   /* a HiF8 checkpoint's W8A8 Linears: x encoded once */
        int rc = model_hif8_forward_group(m, layer, n, modules, out, x, bias, N, IN, O, a->xq, ep);
        if (rc <= 0)
            return rc;
    }
    hooked |= coded > 0;
    if (!hooked && m->packs && m->packs_precision == m->precision) {
        struct matmul_wpack *pk[3];
        for (int i = 0; i < n; i++)
            pk[i] = m->packs[layer * MODEL_LIN_COUNT + modules[i]];
        matmul_forward_packed_multi_ws(out, x, pk, bias, n, N, m->ws, ep);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        int rc = model_linear(m, a, layer, modules[i], out[i], x, w[i], bias[i], N, IN, O[i],
                              replay);
        if (rc)
            return rc;
    }
    if (ep)
        ep->fn(ep->ctx, 0, N, 0, O[0]);
    return 0;
}

/* hb = silu(gate) * up on one block, as the epilogue of gate/up */
typedef struct model_swiglu_ctx {
    float *hb;
    const float *gate, *up;
    int F;
} model_swiglu_ctx;

static void model_swiglu_block(void *ctx, int row0, int rows, int col0, int cols)
{
    const model_swiglu_ctx *s = ctx;
    size_t off = (size_t)row0 * s->F + col0;
    swiglu_forward_block(s->hb + off, s->gate + off, s->up + off, rows, cols, (size_t)s->F);
}

/* Inference on the AMX packs (matmul_fused.c), where a product's input can be
 * written straight into its GEMM's bf16 rows and outputs handed over as
 * blocks: 1 when layer l's Linears mods[0..n) all run there with nothing in
 * between (no training arena, no hook, no HiF8 code pack) and N is at least
 * MODEL_ROWS_MIN; matmul_xrows_begin then says whether the kernel takes rows.
 * The bits of the stored path.  Below MODEL_ROWS_MIN rows (decode) the
 * products stream their weights from memory and there is nothing to gain:
 * a 1B decode at bf16-amx ran at 11.54-11.56 tokens/s with the rows against
 * 11.85-11.95 without (two alternating pairs). */
enum { MODEL_ROWS_MIN = 32 };
static int model_rows_ok(llama_model *m, const llama_acts *a, int l, int n, const int *mods,
                         int N)
{
    if (N < MODEL_ROWS_MIN || a->training || !m->packs || m->packs_precision != m->precision ||
        !m->ws)
        return 0;
    for (int i = 0; i < n; i++)
        if ((m->hook.fn && (!m->hook.planned || m->hook.planned(m->hook.self, l, mods[i]))) ||
            model_hif8_planned(m, l, mods[i]))
            return 0;
    return 1;
}

/* RMSNorm's rows (ln1 before q/k/v, ln2 before gate/up) into the next
 * product's bf16 rows, each as it is done */
static void model_norm_row(void *ctx, int n, const float *row)
{
    const llama_model *m = ctx;
    matmul_xrows_store(m->ws, MATMUL_XROWS_NEXT, n, 1, 0, m->cfg.dim, row, m->cfg.dim);
}

/* ln for layer l's Linear `module` and those after it that share its input,
 * also in their rows when ok (model_rows_ok on them) and the kernel takes
 * rows: 1 then */
static int model_norm_rows(llama_model *m, int ok, int l, int module, float *sum, float *ln,
                           float *rstd, const float *x, const float *add, const float *w, int N)
{
    const int rows = ok && matmul_xrows_begin(m->ws, MATMUL_XROWS_NEXT,
                                              m->packs[l * MODEL_LIN_COUNT + module], N);
    rmsnorm_residual_forward_rows(sum, ln, rstd, x, add, w, N, m->cfg.dim, m->cfg.norm_eps,
                                  rows ? model_norm_row : NULL, m);
    return rows;
}

/* The MLP's h = silu(gate) * up on gate/up's blocks, into the down
 * projection's bf16 rows (slot LATER: gate/up read theirs from NEXT). */
static void model_swiglu_rows_block(void *ctx, int row0, int rows, int col0, int cols,
                                    const float *const *blk, int ld)
{
    enum { MODEL_SWIGLU_BLK = 32 * 32 };
    float h[MODEL_SWIGLU_BLK];
    if ((size_t)rows * ld <= MODEL_SWIGLU_BLK) {   /* the AMX GEMM's blocks (32 x 32) */
        swiglu_forward_block(h, blk[0], blk[1], rows, cols, (size_t)ld);
        matmul_xrows_store(ctx, MATMUL_XROWS_LATER, row0, rows, col0, cols, h, ld);
        return;
    }
    for (int r = 0; r < rows; r++)   /* larger blocks: row by row, in pieces */
        for (int c0 = 0; c0 < cols; c0 += MODEL_SWIGLU_BLK) {
            const int n = cols - c0 < MODEL_SWIGLU_BLK ? cols - c0 : MODEL_SWIGLU_BLK;
            const size_t off = (size_t)r * ld + c0;
            swiglu_forward_block(h, blk[0] + off, blk[1] + off, 1, n, (size_t)n);
            matmul_xrows_store(ctx, MATMUL_XROWS_LATER, row0 + r, 1, col0 + c0, n, h, n);
        }
}

/* Inference's MLP with its outputs never stored (layer l's gate/up/down
 * passed model_rows_ok): gate and up's blocks go through SwiGLU in the
 * scratch they were computed into, and h straight into the down
 * projection's rows.  ln2 NULL: it is in the NEXT rows already.  1 when
 * done, 0 when the kernel does not take rows (then nothing was computed). */
static int model_mlp_fused(llama_model *m, const llama_acts *a, int l, const float *ln2, int N)
{
    matmul_wpack *const *pk = m->packs + l * MODEL_LIN_COUNT;
    matmul_wpack *const gu[2] = {pk[MODEL_LIN_GATE], pk[MODEL_LIN_UP]};
    if (!matmul_xrows_begin(m->ws, MATMUL_XROWS_LATER, pk[MODEL_LIN_DOWN], N) ||
        matmul_forward_packed_blocks_ws(ln2, gu, NULL, 2, N, m->ws, model_swiglu_rows_block,
                                        m->ws))
        return 0;
    matmul_xrows_forward(&a->proj, &pk[MODEL_LIN_DOWN], NULL, 1, N, m->ws, MATMUL_XROWS_LATER);
    return 1;
}

static const int model_qkv_mods[3] = {MODEL_LIN_Q, MODEL_LIN_K, MODEL_LIN_V};

/* Start position of sequence b in this call. */
static inline int model_seq_p0(const llama_acts *a, int pos0, int b)
{
    return a->seq_pos0 ? a->seq_pos0[b] : pos0;
}

static int model_forward_check(const llama_model *m, const llama_acts *a, const int32_t *tokens,
                               int B, int T, int pos0, qs_diag *d)
{
    const llama_config *c = &m->cfg;
    if (B < 1 || T < 1 || B > a->B || T > a->T)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "forward of B=%d x T=%d tokens does not fit activations sized B=%d x T=%d",
                        B, T, a->B, a->T);
    if (a->training && (a->seq_pos0 || a->kv_prefix))
        return diag_set(d, QS_EINVAL, NULL, -1, "forward: seq_pos0/kv_prefix are for inference");
    for (int b = 0; b < (a->seq_pos0 ? B : 1); b++) {
        const int p0 = model_seq_p0(a, pos0, b);
        if (p0 < 0 || p0 + T > a->Tcap || (a->training && p0 != 0))
            return diag_set(d, QS_ERANGE, NULL, -1,
                            "positions %d..%d exceed the KV cache of %d positions%s", p0,
                            p0 + T - 1, a->Tcap, a->training ? " (training needs pos0 = 0)" : "");
        if (p0 + T > hfconfig_max_context(c))
            return diag_set(d, QS_ERANGE, NULL, -1,
                            "position %d exceeds the model's context of %d%s", p0 + T - 1,
                            hfconfig_max_context(c), c->sliding_window ? " (sliding_window)" : "");
        if (p0 > 0 && a->kv_shared && !a->kv_prefix)
            return diag_set(d, QS_EINVAL, NULL, -1, "forward: a one-layer KV arena keeps no "
                            "earlier positions: positions from %d need kv_prefix", p0);
        if (a->kv_prefix) {
            const llama_acts *src = a->kv_prefix->src;
            int s = a->kv_prefix->src_seq[b];
            if (s < 0 || s >= src->B || p0 > src->Tcap || src->kv_shared || src->recompute)
                return diag_set(d, QS_EINVAL, NULL, -1, "forward: kv_prefix of sequence %d: "
                                "source sequence %d, %d positions do not fit its arena", b, s, p0);
        }
    }
    if (m->weights_packed && m->precision != m->packs_precision)
        return diag_set(d, QS_EINVAL, NULL, -1, "forward: the weights are packed for %s only",
                        matmul_precision_name(m->packs_precision));
    if (m->packs_substituted && !m->hook.fn)
        return diag_set(d, QS_EINVAL, NULL, -1, "forward: the packs hold a quantization hook's "
                        "weights but the hook is gone (re-create the packs or reload)");
    for (size_t i = 0; i < (size_t)B * T; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return diag_set(d, QS_ERANGE, NULL, -1, "token %zu is %d, expected 0..%d", i,
                            (int)tokens[i], c->vocab_size - 1);
    return 0;
}

/* Copies this call's rotated k, v rows into the cache at each sequence's positions. */
static void model_kv_store(float *kc, float *vc, const float *knew, const float *vnew,
                           const llama_acts *a, int B, int T, int pos0, size_t KD)
{
    const int Tcap = a->Tcap;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t dst = ((size_t)b * Tcap + model_seq_p0(a, pos0, b) + t) * KD;
            size_t src = ((size_t)b * T + t) * KD;
            memcpy(kc + dst, knew + src, KD * sizeof *kc);
            memcpy(vc + dst, vnew + src, KD * sizeof *vc);
        }
}

/* Sequence b's cache positions 0 .. p0(b)-1 of layer l from the prefix source. */
static void model_kv_prefix_copy(const llama_acts *a, float *kc, float *vc, int l, int B,
                                 int pos0, size_t KD)
{
    const llama_acts *src = a->kv_prefix->src;
    const size_t s_layer = (size_t)src->B * src->Tcap * KD;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (B >= 4)
#endif
    for (int b = 0; b < B; b++) {
        size_t n = (size_t)model_seq_p0(a, pos0, b) * KD;
        size_t so = (size_t)l * s_layer + (size_t)a->kv_prefix->src_seq[b] * src->Tcap * KD;
        memcpy(kc + (size_t)b * a->Tcap * KD, src->kcache + so, n * sizeof *kc);
        memcpy(vc + (size_t)b * a->Tcap * KD, src->vcache + so, n * sizeof *vc);
    }
}

/* The embedding rows of tokens read back out of their pack (packed models). */
static void model_embed_packed(const llama_model *m, float *x, const int32_t *tokens, int N)
{
    matmul_wpack *pk = m->embed_pack ? m->embed_pack
                                     : m->packs[m->cfg.n_layers * MODEL_LIN_COUNT];
    const int C = m->cfg.dim;
    if (N >= 64) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
        for (int i = 0; i < N; i++)
            matmul_wpack_row(pk, tokens[i], x + (size_t)i * C);
    } else {
        /* serial: no OpenMP region at all (an if(0) region still costs 1-3 us) */
        for (int i = 0; i < N; i++)
            matmul_wpack_row(pk, tokens[i], x + (size_t)i * C);
    }
}

model_strides model_strides_impl(const llama_model *m, const llama_acts *a)
{
    const llama_config *c = &m->cfg;
    const size_t NA = (size_t)a->B * a->T, tr = a->training && !a->recompute;
    const size_t QD = (size_t)c->n_heads * c->head_dim, KD = (size_t)c->n_kv_heads * c->head_dim;
    model_strides s;
    s.resid = a->training ? NA * c->dim : 0;
    s.C = tr * NA * c->dim;
    s.N = tr * NA;
    s.Q = tr * NA * QD;
    s.F = tr * NA * c->hidden_dim;
    s.KV = a->recompute || a->kv_shared ? 0 : (size_t)a->B * a->Tcap * KD;
    s.att = tr * a->B * c->n_heads * (size_t)a->T * a->Tcap;
    return s;
}

/* Block l on resid[l] (ln1 of layer l is ready: computed with the residual add
 * that made resid[l]).  recompute = 1 (model_block_recompute_impl): ln1 is
 * computed here from resid[l], the hook replays, and the block stops once
 * everything its backward reads is there (before down_proj, whose output
 * resid[l + 1] is kept). */

/* A Linear's quantization hook (fake quant, W8A8) failed: which one, and why
 * (a NaN or Inf in the activation it encodes, most often: an overflowing model). */
static int model_hook_fail(qs_diag *d, int rc, int layer, const char *what)
{
    return diag_set(d, rc, NULL, -1, "quantization hook failed at layers.%d.%s: %s", layer, what,
                    qs_strerror(rc));
}

static int model_block(llama_model *m, llama_acts *a, int l, int B, int T, int pos0,
                       int recompute, qs_diag *d)
{
    const llama_config *c = &m->cfg;
    const int N = B * T, C = c->dim, F = c->hidden_dim, H = c->n_heads, KVH = c->n_kv_heads;
    const int hd = c->head_dim, QD = H * hd, KD = KVH * hd;
    const model_strides st = model_strides_impl(m, a);
    const llama_layer_weights *lw = &m->w.layer[l];
    float *x = a->resid + l * st.resid, *x_next = a->resid + (l + 1) * st.resid;
    float *ln1 = a->ln1 + l * st.C, *q = a->q + l * st.Q, *atty = a->atty + l * st.Q;
    float *kc = a->kcache + l * st.KV, *vc = a->vcache + l * st.KV;
    /* k, v straight into the cache when this call's rows are contiguous there */
    const int kv_direct = B == 1 || (!a->seq_pos0 && pos0 == 0 && T == a->Tcap);
    const int p0_first = model_seq_p0(a, pos0, 0);
    float *knew = kv_direct ? kc + (size_t)p0_first * KD : a->kv_new;
    float *vnew = kv_direct ? vc + (size_t)p0_first * KD : a->kv_new + (size_t)N * KD;
    float *x_mid = a->resid_mid + l * st.C, *ln2 = a->ln2 + l * st.C;
    float *gate = a->gate + l * st.F, *up = a->up + l * st.F, *hb = a->hb + l * st.F;
    int rc;

    if (recompute)
        rmsnorm_forward(ln1, a->ln1_rstd + l * st.N, x, lw->attn_norm, N, C, c->norm_eps);
    /* attention (ln1 = rmsnorm(x) was computed with the residual add that made x) */
    const int qkv_o[3] = {QD, KD, KD};
    float *const qkv_out[3] = {q, knew, vnew};
    const float *const qkv_w[3] = {lw->wq, lw->wk, lw->wv};
    const float *const qkv_b[3] = {lw->bq, lw->bk, lw->bv};
    if (a->ln1_rows) {   /* ln1 is in the q/k/v GEMM's rows already (model_norm_rows) */
        matmul_wpack *const *pk = m->packs + l * MODEL_LIN_COUNT;
        matmul_wpack *const qkv_pk[3] = {pk[MODEL_LIN_Q], pk[MODEL_LIN_K], pk[MODEL_LIN_V]};
        matmul_xrows_forward(qkv_out, qkv_pk, qkv_b, 3, N, m->ws, MATMUL_XROWS_NEXT);
        a->ln1_rows = 0;
    } else if ((rc = model_linear_group(m, a, l, 3, model_qkv_mods, qkv_out, ln1, qkv_w, qkv_b,
                                        N, C, qkv_o, NULL, recompute))) {
        return model_hook_fail(d, rc, l, "self_attn.q/k/v_proj");
    }
    rope_forward(q, a->pos, &m->rope, N, H);
    rope_forward(knew, a->pos, &m->rope, N, KVH);
    if (a->kv_prefix)
        model_kv_prefix_copy(a, kc, vc, l, B, pos0, (size_t)KD);
    if (!kv_direct)
        model_kv_store(kc, vc, knew, vnew, a, B, T, pos0, (size_t)KD);
    if (a->seq_pos0)
        attn_forward_seq(atty, q, kc, vc, B, T, a->seq_pos0, a->Tcap, H, KVH, hd,
                         a->attn_scratch);
    else
        attn_forward(atty, a->training ? a->att + l * st.att : NULL, q, kc, vc, B, T, pos0,
                     a->Tcap, H, KVH, hd, a->attn_scratch);
    if ((rc = model_linear(m, a, l, MODEL_LIN_O, a->proj, atty, lw->wo, lw->bo, N, QD, C,
                           recompute)))
        return model_hook_fail(d, rc, l, "self_attn.o_proj");
    /* MLP: x_mid = x + attention, ln2 = rmsnorm(x_mid) in one pass */
    const int mlp_mods[3] = {MODEL_LIN_GATE, MODEL_LIN_UP, MODEL_LIN_DOWN};
    const int mlp_ok = !recompute && model_rows_ok(m, a, l, 3, mlp_mods, N);
    const int ln2_rows = model_norm_rows(m, mlp_ok, l, MODEL_LIN_GATE, x_mid, ln2,
                                         a->ln2_rstd + l * st.N, x, a->proj, lw->mlp_norm, N);
    if (!mlp_ok || !model_mlp_fused(m, a, l, ln2_rows ? NULL : ln2, N)) {
        const int mlp_mod[2] = {MODEL_LIN_GATE, MODEL_LIN_UP}, mlp_o[2] = {F, F};
        float *const mlp_out[2] = {gate, up};
        const float *const mlp_w[2] = {lw->w_gate, lw->w_up};
        const float *const mlp_b[2] = {NULL, NULL};
        /* hb = silu(gate) * up, computed block by block as gate/up finish */
        model_swiglu_ctx sw = {hb, gate, up, F};
        const matmul_epilogue sw_ep = {model_swiglu_block, &sw};
        if ((rc = model_linear_group(m, a, l, 2, mlp_mod, mlp_out, ln2, mlp_w, mlp_b, N, C,
                                     mlp_o, &sw_ep, recompute)))
            return model_hook_fail(d, rc, l, "mlp.gate/up_proj");
        if (recompute)
            return 0;
        if ((rc = model_linear(m, a, l, MODEL_LIN_DOWN, a->proj, hb, lw->w_down, NULL, N, F, C,
                               0)))
            return model_hook_fail(d, rc, l, "mlp.down_proj");
    }
    /* x_next = x_mid + MLP, normed for the next layer (ln1) or the head (lnf) */
    const int last = l + 1 == c->n_layers;
    if (last)
        rmsnorm_residual_forward(x_next, a->lnf, a->lnf_rstd, x_mid, a->proj, m->w.norm, N, C,
                                 c->norm_eps);
    else
        a->ln1_rows = model_norm_rows(m, model_rows_ok(m, a, l + 1, 3, model_qkv_mods, N), l + 1,
                                      MODEL_LIN_Q, x_next, a->ln1 + (l + 1) * st.C,
                                      a->ln1_rstd + (l + 1) * st.N, x_mid, a->proj,
                                      m->w.layer[l + 1].attn_norm, N);
    return 0;
}

int model_block_recompute_impl(llama_model *m, llama_acts *a, int l, int B, int T, qs_diag *d)
{
    return model_block(m, a, l, B, T, 0, 1, d);
}

void model_lm_head(llama_model *m, float *out, const float *in, int rows)
{
    const llama_config *c = &m->cfg;
    if (m->packs && m->packs_precision == m->precision)
        matmul_forward_packed_ws(out, in, m->packs[c->n_layers * MODEL_LIN_COUNT], NULL, rows,
                                 m->ws);
    else
        matmul_forward_ws(out, in, m->w.lm_head, NULL, rows, c->dim, c->vocab_size, m->precision,
                          m->ws);
}

int model_forward(llama_model *m, llama_acts *a, const int32_t *tokens, const int32_t *targets,
                  int B, int T, int pos0, qs_diag *d)
{
    int rc = model_forward_check(m, a, tokens, B, T, pos0, d);
    if (rc)
        return rc;
    if ((a->logits_tail > 0 || a->logits_rows) && targets)
        return diag_set(d, QS_EINVAL, NULL, -1, "forward: targets need every row's logits "
                        "(logits_tail = %d%s)", a->logits_tail,
                        a->logits_rows ? ", logits_rows set" : "");
    if (a->logits_rows && a->training)
        return diag_set(d, QS_EINVAL, NULL, -1, "forward: logits_rows is for inference only");
    long n_logits = a->logits_tail > 0 && a->logits_tail < T ? (long)B * a->logits_tail
                                                               : (long)B * T;
    if (a->logits_rows)
        n_logits = 0;
    for (int b = 0; a->logits_rows && b < B; b++) {
        int first = a->logits_first ? a->logits_first[b] : 0;
        if (a->logits_rows[b] < 0 || first < 0 || first + a->logits_rows[b] > T)
            return diag_set(d, QS_EINVAL, NULL, -1, "forward: logits_rows[%d] = %d from row %d, "
                            "expected within rows 0..%d", b, a->logits_rows[b], first, T - 1);
        n_logits += a->logits_rows[b];
    }
    const long logits_cap = a->logits_cap ? a->logits_cap : (long)a->B * a->T;
    if (n_logits > logits_cap)
        return diag_set(d, QS_EINVAL, NULL, -1, "forward: %ld logits rows, the arena holds %ld",
                        n_logits, logits_cap);
    const llama_config *c = &m->cfg;
    const int N = B * T, C = c->dim, V = c->vocab_size;

    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            a->pos[b * T + t] = model_seq_p0(a, pos0, b) + t;
    if (m->w.wte)
        embed_forward(a->resid, tokens, m->w.wte, N, C);
    else
        model_embed_packed(m, a->resid, tokens, N);
    a->ln1_rows = 0;
    if (c->n_layers > 0)
        a->ln1_rows = model_norm_rows(m, model_rows_ok(m, a, 0, 3, model_qkv_mods, N), 0,
                                      MODEL_LIN_Q, NULL, a->ln1, a->ln1_rstd, a->resid, NULL,
                                      m->w.layer[0].attn_norm, N);
    else
        rmsnorm_forward(a->lnf, a->lnf_rstd, a->resid, m->w.norm, N, C, c->norm_eps);

    for (int l = 0; l < c->n_layers; l++)
        if ((rc = model_block(m, a, l, B, T, pos0, 0, d)))
            return rc;
    if (a->logits_rows) {
        /* rows b*T + [0, rows_b) of every sequence, packed: move them to the front of
         * lnf (destinations never pass their sources), then ONE lm_head product */
        int rows = 0;
        for (int b = 0; b < B; b++) {
            const int first = a->logits_first ? a->logits_first[b] : 0;
            for (int t = first; t < first + a->logits_rows[b]; t++, rows++)
                if ((size_t)rows != (size_t)b * T + t)
                    memmove(a->lnf + (size_t)rows * C, a->lnf + ((size_t)b * T + t) * C,
                            (size_t)C * sizeof *a->lnf);
        }
        if (rows > 0)
            model_lm_head(m, a->logits, a->lnf, rows);
        a->loss = -1.0;
        return 0;
    }
    /* rows b*T + [T-k, T) of every sequence -> logits rows b*k + [0, k) */
    const int k = a->logits_tail > 0 && a->logits_tail < T ? a->logits_tail : T;
    for (int b = 0; b < (k == T ? 1 : B); b++) {
        const int rows = k == T ? N : k;
        const float *in = a->lnf + ((size_t)b * T + (size_t)(T - k)) * C;
        model_lm_head(m, a->logits + (size_t)b * k * V, in, rows);
    }
    xent_stats st = {a->xent_max, a->xent_sum};
    a->xent_kept = targets && a->xent_max;
    a->loss = targets ? xent_forward(a->losses, a->xent_kept ? &st : NULL, a->logits, targets, N, V)
                      : -1.0;
    return 0;
}
