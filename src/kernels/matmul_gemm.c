/* matmul_gemm.c: the blocked, threaded GEMM driver behind matmul_forward/backward.
 *
 * C[M, N] = init + A[M, K] B[K, N] with B packed whole beforehand (mm_bpack).
 * The output is cut into tasks of at most MM_MC rows x MM_NC columns; OpenMP
 * hands tasks to threads dynamically (load balance on a shared machine), but
 * each output element belongs to exactly one task and is summed over
 * k = 0..K-1 in order, so the bits never depend on the thread count, the task
 * shape or on which thread ran what.
 * Inside a task (BLIS order): for each K block, make the task's A panels once
 * (in place, packed or converted; L2), then for each B micro-panel (L1) run the
 * micro-kernel down the row panels, prefetching the next B micro-panel.
 * The task shape follows the traffic: every row block streams all of B again,
 * every column block all of A (and converts it again where A needs packing), so
 * the split into at least MM_TASKS_PER_THREAD tasks per thread is the one that
 * moves the fewest bytes (few rows, N = 64: columns only; many rows and a narrow
 * B: rows).  Tasks are numbered column-block-major so concurrent tasks share the
 * same B block in L3.  Tiles narrower than MM_NR columns at the right edge go
 * through a small tile buffer; the kernels compute partial row counts directly.
 * bf16 pairs run on vdpbf16ps or, where that is slow, on the FMA kernel with A
 * and each B micro-panel widened to fp32 (mm_bf16_fma_impl: same bits).
 */
#include <string.h>

#include "matmul_impl.h"
#include "qs/cpu.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Elements (floats or uint32) of one A micro-panel slot and of the A block. */
enum { MM_APANEL_ELEMS = MM_MR * MM_KC, MM_ABLOCK_ELEMS = MM_MC * MM_KC };

/* Short K: a task is one K block with row panels outer (mm_task_rows_outer)
 * when its B block, K x nc (K/2 pair rows for vdpbf16ps), stays within
 * MM_ROWS_OUTER_BYTES of L2 and K <= MM_KROWS (MM_KROWS pairs for vdpbf16ps;
 * MM_KROWS_FMA16 for fma16, which widens B again for every row panel there).
 * Measured (Xeon, one core): fp32 +10% at K = 288 (nc = 1024: 1.2 MB) and
 * -15% at K = 512 (2 MB, past the 2 MB L2 with everything else); fma16 -30%
 * at K = 288, +60% at K = 64 (dW at N = 64, where C's traffic dominates).
 * vdpbf16ps with at least MM_ROWS_OUTER_MIN_M rows goes further: up to
 * MM_KROWS_PAIRS pairs, the tasks' columns capped so that the B block fits
 * (mm_rows_outer_nc_max).  Measured on a Zen 5 (2 threads, N = 1024 rows, same
 * process, alternating): K = 768 (384 pairs, nc 1024 -> 832 or 704) forward
 * 548 -> 711 GFLOP/s at 768 -> 2048, dX 538 -> 675 at 2048 -> 768; dW at 1024
 * tokens (512 pairs) 490-566 -> 590-610; the 1B forward at K = 1536 (768
 * pairs, nc 416), 512 rows: 601 -> 714 at 1536 -> 6144; at 64 rows it lost
 * 3-10% (B re-read by too few row panels), at 128 rows it was even or better. */
enum {
    MM_ROWS_OUTER_BYTES = 1280 * 1024,
    MM_KROWS = 384,
    MM_KROWS_PAIRS = 768,
    MM_KROWS_FMA16 = 128,
    MM_ROWS_OUTER_MIN_M = 128
};
_Static_assert((int)MM_KROWS_FMA16 <= (int)MM_KC, "bwide holds a widened B panel of MM_KC rows");
_Static_assert((int)MM_MR * ((int)MM_KROWS_PAIRS + 32) <= (int)MM_ABLOCK_ELEMS,
               "a rows-outer A panel fits the A block");

/* Micro-kernel of a job. */
typedef enum { MM_UK_C = 0, MM_UK_F32 = 1, MM_UK_BF16DP = 2 } mm_ukernel;

typedef struct mm_job {
    float *c;
    ptrdiff_t ldc;
    int M;
    const mm_view *a;
    const mm_bpack *ap; /* whole-A pack, or NULL */
    const mm_bpack *bp;
    mm_init init;
    const float *bias;
    int mc, nc;     /* task size: rows (multiple of MM_MR, <= MM_MC), columns (multiple of MM_NR) */
    mm_ukernel uk;
    int fma16;      /* bf16 pairs on the FMA kernel (widened, FTZ/DAZ) */
    int codes;      /* B holds HiF8 codes: each micro-panel decoded (dec) as it is used */
    int gemv_dp;    /* few rows on vdpbf16ps straight from the pack: codes (<= MM_FEW_ROWS
                     * rows, decoded in registers) or bf16 pairs (<= MM_GEMV_ROWS) */
    int dec;        /* mm_decode mode, | MM_DECODE_NO_NAN, | MM_DECODE_FINITE */
    int kc;         /* K block */
    mm_afmt afmt;   /* A panel format (not for fma16 or whole-A packs) */
} mm_job;

/* Per-thread scratch, on the thread's own stack (~114 KB): already mapped after
 * the first call, where a heap block of this size would be a fresh mmap and a
 * run of page faults on every call. */
typedef struct mm_scratch {
    _Alignas(64) float ablock[MM_ABLOCK_ELEMS]; /* the task's A panels for one K block */
    _Alignas(64) float bwide[MM_KC * MM_NR];    /* fma16 / codes: the B micro-panel widened */
    _Alignas(64) float tile[MM_MR * MM_NR];     /* tiles narrower than MM_NR */
} mm_scratch;

