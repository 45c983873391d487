/* test_cli_model.c: the generate / ppl / inspect commands end to end through
 * the binary ($QS_BIN), and the perplexity library behind ppl. */
#include <stdlib.h>
#include <sys/wait.h>

#include "qs/fileio.h"
#include "qs/layers.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"
#include "qs/safetensors.h"
#include "test.h"

TEST(cli_model, generate_greedy_stories260K_prints_llama2c_text)
{
    char dir[512], args[1024], out[8192], err[1024];
    if (!test_shared_path(dir, sizeof dir, "models/stories260K"))
        SKIP("../shared/models/stories260K not present");
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    snprintf(args, sizeof args,
             "generate --model %s --prompt 'Once upon a time' -n 64 --temperature 0", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    const char *want = "Once upon a time, there was a little girl named Lily. She loved to play "
                       "outside in the park. One day, she saw a big, red ball.";
    if (strncmp(out, want, strlen(want)))
        fprintf(stderr, "    got: %s\n", out);
    ASSERT_TRUE(strncmp(out, want, strlen(want)) == 0);
    /* seeded sampling is reproducible */
    char out2[8192];
    snprintf(args, sizeof args,
             "generate --model %s --prompt 'Once upon a time' -n 40 --temperature 0.9 --seed 7",
             dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    ASSERT_EQ_INT(test_run_cli(args, out2, sizeof out2, err, sizeof err), 0);
    ASSERT_EQ_STR(out, out2);
}

TEST(cli_model, bad_inputs_exit_2_with_one_line)
{
    char args[1024], out[4096], err[1024];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    ASSERT_EQ_INT(test_run_cli("generate --model data/fixtures/llama_gqa_f32 --prompt x -n -3", out,
                          sizeof out, err, sizeof err), 2);
    ASSERT_TRUE(strstr(err, "-n: expected an integer") != NULL);
    ASSERT_EQ_INT(test_run_cli("ppl --model /nonexistent/model --text x", out, sizeof out, err,
                          sizeof err), 2);
    ASSERT_EQ_STR(err, "qatscope: /nonexistent/model: no such model directory (expected "
                       "config.json and model.safetensors)\n");
    /* a directory whose weights file is corrupt */
    char dir[600], path[700];
    qs_diag d = {0};
    snprintf(dir, sizeof dir, "%s/cli_bad_model", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    char *cfg;
    size_t n;
    ASSERT_OK(fileio_read_all("data/fixtures/llama_gqa_f32/config.json", &cfg, &n, &d), &d);
    snprintf(path, sizeof path, "%s/config.json", dir);
    ASSERT_OK(fileio_write_atomic(path, cfg, n, &d), &d);
    qs_free(cfg);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ASSERT_OK(fileio_write_atomic(path, "\x10\0\0\0\0\0\0\0{\"a\":", 13, &d), &d);
    snprintf(args, sizeof args, "inspect %s", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
    ASSERT_TRUE(strstr(err, "model.safetensors: header claims 16 bytes, file has 5") != NULL);
    /* the weights file given as the model: named, not "invalid JSON at column 0" */
    snprintf(args, sizeof args, "ppl --model data/demo/model/model.safetensors --text x");
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
    ASSERT_EQ_STR(err, "qatscope: data/demo/model/model.safetensors: expected a model directory "
                       "(config.json and *.safetensors); this is a file, and not a JSON config\n");
    /* a directory where a file is expected */
    snprintf(args, sizeof args, "ppl --model data/demo/model --text data/demo");
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
    ASSERT_EQ_STR(err, "qatscope: data/demo: is a directory; expected a file\n");
}

/* A missing required option is one line pointing at --help, as gate's and train's
 * are; generate printed its whole usage text inside the error. */
TEST(cli_model, generate_missing_n_is_one_line)
{
    char out[4096], err[4096];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    static const char *const cases[] = {
        "generate --model data/fixtures/llama_gqa_f32 --prompt x",
        "generate --prompt x -n 4",
        "generate",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ASSERT_EQ_INT(test_run_cli(cases[i], out, sizeof out, err, sizeof err), 2);
        ASSERT_EQ_STR(err, "qatscope: generate: --model, --prompt and -n are required; "
                           "see --help\n");
        ASSERT_EQ_STR(out, "");
    }
    /* a bad value is one line too */
    ASSERT_EQ_INT(test_run_cli("generate --model data/fixtures/llama_gqa_f32 --prompt x -n many",
                               out, sizeof out, err, sizeof err), 2);
    ASSERT_EQ_STR(err, "qatscope: -n: expected an integer in [0, 16777216], got 'many'\n");
}

TEST(cli_model, ppl_missing_option_is_one_line)
{
    char out[4096], err[4096];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    static const char *const cases[] = {"ppl --model data/fixtures/llama_gqa_f32", "ppl"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ASSERT_EQ_INT(test_run_cli(cases[i], out, sizeof out, err, sizeof err), 2);
        ASSERT_EQ_STR(err, "qatscope: ppl: --model and --text are required; see --help\n");
        ASSERT_EQ_STR(out, "");
    }
}

TEST(cli_model, inspect_reports_architecture_groups_and_memory)
{
    char out[8192], err[1024];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    ASSERT_EQ_INT(test_run_cli("inspect data/fixtures/pangu_bias_sharded_f32 --batch 2 --seq 16", out,
                          sizeof out, err, sizeof err), 0);
    ASSERT_TRUE(strstr(out, "PanguEmbeddedForCausalLM") != NULL);
    ASSERT_TRUE(strstr(out, "q/k/v yes, o yes") != NULL);
    ASSERT_TRUE(strstr(out, "weights:      2 files") != NULL);
    ASSERT_TRUE(strstr(out, "training, 2 x 16 tokens") != NULL);
    ASSERT_TRUE(strstr(out, "training with recompute: ") != NULL);
    llama_config c;
    qs_diag d = {0};
    ASSERT_OK(hfconfig_load(&c, "data/fixtures/pangu_bias_sharded_f32", &d), &d);
    model_param_groups g;
    ASSERT_OK(model_param_groups_count(&c, &g), NULL);
    char want[64];
    snprintf(want, sizeof want, "parameters:   %zu\n", g.total);
    ASSERT_TRUE(strstr(out, want) != NULL);
    ASSERT_EQ_INT(g.total, g.embed + g.attn + g.mlp + g.norms);
    /* 2 layers x (q 32x32 + k,v 16x32 + o 32x32 + biases 32+16+16+32) */
    ASSERT_EQ_INT(g.attn, 2 * (1024 + 512 + 512 + 1024 + 96));
}

TEST(cli_model, ppl_scores_every_token_once_and_matches_one_window)
{
    llama_model m;
    qs_diag d = {0};
    ASSERT_OK(model_load_dir(&m, "data/fixtures/llama_gqa_f32", &d), &d);
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = (i * 7 + 3) % 64;
    model_ppl_result one, slid;
    ASSERT_OK(model_ppl_compute(&m, ids, 40, 40, 40, &one, &d), &d);
    ASSERT_EQ_INT(one.n_scored, 39);
    ASSERT_EQ_INT(one.n_windows, 1);
    /* the same through one forward with targets (mean xent) */
    llama_acts a;
    int32_t tg[40];
    for (int i = 0; i < 40; i++)
        tg[i] = i + 1 < 40 ? ids[i + 1] : -1;
    ASSERT_OK(model_acts_init(&a, &m.cfg, 1, 40, 40, 0, &d), &d);
    ASSERT_OK(model_forward(&m, &a, ids, tg, 1, 40, 0, &d), &d);
    ASSERT_NEAR(one.nll_sum / 39, a.loss, 1e-5);
    model_acts_free(&a);
    ASSERT_OK(model_ppl_compute(&m, ids, 40, 16, 5, &slid, &d), &d);
    ASSERT_EQ_INT(slid.n_scored, 39);
    ASSERT_EQ_INT(slid.n_windows, 6);   /* [0,16) [5,21) [10,26) [15,31) [20,36) [25,40) */
    ASSERT_TRUE(fabs(slid.nll_sum - one.nll_sum) > 1e-6);   /* less context, other NLL */
    ASSERT_EQ_INT(model_ppl_compute(&m, ids, 40, 16, 17, &slid, &d), QS_EINVAL);
    model_free(&m);
}

/* Windows that overlap score only their last rows, and the lm_head runs only
 * on those: the same bits as a brute force that computes every row's logits,
 * window by window, and sums the scored rows in position order.  Windows of
 * one chunk, and of 3-4 chunks of 256 rows (the context raised in memory),
 * where a whole chunk lies before the first scored row: that chunk runs no
 * head (it used to fail, "logits_rows[0] = 0 from row 511", as ppl and
 * compare did on the 1B model at their default window of 1024). */
TEST(cli_model, ppl_overlapping_windows_match_every_row_brute_force)
{
    llama_model m;
    qs_diag d = {0};
    char dir[512], path[600], *cfg = NULL;
    size_t len = 0;
    snprintf(dir, sizeof dir, "%s/gqa_ctx1024", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, &d), &d);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ASSERT_OK(fileio_copy("data/fixtures/llama_gqa_f32/model.safetensors", path, &d), &d);
    ASSERT_OK(fileio_read_all("data/fixtures/llama_gqa_f32/config.json", &cfg, &len, &d), &d);
    static const char key[] = "\"max_position_embeddings\": 64,";
    char *mp = strstr(cfg, key), edited[2048];
    ASSERT_TRUE(mp != NULL && len < sizeof edited - 8);
    int k = snprintf(edited, sizeof edited, "%.*s\"max_position_embeddings\": 1024,%s",
                     (int)(mp - cfg), cfg, mp + strlen(key));
    snprintf(path, sizeof path, "%s/config.json", dir);
    ASSERT_OK(fileio_write_atomic(path, edited, (size_t)k, &d), &d);
    qs_free(cfg);
    ASSERT_OK(model_load_dir(&m, dir, &d), &d);
    enum { N = 1500 };
    static const int shapes[][3] = {{40, 16, 5}, {N, 1024, 512}, {1300, 900, 350}};
    int32_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 11 + 5) % 64;
    const int V = m.cfg.vocab_size;
    for (int sh = 0; sh < 3; sh++)
    for (int prec = 0; prec < 2; prec++) {
        const size_t n = (size_t)shapes[sh][0];
        const int W = shapes[sh][1], S = shapes[sh][2];
        m.precision = prec ? MATMUL_BF16 : MATMUL_FP32;
        model_ppl_result got;
        ASSERT_OK(model_ppl_compute(&m, ids, n, W, S, &got, &d), &d);
        double want = 0;
        size_t prev_end = 0, scored = 0;
        for (size_t begin = 0; prev_end < n; begin += (size_t)S) {
            size_t end = begin + (size_t)W < n ? begin + (size_t)W : n;
            size_t first = prev_end > begin + 1 ? prev_end : begin + 1;
            llama_acts a;
            ASSERT_OK(model_acts_init(&a, &m.cfg, 1, (int)(end - begin), (int)(end - begin), 0, &d), &d);
            ASSERT_OK(model_forward(&m, &a, ids + begin, NULL, 1, (int)(end - begin), 0, &d), &d);
            for (size_t t = first; t < end; t++, scored++)
                want += xent_row_nll(a.logits + (t - 1 - begin) * (size_t)V, V, ids[t]);
            model_acts_free(&a);
            prev_end = end;
        }
        ASSERT_EQ_INT((long)got.n_scored, (long)scored);
        ASSERT_TRUE(got.nll_sum == want);
    }
    model_free(&m);
}

TEST(cli_model, ppl_json_on_stories260K)
{
    char dir[512], args[2048], out[4096], err[1024], txt[600];
    if (!test_shared_path(dir, sizeof dir, "models/stories260K"))
        SKIP("../shared/models/stories260K not present");
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    qs_diag d = {0};
    snprintf(txt, sizeof txt, "%s/story.txt", test_tmp_dir());
    const char *story = "Once upon a time, there was a little girl named Lily. She loved to play "
                        "outside in the park. One day, she saw a big, red ball.";
    ASSERT_OK(fileio_write_atomic(txt, story, strlen(story), &d), &d);
    snprintf(args, sizeof args, "ppl --model %s --text %s --bos --json", dir, txt);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    double ppl = 0;
    const char *p = strstr(out, "\"ppl\": ");
    ASSERT_TRUE(p != NULL);
    ppl = atof(p + 7);
    /* the model's own greedy text: far below the vocabulary size */
    ASSERT_TRUE(ppl > 1.0 && ppl < 3.0);
}

/* A checkpoint whose tokenizer has more ids than config.json's vocab_size (the
 * demo model with Llama 2's 32000-piece tokenizer) is refused when loaded, by
 * ppl, generate, eval and compare alike, naming the directory; it used to fail
 * at the first forward with "token 0 is 9038, expected 0..511" and no file,
 * generate after echoing the prompt. */
TEST(cli_model, tokenizer_larger_than_the_vocabulary_is_refused)
{
    char tok[512], dir[600], path[700], args[2048], out[4096], err[1024];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    if (!test_shared_path(tok, sizeof tok, "tokenizers/llama2/tokenizer.json"))
        SKIP("../shared/tokenizers/llama2 not present");
    snprintf(dir, sizeof dir, "%s/cli_tok_too_big", test_tmp_dir());
    ASSERT_OK(fileio_mkdir_p(dir, NULL), NULL);
    static const char *const files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        char src[256];
        snprintf(src, sizeof src, "data/demo/model/%s", files[i]);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        ASSERT_OK(fileio_copy(src, path, NULL), NULL);
    }
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    ASSERT_OK(fileio_copy(tok, path, NULL), NULL);
    char want[800];
    snprintf(want, sizeof want, "qatscope: %s: tokenizer has 32000 tokens, more than config.json's "
             "vocab_size 512", dir);
    const char *const cmds[] = {
        "ppl --model %s --text data/demo/train.txt",
        "generate --model %s --prompt 'Once upon a time' -n 4",
        "eval --model %s --tasks arc_easy --data-dir tests/data/tasks/data --limit 2 --output "
        "%s/results.json",
        "compare --model %s --reference %s --text data/demo/train.txt --max-tokens 64",
    };
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, cmds[i], dir, dir);
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
        if (strncmp(err, want, strlen(want)))
            fprintf(stderr, "    %s\n    got: %s", args, err);
        ASSERT_TRUE(strncmp(err, want, strlen(want)) == 0);
        ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1 && out[0] == 0);
    }
    snprintf(path, sizeof path, "%s/results.json", dir);
    ASSERT_TRUE(!fileio_exists(path));
}

