/* test_cli_train_kl.c: the in-loop KL against the step-0 weights in bf16
 * (eval_kl_reference): logged on every eval line, equal after a resume, and a
 * base model that changed under a run is refused on resume. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "qs/dataloader.h"
#include "qs/fileio.h"
#include "qs/hfconfig.h"
#include "qs/matmul.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"
#include "qs/mem.h"
#include "qs/runcfg.h"
#include "qs/tokenizer.h"
#include "qs/trainer.h"
#include "test.h"

static int kl_cli(const char *args)
{
    const char *bin = getenv("QS_BIN");
    if (!bin)
        return -100;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s >%s/kl_out.txt 2>&1", bin, args, test_tmp_dir());
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -102;
}

/* a copy of the demo model (its base may be edited) and shards with a val split */
static int kl_setup(char *model, size_t model_bytes, char *shards, size_t shards_bytes)
{
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json",
                                        "tokenizer.model", "tokenizer_config.json"};
    snprintf(model, model_bytes, "%s/kl_base", test_tmp_dir());
    snprintf(shards, shards_bytes, "%s/kl_shards", test_tmp_dir());
    if (fileio_mkdir_p(model, NULL))
        return -1;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char src[256], dst[700], *data;
        size_t n;
        snprintf(src, sizeof src, "data/demo/model/%s", files[i]);
        snprintf(dst, sizeof dst, "%s/%s", model, files[i]);
        if (fileio_read_all(src, &data, &n, NULL))
            return -1;
        int rc = fileio_write_atomic(dst, data, n, NULL);
        qs_free(data);
        if (rc)
            return -1;
    }
    char args[1600];
    snprintf(args, sizeof args, "tokenize --model %s --input data/demo/train.txt --out %s "
             "--val-fraction 0.1", model, shards);
    return kl_cli(args);
}

static int kl_train(const char *model, const char *shards, const char *bench, const char *name,
                    const char *flags)
{
    char path[700], js[3000], args[1600];
    snprintf(path, sizeof path, "%s/kl_%s.json", test_tmp_dir(), name);
    int n = snprintf(js, sizeof js,
                     "{\"model\":\"%s\",\"train_data\":\"%s\",\"out_dir\":\"%s/kl_%s\","
                     "\"batch_size\":2,\"seq_len\":16,\"steps\":4,\"lr\":3e-3,"
                     "\"bf16_warmup_steps\":1,\"quant_modules\":[\"layers.*.mlp.*\"],"
                     "\"eval_every\":1,\"eval_tasks\":[\"arc_easy\"],\"eval_data_dir\":\"%s\","
                     "\"eval_subset\":4,\"eval_val_batches\":2,\"ckpt_every\":2}",
                     model, shards, test_tmp_dir(), name, bench);
    if (fileio_write_atomic(path, js, (size_t)n, NULL))
        return -201;
    snprintf(args, sizeof args, "train --config %s --quiet %s", path, flags);
    return kl_cli(args);
}

/* the eval lines of a run's metrics.jsonl, concatenated */
static char *kl_eval_lines(const char *name)
{
    char path[700], *text;
    size_t n;
    snprintf(path, sizeof path, "%s/kl_%s/metrics.jsonl", test_tmp_dir(), name);
    if (fileio_read_all(path, &text, &n, NULL))
        return NULL;
    char *out = qs_malloc(n + 1), *o = out;
    for (char *l = text; out && *l;) {
        char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) + 1 : strlen(l);
        if (!strncmp(l, "{\"type\":\"eval\"", 14)) {
            memcpy(o, l, len);
            o += len;
        }
        l += len;
    }
    if (out)
        *o = 0;
    qs_free(text);
    return out;
}

