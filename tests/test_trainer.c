/* test_trainer.c: the training loop on the bundled tiny model (data/demo/model):
 * bit-exact resume, QAT phase switch, logs, NaN and memory guards. */
#include <jansson.h>
#include <stdlib.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/qlog.h"
#include "qs/trainer.h"
#include "qs/trainstate.h"
#include "test.h"
#include "test_run_logs.h"
#include "test_token_stream.h"

/* token i of the stream is a fixed function of i; the target is token i + 1 */
static int32_t mem_token(long i, int vocab)
{
    unsigned long x = (unsigned long)i * 2654435761ul + 12345u;
    x ^= x >> 13;
    return (int32_t)((i % 7 < 4) ? (i / 7) % 40 + 3 : (long)(x % (unsigned long)vocab));
}

static void mem_pair(long i, int vocab, int32_t *tok, int32_t *tgt)
{
    *tok = mem_token(i, vocab);
    *tgt = mem_token(i + 1, vocab);
}

static void tiny_cfg(runcfg *c, const char *run)
{
    qs_diag d = {0};
    runcfg_defaults(c);
    snprintf(c->model, sizeof c->model, "data/demo/model");
    snprintf(c->train_data, sizeof c->train_data, "(memory)");
    snprintf(c->out_dir, sizeof c->out_dir, "%s/lib_%s", test_tmp_dir(), run);
    runcfg_set(c, "batch_size=2", &d);
    runcfg_set(c, "seq_len=16", &d);
    runcfg_set(c, "grad_accum=2", &d);
    runcfg_set(c, "steps=20", &d);
    runcfg_set(c, "lr=1e-3", &d);
    runcfg_set(c, "lr_warmup_steps=3", &d);
    runcfg_set(c, "lr_decay=cosine", &d);
    runcfg_set(c, "weight_decay=0.01", &d);
    runcfg_set(c, "bf16_warmup_steps=5", &d);
}

/* Rewrite a train_state.bin as version 1 wrote it: the v1 sections only. */
static int state_to_v1(const char *path)
{
    static const char *const v1[] = {"meta", "adam_m", "adam_v", "data", "amax"};
    char tmp[720];
    snprintf(tmp, sizeof tmp, "%.700s.v1", path);
    trainstate_reader r;
    trainstate_writer w;
    qs_diag d = {0};
    if (trainstate_open(&r, path, &d))
        return -1;
    int rc = trainstate_write_begin(&w, tmp, 5, &d);
    for (int i = 0; !rc && i < 5; i++) {
        const void *p;
        size_t n;
        if ((rc = trainstate_section(&r, v1[i], &p, &n, &d)) ||
            (rc = trainstate_write_section(&w, v1[i], p, n, &d)))
            trainstate_write_abort(&w);
    }
    trainstate_close(&r);
    if (rc || trainstate_write_commit(&w, &d))
        return -1;
    char *buf;
    size_t n;
    if (fileio_read_all(tmp, &buf, &n, &d))
        return -1;
    test_trainstate_relabel((unsigned char *)buf, 1);   /* and its FNV-1a checksums */
    rc = fileio_write_atomic(path, buf, n, &d);
    qs_free(buf);
    remove(tmp);
    return rc;
}

