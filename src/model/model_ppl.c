/* model_ppl.c: sliding-window perplexity (see include/qs/model_infer.h). */
#include <math.h>

#include "qs/layers.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"

#define PPL_CHUNK_MAX 256

int model_ppl_compute(llama_model *m, const int32_t *ids, size_t n_ids, int window, int stride,
                      model_ppl_result *r, qs_diag *d)
{
    r->nll_sum = 0;
    r->n_scored = 0;
    r->n_windows = 0;
    if (window < 2 || stride < 1 || stride > window)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "ppl: need window >= 2 and 1 <= stride <= window (got %d, %d)", window,
                        stride);
    if (n_ids < 2)
        return diag_set(d, QS_EINVAL, NULL, -1, "ppl: need at least 2 tokens, got %zu", n_ids);
    int win = (size_t)window < n_ids ? window : (int)n_ids;
    int chunk = win < PPL_CHUNK_MAX ? win : PPL_CHUNK_MAX;
    llama_acts a;
    int rc = model_acts_init(&a, &m->cfg, 1, chunk, win, 0, d);
    if (rc)
        return rc;
    const int V = m->cfg.vocab_size;
    size_t prev_end = 0;
    for (size_t begin = 0; prev_end < n_ids; begin += (size_t)stride) {
        size_t end = begin + (size_t)win < n_ids ? begin + (size_t)win : n_ids;
        size_t first = prev_end > begin + 1 ? prev_end : begin + 1;   /* first scored token */
        for (size_t c0 = begin; c0 < end && !rc; c0 += (size_t)chunk) {
            int rows = (int)(end - c0 < (size_t)chunk ? end - c0 : (size_t)chunk);
            rc = model_forward(m, &a, ids + c0, NULL, 1, rows, (int)(c0 - begin), d);
            for (int j = 0; j < rows && !rc; j++) {
                size_t tgt = c0 + (size_t)j + 1;   /* token predicted by this row */
                if (tgt < first || tgt >= end)
                    continue;
                r->nll_sum += xent_row_nll(a.logits + (size_t)j * V, V, ids[tgt]);
                r->n_scored++;
            }
        }
        if (rc)
            break;
        r->n_windows++;
        prev_end = end;
    }
    model_acts_free(&a);
    return rc;
}
