/* matmul_pack.c: operand packing for the blocked GEMM (formats in matmul_impl.h).
 *
 * Packing is where operands change precision: the bf16 paths round each value
 * once, here (round to nearest even), so the micro-kernels only multiply.  B is
 * packed whole, in parallel over its MM_NR-column panels, or for bf16 sources with
 * contiguous rows in one sweep over those rows (threads own disjoint panels or k
 * pairs, so the packed bytes do not depend on the thread count).  A is packed one
 * MM_MR x kc micro-panel at a time by the task that uses it, except dW's dout^T
 * in bf16, which is packed whole like B (mm_apack_whole_impl), and forward's x
 * in bf16, converted once per call into bf16 rows (mm_apack_rows_*) rather than
 * once per column block.  A dout handed over in row pairs (matmul_dout_*, the
 * lm_head's dlogits) goes into both of its bf16 forms at once, each value
 * converted once: bf16 rows for dx, k-pair panels for dw (mm_dout_*).
 * Two access patterns matter and get their own loops: rows contiguous along the
 * packed direction (a row copy) and the transposed case (a strided gather).
 * bf16 operands only exist for the AVX512-BF16 kernel, so their conversions use
 * the vector helpers of matmul_avx512bf16.c (same bits as mm_bf16_bits).
 * fp32 A rows that are contiguous are not packed at all: the kernel reads them
 * in place (row stride = the matrix's), which saves a full pass over x.
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

/* One fp32 panel: dst[k * MM_NR + j] = B(k, j0 + j), zero past N.  For the bf16
 * fallback (round_bf16) rows are rounded, in mm_bf16_order, K padded to even. */
static void mm_bpanel_f32(float *dst, mm_view b, int K, int N, int j0, int round_bf16)
{
    int nj = N - j0 < MM_NR ? N - j0 : MM_NR;
    int k_rows = round_bf16 ? K + (K & 1) : K;
    if (nj < MM_NR || k_rows > K)
        memset(dst, 0, (size_t)k_rows * MM_NR * sizeof *dst);
    if (round_bf16) {
        for (int k = 0; k < k_rows; k++) {
            int ks = mm_bf16_order(k);
            float *d = dst + (size_t)k * MM_NR;
            for (int j = 0; ks < K && j < nj; j++)
                d[j] = mm_bf16_round(mm_view_at(b, ks, j0 + j));
        }
        return;
    }
    if (b.cs == 1) {
        for (int k = 0; k < K; k++)
            memcpy(dst + (size_t)k * MM_NR, b.p + (ptrdiff_t)k * b.rs + j0,
                   (size_t)nj * sizeof *dst);
        return;
    }
    /* transposed: walk K in chunks so the MM_NR source rows stay in cache */
    for (int k0 = 0; k0 < K; k0 += 64) {
        int k1 = k0 + 64 < K ? k0 + 64 : K;
        for (int j = 0; j < nj; j++)
            for (int k = k0; k < k1; k++)
                dst[(size_t)k * MM_NR + j] = mm_view_at(b, k, j0 + j);
    }
}

/* One bf16 panel: dst[kp * MM_NR + j] = pair(B(2kp, j0 + j), B(2kp + 1, j0 + j)). */
static void mm_bpanel_bf16(uint32_t *dst, mm_view b, int K, int N, int j0)
{
    int nj = N - j0 < MM_NR ? N - j0 : MM_NR;
    int kp_n = (K + 1) / 2;
    if (b.rs == 1) { /* w^T: each column of B is a contiguous row of w (columns nj.. zero) */
        mm_bpanel_bf16_t_avx512bf16_impl(dst, b.p + (ptrdiff_t)j0 * b.cs, b.cs, nj, K);
        return;
    }
    if (nj < MM_NR)
        memset(dst, 0, (size_t)kp_n * MM_NR * sizeof *dst);
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

int mm_pack_reserve_impl(mm_bpack *bp, size_t bytes)
{
    if (bytes <= bp->bytes && bp->data)
        return 0;
    void *p = qs_malloc(bytes ? bytes : 64);
    if (!p)
        return QS_ENOMEM;
    qs_free(bp->data);
    bp->data = p;
    bp->bytes = bytes;
    return 0;
}

/* Below this many elements B is packed by the calling thread: a parallel region
 * costs more than the copy (and far more when the cores are shared).  Training
 * packs each step's x for dW and each updated weight (768 x 768 at dim-768,
 * ~0.6 M elements): with 2^21 here they ran on one thread while the other
 * waited, ~5% of a bf16-amx step at dim-768. */
enum { MM_PACK_PARALLEL_ELEMS = 1 << 16 };

/* bf16 pairs of a row-contiguous operand into width-W panels, sweeping the
 * source rows in order (two rows per k pair, converted in one vector pass and
 * stored from the registers into the panels, mm_pairs_scatter_avx512bf16_impl):
 * sequential reads, whatever the panel width.  dst panel p: [kp][W], columns
 * past N zero.  (It converted chunks into a buffer and memcpy'd each panel's
 * piece, without prefetch: the pack of a 1024 x 288 x took 72 us, now 27; of
 * its dout^T, W = MM_MR, 44 -> 30; 1024 x 2048: 403 -> 290 and 393 -> 252.) */
static void mm_pack_bf16_rowsweep(uint32_t *dst, size_t panel_elems, int W, mm_view b, int K,
                                  int N)
{
    int kp_n = (K + 1) / 2, n_panels = (N + W - 1) / W;
    if (N % W)
        memset(dst + (size_t)(n_panels - 1) * panel_elems, 0, panel_elems * sizeof *dst);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)K * N > MM_PACK_PARALLEL_ELEMS)