TEST(trainer, resume_after_kill_is_bit_exact)
{
    runcfg a_cfg, b_cfg;
    tiny_cfg(&a_cfg, "straight");
    tiny_cfg(&b_cfg, "killed");
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&b_cfg, "ckpt_every=10", &d), &d);
    trainer_options opt = {0};
    test_stream da = {0, 512, mem_pair}, db = {0, 512, mem_pair};
    train_data srca = test_stream_data(&da);
    train_data srcb = test_stream_data(&db);

    trainer *a;
    ASSERT_OK(trainer_create(&a, &a_cfg, &srca, &opt, &d), &d);
    ASSERT_EQ_INT(trainer_quant_count(a), 18); /* 3 middle blocks x 3 MLP linears x {input, weight} */
    ASSERT_EQ_INT(test_train_steps(a, 20), 0);
    size_t n;
    const float *pa = trainer_params(a, &n);
    float *want = qs_malloc(n * sizeof *want);
    ASSERT_TRUE(want != NULL);
    memcpy(want, pa, n * sizeof *want);
    ASSERT_OK(trainer_finish(a, "done", &d), &d);

    trainer *b;
    ASSERT_OK(trainer_create(&b, &b_cfg, &srcb, &opt, &d), &d);
    ASSERT_EQ_INT(test_train_steps(b, 13), 0);   /* checkpoint at 10, then 3 steps that are lost */
    trainer_destroy(b);                    /* "kill": no final checkpoint */
    /* a checkpoint of version 1 (before the log-state sections) still resumes bit-exactly */
    char state[700];
    snprintf(state, sizeof state, "%s/ckpt/step_10/train_state.bin", b_cfg.out_dir);
    ASSERT_EQ_INT(state_to_v1(state), 0);

    db.pos = 999999;                       /* the resumed run must restore the position */
    opt.resume_dir = b_cfg.out_dir;
    ASSERT_OK(trainer_create(&b, &b_cfg, &srcb, &opt, &d), &d);
    ASSERT_EQ_INT(trainer_next_step(b), 10);
    ASSERT_EQ_INT(test_train_steps(b, 100), 0);
    const float *pb = trainer_params(b, &n);
    size_t n_diff = 0;
    for (size_t i = 0; i < n; i++)
        n_diff += memcmp(&pb[i], &want[i], sizeof *pb) != 0;
    ASSERT_EQ_INT(n_diff, 0);
    ASSERT_OK(trainer_finish(b, "done", &d), &d);
    qs_free(want);

    /* metrics.jsonl: steps 0..19 exactly once (the lost steps 10..12 were dropped) */
    char path[600], *text;
    size_t bytes;
    snprintf(path, sizeof path, "%s/metrics.jsonl", b_cfg.out_dir);
    ASSERT_OK(fileio_read_all(path, &text, &bytes, &d), &d);
    int lines = 0;
    for (size_t i = 0; i < bytes; i++)
        lines += text[i] == '\n';
    ASSERT_EQ_INT(lines, 20);
    ASSERT_TRUE(strstr(text, "\"step\":12,\"phase\":\"qat\"") != NULL);
    ASSERT_TRUE(strstr(text, "\"step\":4,\"phase\":\"warmup\"") != NULL);
    qs_free(text);
    snprintf(path, sizeof path, "%s/ckpt/step_20/model.safetensors", b_cfg.out_dir);
    ASSERT_TRUE(fileio_exists(path));
    snprintf(path, sizeof path, "%s/ckpt/step_20/tokenizer.model", b_cfg.out_dir);
    ASSERT_TRUE(fileio_exists(path));
}

/* --resume checks the optimizer moments' checksums as it copies them (one pass
 * over the file, trainstate_read_checked): a damaged byte of adam_v refuses
 * the resume by section name, the undamaged checkpoint resumes. */
TEST(trainer, resume_refuses_damaged_moments_by_name)
{
    runcfg c;
    tiny_cfg(&c, "dmg_moments");
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&c, "steps=4", &d), &d);
    ASSERT_OK(runcfg_set(&c, "ckpt_every=2", &d), &d);
    test_stream ds = {0, 512, mem_pair};
    train_data src = test_stream_data(&ds);
    trainer_options opt = {0};
    trainer *t;
    ASSERT_OK(trainer_create(&t, &c, &src, &opt, &d), &d);
    ASSERT_EQ_INT(test_train_steps(t, 3), 0);   /* checkpoint at 2, then a step that is lost */
    trainer_destroy(t);
    char state[700];
    snprintf(state, sizeof state, "%s/ckpt/step_2/train_state.bin", c.out_dir);
    trainstate_reader r;
    const void *p;
    size_t n;
    ASSERT_OK(trainstate_open(&r, state, &d), &d);
    ASSERT_OK(trainstate_section(&r, "adam_v", &p, &n, &d), &d);
    long off = (long)((const unsigned char *)p - (const unsigned char *)r.map.data) + (long)n - 2;
    trainstate_close(&r);
    char *buf;
    size_t len;
    ASSERT_OK(fileio_read_all(state, &buf, &len, &d), &d);
    buf[off] ^= 0x04;
    ASSERT_OK(fileio_write_atomic(state, buf, len, &d), &d);
    opt.resume_dir = c.out_dir;
    ASSERT_EQ_INT(trainer_create(&t, &c, &src, &opt, &d), QS_EFORMAT);
    ASSERT_TRUE(strstr(d.msg, "section 'adam_v': checksum mismatch") != NULL);
    ASSERT_TRUE(strstr(d.path, "train_state.bin") != NULL);
    buf[off] ^= 0x04;
    ASSERT_OK(fileio_write_atomic(state, buf, len, &d), &d);
    qs_free(buf);
    ASSERT_OK(trainer_create(&t, &c, &src, &opt, &d), &d);
    ASSERT_EQ_INT(trainer_next_step(t), 2);
    trainer_destroy(t);
}

