/* model_generate.c: prompt prefill in chunks, then token-by-token decoding
 * through the KV cache (see include/qs/model_infer.h). */
#include <math.h>

#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/model_infer.h"
#include "qs/sampler.h"

/* prompt chunk and cache capacity of the arena */
static void gen_shape(int n_prompt, int n_new, int *chunk, int *cap)
{
    *chunk = n_prompt < MODEL_GENERATE_CHUNK ? n_prompt : MODEL_GENERATE_CHUNK;
    *cap = n_prompt + n_new;
}

int model_generate_acts_init(llama_acts *a, const llama_config *c, int n_prompt, int n_new,
                             qs_diag *d)
{
    int chunk, cap;
    gen_shape(n_prompt, n_new, &chunk, &cap);
    return model_acts_init(a, c, 1, chunk, cap, MODEL_ACTS_INFER, d);
}

size_t model_generate_acts_elems(const llama_config *c, int n_prompt, int n_new)
{
    int chunk, cap;
    gen_shape(n_prompt, n_new, &chunk, &cap);
    return model_acts_elems(c, 1, chunk, cap, MODEL_ACTS_INFER);
}

int model_generate(llama_model *m, llama_acts *a, const int32_t *prompt, int n_prompt, int n_new,
                   sampler *s, const int32_t *stop_ids, int n_stop, int32_t *out, int *n_out,
                   model_token_fn on_token, void *user, qs_diag *d)
{
    *n_out = 0;
    if (n_prompt < 1 || n_new < 0)
        return diag_set(d, QS_EINVAL, NULL, -1, "generate: need a prompt of >= 1 token");
    if (n_prompt + n_new > a->Tcap)
        return diag_set(d, QS_ERANGE, NULL, -1,
                        "prompt (%d tokens) + %d new tokens exceed the KV cache of %d", n_prompt,
                        n_new, a->Tcap);
    int rc = 0, last_rows = 0;
    for (int p = 0; p < n_prompt; p += a->T) {
        last_rows = n_prompt - p < a->T ? n_prompt - p : a->T;
        if ((rc = model_forward(m, a, prompt + p, NULL, 1, last_rows, p, d)))
            return rc;
    }
    const float *logits = a->logits + (size_t)(last_rows - 1) * m->cfg.vocab_size;
    for (int i = 0; i < n_new; i++) {
        for (int v = 0; v < m->cfg.vocab_size; v++)   /* no token to draw from NaN or Inf */
            if (!isfinite(logits[v]))
                return diag_set(d, QS_ENAN, NULL, -1,
                                "generate: non-finite logits (%s at token id %d) predicting "
                                "position %d: the model's weights or activations overflow",
                                isnan(logits[v]) ? "NaN" : "Inf", v, n_prompt + i);
        int32_t id = sampler_next(s, logits);
        for (int k = 0; k < n_stop; k++)
            if (id == stop_ids[k])
                return 0;
        out[(*n_out)++] = id;
        if (on_token && on_token(user, id))
            return 0;
        if (i + 1 == n_new)
            break;
        if ((rc = model_forward(m, a, &id, NULL, 1, 1, n_prompt + i, d)))
            return rc;
        logits = a->logits;
    }
    return 0;
}
