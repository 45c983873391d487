/* trainer_impl.h: the trainer's state, shared by trainer.c (loop),
 * trainer_quant.c (QAT hooks) and trainer_ckpt.c (checkpoints).  Not API. */
#ifndef QS_TRAINER_IMPL_H
#define QS_TRAINER_IMPL_H

#include <stdio.h>

#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_train.h"
#include "qs/optim.h"
#include "qs/qplan.h"
#include "qs/quant.h"
#include "qs/runcfg.h"
#include "qs/satstats.h"
#include "qs/schedule.h"
#include "qs/spike.h"
#include "qs/trainer.h"
#include "qs/trainer_test.h"
#include "qs/trainstate.h"

#define TRAINER_PATH_MAX 1024

/* Bytes of one inference arena of the in-loop evaluation (trainer_eval.c: the
 * val batches', and the KL reference's) for B x T in `precision`. */
size_t trainer_eval_arena_bytes(const llama_config *c, int B, int T, int precision);

/* One quantized Linear: its two quantizers and the operands its forward used.
 * With recompute, xq and wq are the buffers of the slot's module kind, shared
 * by that module in every block (trainer.mod_xq/mod_wq; mod_owner says which
 * slot's operands they hold) and refilled by replaying the quantizers at the
 * forward's scales; there is no wpack. */
typedef struct trainer_qslot {
    int q_input, q_weight;    /* indices in the quantizer set */
    float *xq;                /* [N * IN] quantized input of the last forward */
    float *wq;                /* [O * IN] quantized weight of step w_step */
    long w_step;              /* step whose weight wq holds (-1: none yet) */
    struct matmul_wpack *wpack; /* persistent pack of wq (model precision), the backward's */
    const float *x;           /* unquantized input (arena), for the masked STE */
    const float *w;           /* master weight */
    float x_scale, w_scale;   /* scales of the last forward's quantize calls (replay) */
    int quantized;            /* 1: the last forward used xq/wq */
    long spike_step;          /* step of the last injected spike (-1: none) */
    int spike_row;            /* its token row */
    float spike_amax;         /* max |x| of the spiked row (max over micro-batches) */
} trainer_qslot;

struct trainer {
    runcfg cfg;
    char run_dir[TRAINER_PATH_MAX];
    char model_dir[TRAINER_PATH_MAX + 128];   /* where the weights came from (config/tokenizer copied from it) */
    llama_model m;
    llama_acts a;
    llama_grad_acts g;
    llama_weights gw;                   /* views over grads */
    float *grads;                       /* [n_params] */
    int grads_zeroed;                   /* 1: grads are all 0 (fresh, or AdamW consumed them) */
    adamw_state opt;
    adamw_hparams hp;
    schedule sched;
    train_data *data;
    int32_t *tokens, *targets;          /* [B*T] */
    long step;                          /* next step index */
    long last_ckpt_step;                /* -1: none */
    FILE *metrics;
    double t_start;
    long step0;                         /* step index when this process started */
    train_eval_hook eval;               /* run == NULL: none */
    int eval_done_at0;                  /* the step-0 baseline ran */
    char *eval_shown[2];                /* this step's evaluations for train_step_info: the
                                           metrics object, NUL, the events (qs_malloc'd) */
    /* quantization */
    qplan plan;
    quant_set *qset;
    satstats *sat;
    trainer_qslot *slots;               /* [n_slots] */
    int n_slots;
    int *slot_of;                       /* [n_layers * MODEL_LIN_COUNT], -1 = not planned */
    float *mod_xq[MODEL_LIN_COUNT];     /* recompute: one xq/wq buffer per module kind */
    float *mod_wq[MODEL_LIN_COUNT];
    int mod_owner[MODEL_LIN_COUNT];     /* slot whose operands mod_xq/mod_wq hold, -1: none */
    int sub_slot;                       /* slot whose xq/wq the hook's last call substituted
                                           (model_linear_hook.where), -1: none */
    int ste;                            /* QUANT_STE_* */
    int phase;                          /* SCHEDULE_PHASE_* of the current step */
    int frozen;                         /* 1: in-loop eval, fake-quant without recording */
    spike_plan spike;                   /* spike injector (rate 0: off) */
    float *spike_x;                     /* [max N * IN] the spiked copy of an input */
    int *alarm_restored;                /* [n_alarm_restored] saturation episodes from the
                                           checkpoint, for the detector trainer_open_logs makes */
    int n_alarm_restored;
    /* ranks (trainer_dist.c) */
    int rank, n_ranks;                  /* dist_rank() / dist_size() at create */
    float *grad_scratch;                /* [n_params] a micro-batch after the rank's first */
    llama_weights gsw;                  /* views over grad_scratch */
    size_t *shard_lo;                   /* [n_ranks + 1] ZeRO-1 parts of the parameter block; NULL: off */
    size_t *shard_bytes;                /* [n_ranks] their moment bytes (inside shard_lo's block) */
};

