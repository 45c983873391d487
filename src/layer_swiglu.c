/* layer_swiglu.c: SwiGLU gating, out = silu(gate) * up (see include/qs/layers.h).
 * The backward's portable loop is the reference; with AVX-512 it runs
 * layer_swiglu_avx512.c over fixed chunks (tolerance in layer_bwd_impl.h). */
#include <math.h>

#include "layer_bwd_impl.h"
#include "qs/cpu.h"
#include "qs/layers.h"

#define SWIGLU_CHUNK_ELEMS 4096

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
    if (cpu_level() >= CPU_LEVEL_AVX512) {   /* within layer_bwd_impl.h's tolerance */
        long n_chunks = (ln + SWIGLU_CHUNK_ELEMS - 1) / SWIGLU_CHUNK_ELEMS;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (ln > 65536)
#endif
        for (long c = 0; c < n_chunks; c++) {
            size_t i0 = (size_t)c * SWIGLU_CHUNK_ELEMS;
            size_t len = n - i0 < SWIGLU_CHUNK_ELEMS ? n - i0 : SWIGLU_CHUNK_ELEMS;
            swiglu_backward_avx512_impl(dgate + i0, dup + i0, dout + i0, gate + i0, up + i0, len);
        }
        return;
    }
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