static double kl_num(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

TEST(cli_train_kl, logged_every_eval_equal_after_resume_and_base_checked)
{
    char bench[512], model[600], shards[600];
    if (!getenv("QS_BIN") || !test_shared_path(bench, sizeof bench, "bench/arc"))
        SKIP("QS_BIN or ../shared/bench/arc not present");
    bench[strlen(bench) - 4] = 0;
    ASSERT_EQ_INT(kl_setup(model, sizeof model, shards, sizeof shards), 0);
    ASSERT_EQ_INT(kl_train(model, shards, bench, "straight", ""), 0);
    char *a = kl_eval_lines("straight");
    ASSERT_TRUE(a != NULL);
    int n_eval = 0;
    for (const char *e = a; (e = strstr(e, "{\"type\":\"eval\"")); e++, n_eval++) {
        double kl = kl_num(e, "\"val_kl_ref\":"), top1 = kl_num(e, "\"val_top1_ref\":");
        ASSERT_TRUE(kl >= 0 && kl < 5 && top1 >= 0 && top1 <= 1);
        if (n_eval == 0) {   /* step 0: the fp32 master weights against their bf16 form */
            ASSERT_TRUE(kl > 0 && kl < 1e-2 && top1 > 0.9);
        }
    }
    ASSERT_EQ_INT(n_eval, 5);
    /* training at a high lr moves the distribution away from the reference */
    const char *last = strstr(a, "{\"type\":\"eval\",\"step\":4,");
    ASSERT_TRUE(last && kl_num(last, "\"val_kl_ref\":") > kl_num(a, "\"val_kl_ref\":"));
    char path[800], *rec;
    size_t n;
    snprintf(path, sizeof path, "%s/kl_straight/kl_reference.json", test_tmp_dir());
    ASSERT_OK(fileio_read_all(path, &rec, &n, NULL), NULL);
    ASSERT_TRUE(strstr(rec, "\"model_sha256\": \"") != NULL);
    qs_free(rec);

    /* the same run in two halves logs the same eval lines, byte for byte */
    ASSERT_EQ_INT(kl_train(model, shards, bench, "halves", "--steps 2"), 0);
    char args[1200];
    snprintf(args, sizeof args, "train --resume %s/kl_halves --set steps=4 --quiet",
             test_tmp_dir());
    ASSERT_EQ_INT(kl_cli(args), 0);
    char *b = kl_eval_lines("halves");
    ASSERT_TRUE(b != NULL);
    ASSERT_EQ_STR(a, b);
    qs_free(a);
    qs_free(b);

    /* the base model changes under the run: the resume is refused, one line */
    ASSERT_EQ_INT(kl_train(model, shards, bench, "moved", "--steps 2"), 0);
    snprintf(path, sizeof path, "%s/config.json", model);
    char *cfg;
    ASSERT_OK(fileio_read_all(path, &cfg, &n, NULL), NULL);
    char *edited = qs_malloc(n + 2);
    ASSERT_TRUE(edited != NULL);
    memcpy(edited, cfg, n);
    edited[n] = '\n';
    ASSERT_OK(fileio_write_atomic(path, edited, n + 1, NULL), NULL);
    snprintf(args, sizeof args, "train --resume %s/kl_moved --set steps=4 --quiet",
             test_tmp_dir());
    int rc = kl_cli(args);
    ASSERT_OK(fileio_write_atomic(path, cfg, n, NULL), NULL);   /* restore the base */
    qs_free(cfg);
    qs_free(edited);
    ASSERT_EQ_INT(rc, 2);
    char *out;
    snprintf(path, sizeof path, "%s/kl_out.txt", test_tmp_dir());
    ASSERT_OK(fileio_read_all(path, &out, &n, NULL), NULL);
    ASSERT_TRUE(strstr(out, "kl_reference.json") && strstr(out, "restore the base model"));
    ASSERT_TRUE(strchr(out, '\n') == out + strlen(out) - 1);
    qs_free(out);
}

TEST(cli_train_kl, off_without_qat_and_explicit_true_needs_val_batches)
{
    char bench[512];
    if (!getenv("QS_BIN") || !test_shared_path(bench, sizeof bench, "bench/arc"))
        SKIP("QS_BIN or ../shared/bench/arc not present");
    bench[strlen(bench) - 4] = 0;
    char model[600], shards[600];
    ASSERT_EQ_INT(kl_setup(model, sizeof model, shards, sizeof shards), 0);
    ASSERT_EQ_INT(kl_train(model, shards, bench, "noqat", "--steps 1 --set qat=false"), 0);
    char *a = kl_eval_lines("noqat");
    ASSERT_TRUE(a && strstr(a, "\"val_loss\":") && !strstr(a, "val_kl_ref"));
    qs_free(a);
    char path[700];
    snprintf(path, sizeof path, "%s/kl_noqat/kl_reference.json", test_tmp_dir());
    ASSERT_TRUE(!fileio_exists(path));
    ASSERT_EQ_INT(kl_train(model, shards, bench, "noval",
                           "--set eval_kl_reference=true --set eval_val_batches=0"), 2);
    ASSERT_EQ_INT(kl_train(model, shards, bench, "badval", "--set eval_kl_reference=maybe"), 2);
}

/* eval_tasks empty: the in-loop evaluation runs on the val split alone (no
 * benchmark data needed: val_loss, val_ppl and the KL reference at every eval,
 * "tasks":{}); with no val batches either there is nothing to evaluate: a
 * one-line error, exit 2, before any step. */
TEST(cli_train_kl, val_only_evaluation_without_tasks)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char model[600], shards[600], path[800];
    ASSERT_EQ_INT(kl_setup(model, sizeof model, shards, sizeof shards), 0);
    ASSERT_EQ_INT(kl_train(model, shards, "", "valonly", "--set eval_tasks="), 0);
    char *a = kl_eval_lines("valonly");
    ASSERT_TRUE(a != NULL);
    int n_eval = 0;
    for (const char *e = a; (e = strstr(e, "{\"type\":\"eval\"")); e++, n_eval++) {
        const char *end = strchr(e, '\n');
        ASSERT_TRUE(end && end - e > 20 && !strncmp(end - 11, "\"tasks\":{}}", 11));
        double vl = kl_num(e, "\"val_loss\":"), ppl = kl_num(e, "\"val_ppl\":");
        ASSERT_TRUE(vl > 0 && vl < 20 && fabs(ppl - exp(vl)) <= 1e-6 * ppl);
        ASSERT_TRUE(kl_num(e, "\"val_kl_ref\":") >= 0 && kl_num(e, "\"val_top1_ref\":") > 0);
    }
    ASSERT_EQ_INT(n_eval, 5);
    const char *last = strstr(a, "{\"type\":\"eval\",\"step\":4,");
    ASSERT_TRUE(last && kl_num(last, "\"val_kl_ref\":") > kl_num(a, "\"val_kl_ref\":"));
    qs_free(a);

    ASSERT_EQ_INT(kl_train(model, shards, "", "nothing",
                           "--set eval_tasks= --set eval_val_batches=0"), 2);
    char *out;
    size_t n;
    snprintf(path, sizeof path, "%s/kl_out.txt", test_tmp_dir());
    ASSERT_OK(fileio_read_all(path, &out, &n, NULL), NULL);
    ASSERT_TRUE(strstr(out, "nothing to evaluate") != NULL);
    ASSERT_TRUE(strchr(out, '\n') == out + strlen(out) - 1);
    qs_free(out);
    snprintf(path, sizeof path, "%s/kl_nothing/metrics.jsonl", test_tmp_dir());
    ASSERT_TRUE(!fileio_exists(path));
}