static int mm_fma_mode = -1;
static int mm_gemv_pairs_mode = 1;

void mm_gemv_pairs_force_impl(int on) { mm_gemv_pairs_mode = on; }

void mm_bf16_fma_force_impl(int mode) { mm_fma_mode = mode; }

int mm_bf16_fma_impl(void) { return mm_fma_mode >= 0 ? mm_fma_mode : cpu_bf16_dot_slow(); }

static void mm_kernel_run(const mm_job *jb, int kc, mm_apanel ap, const void *b, float *c,
                          ptrdiff_t ldc, int load_c, int mr, const void *pf)
{
    switch (jb->uk) {
    case MM_UK_BF16DP:
        mm_kernel_bf16_avx512bf16_impl((kc + 1) / 2, ap, b, c, ldc, load_c, mr, pf);
        break;
    case MM_UK_F32: /* bf16 values (fallback or widened pairs) come in whole pairs */
        mm_kernel_f32_avx512_impl(jb->afmt == MM_AFMT_F32 ? kc : kc + (kc & 1), ap, b, c, ldc,
                                  load_c, mr, pf);
        break;
    default:
        mm_kernel_f32_c_impl(jb->afmt == MM_AFMT_F32 ? kc : kc + (kc & 1), ap, b, c, ldc, load_c,
                             mr);
        break;
    }
}

/* One micro-tile of mi rows x nj columns. */
static void mm_tile_run(const mm_job *jb, int kc, mm_apanel ap, const void *b, float *c, int mi,
                        int nj, int load_c, const void *pf, float *tile)
{
    if (nj == MM_NR) {
        mm_kernel_run(jb, kc, ap, b, c, jb->ldc, load_c, mi, pf);
        return;
    }
    if (load_c)
        for (int r = 0; r < mi; r++)
            memcpy(tile + r * MM_NR, c + r * jb->ldc, (size_t)nj * sizeof *c);
    mm_kernel_run(jb, kc, ap, b, tile, MM_NR, load_c, mi, pf);
    for (int r = 0; r < mi; r++)
        memcpy(c + r * jb->ldc, tile + r * MM_NR, (size_t)nj * sizeof *c);
}

/* 1 when the blocked FMA kernel gets fp32 rows of A (plain, or rounded for
 * fma16) as k-major panels: more than MM_GEMV_ROWS rows (mi), whose pointers
 * would not fit the registers beside its accumulators (matmul_avx512.c); the
 * few-row kernels keep rows as they are (no transpose per task). */
static int mm_task_kmajor(const mm_job *jb, int mi)
{
    if (mi <= MM_GEMV_ROWS)
        return 0;
    if (jb->ap) /* bf16 rows of a whole-A pack, widened */
        return jb->fma16 && jb->ap->row_pairs;
    return jb->a->cs == 1 && (jb->fma16 || (jb->uk == MM_UK_F32 && jb->afmt == MM_AFMT_F32));
}

/* The A micro-panel of rows [i, i + MM_MR) (those below M), k block [k0, k0 + kc),
 * in the job's kernel format; slot has room for MM_MR x ld elements, ld the row
 * stride of row-major panels: kc rounded up to even (bf16 pairs: ld pairs).
 * blocked: for the MM_MR-row kernel (k-major rows, mm_task_kmajor). */
static mm_apanel mm_task_apanel(const mm_job *jb, float *slot, ptrdiff_t ld, int i, int k0,
                                int kc, int blocked)
{
    const mm_bpack *ap = jb->ap;
    int mi = jb->M - i < MM_MR ? jb->M - i : MM_MR, kp = (kc + 1) / 2;
    if (ap && ap->kernel == MM_KERNEL_AVX512) /* fp32 k-major panels, packed whole */
        return (mm_apanel){(const float *)ap->data + (size_t)(i / MM_MR) * ap->panel_elems +
                               (size_t)k0 * MM_MR,
                           1, MM_MR};
    if (blocked && mm_task_kmajor(jb, mi)) {
        if (ap) { /* k0 is even */
            mm_apanel_kmajor_widen_avx512bf16_impl(
                slot, (const uint32_t *)ap->data + (size_t)i * ap->row_pairs + k0 / 2,
                ap->row_pairs, mi, kp);
            return (mm_apanel){slot, 1, MM_MR};
        }
        const float *src = jb->a->p + (ptrdiff_t)i * jb->a->rs + k0;
        if (jb->fma16)
            mm_apanel_kmajor_round_swap_avx512bf16_impl(slot, src, jb->a->rs, mi, kc);
        else
            mm_apanel_kmajor_f32_avx512_impl(slot, src, jb->a->rs, mi, kc);
        return (mm_apanel){slot, 1, MM_MR};
    }
    if (ap && ap->row_pairs) { /* bf16 rows; k0 is even */
        const uint32_t *d = (const uint32_t *)ap->data + (size_t)i * ap->row_pairs + k0 / 2;
        if (!jb->fma16)
            return (mm_apanel){d, ap->row_pairs, 1};
        for (int r = 0; r < mi; r++)
            mm_bf16_widen_row_avx512bf16_impl(slot + r * ld, d + r * ap->row_pairs, kp);
        return (mm_apanel){slot, ld, 1};
    }
    if (ap) { /* k-major pair panels */
        const uint32_t *d = (const uint32_t *)ap->data + (size_t)(i / MM_MR) * ap->panel_elems +
                            (size_t)(k0 / 2) * MM_MR;
        if (!jb->fma16)
            return (mm_apanel){d, 1, MM_MR};
        mm_bf16_widen_kmajor_avx512bf16_impl(slot, d, kp, MM_MR, d);
        return (mm_apanel){slot, 1, MM_MR};
    }
    if (jb->fma16 && jb->a->cs == 1) { /* fp32 rows: rounded, in mm_bf16_order */
        for (int r = 0; r < mi; r++)
            mm_bf16_round_swap_avx512bf16_impl(slot + r * ld,
                                               jb->a->p + (ptrdiff_t)(i + r) * jb->a->rs + k0, kc);
        return (mm_apanel){slot, ld, 1};
    }
    return mm_apanel_make_impl(slot, ld, *jb->a, jb->M, i, k0, kc, jb->afmt);
}

