/* matmul_impl.h: internals shared by the matmul files (not API).
 *
 * One blocked GEMM, C[M, N] (=|+=) A[M, K] B[K, N], serves all three Linear
 * products (forward, dX, dW).  Operands are read through strided views, packed
 * into micro-panels, and multiplied by a register-blocked MR x NR micro-kernel:
 *   A micro-panel  fp32: [kc][MM_MR] floats        bf16: [kc/2][MM_MR] uint32 (bf16 pairs)
 *   B micro-panel  fp32: [K][MM_NR] floats         bf16: [K/2][MM_NR] uint32 (bf16 pairs)
 * B is packed whole (all of K x N, zero-padded to a multiple of MM_NR columns and,
 * for bf16, to an even K) so a Linear weight can be packed once and reused.
 * Every output element is owned by exactly one task and summed in a fixed order,
 * so results do not depend on the number of threads or on the schedule.
 */
#ifndef QS_MATMUL_IMPL_H
#define QS_MATMUL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "qs/matmul.h"

enum {
    MM_MR = 12,   /* micro-tile rows (accumulators: MM_MR x MM_NR/16 zmm = 24) */
    MM_NR = 32,   /* micro-tile columns (two 16-float vectors) */
    MM_KC = 256,  /* K block (fp32 values; vdpbf16ps: 2 MM_KC in MM_KC pairs): the B
                     micro-panel (32 KB) stays in L1, the task's A block in L2;
                     128 and 384-512 measured slower on a Xeon (48 KB L1, 2 MB L2) */
    MM_MC = 96,   /* rows per task at most (multiple of MM_MR): each B micro-panel
                     is read once per 8 row panels (192 measured no faster) */
    MM_NC = 1024, /* columns per task at most (multiple of MM_NR) */
};

/* Which micro-kernel (and therefore which packed formats) a GEMM uses. */
typedef enum {
    MM_KERNEL_C = 0,          /* portable fp32 kernel; used for bf16 on older CPUs */
    MM_KERNEL_AVX512 = 1,     /* AVX-512 FMA fp32 kernel */
    MM_KERNEL_AVX512BF16 = 2, /* vdpbf16ps kernel on bf16 pairs */
    MM_KERNEL_AMX = 3,        /* AMX tiles (MATMUL_BF16_AMX, matmul_amx.c): bf16 pairs as
                                 for vdpbf16ps, each panel's K padded with zero pairs to
                                 a multiple of MM_AMX_KP */
} mm_kernel;

/* AMX: bf16 pairs per tile row (32 k values, one 64-byte row of a tile) */
enum { MM_AMX_KP = 16 };

/* Rows of a B pack panel for kernel: k pairs (padded for AMX), or k values. */
static inline size_t mm_bpack_k_rows(int K, mm_kernel kernel, int round_bf16)
{
    if (kernel == MM_KERNEL_AMX)
        return (size_t)((K + 1) / 2 + MM_AMX_KP - 1) / MM_AMX_KP * MM_AMX_KP;
    if (kernel == MM_KERNEL_AVX512BF16)
        return (size_t)(K + 1) / 2;
    return round_bf16 ? (size_t)K + (K & 1) : (size_t)K;
}

/* Element (r, c) of a strided matrix is p[r * rs + c * cs]. */
typedef struct mm_view {
    const float *p;
    ptrdiff_t rs, cs;
} mm_view;

/* A whole B operand packed into MM_NR-column panels (see the header comment). */
typedef struct mm_bpack {
    void *data;           /* float or uint32 (bf16 pairs); qs_malloc'd */
    size_t panel_elems;   /* floats or uint32 per panel */
    size_t bytes;         /* capacity of data */
    int K, N;             /* logical shape */
    mm_kernel kernel;     /* format */
    int round_bf16;       /* fp32 formats only: values rounded to bf16, k in
                             mm_bf16_order, K padded to even (bf16 fallback) */
    ptrdiff_t row_pairs;  /* whole-A packs: 0 = k-major panels (mm_apack_whole_impl),
                             > 0 = row-major rows of this many bf16 pairs (mm_apack_rows_*) */
    int codes;            /* B packs: elements are HiF8 codes, uint16 pairs of pack
                             bytes (renumbered codes, matmul_hif8.c), panel_elems
                             counts them; kernel and round_bf16 say which
                             micro-panel they decode into */
    int codes_nan;        /* code packs: 1 when some code is 0x80 (NaN) */
    int codes_inf;        /* code packs: 1 when some code is +-Inf (0x6F, 0xEF) */
} mm_bpack;

