/* repro.h: `qatscope reproduce` - the paper's eight-run study at small scale,
 * on a model that has knowledge to lose.
 *
 * World (repro_world.c): a seeded fact table of invented people (name -> home
 * town, pet, job, favourite colour), rendered as biographies in several
 * declarative sentence templates per attribute and mixed with general text
 * (short stories) into the pretraining corpus; a continued-pretraining corpus
 * of general text only; and the fact probe, a multiple-choice task in ARC's
 * layout (tasks/fact_probe.json) whose questions use phrasings that occur
 * nowhere in the training text, so it tests knowledge, not template recall.
 */
#ifndef QS_REPRO_H
#define QS_REPRO_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"

/* ---- the fact world ---- */

typedef struct repro_world_opts {
    uint64_t seed;
    int n_entities;             /* people in the fact table (<= REPRO_MAX_ENTITIES) */
    int renders_per_entity;     /* biographies per person in the pretraining text */
    int qa_per_entity;          /* question-answer documents per person in it */
    long pretrain_stories;      /* general-text documents mixed into the pretraining text */
    long cpt_stories;           /* general-text documents of the continued pretraining */
} repro_world_opts;

#define REPRO_MAX_ENTITIES 3200
#define REPRO_PROBE_TASK "fact_probe"
/* Relative to the world dir (= the in-loop eval's data dir); tasks/fact_probe.json
 * lists it. */
#define REPRO_PROBE_FILE "facts/fact_probe-test.jsonl"

typedef struct repro_world_summary {
    int n_entities, n_attrs, n_facts;
    long pretrain_docs, cpt_docs, probe_items;
    size_t pretrain_bytes, cpt_bytes;
} repro_world_summary;

/* Writes into dir (created): pretrain.txt, cpt.txt (paragraph = document),
 * REPRO_PROBE_FILE (one item per fact: 4 choices, gold + 3 other values of the
 * attribute), facts.tsv (person, attribute, value) and world.json (options,
 * counts, every template).  The same options give the same bytes. */
int repro_world_write(const repro_world_opts *o, const char *dir, repro_world_summary *s,
                      qs_diag *d);

/* The templates ("{N}" = the person, "{V}" = the value), for tests and world.json. */
typedef struct repro_attr {
    const char *name;
    const char *const *values;
    int n_values;
    const char *const *train;   /* declaratives of the training text */
    int n_train;
    const char *const *qa;      /* questions of the training text ("Question: ..\nAnswer: V") */
    int n_qa;
    const char *const *probe;   /* questions of the probe: never in the training text */
    int n_probe;
} repro_attr;
int repro_world_n_attrs(void);
const repro_attr *repro_world_attr(int i);

/* ---- the base model ---- */

/* A Llama shape (the vocabulary is the tokenizer's). */
typedef struct repro_model_spec {
    int n_layers, dim, hidden_dim, n_heads, n_kv_heads, max_pos;
} repro_model_spec;

/* A random-init HF checkpoint in out_dir: config.json from spec (LlamaForCausalLM,
 * tied embeddings, the vocabulary of tok_dir's tokenizer), tok_dir's tokenizer
 * files copied, weights as `qatscope init --seed seed --dtype f32` draws them
 * (include/qs/hfinit.h). */
int repro_base_init(const repro_model_spec *spec, const char *tok_dir, const char *out_dir,
                    uint64_t seed, qs_diag *d);

/* ---- one run of the grid, as its logs tell it ---- */

#define REPRO_NAME_MAX 48

/* Everything the report says about a run, read from the run directory
 * (config.json, metrics.jsonl, events.jsonl, quant.jsonl.zst) and its
 * end-of-run benchmark (final/results.json + the gate against the base model).
 * Accuracies are fractions of the fact probe's `acc`; -1 / NAN = not available. */