/* The code pairs of k block k0 (even) in the code panel of column j. */
static const uint16_t *mm_codes_panel(const mm_bpack *bp, int j, int k0)
{
    return (const uint16_t *)bp->data + (size_t)(j / MM_NR) * bp->panel_elems +
           (size_t)(k0 / 2) * MM_NR;
}

/* Rows of B (pairs for vdpbf16ps) up to which a job may run rows outer. */
static int mm_rows_outer_kmax(const mm_job *jb)
{
    if (jb->fma16 || jb->codes)
        return MM_KROWS_FMA16; /* bwide holds the panel */
    return jb->uk == MM_UK_BF16DP && !jb->gemv_dp && jb->M >= MM_ROWS_OUTER_MIN_M
               ? MM_KROWS_PAIRS
               : MM_KROWS;
}

static int mm_rows_outer_krows(const mm_job *jb)
{
    return jb->uk == MM_UK_BF16DP ? (jb->bp->K + 1) / 2 : jb->bp->K;
}

/* 1 when a task of nc columns runs as one K block, row panels outer. */
static int mm_rows_outer(const mm_job *jb, int nc)
{
    int krows = mm_rows_outer_krows(jb);
    return krows <= mm_rows_outer_kmax(jb) && (size_t)krows * (size_t)nc * 4 <= MM_ROWS_OUTER_BYTES;
}

/* Columns per task at most: MM_NC, or fewer where that makes a vdpbf16ps job
 * of enough rows fit rows outer (MM_KROWS_PAIRS). */
static int mm_rows_outer_nc_max(const mm_job *jb)
{
    int krows = mm_rows_outer_krows(jb);
    if (jb->uk != MM_UK_BF16DP || krows > mm_rows_outer_kmax(jb) ||
        mm_rows_outer_kmax(jb) != MM_KROWS_PAIRS)
        return MM_NC;
    int fit = (int)(MM_ROWS_OUTER_BYTES / ((size_t)krows * 4)) / MM_NR * MM_NR;
    return fit < MM_NR ? MM_NR : fit < MM_NC ? fit : MM_NC;
}

/* Row stride of the A panel of a task in rows-outer mode: the whole K (pairs
 * for vdpbf16ps), rounded up to an odd multiple of 16 elements (64 bytes) so
 * that the 12 rows do not share L1 sets. */
static ptrdiff_t mm_rows_outer_ld(const mm_job *jb)
{
    int K = jb->bp->K, k2 = K + (K & 1);
    ptrdiff_t ld = ((jb->uk == MM_UK_BF16DP ? k2 / 2 : k2) + 15) / 16 * 16;
    return (ld / 16) % 2 ? ld : ld + 16;
}

/* A task whose K is short (dW at N = 64 or 512, the 288-wide Linears): one K
 * block, row panels outer, so that C, read and written once, is swept along its
 * rows (12 streams the hardware prefetcher follows, and the next tile
 * prefetched here) while the A panel (12 x K) stays in L1 and the task's B block
 * (K x nc) is read from L2 (fma16: each B panel widened again per row panel,
 * ~10% of the work, still far ahead of a C swept down its columns). */
static void mm_task_rows_outer(const mm_job *jb, int i0, int j0, int mc, int nc, mm_scratch *s)
{
    ptrdiff_t ldc = jb->ldc;
    int K = jb->bp->K, load_c = jb->init != MM_INIT_ZERO;
    const uint32_t *first = (const uint32_t *)jb->bp->data + (size_t)j0 / MM_NR * jb->bp->panel_elems;
    float *c0 = jb->c + (ptrdiff_t)i0 * ldc + j0;
    for (int ir = 0; ir < mc; ir += MM_MR) {
        int mi = mc - ir < MM_MR ? mc - ir : MM_MR;
        mm_apanel ap = mm_task_apanel(jb, s->ablock, mm_rows_outer_ld(jb), i0 + ir, 0, K, 1);
        for (int jr = 0; jr < nc; jr += MM_NR) {
            const uint32_t *bpanel = first + (size_t)jr / MM_NR * jb->bp->panel_elems;
            const void *b = bpanel;
            if (jb->codes) {
                mm_codes_decode_impl(s->bwide, mm_codes_panel(jb->bp, j0 + jr, 0), (K + 1) / 2,
                                     jb->dec);
                b = s->bwide;
            } else if (jb->fma16) {
                mm_bf16_widen_kmajor_avx512bf16_impl(s->bwide, bpanel, (K + 1) / 2, MM_NR, bpanel);
                b = s->bwide;
            }
            float *c = c0 + ir * ldc + jr;
            /* the next tile: to the right, or the start of the next row panel */
            const float *cn = jr + MM_NR < nc ? c + MM_NR : c - jr + MM_MR * ldc;
            int rows = jr + MM_NR < nc ? mi : mc - ir - MM_MR;
            for (int r = 0; r < rows && r < MM_MR; r++) {
                __builtin_prefetch(cn + r * ldc, 1, 3);
                __builtin_prefetch(cn + r * ldc + 16, 1, 3);
            }
            int nj = nc - jr < MM_NR ? nc - jr : MM_NR;
            mm_tile_run(jb, K, ap, b, c, mi, nj, load_c, b, s->tile);
        }
    }
}

