/* test_hfconfig.c: config.json parsing: the four architectures, their bias
 * conventions, and refusal by name of what we do not compute. */
#include "qs/hfconfig.h"
#include "test.h"

static int parse(llama_config *c, const char *json, qs_diag *d)
{
    return hfconfig_parse(c, json, strlen(json), "config.json", d);
}

#define BASE "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2, " \
             "\"num_attention_heads\": 4, \"vocab_size\": 100"

TEST(hfconfig, llama_defaults_and_gqa)
{
    llama_config c;
    qs_diag d = {0};
    ASSERT_OK(parse(&c, "{\"architectures\": [\"LlamaForCausalLM\"], " BASE
                        ", \"num_key_value_heads\": 2, \"eos_token_id\": [7, 9]}", &d), &d);
    ASSERT_EQ_INT(c.arch, LLAMA_ARCH_LLAMA);
    ASSERT_EQ_INT(c.head_dim, 16);
    ASSERT_EQ_INT(c.n_kv_heads, 2);
    ASSERT_EQ_INT(c.qkv_bias, 0);
    ASSERT_EQ_INT(c.n_eos, 2);
    ASSERT_EQ_INT(c.eos_ids[1], 9);
    ASSERT_EQ_INT(c.bos_id, -1);
    ASSERT_NEAR(c.rope_theta, 10000.0, 0);
}

TEST(hfconfig, bias_conventions_per_architecture)
{
    llama_config c;
    qs_diag d = {0};
    ASSERT_OK(parse(&c, "{\"architectures\": [\"Qwen2ForCausalLM\"], " BASE "}", &d), &d);
    ASSERT_EQ_INT(c.qkv_bias, 1);
    ASSERT_EQ_INT(c.o_bias, 0);
    ASSERT_OK(parse(&c, "{\"architectures\": [\"PanguEmbeddedForCausalLM\"], " BASE
                        ", \"bias\": true}", &d), &d);
    ASSERT_EQ_INT(c.qkv_bias, 1);
    ASSERT_EQ_INT(c.o_bias, 1);
    ASSERT_OK(parse(&c, "{\"model_type\": \"llama\", " BASE ", \"attention_bias\": true}", &d), &d);
    ASSERT_EQ_INT(c.o_bias, 1);
    ASSERT_OK(parse(&c, "{\"architectures\": [\"MistralForCausalLM\"], " BASE
                        ", \"sliding_window\": 4096, \"max_position_embeddings\": 32768}", &d), &d);
    ASSERT_EQ_INT(hfconfig_max_context(&c), 4096);
    /* Mistral v0.2+ configs say "sliding_window": null (full attention); older ones omit it */
    ASSERT_OK(parse(&c, "{\"architectures\": [\"MistralForCausalLM\"], " BASE
                        ", \"sliding_window\": null, \"max_position_embeddings\": 32768}", &d), &d);
    ASSERT_EQ_INT(hfconfig_max_context(&c), 32768);
    ASSERT_OK(parse(&c, "{\"architectures\": [\"MistralForCausalLM\"], " BASE
                        ", \"max_position_embeddings\": 32768}", &d), &d);
    ASSERT_EQ_INT(hfconfig_max_context(&c), 32768);
}

TEST(hfconfig, unsupported_things_are_refused_by_name)
{
    llama_config c;
    qs_diag d = {0};
    ASSERT_EQ_INT(parse(&c, "{\"architectures\": [\"GPT2LMHeadModel\"], " BASE "}", &d),
                  QS_EUNSUPPORTED);
    ASSERT_TRUE(strstr(d.msg, "'GPT2LMHeadModel' is not supported") != NULL);
    /* the class list and the model type have their JSON types checked, not skipped */
    ASSERT_EQ_INT(parse(&c, "{\"architectures\": 5, \"model_type\": \"llama\", " BASE "}", &d),
                  QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.architectures: expected an array of strings, found integer");
    ASSERT_EQ_INT(parse(&c, "{\"architectures\": [\"LlamaForCausalLM\", 3], " BASE "}", &d),
                  QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.architectures: expected an array of strings, found integer at index 1");
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": [\"llama\"], " BASE "}", &d), QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.model_type: expected a string, found array");
    ASSERT_OK(parse(&c, "{\"architectures\": [], \"model_type\": \"llama\", " BASE "}", &d), &d);
    ASSERT_OK(parse(&c, "{\"architectures\": null, \"model_type\": \"llama\", " BASE "}", &d), &d);
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": \"llama\", " BASE ", \"hidden_act\": \"gelu\"}", &d),
                  QS_EUNSUPPORTED);
    ASSERT_TRUE(strstr(d.msg, "'gelu'") != NULL);
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": \"llama\", " BASE
                            ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}", &d),
                  QS_EUNSUPPORTED);
    ASSERT_TRUE(strstr(d.msg, "'yarn'") != NULL);
    /* llama3's keys are required, as Hugging Face requires them (defaults were filled in) */
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": \"llama\", " BASE
                            ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8}}", &d),
                  QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.rope_scaling.low_freq_factor: required by rope_type llama3");
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": \"llama\", " BASE ", \"mlp_bias\": true}", &d),
                  QS_EUNSUPPORTED);
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": \"qwen2\", " BASE ", \"use_sliding_window\": true}",
                        &d), QS_EUNSUPPORTED);
}

