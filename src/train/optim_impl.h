/* optim_impl.h: AVX-512 kernels of optim.c, called when cpu_level() >=
 * CPU_LEVEL_AVX512 (the portable loops in optim.c are the reference).  Not API. */
#ifndef QS_OPTIM_IMPL_H
#define QS_OPTIM_IMPL_H

#include <stddef.h>

/* The constants of one AdamW step, as optim.c computes them; grad_scale is
 * the clip factor each gradient is multiplied by first (1 = none). */
typedef struct optim_adamw_consts {
    float b1, b2, one_minus_b1, one_minus_b2, step, decay, eps, bc2_sqrt, grad_scale;
} optim_adamw_consts;

/* AdamW over elements [0, n) on the gradients g[i] * grad_scale: the same float
 * operations in the same order as optim.c's loop (separate multiply and add,
 * IEEE sqrt and divide), so the same bits.  g_zero (NULL or g) is set to 0
 * after it is read. */
void optim_adamw_avx512_impl(float *p, float *m, float *v, const float *g, float *g_zero,
                             size_t n, const optim_adamw_consts *k);

#endif
