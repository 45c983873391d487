/* matmul.c: Linear forward/backward: dispatch, weight packs, fallbacks.
 *
 * Each Linear product is one call of the blocked GEMM (matmul_gemm.c):
 *   forward  C = out [N, O],  A = x    [N, IN],       B = w^T [IN, O]
 *   dx       C = dx  [N, IN], A = dout [N, O],        B = w   [O, IN]
 *   dw       C = dw  [O, IN], A = dout^T [O, N],      B = x   [N, IN]
 * The kernel follows the precision and cpu_level() (mm_kernel_select);
 * MATMUL_FP32 without AVX-512 and MATMUL_FP32_BLAS go to OpenBLAS sgemm
 * (matmul_sgemm.c: shared over our OpenMP threads in shape-fixed blocks).
 * Scratch memory that cannot be had degrades to sgemm (fp32) or to the
 * unblocked loop below (bf16), both within the same contract (matmul.h).
 */
#include "qs/matmul.h"

#include <assert.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "matmul_impl.h"
#include "qs/cpu.h"
#include "qs/err.h"
#include "qs/mem.h"

struct matmul_wpack {
    const float *w; /* [O, IN], owned by the caller; NULL when frozen or a code pack */
    int IN, O, precision;
    mm_bpack fwd;   /* B = w^T, K = IN, N = O */
    mm_bpack bwd;   /* B = w,   K = O,  N = IN */
    int fwd_fresh, bwd_fresh; /* 0 stale, 1 current, 2 current and used (mm_pack_ready) */
    int frozen;     /* forward form only, made once (matmul_wpack_create_frozen*) */
    int codes;      /* HiF8 code pack (matmul_wpack_create_hif8): fwd holds the codes */
    int sgemm;      /* code pack of a precision without a packed kernel: decoded per call */
};

/* Kernel choice for a public precision at the current cpu_level(); -1 = use sgemm. */
static int mm_kernel_select(int precision)
{
    int level = cpu_level();
    if (precision == MATMUL_FP32_BLAS)
        return -1;
    if (precision == MATMUL_BF16_AMX)   /* without AMX: the unblocked loop (matmul.h) */
        return cpu_amx_bf16() ? MM_KERNEL_AMX : -1;
    if (precision == MATMUL_BF16)
        return level >= CPU_LEVEL_AVX512BF16 ? MM_KERNEL_AVX512BF16
               : level >= CPU_LEVEL_AVX512   ? MM_KERNEL_AVX512
                                             : MM_KERNEL_C;
    return level >= CPU_LEVEL_AVX512 ? MM_KERNEL_AVX512 : -1;
}

/* The kernel a pack's products run on: frozen and code packs keep the one they
 * were made for (they have no fp32 source to re-pack from; -1 for a code pack
 * of an sgemm precision), others follow the precision. */
static int mm_pack_kernel(const matmul_wpack *pk, int precision)
{
    if (pk && pk->codes)
        return pk->sgemm ? -1 : (int)pk->fwd.kernel;
    return pk && pk->frozen ? (int)pk->fwd.kernel : mm_kernel_select(precision);
}

/* ---- bf16 without scratch: C[m, j] = init + sum_k bf16(A(m, k)) bf16(B(k, j)), k in
 * mm_bf16_order; bit-identical to the packed bf16 paths. ---- */

static void mm_gemm_unblocked(float *c, ptrdiff_t ldc, int M, int Nc, int K, mm_view a,
                              mm_view b, mm_init init, const float *bias)
{
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int m = 0; m < M; m++)
        for (int j = 0; j < Nc; j++) {
            float *cj = c + m * ldc + j;
            float acc = init == MM_INIT_ACCUM ? *cj : init == MM_INIT_BIAS ? bias[j] : 0.0f;
            for (int k = 0; k < K + (K & 1); k++) {
                int ks = mm_bf16_order(k);
                float av = ks < K ? mm_bf16_round(a.p[m * a.rs + ks * a.cs]) : 0.0f;
                float bv = ks < K ? mm_bf16_round(b.p[ks * b.rs + j * b.cs]) : 0.0f;
                acc += av * bv;
            }
            *cj = acc;
        }
}

/* ---- the three products on the GEMM, with their fallbacks ---- */

/* *fresh: 0 stale, 1 current, 2 current and used since made or re-made
 * (matmul_wpack_repack re-makes only the forms in use). */