TEST(hfconfig, wrong_types_and_values_name_the_key)
{
    llama_config c;
    qs_diag d = {0};
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": \"llama\", \"hidden_size\": \"64\"}", &d),
                  QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.hidden_size: expected integer, found string");
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": \"llama\", " BASE ", \"num_key_value_heads\": 3}",
                        &d), QS_ERANGE);
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": \"llama\", \"hidden_size\": 64}", &d), QS_EFORMAT);
    ASSERT_EQ_STR(d.msg, "$.intermediate_size: required key is missing");
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": \"llama\", " BASE ", \"rope_theta\": -1}", &d),
                  QS_ERANGE);
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": ", &d), QS_EFORMAT);
    ASSERT_EQ_INT(d.line, 1);
    /* no head_dim and fewer dims than heads: the default 64 / 128 = 0 is refused too (it
     * passed the even check and failed later without a file: "cannot build the RoPE table") */
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": \"llama\", \"hidden_size\": 64, "
                            "\"intermediate_size\": 128, \"num_hidden_layers\": 2, "
                            "\"num_attention_heads\": 128, \"vocab_size\": 100}", &d),
                  QS_ERANGE);
    ASSERT_EQ_STR(d.path, "config.json");
    ASSERT_TRUE(strstr(d.msg, "$.hidden_size: 64 / num_attention_heads 128 gives head_dim 0") ==
                d.msg);
    ASSERT_OK(parse(&c, "{\"model_type\": \"llama\", \"hidden_size\": 64, "
                        "\"intermediate_size\": 128, \"num_hidden_layers\": 2, "
                        "\"num_attention_heads\": 128, \"head_dim\": 8, \"vocab_size\": 100}",
                    &d), &d);
}

TEST(hfconfig, llama3_rope_scaling_is_read)
{
    llama_config c;
    qs_diag d = {0};
    ASSERT_OK(parse(&c, "{\"model_type\": \"llama\", " BASE
                        ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                        "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                        "\"original_max_position_embeddings\": 8192}}", &d), &d);
    ASSERT_EQ_INT(c.rope_scale.type, ROPE_SCALING_LLAMA3);
    ASSERT_NEAR(c.rope_scale.factor, 8.0, 0);
    ASSERT_EQ_INT(c.rope_scale.original_max_position, 8192);
}

/* Regression-fuzz: 300 seeded single-byte corruptions of a real config.json
 * parse or fail with a message, never crash; absurd sizes are refused. */
TEST(hfconfig, seeded_corruptions_fail_cleanly)
{
    static const char base[] =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, \"intermediate_size\": "
        "172, \"num_hidden_layers\": 5, \"num_attention_heads\": 8, \"num_key_value_heads\": 4, "
        "\"head_dim\": 8, \"vocab_size\": 512, \"rope_scaling\": {\"rope_type\": \"llama3\", "
        "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
        "\"original_max_position_embeddings\": 8192}, \"eos_token_id\": [1, 2], "
        "\"tie_word_embeddings\": true}";
    char buf[sizeof base];
    uint64_t s = 99;
    int failed = 0, no_msg = 0;
    for (int it = 0; it < 300; it++) {
        memcpy(buf, base, sizeof base);
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        buf[(s >> 33) % (sizeof base - 1)] = "0123456789[]{},:\"-e9x "[(s >> 20) % 22];
        llama_config c;
        qs_diag d = {0};
        if (hfconfig_parse(&c, buf, strlen(buf), "config.json", &d)) {
            failed++;
            no_msg += d.msg[0] == 0;
        }
    }
    ASSERT_TRUE(failed > 30);
    ASSERT_EQ_INT(no_msg, 0);
    llama_config c;
    qs_diag d = {0};
    ASSERT_EQ_INT(parse(&c, "{\"model_type\": \"llama\", \"hidden_size\": 16777216, "
                            "\"intermediate_size\": 16777216, \"num_hidden_layers\": 4096, "
                            "\"num_attention_heads\": 1, \"vocab_size\": 1073741824}", &d),
                  QS_ERANGE);
}
