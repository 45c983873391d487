/* qplan.c: quantized-Linear selection by pattern (see include/qs/qplan.h). */
#include "qs/qplan.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "qs/mem.h"

static const char *const qplan_kind_names[QPLAN_N_KINDS] = {
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj",
};

int qplan_init(qplan *p, int n_layers)
{
    memset(p, 0, sizeof *p);
    if (n_layers < 0)
        return QS_EINVAL;
    p->on = qs_calloc((size_t)(n_layers > 0 ? n_layers : 1), QPLAN_N_KINDS);
    if (!p->on)
        return QS_ENOMEM;
    p->n_layers = n_layers;
    return 0;
}

void qplan_free(qplan *p)
{
    qs_free(p->on);
    memset(p, 0, sizeof *p);
}

void qplan_set_default(qplan *p)
{
    for (int l = 3; l < p->n_layers - 2; l++)
        for (int k = QPLAN_GATE; k <= QPLAN_DOWN; k++)
            p->on[l * QPLAN_N_KINDS + k] = 1;
}

/* "self_attn.q_proj" ... "mlp.down_proj" */
static const char *qplan_kind_name(int kind)
{
    return kind >= 0 && kind < QPLAN_N_KINDS ? qplan_kind_names[kind] : "?";
}

void qplan_module_name(char *buf, int buf_bytes, int layer, int kind)
{
    snprintf(buf, (size_t)buf_bytes, "layers.%d.%s", layer, qplan_kind_name(kind));
}

/* Reads a decimal number at *s (at most 9 digits); returns -1 if none. */
static long qplan_number_read(const char **s)
{
    long v = 0;
    int n = 0;
    while (isdigit((unsigned char)**s) && n < 9) {
        v = v * 10 + (**s - '0');
        (*s)++;
        n++;
    }
    return n ? v : -1;
}

/* Is there a range "A-B" at pattern position p? */
static int qplan_range_at(const char *p, long *lo, long *hi, const char **after)
{
    const char *s = p;
    long a = qplan_number_read(&s);
    if (a < 0 || *s != '-')
        return 0;
    s++;
    long b = qplan_number_read(&s);
    if (b < 0)
        return 0;
    *lo = a;
    *hi = b;
    *after = s;
    return 1;
}

int qplan_pattern_match(const char *pat, const char *name)
{
    for (;;) {
        if (*pat == '*') {
            while (*pat == '*')
                pat++;
            if (!*pat)
                return 1;
            for (const char *s = name; *s; s++)
                if (qplan_pattern_match(pat, s))
                    return 1;
            return 0;
        }
        long lo, hi;
        const char *after;
        if (qplan_range_at(pat, &lo, &hi, &after)) {
            long v = qplan_number_read(&name);
            if (v < lo || v > hi)
                return 0;
            pat = after;
            continue;
        }
        if (!*pat)
            return !*name;
        if (*pat != *name)
            return 0;
        pat++;
        name++;
    }
}

int qplan_apply(qplan *p, const char *pattern, qs_diag *d)
{
    if (!strcmp(pattern, "default")) {
        qplan_set_default(p);
        return 0;
    }
    int value = 1;
    const char *pat = pattern;
    if (*pat == '!') {
        value = 0;
        pat++;
    }
    if (!*pat)
        return diag_set(d, QS_EINVAL, NULL, -1, "quant pattern '%s' is empty", pattern);
    int hits = 0;
    for (int l = 0; l < p->n_layers; l++)
        for (int k = 0; k < QPLAN_N_KINDS; k++) {
            char name[96];
            qplan_module_name(name, sizeof name, l, k);
            if (qplan_pattern_match(pat, name)) {
                p->on[l * QPLAN_N_KINDS + k] = (unsigned char)value;
                hits++;
            }
        }
    if (!hits)
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "quant pattern '%s' matches no Linear module of this %d-layer model "
                        "(names look like 'layers.3.mlp.gate_proj', 'layers.0.self_attn.o_proj')",
                        pattern, p->n_layers);
    return 0;
}

int qplan_is_on(const qplan *p, int layer, int kind)
{
    if (layer < 0 || layer >= p->n_layers || kind < 0 || kind >= QPLAN_N_KINDS)
        return 0;
    return p->on[layer * QPLAN_N_KINDS + kind];
}

int qplan_count(const qplan *p)
{
    int n = 0;
    for (int i = 0; i < p->n_layers * QPLAN_N_KINDS; i++)
        n += p->on[i];
    return n;
}
