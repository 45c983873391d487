/* test_recompute.c: per-block activation recomputation (MODEL_ACTS_RECOMPUTE)
 * gives the same bits as keeping every layer's activations: loss and every
 * gradient, on the fixtures' architectures (GQA, tied, q/k/v/o biases) and the
 * demo model, fp32 and bf16, with weight packs, without, and with only the
 * workspace (model_ws_create: the trainer's recompute mode), under a stateful
 * substituting hook whose replay callback must stand in for it; a stateless
 * hook without replay is simply called again.  The recompute arena is smaller. */
#include <stdlib.h>

#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_train.h"
#include "test.h"

enum { RC_B = 2, RC_T = 12, RC_MAX_LIN = 64 };

/* A stand-in for the QAT hook: x and w rounded to a grid whose step depends on
 * how many times fn has been called (so calling fn again in a recomputation
 * would change the bits), per-linear copies kept for the backward. */
typedef struct rc_hook {
    float *xq[RC_MAX_LIN], *wq[RC_MAX_LIN];
    float step_of[RC_MAX_LIN];
    long fn_calls, replay_calls;
    int stateless;   /* 1: a fixed grid (replay not needed) */
} rc_hook;

static void rc_round(const float *x, float *y, size_t n, float step)
{
    for (size_t i = 0; i < n; i++)
        y[i] = nearbyintf(x[i] / step) * step;
}

static int rc_apply(rc_hook *h, int i, const float *x, float *xq, size_t nx, const float *w,
                    float *wq, size_t nw)
{
    if (!h->xq[i]) {
        h->xq[i] = qs_malloc(nx * sizeof(float));
        h->wq[i] = qs_malloc(nw * sizeof(float));
        if (!h->xq[i] || !h->wq[i])
            return QS_ENOMEM;
    }
    rc_round(x, h->xq[i], nx, h->step_of[i]);
    rc_round(w, h->wq[i], nw, h->step_of[i] / 16.0f);
    memcpy(xq, h->xq[i], nx * sizeof *xq);
    memcpy(wq, h->wq[i], nw * sizeof *wq);
    return 1;
}

static int rc_fn(void *self, int layer, int module, const float *x, float *xq, int N, int IN,
                 const float *w, float *wq, int O)
{
    rc_hook *h = self;
    int i = layer * MODEL_LIN_COUNT + module;
    h->step_of[i] = h->stateless ? 1.0f / 64 : 1.0f / (float)(32 + h->fn_calls % 7);
    h->fn_calls++;
    return rc_apply(h, i, x, xq, (size_t)N * IN, w, wq, (size_t)O * IN);
}

static int rc_replay(void *self, int layer, int module, const float *x, float *xq, int N, int IN,
                     const float *w, float *wq, int O)
{
    rc_hook *h = self;
    h->replay_calls++;
    return rc_apply(h, layer * MODEL_LIN_COUNT + module, x, xq, (size_t)N * IN, w, wq,
                    (size_t)O * IN);
}

/* the q/k/v group and down_proj of every block: o_proj and gate/up stay unhooked */
static int rc_planned(void *self, int layer, int module)
{
    (void)self;
    (void)layer;
    return module != MODEL_LIN_O && module != MODEL_LIN_GATE && module != MODEL_LIN_UP;
}

static int rc_operands(void *self, int layer, int module, const float **x_used,
                       const float **w_used, struct matmul_wpack **w_pack)
{
    rc_hook *h = self;
    int i = layer * MODEL_LIN_COUNT + module;
    (void)w_pack;
    if (h->xq[i]) {
        *x_used = h->xq[i];
        *w_used = h->wq[i];
    }
    return 0;
}

static void rc_hook_free(rc_hook *h)
{
    for (int i = 0; i < RC_MAX_LIN; i++) {
        qs_free(h->xq[i]);
        qs_free(h->wq[i]);
    }
    memset(h, 0, sizeof *h);
}

typedef struct rc_result {
    double loss;
    float *grads;
    long fn_calls, replay_calls;
} rc_result;

