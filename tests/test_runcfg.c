/* test_runcfg.c: run config JSON, unknown keys, typed --set overrides. */
#include "qs/mem.h"
#include "qs/runcfg.h"
#include "test.h"

TEST(runcfg, defaults_follow_the_method)
{
    runcfg c;
    runcfg_defaults(&c);
    ASSERT_NEAR(c.lr, 1e-5, 0);
    ASSERT_EQ_INT(c.bf16_warmup_steps, 500);
    ASSERT_EQ_STR(c.amax_estimator, "max-window:64");
    ASSERT_EQ_STR(c.quant_modules, "default");
    ASSERT_EQ_STR(c.ste, "pass");
    ASSERT_EQ_INT(c.qat, 1);
}

TEST(runcfg, json_sets_typed_values)
{
    runcfg c;
    qs_diag d = {0};
    const char *js = "{\"model\":\"m\",\"train_data\":\"t\",\"out_dir\":\"o\",\"lr\":3e-4,"
                     "\"steps\":20,\"qat\":false,\"quant_modules\":[\"default\",\"*.o_proj\"],"
                     "\"precision\":\"bf16\"}";
    ASSERT_OK(runcfg_load_text(&c, js, "run.json", &d), &d);
    ASSERT_NEAR(c.lr, 3e-4, 0);
    ASSERT_EQ_INT(c.steps, 20);
    ASSERT_EQ_INT(c.qat, 0);
    ASSERT_EQ_STR(c.quant_modules, "default,*.o_proj");
    ASSERT_EQ_STR(c.precision, "bf16");
    ASSERT_OK(runcfg_validate(&c, &d), &d);
}

TEST(runcfg, unknown_key_is_an_error_naming_it)
{
    runcfg c;
    qs_diag d = {0};
    ASSERT_EQ_INT(runcfg_load_text(&c, "{\"learning_rate\":1}", "run.json", &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "'learning_rate'") != NULL);
    ASSERT_EQ_STR(d.path, "run.json");
}

TEST(runcfg, wrong_json_type_names_expected_and_found)
{
    runcfg c;
    qs_diag d = {0};
    ASSERT_EQ_INT(runcfg_load_text(&c, "{\"steps\":\"ten\"}", "r.json", &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "steps: expected integer, found string") != NULL);
    ASSERT_EQ_INT(runcfg_load_text(&c, "{\"steps\":2.5}", "r.json", &d), QS_EINVAL);
    ASSERT_EQ_INT(runcfg_load_text(&c, "{\"precision\":\"fp16\"}", "r.json", &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "fp32|bf16") != NULL);
    ASSERT_EQ_INT(runcfg_load_text(&c, "[1]", "r.json", &d), QS_EFORMAT);
    ASSERT_EQ_INT(runcfg_load_text(&c, "{\"lr\":", "r.json", &d), QS_EFORMAT);
}

TEST(runcfg, set_overrides_with_type_checks)
{
    runcfg c;
    runcfg_defaults(&c);
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&c, "lr=2e-5", &d), &d);
    ASSERT_NEAR(c.lr, 2e-5, 0);
    ASSERT_OK(runcfg_set(&c, "stop_on_saturation=true", &d), &d);
    ASSERT_EQ_INT(c.stop_on_saturation, 1);
    ASSERT_OK(runcfg_set(&c, "quant_modules=layers.3-5.mlp.*,!layers.4.mlp.*", &d), &d);
    ASSERT_EQ_STR(c.quant_modules, "layers.3-5.mlp.*,!layers.4.mlp.*");
    ASSERT_EQ_INT(runcfg_set(&c, "batch_size=0", &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "batch_size: expected an integer in [1, 65536], got '0'") != NULL);
    ASSERT_EQ_INT(runcfg_set(&c, "qat=maybe", &d), QS_EINVAL);
    ASSERT_EQ_INT(runcfg_set(&c, "nosuch=1", &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "'nosuch'") != NULL);
    ASSERT_EQ_INT(runcfg_set(&c, "lr", &d), QS_EINVAL);
}

TEST(runcfg, validate_requires_paths)
{
    runcfg c;
    runcfg_defaults(&c);
    qs_diag d = {0};
    ASSERT_EQ_INT(runcfg_validate(&c, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "model") != NULL);
    /* `--set model=` empties it: said "required key is missing", which it was not */
    ASSERT_OK(runcfg_set(&c, "model=m", &d), &d);
    ASSERT_OK(runcfg_set(&c, "train_data=s", &d), &d);
    ASSERT_OK(runcfg_set(&c, "out_dir=o", &d), &d);
    ASSERT_OK(runcfg_validate(&c, &d), &d);
    ASSERT_OK(runcfg_set(&c, "model=", &d), &d);
    ASSERT_EQ_INT(runcfg_validate(&c, &d), QS_EINVAL);
    ASSERT_EQ_STR(d.msg, "model: required, expected a non-empty path (missing, or set to \"\")");
}

