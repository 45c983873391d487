/* test_export.c: `qatscope export --format hif8` and reading the result back:
 * the codes are the fake-quantized weights' codes, a run checkpoint's input
 * scales are its delayed scaling's, the rest is bf16, bad inputs are one line
 * with exit 2 and nothing written, broken checkpoints are refused by name. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qs/fileio.h"
#include "qs/hif8.h"
#include "qs/json.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_hif8.h"
#include "qs/model_infer.h"
#include "qs/quant.h"
#include "qs/runcfg.h"
#include "qs/safetensors.h"
#include "qs/trainer.h"
#include "qs/trainstate.h"
#include "test.h"
#include "test_amax_section.h"
#include "test_token_stream.h"

static char ex_out[16384], ex_err[4096];

/* the in-memory stream's pair at index i */
static void ex_pair(long i, int vocab, int32_t *tok, int32_t *tgt)
{
    (void)vocab;
    *tok = (int32_t)((i * 41 + 7) % 500 + 3);
    *tgt = (int32_t)(((i + 1) * 41 + 7) % 500 + 3);
}

/* A 6-step QAT run of the demo model on layers 2-5's MLPs (4 warmup steps,
 * max-window:3), once per process: its checkpoint RUN/ckpt/step_6, or NULL. */
static const char *ex_ckpt(void)
{
    static char ck[500];
    static int state;
    if (state)
        return state > 0 ? ck : NULL;
    state = -1;
    char run[400];
    snprintf(run, sizeof run, "%s/export_run", test_tmp_dir());
    static const char *const sets[] = {"batch_size=2", "seq_len=16", "steps=6", "lr=1e-3",
                                       "bf16_warmup_steps=4", "amax_estimator=max-window:3",
                                       "quant_modules=layers.2-5.mlp.*"};
    test_stream stream = {0, 0, ex_pair};
    qs_diag d = {0};
    if (test_stream_train_demo(run, sets, sizeof sets / sizeof *sets, &stream, &d))
        return NULL;
    snprintf(ck, sizeof ck, "%s/ckpt/step_6", run);
    state = 1;
    return ck;
}

/* the max of the last `window` entries of quantizer `name`'s stored history */
static float ex_history_max(const char *ckpt, const char *name, int window)
{
    char path[700];
    snprintf(path, sizeof path, "%s/train_state.bin", ckpt);
    float h[256], mx = -1.0f;
    int n;
    if (test_amax_history(path, name, h, 256, &n))
        return -1.0f;
    for (int i = n > window ? n - window : 0; i < n; i++)
        mx = h[i] > mx ? h[i] : mx;
    return mx;
}

static int ex_cli(const char *fmt, const char *a, const char *b)
{
    char args[2048];
    snprintf(args, sizeof args, fmt, a, b);
    return test_run_cli(args, ex_out, sizeof ex_out, ex_err, sizeof ex_err);
}

