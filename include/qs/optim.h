/* optim.h: AdamW over one flat parameter block, and global-norm gradient clipping.
 *
 * AdamW as in Loshchilov & Hutter / torch.optim.AdamW: the weight decay is
 * decoupled (p -= lr * wd * p, before the moment update), moments are
 * bias-corrected with the step count t (1-based after the first step):
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * Everything is fp32 master state; one flat loop, partitioned by element, so
 * the result does not depend on the thread count.
 */
#ifndef QS_OPTIM_H
#define QS_OPTIM_H

#include <stddef.h>

#include "qs/err.h"

typedef struct adamw_hparams {
    double beta1;          /* 0.9 */
    double beta2;          /* 0.95 or 0.999 */
    double eps;            /* 1e-8 */
    double weight_decay;   /* decoupled, applied to every parameter */
} adamw_hparams;

typedef struct adamw_state {
    float *m;        /* [n_params] first moment */
    float *v;        /* [n_params] second moment */
    size_t n_params;
    long t;          /* steps taken (bias correction) */
} adamw_state;

/* Zeroed moments for n_params parameters; QS_ENOMEM on failure. */
int adamw_init(adamw_state *s, size_t n_params);
void adamw_free(adamw_state *s);   /* safe on a zeroed state */

/* One step at learning rate lr: params[i] updated from grads[i]. */
void adamw_step(adamw_state *s, float *params, const float *grads, double lr,
                const adamw_hparams *h);
/* adamw_step on the clipped gradients grads[i] * grad_scale, the fp32 products
 * optim_grad_clip would leave with factor grad_scale (1 = unclipped), so the
 * same bits as optim_grad_clip then adamw_step; with zero_grads, grads[i] is
 * set to 0 once read, ready for the next step's accumulation.  One pass over
 * the gradients instead of three (clip read + write, AdamW read, zeroing). */
void adamw_step_scaled(adamw_state *s, float *params, float *grads, float grad_scale,
                       int zero_grads, double lr, const adamw_hparams *h);
/* adamw_step_scaled in consecutive segments: [0, ends[0]), [ends[0], ends[1]),
 * ... [ends[n_ends - 1], n_params) (ends ascending; empty segments skipped),
 * calling done(ctx, lo, hi) after each, while that segment's parameters are
 * still in cache (the trainer re-packs the weights that end there).  The same
 * bits as adamw_step_scaled: every element's update depends on it alone. */
typedef void (*adamw_segment_done)(void *ctx, size_t lo, size_t hi);
void adamw_step_scaled_segments(adamw_state *s, float *params, float *grads, float grad_scale,
                                int zero_grads, double lr, const adamw_hparams *h,
                                const size_t *ends, int n_ends, adamw_segment_done done,
                                void *ctx);

/* L2 norm of g[n] (double accumulation over fixed chunks: deterministic). */
double optim_grad_norm(const float *g, size_t n);
/* The clip factor for a gradient of this norm: (float)(max_norm / (norm + 1e-6))
 * when max_norm > 0 and norm > max_norm, else 1 (max_norm <= 0: no clipping). */
float optim_grad_clip_factor(double norm, double max_norm);
/* Scale g by optim_grad_clip_factor(norm, max_norm) (g[i] *= factor in fp32), so
 * its norm is at most max_norm.  norm is the value optim_grad_norm returned.
 * Returns the factor applied (<= 1). */
double optim_grad_clip(float *g, size_t n, double norm, double max_norm);

#endif
