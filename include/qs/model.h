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
 *  - inference models (model_load_packed): every Linear weight, the lm_head and
 *    the embedding live ONLY in frozen packs (matmul.h) in the precision of the
 *    forwards, one copy (a bf16 checkpoint scored in bf16: 2 bytes per weight,
 *    no fp32 copy; the embedding of a tied model is read back out of the
 *    lm_head's pack); the params block holds the norms and biases alone and
 *    the views of the packed tensors are NULL.  Forward only.  A HiF8
 *    checkpoint's quantized Linears are held as code packs (m->hif8, 1 byte
 *    per weight, qs/model_hif8.h) in either loader.
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
    size_t offset_elems;  /* into the params block; MODEL_NO_STORAGE: none, its view
                             is NULL (a packed model's matrices: in their frozen
                             packs; a HiF8 checkpoint's coded weight: its code pack) */
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
     * (model_linear_rows_finish), the W8A8 arithmetic of a HiF8 checkpoint.
     * With substituted packs (w = wq = NULL, see weight below) the pack holds
     * the substitute of the same kind (fake-quantized, or code-domain values). */
    int (*fn)(void *self, int layer, int module, const float *x, float *xq, int N, int IN,
              const float *w, float *wq, int O);
    /* With fn returning 2: the N row factors 1 / (s_x[r] s_w) of that call. */
    const float *(*row_scale)(void *self);
    /* Optional: nonzero when fn may act on (layer, module) (substitute or observe);
     * where it returns 0 fn is not called, so the Linears that share an input
     * can run as one fused GEMM.  NULL: fn is called for every Linear. */
    int (*planned)(void *self, int layer, int module);
    /* Optional: the recomputation of a block (MODEL_ACTS_RECOMPUTE arenas, from
     * model_backward): as fn, but it must make exactly the substitution fn made
     * for (layer, module) in the last forward, and record nothing (no amax, no
     * statistics).  NULL: fn is called again (right for hooks without state). */
    int (*replay)(void *self, int layer, int module, const float *x, float *xq, int N, int IN,
                  const float *w, float *wq, int O);
    /* Optional, for hooks whose weight substitute is constant (evaluation: frozen
     * scales, fixed weights): writes the substitute of w[O, IN] to wq and returns
     * 0 (or a negative QS_E*).  model_packs_substitute() then packs it once, and
     * fn is called with w = wq = NULL for that Linear (it substitutes x only). */
    int (*weight)(void *self, int layer, int module, const float *w, float *wq, int O, int IN);
    /* Optional: where the substitutes of the last fn or replay call that
     * returned 1 or 2 are, for a hook that keeps them in its own buffers (the
     * trainer's quantized operands, which its backward reads too): it sets *xq
     * and / or *wq to them, or leaves a pointer as is when that substitute was
     * written to the xq / wq given to the call.  A hook with `where` need not
     * copy its substitutes there (the trainer's copies cost ~3% of a 1B QAT
     * step: up to 62 MB per Linear, forward and recompute). */
    void (*where)(void *self, const float **xq, const float **wq);
    /* Nonzero: fn treats the rows of x independently (a row's substitute
     * depends on that row alone), so unrelated sequences may share a forward
     * (the lm scorer batches requests only then). */
    int rows_independent;
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
    struct matmul_ws *ws;    /* NULL, or the workspace of dW packs and unpacked weights
                              * (with packs, or model_ws_create alone) */
    struct model_hif8 *hif8; /* NULL, or a HiF8 W8A8 checkpoint's quantized Linears
                              * (qs/model_hif8.h): their weights only in its code packs */
    int weights_packed;      /* 1: Linear weights, lm_head and embedding only in (frozen) packs */
    struct matmul_wpack *embed_pack; /* weights_packed and untied: embed_tokens (rows read back) */
    int packs_substituted;   /* model_packs_substitute ran: the planned Linears' packs hold
                              * hook.weight's substitutes */
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
/* Inference load for forwards in `precision` (MATMUL_FP32 or MATMUL_BF16): as
 * model_load_dir (same checks and errors), but every Linear weight, the lm_head
 * and the embedding go from the checkpoint straight into frozen packs, one
 * copy, mapped pages released tensor by tensor (peak memory ~ the packs); the
 * params block keeps the norms and biases.  Exact: fp32 packs hold any stored
 * value; bf16 packs are used only where the checkpoint stores those tensors
 * as BF16 without subnormal values.  Otherwise (F32/F16 weights in bf16, a
 * subnormal, or no packed format on this CPU) the model is loaded as
 * model_load_dir does and packed by model_packs_create (fp32 block + packs).
 * Either way m->precision = precision and the packs exist on return; forwards
 * give the same bits as model_load_dir + model_packs_create.  A HiF8
 * checkpoint's coded weights go into code packs made for `precision` (m->hif8,
 * as model_load_dir; its other tensors are BF16, so in bf16 the model holds 1
 * byte per quantized and 2 per other Linear / embedding weight). */
int model_load_packed(llama_model *m, const char *dir, int precision, qs_diag *d);
/* The memory model_load_packed(dir, precision) holds once loaded, in bytes, on
 * this CPU (what inspect prints): the same table, the same route and the pack
 * sizes of the same functions (matmul_wpack_frozen_bytes_estimate,
 * matmul_wpack_hif8_bytes_estimate), so the figures follow the loader.
 * q8: the checkpoint's quantization_config (model_hif8_config_read; NULL:
 * none); matrices_bf16: 1 when every matrix it stores as weights (the 2-D
 * tensors other than HiF8 codes) is BF16, which bf16 packs need (a subnormal
 * value, which inspect cannot see without reading the values, also sends the
 * load down the fp32 route).  Not counted: the matmul workspace and the
 * activation arenas (qs/model_acts.h, qs/model_infer.h), the size table and
 * other structs of a few KiB. */