/* One forward + backward of a fixed batch with arena mode `mode`. */
static int rc_run(const char *dir, int precision, int packed, int hook_kind, int mode,
                  rc_result *out)
{
    qs_diag d = {0};
    llama_model m;
    llama_acts a;
    llama_grad_acts g;
    llama_weights gw = {0};
    rc_hook h = {0};
    memset(out, 0, sizeof *out);
    if (model_load_dir(&m, dir, &d))
        return -1;
    int L = m.cfg.n_layers, V = m.cfg.vocab_size, rc = -1;
    m.precision = precision;
    out->grads = qs_calloc(m.n_params, sizeof(float));
    gw.layer = qs_calloc((size_t)L, sizeof *gw.layer);
    if (L * MODEL_LIN_COUNT > RC_MAX_LIN || !out->grads || !gw.layer ||
        model_weights_point(&gw, &m, out->grads) ||
        model_acts_init(&a, &m.cfg, RC_B, RC_T, RC_T, mode, &d)) {
        qs_free(gw.layer);
        model_free(&m);
        return -1;
    }
    if (model_grad_acts_init(&g, &m.cfg, RC_B, RC_T, &d) ||
        (packed == 1 && model_packs_create(&m, &d)) || (packed == 2 && model_ws_create(&m, &d)))
        goto done;
    model_linear_bwd_hook bwd = {&h, rc_operands, NULL};
    if (hook_kind) {   /* 1: stateful with replay, 2: stateless without */
        h.stateless = hook_kind == 2;
        m.hook = (model_linear_hook){0};
        m.hook.self = &h;
        m.hook.fn = rc_fn;
        m.hook.planned = rc_planned;
        m.hook.replay = hook_kind == 1 ? rc_replay : NULL;
    }
    int32_t tok[RC_B * RC_T], tgt[RC_B * RC_T];
    for (int i = 0; i < RC_B * RC_T; i++) {
        tok[i] = (int32_t)((i * 37 + 5) % V);
        tgt[i] = i % 5 == 4 ? -1 : (int32_t)((i * 53 + 1) % V);
    }
    if (model_forward(&m, &a, tok, tgt, RC_B, RC_T, 0, &d) ||
        model_backward(&m, &a, &g, &gw, tok, tgt, RC_B, RC_T, 0.5f, hook_kind ? &bwd : NULL, &d))
        goto done;
    out->loss = a.loss;
    out->fn_calls = h.fn_calls;
    out->replay_calls = h.replay_calls;
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "    %s: %s\n", dir, d.msg);
    rc_hook_free(&h);
    model_grad_acts_free(&g);
    model_acts_free(&a);
    qs_free(gw.layer);
    model_free(&m);
    return rc;
}

static void rc_compare(const char *dir, int precision, int packed, int hook_kind)
{
    rc_result keep, rec;
    ASSERT_EQ_INT(rc_run(dir, precision, packed, hook_kind, MODEL_ACTS_TRAIN, &keep), 0);
    ASSERT_EQ_INT(rc_run(dir, precision, packed, hook_kind, MODEL_ACTS_RECOMPUTE, &rec), 0);
    llama_config c;
    qs_diag d = {0};
    ASSERT_OK(hfconfig_load(&c, dir, &d), &d);
    size_t n = 0;
    model_tensor *tab;
    int n_tab;
    ASSERT_EQ_INT(model_table_create(&c, &tab, &n_tab), 0);
    for (int i = 0; i < n_tab; i++)
        n += tab[i].n_elems;
    qs_free(tab);
    ASSERT_TRUE(memcmp(&keep.loss, &rec.loss, sizeof keep.loss) == 0);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&keep.grads[i], &rec.grads[i], sizeof(float)) != 0;
    if (differ)
        TEST_FAIL_AT("%s precision %d packed %d hook %d: %zu of %zu gradients differ", dir,
                     precision, packed, hook_kind, differ, n);
    if (hook_kind == 1) {   /* fn once per hooked linear, replay for every block but the last */
        ASSERT_EQ_INT(keep.fn_calls, 4L * c.n_layers);
        ASSERT_EQ_INT(rec.fn_calls, 4L * c.n_layers);
        ASSERT_EQ_INT(keep.replay_calls, 0);
        ASSERT_EQ_INT(rec.replay_calls, 3L * (c.n_layers - 1));   /* q, k, v: down is not rerun */
    }
    if (hook_kind == 2)   /* no replay callback: fn again for q/k/v of the recomputed blocks */
        ASSERT_EQ_INT(rec.fn_calls, 4L * c.n_layers + 3L * (c.n_layers - 1));
    qs_free(keep.grads);
    qs_free(rec.grads);
}

