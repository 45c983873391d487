/* matmul.h: the one matmul path (Linear layers), forward and backward.
 *
 * Shapes follow Hugging Face's Linear: weight w is [O, IN] row-major, so
 *   forward:  out[N, O] = x[N, IN] @ w^T (+ bias[O])
 *   backward: dx[N, IN] += dout[N, O] @ w;  dw[O, IN] += dout^T @ x;  db[O] += sum_n dout[n, :]
 * Called from serial code: threading (OpenMP, or OpenBLAS's own threads when
 * it is set to several: matmul_blas_threads) happens inside.  Never call these
 * from an OpenMP parallel region.
 *
 * Numerical contract, per output element y = init + sum_{k<K} a_k b_k
 * (K = IN for forward, O for dx, N for dw; init = 0, bias or the old value;
 * u = 2^-24):
 *  - MATMUL_FP32_BLAS: OpenBLAS sgemm, the reference path: fp32 operands and
 *    accumulation in OpenBLAS's (blocked) order.
 *  - MATMUL_FP32: fp32 operands and accumulation.  With AVX-512 our own kernel:
 *    one fused multiply-add per k, strictly in k order starting from init, so
 *    |y - exact| <= K u (|init| + sum|a_k b_k|) (to first order); without AVX-512
 *    it is MATMUL_FP32_BLAS.
 *  - MATMUL_BF16: both operands rounded to bf16, round to nearest even as torch
 *    does (NaN stays NaN), except that values below bf16's normal range
 *    (|v| < 2^-126) become zero, as vdpbf16ps reads them.  Products of bf16
 *    values are exact in fp32; they are added into an fp32 accumulator with one
 *    rounding each, in vdpbf16ps's order: within each pair of k the odd term
 *    first (k = 1, 0, 3, 2, ...; an odd K ends with a zero term).  The
 *    AVX512-BF16 kernel, the AVX-512 and portable fallbacks and the no-scratch
 *    loop all follow it, so they agree bit for bit (unless results reach the
 *    fp32 denormal range, which the hardware flushes).  On AVX512-BF16 CPUs
 *    whose vdpbf16ps is slow (Intel) the same bf16 operands are multiplied by
 *    FMAs under FTZ/DAZ, which gives vdpbf16ps's bits, denormals included.
 *    (AMX's TDPBF16PS sums each pair before adding it, so MATMUL_BF16 does not
 *    use it, see tests/exhaustive/amx_bf16_order.c; MATMUL_BF16_AMX does.)  Error relative to the
 *    exact product of the ROUNDED operands: <= (K + 1) u (|init| + sum|a_k b_k|),
 *    growing with K; relative to fp32 math the operand rounding dominates:
 *    up to about 2^-7 sum|a_k b_k|, typically ~sqrt(K) 2^-9 times the rms term.
 *    db is a plain fp32 column sum of dout in every precision.
 *  - MATMUL_BF16_AMX ("bf16-amx", opt-in): both operands
 *    rounded to bf16 as in MATMUL_BF16 (round to nearest even, subnormals to
 *    zero), products summed by AMX's TDPBF16PS: K is split into tiles of 32
 *    from k = 0 (the last one padded with zeros) and each output element is
 *    init followed by one TDPBF16PS step per tile, in tile order.  Within a
 *    step the hardware sums the 32 exact products in its own fixed way (pair
 *    sums first, see tests/exhaustive/amx_bf16_order.c), so the bits differ
 *    from MATMUL_BF16's; they are deterministic on a machine and the chain of
 *    an element depends on K alone: not on M or N, the row's place in the
 *    batch, the thread count (matmul_rows_independent() == 1).  Error relative
 *    to the exact product of the rounded operands: <= K u (|init| + sum|a_k b_k|)
 *    to first order when every addition inside the unit rounds once to fp32,
 *    in whatever order (as the probe saw for one pair); the tests allow
 *    (K + 64) u.  Needs AMX-BF16, AMX-TILE and the kernel's permission for
 *    the tile state (cpu_amx_bf16()); matmul_precision_parse refuses it
 *    otherwise.  Every product runs on the tiles: forward, dx (K = O, dout's
 *    rows as A) and dw (K = N, dout^T as A, converted once per call), so a
 *    model trains in this precision too; HiF8 code packs are decoded into the
 *    tile layout (the bits of this precision on the decoded weight).  Without
 *    AMX, library calls fall back to MATMUL_BF16's unblocked loop (the CLI
 *    never gets there).  Opt-in because its bits differ from bf16's: scores,
 *    logits and trained weights of bf16 are not reproduced by it (close, not
 *    equal).
 *  Results never depend on the number of threads: each output element is owned
 *  by one task and summed in a fixed order.
 * Memory: the non-BLAS paths pack operands into scratch memory (qs_malloc); if
 * that fails they fall back to sgemm (fp32) or to an unblocked loop with the same
 * contract (bf16), so these calls cannot fail.
 */
