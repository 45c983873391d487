/* layers.h: the math of one Llama block, as forward/backward pairs on flat fp32
 * arrays (llm.c style).  Shapes are in the comments; N = B*T rows.
 *
 * Contract for every pair:
 *  - forward writes its outputs and whatever it saves for backward (rstd, att);
 *    saved buffers may be NULL in inference-only calls;
 *  - backward ACCUMULATES (+=) into every gradient it writes, so residual and
 *    tied-weight gradients add up without extra passes; callers zero grads once
 *    per step.  Exception: swiglu_backward OVERWRITES dgate and dup (their only
 *    writer in a Llama block), so they need no zeroing pass;
 *  - nothing allocates; threading (OpenMP) is internal, partitioned by output
 *    so results are bit-identical for any thread count.
 */
#ifndef QS_LAYERS_H
#define QS_LAYERS_H

#include <stddef.h>
#include <stdint.h>

/* Embedding: out[N, C] = wte[tok[n], :] */
void embed_forward(float *out, const int32_t *tok, const float *wte, int N, int C);
void embed_backward(float *dwte, const float *dout, const int32_t *tok, int N, int C);

/* RMSNorm: rstd[n] = 1 / sqrt(mean_c x[n,c]^2 + eps); out = x * rstd * w[c] */
void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C,
                     float eps);
/* dx += dout w r - k x (r = rstd[n]) with k = r^3 / C * sum_c dout w x (in double),
 * dw += sum_n dout x r (fp32, rows in order).  With AVX-512 the sum is taken in
 * 8 double lanes (as the forward's sum of squares), so dx may differ from the
 * portable loops in the last bits of k; dw has the portable loops' bits. */
void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                      const float *rstd, int N, int C);
/* Residual add then RMSNorm in one pass: sum = a + b (sum may alias a), then
 * out, rstd = rmsnorm_forward(sum).  With AVX-512 the mean of squares is summed
 * in 8 double lanes (rstd may differ from the sequential sum in its last bit;
 * rmsnorm_forward uses the same code, so both always agree). */
void rmsnorm_residual_forward(float *sum, float *out, float *rstd, const float *a, const float *b,
                              const float *w, int N, int C, float eps);
/* The same, and row_fn(ctx, n, out row n) called as each row is done (while it
 * is in L1; on the thread that computed it, possibly inside an OpenMP region,
 * rows concurrently): e.g. to convert it for the next product (NULL: none). */
void rmsnorm_residual_forward_rows(float *sum, float *out, float *rstd, const float *a,
                                   const float *b, const float *w, int N, int C, float eps,
                                   void (*row_fn)(void *ctx, int n, const float *row),
                                   void *ctx);

/* RoPE with Hugging Face's half-split rotation ("rotate_half"): for each head,
 * pairs (i, i + hd/2), angle = pos * inv_freq[i].  Tables are precomputed for
 * positions [0, max_pos) from rope_theta and optional scaling (llama3 / linear). */
typedef struct rope_table {
    float *cos;   /* [max_pos, hd/2] */
    float *sin;   /* [max_pos, hd/2] */
    int max_pos;
    int head_dim;
} rope_table;

enum { ROPE_SCALING_NONE = 0, ROPE_SCALING_LINEAR = 1, ROPE_SCALING_LLAMA3 = 2 };
typedef struct rope_scaling {
    int type;
    double factor;                     /* linear and llama3 */
    double low_freq_factor;            /* llama3 */
    double high_freq_factor;           /* llama3 */
    int original_max_position;         /* llama3 */
} rope_scaling;

/* Allocates cos/sin (qs_malloc).  Angles computed in double, stored as float. */
int rope_table_init(rope_table *t, int max_pos, int head_dim, double theta,
                    const rope_scaling *scaling);
void rope_table_free(rope_table *t);
/* Bytes rope_table_init allocates (cos and sin) for max_pos positions of head_dim. */
size_t rope_table_bytes(int max_pos, int head_dim);
/* In place on x[N, n_heads, hd]; pos[N] absolute positions (< max_pos). */
void rope_forward(float *x, const int32_t *pos, const rope_table *t, int N, int n_heads);
/* In place on dx[N, n_heads, hd]: applies the transposed (inverse) rotation. */
void rope_backward(float *dx, const int32_t *pos, const rope_table *t, int N, int n_heads);

/* Causal grouped-query attention.
 *   q[B, T, H, hd]          queries of absolute positions pos0 .. pos0+T-1 (already rotated)
 *   k, v[B, Tcap, KVH, hd]  keys/values of positions 0 .. pos0+T-1 (a KV cache of capacity Tcap)
 *   out[B, T, H, hd]        softmax(q k^T / sqrt(hd)) v, query t sees keys 0 .. pos0+t
 *   att[B, H, T, Tcap]      saved probabilities for backward (NULL in inference)
 * Head h uses KV head h / (H / KVH).
 * Row-invariant: each query row's output is a fixed function of its q row and keys/values
 * 0 .. pos0+t (fixed-order dot products, exact two-pass softmax, weighted sum in key
 * order; src/layers/layer_attn_impl.h), bit-identical whatever T, pos0, B, Tcap, scratch, att
 * and the thread count, and the same bits on the portable and the AVX-512 loops.
 * scratch: attn_scratch_elems(B, Tcap, KVH, hd) floats (transposed keys of prompts and
 * per-thread score rows); NULL works too (slower: scores computed twice per row). */
