/* matmul_sgemm.c: the OpenBLAS reference path of the Linear products
 * (MATMUL_FP32_BLAS, and MATMUL_FP32 on CPUs without AVX-512; shapes already
 * checked >= 1), and the one OpenBLAS thread pool setting (matmul_blas_threads). */
#include <cblas.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "matmul_impl.h"
#include "qs/matmul.h"

/* OpenBLAS's pthreads server (libopenblas0-pthread) exports this: it joins the
 * workers and marks the server down; exec_blas starts it again when needed
 * (OpenBLAS's own fork handler relies on that).  Weak: NULL with a build
 * that has no such server (OpenMP or serial OpenBLAS). */
extern int blas_thread_shutdown_(void) __attribute__((weak));

void matmul_blas_threads(void)
{
    /* only OpenBLAS's own pool: in an OpenMP build of OpenBLAS its threads are
     * OpenMP's (one pool already) and its set_num_threads would set ours */
    if (openblas_get_parallel() != OPENBLAS_THREAD)
        return;
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_)
        blas_thread_shutdown_();
}

/* OpenBLAS runs single-threaded (matmul_blas_threads) and our OpenMP threads
 * share a product out in blocks of rows (or of columns when there are few
 * rows), one sgemm each: one pool of threads, none spinning beside another's
 * (two pools made every OpenMP region after an sgemm wait for scheduler
 * ticks).  The blocks follow the shape only, never the thread count (one
 * thread runs the same blocks in turn), so the sums are the same with any
 * number of threads.  With OpenBLAS set to several threads again
 * (openblas_set_num_threads after matmul_blas_threads): one call, threaded by
 * OpenBLAS, as before. */
enum {
    MM_SGEMM_ROWS = 128,          /* rows per block, when there are >= 2 blocks' worth */
    MM_SGEMM_COLS = 256,          /* else columns per block, when >= 2 blocks' worth */
    MM_SGEMM_MIN_FLOPS = 4000000, /* below this, one call (a parallel region costs more) */
};

typedef enum { MM_SG_FWD, MM_SG_DX, MM_SG_DW } mm_sg_op;

typedef struct {
    mm_sg_op op;
    float *c;
    const float *a, *b;
    int N, IN, O;
    float beta;
} mm_sg_job;

/* The rows [r0, r1) (by_rows) or columns [r0, r1) of the job's output. */
static void mm_sgemm_block(const mm_sg_job *j, int by_rows, int r0, int r1)
{
    const int N = j->N, IN = j->IN, O = j->O, n = r1 - r0;
    switch (j->op) {
    case MM_SG_FWD: /* out[N, O] = x[N, IN] w[O, IN]^T */
        if (by_rows)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, O, IN, 1.0f,
                        j->a + (size_t)r0 * IN, IN, j->b, IN, j->beta, j->c + (size_t)r0 * O, O);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, n, IN, 1.0f, j->a, IN,
                        j->b + (size_t)r0 * IN, IN, j->beta, j->c + r0, O);
        break;
    case MM_SG_DX: /* dx[N, IN] += dout[N, O] w[O, IN] */
        if (by_rows)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, IN, O, 1.0f,
                        j->a + (size_t)r0 * O, O, j->b, IN, 1.0f, j->c + (size_t)r0 * IN, IN);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, n, O, 1.0f, j->a, O,
                        j->b + r0, IN, 1.0f, j->c + r0, IN);
        break;
    case MM_SG_DW: /* dw[O, IN] += dout[N, O]^T x[N, IN] */
        if (by_rows)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, IN, N, 1.0f, j->a + r0, O,
                        j->b, IN, 1.0f, j->c + (size_t)r0 * IN, IN);
        else
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, n, N, 1.0f, j->a, O,
                        j->b + r0, IN, 1.0f, j->c + r0, IN);
        break;
    }
}

static void mm_sgemm_run(const mm_sg_job *j)
{
    const int rows = j->op == MM_SG_DW ? j->O : j->N;
    const int cols = j->op == MM_SG_FWD ? j->O : j->IN;
    int by_rows = rows >= 2 * MM_SGEMM_ROWS, span = by_rows ? rows : cols;
    int block = by_rows ? MM_SGEMM_ROWS : MM_SGEMM_COLS;
    int n_blocks = (span + block - 1) / block;
    int split = n_blocks >= 2 && 2.0 * j->N * j->IN * j->O >= MM_SGEMM_MIN_FLOPS &&
                openblas_get_num_threads() == 1;
#ifdef _OPENMP
    split = split && !omp_in_parallel();
#endif
    if (!split) {
        mm_sgemm_block(j, 1, 0, rows);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
    for (int b = 0; b < n_blocks; b++) {
        int r0 = b * block, r1 = r0 + block < span ? r0 + block : span;
        mm_sgemm_block(j, by_rows, r0, r1);
    }
}

void mm_forward_sgemm_impl(float *out, const float *x, const float *w, const float *bias, int N,
                            int IN, int O)
{
    if (bias)
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * O, bias, (size_t)O * sizeof *out);
    mm_sg_job j = {MM_SG_FWD, out, x, w, N, IN, O, bias ? 1.0f : 0.0f};
    mm_sgemm_run(&j);
}

void mm_dx_sgemm_impl(float *dx, const float *dout, const float *w, int N, int IN, int O)
{
    mm_sg_job j = {MM_SG_DX, dx, dout, w, N, IN, O, 1.0f};
    mm_sgemm_run(&j);
}

void mm_dw_sgemm_impl(float *dw, const float *dout, const float *x, int N, int IN, int O)
{
    mm_sg_job j = {MM_SG_DW, dw, dout, x, N, IN, O, 1.0f};
    mm_sgemm_run(&j);
}
