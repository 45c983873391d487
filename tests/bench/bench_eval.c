/* bench_eval.c: evaluator throughput, shared-prefix engine vs scoring every
 * (context, continuation) pair separately, in the same run.
 *
 * Model: the dim-288 bench config (stories15M shape: 6 layers, 6 heads,
 * hidden 768, vocab 32000, context 2048 - the harness's default max_length -
 * so that items are not left-truncated, which would score every choice on
 * its own in both modes), random weights, fp32, one thread (OpenMP and
 * OpenBLAS) so the two modes see the same machine.  Items: a seeded subset of
 * the real bench data tokenized by the Llama-2 tokenizer (32000 vocab, the one
 * a stories15M-shaped model is paired with) when ../shared is
 * present, else the self-made items of tests/data/tasks with a byte tokenizer.
 * Shared prefix: one lm_request per item (the context once, its KV kept, every
 * choice on top).  Separate: one request per (context, choice) pair, i.e. the
 * context is recomputed for every choice, as a scorer without a prefix cache
 * does.  Prints the median of BENCH_REPS runs per mode, items/s and the ratio;
 * checks that both modes give the same log-likelihoods.  Times are process
 * CPU seconds (one thread): on a shared, overloaded machine wall-clock ratios
 * of sequential passes are noise.  tok_ratio = tokens through the model,
 * separate / shared: the arithmetic bound of what prefix sharing can save.
 * Targets (issue 6): >= 2.5x on HellaSwag, >= 3x on MMLU.
 * Then few-shot MMLU in calls of 32 items against calls of one (bench_fewshot).
 * Usage: bench_eval [TASKS]   (e.g. "mmlu,hellaswag,fewshot"; default all)
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "qs/eval.h"
#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_infer.h"
#include "qs/tokenizer.h"

#define BENCH_REPS 3
#define BENCH_ITEMS 16
#define BENCH_FEWSHOT_SHOTS 5
#define BENCH_FEWSHOT_PER_SUBJECT 4

static const char bench_config[] =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":288,\"intermediate_size\":768,"
    "\"num_hidden_layers\":6,\"num_attention_heads\":6,\"num_key_value_heads\":6,"
    "\"vocab_size\":32000,\"max_position_embeddings\":2048,\"rms_norm_eps\":1e-5,"
    "\"rope_theta\":10000.0,\"tie_word_embeddings\":true,\"bos_token_id\":1,\"eos_token_id\":2}";

static int bench_tok_encode(void *self, const char *text, size_t len, int add_bos, int32_t **ids,
                            size_t *n_ids, qs_diag *d)
{
    return tokenizer_encode(self, text, len, add_bos, ids, n_ids, d);
}

/* fallback: one token per byte (+3), BOS = 1 */
static int bench_byte_encode(void *self, const char *text, size_t len, int add_bos, int32_t **ids,
                             size_t *n_ids, qs_diag *d)
{
    (void)self;
    int32_t *o = qs_malloc((len + 1) * sizeof *o);
    if (!o)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    size_t n = 0;
    if (add_bos != 0)
        o[n++] = 1;
    for (size_t i = 0; i < len; i++)
        o[n++] = 3 + (unsigned char)text[i];
    *ids = o;
    *n_ids = n;
    return 0;
}

static double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* seconds for one pass; separate = one request per (context, choice) */
static double bench_pass(const eval_session *s, const lm_scorer *lm, int separate, double *ll_out)
{
    size_t n;
    eval_session_items(s, &n);
    double t0 = bench_now();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        lm_request req;
        eval_session_request(s, i, &req);
        double ll[16];
        int gr[16];
        qs_diag d = {0};
        if (!separate) {
            lm_result res = {ll, gr};
            if (lm->score(lm->self, &req, &res, 1, &d))
                return -1;
        } else {
            for (int c = 0; c < req.n_cont; c++) {
                lm_request one = {req.ctx, req.n_ctx, 1, &req.cont[c], &req.n_cont_tok[c]};
                lm_result res = {&ll[c], &gr[c]};
                if (lm->score(lm->self, &one, &res, 1, &d))
                    return -1;
            }
        }
        for (int c = 0; c < req.n_cont; c++)
            ll_out[k++] = ll[c];
    }
    return bench_now() - t0;
}

/* seconds for one pass in calls of `per_call` items (one request each) */
static double bench_pass_calls(const eval_session *s, const lm_scorer *lm, int per_call,
                               double *ll_out)
{
    size_t n;
    eval_session_items(s, &n);
    lm_request req[64];
    lm_result res[64];
    double ll[64][16];
    int gr[64][16];
    double t0 = bench_now();
    size_t k = 0;
    for (size_t i = 0; i < n; i += (size_t)per_call) {
        size_t m = n - i < (size_t)per_call ? n - i : (size_t)per_call;
        for (size_t j = 0; j < m; j++) {
            eval_session_request(s, i + j, &req[j]);
            res[j] = (lm_result){ll[j], gr[j]};
        }
        qs_diag d = {0};
        if (lm->score(lm->self, req, res, m, &d))
            return -1;
        for (size_t j = 0; j < m; j++)
            for (int c = 0; c < req[j].n_cont; c++)
                ll_out[k++] = ll[j][c];
    }
    return bench_now() - t0;
}

