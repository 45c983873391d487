/* test_train_packs.c: training through persistent weight packs (model_packs_*
 * + the shared matmul workspace) gives the same bits as the unpacked matmul
 * calls, step after step (packs refreshed after each AdamW update), in fp32
 * and bf16; the packs' memory stays within the estimate; a substituted
 * (hooked) weight gives the same bits through the backward hook's pack. */
#include <math.h>
#include <stdlib.h>

#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_train.h"
#include "qs/optim.h"
#include "test.h"

enum { TP_B = 2, TP_T = 16, TP_STEPS = 3 };

typedef struct tp_run {
    llama_model m;
    llama_acts a;
    llama_grad_acts g;
    llama_weights gw;
    float *grads;
    adamw_state opt;
} tp_run;

static int tp_open(tp_run *r, int precision, int packed)
{
    qs_diag d = {0};
    memset(r, 0, sizeof *r);
    if (model_load_dir(&r->m, "data/demo/model", &d))
        return -1;
    r->m.precision = precision;
    if (model_acts_init(&r->a, &r->m.cfg, TP_B, TP_T, TP_T, 1, &d) ||
        model_grad_acts_init(&r->g, &r->m.cfg, TP_B, TP_T, &d))
        return -1;
    r->grads = qs_calloc(r->m.n_params, sizeof *r->grads);
    r->gw.layer = qs_calloc((size_t)r->m.cfg.n_layers, sizeof *r->gw.layer);
    if (!r->grads || !r->gw.layer || adamw_init(&r->opt, r->m.n_params) ||
        model_weights_point(&r->gw, &r->m, r->grads))
        return -1;
    return packed ? model_packs_create(&r->m, &d) : 0;
}

static void tp_close(tp_run *r)
{
    model_acts_free(&r->a);
    model_grad_acts_free(&r->g);
    adamw_free(&r->opt);
    qs_free(r->grads);
    qs_free(r->gw.layer);
    model_free(&r->m);
}

static int tp_step_hooked(tp_run *r, long step, const model_linear_bwd_hook *bwd)
{
    qs_diag d = {0};
    int32_t tok[TP_B * TP_T], tgt[TP_B * TP_T];
    for (int i = 0; i < TP_B * TP_T; i++) {
        tok[i] = (int32_t)((i * 37 + step * 11) % r->m.cfg.vocab_size);
        tgt[i] = (int32_t)((i * 53 + step * 7 + 1) % r->m.cfg.vocab_size);
    }
    memset(r->grads, 0, r->m.n_params * sizeof *r->grads);
    if (model_forward(&r->m, &r->a, tok, tgt, TP_B, TP_T, 0, &d) ||
        model_backward(&r->m, &r->a, &r->g, &r->gw, tok, tgt, TP_B, TP_T, 1.0f, bwd, &d))
        return -1;
    adamw_hparams hp = {0.9, 0.95, 1e-8, 0.01};
    adamw_step(&r->opt, r->m.params, r->grads, 1e-2, &hp);
    model_packs_refresh(&r->m);
    return 0;
}

static int tp_step(tp_run *r, long step)
{
    return tp_step_hooked(r, step, NULL);
}

static void tp_compare(int precision)
{
    tp_run plain, packed;
    ASSERT_EQ_INT(tp_open(&plain, precision, 0), 0);
    ASSERT_EQ_INT(tp_open(&packed, precision, 1), 0);
    ASSERT_TRUE(packed.m.packs != NULL && packed.m.ws != NULL);
    for (long s = 0; s < TP_STEPS; s++) {
        ASSERT_EQ_INT(tp_step(&plain, s), 0);
        ASSERT_EQ_INT(tp_step(&packed, s), 0);
        ASSERT_EQ_INT(memcmp(plain.grads, packed.grads, plain.m.n_params * sizeof(float)), 0);
        ASSERT_EQ_INT(memcmp(plain.m.params, packed.m.params, plain.m.n_params * sizeof(float)), 0);
        ASSERT_EQ_INT(memcmp(&plain.a.loss, &packed.a.loss, sizeof plain.a.loss), 0);
    }
    /* after training steps every pack holds both forms: measured == estimate
     * for the packs, the workspace within its estimate */
    size_t used = matmul_ws_bytes(packed.m.ws);
    int n = packed.m.cfg.n_layers * MODEL_LIN_COUNT + 1;
    used += (size_t)n * sizeof *packed.m.packs;
    for (int i = 0; i < n; i++)
        used += matmul_wpack_bytes(packed.m.packs[i]);
    size_t est = model_packs_bytes_estimate(&packed.m.cfg, precision, TP_B * TP_T, 0);
    ASSERT_TRUE(used <= est);
    ASSERT_TRUE((double)used >= 0.9 * (double)est);
    tp_close(&plain);
    tp_close(&packed);
}

TEST(train_packs, fp32_packed_steps_give_the_same_weights_as_unpacked)
{
    tp_compare(MATMUL_FP32);
}