TEST(export, current_scaling_codes_are_the_fake_quantized_weights)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char out[600];
    snprintf(out, sizeof out, "%s/export_cur", test_tmp_dir());
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s --quant-modules "
                         "'layers.1-6.mlp.*'", "data/demo/model", out), 0);
    ASSERT_TRUE(strstr(ex_out, "18 Linear modules") && strstr(ex_out, "dynamic"));
    qs_diag d = {0};
    llama_model src, m;
    ASSERT_OK(model_load_dir(&src, "data/demo/model", &d), &d);
    ASSERT_OK(model_load_dir(&m, out, &d), &d);
    ASSERT_TRUE(m.hif8 != NULL && m.hif8->n == 18 && m.hif8->dynamic);
    char path[700];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    safetensors_file f = {0};
    ASSERT_OK(safetensors_open(&f, path, &d), &d);
    size_t n_u8 = 0;
    for (int i = 0; i < src.n_tensors; i++) {
        const model_tensor *e = &src.tensors[i];
        const safetensors_tensor *t = safetensors_find(&f, e->name);
        ASSERT_TRUE(t != NULL);
        const float *w = src.params + e->offset_elems;
        int quantized = strstr(e->name, ".mlp.") && e->layer >= 1 && e->layer <= 6;
        /* the export's block holds the other tensors only */
        ASSERT_TRUE(!strcmp(m.tensors[i].name, e->name) &&
                    (m.tensors[i].offset_elems == MODEL_NO_STORAGE) == quantized);
        if (!quantized) {   /* BF16, the source's values (a BF16 checkpoint: exact) */
            const float *back = m.params + m.tensors[i].offset_elems;
            ASSERT_EQ_INT(t->dtype, SAFETENSORS_BF16);
            ASSERT_TRUE(!memcmp(w, back, e->n_elems * sizeof *w));
            continue;
        }
        /* independently: scale from the tensor's amax, codes of w * scale */
        float amax = 0, scale;
        for (size_t j = 0; j < e->n_elems; j++)
            amax = fmaxf(amax, fabsf(w[j]));
        ASSERT_OK(quant_scale_from_amax(amax, 0, &scale), NULL);
        char sname[128];
        snprintf(sname, sizeof sname, "%s_scale", e->name);
        const safetensors_tensor *ts = safetensors_find(&f, sname);
        ASSERT_TRUE(t->dtype == SAFETENSORS_U8 && ts && ts->dtype == SAFETENSORS_F32);
        float stored;
        memcpy(&stored, ts->data, 4);
        ASSERT_TRUE(stored == scale);
        float *fq = qs_malloc(e->n_elems * sizeof *fq);
        ASSERT_TRUE(fq != NULL);
        hif8_stats st;
        hif8_fakequant_ref(w, fq, e->n_elems, scale, 0, &st);
        /* loaded as codes only (the code pack): decode(code) / scale is the
         * fake-quantized weight */
        int slot = m.hif8->slot[e->layer * MODEL_LIN_COUNT + (int)(strstr(e->name, "gate_proj")
                                                                    ? MODEL_LIN_GATE
                                                                : strstr(e->name, "up_proj")
                                                                    ? MODEL_LIN_UP
                                                                    : MODEL_LIN_DOWN)];
        ASSERT_TRUE(slot >= 0);
        float *vals = qs_malloc(e->n_elems * sizeof *vals);
        ASSERT_TRUE(vals != NULL);
        model_hif8_weight_values(m.hif8, slot, vals);
        for (size_t j = 0; j < e->n_elems; j++) {
            ASSERT_EQ_INT(t->data[j], hif8_encode(w[j] * scale, HIF8_SAT));
            ASSERT_TRUE(vals[j] / stored == fq[j]);
        }
        qs_free(vals);
        qs_free(fq);
        n_u8++;
    }
    ASSERT_EQ_INT(n_u8, 18);
    safetensors_close(&f);
    model_free(&src);
    model_free(&m);
    /* config: the documented quantization_config, other keys kept */
    json_t *cfg;
    snprintf(path, sizeof path, "%s/config.json", out);
    ASSERT_OK(qs_json_load_file(path, QS_JSON_OBJECT, &cfg, &d), &d);
    json_t *q = json_object_get(cfg, "quantization_config");
    ASSERT_EQ_STR(json_string_value(json_object_get(q, "quant_method")), "hif8");
    ASSERT_EQ_STR(json_string_value(json_object_get(q, "activation_scaling")), "dynamic");
    ASSERT_EQ_INT(json_array_size(json_object_get(q, "modules")), 18);
    ASSERT_EQ_STR(json_string_value(json_array_get(json_object_get(q, "modules"), 0)),
                  "model.layers.1.mlp.gate_proj");
    ASSERT_TRUE(json_object_get(q, "input_scales") == NULL);
    ASSERT_EQ_STR(json_string_value(json_object_get(cfg, "torch_dtype")), "bfloat16");
    ASSERT_TRUE(json_object_get(cfg, "hidden_size") != NULL);
    json_decref(cfg);
    snprintf(path, sizeof path, "%s/tokenizer.json", out);
    ASSERT_TRUE(fileio_exists(path));
}

