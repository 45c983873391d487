/* layer_swiglu.c: SwiGLU gating, out = silu(gate) * up (see include/qs/layers.h). */
#include <math.h>

#include "qs/layers.h"

void swiglu_forward(float *out, const float *gate, const float *up, size_t n)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
