/* matmul_amx.c: MATMUL_BF16_AMX's GEMM on the AMX tiles (CPUs with cpu_amx_bf16()).
 *
 * C[M, N] = init + A[M, K] B[K, N] by TDPBF16PS (matmul.h states the contract):
 * the forward (B the packed weight), dx (B the weight's other form) and dw (A
 * dout^T, B the tokens' x packed per call).
 *  - B: a pack in the bf16 pair format (panels of MM_NR = 32 columns, [K/2][32]
 *    pairs), each panel's pair rows padded with zeros to a multiple of 16, so
 *    k tile t of a panel is 16 pair rows of 128 bytes: the B tile of columns
 *    0-15 is the first 64 bytes of each row, that of columns 16-31 the second
 *    (tile loads take a stride).
 *  - A: converted to bf16 once per call (round to nearest even, subnormals to
 *    zero: mm_bf16_bits), rows padded to a multiple of 32 and K to a multiple
 *    of 32 with zeros, row stride an odd multiple of 64 bytes (rows of a tile
 *    spread over L1 sets).  Without that memory each A tile is converted into a
 *    1 KB buffer as it is loaded: the same values, the same bits.
 *  - Register blocking: 2 A tiles (32 rows) x 2 B tiles (one panel) -> 4 C
 *    tiles of 16 x 16 fp32 (tmm0-3; A in tmm4-5, B in tmm6-7), configured once
 *    per thread.  Each C tile starts from init (zero, bias rows, or C itself),
 *    takes the k tiles in order t = 0, 1, ... and is stored: the chain of every
 *    output element is fixed by K alone, so a row's bits do not depend on the
 *    other rows, on N, on the task shape or on the thread count.
 *  - K passes: when the converted A of the call (M x K bf16) is larger than
 *    MM_AMX_PASS_A_KB, K is cut into passes of whole k tiles so that one pass's
 *    A stays in L2 while every panel goes by (a 1B model's down projection, K
 *    6144: 6 MB of A would otherwise come from L3 once per panel).  The C tiles
 *    are stored after each pass and loaded for the next (fp32, exact), so the
 *    chain is the same: the bits do not depend on the passes either.  Rows
 *    are cut into groups too, when reading B once more per group moves fewer
 *    bytes than that C traffic: tasks of one group's rows, taken group by
 *    group, a group's A per pass in the same bytes (mm_amx_plan_impl; the 1B
 *    body shapes at 1,024-4,096 rows: 0.56-1.16 -> 1.39-1.51 TFLOP/s).
 *  - Prefetch: the next k tile of A and B into L1 while one computes, the
 *    next panel into L2 during the first block of a panel, and in a pass after
 *    the first the next block's C into L2 (1B down projection at 1,024 rows:
 *    1.17 -> 1.29 TFLOP/s).  A task of one row
 *    block (decode, short prompts: each byte of B is used once, straight from
 *    memory) prefetches B into L2 MM_AMX_STREAM_TILES tiles ahead instead, over
 *    its panels as one stream (decode of a 1B bf16 checkpoint at bf16-amx:
 *    9.2-9.5 -> 10.8-11.1 tokens/s; 8 or 16 KB ahead, or the next panel,
 *    gained less).
 *  - Outputs handed over as blocks (matmul_fused.c: inference's gate/up, for
 *    SwiGLU): each 32 x 32 block of every GEMM of the pair is stored into a
 *    contiguous per-thread scratch and given to the caller's fn there, K in
 *    one pass (row groups whose A fits instead of passes).  Stored at its own
 *    row stride (6144 floats: every row of a block in one L1 set), a block's
 *    tiles took 148 ns against 21 contiguous, and SwiGLU read them back from
 *    L3.  A given as rows already converted (matmul_xrows_*) is read as is.
 *  - Threads share tasks of whole panels (the weights are the big operand),
 *    cut along M too when there are few panels; rows and columns past M and N
 *    go through a tile buffer.  When B is small (<= 2 MB) and the rows many
 *    (dw of a wide head: A = dout^T of 32000 rows), tasks are row ranges over
 *    every panel instead, row block outer, K in one pass: A is read once.
 *  - A transposed view (dw's dout^T) is converted 16 rows at a time, each row
 *    16 k at a time by a gather (the 16 lines of a k block stay in L1), the
 *    lines of the k block after next prefetched.
 *  - HiF8 code packs (matmul_hif8.c): each code panel is decoded to bf16 pairs
 *    in this tile layout (exact: every HiF8 value is a bf16), one k tile at
 *    a time into the scratch as a block goes (decode of the HiF8 1B export at
 *    bf16-amx 12.0-12.6 -> 12.3-13.5 tokens/s against 8 tiles at a time; 2, 4
 *    and 16 were in between or slower), or once per task and pass into a
 *    per-thread panel after A's rows when the task has several row blocks:
 *    the bits of the bf16-amx pack of the decoded weight.
 */
#include <immintrin.h>
#include <string.h>

#include "matmul_bf16_avx512_impl.h"
#include "matmul_impl.h"
#include "qs/matmul_test.h"

#ifdef _OPENMP
#include <omp.h>
#endif