TEST(trainer, qat_switch_logs_event_and_quant_records)
{
    runcfg c;
    tiny_cfg(&c, "events");
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&c, "steps=7", &d), &d);
    test_stream dm = {0, 512, mem_pair};
    train_data src = test_stream_data(&dm);
    trainer_options opt = {0};
    trainer *t;
    ASSERT_OK(trainer_create(&t, &c, &src, &opt, &d), &d);
    train_step_info info;
    int switched_at = -1;
    while (!trainer_done(t)) {
        ASSERT_OK(trainer_step(t, &info, &d), &d);
        if (info.phase_changed)
            switched_at = (int)info.step;
        ASSERT_TRUE(isfinite(info.loss) && info.loss > 0 && info.tok_per_s > 0);
    }
    ASSERT_EQ_INT(switched_at, 5);
    ASSERT_OK(trainer_finish(t, "done", &d), &d);
    char path[600], *text;
    size_t n;
    snprintf(path, sizeof path, "%s/events.jsonl", c.out_dir);
    ASSERT_OK(fileio_read_all(path, &text, &n, &d), &d);
    ASSERT_TRUE(strstr(text, "{\"step\":5,\"type\":\"phase\",\"phase\":\"qat\"") != NULL);
    ASSERT_TRUE(strstr(text, "\"reason\":\"done\"") != NULL);
    qs_free(text);
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", c.out_dir);
    qlog_run run = {0};
    ASSERT_OK(qlog_read(path, &run, &d), &d);
    ASSERT_EQ_INT(run.n_quant, 18);
    ASSERT_EQ_STR(run.names[0], "layers.3.mlp.gate_proj.input");
    ASSERT_EQ_INT(run.n_steps, 7);
    ASSERT_EQ_INT(run.phases[4], QLOG_PHASE_WARMUP);
    ASSERT_EQ_INT(qlog_run_row(&run, 4, 0)->mode, QUANT_MODE_OBSERVE);
    ASSERT_EQ_INT(run.phases[5], QLOG_PHASE_QAT);
    ASSERT_EQ_INT(qlog_run_row(&run, 5, 1)->mode, QUANT_MODE_QUANT);
    ASSERT_TRUE(qlog_run_row(&run, 6, 0)->amax > 0);
    qlog_run_free(&run);
    snprintf(path, sizeof path, "%s/config.json", c.out_dir);
    runcfg back;
    ASSERT_OK(runcfg_load(&back, path, &d), &d);
    ASSERT_EQ_INT(back.steps, 7);
}

TEST(trainer, nan_stops_without_updating_or_checkpointing)
{
    runcfg c;
    tiny_cfg(&c, "nan");
    test_stream dm = {0, 512, mem_pair};
    train_data src = test_stream_data(&dm);
    trainer_options opt = {0};
    trainer *t;
    qs_diag d = {0};
    ASSERT_OK(trainer_create(&t, &c, &src, &opt, &d), &d);
    size_t n;
    float *p = (float *)trainer_params(t, &n);
    for (size_t i = 0; i < n; i += 97)
        p[i] = NAN;
    train_step_info info;
    ASSERT_EQ_INT(trainer_step(t, &info, &d), QS_ENAN);
    ASSERT_TRUE(strstr(d.msg, "NaN") != NULL && strstr(d.msg, "none yet") != NULL);
    trainer_destroy(t);
    char path[600], *text;
    snprintf(path, sizeof path, "%s/events.jsonl", c.out_dir);
    ASSERT_OK(fileio_read_all(path, &text, &n, &d), &d);
    ASSERT_TRUE(strstr(text, "\"reason\":\"nan\"") != NULL);
    qs_free(text);
    snprintf(path, sizeof path, "%s/ckpt", c.out_dir);
    ASSERT_TRUE(!fileio_exists(path));
}

