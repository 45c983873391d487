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
