/* cmd_compare.c: qatscope compare - how far a model's next-token distribution
 * is from a reference's, token by token, over the same windows.
 *
 *   qatscope compare --model A --reference B (--text FILE | --shards DIR [--split S])
 *                    [--max-tokens N] [--window N --stride S] [--bos] [--json]
 *                    [--precision P] [--reference-precision P]
 *                    [--quant-modules PATTERNS] [--quant-scaling S] [--threads N]
 *
 * Both models are loaded at once and every window runs through both; the
 * statistics are those of llama.cpp's `llama-perplexity --kl-divergence`
 * (KL(reference || model) mean, median, p99, max; top-1 agreement; the shift
 * in log-probability of the reference's top token; both perplexities), without
 * the logits file: see model_compare_compute (include/qs/model_infer.h).
 * Windows as `ppl` (HF's scheme: every token after the first scored once).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli.h"
#include "cli_model.h"
#include "qs/dataloader.h"
#include "qs/fileio.h"
#include "qs/json.h"
#include "qs/matmul.h"
#include "qs/mem.h"
#include "qs/model_infer.h"
#include "qs/tokenizer.h"

static const char USAGE[] =
    "usage: qatscope compare --model DIR --reference DIR (--text FILE | --shards DIR [--split S])\n"
    "                        [--max-tokens N] [--window N --stride S] [--bos] [--json]\n"
    "                        [--precision P] [--reference-precision P]\n"
    "                        [--quant-modules PATTERNS] [--quant-scaling current|delayed|auto]\n"
    "                        [--threads N]\n"
    "P: fp32 (default), bf16, bf16-amx (AMX CPUs), hif8 (bf16 + HiF8 W8A8 fake-quant), hif8-fp32;\n"
    "the quant options apply to the hif8 sides.  --shards: a 'qatscope tokenize --input' dir,\n"
    "split val (default) or train.  Prints KL(reference || model) mean/median/p99/max, top-1\n"
    "agreement, mean |delta log p| of the reference's top token, and both perplexities\n"
    "(README '### compare').\n";

typedef struct compare_args {
    const char *model, *reference, *text, *shards, *split, *precision, *ref_precision;
    const char *quant_modules, *quant_scaling;
    long window, stride, max_tokens, threads;
    int bos, json, scaling;
} compare_args;

/* The token ids to score: the text encoded by the model's tokenizer, or a
 * shard split's stream; at most max_tokens of them. */
static int compare_ids(const compare_args *a, const tokenizer *tok, int32_t **ids, size_t *n_ids,
                       qs_diag *d)
{
    int rc;
    if (a->text) {
        char *text = NULL;
        size_t len = 0;
        rc = fileio_read_all(a->text, &text, &len, d);
        if (!rc)
            rc = tokenizer_encode(tok, text, len, a->bos ? TOKENIZER_BOS_YES : TOKENIZER_BOS_NO,
                                  ids, n_ids, d);
        qs_free(text);
    } else {
        dataloader *dl = NULL;
        dataloader_opts o = {1, 1, 0, 0, tokenizer_vocab_size(tok)};
        rc = dataloader_create(&dl, a->shards, a->split, tokenizer_hash(tok), &o, d);
        if (!rc) {
            *n_ids = (size_t)dataloader_n_tokens(dl);
            *ids = qs_malloc(*n_ids * sizeof **ids);
            if (*ids)
                memcpy(*ids, dataloader_tokens(dl), *n_ids * sizeof **ids);
            else
                rc = diag_set(d, QS_ENOMEM, a->shards, -1, "out of memory for %zu tokens",
                              *n_ids);
        }
        dataloader_destroy(dl);
    }
    if (!rc && a->max_tokens > 0 && *n_ids > (size_t)a->max_tokens)
        *n_ids = (size_t)a->max_tokens;
    return rc;
}

