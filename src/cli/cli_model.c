/* cli_model.c: models for inference in a user precision (see cli_model.h). */
#include "cli_model.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "qs/digest.h"
#include "qs/dist.h"
#include "qs/fileio.h"
#include "qs/matmul.h"
#include "qs/mem.h"

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

static int cli_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int cli_model_files(const char *dir, char **names, int *n, qs_diag *d)
{
    *n = 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return diag_set(d, QS_ENOTFOUND, dir, -1, "cannot open model directory");
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(dp)) && *n < CLI_MODEL_FILES_MAX;) {
        size_t l = strlen(e->d_name);
        if (!strcmp(e->d_name, "config.json") ||
            (l > 12 && !strcmp(e->d_name + l - 12, ".safetensors")))
            rc = (names[(*n)++] = qs_strdup(e->d_name)) ? 0 : QS_ENOMEM;
    }
    closedir(dp);
    if (rc) {
        for (int i = 0; i < *n; i++)
            qs_free(names[i]);
        *n = 0;
        return diag_set(d, rc, dir, -1, "out of memory");
    }
    qsort(names, (size_t)*n, sizeof *names, cli_name_cmp);
    return 0;
}

int cli_dist_same_model(const char *dir, qs_diag *d)
{
    if (dist_size() == 1)
        return 0;
    char *names[CLI_MODEL_FILES_MAX];
    int n, rc = cli_model_files(dir, names, &n, d);
    digest_sha256 s;
    digest_sha256_init(&s);
    static unsigned char block[4096];
    for (int i = 0; !rc && i < n; i++) {
        char path[1500];
        FILE *f = NULL;
        if (fileio_join(path, sizeof path, dir, names[i]) || !(f = fopen(path, "rb"))) {
            rc = diag_set(d, QS_EIO, dir, -1, "cannot read %s", names[i]);
            break;
        }
        struct stat st;
        uint64_t size = fstat(fileno(f), &st) == 0 ? (uint64_t)st.st_size : 0;
        digest_sha256_update(&s, names[i], strlen(names[i]) + 1);
        digest_sha256_update(&s, &size, sizeof size);
        for (int k = 0; k < 64 && size; k++) {   /* blocks spread over the whole file */
            uint64_t at = size > sizeof block ? (size - sizeof block) / 63 * (uint64_t)k : 0;
            size_t got = fseeko(f, (off_t)at, SEEK_SET) ? 0 : fread(block, 1, sizeof block, f);
            digest_sha256_update(&s, block, got);
        }
        fclose(f);
    }
    for (int i = 0; i < n; i++)
        qs_free(names[i]);
    char hex[65];
    digest_sha256_final(&s, hex);
    char what[1200];
    snprintf(what, sizeof what, "the copy of the model %s", dir);
    return dist_agree(rc, rc ? 0 : cli_hash64(hex, 64), what, d);
}