/* A copy of the demo model in TMP/name with every weight of `tensor` (bf16) at
 * 0x7f7f = 3.39e38, bf16's largest finite value: finite weights whose
 * activations overflow.  0, or -1 on a failure (reported by the caller). */
static int overflow_model(char *dir, size_t dir_bytes, const char *name, const char *tensor)
{
    char path[700];
    snprintf(dir, dir_bytes, "%s/%s", test_tmp_dir(), name);
    if (fileio_mkdir_p(dir, NULL))
        return -1;
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        char src[256];
        snprintf(src, sizeof src, "data/demo/model/%s", files[i]);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (fileio_copy(src, path, NULL))
            return -1;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    safetensors_file f;
    if (safetensors_open(&f, path, NULL))
        return -1;
    const safetensors_tensor *t = safetensors_find(&f, tensor);
    size_t off = t ? (size_t)(t->data - f.map.data) : 0, bytes = t ? t->n_bytes : 0;
    int bf16 = t && t->dtype == SAFETENSORS_BF16;
    safetensors_close(&f);
    char *b;
    size_t n;
    if (!bf16 || fileio_read_all(path, &b, &n, NULL))
        return -1;
    for (size_t i = 0; i < bytes; i += 2)
        memcpy(b + off + i, "\x7f\x7f", 2);
    int rc = fileio_write_atomic(path, b, n, NULL);
    qs_free(b);
    return rc ? -1 : 0;
}

