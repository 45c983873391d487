/* repro_impl.h: internals shared by the files of src/repro/.  Not API. */
#ifndef QS_REPRO_IMPL_H
#define QS_REPRO_IMPL_H

#include <stddef.h>

#include "qs/err.h"
#include "qs/repro.h"
#include "qs/runcfg.h"
#include "qs/rng.h"

/* Growable NUL-terminated text; a failed append sticks (failed = 1). */
typedef struct repro_buf {
    char *p;
    size_t len, cap;
    int failed;
} repro_buf;
int repro_buf_printf(repro_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void repro_buf_free(repro_buf *b);

/* A JSON value written atomically (2-space indent, key order kept). */
struct json_t;
int repro_json_write(const struct json_t *v, const char *path, qs_diag *d);

/* One short story of the general text (repro_text.c). */
int repro_story_append(repro_buf *b, rng *r);

/* Where everything of a study lives (each fits a runcfg string). */
typedef struct repro_paths {
    char out[RUNCFG_STR_MAX / 2];
    char world[RUNCFG_STR_MAX], pre_shards[RUNCFG_STR_MAX], cpt_shards[RUNCFG_STR_MAX];
    char tasks[RUNCFG_STR_MAX], tokenizer[RUNCFG_STR_MAX];
    char init[RUNCFG_STR_MAX], pretrain[RUNCFG_STR_MAX - 64], base_model[RUNCFG_STR_MAX];
    char base_bench[RUNCFG_STR_MAX], runs[RUNCFG_STR_MAX - 64];
} repro_paths;

/* repro_grid.c: the configs of the base model's pretraining and of a grid run. */
void repro_pretrain_config(const repro_scale *s, uint64_t seed, const repro_paths *p, runcfg *c);
void repro_run_config(const repro_scale *s, const repro_run_spec *r, uint64_t seed,
                      const repro_paths *p, runcfg *c);

/* repro_exec.c */
double repro_now_s(void);
void repro_log(const repro_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 when the file at path holds exactly key */
int repro_key_matches(const char *path, const char *key);
/* Trains cfg to its end, or until an in-loop evaluation finds the fact probe at
 * stop_acc or above (NAN: never; event "stop"/"target"), with progress through
 * o->log; or reuses cfg->out_dir when its repro.key equals study_key + the
 * config and the run finished.  *final_step: the step the run ended at (its
 * last checkpoint).  0 trained, 1 reused. */
int repro_train(const runcfg *cfg, const char *study_key, double stop_acc, const repro_opts *o,
                long *final_step, qs_diag *d);

/* Wall times of a study (reported, never part of the numbers). */
typedef struct repro_timing {
    double world_s, base_s, total_s;
    int base_reused;
    double run_s[32];
    int run_reused[32];
} repro_timing;

/* repro_report.c: OUT/REPORT.md, OUT/report.json, OUT/summary.png, OUT/timing.json */
int repro_report_write(const repro_opts *o, const repro_scale *s, const repro_paths *p,
                       const repro_run_spec *runs, int n_runs, const repro_timing *tm, qs_diag *d);

/* repro_plot.c: OUT/summary.png */
int repro_summary_png(const repro_run_result *runs, int n, double base_acc, const char *path,
                      qs_diag *d);

/* repro_bench.c: every probe item on a checkpoint (quantized: HiF8 with the
 * checkpoint's delayed scales) -> bench_dir/results.json + samples.jsonl.zst. */
int repro_bench_eval(const char *model_dir, int quantized, const char *world_dir,
                     const char *tasks_dir, const char *bench_dir, double *acc, qs_diag *d);
/* gate(base, candidate) on the probe: fills r's bench_acc and gate_* fields. */
int repro_bench_gate(const char *base_results, const char *cand_results, double max_drop_points,
                     repro_run_result *r, qs_diag *d);

#endif
