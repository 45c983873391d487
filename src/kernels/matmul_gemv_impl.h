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

/* The mr rows x np micro-panels of C in accumulators acc[r][q][0..1] (the
 * column order of C itself): loaded (or zeroed) before the k loop, stored after. */
#define MM_GEMV_ACC_LOAD(acc, c, ldc, mr, np, nj_last, load_c)                                  \
    _Pragma("GCC unroll 4") for (int r_ = 0; r_ < (mr); r_++)                                   \
        _Pragma("GCC unroll 4") for (int q_ = 0; q_ < (np); q_++)                               \
            mm_gemv_cload((c) + r_ * (ldc), q_, np, nj_last, load_c, &(acc)[r_][q_][0],         \
                          &(acc)[r_][q_][1])
#define MM_GEMV_ACC_STORE(acc, c, ldc, mr, np, nj_last)                                         \
    _Pragma("GCC unroll 4") for (int r_ = 0; r_ < (mr); r_++)                                   \
        _Pragma("GCC unroll 4") for (int q_ = 0; q_ < (np); q_++)                               \
            mm_gemv_cstore((c) + r_ * (ldc), q_, np, nj_last, (acc)[r_][q_][0], (acc)[r_][q_][1])

/* The shapes every few-row kernel is instantiated for, as the cases of a
 * switch on mr * 8 + np: np <= 4 panels for 1-2 rows, <= 2 for 3-4 rows (the
 * accumulators fit the registers); CASE(R, NP) expands to one case. */
#define MM_GEMV_SHAPES(CASE)                                                                     \
    CASE(1, 1);                                                                                  \
    CASE(1, 2);                                                                                  \
    CASE(1, 3);                                                                                  \
    CASE(1, 4);                                                                                  \
    CASE(2, 1);                                                                                  \
    CASE(2, 2);                                                                                  \
    CASE(2, 3);                                                                                  \
    CASE(2, 4);                                                                                  \
    CASE(3, 1);                                                                                  \
    CASE(3, 2);                                                                                  \
    CASE(4, 1);                                                                                  \
default:                                                                                         \
    CASE(4, 2)

#endif
