/* test_evalquant.c: eval --precision hif8: HiF8 W8A8 fake-quant of planned
 * Linears at evaluation time, against an independent per-linear reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "qs/evalquant.h"
#include "qs/hif8.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_infer.h"
#include "qs/quant.h"
#include "test.h"

#define EQ_FIXTURE "data/fixtures/llama_gqa_f32"

/* exact amax of n values -> scale at margin 0 -> the HiF8 values of src * scale
 * (code domain: decode(encode_sat(x * scale)), element by element) */
static int eq_ref_codes(const float *src, float *dst, size_t n, float *scale)
{
    float amax = 0;
    for (size_t i = 0; i < n; i++)
        amax = fabsf(src[i]) > amax ? fabsf(src[i]) : amax;
    if (quant_scale_from_amax(amax, 0, scale))
        return QS_ERANGE;
    for (size_t i = 0; i < n; i++)
        dst[i] = hif8_decode(hif8_encode(src[i] * *scale, HIF8_SAT));
    return 0;
}

/* reference: every MLP linear, current scaling (inputs per token, weights per
 * tensor), in the code domain with one factor 1 / (s_x s_w) per output row */
static float eq_ref_rows[4096];
static const float *eq_ref_row_scale(void *self)
{
    (void)self;
    return eq_ref_rows;
}

static int eq_ref_hook(void *self, int layer, int module, const float *x, float *xq, int N, int IN,
                       const float *w, float *wq, int O)
{
    (void)self;
    (void)layer;
    if (module != MODEL_LIN_GATE && module != MODEL_LIN_UP && module != MODEL_LIN_DOWN)
        return 0;
    float sw, sx;
    if (N > 4096 || eq_ref_codes(w, wq, (size_t)O * IN, &sw))
        return QS_ERANGE;
    for (int r = 0; r < N; r++) {
        if (eq_ref_codes(x + (size_t)r * IN, xq + (size_t)r * IN, (size_t)IN, &sx))
            return QS_ERANGE;
        eq_ref_rows[r] = (float)(1.0 / ((double)sx * (double)sw));
    }
    return 2;
}

/* log-likelihoods of 2 continuations of 3 tokens after a 4-token context */
static void eq_score(llama_model *m, double ll[2], qs_diag *d)
{
    static const int32_t ctx[4] = {1, 7, 3, 9}, c0[3] = {4, 2, 8}, c1[3] = {5, 5, 6};
    const int32_t *conts[2] = {c0, c1};
    size_t lens[2] = {3, 3};
    lm_request req = {ctx, 4, 2, conts, lens};
    lm_result res = {ll, NULL};
    model_lm *lm = NULL;
    ll[0] = ll[1] = NAN;
    if (model_lm_create(&lm, m, 16, d))
        return;
    lm_scorer s = model_lm_scorer(lm);
    s.score(s.self, &req, &res, 1, d);
    model_lm_destroy(lm);
}

TEST(evalquant, hif8_logliks_differ_from_fp32_and_equal_a_code_domain_reference)
{
    llama_model m;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, EQ_FIXTURE, &d), &d);
    double fp[2], q[2], ref[2];
    eq_score(&m, fp, &d);
    evalquant *eq = NULL;
    ASSERT_OK(evalquant_create(&eq, &m, "*.mlp.*", &d), &d);
    ASSERT_EQ_INT(evalquant_count(eq), 3 * m.cfg.n_layers);
    ASSERT_TRUE(!strcmp(evalquant_module(eq, 0), "layers.0.mlp.gate_proj"));
    eq_score(&m, q, &d);
    evalquant_destroy(eq);
    ASSERT_TRUE(m.hook.fn == NULL);
    m.hook.fn = eq_ref_hook;
    m.hook.row_scale = eq_ref_row_scale;
    eq_score(&m, ref, &d);
    m.hook.fn = NULL;
    for (int c = 0; c < 2; c++) {
        ASSERT_TRUE(isfinite(q[c]) && isfinite(fp[c]));
        ASSERT_TRUE(fabs(q[c] - fp[c]) > 1e-6);          /* quantization happened */
        /* but close: measured 4% and 11% on this 2-block random fixture (3-bit mantissa) */
        ASSERT_TRUE(fabs(q[c] - fp[c]) < 0.2 * fabs(fp[c]));
        ASSERT_TRUE(q[c] == ref[c]);   /* the documented arithmetic, bit for bit */
    }
    model_free(&m);
}

TEST(evalquant, default_plan_on_a_two_block_model_is_an_error)
{
    llama_model m;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, EQ_FIXTURE, &d), &d);
    evalquant *eq = NULL;
    ASSERT_EQ_INT(evalquant_create(&eq, &m, NULL, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "no Linear selected") != NULL);
    ASSERT_TRUE(strstr(d.msg, "--quant-modules, e.g. '*.mlp.*'") != NULL);   /* the way out */
    ASSERT_EQ_INT(evalquant_create(&eq, &m, "layers.9.mlp.*", &d), QS_EINVAL);
    ASSERT_TRUE(eq == NULL && m.hook.fn == NULL);
    model_free(&m);
}

TEST(evalquant, cli_rejects_bad_precision_and_quant_modules_without_hif8)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        SKIP("QS_BIN not set (run through make test)");
    char cmd[1024];
    static const char *bad[2] = {"--precision fp16", "--precision bf16 --quant-modules '*.mlp.*'"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s eval --model %s --tasks arc_easy --data-dir tests/data/tasks/data "
                 "--output %s/eq.json %s 2> %s/eq.err", bin, EQ_FIXTURE, test_tmp_dir(), bad[i],
                 test_tmp_dir());
        ASSERT_EQ_INT(WEXITSTATUS(system(cmd)), 2);
    }
}
