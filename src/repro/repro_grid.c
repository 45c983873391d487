/* repro_grid.c: the study's sizes (full and quick) and its grid: the paper's
 * eight runs plus the two spike variants, and the run configs built from them.
 *
 * The paper (OpenPangu-Embedded-1B, FineWeb, 10,000 steps of 1024 x 1024
 * tokens) vs here (see repro_scale_preset for the numbers): a 12-block Llama
 * with the bundled 512-piece tokenizer, pretrained here on a generated fact
 * world; continued pretraining on generated general text; the published
 * selection (MLP gate/up/down of every block but the first 3 and the last 2),
 * W8A8, saturating, margin 0, amax history 1024.
 */
#include <stdio.h>
#include <string.h>

#include "repro_impl.h"

void repro_scale_preset(int quick, repro_scale *s)
{
    memset(s, 0, sizeof *s);
    if (!quick) {
        s->name = "full";
        s->world = (repro_world_opts){0, 150, 6, 6, 300, 5000};
        s->model = (repro_model_spec){12, 64, 176, 4, 2, 256};
        s->batch = 16;
        s->seq = 128;
        s->pre_steps = 2500;
        s->pre_lr_warmup = 100;
        s->pre_eval_every = 250;
        s->pre_lr = 3e-3;
        s->steps = 400;
        s->eval_every = 25;
        s->lr_high = 1e-3;
    } else {
        /* the full model on a smaller world: the base reaches the probe target
         * in ~600 steps, and the full lrs give the full study's contrasts in
         * 100 steps (a dim-32 model never learned the facts: 44% after 1000) */
        s->name = "quick";
        s->world = (repro_world_opts){0, 24, 6, 6, 40, 1000};
        s->model = (repro_model_spec){12, 64, 176, 4, 2, 256};
        s->batch = 8;
        s->seq = 128;
        s->pre_steps = 1000;
        s->pre_lr_warmup = 50;
        s->pre_eval_every = 200;
        s->pre_lr = 3e-3;
        s->steps = 100;
        s->eval_every = 10;
        s->lr_high = 1e-3;
    }
    s->probe_target = 0.80;
    s->pre_weight_decay = 0.1;
    s->lr_low = s->lr_high / 10;
    s->warmup_frac = 0.05;
    s->spike_rate = 0.05;
    s->spike_scale = 64;
}

static const repro_run_spec grid_runs[] = {
    {REPRO_RUN_MR_HIGH, "(1) most-recent, high lr, no warmup", 1, "most-recent", 1, 0, 0, 0},
    {REPRO_RUN_ES_HIGH, "(2) exp-smoothing, high lr, no warmup", 2, "exp-smoothing:0.9", 1, 0, 0, 0},
    {REPRO_RUN_CUR_HIGH, "(3) current scaling, high lr, no warmup", 3, "current", 1, 0, 0, 0},
    {REPRO_RUN_MW_HIGH, "(4) max-window:64, high lr, no warmup", 4, "max-window:64", 1, 0, 0, 0},
    {REPRO_RUN_BF16_HIGH, "(5) BF16 baseline, high lr", 5, NULL, 1, 0, 0, 0},
    {REPRO_RUN_BF16_LOW, "(6) BF16 baseline, low lr", 6, NULL, 0, 0, 0, 0},
    {REPRO_RUN_MR_LOW, "(7) most-recent, low lr, BF16 warmup", 7, "most-recent", 0, 1, 0, 0},
    {REPRO_RUN_MW_LOW, "(8) max-window:64, low lr, BF16 warmup (the recipe)", 8, "max-window:64", 0, 1, 0, 0},
    {REPRO_RUN_MR_SPIKE, "(7s) as (7), with injected spikes", 0, "most-recent", 0, 1, 1, 0},
    {REPRO_RUN_MW_SPIKE, "(8s) as (8), with injected spikes", 0, "max-window:64", 0, 1, 1, 0},
};

int repro_grid_count(void) { return (int)(sizeof grid_runs / sizeof *grid_runs); }

const repro_run_spec *repro_grid_spec(int i)
{
    return i >= 0 && i < repro_grid_count() ? &grid_runs[i] : NULL;
}

/* Settings every run shares: the base model, B x T, the in-loop probe + val loss. */
static void grid_common(runcfg *c, const repro_scale *s, uint64_t seed, const repro_paths *p)
{
    runcfg_defaults(c);
    snprintf(c->eval_tasks, sizeof c->eval_tasks, "%s", REPRO_PROBE_TASK);
    snprintf(c->eval_data_dir, sizeof c->eval_data_dir, "%s", p->world);
    snprintf(c->eval_tasks_dir, sizeof c->eval_tasks_dir, "%s", p->tasks);
    c->seed = (long)(seed & 0x7fffffff);
    c->batch_size = s->batch;
    c->seq_len = s->seq;
    c->eval_subset = 0;          /* every probe item, every time */
    c->eval_val_batches = 4;
    c->ckpt_every = 0;           /* the final checkpoint only */
    c->bf16_warmup_steps = 0;
}

void repro_pretrain_config(const repro_scale *s, uint64_t seed, const repro_paths *p, runcfg *c)
{
    grid_common(c, s, seed, p);
    snprintf(c->model, sizeof c->model, "%s", p->init);
    snprintf(c->train_data, sizeof c->train_data, "%s", p->pre_shards);
    snprintf(c->out_dir, sizeof c->out_dir, "%s", p->pretrain);
    c->qat = 0;
    c->steps = s->pre_steps;
    c->lr = s->pre_lr;
    c->lr_min = s->pre_lr / 10;
    c->lr_warmup_steps = s->pre_lr_warmup;
    snprintf(c->lr_decay, sizeof c->lr_decay, "cosine");
    c->eval_every = s->pre_eval_every;
    c->weight_decay = s->pre_weight_decay;
}

void repro_run_config(const repro_scale *s, const repro_run_spec *r, uint64_t seed,
                      const repro_paths *p, runcfg *c)
{
    grid_common(c, s, seed, p);
    snprintf(c->model, sizeof c->model, "%s", p->base_model);
    snprintf(c->train_data, sizeof c->train_data, "%s", p->cpt_shards);
    snprintf(c->out_dir, sizeof c->out_dir, "%s/%.48s", p->runs, r->name);
    c->steps = s->steps;
    c->lr = r->lr > 0 ? r->lr : r->high_lr ? s->lr_high : s->lr_low;
    c->lr_min = 0;
    c->lr_warmup_steps = 0;
    snprintf(c->lr_decay, sizeof c->lr_decay, "constant");
    c->eval_every = s->eval_every;
    c->qat = r->estimator != NULL;
    if (r->estimator)
        snprintf(c->amax_estimator, sizeof c->amax_estimator, "%s", r->estimator);
    c->bf16_warmup_steps = r->warmup ? (long)(s->warmup_frac * (double)s->steps + 0.5) : 0;
    if (r->spikes) {
        c->spike_rate = s->spike_rate;
        c->spike_scale = s->spike_scale;
    }
}