TEST(trainer, memory_guard_refuses_with_numbers)
{
    runcfg c;
    tiny_cfg(&c, "mem");
    test_stream dm = {0, 512, mem_pair};
    train_data src = test_stream_data(&dm);
    trainer_options opt = {NULL, 1 << 20, NULL};
    trainer *t;
    qs_diag d = {0};
    ASSERT_EQ_INT(trainer_create(&t, &c, &src, &opt, &d), QS_ERANGE);
    ASSERT_TRUE(strstr(d.msg, "MiB") != NULL && strstr(d.msg, "1.0 MiB are allowed") != NULL);
    /* the config's lever, with the total it would leave */
    runcfg rc_cfg = c;
    rc_cfg.recompute = 1;
    train_memory m, rm;
    ASSERT_OK(trainer_memory_estimate(&rc_cfg, &rm, &d), &d);
    char lever[96];
    snprintf(lever, sizeof lever, "allowed; recompute=true (%.1f MiB), lower batch_size/seq_len",
             rm.total_bytes / 1048576.0);
    ASSERT_TRUE(!c.recompute && strstr(d.msg, lever) != NULL);
    ASSERT_OK(trainer_memory_estimate(&c, &m, &d), &d);
    ASSERT_TRUE(m.total_bytes > m.model_train_bytes && m.quant_bytes > 0);
    ASSERT_TRUE(rm.total_bytes < m.total_bytes);
}

TEST(trainer, fresh_run_refuses_existing_run_dir_and_resume_needs_checkpoint)
{
    runcfg c;
    tiny_cfg(&c, "twice");
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&c, "steps=1", &d), &d);
    test_stream dm = {0, 512, mem_pair};
    train_data src = test_stream_data(&dm);
    trainer_options opt = {0};
    trainer *t;
    ASSERT_OK(trainer_create(&t, &c, &src, &opt, &d), &d);
    trainer_destroy(t);
    ASSERT_EQ_INT(trainer_create(&t, &c, &src, &opt, &d), QS_EINVAL);
    ASSERT_TRUE(strstr(d.msg, "--resume") != NULL);
    opt.resume_dir = c.out_dir;
    ASSERT_EQ_INT(trainer_create(&t, &c, &src, &opt, &d), QS_ENOTFOUND);
}

typedef struct fake_eval {
    int calls;
    long steps[8];
    int hook_was_off;
} fake_eval;

static int fake_eval_run(void *self, struct llama_model *m, long step, int quantized, char *line,
                         size_t n, char *event, size_t n_event, qs_diag *d)
{
    (void)d;
    (void)quantized;
    fake_eval *f = self;
    if (f->calls < 8)
        f->steps[f->calls] = step;
    f->calls++;
    f->hook_was_off += m->hook.fn == NULL;
    snprintf(line, n, "{\"type\":\"eval\",\"step\":%ld,\"tasks\":{\"fake\":{\"acc\":0.5,\"n\":2}}}",
             step);
    if (step == 4)
        snprintf(event, n_event, "{\"step\":4,\"type\":\"forgetting\",\"task\":\"fake\"}");
    return step == 4;
}

