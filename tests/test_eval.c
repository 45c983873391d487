/* test_eval.c: the evaluator on self-made data with a toy tokenizer and LM
 * (tests/eval_fake.h): the harness tokenization split, scores equal to an
 * independent computation, batch independence, item selection, results.json
 * layout and the samples log. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eval_fake.h"
#include "qs/eval.h"
#include "qs/eval_test.h"
#include "qs/prompt.h"
#include "qs/results.h"
#include "qs/zlog.h"
#include "test.h"

#define TD "tests/data/tasks/"

static int ids_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

TEST(eval, split_moves_trailing_space_and_counts_context_tokens)
{
    eval_encoder enc = fake_encoder();
    int32_t *c = NULL, *k = NULL;
    size_t nc = 0, nk = 0;
    qs_diag d = {0};
    /* "Answer:" + " A": the continuation is the single merged token " A" */
    ASSERT_OK(eval_pair_encode_impl(&enc, -1, "Answer:", 7, " A", &c, &nc, &k, &nk, &d), &d);
    int32_t want_c[] = {FAKE_BOS, 'A', 'n', 's', 'w', 'e', 'r', ':'}, want_k[] = {256 + 'A'};
    ASSERT_TRUE(ids_eq(c, nc, want_c, 8));
    ASSERT_TRUE(ids_eq(k, nk, want_k, 1));
    qs_free(c);
    qs_free(k);
    /* trailing context space moves into the continuation: "ab " + " x" -> "ab" | "  x" */
    ASSERT_OK(eval_pair_encode_impl(&enc, 0, "ab ", 3, " x", &c, &nc, &k, &nk, &d), &d);
    int32_t want_c2[] = {'a', 'b'}, want_k2[] = {' ', 256 + 'x'};
    ASSERT_TRUE(ids_eq(c, nc, want_c2, 2));
    ASSERT_TRUE(ids_eq(k, nk, want_k2, 2));
    qs_free(c);
    qs_free(k);
    /* a context token that merges with the continuation: whole "X::y" = [X, ::, y];
     * the context alone is [X, :] (2 tokens), so the continuation is whole[2:] = [y] */
    ASSERT_OK(eval_pair_encode_impl(&enc, 0, "X:", 2, ":y", &c, &nc, &k, &nk, &d), &d);
    int32_t want_c3[] = {'X', ':'}, want_k3[] = {'y'};
    ASSERT_TRUE(ids_eq(c, nc, want_c3, 2));
    ASSERT_TRUE(ids_eq(k, nk, want_k3, 1));
    qs_free(c);
    qs_free(k);
    /* empty context: the prefix token, continuation encoded alone without BOS */
    ASSERT_OK(eval_pair_encode_impl(&enc, -1, "  ", 2, "z", &c, &nc, &k, &nk, &d), &d);
    int32_t want_c4[] = {FAKE_BOS}, want_k4[] = {' ', 256 + 'z'};
    ASSERT_TRUE(ids_eq(c, nc, want_c4, 1));
    ASSERT_TRUE(ids_eq(k, nk, want_k4, 2));
    qs_free(c);
    qs_free(k);
}

static eval_session *open_session(const char *tasks_dir, const char *data_dir, const char *task,
                                  int shots, long limit, long subset, uint64_t seed, int batch)
{
    eval_options o;
    eval_options_default(&o);
    const char *tasks[1] = {task};
    o.tasks_dir = tasks_dir;
    o.data_dir = data_dir;
    o.tasks = tasks;
    o.n_tasks = 1;
    o.shots = shots;
    o.limit = limit;
    o.subset = subset;
    o.subset_seed = seed;
    o.batch_items = batch;
    eval_encoder enc = fake_encoder();
    eval_session *s = NULL;
    qs_diag d = {0};
    if (eval_session_create(&s, &o, &enc, &d))
        fprintf(stderr, "    session: %s\n", d.msg);
    return s;
}

