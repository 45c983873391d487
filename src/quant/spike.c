/* spike.c: the spike injector's seeded choices and row scaling (include/qs/spike.h). */
#include "qs/spike.h"

#include <math.h>

#include "qs/rng.h"

/* one stream per (step, Linear): 2^20 Linears per step is far beyond any model */
int spike_pick(const spike_plan *p, long step, int linear_id, int n_rows, int *row)
{
    if (!(p->rate > 0) || n_rows < 1 || step < 0 || linear_id < 0)
        return 0;
    rng r;
    rng_seed_stream(&r, p->seed ^ 0x5350494b45ull /* "SPIKE" */,
                    ((uint64_t)step << 20) | (uint64_t)linear_id);
    if (!((double)rng_uniform(&r) < p->rate))
        return 0;
    *row = (int)rng_below(&r, (uint32_t)n_rows);
    return 1;
}

float spike_row_mul(float *x, int row, int cols, float factor)
{
    float *v = x + (size_t)row * cols, amax = 0.0f;
    for (int i = 0; i < cols; i++) {
        v[i] *= factor;
        amax = fmaxf(amax, fabsf(v[i]));
    }
    return amax;
}

void spike_row_div(float *x, int row, int cols, float divisor)
{
    float *v = x + (size_t)row * cols;
    for (int i = 0; i < cols; i++)
        v[i] /= divisor;
}
