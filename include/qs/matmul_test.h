/* matmul_test.h: NOT API.  Matmul internals declared for tests and benches
 * (tests/test_matmul_bf16fma.c, tests/test_matmul_gemv.c, tests/test_matmul_dout.c,
 * tests/bench/bench_matmul.c),
 * which run both micro-kernels behind the AVX512-BF16 formats on the same data.  Library code
 * outside src/kernels never calls these; names and signatures may change
 * without notice.
 */
#ifndef QS_MATMUL_TEST_H
#define QS_MATMUL_TEST_H

#include <stddef.h>
#include <stdint.h>

/* Which micro-kernel multiplies bf16 pairs (see src/kernels/matmul_impl.h): -1 =
 * by the CPU (the default), 0 = vdpbf16ps, 1 = the FMA kernel on widened pairs
 * (same bits).  Call from serial code, between matmul calls. */
void mm_bf16_fma_force_impl(int mode);
/* 1 when the FMA kernel multiplies bf16 pairs now (AVX512-BF16 CPUs). */
int mm_bf16_fma_impl(void);
/* Which kernel multiplies 1-4 rows by a HiF8 code pack of the AVX512-BF16
 * formats: -1 = by the CPU (the default: codes decoded in registers and
 * vdpbf16ps where the CPU has AVX-512 VBMI), 0 = codes decoded into L1 and the
 * FMA kernel (same bits).  Call from serial code, between matmul calls. */
void mm_codes_gemv_force_impl(int mode);
/* Whether 1-4 rows times a bf16 pair pack on vdpbf16ps run on the few-row
 * kernel (1, the default) or the blocked kernel (0; same bits).  Call from
 * serial code, between matmul calls. */
void mm_gemv_pairs_force_impl(int on);
/* 1 when code packs' few-row products run on the in-register kernel now: the
 * CPU has AVX-512 VBMI, cpu_level() is avx512bf16 and mode 0 is not forced
 * (known once a code pack exists). */
int mm_codes_gemv_dp_impl(void);

/* MATMUL_BF16_AMX: the bytes of converted A one pass over K keeps (the rows'
 * A is split into passes of whole k tiles beyond that); 0 = the default.
 * Call from serial code, between matmul calls. */
void mm_amx_pass_bytes_force_impl(size_t bytes);
/* MATMUL_BF16_AMX's plan for M rows x K x n_cols (every product of a call):
 * groups of *group_rows rows (a multiple of 32; 0: all rows as one), each
 * taking K in *n_pass passes so that a pass's A fits the pass bytes, at the
 * group size that moves the fewest bytes (C stored and loaded again between
 * passes, B read once more per group). */
void mm_amx_plan_impl(int M, int K, long n_cols, int *n_pass, int *group_rows);

/* Pair row kp of width-W bf16 pair panels panel_elems apart from the rows r0
 * and r1 (NULL: zeros), columns c < N (next: prefetch distance in floats, or 0),
 * and the rows' bf16 into d0 / d1 when
 * d0 is not NULL (src/kernels/matmul_impl.h; AVX512-BF16 CPUs only). */
void mm_pairs_scatter_avx512bf16_impl(uint32_t *dst, size_t panel_elems, int W, int kp,
                                      const float *r0, const float *r1, int N, ptrdiff_t next,
                                      uint16_t *d0, uint16_t *d1);

#endif