static int mm_pack_ready(mm_bpack *bp, int *fresh, mm_view b, int K, int Nc, int kernel,
                         int precision)
{
    if (*fresh && bp->data && bp->kernel == (mm_kernel)kernel) {
        *fresh = 2;
        return 0;
    }
    *fresh = mm_bpack_fill_impl(bp, b, K, Nc, (mm_kernel)kernel, precision == MATMUL_BF16) == 0
                 ? 2
                 : 0;
    return *fresh ? 0 : -1;
}

const mm_bpack *mm_wpack_fwd_amx_impl(matmul_wpack *pk)
{
    mm_view wt = {pk->w, 1, pk->IN};
    if (pk->codes || mm_pack_kernel(pk, pk->precision) != MM_KERNEL_AMX ||
        mm_pack_ready(&pk->fwd, &pk->fwd_fresh, wt, pk->IN, pk->O, MM_KERNEL_AMX, pk->precision))
        return NULL;
    return &pk->fwd;
}

/* 1 when an fp32 product of N rows takes its A (x, or dX's dout) packed k-major
 * once per call (mm_apack_f32_reserve_impl): a few row panels, split into
 * column tasks only, each of which would transpose the same rows again. */
static int mm_xpack_f32(int kernel, int precision, int N)
{
    return kernel == MM_KERNEL_AVX512 && precision == MATMUL_FP32 && N > MM_GEMV_ROWS &&
           N <= MM_MC;
}

/* Forward's x converted once per call (or once for several Linears of the same
 * x) instead of once per column block: bf16 rows for the bf16 kernel, or fp32
 * k-major panels (mm_xpack_f32), reserved in ws->xpack, else in tmp; the AMX
 * GEMM's scratch.  NULL otherwise or when memory is short (the GEMM then
 * converts per task, with the same bits). */
static mm_bpack *mm_forward_xpack(int kernel, int precision, int N, int IN, matmul_ws *ws,
                                  mm_bpack *tmp)
{
    if (kernel == MM_KERNEL_AMX)   /* scratch for the AMX GEMM, which reserves it */
        return ws ? &ws->xpack : tmp;
    /* fp32, a few row panels: each column task would transpose the same rows
     * into k-major panels again (up to ~18% of a 64 x 1536 -> 768 product);
     * the GEMM fills this once, or drops it where its products need another
     * A format (mm_gemm_multi_impl) */
    if (mm_xpack_f32(kernel, precision, N)) {
        mm_bpack *xp = ws ? &ws->xpack : tmp;
        return mm_apack_f32_reserve_impl(xp, N, IN) == 0 ? xp : NULL;
    }
    if (kernel != MM_KERNEL_AVX512BF16)
        return NULL;
    mm_bpack *xp = ws ? &ws->xpack : tmp;
    return mm_apack_rows_reserve_impl(xp, N, IN) == 0 ? xp : NULL;
}

/* A code pack's product: the GEMM decodes its micro-panels; without a packed
 * kernel (sgemm precisions) the weight is decoded whole for the call (or, when
 * that memory cannot be had, row by row into a plain fp32 dot product). */
static void mm_forward_codes(float *out, const float *x, matmul_wpack *pk, const float *bias,
                             int N, mm_bpack *xp)
{
    const int IN = pk->IN, O = pk->O;
    mm_view xa = {x, IN, 1};
    if (!pk->sgemm) {
        mm_gemm_impl(out, O, N, &xa, xp, xp != NULL, &pk->fwd, bias ? MM_INIT_BIAS : MM_INIT_ZERO,
                     bias);
        return;
    }
    float *w = qs_malloc((size_t)O * IN * sizeof *w);
    if (w) {
        for (int o = 0; o < O; o++)
            mm_bpack_codes_row_impl(&pk->fwd, o, 0, IN, NULL, w + (size_t)o * IN);
        mm_forward_sgemm_impl(out, x, w, bias, N, IN, O);
        qs_free(w);
        return;
    }
    enum { CHUNK = 1024 };
    float row[CHUNK];
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            out[(size_t)n * O + o] = bias ? bias[o] : 0.0f;
    for (int o = 0; o < O; o++)
        for (int k0 = 0; k0 < IN; k0 += CHUNK) {   /* the weight row in chunks */
            int kc = IN - k0 < CHUNK ? IN - k0 : CHUNK;
            mm_bpack_codes_row_impl(&pk->fwd, o, k0, kc, NULL, row);
            for (int n = 0; n < N; n++) {
                float acc = out[(size_t)n * O + o];
                for (int k = 0; k < kc; k++)
                    acc += x[(size_t)n * IN + k0 + k] * row[k];
                out[(size_t)n * O + o] = acc;
            }
        }
}