/* A task of a few rows on the FMA units (fma16 pairs, up to MM_FEW_ROWS in row
 * groups of MM_GEMV_ROWS, or code packs, up to MM_GEMV_ROWS):
 * mm_gemv_avx512_impl over groups of micro-panels, K in blocks of MM_GEMV_KC
 * (C carries the sums between blocks: exact); codes decoded to bf16 pairs
 * MM_GEMV_KB pair rows of each panel at a time into bwide (L1). */
enum { MM_GEMV_KC = 2048, MM_GEMV_KB = 64 };
/* Up to this many rows (a short prompt, a few sequences) the few-row kernels
 * run in row groups of MM_GEMV_ROWS: fewer steps than the blocked kernel's
 * widening or decoding of each micro-panel (same bits). */
enum { MM_FEW_ROWS = 8 };
_Static_assert((int)MM_MR * MM_GEMV_KC <= (int)MM_ABLOCK_ELEMS, "a k-major A block fits");
_Static_assert(4 * MM_GEMV_KB * MM_NR <= MM_KC * MM_NR, "4 decoded panels fit bwide");

static void mm_task_gemv(const mm_job *jb, int i0, int j0, int mc, int nc, mm_scratch *s)
{
    const mm_bpack *bp = jb->bp;
    const int K = bp->K, np_max = mc <= 2 ? 4 : 2;
    /* the A panel's order: mm_bf16_order (odd k first) unless plain fp32 */
    const int odd_first = jb->fma16 || (jb->dec & MM_DECODE_MODE) != MM_DECODE_F32;
    uint32_t *dec = (uint32_t *)s->bwide;
    float *c0 = jb->c + (ptrdiff_t)i0 * jb->ldc + j0;
    for (int k0 = 0; k0 < K; k0 += MM_GEMV_KC) {
        int kc = K - k0 < MM_GEMV_KC ? K - k0 : MM_GEMV_KC, kp = (kc + 1) / 2;
        int kk = jb->afmt == MM_AFMT_F32 ? kc : kc + (kc & 1); /* as mm_kernel_run */
        int load_c = k0 > 0 || jb->init != MM_INIT_ZERO;
        mm_apanel ap = mm_task_apanel(jb, s->ablock, MM_GEMV_KC + 16, i0, k0, kc, 0);
        for (int jr = 0; jr < nc; jr += np_max * MM_NR) {
            int np = (nc - jr + MM_NR - 1) / MM_NR;
            np = np < np_max ? np : np_max;
            int nj_last = nc - jr - (np - 1) * MM_NR;
            nj_last = nj_last < MM_NR ? nj_last : MM_NR;
            float *c = c0 + jr;
            if (!jb->codes) {
                const uint32_t *b = (const uint32_t *)bp->data +
                                    (size_t)(j0 + jr) / MM_NR * bp->panel_elems +
                                    (size_t)(k0 / 2) * MM_NR;
                /* rows in groups of MM_GEMV_ROWS (5-8 rows: twice over the
                 * same micro-panels, the second time from the cache) */
                for (int r0 = 0; r0 < mc; r0 += MM_GEMV_ROWS) {
                    int mr = mc - r0 < MM_GEMV_ROWS ? mc - r0 : MM_GEMV_ROWS;
                    mm_apanel a = {(const float *)ap.p + r0 * ap.rs, ap.rs, ap.ks};
                    mm_gemv_avx512_impl(kk, a, mr, b, bp->panel_elems, 1, odd_first, np,
                                        c + (ptrdiff_t)r0 * jb->ldc, jb->ldc, nj_last, load_c);
                }
                continue;
            }
            for (int p0 = 0; p0 < kp; p0 += MM_GEMV_KB) {
                int kb = kp - p0 < MM_GEMV_KB ? kp - p0 : MM_GEMV_KB;
                for (int q = 0; q < np; q++)
                    mm_codes_decode_impl(dec + (size_t)q * MM_GEMV_KB * MM_NR,
                                         mm_codes_panel(bp, j0 + jr + q * MM_NR, k0 + 2 * p0), kb,
                                         MM_DECODE_PAIRS | (jb->dec & MM_DECODE_NO_NAN));
                mm_apanel a = {(const float *)ap.p + (ptrdiff_t)(2 * p0) * ap.ks, ap.rs, ap.ks};
                int kkb = p0 + kb == kp ? kk - 2 * p0 : 2 * kb;
                mm_gemv_avx512_impl(kkb, a, mc, dec, (size_t)MM_GEMV_KB * MM_NR, 1, odd_first, np,
                                    c, jb->ldc, nj_last, load_c || p0 > 0);
            }
        }
    }
}

/* A task of at most MM_FEW_ROWS rows of a code pack on CPUs with AVX512-BF16
 * and VBMI, or of at most MM_GEMV_ROWS rows of a bf16 pair pack on CPUs with
 * AVX512-BF16 (jb->gemv_dp): mm_gemv_codes_avx512bf16vbmi_impl or
 * mm_gemv_pairs_avx512bf16_impl over groups of micro-panels read straight from
 * the pack, K in blocks of MM_GEMV_KC (the A block of bf16 pairs stays in L1;
 * C carries the sums between blocks: exact, as the blocked kernel's K blocks). */
