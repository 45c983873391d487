/* model.h: a Llama-family causal LM: parameters, activations, forward pass.
 *
 * Memory (llm.c style, one block per lifetime):
 *  - parameters: ONE fp32 block of n_params floats, carved by a size table
 *    (model_tensor[], in HF names and shapes); llama_weights holds named views.
 *    Gradients and Adam m/v reuse the same table: model_weights_point() lays
 *    the views over any block of n_params floats.  A tied lm_head is a view of
 *    embed_tokens (no storage of its own).
 *  - activations: ONE arena (llama_acts) sized up front from (B, T, Tcap,
 *    config, training); model_forward never allocates.  With training = 1 every
 *    tensor backward needs is kept per layer (inputs of each linear, RMSNorm
 *    rstd, rotated q, k/v, attention probabilities, SwiGLU inputs); with
 *    training = 0 per-layer buffers are shared by all layers except the KV cache.
 *
 * Quantization seam: every Linear in model_forward goes through one call of
 * the optional model_linear_hook (layer, module) before its matmul, which may
 * substitute fake-quantized copies of the input and the weight (STYLE: one
 * visible call per linear, never hidden inside matmul).
 */
#ifndef QS_MODEL_H
#define QS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/hfconfig.h"
#include "qs/layers.h"
#include "qs/lm.h"

/* Linear modules of one block (order is internal, not on disk). */
enum {
    MODEL_LIN_Q = 0, MODEL_LIN_K, MODEL_LIN_V, MODEL_LIN_O,
    MODEL_LIN_GATE, MODEL_LIN_UP, MODEL_LIN_DOWN,
    MODEL_LIN_COUNT
};

typedef struct llama_layer_weights {
    float *attn_norm;   /* [C]            input_layernorm.weight */
    float *wq, *bq;     /* [H*hd, C], [H*hd]      (bq NULL without bias) */
    float *wk, *bk;     /* [KVH*hd, C], [KVH*hd] */
    float *wv, *bv;     /* [KVH*hd, C], [KVH*hd] */
    float *wo, *bo;     /* [C, H*hd], [C]         (bo NULL without bias) */
    float *mlp_norm;    /* [C]            post_attention_layernorm.weight */
    float *w_gate;      /* [F, C] */
    float *w_up;        /* [F, C] */
    float *w_down;      /* [C, F] */
} llama_layer_weights;

typedef struct llama_weights {
    float *wte;                   /* [V, C] embed_tokens */
    llama_layer_weights *layer;   /* [L] */
    float *norm;                  /* [C] final norm */
    float *lm_head;               /* [V, C]; == wte when tied */
} llama_weights;

/* One row of the size table. */
typedef struct model_tensor {
    char name[80];        /* HF name, e.g. "model.layers.3.mlp.up_proj.weight" */
    int ndim;             /* 1 or 2 */
    int64_t shape[2];
    size_t offset_elems;  /* into the params block */
    size_t n_elems;
    int layer;            /* block index, -1 for embed/norm/lm_head */
    int kind;             /* which view (model.c's table), internal */
} model_tensor;

typedef struct model_linear_hook {
    void *self;
    /* x[N, IN] input, w[O, IN] weight of linear (layer, module).  Return 1 after
     * writing fake-quantized copies to xq[N*IN] and wq[O*IN] (the matmul then
     * uses them), 0 to use x and w unchanged, or a negative QS_E* to abort. */
    int (*fn)(void *self, int layer, int module, const float *x, float *xq, int N, int IN,
              const float *w, float *wq, int O);
    /* Optional: nonzero when fn may act on (layer, module) (substitute or observe);
     * where it returns 0 fn is not called, so the Linears that share an input
     * can run as one fused GEMM.  NULL: fn is called for every Linear. */
    int (*planned)(void *self, int layer, int module);
} model_linear_hook;

typedef struct llama_model {
    llama_config cfg;
    model_tensor *tensors;   /* size table [n_tensors] */
    int n_tensors;
    size_t n_params;         /* floats in the params block */
    float *params;           /* the block */
    llama_weights w;         /* views into params */
    rope_table rope;         /* [max context] */
    int precision;           /* MATMUL_FP32 or MATMUL_BF16 */
    model_linear_hook hook;  /* fn NULL: no quantization */
    char dtypes[32];         /* storage dtypes found when loading, e.g. "BF16" or "F32+F16" */
    struct matmul_wpack **packs; /* NULL, or [L * MODEL_LIN_COUNT + 1] (last: lm_head) */
    int packs_precision;     /* precision the packs were made for */
    struct matmul_ws *ws;    /* with packs: the workspace of dW packs and unpacked weights */
} llama_model;

/* Size table + block (uninitialised) + views + RoPE table for cfg. */
int model_init(llama_model *m, const llama_config *cfg, qs_diag *d);
/* config.json + (sharded) safetensors from an HF directory: every expected
 * tensor must be present with its shape; F32/BF16/F16 converted once;
 * NaN/Inf refused naming the tensor. */
