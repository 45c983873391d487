/* model.h: a Llama-family causal LM: the parameter size table, the one fp32
 * parameter block with its named views, loading from and saving to an HF
 * directory, weight packs and the memory formula.
 *
 * Memory (llm.c style, one block per lifetime):
 *  - parameters: ONE fp32 block of n_params floats, carved by a size table
 *    (model_tensor[], in HF names and shapes); llama_weights holds named views.
 *    Gradients and Adam m/v reuse the same table: model_weights_point() lays
 *    the views over any block of n_params floats.  A tied lm_head is a view of
 *    embed_tokens (no storage of its own).
 *  - activations and the forward pass: qs/model_acts.h.
 *  - backward (training): qs/model_train.h.
 *  - generation, perplexity, the lm.h scorer (inference): qs/model_infer.h.
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

#define MODEL_NO_STORAGE ((size_t)-1)

/* One row of the size table. */
typedef struct model_tensor {
    char name[80];        /* HF name, e.g. "model.layers.3.mlp.up_proj.weight" */
    int ndim;             /* 1 or 2 */
    int64_t shape[2];
    size_t offset_elems;  /* into the params block; MODEL_NO_STORAGE: none (a HiF8
                             checkpoint's coded weight: its view is NULL) */
    size_t n_elems;
    int layer;            /* block index, -1 for embed/norm/lm_head */
    int kind;             /* which view (model.c's table), internal */
} model_tensor;

typedef struct model_linear_hook {
    void *self;
    /* x[N, IN] input, w[O, IN] weight of linear (layer, module).  Return 1 after
     * writing fake-quantized copies to xq[N*IN] and wq[O*IN] (the matmul then
     * uses them), 0 to use x and w unchanged, or a negative QS_E* to abort.
     * Return 2 after writing CODE-DOMAIN operands (HiF8 values without their
     * scales, decode(encode_sat(x * s))) to xq and wq: the matmul then runs on
     * them without bias and output row r becomes fl(acc * row_scale()[r]) + bias
     * (model_linear_rows_finish), the W8A8 arithmetic of a HiF8 checkpoint. */
    int (*fn)(void *self, int layer, int module, const float *x, float *xq, int N, int IN,
              const float *w, float *wq, int O);
    /* With fn returning 2: the N row factors 1 / (s_x[r] s_w) of that call. */
    const float *(*row_scale)(void *self);
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
    struct model_hif8 *hif8; /* NULL, or a HiF8 W8A8 checkpoint's quantized Linears
                              * (qs/model_hif8.h): their weights only in its code packs */
} llama_model;

/* The last step of a code-domain Linear (hook fn 2, HiF8 checkpoints):
 * out[r, o] = fl(out[r, o] * row_scale[r]) (+ bias[o], may be NULL). */
void model_linear_rows_finish(float *out, const float *row_scale, const float *bias, int N, int O);

/* Size table + block (uninitialised) + views + RoPE table for cfg. */
int model_init(llama_model *m, const llama_config *cfg, qs_diag *d);
/* config.json + (sharded) safetensors from an HF directory: every expected
 * tensor must be present with its shape; F32/BF16/F16 converted once;
 * NaN/Inf refused naming the tensor.  A HiF8 checkpoint (quantization_config,
 * qs/model_hif8.h) sets m->hif8; its coded weights go into code packs
 * (m->hif8->packs), 1 byte per weight, and take no room in the params block
 * (offset MODEL_NO_STORAGE, views NULL). */
int model_load_dir(llama_model *m, const char *dir, qs_diag *d);
void model_free(llama_model *m);   /* safe on a zeroed model */
/* The checkpoint's identity: sha256 over "name sha256\n" of config.json and
 * every *.safetensors file of dir, in name order (results.json's model_sha256). */
int model_dir_sha256(const char *dir, char hex[65], qs_diag *d);
/* Every parameter rounded to bf16 in place (round to nearest even, as the
 * export stores them), except the weights of Linears a HiF8 checkpoint or the
 * installed hook quantizes: evaluation in the arithmetic of the export. */
void model_params_round_bf16(llama_model *m);
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
/* The side files of an HF directory (config.json when with_config, where it is
 * required; tokenizer.json, tokenizer.model, tokenizer_config.json,
 * special_tokens_map.json, generation_config.json where present) copied from
 * src_dir into the existing dst_dir, each atomically. */
int model_hf_files_copy(const char *src_dir, const char *dst_dir, int with_config, qs_diag *d);

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

#endif
