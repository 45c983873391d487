/* model_infer.h: inference on a llama_model: autoregressive generation,
 * sliding-window perplexity, and the lm.h scoring interface implemented on
 * the model (the evaluator sees only lm.h's lm_scorer).
 */
#ifndef QS_MODEL_INFER_H
#define QS_MODEL_INFER_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/lm.h"
#include "qs/model.h"
#include "qs/model_acts.h"

/* Autoregressive generation for one sequence (B = 1): the prompt goes through
 * the model in chunks of a->T tokens, then one token per step through the KV
 * cache (needs a->Tcap >= n_prompt + n_new).  Stops after n_new tokens or at
 * a token in stop_ids (not emitted).  out[n_new] gets the new ids, *n_out
 * their count; on_token (may be NULL) sees each new id, non-zero stops. */
typedef int (*model_token_fn)(void *user, int32_t id);
struct sampler;
int model_generate(llama_model *m, llama_acts *a, const int32_t *prompt, int n_prompt, int n_new,
                   struct sampler *s, const int32_t *stop_ids, int n_stop, int32_t *out,
                   int *n_out, model_token_fn on_token, void *user, qs_diag *d);

/* Sliding-window perplexity as Hugging Face's guide computes it: windows of
 * `window` tokens starting every `stride` tokens; each window scores only the
 * tokens the previous one did not (never a window's first token), so every
 * token after ids[0] is scored once, with up to window - stride tokens of
 * context.  Windows go through the model in chunks (KV cache), so memory is
 * bounded by min(window, 256) rows of logits.  NLL sums are in double. */
typedef struct model_ppl_result {
    double nll_sum;     /* sum of -log p(token) over scored tokens (natural log) */
    size_t n_scored;
    size_t n_windows;
} model_ppl_result;
int model_ppl_compute(llama_model *m, const int32_t *ids, size_t n_ids, int window, int stride,
                      model_ppl_result *r, qs_diag *d);

/* lm.h implementation: contexts computed once (KV kept), continuations scored
 * on top; requests are processed one by one, so results do not depend on how
 * they are batched. */
typedef struct model_lm model_lm;
int model_lm_create(model_lm **out, llama_model *m, int max_len, qs_diag *d);
void model_lm_destroy(model_lm *lm);
lm_scorer model_lm_scorer(model_lm *lm);

#endif
