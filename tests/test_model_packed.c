/* test_model_packed.c: inference loading (model_load_packed).  On every fixture
 * architecture (tied/untied, biases, F32/BF16/F16 storage, sharded) and both
 * precisions, the packed model's logits are the bits of model_load_dir's model
 * in the same precision; the weights live only in packs exactly when the packs
 * hold the stored values (fp32 always, bf16 for BF16 storage without
 * subnormals), else the load falls back to the fp32 block + packs; NaN in a
 * BF16 weight is the same error as model_load_dir's; hif8's weight
 * substitutes packed once equal the per-forward substitution. */
#include <math.h>
#include <string.h>

#include "qs/cpu.h"
#include "qs/evalquant.h"
#include "qs/fileio.h"
#include "qs/hfconfig.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/safetensors.h"
#include "test.h"

enum { PK_B = 2, PK_T = 7 };

/* logits [PK_B * PK_T, V] of a fixed token batch (prompt), then of one decode step */
static int pk_logits(llama_model *m, float *out, qs_diag *d)
{
    llama_acts a;
    const int V = m->cfg.vocab_size;
    int32_t tok[PK_B * PK_T + PK_B];
    for (int i = 0; i < PK_B * PK_T + PK_B; i++)
        tok[i] = (int32_t)((i * 7 + 3) % V);
    int rc = model_acts_init(&a, &m->cfg, PK_B, PK_T, PK_T + 1, 0, d);
    if (!rc)
        rc = model_forward(m, &a, tok, NULL, PK_B, PK_T, 0, d);
    if (!rc) {
        memcpy(out, a.logits, (size_t)PK_B * PK_T * V * sizeof *out);
        rc = model_forward(m, &a, tok + PK_B * PK_T, NULL, PK_B, 1, PK_T, d);
    }
    if (!rc)
        memcpy(out + (size_t)PK_B * PK_T * V, a.logits, (size_t)PK_B * V * sizeof *out);
    model_acts_free(&a);
    return rc;
}

/* model_load_dir's model in `precision` (with packs: what ppl/generate ran on). */
static int pk_reference(llama_model *m, const char *dir, int precision, qs_diag *d)
{
    int rc = model_load_dir(m, dir, d);
    m->precision = precision;
    return rc ? rc : model_packs_create(m, d);
}

/* packed == reference bits; returns weights_packed, or -1 */
static int pk_compare(const char *dir, int precision)
{
    llama_model ref, pk;
    qs_diag d = {0};
    if (pk_reference(&ref, dir, precision, &d) || model_load_packed(&pk, dir, precision, &d)) {
        TEST_FAIL_AT("%s: %s", dir, d.msg);
        return -1;
    }
    size_t n = (size_t)(PK_B * PK_T + PK_B) * ref.cfg.vocab_size;
    float *a = qs_malloc(n * 4), *b = qs_malloc(n * 4);
    int packed = pk.weights_packed;
    if (!a || !b || pk_logits(&ref, a, &d) || pk_logits(&pk, b, &d)) {
        TEST_FAIL_AT("%s: forward: %s", dir, d.msg);
        packed = -1;
    } else if (memcmp(a, b, n * 4)) {
        TEST_FAIL_AT("%s in %s: packed logits differ", dir,
                     precision == MATMUL_BF16 ? "bf16" : "fp32");
        packed = -1;
    } else if (packed && (pk.n_params >= ref.n_params || pk.w.wte || pk.w.layer[0].wq ||
                          !pk.w.layer[0].attn_norm || pk.precision != precision)) {
        TEST_FAIL_AT("%s: packed model still holds fp32 matrices", dir);
        packed = -1;
    }
    qs_free(a);
    qs_free(b);
    model_free(&ref);
    model_free(&pk);
    return packed;
}

TEST(model_packed, logits_equal_model_load_dir_on_every_fixture)
{
    static const struct { const char *dir; int bf16_packed; } fx[] = {
        {"data/fixtures/llama3_bias_tied_bf16", 1}, {"data/fixtures/llama_gqa_f32", 0},
        {"data/fixtures/mistral_linear_f16", 0},    {"data/fixtures/pangu_bias_sharded_f32", 0},
        {"data/fixtures/qwen2_bias_tied_f32", 0},
    };
    const int fp32_packed = matmul_frozen_available(MATMUL_FP32);
    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
        ASSERT_EQ_INT(pk_compare(fx[i].dir, MATMUL_FP32), fp32_packed);
        ASSERT_EQ_INT(pk_compare(fx[i].dir, MATMUL_BF16), fx[i].bf16_packed);
    }
}