TEST(eval, arc_scores_equal_an_independent_computation)
{
    eval_session *s = open_session("tasks", TD "data", "arc_easy", 0, 0, 0, 0, 3);
    ASSERT_TRUE(s);
    fake_lm f = {0};
    lm_scorer lm = fake_scorer(&f);
    qs_diag d = {0};
    ASSERT_OK(eval_session_run(s, &lm, NULL, NULL, &d), &d);
    size_t n;
    const eval_item *it = eval_session_items(s, &n);
    ASSERT_EQ_INT(n, 4);
    ASSERT_EQ_INT(f.calls, 2);   /* batches of 3 */
    const task_data *td = eval_session_task_data(s, 0);
    int n_acc = 0, n_norm = 0;
    for (size_t i = 0; i < n; i++) {
        const task_doc *doc = &td->docs[i];
        char ctx[512];
        snprintf(ctx, sizeof ctx, "Question: %s\nAnswer:", doc->question);
        int32_t *cids;
        size_t nc;
        ASSERT_OK(fake_encode(NULL, ctx, strlen(ctx), 1, &cids, &nc, &d), &d);
        double ll[8], norm[8];
        for (int c = 0; c < doc->n_choices; c++) {
            char whole[600];
            snprintf(whole, sizeof whole, "%s %s", ctx, doc->choices[c]);
            int32_t *w;
            size_t nw;
            ASSERT_OK(fake_encode(NULL, whole, strlen(whole), 1, &w, &nw, &d), &d);
            ll[c] = fake_seq_logp(cids[nc - 1], w + nc, nw - nc, NULL);
            norm[c] = ll[c] / (double)prompt_utf8_len(doc->choices[c]);
            ASSERT_NEAR(it[i].loglik[c], ll[c], 1e-12);
            ASSERT_EQ_INT(it[i].n_tokens[c], (int)(nw - nc));
            qs_free(w);
        }
        ASSERT_EQ_INT(it[i].char_lens[0], (int)prompt_utf8_len(doc->choices[0]));
        ASSERT_EQ_INT(it[i].pred, scorer_argmax(ll, doc->n_choices));
        ASSERT_EQ_INT(it[i].pred_norm, scorer_argmax(norm, doc->n_choices));
        n_acc += it[i].pred == doc->gold;
        n_norm += it[i].pred_norm == doc->gold;
        qs_free(cids);
    }
    ASSERT_EQ_INT(it[1].char_lens[2], 6);   /* "100 °C": 6 code points, 7 bytes */
    int n_rows;
    const eval_row *rows = eval_session_rows(s, &n_rows);
    ASSERT_EQ_INT(n_rows, 1);
    ASSERT_NEAR(rows[0].acc.value, n_acc / 4.0, 1e-15);
    ASSERT_NEAR(rows[0].acc_norm.value, n_norm / 4.0, 1e-15);
    double p = n_acc / 4.0;
    ASSERT_NEAR(rows[0].acc.stderr_, sqrt(p * (1 - p) / 3), 1e-12);
    eval_session_destroy(s);
}

TEST(eval, results_do_not_depend_on_batch_size)
{
    double ref[64];
    int nref = 0;
    for (int b = 1; b <= 64; b *= 4) {
        eval_session *s = open_session(TD "defs", TD "data", "mmlu", 1, 0, 0, 0, b);
        ASSERT_TRUE(s);
        fake_lm f = {0};
        lm_scorer lm = fake_scorer(&f);
        qs_diag d = {0};
        ASSERT_OK(eval_session_run(s, &lm, NULL, NULL, &d), &d);
        size_t n;
        const eval_item *it = eval_session_items(s, &n);
        ASSERT_EQ_INT(n, 6);
        int k = 0;
        for (size_t i = 0; i < n; i++)
            for (int c = 0; c < it[i].n_choices; c++, k++) {
                if (b == 1)
                    ref[nref++] = it[i].loglik[c];
                else if (memcmp(&ref[k], &it[i].loglik[c], sizeof(double)))
                    TEST_FAIL_AT("batch %d item %zu choice %d differs", b, i, c);
            }
        eval_session_destroy(s);
    }
    ASSERT_EQ_INT(nref, 24);
}

