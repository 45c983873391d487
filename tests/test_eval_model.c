/* test_eval_model.c: the evaluator with the real model (stories260K from
 * ../shared, skipped when absent): every choice's log-likelihood equals an
 * independent full forward of context+continuation (1e-5 absolute), a choice's
 * log-likelihood is bit-identical whether its siblings are batched with it or
 * not, results are identical for any batch size and thread count (fp32, and
 * hif8 with current and delayed scaling), and a subset of the real bench data
 * runs end to end through the CLI (the full run is tools/eval_full_stories260k.sh).
 * QS_CPU=scalar|avx2|avx512 caps the CPU level for these tests as it does for
 * the CLI. */
#include <cblas.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "qs/cpu.h"
#include "qs/eval.h"
#include "qs/evalquant.h"
#include "qs/fileio.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"
#include "qs/runcfg.h"
#include "qs/tokenizer.h"
#include "qs/trainstate.h"
#include "test.h"

#define TD "tests/data/tasks/"
/* Brute force vs shared prefix: fp32 forwards of different shapes (T = n_ctx,
 * then the continuations on the KV cache at pos0 = n_ctx padded to the longest
 * sibling, vs one T = n_ctx+n_cont-1 pass).  With AVX-512 every layer is
 * row-invariant (our GEMM sums each output in the same k order whatever M and
 * N; attention, layer_attn_impl.h, whatever T, pos0 and B; the element-wise
 * layers are per row), so each token's logits are the same bits and only the
 * double sum of the token log-probs is associated differently: measured worst
 * |diff| ~2e-15.  The choice is checked at EVAL_BRUTE_TOL absolute.  Without
 * AVX-512 the fp32 matmuls go to OpenBLAS sgemm, whose summation order depends
 * on the shape: ~1e-7 relative per token, so that case keeps a per-token
 * tolerance (a continuation's sum carries one such error per token). */
#define EVAL_BRUTE_TOL 1e-5
#define EVAL_BRUTE_TOL_PER_TOKEN 1e-5

/* QS_CPU caps the level (as the CLI does); returns the level to restore. */
static int cpu_from_env(void)
{
    int saved = cpu_level();
    const char *e = getenv("QS_CPU");
    if (e && cpu_level_parse(e) >= 0)
        cpu_limit(cpu_level_parse(e));
    return saved;
}

static double brute_tol(size_t n_tok)
{
    return cpu_level() >= CPU_LEVEL_AVX512 ? EVAL_BRUTE_TOL
                                           : EVAL_BRUTE_TOL_PER_TOKEN * (double)n_tok;
}

static int tok_encode_cb(void *self, const char *text, size_t len, int add_bos, int32_t **ids,
                         size_t *n_ids, qs_diag *d)
{
    return tokenizer_encode(self, text, len, add_bos, ids, n_ids, d);
}

/* One thread for OpenMP and OpenBLAS while a test runs: the model's
 * per-request forwards are small, and on a loaded machine spinning thread
 * pools cost more than they give (restored by threads_restore). */
typedef struct threads_saved {
    int omp, blas;
} threads_saved;

static threads_saved threads_pin_one(void)
{
    threads_saved t = {1, openblas_get_num_threads()};
#ifdef _OPENMP
    t.omp = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    openblas_set_num_threads(1);
    return t;
}

static void threads_restore(threads_saved t)
{
#ifdef _OPENMP
    omp_set_num_threads(t.omp);
#endif
    openblas_set_num_threads(t.blas);
}

typedef struct real_lm {
    tokenizer *tok;
    llama_model m;
    model_lm *lm;
    evalquant *eq;   /* hif8 only */
} real_lm;

/* hif8: NULL for fp32, else what `eval --precision hif8` sets up (bf16 matmuls
 * + HiF8 W8A8 fake-quant of the planned Linears). */
static int real_lm_open_as(real_lm *r, const char *dir, const evalquant_options *hif8)
{
    qs_diag d = {0};
    memset(r, 0, sizeof *r);
    if (tokenizer_create(&r->tok, dir, &d) || model_load_dir(&r->m, dir, &d))
        goto fail;
    if (hif8) {
        r->m.precision = MATMUL_BF16;
        if (evalquant_create_opts(&r->eq, &r->m, hif8, &d))
            goto fail;
    }
    if (model_lm_create(&r->lm, &r->m, hfconfig_max_context(&r->m.cfg), &d))
        goto fail;
    return 0;
fail:
    fprintf(stderr, "    %s: %s\n", d.path, d.msg);
    return -1;
}

