/* quant.h: per-tensor HiF8 quantizers with delayed scaling, and the quantizer set of a model.
 *
 * Recipe (in the spirit of Transformer Engine's DelayedScaling(margin,
 * amax_history_len, amax_compute_algo)): estimator (+ window / alpha), margin,
 * history capacity, saturating or not.  One quantizer per quantized tensor
 * ("layers.7.mlp.down_proj.input", "...weight"); a SET holds all quantizers of a
 * model, with all amax histories in ONE block.
 *
 * Scale rule (quant_scale_from_amax):
 *     scale = 32768 / 2^margin / est_amax
 * so an element equal to est_amax maps to 32768 / 2^margin: with margin 0, an
 * amax EXACTLY at the predicted value lands on HiF8's largest finite value and
 * clips nothing (the scale is nudged down one ulp if float rounding would put
 * est_amax * scale above 32768 / 2^margin).  Clipped = |x * scale| > 32768.
 * Choices:
 *   - margin: integer power of two in [0, 24], default 0 (the paper's setting).
 *   - no usable estimate (empty history on the very first step, estimate 0 after
 *     all-zero tensors, or a scale that would overflow float) -> current scaling
 *     for this call: a first pass takes this tensor's own amax (record flag
 *     `fallback`, logged est "current").  If that amax is 0 too, scale = 1.
 *   - NaN or Inf in a tensor -> QS_ENAN naming the tensor; nothing is recorded
 *     for that call and its amax never enters the history.
 * Calls per step: observe() (BF16 warmup: amax only, plus the clips the current
 * estimate WOULD have caused) or quantize() (estimate -> scale -> fused
 * hif8_fakequant -> stats), any number of times per quantizer (e.g. micro-
 * batches: counts add up, amax is the max); quant_set_step_end() then pushes each
 * quantizer's step amax into its history and hands out the step's records.
 * Different quantizers may be called from different threads; one quantizer not.
 */
#ifndef QS_QUANT_H
#define QS_QUANT_H

#include <stddef.h>

#include "qs/amax.h"
#include "qs/err.h"

#define QUANT_MARGIN_MAX 24
#define QUANT_NAME_MAX 128

typedef struct quant_recipe {
    amax_estimator est;      /* estimator, its window / alpha */
    int margin;              /* headroom power of two, [0, QUANT_MARGIN_MAX] */
    int history_steps;       /* amax history capacity (default 1024) */
    int saturate;            /* 1: |x*scale| > 32768 -> +-32768 (default); 0: >= 40960 -> +-Inf */
    int want_qsnr;           /* 1: the fused pass also sums squares for QSNR (default) */
    int qsnr_sample_div;     /* QSNR from a contiguous 1/div of the elements (at least
                                QUANT_QSNR_MIN_ELEMS), moved every call; 1 = all; default 256 */
} quant_recipe;

/* Squared-error sums cost the vectorised fused pass 50-175% (bench_quant A2/A), so
 * QSNR is estimated on a moving contiguous sample (>= 1024 elements: the mean
 * squared error to ~5%, QSNR to ~0.2 dB); clip/underflow counts and amax are
 * always exact over every element. */
#define QUANT_QSNR_SAMPLE_DIV_DEFAULT 256
#define QUANT_QSNR_MIN_ELEMS 1024

void quant_recipe_default(quant_recipe *r);
int quant_recipe_check(const quant_recipe *r, qs_diag *d);

enum { QUANT_MODE_NONE = 0, QUANT_MODE_OBSERVE = 1, QUANT_MODE_QUANT = 2 };

/* What one quantizer saw during one step (all calls since the last step end). */
typedef struct quant_record {
    int mode;          /* QUANT_MODE_*: NONE = not called this step */
    int has_pred;      /* 0: observe mode with an empty history (nothing predicted) */
    int fallback;      /* 1: no usable estimate, current scaling was used */
    float pred_amax;   /* amax the scale was built from (max over calls) */
    float amax;        /* true amax (max over calls) */
    float scale;       /* scale of the last call (used, or would-be in observe) */
    size_t n_elems;    /* elements seen */
    size_t n_clip;     /* |x*scale| > 32768 (observe: would have clipped) */
    size_t n_under;    /* non-zero inputs quantized to 0 (quant mode only) */
    int has_sq;        /* sq_err / sq_sum valid (quant mode with want_qsnr) */
    double sq_err;     /* sum (y - x)^2 */
    double sq_sum;     /* sum x^2 */
} quant_record;

typedef struct quant quant;
typedef struct quant_set quant_set;

/* Scale for an estimated amax; QS_ERANGE if est_amax is not > 0 and finite or
 * the scale would not be finite (then *scale is untouched). */
int quant_scale_from_amax(float est_amax, int margin, float *scale);