TEST(export, run_checkpoint_stores_its_delayed_scales)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    const char *ck = ex_ckpt();
    ASSERT_TRUE(ck != NULL);
    char out[600];
    snprintf(out, sizeof out, "%s/export_run_out", test_tmp_dir());
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s", ck, out), 0);
    ASSERT_TRUE(strstr(ex_out, "12 Linear modules") && strstr(ex_out, "static") &&
                strstr(ex_out, "delayed (train_state step 6)"));
    qs_diag d = {0};
    llama_model m;
    ASSERT_OK(model_load_dir(&m, out, &d), &d);
    ASSERT_TRUE(m.hif8 && m.hif8->n == 12 && !m.hif8->dynamic);
    for (int i = 0; i < m.hif8->n; i++) {
        const model_hif8_linear *l = &m.hif8->lin[i];
        ASSERT_TRUE(l->layer >= 2 && l->layer <= 5 && l->module >= MODEL_LIN_GATE);
        /* max-window:3 over the stored history, margin 0 */
        static const char *const kind[3] = {"gate_proj", "up_proj", "down_proj"};
        char name[128];
        float want;
        snprintf(name, sizeof name, "layers.%d.mlp.%s.input", l->layer,
                 kind[l->module - MODEL_LIN_GATE]);
        ASSERT_OK(quant_scale_from_amax(ex_history_max(ck, name, 3), 0, &want), NULL);
        ASSERT_TRUE(l->input_scale == want);
        snprintf(name, sizeof name, "layers.%d.mlp.%s.weight", l->layer,
                 kind[l->module - MODEL_LIN_GATE]);
        ASSERT_OK(quant_scale_from_amax(ex_history_max(ck, name, 3), 0, &want), NULL);
        ASSERT_TRUE(l->weight_scale == want);
    }
    model_free(&m);
}

/* The fake-quant of the export (its stored scales) and of the checkpoint it
 * came from score alike, bit for bit: the demo model is BF16, so the export's
 * other tensors hold the source's values exactly. */
TEST(export, stored_scales_reproduce_the_sources_fake_quant)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char out[600], txt[600];
    snprintf(out, sizeof out, "%s/export_cur2", test_tmp_dir());
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s --quant-modules "
                         "'layers.2-5.mlp.*'", "data/demo/model", out), 0);
    snprintf(txt, sizeof txt, "%s/export.txt", test_tmp_dir());
    const char *s = "Tom had a red ball. He threw it to Sue and she laughed. They played all day.";
    ASSERT_OK(fileio_write_atomic(txt, s, strlen(s), NULL), NULL);
    char args[2048];
    snprintf(args, sizeof args,
             "compare --model %s --reference data/demo/model --text %s --json --precision hif8 "
             "--reference-precision hif8 --quant-modules 'layers.2-5.mlp.*'", out, txt);
    ASSERT_EQ_INT(test_run_cli(args, ex_out, sizeof ex_out, ex_err, sizeof ex_err), 0);
    ASSERT_TRUE(strstr(ex_out, "\"kl_max\": 0,") && strstr(ex_out, "\"top1_agree\": 1,"));
}

