/* layer_embed.c: token embedding (see include/qs/layers.h). */
#include "qs/layers.h"

void embed_backward(float *dwte, const float *dout, const int32_t *tok, int N, int C)
{
    /* rows of dwte may repeat across n: partition by column so each thread owns its outputs */
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += 64) {
        int c1 = c0 + 64 < C ? c0 + 64 : C;
        for (int n = 0; n < N; n++) {
            float *dw = dwte + (size_t)tok[n] * C;
            const float *g = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++)
                dw[c] += g[c];
        }
    }
}
