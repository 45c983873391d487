/* stats.c: McNemar exact test and paired bootstrap (see include/qs/stats.h). */
#include "qs/stats.h"

#include <math.h>
#include <stdlib.h>

#include "qs/mem.h"
#include "qs/rng.h"

int stats_pairs_count(const unsigned char *base_correct, const unsigned char *cand_correct,
                      size_t n_items, stats_pairs *out, qs_diag *d)
{
    stats_pairs p = {0};
    for (size_t i = 0; i < n_items; i++) {
        unsigned a = base_correct[i], b = cand_correct[i];
        if (a > 1 || b > 1)
            return diag_set(d, QS_EINVAL, NULL, -1,
                            "item %zu: correctness must be 0 or 1, found %u and %u", i, a, b);
        if (a && b)
            p.both_right++;
        else if (a)
            p.base_only++;
        else if (b)
            p.cand_only++;
        else
            p.both_wrong++;
    }
    p.n_items = (long)n_items;
    *out = p;
    return 0;
}

/* log of the Binomial(n, 1/2) probability of k */
static double binom_half_log_pmf(long n, long k)
{
    return lgamma((double)n + 1) - lgamma((double)k + 1) - lgamma((double)(n - k) + 1) -
           (double)n * log(2.0);
}

int stats_mcnemar_exact(long b, long c, double *p_value, qs_diag *d)
{
    if (b < 0 || c < 0)
        return diag_set(d, QS_EINVAL, NULL, -1, "McNemar: counts must be >= 0, got b=%ld c=%ld", b,
                        c);
    long n = b + c, k = b < c ? b : c;
    if (n == 0) {
        *p_value = 1.0;
        return 0;
    }
    /* P(X <= k): sum the tail from its largest term down, scaled by that term,
     * so no term underflows before the sum is formed */
    double log_top = binom_half_log_pmf(n, k), sum = 0.0;
    for (long i = k; i >= 0; i--) {
        double t = exp(binom_half_log_pmf(n, i) - log_top);
        sum += t;
        if (t < 1e-17 * sum)
            break;   /* the terms shrink geometrically from here on */
    }
    double p = 2.0 * exp(log_top + log(sum));
    *p_value = p > 1.0 ? 1.0 : p;
    return 0;
}

/* uniform index in [0, n) without modulo bias (reject the short last block); splitmix64:
 * explicit-state, well-mixed, enough for resampling indices */
static size_t rng_index(uint64_t *state, size_t n)
{
    uint64_t limit = (uint64_t)n, threshold = (0 - limit) % limit;
    for (;;) {
        uint64_t r = rng_splitmix64(state);
        if (r >= threshold)
            return (size_t)(r % limit);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int stats_paired_bootstrap(const unsigned char *base_correct, const unsigned char *cand_correct,
                           size_t n_items, const stats_bootstrap_opts *opts, double *lo,
                           double *hi, qs_diag *d)
{
    if (n_items == 0)
        return diag_set(d, QS_EINVAL, NULL, -1, "bootstrap: no items");
    if (opts->n_resamples < 10 || !(opts->conf > 0 && opts->conf < 1))
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "bootstrap: need >= 10 resamples and 0 < conf < 1, got %d and %g",
                        opts->n_resamples, opts->conf);
    stats_pairs pairs;
    int rc = stats_pairs_count(base_correct, cand_correct, n_items, &pairs, d);
    if (rc)
        return rc;
    signed char *delta = qs_malloc(n_items);
    double *diffs = qs_malloc((size_t)opts->n_resamples * sizeof *diffs);
    if (!delta || !diffs) {
        qs_free(delta);
        qs_free(diffs);
        return diag_set(d, QS_ENOMEM, NULL, -1, "bootstrap: %zu items", n_items);
    }
    for (size_t i = 0; i < n_items; i++)
        delta[i] = (signed char)((int)cand_correct[i] - (int)base_correct[i]);
    uint64_t state = opts->seed;
    for (int r = 0; r < opts->n_resamples; r++) {
        long sum = 0;
        for (size_t i = 0; i < n_items; i++)
            sum += delta[rng_index(&state, n_items)];
        diffs[r] = (double)sum / (double)n_items;
    }
    qsort(diffs, (size_t)opts->n_resamples, sizeof *diffs, cmp_double);
    /* percentile interval: nearest-rank quantiles at (1-conf)/2 and (1+conf)/2 */
    double tail = (1.0 - opts->conf) / 2.0;
    long last = opts->n_resamples - 1;
    long i_lo = (long)floor(tail * (double)last + 0.5);
    long i_hi = (long)floor((1.0 - tail) * (double)last + 0.5);
    *lo = diffs[i_lo];
    *hi = diffs[i_hi];
    qs_free(delta);
    qs_free(diffs);
    return 0;
}
