/* model_lm_prefix.h: which requests of a scoring call share a computed prefix
 * (model_lm.c; not API).
 *
 * Requests whose contexts start with the same P tokens (few-shot MMLU: the
 * subject's description and its k dev examples, the same for every item) can
 * compute those P tokens once: one forward of the prefix, its keys and values
 * copied into every member's cache (kv_prefix), then each member's own tail at
 * positions P.. .  Every row is computed by the same row-independent layers
 * from the same inputs either way, so the log-likelihoods are the same bits
 * whether a request is computed whole or on a shared prefix.
 */
#ifndef QS_MODEL_LM_PREFIX_H
#define QS_MODEL_LM_PREFIX_H

#include <stddef.h>

#include "qs/lm.h"

enum {
    LM_PREFIX_MIN = 32,   /* shorter prefixes are computed with each context (0-shot
                           * MMLU's description, ~20 tokens: no gain measured on 1B) */
    LM_PREFIX_FWD = 128,  /* what the prefix's own forward and the tails' longer
                           * attention cost, in rows (a forward streams every weight
                           * once: ~60-90 rows' time on the 1B model at bf16-amx) */
};

/* A run of the planned order whose members share their first P tokens. */
typedef struct lm_prefix_group {
    int first, n;   /* members idx[first .. first + n) */
    int P;          /* >= LM_PREFIX_MIN; every member's context is longer than P */
} lm_prefix_group;

/* A request's context, sorted by lexicographic order. */
typedef struct lm_prefix_key {
    const int32_t *ctx;
    size_t n_ctx;
    int req;
} lm_prefix_key;

/* Plans requests idx[0..n) (indices into req): on return idx is in the
 * lexicographic order of their contexts (ties by index) and groups[0..*n_groups)
 * are the runs computed on a shared prefix, chosen to feed the fewest rows
 * (every context's own rows, plus per group its prefix once and LM_PREFIX_FWD;
 * exact over every split of the order into runs).  The requests outside the
 * groups are computed whole.  groups: room for n / 2 (a group has two members
 * or more); scratch: 4 * (n + 1) longs; keys: room for n. */
void lm_prefix_plan(const lm_request *req, int *idx, int n, lm_prefix_group *groups,
                    int *n_groups, long *scratch, lm_prefix_key *keys);

/* The longest prefix lm_prefix_plan can give any group of these requests (an
 * upper bound: the longest common prefix of two contexts, shorter than both),
 * 0 when none reaches LM_PREFIX_MIN.  keys: room for n. */
size_t lm_prefix_longest(const lm_request *req, size_t n, lm_prefix_key *keys);

#endif
