/* model_train.h: training side of a llama_model: the gradient-activation
 * arena, the backward seam of the quantization hook (STE) and model_backward
 * (src/model/model_backward.c).
 */
#ifndef QS_MODEL_TRAIN_H
#define QS_MODEL_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "qs/err.h"
#include "qs/hfconfig.h"
#include "qs/model.h"
#include "qs/model_acts.h"

/* Gradient activations: one arena sized from (B, T, config), like llama_acts. */
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

#endif