typedef struct repro_run_result {
    char name[REPRO_NAME_MAX];
    int qat;                     /* config: quantized (0 = BF16 baseline) */
    char estimator[64];          /* config amax_estimator ("" when qat is off) */
    double lr;
    long steps, bf16_warmup_steps;
    double spike_rate;
    int complete;                /* events.jsonl: stop reason "done" after the last step */
    /* metrics.jsonl */
    long n_loss;
    double *loss;                /* [n_loss] training loss per step (step i at i) */
    long n_evals;
    long *eval_step;             /* [n_evals] in-loop evaluations */
    double *eval_acc;            /* [n_evals] fact probe acc */
    double *eval_val_loss;       /* [n_evals] held-out loss (NAN when absent) */
    long probe_items;
    double probe_start, probe_final;   /* first and last in-loop evaluation */
    /* events.jsonl */
    long first_sat_alarm, n_sat_alarms;     /* -1 / 0 when none */
    long first_forget_alarm, n_forget_alarms;
    long n_spikes;
    /* quant.jsonl.zst (QAT steps; 0 when qat is off) */
    long tensor_steps;           /* quantizers x QAT steps */
    long sat_tensor_steps;       /* ... with any clipped element */
    long alarm_tensor_steps;     /* ... with clip rate above the alarm threshold */
    /* end-of-run benchmark vs the base model (repro_grid.c) */
    double bench_acc;            /* final checkpoint, every probe item, as deployed */
    int gate_verdict;            /* GATE_*; -1 = not run */
    double gate_drop_points, gate_p;
    /* derived across runs (repro_runs_derive) */
    char baseline[REPRO_NAME_MAX];   /* the BF16 run at the same lr ("" = none) */
    double drop_points;          /* 100 x (base model's probe - probe_final) */
    double delta_points;         /* 100 x (probe_final - the baseline's probe_final) */
    double ape_pct;              /* training-loss APE against the baseline */
    long forget_lead_steps;      /* steps - first_forget_alarm; -1 when none */
} repro_run_result;

/* Reads run_dir into r (zeroed first; free with repro_run_result_free).  A missing
 * quant.jsonl.zst is an error only for a QAT run. */
int repro_run_read(const char *run_dir, repro_run_result *r, qs_diag *d);
void repro_run_result_free(repro_run_result *r);   /* safe on a zeroed r */
/* The paper's training-loss metric: mean over steps of |a - b| / b, in percent, over
 * the steps both runs logged; NAN when none. */
double repro_loss_ape(const repro_run_result *a, const repro_run_result *b);

/* Fills the derived fields of every run: its BF16 baseline is the run with
 * qat off and the same lr (a BF16 run is its own); drops are against base_acc,
 * the base model's probe accuracy (NAN: the run's own first evaluation). */
void repro_runs_derive(repro_run_result *runs, int n, double base_acc);

/* ---- the paper's claims ---- */

/* Run names of the grid (repro_grid.c) the claims refer to. */
#define REPRO_RUN_MR_HIGH "1-most-recent-high"
#define REPRO_RUN_ES_HIGH "2-exp-smoothing-high"
#define REPRO_RUN_CUR_HIGH "3-current-high"
#define REPRO_RUN_MW_HIGH "4-max-window-high"
#define REPRO_RUN_BF16_HIGH "5-bf16-high"
#define REPRO_RUN_BF16_LOW "6-bf16-low"
#define REPRO_RUN_MR_LOW "7-most-recent-low-warmup"
#define REPRO_RUN_MW_LOW "8-max-window-low-warmup"
#define REPRO_RUN_MR_SPIKE "7s-most-recent-low-warmup-spikes"
#define REPRO_RUN_MW_SPIKE "8s-max-window-low-warmup-spikes"

typedef struct repro_thresholds {
    double forget_points;    /* a probe drop counts above this (pp); = the alarm's and the gate's */
    double ape_small_pct;    /* a training-loss APE below this is "small" (%) */
    double sat_ratio;        /* "far more" saturation: at least this many times */
    double recipe_points;    /* the recipe ends within this of its BF16 baseline (pp) */
} repro_thresholds;
void repro_thresholds_default(repro_thresholds *t);   /* 2 pp, 1 %, 2x, 1 pp */

