/* cmd_ppl.c: qatscope ppl — perplexity of a model on a text file.
 *
 *   qatscope ppl --model DIR --text FILE [--bos] [--window N --stride S] [--json]
 *               [--precision fp32|bf16|bf16-amx|hif8|hif8-fp32]
 *               [--quant-modules PATTERNS] [--quant-scaling current|delayed|auto]
 *
 * The file is encoded without BOS (with one at the start under --bos).
 * Defaults: window = the model's context capped at 1024, stride = window / 2
 * (the same scheme as HF's perplexity guide; see model_ppl_compute).
 * Prints mean NLL per scored token (nats) and its exp, or one JSON object.
 * hif8 / hif8-fp32: the HiF8 W8A8 fake-quant of eval --precision hif8
 * (cli_model.h), the perplexity compare prints for such a side.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_model.h"
#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_infer.h"
#include "qs/tokenizer.h"

static const char USAGE[] =
    "usage: qatscope ppl --model DIR --text FILE [--bos] [--window N --stride S] [--json]\n"
    "                    [--precision fp32|bf16|bf16-amx|hif8|hif8-fp32]\n"
    "                    [--quant-modules PATTERNS] [--quant-scaling current|delayed|auto]\n"
    "hif8 (bf16 matmuls) and hif8-fp32: HiF8 W8A8 fake-quant as eval --precision hif8; the\n"
    "quant options apply to them only.\n";

typedef struct ppl_args {
    const char *model, *text, *precision, *quant_modules, *quant_scaling;
    long window, stride;
    int bos, json, scaling;
} ppl_args;

static int ppl_run(const ppl_args *a)
{
    const char *dir = a->model, *path = a->text;
    long window = a->window, stride = a->stride;
    qs_diag d = {0};
    cli_model cm;
    tokenizer *tok = NULL;
    char *text = NULL;
    size_t len = 0, n_ids = 0;
    int32_t *ids = NULL;
    int rc = 0;
    memset(&cm, 0, sizeof cm);
    /* the text is read and encoded, and the window checked, before the weights
     * are loaded: a wrong path fails at once, not after a 1B model's load */
    llama_config cfg;
    if (hfconfig_load(&cfg, dir, &d) || tokenizer_create(&tok, dir, &d) ||
        cli_tokenizer_fits(tok, &cfg, dir, &d) || fileio_read_all(path, &text, &len, &d) ||
        tokenizer_encode(tok, text, len, a->bos ? TOKENIZER_BOS_YES : TOKENIZER_BOS_NO, &ids,
                         &n_ids, &d)) {
        rc = cli_diag_error(&d);
        goto done;
    }
    int ctx = hfconfig_max_context(&cfg);
    if (window < 0)
        window = model_ppl_window_default(&cfg);
    if (window > ctx) {
        rc = cli_error("--window: %ld exceeds the model's context of %d", window, ctx);
        goto done;
    }
    if (stride < 0)
        stride = window / 2 > 0 ? window / 2 : 1;
    if (stride > window) {
        rc = cli_error("--stride: %ld exceeds --window %ld", stride, window);
        goto done;
    }
    if (n_ids < 2) {
        rc = cli_error("%s: encodes to %zu tokens, need at least 2", path, n_ids);
        goto done;
    }
    /* weights packed once, in the precision of the matmuls (no fp32 copy of a bf16
     * checkpoint in bf16), the fake-quant installed for hif8 */
    if (cli_model_open(&cm, dir, a->precision, a->quant_modules, a->scaling, &d)) {
        memset(&cm, 0, sizeof cm);   /* a failed open holds nothing */
        rc = cli_diag_error(&d);
        goto done;
    }
    llama_model *m = &cm.m;
    model_ppl_result r;
    if (model_ppl_compute(m, ids, n_ids, (int)window, (int)stride, &r, &d)) {
        if (!d.path[0])   /* e.g. non-finite logits: the model's */
            snprintf(d.path, sizeof d.path, "%s", dir);
        rc = cli_diag_error(&d);
        goto done;
    }
    double nll = r.nll_sum / (double)r.n_scored;
    if (a->json) {
        char *qdir = qs_json_quote_dup(dir), *qpath = qs_json_quote_dup(path);
        if (qdir && qpath)
            printf("{\"model\": %s, \"text\": %s, \"tokens\": %zu, \"scored\": %zu, \"windows\": %zu, "
                   "\"window\": %ld, \"stride\": %ld, \"bos\": %s, \"precision\": \"%s\", "
                   "\"nll_per_token\": %.6f, \"ppl\": %.6f}\n",
                   qdir, qpath, n_ids, r.n_scored, r.n_windows, window, stride,
                   a->bos ? "true" : "false", a->precision, nll, exp(nll));
        else
            rc = cli_error("out of memory");
        qs_free(qdir);
        qs_free(qpath);
    } else {
        printf("%s: %zu tokens, %zu scored in %zu windows (window %ld, stride %ld)\n", path,
               n_ids, r.n_scored, r.n_windows, window, stride);
        printf("nll/token %.6f  ppl %.4f\n", nll, exp(nll));
        if (cm.eq)
            printf("%s\n", cm.desc);
    }
    if (fflush(stdout))
        rc = CLI_EXIT_USAGE;   /* main() names the error */
done:
    qs_free(ids);
    qs_free(text);
    tokenizer_destroy(tok);
    cli_model_close(&cm);
    return rc;
}

int cmd_ppl(int argc, char **argv)
{
    ppl_args a = {NULL, NULL, "fp32", NULL, NULL, -1, -1, 0, 0, EVALQUANT_AUTO};
    const cli_opt opts[] = {
        {"--model", CLI_OPT_STR, .out = &a.model},
        {"--text", CLI_OPT_STR, .out = &a.text},
        {"--window", CLI_OPT_LONG, .out = &a.window, .min = 2, .max = 1L << 24},
        {"--stride", CLI_OPT_LONG, .out = &a.stride, .min = 1, .max = 1L << 24},
        {"--precision", CLI_OPT_STR, .out = &a.precision},
        {"--quant-modules", CLI_OPT_STR, .out = &a.quant_modules},
        {"--quant-scaling", CLI_OPT_STR, .out = &a.quant_scaling},
        {"--bos", CLI_OPT_SWITCH, .out = &a.bos},
        {"--json", CLI_OPT_SWITCH, .out = &a.json},
    };
    int rc = cli_args_parse("ppl", USAGE, argc, argv, opts, sizeof opts / sizeof *opts, NULL, NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    qs_diag pd = {0};
    int mm, hif8;
    if (cli_precision_parse(a.precision, "--precision", &mm, &hif8, &pd))
        return cli_diag_error(&pd);
    if ((a.quant_modules || a.quant_scaling) && !hif8)
        return cli_error("%s: only with --precision hif8 or hif8-fp32",
                         a.quant_modules ? "--quant-modules" : "--quant-scaling");
    if (a.quant_scaling && evalquant_scaling_parse(a.quant_scaling, &a.scaling, &pd))
        return cli_diag_error(&pd);
    if (!a.model || !a.text)
        return cli_error("ppl: --model and --text are required; see --help");
    return ppl_run(&a);
}