static void mm_task_gemv_dp(const mm_job *jb, int i0, int j0, int mc, int nc, mm_scratch *s)
{
    const mm_bpack *bp = jb->bp;
    const int K = bp->K, np_max = mc <= 2 ? 4 : 2;
    float *c0 = jb->c + (ptrdiff_t)i0 * jb->ldc + j0;
    /* for the FMA form of several rows (vdpbf16ps ignores it) */
    unsigned csr = mm_mxcsr_ftz_daz_impl();
    for (int k0 = 0; k0 < K; k0 += MM_GEMV_KC) {
        int kc = K - k0 < MM_GEMV_KC ? K - k0 : MM_GEMV_KC;
        int load_c = k0 > 0 || jb->init != MM_INIT_ZERO;
        mm_apanel ap = mm_task_apanel(jb, s->ablock, MM_GEMV_KC / 2 + 16, i0, k0, kc, 0);
        for (int jr = 0; jr < nc; jr += np_max * MM_NR) {
            int np = (nc - jr + MM_NR - 1) / MM_NR;
            np = np < np_max ? np : np_max;
            int nj_last = nc - jr - (np - 1) * MM_NR;
            nj_last = nj_last < MM_NR ? nj_last : MM_NR;
            /* rows in groups of MM_GEMV_ROWS (a prompt's 5-8 rows: twice over the
             * same micro-panels, the second time from the cache) */
            for (int r0 = 0; r0 < mc; r0 += MM_GEMV_ROWS) {
                int mr = mc - r0 < MM_GEMV_ROWS ? mc - r0 : MM_GEMV_ROWS;
                mm_apanel a = {(const uint32_t *)ap.p + r0 * ap.rs, ap.rs, ap.ks};
                if (!jb->codes) {
                    mm_gemv_pairs_avx512bf16_impl(
                        (kc + 1) / 2, a, mr,
                        (const uint32_t *)bp->data + (size_t)(j0 + jr) / MM_NR * bp->panel_elems +
                            (size_t)(k0 / 2) * MM_NR,
                        bp->panel_elems, np, c0 + (ptrdiff_t)r0 * jb->ldc + jr, jb->ldc, nj_last,
                        load_c);
                    continue;
                }
                mm_gemv_codes_avx512bf16vbmi_impl((kc + 1) / 2, a, mr,
                                                  mm_codes_panel(bp, j0 + jr, k0), bp->panel_elems,
                                                  np, c0 + (ptrdiff_t)r0 * jb->ldc + jr, jb->ldc,
                                                  nj_last, load_c, jb->dec);
            }
        }
    }
    mm_mxcsr_restore_impl(csr);
}

static void mm_task_run(const mm_job *jb, int i0, int j0, mm_scratch *s)
{
    const mm_bpack *bp = jb->bp;
    int pairs = bp->kernel == MM_KERNEL_AVX512BF16; /* B holds bf16 pairs */
    int K = bp->K;
    int mc = jb->M - i0 < jb->mc ? jb->M - i0 : jb->mc;
    int nc = bp->N - j0 < jb->nc ? bp->N - j0 : jb->nc;
    const uint32_t *bdata = bp->data; /* float or uint32: the same size */
    mm_apanel ap[MM_MC / MM_MR];
    if (jb->init == MM_INIT_BIAS)
        for (int r = 0; r < mc; r++)
            memcpy(jb->c + (i0 + r) * jb->ldc + j0, jb->bias + j0, (size_t)nc * sizeof(float));
    if (jb->gemv_dp) {
        mm_task_gemv_dp(jb, i0, j0, mc, nc, s);
        return;
    }
    unsigned csr = jb->fma16 ? mm_mxcsr_ftz_daz_impl() : 0;
    if (jb->uk == MM_UK_F32 && (jb->fma16 || jb->codes) &&
        (mc <= MM_GEMV_ROWS || (mc <= MM_FEW_ROWS && !jb->codes))) {
        mm_task_gemv(jb, i0, j0, mc, nc, s);
        if (jb->fma16)
            mm_mxcsr_restore_impl(csr);
        return;
    }
    if (mm_rows_outer(jb, nc)) {
        mm_task_rows_outer(jb, i0, j0, mc, nc, s);
        if (jb->fma16)
            mm_mxcsr_restore_impl(csr);
        return;
    }
    /* plain fp32 A: a dW's dout^T gets the task's panels in one sweep along dout's
     * rows (mm_apanels_cols_f32_impl decides on the view, once: 0 ends it) */
    int cols_sweep = jb->uk == MM_UK_F32 && !jb->fma16 && !jb->ap && jb->afmt == MM_AFMT_F32;
    for (int k0 = 0; k0 < K; k0 += jb->kc) {
        int kc = K - k0 < jb->kc ? K - k0 : jb->kc;
        int load_c = k0 > 0 || jb->init != MM_INIT_ZERO;
        if (cols_sweep && mm_apanels_cols_f32_impl(s->ablock, MM_APANEL_ELEMS, *jb->a, jb->M,
                                                   i0, mc, k0, kc)) {
            for (int ir = 0; ir < mc; ir += MM_MR)
                ap[ir / MM_MR] = (mm_apanel){s->ablock + (ir / MM_MR) * MM_APANEL_ELEMS, 1, MM_MR};
        } else {
            cols_sweep = 0;
            for (int ir = 0; ir < mc; ir += MM_MR)
                ap[ir / MM_MR] = mm_task_apanel(jb, s->ablock + (ir / MM_MR) * MM_APANEL_ELEMS,
                                                MM_KC, i0 + ir, k0, kc, 1);
        }
        const uint32_t *first = bdata + (size_t)j0 / MM_NR * bp->panel_elems;
        for (int jr = 0; jr < nc; jr += MM_NR) {
            const uint32_t *panel = first + (size_t)jr / MM_NR * bp->panel_elems;
            const uint32_t *bpanel = panel + (size_t)(pairs ? k0 / 2 : k0) * MM_NR;
            /* prefetch: the next panel's block, or the first panel's next block */
            const void *next = jr + MM_NR < nc          ? bpanel + bp->panel_elems
                               : k0 + jb->kc < K        ? first + (size_t)(pairs ? (k0 + kc) / 2
                                                                                  : k0 + kc) *
                                                                     MM_NR
                                                        : (const void *)bpanel;
            const void *b = bpanel;
            if (jb->codes) {
                mm_codes_decode_impl(s->bwide, mm_codes_panel(bp, j0 + jr, k0), (kc + 1) / 2,
                                     jb->dec);
                b = next = s->bwide;
            } else if (jb->fma16) {
                mm_bf16_widen_kmajor_avx512bf16_impl(s->bwide, bpanel, (kc + 1) / 2, MM_NR, next);
                b = next = s->bwide;
            }
            int nj = nc - jr < MM_NR ? nc - jr : MM_NR;
            /* the fp32 kernel prefetches (kc + 1) / 2 lines of pf: row panel q takes
             * lines [q (kc + 1) / 2, ...) of the next micro-panel (2 kc lines; all of
             * it from 4 row panels on), the vdpbf16ps kernel all of it in the first */
            const int share = jb->uk == MM_UK_F32 && b == bpanel;
            const size_t pf_lines = (size_t)kc * MM_NR * 4 / 64, pf_step = (size_t)(kc + 1) / 2;
            for (int ir = 0; ir < mc; ir += MM_MR) {
                int mi = mc - ir < MM_MR ? mc - ir : MM_MR;
                float *c = jb->c + (i0 + ir) * jb->ldc + j0 + jr;
                size_t l0 = (size_t)(ir / MM_MR) * pf_step;
                const void *pf = share ? (l0 < pf_lines ? (const char *)next + l0 * 64 : b)
                                       : ir == 0 ? next : b;
                mm_tile_run(jb, kc, ap[ir / MM_MR], b, c, mi, nj, load_c, pf, s->tile);
            }
        }
    }
    if (jb->fma16)
        mm_mxcsr_restore_impl(csr);
}

