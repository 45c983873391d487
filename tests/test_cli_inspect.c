/* test_cli_inspect.c: `qatscope inspect` validates the whole directory before
 * printing, so a corrupt checkpoint gives no partial report: empty stdout, exit
 * 2, one error line on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/hfconfig.h"
#include "qs/layers.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_hif8.h"
#include "qs/safetensors.h"
#include "test.h"

#define INSPECT_FIXTURE "data/fixtures/llama_gqa_f32"

/* tmp/<name>/ with the fixture's config.json and the given weights bytes */
static int inspect_dir_make(char *dir, size_t n, const char *name, const char *weights_src,
                            qs_diag *d)
{
    char path[700];
    char *buf;
    size_t len;
    snprintf(dir, n, "%s/%s", test_tmp_dir(), name);
    int rc = fileio_mkdir_p(dir, d);
    if (rc || (rc = fileio_read_all(INSPECT_FIXTURE "/config.json", &buf, &len, d)))
        return rc;
    snprintf(path, sizeof path, "%s/config.json", dir);
    rc = fileio_write_atomic(path, buf, len, d);
    qs_free(buf);
    if (rc || !weights_src)
        return rc;
    if ((rc = fileio_read_all(weights_src, &buf, &len, d)))
        return rc;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    rc = fileio_write_atomic(path, buf, len, d);
    qs_free(buf);
    return rc;
}

static int inspect_count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

TEST(cli_inspect, corrupt_safetensors_prints_nothing_and_one_error_line)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    static const char *const cases[] = {"offsets_past_end", "overlap", "size_mismatch",
                                        "bad_json", "too_short"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char src[256], errfile[256], dir[600], args[700], out[4096], err[1024];
        qs_diag d = {0};
        snprintf(src, sizeof src, "tests/data/safetensors/%s.safetensors", cases[i]);
        snprintf(errfile, sizeof errfile, "tests/data/safetensors/%s.err", cases[i]);
        ASSERT_OK(inspect_dir_make(dir, sizeof dir, "inspect_corrupt", src, &d), &d);
        snprintf(args, sizeof args, "inspect %s", dir);
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
        ASSERT_EQ_STR(out, "");
        ASSERT_EQ_INT(inspect_count_lines(err), 1);
        /* the expected message is the .err line after "<file>: " */
        char *want;
        size_t wn;
        ASSERT_OK(fileio_read_all(errfile, &want, &wn, &d), &d);
        want[wn && want[wn - 1] == '\n' ? wn - 1 : wn] = 0;
        const char *msg = strstr(want, ".safetensors: ");
        ASSERT_TRUE(msg != NULL);
        msg += strlen(".safetensors: ");
        if (!strstr(err, msg))
            fprintf(stderr, "    %s: want '%s' in '%s'\n", cases[i], msg, err);
        ASSERT_TRUE(strstr(err, msg) != NULL);
        ASSERT_TRUE(strstr(err, "model.safetensors") != NULL);
        qs_free(want);
    }
}

TEST(cli_inspect, wrong_tensor_shape_is_an_error_before_any_output)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char dir[600], path[700], args[700], out[4096], err[1024];
    qs_diag d = {0};
    ASSERT_OK(inspect_dir_make(dir, sizeof dir, "inspect_shape", NULL, &d), &d);
    float w[9] = {0};
    safetensors_entry e = {"model.embed_tokens.weight", w, 2, {3, 3}};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ASSERT_OK(safetensors_write(path, &e, 1, SAFETENSORS_F32, NULL, &d), &d);
    snprintf(args, sizeof args, "inspect %s", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
    ASSERT_EQ_STR(out, "");
    ASSERT_EQ_INT(inspect_count_lines(err), 1);
    if (!strstr(err, "tensor 'model.embed_tokens.weight': expected [64, 32], found [3, 3]"))
        fprintf(stderr, "    got: %s", err);
    ASSERT_TRUE(strstr(err, "tensor 'model.embed_tokens.weight': expected [64, 32], found [3, 3]") !=
                NULL);
}

/* Expected tensors that are absent do not stop the description, but it says how
 * many, names the first and that the loader will refuse the checkpoint. */