int model_load_dir(llama_model *m, const char *dir, qs_diag *d);
void model_free(llama_model *m);   /* safe on a zeroed model */
/* Views of the table laid over any block of n_params floats (grads, Adam m/v). */
int model_weights_point(llama_weights *w, const llama_model *m, float *block);
/* Deterministic N(0, std^2) weights, norms = 1 (tests, benchmarks). */
void model_params_randomize(llama_model *m, uint64_t seed, float std);
/* Write the params in HF layout (F32 or BF16 storage), atomically: the
 * trainer's HF-compatible checkpoint (config.json is copied by the caller). */
int model_save_safetensors(const llama_model *m, const char *path, int dtype, qs_diag *d);
/* A complete HF directory in out_dir: config/tokenizer files copied from
 * src_dir (config.json required), then model.safetensors (written last). */
int model_save_hf_dir(const llama_model *m, const char *src_dir, const char *out_dir, int dtype,
                      qs_diag *d);

/* Pre-packed weights (matmul_wpack) for every linear and the lm_head, for
 * m->precision: faster forwards, above all single-token decoding, at the cost
 * of one packed copy of the weights (fp32: same size, bf16: half).  Used only
 * while m->precision matches and the hook does not substitute the weight.
 * After the weights change in place (optimizer step) call model_packs_refresh. */
int model_packs_create(llama_model *m, qs_diag *d);
void model_packs_refresh(llama_model *m);
/* Bytes of the packs and workspace after training steps over N rows per
 * micro-batch (n_unpacked: Linears whose weight the hook substitutes). */
size_t model_packs_bytes_estimate(const llama_config *c, int precision, int N, int n_unpacked);
void model_packs_destroy(llama_model *m);   /* safe without packs */

/* Activation arena. */
typedef struct llama_acts {
    int B, T;           /* max batch and tokens per forward call */
    int Tcap;           /* KV cache capacity (positions) per sequence, >= T */
    int training;       /* 1: keep every layer's tensors for backward */
    size_t n_elems;     /* floats in memory */
    float *memory;      /* the arena */
    int32_t *pos;       /* [B*T] positions of the current call */
    /* per layer l: base + l * stride (stride 0 when !training, except the KV cache) */
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
    float *losses;      /* [N] */
    float *kv_new;      /* [2, N, KVH*hd] scratch: this call's k and v before the cache */
    float *proj;        /* [N, C] scratch: o_proj / down_proj output */
    float *xq;          /* [N * max(C, H*hd, F)] scratch for the quantization hook */
    float *wq;          /* [max linear weight] scratch for the quantization hook */
    float *attn_scratch; /* [attn_scratch_elems(B, Tcap, KVH, hd)] prompt attention */
    double loss;        /* mean loss of the last call with targets, else -1 */
} llama_acts;

/* Floats the arena needs: the explicit formula behind inspect's estimates. */
size_t model_acts_elems(const llama_config *c, int B, int T, int Tcap, int training);
/* training = 1 requires Tcap == T (attention backward's layout). */
int model_acts_init(llama_acts *a, const llama_config *c, int B, int T, int Tcap, int training,
                    qs_diag *d);
void model_acts_free(llama_acts *a);

/* Memory estimates in bytes (what inspect prints; the trainer checks its real
 * peak against train_bytes). */
typedef struct model_memory {
    size_t params_bytes;   /* 4 * n_params (fp32 block) */
    size_t grads_bytes;    /* 4 * n_params */
    size_t adam_bytes;     /* 8 * n_params (m and v) */
    size_t acts_train_bytes; /* model_acts_elems(B, T, T, training=1) * 4 */
    size_t rope_bytes;     /* cos+sin tables */
    size_t train_bytes;    /* params + grads + adam + acts_train + rope */
    size_t acts_infer_bytes; /* model_acts_elems(1, ctx, ctx, training=0) * 4 */
    size_t infer_bytes;    /* params + acts_infer + rope */
} model_memory;

/* Parameter counts by group (exact element counts, no padding). */
typedef struct model_param_groups {
    size_t embed;     /* embed_tokens */
    size_t attn;      /* q/k/v/o weights and biases */
    size_t mlp;       /* gate/up/down */
    size_t norms;     /* every RMSNorm weight */
    size_t lm_head;   /* 0 when tied */
    size_t total;
} model_param_groups;
int model_param_groups_count(const llama_config *c, model_param_groups *g);
/* The size table alone (no params block): *tensors is qs_malloc'd. */
int model_table_create(const llama_config *c, model_tensor **tensors, int *n_tensors);
void model_memory_estimate(const llama_config *c, int B, int T, int infer_ctx, model_memory *mm);

/* Causal forward of tokens[B, T] at positions pos0 .. pos0+T-1 of every
 * sequence (pos0 > 0 continues from the KV cache: incremental decoding).
 * Writes a->logits [B*T, V]; with targets[B*T] (< 0 ignored) also a->losses
 * and a->loss.  Checks ids, sizes and the context limit (Mistral's sliding
 * window included) and returns QS_E* with a diag instead of computing garbage. */