TEST(trainer, eval_seam_runs_baseline_then_every_k_and_can_stop)
{
    runcfg c;
    tiny_cfg(&c, "eval");
    test_stream dm = {0, 512, mem_pair};
    train_data src = test_stream_data(&dm);
    fake_eval fe = {0};
    train_eval_hook hook = {.self = &fe, .every_steps = 2, .run = fake_eval_run};
    trainer_options opt = {NULL, 0, &hook};
    trainer *t;
    qs_diag d = {0};
    ASSERT_OK(trainer_create(&t, &c, &src, &opt, &d), &d);
    train_step_info info;
    int rc = 0;
    while (!trainer_done(t) && !(rc = trainer_step(t, &info, &d)))
        ;
    ASSERT_EQ_INT(rc, QS_ESTOP);
    ASSERT_TRUE(strstr(d.msg, "forgetting") != NULL);
    ASSERT_EQ_INT(trainer_next_step(t), 4);
    trainer_destroy(t);
    ASSERT_EQ_INT(fe.calls, 3);
    ASSERT_EQ_INT(fe.steps[0], 0);
    ASSERT_EQ_INT(fe.steps[1], 2);
    ASSERT_EQ_INT(fe.steps[2], 4);
    ASSERT_EQ_INT(fe.hook_was_off, 3);
    char path[600], *text;
    size_t n;
    snprintf(path, sizeof path, "%s/metrics.jsonl", c.out_dir);
    ASSERT_OK(fileio_read_all(path, &text, &n, &d), &d);
    ASSERT_TRUE(strncmp(text, "{\"type\":\"eval\",\"step\":0,", 24) == 0);
    qs_free(text);
    snprintf(path, sizeof path, "%s/events.jsonl", c.out_dir);
    ASSERT_OK(fileio_read_all(path, &text, &n, &d), &d);
    ASSERT_TRUE(strstr(text, "\"type\":\"forgetting\"") && strstr(text, "\"reason\":\"forgetting\""));
    qs_free(text);
    snprintf(path, sizeof path, "%s/ckpt/step_4/train_state.bin", c.out_dir);
    ASSERT_TRUE(fileio_exists(path));
}

/* final params after 6 QAT steps (no warmup, most-recent estimator: the weights
 * grow past the previous step's amax, so some elements clip) */
static float *ste_run(const char *name, const char *ste, size_t *n)
{
    runcfg c;
    tiny_cfg(&c, name);
    qs_diag d = {0};
    char set[64];
    snprintf(set, sizeof set, "ste=%s", ste);
    if (runcfg_set(&c, set, &d) || runcfg_set(&c, "bf16_warmup_steps=0", &d) ||
        runcfg_set(&c, "amax_estimator=most-recent", &d) || runcfg_set(&c, "steps=6", &d) ||
        runcfg_set(&c, "lr_decay=constant", &d))
        return NULL;
    test_stream dm = {0, 512, mem_pair};
    train_data src = test_stream_data(&dm);
    trainer_options opt = {0};
    trainer *t;
    if (trainer_create(&t, &c, &src, &opt, &d))
        return NULL;
    float *out = NULL;
    if (!test_train_steps(t, 6)) {
        const float *p = trainer_params(t, n);
        out = qs_malloc(*n * sizeof *out);
        if (out)
            memcpy(out, p, *n * sizeof *out);
    }
    trainer_destroy(t);
    return out;
}

TEST(trainer, masked_ste_changes_the_update_only_where_clipping_happened)
{
    size_t n1, n2, n3;
    float *pass = ste_run("ste_pass", "pass", &n1);
    float *pass2 = ste_run("ste_pass2", "pass", &n2);
    float *masked = ste_run("ste_masked", "masked", &n3);
    ASSERT_TRUE(pass && pass2 && masked && n1 == n2 && n1 == n3);
    ASSERT_TRUE(memcmp(pass, pass2, n1 * sizeof *pass) == 0);   /* deterministic */
    size_t differ = 0;
    for (size_t i = 0; i < n1; i++)
        differ += pass[i] != masked[i];
    ASSERT_TRUE(differ > 0);
    qs_free(pass);
    qs_free(pass2);
    qs_free(masked);
}

/* ---- resumed logs are identical to uninterrupted ones ---- */

/* An eval hook with state: a call counter in every line, saved and restored. */
typedef struct count_eval {
    long calls;
} count_eval;

