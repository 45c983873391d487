/* matmul_kernel.c: the portable fp32 micro-kernel (mr x MM_NR tile, mr <= MM_MR).
 *
 * Used for MATMUL_BF16 on CPUs without AVX512-BF16 (and without AVX-512): the
 * operands arrive rounded to bf16, so every product a*b is exact in fp32 and
 * `acc + a*b` (two operations; C11 mode keeps the compiler from contracting
 * them) rounds exactly once, like the AVX-512 kernel's FMA.  Both kernels sum
 * strictly in k order, so on bf16 inputs they return the same bits.
 */
#include "matmul_impl.h"

void mm_kernel_f32_c_impl(int kc, mm_apanel ap, const float *b, float *c, ptrdiff_t ldc,
                          int load_c, int mr)
{
    float acc[MM_MR][MM_NR];
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < MM_NR; j++)
            acc[r][j] = load_c ? c[r * ldc + j] : 0.0f;
    const float *a = ap.p;
    for (int k = 0; k < kc; k++) {
        const float *bk = b + (size_t)k * MM_NR;
        for (int r = 0; r < mr; r++) {
            float ark = a[r * ap.rs + k * ap.ks];
            for (int j = 0; j < MM_NR; j++)
                acc[r][j] += ark * bk[j];
        }
    }
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < MM_NR; j++)
            c[r * ldc + j] = acc[r][j];
}
