/* evalquant.c: HiF8 W8A8 fake-quant of planned Linears at evaluation time
 * (see include/qs/evalquant.h). */
#include <stdio.h>
#include <string.h>

#include "qs/evalquant.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/qplan.h"
#include "qs/quant.h"

struct evalquant {
    struct llama_model *m;
    quant_set *qs;
    int n;                 /* quantized modules */
    int *slot_of;          /* [L * MODEL_LIN_COUNT] module index or -1 */
    char (*names)[QUANT_NAME_MAX];   /* [n] module names */
};

static int evalquant_hook(void *self, int layer, int module, const float *x, float *xq, int N,
                          int IN, const float *w, float *wq, int O)
{
    evalquant *q = self;
    int s = q->slot_of[layer * MODEL_LIN_COUNT + module];
    if (s < 0)
        return 0;
    qs_diag d = {0};
    if (quant_apply(quant_set_get(q->qs, 2 * s), x, xq, (size_t)N * IN, &d) ||
        quant_apply(quant_set_get(q->qs, 2 * s + 1), w, wq, (size_t)O * IN, &d))
        return QS_ENAN;
    return 1;
}

static int evalquant_plan(qplan *p, const char *patterns, qs_diag *d)
{
    if (!patterns || !patterns[0]) {
        qplan_set_default(p);
        return 0;
    }
    size_t len = strlen(patterns);
    char *buf = qs_malloc(len + 1);
    if (!buf)
        return diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
    memcpy(buf, patterns, len + 1);
    int rc = 0;
    for (char *save, *pat = strtok_r(buf, ",", &save); pat && !rc; pat = strtok_r(NULL, ",", &save))
        rc = qplan_apply(p, pat, d);
    qs_free(buf);
    return rc;
}

int evalquant_create(evalquant **out, struct llama_model *m, const char *patterns, qs_diag *d)
{
    *out = NULL;
    const int L = m->cfg.n_layers;
    qplan p;
    int rc = qplan_init(&p, L);
    if (rc)
        return diag_set(d, rc, NULL, -1, "out of memory");
    if ((rc = evalquant_plan(&p, patterns, d))) {
        qplan_free(&p);
        return rc;
    }
    int n = qplan_count(&p);
    if (n == 0) {
        qplan_free(&p);
        return diag_set(d, QS_EINVAL, NULL, -1,
                        "quant modules '%s': no Linear selected for a %d-block model (the "
                        "default skips the first 3 and last 2 blocks)",
                        patterns && patterns[0] ? patterns : "default", L);
    }
    evalquant *q = qs_calloc(1, sizeof *q);
    char **qnames = q ? qs_malloc(2 * (size_t)n * sizeof *qnames) : NULL;
    char (*qbuf)[QUANT_NAME_MAX] = q ? qs_malloc(2 * (size_t)n * sizeof *qbuf) : NULL;
    if (q) {
        q->slot_of = qs_malloc((size_t)L * MODEL_LIN_COUNT * sizeof *q->slot_of);
        q->names = qs_malloc((size_t)n * sizeof *q->names);
    }
    if (!q || !qnames || !qbuf || !q->slot_of || !q->names) {
        rc = diag_set(d, QS_ENOMEM, NULL, -1, "out of memory");
        goto done;
    }
    q->m = m;
    for (int l = 0, s = 0; l < L; l++)
        for (int k = 0; k < MODEL_LIN_COUNT; k++) {
            /* MODEL_LIN_* and QPLAN_* share the q, k, v, o, gate, up, down order */
            int on = qplan_is_on(&p, l, k);
            q->slot_of[l * MODEL_LIN_COUNT + k] = on ? s : -1;
            if (!on)
                continue;
            qplan_module_name(q->names[s], QUANT_NAME_MAX, l, k);
            snprintf(qbuf[2 * s], QUANT_NAME_MAX, "%.100s.input", q->names[s]);
            snprintf(qbuf[2 * s + 1], QUANT_NAME_MAX, "%.100s.weight", q->names[s]);
            qnames[2 * s] = qbuf[2 * s];
            qnames[2 * s + 1] = qbuf[2 * s + 1];
            s++;
        }
    q->n = n;
    quant_recipe r;
    quant_recipe_default(&r);
    r.margin = 0;
    r.saturate = 1;
    r.want_qsnr = 0;
    if ((rc = quant_set_create(&q->qs, &r, (const char *const *)qnames, 2 * n, d)))
        goto done;
    m->hook.self = q;
    m->hook.fn = evalquant_hook;
    *out = q;
done:
    qs_free(qnames);
    qs_free(qbuf);
    qplan_free(&p);
    if (rc)
        evalquant_destroy(q);
    return rc;
}

void evalquant_destroy(evalquant *q)
{
    if (!q)
        return;
    if (q->m && q->m->hook.self == q) {
        q->m->hook.self = NULL;
        q->m->hook.fn = NULL;
    }
    quant_set_destroy(q->qs);
    qs_free(q->slot_of);
    qs_free(q->names);
    qs_free(q);
}

int evalquant_count(const evalquant *q)
{
    return q ? q->n : 0;
}

const char *evalquant_module(const evalquant *q, int i)
{
    return q && i >= 0 && i < q->n ? q->names[i] : NULL;
}