/* Finite weights whose logits overflow (the final norm at bf16's largest value)
 * make ppl an error, as compare and eval already were, not "nll/token -nan"
 * with exit 0; compare names the model whose logits they are. */
TEST(cli_model, ppl_of_overflowing_logits_is_an_error)
{
    char dir[600], args[2048], out[4096], err[1024];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    ASSERT_EQ_INT(overflow_model(dir, sizeof dir, "cli_ppl_overflow", "model.norm.weight"), 0);
    snprintf(args, sizeof args, "ppl --model %s --text data/demo/train.txt --window 32", dir);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
    char want[800];
    snprintf(want, sizeof want, "qatscope: %s: ppl: non-finite logits at scored position 0\n",
             dir);
    ASSERT_EQ_STR(err, want);
    ASSERT_TRUE(strstr(out, "nan") == NULL && strstr(out, "nll/token") == NULL);
    /* compare names the side whose logits overflow, either way round */
    for (int side = 0; side < 2; side++) {
        snprintf(args, sizeof args,
                 "compare --model %s --reference %s --text data/demo/train.txt --window 32",
                 side ? "data/demo/model" : dir, side ? dir : "data/demo/model");
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
        snprintf(want, sizeof want, "qatscope: %s: compare: non-finite logits of the %s at scored "
                 "position ", dir, side ? "reference (--reference)" : "model (--model)");
        if (strncmp(err, want, strlen(want)))
            fprintf(stderr, "    %s", err);
        ASSERT_TRUE(strncmp(err, want, strlen(want)) == 0);
        ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1);
    }
    /* generate: no token drawn from non-finite logits (it printed the prompt and exit 0) */
    for (int greedy = 0; greedy < 2; greedy++) {
        snprintf(args, sizeof args, "generate --model %s --prompt Once -n 4 --temperature %s", dir,
                 greedy ? "0" : "0.8");
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
        snprintf(want, sizeof want, "qatscope: %s: generate: non-finite logits (", dir);
        ASSERT_TRUE(strncmp(err, want, strlen(want)) == 0);
        ASSERT_TRUE(strchr(err, '\n') == err + strlen(err) - 1);
    }
}

