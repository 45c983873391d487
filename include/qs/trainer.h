/* trainer.h: the continued-pretraining loop (fp32 master weights, AdamW,
 * BF16 warmup then HiF8 W8A8 QAT, checkpoints, bit-exact resume).
 *
 * One optimizer step = grad_accum micro-batches of B x T tokens:
 *   for each micro-batch: batch -> model_forward (planned linears observe amax
 *   during the bf16 warmup, are fake-quantized after it) -> NaN check ->
 *   model_backward (STE) onto zeros, scaled 1 / grad_accum, added to the step's
 *   gradient in micro-batch order (the first micro-batch in the grads block,
 *   later ones via a scratch block: grad_scratch_bytes)
 *   -> global grad norm (NaN/Inf check) -> clip -> AdamW at schedule_lr(step)
 *   -> detector step end (quant.jsonl.zst, saturation alarms) -> metrics.jsonl.
 * Steps are numbered from 0; a checkpoint ckpt/step_N holds the state before
 * step N (N steps done), and --resume continues with step N.
 *
 * Run directory (see the README): config.json (run config snapshot),
 * metrics.jsonl, events.jsonl, quant.jsonl.zst, ckpt/step_<N>/ (HF layout:
 * config.json, model.safetensors (F32), tokenizer files, + train_state.bin).
 * The library never prints: trainer_step() fills a train_step_info that the
 * CLI turns into a progress line.
 * Under mpirun (dist.h) every rank creates a trainer and calls the same
 * functions in the same order: the step is split over the ranks, only rank 0
 * writes the run directory (src/train/trainer_dist.c).
 */
#ifndef QS_TRAINER_H
#define QS_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/runcfg.h"

/* The data seam: where batches come from (the token-shard loader in the CLI,
 * an in-memory source in tests).  next() fills tokens[B*T] and targets[B*T]
 * (targets = tokens shifted by one).  save() returns the position as bytes
 * (qs_malloc'd, caller frees) and restore() seeks back to it, so a resumed run
 * sees exactly the batches it would have seen. */
typedef struct train_data {
    void *self;
    int (*next)(void *self, int32_t *tokens, int32_t *targets, int B, int T, qs_diag *d);
    int (*save)(void *self, void **bytes_out, size_t *n_bytes, qs_diag *d);
    int (*restore)(void *self, const void *bytes, size_t n_bytes, qs_diag *d);
} train_data;

/* The token-shard source: cfg->train_data (a `qatscope tokenize --input` dir),
 * split "train", B x T windows in the order seeded by cfg->seed; shards made
 * with another tokenizer than cfg->model's are refused.  Free with
 * trainer_data_close. */
int trainer_data_open_shards(train_data *out, const runcfg *cfg, qs_diag *d);
void trainer_data_close(train_data *data);

/* The in-loop evaluation seam (issue 7): called before step 0 (the baseline)
 * and after every every_steps steps with the model AS TRAINED: when the last
 * step ran in QAT (quantized = 1), m's hook fake-quantizes the planned linears
 * at the quantizers' current scales in frozen mode (quant_apply: nothing enters
 * the amax histories or the detector log); otherwise (bf16 warmup, qat off)
 * the hook is switched off (quantized = 0) and the master weights are scored.  run() may fill
 * metrics_line with one {"type":"eval","step":N,...} JSON object (appended to
 * metrics.jsonl) and event_line with one events.jsonl object (e.g. a
 * forgetting alarm); both start empty.  Return 1 to stop the run ("stop" event
 * with reason "forgetting", exit status of a failed verdict), 0 to go on, or a
 * negative QS_E* code. */
struct llama_model;
typedef struct train_eval_hook {
    void *self;
    long every_steps;            /* 0: never */
    int (*run)(void *self, struct llama_model *m, long step, int quantized, char *metrics_line,
               size_t metrics_bytes, char *event_line, size_t event_bytes, qs_diag *d);
    /* optional: the hook's state across a resume (train_state.bin "eval", e.g. the
     * forgetting baselines).  save hands out qs_malloc'd bytes; restore gets them
     * back (not aligned) from a checkpoint before any run() call. */
    int (*save)(void *self, void **bytes, size_t *n, qs_diag *d);
    int (*restore)(void *self, const void *bytes, size_t n, qs_diag *d);
    /* optional: called once by trainer_create on the rank that evaluates (0),
     * once the run directory is ready and before any run(): resume = 0 for a
     * fresh run (the hook may record what a resume must find again), 1 when
     * continuing one (it checks that record). */
    int (*begin)(void *self, const char *run_dir, int resume, qs_diag *d);
    /* bytes the hook's scoring grows to beyond what trainer_memory_estimate
     * counts (the built-in hook: the scorer's arena for its longest request,
     * model_lm_acts_elems); trainer_memory_add_eval adds them */
    size_t arena_bytes;
} train_eval_hook;

/* The built-in hook: the evaluator (cfg eval_tasks on eval_data_dir, a fixed
 * seeded subset of eval_subset documents per task) + held-out loss on the
 * first eval_val_batches batches of train_data's "val" split (val_loss,
 * val_ppl) + the forgetting alarm (eval lines in metrics.jsonl with per-item
 * correctness and "quantized", alarm events, stop_on_forgetting) + with
 * runcfg_kl_reference(): KL(reference || model) and top-1 agreement on the same
 * val batches (val_kl_ref, val_top1_ref), the reference being the run's step-0
 * weights (cfg->model) in bf16, checked on resume against the sha256 recorded
 * in RUN_DIR/kl_reference.json at the start.
 * src/train/trainer_eval.c. */