TEST(export, bad_inputs_exit_2_and_write_nothing)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char out[600], exp1[600];
    snprintf(out, sizeof out, "%s/export_bad", test_tmp_dir());
    snprintf(exp1, sizeof exp1, "%s/export_bad_src", test_tmp_dir());
    static const struct {
        const char *fmt, *want;
    } cases[] = {
        {"export --format fp8 --model %s --out %s", "--format: expected hif8"},
        {"export --model %s --out %s", "are required"},
        {"export --format hif8 --model %s/nope --out %s", "nope"},
        {"export --format hif8 --model %s --out %s --quant-modules 'layers.99.*'", "99"},
        {"export --format hif8 --model %s --out %s --quant-scaling delayed", "train_state.bin"},
        {"export --format hif8 --model %s --out %s --quant-scaling sometimes",
         "--quant-scaling: expected"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ASSERT_EQ_INT(ex_cli(cases[i].fmt, "data/demo/model", out), 2);
        if (!strstr(ex_err, cases[i].want))
            fprintf(stderr, "    case %zu: %s", i, ex_err);
        ASSERT_TRUE(strstr(ex_err, cases[i].want) != NULL);
        ASSERT_TRUE(strchr(ex_err, '\n') == ex_err + strlen(ex_err) - 1);
        ASSERT_TRUE(!fileio_exists(out));
    }
    /* an existing output is never touched; an export is not exported again */
    ASSERT_OK(fileio_mkdir_p(out, NULL), NULL);
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s", "data/demo/model", out), 2);
    ASSERT_TRUE(strstr(ex_err, "already exists") != NULL);
    char again[700];
    snprintf(again, sizeof again, "%s_again", out);
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s --quant-modules "
                         "'layers.3.mlp.up_proj'", "data/demo/model", exp1), 0);
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s", exp1, again), 2);
    ASSERT_TRUE(strstr(ex_err, "already a HiF8 checkpoint") != NULL);
    ASSERT_TRUE(!fileio_exists(again));
}

/* --out DIR/ (a shell completion) writes DIR: the trailing slash made the temp
 * directory DIR/.tmp.<pid>, whose rename onto DIR failed after the whole export
 * and left an empty DIR behind that refused the next attempt */
TEST(export, out_with_a_trailing_slash_names_the_directory)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char out[600], path[700];
    snprintf(out, sizeof out, "%s/export_slash/", test_tmp_dir());
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s --quant-modules "
                         "'layers.3.mlp.up_proj'", "data/demo/model", out), 0);
    snprintf(path, sizeof path, "%smodel.safetensors", out);
    ASSERT_TRUE(fileio_exists(path));
    snprintf(path, sizeof path, "%sconfig.json", out);
    ASSERT_TRUE(fileio_exists(path));
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s", "data/demo/model", out), 2);
    ASSERT_TRUE(strstr(ex_err, "already exists") != NULL);
}

/* config.json edits that the loader must refuse, each naming the JSON path */
static int ex_patch_header(const char *dir, const char *from, const char *to);

