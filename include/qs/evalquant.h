/* evalquant.h: HiF8 W8A8 for evaluation (eval --precision hif8), the arithmetic
 * of the exported checkpoint (`qatscope export --format hif8`), bit for bit.
 *
 * Every planned Linear gets two quantizers, "<module>.input" and
 * "<module>.weight", whose scales s_x, s_w come from quant_apply_scale
 * (frozen: nothing is recorded, no history moves).  The Linear runs in the code
 * domain (model.h, hook fn returning 2): the HiF8 values decode(encode_sat(x *
 * s_x)) and decode(encode_sat(w * s_w)) (the codes of quant_apply's fake-quant)
 * go through the model's matmul (exact products, fp32 accumulation) and each
 * output is multiplied once by hif8_dequant_factor(s_x, s_w) before the bias:
 * what model_hif8_forward computes on the export.  (The training's fake-quant
 * multiplies the dequantized values decode(c) / s instead, whose roundings in a
 * bf16 matmul move a quantized model's outputs by more than W8A8 hardware does.)
 * The scalings:
 *
 *   current  the scale comes from the exact amax at each forward call: per
 *            tensor for weights, per token (row) for activations, so a row's
 *            result never depends on the other rows of the call (siblings,
 *            padding, batch); margin 0, saturating.  Modules: the patterns
 *            given, else "default".
 *   delayed  the model dir is a training checkpoint (RUN/ckpt/step_N) holding
 *            train_state.bin with every quantizer's amax history: each
 *            quantizer is restored with its stored history and scales with the
 *            run's estimator, margin and history length (read from the run's
 *            config snapshot RUN/config.json = DIR/../../config.json), exactly
 *            as the run's next QAT step would have, frozen for the whole eval.
 *            Modules: the run's quant_modules unless patterns override; every
 *            selected quantizer must have a non-empty stored history.
 *   auto     delayed when DIR/train_state.bin exists and holds amax histories,
 *            else current.
 *   stored   (always, for a HiF8 checkpoint: m->hif8, qs/model_hif8.h) the
 *            checkpoint's modules and scales, described only: its quantized
 *            Linears already run W8A8 on their code packs (model_hif8_forward),
 *            so NO hook is installed and hif8 on it is the plain precision
 *            (bf16 / fp32); no patterns or scaling may be given.
 *
 * The hook is installed on the model (m->hook); the model must outlive the
 * evalquant and not be hooked by anything else meanwhile.  Weights are
 * constant in an evaluation: when the model has packs (model_load_packed,
 * model_packs_create) each planned weight is put into the code domain once,
 * here, and its pack holds decode(encode_sat(w * s_w)) (model_packs_substitute;
 * the same bits as doing it on every forward), and only the inputs are
 * quantized per call.
 * After evalquant_destroy such a model's forwards refuse to run until its
 * packs are re-created (model_packs_create) or it is reloaded.
 */
#ifndef QS_EVALQUANT_H
#define QS_EVALQUANT_H

#include <stddef.h>

#include "qs/err.h"

struct llama_model;
typedef struct evalquant evalquant;

enum { EVALQUANT_CURRENT = 0, EVALQUANT_DELAYED = 1, EVALQUANT_AUTO = 2, EVALQUANT_STORED = 3 };

/* "current" | "delayed" | "auto"; QS_EINVAL naming the accepted values. */
int evalquant_scaling_parse(const char *name, int *scaling, qs_diag *d);

typedef struct evalquant_options {
    const char *patterns;    /* comma-separated qplan patterns; NULL or "" = see above */
    int scaling;             /* EVALQUANT_* */
    const char *model_dir;   /* where train_state.bin is looked for (delayed, auto) */
} evalquant_options;

int evalquant_create_opts(evalquant **out, struct llama_model *m, const evalquant_options *o,
                          qs_diag *d);
/* Current scaling on the given patterns (NULL or "" = "default"). */
int evalquant_create(evalquant **out, struct llama_model *m, const char *patterns, qs_diag *d);
void evalquant_destroy(evalquant *q);   /* removes the hook; NULL ok */
int evalquant_count(const evalquant *q); /* quantized Linear modules */
/* Name of the i-th quantized module ("layers.3.mlp.up_proj"). */
const char *evalquant_module(const evalquant *q, int i);
/* The i-th quantized module as (layer, MODEL_LIN_*). */
void evalquant_module_at(const evalquant *q, int i, int *layer, int *module);
/* The scale module i's weight w[n] is quantized with, as the hook does it
 * (delayed: the stored history's estimate; current: w's own amax), recording
 * nothing: codes = hif8_encode(w * scale, HIF8_SAT).  0 or QS_ENAN. */
int evalquant_weight_scale(evalquant *q, int i, const float *w, size_t n, float *scale,
                           qs_diag *d);
/* Module i's input scale when it is fixed for the whole evaluation (delayed
 * scaling): 1 and *scale; 0 when it is made per call (current: per token). */
int evalquant_input_scale(const evalquant *q, int i, float *scale);
/* If dir holds train_state.bin: validate it (checksums, meta, every amax
 * history) and return 1 with its step and number of histories; 0 if there is
 * none; a negative code naming the file if it is unusable. */
int evalquant_state_info(const char *dir, long *step, int *n_hist, qs_diag *d);
/* EVALQUANT_CURRENT, EVALQUANT_DELAYED (auto resolved) or EVALQUANT_STORED. */
int evalquant_scaling(const evalquant *q);
/* "current" or "delayed (train_state step N)" */
const char *evalquant_scaling_name(const evalquant *q);
/* How scales are made, one line: estimator, margin, saturation, history source. */
const char *evalquant_recipe_text(const evalquant *q);

#endif