enum {
    MM_AMX_T = 16,                /* rows of a tile; fp32 columns of a C tile */
    MM_AMX_MB = 32,               /* rows of a register block (two A tiles) */
    MM_AMX_KT = 2 * MM_AMX_KP,    /* k values per tile */
    MM_AMX_TASKS_PER_THREAD = 4,  /* dynamic scheduling evens out a shared machine */
    MM_AMX_MAX_PANELS = 16,       /* panels per task at most */
    MM_AMX_MULTI = 4,
    MM_AMX_PASS_A_KB = 1536,      /* converted A per K pass: most of a 2 MB L2 */
    MM_AMX_PASS_MIN_KT = 8,       /* k tiles per K pass at least */
    MM_AMX_TILE_BYTES = MM_AMX_KP * MM_NR * 4,   /* one k tile of a panel: 16 pair rows */
    MM_AMX_STREAM_TILES = 2,      /* tiles of B prefetched ahead by tasks of one row block */
    MM_AMX_ROWS_OUTER_B_KB = 2048, /* B up to this: tasks of rows over every panel (1 MB:
                                     dW of a 32000-wide head at N = 1024 and of the 1B head
                                     at N = 512 2x slower, K in 4 passes) */
};

typedef struct mm_amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} mm_amx_cfg;

/* Where A tiles come from: converted rows, or the fp32 view tile by tile. */
typedef struct mm_amx_a {
    const uint8_t *rows; /* bf16 rows (NULL: convert per tile) */
    size_t ld;           /* their stride in bytes */
    mm_view v;
    int M, K;
} mm_amx_a;

typedef struct mm_amx_job {
    float *c;
    ptrdiff_t ldc;
    const mm_bpack *bp;
    mm_init init;
    const float *bias;
    int t0, t1;           /* k tiles of this pass */
    int rows_outer;       /* blocks row block by row block, each over every panel */
    float *cblk;          /* not NULL: C of each block there ([32][32], contiguous), not in c */
} mm_amx_job;

/* Per-thread buffers (~26 KB, on the stack). */
typedef struct mm_amx_scratch {
    _Alignas(64) float ct[4][MM_AMX_T][MM_AMX_T];    /* C tiles past M or N */
    _Alignas(64) uint16_t at[2][MM_AMX_T][MM_AMX_KT]; /* A tiles converted per load */
    _Alignas(64) uint8_t dec[MM_AMX_TILE_BYTES];     /* a code k tile decoded */
    _Alignas(64) float blk[MM_AMX_MULTI][MM_AMX_MB][MM_NR]; /* blocks handed to a block fn */
} mm_amx_scratch;

static void mm_amx_config(void)
{
    mm_amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = MM_AMX_T;
    }
    _tile_loadconfig(&cfg);
}

/* Row stride (bytes) of the converted A: K padded to whole tiles, then to an
 * odd multiple of 64 bytes. */
static size_t mm_amx_ld(int K)
{
    size_t ld = (size_t)(K + MM_AMX_KT - 1) / MM_AMX_KT * 64;
    return (ld / 64) % 2 ? ld : ld + 64;
}

size_t mm_amx_ld_impl(int K) { return mm_amx_ld(K); }

size_t mm_amx_apack_bytes_impl(int M, int K)
{
    return (size_t)(M + MM_AMX_MB - 1) / MM_AMX_MB * MM_AMX_MB * mm_amx_ld(K);
}

/* Row m of the converted A: bf16 of A(m, k), zero for k >= K and m >= M. */
static void mm_amx_arow(uint8_t *dst, const mm_view *a, int M, int K, size_t ld, int m)
{
    uint16_t *d = (uint16_t *)(void *)dst;
    int k0 = 0;
    if (m < M && a->cs == 1) {
        mm_bf16_row_avx512bf16_impl(d, a->p + (ptrdiff_t)m * a->rs, K);
        k0 = K;
    } else if (m < M) {
        for (; k0 < K; k0++)
            d[k0] = mm_bf16_bits(a->p[(ptrdiff_t)m * a->rs + (ptrdiff_t)k0 * a->cs]);
    }
    memset(d + k0, 0, ld - (size_t)k0 * sizeof *d);
}

/* Rows [m0, m0 + 16) of the converted A from a transposed view (rs 1: A(m, k)
 * = p[m + k cs], as dW's dout^T): each row 16 k at a time, gathered (the 16
 * values of a block of rows at one k share a cache line, so a block's gathers
 * stay in L1), rounded as mm_bf16_bits (mm_bf16_lanes) and stored; the same
 * bits as mm_amx_arow. */