int trainer_eval_create(train_eval_hook *out, const runcfg *cfg, qs_diag *d);
void trainer_eval_destroy(train_eval_hook *h);   /* safe on a zeroed hook */

typedef struct trainer_options {
    const char *resume_dir;      /* NULL: fresh run in cfg->out_dir */
    size_t mem_limit_bytes;      /* refuse above this (0: no check) */
    const train_eval_hook *eval; /* NULL: no in-loop evaluation */
} trainer_options;

/* What one step did (for the progress line). */
typedef struct train_step_info {
    long step;                 /* index of the step just taken */
    long total_steps;
    int phase;                 /* SCHEDULE_PHASE_* */
    int phase_changed;         /* 1 on the first QAT step */
    double loss, lr, grad_norm;
    double tok_per_s;          /* this step */
    double elapsed_s;          /* since the run (or the resume) started */
    double max_clip_rate;      /* over quantized tensors this step */
    int n_warnings;            /* saturation warnings raised this step */
    const char *warnings[4];   /* first lines, valid until the next step */
    int checkpointed;          /* 1 if a checkpoint was written after this step */
    /* the in-loop evaluations this call ran (rank 0): the step-0 baseline
     * before the step, then the one after it; filled even when the call
     * fails (e.g. the evaluation asked to stop); valid until the next call */
    int n_evals;
    struct {
        long step;             /* the record's "step": steps taken before it */
        double seconds;        /* wall time of the evaluation */
        const char *metrics;   /* its metrics.jsonl object ({"type":"eval",...}) */
        const char *events;    /* its events.jsonl objects, one per line ("" = none) */
    } evals[2];
} train_step_info;

/* Memory a run needs, computed from the config before anything is allocated. */
typedef struct train_memory {
    size_t model_train_bytes;  /* model_memory_estimate().train_bytes */
    size_t grad_acts_bytes;    /* backward scratch */
    size_t quant_bytes;        /* saved quantized operands + amax histories (QAT steps) */
    size_t warmup_pack_bytes;  /* packs of the quantized Linears' master weights, built in
                                * the bf16 warmup and released before QAT (0 without one) */
    size_t batch_bytes;        /* token/target buffers */
    size_t pack_bytes;         /* other persistent weight packs + matmul workspace */
    size_t grad_scratch_bytes; /* grad_accum > 1: later micro-batches' gradients (n_params x 4) */
    size_t kl_ref_bytes;       /* runcfg_kl_reference: the bf16 reference model and its arena */
    size_t eval_val_bytes;     /* in-loop val_loss (eval_every, eval_val_batches > 0): the val
                                * batch and the inference arena of the model as trained */
    size_t eval_task_bytes;    /* the in-loop tasks' scoring arena (trainer_memory_add_eval) */
    size_t total_bytes;        /* the peak: the sum, with max(quant, warmup_pack) */
} train_memory;

typedef struct trainer trainer;

/* Loads the model (or the latest checkpoint of resume_dir), checks memory,
 * prepares the run dir.  On resume the run config is the snapshot in
 * resume_dir/config.json with cfg's fields ignored except `steps`. */
int trainer_create(trainer **out, const runcfg *cfg, train_data *data,
                   const trainer_options *opt, qs_diag *d);
void trainer_destroy(trainer *t);   /* no checkpoint, closes logs; NULL ok */
/* Can run_dir be resumed with cfg (its snapshot + overrides)?  Finds the latest
 * checkpoint (*steps_done = its N; QS_ENOTFOUND without one) and refuses
 * (QS_EINVAL) a cfg->steps that is not above it.  trainer_create runs it too;
 * callers run it first to report this before checks of their own. */
int trainer_resume_check(const runcfg *cfg, const char *run_dir, long *steps_done, qs_diag *d);
/* Refuses (QS_EINVAL, one line naming run_dir and the input) a run directory
 * that is the model directory or train_data directory, or holds one of them
 * below it: compared by device and inode of the directories on the way up from
 * the input's real path, so any spelling and symbolic links count.  Inputs or a
 * run_dir that do not exist pass (later stages report them).  trainer_create runs
 * it too; callers run it first to refuse before any work. */
int trainer_run_dir_check(const runcfg *cfg, const char *run_dir, qs_diag *d);

/* One optimizer step (preceded by the baseline evaluation on the first call of
 * a fresh run, followed by an evaluation every eval->every_steps steps).
 * Returns 0, QS_ENAN (the run stopped: "nan" event, no checkpoint written),
 * QS_ESTOP (saturation alarm with stop_on_saturation, or the eval hook asked
 * to stop: "stop" event, checkpoint written) or another error. */
int trainer_step(trainer *t, train_step_info *info, qs_diag *d);
/* 1 when every step of the run is done. */
int trainer_done(const trainer *t);
long trainer_next_step(const trainer *t);
/* Final checkpoint + "stop"/"done" event + close logs; the trainer is destroyed. */
int trainer_finish(trainer *t, const char *reason, qs_diag *d);

const runcfg *trainer_config(const trainer *t);
const float *trainer_params(const trainer *t, size_t *n_params);
const char *trainer_run_dir(const trainer *t);
int trainer_quant_count(const trainer *t);   /* quantized tensors (2 per planned linear) */

/* Estimate for (model config dir, run config): fills m; 0 or a load error. */
int trainer_memory_estimate(const runcfg *cfg, train_memory *m, qs_diag *d);
/* The in-loop evaluation's scoring arena (h->arena_bytes; h may be NULL) into
 * m->eval_task_bytes and m->total_bytes, once per estimate. */
void trainer_memory_add_eval(train_memory *m, const train_eval_hook *h);

#endif
