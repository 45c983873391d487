/* cli_model.h: a model loaded for inference in a user precision (src/cli only).
 *
 * Precisions, as eval spells them: fp32, bf16 (bf16 matmul operands), hif8
 * (bf16 matmuls + HiF8 W8A8 fake-quant of the planned Linears, evalquant.h)
 * and hif8-fp32 (the same fake-quant on fp32 matmuls).  The quant options
 * (patterns, scaling) apply to the hif8 forms only. */
#ifndef QS_CLI_MODEL_H
#define QS_CLI_MODEL_H

#include "qs/err.h"
#include "qs/evalquant.h"
#include "qs/model.h"
#include "qs/tokenizer.h"

typedef struct cli_model {
    llama_model m;
    evalquant *eq;        /* NULL unless hif8 */
    const char *precision; /* the spelling given */
    char desc[640];       /* one line: precision and, for hif8, modules and scaling */
} cli_model;

/* "fp32" | "bf16" | "hif8" | "hif8-fp32": *matmul (MATMUL_*) and *hif8 (0/1);
 * QS_EINVAL naming `what` (the flag) otherwise. */
int cli_precision_parse(const char *name, const char *what, int *matmul, int *hif8, qs_diag *d);
/* Loads dir for inference (model_load_packed: the weights packed once for the
 * precision) and installs the fake-quant (patterns NULL = the default / the
 * run's, scaling EVALQUANT_*; a HiF8 checkpoint uses its stored modules and
 * scales on its code packs, and ignores both). */
int cli_model_open(cli_model *cm, const char *dir, const char *precision, const char *patterns,
                   int scaling, qs_diag *d);
void cli_model_close(cli_model *cm);   /* safe on a zeroed cli_model */
/* 0 when every id of tok indexes the model's embedding (its vocabulary is not
 * larger than config.json's vocab_size, as init requires); else QS_ERANGE
 * naming dir, the checkpoint whose tokenizer and config disagree. */
int cli_tokenizer_fits(const tokenizer *tok, const llama_config *c, const char *dir, qs_diag *d);

/* The files that make a model's identity: config.json and every *.safetensors
 * of dir, in name order (at most CLI_MODEL_FILES_MAX), as names to qs_free. */
#define CLI_MODEL_FILES_MAX 256
int cli_model_files(const char *dir, char **names, int *n, qs_diag *d);

/* Under mpirun: every rank's model files are the same (sizes and 64 sampled 4 KiB
 * blocks of each, so a node with another copy of the checkpoint is told apart
 * without reading it all); QS_EINVAL "rank K: the copy of the model DIR differs
 * from rank 0's" on every rank otherwise.  One process: 0 at once. */
int cli_dist_same_model(const char *dir, qs_diag *d);

#endif
