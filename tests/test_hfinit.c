/* test_hfinit.c: the pieces of `qatscope init` below the CLI: the streaming
 * safetensors writer, the per-tensor rules, the random streams, HF's shard
 * assignment, the config.json edit, and the bundled configs. */
#include <stdlib.h>

#include "qs/fileio.h"
#include "qs/hfinit.h"
#include "qs/mem.h"
#include "qs/rng.h"
#include "qs/safetensors.h"
#include "test.h"

TEST(safetensors_stream, pieces_of_any_size_give_the_same_bytes_as_the_whole_writer)
{
    float a[7] = {1, -2, 3.5f, 1e-3f, 4, 5, 6}, b[3] = {7, 8, 9}, c[2] = {-1, 0.25f};
    safetensors_entry e[3] = {{"a", a, 2, {7, 1}}, {"b", b, 1, {3}}, {"c", c, 1, {2}}};
    float all[12];
    memcpy(all, a, sizeof a);
    memcpy(all + 7, b, sizeof b);
    memcpy(all + 10, c, sizeof c);
    const char *meta[] = {"format", "pt", NULL};
    char p1[512], p2[512];
    qs_diag d = {0};
    snprintf(p1, sizeof p1, "%s/stream_whole.safetensors", test_tmp_dir());
    snprintf(p2, sizeof p2, "%s/stream_pieces.safetensors", test_tmp_dir());
    for (int dt = 0; dt < 2; dt++) {
        int dtype = dt ? SAFETENSORS_BF16 : SAFETENSORS_F32;
        ASSERT_OK(safetensors_write(p1, e, 3, dtype, meta, &d), &d);
        safetensors_stream *s;
        ASSERT_OK(safetensors_stream_create(&s, p2, e, 3, dtype, meta, &d), &d);
        /* pieces that straddle tensor boundaries (2 | 4 | 5 | 1) */
        ASSERT_OK(safetensors_stream_append(s, all, 2, &d), &d);
        ASSERT_OK(safetensors_stream_append(s, all + 2, 4, &d), &d);
        ASSERT_OK(safetensors_stream_append(s, all + 6, 5, &d), &d);
        ASSERT_OK(safetensors_stream_append(s, all + 11, 1, &d), &d);
        ASSERT_OK(safetensors_stream_commit(s, &d), &d);
        char *x, *y;
        size_t nx, ny;
        ASSERT_OK(fileio_read_all(p1, &x, &nx, &d), &d);
        ASSERT_OK(fileio_read_all(p2, &y, &ny, &d), &d);
        int same = nx == ny && !memcmp(x, y, nx);
        qs_free(x);
        qs_free(y);
        ASSERT_TRUE(same);
    }
}

TEST(safetensors_stream, too_few_or_too_many_values_are_errors_and_leave_no_file)
{
    float v[4] = {1, 2, 3, 4};
    safetensors_entry e = {"a", NULL, 1, {3}};
    char path[512];
    qs_diag d = {0};
    snprintf(path, sizeof path, "%s/stream_short.safetensors", test_tmp_dir());
    safetensors_stream *s;
    ASSERT_OK(safetensors_stream_create(&s, path, &e, 1, SAFETENSORS_F32, NULL, &d), &d);
    ASSERT_OK(safetensors_stream_append(s, v, 2, &d), &d);
    ASSERT_EQ_INT(safetensors_stream_commit(s, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "2 of 3 values") != NULL);
    ASSERT_TRUE(!fileio_exists(path));
    ASSERT_OK(safetensors_stream_create(&s, path, &e, 1, SAFETENSORS_F32, NULL, &d), &d);
    ASSERT_EQ_INT(safetensors_stream_append(s, v, 4, &d), QS_EINVAL);
    safetensors_stream_abort(s);
    ASSERT_TRUE(!fileio_exists(path));
}

static int parse_cfg(llama_config *c, const char *json)
{
    qs_diag d = {0};
    return hfconfig_parse(c, json, strlen(json), "test", &d);
}

