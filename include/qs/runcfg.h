/* runcfg.h: the run configuration of `qatscope train` (one JSON object).
 *
 * Every option is one row of runcfg.c's key table (name, type, default, doc);
 * the README's key list and `qatscope train --help-config` come from it.
 * Unknown keys are an error naming the key; values are type-checked (JSON
 * files and `--set key=value` overrides alike).  Lists are JSON arrays of
 * strings in files and comma-separated in --set.
 *
 * Checklist for a new key: field here, row in runcfg.c's table, README, and the
 * trainer code that reads it.
 */
#ifndef QS_RUNCFG_H
#define QS_RUNCFG_H

#include "qs/err.h"

#define RUNCFG_STR_MAX 512

typedef struct runcfg {
    char model[RUNCFG_STR_MAX];          /* HF checkpoint dir */
    char train_data[RUNCFG_STR_MAX];     /* token shards (dir or file) */
    char out_dir[RUNCFG_STR_MAX];        /* run dir */
    char run_name[RUNCFG_STR_MAX];
    long seed;
    long batch_size;                     /* sequences per micro-batch (B) */
    long seq_len;                        /* tokens per sequence (T) */
    long grad_accum;                     /* micro-batches per optimizer step */
    int recompute;                       /* bool: per-block activation recomputation */
    long steps;                          /* optimizer steps */
    double lr, lr_min;
    long lr_warmup_steps;
    char lr_decay[16];                   /* constant | cosine */
    double beta1, beta2, eps, weight_decay, grad_clip;
    char precision[16];                  /* fp32 | bf16 | bf16-amx */
    int qat;                             /* bool */
    char quant_modules[RUNCFG_STR_MAX];  /* comma-separated qplan patterns */
    long bf16_warmup_steps;
    char ste[16];                        /* pass | masked */
    char amax_estimator[64];             /* e.g. max-window:64 */
    long amax_history;                   /* amax history length (steps) */
    long amax_margin;                    /* scale headroom, powers of two */
    int stop_on_saturation;              /* bool */
    double saturation_clip_rate;         /* alarm threshold on a quantizer's clip rate */
    long saturation_alarm_steps;         /* consecutive steps before an alarm */
    long ckpt_every;                     /* steps between checkpoints; 0 = only the last */
    long log_every;                      /* steps between quant.jsonl.zst records */
    long eval_every;                     /* in-loop evaluation interval, 0 = off */
    char eval_tasks[RUNCFG_STR_MAX];     /* comma-separated task names */
    char eval_data_dir[RUNCFG_STR_MAX];
    char eval_tasks_dir[RUNCFG_STR_MAX];
    long eval_subset;                    /* documents per task, 0 = all */
    long eval_val_batches;               /* held-out batches per in-loop eval, 0 = no val_loss */
    int eval_kl_reference;               /* bool, or -1 = auto (on with qat); runcfg_kl_reference */
    long plot_every;                     /* heatmap.png + curves.png every N steps, 0 = off */
    int stop_on_forgetting;              /* bool */
    double forgetting_drop_points, forgetting_alpha;
    long zero;                           /* 1: ZeRO-1 optimizer-state sharding across ranks */
    double max_memory_gb;                /* refuse runs estimated above this; 0 = available RAM */
    double spike_rate;                   /* spike injector (qs/spike.h): P(spike) per step and Linear */
    double spike_scale;                  /* ... factor of the spiked token row */
} runcfg;

enum { RUNCFG_INT = 0, RUNCFG_DOUBLE, RUNCFG_BOOL, RUNCFG_STRING, RUNCFG_ENUM, RUNCFG_LIST };

typedef struct runcfg_key {
    const char *name;
    int type;                 /* RUNCFG_* */
    const char *dflt;         /* default as text ("" = none) */
    const char *choices;      /* enums: "a|b"; numbers: "[min, max]" shown in docs */
    const char *doc;
} runcfg_key;

void runcfg_defaults(runcfg *c);
/* Defaults, then every key of the JSON object in path. */
int runcfg_load(runcfg *c, const char *path, qs_diag *d);
/* Same, from a JSON text (path is only used in messages). */
int runcfg_load_text(runcfg *c, const char *text, const char *path, qs_diag *d);
/* One "key=value" override. */
int runcfg_set(runcfg *c, const char *assignment, qs_diag *d);
/* Cross-field checks (required keys present, B*T > 0, ...). */
int runcfg_validate(const runcfg *c, qs_diag *d);
/* The full config as a JSON object text (qs_malloc'd, caller qs_free's). */
char *runcfg_to_json(const runcfg *c);

/* Whether the in-loop evaluation measures KL and top-1 agreement against the
 * step-0 weights: eval_kl_reference, where "auto" means qat; never without
 * in-loop evaluations on val batches (eval_every, eval_val_batches > 0). */
int runcfg_kl_reference(const runcfg *c);

int runcfg_key_count(void);
/* The keys a resumed run may change (`train --resume --set`; a checkpoint's
 * recorded config may differ from the run's in these and in the paths):
 * 1 for such a key name, and their list as one line ("steps, ckpt_every, ..."). */
int runcfg_key_resumable(const char *name);
const char *runcfg_resumable_list(void);
const runcfg_key *runcfg_key_at(int i);

#endif
