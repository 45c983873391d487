/* vecops.h: operations on large fp32 vectors (gradient blocks, logits rows).
 * vecops_add_f32 is threaded with OpenMP above 65,536 elements, each element
 * owned by one thread: the result never depends on the thread count.  Call it
 * from serial code; vecops_argmax_f32 is serial and may run inside a region. */
#ifndef QS_VECOPS_H
#define QS_VECOPS_H

#include <stddef.h>

/* dst[i] += src[i] for i < n (one rounding per element) */
void vecops_add_f32(float *dst, const float *src, size_t n);

/* The index `best = 0; for v in [1, n): if (x[v] > x[best]) best = v` gives:
 * the lowest index of the maximum, NaN never chosen except at index 0 when
 * x[0] is NaN (then 0).  0 when n < 1.  A max over independent lanes, then
 * the first index equal to it: ~20x the speed of that loop, whose every step
 * waits on the load of x[best] (0.6 ms for a 153k vocabulary). */
int vecops_argmax_f32(const float *x, int n);

#endif