int model_forward(llama_model *m, llama_acts *a, const int32_t *tokens, const int32_t *targets,
                  int B, int T, int pos0, qs_diag *d);

/* ---- Backward (training; src/model/model_backward.c) ----
 * Gradient activations: one arena sized from (B, T, config), like llama_acts. */
typedef struct llama_grad_acts {
    int B, T;
    size_t n_elems;
    float *memory;
    float *dresid;   /* [N, C] gradient of the residual stream (walks down the layers) */
    float *dln;      /* [N, C] gradient of a normed input (q/k/v or gate/up input) */
    float *dq;       /* [N, H*hd] */
    float *dk;       /* [N, KVH*hd] */
    float *dv;       /* [N, KVH*hd] */
    float *datty;    /* [N, H*hd] gradient of the o_proj input */
    float *dgate;    /* [N, F] */
    float *dup;      /* [N, F] */
    float *dhb;      /* [N, F] gradient of the down_proj input */
    float *dx_tmp;   /* [N * max(C, H*hd, F)] one linear's own dx (masked STE) */
    float *dw_tmp;   /* [max linear weight] one linear's own dw (masked STE) */
} llama_grad_acts;

size_t model_grad_acts_elems(const llama_config *c, int B, int T);
int model_grad_acts_init(llama_grad_acts *g, const llama_config *c, int B, int T, qs_diag *d);
void model_grad_acts_free(llama_grad_acts *g);

/* Backward seam of the quantization hook (STE).  operands(): the x and w the
 * forward's matmul used for linear (layer, module) (default: the unquantized
 * ones), and optionally (*w_pack, default NULL) a persistent pack of that w in
 * the model's precision, used instead of packing w_used again; return 1 when
 * this linear's gradients must be masked (then mask() gets this linear's OWN
 * dx[N*IN] and dw[O*IN] before they are added), else 0. */
typedef struct model_linear_bwd_hook {
    void *self;
    int (*operands)(void *self, int layer, int module, const float **x_used, const float **w_used,
                    struct matmul_wpack **w_pack);
    void (*mask)(void *self, int layer, int module, float *dx, size_t n_x, float *dw, size_t n_w);
} model_linear_bwd_hook;

/* Backward of the last model_forward (training arena with T == a->T == a->Tcap,
 * pos0 = 0, targets given).  Gradients of the mean loss times loss_scale
 * (1 / grad_accum when accumulating) ACCUMULATE into gw (model_weights_point
 * views over a grads block of n_params floats; callers zero it once per step).
 * a->logits is scratch afterwards (dlogits, or still the logits where the
 * bf16 path hands dlogits straight to the lm_head's products).  hook may be
 * NULL (no quantization). */
int model_backward(llama_model *m, llama_acts *a, llama_grad_acts *g, const llama_weights *gw,
                   const int32_t *tokens, const int32_t *targets, int B, int T, float loss_scale,
                   const model_linear_bwd_hook *hook, qs_diag *d);

/* Autoregressive generation for one sequence (B = 1): the prompt goes through
 * the model in chunks of a->T tokens, then one token per step through the KV
 * cache (needs a->Tcap >= n_prompt + n_new).  Stops after n_new tokens or at
 * a token in stop_ids (not emitted).  out[n_new] gets the new ids, *n_out
 * their count; on_token (may be NULL) sees each new id, non-zero stops. */
typedef int (*model_token_fn)(void *user, int32_t id);
struct sampler;
int model_generate(llama_model *m, llama_acts *a, const int32_t *prompt, int n_prompt, int n_new,
                   struct sampler *s, const int32_t *stop_ids, int n_stop, int32_t *out,
                   int *n_out, model_token_fn on_token, void *user, qs_diag *d);

/* Sliding-window perplexity as Hugging Face's guide computes it: windows of
 * `window` tokens starting every `stride` tokens; each window scores only the
 * tokens the previous one did not (never a window's first token), so every
 * token after ids[0] is scored once, with up to window - stride tokens of
 * context.  Windows go through the model in chunks (KV cache), so memory is
 * bounded by min(window, 256) rows of logits.  NLL sums are in double. */
typedef struct model_ppl_result {
    double nll_sum;     /* sum of -log p(token) over scored tokens (natural log) */
    size_t n_scored;
    size_t n_windows;
} model_ppl_result;
int model_ppl_compute(llama_model *m, const int32_t *ids, size_t n_ids, int window, int stride,
                      model_ppl_result *r, qs_diag *d);

/* lm.h implementation: contexts computed once (KV kept), continuations scored
 * on top; requests are processed one by one, so results do not depend on how
 * they are batched. */
typedef struct model_lm model_lm;
int model_lm_create(model_lm **out, llama_model *m, int max_len, qs_diag *d);
void model_lm_destroy(model_lm *lm);
lm_scorer model_lm_scorer(model_lm *lm);

#endif