TEST(eval, limit_is_per_subject_and_subset_is_seeded)
{
    eval_session *s = open_session(TD "defs", TD "data", "mmlu", 0, 2, 0, 0, 8);
    ASSERT_TRUE(s);
    size_t n;
    const eval_item *it = eval_session_items(s, &n);
    ASSERT_EQ_INT(n, 5);   /* 2 + 2 + 1 (formal_logic has one row) */
    ASSERT_EQ_INT(it[1].doc_id, 1);
    ASSERT_EQ_INT(it[2].doc_id, 0);
    eval_session_destroy(s);
    long first[3] = {0};
    for (int rep = 0; rep < 2; rep++) {
        s = open_session("tasks", TD "data", "arc_easy", 0, 0, 3, 99, 8);
        ASSERT_TRUE(s);
        it = eval_session_items(s, &n);
        ASSERT_EQ_INT(n, 3);
        ASSERT_TRUE(it[0].doc_id < it[1].doc_id && it[1].doc_id < it[2].doc_id);
        for (int i = 0; i < 3; i++) {
            if (rep == 0)
                first[i] = it[i].doc_id;
            ASSERT_EQ_INT(it[i].doc_id, first[i]);
        }
        eval_session_destroy(s);
    }
}

TEST(eval, few_shot_needs_its_split)
{
    eval_options o;
    eval_options_default(&o);
    const char *tasks[1] = {"hellaswag"};
    o.data_dir = TD "text";
    o.tasks = tasks;
    o.n_tasks = 1;
    o.shots = 2;
    eval_encoder enc = fake_encoder();
    eval_session *s = NULL;
    qs_diag d = {0};
    ASSERT_EQ_INT(eval_session_create(&s, &o, &enc, &d), QS_ENOTFOUND);
    ASSERT_TRUE(strstr(d.msg, "hellaswag few-shot (train)"));
    ASSERT_TRUE(strstr(d.msg, "hellaswag/hellaswag_train.jsonl[.zst]"));
}

static json_t *jget(json_t *o, const char *a, const char *b)
{
    return json_object_get(json_object_get(o, a), b);
}

TEST(eval, results_json_has_harness_layout)
{
    eval_session *s = open_session(TD "defs", TD "data", "mmlu", 0, 0, 0, 0, 4);
    ASSERT_TRUE(s);
    fake_lm f = {0};
    lm_scorer lm = fake_scorer(&f);
    qs_diag d = {0};
    ASSERT_OK(eval_session_run(s, &lm, NULL, NULL, &d), &d);
    char path[600];
    snprintf(path, sizeof path, "%s/results.json", test_tmp_dir());
    results_meta m = {.model_path = "toy", .model_hash = "abc", .precision = "fp32", .threads = 1,
                      .bos_added = 1, .bos_rule = "tokenizer default", .total_seconds = 1.5};
    ASSERT_OK(results_json_write(path, s, &m, &d), &d);
    json_error_t je;
    json_t *r = json_load_file(path, 0, &je);
    ASSERT_TRUE(r);
    size_t n;
    const eval_item *it = eval_session_items(s, &n);
    int right = 0;
    for (size_t i = 0; i < n; i++)
        right += it[i].correct;
    json_t *res = json_object_get(r, "results");
    ASSERT_NEAR(json_real_value(jget(res, "mmlu", "acc,none")), right / 6.0, 1e-15);
    ASSERT_TRUE(json_is_real(jget(res, "mmlu", "acc_stderr,none")) ||
                json_is_string(jget(res, "mmlu", "acc_stderr,none")));
    ASSERT_EQ_STR(json_string_value(jget(res, "mmlu", "alias")), "mmlu");
    ASSERT_EQ_STR(json_string_value(jget(res, "mmlu_stem", "alias")), " - stem");
    ASSERT_EQ_STR(json_string_value(jget(res, "mmlu_anatomy", "alias")), "  - anatomy");
    /* formal_logic has one item: stderr "N/A", and so do its group and mmlu */
    ASSERT_EQ_STR(json_string_value(jget(res, "mmlu_formal_logic", "acc_stderr,none")), "N/A");
    ASSERT_EQ_STR(json_string_value(jget(res, "mmlu", "acc_stderr,none")), "N/A");
    ASSERT_TRUE(!jget(res, "mmlu", "acc_norm,none"));
    ASSERT_TRUE(jget(json_object_get(r, "groups"), "mmlu", "acc,none"));
    ASSERT_TRUE(!json_object_get(json_object_get(r, "groups"), "mmlu_anatomy"));
    json_t *gs = jget(r, "group_subtasks", "mmlu");
    ASSERT_EQ_INT(json_array_size(gs), 2);
    ASSERT_EQ_STR(json_string_value(json_array_get(gs, 0)), "mmlu_stem");
    ASSERT_EQ_INT(json_array_size(jget(r, "group_subtasks", "mmlu_stem")), 2);
    ASSERT_EQ_INT(json_integer_value(jget(r, "versions", "mmlu")), 2);
    ASSERT_NEAR(json_real_value(jget(r, "versions", "mmlu_anatomy")), 1.0, 0);
    ASSERT_EQ_INT(json_integer_value(json_object_get(jget(r, "n-samples", "mmlu_abstract_algebra"),
                                                     "original")), 3);
    ASSERT_EQ_INT(json_integer_value(jget(r, "n-shot", "mmlu_anatomy")), 0);
    ASSERT_EQ_INT(json_integer_value(jget(r, "config", "fewshot_seed")), 1234);
    ASSERT_EQ_STR(json_string_value(jget(r, "config", "model_sha256")), "abc");
    ASSERT_TRUE(json_is_true(jget(r, "config", "add_bos_token")));
    json_t *files = jget(r, "qatscope", "data_files");
    ASSERT_EQ_INT(json_object_size(files), 3);
    json_t *f0 = json_object_get(files, TD "data/mmlu/test/abstract_algebra_test.csv");
    ASSERT_EQ_INT(strlen(json_string_value(json_object_get(f0, "sha256"))), 64);
    ASSERT_TRUE(json_is_true(json_object_get(jget(r, "higher_is_better", "mmlu_anatomy"), "acc")));
    ASSERT_EQ_STR(json_string_value(json_object_get(r, "total_evaluation_time_seconds")), "1.500");
    json_decref(r);
    eval_session_destroy(s);
}