static int real_lm_open(real_lm *r, const char *dir)
{
    return real_lm_open_as(r, dir, NULL);
}

static void real_lm_close(real_lm *r)
{
    model_lm_destroy(r->lm);
    evalquant_destroy(r->eq);
    model_free(&r->m);
    tokenizer_destroy(r->tok);
}

static eval_session *real_session(real_lm *r, const char *tasks_dir, const char *task, int shots,
                                  int batch)
{
    eval_options o;
    eval_options_default(&o);
    const char *tasks[1] = {task};
    o.tasks_dir = tasks_dir;
    o.data_dir = TD "data";
    o.tasks = tasks;
    o.n_tasks = 1;
    o.shots = shots;
    o.batch_items = batch;
    eval_encoder enc = {r->tok, tok_encode_cb, tokenizer_bos_id(r->tok)};
    eval_session *s = NULL;
    qs_diag d = {0};
    lm_scorer lm = model_lm_scorer(r->lm);
    if (eval_session_create(&s, &o, &enc, &d) || eval_session_run(s, &lm, NULL, NULL, &d)) {
        fprintf(stderr, "    %s: %s\n", task, d.msg);
        eval_session_destroy(s);
        return NULL;
    }
    return s;
}

/* sum of log p(cont | ctx) from ONE forward of ctx+cont, from scratch */
static int brute_loglik(llama_model *m, const int32_t *ctx, size_t nc, const int32_t *cont,
                        size_t nk, double *out)
{
    int T = (int)(nc + nk - 1);
    int32_t *seq = qs_malloc((nc + nk) * sizeof *seq);
    llama_acts a;
    qs_diag d = {0};
    memcpy(seq, ctx, nc * sizeof *seq);
    memcpy(seq + nc, cont, nk * sizeof *seq);
    if (!seq || model_acts_init(&a, &m->cfg, 1, T, T, 0, &d)) {
        qs_free(seq);
        return -1;
    }
    int rc = model_forward(m, &a, seq, NULL, 1, T, 0, &d);
    int V = m->cfg.vocab_size;
    double ll = 0;
    for (size_t i = 0; !rc && i < nk; i++) {
        const float *row = a.logits + (size_t)(nc - 1 + i) * V;
        double mx = row[0], s = 0;
        for (int v = 1; v < V; v++)
            mx = row[v] > mx ? row[v] : mx;
        for (int v = 0; v < V; v++)
            s += exp((double)row[v] - mx);
        ll += (double)row[cont[i]] - mx - log(s);
    }
    model_acts_free(&a);
    qs_free(seq);
    *out = ll;
    return rc;
}

TEST(eval_model, shared_prefix_equals_brute_force_forward)
{
    char dir[512];
    if (!test_shared_path(dir, sizeof dir, "models/stories260K/model.safetensors"))
        SKIP("../shared/models/stories260K not present");
    test_shared_path(dir, sizeof dir, "models/stories260K");
    real_lm r;
    ASSERT_EQ_INT(real_lm_open(&r, dir), 0);
    threads_saved ts = threads_pin_one();
    const int level = cpu_from_env();
    static const struct {
        const char *tasks_dir, *task;
        int shots;
    } runs[] = {{"tasks", "arc_easy", 1}, {TD "defs", "mmlu", 1}, {"tasks", "hellaswag", 0},
                {"tasks", "arc_challenge", 0}};
    int checked = 0;
    double worst = 0;
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        eval_session *s = real_session(&r, runs[k].tasks_dir, runs[k].task, runs[k].shots, 4);
        ASSERT_TRUE(s);
        size_t n;
        const eval_item *it = eval_session_items(s, &n);
        for (size_t i = 0; i < n; i++) {
            lm_request req;
            eval_session_request(s, i, &req);
            ASSERT_EQ_INT(req.ctx[0], 1);   /* the Llama tokenizer's BOS */
            for (int c = 0; c < req.n_cont; c++) {
                double ref;
                ASSERT_EQ_INT(brute_loglik(&r.m, req.ctx, req.n_ctx, req.cont[c], req.n_cont_tok[c],
                                           &ref), 0);
                worst = fmax(worst, fabs(ref - it[i].loglik[c]));
                ASSERT_NEAR(it[i].loglik[c], ref, brute_tol(req.n_cont_tok[c]));
                checked++;
            }
        }
        eval_session_destroy(s);
    }
    ASSERT_TRUE(checked >= 40);
    if (getenv("QS_EVAL_VERBOSE"))
        fprintf(stderr, "    %d choices at %s, worst |diff| %.3g\n", checked,
                cpu_level_name(cpu_level()), worst);
    cpu_limit(level);
    threads_restore(ts);
    real_lm_close(&r);
}

