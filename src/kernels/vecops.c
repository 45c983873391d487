/* vecops.c: see include/qs/vecops.h. */
#include "qs/vecops.h"

void vecops_add_f32(float *dst, const float *src, size_t n)
{
    long ln = (long)n;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (ln > 65536)
#endif
    for (long i = 0; i < ln; i++)
        dst[i] += src[i];
}

enum { VECOPS_LANES = 16 };

int vecops_argmax_f32(const float *x, int n)
{
    if (n < 1)
        return 0;
    /* m = x[v] > m ? x[v] : m in each lane: NaN never enters unless x[0] is
     * NaN, and then no x[v] == m below (the loop's answer 0) */
    float m[VECOPS_LANES];
    for (int j = 0; j < VECOPS_LANES; j++)
        m[j] = x[0];
    int v = 0;
    for (; v + VECOPS_LANES <= n; v += VECOPS_LANES)
        for (int j = 0; j < VECOPS_LANES; j++)
            m[j] = x[v + j] > m[j] ? x[v + j] : m[j];
    for (; v < n; v++)
        m[0] = x[v] > m[0] ? x[v] : m[0];
    float mx = m[0];
    for (int j = 1; j < VECOPS_LANES; j++)
        mx = m[j] > mx ? m[j] : mx;
    /* the first x[v] == mx: the loop keeps the first of equal maxima (and
     * -0.0 == +0.0 there as here) */
    for (v = 0; v < n; v++)
        if (x[v] == mx)
            return v;
    return 0;
}
