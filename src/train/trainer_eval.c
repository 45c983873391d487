/* trainer_eval.c: the in-loop evaluation behind train_eval_hook (issue 7):
 * an eval_session built once on a fixed seeded subset (cfg eval_tasks,
 * eval_subset), scored with the model as trained (frozen fake-quant during
 * QAT, see trainer.h) through model_lm every eval_every steps, plus the mean
 * loss over the first eval_val_batches (B, T) windows of the "val" split
 * (eval_tasks may be empty when eval_val_batches > 0: val_loss only, and
 * "tasks":{} in the record);
 * metrics.jsonl gets {"type":"eval","step":N,"quantized":b,"val_loss":..,
 * "val_ppl":..,"tasks":{name:{"acc":..,"acc_norm":..,"n":..,
 * "items_acc":"0101.."}}} and the per-item correctness to the forgetting
 * tracker (baseline = the step-0 evaluation, carried across a resume in
 * train_state.bin); an alarm becomes an events.jsonl line and, with
 * stop_on_forgetting, a stop request.
 *
 * KL reference (runcfg_kl_reference): the run's step-0 weights are cfg->model,
 * loaded again here in bf16 (precision bf16, packed); on the val batches each
 * row's logits of the model as trained and of the reference give
 * KL(reference || model) and top-1 agreement (model_compare_rows), logged as
 * "val_kl_ref" (mean over rows) and "val_top1_ref" (fraction).  A fresh run
 * records the reference's sha256 (model_dir_sha256) in RUN_DIR/kl_reference.json;
 * a resume recomputes it and refuses a base model that changed, so the KL after
 * a resume is the KL the uninterrupted run would have logged. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "qs/dataloader.h"
#include "qs/eval.h"
#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/matmul.h"
#include "qs/forget.h"
#include "qs/hfconfig.h"
#include "qs/layers.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"
#include "qs/tokenizer.h"
#include "qs/trainer.h"
#include "trainer_impl.h"

struct trainer_eval {
    runcfg cfg;
    tokenizer *tok;
    eval_session *session;
    forget_tracker *forget;
    model_lm *lm;
    llama_model *lm_model;   /* the model lm was created for */
    char task_names[16][64];
    const char *task_ptrs[16];
    unsigned char *correct;  /* [n_items] scratch */
    dataloader *val;         /* NULL: no val_loss */
    llama_acts val_acts;
    llama_model *val_model;  /* the model val_acts were made for */
    int32_t *val_tok;        /* [2 * B * T]: inputs, then targets */
    int kl_on;               /* runcfg_kl_reference */
    llama_model ref;         /* with kl_on, after begin(): step-0 weights, bf16 forwards */
    int ref_loaded;
    llama_acts ref_acts;     /* [B, T] */
    model_compare_row *kl_rows; /* [TRAINER_EVAL_CHUNK] */
    float *losses;           /* [TRAINER_EVAL_CHUNK] */
    int *no_rows;            /* [B] zeros: a forward without the lm_head */
};

/* Logits rows the val and reference arenas hold: chunks of TRAINER_EVAL_CHUNK
 * rows through the lm_head where its rows are independent (the same bits as
 * one product over all B x T rows), else all of them.  At the 1B shape
 * (B=1 x T=1024, 153k vocabulary) that is 157 MB of logits per arena instead
 * of 628. */
enum { TRAINER_EVAL_CHUNK = 256 };

static int trainer_eval_logits_rows(int B, int T, int precision)
{
    return matmul_rows_independent(precision) && B * T > TRAINER_EVAL_CHUNK ? TRAINER_EVAL_CHUNK
                                                                            : B * T;
}

size_t trainer_eval_arena_bytes(const llama_config *c, int B, int T, int precision)
{
    /* one forward of B x T from position 0: one layer's KV cache (kv_shared) */
    return model_acts_infer_elems(c, B * T, B * T, trainer_eval_logits_rows(B, T, precision), 1) *
           sizeof(float);
}

