/* test_model_load.c: checkpoint-level validation (every expected tensor
 * present with its shape, NaN refused naming the tensor) and the HF writer
 * round trip the trainer relies on. */
#include "qs/fileio.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/safetensors.h"
#include "test.h"

#define LOAD_FIXTURE "data/fixtures/llama_gqa_f32"

/* Makes DIR with the fixture's config.json and a model.safetensors written by
 * the writer from m's params, with tensor `victim` dropped / reshaped / poisoned. */
enum { BREAK_NONE, BREAK_DROP, BREAK_SHAPE, BREAK_NAN };
static int write_broken(const llama_model *m, const char *dir, const char *victim, int how)
{
    qs_diag d = {0};
    char path[600];
    char *cfg = NULL;
    size_t n = 0;
    if (fileio_mkdir_p(dir, &d) || fileio_read_all(LOAD_FIXTURE "/config.json", &cfg, &n, &d))
        return -1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = fileio_write_atomic(path, cfg, n, &d);
    qs_free(cfg);
    safetensors_entry *e = qs_calloc((size_t)m->n_tensors, sizeof *e);
    float *poisoned = NULL;
    int k = 0;
    for (int i = 0; !rc && i < m->n_tensors; i++) {
        const model_tensor *t = &m->tensors[i];
        int hit = !strcmp(t->name, victim);
        if (hit && how == BREAK_DROP)
            continue;
        e[k] = (safetensors_entry){t->name, m->params + t->offset_elems, t->ndim,
                                   {t->shape[0], t->shape[1]}};
        if (hit && how == BREAK_SHAPE) {
            e[k].shape[1] -= 1;
        } else if (hit && how == BREAK_NAN) {
            poisoned = qs_malloc(t->n_elems * sizeof *poisoned);
            memcpy(poisoned, e[k].data, t->n_elems * sizeof *poisoned);
            poisoned[5] = NAN;
            e[k].data = poisoned;
        }
        k++;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!rc)
        rc = safetensors_write(path, e, k, SAFETENSORS_F32, NULL, &d);
    qs_free(poisoned);
    qs_free(e);
    return rc;
}

static int load_error(const char *dir, qs_diag *d)
{
    llama_model m;
    int rc = model_load_dir(&m, dir, d);
    if (!rc)
        model_free(&m);
    return rc;
}

TEST(model_load, missing_shape_and_nan_tensors_are_named)
{
    llama_model m;
    qs_diag d = {0};
    char dir[512];
    ASSERT_OK(model_load_dir(&m, LOAD_FIXTURE, &d), &d);
    const char *victim = "model.layers.1.mlp.up_proj.weight";

    snprintf(dir, sizeof dir, "%s/ck_drop", test_tmp_dir());
    ASSERT_EQ_INT(write_broken(&m, dir, victim, BREAK_DROP), 0);
    ASSERT_EQ_INT(load_error(dir, &d), QS_ENOTFOUND);
    ASSERT_EQ_STR(d.msg, "tensor 'model.layers.1.mlp.up_proj.weight' [48, 32] is missing from "
                         "the checkpoint");

    snprintf(dir, sizeof dir, "%s/ck_shape", test_tmp_dir());
    ASSERT_EQ_INT(write_broken(&m, dir, victim, BREAK_SHAPE), 0);
    ASSERT_EQ_INT(load_error(dir, &d), QS_ESHAPE);
    ASSERT_EQ_STR(d.msg, "tensor 'model.layers.1.mlp.up_proj.weight': expected [48, 32], found "
                         "[48, 31]");
    ASSERT_TRUE(strstr(d.path, "ck_shape/model.safetensors") != NULL);

    snprintf(dir, sizeof dir, "%s/ck_nan", test_tmp_dir());
    ASSERT_EQ_INT(write_broken(&m, dir, victim, BREAK_NAN), 0);
    ASSERT_EQ_INT(load_error(dir, &d), QS_ENAN);
    ASSERT_EQ_STR(d.msg, "tensor 'model.layers.1.mlp.up_proj.weight': element 5 is NaN");
    model_free(&m);
}