static void mm_amx_arows_t(uint8_t *dst, const mm_view *a, int M, int K, size_t ld, int m0)
{
    const int mr = M - m0 < MM_AMX_T ? M - m0 : MM_AMX_T;
    const __m512i step = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                              11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)a->cs));
    /* 32-bit gather offsets: k_full stays 0 (the scalar loop) past 2^31 bytes */
    const int k_full = a->cs * (ptrdiff_t)MM_AMX_T < (ptrdiff_t)1 << 29 ? K / MM_AMX_T * MM_AMX_T : 0;
    /* k blocks outer: the block's 16 lines of A^T serve the 16 rows from L1 */
    for (int k = 0; k < k_full; k += MM_AMX_T) {
        /* the k block after next: its 16 lines come from L2 / L3 / memory, one per
         * row of the untransposed matrix, a pattern no hardware prefetcher follows */
        if (k + 3 * MM_AMX_T <= k_full)
            for (int i = 0; i < MM_AMX_T; i++)
                _mm_prefetch((const char *)(a->p + m0 + (ptrdiff_t)(k + 2 * MM_AMX_T + i) * a->cs),
                             _MM_HINT_T0);
        for (int r = 0; r < mr; r++) {
            __m512 v = _mm512_i32gather_ps(step, a->p + m0 + r + (ptrdiff_t)k * a->cs, 4);
            _mm256_storeu_si256((__m256i *)(void *)(dst + (size_t)(m0 + r) * ld) + k / MM_AMX_T,
                                _mm512_cvtepi32_epi16(mm_bf16_lanes(v)));
        }
    }
    for (int r = 0; r < MM_AMX_T; r++) {
        uint16_t *d = (uint16_t *)(void *)(dst + (size_t)(m0 + r) * ld);
        int k = r < mr ? k_full : 0;
        for (; r < mr && k < K; k++)
            d[k] = mm_bf16_bits(a->p[m0 + r + (ptrdiff_t)k * a->cs]);
        memset(d + k, 0, ld - (size_t)k * sizeof *d);
    }
}

/* The A tile of rows [m0, m0 + 16), k tile t, converted into buf (no converted
 * rows: the per-tile path); mm_amx_atile gives a pointer and its stride. */
static const void *mm_amx_atile_convert(const mm_amx_a *a, int m0, int t,
                                        uint16_t buf[][MM_AMX_KT], size_t *ld)
{
    for (int r = 0; r < MM_AMX_T; r++)
        for (int k = 0; k < MM_AMX_KT; k++) {
            int m = m0 + r, kk = t * MM_AMX_KT + k;
            buf[r][k] = m < a->M && kk < a->K
                            ? mm_bf16_bits(a->v.p[(ptrdiff_t)m * a->v.rs + (ptrdiff_t)kk * a->v.cs])
                            : 0;
        }
    *ld = sizeof buf[0];
    return buf;
}

static inline __attribute__((always_inline)) const void *
mm_amx_atile(const mm_amx_a *a, int m0, int t, uint16_t buf[][MM_AMX_KT], size_t *ld)
{
    if (!a->rows)
        return mm_amx_atile_convert(a, m0, t, buf, ld);
    *ld = a->ld;
    return a->rows + (size_t)m0 * a->ld + (size_t)t * 64;
}

/* C tile (r, h) of a block: rows m0 + 16 r, columns j0 + 16 h; mr x nj valid. */
static void mm_amx_cinit(const mm_amx_job *jb, int m0, int mr, int j0, int nj, int full,
                         mm_amx_scratch *s)
{
    float *c = jb->cblk ? NULL : jb->c + (ptrdiff_t)m0 * jb->ldc + j0;
    if (jb->init == MM_INIT_ZERO) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        return;
    }
    if (jb->init == MM_INIT_ACCUM && full) {
        size_t st = (size_t)jb->ldc * sizeof *c;
        _tile_loadd(0, c, st);
        _tile_loadd(1, c + MM_AMX_T, st);
        _tile_loadd(2, c + MM_AMX_T * jb->ldc, st);
        _tile_loadd(3, c + MM_AMX_T * jb->ldc + MM_AMX_T, st);
        return;
    }
    if (jb->init == MM_INIT_BIAS && nj == MM_NR) {   /* every row the bias: stride 0 */
        const float *bias = jb->bias + j0;
        _tile_loadd(0, bias, 0);
        _tile_loadd(1, bias + MM_AMX_T, 0);
        _tile_loadd(2, bias, 0);
        _tile_loadd(3, bias + MM_AMX_T, 0);
        return;
    }
    /* through the tile buffer: the columns inside N (the rest zero) of the bias,
     * or of C's rows inside M */
    for (int q = 0; q < 4; q++) {
        int r0 = (q >> 1) * MM_AMX_T, c0 = (q & 1) * MM_AMX_T;
        __mmask16 km = (__mmask16)mm_cols_mask16(nj - c0);
        for (int r = 0; r < MM_AMX_T; r++) {
            const float *src = jb->init == MM_INIT_BIAS ? jb->bias + j0 + c0
                               : r0 + r < mr      ? c + (ptrdiff_t)(r0 + r) * jb->ldc + c0
                                                  : NULL;
            __m512 v = src ? _mm512_maskz_loadu_ps(km, src) : _mm512_setzero_ps();
            _mm512_store_ps(s->ct[q][r], v);
        }
    }
    _tile_loadd(0, s->ct[0], 64);
    _tile_loadd(1, s->ct[1], 64);
    _tile_loadd(2, s->ct[2], 64);
    _tile_loadd(3, s->ct[3], 64);
}

