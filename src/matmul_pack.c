/* matmul_pack.c: operand packing for the blocked GEMM (formats in matmul_impl.h).
 *
 * Packing is where operands change precision: the bf16 paths round each value
 * once, here (round to nearest even), so the micro-kernels only multiply.  B is
 * packed whole, in parallel over its MM_NR-column panels (each thread owns whole
 * panels, so the packed bytes do not depend on the thread count); A is packed one
 * MM_MR x kc micro-panel at a time by the task that uses it.
 * Two access patterns matter and get their own loops: rows contiguous along the
 * packed direction (a row copy) and the transposed case (a strided gather).
 */
#include <string.h>

#include "matmul_impl.h"
#include "qs/err.h"
#include "qs/mem.h"

static inline float mm_view_at(mm_view v, int r, int c)
{
    return v.p[(ptrdiff_t)r * v.rs + (ptrdiff_t)c * v.cs];
}

static inline uint32_t mm_bf16_pair(float lo, float hi)
{
    return (uint32_t)mm_bf16_bits(lo) | ((uint32_t)mm_bf16_bits(hi) << 16);
}

/* One fp32 panel: dst[k * MM_NR + j] = B(k, j0 + j), zero past N. */
static void mm_bpanel_f32(float *dst, mm_view b, int K, int N, int j0, int round_bf16)
{
    int nj = N - j0 < MM_NR ? N - j0 : MM_NR;
    if (nj < MM_NR)
        memset(dst, 0, (size_t)K * MM_NR * sizeof *dst);
    if (b.cs == 1) {
        for (int k = 0; k < K; k++) {
            const float *src = b.p + (ptrdiff_t)k * b.rs + j0;
            float *d = dst + (size_t)k * MM_NR;
            for (int j = 0; j < nj; j++)
                d[j] = round_bf16 ? mm_bf16_round(src[j]) : src[j];
        }
        return;
    }
    /* transposed: walk K in chunks so the MM_NR source rows stay in cache */
    for (int k0 = 0; k0 < K; k0 += 64) {
        int k1 = k0 + 64 < K ? k0 + 64 : K;
        for (int j = 0; j < nj; j++)
            for (int k = k0; k < k1; k++) {
                float v = mm_view_at(b, k, j0 + j);
                dst[(size_t)k * MM_NR + j] = round_bf16 ? mm_bf16_round(v) : v;
            }
    }
}

/* One bf16 panel: dst[kp * MM_NR + j] = pair(B(2kp, j0 + j), B(2kp + 1, j0 + j)). */
static void mm_bpanel_bf16(uint32_t *dst, mm_view b, int K, int N, int j0)
{
    int nj = N - j0 < MM_NR ? N - j0 : MM_NR;
    int kp_n = (K + 1) / 2;
    if (nj < MM_NR)
        memset(dst, 0, (size_t)kp_n * MM_NR * sizeof *dst);
    if (b.cs == 1) {
        for (int kp = 0; kp < kp_n; kp++) {
            const float *r0 = b.p + (ptrdiff_t)(2 * kp) * b.rs + j0;
            const float *r1 = 2 * kp + 1 < K ? r0 + b.rs : NULL;
            uint32_t *d = dst + (size_t)kp * MM_NR;
            for (int j = 0; j < nj; j++)
                d[j] = mm_bf16_pair(r0[j], r1 ? r1[j] : 0.0f);
        }
        return;
    }
    for (int kp0 = 0; kp0 < kp_n; kp0 += 32) {
        int kp1 = kp0 + 32 < kp_n ? kp0 + 32 : kp_n;
        for (int j = 0; j < nj; j++)
            for (int kp = kp0; kp < kp1; kp++) {
                float lo = mm_view_at(b, 2 * kp, j0 + j);
                float hi = 2 * kp + 1 < K ? mm_view_at(b, 2 * kp + 1, j0 + j) : 0.0f;
                dst[(size_t)kp * MM_NR + j] = mm_bf16_pair(lo, hi);
            }
    }
}

int mm_bpack_fill_impl(mm_bpack *bp, mm_view b, int K, int N, mm_kernel kernel, int round_bf16)
{
    int is_bf16 = kernel == MM_KERNEL_AVX512BF16;
    size_t k_rows = is_bf16 ? (size_t)(K + 1) / 2 : (size_t)K;
    size_t panel_elems = k_rows * MM_NR;
    int n_panels = (N + MM_NR - 1) / MM_NR;
    size_t bytes = panel_elems * (size_t)n_panels * sizeof(float); /* uint32 is as wide */
    if (bytes > bp->bytes || !bp->data) {
        void *p = qs_malloc(bytes ? bytes : 64);
        if (!p)
            return QS_ENOMEM;
        qs_free(bp->data);
        bp->data = p;
        bp->bytes = bytes;
    }
    bp->panel_elems = panel_elems;
    bp->K = K;
    bp->N = N;
    bp->kernel = kernel;
    bp->round_bf16 = is_bf16 ? 1 : round_bf16;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)K * N > 65536)
#endif
    for (int p = 0; p < n_panels; p++) {
        if (is_bf16)
            mm_bpanel_bf16((uint32_t *)bp->data + p * panel_elems, b, K, N, p * MM_NR);
        else
            mm_bpanel_f32((float *)bp->data + p * panel_elems, b, K, N, p * MM_NR, round_bf16);
    }
    return 0;
}

void mm_bpack_free_impl(mm_bpack *bp)
{
    if (!bp)
        return;
    qs_free(bp->data);
    memset(bp, 0, sizeof *bp);
}

void mm_apack_f32_impl(float *dst, mm_view a, int M, int i0, int k0, int kc, int round_bf16)
{
    int mi = M - i0 < MM_MR ? M - i0 : MM_MR;
    if (a.rs == 1) {
        for (int k = 0; k < kc; k++) {
            const float *src = a.p + (ptrdiff_t)(k0 + k) * a.cs + i0;
            float *d = dst + (size_t)k * MM_MR;
            for (int r = 0; r < mi; r++)
                d[r] = round_bf16 ? mm_bf16_round(src[r]) : src[r];
            for (int r = mi; r < MM_MR; r++)
                d[r] = 0.0f;
        }
        return;
    }
    for (int r = 0; r < MM_MR; r++) {
        if (r >= mi) {
            for (int k = 0; k < kc; k++)
                dst[(size_t)k * MM_MR + r] = 0.0f;
            continue;
        }
        const float *src = a.p + (ptrdiff_t)(i0 + r) * a.rs;
        for (int k = 0; k < kc; k++) {
            float v = src[(ptrdiff_t)(k0 + k) * a.cs];
            dst[(size_t)k * MM_MR + r] = round_bf16 ? mm_bf16_round(v) : v;
        }
    }
}

void mm_apack_bf16_impl(uint32_t *dst, mm_view a, int M, int i0, int k0, int kc)
{
    int mi = M - i0 < MM_MR ? M - i0 : MM_MR;
    int kp_n = (kc + 1) / 2;
    for (int r = 0; r < MM_MR; r++) {
        if (r >= mi) {
            for (int kp = 0; kp < kp_n; kp++)
                dst[(size_t)kp * MM_MR + r] = 0;
            continue;
        }
        for (int kp = 0; kp < kp_n; kp++) {
            int k = k0 + 2 * kp;
            float lo = mm_view_at(a, i0 + r, k);
            float hi = 2 * kp + 1 < kc ? mm_view_at(a, i0 + r, k + 1) : 0.0f;
            dst[(size_t)kp * MM_MR + r] = mm_bf16_pair(lo, hi);
        }
    }
}
