/* matmul_impl.h: internals shared by the matmul files (not API).
 *
 * One blocked GEMM, C[M, N] (=|+=) A[M, K] B[K, N], serves all three Linear
 * products (forward, dX, dW).  Operands are read through strided views, packed
 * into micro-panels, and multiplied by a register-blocked MR x NR micro-kernel:
 *   A micro-panel  fp32: [kc][MM_MR] floats        bf16: [kc/2][MM_MR] uint32 (bf16 pairs)
 *   B micro-panel  fp32: [K][MM_NR] floats         bf16: [K/2][MM_NR] uint32 (bf16 pairs)
 * B is packed whole (all of K x N, zero-padded to a multiple of MM_NR columns and,
 * for bf16, to an even K) so a Linear weight can be packed once and reused.
 * Every output element is owned by exactly one task and summed in a fixed order,
 * so results do not depend on the number of threads or on the schedule.
 */
#ifndef QS_MATMUL_IMPL_H
#define QS_MATMUL_IMPL_H

#include <stddef.h>
#include <stdint.h>

enum {
    MM_MR = 12,   /* micro-tile rows (accumulators: MM_MR x MM_NR/16 zmm = 24) */
    MM_NR = 32,   /* micro-tile columns (two 16-float vectors) */
    MM_KC = 256,  /* K block: A block MM_MC x MM_KC stays in L2, B micro-panel in L1 */
    MM_MC = 96,   /* rows per task (multiple of MM_MR) */
    MM_NC = 1024, /* columns per task (multiple of MM_NR) */
};

/* Which micro-kernel (and therefore which packed formats) a GEMM uses. */
typedef enum {
    MM_KERNEL_C = 0,          /* portable fp32 kernel; used for bf16 on older CPUs */
    MM_KERNEL_AVX512 = 1,     /* AVX-512 FMA fp32 kernel */
    MM_KERNEL_AVX512BF16 = 2, /* vdpbf16ps kernel on bf16 pairs */
} mm_kernel;

/* Element (r, c) of a strided matrix is p[r * rs + c * cs]. */
typedef struct mm_view {
    const float *p;
    ptrdiff_t rs, cs;
} mm_view;

/* A whole B operand packed into MM_NR-column panels (see the header comment). */
typedef struct mm_bpack {
    void *data;           /* float or uint32 (bf16 pairs); qs_malloc'd */
    size_t panel_elems;   /* floats or uint32 per panel */
    size_t bytes;         /* capacity of data */
    int K, N;             /* logical shape */
    mm_kernel kernel;     /* format */
    int round_bf16;       /* fp32 formats only: values rounded to bf16 */
} mm_bpack;

/* How the GEMM starts each output element. */
typedef enum {
    MM_INIT_ZERO = 0,  /* C = A B */
    MM_INIT_BIAS = 1,  /* C = bias[n] + A B */
    MM_INIT_ACCUM = 2, /* C = C + A B */
} mm_init;

/* bf16 round to nearest even, as torch does (NaN -> quiet NaN 0x7FC0). */
static inline uint16_t mm_bf16_bits(float f)
{
    union { float f; uint32_t u; } v = {f};
    if ((v.u & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FC0;
    return (uint16_t)((v.u + 0x7FFFu + ((v.u >> 16) & 1u)) >> 16);
}

static inline float mm_bf16_round(float f)
{
    union { uint32_t u; float f; } v = {(uint32_t)mm_bf16_bits(f) << 16};
    return v.f;
}

/* Kernel choice for a public precision at the current cpu_level(); -1 = use sgemm. */
int mm_kernel_select_impl(int precision);

/* Pack B (K x N view) into bp; reuses bp->data when large enough.  0 or QS_ENOMEM. */
int mm_bpack_fill_impl(mm_bpack *bp, mm_view b, int K, int N, mm_kernel kernel, int round_bf16);
void mm_bpack_free_impl(mm_bpack *bp);

/* Pack rows [i0, i0 + MM_MR) x cols [k0, k0 + kc) of A into one micro-panel
 * (rows past M are zero; for bf16, an odd kc is padded with a zero column). */
void mm_apack_f32_impl(float *dst, mm_view a, int M, int i0, int k0, int kc, int round_bf16);
void mm_apack_bf16_impl(uint32_t *dst, mm_view a, int M, int i0, int k0, int kc);

/* C (M x N, row stride ldc) per init from A (view) and packed B.  0 or QS_ENOMEM
 * (scratch allocation failed; C untouched). */
int mm_gemm_impl(float *c, ptrdiff_t ldc, int M, const mm_view *a, const mm_bpack *bp, mm_init init,
                 const float *bias);

/* Micro-kernels: full MM_MR x MM_NR tile, c[r * ldc + j] (= if !load_c) += sum_k a b.
 * The fp32 kernels sum strictly in k order, one rounding per step (FMA or exact
 * bf16 products), so the C and AVX-512 kernels agree bit for bit on bf16 inputs. */
void mm_kernel_f32_c_impl(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc,
                          int load_c);
void mm_kernel_f32_avx512_impl(int kc, const float *a, const float *b, float *c, ptrdiff_t ldc,
                               int load_c);
/* kp = number of k pairs */
void mm_kernel_bf16_avx512bf16_impl(int kp, const uint32_t *a, const uint32_t *b, float *c,
                                    ptrdiff_t ldc, int load_c);

#endif