static int mm_ceil_div(int v, int d) { return (v + d - 1) / d; }

/* Task size.  The sums do not depend on it (each element is summed in k order
 * whatever the blocking), so it may follow the thread count and the shape.
 * Each row block streams all of B (K x N) through the cache again and each
 * column block all of A (M x K), converting or packing it again unless it is
 * read in place (a_cost 1 when in place, 2 when made anew): take the split with
 * the fewest bytes, n_ib N + n_jb M a_cost (K is common), that gives at least
 * MM_TASKS_PER_THREAD tasks per thread (so dynamic scheduling can even out a
 * shared machine) with blocks of at most MM_MC rows and MM_NC columns.
 * An A larger than MM_A_BIG_BYTES (past a core's L2) comes from L3 or memory
 * again for every column block, so its jobs take MM_TASKS_PER_THREAD_BIG_A
 * tasks per thread: the 64 x 153376 dout of a 1B head's dX (39 MB) at 12
 * column tasks ran at 247-268 GFLOP/s, at 4 at 300-309 and at 2 at 291-319
 * (Xeon, 2 threads, same minutes). */
enum { MM_TASKS_PER_THREAD = 6, MM_TASKS_PER_THREAD_BIG_A = 2, MM_BALANCE_MIN_TASKS = 8,
       MM_BALANCE_GAIN_PCT = 3 };
#define MM_A_BIG_BYTES ((size_t)4 << 20)

/* The longest thread's work (in micro-tiles) when the tasks of row blocks of
 * mcp panels and column blocks of ncp panels go, in task order, each to the
 * thread that is free first (dynamic scheduling on equal threads). */
static long mm_makespan(int m_panels, int mcp, int n_panels, int ncp, int n_threads)
{
    enum { MAX_THREADS = 64 };
    long load[MAX_THREADS] = {0}, worst = 0;
    n_threads = n_threads < MAX_THREADS ? n_threads : MAX_THREADS;
    for (int j0 = 0; j0 < n_panels; j0 += ncp)
        for (int i0 = 0; i0 < m_panels; i0 += mcp) {
            int least = 0;
            for (int t = 1; t < n_threads; t++)
                least = load[t] < load[least] ? t : least;
            load[least] += (long)(m_panels - i0 < mcp ? m_panels - i0 : mcp) *
                           (n_panels - j0 < ncp ? n_panels - j0 : ncp);
            worst = load[least] > worst ? load[least] : worst;
        }
    return worst;
}

/* Row panels per block: mcp, or fewer when the tasks are few and uneven.
 * Blocks of mcp panels may leave one thread a whole task more than the other
 * (the lm_head's dX at 1,024 rows: 86 row panels in 11 blocks of 8, 6 tasks
 * against 5, ~9% of the product idle on one core).  Smaller blocks are taken
 * when they shorten the longest thread's work by MM_BALANCE_GAIN_PCT percent
 * or more: each row block is another pass over B.  At 7 panels that head's dX
 * makes 13 passes over its 37 MB of w instead of 11, its longest thread does
 * 396 tile columns of work instead of 414 (4.3% less), and it runs 3-5% faster. */