/* Few-shot MMLU (5 shots: every item of a subject starts with the same
 * description and dev examples): calls of 32 items, whose contexts compute that
 * prefix once (model_lm_prefix.h), against calls of one item, computed whole as
 * before prefixes were shared, alternating; the weights packed once as eval
 * holds them.  Same log-likelihoods required. */
static int bench_fewshot(const lm_scorer *lm, model_lm *mlm, const eval_encoder *enc,
                         const char *tasks_dir, const char *data_dir)
{
    eval_options o;
    eval_options_default(&o);
    const char *one[1] = {"mmlu"};
    o.tasks_dir = tasks_dir;
    o.data_dir = data_dir;
    o.tasks = one;
    o.n_tasks = 1;
    o.shots = BENCH_FEWSHOT_SHOTS;
    o.limit = BENCH_FEWSHOT_PER_SUBJECT;
    qs_diag d = {0};
    eval_session *s = NULL;
    if (eval_session_create(&s, &o, enc, &d)) {
        fprintf(stderr, "bench_eval: mmlu %d-shot: %s\n", o.shots, d.msg);
        return 1;
    }
    size_t n, n_ll = 0, ctx_tok = 0;
    eval_session_items(s, &n);
    for (size_t i = 0; i < n; i++) {
        lm_request req;
        eval_session_request(s, i, &req);
        n_ll += (size_t)req.n_cont;
        ctx_tok += req.n_ctx;
    }
    double *ll_a = qs_calloc(n_ll + 1, sizeof *ll_a), *ll_b = qs_calloc(n_ll + 1, sizeof *ll_b);
    double ta[BENCH_REPS], tb[BENCH_REPS];
    long rows_a = 0, rows_b = 0;
    int rc = !ll_a || !ll_b;
    for (int r = 0; r < BENCH_REPS && !rc; r++) {   /* alternating, same process */
        long r0 = model_lm_ctx_rows(mlm);
        ta[r] = bench_pass_calls(s, lm, 32, ll_a);
        rows_a = model_lm_ctx_rows(mlm) - r0;
        r0 = model_lm_ctx_rows(mlm);
        tb[r] = bench_pass_calls(s, lm, 1, ll_b);
        rows_b = model_lm_ctx_rows(mlm) - r0;
        rc = ta[r] < 0 || tb[r] < 0;
    }
    if (!rc) {
        int same = !memcmp(ll_a, ll_b, n_ll * sizeof *ll_a);
        qsort(ta, BENCH_REPS, sizeof *ta, bench_cmp);
        qsort(tb, BENCH_REPS, sizeof *tb, bench_cmp);
        double ma = ta[BENCH_REPS / 2], mb = tb[BENCH_REPS / 2];
        printf("mmlu %d-shot, %ld items per subject (%zu items, %.0f context tokens each): calls of "
               "32 items %.2f it/cs, of 1 item %.2f it/cs: %.2fx; context rows %ld vs %ld (%.2fx); "
               "log-likelihoods %s\n",
               o.shots, (long)o.limit, n, (double)ctx_tok / (double)n, (double)n / ma, (double)n / mb,
               mb / ma, rows_a, rows_b, (double)rows_b / (double)rows_a,
               same ? "bit-identical" : "DIFFER");
        rc = !same;
    }
    qs_free(ll_a);
    qs_free(ll_b);
    eval_session_destroy(s);
    return rc;
}