#ifndef QS_MATMUL_H
#define QS_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"

/* precision values (append only) */
enum { MATMUL_FP32 = 0, MATMUL_BF16 = 1, MATMUL_FP32_BLAS = 2, MATMUL_BF16_AMX = 3 };

/* The precision spellings users write (flags, run configs): "fp32" -> MATMUL_FP32,
 * "bf16" -> MATMUL_BF16, "bf16-amx" -> MATMUL_BF16_AMX.  Anything else is
 * QS_EINVAL with the one message "<what>: expected fp32, bf16 or bf16-amx, got
 * '<name>'" (what: the flag or key); "bf16-amx" on a CPU without AMX is
 * QS_EINVAL "<what> bf16-amx: this CPU has no AMX (needs AMX-BF16 and AMX-TILE)". */
int matmul_precision_parse(const char *name, const char *what, int *precision, qs_diag *d);
/* "fp32", "bf16", "fp32-blas" or "bf16-amx". */
const char *matmul_precision_name(int precision);

/* OpenBLAS (the MATMUL_FP32_BLAS reference, and fp32 without AVX-512) set to
 * one thread and its worker threads stopped.  They busy-wait for ~2^28 cycles
 * (~0.1 s) after they start (at program start) and after each threaded sgemm,
 * and meanwhile share the cores with OpenMP's threads: every OpenMP region
 * near an sgemm waited for scheduler ticks (10-16x slower).  With OpenBLAS at
 * one thread, the products are shared out over the OpenMP threads in blocks
 * of the output, one sgemm each, the blocks fixed by the shape (the same sums
 * with any thread count); a caller that sets OpenBLAS to several threads again
 * gets one sgemm per product, threaded by OpenBLAS.  Every qatscope command
 * calls it first.  Only for OpenBLAS's pthreads build (Debian's default): an
 * OpenMP build of OpenBLAS threads with OpenMP's pool already and is left as
 * it is (products then go to it whole). */
void matmul_blas_threads(void);

void matmul_forward(float *out, const float *x, const float *w, const float *bias, int N, int IN,
                    int O, int precision);
/* Any of dx, dw, db may be NULL (not wanted).  Gradients ACCUMULATE (+=). */
void matmul_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                     const float *w, int N, int IN, int O, int precision);

/* A weight converted once for repeated use: the packed (and, for bf16, rounded)
 * forms of w that forward (w^T) and dx (w) need, built on first use.  The pack
 * keeps a pointer to w, which must stay valid; after w changes in place (an
 * optimizer step) call matmul_wpack_refresh().  Results equal the unpacked
 * calls' bit for bit.  Not thread-safe: use from serial code, like the calls above. */
typedef struct matmul_wpack matmul_wpack;

/* w is [O, IN]; returns NULL on allocation failure or bad shape (IN, O < 1). */
matmul_wpack *matmul_wpack_create(const float *w, int IN, int O, int precision);
/* w's values changed: the next call re-packs (the memory is reused). */
void matmul_wpack_refresh(matmul_wpack *pk);
/* w's values changed: the forms used since they were last made are re-made
 * now, while w is likely still in cache (just after an optimizer update of it:
 * 2.5-4x faster than from memory at the next call); the others are left for
 * their next call, if any.  The same packs as that call would make. */
void matmul_wpack_repack(matmul_wpack *pk);
void matmul_wpack_destroy(matmul_wpack *pk); /* accepts NULL */
/* Bytes the pack holds now: per form used (forward, dx), as much as w itself
 * for fp32 and half of it for bf16 (panels padded to 32 columns). */
size_t matmul_wpack_bytes(const matmul_wpack *pk);

