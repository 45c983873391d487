/* layer_embed.c: token embedding lookup (see include/qs/layers.h).
 * Token ids are validated by the caller (model_forward) before this runs. */
#include <string.h>

#include "qs/layers.h"

void embed_forward(float *out, const int32_t *tok, const float *wte, int N, int C)
{
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * C, wte + (size_t)tok[n] * C, (size_t)C * sizeof *out);
}
