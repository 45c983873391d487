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
/* The arena `qatscope generate` gives model_generate for a prompt of n_prompt
 * tokens and n_new more: prefill chunks of up to MODEL_GENERATE_CHUNK tokens,
 * a cache of n_prompt + n_new positions (within the model's context).
 * model_generate_acts_elems: its floats (model_acts_elems; SIZE_MAX when they
 * do not fit). */
#define MODEL_GENERATE_CHUNK 256
int model_generate_acts_init(llama_acts *a, const llama_config *c, int n_prompt, int n_new,
                             qs_diag *d);
size_t model_generate_acts_elems(const llama_config *c, int n_prompt, int n_new);

/* Sliding-window perplexity as Hugging Face's guide computes it: windows of
 * `window` tokens starting every `stride` tokens; each window scores only the
 * tokens the previous one did not (never a window's first token), so every
 * token after ids[0] is scored once, with up to window - stride tokens of
 * context.  Windows go through the model in chunks (KV cache), so memory is
 * bounded by min(window, 256) rows of logits.  NLL sums are in double; a
 * non-finite NLL (overflowing logits) is QS_ENAN. */
typedef struct model_ppl_result {
    double nll_sum;     /* sum of -log p(token) over scored tokens (natural log) */
    size_t n_scored;
    size_t n_windows;
} model_ppl_result;
int model_ppl_compute(llama_model *m, const int32_t *ids, size_t n_ids, int window, int stride,
                      model_ppl_result *r, qs_diag *d);
/* `qatscope ppl`'s default window: the model's context capped at 1024. */
int model_ppl_window_default(const llama_config *c);
/* Floats of model_ppl_compute's arena for windows of `window` tokens on a text
 * of at least that many (model_acts_elems; SIZE_MAX when they do not fit). */
size_t model_ppl_acts_elems(const llama_config *c, int window);

/* Comparison of two models' next-token distributions over the same windows
 * (qatscope compare; the in-loop KL of the trainer), as llama.cpp's
 * `llama-perplexity --kl-divergence` reports it, computed live instead of from
 * a stored logits file.  Per scored position, in double precision from the
 * fp32 logits (log-softmax via the row maximum and log-sum-exp):
 *   kl     KL(ref || model) = sum_v p_ref(v) (log p_ref(v) - log p_model(v)),
 *          evaluated as  sum_v e_ref(v) (x_ref(v) - x(v)) / sum_v e_ref(v)
 *                        - (lse_ref - lse)   with e_ref = exp(x_ref - max x_ref),
 *          so identical logits give exactly 0; rounding can leave values of a few
 *          1e-16 below 0 on rows that differ;
 *   top, top_ref  the first argmax of each distribution; the rows agree when equal;
 *   dlogp  |log p_ref(top_ref) - log p_model(top_ref)|: how much the model moved
 *          the probability of the reference's choice;
 *   nll, nll_ref  -log p(target) of each model (xent_row_nll, as model_ppl_compute). */
typedef struct model_compare_row {
    double kl, dlogp, nll, nll_ref;
    int32_t top, top_ref;
} model_compare_row;
/* One position: logits[V] of the model, logits_ref[V] of the reference; target
 * in [0, V) or < 0 (no target: nll fields 0).  QS_ENAN when a logit is not
 * finite (then *r is unspecified). */
int model_compare_row_stats(const float *logits, const float *logits_ref, int V, int32_t target,
                            model_compare_row *r);
/* rows positions at once (OpenMP over rows): logits[rows, V], logits_ref[rows,
 * V], targets[rows] (NULL: none) -> out[rows].  QS_ENAN with *bad_row = the
 * first row with a non-finite logit. */
int model_compare_rows(const float *logits, const float *logits_ref, int V,
                       const int32_t *targets, int rows, model_compare_row *out, int *bad_row);

/* Summary over every scored position (the windows of model_ppl_compute): mean,
 * sample standard error, median, 99th percentile and maximum of kl (percentile
 * q = the ceil(q n)-th smallest value, "nearest rank"); the fraction of
 * positions whose top tokens agree, with its standard error sqrt(p (1-p) / (n-1));
 * the mean dlogp; the mean nll of both (ppl = exp).  Sums run in position order:
 * the same bits for any thread count. */
typedef struct model_compare_result {
    size_t n_scored, n_windows;
    double kl_mean, kl_stderr, kl_median, kl_p99, kl_max;
    double top1_agree, top1_stderr;   /* fractions in [0, 1] */
    double dlogp_mean;
    double nll, nll_ref;              /* mean -log p(target) per scored token, nats */
} model_compare_result;
/* m and ref must share vocab_size; the window must fit both contexts.  Each
 * window is run through both models (chunks of <= 256 rows on their KV caches,
 * two activation arenas).  rows (may be NULL) receives every scored
 * position's model_compare_row, position order (row i predicts ids[i + 1]):
 * room for n_ids - 1. */
int model_compare_compute(llama_model *m, llama_model *ref, const int32_t *ids, size_t n_ids,
                          int window, int stride, model_compare_row *rows,
                          model_compare_result *r, qs_diag *d);

/* lm.h implementation: contexts computed once (KV kept), continuations scored
 * on top; requests are processed one by one, so results do not depend on how
 * they are batched. */
typedef struct model_lm model_lm;
int model_lm_create(model_lm **out, llama_model *m, int max_len, qs_diag *d);
void model_lm_destroy(model_lm *lm);
lm_scorer model_lm_scorer(model_lm *lm);
/* How many times the scorer has (re)allocated an activation arena: once per
 * arena and growth, never per call when the requests fit (tests and benches). */
long model_lm_arena_allocs(const model_lm *lm);
/* Rows fed through the continuation forwards so far, padding included (each
 * forward feeds its sequences padded to its longest; tests and benches). */
long model_lm_cont_rows(const model_lm *lm);
/* Rows fed through the context forwards so far (shared prefixes once each, then
 * the tails), padding included (tests and benches). */
long model_lm_ctx_rows(const model_lm *lm);
/* Floats of the scorer's activation arenas (model_acts_infer_elems) once it has
 * scored requests whose context + continuation has at most `longest` tokens
 * (<= max_len: every continuation on its context), whose continuations have
 * at most longest_cont tokens and whose contexts share at most longest_prefix
 * leading tokens (model_lm_shared_prefix): the arenas only grow, so this is
 * their size from then on.  SIZE_MAX when it does not fit. */
size_t model_lm_acts_elems(const llama_config *c, int longest, int longest_cont,
                           int longest_prefix);
/* The longest prefix the scorer may compute once for several of these requests
 * (whatever the calls they come in): an upper bound for model_lm_acts_elems,
 * 0 when no two contexts share enough tokens to be worth it. */
int model_lm_shared_prefix(const lm_request *req, size_t n, size_t *out, qs_diag *d);

#endif
