/* model_lm_prefix.c: which requests of a scoring call share a computed prefix
 * (model_lm_prefix.h). */
#include <stdlib.h>

#include "model_lm_prefix.h"

/* contexts in lexicographic token order, then request index */
static int lm_prefix_key_cmp(const void *a, const void *b)
{
    const lm_prefix_key *x = a, *y = b;
    size_t n = x->n_ctx < y->n_ctx ? x->n_ctx : y->n_ctx;
    for (size_t i = 0; i < n; i++)
        if (x->ctx[i] != y->ctx[i])
            return x->ctx[i] < y->ctx[i] ? -1 : 1;
    if (x->n_ctx != y->n_ctx)
        return x->n_ctx < y->n_ctx ? -1 : 1;
    return (x->req > y->req) - (x->req < y->req);
}

static size_t lm_prefix_common(const lm_prefix_key *x, const lm_prefix_key *y)
{
    size_t n = x->n_ctx < y->n_ctx ? x->n_ctx : y->n_ctx, i = 0;
    while (i < n && x->ctx[i] == y->ctx[i])
        i++;
    return i;
}

static void lm_prefix_sort(const lm_request *req, const int *idx, size_t n, lm_prefix_key *keys)
{
    for (size_t i = 0; i < n; i++) {
        int r = idx ? idx[i] : (int)i;
        keys[i] = (lm_prefix_key){req[r].ctx, req[r].n_ctx, r};
    }
    qsort(keys, n, sizeof *keys, lm_prefix_key_cmp);
}

void lm_prefix_plan(const lm_request *req, int *idx, int n, lm_prefix_group *groups,
                    int *n_groups, long *scratch, lm_prefix_key *keys)
{
    *n_groups = 0;
    if (n < 2)
        return;
    lm_prefix_sort(req, idx, (size_t)n, keys);
    /* lcp[k]: tokens keys k - 1 and k share; cost[j]: the fewest rows for the
     * first j keys; cut[j], P[j]: the last run of that split and its prefix */
    long *lcp = scratch, *cost = lcp + n + 1, *cut = cost + n + 1, *pre = cut + n + 1;
    for (int k = 0; k < n; k++) {
        idx[k] = keys[k].req;
        lcp[k] = k ? (long)lm_prefix_common(&keys[k - 1], &keys[k]) : 0;
    }
    cost[0] = 0;
    for (int j = 1; j <= n; j++) {
        long len = (long)keys[j - 1].n_ctx;
        cost[j] = cost[j - 1] + len;   /* key j - 1 computed whole */
        cut[j] = j - 1;
        pre[j] = 0;
        long common = lcp[j - 1], shortest = len, sum = len;
        for (int i = j - 2; i >= 0; i--) {   /* keys i .. j - 1 on a prefix of P tokens */
            long li = (long)keys[i].n_ctx;
            shortest = li < shortest ? li : shortest;
            sum += li;
            long P = common < shortest - 1 ? common : shortest - 1;
            if (P < LM_PREFIX_MIN)
                break;   /* P only shrinks as the run grows to the left */
            long c = cost[i] + LM_PREFIX_FWD + sum - (long)(j - i - 1) * P;
            if (c < cost[j]) {
                cost[j] = c;
                cut[j] = i;
                pre[j] = P;
            }
            common = i ? (lcp[i] < common ? lcp[i] : common) : common;
        }
    }
    /* the runs with a prefix, in order */
    int g = 0;
    for (int j = n; j > 0; j = (int)cut[j])
        g += pre[j] > 0;
    *n_groups = g;
    for (int j = n; j > 0; j = (int)cut[j])
        if (pre[j] > 0)
            groups[--g] = (lm_prefix_group){(int)cut[j], j - (int)cut[j], (int)pre[j]};
}

size_t lm_prefix_longest(const lm_request *req, size_t n, lm_prefix_key *keys)
{
    lm_prefix_sort(req, NULL, n, keys);
    size_t best = 0;
    for (size_t k = 1; k < n; k++) {
        size_t P = lm_prefix_common(&keys[k - 1], &keys[k]);
        size_t s = keys[k - 1].n_ctx < keys[k].n_ctx ? keys[k - 1].n_ctx : keys[k].n_ctx;
        P = P < s - 1 ? P : s - 1;
        best = P > best ? P : best;
    }
    return best >= LM_PREFIX_MIN ? best : 0;
}