static int mm_rows_balance(int m_panels, int mcp, int n_panels, int ncp, int n_threads)
{
    if (n_threads < 2 || (long)mm_ceil_div(m_panels, mcp) * mm_ceil_div(n_panels, ncp) >=
                             (long)MM_BALANCE_MIN_TASKS * n_threads)
        return mcp;
    int best = mcp;
    long best_span = mm_makespan(m_panels, mcp, n_panels, ncp, n_threads);
    for (int p = mcp - 1; p >= (mcp + 1) / 2; p--) {
        long span = mm_makespan(m_panels, p, n_panels, ncp, n_threads);
        if (span * 100 <= best_span * (100 - MM_BALANCE_GAIN_PCT)) {
            best_span = span;
            best = p;
        }
    }
    return best;
}
static void mm_task_shape(mm_job *jb, int n_threads, int a_cost)
{
    int M = jb->M, N = jb->bp->N;
    int m_panels = mm_ceil_div(M, MM_MR), n_panels = mm_ceil_div(N, MM_NR);
    size_t a_bytes = (size_t)M * (size_t)jb->bp->K * (jb->uk == MM_UK_BF16DP ? 2 : 4);
    int per_thread = a_bytes > MM_A_BIG_BYTES ? MM_TASKS_PER_THREAD_BIG_A : MM_TASKS_PER_THREAD;
    int want = n_threads > 1 ? per_thread * n_threads : 1;
    int ib_min = mm_ceil_div(m_panels, MM_MC / MM_MR);
    int jb_min = mm_ceil_div(n_panels, mm_rows_outer_nc_max(jb) / MM_NR);
    int best_ib = ib_min, best_jb = jb_min;
    double best = -1.0;
    for (int n_ib = ib_min; n_ib <= m_panels; n_ib++) {
        int n_jb = mm_ceil_div(want, n_ib);
        n_jb = n_jb < jb_min ? jb_min : n_jb > n_panels ? n_panels : n_jb;
        double cost = (double)n_ib * N + (double)n_jb * M * a_cost;
        if (best < 0.0 || cost < best) {
            best = cost;
            best_ib = n_ib;
            best_jb = n_jb;
        }
        if (n_ib * n_jb >= want && n_jb == jb_min)
            break; /* more row blocks only add traffic */
    }
    int mcp = mm_ceil_div(m_panels, best_ib), ncp = mm_ceil_div(n_panels, best_jb);
    jb->mc = mm_rows_balance(m_panels, mcp, n_panels, ncp, n_threads) * MM_MR;
    jb->nc = ncp * MM_NR;
}

/* 1 when the job reads its A panels in place (no packing per column block). */
static int mm_a_in_place(const mm_job *jb)
{
    if (jb->ap)
        return !jb->fma16;
    int mr = jb->M < MM_MR ? jb->M : MM_MR;
    return jb->afmt == MM_AFMT_F32 && !mm_apanel_packs_impl(*jb->a) && !mm_task_kmajor(jb, mr);
}

/* K == 0: the product is empty, only the initial value remains. */
static void mm_gemm_empty(const mm_job *jb)
{
    for (int m = 0; m < jb->M; m++)
        for (int n = 0; n < jb->bp->N; n++) {
            float *c = jb->c + m * jb->ldc + n;
            if (jb->init == MM_INIT_ZERO)
                *c = 0.0f;
            else if (jb->init == MM_INIT_BIAS)
                *c = jb->bias[n];
        }
}

enum { MM_MULTI_MAX = 4 };