/* pk may be NULL (pack w on the fly, into ws->bpack when ws is given); xp: a
 * reserved row pack for x, converted by the GEMM, or NULL. */
static void mm_forward_gemm(float *out, const float *x, const float *w, const float *bias, int N,
                            int IN, int O, int precision, matmul_wpack *pk, matmul_ws *ws,
                            mm_bpack *xp)
{
    mm_view wt = {w, 1, IN}, xa = {x, IN, 1};
    mm_init init = bias ? MM_INIT_BIAS : MM_INIT_ZERO;
    if (pk && pk->codes) {
        mm_forward_codes(out, x, pk, bias, N, xp);
        return;
    }
    int kernel = mm_pack_kernel(pk, precision);
    if (kernel >= 0) {
        mm_bpack tmp = {0};
        int fresh = 0;
        mm_bpack *bp = pk ? &pk->fwd : ws ? &ws->bpack : &tmp;
        int *fr = pk ? &pk->fwd_fresh : &fresh;
        if (!pk && ws)
            ws->bpack_x = NULL;
        int rc = mm_pack_ready(bp, fr, wt, IN, O, kernel, precision);
        if (rc == 0)
            mm_gemm_impl(out, O, N, &xa, xp, xp != NULL, bp, init, bias);
        mm_bpack_free_impl(&tmp);
        if (rc == 0)
            return;
    }
    if (precision == MATMUL_BF16 || precision == MATMUL_BF16_AMX)
        mm_gemm_unblocked(out, O, N, O, IN, xa, wt, init, bias);
    else
        mm_forward_sgemm_impl(out, x, w, bias, N, IN, O);
}

static void mm_forward_run(float *out, const float *x, const float *w, const float *bias, int N,
                           int IN, int O, int precision, matmul_wpack *pk, matmul_ws *ws)
{
    mm_bpack tmp = {0};
    mm_bpack *xp = mm_forward_xpack(mm_pack_kernel(pk, precision), precision, N, IN, ws, &tmp);
    mm_forward_gemm(out, x, w, bias, N, IN, O, precision, pk, ws, xp);
    mm_bpack_free_impl(&tmp);
}

static void mm_dx_run(float *dx, const float *dout, const float *w, int N, int IN, int O,
                      int precision, matmul_wpack *pk, matmul_ws *ws)
{
    mm_view wb = {w, IN, 1}, da = {dout, O, 1};
    int kernel = mm_kernel_select(precision);
    if (kernel >= 0) {
        mm_bpack tmp = {0};
        int fresh = 0;
        mm_bpack *bp = pk ? &pk->bwd : ws ? &ws->bpack : &tmp;
        int *fr = pk ? &pk->bwd_fresh : &fresh;
        if (!pk && ws)
            ws->bpack_x = NULL;
        int rc = mm_pack_ready(bp, fr, wb, O, IN, kernel, precision);
        /* dout converted once per call, as forward's x (mm_forward_xpack): the
         * AMX GEMM's scratch, fp32 k-major panels of a few row panels, or bf16
         * rows, which every column task would otherwise convert again (12
         * times over the 64 x 153376 dout of a 1B head's dX) */
        mm_bpack tmp_a = {0};
        mm_bpack *xs = mm_forward_xpack(kernel, precision, N, O, ws, &tmp_a);
        if (rc == 0)
            mm_gemm_impl(dx, IN, N, &da, xs, xs != NULL, bp, MM_INIT_ACCUM, NULL);
        mm_bpack_free_impl(&tmp);
        mm_bpack_free_impl(&tmp_a);
        if (rc == 0)
            return;
    }
    if (precision == MATMUL_BF16 || precision == MATMUL_BF16_AMX)
        mm_gemm_unblocked(dx, IN, N, IN, O, da, wb, MM_INIT_ACCUM, NULL);
    else
        mm_dx_sgemm_impl(dx, dout, w, N, IN, O);
}