static void mm_amx_cstore(const mm_amx_job *jb, int m0, int mr, int j0, int nj, int full,
                          mm_amx_scratch *s)
{
    if (jb->cblk) {   /* the whole block, contiguous: 4 KB over every L1 set */
        _tile_stored(0, jb->cblk, MM_NR * sizeof(float));
        _tile_stored(1, jb->cblk + MM_AMX_T, MM_NR * sizeof(float));
        _tile_stored(2, jb->cblk + MM_AMX_T * MM_NR, MM_NR * sizeof(float));
        _tile_stored(3, jb->cblk + MM_AMX_T * MM_NR + MM_AMX_T, MM_NR * sizeof(float));
        return;
    }
    float *c = jb->c + (ptrdiff_t)m0 * jb->ldc + j0;
    if (full) {
        size_t st = (size_t)jb->ldc * sizeof *c;
        _tile_stored(0, c, st);
        _tile_stored(1, c + MM_AMX_T, st);
        _tile_stored(2, c + MM_AMX_T * jb->ldc, st);
        _tile_stored(3, c + MM_AMX_T * jb->ldc + MM_AMX_T, st);
        return;
    }
    _tile_stored(0, s->ct[0], 64);
    _tile_stored(1, s->ct[1], 64);
    _tile_stored(2, s->ct[2], 64);
    _tile_stored(3, s->ct[3], 64);
    for (int q = 0; q < 4; q++) {
        int r0 = (q >> 1) * MM_AMX_T, c0 = (q & 1) * MM_AMX_T;
        __mmask16 km = (__mmask16)mm_cols_mask16(nj - c0);
        if (!km)
            continue;
        for (int r = 0; r < MM_AMX_T && r0 + r < mr; r++)
            _mm512_mask_storeu_ps(c + (ptrdiff_t)(r0 + r) * jb->ldc + c0, km,
                                  _mm512_load_ps(s->ct[q][r]));
    }
}

/* k tile t of the block at rows m0 (mr of them) into tmm0-3, B's tile at b;
 * the next k tile of A prefetched into L1 when there is one (more). */
static inline __attribute__((always_inline)) void
mm_amx_ktile(const mm_amx_a *a, int m0, int mr, int t, int more, const uint8_t *b, int two_a,
             int two_b, mm_amx_scratch *s)
{
    size_t lda;
    if (more && a->rows) {
        const uint8_t *an = a->rows + (size_t)m0 * a->ld + (size_t)(t + 1) * 64;
        for (int r = 0; r < mr; r++)
            _mm_prefetch((const char *)an + (size_t)r * a->ld, _MM_HINT_T0);
    }
    _tile_loadd(4, mm_amx_atile(a, m0, t, s->at[0], &lda), lda);
    _tile_loadd(6, b, MM_NR * 4);
    if (two_b)
        _tile_loadd(7, b + 64, MM_NR * 4);
    _tile_dpbf16ps(0, 4, 6);
    if (two_b)
        _tile_dpbf16ps(1, 4, 7);
    if (two_a) {
        _tile_loadd(5, mm_amx_atile(a, m0 + MM_AMX_T, t, s->at[1], &lda), lda);
        _tile_dpbf16ps(2, 5, 6);
        if (two_b)
            _tile_dpbf16ps(3, 5, 7);
    }
}

/* Rows [m0, m0 + mr) (mr <= 32) x panel p of one GEMM, k tiles [t0, t1) of
 * the pass, B's tile t at panel + (t - tb) tiles (the pack's panel, tb = 0, or
 * a code panel decoded from tile tb on).  Tiles wholly past M or N are not
 * multiplied (their C tiles stay as initialized and are not stored).  The next
 * k tile of A and B is prefetched into L1 while this one computes, and pf (the
 * next panel) into L2; with stream_end (the end of the task's panels, when this
 * block is the only one to read them) the tile MM_AMX_STREAM_TILES ahead goes
 * to L2 instead, up to stream_end.  cnext (a pass after the first: the next
 * block starts from C) has its lines prefetched into L2, two rows a k tile. */
static void mm_amx_block(const mm_amx_job *jb, const mm_amx_a *a, int m0, int mr, int p,
                         const uint8_t *panel, int tb, const uint8_t *pf,
                         const uint8_t *stream_end, const float *cnext, int cn_rows,
                         int cn_cols, mm_amx_scratch *s)
{
    const mm_bpack *bp = jb->bp;
    const int j0 = p * MM_NR, nj = bp->N - j0 < MM_NR ? bp->N - j0 : MM_NR;
    const int two_a = mr > MM_AMX_T, two_b = nj > MM_AMX_T, full = mr == MM_AMX_MB && nj == MM_NR;
    mm_amx_cinit(jb, m0, mr, j0, nj, full, s);
    for (int t = jb->t0; t < jb->t1; t++) {
        const uint8_t *b = panel + (size_t)(t - tb) * MM_AMX_TILE_BYTES;
        if (stream_end &&
            stream_end - b >= (ptrdiff_t)(MM_AMX_STREAM_TILES + 1) * MM_AMX_TILE_BYTES)
            for (size_t l = 0; l < MM_AMX_TILE_BYTES; l += 64)
                _mm_prefetch((const char *)b + MM_AMX_STREAM_TILES * MM_AMX_TILE_BYTES + l,
                             _MM_HINT_T1);
        else if (pf)
            for (size_t l = 0; l < MM_AMX_TILE_BYTES; l += 64)
                _mm_prefetch((const char *)pf + (size_t)t * MM_AMX_TILE_BYTES + l, _MM_HINT_T1);
        if (t + 1 < jb->t1)
            for (size_t l = 0; l < MM_AMX_TILE_BYTES; l += 64)
                _mm_prefetch((const char *)b + MM_AMX_TILE_BYTES + l, _MM_HINT_T0);
        for (int r = (t - jb->t0) * 2; cnext && r < cn_rows && r < (t - jb->t0) * 2 + 2; r++) {
            const float *cr = cnext + (ptrdiff_t)r * jb->ldc;
            _mm_prefetch((const char *)cr, _MM_HINT_T1);
            _mm_prefetch((const char *)(cr + cn_cols - 1), _MM_HINT_T1);
        }
        mm_amx_ktile(a, m0, mr, t, t + 1 < jb->t1, b, two_a, two_b, s);
    }
    mm_amx_cstore(jb, m0, mr, j0, nj, full, s);
}

