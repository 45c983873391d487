/* layer_swiglu.c: SwiGLU gating, out = silu(gate) * up (see include/qs/layers.h).
 * The forward runs a vector exp with AVX-512 (layer_swiglu_avx512.c), threads
 * owning chunks of a multiple of 16 elements. */
#include <math.h>

#include "layer_bwd_impl.h"
#include "layer_elem_impl.h"
#include "qs/cpu.h"
#include "qs/layers.h"

#ifdef _OPENMP
#include <omp.h>
#endif

enum { SWIGLU_CHUNK = 4096 };

/* The portable forward of one element: silu(g) * u = g / (1 + e^-g) * u. */
static inline float swiglu_ref(float g, float u)
{
    return g / (1.0f + expf(-g)) * u;
}

void swiglu_forward(float *out, const float *gate, const float *up, size_t n)
{
    if (cpu_level() >= CPU_LEVEL_AVX512) {
        long n_chunks = (long)((n + SWIGLU_CHUNK - 1) / SWIGLU_CHUNK);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n > 65536)
#endif
        for (long ch = 0; ch < n_chunks; ch++) {
            size_t i0 = (size_t)ch * SWIGLU_CHUNK;
            size_t len = n - i0 < SWIGLU_CHUNK ? n - i0 : SWIGLU_CHUNK;
            swiglu_avx512_impl(out + i0, gate + i0, up + i0, len);
        }
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n > 65536)
#endif
    for (size_t i = 0; i < n; i++)
        out[i] = swiglu_ref(gate[i], up[i]);
}

static void swiglu_row(float *out, const float *gate, const float *up, int n, int simd)
{
    if (simd) {
        swiglu_avx512_impl(out, gate, up, (size_t)n);
        return;
    }
    for (int i = 0; i < n; i++)
        out[i] = swiglu_ref(gate[i], up[i]);
}

void swiglu_forward_block(float *out, const float *gate, const float *up, int rows, int cols,
                          size_t ld)
{
    const int simd = cpu_level() >= CPU_LEVEL_AVX512;
    int outer = 1;
#ifdef _OPENMP
    outer = !omp_in_parallel();
#endif
    if (outer && (size_t)rows * cols > 65536) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
        for (int r = 0; r < rows; r++)
            swiglu_row(out + r * ld, gate + r * ld, up + r * ld, cols, simd);
    } else {
        /* serial (a GEMM epilogue, inside its region): no nested OpenMP region,
         * which cost ~2.7 us a call, ~300 calls a token in a 1B decode */
        for (int r = 0; r < rows; r++)
            swiglu_row(out + r * ld, gate + r * ld, up + r * ld, cols, simd);
    }
}

void swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                     const float *up, size_t n)
{
    /* The portable loop below is the reference; with AVX-512, threads own fixed
     * chunks of layer_swiglu_bwd_avx512.c (tolerance in layer_bwd_impl.h). */
    enum { SWIGLU_BWD_CHUNK = 4096 };
    long ln = (long)n;
    if (cpu_level() >= CPU_LEVEL_AVX512) {
        long n_chunks = (ln + SWIGLU_BWD_CHUNK - 1) / SWIGLU_BWD_CHUNK;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (ln > 65536)
#endif
        for (long c = 0; c < n_chunks; c++) {
            size_t i0 = (size_t)c * SWIGLU_BWD_CHUNK;
            size_t len = n - i0 < SWIGLU_BWD_CHUNK ? n - i0 : SWIGLU_BWD_CHUNK;
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
        dgate[i] = dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig));
        dup[i] = dout[i] * silu;
    }
}