/* An inference arena for forwards of B x T (trainer_eval_arena_bytes). */
static int trainer_eval_arena(llama_acts *a, const llama_model *m, int B, int T, qs_diag *d)
{
    int rc = model_acts_init_infer(a, &m->cfg, B * T, B * T,
                                   trainer_eval_logits_rows(B, T, m->precision), 1, d);
    if (!rc && (rc = model_acts_view(a, &m->cfg, B, T, T, d)))
        model_acts_free(a);
    return rc;
}

/* The forward of m on the batch in e->val_tok: the logits of every row when a
 * holds them all, else the final-norm rows only (the lm_head comes per chunk). */
static int trainer_eval_forward(struct trainer_eval *e, llama_model *m, llama_acts *a, int B,
                                int T, qs_diag *d)
{
    int full = a->logits_cap >= B * T || !a->logits_cap;
    a->logits_rows = full ? NULL : e->no_rows;
    int rc = model_forward(m, a, e->val_tok, NULL, B, T, 0, d);
    a->logits_rows = NULL;
    return rc;
}

/* Logits rows [r0, r0 + n) of the last trainer_eval_forward on a. */
static const float *trainer_eval_logits(llama_model *m, llama_acts *a, int B, int T, int r0,
                                        int n)
{
    const size_t V = (size_t)m->cfg.vocab_size;
    if (a->logits_cap >= B * T || !a->logits_cap)
        return a->logits + (size_t)r0 * V;
    model_lm_head(m, a->logits, a->lnf + (size_t)r0 * m->cfg.dim, n);
    return a->logits;
}

/* Mean next-token loss over the first eval_val_batches val batches; with the
 * KL reference also the mean KL(reference || model) and the top-1 agreement
 * over their rows.  Rows go in chunks (trainer_eval_logits_rows): each row's
 * loss as xent_forward gives it, summed in row order in double as
 * model_forward's loss, the KL rows as model_compare_rows: the same bits as
 * with every row's logits at once. */
static int trainer_eval_val_loss(struct trainer_eval *e, llama_model *m, double *loss,
                                 double *kl, double *top1, qs_diag *d)
{
    int B = (int)e->cfg.batch_size, T = (int)e->cfg.seq_len, N = B * T, rc;
    if (e->val_model != m) {
        model_acts_free(&e->val_acts);
        e->val_model = NULL;
        if ((rc = trainer_eval_arena(&e->val_acts, m, B, T, d)))
            return rc;
        e->val_model = m;
    }
    const int V = m->cfg.vocab_size;
    const int32_t *targets = e->val_tok + (size_t)N;
    dataloader_rewind(e->val);
    double sum = 0.0, kl_sum = 0.0;
    size_t agree = 0;
    for (long i = 0; i < e->cfg.eval_val_batches; i++) {
        dataloader_next(e->val, e->val_tok, e->val_tok + (size_t)N);
        if ((rc = trainer_eval_forward(e, m, &e->val_acts, B, T, d)) ||
            (e->ref_loaded && (rc = trainer_eval_forward(e, &e->ref, &e->ref_acts, B, T, d))))
            return rc;
        double bsum = 0.0;   /* xent_forward's mean: row losses summed in row order */
        long cnt = 0;
        for (int r0 = 0; r0 < N; r0 += TRAINER_EVAL_CHUNK) {
            int n = N - r0 < TRAINER_EVAL_CHUNK ? N - r0 : TRAINER_EVAL_CHUNK;
            const float *lg = trainer_eval_logits(m, &e->val_acts, B, T, r0, n);
            xent_forward(e->losses, NULL, lg, targets + r0, n, V);
            for (int j = 0; j < n; j++)
                if (targets[r0 + j] >= 0 && targets[r0 + j] < V) {
                    bsum += e->losses[j];
                    cnt++;
                }
            if (!e->ref_loaded)
                continue;
            int bad;
            const float *lr = trainer_eval_logits(&e->ref, &e->ref_acts, B, T, r0, n);
            if (model_compare_rows(lg, lr, V, NULL, n, e->kl_rows, &bad))
                return diag_set(d, QS_ENAN, e->cfg.train_data, -1,
                                "in-loop eval: non-finite logits at val row %d (model or KL "
                                "reference)", r0 + bad);
            for (int j = 0; j < n; j++) {   /* sums added in row order */
                kl_sum += e->kl_rows[j].kl;
                agree += e->kl_rows[j].top == e->kl_rows[j].top_ref;
            }
        }
        sum += cnt ? bsum / cnt : 0.0;
    }
    *loss = sum / (double)e->cfg.eval_val_batches;
    double rows = (double)e->cfg.eval_val_batches * N;
    *kl = kl_sum / rows;
    *top1 = (double)agree / rows;
    if (!isfinite(*loss))
        return diag_set(d, QS_ENAN, e->cfg.train_data, -1, "in-loop eval: validation loss is NaN/Inf");
    return 0;
}