static void mm_dw_run(float *dw, const float *dout, const float *x, int N, int IN, int O,
                      int precision, matmul_ws *ws)
{
    mm_view xb = {x, IN, 1}, dt = {dout, 1, O};
    int kernel = mm_kernel_select(precision);
    if (kernel >= 0) {
        /* bf16: dout^T is packed whole, in one sweep over dout's rows, rather
         * than gathered column by column in every task */
        mm_bpack tmp = {0}, tmp_a = {0};
        mm_bpack *bp = ws ? &ws->bpack : &tmp, *ap = ws ? &ws->apack : &tmp_a;
        int whole_a = kernel == MM_KERNEL_AVX512BF16, amx = kernel == MM_KERNEL_AMX;
        /* the previous dW's pack of this very x (matmul_ws_reuse_x) */
        int fresh = ws && ws->reuse_x && ws->bpack_x == x && ws->bpack_x_n == N &&
                    ws->bpack_x_in == IN && ws->bpack_x_precision == precision;
        int rc = mm_pack_ready(bp, &fresh, xb, N, IN, kernel, precision);
        if (ws) {
            ws->bpack_x = rc == 0 ? x : NULL;
            ws->bpack_x_n = N;
            ws->bpack_x_in = IN;
            ws->bpack_x_precision = precision;
        }
        if (rc == 0 && whole_a)
            rc = mm_apack_whole_impl(ap, dt, O, N);
        /* AMX: ap is the scratch where the GEMM converts dout^T into bf16 rows
         * (filled by it: ap_fill) */
        if (rc == 0)
            mm_gemm_impl(dw, IN, O, &dt, whole_a || amx ? ap : NULL, amx, bp, MM_INIT_ACCUM, NULL);
        mm_bpack_free_impl(&tmp);
        mm_bpack_free_impl(&tmp_a);
        if (rc == 0)
            return;
    }
    if (precision == MATMUL_BF16 || precision == MATMUL_BF16_AMX)
        mm_gemm_unblocked(dw, IN, O, IN, N, dt, xb, MM_INIT_ACCUM, NULL);
    else
        mm_dw_sgemm_impl(dw, dout, x, N, IN, O);
}

/* db[o] += sum_n dout[n, o], n in order; threads own column chunks. */
static void mm_colsum(float *db, const float *dout, int N, int O)
{
    enum { CHUNK = 64 };
    int n_chunks = (O + CHUNK - 1) / CHUNK;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)N * O > 65536)
#endif
    for (int ch = 0; ch < n_chunks; ch++) {
        int o0 = ch * CHUNK, o1 = o0 + CHUNK < O ? o0 + CHUNK : O;
        for (int n = 0; n < N; n++) {
            const float *row = dout + (size_t)n * O;
            for (int o = o0; o < o1; o++)
                db[o] += row[o];
        }
    }
}

/* Empty products: out = bias or 0 when IN == 0; nothing to do otherwise. */
static int mm_forward_trivial(float *out, const float *bias, int N, int IN, int O)
{
    if (N <= 0 || O <= 0)
        return 1;
    if (IN > 0)
        return 0;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            out[(size_t)n * O + o] = bias ? bias[o] : 0.0f;
    return 1;
}

static void mm_backward_run(float *dx, float *dw, float *db, const float *dout, const float *x,
                            const float *w, int N, int IN, int O, int precision, matmul_wpack *pk,
                            matmul_ws *ws)
{
    if (N <= 0 || IN <= 0 || O <= 0)
        return;
    if (dx)
        mm_dx_run(dx, dout, w, N, IN, O, precision, pk, ws);
    if (dw)
        mm_dw_run(dw, dout, x, N, IN, O, precision, ws);
    else if (ws)   /* matmul_ws_reuse_x: the previous backward call's x only */
        ws->bpack_x = NULL;
    if (db)
        mm_colsum(db, dout, N, O);
}

/* ---- public API ---- */

void matmul_forward(float *out, const float *x, const float *w, const float *bias, int N, int IN,
                    int O, int precision)
{
    if (!mm_forward_trivial(out, bias, N, IN, O))
        mm_forward_run(out, x, w, bias, N, IN, O, precision, NULL, NULL);
}

void matmul_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                     const float *w, int N, int IN, int O, int precision)
{
    mm_backward_run(dx, dw, db, dout, x, w, N, IN, O, precision, NULL, NULL);
}

matmul_wpack *matmul_wpack_create(const float *w, int IN, int O, int precision)
{
    if (!w || IN < 1 || O < 1)
        return NULL;
    matmul_wpack *pk = qs_calloc(1, sizeof *pk);
    if (!pk)
        return NULL;
    pk->w = w;
    pk->IN = IN;
    pk->O = O;
    pk->precision = precision;
    return pk;
}

void matmul_wpack_refresh(matmul_wpack *pk)
{
    if (pk && !pk->frozen && !pk->codes)   /* frozen, code packs: no source to re-read */
        pk->fwd_fresh = pk->bwd_fresh = 0;
}