/* As matmul_forward/matmul_backward with w, IN, O and precision from pk. */
void matmul_forward_packed(float *out, const float *x, matmul_wpack *pk, const float *bias, int N);
void matmul_backward_packed(float *dx, float *dw, float *db, const float *dout, const float *x,
                            matmul_wpack *pk, int N);

/* Workspace kept between calls for the packs of dW's operands (x, and dout for
 * bf16) and, in bf16, of forward's x converted once per call, so the hot loop
 * does not allocate: a fresh multi-MB block per call costs an mmap and page
 * faults (~10% of a dW).  One per model is enough (calls are serial); it grows
 * to the largest need: N x IN floats (fp32) or about N x (2 IN + O) bf16 values
 * (bf16) of the largest Linear.  Results are the same bits as without it. */
typedef struct matmul_ws matmul_ws;
matmul_ws *matmul_ws_create(void);          /* NULL on allocation failure */
void matmul_ws_destroy(matmul_ws *ws);      /* accepts NULL */
size_t matmul_ws_bytes(const matmul_ws *ws);
/* While on, a backward call through ws whose x is the same pointer, with the
 * same N, IN and precision, as the x of the previous dW through ws takes that
 * call's pack of x instead of packing it again (the model's q, k, v share one
 * input, gate and up another).  The caller promises that x's values did not
 * change in between.  Same bits either way; off by default. */
void matmul_ws_reuse_x(matmul_ws *ws, int on);
/* The packed calls with a workspace (ws may be NULL = allocate per call). */
void matmul_forward_packed_ws(float *out, const float *x, matmul_wpack *pk, const float *bias,
                              int N, matmul_ws *ws);
void matmul_backward_packed_ws(float *dx, float *dw, float *db, const float *dout,
                               const float *x, matmul_wpack *pk, int N, matmul_ws *ws);
/* Element-wise work on outputs just computed, while they are in cache:
 * fn(ctx, row0, rows, col0, cols) is called once the block [row0, row0 + rows)
 * x [col0, col0 + cols) of EVERY output of a multi call is final.  Blocks are
 * disjoint and cover all outputs; fn may run on any thread, concurrently with
 * other blocks, from inside the matmul's parallel region: it must not start
 * OpenMP regions or call matmul.  (Fallback paths call it once for the whole
 * output, from serial code.) */
typedef struct matmul_epilogue {
    void (*fn)(void *ctx, int row0, int rows, int col0, int cols);
    void *ctx;
} matmul_epilogue;

/* Several Linears of one input x[N, IN] (q/k/v; gate/up): n calls of
 * matmul_forward_packed_ws (out[i], pk[i], bias[i]; bias may be NULL, or hold
 * NULLs), except that x is converted to bf16 once for all of them and the
 * products share one parallel region.  The packs should share IN and precision
 * (else they simply run one by one).  ep (may be NULL) is called only when
 * every pk[i] has the same O.  Same bits as separate calls. */
void matmul_forward_packed_multi_ws(float *const *out, const float *x, matmul_wpack *const *pk,
                                    const float *const *bias, int n, int N, matmul_ws *ws,
                                    const matmul_epilogue *ep);

/* Outputs that nobody keeps, handed over block by block instead of stored
 * (inference's gate/up, read once by SwiGLU): out_i = x w_i^T + bias_i for the
 * n (<= 4) packs, each block computed into a per-thread scratch, then
 * fn(ctx, row0, rows, col0, cols, blk, ld) with blk[i] the block of out_i
 * (rows x cols at row stride ld floats), the bits matmul_forward_packed_multi_ws
 * would store there.  Blocks are disjoint and cover the outputs; fn runs on
 * any thread, concurrently with other blocks, inside the matmul's parallel
 * region (no OpenMP, no matmul calls).  Only for value packs whose kernel
 * computes in such blocks (MATMUL_BF16_AMX), of the same IN, O and
 * precision: returns 0, or -1 (nothing computed; store the outputs with
 * matmul_forward_packed_multi_ws instead).  x == NULL: x is in ws's
 * MATMUL_XROWS_NEXT rows (matmul_xrows_*, below). */
typedef void (*matmul_block_fn)(void *ctx, int row0, int rows, int col0, int cols,
                                const float *const *blk, int ld);