#endif
    for (int kp = 0; kp < kp_n; kp++) {
        const float *r0 = b.p + (ptrdiff_t)(2 * kp) * b.rs;
        mm_pairs_scatter_avx512bf16_impl(dst, panel_elems, W, kp, r0,
                                         2 * kp + 1 < K ? r0 + b.rs : NULL, N,
                                         2 * kp + 3 < K ? 2 * b.rs : 0, NULL, NULL);
    }
}

/* Shape of a whole k-major A pack (M x K as [K/2][MM_MR] pair panels). */
static int mm_apack_whole_reserve(mm_bpack *ap, int M, int K)
{
    size_t panel_elems = (size_t)(K + 1) / 2 * MM_MR;
    int n_panels = (M + MM_MR - 1) / MM_MR;
    if (mm_pack_reserve_impl(ap, panel_elems * (size_t)n_panels * sizeof(uint32_t)) != 0)
        return QS_ENOMEM;
    ap->panel_elems = panel_elems;
    ap->K = K;
    ap->N = M;
    ap->kernel = MM_KERNEL_AVX512BF16;
    ap->round_bf16 = 1;
    ap->row_pairs = 0;
    return 0;
}

int mm_apack_whole_impl(mm_bpack *ap, mm_view a, int M, int K)
{
    if (mm_apack_whole_reserve(ap, M, K) != 0)
        return QS_ENOMEM;
    /* A(m, k) = a.p[m + k * a.cs]: A^T is row-contiguous with rows k */
    mm_view at = {a.p, a.cs, 1};
    mm_pack_bf16_rowsweep(ap->data, ap->panel_elems, MM_MR, at, K, M);
    return 0;
}

/* Row stride (pairs) of a row pack: K/2 rounded up to 16 pairs (64 bytes),
 * then to an odd multiple of 64 bytes. */
static ptrdiff_t mm_apack_row_pairs(int K)
{
    ptrdiff_t pairs = ((ptrdiff_t)(K + 1) / 2 + 15) / 16 * 16;
    return (pairs / 16) % 2 ? pairs : pairs + 16;
}

size_t mm_apack_rows_bytes_impl(int M, int K)
{
    size_t rows = (size_t)(M + MM_MR - 1) / MM_MR * MM_MR;
    return rows * (size_t)mm_apack_row_pairs(K) * sizeof(uint32_t);
}

int mm_apack_rows_reserve_impl(mm_bpack *ap, int M, int K)
{
    if (mm_pack_reserve_impl(ap, mm_apack_rows_bytes_impl(M, K)) != 0)
        return QS_ENOMEM;
    ap->panel_elems = (size_t)MM_MR * (size_t)mm_apack_row_pairs(K);
    ap->row_pairs = mm_apack_row_pairs(K);
    ap->K = K;
    ap->N = M;
    ap->kernel = MM_KERNEL_AVX512BF16;
    ap->round_bf16 = 1;
    return 0;
}

int mm_apack_f32_reserve_impl(mm_bpack *ap, int M, int K)
{
    size_t panels = (size_t)(M + MM_MR - 1) / MM_MR;
    if (mm_pack_reserve_impl(ap, panels * MM_MR * (size_t)K * sizeof(float)) != 0)
        return QS_ENOMEM;
    ap->panel_elems = (size_t)MM_MR * (size_t)K;
    ap->row_pairs = 0;
    ap->K = K;
    ap->N = M;
    ap->kernel = MM_KERNEL_AVX512;
    ap->round_bf16 = 0;
    ap->codes = 0;
    return 0;
}