TEST(export, broken_hif8_checkpoints_are_refused_by_name)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/export_broken", test_tmp_dir());
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s --quant-modules "
                         "'layers.3.mlp.up_proj'", "data/demo/model", dir), 0);
    char path[700], *cfg;
    size_t n;
    snprintf(path, sizeof path, "%s/config.json", dir);
    ASSERT_OK(fileio_read_all(path, &cfg, &n, NULL), NULL);
    static const struct {
        const char *from, *to, *want;
    } edits[] = {
        {"\"quant_method\": \"hif8\"", "\"quant_method\": \"fp8\"", "only \"hif8\""},
        {"\"version\": 1", "\"version\": 2", "$.quantization_config.version"},
        {"\"format\": \"hifloat8\"", "\"format\": \"float8_e4m3fn\"",
         "$.quantization_config.format: \"float8_e4m3fn\": only \"hifloat8\""},
        {"\"format\": \"hifloat8\"", "\"format\": 8", "$.quantization_config.format"},
        {"\"format\": \"hifloat8\",", "", "$.quantization_config.format: required"},
        {"\"model.layers.3.mlp.up_proj\"", "\"model.layers.30.mlp.up_proj\"",
         "$.quantization_config.modules[0]"},
        /* one module, one name: no sign, space or leading zero in the block number */
        {"\"model.layers.3.mlp.up_proj\"", "\"model.layers.+3.mlp.up_proj\"",
         "$.quantization_config.modules[0]"},
        {"\"model.layers.3.mlp.up_proj\"", "\"model.layers.03.mlp.up_proj\"",
         "$.quantization_config.modules[0]"},
        {"\"model.layers.3.mlp.up_proj\"", "\"model.layers. 3.mlp.up_proj\"",
         "$.quantization_config.modules[0]"},
        {"\"model.layers.3.mlp.up_proj\"", "\"model.layers.3.mlp.gate_proj\"",
         "does not list 'model.layers.3.mlp.up_proj'"},   /* up_proj's scale is stored */
        {"\"model.layers.3.mlp.up_proj\"",
         "\"model.layers.3.mlp.up_proj\", \"model.layers.3.mlp.gate_proj\"", "expected U8"},
        /* the storage this reader decodes: U8 codes, one scale per tensor, saturating */
        {"\"granularity\": \"tensor\"", "\"granularity\": \"channel\"",
         "$.quantization_config.weight.granularity: \"channel\""},
        {"\"dtype\": \"U8\"", "\"dtype\": \"I8\"", "$.quantization_config.weight.dtype"},
        {"\"saturating\": true", "\"saturating\": false",
         "$.quantization_config.weight.saturating"},
        {"\"dynamic\"", "\"sometimes\"", "activation_scaling"},
        {"\"dynamic\"", "\"static\"", "input_scales"},
        /* scales that a dynamic config would ignore; a scale fp32 cannot hold */
        {"\"dynamic\"", "\"dynamic\", \"input_scales\": {}",
         "input scales given, but activation_scaling is \"dynamic\""},
        {"\"dynamic\"", "\"static\", \"input_scales\": {\"model.layers.3.mlp.up_proj\": 8000.1}",
         "expected a value exact in fp32 (as the export writes it), found 8000.1000000000004"},
    };
    qs_diag d = {0};
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        const char *at = strstr(cfg, edits[i].from);
        ASSERT_TRUE(at != NULL);
        char *bad = qs_malloc(n + 64);
        ASSERT_TRUE(bad != NULL);
        size_t pre = (size_t)(at - cfg);
        int len = snprintf(bad, n + 64, "%.*s%s%s", (int)pre, cfg, edits[i].to,
                           at + strlen(edits[i].from));
        ASSERT_OK(fileio_write_atomic(path, bad, (size_t)len, NULL), NULL);
        qs_free(bad);
        llama_model m;
        ASSERT_TRUE(model_load_dir(&m, dir, &d) < 0);
        if (!strstr(d.msg, edits[i].want) && !strstr(d.path, edits[i].want))
            fprintf(stderr, "    edit %zu: %s: %s\n", i, d.path, d.msg);
        ASSERT_TRUE(strstr(d.msg, edits[i].want) || strstr(d.path, edits[i].want));
    }
    ASSERT_OK(fileio_write_atomic(path, cfg, n, NULL), NULL);
    qs_free(cfg);
    llama_model m;
    ASSERT_OK(model_load_dir(&m, dir, &d), &d);
    model_free(&m);
    /* a weight scale of a module the config does not list: the two disagree */
    ASSERT_OK(ex_patch_header(dir, "\"model.layers.3.mlp.up_proj.weight_scale\"",
                              "\"model.layers.4.mlp.up_proj.weight_scale\""), NULL);
    ASSERT_TRUE(model_load_dir(&m, dir, &d) < 0);
    ASSERT_TRUE(strstr(d.path, "model.safetensors") &&
                strstr(d.msg, "tensor 'model.layers.4.mlp.up_proj.weight_scale': a HiF8 weight "
                              "scale, but config.json's quantization_config.modules does not "
                              "list 'model.layers.4.mlp.up_proj'"));
    ASSERT_TRUE(model_load_packed(&m, dir, MATMUL_BF16, &d) < 0 &&
                strstr(d.msg, "does not list 'model.layers.4.mlp.up_proj'"));
}

/* static input scales: eval on the export (the real W8A8 path) and eval
 * --precision hif8 on the run checkpoint (delayed scaling) agree bit for bit */
