/* model_impl.h: internals shared by the model's files (not API): the size
 * table's kinds for model.c and model_packed.c, the arena strides and the
 * block recomputation for model_forward.c and model_backward.c. */
#ifndef QS_MODEL_IMPL_H
#define QS_MODEL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/model.h"
#include "qs/model_acts.h"
#include "qs/safetensors.h"

/* a + b and k * a in size_t, SIZE_MAX once either does not fit (sticky): the
 * memory estimates' sums, which saturate instead of wrapping */
static inline size_t mem_add(size_t a, size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }
static inline size_t mem_mul(size_t k, size_t a) { return a > SIZE_MAX / k ? SIZE_MAX : k * a; }

/* Tensor kinds of the size table (internal, never on disk). */
enum {
    MK_WTE, MK_NORM, MK_LM_HEAD,
    MK_ATTN_NORM, MK_WQ, MK_BQ, MK_WK, MK_BK, MK_WV, MK_BV, MK_WO, MK_BO,
    MK_MLP_NORM, MK_GATE, MK_UP, MK_DOWN
};

/* 1 for the kinds a packed model keeps in packs: every Linear weight, embed_tokens, lm_head. */
int model_kind_is_packed_impl(int kind);
/* MODEL_LIN_* of a Linear weight kind, -1 for the others. */
int model_kind_module_impl(int kind);
/* The size table of c into *tensors (qs_calloc'd; NULL and QS_ENOMEM on failure)
 * as a model's block lays it out: q8 (may be NULL) a HiF8 checkpoint, whose coded
 * weights get no room; packed: no matrix gets room (MODEL_NO_STORAGE), the other
 * tensors are laid out compactly in table order (model_load_packed's block).
 * *n_params: the block's floats, padding included. */
struct model_hif8;
int model_table_layout_impl(const llama_config *c, const struct model_hif8 *q8, int packed,
                            model_tensor **tensors, int *n_tensors, size_t *n_params);
/* model_init with a params block of the non-packed tensors only (weights_packed = 1). */
int model_init_packed_impl(llama_model *m, const llama_config *cfg, qs_diag *d);
/* The checkpoint tensor for table row e, its shape checked (*file: its shard). */
/* A "model.layers.<L>." tensor with L >= c->n_layers is refused: blocks the config
 * leaves out (num_hidden_layers edited down) would be dropped silently. */
int model_check_layers_impl(const safetensors_dir *sd, const llama_config *c, qs_diag *d);
int model_tensor_find_impl(const safetensors_dir *sd, const model_tensor *e, const char *dir,
                           const safetensors_tensor **out, const char **file, qs_diag *d);
void model_note_dtype_impl(llama_model *m, int dtype);
/* 1 when table row e is a coded weight of m's HiF8 checkpoint (m->hif8). */
int model_tensor_coded_impl(const llama_model *m, const model_tensor *e);
/* That weight t (and its "_scale" tensor in sd) into its code pack, made for
 * precision (model_hif8_load_weight). */
int model_load_hif8_weight_impl(llama_model *m, const safetensors_dir *sd, const model_tensor *e,
                                const safetensors_tensor *t, const char *file, int precision,
                                qs_diag *d);

/* Per-layer strides (floats) of the arena's tensors: layer l's tensor starts at
 * base + l * stride; 0 where one buffer serves every layer (inference, except
 * the KV cache of an arena without kv_shared; with recompute all but the
 * residual stream). */
typedef struct model_strides {
    size_t resid;   /* resid */
    size_t C;       /* ln1, resid_mid, ln2 */
    size_t N;       /* ln1_rstd, ln2_rstd */
    size_t Q;       /* q, atty */
    size_t F;       /* gate, up, hb */
    size_t KV;      /* kcache, vcache */
    size_t att;     /* att */
} model_strides;

model_strides model_strides_impl(const llama_model *m, const llama_acts *a);

/* Recomputes block l of the last training forward (pos0 = 0) from resid[l]
 * into the arena's one-block tensors (MODEL_ACTS_RECOMPUTE), the hook
 * replaying its substitutions: every tensor block l's backward reads, the same
 * bits as the forward made.  Stops before down_proj. */
int model_block_recompute_impl(llama_model *m, llama_acts *a, int l, int B, int T, qs_diag *d);

#endif
