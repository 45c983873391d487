/* stats.h: paired significance tests for per-item benchmark correctness.
 *
 * Both the CI gate (gate.h) and the forgetting alarm (forget.h) compare two
 * systems on the SAME items, each item scored 0/1.  Only the discordant pairs
 * carry information about the difference:
 *   b = items the baseline got right and the candidate got wrong,
 *   c = items the baseline got wrong and the candidate got right.
 * McNemar's exact test: under H0 (no difference) every discordant pair is a fair
 * coin, so min(b, c) ~ Binomial(b + c, 1/2); the two-sided p-value is
 * min(1, 2 * P(X <= min(b, c))).  b + c == 0 gives p = 1.
 *
 * The paired bootstrap resamples ITEMS (with replacement, n out of n) and keeps
 * the pairing, so the interval is for acc(candidate) - acc(baseline) on this item
 * population.  The RNG is explicit (seed in, no global state): the same seed gives
 * the same interval on every machine.
 *
 * Numerical contract: p-values are summed in log space (lgamma), relative error
 * below 1e-9 for b + c up to 1e6; exact for small n within double rounding.
 */
#ifndef QS_STATS_H
#define QS_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"

/* Discordant-pair counts of two 0/1 vectors of n_items (values other than 0/1 are
 * an error: QS_EINVAL). */
typedef struct stats_pairs {
    long n_items;
    long both_right, base_only, cand_only, both_wrong;   /* base_only = b, cand_only = c */
} stats_pairs;
int stats_pairs_count(const unsigned char *base_correct, const unsigned char *cand_correct,
                      size_t n_items, stats_pairs *out, qs_diag *d);

/* Two-sided exact McNemar p-value from the discordant counts (b, c >= 0). */
int stats_mcnemar_exact(long b, long c, double *p_value, qs_diag *d);

/* Percentile interval of mean(cand) - mean(base) from n_resamples paired
 * resamples; conf in (0, 1), e.g. 0.95.  Results are fractions (not points). */
typedef struct stats_bootstrap_opts {
    int n_resamples;   /* e.g. 2000 */
    double conf;       /* e.g. 0.95 */
    uint64_t seed;     /* explicit RNG seed */
} stats_bootstrap_opts;
int stats_paired_bootstrap(const unsigned char *base_correct, const unsigned char *cand_correct,
                           size_t n_items, const stats_bootstrap_opts *opts, double *lo,
                           double *hi, qs_diag *d);

#endif