TEST(cli_train_kl, memory_estimate_counts_the_reference)
{
    runcfg c;
    qs_diag d = {0};
    runcfg_defaults(&c);
    snprintf(c.model, sizeof c.model, "data/demo/model");
    c.batch_size = 2;
    c.seq_len = 16;
    train_memory off, on;
    ASSERT_OK(trainer_memory_estimate(&c, &off, &d), &d);
    ASSERT_EQ_INT(off.kl_ref_bytes, 0);   /* no in-loop evaluation */
    ASSERT_EQ_INT(off.eval_val_bytes, 0);
    c.eval_every = 10;
    ASSERT_OK(trainer_memory_estimate(&c, &on, &d), &d);
    /* the reference: its weights as the inference loader holds them (a BF16
     * checkpoint: its bf16 packs alone, what inspect prints) and a B x T arena
     * as large as the val batches' own (B x T = 32 rows: one logits chunk) */
    llama_config cfg;
    model_packed_memory pm;
    ASSERT_OK(hfconfig_load(&cfg, "data/demo/model", &d), &d);
    ASSERT_EQ_INT(model_packed_memory_estimate(&cfg, MATMUL_BF16, NULL, 1, &pm), 0);
    ASSERT_TRUE(!pm.fp32_copy && pm.bytes > 0);
    ASSERT_TRUE(on.eval_val_bytes > 2 * 32 * sizeof(int32_t));
    ASSERT_EQ_INT(on.kl_ref_bytes, pm.bytes + on.eval_val_bytes - 2 * 32 * sizeof(int32_t));
    ASSERT_EQ_INT(on.total_bytes - off.total_bytes, on.kl_ref_bytes + on.eval_val_bytes);
    c.eval_val_batches = 0;   /* tasks only: no val arena, no reference (auto) */
    ASSERT_OK(trainer_memory_estimate(&c, &on, &d), &d);
    ASSERT_TRUE(on.eval_val_bytes == 0 && on.kl_ref_bytes == 0);
}

/* The in-loop val_loss and KL run the lm_head in chunks of 256 rows (an arena
 * of 256 logits rows, not B x T): at step 0 (the base weights) a batch of
 * 4 x 128 = 512 rows (two chunks) logs what one forward of the whole batch
 * gives here, with every row's logits at once: model_forward's loss, and
 * model_compare_rows against the bf16 reference (model_load_packed), in fp32
 * and in bf16. */