int matmul_forward_packed_blocks_ws(const float *x, matmul_wpack *const *pk,
                                    const float *const *bias, int n, int N, matmul_ws *ws,
                                    matmul_block_fn fn, void *ctx);

/* A Linear's input x[N, IN] written straight in the form pk's GEMM reads, as
 * it is produced (a norm's rows, a block fn), so that the call does not
 * convert it again and, in a block fn, x is never stored in fp32.  ws holds
 * two such inputs: slot MATMUL_XROWS_NEXT is the memory where forward calls
 * convert their x (store into it only for the forward call that comes next
 * on ws), MATMUL_XROWS_LATER memory no forward call uses (a product after
 * the next: the down projection's h, stored while gate/up run from NEXT).
 *  - matmul_xrows_begin: 1 when this path is on (pk a value pack of a kernel
 *    that reads bf16 rows, MATMUL_BF16_AMX; memory in ws), else 0: then store
 *    x in fp32 and use the calls above.
 *  - matmul_xrows_store: the block x[n0 .. n0 + rows, k0 .. k0 + cols) from
 *    vals (row stride ld floats), rounded as the GEMM rounds its input.  Every
 *    x[n, k] exactly once; calls for disjoint blocks may run concurrently
 *    (OpenMP threads, block fns).
 *  - matmul_xrows_forward: out[i] = x pk[i]^T + bias[i] for n (<= 4) packs of
 *    the same IN (pk[0] the one begin was given; bias may be NULL), the bits
 *    of matmul_forward_packed_multi_ws on the fp32 x.
 *  - matmul_forward_packed_blocks_ws with x == NULL reads x from slot NEXT.
 * Backward calls on ws in between are not allowed. */
enum { MATMUL_XROWS_NEXT = 0, MATMUL_XROWS_LATER = 1 };
int matmul_xrows_begin(matmul_ws *ws, int slot, matmul_wpack *pk, int N);
void matmul_xrows_store(matmul_ws *ws, int slot, int n0, int rows, int k0, int cols,
                        const float *vals, int ld);
void matmul_xrows_forward(float *const *out, matmul_wpack *const *pk, const float *const *bias,
                          int n, int N, matmul_ws *ws, int slot);

/* The unpacked calls with a workspace (w packed on the fly into ws): for
 * weights that change every call (fake-quantized copies). Same bits. */
void matmul_forward_ws(float *out, const float *x, const float *w, const float *bias, int N,
                       int IN, int O, int precision, matmul_ws *ws);
void matmul_backward_ws(float *dx, float *dw, float *db, const float *dout, const float *x,
                        const float *w, int N, int IN, int O, int precision, matmul_ws *ws);
/* Backward of a packed Linear whose dout[N, O] is handed over two rows at a
 * time instead of as an fp32 matrix (the lm_head's dlogits, straight from the
 * cross-entropy backward): in bf16 on the bf16 kernel the rows go into ws's
 * bf16 forms of dout (rows for dx, k pairs for dw) while they are in cache, so
 * the large fp32 dout is neither stored nor read back.
 *  - matmul_dout_begin: 1 when this path is on (pk in MATMUL_BF16, the
 *    AVX512-BF16 kernel, memory for the packs of w, x[N, IN] and dout), else 0:
 *    then use matmul_backward_packed_ws with an fp32 dout.  x must stay unchanged
 *    until matmul_dout_backward; ws must see no other call in between.
 *  - matmul_dout_store: rows n0 and n0 + 1 of dout (n0 even; rows[0, O) and
 *    rows[O, 2 O), the second ignored when n0 + 1 == N).  Every pair exactly
 *    once; calls for different n0 may run concurrently, inside OpenMP threads.
 *  - matmul_dout_backward: dx += dout w, dw += dout^T x (either may be NULL),
 *    the same bits as matmul_backward_packed_ws on the fp32 dout. */
int matmul_dout_begin(matmul_ws *ws, matmul_wpack *pk, const float *x, int N);
void matmul_dout_store(matmul_ws *ws, int n0, const float *rows);
void matmul_dout_backward(float *dx, float *dw, matmul_wpack *pk, int N, matmul_ws *ws);

