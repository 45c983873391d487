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
#include "qs/err.h"
#include "qs/mem.h"

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
    const mm_bpack *bp;
    mm_init init;
    const float *bias;
    int mc, nc; /* task size: rows (multiple of MM_MR, <= MM_MC), columns (multiple of MM_NR) */
} mm_job;

static void mm_kernel_run(mm_kernel kernel, int kc, const void *ap, const void *bp, float *c,
                          ptrdiff_t ldc, int load_c)
{
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
static void mm_tile_run(const mm_job *jb, int kc, const void *ap, const void *bpanel, float *c,
                        int mi, int nj, int load_c, float *tile)
{
    if (mi == MM_MR && nj == MM_NR) {
        mm_kernel_run(jb->bp->kernel, kc, ap, bpanel, c, jb->ldc, load_c);
        return;
    }
    if (load_c)
        for (int r = 0; r < mi; r++)
            memcpy(tile + r * MM_NR, c + r * jb->ldc, (size_t)nj * sizeof *c);
    mm_kernel_run(jb->bp->kernel, kc, ap, bpanel, tile, MM_NR, load_c);
    for (int r = 0; r < mi; r++)
        memcpy(c + r * jb->ldc, tile + r * MM_NR, (size_t)nj * sizeof *c);
}

static void mm_task_run(const mm_job *jb, int i0, int j0, void *ablock, float *tile)
{
    const mm_bpack *bp = jb->bp;
    int is_bf16 = bp->kernel == MM_KERNEL_AVX512BF16;
    int K = bp->K;
    int mc = jb->M - i0 < jb->mc ? jb->M - i0 : jb->mc;
    int nc = bp->N - j0 < jb->nc ? bp->N - j0 : jb->nc;
    if (jb->init == MM_INIT_BIAS)
        for (int r = 0; r < mc; r++)
            memcpy(jb->c + (i0 + r) * jb->ldc + j0, jb->bias + j0, (size_t)nc * sizeof(float));
    for (int k0 = 0; k0 < K; k0 += MM_KC) {
        int kc = K - k0 < MM_KC ? K - k0 : MM_KC;
        int load_c = k0 > 0 || jb->init != MM_INIT_ZERO;
        for (int ir = 0; ir < mc; ir += MM_MR) {
            if (is_bf16)
                mm_apack_bf16_impl((uint32_t *)ablock + (ir / MM_MR) * MM_APANEL_ELEMS, *jb->a,
                                   jb->M, i0 + ir, k0, kc);
            else
                mm_apack_f32_impl((float *)ablock + (ir / MM_MR) * MM_APANEL_ELEMS, *jb->a, jb->M,
                                  i0 + ir, k0, kc, bp->round_bf16);
        }
        size_t b_off = (size_t)(is_bf16 ? k0 / 2 : k0) * MM_NR;
        for (int jr = 0; jr < nc; jr += MM_NR) {
            size_t panel = (size_t)(j0 + jr) / MM_NR;
            const void *bpanel = is_bf16
                                     ? (const void *)((const uint32_t *)bp->data +
                                                      panel * bp->panel_elems + b_off)
                                     : (const void *)((const float *)bp->data +
                                                      panel * bp->panel_elems + b_off);
            int nj = nc - jr < MM_NR ? nc - jr : MM_NR;
            for (int ir = 0; ir < mc; ir += MM_MR) {
                int mi = mc - ir < MM_MR ? mc - ir : MM_MR;
                const void *ap = is_bf16
                                     ? (const void *)((uint32_t *)ablock +
                                                      (ir / MM_MR) * MM_APANEL_ELEMS)
                                     : (const void *)((float *)ablock +
                                                      (ir / MM_MR) * MM_APANEL_ELEMS);
                float *c = jb->c + (i0 + ir) * jb->ldc + j0 + jr;
                mm_tile_run(jb, kc, ap, bpanel, c, mi, nj, load_c, tile);
            }
        }
    }
}

static int mm_round_up(int v, int m) { return (v + m - 1) / m * m; }

/* Task size.  The sums do not depend on it (each element is summed in k order
 * whatever the blocking), so it may follow the thread count: aim for at least
 * MM_TASKS_PER_THREAD tasks per thread so dynamic scheduling can even out the
 * load, shrinking columns first (down to 2 panels), then rows. */
enum { MM_TASKS_PER_THREAD = 6 };
static void mm_task_shape(mm_job *jb, int n_threads)
{
    int want = MM_TASKS_PER_THREAD * n_threads;
    int N = jb->bp->N;
    int n_ib = (jb->M + MM_MC - 1) / MM_MC;
    int n_jb_want = (want + n_ib - 1) / n_ib;
    int nc = mm_round_up((N + n_jb_want - 1) / n_jb_want, MM_NR);
    jb->nc = nc > MM_NC ? MM_NC : nc < 2 * MM_NR ? 2 * MM_NR : nc;
    int n_jb = (N + jb->nc - 1) / jb->nc;
    int n_ib_want = (want + n_jb - 1) / n_jb;
    int mc = mm_round_up((jb->M + n_ib_want - 1) / n_ib_want, MM_MR);
    jb->mc = mc > MM_MC ? MM_MC : mc;
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

int mm_gemm_impl(float *c, ptrdiff_t ldc, int M, const mm_view *a, const mm_bpack *bp, mm_init init,
                 const float *bias)
{
    mm_job jb = {c, ldc, M, a, bp, init, bias, MM_MC, MM_NC};
    if (M <= 0 || bp->N <= 0)
        return 0;
    if (bp->K <= 0) {
        mm_gemm_empty(&jb);
        return 0;
    }
    int n_threads = 1;
#ifdef _OPENMP
    n_threads = omp_get_max_threads();
#endif
    /* per thread: one A block, then one spare tile (offset keeps 64-byte alignment) */
    size_t slot = (size_t)MM_ABLOCK_ELEMS + MM_MR * MM_NR;
    float *scratch = qs_malloc((size_t)n_threads * slot * sizeof(float));
    if (!scratch)
        return QS_ENOMEM;
    double flops = 2.0 * M * bp->N * bp->K;
    mm_task_shape(&jb, n_threads);
    int n_ib = (M + jb.mc - 1) / jb.mc;
    int n_jb = (bp->N + jb.nc - 1) / jb.nc;
    int n_tasks = n_ib * n_jb;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (n_tasks > 1 && flops > 2e6)
#endif
    for (int t = 0; t < n_tasks; t++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *mine = scratch + (size_t)tid * slot;
        mm_task_run(&jb, (t % n_ib) * jb.mc, (t / n_ib) * jb.nc, mine, mine + MM_ABLOCK_ELEMS);
    }
    qs_free(scratch);
    return 0;
}