/* Scores every choice of `task` (its session scored the items batched: the
 * context once, the endings on its KV cache padded to the longest) again ALONE
 * and compares: bit-identical when `exact`, else within the per-token
 * tolerance.  Adds to *checked and *lengths_differ, raises *worst. */
static void siblings_check(real_lm *r, const char *task, int exact, int *checked,
                           int *lengths_differ, double *worst)
{
    lm_scorer lm = model_lm_scorer(r->lm);
    qs_diag d = {0};
    eval_session *s = real_session(r, "tasks", task, 0, 4);
    ASSERT_TRUE(s);
    size_t n;
    const eval_item *it = eval_session_items(s, &n);
    for (size_t i = 0; i < n; i++) {
        lm_request req;
        eval_session_request(s, i, &req);
        for (int c = 0; c < req.n_cont; c++, (*checked)++) {
            double alone;
            lm_request one = {req.ctx, req.n_ctx, 1, req.cont + c, req.n_cont_tok + c};
            lm_result r1 = {&alone, NULL};
            ASSERT_OK(lm.score(lm.self, &one, &r1, 1, &d), &d);
            *lengths_differ |= req.n_cont_tok[c] != req.n_cont_tok[0];
            if (exact && memcmp(&alone, &it[i].loglik[c], sizeof alone))
                TEST_FAIL_AT("%s item %zu choice %d: alone %.17g, batched %.17g", task, i, c,
                             alone, it[i].loglik[c]);
            if (!exact)
                ASSERT_NEAR(alone, it[i].loglik[c], brute_tol(req.n_cont_tok[c]));
            *worst = fmax(*worst, fabs(alone - it[i].loglik[c]));
        }
    }
    eval_session_destroy(s);
}

/* A choice's log-likelihood does not depend on its siblings' lengths: bit-
 * identical with AVX-512; without it the batch changes the row count of the
 * sgemm calls, so it is checked at the per-token tolerance (EVAL_BRUTE_TOL). */
TEST(eval_model, a_choice_does_not_move_with_its_siblings)
{
    char dir[512];
    if (!test_shared_path(dir, sizeof dir, "models/stories260K/model.safetensors"))
        SKIP("../shared/models/stories260K not present");
    test_shared_path(dir, sizeof dir, "models/stories260K");
    real_lm r;
    ASSERT_EQ_INT(real_lm_open(&r, dir), 0);
    threads_saved ts = threads_pin_one();
    const int level = cpu_from_env(), exact = cpu_level() >= CPU_LEVEL_AVX512;
    int checked = 0, lengths_differ = 0;
    double worst = 0;
    siblings_check(&r, "hellaswag", exact, &checked, &lengths_differ, &worst);
    siblings_check(&r, "arc_challenge", exact, &checked, &lengths_differ, &worst);
    ASSERT_TRUE(checked >= 20 && lengths_differ);
    if (getenv("QS_EVAL_VERBOSE"))
        fprintf(stderr, "    %d choices at %s, worst |alone - batched| %.3g\n", checked,
                cpu_level_name(cpu_level()), worst);
    cpu_limit(level);
    threads_restore(ts);
    real_lm_close(&r);
}

/* Run 0: one thread, batch 64; run 1: batch 1 (must be bit-identical); run 2:
 * all OpenMP threads (OpenBLAS pinned to 1: bit-identical); run 3: OpenBLAS
 * threads.  OpenBLAS's threaded sgemm sums in a different order than its
 * single-threaded one (found here: ~1e-6 on stories260K), so run 3 is
 * compared with the per-token fp32 tolerance. */
