/* scorer.h: multiple-choice metrics exactly as the harness computes them.
 *
 * Per item: acc = argmax_i ll[i] == gold; acc_norm = argmax_i ll[i] /
 * char_len[i] == gold with char_len the number of Unicode code points of the
 * choice text (no leading delimiter).  argmax takes the FIRST maximum.
 * Per task: mean and stderr = sample stddev (n-1) / sqrt(n); NaN ("N/A") when
 * n <= 1.  Groups: size-weighted mean of the leaf values and the pooled
 * stderr sqrt(sum((n_i-1) se_i^2 n_i) / (N - k) / N)  (spec/tasks.md 0.4-0.5).
 */
#ifndef QS_SCORER_H
#define QS_SCORER_H

#include <stddef.h>

int scorer_argmax(const double *v, int n);   /* first index of the maximum; -1 if n <= 0 */
/* pred = argmax ll; pred_norm = argmax ll/char_len (char_len 0 counts as 1). */
void scorer_item_preds(const double *ll, const int *char_lens, int n, int *pred, int *pred_norm);

typedef struct scorer_stat {
    size_t n;
    double value;    /* mean (NaN when n == 0) */
    double stderr_;  /* NaN = "N/A" */
} scorer_stat;

/* Mean and n-1 stderr of 0/1 values (x[i] != 0 counts as 1). */
scorer_stat scorer_stat_mean(const unsigned char *x, size_t n);
/* Group: size-weighted mean + pooled stderr of k leaves (NaN stderr if any is). */
scorer_stat scorer_stat_group(const scorer_stat *leaves, int k);
/* Unweighted mean of the k leaf values (MMLU "subject mean", leaderboard v1). */
double scorer_stat_macro(const scorer_stat *leaves, int k);

#endif