TEST(model_load, saved_checkpoint_reloads_bit_identical)
{
    llama_model m, m2;
    qs_diag d = {0};
    char dir[512], path[600];
    ASSERT_OK(model_load_dir(&m, LOAD_FIXTURE, &d), &d);
    snprintf(dir, sizeof dir, "%s/ck_rt", test_tmp_dir());
    ASSERT_EQ_INT(write_broken(&m, dir, "", BREAK_NONE), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ASSERT_OK(model_save_safetensors(&m, path, SAFETENSORS_F32, &d), &d);
    ASSERT_OK(model_load_dir(&m2, dir, &d), &d);
    ASSERT_EQ_INT(m2.n_params, m.n_params);
    ASSERT_TRUE(memcmp(m.params, m2.params, m.n_params * sizeof *m.params) == 0);
    ASSERT_EQ_STR(m2.dtypes, "F32");
    model_free(&m2);
    /* BF16 storage reloads as the bf16-rounded weights */
    ASSERT_OK(model_save_safetensors(&m, path, SAFETENSORS_BF16, &d), &d);
    ASSERT_OK(model_load_dir(&m2, dir, &d), &d);
    ASSERT_EQ_STR(m2.dtypes, "BF16");
    float w = m.w.layer[0].wq[3], w2 = m2.w.layer[0].wq[3];
    float want = safetensors_bf16_to_f32(safetensors_f32_to_bf16(w));
    ASSERT_TRUE(memcmp(&w2, &want, 4) == 0);
    model_free(&m2);
    model_free(&m);
}

TEST(model_load, tied_checkpoint_ignores_lm_head_copy_and_views_share_storage)
{
    llama_model m;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, "data/fixtures/qwen2_bias_tied_f32", &d), &d);
    ASSERT_TRUE(m.w.lm_head == m.w.wte);
    ASSERT_TRUE(m.w.layer[1].bq != NULL && m.w.layer[1].bo == NULL);
    /* grads laid over another block get the same offsets */
    float *g = qs_calloc(m.n_params, sizeof *g);
    llama_weights gw = {0};
    gw.layer = qs_calloc((size_t)m.cfg.n_layers, sizeof *gw.layer);
    ASSERT_OK(model_weights_point(&gw, &m, g), NULL);
    ASSERT_EQ_INT(gw.layer[1].w_down - g, m.w.layer[1].w_down - m.params);
    qs_free(gw.layer);
    qs_free(g);
    model_free(&m);
}

TEST(model_load, memory_estimate_matches_allocation)
{
    llama_model m;
    llama_acts a;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, LOAD_FIXTURE, &d), &d);
    model_memory mm;
    model_memory_estimate(&m.cfg, 2, 16, 32, &mm);
    ASSERT_EQ_INT(mm.params_bytes, m.n_params * 4);
    size_t before = qs_mem_live_bytes();
    ASSERT_OK(model_acts_init(&a, &m.cfg, 2, 16, 16, 1, &d), &d);
    ASSERT_EQ_INT(a.n_elems * 4, mm.acts_train_bytes);
    ASSERT_TRUE(qs_mem_live_bytes() - before >= mm.acts_train_bytes);
    model_acts_free(&a);
    ASSERT_EQ_INT(mm.train_bytes, mm.params_bytes * 4 + mm.acts_train_bytes + mm.rope_bytes);
    model_free(&m);
}

TEST(model_load, saved_hf_dir_reloads_bit_identical)
{
    llama_model m, m2;
    qs_diag d = {0};
    char dir[512];
    ASSERT_OK(model_load_dir(&m, "data/fixtures/pangu_bias_sharded_f32", &d), &d);
    snprintf(dir, sizeof dir, "%s/saved_pangu", test_tmp_dir());
    ASSERT_OK(model_save_hf_dir(&m, "data/fixtures/pangu_bias_sharded_f32", dir, SAFETENSORS_F32,
                                &d), &d);
    ASSERT_OK(model_load_dir(&m2, dir, &d), &d);
    ASSERT_EQ_INT(m2.cfg.arch, LLAMA_ARCH_PANGU);
    ASSERT_TRUE(memcmp(m.params, m2.params, m.n_params * sizeof *m.params) == 0);
    ASSERT_EQ_INT(model_save_hf_dir(&m, "/nonexistent", dir, SAFETENSORS_F32, &d), QS_ENOTFOUND);
    model_free(&m2);
    model_free(&m);
}
