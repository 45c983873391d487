/* trainer.c: the training loop (see include/qs/trainer.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "qs/vecops.h"
#include "qs/dist.h"
#include "qs/fileio.h"
#include "qs/hfconfig.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model_acts.h"
#include "trainer_impl.h"

static double trainer_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int trainer_memory_estimate(const runcfg *cfg, train_memory *mem, qs_diag *d)
{
    llama_config c;
    memset(mem, 0, sizeof *mem);
    quant_recipe r;
    int precision, rc = trainer_recipe_from_cfg(cfg, &r, d);
    if (rc || (rc = matmul_precision_parse(cfg->precision, "precision", &precision, d)) ||
        (rc = hfconfig_load(&c, cfg->model, d)))
        return rc;
    if (cfg->seq_len > hfconfig_max_context(&c))   /* name the key, not an activation size */
        return diag_set(d, QS_ERANGE, cfg->model, -1,
                        "seq_len %ld exceeds the model's context of %d tokens "
                        "(max_position_embeddings in config.json%s); lower seq_len",
                        cfg->seq_len, hfconfig_max_context(&c),
                        c.sliding_window ? ", or its sliding_window" : "");
    int B = (int)cfg->batch_size, T = (int)cfg->seq_len, n_slots;
    model_memory mm;
    if (model_memory_estimate(&c, B, T, T, &mm))   /* runcfg's B x T bound keeps it finite */
        return diag_set(d, QS_ERANGE, cfg->model, -1, "the memory of batch_size %d x seq_len %d "
                        "does not fit in 64 bits", B, T);
    mem->model_train_bytes = cfg->recompute ? mm.train_recompute_bytes : mm.train_bytes;
    mem->grad_acts_bytes = model_grad_acts_elems(&c, B, T) * sizeof(float);
    size_t master_packs = 0;
    mem->quant_bytes = trainer_quant_bytes(&c, cfg, precision, &n_slots, &master_packs, d);
    /* the quantized Linears' packs exist during a bf16 warmup only (never with recompute) */
    mem->warmup_pack_bytes = cfg->qat && cfg->bf16_warmup_steps > 0 && !cfg->recompute
                                 ? master_packs : 0;
    mem->batch_bytes = 2 * (size_t)B * T * sizeof(int32_t);
    mem->pack_bytes = cfg->recompute ? model_ws_bytes_estimate(&c, precision, B * T)
                                     : model_packs_bytes_estimate(&c, precision, B * T, n_slots) -
                                           master_packs;
    /* micro-batches after a rank's first are computed into a scratch block */
    mem->grad_scratch_bytes = cfg->grad_accum > 1 ? mm.grads_bytes : 0;
    if (runcfg_kl_reference(cfg)) {   /* trainer_eval.c's reference: model_load_packed, arena */
        model_packed_memory pm;
        int bf16 = 0;
        if ((rc = model_dir_matrices_bf16(cfg->model, &bf16, d)))
            return rc;
        if (model_packed_memory_estimate(&c, MATMUL_BF16, NULL, bf16, &pm))
            return diag_set(d, QS_ERANGE, cfg->model, -1, "the KL reference's memory does not "
                            "fit in 64 bits");
        mem->kl_ref_bytes = pm.bytes + trainer_eval_arena_bytes(&c, B, T, MATMUL_BF16);
    }
    if (cfg->eval_every > 0 && cfg->eval_val_batches > 0)   /* trainer_eval_val_loss */
        mem->eval_val_bytes = trainer_eval_arena_bytes(&c, B, T, precision) +
                              2 * (size_t)B * T * sizeof(int32_t);
    int n_ranks = dist_size();
    if (cfg->zero && n_ranks > 1)   /* ZeRO-1: this rank's part of the Adam moments */
        mem->model_train_bytes -= mm.adam_bytes - mm.adam_bytes / (size_t)n_ranks;
    /* the warmup's packs of the quantized weights go before the operands come */
    size_t phase_bytes = mem->quant_bytes > mem->warmup_pack_bytes ? mem->quant_bytes
                                                                   : mem->warmup_pack_bytes;
    mem->total_bytes = mem->model_train_bytes + mem->grad_acts_bytes + phase_bytes +
                       mem->batch_bytes + mem->pack_bytes + mem->grad_scratch_bytes +
                       mem->kl_ref_bytes + mem->eval_val_bytes;
    return 0;
}