TEST(eval, samples_log_has_one_object_per_item)
{
    eval_session *s = open_session("tasks", TD "data", "hellaswag", 0, 0, 0, 0, 2);
    ASSERT_TRUE(s);
    fake_lm f = {0};
    lm_scorer lm = fake_scorer(&f);
    qs_diag d = {0};
    ASSERT_OK(eval_session_run(s, &lm, NULL, NULL, &d), &d);
    char path[600];
    snprintf(path, sizeof path, "%s/samples.jsonl.zst", test_tmp_dir());
    ASSERT_OK(results_samples_write(path, s, &d), &d);
    zlog_reader *zr;
    ASSERT_OK(zlog_reader_create(&zr, path, &d), &d);
    const char *line;
    size_t len;
    int n = 0, rc;
    size_t n_items;
    const eval_item *it = eval_session_items(s, &n_items);
    while ((rc = zlog_next(zr, &line, &len, NULL, &d)) == 1) {
        json_error_t je;
        json_t *o = json_loadb(line, len, 0, &je);
        ASSERT_TRUE(o);
        ASSERT_EQ_STR(json_string_value(json_object_get(o, "task")), "hellaswag");
        ASSERT_EQ_INT(json_integer_value(json_object_get(o, "doc_id")), n);
        ASSERT_EQ_INT(json_array_size(json_object_get(o, "loglikelihoods")), 4);
        ASSERT_NEAR(json_real_value(json_array_get(json_object_get(o, "loglikelihoods"), 1)),
                    it[n].loglik[1], 1e-15);
        ASSERT_EQ_INT(json_integer_value(json_array_get(json_object_get(o, "char_lens"), 3)),
                      it[n].char_lens[3]);
        ASSERT_TRUE(json_object_get(o, "n_tokens") && json_object_get(o, "pred_norm"));
        ASSERT_EQ_INT(json_integer_value(json_object_get(o, "gold")), it[n].gold);
        json_decref(o);
        n++;
    }
    zlog_reader_destroy(zr);
    ASSERT_EQ_INT(rc, 0);
    ASSERT_EQ_INT(n, 3);
    eval_session_destroy(s);
}