void mm_apack_rows_panel_impl(mm_bpack *ap, mm_view a, int p)
{
    if (ap->kernel == MM_KERNEL_AVX512) { /* fp32 k-major panels (rows past N zero) */
        int mi = ap->N - p * MM_MR < MM_MR ? ap->N - p * MM_MR : MM_MR;
        mm_apanel_kmajor_f32_avx512_impl((float *)ap->data + (size_t)p * ap->panel_elems,
                                         a.p + (ptrdiff_t)p * MM_MR * a.rs, a.rs, mi, ap->K);
        return;
    }
    int K = ap->K, K2 = K + (K & 1);
    for (int r = 0; r < MM_MR; r++) {
        int m = p * MM_MR + r;
        uint16_t *d = (uint16_t *)((uint32_t *)ap->data + (size_t)m * ap->row_pairs);
        if (m >= ap->N) {
            memset(d, 0, (size_t)K2 * sizeof *d);
            continue;
        }
        mm_bf16_row_avx512bf16_impl(d, a.p + (ptrdiff_t)m * a.rs, K);
        if (K & 1)
            d[K] = 0;
    }
}

int mm_dout_reserve_impl(mm_bpack *rows, mm_bpack *pairs, int N, int O)
{
    if (mm_apack_rows_reserve_impl(rows, N, O) != 0 || mm_apack_whole_reserve(pairs, O, N) != 0)
        return QS_ENOMEM;
    /* what the stores never write: rows N.. of the row pack (up to a whole
     * micro-panel), columns past O of the last pair panel */
    int m_end = (N + MM_MR - 1) / MM_MR * MM_MR;
    for (int m = N; m < m_end; m++)
        memset((uint32_t *)rows->data + (size_t)m * rows->row_pairs, 0,
               (size_t)(O + 1) / 2 * sizeof(uint32_t));
    if (O % MM_MR)
        memset((uint32_t *)pairs->data + (size_t)(O / MM_MR) * pairs->panel_elems, 0,
               pairs->panel_elems * sizeof(uint32_t));
    return 0;
}

void mm_dout_store_impl(mm_bpack *rows, mm_bpack *pairs, int n0, const float *r0,
                        const float *r1)
{
    int O = rows->K;
    uint16_t *d0 = (uint16_t *)((uint32_t *)rows->data + (size_t)n0 * rows->row_pairs);
    uint16_t *d1 = d0 + 2 * rows->row_pairs;
    mm_pairs_scatter_avx512bf16_impl(pairs->data, pairs->panel_elems, MM_MR, n0 / 2, r0, r1, O,
                                     0, d0, r1 ? d1 : NULL);
    if (O & 1) {
        d0[O] = 0;
        if (r1)
            d1[O] = 0;
    }
}

void mm_bpack_pad_impl(mm_bpack *bp)
{
    size_t kp = (size_t)(bp->K + 1) / 2, rows = bp->panel_elems / MM_NR;
    int n_panels = (bp->N + MM_NR - 1) / MM_NR;
    if (bp->kernel != MM_KERNEL_AMX || rows == kp)
        return;
    for (int p = 0; p < n_panels; p++)
        memset((uint32_t *)bp->data + (size_t)p * bp->panel_elems + kp * MM_NR, 0,
               (rows - kp) * MM_NR * sizeof(uint32_t));
}

int mm_bpack_fill_impl(mm_bpack *bp, mm_view b, int K, int N, mm_kernel kernel, int round_bf16)
{
    int is_bf16 = kernel == MM_KERNEL_AVX512BF16 || kernel == MM_KERNEL_AMX;
    size_t k_rows = mm_bpack_k_rows(K, kernel, round_bf16);
    size_t panel_elems = k_rows * MM_NR;
    int n_panels = (N + MM_NR - 1) / MM_NR;
    /* uint32 (bf16 pairs) is as wide as float */
    if (mm_pack_reserve_impl(bp, panel_elems * (size_t)n_panels * sizeof(float)) != 0)
        return QS_ENOMEM;
    bp->panel_elems = panel_elems;
    bp->K = K;
    bp->N = N;
    bp->kernel = kernel;
    bp->round_bf16 = is_bf16 ? 1 : round_bf16;
    bp->codes = 0;
    if (is_bf16 && b.cs == 1) {
        mm_pack_bf16_rowsweep(bp->data, panel_elems, MM_NR, b, K, N);
        mm_bpack_pad_impl(bp);
        return 0;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)K * N > MM_PACK_PARALLEL_ELEMS)
