/* results.h: results.json in lm-evaluation-harness's layout, and the per-item
 * samples log.
 *
 * results.json (written atomically): results.<task>["acc,none"],
 * ["acc_stderr,none"] (a number, or "N/A"), ["acc_norm,none"], ...; groups,
 * group_subtasks, configs, versions, n-shot, higher_is_better, n-samples,
 * config (harness keys + model path/hash, precision, threads, BOS), plus a
 * "qatscope" block (version, data files with SHA-256, per-task data format
 * notes, subject-mean accuracy of groups, item selection) and timing.
 * Samples (zstd JSON lines, ZLOG_ATOMIC): one object per item: task, doc_id,
 * subject (MMLU), loglikelihoods, n_tokens, char_lens, is_greedy, pred,
 * pred_norm, gold, acc, acc_norm.
 */
#ifndef QS_RESULTS_H
#define QS_RESULTS_H

#include "qs/err.h"
#include "qs/eval.h"

typedef struct results_meta {
    const char *model_path;    /* as given */
    const char *model_hash;    /* sha256 of the weights file(s), or NULL */
    const char *precision;     /* "fp32", "bf16" */
    int threads;
    int bos_added;             /* 1 if BOS was prepended */
    const char *bos_rule;      /* "tokenizer default" / "--bos" / "--no-bos" */
    const char *tokenizer_kind;
    int max_length;
    double total_seconds;
    long long date_unix;
    const char *command_line;  /* may be NULL */
    /* HiF8 W8A8 fake-quant (eval --precision hif8): the quantized Linear modules
     * (n_quant 0 = none) and how they are scaled; written to config:
     * quant_scaling "current" or "delayed (train_state step N)", quant_recipe
     * one line (estimator, margin, where the histories came from). */
    const char *const *quant_modules;
    int n_quant;
    const char *quant_scaling;
    const char *quant_recipe;
    const char *quant_state_hash;   /* sha256 of train_state.bin (delayed scaling) or NULL */
} results_meta;

/* Compose the JSON text and write it atomically. */
int results_json_write(const char *path, const eval_session *s, const results_meta *m,
                       qs_diag *d);
/* Per-item log; ".zst" suffix (or any name) -> zstd frames, ".jsonl" -> plain. */
int results_samples_write(const char *path, const eval_session *s, qs_diag *d);

#endif
