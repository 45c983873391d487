/* layer_residual.c: residual add, out = a + b (out may alias a). */
#include "qs/layers.h"

void residual_forward(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}