void matmul_ws_reuse_x(matmul_ws *ws, int on)
{
    if (ws)
        ws->reuse_x = on;
}

void matmul_wpack_repack(matmul_wpack *pk)
{
    if (!pk || pk->frozen || pk->codes)
        return;
    /* the forms used since they were made (fresh 2; a QAT-substituted
     * Linear's are not), each as its last call made it (kernel, rounding), so
     * the next call finds it ready and the products keep their bits */
    mm_view wt = {pk->w, 1, pk->IN}, wb = {pk->w, pk->IN, 1};
    pk->fwd_fresh = pk->fwd_fresh == 2 && pk->fwd.data &&
                    mm_bpack_fill_impl(&pk->fwd, wt, pk->IN, pk->O, pk->fwd.kernel,
                                       pk->fwd.round_bf16) == 0;
    pk->bwd_fresh = pk->bwd_fresh == 2 && pk->bwd.data &&
                    mm_bpack_fill_impl(&pk->bwd, wb, pk->O, pk->IN, pk->bwd.kernel,
                                       pk->bwd.round_bf16) == 0;
}

void matmul_wpack_destroy(matmul_wpack *pk)
{
    if (!pk)
        return;
    mm_bpack_free_impl(&pk->fwd);
    mm_bpack_free_impl(&pk->bwd);
    qs_free(pk);
}

size_t matmul_wpack_bytes(const matmul_wpack *pk)
{
    return pk ? sizeof *pk + pk->fwd.bytes + pk->bwd.bytes : 0;
}

void matmul_forward_packed_ws(float *out, const float *x, matmul_wpack *pk, const float *bias,
                              int N, matmul_ws *ws)
{
    if (!mm_forward_trivial(out, bias, N, pk->IN, pk->O))
        mm_forward_run(out, x, pk->w, bias, N, pk->IN, pk->O, pk->precision, pk, ws);
}

/* Up to 4 Linears of one x through one GEMM region; 0, or -1 when a weight
 * cannot be packed (nothing computed then). */
static int mm_forward_group(float *const *out, const float *x, matmul_wpack *const *pk,
                            const float *const *bias, int n, int N, matmul_ws *ws,
                            const matmul_epilogue *ep)
{
    int IN = pk[0]->IN, precision = pk[0]->precision;
    int kernel = mm_pack_kernel(pk[0], precision);
    if (kernel < 0)
        return -1;
    for (int i = 0; i < n; i++)   /* code and value packs mixed, mixed kernels: one by one */
        if (pk[i]->codes != pk[0]->codes || mm_pack_kernel(pk[i], precision) != kernel)
            return -1;
    const mm_bpack *bp[4];
    ptrdiff_t ldc[4];
    mm_init init[4];
    for (int i = 0; i < n; i++) {
        mm_view wt = {pk[i]->w, 1, IN};
        if (!pk[i]->codes &&   /* a code pack is made once, with its codes */
            mm_pack_ready(&pk[i]->fwd, &pk[i]->fwd_fresh, wt, IN, pk[i]->O, kernel, precision))
            return -1;
        bp[i] = &pk[i]->fwd;
        ldc[i] = pk[i]->O;
        init[i] = bias && bias[i] ? MM_INIT_BIAS : MM_INIT_ZERO;
    }
    mm_bpack tmp = {0};
    mm_bpack *xp = mm_forward_xpack(kernel, precision, N, IN, ws, &tmp);
    mm_view xa = {x, IN, 1};
    mm_gemm_multi_impl(n, out, ldc, N, &xa, xp, xp != NULL, bp, init, bias, ep);
    mm_bpack_free_impl(&tmp);
    return 0;
}

void matmul_forward_packed_multi_ws(float *const *out, const float *x, matmul_wpack *const *pk,
                                    const float *const *bias, int n, int N, matmul_ws *ws,
                                    const matmul_epilogue *ep)
{
    if (n < 1 || N < 1)
        return;
    int same = 1, same_o = 1;
    for (int i = 1; i < n; i++) {
        same &= pk[i]->IN == pk[0]->IN && pk[i]->precision == pk[0]->precision;
        same_o &= pk[i]->O == pk[0]->O;
    }
    if (ep && !ep->fn)
        ep = NULL;
    /* the epilogue rides on the GEMM tasks when one group computes every output */
    if (same && (!ep || (same_o && n <= 4)) &&
        mm_forward_group(out, x, pk, bias, n < 4 ? n : 4, N, ws, ep) == 0) {
        for (int i0 = 4; i0 < n; i0 += 4) {
            int k = n - i0 < 4 ? n - i0 : 4;
            if (mm_forward_group(out + i0, x, pk + i0, bias ? bias + i0 : NULL, k, N, ws, NULL))
                for (int i = i0; i < i0 + k; i++)
                    matmul_forward_packed_ws(out[i], x, pk[i], bias ? bias[i] : NULL, N, ws);
        }
        return;
    }
    for (int i = 0; i < n; i++) /* one by one, with their fallbacks */
        matmul_forward_packed_ws(out[i], x, pk[i], bias ? bias[i] : NULL, N, ws);
    if (ep && same_o)
        ep->fn(ep->ctx, 0, N, 0, pk[0]->O);
}