TEST(export, run_checkpoint_export_scores_like_its_delayed_fake_quant)
{
    char bench[512];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    if (!test_shared_path(bench, sizeof bench, "bench"))
        SKIP("../shared/bench not present");
    const char *ck = ex_ckpt();
    ASSERT_TRUE(ck != NULL);
    char out[600], args[4096], sa[700], sb[700];
    snprintf(out, sizeof out, "%s/export_run_eval", test_tmp_dir());
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s", ck, out), 0);
    snprintf(sa, sizeof sa, "%s/export_run_real.jsonl", test_tmp_dir());
    snprintf(sb, sizeof sb, "%s/export_run_fake.jsonl", test_tmp_dir());
    snprintf(args, sizeof args, "eval --model %s --tasks arc_easy --data-dir %s --limit 20 "
             "--precision bf16 --output %s.json --log-samples %s", out, bench, sa, sa);
    ASSERT_EQ_INT(test_run_cli(args, ex_out, sizeof ex_out, ex_err, sizeof ex_err), 0);
    snprintf(args, sizeof args, "eval --model %s --tasks arc_easy --data-dir %s --limit 20 "
             "--precision hif8 --output %s.json --log-samples %s", ck, bench, sb, sb);
    ASSERT_EQ_INT(test_run_cli(args, ex_out, sizeof ex_out, ex_err, sizeof ex_err), 0);
    ASSERT_TRUE(strstr(ex_out, "delayed (train_state step 6)") != NULL);
    char *a = NULL, *b = NULL;
    size_t na, nb;
    ASSERT_OK(fileio_read_all(sa, &a, &na, NULL), NULL);
    ASSERT_OK(fileio_read_all(sb, &b, &nb, NULL), NULL);
    ASSERT_TRUE(na == nb && na > 0 && !memcmp(a, b, na));
    qs_free(a);
    qs_free(b);
}

/* v into the 4 data bytes of F32 [1] tensor `name` of dir's model.safetensors
 * (x86-64: host order is the file's little-endian) */
static int ex_patch_f32(const char *dir, const char *name, float v)
{
    char path[700];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    safetensors_file f;
    long off = -1;
    if (safetensors_open(&f, path, NULL) == 0) {
        const safetensors_tensor *t = safetensors_find(&f, name);
        if (t && t->dtype == SAFETENSORS_F32 && t->n_elems == 1)
            off = (long)(t->data - f.map.data);
        safetensors_close(&f);
    }
    char *b = NULL;
    size_t n;
    if (off < 0 || fileio_read_all(path, &b, &n, NULL))
        return -1;
    memcpy(b + off, &v, sizeof v);
    int rc = fileio_write_atomic(path, b, n, NULL);
    qs_free(b);
    return rc;
}

/* Scales under which the weights (32768 / scale) or a static input's
 * dequantization factor 1 / (s_x * s_w) overflow fp32 are refused when the
 * checkpoint is read (they loaded, then ppl printed "nll/token -nan" with exit
 * 0, or a later layer failed with "quantization hook failed" and no file). */