TEST(eval_model, scores_do_not_depend_on_batch_or_threads)
{
    char dir[512];
    if (!test_shared_path(dir, sizeof dir, "models/stories260K/model.safetensors"))
        SKIP("../shared/models/stories260K not present");
    test_shared_path(dir, sizeof dir, "models/stories260K");
    real_lm r;
    ASSERT_EQ_INT(real_lm_open(&r, dir), 0);
    double ref[256];
    int nref = 0;
    long ctx_rows[4];
    threads_saved ts = threads_pin_one();
    for (int run = 0; run < 4; run++) {
#ifdef _OPENMP
        omp_set_num_threads(run == 2 ? (ts.omp > 1 ? ts.omp : 2) : 1);
#endif
        openblas_set_num_threads(run == 3 ? (ts.blas > 1 ? ts.blas : 2) : 1);
        long rows0 = model_lm_ctx_rows(r.lm);
        eval_session *s = real_session(&r, TD "defs", "mmlu", 2, run == 1 ? 1 : 64);
        ctx_rows[run] = model_lm_ctx_rows(r.lm) - rows0;
        threads_pin_one();
        ASSERT_TRUE(s);
        size_t n;
        const eval_item *it = eval_session_items(s, &n);
        int k = 0;
        for (size_t i = 0; i < n; i++)
            for (int c = 0; c < it[i].n_choices && k < 256; c++, k++) {
                if (run == 0)
                    ref[nref++] = it[i].loglik[c];
                else if (run < 3 && ref[k] != it[i].loglik[c])
                    TEST_FAIL_AT("run %d item %zu choice %d: %.17g != %.17g", run, i, c,
                                 it[i].loglik[c], ref[k]);
                else if (run == 3)
                    ASSERT_NEAR(it[i].loglik[c], ref[k],
                                EVAL_BRUTE_TOL_PER_TOKEN * it[i].n_tokens[c]);
            }
        eval_session_destroy(s);
    }
    ASSERT_EQ_INT(nref, 24);
    /* batched, a subject's items computed their 2-shot prefix once; alone, whole
     * (without row-independent products every item is computed whole) */
    if (getenv("QS_EVAL_VERBOSE"))
        fprintf(stderr, "    context rows: batch 64 %ld, batch 1 %ld\n", ctx_rows[0], ctx_rows[1]);
    if (matmul_rows_independent(r.m.precision))
        ASSERT_TRUE(ctx_rows[0] < ctx_rows[1]);
    else
        ASSERT_TRUE(ctx_rows[0] == ctx_rows[1]);
    threads_restore(ts);
    real_lm_close(&r);
}

/* A run checkpoint as evalquant reads it, made by hand: RUN/config.json (the
 * snapshot: quant_modules *.mlp.*, default estimator) and
 * RUN/ckpt/step_3/train_state.bin with a 3-step amax history per quantizer
 * (inputs ~8, weights ~1: plausible for stories260K, some clipping is fine). */
static int fake_run_state(const char *run, int n_layers, char *ck, size_t ck_bytes)
{
    qs_diag d = {0};
    char path[700];
    snprintf(ck, ck_bytes, "%s/ckpt/step_3", run);
    runcfg c;
    runcfg_defaults(&c);
    if (fileio_mkdir_p(ck, &d) || runcfg_set(&c, "quant_modules=*.mlp.*", &d))
        return -1;
    char *js = runcfg_to_json(&c);
    snprintf(path, sizeof path, "%s/config.json", run);
    int rc = js ? fileio_write_atomic(path, js, strlen(js), &d) : -1;
    qs_free(js);
    static const char *const kinds[3] = {"gate_proj", "up_proj", "down_proj"};
    unsigned char amax[64 * 1024], *p = amax;
    for (int l = 0; l < n_layers && !rc; l++)
        for (int k = 0; k < 3; k++)
            for (int w = 0; w < 2; w++) {
                char name[96];
                uint32_t nl = (uint32_t)snprintf(name, sizeof name, "layers.%d.mlp.%s.%s", l,
                                                 kinds[k], w ? "weight" : "input");
                uint32_t nv = 3;
                float h[3] = {w ? 0.9f : 7.0f, w ? 1.1f : 8.5f, w ? 1.0f : 6.0f};
                memcpy(p, &nl, 4);
                memcpy(p + 4, name, nl);
                memcpy(p + 4 + nl, &nv, 4);
                memcpy(p + 8 + nl, h, sizeof h);
                p += 8 + nl + sizeof h;
            }
    static const char meta[] = "{\"format\":\"qatscope-train-state\",\"step\":3}";
    trainstate_writer tw;
    snprintf(path, sizeof path, "%s/train_state.bin", ck);
    if (rc || trainstate_write_begin(&tw, path, 2, &d))
        return -1;
    if (trainstate_write_section(&tw, "meta", meta, sizeof meta - 1, &d) ||
        trainstate_write_section(&tw, "amax", amax, (size_t)(p - amax), &d)) {
        trainstate_write_abort(&tw);
        return -1;
    }
    return trainstate_write_commit(&tw, &d);
}