void matmul_backward_packed_ws(float *dx, float *dw, float *db, const float *dout,
                               const float *x, matmul_wpack *pk, int N, matmul_ws *ws)
{
    assert((!pk->frozen && !pk->codes) || !dx);   /* no backward form (matmul.h) */
    mm_backward_run(dx, dw, db, dout, x, pk->w, N, pk->IN, pk->O, pk->precision, pk, ws);
}

/* ---- dout handed over in row pairs: both B packs are made up front, so that
 * matmul_dout_backward cannot fail; the bf16 forms of dout live in ws->xpack
 * (rows) and ws->apack (pairs), x's pack in ws->bpack. ---- */

int matmul_dout_begin(matmul_ws *ws, matmul_wpack *pk, const float *x, int N)
{
    if (!ws || !pk || !x || N < 1 || pk->precision != MATMUL_BF16 ||
        mm_kernel_select(pk->precision) != MM_KERNEL_AVX512BF16)
        return 0;
    int IN = pk->IN, O = pk->O, fresh = 0;
    mm_view wb = {pk->w, IN, 1}, xb = {x, IN, 1};
    ws->bpack_x = NULL;
    if (mm_pack_ready(&pk->bwd, &pk->bwd_fresh, wb, O, IN, MM_KERNEL_AVX512BF16, MATMUL_BF16) ||
        mm_pack_ready(&ws->bpack, &fresh, xb, N, IN, MM_KERNEL_AVX512BF16, MATMUL_BF16))
        return 0;
    return mm_dout_reserve_impl(&ws->xpack, &ws->apack, N, O) == 0;
}

void matmul_dout_store(matmul_ws *ws, int n0, const float *rows)
{
    const float *r1 = n0 + 1 < ws->xpack.N ? rows + ws->xpack.K : NULL;
    mm_dout_store_impl(&ws->xpack, &ws->apack, n0, rows, r1);
}

void matmul_dout_backward(float *dx, float *dw, matmul_wpack *pk, int N, matmul_ws *ws)
{
    const mm_view none = {NULL, 0, 0}; /* A comes from the packs only */
    if (dx)
        mm_gemm_impl(dx, pk->IN, N, &none, &ws->xpack, 0, &pk->bwd, MM_INIT_ACCUM, NULL);
    if (dw)
        mm_gemm_impl(dw, pk->IN, pk->O, &none, &ws->apack, 0, &ws->bpack, MM_INIT_ACCUM, NULL);
}

void matmul_forward_packed(float *out, const float *x, matmul_wpack *pk, const float *bias, int N)
{
    matmul_forward_packed_ws(out, x, pk, bias, N, NULL);
}

void matmul_backward_packed(float *dx, float *dw, float *db, const float *dout, const float *x,
                            matmul_wpack *pk, int N)
{
    matmul_backward_packed_ws(dx, dw, db, dout, x, pk, N, NULL);
}

void matmul_forward_ws(float *out, const float *x, const float *w, const float *bias, int N,
                       int IN, int O, int precision, matmul_ws *ws)
{
    if (!mm_forward_trivial(out, bias, N, IN, O))
        mm_forward_run(out, x, w, bias, N, IN, O, precision, NULL, ws);
}

void matmul_backward_ws(float *dx, float *dw, float *db, const float *dout, const float *x,
                        const float *w, int N, int IN, int O, int precision, matmul_ws *ws)
{
    mm_backward_run(dx, dw, db, dout, x, w, N, IN, O, precision, NULL, ws);
}

/* Bytes mm_bpack_fill_impl reserves for a K x N operand (0: no kernel, sgemm). */
static size_t mm_bpack_bytes_for(int K, int N, int precision)
{
    int kernel = mm_kernel_select(precision);
    if (kernel < 0 || K < 1 || N < 1)
        return 0;
    size_t k_rows = mm_bpack_k_rows(K, (mm_kernel)kernel, precision == MATMUL_BF16);
    return k_rows * MM_NR * (size_t)((N + MM_NR - 1) / MM_NR) * sizeof(float);
}