/* An untied model stored in BF16 (embedding pack of its own), one with a
 * subnormal weight (fallback), one with NaN (the loader's error). */
TEST(model_packed, bf16_untied_subnormal_and_nan_checkpoints)
{
    llama_model m;
    qs_diag d = {0}, d2 = {0};
    char dir[600];
    ASSERT_OK(model_load_dir(&m, "data/fixtures/llama_gqa_f32", &d), &d);
    snprintf(dir, sizeof dir, "%s/packed_bf16_untied", test_tmp_dir());
    ASSERT_OK(model_save_hf_dir(&m, "data/fixtures/llama_gqa_f32", dir, SAFETENSORS_BF16, &d), &d);
    ASSERT_EQ_INT(pk_compare(dir, MATMUL_BF16), 1);
    llama_model pk;
    ASSERT_OK(model_load_packed(&pk, dir, MATMUL_BF16, &d), &d);
    ASSERT_TRUE(pk.embed_pack != NULL && pk.w.lm_head == NULL);
    model_free(&pk);
    ASSERT_EQ_INT(pk_compare(dir, MATMUL_FP32), matmul_frozen_available(MATMUL_FP32));

    m.w.layer[1].w_up[5] = 1e-39f;   /* a bf16 subnormal: a bf16 pack would flush it */
    snprintf(dir, sizeof dir, "%s/packed_bf16_subnormal", test_tmp_dir());
    ASSERT_OK(model_save_hf_dir(&m, "data/fixtures/llama_gqa_f32", dir, SAFETENSORS_BF16, &d), &d);
    ASSERT_EQ_INT(pk_compare(dir, MATMUL_BF16), 0);

    m.w.layer[1].w_up[5] = NAN;
    snprintf(dir, sizeof dir, "%s/packed_bf16_nan", test_tmp_dir());
    ASSERT_OK(model_save_hf_dir(&m, "data/fixtures/llama_gqa_f32", dir, SAFETENSORS_BF16, &d), &d);
    llama_model bad;
    ASSERT_EQ_INT(model_load_packed(&bad, dir, MATMUL_BF16, &d), QS_ENAN);
    ASSERT_EQ_INT(model_load_dir(&bad, dir, &d2), QS_ENAN);
    ASSERT_EQ_STR(d.msg, d2.msg);
    ASSERT_TRUE(strstr(d.msg, "model.layers.1.mlp.up_proj.weight") != NULL);
    model_free(&m);
}

/* The scan of a bf16 tensor for NaN / Inf / subnormals runs on all threads
 * past 2^20 elements: a 20000 x 64 embedding (1.28 M) with the odd value in
 * its last element, where a split of the work would put it in the last
 * thread's share. */
TEST(model_packed, bf16_scan_of_a_large_tensor_finds_its_last_element)
{
    char dir[600], path[700], js[600];
    qs_diag d = {0};
    snprintf(dir, sizeof dir, "%s/packed_bf16_large", test_tmp_dir());
    int n = snprintf(js, sizeof js,
                     "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
                     "\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":1,"
                     "\"num_attention_heads\":4,\"num_key_value_heads\":4,\"vocab_size\":20000,"
                     "\"max_position_embeddings\":64,\"rms_norm_eps\":1e-5,"
                     "\"tie_word_embeddings\":true}");
    snprintf(path, sizeof path, "%s/config.json", dir);
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    ASSERT_OK(fileio_write_atomic(path, js, (size_t)n, &d), &d);
    llama_config c;
    llama_model m, pk;
    ASSERT_OK(hfconfig_load(&c, dir, &d), &d);
    ASSERT_OK(model_init(&m, &c, &d), &d);
    model_params_randomize(&m, 7, 0.02f);
    size_t last = (size_t)c.vocab_size * c.dim - 1;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    for (int k = 0; k < 3; k++) {   /* plain, subnormal, NaN */
        m.w.wte[last] = k == 0 ? 0.01f : k == 1 ? 1e-39f : NAN;
        ASSERT_OK(model_save_safetensors(&m, path, SAFETENSORS_BF16, &d), &d);
        int rc = model_load_packed(&pk, dir, MATMUL_BF16, &d);
        if (k == 2) {
            ASSERT_EQ_INT(rc, QS_ENAN);
            ASSERT_TRUE(strstr(d.msg, "element 1279999 is NaN") != NULL);
            continue;
        }
        ASSERT_OK(rc, &d);
        ASSERT_EQ_INT(pk.weights_packed, k == 0);   /* a subnormal: the exact fallback */
        model_free(&pk);
    }
    model_free(&m);
}

