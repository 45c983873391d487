/* layer_swiglu.c: SwiGLU gating of the MLP (see include/qs/layers.h). */
#include "qs/layers.h"

#include <math.h>

void swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                     const float *up, size_t n)
{
    long ln = (long)n;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < ln; i++) {
        float g = gate[i];
        float sig = 1.0f / (1.0f + expf(-g));
        float silu = g * sig;
        dgate[i] += dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
        dup[i] += dout[i] * silu;
    }
}
