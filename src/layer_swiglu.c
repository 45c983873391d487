/* layer_swiglu.c: SwiGLU gating, out = silu(gate) * up (see include/qs/layers.h). */
#include <math.h>

#include "qs/layers.h"

void swiglu_forward(float *out, const float *gate, const float *up, size_t n)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n > 65536)
#endif
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                     const float *up, size_t n)
{
    long ln = (long)n;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (ln > 65536)
#endif
    for (long i = 0; i < ln; i++) {
        float g = gate[i];
        float sig = 1.0f / (1.0f + expf(-g));
        float silu = g * sig;
        dgate[i] += dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
        dup[i] += dout[i] * silu;
    }
}