size_t attn_scratch_elems(int B, int Tcap, int KVH, int hd);
void attn_forward(float *out, float *att, const float *q, const float *k, const float *v, int B,
                  int T, int pos0, int Tcap, int H, int KVH, int hd, float *scratch);
/* Inference with a start position per sequence: sequence b's queries are positions
 * pos0[b] .. pos0[b]+T-1 and see keys 0 .. pos0[b]+t (pos0[b] + T <= Tcap); rows are
 * the same bits as attn_forward's with pos0 = pos0[b] (batched scoring of
 * continuations that follow contexts of different lengths). */
void attn_forward_seq(float *out, const float *q, const float *k, const float *v, int B, int T,
                      const int *pos0, int Tcap, int H, int KVH, int hd, float *scratch);
/* Training form (pos0 = 0, Tcap = T).  dq[B,T,H,hd], dk/dv[B,T,KVH,hd] accumulate.
 * The same bits on the portable and the AVX-512 path, whatever the thread count. */
void attn_backward(float *dq, float *dk, float *dv, const float *dout, const float *att,
                   const float *q, const float *k, const float *v, int B, int T, int H, int KVH,
                   int hd);

/* SwiGLU: out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)).  With
 * AVX-512 the forward uses a vector exp: within SWIGLU_SIMD_TOL_ULP ulp of
 * |silu(g) u| of the expf form (the backward keeps expf). */
enum { SWIGLU_SIMD_TOL_ULP = 8 };
void swiglu_forward(float *out, const float *gate, const float *up, size_t n);
/* The same on the block rows x cols of row-major tensors with row stride ld
 * (the same bits per element).  Called inside a parallel region (a matmul
 * epilogue) it runs serially on the calling thread; outside, it threads. */
void swiglu_forward_block(float *out, const float *gate, const float *up, int rows, int cols,
                          size_t ld);
/* dgate[i] = dout[i] up[i] sig (1 + g (1 - sig)), dup[i] = dout[i] silu(g),
 * sig = 1 / (1 + exp(-g)): OVERWRITES dgate and dup (no accumulation). */
void swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                     const float *up, size_t n);

/* The softmax statistics of each row as the forward computed them, for the
 * backward of the same logits: max[n] = the row's max, sum[n] = sum_v exp(logits[n,
 * v] - max[n]) in double (-1: not computed, the row's target ignored).  A
 * backward given them skips its max and sum passes (one pass per row instead of
 * three) and gives the same bits as without them. */
typedef struct xent_stats {
    float *max;    /* [N] */
    double *sum;   /* [N] */
} xent_stats;

/* Cross-entropy of logits[N, V] against targets[N] (target < 0: ignored).
 * losses[n] = logsumexp(logits[n]) - logits[n, target] (0 when ignored).
 * Returns the mean loss over non-ignored rows (double accumulation).  st: NULL,
 * or where to keep each row's statistics. */
double xent_forward(float *losses, const xent_stats *st, const float *logits,
                    const int32_t *targets, int N, int V);
/* dlogits[n, :] = (softmax(logits[n]) - onehot(target)) * scale  (OVERWRITES dlogits;
 * rows with ignored targets get 0).  scale is usually 1 / (number of non-ignored rows).
 * st: NULL, or xent_forward's statistics of these logits. */
void xent_backward(float *dlogits, const xent_stats *st, const float *logits,
                   const int32_t *targets, int N, int V, float scale);
/* One row's -log softmax(l)[target] in double by the reference loop (row max
 * subtracted, libm exp, double sum): xent_forward's portable path, and ppl. */
double xent_row_nll(const float *l, int V, int32_t target);

/* xent_backward without the [N, V] output: rows are computed two at a time
 * into per-thread scratch and handed to put(ctx, n0, rows) for each even n0
 * (rows[0, V) = row n0, rows[V, 2V) = row n0 + 1 when n0 + 1 < N), the same
 * values as xent_backward's.  put runs on OpenMP threads, concurrently for
 * different n0, once per pair: it must not start OpenMP regions.  0, or
 * QS_ENOMEM (scratch; put never called). */
typedef void (*xent_rows_fn)(void *ctx, int n0, const float *rows);
int xent_backward_pairs(const xent_stats *st, const float *logits, const int32_t *targets, int N,
                        int V, float scale, xent_rows_fn put, void *ctx);

#endif
