/* matmul_gemv_impl.h: C's side of the small-row kernels (matmul_gemv_avx512.c,
 * matmul_gemv_codes_avx512bf16vbmi.c): each row of C is read and written as
 * micro-panels of MM_NR = 32 columns, two vectors of 16, the last of np
 * panels masked to its nj_last columns.  Include only from files built with
 * AVX-512 flags. */
#ifndef QS_MATMUL_GEMV_IMPL_H
#define QS_MATMUL_GEMV_IMPL_H

#include <immintrin.h>

#include "matmul_impl.h"

/* The lane masks of micro-panel q's two vectors. */
static inline void mm_gemv_cmasks(int q, int np, int nj_last, __mmask16 *k0, __mmask16 *k1)
{
    *k0 = q == np - 1 ? (__mmask16)mm_cols_mask16(nj_last) : (__mmask16)0xFFFF;
    *k1 = q == np - 1 ? (__mmask16)mm_cols_mask16(nj_last - 16) : (__mmask16)0xFFFF;
}

/* Micro-panel q of the C row at c: its columns (load_c) or zeros. */
static inline void mm_gemv_cload(const float *c, int q, int np, int nj_last, int load_c,
                                 __m512 *c0, __m512 *c1)
{
    __mmask16 k0, k1;
    mm_gemv_cmasks(q, np, nj_last, &k0, &k1);
    const float *cq = c + q * MM_NR;
    *c0 = load_c ? _mm512_maskz_loadu_ps(k0, cq) : _mm512_setzero_ps();
    *c1 = load_c ? _mm512_maskz_loadu_ps(k1, cq + 16) : _mm512_setzero_ps();
}

static inline void mm_gemv_cstore(float *c, int q, int np, int nj_last, __m512 c0, __m512 c1)
{
    __mmask16 k0, k1;
    mm_gemv_cmasks(q, np, nj_last, &k0, &k1);
    _mm512_mask_storeu_ps(c + q * MM_NR, k0, c0);
    _mm512_mask_storeu_ps(c + q * MM_NR + 16, k1, c1);
}

#endif