/* Bytes of the scorer's arena once it has scored the session's longest request
 * (model_lm_acts_elems; a request past the context is cut to it, as the scorer
 * does): counted in the run's memory estimate (trainer_memory_add_eval). */
static int trainer_eval_scoring_bytes(const eval_session *s, const char *model, size_t *bytes,
                                      qs_diag *d)
{
    llama_config c;
    int rc = hfconfig_load(&c, model, d);
    if (rc)
        return rc;
    size_t n = 0, longest = 0, longest_cont = 0;
    eval_session_items(s, &n);
    for (size_t i = 0; i < n; i++) {
        lm_request r;
        eval_session_request(s, i, &r);
        for (int k = 0; k < r.n_cont; k++) {
            size_t len = r.n_ctx + r.n_cont_tok[k];
            longest = len > longest ? len : longest;
            longest_cont = r.n_cont_tok[k] > longest_cont ? r.n_cont_tok[k] : longest_cont;
        }
    }
    size_t ctx = (size_t)hfconfig_max_context(&c);
    longest = longest < ctx ? longest : ctx;
    longest_cont = longest_cont < longest ? longest_cont : longest;
    size_t prefix = 0;
    if (n) {   /* the longest prefix the scorer may share between two of the requests */
        lm_request *req = qs_malloc(n * sizeof *req);
        if (!req)
            return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        for (size_t i = 0; i < n; i++)
            eval_session_request(s, i, &req[i]);
        rc = model_lm_shared_prefix(req, n, &prefix, d);
        qs_free(req);
        if (rc)
            return rc;
    }
    size_t elems = n ? model_lm_acts_elems(&c, (int)longest, (int)longest_cont, (int)prefix) : 0;
    if (elems == SIZE_MAX || elems > SIZE_MAX / sizeof(float))
        return diag_set(d, QS_ERANGE, model, -1, "the in-loop tasks' scoring arena does not fit "
                        "in 64 bits");
    *bytes = elems * sizeof(float);
    return 0;
}

static int trainer_eval_encode(void *self, const char *text, size_t len, int add_bos,
                               int32_t **ids, size_t *n_ids, qs_diag *d)
{
    return tokenizer_encode(self, text, len, add_bos, ids, n_ids, d);
}

