/* test_backward.c: whole-model gradients and 10 AdamW steps against the torch
 * references in data/fixtures/<name>/grad.safetensors (tools/gen_fixtures.py,
 * float64).  Tolerances: gradients max relative error 1e-3 per tensor (fp32
 * math vs float64), losses 1e-4 absolute. */
#include <stdlib.h>

#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_train.h"
#include "qs/optim.h"
#include "qs/safetensors.h"
#include "test.h"

#define BWD_TOL_GRAD_REL 1e-3
#define BWD_TOL_LOSS 1e-4

typedef struct bwd_case {
    llama_model m;
    llama_acts a;
    llama_grad_acts g;
    llama_weights gw;
    float *grads;
    int32_t *tokens, *targets;
    int B, T;
    safetensors_file ref;
    char ref_path[320];
} bwd_case;

static int bwd_tensor_i32(const safetensors_file *f, const char *name, int32_t **out, int *B,
                          int *T, const char *path)
{
    const safetensors_tensor *t = safetensors_find(f, name);
    qs_diag d = {0};
    if (!t || t->ndim != 2)
        return -1;
    *B = (int)t->shape[0];
    *T = (int)t->shape[1];
    *out = qs_malloc(t->n_elems * sizeof **out);
    return *out ? safetensors_tensor_to_i32(t, *out, path, &d) : -1;
}

static int bwd_case_open(bwd_case *c, const char *name)
{
    memset(c, 0, sizeof *c);
    char dir[128];
    qs_diag d = {0};
    snprintf(dir, sizeof dir, "data/fixtures/%s", name);
    snprintf(c->ref_path, sizeof c->ref_path, "%s/grad.safetensors", dir);
    if (model_load_dir(&c->m, dir, &d) || safetensors_open(&c->ref, c->ref_path, &d)) {
        fprintf(stderr, "    %s: %s\n", d.path, d.msg);
        return -1;
    }
    char tok_path[300];
    snprintf(tok_path, sizeof tok_path, "%s/ref.safetensors", dir);
    safetensors_file tf;
    int B2, T2;
    if (safetensors_open(&tf, tok_path, &d))
        return -1;
    int rc = bwd_tensor_i32(&tf, "tokens", &c->tokens, &c->B, &c->T, tok_path);
    safetensors_close(&tf);
    if (rc || bwd_tensor_i32(&c->ref, "targets", &c->targets, &B2, &T2, c->ref_path) ||
        B2 != c->B || T2 != c->T)
        return -1;
    c->grads = qs_calloc(c->m.n_params, sizeof *c->grads);
    c->gw.layer = qs_calloc((size_t)c->m.cfg.n_layers, sizeof *c->gw.layer);
    if (!c->grads || !c->gw.layer || model_weights_point(&c->gw, &c->m, c->grads))
        return -1;
    if (model_acts_init(&c->a, &c->m.cfg, c->B, c->T, c->T, 1, &d) ||
        model_grad_acts_init(&c->g, &c->m.cfg, c->B, c->T, &d))
        return -1;
    return 0;
}

static void bwd_case_close(bwd_case *c)
{
    model_acts_free(&c->a);
    model_grad_acts_free(&c->g);
    qs_free(c->grads);
    qs_free(c->gw.layer);
    qs_free(c->tokens);
    qs_free(c->targets);
    safetensors_close(&c->ref);
    model_free(&c->m);
}

/* forward + backward into zeroed grads; returns the loss or NaN */
static double bwd_step(bwd_case *c)
{
    qs_diag d = {0};
    memset(c->grads, 0, c->m.n_params * sizeof *c->grads);
    if (model_forward(&c->m, &c->a, c->tokens, c->targets, c->B, c->T, 0, &d))
        return NAN;
    double loss = c->a.loss;
    if (model_backward(&c->m, &c->a, &c->g, &c->gw, c->tokens, c->targets, c->B, c->T, 1.0f,
                       NULL, &d))
        return NAN;
    return loss;
}

