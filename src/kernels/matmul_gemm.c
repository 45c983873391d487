/* matmul_gemm.c: the blocked, threaded GEMM driver behind matmul_forward/backward.
 *
 * C[M, N] = init + A[M, K] B[K, N] with B packed whole beforehand (mm_bpack).
 * The output is cut into tasks of MM_MC rows x MM_NC columns; OpenMP hands tasks
 * to threads dynamically (load balance on a shared machine), but each output
 * element belongs to exactly one task and is summed over k = 0..K-1 in order,
 * so the bits never depend on the thread count or on which thread ran what.
 * Inside a task (BLIS order): for each K block, pack the task's A rows once
 * (L2), then for each B micro-panel (L1) run the micro-kernel down the rows.
 * Tasks are numbered column-block-major so concurrent tasks share the same B
 * block in L3.  Partial tiles at the right/bottom edges go through a small
 * zero-padded tile so the micro-kernel always sees a full MM_MR x MM_NR block
 * and does the same arithmetic as on a full tile.
 */
#include <string.h>

#include "matmul_impl.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Elements (floats or uint32) of one A micro-panel slot and of the A block. */
enum { MM_APANEL_ELEMS = MM_MR * MM_KC, MM_ABLOCK_ELEMS = MM_MC * MM_KC };

typedef struct mm_job {
    float *c;
    ptrdiff_t ldc;
    int M;
    const mm_view *a;
    const mm_bpack *ap; /* whole-A pack, or NULL */
    const mm_bpack *bp;
    mm_init init;
    const float *bias;
    int mc, nc; /* task size: rows (multiple of MM_MR, <= MM_MC), columns (multiple of MM_NR) */
} mm_job;

static void mm_kernel_run(const mm_bpack *bp_all, int kc, mm_apanel ap, const void *bp, float *c,
                          ptrdiff_t ldc, int load_c)
{
    mm_kernel kernel = bp_all->kernel;
    if (bp_all->round_bf16 && kernel != MM_KERNEL_AVX512BF16)
        kc += kc & 1; /* bf16 fallback: operands padded to whole pairs */
    switch (kernel) {
    case MM_KERNEL_AVX512BF16:
        mm_kernel_bf16_avx512bf16_impl((kc + 1) / 2, ap, bp, c, ldc, load_c);
        break;
    case MM_KERNEL_AVX512:
        mm_kernel_f32_avx512_impl(kc, ap, bp, c, ldc, load_c);
        break;
    default:
        mm_kernel_f32_c_impl(kc, ap, bp, c, ldc, load_c);
        break;
    }
}

/* One micro-tile, full or partial (mi x nj valid). */
static void mm_tile_run(const mm_job *jb, int kc, mm_apanel ap, const void *bpanel, float *c,
                        int mi, int nj, int load_c, float *tile)
{
    if (mi == MM_MR && nj == MM_NR) {
        mm_kernel_run(jb->bp, kc, ap, bpanel, c, jb->ldc, load_c);
        return;
    }
    if (load_c)
        for (int r = 0; r < mi; r++)
            memcpy(tile + r * MM_NR, c + r * jb->ldc, (size_t)nj * sizeof *c);
    mm_kernel_run(jb->bp, kc, ap, bpanel, tile, MM_NR, load_c);
    for (int r = 0; r < mi; r++)
        memcpy(c + r * jb->ldc, tile + r * MM_NR, (size_t)nj * sizeof *c);
}

static void mm_task_run(const mm_job *jb, int i0, int j0, float *ablock, float *tile)
{
    const mm_bpack *bp = jb->bp;
    int is_bf16 = bp->kernel == MM_KERNEL_AVX512BF16;
    mm_afmt afmt = is_bf16 ? MM_AFMT_BF16 : bp->round_bf16 ? MM_AFMT_F32_BF16 : MM_AFMT_F32;
    size_t elem = is_bf16 ? sizeof(uint32_t) : sizeof(float);
    int K = bp->K;
    int mc = jb->M - i0 < jb->mc ? jb->M - i0 : jb->mc;
    int nc = bp->N - j0 < jb->nc ? bp->N - j0 : jb->nc;
    mm_apanel ap[MM_MC / MM_MR];
    if (jb->init == MM_INIT_BIAS)
        for (int r = 0; r < mc; r++)
            memcpy(jb->c + (i0 + r) * jb->ldc + j0, jb->bias + j0, (size_t)nc * sizeof(float));
    int kc_max = is_bf16 ? 2 * MM_KC : MM_KC; /* the same bytes per block */
    for (int k0 = 0; k0 < K; k0 += kc_max) {
        int kc = K - k0 < kc_max ? K - k0 : kc_max;
        int load_c = k0 > 0 || jb->init != MM_INIT_ZERO;
        for (int ir = 0; ir < mc; ir += MM_MR) {
            if (jb->ap && jb->ap->row_pairs) { /* bf16 rows: kc_max is even */
                const uint32_t *d = jb->ap->data;
                ap[ir / MM_MR] = (mm_apanel){d + (size_t)(i0 + ir) * jb->ap->row_pairs + k0 / 2,
                                             jb->ap->row_pairs, 1};
            } else if (jb->ap) {
                size_t panel = (size_t)(i0 + ir) / MM_MR;
                const uint32_t *d = jb->ap->data;
                ap[ir / MM_MR] = (mm_apanel){d + panel * jb->ap->panel_elems +
                                                 (size_t)(k0 / 2) * MM_MR, 1, MM_MR};
            } else {
                ap[ir / MM_MR] = mm_apanel_make_impl(ablock + (ir / MM_MR) * MM_APANEL_ELEMS,
                                                     *jb->a, jb->M, i0 + ir, k0, kc, afmt);
            }
        }
        size_t b_off = (size_t)(is_bf16 ? k0 / 2 : k0) * MM_NR;
        for (int jr = 0; jr < nc; jr += MM_NR) {
            size_t panel = (size_t)(j0 + jr) / MM_NR;
            const void *bpanel = (const char *)bp->data + (panel * bp->panel_elems + b_off) * elem;
            int nj = nc - jr < MM_NR ? nc - jr : MM_NR;
            for (int ir = 0; ir < mc; ir += MM_MR) {
                int mi = mc - ir < MM_MR ? mc - ir : MM_MR;
                float *c = jb->c + (i0 + ir) * jb->ldc + j0 + jr;
                mm_tile_run(jb, kc, ap[ir / MM_MR], bpanel, c, mi, nj, load_c, tile);
            }
        }
    }
}

