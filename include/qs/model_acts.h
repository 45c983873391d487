/* model_acts.h: the activation arena of a llama_model and the forward pass
 * that fills it.
 *
 * ONE arena (llama_acts) sized up front from (B, T, Tcap, config, mode);
 * model_forward never allocates.  Modes (the `training` argument):
 *  - MODEL_ACTS_INFER (0): per-layer buffers are shared by all layers except
 *    the KV cache;
 *  - MODEL_ACTS_TRAIN (1): every tensor backward needs is kept per layer
 *    (inputs of each linear, RMSNorm rstd, rotated q, k/v, attention
 *    probabilities, SwiGLU inputs);
 *  - MODEL_ACTS_RECOMPUTE (2): training with per-block recomputation: only the
 *    residual stream entering each block is kept per layer, every other
 *    tensor (KV and attention probabilities included) is ONE block's worth,
 *    and model_backward recomputes a block's forward from its residual input
 *    just before that block's backward (the last block's tensors are still
 *    there).  The recomputation runs the same code on the same inputs, so
 *    the gradients are the same bits as with MODEL_ACTS_TRAIN; the quantization
 *    hook is asked to replay (model_linear_hook.replay), not to quantize anew.
 */
#ifndef QS_MODEL_ACTS_H
#define QS_MODEL_ACTS_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/hfconfig.h"
#include "qs/model.h"

enum { MODEL_ACTS_INFER = 0, MODEL_ACTS_TRAIN = 1, MODEL_ACTS_RECOMPUTE = 2 };

struct llama_acts;
/* Positions 0 .. seq_pos0[b]-1 of sequence b taken from another arena's KV
 * cache (every layer kept): continuations scored on top of contexts computed
 * in an earlier call, without copying whole caches ahead. */
typedef struct model_kv_prefix {
    const struct llama_acts *src;   /* its cache holds the prefixes (not kv_shared) */
    const int *src_seq;             /* [B]: the source sequence of sequence b */
} model_kv_prefix;

/* Activation arena. */
typedef struct llama_acts {
    int B, T;           /* max batch and tokens per forward call */
    int Tcap;           /* KV cache capacity (positions) per sequence, >= T */
    int training;       /* nonzero: a training arena (backward possible) */
    int recompute;      /* 1: MODEL_ACTS_RECOMPUTE (one block's tensors, resid per layer) */
    int kv_shared;      /* 1: ONE layer of KV cache, reused by every layer: nothing outlives
                         * a call (model_acts_init_infer); earlier positions need kv_prefix */
    int logits_cap;     /* rows the logits hold (0: B*T) */
    int ln1_rows;       /* set by model_forward (not by callers): the model workspace's
                         * MATMUL_XROWS_NEXT holds the next layer's ln1 as the q/k/v
                         * GEMM's bf16 rows (inference on AMX packs, model_forward.c) */
    size_t rows_cap, kv_cap; /* model_acts_init_infer's capacities (0 otherwise) */
    size_t n_elems;     /* floats in memory */
    float *memory;      /* the arena */
    int32_t *pos;       /* [B*T] positions of the current call */
    /* per layer l: base + l * stride (stride 0 when !training, except the KV cache
     * without kv_shared; with recompute every stride is 0 except resid's) */
    float *resid;       /* [L+1, N, C] residual stream entering layer l (L: final) */
    float *ln1;         /* [L, N, C] */
    float *ln1_rstd;    /* [L, N] */
    float *q;           /* [L, N, H*hd] rotated queries */
    float *kcache;      /* [L, B, Tcap, KVH*hd] rotated keys (always per layer) */
    float *vcache;      /* [L, B, Tcap, KVH*hd] */
    float *att;         /* [L, B, H, T, Tcap] probabilities (training only, else NULL) */
    float *atty;        /* [L, N, H*hd] attention output (o_proj input) */
    float *resid_mid;   /* [L, N, C] residual after attention */
    float *ln2;         /* [L, N, C] */
    float *ln2_rstd;    /* [L, N] */
    float *gate;        /* [L, N, F] */
    float *up;          /* [L, N, F] */
    float *hb;          /* [L, N, F] SwiGLU output (down_proj input) */
    float *lnf;         /* [N, C] */
    float *lnf_rstd;    /* [N] */
    float *logits;      /* [N, V]; with logits_tail = k > 0 only [B*k, V] are written */
    int logits_tail;    /* 0: lm_head on every row; k > 0: only on the last k rows of each
                         * sequence (scoring needs no others; no targets allowed) */
    const int *logits_rows; /* NULL, or [B]: lm_head only on the FIRST logits_rows[b] rows of
                             * sequence b (right-padded batches), written packed: sequence
                             * b's rows start at logits row sum_{b' < b} logits_rows[b'];
                             * inference only (lnf is compacted in place), no targets */
    const int *logits_first; /* NULL, or [B] with logits_rows: sequence b's rows start at
                              * row logits_first[b] of that sequence instead of 0 */
    const int *seq_pos0;  /* NULL, or [B]: sequence b starts at position seq_pos0[b] (pos0
                           * is then ignored); inference only */
    const model_kv_prefix *kv_prefix; /* NULL, or: each call first copies the prefixes */
    float *losses;      /* [N] */
    float *xent_max;    /* [N] training: the softmax statistics of the last forward with */
    double *xent_sum;   /* [N]   targets (xent_stats), for the backward of its logits */
    int xent_kept;      /* 1 when they are those of the logits held now */
    float *kv_new;      /* [2, N, KVH*hd] scratch: this call's k and v before the cache */
    float *proj;        /* [N, C] scratch: o_proj / down_proj output */
    float *xq;          /* [N * max(C, H*hd, F)] scratch for the quantization hook */
    float *wq;          /* [max linear weight] scratch for the quantization hook */
    float *attn_scratch; /* [attn_scratch_elems(B, Tcap, KVH, hd)] prompt attention */
    double loss;        /* mean loss of the last call with targets, else -1 */
} llama_acts;