enum { REPRO_NOT_ASSESSED = -1, REPRO_NOT_REPRODUCED = 0, REPRO_REPRODUCED = 1 };
#define REPRO_N_CLAIMS 6
typedef struct repro_claim {
    char id;                 /* 'a'..'f' */
    const char *claim;       /* the paper's claim, one sentence */
    const char *test;        /* how it is decided here, one sentence */
    int verdict;             /* REPRO_* */
    char numbers[1024];      /* the numbers the verdict rests on (and why it failed) */
} repro_claim;
const char *repro_verdict_name(int verdict);   /* "reproduced" / "not reproduced" / "not assessed" */
/* Decides every claim from derived run results (runs missing -> not assessed). */
void repro_claims_assess(const repro_run_result *runs, int n, const repro_thresholds *th,
                         repro_claim out[REPRO_N_CLAIMS]);

/* ---- the study: scale, grid, driver ---- */

/* Everything sized for the machine (README: what is scaled down and why). */
typedef struct repro_scale {
    const char *name;            /* "full" | "quick" */
    repro_world_opts world;      /* world.seed is replaced by the study seed */
    repro_model_spec model;
    long batch, seq;             /* B x T of every run (grad_accum 1) */
    long pre_steps, pre_lr_warmup, pre_eval_every;
    double pre_lr;               /* pretraining: linear warmup, then cosine to pre_lr / 10 */
    double pre_weight_decay;     /* pretraining AdamW weight decay (the grid uses none) */
    double probe_target;         /* the base model's probe accuracy must reach this */
    long steps, eval_every;      /* every grid run */
    double lr_high;              /* "high": the BF16 baseline forgets (README: the sweep) */
    double lr_low;               /* "low" = lr_high / 10 */
    double warmup_frac;          /* BF16 warmup of runs 7 and 8 (500 of 10,000 in the paper) */
    double spike_rate, spike_scale;   /* spike variants */
} repro_scale;
void repro_scale_preset(int quick, repro_scale *s);

/* One run of the grid. */
typedef struct repro_run_spec {
    const char *name;            /* REPRO_RUN_*: its directory under OUT/runs */
    const char *label;           /* what the paper's table calls it */
    int paper_run;               /* 1..8; 0 = a spike variant; -1 = an lr-sweep run */
    const char *estimator;       /* NULL = BF16 baseline (qat false) */
    int high_lr, warmup, spikes;
    double lr;                   /* > 0: this lr instead of the scale's high / low (sweep) */
} repro_run_spec;
int repro_grid_count(void);
const repro_run_spec *repro_grid_spec(int i);   /* NULL past the end */

typedef void (*repro_log_fn)(void *user, const char *line);

typedef struct repro_opts {
    const char *out_dir;         /* default "build/reproduce" */
    int quick;
    const repro_scale *scale;    /* NULL: repro_scale_preset(quick) (tests pass a tiny one) */
    const char *runs;            /* comma-separated run names (or paper numbers); NULL = all */
    const char *lr_sweep;        /* comma-separated lrs: BF16 runs "sweep-bf16-lr<LR>" too (the
                                    sweep that picks the high lr); NULL = none */
    uint64_t seed;               /* world, init, data order, spikes */
    const char *tasks_dir;       /* holds fact_probe.json; default "tasks" */
    const char *tokenizer_dir;   /* default "data/demo/model" (the bundled 512-piece BPE) */
    repro_log_fn log;            /* progress lines (the library never prints); may be NULL */
    void *user;
} repro_opts;
void repro_opts_default(repro_opts *o);
/* --runs and --lr-sweep as typed (every item a grid run / an lr in (0, 1]; no empty
 * list or item): done first by repro_study_run, and by a caller before any work. */
int repro_opts_check(const repro_opts *o, qs_diag *d);

/* World -> base model (cached) -> the grid (each run cached) -> end-of-run
 * benchmarks and gates -> OUT/REPORT.md, OUT/report.json, OUT/summary.png. */
int repro_study_run(const repro_opts *o, qs_diag *d);

#endif