/* hif8 on a packed bf16 model: weights fake-quantized once into the packs give
 * the bits of quantizing them on every forward (model_load_dir, no packs). */
TEST(model_packed, hif8_substitutes_packed_once_equal_per_forward)
{
    const char *dir = "data/fixtures/llama3_bias_tied_bf16";
    llama_model ref, pk;
    evalquant *qr = NULL, *qp = NULL;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&ref, dir, &d), &d);
    ref.precision = MATMUL_BF16;
    ASSERT_OK(model_load_packed(&pk, dir, MATMUL_BF16, &d), &d);
    ASSERT_EQ_INT(pk.weights_packed, 1);
    ASSERT_OK(evalquant_create(&qr, &ref, "*", &d), &d);
    ASSERT_OK(evalquant_create(&qp, &pk, "*", &d), &d);
    ASSERT_TRUE(evalquant_count(qp) > 0 && pk.packs_substituted && !ref.packs_substituted);
    size_t n = (size_t)(PK_B * PK_T + PK_B) * ref.cfg.vocab_size;
    float *a = qs_malloc(n * 4), *b = qs_malloc(n * 4);
    ASSERT_TRUE(a && b);
    ASSERT_OK(pk_logits(&ref, a, &d), &d);
    ASSERT_OK(pk_logits(&pk, b, &d), &d);
    ASSERT_TRUE(memcmp(a, b, n * 4) == 0);
    /* the plain weights are gone from the packs: no forward without the hook */
    evalquant_destroy(qp);
    ASSERT_EQ_INT(pk_logits(&pk, b, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "hook") != NULL);
    evalquant_destroy(qr);
    qs_free(a);
    qs_free(b);
    model_free(&ref);
    model_free(&pk);
}

/* hif8-fp32 (eval in the export's arithmetic on fp32 matmuls): the other
 * parameters rounded to bf16 inside fp32 frozen packs (read back, re-packed)
 * give the bits of rounding the fp32 block before packing; untied and tied. */
TEST(model_packed, bf16_rounding_in_fp32_packs_equals_rounding_the_block)
{
    static const char *const dirs[] = {"data/fixtures/llama_gqa_f32",
                                       "data/fixtures/qwen2_bias_tied_f32"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        llama_model ref, pk;
        evalquant *qr = NULL, *qp = NULL;
        qs_diag d = {0};
        ASSERT_OK(model_load_dir(&ref, dirs[i], &d), &d);
        ASSERT_OK(evalquant_create(&qr, &ref, "*.mlp.*", &d), &d);
        ASSERT_OK(model_params_round_bf16(&ref, &d), &d);
        ASSERT_OK(model_packs_create(&ref, &d), &d);
        ASSERT_OK(model_load_packed(&pk, dirs[i], MATMUL_FP32, &d), &d);
        ASSERT_EQ_INT(pk.weights_packed, matmul_frozen_available(MATMUL_FP32));
        ASSERT_OK(evalquant_create(&qp, &pk, "*.mlp.*", &d), &d);
        size_t n = (size_t)(PK_B * PK_T + PK_B) * ref.cfg.vocab_size;
        float *a = qs_malloc(n * 4), *b = qs_malloc(n * 4), *c = qs_malloc(n * 4);
        ASSERT_TRUE(a && b && c);
        ASSERT_OK(pk_logits(&pk, c, &d), &d);   /* not rounded yet */
        ASSERT_OK(model_params_round_bf16(&pk, &d), &d);
        ASSERT_OK(pk_logits(&ref, a, &d), &d);
        ASSERT_OK(pk_logits(&pk, b, &d), &d);
        ASSERT_TRUE(memcmp(a, b, n * 4) == 0);
        ASSERT_TRUE(memcmp(b, c, n * 4) != 0);   /* F32 weights: the rounding moved them */
        evalquant_destroy(qr);
        evalquant_destroy(qp);
        qs_free(a);
        qs_free(b);
        qs_free(c);
        model_free(&ref);
        model_free(&pk);
    }
}
