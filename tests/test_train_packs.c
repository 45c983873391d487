/* test_train_packs.c: training through persistent weight packs (model_packs_*
 * + the shared matmul workspace) gives the same bits as the unpacked matmul
 * calls, step after step (packs refreshed after each AdamW update), in fp32
 * and bf16; the packs' memory stays within the estimate. */
#include <stdlib.h>

#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
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

static int tp_step(tp_run *r, long step)
{
    qs_diag d = {0};
    int32_t tok[TP_B * TP_T], tgt[TP_B * TP_T];
    for (int i = 0; i < TP_B * TP_T; i++) {
        tok[i] = (int32_t)((i * 37 + step * 11) % r->m.cfg.vocab_size);
        tgt[i] = (int32_t)((i * 53 + step * 7 + 1) % r->m.cfg.vocab_size);
    }
    memset(r->grads, 0, r->m.n_params * sizeof *r->grads);
    if (model_forward(&r->m, &r->a, tok, tgt, TP_B, TP_T, 0, &d) ||
        model_backward(&r->m, &r->a, &r->g, &r->gw, tok, tgt, TP_B, TP_T, 1.0f, NULL, &d))
        return -1;
    adamw_hparams hp = {0.9, 0.95, 1e-8, 0.01};
    adamw_step(&r->opt, r->m.params, r->grads, 1e-2, &hp);
    model_packs_refresh(&r->m);
    return 0;
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
