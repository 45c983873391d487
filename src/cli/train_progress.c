/* train_progress.c: see train_progress.h. */
#include "train_progress.h"

#include <string.h>

#include <jansson.h>

#include "qs/mem.h"
#include "qs/schedule.h"

#define TRAIN_PROGRESS_MAX_WARNINGS 8

void train_progress_init(train_progress *p, FILE *f, int tty, const runcfg *cfg)
{
    p->f = f;
    p->tty = tty;
    p->every = cfg->steps >= 50 ? cfg->steps / 50 : 1;
    p->line_open = 0;
    p->last_loss = 0;
    p->n_warnings = 0;
    p->first_step = -1;
    p->first_elapsed = 0;
}

void train_progress_start(train_progress *p, const trainer *t, const train_memory *mem)
{
    if (!p->f)
        return;
    const runcfg *c = trainer_config(t);
    fprintf(p->f,
            "train: %s -> %s | steps %ld..%ld | B=%ld T=%ld accum=%ld | %s | %d quantized tensors "
            "(QAT from step %ld) | memory estimate %.1f MiB\n",
            c->model, trainer_run_dir(t), trainer_next_step(t), c->steps - 1, c->batch_size,
            c->seq_len, c->grad_accum, c->precision, trainer_quant_count(t),
            c->qat ? c->bf16_warmup_steps : -1L, mem->total_bytes / 1048576.0);
    fflush(p->f);
}

static void train_progress_eta(char *buf, size_t n, double s)
{
    long x = (long)(s + 0.5);
    if (x >= 3600)
        snprintf(buf, n, "%ldh%02ldm", x / 3600, x / 60 % 60);
    else
        snprintf(buf, n, "%ldm%02lds", x / 60, x % 60);
}

/* One in-loop evaluation as a line: "eval @ step 4 (HiF8 as trained, 46.2 s):
 * val_loss 10.4043 ppl 3.300e+04 | vs step 0 (bf16): KL 0.388 top-1 0.0% |
 * arc_easy acc 0.300 acc_norm 0.300 n 20", from its metrics.jsonl object. */
static void train_progress_eval_line(FILE *f, const char *metrics, double seconds)
{
    json_t *o = json_loads(metrics, 0, NULL);
    if (!json_is_object(o)) {   /* not ours to judge here: the file has it */
        json_decref(o);
        return;
    }
    json_t *vl = json_object_get(o, "val_loss"), *kl = json_object_get(o, "val_kl_ref");
    json_t *top1 = json_object_get(o, "val_top1_ref"), *tasks = json_object_get(o, "tasks");
    fprintf(f, "eval @ step %lld (%s, %.1f s):",
            (long long)json_integer_value(json_object_get(o, "step")),
            json_is_true(json_object_get(o, "quantized")) ? "HiF8 as trained" : "unquantized",
            seconds);
    const char *sep = "";
    if (json_is_number(vl)) {
        fprintf(f, " val_loss %.4f ppl %#.4g", json_number_value(vl),
                json_number_value(json_object_get(o, "val_ppl")));
        sep = " |";
    }
    if (json_is_number(kl) && json_is_number(top1)) {
        fprintf(f, "%s vs step 0 (bf16): KL %.3g top-1 %.1f%%", sep, json_number_value(kl),
                100.0 * json_number_value(top1));
        sep = " |";
    }
    const char *name;
    json_t *t;
    json_object_foreach(tasks, name, t) {
        fprintf(f, "%s %s acc %.3f acc_norm %.3f n %lld", sep, name,
                json_number_value(json_object_get(t, "acc")),
                json_number_value(json_object_get(t, "acc_norm")),
                (long long)json_integer_value(json_object_get(t, "n")));
        sep = " |";
    }
    fputc('\n', f);
    json_decref(o);
}

/* An evaluation's events.jsonl objects (one per line): a forgetting alarm in
 * words, anything else as written. */