static const char *const rc_dirs[] = {"data/fixtures/llama3_bias_tied_bf16",
                                      "data/fixtures/pangu_bias_sharded_f32",
                                      "data/fixtures/llama_gqa_f32", "data/demo/model"};

TEST(recompute, fp32_gradients_are_the_same_bits_as_keeping_every_layer)
{
    for (size_t i = 0; i < sizeof rc_dirs / sizeof *rc_dirs; i++)
        for (int packed = 0; packed < 3; packed++)   /* none, packs, workspace alone */
            rc_compare(rc_dirs[i], MATMUL_FP32, packed, 0);
}

TEST(recompute, bf16_gradients_are_the_same_bits_as_keeping_every_layer)
{
    for (size_t i = 0; i < sizeof rc_dirs / sizeof *rc_dirs; i++)
        for (int packed = 0; packed < 3; packed++)
            rc_compare(rc_dirs[i], MATMUL_BF16, packed, 0);
}

TEST(recompute, substituting_hook_is_replayed_not_called_again)
{
    for (size_t i = 0; i < sizeof rc_dirs / sizeof *rc_dirs; i++)
        for (int prec = 0; prec < 2; prec++)
            rc_compare(rc_dirs[i], prec ? MATMUL_BF16 : MATMUL_FP32, 2 - prec, 1);
}

TEST(recompute, stateless_hook_without_replay_is_called_again_with_the_same_bits)
{
    rc_compare("data/demo/model", MATMUL_BF16, 1, 2);
    rc_compare("data/fixtures/pangu_bias_sharded_f32", MATMUL_FP32, 0, 2);
}

TEST(recompute, arena_keeps_one_block_and_the_residual_stream)
{
    llama_config c;
    qs_diag d = {0};
    ASSERT_OK(hfconfig_load(&c, "data/demo/model", &d), &d);
    size_t keep = model_acts_elems(&c, 4, 64, 64, MODEL_ACTS_TRAIN);
    size_t rec = model_acts_elems(&c, 4, 64, 64, MODEL_ACTS_RECOMPUTE);
    size_t infer = model_acts_elems(&c, 4, 64, 64, MODEL_ACTS_INFER);
    size_t N = 4 * 64, L = (size_t)c.n_layers;
    /* recompute = inference's one-block layout + the residual stream of every
     * block + one block's attention probabilities (KV: one block, not L) + the
     * cross-entropy's row statistics (a float and a double per row) */
    size_t kv = 2 * N * (size_t)c.n_kv_heads * c.head_dim;
    size_t att = N * (size_t)c.n_heads * 64;
    ASSERT_TRUE(rec < keep / 3);
    ASSERT_EQ_INT((long)rec, (long)(infer + L * N * c.dim - (L - 1) * kv + att + 3 * N));
    llama_acts a;
    ASSERT_EQ_INT(model_acts_init(&a, &c, 1, 8, 8, 3, &d), QS_EINVAL);
    ASSERT_EQ_INT(model_acts_init(&a, &c, 1, 8, 16, MODEL_ACTS_RECOMPUTE, &d), QS_EINVAL);
    ASSERT_OK(model_acts_init(&a, &c, 1, 8, 8, MODEL_ACTS_RECOMPUTE, &d), &d);
    ASSERT_TRUE(a.training && a.recompute && a.n_elems == model_acts_elems(&c, 1, 8, 8, 2));
    model_acts_free(&a);
}