static int trainer_eval_run_hook(void *self, struct llama_model *m, long step, int quantized,
                                 char *line, size_t line_bytes, char *event, size_t event_bytes,
                                 qs_diag *d)
{
    struct trainer_eval *e = self;
    int rc;
    size_t n_items = 0;
    const eval_item *items = NULL;
    int n_rows = 0, stop = 0, n_tasks = 0;
    const eval_row *rows = NULL;
    if (e->session) {   /* NULL: no tasks, val_loss only */
        if (e->lm_model != m) {
            model_lm_destroy(e->lm);
            e->lm = NULL;
            if ((rc = model_lm_create(&e->lm, m, hfconfig_max_context(&m->cfg), d)))
                return rc;
            e->lm_model = m;
        }
        lm_scorer lm = model_lm_scorer(e->lm);
        if ((rc = eval_session_run(e->session, &lm, NULL, NULL, d)))
            return rc;
        items = eval_session_items(e->session, &n_items);
        rows = eval_session_rows(e->session, &n_rows);
        n_tasks = eval_session_n_tasks(e->session);
    }
    size_t used = (size_t)snprintf(line, line_bytes, "{\"type\":\"eval\",\"step\":%ld,\"quantized\":%s,",
                                   step, quantized ? "true" : "false");
    if (e->val) {
        double vl = 0.0, kl = 0.0, top1 = 0.0;
        if ((rc = trainer_eval_val_loss(e, m, &vl, &kl, &top1, d)))
            return rc;
        used += (size_t)snprintf(line + used, line_bytes - used,
                                 "\"val_loss\":%.9g,\"val_ppl\":%.9g,", vl, exp(vl));
        if (e->ref_loaded)
            used += (size_t)snprintf(line + used, line_bytes - used,
                                     "\"val_kl_ref\":%.9g,\"val_top1_ref\":%.9g,", kl, top1);
        used += (size_t)snprintf(line + used, line_bytes - used, "\"val_batches\":%ld,",
                                 e->cfg.eval_val_batches);
    }
    used += (size_t)snprintf(line + used, line_bytes - used, "\"tasks\":{");
    event[0] = 0;
    for (int t = 0; t < n_tasks; t++) {
        const eval_row *r = NULL;
        for (int i = 0; i < n_rows && !r; i++)
            if (rows[i].task == t && rows[i].parent < 0)
                r = &rows[i];
        size_t n = 0;
        for (size_t i = 0; i < n_items; i++)
            if (items[i].task == t)
                e->correct[n++] = items[i].correct;
        if (!r || used + n + 256 >= line_bytes)
            return diag_set(d, QS_ERANGE, NULL, -1, "eval line for task %d does not fit", t);
        used += (size_t)snprintf(line + used, line_bytes - used,
                                 "%s\"%s\":{\"acc\":%.6g,\"acc_norm\":%.6g,\"n\":%zu,\"items_acc\":\"",
                                 t ? "," : "", r->name, r->acc.value,
                                 r->has_norm ? r->acc_norm.value : r->acc.value, n);
        for (size_t i = 0; i < n; i++)
            line[used++] = e->correct[i] ? '1' : '0';
        used += (size_t)snprintf(line + used, line_bytes - used, "\"}");
        forget_result fr;
        if ((rc = forget_tracker_observe(e->forget, r->name, step, e->correct, n, &fr, d)))
            return rc;
        if (fr.alarm) {
            size_t k = strlen(event);
            snprintf(event + k, event_bytes - k, "%s%s", k ? "\n" : "", fr.event_json);
            stop |= fr.stop;
        }
    }
    snprintf(line + used, line_bytes - used, "}}");
    return stop;
}

/* The reference's record in the run dir: written by a fresh run (and by a
 * resume of a run that has none yet), checked by every other resume. */
