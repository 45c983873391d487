/* cmd_ppl.c: qatscope ppl — perplexity of a model on a text file.
 *
 *   qatscope ppl --model DIR --text FILE [--bos] [--window N --stride S] [--json]
 *               [--precision fp32|bf16]
 *
 * The file is encoded without BOS (with one at the start under --bos).
 * Defaults: window = the model's context capped at 1024, stride = window / 2
 * (the same scheme as HF's perplexity guide; see model_ppl_compute).
 * Prints mean NLL per scored token (nats) and its exp, or one JSON object.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "qs/fileio.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model.h"
#include "qs/model_infer.h"
#include "qs/tokenizer.h"

static const char USAGE[] =
    "usage: qatscope ppl --model DIR --text FILE [--bos] [--window N --stride S] [--json]\n"
    "                    [--precision fp32|bf16]\n";

static void ppl_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static int ppl_run(const char *dir, const char *path, int bos, long window, long stride, int json,
                   int precision)
{
    qs_diag d = {0};
    llama_model m;
    tokenizer *tok = NULL;
    char *text = NULL;
    size_t len = 0, n_ids = 0;
    int32_t *ids = NULL;
    int rc = 0;
    /* weights packed once, in the precision of the matmuls (no fp32 copy of a bf16
     * checkpoint in bf16) */
    if (model_load_packed(&m, dir, precision, &d))
        return cli_diag_error(&d);
    if (tokenizer_create(&tok, dir, &d) || fileio_read_all(path, &text, &len, &d) ||
        tokenizer_encode(tok, text, len, bos ? TOKENIZER_BOS_YES : TOKENIZER_BOS_NO, &ids,
                         &n_ids, &d)) {
        rc = cli_diag_error(&d);
        goto done;
    }
    int ctx = hfconfig_max_context(&m.cfg);
    if (window < 0)
        window = ctx < 1024 ? ctx : 1024;
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
    model_ppl_result r;
    if (model_ppl_compute(&m, ids, n_ids, (int)window, (int)stride, &r, &d)) {
        rc = cli_diag_error(&d);
        goto done;
    }
    double nll = r.nll_sum / (double)r.n_scored;
    if (json) {
        printf("{\"model\": ");
        ppl_json_string(dir);
        printf(", \"text\": ");
        ppl_json_string(path);
        printf(", \"tokens\": %zu, \"scored\": %zu, \"windows\": %zu, \"window\": %ld, "
               "\"stride\": %ld, \"bos\": %s, \"precision\": \"%s\", \"nll_per_token\": %.6f, "
               "\"ppl\": %.6f}\n",
               n_ids, r.n_scored, r.n_windows, window, stride, bos ? "true" : "false",
               precision == MATMUL_BF16 ? "bf16" : "fp32", nll, exp(nll));
    } else {
        printf("%s: %zu tokens, %zu scored in %zu windows (window %ld, stride %ld)\n", path,
               n_ids, r.n_scored, r.n_windows, window, stride);
        printf("nll/token %.6f  ppl %.4f\n", nll, exp(nll));
    }
    if (fflush(stdout))
        rc = cli_error("error writing stdout");
done:
    qs_free(ids);
    qs_free(text);
    tokenizer_destroy(tok);
    model_free(&m);
    return rc;
}

int cmd_ppl(int argc, char **argv)
{
    const char *model = NULL, *text = NULL, *v;
    long window = -1, stride = -1;
    int bos = 0, json = 0, precision = MATMUL_FP32, rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "--bos")) {
            bos = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (cli_flag_is(a, "--model") || cli_flag_is(a, "--text") ||
                   cli_flag_is(a, "--window") || cli_flag_is(a, "--stride") ||
                   cli_flag_is(a, "--precision")) {
            if (!(v = cli_flag_value(argc, argv, &i)))
                return CLI_EXIT_USAGE;
            if (cli_flag_is(a, "--model"))
                model = v;
            else if (cli_flag_is(a, "--text"))
                text = v;
            else if (cli_flag_is(a, "--window"))
                rc = cli_parse_long("--window", v, 2, 1L << 24, &window);
            else if (cli_flag_is(a, "--stride"))
                rc = cli_parse_long("--stride", v, 1, 1L << 24, &stride);
            else if (!strcmp(v, "fp32") || !strcmp(v, "bf16"))
                precision = !strcmp(v, "bf16") ? MATMUL_BF16 : MATMUL_FP32;
            else
                rc = cli_error("--precision: expected fp32 or bf16, got '%s'", v);
        } else {
            rc = cli_error("ppl: unexpected argument '%s' (argument %d)\n%s", a, i, USAGE);
        }
    }
    if (rc)
        return rc;
    if (!model || !text)
        return cli_error("ppl: --model and --text are required\n%s", USAGE);
    return ppl_run(model, text, bos, window, stride, json, precision);
}
