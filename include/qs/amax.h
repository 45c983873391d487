/* amax.h: amax history ring buffer and the amax estimator table.
 *
 * A quantizer keeps the per-step amax (max |x|) of its tensor in a ring buffer
 * (capacity default 1024 steps).  An estimator turns that history into the amax
 * the next scale is built from.  Estimators are rows of ONE table in amax.c:
 *
 *   most-recent          the previous step's amax
 *   exp-smoothing:ALPHA  exponential smoothing over the retained history, oldest
 *                        first: s = a_oldest; s = ALPHA*a + (1-ALPHA)*s for each
 *                        newer a.  ALPHA in (0,1] is the weight of the NEWEST
 *                        value (exp-smoothing:1 == most-recent).
 *   max-window:N         max over the last N steps (default 64; fewer if the
 *                        history holds fewer)
 *   current              this step's own amax (current tensor scaling): needs a
 *                        first pass over the tensor; the history is not read
 *
 * Checklist for a new estimator: one AMAX_ALGO_* value at the END of the enum,
 * one estimate function + one row in amax.c's table, one test in test_amax.c.
 * The names reach quant.jsonl.zst headers and records: never rename a row.
 */
#ifndef QS_AMAX_H
#define QS_AMAX_H

#include <stddef.h>

#include "qs/err.h"

#define AMAX_HISTORY_DEFAULT_STEPS 1024
#define AMAX_WINDOW_DEFAULT_STEPS 64
#define AMAX_NAME_MAX 48   /* longest formatted estimator name + NUL */

/* Ring of the last capacity_steps amax values.  Zero-initialise, then
 * amax_history_init (owns its storage) or amax_history_init_view (storage is a
 * slice of a caller's block, e.g. one block for all quantizers of a model). */
typedef struct amax_history {
    float *vals;          /* [capacity_steps] ring storage */
    int capacity_steps;
    int len_steps;        /* valid entries, <= capacity_steps */
    int head;             /* slot the next push writes */
    int owns;             /* 1: vals is freed by amax_history_free */
} amax_history;

int amax_history_init(amax_history *h, int capacity_steps);
void amax_history_init_view(amax_history *h, float *storage, int capacity_steps);
void amax_history_free(amax_history *h);            /* safe on a zeroed h */
void amax_history_clear(amax_history *h);
void amax_history_push(amax_history *h, float amax);
/* Value pushed age_steps pushes ago (0 = most recent); age < len_steps. */
float amax_history_get(const amax_history *h, int age_steps);

enum {
    AMAX_ALGO_MOST_RECENT = 0,
    AMAX_ALGO_EXP_SMOOTHING = 1,
    AMAX_ALGO_MAX_WINDOW = 2,
    AMAX_ALGO_CURRENT = 3,
};

typedef struct amax_estimator {
    int algo;             /* AMAX_ALGO_* */
    int window_steps;     /* max-window N (>= 1) */
    double alpha;         /* exp-smoothing weight of the newest value, (0,1] */
} amax_estimator;

/* max-window:64, the paper's choice. */
amax_estimator amax_estimator_default(void);

/* "most-recent", "exp-smoothing:0.9", "max-window", "max-window:16", "current".
 * Bad names and parameters -> QS_EINVAL with the accepted forms in the diag. */
int amax_estimator_parse(const char *name, amax_estimator *e, qs_diag *d);
/* Canonical name ("max-window:64", "exp-smoothing:0.9") into buf (>= AMAX_NAME_MAX). */
void amax_estimator_format(const amax_estimator *e, char *buf, size_t buf_bytes);
/* Comma-separated list of estimator names -> e[0..*n) (at most max_n). */
int amax_estimator_parse_list(const char *list, amax_estimator *e, int max_n, int *n, qs_diag *d);

/* 1 if the estimator reads this step's amax (needs a first pass), else 0. */
int amax_estimator_needs_current(const amax_estimator *e);

/* Estimate the amax for the coming step.  current_amax is this step's amax
 * (only read by `current`).  Returns 1 and sets *out, or 0 when the estimator
 * has nothing to go on (empty history for a history-based estimator). */
int amax_estimate(const amax_estimator *e, const amax_history *h, float current_amax, float *out);

#endif
