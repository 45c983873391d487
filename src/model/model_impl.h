/* model_impl.h: internals shared by model.c and model_packed.c (not API). */
#ifndef QS_MODEL_IMPL_H
#define QS_MODEL_IMPL_H

#include <stdint.h>

#include "qs/model.h"
#include "qs/safetensors.h"

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
/* model_init with a params block of the non-packed tensors only (weights_packed = 1). */
int model_init_packed_impl(llama_model *m, const llama_config *cfg, qs_diag *d);
/* The checkpoint tensor for table row e, its shape checked (*file: its shard). */
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

#endif