TEST(export, scales_that_overflow_fp32_are_refused)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char dir[600], path[700], txt[700], *cfg;
    size_t n;
    snprintf(dir, sizeof dir, "%s/export_tiny_scales", test_tmp_dir());
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s --quant-modules "
                         "'layers.3.mlp.up_proj'", "data/demo/model", dir), 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    ASSERT_OK(fileio_read_all(path, &cfg, &n, NULL), NULL);
    snprintf(txt, sizeof txt, "%s/export_tiny_scales.txt", test_tmp_dir());
    ASSERT_OK(fileio_write_atomic(txt, "Tom had a red ball.", 19, NULL), NULL);
    const char *w = "model.layers.3.mlp.up_proj.weight_scale";
    float sw;
    {
        llama_model m;
        qs_diag d = {0};
        ASSERT_OK(model_load_dir(&m, dir, &d), &d);
        sw = m.hif8->lin[0].weight_scale;
        model_free(&m);
    }
    /* a subnormal weight scale: 32768 / scale is Inf */
    ASSERT_OK(ex_patch_f32(dir, w, 1e-45f), NULL);
    qs_diag d = {0};
    llama_model m;
    ASSERT_TRUE(model_load_dir(&m, dir, &d) < 0);
    ASSERT_TRUE(strstr(d.path, "model.safetensors") && strstr(d.msg, w) &&
                strstr(d.msg, "32768 / scale overflows"));
    char args[2048];
    snprintf(args, sizeof args, "ppl --model %s --text %s", dir, txt);
    ASSERT_EQ_INT(test_run_cli(args, ex_out, sizeof ex_out, ex_err, sizeof ex_err), 2);
    ASSERT_TRUE(strstr(ex_err, "model.safetensors: tensor 'model.layers.3.mlp.up_proj."
                               "weight_scale': scale") != NULL);
    ASSERT_TRUE(strchr(ex_err, '\n') == ex_err + strlen(ex_err) - 1 && !strstr(ex_out, "nan"));
    ASSERT_OK(ex_patch_f32(dir, w, sw), NULL);
    ASSERT_OK(model_load_dir(&m, dir, &d), &d);
    model_free(&m);
    /* static: a subnormal input scale; then input 2^-112 x weight 2^-16: the factor is 2^128 */
    static const struct {
        const char *scale;
        float sw;
        const char *want;
    } cases[] = {
        {"1.401298464324817e-45", 0, "$.quantization_config.input_scales[\"model.layers.3.mlp."
                                     "up_proj\"]: scale 1.4013e-45 is too small: 32768 / scale "
                                     "overflows fp32"},
        {"1.925929944387236e-34", 0x1p-16f, "1 / (input scale x scale) overflows"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *bad = qs_malloc(n + 256);
        ASSERT_TRUE(bad != NULL);
        const char *at = strstr(cfg, "\"dynamic\"");
        ASSERT_TRUE(at != NULL);
        int len = snprintf(bad, n + 256, "%.*s\"static\", \"input_scales\": "
                           "{\"model.layers.3.mlp.up_proj\": %s}%s", (int)(at - cfg), cfg,
                           cases[i].scale, at + strlen("\"dynamic\""));
        ASSERT_OK(fileio_write_atomic(path, bad, (size_t)len, NULL), NULL);
        qs_free(bad);
        if (cases[i].sw > 0)
            ASSERT_OK(ex_patch_f32(dir, w, cases[i].sw), NULL);
        ASSERT_TRUE(model_load_dir(&m, dir, &d) < 0);
        if (!strstr(d.msg, cases[i].want))
            fprintf(stderr, "    case %zu: %s: %s\n", i, d.path, d.msg);
        ASSERT_TRUE(strstr(d.msg, cases[i].want) != NULL);
    }
    ASSERT_OK(fileio_write_atomic(path, cfg, n, NULL), NULL);
    qs_free(cfg);
}

/* A scale that loads but whose weights overflow in the forward (up_proj's Inf reaches
 * down_proj's quantized input): compare names the side, and the directory, whose
 * forward failed, --model or --reference (it used to name --model's either way). */
TEST(export, compare_names_the_side_whose_forward_failed)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char dir[600], txt[700], args[2048];
    snprintf(dir, sizeof dir, "%s/export_inf_forward", test_tmp_dir());
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s --quant-modules "
                         "'layers.3.mlp.*'", "data/demo/model", dir), 0);
    snprintf(txt, sizeof txt, "%s/export_inf_forward.txt", test_tmp_dir());
    ASSERT_OK(fileio_write_atomic(txt, "Tom had a red ball.", 19, NULL), NULL);
    ASSERT_OK(ex_patch_f32(dir, "model.layers.3.mlp.up_proj.weight_scale", 1e-34f), NULL);
    for (int side = 0; side < 2; side++) {
        snprintf(args, sizeof args, "compare --model %s --reference %s --text %s",
                 side ? "data/demo/model" : dir, side ? dir : "data/demo/model", txt);
        ASSERT_EQ_INT(test_run_cli(args, ex_out, sizeof ex_out, ex_err, sizeof ex_err), 2);
        char want[900];
        snprintf(want, sizeof want, "qatscope: %s: compare: the %s: quantization hook failed at "
                 "layers.3.mlp.down_proj", dir,
                 side ? "reference (--reference)" : "model (--model)");
        if (strncmp(ex_err, want, strlen(want)))
            fprintf(stderr, "    side %d: %s", side, ex_err);
        ASSERT_TRUE(!strncmp(ex_err, want, strlen(want)));
        ASSERT_TRUE(strchr(ex_err, '\n') == ex_err + strlen(ex_err) - 1);
        ASSERT_EQ_STR(ex_out, "");
    }
}