static void compare_print(const compare_args *a, const cli_model *m, const cli_model *ref,
                          size_t n_ids, long window, long stride, const model_compare_result *r)
{
    const char *src = a->text ? a->text : a->shards;
    if (a->json) {
        char *qm = qs_json_quote_dup(a->model), *qr = qs_json_quote_dup(a->reference);
        char *qs = qs_json_quote_dup(src), *qdm = qs_json_quote_dup(m->desc);
        char *qdr = qs_json_quote_dup(ref->desc);
        char split[96] = "null";
        if (a->shards)
            snprintf(split, sizeof split, "\"%s\"", a->split);
        if (qm && qr && qs && qdm && qdr)
            printf("{\"model\": %s, \"reference\": %s, \"model_precision\": %s, "
                   "\"reference_precision\": %s, \"%s\": %s, \"split\": %s, \"tokens\": %zu, "
                   "\"scored\": %zu, \"windows\": %zu, \"window\": %ld, \"stride\": %ld, "
                   "\"bos\": %s, \"kl_mean\": %.9g, \"kl_stderr\": %.9g, \"kl_median\": %.9g, "
                   "\"kl_p99\": %.9g, \"kl_max\": %.9g, \"top1_agree\": %.9g, "
                   "\"top1_agree_stderr\": %.9g, \"dlogp_mean\": %.9g, \"nll\": %.9g, "
                   "\"nll_reference\": %.9g, \"ppl\": %.9g, \"ppl_reference\": %.9g}\n",
                   qm, qr, qdm, qdr, a->text ? "text" : "shards", qs, split, n_ids, r->n_scored,
                   r->n_windows, window, stride, a->bos ? "true" : "false", r->kl_mean,
                   isnan(r->kl_stderr) ? 0.0 : r->kl_stderr, r->kl_median, r->kl_p99, r->kl_max,
                   r->top1_agree, isnan(r->top1_stderr) ? 0.0 : r->top1_stderr, r->dlogp_mean,
                   r->nll, r->nll_ref, exp(r->nll), exp(r->nll_ref));
        qs_free(qm);
        qs_free(qr);
        qs_free(qs);
        qs_free(qdm);
        qs_free(qdr);
        return;
    }
    printf("%s%s%s: %zu tokens, %zu scored in %zu windows (window %ld, stride %ld)\n", src,
           a->shards ? " split " : "", a->shards ? a->split : "", n_ids, r->n_scored,
           r->n_windows, window, stride);
    printf("model      %s (%s)\n", a->model, m->desc);
    printf("reference  %s (%s)\n", a->reference, ref->desc);
    printf("%-34s %.6f (reference %.6f)\n", "perplexity", exp(r->nll), exp(r->nll_ref));
    printf("%-34s %+.6f\n", "ln(ppl / ppl reference)", r->nll - r->nll_ref);
    printf("%-34s %.6f ± %.6f\n", "KL(reference || model) mean", r->kl_mean,
           isnan(r->kl_stderr) ? 0.0 : r->kl_stderr);
    printf("%-34s %.6f\n", "KL median", r->kl_median);
    printf("%-34s %.6f\n", "KL 99th percentile", r->kl_p99);
    printf("%-34s %.6f\n", "KL maximum", r->kl_max);
    printf("%-34s %.3f ± %.3f %%\n", "top-1 agreement", 100.0 * r->top1_agree,
           100.0 * (isnan(r->top1_stderr) ? 0.0 : r->top1_stderr));
    printf("%-34s %.6f\n", "mean |delta log p| (ref top token)", r->dlogp_mean);
}

static int compare_run(const compare_args *a)
{
    qs_diag d = {0};
    cli_model m, ref;
    memset(&m, 0, sizeof m);
    memset(&ref, 0, sizeof ref);
    tokenizer *tok = NULL, *tok_ref = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = 0;
    if (tokenizer_create(&tok, a->model, &d) || tokenizer_create(&tok_ref, a->reference, &d)) {
        rc = cli_diag_error(&d);
        goto done;
    }
    if (tokenizer_hash(tok) != tokenizer_hash(tok_ref)) {
        rc = cli_error("compare: %s and %s have different tokenizers (the same ids would mean "
                       "different text)", a->model, a->reference);
        goto done;
    }
    if (compare_ids(a, tok, &ids, &n_ids, &d) ||
        cli_model_open(&m, a->model, a->precision, a->quant_modules, a->scaling, &d) ||
        cli_model_open(&ref, a->reference, a->ref_precision, a->quant_modules, a->scaling, &d)) {
        rc = cli_diag_error(&d);
        goto done;
    }
    if (m.m.cfg.vocab_size != ref.m.cfg.vocab_size) {
        rc = cli_error("compare: %s has %d vocabulary entries, %s has %d", a->model,
                       m.m.cfg.vocab_size, a->reference, ref.m.cfg.vocab_size);
        goto done;
    }
    if (cli_tokenizer_fits(tok, &m.m.cfg, a->model, &d)) {   /* the same tokenizer: ref alike */
        rc = cli_diag_error(&d);
        goto done;
    }
    int ctx = hfconfig_max_context(&m.m.cfg), ctx_ref = hfconfig_max_context(&ref.m.cfg);
    ctx = ctx < ctx_ref ? ctx : ctx_ref;
    long window = a->window, stride = a->stride;
    if (window < 0) {   /* ppl's default window, on the smaller of both contexts */
        int wa = model_ppl_window_default(&m.m.cfg), wb = model_ppl_window_default(&ref.m.cfg);
        window = wa < wb ? wa : wb;
    }
    if (window > ctx) {
        rc = cli_error("--window: %ld exceeds the context of %d (the smaller of both models)",
                       window, ctx);
        goto done;
    }
    if (stride < 0)
        stride = window / 2 > 0 ? window / 2 : 1;
    if (stride > window) {
        rc = cli_error("--stride: %ld exceeds --window %ld", stride, window);
        goto done;
    }
    if (n_ids < 2) {
        rc = cli_error("%s: %zu tokens to score, need at least 2", a->text ? a->text : a->shards,
                       n_ids);
        goto done;
    }
    model_compare_result r;
    if (model_compare_compute(&m.m, &ref.m, ids, n_ids, (int)window, (int)stride, NULL, &r, &d)) {
        if (!d.path[0] && d.code != QS_ENOMEM) /* the side that failed */
            snprintf(d.path, sizeof d.path, "%s",
                     strstr(d.msg, "(--reference)") ? a->reference : a->model);
        rc = cli_diag_error(&d);
        goto done;
    }
    compare_print(a, &m, &ref, n_ids, window, stride, &r);
    if (fflush(stdout))
        rc = CLI_EXIT_USAGE;   /* main() names the error */
done:
    qs_free(ids);
    tokenizer_destroy(tok);
    tokenizer_destroy(tok_ref);
    cli_model_close(&m);
    cli_model_close(&ref);
    return rc;
}