TEST(train_packs, bf16_packed_steps_give_the_same_weights_as_unpacked)
{
    tp_compare(MATMUL_BF16);
}

/* A stand-in for the QAT hook: every down_proj uses a rounded copy of its
 * weight (kept per layer for the backward), optionally with a persistent pack
 * of that copy handed to the backward. */
typedef struct tp_subst {
    float *xq, *wq;          /* [L][N * IN], [L][O * IN] */
    matmul_wpack **pk;       /* [L] or NULL: the backward packs wq on the fly */
} tp_subst;

static int tp_subst_fwd(void *self, int layer, int module, const float *x, float *xq, int N,
                        int IN, const float *w, float *wq, int O)
{
    tp_subst *s = self;
    if (module != MODEL_LIN_DOWN)
        return 0;
    size_t nx = (size_t)N * IN, nw = (size_t)O * IN;
    float *sx = s->xq + (size_t)layer * nx, *sw = s->wq + (size_t)layer * nw;
    memcpy(sx, x, nx * sizeof *sx);
    for (size_t i = 0; i < nw; i++)
        sw[i] = roundf(w[i] * 64.0f) / 64.0f;
    memcpy(xq, sx, nx * sizeof *xq);
    memcpy(wq, sw, nw * sizeof *wq);
    if (s->pk)
        matmul_wpack_refresh(s->pk[layer]);
    return 1;
}

static int tp_subst_n[2];         /* N * IN, O * IN of a down_proj */

static int tp_subst_ops(void *self, int layer, int module, const float **x_used,
                        const float **w_used, struct matmul_wpack **w_pack)
{
    tp_subst *s = self;
    if (module != MODEL_LIN_DOWN)
        return 0;
    *x_used = s->xq + (size_t)layer * tp_subst_n[0];
    *w_used = s->wq + (size_t)layer * tp_subst_n[1];
    if (s->pk)
        *w_pack = s->pk[layer];
    return 0;
}

static void tp_subst_run(tp_run *r, tp_subst *s, int precision, int with_pack)
{
    const llama_config *c = &r->m.cfg;
    ASSERT_EQ_INT(tp_open(r, precision, 1), 0);
    tp_subst_n[0] = TP_B * TP_T * c->hidden_dim;
    tp_subst_n[1] = c->dim * c->hidden_dim;
    s->xq = qs_malloc((size_t)c->n_layers * tp_subst_n[0] * sizeof(float));
    s->wq = qs_malloc((size_t)c->n_layers * tp_subst_n[1] * sizeof(float));
    s->pk = with_pack ? qs_calloc((size_t)c->n_layers, sizeof *s->pk) : NULL;
    ASSERT_TRUE(s->xq && s->wq && (!with_pack || s->pk));
    for (int l = 0; with_pack && l < c->n_layers; l++) {
        s->pk[l] = matmul_wpack_create(s->wq + (size_t)l * tp_subst_n[1], c->hidden_dim, c->dim,
                                       precision);
        ASSERT_TRUE(s->pk[l] != NULL);
    }
    r->m.hook.self = s;
    r->m.hook.fn = tp_subst_fwd;
}

static void tp_subst_free(tp_run *r, tp_subst *s)
{
    for (int l = 0; s->pk && l < r->m.cfg.n_layers; l++)
        matmul_wpack_destroy(s->pk[l]);
    qs_free(s->pk);
    qs_free(s->xq);
    qs_free(s->wq);
    tp_close(r);
}

static void tp_subst_compare(int precision)
{
    tp_run a, b;
    tp_subst sa, sb;
    tp_subst_run(&a, &sa, precision, 0);
    tp_subst_run(&b, &sb, precision, 1);
    model_linear_bwd_hook ha = {&sa, tp_subst_ops, NULL}, hb = {&sb, tp_subst_ops, NULL};
    for (long st = 0; st < TP_STEPS; st++) {
        ASSERT_EQ_INT(tp_step_hooked(&a, st, &ha), 0);
        ASSERT_EQ_INT(tp_step_hooked(&b, st, &hb), 0);
        ASSERT_EQ_INT(memcmp(a.grads, b.grads, a.m.n_params * sizeof(float)), 0);
        ASSERT_EQ_INT(memcmp(a.m.params, b.m.params, a.m.n_params * sizeof(float)), 0);
    }
    /* the backward really went through the hook's packs (built on first use) */
    for (int l = 0; l < b.m.cfg.n_layers; l++)
        ASSERT_TRUE(matmul_wpack_bytes(sb.pk[l]) > 0);
    tp_subst_free(&a, &sa);
    tp_subst_free(&b, &sb);
}

TEST(train_packs, substituted_weight_through_the_hook_pack_gives_the_same_bits_fp32)
{
    tp_subst_compare(MATMUL_FP32);
}

TEST(train_packs, substituted_weight_through_the_hook_pack_gives_the_same_bits_bf16)
{
    tp_subst_compare(MATMUL_BF16);
}
