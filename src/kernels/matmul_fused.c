/* matmul_fused.c: products whose outputs are not stored, and products whose
 * input arrives already in the GEMM's own format (include/qs/matmul.h:
 * matmul_forward_packed_blocks_ws, matmul_xrows_*).  Both are for inference on
 * the AMX GEMM (matmul_amx.c), where an MLP's gate/up outputs (2 x N x 6144
 * fp32 for a 1B model) were written to memory, read back by SwiGLU, whose
 * output was written in fp32 and read back again to be converted to the down
 * projection's bf16 rows: now each block of gate/up goes from the tiles to a
 * per-thread scratch, SwiGLU reads it there, and its result goes straight into
 * those bf16 rows (ws->apack, which only dW uses otherwise).  The rows are
 * rounded as mm_amx_arow rounds them (mm_bf16_row_avx512bf16_impl), so every
 * product keeps its bits.
 */
#include <assert.h>
#include <string.h>

#include "matmul_impl.h"
#include "qs/matmul.h"

int matmul_forward_packed_blocks_ws(const float *x, matmul_wpack *const *pk,
                                    const float *const *bias, int n, int N, matmul_ws *ws,
                                    matmul_block_fn fn, void *ctx)
{
    const mm_bpack *bp[4];
    mm_init init[4];
    if (n < 1 || n > 4 || N < 1 || !fn)
        return -1;
    for (int i = 0; i < n; i++) {
        bp[i] = mm_wpack_fwd_amx_impl(pk[i]);
        if (!bp[i] || bp[i]->K != bp[0]->K || bp[i]->N != bp[0]->N)
            return -1;
        init[i] = bias && bias[i] ? MM_INIT_BIAS : MM_INIT_ZERO;
    }
    mm_bpack tmp = {0};
    mm_view xa = {x, bp[0]->K, 1};
    const mm_blocks blocks = {fn, ctx};
    mm_gemm_amx_impl(n, NULL, NULL, N, &xa, ws ? &ws->xpack : &tmp, 0, bp, init, bias, NULL,
                     &blocks);
    mm_bpack_free_impl(&tmp);
    return 0;
}

int matmul_xrows_begin(matmul_ws *ws, matmul_wpack *pk, int N)
{
    const mm_bpack *bp = ws && N > 0 ? mm_wpack_fwd_amx_impl(pk) : NULL;
    if (!bp)
        return 0;
    const int IN = bp->K;
    const size_t ld = mm_amx_ld_impl(IN), bytes = mm_amx_apack_bytes_impl(N, IN);
    if (mm_pack_reserve_impl(&ws->apack, bytes))
        return 0;
    ws->apack.K = IN;
    ws->apack.N = N;
    /* the padding the GEMM reads as zeros: each row past IN, the rows past N */
    uint8_t *rows = ws->apack.data;
    for (int r = 0; r < N; r++)
        memset(rows + (size_t)r * ld + (size_t)IN * 2, 0, ld - (size_t)IN * 2);
    memset(rows + (size_t)N * ld, 0, bytes - (size_t)N * ld);
    return 1;
}

void matmul_xrows_store(matmul_ws *ws, int n0, int rows, int k0, int cols, const float *vals,
                        int ld)
{
    const size_t row_bytes = mm_amx_ld_impl(ws->apack.K);
    uint8_t *base = (uint8_t *)ws->apack.data + (size_t)n0 * row_bytes + (size_t)k0 * 2;
    for (int r = 0; r < rows; r++)
        mm_bf16_row_avx512bf16_impl((uint16_t *)(void *)(base + (size_t)r * row_bytes),
                                    vals + (size_t)r * ld, cols);
}

void matmul_xrows_forward(float *out, matmul_wpack *pk, const float *bias, int N, matmul_ws *ws)
{
    const mm_bpack *bp = mm_wpack_fwd_amx_impl(pk);
    /* a begin that said 1 for this pack's IN and this N (its pack is ready) */
    assert(bp && N == ws->apack.N && bp->K == ws->apack.K);
    const ptrdiff_t ldc = bp->N;
    const mm_init init = bias ? MM_INIT_BIAS : MM_INIT_ZERO;
    const mm_view none = {NULL, bp->K, 1};   /* A is in ws->apack */
    mm_gemm_amx_impl(1, &out, &ldc, N, &none, &ws->apack, 1, &bp, &init, &bias, NULL, NULL);
}
