/* eval_impl.h: eval session internals shared by eval.c and eval_rows.c. */
#ifndef QS_EVAL_IMPL_H
#define QS_EVAL_IMPL_H

#include "qs/eval.h"
#include "qs/eval_test.h"

typedef struct eval_req {
    int32_t *ctx;
    size_t n_ctx;
    int32_t **cont;    /* [n_choices] */
    size_t *n_cont;    /* [n_choices] */
} eval_req;

struct eval_session {
    eval_options o;
    eval_encoder enc;
    char *tasks_dir, *data_dir;
    int n_tasks;
    task_def *defs;       /* [n_tasks] */
    task_data *datas;     /* [n_tasks] */
    eval_item *items;
    eval_req *reqs;       /* [n_items] */
    size_t n_items;
    eval_row *rows;
    int n_rows, cap_rows;
    int **subject_row;    /* [n_tasks]: MMLU subject -> row (NULL for single-row tasks) */
    int *task_row;        /* [n_tasks]: its top row */
};

/* Append the results rows of task t (group + sub-groups + subjects for MMLU). */
int eval_rows_add_impl(eval_session *s, int t, qs_diag *d);
/* Row index of the leaf a document of task t belongs to. */
int eval_rows_leaf_impl(const eval_session *s, int t, const task_doc *doc);
/* Fill every row's metrics from the scored items. */
int eval_rows_compute_impl(eval_session *s, qs_diag *d);

/* Score items first, first + stride, ... (batch_items per scorer call) and set
 * their predictions; progress with done counts scaled by stride. */
int eval_score_impl(eval_session *s, const lm_scorer *lm, size_t first, size_t stride,
                    eval_progress_fn progress, void *user, qs_diag *d);
/* pred / pred_norm / correct flags of a scored item. */
void eval_item_preds_impl(eval_item *it);

/* eval_pair_encode_impl (the harness tokenization split) is declared in
 * qs/eval_test.h, which the test includes too. */

#endif