TEST(hfinit, every_table_tensor_has_its_rule_on_every_architecture)
{
    static const char *const cfgs[] = {
        "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":32,\"intermediate_size\":48,"
        "\"num_hidden_layers\":3,\"num_attention_heads\":4,\"vocab_size\":64,"
        "\"tie_word_embeddings\":false,\"attention_bias\":true}",
        "{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":32,\"intermediate_size\":48,"
        "\"num_hidden_layers\":3,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
        "\"vocab_size\":64,\"tie_word_embeddings\":true}",
        "{\"architectures\":[\"PanguEmbeddedForCausalLM\"],\"hidden_size\":32,"
        "\"intermediate_size\":48,\"num_hidden_layers\":3,\"num_attention_heads\":4,"
        "\"num_key_value_heads\":2,\"vocab_size\":64,\"bias\":true,\"tie_word_embeddings\":true}",
    };
    for (size_t k = 0; k < sizeof cfgs / sizeof *cfgs; k++) {
        llama_config c;
        ASSERT_OK(parse_cfg(&c, cfgs[k]), NULL);
        model_tensor *t;
        int nt;
        ASSERT_OK(model_table_create(&c, &t, &nt), NULL);
        int n_scaled = 0, n_norm = 0, n_bias = 0, n_plain = 0, bad = 0;
        for (int i = 0; i < nt; i++) {
            hfinit_rule r;
            qs_diag d = {0};
            bad |= hfinit_tensor_rule(&c, &t[i], &r, &d) != 0;
            int scaled = strstr(t[i].name, "o_proj.weight") || strstr(t[i].name, "down_proj.weight");
            if (t[i].ndim == 2 && scaled) {
                n_scaled++;
                bad |= r.std != (float)(0.02 / sqrt(6.0));
            } else if (t[i].ndim == 2) {
                n_plain++;
                bad |= r.std != 0.02f;
            } else if (strstr(t[i].name, "norm.weight")) {
                n_norm++;
                bad |= r.std != 0.0f || r.value != 1.0f;
            } else {
                n_bias++;
                bad |= r.std != 0.0f || r.value != 0.0f || !strstr(t[i].name, ".bias");
            }
        }
        qs_free(t);
        ASSERT_EQ_INT(bad, 0);
        ASSERT_EQ_INT(n_scaled, 2 * 3);
        ASSERT_EQ_INT(n_norm, 2 * 3 + 1);
        ASSERT_EQ_INT(n_plain, 5 * 3 + 1 + !c.tied);
        ASSERT_EQ_INT(n_bias, 3 * (3 * c.qkv_bias + c.o_bias));
    }
}