/* --precision hif8, current and delayed scaling: the same runs as above.  The
 * fake-quant is elementwise at a scale that depends only on the tensor of one
 * Linear call (current) or on nothing computed (delayed), and every forward of
 * a request has the same rows whatever the batch, so runs 1 and 2 must be
 * bit-identical.  Run 3 (OpenBLAS threads): measured bit-identical too (the
 * bf16 matmuls do not go through OpenBLAS), but where a threaded sgemm does
 * sum in another order, a last-bit change of one activation can move it across
 * a HiF8 rounding boundary (3-bit mantissa: up to 1/8 relative), hence a
 * tolerance 100x the fp32 one. */
#define EVAL_HIF8_THREADS_TOL_PER_TOKEN 1e-3
TEST(eval_model, hif8_scores_do_not_depend_on_batch_or_threads)
{
    char dir[512], run_dir[600], ck[700];
    if (!test_shared_path(dir, sizeof dir, "models/stories260K/model.safetensors"))
        SKIP("../shared/models/stories260K not present");
    test_shared_path(dir, sizeof dir, "models/stories260K");
    snprintf(run_dir, sizeof run_dir, "%s/hif8_fake_run", test_tmp_dir());
    ASSERT_EQ_INT(fake_run_state(run_dir, 5, ck, sizeof ck), 0);
    threads_saved ts = threads_pin_one();
    double worst3 = 0;
    for (int scaling = 0; scaling < 2; scaling++) {
        evalquant_options o = {"*.mlp.*", scaling ? EVALQUANT_DELAYED : EVALQUANT_CURRENT, ck};
        real_lm r;
        ASSERT_EQ_INT(real_lm_open_as(&r, dir, &o), 0);
        ASSERT_EQ_INT(evalquant_scaling(r.eq), o.scaling);
        static const char *const tasks[2] = {"mmlu", "arc_easy"};
        for (int t = 0; t < 2; t++) {
            double ref[512];
            int nref = 0;
            for (int run = 0; run < 4; run++) {
#ifdef _OPENMP
                omp_set_num_threads(run == 2 ? (ts.omp > 1 ? ts.omp : 2) : 1);
#endif
                openblas_set_num_threads(run == 3 ? (ts.blas > 1 ? ts.blas : 2) : 1);
                eval_session *s = real_session(&r, t ? "tasks" : TD "defs", tasks[t], t ? 0 : 2,
                                               run == 1 ? 1 : 64);
                threads_pin_one();
                ASSERT_TRUE(s);
                size_t n;
                const eval_item *it = eval_session_items(s, &n);
                int k = 0;
                for (size_t i = 0; i < n; i++)
                    for (int c = 0; c < it[i].n_choices && k < 512; c++, k++) {
                        double v = it[i].loglik[c];
                        ASSERT_TRUE(isfinite(v));
                        if (run == 0)
                            ref[nref++] = v;
                        else if (run < 3 && ref[k] != v)
                            TEST_FAIL_AT("%s scaling %d run %d item %zu choice %d: %.17g != %.17g",
                                         tasks[t], scaling, run, i, c, v, ref[k]);
                        else if (run == 3) {
                            worst3 = fmax(worst3, fabs(v - ref[k]) / it[i].n_tokens[c]);
                            ASSERT_NEAR(v, ref[k], EVAL_HIF8_THREADS_TOL_PER_TOKEN * it[i].n_tokens[c]);
                        }
                    }
                eval_session_destroy(s);
            }
            ASSERT_TRUE(nref >= 12);
        }
        real_lm_close(&r);
    }
    if (getenv("QS_EVAL_VERBOSE"))
        fprintf(stderr, "    OpenBLAS threads: worst |diff| per token %.3g\n", worst3);
    threads_restore(ts);
}

/* The CLI on the real bench layout, a few items per task (every task, every
 * MMLU subject); checks results.json and that --data-dir ../shared/bench works. */