void mm_gemm_multi_impl(int n, float *const *c, const ptrdiff_t *ldc, int M, const mm_view *a,
                        mm_bpack *ap, int ap_fill, const mm_bpack *const *bp, const mm_init *init,
                        const float *const *bias, const matmul_epilogue *ep)
{
    mm_job jb[MM_MULTI_MAX];
    int n_ib[MM_MULTI_MAX], first[MM_MULTI_MAX + 1], n_jobs = 0, fma16 = mm_bf16_fma_impl();
    double flops = 0.0;
    int n_threads = 1;
#ifdef _OPENMP
    n_threads = omp_get_max_threads();
#endif
    if (M <= 0)
        return;
    if (n > 0 && bp[0]->kernel == MM_KERNEL_AMX) {   /* ap: A's bf16 rows (filled or scratch) */
        mm_gemm_amx_impl(n, c, ldc, M, a, ap, ap && !ap_fill, bp, init, bias, ep, NULL);
        return;
    }
    /* an fp32 k-major A pack serves products whose A is plain fp32 rows of more
     * than MM_GEMV_ROWS (mm_forward_xpack); otherwise each task makes its panels */
    if (ap && ap->kernel == MM_KERNEL_AVX512) {
        int ok = a->cs == 1 && M > MM_GEMV_ROWS && ap->N == M && ap->K == (n > 0 ? bp[0]->K : 0);
        for (int i = 0; i < n && ok; i++)
            ok = bp[i]->kernel == MM_KERNEL_AVX512 && !bp[i]->round_bf16 && bp[i]->K == ap->K;
        if (!ok) {
            ap = NULL;
            ap_fill = 0;
        }
    }
    first[0] = 0;
    for (int i = 0; i < n && i < MM_MULTI_MAX; i++) {
        mm_job j = {.c = c[i], .ldc = ldc[i], .M = M, .a = a, .ap = ap, .bp = bp[i],
                    .init = init[i], .bias = bias ? bias[i] : NULL, .mc = MM_MC, .nc = MM_NC};
        if (bp[i]->N <= 0)
            continue;
        if (bp[i]->K <= 0) {
            mm_gemm_empty(&j);
            continue;
        }
        int pairs = bp[i]->kernel == MM_KERNEL_AVX512BF16;
        /* code packs with few rows (5-8, without VBMI) stay on vdpbf16ps: a
         * pair row decodes to bf16 pairs in fewer steps than to fp32, and the
         * kernel there is not the bottleneck (same bits either way) */
        j.fma16 = pairs && fma16 && !(bp[i]->codes && M <= MM_FEW_ROWS);
        /* decode-sized products of a code pack: the few-row kernel (codes
         * decoded to pairs, then FMAs with many independent chains) */
        if (bp[i]->codes && M <= MM_GEMV_ROWS && pairs)
            j.fma16 = 1;
        /* ... or, where the CPU has AVX512-BF16 and VBMI, codes decoded in
         * registers and vdpbf16ps (the bits of the vdpbf16ps kernel), up to
         * 8 rows (a short prompt) in groups of MM_GEMV_ROWS */
        j.gemv_dp = bp[i]->codes && M <= MM_FEW_ROWS && pairs && mm_codes_gemv_dp_impl();
        /* ... and decode-sized products of a bf16 pair pack on vdpbf16ps:
         * several micro-panels streamed side by side (the same bits) */
        if (pairs && !j.fma16 && !bp[i]->codes && M <= MM_GEMV_ROWS && mm_gemv_pairs_mode)
            j.gemv_dp = 1;
        if (j.gemv_dp)
            j.fma16 = 0;
        j.uk = pairs && !j.fma16                    ? MM_UK_BF16DP
               : bp[i]->kernel == MM_KERNEL_C       ? MM_UK_C
                                                    : MM_UK_F32;
        j.kc = pairs && !j.fma16 ? 2 * MM_KC : MM_KC; /* the same bytes per B micro-panel */

        j.afmt = pairs ? MM_AFMT_BF16 : bp[i]->round_bf16 ? MM_AFMT_F32_BF16 : MM_AFMT_F32;
        if (j.fma16)
            j.afmt = MM_AFMT_F32_BF16;
        j.codes = bp[i]->codes;
        j.dec = pairs && !j.fma16 ? MM_DECODE_PAIRS
                : pairs || bp[i]->round_bf16 ? MM_DECODE_F32_SWAP
                                             : MM_DECODE_F32;
        if (j.codes && !bp[i]->codes_nan)
            j.dec |= MM_DECODE_NO_NAN;
        if (j.codes && !bp[i]->codes_nan && !bp[i]->codes_inf)
            j.dec |= MM_DECODE_FINITE;
        mm_task_shape(&j, n_threads, mm_a_in_place(&j) ? 1 : 2);
        jb[n_jobs] = j;
        n_ib[n_jobs] = (M + j.mc - 1) / j.mc;
        first[n_jobs + 1] = first[n_jobs] + n_ib[n_jobs] * ((bp[i]->N + j.nc - 1) / j.nc);
        flops += 2.0 * M * bp[i]->N * bp[i]->K;
        n_jobs++;
    }
    int n_tasks = first[n_jobs];
    if (n_tasks == 0)
        return;
    /* paired: task t is block t of every GEMM (same shapes), then the epilogue */
    int paired = ep && ep->fn;
    if (paired) {
        n_tasks = first[1];
        for (int g = 1; g < n_jobs; g++) { /* the same M, N and A: the same shape anyway */
            jb[g].mc = jb[0].mc;
            jb[g].nc = jb[0].nc;
        }
    }
    int n_fill = ap && ap_fill ? (M + MM_MR - 1) / MM_MR : 0;
    /* below ~2 MFLOP a parallel region costs more than it saves */
    int parallel = n_tasks > 1 && flops > 2e6;
    (void)parallel;
#ifdef _OPENMP
#pragma omp parallel if (parallel)
#endif
    {
        mm_scratch scratch;
        memset(scratch.tile, 0, sizeof scratch.tile); /* columns past a narrow tile */
        /* convert A once for all column blocks (the implied barrier publishes it) */
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int p = 0; p < n_fill; p++)
            mm_apack_rows_panel_impl(ap, *a, p);
        /* one task list over all the GEMMs: one barrier, no idle tail per GEMM */
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (int t = 0; t < n_tasks; t++) {
            if (paired) {
                int i0 = (t % n_ib[0]) * jb[0].mc, j0 = (t / n_ib[0]) * jb[0].nc;
                for (int g = 0; g < n_jobs; g++)
                    mm_task_run(&jb[g], i0, j0, &scratch);
                int N0 = jb[0].bp->N;
                ep->fn(ep->ctx, i0, M - i0 < jb[0].mc ? M - i0 : jb[0].mc, j0,
                       N0 - j0 < jb[0].nc ? N0 - j0 : jb[0].nc);
                continue;
            }
            int g = 0;
            while (t >= first[g + 1])
                g++;
            int u = t - first[g];
            mm_task_run(&jb[g], (u % n_ib[g]) * jb[g].mc, (u / n_ib[g]) * jb[g].nc, &scratch);
        }
    }
}

void mm_gemm_impl(float *c, ptrdiff_t ldc, int M, const mm_view *a, mm_bpack *ap, int ap_fill,
                  const mm_bpack *bp, mm_init init, const float *bias)
{
    mm_gemm_multi_impl(1, &c, &ldc, M, a, ap, ap_fill, &bp, &init, &bias, NULL);
}