/* How the GEMM starts each output element. */
typedef enum {
    MM_INIT_ZERO = 0,  /* C = A B */
    MM_INIT_BIAS = 1,  /* C = bias[n] + A B */
    MM_INIT_ACCUM = 2, /* C = C + A B */
} mm_init;

/* bf16 round to nearest even, as torch does (NaN -> quiet NaN 0x7FC0), except
 * that results below the normal range become signed zero: vdpbf16ps treats
 * bf16 denormals as zero, and every path must see the same operands. */
static inline uint16_t mm_bf16_bits(float f)
{
    union { float f; uint32_t u; } v = {f};
    if ((v.u & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FC0;
    uint16_t h = (uint16_t)((v.u + 0x7FFFu + ((v.u >> 16) & 1u)) >> 16);
    return (h & 0x7F80u) ? h : (uint16_t)(h & 0x8000u);
}

static inline float mm_bf16_round(float f)
{
    union { uint32_t u; float f; } v = {(uint32_t)mm_bf16_bits(f) << 16};
    return v.f;
}

/* The bf16 fallbacks visit k in vdpbf16ps's order: within each pair the odd
 * term first (k = 1, 0, 3, 2, ...), an odd K padded with a zero term.  Packed
 * position k holds source column mm_bf16_order(k). */
static inline int mm_bf16_order(int k) { return k ^ 1; }

/* The 16-bit lane mask of a 16-column vector whose columns [0, w) are inside
 * the matrix (w <= 0: none; w >= 16: all): for masked loads and stores of a
 * row's last, narrow columns. */
static inline unsigned mm_cols_mask16(int w)
{
    return w >= 16 ? 0xFFFFu : w <= 0 ? 0u : (1u << w) - 1u;
}

/* Which micro-kernel multiplies the AVX512-BF16 formats (bf16 pairs): vdpbf16ps,
 * or the AVX-512 FMA kernel on the operands widened to fp32 (A panels rounded to
 * bf16 values in mm_bf16_order, each B micro-panel widened as it is used), run
 * with MXCSR.FTZ and DAZ set.  Products of bf16 values are exact, so FMA i
 * rounds acc + a_k b_k once, as vdpbf16ps does, and with FTZ/DAZ the two give
 * the same bits, denormal inputs and results, infinities and NaNs included
 * (tests/test_matmul_bf16fma.c).  The FMA units win where vdpbf16ps has less
 * than twice their rate: Intel cores (cpu_bf16_dot_slow()).
 * mm_bf16_fma_force_impl / mm_bf16_fma_impl: qs/matmul_test.h. */
#include "qs/matmul_test.h"

/* HiF8 code packs (matmul_hif8.c).  B = w^T of codes w [N, K] row-major, in
 * the code layout (mm_bpack.codes); kernel / round_bf16 as mm_bpack_fill_impl's
 * (they only select the decoding).  0 or QS_ENOMEM. */
int mm_bpack_fill_codes_impl(mm_bpack *bp, const uint8_t *codes, int K, int N, mm_kernel kernel,
                             int round_bf16);
/* What the k rows of one code micro-panel become (kp code pairs x MM_NR columns):
 *   PAIRS     [kp][MM_NR] uint32 bf16 pairs (the vdpbf16ps kernel's B panel)
 *   F32_SWAP  [2 kp][MM_NR] fp32, the odd term of each pair first (mm_bf16_order:
 *             the FMA kernel on bf16 values, the bf16 fallbacks)
 *   F32       [2 kp][MM_NR] fp32 in k order (fp32 products) */
typedef enum { MM_DECODE_PAIRS = 0, MM_DECODE_F32_SWAP = 1, MM_DECODE_F32 = 2 } mm_decode;
/* or-ed into a mode: the codes hold no NaN code (0x80; mm_bpack.codes_nan is 0),
 * so the decode may use the sign | magnitude symmetry of the others */
enum { MM_DECODE_NO_NAN = 4, MM_DECODE_MODE = 3 };
/* or-ed too: no NaN and no infinity code (the few-row kernel's short lookup) */
enum { MM_DECODE_FINITE = 8 };
void mm_codes_decode_impl(void *dst, const uint16_t *src, int kp, int mode);
/* The decode tables (built by the first fill; call before decoding otherwise). */
void mm_codes_tables_impl(void);
/* The decode with AVX-512 VBMI (CPUs with it only), after _init with the 256
 * bf16 bit patterns of the pack bytes' values and the 64-entry low-byte table
 * of the finite ones (matmul_hif8.c; serial code, once). */
void mm_codes_vtab_init_avx512vbmi_impl(const uint32_t *bf16, const uint8_t *lo6);
void mm_codes_decode_avx512vbmi_impl(void *dst, const uint16_t *src, int kp, int mode);
/* Column n of a code pack (row n of w), k in [k0, k0 + kc): codes[k - k0] (the
 * HiF8 codes, not the pack bytes) and / or values[k - k0] = decode (either may
 * be NULL). */
void mm_bpack_codes_row_impl(const mm_bpack *bp, int n, int k0, int kc, uint8_t *codes,
                             float *values);

/* MM_KERNEL_AMX packs: zero the pair rows past (K + 1) / 2 of every panel
 * (nothing for other formats); the fills call it. */
void mm_bpack_pad_impl(mm_bpack *bp);
/* Pack B (K x N view) into bp; reuses bp->data when large enough.  0 or QS_ENOMEM. */
int mm_bpack_fill_impl(mm_bpack *bp, mm_view b, int K, int N, mm_kernel kernel, int round_bf16);

/* A pack buffer of at least `bytes` in bp->data (kept when big enough; qs_malloc
 * places a large one on huge pages).  0 or QS_ENOMEM. */
int mm_pack_reserve_impl(mm_bpack *bp, size_t bytes);
void mm_bpack_free_impl(mm_bpack *bp);
/* Pack all of A (M x K) whose columns are contiguous (a.rs == 1, dW's dout^T) as
 * bf16 k-major micro-panels, panel i at data + i * panel_elems, [K/2][MM_MR]
 * pairs; N holds M.  For the bf16 kernel.  0 or QS_ENOMEM. */
int mm_apack_whole_impl(mm_bpack *ap, mm_view a, int M, int K);
/* Whole A (M x K) with contiguous rows (a.cs == 1: forward's x) as bf16 rows for
 * the bf16 kernel: row m at data + m * row_pairs pairs, odd K padded with a zero,
 * rows up to a multiple of MM_MR (zero past M).  The row stride is an odd
 * multiple of 64 bytes, so the 12 rows a micro-kernel reads do not share L1
 * sets.  _reserve sets the shape (0 or QS_ENOMEM, nothing converted yet);
 * _panel converts rows [p * MM_MR, (p + 1) * MM_MR): threads may fill disjoint
 * panels concurrently. */
int mm_apack_rows_reserve_impl(mm_bpack *ap, int M, int K);
void mm_apack_rows_panel_impl(mm_bpack *ap, mm_view a, int p);
/* OpenBLAS sgemm for the three products (matmul_sgemm.c): out = bias + x w^T,
 * dx += dout w, dw += dout^T x; shared out over the OpenMP threads in blocks
 * fixed by the shape (the same sums with any thread count). */
void mm_forward_sgemm_impl(float *out, const float *x, const float *w, const float *bias, int N,
                           int IN, int O);
void mm_dx_sgemm_impl(float *dx, const float *dout, const float *w, int N, int IN, int O);
void mm_dw_sgemm_impl(float *dw, const float *dout, const float *x, int N, int IN, int O);
/* A whole fp32 A of M rows as k-major panels [K][MM_MR] (kernel MM_KERNEL_AVX512,
 * row_pairs 0; AVX-512 CPUs), filled panel by panel by mm_apack_rows_panel_impl
 * (a's rows contiguous). */
int mm_apack_f32_reserve_impl(mm_bpack *ap, int M, int K);
size_t mm_apack_rows_bytes_impl(int M, int K);

/* B = w^T of a weight stored as bf16 bits, w [N, K] row-major (B(k, n) = w[n * K + k]),
 * packed as mm_bpack_fill_impl packs the fp32 values of those bits (same bytes), without
 * an fp32 copy: bf16 pairs for the AVX512-BF16 kernel, fp32 panels otherwise (round_bf16:
 * the bf16 fallback's order and padding).  Subnormal values become signed zero in the
 * bf16 formats (mm_bf16_bits).  0 or QS_ENOMEM. */
int mm_bpack_fill_bf16_impl(mm_bpack *bp, const uint16_t *w, int K, int N, mm_kernel kernel,
                            int round_bf16);
/* Column n of a whole B pack (row n of the w it was made from) as the products
 * see it, into out[K]: fp32 values (bf16 ones for the bf16 formats). */
void mm_bpack_col_impl(const mm_bpack *bp, int n, float *out);
/* AVX-512 part of the pair-format fill of one full panel (rows j0 .. j0 + MM_NR of
 * w [.., K] bf16): pairs 0 .. returned - 1 (whole blocks of 16), the rest is the
 * caller's.  AVX-512 CPUs only. */
int mm_bpanel_bf16_bits_avx512_impl(uint32_t *dst, const uint16_t *w, int K, int j0);

/* dout[N, O] handed over two rows at a time (matmul_dout_*), into both bf16 forms
 * at once: rows (dx's A, as mm_apack_rows_*) and pairs (dw's A = dout^T, as
 * mm_apack_whole_impl), the same bytes as those packs of the fp32 dout.
 * _reserve shapes both and zeroes the padding (0 or QS_ENOMEM); _store writes
 * rows n0 (even) and n0 + 1 (r1, NULL past N): concurrent calls for different
 * n0 write disjoint bytes. */
int mm_dout_reserve_impl(mm_bpack *rows, mm_bpack *pairs, int N, int O);
void mm_dout_store_impl(mm_bpack *rows, mm_bpack *pairs, int n0, const float *r0,
                        const float *r1);

/* An A micro-panel as a kernel reads it: element (r, k) is p[r * rs + k * ks]
 * (floats for the fp32 kernels; uint32 bf16 pairs, k = pair index, for bf16). */
typedef struct mm_apanel {
    const void *p;
    ptrdiff_t rs, ks;
} mm_apanel;

/* A operand format for one GEMM. */
typedef enum {
    MM_AFMT_F32 = 0,       /* fp32 as is */
    MM_AFMT_F32_BF16 = 1,  /* fp32 rounded to bf16 values */
    MM_AFMT_BF16 = 2,      /* bf16 pairs */
} mm_afmt;

/* Make rows [i0, i0 + MM_MR) x cols [k0, k0 + kc) of A readable as one micro-panel:
 * read fp32 A in place where its layout suits the kernel (mm_apanel_packs_impl;
 * the kernels read only the rows below M), else pack into dst (room for MM_MR x
 * ld floats, ld >= kc rounded up to even; bf16: ld pairs, 2 ld >= that):
 * row-major with row stride ld when A's rows are contiguous, k-major otherwise.
 * Packed rows past M are zero, and for bf16 an odd kc gets a zero last column. */
mm_apanel mm_apanel_make_impl(void *dst, ptrdiff_t ld, mm_view a, int M, int i0, int k0, int kc,
                               mm_afmt fmt);
/* All the k-major fp32 panels of rows [i0, i0 + mc) (mc a multiple of MM_MR;
 * rows past M zero), k block [k0, k0 + kc), panel q at dst + q panel_stride,
 * made in one sweep along A's contiguous columns (a.rs == 1: dW's dout^T):
 * each k reads the mc values of a dout row at once, where the panel-by-panel
 * gather of mm_apanel_make_impl read 48 bytes of it per panel.  The values of
 * mm_apanel_make_impl's panels.  0 (nothing written) unless A is such a view
 * that mm_apanel_make_impl would pack (else 1). */
int mm_apanels_cols_f32_impl(float *dst, size_t panel_stride, mm_view a, int M, int i0, int mc,
                             int k0, int kc);
/* 1 when mm_apanel_make_impl packs an fp32 (MM_AFMT_F32) A rather than reading it
 * in place: strides that would crowd L1 sets or cross a page per k step. */
int mm_apanel_packs_impl(mm_view a);
/* k-major panels dst[k][MM_MR] of rows [0, mi) (mi <= MM_MR; rows past mi zero)
 * of kc floats, row stride rs, for the AVX-512 FMA kernel: the values as they
 * are (AVX-512 CPUs), or rounded to bf16 in mm_bf16_order, kc padded to even
 * with a zero term (mm_bf16_round_swap_avx512bf16_impl's values; AVX512-BF16). */
void mm_apanel_kmajor_f32_avx512_impl(float *dst, const float *src, ptrdiff_t rs, int mi, int kc);
/* One fp32 B panel as mm_bpanel_f32 packs it (dst[k][MM_NR], columns past nj
 * zero), for the AVX-512 kernel: _rows from K rows of nj
 * contiguous floats (row stride rs: x for dW, w for dX), _t from nj rows of K
 * contiguous floats (row stride cs: w for the forward's w^T). */
void mm_bpanel_rows_f32_avx512_impl(float *dst, const float *src, ptrdiff_t rs, int nj, int K);
void mm_bpanel_t_f32_avx512_impl(float *dst, const float *src, ptrdiff_t cs, int nj, int K);
void mm_apanel_kmajor_round_swap_avx512bf16_impl(float *dst, const float *src, ptrdiff_t rs,
                                                 int mi, int kc);
/* The same from rows of kp bf16 pairs (row stride rs pairs), widened in
 * mm_bf16_order: dst[2 p][r] = the odd k of pair p, dst[2 p + 1][r] the even
 * (mm_bf16_widen_row_avx512bf16_impl's values; AVX512-BF16 CPUs). */
void mm_apanel_kmajor_widen_avx512bf16_impl(float *dst, const uint32_t *src, ptrdiff_t rs, int mi,
                                            int kp);

/* bf16 conversion with AVX-512 (same bits as mm_bf16_bits; AVX512-BF16 CPUs only):
 *   pairs: dst[i] = bf16(lo[i]) | bf16(hi ? hi[i] : 0) << 16, i < n
 *   row:   dst[i] = bf16(src[i]), i < n */
void mm_bf16_pairs_avx512bf16_impl(uint32_t *dst, const float *lo, const float *hi, int n);
void mm_bf16_row_avx512bf16_impl(uint16_t *dst, const float *src, int n);
/* One bf16 B micro-panel of w^T: dst[kp * MM_NR + j] = pair(w[j][2kp],
 * w[j][2kp + 1]) (w[j][K] taken as 0) for kp < (K + 1) / 2 and every j < MM_NR,
 * rows j >= nj zero; w's rows ld floats apart.  mm_bf16_row's bits. */
void mm_bpanel_bf16_t_avx512bf16_impl(uint32_t *dst, const float *w, ptrdiff_t ld, int nj, int K);
/* Pair row kp of width-W panels panel_elems apart, from two source rows:
 * dst[(c / W) * panel_elems + kp * W + c % W] = pair(bf16(r0[c]), bf16(r1 ? r1[c]
 * : 0)) for c < N, stored from the registers (columns >= N untouched); next
 * (floats, 0: none): the rows that far on are prefetched (a pack sweeping its
 * rows: the next pair's); d0 (and d1 when r1) non-NULL: the rows' bf16 too,
 * d0[c] = bf16(r0[c]) (each value converted once). */
void mm_pairs_scatter_avx512bf16_impl(uint32_t *dst, size_t panel_elems, int W, int kp,
                                      const float *r0, const float *r1, int N, ptrdiff_t next,
                                      uint16_t *d0, uint16_t *d1);

/* Reusable memory for packs of operands that are not weights (dW's x, or w in
 * calls without a wpack); the public matmul_ws.  Keeping it between calls avoids
 * a fresh mmap and page faults per call. */
struct matmul_ws {
    mm_bpack bpack;
    mm_bpack apack; /* dW's dout^T for the bf16 kernel */
    mm_bpack xpack; /* forward's x as bf16 rows (bf16 kernel) */
    /* what bpack holds when it is a dW's x (NULL: anything else), for
     * matmul_ws_reuse_x */
    const float *bpack_x;
    int bpack_x_n, bpack_x_in, bpack_x_precision;
    int reuse_x;
};

/* A value pack's forward form on the AMX kernel, ready (packed now if it was
 * not or is stale; B = w^T: K = IN, N = O); NULL for other packs or without
 * memory. */
const mm_bpack *mm_wpack_fwd_amx_impl(matmul_wpack *pk);

/* C (M x N, row stride ldc) per init from A and packed B.  A comes from the view,
 * or from ap (mm_apack_whole_impl / mm_apack_rows_*) when ap is not NULL; with
 * ap_fill the row pack ap (reserved for M x K) is first filled from the view,
 * inside the same parallel region.  Needs no heap. */
void mm_gemm_impl(float *c, ptrdiff_t ldc, int M, const mm_view *a, mm_bpack *ap, int ap_fill,
                  const mm_bpack *bp, mm_init init, const float *bias);
/* n (<= 4) GEMMs of the same A (view or pack) and kernel, C_i = init_i + A B_i,
 * in one parallel region with one task list (bias may be NULL).  With ep (all
 * B_i of the same N) a task computes its block of every C_i, then runs ep. */
void mm_gemm_multi_impl(int n, float *const *c, const ptrdiff_t *ldc, int M, const mm_view *a,
                        mm_bpack *ap, int ap_fill, const mm_bpack *const *bp, const mm_init *init,
                        const float *const *bias, const matmul_epilogue *ep);

/* The AMX GEMM (matmul_amx.c; MATMUL_BF16_AMX, CPUs with cpu_amx_bf16() only):
 * the arguments of mm_gemm_multi_impl, every bp[i] an MM_KERNEL_AMX pack of the
 * same K.  A is converted once to bf16 rows (K padded with zeros to a multiple
 * of 32) in xs (a scratch pack, its memory reused; NULL or no memory: each A
 * tile is converted as it is loaded, same bits); each output element is
 * init (0, bias or C) followed by TDPBF16PS over K in tiles of 32 from k = 0,
 * whatever M, N, the thread count or the task shape.
 * xs_filled: xs holds A's rows already (matmul_xrows_store), not converted here.
 * blocks (not NULL): the outputs are not stored (c may be NULL): every block
 * (<= 32 rows x <= 32 columns) of each GEMM goes to blocks->fn from a
 * per-thread scratch, in one K pass; the same N and init ZERO or BIAS for all
 * (matmul_forward_packed_blocks_ws). */
typedef struct mm_blocks {
    matmul_block_fn fn;
    void *ctx;
} mm_blocks;
void mm_gemm_amx_impl(int n, float *const *c, const ptrdiff_t *ldc, int M, const mm_view *a,
                      mm_bpack *xs, int xs_filled, const mm_bpack *const *bp,
                      const mm_init *init, const float *const *bias, const matmul_epilogue *ep,
                      const mm_blocks *blocks);
/* Row stride (bytes) of the AMX GEMM's bf16 A rows for K: mm_amx_apack_bytes_impl's rows. */
size_t mm_amx_ld_impl(int K);
size_t mm_amx_apack_bytes_impl(int M, int K);
/* The decoded code panels (one per thread) an AMX GEMM over K may keep. */
size_t mm_amx_dec_bytes_impl(int K);

/* Micro-kernels: rows [0, mr) (1 <= mr <= MM_MR) of an MM_NR-wide tile,
 * c[r * ldc + j] (= if !load_c) += sum_k a b.  The fp32 kernels sum strictly in
 * k order, one rounding per step (FMA or exact bf16 products), so the C and
 * AVX-512 kernels agree bit for bit on bf16 inputs.  A row's sums do not depend
 * on mr.  pf: prefetched into L2 while this one is used (pass b itself for
 * none): the vdpbf16ps kernel the next B micro-panel (same size as b), the fp32
 * kernel (kc + 1) / 2 lines from pf, a quarter of a micro-panel (the caller
 * hands each row panel its share of the next one). */
void mm_kernel_f32_c_impl(int kc, mm_apanel a, const float *b, float *c, ptrdiff_t ldc,
                          int load_c, int mr);
void mm_kernel_f32_avx512_impl(int kc, mm_apanel a, const float *b, float *c, ptrdiff_t ldc,
                               int load_c, int mr, const void *pf);
/* A few rows (mr <= MM_GEMV_ROWS) times np <= 4 (mr <= 2) or 2 B micro-panels
 * read side by side: panel q at b + q * bstride elements, as bf16 pairs
 * (pairs = 1: [(kk+1)/2][MM_NR] uint32 widened in registers, per pair the hi
 * (odd k) half first when odd_first, else the lo half; an odd kk ends on the
 * first half of the last pair) or fp32 rows ([kk][MM_NR]).  c: the mr
 * rows of the np tiles, the last tile nj_last (1..MM_NR) columns wide.  The
 * bits of mm_kernel_f32_avx512_impl on the widened panels. */
enum { MM_GEMV_ROWS = 4 };
void mm_gemv_avx512_impl(int kk, mm_apanel a, int mr, const void *b, size_t bstride, int pairs,
                         int odd_first, int np, float *c, ptrdiff_t ldc, int nj_last, int load_c);
/* The same few-row products from a HiF8 code pack, decoded in registers and
 * multiplied with vdpbf16ps (matmul_gemv_codes_avx512bf16vbmi.c; only when
 * mm_codes_gemv_dp_impl(), qs/matmul_test.h): kp pair rows of np code micro-panels, panel q at
 * b + q * bstride (uint16 code pairs, mm_bpack.codes layout), A bf16 pairs
 * (mm_apanel of uint32), flags MM_DECODE_NO_NAN / MM_DECODE_FINITE as the pack
 * allows.  The bits of mm_kernel_bf16_avx512bf16_impl on the decoded pairs. */
void mm_gemv_codes_avx512bf16vbmi_impl(int kp, mm_apanel a, int mr, const uint16_t *b,
                                       size_t bstride, int np, float *c, ptrdiff_t ldc,
                                       int nj_last, int load_c, int flags);
/* The same few-row products from a bf16 pair pack with vdpbf16ps
 * (matmul_gemv_pairs_avx512bf16.c; AVX512-BF16 CPUs): kp pair rows of np
 * micro-panels, panel q at b + q * bstride, A bf16 pairs (mm_apanel of uint32).
 * The bits of mm_kernel_bf16_avx512bf16_impl. */
void mm_gemv_pairs_avx512bf16_impl(int kp, mm_apanel a, int mr, const uint32_t *b,
                                   size_t bstride, int np, float *c, ptrdiff_t ldc, int nj_last,
                                   int load_c);
/* kp = number of k pairs */
void mm_kernel_bf16_avx512bf16_impl(int kp, mm_apanel a, const uint32_t *b, float *c,
                                    ptrdiff_t ldc, int load_c, int mr, const void *pf);
/* MXCSR with FTZ and DAZ set for the FMA kernel on bf16 pairs; returns the old
 * value for mm_mxcsr_restore_impl (AVX-512 CPUs only). */
unsigned mm_mxcsr_ftz_daz_impl(void);
void mm_mxcsr_restore_impl(unsigned csr);

/* Widening for the FMA kernel on bf16 pairs (AVX512-BF16 CPUs only; w = width
 * of a pair row: MM_MR or MM_NR).  Pair u holds k even (low half) and k odd
 * (high half); the fp32 forms list the odd term first (mm_bf16_order):
 *   kmajor: dst[(2p) * w + j] = hi(src[p * w + j]), dst[(2p + 1) * w + j] = lo(...),
 *           p < kp, j < w; pf: prefetched along (the next panel, or src)
 *   row:    dst[2p] = hi(src[p]), dst[2p + 1] = lo(src[p]), p < kp
 *   round:  dst[k] = bf16 value of src[k ^ 1] (mm_bf16_bits; src[n] reads as 0),
 *           k < n + (n & 1) */
void mm_bf16_widen_kmajor_avx512bf16_impl(float *dst, const uint32_t *src, int kp, int w,
                                          const void *pf);
void mm_bf16_widen_row_avx512bf16_impl(float *dst, const uint32_t *src, int kp);
void mm_bf16_round_swap_avx512bf16_impl(float *dst, const float *src, int n);

#endif
