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

#define TRAINER_PATH_MAX 1024

/* One quantized Linear: its two quantizers and the operands its forward used. */
typedef struct trainer_qslot {
    int q_input, q_weight;    /* indices in the quantizer set */
    float *xq;                /* [N * IN] quantized input of the last forward */
    float *wq;                /* [O * IN] quantized weight of step w_step */
    long w_step;              /* step whose weight wq holds (-1: none yet) */
    struct matmul_wpack *wpack; /* persistent pack of wq (model precision), the backward's */
    const float *x;           /* unquantized input (arena), for the masked STE */
    const float *w;           /* master weight */
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
    /* quantization */
    qplan plan;
    quant_set *qset;
    satstats *sat;
    trainer_qslot *slots;               /* [n_slots] */
    int n_slots;
    int *slot_of;                       /* [n_layers * MODEL_LIN_COUNT], -1 = not planned */
    int ste;                            /* QUANT_STE_* */
    int phase;                          /* SCHEDULE_PHASE_* of the current step */
    int frozen;                         /* 1: in-loop eval, fake-quant without recording */
    spike_plan spike;                   /* spike injector (rate 0: off) */
    float *spike_x;                     /* [max N * IN] the spiked copy of an input */
};

/* trainer_quant.c */
int trainer_quant_init(struct trainer *t, qs_diag *d);
void trainer_quant_free(struct trainer *t);
size_t trainer_quant_bytes(const llama_config *c, const runcfg *cfg, int *n_slots, qs_diag *d);
extern const model_linear_bwd_hook trainer_bwd_hook_proto;
/* events.jsonl records of the spikes injected in step t->step (after the detector's step end). */
int trainer_spike_events(struct trainer *t, qs_diag *d);

/* trainer_ckpt.c */
int trainer_ckpt_write(struct trainer *t, qs_diag *d);
/* Finds the latest ckpt/step_N of run_dir: 1 and the path, 0 if none. */
int trainer_ckpt_latest(const char *run_dir, char *path, size_t path_bytes, long *step);
int trainer_ckpt_restore(struct trainer *t, const char *ckpt_dir, qs_diag *d);
/* Keep only the lines of a JSONL log whose "step" is < step, plus eval lines
 * of that step (resume). */
int trainer_log_truncate(const char *path, long step, qs_diag *d);
int trainer_event_append(const char *run_dir, const char *line, qs_diag *d);

/* trainer_plots.c: heatmap.png + curves.png of the run dir (atomic). */
int trainer_plots_write(struct trainer *t, qs_diag *d);

#endif
