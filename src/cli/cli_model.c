/* cli_model.c: models for inference in a user precision (see cli_model.h). */
#include "cli_model.h"

#include <stdio.h>
#include <string.h>

#include "qs/matmul.h"

int cli_precision_parse(const char *name, const char *what, int *matmul, int *hif8, qs_diag *d)
{
    const char *mm = !strcmp(name, "hif8") ? "bf16" : !strcmp(name, "hif8-fp32") ? "fp32" : name;
    *hif8 = mm != name;
    qs_diag md = {0};
    if (!matmul_precision_parse(mm, what, matmul, &md))
        return 0;
    if (!strcmp(name, "bf16-amx"))   /* known, but not on this CPU */
        return diag_set(d, md.code, NULL, -1, "%s", md.msg);
    return diag_set(d, QS_EINVAL, NULL, -1,
                    "%s: expected fp32, bf16, bf16-amx, hif8 or hif8-fp32, got '%s'", what, name);
}

int cli_model_open(cli_model *cm, const char *dir, const char *precision, const char *patterns,
                   int scaling, qs_diag *d)
{
    memset(cm, 0, sizeof *cm);
    int matmul, hif8, rc;
    if ((rc = cli_precision_parse(precision, "--precision", &matmul, &hif8, d)) ||
        (rc = model_load_packed(&cm->m, dir, matmul, d)))
        return rc;
    cm->precision = precision;
    /* a HiF8 checkpoint carries its modules and scales (EVALQUANT_STORED) */
    evalquant_options qo = {cm->m.hif8 ? NULL : patterns, cm->m.hif8 ? EVALQUANT_AUTO : scaling,
                            dir};
    if (hif8 && (rc = evalquant_create_opts(&cm->eq, &cm->m, &qo, d))) {
        cli_model_close(cm);
        return rc;
    }
    /* the other parameters as the export stores them */
    if (hif8 && (rc = model_params_round_bf16(&cm->m, d))) {
        cli_model_close(cm);
        return rc;
    }
    if (cm->eq)
        snprintf(cm->desc, sizeof cm->desc, "%s: W8A8 on %d Linear modules, scaling %s", precision,
                 evalquant_count(cm->eq), evalquant_scaling_name(cm->eq));
    else
        snprintf(cm->desc, sizeof cm->desc, "%s", precision);
    return 0;
}

int cli_tokenizer_fits(const tokenizer *tok, const llama_config *c, const char *dir, qs_diag *d)
{
    const int tv = tokenizer_vocab_size(tok);
    if (tv <= c->vocab_size)
        return 0;
    return diag_set(d, QS_ERANGE, dir, -1,
                    "tokenizer has %d tokens, more than config.json's vocab_size %d (ids past it "
                    "have no embedding)", tv, c->vocab_size);
}

void cli_model_close(cli_model *cm)
{
    evalquant_destroy(cm->eq);
    model_free(&cm->m);
    memset(cm, 0, sizeof *cm);
}
