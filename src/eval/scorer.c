/* scorer.c: per-item predictions and task/group aggregation (see scorer.h). */
#include <math.h>

#include "qs/scorer.h"

int scorer_argmax(const double *v, int n)
{
    int best = n > 0 ? 0 : -1;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])   /* strict: ties keep the lowest index, like np.argmax */
            best = i;
    return best;
}

void scorer_item_preds(const double *ll, const int *char_lens, int n, int *pred, int *pred_norm)
{
    *pred = scorer_argmax(ll, n);
    int best = n > 0 ? 0 : -1;
    double bv = 0;
    for (int i = 0; i < n; i++) {
        double v = ll[i] / (double)(char_lens[i] > 0 ? char_lens[i] : 1);
        if (i == 0 || v > bv) {
            bv = v;
            best = i;
        }
    }
    *pred_norm = best;
}

scorer_stat scorer_stat_mean(const unsigned char *x, size_t n)
{
    scorer_stat s = {n, NAN, NAN};
    if (!n)
        return s;
    size_t ones = 0;
    for (size_t i = 0; i < n; i++)
        ones += x[i] != 0;
    double mu = (double)ones / (double)n;
    s.value = mu;
    if (n > 1) {
        /* sum (x - mu)^2 over 0/1 data, computed from the counts (exact order-free) */
        double ss = (double)ones * (1 - mu) * (1 - mu) + (double)(n - ones) * mu * mu;
        s.stderr_ = sqrt(ss / (double)(n - 1)) / sqrt((double)n);
    }
    return s;
}

scorer_stat scorer_stat_group(const scorer_stat *leaves, int k)
{
    scorer_stat g = {0, NAN, NAN};
    double sum = 0, pooled = 0;
    int stderr_ok = k > 0;
    for (int i = 0; i < k; i++) {
        g.n += leaves[i].n;
        if (leaves[i].n)
            sum += leaves[i].value * (double)leaves[i].n;
        if (isnan(leaves[i].stderr_))
            stderr_ok = 0;
        else
            pooled += ((double)leaves[i].n - 1) * leaves[i].stderr_ * leaves[i].stderr_ *
                      (double)leaves[i].n;
    }
    if (!g.n)
        return g;
    g.value = sum / (double)g.n;
    if (stderr_ok && g.n > (size_t)k)
        g.stderr_ = sqrt(pooled / (double)(g.n - (size_t)k) / (double)g.n);
    return g;
}

double scorer_stat_macro(const scorer_stat *leaves, int k)
{
    double s = 0;
    int m = 0;
    for (int i = 0; i < k; i++)
        if (leaves[i].n) {
            s += leaves[i].value;
            m++;
        }
    return m ? s / m : NAN;
}