/* An MLP input that overflows under fake quantization (eval --precision hif8) is
 * an error naming the model, the Linear and the cause, not "quantization hook
 * failed at layer 3". */
TEST(cli_model, overflowing_quantized_input_names_the_linear)
{
    char dir[600], path[700], args[2048], out[4096], err[1024];
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    /* the MLP input of block 3 (quantized by the default selection) overflows */
    ASSERT_EQ_INT(overflow_model(dir, sizeof dir, "cli_hook_overflow",
                                 "model.layers.3.post_attention_layernorm.weight"), 0);
    snprintf(args, sizeof args, "eval --model %s --tasks arc_easy --data-dir tests/data/tasks/data "
             "--limit 2 --precision hif8 --output %s/hook.json", dir, test_tmp_dir());
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
    char want[900];
    snprintf(want, sizeof want, "qatscope: %s: arc_easy doc 0: quantization hook failed at "
             "layers.3.mlp.gate/up_proj: NaN or Inf value\n", dir);
    ASSERT_EQ_STR(err, want);
    snprintf(path, sizeof path, "%s/hook.json", test_tmp_dir());
    ASSERT_TRUE(!fileio_exists(path));
}

/* ppl --precision hif8 is the HiF8 W8A8 fake-quant of eval and compare: its
 * nll per token is the perplexity compare prints for a hif8 side on the same
 * windows, and differs from the bf16 figure; the quant options are refused
 * without a hif8 precision. */