TEST(hfinit, a_value_depends_only_on_seed_name_and_index)
{
    model_tensor a = {0}, b = {0};
    snprintf(a.name, sizeof a.name, "model.layers.0.mlp.up_proj.weight");
    a.ndim = 2;
    a.shape[0] = 3;
    a.shape[1] = HFINIT_CHUNK_ELEMS;
    a.n_elems = 3 * HFINIT_CHUNK_ELEMS;
    b = a;                      /* same name, another place in the block: same values */
    b.offset_elems = 12345;
    b.layer = 7;
    hfinit_rule r = {0.02f, 0.0f};
    float *x = qs_malloc(HFINIT_CHUNK_ELEMS * sizeof *x), *y = qs_malloc(HFINIT_CHUNK_ELEMS * 4);
    ASSERT_TRUE(x && y);
    ASSERT_EQ_INT(hfinit_chunk_fill(&a, &r, 42, 1, x), HFINIT_CHUNK_ELEMS);
    ASSERT_EQ_INT(hfinit_chunk_fill(&b, &r, 42, 1, y), HFINIT_CHUNK_ELEMS);
    int same = !memcmp(x, y, HFINIT_CHUNK_ELEMS * 4);
    hfinit_chunk_fill(&a, &r, 43, 1, y);   /* another seed */
    int diff_seed = memcmp(x, y, HFINIT_CHUNK_ELEMS * 4) != 0;
    hfinit_chunk_fill(&a, &r, 42, 2, y);   /* another chunk */
    int diff_chunk = memcmp(x, y, HFINIT_CHUNK_ELEMS * 4) != 0;
    snprintf(b.name, sizeof b.name, "model.layers.1.mlp.up_proj.weight");
    hfinit_chunk_fill(&b, &r, 42, 1, y);   /* another tensor */
    int diff_name = memcmp(x, y, HFINIT_CHUNK_ELEMS * 4) != 0;
    /* the documented stream: rng_seed_stream(seed ^ fnv1a64(name), chunk), std * rng_normal */
    rng g;
    rng_seed_stream(&g, 42 ^ hfinit_name_hash(a.name), 1);
    int documented = 1;
    for (size_t i = 0; i < 1000; i++)
        documented &= x[i] == 0.02f * rng_normal(&g);
    ASSERT_EQ_INT(hfinit_chunk_fill(&a, &r, 42, 3, y), 0);   /* past the end */
    qs_free(x);
    qs_free(y);
    ASSERT_TRUE(same && diff_seed && diff_chunk && diff_name && documented);
    ASSERT_EQ_INT(hfinit_name_hash(""), 0xcbf29ce484222325ull);   /* FNV-1a offset basis */
    ASSERT_EQ_INT(hfinit_name_hash("a"), 0xaf63dc4c8601ec8cull);
}

TEST(hfinit, shards_are_assigned_as_huggingface_hub_does)
{
    /* huggingface_hub tests/test_serialization.py: sizes [6, 10, 30, 2, 2], max 10 ->
     * [layer_1], [layer_3], [layer_2], [layer_4, layer_5] */
    const uint64_t bytes[5] = {6, 10, 30, 2, 2};
    int shard[5];
    ASSERT_EQ_INT(hfinit_shard_plan(bytes, 5, 10, shard), 4);
    ASSERT_EQ_INT(shard[0], 0);
    ASSERT_EQ_INT(shard[1], 2);
    ASSERT_EQ_INT(shard[2], 1);
    ASSERT_EQ_INT(shard[3], 3);
    ASSERT_EQ_INT(shard[4], 3);
    ASSERT_EQ_INT(hfinit_shard_plan(bytes, 5, 50, shard), 1);
    for (int i = 0; i < 5; i++)
        ASSERT_EQ_INT(shard[i], 0);
    ASSERT_EQ_INT(hfinit_shard_plan(bytes, 0, 10, shard), 0);
}

static int config_edit(const char *in, const char *dtype, char **out)
{
    size_t n;
    qs_diag d = {0};
    return hfinit_config_text(in, strlen(in), dtype, out, &n, "test", &d);
}

TEST(hfinit, config_text_sets_torch_dtype_and_keeps_every_other_byte)
{
    const char *base = "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 32,\n"
                       " \"intermediate_size\": 48, \"num_hidden_layers\": 2, "
                       "\"num_attention_heads\": 4, \"vocab_size\": 64, \"rms_norm_eps\": 1e-05";
    char in[1024], want[1024], *out = NULL;
    /* replaced where it is (also when null), nested keys untouched */
    snprintf(in, sizeof in, "%s, \"torch_dtype\": null, \"x\": {\"torch_dtype\": \"int8\"}}", base);
    snprintf(want, sizeof want,
             "%s, \"torch_dtype\": \"bfloat16\", \"x\": {\"torch_dtype\": \"int8\"}}", base);
    ASSERT_OK(config_edit(in, "bfloat16", &out), NULL);
    ASSERT_EQ_STR(out, want);
    qs_free(out);
    snprintf(in, sizeof in, "%s,\"torch_dtype\":\"bfloat16\"}", base);
    snprintf(want, sizeof want, "%s,\"torch_dtype\":\"float32\"}", base);
    ASSERT_OK(config_edit(in, "float32", &out), NULL);
    ASSERT_EQ_STR(out, want);
    qs_free(out);
    /* absent: appended as the last key */
    snprintf(in, sizeof in, "%s\n}\n", base);
    snprintf(want, sizeof want, "%s,\n  \"torch_dtype\": \"float32\"\n}\n", base);
    ASSERT_OK(config_edit(in, "float32", &out), NULL);
    ASSERT_EQ_STR(out, want);
    qs_free(out);
    /* a config the parser refuses stays refused */
    ASSERT_EQ_INT(config_edit("{\"architectures\": [\"GPT2LMHeadModel\"]}", "float32", &out),
                  QS_EUNSUPPORTED);
}

