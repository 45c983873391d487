/* matmul_avx512.c: AVX-512 fp32 micro-kernel, up to MM_MR x MM_NR = 12 x 32.
 *
 * 24 zmm accumulators (12 rows x 2 vectors of 16 columns); per k step two
 * vector loads of the packed B row and 12 broadcasts of A: 24 FMAs against 14
 * loads, which keeps both FMA pipes busy (Zen 5, and Intel cores with two
 * 512-bit FMA ports).  A is either a packed panel (row- or k-major) or rows read
 * in place (x itself, row stride = IN); the body is inlined once per layout and
 * row count, so each gets constant strides where it can and a partial tile
 * (mr < 12 rows: the last rows of a batch of 64 or 512) costs only its rows.
 * While a micro-panel of B is used, part of the next one is prefetched into L2:
 * one line every second k step from pf, a quarter of a micro-panel per call
 * (its rows are 128 bytes), so that the row panels of a task share out the next
 * micro-panel's lines (matmul_gemm.c) and a B streamed from memory does not
 * stall the first row panel that reads it.  (Two lines per k step, all of the
 * next micro-panel during the first row panel's call, asked for more lines at
 * once than a core keeps in flight: 1-14% slower.)
 * Each accumulator is one FMA chain in k order (see matmul_impl.h).
 * Rows of A reach this kernel as k-major panels (mm_apanel_kmajor_f32_avx512_impl)
 * when there are more than MM_GEMV_ROWS of them: 12 row pointers do not fit the
 * registers beside the accumulators, and an index reloaded every k step cost
 * ~4% of the products.
 * The same kernel multiplies bf16 pairs widened to fp32 (mm_bf16_fma_impl),
 * under MXCSR FTZ + DAZ (mm_mxcsr_ftz_daz_impl).
 * Call only when cpu_level() >= CPU_LEVEL_AVX512.
 */
#include <immintrin.h>

#include "matmul_tile_avx512_impl.h"
#include "simd_tr16_avx512_impl.h"

static inline __attribute__((always_inline)) void
mm_f32_body(int kc, const float *a, ptrdiff_t rs, ptrdiff_t ks, const float *b, float *c,
            ptrdiff_t ldc, int load_c, const char *pf, const int mr)
{
    __m512 acc[MM_MR][2];
    mm_tile_load_avx512(acc, c, ldc, load_c, mr);
    for (int k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(b + (size_t)k * MM_NR);
        __m512 b1 = _mm512_load_ps(b + (size_t)k * MM_NR + 16);
        if (!(k & 1))
            _mm_prefetch(pf + (size_t)k * 32, _MM_HINT_T1);
        const float *ak = a + k * ks;
#pragma GCC unroll 12
        for (int r = 0; r < mr; r++) {
            __m512 av = _mm512_set1_ps(ak[r * rs]);
            acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
        }
    }
    mm_tile_store_avx512(acc, c, ldc, mr);
}

#define MM_F32_ROWS(R)                                                                   \
    case R:                                                                              \
        if (a.ks == 1)                                                                   \
            mm_f32_body(kc, a.p, a.rs, 1, b, c, ldc, load_c, pf, R);                     \
        else                                                                             \
            mm_f32_body(kc, a.p, 1, a.ks, b, c, ldc, load_c, pf, R);                     \
        break

void mm_kernel_f32_avx512_impl(int kc, mm_apanel a, const float *b, float *c, ptrdiff_t ldc,
                               int load_c, int mr, const void *pf)
{
    switch (mr) {
        MM_F32_ROWS(1);
        MM_F32_ROWS(2);
        MM_F32_ROWS(3);
        MM_F32_ROWS(4);
        MM_F32_ROWS(5);
        MM_F32_ROWS(6);
        MM_F32_ROWS(7);
        MM_F32_ROWS(8);
        MM_F32_ROWS(9);
        MM_F32_ROWS(10);
        MM_F32_ROWS(11);
    default:
        MM_F32_ROWS(12);
    }
}

_Static_assert(MM_MR == 12, "simd_tr16_store12_avx512 writes panels of 12 rows");

void mm_apanel_kmajor_f32_avx512_impl(float *dst, const float *src, ptrdiff_t rs, int mi, int kc)
{
    for (int k0 = 0; k0 < kc; k0 += 16) {
        const int nk = kc - k0 < 16 ? kc - k0 : 16;
        const __mmask16 mk = (__mmask16)(nk >= 16 ? 0xFFFFu : (1u << nk) - 1u);
        __m512 r[16], t[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++)
            r[j] = j < MM_MR && j < mi ? _mm512_maskz_loadu_ps(mk, src + (ptrdiff_t)j * rs + k0)
                                       : _mm512_setzero_ps();
        simd_tr16_avx512(t, r);
        simd_tr16_store12_avx512(dst, k0, t, nk);
    }
}

/* B panels of fp32 values (mm_bpanel_f32's layout, dst[k * MM_NR + j], columns
 * nj .. MM_NR zero) with whole-vector moves: the scalar loops (a memcpy call per
 * 128-byte row, a gather per value for w^T) cost ~6% of an fp32 training step
 * at dim-288, which packs every weight twice and every x once per step. */
_Static_assert(MM_NR == 32, "the B panel packers move two 16-float vectors per k row");

void mm_bpanel_rows_f32_avx512_impl(float *dst, const float *src, ptrdiff_t rs, int nj, int K)
{
    const __mmask16 m0 = (__mmask16)mm_cols_mask16(nj), m1 = (__mmask16)mm_cols_mask16(nj - 16);
    for (int k = 0; k < K; k++) {
        const float *s = src + (ptrdiff_t)k * rs;
        _mm512_storeu_ps(dst + (size_t)k * MM_NR, _mm512_maskz_loadu_ps(m0, s));
        _mm512_storeu_ps(dst + (size_t)k * MM_NR + 16, _mm512_maskz_loadu_ps(m1, s + 16));
    }
}

void mm_bpanel_t_f32_avx512_impl(float *dst, const float *src, ptrdiff_t cs, int nj, int K)
{
    for (int k0 = 0; k0 < K; k0 += 16) {
        const int nk = K - k0 < 16 ? K - k0 : 16;
        const __mmask16 mk = (__mmask16)mm_cols_mask16(nk);
        for (int h = 0; h < 2; h++) { /* columns 16 h .. 16 h + 15 of the panel */
            __m512 r[16], t[16];
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                r[j] = 16 * h + j < nj
                           ? _mm512_maskz_loadu_ps(mk, src + (ptrdiff_t)(16 * h + j) * cs + k0)
                           : _mm512_setzero_ps();
            simd_tr16_avx512(t, r);
            for (int i = 0; i < nk; i++)
                _mm512_storeu_ps(dst + (size_t)(k0 + i) * MM_NR + 16 * h, t[i]);
        }
    }
}

unsigned mm_mxcsr_ftz_daz_impl(void)
{
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
    return csr;
}

void mm_mxcsr_restore_impl(unsigned csr) { _mm_setcsr(csr); }
