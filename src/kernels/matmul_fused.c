/* matmul_fused.c: products whose outputs are not stored, and products whose
 * input arrives already in the GEMM's own format (include/qs/matmul.h:
 * matmul_forward_packed_blocks_ws, matmul_xrows_*).  Both are for inference on
 * the AMX GEMM (matmul_amx.c), where an MLP's gate/up outputs (2 x N x 6144
 * fp32 for a 1B model) were written to memory, read back by SwiGLU, whose
 * output was written in fp32 and read back again to be converted to the down
 * projection's bf16 rows: now each block of gate/up goes from the tiles to a
 * per-thread scratch, SwiGLU reads it there, and its result goes straight into
 * those bf16 rows.  RMSNorm's rows go into the next GEMM's rows the same way
 * as each is done, instead of in a conversion pass of the GEMM.  Two slots:
 * NEXT is ws->xpack, the GEMM's own A scratch (the next forward call reads it
 * instead of converting into it), LATER is ws->apack, which only dW uses
 * otherwise.  Rows are rounded as mm_amx_arow rounds them
 * (mm_bf16_row_avx512bf16_impl), padded as it pads them, so every product keeps
 * its bits.  A slot's shape (its pack's N and K) is set by begin and cleared
 * when a product has read it.
 */
#include <assert.h>
#include <string.h>

#include "matmul_impl.h"
#include "qs/matmul.h"

/* ws's memory for a slot's rows */
static mm_bpack *mm_xrows_pack(matmul_ws *ws, int slot)
{
    return slot == MATMUL_XROWS_NEXT ? &ws->xpack : &ws->apack;
}

/* the slot holds rows stored for N x IN (a begin that said 1) */
static int mm_xrows_hold(const mm_bpack *rows, int N, int IN)
{
    return rows->data && rows->N == N && rows->K == IN;
}

int matmul_forward_packed_blocks_ws(const float *x, matmul_wpack *const *pk,
                                    const float *const *bias, int n, int N, matmul_ws *ws,
                                    matmul_block_fn fn, void *ctx)
{
    const mm_bpack *bp[4];
    mm_init init[4];
    if (n < 1 || n > 4 || N < 1 || !fn || (!x && !ws))
        return -1;
    for (int i = 0; i < n; i++) {
        bp[i] = mm_wpack_fwd_amx_impl(pk[i]);
        if (!bp[i] || bp[i]->K != bp[0]->K || bp[i]->N != bp[0]->N)
            return -1;
        init[i] = bias && bias[i] ? MM_INIT_BIAS : MM_INIT_ZERO;
    }
    /* x NULL: its rows are in the slot, stored for this shape (asserted: the
     * caller's begin said 1) */
    assert(x || mm_xrows_hold(&ws->xpack, N, bp[0]->K));
    mm_bpack tmp = {0};
    mm_view xa = {x, bp[0]->K, 1};
    const mm_blocks blocks = {fn, ctx};
    mm_gemm_amx_impl(n, NULL, NULL, N, &xa, ws ? &ws->xpack : &tmp, !x, bp, init, bias, NULL,
                     &blocks);
    mm_bpack_free_impl(&tmp);
    if (!x)
        ws->xpack.N = ws->xpack.K = 0;   /* read once */
    return 0;
}

int matmul_xrows_begin(matmul_ws *ws, int slot, matmul_wpack *pk, int N)
{
    const mm_bpack *bp = ws && N > 0 ? mm_wpack_fwd_amx_impl(pk) : NULL;
    if (!bp)
        return 0;
    mm_bpack *xr = mm_xrows_pack(ws, slot);
    const int IN = bp->K;
    const size_t ld = mm_amx_ld_impl(IN), bytes = mm_amx_apack_bytes_impl(N, IN);
    if (mm_pack_reserve_impl(xr, bytes))
        return 0;
    xr->K = IN;
    xr->N = N;
    /* the padding the GEMM reads as zeros: each row past IN, the rows past N */
    uint8_t *rows = xr->data;
    for (int r = 0; r < N; r++)
        memset(rows + (size_t)r * ld + (size_t)IN * 2, 0, ld - (size_t)IN * 2);
    memset(rows + (size_t)N * ld, 0, bytes - (size_t)N * ld);
    return 1;
}

void matmul_xrows_store(matmul_ws *ws, int slot, int n0, int rows, int k0, int cols,
                        const float *vals, int ld)
{
    mm_bpack *xr = mm_xrows_pack(ws, slot);
    const size_t row_bytes = mm_amx_ld_impl(xr->K);
    uint8_t *base = (uint8_t *)xr->data + (size_t)n0 * row_bytes + (size_t)k0 * 2;
    for (int r = 0; r < rows; r++)
        mm_bf16_row_avx512bf16_impl((uint16_t *)(void *)(base + (size_t)r * row_bytes),
                                    vals + (size_t)r * ld, cols);
}

void matmul_xrows_forward(float *const *out, matmul_wpack *const *pk, const float *const *bias,
                          int n, int N, matmul_ws *ws, int slot)
{
    const mm_bpack *bp[4];
    ptrdiff_t ldc[4];
    mm_init init[4];
    mm_bpack *xr = mm_xrows_pack(ws, slot);
    assert(n >= 1 && n <= 4);
    for (int i = 0; i < n; i++) {
        bp[i] = mm_wpack_fwd_amx_impl(pk[i]);
        /* a begin that said 1 for this IN and N (the packs are ready) */
        assert(bp[i] && bp[i]->K == xr->K && N == xr->N);
        ldc[i] = bp[i]->N;
        init[i] = bias && bias[i] ? MM_INIT_BIAS : MM_INIT_ZERO;
    }
    const mm_view none = {NULL, xr->K, 1};   /* A is in the slot */
    mm_gemm_amx_impl(n, out, ldc, N, &none, xr, 1, bp, init, bias, NULL, NULL);
    xr->N = xr->K = 0;   /* read once */
}