/* Code packs (HiF8, matmul_hif8.c): k tiles [ta, tb) of code panel p decoded
 * to bf16 pairs in the tile layout at dst, pair rows past K zero. */
static void mm_amx_decode(const mm_amx_job *jb, int p, int ta, int tb, uint8_t *dst)
{
    const mm_bpack *bp = jb->bp;
    const int kp_n = (int)(bp->panel_elems / MM_NR), r0 = ta * MM_AMX_KP;
    const int r1 = tb * MM_AMX_KP < kp_n ? tb * MM_AMX_KP : kp_n;
    const size_t row_bytes = (size_t)MM_NR * 4;
    if (r1 > r0)
        mm_codes_decode_impl(dst, (const uint16_t *)bp->data + (size_t)p * bp->panel_elems +
                                      (size_t)r0 * MM_NR,
                             r1 - r0, MM_DECODE_PAIRS | (bp->codes_nan ? 0 : MM_DECODE_NO_NAN));
    size_t done = r1 > r0 ? (size_t)(r1 - r0) * row_bytes : 0;
    memset(dst + done, 0, (size_t)(tb - ta) * MM_AMX_TILE_BYTES - done);
}

/* A block of a code pack with the panel decoded as it goes, one k tile at a
 * time into the scratch (L1): for tasks of one block (decode: every code is
 * used once) or without memory for a decoded panel. */
static void mm_amx_block_codes(const mm_amx_job *jb, const mm_amx_a *a, int m0, int mr, int p,
                               mm_amx_scratch *s)
{
    const mm_bpack *bp = jb->bp;
    const int j0 = p * MM_NR, nj = bp->N - j0 < MM_NR ? bp->N - j0 : MM_NR;
    const int two_a = mr > MM_AMX_T, two_b = nj > MM_AMX_T, full = mr == MM_AMX_MB && nj == MM_NR;
    mm_amx_cinit(jb, m0, mr, j0, nj, full, s);
    for (int t = jb->t0; t < jb->t1; t++) {
        mm_amx_decode(jb, p, t, t + 1, s->dec);
        mm_amx_ktile(a, m0, mr, t, t + 1 < jb->t1, s->dec, two_a, two_b, s);
    }
    mm_amx_cstore(jb, m0, mr, j0, nj, full, s);
}

/* Block (m0, panel p) of a value pack's task (rows [i0, i0 + mc) x panels
 * [p0, p0 + pc), panel by panel: the panel stays in L2 while the rows go by),
 * with its prefetches: the next panel into L2 during the task's first row
 * block; a task of one row block reads its panels once, as one stream (dec:
 * a code panel decoded for the pass, from k tile t0 on, instead); a pass
 * after the first starts each block from C, so the next block's C lines go to
 * L2 while this one computes. */
static void mm_amx_vblock(const mm_amx_job *jb, const mm_amx_a *a, int i0, int mc, int p0,
                          int pc, int p, int m0, const uint8_t *dec, mm_amx_scratch *s)
{
    const mm_bpack *bp = jb->bp;
    const int n_panels = (bp->N + MM_NR - 1) / MM_NR;
    const uint8_t *panel = dec ? dec : (const uint8_t *)bp->data + (size_t)p * bp->panel_elems * 4;
    const uint8_t *next = p + 1 < n_panels && !dec ? panel + bp->panel_elems * 4 : NULL;
    const uint8_t *stream_end =
        mc <= MM_AMX_MB && !dec
            ? (const uint8_t *)bp->data + (size_t)(p0 + pc) * bp->panel_elems * 4
            : NULL;
    const float *cnext = NULL;
    int cn_m = i0, cn_p = p + 1;
    if (m0 + MM_AMX_MB < i0 + mc) {
        cn_m = m0 + MM_AMX_MB;
        cn_p = p;
    }
    if (jb->init == MM_INIT_ACCUM && cn_p < p0 + pc)
        cnext = jb->c + (ptrdiff_t)cn_m * jb->ldc + cn_p * MM_NR;
    const int cn_rows = i0 + mc - cn_m < MM_AMX_MB ? i0 + mc - cn_m : MM_AMX_MB;
    const int cn_cols = bp->N - cn_p * MM_NR < MM_NR ? bp->N - cn_p * MM_NR : MM_NR;
    mm_amx_block(jb, a, m0, i0 + mc - m0 < MM_AMX_MB ? i0 + mc - m0 : MM_AMX_MB, p, panel,
                 dec ? jb->t0 : 0, m0 == i0 ? next : NULL, stream_end, cnext, cn_rows, cn_cols,
                 s);
}

/* Task: rows [i0, i0 + mc) x panels [p0, p0 + pc) of one GEMM, panel by panel
 * (the panel stays in L2 while the rows go by).  A code panel is decoded once
 * per task into dec (the pass's k tiles) when the task has several blocks and
 * dec is there, else block by block as it goes. */