void trainer_memory_add_eval(train_memory *m, const train_eval_hook *h)
{
    m->total_bytes -= m->eval_task_bytes;
    m->eval_task_bytes = h ? h->arena_bytes : 0;
    m->total_bytes += m->eval_task_bytes;
}

static int trainer_open_logs(struct trainer *t, int resume, qs_diag *d)
{
    char path[TRAINER_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/metrics.jsonl", t->run_dir);
    int rc;
    if (t->rank != 0)   /* only rank 0 writes the run directory */
        goto detector;
    if (resume) {   /* checked by trainer_resume_logs_check before anything is cut */
        char ev[TRAINER_PATH_MAX + 32];
        snprintf(ev, sizeof ev, "%s/events.jsonl", t->run_dir);
        if ((rc = trainer_log_cut(path, t->step, d)) || (rc = trainer_log_cut(ev, t->step, d)))
            return rc;
    }
    t->metrics = fopen(path, "a");
    if (!t->metrics)
        return diag_set(d, QS_EIO, path, -1, "cannot open for appending: %s", strerror(errno));
detector:
    if (!t->qset)
        return 0;
    satstats_config sc;
    satstats_config_default(&sc);
    sc.clip_threshold = t->cfg.saturation_clip_rate;
    sc.alarm_steps = (int)t->cfg.saturation_alarm_steps;
    sc.log_interval_steps = (int)t->cfg.log_every;
    sc.run_dir = t->rank == 0 ? t->run_dir : NULL;
    sc.run_name = t->cfg.run_name;
    sc.resume_step = resume ? t->step : -1;
    if ((rc = satstats_create(&t->sat, &sc, t->qset, d)))
        return rc;
    if (t->alarm_restored)
        satstats_episode_restore(t->sat, t->alarm_restored, t->n_alarm_restored);
    return 0;
}

static int trainer_fresh_dir(struct trainer *t, qs_diag *d)
{
    if (t->rank != 0)
        return 0;
    char path[TRAINER_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/metrics.jsonl", t->run_dir);
    if (fileio_exists(path))
        return diag_set(d, QS_EINVAL, t->run_dir, -1,
                        "run directory already holds a run (metrics.jsonl); use --resume %s or "
                        "another out_dir", t->run_dir);
    int rc = fileio_mkdir_p(t->run_dir, d);
    if (rc)
        return rc;
    char *js = runcfg_to_json(&t->cfg);
    if (!js)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    snprintf(path, sizeof path, "%s/config.json", t->run_dir);
    rc = fileio_write_atomic(path, js, strlen(js), d);
    qs_free(js);
    return rc;
}

static int trainer_alloc(struct trainer *t, qs_diag *d)
{
    const llama_config *c = &t->m.cfg;
    int B = (int)t->cfg.batch_size, T = (int)t->cfg.seq_len;
    int rc = model_acts_init(&t->a, c, B, T, T,
                             t->cfg.recompute ? MODEL_ACTS_RECOMPUTE : MODEL_ACTS_TRAIN, d);
    if (rc || (rc = model_grad_acts_init(&t->g, c, B, T, d)) || (rc = trainer_dist_init(t, d)))
        return rc;
    t->grads = qs_calloc(t->m.n_params, sizeof *t->grads);
    t->grads_zeroed = 1;
    t->gw.layer = qs_calloc((size_t)c->n_layers, sizeof *t->gw.layer);
    t->tokens = qs_malloc((size_t)B * T * sizeof *t->tokens);
    t->targets = qs_malloc((size_t)B * T * sizeof *t->targets);
    if (!t->grads || !t->gw.layer || !t->tokens || !t->targets ||
        adamw_init(&t->opt, trainer_dist_opt_elems(t)))
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory for gradients and optimizer state");
    return model_weights_point(&t->gw, &t->m, t->grads);
}

int trainer_resume_check(const runcfg *cfg, const char *run_dir, long *steps_done, qs_diag *d)
{
    char ck_dir[TRAINER_PATH_MAX + 64];
    *steps_done = 0;
    if (!trainer_ckpt_latest(run_dir, ck_dir, sizeof ck_dir, steps_done))
        return diag_set(d, QS_ENOTFOUND, run_dir, -1,
                        "no checkpoint to resume from (expected ckpt/step_N/train_state.bin)");
    long done = *steps_done;
    if (cfg->steps <= done)   /* nothing left to run: say so instead of doing nothing */
        return diag_set(d, QS_EINVAL, run_dir, -1,
                        "steps %ld: the latest checkpoint ckpt/step_%ld has %ld steps done%s; to "
                        "continue, resume with --set steps=N above %ld",
                        cfg->steps, done, done, cfg->steps == done ? " (the run is complete)" : "",
                        done);
    return 0;
}

int trainer_create(trainer **out, const runcfg *cfg, train_data *data,
                   const trainer_options *opt, qs_diag *d)
{
    *out = NULL;
    int rc = runcfg_validate(cfg, d);
    if (rc || (rc = trainer_run_dir_check(cfg, opt->resume_dir ? opt->resume_dir : cfg->out_dir,
                                          d)))
        return rc;
    train_memory mem;
    if ((rc = trainer_memory_estimate(cfg, &mem, d)))
        return rc;
    trainer_memory_add_eval(&mem, opt->eval);
    if (opt->mem_limit_bytes && mem.total_bytes > opt->mem_limit_bytes) {
        /* the config's own levers, with what each would leave */
        char levers[256] = "";
        size_t k = 0;
        train_memory rm;
        runcfg rc_cfg = *cfg;
        rc_cfg.recompute = 1;
        if (!cfg->recompute && !trainer_memory_estimate(&rc_cfg, &rm, NULL)) {
            trainer_memory_add_eval(&rm, opt->eval);
            k += (size_t)snprintf(levers + k, sizeof levers - k, "recompute=true (%.1f MiB), ",
                                  rm.total_bytes / 1048576.0);
        }
        if (mem.kl_ref_bytes > 0 && k < sizeof levers)
            snprintf(levers + k, sizeof levers - k, "eval_kl_reference=false (-%.1f MiB), ",
                     mem.kl_ref_bytes / 1048576.0);
        return diag_set(d, QS_ERANGE, NULL, -1,
                        "run needs %.1f MiB (model+grads+Adam+activations %.1f, backward scratch "
                        "%.1f, quantized operands %.1f, weight packs %.1f, gradient scratch "
                        "%.1f, KL reference %.1f, in-loop val %.1f, in-loop tasks %.1f) but %.1f "
                        "MiB are allowed; %slower batch_size/seq_len or raise max_memory_gb",
                        mem.total_bytes / 1048576.0, mem.model_train_bytes / 1048576.0,
                        mem.grad_acts_bytes / 1048576.0, mem.quant_bytes / 1048576.0,
                        mem.pack_bytes / 1048576.0, mem.grad_scratch_bytes / 1048576.0,
                        mem.kl_ref_bytes / 1048576.0, mem.eval_val_bytes / 1048576.0,
                        mem.eval_task_bytes / 1048576.0, opt->mem_limit_bytes / 1048576.0,
                        levers);
    }
    struct trainer *t = qs_calloc(1, sizeof *t);
    if (!t)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    t->cfg = *cfg;
    t->data = data;
    t->last_ckpt_step = -1;
    const char *run_dir = opt->resume_dir ? opt->resume_dir : cfg->out_dir;
    snprintf(t->run_dir, sizeof t->run_dir, "%s", run_dir);
    if (!t->cfg.run_name[0]) {   /* the last component; "runs/qat1/" names qat1 too */
        size_t end = strlen(run_dir);
        while (end > 1 && run_dir[end - 1] == '/')
            end--;
        size_t start = end;
        while (start > 0 && run_dir[start - 1] != '/')
            start--;
        if (start == end)   /* "/" itself */
            start = 0;
        snprintf(t->cfg.run_name, sizeof t->cfg.run_name, "%.*s", (int)(end - start),
                 run_dir + start);
    }
    long ck_step = 0;
    char ck_dir[TRAINER_PATH_MAX + 64];
    if (opt->resume_dir) {
        if ((rc = trainer_resume_check(cfg, run_dir, &ck_step, d)))
            goto fail;
        if (!trainer_ckpt_latest(run_dir, ck_dir, sizeof ck_dir, &ck_step)) {   /* gone since */
            rc = diag_set(d, QS_ENOTFOUND, run_dir, -1, "the latest checkpoint disappeared");
            goto fail;
        }
        char cfg_path[TRAINER_PATH_MAX + 32];
        snprintf(cfg_path, sizeof cfg_path, "%s/config.json", run_dir);
        if ((rc = trainer_resume_config_check(cfg, cfg_path, ck_dir, d)))
            goto fail;
    }
    snprintf(t->model_dir, sizeof t->model_dir, "%s", opt->resume_dir ? ck_dir : cfg->model);
    if ((rc = model_load_dir(&t->m, t->model_dir, d)) ||
        (rc = matmul_precision_parse(cfg->precision, "precision", &t->m.precision, d)))
        goto fail;
    if (t->m.hif8) {
        rc = diag_set(d, QS_EINVAL, t->model_dir, -1, "a HiF8 checkpoint (quantization_config: "
                      "weights stored as codes) is for inference: train from its source checkpoint");
        goto fail;
    }
    if ((rc = trainer_alloc(t, d)))
        goto fail;
    t->hp = (adamw_hparams){cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay};
    t->sched = (schedule){cfg->lr, cfg->lr_min, cfg->lr_warmup_steps, cfg->steps,
                          schedule_decay_parse(cfg->lr_decay), cfg->qat, cfg->bf16_warmup_steps};
    if ((rc = schedule_validate(&t->sched, d)) || (rc = trainer_quant_init(t, d)))
        goto fail;
    if (opt->eval)   /* before the restore: it hands the hook its saved state */
        t->eval = *opt->eval;
    /* every rank loaded its model and data before rank 0 writes anything: a rank
     * that failed (a bad copy of the model on its node) leaves no run directory
     * behind that a retry would then refuse as an earlier run */
    if (t->n_ranks > 1 && (rc = dist_agree(0, 0, NULL, d)))
        goto fail;
    /* a resume reads and checks everything (state, logs, the KL base) before it
     * cuts a log: a refused resume leaves the run untouched */
    if (opt->resume_dir)
        rc = trainer_ckpt_restore(t, ck_dir, d);
    else
        rc = trainer_fresh_dir(t, d);
    if (!rc && opt->resume_dir)
        rc = trainer_resume_logs_check(t, d);
    /* weight packs after the (restored) weights are final; refreshed every step.
     * recompute (the memory-lean mode): none, weights packed on the fly */
    if (rc || (rc = cfg->recompute ? model_ws_create(&t->m, d) : model_packs_create(&t->m, d)))
        goto fail;
    t->step0 = t->step;
    if (t->eval.begin && t->rank == 0 &&   /* the evaluating rank */
        (rc = t->eval.begin(t->eval.self, t->run_dir, opt->resume_dir != NULL, d)))
        goto fail;
    if (opt->resume_dir && t->n_ranks > 1 && (rc = dist_agree(0, 0, NULL, d)))
        goto fail;   /* every rank restored before rank 0 cuts the logs */
    if ((rc = trainer_open_logs(t, opt->resume_dir != NULL, d)))
        goto fail;
    t->t_start = trainer_now_s();
    *out = t;
    return 0;
fail:
    trainer_destroy(t);
    return rc;
}

static void trainer_eval_shown_free(struct trainer *t)
{
    for (int k = 0; k < 2; k++) {
        qs_free(t->eval_shown[k]);
        t->eval_shown[k] = NULL;
    }
}

void trainer_destroy(trainer *t)
{
    if (!t)
        return;
    if (t->metrics)
        fclose(t->metrics);
    trainer_quant_free(t);
    model_acts_free(&t->a);
    model_grad_acts_free(&t->g);
    adamw_free(&t->opt);
    trainer_dist_free(t);
    qs_free(t->grads);
    qs_free(t->gw.layer);
    qs_free(t->tokens);
    qs_free(t->targets);
    qs_free(t->alarm_restored);
    trainer_eval_shown_free(t);
    model_free(&t->m);
    qs_free(t);
}

static int trainer_stop_nan(struct trainer *t, const char *what, qs_diag *d)
{
    char last[64] = "none yet";
    if (t->last_ckpt_step >= 0)
        snprintf(last, sizeof last, "ckpt/step_%ld", t->last_ckpt_step);
    trainer_event(t->run_dir, t->step, "stop", NULL, "reason", "nan", "msg", what, NULL);
    return diag_set(d, QS_ENAN, t->run_dir, -1,
                    "step %ld: %s; run stopped, weights not updated (last good checkpoint: %s)",
                    t->step, what, last);
}

/* This rank's micro-batches of the step (trainer_dist.c: rank r owns the
 * step's micro-batches r*grad_accum .. r*grad_accum + grad_accum - 1 and skips
 * the others' batches); *loss_sum = their losses added in order.  Each
 * micro-batch's gradient is computed onto zeros and added to the sum in order,
 * the bits N ranks produce between them.  A NaN returns QS_ENAN with the reason
 * in d->msg (trainer_stop_nan runs once every rank knows). */
static int trainer_micro_batches(struct trainer *t, double *loss_sum, qs_diag *d)
{
    int B = (int)t->cfg.batch_size, T = (int)t->cfg.seq_len, rc;
    long ga = t->cfg.grad_accum, before = t->rank * ga, after = (t->n_ranks - 1 - t->rank) * ga;
    int qat = t->qset && t->phase == SCHEDULE_PHASE_QAT;
    model_linear_bwd_hook bwd = trainer_bwd_hook_proto;
    bwd.self = t;
    double sum = 0.0;
    if (!t->grads_zeroed)   /* a step stopped before AdamW consumed them */
        memset(t->grads, 0, t->m.n_params * sizeof *t->grads);
    t->grads_zeroed = 0;
    if ((rc = trainer_data_skip(t, before, d)))
        return rc;
    if (qat)   /* every quantizer runs once per micro-batch forward */
        quant_set_skip_calls(t->qset, (unsigned long)before);
    for (long mb = 0; mb < ga; mb++) {
        if ((rc = t->data->next(t->data->self, t->tokens, t->targets, B, T, d)))
            return rc;
        rc = model_forward(&t->m, &t->a, t->tokens, t->targets, B, T, 0, d);
        if (rc == QS_ENAN || (!rc && !isfinite(t->a.loss)))
            return diag_set(d, QS_ENAN, NULL, -1, "%s",
                            rc ? "NaN/Inf in a quantized tensor" : "loss is NaN/Inf");
        if (rc)
            return rc;
        sum += t->a.loss;
        if (mb > 0)
            memset(t->grad_scratch, 0, t->m.n_params * sizeof *t->grad_scratch);
        if ((rc = model_backward(&t->m, &t->a, &t->g, mb ? &t->gsw : &t->gw, t->tokens,
                                 t->targets, B, T, 1.0f / (float)(ga * t->n_ranks),
                                 t->qset ? &bwd : NULL, d)))
            return rc;
        if (mb > 0)
            vecops_add_f32(t->grads, t->grad_scratch, t->m.n_params);
    }
    if ((rc = trainer_data_skip(t, after, d)))
        return rc;
    if (qat)
        quant_set_skip_calls(t->qset, (unsigned long)after);
    *loss_sum = sum;
    return 0;
}

static int trainer_eval_write(struct trainer *t, const char *line, const char *event, int rc,
                              qs_diag *d);

static int trainer_eval_run_here(struct trainer *t, train_step_info *info, qs_diag *d);

/* The evaluation runs on rank 0 (the others wait in the agreement), whose
 * verdict (go on, stop, error) every rank then follows. */
static int trainer_eval_run(struct trainer *t, train_step_info *info, qs_diag *d)
{
    int rc = t->rank == 0 ? trainer_eval_run_here(t, info, d) : 0;
    return t->n_ranks > 1 ? dist_agree(rc, 0, NULL, d) : rc;
}

/* This step's evaluation for the progress line: the metrics object, then
 * (after its NUL) the events, kept until the next step. */
static void trainer_eval_show(struct trainer *t, train_step_info *info, const char *line,
                              const char *event, double seconds)
{
    int k = info->n_evals;
    size_t nl = strlen(line), ne = strlen(event);
    char *keep = k < 2 && line[0] ? qs_malloc(nl + ne + 2) : NULL;
    if (!keep)   /* nothing to show, or no memory: the files have it all */
        return;
    memcpy(keep, line, nl + 1);
    memcpy(keep + nl + 1, event, ne + 1);
    t->eval_shown[k] = keep;
    info->evals[k].step = t->step;
    info->evals[k].seconds = seconds;
    info->evals[k].metrics = keep;
    info->evals[k].events = keep + nl + 1;
    info->n_evals = k + 1;
}

/* The eval seam: the model as trained (frozen fake-quant after a QAT step,
 * hook off otherwise), metrics/event lines written; 1 = stop. */
static int trainer_eval_run_here(struct trainer *t, train_step_info *info, qs_diag *d)
{
    enum { LINE_BYTES = 1 << 20, EVENT_BYTES = 1 << 14 };
    char *line = qs_calloc(LINE_BYTES + EVENT_BYTES, 1), *event = line + LINE_BYTES;
    if (!line)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    long last = t->step > 0 ? t->step - 1 : 0;
    int quantized = t->qset && t->m.hook.fn &&
                    schedule_phase(&t->sched, last) == SCHEDULE_PHASE_QAT;
    model_linear_hook saved = t->m.hook;
    if (!quantized)
        t->m.hook.fn = NULL;
    t->frozen = 1;
    double t0 = trainer_now_s();
    int rc = t->eval.run(t->eval.self, &t->m, t->step, quantized, line, LINE_BYTES, event,
                         EVENT_BYTES, d);
    double seconds = trainer_now_s() - t0;
    t->frozen = 0;
    t->m.hook = saved;
    if (rc >= 0)
        rc = trainer_eval_write(t, line, event, rc, d);
    if (rc >= 0)
        trainer_eval_show(t, info, line, event, seconds);
    qs_free(line);
    return rc;
}

static int trainer_eval_write(struct trainer *t, const char *line, const char *event, int rc,
                              qs_diag *d)
{
    if (line[0] && (fprintf(t->metrics, "%s\n", line) < 0 || fflush(t->metrics) != 0))
        return diag_set(d, QS_EIO, t->run_dir, -1, "metrics.jsonl: write failed");
    if (event[0]) {
        int erc = trainer_event_append(t->run_dir, event, d);
        if (erc)
            return erc;
    }
    return rc;
}

static int trainer_stop_forgetting(struct trainer *t, train_step_info *info, qs_diag *d)
{
    trainer_event(t->run_dir, t->step, "stop", NULL, "reason", "forgetting", NULL);
    int rc = trainer_ckpt_write(t, d);
    if (rc)
        return rc;
    info->checkpointed = 1;
    return diag_set(d, QS_ESTOP, t->run_dir, -1,
                    "step %ld: the in-loop evaluation asked to stop (forgetting); checkpoint "
                    "ckpt/step_%ld", t->step, t->step);
}

int trainer_step(trainer *t, train_step_info *info, qs_diag *d)
{
    memset(info, 0, sizeof *info);
    trainer_eval_shown_free(t);
    int rc;
    if (t->eval.run && t->step == 0 && t->step0 == 0 && !t->eval_done_at0) {
        t->eval_done_at0 = 1;
        if ((rc = trainer_eval_run(t, info, d)) < 0)
            return rc;
        if (rc)
            return trainer_stop_forgetting(t, info, d);
    }
    double t0 = trainer_now_s();
    t->phase = schedule_phase(&t->sched, t->step);
    if (t->qset && t->phase == SCHEDULE_PHASE_QAT && (rc = trainer_quant_operands(t, d)))
        return rc;
    if (t->qset && t->phase == SCHEDULE_PHASE_QAT && t->step == t->sched.bf16_warmup_steps) {
        if ((rc = trainer_event(t->run_dir, t->step, "phase", d, "phase", "qat", "msg", "QAT on",
                                NULL)))
            return rc;
        info->phase_changed = 1;
    }
    double loss_sum = 0.0;
    rc = trainer_micro_batches(t, &loss_sum, d);
    if (t->n_ranks > 1)   /* every rank's micro-batches went well, or all stop here */
        rc = dist_agree(rc, 0, NULL, d);
    if (rc == QS_ENAN) {
        char what[QS_DIAG_MSG_MAX];
        snprintf(what, sizeof what, "%s", d->msg);
        return trainer_stop_nan(t, what, d);
    }
    if (rc || (rc = trainer_dist_reduce(t, &loss_sum, d)))
        return rc;
    double loss = loss_sum / (double)(t->cfg.grad_accum * t->n_ranks);
    double norm = optim_grad_norm(t->grads, t->m.n_params);
    if (!isfinite(norm))
        return trainer_stop_nan(t, "gradient norm is NaN/Inf", d);
    /* clip and AdamW in one pass, which also zeroes the gradients for the next step */
    float clip = optim_grad_clip_factor(norm, t->cfg.grad_clip);
    double lr = schedule_lr(&t->sched, t->step);
    if ((rc = trainer_dist_update(t, clip, lr, d)))   /* the packs follow the weights */
        return rc;
    t->grads_zeroed = 1;

    if (t->sat) {
        int alarms = satstats_step_end(t->sat, t->step, t->phase, d);
        if (alarms < 0)
            return alarms;
        info->max_clip_rate = satstats_max_clip_rate(t->sat);
        info->n_warnings = satstats_warning_count(t->sat);
        for (int i = 0; i < info->n_warnings && i < 4; i++)
            info->warnings[i] = satstats_warning(t->sat, i);
        if ((rc = trainer_spike_events(t, d)))
            return rc;
    }
    double t1 = trainer_now_s();
    info->step = t->step;
    info->total_steps = t->cfg.steps;
    info->phase = t->phase;
    info->loss = loss;
    info->lr = lr;
    info->grad_norm = norm;
    info->tok_per_s = (double)t->cfg.batch_size * t->cfg.seq_len * t->cfg.grad_accum *
                      t->n_ranks / (t1 - t0);
    info->elapsed_s = t1 - t->t_start;
    if (t->metrics)   /* rank 0 */
        fprintf(t->metrics,
                "{\"type\":\"train\",\"step\":%ld,\"phase\":\"%s\",\"loss\":%.9g,\"lr\":%.9g,"
                "\"grad_norm\":%.9g,\"tok_per_s\":%.6g,\"max_clip_rate\":%.6g,\"elapsed_s\":%.6g}\n",
                t->step, schedule_phase_name(t->phase), loss, lr, norm, info->tok_per_s,
                info->max_clip_rate, info->elapsed_s);
    if (t->metrics && fflush(t->metrics) != 0)
        return diag_set(d, QS_EIO, t->run_dir, -1, "metrics.jsonl: write failed");
    t->step++;

    if (t->sat && t->cfg.stop_on_saturation && satstats_stop_requested(t->sat)) {
        trainer_event(t->run_dir, t->step - 1, "stop", NULL, "reason", "saturation", NULL);
        if ((rc = trainer_ckpt_write(t, d)))
            return rc;
        info->checkpointed = 1;
        return diag_set(d, QS_ESTOP, t->run_dir, -1,
                        "step %ld: saturation alarm with stop_on_saturation; checkpoint ckpt/step_%ld",
                        t->step - 1, t->step);
    }
    if (t->eval.run && t->eval.every_steps > 0 && t->step % t->eval.every_steps == 0) {
        if ((rc = trainer_eval_run(t, info, d)) < 0)
            return rc;
        if (rc)
            return trainer_stop_forgetting(t, info, d);
    }
    if (t->rank == 0 && t->cfg.plot_every > 0 &&
        (t->step % t->cfg.plot_every == 0 || t->step >= t->cfg.steps) &&
        (rc = trainer_plots_write(t, d)))
        return rc;
    if (t->cfg.ckpt_every && t->step % t->cfg.ckpt_every == 0 && t->step < t->cfg.steps) {
        if ((rc = trainer_ckpt_write(t, d)))
            return rc;
        info->checkpointed = 1;
    }
    return 0;
}

int trainer_done(const trainer *t) { return t->step >= t->cfg.steps; }
long trainer_next_step(const trainer *t) { return t->step; }
const runcfg *trainer_config(const trainer *t) { return &t->cfg; }
const char *trainer_run_dir(const trainer *t) { return t->run_dir; }
int trainer_quant_count(const trainer *t) { return t->qset ? quant_set_count(t->qset) : 0; }

const float *trainer_params(const trainer *t, size_t *n_params)
{
    *n_params = t->m.n_params;
    return t->m.params;
}

int trainer_finish(trainer *t, const char *reason, qs_diag *d)
{
    int rc = 0;
    if (t->last_ckpt_step != t->step)
        rc = trainer_ckpt_write(t, d);
    if (!rc)
        rc = trainer_event(t->run_dir, t->step, "stop", d, "reason", reason, NULL);
    if (!rc && t->sat) {
        rc = satstats_close(t->sat, d);
        t->sat = NULL;
    }
    if (!rc && t->rank == 0 && t->cfg.plot_every > 0 && t->step % t->cfg.plot_every &&
        t->step < t->cfg.steps)
        rc = trainer_plots_write(t, d);   /* stopped early: the last state in pictures */
    trainer_destroy(t);
    return rc;
}