#endif
    for (int p = 0; p < n_panels; p++) {
        int j0 = p * MM_NR, nj = N - j0 < MM_NR ? N - j0 : MM_NR;
        float *dst = (float *)bp->data + p * panel_elems;
        if (is_bf16)
            mm_bpanel_bf16((uint32_t *)bp->data + p * panel_elems, b, K, N, j0);
        else if (kernel == MM_KERNEL_AVX512 && !round_bf16 && b.cs == 1)
            mm_bpanel_rows_f32_avx512_impl(dst, b.p + j0, b.rs, nj, K);
        else if (kernel == MM_KERNEL_AVX512 && !round_bf16 && b.rs == 1)
            mm_bpanel_t_f32_avx512_impl(dst, b.p + (ptrdiff_t)j0 * b.cs, b.cs, nj, K);
        else
            mm_bpanel_f32(dst, b, K, N, j0, round_bf16);
    }
    mm_bpack_pad_impl(bp);
    return 0;
}

void mm_bpack_free_impl(mm_bpack *bp)
{
    if (!bp)
        return;
    qs_free(bp->data);
    memset(bp, 0, sizeof *bp);
}

/* Row-major panel: dst row r = A(i0 + r, k0 .. k0 + kc), row stride ld floats
 * (bf16: ld pairs = 2 ld bf16, kc <= 2 ld). */
static mm_apanel mm_apanel_rows(void *dst, ptrdiff_t ld, mm_view a, int mi, int i0, int k0,
                                int kc, mm_afmt fmt)
{
    if (fmt == MM_AFMT_BF16) {
        uint16_t *d = dst;
        int kc2 = kc + (kc & 1);
        for (int r = 0; r < MM_MR; r++) {
            uint16_t *dr = d + (size_t)r * 2 * ld;
            if (r < mi)
                mm_bf16_row_avx512bf16_impl(dr, a.p + (ptrdiff_t)(i0 + r) * a.rs + k0, kc);
            else
                memset(dr, 0, (size_t)kc2 * sizeof *dr);
            if (kc & 1)
                dr[kc] = 0;
        }
        return (mm_apanel){dst, ld, 1};
    }
    float *d = dst;
    for (int r = 0; r < MM_MR; r++) {
        float *dr = d + (size_t)r * ld;
        const float *src = a.p + (ptrdiff_t)(i0 + r) * a.rs + k0;
        if (r >= mi)
            memset(dr, 0, (size_t)(kc + (kc & 1)) * sizeof *dr);
        else if (fmt == MM_AFMT_F32_BF16)
            for (int k = 0; k < kc + (kc & 1); k++) {
                int ks = mm_bf16_order(k);
                dr[k] = ks < kc ? mm_bf16_round(src[ks]) : 0.0f;
            }
        else
            memcpy(dr, src, (size_t)kc * sizeof *dr);
    }
    return (mm_apanel){dst, ld, 1};
}

/* k-major panel: dst[k][r] (pairs for bf16), for A whose columns are contiguous
 * (rs == 1, dW's dout^T) or arbitrary strides. */
static mm_apanel mm_apanel_cols(void *dst, mm_view a, int mi, int i0, int k0, int kc,
                                mm_afmt fmt)
{
    if (fmt == MM_AFMT_BF16) {
        uint32_t *d = dst;
        int kp_n = (kc + 1) / 2;
        float lo[MM_MR], hi[MM_MR];
        for (int kp = 0; kp < kp_n; kp++) {
            int k = k0 + 2 * kp, has_hi = 2 * kp + 1 < kc;
            if (a.rs == 1 && mi == MM_MR) { /* columns of A are contiguous */
                const float *c0 = a.p + (ptrdiff_t)k * a.cs + i0;
                mm_bf16_pairs_avx512bf16_impl(d + (size_t)kp * MM_MR, c0, has_hi ? c0 + a.cs : NULL,
                                              MM_MR);
                continue;
            }
            for (int r = 0; r < MM_MR; r++) {
                lo[r] = r < mi ? mm_view_at(a, i0 + r, k) : 0.0f;
                hi[r] = r < mi && has_hi ? mm_view_at(a, i0 + r, k + 1) : 0.0f;
            }
            mm_bf16_pairs_avx512bf16_impl(d + (size_t)kp * MM_MR, lo, hi, MM_MR);
        }
        return (mm_apanel){dst, 1, MM_MR};
    }
    float *d = dst;
    if (a.rs == 1 && mi == MM_MR && fmt == MM_AFMT_F32) {
        for (int k = 0; k < kc; k++)
            memcpy(d + (size_t)k * MM_MR, a.p + (ptrdiff_t)(k0 + k) * a.cs + i0, MM_MR * sizeof *d);
        return (mm_apanel){dst, 1, MM_MR};
    }
    int rounded = fmt == MM_AFMT_F32_BF16;
    for (int k = 0; k < kc + (rounded & kc); k++) {
        float *dk = d + (size_t)k * MM_MR;
        int ks = rounded ? mm_bf16_order(k) : k;
        for (int r = 0; r < MM_MR; r++) {
            float v = r < mi && ks < kc ? mm_view_at(a, i0 + r, k0 + ks) : 0.0f;
            dk[r] = rounded ? mm_bf16_round(v) : v;
        }
    }
    return (mm_apanel){dst, 1, MM_MR};
}

