/* vecops.h: element-wise operations on large fp32 vectors (gradient blocks).
 * Threaded with OpenMP above 65,536 elements, each element owned by one thread:
 * the result never depends on the thread count.  Call from serial code. */
#ifndef QS_VECOPS_H
#define QS_VECOPS_H

#include <stddef.h>

/* dst[i] += src[i] for i < n (one rounding per element) */
void vecops_add_f32(float *dst, const float *src, size_t n);

#endif
