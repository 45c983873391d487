/* eval_dist.c: one evaluation split over the ranks of an mpirun job.
 *
 * Rank r scores items r, r + N, r + 2N, ... of the session's item list (tasks in
 * order, documents in file order), so every task's items are spread over all
 * ranks; each request is scored on its own (lm.h), so an item's log-likelihoods
 * are the bits one process computes.  Rank 0 then gathers every item's
 * log-likelihoods and greedy flags, recomputes the predictions and the rows:
 * its session equals a one-process session, and results.json / the samples log
 * written from it are the one-process files.  The other ranks' sessions hold
 * only their own items.  A rank whose scoring failed stops every rank (dist_agree).
 */
#include <string.h>

#include "eval_impl.h"
#include "qs/dist.h"
#include "qs/mem.h"

/* bytes one item's scores take in the gather: n_choices doubles + ints */
static size_t eval_item_bytes(const eval_item *it)
{
    return (size_t)it->n_choices * (sizeof(double) + sizeof(int));
}

int eval_session_run_dist(eval_session *s, const lm_scorer *lm, eval_progress_fn progress,
                          void *user, qs_diag *d)
{
    int N = dist_size(), me = dist_rank();
    if (N == 1)
        return eval_session_run(s, lm, progress, user, d);
    int rc = eval_score_impl(s, lm, (size_t)me, (size_t)N, me == 0 ? progress : NULL, user, d);
    if ((rc = dist_agree(rc, 0, NULL, d)))
        return rc;
    size_t *counts = qs_calloc((size_t)N, sizeof *counts), total = 0;
    if (!counts)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    for (size_t i = 0; i < s->n_items; i++)
        counts[i % (size_t)N] += eval_item_bytes(&s->items[i]);
    for (int r = 0; r < N; r++)
        total += counts[r];
    unsigned char *mine = qs_malloc(counts[me] + 1), *all = me == 0 ? qs_malloc(total + 1) : NULL;
    rc = !mine || (me == 0 && !all) ? diag_set(d, QS_ENOMEM, NULL, -1, "out of memory") : 0;
    if ((rc = dist_agree(rc, 0, NULL, d)))
        goto out;
    unsigned char *p = mine;
    for (size_t i = (size_t)me; i < s->n_items; i += (size_t)N) {
        const eval_item *it = &s->items[i];
        memcpy(p, it->loglik, (size_t)it->n_choices * sizeof(double));
        p += (size_t)it->n_choices * sizeof(double);
        memcpy(p, it->greedy, (size_t)it->n_choices * sizeof(int));
        p += (size_t)it->n_choices * sizeof(int);
    }
    if ((rc = dist_gatherv(mine, all, counts, 0, d)) || me != 0)
        goto out;
    /* rank r's part starts after ranks 0..r-1's; within it, its items in order */
    size_t *off = qs_calloc((size_t)N, sizeof *off);
    if (!off) {
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        goto out;
    }
    for (int r = 1; r < N; r++)
        off[r] = off[r - 1] + counts[r - 1];
    for (size_t i = 0; i < s->n_items; i++) {
        eval_item *it = &s->items[i];
        size_t r = i % (size_t)N, nc = (size_t)it->n_choices;
        memcpy(it->loglik, all + off[r], nc * sizeof(double));
        memcpy(it->greedy, all + off[r] + nc * sizeof(double), nc * sizeof(int));
        off[r] += eval_item_bytes(it);
        eval_item_preds_impl(it);
    }
    qs_free(off);
    rc = eval_rows_compute_impl(s, d);
out:
    qs_free(counts);
    qs_free(mine);
    qs_free(all);
    return rc;
}