size_t matmul_wpack_bytes_estimate(int IN, int O, int precision)
{
    return sizeof(matmul_wpack) + mm_bpack_bytes_for(IN, O, precision) +
           mm_bpack_bytes_for(O, IN, precision);
}

size_t matmul_ws_bytes_estimate(int N, int IN, int O, int precision, int unpacked_w)
{
    size_t b = mm_bpack_bytes_for(N, IN, precision), a = 0, xr = 0;
    if (mm_kernel_select(precision) == MM_KERNEL_AVX512BF16) {
        a = (size_t)(N + 1) / 2 * MM_MR * (size_t)((O + MM_MR - 1) / MM_MR) * sizeof(uint32_t);
        /* the row pack holds forward's x, or dout's rows after matmul_dout_begin */
        xr = mm_apack_rows_bytes_impl(N, IN > O ? IN : O);
    }
    if (mm_kernel_select(precision) == MM_KERNEL_AMX) {
        /* xpack: forward's x or dx's dout as bf16 rows (and decoded code panels);
         * apack: dw's dout^T as bf16 rows, or in inference an input's rows
         * (matmul_xrows_begin, slot LATER); bpack: dw's x (and unpacked w's forms) */
        size_t xs = mm_amx_apack_bytes_impl(N, IN > O ? IN : O) + mm_amx_dec_bytes_impl(IN);
        size_t ap = mm_amx_apack_bytes_impl(O, N), rows = mm_amx_apack_bytes_impl(N, IN);
        if (unpacked_w) {
            size_t f = mm_bpack_bytes_for(IN, O, precision), x = mm_bpack_bytes_for(O, IN, precision);
            b = b > f ? b : f;
            b = b > x ? b : x;
        }
        return sizeof(matmul_ws) + xs + (ap > rows ? ap : rows) + b;
    }
    if (mm_xpack_f32(mm_kernel_select(precision), precision, N)) /* x or dout, k-major fp32 */
        xr = (size_t)(N + MM_MR - 1) / MM_MR * MM_MR * (size_t)(IN > O ? IN : O) * sizeof(float);
    if (unpacked_w) {
        size_t f = mm_bpack_bytes_for(IN, O, precision), x = mm_bpack_bytes_for(O, IN, precision);
        b = b > f ? b : f;
        b = b > x ? b : x;
    }
    return sizeof(matmul_ws) + b + a + xr;
}

matmul_ws *matmul_ws_create(void) { return qs_calloc(1, sizeof(matmul_ws)); }

void matmul_ws_destroy(matmul_ws *ws)
{
    if (!ws)
        return;
    mm_bpack_free_impl(&ws->bpack);
    mm_bpack_free_impl(&ws->apack);
    mm_bpack_free_impl(&ws->xpack);
    qs_free(ws);
}

size_t matmul_ws_bytes(const matmul_ws *ws)
{
    return ws ? sizeof *ws + ws->bpack.bytes + ws->apack.bytes + ws->xpack.bytes : 0;
}

/* ---- frozen packs (inference) ---- */

int matmul_frozen_available(int precision) { return mm_kernel_select(precision) >= 0; }

int matmul_rows_independent(int precision) { return mm_kernel_select(precision) >= 0; }

/* A frozen pack of the right shape, its forward form filled by fill (0 or QS_ENOMEM). */
static matmul_wpack *mm_frozen_new(int IN, int O, int precision)
{
    if (IN < 1 || O < 1 || mm_kernel_select(precision) < 0)
        return NULL;
    matmul_wpack *pk = qs_calloc(1, sizeof *pk);
    if (!pk)
        return NULL;
    pk->IN = IN;
    pk->O = O;
    pk->precision = precision;
    pk->frozen = 1;
    return pk;
}

matmul_wpack *matmul_wpack_create_frozen(const float *w, int IN, int O, int precision)
{
    matmul_wpack *pk = w ? mm_frozen_new(IN, O, precision) : NULL;
    if (pk && matmul_wpack_frozen_set(pk, w)) {
        matmul_wpack_destroy(pk);
        return NULL;
    }
    return pk;
}