/* Longest column stride (floats) of an A read in place k-major: beyond it every
 * k step touches another page and packing is cheaper than the TLB misses. */
enum { MM_DIRECT_KSTRIDE_MAX = 4096 };

/* 1 when an A micro-panel read in place would crowd the L1 sets: a 48 KB,
 * 12-way L1 has 64 sets of 64-byte lines, and a set holding more than
 * MAX_PER_SET of the panel's lines next to the B micro-panel (4 per set) evicts
 * what the kernel still reads.  Row-major: MM_MR rows rs floats apart, each
 * covering MM_KC * 4 / 64 lines (+1 unaligned); a row stride of a multiple of
 * 4 KB puts every row in the same sets (x of a 1536-, 2048- or 6144-wide
 * Linear).  k-major: MM_KC steps of MM_MR floats (1-2 lines) cs floats apart
 * (dW's dout^T, cs = O). */
static int mm_panel_crowds_l1(ptrdiff_t stride, int n, int lines)
{
    enum { SETS = 64, MAX_PER_SET = 3 };
    int count[SETS] = {0};
    for (int r = 0; r < n; r++) {
        ptrdiff_t start = (ptrdiff_t)r * stride * (ptrdiff_t)sizeof(float) / 64;
        for (int l = 0; l < lines; l++)
            if (++count[(start + l) % SETS] > MAX_PER_SET)
                return 1;
    }
    return 0;
}

int mm_apanel_packs_impl(mm_view a)
{
    if (a.cs == 1)
        return mm_panel_crowds_l1(a.rs, MM_MR, MM_KC * 4 / 64 + 1);
    if (a.rs == 1 && a.cs <= MM_DIRECT_KSTRIDE_MAX)
        return mm_panel_crowds_l1(a.cs, MM_KC, 2);
    return 1;
}

int mm_apanels_cols_f32_impl(float *dst, size_t panel_stride, mm_view a, int M, int i0, int mc,
                             int k0, int kc)
{
    if (a.rs != 1 || a.cs == 1 || !mm_apanel_packs_impl(a))
        return 0;
    int rows = M - i0 < mc ? M - i0 : mc, full = rows / MM_MR, tail = rows % MM_MR;
    const float *src = a.p + (ptrdiff_t)k0 * a.cs + i0;
    for (int k = 0; k < kc; k++) {
        const float *row = src + (ptrdiff_t)k * a.cs;
        float *d = dst + (size_t)k * MM_MR;
        for (int q = 0; q < full; q++)
            memcpy(d + (size_t)q * panel_stride, row + q * MM_MR, MM_MR * sizeof *d);
        if (tail) {
            float *dt = d + (size_t)full * panel_stride;
            memcpy(dt, row + full * MM_MR, (size_t)tail * sizeof *d);
            memset(dt + tail, 0, (size_t)(MM_MR - tail) * sizeof *d);
        }
    }
    return 1;
}

mm_apanel mm_apanel_make_impl(void *dst, ptrdiff_t ld, mm_view a, int M, int i0, int k0, int kc,
                               mm_afmt fmt)
{
    int mi = M - i0 < MM_MR ? M - i0 : MM_MR;
    /* fp32 read in place (the kernels read only rows < mi) unless that crowds L1 */
    if (fmt == MM_AFMT_F32 && !mm_apanel_packs_impl(a)) {
        if (a.cs == 1)
            return (mm_apanel){a.p + (ptrdiff_t)i0 * a.rs + k0, a.rs, 1};
        return (mm_apanel){a.p + i0 + (ptrdiff_t)k0 * a.cs, 1, a.cs};
    }
    if (a.cs == 1)
        return mm_apanel_rows(dst, ld, a, mi, i0, k0, kc, fmt);
    return mm_apanel_cols(dst, a, mi, i0, k0, kc, fmt);
}