TEST(cli_model, ppl_hif8_is_compares_fake_quant)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char txt[600], args[2048], out[4096], err[1024];
    qs_diag d = {0};
    char *demo;
    size_t n;
    ASSERT_OK(fileio_read_all("data/demo/train.txt", &demo, &n, &d), &d);
    snprintf(txt, sizeof txt, "%s/ppl_hif8.txt", test_tmp_dir());
    ASSERT_OK(fileio_write_atomic(txt, demo, n < 3000 ? n : 3000, &d), &d);
    qs_free(demo);
    double nll[3];
    static const char *const prec[3] = {"bf16", "hif8", "hif8-fp32"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "ppl --model data/demo/model --text %s --json --precision %s%s",
                 txt, prec[i], i ? " --quant-modules 'layers.*.mlp.*'" : "");
        ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
        char want[64];
        snprintf(want, sizeof want, "\"precision\": \"%s\"", prec[i]);
        ASSERT_TRUE(strstr(out, want) != NULL);
        const char *p = strstr(out, "\"nll_per_token\": ");
        ASSERT_TRUE(p != NULL);
        nll[i] = atof(p + 17);
    }
    snprintf(args, sizeof args, "compare --model data/demo/model --reference data/demo/model "
             "--precision hif8 --reference-precision bf16 --quant-modules 'layers.*.mlp.*' "
             "--text %s --json", txt);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 0);
    const char *p = strstr(out, "\"nll\": "), *q = strstr(out, "\"nll_reference\": ");
    ASSERT_TRUE(p && q);
    ASSERT_NEAR(nll[1], atof(p + 7), 1e-6);
    ASSERT_NEAR(nll[0], atof(q + 17), 1e-6);
    ASSERT_TRUE(fabs(nll[1] - nll[0]) > 1e-3 && fabs(nll[2] - nll[0]) > 1e-3);
    snprintf(args, sizeof args, "ppl --model data/demo/model --text %s --quant-scaling current",
             txt);
    ASSERT_EQ_INT(test_run_cli(args, out, sizeof out, err, sizeof err), 2);
    ASSERT_TRUE(strstr(err, "--quant-scaling: only with --precision hif8") != NULL);
}