static void check_gradients(const char *name)
{
    bwd_case c;
    ASSERT_EQ_INT(bwd_case_open(&c, name), 0);
    double loss = bwd_step(&c);
    float want_loss;
    qs_diag d = {0};
    const safetensors_tensor *lt = safetensors_find(&c.ref, "loss");
    ASSERT_TRUE(lt && !safetensors_tensor_to_f32(lt, &want_loss, c.ref_path, &d));
    ASSERT_NEAR(loss, want_loss, BWD_TOL_LOSS);
    int checked = 0;
    for (int i = 0; i < c.m.n_tensors; i++) {
        const model_tensor *e = &c.m.tensors[i];
        char key[128];
        snprintf(key, sizeof key, "grad.%s", e->name);
        const safetensors_tensor *t = safetensors_find(&c.ref, key);
        ASSERT_TRUE(t != NULL && t->n_elems == e->n_elems);
        float *want = qs_malloc(e->n_elems * sizeof *want);
        ASSERT_TRUE(want && !safetensors_tensor_to_f32(t, want, c.ref_path, &d));
        double max_err = 0, max_ref = 1e-12;
        for (size_t j = 0; j < e->n_elems; j++) {
            double got = c.grads[e->offset_elems + j];
            max_err = fmax(max_err, fabs(got - want[j]));
            max_ref = fmax(max_ref, fabs(want[j]));
        }
        qs_free(want);
        if (!(max_err / max_ref <= BWD_TOL_GRAD_REL))
            TEST_FAIL_AT("%s: %s max rel err %.3g", name, e->name, max_err / max_ref);
        checked++;
    }
    ASSERT_EQ_INT(checked, c.m.n_tensors);
    bwd_case_close(&c);
}

static void check_adamw(const char *name)
{
    bwd_case c;
    ASSERT_EQ_INT(bwd_case_open(&c, name), 0);
    const safetensors_tensor *lt = safetensors_find(&c.ref, "adamw.loss");
    float want[10];
    qs_diag d = {0};
    ASSERT_TRUE(lt && lt->n_elems == 10 && !safetensors_tensor_to_f32(lt, want, c.ref_path, &d));
    adamw_state s;
    ASSERT_EQ_INT(adamw_init(&s, c.m.n_params), 0);
    const adamw_hparams h = {0.9, 0.95, 1e-8, 0.1}; /* TRAIN_HP in gen_fixtures.py */
    for (int step = 0; step < 10; step++) {
        double loss = bwd_step(&c);
        if (!(fabs(loss - want[step]) <= BWD_TOL_LOSS))
            TEST_FAIL_AT("%s: step %d loss %.7f vs torch %.7f", name, step, loss, want[step]);
        double norm = optim_grad_norm(c.grads, c.m.n_params);
        optim_grad_clip(c.grads, c.m.n_params, norm, 1.0);
        adamw_step(&s, c.m.params, c.grads, 1e-3, &h);
    }
    adamw_free(&s);
    bwd_case_close(&c);
}

TEST(backward, llama_gqa_untied_gradients_match_torch) { check_gradients("llama_gqa_f32"); }
TEST(backward, llama3_bias_tied_gradients_match_torch) { check_gradients("llama3_bias_tied_bf16"); }
TEST(backward, mistral_gradients_match_torch) { check_gradients("mistral_linear_f16"); }
TEST(backward, qwen2_qkv_bias_tied_gradients_match_torch) { check_gradients("qwen2_bias_tied_f32"); }
TEST(backward, pangu_qkvo_bias_gradients_match_torch) { check_gradients("pangu_bias_sharded_f32"); }
TEST(backward, adamw_ten_steps_losses_match_torch_untied) { check_adamw("llama_gqa_f32"); }
TEST(backward, adamw_ten_steps_losses_match_torch_tied_bias) { check_adamw("qwen2_bias_tied_f32"); }
TEST(backward, adamw_ten_steps_losses_match_torch_qkvo_bias) { check_adamw("pangu_bias_sharded_f32"); }