static void mm_amx_task(const mm_amx_job *jb, const mm_amx_a *a, int i0, int mc, int p0, int pc,
                        uint8_t *dec, mm_amx_scratch *s)
{
    const mm_bpack *bp = jb->bp;
    if (jb->rows_outer) {   /* B small (in L2), A large: a row block's A stays in L1/L2 */
        for (int m0 = i0; m0 < i0 + mc; m0 += MM_AMX_MB)
            for (int p = p0; p < p0 + pc; p++)
                mm_amx_block(jb, a, m0, i0 + mc - m0 < MM_AMX_MB ? i0 + mc - m0 : MM_AMX_MB, p,
                             (const uint8_t *)bp->data + (size_t)p * bp->panel_elems * 4, 0,
                             NULL, NULL, NULL, 0, 0, s);
        return;
    }
    for (int p = p0; p < p0 + pc; p++) {
        if (!bp->codes) {
            for (int m0 = i0; m0 < i0 + mc; m0 += MM_AMX_MB)
                mm_amx_vblock(jb, a, i0, mc, p0, pc, p, m0, NULL, s);
            continue;
        }
        if (mc <= MM_AMX_MB || !dec) {
            for (int m0 = i0; m0 < i0 + mc; m0 += MM_AMX_MB)
                mm_amx_block_codes(jb, a, m0, i0 + mc - m0 < MM_AMX_MB ? i0 + mc - m0 : MM_AMX_MB,
                                   p, s);
            continue;
        }
        mm_amx_decode(jb, p, jb->t0, jb->t1, dec);
        for (int m0 = i0; m0 < i0 + mc; m0 += MM_AMX_MB)
            mm_amx_vblock(jb, a, i0, mc, p0, pc, p, m0, dec, s);
    }
}

/* Paired GEMMs (the same rows and N, K in one pass) whose outputs are handed
 * to a block fn instead of stored: the task's blocks panel by panel, rows
 * inside; each block of every GEMM into the scratch (contiguous: a block of C
 * at its own row stride, a multiple of 4 KB for the 1B MLP's 6144 columns,
 * falls into one or two L1 sets, and its tile stores took 7x as long), then
 * fn on them while they are in L1.  Value packs only. */
static void mm_amx_task_blocks(const mm_amx_job *jb, int n_jobs, const mm_amx_a *a, int i0,
                               int mc, int p0, int pc, const mm_blocks *out, mm_amx_scratch *s)
{
    const int N = jb[0].bp->N;
    const float *blk[MM_AMX_MULTI];
    for (int h = 0; h < n_jobs; h++)
        blk[h] = &s->blk[h][0][0];
    for (int p = p0; p < p0 + pc; p++)
        for (int m0 = i0; m0 < i0 + mc; m0 += MM_AMX_MB) {
            for (int h = 0; h < n_jobs; h++)
                mm_amx_vblock(&jb[h], a, i0, mc, p0, pc, p, m0, NULL, s);
            const int j0 = p * MM_NR;
            out->fn(out->ctx, m0, i0 + mc - m0 < MM_AMX_MB ? i0 + mc - m0 : MM_AMX_MB, j0,
                    N - j0 < MM_NR ? N - j0 : MM_NR, blk, MM_NR);
        }
}

static int mm_amx_ceil(int v, int d) { return (v + d - 1) / d; }

/* k tiles of a panel: a bf16 pack's panel is padded to whole tiles; a code
 * pack's (matmul_hif8.c) is not, its last tile is completed with zeros as it is
 * decoded. */
static int mm_amx_n_kt(const mm_bpack *bp)
{
    size_t pair_rows = bp->panel_elems / MM_NR;
    return (int)((pair_rows + MM_AMX_KP - 1) / MM_AMX_KP);
}

static size_t mm_amx_thread(void)
{
#ifdef _OPENMP
    return (size_t)omp_get_thread_num();
#else
    return 0;
#endif
}

size_t mm_amx_dec_bytes_impl(int K)
{
    int n_threads = 1;
#ifdef _OPENMP
    n_threads = omp_get_max_threads();
#endif
    return (size_t)n_threads * (size_t)mm_amx_ceil((K + 1) / 2, MM_AMX_KP) * MM_AMX_TILE_BYTES;
}

/* bytes of converted A one K pass keeps (in L2); tests force smaller passes */
static size_t mm_amx_pass_bytes = (size_t)MM_AMX_PASS_A_KB << 10;

void mm_amx_pass_bytes_force_impl(size_t bytes)
{
    mm_amx_pass_bytes = bytes ? bytes : (size_t)MM_AMX_PASS_A_KB << 10;
}