TEST(runcfg, snapshot_round_trips)
{
    runcfg a, b;
    runcfg_defaults(&a);
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&a, "lr=3.3e-5", &d), &d);
    ASSERT_OK(runcfg_set(&a, "quant_modules=default,*.self_attn.o_proj", &d), &d);
    ASSERT_OK(runcfg_set(&a, "model=/x/y", &d), &d);
    char *js = runcfg_to_json(&a);
    ASSERT_TRUE(js != NULL);
    ASSERT_OK(runcfg_load_text(&b, js, "snap", &d), &d);
    qs_free(js);
    ASSERT_TRUE(memcmp(&a, &b, sizeof a) == 0);
}

TEST(runcfg, every_key_is_documented)
{
    ASSERT_TRUE(runcfg_key_count() > 20);
    for (int i = 0; i < runcfg_key_count(); i++) {
        const runcfg_key *k = runcfg_key_at(i);
        ASSERT_TRUE(k->doc && strlen(k->doc) > 10);
    }
    ASSERT_TRUE(runcfg_key_at(runcfg_key_count()) == NULL);
}

/* A forgetting stop without an in-loop benchmark could never fire: refused. */
TEST(runcfg, stop_on_forgetting_needs_the_in_loop_benchmark)
{
    runcfg c;
    qs_diag d = {0};
    runcfg_defaults(&c);
    ASSERT_OK(runcfg_set(&c, "model=m", &d), &d);
    ASSERT_OK(runcfg_set(&c, "train_data=t", &d), &d);
    ASSERT_OK(runcfg_set(&c, "out_dir=o", &d), &d);
    ASSERT_OK(runcfg_set(&c, "eval_data_dir=b", &d), &d);
    ASSERT_OK(runcfg_set(&c, "stop_on_forgetting=true", &d), &d);
    ASSERT_OK(runcfg_set(&c, "eval_every=0", &d), &d);
    ASSERT_EQ_INT(runcfg_validate(&c, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "stop_on_forgetting: true needs eval_every > 0") == d.msg);
    ASSERT_OK(runcfg_set(&c, "eval_every=10", &d), &d);
    ASSERT_OK(runcfg_validate(&c, &d), &d);
    ASSERT_OK(runcfg_set(&c, "eval_tasks=", &d), &d);
    ASSERT_EQ_INT(runcfg_validate(&c, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "it could never fire") != NULL);
}

TEST(runcfg, kl_reference_is_auto_true_or_false_and_follows_qat)
{
    runcfg c, back;
    qs_diag d = {0};
    runcfg_defaults(&c);
    ASSERT_EQ_INT(c.eval_kl_reference, -1);   /* auto */
    c.eval_every = 5;
    ASSERT_EQ_INT(runcfg_kl_reference(&c), 1);   /* qat on, val batches 8 */
    c.qat = 0;
    ASSERT_EQ_INT(runcfg_kl_reference(&c), 0);
    ASSERT_OK(runcfg_set(&c, "eval_kl_reference=true", &d), &d);
    ASSERT_EQ_INT(runcfg_kl_reference(&c), 1);   /* asked for: also without QAT */
    c.eval_val_batches = 0;
    ASSERT_EQ_INT(runcfg_kl_reference(&c), 0);
    snprintf(c.model, sizeof c.model, "m");
    snprintf(c.train_data, sizeof c.train_data, "t");
    snprintf(c.out_dir, sizeof c.out_dir, "o");
    /* in-loop tasks need their data root (it looked for "/arc/..." at the first eval) */
    ASSERT_EQ_INT(runcfg_validate(&c, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "eval_data_dir: required when eval_every > 0") == d.msg);
    snprintf(c.eval_data_dir, sizeof c.eval_data_dir, "b");
    ASSERT_EQ_INT(runcfg_validate(&c, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "eval_kl_reference") && strstr(d.msg, "eval_val_batches"));
    ASSERT_EQ_INT(runcfg_set(&c, "eval_kl_reference=maybe", &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "true, false or auto") != NULL);
    ASSERT_EQ_INT(runcfg_set(&c, "qat=auto", &d), QS_EINVAL);   /* only where documented */
    /* JSON: a boolean or "auto"; the snapshot keeps "auto" as written */
    ASSERT_OK(runcfg_load_text(&c, "{\"eval_kl_reference\":false}", "r.json", &d), &d);
    ASSERT_EQ_INT(c.eval_kl_reference, 0);
    ASSERT_OK(runcfg_load_text(&c, "{\"eval_kl_reference\":\"auto\"}", "r.json", &d), &d);
    ASSERT_EQ_INT(c.eval_kl_reference, -1);
    char *js = runcfg_to_json(&c);
    ASSERT_TRUE(js && strstr(js, "\"eval_kl_reference\": \"auto\""));
    ASSERT_OK(runcfg_load_text(&back, js, "snap.json", &d), &d);
    ASSERT_EQ_INT(back.eval_kl_reference, -1);
    qs_free(js);
    ASSERT_EQ_INT(runcfg_load_text(&c, "{\"eval_kl_reference\":1}", "r.json", &d), QS_EINVAL);
}
