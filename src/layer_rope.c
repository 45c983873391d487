/* layer_rope.c: rotary position embedding, HF half-split form (see include/qs/layers.h). */
#include "qs/layers.h"

void rope_backward(float *dx, const int32_t *pos, const rope_table *t, int N, int n_heads)
{
    /* forward: (x1, x2) -> (x1 c - x2 s, x2 c + x1 s); its transpose rotates by -angle */
    int hd = t->head_dim, half = hd / 2;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *cs = t->cos + (size_t)pos[n] * half, *sn = t->sin + (size_t)pos[n] * half;
        for (int h = 0; h < n_heads; h++) {
            float *v = dx + ((size_t)n * n_heads + h) * hd;
            for (int i = 0; i < half; i++) {
                float g1 = v[i], g2 = v[i + half];
                v[i] = g1 * cs[i] + g2 * sn[i];
                v[i + half] = g2 * cs[i] - g1 * sn[i];
            }
        }
    }
}
