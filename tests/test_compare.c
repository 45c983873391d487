/* test_compare.c: model_compare_compute (qatscope compare) against float64
 * torch (data/fixtures/compare, tools/gen_compare_fixture.py), on identical
 * models, and the command end to end. */
#include <jansson.h>
#include <stdlib.h>

#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_infer.h"
#include "test.h"

#define CMP_FIXTURE "data/fixtures/compare"

/* Tolerances against float64 torch.  The fixture models' fp32 logits are within
 * LOGIT_TOL = 1e-4 of float64 (the fp32 logits tolerance of test_model.c).  A
 * log-softmax moves by at most 2 LOGIT_TOL when every logit moves by at most
 * LOGIT_TOL, so nll and dlogp (differences of two such) within 4 LOGIT_TOL; KL =
 * sum p_ref (lp_ref - lp) moves by at most 2 LOGIT_TOL through lp and by
 * sum |dp_ref| |lp_ref - lp - KL| <= 2 (e^(2 LOGIT_TOL) - 1) (max|lp_ref - lp| +
 * KL) through p_ref: with |lp_ref - lp| < 10 on this fixture, under 5e-3.
 * A top-1 decision is only checked where torch's top-2 gap exceeds 4 LOGIT_TOL. */
#define LOGIT_TOL 1e-4
#define NLL_TOL (4 * LOGIT_TOL)
#define KL_TOL 5e-3