/* model.safetensors of dir with `from` replaced by `to` in its header (data unchanged:
 * offsets count from the end of the header) */
static int ex_patch_header(const char *dir, const char *from, const char *to)
{
    char path[700], *b = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (fileio_read_all(path, &b, &n, NULL))
        return -1;
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--)
        h = h << 8 | (unsigned char)b[i];
    char *at = n > 8 + h ? strstr(b + 8, from) : NULL;
    char *out = qs_malloc(n + strlen(to) + 1);
    int rc = -1;
    if (at && out && (uint64_t)(at - b) < 8 + h) {
        size_t pre = (size_t)(at - b), fl = strlen(from), tl = strlen(to);
        uint64_t nh = h - fl + tl;
        for (int i = 0; i < 8; i++)
            out[i] = (char)(nh >> (8 * i));
        memcpy(out + 8, b + 8, pre - 8);
        memcpy(out + pre, to, tl);
        memcpy(out + pre + tl, at + fl, n - pre - fl);
        rc = fileio_write_atomic(path, out, n - fl + tl, NULL);
    }
    qs_free(out);
    qs_free(b);
    return rc;
}

/* The exporter writes each weight scale as F32 [1]; a scale tensor of another shape
 * ([] or [1, 1]: one value all the same) is refused by name, by load and inspect alike */
TEST(export, weight_scale_of_another_shape_is_refused)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char dir[600], args[1024];
    snprintf(dir, sizeof dir, "%s/export_scale_shape", test_tmp_dir());
    ASSERT_EQ_INT(ex_cli("export --format hif8 --model %s --out %s --quant-modules "
                         "'layers.3.mlp.up_proj'", "data/demo/model", dir), 0);
    const char *orig = "\"model.layers.3.mlp.up_proj.weight_scale\":{\"dtype\":\"F32\",\"shape\":[1]";
    static const struct {
        const char *shape, *found;
    } cases[] = {{"[]", "found F32 []"}, {"[1,1]", "found F32 [1, 1]"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char bad[200];
        snprintf(bad, sizeof bad, "\"model.layers.3.mlp.up_proj.weight_scale\":{\"dtype\":\"F32\","
                 "\"shape\":%s", cases[i].shape);
        ASSERT_OK(ex_patch_header(dir, orig, bad), NULL);
        llama_model m;
        qs_diag d = {0};
        ASSERT_EQ_INT(model_load_dir(&m, dir, &d), QS_ESHAPE);
        if (!strstr(d.msg, cases[i].found))
            fprintf(stderr, "    case %zu: %s: %s\n", i, d.path, d.msg);
        ASSERT_TRUE(strstr(d.path, "model.safetensors") != NULL);
        ASSERT_TRUE(strstr(d.msg, "tensor 'model.layers.3.mlp.up_proj.weight_scale': expected "
                                  "F32 [1]") && strstr(d.msg, cases[i].found));
        snprintf(args, sizeof args, "inspect %s", dir);
        ASSERT_EQ_INT(test_run_cli(args, ex_out, sizeof ex_out, ex_err, sizeof ex_err), 2);
        ASSERT_TRUE(strstr(ex_err, cases[i].found) != NULL);
        ASSERT_TRUE(strchr(ex_err, '\n') == ex_err + strlen(ex_err) - 1);
        ASSERT_OK(ex_patch_header(dir, bad, orig), NULL);
    }
    llama_model m;   /* the exporter's own [1] loads */
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, dir, &d), &d);
    model_free(&m);
}