void mm_amx_plan_impl(int M, int K, long n_cols, int *n_pass, int *group_rows)
{
    const int m_pad = mm_amx_ceil(M, MM_AMX_MB) * MM_AMX_MB;
    const int n_kt = mm_amx_ceil((K + 1) / 2, MM_AMX_KP);
    /* every group size (a multiple of 32): the K passes its A needs to stay in
     * mm_amx_pass_bytes, the bytes moved beyond one pass over all rows: C
     * (fp32) stored and loaded again between passes, B (bf16) read once more
     * per group; the fewest bytes win, ties the larger groups */
    double best = -1.0;
    for (int rows = m_pad; rows >= MM_AMX_MB; rows -= MM_AMX_MB) {
        int kt_max = (int)(mm_amx_pass_bytes / ((size_t)rows * 64));
        kt_max = kt_max < MM_AMX_PASS_MIN_KT ? MM_AMX_PASS_MIN_KT : kt_max;
        const int passes = mm_amx_ceil(n_kt, kt_max), groups = mm_amx_ceil(m_pad, rows);
        const double bytes = (double)(passes - 1) * 2.0 * M * (double)n_cols * 4.0 +
                             (double)(groups - 1) * (double)n_kt * MM_AMX_KT * (double)n_cols * 2.0;
        if (best < 0 || bytes < best) {
            best = bytes;
            *n_pass = passes;
            *group_rows = rows == m_pad ? 0 : rows;
        }
        if (passes == 1)
            break;   /* smaller groups only read B more often */
    }
}

/* Task shape for N columns: pc panels per task, mc rows (a multiple of 32). */
static void mm_amx_shape(int M, int N, int n_threads, int *mc, int *pc)
{
    int n_panels = mm_amx_ceil(N, MM_NR), m_blocks = mm_amx_ceil(M, MM_AMX_MB);
    int want = n_threads > 1 ? MM_AMX_TASKS_PER_THREAD * n_threads : 1;
    int p = n_panels / want;
    p = p < 1 ? 1 : p > MM_AMX_MAX_PANELS ? MM_AMX_MAX_PANELS : p;
    int n_jb = mm_amx_ceil(n_panels, p), n_ib = 1;
    if (n_jb < want)
        n_ib = mm_amx_ceil(want, n_jb) < m_blocks ? mm_amx_ceil(want, n_jb) : m_blocks;
    *pc = p;
    *mc = mm_amx_ceil(m_blocks, n_ib) * MM_AMX_MB;
}

