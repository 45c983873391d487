/* sampler.h: next-token choice from logits: greedy, temperature, nucleus (top-p).
 *
 * temperature == 0 is greedy (argmax, lowest id on ties).  Otherwise
 * p = softmax(logits / temperature); with top_p < 1 only the smallest set of
 * most likely tokens whose mass reaches top_p is kept (renormalised).  The RNG
 * state is explicit (seeded at init), so a seed reproduces a run exactly.
 */
#ifndef QS_SAMPLER_H
#define QS_SAMPLER_H

#include <stdint.h>

#include "qs/err.h"

typedef struct sampler_cand {
    float p;
    int32_t id;
} sampler_cand;

typedef struct sampler {
    int vocab_size;
    float temperature;   /* >= 0 */
    float top_p;         /* (0, 1] */
    uint64_t rng;        /* state */
    float *probs;        /* [V] scratch */
    sampler_cand *cand;  /* [V] scratch for top-p */
    sampler_cand *tmp;   /* [V] scratch for its sort */
} sampler;

int sampler_init(sampler *s, int vocab_size, float temperature, float top_p, uint64_t seed,
                 qs_diag *d);
void sampler_free(sampler *s);   /* safe on a zeroed sampler */
/* The next id: the first argmax at temperature 0 (and whenever the logits
 * hold a NaN or +inf: no distribution to draw from), else a draw from the
 * softmax at the temperature, restricted to the nucleus when top_p < 1. */
int32_t sampler_next(sampler *s, const float *logits);

#endif
