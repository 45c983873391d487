/* model_impl.h: internals shared by model_forward.c and model_backward.c (not API). */
#ifndef QS_MODEL_IMPL_H
#define QS_MODEL_IMPL_H

#include <stddef.h>

#include "qs/err.h"
#include "qs/model.h"
#include "qs/model_acts.h"

/* Per-layer strides (floats) of the arena's tensors: layer l's tensor starts at
 * base + l * stride; 0 where one buffer serves every layer (inference; with
 * recompute all but the residual stream). */
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