matmul_wpack *matmul_wpack_create_frozen_bf16(const uint16_t *w, int IN, int O, int precision)
{
    matmul_wpack *pk = w ? mm_frozen_new(IN, O, precision) : NULL;
    if (!pk)
        return NULL;
    int kernel = mm_kernel_select(precision);
    if (mm_bpack_fill_bf16_impl(&pk->fwd, w, IN, O, (mm_kernel)kernel,
                                precision == MATMUL_BF16)) {
        matmul_wpack_destroy(pk);
        return NULL;
    }
    pk->fwd_fresh = 1;
    return pk;
}

int matmul_wpack_frozen_set(matmul_wpack *pk, const float *w)
{
    if (!pk || !pk->frozen || !w)
        return QS_EINVAL;
    int kernel = pk->fwd_fresh ? (int)pk->fwd.kernel : mm_kernel_select(pk->precision);
    mm_view wt = {w, 1, pk->IN};
    pk->fwd_fresh = mm_bpack_fill_impl(&pk->fwd, wt, pk->IN, pk->O, (mm_kernel)kernel,
                                       pk->precision == MATMUL_BF16) == 0;
    return pk->fwd_fresh ? 0 : QS_ENOMEM;
}

int matmul_wpack_frozen(const matmul_wpack *pk) { return pk && pk->frozen; }

void matmul_wpack_row(matmul_wpack *pk, int o, float *out)
{
    if (pk->codes) {   /* decode(code), exact */
        mm_bpack_codes_row_impl(&pk->fwd, o, 0, pk->IN, NULL, out);
        return;
    }
    if (!pk->frozen) {   /* the forward form as the next product would build it */
        int kernel = mm_kernel_select(pk->precision);
        mm_view wt = {pk->w, 1, pk->IN};
        if (kernel < 0 ||
            mm_pack_ready(&pk->fwd, &pk->fwd_fresh, wt, pk->IN, pk->O, kernel, pk->precision)) {
            for (int i = 0; i < pk->IN; i++)   /* no pack: what sgemm / the loop read */
                out[i] = pk->precision == MATMUL_BF16 || pk->precision == MATMUL_BF16_AMX
                             ? mm_bf16_round(pk->w[(size_t)o * pk->IN + i])
                             : pk->w[(size_t)o * pk->IN + i];
            return;
        }
    }
    mm_bpack_col_impl(&pk->fwd, o, out);
}

size_t matmul_wpack_frozen_bytes_estimate(int IN, int O, int precision)
{
    return sizeof(matmul_wpack) + mm_bpack_bytes_for(IN, O, precision);
}

/* ---- HiF8 code packs ---- */

matmul_wpack *matmul_wpack_create_hif8(const uint8_t *codes, int IN, int O, int precision)
{
    if (!codes || IN < 1 || O < 1)
        return NULL;
    matmul_wpack *pk = qs_calloc(1, sizeof *pk);
    if (!pk)
        return NULL;
    /* code packs decode into bf16's micro-panels, or into AMX's B tiles (matmul_amx.c;
     * without AMX, MATMUL_BF16_AMX is MATMUL_BF16: matmul.h) */
    int kernel = mm_kernel_select(precision);
    if (precision == MATMUL_BF16_AMX && kernel < 0)
        kernel = mm_kernel_select(MATMUL_BF16);
    pk->IN = IN;
    pk->O = O;
    pk->precision = precision;
    pk->codes = 1;
    pk->sgemm = kernel < 0;
    if (mm_bpack_fill_codes_impl(&pk->fwd, codes, IN, O,
                                 kernel < 0 ? MM_KERNEL_C : (mm_kernel)kernel,
                                 precision == MATMUL_BF16 || precision == MATMUL_BF16_AMX)) {
        matmul_wpack_destroy(pk);
        return NULL;
    }
    pk->fwd_fresh = 1;
    return pk;
}

int matmul_wpack_hif8(const matmul_wpack *pk) { return pk && pk->codes; }

int matmul_wpack_precision(const matmul_wpack *pk) { return pk->precision; }

void matmul_wpack_hif8_read(const matmul_wpack *pk, uint8_t *codes, float *values)
{
    for (int o = 0; o < pk->O; o++)
        mm_bpack_codes_row_impl(&pk->fwd, o, 0, pk->IN, codes ? codes + (size_t)o * pk->IN : NULL,
                                values ? values + (size_t)o * pk->IN : NULL);
}

size_t matmul_wpack_hif8_bytes_estimate(int IN, int O)
{
    return sizeof(matmul_wpack) +
           (size_t)(IN + 1) / 2 * MM_NR * (size_t)((O + MM_NR - 1) / MM_NR) * sizeof(uint16_t);
}