static void train_progress_eval_events(FILE *f, const char *events)
{
    for (const char *e = events; *e;) {
        const char *end = strchr(e, '\n');
        size_t n = end ? (size_t)(end - e) : strlen(e);
        json_t *o = json_loadb(e, n, 0, NULL);
        const char *type = json_string_value(json_object_get(o, "type"));
        const char *task = json_string_value(json_object_get(o, "task"));
        if (type && !strcmp(type, "forgetting") && task)
            fprintf(f, "step %lld: forgetting alarm: %s acc %.3f -> %.3f since step 0 "
                    "(-%.1f points, McNemar p %.3g, n %lld; events.jsonl)\n",
                    (long long)json_integer_value(json_object_get(o, "step")), task,
                    json_number_value(json_object_get(o, "baseline")),
                    json_number_value(json_object_get(o, "acc")),
                    json_number_value(json_object_get(o, "drop_points")),
                    json_number_value(json_object_get(o, "p_value")),
                    (long long)json_integer_value(json_object_get(o, "n")));
        else
            fprintf(f, "event: %.*s\n", (int)n, e);
        json_decref(o);
        e += n + (end != NULL);
    }
}

/* The evaluations that ran before the step (after = 0: the step-0 baseline)
 * or after it (after = 1), each on its own line. */
static void train_progress_evals(train_progress *p, const train_step_info *s, int after)
{
    for (int i = 0; i < s->n_evals; i++) {
        if ((s->evals[i].step > s->step) != after)
            continue;
        if (p->line_open) {
            fputc('\n', p->f);
            p->line_open = 0;
        }
        train_progress_eval_line(p->f, s->evals[i].metrics, s->evals[i].seconds);
        train_progress_eval_events(p->f, s->evals[i].events);
    }
}

void train_progress_step(train_progress *p, const train_step_info *s)
{
    if (!p->f)
        return;
    train_progress_evals(p, s, 0);
    if (s->total_steps <= 0) {   /* the call failed before its step was taken */
        fflush(p->f);
        return;
    }
    long done = s->step + 1;
    char eta[32] = "-";
    /* seconds per step since the first step of this process: the first one also
     * carries the start (model loads, the baseline evaluation), a resume starts
     * past step 0; no estimate until a second step is seen */
    if (p->first_step < 0) {
        p->first_step = s->step;
        p->first_elapsed = s->elapsed_s;
    } else if (s->step > p->first_step) {
        double rate = (s->elapsed_s - p->first_elapsed) / (double)(s->step - p->first_step);
        train_progress_eta(eta, sizeof eta, (rate > 0 ? rate : 0) * (double)(s->total_steps - done));
    }
    char line[256];
    /* step S/LAST: the index of the step just taken, as in the header ("steps 0..LAST"),
     * metrics.jsonl, events.jsonl and the warnings */
    snprintf(line, sizeof line,
             "step %ld/%ld %-6s loss %.4f lr %.2e gnorm %.3f %7.0f tok/s ETA %s max clip %.1e",
             s->step, s->total_steps - 1, schedule_phase_name(s->phase), s->loss, s->lr,
             s->grad_norm, s->tok_per_s, eta, s->max_clip_rate);
    int notable = s->phase_changed || s->n_warnings;
    if (p->line_open && notable) {
        fputc('\n', p->f);
        p->line_open = 0;
    }
    if (s->phase_changed)
        fprintf(p->f, "step %ld: bf16 warmup done, HiF8 QAT on\n", s->step);
    for (int i = 0; i < s->n_warnings && i < 4; i++, p->n_warnings++) {
        if (p->n_warnings < TRAIN_PROGRESS_MAX_WARNINGS)
            fprintf(p->f, "%s\n", s->warnings[i]);
        else if (p->n_warnings == TRAIN_PROGRESS_MAX_WARNINGS)
            fprintf(p->f, "(further saturation warnings: events.jsonl; summary: qatscope satstat)\n");
    }
    if (p->tty) {
        fprintf(p->f, "\r%s\033[K", line);
        p->line_open = 1;
    } else if (done % p->every == 0 || done == s->total_steps || s->step == 0 || s->n_evals) {
        fprintf(p->f, "%s\n", line);
    }
    train_progress_evals(p, s, 1);
    fflush(p->f);
}

void train_progress_end_line(train_progress *p)
{
    if (p->f && p->line_open) {
        fputc('\n', p->f);
        p->line_open = 0;
    }
}

void train_progress_finish(train_progress *p, const char *run_dir, long step,
                           const train_memory *mem)
{
    if (!p->f)
        return;
    fprintf(p->f, "train: stopped after %ld steps; checkpoint %s/ckpt/step_%ld\n", step, run_dir,
            step);
    fprintf(p->f, "train: peak memory %.1f MiB (estimate %.1f MiB)\n",
            qs_mem_peak_bytes() / 1048576.0, mem->total_bytes / 1048576.0);
    fflush(p->f);
}