TEST(cli_train_kl, val_loss_and_kl_in_chunks_equal_one_forward_of_the_batch)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char model[600], shards[600];
    ASSERT_EQ_INT(kl_setup(model, sizeof model, shards, sizeof shards), 0);
    enum { B = 4, T = 128, N = B * T };
    static const char *const precs[] = {"fp32", "bf16"};
    for (int p = 0; p < 2; p++) {
        char flags[300], name[32];
        snprintf(name, sizeof name, "chunks_%s", precs[p]);
        snprintf(flags, sizeof flags, "--steps 2 --set eval_tasks= --set batch_size=%d "
                 "--set seq_len=%d --set eval_val_batches=1 --set precision=%s", B, T, precs[p]);
        ASSERT_EQ_INT(kl_train(model, shards, "", name, flags), 0);
        char *lines = kl_eval_lines(name);
        ASSERT_TRUE(lines && !strncmp(lines, "{\"type\":\"eval\",\"step\":0,", 24));

        qs_diag d = {0};
        runcfg c;
        runcfg_defaults(&c);
        tokenizer *tok;
        dataloader *dl;
        ASSERT_OK(tokenizer_create(&tok, model, &d), &d);
        dataloader_opts vo = {B, T, (uint64_t)c.seed, 0, tokenizer_vocab_size(tok)};
        ASSERT_OK(dataloader_create(&dl, shards, "val", tokenizer_hash(tok), &vo, &d), &d);
        int32_t *ids = qs_malloc(2 * N * sizeof *ids);
        ASSERT_TRUE(ids != NULL);
        dataloader_next(dl, ids, ids + N);
        llama_model m, ref;
        llama_acts a, ra;
        ASSERT_OK(model_load_dir(&m, model, &d), &d);
        m.precision = p ? MATMUL_BF16 : MATMUL_FP32;
        ASSERT_OK(model_load_packed(&ref, model, MATMUL_BF16, &d), &d);
        ASSERT_OK(model_acts_init(&a, &m.cfg, B, T, T, MODEL_ACTS_INFER, &d), &d);
        ASSERT_OK(model_acts_init(&ra, &ref.cfg, B, T, T, MODEL_ACTS_INFER, &d), &d);
        ASSERT_OK(model_forward(&m, &a, ids, ids + N, B, T, 0, &d), &d);
        ASSERT_OK(model_forward(&ref, &ra, ids, NULL, B, T, 0, &d), &d);
        model_compare_row *rows = qs_malloc(N * sizeof *rows);
        int bad;
        ASSERT_TRUE(rows != NULL);
        ASSERT_EQ_INT(model_compare_rows(a.logits, ra.logits, m.cfg.vocab_size, NULL, N, rows,
                                         &bad), 0);
        double kl = 0;
        long agree = 0;
        for (int i = 0; i < N; i++) {
            kl += rows[i].kl;
            agree += rows[i].top == rows[i].top_ref;
        }
        char want[200];
        snprintf(want, sizeof want, "\"val_loss\":%.9g,", a.loss);
        ASSERT_TRUE(strstr(lines, want) != NULL);
        snprintf(want, sizeof want, "\"val_kl_ref\":%.9g,\"val_top1_ref\":%.9g,", kl / N,
                 (double)agree / N);
        const char *got = strstr(lines, "\"val_kl_ref\":");
        ASSERT_TRUE(got && !strncmp(got, want, strlen(want)));
        qs_free(rows);
        qs_free(ids);
        model_acts_free(&a);
        model_acts_free(&ra);
        model_free(&m);
        model_free(&ref);
        dataloader_destroy(dl);
        tokenizer_destroy(tok);
        qs_free(lines);
    }
}

/* The in-loop tasks' scoring arena (the scorer grown to the subset's longest
 * request) is part of the run's memory: the refusal names it, and it is 0
 * without tasks. */
TEST(cli_train_kl, memory_guard_counts_the_tasks_scoring_arena)
{
    if (!getenv("QS_BIN"))
        SKIP("QS_BIN not set");
    char model[600], shards[600], path[800], *out;
    size_t n;
    ASSERT_EQ_INT(kl_setup(model, sizeof model, shards, sizeof shards), 0);
    static const char *const flags[2] = {"--set max_memory_gb=0.001",
                                         "--set max_memory_gb=0.001 --set eval_tasks="};
    double mib[2];
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ_INT(kl_train(model, shards, "tests/data/tasks/data", "guard", flags[i]), 2);
        snprintf(path, sizeof path, "%s/kl_out.txt", test_tmp_dir());
        ASSERT_OK(fileio_read_all(path, &out, &n, NULL), NULL);
        const char *p = strstr(out, "in-loop tasks ");
        ASSERT_TRUE(p != NULL);
        mib[i] = strtod(p + 14, NULL);
        qs_free(out);
    }
    ASSERT_TRUE(mib[0] > 0.01 && mib[1] == 0.0);
}