static int trainer_eval_ref_record(struct trainer_eval *e, const char *run_dir, int resume,
                                   qs_diag *d)
{
    char path[RUNCFG_STR_MAX + 64], hex[65];
    int rc;
    if (fileio_join(path, sizeof path, run_dir, "kl_reference.json"))
        return diag_set(d, QS_ERANGE, run_dir, -1, "path too long");
    if ((rc = model_dir_sha256(e->cfg.model, hex, d)))
        return rc;
    if (resume && fileio_exists(path)) {
        json_t *root;
        const char *want;
        if ((rc = qs_json_load_file(path, QS_JSON_OBJECT, &root, d)))
            return rc;
        qs_json_at r = qs_json_root(root, path, -1);
        if (!(rc = qs_json_str(&r, "model_sha256", &want, d)) && strcmp(want, hex))
            rc = diag_set(d, QS_EINVAL, path, -1,
                          "the KL reference %.200s (the run's base model) has sha256 %.16s..., "
                          "the run started from %.16s...: restore the base model the run was "
                          "started from", e->cfg.model, hex, want);
        json_decref(root);
        return rc;
    }
    char *qm = qs_json_quote_dup(e->cfg.model), text[RUNCFG_STR_MAX * 2 + 256];
    if (!qm)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    int n = snprintf(text, sizeof text,
                     "{\"model\": %s, \"model_sha256\": \"%s\", \"precision\": \"bf16\"}\n",
                     qm, hex);
    qs_free(qm);
    return fileio_write_atomic(path, text, (size_t)n, d);
}