int main(int argc, char **argv)
{
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    openblas_set_num_threads(1);
    qs_diag d = {0};
    llama_model m;
    llama_config cfg;
    memset(&m, 0, sizeof m);
    if (hfconfig_parse(&cfg, bench_config, strlen(bench_config), "bench", &d) ||
        model_init(&m, &cfg, &d)) {
        fprintf(stderr, "bench_eval: %s\n", d.msg);
        return 1;
    }
    model_params_randomize(&m, 1, 0.02f);
    model_lm *mlm = NULL;
    if (model_lm_create(&mlm, &m, 2048, &d)) {
        fprintf(stderr, "bench_eval: %s\n", d.msg);
        return 1;
    }
    lm_scorer lm = model_lm_scorer(mlm);
    tokenizer *tok = NULL;
    const char *data_dir = "../shared/bench", *tasks_dir = "tasks";
    const char *shared_tok = "../shared/tokenizers/llama2/tokenizer.json";
    eval_encoder enc = {NULL, bench_byte_encode, 1};
    if (fileio_is_dir(data_dir) && !tokenizer_create(&tok, shared_tok, &d)) {
        enc.self = tok;
        enc.encode = bench_tok_encode;
        printf("items: seeded subset of %s, tokenized by %s\n", data_dir, shared_tok);
    } else {
        data_dir = "tests/data/tasks/data";
        printf("items: self-made tests/data/tasks items, byte tokenizer (../shared absent)\n");
    }
    printf("model: dim 288, 6 layers, 6 heads, hidden 768, vocab 32000, ctx 2048, random weights, fp32, "
           "1 thread; median of %d runs; it/cs = items per CPU-second\n", BENCH_REPS);
    printf("%-14s %5s %8s %8s  %13s %13s  %6s %9s  %s\n", "task", "items", "ctx_tok", "cont_tok",
           "shared it/cs", "separate it/cs", "ratio", "tok_ratio", "max|dll|");
    static const char *const tasks[] = {"hellaswag", "mmlu", "arc_easy", "arc_challenge"};
    int rc = 0;
    for (int t = 0; t < 4 && !rc; t++) {
        if (argc > 1 && !strstr(argv[1], tasks[t]))   /* optional task filter */
            continue;
        eval_options o;
        eval_options_default(&o);
        const char *one[1] = {tasks[t]};
        o.tasks_dir = !tok && t == 1 ? "tests/data/tasks/defs" : tasks_dir;
        o.data_dir = data_dir;
        o.tasks = one;
        o.n_tasks = 1;
        o.subset = BENCH_ITEMS;
        o.subset_seed = 1;
        eval_session *s = NULL;
        if (eval_session_create(&s, &o, &enc, &d)) {
            fprintf(stderr, "bench_eval: %s: %s\n", tasks[t], d.msg);
            rc = 1;
            break;
        }
        size_t n;
        eval_session_items(s, &n);
        size_t ctx_tok = 0, cont_tok = 0, n_ll = 0, sep_tok = 0, shr_tok = 0;
        for (size_t i = 0; i < n; i++) {
            lm_request req;
            eval_session_request(s, i, &req);
            ctx_tok += req.n_ctx;
            shr_tok += req.n_ctx;
            for (int c = 0; c < req.n_cont; c++) {
                cont_tok += req.n_cont_tok[c];
                shr_tok += req.n_cont_tok[c] - 1;   /* the first is predicted by the context */
                sep_tok += req.n_ctx + req.n_cont_tok[c] - 1;
            }
            n_ll += (size_t)req.n_cont;
        }
        double *ll_a = qs_calloc(n_ll + 1, sizeof *ll_a), *ll_b = qs_calloc(n_ll + 1, sizeof *ll_b);
        double ts[BENCH_REPS], tp[BENCH_REPS];
        for (int r = 0; r < BENCH_REPS && ll_a && ll_b; r++) {
            ts[r] = bench_pass(s, &lm, 0, ll_a);
            tp[r] = bench_pass(s, &lm, 1, ll_b);
            if (ts[r] < 0 || tp[r] < 0)
                rc = 1;
        }
        double dmax = 0;
        for (size_t k = 0; k < n_ll; k++)
            dmax = fmax(dmax, fabs(ll_a[k] - ll_b[k]));
        qsort(ts, BENCH_REPS, sizeof *ts, bench_cmp);
        qsort(tp, BENCH_REPS, sizeof *tp, bench_cmp);
        double ms = ts[BENCH_REPS / 2], mp = tp[BENCH_REPS / 2];
        printf("%-14s %5zu %8.1f %8.1f  %13.2f %13.2f  %5.2fx %8.2fx  %.2g\n", tasks[t], n,
               (double)ctx_tok / (double)n, (double)cont_tok / (double)n_ll, (double)n / ms,
               (double)n / mp, mp / ms, (double)sep_tok / (double)shr_tok, dmax);
        fflush(stdout);
        qs_free(ll_a);
        qs_free(ll_b);
        eval_session_destroy(s);
    }
    if (!rc && (argc < 2 || strstr(argv[1], "fewshot"))) {
        /* packed once, as `qatscope eval` holds its weights (model_load_packed): the
         * table above packs every product's weights on every call, a per-forward
         * cost that would count against the calls with more, smaller forwards */
        if (model_packs_create(&m, &d)) {
            fprintf(stderr, "bench_eval: %s\n", d.msg);
            rc = 1;
        } else {
            rc = bench_fewshot(&lm, mlm, &enc, tok ? tasks_dir : "tests/data/tasks/defs",
                               data_dir);
        }
    }
    tokenizer_destroy(tok);
    model_lm_destroy(mlm);
    model_free(&m);
    return rc;
}
