/* layer_rope.c: rotary position embedding, Hugging Face "rotate_half" layout
 * (see include/qs/layers.h).
 *
 * inv_freq[i] = theta^(-2i/hd), then rope_scaling as transformers'
 * modeling_rope_utils does it: linear divides every frequency by factor;
 * llama3 divides low frequencies (wavelength > orig/low_freq_factor) by factor,
 * keeps high ones (wavelength < orig/high_freq_factor) and blends in between.
 * Angles pos * inv_freq are computed in double and stored as float, so tables
 * are as exact as fp32 allows at every position (HF computes them in fp32).
 */
#include <math.h>
#include <string.h>

#include "qs/err.h"
#include "qs/layers.h"
#include "qs/mem.h"

static double rope_inv_freq(int i, int hd, double theta, const rope_scaling *s)
{
    double f = pow(theta, -2.0 * i / hd);
    if (!s || s->type == ROPE_SCALING_NONE)
        return f;
    if (s->type == ROPE_SCALING_LINEAR)
        return f / s->factor;
    /* llama3 */
    double wavelen = 2.0 * M_PI / f;
    double low_wl = s->original_max_position / s->low_freq_factor;
    double high_wl = s->original_max_position / s->high_freq_factor;
    if (wavelen > low_wl)
        return f / s->factor;
    if (wavelen < high_wl)
        return f;
    double smooth = (s->original_max_position / wavelen - s->low_freq_factor) /
                    (s->high_freq_factor - s->low_freq_factor);
    return (1.0 - smooth) * f / s->factor + smooth * f;
}

size_t rope_table_bytes(int max_pos, int head_dim)
{
    return 2 * (size_t)(max_pos > 0 ? max_pos : 0) * (size_t)(head_dim > 0 ? head_dim / 2 : 0) *
           sizeof(float);
}

int rope_table_init(rope_table *t, int max_pos, int head_dim, double theta,
                    const rope_scaling *scaling)
{
    memset(t, 0, sizeof *t);
    if (max_pos <= 0 || head_dim <= 0 || head_dim % 2)
        return QS_EINVAL;
    int half = head_dim / 2;
    size_t n = rope_table_bytes(max_pos, head_dim) / 2 / sizeof *t->cos;
    t->cos = qs_malloc(n * sizeof *t->cos);
    t->sin = qs_malloc(n * sizeof *t->sin);
    if (!t->cos || !t->sin) {
        rope_table_free(t);
        return QS_ENOMEM;
    }
    t->max_pos = max_pos;
    t->head_dim = head_dim;
    for (int i = 0; i < half; i++) {
        double f = rope_inv_freq(i, head_dim, theta, scaling);
        for (int p = 0; p < max_pos; p++) {
            double a = (double)p * f;
            t->cos[(size_t)p * half + i] = (float)cos(a);
            t->sin[(size_t)p * half + i] = (float)sin(a);
        }
    }
    return 0;
}

void rope_table_free(rope_table *t)
{
    qs_free(t->cos);
    qs_free(t->sin);
    memset(t, 0, sizeof *t);
}

static void rope_rotate_row(float *x, const int32_t *pos, const rope_table *t, int n, int n_heads,
                            float sign)
{
    int hd = t->head_dim, half = hd / 2;
    const float *c = t->cos + (size_t)pos[n] * half, *s = t->sin + (size_t)pos[n] * half;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + ((size_t)n * n_heads + h) * hd;
        for (int i = 0; i < half; i++) {
            float a = v[i], b = v[i + half], sn = sign * s[i];
            v[i] = a * c[i] - b * sn;
            v[i + half] = b * c[i] + a * sn;
        }
    }
}

/* Rotates each (x1, x2) half pair of every head by sign * angle:
 * (x1 c - x2 sn, x2 c + x1 sn), sn = sign * s (exact for sign = +-1). */
static void rope_rotate(float *x, const int32_t *pos, const rope_table *t, int N, int n_heads,
                        float sign, int threaded)
{
    if (threaded) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
        for (int n = 0; n < N; n++)
            rope_rotate_row(x, pos, t, n, n_heads, sign);
    } else {
        /* serial: no OpenMP region at all (an if(0) region still costs 1-3 us) */
        for (int n = 0; n < N; n++)
            rope_rotate_row(x, pos, t, n, n_heads, sign);
    }
}

void rope_forward(float *x, const int32_t *pos, const rope_table *t, int N, int n_heads)
{
    rope_rotate(x, pos, t, N, n_heads, 1.0f, N > 16);
}

void rope_backward(float *dx, const int32_t *pos, const rope_table *t, int N, int n_heads)
{
    /* the transpose of the rotation rotates by -angle */
    rope_rotate(dx, pos, t, N, n_heads, -1.0f, (size_t)N * n_heads * t->head_dim > 65536);
}