static int trainer_eval_begin(void *self, const char *run_dir, int resume, qs_diag *d)
{
    struct trainer_eval *e = self;
    if (!e->kl_on || e->ref_loaded)
        return 0;
    int B = (int)e->cfg.batch_size, T = (int)e->cfg.seq_len, rc;
    /* the inference loader: a bf16 checkpoint is held as its bf16 packs alone */
    if ((rc = trainer_eval_ref_record(e, run_dir, resume, d)) ||
        (rc = model_load_packed(&e->ref, e->cfg.model, MATMUL_BF16, d)))
        return rc;
    if ((rc = trainer_eval_arena(&e->ref_acts, &e->ref, B, T, d))) {
        model_free(&e->ref);
        return rc;
    }
    if (!(e->kl_rows = qs_malloc(TRAINER_EVAL_CHUNK * sizeof *e->kl_rows))) {
        model_acts_free(&e->ref_acts);
        model_free(&e->ref);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    e->ref_loaded = 1;
    return 0;
}

/* The state a resume needs: the forgetting baselines (the step-0 evaluation is
 * not repeated after a resume, so without them the first evaluation after it
 * would become the baseline). */
static int trainer_eval_save(void *self, void **bytes, size_t *n, qs_diag *d)
{
    return forget_tracker_save(((struct trainer_eval *)self)->forget, bytes, n, d);
}

static int trainer_eval_restore(void *self, const void *bytes, size_t n, qs_diag *d)
{
    return forget_tracker_restore(((struct trainer_eval *)self)->forget, bytes, n, d);
}

int trainer_eval_create(train_eval_hook *out, const runcfg *cfg, qs_diag *d)
{
    memset(out, 0, sizeof *out);
    struct trainer_eval *e = qs_calloc(1, sizeof *e);
    if (!e)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    e->cfg = *cfg;
    int n_tasks = 0, rc;
    char buf[RUNCFG_STR_MAX];
    memcpy(buf, cfg->eval_tasks, sizeof buf);
    for (char *save, *s = strtok_r(buf, ",", &save); s && n_tasks < 16; s = strtok_r(NULL, ",", &save)) {
        snprintf(e->task_names[n_tasks], sizeof e->task_names[0], "%s", s);
        e->task_ptrs[n_tasks] = e->task_names[n_tasks];
        n_tasks++;
    }
    if (!n_tasks && cfg->eval_val_batches <= 0) {
        qs_free(e);
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "eval_every=%ld has nothing to evaluate: eval_tasks is empty and "
                        "eval_val_batches is 0 (give tasks, or a val split and eval_val_batches > 0)",
                        cfg->eval_every);
    }
    if (n_tasks && !cfg->eval_tasks_dir[0]) {   /* the CLI fills in the binary's tasks/ */
        qs_free(e);
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "eval_tasks_dir: empty; give the directory of the task definitions");
    }
    eval_options o;
    eval_options_default(&o);
    o.tasks_dir = e->cfg.eval_tasks_dir;
    o.data_dir = e->cfg.eval_data_dir;
    o.tasks = e->task_ptrs;
    o.n_tasks = n_tasks;
    o.subset = cfg->eval_subset;
    o.subset_seed = (uint64_t)cfg->seed;
    forget_opts fo;
    forget_opts_default(&fo);
    fo.max_drop_points = cfg->forgetting_drop_points;
    fo.alpha = cfg->forgetting_alpha;
    fo.stop_on_forgetting = cfg->stop_on_forgetting;
    if ((rc = tokenizer_create(&e->tok, cfg->model, d)))
        goto fail;
    if (cfg->eval_val_batches > 0) {
        dataloader_opts vo = {(int)cfg->batch_size, (int)cfg->seq_len, (uint64_t)cfg->seed, 0,
                              tokenizer_vocab_size(e->tok)};
        rc = dataloader_create(&e->val, cfg->train_data, "val", tokenizer_hash(e->tok), &vo, d);
        if (rc && rc != QS_ENOMEM && d) {
            char why[QS_DIAG_MSG_MAX];
            snprintf(why, sizeof why, "%s", d->msg);
            rc = diag_set(d, rc, cfg->train_data, -1,
                          "eval_val_batches=%ld needs a usable \"val\" split (tokenize "
                          "--val-fraction F) but: %.300s; set eval_val_batches=0 to skip val_loss",
                          cfg->eval_val_batches, why);
        }
        if (rc)
            goto fail;
        e->val_tok = qs_malloc(2 * (size_t)cfg->batch_size * cfg->seq_len * sizeof *e->val_tok);
        e->losses = qs_malloc(TRAINER_EVAL_CHUNK * sizeof *e->losses);
        e->no_rows = qs_calloc((size_t)cfg->batch_size, sizeof *e->no_rows);
        if (!e->val_tok || !e->losses || !e->no_rows) {
            rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
            goto fail;
        }
    }
    int32_t bos = tokenizer_bos_id(e->tok);
    eval_encoder enc = {e->tok, trainer_eval_encode, bos >= 0 ? bos : tokenizer_eos_id(e->tok)};
    /* no tasks: val_loss / val_ppl (and the KL reference) only, no session */
    if ((n_tasks && (rc = eval_session_create(&e->session, &o, &enc, d))) ||
        (rc = forget_tracker_create(&e->forget, &fo, d)))
        goto fail;
    size_t n_items = 0;
    if (e->session)
        eval_session_items(e->session, &n_items);
    if (e->session && (rc = trainer_eval_scoring_bytes(e->session, cfg->model, &out->arena_bytes,
                                                       d)))
        goto fail;
    e->correct = qs_malloc(n_items ? n_items : 1);
    if (!e->correct) {
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        goto fail;
    }
    e->kl_on = runcfg_kl_reference(cfg);
    out->self = e;
    out->every_steps = cfg->eval_every;
    out->run = trainer_eval_run_hook;
    out->begin = trainer_eval_begin;
    out->save = trainer_eval_save;
    out->restore = trainer_eval_restore;
    return 0;
fail:
    out->self = e;
    trainer_eval_destroy(out);
    return rc;
}

void trainer_eval_destroy(train_eval_hook *h)
{
    struct trainer_eval *e = h->self;
    if (!e)
        return;
    model_lm_destroy(e->lm);
    eval_session_destroy(e->session);
    forget_tracker_destroy(e->forget);
    tokenizer_destroy(e->tok);
    qs_free(e->correct);
    dataloader_destroy(e->val);
    if (e->val_model)
        model_acts_free(&e->val_acts);
    qs_free(e->val_tok);
    qs_free(e->losses);
    qs_free(e->no_rows);
    if (e->ref_loaded) {
        model_acts_free(&e->ref_acts);
        model_free(&e->ref);
        qs_free(e->kl_rows);
    }
    qs_free(e);
    memset(h, 0, sizeof *h);
}