typedef struct model_packed_memory {
    size_t packs_bytes;   /* frozen packs (and their pointer array): Linears, lm_head, embedding */
    size_t codes_bytes;   /* a HiF8 checkpoint's code packs, 1 byte per weight */
    size_t params_bytes;  /* the fp32 block: norms and biases (or, fp32_copy: every tensor
                           * but the codes) */
    size_t rope_bytes;    /* cos+sin tables of the model's context */
    size_t bytes;         /* the sum */
    int fp32_copy;        /* 1: loaded as model_load_dir + model_packs_create (an F32/F16
                           * checkpoint in bf16, or no packed format on this CPU) */
} model_packed_memory;
/* 0, QS_EINVAL (not fp32, bf16 or bf16-amx), QS_ENOMEM (the table), or
 * QS_ERANGE when a figure does not fit in size_t (then it and bytes are SIZE_MAX). */
int model_packed_memory_estimate(const llama_config *c, int precision, const struct model_hif8 *q8,
                                 int matrices_bf16, model_packed_memory *pm);
/* *all_bf16 = 1 when every 2-D tensor in dir's safetensors files is BF16 (or
 * U8: HiF8 codes), the matrices_bf16 of model_packed_memory_estimate from the
 * headers alone (a subnormal value, seen only when loading, is not). */
int model_dir_matrices_bf16(const char *dir, int *all_bf16, qs_diag *d);
/* The checkpoint's identity: sha256 over "name sha256\n" of config.json and
 * every *.safetensors file of dir, in name order (results.json's model_sha256). */
int model_dir_sha256(const char *dir, char hex[65], qs_diag *d);
/* Every parameter rounded to bf16 in place (round to nearest even, as the
 * export stores them), except the weights of Linears a HiF8 checkpoint or the
 * installed hook quantizes: evaluation in the arithmetic of the export.  The
 * weights of fp32 frozen packs are read back, rounded and re-packed (bf16
 * packs hold bf16 values already); plain packs are refreshed.  0 or QS_ENOMEM. */
int model_params_round_bf16(llama_model *m, qs_diag *d);
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
/* For an optimizer that updates the params block in segments: model_packs_ends
 * writes the sorted ends (offsets in floats from m->params, at most
 * n_layers * MODEL_LIN_COUNT + 1) of the packed weights and returns their
 * count; once params[lo, hi) is updated, model_packs_repack_range re-packs the
 * weights that end in (lo, hi] (matmul_wpack_repack: the forms in use, now,
 * while the weights are in cache; the others stale).  A weight lies whole in
 * the segment that ends where it ends, so a step over segments [.., ends[i])
 * followed by these calls leaves every pack current. */
int model_packs_ends(const llama_model *m, size_t *ends);
void model_packs_repack_range(llama_model *m, size_t lo, size_t hi);
/* Bytes of the packs and workspace after training steps over N rows per
 * micro-batch (n_unpacked: Linears whose weight the hook substitutes). */
size_t model_packs_bytes_estimate(const llama_config *c, int precision, int N, int n_unpacked);
void model_packs_destroy(llama_model *m);   /* safe without packs; frees the workspace too */
/* The workspace alone, no persistent packs (memory-lean training): every
 * product packs its weight on the fly into m->ws instead of allocating per call;
 * the same bits.  At N rows per call the packing is a few per cent of a
 * product's time and the memory is one workspace instead of a copy of every
 * weight.  Freed by model_packs_destroy / model_free. */
int model_ws_create(llama_model *m, qs_diag *d);
/* Bytes of that workspace after training steps over N rows per micro-batch
 * (an upper bound: it counts the lm_head's dout rows, which only packs use). */
size_t model_ws_bytes_estimate(const llama_config *c, int precision, int N);
/* Constant weight substitutes (evaluation): for every Linear the hook plans (all
 * when hook.planned is NULL), the pack is re-made from hook.weight(w) once,
 * instead of substituting the weight on every forward; w is read from the fp32
 * block, or from the pack itself for a packed model (exact there).  Needs packs
 * and hook.weight.  One way: a packed model keeps only the substitutes (its
 * forwards then refuse to run without the hook); with an fp32 block,
 * model_packs_create restores the plain packs.  Same bits as the per-call
 * substitution.  A HiF8 checkpoint's coded Linears are skipped (their code
 * packs are the weight). */
int model_packs_substitute(llama_model *m, qs_diag *d);

/* Memory estimates in bytes (what inspect prints; the trainer checks its real
 * peak against train_bytes). */
typedef struct model_memory {
    size_t params_bytes;   /* 4 * n_params (fp32 block) */
    size_t grads_bytes;    /* 4 * n_params */
    size_t adam_bytes;     /* 8 * n_params (m and v) */
    size_t acts_train_bytes; /* model_acts_elems(B, T, T, training=1) * 4 */
    size_t rope_bytes;     /* cos+sin tables */
    size_t train_bytes;    /* params + grads + adam + acts_train + rope */
    size_t acts_recompute_bytes; /* model_acts_elems(B, T, T, MODEL_ACTS_RECOMPUTE) * 4 */
    size_t train_recompute_bytes; /* train_bytes with acts_recompute instead of acts_train */
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
/* QS_ERANGE when a figure does not fit in size_t (absurd B x T): the fields that
 * overflowed, and the totals, are then SIZE_MAX, never a wrapped count. */
int model_memory_estimate(const llama_config *c, int B, int T, int infer_ctx, model_memory *mm);

#endif
