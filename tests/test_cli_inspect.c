/* test_cli_inspect.c: `qatscope inspect` validates the whole directory before
 * printing, so a corrupt checkpoint gives no partial report: empty stdout, exit
 * 2, one error line on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/mem.h"
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
