/* optim_impl.h: AVX-512 kernels of optim.c, called when cpu_level() >=
 * CPU_LEVEL_AVX512 (the portable loops in optim.c are the reference).  Not API. */
#ifndef QS_OPTIM_IMPL_H
#define QS_OPTIM_IMPL_H

#include <stddef.h>

/* The constants of one AdamW step, as optim.c computes them. */
typedef struct optim_adamw_consts {
    float b1, b2, one_minus_b1, one_minus_b2, step, decay, eps, bc2_sqrt;
} optim_adamw_consts;

/* AdamW over elements [0, n): the same float operations in the same order as
 * optim.c's loop (separate multiply and add, IEEE sqrt and divide), so the same
 * bits. */
void optim_adamw_avx512_impl(float *p, float *m, float *v, const float *g, size_t n,
                             const optim_adamw_consts *k);

/* sum of g[i]^2 over [0, n) in double: the products are exact, the sum runs in
 * 16 double lanes (then a fixed tree), so it differs from the portable
 * sequential sum by summation order only (relative <= n 2^-53). */
double optim_sumsq_avx512_impl(const float *g, size_t n);

#endif