static int count_eval_run(void *self, struct llama_model *m, long step, int quantized,
                          char *line, size_t n, char *event, size_t n_event, qs_diag *d)
{
    (void)m;
    (void)quantized;
    (void)d;
    count_eval *c = self;
    c->calls++;
    snprintf(line, n, "{\"type\":\"eval\",\"step\":%ld,\"calls\":%ld}", step, c->calls);
    snprintf(event, n_event, "{\"step\":%ld,\"type\":\"forgetting\",\"calls\":%ld}", step, c->calls);
    return 0;
}

static int count_eval_save(void *self, void **bytes, size_t *n, qs_diag *d)
{
    (void)d;
    if (!(*bytes = qs_malloc(sizeof(long))))
        return QS_ENOMEM;
    memcpy(*bytes, &((count_eval *)self)->calls, sizeof(long));
    *n = sizeof(long);
    return 0;
}

static int count_eval_restore(void *self, const void *bytes, size_t n, qs_diag *d)
{
    if (n != sizeof(long))
        return diag_set(d, QS_EFORMAT, NULL, -1, "count_eval: %zu bytes", n);
    memcpy(&((count_eval *)self)->calls, bytes, sizeof(long));
    return 0;
}

/* Saturation episodes on every few steps: most-recent estimator (growing weights
 * clip), any clip counts, alarms after 2 consecutive steps. */
static void episode_cfg(runcfg *c, const char *run)
{
    qs_diag d = {0};
    tiny_cfg(c, run);
    runcfg_set(c, "lr=1e-2", &d);
    runcfg_set(c, "amax_estimator=most-recent", &d);
    runcfg_set(c, "saturation_clip_rate=0", &d);
    runcfg_set(c, "saturation_alarm_steps=2", &d);
    runcfg_set(c, "run_name=cmp", &d);
}

/* A run dir's log (quant.jsonl.zst decompressed by fileio_read_all), lines of
 * metrics.jsonl without the timing fields tok_per_s and elapsed_s. */
static char *resume_log(const char *dir, const char *file)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return test_log_read(path);
}

static int logs_identical(const char *a, const char *b)
{
    static const char *const files[] = {"metrics.jsonl", "events.jsonl", "quant.jsonl.zst"};
    int same = 1;
    for (int i = 0; i < 3; i++) {
        char *x = resume_log(a, files[i]), *y = resume_log(b, files[i]);
        int eq = x && y && !strcmp(x, y);
        if (!eq) {
            size_t k = 0;
            while (x && y && x[k] && x[k] == y[k])
                k++;
            fprintf(stderr, "    %s differs from byte %zu\n", files[i], k);
        }
        same &= eq;
        qs_free(x);
        qs_free(y);
    }
    return same;
}

/* 1 if some quantizer clipped on both steps s - 1 and s: an alarm episode runs
 * across a resume at s */
static int episode_spans(const char *dir, long s)
{
    char path[700];
    snprintf(path, sizeof path, "%s/quant.jsonl.zst", dir);
    qlog_run run = {0};
    int found = 0;
    if (qlog_read(path, &run, NULL) == 0 && s >= 1 && s < run.n_steps)
        for (int q = 0; q < run.n_quant; q++)
            found |= qlog_run_row(&run, (int)s - 1, q)->clip_rate > 0 &&
                     qlog_run_row(&run, (int)s, q)->clip_rate > 0;
    qlog_run_free(&run);
    return found;
}

/* kill (no final checkpoint, steps after the checkpoint logged and lost) and stop
 * (interrupt: checkpoint + stop event), both mid-QAT and in the middle of alarm
 * episodes, then --resume: metrics.jsonl (without timing), events.jsonl and the
 * decompressed quant.jsonl.zst are byte for byte those of the straight run */