/* keys compare as JSON strings, after unescaping (as jansson's duplicate check does):
 * "torch\u005fdtype" is torch_dtype, replaced where it is, not a second key appended
 * and then refused as a duplicate */
TEST(hfinit, config_text_finds_an_escaped_torch_dtype_key)
{
    const char *base = "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 32,\n"
                       " \"intermediate_size\": 48, \"num_hidden_layers\": 2, "
                       "\"num_attention_heads\": 4, \"vocab_size\": 64";
    static const char *const keys[] = {"torch\\u005fdtype", "\\u0074orch_dtype",
                                       "torch\\u005Fdtype"};
    char in[1024], want[1024], *out = NULL;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        snprintf(in, sizeof in, "%s, \"%s\": \"bfloat16\"}", base, keys[i]);
        snprintf(want, sizeof want, "%s, \"%s\": \"float32\"}", base, keys[i]);
        ASSERT_OK(config_edit(in, "float32", &out), NULL);
        ASSERT_EQ_STR(out, want);
        qs_free(out);
    }
    /* a key that only looks alike once unescaped differently stays another key */
    snprintf(in, sizeof in, "%s, \"torch\\u005fdtypes\": 1}", base);
    snprintf(want, sizeof want, "%s, \"torch\\u005fdtypes\": 1,\n  \"torch_dtype\": \"float32\"}", base);
    ASSERT_OK(config_edit(in, "float32", &out), NULL);
    ASSERT_EQ_STR(out, want);
    qs_free(out);
    /* the same key twice, however spelt, is still refused */
    snprintf(in, sizeof in, "%s, \"torch_dtype\": \"bfloat16\", \"torch\\u005fdtype\": \"bfloat16\"}",
             base);
    ASSERT_TRUE(config_edit(in, "float32", &out) < 0);
    ASSERT_TRUE(out == NULL);
}

TEST(hfinit, bundled_configs_have_the_documented_shapes)
{
    llama_config c;
    qs_diag d = {0};
    ASSERT_OK(hfconfig_load(&c, "data/configs/openpangu-1b.json", &d), &d);
    ASSERT_EQ_INT(c.arch, LLAMA_ARCH_PANGU);
    ASSERT_EQ_INT(c.n_layers, 26);
    ASSERT_EQ_INT(c.dim, 1536);
    ASSERT_EQ_INT(c.hidden_dim, 6144);
    ASSERT_EQ_INT(c.n_heads, 12);
    ASSERT_EQ_INT(c.n_kv_heads, 6);
    ASSERT_EQ_INT(c.head_dim, 128);
    ASSERT_EQ_INT(c.vocab_size, 153376);
    ASSERT_TRUE(c.tied && c.qkv_bias && c.o_bias);
    ASSERT_TRUE(c.norm_eps == 1e-5f);
    ASSERT_EQ_STR(c.torch_dtype, "bfloat16");
    model_param_groups g;
    ASSERT_OK(model_param_groups_count(&c, &g), NULL);
    ASSERT_EQ_INT(g.total, 1155912192);   /* 2.31 GB in BF16 */
    ASSERT_EQ_INT(g.lm_head, 0);
    ASSERT_OK(hfconfig_load(&c, "data/configs/tiny-llama.json", &d), &d);
    ASSERT_EQ_INT(c.arch, LLAMA_ARCH_LLAMA);
    ASSERT_TRUE(!c.tied && !c.qkv_bias);
}