/* Floats the arena needs: the explicit formula behind inspect's estimates.
 * training: MODEL_ACTS_INFER, MODEL_ACTS_TRAIN or MODEL_ACTS_RECOMPUTE.
 * SIZE_MAX when the count does not fit in size_t (no wrap at any B, T). */
size_t model_acts_elems(const llama_config *c, int B, int T, int Tcap, int training);
/* A training mode requires Tcap == T (attention backward's layout). */
int model_acts_init(llama_acts *a, const llama_config *c, int B, int T, int Tcap, int training,
                    qs_diag *d);
void model_acts_free(llama_acts *a);
/* Inference arena sized by capacity, for forwards of varying shape (scoring
 * batches of real inputs): rows (B*T tokens per call), kv_positions (B*Tcap
 * cache positions per layer, or in the one layer with kv_shared), logits_rows
 * (the logits it holds: forwards must ask for at most that many through
 * logits_tail / logits_rows).  model_acts_view sets the shape of the next
 * forwards; the cache layout follows it (a cache is read back only under the
 * view it was written in).  Floats: model_acts_infer_elems. */
int model_acts_init_infer(llama_acts *a, const llama_config *c, int rows, int kv_positions,
                          int logits_rows, int kv_shared, qs_diag *d);
size_t model_acts_infer_elems(const llama_config *c, int rows, int kv_positions, int logits_rows,
                              int kv_shared);
/* Floats of the KV cache (keys and values) in an inference arena of `positions`
 * cache positions (sequences x capacity): every layer's, or one layer's with
 * kv_shared; the arena's alignment padding aside.  SIZE_MAX when it does not fit. */
size_t model_acts_kv_elems(const llama_config *c, size_t positions, int kv_shared);
/* B sequences of T tokens on caches of Tcap positions: QS_ERANGE when that does
 * not fit the capacities (B*T > rows, B*Tcap > kv_positions, Tcap < T or past
 * the model's context). */
int model_acts_view(llama_acts *a, const llama_config *c, int B, int T, int Tcap, qs_diag *d);

/* Causal forward of tokens[B, T] at positions pos0 .. pos0+T-1 of every
 * sequence (pos0 > 0 continues from the KV cache: incremental decoding).
 * Writes a->logits [B*T, V]; with targets[B*T] (< 0 ignored) also a->losses
 * and a->loss.  Checks ids, sizes and the context limit (Mistral's sliding
 * window included) and returns QS_E* with a diag instead of computing garbage. */
int model_forward(llama_model *m, llama_acts *a, const int32_t *tokens, const int32_t *targets,
                  int B, int T, int pos0, qs_diag *d);
/* out[rows, V] = the lm_head of in[rows, dim] (final-norm rows, e.g. a->lnf
 * after a forward with logits_rows 0): the product model_forward makes, with
 * the same bits row for row where matmul_rows_independent(m->precision). */
void model_lm_head(llama_model *m, float *out, const float *in, int rows);

#endif