static double cmp_num(json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

TEST(compare, matches_float64_torch_per_token_and_summary)
{
    qs_diag d = {0};
    json_t *exp;
    ASSERT_OK(qs_json_load_file(CMP_FIXTURE "/expected.json", QS_JSON_OBJECT, &exp, &d), &d);
    json_t *jids = json_object_get(exp, "ids"), *toks = json_object_get(exp, "tokens");
    json_t *sum = json_object_get(exp, "summary");
    size_t n_ids = json_array_size(jids);
    ASSERT_TRUE(n_ids > 2 && n_ids < 1000 && json_array_size(toks) == n_ids - 1);
    int32_t ids[1000];
    for (size_t i = 0; i < n_ids; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
    llama_model m, ref;
    ASSERT_OK(model_load_dir(&m, CMP_FIXTURE "/model", &d), &d);
    ASSERT_OK(model_load_dir(&ref, CMP_FIXTURE "/ref", &d), &d);
    model_compare_row rows[1000];
    model_compare_result r;
    ASSERT_OK(model_compare_compute(&m, &ref, ids, n_ids, (int)cmp_num(exp, "window"),
                                    (int)cmp_num(exp, "stride"), rows, &r, &d), &d);
    ASSERT_EQ_INT(r.n_scored, n_ids - 1);
    ASSERT_EQ_INT(r.n_windows, (long long)cmp_num(sum, "n_windows"));
    for (size_t i = 0; i < n_ids - 1; i++) {
        json_t *t = json_array_get(toks, i);
        ASSERT_EQ_INT(cmp_num(t, "pos"), i);
        ASSERT_NEAR(rows[i].kl, cmp_num(t, "kl"), KL_TOL);
        ASSERT_NEAR(rows[i].dlogp, cmp_num(t, "dlogp"), NLL_TOL + KL_TOL);
        ASSERT_NEAR(rows[i].nll, cmp_num(t, "nll"), NLL_TOL);
        ASSERT_NEAR(rows[i].nll_ref, cmp_num(t, "nll_ref"), NLL_TOL);
        if (cmp_num(t, "margin") > 4 * LOGIT_TOL)
            ASSERT_EQ_INT(rows[i].top, cmp_num(t, "top"));
        if (cmp_num(t, "margin_ref") > 4 * LOGIT_TOL)
            ASSERT_EQ_INT(rows[i].top_ref, cmp_num(t, "top_ref"));
    }
    ASSERT_NEAR(r.kl_mean, cmp_num(sum, "kl_mean"), KL_TOL);
    ASSERT_NEAR(r.kl_median, cmp_num(sum, "kl_median"), KL_TOL);
    ASSERT_NEAR(r.kl_p99, cmp_num(sum, "kl_p99"), KL_TOL);
    ASSERT_NEAR(r.kl_max, cmp_num(sum, "kl_max"), KL_TOL);
    ASSERT_NEAR(r.top1_agree, cmp_num(sum, "top1_agree"), 1e-12);
    ASSERT_NEAR(r.dlogp_mean, cmp_num(sum, "dlogp_mean"), NLL_TOL + KL_TOL);
    ASSERT_NEAR(r.nll, cmp_num(sum, "nll"), NLL_TOL);
    ASSERT_NEAR(r.nll_ref, cmp_num(sum, "nll_ref"), NLL_TOL);
    /* the fixture is not trivial: the models disagree somewhere */
    ASSERT_TRUE(r.kl_mean > 0.01 && r.top1_agree < 1.0);
    /* compare's nll is ppl's: the same windows, the same bits */
    model_ppl_result p;
    ASSERT_OK(model_ppl_compute(&m, ids, n_ids, (int)cmp_num(exp, "window"),
                                (int)cmp_num(exp, "stride"), &p, &d), &d);
    ASSERT_TRUE(p.nll_sum / (double)p.n_scored == r.nll);
    model_free(&m);
    model_free(&ref);
    json_decref(exp);
}

TEST(compare, identical_models_give_zero_kl_and_full_agreement)
{
    qs_diag d = {0};
    llama_model a, b;
    ASSERT_OK(model_load_dir(&a, CMP_FIXTURE "/ref", &d), &d);
    ASSERT_OK(model_load_dir(&b, CMP_FIXTURE "/ref", &d), &d);
    int32_t ids[50];
    for (int i = 0; i < 50; i++)
        ids[i] = (i * 11 + 5) % 64;
    model_compare_row rows[49];
    model_compare_result r;
    ASSERT_OK(model_compare_compute(&a, &b, ids, 50, 20, 7, rows, &r, &d), &d);
    ASSERT_EQ_INT(r.n_scored, 49);
    for (int i = 0; i < 49; i++) {
        ASSERT_TRUE(rows[i].kl == 0.0 && rows[i].dlogp == 0.0);
        ASSERT_EQ_INT(rows[i].top, rows[i].top_ref);
    }
    ASSERT_TRUE(r.kl_mean == 0.0 && r.kl_max == 0.0 && r.kl_p99 == 0.0);
    ASSERT_TRUE(r.top1_agree == 1.0 && r.nll == r.nll_ref);
    /* one model against itself */
    ASSERT_OK(model_compare_compute(&a, &a, ids, 50, 50, 50, NULL, &r, &d), &d);
    ASSERT_TRUE(r.kl_max == 0.0 && r.top1_agree == 1.0);
    model_free(&a);
    model_free(&b);
}

TEST(compare, row_stats_refuse_non_finite_logits_and_rank_percentiles)
{
    float x[4] = {0.0f, 1.0f, 2.0f, 3.0f}, y[4] = {3.0f, 2.0f, 1.0f, 0.0f};
    model_compare_row r;
    ASSERT_OK(model_compare_row_stats(x, y, 4, 2, &r), NULL);
    ASSERT_EQ_INT(r.top, 3);
    ASSERT_EQ_INT(r.top_ref, 0);
    /* p_ref = softmax(y): KL(p_ref || softmax(x)) by hand in double */
    double s = 0, kl = 0;
    for (int v = 0; v < 4; v++)
        s += exp(y[v]);
    for (int v = 0; v < 4; v++)
        kl += exp(y[v]) / s * ((y[v] - log(s)) - (x[v] - log(s)));
    ASSERT_NEAR(r.kl, kl, 1e-12);
    ASSERT_NEAR(r.dlogp, 3.0, 1e-12);
    x[1] = NAN;
    ASSERT_EQ_INT(model_compare_row_stats(x, y, 4, 2, &r), QS_ENAN);
    x[1] = -INFINITY;
    ASSERT_EQ_INT(model_compare_row_stats(x, y, 4, 2, &r), QS_ENAN);
}

TEST(compare, mismatched_vocabularies_are_refused)
{
    qs_diag d = {0};
    llama_model a, b;
    ASSERT_OK(model_load_dir(&a, CMP_FIXTURE "/ref", &d), &d);
    ASSERT_OK(model_load_dir(&b, "data/fixtures/llama3_bias_tied_bf16", &d), &d);
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    model_compare_result r;
    ASSERT_EQ_INT(model_compare_compute(&a, &b, ids, 8, 8, 4, NULL, &r, &d), QS_ESHAPE);
    ASSERT_TRUE(strstr(d.msg, "64") && strstr(d.msg, "48"));
    model_free(&a);
    model_free(&b);
}

TEST(cli_compare, stories260K_against_itself_and_its_hif8_form)
{
    char dir[512], args[2048], out[8192], err[1024], txt[600];
    if (!test_shared_path(dir, sizeof dir, "models/stories260K"))
        SKIP("../shared/models/stories260K not present");
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    qs_diag d = {0};
    snprintf(txt, sizeof txt, "%s/compare.txt", test_tmp_dir());
    const char *story = "Once upon a time, there was a little girl named Lily. She loved to play "
                        "outside in the park. One day, she saw a big, red ball. She ran to the "
                        "ball and kicked it. The ball went far away.";
    ASSERT_OK(fileio_write_atomic(txt, story, strlen(story), &d), &d);
    snprintf(args, sizeof args, "compare --model %s --reference %s --text %s --json", dir, dir, txt);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    json_t *o;
    ASSERT_OK(qs_json_load_text(out, strlen(out), "stdout", 1, QS_JSON_OBJECT, &o, &d), &d);
    ASSERT_TRUE(cmp_num(o, "kl_max") == 0.0 && cmp_num(o, "top1_agree") == 1.0);
    ASSERT_TRUE(cmp_num(o, "ppl") == cmp_num(o, "ppl_reference"));
    ASSERT_TRUE(cmp_num(o, "scored") > 20);
    json_decref(o);
    /* the fake-quantized model moves away from its bf16 form */
    snprintf(args, sizeof args,
             "compare --model %s --reference %s --text %s --json --precision hif8 "
             "--quant-modules '*.mlp.*' --reference-precision bf16", dir, dir, txt);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    ASSERT_OK(qs_json_load_text(out, strlen(out), "stdout", 1, QS_JSON_OBJECT, &o, &d), &d);
    ASSERT_TRUE(cmp_num(o, "kl_mean") > 0.0 && cmp_num(o, "kl_max") >= cmp_num(o, "kl_p99"));
    ASSERT_TRUE(cmp_num(o, "kl_p99") >= cmp_num(o, "kl_median"));
    ASSERT_TRUE(strstr(json_string_value(json_object_get(o, "model_precision")), "W8A8"));
    json_decref(o);
}

TEST(cli_compare, bad_inputs_exit_2_with_one_line)
{
    char args[1024], out[4096], err[1024];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"compare --model " CMP_FIXTURE "/ref --reference " CMP_FIXTURE "/ref", "one of --text"},
        {"compare --model a --reference b --text t --shards s", "exclude each other"},
        {"compare --model a --reference b --text t --precision fp8", "--precision: expected fp32"},
        {"compare --model a --reference b --text t --reference-precision x",
         "--reference-precision: expected"},
        {"compare --model a --reference b --text t --quant-modules '*'", "only with a hif8"},
        {"compare --model a --reference b --shards s --bos", "--bos: only with --text"},
        {"compare --model a --reference b --shards s --split test", "--split: expected val"},
        {"compare --model /nonexistent --reference b --text t", "/nonexistent"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(args, sizeof args, "%s", cases[i].args);
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
        if (!strstr(err, cases[i].want))
            fprintf(stderr, "    case %zu: %s\n", i, err);
        ASSERT_TRUE(strstr(err, cases[i].want) != NULL);
        ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1);   /* one line */
        ASSERT_EQ_STR(out, "");
    }
}

