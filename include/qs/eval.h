/* eval.h: the evaluator - tasks + data + tokenizer -> scored items -> metrics.
 *
 * A session is built once (task files read, data loaded, the evaluated items
 * chosen, prompts built and tokenized) and can be run any number of times
 * against an lm_scorer: the CLI runs it once; the trainer builds one on a fixed
 * seeded subset and runs it every k steps with the current weights, reading
 * both the per-task metrics (rows) and the per-item correctness (items, in a
 * stable order: tasks as requested, documents in file order), which is what a
 * paired McNemar test between two evaluations needs.
 *
 * Tokenization split (harness TemplateLM._encode_pair): trailing whitespace of
 * the context moves into each continuation; context+continuation is encoded
 * as one string and the continuation is every token past the number of tokens
 * the context alone encodes to; the context tokens are those of the context
 * alone.  BOS follows add_bos for both encodings, so it never lands in a
 * continuation.  Scores are whatever the lm_scorer returns; the session does
 * not depend on batch size (each request is independent).
 */
#ifndef QS_EVAL_H
#define QS_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/lm.h"
#include "qs/scorer.h"
#include "qs/task.h"

/* Text -> ids.  add_bos is TOKENIZER_BOS_DEFAULT/NO/YES (include/qs/tokenizer.h). */
typedef struct eval_encoder {
    void *self;
    int (*encode)(void *self, const char *text, size_t len, int add_bos, int32_t **ids,
                  size_t *n_ids, qs_diag *d);
    int32_t prefix_id;   /* BOS, else EOS: the context of an empty prompt; -1 none */
} eval_encoder;

typedef struct eval_options {
    const char *tasks_dir;       /* holds <task>.json */
    const char *data_dir;        /* mmlu/, hellaswag/, arc/ below it */
    const char *const *tasks;    /* task names, run in this order */
    int n_tasks;
    int shots;                   /* few-shot examples per prompt; 0 = harness default */
    long limit;                  /* first N docs of every leaf task (MMLU: per subject); 0 = all */
    long subset;                 /* N docs per task drawn with subset_seed (kept in file order); 0 = off */
    uint64_t subset_seed;
    uint64_t fewshot_seed;       /* harness fewshot_random_seed, 1234 */
    int add_bos;                 /* TOKENIZER_BOS_DEFAULT / _NO / _YES */
    int batch_items;             /* documents per lm_scorer call (0 -> 32) */
} eval_options;

void eval_options_default(eval_options *o);

/* One evaluated document.  Arrays have n_choices entries. */
typedef struct eval_item {
    int task;              /* index into the session's tasks */
    int row;               /* results row of its leaf task (MMLU: its subject) */
    long doc_id;           /* 0-based position in its data file */
    int subject;           /* MMLU subject index, else -1 */
    int n_choices, gold;
    double *loglik;        /* natural log, summed over the continuation tokens */
    int *greedy;
    int *n_tokens;         /* continuation tokens */
    int *char_lens;        /* code points of the choice text */
    int n_ctx_tokens;
    int pred, pred_norm;
    unsigned char correct, correct_norm;
} eval_item;

/* One results row: a task, an MMLU subject, or a group. */
typedef struct eval_row {
    char name[96];          /* "arc_easy", "mmlu_anatomy", "mmlu_stem", "mmlu" */
    char alias[96];         /* harness alias ("anatomy", "stem", ...) */
    const char *version;
    int task;               /* session task index */
    int is_group;
    int parent;             /* row index of the enclosing group, -1 */
    int has_norm;
    int n_shot;
    size_t n_original, n_effective;
    scorer_stat acc, acc_norm;
    double acc_subject_mean;   /* groups: unweighted mean over their leaves */
} eval_row;

typedef struct eval_session eval_session;

int eval_session_create(eval_session **out, const eval_options *o, const eval_encoder *enc,
                        qs_diag *d);
void eval_session_destroy(eval_session *s);   /* NULL ok */

typedef void (*eval_progress_fn)(void *user, size_t done, size_t total);

/* Score every item and compute the rows.  progress (may be NULL) is called
 * after each batch. */
int eval_session_run(eval_session *s, const lm_scorer *lm, eval_progress_fn progress, void *user,
                     qs_diag *d);

/* eval_session_run split over the ranks of an mpirun job (dist.h; one rank:
 * eval_session_run): each rank scores every N-th item, rank 0 gathers them and
 * alone ends with a complete session (rows and items as one process has them);
 * progress is called on rank 0 only.  Every rank must call it. */
int eval_session_run_dist(eval_session *s, const lm_scorer *lm, eval_progress_fn progress,
                          void *user, qs_diag *d);

int eval_session_n_tasks(const eval_session *s);
const task_def *eval_session_task_def(const eval_session *s, int t);
const task_data *eval_session_task_data(const eval_session *s, int t);
const eval_options *eval_session_options(const eval_session *s);
const eval_item *eval_session_items(const eval_session *s, size_t *n);
const eval_row *eval_session_rows(const eval_session *s, int *n);
/* The request of item i as given to the scorer (pointers into the session). */
void eval_session_request(const eval_session *s, size_t i, lm_request *req);

#endif