/* names[0..n): unique, non-empty, < QUANT_NAME_MAX bytes. */
int quant_set_create(quant_set **out, const quant_recipe *r, const char *const *names, int n,
                     qs_diag *d);
void quant_set_destroy(quant_set *s);              /* accepts NULL */
int quant_set_count(const quant_set *s);
const quant_recipe *quant_set_recipe(const quant_set *s);
quant *quant_set_get(quant_set *s, int i);
quant *quant_set_find(quant_set *s, const char *name);   /* NULL if absent */
/* Push every called quantizer's step amax into its history, copy the step's
 * records (header order) into an internal array returned via *records, and reset. */
void quant_set_step_end(quant_set *s, const quant_record **records);

/* The step's record so far (all calls since the last step end), and its
 * replacement: data-parallel training combines the ranks' records (amax MAX,
 * counts summed, ...) into the record one process would have, before
 * quant_set_step_end pushes its amax into the history. */
void quant_step_record_get(const quant *q, quant_record *rec);
void quant_step_record_set(quant *q, const quant_record *rec);
/* Count n quantize() calls that ran elsewhere (another rank's micro-batches):
 * the QSNR sample moves with the call count, so every rank samples where one
 * process would have.  Records nothing. */
void quant_set_skip_calls(quant_set *s, unsigned long n);

const char *quant_name(const quant *q);
const amax_history *quant_history(const quant *q);
float quant_last_scale(const quant *q);    /* scale of the last quantize/observe, 0 before */
/* Replace the history with vals[0..n) given oldest first (resume from a checkpoint). */
void quant_history_restore(quant *q, const float *vals_oldest_first, int n);
/* The QSNR sample cursor: quantize calls so far, which place each call's sample
 * (quant_sample_range).  A checkpoint saves it so that a resumed run samples the
 * same elements as an uninterrupted one (identical qsnr_db in the log). */
unsigned long quant_qsnr_cursor(const quant *q);
void quant_qsnr_cursor_set(quant *q, unsigned long calls);

/* Record x's amax (and would-be clips) without quantizing.  QS_ENAN on NaN/Inf. */
int quant_observe(quant *q, const float *x, size_t n, qs_diag *d);
/* y = fake-quant(x) (x == y allowed when saturating; non-saturating needs x != y).
 * On QS_ENAN the contents of y are unspecified and nothing is recorded. */
int quant_quantize(quant *q, const float *x, float *y, size_t n, qs_diag *d);
/* quantize() again on the SAME x (same values) in the same step, with y still
 * holding the previous call's output: records exactly what quantize() would
 * (amax, counts, the next QSNR sample, call count) while touching only the QSNR
 * sample of y, e.g. a weight that serves several micro-batches of one optimizer
 * step.  Without a previous quantize() of n elements since the last step end
 * (or with QSNR over every element) it is quantize(). */
int quant_quantize_repeat(quant *q, const float *x, float *y, size_t n, qs_diag *d);
/* Frozen (inference) mode: y = fake-quant(x) at the scale quantize() would use
 * now (the estimate from the current history; current scaling when there is
 * none), recording NOTHING: no amax, counts or last scale, so the history and
 * the step's record are exactly as before the call (in-loop evaluation). */
int quant_apply(quant *q, const float *x, float *y, size_t n, qs_diag *d);
/* The scale quant_apply would use on x[n] now (recording nothing), so a caller
 * can quantize to codes itself: code = hif8_encode(x * scale, HIF8_SAT) gives
 * the codes behind quant_apply's y = decode(code) / scale.  QS_ENAN as quant_apply. */
int quant_apply_scale(quant *q, const float *x, size_t n, float *scale, qs_diag *d);
/* 1 and the scale when quant_apply's scale does not depend on the tensor (an
 * estimator that reads only the history, and a usable estimate in it); 0 when
 * it does (current scaling, or the fallback of an empty history). */
int quant_static_scale(const quant *q, float *scale);

/* Recomputation (per-block activation recomputation): y = fake-quant(x) at a
 * scale an earlier quantize() of this quantizer used (quant_last_scale right
 * after it), recording NOTHING; the same bits as that call's y when x holds the
 * same values.  Non-saturating recipes need x != y.  Elements are split over
 * OpenMP threads (call from serial code). */
void quant_replay(const quant *q, const float *x, float *y, size_t n, float scale);

/* Straight-through estimator for the backward pass.  PASS: gradient unchanged
 * (the default, what the paper uses); MASKED: zero the gradient where the
 * forward clipped, i.e. |x * scale| > 32768, with the scale the forward used. */
enum { QUANT_STE_PASS = 0, QUANT_STE_MASKED = 1 };
int quant_ste_parse(const char *name, int *mode, qs_diag *d);   /* "pass" | "masked" */
void quant_ste_backward(int mode, const float *x, float scale, float *grad, size_t n);

#endif