static int mm_round_up(int v, int m) { return (v + m - 1) / m * m; }

/* Task size.  The sums do not depend on it (each element is summed in k order
 * whatever the blocking), so it may follow the thread count: aim for at least
 * MM_TASKS_PER_THREAD tasks per thread so dynamic scheduling can even out the
 * load.  Rows are split first (down to one micro-panel): every column block
 * re-packs its task's A rows, while B is packed once whatever the split. */
enum { MM_TASKS_PER_THREAD = 6 };
static void mm_task_shape(mm_job *jb, int n_threads)
{
    int want = MM_TASKS_PER_THREAD * n_threads;
    int N = jb->bp->N;
    /* round the row block DOWN so that the row split alone reaches `want` tasks
     * when it can: a second column block would convert/pack the A rows again
     * (for the lm_head's dX that is 2 x 32.8 M elements of dlogits per step) */
    int mc = jb->M / want / MM_MR * MM_MR;
    mc = mc < MM_MR ? MM_MR : mc;
    jb->mc = mc > MM_MC ? MM_MC : mc;
    int n_ib = (jb->M + jb->mc - 1) / jb->mc;
    int n_jb_want = (want + n_ib - 1) / n_ib;
    int nc = mm_round_up((N + n_jb_want - 1) / n_jb_want, MM_NR);
    jb->nc = nc > MM_NC ? MM_NC : nc < 2 * MM_NR ? 2 * MM_NR : nc;
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
    int n_ib[MM_MULTI_MAX], first[MM_MULTI_MAX + 1], n_jobs = 0;
    double flops = 0.0;
    int n_threads = 1;
#ifdef _OPENMP
    n_threads = omp_get_max_threads();
#endif
    if (M <= 0)
        return;
    first[0] = 0;
    for (int i = 0; i < n && i < MM_MULTI_MAX; i++) {
        mm_job j = {c[i], ldc[i], M, a, ap, bp[i], init[i], bias ? bias[i] : NULL, MM_MC, MM_NC};
        if (bp[i]->N <= 0)
            continue;
        if (bp[i]->K <= 0) {
            mm_gemm_empty(&j);
            continue;
        }
        mm_task_shape(&j, n_threads);
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
    if (paired)
        n_tasks = first[1];
    int n_fill = ap && ap_fill ? (M + MM_MR - 1) / MM_MR : 0;
    /* below ~2 MFLOP a parallel region costs more than it saves */
    int parallel = n_tasks > 1 && flops > 2e6;
    (void)parallel;
#ifdef _OPENMP
#pragma omp parallel if (parallel)
#endif
    {
        /* Per-thread scratch on the thread's own stack (~98 KB): already mapped
         * after the first call, where a heap block of this size would be a fresh
         * mmap and a run of page faults on every call. */
        _Alignas(64) float ablock[MM_ABLOCK_ELEMS];
        _Alignas(64) float tile[MM_MR * MM_NR];
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
                    mm_task_run(&jb[g], i0, j0, ablock, tile);
                int N0 = jb[0].bp->N;
                ep->fn(ep->ctx, i0, M - i0 < jb[0].mc ? M - i0 : jb[0].mc, j0,
                       N0 - j0 < jb[0].nc ? N0 - j0 : jb[0].nc);
                continue;
            }
            int g = 0;
            while (t >= first[g + 1])
                g++;
            int u = t - first[g];
            mm_task_run(&jb[g], (u % n_ib[g]) * jb[g].mc, (u / n_ib[g]) * jb[g].nc, ablock, tile);
        }
    }
}

void mm_gemm_impl(float *c, ptrdiff_t ldc, int M, const mm_view *a, mm_bpack *ap, int ap_fill,
                  const mm_bpack *bp, mm_init init, const float *bias)
{
    mm_gemm_multi_impl(1, &c, &ldc, M, a, ap, ap_fill, &bp, &init, &bias, NULL);
}