TEST(cli_inspect, missing_tensors_are_counted_and_the_first_named)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char dir[600], path[700], args[700], out[8192], err[1024];
    qs_diag d = {0};
    ASSERT_OK(inspect_dir_make(dir, sizeof dir, "inspect_missing", NULL, &d), &d);
    static float w[64 * 32];
    safetensors_entry e = {"model.embed_tokens.weight", w, 2, {64, 32}};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ASSERT_OK(safetensors_write(path, &e, 1, SAFETENSORS_F32, NULL, &d), &d);
    snprintf(args, sizeof args, "inspect %s", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    const char *line = strstr(out, "\nmissing:      ");
    if (!line)
        fprintf(stderr, "    got: %s", out);
    ASSERT_TRUE(line != NULL);
    ASSERT_TRUE(strstr(line, " expected tensors, the first 'model.") != NULL);
    ASSERT_TRUE(strstr(line, "': the loader will refuse this checkpoint\n") != NULL);
}

TEST(cli_inspect, missing_config_prints_nothing)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char out[4096], err[1024];
    ASSERT_EQ_INT(test_run_cli("inspect tests/data/safetensors", out, sizeof out, err, sizeof err),
                  2);
    ASSERT_EQ_STR(out, "");
    ASSERT_EQ_INT(inspect_count_lines(err), 1);
}

/* A HiF8 checkpoint is validated as the loader validates it, values aside: its
 * quantization_config, each listed module stored as U8 codes with a scale
 * tensor, no codes where the config lists none.  inspect used to describe all
 * of these (exit 0) while eval/ppl/generate refused them. */