TEST(cli_compare, shards_split_is_scored_with_max_tokens)
{
    char args[2048], out[8192], err[1024], dir[600];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    snprintf(dir, sizeof dir, "%s/compare_shards", test_tmp_dir());
    snprintf(args, sizeof args,
             "tokenize --model data/demo/model --input data/demo/train.txt --out %s "
             "--val-fraction 0.2", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args,
             "compare --model data/demo/model --reference data/demo/model --shards %s "
             "--max-tokens 300 --window 64 --json --reference-precision bf16", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    qs_diag d = {0};
    json_t *o;
    ASSERT_OK(qs_json_load_text(out, strlen(out), "stdout", 1, QS_JSON_OBJECT, &o, &d), &d);
    ASSERT_EQ_INT(cmp_num(o, "tokens"), 300);
    ASSERT_EQ_INT(cmp_num(o, "scored"), 299);
    ASSERT_EQ_INT(cmp_num(o, "stride"), 32);
    ASSERT_EQ_STR(json_string_value(json_object_get(o, "split")), "val");
    /* fp32 against bf16 of the same weights: close, not equal */
    ASSERT_TRUE(cmp_num(o, "kl_mean") > 0.0 && cmp_num(o, "kl_mean") < 0.01);
    ASSERT_TRUE(cmp_num(o, "top1_agree") > 0.9);
    json_decref(o);
}