/* HiF8 code packs, for inference on a HiF8 checkpoint's quantized Linears: the
 * forward form of a weight given as HiF8 codes [O, IN] (row-major, 1 byte
 * each), kept as 1 byte per weight (about IN x O bytes, panels padded to 32
 * columns) and decoded through a 256-entry table into each micro-panel as the
 * GEMM uses it.  Products equal matmul_forward_packed_ws on a pack of the
 * decoded weight hif8_decode(code) (exact in fp32 and bf16), bit for bit.
 * The codes are copied (the caller may free or unmap them); NaN and Inf codes
 * decode to NaN / Inf as hif8_decode does.  Forward calls only (no backward
 * with dx); the kernel is fixed when the pack is made.  Precisions without a
 * packed kernel (MATMUL_FP32_BLAS, MATMUL_FP32 without AVX-512) decode the
 * weight for each call and use sgemm.  NULL on bad shape or no memory. */
matmul_wpack *matmul_wpack_create_hif8(const uint8_t *codes, int IN, int O, int precision);
int matmul_wpack_hif8(const matmul_wpack *pk);        /* 1 for a code pack */
int matmul_wpack_precision(const matmul_wpack *pk);
/* A code pack's weight read back row-major [O, IN]: codes and / or their
 * decoded values (either may be NULL). */
void matmul_wpack_hif8_read(const matmul_wpack *pk, uint8_t *codes, float *values);
size_t matmul_wpack_hif8_bytes_estimate(int IN, int O);

/* Memory estimates on this CPU: a pack of a [O, IN] weight once both forms are
 * built; a workspace after backward (and, with unpacked_w, the _ws calls) of
 * that Linear over N rows (including matmul_dout_* with its dout[N, O]).  A
 * workspace used for several Linears grows to the largest of their estimates. */
size_t matmul_wpack_bytes_estimate(int IN, int O, int precision);
size_t matmul_ws_bytes_estimate(int N, int IN, int O, int precision, int unpacked_w);

/* Frozen packs, for inference: only the forward form (B = w^T), made once from
 * the weight, which the pack does not keep (free or unmap it afterwards): an
 * inference model holds each Linear weight in its pack alone.  The products on
 * them are the bits of the unpacked calls with the same values.
 *  - _frozen: from fp32 values; _frozen_bf16: from bf16 bit patterns (a bf16
 *    checkpoint), straight into the packed format with no fp32 copy; the same
 *    bytes as _frozen on the fp32 values of those bits.
 *  - NULL on bad shape, allocation failure, or when the precision has no
 *    packed format on this CPU (matmul_frozen_available() == 0: MATMUL_FP32_BLAS,
 *    MATMUL_FP32 without AVX-512): keep w and use matmul_wpack_create then.
 *  - Forward calls only (matmul_forward_packed*, _multi_ws): backward with dx
 *    is a programming error (asserted); matmul_wpack_refresh does nothing.
 *  - The kernel is fixed when the pack is made (cpu_limit changes later do
 *    not apply to it).
 * What a pack holds: fp32 packs w exactly; bf16 packs round to bf16 (matmul.h
 * top: subnormals to zero), so a bf16 pack of bf16 values that are not
 * subnormal holds them exactly too. */
int matmul_frozen_available(int precision);
matmul_wpack *matmul_wpack_create_frozen(const float *w, int IN, int O, int precision);
matmul_wpack *matmul_wpack_create_frozen_bf16(const uint16_t *w, int IN, int O, int precision);
/* Replace a frozen pack's weight by w (same shape; a constant substitute such
 * as a fake-quantized copy): re-packed in place.  0, QS_EINVAL (not frozen),
 * or QS_ENOMEM. */
int matmul_wpack_frozen_set(matmul_wpack *pk, const float *w);
int matmul_wpack_frozen(const matmul_wpack *pk);   /* 1 for a frozen pack */
/* Row o of the weight as the products see it (bf16 values for bf16 packs) into
 * out[IN]: the embedding lookup of a tied model reads the lm_head's pack. */
void matmul_wpack_row(matmul_wpack *pk, int o, float *out);
size_t matmul_wpack_frozen_bytes_estimate(int IN, int O, int precision);
/* 1 when a forward's output rows do not depend on the other rows of the call
 * (our blocked kernels: fixed k order per element whatever M), so unrelated
 * sequences may share one call; 0 for the sgemm paths (OpenBLAS blocks by
 * shape). */
int matmul_rows_independent(int precision);

#endif
