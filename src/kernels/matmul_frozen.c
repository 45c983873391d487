/* matmul_frozen.c: packs made straight from a bf16-stored weight, and columns
 * read back out of a pack (formats in matmul_impl.h).
 *
 * An inference model keeps each Linear weight only in its forward pack (B =
 * w^T): the loader fills it from the checkpoint's bf16 bits without an fp32
 * copy (mm_bpack_fill_bf16_impl), and the embedding lookup of a tied model
 * reads its rows back from the lm_head's pack (mm_bpack_col_impl).  Both use
 * the exact layouts mm_bpack_fill_impl writes, so a pack filled here holds the
 * same bytes as one filled from the fp32 values of the same bits
 * (tests/test_matmul_frozen.c).
 */
#include <string.h>

#include "matmul_impl.h"
#include "qs/err.h"
#include "qs/mem.h"

/* bf16 bits as the bf16 formats hold them: mm_bf16_bits of their fp32 value
 * (NaN -> 0x7FC0, subnormal -> signed zero, everything else unchanged). */
static inline uint16_t mm_bf16_canon(uint16_t h)
{
    if ((h & 0x7F80u) == 0)
        return (uint16_t)(h & 0x8000u);
    if ((h & 0x7F80u) == 0x7F80u && (h & 0x7Fu))
        return 0x7FC0;
    return h;
}

static inline float mm_bf16_value(uint16_t h)
{
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}

/* Panel p of the pair format: dst[kp * MM_NR + j] = pair(w[j0+j, 2kp], w[j0+j, 2kp+1]),
 * built 16 pairs at a time so the 32 source rows and the panel rows stay in L1. */
static void mm_bpanel_bf16_bits(uint32_t *dst, const uint16_t *w, int K, int N, int j0)
{
    int nj = N - j0 < MM_NR ? N - j0 : MM_NR, kp_n = (K + 1) / 2, kp_start = 0;
    if (nj < MM_NR)
        memset(dst, 0, (size_t)kp_n * MM_NR * sizeof *dst);
    else   /* the pair format is the AVX512-BF16 kernel's: AVX-512 is there */
        kp_start = mm_bpanel_bf16_bits_avx512_impl(dst, w, K, j0);
    for (int kp0 = kp_start; kp0 < kp_n; kp0 += 16) {
        int kp1 = kp0 + 16 < kp_n ? kp0 + 16 : kp_n;
        for (int j = 0; j < nj; j++) {
            const uint16_t *row = w + (size_t)(j0 + j) * K;
            for (int kp = kp0; kp < kp1; kp++) {
                uint16_t lo = mm_bf16_canon(row[2 * kp]);
                uint16_t hi = 2 * kp + 1 < K ? mm_bf16_canon(row[2 * kp + 1]) : 0;
                dst[(size_t)kp * MM_NR + j] = (uint32_t)lo | (uint32_t)hi << 16;
            }
        }
    }
}

/* Panel p of an fp32 format: dst[k * MM_NR + j] = value of B(ks, j0 + j), ks = k
 * (or mm_bf16_order(k), K padded to even, for the bf16 fallback). */
static void mm_bpanel_f32_bits(float *dst, const uint16_t *w, int K, int N, int j0,
                               int round_bf16)
{
    int nj = N - j0 < MM_NR ? N - j0 : MM_NR, k_rows = round_bf16 ? K + (K & 1) : K;
    if (nj < MM_NR || k_rows > K)
        memset(dst, 0, (size_t)k_rows * MM_NR * sizeof *dst);
    for (int j = 0; j < nj; j++) {
        const uint16_t *row = w + (size_t)(j0 + j) * K;
        for (int k = 0; k < k_rows; k++) {
            int ks = round_bf16 ? mm_bf16_order(k) : k;
            if (ks < K)
                dst[(size_t)k * MM_NR + j] =
                    mm_bf16_value(round_bf16 ? mm_bf16_canon(row[ks]) : row[ks]);
        }
    }
}

int mm_bpack_fill_bf16_impl(mm_bpack *bp, const uint16_t *w, int K, int N, mm_kernel kernel,
                            int round_bf16)
{
    int is_bf16 = kernel == MM_KERNEL_AVX512BF16 || kernel == MM_KERNEL_AMX;
    size_t k_rows = mm_bpack_k_rows(K, kernel, round_bf16);
    size_t panel_elems = k_rows * MM_NR, bytes;
    int n_panels = (N + MM_NR - 1) / MM_NR;
    bytes = panel_elems * (size_t)n_panels * sizeof(float);
    int rc = mm_pack_reserve_impl(bp, bytes);
    if (rc)
        return rc;
    bp->panel_elems = panel_elems;
    bp->K = K;
    bp->N = N;
    bp->kernel = kernel;
    bp->round_bf16 = is_bf16 ? 1 : round_bf16;
    bp->row_pairs = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)K * N > ((size_t)1 << 21))
#endif
    for (int p = 0; p < n_panels; p++) {
        if (is_bf16)
            mm_bpanel_bf16_bits((uint32_t *)bp->data + p * panel_elems, w, K, N, p * MM_NR);
        else
            mm_bpanel_f32_bits((float *)bp->data + p * panel_elems, w, K, N, p * MM_NR,
                               round_bf16);
    }
    mm_bpack_pad_impl(bp);
    return 0;
}

void mm_bpack_col_impl(const mm_bpack *bp, int n, float *out)
{
    const int K = bp->K, j = n % MM_NR;
    if (bp->kernel == MM_KERNEL_AVX512BF16 || bp->kernel == MM_KERNEL_AMX) {
        const uint32_t *pan = (const uint32_t *)bp->data + (size_t)(n / MM_NR) * bp->panel_elems;
        for (int kp = 0; kp < (K + 1) / 2; kp++) {
            uint32_t u = pan[(size_t)kp * MM_NR + j];
            out[2 * kp] = mm_bf16_value((uint16_t)u);
            if (2 * kp + 1 < K)
                out[2 * kp + 1] = mm_bf16_value((uint16_t)(u >> 16));
        }
        return;
    }
    const float *pan = (const float *)bp->data + (size_t)(n / MM_NR) * bp->panel_elems;
    if (!bp->round_bf16) {
        for (int k = 0; k < K; k++)
            out[k] = pan[(size_t)k * MM_NR + j];
        return;
    }
    for (int k = 0; k < K + (K & 1); k++)
        if (mm_bf16_order(k) < K)
            out[mm_bf16_order(k)] = pan[(size_t)k * MM_NR + j];
}
