/* evalquant.h: HiF8 W8A8 fake-quant for evaluation (eval --precision hif8).
 *
 * Every planned Linear (qplan patterns; "default" = the published selection)
 * gets two quantizers, "<module>.input" and "<module>.weight", used through
 * quant_apply (frozen: nothing recorded).  Their histories stay empty, so the
 * scale is CURRENT scaling: the exact amax of the tensor at each forward call
 * (weights: their own amax; activations: the call's input), margin 0,
 * saturating.  Delayed scaling from a checkpoint's amax histories is not
 * implemented.  The hook is installed on the model (m->hook); the model must
 * outlive the evalquant and not be hooked by anything else meanwhile.
 */
#ifndef QS_EVALQUANT_H
#define QS_EVALQUANT_H

#include "qs/err.h"

struct llama_model;
typedef struct evalquant evalquant;

/* patterns: comma-separated qplan patterns (NULL or "" = "default"). */
int evalquant_create(evalquant **out, struct llama_model *m, const char *patterns, qs_diag *d);
void evalquant_destroy(evalquant *q);   /* removes the hook; NULL ok */
int evalquant_count(const evalquant *q); /* quantized Linear modules */
/* Name of the i-th quantized module ("layers.3.mlp.up_proj"). */
const char *evalquant_module(const evalquant *q, int i);

#endif
