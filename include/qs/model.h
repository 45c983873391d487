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
const char *model_linear_name(int module);   /* "q_proj", ..., "down_proj" */

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
    float *logits;      /* [N, V] */
    float *losses;      /* [N] */
    float *kv_new;      /* [2, N, KVH*hd] scratch: this call's k and v before the cache */
    float *proj;        /* [N, C] scratch: o_proj / down_proj output */
    float *xq;          /* [N * max(C, H*hd, F)] scratch for the quantization hook */
    float *wq;          /* [max linear weight] scratch for the quantization hook */
    double loss;        /* mean loss of the last call with targets, else -1 */
} llama_acts;

/* Floats the arena needs: the explicit formula behind inspect's estimates. */
size_t model_acts_elems(const llama_config *c, int B, int T, int Tcap, int training);
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
size_t model_param_count(const llama_config *c);
void model_memory_estimate(const llama_config *c, int B, int T, int infer_ctx, model_memory *mm);

/* Causal forward of tokens[B, T] at positions pos0 .. pos0+T-1 of every
 * sequence (pos0 > 0 continues from the KV cache: incremental decoding).
 * Writes a->logits [B*T, V]; with targets[B*T] (< 0 ignored) also a->losses
 * and a->loss.  Checks ids, sizes and the context limit (Mistral's sliding
 * window included) and returns QS_E* with a diag instead of computing garbage. */
int model_forward(llama_model *m, llama_acts *a, const int32_t *tokens, const int32_t *targets,
                  int B, int T, int pos0, qs_diag *d);

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

/* lm.h implementation: contexts computed once (KV kept), continuations scored
 * on top; requests are processed one by one, so results do not depend on how
 * they are batched. */
typedef struct model_lm model_lm;
int model_lm_create(model_lm **out, llama_model *m, int max_len, qs_diag *d);
void model_lm_destroy(model_lm *lm);
lm_scorer model_lm_scorer(model_lm *lm);

#endif