int cmd_compare(int argc, char **argv)
{
    compare_args a = {0};
    a.split = "val";
    a.precision = a.ref_precision = "fp32";
    a.window = a.stride = -1;
    const cli_opt opts[] = {
        {"--model", CLI_OPT_STR, .out = &a.model},
        {"--reference", CLI_OPT_STR, .out = &a.reference},
        {"--text", CLI_OPT_STR, .out = &a.text},
        {"--shards", CLI_OPT_STR, .out = &a.shards},
        {"--split", CLI_OPT_STR, .out = &a.split},
        {"--max-tokens", CLI_OPT_LONG, .out = &a.max_tokens, .min = 2, .max = 1L << 40},
        {"--window", CLI_OPT_LONG, .out = &a.window, .min = 2, .max = 1L << 24},
        {"--stride", CLI_OPT_LONG, .out = &a.stride, .min = 1, .max = 1L << 24},
        {"--precision", CLI_OPT_STR, .out = &a.precision},
        {"--reference-precision", CLI_OPT_STR, .out = &a.ref_precision},
        {"--quant-modules", CLI_OPT_STR, .out = &a.quant_modules},
        {"--quant-scaling", CLI_OPT_STR, .out = &a.quant_scaling},
        {"--threads", CLI_OPT_LONG, .out = &a.threads, .min = 1, .max = 1024},
        {"--bos", CLI_OPT_SWITCH, .out = &a.bos},
        {"--json", CLI_OPT_SWITCH, .out = &a.json},
    };
    int rc = cli_args_parse("compare", USAGE, argc, argv, opts, sizeof opts / sizeof *opts, NULL,
                            NULL);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (a.text && a.shards)
        return cli_error("compare: --text and --shards exclude each other: give one");
    if (!a.model || !a.reference || !a.text == !a.shards)
        return cli_error("compare: --model, --reference and one of --text or --shards are "
                         "required; see 'qatscope compare --help'");
    if (a.bos && !a.text)
        return cli_error("--bos: only with --text (shards hold their ids as tokenized)");
    if (strcmp(a.split, "val") && strcmp(a.split, "train"))
        return cli_error("--split: expected val or train, got '%s'", a.split);
    qs_diag d = {0};
    int mm, hif8, hif8_ref;
    if (cli_precision_parse(a.precision, "--precision", &mm, &hif8, &d) ||
        cli_precision_parse(a.ref_precision, "--reference-precision", &mm, &hif8_ref, &d))
        return cli_diag_error(&d);
    if ((a.quant_modules || a.quant_scaling) && !hif8 && !hif8_ref)
        return cli_error("%s: only with a hif8 precision (--precision or --reference-precision)",
                         a.quant_modules ? "--quant-modules" : "--quant-scaling");
    a.scaling = EVALQUANT_AUTO;
    if (a.quant_scaling && evalquant_scaling_parse(a.quant_scaling, &a.scaling, &d))
        return cli_diag_error(&d);
#ifdef _OPENMP
    if (a.threads)
        omp_set_num_threads((int)a.threads);
#endif
    return compare_run(&a);
}
