/* qplan.h: which Linear modules of a Llama model are HiF8-quantized.
 *
 * A module is named like its Hugging Face weight without "model." and ".weight":
 * "layers.<i>.self_attn.{q,k,v,o}_proj", "layers.<i>.mlp.{gate,up,down}_proj".
 * The default plan is the published one: mlp.gate_proj/up_proj/down_proj of
 * every block except the first 3 and the last 2.
 *
 * Patterns (applied in order to an initially empty plan):
 *   "default"             the published selection
 *   "layers.3-23.mlp.*"   '*' matches any run of characters (dots included);
 *                         "A-B" matches a layer number in [A, B]
 *   "*.self_attn.o_proj"  every o_proj
 *   "!layers.5.mlp.*"     a leading '!' removes what the rest matches
 * A pattern that matches no module is an error (it is almost always a typo).
 */
#ifndef QS_QPLAN_H
#define QS_QPLAN_H

#include "qs/err.h"

enum {
    QPLAN_Q = 0, QPLAN_K, QPLAN_V, QPLAN_O, QPLAN_GATE, QPLAN_UP, QPLAN_DOWN,
    QPLAN_N_KINDS
};

typedef struct qplan {
    int n_layers;
    unsigned char *on;   /* [n_layers * QPLAN_N_KINDS] 1 = quantized */
} qplan;

/* Empty plan (nothing quantized) for n_layers blocks. */
int qplan_init(qplan *p, int n_layers);
void qplan_free(qplan *p);   /* safe on a zeroed plan */
/* The published selection (see above); no-op for models with <= 5 blocks. */
void qplan_set_default(qplan *p);
/* Apply one pattern; QS_EINVAL (with the pattern in d) when it is malformed or
 * matches nothing. */
int qplan_apply(qplan *p, const char *pattern, qs_diag *d);

int qplan_is_on(const qplan *p, int layer, int kind);
int qplan_count(const qplan *p);
/* "layers.<i>.<kind name>" into buf (NUL-terminated, truncated to buf_bytes). */
void qplan_module_name(char *buf, int buf_bytes, int layer, int kind);
/* 1 if name matches pattern (without the '!' prefix rules). */
int qplan_pattern_match(const char *pattern, const char *name);

#endif