TEST(eval_model, cli_runs_on_shared_bench_layout)
{
    char model[512], bench[512], cmd[2400], out[600], samples[600];
    if (!test_shared_path(model, sizeof model, "models/stories260K/model.safetensors") ||
        !test_shared_path(bench, sizeof bench, "bench/mmlu"))
        SKIP("../shared/models/stories260K or ../shared/bench not present");
    test_shared_path(model, sizeof model, "models/stories260K");
    test_shared_path(bench, sizeof bench, "bench");
    const char *bin = getenv("QS_BIN");
    if (!bin)
        SKIP("QS_BIN not set (run through make test)");
    snprintf(out, sizeof out, "%s/cli_results.json", test_tmp_dir());
    snprintf(samples, sizeof samples, "%s/cli_samples.jsonl.zst", test_tmp_dir());
    snprintf(cmd, sizeof cmd, "%s eval --model %s --tasks arc_easy,arc_challenge,hellaswag,mmlu "
             "--data-dir %s --limit 1 --threads 1 --output %s --log-samples %s > /dev/null", bin, model, bench,
             out, samples);
    ASSERT_EQ_INT(system(cmd), 0);
    json_error_t je;
    json_t *r = json_load_file(out, 0, &je);
    ASSERT_TRUE(r);
    json_t *res = json_object_get(r, "results");
    ASSERT_EQ_INT(json_object_size(res), 3 + 1 + 4 + 57);
    json_t *ns = json_object_get(r, "n-samples");
    ASSERT_EQ_INT(json_integer_value(json_object_get(json_object_get(ns, "hellaswag"), "original")),
                  10042);
    ASSERT_EQ_INT(json_integer_value(json_object_get(json_object_get(ns, "arc_easy"), "original")),
                  2376);
    ASSERT_EQ_INT(json_integer_value(json_object_get(json_object_get(ns, "mmlu_anatomy"),
                                                     "original")), 135);
    json_t *fmt = json_object_get(json_object_get(r, "qatscope"), "data_format");
    ASSERT_TRUE(strstr(json_string_value(json_object_get(fmt, "hellaswag")), "as given"));
    ASSERT_EQ_INT(strlen(json_string_value(json_object_get(json_object_get(r, "config"),
                                                           "model_sha256"))), 64);
    json_decref(r);
    /* missing data: one error line listing the paths, exit 2, no output file */
    snprintf(out, sizeof out, "%s/cli_missing.json", test_tmp_dir());
    snprintf(cmd, sizeof cmd, "%s eval --model %s --tasks arc_easy --data-dir %s --output %s "
             "2> %s/cli_missing.err", bin, model, test_tmp_dir(), out, test_tmp_dir());
    ASSERT_EQ_INT(WEXITSTATUS(system(cmd)), 2);
    ASSERT_TRUE(!fileio_exists(out));
}

/* A choice's log-likelihood with hif8 is the same whether its sibling choices
 * share its continuation forward or it is scored alone: delayed scales are
 * fixed, current scaling takes each activation row's own amax, the fake-quant
 * is elementwise, so nothing couples the rows (both scalings; bit-identical
 * with AVX-512, the per-token tolerance without, as the fp32 test above). */
TEST(eval_model, hif8_choice_scores_do_not_depend_on_siblings)
{
    char dir[512], run_dir[600], ck[700];
    if (!test_shared_path(dir, sizeof dir, "models/stories260K/model.safetensors"))
        SKIP("../shared/models/stories260K not present");
    test_shared_path(dir, sizeof dir, "models/stories260K");
    snprintf(run_dir, sizeof run_dir, "%s/hif8_fake_run_sib", test_tmp_dir());
    ASSERT_EQ_INT(fake_run_state(run_dir, 5, ck, sizeof ck), 0);
    threads_saved ts = threads_pin_one();
    const int level = cpu_from_env(), exact = cpu_level() >= CPU_LEVEL_AVX512;
    for (int scaling = 0; scaling < 2; scaling++) {
        evalquant_options o = {"*.mlp.*", scaling ? EVALQUANT_DELAYED : EVALQUANT_CURRENT, ck};
        real_lm r;
        ASSERT_EQ_INT(real_lm_open_as(&r, dir, &o), 0);
        double worst = 0;
        int checked = 0, lengths_differ = 0;
        siblings_check(&r, "arc_easy", exact, &checked, &lengths_differ, &worst);
        siblings_check(&r, "hellaswag", exact, &checked, &lengths_differ, &worst);
        ASSERT_TRUE(checked >= 20);
        if (getenv("QS_EVAL_VERBOSE"))
            fprintf(stderr, "    %s scaling: %d choices, worst |alone - with siblings| %.3g\n",
                    scaling ? "delayed" : "current", checked, worst);
        real_lm_close(&r);
    }
    cpu_limit(level);
    threads_restore(ts);
}
