/* test_trainer.c: the training loop on the bundled tiny model (data/demo/model):
 * bit-exact resume, QAT phase switch, logs, NaN and memory guards. */
#include <jansson.h>
#include <stdlib.h>

#include "qs/fileio.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/qlog.h"
#include "qs/trainer.h"
#include "test.h"

/* In-memory data: token i of the stream is a fixed function of i; the position
 * is the only state (what save/restore carry). */
typedef struct mem_data {
    long pos;
    int vocab;
} mem_data;

static int32_t mem_token(long i, int vocab)
{
    unsigned long x = (unsigned long)i * 2654435761ul + 12345u;
    x ^= x >> 13;
    return (int32_t)((i % 7 < 4) ? (i / 7) % 40 + 3 : (long)(x % (unsigned long)vocab));
}

static int mem_next(void *self, int32_t *tok, int32_t *tgt, int B, int T, qs_diag *d)
{
    (void)d;
    mem_data *m = self;
    for (int b = 0; b < B; b++, m->pos += T)
        for (int t = 0; t < T; t++) {
            tok[b * T + t] = mem_token(m->pos + t, m->vocab);
            tgt[b * T + t] = mem_token(m->pos + t + 1, m->vocab);
        }
    return 0;
}

static int mem_save(void *self, void **bytes, size_t *n, qs_diag *d)
{
    (void)d;
    *bytes = qs_malloc(sizeof(long));
    if (!*bytes)
        return QS_ENOMEM;
    memcpy(*bytes, &((mem_data *)self)->pos, sizeof(long));
    *n = sizeof(long);
    return 0;
}

static int mem_restore(void *self, const void *bytes, size_t n, qs_diag *d)
{
    if (n != sizeof(long))
        return diag_set(d, QS_EFORMAT, NULL, -1, "data position: %zu bytes", n);
    memcpy(&((mem_data *)self)->pos, bytes, sizeof(long));
    return 0;
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

static int run_steps(trainer *t, long n)
{
    qs_diag d = {0};
    train_step_info info;
    for (long i = 0; i < n && !trainer_done(t); i++)
        if (trainer_step(t, &info, &d)) {
            fprintf(stderr, "    step: %s\n", d.msg);
            return -1;
        }
    return 0;
}

TEST(trainer, resume_after_kill_is_bit_exact)
{
    runcfg a_cfg, b_cfg;
    tiny_cfg(&a_cfg, "straight");
    tiny_cfg(&b_cfg, "killed");
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&b_cfg, "ckpt_every=10", &d), &d);
    trainer_options opt = {0};
    mem_data da = {0, 512}, db = {0, 512};
    train_data srca = {&da, mem_next, mem_save, mem_restore};
    train_data srcb = {&db, mem_next, mem_save, mem_restore};

    trainer *a;
    ASSERT_OK(trainer_create(&a, &a_cfg, &srca, &opt, &d), &d);
    ASSERT_EQ_INT(trainer_quant_count(a), 18); /* 3 middle blocks x 3 MLP linears x {input, weight} */
    ASSERT_EQ_INT(run_steps(a, 20), 0);
    size_t n;
    const float *pa = trainer_params(a, &n);
    float *want = qs_malloc(n * sizeof *want);
    ASSERT_TRUE(want != NULL);
    memcpy(want, pa, n * sizeof *want);
    ASSERT_OK(trainer_finish(a, "done", &d), &d);

    trainer *b;
    ASSERT_OK(trainer_create(&b, &b_cfg, &srcb, &opt, &d), &d);
    ASSERT_EQ_INT(run_steps(b, 13), 0);   /* checkpoint at 10, then 3 steps that are lost */
    trainer_destroy(b);                    /* "kill": no final checkpoint */

    db.pos = 999999;                       /* the resumed run must restore the position */
    opt.resume_dir = b_cfg.out_dir;
    ASSERT_OK(trainer_create(&b, &b_cfg, &srcb, &opt, &d), &d);
    ASSERT_EQ_INT(trainer_next_step(b), 10);
    ASSERT_EQ_INT(run_steps(b, 100), 0);
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

TEST(trainer, qat_switch_logs_event_and_quant_records)
{
    runcfg c;
    tiny_cfg(&c, "events");
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&c, "steps=7", &d), &d);
    mem_data dm = {0, 512};
    train_data src = {&dm, mem_next, mem_save, mem_restore};
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
    mem_data dm = {0, 512};
    train_data src = {&dm, mem_next, mem_save, mem_restore};
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
    mem_data dm = {0, 512};
    train_data src = {&dm, mem_next, mem_save, mem_restore};
    trainer_options opt = {NULL, 1 << 20, NULL};
    trainer *t;
    qs_diag d = {0};
    ASSERT_EQ_INT(trainer_create(&t, &c, &src, &opt, &d), QS_ERANGE);
    ASSERT_TRUE(strstr(d.msg, "MiB") != NULL && strstr(d.msg, "1.0 MiB are allowed") != NULL);
    train_memory m;
    ASSERT_OK(trainer_memory_estimate(&c, &m, &d), &d);
    ASSERT_TRUE(m.total_bytes > m.model_train_bytes && m.quant_bytes > 0);
}

TEST(trainer, fresh_run_refuses_existing_run_dir_and_resume_needs_checkpoint)
{
    runcfg c;
    tiny_cfg(&c, "twice");
    qs_diag d = {0};
    ASSERT_OK(runcfg_set(&c, "steps=1", &d), &d);
    mem_data dm = {0, 512};
    train_data src = {&dm, mem_next, mem_save, mem_restore};
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
    mem_data dm = {0, 512};
    train_data src = {&dm, mem_next, mem_save, mem_restore};
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
    mem_data dm = {0, 512};
    train_data src = {&dm, mem_next, mem_save, mem_restore};
    trainer_options opt = {0};
    trainer *t;
    if (trainer_create(&t, &c, &src, &opt, &d))
        return NULL;
    float *out = NULL;
    if (!run_steps(t, 6)) {
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
    mem_data dm = {0, 512};
    train_data src = {&dm, mem_next, mem_save, mem_restore};
    trainer_options opt = {0};
    trainer *t;
    ASSERT_OK(trainer_create(&t, &c, &src, &opt, &d), &d);
    ASSERT_EQ_INT(run_steps(t, 1), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.jsonl", c.out_dir);
    FILE *f = fopen(path, "a");   /* a record curves.png cannot read: "bad\q" is no JSON escape */
    ASSERT_TRUE(f != NULL);
    fputs("{\"type\":\"train\",\"bad\\q\":1}\n", f);
    ASSERT_EQ_INT(fclose(f), 0);
    ASSERT_EQ_INT(run_steps(t, 1), 0);
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