TEST(trainer, resumed_logs_equal_the_uninterrupted_run)
{
    runcfg cfg[3];
    episode_cfg(&cfg[0], "logs_straight");
    episode_cfg(&cfg[1], "logs_killed");
    episode_cfg(&cfg[2], "logs_stopped");
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&cfg[1], "ckpt_every=10", &d), &d);
    const long stop_after[3] = {20, 13, 7}, resume_at[3] = {0, 10, 7};
    for (int k = 0; k < 3; k++) {
        test_stream dm = {0, 512, mem_pair};
        train_data src = test_stream_data(&dm);
        count_eval ce = {0};
        train_eval_hook hook = {&ce, 5, count_eval_run, count_eval_save, count_eval_restore,
                                NULL, 0};
        trainer_options opt = {NULL, 0, &hook};
        trainer *t;
        ASSERT_OK(trainer_create(&t, &cfg[k], &src, &opt, &d), &d);
        ASSERT_EQ_INT(test_train_steps(t, stop_after[k]), 0);
        if (k == 1)
            trainer_destroy(t);                                 /* kill */
        else
            ASSERT_OK(trainer_finish(t, k ? "interrupted" : "done", &d), &d);
        if (k == 0)
            continue;
        dm.pos = 999999;
        ce.calls = -1000;   /* a fresh process: state comes from the checkpoint */
        opt.resume_dir = cfg[k].out_dir;
        ASSERT_OK(trainer_create(&t, &cfg[k], &src, &opt, &d), &d);
        ASSERT_EQ_INT(trainer_next_step(t), resume_at[k]);
        ASSERT_EQ_INT(test_train_steps(t, 100), 0);
        ASSERT_OK(trainer_finish(t, "done", &d), &d);
    }
    /* the comparison is not vacuous: alarms were raised, and episodes ran across
     * both resume points */
    char *ev = resume_log(cfg[0].out_dir, "events.jsonl");
    ASSERT_TRUE(ev && strstr(ev, "\"type\":\"saturation\"") && strstr(ev, "\"step\":10,\"type\":\"forgetting\""));
    qs_free(ev);
    ASSERT_TRUE(episode_spans(cfg[0].out_dir, 10));
    ASSERT_TRUE(episode_spans(cfg[0].out_dir, 7));
    ASSERT_TRUE(logs_identical(cfg[0].out_dir, cfg[1].out_dir));
    ASSERT_TRUE(logs_identical(cfg[0].out_dir, cfg[2].out_dir));
}

/* A picture that cannot be drawn becomes a plot_error event: with quotes and
 * backslashes in the run dir and in the reason, every events.jsonl line still
 * parses and the reason reads back unchanged. */
TEST(trainer, plot_error_event_escapes_quotes_and_backslashes)
{
    runcfg c;
    tiny_cfg(&c, "plot\"q\\b");
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&c, "steps=3", &d), &d);
    ASSERT_OK(runcfg_set(&c, "plot_every=1", &d), &d);
    test_stream dm = {0, 512, mem_pair};
    train_data src = test_stream_data(&dm);
    trainer_options opt = {0};
    trainer *t;
    ASSERT_OK(trainer_create(&t, &c, &src, &opt, &d), &d);
    ASSERT_EQ_INT(test_train_steps(t, 1), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.jsonl", c.out_dir);
    FILE *f = fopen(path, "a");   /* a record curves.png cannot read: "bad\q" is no JSON escape */
    ASSERT_TRUE(f != NULL);
    fputs("{\"type\":\"train\",\"bad\\q\":1}\n", f);
    ASSERT_EQ_INT(fclose(f), 0);
    ASSERT_EQ_INT(test_train_steps(t, 1), 0);
    ASSERT_OK(trainer_finish(t, "done", &d), &d);
    char *text;
    size_t n;
    snprintf(path, sizeof path, "%s/events.jsonl", c.out_dir);
    ASSERT_OK(fileio_read_all(path, &text, &n, &d), &d);
    int plot_errors = 0, lines = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        if (!o)
            TEST_FAIL_AT("events.jsonl line %d is not JSON (%s): %s", lines + 1, je.text, line);
        ASSERT_TRUE(o != NULL);
        const char *type = json_string_value(json_object_get(o, "type"));
        if (type && !strcmp(type, "plot_error")) {
            const char *file = json_string_value(json_object_get(o, "file"));
            const char *msg = json_string_value(json_object_get(o, "msg"));
            plot_errors += file && !strcmp(file, "curves.png") && msg && strstr(msg, "\"bad\\q");
        }
        json_decref(o);
    }
    qs_free(text);
    ASSERT_TRUE(lines >= 2);
    ASSERT_TRUE(plot_errors >= 1);
}
