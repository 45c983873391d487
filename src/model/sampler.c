/* sampler.c: see include/qs/sampler.h.  Softmax in double; the candidate list
 * for top-p is sorted by (probability desc, id asc) so ties are deterministic:
 * a stable radix sort of the candidates, collected in id order, on their
 * probability's bits (a near-flat distribution over a 150k vocabulary keeps
 * ~90% of it in a 0.9 nucleus: qsort took 21 ms a token on the 1B model, more
 * than half of its bf16 forward). */
#include "qs/sampler.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "qs/mem.h"
#include "qs/rng.h"
#include "qs/vecops.h"

int sampler_init(sampler *s, int vocab_size, float temperature, float top_p, uint64_t seed,
                 qs_diag *d)
{
    memset(s, 0, sizeof *s);
    if (vocab_size < 1 || !(temperature >= 0) || !(top_p > 0 && top_p <= 1))
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "sampler: need temperature >= 0 and top_p in (0, 1], got %g and %g",
                        temperature, top_p);
    s->vocab_size = vocab_size;
    s->temperature = temperature;
    s->top_p = top_p;
    s->rng = seed;
    s->probs = qs_malloc((size_t)vocab_size * sizeof *s->probs);
    s->cand = qs_malloc((size_t)vocab_size * sizeof *s->cand);
    s->tmp = qs_malloc((size_t)vocab_size * sizeof *s->tmp);
    if (!s->probs || !s->cand || !s->tmp) {
        sampler_free(s);
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    }
    return 0;
}

void sampler_free(sampler *s)
{
    qs_free(s->probs);
    qs_free(s->cand);
    qs_free(s->tmp);
    memset(s, 0, sizeof *s);
}

/* splitmix64 -> uniform in [0, 1) */
static double sampler_uniform(uint64_t *st)
{
    return (rng_splitmix64(st) >> 11) * (1.0 / 9007199254740992.0);
}

/* The m candidates (in id order) by (p desc, id asc): a stable LSD radix sort,
 * a byte a pass, on the complement of p's bits (p >= 0, so the bits order as
 * the values do); a pass whose byte all keys share is skipped.  The result is
 * in s->cand. */
static void sampler_sort(sampler *s, int m)
{
    sampler_cand *src = s->cand, *dst = s->tmp;
    for (int shift = 0; shift < 32; shift += 8) {
        int count[256] = {0};
        for (int i = 0; i < m; i++) {
            uint32_t u;
            memcpy(&u, &src[i].p, sizeof u);
            count[(~u >> shift) & 255]++;
        }
        int skip = 0;
        for (int b = 0; b < 256 && !skip; b++)
            skip = count[b] == m;
        if (skip)
            continue;
        int at = 0;
        for (int b = 0; b < 256; b++) {
            int c = count[b];
            count[b] = at;
            at += c;
        }
        for (int i = 0; i < m; i++) {
            uint32_t u;
            memcpy(&u, &src[i].p, sizeof u);
            dst[count[(~u >> shift) & 255]++] = src[i];
        }
        sampler_cand *t = src;
        src = dst;
        dst = t;
    }
    if (src != s->cand)
        memcpy(s->cand, src, (size_t)m * sizeof *src);
}

/* The candidates with probability >= t, by (p desc, id asc); their count. */
static int sampler_sorted_above(sampler *s, int V, float t)
{
    int m = 0;
    for (int v = 0; v < V; v++)
        if (s->probs[v] >= t)
            s->cand[m++] = (sampler_cand){s->probs[v], v};
    sampler_sort(s, m);
    return m;
}

/* The nucleus: the first *n candidates in (p desc, id asc) order whose mass,
 * summed in that order, reaches target; returns that mass.  Every candidate
 * at or above a threshold comes before every one below it, so sorting only
 * those above gives the same prefix and the same sums whenever the prefix
 * ends inside them: the threshold is the power of two from a histogram of
 * the probabilities' binary exponents with at least target above it (a 150k
 * vocabulary sorts a few hundred candidates instead of all), halved further
 * in the rare case rounding leaves the prefix short. */
static double sampler_nucleus(sampler *s, int V, double target, int *n_out)
{
    double mass[256] = {0};
    for (int v = 0; v < V; v++) {
        uint32_t u;
        memcpy(&u, &s->probs[v], sizeof u);
        mass[(u >> 23) & 255] += s->probs[v];
    }
    int e = 255;
    double above = mass[255];
    while (e > 0 && above < target)
        above += mass[--e];
    for (;; e--) {
        /* e <= 0: every candidate (the full sort) */
        int m = sampler_sorted_above(s, V, e > 0 ? ldexpf(1.0f, e - 127) : -1.0f);
        double kept = 0;
        int n = 0;
        while (n < m && kept < target)
            kept += s->cand[n++].p;
        if (kept >= target || m == V || e <= 0) {
            *n_out = n;
            return kept;
        }
    }
}

int32_t sampler_next(sampler *s, const float *logits)
{
    int V = s->vocab_size;
    int32_t best = vecops_argmax_f32(logits, V);
    if (s->temperature == 0)
        return best;
    double sum = 0;
    for (int v = 0; v < V; v++) {
        double p = exp(((double)logits[v] - logits[best]) / s->temperature);
        s->probs[v] = (float)p;
        sum += p;
    }
    double r = sampler_uniform(&s->rng);
    if (!(sum >= 1.0))   /* a NaN logit: no distribution to draw from; the argmax */
        return best;
    if (s->top_p >= 1.0f) {
        double acc = 0, target = r * sum;
        for (int v = 0; v < V; v++) {
            acc += s->probs[v];
            if (acc > target)
                return v;
        }
        return best;
    }
    int n = 0;
    double kept = sampler_nucleus(s, V, s->top_p * sum, &n);
    double acc = 0, target = r * kept;
    for (int i = 0; i < n; i++) {
        acc += s->cand[i].p;
        if (acc > target)
            return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}
