/* layer_embed.c: token embedding lookup (see include/qs/layers.h).
 * Token ids are validated by the caller (model_forward) before this runs. */
#include <string.h>

#include "qs/layers.h"

void embed_forward(float *out, const int32_t *tok, const float *wte, int N, int C)
{
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * C, wte + (size_t)tok[n] * C, (size_t)C * sizeof *out);
}

void embed_backward(float *dwte, const float *dout, const int32_t *tok, int N, int C)
{
    /* rows of dwte may repeat across n: partition by column so each thread owns its
     * outputs, in blocks of 16 (a cache line; C = 288 gives 18, balanced over 2 threads) */
    enum { EMBED_BWD_COLS = 16 };
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)N * C > 65536)
#endif
    for (int c0 = 0; c0 < C; c0 += EMBED_BWD_COLS) {
        int c1 = c0 + EMBED_BWD_COLS < C ? c0 + EMBED_BWD_COLS : C;
        for (int n = 0; n < N; n++) {
            float *dw = dwte + (size_t)tok[n] * C;
            const float *g = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++)
                dw[c] += g[c];
        }
    }
}