void mm_gemm_amx_impl(int n, float *const *c, const ptrdiff_t *ldc, int M, const mm_view *a,
                      mm_bpack *xs, int xs_filled, const mm_bpack *const *bp,
                      const mm_init *init, const float *const *bias, const matmul_epilogue *ep,
                      const mm_blocks *blocks)
{
    mm_amx_job jb[MM_AMX_MULTI];
    int mc[MM_AMX_MULTI], pc[MM_AMX_MULTI], n_ib[MM_AMX_MULTI], n_jb[MM_AMX_MULTI];
    int first[MM_AMX_MULTI + 1];
    int n_threads = 1, n_jobs = 0, K = bp[0]->K;
    double flops = 0.0;
#ifdef _OPENMP
    n_threads = omp_get_max_threads();
#endif
    if (M <= 0 || n <= 0)
        return;
    /* K passes or row groups when the rows' A is larger than L2 can keep */
    long n_cols = 0;
    for (int i = 0; i < n && i < MM_AMX_MULTI; i++)
        n_cols += bp[i]->N > 0 ? bp[i]->N : 0;
    int n_pass, group_rows;
    mm_amx_plan_impl(M, K, n_cols, &n_pass, &group_rows);
    if (blocks && n_pass > 1) {   /* blocks leave in one pass: groups whose A fits */
        const int n_kt = mm_amx_n_kt(bp[0]);   /* value packs: padded to whole tiles */
        group_rows = (int)(mm_amx_pass_bytes / ((size_t)n_kt * 64)) / MM_AMX_MB * MM_AMX_MB;
        group_rows = group_rows < MM_AMX_MB ? MM_AMX_MB : group_rows;
        n_pass = 1;
    }
    first[0] = 0;
    for (int i = 0; i < n && i < MM_AMX_MULTI; i++) {
        if (bp[i]->N <= 0)
            continue;
        jb[n_jobs] = (mm_amx_job){c ? c[i] : NULL, ldc ? ldc[i] : 0, bp[i], init[i],
                                  bias ? bias[i] : NULL, 0, 0, 0, NULL};
        mm_amx_shape(M, bp[i]->N, n_threads, &mc[n_jobs], &pc[n_jobs]);
        /* a small B (up to the size of L2) under many rows: tasks of rows over
         * every panel, K in one pass, instead of panels over every row (which
         * reads A once per panel: dW's dout^T of a 32000-wide head is 65 MB) */
        const size_t b_bytes = (size_t)mm_amx_n_kt(bp[i]) * MM_AMX_TILE_BYTES *
                               (size_t)mm_amx_ceil(bp[i]->N, MM_NR);
        const int m_blocks = mm_amx_ceil(M, MM_AMX_MB);
        if (!bp[i]->codes && b_bytes <= (size_t)MM_AMX_ROWS_OUTER_B_KB << 10 &&
            m_blocks >= 2 * MM_AMX_TASKS_PER_THREAD * n_threads) {
            jb[n_jobs].rows_outer = 1;
            pc[n_jobs] = mm_amx_ceil(bp[i]->N, MM_NR);
            mc[n_jobs] = mm_amx_ceil(m_blocks, MM_AMX_TASKS_PER_THREAD * n_threads) * MM_AMX_MB;
        } else if (group_rows && mc[n_jobs] > group_rows) {
            mc[n_jobs] = group_rows;
        }
        n_ib[n_jobs] = mm_amx_ceil(M, mc[n_jobs]);
        n_jb[n_jobs] = mm_amx_ceil(mm_amx_ceil(bp[i]->N, MM_NR), pc[n_jobs]);
        first[n_jobs + 1] = first[n_jobs] + n_ib[n_jobs] * n_jb[n_jobs];
        flops += 2.0 * M * bp[i]->N * K;
        n_jobs++;
    }
    int n_tasks = n_jobs ? first[n_jobs] : 0;
    if (n_tasks == 0)
        return;
    /* paired: task t is block t of every GEMM (the same N, so the same shape),
     * then ep on it, or each block of every GEMM handed to blocks */
    int paired = (ep && ep->fn) || blocks;
    if (paired)
        n_tasks = first[1];
    mm_amx_a as = {NULL, mm_amx_ld(K), *a, M, K};
    int m_pad = mm_amx_ceil(M, MM_AMX_MB) * MM_AMX_MB, fill = 0, codes = 0;
    for (int i = 0; i < n_jobs; i++)
        codes |= jb[i].bp->codes;
    /* K passes: the rows' A of one pass (m_pad x its k tiles) stays in L2
     * while every panel goes by; C carries the sums between passes.  With
     * row groups, m_pad x its k tiles is a group's (tasks taken group by
     * group; mm_amx_plan_impl chose the sizes moving the fewest bytes) */
    const int n_kt = mm_amx_n_kt(bp[0]);
    int kt_pass = mm_amx_ceil(n_kt, n_pass);
    /* scratch: A's bf16 rows, then (code packs, several row blocks) one
     * decoded panel of a pass per thread */
    const size_t a_bytes = mm_amx_apack_bytes_impl(M, K);
    const size_t dec_bytes = codes && M > MM_AMX_MB ? (size_t)kt_pass * MM_AMX_TILE_BYTES : 0;
    uint8_t *dec = NULL;
    if (xs && xs_filled) {   /* A's rows are there already (matmul_xrows_store) */
        as.rows = xs->data;
    } else if (xs && dec_bytes &&
               mm_pack_reserve_impl(xs, a_bytes + (size_t)n_threads * dec_bytes) == 0) {
        dec = (uint8_t *)xs->data + a_bytes;
    }
    if (xs && !xs_filled && (dec || mm_pack_reserve_impl(xs, a_bytes) == 0)) {
        as.rows = xs->data;
        fill = m_pad;
    }
    int rows_outer = 1;
    for (int i = 0; i < n_jobs; i++)
        rows_outer &= jb[i].rows_outer;
    /* A converted per tile: nothing to keep in L2; rows outer: a task's row
     * block is in cache over every panel anyway */
    if (!as.rows || rows_outer) {
        n_pass = 1;
        kt_pass = n_kt;
    }
    const int transposed = a->cs != 1 && a->rs == 1;   /* dW's dout^T */
    int parallel = n_tasks > 1 && flops > 2e6;
    (void)parallel;
#ifdef _OPENMP
#pragma omp parallel if (parallel)
#endif
    {
        mm_amx_scratch s;
        mm_amx_config();
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int m = 0; m < (transposed ? 0 : fill); m++)
            mm_amx_arow((uint8_t *)xs->data + (size_t)m * as.ld, a, M, K, as.ld, m);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int m0 = 0; m0 < (transposed ? fill : 0); m0 += MM_AMX_T)
            mm_amx_arows_t(xs->data, a, M, K, as.ld, m0);
        for (int pass = 0; pass < n_pass; pass++) {
            const int t0 = pass * kt_pass, t1 = n_kt - t0 < kt_pass ? n_kt : t0 + kt_pass;
            const int last = pass == n_pass - 1;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
            for (int t = 0; t < n_tasks; t++) {
                int g = 0;
                while (!paired && t >= first[g + 1])
                    g++;
                int u = t - first[g];
                int i0 = (group_rows ? u / n_jb[g] : u % n_ib[g]) * mc[g];
                int p0 = (group_rows ? u % n_jb[g] : u / n_ib[g]) * pc[g];
                int rows = M - i0 < mc[g] ? M - i0 : mc[g];
                int n_panels = mm_amx_ceil(jb[g].bp->N, MM_NR);
                int panels = n_panels - p0 < pc[g] ? n_panels - p0 : pc[g];
                uint8_t *my_dec = dec ? dec + mm_amx_thread() * dec_bytes : NULL;
                if (blocks) {   /* one pass (above) */
                    mm_amx_job j[MM_AMX_MULTI];
                    for (int h = 0; h < n_jobs; h++) {
                        j[h] = jb[h];
                        j[h].t0 = t0;
                        j[h].t1 = t1;
                        j[h].cblk = &s.blk[h][0][0];
                    }
                    mm_amx_task_blocks(j, n_jobs, &as, i0, rows, p0, panels, blocks, &s);
                    continue;
                }
                for (int h = g; h < (paired ? n_jobs : g + 1); h++) {
                    mm_amx_job j = jb[h];
                    j.t0 = t0;
                    j.t1 = t1;
                    if (pass > 0)
                        j.init = MM_INIT_ACCUM;
                    mm_amx_task(&j, &as, i0, rows, p0, panels, my_dec, &s);
                }
                if (paired && last) {
                    int N0 = jb[0].bp->N, j0 = p0 * MM_NR;
                    ep->fn(ep->ctx, i0, rows, j0,
                           N0 - j0 < panels * MM_NR ? N0 - j0 : panels * MM_NR);
                }
            }
        }
        _tile_release();
    }
}