TEST(cli_inspect, broken_hif8_checkpoints_print_nothing)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char dir[600], path[700], args[1400], out[4096], err[1024], *cfg;
    size_t n;
    snprintf(dir, sizeof dir, "%s/inspect_hif8", test_tmp_dir());
    snprintf(args, sizeof args, "export --format hif8 --model data/demo/model --out %s "
             "--quant-modules 'layers.3.mlp.up_proj'", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "inspect %s", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    ASSERT_TRUE(strstr(out, ", U8 (6144 elements)") != NULL);
    snprintf(path, sizeof path, "%s/config.json", dir);
    ASSERT_OK(fileio_read_all(path, &cfg, &n, NULL), NULL);
    static const struct {
        const char *from, *to, *want;
    } edits[] = {
        {"\"version\": 1", "\"version\": 2",
         "config.json: $.quantization_config.version: expected integer in [1, 1], found 2"},
        {"\"model.layers.3.mlp.up_proj\"", "\"model.layers.3.mlp.gate_proj\"",
         "model.safetensors: tensor 'model.layers.3.mlp.gate_proj.weight': expected U8 [128, 48] "
         "HiF8 codes"},
        {"\"quantization_config\"", "\"not_quantization_config\"",
         "model.safetensors: tensor 'model.layers.3.mlp.up_proj.weight': dtype U8, expected "
         "F32, BF16 or F16"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        const char *at = strstr(cfg, edits[i].from);
        ASSERT_TRUE(at != NULL);
        char *bad = qs_malloc(n + 64);
        ASSERT_TRUE(bad != NULL);
        int len = snprintf(bad, n + 64, "%.*s%s%s", (int)(at - cfg), cfg, edits[i].to,
                           at + strlen(edits[i].from));
        ASSERT_OK(fileio_write_atomic(path, bad, (size_t)len, NULL), NULL);
        qs_free(bad);
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
        ASSERT_EQ_STR(out, "");
        ASSERT_EQ_INT(inspect_count_lines(err), 1);
        if (!strstr(err, edits[i].want))
            fprintf(stderr, "    edit %zu: %s", i, err);
        ASSERT_TRUE(strstr(err, edits[i].want) != NULL);
    }
    ASSERT_OK(fileio_write_atomic(path, cfg, n, NULL), NULL);
    qs_free(cfg);
    /* the scale tensor renamed away in the header (same length, same offsets) */
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    char *st;
    ASSERT_OK(fileio_read_all(path, &st, &n, NULL), NULL);
    char *at = strstr(st + 8, "up_proj.weight_scale\"");
    ASSERT_TRUE(at != NULL);
    memcpy(at, "up_proj.weight_scalx", 20);
    ASSERT_OK(fileio_write_atomic(path, st, n, NULL), NULL);
    qs_free(st);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
    ASSERT_EQ_STR(out, "");
    ASSERT_TRUE(strstr(err, "tensor 'model.layers.3.mlp.up_proj.weight_scale' (F32 [1]) is "
                            "missing") != NULL);
}

/* The training estimate at an absurd --batch x --seq went past 2^64 bytes and was
 * printed wrapped round (a small or garbage figure, exit 0): now refused in one line.
 * The fixture with a 2^24-token context: 1 x 2^24 still fits (2^53 bytes of scores). */
TEST(cli_inspect, memory_estimate_past_64_bits_is_refused)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char dir[600], path[700], args[900], out[4096], err[1024], *cfg;
    size_t n;
    qs_diag d = {0};
    ASSERT_OK(inspect_dir_make(dir, sizeof dir, "inspect_huge", INSPECT_FIXTURE "/model.safetensors",
                               &d), &d);
    snprintf(path, sizeof path, "%s/config.json", dir);
    ASSERT_OK(fileio_read_all(path, &cfg, &n, &d), &d);
    char *at = strstr(cfg, "\"max_position_embeddings\": 64,");
    ASSERT_TRUE(at != NULL);
    char *big = qs_malloc(n + 64);
    ASSERT_TRUE(big != NULL);
    int len = snprintf(big, n + 64, "%.*s\"max_position_embeddings\": 16777216,%s", (int)(at - cfg),
                       cfg, at + strlen("\"max_position_embeddings\": 64,"));
    qs_free(cfg);
    ASSERT_OK(fileio_write_atomic(path, big, (size_t)len, &d), &d);
    qs_free(big);
    snprintf(args, sizeof args, "inspect %s --batch 1048576 --seq 16777216", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
    ASSERT_EQ_STR(out, "");
    ASSERT_EQ_INT(inspect_count_lines(err), 1);
    if (!strstr(err, "the training memory estimate for --batch 1048576 x --seq 16777216 does not "
                     "fit in 64 bits"))
        fprintf(stderr, "    got: %s", err);
    ASSERT_TRUE(strstr(err, "the training memory estimate for --batch 1048576 x --seq 16777216 "
                            "does not fit in 64 bits") != NULL);
    /* 2 layers x 4 heads x 2^48 scores = 2^53 bytes = 2^33 MiB, plus the rest */
    snprintf(args, sizeof args, "inspect %s --batch 1 --seq 16777216", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    if (!strstr(out, "training, 1 x 16777216 tokens: 8590003264.3 "))
        fprintf(stderr, "    got: %s", out);
    ASSERT_TRUE(strstr(out, "training, 1 x 16777216 tokens: 8590003264.3 ") != NULL);
}

/* ---- the packed inference estimate (eval / ppl / generate) ---- */

/* A bf16 model of ~10 MiB (untied, with q/k/v/o biases), so that inspect's MiB
 * figures have three digits: tmp/inspect_mid, made by `qatscope init` once. */
static const char *inspect_mid_model(void)
{
    static char dir[600];
    char cfg[600], args[2000], out[1024], err[1024];
    qs_diag d = {0};
    snprintf(dir, sizeof dir, "%s/inspect_mid", test_tmp_dir());
    if (fileio_exists(dir))
        return dir;
    static const char json[] =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 256, "
        "\"intermediate_size\": 768, \"num_hidden_layers\": 4, \"num_attention_heads\": 4, "
        "\"num_key_value_heads\": 2, \"vocab_size\": 4096, \"max_position_embeddings\": 1024, "
        "\"attention_bias\": true, \"tie_word_embeddings\": false}\n";
    snprintf(cfg, sizeof cfg, "%s/inspect_mid.json", test_tmp_dir());
    if (fileio_write_atomic(cfg, json, strlen(json), &d))
        return NULL;
    snprintf(args, sizeof args, "init --config %s --tokenizer-dir data/demo/model --out %s "
             "--dtype bf16", cfg, dir);
    if (test_run_cli(args, out, sizeof out, err, sizeof err)) {
        fprintf(stderr, "    init: %s", err);
        return NULL;
    }
    return dir;
}

/* Its HiF8 export with the MLPs quantized (12 of 28 Linears): tmp/inspect_mid_hif8. */
static const char *inspect_mid_hif8(void)
{
    static char dir[600];
    char args[2000], out[1024], err[1024];
    const char *src = inspect_mid_model();
    snprintf(dir, sizeof dir, "%s/inspect_mid_hif8", test_tmp_dir());
    if (!src || fileio_exists(dir))
        return src ? dir : NULL;
    snprintf(args, sizeof args, "export --format hif8 --model %s --out %s --quant-modules "
             "'*.mlp.*'", src, dir);
    if (test_run_cli(args, out, sizeof out, err, sizeof err)) {
        fprintf(stderr, "    export: %s", err);
        return NULL;
    }
    return dir;
}

/* The number after `key` in text (-1 when absent). */
static double inspect_figure(const char *text, const char *key)
{
    const char *at = strstr(text, key);
    return at ? strtod(at + strlen(key), NULL) : -1.0;
}

/* model_load_packed's weights, added up here from the pack sizes of matmul.h
 * (no HiF8 codes): every Linear's frozen pack, the lm_head's and, untied, the
 * embedding's, the pack pointer array; the norms and biases in fp32, each
 * padded to 16 floats; the RoPE tables. */
static void inspect_packed_sum(const llama_config *c, int precision, size_t *packs,
                               size_t *params, size_t *rope)
{
    const int C = c->dim, F = c->hidden_dim, QD = c->n_heads * c->head_dim,
              KD = c->n_kv_heads * c->head_dim, L = c->n_layers;
    const int in_dim[MODEL_LIN_COUNT] = {C, C, C, QD, C, C, F};
    const int out_dim[MODEL_LIN_COUNT] = {QD, KD, KD, C, F, F, C};
    *packs = (size_t)(L * MODEL_LIN_COUNT + 1) * sizeof(void *);
    for (int l = 0; l < L; l++)
        for (int k = 0; k < MODEL_LIN_COUNT; k++)
            *packs += matmul_wpack_frozen_bytes_estimate(in_dim[k], out_dim[k], precision);
    *packs += (c->tied ? 1u : 2u) * matmul_wpack_frozen_bytes_estimate(C, c->vocab_size, precision);
    size_t pc = (size_t)(C + 15) / 16 * 16, pq = (size_t)(QD + 15) / 16 * 16,
           pk = (size_t)(KD + 15) / 16 * 16;
    *params = 4 * ((size_t)(2 * L + 1) * pc + (c->qkv_bias ? (size_t)L * (pq + 2 * pk) : 0) +
                   (c->o_bias ? (size_t)L * pc : 0));
    *rope = (size_t)hfconfig_max_context(c) * (size_t)c->head_dim * sizeof(float);
}

TEST(cli_inspect, packed_weights_line_is_the_sum_of_the_frozen_packs)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    if (!matmul_frozen_available(MATMUL_BF16) || !matmul_frozen_available(MATMUL_FP32))
        SKIP("no packed format on this CPU (the fp32 route: see packed_estimate_is_what_the_loader_holds)");
    const char *dir = inspect_mid_model();
    ASSERT_TRUE(dir != NULL);
    llama_config c;
    qs_diag d = {0};
    ASSERT_OK(hfconfig_load(&c, dir, &d), &d);
    model_packed_memory pm, pm32;
    ASSERT_OK(model_packed_memory_estimate(&c, MATMUL_BF16, NULL, 1, &pm), NULL);
    ASSERT_OK(model_packed_memory_estimate(&c, MATMUL_FP32, NULL, 1, &pm32), NULL);
    size_t packs, params, rope;
    inspect_packed_sum(&c, MATMUL_BF16, &packs, &params, &rope);
    ASSERT_TRUE(!pm.fp32_copy && pm.codes_bytes == 0);
    ASSERT_EQ_INT(pm.packs_bytes, packs);
    ASSERT_EQ_INT(pm.params_bytes, params);
    ASSERT_EQ_INT(pm.rope_bytes, rope);
    ASSERT_EQ_INT(pm.bytes, packs + params + rope);
    /* bf16: about 2 bytes per weight (panels padded), fp32 about 4 */
    ASSERT_TRUE(packs >= 2 * (size_t)5242880 && packs < 2 * (size_t)5242880 + (64 << 10));
    size_t packs32, params32, rope32;
    inspect_packed_sum(&c, MATMUL_FP32, &packs32, &params32, &rope32);
    ASSERT_EQ_INT(pm32.bytes, packs32 + params32 + rope32);
    char out[8192], err[1024], args[700], want[256];
    snprintf(args, sizeof args, "inspect %s", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    const double M = 1024.0 * 1024.0;
    snprintf(want, sizeof want, "  weights, --precision bf16: %.1f = packs %.1f + fp32 norms/biases "
             "%.1f + rope %.1f   (--precision fp32: %.1f)\n", (packs + params + rope) / M,
             packs / M, params / M, rope / M, (packs32 + params32 + rope32) / M);
    if (!strstr(out, want))
        fprintf(stderr, "    want '%s' in:\n%s", want, out);
    ASSERT_TRUE(strstr(out, want) != NULL);
    /* the fp32 engine's lines are still there, unchanged */
    ASSERT_TRUE(strstr(out, "memory (fp32 engine, MiB; see model_memory_estimate):\n"
                            "  inference, 1 x 1024 tokens: ") != NULL);
    /* KV cache: keys and values of every layer, fp32 */
    snprintf(want, sizeof want, "(KV cache %.1f: %.1f KiB per position)",
             1024.0 * 2 * c.n_layers * c.n_kv_heads * c.head_dim * 4 / M,
             2.0 * c.n_layers * c.n_kv_heads * c.head_dim * 4 / 1024);
    ASSERT_TRUE(strstr(out, want) != NULL);
}

/* What the estimate says is what model_load_packed holds: the packs' bytes as
 * matmul_wpack_bytes reports them, the code packs', the params block's, the
 * RoPE tables', and the process's counted heap (a few KiB of tables and
 * structs aside), on both routes: packed from the mapping (BF16 checkpoints,
 * any checkpoint in fp32) and fp32 block + packs (F32/F16 in bf16). */
TEST(cli_inspect, packed_estimate_is_what_the_loader_holds)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *mid = inspect_mid_model(), *mid8 = inspect_mid_hif8();
    ASSERT_TRUE(mid && mid8);
    const struct {
        const char *dir;
        int matrices_bf16;
    } cases[] = {
        {mid, 1}, {mid8, 1}, {"data/demo/model", 1}, {"data/fixtures/llama3_bias_tied_bf16", 1},
        {"data/fixtures/mistral_linear_f16", 0}, {"data/fixtures/qwen2_bias_tied_f32", 0},
    };
    const int precisions[] = {MATMUL_BF16, MATMUL_FP32};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int p = 0; p < 2; p++) {
            llama_config c;
            qs_diag d = {0};
            model_hif8 *q8 = NULL;
            ASSERT_OK(hfconfig_load(&c, cases[i].dir, &d), &d);
            ASSERT_TRUE(model_hif8_config_read(cases[i].dir, &c, &q8, &d) >= 0);
            ASSERT_TRUE((q8 != NULL) == (cases[i].dir == mid8));
            model_packed_memory pm;
            int rc = model_packed_memory_estimate(&c, precisions[p], q8, cases[i].matrices_bf16,
                                                  &pm);
            model_hif8_free(q8);
            ASSERT_OK(rc, NULL);
            size_t live0 = qs_mem_live_bytes();
            llama_model m;
            ASSERT_OK(model_load_packed(&m, cases[i].dir, precisions[p], &d), &d);
            /* one forward: the plain packs of the fp32 route build their forward form */
            llama_acts a;
            int32_t tok[4] = {1, 2, 3, 4};
            ASSERT_OK(model_acts_init(&a, &m.cfg, 1, 4, 4, MODEL_ACTS_INFER, &d), &d);
            ASSERT_OK(model_forward(&m, &a, tok, NULL, 1, 4, 0, &d), &d);
            model_acts_free(&a);
            size_t live = qs_mem_live_bytes() - live0;
            size_t packs = (size_t)(m.cfg.n_layers * MODEL_LIN_COUNT + 1) * sizeof *m.packs;
            for (int k = 0; k <= m.cfg.n_layers * MODEL_LIN_COUNT; k++)
                packs += matmul_wpack_bytes(m.packs[k]);
            packs += matmul_wpack_bytes(m.embed_pack);
            if (packs != pm.packs_bytes || live < pm.bytes || live > pm.bytes + (64 << 10))
                fprintf(stderr, "    %s, %s: packs %zu (estimate %zu), heap %zu (estimate %zu)\n",
                        cases[i].dir, matmul_precision_name(precisions[p]), packs,
                        pm.packs_bytes, live, pm.bytes);
            ASSERT_EQ_INT(pm.fp32_copy, !m.weights_packed);
            ASSERT_EQ_INT(pm.fp32_copy, precisions[p] == MATMUL_BF16 && !cases[i].matrices_bf16);
            ASSERT_EQ_INT(packs, pm.packs_bytes);
            ASSERT_EQ_INT(m.hif8 ? model_hif8_bytes(m.hif8) : 0, pm.codes_bytes);
            ASSERT_EQ_INT(m.n_params * sizeof(float), pm.params_bytes);
            ASSERT_EQ_INT(rope_table_bytes(m.rope.max_pos, m.rope.head_dim), pm.rope_bytes);
            ASSERT_TRUE(live >= pm.bytes && live <= pm.bytes + (64 << 10));
            model_free(&m);
        }
}