/* generate --precision hif8 samples from the fake-quantized model: greedy and
 * at temperature 1 it gives the text of its HiF8 export (the real W8A8 path,
 * the same logits) where the plain bf16 model's greedy text differs. */
TEST(cli_model, generate_hif8_equals_its_export)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set (run through make test)");
    char exp[600], args[2048], out[3][4096], err[1024];
    snprintf(exp, sizeof exp, "%s/gen_hif8_export", test_tmp_dir());
    snprintf(args, sizeof args, "export --format hif8 --model data/demo/model --out %s", exp);
    ASSERT_EQ_INT(test_run_cli(args, out[0], sizeof out[0], err, sizeof err), 0);
    static const char *const runs[3][2] = {{"data/demo/model", "hif8"}, {NULL, "bf16"},
                                           {"data/demo/model", "bf16"}};
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < 3; i++) {
            snprintf(args, sizeof args, "generate --model %s --prompt 'Once upon a time' -n 40 "
                     "--precision %s %s", runs[i][0] ? runs[i][0] : exp, runs[i][1],
                     t ? "--seed 7" : "--temperature 0");
            ASSERT_EQ_INT(test_run_cli(args, out[i], sizeof out[i], err, sizeof err), 0);
        }
        ASSERT_TRUE(strlen(out[0]) > 40);
        ASSERT_EQ_STR(out[0], out[1]);
        if (t == 0)   /* the quantization shows in the greedy text */
            ASSERT_TRUE(strcmp(out[0], out[2]) != 0);
    }
}