/* trainer_dist.c */
int trainer_dist_init(struct trainer *t, qs_diag *d);   /* rank, shards, scratch; no collective */
void trainer_dist_free(struct trainer *t);
size_t trainer_dist_opt_elems(const struct trainer *t);  /* Adam moments this rank keeps */
size_t trainer_dist_opt_first(const struct trainer *t);  /* their first parameter index */
int trainer_data_skip(struct trainer *t, long n_batches, qs_diag *d);
/* Sum gradients, the loss sum and the quantizer records over the ranks (no-op on one). */
int trainer_dist_reduce(struct trainer *t, double *loss_sum, qs_diag *d);
/* AdamW (clip factor, lr) on this rank's part, zero the gradients, all-gather
 * (ZeRO-1); the weight packs follow (on one rank re-made weight by weight
 * right after each update, from cache; else marked stale). */
int trainer_dist_update(struct trainer *t, float clip, double lr, qs_diag *d);
/* One fp32 [n_params] moment section of train_state.bin: rank 0 writes it to w
 * (NULL: takes and drops the other ranks' parts, after a failure), the other
 * ranks send their part; every rank must call it in the same order. */
int trainer_dist_moment_write(struct trainer *t, trainstate_writer *w, const char *tag,
                              const float *mine, qs_diag *d);

/* trainer_quant.c */
int trainer_quant_init(struct trainer *t, qs_diag *d);
/* Before the first QAT step: the quantized operands' buffers are allocated and
 * the weight packs the bf16 warmup built of the quantized Linears' master
 * weights are released (QAT never reads them); nothing on later calls. */
int trainer_quant_operands(struct trainer *t, qs_diag *d);
/* The quantizer recipe of cfg (amax_estimator, amax_history, amax_margin), checked as a
 * quantizer checks it; errors name the config keys.  Run by trainer_memory_estimate, so
 * a bad recipe is refused before anything is loaded, whether or not qat is on. */
int trainer_recipe_from_cfg(const runcfg *cfg, quant_recipe *r, qs_diag *d);
void trainer_quant_free(struct trainer *t);
/* Bytes of the quantized operands (+ amax histories) of cfg's plan, and in
 * *master_pack_bytes those of the packs of the planned Linears' master weights
 * (built during a bf16 warmup, released before QAT). */
size_t trainer_quant_bytes(const llama_config *c, const runcfg *cfg, int precision, int *n_slots,
                           size_t *master_pack_bytes, qs_diag *d);
extern const model_linear_bwd_hook trainer_bwd_hook_proto;
/* events.jsonl records of the spikes injected in step t->step (after the detector's step end). */
int trainer_spike_events(struct trainer *t, qs_diag *d);

/* trainer_ckpt.c */
int trainer_ckpt_write(struct trainer *t, qs_diag *d);
/* Finds the latest ckpt/step_N of run_dir: 1 and the path, 0 if none. */
int trainer_ckpt_latest(const char *run_dir, char *path, size_t path_bytes, long *step);
int trainer_ckpt_restore(struct trainer *t, const char *ckpt_dir, qs_diag *d);
/* trainer_state_read, trainer_log_truncate: qs/trainer_test.h */
/* 0 when every complete line of the log at path (missing: fine) is a JSON object
 * with an integer "step", else QS_EFORMAT naming the line; trainer_log_cut is
 * trainer_log_truncate without that check, for logs already checked
 * (trainer_ckpt.c) */
int trainer_log_check(const char *path, qs_diag *d);
int trainer_log_cut(const char *path, long step, qs_diag *d);
/* trainer_resume.c: on resume, after the state is read and before any file of the
 * run changes: every log reads as one (trainer_log_check, whole zstd frames, the
 * quantizer log's header) and holds each record of the steps before the checkpoint
 * that its cadence defines (train lines, eval lines every eval_every, the phase
 * event, quantizer records every log_every); else one line naming the file. */
int trainer_resume_logs_check(const struct trainer *t, qs_diag *d);
/* The run config a checkpoint was made with: TRAINER_CKPT_CONFIG in its
 * directory (written by trainer_ckpt_write); on resume the keys that must not
 * change (all but steps, ckpt_every, stop_on_*, max_memory_gb, plot_every, zero,
 * recompute, grad_accum and the paths) are compared with cfg: QS_EINVAL naming
 * the key, the checkpoint's value and cfg's.  A checkpoint without the file
 * (written before it existed) passes. */
#define TRAINER_CKPT_CONFIG "run_config.json"
int trainer_ckpt_config_write(const struct trainer *t, const char *dir, qs_diag *d);
int trainer_resume_config_check(const runcfg *cfg, const char *cfg_path, const char *ck_dir,
                                qs_diag *d);
/* Append one ready-made line (no '\n') to RUN_DIR/events.jsonl. */
int trainer_event_append(const char *run_dir, const char *line, qs_diag *d);
/* The trainer's own events: {"step":S,"type":"TYPE","KEY":"VALUE",...} with the
 * NULL-terminated KEY, VALUE string pairs in order (values JSON-quoted). */
int trainer_event(const char *run_dir, long step, const char *type, qs_diag *d, ...)
    __attribute__((sentinel));

/* trainer_plots.c: heatmap.png + curves.png of the run dir (atomic). */
int trainer_plots_write(struct trainer *t, qs_diag *d);

#endif