/* A HiF8 export holds its quantized Linears at 1 byte per weight: fewer bytes
 * than its bf16 source, in the library's figures and in inspect's line. */
TEST(cli_inspect, hif8_export_reports_fewer_weight_bytes_than_its_source)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    if (!matmul_frozen_available(MATMUL_BF16))
        SKIP("no packed bf16 format on this CPU");
    const char *src = inspect_mid_model(), *exp = inspect_mid_hif8();
    ASSERT_TRUE(src && exp);
    llama_config c;
    qs_diag d = {0};
    model_hif8 *q8 = NULL;
    ASSERT_OK(hfconfig_load(&c, exp, &d), &d);
    ASSERT_EQ_INT(model_hif8_config_read(exp, &c, &q8, &d), 1);
    ASSERT_EQ_INT(q8->n, 3 * c.n_layers);
    model_packed_memory ps, pe;
    ASSERT_OK(model_packed_memory_estimate(&c, MATMUL_BF16, NULL, 1, &ps), NULL);
    ASSERT_OK(model_packed_memory_estimate(&c, MATMUL_BF16, q8, 1, &pe), NULL);
    model_hif8_free(q8);
    /* the MLPs move from bf16 packs into code packs */
    size_t mlp16 = 0, mlp8 = 0;
    const int in_dim[3] = {c.dim, c.dim, c.hidden_dim}, out_dim[3] = {c.hidden_dim, c.hidden_dim, c.dim};
    for (int k = 0; k < 3; k++) {
        mlp16 += (size_t)c.n_layers * matmul_wpack_frozen_bytes_estimate(in_dim[k], out_dim[k],
                                                                        MATMUL_BF16);
        mlp8 += (size_t)c.n_layers * matmul_wpack_hif8_bytes_estimate(in_dim[k], out_dim[k]);
    }
    ASSERT_EQ_INT(pe.codes_bytes, mlp8);
    ASSERT_EQ_INT(pe.packs_bytes, ps.packs_bytes - mlp16);
    ASSERT_EQ_INT(pe.params_bytes, ps.params_bytes);
    ASSERT_TRUE(pe.bytes < ps.bytes && mlp8 < mlp16);
    char out[8192], out8[8192], err[1024], args[700];
    snprintf(args, sizeof args, "inspect %s", src);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "inspect %s", exp);
    ASSERT_EQ_INT(test_run_cli(args, out8, sizeof out8, err, sizeof err), 0);
    double w16 = inspect_figure(out, "weights, --precision bf16: "),
           w8 = inspect_figure(out8, "weights, --precision bf16: ");
    if (!(w8 > 0 && w8 < w16))
        fprintf(stderr, "    bf16 source %.1f MiB, HiF8 export %.1f MiB\n", w16, w8);
    ASSERT_TRUE(w8 > 0 && w8 < w16);
    ASSERT_NEAR(w8, pe.bytes / 1048576.0, 0.05);
    ASSERT_TRUE(strstr(out8, " + HiF8 codes ") != NULL && strstr(out, "HiF8 codes") == NULL);
}
